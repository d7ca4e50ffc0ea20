"""Writers: Parquet shards with a declared schema, written under a temporary name and renamed when complete.

A reader never sees a half-written file: everything lands under a hidden temporary name in the target folder
(``.NAME.tmp-PID-RANDOM``, one per write) and is ``os.replace``-d into place after it was flushed and
fsync-ed. Final names are deterministic (``PREFIX-NNNNN``), so a rerun of a task overwrites exactly the files
it wrote before; the temporary files a killed run left behind are removed by the next run of that folder,
under its lock (:mod:`dataclean.exec.lock`).

A write that fails (disk full, quota, read-only folder, I/O error) removes its temporary files and raises
:class:`WriteError`, whose message is one line naming the file and the cause: a run stops on it (nothing
half-written is visible), and the same command, run again once the cause is gone, resumes.
"""
from __future__ import annotations

import json
import os
import re
import secrets
from contextlib import contextmanager

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

PARQUET_OPTIONS = dict(compression="zstd", compression_level=3, use_dictionary=["source", "lang", "origin_file",
                                                                                  "stage", "rule", "reason"],
                       write_statistics=["id", "origin_row", "doc_key", "task"], store_schema=True)

#: Codec of the files a run writes for itself under ``_work`` (pass-1 survivors, shuffle rows, the global step's
#: gathered rows), read once or twice and deleted when the run is final. On a bench shard's survivors, LZ4
#: (pyarrow's ``lz4``) writes in 0.056 s and reads in 0.014 s for 24.9 MB, zstd level 1 in 0.065 / 0.019 s for
#: 22.6 MB (level 3, 1.6x slower to write than level 1, is kept for what the run delivers).
WORK_CODEC = "lz4"


def _is_hash_type(t: pa.DataType) -> bool:
    return pa.types.is_fixed_size_binary(t) or pa.types.is_uint64(t) or \
        (pa.types.is_list(t) and (pa.types.is_uint32(t.value_type) or pa.types.is_uint64(t.value_type)))


def parquet_options(schema: pa.Schema, level: int = 3, statistics: tuple[str, ...] = (), codec: str = "zstd") -> dict:
    """:data:`PARQUET_OPTIONS` for ``schema``, compressed by ``codec`` (``zstd`` at ``level``, or ``lz4``): columns of
    hashes and MinHash values
    (``fixed_size_binary``, ``uint64``, lists of ``uint32`` / ``uint64``: dataclean uses these types for nothing
    else) are stored uncompressed, as zstd cannot shrink random bits and only spends time on them (a third of
    the time spent writing pass 1's survivors went into their MinHash signatures); ``statistics`` names
    columns that get min/max statistics besides the usual ones."""
    options = dict(PARQUET_OPTIONS, write_statistics=list(PARQUET_OPTIONS["write_statistics"]) + list(statistics))
    options["compression"] = codec
    leveled = codec == "zstd"
    options["compression_level"] = level if leveled else None
    if any(_is_hash_type(f.type) for f in schema):  # per Parquet leaf column (a list's is NAME.list.element)
        leaves = [(path, _is_hash_type(f.type)) for f in schema for path in _leaf_paths(f.name, f.type)]
        options["compression"] = {path: "none" if raw else codec for path, raw in leaves}
        options["compression_level"] = {path: level for path, raw in leaves if not raw} if leveled else None
    return options


def _leaf_paths(path: str, t: pa.DataType) -> list[str]:
    """The Parquet leaf column paths of an Arrow field, as pyarrow's writer names them (compliant nested types)."""
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _leaf_paths(f"{path}.list.element", t.value_type)
    if pa.types.is_map(t):
        return _leaf_paths(f"{path}.key_value.key", t.key_type) + _leaf_paths(f"{path}.key_value.value", t.item_type)
    if pa.types.is_struct(t):
        return [p for i in range(t.num_fields) for p in _leaf_paths(f"{path}.{t.field(i).name}", t.field(i).type)]
    return [path]

#: Messages of libraries that do not raise OSError (DuckDB) for a write that the file system refused.
_WRITE_FAILURE_TEXTS = ("No space left on device", "Disk quota exceeded", "Read-only file system")


class WriteError(Exception):
    """An output file could not be written. ``str()`` is the one line shown to the user."""


#: How DuckDB names the file it could not write, and why, inside its (JSON-ish) error message.
_TMP_NAME = re.compile(r"\.(?P<name>.+)\.tmp(-\d+-[0-9a-f]+)?")
_DUCKDB_FILE = re.compile(r'Could not write file \\?"(?P<path>[^"\\]+)\\?": (?P<cause>[^"\\,}]+)')


def write_error(path: str, exc: BaseException) -> WriteError:
    """The :class:`WriteError` for ``exc`` met while writing ``path`` (for a DuckDB error, the file DuckDB
    names instead, its temporary ``.tmp`` file removed)."""
    if isinstance(exc, OSError) and exc.errno:
        cause = os.strerror(exc.errno)
    elif m := _DUCKDB_FILE.search(str(exc)):
        path, cause = m["path"], m["cause"].strip()
        if m2 := _TMP_NAME.fullmatch(os.path.basename(path)):
            remove_quietly(path)  # DuckDB's COPY target: half-written
            path = os.path.join(os.path.dirname(path), m2["name"])
    else:
        lines = str(exc).strip().splitlines()
        cause = lines[0] if lines else type(exc).__name__
    return WriteError(f"cannot write {path}: {cause}; free space (or fix the folder) and run the same command "
                      "again to resume")


def is_write_failure(exc: BaseException) -> bool:
    """True for an exception that says the file system refused a write (any OSError, or a DuckDB I/O error
    whose message says so)."""
    if isinstance(exc, OSError):
        return True
    return type(exc).__name__ in ("IOException", "OutOfMemoryException") and \
        any(text in str(exc) for text in _WRITE_FAILURE_TEXTS)


@contextmanager
def write_errors(path: str):
    """Turn a write failure inside the block (see :func:`is_write_failure`) into a :class:`WriteError` for
    ``path``; anything else passes through."""
    try:
        yield
    except WriteError:
        raise
    except Exception as exc:
        if is_write_failure(exc):
            raise write_error(path, exc) from None
        raise


def injected_failure(path: str) -> None:
    if "DATACLEAN_FAILPOINTS" in os.environ:  # tests only; imported late (dataclean.exec imports this module)
        from dataclean.failpoints import write_failpoint
        write_failpoint(path)


def tmp_name(path: str) -> str:
    """A new temporary name for writing ``path``: ``.NAME.tmp-PID-RANDOM`` in the same folder. Every writer (and
    every write) has its own, so two writers of one file never write into the same temporary file: the last
    rename wins, and each file a reader sees is one writer's whole file."""
    head, tail = os.path.split(path)
    return os.path.join(head, f".{tail}.tmp-{os.getpid()}-{secrets.token_hex(4)}")


def fsync_replace(tmp: str, path: str) -> None:
    with open(tmp, "rb") as fh:
        os.fsync(fh.fileno())
    os.replace(tmp, path)


@contextmanager
def _atomic_parquet(path: str, schema: pa.Schema, options: dict):
    """A ``ParquetWriter`` on a temporary name beside ``path``, renamed into place (fsynced) when the block
    ends; on any failure the temporary file goes and an ``OSError`` becomes :class:`WriteError`."""
    tmp = tmp_name(path)
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with pq.ParquetWriter(tmp, schema, **options) as writer:
            injected_failure(path)
            yield writer
        fsync_replace(tmp, path)
    except BaseException as exc:
        remove_quietly(tmp)
        if isinstance(exc, OSError):
            raise write_error(path, exc) from None
        raise


def atomic_write_table(table: pa.Table, path: str, row_group_rows: int = 8192, *,
                       row_group_sizes: list[int] | None = None, statistics: tuple[str, ...] = (),
                       level: int = 3, codec: str = "zstd") -> None:
    """Write one Parquet file atomically; raise :class:`WriteError` (nothing left behind) if that fails.

    Row groups are of ``row_group_rows`` rows, or exactly ``row_group_sizes`` (consecutive slices, in order);
    ``statistics`` names columns that get min/max statistics besides :data:`PARQUET_OPTIONS`' own; ``codec`` and
    ``level`` are as for :func:`parquet_options`."""
    with _atomic_parquet(path, table.schema, parquet_options(table.schema, level, statistics, codec)) as writer:
        if not row_group_sizes:
            writer.write_table(table, row_group_size=row_group_rows)
        start = 0
        for size in row_group_sizes or ():
            writer.write_table(table.slice(start, size), row_group_size=size)
            start += size


def atomic_write_tables(tables, schema: pa.Schema, path: str, row_group_rows: int = 65536, *, level: int = 3,
                        codec: str = "zstd") -> int:
    """Write the rows of the tables of the iterable ``tables`` (each cast to ``schema``), in order, into one
    Parquet file atomically, in row groups of exactly ``row_group_rows`` rows (the last one shorter), holding
    about one table and one row group at a time: the bytes depend on the rows only, not on how they were cut
    into tables. Returns the rows written; :class:`WriteError` as :func:`atomic_write_table`."""
    rows = 0
    with _atomic_parquet(path, schema, parquet_options(schema, level, (), codec)) as writer:
        pending: list[pa.Table] = []
        held = 0
        for table in tables:
            if not table.num_rows:
                continue
            pending.append(table.select(schema.names).cast(schema))
            held += table.num_rows
            while held >= row_group_rows:
                group = pa.concat_tables(pending)
                writer.write_table(group.slice(0, row_group_rows).combine_chunks(), row_group_size=row_group_rows)
                pending, held = [group.slice(row_group_rows)], held - row_group_rows
                rows += row_group_rows
        if held:
            writer.write_table(pa.concat_tables(pending).combine_chunks(), row_group_size=row_group_rows)
            rows += held
    return rows


def write_json_atomic(obj, path: str) -> None:
    """Write ``obj`` as JSON atomically; raise :class:`WriteError` (nothing left behind) if that fails."""
    write_text_atomic(json.dumps(obj, indent=2, sort_keys=True, ensure_ascii=False) + "\n", path)


def write_text_atomic(text: str, path: str) -> None:
    """Write ``text`` (UTF-8) atomically; raise :class:`WriteError` (nothing left behind) if that fails."""
    tmp = tmp_name(path)
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as fh:
            injected_failure(path)
            fh.write(text)
        fsync_replace(tmp, path)
    except BaseException as exc:
        remove_quietly(tmp)
        if isinstance(exc, OSError):
            raise write_error(path, exc) from None
        raise


def remove_quietly(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def content_bytes(data: pa.RecordBatch | pa.Array) -> int:
    """Bytes of the values of ``data``, from its values alone (not from how its buffers were cut or allocated,
    validity bitmaps aside): string and binary lengths plus 4 per value, fixed widths times length, lists as 4
    per value plus their elements."""
    if isinstance(data, pa.RecordBatch):
        return sum(content_bytes(c) for c in data.columns)
    t = data.type
    if pa.types.is_string(t) or pa.types.is_large_string(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return 4 * len(data) + int(pc.sum(pc.binary_length(data)).as_py() or 0)
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return 4 * len(data) + content_bytes(pc.list_flatten(data))
    if pa.types.is_fixed_size_list(t):
        return content_bytes(pc.list_flatten(data))
    if pa.types.is_dictionary(t):
        return content_bytes(data.dictionary_decode())
    if pa.types.is_struct(t):
        return sum(content_bytes(data.field(i)) for i in range(t.num_fields))
    try:
        return len(data) * max(1, t.bit_width // 8)
    except ValueError:  # (a type without a fixed width that is none of the above)
        return data.nbytes


def _slices(parts: list[pa.RecordBatch], start: int) -> list[pa.RecordBatch]:
    """The rows from ``start`` on of the batches ``parts`` taken as one sequence."""
    out, at = [], 0
    for part in parts:
        end = at + part.num_rows
        if end > start:
            out.append(part.slice(max(0, start - at)))
        at = end
    return out


class ShardWriter:
    """Writes record batches of one schema into size-bounded Parquet shards ``{prefix}-{k:05d}.parquet``.

    A shard is closed when it holds ``max_rows`` rows or, at the end of a row group, at least ``max_bytes``
    bytes of values (:func:`content_bytes`). Row groups are written contiguous: the bytes of a shard depend on
    its rows alone, not on the batches they were written in (a file cut into pieces gives the same). Shards are
    written to temporary names and only renamed into place by :meth:`commit`, so a task that fails midway
    leaves nothing visible; :meth:`abort` removes the temporary files. A write or commit that fails on the
    file system aborts the writer (a failed commit also removes the shards it had already renamed) and raises
    :class:`WriteError`.
    """

    def __init__(self, folder: str, prefix: str, schema: pa.Schema, max_rows: int = 100_000,
                 max_bytes: int = 256 << 20, row_group_rows: int = 8192, level: int = 3, codec: str = "zstd"):
        self.folder, self.prefix, self.schema = folder, prefix, schema
        self._options = parquet_options(schema, level, codec=codec)
        self.max_rows, self.max_bytes, self.row_group_rows = max_rows, max_bytes, row_group_rows
        self._pending: list[pa.RecordBatch] = []
        self._pending_rows = 0
        self._pending_bytes = 0
        self._done: list[tuple[str, str]] = []  # (tmp, final)
        self.rows_written = 0
        try:
            os.makedirs(folder, exist_ok=True)
        except OSError as exc:
            raise write_error(folder, exc) from None

    def write(self, batch: pa.RecordBatch | pa.Table) -> None:
        if batch.num_rows == 0:
            return
        if batch.schema != self.schema:
            batch = batch.select(self.schema.names).cast(self.schema)
        batches = batch.to_batches() if isinstance(batch, pa.Table) else [batch]
        for b in batches:
            offset = 0
            while offset < b.num_rows:
                # parts end at the shard's row-group ends, where the byte size is measured: a shard closes at
                # the same row whatever batches the rows came in
                group_left = self.row_group_rows - self._pending_rows % self.row_group_rows
                take = min(b.num_rows - offset, self.max_rows - self._pending_rows, group_left)
                part = b.slice(offset, take)
                self._pending.append(part)
                self._pending_rows += take
                offset += take
                if take == group_left:
                    group = self._pending_rows - self.row_group_rows
                    self._pending_bytes += sum(content_bytes(p) for p in _slices(self._pending, group))
                if self._pending_rows >= self.max_rows or self._pending_bytes >= self.max_bytes:
                    self._flush()

    def _next_final(self) -> str:
        return os.path.join(self.folder, f"{self.prefix}-{len(self._done):05d}.parquet")

    def _write_file(self, table: pa.Table) -> None:
        final = self._next_final()
        tmp = tmp_name(final)
        self._done.append((tmp, final))  # listed first, so that abort() removes a half-written file too
        try:
            with pq.ParquetWriter(tmp, self.schema, **self._options) as writer:
                injected_failure(final)
                # one contiguous row group at a time: the pages are the same whatever batches the rows came in
                for start in range(0, max(table.num_rows, 1), self.row_group_rows):
                    group = table.slice(start, self.row_group_rows).combine_chunks()
                    writer.write_table(group, row_group_size=self.row_group_rows)
        except OSError as exc:
            self.abort()
            raise write_error(final, exc) from None
        except BaseException:
            self.abort()
            raise

    def _flush(self) -> None:
        if not self._pending:
            return
        table = pa.Table.from_batches(self._pending, schema=self.schema)
        self._write_file(table)
        self.rows_written += table.num_rows
        self._pending, self._pending_rows, self._pending_bytes = [], 0, 0

    def commit(self, write_empty: bool = False) -> list[str]:
        """Flush, fsync and rename every shard into place; return the final paths."""
        self._flush()
        if write_empty and not self._done:
            self._write_file(pa.Table.from_batches([], schema=self.schema))
        renamed: list[str] = []
        for tmp, final in self._done:
            try:
                fsync_replace(tmp, final)
            except BaseException as exc:
                for path in renamed:
                    remove_quietly(path)
                self.abort()
                if isinstance(exc, OSError):
                    raise write_error(final, exc) from None
                raise
            renamed.append(final)
        self._done = []
        return renamed

    def abort(self) -> None:
        for tmp, _ in self._done:
            remove_quietly(tmp)
        self._done = []
        self._pending = []
        self._pending_rows = self._pending_bytes = 0
