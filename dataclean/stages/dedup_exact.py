"""Exact deduplication on a normalized content hash.

Pass 1 hashes each document's text after lower-casing, collapsing every run of whitespace to one space and
trimming (so ``"Hello  World\\n"`` and ``"hello world"`` are one document), then, with ``fold_scripts`` (on by
default), folding traditional Chinese to simplified (:func:`dataclean.text.script_fold.fold_scripts`: OpenCC's
``tw2sp`` phrases for documents written in traditional characters, then a character table), so the 简体 and
繁體 copies of one text are one document. Only the key is folded: the texts, ids and ``dup_of`` of the output,
the ledger and ``dedup/exact_groups.parquet`` are the documents' own. The hash is 128-bit xxh3: at 10 billion
documents the chance of any collision is about 1e-19, where 64 bits would give a few.

The global step groups the hashes of the whole corpus (DuckDB, out-of-core) and keeps, in each group, the
document with the smallest id, so the choice depends neither on shard order nor on worker count. Every
other member is removed with ``dup_of`` = the kept id.
"""
from __future__ import annotations

import os

import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from dataclean.dedup import minhash
from dataclean.io.writers import tmp_name
from dataclean.stages.base import RuleSpec, Stage, StageResult, with_columns
from dataclean.text.script_fold import DEFAULT_FOLD, fold_mode, fold_scripts


def content_key_text(text: pa.Array, fold: str = "off") -> pa.Array:
    """The text exact dedup compares: lower case, runs of whitespace (RE2 ``\\s``: space, tab, newlines,
    form feed) collapsed to one space, Unicode whitespace trimmed from both ends; then folded by
    :func:`dataclean.text.script_fold.fold_scripts` with ``fold`` (``"phrases"``, ``"characters"`` or
    ``"off"``). With numba, one compiled pass over the bytes gives the same text
    (``dataclean.dedup._minhash_numba.map_text``, which folds on the way)."""
    if isinstance(text, pa.ChunkedArray):
        text = text.combine_chunks() if text.num_chunks else pa.array([], pa.string())
    if minhash.kernels_enabled():
        key = minhash.map_text_kernel(text, minhash.content_key_mode(), fold=fold)
        if key is not None:
            return key
    key = pc.utf8_lower(text)
    key = pc.replace_substring_regex(key, r"\s+", " ")
    return fold_scripts(pc.utf8_trim_whitespace(key), fold)


def content_hash(text: pa.Array, fold: str = "off") -> pa.Array:
    """128-bit xxh3 of :func:`content_key_text` (folded as ``fold`` says), as ``fixed_size_binary(16)``."""
    raw = content_key_text(text, fold).cast(pa.binary()).to_pylist()
    digest = xxhash.xxh3_128_digest
    return pa.array([digest(b) for b in raw], pa.binary(16))


class ExactDedup(Stage):
    """Pass 1 adds ``content_hash``; :meth:`global_removals` decides over the whole corpus."""

    kind = "exact_dedup"
    is_global = True
    signal_fields = [pa.field("content_hash", pa.binary(16))]
    internal_columns = ("content_hash",)
    rule_specs = [RuleSpec("exact_duplicate", "content_hash", (), "flag",
                           "same text as a document with a smaller id (lower-cased, whitespace collapsed, "
                           "traditional Chinese folded to simplified)")]

    def __init__(self, fold_scripts: bool | str = DEFAULT_FOLD, name: str | None = None):
        super().__init__(name)
        self.fold_scripts = fold_mode(fold_scripts, "exact_dedup.fold_scripts")

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        return StageResult(with_columns(batch, {"content_hash": content_hash(batch.column("text"),
                                                                             self.fold_scripts)}))

    # the global step's shuffle (dataclean/exec/shuffle.py): pass 1 writes these key rows, partitioned by the
    # hash; the reduce tasks keep the hashes seen twice or more, partition by partition
    shuffle_schema = pa.schema([("content_hash", pa.binary(16)), ("id", pa.string()), ("doc_key", pa.int64())])
    shuffle_reduce = ("SELECT r.* FROM rows r SEMI JOIN (SELECT content_hash FROM rows GROUP BY content_hash "
                      "HAVING count(*) > 1) g USING (content_hash)")

    def shuffle_rows(self, batch: pa.RecordBatch) -> tuple[pa.Table, "np.ndarray"]:
        from dataclean.exec.shuffle import fixed_binary_key

        rows = pa.table({name: batch.column(name) for name in self.shuffle_schema.names})
        return rows, fixed_binary_key(batch.column("content_hash"))

    def global_removals(self, con, docs: str) -> str:
        """SQL over a view ``docs`` of (content_hash, id, doc_key) of the documents still alive (the global
        step gives this stage's candidate rows: every member of a hash seen twice) listing its removals."""
        return f"""
            WITH grp AS (
                SELECT content_hash, min(id) AS keep_id, count(*) AS n
                FROM {docs} GROUP BY content_hash HAVING count(*) > 1
            )
            SELECT d.doc_key, '{self.name}' AS stage, 'exact_duplicate' AS rule, 'exact_duplicate' AS reason,
                   CAST(grp.n AS DOUBLE) AS value, CAST(NULL AS DOUBLE) AS threshold,
                   'group of ' || grp.n || ' identical texts (normalized)' AS detail, grp.keep_id AS dup_of
            FROM {docs} d JOIN grp USING (content_hash)
            WHERE d.id <> grp.keep_id
        """

    def write_artifacts(self, con, docs: str, folder: str) -> None:
        """``dedup/exact_groups.parquet``: every group of identical texts, its kept id and its members (``docs``
        as in :meth:`global_removals`)."""
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, "exact_groups.parquet")
        tmp = tmp_name(path)
        con.execute(f"""
            COPY (SELECT lower(hex(content_hash)) AS content_hash, min(id) AS keep_id, count(*) AS n,
                         list(id ORDER BY id) AS ids
                  FROM {docs} GROUP BY content_hash HAVING count(*) > 1 ORDER BY keep_id)
            TO '{tmp.replace("'", "''")}' (FORMAT parquet, COMPRESSION zstd)""")
        os.replace(tmp, path)
