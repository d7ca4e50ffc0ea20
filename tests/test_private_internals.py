"""The private internals of other libraries that dataclean leans on, each for a measured speed-up or a clean exit
(issue 21 item 5), checked here on the versions they were verified on. A Python, numba or multiprocessing that
renames one fails the test of that name, instead of the speed-up silently going away or the fallback running
unseen. Outside the verified versions the tests skip with what to check before widening the range.

Where each is used, what it buys, and what happens without it:

* ``multiprocessing.forkserver._forkserver`` (``_forkserver_pid``, ``_forkserver_alive_fd``,
  ``_forkserver_address``, ``_lock``): :func:`dataclean.exec.local._stop_fork_server` stops and reaps the fork
  server at exit, so no process outlives a run and the workers' CPU time is counted in the driver's children.
  Without them it returns at once (``getattr`` defaults) and Python's own cleanup stops the server later.
* ``ProcessPoolExecutor._broken`` and ``._processes``: :class:`dataclean.exec.local.LocalExecutor` learns how a
  pool broke and the exit codes of its dead workers, to charge the right task an attempt. Without them every
  unfinished task of a broken pool is retried and none is charged for the death.
* ``multiprocessing.current_process()._inheriting``: :func:`dataclean.exec.runner.run` refuses, in one line, to
  start a run from a worker that is importing the caller's script. Without it that mistake is not caught
  there, and the run's workers fail instead.
* ``numba.np.arraymath._HAVE_BLAS``: :func:`dataclean.text.kernels._import_numba` keeps ``scipy.linalg`` (~0.1 s)
  out of numba's start-up. Without it numba is imported as it is.
* ``sys._getframe`` and ``multiprocessing.forkserver.main``: :mod:`dataclean.exec.preload` knows it is being
  imported by the fork server (which then dies with the driver). ``sys._getframe`` is CPython's: on another
  interpreter importing preload fails.
"""
import multiprocessing
import multiprocessing.forkserver as forkserver
import sys
from concurrent.futures import ProcessPoolExecutor

import pytest

VERIFIED_PYTHON = ((3, 11), (3, 12), (3, 13))
python_verified = pytest.mark.skipif(sys.version_info[:2] not in VERIFIED_PYTHON,
                                     reason="check the internals named in this module's docstring on this Python, "
                                            "then add it to VERIFIED_PYTHON")


@python_verified
def test_fork_server_internals_used_to_stop_it_at_exit():
    server = forkserver._forkserver
    for name in ("_forkserver_pid", "_forkserver_alive_fd", "_forkserver_address", "_lock"):
        assert hasattr(server, name), name
    assert hasattr(server._lock, "__enter__")


@python_verified
def test_process_pool_internals_used_to_tell_how_a_pool_broke():
    pool = ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("fork"))
    try:
        assert pool.submit(int, "7").result() == 7
        assert pool._broken is False
        assert isinstance(pool._processes, dict) and len(pool._processes) == 1
    finally:
        pool.shutdown()


@python_verified
def test_spawned_import_flag_is_where_the_runner_looks():
    import inspect
    import multiprocessing.spawn

    assert "_inheriting" in inspect.getsource(multiprocessing.spawn.prepare) + \
        inspect.getsource(multiprocessing.spawn._main)
    assert getattr(multiprocessing.current_process(), "_inheriting", False) is False  # (not a spawned import)


@python_verified
def test_fork_server_main_and_frames_for_preload():
    assert forkserver.main.__code__.co_name == "main"
    assert sys._getframe().f_code.co_name == "test_fork_server_main_and_frames_for_preload"


def test_numba_blas_flag_that_keeps_scipy_linalg_out():
    numba = pytest.importorskip("numba")
    if tuple(int(p) for p in numba.__version__.split(".")[:2]) >= (0, 70):
        pytest.skip("check numba.np.arraymath._HAVE_BLAS on this numba, then raise the bound")
    import numba.np.arraymath as arraymath

    assert isinstance(arraymath._HAVE_BLAS, bool)
