"""Filtering on the quality score, decided over the whole corpus in the global step.

Two modes, per source or for all, and a threshold per language (``by_lang: {en: {threshold: 0.4}}``, over the
sources in the stage's scope; a document removed by its source's rule is not counted again):

* ``threshold``: remove documents whose ``quality_score`` is below it;
* ``top_fraction``: keep the best ``top_fraction`` of each source's documents. The documents of a source are
  ranked by score (highest first; equal scores by id, so the cut is exact and deterministic) and the first
  ``ceil(top_fraction * n)`` are kept. The rank's cut-off is found without sorting the corpus: each pass-1
  task's map task (:mod:`dataclean.exec.aggregate`) counts its scored documents per score bucket, the driver
  adds the counts up and finds the bucket holding the rank, a second map round returns that bucket's
  (score, id) pairs, and their sort gives the exact (score, id) of the last kept document. Removal is then a
  streaming filter. The cut-off depends neither on shard order nor on the number of workers.

A document without a score (a source the scorer skips, e.g. code) is never removed here. Removed documents
carry their score as ``value`` and the cut-off as ``threshold``; the cut-off of every source is written to
``stats/quality_cutoffs.parquet``.
"""
from __future__ import annotations

import os

import pyarrow as pa

from dataclean.io.writers import atomic_write_table
from dataclean.stages.base import GlobalStage, RuleSpec, StageResult


class QualityFilter(GlobalStage):
    kind = "quality_filter"
    signal_fields: list = []
    global_columns = ("source",)
    rule_specs = [
        RuleSpec("quality_below_threshold", "quality_score", ("threshold",), "min", "absolute cut-off"),
        RuleSpec("quality_below_top_fraction", "quality_score", ("top_fraction",), "min",
                 "outside the best top_fraction of its source"),
    ]

    def __init__(self, threshold: float | None = None, top_fraction: float | None = None,
                 by_source: dict | None = None, by_lang: dict | None = None, score_column: str = "quality_score",
                 name: str | None = None):
        super().__init__(name)
        self.threshold, self.top_fraction = threshold, top_fraction
        self.score_column = score_column
        self.by_source = dict(by_source or {})
        self._check(threshold, top_fraction, "")
        for source, rule in self.by_source.items():
            if not isinstance(rule, dict) or set(rule) - {"threshold", "top_fraction"}:
                raise ValueError(f"quality_filter.by_source.{source}: expected {{threshold: x}} or {{top_fraction: x}}")
            self._check(rule.get("threshold"), rule.get("top_fraction"), f".by_source.{source}")
        self.by_lang = dict(by_lang or {})
        for lang, rule in self.by_lang.items():
            if not isinstance(rule, dict) or set(rule) != {"threshold"}:
                raise ValueError(f"quality_filter.by_lang.{lang}: expected {{threshold: x}} (a language's threshold)")
            self._check(rule["threshold"], None, f".by_lang.{lang}")
        self.global_columns = ("source", "lang", score_column)

    @staticmethod
    def _check(threshold, fraction, where: str) -> None:
        if threshold is not None and fraction is not None:
            raise ValueError(f"quality_filter{where}: give threshold or top_fraction, not both")
        if threshold is not None and not 0.0 <= float(threshold) <= 1.0:
            raise ValueError(f"quality_filter{where}.threshold must be in [0, 1]")
        if fraction is not None and not 0.0 < float(fraction) <= 1.0:
            raise ValueError(f"quality_filter{where}.top_fraction must be in (0, 1]")

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        return StageResult(batch)  # nothing to compute in pass 1: the scorer stage made the score

    def _rules(self, sources: list[str]) -> dict[str, tuple[str, float]]:
        out = {}
        for source in sources:
            rule = self.by_source.get(source, {"threshold": self.threshold, "top_fraction": self.top_fraction})
            if rule.get("top_fraction") is not None:
                out[source] = ("top_fraction", float(rule["top_fraction"]))
            elif rule.get("threshold") is not None:
                out[source] = ("threshold", float(rule["threshold"]))
        return out

    uses_aggregates = True  # the global step writes the removals so far for its map tasks

    def global_decide(self, ctx, view: str) -> None:

        con, col = ctx.con, self.score_column
        if col not in ctx.columns:
            raise ValueError(f"quality_filter: the pipeline has no {col!r} column (add a quality_score stage before it)")
        sources = [r[0] for r in con.sql(f"SELECT DISTINCT source FROM {view} ORDER BY 1").fetchall()]
        if self.only_kinds is not None or self.skip_kinds:  # the kinds of the config's sources: mapping
            from dataclean.sources import SourceKinds

            kinds = SourceKinds.from_config(ctx.cfg)
            sources = [s for s in sources if (self.only_kinds is None or kinds.kind(s) in self.only_kinds)
                       and kinds.kind(s) not in self.skip_kinds]
        rules = self._rules(sources)
        scored: dict[str, int] = {}
        keeps: dict[str, int] = {}
        cuts: dict[str, tuple[float, str]] = {}
        if any(mode == "top_fraction" for mode, _ in rules.values()):
            hist = ctx.run_map("score_histogram", "source", col)
            for g, n in zip(hist.column("group").to_pylist(), hist.column("docs").to_pylist()):
                scored[g] = scored.get(g, 0) + n
            for source, (mode, x) in rules.items():
                n = scored.get(source, 0)
                if mode == "top_fraction":  # ceil(x * n), robust to float noise
                    keeps[source] = min(n, -(-int(round(x * n * 1e9)) // 10**9)) if n else 0
            cuts = ctx.rank_cutoffs(hist, keeps, col, "source")
        rows = []
        for source, (mode, x) in rules.items():
            src = source.replace("'", "''")
            if mode == "threshold":
                n = con.sql(f"SELECT count(*) FROM {view} WHERE source = '{src}' AND {col} IS NOT NULL").fetchall()[0][0]
                cutoff = x
                con.execute(f"""
                    INSERT INTO removals
                    SELECT doc_key, '{self.name}', 'quality_below_threshold', 'low_quality', {col}, {x},
                           'score below the threshold of source {src}', NULL
                    FROM {view} WHERE source = '{src}' AND {col} < {x}""")
            else:
                n, keep, cut = scored.get(source, 0), keeps.get(source, 0), cuts.get(source)
                cutoff = cut[0] if cut is not None else None
                after = "TRUE" if cut is None else f"({col} < $score OR ({col} = $score AND id > $id))"
                con.execute(f"""
                    INSERT INTO removals
                    SELECT doc_key, '{self.name}', 'quality_below_top_fraction', 'low_quality', {col},
                           {'$score' if cut is not None else 'NULL'},
                           'outside the best {x:g} of source {src} ({keep} of {n} kept)', NULL
                    FROM {view} WHERE source = '{src}' AND {col} IS NOT NULL AND {after}""",
                            {"score": cut[0], "id": cut[1]} if cut is not None else None)
            rows.append({"source": source, "lang": None, "mode": mode, "parameter": x, "cutoff": cutoff,
                         "scored_documents": n})
        for lang, rule in sorted(self.by_lang.items()):  # a language's threshold, over the sources in scope
            x, lng = float(rule["threshold"]), lang.replace("'", "''")
            in_scope = ", ".join("'" + s.replace("'", "''") + "'" for s in sources) or "NULL"
            where = f"source IN ({in_scope}) AND lang = '{lng}' AND {col} IS NOT NULL"
            n = con.sql(f"SELECT count(*) FROM {view} WHERE {where}").fetchall()[0][0]
            con.execute(f"""
                INSERT INTO removals
                SELECT doc_key, '{self.name}', 'quality_below_threshold', 'low_quality', {col}, {x},
                       'score below the threshold of language {lng}', NULL
                FROM {view} WHERE {where} AND {col} < {x}
                  AND doc_key NOT IN (SELECT doc_key FROM removals)""")
            rows.append({"source": None, "lang": lang, "mode": "threshold", "parameter": x, "cutoff": x,
                         "scored_documents": n})
        table = pa.Table.from_pylist(rows, schema=pa.schema([("source", pa.string()), ("lang", pa.string()),
                                                             ("mode", pa.string()),
                                                             ("parameter", pa.float64()), ("cutoff", pa.float64()),
                                                             ("scored_documents", pa.int64())]))
        atomic_write_table(table, os.path.join(ctx.lay.stats, "quality_cutoffs.parquet"))
