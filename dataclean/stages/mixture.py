"""Mixture sampling to a token budget: the last global stage of a run that has a recipe.

Pass 1 labels every survivor with its recipe source (``mix_source``, from the ``source`` column or the input
path); the global step reads the token totals per recipe source, derives how many epochs and which documents
each source contributes (see :mod:`dataclean.mixture` for the rule) and writes

* removals for the documents not selected (``mixture_downsampled``) and, with ``unlisted: drop``, for the
  documents of sources the recipe does not name (``mixture_unlisted_source``);
* ``_work/global/repeats.parquet``: ``doc_key -> copies`` for documents used more than once, which pass 2
  writes as extra rows with ids ``<id>#epoch<k>``;
* ``stats/mixture.parquet``: per source the available, target and achieved tokens, the epochs used and a
  warning when the target cannot be met within ``max_epochs``.

Every ordering is by an md5 of ``(seed, epoch, id)`` (ties by id), computed in DuckDB, so the selection does
not depend on shard order or worker count, and changes with the seed.
"""
from __future__ import annotations

import math
import os

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.io.writers import atomic_write_table, tmp_name, write_errors
from dataclean.mixture import Recipe, parse_recipe
from dataclean.stages.base import GlobalStage, RuleSpec, StageResult, with_columns

MIXTURE_STATS_SCHEMA = pa.schema([
    ("source", pa.string()), ("target_weight", pa.float64()), ("target_tokens", pa.int64()),
    ("available_tokens", pa.int64()), ("available_docs", pa.int64()), ("max_epochs", pa.int64()),
    ("epochs_used", pa.float64()), ("selected_docs", pa.int64()), ("output_docs", pa.int64()),
    ("achieved_tokens", pa.int64()), ("achieved_weight", pa.float64()), ("select", pa.string()),
    ("warning", pa.string()),
])
#: A source whose achieved tokens stay below this share of its target (documents too large to fill the last
#: part of the target) gets a warning.
SHORT_WARNING = 0.99


def _sql_str(s: str) -> str:
    return s.replace("'", "''")


class Mixture(GlobalStage):
    kind = "mixture"
    signal_fields = [pa.field("mix_source", pa.string()), pa.field("mix_epoch", pa.int64())]
    global_columns = ("id", "n_tokens", "mix_source", "quality_score")
    rule_specs = [
        RuleSpec("mixture_downsampled", "tokens selected before this document", ("budget_tokens",), "max",
                 "not selected: its source reached its share of the token budget"),
        RuleSpec("mixture_unlisted_source", "mix_source", ("unlisted",), "flag",
                 "its source is not in the recipe (unlisted: drop)"),
    ]

    def __init__(self, recipe: dict | Recipe, name: str | None = None):
        super().__init__(name)
        self.recipe = recipe if isinstance(recipe, Recipe) else parse_recipe(recipe, (recipe or {}).get("recipe_path"))
        self.summary: dict = {}

    def params(self) -> dict:
        return {"recipe": self.recipe.name}

    # -- pass 1 -------------------------------------------------------------------------------------------
    def apply(self, batch: pa.RecordBatch) -> StageResult:
        n = batch.num_rows
        names = batch.schema.names
        source = batch.column("source") if "source" in names else pa.nulls(n, pa.string())
        origin = batch.column("origin_file") if "origin_file" in names else pa.nulls(n, pa.string())
        files = [f for f in pc.unique(origin).to_pylist() if f is not None]
        label = pa.nulls(n, pa.string())
        for src in reversed(self.recipe.sources):  # the first matching source wins
            hit = pc.is_in(source, value_set=pa.array(list(src.match), pa.string())) if src.match else \
                pa.array(np.zeros(n, bool))
            path_hits = [f for f in files if src.matches(None, f)]
            if path_hits:
                hit = pc.or_(pc.fill_null(hit, False), pc.is_in(origin, value_set=pa.array(path_hits, pa.string())))
            label = pc.if_else(pc.fill_null(hit, False), pa.scalar(src.name, pa.string()), label)
        return StageResult(with_columns(batch, {"mix_source": label,
                                                "mix_epoch": pa.array(np.zeros(n, np.int64))}))

    # -- global step --------------------------------------------------------------------------------------
    uses_aggregates = True  # the global step writes the removals so far for its map tasks

    def global_decide(self, ctx, view: str) -> None:
        con, r = ctx.con, self.recipe
        quality = "quality_score" if "quality_score" in ctx.columns else "NULL::DOUBLE"
        con.execute(f"""CREATE OR REPLACE TEMP TABLE mix_docs AS
                        SELECT doc_key, id, mix_source, coalesce(n_tokens, 0)::BIGINT AS tok, {quality} AS q
                        FROM {view}""")
        if r.unlisted == "drop":
            con.execute(f"""INSERT INTO removals
                SELECT doc_key, '{self.name}', 'mixture_unlisted_source', 'mixture_unlisted_source', NULL, NULL,
                       'source not in mixture recipe {_sql_str(r.name)}', NULL
                FROM mix_docs WHERE mix_source IS NULL""")
        # documents and tokens per source: summed over the pass-1 tasks' map tasks (dataclean/exec/aggregate.py)
        t = ctx.run_map("totals", "mix_source")
        totals: dict[str, tuple[int, int]] = {}
        for g, n, tok in zip(t.column("group").to_pylist(), t.column("docs").to_pylist(), t.column("tokens").to_pylist()):
            if g is not None:
                docs0, tok0 = totals.get(g, (0, 0))
                totals[g] = (docs0 + int(n), tok0 + int(tok or 0))
        # doc_key -> copies for documents used more than once (a full epoch lists all, the partial one its picks)
        con.execute("CREATE OR REPLACE TEMP TABLE mix_rep (doc_key BIGINT, copies BIGINT)")
        rows = []
        for src in r.sources:
            n_docs, avail = totals.get(src.name, (0, 0))
            target = r.target_tokens(src)
            name = _sql_str(src.name)
            warning = None
            if avail == 0:
                full, rem = 0, 0
                if target > 0:
                    warning = f"no tokens available for source {src.name} (target {target:,})"
            else:
                need = target / avail
                if need > src.max_epochs:
                    full, rem = src.max_epochs, 0
                else:
                    full = int(math.floor(need))
                    rem = target - full * avail
            selected_partial = 0
            partial_tokens = 0
            if rem > 0 and n_docs:
                order = ("q DESC NULLS LAST, " if src.select == "quality" else "") + \
                    f"md5_number('{r.seed}:{full}:' || id), id"
                con.execute(f"""CREATE OR REPLACE TEMP TABLE mix_rank AS
                    SELECT doc_key, tok, rk, before, (before + tok <= {rem}) AS pick FROM (
                        SELECT doc_key, tok, row_number() OVER (ORDER BY {order}) AS rk,
                               (sum(tok) OVER (ORDER BY {order} ROWS UNBOUNDED PRECEDING)) - tok AS before
                        FROM mix_docs WHERE mix_source = '{name}')""")
                self._fill_gap(con, rem)
                selected_partial, partial_tokens = (int(v or 0) for v in con.sql(
                    "SELECT count(*) FILTER (WHERE pick), sum(tok) FILTER (WHERE pick) FROM mix_rank").fetchall()[0])
                if full == 0:
                    con.execute(f"""INSERT INTO removals
                        SELECT doc_key, '{self.name}', 'mixture_downsampled', 'mixture_downsampled',
                               before::DOUBLE, {float(rem)},
                               'source {name}: {rem:,} of {avail:,} available tokens taken ({src.select} order, seed {r.seed})',
                               NULL
                        FROM mix_rank WHERE NOT pick""")
                if full >= 1:
                    con.execute(f"INSERT INTO mix_rep SELECT doc_key, {full + 1} FROM mix_rank WHERE pick")
                con.execute("DROP TABLE mix_rank")
            elif full == 0 and n_docs:
                why = "target of 0 tokens" if target == 0 else f"its documents hold 0 tokens (target {target:,})"
                con.execute(f"""INSERT INTO removals
                    SELECT doc_key, '{self.name}', 'mixture_downsampled', 'mixture_downsampled', 0.0, {float(target)},
                           'source {name}: {why}', NULL
                    FROM mix_docs WHERE mix_source = '{name}'""")
            if full >= 2:
                con.execute(f"INSERT INTO mix_rep SELECT doc_key, {full} FROM mix_docs WHERE mix_source = '{name}'")
            achieved = full * avail + partial_tokens
            out_docs = full * n_docs + selected_partial
            if warning is None and target > 0 and avail and target / avail > src.max_epochs:
                warning = (f"target {target:,} tokens needs {target / avail:.2f} epochs of {avail:,} available "
                           f"but max_epochs is {src.max_epochs}: {achieved:,} tokens "
                           f"({100 * (target - achieved) / target:.1f}% short)")
            elif warning is None and target > 0 and achieved < SHORT_WARNING * target:
                warning = (f"{achieved:,} of {target:,} target tokens ({100 * (target - achieved) / target:.1f}% "
                           f"short): no document left out of the selection is small enough to fit the rest")
            rows.append({"source": src.name, "target_weight": src.weight, "target_tokens": target,
                         "available_tokens": avail, "available_docs": n_docs, "max_epochs": src.max_epochs,
                         "epochs_used": achieved / avail if avail else 0.0,
                         "selected_docs": n_docs if full >= 1 else selected_partial, "output_docs": out_docs,
                         "achieved_tokens": achieved, "achieved_weight": 0.0, "select": src.select,
                         "warning": warning})
        total = sum(row["achieved_tokens"] for row in rows)
        for row in rows:
            row["achieved_weight"] = row["achieved_tokens"] / total if total else 0.0
        self._write_repeats(ctx, con)
        con.execute("DROP TABLE mix_docs")
        con.execute("DROP TABLE mix_rep")
        atomic_write_table(pa.Table.from_pylist(rows, schema=MIXTURE_STATS_SCHEMA),
                           os.path.join(ctx.lay.stats, "mixture.parquet"))

    @staticmethod
    def _fill_gap(con, rem: int) -> None:
        """After the prefix that fits, walk the rest of the order once and take every document that still
        fits in what is left of the target (first fit): the achieved count ends below the target by less
        than the smallest document not taken."""
        gap = rem - int(con.sql("SELECT coalesce(sum(tok), 0) FROM mix_rank WHERE pick").fetchall()[0][0])
        if gap <= 0:
            return
        reader = con.sql(f"SELECT rk, tok FROM mix_rank WHERE NOT pick AND tok <= {gap} ORDER BY rk") \
            .to_arrow_reader(65536)
        take = []
        for batch in reader:  # streamed: the walk usually stops long before the end
            for rk, tok in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
                if tok <= gap:
                    take.append(rk)
                    gap -= tok
                    if gap == 0:
                        break
            if gap == 0:
                break
        reader.close()  # the connection runs the next statement only once this result is done with
        if take:
            con.execute("CREATE OR REPLACE TEMP TABLE mix_fill AS SELECT unnest($1::BIGINT[]) AS rk", [take])
            con.execute("UPDATE mix_rank SET pick = true WHERE rk IN (SELECT rk FROM mix_fill)")
            con.execute("DROP TABLE mix_fill")

    def _write_repeats(self, ctx, con) -> None:
        """``_work/global/repeats.parquet``: doc_key -> copies (>= 2), sorted by doc_key, written by DuckDB
        (out of core), with the id suffix of the copies in its metadata. The suffix is ``#epoch`` unless a
        surviving document already has an id a copy would get; then ``#mix-epoch``, ``#mix-epoch-`` ... (the
        first that collides with nothing), so ids in data/ stay unique."""
        con.execute("""CREATE OR REPLACE TEMP TABLE mix_rep_final AS
                       SELECT doc_key, max(copies) AS copies FROM mix_rep GROUP BY doc_key HAVING max(copies) >= 2""")
        suffix = "#epoch"
        for attempt in range(100):
            suffix = "#epoch" if attempt == 0 else "#mix-epoch" + "-" * (attempt - 1)
            clash = con.sql(f"""
                SELECT count(*) FROM (
                    SELECT d.id || '{suffix}' || k::VARCHAR AS copy_id
                    FROM mix_rep_final r JOIN mix_docs d USING (doc_key), range(1, r.copies) t(k))
                WHERE copy_id IN (SELECT id FROM mix_docs)""").fetchall()[0][0]
            if clash == 0:
                break
        path = ctx.lay.repeats
        tmp = tmp_name(path)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with write_errors(path):
            con.execute(f"COPY (SELECT doc_key, copies FROM mix_rep_final ORDER BY doc_key) TO '{_sql_str(tmp)}' "
                        f"(FORMAT parquet, COMPRESSION zstd, KV_METADATA {{copy_id_suffix: '{suffix}'}})")
            os.replace(tmp, path)
        con.execute("DROP TABLE mix_rep_final")


def repeats_suffix(schema: pa.Schema) -> str:
    """The id suffix of repeated copies, from the repeats file's metadata (``#epoch`` by default)."""
    meta = schema.metadata or {}
    return meta.get(b"copy_id_suffix", b"#epoch").decode()


def expand_repeats(batch: pa.RecordBatch, repeats: pa.Table, suffix: str = "#epoch") -> list[pa.RecordBatch]:
    """``batch`` followed by the extra copies of its documents listed in ``repeats`` (sorted by doc_key), one
    batch per epoch k = 1 .. copies - 1: ids ``<id><suffix><k>`` and ``mix_epoch = k``. One epoch at a time,
    so memory stays at one batch whatever the number of epochs."""
    if repeats.num_rows == 0 or batch.num_rows == 0:
        return [batch]
    rep_keys = repeats.column("doc_key").to_numpy()
    rep_copies = repeats.column("copies").to_numpy()
    keys = batch.column("doc_key").to_numpy()
    at = np.searchsorted(rep_keys, keys)
    at_c = np.minimum(at, len(rep_keys) - 1)
    found = (at < len(rep_keys)) & (rep_keys[at_c] == keys)
    copies = np.where(found, rep_copies[at_c], 1)
    out = [batch]
    for k in range(1, int(copies.max())):
        part = batch.filter(pa.array(copies > k))
        ids = pc.binary_join_element_wise(part.column("id"), pa.scalar(f"{suffix}{k}"), "")
        out.append(with_columns(part, {"id": ids, "mix_epoch": pa.array(np.full(part.num_rows, k, np.int64))}))
    return out
