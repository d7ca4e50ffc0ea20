"""A run's tables as DuckDB views over the Parquet files of its output folder.

* ``kept``: ``data/*.parquet``, one row per kept document (text, provenance, every signal);
* ``removed``: ``rejected/*.parquet``, the ledger: one row per removed document (stage, rule, value, dup_of);
* ``stats``: ``stats/removed.parquet``, removed per stage × rule × reason × source × language;
* ``stats_kept``: ``stats/kept.parquet``, kept per source × language;
* ``funnel``: ``stats/funnel.parquet``, per source × stage: documents, chars, tokens in and out;
* ``inputs``: ``stats/inputs.parquet``, per input file: records, kept, removed, bad records;
* ``clusters``: ``dedup/clusters.parquet``, one row per member of a near-duplicate cluster;
* ``cluster_sizes``: ``dedup/cluster_sizes.parquet``, near-duplicate clusters per size;
* ``exact_groups``: ``dedup/exact_groups.parquet``, one row per group of identical (normalized) texts;
* ``quality_cutoffs``: ``stats/quality_cutoffs.parquet``, the quality score cut-off per source;
* ``mixture``: ``stats/mixture.parquet``, per source of the mixture: target and achieved weights.

A view exists only when its files do, except ``kept`` and ``removed``, which are empty tables (with the base
columns) when the run has no shard of them, so aggregates over a run that removed nothing still work.

:func:`connect` with ``read_only=True`` gives the connection of ``dataclean sql``: after the views are
created, DuckDB may read only the run's own table files (``allowed_paths``), every other file system
access is disabled (``enable_external_access = false``: no COPY/EXPORT/ATTACH to files, no reading other
files, no extension install or load), and the configuration is locked so a statement cannot undo this.
"""
from __future__ import annotations

import os

import duckdb

from dataclean.io.fs import files_in
from dataclean.sql import ident, sql_list, sql_string  # noqa: F401 (re-exported: the audit's own helpers)

EMPTY_COLUMNS = {
    "kept": "id VARCHAR, text VARCHAR, source VARCHAR, lang VARCHAR, origin_file VARCHAR, origin_row BIGINT, "
            "n_chars BIGINT, n_tokens BIGINT",
    "removed": "id VARCHAR, source VARCHAR, lang VARCHAR, url VARCHAR, meta VARCHAR, origin_file VARCHAR, origin_row BIGINT, stage VARCHAR, "
               "rule VARCHAR, reason VARCHAR, value DOUBLE, threshold DOUBLE, detail VARCHAR, dup_of VARCHAR, "
               "n_chars BIGINT, n_tokens BIGINT, text VARCHAR, raw BLOB",
}
#: Shard folders of the document tables.
FOLDERS = {"kept": "data", "removed": "rejected"}
#: Single-file tables, by view name (relative to the output folder).
FILES = {
    "stats": "stats/removed.parquet",
    "stats_kept": "stats/kept.parquet",
    "funnel": "stats/funnel.parquet",
    "inputs": "stats/inputs.parquet",
    "clusters": "dedup/clusters.parquet",
    "cluster_sizes": "dedup/cluster_sizes.parquet",
    "exact_groups": "dedup/exact_groups.parquet",
    "quality_cutoffs": "stats/quality_cutoffs.parquet",
    "mixture": "stats/mixture.parquet",
    "rewrites": "stats/rewrites.parquet",
    "contamination": "stats/contamination.parquet",
}
#: Every view, in the order ``dataclean sql --views`` lists them.
VIEWS = ("kept", "removed", *FILES)


def shard_files(out: str, view: str) -> list[str]:
    return files_in(os.path.join(out, FOLDERS[view]), "*.parquet")


def table_files(out: str, view: str) -> list[str]:
    """The Parquet files behind ``view`` in the output folder ``out`` (empty when there are none)."""
    if view in FOLDERS:
        return shard_files(out, view)
    path = os.path.join(out, FILES[view])
    return [path] if os.path.isfile(path) else []


def register_views(con: duckdb.DuckDBPyConnection, out: str, views=("kept", "removed"),
                   errors: dict | None = None) -> list[str]:
    """Create ``views`` of ``out`` on ``con``; returns the names created (kept and removed always are).

    A table file DuckDB cannot open raises, unless ``errors`` is given: then the view is left out and
    ``errors[view]`` is the message."""
    made = []
    for view in views:
        files = table_files(out, view)
        try:
            if files:
                con.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT * FROM read_parquet({sql_list(files)}, "
                            "union_by_name = true)")
            elif view in EMPTY_COLUMNS:
                con.execute(f"CREATE OR REPLACE TABLE {view} ({EMPTY_COLUMNS[view]})")
            else:
                continue
        except duckdb.Error as exc:
            if errors is None:
                raise
            errors[view] = str(exc).splitlines()[0]
            continue
        made.append(view)
    return made


def connect(out: str, read_only: bool = False, views=("kept", "removed"),
            errors: dict | None = None, extra: dict[str, str] | None = None,
            memory_limit: str | None = None) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with ``views`` of ``out`` (:data:`VIEWS` for all of them), and the
    ``extra`` views (name -> one Parquet file: an export's ``export_docs``); ``read_only``: see the module
    docstring; ``errors``: see :func:`register_views`; ``memory_limit``: DuckDB's (default: its own, 80% of
    the machine's memory)."""
    con = duckdb.connect(":memory:")
    con.execute("SET enable_progress_bar = false")  # (on by itself where __main__ has no file: a notebook)
    if memory_limit is not None:
        con.execute(f"SET memory_limit = {sql_string(memory_limit)}")
    made = register_views(con, out, views, errors)
    for name, path in (extra or {}).items():
        con.execute(f"CREATE OR REPLACE VIEW {name} AS SELECT * FROM read_parquet({sql_string(path)})")
    if read_only:
        files = [f for v in made for f in table_files(out, v)] + list((extra or {}).values())
        files += [os.path.abspath(f) for f in files]
        if files:
            con.execute(f"SET allowed_paths = {sql_list(sorted(set(files)))}")
        for setting in ("enable_external_access = false", "autoinstall_known_extensions = false",
                        "autoload_known_extensions = false", "lock_configuration = true"):
            con.execute(f"SET {setting}")
    return con


def views_of(con: duckdb.DuckDBPyConnection) -> list[str]:
    """The run's views present on ``con``, in :data:`VIEWS` order."""
    names = {r[0] for r in con.execute("SELECT table_name FROM information_schema.tables").fetchall()}
    return [v for v in VIEWS if v in names]


def view_columns(con: duckdb.DuckDBPyConnection, view: str) -> list[tuple[str, str]]:
    """``(column, DuckDB type)`` of ``view``."""
    return [(r[0], r[1]) for r in con.execute(f"DESCRIBE {view}").fetchall()]


def kept_records_filter(columns, alias: str = "") -> str:
    """SQL condition on ``kept`` (its ``columns``; ``alias``: a table alias) that selects each input record
    once: a mixture recipe also writes extra epochs of some documents (``mix_epoch > 0``), which are output
    rows, not records."""
    return f"coalesce({alias + '.' if alias else ''}mix_epoch, 0) = 0" if "mix_epoch" in columns else "true"
