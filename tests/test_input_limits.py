"""Issue 25 ("Unbreakable"): inputs that cannot be listed or read are named, not skipped in silence; a record over
``input.max_record_bytes`` is one bad record, never held whole, its neighbours kept; a file that changes while
it is read fails with one line (dataclean/io/readers.py, dataclean/io/streams.py, dataclean/exec/tasks.py)."""
from __future__ import annotations

import glob
import io
import json
import os
import tracemalloc
import zlib
from pathlib import Path

import pyarrow.parquet as pq
import pytest
import yaml
import zstandard

import dataclean
from dataclean.exec import tasks
from dataclean.io import readers
from dataclean.io.readers import (DEFAULT_MAX_RECORD_BYTES, LEDGER_SCHEMA, MAX_RAW_BYTES, ColumnMapping,
                                  discover_inputs, read_shard)
from dataclean.io.streams import capped_lines
from hostile import jsonl_bytes, write_jsonl, write_jsonl_gz, write_jsonl_zst, write_parquet

REPO = Path(__file__).resolve().parent.parent


def _permissions_apply() -> bool:
    """Whether a folder of mode 000 cannot be listed here (not so for root, unless it runs without
    CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH: ``setpriv --bounding-set=-dac_override,-dac_read_search``)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        os.chmod(tmp, 0)
        try:
            os.listdir(tmp)
            return False
        except PermissionError:
            return True
        finally:
            os.chmod(tmp, 0o700)

# ---------------------------------------------------------------------------------------------------------
# discover_inputs(..., errors=[...])


@pytest.fixture()
def folder(tmp_path) -> Path:
    """in/ with two good files, a dangling symlink, a symlink loop, a symlink to a good file, a dangling
    symlink whose name is not an input's (never looked at), and a hidden dangling one."""
    root = tmp_path / "in"
    write_jsonl(root / "a.jsonl", [{"text": "a"}])
    write_jsonl(root / "sub" / "b.jsonl", [{"text": "b"}])
    os.symlink(root / "gone.jsonl", root / "dangling.jsonl")
    os.symlink("loop.jsonl", root / "loop.jsonl")
    os.symlink("../a.jsonl", root / "sub" / "link.jsonl")
    os.symlink(root / "gone", root / "notes.txt")
    os.symlink(root / "gone", root / ".hidden.jsonl")
    return root


def test_dangling_symlink_and_symlink_loop_are_errors_and_the_rest_is_found(folder):
    errors: list[str] = []
    notes: list[str] = []
    assert discover_inputs([str(folder)], notes, errors) == [f"{folder}/a.jsonl", f"{folder}/sub/b.jsonl"]
    assert errors == [f"{folder}/dangling.jsonl: dangling symlink", f"{folder}/loop.jsonl: symlink loop"]
    assert notes == [f"{folder}/sub/link.jsonl is the same file as {folder}/a.jsonl: read once"]


def test_without_errors_the_entries_are_listed_as_before(folder):
    """errors=None: the old behaviour (the entries are listed; reading them fails)."""
    assert discover_inputs([str(folder)]) == [
        f"{folder}/a.jsonl", f"{folder}/dangling.jsonl", f"{folder}/loop.jsonl", f"{folder}/sub/b.jsonl"]


def test_globs_name_their_bad_matches_too(folder):
    errors: list[str] = []
    assert discover_inputs([f"{folder}/**/*.jsonl"], errors=errors) == [f"{folder}/a.jsonl", f"{folder}/sub/b.jsonl"]
    assert errors == [f"{folder}/dangling.jsonl: dangling symlink", f"{folder}/loop.jsonl: symlink loop"]


def test_a_named_dangling_symlink_or_loop_is_an_error_and_a_missing_input_still_raises(folder, tmp_path):
    errors: list[str] = []
    specs = [str(folder / "loop.jsonl"), str(folder / "dangling.jsonl"), str(folder / "a.jsonl")]
    assert discover_inputs(specs, errors=errors) == [f"{folder}/a.jsonl"]
    assert errors == [f"{folder}/loop.jsonl: symlink loop", f"{folder}/dangling.jsonl: dangling symlink"]
    for errs in (None, []):
        with pytest.raises(FileNotFoundError) as exc:
            discover_inputs([str(tmp_path / "typo.jsonl")], errors=errs)
        assert str(exc.value) == f"input not found: {tmp_path}/typo.jsonl"
        assert errs in (None, [])


def test_errors_are_not_repeated_when_two_specs_reach_the_same_entry(folder):
    errors = [f"{folder}/loop.jsonl: symlink loop"]  # already reported by the caller
    discover_inputs([str(folder), f"{folder}/*.jsonl"], errors=errors)
    assert errors == [f"{folder}/loop.jsonl: symlink loop", f"{folder}/dangling.jsonl: dangling symlink"]


def _deny(monkeypatch, *names: str) -> None:
    """os.scandir of a folder named one of ``names`` raises PermissionError, as for a folder of mode 000 when
    not root (root may list anything)."""
    real = os.scandir

    def scandir(path="."):
        if os.path.basename(os.path.normpath(os.fspath(path))) in names:
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real(path)

    monkeypatch.setattr(os, "scandir", scandir)


def test_an_unlistable_folder_is_an_error_and_the_rest_is_found(folder, monkeypatch):
    write_jsonl(folder / "locked" / "c.jsonl", [{"text": "c"}])
    write_jsonl(folder / "locked2" / "deep" / "d.jsonl", [{"text": "d"}])
    write_jsonl(folder / "_work" / "e.jsonl", [{"text": "e"}])  # never an input: not looked at
    _deny(monkeypatch, "locked", "deep", "_work")
    errors: list[str] = []
    assert discover_inputs([str(folder)], errors=errors) == [f"{folder}/a.jsonl", f"{folder}/sub/b.jsonl"]
    assert errors == [f"{folder}/dangling.jsonl: dangling symlink", f"{folder}/locked: permission denied",
                      f"{folder}/locked2/deep: permission denied", f"{folder}/loop.jsonl: symlink loop"]
    assert discover_inputs([str(folder)]) == [  # errors=None: skipped in silence, as os.walk did
        f"{folder}/a.jsonl", f"{folder}/dangling.jsonl", f"{folder}/loop.jsonl", f"{folder}/sub/b.jsonl"]


def test_an_unlistable_folder_below_a_glob_is_an_error(folder, monkeypatch):
    write_jsonl(folder / "locked" / "c.jsonl", [{"text": "c"}])
    _deny(monkeypatch, "locked")
    errors: list[str] = []
    assert discover_inputs([f"{folder}/*/*.jsonl"], errors=errors) == [f"{folder}/sub/b.jsonl",
                                                                       f"{folder}/sub/link.jsonl"]
    assert errors == [f"{folder}/locked: permission denied"]
    errors = []
    assert discover_inputs([f"{folder}/**/*.jsonl"], errors=errors) == [f"{folder}/a.jsonl", f"{folder}/sub/b.jsonl"]
    assert errors == [f"{folder}/dangling.jsonl: dangling symlink", f"{folder}/locked: permission denied",
                      f"{folder}/loop.jsonl: symlink loop"]
    errors = []  # nothing matched because the folder cannot be listed: said so, not "input not found"
    assert discover_inputs([f"{folder}/locked/*.jsonl"], errors=errors) == []
    assert errors == [f"{folder}/locked: permission denied"]
    errors = []  # a file named inside it is found by name (no listing needed), as glob does
    assert discover_inputs([f"{folder}/lock*/c.jsonl"], errors=errors) == [f"{folder}/locked/c.jsonl"]
    assert errors == []


def test_an_unreadable_file_is_an_error(folder, monkeypatch):
    real = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: not str(p).endswith("b.jsonl") and real(p, mode))
    errors: list[str] = []
    assert discover_inputs([str(folder / "sub")], errors=errors) == [f"{folder}/sub/link.jsonl"]
    assert errors == [f"{folder}/sub/b.jsonl: permission denied"]


def test_a_name_that_is_not_a_regular_file_is_an_error(folder):
    os.mkfifo(folder / "sub" / "pipe.jsonl")
    errors: list[str] = []
    assert discover_inputs([str(folder / "sub")], errors=errors) == [f"{folder}/sub/b.jsonl",
                                                                    f"{folder}/sub/link.jsonl"]
    assert errors == [f"{folder}/sub/pipe.jsonl: not a regular file"]


@pytest.mark.skipif(not _permissions_apply(), reason="root lists and reads folders and files of mode 000")
def test_real_permissions(folder):
    write_jsonl(folder / "locked" / "c.jsonl", [{"text": "c"}])
    write_jsonl(folder / "unreadable.jsonl", [{"text": "u"}])
    os.chmod(folder / "unreadable.jsonl", 0)
    os.chmod(folder / "locked", 0)
    try:
        errors: list[str] = []
        assert discover_inputs([str(folder)], errors=errors) == [f"{folder}/a.jsonl", f"{folder}/sub/b.jsonl"]
        assert errors == [f"{folder}/dangling.jsonl: dangling symlink", f"{folder}/locked: permission denied",
                          f"{folder}/loop.jsonl: symlink loop", f"{folder}/unreadable.jsonl: permission denied"]
    finally:
        os.chmod(folder / "locked", 0o755)


# ---------------------------------------------------------------------------------------------------------
# input.max_record_bytes


CAP = 1000
GOOD0 = {"id": "g0", "text": "the record before"}
BIG = {"id": "big", "text": "x" * 2000}  # 2,025 bytes as JSON
GOOD2 = {"id": "g2", "text": "the record after"}
BIG_BYTES = json.dumps(BIG).encode()


def read(path: Path, cap: int = CAP, batch_rows: int = 4096, **mapping):
    chunks = list(read_shard(str(path), 0, ColumnMapping(**mapping), batch_rows, max_record_bytes=cap))
    for c in chunks:
        assert c.bad is None or c.bad.schema == LEDGER_SCHEMA
        assert c.n_records == c.docs.num_rows + (c.bad.num_rows if c.bad is not None else 0)
    docs = [(r["id"], r["text"], r["origin_row"]) for c in chunks for r in c.docs.to_pylist()]
    bad = [r for c in chunks if c.bad is not None for r in c.bad.to_pylist()]
    return docs, bad


def bad_row(path: Path, row: int, detail: str, raw: bytes, id: str | None = None, source: str = "unknown") -> dict:
    return {"id": id or f"{path}#{row}", "source": source, "lang": None, "url": None, "meta": None,
            "origin_file": str(path), "origin_row": row, "stage": "read", "rule": "parse", "reason": "bad_record",
            "value": None, "threshold": None, "detail": detail, "dup_of": None, "n_chars": None, "n_tokens": None,
            "text": None, "raw": raw}


WRITERS = {"a.jsonl": write_jsonl, "a.jsonl.gz": write_jsonl_gz, "a.jsonl.zst": write_jsonl_zst}


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_an_oversized_jsonl_record_is_one_bad_record_between_its_neighbours(tmp_path, name):
    path = WRITERS[name](tmp_path / name, [GOOD0, BIG, GOOD2])
    docs, bad = read(path)
    assert docs == [("g0", "the record before", 0), ("g2", "the record after", 2)]
    assert bad == [bad_row(path, 1, "record of 2,025 bytes exceeds input.max_record_bytes 1,000", BIG_BYTES[:1000])]


def test_the_cap_counts_the_line_without_its_end(tmp_path):
    at_cap = {"id": "c", "text": "y" * (CAP - len('{"id": "c", "text": ""}'))}
    over = {"id": "o", "text": "y" * (CAP + 1 - len('{"id": "o", "text": ""}'))}
    assert len(json.dumps(at_cap)) == CAP and len(json.dumps(over)) == CAP + 1
    path = tmp_path / "a.jsonl"
    path.write_bytes(json.dumps(at_cap).encode() + b"\r\n" + json.dumps(over).encode() + b"\r\n"
                     + json.dumps(GOOD2).encode())  # the last line without its end
    docs, bad = read(path)
    assert [d[0] for d in docs] == ["c", "g2"]
    assert bad == [bad_row(path, 1, "record of 1,001 bytes exceeds input.max_record_bytes 1,000",
                           json.dumps(over).encode()[:1000])]


def test_an_oversized_last_line_without_its_end(tmp_path):
    path = tmp_path / "a.jsonl"
    path.write_bytes(jsonl_bytes([GOOD0]) + BIG_BYTES)
    docs, bad = read(path)
    assert docs == [("g0", "the record before", 0)]
    assert bad == [bad_row(path, 1, "record of 2,025 bytes exceeds input.max_record_bytes 1,000", BIG_BYTES[:1000])]


def test_the_raw_of_an_oversized_record_is_its_first_64_kib(tmp_path):
    big = {"id": "big", "text": "z" * 300_000}
    path = write_jsonl(tmp_path / "a.jsonl", [GOOD0, big, GOOD2])
    docs, bad = read(path, cap=100_000)
    assert [d[0] for d in docs] == ["g0", "g2"]
    assert [(b["origin_row"], b["detail"], b["raw"]) for b in bad] == [
        (1, "record of 300,025 bytes exceeds input.max_record_bytes 100,000", json.dumps(big).encode()[:65536])]
    assert MAX_RAW_BYTES == 65536


def test_the_default_cap_is_256_mib_and_in_the_default_config():
    cfg = yaml.safe_load((REPO / "rules" / "default.yaml").read_text())
    assert cfg["input"]["max_record_bytes"] == DEFAULT_MAX_RECORD_BYTES == 256 << 20


def test_a_cap_that_is_not_a_positive_integer_is_refused(tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", [GOOD0])
    for cap in (0, -1, 1.5, True):
        with pytest.raises(ValueError, match="max_record_bytes: must be a positive integer"):
            list(read_shard(str(path), 0, max_record_bytes=cap))


def _gzip_zero_line(path: Path, zeros: int) -> Path:
    """GOOD0, one line of ``zeros`` NUL bytes, GOOD2: gzip-compressed as it is made (nothing big in memory)."""
    co = zlib.compressobj(6, zlib.DEFLATED, 31)
    block = b"\0" * (1 << 20)
    with open(path, "wb") as fh:
        fh.write(co.compress(jsonl_bytes([GOOD0])))
        for _ in range(zeros >> 20):
            fh.write(co.compress(block))
        fh.write(co.compress(b"\n" + jsonl_bytes([GOOD2])))
        fh.write(co.flush())
    return path


def test_a_gzip_bomb_line_is_skipped_at_the_cap_without_being_held(tmp_path):
    """48 MiB of zeros in one line of a 48 KB .jsonl.gz: one bad record; read without holding the line (the
    peak of Python allocations stays far below it); the next record is kept."""
    path = _gzip_zero_line(tmp_path / "bomb.jsonl.gz", 48 << 20)
    assert path.stat().st_size < 100_000
    tracemalloc.start()
    try:
        docs, bad = read(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert docs == [("g0", "the record before", 0), ("g2", "the record after", 2)]
    assert bad == [bad_row(path, 1, "record of 50,331,648 bytes exceeds input.max_record_bytes 1,000", b"\0" * 1000)]
    assert peak < 8 << 20, peak


def test_a_zstd_bomb_line_is_skipped_at_the_cap(tmp_path):
    path = tmp_path / "bomb.jsonl.zst"
    cctx = zstandard.ZstdCompressor().compressobj()
    path.write_bytes(cctx.compress(jsonl_bytes([GOOD0])) + b"".join(cctx.compress(b"\0" * (1 << 20)) for _ in range(48))
                     + cctx.compress(b"\n" + jsonl_bytes([GOOD2])) + cctx.flush())
    docs, bad = read(path)
    assert docs == [("g0", "the record before", 0), ("g2", "the record after", 2)]
    assert bad == [bad_row(path, 1, "record of 50,331,648 bytes exceeds input.max_record_bytes 1,000", b"\0" * 1000)]


def test_capped_lines_holds_at_most_the_cap_of_a_line():
    asked: list[int] = []

    class Reader(io.BufferedReader):
        def readline(self, size=-1):
            asked.append(size)
            return super().readline(size)

    data = b"ab\n" + b"c" * 50 + b"\r\n" + b"d" * 9 + b"\r\n\n" + b"e" * 20
    lines = list(capped_lines(Reader(io.BytesIO(data)), 10, 4))
    assert lines == [(b"ab\n", None), (b"cccc", 50), (b"d" * 9 + b"\r\n", None), (b"\n", None), (b"eeee", 20)]
    assert max(asked) == 1 << 20 and all(a in (12, 1 << 20) for a in asked)


def test_an_oversized_parquet_value_is_one_bad_record(tmp_path):
    path = write_parquet(tmp_path / "a.parquet", {"id": ["g0", "big", "g2", "wide"],
                                                  "text": ["the record before", "x" * 2000, "the record after",
                                                           "short"],
                                                  "source": ["web", "books", None, "web"],
                                                  "blob": [b"", None, b"", b"\1" * 990]})
    docs, bad = read(path)
    assert docs == [("g0", "the record before", 0), ("g2", "the record after", 2)]
    assert bad == [  # the bytes of all its string and binary values
        bad_row(path, 1, "record of 2,008 bytes exceeds input.max_record_bytes 1,000", b"x" * 1000, "big", "books"),
        bad_row(path, 3, "record of 1,002 bytes exceeds input.max_record_bytes 1,000", b"short", "wide", "web")]


def test_an_oversized_parquet_value_among_other_bad_rows_and_batches(tmp_path):
    path = write_parquet(tmp_path / "a.parquet", {"id": ["g0", "null", "big", "g3"],
                                                  "text": ["before", None, "x" * 5000, "after"]})
    docs, bad = read(path, batch_rows=2)
    assert docs == [("g0", "before", 0), ("g3", "after", 3)]
    assert [(b["origin_row"], b["id"], b["detail"], len(b["raw"])) for b in bad] == [
        (1, "null", "text is null", len(b'{"id": "null", "text": null}')),
        (2, "big", "record of 5,003 bytes exceeds input.max_record_bytes 1,000", 1000)]


def test_an_oversized_wet_document_is_one_bad_record(tmp_path):
    pytest.importorskip("fastwarc")
    from warcio.warcwriter import WARCWriter

    path = tmp_path / "a.wet"
    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=False)
        for i, text in enumerate(["the page before", "é" * 600, "the page after"]):
            rec = w.create_warc_record(f"https://example.com/{i}", "conversion",
                                       payload=io.BytesIO(text.encode()),
                                       warc_headers_dict={"WARC-Record-ID": f"<urn:uuid:{i}>",
                                                          "Content-Type": "text/plain"})
            w.write_record(rec)
    docs, bad = read(path)
    assert [(d[0], d[1]) for d in docs] == [("<urn:uuid:0>", "the page before"), ("<urn:uuid:2>", "the page after")]
    assert [(b["origin_row"], b["id"], b["detail"], b["raw"]) for b in bad] == [
        (1, "<urn:uuid:1>", "record of 1,200 bytes exceeds input.max_record_bytes 1,000", "é".encode() * 500)]


# ---------------------------------------------------------------------------------------------------------
# Through a run: the config's cap reaches the readers; a file that changes while it is read


def _config(tmp_path: Path, **input_section) -> Path:
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump({"pipeline": [{"stage": "normalize"}, {"stage": "exact_dedup"}],
                                   "input": input_section, "output": {"report": False}}))
    return cfg


def _ledger(out: Path) -> list[tuple]:
    rows = [r for f in sorted(glob.glob(str(out / "rejected" / "*.parquet")))
            for r in pq.read_table(f, columns=["origin_file", "origin_row", "reason", "detail"]).to_pylist()]
    return sorted((r["origin_file"], r["origin_row"], r["reason"], r["detail"]) for r in rows)


def _kept(out: Path) -> list[str]:
    return sorted(r for f in glob.glob(str(out / "data" / "*.parquet"))
                  for r in pq.read_table(f, columns=["id"]).column("id").to_pylist())


def test_the_configs_cap_reaches_the_readers(tmp_path):
    inp = tmp_path / "in"
    for name, write in WRITERS.items():
        write(inp / name, [{"id": f"{name}-0", "text": f"before in {name}"}, BIG,
                           {"id": f"{name}-2", "text": f"after in {name}"}])
    write_parquet(inp / "a.parquet", {"id": ["p0", "pbig", "p2"], "text": ["before in parquet", "x" * 2000,
                                                                        "after in parquet"]})
    out = tmp_path / "out"
    summary = dataclean.run([str(inp)], str(out), config=str(_config(tmp_path, max_record_bytes=CAP)))
    assert summary.failed_inputs == []
    assert (summary.input_records, summary.kept, summary.removed) == (12, 8, 4)
    assert _kept(out) == sorted(f"{n}-{i}" for n in WRITERS for i in (0, 2)) + ["p0", "p2"]
    detail = "record of {:,} bytes exceeds input.max_record_bytes 1,000"
    assert _ledger(out) == [(f"{inp}/a.jsonl", 1, "bad_record", detail.format(2025)),
                            (f"{inp}/a.jsonl.gz", 1, "bad_record", detail.format(2025)),
                            (f"{inp}/a.jsonl.zst", 1, "bad_record", detail.format(2025)),
                            (f"{inp}/a.parquet", 1, "bad_record", detail.format(2004))]


def _appending_after_the_read(monkeypatch, victim: Path, extra: bytes) -> None:
    """tasks.read_shard, except that once ``victim`` is read, ``extra`` is appended to it (another process
    still writing it), before the task looks at the file again."""
    real = tasks.read_shard

    def read_then_append(path, *args, **kwargs):
        yield from real(path, *args, **kwargs)
        if path == str(victim):
            with open(path, "ab") as fh:
                fh.write(extra)

    monkeypatch.setattr(tasks, "read_shard", read_then_append)


def test_a_file_appended_to_while_it_is_read_fails_with_one_line(tmp_path, monkeypatch):
    inp = tmp_path / "in"
    a = write_jsonl(inp / "a.jsonl", [{"id": "a0", "text": "one document of a"}])
    b = write_jsonl(inp / "b.jsonl", [{"id": "b0", "text": "one document of b"}])
    a_size, a_mtime = a.stat().st_size, a.stat().st_mtime_ns
    b_size = b.stat().st_size
    extra = jsonl_bytes([{"id": "b1", "text": "written while b was read"}])
    _appending_after_the_read(monkeypatch, b, extra)
    out = tmp_path / "out"
    summary = dataclean.run([str(inp)], str(out), config=str(_config(tmp_path)), workers=1)
    error = f"{b}: changed while it was read (size {b_size} -> {b_size + len(extra)}); rerun when it is complete"
    assert summary.failed_inputs == [{"input": str(b), "error": error}]
    assert (summary.input_records, summary.kept) == (1, 1)
    assert _kept(out) == ["a0"]
    manifest = json.loads((out / "manifest.json").read_text())
    assert [(i["path"], i["status"], i.get("size"), i.get("mtime_ns"), i.get("error")) for i in manifest["inputs"]] == [
        (str(a), "ok", a_size, a_mtime, None), (str(b), "failed", None, None, error)]


def test_the_changed_file_causes(tmp_path):
    path = write_jsonl(tmp_path / "a.jsonl", [GOOD0])
    before = (path.stat().st_size, path.stat().st_mtime_ns)
    assert tasks._checksum_unchanged(str(path), before).startswith("xxh3_128:")
    os.utime(path, ns=(before[1] + 10**9, before[1] + 10**9))
    with pytest.raises(readers.InputFileError) as exc:
        tasks._checksum_unchanged(str(path), before)
    assert str(exc.value) == (f"{path}: changed while it was read (modified, size {before[0]}); "
                              "rerun when it is complete")
    path.unlink()
    with pytest.raises(readers.InputFileError) as exc:
        tasks._checksum_unchanged(str(path), before)
    assert str(exc.value) == f"{path}: changed while it was read (removed); rerun when it is complete"
