"""``dataclean sql`` and ``dataclean stats``: read-only DuckDB queries over a run's tables, and the key tables
of a run gathered for the terminal or for machines.

Read-only, in two layers: a statement must be one ``SELECT`` (``WITH``, ``FROM``-first, ``VALUES``,
``DESCRIBE``, ``SUMMARIZE``, ``SHOW`` parse as selects) or an ``EXPLAIN [ANALYZE]`` of one; anything else
(``COPY``, ``CREATE``, ``INSERT``, ``ATTACH``, ``INSTALL``/``LOAD``, ``SET``, ``PRAGMA``, ``CALL``,
``EXPORT``…) is refused before it runs. And the connection itself can only read the run's table files
(see :func:`dataclean.audit.tables.connect`), so even a statement that got through could not write a file.
"""
from __future__ import annotations

import base64
import csv
import datetime
import decimal
import io
import json
import math
import os
import re
from dataclasses import dataclass, field

import duckdb

from dataclean.audit.tables import VIEWS, connect, table_files, view_columns, views_of

#: Rows printed by ``--format table`` when no ``--limit`` is given.
TABLE_DEFAULT_LIMIT = 100
#: The most rows DuckDB is asked for at once (its ``fetchmany`` takes a 64-bit size): a larger ``--limit``
#: means every row, as no result has more.
MAX_FETCH = 2 ** 62
ALLOWED_STATEMENTS = {"SELECT"}
_EXPLAIN = re.compile(r"^\s*EXPLAIN(\s+ANALYZE)?\b", re.I)


class QueryError(Exception):
    """A statement that is refused or fails; the message is one line."""


@dataclass
class QueryResult:
    columns: list[str]
    types: list[str]
    rows: list[tuple]
    truncated: bool = False  # more rows than the limit
    notes: list[str] = field(default_factory=list)


def is_unicode(s: str) -> bool:
    """False for a string with a lone surrogate: not Unicode text (a JSON ``"\\ud800"``, or bytes of the
    command line or of a file name that are not UTF-8, which Python decodes to lone surrogates). DuckDB and
    Arrow take only Unicode, and no document of a run can hold such a string."""
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def not_unicode_path(path: str) -> str:
    return f"{path!r}: a path that is not valid UTF-8 cannot be opened by DuckDB; rename it (or link to it)"


def one_line(exc: BaseException) -> str:
    """DuckDB messages span lines (a caret under the SQL); the first line says what is wrong."""
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    return lines[0] if lines else type(exc).__name__


def check_read_only(con: duckdb.DuckDBPyConnection, sql: str) -> None:
    """Raise :class:`QueryError` unless ``sql`` is exactly one read-only statement."""
    if not is_unicode(sql):
        raise QueryError("the query is not valid UTF-8 (bytes of the command line that are not UTF-8)")
    try:
        statements = con.extract_statements(sql)
    except duckdb.Error as exc:
        raise QueryError(one_line(exc)) from None
    if len(statements) != 1:
        raise QueryError(f"expected one SQL statement, got {len(statements)}")
    kind = statements[0].type.name
    if kind == "EXPLAIN":
        inner = _EXPLAIN.sub("", sql, count=1)
        if inner == sql:
            raise QueryError("cannot parse the EXPLAIN statement")
        return check_read_only(con, inner)
    if kind not in ALLOWED_STATEMENTS:
        raise QueryError(f"only SELECT queries are allowed: {kind} statements are refused "
                         "(dataclean sql is read-only)")


def open_run(out: str) -> tuple[duckdb.DuckDBPyConnection, dict]:
    """The read-only connection of ``out`` with every view whose files exist, and the views that could not
    be opened (view -> message)."""
    if not os.path.isdir(out):
        raise QueryError(f"{out} is not a folder")
    if not is_unicode(out):
        raise QueryError(not_unicode_path(out))
    extra = None
    meta = os.path.join(out, "export.json")
    if os.path.isfile(meta):  # an export folder: its sidecar (export_docs) next to the tables of its run
        import json
        with open(meta, encoding="utf-8") as fh:
            run = json.load(fh).get("run") or ""
        extra = {"export_docs": os.path.join(out, "export.docs.parquet")}
        if not os.path.isdir(run):
            raise QueryError(f"{out} is an export of {run}, which is not there any more")
        out = run
    if not any(table_files(out, v) for v in VIEWS):
        raise QueryError(f"{out} has no data/, rejected/, stats/ or dedup/ tables: not a dataclean output")
    errors: dict = {}
    return connect(out, read_only=True, views=VIEWS, errors=errors, extra=extra), errors


def _failed(exc: duckdb.Error, con, errors: dict) -> QueryError:
    msg = one_line(exc)
    missing = re.search(r"Table with name (\w+) does not exist", msg)
    if missing and missing.group(1) in errors:
        msg += f" (its file could not be opened: {errors[missing.group(1)]})"
    elif missing:
        msg += f" (views of this run: {', '.join(views_of(con))})"
    return QueryError(msg)


def run_query(out: str, sql: str, limit: int | None = None) -> QueryResult:
    """Run one read-only statement over the views of ``out``; at most ``limit`` rows (None: all)."""
    con, errors = open_run(out)
    try:
        check_read_only(con, sql)
        try:
            cursor = con.execute(sql)
            columns = [d[0] for d in cursor.description] if cursor.description else []
            types = [str(d[1]) for d in cursor.description] if cursor.description else []
            if limit is None:
                rows = cursor.fetchall()
                truncated = False
            else:
                rows = cursor.fetchmany(min(limit + 1, MAX_FETCH))
                truncated = len(rows) > limit
                rows = rows[:limit]
        except duckdb.OutOfMemoryException:  # not the query's fault: the CLI says so for every command
            raise
        except duckdb.Error as exc:
            raise _failed(exc, con, errors) from None
    finally:
        con.close()
    notes = [f"view {v} left out: {m}" for v, m in errors.items()]
    return QueryResult(columns, types, rows, truncated, notes)


def export_query(out: str, sql: str, fmt: str, write, limit: int | None = None, chunk_rows: int = 10_000) -> int:
    """Stream the result of one read-only statement as ``csv`` or ``json`` through ``write(str)``, a chunk of
    rows at a time (memory does not grow with the result); returns the number of rows written."""
    con, errors = open_run(out)
    try:
        check_read_only(con, sql)
        n = 0
        try:
            cursor = con.execute(sql)
            columns = [d[0] for d in cursor.description] if cursor.description else []
            write(csv_lines([columns]) if fmt == "csv" else "[")
            while limit is None or n < limit:
                rows = cursor.fetchmany(chunk_rows if limit is None else min(chunk_rows, limit - n))
                if not rows:
                    break
                if fmt == "csv":
                    write(csv_lines(csv_row(r) for r in rows))
                else:
                    write(("," if n else "") + ",".join(
                        "\n" + json.dumps({c: plain_value(v) for c, v in zip(columns, r)}, ensure_ascii=False)
                        for r in rows))
                n += len(rows)
        except duckdb.OutOfMemoryException:  # not the query's fault: the CLI says so for every command
            raise
        except duckdb.Error as exc:
            raise _failed(exc, con, errors) from None
        if fmt == "json":
            write("\n]\n")
        return n
    finally:
        con.close()


def list_views(out: str) -> list[dict]:
    """``[{"view", "rows", "files", "columns": [[name, type], ...]}]`` for every view of ``out``."""
    con, errors = open_run(out)
    try:
        result = []
        for view in views_of(con):
            rows = con.execute(f"SELECT count(*) FROM {view}").fetchall()[0][0]
            result.append({"view": view, "rows": rows, "files": len(table_files(out, view)) if view in VIEWS else 1,
                           "columns": [list(c) for c in view_columns(con, view)]})
        for view, msg in errors.items():
            result.append({"view": view, "rows": None, "files": len(table_files(out, view)), "columns": [],
                           "error": msg})
        return result
    finally:
        con.close()


# --- output formats -----------------------------------------------------------------------------------------

def plain_value(v):
    """A JSON-ready value: bytes as base64, NaN/inf as None, dates as ISO strings, decimals as floats."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    if isinstance(v, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(v)).decode("ascii")
    if isinstance(v, (datetime.date, datetime.datetime, datetime.time)):
        return v.isoformat()
    if isinstance(v, datetime.timedelta):
        return v.total_seconds()
    if isinstance(v, decimal.Decimal):
        return float(v)
    if isinstance(v, dict):
        return {str(k): plain_value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [plain_value(x) for x in v]
    if v is None or isinstance(v, (bool, int, str)):
        return v
    return str(v)


def to_json(result: QueryResult) -> str:
    """One JSON array of objects (column -> value), one object per row."""
    records = [{c: plain_value(v) for c, v in zip(result.columns, row)} for row in result.rows]
    return json.dumps(records, ensure_ascii=False, indent=1)


def csv_row(row) -> list:
    """CSV cells of one row: lists and structs as JSON, nulls as empty fields."""
    cells = []
    for v in row:
        v = plain_value(v)
        if v is None:
            cells.append("")
        elif isinstance(v, (list, dict)):
            cells.append(json.dumps(v, ensure_ascii=False))
        else:
            cells.append(v)
    return cells


def csv_lines(rows) -> str:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows(rows)
    return buf.getvalue()


def to_csv(result: QueryResult) -> str:
    """RFC 4180 CSV with a header; lists and structs as JSON, nulls as empty fields."""
    return csv_lines([result.columns, *(csv_row(r) for r in result.rows)])


# --- dataclean stats ----------------------------------------------------------------------------------------

def _records(con, sql: str) -> list[dict]:
    cur = con.execute(sql)
    cols = [d[0] for d in cur.description]
    return [{c: plain_value(v) for c, v in zip(cols, row)} for row in cur.fetchall()]


def run_stats(out: str) -> dict:
    """The key tables of a finished run, from ``stats/``, ``dedup/`` and the ledger.

    Keys: ``summary`` (stats/summary.json plus conservation in numbers), ``funnel`` (all sources, stage
    by stage), ``removals`` (stage × rule: docs, chars, tokens, share of the input's docs and tokens),
    ``sources`` (source × language: input, kept, removed), ``cluster_sizes`` and ``exact_groups`` (dedup),
    ``mixture`` (when ``stats/mixture.parquet`` exists, else None)."""
    path = os.path.join(out, "stats", "summary.json")
    if not os.path.isfile(path):
        raise QueryError(f"{out} has no stats/summary.json: not a finished dataclean output")
    with open(path, encoding="utf-8") as fh:
        summary = json.load(fh)
    con, errors = open_run(out)
    try:
        views = set(views_of(con))
        input_tokens = None
        funnel = []
        if "funnel" in views:
            funnel = _records(con, """
                SELECT step, stage, docs_in, docs_out, docs_in - docs_out AS docs_removed,
                       tokens_in, tokens_out, tokens_in - tokens_out AS tokens_removed
                FROM funnel WHERE source = '(all)' ORDER BY step""")
            if funnel:
                input_tokens = funnel[0]["tokens_in"]
        n_in = summary.get("input_records") or 0
        removals = []
        if "stats" in views:
            removals = _records(con, """
                SELECT stage, rule, sum(docs)::BIGINT AS docs, sum(chars)::BIGINT AS chars,
                       sum(tokens)::BIGINT AS tokens
                FROM stats GROUP BY stage, rule""")
            order = {s: i for i, s in enumerate(summary.get("stages", []))}
            removals.sort(key=lambda r: (order.get(r["stage"], len(order)), -r["docs"], r["rule"]))
            for r in removals:
                r["share_docs"] = r["docs"] / n_in if n_in else None
                r["share_tokens"] = r["tokens"] / input_tokens if input_tokens else None
        sources = []
        if {"stats", "stats_kept"} <= views:
            sources = _records(con, """
                SELECT source, lang, sum(kept)::BIGINT + sum(removed)::BIGINT AS input, sum(kept)::BIGINT AS kept,
                       sum(removed)::BIGINT AS removed, sum(kept_tokens)::BIGINT AS kept_tokens,
                       sum(removed_tokens)::BIGINT AS removed_tokens
                FROM (SELECT source, lang, docs AS kept, 0 AS removed, tokens AS kept_tokens, 0 AS removed_tokens
                      FROM stats_kept
                      UNION ALL
                      SELECT source, lang, 0, docs, 0, tokens FROM stats)
                GROUP BY source, lang ORDER BY source, input DESC, lang""")
        cluster_sizes = _records(con, "SELECT * FROM cluster_sizes ORDER BY cluster_size") \
            if "cluster_sizes" in views else []
        exact = _records(con, "SELECT n AS group_size, count(*) AS groups, sum(n)::BIGINT AS documents "
                              "FROM exact_groups GROUP BY n ORDER BY n") if "exact_groups" in views else []
        mixture = _records(con, "SELECT * FROM mixture") if "mixture" in views else None
    finally:
        con.close()
    kept, removed = summary.get("kept", 0), summary.get("removed", 0)
    head = {
        "input_files": summary.get("input_files"),
        "failed_inputs": len(summary.get("failed_inputs", [])),
        "input_records": n_in,
        "kept": kept,
        "removed": removed,
        "bad_records": summary.get("bad_records"),
        "kept_share": kept / n_in if n_in else None,
        "input_tokens": input_tokens,
        "kept_tokens": summary.get("kept_tokens"),
        "kept_chars": summary.get("kept_chars"),
        "conservation": f"{n_in} = {kept} + {removed}",
        "conservation_ok": summary.get("conservation_ok"),
    }
    return {"out": out, "summary": head, "funnel": funnel, "removals": removals, "sources": sources,
            "cluster_sizes": cluster_sizes, "exact_groups": exact, "mixture": mixture,
            "notes": [f"view {v} left out: {m}" for v, m in errors.items()]}

