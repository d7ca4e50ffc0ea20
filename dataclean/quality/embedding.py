"""A quality classifier on a text embedding: a logistic-regression head on a frozen sentence embedder.

This is the construction of FineWeb-Edu's classifier: a linear head with one output on top of an embedding
model (Snowflake-arctic-embed-m), the embedding and encoder layers frozen, trained on labelled web pages
(FineWeb blog post, "Classifier Training"; model card of ``HuggingFaceFW/fineweb-edu-classifier``). Here the
embedder is any folder :func:`dataclean.embed.models.load_embedder` reads (a sentence-transformers model, an
ONNX export, a static model2vec model), the labels are binary (good / bad), and the head is scikit-learn's
L2-regularised logistic regression (lbfgs) on standardized embedding components, folded back into one
weight vector and an intercept: ``score = sigmoid(w · e + b)`` for the document's L2-normalised embedding
``e``, a probability in [0, 1].

Embeddings are used as the ``embedding`` column stores them (:mod:`dataclean.embed.vectors`: float16), in
training and in scoring, so a document scores the same whether its embedding is computed by the scorer or
read from the column of an ``embed`` stage that ran before it with the same embedder.

Training (:func:`fit`, ``dataclean quality train --embedder MODEL``) weights the documents with
:func:`dataclean.quality.linear.balance_weights` (the same language / length balancing as the n-gram model)
and cross-validates on the folds of :func:`dataclean.quality.linear.cv_folds` (by id hash).

A head file (:class:`EmbeddingHead`) is an ``.npz`` archive read with ``allow_pickle=False``: the weight
vector, the intercept, and one JSON document naming the embedder (its folder, name, dimension, the
``max_tokens`` and ``long_text`` it embedded with, and its ``digest``, a hash of its files). Scoring loads
that embedder and refuses, in one line, a head whose embedder's files changed since training.
"""
from __future__ import annotations

import json
import os
import zipfile
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.pickling import ReloadsModel
from dataclean.quality import QualityModelError, Scorer

FORMAT = "dataclean-embedding-quality"
FORMAT_VERSION = 1
#: Inverse L2 strength of the logistic regression on standardized components (see docs/quality.md).
DEFAULT_C = 0.1
#: How the embedder's long documents are handled by default (as load_embedder's ``long_text``).
DEFAULT_LONG_TEXT = "truncate"
_ARRAYS = ("meta", "coef", "intercept")
_ZIP_MAGIC = b"PK\x03\x04"


class HeadFileError(QualityModelError):
    """A head file (or its embedder) that cannot be used. ``str()`` is the one line shown to the user."""

    def __init__(self, path: str, cause: str):
        super().__init__(f"{path}: {cause}")
        self.path = path
        self.cause = cause


@dataclass(frozen=True)
class EmbedderRecord:
    """The embedder a head was trained on, as its file records it."""

    path: str  # the folder, absolute
    name: str
    digest: str
    dim: int
    backend: str = "auto"
    max_tokens: int | None = None
    long_text: str = DEFAULT_LONG_TEXT

    def to_json(self) -> dict:
        return {"path": self.path, "name": self.name, "digest": self.digest, "dim": self.dim,
                "backend": self.backend, "max_tokens": self.max_tokens, "long_text": self.long_text}

    @classmethod
    def from_json(cls, d) -> "EmbedderRecord":
        if not isinstance(d, dict):
            raise ValueError("the embedder record is not an object")
        missing = [k for k in ("path", "name", "digest", "dim") if k not in d]
        if missing:
            raise ValueError(f"the embedder record lacks {', '.join(missing)}")
        if not isinstance(d["dim"], int) or isinstance(d["dim"], bool) or d["dim"] < 1:
            raise ValueError(f"embedder dim {d['dim']!r} is not a positive integer")
        return cls(path=str(d["path"]), name=str(d["name"]), digest=str(d["digest"]), dim=int(d["dim"]),
                   backend=str(d.get("backend", "auto")), max_tokens=d.get("max_tokens"),
                   long_text=str(d.get("long_text", DEFAULT_LONG_TEXT)))

    @classmethod
    def of(cls, embedder, path: str, backend: str, max_tokens: int | None, long_text: str) -> "EmbedderRecord":
        return cls(path=os.path.abspath(os.path.expanduser(path)), name=str(embedder.name),
                   digest=str(embedder.digest), dim=int(embedder.dim), backend=backend, max_tokens=max_tokens,
                   long_text=long_text)


# --------------------------------------------------------------------------------------------------------
# Embedding


class EmbedderError(ValueError):
    """An embedder folder that cannot be loaded; ``str()`` is one line."""


def load(model: str, *, backend: str = "auto", device: str = "auto", threads: int | None = None,
         max_tokens: int | None = None, long_text: str = DEFAULT_LONG_TEXT, batch_size: int = 64):
    """:func:`dataclean.embed.models.load_embedder`, its failures as one-line :class:`EmbedderError`."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # a folder, never a download
    os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
    try:
        from dataclean.embed.models import load_embedder
    except ModuleNotFoundError as e:  # pragma: no cover - an install without the embed extra
        raise EmbedderError(f"embedding needs the embed extra ({e.name} is not installed): "
                            "pip install 'dataclean[embed]'") from e
    path = os.path.expanduser(str(model))
    try:
        return load_embedder(path, backend=backend, device=device, threads=threads, max_tokens=max_tokens,
                             long_text=long_text, batch_size=batch_size)
    except Exception as exc:  # noqa: BLE001 - the loader's own errors are one line; others are made one
        text = str(exc).strip().splitlines()
        why = text[0] if text else type(exc).__name__
        raise EmbedderError(why if path in why else f"cannot load embedder {path}: {why}") from None


def as_column_values(vectors: np.ndarray) -> np.ndarray:
    """``vectors`` as the ``embedding`` column holds them: L2-normalised, rounded to float16, as float32."""
    from dataclean.embed.vectors import decode, encode

    v = np.asarray(vectors, np.float32)
    if v.ndim != 2:
        raise ValueError(f"embeddings must be a 2-d array, not shape {v.shape}")
    return decode(encode(v))[0]


def embed_texts(embedder, texts) -> np.ndarray:
    """The column values (:func:`as_column_values`) of ``embedder``'s embeddings of ``texts``."""
    if isinstance(texts, (pa.Array, pa.ChunkedArray)):
        texts = pc.fill_null(texts, "").to_pylist()
    texts = ["" if t is None else str(t) for t in texts]
    if not texts:
        return np.zeros((0, int(embedder.dim)), np.float32)
    v = np.asarray(embedder.embed(texts), np.float32)
    if v.shape != (len(texts), int(embedder.dim)):
        raise ValueError(f"embedder {embedder.name} returned shape {v.shape} for {len(texts)} texts "
                         f"(dim {embedder.dim})")
    return as_column_values(v)


# --------------------------------------------------------------------------------------------------------
# The head


def _sigmoid(z: np.ndarray) -> np.ndarray:
    from scipy.special import expit

    return expit(z)


@dataclass
class EmbeddingHead:
    """``score = sigmoid(coef · embedding + intercept)``, and the embedder it was trained on."""

    coef: np.ndarray  # float32 (dim,)
    intercept: float
    embedder: EmbedderRecord
    info: dict = field(default_factory=dict)  # classifier parameters, training metrics

    def __post_init__(self):
        self.coef = np.asarray(self.coef, np.float32).reshape(-1)
        if len(self.coef) != self.embedder.dim:
            raise ValueError(f"{len(self.coef)} weights for an embedder of dimension {self.embedder.dim}")

    def decision_function(self, vectors: np.ndarray) -> np.ndarray:
        v = np.asarray(vectors, np.float32)
        if v.ndim != 2 or v.shape[1] != self.embedder.dim:
            raise ValueError(f"embeddings of shape {v.shape}; this head takes dimension {self.embedder.dim}")
        return v.astype(np.float64) @ self.coef.astype(np.float64) + float(self.intercept)

    def predict_proba(self, vectors: np.ndarray) -> np.ndarray:
        """Scores in [0, 1] of embeddings (rows as :func:`as_column_values` gives them)."""
        return _sigmoid(self.decision_function(vectors))

    # -- files ------------------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike) -> None:
        """Write the head to ``path`` (a ``.npz`` archive, nothing pickled), atomically."""
        from dataclean.quality.linear import _dataclean_version

        path = os.fspath(path)
        here = os.path.dirname(os.path.abspath(path))
        try:  # where the embedder is from the head file: found again when both move together
            relative = os.path.relpath(self.embedder.path, here)
        except ValueError:  # (another drive)
            relative = None
        meta = {"format": FORMAT, "format_version": FORMAT_VERSION,
                "embedder": {**self.embedder.to_json(), "relative_path": relative},
                "dataclean_version": _dataclean_version(), **{k: v for k, v in self.info.items()
                                                              if k not in ("format", "format_version", "embedder")}}
        meta_bytes = np.frombuffer(json.dumps(meta, ensure_ascii=False, sort_keys=True).encode("utf-8"), np.uint8)
        tmp = f"{path}.tmp-{os.getpid()}"
        try:
            with open(tmp, "wb") as fh:
                np.savez_compressed(fh, meta=meta_bytes, coef=self.coef,
                                    intercept=np.array([self.intercept], np.float64))
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "EmbeddingHead":
        """Read a head written by :meth:`save`; raise :class:`HeadFileError` for anything else (the embedder is
        not loaded: see :func:`load_head`)."""
        path = os.fspath(path)
        meta, arrays = _read_npz(path)
        if meta.get("format") != FORMAT:
            if meta.get("format") == "dataclean-linear-quality":
                raise HeadFileError(path, "is a linear (n-gram) quality model, not an embedding head: use "
                                          "scorer: linear")
            raise HeadFileError(path, "not a dataclean embedding quality head (wrong format name)")
        version = meta.get("format_version")
        if version != FORMAT_VERSION or isinstance(version, bool):
            raise HeadFileError(path, f"head file format version {version!r} (written by dataclean "
                                      f"{meta.get('dataclean_version', '?')}); this dataclean reads version "
                                      f"{FORMAT_VERSION}")
        missing = [a for a in _ARRAYS[1:] if a not in arrays]
        if missing:
            raise HeadFileError(path, f"not a dataclean embedding quality head (no {', '.join(missing)} array)")
        try:
            record = EmbedderRecord.from_json(meta.get("embedder"))
        except ValueError as exc:
            raise HeadFileError(path, f"corrupt head file ({exc})") from None
        coef, intercept = arrays["coef"], arrays["intercept"]
        if coef.dtype.kind != "f" or coef.shape != (record.dim,) or intercept.dtype.kind != "f" \
                or intercept.shape != (1,):
            raise HeadFileError(path, f"corrupt head file (weights of shape {coef.shape} for an embedder of "
                                      f"dimension {record.dim})")
        if not (np.isfinite(coef).all() and np.isfinite(intercept).all()):
            raise HeadFileError(path, "corrupt head file (weights are not finite)")
        relative = meta["embedder"].get("relative_path")
        if not os.path.exists(record.path) and isinstance(relative, str):
            moved = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(path)), relative))
            if os.path.exists(moved):
                record = EmbedderRecord(**{**record.to_json(), "path": moved})
        info = {k: v for k, v in meta.items() if k not in ("format", "format_version", "embedder")}
        return cls(coef, float(intercept[0]), record, info)


def _read_npz(path: str) -> tuple[dict, dict]:
    from dataclean.quality.linear import _one_line

    if not os.path.exists(path):
        raise HeadFileError(path, "no such file")
    if not os.path.isfile(path):
        raise HeadFileError(path, "not a file")
    with open(path, "rb") as fh:
        magic = fh.read(4)
    if magic[:1] == b"\x80":
        raise HeadFileError(path, "is a Python pickle; dataclean never loads pickles")
    if magic != _ZIP_MAGIC:
        raise HeadFileError(path, "not a dataclean embedding quality head (not an .npz archive)")
    try:
        with np.load(path, allow_pickle=False) as npz:
            arrays = {a: npz[a] for a in npz.files}
    except ValueError as exc:
        if "allow_pickle" in str(exc):
            raise HeadFileError(path, "holds pickled Python objects; dataclean never loads pickles") from None
        raise HeadFileError(path, f"corrupt head file ({_one_line(exc)})") from None
    except (zipfile.BadZipFile, OSError, EOFError, KeyError, zipfile.LargeZipFile) as exc:
        raise HeadFileError(path, f"corrupt head file ({_one_line(exc)})") from None
    m = arrays.get("meta")
    if m is None or m.dtype != np.uint8 or m.ndim != 1:
        raise HeadFileError(path, "not a dataclean embedding quality head (no JSON meta)")
    try:
        meta = json.loads(m.tobytes().decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise HeadFileError(path, f"corrupt head file (meta is not JSON: {_one_line(exc)})") from None
    if not isinstance(meta, dict):
        raise HeadFileError(path, "not a dataclean embedding quality head (meta is not an object)")
    return meta, arrays


def file_format(path: str) -> str | None:
    """The ``format`` a dataclean ``.npz`` model file declares (``dataclean-embedding-quality``,
    ``dataclean-linear-quality``), or None when it is not one that can be read."""
    try:
        return _read_npz(os.fspath(path))[0].get("format")
    except HeadFileError:
        return None


def load_head(path: str | os.PathLike, *, embedder: str | None = None, device: str = "auto",
              threads: int | None = None, batch_size: int = 64):
    """The head of ``path`` and its embedder, loaded and checked: ``(head, embedder)``.

    The embedder is the folder the head records, or where it is relative to the head file when that folder
    is gone (the two moved together); ``embedder`` overrides both (a moved copy of the same files). Its
    digest and dimension must equal the recorded ones; otherwise :class:`HeadFileError` says, in one line,
    what changed and to retrain."""
    path = os.fspath(path)
    head = EmbeddingHead.load(path)
    rec = head.embedder
    folder = os.path.abspath(os.path.expanduser(embedder)) if embedder else rec.path
    if not os.path.exists(folder):
        raise HeadFileError(path, f"its embedder {folder} does not exist (trained with {rec.name}); put the "
                                  "folder back, or retrain with 'dataclean quality train --embedder MODEL'")
    try:
        model = load(folder, backend=rec.backend, device=device, threads=threads, max_tokens=rec.max_tokens,
                     long_text=rec.long_text, batch_size=batch_size)
    except EmbedderError as exc:
        raise HeadFileError(path, str(exc)) from None
    if str(model.digest) != rec.digest or int(model.dim) != rec.dim:
        raise HeadFileError(path, f"its embedder {folder} changed since the head was trained (digest "
                                  f"{str(model.digest)[:12]}, dim {model.dim}; trained with {rec.digest[:12]}, dim "
                                  f"{rec.dim}): retrain with 'dataclean quality train --embedder {folder}'")
    return head, model


# --------------------------------------------------------------------------------------------------------
# Training


def fit_head(vectors: np.ndarray, labels, weights: np.ndarray | None = None, *, C: float = DEFAULT_C,
             seed: int = 0, max_iter: int = 2000) -> tuple[np.ndarray, float, int]:
    """``(coef, intercept, iterations)`` of an L2 logistic regression (lbfgs) of ``labels`` on ``vectors``,
    each component standardized by its mean and spread over the training rows (weighted by ``weights``),
    folded back so that ``coef · v + intercept`` is the logit of a raw row ``v``."""
    from sklearn.linear_model import LogisticRegression

    X = np.asarray(vectors, np.float64)
    y = np.asarray(labels).astype(bool)
    w = np.ones(len(y)) if weights is None else np.asarray(weights, np.float64)
    keep = w > 0
    X, y, w = X[keep], y[keep], w[keep]
    mean = np.average(X, axis=0, weights=w)
    scale = np.sqrt(np.average((X - mean) ** 2, axis=0, weights=w))
    scale = np.where(scale > 1e-12, scale, 1.0)
    clf = LogisticRegression(C=C, solver="lbfgs", max_iter=max_iter, random_state=seed)
    clf.fit((X - mean) / scale, y, sample_weight=w)
    coef = clf.coef_[0] / scale
    intercept = float(clf.intercept_[0] - coef @ mean)
    return coef, intercept, int(np.max(clf.n_iter_))


def fit(vectors: np.ndarray, labels, *, embedder: EmbedderRecord, langs=None, lengths=None,
        balance=("lang", "length"), C: float = DEFAULT_C, seed: int = 0, max_iter: int = 2000,
        cv: int | None = None, ids=None) -> tuple[EmbeddingHead, dict]:
    """A head fitted on the embeddings ``vectors`` (rows as :func:`embed_texts` gives them) of labelled
    documents (``labels`` True = good), and its training metrics.

    ``langs`` (language keys) and ``lengths`` (characters) feed :func:`dataclean.quality.linear.balance_weights`
    with the factors ``balance``. ``cv``: first ``cv``-fold cross-validation on the folds of
    :func:`dataclean.quality.linear.cv_folds` (``ids`` required): ``metrics["cv_scores"]`` holds each
    document's score from the head that did not see it. The final head is fitted on every document."""
    from dataclean.quality.evaluate import roc_auc
    from dataclean.quality.linear import balance_weights, cv_folds

    X = np.asarray(vectors, np.float32)
    y = np.asarray(labels).astype(bool)
    n = len(y)
    if X.shape != (n, embedder.dim):
        raise ValueError(f"{X.shape[0]} embeddings of dimension {X.shape[1] if X.ndim == 2 else '?'} for {n} labels "
                         f"and an embedder of dimension {embedder.dim}")
    if not y.any() or y.all():
        raise ValueError(f"training needs good and bad documents (got {int(y.sum())} good, {int((~y).sum())} bad)")
    keys = np.array(["und"] * n, dtype=object) if langs is None else np.asarray(langs, dtype=object)
    lengths = np.zeros(n) if lengths is None else np.asarray(lengths, np.float64)
    balance = tuple(balance)

    def weights(rows):
        return balance_weights(y[rows], keys[rows], lengths[rows], by=balance)

    metrics: dict = {}
    if cv:
        if ids is None:
            raise ValueError("cross-validation needs ids")
        folds = cv_folds(ids, cv, seed)
        logits = np.zeros(n)
        for f in range(cv):
            tr, te = np.flatnonzero(folds != f), np.flatnonzero(folds == f)
            if not y[tr].any() or y[tr].all():
                raise ValueError(f"fold {f + 1} of {cv} leaves one class without training documents; "
                                 "use fewer folds or add documents")
            coef, b, _ = fit_head(X[tr], y[tr], weights(tr), C=C, seed=seed, max_iter=max_iter)
            logits[te] = X[te].astype(np.float64) @ coef + b
        metrics.update({"cv_folds": cv, "cv_scores": _sigmoid(logits)})
    rows = np.arange(n)
    coef, b, iters = fit_head(X, y, weights(rows), C=C, seed=seed, max_iter=max_iter)
    info = {"classifier": {"type": "LogisticRegression", "solver": "lbfgs", "penalty": "l2", "C": C,
                           "standardized": True, "balance": list(balance),
                           "class_weight": "sample weights: " + ("+".join(balance) if balance else "classes")
                           + " balanced", "seed": seed, "max_iter": max_iter, "iterations": iters}}
    head = EmbeddingHead(coef, b, embedder, info)
    train_auc = roc_auc(head.decision_function(X), y)
    metrics.update({"n_train_pos": int(y.sum()), "n_train_neg": int((~y).sum()), "train_auc": train_auc,
                    "balance": list(balance)})
    head.info["metrics"] = {k: v for k, v in metrics.items() if k != "cv_scores"}
    return head, metrics


# --------------------------------------------------------------------------------------------------------
# The scorer


class EmbeddingScorer(ReloadsModel, Scorer):
    """Score = the head's probability of the document's embedding (``scorer: embedding``)."""

    name = "embedding"
    signal_fields: list[pa.Field] = []

    def __init__(self, model_path: str | None, embedder: str | None = None):
        if not model_path:
            raise QualityModelError("scorer 'embedding' needs model_path: a head written by "
                                    "'dataclean quality train --embedder MODEL'")
        self.model_path = os.path.expanduser(str(model_path))
        if not os.path.exists(self.model_path):
            raise QualityModelError(f"embedding quality head not found: {self.model_path}")
        self.embedder_path = None if embedder is None else os.path.abspath(os.path.expanduser(str(embedder)))
        self._load_model()

    def _load_model(self) -> None:
        self._model = load_head(self.model_path, embedder=self.embedder_path)

    @property
    def head(self) -> EmbeddingHead:
        return self._model[0]

    @property
    def embedder(self):
        return self._model[1]

    def score(self, batch: pa.RecordBatch) -> tuple[np.ndarray, dict[str, pa.Array]]:
        vectors = embed_texts(self.embedder, batch.column("text"))
        return np.clip(self.head.predict_proba(vectors), 0.0, 1.0), {}
