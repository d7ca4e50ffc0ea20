"""Metrics for quality scorers: ROC AUC, precision and recall at a threshold, overall and per language.

Every scorer (heuristic, fastText, linear) is evaluated with :func:`evaluate_scores`, so their figures can
be compared. A label is 1 for a good document (the class the score should rank high) and 0 for a bad one.
"""
from __future__ import annotations

import math
from typing import Iterable

import numpy as np
import pyarrow as pa

#: Language key for documents without a language.
UNKNOWN_LANG = "und"

_TRUE = {"1", "pos", "positive", "good", "true", "yes", "keep", "hq"}
_FALSE = {"0", "neg", "negative", "bad", "false", "no", "drop", "remove", "lq"}


def roc_auc(scores, labels) -> float | None:
    """Area under the ROC curve: the probability that a random good document scores above a random bad
    one, ties counting one half (Mann-Whitney U / (n_pos * n_neg), with mid-ranks for ties). None when
    one class is absent. Equal to ``sklearn.metrics.roc_auc_score``."""
    s = np.asarray(scores, np.float64)
    y = np.asarray(labels).astype(bool)
    if s.shape != y.shape or s.ndim != 1:
        raise ValueError(f"scores and labels must be 1-d arrays of one length ({s.shape} vs {y.shape})")
    if np.isnan(s).any():
        raise ValueError("scores contain NaN")
    n_pos = int(y.sum())
    n_neg = len(y) - n_pos
    if n_pos == 0 or n_neg == 0:
        return None
    order = np.argsort(s, kind="mergesort")
    sorted_s = s[order]
    # mid-rank of each run of equal scores (1-based ranks)
    starts = np.r_[0, np.flatnonzero(np.diff(sorted_s)) + 1]
    ends = np.r_[starts[1:], len(s)]
    mid = (starts + ends + 1) / 2.0
    ranks = np.empty(len(s), np.float64)
    ranks[order] = np.repeat(mid, ends - starts)
    u = ranks[y].sum() - n_pos * (n_pos + 1) / 2.0
    return float(u / (n_pos * n_neg))


def precision_recall(scores, labels, threshold: float = 0.5) -> tuple[float | None, float | None]:
    """Precision and recall of "good" for the decision ``score >= threshold``. Precision is None when no
    document reaches the threshold, recall None without good documents."""
    s = np.asarray(scores, np.float64)
    y = np.asarray(labels).astype(bool)
    pred = s >= threshold
    tp = int(np.sum(pred & y))
    n_pred, n_pos = int(pred.sum()), int(y.sum())
    return (tp / n_pred if n_pred else None, tp / n_pos if n_pos else None)


def group_metrics(scores, labels, threshold: float = 0.5) -> dict:
    """n, n_pos, n_neg, auc, precision, recall, f1 (at ``threshold``) and the mean score of each class."""
    s = np.asarray(scores, np.float64)
    y = np.asarray(labels).astype(bool)
    p, r = precision_recall(s, y, threshold)
    f1 = 2 * p * r / (p + r) if p is not None and r is not None and p + r > 0 else None
    return {"n": int(len(y)), "n_pos": int(y.sum()), "n_neg": int((~y).sum()), "auc": roc_auc(s, y),
            "precision": p, "recall": r, "f1": f1,
            "mean_score_pos": float(s[y].mean()) if y.any() else None,
            "mean_score_neg": float(s[~y].mean()) if (~y).any() else None}


def evaluate_scores(scores, labels, langs=None, threshold: float = 0.5) -> dict:
    """The evaluation report of a scorer: ``{"threshold", "overall": {...}, "by_lang": {lang: {...}}}``,
    each group as :func:`group_metrics`. ``langs`` (optional, one per document, null allowed) selects the
    per-language groups; a null language is :data:`UNKNOWN_LANG`. Languages are sorted by document count."""
    s = np.asarray(scores, np.float64)
    y = parse_labels(labels) if not isinstance(labels, np.ndarray) or labels.dtype != bool else labels
    if len(s) != len(y):
        raise ValueError(f"{len(s)} scores but {len(y)} labels")
    report = {"threshold": float(threshold), "overall": group_metrics(s, y, threshold), "by_lang": {}}
    if langs is not None:
        lang = np.array([UNKNOWN_LANG if v is None or v == "" else v for v in _to_list(langs)], dtype=object)
        if len(lang) != len(s):
            raise ValueError(f"{len(s)} scores but {len(lang)} languages")
        values, counts = np.unique(lang.astype(str), return_counts=True)
        for code in values[np.lexsort((values, -counts))]:
            mask = lang == code
            report["by_lang"][str(code)] = group_metrics(s[mask], y[mask], threshold)
    return report


def parse_labels(values) -> np.ndarray:
    """Labels as booleans (True = good) from 1/0, true/false, or pos/neg, positive/negative, good/bad,
    keep/remove (case-insensitive). Raise ValueError naming the first value that is none of these, or a null."""
    if isinstance(values, np.ndarray) and values.dtype.kind in "biu":
        bad = ~np.isin(values, (0, 1))
        if bad.any():
            i = int(np.flatnonzero(bad)[0])
            raise ValueError(f"label {values[i].item()!r} (row {i}) is not 1/0, true/false, pos/neg or good/bad")
        return values.astype(bool)
    out = []
    for i, v in enumerate(_to_list(values)):
        if isinstance(v, (bool, np.bool_)):
            out.append(bool(v))
        elif isinstance(v, (int, np.integer)) and v in (0, 1):  # noqa: SIM114
            out.append(bool(v))
        elif isinstance(v, (float, np.floating)) and v in (0.0, 1.0):
            out.append(bool(v))
        elif isinstance(v, str) and v.strip().lower() in _TRUE | _FALSE:
            out.append(v.strip().lower() in _TRUE)
        else:
            raise ValueError(f"label {v!r} (row {i}) is not 1/0, true/false, pos/neg or good/bad")
    return np.array(out, dtype=bool)


def _to_list(values) -> list:
    if isinstance(values, (pa.Array, pa.ChunkedArray)):
        return values.to_pylist()
    if isinstance(values, np.ndarray):
        return values.tolist()
    return list(values) if isinstance(values, Iterable) else [values]


def format_metric(value, digits: int = 4) -> str:
    """A metric for a table: fixed decimals, or "-" when undefined."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, int):
        return str(value)
    return f"{value:.{digits}f}"


# --------------------------------------------------------------------------------------------------------
# Reading labelled documents, splitting by hash


def id_hash_unit(ids, seed: int, salt: str) -> np.ndarray:
    """A number in [0, 1) per id, from xxh3-64 of ``salt``, ``seed`` and the id: the same id always gets
    the same number, whatever the order, the batch or the machine."""
    import xxhash

    prefix = f"{salt}\x00{seed}\x00".encode()
    h = np.fromiter((xxhash.xxh3_64_intdigest(prefix + v.encode("utf-8")) for v in _to_list(ids)), np.uint64)
    return (h >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def holdout_mask(ids, seed: int = 0, fraction: float = 0.1) -> np.ndarray:
    """True for the documents held out for evaluation: ``id_hash_unit(id, seed, "holdout") < fraction``."""
    if not 0.0 <= fraction < 1.0:
        raise ValueError(f"holdout fraction must be in [0, 1), not {fraction}")
    return id_hash_unit(ids, seed, "holdout") < fraction


def normalize_lang(value: str | None) -> str | None:
    """A language code or BCP-47 tag reduced to its language: ``zh-CN`` / ``zh_TW`` -> ``zh``."""
    if value is None:
        return None
    code = value.replace("_", "-").split("-")[0].strip().lower()
    return code or None


def read_documents(inputs: list[str], text_column: str = "text", id_column: str | None = "id",
                   lang_column: str | None = "lang", label_column: str | None = None,
                   max_docs: int | None = None, seed: int = 0,
                   source_column: str | None = None) -> tuple[pa.Table, int]:
    """Documents of Parquet/JSONL inputs (files, folders, globs) read with dataclean's readers.

    Returns a table ``id, text, lang, source[, label]`` and the number of unusable records skipped. ``lang`` is
    ``lang_column`` when the input has it, else its ``lang_hint`` column, reduced to the language
    (``zh-CN`` -> ``zh``); null when neither. ``label`` (bool, True = good) is read from ``label_column``
    (see :func:`parse_labels`); a record without one raises ValueError. With ``max_docs`` the documents
    with the ``max_docs`` smallest ``id_hash_unit(id, seed, "sample")`` are kept (a uniform sample, the
    same whatever the file order), selected while streaming. ``source`` is ``source_column`` where the
    input has it, else null.
    """
    import json

    from dataclean.io.readers import ColumnMapping, discover_inputs, read_shard

    paths = discover_inputs(list(inputs))
    if not paths:
        raise FileNotFoundError(f"no .parquet/.jsonl input files in {', '.join(inputs)}")
    mapping = ColumnMapping(text=text_column, id=id_column, source=source_column, url=None, lang=lang_column,
                            default_source="")
    kept: list[pa.Table] = []
    n_kept, n_bad = 0, 0
    for index, path in enumerate(paths):
        for chunk in read_shard(path, index, mapping):
            n_bad += chunk.bad.num_rows if chunk.bad is not None else 0
            docs = chunk.docs
            if not docs.num_rows:
                continue
            langs = docs.column("lang").to_pylist()
            metas = None
            if label_column is not None or any(v is None for v in langs):
                metas = [json.loads(m) if m else {} for m in docs.column("meta").to_pylist()]
            lang = [normalize_lang(v if v is not None else (metas[i].get("lang_hint") if metas else None))
                    for i, v in enumerate(langs)]
            source = [v or None for v in docs.column("source").to_pylist()] if source_column else [None] * len(lang)
            cols = {"id": docs.column("id"), "text": docs.column("text"), "lang": pa.array(lang, pa.string()),
                    "source": pa.array(source, pa.string())}
            if label_column is not None:
                missing = [i for i, m in enumerate(metas) if label_column not in m]
                if missing:
                    raise ValueError(f"{path}: record {docs.column('origin_row')[missing[0]].as_py()} has no "
                                     f"label column {label_column!r}")
                try:
                    cols["label"] = pa.array(parse_labels([m[label_column] for m in metas]), pa.bool_())
                except ValueError as exc:
                    raise ValueError(f"{path}: {exc}") from None
            table = pa.table(cols)
            if max_docs is not None:
                table = table.append_column("_h", pa.array(id_hash_unit(table.column("id"), seed, "sample")))
            kept.append(table)
            n_kept += table.num_rows
            if max_docs is not None and n_kept > 2 * max_docs:
                kept = [_smallest(pa.concat_tables(kept), max_docs)]
                n_kept = kept[0].num_rows
    if not kept:
        schema = {"id": pa.string(), "text": pa.string(), "lang": pa.string(), "source": pa.string()}
        if label_column is not None:
            schema["label"] = pa.bool_()
        return pa.table({k: pa.array([], t) for k, t in schema.items()}), n_bad
    table = pa.concat_tables(kept)
    if max_docs is not None:
        table = _smallest(table, max_docs).drop_columns(["_h"])
    return table.combine_chunks(), n_bad


def _smallest(table: pa.Table, n: int) -> pa.Table:
    import pyarrow.compute as pc

    order = pc.sort_indices(table, sort_keys=[("_h", "ascending"), ("id", "ascending")])
    return table.take(order.slice(0, n))
