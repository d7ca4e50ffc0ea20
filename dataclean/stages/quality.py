"""The ``quality_score`` stage: a quality score in [0, 1] for every document, and the scorer's signals.

It removes nothing: filtering on ``quality_score`` (a threshold, or the top fraction of the corpus) is a
separate, global stage, so the score can be re-thresholded without recomputing it. The near-duplicate stage
also reads it, to keep the best document of a cluster.

Parameters:

* ``scorer`` — ``heuristic`` (default; rule-like signals, no model: :mod:`dataclean.quality.heuristic`),
  ``fasttext`` (a supervised fastText classifier: :mod:`dataclean.quality.fasttext_model`), ``linear``
  (the hashed n-gram model trained by ``dataclean quality train``: :mod:`dataclean.quality.linear`) or
  ``embedding`` (a logistic-regression head on a text embedder, trained by ``dataclean quality train
  --embedder MODEL``: :mod:`dataclean.quality.embedding`);
* ``model_path`` — the model file of ``fasttext`` and ``linear``, the head file of ``embedding`` (which names
  its embedder folder);
* ``positive_label`` — ``fasttext`` only: the label of good documents, with or without ``__label__``;
* ``lowercase``, ``split_cjk`` — ``fasttext`` only: lower-case the text, set Han characters and kana runs
  apart with spaces, as the model's training text was prepared.

Columns added: ``quality_score`` (float64) and the scorer's own signals (``q_...``; none for the model
scorers). A model file that is missing, incomplete, unsupervised or without the positive label is refused
when the stage is built, naming the file.

Layers: this is the one stage that imports a layer above the stages, :mod:`dataclean.quality` (the scorers,
their training and evaluation), because the heuristic scorer is built from the rule families' own pieces
(Gopher's stop words, C4's line joining, FineWeb's sentence ends) and the fastText scorer shares language ID's
model check. The scorers are imported when this module is, so the stage builds any of them by name.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from dataclean.quality import make_scorer
from dataclean.stages.base import RuleSpec, Stage, StageResult, with_columns
from dataclean.text import WORDS_COLUMN, batch_words

SCORE_FIELD = pa.field("quality_score", pa.float64())


class QualityScore(Stage):
    """Add ``quality_score`` and the scorer's signals (see the module docstring); no document is removed."""

    kind = "quality_score"
    #: ``quality_score``; each instance adds its scorer's own signals (``self.signal_fields``), e.g. the
    #: ``q_...`` columns of :class:`dataclean.quality.heuristic.HeuristicScorer`.
    signal_fields = [SCORE_FIELD]
    rule_specs: list[RuleSpec] = []

    def __init__(self, scorer: str = "heuristic", model_path: str | None = None, positive_label: str | None = None,
                 lowercase: bool = False, split_cjk: bool = False, name: str | None = None):
        super().__init__(name)
        self.scorer = scorer
        self.model_path = None if model_path is None else str(model_path)
        self.positive_label = positive_label
        self.lowercase = bool(lowercase)
        self.split_cjk = bool(split_cjk)
        self._scorer = make_scorer(scorer, self.model_path, positive_label, self.lowercase, self.split_cjk)
        self.signal_fields = [SCORE_FIELD] + list(self._scorer.signal_fields)

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        if self._scorer.uses_words:  # tokenize once (or reuse an earlier stage's words), and hand them on
            batch = with_columns(batch, {WORDS_COLUMN: batch_words(batch)})
        scores, signals = self._scorer.score(batch)
        scores = np.asarray(scores, np.float64)
        return StageResult(with_columns(batch, {"quality_score": pa.array(scores, pa.float64()), **signals}))
