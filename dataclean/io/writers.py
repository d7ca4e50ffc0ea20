"""Writers: Parquet shards with a declared schema, written under a temporary name and renamed when complete.

A reader never sees a half-written file: everything lands as ``.NAME.tmp-PID`` in the target folder and is
``os.replace``-d into place after it was flushed and fsync-ed. Names are deterministic (``PREFIX-NNNNN``), so a
rerun of a task overwrites exactly the files it wrote before.
"""
from __future__ import annotations

import json
import os
from typing import Iterable

import pyarrow as pa
import pyarrow.parquet as pq

PARQUET_OPTIONS = dict(compression="zstd", compression_level=3, use_dictionary=["source", "lang", "origin_file",
                                                                                  "stage", "rule", "reason"],
                       write_statistics=["id", "origin_row", "doc_key", "task"], store_schema=True)


def _tmp_name(path: str) -> str:
    head, tail = os.path.split(path)
    return os.path.join(head, f".{tail}.tmp-{os.getpid()}")


def _fsync_replace(tmp: str, path: str) -> None:
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def atomic_write_table(table: pa.Table, path: str, row_group_rows: int = 8192) -> None:
    """Write one Parquet file atomically."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = _tmp_name(path)
    try:
        with pq.ParquetWriter(tmp, table.schema, **PARQUET_OPTIONS) as writer:
            writer.write_table(table, row_group_size=row_group_rows)
        _fsync_replace(tmp, path)
    except BaseException:
        _remove_quietly(tmp)
        raise


def write_json_atomic(obj, path: str) -> None:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    tmp = _tmp_name(path)
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(obj, fh, indent=2, sort_keys=True, ensure_ascii=False)
            fh.write("\n")
        _fsync_replace(tmp, path)
    except BaseException:
        _remove_quietly(tmp)
        raise


def _remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except FileNotFoundError:
        pass


class ShardWriter:
    """Writes record batches of one schema into size-bounded Parquet shards ``{prefix}-{k:05d}.parquet``.

    A shard is closed when it holds ``max_rows`` rows or about ``max_bytes`` bytes of Arrow data. Shards are
    written to temporary names and only renamed into place by :meth:`commit`, so a task that fails midway
    leaves nothing visible; :meth:`abort` removes the temporary files.
    """

    def __init__(self, folder: str, prefix: str, schema: pa.Schema, max_rows: int = 100_000,
                 max_bytes: int = 256 << 20, row_group_rows: int = 8192):
        self.folder, self.prefix, self.schema = folder, prefix, schema
        self.max_rows, self.max_bytes, self.row_group_rows = max_rows, max_bytes, row_group_rows
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._pending_bytes = 0
        self._done: list[tuple[str, str]] = []  # (tmp, final)
        self.rows_written = 0
        os.makedirs(folder, exist_ok=True)

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        if batch.num_rows == 0:
            return
        if batch.schema != self.schema:
            batch = batch.select(self.schema.names).cast(self.schema)
        batches = batch.to_batches() if isinstance(batch, pa.Table) else [batch]
        for b in batches:
            offset = 0
            while offset < b.num_rows:
                take = min(b.num_rows - offset, self.max_rows - self._pending_rows)
                part = b.slice(offset, take)
                self._pending.append(part)
                self._pending_rows += take
                self._pending_bytes += part.nbytes
                offset += take
                if self._pending_rows >= self.max_rows or self._pending_bytes >= self.max_bytes:
                    self._flush()

    def _flush(self) -> None:
        if not self._pending:
            return
        final = os.path.join(self.folder, f"{self.prefix}-{len(self._done):05d}.parquet")
        tmp = _tmp_name(final)
        table = pa.Table.from_batches(self._pending, schema=self.schema)
        with pq.ParquetWriter(tmp, self.schema, **PARQUET_OPTIONS) as writer:
            writer.write_table(table, row_group_size=self.row_group_rows)
        self._done.append((tmp, final))
        self.rows_written += table.num_rows
        self._pending, self._pending_rows, self._pending_bytes = [], 0, 0

    def commit(self, write_empty: bool = False) -> list[str]:
        """Flush, fsync and rename every shard into place; return the final paths."""
        self._flush()
        if write_empty and not self._done:
            final = os.path.join(self.folder, f"{self.prefix}-00000.parquet")
            tmp = _tmp_name(final)
            pq.write_table(pa.Table.from_batches([], schema=self.schema), tmp, **PARQUET_OPTIONS)
            self._done.append((tmp, final))
        for tmp, final in self._done:
            _fsync_replace(tmp, final)
        return [final for _, final in self._done]

    def abort(self) -> None:
        for tmp, _ in self._done:
            _remove_quietly(tmp)
        self._done = []
        self._pending = []


def existing_shards(folder: str, prefix: str) -> Iterable[str]:
    if not os.path.isdir(folder):
        return []
    return sorted(os.path.join(folder, f) for f in os.listdir(folder)
                  if f.startswith(prefix + "-") and f.endswith(".parquet"))
