"""A run's tables as DuckDB views over its Parquet files: ``kept`` (data/) and ``removed`` (rejected/)."""
from __future__ import annotations

import glob
import os

import duckdb

EMPTY_COLUMNS = {
    "kept": "id VARCHAR, text VARCHAR, source VARCHAR, lang VARCHAR, origin_file VARCHAR, origin_row BIGINT, "
            "n_chars BIGINT, n_tokens BIGINT",
    "removed": "id VARCHAR, source VARCHAR, lang VARCHAR, url VARCHAR, meta VARCHAR, origin_file VARCHAR, origin_row BIGINT, stage VARCHAR, "
               "rule VARCHAR, reason VARCHAR, value DOUBLE, threshold DOUBLE, detail VARCHAR, dup_of VARCHAR, "
               "n_chars BIGINT, n_tokens BIGINT, text VARCHAR, raw BLOB",
}
FOLDERS = {"kept": "data", "removed": "rejected"}


def shard_files(out: str, view: str) -> list[str]:
    return sorted(glob.glob(os.path.join(out, FOLDERS[view], "*.parquet")))


def sql_list(paths: list[str]) -> str:
    return "[" + ", ".join("'" + p.replace("'", "''") + "'" for p in paths) + "]"


def register_views(con: duckdb.DuckDBPyConnection, out: str) -> None:
    for view in ("kept", "removed"):
        files = shard_files(out, view)
        if files:
            con.execute(f"CREATE OR REPLACE VIEW {view} AS SELECT * FROM read_parquet({sql_list(files)}, "
                        "union_by_name = true)")
        else:
            con.execute(f"CREATE OR REPLACE TABLE {view} ({EMPTY_COLUMNS[view]})")


def connect(out: str) -> duckdb.DuckDBPyConnection:
    con = duckdb.connect(":memory:")
    register_views(con, out)
    return con
