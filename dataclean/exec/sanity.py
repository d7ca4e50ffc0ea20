"""Input sanity: a run that reads its input wrongly (the text in another column than the configured one, a file
that is not JSON Lines) must not "succeed" with nothing kept.

* :func:`check_first_batches` (the driver, before any task runs): the first batch of every input is read with
  the ordinary readers; a file whose first batch is all bad records of one cause is then read on, and if every
  record of it is bad for that cause the run stops with :class:`InputSanityError` — one line naming the file,
  the cause, the file's columns and the flag to pass. A file with a good record is never stopped;
* the same read of the first batches, when the pipeline's ``extract`` stage takes only WARC pages
  (``rows: html``): a JSONL/Parquet input that is mostly raw HTML without HTML meta stops the run in one line
  naming ``extract.rows: all``;
* :func:`check_pass1` (after pass 1, before the global step): the same from the per-file counts, for a file
  whose every record turned out bad;
* :func:`mostly_bad_warning` (the end of a run): a run in which one cause makes more than half of all records
  bad finishes, with a one-line warning saying so.

Unreadable files (a Parquet file without the text column among them) are not stopped here: they fail in
pass 1 and the run exits 1, as documented; their one-line cause carries the same hint.
"""
from __future__ import annotations

import json
import os
from concurrent.futures import ThreadPoolExecutor

import pyarrow.compute as pc
import pyarrow.parquet as pq

from dataclean.exec.errors import RunError
from dataclean.io.fs import files_in
from dataclean.io.readers import ColumnMapping, ReadChunk, origin_ids, read_shard, text_column_hint
from dataclean.io.warc import HTML_META_PATTERN, is_warc
from dataclean.sections import InputSection

#: Records read from each input by the driver's check (a batch; the readers' batch size for this read).
FIRST_BATCH_ROWS = 256
#: Records whose columns are looked at to name the file's columns and suggest the text column.
SAMPLE_RECORDS = 256
#: Pages of raw HTML start like this (after blanks); a record whose text does is counted as a page.
_HTML_START = r"^\s*<(?:!doctype\s+html|html|head|body)\b"


class InputSanityError(RunError):
    """Every record of an input file is a bad record with the same cause: the input is mis-read."""


def mapping_of(cfg: dict) -> ColumnMapping:
    return InputSection.of(cfg).columns


#: The cause of a record over ``input.max_record_bytes``: a property of one record, never a sign that the
#: file is mis-read, so it never stops a run (a file of one huge record is that record's bad_record row).
OVERSIZED = "record over input.max_record_bytes"


def cause_kind(detail: str) -> str:
    """A bad record's cause without its particulars (where in the line the JSON or the UTF-8 failed, the
    size of an oversized record)."""
    if detail.startswith(("invalid JSON (", "not valid UTF-8 (")):
        return detail.split(" (", 1)[0]
    if detail.startswith("record of ") and "exceeds input.max_record_bytes" in detail:
        return OVERSIZED
    return detail


def _text_cause(kind: str) -> bool:
    return kind in ("text is missing", "text is null") or (kind.startswith("text is ")
                                                          and kind.endswith(", not a string"))


def describe(kind: str, mapping: ColumnMapping) -> str:
    """The cause in the user's terms: ``no 'text' field``, ``'text' is null``…"""
    if kind == "text is missing":
        return f"no {mapping.text!r} field"
    if _text_cause(kind):
        return f"{mapping.text!r} {kind[len('text '):]}"
    return kind


def _columns(records: list[dict]) -> tuple[list[str], dict[str, int]]:
    """The columns of ``records`` in first-seen order, and the characters held by each column whose values
    are all strings (or null)."""
    names: list[str] = []
    chars: dict[str, int] = {}
    not_text: set[str] = set()
    for rec in records:
        for key, value in rec.items():
            if key not in chars and key not in not_text:
                names.append(key)
                chars[key] = 0
            if isinstance(value, str) and key not in not_text:
                chars[key] += len(value)
            elif value is not None:
                not_text.add(key)
                chars.pop(key, None)
    return names, chars


def _hint(kind: str, names: list[str], chars: dict[str, int], mapping: ColumnMapping) -> str | None:
    if _text_cause(kind):
        return text_column_hint(names, chars, mapping)
    if kind == "invalid JSON" or kind.startswith("record is a JSON"):
        return "check that it is JSON Lines (one JSON object per line)"
    if kind == "not valid UTF-8":
        return "convert it to UTF-8"
    return None


def _records(raws) -> list[dict]:
    out = []
    for raw in raws:
        try:
            rec = json.loads(raw)
        except (ValueError, TypeError, RecursionError):
            continue
        if isinstance(rec, dict):
            out.append(rec)
    return out


def all_bad_message(path: str, kind: str, records: list[dict], mapping: ColumnMapping, after: str = "") -> str:
    """``every record of PATH is a bad record (CAUSE); its columns are A, B: pass --text-column B (...)``."""
    names, chars = _columns(records)
    msg = f"every record of {path} is a bad record ({describe(kind, mapping)})"
    if names:
        msg += f"; its columns are {', '.join(names)}"
    hint = _compressed_hint(path) if kind == "not valid UTF-8" else None
    hint = hint or _hint(kind, names, chars, mapping)
    return msg + (f": {hint}" if hint else "") + after


#: The first bytes of a gzip and of a zstd stream, and the name ending each needs.
_MAGIC = ((b"\x1f\x8b", "gzip", ".gz"), (b"\x28\xb5\x2f\xfd", "zstd", ".zst"))


def _compressed_hint(path: str) -> str | None:
    """For a file whose records are not UTF-8: it is compressed but not named so (``a.jsonl`` holding gzip)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4)
    except OSError:  # (a URI, or gone: the generic hint)
        return None
    for magic, what, suffix in _MAGIC:
        if head.startswith(magic) and not path.lower().endswith(suffix):
            return f"it is {what}-compressed: name it {os.path.basename(path)}{suffix}"
    return None


def _all_bad_kind(chunk: ReadChunk) -> str | None:
    """The one cause of a chunk whose every record is bad, else None."""
    if chunk.docs.num_rows or chunk.bad is None or not chunk.bad.num_rows:
        return None
    kinds = {cause_kind(d) for d in chunk.bad.column("detail").to_pylist()}
    return kinds.pop() if len(kinds) == 1 and OVERSIZED not in kinds else None


def _first_batch(index: int, path: str, mapping: ColumnMapping, html_rows: bool = False
                 ) -> tuple[tuple[str, list[dict]] | None, tuple[int, int] | None, list[str] | None]:
    """Of the first batch of ``path``: (cause, sample records) when it is all bad records of one cause, else
    None; with ``html_rows``, (records of raw HTML, records) when no record's meta marks an HTML page
    (:data:`dataclean.io.warc.HTML_META_PATTERN`), else None; and :func:`_id_columns`."""
    reader = read_shard(path, index, mapping, FIRST_BATCH_ROWS)
    try:
        chunk = next(reader, None)
    except Exception:  # noqa: BLE001 - an unreadable file is pass 1's to report (exit 1), not this check's
        return None, None, None
    finally:
        reader.close()
    if chunk is None:
        return None, None, None
    kind = _all_bad_kind(chunk)
    bad = chunk.bad
    verdict = (kind, _records(bad.column("raw").to_pylist()[:SAMPLE_RECORDS])) if kind and bad is not None else None
    html = None
    docs = chunk.docs
    if html_rows and docs.num_rows and not pc.any(pc.match_substring_regex(docs.column("meta"),
                                                                           HTML_META_PATTERN)).as_py():
        pages = pc.sum(pc.match_substring_regex(docs.column("text"), _HTML_START, ignore_case=True)).as_py() or 0
        html = (pages, docs.num_rows)
    return verdict, html, _id_columns(chunk, mapping)


def _id_columns(chunk: ReadChunk, mapping: ColumnMapping) -> list[str] | None:
    """For an id column the user named (not the default): the chunk's columns when no document took its id
    from it (each id is the derived ``FILE#ROW``), ``[]`` when one did; None when there is nothing to tell (the
    default id column, no documents)."""
    docs = chunk.docs
    if not mapping.id or mapping.id == ColumnMapping.id or not docs.num_rows:
        return None
    derived = origin_ids(docs.column("origin_file"), docs.column("origin_row"))
    if not pc.all(pc.equal(docs.column("id"), derived)).as_py():
        return []
    extra = chunk.extra.schema.names if chunk.extra is not None else []
    return [mapping.text, *(c for c in extra if c != mapping.text)]


def _every_record_bad(index: int, path: str, mapping: ColumnMapping, kind: str) -> bool:
    """Whether every record of ``path`` is a bad record of cause ``kind`` (read until one is not)."""
    reader = read_shard(path, index, mapping, FIRST_BATCH_ROWS)
    try:
        for chunk in reader:
            if _all_bad_kind(chunk) != kind:
                return False
        return True
    except Exception:  # noqa: BLE001 - (as above)
        return False
    finally:
        reader.close()


def check_first_batches(files: list[str], mapping: ColumnMapping, threads: int = 4, html_rows: bool = False) -> None:
    """Raise :class:`InputSanityError` for the first input (in input order) whose every record is a bad record
    of one cause. Reads the first batch of each file; only a file whose first batch is all bad of one cause
    is read further (until a record that is not).

    ``html_rows`` (the pipeline's extract stage takes only rows whose meta says HTML, i.e. WARC pages): then
    also for the first JSONL/Parquet input whose first batch is mostly raw HTML with no such meta, which the
    stage would pass through for the rules to judge as markup; the fix is ``extract.rows: all``."""
    with ThreadPoolExecutor(max(1, min(threads, len(files)))) as pool:
        firsts = list(pool.map(_first_batch, range(len(files)), files, [mapping] * len(files),
                               [html_rows and not is_warc(f) for f in files]))
    for index, (path, (verdict, _, _)) in enumerate(zip(files, firsts)):
        if verdict is not None and _every_record_bad(index, path, mapping, verdict[0]):
            raise InputSanityError(all_bad_message(path, verdict[0], verdict[1], mapping))
    lacking = [(path, columns) for path, (_, _, columns) in zip(files, firsts) if columns is not None]
    if lacking and all(columns for _, columns in lacking):  # an id column the user named, in no input at all
        path, columns = lacking[0]
        raise InputSanityError(
            f"id column {mapping.id!r}: no record of {path} has it (its columns: {', '.join(columns)}): pass "
            "--id-column with one of them (or set input.columns.id; without one, ids are FILE#ROW)")
    for path, (_, html, _) in zip(files, firsts):
        if html is not None and 2 * html[0] > html[1]:
            raise InputSanityError(
                f"{path}: {html[0]} of its first {html[1]} records are raw HTML, and extract takes only "
                "WARC pages (rows whose meta says text/html): set extract.rows: all to extract every row")


def _read_bad(files: list[str], columns: list[str]):
    for path in files:
        for batch in pq.ParquetFile(path).iter_batches(batch_size=4096, columns=["stage", *columns]):
            yield batch


def check_pass1(lay, results: list[dict], mapping: ColumnMapping, output: str) -> None:
    """After pass 1: raise :class:`InputSanityError` for an input whose every record is a bad record of one
    cause (from its task's counts and ledger part)."""
    for res in results:
        if res.get("status") != "ok" or not res.get("records") or res.get("bad_records") != res["records"]:
            continue
        files = [f for task in res.get("tasks", [res["task"]])
                 for f in sorted(files_in(lay.pass1_dir(task), "rejected-*.parquet"))]
        kinds: set[str] = set()
        raws: list = []
        for batch in _read_bad(files, ["detail", "raw"]):
            kinds.update(cause_kind(d) for d in batch.column("detail").to_pylist() if d is not None)
            if len(raws) < SAMPLE_RECORDS:
                raws += batch.column("raw").to_pylist()[:SAMPLE_RECORDS - len(raws)]
            if len(kinds) > 1:
                break
        if len(kinds) == 1 and OVERSIZED not in kinds:
            raise InputSanityError(all_bad_message(
                res["input"], kinds.pop(), _records(raws), mapping,
                after=f" (and --fresh: {output} holds this stopped run)"))


def mostly_bad_warning(output: str, mapping: ColumnMapping) -> str | None:
    """``9,120 of 10,000 records (91%) are bad records: no 'text' field; pass --text-column …`` when one cause
    makes more than half of the run's records bad; None otherwise."""
    try:
        with open(os.path.join(output, "stats", "summary.json"), encoding="utf-8") as fh:
            summary = json.load(fh)
    except (OSError, ValueError):
        return None
    total, bad = summary.get("input_records") or 0, summary.get("bad_records") or 0
    if not total or 2 * bad <= total:
        return None
    files = sorted(files_in(os.path.join(output, "rejected"), "*.parquet"))
    counts: dict[str, int] = {}
    for path in files:
        table = pq.read_table(path, columns=["detail"], filters=[("stage", "==", "read")])
        for detail in table.column("detail").to_pylist():
            kind = cause_kind(detail or "")
            counts[kind] = counts.get(kind, 0) + 1
    if not counts:
        return None
    kind, n = max(counts.items(), key=lambda kv: (kv[1], kv[0]))
    if 2 * n <= total:
        return None
    raws: list = []
    for path in files:
        table = pq.read_table(path, columns=["detail", "raw"], filters=[("stage", "==", "read")])
        raws += [r for d, r in zip(table.column("detail").to_pylist(), table.column("raw").to_pylist())
                 if cause_kind(d or "") == kind][:SAMPLE_RECORDS - len(raws)]
        if len(raws) >= SAMPLE_RECORDS:
            break
    names, chars = _columns(_records(raws))
    hint = _hint(kind, names, chars, mapping)
    return (f"{n:,} of {total:,} records ({100 * n / total:.0f}%) are bad records: {describe(kind, mapping)}"
            + (f"; {hint}" if hint else ""))
