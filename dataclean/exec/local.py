"""The local executor: a process pool (or the calling process when ``workers == 1``).

Results come back in task order whatever order tasks finish in, so nothing downstream depends on timing.

The pool's processes never outlive the driver: a driver killed by SIGKILL takes its fork server and every
worker with it (:func:`die_with_parent`, :func:`_start_worker`). A worker that dies under a task (the OOM
killer, any SIGKILL) does not end the run: the pool is made again and the tasks it had not finished are run
again, up to ``max_retries`` times for the task whose worker died (:meth:`LocalExecutor.map`).
"""
from __future__ import annotations

import atexit
import multiprocessing
import os
import signal
import struct
import sys
import threading
import time
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Callable, Sequence

from dataclean.exec.errors import RunError
from dataclean.exec.memory import give_back

PRELOAD = "dataclean.exec.preload"
DRIVER_ENV = "DATACLEAN_FORK_SERVER_DRIVER"  # the driver's pid, for its fork server only (see _ensure_server)
PR_SET_PDEATHSIG = 1  # <linux/prctl.h>
MAX_RETRIES = 2  # reruns of a task whose worker died (Ray's max_retries is 3; see LocalExecutor)


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


def _context_without_main():
    """:func:`_context`, but its workers do not run the caller's main module before their first task.

    ``multiprocessing`` makes each new worker import the parent's ``__main__`` again (as ``__mp_main__``), from
    ``sys.modules['__main__'].__file__`` (``init_main_from_path``) or its ``__spec__.name`` (``-m``), so that
    functions defined there can be unpickled (``spawn.get_preparation_data``, ``spawn.prepare``). A script that
    calls :func:`dataclean.run` at its top level, without ``if __name__ == "__main__":``, then runs the whole
    run again in every worker, which fails at once ("An attempt has been made to start a new process before the
    current process has finished its bootstrapping phase") and breaks the pool. The runner's tasks are
    dataclean's own functions: its workers need nothing from ``__main__``, so they are told to leave it alone
    (what the standard library does already for a ``__main__`` without a file: ``python -c``, stdin, a
    notebook). Where workers are spawned (no fork server), the standard behaviour is kept."""
    ctx = _context()
    if ctx.get_start_method() != "forkserver":
        return ctx
    return _NoMainContext()


def _popen_class():
    """The fork server's ``Popen`` without the main module in the preparation data (made on first use: the
    ``popen_forkserver`` module cannot be imported where there is no fork server)."""
    if "popen" not in _state:
        import io
        from multiprocessing import forkserver, popen_forkserver, reduction, spawn, util
        from multiprocessing.context import set_spawning_popen

        class Popen(popen_forkserver.Popen):
            def _launch(self, process_obj):  # CPython 3.11's popen_forkserver.Popen._launch, but the two pops
                prep_data = spawn.get_preparation_data(process_obj._name)
                prep_data.pop("init_main_from_path", None)
                prep_data.pop("init_main_from_name", None)
                buf = io.BytesIO()
                set_spawning_popen(self)
                try:
                    reduction.dump(prep_data, buf)
                    reduction.dump(process_obj, buf)
                finally:
                    set_spawning_popen(None)
                self.sentinel, w = forkserver.connect_to_new_process(self._fds)
                _parent_w = os.dup(w)  # (the child's sentinel of this process, as in the standard library)
                self.finalizer = util.Finalize(self, util.close_fds, (_parent_w, self.sentinel))
                with open(w, "wb", closefd=True) as f:
                    f.write(buf.getbuffer())
                self.pid = forkserver.read_signed(self.sentinel)

        _state["popen"] = Popen
    return _state["popen"]


if hasattr(multiprocessing.context, "ForkServerContext"):  # (not on Windows)
    class _NoMainProcess(multiprocessing.context.ForkServerProcess):
        """A fork server's process started by :func:`_popen_class`'s ``Popen``."""

        @staticmethod
        def _Popen(process_obj):
            return _popen_class()(process_obj)

    class _NoMainContext(multiprocessing.context.ForkServerContext):
        """The ``forkserver`` context (the same fork server) whose processes skip the main module."""

        Process = _NoMainProcess


def _ensure_server() -> None:
    """Start the fork server if it is not running, importing dataclean from where this process does: Python 3.11's
    fork server ignores the ``sys_path`` it is given and puts its working folder first, so it could load another
    copy of the package (a checkout in the current folder) than the driver's. It is started with this process's
    ``sys.path`` as ``PYTHONPATH`` and ``PYTHONSAFEPATH=1`` (no working folder in front), only for that moment;
    and with this process's pid in ``DATACLEAN_FORK_SERVER_DRIVER`` when it is started from the main thread,
    so that the server dies with the driver (:func:`serve_as_fork_server`).
    Nothing to do where workers are spawned (no fork server)."""
    from multiprocessing import forkserver

    if _context().get_start_method() != "forkserver":
        return
    path = [os.path.abspath(p) if p else os.getcwd() for p in sys.path]
    saved = {key: os.environ.get(key) for key in ("PYTHONPATH", "PYTHONSAFEPATH", DRIVER_ENV)}
    os.environ["PYTHONPATH"] = os.pathsep.join(path)
    os.environ["PYTHONSAFEPATH"] = "1"
    os.environ.pop(DRIVER_ENV, None)
    if threading.current_thread() is threading.main_thread():  # see die_with_parent: the parent is a thread
        os.environ[DRIVER_ENV] = str(os.getpid())
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


def stop_prestarted() -> None:
    """Stop a fork server :func:`prestart` started for a pool that will not be made after all (a memory budget
    that fits one worker: it runs in the driver's process)."""
    _stop_fork_server()


# ------------------------------------------------------------------ dying with the driver

_SERVER_PID: int | None = None  # in the fork server and the workers it forks: the fork server's pid


def die_with_parent(parent: int) -> None:
    """Have this process SIGKILLed by the kernel when its parent dies (Linux's ``PR_SET_PDEATHSIG``; elsewhere
    nothing), and exit at once when ``parent`` died already: this process was then re-parented (to init or a
    subreaper) before it asked, and no signal would ever come.

    The kernel sends the signal when the *thread* that forked this process ends, which is the parent's death
    only for its main thread: the fork server is tied to the driver only when the driver's main thread started
    it, and a worker (forked by the fork server's only thread) to the fork server. The chain does the rest: the
    driver dies, the kernel kills the fork server, then every worker it forked."""
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # (no prctl: the watch of the driver in each worker remains)
            pass
    if os.getppid() != parent:
        os.kill(os.getpid(), signal.SIGKILL)  # (as the kernel would have, had it been asked in time)


def serve_as_fork_server() -> None:
    """Called by :mod:`dataclean.exec.preload` in the fork server: die with the driver that started it (from
    its main thread: ``DATACLEAN_FORK_SERVER_DRIVER``), and remember this pid for the workers it forks."""
    global _SERVER_PID
    _SERVER_PID = os.getpid()
    driver = os.environ.pop(DRIVER_ENV, None)
    if driver:
        die_with_parent(int(driver))


def _exit_when_ready(sentinel) -> None:
    from multiprocessing.connection import wait as wait_for

    wait_for([sentinel])
    os._exit(1)


_worker: dict = {}  # in a worker: the write end of its pool's pipe of started tasks


def _start_worker(environ: dict, started) -> None:
    """A worker's initializer: the driver's environment (:func:`_set_environ`); death with the fork server that
    forked it (:func:`die_with_parent`, Linux); and, on every platform, a thread blocked on the driver's sentinel
    (a pipe the driver holds open while the worker lives: at its end, the driver is gone) that exits the worker
    then. Without these a killed driver's workers waited forever for their next task, holding the fork server's
    "alive" pipe open, so that the server lived on too. ``started`` is where it says which task it starts."""
    _set_environ(environ)
    if _SERVER_PID is not None:  # (None: a spawned worker, whose parent is the driver; or no preload)
        die_with_parent(_SERVER_PID)
    parent = multiprocessing.parent_process()
    if parent is not None and parent.sentinel is not None:
        threading.Thread(target=_exit_when_ready, args=(parent.sentinel,), name="dataclean-watch-driver",
                         daemon=True).start()
    _worker["started"] = started
    try:  # never wait on a full pipe: a start not told only makes a death's culprit less precise
        os.set_blocking(started.fileno(), False)
    except (OSError, AttributeError, ValueError):
        pass


_STARTED = struct.Struct("qq")  # (token, worker pid)


def _run_task(fn: Callable, token: int, spec):
    """Run ``fn(spec)`` in a worker, having told the driver that this worker (pid) started task ``token``."""
    conn = _worker.get("started")
    if conn is not None:
        try:  # one write of 20 bytes: atomic on a pipe, no lock that a killed worker could leave held
            conn.send_bytes(_STARTED.pack(token, os.getpid()))
        except OSError:
            pass
    try:
        return fn(spec)
    finally:
        give_back()  # what the task freed, before the worker idles or takes its next task


def _cause(code: int | None) -> str:
    if code is None:
        return "cause unknown"
    if code < 0:
        if -code == signal.SIGKILL:
            return f"killed by signal {-code}: out of memory?"
        try:
            return f"killed by signal {-code} ({signal.Signals(-code).name})"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _times(n: int) -> str:
    return "once" if n == 1 else f"{n} times"


def death_message(spec, index: int, causes: list[str]) -> str:
    """The one line for a task whose worker died at each of its ``len(causes)`` attempts (``causes``: how)."""
    task = getattr(spec, "task", index)
    path = getattr(spec, "input", None) or getattr(spec, "input_path", None)
    where = f" (input {path})" if isinstance(path, (str, os.PathLike)) else ""
    return (f"a worker died running task {task}{where} {_times(len(causes))} ({causes[-1]}); lower --workers or "
            "the batch size (input.batch_rows), then run the same command to resume")


# ------------------------------------------------------------------ the executor

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
    """Tasks in a pool of ``workers`` processes forked from the fork server, or in this process (``workers == 1``).

    A worker that dies under a task (the OOM killer, a SIGKILL) breaks the pool: every task it had not finished
    is run again in a new pool, and the task of the dead worker is charged an attempt. Tasks are atomic and
    idempotent (outputs written to temporary files, then renamed, then the marker), so an attempt cut short
    leaves at most temporary files that the next clears. A task charged ``max_retries + 1`` attempts stops the
    run with a :class:`~dataclean.exec.errors.RunError` of one line (how its worker died, what to do). Ray's
    tasks have ``max_retries`` 3 (Ray: "the maximum number of times that the remote function should be rerun
    when the worker process executing it crashes unexpectedly ... the default is 3"); here it is 2 by default,
    because a broken pool also cuts short the tasks of the workers that did not die (Ray reruns only the dead
    worker's), and a task whose worker is killed three times in a row is the task that needs the memory."""

    name = "local"

    def __init__(self, workers: int = 1, max_retries: int = MAX_RETRIES, import_main: bool = True):
        """``import_main``: each worker imports the caller's ``__main__`` first, as ``multiprocessing`` does, so
        that functions defined there can be run (the caller then needs ``if __name__ == "__main__":``); the
        runner's pool passes False unless its pipeline has a stage class defined in ``__main__``, so that a
        script without that guard works (:func:`_context_without_main`)."""
        if workers < 1:
            raise ValueError("workers must be >= 1")
        if max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        self.workers = workers
        self.max_retries = max_retries
        self.import_main = import_main
        self._pool: ProcessPoolExecutor | None = None
        self._processes: dict = {}  # the pool's processes by pid (its own dict: the exit codes of a broken pool)
        self._started_r = self._started_w = None  # the pool's pipe of started tasks (driver: read end)
        self._started: dict[int, int] = {}  # token -> pid of the worker that started it
        self._tokens = 0

    def map(self, fn: Callable, specs: Sequence, on_done: Callable[[dict], None] | None = None) -> list:
        results: list = [None] * len(specs)
        # Even one task goes to the pool (started ahead by the CLI): its workers load the kernels, so the driver
        # never imports numba (docs/measurements.md#local-pool-single-task), and a task's memory is never the
        # driver's.
        if self.workers == 1 or not specs:
            for i, spec in enumerate(specs):
                results[i] = fn(spec)
                if on_done:
                    on_done(results[i])
            return results
        todo = list(range(len(specs)))
        deaths: dict[int, list[str]] = {}  # task index -> how its worker died, attempt by attempt
        idle: list[str] = []  # the pool broke with no task started by a dead worker, nor any started at all
        while todo:
            todo = self._run_pool(fn, specs, todo, results, on_done, deaths, idle)
        return results

    def _run_pool(self, fn, specs, todo: list[int], results: list, on_done, deaths: dict, idle: list) -> list[int]:
        """Run the tasks ``todo`` in the pool; give the tasks to run again (none unless the pool broke)."""
        pool = self._get_pool()
        futures: dict = {}  # future -> (task index, token)
        broken = False
        try:
            for i in todo:
                self._tokens += 1
                futures[pool.submit(_run_task, fn, self._tokens, specs[i])] = (i, self._tokens)
        except BrokenProcessPool:  # (broke while tasks were submitted: the others run in the next pool)
            broken = True
        done: set[int] = set()

        def settle(fut) -> bool:  # a result taken (or a task's own exception raised); False: the pool broke
            if isinstance(fut.exception(), BrokenProcessPool):
                return False
            i = futures[fut][0]
            results[i] = fut.result()  # (a task's own exception is raised here, as it always was)
            done.add(i)
            if on_done:
                on_done(results[i])
            return True

        pending = set(futures)
        try:
            while pending and not broken:
                ready, pending = wait(pending, timeout=1.0, return_when=FIRST_COMPLETED)
                self._read_started()  # (often: the pipe holds a few thousand starts)
                for fut in ready:
                    broken = not settle(fut) or broken
                broken = broken or bool(getattr(pool, "_broken", False))
        except BaseException:
            for fut in futures:
                fut.cancel()
            raise
        finally:
            self._read_started()
        if not broken:
            for _, token in futures.values():
                self._started.pop(token, None)
            return []
        codes, started = self._close_broken_pool()  # (its manager thread has ended: every future is settled)
        for fut in pending:  # results that came in as the pool broke
            if fut.done() and not fut.cancelled():
                settle(fut)
        running = {(i, token) for i, token in futures.values() if i not in done and token in started}
        dead = {pid: code for pid, code in codes.items() if code is not None and code != -signal.SIGTERM}
        culprits = {(i, token) for i, token in running if started[token] in dead}
        if not culprits:  # (a worker died idle, or was SIGTERMed from outside, or no exit code: the running)
            culprits = running
        for i, token in sorted(culprits):
            pid = started[token]
            deaths.setdefault(i, []).append(_cause(dead.get(pid, codes.get(pid))))
            if len(deaths[i]) > self.max_retries:
                raise RunError(death_message(specs[i], i, deaths[i]))
        if not culprits:
            idle.append(_cause(next(iter(dead.values()), None)))
            main = getattr(sys.modules.get("__main__"), "__file__", None) if self.import_main else None
            if main and idle[-1].startswith("exit code"):  # (not killed: each worker failed importing the script)
                raise RunError(f"the workers' pool broke before any task ran ({idle[-1]}); each worker imports "
                               f"{main} first: put the code that runs at its top level under "
                               "`if __name__ == \"__main__\":`")
            if len(idle) > self.max_retries:
                raise RunError(f"the workers' pool broke {_times(len(idle))} before any task ran ({idle[-1]}); "
                               "lower --workers, then run the same command to resume")
        return [i for i in todo if i not in done]

    def _read_started(self) -> None:
        conn = self._started_r
        try:
            while conn is not None and conn.poll():
                token, pid = _STARTED.unpack(conn.recv_bytes())
                self._started[token] = pid
        except (OSError, EOFError):
            pass

    def _close_broken_pool(self) -> tuple[dict[int, int | None], dict[int, int]]:
        """Shut the broken pool down (its manager thread has terminated and joined every worker); give each
        worker's exit code by pid (negative: killed by that signal) and the pid of the worker of each started
        task by token."""
        processes = self._processes
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._read_started()
        started = dict(self._started)
        codes = {}
        for pid, proc in processes.items():
            try:
                codes[pid] = proc.exitcode
            except (OSError, ValueError):
                codes[pid] = None
        self._close_pipe()
        return codes, started

    def _get_pool(self) -> ProcessPoolExecutor:
        if self._pool is None:
            _ensure_server()
            ctx = _context() if self.import_main else _context_without_main()
            self._started_r, self._started_w = ctx.Pipe(duplex=False)
            self._pool = ProcessPoolExecutor(self.workers, mp_context=ctx, initializer=_start_worker,
                                             initargs=(dict(os.environ), self._started_w))
            processes = getattr(self._pool, "_processes", None)
            self._processes = processes if processes is not None else {}
        return self._pool

    def _close_pipe(self) -> None:
        for conn in (self._started_r, self._started_w):
            if conn is not None:
                conn.close()
        self._started_r = self._started_w = None
        self._processes = {}
        self._started.clear()

    def reduce_tasks(self, jobs: int) -> int:
        """One task per worker, the partitions dealt round-robin: the fewest DuckDB connections to open."""
        return min(jobs, self.workers)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
        self._close_pipe()
