"""One memory budget (issue 20 item 6): peak RSS of the whole process tree under ``--memory-limit``, and the
global step's time per document, from 1M to 10M documents.

The corpus is the bench corpus tiled by ``bench_dedup.make_tiles`` with ``generations``: families of
``--copies`` documents (an original and its lightly edited copies), and beyond the bench corpus's 258,156
originals new generations of originals (each a bench document with 30-40% of its words replaced), so that the
dedup work per document is the same at every size. Each size is run once per budget with

    dataclean run <tiles> -o <out> --workers 2 --config benchmarks/configs/dedup.yaml \\
        --memory-limit BUDGET --set global.duckdb_memory_limit=auto

(normalize, exact dedup, MinHash dedup: the pipeline whose global step grows with the corpus; the config's
explicit 1GB DuckDB limit is set back to ``auto`` so that it is derived from the budget). The process tree's
RSS is sampled every ``--interval`` s (the sum over the driver, the fork server and the workers).

    python benchmarks/bench_memory.py                                  # 1M and 3.1M at 2GB, 10M at 4GB (~25 min)
    python benchmarks/bench_memory.py --runs 1000000:2GB --tmp /tmp/dm  # one size
    python benchmarks/bench_memory.py --runs 3100000:2GB,3100000:auto   # with and without a budget

Tiles are kept in ``--tmp`` (``tiles-N-kK``) and reused by the next invocation; ``--drop-tiles`` removes them.
Results: ``results/memory.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from _measure import measure  # noqa: E402  (same folder)
from bench_dedup import DEFAULT_CONFIG, DEFAULT_CORPUS, _dataclean_counts, make_tiles  # noqa: E402
from bench_foundation import _dataclean_cmd, _machine, compile_bytecode  # noqa: E402

JSON_OUT = os.path.join(HERE, "results", "memory.json")
DEFAULT_RUNS = "1000000:2GB,3100000:2GB,10000000:4GB"
GOALS = {"2GB": 2.2e9, "4GB": 4.4e9}  # the bounds on the peak (bytes) for each budget


def tiles_for(tmp: str, size: int, copies: int, workers: int) -> tuple[str, dict]:
    folder = os.path.join(tmp, f"tiles-{size}-k{copies}")
    info_path = folder + ".json"  # (beside the tiles, not among them: dataclean would read it as an input)
    if os.path.isfile(info_path):
        with open(info_path, encoding="utf-8") as fh:
            return folder, json.load(fh)
    shutil.rmtree(folder, ignore_errors=True)
    print(f"tiling {size:,} documents ...", flush=True)
    info = make_tiles(DEFAULT_CORPUS, size, copies, folder, workers, False, generations=True)
    info = {k: v for k, v in info.items() if k != "files"}
    with open(info_path, "w", encoding="utf-8") as fh:
        json.dump(info, fh)
    return folder, info


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", default=DEFAULT_RUNS, help=f"SIZE:BUDGET,... (default {DEFAULT_RUNS})")
    ap.add_argument("--copies", type=int, default=4, help="documents per family (default 4)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--interval", type=float, default=0.05, help="memory sampling interval, s (default 0.05)")
    ap.add_argument("--tmp", default=None, help="folder for the tiles and outputs (default: a new temporary folder)")
    ap.add_argument("--drop-tiles", action="store_true", help="remove the tiles at the end")
    ap.add_argument("--json", default=JSON_OUT)
    a = ap.parse_args(argv)
    tmp = a.tmp or tempfile.mkdtemp(prefix="dataclean-bench-memory-")
    os.makedirs(tmp, exist_ok=True)
    compile_bytecode()
    rows, problems = [], []
    for item in a.runs.split(","):
        size_s, budget = item.split(":")
        size = int(size_s)
        tiles, info = tiles_for(tmp, size, a.copies, a.workers)
        out = os.path.join(tmp, f"out-{size}")
        cmd = _dataclean_cmd() + ["run", tiles, "-o", out, "--workers", str(a.workers), "--quiet", "--fresh",
                                  "--config", DEFAULT_CONFIG, "--memory-limit", budget,
                                  "--set", "global.duckdb_memory_limit=auto"]
        os.sync()
        m = measure(cmd, cwd=REPO, interval=a.interval)
        row = {"docs": info["docs"], "text_mb": info["text_mb"], "budget": budget, "returncode": m.returncode,
               "wall_s": round(m.wall_s, 2), "cpu_s": round(m.user_s + m.sys_s, 2),
               "peak_rss_mib": round(m.peak_rss_mib), "peak_rss_bytes": int(m.peak_rss_mib * 2**20),
               "peak_pss_mib": round(m.peak_pss_mib), "largest_process_mib": round(m.maxrss_single_mib),
               "loadavg_after": list(os.getloadavg())}
        if m.returncode != 0:
            problems.append(f"{size:,} at {budget}: exit {m.returncode}: {m.stderr.strip()[-1500:]}")
        else:
            c = _dataclean_counts(out)
            t = c["timings_seconds"]
            row.update({"kept": c["kept"], "removed": c["removed"], "conservation_ok": c["conservation_ok"],
                        "phases_s": t, "global_us_per_doc": round(t.get("global", 0) / info["docs"] * 1e6, 2),
                        "near_duplicate": c["near_duplicate"], "exact_duplicate": c["exact_duplicate"]})
            goal = GOALS.get(budget.upper())
            if goal is not None:
                row["goal_peak_bytes"] = goal
                row["within_goal"] = row["peak_rss_bytes"] <= goal
        shutil.rmtree(out, ignore_errors=True)
        rows.append(row)
        print(f"{row['docs']:>11,} docs  budget {budget:>5}  wall {row['wall_s']:7.1f} s  peak RSS "
              f"{row['peak_rss_mib']:6,} MiB ({row['peak_rss_bytes'] / 1e9:.2f} GB)  global "
              f"{row.get('global_us_per_doc', float('nan')):.1f} us/doc  phases {row.get('phases_s')}", flush=True)
    if a.drop_tiles:
        shutil.rmtree(tmp, ignore_errors=True)
    base = next((r for r in rows if r.get("global_us_per_doc")), None)
    for r in rows:
        if base and r.get("global_us_per_doc"):
            r["global_per_doc_vs_first"] = round(r["global_us_per_doc"] / base["global_us_per_doc"], 3)
    result = {"machine": _machine(), "runs": rows, "problems": problems, "copies": a.copies, "workers": a.workers}
    os.makedirs(os.path.dirname(a.json), exist_ok=True)
    with open(a.json, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=1)
    print(f"\nresults: {a.json}")
    for p in problems:
        print("problem:", p)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
