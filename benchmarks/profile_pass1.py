"""Where pass 1's CPU goes: CPU seconds per stage of a real ``dataclean run``, in this process.

Runs ``dataclean run ARGS...`` in-process (give ``--workers 1``, so that the tasks run here) with
:func:`dataclean.pipeline.apply_stage` wrapped to add each stage's ``time.process_time`` and the rows it was
given. Prints the run's total CPU, the stages' share of it, and per stage: seconds, share, µs per input row.
One run, no repetitions: read the shares, not the last digit.

    python benchmarks/profile_pass1.py run ../shared/corpus/bench/part-00000.parquet \\
        ../shared/corpus/bench/part-00001.parquet -o /tmp/prof --workers 1 --quiet --fresh
"""
from __future__ import annotations

import collections
import sys
import time

import dataclean.pipeline as pipeline

SECONDS: collections.Counter = collections.Counter()
ROWS: collections.Counter = collections.Counter()
_apply = pipeline.apply_stage


def timed(stage, batch):
    t0 = time.process_time()
    result = _apply(stage, batch)
    SECONDS[stage.name] += time.process_time() - t0
    ROWS[stage.name] += batch.num_rows
    return result


def main(argv: list[str]) -> int:
    if "--workers" not in argv or argv[argv.index("--workers") + 1] != "1":
        print("give --workers 1: with a pool the stages run in other processes", file=sys.stderr)
        return 2
    pipeline.apply_stage = timed  # (Pipeline.process looks it up in the module at each call)
    from dataclean.cli import main as cli

    t0 = time.process_time()
    try:
        cli(argv, standalone_mode=False)
    except SystemExit:
        pass
    total, stages = time.process_time() - t0, sum(SECONDS.values())
    print(f"run CPU {total:.2f} s, of it in stages {stages:.2f} s")
    for name, s in SECONDS.most_common():
        print(f"  {name:<20} {s:6.2f} s {100 * s / stages:5.1f}%  {1e6 * s / max(ROWS[name], 1):6.1f} µs/row  "
              f"({ROWS[name]:,} rows in)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
