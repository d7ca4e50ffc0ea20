"""One line, never a traceback: what goes wrong in a command ends it with one line on stderr and the exit code
the README gives (0 ok; 1 some inputs unreadable or verification failed; 2 cannot start, bad usage, cannot
finish; 3 a write failed; 130 Ctrl-C). And ``dataclean report`` does not write into an unfinished run.
"""
from __future__ import annotations

import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import time

import duckdb
import pytest
from click.testing import CliRunner

from conftest import REPO, SAMPLE, run_cli
from dataclean import cli
from hostile import write_jsonl

FOUNDATION = REPO / "tests" / "configs" / "foundation.yaml"
GiB = 2 ** 30
INTERRUPTED = "interrupted; run the same command again to resume"


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """A finished run of a few documents (with the report.html the run writes itself)."""
    root = tmp_path_factory.mktemp("one_line")
    write_jsonl(root / "in" / "a.jsonl", [{"id": f"d{i}", "text": f"document number {i} says something else"}
                                          for i in range(5)])
    res = run_cli("run", root / "in", "-o", root / "out", "--config", FOUNDATION, "--quiet")
    assert res.returncode == 0, res.stderr
    assert (root / "out" / "report.html").exists() and (root / "out" / "_work" / "markers" / "final.json").exists()
    return root / "out"


def invoke(*args):
    """The CLI in this process (for a monkeypatched failure); stdout, stderr and the exit code apart."""
    return CliRunner().invoke(cli.main, [str(a) for a in args])


# --- sql --limit beyond 64 bits ------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["table", "csv", "json"])
def test_sql_limit_beyond_64_bits_means_every_row(small_run, fmt):
    res = run_cli("sql", small_run, "SELECT 1 AS one", "--limit", "99999999999999999999", "--format", fmt)
    assert res.returncode == 0, res.stderr
    assert res.stderr == ""
    last = {"table": "1 row", "csv": "1", "json": "]"}[fmt]
    assert res.stdout.splitlines()[-1] == last


# --- inspect --text-file / --ids-file / --id that cannot be read -----------------------------------------------

def test_inspect_text_file_nested_too_deeply(small_run, tmp_path):
    path = tmp_path / "deep.jsonl"
    path.write_text('{"text": "fine"}\n{"text": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    res = run_cli("inspect", small_run, "--text-file", path)
    assert res.returncode == 2
    assert res.stderr.splitlines() == [f"error: {path} line 2: JSON nested too deeply to read"]


@pytest.mark.parametrize("line", ['{"text": "a lone \\ud800 surrogate"}', '{"text": "x", "source": "\\udfff"}'])
def test_inspect_text_file_lone_surrogate(small_run, tmp_path, line):
    path = tmp_path / "surrogate.jsonl"
    path.write_text(line + "\n")
    what = "text" if "lone" in line else "source"
    res = run_cli("inspect", small_run, "--text-file", path)
    assert res.returncode == 2
    assert res.stderr.splitlines() == [f"error: {path} line 1: the {what} is not valid Unicode (a lone surrogate, "
                                       "such as the JSON escape \\ud800 without its pair)"]


@pytest.mark.parametrize("option", ["--text-file", "--ids-file"])
def test_inspect_file_that_is_not_utf8(small_run, tmp_path, option):
    path = tmp_path / "latin1.txt"
    path.write_bytes(b"fine\ncaf\xe9 au lait\n")
    res = run_cli("inspect", small_run, option, path)
    assert res.returncode == 2
    assert res.stderr.splitlines() == [f"error: {path} line 2: not UTF-8 text (byte 0xe9 at column 4: "
                                       "invalid continuation byte)"]


def test_inspect_id_of_bytes_that_are_not_utf8(small_run):
    res = run_cli("inspect", small_run, "--id", os.fsdecode(b"d\xff"))  # (passed to the process as the byte 0xff)
    assert res.returncode == 2
    assert res.stderr.splitlines() == ["error: --id 'd\\udcff' is not valid UTF-8: no document has such an id"]


# --- out of memory ---------------------------------------------------------------------------------------------

def _limit(gib: float):
    def apply():
        resource.setrlimit(resource.RLIMIT_AS, (int(gib * GiB), int(gib * GiB)))
    return apply


def test_out_of_memory_in_stats_is_one_line(small_run, monkeypatch):
    from dataclean.audit import query

    def boom(out):
        raise MemoryError()

    monkeypatch.setattr(query, "run_stats", boom)
    res = invoke("stats", small_run)
    assert res.exit_code == 2 and res.stdout == ""
    assert res.stderr.splitlines() == ["error: out of memory (MemoryError); raise the limit"]


def test_out_of_memory_in_run_names_the_workers_and_the_limit(tmp_path, monkeypatch):
    from dataclean.exec import local, runner

    def boom(*args, **kwargs):
        raise MemoryError()

    monkeypatch.setattr(local, "prestart", lambda workers: None)  # (no fork server from the test process)
    monkeypatch.setattr(runner, "run", boom)
    monkeypatch.setattr(resource, "getrlimit", lambda which: (int(1.5 * GiB), resource.RLIM_INFINITY))
    res = invoke("run", tmp_path, "-o", tmp_path / "out", "--quiet")
    assert res.exit_code == 2
    assert res.stderr.splitlines() == [
        "error: out of memory (MemoryError; address space limit 1.5 GiB); lower --workers or raise the limit"]


def test_duckdb_out_of_memory_in_sql_is_the_same_line(small_run, monkeypatch):
    from dataclean.audit import query

    message = "Out of Memory Error: could not allocate block of size 256.0 KiB (1.4 GiB/1.4 GiB used)"

    class Connection:  # the run's connection, running out of memory on the query
        def __init__(self):
            self.real = duckdb.connect()

        def extract_statements(self, sql):
            return self.real.extract_statements(sql)

        def execute(self, sql):
            raise duckdb.OutOfMemoryException(message)

        def close(self):
            self.real.close()

    monkeypatch.setattr(query, "open_run", lambda out: (Connection(), {}))
    for args in (["SELECT 1"], ["SELECT 1", "--format", "json"]):
        res = invoke("sql", small_run, *args)
        assert res.exit_code == 2
        assert res.stderr.splitlines() == [f"error: out of memory ({message}); raise the limit"]


def test_out_of_memory_in_inspect_is_the_same_line(small_run, monkeypatch):
    from dataclean.audit import inspect

    def boom(*args, **kwargs):
        raise duckdb.OutOfMemoryException("Out of Memory Error: failed to allocate data of size 2.0 GiB")

    monkeypatch.setattr(inspect, "inspect_documents", boom)
    res = invoke("inspect", small_run, "--id", "d1")
    assert res.exit_code == 2
    assert res.stderr.splitlines() == ["error: out of memory (Out of Memory Error: failed to allocate data of size "
                                       "2.0 GiB); raise the limit"]


def test_run_under_a_low_memory_limit_ends_with_one_line_and_resumes(tmp_path):
    """A real run of sample_data in 1.2 GiB of address space: DuckDB runs out in the driver. The run ends with
    the one line, and the same command without the limit finishes it. (Now and then, 1-2 GiB, the C library
    ends the process itself, "cannot allocate memory for thread-local data", exit 127, when a new thread finds
    no memory: Python never gets a word in, so that outcome is tried again, up to three times.)"""
    out = tmp_path / "out"
    # (one worker: the pass-1 tasks and DuckDB both in the limited process; with a pool the driver does less)
    cmd = [sys.executable, "-m", "dataclean.cli", "run", SAMPLE, "-o", out, "--quiet", "--workers", "1"]
    # (without the compiled kernels: numba's LLVM aborts the process when it cannot map memory, "LLVM ERROR:
    # Unable to allocate section memory", SIGABRT, and Python never gets a word in; seen in CI 3 times of 3)
    env = {**os.environ, "DATACLEAN_KERNELS": "0"}
    for _ in range(3):
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=600, preexec_fn=_limit(1.2), env=env)
        if not (res.returncode < 0 or res.returncode == 127 and "cannot allocate memory for thread-local data"
                in res.stderr):
            break
    assert res.returncode == 2, res.stderr
    assert "Traceback" not in res.stderr
    errors = [line for line in res.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and re.fullmatch(r"error: out of memory \(.+; address space limit 1\.2 GiB\); "
                                             r"lower --workers or raise the limit", errors[0]), res.stderr
    assert res.stderr.splitlines()[-1] == errors[0]
    again = run_cli(*cmd[3:])
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("1686 records in: ")


def test_arguments_of_bytes_that_are_not_utf8(small_run, tmp_path):
    """Python decodes such bytes of the command line to lone surrogates, which DuckDB and Arrow refuse."""
    bad = tmp_path / os.fsdecode(b"run\xff")
    shutil.copytree(small_run, bad)
    for args in (["stats", bad], ["sql", bad, "SELECT 1"], ["inspect", bad, "--id", "d1"]):
        res = run_cli(*args)
        assert res.returncode == 2, res.stderr
        assert res.stderr.splitlines() == [f"error: {str(bad)!r}: a path that is not valid UTF-8 cannot be opened "
                                           "by DuckDB; rename it (or link to it)"]
    res = run_cli("sql", small_run, os.fsdecode(b"SELECT '\xff'"))
    assert res.returncode == 2
    assert res.stderr.splitlines() == ["error: the query is not valid UTF-8 (bytes of the command line that are not "
                                       "UTF-8)"]
    (tmp_path / "t.txt").write_text("a text\n")
    res = run_cli("inspect", small_run, "--text-file", tmp_path / "t.txt", "--source", os.fsdecode(b"\xff"))
    assert res.returncode == 2
    assert res.stderr.splitlines() == ["error: --source '\\udcff' is not valid UTF-8"]


# --- a new output folder that cannot be created ----------------------------------------------------------------

def _can_mount_read_only() -> bool:
    try:
        return subprocess.run(["unshare", "-m", "sh", "-c", "mount -t tmpfs -o ro none /mnt"], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def test_new_output_folder_under_a_read_only_parent(tmp_path):
    """For real: a parent without write permission (not root), or a read-only mount (root, in a mount
    namespace of its own: root writes through permissions)."""
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": "hello there"}])
    parent = tmp_path / "ro"
    parent.mkdir()
    out = parent / "new" / "out"
    args = [sys.executable, "-m", "dataclean.cli", "run", tmp_path / "in", "-o", out, "--config", FOUNDATION, "--quiet"]
    if os.geteuid() != 0:
        parent.chmod(0o555)
        cmd, cause = args, "Permission denied"
    elif _can_mount_read_only():
        cmd = ["unshare", "-m", "sh", "-c", 'mount -t tmpfs -o ro none "$0" && exec "$@"', parent, *args]
        cause = "Read-only file system"
    else:
        pytest.skip("root without a way to make a read-only folder (see the monkeypatched test below)")
    try:
        res = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=300)
    finally:
        parent.chmod(0o755)
    assert res.returncode == 3, res.stderr
    assert res.stderr.splitlines() == [f"error: cannot write {out}: {cause}; free space (or fix the folder) and run "
                                       "the same command again to resume"]
    assert not (parent / "new").exists()


def test_new_output_folder_refused_by_the_file_system(tmp_path):
    """The same with ``os.makedirs`` refusing the folder (PermissionError 13 naming it), as for any user."""
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": "hello there"}])
    out = tmp_path / "ro" / "out"
    code = "\n".join([
        "import os, sys",
        "real = os.makedirs",
        "def makedirs(name, *args, **kwargs):",
        f"    if os.path.abspath(name).startswith({str(tmp_path / 'ro')!r}):",
        "        raise PermissionError(13, 'Permission denied', name)",
        "    return real(name, *args, **kwargs)",
        "os.makedirs = makedirs",
        "from dataclean.cli import main",
        "sys.argv[0] = 'dataclean'",
        "main()",
    ])
    res = subprocess.run([sys.executable, "-c", code, "run", str(tmp_path / "in"), "-o", str(out), "--config",
                          str(FOUNDATION), "--quiet"], capture_output=True, text=True, timeout=300)
    assert res.returncode == 3, res.stderr
    assert res.stderr.splitlines() == [f"error: cannot write {out}: Permission denied; free space (or fix the "
                                       "folder) and run the same command again to resume"]


# --- Ctrl-C ----------------------------------------------------------------------------------------------------

def test_interrupt_in_any_command_is_one_line_and_130(small_run, monkeypatch):
    from dataclean.audit import query

    def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(query, "run_stats", ctrl_c)
    monkeypatch.setattr(query, "run_query", ctrl_c)
    for args in (["stats", small_run], ["sql", small_run, "SELECT 1"]):
        res = invoke(*args)
        assert res.exit_code == 130
        assert res.stderr.splitlines() == [INTERRUPTED]


def test_ctrl_c_during_a_run_is_one_line_and_the_rerun_resumes(tmp_path):
    """SIGINT to the run's process group (what Ctrl-C in a terminal does: the workers get it too)."""
    out = tmp_path / "out"
    args = ["run", SAMPLE, "-o", out, "--quiet"]
    # the first pass-1 task pauses after its marker: the run is surely in pass 1 when the signal comes (a
    # fixed sleep raced a run that had finished by then on a fast machine)
    env = {**os.environ, "DATACLEAN_FAILPOINTS": "pause:pass1-done-0"}
    # SIGINT as a terminal's: a CI runner that started the tests in the background (SIGINT ignored, which the
    # run would inherit) must not make the signal a no-op
    proc = subprocess.Popen([sys.executable, "-m", "dataclean.cli", *map(str, args)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True, env=env,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.time() + 120
    marker = out / "_work" / "markers" / "pass1-00000.json"
    while not marker.exists() and time.time() < deadline and proc.poll() is None:
        time.sleep(0.02)
    time.sleep(0.2)  # (the task is in its pause)
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, (marker.exists(), stdout, stderr)
    assert stderr.splitlines() == [INTERRUPTED] and stdout == ""
    again = run_cli(*args)
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("1686 records in: ")


# --- dataclean report into an unfinished run -------------------------------------------------------------------

def _copy(run, dest):
    shutil.copytree(run, dest)
    (dest / "report.html").unlink()
    return dest


def test_report_refuses_a_run_stopped_before_its_final_marker(small_run, tmp_path):
    out = _copy(small_run, tmp_path / "out")
    (out / "_work" / "markers" / "final.json").unlink()  # stopped after manifest.json, before the marker
    res = run_cli("report", out)
    assert res.returncode == 2
    assert res.stderr.splitlines() == [
        f"error: the run in {out} is not finished (no _work/markers/final.json): run the same "
        f"`dataclean run ... -o {out}` command again to finish it (it resumes), then `dataclean report`"]
    assert not (out / "report.html").exists()


def test_report_refuses_a_run_stopped_before_its_manifest(small_run, tmp_path):
    out = _copy(small_run, tmp_path / "out")
    (out / "_work" / "markers" / "final.json").unlink()
    (out / "manifest.json").unlink()  # stopped after stats/, before manifest.json
    res = run_cli("report", out, "-o", tmp_path / "page.html")
    assert res.returncode == 2
    assert res.stderr.splitlines() == [
        f"error: the run in {out} is not finished (no _work/markers/final.json and no manifest.json): run the same "
        f"`dataclean run ... -o {out}` command again to finish it (it resumes), then `dataclean report`"]
    assert not (tmp_path / "page.html").exists()


def test_report_refuses_a_run_that_failed_verification(small_run, tmp_path):
    out = _copy(small_run, tmp_path / "out")
    (out / "_work" / "markers" / "final.json").unlink()
    for shard in (out / "data").glob("*.parquet"):
        shard.write_bytes(b"not parquet")
    res = run_cli("report", out)
    assert res.returncode == 2
    [line] = res.stderr.splitlines()
    assert line.startswith(f"error: the run in {out} failed verification (") and \
        line.endswith(f"); see `dataclean verify {out}`")
    assert not (out / "report.html").exists()


def test_report_refuses_a_run_at_work(small_run, tmp_path):
    """A run holds the folder's lock (here: this process): the data may be changing under the report."""
    from dataclean.exec.lock import RunLock

    out = _copy(small_run, tmp_path / "out")
    with RunLock(str(out)):
        res = run_cli("report", out)
    assert res.returncode == 2
    [line] = res.stderr.splitlines()
    assert line.startswith(f"error: output folder {out} is in use by another dataclean run (pid {os.getpid()} on ")
    assert line.endswith(" UTC); wait for it to finish, then `dataclean report`")
    assert not (out / "report.html").exists()
    assert run_cli("report", out).returncode == 0  # (the lock is let go)


def test_report_of_finished_runs_is_written(small_run, tmp_path):
    """A finished run; a run with an unreadable input (it never gets the final marker); a copy of a run
    without its _work/ folder (as a run publishes it)."""
    res = run_cli("report", _copy(small_run, tmp_path / "finished"))
    assert res.returncode == 0, res.stderr
    published = _copy(small_run, tmp_path / "published")
    shutil.rmtree(published / "_work")
    res = run_cli("report", published)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [f"report: {published / 'report.html'}"]
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": "hello there, a readable document"}])
    (tmp_path / "in" / "b.jsonl.gz").write_bytes(b"not gzip")
    failed = tmp_path / "failed"
    res = run_cli("run", tmp_path / "in", "-o", failed, "--config", FOUNDATION, "--quiet")
    assert res.returncode == 1 and not (failed / "_work" / "markers" / "final.json").exists()
    (failed / "report.html").unlink()
    res = run_cli("report", failed)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [f"report: {failed / 'report.html'}"]


def test_an_unsupported_file_named_on_its_own_is_one_line_with_the_fix(tmp_path):
    """A CSV named on the command line (planning reads each input's format to cut it into tasks) is a failed
    input with one line that says how to convert it, not a traceback; the other inputs run."""
    csv = tmp_path / "data.csv"
    csv.write_text("id,text\n1,hello world\n")
    good = tmp_path / "good.jsonl"
    write_jsonl(good, [{"id": "a", "text": "A line of text that is a document of its own, with words. " * 12}])
    r = run_cli("run", csv, good, "-o", tmp_path / "out", "--quiet")
    assert r.returncode == 1, r.stderr
    assert "Traceback" not in r.stderr
    lines = [line for line in r.stderr.splitlines() if line.startswith("error:")]
    assert lines == [f"error: cannot read {csv}: unsupported file type (expected .parquet, .arrow, .feather, "
                     ".ipc, .jsonl, .json, .ndjson (each also .gz or .zst), .warc, .warc.gz or .wet.gz); convert it "
                     "to Parquet first: python -c \"import pyarrow.csv as c, pyarrow.parquet as p; "
                     f"p.write_table(c.read_csv('{csv}'), 'out.parquet')\""]
    assert r.stdout.startswith("1 records in: ")
