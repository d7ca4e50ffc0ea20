"""What the local executor's fork server imports once, before it forks a worker per pool slot.

The local executor's workers are forked from a fork server (``multiprocessing``'s ``forkserver`` start
method), a clean process started by the driver that holds no DuckDB connection, no thread of the driver and no
open output file, so workers are as independent of the driver as spawned ones. What a spawned worker paid at
each start — importing dataclean's task modules (~0.25 s of CPU) and loading the compiled kernels from numba's
disk cache (~0.45 s: importing numba and setting up LLVM) — the fork server pays once per driver process, and
every worker of the run's pool (which stays up from pass 1 through the global step's tasks to pass 2) begins
with it done.

What the server reads at import stays as it was when it started (the first pool of the driver process, or
:func:`dataclean.exec.local.prestart`): numba's own settings (``NUMBA_DISABLE_JIT``, ``NUMBA_CACHE_DIR``), and
the package itself, which is imported from the driver's ``sys.path`` of that moment. Each pool's workers get
the driver's environment as it is when the pool starts, and ``DATACLEAN_*`` switches are read at each call, so
those follow; a change of numba's settings needs a new driver process.

Nothing here runs an Arrow compute kernel (the fork server starts no thread pool of its own), and each kernel
is loaded only once the first call of a worker needs it: warming them all up here was measured slower (the
server is ready later, and the workers gained nothing measurable).

The fork server dies with the driver: first thing here, before the imports, it asks the kernel for a SIGKILL at
the driver's death (:func:`dataclean.exec.local.serve_as_fork_server`); each worker it forks asks the same at
the fork server's death, so a killed driver leaves no process behind.
"""
from __future__ import annotations

import atexit
import os
import sys


def _in_fork_server() -> bool:
    """Is this module being imported by ``multiprocessing``'s fork server (its ``main`` is on the stack)?"""
    from multiprocessing import forkserver

    frame = sys._getframe()
    while frame is not None:
        if frame.f_code is forkserver.main.__code__:
            return True
        frame = frame.f_back
    return False


_SERVER = _in_fork_server()  # never in a driver that imports this module: its death and exit are its own
if _SERVER:
    from dataclean.exec import local

    local.serve_as_fork_server()

import dataclean.exec.aggregate  # noqa: E402,F401  (the task functions a worker unpickles)
import dataclean.exec.shuffle  # noqa: E402,F401
import dataclean.exec.tasks  # noqa: E402,F401
import dataclean.stages.dedup_minhash  # noqa: E402,F401


def _load_kernels() -> None:
    from dataclean.text import kernels

    if kernels.switched_off():
        return
    from dataclean.dedup import minhash

    kernels.enabled()  # the rule stages' kernels
    minhash.kernels_enabled()  # the MinHash kernels and their character tables


_load_kernels()


def _exit_now() -> None:
    """The fork server's exit, when the driver stops it: its workers are gone and it holds nothing to flush, so
    it skips the interpreter's teardown of numba, LLVM and Arrow (~0.2 s the driver would wait for)."""
    os._exit(0)


if _SERVER:
    atexit.register(_exit_now)  # (registered last, so run first; a worker leaves by os._exit, never runs it)
