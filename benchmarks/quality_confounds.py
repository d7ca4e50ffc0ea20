"""Does the linear quality classifier learn quality, or the language, length and source of its training sets?

    python benchmarks/quality_confounds.py [--corpus /work/shared/corpus/small] [--dev /work/shared/labelled/dclm-dev.jsonl]

The confounded training set (``dataclean quality train --positive ... --negative ...`` as people first try it):

* good: every ``wiki``, ``books`` and ``docs`` document of ``small/`` (mostly Chinese: cmrc2018, C3, Debian and
  LibreOffice docs; a few English Brown, Wikipedia, python-docs, perl-doc);
* bad: the SpamAssassin spam mails and the nlp-corpus one-liners of ``small/`` (English).

Each variant is trained on it and scored on the English human labels of dclm-dev (AUC of the score against
``label``): classes balanced only (format version 1's behaviour), language and length balanced
(``--balance lang,length``, the default), per-language weights (``--per-lang``), each with and without the
dense features (``--dense``). Then each variant's warnings. Writes ``benchmarks/results/quality_confounds.json``.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dataclean.quality.evaluate import normalize_lang, roc_auc  # noqa: E402
from dataclean.quality.linear import DEFAULT_DENSE, class_differences, fit, lang_keys  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", default="/work/shared/corpus/small")
    ap.add_argument("--dev", default="/work/shared/labelled/dclm-dev.jsonl")
    ap.add_argument("--out", default=str(REPO / "benchmarks/results/quality_confounds.json"))
    args = ap.parse_args()
    table = pa.concat_tables([pq.read_table(p) for p in sorted(Path(args.corpus).glob("*.parquet"))])
    rows = table.to_pylist()
    good = [r for r in rows if r["source"] in ("wiki", "books", "docs")]
    bad = [r for r in rows if "/spam-" in r["id"] or r["origin"] == "nlp-corpus"]
    docs = good + bad
    texts = pa.array([r["text"] for r in docs], pa.string())
    langs = pa.array([normalize_lang(r["lang_hint"]) for r in docs], pa.string())
    y = np.r_[np.ones(len(good), bool), np.zeros(len(bad), bool)]
    keys = lang_keys(texts, langs)
    warnings = class_differences(y, keys, [len(r["text"]) for r in docs], [r["source"] for r in docs])
    dev = [json.loads(line) for line in open(args.dev, encoding="utf-8")]
    dev_texts = [r["text"] for r in dev]
    dev_y = np.array([r["label"] for r in dev]).astype(bool)
    results = {"n_good": len(good), "n_bad": len(bad), "warnings": warnings, "dev": args.dev, "variants": {}}
    print(f"train: {len(good)} good, {len(bad)} bad; dev: {len(dev)} documents")
    for w in warnings:
        print(f"warning: {w}")
    variants = {"classes only": dict(balance=()), "lang,length": dict(balance=("lang", "length")),
                "per-lang + lang,length": dict(balance=("lang", "length"), per_lang=True)}
    for name, kw in variants.items():
        for dense in (False, True):
            t0 = time.perf_counter()
            model, _ = fit(texts, y, langs=langs, dense=DEFAULT_DENSE if dense else None, **kw)
            auc = roc_auc(model.predict_proba(dev_texts), dev_y)
            label = f"{name}{' + dense' if dense else ''}"
            results["variants"][label] = {"dclm_dev_auc": auc, "heads": sorted(model.heads),
                                          "seconds": round(time.perf_counter() - t0, 1)}
            print(f"{label:32s} dclm-dev AUC {auc:.4f}  ({time.perf_counter() - t0:.0f} s)", flush=True)
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
