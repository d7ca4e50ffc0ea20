"""Readers: Parquet, JSON Lines (plain, .gz, .zst) into record batches of :data:`dataclean.schema.DOC_SCHEMA`.

Two kinds of failure are kept apart:

* a *record* that cannot be used (a line that is not UTF-8 or not a JSON object; text missing, null or not
  a string; a string that UTF-8 cannot hold: a lone ``\ud800`` escape in JSON, invalid bytes in any Parquet
  string column) becomes a ``bad_record`` ledger row with its raw bytes and a one-line ``detail``, and
  reading goes on. A NUL character is a character: the reader keeps it (normalize removes controls);
* a *file* that cannot be read (truncated gzip or zstd, bad zstd frame, Parquet without a footer or with
  corrupt pages, no text column, repeated column names) raises :class:`InputFileError` carrying the path
  and a one-line cause. Records read before the failure must be discarded by the caller.
"""
from __future__ import annotations

import fnmatch
import glob
import gzip
import io
import json
import os
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Iterator

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import zstandard

from dataclean.io import fs
from dataclean.io.streams import BlockStream
from dataclean.io.warc import WARC_SUFFIXES, WarcFileError, read_warc
from dataclean.schema import DOC_SCHEMA, LEDGER_FIELDS, doc_key

SUPPORTED_SUFFIXES = (".parquet", ".jsonl", ".json", ".ndjson", ".jsonl.gz", ".json.gz", ".ndjson.gz",
                      ".jsonl.zst", ".json.zst", ".ndjson.zst") + WARC_SUFFIXES
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
    #: Records that are not documents, by kind (WARC ``request``, ``response_not_html``…): counted, not read.
    skipped: dict[str, int] = field(default_factory=dict)


def detect_format(path: str) -> str:
    name = path.lower()
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith((".jsonl.gz", ".json.gz", ".ndjson.gz")):
        return "jsonl.gz"
    if name.endswith((".jsonl.zst", ".json.zst", ".ndjson.zst")):
        return "jsonl.zst"
    if name.endswith((".jsonl", ".json", ".ndjson")):
        return "jsonl"
    if name.endswith(WARC_SUFFIXES):
        return "warc"
    raise InputFileError(path, "unsupported file type (expected .parquet, .jsonl, .jsonl.gz, .jsonl.zst, "
                               ".warc, .warc.gz or .wet.gz)")


def discover_inputs(inputs: list[str], notes: list[str] | None = None) -> list[str]:
    """Expand files, folders and globs into a sorted, de-duplicated list.

    Local files are de-duplicated by their real path: the same file named twice (relative and absolute, or
    through a symlink) is read once, under its first name in sorted order, and ``notes`` (when given) gets one
    line saying so.

    A folder (recursively) and a glob yield supported files only, skipping names that start with ``.`` or
    ``_``; a file named explicitly is always kept, so that an unsupported one fails loudly when read.
    URIs (``s3://bucket/corpus``, ``s3://bucket/**/*.parquet``, ``file:///…``) follow the same rules, a glob
    being matched on the listing of its fixed prefix, and come back as URIs with their scheme."""
    found: list[str] = []
    for spec in inputs:
        if fs.is_uri(spec):
            found.extend(_discover_uri(spec))
        elif os.path.isdir(spec):
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
            found.extend(m for m in matches if os.path.isfile(m) and _wanted_match(spec, m))
    names = sorted({p if fs.is_uri(p) else os.path.normpath(p) for p in found})
    first: dict[str, str] = {}
    out = []
    for name in names:
        real = name if fs.is_uri(name) else os.path.realpath(name)
        if real in first:
            if notes is not None:
                notes.append(f"{name} is the same file as {first[real]}: read once")
            continue
        first[real] = name
        out.append(name)
    return out


def _wanted_match(pattern: str, match: str) -> bool:
    """A glob picks what a folder walk would: supported files, nothing hidden or ``_``-prefixed (``_work``,
    ``_SUCCESS``) below the pattern's fixed prefix."""
    parts = pattern.split(os.sep)
    fixed = next((i for i, p in enumerate(parts) if any(ch in p for ch in "*?[")), len(parts))
    rel = os.path.relpath(match, os.sep.join(parts[:fixed]) or os.curdir)
    return (match.lower().endswith(SUPPORTED_SUFFIXES)
            and not any(c.startswith((".", "_")) for c in rel.split(os.sep) if c not in (".", "..")))


def _wanted_below(rel: str) -> bool:
    """A file at ``rel`` (``/``-separated, below a folder or a glob's fixed prefix) is an input the walk takes."""
    return rel.lower().endswith(SUPPORTED_SUFFIXES) and not any(c.startswith((".", "_")) for c in rel.split("/"))


def _discover_uri(spec: str) -> list[str]:
    """The input files a URI names: the file itself, every wanted file below a folder (prefix), or the wanted
    files whose path below the glob's fixed prefix matches the glob (``*``, ``?`` and ``[…]`` within one
    name, ``**`` any number of folders, as ``glob.glob(recursive=True)``)."""
    if fs.isfile(spec):
        return [spec]
    if fs.isdir(spec):
        base = spec.rstrip("/")
        return [u for u in fs.walk_files(base) if _wanted_below(u[len(base) + 1:])]
    key = spec.split("://", 1)[1].partition("/")[2]
    parts = key.split("/")
    fixed = next((i for i, p in enumerate(parts) if any(ch in p for ch in "*?[")), None)
    if fixed is None:
        raise FileNotFoundError(f"input not found: {spec}")
    base = (spec[: len(spec) - len(key)] + "/".join(parts[:fixed])).rstrip("/")
    try:
        listed = fs.walk_files(base)
    except FileNotFoundError:
        listed = []
    matched = [u for u in listed if _glob_match(parts[fixed:], u[len(base) + 1:].split("/"))]
    if not matched:
        raise FileNotFoundError(f"input not found: {spec}")
    return [u for u in matched if _wanted_below(u[len(base) + 1:])]


def _glob_match(pattern: list[str], names: list[str]) -> bool:
    """Whether the path ``names`` (components) matches the glob ``pattern`` (components); a ``**`` component
    is zero or more folders (at the end: anything below)."""
    if not pattern:
        return not names
    if pattern[0] == "**":
        if len(pattern) == 1:
            return bool(names)
        return any(_glob_match(pattern[1:], names[i:]) for i in range(len(names) + 1))
    return bool(names) and fnmatch.fnmatchcase(names[0], pattern[0]) and _glob_match(pattern[1:], names[1:])


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
    if (pa.types.is_large_string(arr.type) or pa.types.is_integer(arr.type) or pa.types.is_floating(arr.type)
            or pa.types.is_boolean(arr.type)):
        return pc.cast(arr, pa.string())
    if pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type):
        return pa.array([None if v is None else v.decode("utf-8", "backslashreplace") for v in arr.to_pylist()],
                        pa.string())
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
    """The JSON (sorted keys) of each record's unmapped columns; null when it has none."""
    try:
        return pa.array([json.dumps(v, ensure_ascii=False, sort_keys=True, default=_json_default) if v else None
                         for v in values], pa.string())
    except (UnicodeEncodeError, pa.ArrowException, RecursionError, ValueError, TypeError):
        return pa.array([_safe_meta(v) for v in values], pa.string())


_JSON_CONTROL = r"[\x00-\x1f]"


def _meta_json_columns(batch: pa.RecordBatch) -> pa.Array:
    """:func:`_meta_json` of the rows of ``batch`` (the unmapped columns of a Parquet batch), built with Arrow
    kernels when every column is text, integer, boolean or all null (what ``json.dumps`` writes for those is
    plain: the digits, ``true`` / ``false``, ``null``, and strings with ``\\`` and ``"`` escaped — a string with a
    control character, which json escapes by name or as ``\\u00XX``, is written by json itself); in Python
    otherwise."""
    names = batch.schema.names
    n = batch.num_rows
    if n == 0 or len(set(names)) != len(names):
        return _meta_json(batch.to_pylist())
    parts: list = []
    for name in sorted(names):
        col = batch.column(name)
        t = col.type
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            col = col.cast(pa.string()) if pa.types.is_large_string(t) else col
            value = pc.replace_substring(pc.replace_substring(col, "\\", "\\\\"), '"', '\\"')
            value = pc.binary_join_element_wise('"', value, '"', "")
            controls = pc.fill_null(pc.match_substring_regex(col, _JSON_CONTROL), False)
            if pc.any(controls).as_py():
                by_json = pa.array([json.dumps(v, ensure_ascii=False) for v in col.filter(controls).to_pylist()],
                                   value.type)
                value = pc.replace_with_mask(value, controls, by_json)
        elif pa.types.is_integer(t) or pa.types.is_boolean(t):
            value = pc.cast(col, pa.string())
        elif pa.types.is_null(t):
            value = pa.nulls(n, pa.string())
        else:
            return _meta_json(batch.to_pylist())
        value = pc.fill_null(value, "null") if value.null_count else value
        parts += [", " if parts else "{", json.dumps(name, ensure_ascii=False) + ": ", value]
    return pc.cast(pc.binary_join_element_wise(*parts, "}", ""), pa.string())


def _safe_meta(meta: dict) -> str | None:
    """One record's meta JSON when the fast path failed: lone surrogates (from ``\\ud800`` escapes) are kept
    as escapes; a value that cannot be serialized at all becomes ``{"_unserializable": true}``."""
    if not meta:
        return None
    try:
        text = json.dumps(meta, ensure_ascii=False, sort_keys=True, default=_json_default)
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return json.dumps(meta, ensure_ascii=True, sort_keys=True, default=_json_default)
    except (RecursionError, ValueError, TypeError):
        return json.dumps({"_unserializable": True})


# --------------------------------------------------------------------------------------------------------
# Parquet


def _read_parquet(path: str, file_index: int, mapping: ColumnMapping, batch_rows: int) -> Iterator[ReadChunk]:
    source = None
    try:
        if fs.is_uri(path):  # ranged reads, each row group's column chunks fetched together
            source = fs.open_input_file(path)
            pf = pq.ParquetFile(source, pre_buffer=True)
        else:
            pf = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        if source is not None:
            source.close()
        raise InputFileError(path, f"not a readable Parquet file ({_one_line(exc)})") from None
    try:
        names = pf.schema_arrow.names
        if mapping.text not in names:
            raise InputFileError(path, f"no text column {mapping.text!r} (columns: {', '.join(names) or 'none'}): "
                                       + text_column_hint(names, _parquet_string_lengths(pf), mapping))
        repeated = sorted({c for c in names if names.count(c) > 1})
        if repeated:
            raise InputFileError(path, f"repeated column name(s): {', '.join(repeated)}")
        other = [c for c in names if c not in mapping.mapped()]
        batches = pf.iter_batches(batch_size=batch_rows)
        row0 = 0
        while True:
            try:
                batch = next(batches, None)
            except (pa.ArrowException, OSError) as exc:
                raise InputFileError(path, f"cannot read Parquet data at row {row0} ({_one_line(exc)})") from None
            if batch is None:
                return
            yield _parquet_chunk(path, file_index, _plain_columns(batch, mapping.text), row0, mapping, other)
            row0 += batch.num_rows
    finally:
        pf.close()
        if source is not None:
            source.close()


def _parquet_string_lengths(pf: pq.ParquetFile, rows: int = 64) -> dict[str, int]:
    """Characters held by each string column in the first ``rows`` rows (for :func:`text_column_hint`)."""
    schema = pf.schema_arrow
    names = [f.name for f in schema if _is_text_type(f.type) or pa.types.is_string_view(f.type)
             or (pa.types.is_dictionary(f.type) and _is_text_type(f.type.value_type))]
    if not names or len(set(schema.names)) != len(schema.names):
        return {}
    try:
        batch = next(pf.iter_batches(batch_size=rows, columns=names), None)
    except (pa.ArrowException, OSError):
        return {}
    if batch is None:
        return dict.fromkeys(names, 0)
    return {name: int(pc.sum(pc.utf8_length(_plain_columns(batch, "").column(name).cast(pa.string()))).as_py() or 0)
            for name in names}


#: Column names that usually hold a document's text (suggested when the configured text column is missing).
TEXT_COLUMN_NAMES = ("content", "body", "document", "raw_content", "article", "passage", "contents", "raw_text")


def suggest_text_column(names: list[str], string_chars: dict[str, int], mapping: ColumnMapping) -> str | None:
    """The column of a file that most likely holds its text: one named like a text column (content, body,
    document…) whose values are strings, else the unmapped string column with the most characters; None when
    no column fits. ``string_chars``: characters held per column whose values are all strings (or null)."""
    candidates = [n for n in names if n != mapping.text and n in string_chars]
    for known in TEXT_COLUMN_NAMES:
        for name in candidates:
            if name.lower() == known:
                return name
    unmapped = [n for n in candidates if n not in mapping.mapped() and string_chars[n] > 0]
    return max(unmapped, key=lambda n: string_chars[n]) if unmapped else None


def text_column_hint(names: list[str], string_chars: dict[str, int], mapping: ColumnMapping) -> str:
    """``pass --text-column NAME (or set input.columns.text)``, naming the column that looks like text."""
    name = suggest_text_column(names, string_chars, mapping)
    return f"pass --text-column {name or 'COLUMN'} (or set input.columns.text)"


def _plain_columns(batch: pa.RecordBatch, text_column: str) -> pa.RecordBatch:
    """Dictionary and view columns as plain ones (filters and Python conversion need them); a binary text
    column is read as UTF-8 text (rows that are not valid UTF-8 become bad records)."""
    arrays, changed = [], False
    for name, col in zip(batch.schema.names, batch.columns):
        before = col
        if pa.types.is_dictionary(col.type):
            col = col.dictionary_decode()
        if pa.types.is_string_view(col.type):
            col = col.cast(pa.string())
        elif pa.types.is_binary_view(col.type):
            col = col.cast(pa.binary())
        if name == text_column and pa.types.is_binary(col.type):
            col = col.view(pa.string())
        elif name == text_column and pa.types.is_large_binary(col.type):
            col = col.view(pa.large_string())
        arrays.append(col)
        changed = changed or col is not before
    return pa.RecordBatch.from_arrays(arrays, names=batch.schema.names) if changed else batch


def _is_text_type(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t)


def _parquet_chunk(path: str, file_index: int, batch: pa.RecordBatch, row0: int, mapping: ColumnMapping,
                   other: list[str]) -> ReadChunk:
    n = batch.num_rows
    rows = pa.array(range(row0, row0 + n), pa.int64())
    causes = _parquet_bad_causes(batch, mapping.text)
    bad = None
    if causes is not None:
        bad_idx = [i for i, c in enumerate(causes) if c is not None]
        bad = _parquet_bad_batch(path, batch, bad_idx, [causes[i] for i in bad_idx], row0, mapping)
        keep = pa.array([c is None for c in causes])
        batch = batch.filter(keep)
        rows = rows.filter(keep)
    text = batch.column(mapping.text)
    if not pa.types.is_string(text.type):  # large_string, or a non-string column with every row bad
        text = text.cast(pa.string()) if _is_text_type(text.type) else pa.array([], pa.string())
    metas = _meta_json_columns(batch.select(other)) if other else None

    def column(name):
        return batch.column(name) if name and name in batch.schema.names else None

    docs = _canonical(path, file_index, rows, text, column(mapping.id), column(mapping.source),
                      column(mapping.url), column(mapping.lang), metas, mapping.default_source)
    return ReadChunk(docs=docs, bad=bad, n_records=n)


def _parquet_bad_causes(batch: pa.RecordBatch, text_column: str) -> list[str | None] | None:
    """Per row, why it cannot be used (text not a string, null, or any column not valid UTF-8), or None
    for a usable row; None when every row of the batch is usable."""
    n = batch.num_rows
    col = batch.column(text_column)
    if not _is_text_type(col.type):
        return [f"text is {col.type}, not a string"] * n
    causes: list[str | None] = [None] * n
    if col.null_count:
        for i in pc.indices_nonzero(pc.is_null(col)).to_pylist():
            causes[i] = "text is null"
    names = [text_column] + [c for c in batch.schema.names if c != text_column]
    for name in names:
        col = batch.column(name)
        try:
            col.validate(full=True)  # checks UTF-8, nested string children included
            continue
        except pa.ArrowInvalid:
            pass
        for i in range(n):
            if causes[i] is None and not _value_is_utf8(col, i):
                causes[i] = "text is not valid UTF-8" if name == text_column else \
                    f"column {name!r} is not valid UTF-8"
    return causes if any(c is not None for c in causes) else None


def _value_is_utf8(col: pa.Array, i: int) -> bool:
    try:
        col[i].as_py()
        return True
    except UnicodeDecodeError:
        return False


def _safe_value(col: pa.Array, i: int):
    """A Python value of ``col[i]``; a string that is not valid UTF-8 comes back with ``\\xNN`` escapes."""
    try:
        return col[i].as_py()
    except UnicodeDecodeError:
        if _is_text_type(col.type):
            raw = col.view(pa.binary() if pa.types.is_string(col.type) else pa.large_binary())[i].as_py()
            return raw.decode("utf-8", "backslashreplace")
        return "<not valid UTF-8>"


def _parquet_bad_batch(path: str, batch: pa.RecordBatch, bad_idx: list[int], causes: list[str], row0: int,
                       mapping: ColumnMapping) -> pa.RecordBatch:
    """Ledger rows for unusable Parquet rows. ``raw`` is the text's bytes when they are not valid UTF-8,
    otherwise the record as JSON (invalid strings in it written with ``\\xNN`` escapes)."""
    text = batch.column(mapping.text)
    raw_text = text.view(pa.binary() if pa.types.is_string(text.type) else pa.large_binary()) \
        if _is_text_type(text.type) else None
    names = batch.schema.names
    raws, ids, sources = [], [], []
    for i, cause in zip(bad_idx, causes):
        record = {name: _safe_value(batch.column(name), i) for name in names}
        if cause == "text is not valid UTF-8":
            raws.append(raw_text[i].as_py())
        else:
            raws.append(json.dumps(record, ensure_ascii=False, default=_json_default).encode("utf-8"))
        rid = record.get(mapping.id) if mapping.id and mapping.id in names else None
        if rid is not None and not _value_is_utf8(batch.column(mapping.id), i):
            rid = None  # an id that is not valid UTF-8 is not an id: derive one
        ids.append(None if rid is None else _json_default(rid) if not isinstance(rid, str) else rid)
        src = record.get(mapping.source) if mapping.source and mapping.source in names else None
        if src is not None and not _value_is_utf8(batch.column(mapping.source), i):
            src = None
        sources.append(mapping.default_source if src is None else src if isinstance(src, str) else str(src))
    return _bad_rows(path, [row0 + i for i in bad_idx], raws, causes, ids, sources)


# --------------------------------------------------------------------------------------------------------
# JSON Lines


class _ZstdRaw(BlockStream):
    """Decompressed bytes of a (multi-frame) zstd file. Unlike ``ZstdDecompressor.stream_reader``, a file
    that ends inside a frame raises :class:`EOFError` instead of ending quietly."""

    def __init__(self, fh, block: int = 1 << 18):
        self._dctx = zstandard.ZstdDecompressor()
        super().__init__(fh, block)

    def _blocks_of(self):
        obj, in_frame = self._dctx.decompressobj(), False
        for data in self._reads():
            while data:
                out = obj.decompress(data)
                in_frame = True
                if out:
                    yield out
                if obj.eof:
                    data = obj.unused_data
                    obj, in_frame = self._dctx.decompressobj(), False
                else:
                    data = b""
        if in_frame:
            raise EOFError("compressed file ended before the end of a zstd frame (truncated?)")


def _open_lines(path: str, fmt: str):
    if fs.is_uri(path):
        return _uri_lines(path, fmt)
    if fmt == "jsonl.gz":
        return gzip.open(path, "rb")
    if fmt == "jsonl.zst":
        return io.BufferedReader(_ZstdRaw(open(path, "rb")), buffer_size=1 << 20)
    return open(path, "rb")


@contextmanager
def _uri_lines(path: str, fmt: str):
    """The decompressed lines of a file behind a URI: the stored bytes come through a read-ahead stream (never
    decompressed by pyarrow) and are decoded here exactly as a local file's."""
    with fs.open_input_stream(path) as stream:
        if fmt == "jsonl.gz":
            with gzip.GzipFile(fileobj=stream, mode="rb") as lines:
                yield lines
        elif fmt == "jsonl.zst":
            with io.BufferedReader(_ZstdRaw(stream), buffer_size=1 << 20) as lines:
                yield lines
        else:
            with io.BufferedReader(stream, buffer_size=1 << 20) as lines:
                yield lines


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


_JSON_TYPES = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number",
               type(None): "null"}


def _encodable(value) -> bool:
    """False for a string holding a lone surrogate (a ``\\ud800`` escape), which no UTF-8 column can store."""
    if not isinstance(value, str):
        return True
    try:
        value.encode("utf-8")
        return True
    except UnicodeEncodeError:
        return False


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
        default = mapping.default_source
        try:
            decoded = raw.decode("utf-8")  # strict: json.loads(bytes) would guess UTF-16/32 and pass surrogates
        except UnicodeDecodeError as exc:
            self.bad.append((lineno, raw, f"not valid UTF-8 ({exc.reason} at byte {exc.start})", None, default))
            return
        if lineno == 0 and decoded.startswith("\ufeff"):
            decoded = decoded[1:]  # a byte-order mark at the start of the file
        try:
            record = json.loads(decoded)
        except (ValueError, RecursionError) as exc:
            self.bad.append((lineno, raw, f"invalid JSON ({_one_line(exc)})", None, default))
            return
        if not isinstance(record, dict):
            self.bad.append((lineno, raw, f"record is a JSON {_JSON_TYPES.get(type(record), 'value')}, "
                                          "not an object", None, default))
            return
        rid = record.get(mapping.id) if mapping.id else None
        rid = None if rid is None else rid if isinstance(rid, str) else json.dumps(rid)
        src = record.get(mapping.source) if mapping.source else None
        src = src if isinstance(src, str) else None
        text = record.get(mapping.text)
        url = _str_or_none(record.get(mapping.url)) if mapping.url else None
        lang = _str_or_none(record.get(mapping.lang)) if mapping.lang else None
        cause = None
        if not isinstance(text, str):
            cause = "text is missing" if mapping.text not in record else (
                "text is null" if text is None else
                f"text is a JSON {_JSON_TYPES.get(type(text), 'value')}, not a string")
        elif "\\u" in decoded:  # only an escape can make a lone surrogate
            for name, value in (("text", text), ("id", rid), ("source", src), ("url", url), ("lang", lang)):
                if not _encodable(value):
                    cause = f"{name} is not valid UTF-8 (lone surrogate)"
                    break
        if cause is not None:
            self.bad.append((lineno, raw, cause, rid if _encodable(rid) else None,
                             src if src is not None and _encodable(src) else default))
            return
        self.rows.append(lineno)
        self.texts.append(text)
        self.ids.append(rid)
        self.sources.append(src)
        self.urls.append(url)
        self.langs.append(lang)
        self.metas.append({k: v for k, v in record.items() if k not in keys})
        self.text_bytes += len(raw)

    def finish(self, path: str, file_index: int, mapping: ColumnMapping) -> ReadChunk:
        docs = _canonical(path, file_index, pa.array(self.rows, pa.int64()), pa.array(self.texts, pa.string()),
                          pa.array(self.ids, pa.string()), pa.array(self.sources, pa.string()),
                          pa.array(self.urls, pa.string()), pa.array(self.langs, pa.string()),
                          _meta_json(self.metas), mapping.default_source)
        bad = None
        if self.bad:
            bad = _bad_rows(path, *[list(col) for col in zip(*self.bad)])
        return ReadChunk(docs=docs, bad=bad, n_records=self.n)


# --------------------------------------------------------------------------------------------------------
# WARC / WET (records parsed in dataclean.io.warc)


def _read_warc(path: str, file_index: int, mapping: ColumnMapping, batch_rows: int) -> Iterator[ReadChunk]:
    """Crawl records as canonical batches: the id, text and url are the record's, the columns mapping does
    not apply (a WARC has no columns); ``source`` is ``input.default_source``."""
    default = mapping.default_source
    try:
        for part in read_warc(path, batch_rows):
            docs = _canonical(path, file_index, pa.array(part.rows, pa.int64()), pa.array(part.texts, pa.string()),
                              pa.array(part.ids, pa.string()), None, pa.array(part.urls, pa.string()), None,
                              pa.array(part.metas, pa.string()), default)
            bad = None
            if part.bad:
                rows, raws, causes, ids = (list(c) for c in zip(*part.bad))
                bad = _bad_rows(path, rows, raws, causes, ids, [default] * len(rows))
            yield ReadChunk(docs=docs, bad=bad, n_records=part.n, skipped=part.skipped)
    except WarcFileError as exc:
        raise InputFileError(path, str(exc)) from None


def _str_or_none(value) -> str | None:
    return value if isinstance(value, str) else None if value is None else str(value)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


# --------------------------------------------------------------------------------------------------------


def read_shard(path: str, file_index: int, mapping: ColumnMapping | None = None,
               batch_rows: int = 4096) -> Iterator[ReadChunk]:
    """Yield :class:`ReadChunk` s of one input file (a local path or a URI, see :mod:`dataclean.io.fs`); raise
    :class:`InputFileError` if the file is unreadable."""
    mapping = mapping or ColumnMapping()
    fmt = detect_format(path)
    if fs.is_uri(path):
        try:
            is_file = fs.isfile(path)
        except (ValueError, OSError) as exc:  # an unknown scheme, a store that cannot be reached
            raise InputFileError(path, (str(exc).strip().splitlines() or [type(exc).__name__])[0]) from None
    else:
        is_file = os.path.isfile(path)
    if not is_file:
        raise InputFileError(path, "not a file")
    if fmt == "parquet":
        yield from _read_parquet(path, file_index, mapping, batch_rows)
    elif fmt == "warc":
        yield from _read_warc(path, file_index, mapping, batch_rows)
    else:
        yield from _read_jsonl(path, fmt, file_index, mapping, batch_rows)
