"""Local executor vs Ray executor on the same input, on this machine (issue #8).

Runs ``dataclean run`` over bench shards with the default pipeline (langid, every rule family, exact and
MinHash dedup, quality filter; report off) twice per repetition: ``--executor local --workers W`` and
``--executor ray --workers W`` (a local Ray cluster of W CPUs, started and stopped by the run), alternating
the order per repetition. Reports the median wall time, docs/s, the peak RSS/PSS of the whole process tree
(for Ray: the driver, raylet, GCS and every worker), the per-phase timings of the manifest, and whether the
two outputs (data/, rejected/, stats/, dedup/) are byte-identical.

    python benchmarks/bench_ray.py [--shards 0-3] [--workers 2] [--reps 3]

Result: benchmarks/results/ray.json.
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

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _measure import bench_shards, measure, median, parquet_inputs  # noqa: E402
from bench_foundation import _machine  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
DEFAULT_CORPUS = os.path.normpath(os.path.join(HERE, "..", "..", "shared", "corpus", "bench"))
CONFIG = os.path.join(HERE, "configs", "ray.yaml")
COMPARED = ("data", "rejected", "stats", "dedup")


def _digest(out: str) -> str:
    h = hashlib.sha256()
    for sub in COMPARED:
        for root, dirs, files in sorted(os.walk(os.path.join(out, sub))):
            dirs.sort()
            for f in sorted(files):
                path = os.path.join(root, f)
                h.update(os.path.relpath(path, out).encode() + b"\0")
                with open(path, "rb") as fh:
                    h.update(fh.read())
    return h.hexdigest()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=DEFAULT_CORPUS, help=f"folder of part-NNNNN.parquet (default {DEFAULT_CORPUS})")
    ap.add_argument("--shards", default="0-3", help="bench shard range, e.g. 0-3 or 0-11")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "ray.json"))
    args = ap.parse_args(argv)
    files = bench_shards(args.corpus, args.shards)
    stats = parquet_inputs(files)
    tmp = tempfile.mkdtemp(prefix="dataclean-bench-ray-")
    runs: dict[str, list[dict]] = {"local": [], "ray": []}
    digests: dict[str, set] = {"local": set(), "ray": set()}
    try:
        for rep in range(args.reps):
            order = ("local", "ray") if rep % 2 == 0 else ("ray", "local")
            for kind in order:
                out = os.path.join(tmp, kind)
                shutil.rmtree(out, ignore_errors=True)
                cmd = [sys.executable, "-m", "dataclean.cli", "run", *files, "-o", out, "--config", CONFIG,
                       "--workers", str(args.workers), "--executor", kind, "--quiet"]
                m = measure(cmd, interval=0.1)
                if m.returncode != 0:
                    print(m.stderr, file=sys.stderr)
                    return 1
                with open(os.path.join(out, "manifest.json")) as fh:
                    timings = json.load(fh)["timings_seconds"]
                digests[kind].add(_digest(out))
                runs[kind].append({"rep": rep, "wall_s": round(m.wall_s, 3), "peak_rss_mib": round(m.peak_rss_mib),
                                   "peak_pss_mib": round(m.peak_pss_mib), "peak_procs": m.peak_procs,
                                   "cpu_s": round(m.user_s + m.sys_s, 2), "timings": timings})
                print(f"rep {rep} {kind:5}: {m.wall_s:6.1f} s  peak RSS {m.peak_rss_mib:6.0f} MiB  "
                      f"PSS {m.peak_pss_mib:6.0f} MiB  phases {timings}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    summary = {}
    for kind, rs in runs.items():
        wall = median([r["wall_s"] for r in rs])
        summary[kind] = {"wall_s_median": wall, "docs_per_s": round(stats.docs / wall),
                         "mb_per_s": round(stats.text_mb / wall, 2),
                         "peak_rss_mib_max": max(r["peak_rss_mib"] for r in rs),
                         "peak_pss_mib_max": max(r["peak_pss_mib"] for r in rs),
                         "phase_medians": {p: median([r["timings"][p] for r in rs]) for p in rs[0]["timings"]}}
    identical = len(digests["local"]) == 1 and digests["local"] == digests["ray"]
    summary["ray_over_local_wall"] = round(summary["ray"]["wall_s_median"] / summary["local"]["wall_s_median"], 3)
    summary["outputs_identical"] = identical
    result = {"benchmark": "ray_vs_local", "date": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
              "command": "python benchmarks/bench_ray.py " + " ".join(argv or sys.argv[1:]),
              "machine": _machine(), "inputs": {"files": len(files), "docs": stats.docs, "text_mb": round(stats.text_mb, 1)},
              "settings": {"workers": args.workers, "reps": args.reps, "config": "benchmarks/configs/ray.yaml"},
              "summary": summary, "runs": runs}
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=1)
    print(f"\n{stats.docs:,} docs, {stats.text_mb:.1f} MB, {args.workers} workers, median of {args.reps}:")
    for kind in ("local", "ray"):
        s = summary[kind]
        print(f"  {kind:5}: {s['wall_s_median']:6.1f} s  {s['docs_per_s']:>7,} docs/s  peak RSS {s['peak_rss_mib_max']:,} MiB"
              f"  phases {s['phase_medians']}")
    print(f"  ray / local wall: {summary['ray_over_local_wall']:.2f}; outputs byte-identical: {identical}")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
