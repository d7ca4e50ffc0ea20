"""``dataclean inspect``: the fate of single documents of a run, and why.

For each document asked for (by id, or by its text):

* **fate**: kept, or removed by which stage, rule and reason, with the deciding value, the threshold, the
  signal the rule reads and the ledger's detail;
* **duplicates**: for an exact duplicate its group (``dedup/exact_groups.parquet``), for a near-duplicate
  its cluster (``dedup/clusters.parquet``), with the kept representative (``dup_of``), the cluster size and
  each member's similarity; a kept document that is a representative gets its group or cluster too;
* **text**, truncated unless asked in full;
* **anomalies**, computed from the text itself (so also for a text that is not in the run): the longest
  repeated run (:func:`dataclean.stages.runs.longest_run`, runs from :data:`MIN_RUN_CHARS` characters), the
  garble signals of :class:`dataclean.stages.garbled.Garbled` with the run's thresholds, and the letters
  per script with the **rare script share**: the share of letters in scripts other than Latin and the
  scripts of the document's language (Han for ``zh``, Han + kana for ``ja``, Hangul + Han for ``ko``; for
  other languages, the document's main script), flagged above :data:`RARE_SCRIPT_SHARE`; so a Russian
  page quoting Chinese, and a page labelled ``ja`` that is mostly Cyrillic, are both flagged;
* **outliers**: each numeric signal's percentile among the kept documents of the same source and language
  (of the same language, then of the whole run, when that group has fewer than :data:`MIN_GROUP` values),
  flagged ``low`` below the 1st percentile and ``high`` above the 99th. All percentiles come from one
  aggregate query (exact ``quantile_disc`` up to :data:`EXACT_QUANTILES_MAX_ROWS` kept documents,
  ``approx_quantile`` (t-digest) above).

Documents asked for by id are looked up with ``WHERE id IN (...)`` pushed into the Parquet scans. A text
(``--text-file``) is matched by exact text, as given and after the run's ``normalize`` stage, against
kept and removed documents (a hash join in DuckDB), then by the exact-dedup content hash against
``exact_groups``; a text found nowhere goes through the run's pass-1 pipeline, which says which stage would
remove it (the whole-corpus stages, dedup and the quality filter, are not evaluated) and gives its signals.
"""
from __future__ import annotations

import bisect
import json
import os
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc

from dataclean.audit.query import is_unicode, not_unicode_path
from dataclean.audit.tables import VIEWS, connect, kept_records_filter, sql_string, table_files, view_columns, views_of

MIN_RUN_CHARS = 24
RARE_SCRIPT_SHARE = 0.05
MIN_GROUP = 20
EXACT_QUANTILES_MAX_ROWS = 100_000
TEXT_PREVIEW_CHARS = 600
#: Up to this many ids go into a literal ``IN (...)`` list (pushed into the Parquet scan); more are joined.
IN_LIST_MAX = 1000
#: Columns of ``kept`` that are numeric but not signals.
NOT_SIGNALS = {"origin_row", "mix_epoch"}
NUMERIC_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER",
                 "UBIGINT", "FLOAT", "DOUBLE", "DECIMAL")
SCRIPTS = ("Latin", "Han", "Hiragana", "Katakana", "Hangul", "Cyrillic", "Greek", "Arabic", "Hebrew", "Thai",
           "Devanagari", "Bengali", "Tamil", "Georgian", "Armenian", "Ethiopic")
LANG_SCRIPTS = {"zh": {"Han"}, "wuu": {"Han"}, "yue": {"Han"}, "ja": {"Han", "Hiragana", "Katakana"},
                "ko": {"Hangul", "Han"}}
DOC_FIELDS = ("id", "source", "lang", "url", "origin_file", "origin_row", "n_chars", "n_tokens", "quality_score")
FATE_FIELDS = ("stage", "rule", "reason", "value", "threshold", "detail", "dup_of")


@dataclass
class Query:
    """One document asked for: by ``id``, or by ``text`` (line ``line`` of a text file)."""
    id: str | None = None
    text: str | None = None
    source: str | None = None
    line: int | None = None

    def label(self) -> str:
        if self.id is not None:
            return self.id
        return f"text line {self.line}" if self.line is not None else "text"


class InspectError(Exception):
    """The run cannot be inspected (not an output folder); one line."""


# --- reading the queries ------------------------------------------------------------------------------------

def _lines(path: str):
    """(line number, line without its line end) of a UTF-8 text file; an :class:`InspectError` naming the line
    of the first bytes that are not UTF-8."""
    with open(path, "rb") as fh:
        for n, raw in enumerate(fh, start=1):
            try:
                yield n, raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as exc:
                raise InspectError(f"{path} line {n}: not UTF-8 text (byte 0x{raw[exc.start]:02x} at column "
                                   f"{exc.start + 1}: {exc.reason})") from None


def read_ids_file(path: str) -> list[str]:
    """One id per line; blank lines are skipped, surrounding whitespace is not part of an id."""
    return [ln.strip() for _, ln in _lines(path) if ln.strip()]


def read_text_file(path: str, source: str | None = None) -> list[Query]:
    """One document per line: a JSON object with a ``text`` field (and optionally ``source``), or else the
    line itself (without its line end) is the text. A line that is JSON too deeply nested to read, or whose
    text or source is not Unicode (a lone surrogate such as ``"\\ud800"``), is an :class:`InspectError`."""
    out = []
    for n, line in _lines(path):
        if not line.strip():
            continue
        text, src = line, source
        if line.lstrip().startswith("{"):
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                obj = None
            except RecursionError:  # valid JSON, perhaps, but nested deeper than Python's json reads
                raise InspectError(f"{path} line {n}: JSON nested too deeply to read") from None
            if isinstance(obj, dict) and isinstance(obj.get("text"), str):
                text = obj["text"]
                if src is None and isinstance(obj.get("source"), str):
                    src = obj["source"]
        for what, value in (("text", text), ("source", src)):
            if value is not None and not is_unicode(value):
                raise InspectError(f"{path} line {n}: the {what} is not valid Unicode (a lone surrogate, such as "
                                   "the JSON escape \\ud800 without its pair)")
        out.append(Query(text=text, source=src, line=n))
    return out


# --- the run ------------------------------------------------------------------------------------------------

class Run:
    """An output folder opened for inspection: its views, its resolved config, its rules."""

    def __init__(self, out: str):
        if not os.path.isdir(out):
            raise InspectError(f"{out} is not a folder")
        if not is_unicode(out):
            raise InspectError(not_unicode_path(out))
        if not any(table_files(out, v) for v in VIEWS):
            raise InspectError(f"{out} has no data/, rejected/, stats/ or dedup/ tables: not a dataclean output")
        self.out = out
        self.manifest = {}
        path = os.path.join(out, "manifest.json")
        if os.path.isfile(path):
            try:
                with open(path, encoding="utf-8") as fh:
                    self.manifest = json.load(fh)
            except (OSError, ValueError) as exc:
                raise InspectError(f"{path}: cannot read ({exc})") from None
        self._stages: dict = {}
        self.config = self.manifest.get("config") or {}
        self.con = connect(out, views=VIEWS, errors={})
        self.views = set(views_of(self.con))
        self.kept_columns = dict(view_columns(self.con, "kept"))
        # one row per kept record: a mixture's repeated copies (mix_epoch > 0) are not counted again
        self.kept_records = "kept"
        if "mix_epoch" in self.kept_columns:
            self.con.execute("CREATE TEMP VIEW kept_records AS SELECT * FROM kept "
                             f"WHERE {kept_records_filter(self.kept_columns)}")
            self.kept_records = "kept_records"
        self.signals = [c for c, t in self.kept_columns.items()
                        if c not in NOT_SIGNALS and t.split("(")[0] in NUMERIC_TYPES]
        self.rule_signals = _rule_signals(self.config)

    def close(self) -> None:
        self.con.close()

    def stage_spec(self, kind: str) -> dict | None:
        for spec in self.config.get("pipeline", []):
            if spec.get("stage") == kind:
                return spec
        return None

    def build(self, kind: str):
        """The run's stage of this kind (with its thresholds), or the default one."""
        from dataclean.pipeline import build_stage

        if kind not in self._stages:
            spec = self.stage_spec(kind)
            try:
                self._stages[kind] = build_stage(spec or {"stage": kind})
            except Exception:  # a config this version cannot build: fall back to the published defaults
                self._stages[kind] = build_stage({"stage": kind})
        return self._stages[kind]

    def rows(self, view: str, where: str) -> list[dict]:
        cur = self.con.execute(f"SELECT * FROM {view} WHERE {where}")
        cols = [d[0] for d in cur.description]
        return [dict(zip(cols, r)) for r in cur.fetchall()]


def _rule_signals(config: dict | None = None) -> dict[str, tuple[str, str]]:
    """rule code -> (signal it reads, how it compares), from the stage classes: the built-in ones and the
    plug-ins of the run's ``config`` that import here (one that does not is left out: its values print bare)."""
    from dataclean.stages import REGISTRY, find_stage

    classes = list(REGISTRY.values())
    for spec in (config or {}).get("pipeline") or []:
        kind = spec.get("stage") if isinstance(spec, dict) else None
        if kind and kind not in REGISTRY:
            try:
                cls = find_stage(kind)
            except Exception:  # (a plug-in that fails to import: inspect still answers)
                cls = None
            if cls is not None:
                classes.append(cls)
    out = {}
    for cls in classes:
        for spec in getattr(cls, "rule_specs", None) or []:
            out.setdefault(spec.rule, (spec.signal, spec.compare))
    return out


def _id_filter(run: Run, ids: list[str]) -> str:
    if len(ids) <= IN_LIST_MAX:
        return "id IN (" + ", ".join(sql_string(i) for i in ids) + ")" if ids else "false"
    run.con.register("_inspect_ids", pa.table({"id": pa.array(ids, pa.string())}))
    return "id IN (SELECT id FROM _inspect_ids)"


# --- inspecting ---------------------------------------------------------------------------------------------

def inspect_documents(out: str, queries: list[Query], full: bool = False,
                      preview_chars: int = TEXT_PREVIEW_CHARS) -> dict:
    """``{"documents": [...], "not_found": [labels]}``: one entry per document found (a text may match
    several documents: all are listed), one per text not in the run (with what pass 1 says of it), and the
    labels of ids found nowhere."""
    run = Run(out)
    try:
        return _inspect(run, queries, full, preview_chars)
    finally:
        run.close()


def _inspect(run: Run, queries: list[Query], full: bool, preview_chars: int) -> dict:
    ids = list(dict.fromkeys(q.id for q in queries if q.id is not None))
    found: dict[str, dict] = {}
    if ids:
        where = _id_filter(run, ids)
        for status, view in (("kept", "kept"), ("removed", "removed")):
            for row in run.rows(view, where):
                found.setdefault(row["id"], {"status": status, "row": row})

    text_queries = [q for q in queries if q.id is None and q.text is not None]
    text_matches, unmatched = _match_texts(run, text_queries)
    for rows in text_matches.values():
        for entry in rows:
            found.setdefault(entry["row"]["id"], entry)

    entries = []  # (query label, status, row) in query order
    not_found = []
    seen = set()
    for q in queries:
        if q.id is not None:
            if q.id in seen:
                continue
            seen.add(q.id)
            if q.id in found:
                entries.append((q.label(), found[q.id]["status"], found[q.id]["row"]))
            else:
                not_found.append(q.id)
        elif id(q) in text_matches:
            for entry in text_matches[id(q)]:
                entries.append((q.label(), entry["status"], entry["row"]))
    pass1 = _pass1(run, unmatched)
    for q, (status, row) in zip(unmatched, pass1):
        entries.append((q.label(), status, row))

    rows = [row for _, _, row in entries]
    dups = _duplicates(run, [r["id"] for r in rows if r.get("id") is not None])
    anomalies = _anomalies(run, rows)
    percentiles = _percentiles(run, rows)
    docs = []
    for (label, status, row), anom, pct in zip(entries, anomalies, percentiles):
        docs.append(_document(run, label, status, row, dups, anom, pct, full, preview_chars))
    return {"out": run.out, "documents": docs, "not_found": not_found}


def _match_texts(run: Run, queries: list[Query]) -> tuple[dict, list[Query]]:
    """Kept/removed documents whose text equals a query's text (as given or normalized by the run's
    normalize stage), by ``id(query)``; and the queries matched by nothing."""
    if not queries:
        return {}, []
    raw = [q.text for q in queries]
    norm = raw
    if run.stage_spec("normalize") is not None:
        stage = run.build("normalize")
        norm = stage(pa.RecordBatch.from_pydict({"text": pa.array(raw, pa.string())})).batch.column("text").to_pylist()
    candidates = {}
    for q, a, b in zip(queries, raw, norm):
        candidates.setdefault(a, []).append(q)
        if b != a:
            candidates.setdefault(b, []).append(q)
    run.con.register("_inspect_texts", pa.table({"text": pa.array(list(candidates), pa.string())}))
    matches: dict[int, list] = {}
    for status, view in (("kept", run.kept_records), ("removed", "removed")):
        if "text" not in dict(view_columns(run.con, view)):
            continue
        for row in run.rows(view, "text IN (SELECT text FROM _inspect_texts)"):  # a hash join on the text
            for q in candidates.get(row["text"], []):
                lst = matches.setdefault(id(q), [])
                if all(e["row"]["id"] != row["id"] for e in lst):
                    lst.append({"status": status, "row": row})
    unmatched = [q for q in queries if id(q) not in matches]
    # the exact-dedup key: an exact duplicate whose text the ledger does not hold (rejected_text: false)
    if unmatched and "exact_groups" in run.views:
        from dataclean.stages.dedup_exact import content_hash

        norm_of = {id(q): t for q, t in zip(queries, norm)}
        hashes = [h.hex() for h in content_hash(pa.array([norm_of[id(q)] for q in unmatched],
                                                        pa.string())).to_pylist()]
        groups = {r["content_hash"]: r for r in run.rows(
            "exact_groups", "content_hash IN (" + ", ".join(sql_string(h) for h in hashes) + ")")}
        ids_by_query = {id(q): groups[h]["ids"] for q, h in zip(unmatched, hashes) if h in groups}
        if ids_by_query:
            all_ids = sorted({i for ids in ids_by_query.values() for i in ids})
            where = _id_filter(run, all_ids)
            by_id = {}
            for status, view in (("kept", "kept"), ("removed", "removed")):
                for row in run.rows(view, where):
                    by_id.setdefault(row["id"], {"status": status, "row": row})
            for key, ids in ids_by_query.items():
                matches[key] = [by_id[i] for i in ids if i in by_id]
        unmatched = [q for q in unmatched if not matches.get(id(q))]
    return matches, unmatched


def _pass1(run: Run, queries: list[Query]) -> list[tuple[str, dict]]:
    """Run the run's pass-1 pipeline on texts that are not in the run: ``("not_in_run", row)`` with the
    signals and, under ``would_be``, the stage that would remove it in pass 1 (None: it would survive)."""
    if not queries:
        return []
    default_source = (run.config.get("input") or {}).get("default_source", "unknown")
    ids = [f"(text line {q.line})" if q.line is not None else "(text)" for q in queries]
    batch = pa.RecordBatch.from_pydict({
        "id": pa.array(ids, pa.string()),
        "text": pa.array([q.text for q in queries], pa.string()),
        "source": pa.array([q.source or default_source for q in queries], pa.string()),
    })
    rows: dict[str, dict] = {}
    note = None
    try:
        from dataclean.pipeline import Pipeline

        outcome = Pipeline.from_config(run.config).process(batch)
        for r in outcome.kept.to_pylist():
            r["would_be"] = None
            rows[r["id"]] = r
        for r in outcome.removed.to_pylist():
            r["would_be"] = {k: r.get(k) for k in FATE_FIELDS}
            rows[r["id"]] = r
    except Exception as exc:  # no usable config (or a model that moved): anomalies are still computed
        note = f"the run's pipeline could not be built here ({type(exc).__name__}: {exc})"
    out = []
    for q, i in zip(queries, ids):
        row = rows.get(i) or {"id": i, "source": q.source or default_source, "lang": None}
        row["text"] = q.text if row.get("text") is None else row["text"]
        row["id"] = None
        row["_pass1_note"] = note
        out.append(("not_in_run", row))
    return out


def _duplicates(run: Run, ids: list[str]) -> dict:
    """``{"exact": {id: group}, "near": {id: cluster}}`` for the ids that are in a group or cluster."""
    exact, near = {}, {}
    if not ids:
        return {"exact": exact, "near": near}
    id_list = "[" + ", ".join(sql_string(i) for i in ids) + "]"
    if "exact_groups" in run.views:
        for r in run.con.execute(f"""
                SELECT m.id, g.content_hash, g.keep_id, g.n, g.ids
                FROM (SELECT unnest({id_list}) AS id) m
                JOIN exact_groups g ON list_contains(g.ids, m.id)""").fetchall():
            exact[r[0]] = {"content_hash": r[1], "kept_id": r[2], "size": r[3], "members": list(r[4])}
    if "clusters" in run.views:
        members: dict[str, list] = {}
        for r in run.con.execute(f"""
                SELECT cluster, id, is_representative, similarity, cluster_size FROM clusters
                WHERE cluster IN (SELECT cluster FROM clusters WHERE list_contains({id_list}, id))
                ORDER BY cluster, is_representative DESC, similarity DESC, id""").fetchall():
            members.setdefault(r[0], []).append({"id": r[1], "representative": r[2], "similarity": r[3],
                                                 "size": r[4]})
        for cluster, mem in members.items():
            rep = next((m["id"] for m in mem if m["representative"]), None)
            for m in mem:
                if m["id"] in ids:
                    near[m["id"]] = {"cluster": cluster, "representative": rep, "size": mem[0]["size"],
                                     "similarity_to_representative": m["similarity"],
                                     "members": [{k: x[k] for k in ("id", "representative", "similarity")}
                                                 for x in mem]}
    return {"exact": exact, "near": near}


def script_counts(text: pa.Array) -> dict[str, list[int]]:
    """Characters per script (RE2 ``\\p{Script}``) and ``other`` letters, per document."""
    counts = {s: pc.count_substring_regex(text, rf"\p{{{s}}}").to_pylist() for s in SCRIPTS}
    letters = pc.count_substring_regex(text, r"\pL").to_pylist()
    counts["other"] = [max(0, n - sum(counts[s][i] for s in SCRIPTS)) for i, n in enumerate(letters)]
    return counts


def rare_script_share(counts: dict[str, int], lang: str | None) -> tuple[float, str | None, dict]:
    """(share of letters in unexpected scripts, the main script, the unexpected scripts' counts)."""
    total = sum(counts.values())
    if not total:
        return 0.0, None, {}
    main = max(counts, key=lambda s: (counts[s], s != "other"))
    expected = {"Latin"} | LANG_SCRIPTS.get((lang or "").split("-")[0], {main})
    if main in ("Hiragana", "Katakana") and expected & {main}:
        expected |= LANG_SCRIPTS["ja"]
    rare = {s: n for s, n in counts.items() if n and s not in expected}
    return sum(rare.values()) / total, main, rare


def _anomalies(run: Run, rows: list[dict]) -> list[dict]:
    texts = [r.get("text") for r in rows]
    idx = [i for i, t in enumerate(texts) if isinstance(t, str)]
    out: list[dict] = [{"flags": [], "note": "no text (the run did not keep the text of removed documents)"}
                       for _ in rows]
    if not idx:
        return out
    from dataclean.stages.runs import longest_run, periodic_windows, run_detail

    arr = pa.array([texts[i] for i in idx], pa.string())
    garbled = run.build("garbled")
    g = garbled(pa.RecordBatch.from_pydict({"text": arr, "lang": pa.array([rows[i].get("lang") for i in idx],
                                                                         pa.string())}))
    gsig = {f.name: g.batch.column(f.name).to_pylist() for f in garbled.signal_fields}
    g_rule = g.decisions.rule.to_pylist() if g.decisions is not None else [None] * len(idx)
    windows = periodic_windows(arr, MIN_RUN_CHARS)
    scripts = script_counts(arr)
    for j, i in enumerate(idx):
        text = texts[i]
        flags = []
        found = longest_run(text, windows[j], MIN_RUN_CHARS) if j in windows else None
        run_info = None
        if found is not None:
            chars, start, end, unit, repeats, kind = found
            run_info = {"chars": chars, "share": chars / max(len(text), 1), "unit": unit, "repeats": repeats,
                        "kind": kind, "start": start, "end": end, "detail": run_detail(found)}
            rr = run.build("repetition_runs")
            if (rr.max_run_chars is not None and chars > rr.max_run_chars) or (
                    rr.max_run_share is not None and chars >= rr.min_share_run_chars
                    and run_info["share"] > rr.max_run_share):
                flags.append(f"repetition: {run_detail(found)}")
        gs = {k: v[j] for k, v in gsig.items()}
        if g_rule[j] is not None:
            flags.append(f"garbled: {g_rule[j]}")
        counts = {s: scripts[s][j] for s in (*SCRIPTS, "other")}
        share, main, rare = rare_script_share(counts, rows[i].get("lang"))
        if share > RARE_SCRIPT_SHARE:
            flags.append(f"rare scripts: {share:.1%} of letters ({', '.join(f'{s} {n}' for s, n in rare.items())})")
        out[i] = {"longest_run": run_info, "garbled": gs, "garbled_rule": g_rule[j],
                  "scripts": {s: n for s, n in counts.items() if n}, "main_script": main,
                  "rare_script_share": share, "rare_scripts": rare, "flags": flags}
    return out


# --- percentiles among kept documents -----------------------------------------------------------------------

def _numeric(v) -> bool:
    return v is not None and not isinstance(v, bool) and isinstance(v, (int, float)) and v == v


def _percentiles(run: Run, rows: list[dict]) -> list[dict]:
    """Per row: ``{signal: {value, percentile, p01, p50, p99, n, group, flag}}`` over kept documents.

    One aggregate query over the kept documents of the rows' languages, grouped by (source, language) and
    by language, for the signals the rows have; a second one over all kept documents only when some
    signal has fewer than MIN_GROUP values in both groups."""
    signals = [s for s in run.signals if any(_numeric(r.get(s)) for r in rows)]
    if not rows or not signals:
        return [{} for _ in rows]
    n_kept = run.con.execute(f"SELECT count(*) FROM {run.kept_records}").fetchall()[0][0]
    if not n_kept:
        return [{} for _ in rows]
    qs = "[" + ", ".join(f"{k / 100:.2f}" for k in range(101)) + "]"
    fn = "quantile_disc" if n_kept <= EXACT_QUANTILES_MAX_ROWS else "approx_quantile"

    def aggregates(names):
        out = []
        for s in names:
            col = '"' + s.replace('"', '""') + '"'
            out.append(f"count({col}), {fn}({col}, {qs})")
        return ", ".join(out)

    langs = {r.get("lang") for r in rows}
    where = []
    if any(lang is not None for lang in langs):
        where.append("lang IN (" + ", ".join(sql_string(x) for x in langs if x is not None) + ")")
    if None in langs:
        where.append("lang IS NULL")
    groups: dict = {}
    for r in run.con.execute(f"""
            SELECT grouping(source, lang) AS g, source, lang, {aggregates(signals)}
            FROM {run.kept_records} WHERE {' OR '.join(where)}
            GROUP BY GROUPING SETS ((source, lang), (lang))""").fetchall():
        key = ("source_lang", r[1], r[2]) if r[0] == 0 else ("lang", None, r[2])
        groups[key] = {s: (r[3 + 2 * k], r[4 + 2 * k]) for k, s in enumerate(signals)}

    def pick(row, s):
        for key in (("source_lang", row.get("source"), row.get("lang")), ("lang", None, row.get("lang")),
                    ("all", None, None)):
            n, q = groups.get(key, {}).get(s, (0, None))
            if n >= MIN_GROUP and q is not None:
                return key, n, q
        return None

    missing = sorted({s for row in rows for s in signals if _numeric(row.get(s)) and pick(row, s) is None})
    if missing:
        r = run.con.execute(f"SELECT {aggregates(missing)} FROM {run.kept_records}").fetchall()[0]
        groups[("all", None, None)] = {s: (r[2 * k], r[2 * k + 1]) for k, s in enumerate(missing)}
    out = []
    for row in rows:
        res = {}
        for s in signals:
            v = row.get(s)
            found = pick(row, s) if _numeric(v) else None
            if found is None:
                continue
            key, n, q = found
            q = [float(x) for x in q]
            flag = "low" if v < q[1] else "high" if v > q[99] else None
            res[s] = {"value": v, "percentile": percentile_of(v, q), "p01": q[1], "p50": q[50], "p99": q[99],
                      "n": n, "group": _group_name(key), "flag": flag}
        out.append(res)
    return out


def percentile_of(v: float, q: list[float]) -> float:
    """The percentile of ``v`` given the 0th..100th percentiles ``q`` (mid-rank for ties, to 0.5)."""
    lo, hi = bisect.bisect_left(q, v), bisect.bisect_right(q, v)
    if hi == 0:
        return 0.0
    if lo == len(q):
        return 100.0
    return max(0.0, min(100.0, (lo + hi) / 2 - 0.5))


def _group_name(key) -> str:
    kind, source, lang = key
    if kind == "source_lang":
        return f"source={source}, lang={lang}"
    if kind == "lang":
        return f"lang={lang} (all sources)"
    return "all kept documents"


# --- one document -------------------------------------------------------------------------------------------

def _document(run: Run, label, status, row, dups, anom, pct, full, preview_chars) -> dict:
    doc = {"query": label, "status": status}
    doc.update({k: _plain(row.get(k)) for k in DOC_FIELDS})
    if status == "removed":
        fate = {k: _plain(row.get(k)) for k in FATE_FIELDS}
        signal, compare = run.rule_signals.get(row.get("rule"), (None, None))
        fate["signal"], fate["compare"] = signal, compare
        doc["fate"] = fate
    elif status == "not_in_run":
        doc["would_be"] = row.get("would_be")
        if row.get("would_be") is not None:
            signal, compare = run.rule_signals.get(row["would_be"].get("rule"), (None, None))
            doc["would_be"] = {**{k: _plain(v) for k, v in row["would_be"].items()}, "signal": signal,
                               "compare": compare}
        doc["note"] = row.get("_pass1_note") or ("not in this run; pass 1 of the run's pipeline was applied "
                                                 "(dedup and the quality filter were not)")
    else:
        doc["fate"] = None
    i = row.get("id")
    doc["exact_group"] = dups["exact"].get(i) if i is not None else None
    doc["cluster"] = dups["near"].get(i) if i is not None else None
    text = row.get("text")
    doc["text_chars"] = len(text) if isinstance(text, str) else None
    doc["text_truncated"] = bool(isinstance(text, str) and not full and len(text) > preview_chars)
    doc["text"] = text[:preview_chars] if doc["text_truncated"] else text
    doc["rewrites"] = _rewrites(row)
    if row.get("decontam_benchmark"):
        doc["benchmark_overlap"] = {"benchmark": row["decontam_benchmark"], "item": row.get("decontam_item"),
                                    "overlap": _plain(row.get("decontam_overlap")),
                                    "shared_ngrams": _plain(row.get("decontam_shared"))}
    doc["anomalies"] = anom
    doc["percentiles"] = pct
    doc["outliers"] = [{"signal": s, **p} for s, p in pct.items() if p["flag"]]
    return doc


def _rewrites(row: dict) -> dict:
    """What the stages changed in the text in place: PII masks per kind, lines C4 removed, repairs."""
    from dataclean.text.pii import KINDS
    out = {}
    masks = {k: int(row[f"pii_{k}"]) for k in KINDS if row.get(f"pii_{k}")}
    if masks:
        out["pii_masks"] = masks
        out["pii_chars"] = int(row.get("pii_chars") or 0)
    for col in ("c4_lines_removed", "c4_chars_removed", "norm_encoding_fixed", "norm_controls_removed"):
        if row.get(col):
            out[col] = int(row[col])
    return out


def _plain(v):
    if isinstance(v, float) and v != v:
        return None
    return v


__all__ = ["Query", "InspectError", "inspect_documents", "is_unicode", "read_ids_file", "read_text_file",
           "percentile_of", "rare_script_share", "script_counts"]
