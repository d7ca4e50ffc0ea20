"""One large Parquet file as several pass-1 tasks (input.split_mb): the pieces, their reads, and a run whose
data/, rejected/, dedup/ and stats/ are byte for byte those of the same file read as one task."""
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import folder_bytes, run_cli
from dataclean.io.readers import _piece_batches, parquet_pieces, read_shard
from dataclean.io.writers import ShardWriter, content_bytes

EN = ["The river rose after three days of rain, and the bridge was closed to traffic.",
      "Our library opens at nine on weekdays and at ten on Saturdays.",
      "She repaired the old clock with parts she found in a drawer in the attic.",
      "The committee will publish its report on school meals next month.",
      "Bake the bread for forty minutes, then let it cool on a rack before slicing."]
ZH = ["这条河在连续下了三天雨之后涨水了，大桥因此封闭。", "图书馆工作日早上九点开门，周六十点开门。",
      "她用在阁楼抽屉里找到的零件修好了那座旧钟。", "委员会将在下个月发布关于学校午餐的报告。",
      "面包烤四十分钟，然后放在架子上晾凉再切。"]


def _docs(n: int) -> list[dict]:
    """``n`` documents of 5 sentences each, English and Chinese by turns; every 7th repeats an earlier one
    (exact duplicates across pieces)."""
    out = []
    for i in range(n):
        pool = EN if i % 2 == 0 else ZH
        sep = " " if pool is EN else ""
        text = sep.join(pool[(i + k) % 5] for k in range(5)) + f" {i}"
        if i % 7 == 6:
            text = out[i // 2]["text"]
        out.append({"id": f"d{i:05d}", "text": text, "source": "web"})
    return out


@pytest.fixture
def big_file(tmp_path):
    path = tmp_path / "big.parquet"
    pq.write_table(pa.Table.from_pylist(_docs(6000)), path, row_group_size=250)
    return path


def test_pieces_are_whole_batches_and_cover_the_file(big_file):
    meta = pq.read_metadata(big_file)
    total = sum(meta.row_group(i).total_byte_size for i in range(meta.num_row_groups))
    pieces = parquet_pieces(str(big_file), total // 4, 128)
    assert pieces == [(0, 1408), (1408, 2816), (2816, 4224), (4224, 6000)]
    assert all(start % 128 == 0 for start, _ in pieces)
    assert parquet_pieces(str(big_file), 0, 128) is None  # off
    assert parquet_pieces(str(big_file), total * 2, 128) is None  # smaller than one piece


def test_a_piece_reads_the_batches_of_a_whole_file_read(big_file):
    pf = pq.ParquetFile(big_file)
    whole = [b.column("id").to_pylist() for b in pf.iter_batches(batch_size=128)]
    pieces = [(0, 1408), (1408, 2816), (2816, 4224), (4224, 6000)]
    cut = [b.column("id").to_pylist() for piece in pieces for b in _piece_batches(pf, piece, 128)]
    assert cut == whole
    # the rows keep their numbers (and derived ids) in the whole file
    [first] = list(read_shard(str(big_file), 3, batch_rows=5000, rows=(4224, 6000)))[:1]
    assert first.docs.column("origin_row")[0].as_py() == 4224
    assert first.docs.column("doc_key")[0].as_py() == (3 << 40) | 4224


def test_a_row_range_of_a_jsonl_file_is_refused(tmp_path):
    path = tmp_path / "x.jsonl"
    path.write_text('{"text": "a"}\n')
    with pytest.raises(ValueError, match="a row range is for Parquet files"):
        next(read_shard(str(path), 0, rows=(0, 1)))


def test_shard_bytes_do_not_depend_on_the_batches_written(tmp_path):
    table = pa.Table.from_pylist(_docs(900))
    for name, sizes in (("one", [900]), ("many", [1, 99, 300, 7, 493])):
        w = ShardWriter(str(tmp_path / name), "part", table.schema, max_rows=500, max_bytes=30_000,
                        row_group_rows=64)
        at = 0
        for n in sizes:
            w.write(table.slice(at, n))
            at += n
        w.commit()
    one, many = folder_bytes(tmp_path, "one"), folder_bytes(tmp_path, "many")
    assert [k.split("/")[-1] for k in one] == [f"part-{i:05d}.parquet" for i in range(len(one))]
    # closed by bytes, at row-group ends: two groups of 64 rows (about 23 kB of values each) pass 30,000 bytes
    assert [pq.read_metadata(tmp_path / k).num_rows for k in one] == [128] * 7 + [4]
    assert list(one.values()) == list(many.values())
    assert content_bytes(pa.array(["ab", None, "中"])) == 4 * 3 + 2 + 3


def _whole_and_split(tmp_path, path) -> tuple[dict, list[dict]]:
    """Run ``path`` with splitting off and on (1 MiB pieces), 2 workers, 128-row batches: the product files
    of each (data/, rejected/, dedup/, stats/) and the manifest entry of the input in each."""
    outs, entries = {}, []
    for split in (0, 1):
        out = tmp_path / f"out{split}"
        r = run_cli("run", path, "-o", out, "--workers", "2", "--quiet", "--set", "output.report=false",
                    "--set", f"input.split_mb={split}", "--set", "input.batch_rows=128", timeout=600)
        assert r.returncode == 0, r.stderr
        outs[split] = folder_bytes(out, "data", "rejected", "dedup", "stats")
        [entry] = json.loads((out / "manifest.json").read_text())["inputs"]
        entries.append(entry)
    return outs, entries


def test_a_file_cut_into_pieces_gives_the_bytes_of_a_whole_read(tmp_path, big_file):
    outs, entries = _whole_and_split(tmp_path, big_file)
    for entry in entries:
        assert (entry["records"], entry["status"]) == (6000, "ok")
    assert outs[0] == outs[1]
    removed = pq.read_table(tmp_path / "out1/rejected").to_pydict()
    dups = [(i, d) for i, r, d in zip(removed["id"], removed["rule"], removed["dup_of"]) if r == "exact_duplicate"]
    assert ("d05998", "d02999") in dups  # a copy in the last piece of a document in an earlier one


def test_a_large_file_read_as_one_task_by_idle_workers_gets_a_note(tmp_path, big_file):
    from dataclean.config import resolve_config
    from dataclean.exec.runner import _one_task_notes
    from dataclean.sections import InputSection

    big_json = tmp_path / "big.json"
    line = json.dumps({"text": EN[0]}) + "\n"
    big_json.write_text(line * (17_000_000 // len(line) + 1))
    small = tmp_path / "small.jsonl"
    small.write_text(line)
    inp = InputSection.of(resolve_config({}))
    [note] = _one_task_notes([str(big_json), str(small)], [(0,), (1,)], inp, 2)
    assert note == (f"{big_json} (17 MB) was read as one task, by 1 of the 2 workers: a .json file may be one "
                    "JSON array; rename it .jsonl if it is JSON Lines")
    assert _one_task_notes([str(big_json)], [(0, 1)], inp, 2) == []  # (cut into pieces)
    off = InputSection.of(resolve_config({"input": {"split_mb": 0}}))
    assert _one_task_notes([str(big_file)], [(0,)], off, 2) == []  # small on disk
    big_jsonl = tmp_path / "big.jsonl"
    big_json.rename(big_jsonl)
    [note] = _one_task_notes([str(big_jsonl)], [(0,)], off, 2)
    assert note.endswith("by 1 of the 2 workers: input.split_mb is 0; set it (16) to cut it into pieces")
    assert _one_task_notes([str(big_jsonl)], [(0,)], inp, 2) == []  # (small enough for one task)


# --------------------------------------------------------------------------------------------------------
# JSON Lines: byte spans at chunk ends

def _jsonl_bytes(docs: list[dict]) -> bytes:
    """``docs`` as JSON Lines with what real files hold: CRLF line ends, blank and space-only lines, an
    indented record, a line that is not JSON, and no line end after the last record."""
    out = []
    for i, d in enumerate(docs):
        line = json.dumps(d, ensure_ascii=False)
        if i % 11 == 3:
            out.append("\n")
        if i % 13 == 5:
            out.append("  \t\r\n")
        if i % 17 == 9:
            line = "  " + line
        if i % 19 == 2:
            out.append(f"not json {i}\n")
        out.append(line + ("\r\n" if i % 3 == 0 else "\n"))
    return "".join(out).rstrip("\r\n").encode("utf-8")


def test_jsonl_pieces_end_at_the_chunk_ends_of_a_whole_read(tmp_path, monkeypatch):
    from dataclean.io import pieces, readers

    path = tmp_path / "big.jsonl"
    path.write_bytes(_jsonl_bytes(_docs(600)))
    monkeypatch.setattr(pieces, "SCAN_BYTES", 4096)  # lines across scan blocks
    size = path.stat().st_size
    cut = pieces.jsonl_pieces(str(path), size // 4, 32, 1 << 30, 1 << 20)
    assert [(s, e) for s, e, _ in cut] == [(0, 58738), (58738, 117713), (117713, 176740), (176740, 232540)]
    assert [line for _, _, line in cut] == [0, 186, 371, 557]
    assert cut[-1][1] == size and all(a[1] == b[0] for a, b in zip(cut, cut[1:]))
    assert pieces.jsonl_pieces(str(path), 0, 32, 1 << 30, 1 << 20) is None  # off
    assert pieces.jsonl_pieces(str(path), size, 32, 1 << 30, 1 << 20) is None  # one piece

    def chunks(**kw):
        return [(c.docs.to_pydict(), c.bad.to_pydict() if c.bad is not None else None)
                for c in readers.read_shard(str(path), 2, batch_rows=32, **kw)]

    assert [c for span in cut for c in chunks(span=span)] == chunks()
    # a chunk also ends at 64 MiB of record lines; here at 2,000 bytes
    monkeypatch.setattr(readers, "MAX_CHUNK_TEXT_BYTES", 2000)
    by_bytes = pieces.jsonl_pieces(str(path), size // 3, 32, 2000, 1 << 20)
    assert len(by_bytes) == 3
    assert [c for span in by_bytes for c in chunks(span=span)] == chunks()
    [first] = list(readers.read_shard(str(path), 2, batch_rows=5000, span=cut[1]))[:1]
    assert first.docs.column("origin_row")[0].as_py() == 186  # line numbers of the whole file
    assert first.docs.column("id")[0].as_py() == "d00152"  # (5 chunks of 32 records: 152 documents, 8 bad lines)


def test_a_byte_range_of_a_compressed_file_is_refused(tmp_path):
    path = tmp_path / "x.jsonl.gz"
    path.write_bytes(b"")
    with pytest.raises(ValueError, match="a byte range is for local, uncompressed JSON Lines files"):
        next(read_shard(str(path), 0, span=(0, 1, 0)))


def test_a_jsonl_file_cut_into_pieces_gives_the_bytes_of_a_whole_read(tmp_path):
    path = tmp_path / "big.jsonl"
    path.write_bytes(_jsonl_bytes(_docs(9000)))
    outs, entries = _whole_and_split(tmp_path, path)
    for entry in entries:
        assert (entry["records"], entry["bad_records"], entry["status"]) == (9474, 474, "ok")
    assert outs[0] == outs[1]
    tasks = sorted(p.name for p in (tmp_path / "out1/_work/markers").glob("pass1-*.json"))
    assert tasks == ["pass1-00000.json", "pass1-00001.json", "pass1-00002.json"]
    removed = pq.read_table(tmp_path / "out1/rejected").to_pydict()
    dups = [(i, d) for i, r, d in zip(removed["id"], removed["rule"], removed["dup_of"]) if r == "exact_duplicate"]
    assert ("d08994", "d04497") in dups  # a copy in the last piece of a document in the second
