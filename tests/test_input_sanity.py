"""Input sanity, through the real CLI: a wrong text column (or a file that is not JSON Lines) stops the run in
one line naming the file, the cause, its columns and the flag to pass, instead of a run that "succeeds" with
nothing kept; a run mostly of bad records finishes with a one-line warning. (exec/sanity.py)"""
from __future__ import annotations

import pyarrow as pa
import pytest

import dataclean
from conftest import run_cli
from hostile import write_jsonl, write_jsonl_gz, write_jsonl_zst, write_parquet

PROSE = ("The committee met on Tuesday to discuss the new library budget. After a long debate, the members "
         "agreed to extend the opening hours on weekends and to buy more books for children. The decision will "
         "be reviewed next spring, when the first figures on visitors are available.")
HINT = "pass --text-column content (or set input.columns.text)"
CONTENT_LINE = ("error: every record of in/{name} is a bad record (no 'text' field); its columns are id, content, "
                "source: " + HINT)


def dc_run(tmp_path, *args):
    """``dataclean run in -o out --quiet`` in ``tmp_path``, without the HTML report (not under test here; it costs
    ~3 s of a run's ~4)."""
    cfg = tmp_path / "no-report.yaml"
    cfg.write_text("output:\n  report: false\n")
    return run_cli("run", "in", "-o", "out", "--quiet", "--config", cfg, *args, cwd=tmp_path)


def content_records(n: int, start: int = 0) -> list[dict]:
    return [{"id": f"c{i}", "content": f"{PROSE} Item {i}.", "source": "web"} for i in range(start, start + n)]


def text_records(n: int, start: int = 0) -> list[dict]:
    return [{"id": f"t{i}", "text": f"{PROSE} Number {i}.", "source": "web"} for i in range(start, start + n)]


def stderr_lines(res) -> list[str]:
    assert "Traceback" not in res.stdout + res.stderr
    return res.stderr.splitlines()


@pytest.mark.parametrize("name, write", [("a.jsonl", write_jsonl), ("a.jsonl.gz", write_jsonl_gz),
                                         ("a.jsonl.zst", write_jsonl_zst)])
def test_text_in_content_stops_the_run_in_one_line(tmp_path, name, write):
    write(tmp_path / "in" / name, content_records(5))
    res = dc_run(tmp_path)
    assert res.returncode == 2, res.stderr
    assert stderr_lines(res) == [CONTENT_LINE.format(name=name)]
    assert res.stdout == ""
    assert not (tmp_path / "out").exists()  # stopped before anything was written: the fixed command just runs
    fixed = dc_run(tmp_path, "--text-column", "content")
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stdout.startswith("5 records in: ")


def test_two_files_one_all_bad_names_that_file(tmp_path):
    write_jsonl(tmp_path / "in" / "a.jsonl", text_records(4))
    write_jsonl(tmp_path / "in" / "b.jsonl", content_records(3))
    res = dc_run(tmp_path)
    assert res.returncode == 2, res.stderr
    assert stderr_lines(res) == [CONTENT_LINE.format(name="b.jsonl")]


def test_mix_of_good_and_bad_records_runs(tmp_path):
    write_jsonl(tmp_path / "in" / "a.jsonl", text_records(3) + content_records(2) + text_records(2, start=3))
    res = dc_run(tmp_path)
    assert res.returncode == 0, res.stderr
    assert stderr_lines(res) == []
    assert res.stdout.startswith("7 records in: ")


def test_bad_first_batch_with_good_records_later_runs(tmp_path):
    """The driver reads the first batch (256 records); a file that starts with 300 bad ones is read on, and
    its good records later on keep it from being stopped."""
    write_jsonl(tmp_path / "in" / "a.jsonl", content_records(300) + text_records(400))
    res = dc_run(tmp_path)
    assert res.returncode == 0, res.stderr
    assert stderr_lines(res) == []  # 300 of 700: not most
    assert res.stdout.startswith("700 records in: ")


def test_mostly_bad_run_finishes_with_a_warning(tmp_path):
    write_jsonl(tmp_path / "in" / "a.jsonl", text_records(100) + content_records(1100))
    res = dc_run(tmp_path)
    assert res.returncode == 0, res.stderr
    assert stderr_lines(res) == [
        "warning: 1,100 of 1,200 records (92%) are bad records: no 'text' field; " + HINT]
    assert res.stdout.startswith("1200 records in: ")
    again = dc_run(tmp_path)  # a finished run, rerun: same warning
    assert (again.returncode, stderr_lines(again)) == (0, stderr_lines(res))


def test_parquet_without_the_text_column_is_unreadable_with_the_hint(tmp_path):
    """A Parquet file without the text column stays an unreadable file (exit 1, the others processed)."""
    write_parquet(tmp_path / "in" / "a.parquet",
                  {"id": ["p0"], "content": [PROSE], "source": ["web"]})
    write_jsonl(tmp_path / "in" / "b.jsonl", text_records(2))
    res = dc_run(tmp_path)
    assert res.returncode == 1, res.stderr
    assert stderr_lines(res) == ["error: cannot read in/a.parquet: no text column 'text' (columns: id, content, "
                                 "source): " + HINT]
    assert res.stdout.startswith("2 records in: ")


def test_parquet_whose_text_is_null_or_not_a_string_stops(tmp_path):
    write_parquet(tmp_path / "in" / "a.parquet",
                  {"id": ["p0", "p1"], "text": pa.nulls(2, pa.string()), "body": [PROSE, PROSE]})
    res = dc_run(tmp_path)
    assert res.returncode == 2, res.stderr
    assert stderr_lines(res) == ["error: every record of in/a.parquet is a bad record ('text' is null); its "
                                 "columns are id, text, body: pass --text-column body (or set input.columns.text)"]
    write_parquet(tmp_path / "in" / "a.parquet", {"id": ["p0", "p1"], "text": [1, 2], "words": [PROSE, "a b"]})
    res = dc_run(tmp_path)
    assert res.returncode == 2, res.stderr
    assert stderr_lines(res) == ["error: every record of in/a.parquet is a bad record ('text' is int64, not a "
                                 "string); its columns are id, text, words: pass --text-column words (or set "
                                 "input.columns.text)"]


def test_a_file_that_is_not_json_lines_stops(tmp_path):
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "t.jsonl").write_text("id,text\n1,hello world\n2,another line\n")
    res = dc_run(tmp_path)
    assert res.returncode == 2, res.stderr
    assert stderr_lines(res) == ["error: every record of in/t.jsonl is a bad record (invalid JSON): check that it "
                                 "is JSON Lines (one JSON object per line)"]


@pytest.mark.parametrize("write, what, suffix", [(write_jsonl_gz, "gzip", ".gz"), (write_jsonl_zst, "zstd", ".zst")])
def test_a_compressed_file_named_jsonl_says_to_name_it_so(tmp_path, write, what, suffix):
    """Not UTF-8 because it is compressed: the fix is the name, not converting to UTF-8."""
    write(tmp_path / "in" / "t.jsonl", content_records(3))
    res = dc_run(tmp_path)
    assert res.returncode == 2, res.stderr
    assert stderr_lines(res) == [f"error: every record of in/t.jsonl is a bad record (not valid UTF-8): it is "
                                 f"{what}-compressed: name it t.jsonl{suffix}"]


def test_an_id_column_no_input_has_stops_in_one_line(tmp_path):
    """--id-column with a typo would derive every id (FILE#ROW) in silence; named but found in no input, it
    stops the run. The right name runs, its ids taken from the column."""
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"doc_id": f"d{i}", "text": f"{PROSE} Item {i}."} for i in range(3)])
    res = dc_run(tmp_path, "--id-column", "docid")
    assert res.returncode == 2, res.stderr
    assert stderr_lines(res) == ["error: id column 'docid': no record of in/a.jsonl has it (its columns: text, "
                                 "doc_id): pass --id-column with one of them (or set input.columns.id; without "
                                 "one, ids are FILE#ROW)"]
    res = dc_run(tmp_path, "--id-column", "doc_id")
    assert res.returncode == 0, res.stderr
    import pyarrow.parquet as pq  # (kept and removed documents alike carry the ids read from doc_id)

    ids = [i for folder in ("data", "rejected") for p in sorted((tmp_path / "out" / folder).glob("*.parquet"))
           for i in pq.read_table(p, columns=["id"]).column("id").to_pylist()]
    assert sorted(ids) == ["d0", "d1", "d2"]


def test_library_raises_run_error(tmp_path):
    write_jsonl(tmp_path / "a.jsonl", content_records(3))
    with pytest.raises(dataclean.RunError) as exc:
        dataclean.run([str(tmp_path / "a.jsonl")], str(tmp_path / "out"))
    assert str(exc.value) == (f"every record of {tmp_path / 'a.jsonl'} is a bad record (no 'text' field); its "
                              "columns are id, content, source: " + HINT)


def test_after_pass_1_a_file_of_bad_records_stops(tmp_path, monkeypatch):
    """The same from pass 1's counts (the driver's first look skipped here), before the global step."""
    from dataclean.exec import sanity

    monkeypatch.setattr(sanity, "check_first_batches", lambda files, mapping, **options: None)
    write_jsonl(tmp_path / "a.jsonl", text_records(2))
    write_jsonl(tmp_path / "b.jsonl", content_records(3))
    out = tmp_path / "out"
    with pytest.raises(sanity.InputSanityError) as exc:
        dataclean.run([str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")], str(out))
    assert str(exc.value) == (f"every record of {tmp_path / 'b.jsonl'} is a bad record (no 'text' field); its "
                              f"columns are id, content, source: {HINT} (and --fresh: {out} holds this stopped run)")
    assert not (out / "manifest.json").exists() and not list((out / "data").glob("*.parquet"))


def test_messages_suggest_the_column_that_looks_like_text():
    from dataclean.exec.sanity import all_bad_message
    from dataclean.io.readers import ColumnMapping

    recs = [{"id": "1", "title": "Short", "blob": PROSE, "n": 3}]
    assert all_bad_message("f.jsonl", "text is missing", recs, ColumnMapping()) == (
        "every record of f.jsonl is a bad record (no 'text' field); its columns are id, title, blob, n: "
        "pass --text-column blob (or set input.columns.text)")
    assert all_bad_message("f.jsonl", "text is missing", [{"id": "1", "n": 2}], ColumnMapping()) == (
        "every record of f.jsonl is a bad record (no 'text' field); its columns are id, n: "
        "pass --text-column COLUMN (or set input.columns.text)")
