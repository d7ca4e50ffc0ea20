"""Typed views of a resolved config's ``input``, ``output`` and ``global`` sections.

A resolved config stays a plain dict: it is what the manifest records, what the fingerprint hashes and what
task specs carry to workers. Code that reads one of these three sections takes a view instead of indexing
``cfg["output"]["shard_max_mb"]``: ``OutputSection.of(cfg).shard_max_bytes``. The keys, their defaults and
their comments live in ``rules/default.yaml`` alone; ``tests/test_sections.py`` fails when a key is added there
and not here, or the other way round. The bounds a value must lie in are checked once, by
``dataclean.config.validate``.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from dataclean.io.readers import ColumnMapping


def _values(cls, cfg: dict, section: str, skip: tuple[str, ...] = ()) -> dict[str, Any]:
    sec = cfg[section]
    return {f.name: sec[f.name] for f in fields(cls) if f.name not in skip}


@dataclass(frozen=True)
class InputSection:
    """``input:``: which column holds each field, and how much is read at once."""

    columns: ColumnMapping  # with ``default_source`` (the source of rows without one)
    batch_rows: int
    max_record_bytes: int
    split_mb: int  # 0: one pass-1 task per file

    @classmethod
    def of(cls, cfg: dict) -> "InputSection":
        sec, cols = cfg["input"], cfg["input"]["columns"]
        mapping = ColumnMapping(text=cols["text"], id=cols["id"], source=cols["source"], url=cols["url"],
                                lang=cols["lang"], default_source=sec["default_source"])
        return cls(columns=mapping, **_values(cls, cfg, "input", skip=("columns",)))

    @property
    def default_source(self) -> str:
        return self.columns.default_source

    @property
    def split_bytes(self) -> int:
        return self.split_mb << 20


#: The keys of ``input.columns``: the fields of :class:`~dataclean.io.readers.ColumnMapping` but its default.
COLUMN_KEYS = ("text", "id", "source", "url", "lang")


@dataclass(frozen=True)
class OutputSection:
    """``output:``: the size of the shards written, and what else is written."""

    shard_max_rows: int
    shard_max_mb: int
    row_group_rows: int
    rejected_text: bool
    report: bool

    @classmethod
    def of(cls, cfg: dict) -> "OutputSection":
        return cls(**_values(cls, cfg, "output"))

    @property
    def shard_max_bytes(self) -> int:
        return self.shard_max_mb << 20


@dataclass(frozen=True)
class GlobalSection:
    """``global:``: the DuckDB budget and the key partitions of the global step."""

    duckdb_memory_limit: str
    duckdb_threads: int
    temp_directory: str | None  # None: OUT/_work/duckdb_tmp
    partitions: int
    task_memory_limit: str

    @classmethod
    def of(cls, cfg: dict) -> "GlobalSection":
        return cls(**_values(cls, cfg, "global"))


def with_partitions(cfg: dict, partitions: int) -> dict:
    """``cfg`` with ``global.partitions`` replaced (a new dict; ``cfg`` is not changed)."""
    return {**cfg, "global": {**cfg["global"], "partitions": int(partitions)}}
