"""Readers: Parquet, JSON Lines (plain, .gz, .zst) into record batches of :data:`dataclean.schema.DOC_SCHEMA`.

Two kinds of failure are kept apart:

* a *record* that cannot be used (JSON that does not parse, text missing, null, not a string or not valid
  UTF-8) becomes a ``bad_record`` ledger row with its raw bytes, and reading goes on;
* a *file* that cannot be read (truncated gzip, bad zstd frame, Parquet without a footer, no text column)
  raises :class:`InputFileError` carrying the path and a one-line cause.
"""
from __future__ import annotations

import glob
import gzip
import io
import json
import os
import zlib
from dataclasses import dataclass, field
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import zstandard

from dataclean.schema import DOC_SCHEMA, LEDGER_FIELDS, doc_key

SUPPORTED_SUFFIXES = (".parquet", ".jsonl", ".json", ".ndjson", ".jsonl.gz", ".json.gz", ".ndjson.gz",
                      ".jsonl.zst", ".json.zst", ".ndjson.zst")
LEDGER_SCHEMA = pa.schema(LEDGER_FIELDS)
#: A JSONL chunk is cut when it holds this many bytes of text, whatever its row count.
MAX_CHUNK_TEXT_BYTES = 64 << 20


class InputFileError(Exception):
    """A whole input file cannot be read. ``str()`` is the one line shown to the user."""

    def __init__(self, path: str, cause: str):
        super().__init__(f"{path}: {cause}")
        self.path = path
        self.cause = cause


@dataclass(frozen=True)
class ColumnMapping:
    """Which input column holds each canonical field. ``None`` means the input has no such column."""

    text: str = "text"
    id: str | None = "id"
    source: str | None = "source"
    url: str | None = "url"
    lang: str | None = None
    default_source: str = "unknown"

    def mapped(self) -> set[str]:
        return {c for c in (self.text, self.id, self.source, self.url, self.lang) if c}


@dataclass
class ReadChunk:
    """One batch of usable documents and the bad records met while reading it."""

    docs: pa.RecordBatch
    bad: pa.RecordBatch | None = None
    n_records: int = 0  # docs + bad


def detect_format(path: str) -> str:
    name = path.lower()
    if name.endswith(".parquet"):
        return "parquet"
    for suffix, fmt in ((".gz", "jsonl.gz"), (".zst", "jsonl.zst")):
        if name.endswith(suffix):
            return fmt
    if name.endswith((".jsonl", ".json", ".ndjson")):
        return "jsonl"
    raise InputFileError(path, "unsupported file type (expected .parquet, .jsonl, .jsonl.gz or .jsonl.zst)")


def discover_inputs(inputs: list[str]) -> list[str]:
    """Expand files, folders (recursively, supported files only) and globs into a sorted, de-duplicated list."""
    found: list[str] = []
    for spec in inputs:
        if os.path.isdir(spec):
            for root, dirs, files in os.walk(spec):
                dirs[:] = sorted(d for d in dirs if not d.startswith((".", "_")))
                found.extend(os.path.join(root, f) for f in files
                             if f.lower().endswith(SUPPORTED_SUFFIXES) and not f.startswith((".", "_")))
        elif os.path.exists(spec):
            found.append(spec)
        else:
            matches = glob.glob(spec, recursive=True)
            if not matches:
                raise FileNotFoundError(f"input not found: {spec}")
            found.extend(m for m in matches if os.path.isfile(m))
    return sorted({os.path.normpath(p) for p in found})


# --------------------------------------------------------------------------------------------------------
# Assembling canonical batches


def _bad_rows(origin_file: str, rows: list[int], raws: list[bytes], causes: list[str],
              ids: list[str | None], sources: list[str | None]) -> pa.RecordBatch:
    n = len(rows)
    cols = {f.name: pa.nulls(n, f.type) for f in LEDGER_FIELDS}
    cols.update(
        id=pa.array([i if i is not None else f"{origin_file}#{r}" for i, r in zip(ids, rows)], pa.string()),
        source=pa.array(sources, pa.string()),
        origin_file=pa.array([origin_file] * n, pa.string()),
        origin_row=pa.array(rows, pa.int64()),
        stage=pa.array(["read"] * n, pa.string()),
        rule=pa.array(["parse"] * n, pa.string()),
        reason=pa.array(["bad_record"] * n, pa.string()),
        detail=pa.array(causes, pa.string()),
        raw=pa.array(raws, pa.binary()),
    )
    return pa.RecordBatch.from_arrays([cols[f.name] for f in LEDGER_FIELDS], schema=LEDGER_SCHEMA)


def _to_string(arr: pa.Array | None, n: int) -> pa.Array:
    if arr is None:
        return pa.nulls(n, pa.string())
    if pa.types.is_string(arr.type):
        return arr
    if pa.types.is_large_string(arr.type) or pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type):
        return pc.cast(arr, pa.string())
    return pa.array([None if v is None else str(v) for v in arr.to_pylist()], pa.string())


def _canonical(origin_file: str, file_index: int, rows: pa.Array, texts: pa.Array, ids: pa.Array | None,
               sources: pa.Array | None, urls: pa.Array | None, langs: pa.Array | None,
               metas: pa.Array | None, default_source: str) -> pa.RecordBatch:
    n = len(texts)
    rows = rows.cast(pa.int64())
    derived = pc.binary_join_element_wise(pa.array([origin_file] * n, pa.string()),
                                          pc.cast(rows, pa.string()), "#")
    ids = _to_string(ids, n)
    ids = pc.if_else(pc.is_null(ids), derived, ids) if ids.null_count else ids
    sources = _to_string(sources, n)
    sources = pc.fill_null(sources, default_source) if sources.null_count else sources
    keys = pc.add(rows, pa.scalar(doc_key(file_index, 0), pa.int64()))
    arrays = [ids, texts, sources, _to_string(urls, n), _to_string(langs, n),
              metas if metas is not None else pa.nulls(n, pa.string()),
              pa.array([origin_file] * n, pa.string()), rows, keys]
    return pa.RecordBatch.from_arrays(arrays, schema=DOC_SCHEMA)


def _json_default(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", "backslashreplace")
    return str(value)


def _meta_json(values: list[dict]) -> pa.Array:
    return pa.array([json.dumps(v, ensure_ascii=False, sort_keys=True, default=_json_default) if v else None
                     for v in values], pa.string())


# --------------------------------------------------------------------------------------------------------
# Parquet


def _read_parquet(path: str, file_index: int, mapping: ColumnMapping, batch_rows: int) -> Iterator[ReadChunk]:
    try:
        pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        raise InputFileError(path, f"not a readable Parquet file ({_one_line(exc)})") from None
    names = pf.schema_arrow.names
    if mapping.text not in names:
        raise InputFileError(path, f"no text column {mapping.text!r} (columns: {', '.join(names) or 'none'})")
    other = [c for c in names if c not in mapping.mapped()]
    row0 = 0
    for batch in pf.iter_batches(batch_size=batch_rows):
        n = batch.num_rows
        rows = pa.array(range(row0, row0 + n), pa.int64())
        row0 += n
        col = batch.column(mapping.text)
        bad_mask = _parquet_bad_text(col)
        get = lambda name: batch.column(name) if name and name in names else None  # noqa: E731
        metas = _meta_json(batch.select(other).to_pylist()) if other else None
        bad = None
        if bad_mask is not None:
            bad_idx = [i for i, b in enumerate(bad_mask) if b]
            bad = _parquet_bad_batch(path, batch, col, bad_idx, row0 - n, mapping)
            keep = pa.array([not b for b in bad_mask])
            batch = batch.filter(keep)
            rows = rows.filter(keep)
            metas = metas.filter(keep) if metas is not None else None
            col = batch.column(mapping.text)
            if not pa.types.is_string(col.type):
                col = col.cast(pa.string()) if len(col) else pa.array([], pa.string())
        elif not pa.types.is_string(col.type):
            col = col.cast(pa.string())
        docs = _canonical(path, file_index, rows, col, get(mapping.id), get(mapping.source), get(mapping.url),
                          get(mapping.lang), metas, mapping.default_source)
        yield ReadChunk(docs=docs, bad=bad, n_records=n)


def _parquet_bad_text(col: pa.Array) -> list[bool] | None:
    """Per-row flags for texts that are null, not strings, or invalid UTF-8; None when every row is fine."""
    if not (pa.types.is_string(col.type) or pa.types.is_large_string(col.type)):
        return [True] * len(col)
    try:
        col.validate(full=True)
        utf8_ok = True
    except pa.ArrowInvalid:
        utf8_ok = False
    if utf8_ok and col.null_count == 0:
        return None
    flags = []
    raw = col.view(pa.binary() if pa.types.is_string(col.type) else pa.large_binary())
    for value in raw.to_pylist():
        if value is None:
            flags.append(True)
            continue
        try:
            value.decode("utf-8")
            flags.append(False)
        except UnicodeDecodeError:
            flags.append(True)
    return flags


def _parquet_bad_batch(path, batch, col, bad_idx, row0, mapping) -> pa.RecordBatch:
    rows, raws, causes, ids, sources = [], [], [], [], []
    is_str = pa.types.is_string(col.type) or pa.types.is_large_string(col.type)
    raw_col = col.view(pa.binary() if pa.types.is_string(col.type) else pa.large_binary()) if is_str else None
    for i in bad_idx:
        rows.append(row0 + i)
        record = batch.slice(i, 1).to_pylist()[0]
        if not is_str:
            causes.append(f"text is {col.type}, not a string")
            raws.append(json.dumps(record, ensure_ascii=False, default=_json_default).encode("utf-8"))
        elif raw_col[i].as_py() is None:
            causes.append("text is null")
            raws.append(json.dumps(record, ensure_ascii=False, default=_json_default).encode("utf-8"))
        else:
            causes.append("text is not valid UTF-8")
            raws.append(raw_col[i].as_py())
        rid = record.get(mapping.id) if mapping.id else None
        ids.append(None if rid is None else _json_default(rid) if not isinstance(rid, str) else rid)
        src = record.get(mapping.source) if mapping.source else None
        sources.append(src if isinstance(src, str) else mapping.default_source)
    return _bad_rows(path, rows, raws, causes, ids, sources)


# --------------------------------------------------------------------------------------------------------
# JSON Lines


def _open_lines(path: str, fmt: str):
    fh = open(path, "rb")
    if fmt == "jsonl.gz":
        return gzip.GzipFile(fileobj=fh, mode="rb")
    if fmt == "jsonl.zst":
        reader = zstandard.ZstdDecompressor().stream_reader(fh, read_across_frames=True, closefd=True)
        return io.BufferedReader(reader, buffer_size=1 << 20)
    return fh


def _read_jsonl(path: str, fmt: str, file_index: int, mapping: ColumnMapping,
                batch_rows: int) -> Iterator[ReadChunk]:
    keys = mapping.mapped()
    state = _JsonlChunk()
    try:
        with _open_lines(path, fmt) as lines:
            for lineno, line in enumerate(lines):
                if not line.strip():
                    continue  # a blank line is not a record (documented: rows count lines, blanks included)
                state.add(lineno, line, mapping, keys)
                if state.n >= batch_rows or state.text_bytes >= MAX_CHUNK_TEXT_BYTES:
                    yield state.finish(path, file_index, mapping)
                    state = _JsonlChunk()
    except (OSError, EOFError, zlib.error, zstandard.ZstdError) as exc:
        raise InputFileError(path, f"cannot decompress or read ({_one_line(exc)})") from None
    if state.n:
        yield state.finish(path, file_index, mapping)


@dataclass
class _JsonlChunk:
    rows: list = field(default_factory=list)
    texts: list = field(default_factory=list)
    ids: list = field(default_factory=list)
    sources: list = field(default_factory=list)
    urls: list = field(default_factory=list)
    langs: list = field(default_factory=list)
    metas: list = field(default_factory=list)
    bad: list = field(default_factory=list)  # (row, raw, cause, id, source)
    text_bytes: int = 0

    @property
    def n(self) -> int:
        return len(self.rows) + len(self.bad)

    def add(self, lineno: int, line: bytes, mapping: ColumnMapping, keys: set[str]) -> None:
        raw = line.rstrip(b"\r\n")
        try:
            record = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            cause = "not valid UTF-8" if isinstance(exc, UnicodeDecodeError) else f"invalid JSON ({_one_line(exc)})"
            self.bad.append((lineno, raw, cause, None, None))
            return
        if not isinstance(record, dict):
            self.bad.append((lineno, raw, f"record is a JSON {type(record).__name__}, not an object", None, None))
            return
        rid = record.get(mapping.id) if mapping.id else None
        rid = None if rid is None else rid if isinstance(rid, str) else json.dumps(rid)
        src = record.get(mapping.source) if mapping.source else None
        src = src if isinstance(src, str) else None
        text = record.get(mapping.text)
        if not isinstance(text, str):
            cause = "text is missing" if mapping.text not in record else (
                "text is null" if text is None else f"text is a JSON {type(text).__name__}, not a string")
            self.bad.append((lineno, raw, cause, rid, src or mapping.default_source))
            return
        self.rows.append(lineno)
        self.texts.append(text)
        self.ids.append(rid)
        self.sources.append(src)
        self.urls.append(_str_or_none(record.get(mapping.url)) if mapping.url else None)
        self.langs.append(_str_or_none(record.get(mapping.lang)) if mapping.lang else None)
        self.metas.append({k: v for k, v in record.items() if k not in keys})
        self.text_bytes += len(raw)

    def finish(self, path: str, file_index: int, mapping: ColumnMapping) -> ReadChunk:
        try:
            texts = pa.array(self.texts, pa.string())
        except (UnicodeEncodeError, pa.ArrowException):
            texts = self._drop_unencodable()
        try:
            metas = _meta_json(self.metas)
        except (UnicodeEncodeError, pa.ArrowException, RecursionError, ValueError):
            metas = pa.array([_safe_meta(m) for m in self.metas], pa.string())
        docs = _canonical(path, file_index, pa.array(self.rows, pa.int64()), texts,
                          pa.array(self.ids, pa.string()), pa.array(self.sources, pa.string()),
                          pa.array(self.urls, pa.string()), pa.array(self.langs, pa.string()), metas,
                          mapping.default_source)
        bad = None
        if self.bad:
            bad = _bad_rows(path, *[list(col) for col in zip(*self.bad)])
        return ReadChunk(docs=docs, bad=bad, n_records=self.n)

    def _drop_unencodable(self) -> pa.Array:
        """Texts with lone surrogates (from ``\\udXXX`` escapes) are not UTF-8: move them to the bad list."""
        keep = []
        for i, text in enumerate(self.texts):
            try:
                text.encode("utf-8")
                keep.append(i)
            except UnicodeEncodeError:
                self.bad.append((self.rows[i], text.encode("utf-8", "surrogatepass"),
                                 "text is not valid UTF-8 (lone surrogate)", self.ids[i],
                                 self.sources[i]))
        for name in ("rows", "texts", "ids", "sources", "urls", "langs", "metas"):
            values = getattr(self, name)
            setattr(self, name, [values[i] for i in keep])
        self.bad.sort(key=lambda b: b[0])
        return pa.array(self.texts, pa.string())


def _safe_meta(meta: dict) -> str | None:
    if not meta:
        return None
    try:
        return json.dumps(meta, ensure_ascii=True, sort_keys=True, default=_json_default)
    except (RecursionError, ValueError):
        return json.dumps({"_unserializable": True})


def _str_or_none(value) -> str | None:
    return value if isinstance(value, str) else None if value is None else str(value)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


# --------------------------------------------------------------------------------------------------------


def read_shard(path: str, file_index: int, mapping: ColumnMapping | None = None,
               batch_rows: int = 4096) -> Iterator[ReadChunk]:
    """Yield :class:`ReadChunk` s of one input file; raise :class:`InputFileError` if the file is unreadable."""
    mapping = mapping or ColumnMapping()
    fmt = detect_format(path)
    if not os.path.isfile(path):
        raise InputFileError(path, "not a file")
    if fmt == "parquet":
        yield from _read_parquet(path, file_index, mapping, batch_rows)
    else:
        yield from _read_jsonl(path, fmt, file_index, mapping, batch_rows)
