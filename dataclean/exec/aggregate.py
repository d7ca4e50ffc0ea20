"""Per-task aggregates for the global step: what the driver needs of every document, summed task by task.

A global stage that needs a number over the whole corpus (the quality score below which a source's best
``top_fraction`` ends, the tokens a mixture source has) does not read the corpus on the driver: one *map task*
per pass-1 task reads that task's surviving documents (only the columns asked for), drops those the earlier
global stages removed (the removals so far, sorted by ``doc_key``: a task reads only its own key range, as pass
2 does) and returns a small table; the driver adds the tables up. The map tasks run through the executor (Ray
tasks on a cluster); with the local executor they run in the driver, one after the other: each reads a few
narrow columns, and starting worker processes again would cost more.

Aggregates (``kind``):

* ``totals``: rows ``(group, docs, tokens)`` per value of a column (``n_tokens`` summed), e.g. documents and
  tokens per mixture source;
* ``score_histogram``: rows ``(group, prefix, docs)``: per group (source) the number of scored documents per
  ``prefix`` = the top :data:`PREFIX_BITS` bits of the score's order-preserving 64-bit key (:func:`score_key`),
  which the driver uses to find the bucket holding a rank;
* ``score_bucket``: rows ``(group, score, id)`` of the documents of one bucket per group (``params``: group ->
  prefix), from which the driver reads the exact cut-off of a rank;
* ``gather``: not a sum but a selection: the rows of the documents listed in ``params["nodes"]`` (a Parquet
  file of ``doc_key, comp, chunk`` sorted by ``doc_key``: e.g. the near-duplicate candidates, their component
  and the chunk of components that will verify them), with the columns ``params["columns"]``, written to
  ``params["dest"]/TTTTT.parquet`` grouped by chunk (in ``doc_key`` order inside one), one row group per chunk; returns
  ``(file, chunk, row_group)`` rows, so a reader of one chunk opens just its row groups. This is how the texts of the candidates reach the driver
  without the driver reading the corpus. With ``params["shingle_sets"] = [word_ngram, char_ngram]`` the
  ``text`` column is replaced by ``shingle_set``: each text's sorted distinct shingle hashes
  (:func:`dataclean.dedup.minhash.shingle_sets`, stored by ``sets_to_binary``), so the tasks that verify
  near duplicates do not shingle again in one process what the map tasks shingle in all of them (the text is
  kept when the compiled kernels are off).
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dataclean.io.fs import files_in
from dataclean.io.writers import tmp_name
from dataclean.layout import Layout
from dataclean.sql import sql_string

#: Bits of a score's key that make its histogram bucket: sign, 11 exponent bits and 8 mantissa bits, so
#: a bucket spans 1/256 of a binade (scores in [0.5, 1) fall in 256 buckets of width 1/512).
PREFIX_BITS = 20
_SIGN = np.uint64(1 << 63)


def score_key(scores: np.ndarray) -> np.ndarray:
    """uint64 keys ordered as the float64 scores are (negative scores flipped, positive ones with the sign bit
    set), so ``a < b`` exactly when ``key(a) < key(b)``."""
    bits = np.ascontiguousarray(scores, dtype=np.float64).view(np.uint64)
    return np.where(bits & _SIGN, ~bits, bits | _SIGN)


def score_prefix(scores: np.ndarray) -> np.ndarray:
    return (score_key(scores) >> np.uint64(64 - PREFIX_BITS)).astype(np.int64)


@dataclass(frozen=True)
class MapSpec:
    """One map task: aggregate ``kind`` over pass-1 task ``task`` of the run in ``out``, grouping by the column
    ``group`` and reading ``value`` (the score, for the score aggregates), less the documents listed in the
    Parquet file ``removed`` (a sorted ``doc_key`` column)."""

    task: int
    out: str
    kind: str
    group: str
    value: str | None
    removed: str
    params: dict = field(default_factory=dict)


def _alive(spec: MapSpec, columns: list[str]) -> pa.Table:
    lay = Layout(spec.out)
    files = sorted(files_in(lay.pass1_dir(spec.task), "docs-*.parquet"))
    cols = sorted(set(columns) | {"doc_key"})
    parts = [pq.read_table(f, columns=cols) for f in files]
    table = pa.concat_tables(parts) if parts else pa.table({c: pa.array([], pa.int64()) for c in cols})
    lo, hi = spec.task << 40, (spec.task + 1) << 40
    gone = pq.read_table(spec.removed, columns=["doc_key"],
                         filters=[("doc_key", ">=", lo), ("doc_key", "<", hi)]).column("doc_key")
    if len(gone) and table.num_rows:
        table = table.filter(pc.invert(pc.is_in(table.column("doc_key"), value_set=gone.combine_chunks())))
    return table


def map_task(spec: MapSpec) -> pa.Table:
    """The aggregate of one pass-1 task (see the module docstring)."""
    if spec.kind == "gather":
        return _gather(spec)
    if spec.kind == "totals":
        t = _alive(spec, [spec.group, "n_tokens"])
        t = pa.table({"group": t.column(spec.group),
                      "tok": pc.fill_null(pc.cast(t.column("n_tokens"), pa.int64()), 0)})
        t = t.group_by("group", use_threads=False).aggregate([("tok", "count"), ("tok", "sum")])
        return t.select(["group", "tok_count", "tok_sum"]).rename_columns(["group", "docs", "tokens"])
    assert spec.value is not None, f"aggregate {spec.kind!r} reads a value column"
    t = _alive(spec, [spec.group, spec.value] + (["id"] if spec.kind == "score_bucket" else []))
    t = t.filter(pc.is_valid(t.column(spec.value)))
    scores = t.column(spec.value).to_numpy(zero_copy_only=False).astype(np.float64)
    prefix = score_prefix(scores)
    if spec.kind == "score_histogram":
        t = pa.table({"group": t.column(spec.group), "prefix": pa.array(prefix, pa.int64())})
        t = t.group_by(["group", "prefix"], use_threads=False).aggregate([("prefix", "count")])
        return t.select(["group", "prefix", "prefix_count"]).rename_columns(["group", "prefix", "docs"])
    if spec.kind == "score_bucket":
        groups = t.column(spec.group).to_pylist()
        want = np.array([spec.params.get(g, -1) for g in groups], dtype=np.int64)
        keep = pa.array(want == prefix)
        return pa.table({"group": t.column(spec.group), "score": pa.array(scores, pa.float64()),
                         "id": t.column("id")}).filter(keep)
    raise ValueError(f"unknown aggregate {spec.kind!r}")


def _gather(spec: MapSpec) -> pa.Table:
    lo, hi = spec.task << 40, (spec.task + 1) << 40
    nodes = pq.read_table(spec.params["nodes"], filters=[("doc_key", ">=", lo), ("doc_key", "<", hi)])
    keys = nodes.column("doc_key").combine_chunks()
    lay = Layout(spec.out)
    parts = []
    if len(keys):
        for f in sorted(files_in(lay.pass1_dir(spec.task), "docs-*.parquet")):
            t = pq.read_table(f, columns=sorted(set(spec.params["columns"]) | {"doc_key"}))
            parts.append(t.filter(pc.is_in(t.column("doc_key"), value_set=keys)))
    if parts:
        from dataclean.exec.shuffle import write_grouped

        rows = pa.concat_tables(parts)
        if spec.params.get("shingle_sets") and "text" in rows.column_names:
            word_ngram, char_ngram = spec.params["shingle_sets"]
            rows = _with_shingle_sets(rows, word_ngram, char_ngram, spec.params.get("threads", 1))
        at = pa.array(np.searchsorted(keys.to_numpy(), rows.column("doc_key").to_numpy()))
        rows = rows.append_column("comp", nodes.column("comp").take(at))
        chunk = nodes.column("chunk").take(at).to_numpy()  # (rows stay in file order inside a chunk)
        os.makedirs(spec.params["dest"], exist_ok=True)
        path = os.path.join(spec.params["dest"], f"{spec.task:05d}.parquet")
        _, chunks = write_grouped(rows, chunk, "chunk", path)
        return pa.table({"file": pa.array([path] * len(chunks), pa.string()), "chunk": pa.array(chunks, pa.int64()),
                         "row_group": pa.array(range(len(chunks)), pa.int64())})
    return map_task_empty("gather")


def _with_shingle_sets(rows: pa.Table, word_ngram: int, char_ngram: int, threads: int = 1) -> pa.Table:
    """``rows`` with its ``text`` column replaced by ``shingle_set`` (see the module docstring), or unchanged
    without the kernels; in up to ``threads`` threads (no more than the cores the task runs on)."""
    from dataclean.dedup.minhash import sets_to_binary, shingle_sets, task_threads

    sets = shingle_sets(rows.column("text"), word_ngram, char_ngram, task_threads(threads))
    if sets is None:
        return rows
    column = sets_to_binary(*sets)
    at = rows.column_names.index("text")
    return rows.set_column(at, pa.field("shingle_set", column.type), column)


def run_map(ctx, kind: str, group: str, value: str | None = None, params: dict | None = None) -> pa.Table:
    """Run the map tasks of ``kind`` over every pass-1 task of the run and concatenate their tables.

    The removals so far (the ``removals`` table of the driver's DuckDB connection) are written once per stage
    to ``_work/global/removed-<stage>.parquet`` by :func:`removals_so_far`."""
    specs = [MapSpec(t, ctx.lay.root, kind, group, value, ctx.removed_path, dict(params or {})) for t in ctx.tasks]
    results = ctx.map(map_task, specs)
    results = [r for r in results if r.num_rows]
    if not results:
        return map_task_empty(kind)
    return pa.concat_tables(results, promote_options="permissive")


def map_task_empty(kind: str) -> pa.Table:
    if kind == "totals":
        return pa.table({"group": pa.array([], pa.string()), "docs": pa.array([], pa.int64()),
                         "tokens": pa.array([], pa.int64())})
    if kind == "score_histogram":
        return pa.table({"group": pa.array([], pa.string()), "prefix": pa.array([], pa.int64()),
                         "docs": pa.array([], pa.int64())})
    if kind == "gather":
        return pa.table({"file": pa.array([], pa.string()), "chunk": pa.array([], pa.int64()),
                         "row_group": pa.array([], pa.int64())})
    return pa.table({"group": pa.array([], pa.string()), "score": pa.array([], pa.float64()),
                     "id": pa.array([], pa.string())})


def removals_so_far(con, lay: Layout, name: str) -> str:
    """Write the doc_keys of the ``removals`` table, sorted, for the map tasks of stage ``name``; its path."""
    path = lay.p("_work", "global", f"removed-{name}.parquet")
    tmp = tmp_name(path)
    con.execute(f"COPY (SELECT doc_key FROM removals ORDER BY doc_key) TO {sql_string(tmp)} "
                "(FORMAT parquet, COMPRESSION zstd, ROW_GROUP_SIZE 65536)")
    os.replace(tmp, path)
    return path


def rank_buckets(hist: pa.Table, keeps: dict[str, int]) -> dict[str, tuple[int, int]]:
    """For each group with a rank ``keep`` >= 1 (documents ordered by score descending): the histogram bucket
    (prefix) holding that rank and the number of documents in the buckets above it."""
    counts: dict[str, dict[int, int]] = {}
    for g, p, n in zip(hist.column("group").to_pylist(), hist.column("prefix").to_pylist(),
                       hist.column("docs").to_pylist()):
        counts.setdefault(g, {})[p] = counts.setdefault(g, {}).get(p, 0) + n
    found = {}
    for g, keep in keeps.items():
        if keep <= 0:
            continue
        above = 0
        for p in sorted(counts.get(g, {}), reverse=True):
            if above + counts[g][p] >= keep:
                found[g] = (p, above)
                break
            above += counts[g][p]
        else:
            raise ValueError(f"rank {keep} is beyond the {above} scored documents of {g!r}")
    return found


def rank_cutoffs(ctx, hist: pa.Table, keeps: dict[str, int], value: str, group: str) -> dict[str, tuple[float, str]]:
    """The (score, id) of the document at rank ``keeps[g]`` (1-based; order: score descending, id ascending)
    of each group ``g``: the bucket from ``hist``, then one round of ``score_bucket`` map tasks for every group at
    once, whose rows are sorted here. Groups with a rank of 0 are left out."""
    buckets = rank_buckets(hist, keeps)
    if not buckets:
        return {}
    rows = run_map(ctx, "score_bucket", group, value, {g: p for g, (p, _) in buckets.items()})
    out = {}
    for g, (_, above) in buckets.items():
        sel = rows.filter(pc.equal(rows.column("group"), g)).sort_by([("score", "descending"), ("id", "ascending")])
        at = keeps[g] - above - 1
        out[g] = (sel.column("score")[at].as_py(), sel.column("id")[at].as_py())
    return out
