"""One run per output folder (dataclean/exec/lock.py), writers' own temporary names, the products a rerun of a
finished run checks, and output folders that can be neither created nor used (issue 25: items 2, 7, 8, 10)."""
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import SAMPLE, folder_bytes, run_cli
from dataclean.exec.lock import LOCK_FILE, RunLock
from dataclean.exec.runner import RunError
from dataclean.io.fs import is_unfinished
from dataclean.io.writers import tmp_name, write_json_atomic
from hostile import write_jsonl

FOUNDATION = Path(__file__).parent / "configs" / "foundation.yaml"
DOCS = [{"id": "en-1", "text": "The harbour master logged three ships before noon and one after."},
        {"id": "zh-1", "text": "图书馆周一闭馆，周二至周日上午九点开放，下午五点停止入馆。"},
        {"id": "en-2", "text": "Rain delayed the ferry, so the passengers waited in the café by the pier."}]


def _inputs(tmp_path: Path) -> Path:
    write_jsonl(tmp_path / "in" / "a.jsonl", DOCS)
    return tmp_path / "in"


def test_a_second_run_on_a_locked_folder_is_refused_with_the_holders_pid(tmp_path):
    src = _inputs(tmp_path)
    out = tmp_path / "out"
    holder = subprocess.Popen([sys.executable, "-c", "import sys, time; from dataclean.exec.lock import RunLock; "
                               f"RunLock({str(out)!r}).acquire(); print('locked', flush=True); time.sleep(60)"],
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline() == "locked\n"
        for extra in ((), ("--fresh",)):  # --fresh waits for nothing and discards nothing while the lock is held
            res = run_cli("run", src, "-o", out, "--quiet", "--config", FOUNDATION, *extra)
            assert res.returncode == 2, res.stderr
            started = time.strftime("%Y-%m-%d", time.gmtime())
            assert re.fullmatch(rf"error: output folder {re.escape(str(out))} is in use by another dataclean run "
                                rf"\(pid {holder.pid} on \S+, started {started} \d\d:\d\d:\d\d UTC\); wait for it "
                                r"to finish, or choose another output folder\n", res.stderr), res.stderr
        assert sorted(p.name for p in out.iterdir()) == [LOCK_FILE]
    finally:
        holder.kill()
        holder.wait()
    # the holder died (SIGKILL): the kernel released its lock, and the same command now runs
    res = run_cli("run", src, "-o", out, "--quiet", "--config", FOUNDATION)
    assert res.returncode == 0, res.stderr
    assert (out / "manifest.json").exists()


def test_the_lock_is_held_for_the_run_and_released_after(tmp_path):
    src = _inputs(tmp_path)
    out = tmp_path / "out"
    from dataclean import run

    run([str(src)], str(out), config=str(FOUNDATION))
    with RunLock(str(out)):  # free again once run() returned
        with pytest.raises(RunError, match="is in use by another dataclean run"):
            run([str(src)], str(out), config=str(FOUNDATION))
    assert json.loads((out / LOCK_FILE).read_text())["pid"] == os.getpid()


def test_each_write_has_its_own_temporary_name(tmp_path):
    path = str(tmp_path / "stats" / "summary.json")
    a, b = tmp_name(path), tmp_name(path)
    assert a != b
    assert re.fullmatch(rf"\.summary\.json\.tmp-{os.getpid()}-[0-9a-f]{{8}}", os.path.basename(a))
    assert is_unfinished(os.path.basename(a)) and not is_unfinished("summary.json")
    write_json_atomic({"v": 1}, path)
    assert sorted(p.name for p in (tmp_path / "stats").iterdir()) == ["summary.json"]


def test_a_killed_writers_temporary_files_are_removed_by_the_next_run(tmp_path):
    src = _inputs(tmp_path)
    out = tmp_path / "out"
    assert run_cli("run", src, "-o", out, "--quiet", "--config", FOUNDATION).returncode == 0
    left = [out / ".manifest.json.tmp-4242-0badc0de", out / "stats" / ".summary.json.tmp-4242-0badc0de",
            out / "data" / ".part-00000-00000.parquet.tmp-4242-0badc0de"]
    for path in left:
        path.write_text("half")
    res = run_cli("run", src, "-o", out, "--quiet", "--config", FOUNDATION)
    assert res.returncode == 0, res.stderr
    assert [p for p in left if p.exists()] == []


@pytest.mark.slow
def test_a_finished_run_missing_a_shard_is_run_again_to_the_same_bytes(tmp_path):
    out = tmp_path / "out"
    assert run_cli("run", SAMPLE, "-o", out, "--quiet").returncode == 0
    before = folder_bytes(out, "data", "rejected", "stats", "dedup")
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["outputs"]["data/part-00002-00000.parquet"] == len(before["data/part-00002-00000.parquet"])
    (out / "data" / "part-00002-00000.parquet").unlink()
    res = run_cli("run", SAMPLE, "-o", out, "--quiet")
    assert res.returncode == 0, res.stderr
    assert res.stderr == (f"note: the finished run in {out} lacks data/part-00002-00000.parquet; "
                          "running it again\n")
    assert folder_bytes(out, "data", "rejected", "stats", "dedup") == before
    # a shard cut short is seen by its size, without reading it
    shard = out / "rejected" / "part-00000-00000.parquet"
    shard.write_bytes(shard.read_bytes()[:100])
    res = run_cli("run", SAMPLE, "-o", out, "--quiet")
    assert res.returncode == 0, res.stderr
    size = len(before["rejected/part-00000-00000.parquet"])
    assert res.stderr == (f"note: the finished run in {out} lacks rejected/part-00000-00000.parquet at its size "
                          f"of {size:,} bytes; running it again\n")
    assert folder_bytes(out, "data", "rejected", "stats", "dedup") == before
    res = run_cli("run", SAMPLE, "-o", out, "--quiet")  # whole: nothing to do, nothing said
    assert (res.returncode, res.stderr) == (0, "")


def test_a_file_uri_output_inside_the_input_folder_is_refused_like_its_path(tmp_path):
    src = _inputs(tmp_path)
    for output in (src / "out", f"file://{src}/out"):
        res = run_cli("run", src, "-o", output, "--quiet", "--config", FOUNDATION)
        assert res.returncode == 2, res.stderr
        assert res.stderr == (f"error: output folder {src / 'out'} is inside the input folder {src}; its files "
                              "would be read as input by the next run: choose an output folder outside the inputs\n")
    assert sorted(p.name for p in src.iterdir()) == ["a.jsonl"]


def test_an_output_folder_that_cannot_be_created_is_one_line_exit_3(tmp_path):
    src = _inputs(tmp_path)
    (tmp_path / "afile").write_text("x")
    res = run_cli("run", src, "-o", tmp_path / "afile" / "out", "--quiet", "--config", FOUNDATION)
    assert res.returncode == 3, res.stderr
    assert res.stderr == (f"error: cannot write {tmp_path / 'afile' / 'out'}: Not a directory; free space (or fix "
                          "the folder) and run the same command again to resume\n")


def test_an_output_folder_under_a_read_only_parent_is_one_line_exit_3(tmp_path):
    src = _inputs(tmp_path)
    ro = tmp_path / "ro"
    ro.mkdir()
    if subprocess.run(["mount", "-t", "tmpfs", "-o", "ro,size=1m", "tmpfs", str(ro)],
                      capture_output=True).returncode != 0:
        if os.environ.get("CI"):
            pytest.fail("cannot mount a read-only tmpfs on this CI machine")
        pytest.skip("cannot mount a read-only tmpfs here (needs root)")
    try:
        res = run_cli("run", src, "-o", ro / "out", "--quiet", "--config", FOUNDATION)
    finally:
        subprocess.run(["umount", str(ro)], check=True)
    assert res.returncode == 3, res.stderr
    assert res.stderr == (f"error: cannot write {ro / 'out'}: Read-only file system; free space (or fix the "
                          "folder) and run the same command again to resume\n")
