"""``dataclean eval``: measure a recipe's decisions against labelled documents.

A labels file (JSON Lines, ``.jsonl.gz``/``.jsonl.zst``, or Parquet) holds one document per record: ``id``,
``text`` and ``label`` (keep/remove, 1/0, good/bad, true/false: 1 = a document to keep), and optionally
``lang`` (the language to report it under) and ``source`` (the source name the pipeline sees; without it, the
config's ``input.default_source``). :func:`evaluate` runs the whole pipeline as configured (both passes and the
global step: dedup and the quality filter decide too) on those documents in a temporary folder, and compares
each document's fate with its label:

* **removal precision**: removed documents labelled bad / removed documents;
* **removal recall**: removed documents labelled bad / documents labelled bad;
* **good retention**: kept documents labelled good / documents labelled good;
* for **each rule**: its removals and how many of them are labelled bad (its precision);
* the **AUC of ``quality_score``** against the labels, over every document the configured scorer scores: the
  run's score where the document reached the ``quality_score`` stage, else the scorer's score of its
  normalized text (so documents removed by an earlier rule count too);
* every **misjudged** document: a good one removed (with the stage, rule, deciding value and threshold) and a
  bad one kept (with its quality score).

Overall and per language: the label file's ``lang`` where it has one, else the language the run's
``langid`` stage gave the document (``und`` when it has none).
"""
from __future__ import annotations

import gzip
import io
import json
import os
import shutil
import tempfile
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dataclean.io.fs import files_in
from dataclean.quality.evaluate import UNKNOWN_LANG, normalize_lang, parse_labels, roc_auc
from dataclean.sections import InputSection
from dataclean.sql import sql_list


class LabelsError(ValueError):
    """A labels file that cannot be used; the message is one line meant for the user."""


@dataclass(frozen=True)
class LabelColumns:
    text: str = "text"
    id: str | None = "id"
    label: str = "label"
    lang: str | None = "lang"
    source: str | None = "source"


def _records(path: str) -> list[dict]:
    if path.endswith(".parquet"):
        return pq.read_table(path).to_pylist()
    if path.endswith(".gz"):
        fh = io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    elif path.endswith(".zst"):
        import zstandard

        fh = io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(open(path, "rb")), encoding="utf-8")
    else:
        fh = open(path, encoding="utf-8")
    out = []
    with fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except json.JSONDecodeError as exc:
                raise LabelsError(f"{path}:{lineno}: not JSON ({exc.msg})") from None
            if not isinstance(rec, dict):
                raise LabelsError(f"{path}:{lineno}: not a JSON object")
            out.append(rec)
    return out


def read_labels(paths: list[str], columns: LabelColumns = LabelColumns()) -> pa.Table:
    """The labelled documents of ``paths``: a table ``id, text, label (bool, True = keep), lang, source``
    (``lang``, ``source`` null where absent). Raises :class:`LabelsError` naming the file and the fix."""
    ids, texts, labels, langs, sources = [], [], [], [], []
    for path in paths:
        if not os.path.isfile(path):
            raise LabelsError(f"labels file not found: {path}")
        recs = _records(path)
        if not recs:
            continue
        have = sorted({k for r in recs[:1000] for k in r})
        for what, col, flag in (("text", columns.text, "--text-column"), ("label", columns.label, "--label-column")):
            missing = next((i for i, r in enumerate(recs) if r.get(col) is None), None)
            if missing is not None:
                raise LabelsError(f"{path}: record {missing + 1} has no {what} column {col!r}; its columns are "
                                  f"{', '.join(have)}: pass {flag} NAME")
        try:
            labels.extend(parse_labels([r[columns.label] for r in recs]))
        except ValueError as exc:
            raise LabelsError(f"{path}: {exc} (use keep/remove, 1/0, good/bad or true/false)") from None
        base = os.path.basename(path)
        for i, r in enumerate(recs):
            ident = r.get(columns.id) if columns.id else None
            ids.append(str(ident) if ident is not None else f"{base}#{i}")
            texts.append(str(r[columns.text]))
            lang = r.get(columns.lang) if columns.lang else None
            langs.append(normalize_lang(str(lang)) if lang is not None else None)
            src = r.get(columns.source) if columns.source else None
            sources.append(str(src) if src is not None else None)
    seen: set[str] = set()
    for i in ids:
        if i in seen:
            raise LabelsError(f"id {i!r} is labelled twice: ids must be unique across the labels files")
        seen.add(i)
    if not ids:
        raise LabelsError(f"no labelled documents in {', '.join(paths)}")
    return pa.table({"id": pa.array(ids, pa.string()), "text": pa.array(texts, pa.string()),
                     "label": pa.array(labels, pa.bool_()), "lang": pa.array(langs, pa.string()),
                     "source": pa.array(sources, pa.string())})


# --------------------------------------------------------------------------------------------------------


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def group_report(label: np.ndarray, removed: np.ndarray, score: np.ndarray) -> dict:
    """Removal metrics of one group. ``label`` True = good; ``score`` NaN where the document has none."""
    bad = ~label
    n_removed, n_bad, n_good = int(removed.sum()), int(bad.sum()), int(label.sum())
    tp = int((removed & bad).sum())
    scored = ~np.isnan(score)
    auc = roc_auc(score[scored], label[scored]) if scored.any() else None
    return {"docs": int(len(label)), "good": n_good, "bad": n_bad, "removed": n_removed,
            "removed_bad": tp, "removed_good": n_removed - tp, "kept_bad": n_bad - tp,
            "precision": _ratio(tp, n_removed), "recall": _ratio(tp, n_bad),
            "good_retention": _ratio(n_good - (n_removed - tp), n_good),
            "quality_auc": auc, "scored": int(scored.sum())}


def _scores_for(labels: pa.Table, config: dict) -> np.ndarray:
    """``quality_score`` of every labelled document by the configured scorer, on normalized text with the
    run's language (the rules in front of the scorer are not applied). NaN where the scorer does not score
    (code) or where the config has no ``quality_score`` stage."""
    from dataclean.pipeline import apply_stage, build_stage
    from dataclean.sources import KIND_COLUMN, SourceKinds
    from dataclean.stages.base import with_columns

    n = labels.num_rows
    specs = [s for s in config["pipeline"] if s.get("stage") in ("normalize", "langid", "quality_score")]
    if not any(s["stage"] == "quality_score" for s in specs):
        return np.full(n, np.nan)
    source = pc.fill_null(labels.column("source"), InputSection.of(config).default_source).combine_chunks()
    batch = pa.RecordBatch.from_pydict({"id": labels.column("id").combine_chunks(),
                                        "text": labels.column("text").combine_chunks(), "source": source,
                                        "lang": pa.nulls(n, pa.string())})
    batch = with_columns(batch, {KIND_COLUMN: SourceKinds.from_config(config).kinds(source, n)})
    for spec in specs:
        result = apply_stage(build_stage(spec), batch)
        batch = result.batch
        if spec["stage"] == "quality_score":
            return np.asarray(pc.fill_null(batch.column("quality_score"), np.nan).to_numpy(zero_copy_only=False),
                              np.float64)
    return np.full(n, np.nan)


def evaluate(labels: pa.Table, config=None, workers: int = 1, keep: str | None = None,
             overrides: dict | None = None) -> dict:
    """Run the pipeline (``config``: a YAML path, a mapping or None for the defaults) on ``labels`` (from
    :func:`read_labels`) and compare every document's fate with its label. ``keep`` names a folder to keep
    the run in (for ``dataclean inspect``); otherwise a temporary one is removed. Returns the report
    (see :func:`format_report` and the module docstring)."""
    from dataclean.config import resolve_config
    from dataclean.exec.runner import run

    cfg = resolve_config(config, {**(overrides or {}), "input.columns.text": "text", "input.columns.id": "id",
                                  "input.columns.source": "source", "input.columns.url": None,
                                  "input.columns.lang": None, "output.report": False})
    tmp = tempfile.mkdtemp(prefix="dataclean-eval-")
    try:
        inp = os.path.join(tmp, "labels.parquet")
        pq.write_table(labels.select(["id", "text", "source"]), inp)
        out = keep or os.path.join(tmp, "run")
        summary = run([inp], out, config=cfg, workers=workers, fresh=keep is not None, quiet=True)
        fates = _fates(out)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return _report(labels, fates, _scores_for(labels, cfg), summary.sources, out if keep else None)


def _fates(out: str) -> dict[str, dict]:
    """id -> {removed, stage, rule, reason, value, threshold, dup_of, lang, quality_score} from a run folder."""
    import duckdb

    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")  # (no foreign output in a notebook)
    fates: dict[str, dict] = {}
    data_files = files_in(os.path.join(out, "data"), "*.parquet")
    rejected_files = files_in(os.path.join(out, "rejected"), "*.parquet")
    data, rejected = f"read_parquet({sql_list(data_files)})", f"read_parquet({sql_list(rejected_files)})"
    if data_files:
        cols = {c[0] for c in con.sql(f"DESCRIBE SELECT * FROM {data}").fetchall()}
        q = "quality_score" if "quality_score" in cols else "NULL"
        for ident, lang, score in con.sql(f"SELECT id, lang, {q} FROM {data}").fetchall():
            fates[ident] = {"removed": False, "lang": lang, "quality_score": score}
    if rejected_files:
        cols = {c[0] for c in con.sql(f"DESCRIBE SELECT * FROM {rejected}").fetchall()}
        sel = ", ".join(c if c in cols else f"NULL AS {c}" for c in
                        ("id", "stage", "rule", "reason", "value", "threshold", "dup_of", "lang", "quality_score"))
        for row in con.sql(f"SELECT {sel} FROM {rejected}").fetchall():
            ident, stage, rule, reason, value, threshold, dup_of, lang, score = row
            fates[ident] = {"removed": True, "stage": stage, "rule": rule, "reason": reason, "value": value,
                            "threshold": threshold, "dup_of": dup_of, "lang": lang, "quality_score": score}
    con.close()
    return fates


def _report(labels: pa.Table, fates: dict, scores: np.ndarray, sources: dict, kept_run: str | None) -> dict:
    ids = labels.column("id").to_pylist()
    label = labels.column("label").to_numpy(zero_copy_only=False).astype(bool)
    missing = [i for i in ids if i not in fates]
    if missing:  # every input record has a fate; a labels id the run lost would be a bug
        raise RuntimeError(f"{len(missing)} labelled documents have no fate in the run (first: {missing[0]!r})")
    removed = np.array([fates[i]["removed"] for i in ids], bool)
    # the run's own score where the document reached the scorer (after C4's line cleaning), else the scorer's
    # score of its normalized text
    run_score = np.array([np.nan if fates[i].get("quality_score") is None else fates[i]["quality_score"]
                          for i in ids], np.float64)
    scores = np.where(np.isnan(run_score), scores, run_score)
    given = labels.column("lang").to_pylist()
    langs = np.array([g or normalize_lang(fates[i].get("lang")) or UNKNOWN_LANG for g, i in zip(given, ids)],
                     dtype=object)
    report = {"overall": group_report(label, removed, scores), "by_lang": {}, "rules": [], "misjudged": [],
              "sources": sources, "run": kept_run}
    values, counts = np.unique(langs.astype(str), return_counts=True)
    for code in values[np.lexsort((values, -counts))]:
        m = langs == code
        report["by_lang"][str(code)] = group_report(label[m], removed[m], scores[m])
    rules: dict[tuple[str, str], dict] = {}
    for k, i in enumerate(ids):
        f = fates[i]
        if f["removed"]:
            r = rules.setdefault((f["stage"], f["rule"]), {"stage": f["stage"], "rule": f["rule"], "removed": 0,
                                                          "removed_bad": 0, "by_lang": {}})
            r["removed"] += 1
            r["removed_bad"] += int(not label[k])
            lr = r["by_lang"].setdefault(str(langs[k]), {"removed": 0, "removed_bad": 0})
            lr["removed"] += 1
            lr["removed_bad"] += int(not label[k])
        if f["removed"] == bool(label[k]):  # a good document removed, or a bad one kept
            entry = {"id": i, "lang": str(langs[k]), "label": "keep" if label[k] else "remove",
                     "fate": "removed" if f["removed"] else "kept",
                     "quality_score": None if np.isnan(scores[k]) else round(float(scores[k]), 4)}
            if f["removed"]:
                entry.update({key: f[key] for key in ("stage", "rule", "reason", "value", "threshold", "dup_of")})
            report["misjudged"].append(entry)
    for r in rules.values():
        r["precision"] = _ratio(r["removed_bad"], r["removed"])
    report["rules"] = sorted(rules.values(), key=lambda r: (-r["removed"], r["stage"], r["rule"]))
    return report


def _f(v, digits: int = 3) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def format_report(report: dict) -> str:
    """The report as plain-text tables (what ``dataclean eval`` prints)."""
    lines = []
    head = f"{'group':<10} {'docs':>6} {'good':>6} {'bad':>6} {'removed':>8} {'precision':>9} {'recall':>7} " \
           f"{'good kept':>9} {'q AUC':>6}"
    lines.append(head)
    rows = [("all", report["overall"])] + [(f"lang={k}", v) for k, v in report["by_lang"].items()]
    for name, m in rows:
        lines.append(f"{name:<10} {m['docs']:>6} {m['good']:>6} {m['bad']:>6} {m['removed']:>8} "
                     f"{_f(m['precision']):>9} {_f(m['recall']):>7} {_f(m['good_retention']):>9} "
                     f"{_f(m['quality_auc']):>6}")
    lines.append("")
    lines.append(f"{'stage / rule':<48} {'removed':>8} {'bad':>5} {'precision':>9}")
    for r in report["rules"]:
        lines.append(f"{r['stage'] + ' / ' + r['rule']:<48} {r['removed']:>8} {r['removed_bad']:>5} "
                     f"{_f(r['precision']):>9}")
    if not report["rules"]:
        lines.append("(nothing removed)")
    lines.append("")
    wrong = report["misjudged"]
    lines.append(f"misjudged: {len(wrong)} ({sum(w['fate'] == 'removed' for w in wrong)} good removed, "
                 f"{sum(w['fate'] == 'kept' for w in wrong)} bad kept)")
    for w in wrong:
        if w["fate"] == "removed":
            why = f"{w['stage']} / {w['rule']} value={_f(w['value'])} threshold={_f(w['threshold'])}"
            if w.get("dup_of"):
                why += f" dup_of={w['dup_of']}"
        else:
            why = f"kept, quality_score={_f(w['quality_score'])}"
        lines.append(f"  {w['label']:<6} {w['lang']:<4} {w['id']}: {why}")
    return "\n".join(lines)
