"""Readers: Parquet, Arrow IPC (file and stream: ``.arrow``, ``.feather``, ``.ipc``, Hugging Face ``save_to_disk``
folders), JSON Lines and JSON arrays (plain, .gz, .zst) and WARC into record batches of
:data:`dataclean.schema.DOC_SCHEMA`, with the input's other columns beside them in their own Arrow types
(:attr:`ReadChunk.extra`; the ``meta`` column keeps their JSON, as before). See ``docs/inputs.md``.

Two kinds of failure are kept apart:

* a *record* that cannot be used (a line that is not UTF-8 or not a JSON object; text missing, null or not
  a string; a string that UTF-8 cannot hold: a lone ``\ud800`` escape in JSON, invalid bytes in any Parquet
  string column) becomes a ``bad_record`` ledger row with its raw bytes and a one-line ``detail``, and
  reading goes on. A NUL character is a character: the reader keeps it (normalize removes controls);
* a *file* that cannot be read (truncated gzip or zstd, bad zstd frame, Parquet without a footer or with
  corrupt pages, no text column, repeated column names) raises :class:`InputFileError` carrying the path
  and a one-line cause. Records read before the failure must be discarded by the caller.

A record larger than ``max_record_bytes`` (``input.max_record_bytes``, default 256 MiB) is a bad record
``record of N bytes exceeds input.max_record_bytes CAP`` whose ``raw`` is its first ``min(CAP, MAX_RAW_BYTES)``
bytes (of the line or array element; of the text for Parquet, Arrow and WARC). A JSONL line or a JSON array
element over the cap is never held whole: it is read up to the cap and the rest of it skipped, decompressing
no more than is read (a gzip or zstd bomb included). A Parquet or Arrow row is measured on its batch (the
bytes of its string and binary values), a WARC/WET document by its text (FastWARC has read it). Its
neighbours are read as usual.

No JSON streaming parser is a dependency (ijson is not installed here): a JSON array is split into its
elements by :func:`_array_elements`, which follows only strings and brackets, and each element is parsed by
``json.loads`` as a JSONL line is, so the bound on memory is the cap, as for JSON Lines.
"""
from __future__ import annotations

import errno
import fnmatch
import glob
import gzip
import io
import json
import os
import re
import stat
import zlib
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Generator, Iterator, Sequence

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import zstandard

from dataclean.io import fs
from dataclean.io.streams import BlockStream, capped_lines, without_line_end
from dataclean.io.warc import WARC_SUFFIXES, WarcFileError, read_warc
from dataclean.schema import DOC_SCHEMA, LEDGER_FIELDS, doc_key

ARROW_SUFFIXES = (".arrow", ".feather", ".ipc")
SUPPORTED_SUFFIXES = (".parquet", ".jsonl", ".json", ".ndjson", ".jsonl.gz", ".json.gz", ".ndjson.gz",
                      ".jsonl.zst", ".json.zst", ".ndjson.zst") + ARROW_SUFFIXES + WARC_SUFFIXES
#: Names ending so are sniffed: a first non-space byte ``[`` makes the file one JSON array of records.
JSON_ARRAY_SUFFIXES = (".json", ".json.gz", ".json.zst")
#: The files of a Hugging Face ``datasets`` folder that describe it and hold no records (``save_to_disk``
#: writes ``state.json`` and ``dataset_info.json`` beside the ``.arrow`` shards, ``dataset_dict.json`` above
#: the split folders): not inputs in a folder walk of such a folder.
HF_METADATA_FILES = ("state.json", "dataset_info.json", "dataset_dict.json")
#: Field metadata marking an extra column whose values were written as JSON text because they had no single
#: Arrow type (a JSON key holding a number in one record and a string in another).
EXTRA_JSON_KEY = b"dataclean.extra"
LEDGER_SCHEMA = pa.schema(LEDGER_FIELDS)
#: A JSONL chunk is cut when it holds this many bytes of text, whatever its row count.
MAX_CHUNK_TEXT_BYTES = 64 << 20
#: ``input.max_record_bytes`` when a config does not say: a record (JSONL line, Parquet row) over it is a bad
#: record, never read whole. A text column holds at most 2 GiB per batch, a Python str of it several times more.
DEFAULT_MAX_RECORD_BYTES = 256 << 20
#: The most bytes of an oversized record kept in its ledger row's ``raw`` (its beginning).
MAX_RAW_BYTES = 1 << 16
#: Compressed bytes given to the zstd decompressor at a time: zstd inflates a byte to at most ~32 KiB (a run
#: of one byte value), so no call makes more than ~64 MiB, whatever the file (a bomb of zeros included).
ZSTD_FEED_BYTES = 1 << 11


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
    #: The input's unmapped columns of the rows of ``docs``, in their own Arrow types (row ``i`` is ``docs``'
    #: row ``i``), or None when the input has none (WARC). Parquet and Arrow columns keep their file's type
    #: (dictionaries decoded); JSON values get the type ``pyarrow.array`` infers for a chunk, or JSON text
    #: marked with :data:`EXTRA_JSON_KEY` when the chunk's values of a key have no common type.
    extra: pa.RecordBatch | None = None


def detect_format(path: str) -> str:
    name = path.lower()
    if name.endswith(".parquet"):
        return "parquet"
    if name.endswith(ARROW_SUFFIXES):
        return "arrow"
    if name.endswith((".jsonl.gz", ".json.gz", ".ndjson.gz")):
        return "jsonl.gz"
    if name.endswith((".jsonl.zst", ".json.zst", ".ndjson.zst")):
        return "jsonl.zst"
    if name.endswith((".jsonl", ".json", ".ndjson")):
        return "jsonl"
    if name.endswith(WARC_SUFFIXES):
        return "warc"
    base = name[:-3] if name.endswith(".gz") else name[:-4] if name.endswith(".zst") else name
    fix = ""
    if base.endswith((".csv", ".tsv")):
        fix = ("; convert it to Parquet first: python -c \"import pyarrow.csv as c, pyarrow.parquet as p; "
               f"p.write_table(c.read_csv('{path}'{', c.ParseOptions(delimiter=chr(9))' if base.endswith('.tsv') else ''}), "
               "'out.parquet')\"")
    elif base.endswith(".txt"):
        fix = ("; a file of one JSON object per line is read when named .jsonl; plain text is not: write each "
               "document as {\"text\": ...} on a line of a .jsonl file")
    raise InputFileError(path, "unsupported file type (expected .parquet, .arrow, .feather, .ipc, .jsonl, .json, "
                               ".ndjson (each also .gz or .zst), .warc, .warc.gz or .wet.gz)" + fix)


def discover_inputs(inputs: list[str], notes: list[str] | None = None,
                    errors: list[str] | None = None) -> list[str]:
    """Expand files, folders and globs into a sorted, de-duplicated list.

    Local files are de-duplicated by their real path: the same file named twice (relative and absolute, or
    through a symlink) is read once, under its first name in sorted order, and ``notes`` (when given) gets one
    line saying so.

    A folder (recursively) and a glob yield supported files only, skipping names that start with ``.`` or
    ``_``; a file named explicitly is always kept, so that an unsupported one fails loudly when read.
    URIs (``s3://bucket/corpus``, ``s3://bucket/**/*.parquet``, ``file:///…``) follow the same rules, a glob
    being matched on the listing of its fixed prefix, and come back as URIs with their scheme.

    ``errors`` (a list): what cannot be read below a local folder or glob is not skipped in silence. Each
    folder that cannot be listed and each input file (a supported, not hidden name) that cannot be read — a
    dangling symlink, a symlink loop, a file without read permission, a name that is not a regular file —
    appends one line ``"PATH: cause"`` (cause ``permission denied``, ``dangling symlink``, ``symlink loop``,
    ``not a regular file``, or the system's message) and is left out of the list; discovery goes on. So does
    an input named on its own that is a dangling symlink or a loop. Without ``errors``, an unlistable folder
    is skipped and such entries are listed (they fail when read), as before. An input that does not exist at
    all (a typo) raises :class:`FileNotFoundError` either way."""
    found: list[str] = []
    problems: list[str] = []
    for spec in inputs:
        if fs.is_uri(spec):
            found.extend(_discover_uri(spec))
        elif os.path.isdir(spec):
            below: list[str] = []
            found.extend(_walk_inputs(spec, below if errors is not None else None))
            problems.extend(sorted(below, key=_problem_path))
        elif os.path.exists(spec):
            found.append(spec)
        elif errors is not None and os.path.islink(spec):
            problems.append(f"{os.path.normpath(spec)}: {_entry_problem(spec, True)}")
        else:
            matches = glob.glob(spec, recursive=True)
            unlistable = _glob_unlistable(spec, spec) if errors is not None else []
            if not matches and not unlistable:
                raise FileNotFoundError(f"input not found: {spec}")
            if errors is None:
                found.extend(m for m in matches if os.path.isfile(m) and _wanted_match(spec, m))
                continue
            below = unlistable
            for m in matches:
                if not _wanted_match(spec, m) or os.path.isdir(m):
                    continue
                cause = _entry_problem(m, os.path.islink(m))
                if cause is None:
                    found.append(m)
                else:
                    below.append(f"{os.path.normpath(m)}: {cause}")
            problems.extend(sorted(below, key=_problem_path))
    explicit = {p if fs.is_uri(p) else os.path.normpath(p) for p in inputs}
    found = _drop_hf_metadata(found, explicit)
    if errors is not None:
        errors.extend(dict.fromkeys(p for p in problems if p not in errors))
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
    return _hf_shard_order(out, errors)


def _drop_hf_metadata(paths: list[str], explicit: set[str]) -> list[str]:
    """``paths`` without the Hugging Face metadata files (:data:`HF_METADATA_FILES`) a folder walk or a glob
    found: ``dataset_dict.json`` always, ``state.json`` and ``dataset_info.json`` when their folder also gave an
    ``.arrow`` file (a ``save_to_disk`` folder, a ``datasets`` cache folder). They describe the dataset; read as
    JSON they would be bad records (or worse, records). A file named on its own is kept."""
    def norm(p: str) -> str:
        return p if fs.is_uri(p) else os.path.normpath(p)

    def folder(p: str) -> str:
        return p.rsplit("/", 1)[0] if fs.is_uri(p) else os.path.dirname(norm(p))

    arrow_folders = {folder(p) for p in paths if p.lower().endswith(".arrow")}
    out = []
    for p in paths:
        base = p.rsplit("/", 1)[-1] if fs.is_uri(p) else os.path.basename(p)
        if norm(p) not in explicit and (base == "dataset_dict.json" or
                                        (base in HF_METADATA_FILES and folder(p) in arrow_folders)):
            continue
        out.append(p)
    return out


def _hf_shard_order(names: list[str], errors: list[str] | None) -> list[str]:
    """``names`` (sorted) with the ``.arrow`` shards of each ``save_to_disk`` folder in the order of its
    ``state.json``'s ``_data_files`` (the dataset's row order; the files not listed there after them, by name),
    in the places the sorted list gave them. A shard ``_data_files`` lists that does not exist adds
    ``"PATH: listed in state.json but missing"`` to ``errors`` (when given): a dataset read without it would
    silently lack its rows. A ``state.json`` that cannot be read or parsed leaves the name order."""
    def folder(p: str) -> str:
        return p.rsplit("/", 1)[0] if fs.is_uri(p) else os.path.dirname(p)

    groups: dict[str, list[int]] = {}
    for i, p in enumerate(names):
        if p.lower().endswith(".arrow"):
            groups.setdefault(folder(p), []).append(i)
    out = list(names)
    for base, idx in groups.items():
        listed = _state_data_files(base)
        if listed is None:
            continue
        members = [names[i] for i in idx]
        by_name = {(m.rsplit("/", 1)[-1] if fs.is_uri(m) else os.path.basename(m)): m for m in members}
        ordered = [by_name.pop(f) for f in listed if f in by_name]
        ordered += sorted(by_name.values())
        for i, m in zip(idx, ordered):
            out[i] = m
        if errors is not None:
            present = {(m.rsplit("/", 1)[-1] if fs.is_uri(m) else os.path.basename(m)) for m in members}
            for f in listed:
                if f not in present:
                    line = f"{fs.join(base, f) if fs.is_uri(base) else os.path.join(base, f)}: listed in " \
                           "state.json but missing"
                    if line not in errors:
                        errors.append(line)
    return out


def _state_data_files(folder: str) -> list[str] | None:
    """The shard file names ``state.json`` of ``folder`` lists under ``_data_files`` (what ``datasets``'
    ``save_to_disk`` writes: ``[{"filename": "data-00000-of-00002.arrow"}, ...]``), or None without one."""
    path = fs.join(folder, "state.json") if fs.is_uri(folder) else os.path.join(folder, "state.json")
    try:
        if fs.is_uri(path):
            with fs.open_input_stream(path) as fh:
                state = json.loads(fh.read().decode("utf-8"))
        else:
            with open(path, "rb") as fh:
                state = json.loads(fh.read(1 << 20).decode("utf-8"))
        files = state["_data_files"]
        return [f["filename"] for f in files if isinstance(f.get("filename"), str)]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None


def _problem_path(line: str) -> str:
    """The PATH of a ``"PATH: cause"`` line (they are sorted by it, as the files are)."""
    return line.rsplit(": ", 1)[0]


def _os_cause(exc: OSError, is_link: bool = False) -> str:
    """The one-line cause of an OSError on an input entry: ``permission denied``, ``dangling symlink``,
    ``symlink loop``, else the system's message."""
    if exc.errno == errno.ELOOP:
        return "symlink loop"
    if exc.errno == errno.ENOENT and is_link:
        return "dangling symlink"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    return (exc.strerror or type(exc).__name__).lower()


def _entry_problem(path: str, is_link: bool) -> str | None:
    """Why the input file at ``path`` cannot be read (see :func:`_os_cause`, ``not a regular file``), or None."""
    try:
        st = os.stat(path)
    except OSError as exc:
        return _os_cause(exc, is_link)
    if not stat.S_ISREG(st.st_mode):
        return "not a regular file"
    if not os.access(path, os.R_OK):
        return "permission denied"
    return None


def _walk_inputs(top: str, problems: list[str] | None, files: bool = True) -> list[str]:
    """The supported, not hidden files below the folder ``top``, as ``os.walk`` finds them (folders named
    ``.*`` or ``_*`` and symlinks to folders are not entered). With ``problems`` (a list), each folder that
    cannot be listed and each such file that cannot be read (:func:`_entry_problem`) adds a line to it
    instead of being skipped (a folder) or listed (a file); ``files=False`` looks at folders only."""
    found: list[str] = []
    stack = [top]
    while stack:
        folder = stack.pop()
        try:
            with os.scandir(folder) as it:
                entries = list(it)
        except OSError as exc:
            if problems is not None:
                problems.append(f"{os.path.normpath(folder)}: {_os_cause(exc)}")
            continue
        for entry in entries:
            name = entry.name
            if name.startswith((".", "_")):
                continue
            try:
                is_dir = entry.is_dir()
            except OSError:
                is_dir = False
            if is_dir:
                if not entry.is_symlink():
                    stack.append(entry.path)
                continue
            if not files or not name.lower().endswith(SUPPORTED_SUFFIXES):
                continue
            cause = _entry_problem(entry.path, entry.is_symlink()) if problems is not None else None
            if cause is None:
                found.append(entry.path)
            elif problems is not None:
                problems.append(f"{os.path.normpath(entry.path)}: {cause}")
    return found


def _glob_unlistable(pattern: str, spec: str) -> list[str]:
    """``"FOLDER: cause"`` of each folder ``glob.glob(pattern, recursive=True)`` would list and cannot (glob
    skips those in silence), leaving out folders whose path below the fixed prefix of ``spec`` (the whole
    glob) has a hidden or ``_`` component: nothing below them would be an input."""
    dirname, basename = os.path.split(pattern)
    out = _glob_unlistable(dirname, spec) if dirname != pattern and glob.has_magic(dirname) else []
    if not glob.has_magic(basename):
        return out  # matched by name (lexists), not by listing
    if glob.has_magic(dirname):
        folders = [d for d in glob.glob(dirname, recursive=True) if os.path.isdir(d)]
    else:
        folders = [dirname] if os.path.isdir(dirname or os.curdir) else []
    for folder in folders:
        if not _wanted_match(spec, os.path.join(folder, "x.jsonl")):
            continue
        if basename == "**":  # every folder below is listed
            problems: list[str] = []
            _walk_inputs(folder or os.curdir, problems, files=False)
            out.extend(sorted(problems, key=_problem_path))
            continue
        try:
            os.scandir(folder or os.curdir).close()
        except OSError as exc:
            out.append(f"{os.path.normpath(folder or os.curdir)}: {_os_cause(exc)}")
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


def oversized_detail(size: int, cap: int) -> str:
    """The ``detail`` of a record over the cap: ``record of 2,300,000,000 bytes exceeds input.max_record_bytes
    268,435,456``."""
    return f"record of {size:,} bytes exceeds input.max_record_bytes {cap:,}"


def _bad_rows(origin_file: str, rows: list[int], raws: list[bytes], causes: list[str],
              ids: Sequence[str | None], sources: Sequence[str | None]) -> pa.RecordBatch:
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


def origin_ids(files: pa.Array, rows: pa.Array) -> pa.Array:
    """The id a document without one gets: ``FILE#ROW`` (its origin file and row), element-wise."""
    return pc.binary_join_element_wise(files, pc.cast(rows, pa.string()), "#")


def _canonical(origin_file: str, file_index: int, rows: pa.Array, texts: pa.Array, ids: pa.Array | None,
               sources: pa.Array | None, urls: pa.Array | None, langs: pa.Array | None,
               metas: pa.Array | None, default_source: str) -> pa.RecordBatch:
    n = len(texts)
    rows = rows.cast(pa.int64())
    derived = origin_ids(pa.array([origin_file] * n, pa.string()), rows)
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
    return _safe_json(meta) if meta else None


# --------------------------------------------------------------------------------------------------------
# Parquet


def _read_parquet(path: str, file_index: int, mapping: ColumnMapping, batch_rows: int,
                  cap: int, rows: tuple[int, int] | None = None) -> Iterator[ReadChunk]:
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
        if rows is None:
            batches = pf.iter_batches(batch_size=batch_rows)
            row0 = 0
        else:  # one piece of the file (see parquet_pieces): its rows keep their numbers in the whole file
            batches, row0 = _piece_batches(pf, rows, batch_rows), rows[0]
        while True:
            try:
                batch = next(batches, None)
            except (pa.ArrowException, OSError) as exc:
                raise InputFileError(path, f"cannot read Parquet data at row {row0} ({_one_line(exc)})") from None
            if batch is None:
                return
            yield _parquet_chunk(path, file_index, _plain_columns(batch, mapping.text), row0, mapping, other, cap)
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
                   other: list[str], cap: int = DEFAULT_MAX_RECORD_BYTES) -> ReadChunk:
    n = batch.num_rows
    rows = pa.array(range(row0, row0 + n), pa.int64())
    causes = _parquet_bad_causes(batch, mapping.text, cap)
    bad = None
    if causes is not None:
        bad_idx = [i for i, c in enumerate(causes) if c is not None]
        bad = _parquet_bad_batch(path, batch, bad_idx, [c for c in causes if c is not None], row0, mapping, cap)
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
    extra = batch.select(other) if other else None
    return ReadChunk(docs=docs, bad=bad, n_records=n, extra=extra)


# --------------------------------------------------------------------------------------------------------
# Arrow IPC (file and stream format; what Hugging Face datasets writes)

#: The first bytes of a Feather version 1 file (not Arrow IPC; pyarrow still reads it, whole).
_FEATHER_V1 = b"FEA1"


def _open_arrow(path: str):
    """``(reader kind, batches iterator, schema, source)`` of an Arrow IPC file (``ARROW1`` magic, random
    access) or stream (what ``datasets``' ``save_to_disk`` and its cache write). A local file is memory-mapped:
    a record batch is read without a copy, so memory holds the batch being cleaned, not the file."""
    try:
        source = fs.open_input_file(path) if fs.is_uri(path) else pa.memory_map(path, "r")
    except (pa.ArrowException, OSError) as exc:
        raise InputFileError(path, f"cannot open ({_one_line(exc)})") from None
    try:
        head = source.read(8)
        if head[:4] == _FEATHER_V1:
            raise InputFileError(path, "a Feather version 1 file, which is not Arrow IPC: rewrite it with "
                                       "pyarrow.feather.write_feather(table, path) (version 2)")
        if not head:
            raise InputFileError(path, "empty file: not an Arrow IPC file or stream")
        source.seek(0)
        if head[:6] == b"ARROW1":
            try:
                reader = pa.ipc.open_file(source)
            except (pa.ArrowException, OSError) as exc:
                raise InputFileError(path, f"not a readable Arrow IPC file ({_one_line(exc)})") from None
            return (reader.get_batch(i) for i in range(reader.num_record_batches)), reader.schema, source
        try:
            reader = pa.ipc.open_stream(source)
        except (pa.ArrowException, OSError) as exc:
            raise InputFileError(path, f"not an Arrow IPC file or stream ({_one_line(exc)})") from None
        return iter(reader), reader.schema, source
    except BaseException:
        source.close()
        raise


def _string_lengths(batch: pa.RecordBatch | None, schema: pa.Schema) -> dict[str, int]:
    """Characters held by each string column of ``batch`` (the first rows of a file; for :func:`text_column_hint`)."""
    names = [f.name for f in schema if _is_text_type(f.type) or pa.types.is_string_view(f.type)
             or (pa.types.is_dictionary(f.type) and _is_text_type(f.type.value_type))]
    if not names or len(set(schema.names)) != len(schema.names):
        return {}
    if batch is None:
        return dict.fromkeys(names, 0)
    batch = _plain_columns(batch.slice(0, 64), "")
    try:
        return {name: int(pc.sum(pc.utf8_length(batch.column(name).cast(pa.string()))).as_py() or 0)
                for name in names}
    except (pa.ArrowException, UnicodeDecodeError):
        return {}


def _read_arrow(path: str, file_index: int, mapping: ColumnMapping, batch_rows: int,
                cap: int) -> Iterator[ReadChunk]:
    """The record batches of an Arrow IPC file or stream, cut to ``batch_rows`` rows and read as Parquet's are
    (same bad-record causes, cap measured on the batch, column mapping, extra columns in their types)."""
    batches, schema, source = _open_arrow(path)
    try:
        row0 = 0

        def next_batch():
            try:
                return next(batches, None)
            except (pa.ArrowException, OSError) as exc:
                raise InputFileError(path, f"cannot read Arrow data at row {row0} ({_one_line(exc)})") from None

        names = schema.names
        first = next_batch()
        if mapping.text not in names:
            raise InputFileError(path, f"no text column {mapping.text!r} (columns: {', '.join(names) or 'none'}): "
                                       + text_column_hint(names, _string_lengths(first, schema), mapping))
        repeated = sorted({c for c in names if names.count(c) > 1})
        if repeated:
            raise InputFileError(path, f"repeated column name(s): {', '.join(repeated)}")
        other = [c for c in names if c not in mapping.mapped()]
        batch = first
        while batch is not None:
            for at in range(0, batch.num_rows, batch_rows):
                part = batch.slice(at, batch_rows)
                yield _parquet_chunk(path, file_index, _plain_columns(part, mapping.text), row0, mapping, other, cap)
                row0 += part.num_rows
            batch = next_batch()
    finally:
        source.close()


def _parquet_bad_causes(batch: pa.RecordBatch, text_column: str,
                        cap: int = DEFAULT_MAX_RECORD_BYTES) -> list[str | None] | None:
    """Per row, why it cannot be used (text not a string, over the cap, null, or any column not valid UTF-8),
    or None for a usable row; None when every row of the batch is usable."""
    n = batch.num_rows
    col = batch.column(text_column)
    if not _is_text_type(col.type):
        return [f"text is {col.type}, not a string"] * n
    causes: list[str | None] = [None] * n
    sizes = _record_bytes(batch)
    over = pc.greater(sizes, cap)
    if pc.any(over).as_py():
        for i, size in zip(pc.indices_nonzero(over).to_pylist(), sizes.filter(over).to_pylist()):
            causes[i] = oversized_detail(size, cap)
    if col.null_count:
        for i in pc.indices_nonzero(pc.is_null(col)).to_pylist():
            causes[i] = causes[i] or "text is null"
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


def _record_bytes(batch: pa.RecordBatch) -> pa.Array:
    """Per row, the bytes of its string and binary values (all top-level string and binary columns; nested
    columns are not counted). The batch has at least its text column of strings."""
    total = None
    for col in batch.columns:
        t = col.type
        if _is_text_type(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
            lengths = pc.binary_length(col).cast(pa.int64())
            lengths = pc.fill_null(lengths, 0) if lengths.null_count else lengths
            total = lengths if total is None else pc.add(total, lengths)
    return total


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


_OVERSIZED = "record of "  # how oversized_detail begins


def _small_value(col: pa.Array, i: int):
    """:func:`_safe_value` of ``col[i]``, or None when it is a string or binary value of more than
    :data:`MAX_RAW_BYTES` bytes (a value of an oversized record)."""
    t = col.type
    if (_is_text_type(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t)) and \
            (pc.binary_length(col.slice(i, 1))[0].as_py() or 0) > MAX_RAW_BYTES:
        return None
    return _safe_value(col, i)


def _parquet_bad_batch(path: str, batch: pa.RecordBatch, bad_idx: list[int], causes: list[str], row0: int,
                       mapping: ColumnMapping, cap: int = DEFAULT_MAX_RECORD_BYTES) -> pa.RecordBatch:
    """Ledger rows for unusable Parquet rows. ``raw`` is the text's bytes when they are not valid UTF-8, its
    first ``min(cap, MAX_RAW_BYTES)`` bytes for a record over the cap (whose values are not made Python objects),
    otherwise the record as JSON (invalid strings in it written with ``\\xNN`` escapes)."""
    text = batch.column(mapping.text)
    raw_text = text.view(pa.binary() if pa.types.is_string(text.type) else pa.large_binary()) \
        if _is_text_type(text.type) else None
    names = batch.schema.names
    raws, ids, sources = [], [], []
    for i, cause in zip(bad_idx, causes):
        if cause.startswith(_OVERSIZED):  # no value made a Python object: the id and source, if small
            assert raw_text is not None  # (only a text value is oversized)
            record = {name: _small_value(batch.column(name), i) for name in (mapping.id, mapping.source)
                      if name and name in names}
            raw = pc.binary_slice(raw_text.slice(i, 1), 0, min(cap, MAX_RAW_BYTES))[0].as_py() or b""
        else:
            record = {name: _safe_value(batch.column(name), i) for name in names}
            raw = raw_text[i].as_py() if cause == "text is not valid UTF-8" and raw_text is not None else \
                json.dumps(record, ensure_ascii=False, default=_json_default).encode("utf-8")
        raws.append(raw)
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
        for block in self._reads():
            block = memoryview(block)
            for at in range(0, len(block), ZSTD_FEED_BYTES):  # bounded output per call (a bomb inflates ~32768x)
                data = block[at:at + ZSTD_FEED_BYTES]
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


class _Prefixed(BlockStream):
    """The bytes of ``head`` (already read from ``fh``, to tell its format), then the rest of ``fh``."""

    def _blocks_of(self):
        return self._reads()


#: Bytes read from the start of a ``.json`` file to find its first non-space byte (a file that is all spaces
#: for longer than this is read as JSON Lines: blank lines).
SNIFF_BYTES = 1 << 16
_SPACE = b" \t\r\n"
_BOM = b"\xef\xbb\xbf"


def _sniff_array(lines) -> tuple[bool, bytes]:
    """Whether the stream ``lines`` holds a JSON array (its first byte other than a byte-order mark and
    spaces is ``[``), and the bytes read to tell."""
    head = b""
    while len(head) < SNIFF_BYTES:
        part = lines.read(1 << 12)
        if not part:
            break
        head += part
        body = head[3:] if head.startswith(_BOM) else head
        if len(head) >= 3 and body.lstrip(_SPACE):
            break
    body = head[3:] if head.startswith(_BOM) else head
    return body.lstrip(_SPACE)[:1] == b"[", head


def _read_jsonl(path: str, fmt: str, file_index: int, mapping: ColumnMapping, batch_rows: int,
                cap: int = DEFAULT_MAX_RECORD_BYTES, span: tuple[int, int, int] | None = None) -> Iterator[ReadChunk]:
    """JSON Lines, or for a name ending ``.json`` (also ``.gz``/``.zst``) whose first non-space byte is ``[``,
    the objects of one JSON array (:func:`_array_elements`; ``origin_row`` is the element's index). A chunk
    ends after the record that brings it to ``batch_rows`` records or to :data:`MAX_CHUNK_TEXT_BYTES` bytes of
    record lines (without their ``\\n`` or ``\\r\\n``), the rule :mod:`dataclean.io.pieces` replays to cut
    a file. ``span`` ``(start, end, first line number)``: only those bytes of a plain JSON Lines file (a
    piece from :func:`~dataclean.io.pieces.jsonl_pieces`), its lines numbered as in the whole file."""
    keys = mapping.mapped()
    state = _JsonlChunk()
    chunk_bytes = 0
    try:
        with (_open_span(path, span) if span is not None else _open_lines(path, fmt)) as lines:
            if span is None and path.lower().endswith(JSON_ARRAY_SUFFIXES):
                is_array, head = _sniff_array(lines)
                lines = io.BufferedReader(_Prefixed(lines, head=head), buffer_size=1 << 20)
                if is_array:
                    yield from _read_json_array(lines, path, file_index, mapping, batch_rows, cap)
                    return
            first = span[2] if span is not None else 0
            for lineno, (line, oversized) in enumerate(capped_lines(lines, cap, min(cap, MAX_RAW_BYTES)), first):
                if oversized is not None:  # line is its beginning only
                    state.bad.append((lineno, line, oversized_detail(oversized, cap), None, mapping.default_source))
                    chunk_bytes += oversized
                elif not line or line.isspace():
                    continue  # a blank line is not a record (documented: rows count lines, blanks included)
                else:
                    state.add(lineno, line, mapping, keys)
                    chunk_bytes += without_line_end(line)
                if state.n >= batch_rows or chunk_bytes >= MAX_CHUNK_TEXT_BYTES:
                    yield state.finish(path, file_index, mapping)
                    state, chunk_bytes = _JsonlChunk(), 0
    except (OSError, EOFError, zlib.error, zstandard.ZstdError) as exc:
        raise InputFileError(path, f"cannot decompress or read ({_one_line(exc)})") from None
    if state.n:
        yield state.finish(path, file_index, mapping)


class _Span(BlockStream):
    """The bytes ``[start, end)`` of a local file (one piece of it)."""

    def __init__(self, path: str, start: int, end: int):
        fh = open(path, "rb")
        fh.seek(start)
        self._left = end - start
        super().__init__(fh, 1 << 20)

    def _blocks_of(self):
        while self._left > 0:
            data = self._fh.read(min(self._block, self._left))
            if not data:
                raise EOFError("file ended before the end of its piece (truncated while read?)")
            self._left -= len(data)
            yield data


def _open_span(path: str, span: tuple[int, int, int]):
    return io.BufferedReader(_Span(path, span[0], span[1]), buffer_size=1 << 20)


def _read_json_array(lines, path: str, file_index: int, mapping: ColumnMapping, batch_rows: int,
                     cap: int) -> Iterator[ReadChunk]:
    """The records of a JSON array, in chunks as JSON Lines gives them: each element is read as a JSONL line
    would be (same bad-record causes); a structural problem of the array is a bad record of its element."""
    keys = mapping.mapped()
    default = mapping.default_source
    state = _JsonlChunk()
    for index, raw, problem in _array_elements(lines, cap, min(cap, MAX_RAW_BYTES)):
        if isinstance(problem, int):
            state.bad.append((index, raw, oversized_detail(problem, cap), None, default))
        elif problem is not None:
            state.bad.append((index, raw, problem, None, default))
        else:
            state.add(index, raw, mapping, keys)
        if state.n >= batch_rows or state.text_bytes >= MAX_CHUNK_TEXT_BYTES:
            yield state.finish(path, file_index, mapping)
            state = _JsonlChunk()
    if state.n:
        yield state.finish(path, file_index, mapping)


#: Outside a string: the bytes that change the array's structure.
_ARRAY_TOKEN = re.compile(rb'["\[\]{},]')
#: Inside a string: everything up to its closing quote (or the end of the block, or a backslash at its end).
_STRING_BODY = re.compile(rb'(?:[^"\\]+|\\.)*', re.S)
ARRAY_BLOCK = 1 << 20


def _array_elements(fh, cap: int, keep: int) -> Iterator[tuple[int, bytes, int | str | None]]:  # noqa: C901 (a streaming JSON array scanner: one state machine)
    """``(index, element bytes, problem)`` for each top-level element of the JSON array in the binary stream
    ``fh``, read ``ARRAY_BLOCK`` bytes at a time: a streaming split on the commas between elements (strings
    and nesting followed; the elements themselves are parsed by the caller). No element is held past ``cap``
    bytes: a longer one comes as (its first ``keep`` bytes, its size). ``problem`` is None, that size, or one
    line: ``empty element``, ``the array ends inside this element (truncated file?)``, ``text after the end of
    the JSON array``. An element with unbalanced brackets takes the elements after it into its bad record
    (where it ends cannot be known)."""
    index = 0
    depth = 0  # 1 inside the top-level array
    started = ended = in_string = escape = False
    buf = bytearray()
    size = 0  # bytes of the current element (buf holds at most cap of them)
    trailing = bytearray()

    def take(piece) -> None:
        nonlocal size
        size += len(piece)
        if len(buf) <= cap:
            buf.extend(piece[:cap + 1 - len(buf)])

    def element():
        raw = bytes(buf).strip(_SPACE)
        if size > len(buf) or len(raw) > cap:  # (its size counts the spaces around it)
            return raw[:keep], size
        return raw, (None if raw else "empty element")

    while block := fh.read(ARRAY_BLOCK):
        pos, n = 0, len(block)
        if not started:
            if block.startswith(_BOM):
                pos = 3
            while pos < n and block[pos] in _SPACE:
                pos += 1
            if pos == n:
                continue
            pos += 1  # the '['
            started, depth = True, 1
        while pos < n:
            if ended:
                if len(trailing) < keep:
                    trailing.extend(block[pos:pos + keep].strip(_SPACE))
                break
            if in_string:
                if escape:
                    take(block[pos:pos + 1])
                    pos, escape = pos + 1, False
                    continue
                m = _STRING_BODY.match(block, pos)
                end = m.end()  # type: ignore[union-attr]  # (the pattern matches the empty string too)
                take(block[pos:end])
                pos = end
                if pos >= n:
                    break
                if block[pos] == 0x5C:  # a backslash ending the block: its escaped byte comes next
                    take(block[pos:pos + 1])
                    pos, escape = pos + 1, True
                    continue
                take(block[pos:pos + 1])  # the closing quote
                pos, in_string = pos + 1, False
                continue
            m = _ARRAY_TOKEN.search(block, pos)
            if m is None:
                take(block[pos:])
                break
            at = m.start()
            ch = block[at]
            if ch in b",]" and depth == 1:
                take(block[pos:at])
                if not (ch == 0x5D and not index and not bytes(buf).strip(_SPACE)):  # (not [] nor [ ])
                    raw, problem = element()
                    yield (index, raw, problem)
                    index += 1
                buf.clear()
                size = 0
                if ch == 0x5D:
                    ended, depth = True, 0
                pos = at + 1
                continue
            take(block[pos:at + 1])
            if ch == 0x22:
                in_string = True
            elif ch in b"[{":
                depth += 1
            elif ch in b"]}":
                depth -= 1
            pos = at + 1
    if started and not ended and bytes(buf).strip(_SPACE):
        raw, problem = element()
        yield (index, raw[:keep], "the array ends inside this element (truncated file?)")
    if trailing:
        yield (index, bytes(trailing[:keep]), "text after the end of the JSON array")


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
        return ReadChunk(docs=docs, bad=bad, n_records=self.n, extra=_json_extra(self.metas))


def _json_extra(metas: list[dict]) -> pa.RecordBatch | None:
    """The unmapped keys of a chunk's JSON records as columns, in the order the keys first appear: each in the
    type ``pyarrow.array`` infers from its values (object -> struct, array -> list, number -> int64 or
    double, a key a record lacks -> null). A key whose values have no common type (a number here, a string
    there; an integer past int64; an empty object, which Parquet cannot store) is JSON text instead, its
    field marked with :data:`EXTRA_JSON_KEY`. None when no record has an unmapped key."""
    names: dict[str, None] = {}
    for m in metas:
        names.update(dict.fromkeys(m))
    if not names:
        return None
    arrays, fields = [], []
    for name in names:
        values = [m.get(name) for m in metas]
        try:
            arr = pa.array(values)
            if not _parquet_storable(arr.type):
                raise ValueError("an empty struct")
            fields.append(pa.field(name, arr.type))
        except (pa.ArrowException, ValueError, TypeError, OverflowError, UnicodeEncodeError, RecursionError):
            arr = pa.array([None if v is None else _safe_json(v) for v in values], pa.string())
            fields.append(pa.field(name, pa.string(), metadata={EXTRA_JSON_KEY: b"json"}))
        arrays.append(arr)
    return pa.RecordBatch.from_arrays(arrays, schema=pa.schema(fields))


def _parquet_storable(t: pa.DataType) -> bool:
    """False for a type with a struct of no fields anywhere in it (Parquet has no such group)."""
    if pa.types.is_struct(t):
        return t.num_fields > 0 and all(_parquet_storable(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t) or \
            pa.types.is_map(t):
        return all(_parquet_storable(t.field(i).type) for i in range(t.num_fields))
    return True


def _safe_json(value) -> str:
    """``value`` as JSON text (sorted keys, non-ASCII kept; a lone surrogate kept as its escape)."""
    try:
        text = json.dumps(value, ensure_ascii=False, sort_keys=True, default=_json_default)
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True, sort_keys=True, default=_json_default)
    except (RecursionError, ValueError, TypeError):
        return json.dumps({"_unserializable": True})


# --------------------------------------------------------------------------------------------------------
# WARC / WET (records parsed in dataclean.io.warc)


def _read_warc(path: str, file_index: int, mapping: ColumnMapping, batch_rows: int,
               cap: int = DEFAULT_MAX_RECORD_BYTES) -> Iterator[ReadChunk]:
    """Crawl records as canonical batches: the id, text and url are the record's, the columns mapping does
    not apply (a WARC has no columns); ``source`` is ``input.default_source``. A document whose text is over
    ``cap`` bytes is a bad record (it was read whole: FastWARC reads a record at a time)."""
    default = mapping.default_source
    try:
        for part in read_warc(path, batch_rows):
            _drop_oversized_warc(part, cap)
            docs = _canonical(path, file_index, pa.array(part.rows, pa.int64()), pa.array(part.texts, pa.string()),
                              pa.array(part.ids, pa.string()), None, pa.array(part.urls, pa.string()), None,
                              pa.array(part.metas, pa.string()), default)
            bad = None
            if part.bad:
                part.bad.sort(key=lambda b: b[0])
                rows, raws, causes, ids = (list(c) for c in zip(*part.bad))
                bad = _bad_rows(path, rows, raws, causes, ids, [default] * len(rows))
            yield ReadChunk(docs=docs, bad=bad, n_records=part.n, skipped=part.skipped)
    except WarcFileError as exc:
        raise InputFileError(path, str(exc)) from None


def _drop_oversized_warc(part, cap: int) -> None:
    """Move the documents of a WARC batch whose text has more than ``cap`` UTF-8 bytes to its bad records (a
    character is 1 to 4 bytes: only texts of more than ``cap // 4`` characters are encoded to be measured)."""
    big = [i for i, t in enumerate(part.texts) if len(t) > cap // 4]
    sizes = {i: len(part.texts[i].encode("utf-8", "surrogatepass")) for i in big}
    over = [i for i in big if sizes[i] > cap]
    if not over:
        return
    keep = min(cap, MAX_RAW_BYTES)
    for i in over:
        part.bad.append((part.rows[i], part.texts[i][:keep].encode("utf-8", "surrogatepass")[:keep],
                         oversized_detail(sizes[i], cap), part.ids[i]))
    gone = set(over)
    for name in ("rows", "texts", "ids", "urls", "metas"):
        setattr(part, name, [v for i, v in enumerate(getattr(part, name)) if i not in gone])


def _str_or_none(value) -> str | None:
    return value if isinstance(value, str) else None if value is None else str(value)


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


# --------------------------------------------------------------------------------------------------------


def read_shard(path: str, file_index: int, mapping: ColumnMapping | None = None,
               batch_rows: int = 4096, max_record_bytes: int = DEFAULT_MAX_RECORD_BYTES,
               rows: tuple[int, int] | None = None,
               span: tuple[int, int, int] | None = None) -> Generator[ReadChunk, None, None]:
    """Yield :class:`ReadChunk` s of one input file (a local path or a URI, see :mod:`dataclean.io.fs`); raise
    :class:`InputFileError` if the file is unreadable. A record of more than ``max_record_bytes`` bytes
    (``input.max_record_bytes``) is a bad record, not read whole (see the module docstring). ``rows``
    ``(start, end)``: only those rows of a Parquet file (a piece from :func:`parquet_pieces`), in the chunks
    a read of the whole file gives them. ``span`` ``(start, end, first line)``: only those bytes of a local,
    uncompressed JSON Lines file (a piece from :func:`~dataclean.io.pieces.jsonl_pieces`), likewise."""
    if rows is not None and detect_format(path) != "parquet":
        raise ValueError(f"{path}: a row range is for Parquet files")
    if span is not None and (detect_format(path) != "jsonl" or fs.is_uri(path)):
        raise ValueError(f"{path}: a byte range is for local, uncompressed JSON Lines files")
    if not isinstance(max_record_bytes, int) or isinstance(max_record_bytes, bool) or max_record_bytes <= 0:
        raise ValueError(f"max_record_bytes: must be a positive integer, got {max_record_bytes!r}")
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
        yield from _read_parquet(path, file_index, mapping, batch_rows, max_record_bytes, rows)
    elif fmt == "arrow":
        yield from _read_arrow(path, file_index, mapping, batch_rows, max_record_bytes)
    elif fmt == "warc":
        yield from _read_warc(path, file_index, mapping, batch_rows, max_record_bytes)
    else:
        yield from _read_jsonl(path, fmt, file_index, mapping, batch_rows, max_record_bytes, span)



def _piece_batches(pf: pq.ParquetFile, rows: tuple[int, int], batch_rows: int) -> Iterator[pa.RecordBatch]:
    """The rows ``[start, end)`` of ``pf`` in the batches a read of the whole file gives (``batch_rows`` rows
    from row 0: ``start`` is a multiple of it), reading only the row groups that hold them. The chunks, and so
    the order of the ledger rows each chunk writes, are the same however the file is cut."""
    start, end = rows
    meta = pf.metadata
    first, at = 0, 0  # the row group holding `start`, and its first row
    while first < meta.num_row_groups and at + meta.row_group(first).num_rows <= start:
        at += meta.row_group(first).num_rows
        first += 1
    last, stop = first, at
    while last < meta.num_row_groups and stop < end:
        stop += meta.row_group(last).num_rows
        last += 1
    skip, pending, have = start - at, [], 0
    for batch in pf.iter_batches(batch_size=batch_rows, row_groups=range(first, last)):
        if skip:
            cut = min(skip, batch.num_rows)
            batch, skip = batch.slice(cut), skip - cut
            if not batch.num_rows:
                continue
        take = min(batch.num_rows, end - start)
        if take <= 0:
            break
        pending.append(batch.slice(0, take))
        have += take
        start += take
        while have >= batch_rows:
            joined = pa.concat_batches(pending) if len(pending) > 1 else pending[0]
            yield joined.slice(0, batch_rows)
            rest = joined.slice(batch_rows)
            pending, have = ([rest] if rest.num_rows else []), rest.num_rows
    if have:
        yield pa.concat_batches(pending) if len(pending) > 1 else pending[0]


def parquet_pieces(path: str, target_bytes: int, batch_rows: int) -> list[tuple[int, int]] | None:
    """Cut a Parquet file into pieces of about ``target_bytes`` of uncompressed row-group data each, so that the
    pieces of one large file are read by several workers: ``[(start, end), ...]`` row ranges in order, each
    ``start`` a multiple of ``batch_rows`` (a chunk of a whole-file read is never cut). A last piece under half
    the target joins the one before. None when the file is one piece (small, or its footer unreadable: reading
    it then says why). Depends on the file's footer and the config alone, never on the worker count."""
    if target_bytes <= 0 or detect_format(path) != "parquet":
        return None
    try:
        if fs.is_uri(path):
            with fs.open_input_file(path) as source:
                meta = pq.read_metadata(source)
        else:
            meta = pq.read_metadata(path)
    except (pa.ArrowException, OSError, ValueError):
        return None
    pieces: list[tuple[int, int]] = []
    start = row = size = 0
    for i in range(meta.num_row_groups):
        group = meta.row_group(i)
        row_bytes = group.total_byte_size / max(group.num_rows, 1)
        left = group.num_rows
        while left:  # a row group larger than the target gives several pieces
            need = max(1, int((target_bytes - size) / row_bytes)) if row_bytes else left
            step = min(left, need)
            row, left, size = row + step, left - step, size + step * row_bytes
            cut = row // batch_rows * batch_rows
            if size >= target_bytes and cut > start:
                pieces.append((start, cut))
                size = (row - cut) * row_bytes
                start = cut
    if start < meta.num_rows:
        if pieces and 2 * size < target_bytes:
            pieces[-1] = (pieces[-1][0], meta.num_rows)
        else:
            pieces.append((start, meta.num_rows))
    return pieces if len(pieces) > 1 else None
