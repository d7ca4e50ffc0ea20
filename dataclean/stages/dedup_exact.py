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

import numpy as np
import pyarrow as pa

from dataclean.dedup.keys import content_hash, content_key_text, fixed_binary_key  # noqa: F401 (content_key_text: re-exported)
from dataclean.io.writers import tmp_name
from dataclean.stages.base import GlobalStage, RuleSpec, StageResult, with_columns
from dataclean.text.script_fold import DEFAULT_FOLD, fold_mode


class ExactDedup(GlobalStage):
    """Pass 1 adds ``content_hash``; :meth:`global_removals` decides over the whole corpus."""

    kind = "exact_dedup"
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

    def shuffle_rows(self, batch: pa.RecordBatch) -> tuple[pa.Table, np.ndarray]:
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
