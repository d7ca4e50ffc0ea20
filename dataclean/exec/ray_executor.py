"""The Ray executor: the same task functions as :class:`~dataclean.exec.local.LocalExecutor`, as Ray tasks.

Nothing about a run changes with the executor but where the tasks execute: every task function is a plain
function of a picklable spec that writes its outputs atomically and then its marker, so

* a task that dies with its worker (a killed process, a lost node) is simply run again by Ray
  (``max_retries``, Ray's retry of system failures): its earlier attempt left at most temporary files, which
  the new attempt clears first;
* a killed driver is a killed run: the rerun of the same command (with either executor) skips every task whose
  marker is there, exactly as with the local executor;
* results come back in task order, whatever order tasks finish in, so the output does not depend on the
  cluster's timing.

Every worker must see the output folder at the same path (one machine, or a shared file system such as NFS or
Lustre; see docs/scaling.md) and have dataclean installed in the same version as the driver.
"""
from __future__ import annotations

import os
from typing import Callable, Sequence


class RayExecutorError(RuntimeError):
    """Ray is missing or the cluster cannot be reached."""


class RayExecutor:
    name = "ray"

    def __init__(self, address: str | None = None, workers: int | None = None, max_retries: int = 3):
        """Connect to the cluster at ``address`` (``"auto"``, ``"ray://host:10001"``, ``"host:6379"``), or start a
        local one with ``workers`` CPUs when ``address`` is None. An already initialised Ray (a library user's
        own ``ray.init``) is used as it is and left running by :meth:`close`."""
        try:
            import ray
        except ImportError:
            raise RayExecutorError("the ray executor needs Ray: pip install 'dataclean[ray]'") from None
        self._ray = ray
        self.max_retries = int(max_retries)
        self._owns = False
        if not ray.is_initialized():
            kwargs = dict(include_dashboard=False, logging_level="WARNING", log_to_driver=True,
                          configure_logging=True)
            if address:
                _check_reachable(address)
                kwargs["address"] = address
            else:
                kwargs["num_cpus"] = workers or os.cpu_count() or 1
            try:
                ray.init(**kwargs)
            except (ConnectionError, RuntimeError, ValueError) as exc:
                raise RayExecutorError(f"cannot start or reach the Ray cluster{' at ' + address if address else ''}: "
                                       f"{exc}") from None
            self._owns = True
        self.workers = int(ray.cluster_resources().get("CPU", 1))
        self._remote: dict[Callable, object] = {}

    def _remote_fn(self, fn: Callable):
        if fn not in self._remote:
            # one CPU per task, as the local executor's one process per task; a worker that dies (killed, OOM,
            # node lost) has its task rerun up to max_retries times; an exception raised by the task itself is
            # not retried: it is an answer (a write error, a bug) and goes to the driver as the local pool's does
            self._remote[fn] = self._ray.remote(num_cpus=1, max_retries=self.max_retries,
                                                retry_exceptions=False)(fn)
        return self._remote[fn]

    def map(self, fn: Callable, specs: Sequence, on_done: Callable[[dict], None] | None = None) -> list:
        ray = self._ray
        if not specs:
            return []
        remote = self._remote_fn(fn)
        refs = [remote.remote(spec) for spec in specs]
        index = {ref: i for i, ref in enumerate(refs)}
        results: list = [None] * len(specs)
        pending = list(refs)
        try:
            while pending:
                done, pending = ray.wait(pending, num_returns=1)
                for ref in done:
                    try:
                        results[index[ref]] = ray.get(ref)
                    except ray.exceptions.RayTaskError as exc:
                        raise exc.as_instanceof_cause() from None
                    if on_done:
                        on_done(results[index[ref]])
        except BaseException:
            for ref in pending:
                ray.cancel(ref, force=True)
            raise
        return results

    def reduce_tasks(self, jobs: int) -> int:
        """One task per partition: the cluster's worker count may change, and Ray reruns a failed task whole."""
        return jobs

    def close(self) -> None:
        if self._owns and self._ray.is_initialized():
            self._ray.shutdown()
            self._owns = False


def _check_reachable(address: str, timeout: float = 10.0) -> None:
    """Fail fast on a ``host:port`` or ``ray://host:port`` nobody listens on (``ray.init`` would retry for
    minutes); ``auto`` and other forms are left to Ray."""
    import socket

    hostport = address[len("ray://"):] if address.startswith("ray://") else address
    host, sep, port = hostport.rpartition(":")
    if not sep or not port.isdigit() or not host:
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=timeout).close()
    except OSError as exc:
        raise RayExecutorError(f"cannot start or reach the Ray cluster at {address}: {exc.strerror or exc}") from None
