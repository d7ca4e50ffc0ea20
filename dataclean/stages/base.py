"""The stage interface: signals first, then decisions.

A stage is called on one :class:`pyarrow.RecordBatch` that has at least a ``text`` column. It returns a
:class:`StageResult`: the same rows (text possibly rewritten) with the stage's signal columns appended, and
per-row :class:`Decisions` saying which rule, if any, removes each row and with what deciding value. A stage
never filters rows itself; the pipeline applies the decisions, so every signal of a stage is computed for
every row it sees and a reviewer can re-threshold with SQL later.
"""
from __future__ import annotations

import inspect
from dataclasses import dataclass
from typing import Any, ClassVar, Sequence

import pyarrow as pa
import pyarrow.compute as pc


@dataclass
class Check:
    """One rule of a stage, as arrays over the batch's rows: ``failed`` rows are removed by this rule."""

    rule: str
    reason: str
    failed: pa.Array  # bool, nulls count as not failed
    value: pa.Array | float | None = None  # the deciding signal value per row
    threshold: pa.Array | float | None = None  # scalar, or per row when thresholds depend on language
    detail: pa.Array | str | None = None


@dataclass
class Decisions:
    """Per row: ``rule`` is null where the row is kept; otherwise the first failing check decides."""

    rule: pa.Array
    reason: pa.Array
    value: pa.Array
    threshold: pa.Array
    detail: pa.Array

    @property
    def removed(self) -> pa.Array:
        return pc.is_valid(self.rule)

    @classmethod
    def from_checks(cls, n: int, checks: Sequence[Check]) -> "Decisions | None":
        """Combine checks in order: a row removed by several rules is attributed to the first of them."""
        rule = pa.nulls(n, pa.string())
        reason = pa.nulls(n, pa.string())
        value = pa.nulls(n, pa.float64())
        threshold = pa.nulls(n, pa.float64())
        detail = pa.nulls(n, pa.string())
        any_failed = False
        for check in reversed(checks):
            failed = pc.fill_null(check.failed, False)
            if not pc.any(failed).as_py():
                continue
            any_failed = True
            rule = pc.if_else(failed, pa.scalar(check.rule, pa.string()), rule)
            reason = pc.if_else(failed, pa.scalar(check.reason, pa.string()), reason)
            value = pc.if_else(failed, _as_array(check.value, n, pa.float64()), value)
            threshold = pc.if_else(failed, _as_array(check.threshold, n, pa.float64()), threshold)
            detail = pc.if_else(failed, _as_array(check.detail, n, pa.string()), detail)
        if not any_failed:
            return None
        return cls(rule, reason, value, threshold, detail)


def _as_array(v: Any, n: int, typ: pa.DataType) -> pa.Array:
    if v is None:
        return pa.nulls(n, typ)
    if isinstance(v, (pa.Array, pa.ChunkedArray)):
        return pc.cast(v, typ)
    return pa.array([v] * n, typ)


@dataclass(frozen=True)
class RuleSpec:
    """What ``dataclean rules`` shows for one rule: its code, the signal it reads, the parameter(s) holding its
    threshold(s), and how it compares (``max``: removed above; ``min``: removed below; ``range``; ``flag``)."""

    rule: str
    signal: str
    params: tuple[str, ...]
    compare: str = "max"
    doc: str = ""


@dataclass
class StageResult:
    batch: pa.RecordBatch
    decisions: Decisions | None = None  # None: every row kept


class Stage:
    """Base class of pass-1 stages.

    Subclasses set ``kind`` (the registry name used in YAML), declare ``signal_fields`` and implement
    :meth:`apply`. Constructor keyword arguments are the stage's parameters; their defaults are the
    documented values, and :meth:`params` returns them for the config hash and the manifest.
    """

    kind: ClassVar[str] = ""
    #: Columns this stage appends to the batch.
    signal_fields: ClassVar[list[pa.Field]] = []
    #: Whether the stage rewrites ``text`` (the pipeline then re-measures lengths).
    rewrites_text: ClassVar[bool] = False
    #: Signal columns that count in-place rewrites (masks, removed lines, repairs) per document: the stats
    #: sum them over the kept documents per source (``stats/rewrites.parquet``, ``summary["rewrites"]``).
    rewrite_columns: ClassVar[tuple[str, ...]] = ()
    #: The rules of this stage, for ``dataclean rules`` and the report.
    rule_specs: ClassVar[list[RuleSpec]] = []
    #: Which rows the stage applies to, by source kind (web, curated, code: :mod:`dataclean.sources`) and by
    #: source name or glob, set from the recipe entry; other rows pass through with null signals.
    only_kinds: list[str] | None = None
    skip_kinds: list[str] | tuple = ()
    only_sources: list[str] | None = None
    skip_sources: list[str] | tuple = ()

    def __init__(self, name: str | None = None):
        self.name = name or self.kind

    def scope(self) -> str:
        """Which rows the stage applies to, in words: ``kind web``, ``all but kind code``, ``only forum_*``,
        ``all`` (for ``dataclean rules`` and the report)."""
        parts = []
        if self.only_kinds is not None:
            parts.append("kind " + ", ".join(self.only_kinds))
        elif self.skip_kinds:
            parts.append("all but kind " + ", ".join(self.skip_kinds))
        if self.only_sources is not None:
            parts.append("only " + ", ".join(self.only_sources))
        elif self.skip_sources:
            parts.append("all but " + ", ".join(self.skip_sources))
        return "; ".join(parts) or "all"

    def __call__(self, batch: pa.RecordBatch) -> StageResult:
        if "text" not in batch.schema.names:
            raise ValueError(f"stage {self.name!r} needs a 'text' column")
        return self.apply(batch)

    def apply(self, batch: pa.RecordBatch) -> StageResult:  # pragma: no cover - interface
        raise NotImplementedError

    def derived_params(self) -> dict:
        """Parameters the stage derived from its recipe entry (MinHash bands and rows optimized for the
        threshold...). The driver writes them into the entry it hands to the tasks
        (:meth:`dataclean.pipeline.Pipeline.task_config`), so that no worker derives them again. Default: none."""
        return {}

    def per_row(self, batch: pa.RecordBatch, name: str, by_lang: dict | None = None) -> pa.Array:
        """Parameter ``name`` per row: ``by_lang[lang][name]`` where the row's ``lang`` has an override,
        else the stage's own value. Lets one stage apply, say, Chinese thresholds to Chinese documents."""
        default = getattr(self, name)
        by_lang = self.by_lang if by_lang is None else by_lang
        n = batch.num_rows
        if not by_lang or "lang" not in batch.schema.names:
            return pa.array([default] * n, pa.float64())
        lang = batch.column("lang")
        out = pa.array([default] * n, pa.float64())
        for code, overrides in by_lang.items():
            if name in overrides:
                mask = pc.fill_null(pc.equal(lang, code), False)
                out = pc.if_else(mask, pa.scalar(float(overrides[name]), pa.float64()), out)
        return out

    by_lang: dict = {}

    def set_by_lang(self, by_lang: dict | None) -> None:
        """Store per-language overrides (``{"zh": {"min_words": 100}}``), refusing unknown parameter names.
        Call it at the end of ``__init__``, after the parameters are set."""
        by_lang = dict(by_lang or {})
        known = {k for k in self.params() if k != "by_lang"}
        for code, overrides in by_lang.items():
            if not isinstance(overrides, dict):
                raise ValueError(f"{self.kind}.by_lang.{code}: expected a mapping of parameter: value")
            unknown = set(overrides) - known
            if unknown:
                raise ValueError(f"{self.kind}.by_lang.{code}: unknown parameter(s) {', '.join(sorted(unknown))}")
        self.by_lang = by_lang

    def params(self) -> dict:
        sig = inspect.signature(type(self).__init__)
        return {k: getattr(self, k) for k in sig.parameters if k not in ("self", "name") and hasattr(self, k)}

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params().items())
        return f"{type(self).__name__}({args})"


def batch_text(batch: pa.RecordBatch) -> pa.Array:
    """The ``text`` column as one string array, nulls as empty strings (what every rule measures)."""
    text = batch.column("text")
    if isinstance(text, pa.ChunkedArray):
        text = text.combine_chunks()
    return pc.fill_null(text.cast(pa.string()), "")


def with_columns(batch: pa.RecordBatch, columns: dict[str, pa.Array]) -> pa.RecordBatch:
    """Return ``batch`` with ``columns`` set (replaced in place when they exist, appended otherwise)."""
    for name, arr in columns.items():
        if isinstance(arr, pa.ChunkedArray):
            arr = arr.combine_chunks()
        idx = batch.schema.get_field_index(name)
        if idx >= 0:
            batch = batch.set_column(idx, pa.field(name, arr.type), arr)
        else:
            batch = batch.append_column(pa.field(name, arr.type), arr)
    return batch
