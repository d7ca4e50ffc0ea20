"""CPU per function of the dedup hot paths, compiled kernels (numba) against the numpy/Arrow code, and a bit-for-bit
check of the two on bench shards.

    python benchmarks/profile_dedup.py                  # part-00000: CPU s per function, kernels on and off
    python benchmarks/profile_dedup.py --check          # every bench shard: kernels == numpy/Arrow, bit for bit

Measured in ONE process on one shard (21,513 docs), batches of 4,096 rows as a run makes them, after the
normalize stage (what exact_dedup and minhash_dedup see); each figure is the smallest process CPU time of
``--reps`` repetitions. ``DATACLEAN_KERNELS=0`` (read at each call) selects the numpy/Arrow code, which is the
code before the kernels.

The global step's part is measured on the candidate edges of the first ``--global-shards`` shards together (all
12 by default, as the benchmark run): documents sharing an LSH band (grouped here with numpy, not DuckDB), their
candidate components cut into chunks of ``chunk_nodes`` like ``global_decide`` does, and
``MinHashDedup._decide_chunk`` on each (re-shingling the texts, exact Jaccard of every candidate edge, greedy
clustering). Exact dedup runs first in a real run, so its candidates there are fewer than here.
"""
from __future__ import annotations

import argparse
import glob
import os
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
DEFAULT_CORPUS = os.path.normpath(os.path.join(REPO, "..", "shared", "corpus", "bench"))

from dataclean.dedup import minhash as mh  # noqa: E402
from dataclean.stages.dedup_exact import ExactDedup, content_hash, content_key_text  # noqa: E402
from dataclean.stages.dedup_minhash import MinHashDedup, _chunks, connected_components, signature_matrix  # noqa: E402
from dataclean.stages.normalize import Normalize  # noqa: E402
from dataclean.text import kernels  # noqa: E402


def kernels_on(on: bool) -> None:
    os.environ[kernels.ENV] = "1" if on else "0"


def normalized_batches(path: str, rows: int = 4096) -> list[pa.RecordBatch]:
    t = pq.read_table(path, columns=["id", "text"])
    norm = Normalize()
    out = []
    for b in t.to_batches(max_chunksize=rows):
        b = pa.RecordBatch.from_arrays([b.column(0), b.column(1)], names=["id", "text"])
        out.append(norm.apply(b).batch)
    return out


def candidate_chunks(batches: list[pa.RecordBatch], stage: MinHashDedup) -> list[tuple[pa.Table, np.ndarray, np.ndarray]]:
    """(nodes, a, b) per chunk of whole candidate components, as global_decide gives them to _decide_chunk."""
    kernels_on(True)
    parts = [stage.apply(b).batch for b in batches]
    table = pa.Table.from_batches(parts).combine_chunks()
    n = table.num_rows
    bands = table.column("minhash_bands").combine_chunks()
    has = np.asarray(bands.is_valid().to_numpy(zero_copy_only=False))
    keys = np.arange(n, dtype=np.int64)
    h = signature_matrix(bands, stage.bands, "<u8")[has].astype(np.uint64)
    doc = keys[has]
    a_list, b_list = [], []
    for j in range(stage.bands):  # star edges: every member of a bucket to its smallest key
        order = np.lexsort((doc, h[:, j]))
        hs, ds = h[order, j], doc[order]
        start = np.r_[True, hs[1:] != hs[:-1]]
        first = np.maximum.accumulate(np.where(start, np.arange(len(hs)), 0))
        link = ~start
        a_list.append(ds[link])
        b_list.append(ds[first[link]])
    pairs = np.unique(np.stack([np.concatenate(a_list), np.concatenate(b_list)], 1), axis=0) if a_list else \
        np.zeros((0, 2), np.int64)
    a, b = pairs[:, 0], pairs[:, 1]
    nodes_keys = np.unique(np.concatenate([a, b]))
    u, v = np.searchsorted(nodes_keys, a), np.searchsorted(nodes_keys, b)
    comp = connected_components(len(nodes_keys), u, v)
    sel = pa.array(nodes_keys)
    nodes_all = pa.table({"comp": comp, "doc_key": nodes_keys, "id": table.column("id").take(sel),
                          "n_chars": pa.compute.utf8_length(table.column("text").take(sel)).cast(pa.int64()),
                          "q": pa.nulls(len(nodes_keys), pa.float64()), "source": pa.nulls(len(nodes_keys), pa.string()),
                          "lang": pa.nulls(len(nodes_keys), pa.string()),
                          "minhash_sig": table.column("minhash_sig").take(sel), "text": table.column("text").take(sel)})
    chunks = []
    edge_comp = comp[u]
    for lo, hi in _chunks(comp, stage.chunk_nodes):
        m = (comp >= lo) & (comp <= hi)
        e = (edge_comp >= lo) & (edge_comp <= hi)
        chunks.append((nodes_all.filter(pa.array(m)), a[e], b[e]))
    return chunks


def cpu(fn, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        t0 = time.process_time()
        fn()
        best = min(best, time.process_time() - t0)
    return best


def profile(path: str, reps: int, global_files: list[str]) -> None:
    mh.warm_up()
    kernels.warm_up()
    batches = normalized_batches(path)
    texts = [b.column("text") for b in batches]
    stage, exact = MinHashDedup(), ExactDedup()
    chunks = candidate_chunks([b for f in global_files for b in normalized_batches(f)], stage)
    n_docs = sum(len(t) for t in texts)
    print(f"{os.path.basename(path)}: {n_docs:,} docs in {len(batches)} batches; global step: the candidates of "
          f"{len(global_files)} shard(s), {sum(c[0].num_rows for c in chunks):,} nodes, "
          f"{sum(len(c[1]) for c in chunks):,} edges, {len(chunks)} chunk(s)")
    prepared: dict[bool, dict] = {}
    for on in (False, True):
        kernels_on(on)
        st = [mh.shingle_text(t) for t in texts]
        vo = [mh.shingle_hashes(s) for s in st]
        sg = [mh.signatures(v, o) for v, o in vo]
        prepared[on] = {"st": st, "vo": vo, "sg": sg}
    rows = [
        ("shingle_text", lambda p: [mh.shingle_text(t) for t in texts]),
        ("shingle_hashes", lambda p: [mh.shingle_hashes(s) for s in p["st"]]),
        ("signatures (affine32)", lambda p: [mh.signatures(v, o) for v, o in p["vo"]]),
        ("band_hashes", lambda p: [mh.band_hashes(s, stage.bands, stage.rows) for s in p["sg"]]),
        ("content_key_text", lambda p: [content_key_text(t) for t in texts]),
        ("content_hash", lambda p: [content_hash(t) for t in texts]),
        ("pass 1: exact_dedup.apply", lambda p: [exact.apply(b) for b in batches]),
        ("pass 1: minhash_dedup.apply", lambda p: [stage.apply(b) for b in batches]),
        ("global: _decide_chunk (all chunks)", lambda p: [stage._decide_chunk(*c) for c in chunks]),
    ]
    print(f"{'CPU s, best of ' + str(reps):<38}{'numpy/Arrow':>12}{'kernels':>10}{'ratio':>8}")
    for label, fn in rows:
        t = {}
        for on in (False, True):
            kernels_on(on)
            fn(prepared[on])  # warm
            t[on] = cpu(lambda: fn(prepared[on]), reps)
        print(f"{label:<38}{t[False]:>12.3f}{t[True]:>10.3f}{t[False] / max(t[True], 1e-9):>7.1f}x", flush=True)


def check(files: list[str]) -> int:
    bad = 0
    stage = MinHashDedup()
    for path in files:
        batches = normalized_batches(path)
        out = {}
        for on in (False, True):
            kernels_on(on)
            res = []
            for b in batches:
                st = mh.shingle_text(b.column("text"))
                v, o = mh.shingle_hashes(st)
                res.append((st, v, o, content_key_text(b.column("text")), stage.apply(b).batch))
            out[on] = res
        same = all(x[0].equals(y[0]) and np.array_equal(x[1], y[1]) and np.array_equal(x[2], y[2])
                   and x[3].equals(y[3]) and x[4].equals(y[4]) for x, y in zip(out[False], out[True]))
        chunks = {on: None for on in (False, True)}
        for on in (False, True):
            kernels_on(on)
            chunks[on] = [stage._decide_chunk(*c) for c in candidate_chunks(batches, stage)]
        same_global = all(r0.equals(r1) and c0.equals(c1) for (r0, c0), (r1, c1) in zip(chunks[False], chunks[True]))
        removed = sum(r.num_rows for r, _ in chunks[True])
        print(f"{os.path.basename(path)}: pass-1 columns and shingles {'identical' if same else 'DIFFERENT'}; "
              f"global chunk decisions ({removed} near-duplicates inside the shard) "
              f"{'identical' if same_global else 'DIFFERENT'}", flush=True)
        bad += (not same) + (not same_global)
    return 1 if bad else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default=DEFAULT_CORPUS)
    ap.add_argument("--shard", default="part-00000.parquet")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--global-shards", type=int, default=12,
                    help="the global step's candidates come from the first K shards together (default 12)")
    ap.add_argument("--check", action="store_true", help="compare kernels and numpy/Arrow on every shard instead")
    a = ap.parse_args(argv)
    if not mh.warm_up():
        print("the compiled kernels are not available (numba missing or DATACLEAN_KERNELS=0)", file=sys.stderr)
        return 2
    if a.check:
        return check(sorted(glob.glob(os.path.join(a.corpus, "part-*.parquet"))))
    files = sorted(glob.glob(os.path.join(a.corpus, "part-*.parquet")))
    profile(os.path.join(a.corpus, a.shard), a.reps, files[:a.global_shards])
    return 0


if __name__ == "__main__":
    sys.exit(main())
