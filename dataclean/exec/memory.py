"""Memory: one budget for the whole process tree, and giving freed memory back between tasks.

``memory_limit`` (``dataclean run --memory-limit``) bounds the resident memory of the run's process tree: the
driver, the local pool's fork server and workers, and every DuckDB connection among them. :func:`plan` cuts the
workers to those that fit it; the DuckDB limits are derived when each connection opens, from the budget less
what the tree holds at that moment (:meth:`MemoryPlan.duckdb_limit`), so they follow what the pipeline's
models and batches really take instead of a guess.

A worker of the local pool lives for the whole run. What a task frees stays in the allocators' caches
(Arrow's mimalloc pool, glibc's arenas) and counts in the worker's RSS until the next task reuses it: after
the global step's reduce, gather and verification tasks the two idle workers of a 3.1M-document run held
550-600 MiB each, against ~300 MiB in pass 1, while the driver ran its own DuckDB step beside them.
:func:`give_back` returns those caches after each task.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import sys
from dataclasses import dataclass

from dataclean.sizes import mib, parse_size

_LIBC: object = None  # ctypes.CDLL of the C library once looked up; False where there is no malloc_trim


def _malloc_trim() -> None:
    global _LIBC
    if _LIBC is None:
        _LIBC = False
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
                libc.malloc_trim.argtypes = [ctypes.c_size_t]
                _LIBC = libc
            except (OSError, AttributeError):  # (musl has no malloc_trim)
                pass
    if _LIBC:
        _LIBC.malloc_trim(0)  # type: ignore[attr-defined]


def give_back() -> None:
    """Return the memory freed so far to the system: Arrow's pool, then the C heap."""
    import pyarrow as pa

    pa.default_memory_pool().release_unused()
    _malloc_trim()


# ------------------------------------------------------------------ the machine and the process tree

def usable_memory() -> int:
    """The memory this process may use: the machine's (``MemTotal``), or its cgroup's limit when lower."""
    total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") if hasattr(os, "sysconf") else 0
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as fh:
                text = fh.read().strip()
        except OSError:
            continue
        if text.isdigit() and 0 < int(text) < (total or 1 << 62):
            total = int(text)
    return total or 8 << 30


def _children(pid: int) -> list[int]:
    kids: list[int] = []
    try:
        threads = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return kids
    for tid in threads:
        try:
            with open(f"/proc/{pid}/task/{tid}/children", "rb") as fh:
                kids.extend(int(x) for x in fh.read().split())
        except (OSError, ValueError):
            pass
    return kids


def tree_rss() -> int | None:
    """The resident memory of this process and all its descendants (the fork server, the workers), in bytes;
    None where /proc cannot tell (not Linux)."""
    if not os.path.exists(f"/proc/{os.getpid()}/task"):
        return None
    page = os.sysconf("SC_PAGE_SIZE")
    total, stack, seen = 0, [os.getpid()], set()
    while stack:
        pid = stack.pop()
        if pid in seen:
            continue
        seen.add(pid)
        try:
            with open(f"/proc/{pid}/statm", "rb") as fh:
                total += int(fh.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            continue
        stack.extend(_children(pid))
    return total


# ------------------------------------------------------------------ the budget

#: Measured on this project's 2-core machine (benchmarks/bench_memory.py, RSS): the driver with dataclean's
#: imports and a built pipeline 240-250 MiB; the local pool's fork server 197 MiB and Python's resource
#: tracker 14; a pass-1 worker of the dedup pipeline 250-310 MiB, of the default pipeline (language ID and
#: quality models, word lists) ~350-450. A worker is planned at its base plus its model files plus a batch.
DRIVER = 260 << 20
POOL = 215 << 20
WORKER = 300 << 20
BATCH_BYTES_PER_ROW = 16 << 10  # a 4,096-row batch: ~64 MiB while the stages hold copies of its texts
#: The share of what is free that DuckDB is given: its memory_limit bounds its buffer manager, not every
#: allocation (measured: a driver at memory_limit 1GB peaked at 1,009 MiB over its base), and the driver's
#: own arrays (edges, components) live beside it.
DUCKDB_SHARE = 0.6
DUCKDB_MIN = 64 << 20


@dataclass(frozen=True)
class MemoryPlan:
    """One run's memory budget (``memory_limit``) and what is derived from it: the workers that fit, and the
    DuckDB limits of the global step, the reduce tasks and the statistics, computed when each starts from
    what the process tree holds then (:meth:`duckdb_limit`). An explicit ``global.duckdb_memory_limit`` or
    ``global.task_memory_limit`` wins over its derived value."""

    budget: int
    workers: int
    driver_limit: str | None = None  # explicit global.duckdb_memory_limit
    task_limit: str | None = None  # explicit global.task_memory_limit
    notes: tuple[str, ...] = ()

    def share(self, parts: int = 1) -> int:
        """Bytes for each of ``parts`` steps about to run side by side: :data:`DUCKDB_SHARE` of the budget less
        what the process tree holds now."""
        held = tree_rss()
        if held is None:  # (no /proc: the planned bases)
            held = DRIVER + (POOL + self.workers * WORKER if self.workers > 1 else 0)
        return int(max(0, self.budget - held) * DUCKDB_SHARE / max(1, parts))

    def duckdb_limit(self, parts: int = 1, explicit: str | None = None) -> str:
        """The memory_limit of each of ``parts`` DuckDB connections about to run side by side (the driver's: 1;
        the reduce tasks: one per worker): :meth:`share`, at least :data:`DUCKDB_MIN`."""
        if explicit is not None:
            return explicit
        return mib(max(DUCKDB_MIN, self.share(parts)))

    @property
    def driver(self) -> str:
        return self.duckdb_limit(1, self.driver_limit)

    @property
    def task(self) -> str:
        return self.duckdb_limit(self.workers, self.task_limit)


def worker_bytes(cfg: dict) -> int:
    """What one pass-1 worker is planned to hold: its base, the model files the config names, a batch."""
    from dataclean.fingerprint import model_files_digest

    models = 0
    for path in model_files_digest(cfg):
        try:
            models += os.path.getsize(path) if os.path.isfile(path) else _folder_size(path)
        except OSError:
            pass
    return WORKER + models + int(cfg["input"]["batch_rows"]) * BATCH_BYTES_PER_ROW


def _folder_size(path: str) -> int:
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)


def plan(cfg: dict, workers: int, local: bool = True) -> MemoryPlan:
    """The plan of a run of ``workers`` workers under ``cfg``'s ``memory_limit`` (``auto``: 80% of
    :func:`usable_memory`, DuckDB's own default share). The workers are cut to those that fit, with a note; a
    budget that does not fit one worker is a ValueError saying the least that does. ``local``: the local pool
    (its processes count); Ray's workers are the cluster's (the budget is then the driver's)."""
    value = cfg.get("memory_limit", "auto")
    budget = int(usable_memory() * 0.8) if value in (None, "auto") else parse_size(value, "memory_limit")
    g = cfg["global"]
    explicit = {k: (None if g[k] in (None, "auto") else str(g[k])) for k in ("duckdb_memory_limit", "task_memory_limit")}
    notes: list[str] = []
    fit = workers
    if local:
        one = worker_bytes(cfg)
        least = DRIVER + one + DUCKDB_MIN  # one worker runs in the driver's own process
        if budget < least:
            raise ValueError(f"memory_limit {_gb(budget)} is less than one worker needs ({_gb(least)}: the driver, "
                             f"a worker's models and a batch of {cfg['input']['batch_rows']:,} rows, DuckDB's least); "
                             f"give at least --memory-limit {_gb(least, up=True)}, or a smaller input.batch_rows")
        if workers > 1:
            fit = max(1, min(workers, int((budget - DRIVER - POOL - DUCKDB_MIN) // one)))
        if fit < workers:
            notes.append(f"memory_limit {_gb(budget)} fits {fit} of the {workers} workers asked (each is planned at "
                         f"{one / 2**20:,.0f} MiB); running {fit}. Raise --memory-limit to use them all")
    return MemoryPlan(budget, fit, explicit["duckdb_memory_limit"], explicit["task_memory_limit"], tuple(notes))


def _gb(n: int, up: bool = False) -> str:
    gb = n / 1e9
    return f"{(int(gb * 10) + (1 if up else 0)) / 10:.1f}GB" if gb >= 1 or up else f"{n / 1e6:,.0f}MB"
