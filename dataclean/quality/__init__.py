"""Quality scoring: a score in [0, 1] per document, from rules or from a model.

A :class:`Scorer` turns a record batch into scores and its own signal columns (names prefixed ``q_``). The
``quality_score`` stage (:mod:`dataclean.stages.quality`) builds one by name with :func:`make_scorer` and adds
the columns; it removes nothing (filtering on the score is a separate, global stage). The scorers:

* ``heuristic`` (:mod:`dataclean.quality.heuristic`): a product of rule-like terms, no model file;
* ``fasttext`` (:mod:`dataclean.quality.fasttext_model`): a supervised fastText classifier's probability of
  a positive label;
* ``linear`` (:class:`LinearScorer`): the hashed n-gram linear model of :mod:`dataclean.quality.linear`
  (``dataclean quality train``), imported only when this scorer is used;
* ``embedding`` (:class:`dataclean.quality.embedding.EmbeddingScorer`): a logistic-regression head on a text
  embedder's document embeddings (``dataclean quality train --embedder MODEL``).
"""
from __future__ import annotations

from pathlib import Path
from typing import ClassVar

import numpy as np
import pyarrow as pa

from dataclean.pickling import ReloadsModel


class QualityModelError(ValueError):
    """A quality model file that is missing, unreadable, of the wrong kind, or lacks the positive label."""


class Scorer:
    """Scores documents. Subclasses set ``name`` and ``signal_fields`` and implement :meth:`score`."""

    name: ClassVar[str] = ""
    #: The scorer's own signal columns (names prefixed ``q_``), computed for every row.
    signal_fields: list[pa.Field] = []
    #: Whether :meth:`score` reads the tokenizer's words (the stage then hands them on in the batch).
    uses_words: ClassVar[bool] = False

    def score(self, batch: pa.RecordBatch) -> tuple[np.ndarray, dict[str, pa.Array]]:  # pragma: no cover
        """``(scores, signals)``: float64 scores in [0, 1], one per row of ``batch`` (which has a ``text``
        column and maybe ``lang``), and one array per field of :attr:`signal_fields`."""
        raise NotImplementedError


class LinearScorer(ReloadsModel, Scorer):
    """Score = ``LinearQualityModel.load(model_path).predict_proba(text, lang)``.

    The model module is imported when the scorer is built, so this package imports without it; the file is
    checked first, so a missing model is reported as such.
    """

    name = "linear"
    signal_fields: list[pa.Field] = []

    def __init__(self, model_path: str | None):
        if not model_path:
            raise QualityModelError("scorer 'linear' needs model_path: a model written by 'dataclean quality train'")
        path = Path(model_path).expanduser()
        if not path.exists():
            raise QualityModelError(f"linear quality model not found: {path}")
        self.model_path = str(path)
        self._load_model()

    def _load_model(self) -> None:
        self._model = self._read_model()

    def _read_model(self):
        try:
            from dataclean.quality import linear
        except ModuleNotFoundError as e:
            if e.name != "dataclean.quality.linear":
                raise
            raise QualityModelError("scorer 'linear' needs dataclean.quality.linear, which is not installed") from e
        unusable = tuple(c for c in (getattr(linear, "ModelFileError", None),) if isinstance(c, type))
        from dataclean.quality.embedding import FORMAT as HEAD_FORMAT, file_format

        if file_format(self.model_path) == HEAD_FORMAT:
            raise QualityModelError(f"{self.model_path} is an embedding quality head, not a linear model: use "
                                    "scorer: embedding")
        try:
            return linear.LinearQualityModel.load(self.model_path)
        except (OSError, ValueError, KeyError, *unusable) as e:
            if isinstance(e, QualityModelError):
                raise
            # the model's own errors name the file already ("PATH: why")
            message = str(e) if self.model_path in str(e) else f"{self.model_path}: {e}"
            raise QualityModelError(f"cannot load linear quality model {message}") from e

    def score(self, batch: pa.RecordBatch) -> tuple[np.ndarray, dict[str, pa.Array]]:
        text = batch.column("text")
        lang = batch.column("lang") if "lang" in batch.schema.names else None
        proba = np.asarray(self._model.predict_proba(text, lang), np.float64).reshape(-1)
        if len(proba) != batch.num_rows:
            raise ValueError(f"linear quality model {self.model_path} returned {len(proba)} scores "
                             f"for {batch.num_rows} documents")
        return np.clip(np.nan_to_num(proba), 0.0, 1.0), {}


#: The scorer names the stage accepts.
SCORER_NAMES = ("heuristic", "fasttext", "linear", "embedding")


def make_scorer(scorer: str = "heuristic", model_path: str | None = None, positive_label: str | None = None,
                lowercase: bool = False, split_cjk: bool = False) -> Scorer:
    """The scorer called ``scorer``, refusing parameters it would ignore."""
    if scorer not in SCORER_NAMES:
        raise ValueError(f"quality scorer must be one of {', '.join(SCORER_NAMES)}, not {scorer!r}")
    unused = [k for k, v, used in (("model_path", model_path, ("fasttext", "linear", "embedding")),
                                   ("positive_label", positive_label, ("fasttext",)),
                                   ("lowercase", lowercase, ("fasttext",)),
                                   ("split_cjk", split_cjk, ("fasttext",)))
              if v not in (None, False) and scorer not in used]
    if unused:
        raise ValueError(f"quality scorer {scorer!r} takes no {', '.join(unused)}")
    if scorer == "heuristic":
        from dataclean.quality.heuristic import HeuristicScorer

        return HeuristicScorer()
    if scorer == "fasttext":
        from dataclean.quality.fasttext_model import FastTextScorer

        return FastTextScorer(model_path, positive_label, lowercase=lowercase, split_cjk=split_cjk)
    if scorer == "embedding":
        from dataclean.quality.embedding import EmbeddingScorer

        return EmbeddingScorer(model_path)
    return LinearScorer(model_path)


# The scorer modules import rule stages (whose package imports the quality_score stage, which imports this
# package): they are imported on first use, never while this package initialises.
_LAZY = {"HeuristicScorer": "dataclean.quality.heuristic", "FastTextScorer": "dataclean.quality.fasttext_model",
         "EmbeddingScorer": "dataclean.quality.embedding"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["QualityModelError", "Scorer", "HeuristicScorer", "FastTextScorer", "LinearScorer", "EmbeddingScorer",
           "SCORER_NAMES", "make_scorer"]
