"""The local executor: a process pool (or the calling process when ``workers == 1``).

Results come back in task order whatever order tasks finish in, so nothing downstream depends on timing.
"""
from __future__ import annotations

import multiprocessing
from concurrent.futures import ProcessPoolExecutor, as_completed
from typing import Callable, Sequence


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
            # spawn: workers must not inherit DuckDB or thread state from the driver.
            self._pool = ProcessPoolExecutor(self.workers, mp_context=multiprocessing.get_context("spawn"))
        return self._pool

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None
