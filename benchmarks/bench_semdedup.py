"""Semantic dedup (``semantic_dedup``): the global step on a million embeddings.

**synthetic** (the default): ``--docs`` (1,000,000) L2-normalised 384-dimensional float16 embeddings, written
as the pass-1 files of a run folder (``_work/pass1/TTTTT/docs-00000.parquet``, ``--files`` of them, with the
columns the stage reads: ``doc_key, id, n_chars, source, lang, quality_score, embedding``), generated with a
seeded numpy generator and not measured:

* ``--topics`` (4,000) topic centres ``normalize(0.3 m + g)`` (a shared direction ``m``: real sentence
  embeddings are anisotropic), topic popularity ``1 / (rank + 10)`` (the largest topic holds 1.7% of the
  documents, so some k-means clusters exceed ``max_cluster_size`` and are split);
* a document is ``normalize(c + s g / sqrt(d))`` around its topic centre, ``s`` per topic in [0.7, 1.3]: two
  documents of one topic have cosines of about 0.4-0.6, like related but different texts;
* ``--dup-fraction`` (5%) of the documents are planted near-duplicates: a copy of an earlier document
  ``normalize(x + t g / sqrt(d))``, ``t`` in [0.02, 0.13], so a cosine of 0.9916-0.9998 to it, above the
  default threshold 0.99 (``eps`` 0.01). Families (an original and its copies) are the ground truth.

Then ``SemanticDedup.global_decide`` runs in a child process with a local pool of ``--workers`` (2) and the
stage's defaults (``n_clusters`` = ceil(sqrt(n)) = 1,000, ``sample_size`` 100,000, ``max_iter`` 100,
``max_cluster_size`` 10,000), measured by ``_measure.measure`` (wall, peak RSS/PSS of the process tree, every
0.1 s). Reported: wall, its phases, peak memory, and recall = (documents removed whose ``dup_of`` is in their
own family) / (planted copies), precision = those / all removed. Saved to ``benchmarks/results/semdedup.json``.

    python benchmarks/bench_semdedup.py                        # 1M embeddings (~1.5 GB of disk in --tmp)
    python benchmarks/bench_semdedup.py --docs 100000          # a smaller run
    python benchmarks/bench_semdedup.py --compare-faiss        # numpy's k-means fit against faiss's, same sample

The whole pipeline with a model on the bench shards is ``benchmarks/bench_semantic_run.py``.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import shutil
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, REPO)
FINGERPRINT = "bench-semdedup"


# ------------------------------------------------------------------------------------------ synthetic input

def generate(run: str, docs: int, files: int, dim: int, topics: int, dup_fraction: float, seed: int) -> dict:
    """Write the pass-1 files of a run folder holding ``docs`` embeddings; return the ground truth summary
    (and ``families.npy``: the family of every document, -1 for one not in a family)."""
    from dataclean.embed.vectors import encode

    rng = np.random.default_rng(seed)
    mean = rng.standard_normal(dim)
    mean /= np.linalg.norm(mean)
    centres = 0.3 * mean + rng.standard_normal((topics, dim)) / np.sqrt(dim)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    weight = 1.0 / (np.arange(topics) + 10.0)
    weight /= weight.sum()
    spread = rng.uniform(0.7, 1.3, topics)
    planted = rng.random(docs) < dup_fraction
    planted[0] = False
    family = np.full(docs, -1, np.int64)
    per_file = -(-docs // files)
    vectors = np.zeros((docs, dim), np.float16)  # 768 MB at 1M: written file by file below
    for s in range(0, docs, 65536):
        e = min(docs, s + 65536)
        topic = rng.choice(topics, e - s, p=weight)
        x = centres[topic] + spread[topic, None] * rng.standard_normal((e - s, dim)) / np.sqrt(dim)
        vectors[s:e] = (x / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float16)
    # planted copies, in order, so that a copy of a copy joins its family
    src = (rng.random(docs) * np.arange(docs)).astype(np.int64)
    noise = rng.uniform(0.02, 0.13, docs)
    for s in range(0, docs, 65536):
        e = min(docs, s + 65536)
        rows = s + np.flatnonzero(planted[s:e])
        for r in rows.tolist():  # (sequential: a source may itself be a copy made just before)
            x = vectors[src[r]].astype(np.float64) + noise[r] * rng.standard_normal(dim) / np.sqrt(dim)
            vectors[r] = (x / np.linalg.norm(x)).astype(np.float16)
            root = family[src[r]] if family[src[r]] >= 0 else src[r]
            family[src[r]] = family[r] = root
    markers = os.path.join(run, "_work", "markers")
    os.makedirs(markers, exist_ok=True)
    sources = np.array(["web_crawl", "forum", "news"])
    langs = np.array(["en", "zh"])
    for t in range(files):
        lo, hi = t * per_file, min(docs, (t + 1) * per_file)
        if lo >= hi:
            break
        n = hi - lo
        folder = os.path.join(run, "_work", "pass1", f"{t:05d}")
        os.makedirs(folder, exist_ok=True)
        table = pa.table({
            "doc_key": pa.array((t << 40) + np.arange(n, dtype=np.int64)),
            "id": pa.array([f"doc{i:07d}" for i in range(lo, hi)], pa.string()),
            "n_chars": pa.array(rng.integers(200, 5000, n), pa.int64()),
            "source": pa.array(sources[rng.integers(0, 3, n)].tolist(), pa.string()),
            "lang": pa.array(langs[rng.integers(0, 2, n)].tolist(), pa.string()),
            "quality_score": pa.array(rng.random(n), pa.float64()),
            "embedding": encode(vectors[lo:hi].astype(np.float32)),
        })
        pq.write_table(table, os.path.join(folder, "docs-00000.parquet"), compression="lz4")
        with open(os.path.join(markers, f"pass1-{t:05d}.json"), "w") as fh:  # (what the stage's task keys read)
            json.dump({"fingerprint": FINGERPRINT, "task": t}, fh)
    np.save(os.path.join(run, "families.npy"), family)
    sizes = np.bincount(family[family >= 0])
    sizes = sizes[sizes > 0]
    return {"docs": docs, "files": files, "dim": dim, "topics": topics, "planted_copies": int(planted.sum()),
            "families": int(len(sizes)), "largest_family": int(sizes.max()) if len(sizes) else 0,
            "largest_topic_docs": int(round(weight.max() * docs))}


def inner(run: str, workers: int, params: dict) -> None:
    """The measured part: the stage's global decision over the run folder's pass-1 files."""
    import duckdb

    from dataclean.exec.global_step import GlobalContext
    from dataclean.layout import Layout
    from dataclean.exec.local import LocalExecutor
    from dataclean.pipeline import build_stage
    from dataclean.stages.dedup_semantic import _Run

    started = time.perf_counter()
    lay = Layout(run)
    tasks = sorted(int(os.path.basename(p)) for p in glob.glob(os.path.join(run, "_work", "pass1", "*")))
    spec = {"stage": "semantic_dedup", **params}
    cfg = {"pipeline": [spec], "sources": {}}
    stage = build_stage(spec)
    os.makedirs(lay.p("_work", "global"), exist_ok=True)
    con = duckdb.connect(config={"memory_limit": "1GB", "threads": 2,
                                 "temp_directory": lay.p("_work", "duckdb_tmp")})
    con.execute("CREATE TABLE removals (doc_key BIGINT, stage VARCHAR, rule VARCHAR, reason VARCHAR, "
                "value DOUBLE, threshold DOUBLE, detail VARCHAR, dup_of VARCHAR)")
    removed = lay.p("_work", "global", "removed-none.parquet")
    pq.write_table(pa.table({"doc_key": pa.array([], pa.int64())}), removed)
    columns = {"doc_key", "id", "n_chars", "source", "lang", "quality_score", "embedding"}
    ex = LocalExecutor(workers)
    try:
        ctx = GlobalContext(con, cfg, lay, columns, {}, tasks=tasks, executor=ex, removed_path=removed)
        r = _Run(stage, ctx)
        r.decide()
        stage.write_final_artifacts(ctx, "final")
    finally:
        ex.close()
    con.execute(f"COPY (SELECT doc_key, value, dup_of FROM removals ORDER BY doc_key) TO "
                f"'{lay.p('removals.parquet')}' (FORMAT parquet)")
    print(json.dumps({"phases_s": r.timings, "inner_wall_s": round(time.perf_counter() - started, 2)}))


def evaluate(run: str) -> dict:
    """Recall and precision of the removals against the planted families (see the module docstring)."""
    family = np.load(os.path.join(run, "families.npy"))
    removed = pq.read_table(os.path.join(run, "removals.parquet"))
    files = sorted(glob.glob(os.path.join(run, "_work", "pass1", "*", "docs-00000.parquet")))
    offsets = np.cumsum([0] + [pq.ParquetFile(f).metadata.num_rows for f in files])
    keys = removed.column("doc_key").to_numpy()
    rows = offsets[keys >> 40] + (keys & ((1 << 40) - 1))  # (ids are doc{row:07d}, rows numbered across files)
    dup = np.array([int(d[3:]) for d in removed.column("dup_of").to_pylist()], np.int64)
    same = (family[rows] >= 0) & (family[rows] == family[dup])
    members = np.bincount(family[family >= 0])
    planted = int((members[members > 0] - 1).sum())
    values = removed.column("value").to_numpy()
    return {"removed": int(len(keys)), "removed_in_own_family": int(same.sum()), "planted_copies": planted,
            "recall": round(float(same.sum()) / max(1, planted), 4),
            "precision": round(float(same.sum()) / max(1, len(keys)), 4),
            "min_removed_cosine": round(float(values.min()), 5) if len(values) else None}


def synthetic(args) -> dict:
    from _measure import measure

    tmp = args.tmp or tempfile.mkdtemp(prefix="semdedup-")
    run = os.path.join(tmp, "run")
    shutil.rmtree(run, ignore_errors=True)
    t0 = time.time()
    truth = generate(run, args.docs, args.files, args.dim, args.topics, args.dup_fraction, args.seed)
    gen_s = time.time() - t0
    os.sync()
    print(f"generated {args.docs:,} embeddings in {args.files} files ({gen_s:.0f} s): {truth}", flush=True)
    params = json.loads(args.params) if args.params else {}
    cmd = [sys.executable, os.path.abspath(__file__), "--inner", run, "--workers", str(args.workers),
           "--params", json.dumps(params)]
    m = measure(cmd, interval=args.interval)
    if m.returncode != 0:
        sys.exit(f"the measured run failed:\n{m.stderr}")
    phases = json.loads(m.stdout.strip().splitlines()[-1])
    quality = evaluate(run)
    with open(os.path.join(run, "dedup", "semantic_dedup", "fit.json"), encoding="utf-8") as fh:
        fit = json.load(fh)
    result = {"mode": "synthetic", "input": truth, "params": params, "workers": args.workers,
              "wall_s": round(m.wall_s, 2), **phases, "peak_rss_mib": round(m.peak_rss_mib),
              "peak_pss_mib": round(m.peak_pss_mib), "peak_procs": m.peak_procs,
              "cpu_s": round(m.user_s + m.sys_s, 1), **quality, "fit": fit,
              "machine": {"cpus": os.cpu_count(), "python": platform.python_version(),
                          "numpy": np.__version__},
              "goal": "<= 300 s wall, <= 3072 MiB peak RSS of the process tree"}
    if not args.keep:
        shutil.rmtree(tmp if not args.tmp else run, ignore_errors=True)
    return result


def compare_faiss(args) -> dict:
    """numpy's exact spherical k-means against faiss's (``spherical=True``), same sample, same iterations."""
    import faiss
    from threadpoolctl import threadpool_limits

    from dataclean.dedup import semantic as sem

    tmp = tempfile.mkdtemp(prefix="semdedup-faiss-")
    try:
        generate(tmp, args.sample, 1, args.dim, args.topics, args.dup_fraction, args.seed)
        t = pq.read_table(os.path.join(tmp, "_work", "pass1", "00000", "docs-00000.parquet"), columns=["embedding"])
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    from dataclean.embed.vectors import decode

    x32, _ = decode(t.column("embedding"))
    x16 = x32.astype(np.float16)
    out = {"sample": len(x16), "k": args.k, "iterations": args.iters, "threads": args.workers}
    with threadpool_limits(args.workers):
        t0 = time.perf_counter()
        fit = sem.kmeans(x16, args.k, args.iters, 0.0)
        out["numpy_s"] = round(time.perf_counter() - t0, 2)
        out["numpy_iterations"] = fit.iterations
        out["numpy_mean_cosine"] = round(fit.mean_cosine, 4)
    faiss.omp_set_num_threads(args.workers)
    km = faiss.Kmeans(x32.shape[1], args.k, niter=args.iters, spherical=True, seed=args.seed,
                      max_points_per_centroid=len(x32), verbose=False)
    t0 = time.perf_counter()
    km.train(x32)
    out["faiss_s"] = round(time.perf_counter() - t0, 2)
    sims, _ = km.index.search(x32, 1)
    out["faiss_mean_cosine"] = round(float(sims.mean()), 4)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=1_000_000)
    ap.add_argument("--files", type=int, default=20)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--topics", type=int, default=4000)
    ap.add_argument("--dup-fraction", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--params", help="semantic_dedup parameters as JSON, e.g. '{\"eps\": 0.02}'")
    ap.add_argument("--tmp", help="folder for the generated run (default: a new temporary folder)")
    ap.add_argument("--keep", action="store_true", help="keep the generated run folder")
    ap.add_argument("--interval", type=float, default=0.1, help="memory sampling interval, s")
    ap.add_argument("--json", default=os.path.join(HERE, "results", "semdedup.json"))
    ap.add_argument("--compare-faiss", action="store_true")
    ap.add_argument("--sample", type=int, default=100_000, help="(--compare-faiss) rows fitted")
    ap.add_argument("--k", type=int, default=1000, help="(--compare-faiss) clusters")
    ap.add_argument("--iters", type=int, default=10, help="(--compare-faiss) Lloyd iterations")
    ap.add_argument("--inner", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.inner:
        inner(args.inner, args.workers, json.loads(args.params) if args.params else {})
        return
    if args.compare_faiss:
        result = {"mode": "compare_faiss", **compare_faiss(args)}
    else:
        result = synthetic(args)
    print(json.dumps(result, indent=2))
    if args.json:
        key = result["mode"] if result["mode"] != "synthetic" else f"synthetic_{args.docs}"
        old = {}
        if os.path.isfile(args.json):
            with open(args.json, encoding="utf-8") as fh:
                old = json.load(fh)
        old[key] = result
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(old, fh, indent=2)
            fh.write("\n")


if __name__ == "__main__":
    main()
