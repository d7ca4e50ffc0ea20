"""The global step's shuffle: key rows written partitioned by pass 1, reduced partition by partition by tasks.

The global decisions that group documents by a key — ids (``duplicate_id``), exact content hashes
(``exact_duplicate``), MinHash band hashes (near-duplicate candidates) — do not need the whole corpus in
one place: only the groups with two or more members matter, and a group lives entirely in the partition of
its key. So:

1. **pass 1** (each task, for its own input shard) writes, for each such *kind*, one file
   ``_work/pass1/TTTTT/shuffle-KIND.parquet`` of narrow key rows (the key, ``doc_key``, what the decision
   needs), sorted by ``partition = key mod global.partitions``, one row group per partition;
2. **reduce tasks** (run by the executor: one per worker of the local pool, each over its share of the partitions;
   one per partition on Ray; every kind of a task's partitions on one DuckDB connection) read each partition from every pass-1 task's
   file — DuckDB prunes the other row groups by their statistics —, keep the rows of the keys that occur at
   least twice, in DuckDB under ``global.task_memory_limit`` (spilling to the task's own temporary folder), and
   write them to ``_work/global/cand/KIND/part-PPPPP.parquet``;
3. **the driver** reads only these candidate rows: it applies the removals of the earlier global stages (a
   document removed as a duplicate id is no member of an exact group), makes the decisions (smallest id
   kept, star edges of LSH buckets, union-find) and writes the removal list.

A key's rows all land in one partition whatever the number of partitions, so the candidate rows, and every
decision made from them, are the same for any ``global.partitions`` and any number of workers.
"""
from __future__ import annotations

import hashlib
import os
import shutil
import time
from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from dataclean.dedup.keys import xxh3_64_of
from dataclean.failpoints import failpoint
from dataclean.io.fs import files_in
from dataclean.io.readers import origin_ids
from dataclean.io.writers import (
    WORK_CODEC,
    atomic_write_table,
    injected_failure,
    remove_quietly,
    tmp_name,
    write_errors,
    write_json_atomic,
)
from dataclean.layout import Layout, load_marker, shuffle_file_name as file_name
from dataclean.sql import sql_list, sql_string

PARTITION = "partition"


# ------------------------------------------------------------------ the kinds' key rows (pass 1)

def id_rows(batch: pa.RecordBatch) -> tuple[pa.Table, np.ndarray]:
    """Key rows of the ``ids`` kind: ``(id, doc_key, origin)``, keyed by the 64-bit xxh3 of the id."""
    ids = batch.column("id")
    origin = origin_ids(batch.column("origin_file"), batch.column("origin_row"))
    return pa.table({"id": ids, "doc_key": batch.column("doc_key"), "origin": origin}), xxh3_64_of(ids)


ID_SCHEMA = pa.schema([("id", pa.string()), ("doc_key", pa.int64()), ("origin", pa.string())])
ID_REDUCE = "SELECT r.* FROM rows r SEMI JOIN (SELECT id FROM rows GROUP BY id HAVING count(*) > 1) g USING (id)"


# ------------------------------------------------------------------ writing (pass 1)

class ShuffleWriter:
    """Collects one pass-1 task's key rows of one kind; :meth:`commit` writes them partitioned, atomically."""

    def __init__(self, folder: str, kind: str, schema: pa.Schema, partitions: int):
        self.path = os.path.join(folder, file_name(kind))
        self.schema = schema
        self.partitions = int(partitions)
        self._tables: list[pa.Table] = []
        self._parts: list[np.ndarray] = []

    def add(self, rows: pa.Table, keys: np.ndarray) -> None:
        if rows.num_rows:
            self._tables.append(rows)
            self._parts.append((keys % np.uint64(self.partitions)).astype(np.int32))

    def commit(self) -> int:
        """Write the file (also when empty, so every reduce task finds one file per pass-1 task)."""
        if self._tables:
            table = pa.concat_tables(self._tables).cast(self.schema)
            part = np.concatenate(self._parts)
        else:
            table, part = self.schema.empty_table(), np.zeros(0, np.int32)
        self._tables, self._parts = [], []
        return write_grouped(table, part, PARTITION, self.path)[0]


def write_grouped(table: pa.Table, group: np.ndarray, column: str, path: str) -> tuple[int, list[int]]:
    """Write ``table`` to ``path`` atomically, sorted by ``group`` (stable: input order inside a group), with
    ``group`` as the int32 column ``column`` (with min/max statistics) and one row group per group, so a reader
    of one group reads just its row group from each file (DuckDB's ``WHERE column = g`` prunes the others by
    their statistics). Returns the row count and the groups in row-group order."""
    group = np.asarray(group, np.int32)
    # (numpy sorts 16-bit keys by radix: a stable argsort of 344,000 partition numbers 1.7 ms instead of 15)
    narrow = len(group) and group.min() >= 0 and group.max() < 1 << 15
    order = np.argsort(group.astype(np.int16) if narrow else group, kind="stable")
    if len(group) > 1 and (np.diff(group) < 0).any():  # (already in order: no take, the texts of a 25,000-row
        table = table.take(pa.array(order))           # gather were 0.3 s of it)
    table = table.append_column(pa.field(column, pa.int32()), pa.array(group[order]))
    starts = np.r_[0, np.flatnonzero(np.diff(group[order])) + 1] if len(order) else np.zeros(0, np.int64)
    sizes = np.diff(np.r_[starts, len(order)]).tolist()  # one row group per group
    atomic_write_table(table, path, row_group_sizes=sizes, statistics=(column,), codec=WORK_CODEC)
    return table.num_rows, group[order][starts].tolist()


# ------------------------------------------------------------------ reducing (the global step's tasks)

@dataclass(frozen=True)
class ReduceSpec:
    """One reduce task: for each ``(partition, kinds)`` of ``jobs``, that partition of each kind of ``kinds``
    (``(kind, sql)`` pairs: ``sql`` selects the candidate rows from the view ``rows``, the partition's key rows),
    over the pass-1 outputs of ``tasks``."""

    jobs: tuple[tuple[int, tuple[tuple[str, str], ...]], ...]
    out: str
    tasks: tuple[int, ...]
    memory_limit: str
    fingerprint: str
    temp_root: str | None = None  # where the task's DuckDB spills (a subfolder); None: OUT/_work/duckdb_tmp


def candidates_dir(lay: Layout, kind: str) -> str:
    return lay.p("_work", "global", "cand", kind)


def marker_name(kind: str, partition: int) -> str:
    return f"global-cand-{kind}-{partition:05d}"


def reduce_task(spec: ReduceSpec) -> list[dict]:
    """Turn each job's partition of key rows of each kind into candidate rows (keys seen at least twice), each
    written atomically, then its marker; a partition and kind whose marker is there already (a task run again
    after its worker died) is not redone. Returns one result per partition and kind.

    The jobs of a task share one DuckDB connection, closed at its end: opening one costs ~10 ms, a third of a
    reduce on the bench corpus, whose 24 partitions × kinds took 0.52 s as 24 tasks on 2 workers and 0.40 s as
    8 (one per partition); :func:`dataclean.exec.global_step.run_reduce_tasks` gives a local pool one task per
    worker. The task spills to ``spill_folder(spec.out, first partition)``."""
    lay = Layout(spec.out)
    todo, results = [], {}
    for partition, kinds in spec.jobs:
        for kind, sql in kinds:
            done = finished(lay, kind, partition, spec.fingerprint, spec.tasks)
            if done is None:
                todo.append((partition, kind, sql))
            results[partition, kind] = done
    if todo:
        spill = spill_folder(spec, spec.jobs[0][0])
        os.makedirs(spill, exist_ok=True)
        try:
            con = duckdb_connection(spec.memory_limit, 1, spill)  # one CPU per task, like every task
            try:
                for partition, kind, sql in todo:
                    results[partition, kind] = _reduce_kind(con, lay, spec, partition, kind, sql)
            finally:
                con.close()
        finally:
            shutil.rmtree(spill, ignore_errors=True)
    return list(results.values())


def spill_folder(spec: ReduceSpec, partition: int) -> str:
    """The temporary folder of the reduce task that starts with ``partition``: named after the run folder too, as
    a configured ``global.temp_directory`` may be shared by other runs (:func:`clear_spill_folders`)."""
    return os.path.join(_temp_root(spec.temp_root, spec.out), f"{_spill_prefix(spec.out)}{partition:05d}")


def clear_spill_folders(out: str, temp_root: str | None) -> None:
    """Remove what reduce tasks of the run in ``out`` left in their temporary folders (a killed run's)."""
    for path in files_in(_temp_root(temp_root, out), _spill_prefix(out) + "*"):
        shutil.rmtree(path, ignore_errors=True)


def _temp_root(temp_root: str | None, out: str) -> str:
    return temp_root or Layout(out).p("_work", "duckdb_tmp")


def _spill_prefix(out: str) -> str:
    return "reduce-" + hashlib.sha256(os.path.abspath(out).encode()).hexdigest()[:12] + "-"


def finished(lay: Layout, kind: str, partition: int, fingerprint: str, tasks) -> dict | None:
    """The marker of ``kind``'s ``partition`` if it was reduced for this run (``fingerprint``) from the pass-1
    ``tasks``, else None."""
    m = load_marker(lay, marker_name(kind, partition))
    return m if m and m.get("fingerprint") == fingerprint and m.get("tasks") == list(tasks) else None


def _reduce_kind(con, lay: Layout, spec: ReduceSpec, partition: int, kind: str, sql: str) -> dict:
    started = time.time()
    folder = candidates_dir(lay, kind)
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"part-{partition:05d}.parquet")
    tmp = tmp_name(path)
    files = [os.path.join(lay.pass1_dir(t), file_name(kind)) for t in spec.tasks]
    try:
        with write_errors(path):
            con.execute(f"CREATE OR REPLACE TEMP VIEW rows AS SELECT * EXCLUDE ({PARTITION}) "
                        f"FROM read_parquet({sql_list(files)}) WHERE {PARTITION} = {int(partition)}")
            injected_failure(path)
            # (COPY answers with the number of rows it wrote)
            rows = con.execute(f"COPY ({sql} ORDER BY ALL) TO {sql_string(tmp)} "
                               "(FORMAT parquet, COMPRESSION zstd)").fetchall()[0][0]
            os.replace(tmp, path)
    except BaseException:
        remove_quietly(tmp)
        raise
    failpoint(f"reduce-{kind}-{partition}")  # candidates written, marker not yet
    result = {"kind": kind, "partition": partition, "rows": rows, "tasks": list(spec.tasks),
              "fingerprint": spec.fingerprint, "seconds": round(time.time() - started, 3)}
    write_json_atomic(result, lay.marker(marker_name(kind, partition)))
    return result


def candidates_files(lay: Layout, kind: str) -> list[str]:
    """The candidate files of ``kind`` (every reduce task writes one, also when empty)."""
    return files_in(candidates_dir(lay, kind), "part-*.parquet")


def clear_candidates(lay: Layout) -> None:
    shutil.rmtree(lay.p("_work", "global", "cand"), ignore_errors=True)
    for stale in files_in(lay.p("_work", "markers"), "global-cand-*.json"):
        os.remove(stale)


def duckdb_connection(memory_limit: str, threads: int, temp_directory: str):
    """An in-memory DuckDB for the global step (the driver's, or a reduce task's): at most ``memory_limit``,
    ``threads`` threads, spilling to ``temp_directory``, free to reorder rows (every result that is written is
    ordered explicitly)."""
    import duckdb

    con = duckdb.connect(":memory:")
    # No progress bar: DuckDB turns its bar on where ``__main__`` has no file when duckdb is imported (a notebook,
    # ``python -c``, and the fork server every local worker comes from), and prints it with \r on stdout for any
    # query over 2 s, into the caller's output. Set first, before any statement that could be slow.
    con.execute("SET enable_progress_bar = false")
    con.execute(f"SET memory_limit = {sql_string(str(memory_limit))}")
    con.execute(f"SET threads = {int(threads)}")
    con.execute(f"SET temp_directory = {sql_string(temp_directory)}")
    con.execute("SET preserve_insertion_order = false")
    # DuckDB's allocator keeps what a finished query freed until the connection closes (a 600 MiB-limited join
    # left the driver 390 MiB larger, with duckdb_memory() at 0): its background threads give it back within
    # a second, so the driver's later steps and the memory budget (exec/memory.py) see what it really holds.
    con.execute("SET allocator_background_threads = true")
    return con
