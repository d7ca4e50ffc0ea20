"""The first run after an install does not wait for numba (issue 20 item 4): each family of kernels is used only
once a warm-up marked it ready in the cache folder; until then the callers run their pyarrow/numpy code and one
background ``python -m dataclean.warm`` compiles every family (``dataclean.text.kernels.ready``)."""
import importlib.util
import json
import os
import subprocess
import sys
import types

import pytest
from conftest import REPO, SAMPLE

from dataclean.text import kernels

numba_missing = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba is not installed")


@pytest.fixture
def fresh(monkeypatch, tmp_path):
    """This process as if it had not loaded a kernel yet, with an empty cache folder, and a Popen that records
    the warm-up it would start instead of starting it."""
    monkeypatch.setattr(kernels, "_state", {})
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(kernels.ENV, raising=False)
    monkeypatch.delenv("NUMBA_DISABLE_JIT", raising=False)
    started = []

    def popen(cmd, **kw):
        started.append(cmd)
        return types.SimpleNamespace(pid=os.getpid())

    monkeypatch.setattr(subprocess, "Popen", popen)
    return types.SimpleNamespace(cache=tmp_path / "cache", started=started)


@numba_missing
def test_without_a_marker_the_kernels_wait_and_one_warm_up_starts(fresh):
    assert kernels.ready("text") is False
    assert kernels.ready("minhash") is False
    assert kernels.ready("text") is False
    lock = fresh.cache / "warming.lock"
    assert fresh.started == [[sys.executable, "-m", "dataclean.warm", "--lock", str(lock)]]
    assert lock.read_text() == str(os.getpid())
    assert kernels.enabled() is False  # (the text kernels are not loaded: the callers use their fallback)


@numba_missing
def test_a_marker_makes_its_family_ready_and_only_that_one(fresh):
    kernels.mark_ready("fold")
    assert kernels.ready("fold") is True
    assert fresh.started == []
    assert kernels.ready("text") is False
    assert len(fresh.started) == 1
    name = os.path.basename(kernels.marker_path("fold"))
    assert name.startswith("ready-fold-") and len(name) == len("ready-fold-") + 16
    assert sorted(os.listdir(fresh.cache)) == sorted(["warming.lock", "warm.log", name])


@numba_missing
def test_compile_here_and_allow_compile_skip_the_marker(fresh, monkeypatch):
    monkeypatch.setenv(kernels.ENV, "compile")
    assert kernels.ready("minhash") is True
    monkeypatch.delenv(kernels.ENV)
    assert kernels.ready("minhash") is False
    kernels.allow_compile()
    assert kernels.ready("minhash") is True
    assert len(fresh.started) == 1


@numba_missing
def test_a_live_warm_up_is_not_started_twice_and_a_dead_ones_lock_is_taken_over(fresh):
    fresh.cache.mkdir()
    lock = fresh.cache / "warming.lock"
    lock.write_text(str(os.getpid()))  # (a live process)
    assert kernels.start_warmer() is None
    assert fresh.started == []
    pid = os.fork()
    if pid == 0:
        os._exit(0)
    os.waitpid(pid, 0)
    lock.write_text(str(pid))  # (a process that has ended)
    assert kernels.start_warmer() is not None
    assert len(fresh.started) == 1 and lock.read_text() == str(os.getpid())
    old = kernels.WARMER_STALE_SECONDS + 60
    st = lock.stat()
    os.utime(lock, (st.st_atime - old, st.st_mtime - old))  # (a live pid, but too old: a reused pid)
    assert kernels.start_warmer() is not None
    assert len(fresh.started) == 2


def test_switched_off_kernels_start_no_warm_up(fresh, monkeypatch):
    monkeypatch.setenv(kernels.ENV, "0")
    assert kernels.ready("text") is False
    assert kernels.start_warmer() is None
    monkeypatch.setenv(kernels.ENV, "1")
    monkeypatch.setenv("NUMBA_DISABLE_JIT", "1")
    assert kernels.start_warmer() is None
    assert fresh.started == []


@numba_missing
def test_the_warm_up_removes_its_lock_and_says_what_is_in_use(tmp_path):
    lock = tmp_path / "warming.lock"
    lock.write_text("1")
    out = subprocess.run([sys.executable, "-m", "dataclean.warm", "--lock", str(lock)], capture_output=True,
                         text=True, timeout=900, check=True)
    assert not lock.exists()
    assert "kernels in use: text yes, minhash yes, fold yes" in out.stdout


_RUN_AFTER_WARM = r"""
import json, sys
from numba.core.registry import CPUDispatcher
from dataclean.warm import warm_all
from dataclean.dedup import _minhash_numba
from dataclean.text import _fold_numba, _kernels_numba

warm_all()
dispatchers = {f"{m.__name__}.{n}": d for m in (_kernels_numba, _minhash_numba, _fold_numba)
               for n, d in vars(m).items() if isinstance(d, CPUDispatcher)}
before = {n: {str(s) for s in d.signatures} for n, d in dispatchers.items()}
from click.testing import CliRunner
from dataclean.cli import main
r = CliRunner().invoke(main, ["run", sys.argv[1], "-o", sys.argv[2], "--workers", "1"])
assert r.exit_code == 0, r.output
new = {n: sorted({str(s) for s in d.signatures} - before[n]) for n, d in dispatchers.items()}
print(json.dumps({n: s for n, s in new.items() if s}))
"""


@numba_missing
@pytest.mark.timeout(900)
def test_the_warm_up_compiles_every_kernel_version_a_default_run_uses(tmp_path):
    """A version the warm-up misses would be compiled inside the user's run (seconds each) once the family is
    marked ready: the default run on sample_data (all of its formats and languages) adds none."""
    out = subprocess.run([sys.executable, "-c", _RUN_AFTER_WARM, str(SAMPLE), str(tmp_path / "out")],
                         capture_output=True, text=True, timeout=900, cwd=REPO)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == {}


@numba_missing
def test_an_unwritable_cache_folder_says_once_why_the_kernels_are_off(fresh, monkeypatch, tmp_path, capsys):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder\n")
    monkeypatch.setenv("NUMBA_CACHE_DIR", str(blocker / "cache"))  # (root can write a chmod 0 folder: a file blocks)
    assert kernels.ready("text") is False
    assert kernels.ready("minhash") is False  # (no second warm-up tried, no second line)
    assert capsys.readouterr().err.splitlines() == [
        f"warning: dataclean's compiled kernels are off: their cache folder {blocker / 'cache'} cannot be written "
        "(Not a directory); the slower pyarrow/numpy code runs instead, with the same results. Set NUMBA_CACHE_DIR "
        "to a writable folder to use them"]
    assert fresh.started == []
