"""Near-duplicate removal with MinHash-LSH over the whole corpus, out-of-core.

Pass 1 (per batch, vectorised): the text normalized for shingling (NFKC, lower case, digits folded,
punctuation removed; traditional Chinese folded to simplified with ``fold_scripts``, see
:func:`dataclean.text.script_fold.fold_scripts`), word 5-gram shingles for space-delimited scripts and character 5-grams for Chinese
and Japanese (both in one document when it mixes them), a datasketch-compatible signature of ``num_perm``
permutations, and its ``bands`` band hashes (see :mod:`dataclean.dedup.minhash`). A document with no
shingle at all (empty after normalization) gets no signature: exact dedup is its only dedup, on purpose.

Global step (DuckDB under the configured memory limit, spilling to disk):

1. with ``against``, documents sharing a band bucket with a document *kept* by an earlier run (its
   ``dedup/minhash_bands/``) and similar enough to it are removed (``near_duplicate_earlier``);
2. band rows are grouped into buckets; every member of a bucket is linked to the bucket's smallest key
   (a star: as many edges as members, never quadratic). The bands are chosen generously (false-negative
   weight 0.95: a pair at Jaccard 0.8 becomes a candidate with probability 0.95, at 0.85 with 0.99)
   because a missed pair is lost for good while a false candidate is cheap to reject in the next step;
3. connected components of the candidate edges (union-find on the driver: edges are few next to
   documents) cut the work into chunks of whole components; per chunk the texts of its documents are read
   back and, with ``verify_pairs``, an edge is kept only when the **exact** Jaccard of the two shingle sets
   reaches ``threshold`` (``verify_with: signature`` uses the MinHash estimate instead: faster, noisier);
4. in each verified component the documents are ordered by preference — highest ``quality_score`` when
   the pipeline has one, then most characters, then smallest id — and clustered greedily: the first
   becomes a representative and takes every member whose similarity to it is at least
   ``min_similarity_to_rep`` (the chaining guard: A~B~C does not make A and C duplicates); the next
   unassigned member starts the next cluster. Every non-representative is removed with ``dup_of`` = its
   representative and ``value`` = its similarity to it.

   A component of up to ``max_pairwise_component`` members (default 100) compares each representative with
   every open member. That is quadratic when representatives take few members: a *chain* of documents, each
   one word away from the previous one, is one component of thousands in which each representative takes
   only its neighbours (10,000 such documents: 5.3M Jaccard computations, 84 s; 50,000: 16 min). A larger
   component is clustered in the same order through a prefix-filter index (Chaudhuri et al. 2006, Bayardo et
   al. 2007): every member indexes its rarest ``|x| - ceil(t * |x|) + 1`` values (``t`` =
   ``min_similarity_to_rep``; rarest by a count estimated within the component), and two sets with Jaccard
   >= ``t`` always share an indexed value, so a representative computes the similarity only with the open
   members its indexed values lead to (and whose size allows ``t``) and finds every member comparing it with
   all of them would find. The clusters, similarities and ledger rows are therefore the same as the pairwise
   loop's, whichever path a component takes (the cap only picks the faster one: the index costs a fixed
   ~70 us per component and wins above ~100 members of a chain); a 200,000-document chain clusters in about
   6 s. (``verify_with: signature`` indexes segments of the signature instead: with at most ``m`` unequal
   positions allowed, one of ``m + 1`` segments is equal.)

Measured with ``benchmarks/eval_minhash.py`` (3,697 edited pairs of real English and Chinese bench
documents around the threshold, plus 21,387 unrelated documents): precision 1.000 and recall 0.991 against
exact Jaccard >= 0.8; with signature verification and datasketch's default weights (9 bands x 13 rows)
the same set gave precision 0.962 and recall 0.806.

Artifacts in ``OUT/dedup/``: ``clusters.parquet`` (one row per member of every cluster of two or more),
``cluster_sizes.parquet``, and, for a later ``--dedup-against``, ``minhash_bands/`` (``id, band, h``) and
``minhash_signatures/`` (``id, sig``) of the documents this run kept (one part per pass-2 task), with
``minhash_params.json``.

A signature is stored as one fixed-size binary value, its ``num_perm`` hash values as little-endian uint32
(``numpy.frombuffer(sig, "<u4")`` gives datasketch's ``hashvalues``; :func:`signature_matrix` a column's),
and the survivors' band hashes likewise as little-endian uint64: Parquet writes a list column with a
repetition level per value, which made a list of 128 uint32 twice as slow to write and three times as slow to
read as a 512-byte value. (Signatures of an earlier run saved as ``list<uint32>`` are read as well.)
"""
from __future__ import annotations

import json
import os
import shutil
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dataclean.dedup.minhash import (
    DEFAULT_SCHEME,
    band_hashes,
    in_slices,
    kernels_enabled,
    kernels_loaded,
    mh_kernels,
    optimal_bands,
    sets_from_binary,
    shingle_hashes,
    shingle_sets,
    shingle_text,
    signatures,
    task_threads,
)
from dataclean.io.fs import files_in
from dataclean.io.writers import WORK_CODEC, atomic_write_table, atomic_write_tables, write_json_atomic
from dataclean.sql import sql_list
from dataclean.stages.base import GlobalStage, RuleSpec, StageResult, with_columns
from dataclean.text.kernels import fixed_binary_values
from dataclean.text.script_fold import DEFAULT_FOLD, fold_mode

PARAMS_FILE = "minhash_params.json"
BANDS_DIR = "minhash_bands"  # dedup/minhash_bands/part-TTTTT-NNNNN.parquet: (id, band, h) of the kept documents
SIGS_DIR = "minhash_signatures"  # dedup/minhash_signatures/part-TTTTT-NNNNN.parquet: (id, sig)


class MinHashDedup(GlobalStage):
    kind = "minhash_dedup"
    signal_fields = [  # (with the widths of the default 128 permutations in 16 bands; per instance below)
        pa.field("minhash_shingles", pa.int64()),
        pa.field("minhash_sig", pa.binary(4 * 128)),  # num_perm little-endian uint32
        pa.field("minhash_bands", pa.binary(8 * 16)),  # bands little-endian uint64
    ]
    internal_columns = ("minhash_sig", "minhash_bands")
    global_columns = ("n_chars", "source", "lang", "quality_score")
    rule_specs = [
        RuleSpec("near_duplicate", "minhash_sig", ("threshold", "min_similarity_to_rep"), "min",
                 "Jaccard estimate to the kept representative of its cluster"),
        RuleSpec("near_duplicate_earlier", "minhash_sig", ("threshold", "against"), "min",
                 "Jaccard estimate to a document kept by an earlier run (--dedup-against)"),
    ]

    def __init__(self, threshold: float = 0.8, num_perm: int = 128, seed: int = 1, word_ngram: int = 5,
                 char_ngram: int = 5, bands: int | None = None, rows: int | None = None,
                 false_positive_weight: float = 0.05, false_negative_weight: float = 0.95,
                 verify_pairs: bool = True, verify_with: str = "exact", min_similarity_to_rep: float | None = None,
                 against: Sequence[str] | None = None, chunk_nodes: int | None = None, max_pairwise_component: int = 100,
                 fold_scripts: bool | str = DEFAULT_FOLD, name: str | None = None):
        super().__init__(name)
        self.fold_scripts = fold_mode(fold_scripts, "minhash_dedup.fold_scripts")
        if not 0.0 < float(threshold) <= 1.0:
            raise ValueError(f"minhash_dedup.threshold must be in (0, 1], not {threshold!r}")
        if int(num_perm) < 2:
            raise ValueError("minhash_dedup.num_perm must be at least 2")
        if int(word_ngram) < 1 or int(char_ngram) < 1:
            raise ValueError("minhash_dedup.word_ngram and char_ngram must be at least 1")
        self.threshold, self.num_perm, self.seed = float(threshold), int(num_perm), int(seed)
        self.word_ngram, self.char_ngram = int(word_ngram), int(char_ngram)
        self.false_positive_weight, self.false_negative_weight = false_positive_weight, false_negative_weight
        if (bands is None) != (rows is None):
            raise ValueError("minhash_dedup: give both bands and rows, or neither (then they are optimized)")
        if bands is None:
            bands, rows = optimal_bands(self.threshold, self.num_perm, false_positive_weight, false_negative_weight)
        if int(bands) * int(rows) > self.num_perm:
            raise ValueError(f"minhash_dedup: bands * rows = {bands * rows} exceeds num_perm = {self.num_perm}")
        self.bands, self.rows = int(bands), int(rows)
        self.signal_fields = [MinHashDedup.signal_fields[0], pa.field("minhash_sig", pa.binary(4 * self.num_perm)),
                              pa.field("minhash_bands", pa.binary(8 * self.bands))]
        self.kept_schemas = {
            BANDS_DIR: pa.schema([("id", pa.string()), ("band", pa.int32()), ("h", pa.uint64())]),
            SIGS_DIR: pa.schema([("id", pa.string()), ("sig", pa.binary(4 * self.num_perm))]),
        }
        self.verify_pairs = bool(verify_pairs)
        self.verify_threads = 1  # set by verify_task (VerifySpec.threads); not a parameter: same results
        if verify_with not in ("exact", "signature"):
            raise ValueError("minhash_dedup.verify_with must be exact or signature")
        self.verify_with = verify_with
        self.chunk_nodes = None if chunk_nodes is None else int(chunk_nodes)  # None: from the memory budget
        if int(max_pairwise_component) < 1:
            raise ValueError("minhash_dedup.max_pairwise_component must be at least 1")
        self.max_pairwise_component = int(max_pairwise_component)
        self.global_columns = MinHashDedup.global_columns + (("text",) if verify_with == "exact" else ())
        self.min_similarity_to_rep = self.threshold if min_similarity_to_rep is None else float(min_similarity_to_rep)
        if isinstance(against, str):
            against = [against]
        self.against = [str(a) for a in (against or [])]
        for old in self.against:
            self._check_against(old)

    def derived_params(self) -> dict:
        # (optimal_bands costs ~36 ms, in each worker process that builds the stage without them)
        return {"bands": self.bands, "rows": self.rows}

    # -- pass 1 ------------------------------------------------------------------------------------------
    def apply(self, batch: pa.RecordBatch) -> StageResult:
        values, offsets = shingle_hashes(shingle_text(batch.column("text"), self.fold_scripts), self.word_ngram,
                                         self.char_ngram)
        counts = np.diff(offsets).astype(np.int64)
        sigs = signatures(values, offsets, self.num_perm, self.seed)
        bands = band_hashes(sigs, self.bands, self.rows)
        has = counts > 0
        return StageResult(with_columns(batch, {"minhash_shingles": pa.array(counts, pa.int64()),
                                                "minhash_sig": _fixed_binary(sigs.astype("<u4"), has),
                                                "minhash_bands": _fixed_binary(bands.astype("<u8"), has)}))

    # -- the global step's shuffle (dataclean/exec/shuffle.py) -------------------------------------------
    shuffle_schema = pa.schema([("band", pa.int32()), ("h", pa.uint64()), ("doc_key", pa.int64())])
    shuffle_reduce = ("SELECT r.* FROM rows r SEMI JOIN (SELECT band, h FROM rows GROUP BY band, h "
                      "HAVING count(*) > 1) g USING (band, h)")

    def shuffle_rows(self, batch: pa.RecordBatch) -> tuple[pa.Table, np.ndarray]:
        """One row per band of each document that has a signature: (band 1..bands, band hash, doc_key),
        partitioned by the band hash."""
        col = batch.column("minhash_bands")
        if isinstance(col, pa.ChunkedArray):
            col = col.combine_chunks()
        bands = col.type.byte_width // 8
        matrix = signature_matrix(col, bands, "<u8")
        keys = batch.column("doc_key").to_numpy()
        if col.null_count:
            has = np.flatnonzero(pc.is_valid(col).to_numpy(zero_copy_only=False))
            matrix, keys = matrix[has], keys[has]
        h = matrix.reshape(-1).astype(np.uint64)
        rows = pa.table({"band": pa.array(np.tile(np.arange(1, bands + 1, dtype=np.int32), len(keys))),
                         "h": pa.array(h, pa.uint64()), "doc_key": pa.array(np.repeat(keys, bands), pa.int64())})
        return rows, h

    # -- global step -------------------------------------------------------------------------------------
    def params_record(self) -> dict:
        return {"num_perm": self.num_perm, "seed": self.seed, "word_ngram": self.word_ngram,
                "char_ngram": self.char_ngram, "bands": self.bands, "rows": self.rows,
                "scheme": DEFAULT_SCHEME, "shingling": "dataclean.dedup.minhash v1",
                "fold_scripts": self.fold_scripts}

    #: params_record() keys an earlier run may lack, with the value it had then
    _RECORD_DEFAULTS = {"fold_scripts": "off"}

    def _check_against(self, old: str) -> None:
        folder = os.path.join(old, "dedup")
        path = os.path.join(folder, PARAMS_FILE)
        if not os.path.isfile(path):
            raise ValueError(f"minhash_dedup.against: {old} has no dedup/{PARAMS_FILE} "
                             "(not the output of a finished dataclean run with minhash_dedup)")
        if not os.path.isfile(os.path.join(old, "manifest.json")) or not os.path.isdir(os.path.join(folder, BANDS_DIR)):
            raise ValueError(f"minhash_dedup.against: {old} has no dedup/{BANDS_DIR}/ or no manifest.json (an "
                             "unfinished run, or one written by a dataclean before 0.1 that saved one bands file)")
        with open(path, encoding="utf-8") as fh:
            theirs = json.load(fh)
        mine = self.params_record()
        theirs = {**self._RECORD_DEFAULTS, **theirs}
        diff = sorted(k for k in mine if theirs.get(k) != mine[k])
        if diff:
            raise ValueError(f"minhash_dedup.against: {old} was deduplicated with other MinHash parameters "
                             f"({', '.join(f'{k}={theirs.get(k)!r} here {mine[k]!r}' for k in diff)})")

    def global_decide(self, ctx, view: str) -> None:
        con = ctx.con
        for old in self.against:
            self._against_old(ctx, view, old)
        # band rows of the buckets that held two or more documents (made by the reduce tasks from the band
        # rows pass 1 wrote partitioned), less the documents earlier stages removed
        bands = ctx.candidates[self.name]
        edges = con.sql(f"""
            SELECT DISTINCT b.doc_key AS a, g.first_key AS b
            FROM {bands} b JOIN (SELECT band, h, min(doc_key) AS first_key FROM {bands}
                                 GROUP BY band, h HAVING count(*) > 1) g USING (band, h)
            WHERE b.doc_key <> g.first_key ORDER BY a, b""").fetchnumpy()
        a, b = np.asarray(edges["a"], np.int64), np.asarray(edges["b"], np.int64)
        keys = np.unique(np.concatenate([a, b]))
        u, v = np.searchsorted(keys, a), np.searchsorted(keys, b)
        comp = connected_components(len(keys), u, v)  # candidate components: an upper bound of the clusters
        removed, clusters = self._verify_components(ctx, keys, comp, a, b, comp[u])
        if removed:
            con.execute("INSERT INTO removals SELECT * FROM read_parquet(" + sql_list(removed) + ")")
        self._write_clusters(ctx, clusters)
        shutil.rmtree(ctx.lay.p("_work", "global", f"nodes-{self.name}"), ignore_errors=True)

    def _verify_components(self, ctx, keys: np.ndarray, comp: np.ndarray, a: np.ndarray, b: np.ndarray,
                           edge_comp: np.ndarray) -> tuple[list[str], list[str]]:
        """Verify and cluster the candidate components as tasks; return the files of their removals and clusters.

        1. ``gather``: one map task per pass-1 task reads its own documents and keeps the candidates' rows
           (shingle sets or texts, or signatures; quality...), grouped by chunk (dataclean/exec/aggregate.py), so the driver
           never scans the corpus;
        2. one :func:`verify_task` per chunk of whole components reads its components' rows and edges and runs
           :meth:`_decide_chunk`. Components are independent, so the chunks run in parallel through the
           executor (its process pool, Ray tasks on a cluster) and their decisions do not depend on how the
           components are cut: a chunk holds about ``chunk_nodes`` candidates (what bounds a task's memory), or
           fewer, so that every worker gets two chunks (12,335 candidates on 2 workers were cut 10,001 + 2,334:
           one worker verified for 0.41 s while the other waited after 0.14 s)."""

        work = ctx.lay.p("_work", "global", f"nodes-{self.name}")
        shutil.rmtree(work, ignore_errors=True)
        os.makedirs(work)
        bounds = list(_chunks(comp, chunk_size(len(keys), self._chunk_nodes(ctx), ctx.workers)))
        chunk = np.searchsorted(np.array([hi for _, hi in bounds], np.int64), comp)  # the chunk of each node
        nodes_file = os.path.join(work, "nodes.parquet")
        atomic_write_table(pa.table({"doc_key": pa.array(keys, pa.int64()), "comp": pa.array(comp, pa.int64()),
                                     "chunk": pa.array(chunk, pa.int64())}), nodes_file, row_group_rows=65536,
                           codec=WORK_CODEC)
        order = np.argsort(edge_comp, kind="stable")
        edges_file = os.path.join(work, "edges.parquet")
        atomic_write_table(pa.table({"comp": pa.array(edge_comp[order], pa.int64()), "a": pa.array(a[order], pa.int64()),
                                     "b": pa.array(b[order], pa.int64())}), edges_file, row_group_rows=65536,
                           codec=WORK_CODEC)
        columns = ["id", "n_chars", "source", "lang"]
        columns += ["quality_score"] if "quality_score" in ctx.columns else []
        # what the similarity is computed from: the texts (exact Jaccard) or the signatures
        columns += ["text"] if self.verify_with == "exact" else ["minhash_sig"]
        rows = os.path.join(work, "rows")
        params = {"nodes": nodes_file, "columns": columns, "dest": rows}
        if self.verify_with == "exact" and self.fold_scripts == "off":
            # the map tasks shingle the texts (0.55 s of a 50,000-document chain's verification in 2 threads, 1.5x
            # more wall time in all when the verification did it: the lz4 texts written, read and concatenated;
            # fewer tasks than workers: the idle workers' cores go to their threads). They shingle without script
            # folding: with fold_scripts the texts are gathered and the verification tasks shingle them.
            params["shingle_sets"] = [self.word_ngram, self.char_ngram]
            params["threads"] = max(1, ctx.workers // max(1, len(ctx.tasks)))
        found = ctx.run_map("gather", "doc_key", params=params)
        parts: dict[int, list[tuple[str, int]]] = {}
        for f, c, rg in zip(*(found.column(n).to_pylist() for n in ("file", "chunk", "row_group"))):
            parts.setdefault(c, []).append((f, rg))
        spec = next(sp for sp in ctx.cfg["pipeline"] if sp.get("name", sp["stage"]) == self.name)
        spec = dict(spec, **self.derived_params())
        if not bounds:
            return [], []
        # one component of a whole chain is one chunk: the idle workers' cores go to its threads
        threads = max(1, ctx.workers // len(bounds))
        specs = [VerifySpec(spec, n, lo, hi, tuple(sorted(parts.get(n, []))), edges_file,
                            os.path.join(work, "chunks", f"{n:06d}"), threads, ctx.build_stage)
                 for n, (lo, hi) in enumerate(bounds)]
        done = ctx.map(verify_task, specs)
        return [d["removed"] for d in done], [d["clusters"] for d in done]

    def _chunk_nodes(self, ctx) -> int:
        """The most candidates of one verification chunk: ``chunk_nodes`` if given, else what one task's share
        of the memory budget holds at :data:`NODE_BYTES` each, from :data:`CHUNK_NODES_MIN` to
        :data:`CHUNK_NODES_MAX`."""
        if self.chunk_nodes is not None:
            return self.chunk_nodes
        share = getattr(ctx, "task_memory_bytes", None)
        free = share() if callable(share) else None
        if free is None:
            return CHUNK_NODES_MIN
        return int(max(CHUNK_NODES_MIN, min(CHUNK_NODES_MAX, free // NODE_BYTES)))

    def _decide_chunk(self, nodes: pa.Table, a: np.ndarray, b: np.ndarray) -> tuple[pa.Table, pa.Table]:
        """Verify the candidate edges of whole components, then cluster each verified component.

        ``nodes`` come in any order (reordering the texts of a 48,713-document chain took 0.64 s): the results
        are in ``doc_key`` order, and so is every tie."""
        keys = nodes.column("doc_key").to_numpy()
        by_key = np.argsort(keys, kind="stable")
        u, v = by_key[np.searchsorted(keys[by_key], a)], by_key[np.searchsorted(keys[by_key], b)]
        similarity = self._similarity_fn(nodes)
        if self.verify_pairs:
            pairs = getattr(similarity, "pairs", None)
            if pairs is not None:  # the compiled exact Jaccard, all edges at once
                ok = pairs(u, v) >= self.threshold
            else:
                ok = np.array([similarity(i, j) >= self.threshold for i, j in zip(u.tolist(), v.tolist())],
                              dtype=bool)
            u, v = u[ok], v[ok]
        labels = connected_components(len(keys), u, v)
        reps, sims = self._cluster(labels, nodes, similarity, by_key)
        ids = np.asarray(nodes.column("id").to_pylist(), dtype=object)
        size = np.bincount(reps, minlength=len(keys))
        gone = by_key[reps[by_key] != by_key]
        k = len(gone)
        measure = "exact Jaccard of shingle sets" if self.verify_with == "exact" else \
            f"MinHash Jaccard estimate, {self.num_perm} permutations"
        removed = pa.table({
            "doc_key": pa.array(keys[gone], pa.int64()),
            "stage": pa.array([self.name] * k, pa.string()),
            "rule": pa.array(["near_duplicate"] * k, pa.string()),
            "reason": pa.array(["near_duplicate"] * k, pa.string()),
            "value": pa.array(sims[gone], pa.float64()),
            "threshold": pa.array([self.min_similarity_to_rep] * k, pa.float64()),
            "detail": pa.array([f"cluster of {size[r]} ({measure})" for r in reps[gone]], pa.string()),
            "dup_of": pa.array(ids[reps[gone]].tolist(), pa.string()),
        })
        member = by_key[size[reps[by_key]] > 1]
        clusters = pa.table({
            "cluster": pa.array(ids[reps[member]].tolist(), pa.string()),
            "id": pa.array(ids[member].tolist(), pa.string()),
            "is_representative": pa.array(reps[member] == member),
            "similarity": pa.array(sims[member], pa.float64()),
            "cluster_size": pa.array(size[reps[member]], pa.int64()),
            "source": nodes.column("source").take(pa.array(member, pa.int64())),
            "lang": nodes.column("lang").take(pa.array(member, pa.int64())),
            "n_chars": nodes.column("n_chars").take(pa.array(member, pa.int64())),
        })
        return removed, clusters

    def _similarity_fn(self, nodes: pa.Table):
        """similarity(i, j) of two nodes: exact Jaccard of their shingle sets (``shingle_set``, as the gather
        tasks compute them, or from ``text``), or the signature estimate (from ``minhash_sig``).

        For the greedy clustering of a large component (:meth:`_cluster`) it also carries
        ``keys(group, t)``: per node of ``group``, index tokens such that two nodes whose similarity reaches
        ``t > 0`` always share one (:func:`_prefix_keys`, :func:`_segment_keys`), and ``against(i, js)``: the
        similarities of node ``i`` to the nodes ``js``, the same values as ``similarity(i, j)``; the compiled
        exact Jaccard carries ``greedy(group, t)``, that whole clustering in one kernel."""
        if self.verify_with != "exact":
            sigs = signature_matrix(nodes.column("minhash_sig"), self.num_perm)

            def estimate(i: int, j: int) -> float:
                return float((sigs[i] == sigs[j]).mean())
            estimate.keys = lambda group, t: _segment_keys(sigs[group], t)
            estimate.against = lambda i, js: (sigs[js] == sigs[i]).mean(axis=1)
            return estimate
        threads = self.verify_threads
        if "shingle_set" in nodes.column_names:  # computed by the gather tasks (dataclean/exec/aggregate.py)
            compiled = sets_from_binary(nodes.column("shingle_set"))
        else:
            compiled = shingle_sets(nodes.column("text"), self.word_ngram, self.char_ngram, threads, self.fold_scripts)
        if compiled is not None:
            k = mh_kernels()
            set_values, set_offsets = compiled
            del compiled

            def exact_compiled(i: int, j: int) -> float:
                return k.jaccard_one(set_values, set_offsets, i, j)

            def pairs(u: np.ndarray, v: np.ndarray) -> np.ndarray:
                u, v = np.asarray(u, np.int64), np.asarray(v, np.int64)
                return np.concatenate(in_slices(len(u), threads if len(u) >= 100_000 else 1, lambda lo, hi:
                                                k.jaccard_pairs(set_values, set_offsets, u[lo:hi], v[lo:hi])))
            exact_compiled.pairs = pairs

            def greedy(group: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray]:
                group = np.ascontiguousarray(group, np.int64)
                total = int((set_offsets[group + 1] - set_offsets[group]).sum())
                bits = min(22, max(12, (total // 16).bit_length()))  # counters: ~3x the distinct values of a chain
                # (k.prefix_values in slices: 0.26 s of one thread on a 50,000-document chain)
                pre_off, pack_off = k.prefix_sizes(set_offsets, group, float(t))
                parts = in_slices(len(group), threads, lambda lo, hi:
                                  k.prefix_sketch(set_values, set_offsets, group, lo, hi, bits))
                sketch = parts[0] if len(parts) == 1 else np.sum(parts, axis=0, dtype=np.int32)
                packed = np.empty(int(pack_off[-1]), np.uint64)
                in_slices(len(group), threads, lambda lo, hi:
                          k.prefix_pack(set_values, set_offsets, group, pack_off, sketch, lo, hi, packed))
                del parts, sketch
                packed.sort()
                pre_tok, post_off, post_pos = k.prefix_postings(pre_off, packed)
                del packed
                return k.greedy_prefix(set_values, set_offsets, group, pre_off, pre_tok, post_off, post_pos, float(t))
            exact_compiled.greedy = greedy
            return exact_compiled
        values, offsets = shingle_hashes(shingle_text(nodes.column("text").combine_chunks(), self.fold_scripts),
                                         self.word_ngram, self.char_ngram)
        sets = [np.unique(values[offsets[i]:offsets[i + 1]]) for i in range(nodes.num_rows)]

        def exact(i: int, j: int) -> float:
            x, y = sets[i], sets[j]
            if not len(x) and not len(y):
                return 1.0
            inter = np.intersect1d(x, y, assume_unique=True).size
            return inter / (len(x) + len(y) - inter)
        exact.keys = lambda group, t: _prefix_keys([sets[i] for i in group.tolist()], t)
        exact.against = lambda i, js: np.array([exact(i, j) for j in js.tolist()], np.float64)
        return exact

    def _cluster(self, labels: np.ndarray, nodes: pa.Table, similarity,
                 by_key: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
        """Greedy clustering inside each component, representatives first in preference order: returns
        each node's representative and its similarity to it.

        A component of at most ``max_pairwise_component`` nodes compares each representative with every open
        node; a larger one (a chain of small edits is one component of thousands, where that is quadratic)
        compares it only with the open nodes its index tokens lead to (:meth:`_similarity_fn`): the pairs
        that can reach ``min_similarity_to_rep``, so the clusters are the same."""
        n = len(labels)
        q = nodes.column("q").to_numpy(zero_copy_only=False).astype(np.float64)
        q = np.where(np.isnan(q), -np.inf, q)
        chars = nodes.column("n_chars").to_numpy(zero_copy_only=False).astype(np.int64)
        by_key = np.arange(n) if by_key is None else by_key  # (the nodes in doc_key order: what breaks id ties)
        id_rank = np.empty(n, np.int64)
        id_rank[by_key] = np.argsort(np.argsort(np.asarray(nodes.column("id").to_pylist(), dtype=object)[by_key],
                                                kind="stable"))
        order = np.lexsort((id_rank, -chars, -q, labels))  # by component, then preference
        reps = np.arange(n, dtype=np.int64)
        sims = np.ones(n, dtype=np.float64)
        bounds = np.flatnonzero(np.diff(labels[order])) + 1
        t = self.min_similarity_to_rep
        greedy = getattr(similarity, "greedy", None)
        # (t <= 0: every pair is similar, nothing to index; a plain function has no index tokens)
        indexed = t > 0 and (greedy is not None or hasattr(similarity, "keys"))
        for group in np.split(order, bounds):
            if len(group) == 1:
                continue
            if indexed and len(group) > self.max_pairwise_component:
                rep, sim = greedy(group, t) if greedy is not None else _greedy_by_keys(group, similarity, t)
                reps[group], sims[group] = group[rep], sim
                continue
            open_ = np.ones(len(group), dtype=bool)
            for i in range(len(group)):
                if not open_[i]:
                    continue
                open_[i] = False
                for j in np.flatnonzero(open_):
                    sim = similarity(int(group[i]), int(group[j]))
                    if sim >= t:
                        reps[group[j]], sims[group[j]] = group[i], sim
                        open_[j] = False
                if not open_.any():
                    break
        return reps, sims

    def _against_old(self, ctx, view: str, old: str) -> None:
        from dataclean.layout import shuffle_file_name as file_name

        con = ctx.con
        folder = os.path.join(old, "dedup")
        # the band rows of this run's documents: what pass 1 wrote for the reduce tasks, less the removed
        band_files = [os.path.join(ctx.lay.pass1_dir(t), file_name(self.name)) for t in ctx.tasks]
        con.execute(f"""
            CREATE OR REPLACE TEMP TABLE mh_old AS
            SELECT n.doc_key, o.id AS old_id
            FROM (SELECT band, h, doc_key FROM read_parquet({sql_list(band_files)}) SEMI JOIN {view} USING (doc_key)) n
            JOIN read_parquet({sql_list(files_in(os.path.join(folder, BANDS_DIR), "*.parquet"))}) o USING (band, h)
            GROUP BY ALL""")
        pairs = con.sql(f"""
            SELECT p.doc_key, p.old_id, n.minhash_sig AS new_sig, s.sig AS old_sig
            FROM mh_old p JOIN {view} n USING (doc_key)
            JOIN read_parquet({sql_list(files_in(os.path.join(folder, SIGS_DIR), "*.parquet"))}) s ON s.id = p.old_id
            ORDER BY p.doc_key, p.old_id""").to_arrow_table()
        con.execute("DROP TABLE mh_old")
        if pairs.num_rows == 0:
            return
        sim = (signature_matrix(pairs.column("new_sig"), self.num_perm)
               == signature_matrix(pairs.column("old_sig"), self.num_perm)).mean(axis=1)
        keys = pairs.column("doc_key").to_numpy()
        ok = sim >= self.min_similarity_to_rep
        # per new document, the most similar earlier document (ties: smallest old id, the sort order)
        order = np.lexsort((np.arange(len(keys)), -sim, keys))
        first = order[np.r_[True, keys[order][1:] != keys[order][:-1]]]
        first = first[ok[first]]
        old_ids = pairs.column("old_id").take(pa.array(first))
        rem = pa.table({
            "doc_key": pa.array(keys[first], pa.int64()),
            "stage": pa.array([self.name] * len(first), pa.string()),
            "rule": pa.array(["near_duplicate_earlier"] * len(first), pa.string()),
            "reason": pa.array(["near_duplicate"] * len(first), pa.string()),
            "value": pa.array(sim[first], pa.float64()),
            "threshold": pa.array([self.min_similarity_to_rep] * len(first), pa.float64()),
            "detail": pa.array([f"kept by the earlier run {old}"] * len(first), pa.string()),
            "dup_of": old_ids,
        })
        con.register("mh_removed", rem)
        con.execute("INSERT INTO removals SELECT * FROM mh_removed")
        con.unregister("mh_removed")

    def _write_clusters(self, ctx, files: list[str]) -> None:
        """``clusters.parquet`` (every member of every cluster, by cluster, its representative first, then by id)
        and ``cluster_sizes.parquet`` from the verification tasks' cluster files. DuckDB sorts them under the
        global step's memory limit (spilling beyond it) and the rows are written as they come: sorted in Arrow,
        the 1.6M members of a 3.1M-document run took the driver from 680 to 1,180 MiB."""
        folder = ctx.lay.dedup
        path = os.path.join(folder, "clusters.parquet")
        sizes_schema = pa.schema([("cluster_size", pa.int64()), ("clusters", pa.int64())])
        if not files:
            atomic_write_table(CLUSTERS_SCHEMA.empty_table(), path)
            sizes = sizes_schema.empty_table()
        else:
            rows = f"read_parquet({sql_list(files)})"
            reader = ctx.con.sql(f"SELECT {', '.join(CLUSTERS_SCHEMA.names)} FROM {rows} "
                                 "ORDER BY cluster, is_representative DESC, id").to_arrow_reader(65536)
            # (row groups of 8,192 rows, as atomic_write_table writes: the bytes of the rows alone)
            atomic_write_tables((pa.Table.from_batches([b]) for b in reader), CLUSTERS_SCHEMA, path, 8192)
            sizes = ctx.con.sql(f"SELECT cluster_size, count(*) AS clusters FROM {rows} WHERE is_representative "
                                "GROUP BY cluster_size ORDER BY cluster_size").to_arrow_table().cast(sizes_schema)
        sizes = sizes.append_column("documents", pc.multiply(sizes.column("cluster_size"), sizes.column("clusters")))
        atomic_write_table(sizes, os.path.join(folder, "cluster_sizes.parquet"))

    def write_final_artifacts(self, ctx, view: str) -> None:
        """``minhash_params.json``: what a later run's ``against`` checks. The bands and signatures of the kept
        documents are written by each pass-2 task for its own documents (:meth:`kept_rows`)."""
        os.makedirs(ctx.lay.dedup, exist_ok=True)
        write_json_atomic(self.params_record(), os.path.join(ctx.lay.dedup, PARAMS_FILE))

    # -- pass 2: what a later run dedups against (kept_schemas: set per instance) ---------------------------

    @property
    def kept_rows_per_doc(self) -> dict[str, int]:
        return {BANDS_DIR: self.bands, SIGS_DIR: 1}

    def kept_rows(self, batch: pa.RecordBatch) -> dict[str, pa.Table]:
        """Rows of ``dedup/minhash_bands/`` and ``dedup/minhash_signatures/`` for the documents a pass-2 task
        keeps (each task writes its own part files, in input order: no sort on the driver)."""
        has = pc.is_valid(batch.column("minhash_sig"))
        kept = batch.filter(has) if not pc.all(has).as_py() else batch
        rows, _ = self.shuffle_rows(kept)
        ids = kept.column("id").take(pa.array(np.searchsorted(kept.column("doc_key").to_numpy(),
                                                              rows.column("doc_key").to_numpy())))
        return {BANDS_DIR: pa.table({"id": ids, "band": rows.column("band"), "h": rows.column("h")}),
                SIGS_DIR: pa.table({"id": kept.column("id"), "sig": kept.column("minhash_sig")})}


#: Verification chunks without ``chunk_nodes``. Every chunk is a task that opens its row group of every
#: gather file (one per pass-1 task), so chunks cost their count times the pass-1 tasks: at 10M documents
#: (930 pass-1 tasks) 600 chunks of 10,000 candidates took 134 s, 0.22 s each, and on 1M documents 590 chunks
#: of 1,000 took 68 s against 8.8 s for 59 of 10,000. A worker verifying a chunk of 10,000 candidates held
#: ~120 MiB more than in pass 1 (~12 KiB each, shingle sets and texts): planned at 16 KiB.
CHUNK_NODES_MIN = 10_000
CHUNK_NODES_MAX = 200_000
NODE_BYTES = 16 << 10

#: The columns of ``dedup/clusters.parquet``.
CLUSTERS_SCHEMA = pa.schema([("cluster", pa.string()), ("id", pa.string()), ("is_representative", pa.bool_()),
                             ("similarity", pa.float64()), ("cluster_size", pa.int64()), ("source", pa.string()),
                             ("lang", pa.string()), ("n_chars", pa.int64())])


@dataclass(frozen=True)
class VerifySpec:
    """One verification task: chunk ``chunk`` = the components ``lo..hi`` of the stage configured by
    ``stage_spec``, their rows (``(file, row group)`` of the gathered files) and their edges in ``edges``
    (sorted by component)."""

    stage_spec: dict
    chunk: int
    lo: int
    hi: int
    rows: tuple[tuple[str, int], ...]
    edges: str
    dest: str
    threads: int = 1  # for the shingling and the edges: more than 1 when there are fewer chunks than workers
    build: Callable | None = None  # the context's build_stage: rebuilds the stage from stage_spec in the worker


def verify_task(spec: VerifySpec) -> dict:
    """Verify the candidate edges of a chunk of components and cluster them (:meth:`MinHashDedup._decide_chunk`);
    write the removals and the clusters to ``spec.dest``-removed.parquet / -clusters.parquet."""
    from dataclean.failpoints import failpoint
    stage = spec.build(spec.stage_spec)
    stage.verify_threads = task_threads(spec.threads)
    where = [("comp", ">=", spec.lo), ("comp", "<=", spec.hi)]
    # this chunk's row group of each gathered file (every chunk has candidates, so there is one at least)
    nodes = pa.concat_tables([pq.ParquetFile(f).read_row_group(rg) for f, rg in spec.rows])  # (any order)
    q = nodes.column("quality_score") if "quality_score" in nodes.column_names else pa.nulls(nodes.num_rows, pa.float64())
    nodes = pa.table({"comp": nodes.column("comp"), "doc_key": nodes.column("doc_key"), "id": nodes.column("id"),
                      "n_chars": nodes.column("n_chars"), "q": pc.cast(q, pa.float64()),
                      "source": nodes.column("source"), "lang": nodes.column("lang"),
                      **{name: nodes.column(name) for name in ("minhash_sig", "text", "shingle_set")
                         if name in nodes.column_names}})
    edges = pq.read_table(spec.edges, filters=where)
    removed, clusters = stage._decide_chunk(nodes, edges.column("a").to_numpy(), edges.column("b").to_numpy())
    out = {"removed": spec.dest + "-removed.parquet", "clusters": spec.dest + "-clusters.parquet"}
    atomic_write_table(removed, out["removed"])
    failpoint(f"verify-{spec.chunk}")  # removals written, clusters not yet
    atomic_write_table(clusters, out["clusters"])
    return out


def chunk_size(nodes: int, chunk_nodes: int, workers: int | None) -> int:
    """Candidates per verification chunk: ``chunk_nodes`` at most, fewer when that gives each of ``workers``
    fewer than two chunks."""
    return max(1, min(int(chunk_nodes), -(-int(nodes) // (2 * max(1, int(workers or 1))))))


def _chunks(comp: np.ndarray, max_nodes: int):
    """(first, last) component labels of consecutive groups of whole components of about ``max_nodes`` nodes
    (at least ``max_nodes``, but for the last; one component may hold more)."""
    labels, counts = np.unique(comp, return_counts=True)
    lo, total = None, 0
    for label, count in zip(labels.tolist(), counts.tolist()):
        if lo is None:
            lo = label
        total += count
        if total >= max_nodes:
            yield lo, label
            lo, total = None, 0
    if lo is not None:
        yield lo, int(labels[-1])


def _fixed_binary(matrix: np.ndarray, present: np.ndarray) -> pa.FixedSizeBinaryArray:
    """Each row of ``matrix`` as one fixed-size binary value of its bytes (no copy); null where ``present`` is
    False."""
    n, width = matrix.shape
    data = pa.py_buffer(np.ascontiguousarray(matrix))
    validity = None if present.all() else pa.array(present, pa.bool_()).buffers()[1]
    return pa.FixedSizeBinaryArray.from_buffers(pa.binary(width * matrix.dtype.itemsize), n, [validity, data])


def signature_matrix(column, width: int, dtype: str = "<u4") -> np.ndarray:
    """The values of a signature (or band hash) column as an ``(n, width)`` matrix of ``dtype``: a
    fixed-size binary column (as dataclean writes them), a variable binary one of values of that size (as
    DuckDB returns them), or a list column (the ``list<uint32>`` signatures of file format 1, see
    :data:`dataclean.layout.FILE_FORMAT`). The rows of null values hold unspecified numbers (of a list
    column, they are left out: give it no nulls)."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if pa.types.is_list(column.type) or pa.types.is_large_list(column.type):
        return pc.list_flatten(column).to_numpy(zero_copy_only=False).astype(dtype).reshape(-1, width)
    nbytes = width * np.dtype(dtype).itemsize
    if not pa.types.is_fixed_size_binary(column.type):
        column = pc.cast(column, pa.binary(nbytes))
    if column.type.byte_width != nbytes:
        raise ValueError(f"a column of {column.type.byte_width}-byte values is no signature of {width} x {dtype}")
    return fixed_binary_values(column, dtype)


def connected_components(n: int, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Component label (the smallest member index) of each of ``n`` nodes joined by edges ``u``–``v``:
    union-find (compiled), else numpy min-hooking (:func:`_hook_components`), else scipy's breadth-first
    search. Near-linear in nodes + edges whatever the shape."""
    u, v = np.asarray(u, np.int64), np.asarray(v, np.int64)
    if len(u) == 0:
        return np.arange(n, dtype=np.int64)
    # The kernel only where the kernels are loaded already (a verification task): on the driver, importing
    # numba or scipy costs more than the numpy hooking below takes; same labels (docs/measurements.md
    # #connected-components, benchmarks/bench_components.py).
    if kernels_loaded() and kernels_enabled():
        return mh_kernels().components(int(n), u, v)
    label = _hook_components(int(n), u, v)
    if label is not None:
        return label
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components as scipy_components

    graph = coo_matrix((np.ones(len(u), np.int8), (u, v)), shape=(n, n)).tocsr()
    _, label = scipy_components(graph, directed=False)
    _, first = np.unique(label, return_index=True)  # (each label's first node is its smallest)
    return first[label].astype(np.int64)


def _hook_components(n: int, u: np.ndarray, v: np.ndarray, max_rounds: int = 64) -> np.ndarray | None:
    """Connected components by min-hooking with full pointer jumping (Shiloach-Vishkin style), vectorized: each
    round hooks the larger root of every edge whose ends have different roots under the smallest root offered
    to it, then points every node at its root. Links only go from a larger to a smaller node, so a component
    ends with its smallest node as the root of all. Rounds measured: a 200,000-node path in shuffled order 12,
    in key order (either way) 2, 1,000 stars of 200 2. After ``max_rounds`` it gives up: None (the caller's
    breadth-first search decides), so no input makes it slower than that."""
    parent = np.arange(n, dtype=np.int64)
    for _ in range(max_rounds):
        pu, pv = parent[u], parent[v]
        differ = pu != pv
        if not differ.any():
            return parent
        lo, hi = np.minimum(pu[differ], pv[differ]), np.maximum(pu[differ], pv[differ])
        np.minimum.at(parent, hi, lo)
        while True:
            jumped = parent[parent]
            if np.array_equal(jumped, parent):
                break
            parent = jumped
    return None


def _greedy_by_keys(group: np.ndarray, similarity, t: float) -> tuple[np.ndarray, np.ndarray]:
    """The greedy clustering of one component (``group``: its nodes in preference order) through the index
    tokens ``similarity.keys(group, t)``: each open node in turn becomes a representative and takes the open
    nodes that share a token with it and whose ``similarity.against`` it reaches ``t``. (What the kernel
    ``greedy_prefix`` does for the compiled exact Jaccard.) Returns, per position of ``group``, the position of
    its representative and the similarity to it."""
    key_off, key_tok = similarity.keys(group, t)
    g = len(group)
    owner = np.repeat(np.arange(g, dtype=np.int64), np.diff(key_off))
    by_tok = np.argsort(key_tok, kind="stable")
    tok_sorted, post_pos = key_tok[by_tok], owner[by_tok]
    tokens, post_start, post_count = np.unique(tok_sorted, return_index=True, return_counts=True)
    slot = np.searchsorted(tokens, key_tok)  # each key's posting list
    rep = np.arange(g, dtype=np.int64)
    sim = np.ones(g, dtype=np.float64)
    is_open = np.ones(g, dtype=bool)
    for i in range(g):
        if not is_open[i]:
            continue
        is_open[i] = False
        lists = slot[key_off[i]:key_off[i + 1]]
        if not len(lists):
            continue
        cand = np.unique(np.concatenate([post_pos[post_start[x]:post_start[x] + post_count[x]] for x in lists]))
        cand = cand[is_open[cand]]
        if not len(cand):
            continue
        s = np.asarray(similarity.against(int(group[i]), group[cand]), np.float64)
        hit = s >= t
        rep[cand[hit]], sim[cand[hit]] = i, s[hit]
        is_open[cand[hit]] = False
    return rep, sim


def _prefix_keys(sets: list[np.ndarray], t: float) -> tuple[np.ndarray, np.ndarray]:
    """Prefix-filter tokens of sorted, repeat-free value sets (the numpy twin of the kernel ``prefix_index``):
    values ranked by (sets holding it, value), rarest first; each set gives its ``prefix_length`` lowest ranks,
    an empty set the extra token ``U``. Two sets with Jaccard >= t > 0 share a token. Returns (offsets,
    tokens)."""
    size = np.array([len(x) for x in sets], np.int64)
    vals = np.concatenate(sets) if sets else np.zeros(0, np.uint32)
    owner = np.repeat(np.arange(len(sets), dtype=np.int64), size)
    uniq, inv, count = np.unique(vals, return_inverse=True, return_counts=True)
    rank = np.empty(len(uniq), np.int64)
    rank[np.lexsort((uniq, count))] = np.arange(len(uniq))
    r = rank[inv.reshape(-1)]
    order = np.lexsort((r, owner))
    r, owner = r[order], owner[order]
    alpha = np.maximum(np.ceil(t * size * (1.0 - 1e-9)).astype(np.int64), 1)
    p = np.where(size > 0, np.clip(size - alpha + 1, 0, None), 0)
    start = np.concatenate([[0], np.cumsum(size)[:-1]]) if len(size) else size
    keep = (np.arange(len(r)) - start[owner]) < p[owner]
    r, owner = r[keep], owner[keep]
    empty = np.flatnonzero(size == 0)
    if len(empty):  # (one token each, after its set's position: owner stays sorted)
        r = np.concatenate([r, np.full(len(empty), len(uniq), np.int64)])
        owner = np.concatenate([owner, empty])
        order = np.argsort(owner, kind="stable")
        r, owner = r[order], owner[order]
    counts = np.bincount(owner, minlength=len(sets))
    return np.concatenate([[0], np.cumsum(counts)]).astype(np.int64), r


def _segment_keys(sigs: np.ndarray, t: float) -> tuple[np.ndarray, np.ndarray]:
    """Index tokens of signatures for the estimate ``equal positions / P >= t > 0`` (pigeonhole): with ``E`` the
    fewest equal positions that reach ``t`` (float64, as the estimate is computed), a pair that reaches it
    differs in at most ``P - E`` positions, so of ``P - E + 1`` disjoint segments one is equal in both. A token
    is (segment, its values). Returns (offsets, tokens): every node has one token per segment."""
    n, width = sigs.shape
    need = next((e for e in range(width + 1) if e / width >= t), None)
    if need is None:  # (t > 1: no pair reaches it; no token is shared)
        return np.arange(n + 1, dtype=np.int64), np.arange(n, dtype=np.int64)
    segments = width - need + 1
    cut = (np.arange(segments + 1) * width) // segments
    tokens = np.empty((n, segments), np.int64)
    base = 0
    for s in range(segments):
        part = np.ascontiguousarray(sigs[:, cut[s]:cut[s + 1]])
        _, inv = np.unique(part.view(np.dtype((np.void, part.dtype.itemsize * part.shape[1]))).reshape(-1),
                           return_inverse=True)
        inv = inv.reshape(-1)
        tokens[:, s] = base + inv
        base += int(inv.max()) + 1 if n else 0
    return np.arange(0, n * segments + 1, segments, dtype=np.int64), tokens.reshape(-1)
