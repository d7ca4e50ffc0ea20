"""How long ``report.html`` takes, per section, on sample_data and on the 12 bench shards (issue 20 item 5).

For each run folder (made here first with the default pipeline, ``--workers 2``, unless given):

* ``dataclean report OUT`` as a user runs it: a fresh process, wall time, median of ``--reps``;
* ``render_report(OUT)`` in this process (what a run does after stats), median of ``--reps``, with the time of
  each section and of the thresholds and the run's tables (the first render is a warm-up: imports).

    python benchmarks/bench_report.py                       # sample_data and the bench shards (~2 min)
    python benchmarks/bench_report.py --no-bench            # sample_data only
    python benchmarks/bench_report.py --bench-out /tmp/bo   # reuse (or make there) the bench run
"""
from __future__ import annotations

import argparse
import functools
import json
import os
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _measure import measure, median  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCH = os.path.join(os.path.dirname(REPO), "shared", "corpus", "bench")


def _ensure_run(inputs: str, out: str) -> None:
    if os.path.exists(os.path.join(out, "manifest.json")):
        return
    subprocess.run([sys.executable, "-m", "dataclean.cli", "run", inputs, "-o", out, "--workers", "2", "--quiet",
                    "--set", "output.report=false"], check=True)


def _timed_render(out: str, reps: int) -> dict:
    import dataclean.report as R
    from dataclean.report import sections as S

    times: dict[str, list[float]] = {}

    def wrap(mod, name):
        f = getattr(mod, name)

        @functools.wraps(f)
        def timed(*a, **k):
            t0 = time.perf_counter()
            try:
                return f(*a, **k)
            finally:
                times.setdefault(name, [0.0] * (reps + 1))[rep] += time.perf_counter() - t0
        setattr(mod, name, timed)
        return f

    originals = [(S, n, wrap(S, n)) for n in dir(S) if n.endswith("_section")]
    originals += [(R, n, wrap(R, n)) for n in ("thresholds_from_config", "RunTables")]
    total = []
    try:
        for rep in range(reps + 1):  # (rep 0: imports and first builds, not counted)
            t0 = time.perf_counter()
            R.render_report(out)
            total.append(time.perf_counter() - t0)
    finally:
        for mod, name, f in originals:
            setattr(mod, name, f)
    parts = {n: round(median(v[1:]), 3) for n, v in times.items() if median(v[1:]) >= 0.001}
    return {"first_s": round(total[0], 3), "median_s": round(median(total[1:]), 3),
            "parts_s": dict(sorted(parts.items(), key=lambda kv: -kv[1]))}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--no-bench", action="store_true", help="sample_data only")
    ap.add_argument("--bench-out", help="the bench run's folder (made there when missing)")
    ap.add_argument("-o", "--out", default=os.path.join(REPO, "benchmarks", "results", "report.json"))
    args = ap.parse_args(argv)

    work = tempfile.mkdtemp(prefix="dataclean-bench-report-")
    runs = {"sample_data": (os.path.join(REPO, "sample_data"), os.path.join(work, "sample"))}
    if not args.no_bench:
        runs["bench (12 shards)"] = (BENCH, args.bench_out or os.path.join(work, "bench"))
    result: dict = {"load_1min_start": os.getloadavg()[0], "runs": {}}
    for name, (inputs, out) in runs.items():
        _ensure_run(inputs, out)
        with open(os.path.join(out, "stats", "summary.json")) as f:
            summary = json.load(f)
        cli = [measure([sys.executable, "-m", "dataclean.cli", "report", out], interval=None)
               for _ in range(args.reps)]
        if any(m.returncode for m in cli):
            raise SystemExit(f"dataclean report {out} failed: {cli[0].stderr[-2000:]}")
        result["runs"][name] = {
            "docs_in": summary.get("input_records"),
            "cli_report_wall_s": round(median([m.wall_s for m in cli]), 3),
            "cli_report_cpu_s": round(median([m.user_s + m.sys_s for m in cli]), 3),
            "render": _timed_render(out, args.reps),
        }
    result["load_1min_end"] = os.getloadavg()[0]
    print(json.dumps(result, indent=2))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
