"""Benchmark decontamination: remove (or mark) training documents that contain a benchmark item.

The index and the matching are in :mod:`dataclean.decontam`: word 13-grams and Han/kana character 13-grams of
the text normalized as dedup normalizes it, with traditional Chinese folded to simplified, against every
part (item × field) of the benchmarks, template n-grams dropped.

Signals: ``decontam_overlap`` — the largest share of one part's n-grams that the document contains;
``decontam_shared`` — how many of them; ``decontam_benchmark`` / ``decontam_item`` — that part (``item``
is ``<item id>/<field>``). Rule ``benchmark_overlap``: the overlap is above ``max_overlap`` (0.5: the
document holds more than half of an item's question, answer or passage), or, with ``min_shared_ngrams``
set, the document shares at least that many n-grams with one part (GPT-3's rule is ``min_shared_ngrams: 1``:
any shared 13-gram). ``mode: mark`` computes the signals and removes nothing. The ledger ``detail`` names
the benchmark, the item and the count: ``gsm8k item 12 (question): 19 of 19 13-grams``.

The stage is added by ``dataclean run … --decontaminate FILE`` (repeatable) or by the config section
``decontaminate: {benchmarks: [...]}``; see ``rules/default.yaml``. The driver builds the index once (or
finds it in the cache) and gives the workers its folder (``index``); they open it memory-mapped. A worker that
does not see that folder (a Ray node with its own disk) builds the same index into its own cache; set
``index_dir`` to a shared folder to build it once for a cluster.
"""
from __future__ import annotations

import os

import numpy as np
import pyarrow as pa

from dataclean import decontam
from dataclean.stages.base import Check, Decisions, RuleSpec, Stage, StageResult, batch_text, with_columns


class Decontaminate(Stage):
    kind = "decontaminate"
    signal_fields = [
        pa.field("decontam_overlap", pa.float64()),
        pa.field("decontam_shared", pa.int32()),
        pa.field("decontam_benchmark", pa.string()),
        pa.field("decontam_item", pa.string()),
    ]
    rule_specs = [RuleSpec("benchmark_overlap", "decontam_overlap", ("max_overlap", "min_shared_ngrams"), "max",
                           "share of one benchmark item's n-grams found in the document")]

    def __init__(self, benchmarks=None, ngram: int = 13, char_ngram: int = 13, max_overlap: float = 0.5,
                 min_shared_ngrams: int | None = None, max_item_frequency: int = 10, mode: str = "remove",
                 index: str | None = None, index_dir: str | None = None, name: str | None = None):
        super().__init__(name)
        try:
            parsed = decontam.parse_benchmarks(benchmarks)
        except decontam.BenchmarkError as exc:
            raise ValueError(str(exc)) from None
        if not parsed:
            raise ValueError("decontaminate: no benchmarks; give them with --decontaminate FILE or "
                             "decontaminate: {benchmarks: [FILE, ...]}")
        self.benchmarks = [{"path": b.path, "name": b.name, **({"fields": b.fields} if b.fields else {})}
                           for b in parsed]
        for key, value, lo in (("ngram", ngram, 1), ("char_ngram", char_ngram, 1),
                               ("max_item_frequency", max_item_frequency, 1)):
            if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= 1000:
                raise ValueError(f"decontaminate.{key}: must be an integer from {lo} to 1000, got {value!r}")
        self.ngram, self.char_ngram, self.max_item_frequency = ngram, char_ngram, max_item_frequency
        if not isinstance(max_overlap, (int, float)) or isinstance(max_overlap, bool) or not 0 <= max_overlap < 1:
            raise ValueError(f"decontaminate.max_overlap: must be a share in [0, 1), got {max_overlap!r}")
        self.max_overlap = float(max_overlap)
        if min_shared_ngrams is not None and (not isinstance(min_shared_ngrams, int) or min_shared_ngrams < 1):
            raise ValueError("decontaminate.min_shared_ngrams: must be an integer >= 1 or null")
        self.min_shared_ngrams = min_shared_ngrams
        if mode not in ("remove", "mark"):
            raise ValueError(f"decontaminate.mode: 'remove' or 'mark', not {mode!r}")
        self.mode = mode
        self.index_dir = index_dir
        if index is not None and not os.path.isfile(os.path.join(index, "index.json")):
            index = None  # a worker on another machine without the driver's cache: build it here (same bytes)
        if index is None:  # the driver (or a library user): build the index, or find it in the cache
            try:
                index = decontam.build_index(parsed, ngram, char_ngram, max_item_frequency, index_dir)
            except decontam.BenchmarkError as exc:
                raise ValueError(str(exc)) from None
        self.index = index
        self._index: decontam.Index | None = None

    def params(self) -> dict:
        p = super().params()
        p.pop("index", None)  # (derived: a cache folder, not a choice)
        return p

    def derived_params(self) -> dict:
        return {"index": self.index}

    def loaded(self) -> decontam.Index:
        if self._index is None:
            self._index = decontam.Index(self.index)
        return self._index

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_index"] = None  # (memory maps are reopened where the stage lands)
        return state

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        ix = self.loaded()
        text = batch_text(batch)
        n = len(text)
        m = ix.match(text)
        part, shared, overlap = m["part"], m["shared"], m["overlap"]
        hit = part >= 0
        bench = [ix.part_benchmark[p] if p >= 0 else None for p in part.tolist()] if hit.any() else [None] * n
        item = [f"{ix.part_item[p]}/{ix.part_field[p]}" if p >= 0 else None for p in part.tolist()] \
            if hit.any() else [None] * n
        out = with_columns(batch, {
            "decontam_overlap": pa.array(overlap),
            "decontam_shared": pa.array(shared.astype(np.int32)),
            "decontam_benchmark": pa.array(bench, pa.string()),
            "decontam_item": pa.array(item, pa.string()),
        })
        if self.mode == "mark":
            return StageResult(out, None)
        failed = hit & (overlap > self.max_overlap)
        if self.min_shared_ngrams is not None:
            failed |= hit & (shared >= self.min_shared_ngrams)
        if not failed.any():
            return StageResult(out, None)
        grams = ix.part_grams
        detail = [f"{ix.part_benchmark[p]} item {ix.part_item[p]} ({ix.part_field[p]}): {int(s)} of "
                  f"{int(grams[p])} {self.ngram}-grams" if f else None
                  for p, s, f in zip(part.tolist(), shared.tolist(), failed.tolist())]
        return StageResult(out, Decisions.from_checks(n, [Check(
            "benchmark_overlap", "benchmark contamination", pa.array(failed), pa.array(overlap), self.max_overlap,
            pa.array(detail, pa.string()))]))
