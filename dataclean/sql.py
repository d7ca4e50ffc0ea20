"""Quoting for the SQL that dataclean writes for DuckDB: string literals, lists of file paths and identifiers.
A path is always a quoted literal, never pasted into a glob, so a folder named ``run[1]`` or ``it's`` is read as
itself."""
from __future__ import annotations


def sql_string(value: str) -> str:
    """``value`` as a SQL string literal (single quotes doubled)."""
    return "'" + value.replace("'", "''") + "'"


def sql_list(paths: list[str]) -> str:
    """A DuckDB list literal of string literals, e.g. for ``read_parquet([...])``."""
    return "[" + ", ".join(sql_string(p) for p in paths) + "]"


def ident(name: str) -> str:
    """A column name as a quoted SQL identifier."""
    return '"' + name.replace('"', '""') + '"'
