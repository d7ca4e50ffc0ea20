"""A pass-1 stage with and without its compiled kernels: CPU time, and a bit-for-bit check (issue 20 item 2).

``--stage`` picks what is computed on the bench shards, in 4096-row batches (the shards' own text; ``lang`` from
``lang_hint``):

  seo_spam       ``SeoSpam().signals(text)``: its 18 signals
  quality_score  ``HeuristicScorer().score(batch)``: the score and its 14 signals
  langid         ``LangID().predict(text)``: lang, lang_score, lang2, lang2_score, lang_by_script

Three implementations, interleaved batch by batch in ONE process so that the ratios hold on a shared machine:

  ref        the stage's module as it is at ``--ref`` (a git revision; default 8bef688, the last commit before
             these stages' kernels), loaded from ``git show``, with the tokenizer's kernels on
  kernels    the working tree, compiled kernels on (numba)
  fallback   the working tree with ``DATACLEAN_KERNELS=0`` (the pyarrow/numpy code used without numba)

``--check`` compares every signal column of every batch of kernels and of fallback with ref's bit for bit
(floats by their bytes) and exits 1 at the first difference, naming the batch, the column and the first
differing row. ``--shards`` picks the shards
(default 0-1; ``0-11`` is the whole bench corpus); ``--limit`` cuts each shard to its first N rows.

    python benchmarks/profile_stages.py --stage seo_spam                 # timing on shards 0-1, median of 3
    python benchmarks/profile_stages.py --stage quality_score --check --shards 0-11
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
import types

import pyarrow as pa

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from profile_rules import load_batches, module_at, same  # noqa: E402  (the bench shards, git-show copies, bit checks)

DEFAULT_REF = "8bef688"  # the last commit before the kernels of seo_spam, quality_score and langid
#: stage -> (its module's path, the class to build)
STAGES = {"seo_spam": ("dataclean/stages/spam.py", "SeoSpam"),
          "quality_score": ("dataclean/quality/heuristic.py", "HeuristicScorer"),
          "langid": ("dataclean/stages/langid.py", "LangID")}


def load_module(path: str, ref: str | None) -> types.ModuleType:
    """The module at ``path``: the working tree's (``ref`` None) or as it is at git revision ``ref``."""
    if ref is None:
        import importlib

        return importlib.import_module(path[:-3].replace("/", "."))
    return module_at(ref, path, "_ref_" + os.path.basename(path)[:-3])


def computer(stage: str, ref: str | None):
    """A function batch -> {name: array} computing the stage's outputs with the module of ``ref``."""
    path, cls = STAGES[stage]
    obj = getattr(load_module(path, ref), cls)()
    if stage == "seo_spam":
        return lambda batch: obj.signals(batch.column("text"))
    if stage == "langid":
        return lambda batch: obj.predict(batch.column("text"))

    def quality(batch):
        score, signals = obj.score(batch)
        return {"score": pa.array(score), **signals}
    return quality


def shard_list(spec: str) -> list[int]:
    out: list[int] = []
    for part in spec.split(","):
        a, _, b = part.partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def signals(compute, batch: pa.RecordBatch, kernels_on: bool) -> dict[str, pa.Array]:
    os.environ["DATACLEAN_KERNELS"] = "1" if kernels_on else "0"
    return compute(batch)


def first_difference(a: pa.Array, b: pa.Array) -> int:
    """The first row where ``a`` and ``b`` differ by :func:`profile_rules.same` (0 when their types or lengths
    do), -1 when they are the same."""
    if same(a, b):
        return -1
    if a.type != b.type or len(a) != len(b):
        return 0
    return next(i for i in range(len(a)) if not same(a.slice(i, 1), b.slice(i, 1)))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stage", choices=sorted(STAGES), default="seo_spam")
    ap.add_argument("--shards", default="0-1")
    ap.add_argument("--limit", type=int)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--check", action="store_true")
    ap.add_argument("--ref", default=DEFAULT_REF)
    ap.add_argument("--json", help="write the timing here (default: print only)")
    args = ap.parse_args(argv)
    from dataclean.text import kernels

    kernels.allow_compile()
    os.environ["DATACLEAN_KERNELS"] = "1"
    if not kernels.enabled():
        print("numba is not usable here: nothing to compare", file=sys.stderr)
        return 2
    stage, ref = computer(args.stage, None), computer(args.stage, args.ref)
    sides = {"ref": (ref, True), "kernels": (stage, True), "fallback": (stage, False)}
    data = [b for part in shard_list(args.shards) for b in load_batches(part, limit=args.limit)]
    docs = sum(len(b) for b in data)
    signals(stage, data[0].slice(0, 64), True)  # load the kernels before timing
    if args.check:
        for i, text in enumerate(data):
            want = signals(ref, text, True)
            for side in ("kernels", "fallback"):
                st, on = sides[side]
                got = signals(st, text, on)
                if list(got) != list(want):
                    print(f"batch {i}: {side}'s columns differ: {list(got)} vs {list(want)}")
                    return 1
                for name in want:
                    row = first_difference(got[name], want[name])
                    if row >= 0:
                        print(f"batch {i}, {name}, row {row}: {side} {got[name][row]} vs ref {want[name][row]}")
                        return 1
        print(f"bit-identical to {args.ref}, with and without the kernels: {len(want)} signals x {docs:,} "
              f"documents ({len(data)} batches, shards {args.shards})")
        return 0
    times: dict[str, list[float]] = {side: [] for side in sides}
    for _ in range(args.reps):
        spent = dict.fromkeys(sides, 0.0)
        for text in data:
            for side, (st, on) in sides.items():
                t0 = time.process_time()
                signals(st, text, on)
                spent[side] += time.process_time() - t0
        for side, v in spent.items():
            times[side].append(v)
    med = {side: statistics.median(v) for side, v in times.items()}
    result = {"stage": args.stage, "docs": docs, "shards": args.shards, "reps": args.reps, "ref": args.ref, "cpu_s": times,
              "median_cpu_s": med, "us_per_doc": {s: round(1e6 * v / docs, 1) for s, v in med.items()},
              "ratio_kernels_to_ref": round(med["kernels"] / med["ref"], 3),
              "ratio_fallback_to_ref": round(med["fallback"] / med["ref"], 3),
              "load_1min": os.getloadavg()[0], "date": time.strftime("%Y-%m-%d")}
    print(json.dumps(result, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
