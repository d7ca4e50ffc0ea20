"""CPU profile of the four rule stages of the rules chain, old against new, and a bit-for-bit check.

The chain of ``benchmarks/bench_rules.py`` (gopher_repetition > gopher_quality > c4 > fineweb_quality), run in
ONE process on 4096-row batches of a bench shard, each stage timed with ``time.process_time`` (the stage's
``apply`` through :func:`dataclean.pipeline.apply_stage`; the rows a stage removes are dropped before the next
stage, as :meth:`Pipeline.process` does). Three implementations, interleaved in the same run so the ratios hold
on a shared machine:

  ref        the four modules (tokenize, gopher, c4, fineweb) as they are at ``--ref`` (a git revision of this
             repository, loaded from ``git show`` under other module names; default: the last commit before
             the kernels)
  new        the working tree, compiled kernels on (numba)
  fallback   the working tree with ``DATACLEAN_KERNELS=0`` (the pyarrow/numpy path used without numba)

``--check`` runs the chain ref vs new and ref vs fallback on bench shards 0-1, with the chain's configuration
(published defaults) and with the ``rules/default.yaml`` entries of the four stages in that file's order
(``by_lang``, ``only_sources``, unwrapping...), ``lang`` taken from ``lang_hint``, and compares every column of
every stage's output batch (signals, rewritten text, the cached words) and every decision (rule, reason, value,
threshold, detail) bit for bit; it prints the differences and exits 1 if there is any.

``--startup`` measures the per-process cost of the kernels: a fresh interpreter that imports the stages and runs
the chain on 100 documents, with kernels off, on with a warm cache, on with an empty cache (cold compile).

    python benchmarks/profile_rules.py                 # timing, shard 0, median of 3
    python benchmarks/profile_rules.py --check         # bit-for-bit check on shards 0-1
    python benchmarks/profile_rules.py --startup
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
import types

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
CORPUS = os.path.normpath(os.path.join(REPO, "..", "shared", "corpus", "bench"))
DEFAULT_REF = "f1d95c8"  # the last commit before the compiled kernels
KINDS = ["gopher_repetition", "gopher_quality", "c4", "fineweb_quality"]
MODULES = [  # (path, module name of its reference copy), in import order
    ("dataclean/text/tokenize.py", "_ref_tokenize"),
    ("dataclean/stages/gopher.py", "_ref_gopher"),
    ("dataclean/stages/c4.py", "_ref_c4"),
    ("dataclean/stages/fineweb.py", "_ref_fineweb"),
]
REDIRECT = {"from dataclean.text import ": "from _ref_tokenize import ",
            "from dataclean.text.tokenize import ": "from _ref_tokenize import ",
            "from dataclean.stages.c4 import ": "from _ref_c4 import "}


def module_at(ref: str, path: str, name: str, redirect: dict[str, str] | None = None) -> types.ModuleType:
    """The module at ``path`` as it is at git revision ``ref``, imported as ``name`` (``redirect``: replacements
    in its source, to make it import other reference copies)."""
    src = subprocess.run(["git", "-C", REPO, "show", f"{ref}:{path}"], check=True, capture_output=True,
                         text=True).stdout
    for old, new in (redirect or {}).items():
        src = src.replace(old, new)
    mod = types.ModuleType(name)
    mod.__file__ = f"<{ref}:{path}>"
    sys.modules[name] = mod
    exec(compile(src, mod.__file__, "exec"), mod.__dict__)
    return mod


def load_ref(ref: str) -> dict[str, type]:
    """The four stage classes as they are at git revision ``ref`` (stage kind -> class)."""
    mods = {name: module_at(ref, path, name, REDIRECT) for path, name in MODULES}
    g, c, f = mods["_ref_gopher"], mods["_ref_c4"], mods["_ref_fineweb"]
    return {"gopher_repetition": g.GopherRepetition, "gopher_quality": g.GopherQuality, "c4": c.C4,
            "fineweb_quality": f.FineWebQuality}


def new_classes() -> dict[str, type]:
    from dataclean.stages import REGISTRY
    return {k: REGISTRY[k] for k in KINDS}


def recipe_specs(which: str) -> list[dict]:
    """Stage specs of the chain: ``chain`` (published defaults) or ``default`` (the rules/default.yaml entries of
    the four stages, in that file's order)."""
    if which == "chain":
        return [{"stage": k} for k in KINDS]
    with open(os.path.join(REPO, "rules", "default.yaml")) as f:
        return [dict(e) for e in yaml.safe_load(f)["pipeline"] if e["stage"] in KINDS]  # in the recipe's order


def build(classes: dict[str, type], specs: list[dict]) -> list:
    stages = []
    for spec in specs:
        spec = dict(spec)
        kind = spec.pop("stage")
        only, skip = spec.pop("only_sources", None), spec.pop("skip_sources", None) or ()
        only_kinds, skip_kinds = spec.pop("only_kinds", None), spec.pop("skip_kinds", None) or ()
        stage = classes[kind](**spec)  # (the scopes as dataclean.pipeline.build_stage sets them)
        stage.only_sources = list(only) if only is not None else None
        stage.skip_sources = list(skip)
        stage.only_kinds = list(only_kinds) if only_kinds is not None else None
        stage.skip_kinds = list(skip_kinds)
        stages.append(stage)
    return stages


def load_batches(part: int, rows: int = 4096, limit: int | None = None) -> list[pa.RecordBatch]:
    t = pq.read_table(os.path.join(CORPUS, f"part-{part:05d}.parquet"))
    if limit:
        t = t.slice(0, limit)
    lang = pc.list_element(pc.split_pattern(t.column("lang_hint"), "-"), 0)
    t = pa.table({"id": t.column("id"), "text": t.column("text"), "source": t.column("source"), "lang": lang})
    return t.combine_chunks().to_batches(max_chunksize=rows)


def kernels_env(on: bool):
    os.environ["DATACLEAN_KERNELS"] = "1" if on else "0"


def run_chain(stages, batches, times: dict | None = None, record: list | None = None) -> int:
    """The chain over ``batches``; adds CPU seconds per stage kind to ``times``; appends (stage output, decisions)
    to ``record``. Returns the surviving documents."""
    from dataclean.pipeline import apply_stage
    from dataclean.text.tokenize import WORDS_COLUMN
    kept = 0
    for batch in batches:
        for stage in stages:
            if batch.num_rows == 0:
                break
            t0 = time.process_time()
            result = apply_stage(stage, batch)
            if times is not None:
                times[stage.kind] = times.get(stage.kind, 0.0) + time.process_time() - t0
            if record is not None:
                record.append((stage.kind, result.batch, result.decisions))
            batch = result.batch
            if stage.rewrites_text and WORDS_COLUMN in batch.schema.names:
                batch = batch.drop_columns([WORDS_COLUMN])
            if result.decisions is not None:
                batch = batch.filter(pc.invert(result.decisions.removed))
        kept += batch.num_rows
    return kept


# -- bit-for-bit comparison -------------------------------------------------------------------------------------

def same(a: pa.Array, b: pa.Array) -> bool:
    """Equal type, validity and values; floats compared by their bits (so NaN equals NaN, 0.0 differs from -0.0)."""
    if isinstance(a, pa.ChunkedArray):
        a = a.combine_chunks()
    if isinstance(b, pa.ChunkedArray):
        b = b.combine_chunks()
    if a.type != b.type or len(a) != len(b):
        return False
    if pa.types.is_floating(a.type):
        va, vb = a.is_valid().to_numpy(zero_copy_only=False), b.is_valid().to_numpy(zero_copy_only=False)
        if not np.array_equal(va, vb):
            return False
        xa = a.fill_null(0).to_numpy(zero_copy_only=False)
        xb = b.fill_null(0).to_numpy(zero_copy_only=False)
        return bool(np.array_equal(xa.view(np.uint64)[va], xb.view(np.uint64)[va]))
    return a.equals(b)


def compare(rec_a: list, rec_b: list, label: str) -> list[str]:
    problems = []
    if len(rec_a) != len(rec_b):
        return [f"{label}: {len(rec_a)} vs {len(rec_b)} stage results"]
    for i, ((kind, ba, da), (_, bb, db)) in enumerate(zip(rec_a, rec_b)):
        if ba.schema.names != bb.schema.names:
            problems.append(f"{label} #{i} {kind}: columns {ba.schema.names} vs {bb.schema.names}")
            continue
        for name in ba.schema.names:
            if not same(ba.column(name), bb.column(name)):
                problems.append(f"{label} #{i} {kind}: column {name} differs")
        if (da is None) != (db is None):
            problems.append(f"{label} #{i} {kind}: decisions None vs not")
        elif da is not None:
            for field in ("rule", "reason", "value", "threshold", "detail"):
                if not same(getattr(da, field), getattr(db, field)):
                    problems.append(f"{label} #{i} {kind}: decision {field} differs")
    return problems


def check(ref: str, parts: list[int]) -> int:
    ref_classes, classes = load_ref(ref), new_classes()
    bad = 0
    for part in parts:
        batches = load_batches(part)
        for which in ("chain", "default"):
            specs = recipe_specs(which)
            rec_ref: list = []
            kernels_env(False)
            run_chain(build(ref_classes, specs), batches, record=rec_ref)
            for on, label in ((True, "new"), (False, "fallback")):
                kernels_env(on)
                rec: list = []
                run_chain(build(classes, specs), batches, record=rec)
                problems = compare(rec_ref, rec, f"part {part} {which} ref vs {label}")
                cols = sum(b.num_columns for _, b, _ in rec)
                print(f"part {part} config {which:7s} ref vs {label:8s}: {len(rec)} stage batches, {cols} columns + "
                      f"5 decision arrays each: {'IDENTICAL' if not problems else f'{len(problems)} DIFFERENCES'}")
                for p in problems[:20]:
                    print("   ", p)
                bad += len(problems)
    return 1 if bad else 0


# -- timing -------------------------------------------------------------------------------------------------------

def timing(ref: str, part: int, reps: int) -> None:
    ref_classes, classes = load_ref(ref), new_classes()
    batches = load_batches(part)
    n_docs = sum(b.num_rows for b in batches)
    mb = sum(pc.sum(pc.binary_length(b.column("text"))).as_py() for b in batches) / 1e6
    specs = recipe_specs("chain")
    impls = [("ref", ref_classes, False), ("new", classes, True), ("fallback", classes, False)]
    # warm up every implementation (imports, numba cache load, regex compilation) on a small batch
    for _, cls, on in impls:
        kernels_env(on)
        run_chain(build(cls, specs), [batches[0].slice(0, 200)])
    results = {name: [] for name, _, _ in impls}
    for _ in range(reps):
        for name, cls, on in impls:
            kernels_env(on)
            times: dict = {}
            run_chain(build(cls, specs), batches, times=times)
            results[name].append(times)
    med = {name: {k: statistics.median(t[k] for t in runs) for k in KINDS} for name, runs in results.items()}
    print(f"bench part-{part:05d}: {n_docs} docs, {mb:.1f} MB; CPU seconds per stage, median of {reps}")
    print(f"{'stage':20s} {'ref':>8s} {'new':>8s} {'fallback':>9s} {'ref/new':>8s} {'ref/fallback':>13s}")
    for k in KINDS + ["total"]:
        r, nw, fb = ((sum(med[x].values()) if k == "total" else med[x][k]) for x in ("ref", "new", "fallback"))
        print(f"{k:20s} {r:8.3f} {nw:8.3f} {fb:9.3f} {r / nw:7.2f}x {r / fb:12.2f}x")
    for name in ("ref", "new", "fallback"):
        total = sum(med[name].values())
        print(f"{name:9s}: {n_docs / total:,.0f} docs/s, {mb / total:.1f} MB/s of CPU (one core, the four stages only)")


STARTUP = """
import os, sys, time
t0 = time.process_time()
sys.path.insert(0, {here!r})
from profile_rules import build, new_classes, recipe_specs, load_batches, run_chain
batches = load_batches(0, limit=100)
t1 = time.process_time()
run_chain(build(new_classes(), recipe_specs("chain")), batches)
print(time.process_time() - t1, time.process_time() - t0)
"""


def startup() -> None:
    cold_dir = tempfile.mkdtemp(prefix="numba-cold-")
    variants = [("kernels off", {"DATACLEAN_KERNELS": "0"}),
                ("kernels on, cold cache", {"DATACLEAN_KERNELS": "1", "NUMBA_CACHE_DIR": cold_dir}),
                ("kernels on, warm cache", {"DATACLEAN_KERNELS": "1", "NUMBA_CACHE_DIR": cold_dir}),
                ("kernels on, warm cache", {"DATACLEAN_KERNELS": "1", "NUMBA_CACHE_DIR": cold_dir})]
    print("fresh interpreter: CPU s of the chain on 100 docs (first call: imports, cache load or compile), "
          "and of the whole process")
    for label, env in variants:
        proc = subprocess.run([sys.executable, "-c", STARTUP.format(here=HERE)], env={**os.environ, **env},
                              capture_output=True, text=True, check=True)
        chain, total = (float(x) for x in proc.stdout.split())
        print(f"  {label:24s} chain {chain:6.2f} s   process {total:6.2f} s")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ref", default=DEFAULT_REF, help="git revision of the reference implementation")
    ap.add_argument("--part", type=int, default=0, help="bench shard for the timing")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--check", action="store_true", help="bit-for-bit check on shards 0-1")
    ap.add_argument("--check-parts", default="0,1")
    ap.add_argument("--startup", action="store_true", help="per-process cost of the kernels")
    args = ap.parse_args(argv)
    sys.path.insert(0, REPO)
    if args.check:
        return check(args.ref, [int(p) for p in args.check_parts.split(",")])
    if args.startup:
        startup()
        return 0
    timing(args.ref, args.part, args.reps)
    return 0


if __name__ == "__main__":
    sys.exit(main())
