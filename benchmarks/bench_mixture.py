"""Mixture benchmark: the default pipeline on bench shards with and without a mixture recipe.

In ONE invocation, for N repetitions, alternately runs (subprocesses measured by :func:`_measure.measure`)

  plain    ``dataclean run SHARDS -o TMP --workers W --quiet``
  mixture  the same with ``--mixture RECIPE`` (default: rules/mixtures/bench.yaml)

and prints the mixture's target-vs-achieved table (stats/mixture.parquet of the last mixture run), the
wall time of both and the time of the global step (manifest timings), so the cost of the sampler is the
difference. Writes ``benchmarks/results/mixture.json``.

    python benchmarks/bench_mixture.py                   # shards 0-2, 2 reps, 2 workers
    python benchmarks/bench_mixture.py --shards 1 --reps 1
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from _measure import measure, median, parquet_inputs  # noqa: E402

DEFAULT_CORPUS = os.path.normpath(os.path.join(REPO, "..", "shared", "corpus", "bench"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=DEFAULT_CORPUS)
    ap.add_argument("--shards", type=int, default=3)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--recipe", default=os.path.join(REPO, "rules", "mixtures", "bench.yaml"))
    ap.add_argument("--json", default=os.path.join(HERE, "results", "mixture.json"))
    args = ap.parse_args()

    import pyarrow.parquet as pq

    shards = sorted(glob.glob(os.path.join(args.corpus, "*.parquet")))[:args.shards]
    inputs = parquet_inputs(shards)
    tmp = tempfile.mkdtemp(prefix="bench_mixture_")
    runs = {"plain": [], "mixture": []}
    table = None
    try:
        for rep in range(args.reps):
            order = ["plain", "mixture"] if rep % 2 == 0 else ["mixture", "plain"]
            for side in order:
                out = os.path.join(tmp, side)
                shutil.rmtree(out, ignore_errors=True)
                cmd = [sys.executable, "-m", "dataclean.cli", "run", *shards, "-o", out, "--workers",
                       str(args.workers), "--quiet"]
                if side == "mixture":
                    cmd += ["--mixture", args.recipe]
                m = measure(cmd, cwd=REPO)
                if m.returncode != 0:
                    raise SystemExit(f"{side} run failed:\n{m.stderr[-3000:]}")
                with open(os.path.join(out, "manifest.json"), encoding="utf-8") as fh:
                    timings = json.load(fh)["timings_seconds"]
                runs[side].append({"wall_s": m.wall_s, "peak_rss_mib": m.peak_rss_mib,
                                   "global_s": timings.get("global"), "timings": timings})
                if side == "mixture":
                    table = pq.read_table(os.path.join(out, "stats", "mixture.parquet")).to_pylist()
                    with open(os.path.join(out, "stats", "summary.json"), encoding="utf-8") as fh:
                        summary = json.load(fh)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)

    print(f"{len(shards)} shards, {inputs.docs:,} docs, {inputs.text_mb:.1f} MB of text, "
          f"{args.workers} workers, {args.reps} reps")
    print(f"{'source':8} {'select':8} {'available':>11} {'target':>10} {'achieved':>10} {'weight':>7} "
          f"{'target w':>8} {'epochs':>6}  warning")
    for r in table:
        print(f"{r['source']:8} {r['select']:8} {r['available_tokens']:>11,} {r['target_tokens']:>10,} "
              f"{r['achieved_tokens']:>10,} {r['achieved_weight']:>7.4f} {r['target_weight']:>8.4f} "
              f"{r['epochs_used']:>6.2f}  {r['warning'] or ''}")
    for side, rs in runs.items():
        print(f"{side:8} wall {median([r['wall_s'] for r in rs]):.1f} s (median), global step "
              f"{median([r['global_s'] for r in rs]):.2f} s, peak RSS {max(r['peak_rss_mib'] for r in rs):,.0f} MiB")
    result = {"shards": [os.path.basename(s) for s in shards], "docs": inputs.docs, "text_mb": inputs.text_mb,
              "workers": args.workers, "recipe": os.path.relpath(args.recipe, REPO), "mixture": table,
              "summary": {k: summary[k] for k in ("input_records", "kept", "removed", "output_docs",
                                                  "output_tokens", "kept_tokens")},
              "runs": runs}
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2)
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
