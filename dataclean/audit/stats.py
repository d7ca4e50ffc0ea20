"""Stats of a finished run, aggregated with DuckDB over data/ and rejected/.

Written to ``stats/``:

* ``removed.parquet``: documents, characters and estimated tokens removed per stage × rule × reason ×
  source × language;
* ``kept.parquet``: the same for kept documents per source × language, plus ``output_docs`` /
  ``output_tokens``, which also count the extra epochs a mixture recipe repeats;
* ``mixture.parquet`` (with a recipe; written by the global step): target vs achieved tokens per source;
* ``funnel.parquet``: per source and stage (in pipeline order), what went in and what came out; "in" at a
  stage is everything kept plus everything removed at that stage or later, so the first stage's "in" is
  the input;
* ``inputs.parquet``: per input file, records read, kept, removed and bad records;
* ``contamination.parquet`` (with a decontaminate stage): per benchmark × source, the documents removed for
  containing one of its items, the distinct items they contain, and the kept documents that share some of
  an item's n-grams (below the threshold, or every match with ``mode: mark``);
* ``rewrites.parquet``: in-place rewrites of the kept documents per stage × signal × source: how many
  documents were changed (``docs``) and the signal's sum (``total``): PII masks per kind, C4's removed lines
  and characters, normalization's repairs. The signals are the stages' ``rewrite_columns``;
* ``summary.json``: the totals, for machines.
"""
from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.parquet as pq

from dataclean.audit.tables import connect, ident, kept_records_filter, view_columns
from dataclean.io.writers import atomic_write_table, write_json_atomic


def write_stats(out: str, stage_order: list[str], pass1: list[dict], rewrites: dict[str, str] | None = None,
                memory_limit: str | None = None) -> dict:
    """Write ``stats/`` (see the module docstring) and return the summary. ``rewrites``: signal column ->
    the stage that counts its rewrites in it; ``memory_limit``: DuckDB's."""
    con = connect(out, memory_limit=memory_limit)
    kept_columns = dict(view_columns(con, "kept"))
    rewrite_rows = {k: [] for k in ("stage", "signal", "source", "docs", "total")}
    for col, stage in (rewrites or {}).items():
        if col not in kept_columns:
            continue
        q = ident(col)
        orig_ = kept_records_filter(kept_columns)
        for source, docs, total in con.sql(f"""
                SELECT source, count(*) FILTER (WHERE {q} > 0), coalesce(sum({q}), 0)::BIGINT FROM kept
                WHERE {orig_} GROUP BY ALL ORDER BY source""").fetchall():
            for k, v in zip(rewrite_rows, (stage, col, source, int(docs), int(total))):
                rewrite_rows[k].append(v)
    folder = os.path.join(out, "stats")
    removed = con.sql("""
        SELECT stage, rule, reason, source, coalesce(lang, 'unknown') AS lang, count(*) AS docs,
               sum(coalesce(n_chars, 0))::BIGINT AS chars, sum(coalesce(n_tokens, 0))::BIGINT AS tokens
        FROM removed GROUP BY ALL ORDER BY stage, rule, reason, source, lang""").to_arrow_table()
    orig = kept_records_filter(dict(view_columns(con, "kept")))  # a mixture's copies are rows, not records
    kept = con.sql(f"""
        SELECT source, coalesce(lang, 'unknown') AS lang, count(*) FILTER (WHERE {orig}) AS docs,
               coalesce(sum(n_chars) FILTER (WHERE {orig}), 0)::BIGINT AS chars,
               coalesce(sum(n_tokens) FILTER (WHERE {orig}), 0)::BIGINT AS tokens,
               count(*) AS output_docs, sum(n_tokens)::BIGINT AS output_tokens
        FROM kept GROUP BY ALL ORDER BY source, lang""").to_arrow_table()
    per_file = {r[0]: r[1:] for r in con.sql(f"""
        SELECT origin_file, sum(k), sum(r), sum(b) FROM (
            SELECT origin_file, count(*) AS k, 0 AS r, 0 AS b FROM kept WHERE {orig} GROUP BY ALL
            UNION ALL
            SELECT origin_file, 0, count(*), count(*) FILTER (WHERE reason = 'bad_record') FROM removed GROUP BY ALL)
        GROUP BY origin_file""").fetchall()}
    contamination = _contamination(con, kept_columns)
    con.close()

    atomic_write_table(removed, os.path.join(folder, "removed.parquet"))
    atomic_write_table(kept, os.path.join(folder, "kept.parquet"))
    atomic_write_table(_funnel(removed, kept, stage_order, pass1), os.path.join(folder, "funnel.parquet"))
    inputs = pa.table({
        "input": [p["input"] for p in pass1],
        "status": [p["status"] for p in pass1],
        "records": [p.get("records") for p in pass1],
        "kept": [int(per_file.get(p["input"], (0, 0, 0))[0]) for p in pass1],
        "removed": [int(per_file.get(p["input"], (0, 0, 0))[1]) for p in pass1],
        "bad_records": [int(per_file.get(p["input"], (0, 0, 0))[2]) for p in pass1],
        "error": [p.get("error") for p in pass1],
    })
    atomic_write_table(inputs, os.path.join(folder, "inputs.parquet"))
    rewrites_table = pa.table(rewrite_rows, schema=pa.schema([("stage", pa.string()), ("signal", pa.string()),
                                                             ("source", pa.string()), ("docs", pa.int64()),
                                                             ("total", pa.int64())]))
    atomic_write_table(rewrites_table, os.path.join(folder, "rewrites.parquet"))

    summary = _summary(removed, kept, stage_order, pass1)
    totals: dict = {}
    for stage, col, docs, total in zip(rewrite_rows["stage"], rewrite_rows["signal"], rewrite_rows["docs"],
                                       rewrite_rows["total"]):
        t = totals.setdefault(f"{stage}/{col}", {"docs": 0, "total": 0})
        t["docs"] += docs
        t["total"] += total
    summary["rewrites"] = totals
    if contamination is not None:
        atomic_write_table(contamination, os.path.join(folder, "contamination.parquet"))
        by_bench: dict = {}
        for r in contamination.to_pylist():
            b = by_bench.setdefault(r["benchmark"], {"removed": 0, "items": 0, "kept_with_overlap": 0})
            b["removed"] += r["removed"]
            b["kept_with_overlap"] += r["kept_with_overlap"]
        for bench, items in _items_per_benchmark(out).items():
            by_bench.setdefault(bench, {"removed": 0, "items": 0, "kept_with_overlap": 0})["items"] = items
        summary["contamination"] = by_bench
    mixture = os.path.join(folder, "mixture.parquet")
    if os.path.exists(mixture):  # written by the mixture stage in the global step
        summary["mixture"] = pq.read_table(mixture).to_pylist()
    write_json_atomic(summary, os.path.join(folder, "summary.json"))
    return summary


def _contamination(con, kept_columns: dict) -> pa.Table | None:
    """Per benchmark × source: removed documents, distinct items, kept documents with some overlap."""
    removed_columns = dict(view_columns(con, "removed"))
    if "decontam_benchmark" not in removed_columns and "decontam_benchmark" not in kept_columns:
        return None
    parts = []
    if "decontam_benchmark" in removed_columns:
        parts.append("""SELECT decontam_benchmark AS benchmark, source, count(*) AS removed,
                        count(DISTINCT decontam_item) AS items, 0 AS kept_with_overlap
                        FROM removed WHERE rule = 'benchmark_overlap' GROUP BY ALL""")
    if "decontam_benchmark" in kept_columns:
        parts.append(f"""SELECT decontam_benchmark, source, 0, 0, count(*) FROM kept
                         WHERE decontam_overlap > 0 AND {kept_records_filter(kept_columns)} GROUP BY ALL""")
    rows = con.sql(f"""SELECT benchmark, source, sum(removed)::BIGINT AS removed, sum(items)::BIGINT AS items,
                       sum(kept_with_overlap)::BIGINT AS kept_with_overlap
                       FROM ({' UNION ALL '.join(parts)}) GROUP BY ALL ORDER BY benchmark, source""").to_arrow_table()
    return rows.cast(pa.schema([("benchmark", pa.string()), ("source", pa.string()), ("removed", pa.int64()),
                                ("items", pa.int64()), ("kept_with_overlap", pa.int64())]))


def _items_per_benchmark(out: str) -> dict[str, int]:
    """Distinct items of each benchmark found in removed documents (over all sources)."""
    con = connect(out)
    try:
        if "decontam_benchmark" not in dict(view_columns(con, "removed")):
            return {}
        return {b: int(n) for b, n in con.sql("""SELECT decontam_benchmark, count(DISTINCT decontam_item) FROM removed
                                                WHERE rule = 'benchmark_overlap' GROUP BY ALL""").fetchall()}
    finally:
        con.close()


def _sum_counts(ok: list[dict], key: str) -> dict[str, int]:
    """The per-task counts under ``key`` summed over the tasks (``skipped_records``: records of the inputs that
    are not documents, by kind; ``url_blocked_by_category``), sorted by name."""
    total: dict[str, int] = {}
    for p in ok:
        for k, v in (p.get(key) or {}).items():
            total[k] = total.get(k, 0) + v
    return dict(sorted(total.items()))


def _sum_by(table: pa.Table, keys: list[str], value: str = "docs") -> dict:
    out: dict = {}
    cols = [table.column(k).to_pylist() for k in keys]
    for vals, v in zip(zip(*cols), table.column(value).to_pylist()):
        key = vals[0] if len(vals) == 1 else "/".join(vals)
        out[key] = out.get(key, 0) + v
    return out


def _funnel(removed: pa.Table, kept: pa.Table, stages: list[str], pass1: list[dict]) -> pa.Table:
    sources = sorted(set(removed.column("source").to_pylist()) | set(kept.column("source").to_pylist()), key=str)
    rows = {k: [] for k in ("source", "step", "stage", "docs_in", "docs_out", "chars_in", "chars_out",
                            "tokens_in", "tokens_out")}
    for source in sources + ["(all)"]:
        def pick(t):
            return t if source == "(all)" else t.filter(pa.compute.equal(t.column("source"), source))
        k, r = pick(kept), pick(removed)
        acc = {m: sum(k.column(m).to_pylist()) for m in ("docs", "chars", "tokens")}
        by_stage = {m: _sum_by(r, ["stage"], m) if r.num_rows else {} for m in ("docs", "chars", "tokens")}
        order = stages + sorted(set(by_stage["docs"]) - set(stages))
        entries = []
        for stage in reversed(order):
            out = dict(acc)
            for m in acc:
                acc[m] += by_stage[m].get(stage, 0)
            entries.append((stage, dict(acc), out))
        for step, (stage, cin, cout) in enumerate(reversed(entries)):
            rows["source"].append(source)
            rows["step"].append(step)
            rows["stage"].append(stage)
            for m in ("docs", "chars", "tokens"):
                rows[f"{m}_in"].append(cin[m])
                rows[f"{m}_out"].append(cout[m])
    return pa.table(rows)


def _summary(removed: pa.Table, kept: pa.Table, stages: list[str], pass1: list[dict]) -> dict:
    ok = [p for p in pass1 if p["status"] == "ok"]
    input_by_source: dict[str, int] = {}
    for p in ok:
        for s, n in p["records_by_source"].items():
            input_by_source[s] = input_by_source.get(s, 0) + n
    kept_by_source = _sum_by(kept, ["source"]) if kept.num_rows else {}
    removed_by_source = _sum_by(removed, ["source"]) if removed.num_rows else {}
    by_source = {}
    for s in sorted(set(input_by_source) | set(kept_by_source) | set(removed_by_source), key=str):
        by_source[s] = {"input": input_by_source.get(s, 0), "kept": kept_by_source.get(s, 0),
                        "removed": removed_by_source.get(s, 0)}
    input_records = sum(p["records"] for p in ok)
    n_kept = sum(kept.column("docs").to_pylist())
    n_removed = sum(removed.column("docs").to_pylist())
    by_stage = _sum_by(removed, ["stage"]) if removed.num_rows else {}
    return {
        "input_files": len(pass1),
        "failed_inputs": [{"input": p["input"], "error": p["error"]} for p in pass1 if p["status"] != "ok"],
        "input_records": input_records,
        "input_text_bytes": sum(p["text_bytes"] for p in ok),
        "kept": n_kept,
        "removed": n_removed,
        "bad_records": sum(p["bad_records"] for p in ok),
        "skipped_records": _sum_counts(ok, "skipped_records"),
        "url_blocked_by_category": _sum_counts(ok, "url_blocked_by_category"),
        "kept_chars": sum(kept.column("chars").to_pylist()),
        "kept_tokens": sum(kept.column("tokens").to_pylist()),
        "output_docs": sum(kept.column("output_docs").to_pylist()),  # kept + a mixture's repeated copies
        "output_tokens": sum(v or 0 for v in kept.column("output_tokens").to_pylist()),
        "stages": stages,
        "removed_by_stage": {s: by_stage[s] for s in stages if s in by_stage},
        "removed_by_rule": _sum_by(removed, ["stage", "rule"]) if removed.num_rows else {},
        "by_source": by_source,
        "conservation_ok": input_records == n_kept + n_removed and all(
            v["input"] == v["kept"] + v["removed"] for v in by_source.values()),
    }
