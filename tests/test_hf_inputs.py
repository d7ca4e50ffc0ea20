"""Hugging Face and Arrow inputs (issue 24): Arrow IPC files and streams, ``save_to_disk`` folders, JSON-array
``.json`` files, and the input's extra columns carried to data/ in their own Arrow types.

The ``save_to_disk`` folders are built here with pyarrow exactly as ``datasets`` writes them (checked against
``datasets`` 5.2.0's own ``Dataset.save_to_disk(path, num_shards=2)``): each shard ``data-0000K-of-0000N.arrow``
is an Arrow IPC *stream* (``ArrowWriter`` uses ``pa.RecordBatchStreamWriter``; the file starts with the
continuation marker ``ff ff ff ff``, not ``ARROW1``) whose schema carries a ``huggingface`` metadata key;
beside them ``state.json`` lists the shards under ``_data_files`` (``[{"filename": ...}]``) and
``dataset_info.json`` describes the features. So the tests need no ``datasets`` package.
"""
from __future__ import annotations

import datetime
import glob
import gzip
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.feather as feather
import pyarrow.parquet as pq
import pytest
import zstandard

from conftest import REPO, folder_bytes, run_cli
from dataclean.io.readers import ColumnMapping, InputFileError, discover_inputs, read_shard

FOUNDATION = REPO / "tests" / "configs" / "foundation.yaml"

EN = [
    "The library opens at nine in the morning and closes at six in the evening on weekdays.",
    "A small bakery on the corner sells fresh bread, butter croissants and strong black coffee.",
    "Rain fell over the hills all night, and by dawn the river had risen above its stone banks.",
]
ZH = [
    "今天早上我们一起去公园散步，看见湖边开满了桃花，空气非常清新。",
    "这家小书店开在老街的拐角，店主每天都会推荐一本新书给来访的读者。",
]

EXTRA_SCHEMA = pa.schema([
    ("text", pa.string()), ("id", pa.string()),
    ("info", pa.struct([("lang_hint", pa.string()), ("stars", pa.int64())])),
    ("tags", pa.list_(pa.string())),
    ("crawled", pa.timestamp("us")),
])


def ts(day: int) -> datetime.datetime:
    return datetime.datetime(2024, 3, day, 12, 30, 15)


def rows_en_zh() -> list[dict]:
    """Five documents (three English, two Chinese), each with struct, list and timestamp extras."""
    texts = EN + ZH
    langs = ["en", "en", "en", "zh", "zh"]
    return [{"text": t, "id": f"doc-{i}", "info": {"lang_hint": langs[i], "stars": i + 1},
             "tags": [langs[i], f"t{i}"] if i % 2 == 0 else [], "crawled": ts(i + 1)} for i, t in enumerate(texts)]


def write_stream(path: Path, rows: list[dict], schema: pa.Schema = EXTRA_SCHEMA, batch_rows: int = 2) -> None:
    """An Arrow IPC stream, as ``datasets``' ArrowWriter writes a shard (record batches of ``batch_rows``)."""
    schema = schema.with_metadata({"huggingface": json.dumps({"info": {"features": {}}})})
    table = pa.Table.from_pylist(rows, schema=schema)
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
        for batch in table.to_batches(max_chunksize=batch_rows):
            writer.write_batch(batch)


def write_save_to_disk(folder: Path, shards: list[list[dict]], order: list[int] | None = None) -> list[Path]:
    """A ``Dataset.save_to_disk(folder, num_shards=len(shards))`` folder; ``order``: the shards' order in
    ``state.json`` (default: their number order, as ``datasets`` writes it)."""
    folder.mkdir(parents=True)
    n = len(shards)
    paths = [folder / f"data-{k:05d}-of-{n:05d}.arrow" for k in range(n)]
    for path, rows in zip(paths, shards):
        write_stream(path, rows)
    order = order if order is not None else list(range(n))
    (folder / "state.json").write_text(json.dumps({
        "_data_files": [{"filename": paths[k].name} for k in order], "_fingerprint": "93a67e8bee4667bf",
        "_format_columns": None, "_format_kwargs": {}, "_format_type": None, "_output_all_columns": False,
        "_split": None}, indent=2))
    (folder / "dataset_info.json").write_text(json.dumps({
        "citation": "", "description": "", "homepage": "", "license": "",
        "features": {"text": {"dtype": "string", "_type": "Value"}}}, indent=2))
    return paths


def data_table(out: Path) -> pa.Table:
    """data/ of a run, its shards in name order (task order)."""
    return pa.concat_tables([pq.read_table(p) for p in sorted(glob.glob(str(out / "data" / "*.parquet")))])


def ledger(out: Path) -> list[dict]:
    return [r for p in sorted(glob.glob(str(out / "rejected" / "*.parquet"))) for r in pq.read_table(p).to_pylist()]


def read_all(path: Path, batch_rows: int = 4096, max_record_bytes: int = 256 << 20, **mapping):
    chunks = list(read_shard(str(path), 0, ColumnMapping(**mapping), batch_rows, max_record_bytes))
    for c in chunks:
        assert c.n_records == c.docs.num_rows + (c.bad.num_rows if c.bad is not None else 0)
        assert c.extra is None or c.extra.num_rows == c.docs.num_rows
    docs = [r for c in chunks for r in c.docs.to_pylist()]
    bad = [r for c in chunks if c.bad is not None for r in c.bad.to_pylist()]
    extra = [r for c in chunks if c.extra is not None for r in c.extra.to_pylist()]
    return chunks, docs, bad, extra


# --------------------------------------------------------------------------------------------------------
# save_to_disk folders, end to end


def test_save_to_disk_folder_is_read_with_its_extra_columns_typed(tmp_path):
    rows = rows_en_zh()
    rows.append(dict(rows[0], id="doc-5"))  # an exact duplicate of doc-0: removed by exact_dedup
    write_save_to_disk(tmp_path / "ds", [rows[:3], rows[3:]])
    out1, out2 = tmp_path / "out1", tmp_path / "out2"
    proc = run_cli("run", tmp_path / "ds", "-o", out1, "--config", FOUNDATION, "--workers", 1, "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "6 records in: 5 kept, 1 removed" in proc.stdout  # state.json, dataset_info.json: no records
    assert "no report.html" not in proc.stderr and (out1 / "report.html").is_file()
    data = data_table(out1)
    for name, typ in [("info", EXTRA_SCHEMA.field("info").type), ("tags", pa.list_(pa.string())),
                      ("crawled", pa.timestamp("us"))]:
        assert data.schema.field(name).type == typ
        assert data.schema.field(name).metadata == {b"dataclean.extra": b"input"}
    got = data.select(["id", "text", "info", "tags", "crawled", "origin_file", "origin_row"]).to_pylist()
    shard0, shard1 = (str(tmp_path / "ds" / f"data-0000{k}-of-00002.arrow") for k in (0, 1))
    assert got == [
        {"id": "doc-0", "text": EN[0], "info": {"lang_hint": "en", "stars": 1}, "tags": ["en", "t0"],
         "crawled": ts(1), "origin_file": shard0, "origin_row": 0},
        {"id": "doc-1", "text": EN[1], "info": {"lang_hint": "en", "stars": 2}, "tags": [], "crawled": ts(2),
         "origin_file": shard0, "origin_row": 1},
        {"id": "doc-2", "text": EN[2], "info": {"lang_hint": "en", "stars": 3}, "tags": ["en", "t2"],
         "crawled": ts(3), "origin_file": shard0, "origin_row": 2},
        {"id": "doc-3", "text": ZH[0], "info": {"lang_hint": "zh", "stars": 4}, "tags": [], "crawled": ts(4),
         "origin_file": shard1, "origin_row": 0},
        {"id": "doc-4", "text": ZH[1], "info": {"lang_hint": "zh", "stars": 5}, "tags": ["zh", "t4"],
         "crawled": ts(5), "origin_file": shard1, "origin_row": 1},
    ]
    # the meta column still holds the same values as JSON (what the stages and the ledger see)
    assert json.loads(data.column("meta")[3].as_py()) == {"crawled": "2024-03-04 12:30:15",
                                                         "info": {"lang_hint": "zh", "stars": 4}, "tags": []}
    assert [(r["id"], r["reason"]) for r in ledger(out1)] == [("doc-5", "exact_duplicate")]
    # same bytes with two workers
    proc = run_cli("run", tmp_path / "ds", "-o", out2, "--config", FOUNDATION, "--workers", 2, "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert folder_bytes(out1, "data", "rejected") == folder_bytes(out2, "data", "rejected")


def test_save_to_disk_shards_follow_state_json_and_metadata_is_not_input(tmp_path):
    ds = tmp_path / "ds"
    paths = write_save_to_disk(ds, [rows_en_zh()[:2], rows_en_zh()[2:]], order=[1, 0])
    (tmp_path / "notes.json").write_text('[{"text": "a note"}]')  # a JSON file outside the dataset folder
    errors: list[str] = []
    assert discover_inputs([str(tmp_path)], errors=errors) == [str(paths[1]), str(paths[0]),
                                                               str(tmp_path / "notes.json")]
    assert errors == []
    assert discover_inputs([ds.as_uri()]) == [paths[1].as_uri(), paths[0].as_uri()]  # a URI folder alike
    # named on its own, a metadata file is read (and fails loudly as a record, not silently)
    assert discover_inputs([str(ds / "state.json")]) == [str(ds / "state.json")]
    # a shard state.json lists but the folder lacks: one line, not a silent gap in the dataset
    paths[0].unlink()
    errors = []
    assert discover_inputs([str(ds)], errors=errors) == [str(paths[1])]
    assert errors == [f"{paths[0]}: listed in state.json but missing"]
    proc = run_cli("run", ds, "-o", tmp_path / "out", "--config", FOUNDATION, "--quiet")
    assert proc.returncode == 1
    assert "3 records in: 3 kept, 0 removed" in proc.stdout
    assert f"error: cannot read {paths[0]}: listed in state.json but missing" in proc.stderr.splitlines()


def test_dataset_dict_folder_reads_every_split(tmp_path):
    root = tmp_path / "dd"
    write_save_to_disk(root / "train", [rows_en_zh()[:3]])
    write_save_to_disk(root / "test", [rows_en_zh()[3:]])
    (root / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "test"]}))
    assert discover_inputs([str(root)]) == [str(root / "test" / "data-00000-of-00001.arrow"),
                                            str(root / "train" / "data-00000-of-00001.arrow")]


# --------------------------------------------------------------------------------------------------------
# Arrow IPC files and streams


@pytest.mark.parametrize("name, write, chunks", [
    ("docs.arrow", lambda p, t: _write_ipc_file(p, t), [2, 1, 2]),  # file batches of 3 and 2, cut to 2 rows
    ("docs.feather", lambda p, t: feather.write_feather(t, str(p)), [2, 2, 1]),  # v2: an IPC file, lz4 buffers
    ("docs.ipc", lambda p, t: write_stream(p, t.to_pylist()), [2, 2, 1]),  # a stream of batches of 2
])
def test_ipc_file_and_stream_read_with_types(tmp_path, name, write, chunks):
    path = tmp_path / name
    write(path, pa.Table.from_pylist(rows_en_zh(), schema=EXTRA_SCHEMA))
    expected_chunks = chunks
    chunks, docs, bad, extra = read_all(path, batch_rows=2)
    assert [c.n_records for c in chunks] == expected_chunks
    assert bad == []
    assert [(d["id"], d["text"], d["origin_row"]) for d in docs] == \
        [(f"doc-{i}", t, i) for i, t in enumerate(EN + ZH)]
    assert chunks[0].extra.schema.field("info").type == EXTRA_SCHEMA.field("info").type
    assert chunks[0].extra.schema.field("crawled").type == pa.timestamp("us")
    assert extra == [{k: v for k, v in r.items() if k not in ("text", "id")} for r in rows_en_zh()]


def _write_ipc_file(path: Path, table: pa.Table) -> None:
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table, max_chunksize=3)


def test_arrow_column_mapping_cap_and_missing_text_column(tmp_path):
    path = tmp_path / "mapped.arrow"
    big = "长" * 200  # 600 bytes of UTF-8
    table = pa.table({"content": ["Short English text here.", big, "短中文文本。"], "doc_id": ["e1", "z-big", "z1"],
                      "score": [0.5, 0.25, 0.75]})
    _write_ipc_file(path, table)
    _, docs, bad, extra = read_all(path, max_record_bytes=500, text="content", id="doc_id")
    assert [(d["id"], d["text"]) for d in docs] == [("e1", "Short English text here."), ("z1", "短中文文本。")]
    assert extra == [{"score": 0.5}, {"score": 0.75}]
    assert [(b["id"], b["origin_row"], b["detail"]) for b in bad] == \
        [("z-big", 1, "record of 605 bytes exceeds input.max_record_bytes 500")]
    with pytest.raises(InputFileError) as exc:
        read_all(path)
    assert exc.value.cause == ("no text column 'text' (columns: content, doc_id, score): "
                               "pass --text-column content (or set input.columns.text)")


def test_feather_v1_and_garbage_fail_in_one_line(tmp_path):
    v1 = tmp_path / "old.feather"
    v1.write_bytes(b"FEA1" + b"\0" * 60)
    with pytest.raises(InputFileError) as exc:
        read_all(v1)
    assert exc.value.cause == ("a Feather version 1 file, which is not Arrow IPC: rewrite it with "
                               "pyarrow.feather.write_feather(table, path) (version 2)")
    junk = tmp_path / "junk.arrow"
    junk.write_bytes(b"this is not arrow at all")
    with pytest.raises(InputFileError) as exc:
        read_all(junk)
    assert exc.value.cause.startswith("not an Arrow IPC file or stream (")
    assert "\n" not in str(exc.value)


# --------------------------------------------------------------------------------------------------------
# JSON arrays


def json_array_text(records: list, broken_at: int | None = None) -> str:
    """A pretty-printed JSON array (as ``json.dump(records, f, indent=2)``), element ``broken_at`` replaced by
    an object with a trailing comma (invalid JSON)."""
    parts = [json.dumps(r, ensure_ascii=False, indent=2) for r in records]
    if broken_at is not None:
        parts[broken_at] = '{"text": "broken element", "id": "bad-1",}'
    return "[\n" + ",\n".join(parts) + "\n]\n"


def test_json_array_file_records_and_one_bad_element(tmp_path):
    records = [{"text": t, "id": f"j{i}", "info": {"n": i}, "tags": ["x"] * i} for i, t in enumerate(EN + ZH)]
    path = tmp_path / "docs.json"
    path.write_text(json_array_text(records[:2] + [{}] + records[2:], broken_at=2), encoding="utf-8")
    _, docs, bad, extra = read_all(path)
    assert [(d["id"], d["text"], d["origin_row"]) for d in docs] == \
        [("j0", EN[0], 0), ("j1", EN[1], 1), ("j2", EN[2], 3), ("j3", ZH[0], 4), ("j4", ZH[1], 5)]
    assert [(b["origin_row"], b["raw"]) for b in bad] == [(2, b'{"text": "broken element", "id": "bad-1",}')]
    assert bad[0]["detail"].startswith("invalid JSON (JSONDecodeError: Expecting property name")
    assert extra == [{"info": {"n": i}, "tags": ["x"] * i} for i in range(5)]
    # end to end: every element counted, the bad one in the ledger
    out = tmp_path / "out"
    proc = run_cli("run", path, "-o", out, "--config", FOUNDATION, "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert "6 records in: 5 kept, 1 removed" in proc.stdout
    assert [(r["origin_row"], r["reason"]) for r in ledger(out)] == [(2, "bad_record")]
    data = data_table(out)
    assert data.schema.field("info").type == pa.struct([("n", pa.int64())])
    assert data.schema.field("tags").type == pa.list_(pa.string())
    assert data.column("tags").to_pylist() == [[], ["x"], ["x", "x"], ["x"] * 3, ["x"] * 4]


def test_json_array_streams_across_blocks_and_compressed(tmp_path):
    # ~2.5 MiB: elements straddle the reader's 1 MiB blocks; strings hold brackets, commas, quotes, escapes
    records = [{"text": f"第{i}行 [a, b] {{c}} \"quoted\" back\\slash, " + "词" * (i % 600), "id": f"r{i}"}
               for i in range(3000)]
    path = tmp_path / "big.json"
    path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf-8")
    assert path.stat().st_size > 2 << 20
    _, docs, bad, _ = read_all(path)
    assert bad == []
    assert [d["text"] for d in docs] == [r["text"] for r in records]
    gz = tmp_path / "small.json.gz"
    with gzip.open(gz, "wt", encoding="utf-8") as fh:
        fh.write("\ufeff  " + json.dumps([{"text": ZH[0]}, "not an object", {"text": EN[0]}], ensure_ascii=False))
    _, docs, bad, _ = read_all(gz)
    assert [d["text"] for d in docs] == [ZH[0], EN[0]]
    assert [(b["origin_row"], b["detail"]) for b in bad] == [(1, "record is a JSON string, not an object")]


def test_json_array_truncated_and_oversized_elements(tmp_path):
    path = tmp_path / "cut.json"
    path.write_text('[{"text": "first one"}, {"text": "x' + "y" * 300 + '"}, {"text": "cut her', encoding="utf-8")
    _, docs, bad, _ = read_all(path, max_record_bytes=200)
    assert [d["text"] for d in docs] == ["first one"]
    assert [(b["origin_row"], b["detail"]) for b in bad] == [
        (1, "record of 314 bytes exceeds input.max_record_bytes 200"),
        (2, "the array ends inside this element (truncated file?)")]
    assert bad[1]["raw"] == b'{"text": "cut her'
    odd = tmp_path / "odd.json"
    odd.write_text('[{"text": "一"},, {"text": "二"},]  trailing words', encoding="utf-8")
    _, docs, bad, _ = read_all(odd)
    assert [(d["text"], d["origin_row"]) for d in docs] == [("一", 0), ("二", 2)]
    assert [(b["origin_row"], b["detail"], b["raw"]) for b in bad] == [
        (1, "empty element", b""), (3, "empty element", b""),
        (4, "text after the end of the JSON array", b"trailing words")]


@pytest.mark.parametrize("name", ["lines.json", "lines.json.zst", "lines.ndjson.gz", "lines.ndjson.zst"])
def test_json_lines_in_a_json_file_still_read_as_lines(tmp_path, name):
    path = tmp_path / name
    body = (json.dumps({"text": EN[0], "tags": ["a"]}) + "\n" +
            json.dumps({"text": ZH[0], "tags": []}, ensure_ascii=False) + "\n").encode("utf-8")
    if name.endswith(".gz"):
        body = gzip.compress(body)
    elif name.endswith(".zst"):
        body = zstandard.ZstdCompressor().compress(body)
    path.write_bytes(body)
    chunks, docs, bad, extra = read_all(path)
    assert [(d["text"], d["origin_row"]) for d in docs] == [(EN[0], 0), (ZH[0], 1)]
    assert bad == []
    assert chunks[0].extra.schema.field("tags").type == pa.list_(pa.string())
    assert extra == [{"tags": ["a"]}, {"tags": []}]


# --------------------------------------------------------------------------------------------------------
# Extra columns whose types disagree across files


def test_type_conflict_across_files_unifies_or_falls_back_to_json(tmp_path):
    inputs = tmp_path / "in"
    inputs.mkdir()
    pq.write_table(pa.table({"text": EN[:2], "score": pa.array([1, 2], pa.int64()),
                             "label": pa.array([7, 8], pa.int64()), "maybe": pa.nulls(2),
                             "info": pa.array([{"n": 1}, {"n": 2}])}), inputs / "a.parquet")
    (inputs / "b.jsonl").write_text(
        "\n".join(json.dumps(r, ensure_ascii=False) for r in [
            {"text": ZH[0], "score": 2.5, "label": "好", "mixed": 1, "maybe": "是", "info": {"n": 3, "m": "x"}},
            {"text": ZH[1], "score": 3.5, "label": "ok", "mixed": "one", "info": {"n": 4, "m": "y"}}]) + "\n",
        encoding="utf-8")
    out = tmp_path / "out"
    proc = run_cli("run", inputs, "-o", out, "--config", FOUNDATION, "--workers", 2, "--quiet")
    assert proc.returncode == 0, proc.stderr
    a, b = inputs / "a.parquet", inputs / "b.jsonl"
    warnings = [line for line in proc.stderr.splitlines() if line.startswith("warning: extra column")]
    assert warnings == [
        f"warning: extra column 'label' is int64 in {a} but string in {b}: written to data/ as JSON text "
        "(no common type)",
        f"warning: extra column 'mixed' holds values of more than one JSON type in {b}: written to data/ as "
        "JSON text",
    ]
    data = data_table(out)
    assert data.schema.field("score").type == pa.float64()  # int64 and double unify
    assert data.schema.field("label").type == pa.string()
    assert data.schema.field("mixed").type == pa.string()  # a.parquet lacks it: null there
    assert data.schema.field("maybe").type == pa.string()  # null in a.parquet, strings in b.jsonl
    assert data.schema.field("info").type == pa.struct([("n", pa.int64()), ("m", pa.string())])  # merged
    assert data.select(["text", "score", "label", "mixed", "maybe", "info"]).to_pylist() == [
        {"text": EN[0], "score": 1.0, "label": "7", "mixed": None, "maybe": None, "info": {"n": 1, "m": None}},
        {"text": EN[1], "score": 2.0, "label": "8", "mixed": None, "maybe": None, "info": {"n": 2, "m": None}},
        {"text": ZH[0], "score": 2.5, "label": '"好"', "mixed": "1", "maybe": "是", "info": {"n": 3, "m": "x"}},
        {"text": ZH[1], "score": 3.5, "label": '"ok"', "mixed": '"one"', "maybe": None,
         "info": {"n": 4, "m": "y"}},
    ]
    # one worker: the same bytes
    out1 = tmp_path / "out1"
    proc = run_cli("run", inputs, "-o", out1, "--config", FOUNDATION, "--workers", 1, "--quiet")
    assert proc.returncode == 0, proc.stderr
    assert folder_bytes(out, "data") == folder_bytes(out1, "data")


def test_extra_column_named_like_an_output_column_stays_in_meta(tmp_path):
    path = tmp_path / "clash.parquet"
    pq.write_table(pa.table({"text": [EN[0]], "lang": ["en-GB"], "n_chars": [3], "topic": ["weather"]}), path)
    out = tmp_path / "out"
    proc = run_cli("run", path, "-o", out, "--config", FOUNDATION, "--quiet")
    assert proc.returncode == 0, proc.stderr
    row = data_table(out).to_pylist()[0]
    assert row["lang"] is None and row["n_chars"] == len(EN[0]) and row["topic"] == "weather"
    assert json.loads(row["meta"]) == {"lang": "en-GB", "n_chars": 3, "topic": "weather"}


def test_json_values_without_one_type_are_json_text(tmp_path):
    path = tmp_path / "odd.jsonl"
    path.write_text("\n".join(json.dumps(r, ensure_ascii=False) for r in [
        {"text": EN[0], "big": 2 ** 70, "empty": {}, "n": 1, "none": None},
        {"text": ZH[0], "big": 1, "empty": {}, "n": 2.5, "none": None}]) + "\n", encoding="utf-8")
    chunks, _, _, extra = read_all(path)
    schema = chunks[0].extra.schema
    assert [(f.name, f.type, f.metadata) for f in schema] == [
        ("big", pa.string(), {b"dataclean.extra": b"json"}),  # past int64
        ("empty", pa.string(), {b"dataclean.extra": b"json"}),  # Parquet has no empty struct
        ("n", pa.float64(), None),
        ("none", pa.null(), None)]
    assert extra == [{"big": str(2 ** 70), "empty": "{}", "n": 1.0, "none": None},
                     {"big": "1", "empty": "{}", "n": 2.5, "none": None}]
