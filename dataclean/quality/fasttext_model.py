"""The ``fasttext`` quality score: the probability a supervised fastText classifier gives a positive label.

Any supervised fastText model file (``.bin``, or ``.ftz`` quantized) works: DCLM's ``fasttext_oh_eli5``
classifier (labels ``__label__hq`` / ``__label__cc``), a FineWeb-Edu-style classifier distilled into
fastText, or one trained in-house with ``fasttext supervised``. The runtime is ``fasttext-predict`` (import
name ``fasttext``), as for language identification; nothing is downloaded.

**Score** = the model's probability of ``positive_label`` (given with or without the ``__label__`` prefix),
over every label of the model (``k = -1``), clamped to [0, 1] (fastText adds 1e-5 to every probability). A
text in which the model finds no known feature gets no prediction from fastText, hence a score of 0; so
does an empty text. With a softmax model the probabilities of all labels sum to 1; with a one-vs-all model
(``-loss ova``) each is its own sigmoid.

**Text given to the model**, one line per document (fastText's ``predict`` reads one line):

1. newlines (and carriage returns) become spaces;
2. with ``lowercase``, the text is lower-cased (for models trained on lower-cased text; DCLM's was not);
3. with ``split_cjk``, every Han character and every kana run is set apart with spaces, the tokenizer's rule
   (fastText splits words on whitespace only, so unspaced Chinese is one long word; use it for models
   trained on Chinese segmented into characters, not for models trained on raw text).

**The model file** is checked before fastText sees it (fastText's loader loops forever on a truncated
file): it must exist and be a complete fastText file (the walk of
:func:`dataclean.stages.langid.check_fasttext_file`), be a supervised model (not ``cbow``/``skipgram``),
and have the positive label. Each failure raises :class:`dataclean.quality.QualityModelError` naming the
file (and the label). Loaded models are cached per process by (path, size, modification time).
"""
from __future__ import annotations

import mmap
import os
import struct
import threading
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.pickling import ReloadsModel
from dataclean.quality import QualityModelError, Scorer
from dataclean.stages.langid import ModelFileError, check_fasttext_file
from dataclean.text.tokenize import ISOLATE

LABEL_PREFIX = "__label__"
#: fastText's ``model_name`` enum (args.h) and ``loss_name``.
MODEL_NAMES = {1: "cbow", 2: "skipgram", 3: "supervised"}
LOSS_NAMES = {1: "hs", 2: "ns", 3: "softmax", 4: "ova"}


@dataclass(frozen=True)
class FastTextInfo:
    """What the header and dictionary of a fastText model file say."""

    model: str  # cbow | skipgram | supervised
    loss: str  # hs | ns | softmax | ova
    dim: int
    labels: tuple[str, ...]


def read_fasttext_info(path: str | os.PathLike) -> FastTextInfo:
    """The model kind, loss, dimension and labels of the fastText file at ``path`` (a file already checked
    with :func:`check_fasttext_file`: this reads the header and the dictionary, no matrix)."""
    with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as buf:
        dim, _ws, _epoch, _min_count, _neg, _word_ngrams, loss, model = struct.unpack_from("<8i", buf, 8)
        nentries = struct.unpack_from("<i", buf, 8 + 12 * 4 + 8)[0]
        pos = 8 + 12 * 4 + 8 + struct.calcsize("<iiiqq")
        labels = []
        for _ in range(nentries):  # word, NUL, int64 count, int8 type (1: label)
            end = buf.find(b"\0", pos)
            if buf[end + 9] == 1:
                labels.append(buf[pos:end].decode("utf-8", "replace"))
            pos = end + 10
    return FastTextInfo(MODEL_NAMES.get(model, f"unknown ({model})"), LOSS_NAMES.get(loss, f"unknown ({loss})"),
                        dim, tuple(labels))


def full_label(label: str) -> str:
    """``label`` with fastText's ``__label__`` prefix (added when missing)."""
    label = str(label).strip()
    return label if label.startswith(LABEL_PREFIX) else LABEL_PREFIX + label


_MODELS: dict[tuple, tuple] = {}
_MODELS_LOCK = threading.Lock()


def load_classifier(model_path: str | os.PathLike, positive_label: str):
    """``(model, info)`` for the supervised fastText model at ``model_path`` that has ``positive_label``;
    :class:`QualityModelError` otherwise (see the module docstring). Cached per process."""
    path = Path(model_path).expanduser()
    try:
        st = path.stat()
    except OSError:
        raise QualityModelError(f"fastText quality model file not found: {path}") from None
    if not path.is_file():
        raise QualityModelError(f"fastText quality model {path} is not a file")
    key = (str(path.resolve()), st.st_size, st.st_mtime_ns)
    with _MODELS_LOCK:
        cached = _MODELS.get(key)
        if cached is None:
            try:
                check_fasttext_file(path)
            except ModelFileError as e:  # its messages speak of a language-ID model: say what this one is
                raise QualityModelError(str(e).replace("language-ID model", "fastText quality model")) from e
            info = read_fasttext_info(path)
            if info.model != "supervised":
                raise QualityModelError(f"fastText quality model {path} is a {info.model} (unsupervised) model, "
                                        f"not a classifier: train it with 'fasttext supervised'")
            import fasttext  # fasttext-predict

            try:
                model = fasttext.load_model(str(path))
            except (ValueError, RuntimeError, MemoryError) as e:
                raise QualityModelError(f"fastText cannot load quality model {path}: {e}") from e
            cached = _MODELS[key] = (model, info)
    model, info = cached
    label = full_label(positive_label)
    if label not in info.labels:
        shown = ", ".join(info.labels[:10]) + (f" ... ({len(info.labels)} labels)" if len(info.labels) > 10 else "")
        raise QualityModelError(f"fastText quality model {path} has no label {label!r} (positive_label); "
                                f"its labels: {shown}")
    return model, info


def model_text(texts: pa.Array, lowercase: bool = False, split_cjk: bool = False) -> pa.Array:
    """The one-line strings given to fastText (module docstring, steps 1-3); null becomes ""."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    out = pc.fill_null(texts.cast(pa.string()), "")
    out = pc.replace_substring_regex(out, r"[\r\n]", " ")
    if lowercase:
        out = pc.utf8_lower(out)
    if split_cjk:
        out = pc.replace_substring_regex(out, ISOLATE, r" \1 ")
    return out


class FastTextScorer(ReloadsModel, Scorer):
    """Score = probability of ``positive_label`` under the fastText classifier at ``model_path``."""

    name = "fasttext"
    signal_fields: list[pa.Field] = []

    def __init__(self, model_path: str, positive_label: str, lowercase: bool = False, split_cjk: bool = False):
        if not model_path:
            raise QualityModelError("scorer 'fasttext' needs model_path: a supervised fastText model (.bin/.ftz)")
        if not positive_label or not str(positive_label).strip() or full_label(positive_label) == LABEL_PREFIX:
            raise QualityModelError("scorer 'fasttext' needs positive_label: the label of good documents "
                                    "(e.g. __label__hq)")
        self.model_path = str(model_path)
        self.positive_label = full_label(positive_label)
        self.lowercase = bool(lowercase)
        self.split_cjk = bool(split_cjk)
        self._load_model()

    def _load_model(self) -> None:  # the fastText object cannot be pickled: each process loads its own
        self._model, self.info = load_classifier(self.model_path, self.positive_label)

    def probabilities(self, texts: pa.Array) -> np.ndarray:
        """Probability of the positive label for each text (0 where fastText predicts nothing)."""
        strings = model_text(texts, self.lowercase, self.split_cjk).to_pylist()
        out = np.zeros(len(strings), np.float64)
        predict, label = self._model.predict, self.positive_label
        for i, s in enumerate(strings):
            labels, probs = predict(s, -1, 0.0, "replace")
            for lab, p in zip(labels, probs):
                if lab == label:
                    out[i] = p
                    break
        return np.clip(out, 0.0, 1.0, out=out)

    def score(self, batch: pa.RecordBatch) -> tuple[np.ndarray, dict[str, pa.Array]]:
        return self.probabilities(batch.column("text")), {}
