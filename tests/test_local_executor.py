"""The local executor: workers forked from a fork server that preloaded dataclean, with the driver's environment
as it is when a pool starts; tasks whose worker died run again; a killed driver leaves no process behind; and
the writers' per-column compression."""
from __future__ import annotations

import dataclasses
import multiprocessing
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import SAMPLE, folder_bytes, run_cli
from dataclean.exec import local
from dataclean.exec.errors import RunError
from dataclean.exec.local import LocalExecutor
from dataclean.io.writers import ShardWriter, parquet_options


def _probe(name: str) -> tuple[int, str | None, bool]:
    return os.getpid(), os.environ.get(name), "dataclean.exec.tasks" in sys.modules


def test_workers_see_the_environment_of_the_driver_when_their_pool_starts(monkeypatch):
    local.prestart(2)  # the fork server runs from here on, with the environment of this moment
    monkeypatch.setenv("DATACLEAN_TEST_PROBE", "first")
    ex = LocalExecutor(2)
    try:
        got = ex.map(_probe, ["DATACLEAN_TEST_PROBE"] * 4)
        assert [g[1] for g in got] == ["first"] * 4
        assert all(g[2] for g in got)  # preloaded: the task modules are there before any task ran
        assert os.getpid() not in {g[0] for g in got}
        ex.close()
        monkeypatch.setenv("DATACLEAN_TEST_PROBE", "second")  # a new pool (pass 2 after the global step)
        assert [g[1] for g in ex.map(_probe, ["DATACLEAN_TEST_PROBE"] * 2)] == ["second"] * 2
        monkeypatch.delenv("DATACLEAN_TEST_PROBE")
        ex.close()
        assert [g[1] for g in ex.map(_probe, ["DATACLEAN_TEST_PROBE"] * 2)] == [None, None]
    finally:
        ex.close()


@pytest.mark.skipif("forkserver" not in multiprocessing.get_all_start_methods(), reason="no fork on this platform")
def test_pool_uses_the_fork_server():
    ctx = local._context()
    assert ctx.get_start_method() == "forkserver"


def test_hash_columns_are_stored_uncompressed(tmp_path):
    schema = pa.schema([("id", pa.string()), ("text", pa.string()), ("content_hash", pa.binary(16)),
                        ("h", pa.uint64()), ("sig", pa.list_(pa.uint32())), ("bands", pa.list_(pa.uint64())),
                        ("n", pa.int64()), ("words", pa.list_(pa.string()))])
    opts = parquet_options(schema, level=1)
    assert opts["compression"] == {"id": "zstd", "text": "zstd", "content_hash": "none", "h": "none",
                                   "sig.list.element": "none", "bands.list.element": "none", "n": "zstd",
                                   "words.list.element": "zstd"}
    assert opts["compression_level"] == {"id": 1, "text": 1, "n": 1, "words.list.element": 1}
    assert parquet_options(pa.schema([("text", pa.string())]))["compression"] == "zstd"
    w = ShardWriter(str(tmp_path), "part", schema, level=1)
    w.write(pa.table({"id": ["a"], "text": ["hello"], "content_hash": pa.array([b"0123456789abcdef"], pa.binary(16)),
                      "h": pa.array([2 ** 63], pa.uint64()), "sig": pa.array([[1, 2]], pa.list_(pa.uint32())),
                      "bands": pa.array([[3]], pa.list_(pa.uint64())), "n": [1], "words": [["a", "b"]]},
                     schema=schema))
    path, = w.commit()
    rg = pq.ParquetFile(path).metadata.row_group(0)
    codecs = {rg.column(i).path_in_schema.split(".")[0]: rg.column(i).compression for i in range(rg.num_columns)}
    assert codecs == {"id": "ZSTD", "text": "ZSTD", "content_hash": "UNCOMPRESSED", "h": "UNCOMPRESSED",
                      "sig": "UNCOMPRESSED", "bands": "UNCOMPRESSED", "n": "ZSTD", "words": "ZSTD"}
    assert pq.read_table(path).to_pylist()[0]["sig"] == [1, 2]


def _run_script(folder, source: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``source`` (dedented) as ``folder/main.py`` with this Python, in ``folder``; output captured."""
    script = folder / "main.py"
    script.write_text(textwrap.dedent(source))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=folder, timeout=timeout)


def test_the_fork_server_is_stopped_and_a_driver_keeps_its_exit_code(tmp_path):
    """The preload module ends the fork server with os._exit (no interpreter teardown to wait for), and only
    there: a program that imports it keeps its own exit code; the server is gone when the driver's stop returns."""
    rc = subprocess.run([sys.executable, "-c", "import dataclean.exec.preload, sys; sys.exit(3)"]).returncode
    assert rc == 3
    out = _run_script(tmp_path, """
        import os
        from multiprocessing import forkserver
        from dataclean.exec.local import LocalExecutor, _stop_fork_server
        def f(x):
            return x * 2
        if __name__ == '__main__':
            ex = LocalExecutor(2)
            assert ex.map(f, [1, 2, 3]) == [2, 4, 6]
            ex.close()
            pid = forkserver._forkserver._forkserver_pid
            _stop_fork_server()
            print(pid, os.path.exists(f'/proc/{pid}'))
            raise SystemExit(5)
        """)
    assert out.returncode == 5, out.stderr
    pid, alive = out.stdout.split()
    assert int(pid) > 0 and alive == "False"  # stopped and reaped: no orphan left behind


def test_workers_import_dataclean_from_where_the_driver_does(tmp_path):
    """A copy of the package in the driver's working folder is not what the workers load (Python 3.11's fork
    server would put its working folder first): the fork server gets the driver's sys.path."""
    repo = os.path.dirname(os.path.dirname(os.path.abspath(local.__file__)))
    shutil.copytree(repo, tmp_path / "dataclean", ignore=shutil.ignore_patterns("__pycache__"))  # a working copy
    out = _run_script(tmp_path, f"""
        import sys
        sys.path[0:1] = [{os.path.dirname(repo)!r}]  # (the script's folder holds the copy)
        import dataclean
        from dataclean.exec.local import LocalExecutor
        def where(_):
            import dataclean.exec.tasks as t
            return t.__file__
        if __name__ == '__main__':
            ex = LocalExecutor(2)
            print(dataclean.__file__, *sorted(set(ex.map(where, range(4)))))
            ex.close()
        """)
    assert out.returncode == 0, out.stderr
    driver, *workers = out.stdout.split()
    assert workers == [os.path.join(os.path.dirname(driver), "exec", "tasks.py")]


def test_exit_does_not_hang_on_a_forked_child_holding_the_fork_servers_pipe(tmp_path):
    """A fork-method pool left open by the caller holds the fork server's "alive" pipe: the exit handler kills
    the server after a short wait instead of waiting for it forever."""
    out = _run_script(tmp_path, """
        import multiprocessing as mp
        from dataclean.exec.local import LocalExecutor
        def double(x):
            return 2 * x
        if __name__ == '__main__':
            ex = LocalExecutor(2)
            assert ex.map(double, [1, 2]) == [2, 4]
            ex.close()
            pool = mp.get_context('fork').Pool(2)
            assert pool.map(double, [3]) == [6]
            raise SystemExit(4)
        """, timeout=60)
    assert out.returncode == 4, out.stderr


# ------------------------------------------------------------------ workers that die, drivers that die

@dataclasses.dataclass(frozen=True)
class _Spec:
    """What the runner's TaskSpec has that the death message names: a task number and an input."""

    task: int
    input: str
    folder: str


def _dies_the_first_time(spec: _Spec) -> tuple[int, int]:
    """SIGKILL this worker the first time tasks 1 and 4 run (a marker file remembers it); else the task's result."""
    marker = os.path.join(spec.folder, f"died-{spec.task}")
    with open(os.path.join(spec.folder, f"runs-{spec.task}"), "a") as fh:
        fh.write("x")
    if spec.task in (1, 4) and not os.path.exists(marker):
        open(marker, "w").close()
        os.kill(os.getpid(), signal.SIGKILL)
    return spec.task * 10, os.getpid()


def _task_3_always_dies(spec: _Spec) -> int:
    with open(os.path.join(spec.folder, f"runs-{spec.task}"), "a") as fh:
        fh.write("x")
    if spec.task == 3:
        os.kill(os.getpid(), signal.SIGKILL)
    return spec.task


def _runs(folder, task: int) -> int:
    path = os.path.join(folder, f"runs-{task}")
    return len(open(path).read()) if os.path.exists(path) else 0


def test_a_task_whose_worker_was_killed_is_run_again_and_results_keep_task_order(tmp_path):
    specs = [_Spec(i, f"in/{i}.jsonl", str(tmp_path)) for i in range(6)]
    seen = []
    ex = LocalExecutor(2)
    try:
        got = ex.map(_dies_the_first_time, specs, on_done=seen.append)
        assert [g[0] for g in got] == [0, 10, 20, 30, 40, 50]  # in task order, whatever order they finished in
        assert sorted(seen) == sorted(got)  # on_done once per task, never for a lost attempt
        assert os.path.exists(tmp_path / "died-1") and os.path.exists(tmp_path / "died-4")
        # the killed attempt and the rerun; a task in flight on the other worker when a worker dies is lost with
        # the pool and run again (which tasks are in flight depends on timing): two deaths lose at most two attempts
        assert all(2 <= _runs(tmp_path, t) <= 3 for t in (1, 4))
        assert all(1 <= _runs(tmp_path, t) <= 3 for t in (0, 2, 3, 5))
        assert os.getpid() not in {g[1] for g in got}
        assert ex.map(_probe, ["DATACLEAN_TEST_PROBE"] * 2)[0][2]  # the executor's new pool goes on working
    finally:
        ex.close()


def test_a_task_that_always_kills_its_worker_stops_the_map_with_one_line(tmp_path):
    specs = [_Spec(i, f"in/{'abcdef'[i]}.jsonl", str(tmp_path)) for i in range(6)]
    ex = LocalExecutor(2)
    try:
        with pytest.raises(RunError) as caught:
            ex.map(_task_3_always_dies, specs)
        assert str(caught.value) == (
            "a worker died running task 3 (input in/d.jsonl) 3 times (killed by signal 9: out of memory?); "
            "lower --workers or the batch size (input.batch_rows), then run the same command to resume")
        assert _runs(tmp_path, 3) == 1 + local.MAX_RETRIES  # the first attempt and MAX_RETRIES reruns
        assert ex.map(_task_3_always_dies, specs[:3]) == [0, 1, 2]  # the executor is still usable
    finally:
        ex.close()
    once = LocalExecutor(2, max_retries=0)
    try:
        with pytest.raises(RunError, match=r"^a worker died running task 3 \(input in/d.jsonl\) once \(killed by"):
            once.map(_task_3_always_dies, specs[2:4])
    finally:
        once.close()


def test_the_death_message_names_what_a_spec_has():
    from dataclean.exec.tasks import TaskSpec

    spec = TaskSpec(7, "data/x.parquet", "out", {}, "fp")
    assert local.death_message(spec, 0, ["killed by signal 9: out of memory?"] * 2).startswith(
        "a worker died running task 7 (input data/x.parquet) 2 times (killed by signal 9: out of memory?); ")
    assert local.death_message(("any", "spec"), 4, ["exit code 1"]).startswith(
        "a worker died running task 4 once (exit code 1); ")
    assert local._cause(-signal.SIGSEGV) == "killed by signal 11 (SIGSEGV)"
    assert local._cause(None) == "cause unknown"


def test_the_local_executor_reruns_pass_tasks_whose_workers_were_killed(sample_run, tmp_path):
    """`dataclean run` with a worker SIGKILLed (alone) in pass 1 after its shards are written and in pass 2 after
    its data shards are renamed: the run finishes, with the output of the run nobody killed."""
    state = tmp_path / "failpoints"
    state.mkdir()
    points = ["pass1-files-1", "pass2-files-2"]
    out = tmp_path / "out"
    proc = run_cli("run", SAMPLE, "-o", out, "--workers", 2, "--quiet",
                   env_extra={"DATACLEAN_FAILPOINTS": ",".join("die-once:" + p for p in points),
                              "DATACLEAN_FAILPOINT_STATE": str(state)})
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(state)) == sorted(points)  # every kill happened
    assert "Traceback" not in proc.stderr
    outputs = ("data", "rejected", "stats", "dedup")
    assert folder_bytes(out, *outputs) == folder_bytes(sample_run, *outputs)


@pytest.mark.slow
def test_a_run_whose_worker_always_dies_ends_with_one_line_and_resumes(sample_run, tmp_path):
    """The OOM killer taking the worker of one pass-1 task on every attempt: one line, exit 2, no traceback;
    the same command, once the worker survives, finishes with the output of the run nobody killed."""
    from dataclean.io.readers import discover_inputs

    out = tmp_path / "out"
    proc = run_cli("run", SAMPLE, "-o", out, "--workers", 2, "--quiet",
                   env_extra={"DATACLEAN_FAILPOINTS": "die-always:pass1-files-1"})
    assert proc.returncode == 2, proc.stderr
    second = discover_inputs([str(SAMPLE)])[1]
    assert proc.stderr == (f"error: a worker died running task 1 (input {second}) 3 times (killed by signal 9: "
                           "out of memory?); lower --workers or the batch size (input.batch_rows), then run the "
                           "same command to resume\n")
    proc = run_cli("run", SAMPLE, "-o", out, "--workers", 2, "--quiet")
    assert proc.returncode == 0, proc.stderr
    outputs = ("data", "rejected", "stats", "dedup")
    assert folder_bytes(out, *outputs) == folder_bytes(sample_run, *outputs)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="PR_SET_PDEATHSIG is Linux's")
def test_die_with_parent_asks_the_kernel_and_exits_when_the_parent_is_gone_already():
    probe = textwrap.dedent("""
        import ctypes, os, signal, sys
        from dataclean.exec.local import die_with_parent
        die_with_parent(os.getppid())  # the parent is alive: go on
        sig = ctypes.c_int()
        ctypes.CDLL(None).prctl(2, ctypes.byref(sig), 0, 0, 0)  # PR_GET_PDEATHSIG
        print(sig.value, flush=True)
        die_with_parent(os.getppid() + 1 if os.getppid() > 1 else 2)  # as if re-parented before asking
        print("still here")
        """)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert out.returncode == -signal.SIGKILL, out.stderr
    assert out.stdout.split() == [str(int(signal.SIGKILL))]


def _session(sid: int) -> dict[int, str]:
    """The live (not zombie) processes of session ``sid`` (the driver started in a session of its own, and
    everything it started): pid -> command line. From /proc (no psutil)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                data = fh.read()
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = data[data.rfind(b")") + 2:].split()
        if int(fields[3]) == sid and fields[0] != b"Z":
            found[int(entry)] = cmdline
    return found


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="reads /proc")
@pytest.mark.parametrize("from_thread", [False, True], ids=["main thread", "pool started from a thread"])
def test_a_driver_killed_by_sigkill_takes_its_fork_server_and_workers_with_it(tmp_path, from_thread):
    """SIGKILL of the driver alone, its two workers asleep in their tasks: within seconds no process of its tree
    is left (before: the fork server, the resource tracker and the workers lived on, ~0.7 GB, for good). When
    the pool was started from a thread other than the main one, the fork server is not tied to the driver by
    the kernel (it would die with that thread); the workers' watch of the driver then ends them, and the fork
    server ends when its last worker is gone."""
    started = tmp_path / "started"
    started.mkdir()
    call = "ex.map(nap, [1, 2, 3, 4])"
    if from_thread:
        call = f"t = threading.Thread(target=lambda: {call}); t.start(); t.join()"
    script = tmp_path / "main.py"
    script.write_text(textwrap.dedent(f"""
        import os, sys, threading, time
        from dataclean.exec.local import LocalExecutor
        def nap(x):
            open(os.path.join({str(started)!r}, str(os.getpid())), 'w').close()
            time.sleep(600)
            return x
        if __name__ == '__main__':
            ex = LocalExecutor(2)
            {call}
        """))
    proc = subprocess.Popen([sys.executable, str(script)], cwd=tmp_path, start_new_session=True)
    try:
        deadline = time.monotonic() + 120
        while len(os.listdir(started)) < 2 and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(os.listdir(started)) == 2, "the workers did not start"
        tree = _session(proc.pid)
        workers = {int(p) for p in os.listdir(started)}
        assert workers <= set(tree) and len(tree) >= 4  # the driver, the fork server, two workers (a tracker)
        os.kill(proc.pid, signal.SIGKILL)  # the driver only
        proc.wait(timeout=30)
        deadline = time.monotonic() + 10
        while _session(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert _session(proc.pid) == {}
    finally:
        for pid in _session(proc.pid):  # (what this test started, if it failed)
            os.kill(pid, signal.SIGKILL)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
