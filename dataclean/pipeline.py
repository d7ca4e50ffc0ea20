"""A pipeline is a plain list of stages, applied in order to record batches.

:meth:`Pipeline.process` is the whole of pass 1 for one batch: each stage computes its signals over the
rows still alive, its decisions remove rows (first stage that removes a row owns its fate), and the removed
rows become ledger rows carrying the signals computed so far. Stages marked ``is_global`` contribute pass-1
columns here and decide later, over the whole corpus, in the global step.
"""
from __future__ import annotations

import inspect
import os
import sys
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.schema import BASE_SIGNAL_FIELDS, DOC_FIELDS, LEDGER_FIELDS, OUTPUT_DOC_NAMES
from dataclean.sections import OutputSection
from dataclean.sources import KIND_COLUMN, KINDS, SourceKinds, row_mask
from dataclean.stages import Stage, is_plugin, plugin_path, resolve_stage
from dataclean.stages.base import Decisions, Filter, GlobalStage, StageResult, with_columns
from dataclean.text.tokenize import WORDS_COLUMN
from dataclean.tokens import TokenCounter, count_chars

LEDGER_SCHEMA = pa.schema(LEDGER_FIELDS)


@dataclass
class BatchOutcome:
    kept: pa.RecordBatch  # documents that survive pass 1, with every signal column
    removed: pa.RecordBatch  # ledger rows (LEDGER_FIELDS + signal columns)


class Pipeline:
    def __init__(self, stages: Sequence[Stage], keep_rejected_text: bool = True,
                 token_counter: TokenCounter | None = None, source_kinds: SourceKinds | None = None):
        names = [s.name for s in stages]
        dupes = {n for n in names if names.count(n) > 1}
        if dupes:
            raise ValueError(f"stage names must be unique; repeated: {', '.join(sorted(dupes))}")
        self.stages = list(stages)
        self.keep_rejected_text = keep_rejected_text
        self.token_counter = token_counter or TokenCounter()  # the estimate unless a tokenizer is configured
        self.source_kinds = source_kinds or SourceKinds()  # the default sources: mapping unless configured

    @classmethod
    def from_config(cls, config: dict) -> "Pipeline":
        stages = [build_stage(spec) for spec in config["pipeline"]]
        if config.get("mixture"):
            from dataclean.stages.mixture import Mixture
            stages.append(Mixture(config["mixture"]))
        return cls(stages, keep_rejected_text=OutputSection.of(config).rejected_text,
                   token_counter=TokenCounter.from_config(config.get("tokens")),
                   source_kinds=SourceKinds.from_config(config))

    def task_config(self, config: dict) -> dict:
        """``config`` (the one this pipeline was built from) with each stage's :meth:`Stage.derived_params`
        written into its pipeline entry: the config the driver gives its tasks. It builds the same stages.
        A plug-in stage's entry also gets ``plugin_path``, the folder the driver imported it from
        (:func:`dataclean.stages.plugin_path`), which a worker adds to its ``sys.path`` before it imports the
        plug-in: a Ray worker does not get the folders the driver added to its ``sys.path``."""
        entries = []
        for spec, stage in zip(config["pipeline"], self.stages):
            entry = dict(spec, **stage.derived_params())
            folder = plugin_path(type(stage)) if PLUGIN_PATH_KEY not in spec else None
            if folder:
                entry[PLUGIN_PATH_KEY] = folder
            entries.append(entry)
        return dict(config, pipeline=entries)

    # -- schemas ------------------------------------------------------------------------------------------
    @property
    def signal_fields(self) -> list[pa.Field]:
        return [f for s in self.stages for f in s.signal_fields]

    @property
    def internal_columns(self) -> set[str]:
        return {c for s in self.stages for c in getattr(s, "internal_columns", ())}

    def survivor_schema(self) -> pa.Schema:
        """Pass-1 survivors: canonical columns, lengths, every stage's signals."""
        return pa.schema(DOC_FIELDS + BASE_SIGNAL_FIELDS + self.signal_fields)

    def ledger_schema(self) -> pa.Schema:
        extra = [f.with_nullable(True) for f in self.signal_fields if f.name not in self.internal_columns]
        return pa.schema(LEDGER_FIELDS + extra)

    def output_schema(self) -> pa.Schema:
        base = {f.name: f for f in DOC_FIELDS + BASE_SIGNAL_FIELDS}
        fields = [base[n] for n in OUTPUT_DOC_NAMES]
        fields += [f for f in self.signal_fields if f.name not in self.internal_columns]
        return pa.schema(fields)

    @property
    def global_stages(self) -> list[GlobalStage]:
        return [s for s in self.stages if isinstance(s, GlobalStage)]

    # -- processing ---------------------------------------------------------------------------------------
    def process(self, batch: pa.RecordBatch) -> BatchOutcome:
        removed: list[pa.RecordBatch] = []
        if KIND_COLUMN not in batch.schema.names:  # each row's source kind, for the stages' only_kinds/skip_kinds
            source = batch.column("source") if "source" in batch.schema.names else None
            batch = with_columns(batch, {KIND_COLUMN: self.source_kinds.kinds(source, batch.num_rows)})
        for stage in self.stages:
            if batch.num_rows == 0:
                break
            result = apply_stage(stage, batch)
            batch = result.batch
            if stage.rewrites_text and WORDS_COLUMN in batch.schema.names:
                batch = batch.drop_columns([WORDS_COLUMN])  # the cached words describe the old text
            if result.decisions is not None:
                mask = result.decisions.removed
                removed.append(self._ledger_rows(batch, stage.name, result.decisions, mask))
                batch = batch.filter(pc.invert(mask))
        batch = with_columns(batch, {"n_chars": count_chars(batch.column("text")),
                                     "n_tokens": self.count_tokens(batch)})
        kept = conform(batch, self.survivor_schema())
        ledger = self.ledger_schema()
        parts = [conform(r, ledger) for r in removed]
        removed_batch = pa.concat_batches(parts) if parts else pa.RecordBatch.from_pylist([], schema=ledger)
        return BatchOutcome(kept=kept, removed=removed_batch)

    def count_tokens(self, batch: pa.RecordBatch) -> pa.Array:
        """``n_tokens`` per document: exact with a configured tokenizer, else the calibrated estimate."""
        source = batch.column("source") if "source" in batch.schema.names else None
        return self.token_counter(batch.column("text"), source)

    def _ledger_rows(self, batch, stage_name, decisions, mask) -> pa.RecordBatch:
        rows = batch.filter(mask)
        text = rows.column("text")
        n = rows.num_rows
        cols = {
            "stage": pa.array([stage_name] * n, pa.string()),
            "rule": decisions.rule.filter(mask),
            "reason": decisions.reason.filter(mask),
            "value": decisions.value.filter(mask),
            "threshold": decisions.threshold.filter(mask),
            "detail": decisions.detail.filter(mask),
            "dup_of": pa.nulls(n, pa.string()),
            "n_chars": count_chars(text),
            "n_tokens": self.count_tokens(rows),
            "raw": pa.nulls(n, pa.binary()),
        }
        if not self.keep_rejected_text:
            cols["text"] = pa.nulls(n, pa.string())
        return with_columns(rows, cols)


def _applies(stage: Stage, batch: pa.RecordBatch) -> np.ndarray | None:
    """Rows the stage applies to (None: all), by its recipe entry: ``only_kinds`` / ``skip_kinds`` against each
    row's source kind (the pipeline's ``source_kind`` column; without it, the default ``sources:`` mapping of
    the ``source`` column), then ``only_sources`` / ``skip_sources`` against the source name (names or globs).
    A row must pass both."""
    mask = None
    for only, skip, column in ((stage.only_kinds, stage.skip_kinds, KIND_COLUMN),
                               (stage.only_sources, stage.skip_sources, "source")):
        if only is None and not skip:
            continue
        if column in batch.schema.names:
            values = batch.column(column)
        elif column == KIND_COLUMN:
            source = batch.column("source") if "source" in batch.schema.names else None
            values = SourceKinds().kinds(source, batch.num_rows)
        else:
            continue  # no source column: a source-name scope cannot exclude anything
        m = row_mask(values, only) if only is not None else ~row_mask(values, skip)
        mask = m if mask is None else mask & m
    return None if mask is None or mask.all() else mask


def apply_stage(stage: Stage, batch: pa.RecordBatch) -> StageResult:
    """Run ``stage`` on the rows it applies to; the other rows pass through with null signals."""
    if stage.is_global and not stage.signal_fields:
        return stage(batch)  # (a global stage without pass-1 columns reads its scope in the global step)
    mask = _applies(stage, batch)
    if mask is None:
        return stage(batch)
    idx_in, idx_out = np.flatnonzero(mask), np.flatnonzero(~mask)
    if len(idx_in) == 0:
        signals = {f.name: pa.nulls(batch.num_rows, f.type) for f in stage.signal_fields}
        return StageResult(with_columns(batch, signals), None)
    sub = stage(batch.take(pa.array(idx_in)))
    if WORDS_COLUMN in sub.batch.schema.names:  # cached words would be missing for the rows passed through
        sub = StageResult(sub.batch.drop_columns([WORDS_COLUMN]), sub.decisions)
    rest = conform(batch.take(pa.array(idx_out)), sub.batch.schema)
    inverse = np.empty(batch.num_rows, dtype=np.int64)
    inverse[np.concatenate([idx_in, idx_out])] = np.arange(batch.num_rows)
    inverse = pa.array(inverse)
    merged = pa.concat_batches([sub.batch, rest]).take(inverse)
    decisions = None
    if sub.decisions is not None:
        d = sub.decisions
        pad = lambda arr: pa.concat_arrays([arr, pa.nulls(len(idx_out), arr.type)]).take(inverse)  # noqa: E731
        decisions = Decisions(pad(d.rule), pad(d.reason), pad(d.value), pad(d.threshold), pad(d.detail))
    return StageResult(merged, decisions)


def conform(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Select and order ``schema``'s columns, filling absent ones with nulls."""
    n = batch.num_rows
    arrays = []
    for f in schema:
        idx = batch.schema.get_field_index(f.name)
        arrays.append(batch.column(idx).cast(f.type) if idx >= 0 else pa.nulls(n, f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


#: The key :meth:`Pipeline.task_config` writes into a plug-in's recipe entry: the folder to import it from.
PLUGIN_PATH_KEY = "plugin_path"


def build_stage(spec: dict) -> Stage:
    """Build a stage from a recipe entry ``{"stage": KIND, "name": optional, **params}``. ``KIND`` is a built-in
    kind, a plug-in's ``module:Class`` or an entry-point name (:func:`dataclean.stages.resolve_stage`)."""
    spec = dict(spec)
    kind = spec.pop("stage", None)
    only, skip = spec.pop("only_sources", None), spec.pop("skip_sources", None) or ()
    only_kinds, skip_kinds = spec.pop("only_kinds", None), spec.pop("skip_kinds", None) or ()
    folder = spec.pop(PLUGIN_PATH_KEY, None)
    if folder is not None:
        if not isinstance(folder, str):
            raise ValueError(f"stage {kind!r}: {PLUGIN_PATH_KEY} must be a folder, got {folder!r}")
        if folder not in {os.path.abspath(p) if p else os.getcwd() for p in sys.path}:
            sys.path.append(folder)  # (appended: never shadows what this process already imports)
    cls = resolve_stage(kind)
    accepted = set(inspect.signature(cls.__init__).parameters) - {"self"}
    unknown = set(spec) - accepted
    if unknown:
        raise ValueError(f"stage {kind!r}: unknown parameter(s) {', '.join(sorted(unknown))} "
                         f"(accepted: {', '.join(sorted(accepted))})")
    if is_plugin(cls):
        try:
            stage = cls(**spec)
        except (ValueError, TypeError):
            raise
        except Exception as exc:  # a plug-in's constructor is the user's code: one line, not a traceback
            raise ValueError(f"stage {kind!r}: {cls.__name__}({', '.join(sorted(spec))}) failed: "
                             f"{type(exc).__name__}: {exc}") from None
        if isinstance(stage, Filter):
            probe_filter(stage, kind)
    else:
        stage = cls(**spec)
    for key, value in (("only_sources", only), ("skip_sources", skip), ("only_kinds", only_kinds),
                       ("skip_kinds", skip_kinds)):
        what = "kinds" if key.endswith("kinds") else "source names"
        if value is not None and not (isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value)):
            raise ValueError(f"stage {kind!r}: {key} must be a list of {what}")
    for key, value in (("only_kinds", only_kinds or ()), ("skip_kinds", skip_kinds)):
        wrong = [v for v in value if v not in KINDS]
        if wrong:
            hint = " (source names go in only_sources / skip_sources)" if key == "only_kinds" else ""
            raise ValueError(f"stage {kind!r}: {key}: {', '.join(map(repr, wrong))} is not a kind; the kinds are "
                             f"{', '.join(KINDS)}{hint}")
    stage.only_sources = list(only) if only is not None else None
    stage.skip_sources = list(skip)
    stage.only_kinds = list(only_kinds) if only_kinds is not None else None
    stage.skip_kinds = list(skip_kinds)
    return stage


#: What :func:`probe_filter` runs a filter plug-in on: an empty document, English, Chinese.
PROBE_TEXTS = ["", "The cat sat on the mat. It was warm there.", "今天天气很好，我们去公园散步。"]


def probe_filter(stage: Filter, kind) -> None:
    """Run a filter plug-in once on three tiny documents, so that a broken ``compute`` (an exception, the wrong
    number of values, strings instead of numbers) is a one-line config error before any worker starts, not a
    failed task per input file."""
    batch = pa.record_batch({"text": pa.array(PROBE_TEXTS, pa.string())})
    try:
        stage.apply(batch)
    except ValueError as exc:
        if str(exc).startswith(f"stage {stage.name}: "):  # (Filter's own message about compute's answer)
            raise
        raise ValueError(f"stage {kind!r}: {type(stage).__name__}.compute failed on a test batch: {exc}") from None
    except Exception as exc:
        raise ValueError(f"stage {kind!r}: {type(stage).__name__}.compute failed on a test batch: "
                         f"{type(exc).__name__}: {exc}") from None
