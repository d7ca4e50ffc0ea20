"""The local executor: a process pool (or the calling process when ``workers == 1``).

Results come back in task order whatever order tasks finish in, so nothing downstream depends on timing.
"""
from __future__ import annotations

import atexit
import multiprocessing
import os
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


def _stop_fork_server() -> None:
    """At exit: stop the fork server and wait for it (as for any child: nothing is left behind, and the CPU time
    of the workers it reaped is counted in this process's children's, where ``time`` and benchmarks look)."""
    from multiprocessing import forkserver

    stop = getattr(getattr(forkserver, "_forkserver", None), "_stop", None)
    if stop is not None:
        try:
            stop()
        except OSError:
            pass


def prestart(workers: int) -> None:
    """Start the fork server now (it loads :mod:`dataclean.exec.preload` while the caller goes on) when a pool of
    ``workers`` will be needed."""
    if workers > 1 and "forkserver" in multiprocessing.get_all_start_methods():
        from multiprocessing import forkserver

        _context()
        forkserver.ensure_running()


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
            self._pool = ProcessPoolExecutor(self.workers, mp_context=_context(),
                                             initializer=_set_environ, initargs=(dict(os.environ),))
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
