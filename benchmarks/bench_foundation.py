"""Foundation benchmark: the default `dataclean run` (normalize + exact dedup) against a bare pyarrow copy.

In ONE invocation, for N repetitions, alternately runs (each as a subprocess, measured by
:func:`_measure.measure`: wall time, peak Rss/Pss summed over the whole process tree):

  dataclean  ``dataclean run <inputs> -o <tmp> --workers W --quiet --fresh``
  baseline   a bare pyarrow read + write of the same shards: each shard's columns read with
             ``pyarrow.parquet.read_table`` and written as zstd (level 3, row groups of 8,192 rows — the
             settings of dataclean's writer) Parquet to a temporary folder, one shard per task in a
             ``multiprocessing`` pool of W spawned worker processes (dataclean's pool also spawns).

The order alternates per repetition (dataclean first, then baseline first, ...) so that neither side
always runs right after the other. Prints docs/s, MB/s (MB of text / wall s), median wall s and peak
memory (max over repetitions) per side, and dataclean/baseline ratios; writes everything, per repetition,
to ``benchmarks/results/foundation.json``.

    python benchmarks/bench_foundation.py                      # 12 bench shards, 3 reps, 2 workers
    python benchmarks/bench_foundation.py --limit-shards 2 --reps 1   # quick check
"""
from __future__ import annotations

import argparse
import datetime as _dt
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_CORPUS = os.path.normpath(os.path.join(REPO, "..", "shared", "corpus", "bench"))
DEFAULT_JSON = os.path.join(HERE, "results", "foundation.json")
BASELINE_PARQUET = dict(compression="zstd", compression_level=3)
BASELINE_ROW_GROUP = 8192


# ---------------------------------------------------------------------------------------------------------
# baseline subprocess:  python bench_foundation.py _baseline --workers W OUT FILE...
# ---------------------------------------------------------------------------------------------------------

def _copy_shard(job: tuple[str, str]) -> int:
    import pyarrow.parquet as pq

    src, dst = job
    table = pq.read_table(src)
    pq.write_table(table, dst, row_group_size=BASELINE_ROW_GROUP, **BASELINE_PARQUET)
    return table.num_rows


def _baseline_main(argv: list[str]) -> int:
    import multiprocessing

    ap = argparse.ArgumentParser(prog="bench_foundation.py _baseline")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("out")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args(argv)
    os.makedirs(a.out, exist_ok=True)
    jobs = [(f, os.path.join(a.out, os.path.basename(f))) for f in a.files]
    with multiprocessing.get_context("spawn").Pool(a.workers) as pool:
        rows = sum(pool.imap_unordered(_copy_shard, jobs, chunksize=1))
    print(f"{rows} rows copied")
    return 0


# ---------------------------------------------------------------------------------------------------------
# driver
# ---------------------------------------------------------------------------------------------------------

def _dataclean_cmd() -> list[str]:
    """The ``dataclean`` script of this interpreter's environment (what a user of a virtualenv runs), else the
    one on PATH, else ``python -m dataclean.cli``. The script next to ``sys.executable`` comes first: on PATH
    there may be a version manager's shim instead (pyenv's runs bash and pyenv before Python: +0.04 s a run)."""
    here = os.path.join(os.path.dirname(sys.executable), "dataclean")
    exe = here if os.path.isfile(here) and os.access(here, os.X_OK) else shutil.which("dataclean")
    return [exe] if exe else [sys.executable, "-m", "dataclean.cli"]


def compile_bytecode() -> None:
    """Write the bytecode of the dataclean package, as ``pip install`` of a wheel does: an editable install under
    ``PYTHONDONTWRITEBYTECODE=1`` (set on the reference machine) would compile every module from source in each
    process of each run (~0.05 s in the driver and again in the workers' fork server), where an installed
    datatrove loads its bytecode. Done once before the timed runs, not inside one."""
    import compileall

    import dataclean

    compileall.compile_dir(os.path.dirname(dataclean.__file__), quiet=1)


def _git(*args: str) -> str | None:
    try:
        return subprocess.run(["git", "-C", REPO, *args], capture_output=True, text=True, check=True).stdout.rstrip()
    except (OSError, subprocess.CalledProcessError):
        return None


def _machine() -> dict:
    import pyarrow

    info = {"nproc": os.cpu_count(), "nproc_usable": len(os.sched_getaffinity(0)),
            "python": platform.python_version(), "pyarrow": pyarrow.__version__,
            "platform": platform.platform(), "cpu": None, "mem_total_mib": None}
    try:
        from importlib.metadata import version
        info["dataclean"] = version("dataclean")
    except Exception:  # noqa: BLE001
        info["dataclean"] = None
    try:
        import duckdb
        info["duckdb"] = duckdb.__version__
    except Exception:  # noqa: BLE001
        pass
    try:
        with open("/proc/cpuinfo") as fh:
            for line in fh:
                if line.startswith("model name"):
                    info["cpu"] = line.split(":", 1)[1].strip()
                    break
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemTotal:"):
                    info["mem_total_mib"] = round(int(line.split()[1]) / 1024)
                    break
    except OSError:
        pass
    info["git_commit"] = _git("rev-parse", "HEAD")
    status = _git("status", "--porcelain", "--untracked-files=no")
    info["git_dirty"] = bool(status) if status is not None else None
    info["git_modified"] = [ln[3:] for ln in status.splitlines()] if status else []
    info["loadavg_1_5_15"] = list(os.getloadavg())
    return info


_SUMMARY_RE = re.compile(r"(\d+) records in: (\d+) kept, (\d+) removed")


def _side_summary(name: str, runs: list, stats) -> dict:
    from _measure import median

    ok = [r for r in runs if r.returncode == 0]
    walls = [r.wall_s for r in ok]
    wall = median(walls) if walls else float("nan")
    return {
        "name": name,
        "reps_ok": len(ok),
        "reps": len(runs),
        "wall_s_median": wall,
        "wall_s_min": min(walls) if walls else float("nan"),
        "wall_s_max": max(walls) if walls else float("nan"),
        "docs_per_s": stats.docs / wall if walls else float("nan"),
        "mb_per_s": stats.text_mb / wall if walls else float("nan"),
        "peak_rss_mib_max": max((r.peak_rss_mib for r in runs), default=float("nan")),
        "peak_pss_mib_max": max((r.peak_pss_mib for r in runs), default=float("nan")),
        "maxrss_single_mib_max": max((r.maxrss_single_mib for r in runs), default=float("nan")),
        "cpu_s_median": median([r.user_s + r.sys_s for r in ok]) if ok else float("nan"),
    }


SIDE_BY_SIDE_ROWS = [
    ("docs/s", "{:,.0f}", "docs_per_s"),
    ("MB/s (text)", "{:,.3f}", "mb_per_s"),
    ("wall s (median)", "{:.2f}", "wall_s_median"),
    ("CPU s (median)", "{:.2f}", "cpu_s_median"),
    ("peak RSS MiB (tree, max)", "{:,.0f}", "peak_rss_mib_max"),
    ("peak PSS MiB (tree, max)", "{:,.0f}", "peak_pss_mib_max"),
]
LABEL_WIDTH = max(len(r[0]) for r in SIDE_BY_SIDE_ROWS)  # of the first column, for rows a caller appends


def side_by_side(header: str | None, dc: dict, other: dict, name: str, ratio_label: str) -> list[str]:
    """The header and the dataclean | other | ratio rows of every comparison table (foundation, rules,
    dedup): docs/s, MB/s, median wall and CPU s, peak RSS and PSS of the process tree."""
    rows, w0 = SIDE_BY_SIDE_ROWS, LABEL_WIDTH
    out = [header] if header is not None else []
    out += [f"{'':<{w0}}  {'dataclean':>12}  {name:>12}  {ratio_label:>8}",
            f"{'-' * w0}  {'-' * 12}  {'-' * 12}  {'-' * 8}"]
    for label, fmt, key in rows:
        out.append(f"{label:<{w0}}  {fmt.format(dc[key]):>12}  {fmt.format(other[key]):>12}  "
                   f"{_ratio(dc[key], other[key]):>8.2f}")
    return out


def _fmt_table(stats, dc: dict, bl: dict, paired_ratio: float) -> str:
    out = side_by_side(None, dc, bl, "baseline", "dc/base")
    out.append(f"(median of per-rep wall ratios dataclean/baseline: {paired_ratio:.2f}; "
               f"reps ok: dataclean {dc['reps_ok']}/{dc['reps']}, baseline {bl['reps_ok']}/{bl['reps']})")
    return "\n".join(out)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if argv[:1] == ["_baseline"]:
        return _baseline_main(argv[1:])

    sys.path.insert(0, HERE)
    from _measure import measure, median, parquet_inputs

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default=DEFAULT_CORPUS, help=f"folder of part-*.parquet (default {DEFAULT_CORPUS})")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of each side (default 3)")
    ap.add_argument("--workers", type=int, default=2, help="worker processes for both sides (default 2)")
    ap.add_argument("--limit-shards", type=int, default=None, metavar="K", help="use only the first K shards")
    ap.add_argument("--tmp", default=None, help="folder for the outputs (default: a new temporary folder)")
    ap.add_argument("--json", default=DEFAULT_JSON, help=f"where to write the results (default {DEFAULT_JSON})")
    ap.add_argument("--interval", type=float, default=0.02, help="memory sampling interval, s (default 0.02)")
    ap.add_argument("--config", default=os.path.join(HERE, "configs", "foundation.yaml"),
                    help="dataclean config (default benchmarks/configs/foundation.yaml: normalize + exact dedup; "
                         "pass rules/default.yaml for the full default pipeline)")
    a = ap.parse_args(argv)

    files = sorted(glob.glob(os.path.join(a.corpus, "*.parquet")))
    if a.limit_shards:
        files = files[:a.limit_shards]
    if not files:
        print(f"error: no .parquet files in {a.corpus}", file=sys.stderr)
        return 2
    load_before = list(os.getloadavg())
    stats = parquet_inputs(files)  # also warms the page cache for both sides
    compile_bytecode()
    print(f"inputs: {stats.files} shards of {a.corpus}: {stats.docs:,} docs, {stats.text_mb:.2f} MB text, "
          f"{stats.file_bytes / 2**20:.1f} MiB on disk; {a.reps} reps, {a.workers} workers", flush=True)

    tmp_root = tempfile.mkdtemp(prefix="dataclean-bench-", dir=a.tmp)
    dc_out, bl_out = os.path.join(tmp_root, "dataclean"), os.path.join(tmp_root, "baseline")
    dc_cmd = _dataclean_cmd() + ["run", *files, "-o", dc_out, "--workers", str(a.workers), "--quiet", "--fresh",
                                 "--config", a.config]
    bl_cmd = [sys.executable, os.path.abspath(__file__), "_baseline", "--workers", str(a.workers), bl_out, *files]
    runs: dict[str, list] = {"dataclean": [], "baseline": []}
    problems: list[str] = []

    def run_side(name: str, rep: int) -> None:
        if name == "baseline":
            shutil.rmtree(bl_out, ignore_errors=True)  # dataclean cleans its own folder with --fresh
        m = measure(dc_cmd if name == "dataclean" else bl_cmd, cwd=REPO, interval=a.interval)
        if name == "dataclean":
            hit = _SUMMARY_RE.search(m.stdout)
            if hit:
                m.extra = {"records_in": int(hit[1]), "kept": int(hit[2]), "removed": int(hit[3])}
                if m.extra["records_in"] != stats.docs:
                    problems.append(f"rep {rep}: dataclean read {m.extra['records_in']} records, "
                                    f"inputs hold {stats.docs}")
            else:
                problems.append(f"rep {rep}: dataclean printed no summary line")
            m.extra["output_bytes"] = _du(dc_out)
        else:
            m.extra = {"output_bytes": _du(bl_out)}
        if m.returncode != 0:
            problems.append(f"rep {rep}: {name} exited {m.returncode}: {m.stderr.strip()[-2000:]}")
        runs[name].append(m)
        print(f"  rep {rep} {name:<9} wall {m.wall_s:7.2f} s  peak RSS {m.peak_rss_mib:7.0f} MiB  "
              f"PSS {m.peak_pss_mib:7.0f} MiB  procs {m.peak_procs}  rc {m.returncode}", flush=True)

    try:
        for rep in range(a.reps):
            order = ["dataclean", "baseline"] if rep % 2 == 0 else ["baseline", "dataclean"]
            for name in order:
                run_side(name, rep)
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)

    dc = _side_summary("dataclean", runs["dataclean"], stats)
    bl = _side_summary("baseline", runs["baseline"], stats)
    per_rep = [d.wall_s / b.wall_s for d, b in zip(runs["dataclean"], runs["baseline"])
               if d.returncode == 0 and b.returncode == 0]
    paired = median(per_rep) if per_rep else float("nan")
    table = _fmt_table(stats, dc, bl, paired)
    print()
    print(table)
    for p in problems:
        print(f"PROBLEM: {p}", file=sys.stderr)

    result = {
        "benchmark": "foundation",
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["python", os.path.relpath(os.path.abspath(__file__), REPO), *argv]),
        "machine": dict(_machine(), loadavg_before=load_before),
        "settings": {"corpus": os.path.abspath(a.corpus), "files": [os.path.basename(f) for f in files],
                     "reps": a.reps, "workers": a.workers, "sample_interval_s": a.interval,
                     "dataclean_cmd": [os.path.basename(dc_cmd[0]), *dc_cmd[1:2], "<inputs>", "-o", "<tmp>",
                                       "--workers", str(a.workers), "--quiet", "--fresh"],
                     "baseline": f"pyarrow read_table + write_table zstd level 3, row groups "
                                 f"{BASELINE_ROW_GROUP}, multiprocessing spawn Pool({a.workers}), one shard per task"},
        "inputs": {"files": stats.files, "docs": stats.docs, "text_bytes": stats.text_bytes,
                   "text_mb": round(stats.text_mb, 3), "file_bytes": stats.file_bytes},
        "summary": {"dataclean": dc, "baseline": bl,
                    "ratio_dataclean_over_baseline": {
                        "wall_s_median": _ratio(dc["wall_s_median"], bl["wall_s_median"]),
                        "wall_s_paired_median": paired,
                        "docs_per_s": _ratio(dc["docs_per_s"], bl["docs_per_s"]),
                        "cpu_s_median": _ratio(dc["cpu_s_median"], bl["cpu_s_median"]),
                        "peak_rss_mib_max": _ratio(dc["peak_rss_mib_max"], bl["peak_rss_mib_max"]),
                        "peak_pss_mib_max": _ratio(dc["peak_pss_mib_max"], bl["peak_pss_mib_max"])}},
        "runs": {k: [dict(m.as_dict(), rep=i) for i, m in enumerate(v)] for k, v in runs.items()},
        "problems": problems,
        "table": table,
    }
    for side in result["runs"].values():  # absolute temp paths and file lists only bloat the JSON
        for r in side:
            r["cmd"] = [os.path.basename(r["cmd"][0]), r["cmd"][1], "..."]
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    with open(a.json, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2, ensure_ascii=False)
        fh.write("\n")
    print(f"\nresults: {os.path.abspath(a.json)}")
    ok = all(m.returncode == 0 for v in runs.values() for m in v) and not problems
    return 0 if ok else 1


def _ratio(a: float, b: float) -> float:
    return a / b if b else float("nan")


def _du(path: str) -> int:
    total = 0
    for root, _, names in os.walk(path):
        for n in names:
            try:
                total += os.path.getsize(os.path.join(root, n))
            except OSError:
                pass
    return total


if __name__ == "__main__":
    sys.exit(main())
