"""Terminal safety: a file name or data value printed by any command cannot act on the terminal.

An escape sequence in a file name or a source name (``ESC ] 0;title BEL`` retitles the window, ``ESC [ 2J``
clears it, C1 ``0x9b`` is CSI in one character) or a bidi control (U+202E makes ``\\u202egpj.exe`` show as
``exe.jpg``) is printed as U+FFFD, by the one escaping function ``dataclean.audit.terminal.safe``: in error
lines, in the run's summary, and in ``stats``, ``sql`` and ``inspect``. JSON output keeps the values, with
those characters as ``\\uXXXX`` escapes. (Rich markup in names: tests/test_safety.py.)
"""
from __future__ import annotations

import json
import re

import pytest

from conftest import REPO, run_cli
from dataclean.audit import terminal
from hostile import write_jsonl

FOUNDATION = REPO / "tests" / "configs" / "foundation.yaml"
R = "\ufffd"
#: What must never reach the terminal raw (written out here, not taken from the code under test): C0 controls
#: but tab and newline, DEL, C1 controls, bidi controls, lone surrogates.
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")

BAD_INPUT = "a\x1b]0;pwned\x07\u202e.jsonl.gz"  # an unreadable input: ESC ] 0;pwned BEL (sets the title), then RLO
OUT = "out\x1b]2;t\x07\u202e"  # (no "[": DuckDB reads it in a path as a glob)
SOURCES = ["web\x1b]0;pwned\x07", "\u202egpj.exe", "c1\x9b2J"]
IDS = ["id\x1b[2J", "id\u202e2", "id3"]


@pytest.fixture(scope="module")
def hostile_run(tmp_path_factory):
    """A run of three documents with hostile source names and ids, and an unreadable input of a hostile
    name, into an output folder of a hostile name."""
    root = tmp_path_factory.mktemp("hostile_names")
    write_jsonl(root / "in" / "good.jsonl", [{"id": i, "text": f"document {n} of a source with a hostile name",
                                              "source": s} for n, (i, s) in enumerate(zip(IDS, SOURCES))])
    (root / "in" / BAD_INPUT).write_bytes(b"not gzip at all")
    (root / "cfg.yaml").write_text(FOUNDATION.read_text() + "output:\n  report: false\n")
    res = run_cli("run", "in", "-o", OUT, "--config", "cfg.yaml", "--quiet", cwd=root)
    return root, res


def test_safe_neutralises_escape_sequences_c1_bidi_and_surrogates():
    assert terminal.safe("a\x1b]0;pwned\x07b") == f"a{R}]0;pwned{R}b"  # OSC: ESC ] ... BEL
    assert terminal.safe("\x1b[2J\x1b[31mred") == f"{R}[2J{R}[31mred"  # CSI
    assert terminal.safe("\x9b2J \x9d0;t\x9c \x85 \x7f") == f"{R}2J {R}0;t{R} {R} {R}"  # C1 CSI, OSC, ST, NEL; DEL
    bidi = "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069\u200e\u200f\u061c"
    assert terminal.safe(f"x{bidi}y") == "x" + R * 12 + "y"
    assert terminal.safe("in\udcff.jsonl") == f"in{R}.jsonl"  # a file name of bytes that are not UTF-8
    assert terminal.safe("line 1\n\tline 2\r") == f"line 1\n\tline 2{R}"  # newline and tab stay, CR does not
    assert terminal.safe("a\nb", line=True) == f"a{R}b"  # one line
    kept = "café 大家 مرحبا עברית 👍\u200d\u200b"  # letters of every direction, ZWJ and ZWSP stay
    assert terminal.safe(kept) == kept
    assert terminal.safe({"k\x1b": ["\u202e", ("\x07",)]}) == {f"k{R}": [R, (R,)]}


def test_safe_json_escapes_and_keeps_every_value():
    value = {"source\x1b]0;x\x07": ["\u202egpj.exe", "c1\x9b", "\ud800", "café\n"]}
    text = terminal.safe_json(json.dumps(value, ensure_ascii=False))
    assert not RAW.search(text)
    assert text == ('{"source\\u001b]0;x\\u0007": ["\\u202egpj.exe", "c1\\u009b", "\\ud800", "café\\n"]}')
    assert json.loads(text) == value


def test_run_prints_hostile_file_and_source_names_escaped(hostile_run):
    root, res = hostile_run
    assert res.returncode == 1, res.stderr  # one input could not be read
    assert res.stderr.splitlines() == [
        f"error: cannot read in/a{R}]0;pwned{R}{R}.jsonl.gz: cannot decompress or read "
        "(BadGzipFile: Not a gzipped file (b'no'))"]
    lines = res.stdout.splitlines()
    assert re.fullmatch(r"3 records in: 3 kept, 0 removed \(\d+\.\d s\)", lines[0])
    out = f"out{R}]2;t{R}{R}"
    assert lines[1:] == [f"sources: c1{R}2J = web (1), web{R}]0;pwned{R} = web (1), {R}gpj.exe = web (1)",
                         f"cleaned data: {out}/data/   ledger: {out}/rejected/   stats: {out}/stats/summary.json"]
    assert not RAW.search(res.stdout + res.stderr)


def test_stats_escapes_source_names(hostile_run):
    root, _ = hostile_run
    res = run_cli("stats", OUT, cwd=root)
    assert res.returncode == 0, res.stderr
    assert not RAW.search(res.stdout)
    assert res.stdout.splitlines()[0] == f"run: out{R}]2;t{R}{R}"
    for shown in (f"web{R}]0;pwned{R}", f"{R}gpj.exe", f"c1{R}2J"):
        assert shown in res.stdout


def test_stats_json_escapes_and_keeps_the_names(hostile_run):
    root, _ = hostile_run
    res = run_cli("stats", OUT, "--format", "json", cwd=root)
    assert res.returncode == 0, res.stderr
    assert not RAW.search(res.stdout)
    assert "web\\u001b]0;pwned\\u0007" in res.stdout and "\\u202egpj.exe" in res.stdout
    stats = json.loads(res.stdout)
    assert stats["out"] == OUT and sorted(r["source"] for r in stats["sources"]) == sorted(SOURCES)


def test_sql_escapes_data_in_tables_and_json(hostile_run):
    root, _ = hostile_run
    query = "SELECT id, source FROM kept ORDER BY id"
    res = run_cli("sql", OUT, query, cwd=root)
    assert res.returncode == 0, res.stderr
    assert not RAW.search(res.stdout)
    assert f"id{R}[2J" in res.stdout and f"web{R}]0;pwned{R}" in res.stdout and f"{R}gpj.exe" in res.stdout
    res = run_cli("sql", OUT, query, "--format", "json", cwd=root)
    assert res.returncode == 0 and not RAW.search(res.stdout)
    assert json.loads(res.stdout) == [{"id": i, "source": s} for i, s in sorted(zip(IDS, SOURCES))]
    # CSV has no escapes: into a pipe or a file it is the data as it is
    res = run_cli("sql", OUT, query, "--format", "csv", cwd=root)
    assert res.stdout.splitlines()[1:] == [f"{i},{s}" for i, s in sorted(zip(IDS, SOURCES))]


def test_inspect_escapes_ids_sources_and_not_found_ids(hostile_run):
    root, _ = hostile_run
    res = run_cli("inspect", OUT, "--id", IDS[0], "--id", IDS[1], "--id", "nope\x1b]0;x\x07\u202e", cwd=root)
    assert res.returncode == 1
    assert not RAW.search(res.stdout + res.stderr)
    assert f"id{R}[2J" in res.stdout and f"web{R}]0;pwned{R}" in res.stdout and f"{R}gpj.exe" in res.stdout
    assert res.stderr.splitlines() == [f"error: 1 id(s) not found: nope{R}]0;x{R}{R}"]
    res = run_cli("inspect", OUT, "--id", IDS[1], "--format", "json", cwd=root)
    assert res.returncode == 0 and not RAW.search(res.stdout)
    assert json.loads(res.stdout)["documents"][0]["source"] == SOURCES[1]


NOT_A_RUN = "nr\x1b]0;x\x07\u202e"
SHOWN = f"nr{R}]0;x{R}{R}"


ERROR_LINES = [
    (["stats", NOT_A_RUN], 2, [f"error: {SHOWN} has no stats/summary.json: not a finished dataclean output"]),
    (["sql", NOT_A_RUN, "SELECT 1"], 2,
     [f"error: {SHOWN} has no data/, rejected/, stats/ or dedup/ tables: not a dataclean output"]),
    (["inspect", NOT_A_RUN, "--id", "x"], 2,
     [f"error: {SHOWN} has no data/, rejected/, stats/ or dedup/ tables: not a dataclean output"]),
    (["report", NOT_A_RUN], 2,
     [f"error: {SHOWN}: no stats/summary.json; is this the output folder of a finished dataclean run?"]),
    (["verify", NOT_A_RUN], 1,
     ["FAILED: 1 problem(s)", f"  {SHOWN} has no manifest.json: not a finished dataclean output"]),
    (["export", NOT_A_RUN, "-o", "exp", "--tokenizer", "tok.json"], 2,
     [f"error: {SHOWN}: no manifest.json; export reads the output folder of a finished dataclean run"]),
    (["trace", NOT_A_RUN, "--sample", "0"], 2,
     [f"error: {SHOWN}: no export.json; trace reads a folder written by `dataclean export`"]),
    (["compare", f"{NOT_A_RUN}/a.jsonl", "b.jsonl"], 2, [f"error: input not found: {SHOWN}/a.jsonl"]),
]


@pytest.mark.parametrize("args, code, lines", ERROR_LINES, ids=[args[0] for args, _, _ in ERROR_LINES])
def test_error_lines_escape_the_folder_name(tmp_path, args, code, lines):
    (tmp_path / NOT_A_RUN).mkdir()
    (tmp_path / "tok.json").write_text("{}")
    res = run_cli(*args, cwd=tmp_path)
    assert res.returncode == code, res.stderr
    assert res.stderr.splitlines() == lines and res.stdout == ""
