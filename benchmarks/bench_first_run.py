"""A user's first run after ``pip install``, against the runs after it (issue 20 item 4).

Makes a fresh virtual environment (or takes one with ``--venv``), installs this checkout into it (a wheel,
not editable: what a user gets), then on a copy of sample_data with an empty cache folder
(``XDG_CACHE_HOME``):

1. the first run (the kernels are not compiled; it starts the background warm-up);
2. waits for the warm-up to end (its lock file goes away), and records how long it took from its log;
3. ``--warm`` more runs, with the kernels loaded from the cache;
4. checks that every output file of the first run equals the warm run's, byte for byte.

    python benchmarks/bench_first_run.py                 # -> benchmarks/results/first_run.json
    python benchmarks/bench_first_run.py --venv /tmp/fv  # reuse (or create there) the venv

The figures are wall and CPU time of the ``dataclean run`` process tree (``_measure.measure``; the
background warm-up leaves the tree and is timed by its own log line). The goal: the first run at most 10 s
slower than a warm one.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _measure import measure, median  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: What a warm run writes differently from the first one (times, the report's timestamps, locks, logs).
_VOLATILE = ("manifest.json", "stats.json", ".dataclean-run.lock", ".dataclean-run.json")


def _output_hashes(root: str) -> dict[str, str]:
    out = {}
    for dirpath, dirnames, files in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir.split(os.sep)[0] == "_work":
            continue
        for name in files:
            if name in _VOLATILE or name.endswith((".html", ".log")):
                continue
            with open(os.path.join(dirpath, name), "rb") as f:
                out[os.path.normpath(os.path.join(rel_dir, name))] = hashlib.sha256(f.read()).hexdigest()
    return dict(sorted(out.items()))


def _venv(path: str | None) -> tuple[str, float | None]:
    """The venv's ``dataclean`` executable, creating the venv and installing this checkout when needed."""
    path = path or os.path.join(tempfile.gettempdir(), "dataclean-first-run-venv")
    exe = os.path.join(path, "bin", "dataclean")
    if os.path.exists(exe):
        return exe, None
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "venv", path], check=True)
    subprocess.run([os.path.join(path, "bin", "pip"), "install", "-q", REPO], check=True)
    return exe, time.perf_counter() - t0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--venv", help="the virtual environment to use (created with this checkout when missing)")
    ap.add_argument("--warm", type=int, default=3, help="warm runs after the first (default 3)")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("-o", "--out", default=os.path.join(REPO, "benchmarks", "results", "first_run.json"))
    args = ap.parse_args(argv)

    exe, install_s = _venv(args.venv)
    work = tempfile.mkdtemp(prefix="dataclean-first-run-")
    try:
        data = os.path.join(work, "sample_data")
        shutil.copytree(os.path.join(REPO, "sample_data"), data)
        cache = os.path.join(work, "cache")
        env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "DATACLEAN_KERNELS")}
        env["XDG_CACHE_HOME"] = cache
        numba_dir = os.path.join(cache, "dataclean", "numba")

        def run(name: str):
            m = measure([exe, "run", data, "-o", os.path.join(work, name), "--workers", str(args.workers),
                         "--quiet"], cwd=work, env=env, interval=None)
            if m.returncode != 0:
                raise SystemExit(f"{name} failed ({m.returncode}): {m.stderr[-2000:]}")
            return m

        first = run("first")
        started_lock = os.path.exists(os.path.join(numba_dir, "warming.lock"))
        t0 = time.perf_counter()
        while os.path.exists(os.path.join(numba_dir, "warming.lock")):
            time.sleep(0.5)
        waited = time.perf_counter() - t0
        with open(os.path.join(numba_dir, "warm.log")) as f:
            warm_log = f.read().strip().splitlines()[-1]
        warm = [run(f"warm{i}") for i in range(args.warm)]
        same = _output_hashes(os.path.join(work, "first")) == _output_hashes(os.path.join(work, "warm0"))
        result = {
            "input": "sample_data", "workers": args.workers, "venv_install_s": install_s,
            "load_1min": os.getloadavg()[0],
            "first": {"wall_s": round(first.wall_s, 2), "cpu_s": round(first.user_s + first.sys_s, 2)},
            "warm": [{"wall_s": round(m.wall_s, 2), "cpu_s": round(m.user_s + m.sys_s, 2)} for m in warm],
            "warm_median_wall_s": round(median([m.wall_s for m in warm]), 2),
            "first_minus_warm_s": round(first.wall_s - median([m.wall_s for m in warm]), 2),
            "warm_up_started": started_lock, "waited_for_warm_up_s": round(waited, 1), "warm_up_log": warm_log,
            "outputs_identical": same, "files_compared": len(_output_hashes(os.path.join(work, "first"))),
        }
    finally:
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result, indent=2))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(result, f, indent=2)
        f.write("\n")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
