"""The executor interface: what the runner, the global step and the global stages may ask of whatever runs
their tasks. :class:`~dataclean.exec.local.LocalExecutor` (a process pool) and
:class:`~dataclean.exec.ray_executor.RayExecutor` implement it; a task is a module-level function of one
picklable spec that writes its outputs atomically and then its marker, so any executor may run it twice."""
from __future__ import annotations

from typing import Callable, Protocol, Sequence, runtime_checkable


@runtime_checkable
class Executor(Protocol):
    #: ``"local"`` or ``"ray"``: written to the manifest.
    name: str
    #: How many tasks run at once (the pool's processes, the cluster's CPUs): stages size their chunks by it.
    workers: int

    def map(self, fn: Callable, specs: Sequence, on_done: Callable[[dict], None] | None = None) -> list:
        """``fn(spec)`` for every spec, results in the order of ``specs`` whatever order the tasks finish in;
        ``on_done(result)`` as each finishes. A task whose worker dies is run again."""

    def reduce_tasks(self, jobs: int) -> int:
        """Into how many tasks the global step should deal ``jobs`` partition reductions."""

    def close(self) -> None:
        """Stop the workers this executor started."""
