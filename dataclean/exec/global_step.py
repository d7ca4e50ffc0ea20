"""The global step: decisions that need the whole corpus, out-of-core in DuckDB.

It reads only the narrow columns it needs from the pass-1 survivor files (DuckDB projects Parquet columns),
works under a share of the run's memory budget (:mod:`dataclean.exec.memory`; or ``global.duckdb_memory_limit``
when set) and spills to ``global.temp_directory``. Its only product for
pass 2 is one removal list sorted by ``doc_key`` (so each pass-2 task reads just its own row groups).

Before any stage's global decision, ids are made unique: when two records share an id, the one that comes
first in input order (smallest ``doc_key``) stays and the others are removed as ``duplicate_id``.

The decisions that group documents by a key (ids, exact content hashes, MinHash bands) start from candidate
rows made by reduce tasks over the key partitions, run by the executor (see :mod:`dataclean.exec.shuffle`);
the driver reads only those candidates for them.
"""
from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from typing import Callable

import duckdb
import pyarrow.parquet as pq

from dataclean.exec import aggregate, memory, shuffle
from dataclean.exec.base import Executor
from dataclean.exec.memory import MemoryPlan
from dataclean.failpoints import failpoint
from dataclean.io.writers import tmp_name, write_json_atomic
from dataclean.layout import Layout
from dataclean.pipeline import build_stage
from dataclean.sections import GlobalSection
from dataclean.sql import sql_list, sql_string


@dataclass
class GlobalContext:
    """What a global stage (:class:`~dataclean.stages.base.GlobalStage`) sees: the DuckDB connection (a
    ``removals`` table, the ``docs`` view of pass-1 survivors with the columns it asked for), the resolved
    config, the output layout, and the only way it reaches the executor: :meth:`map` and :attr:`workers`."""

    con: duckdb.DuckDBPyConnection
    cfg: dict
    lay: Layout
    columns: set[str]
    candidates: dict[str, str]  # shuffle kind -> DuckDB view of its candidate rows still alive
    tasks: list[int] = field(default_factory=list)  # the pass-1 tasks, for per-task map tasks (exec/aggregate.py)
    executor: Executor | None = None  # runs the map tasks; None: in this process
    removed_path: str | None = None  # the removals so far (doc_key, sorted), written before a stage that maps
    source: str = "alive"  # the view global_removals reads: the candidates still alive when the stage shuffles
    #: Rebuilds a stage from its recipe entry in a task's process (a task spec carries it: the stages do not
    #: import the pipeline that builds them).
    build_stage: Callable[[dict], object] = build_stage
    memory: MemoryPlan | None = None  # the run's budget: what a task of the stage may hold (task_memory_bytes)

    def task_memory_bytes(self) -> int | None:
        """What each of :attr:`workers` tasks about to run side by side may hold now (None: no budget)."""
        return None if self.memory is None else self.memory.share(self.workers)

    @property
    def workers(self) -> int:
        return max(1, int(self.executor.workers)) if self.executor is not None else 1

    def run_map(self, kind: str, group: str, value: str | None = None, params: dict | None = None):
        """:func:`dataclean.exec.aggregate.run_map`: a map task of ``kind`` per pass-1 task, tables concatenated."""
        return aggregate.run_map(self, kind, group, value, params)

    def rank_cutoffs(self, hist, keeps: dict[str, int], value: str, group: str) -> dict[str, tuple[float, str]]:
        """:func:`dataclean.exec.aggregate.rank_cutoffs`: the (score, id) at rank ``keeps[g]`` of each group."""
        return aggregate.rank_cutoffs(self, hist, keeps, value, group)

    def map(self, fn: Callable, specs: list) -> list:
        """``fn(spec)`` for every spec, through the executor (in this process without one), in order."""
        return self.executor.map(fn, specs) if self.executor is not None else [fn(spec) for spec in specs]


def connect(cfg: dict, lay: Layout, memory_limit: str) -> duckdb.DuckDBPyConnection:
    g = GlobalSection.of(cfg)
    tmp = g.temp_directory or os.path.join(lay.work, "duckdb_tmp")
    os.makedirs(tmp, exist_ok=True)
    return shuffle.duckdb_connection(memory_limit, g.duckdb_threads, tmp)


def memory_plan(cfg: dict, executor: Executor | None, mem: MemoryPlan | None) -> MemoryPlan:
    """``mem``, or the plan of ``cfg``'s budget for ``executor``'s workers."""
    if mem is not None:
        return mem
    workers = max(1, int(executor.workers)) if executor is not None else 1
    return memory.plan(cfg, workers, local=getattr(executor, "name", "local") == "local")


def shuffle_kinds(pipeline) -> dict[str, tuple[str, object]]:
    """kind -> (reduce SQL, stage or None for ids) of every key-grouped decision of ``pipeline``."""
    kinds: dict[str, tuple[str, object]] = {"ids": (shuffle.ID_REDUCE, None)}
    for stage in pipeline.global_stages:
        if stage.shuffles:
            kinds[stage.name] = (stage.shuffle_reduce, stage)
    return kinds


def run_reduce_tasks(lay: Layout, cfg: dict, pipeline, fingerprint: str, tasks: list[int], executor: Executor | None,
                     on_done=None, mem: MemoryPlan | None = None) -> list[dict]:
    """Reduce every partition of every kind whose marker is missing, through ``executor``, in as many tasks as
    :meth:`~dataclean.exec.base.Executor.reduce_tasks` says (in this process: one). One result per partition
    and kind."""
    g = GlobalSection.of(cfg)
    jobs = []
    for p in range(int(g.partitions)):
        todo = []
        for kind, (sql, _) in shuffle_kinds(pipeline).items():
            if shuffle.finished(lay, kind, p, fingerprint, tasks) is None:
                todo.append((kind, sql))
        if todo:
            jobs.append((p, tuple(todo)))
    if not jobs:
        return []
    n = 1 if executor is None else executor.reduce_tasks(len(jobs))
    shuffle.clear_spill_folders(lay.root, g.temp_directory)  # (a killed run's)
    limit = memory_plan(cfg, executor, mem).task  # (each worker runs one reduce task at a time)
    specs = [shuffle.ReduceSpec(tuple(jobs[i::n]), lay.root, tuple(tasks), limit, fingerprint,
                                g.temp_directory) for i in range(n)]
    if executor is None:
        done = [shuffle.reduce_task(spec) for spec in specs]
    else:
        done = executor.map(shuffle.reduce_task, specs, on_done=on_done)
    return sorted((result for results in done for result in results), key=lambda r: r["partition"])


def global_step(lay: Layout, cfg: dict, pipeline, doc_files: list[str], fingerprint: str,
                tasks: list[int], executor=None, mem: MemoryPlan | None = None) -> dict:
    """The whole global step: reduce tasks (through ``executor``), then the driver's decisions (which run their
    map and verification tasks through it too), then the removal list."""
    started = time.time()
    kinds = shuffle_kinds(pipeline)
    mem = memory_plan(cfg, executor, mem)
    if doc_files:
        run_reduce_tasks(lay, cfg, pipeline, fingerprint, tasks, executor, mem=mem)
    con = connect(cfg, lay, mem.driver)  # (what the tree holds now, the reduce tasks' memory given back)
    os.makedirs(os.path.dirname(lay.removals), exist_ok=True)
    con.execute("CREATE TABLE removals (doc_key BIGINT, stage VARCHAR, rule VARCHAR, reason VARCHAR, "
                "value DOUBLE, threshold DOUBLE, detail VARCHAR, dup_of VARCHAR)")
    counts: dict[str, int] = {}
    if doc_files:
        available = set(pq.read_schema(doc_files[0]).names)
        needed = {"doc_key", "id", "origin_file", "origin_row"}
        for stage in pipeline.global_stages:
            needed.update(f.name for f in stage.signal_fields)
            needed.update(stage.global_columns)
        needed &= available
        cols = ", ".join(sorted(needed))
        cand_views = {}
        for i, kind in enumerate(kinds):
            con.execute(f"CREATE VIEW cand_{i} AS SELECT * FROM "
                        f"read_parquet({sql_list(shuffle.candidates_files(lay, kind))})")  # (a list: a folder named run[1] is no glob)
            cand_views[kind] = f"cand_{i}"
        ctx = GlobalContext(con, cfg, lay, needed, {}, tasks=list(tasks), executor=executor, memory=mem)
        con.execute(f"CREATE VIEW docs AS SELECT {cols} FROM read_parquet({sql_list(doc_files)})")
        con.execute(f"""
            INSERT INTO removals
            SELECT doc_key, 'ids', 'duplicate_id', 'duplicate_id', CAST(rn AS DOUBLE), 1.0,
                   'id also at ' || first_origin, id
            FROM (SELECT doc_key, id,
                         row_number() OVER (PARTITION BY id ORDER BY doc_key) AS rn,
                         first_value(origin) OVER (PARTITION BY id ORDER BY doc_key) AS first_origin
                  FROM {cand_views["ids"]})
            WHERE rn > 1
        """)
        counts["ids"] = con.execute("SELECT count(*) FROM removals").fetchall()[0][0]
        for stage in pipeline.global_stages:
            con.execute("CREATE OR REPLACE TEMP VIEW alive AS SELECT * FROM docs "
                        "ANTI JOIN removals USING (doc_key)")
            ctx.source = "alive"
            if stage.name in cand_views:  # a key-grouped decision: its candidates still alive
                con.execute(f"CREATE OR REPLACE TEMP VIEW alive_cand AS SELECT * FROM {cand_views[stage.name]} "
                            "ANTI JOIN removals USING (doc_key)")
                ctx.candidates = {stage.name: "alive_cand"}
                ctx.source = "alive_cand"
            stage.write_artifacts(con, ctx.source, lay.dedup)
            before = con.execute("SELECT count(*) FROM removals").fetchall()[0][0]
            if stage.uses_aggregates:  # its map tasks skip what earlier stages removed
                ctx.removed_path = aggregate.removals_so_far(con, lay, stage.name)
            stage.global_decide(ctx, "alive")
            after = con.execute("SELECT count(*) FROM removals").fetchall()[0][0]
            counts[stage.name] = after - before
            failpoint("global-mid")
        con.execute("CREATE OR REPLACE TEMP VIEW final AS SELECT * FROM docs ANTI JOIN removals USING (doc_key)")
        for stage in pipeline.global_stages:
            stage.write_final_artifacts(ctx, "final")  # e.g. what a later run dedups against
    tmp = tmp_name(lay.removals)
    con.execute(f"COPY (SELECT * FROM removals ORDER BY doc_key) TO {sql_string(tmp)} "
                f"(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 65536)")
    con.close()
    os.replace(tmp, lay.removals)
    failpoint("global-written")
    if not GlobalSection.of(cfg).temp_directory:  # a user-given temp folder is not ours to delete
        shutil.rmtree(os.path.join(lay.work, "duckdb_tmp"), ignore_errors=True)
    result = {"removed": counts, "fingerprint": fingerprint, "tasks": tasks, "seconds": round(time.time() - started, 3)}
    write_json_atomic(result, lay.marker("global"))
    return result
