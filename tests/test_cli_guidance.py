"""What a first-time user is told (issue 24, "first contact"): ``python -m dataclean``, every command's
``--help`` with examples and exit codes, the end of a run pointing at report.html and the next commands, and
``inspect`` saying what an exact duplicate's value is.

Runs are of the hand-written English and Chinese corpus of ``test_config_patch`` through the real CLI in a
subprocess.
"""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from test_config_patch import cli, corpus  # noqa: F401,F811  (corpus: the module-scoped fixture)

#: Every command and subcommand of the ``dataclean`` command (``quality`` from dataclean/quality/cli.py).
COMMANDS = [["run"], ["eval"], ["verify"], ["rules"], ["stats"], ["sql"], ["inspect"], ["report"], ["compare"],
            ["export"], ["trace"], ["config"], ["config", "show"], ["config", "init"], ["quality"],
            ["quality", "train"], ["quality", "eval"]]


def test_python_m_dataclean_is_the_dataclean_command():
    res = cli("--help")
    assert res.returncode == 0, res.stderr
    assert res.stdout.startswith("Usage: dataclean [OPTIONS] COMMAND [ARGS]...\n")
    assert "  config   Write a starting config, or print the config a run would use.\n" in res.stdout
    version = cli("--version")
    assert version.returncode == 0 and version.stdout.startswith("dataclean, version ")


@pytest.mark.parametrize("command", COMMANDS, ids=" ".join)
def test_every_help_has_an_example_and_the_exit_codes(command):
    res = cli(*command, "--help")
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    examples = lines.index("  Examples:")
    assert lines[examples + 1].startswith(f"    dataclean {' '.join(command)}") or \
        lines[examples + 1].startswith("    # ")
    codes = lines[lines.index("  Exit codes:") + 1:]
    assert codes[0] == "    0   done"
    assert codes[-1] == "    130 interrupted (Ctrl-C): one line on stderr, no traceback"
    assert any(c.startswith("    2   ") and c.endswith("; also out of memory") for c in codes)


def test_run_help_lists_its_exit_codes_exactly():
    lines = cli("run", "--help").stdout.splitlines()
    assert lines[lines.index("  Exit codes:") + 1:] == [
        "    0   done",
        "    1   done, but an input could not be read or the output failed verification (listed)",
        "    2   cannot start: a config error (one line naming the key), bad output folder, no inputs; also out of "
        "memory",
        "    3   a write failed (disk full, read-only): free space, the same command resumes",
        "    130 interrupted (Ctrl-C): one line on stderr, no traceback",
    ]


def test_config_init_refuses_to_overwrite_with_the_code_its_help_gives(tmp_path):
    (tmp_path / "dataclean.yaml").write_text("seed: 0\n")
    res = cli("config", "init", cwd=tmp_path)
    assert (res.returncode, res.stdout, res.stderr) == (
        2, "", "error: dataclean.yaml exists; give --force to overwrite it, or another PATH\n")
    assert (tmp_path / "dataclean.yaml").read_text() == "seed: 0\n"
    assert "    2   the file exists (give --force to overwrite it), or its folder does not; also out of memory" in \
        cli("config", "init", "--help").stdout.splitlines()
    missing = cli("config", "init", tmp_path / "no" / "my.yaml")
    assert (missing.returncode, missing.stderr) == (
        2, f"error: cannot write {tmp_path}/no/my.yaml: No such file or directory\n")


def test_config_init_on_a_full_disk_is_exit_3():
    res = cli("config", "init", "/dev/full", "--force")  # (every write to /dev/full: no space left)
    assert (res.returncode, res.stdout, res.stderr) == (
        3, "", "error: cannot write /dev/full: No space left on device\n")


@pytest.fixture(scope="module")
def finished_run(corpus, tmp_path_factory):  # noqa: F811
    out = tmp_path_factory.mktemp("guided") / "out"
    res = cli("run", corpus, "-o", out)
    assert res.returncode == 0, res.stderr
    return out, res


def test_a_run_ends_with_the_report_and_the_next_commands(finished_run):
    out, res = finished_run
    # en-short: the first row of the ledger (pass 1 removes it for its 47 words; the rows keep the input's order)
    assert res.stderr.splitlines()[-4:] == [
        f"report: {out}/report.html (open it in a browser)",
        f"next: dataclean inspect {out} --id en-short   # why this document was removed (any --id)",
        f"      dataclean verify {out}                  # recheck the counts and the shards",
        f"      dataclean report {out}                  # write report.html again",
    ]
    assert (out / "report.html").is_file()
    assert re.fullmatch(r"6 records in: 2 kept, 4 removed \(\d+\.\d s\)", res.stdout.splitlines()[0])


def test_the_suggested_commands_work(finished_run):
    out, res = finished_run
    inspect = cli("inspect", out, "--id", "en-short", "--format", "json")
    assert inspect.returncode == 0, inspect.stderr
    assert '"rule": "gopher_short_doc"' in inspect.stdout
    verify = cli("verify", out)
    assert (verify.returncode, verify.stdout) == (
        0, "ok: 6 records in = 2 kept + 4 removed; 3 shards readable, ids unique\n")
    report = cli("report", out)
    assert (report.returncode, report.stdout) == (0, f"report: {out}/report.html\n")


def test_quiet_prints_no_guidance(corpus, tmp_path):  # noqa: F811
    res = cli("run", corpus, "-o", tmp_path / "out", "--quiet")
    assert res.returncode == 0 and res.stderr == ""
    assert "report.html" not in res.stdout and "next:" not in res.stdout


def test_without_a_report_the_end_says_how_to_write_one(corpus, tmp_path):  # noqa: F811
    out = tmp_path / "out"
    res = cli("run", corpus, "-o", out, "--set", "output.report=false")
    assert res.returncode == 0, res.stderr
    assert res.stderr.splitlines()[-3:] == [
        f"report: none written; write it with: dataclean report {out}",
        f"next: dataclean inspect {out} --id en-short   # why this document was removed (any --id)",
        f"      dataclean verify {out}                  # recheck the counts and the shards",
    ]
    assert not (out / "report.html").exists()


def test_inspect_says_what_an_exact_duplicates_value_is(finished_run):
    out, _ = finished_run
    res = subprocess.run(["env", "COLUMNS=160", sys.executable, "-m", "dataclean", "inspect", str(out), "--id",
                          "dup-2"], capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr
    fate = [line.strip("│ ").strip() for line in res.stdout.splitlines()[2:6]]
    assert fate == ["fate             REMOVED by exact_dedup / exact_duplicate (reason exact_duplicate)",
                    "value 3 (group of 3 copies), threshold -",
                    "detail: group of 3 identical texts (normalized)",
                    "dup_of (kept instead): dup-1"]


def test_workers_auto_is_one_per_usable_cpu_and_numbers_pass_through():
    import os

    from dataclean.cli import WORKERS, usable_cpus

    assert usable_cpus() == len(os.sched_getaffinity(0))
    assert WORKERS.convert("auto", None, None) == usable_cpus()
    assert WORKERS.convert(" AUTO ", None, None) == usable_cpus()
    assert WORKERS.convert("3", None, None) == 3
    assert WORKERS.convert(1, None, None) == 1


@pytest.mark.parametrize("value, says", [
    ("0", "Invalid value for '--workers': 0 workers: give at least 1 (--workers 1 runs in this process), or auto"),
    ("two", "Invalid value for '--workers': 'two' is not a number of worker processes; give one "
            "(e.g. --workers 4) or auto"),
])
def test_a_bad_workers_value_is_one_line_with_the_fix(corpus, tmp_path, value, says):  # noqa: F811
    res = cli("run", corpus, "-o", tmp_path / "out", "--workers", value, "--quiet")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1] == f"Error: {says}"
    assert not (tmp_path / "out").exists()


def test_run_eval_and_export_default_to_auto_workers():
    for command in (["run"], ["eval"], ["export"]):
        out = cli(*command, "--help").stdout
        assert re.search(r"--workers N\|AUTO\s+Worker processes; auto = one per usable CPU", out), command
        assert "[default: auto]" in " ".join(out.split())
