"""The stage interface: signals first, then decisions.

A stage is called on one :class:`pyarrow.RecordBatch` that has at least a ``text`` column. It returns a
:class:`StageResult`: the same rows (text possibly rewritten) with the stage's signal columns appended, and
per-row :class:`Decisions` saying which rule, if any, removes each row and with what deciding value. A stage
never filters rows itself; the pipeline applies the decisions, so every signal of a stage is computed for
every row it sees and a reviewer can re-threshold with SQL later.
"""
from __future__ import annotations

import inspect
import math
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
    :meth:`apply`. A plug-in stage (docs/plugins.md) is such a subclass outside dataclean, named in YAML by
    ``module:Class`` or an entry point; :class:`Filter` is the short form for one signal and one threshold.
    Constructor keyword arguments are the stage's parameters, and :meth:`params` returns them for the config
    hash and the manifest. Their defaults are ``rules/default.yaml``'s, except where a constructor keeps the
    published rule (C4's three sentences, CCNet's 0.5...) and the recipe its measured choice: the ten such
    parameters are listed with their reason in ``tests/test_defaults.py``, which fails on any other difference.
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
    #: True for a :class:`GlobalStage` (decides in the global step over the whole corpus).
    is_global: ClassVar[bool] = False
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

    def check_pipeline(self, before: list["Stage"]) -> None:
        """Raise a one-line :class:`ValueError` when the stages that run ``before`` this one do not give it what
        it needs (``semantic_dedup`` needs an ``embed`` stage). Called by the config check, before any work.
        Default: nothing needed."""

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


_DEFAULT = object()  # (Filter's threshold argument when the recipe entry sets none: the class's own value)


class Filter(Stage):
    """The base class of a filter plug-in: one signal per document, one threshold. The contract, all of it:

    * class attributes: ``kind`` (the stage's name in YAML, the ledger, the report and ``dataclean rules``),
      ``signal`` (the float64 column it appends to every row it sees, kept or removed), ``threshold`` (the
      default bound; a recipe entry's ``threshold:`` overrides it, ``null`` switches the rule off), ``compare``
      (``"max"``: a document is removed when its signal is above the threshold; ``"min"``: below it), and
      optionally ``rule`` (the ledger's rule code, default ``kind``) and ``reason`` (default the rule). The
      class docstring's first line is the rule's description in ``dataclean rules``.
    * one method, :meth:`compute`: the signal of every document of a batch at once, from its text.
    * more parameters: an ``__init__`` that stores them as attributes of the same name *before* calling
      ``super().__init__(threshold=threshold, by_lang=by_lang, name=name)``; they become YAML keys, go into the
      config hash and the manifest (:meth:`Stage.params`) and may be overridden per language under ``by_lang``.

    Signals first, then decisions: ``compute`` only measures; the threshold decides, here, so every removal
    carries the same ledger row as a built-in rule (stage, rule, reason, value = the signal, threshold) and a
    reviewer can re-threshold the signal column later with SQL. A signal of None or NaN means "not measured"
    (too little text to judge, say): it is written as null and never removes the document.

    Determinism: ``compute`` must depend only on the texts it is given (no clock, no global random state, no
    dependence on which other documents share the batch), because batches are cut differently for other worker
    counts and the output must not change with them.
    """

    #: The signal column ``compute`` fills (float64). Required.
    signal: ClassVar[str] = ""
    #: ``"max"``: removed when the signal is above the threshold; ``"min"``: removed when below.
    compare: ClassVar[str] = "max"
    #: The ledger's rule code (default: the stage's ``kind``) and reason (default: the rule code).
    rule: ClassVar[str] = ""
    reason: ClassVar[str] = ""
    #: The default threshold (None: the rule is off unless the recipe entry sets one).
    threshold: float | None = None

    def __init_subclass__(cls, **kwargs):
        """Derive what the pipeline reads (``signal_fields``, ``rule_specs``) from the class attributes, so a
        plug-in declares each thing once."""
        super().__init_subclass__(**kwargs)
        if isinstance(cls.signal, str) and cls.signal:
            cls.signal_fields = [pa.field(cls.signal, pa.float64())]
            doc = (inspect.getdoc(cls) or "").strip().split("\n")[0] if cls.__doc__ else ""
            cls.rule_specs = [RuleSpec(cls.rule or cls.kind, cls.signal, ("threshold",), cls.compare, doc)]

    def __init__(self, threshold: float | None = _DEFAULT, by_lang: dict | None = None,  # type: ignore[assignment]
                 name: str | None = None):
        super().__init__(name)
        if threshold is _DEFAULT:
            threshold = type(self).threshold
        self.threshold = _bound(self.kind, "threshold", threshold)
        self.set_by_lang(by_lang)
        for code, overrides in self.by_lang.items():
            if "threshold" in overrides:
                _bound(self.kind, f"by_lang.{code}.threshold", overrides["threshold"])

    def compute(self, text: pa.Array) -> "pa.Array | Sequence[float | None]":  # pragma: no cover - interface
        """The signal of each document: ``text`` is a string array (nulls already empty strings); return one
        number (or None) per element, in order, as an Arrow array, a numpy array or a list."""
        raise NotImplementedError(f"{type(self).__name__} must implement compute(self, text)")

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        text = batch_text(batch)
        n = len(text)
        value = self._signal(self.compute(text), n)
        thr = self._thresholds(batch)
        failed = pc.greater(value, thr) if self.compare == "max" else pc.less(value, thr)
        rule = self.rule or self.kind
        check = Check(rule, self.reason or rule, failed, value=value, threshold=thr)
        return StageResult(with_columns(batch, {self.signal: value}), Decisions.from_checks(n, [check]))

    def _signal(self, values, n: int) -> pa.Array:
        """``compute``'s answer as float64 with NaN as null, or a one-line error naming what to return."""
        where = f"stage {self.name}: {type(self).__name__}.compute"
        try:
            if isinstance(values, pa.ChunkedArray):
                values = values.combine_chunks()
            arr = pc.cast(values, pa.float64()) if isinstance(values, pa.Array) else pa.array(values, pa.float64())
        except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError, TypeError, ValueError) as exc:
            raise ValueError(f"{where} must return numbers (or None), one per document: {exc}") from None
        if len(arr) != n:
            raise ValueError(f"{where} returned {len(arr)} values for {n} documents; return one per document, in order")
        return pc.if_else(pc.is_nan(arr), pa.scalar(None, pa.float64()), arr)

    def _thresholds(self, batch: pa.RecordBatch) -> pa.Array:
        """The threshold per row (``by_lang`` overrides by the row's ``lang``); null where it is off."""
        by_lang = {code: {"threshold": math.nan if ov["threshold"] is None else ov["threshold"]}
                   for code, ov in self.by_lang.items() if "threshold" in ov}
        thr = self.per_row(batch, "threshold", by_lang)
        return pc.if_else(pc.is_nan(thr), pa.scalar(None, pa.float64()), thr)


#: The columns of the global step's ``removals`` table, in order (a global stage's removal rows).
REMOVAL_COLUMNS = "doc_key, stage, rule, reason, value, threshold, detail, dup_of"


class GlobalStage(Stage):
    """A stage that decides over the whole corpus, in the global step between the two passes
    (:mod:`dataclean.exec.global_step`). Its :meth:`apply` runs in pass 1 and adds the signals its decision
    needs (a content hash, MinHash signatures, an embedding; or nothing); the global step then calls, in
    order, for each global stage of the pipeline:

    1. :meth:`write_artifacts` (``dedup/`` files made from the candidate rows);
    2. :meth:`global_decide`, which inserts this stage's removals into the ``removals`` table; by default, the
       rows of the SQL of :meth:`global_removals`;

    and, after every stage has decided, :meth:`write_final_artifacts` on the view of the documents kept.

    A decision that groups documents by a key (exact hashes, MinHash bands) declares a shuffle: pass 1 writes
    :meth:`shuffle_rows` (schema ``shuffle_schema``) partitioned by key, reduce tasks keep the rows that
    ``shuffle_reduce`` (SQL over a view ``rows``) selects, and the stage decides from those candidates only
    (:mod:`dataclean.exec.shuffle`). A stage may also write per-document rows of the kept documents in pass 2
    (:meth:`kept_rows`, e.g. MinHash bands for ``--dedup-against``)."""

    is_global: ClassVar[bool] = True
    #: Pass-1 columns the global step reads for this stage besides its ``signal_fields``.
    global_columns: ClassVar[tuple[str, ...]] = ()
    #: The schema of :meth:`shuffle_rows`; None: no shuffle (the stage reads the ``docs`` view).
    shuffle_schema: ClassVar[pa.Schema | None] = None
    #: SQL over a view ``rows`` of one partition's shuffle rows: the candidates to keep.
    shuffle_reduce: ClassVar[str | None] = None
    #: Whether the global step writes the removals so far (``ctx.removed_path``) before this stage decides,
    #: for its map tasks to skip the documents removed already.
    uses_aggregates: ClassVar[bool] = False
    #: Schemas of the per-document artifacts of :meth:`kept_rows`, by ``dedup/`` folder name.
    kept_schemas: dict[str, pa.Schema] = {}

    @property
    def shuffles(self) -> bool:
        return self.shuffle_schema is not None

    def shuffle_rows(self, batch: pa.RecordBatch) -> tuple[pa.Table, Any]:
        """The key rows of one pass-1 batch and their uint64 keys (the partition is ``key % partitions``)."""
        raise NotImplementedError(f"{type(self).__name__} declares no shuffle")

    def write_artifacts(self, con, docs: str, folder: str) -> None:
        """Write ``dedup/`` files from the view ``docs`` (candidate rows when the stage shuffles)."""

    def global_removals(self, con, docs: str) -> str:
        """SQL over the view ``docs`` giving this stage's removals, with the columns of the ledger: ``doc_key,
        stage, rule, reason, value, threshold, detail, dup_of``."""
        raise NotImplementedError(f"{type(self).__name__} implements neither global_removals nor global_decide")

    def global_decide(self, ctx, view: str) -> None:
        """Insert this stage's removals into ``ctx.con``'s ``removals`` table. ``view``: the documents still
        alive; ``ctx.source``: the view :meth:`global_removals` reads (the candidates still alive when the stage
        shuffles). Stages whose decision needs Python (clustering) or tasks override this."""
        ctx.con.execute(f"INSERT INTO removals SELECT {REMOVAL_COLUMNS} FROM ({self.global_removals(ctx.con, ctx.source)})")

    def write_final_artifacts(self, ctx, view: str) -> None:
        """Write what needs the final decisions (``view``: the documents kept), e.g. what a later run dedups
        against."""

    @property
    def kept_rows_per_doc(self) -> dict[str, int]:
        """Rows per kept document in each artifact of :meth:`kept_rows` (default 1)."""
        return {}

    def kept_rows(self, batch: pa.RecordBatch) -> dict[str, pa.Table]:
        """Per-document artifact rows for the documents a pass-2 task keeps, by ``dedup/`` folder name."""
        return {}


def _bound(kind: str, key: str, value):
    """A threshold must be a number or None (off): a string from YAML would otherwise fail deep in a worker."""
    if value is not None and (isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value)):
        raise ValueError(f"stage {kind!r}: {key} must be a number (or null to switch the rule off), got {value!r}")
    return value


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
