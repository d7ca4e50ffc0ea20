"""The local executor: a process pool (or the calling process when ``workers == 1``).

Results come back in task order whatever order tasks finish in, so nothing downstream depends on timing.
"""
from __future__ import annotations

import atexit
import multiprocessing
import os
import signal
import sys
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Callable, Sequence


PRELOAD = "dataclean.exec.preload"


def _context():
    """Workers are forked from a fork server that imported :mod:`dataclean.exec.preload` (task modules, compiled
    kernels) once: they inherit no DuckDB connection, thread or file of the driver, as spawned workers would,
    and start in milliseconds instead of ~0.7 s. Where there is no fork (Windows, macOS's default), spawn."""
    if "forkserver" not in multiprocessing.get_all_start_methods():
        return multiprocessing.get_context("spawn")
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload([PRELOAD])  # (no effect once the server runs: then it keeps what it has)
    if not _state.get("atexit"):
        atexit.register(_stop_fork_server)
        _state["atexit"] = True
    return ctx


_state: dict = {}


def _ensure_server() -> None:
    """Start the fork server if it is not running, importing dataclean from where this process does: Python 3.11's
    fork server ignores the ``sys_path`` it is given and puts its working folder first, so it could load another
    copy of the package (a checkout in the current folder) than the driver's. It is started with this process's
    ``sys.path`` as ``PYTHONPATH`` and ``PYTHONSAFEPATH=1`` (no working folder in front), only for that moment.
    Nothing to do where workers are spawned (no fork server)."""
    from multiprocessing import forkserver

    if _context().get_start_method() != "forkserver":
        return
    path = [os.path.abspath(p) if p else os.getcwd() for p in sys.path]
    saved = {key: os.environ.get(key) for key in ("PYTHONPATH", "PYTHONSAFEPATH")}
    os.environ["PYTHONPATH"] = os.pathsep.join(path)
    os.environ["PYTHONSAFEPATH"] = "1"
    try:
        forkserver.ensure_running()
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _stop_fork_server(timeout: float = 0.25) -> None:
    """At exit: stop the fork server and reap it (nothing is left behind, and the CPU time of the workers it reaped
    is counted in this process's children's, where ``time`` and benchmarks look). It is asked to stop by closing
    its "alive" pipe, and killed if it has not stopped within ``timeout`` s: a process the caller forked still
    holds that pipe, or the server is still loading (a run that failed at once). Never blocks longer."""
    from multiprocessing import forkserver, util

    fs = getattr(forkserver, "_forkserver", None)
    pid = getattr(fs, "_forkserver_pid", None)
    if pid is None:
        return
    with fs._lock:
        try:
            if fs._forkserver_alive_fd is not None:
                os.close(fs._forkserver_alive_fd)
            deadline = time.monotonic() + timeout
            while not os.waitpid(pid, os.WNOHANG)[0]:
                if time.monotonic() > deadline:
                    os.kill(pid, signal.SIGTERM)
                    os.waitpid(pid, 0)
                    break
                time.sleep(0.002)
        except OSError:  # (already reaped elsewhere)
            pass
        address = fs._forkserver_address
        fs._forkserver_pid = fs._forkserver_alive_fd = fs._forkserver_address = None
        if address and not util.is_abstract_socket_namespace(address):
            try:
                os.unlink(address)
            except OSError:
                pass


def prestart(workers: int) -> None:
    """Start the fork server now (it loads :mod:`dataclean.exec.preload` while the caller goes on) when a pool of
    ``workers`` will be needed."""
    if workers > 1:
        _ensure_server()


def _set_environ(environ: dict) -> None:
    """A worker's environment is the driver's when its pool starts (the fork server's is the driver's when the
    server started): ``DATACLEAN_*`` switches and failpoints set later by the caller reach the workers."""
    for key in set(os.environ) - set(environ):
        del os.environ[key]
    os.environ.update(environ)


class LocalExecutor:
    name = "local"

    def __init__(self, workers: int = 1):
        if workers < 1:
            raise ValueError("workers must be >= 1")
        self.workers = workers
        self._pool: ProcessPoolExecutor | None = None

    def map(self, fn: Callable, specs: Sequence, on_done: Callable[[dict], None] | None = None) -> list:
        results: list = [None] * len(specs)
        if self.workers == 1 or len(specs) <= 1:
            for i, spec in enumerate(specs):
                results[i] = fn(spec)
                if on_done:
                    on_done(results[i])
            return results
        pool = self._get_pool()
        futures = {pool.submit(fn, spec): i for i, spec in enumerate(specs)}
        try:
            for fut in as_completed(futures):
                results[futures[fut]] = fut.result()
                if on_done:
                    on_done(results[futures[fut]])
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise
        return results

    def _get_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            _ensure_server()
            self._pool = ProcessPoolExecutor(self.workers, mp_context=_context(),
                                             initializer=_set_environ, initargs=(dict(os.environ),))
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
