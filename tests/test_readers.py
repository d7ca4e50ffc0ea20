"""Readers: every supported format on good input, bad records kept in the ledger with their raw bytes, whole
files that cannot be read failing with one line, and the CLI's behaviour around all three."""
from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataclean.io.readers import (LEDGER_SCHEMA, ColumnMapping, InputFileError, discover_inputs,
                                  read_shard)
from dataclean.schema import DOC_SCHEMA, doc_key
from hostile import (HOSTILE_LINES, empty_file, invalid_utf8_strings, nested, parquet_corrupt_pages,
                           parquet_footer_cut, random_bytes, truncated_gz, truncated_zst, write_hostile_jsonl,
                           write_jsonl, write_jsonl_gz, write_jsonl_zst, write_parquet)


@dataclass
class Read:
    docs: list[dict]  # DOC_SCHEMA rows
    bad: list[dict]  # ledger rows
    chunk_records: list[int]  # n_records of each chunk
    chunk_docs: list[int]  # documents in each chunk


def read(path: Path, file_index: int = 0, batch_rows: int = 4096, **mapping) -> Read:
    chunks = list(read_shard(str(path), file_index, ColumnMapping(**mapping), batch_rows))
    for c in chunks:
        assert c.docs.schema == DOC_SCHEMA
        assert c.bad is None or (c.bad.schema == LEDGER_SCHEMA and c.bad.num_rows > 0)
        assert c.n_records == c.docs.num_rows + (c.bad.num_rows if c.bad is not None else 0)
    return Read(docs=[row for c in chunks for row in c.docs.to_pylist()],
                bad=[row for c in chunks if c.bad is not None for row in c.bad.to_pylist()],
                chunk_records=[c.n_records for c in chunks], chunk_docs=[c.docs.num_rows for c in chunks])


def doc(path: Path, row: int, id: str, text: str, source: str = "unknown", url: str | None = None,
        lang: str | None = None, meta: str | None = None, file_index: int = 0) -> dict:
    """The expected DOC_SCHEMA row of a document read from ``path``."""
    return {"id": id, "text": text, "source": source, "url": url, "lang": lang, "meta": meta,
            "origin_file": str(path), "origin_row": row, "doc_key": (file_index << 40) | row}


def bad(path: Path, row: int, id: str, detail: str, raw: bytes, source: str = "unknown") -> dict:
    """The expected ledger row of a bad record: stage read, rule parse, reason bad_record, nothing else set."""
    return {"id": id, "source": source, "lang": None, "url": None, "meta": None, "origin_file": str(path), "origin_row": row,
            "stage": "read", "rule": "parse", "reason": "bad_record", "value": None, "threshold": None,
            "detail": detail, "dup_of": None, "n_chars": None, "n_tokens": None, "text": None, "raw": raw}


def ids(rows: list[dict]) -> list[str]:
    return [r["id"] for r in rows]


# ---------------------------------------------------------------------------------------------------------
# Good input


def test_parquet_reads_the_canonical_columns(tmp_path):
    path = write_parquet(tmp_path / "a.parquet", {"id": ["a", "b"], "text": ["alpha", "beta"],
                                                  "source": ["web", "books"], "url": ["http://a.example", None]})
    r = read(path)
    assert r.docs == [doc(path, 0, "a", "alpha", source="web", url="http://a.example"),
                      doc(path, 1, "b", "beta", source="books")]
    assert r.bad == []


LINES = [{"id": "a", "text": "alpha", "source": "web"},
         {"id": "b", "text": "中文文本", "url": "http://b.example"},
         {"id": "c", "text": "line one\nline two\ttab"}]


@pytest.mark.parametrize("name, write", [("x.jsonl", write_jsonl), ("x.ndjson", write_jsonl),
                                         ("x.jsonl.gz", write_jsonl_gz), ("x.json.gz", write_jsonl_gz),
                                         ("x.jsonl.zst", write_jsonl_zst),
                                         ("x.jsonl.zst", lambda p, lines: write_jsonl_zst(p, lines, frames=3))])
def test_jsonl_plain_gz_and_zst_read_the_same_documents(tmp_path, name, write):
    path = write(tmp_path / name, LINES)
    assert read(path).docs == [doc(path, 0, "a", "alpha", source="web"),
                               doc(path, 1, "b", "中文文本", url="http://b.example"),
                               doc(path, 2, "c", "line one\nline two\ttab")]


MAPPED_RECORDS = [
    {"doc_id": 7, "content": "hello", "src": "code", "link": "http://x.example", "language": "en",
     "zeta": 1, "alpha": {"b": [1, 2]}},
    {"doc_id": None, "content": "world", "src": None, "link": None, "language": None, "zeta": 2,
     "alpha": {"b": []}},
]
MAPPING = dict(text="content", id="doc_id", source="src", url="link", lang="language", default_source="web")


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_column_mapping_and_meta(tmp_path, fmt):
    if fmt == "parquet":
        path = write_parquet(tmp_path / "m.parquet", pa.Table.from_pylist(MAPPED_RECORDS).to_pydict())
    else:
        path = write_jsonl(tmp_path / "m.jsonl", MAPPED_RECORDS)
    assert read(path, **MAPPING).docs == [
        # int id -> string id; unmapped columns -> meta as JSON with sorted keys
        doc(path, 0, "7", "hello", source="code", url="http://x.example", lang="en",
            meta='{"alpha": {"b": [1, 2]}, "zeta": 1}'),
        # null id -> derived "<path>#<row>"; null source -> default_source
        doc(path, 1, f"{path}#1", "world", source="web", meta='{"alpha": {"b": []}, "zeta": 2}'),
    ]


def test_jsonl_derived_ids_and_default_source(tmp_path):
    path = write_jsonl(tmp_path / "d.jsonl", [{"text": "no id"}, {"id": None, "text": "null id"},
                                              {"id": "c", "text": "has id", "source": "books"},
                                              {"id": 3.5, "text": "float id", "source": 12}])
    assert read(path, default_source="web").docs == [
        doc(path, 0, f"{path}#0", "no id", source="web"),
        doc(path, 1, f"{path}#1", "null id", source="web"),
        doc(path, 2, "c", "has id", source="books"),
        doc(path, 3, "3.5", "float id", source="web"),  # a source that is not a string is no source
    ]


def test_parquet_derived_ids_and_default_source(tmp_path):
    path = write_parquet(tmp_path / "d.parquet", {"id": pa.array([None, 12], pa.int64()), "text": ["a", "b"],
                                                  "source": [None, "code"]})
    assert read(path, default_source="web").docs == [doc(path, 0, f"{path}#0", "a", source="web"),
                                                     doc(path, 1, "12", "b", source="code")]


def test_parquet_without_id_source_or_url_columns(tmp_path):
    path = write_parquet(tmp_path / "t.parquet", {"text": ["a"]})
    assert read(path).docs == [doc(path, 0, f"{path}#0", "a")]


def test_doc_key_is_file_index_shifted_40_bits_or_row(tmp_path):
    path = write_jsonl(tmp_path / "k.jsonl", [{"text": "a"}, {"text": "b"}, {"text": "c"}])
    docs = read(path, file_index=3).docs
    assert [d["doc_key"] for d in docs] == [3298534883328, 3298534883329, 3298534883330]
    assert [d["doc_key"] for d in docs] == [doc_key(3, row) for row in (0, 1, 2)]


@pytest.mark.parametrize("fmt", ["parquet", "jsonl"])
def test_batch_rows_cuts_chunks(tmp_path, fmt):
    texts = ["t0", "t1", "t2", "t3", "t4"]
    if fmt == "parquet":
        path = write_parquet(tmp_path / "b.parquet", {"text": texts})
    else:
        path = write_jsonl(tmp_path / "b.jsonl", [{"text": t} for t in texts])
    r = read(path, batch_rows=2)
    assert r.chunk_records == [2, 2, 1]
    assert [d["text"] for d in r.docs] == texts
    assert [d["origin_row"] for d in r.docs] == [0, 1, 2, 3, 4]


def test_jsonl_bad_records_count_towards_batch_rows(tmp_path):
    path = write_jsonl(tmp_path / "b.jsonl", [{"text": "t0"}, b"oops", {"text": "t2"}, {"text": "t3"},
                                              {"text": "t4"}])
    r = read(path, batch_rows=2)
    assert r.chunk_records == [2, 2, 1]
    assert r.chunk_docs == [1, 2, 1]


def test_jsonl_blank_lines_are_skipped_but_counted_in_rows(tmp_path):
    path = tmp_path / "blank.jsonl"
    path.write_bytes(b'{"text": "a"}\n\n   \n{"text": "b"}\r\n\t\n{"text": "c"}')  # no final newline
    r = read(path)
    assert [(d["origin_row"], d["text"]) for d in r.docs] == [(0, "a"), (3, "b"), (5, "c")]
    assert r.chunk_records == [3]


def test_jsonl_byte_order_mark_on_the_first_line_is_ignored(tmp_path):
    path = tmp_path / "bom.jsonl"
    path.write_bytes(b'\xef\xbb\xbf{"text": "a"}\n{"text": "b"}\n')
    assert [d["text"] for d in read(path).docs] == ["a", "b"]


def test_jsonl_crlf_line_ends_are_not_part_of_raw(tmp_path):
    path = tmp_path / "crlf.jsonl"
    path.write_bytes(b'{"text": "a"}\r\nbroken\r\n')
    assert read(path).bad == [bad(path, 1, f"{path}#1",
                                  "invalid JSON (JSONDecodeError: Expecting value: line 1 column 1 (char 0))",
                                  b"broken")]


@pytest.mark.parametrize("column", [pa.array(["a", "b"], pa.large_string()),
                                    pa.array(["a", "b"]).dictionary_encode(),
                                    pa.array(["a", "b"], pa.string_view()),
                                    pa.array([b"a", b"b"], pa.binary())],
                         ids=["large_string", "dictionary", "string_view", "binary"])
def test_parquet_text_column_of_other_string_types(tmp_path, column):
    path = write_parquet(tmp_path / "s.parquet", {"text": column, "tag": column})
    assert read(path).docs == [doc(path, 0, f"{path}#0", "a", meta='{"tag": "a"}'),
                               doc(path, 1, f"{path}#1", "b", meta='{"tag": "b"}')]


META_STRINGS = ['plain', 'quote " and \\ backslash', "new\nline\ttab\r", "\x00\x01\x1f\x7f", "中文 é \u2028", "", None]


def test_parquet_metadata_of_plain_columns_is_what_json_writes(tmp_path):
    """Text, integer, boolean and all-null columns are turned into JSON by Arrow kernels: the same text as
    json.dumps (sorted keys, escapes, ensure_ascii=False), in every row."""
    n = len(META_STRINGS)
    cols = {"text": ["doc"] * n, "s": META_STRINGS, "z\"q": META_STRINGS[::-1],
            "i": pa.array([0, -3, 2 ** 40, None, 7, 8, 9], pa.int64()), "u": pa.array(range(n), pa.uint8()),
            "b": [True, False, None, True, False, None, True], "nothing": pa.nulls(n),
            "big": pa.array(META_STRINGS, pa.large_string())}
    path = write_parquet(tmp_path / "plain.parquet", cols)
    meta = [d["meta"] for d in read(path).docs]
    rows = pa.table(cols).drop_columns(["text"]).to_pylist()
    assert meta == [json.dumps(r, ensure_ascii=False, sort_keys=True) for r in rows]
    assert meta[1] == ('{"b": false, "big": "quote \\" and \\\\ backslash", "i": -3, "nothing": null, '
                       '"s": "quote \\" and \\\\ backslash", "u": 1, "z\\"q": ""}')
    assert json.loads(meta[3])["s"] == "\x00\x01\x1f\x7f"


def test_parquet_binary_metadata_is_written_with_escapes(tmp_path):
    path = write_parquet(tmp_path / "bin.parquet", {"text": ["a"], "blob": pa.array([b"ok\xff"], pa.binary())})
    assert read(path).docs[0]["meta"] == '{"blob": "ok\\\\xff"}'


# ---------------------------------------------------------------------------------------------------------
# discover_inputs


@pytest.fixture()
def corpus(tmp_path) -> Path:
    root = tmp_path / "corpus"
    for name in ["b.jsonl", "a.parquet", "UPPER.JSONL", "sub/c.jsonl.gz", "sub/deeper/d.jsonl.zst",
                 "notes.txt", ".hidden.jsonl", "_tmp.jsonl", ".cache/e.jsonl", "_work/f.jsonl"]:
        empty_file(root / name)
    return root


def test_discover_inputs_walks_a_folder_recursively_sorted_supported_files_only(corpus):
    assert discover_inputs([str(corpus)]) == [
        f"{corpus}/UPPER.JSONL", f"{corpus}/a.parquet", f"{corpus}/b.jsonl", f"{corpus}/sub/c.jsonl.gz",
        f"{corpus}/sub/deeper/d.jsonl.zst"]


def test_discover_inputs_expands_globs_like_folders(corpus):
    assert discover_inputs([f"{corpus}/sub/*"]) == [f"{corpus}/sub/c.jsonl.gz"]  # sub/deeper is a folder
    assert discover_inputs([f"{corpus}/**/*.zst"]) == [f"{corpus}/sub/deeper/d.jsonl.zst"]
    # no notes.txt, no _tmp.jsonl, nothing under .cache/ or _work/
    assert discover_inputs([f"{corpus}/**/*"]) == [
        f"{corpus}/UPPER.JSONL", f"{corpus}/a.parquet", f"{corpus}/b.jsonl", f"{corpus}/sub/c.jsonl.gz",
        f"{corpus}/sub/deeper/d.jsonl.zst"]


def test_discover_inputs_de_duplicates_and_sorts_across_specs(corpus):
    specs = [f"{corpus}/sub/c.jsonl.gz", str(corpus), f"{corpus}/./b.jsonl", f"{corpus}/*.jsonl",
             f"{corpus}/b.jsonl"]
    assert discover_inputs(specs) == [
        f"{corpus}/UPPER.JSONL", f"{corpus}/a.parquet", f"{corpus}/b.jsonl", f"{corpus}/sub/c.jsonl.gz",
        f"{corpus}/sub/deeper/d.jsonl.zst"]


def test_discover_inputs_keeps_a_named_file_whatever_its_type(corpus):
    # the user named it: reading it fails with a clear message rather than skipping it silently
    assert discover_inputs([f"{corpus}/notes.txt"]) == [f"{corpus}/notes.txt"]


def test_discover_inputs_empty_folder_is_empty(tmp_path):
    (tmp_path / "empty").mkdir()
    assert discover_inputs([str(tmp_path / "empty")]) == []


def test_discover_inputs_missing_input(tmp_path):
    with pytest.raises(FileNotFoundError) as exc:
        discover_inputs([f"{tmp_path}/nothing-*.jsonl"])
    assert str(exc.value) == f"input not found: {tmp_path}/nothing-*.jsonl"


# ---------------------------------------------------------------------------------------------------------
# Bad records: ledger rows with the raw bytes, reading goes on


#: What the reader makes of each line of hostile.HOSTILE_LINES: the bad record's detail, or None = a document.
HOSTILE_DETAIL = {
    "not json": "invalid JSON (JSONDecodeError: Expecting value: line 1 column 1 (char 0))",
    "array": "record is a JSON array, not an object",
    "number": "record is a JSON number, not an object",
    "text missing": "text is missing",
    "text null": "text is null",
    "text int": "text is a JSON number, not a string",
    "text list": "text is a JSON array, not a string",
    "latin-1 byte": "not valid UTF-8 (invalid continuation byte at byte 24)",
    "utf-8 encoded surrogate": "not valid UTF-8 (invalid continuation byte at byte 21)",
    "lone surrogate escape": "text is not valid UTF-8 (lone surrogate)",
    "lone surrogate in id": "id is not valid UTF-8 (lone surrogate)",
    "lone surrogate in source": "source is not valid UTF-8 (lone surrogate)",
    "raw NUL byte in a string": "invalid JSON (JSONDecodeError: Invalid control character at: line 1 column 23 "
                                "(char 22))",
    "too deep": "invalid JSON (RecursionError: maximum recursion depth exceeded while decoding a JSON array "
                "from a unicode string)",
    "NUL escape": None,
    "paired surrogate escape": None,
    "lone surrogate in metadata": None,
    "100 levels of metadata": None,
}


def test_every_hostile_line_has_an_expectation():
    assert set(HOSTILE_DETAIL) == set(HOSTILE_LINES)


@pytest.mark.parametrize("name", list(HOSTILE_LINES))
def test_hostile_line_between_two_good_ones(tmp_path, name):
    path = write_hostile_jsonl(tmp_path / "h.jsonl", [name])
    r = read(path)
    detail = HOSTILE_DETAIL[name]
    if detail is None:
        assert ids(r.docs) == ["first", ids(r.docs)[1], "last"] and r.bad == []
    else:
        assert ids(r.docs) == ["first", "last"]
        assert [d["origin_row"] for d in r.docs] == [0, 2]
        assert [(b["origin_row"], b["detail"], b["raw"]) for b in r.bad] == [(1, detail, HOSTILE_LINES[name])]


def test_all_hostile_lines_in_one_file(tmp_path):
    path = write_hostile_jsonl(tmp_path / "h.jsonl")
    r = read(path, default_source="web")
    lines = list(HOSTILE_LINES.values())
    derived = f"{path}#"
    assert r.bad == [
        bad(path, 1, derived + "1", HOSTILE_DETAIL["not json"], lines[0], source="web"),
        bad(path, 2, derived + "2", HOSTILE_DETAIL["array"], lines[1], source="web"),
        bad(path, 3, derived + "3", HOSTILE_DETAIL["number"], lines[2], source="web"),
        bad(path, 4, "m", "text is missing", lines[3], source="web"),
        bad(path, 5, "n", "text is null", lines[4], source="web"),
        bad(path, 6, "i", "text is a JSON number, not a string", lines[5], source="web"),
        bad(path, 7, "l", "text is a JSON array, not a string", lines[6], source="web"),
        bad(path, 8, derived + "8", HOSTILE_DETAIL["latin-1 byte"], lines[7], source="web"),
        bad(path, 9, derived + "9", HOSTILE_DETAIL["utf-8 encoded surrogate"], lines[8], source="web"),
        bad(path, 10, "s", "text is not valid UTF-8 (lone surrogate)", lines[9], source="web"),
        bad(path, 11, derived + "11", "id is not valid UTF-8 (lone surrogate)", lines[10], source="web"),
        bad(path, 12, "w", "source is not valid UTF-8 (lone surrogate)", lines[11], source="web"),
        bad(path, 13, derived + "13", HOSTILE_DETAIL["raw NUL byte in a string"], lines[12], source="web"),
        bad(path, 14, derived + "14", HOSTILE_DETAIL["too deep"], lines[13], source="web"),
    ]
    deep = json.dumps({"m": nested(100)})
    assert r.docs == [
        doc(path, 0, "first", "first", source="web"),
        doc(path, 15, "z", "a\x00b", source="web"),  # NUL is a character: the reader keeps it
        doc(path, 16, "e", "\U0001F600", source="web"),
        doc(path, 17, "q", "ok", source="web", meta='{"note": "\\udc00"}'),  # kept as a JSON escape
        doc(path, 18, "d", "deep", source="web", meta=deep),
        doc(path, 19, "last", "last", source="web"),
    ]
    assert json.loads(r.docs[4]["meta"]) == {"m": nested(100)}
    assert r.chunk_records == [20]


def test_bad_record_keeps_its_own_source(tmp_path):
    path = write_jsonl(tmp_path / "s.jsonl", [{"id": "a", "text": None, "source": "books"},
                                              {"id": "b", "text": 1, "source": 5}])
    assert [(b["id"], b["source"]) for b in read(path, default_source="web").bad] == [("a", "books"),
                                                                                      ("b", "web")]


def test_bad_records_use_the_mapped_text_column_and_id(tmp_path):
    path = write_jsonl(tmp_path / "c.jsonl", [{"doc_id": 9, "text": "wrong column"}, {"doc_id": 10, "body": "ok"}])
    r = read(path, text="body", id="doc_id")
    assert r.bad == [bad(path, 0, "9", "text is missing", b'{"doc_id": 9, "text": "wrong column"}')]
    assert r.docs == [doc(path, 1, "10", "ok")]


def test_parquet_null_text(tmp_path):
    path = write_parquet(tmp_path / "n.parquet", {"id": ["a", "n", "c"], "text": ["alpha", None, "gamma"]})
    r = read(path)
    assert r.docs == [doc(path, 0, "a", "alpha"), doc(path, 2, "c", "gamma")]
    assert r.bad == [bad(path, 1, "n", "text is null", b'{"id": "n", "text": null}')]


def test_parquet_int_text_column_makes_every_row_bad(tmp_path):
    path = write_parquet(tmp_path / "i.parquet", {"id": ["a", None], "text": [1, 2], "source": ["web", None]})
    r = read(path, batch_rows=1)
    assert r.docs == []
    assert r.bad == [
        bad(path, 0, "a", "text is int64, not a string", b'{"id": "a", "text": 1, "source": "web"}', "web"),
        bad(path, 1, f"{path}#1", "text is int64, not a string", b'{"id": null, "text": 2, "source": null}'),
    ]
    assert r.chunk_records == [1, 1]


def test_parquet_invalid_utf8_text_keeps_the_exact_bytes(tmp_path):
    path = write_parquet(tmp_path / "u.parquet",
                         {"id": ["a", "b", "c"], "text": invalid_utf8_strings([b"alpha", b"caf\xe9", b"gamma"])})
    r = read(path)
    assert r.docs == [doc(path, 0, "a", "alpha"), doc(path, 2, "c", "gamma")]
    assert r.bad == [bad(path, 1, "b", "text is not valid UTF-8", b"caf\xe9")]


def test_parquet_invalid_utf8_in_another_column(tmp_path):
    path = write_parquet(tmp_path / "u.parquet", {"id": invalid_utf8_strings([b"a", b"b", b"\xffc"]),
                                                  "text": ["alpha", "beta", "gamma"],
                                                  "title": invalid_utf8_strings([b"t", b"\xc3(", b"t"])})
    r = read(path)
    assert r.docs == [doc(path, 0, "a", "alpha", meta='{"title": "t"}')]
    assert r.bad == [
        bad(path, 1, "b", "column 'title' is not valid UTF-8", b'{"id": "b", "text": "beta", "title": "\\\\xc3("}'),
        # an id that is not UTF-8 cannot be used: the id is derived
        bad(path, 2, f"{path}#2", "column 'id' is not valid UTF-8",
            b'{"id": "\\\\xffc", "text": "gamma", "title": "t"}'),
    ]


def test_parquet_nul_in_text_is_a_valid_document(tmp_path):
    path = write_parquet(tmp_path / "z.parquet", {"text": ["a\x00b", "\x00"]})
    assert read(path).docs == [doc(path, 0, f"{path}#0", "a\x00b"), doc(path, 1, f"{path}#1", "\x00")]


def test_parquet_binary_text_that_is_not_utf8(tmp_path):
    path = write_parquet(tmp_path / "b.parquet", {"text": pa.array([b"ok", b"\xfe\xff"], pa.binary())})
    r = read(path)
    assert r.docs == [doc(path, 0, f"{path}#0", "ok")]
    assert r.bad == [bad(path, 1, f"{path}#1", "text is not valid UTF-8", b"\xfe\xff")]


def test_parquet_deeply_nested_metadata_is_kept(tmp_path):
    deep = {"k": [{"k": [{"k": [{"k": [1]}]}]}]}
    path = write_parquet(tmp_path / "n.parquet", {"text": ["a"], "m": [deep]})
    assert json.loads(read(path).docs[0]["meta"]) == {"m": deep}


# ---------------------------------------------------------------------------------------------------------
# Files that cannot be read: InputFileError(path, one-line cause)


FILE_ERRORS = [
    ("t.jsonl.gz", truncated_gz,
     "cannot decompress or read (EOFError: Compressed file ended before the end-of-stream marker was reached)"),
    ("r.jsonl.gz", random_bytes,
     "cannot decompress or read (BadGzipFile: Not a gzipped file (b'8\\xb4'))"),
    ("r.jsonl.zst", random_bytes,
     "cannot decompress or read (ZstdError: zstd decompressor error: Unknown frame descriptor)"),
    ("t.jsonl.zst", truncated_zst,
     "cannot decompress or read (EOFError: compressed file ended before the end of a zstd frame (truncated?))"),
    ("cut.parquet", parquet_footer_cut,
     "not a readable Parquet file (ArrowInvalid: Parquet magic bytes not found in footer. Either the file is "
     "corrupted or this is not a parquet file.)"),
    ("empty.parquet", empty_file, "not a readable Parquet file (ArrowInvalid: Parquet file size is 0 bytes)"),
    ("r.parquet", random_bytes,
     "not a readable Parquet file (ArrowInvalid: Parquet magic bytes not found in footer. Either the file is "
     "corrupted or this is not a parquet file.)"),
    ("pages.parquet", parquet_corrupt_pages, "cannot read Parquet data at row 0 (OSError: Invalid BYTE_ARRAY value)"),
    ("notext.parquet", lambda p: write_parquet(p, {"id": ["a"], "body": ["b"]}),
     "no text column 'text' (columns: id, body): pass --text-column body (or set input.columns.text)"),
    ("twice.parquet",
     lambda p: pq.write_table(pa.Table.from_arrays([pa.array(["a"]), pa.array(["b"])], names=["text", "text"]), p),
     "repeated column name(s): text"),
    ("notes.txt", lambda p: p.write_text('{"text": "a"}\n'),
     "unsupported file type (expected .parquet, .arrow, .feather, .ipc, .jsonl, .json, .ndjson (each also .gz or "
     ".zst), .warc, .warc.gz or .wet.gz); a file of one JSON object per line is read when named .jsonl; plain "
     'text is not: write each document as {"text": ...} on a line of a .jsonl file'),
    ("table.csv.gz", lambda p: write_jsonl_gz(p, [{"text": "a"}]),
     "unsupported file type (expected .parquet, .arrow, .feather, .ipc, .jsonl, .json, .ndjson (each also .gz or "
     ".zst), .warc, .warc.gz or .wet.gz); convert it to Parquet first: python -c \"import pyarrow.csv as c, "
     "pyarrow.parquet as p; p.write_table(c.read_csv('{path}'), 'out.parquet')\""),
    ("gone.jsonl", lambda p: None, "not a file"),
]


@pytest.mark.parametrize("name, make, cause", FILE_ERRORS, ids=[e[0] for e in FILE_ERRORS])
def test_unreadable_file_raises_input_file_error(tmp_path, name, make, cause):
    path = tmp_path / name
    make(path)
    with pytest.raises(InputFileError) as exc:
        read(path)
    cause = cause.replace("{path}", str(path))
    assert exc.value.path == str(path)
    assert exc.value.cause == cause
    assert str(exc.value) == f"{path}: {cause}"


def test_truncated_gz_fails_even_after_good_chunks(tmp_path):
    path = truncated_gz(tmp_path / "t.jsonl.gz")
    chunks = read_shard(str(path), 0, batch_rows=10)
    assert next(chunks).n_records == 10  # the start of the file decompresses fine ...
    with pytest.raises(InputFileError):  # ... but the file as a whole is refused
        list(chunks)


@pytest.mark.parametrize("name, content", [("e.jsonl", b""), ("blank.jsonl", b"\n \n\r\n"), ("e.jsonl.gz", b"")])
def test_empty_jsonl_is_zero_records(tmp_path, name, content):
    path = tmp_path / name
    path.write_bytes(content)
    assert read(path) == Read([], [], [], [])


def test_parquet_with_no_rows_is_zero_records(tmp_path):
    path = write_parquet(tmp_path / "e.parquet", {"text": pa.array([], pa.string())})
    assert read(path) == Read([], [], [], [])


# ---------------------------------------------------------------------------------------------------------
# End to end through the CLI


def cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "dataclean.cli", *args], cwd=cwd, capture_output=True,
                          text=True, timeout=120)


def read_folder(folder: Path, columns: list[str]) -> list[dict]:
    files = sorted(glob.glob(os.path.join(folder, "*.parquet")))
    rows = [r for f in files for r in pq.read_table(f, columns=columns).to_pylist()]
    return sorted(rows, key=lambda r: (r["origin_file"], r["origin_row"]))


def test_cli_run_with_a_truncated_gz_and_bad_lines(tmp_path):
    inp = tmp_path / "in"
    write_parquet(inp / "a.parquet", {"id": ["p0", "p1"], "text": ["first parquet doc", "second parquet doc"]})
    write_jsonl(inp / "b.jsonl", [{"id": "j0", "text": "good jsonl doc"}, b"not json",
                                  {"id": "j2", "text": None}, HOSTILE_LINES["lone surrogate escape"],
                                  {"id": "j4", "text": "another good doc"}])
    truncated_gz(inp / "c.jsonl.gz")
    gz_error = ("error: cannot read in/c.jsonl.gz: cannot decompress or read (EOFError: Compressed file ended "
                "before the end-of-stream marker was reached)")

    foundation = str(Path(__file__).parent / "configs" / "foundation.yaml")
    run = cli("run", "in", "-o", "out", "--quiet", "--config", foundation, cwd=tmp_path)
    assert run.returncode == 1
    assert run.stderr.splitlines() == [gz_error]
    assert "Traceback" not in run.stdout + run.stderr
    assert run.stdout.startswith("7 records in: 4 kept, 3 removed (")
    assert "  removed by read: 3\n" in run.stdout

    out = tmp_path / "out"
    assert read_folder(out / "data", ["id", "text", "origin_file", "origin_row"]) == [
        {"id": "p0", "text": "first parquet doc", "origin_file": "in/a.parquet", "origin_row": 0},
        {"id": "p1", "text": "second parquet doc", "origin_file": "in/a.parquet", "origin_row": 1},
        {"id": "j0", "text": "good jsonl doc", "origin_file": "in/b.jsonl", "origin_row": 0},
        {"id": "j4", "text": "another good doc", "origin_file": "in/b.jsonl", "origin_row": 4},
    ]
    assert read_folder(out / "rejected", ["id", "source", "origin_file", "origin_row", "stage", "rule", "reason",
                                          "detail", "raw"]) == [
        {"id": "in/b.jsonl#1", "source": "unknown", "origin_file": "in/b.jsonl", "origin_row": 1, "stage": "read",
         "rule": "parse", "reason": "bad_record",
         "detail": "invalid JSON (JSONDecodeError: Expecting value: line 1 column 1 (char 0))", "raw": b"not json"},
        {"id": "j2", "source": "unknown", "origin_file": "in/b.jsonl", "origin_row": 2, "stage": "read",
         "rule": "parse", "reason": "bad_record", "detail": "text is null", "raw": b'{"id": "j2", "text": null}'},
        {"id": "s", "source": "unknown", "origin_file": "in/b.jsonl", "origin_row": 3, "stage": "read",
         "rule": "parse", "reason": "bad_record", "detail": "text is not valid UTF-8 (lone surrogate)",
         "raw": b'{"id": "s", "text": "\\ud800"}'},
    ]
    manifest = json.loads((out / "manifest.json").read_text())
    assert [(i["path"], i["status"]) for i in manifest["inputs"]] == [
        ("in/a.parquet", "ok"), ("in/b.jsonl", "ok"), ("in/c.jsonl.gz", "failed")]

    check = cli("verify", "out", cwd=tmp_path)
    assert (check.returncode, check.stderr) == (0, "")
    assert check.stdout == "ok: 7 records in = 4 kept + 3 removed; 4 shards readable, ids unique\n"

    again = cli("run", "in", "-o", "out", "--quiet", "--config", foundation, cwd=tmp_path)  # the failed file is tried again, and fails
    assert again.returncode == 1
    assert again.stderr.splitlines() == [gz_error]
    assert "Traceback" not in again.stdout + again.stderr
    assert again.stdout.startswith("7 records in: 4 kept, 3 removed (")
    assert cli("verify", "out", cwd=tmp_path).returncode == 0


def test_the_same_file_named_twice_is_read_once(tmp_path):
    """#25 item 6: relative and absolute path, or a symlink, to one file were read (and kept) twice."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "a.jsonl").write_text('{"text": "one document"}\n')
    os.symlink(data / "a.jsonl", data / "b.jsonl")
    notes: list[str] = []
    assert discover_inputs([str(data / "a.jsonl"), str(data)], notes) == [str(data / "a.jsonl")]
    assert notes == [f"{data / 'b.jsonl'} is the same file as {data / 'a.jsonl'}: read once"]
    res = cli("run", "data", str(data / "a.jsonl"), "-o", "out", "--quiet", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stderr.splitlines() == [f"note: data/a.jsonl is the same file as {data / 'a.jsonl'}: read once",
                                       f"note: data/b.jsonl is the same file as {data / 'a.jsonl'}: read once"]
    assert json.loads((tmp_path / "out" / "stats" / "summary.json").read_text())["input_records"] == 1
