"""The local executor: workers forked from a fork server that preloaded dataclean, with the driver's environment
as it is when a pool starts; and the writers' per-column compression."""
from __future__ import annotations

import multiprocessing
import os
import shutil
import subprocess
import sys
import textwrap

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataclean.exec import local
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
