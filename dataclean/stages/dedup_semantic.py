"""Semantic deduplication over the whole corpus: SemDeDup (Abbas et al. 2023) on the ``embedding`` column that
an ``embed`` stage adds in pass 1. The arithmetic is in :mod:`dataclean.dedup.semantic`; this module streams
the corpus through it as tasks of the executor.

Global step, out of core (every step a task per pass-1 task or per chunk of clusters, each atomic, with a
marker that a rerun of the same run reuses):

1. ``sample``: each pass-1 task's surviving documents with an embedding (and in the stage's scope) are hashed,
   ``xxh3_64(seed:id)``; each task keeps its ``sample_size`` smallest hashes, and the driver takes the
   ``sample_size`` smallest of all (DuckDB's top-N): a seeded random sample that depends neither on shard
   order nor on workers;
2. ``fit``: spherical k-means of the sample on the driver, ``n_clusters`` clusters (``ceil(sqrt(n))`` for ``n``
   documents when not given), ``max_iter`` Lloyd iterations at most, stopping early when at most ``tol`` of
   the sample changes cluster;
3. ``assign``: each pass-1 task assigns every one of its documents to its nearest centroid, in batches, and
   writes them with their cosine to it, grouped by chunk of clusters (consecutive clusters of about
   ``chunk_docs`` documents, from the sample's proportions);
4. ``dedup``: each chunk task reads its clusters' rows from every assign file and, per cluster, orders the
   members by ``keep``, then removes each member whose cosine to a member ranked before it **that is kept**
   is at least ``1 - eps`` (:func:`dataclean.dedup.semantic.greedy_duplicates`). ``dup_of`` is the most
   similar such kept member, ``value`` that cosine, ``threshold`` ``1 - eps``. A cluster of more than
   ``max_cluster_size`` members is first split by k-means inside it (:func:`~dataclean.dedup.semantic.
   split_cluster`), and its pieces are deduplicated apart; the pairwise step works in blocks of
   ``block_rows`` rows, so no matrix is larger than ``block_rows`` x ``max_cluster_size``.

``keep`` orders a cluster's members: ``best`` (the default) as MinHash dedup does — the highest
``quality_score`` when the pipeline has one, then the most characters, then the smallest id; ``hard`` the
farthest from the centroid first (SemDeDup's and NeMo Curator's default: it keeps outliers), ``easy`` the
closest first, ``random`` by the seeded hash of the id. Ties are broken by the smallest id.

Every number decided on is an exact cosine of the float16 embeddings (see :mod:`dataclean.dedup.semantic`),
so the output is byte-identical for any number of workers, either executor, and any BLAS thread count.

Artifacts in ``OUT/dedup/<stage name>/``: ``clusters.parquet`` (one row per clustered document: its cluster
and piece, its rank in keep order, its cosine distance to the centroid, kept or not, ``dup_of`` and the
cosine to it), ``centroids.parquet`` (one row per cluster: its size and its unit centroid) and ``fit.json``
(the k-means fit). docs/dedup.md describes them and the parameters' sources.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dataclean.dedup import semantic as sem
from dataclean.embed.vectors import COLUMN, decode
from dataclean.io.writers import WORK_CODEC, atomic_write_table, atomic_write_tables, write_json_atomic
from dataclean.sql import sql_list
from dataclean.stages.base import GlobalStage, RuleSpec, Stage, StageResult

KEEP_ORDERS = ("best", "hard", "easy", "random")
RULE = "semantic_duplicate"
#: Rows read from a pass-1 file at once.
READ_ROWS = 16384


class SemanticDedup(GlobalStage):
    kind = "semantic_dedup"
    signal_fields: list = []
    global_columns = (COLUMN, "n_chars", "source", "lang", "quality_score")
    uses_aggregates = True  # the global step writes the removals so far for the tasks
    rule_specs = [RuleSpec(RULE, COLUMN, ("eps",), "flag",
                           "cosine of its embedding to a kept document ranked before it in its k-means cluster "
                           "at least 1 - eps")]

    def __init__(self, eps: float = 0.01, n_clusters: int | None = None, sample_size: int = 100_000,
                 max_iter: int = 100, tol: float = 1e-4, seed: int = 42, max_cluster_size: int = 10_000,
                 keep: str = "best", block_rows: int = 1024, chunk_docs: int = 100_000, name: str | None = None):
        super().__init__(name)
        where = self.kind
        if isinstance(eps, bool) or not isinstance(eps, (int, float)) or not 0.0 <= float(eps) < 1.0:
            raise ValueError(f"{where}.eps must be a number in [0, 1) (documents at cosine >= 1 - eps are "
                             f"duplicates), got {eps!r}")
        self.eps = float(eps)
        self.n_clusters = None if n_clusters is None else _count(where, "n_clusters", n_clusters, 1, 10_000_000)
        self.sample_size = _count(where, "sample_size", sample_size, 1, 100_000_000)
        self.max_iter = _count(where, "max_iter", max_iter, 0, 100_000)
        if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not 0.0 <= float(tol) < 1.0:
            raise ValueError(f"{where}.tol must be a fraction in [0, 1) (of the sample changing cluster), got {tol!r}")
        self.tol = float(tol)
        self.seed = _count(where, "seed", seed, -(1 << 62), 1 << 62)
        self.max_cluster_size = _count(where, "max_cluster_size", max_cluster_size, 2, 10_000_000)
        if keep not in KEEP_ORDERS:
            raise ValueError(f"{where}.keep must be one of {', '.join(KEEP_ORDERS)}, got {keep!r}")
        self.keep = keep
        self.block_rows = _count(where, "block_rows", block_rows, 1, 1_000_000)
        self.chunk_docs = _count(where, "chunk_docs", chunk_docs, 1, 1_000_000_000)

    @property
    def threshold(self) -> float:
        return 1.0 - self.eps

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        return StageResult(batch)  # nothing in pass 1: the embed stage made the column

    def check_pipeline(self, before: list[Stage]) -> None:
        """Raise a one-line :class:`ValueError` when no stage before this one adds the ``embedding`` column;
        ``before``: the stages that run before it (for the config check, before any work)."""
        if not any(f.name == COLUMN for s in before for f in s.signal_fields):
            raise ValueError(self._needs_embed())

    def _needs_embed(self) -> str:
        return (f"stage {self.name} needs an embed stage before it (it clusters the {COLUMN} column that stage "
                f"adds): add_stages: [{{stage: embed, model: MODEL_FOLDER}}] puts one in the pipeline")

    # -- the global step -----------------------------------------------------------------------------------
    def global_decide(self, ctx, view: str) -> None:
        if COLUMN not in ctx.columns:  # (the pass-1 files have no embeddings: the config check was bypassed)
            from dataclean.rulesfolder import ConfigError

            raise ConfigError(self._needs_embed())
        _Run(self, ctx).decide()

    def write_final_artifacts(self, ctx, view: str) -> None:
        """The global step's decisions are all made: this stage's work files (a copy of every embedding, by
        cluster) and their markers go. (Until now a killed run's rerun reused them.)"""
        shutil.rmtree(ctx.lay.p("_work", "global", f"semantic-{self.name}"), ignore_errors=True)
        folder = os.path.dirname(ctx.lay.marker("x"))
        prefix = f"global-semantic-{self.name}-"
        for name in os.listdir(folder) if os.path.isdir(folder) else []:
            if name.startswith(prefix):
                os.remove(os.path.join(folder, name))


def _count(where: str, key: str, value, lo: int, hi: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
        raise ValueError(f"{where}.{key} must be an integer from {lo:,} to {hi:,}, got {value!r}")
    return int(value)


# ------------------------------------------------------------------------------------------------ the tasks

@dataclass(frozen=True)
class ScanSpec:
    """One ``sample`` or ``assign`` task over pass-1 task ``task`` of the run in ``out``."""

    kind: str  # "sample" or "assign"
    out: str
    task: int
    stage_spec: dict
    sources: dict | None  # the config's sources: mapping (the stage's scope by kind)
    removed: str  # the removals so far: a Parquet file of sorted doc_keys
    dest: str  # the file (sample) or file prefix (assign) to write
    marker: str
    key: str
    columns: tuple[str, ...] = ()
    centroids: str = ""  # (assign) the centroids file
    chunk_of: tuple[int, ...] = ()  # (assign) the chunk of each cluster
    threads: int = 1
    build: Callable | None = None  # the context's build_stage: rebuilds the stage from stage_spec in the worker


@dataclass(frozen=True)
class ChunkSpec:
    """One ``dedup`` task: clusters ``lo..hi`` (chunk ``chunk``), their rows at ``rows`` ((file, row group))."""

    stage_spec: dict
    chunk: int
    lo: int
    hi: int
    rows: tuple[tuple[str, int], ...]
    has_quality: bool
    dest: str
    marker: str
    key: str
    threads: int = 1
    build: Callable | None = None  # as ScanSpec.build


def _limit_threads(n: int):
    """BLAS threads for a task (speed only: the answers are exact whatever the count)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - scikit-learn brings it
        import contextlib
        return contextlib.nullcontext()
    return threadpool_limits(max(1, int(n)))


def _done(marker: str, key: str) -> dict | None:
    try:
        with open(marker, encoding="utf-8") as fh:
            m = json.load(fh)
    except (FileNotFoundError, json.JSONDecodeError):
        return None
    return m if m.get("key") == key else None


def _scope_mask(stage: Stage, sources: dict | None, source: pa.Array) -> np.ndarray | None:
    if stage.only_kinds is None and not stage.skip_kinds and stage.only_sources is None and not stage.skip_sources:
        return None
    from dataclean.sources import SourceKinds, row_mask

    n = len(source)
    mask = np.ones(n, bool)
    if stage.only_kinds is not None or stage.skip_kinds:
        kinds = SourceKinds(sources).kinds(source, n)
        mask &= row_mask(kinds, stage.only_kinds) if stage.only_kinds is not None else ~row_mask(kinds, stage.skip_kinds)
    if stage.only_sources is not None or stage.skip_sources:
        mask &= row_mask(source, stage.only_sources) if stage.only_sources is not None else \
            ~row_mask(source, stage.skip_sources)
    return mask


def _alive_batches(spec: ScanSpec, stage: Stage):
    """The task's surviving documents that this stage clusters, in pass-1 order, as (batch, float16 rows,
    seeded id hashes): not removed by an earlier global stage, in the stage's scope, with a non-zero
    embedding."""
    from dataclean.dedup.keys import xxh3_64_of
    from dataclean.io.fs import files_in
    from dataclean.layout import Layout

    lay = Layout(spec.out)
    lo, hi = spec.task << 40, (spec.task + 1) << 40
    gone = pq.read_table(spec.removed, columns=["doc_key"],
                         filters=[("doc_key", ">=", lo), ("doc_key", "<", hi)]).column("doc_key").combine_chunks()
    columns = sorted(set(spec.columns) | {"doc_key", "id", "source", COLUMN})
    for path in sorted(files_in(lay.pass1_dir(spec.task), "docs-*.parquet")):
        pf = pq.ParquetFile(path)
        names = set(pf.schema_arrow.names)
        for batch in pf.iter_batches(batch_size=READ_ROWS, columns=[c for c in columns if c in names]):
            keep = pc.is_valid(batch.column(COLUMN)).to_numpy(zero_copy_only=False)
            if len(gone):
                keep &= ~pc.is_in(batch.column("doc_key"), value_set=gone).to_numpy(zero_copy_only=False)
            scope = _scope_mask(stage, spec.sources, batch.column("source"))
            if scope is not None:
                keep &= scope
            if not keep.any():
                continue
            if not keep.all():
                batch = batch.filter(pa.array(keep))
            vectors, _ = decode(batch.column(COLUMN))
            x16 = sem.normalized_f16(vectors.astype(np.float16))
            nonzero = np.any(x16 != 0, axis=1)
            if not nonzero.all():
                batch, x16 = batch.filter(pa.array(nonzero)), x16[nonzero]
                if batch.num_rows == 0:
                    continue
            salted = pc.binary_join_element_wise(pa.scalar(str(stage.seed)), batch.column("id").cast(pa.string()), ":")
            yield path, batch, np.ascontiguousarray(x16), xxh3_64_of(salted)


def _f16_column(x16: np.ndarray) -> pa.Array:
    n, d = x16.shape
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(2 * d), n,
                                                [None, pa.py_buffer(np.ascontiguousarray(x16.astype("<f2")))])


def _column_f16(column) -> np.ndarray:
    """A fixed-size binary (or binary, as DuckDB returns it) column of float16 rows -> (n, d) float16, without
    widening to float32 as :func:`dataclean.embed.vectors.decode` does (the same little-endian layout; a
    view of the column's buffer when it is one chunk without nulls)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    if not pa.types.is_fixed_size_binary(column.type):
        width = len(column[0].as_py()) if len(column) else 2
        column = pc.cast(column, pa.binary(width))
    if column.null_count or column.type.byte_width % 2:
        vectors, _ = decode(column)  # (nulls: zero rows; an odd width: its one-line error)
        return np.ascontiguousarray(vectors.astype(np.float16))
    d = column.type.byte_width // 2
    raw = np.frombuffer(column.buffers()[1], dtype="<f2", count=(column.offset + len(column)) * d)
    return raw[column.offset * d:].reshape(len(column), d)


def sample_task(spec: ScanSpec) -> dict:
    """The ``sample_size`` documents of one pass-1 task with the smallest seeded id hashes (ties: doc_key),
    written sorted to ``spec.dest``; returns how many documents the task has to cluster and their width."""
    from dataclean.failpoints import failpoint
    stage = spec.build(spec.stage_spec)
    size = stage.sample_size
    h = np.zeros(0, np.uint64)
    keys = np.zeros(0, np.int64)
    vecs: np.ndarray | None = None
    count, dim = 0, 0
    for _, batch, x16, hashes in _alive_batches(spec, stage):
        count += len(x16)
        dim = x16.shape[1]
        bk = batch.column("doc_key").to_numpy()
        if vecs is None:
            vecs = np.zeros((0, dim), np.float16)
        h, keys, vecs = np.concatenate([h, hashes]), np.concatenate([keys, bk]), np.concatenate([vecs, x16])
        if len(h) > size:
            top = np.lexsort((keys, h))[:size]
            top.sort()
            h, keys, vecs = h[top], keys[top], vecs[top]
    order = np.lexsort((keys, h))
    table = pa.table({"h": pa.array(h[order], pa.uint64()), "doc_key": pa.array(keys[order], pa.int64()),
                      COLUMN: _f16_column(vecs[order]) if vecs is not None else pa.array([], pa.binary(2))})
    atomic_write_table(table, spec.dest, row_group_rows=4096, statistics=("h",), codec=WORK_CODEC)
    result = {"task": spec.task, "count": count, "dim": dim, "file": spec.dest}
    failpoint(f"semantic-sample-{spec.task}")
    write_json_atomic({"key": spec.key, **result}, spec.marker)
    return result


def assign_task(spec: ScanSpec) -> dict:
    """Assign every document of one pass-1 task to its nearest centroid; write, per pass-1 file, its rows
    sorted by (chunk, cluster, doc_key) with one row group per chunk; return where each chunk's rows are and
    the documents per cluster."""
    from dataclean.failpoints import failpoint
    stage = spec.build(spec.stage_spec)
    c16 = _column_f16(pq.read_table(spec.centroids).column("centroid"))
    chunk_of = np.asarray(spec.chunk_of, np.int64)
    sizes = np.zeros(len(c16), np.int64)
    parts: dict[str, list] = {}
    with _limit_threads(spec.threads):
        for path, batch, x16, hashes in _alive_batches(spec, stage):
            label, cos = sem.assign(x16.astype(np.float32), c16)
            sizes += np.bincount(label, minlength=len(c16))
            q = batch.column("quality_score") if "quality_score" in batch.schema.names else \
                pa.nulls(batch.num_rows, pa.float64())
            parts.setdefault(path, []).append(pa.table({
                "chunk": pa.array(chunk_of[label], pa.int64()), "cluster": pa.array(label, pa.int32()),
                "doc_key": batch.column("doc_key"), "id": batch.column("id").cast(pa.string()),
                "cos": pa.array(cos, pa.float64()), "h": pa.array(hashes, pa.uint64()),
                "n_chars": pc.cast(batch.column("n_chars"), pa.int64()), "q": pc.cast(q, pa.float64()),
                "source": batch.column("source").cast(pa.string()), "lang": batch.column("lang").cast(pa.string()),
                COLUMN: _f16_column(x16)}))
    found = []
    for i, path in enumerate(sorted(parts)):
        table = pa.concat_tables(parts.pop(path))
        table = table.sort_by([("chunk", "ascending"), ("cluster", "ascending"), ("doc_key", "ascending")])
        chunks, counts = np.unique(table.column("chunk").to_numpy(), return_counts=True)
        dest = f"{spec.dest}-{i:04d}.parquet"
        atomic_write_table(table, dest, row_group_sizes=counts.tolist(), codec=WORK_CODEC)
        found += [[dest, int(c), g] for g, c in enumerate(chunks.tolist())]
    result = {"task": spec.task, "rows": found, "sizes": sizes.tolist()}
    failpoint(f"semantic-assign-{spec.task}")
    write_json_atomic({"key": spec.key, **result}, spec.marker)
    return result


def keep_order(keep: str, ids: np.ndarray, q: np.ndarray, chars: np.ndarray, cos: np.ndarray,
               h: np.ndarray) -> np.ndarray:
    """Positions of one cluster's members in keep order (module docstring); ties by the smallest id."""
    id_rank = np.argsort(np.argsort(ids, kind="stable"), kind="stable")
    if keep == "best":
        qq = np.where(np.isnan(q), -np.inf, q)
        return np.lexsort((id_rank, -chars, -qq))
    if keep == "hard":
        return np.lexsort((id_rank, cos))
    if keep == "easy":
        return np.lexsort((id_rank, -cos))
    return np.lexsort((id_rank, h))


def chunk_task(spec: ChunkSpec) -> dict:
    """Deduplicate the clusters of one chunk: removals and member rows, written to ``spec.dest``-removed /
    -members.parquet."""
    from dataclean.failpoints import failpoint
    stage = spec.build(spec.stage_spec)
    table = pa.concat_tables([pq.ParquetFile(f).read_row_group(rg) for f, rg in spec.rows]) if spec.rows else None
    removed, members = [], []
    if table is not None and table.num_rows:
        table = table.sort_by([("cluster", "ascending"), ("doc_key", "ascending")])  # (the read rows are freed)
        with _limit_threads(spec.threads):
            removed, members = _dedup_clusters(stage, table)
    out = {"removed": spec.dest + "-removed.parquet", "members": spec.dest + "-members.parquet"}
    atomic_write_table(pa.concat_tables(removed) if removed else _empty_removals(), out["removed"],
                       codec=WORK_CODEC)
    failpoint(f"semantic-chunk-{spec.chunk}")  # removals written, members not yet
    atomic_write_table(pa.concat_tables(members) if members else _empty_members(), out["members"],
                       codec=WORK_CODEC)
    result = {"chunk": spec.chunk, **out}
    write_json_atomic({"key": spec.key, **result}, spec.marker)
    return result


REMOVAL_SCHEMA = pa.schema([("doc_key", pa.int64()), ("stage", pa.string()), ("rule", pa.string()),
                            ("reason", pa.string()), ("value", pa.float64()), ("threshold", pa.float64()),
                            ("detail", pa.string()), ("dup_of", pa.string())])
MEMBER_SCHEMA = pa.schema([("id", pa.string()), ("cluster", pa.int32()), ("subcluster", pa.int32()),
                           ("rank", pa.int32()), ("distance", pa.float64()), ("kept", pa.bool_()),
                           ("dup_of", pa.string()), ("similarity", pa.float64()), ("source", pa.string()),
                           ("lang", pa.string()), ("n_chars", pa.int64())])


def _empty_removals() -> pa.Table:
    return REMOVAL_SCHEMA.empty_table()


def _empty_members() -> pa.Table:
    return MEMBER_SCHEMA.empty_table()


def _dedup_clusters(stage: "SemanticDedup", table: pa.Table) -> tuple[list[pa.Table], list[pa.Table]]:
    """Every cluster of ``table`` (rows sorted by cluster, doc_key): split when oversized, ordered, greedy."""
    cluster = table.column("cluster").to_numpy()
    x16 = _column_f16(table.column(COLUMN))  # (float32 one cluster at a time: half the memory of a chunk)
    ids = np.asarray(table.column("id").to_pylist(), dtype=object)
    q = table.column("q").to_numpy(zero_copy_only=False).astype(np.float64)
    chars = table.column("n_chars").to_numpy(zero_copy_only=False).astype(np.int64)
    cos = table.column("cos").to_numpy()
    h = table.column("h").to_numpy()
    keys = table.column("doc_key").to_numpy()
    n = table.num_rows
    piece = np.zeros(n, np.int64)
    rank = np.zeros(n, np.int64)
    rep = np.full(n, -1, np.int64)
    val = np.full(n, np.nan)
    bounds = np.r_[0, np.flatnonzero(np.diff(cluster)) + 1, n]
    removed, members = [], []
    detail = np.empty(n, dtype=object)
    for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):
        size = b - a
        if size < 2:
            continue
        x = x16[a:b].astype(np.float32)
        if size > stage.max_cluster_size:
            hash_order = np.lexsort((keys[a:b], h[a:b]))
            piece[a:b] = sem.split_cluster(x, hash_order, stage.max_cluster_size, stage.max_iter, stage.tol)
        pieces = int(piece[a:b].max()) + 1
        for p in range(pieces):
            rows = a + np.flatnonzero(piece[a:b] == p)
            order = rows[keep_order(stage.keep, ids[rows], q[rows], chars[rows], cos[rows], h[rows])]
            rank[order] = np.arange(len(order))
            r, v = sem.greedy_duplicates(x[order - a], stage.threshold, stage.block_rows)
            hit = r >= 0
            rep[order[hit]] = order[r[hit]]
            val[order[hit]] = v[hit]
            where = f"k-means cluster {int(cluster[a])} of {size} documents"
            if pieces > 1:
                where += f", piece {p + 1} of {pieces} ({len(rows)} documents)"
            detail[order[hit]] = where + f"; kept order {stage.keep}"
    gone = np.flatnonzero(rep >= 0)
    k = len(gone)
    removed.append(pa.table({
        "doc_key": pa.array(keys[gone], pa.int64()),
        "stage": pa.array([stage.name] * k, pa.string()), "rule": pa.array([RULE] * k, pa.string()),
        "reason": pa.array([RULE] * k, pa.string()), "value": pa.array(val[gone], pa.float64()),
        "threshold": pa.array([stage.threshold] * k, pa.float64()),
        "detail": pa.array(detail[gone].tolist(), pa.string()),
        "dup_of": pa.array(ids[rep[gone]].tolist(), pa.string())}, schema=REMOVAL_SCHEMA))
    dup_of = np.where(rep >= 0, ids[np.maximum(rep, 0)], None)
    members.append(pa.table({
        "id": pa.array(ids.tolist(), pa.string()), "cluster": pa.array(cluster, pa.int32()),
        "subcluster": pa.array(piece, pa.int32()), "rank": pa.array(rank, pa.int32()),
        "distance": pa.array(1.0 - cos, pa.float64()), "kept": pa.array(rep < 0),
        "dup_of": pa.array(dup_of.tolist(), pa.string()),
        "similarity": pa.array(np.where(rep >= 0, val, np.nan), pa.float64(), from_pandas=True),
        "source": table.column("source"), "lang": table.column("lang"),
        "n_chars": pa.array(chars, pa.int64())}, schema=MEMBER_SCHEMA))
    return removed, members


# ------------------------------------------------------------------------------------------------ the driver

@dataclass
class _Run:
    stage: SemanticDedup
    ctx: object
    spec: dict = field(init=False)
    work: str = field(init=False)

    def __post_init__(self):
        ctx = self.ctx
        spec = next(sp for sp in ctx.cfg["pipeline"] if sp.get("name", sp["stage"]) == self.stage.name)
        self.spec = dict(spec, **self.stage.derived_params())
        self.work = ctx.lay.p("_work", "global", f"semantic-{self.stage.name}")
        self.workers = ctx.workers
        self.base = _digest(self._base_parts())
        self.timings: dict[str, float] = {}  # seconds per step (for benchmarks; never written to the run)
        self._clock = time.perf_counter()

    def _tick(self, step: str) -> None:
        now = time.perf_counter()
        self.timings[step] = round(now - self._clock, 3)
        self._clock = now

    def _base_parts(self) -> list:
        """What every task's result depends on: the stage's entry, the run's fingerprint (config and inputs,
        from the pass-1 markers), the pass-1 tasks and the documents the earlier stages removed."""
        lay = self.ctx.lay
        prints = []
        for t in self.ctx.tasks:
            try:
                with open(lay.marker(f"pass1-{t:05d}"), encoding="utf-8") as fh:
                    prints.append(json.load(fh).get("fingerprint"))
            except (FileNotFoundError, json.JSONDecodeError):
                prints.append(None)
        removed = hashlib.sha256()
        pf = pq.ParquetFile(self.ctx.removed_path)
        for g in range(pf.num_row_groups):
            removed.update(np.ascontiguousarray(pf.read_row_group(g, columns=["doc_key"]).column("doc_key")
                                                .to_numpy()).astype("<i8").tobytes())
        return [self.spec, sorted(set(prints), key=str), list(self.ctx.tasks), removed.hexdigest(),
                (self.ctx.cfg.get("sources") if self._by_kind else None)]

    @property
    def _by_kind(self) -> bool:
        return self.stage.only_kinds is not None or bool(self.stage.skip_kinds)

    def _marker(self, what: str) -> str:
        return self.ctx.lay.marker(f"global-semantic-{self.stage.name}-{what}")

    def _map(self, fn, specs: list) -> list:
        return self.ctx.map(fn, specs)

    def decide(self) -> None:
        from dataclean.failpoints import failpoint

        ctx, stage = self.ctx, self.stage
        os.makedirs(self.work, exist_ok=True)
        columns = ("n_chars", "lang") + (("quality_score",) if "quality_score" in ctx.columns else ())
        common = dict(out=ctx.lay.root, stage_spec=self.spec, sources=ctx.cfg.get("sources"),
                      removed=ctx.removed_path, columns=columns, build=ctx.build_stage)
        # 1. sample
        results, todo = {}, []
        for t in ctx.tasks:
            key = _digest([self.base, "sample", t])
            m = _done(self._marker(f"sample-{t:05d}"), key)
            if m is not None and os.path.isfile(m["file"]):
                results[t] = m
            else:
                todo.append(ScanSpec("sample", task=t, dest=os.path.join(self.work, f"sample-{t:05d}.parquet"),
                                     marker=self._marker(f"sample-{t:05d}"), key=key, **common))
        for r in self._map(sample_task, todo):
            results[r["task"]] = r
        self._tick("sample")
        total = sum(r["count"] for r in results.values())
        dims = {r["dim"] for r in results.values() if r["count"]}
        if len(dims) > 1:
            raise ValueError(f"{stage.name}: the {COLUMN} column has several widths across the pass-1 files "
                             f"({', '.join(str(d) for d in sorted(dims))} dimensions)")
        if total == 0:
            self._write_outputs(np.zeros((0, 0), np.float16), np.zeros(0, np.int64), [], {"documents": 0})
            return
        # 2. fit
        fit_key = _digest([self.base, "fit"])
        centroids_file = os.path.join(self.work, "centroids.parquet")
        m = _done(self._marker("fit"), fit_key)
        if m is None or not os.path.isfile(centroids_file):
            m = self._fit(results, total, fit_key, centroids_file)
            failpoint("semantic-fit")
        self._tick("fit")
        info = m["fit"]
        c16 = _column_f16(pq.read_table(centroids_file).column("centroid"))
        bounds = [tuple(b) for b in m["chunks"]]
        chunk_of = np.zeros(len(c16), np.int64)
        for n, (lo, hi) in enumerate(bounds):
            chunk_of[lo:hi + 1] = n
        # 3. assign
        akey = _digest([self.base, fit_key, bounds])
        assigned, todo = {}, []
        for t in ctx.tasks:
            key = _digest([akey, t])
            m = _done(self._marker(f"assign-{t:05d}"), key)
            if m is not None and all(os.path.isfile(f) for f, _, _ in m["rows"]):
                assigned[t] = m
            else:
                todo.append(ScanSpec("assign", task=t, dest=os.path.join(self.work, f"assign-{t:05d}"),
                                     marker=self._marker(f"assign-{t:05d}"), key=key, centroids=centroids_file,
                                     chunk_of=tuple(chunk_of.tolist()),
                                     threads=max(1, self.workers // max(1, len(ctx.tasks))), **common))
        for r in self._map(assign_task, todo):
            assigned[r["task"]] = r
        self._tick("assign")
        sizes = np.sum([assigned[t]["sizes"] for t in ctx.tasks], axis=0).astype(np.int64)
        rows: dict[int, list] = {}
        for t in ctx.tasks:
            for f, c, g in assigned[t]["rows"]:
                rows.setdefault(c, []).append((f, g))
        # 4. dedup, chunk by chunk
        done, todo = {}, []
        for n, (lo, hi) in enumerate(bounds):
            key = _digest([akey, "chunk", n])
            m = _done(self._marker(f"chunk-{n:05d}"), key)
            if m is not None and os.path.isfile(m["removed"]) and os.path.isfile(m["members"]):
                done[n] = m
            else:
                todo.append(ChunkSpec(self.spec, n, lo, hi, tuple(sorted(rows.get(n, []))),
                                      "quality_score" in ctx.columns,
                                      os.path.join(self.work, f"chunk-{n:05d}"), self._marker(f"chunk-{n:05d}"),
                                      key, threads=max(1, self.workers // max(1, len(bounds))),
                                      build=ctx.build_stage))
        for r in self._map(chunk_task, todo):
            done[r["chunk"]] = r
        self._tick("dedup")
        removed = [done[n]["removed"] for n in sorted(done)]
        ctx.con.execute(f"INSERT INTO removals SELECT * FROM read_parquet({sql_list(removed)})")
        self._write_outputs(c16, sizes, [done[n]["members"] for n in sorted(done)], info)
        self._tick("write")

    def _fit(self, results: dict, total: int, key: str, centroids_file: str) -> dict:
        stage = self.stage
        x = _global_sample([results[t]["file"] for t in sorted(results) if results[t]["count"]],
                           stage.sample_size).astype(np.float32)
        requested = stage.n_clusters if stage.n_clusters is not None else sem.default_clusters(total)
        with _limit_threads(self.workers):
            fit = sem.kmeans(x, min(requested, len(x)), stage.max_iter, stage.tol)
        k = len(fit.centroids)
        table = pa.table({"cluster": pa.array(np.arange(k), pa.int32()), "centroid": _f16_column(fit.centroids)})
        atomic_write_table(table, centroids_file, codec=WORK_CODEC)
        # chunks of consecutive clusters, about `limit` documents each by the sample's proportions
        share = np.bincount(fit.labels, minlength=k) * (total / len(x))
        limit = max(1.0, min(float(stage.chunk_docs), total / (2.0 * self.workers)))
        chunks, lo, acc = [], 0, 0.0
        for c in range(k):
            acc += share[c]
            if acc >= limit or c == k - 1:
                chunks.append([lo, c])
                lo, acc = c + 1, 0.0
        info = {"documents": int(total), "n_clusters_requested": int(requested), "n_clusters": int(k),
                "sample_size": int(len(x)), "iterations": int(fit.iterations), "converged": bool(fit.converged),
                "sample_mean_cosine": round(fit.mean_cosine, 12), "dim": int(x.shape[1])}
        m = {"key": key, "fit": info, "chunks": chunks}
        write_json_atomic(m, self._marker("fit"))
        return m

    def _write_outputs(self, c16: np.ndarray, sizes: np.ndarray, members: list[str], info: dict) -> None:
        from dataclean.sql import sql_string

        stage, ctx = self.stage, self.ctx
        folder = os.path.join(ctx.lay.dedup, stage.name)
        os.makedirs(folder, exist_ok=True)
        dim = int(c16.shape[1]) if c16.ndim == 2 else 0
        flat = pa.array(c16.astype(np.float32).reshape(-1), pa.float32())
        cents = pa.FixedSizeListArray.from_arrays(flat, dim) if dim else pa.array([], pa.list_(pa.float32(), 1))
        atomic_write_table(pa.table({"cluster": pa.array(np.arange(len(c16)), pa.int32()),
                                     "documents": pa.array(sizes, pa.int64()), "centroid": cents}),
                           os.path.join(folder, "centroids.parquet"))
        # chunk by chunk (chunks hold consecutive clusters), each sorted here: one chunk in memory at a time, and
        # pyarrow's writer, whose bytes depend only on the rows (DuckDB's parallel COPY wrote other bytes for
        # the same rows from one run to the next)
        atomic_write_tables((pq.read_table(f).sort_by([("cluster", "ascending"), ("subcluster", "ascending"),
                                                       ("rank", "ascending")]) for f in members),
                            MEMBER_SCHEMA, os.path.join(folder, "clusters.parquet"))
        removed = ctx.con.sql(f"SELECT count(*) FROM removals WHERE stage = {sql_string(stage.name)}").fetchall()[0][0]
        split = 0
        if members:
            split = ctx.con.sql(f"SELECT count(DISTINCT cluster) FROM read_parquet({sql_list(members)}) "
                                "WHERE subcluster > 0").fetchall()[0][0]
        write_json_atomic({**info, "removed": int(removed), "split_clusters": int(split), "eps": stage.eps,
                           "threshold": stage.threshold, "keep": stage.keep, "seed": stage.seed,
                           "max_cluster_size": stage.max_cluster_size, "max_iter": stage.max_iter, "tol": stage.tol},
                          os.path.join(folder, "fit.json"))


def _global_sample(files: list[str], size: int) -> np.ndarray:
    """The float16 rows of the ``size`` smallest (hash, doc_key) of the tasks' sample files (each sorted so):
    the keys first, merged file by file (memory: ``2 * size`` keys), then each file's rows up to the cut-off."""
    h = np.zeros(0, np.uint64)
    keys = np.zeros(0, np.int64)
    for f in files:
        t = pq.read_table(f, columns=["h", "doc_key"])
        h = np.concatenate([h, t.column("h").to_numpy()])
        keys = np.concatenate([keys, t.column("doc_key").to_numpy()])
        if len(h) > size:
            top = np.lexsort((keys, h))[:size]
            h, keys = h[top], keys[top]
    last = np.lexsort((keys, h))[-1] if len(h) else None
    cut = (int(h[last]), int(keys[last])) if last is not None else None
    parts, order_h, order_k = [], [], []
    for f in files:
        pf = pq.ParquetFile(f)
        for g in range(pf.num_row_groups):
            stats = pf.metadata.row_group(g).column(0).statistics
            if stats is not None and stats.has_min_max and int(stats.min) > cut[0]:
                break  # (the file is sorted by h: nothing further is in the sample)
            t = pf.read_row_group(g)
            gh, gk = t.column("h").to_numpy(), t.column("doc_key").to_numpy()
            take = (gh < cut[0]) | ((gh == cut[0]) & (gk <= cut[1]))
            if take.any():
                parts.append(_column_f16(t.column(COLUMN).filter(pa.array(take))))
                order_h.append(gh[take])
                order_k.append(gk[take])
    rows = np.concatenate(parts)
    return rows[np.lexsort((np.concatenate(order_k), np.concatenate(order_h)))]


def _digest(parts) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, default=str).encode("utf-8")).hexdigest()
