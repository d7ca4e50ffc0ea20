"""One large Parquet or JSON Lines file: ``--workers 1`` against ``--workers 2`` (issue 20 item 3).

The 12 bench shards are concatenated into one Parquet file (row groups of ``--row-group-rows``, 16,384 by
default: ~13 MB of text each), or with ``--format jsonl`` into one JSON Lines file (DuckDB's ``COPY ... (FORMAT
JSON)``, every column), written once into the temp folder. For JSON Lines the planning scan
(``dataclean.io.pieces.jsonl_pieces``) is also timed on its own, median of 3. Then, alternating repetition by
repetition, in one invocation: ``dataclean run BIG -o OUT --workers W --fresh`` (default pipeline, no report)
for W = 1 and 2, and the same with ``input.split_mb=0`` (one task for the file, as before splitting) at
W = 2. Wall time and CPU time (user + sys of the process tree) are medians; peak memory is not sampled
(the sampler costs a 2-core machine ~20% of its time, see _measure.py). The outputs of the split and unsplit
runs are checked byte-identical (data/, rejected/, dedup/, stats/).

    python benchmarks/bench_split.py [--reps 3] [--json benchmarks/results/split.json]
    python benchmarks/bench_split.py --format jsonl --json benchmarks/results/split_jsonl.json
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

sys.path.insert(0, os.path.dirname(__file__))
from _measure import measure, median  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def product_digest(out: str) -> str:
    h = hashlib.sha256()
    for sub in ("data", "rejected", "dedup", "stats"):
        for root, dirs, files in os.walk(os.path.join(out, sub)):
            dirs.sort()
            for f in sorted(files):
                path = os.path.join(root, f)
                h.update(os.path.relpath(path, out).encode())
                with open(path, "rb") as fh:
                    h.update(fh.read())
    return h.hexdigest()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default=os.path.join(REPO, "..", "shared", "corpus", "bench"))
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--row-group-rows", type=int, default=16_384)
    ap.add_argument("--split-mb", type=int, default=None, help="input.split_mb of the split sides (default: the config's)")
    ap.add_argument("--format", choices=("parquet", "jsonl"), default="parquet")
    ap.add_argument("--tmp", default=None)
    ap.add_argument("--json", default=os.path.join(REPO, "benchmarks", "results", "split.json"))
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="bench_split-", dir=args.tmp)
    try:
        shards = sorted(os.path.join(args.corpus, f) for f in os.listdir(args.corpus) if f.endswith(".parquet"))
        big = os.path.join(tmp, "bench-all.parquet")
        table = pa.concat_tables([pq.read_table(s) for s in shards])
        pq.write_table(table, big, row_group_size=args.row_group_rows, compression="zstd")
        docs, text_mb = table.num_rows, pc.sum(pc.binary_length(table.column("text"))).as_py() / 1e6
        del table
        plan: dict = {}
        if args.format == "jsonl":
            import duckdb

            from dataclean.config import resolve_config
            from dataclean.io.pieces import jsonl_pieces
            from dataclean.io.readers import MAX_CHUNK_TEXT_BYTES
            from dataclean.sections import InputSection

            parquet, big = big, os.path.join(tmp, "bench-all.jsonl")
            duckdb.sql(f"COPY (SELECT * FROM read_parquet('{parquet}')) TO '{big}' (FORMAT JSON)")
            os.unlink(parquet)
            cfg = resolve_config({"input": {"split_mb": args.split_mb}} if args.split_mb is not None else {})
            inp = InputSection.of(cfg)
            times = []
            for _ in range(3):
                t0 = time.perf_counter()
                pieces = jsonl_pieces(big, inp.split_bytes, inp.batch_rows, MAX_CHUNK_TEXT_BYTES, inp.max_record_bytes)
                times.append(time.perf_counter() - t0)
            size = os.path.getsize(big)
            plan = {"file_mb": round(size / 1e6, 1), "pieces": len(pieces or [None]),
                    "plan_s": round(median(times), 3), "plan_mb_per_s": round(size / 1e6 / median(times))}
            print("plan", plan, flush=True)
        split = ["--set", f"input.split_mb={args.split_mb}"] if args.split_mb is not None else []
        sides = {"workers 1": ["--workers", "1", *split], "workers 2": ["--workers", "2", *split],
                 "workers 2, split_mb=0": ["--workers", "2", "--set", "input.split_mb=0"]}
        runs: dict[str, list] = {name: [] for name in sides}
        digests = {}
        for rep in range(args.reps):
            for name, extra in sides.items():
                out = os.path.join(tmp, "out")
                shutil.rmtree(out, ignore_errors=True)
                m = measure([sys.executable, "-m", "dataclean", "run", big, "-o", out, "--quiet", "--fresh",
                             "--set", "output.report=false", *extra], cwd=REPO, interval=None)
                if m.returncode != 0:
                    raise SystemExit(f"{name}: exit {m.returncode}\n{m.stderr[-2000:]}")
                runs[name].append({"wall_s": round(m.wall_s, 2), "cpu_s": round(m.user_s + m.sys_s, 2)})
                if rep == 0:
                    digests[name] = product_digest(out)
                    with open(os.path.join(out, "manifest.json"), encoding="utf-8") as fh:
                        tasks = len(json.load(fh)["inputs"])
                    print(name, "inputs in manifest:", tasks, flush=True)
                print(name, runs[name][-1], flush=True)
        result = {"format": args.format, "split_mb": args.split_mb, "plan": plan, "docs": docs, "text_mb": round(text_mb, 1), "row_group_rows": args.row_group_rows,
                  "reps": args.reps, "load_1min_at_end": os.getloadavg()[0], "runs": runs,
                  "median": {n: {k: median([r[k] for r in rs]) for k in ("wall_s", "cpu_s")} for n, rs in runs.items()},
                  "identical_outputs": len(set(digests.values())) == 1}
        w1, w2 = result["median"]["workers 1"]["wall_s"], result["median"]["workers 2"]["wall_s"]
        result["speedup_workers_2_over_1"] = round(w1 / w2, 2)
        result["docs_per_s"] = {n: round(docs / v["wall_s"]) for n, v in result["median"].items()}
        print(json.dumps({k: v for k, v in result.items() if k != "runs"}, indent=1))
        with open(args.json, "w") as fh:
            json.dump(result, fh, indent=1)
            fh.write("\n")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
