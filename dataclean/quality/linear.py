"""A trainable linear quality classifier on hashed word and character n-grams.

Features. A document is truncated to ``max_chars`` characters and lower-cased; then

* word n-grams (``word_ngrams``, default 1-2) of :func:`dataclean.text.tokenize.words_batch` (THE tokenizer:
  one Han character is one word, so Chinese word bigrams are character bigrams);
* character n-grams (``char_ngrams``, default 2-4) of the text with every whitespace run folded to one
  space. They carry Chinese, and spelling, markup and symbol patterns for every script.

Each n-gram is hashed into ``2 ** n_features_log2`` buckets (default 2^20): words with 64-bit xxh3 of their
UTF-8 bytes, characters with a polynomial of their code points; both then pass through the murmur3
finalizer with a seed of its own per n-gram kind and length, so the word "the" and the character trigram
"the" land in unrelated buckets (they meet only by chance, like any two n-grams). There is no vocabulary
to fit or to store: the model is one weight vector. The value of bucket ``f`` in document ``d`` is
``count(d, f) / sqrt(n_grams(d))``, so the score of a document is ``sigmoid(b + sum of the weights of its
n-grams / sqrt(their number))``: it needs no per-document sorting, it is computed with one gather and one
``np.bincount``, and a document's score does not depend on the batch it is scored in.

Why not scikit-learn's ``HashingVectorizer``: it builds every character n-gram as a Python string. On the
first 3,000 documents of bench shard 0 it computed these features (word 1-2 + char 2-4, 10,000 characters)
at 3,700 documents/s; this module computes them *and* the score at 20,000 documents/s (one core,
``benchmarks/quality_auc.py``). The classifier itself is scikit-learn's logistic regression (liblinear, L2,
balanced class weights).

Model files are ``.npz`` archives read with ``allow_pickle=False``: the non-zero weights (indices and
float32 values), the intercept and one JSON document (format, feature parameters, training metrics,
dataclean version, and a *probe*: the hashed features of a fixed English/Chinese/Japanese sentence). On
load the probe is recomputed; if the tokenizer or the hashing changed since training, the model is refused
instead of scoring garbage.
"""
from __future__ import annotations

import json
import os
import time
import zipfile
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from dataclean.text.tokenize import words_batch

FORMAT = "dataclean-linear-quality"
FORMAT_VERSION = 1
#: A fixed text whose hashed features are stored in every model and compared on load.
PROBE_TEXT = "The quick brown fox doesn't jump. 数据清洗很重要，质量第一！ カタカナとひらがな 2024 ✓"  # noqa: E501
#: Featurize at most this many characters at once (bounds the temporary arrays to ~100 MB).
CHUNK_CHARS = 1 << 21

_FASTTEXT_MAGIC = (793712314).to_bytes(4, "little")
_ZIP_MAGIC = b"PK\x03\x04"
_ARRAYS = ("meta", "coef_index", "coef_value", "intercept")
_U64 = np.uint64


class ModelFileError(Exception):
    """A model file cannot be used. ``str()`` is the one line shown to the user."""

    def __init__(self, path: str, cause: str):
        super().__init__(f"{path}: {cause}")
        self.path = path
        self.cause = cause


@dataclass(frozen=True)
class HashingParams:
    """What a document's feature vector is made of (stored in the model file)."""

    n_features_log2: int = 20
    word_ngrams: tuple[int, int] = (1, 2)
    char_ngrams: tuple[int, int] = (2, 4)
    max_chars: int = 10_000

    def __post_init__(self):
        object.__setattr__(self, "word_ngrams", tuple(self.word_ngrams))
        object.__setattr__(self, "char_ngrams", tuple(self.char_ngrams))
        if not (type(self.n_features_log2) is int and 10 <= self.n_features_log2 <= 26):
            raise ValueError(f"n_features_log2 must be an integer in [10, 26], not {self.n_features_log2!r}")
        for name, pair, top in (("word_ngrams", self.word_ngrams, 3), ("char_ngrams", self.char_ngrams, 6)):
            ok = len(pair) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in pair)
            if not ok or not (pair == (0, 0) or 1 <= pair[0] <= pair[1] <= top):
                raise ValueError(f"{name} must be (lo, hi) with 1 <= lo <= hi <= {top}, or (0, 0) for none; "
                                 f"not {pair!r}")
        if self.word_ngrams == (0, 0) and self.char_ngrams == (0, 0):
            raise ValueError("word_ngrams and char_ngrams cannot both be (0, 0)")
        if not (isinstance(self.max_chars, int) and not isinstance(self.max_chars, bool) and self.max_chars >= 1):
            raise ValueError(f"max_chars must be a positive integer, not {self.max_chars!r}")

    @property
    def n_features(self) -> int:
        return 1 << self.n_features_log2

    def to_json(self) -> dict:
        return {"n_features_log2": self.n_features_log2, "word_ngrams": list(self.word_ngrams),
                "char_ngrams": list(self.char_ngrams), "max_chars": self.max_chars}

    @classmethod
    def from_json(cls, d: dict) -> "HashingParams":
        if not isinstance(d, dict):
            raise ValueError("feature parameters are not an object")
        unknown = set(d) - {"n_features_log2", "word_ngrams", "char_ngrams", "max_chars"}
        if unknown:
            raise ValueError(f"unknown feature parameter(s) {', '.join(sorted(unknown))}")
        for key in ("word_ngrams", "char_ngrams"):
            if key in d and not (isinstance(d[key], list) and len(d[key]) == 2):
                raise ValueError(f"{key} must be a list of two integers")
        return cls(**d)


# --------------------------------------------------------------------------------------------------------
# Hashing

def _seed(name: str) -> np.uint64:
    return _U64(xxhash.xxh3_64_intdigest(name.encode()))


_CHAR_SEEDS = {n: _seed(f"char{n}") for n in range(1, 7)}
_WORD_SEEDS = {n: _seed(f"word{n}") for n in range(1, 4)}
_POLY = _U64(0x100000001B3)  # FNV-1a 64-bit prime: odd, so x -> x * P is a bijection mod 2^64
_C1, _C2 = _U64(0xFF51AFD7ED558CCD), _U64(0xC4CEB9FE1A85EC53)


def _fmix64(x: np.ndarray, seed: np.uint64, bits: int) -> np.ndarray:
    """murmur3's 64-bit finalizer of ``x ^ seed``, top ``bits`` bits as int32 bucket numbers."""
    x = x ^ seed
    x ^= x >> _U64(33)
    x *= _C1
    x ^= x >> _U64(33)
    x *= _C2
    x ^= x >> _U64(33)
    return (x >> _U64(64 - bits)).astype(np.int32)


def _string_array(texts) -> pa.Array:
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    if not isinstance(texts, pa.Array):
        texts = pa.array(list(texts), pa.string())
    if not pa.types.is_string(texts.type):
        texts = texts.cast(pa.string())
    return pc.fill_null(texts, "")


def _char_grams(chars: pa.Array, params: HashingParams) -> tuple[list, list, np.ndarray]:
    """(rows, buckets) lists of the character n-grams, and the n-gram count per document."""
    n_docs = len(chars)
    lens = pc.utf8_length(chars).to_numpy(zero_copy_only=False).astype(np.int64)
    lo, hi = params.char_ngrams
    counts = np.zeros(n_docs, np.int64)
    if hi == 0 or not lens.sum():
        return [], [], counts
    offsets = np.frombuffer(chars.buffers()[1], np.int32, n_docs + 1, chars.offset * 4)
    data = chars.buffers()[2].to_pybytes()[offsets[0]:offsets[-1]]
    cp = np.frombuffer(data.decode("utf-8").encode("utf-32-le"), "<u4").astype(_U64)
    ends = np.cumsum(lens)
    doc = np.repeat(np.arange(n_docs, dtype=np.int32), lens)
    rows, cols = [], []
    acc = cp
    with np.errstate(over="ignore"):
        for n in range(1, hi + 1):
            if n > 1:
                acc = acc[:-1] * _POLY + cp[n - 1:]
            if n < lo or not len(acc):
                continue
            keep = np.ones(len(acc), bool)
            for k in range(1, n):  # the windows that start in the last n-1 characters of a document cross its end
                cut = ends - k
                keep[cut[(cut >= 0) & (cut < len(acc))]] = False
            rows.append(doc[:len(acc)][keep])
            cols.append(_fmix64(acc[keep], _CHAR_SEEDS[n], params.n_features_log2))
            counts += np.maximum(lens - n + 1, 0)
    return rows, cols, counts


def _word_grams(low: pa.Array, params: HashingParams) -> tuple[list, list, np.ndarray]:
    n_docs = len(low)
    lo, hi = params.word_ngrams
    counts = np.zeros(n_docs, np.int64)
    if hi == 0:
        return [], [], counts
    words = words_batch(low)
    flat = pc.list_flatten(words)
    if not len(flat):
        return [], [], counts
    parent = pc.list_parent_indices(words).to_numpy().astype(np.int32)
    enc = pc.dictionary_encode(flat)
    uniq = enc.dictionary.cast(pa.binary()).to_pylist()
    h = np.fromiter((xxhash.xxh3_64_intdigest(w) for w in uniq), _U64, len(uniq))
    wh = h[enc.indices.to_numpy()]
    acc = wh
    rows, cols = [], []
    with np.errstate(over="ignore"):
        for n in range(1, hi + 1):
            if n > 1:
                acc = acc[:-1] * _POLY + wh[n - 1:]
            if n < lo or not len(acc):
                continue
            same = parent[:len(acc)] == parent[n - 1:]  # the n words belong to one document
            rows.append(parent[:len(acc)][same])
            cols.append(_fmix64(acc[same], _WORD_SEEDS[n], params.n_features_log2))
            counts += np.bincount(rows[-1], minlength=n_docs)
    return rows, cols, counts


def hashed_ngrams(texts, params: HashingParams) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Hashed n-grams of a batch: ``rows`` (document index), ``buckets`` (feature index), both int32 and
    aligned, one entry per n-gram occurrence; and the number of n-grams per document (float64)."""
    texts = _string_array(texts)
    low = pc.utf8_lower(pc.utf8_slice_codeunits(texts, 0, params.max_chars))
    chars = pc.replace_substring_regex(pc.utf8_trim_whitespace(low), r"\s+", " ")
    r1, c1, n1 = _char_grams(chars, params)
    r2, c2, n2 = _word_grams(low, params)
    rows = np.concatenate(r1 + r2) if r1 + r2 else np.zeros(0, np.int32)
    cols = np.concatenate(c1 + c2) if c1 + c2 else np.zeros(0, np.int32)
    return rows, cols, (n1 + n2).astype(np.float64)


def _chunks(texts: pa.Array, params: HashingParams):
    """Slices of ``texts`` of at most about :data:`CHUNK_CHARS` characters (after truncation)."""
    n = len(texts)
    if n == 0:
        return
    size = np.minimum(pc.utf8_length(texts).to_numpy(zero_copy_only=False).astype(np.int64), params.max_chars)
    cum = np.cumsum(size)
    start = 0
    while start < n:
        base = cum[start - 1] if start else 0
        stop = int(np.searchsorted(cum, base + CHUNK_CHARS, side="right"))
        stop = max(stop, start + 1)
        yield start, texts.slice(start, stop - start)
        start = stop


def feature_matrix(texts, params: HashingParams):
    """The sparse document × feature matrix (CSR, float64) the classifier is trained on."""
    import scipy.sparse as sp

    texts = _string_array(texts)
    parts = []
    for _, chunk in _chunks(texts, params):
        rows, cols, n = hashed_ngrams(chunk, params)
        scale = 1.0 / np.sqrt(np.maximum(n, 1.0))
        parts.append(sp.csr_matrix((scale[rows], (rows, cols)), shape=(len(chunk), params.n_features)))
    if not parts:
        return sp.csr_matrix((0, params.n_features))
    return sp.vstack(parts, format="csr")


def probe_digest(params: HashingParams) -> str:
    """xxh3 of the sorted hashed features of :data:`PROBE_TEXT`: changes when the tokenizer or hashing does."""
    rows, cols, _ = hashed_ngrams(pa.array([PROBE_TEXT]), params)
    return xxhash.xxh3_64_hexdigest(np.sort(cols).astype("<i4").tobytes())


# --------------------------------------------------------------------------------------------------------
# The model


class LinearQualityModel:
    """``P(good | text) = sigmoid(intercept + coef · x(text))``, ``x`` from :func:`hashed_ngrams`."""

    kind = "linear"

    def __init__(self, coef: np.ndarray, intercept: float, params: HashingParams, info: dict | None = None):
        coef = np.asarray(coef, np.float32)
        if coef.shape != (params.n_features,):
            raise ValueError(f"coef has shape {coef.shape}, expected ({params.n_features},)")
        self.coef = coef
        self._coef64 = coef.astype(np.float64)
        self.intercept = float(np.float32(intercept))
        self.params = params
        self.info = dict(info or {})

    @property
    def metrics(self) -> dict:
        return self.info.setdefault("metrics", {})

    def decision_function(self, texts) -> np.ndarray:
        """The logit of each document (float64)."""
        texts = _string_array(texts)
        out = np.full(len(texts), self.intercept, np.float64)
        for start, chunk in _chunks(texts, self.params):
            rows, cols, n = hashed_ngrams(chunk, self.params)
            sums = np.bincount(rows, weights=self._coef64[cols], minlength=len(chunk))
            out[start:start + len(chunk)] += sums / np.sqrt(np.maximum(n, 1.0))
        return out

    def predict_proba(self, texts, langs: pa.Array | None = None) -> np.ndarray:
        """Probability that each document is "good" (float64 in [0, 1]). ``langs`` is accepted for the
        scorer interface; this model is one model for every language."""
        from scipy.special import expit

        return expit(self.decision_function(texts))

    # -- files -------------------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike) -> None:
        """Write the model to ``path`` (a ``.npz`` archive, nothing pickled), atomically."""
        path = os.fspath(path)
        nz = np.flatnonzero(self.coef).astype(np.int32)
        meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "kind": self.kind,
                "params": self.params.to_json(), "probe": probe_digest(self.params),
                "dataclean_version": _dataclean_version(), **{k: v for k, v in self.info.items()
                                                              if k not in ("format", "format_version", "kind",
                                                                           "params", "probe")}}
        meta_bytes = np.frombuffer(json.dumps(meta, ensure_ascii=False, sort_keys=True).encode("utf-8"), np.uint8)
        tmp = f"{path}.tmp-{os.getpid()}"
        try:
            with open(tmp, "wb") as fh:
                np.savez_compressed(fh, meta=meta_bytes, coef_index=nz, coef_value=self.coef[nz],
                                    intercept=np.array([self.intercept], np.float32))
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "LinearQualityModel":
        """Read a model written by :meth:`save`; raise :class:`ModelFileError` for anything else."""
        path = os.fspath(path)
        if not os.path.exists(path):
            raise ModelFileError(path, "no such file")
        if not os.path.isfile(path):
            raise ModelFileError(path, "not a file")
        with open(path, "rb") as fh:
            head = fh.read(4)
        if head == _FASTTEXT_MAGIC:
            raise ModelFileError(path, "is a fastText model, not a dataclean linear quality model (.npz)")
        if head[:1] == b"\x80":
            raise ModelFileError(path, "is a Python pickle; dataclean never loads pickles")
        if head != _ZIP_MAGIC:
            raise ModelFileError(path, "not a dataclean linear quality model (not an .npz archive)")
        try:
            with np.load(path, allow_pickle=False) as npz:
                names = set(npz.files)
                missing = [a for a in _ARRAYS if a not in names]
                if missing:
                    raise ModelFileError(path, f"not a dataclean linear quality model (an .npz without "
                                               f"{', '.join(missing)})")
                arrays = {a: npz[a] for a in _ARRAYS}
        except ModelFileError:
            raise
        except ValueError as exc:
            if "allow_pickle" in str(exc):
                raise ModelFileError(path, "holds pickled Python objects; dataclean never loads pickles") from None
            raise ModelFileError(path, f"corrupt model file ({_one_line(exc)})") from None
        except (zipfile.BadZipFile, OSError, EOFError, KeyError, zipfile.LargeZipFile) as exc:
            raise ModelFileError(path, f"corrupt model file ({_one_line(exc)})") from None
        return cls._from_arrays(path, arrays)

    @classmethod
    def _from_arrays(cls, path: str, a: dict) -> "LinearQualityModel":
        if a["meta"].dtype != np.uint8 or a["meta"].ndim != 1:
            raise ModelFileError(path, "not a dataclean linear quality model (meta is not a JSON byte string)")
        try:
            meta = json.loads(a["meta"].tobytes().decode("utf-8"))
        except (UnicodeDecodeError, ValueError) as exc:
            raise ModelFileError(path, f"corrupt model file (meta is not JSON: {_one_line(exc)})") from None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT:
            raise ModelFileError(path, "not a dataclean linear quality model (wrong format name)")
        version = meta.get("format_version")
        if version != FORMAT_VERSION:
            raise ModelFileError(path, f"model file format version {version!r} (written by dataclean "
                                       f"{meta.get('dataclean_version', '?')}); this dataclean "
                                       f"({_dataclean_version()}) reads version {FORMAT_VERSION}")
        try:
            params = HashingParams.from_json(meta.get("params"))
        except (TypeError, ValueError) as exc:
            raise ModelFileError(path, f"invalid feature parameters ({exc})") from None
        probe = probe_digest(params)
        if meta.get("probe") != probe:
            raise ModelFileError(path, f"the tokenizer or n-gram hashing of this dataclean "
                                       f"({_dataclean_version()}) differs from the one the model was trained "
                                       f"with (dataclean {meta.get('dataclean_version', '?')}): retrain it")
        idx, val, b = a["coef_index"], a["coef_value"], a["intercept"]
        if idx.dtype != np.int32 or val.dtype != np.float32 or idx.shape != val.shape or idx.ndim != 1:
            raise ModelFileError(path, "corrupt model file (weight arrays of the wrong type or shape)")
        if len(idx) and (idx.min() < 0 or idx.max() >= params.n_features or np.any(np.diff(idx) <= 0)):
            raise ModelFileError(path, f"corrupt model file (weight indices outside [0, {params.n_features}) "
                                       "or not increasing)")
        if b.shape != (1,) or b.dtype != np.float32 or not np.all(np.isfinite(val)) or not np.isfinite(b[0]):
            raise ModelFileError(path, "corrupt model file (intercept or weights not finite numbers)")
        coef = np.zeros(params.n_features, np.float32)
        coef[idx] = val
        info = {k: v for k, v in meta.items() if k not in ("format", "format_version", "kind", "params", "probe")}
        return cls(coef, float(b[0]), params, info)


def train(pos_texts, neg_texts, *, params: HashingParams | None = None, C: float = 4.0, seed: int = 0,
          max_iter: int = 200) -> tuple[LinearQualityModel, dict]:
    """Fit a model on good (``pos_texts``) and bad (``neg_texts``) documents.

    Logistic regression (scikit-learn, liblinear, L2 with inverse strength ``C``, classes weighted to
    balance). Returns the model and the training metrics (sizes, seconds, AUC on the training set); the
    metrics are also stored in ``model.metrics``. The model learns whatever separates the two sets, source
    style and length included: ``benchmarks/quality_auc.py`` measures how much.
    """
    from sklearn.linear_model import LogisticRegression

    from dataclean.quality.evaluate import roc_auc

    params = params or HashingParams()
    pos, neg = _string_array(pos_texts), _string_array(neg_texts)
    if not len(pos) or not len(neg):
        raise ValueError(f"training needs good and bad documents (got {len(pos)} good, {len(neg)} bad)")
    texts = pa.concat_arrays([pos, neg])
    y = np.r_[np.ones(len(pos), np.int8), np.zeros(len(neg), np.int8)]
    t0 = time.perf_counter()
    X = feature_matrix(texts, params)
    t1 = time.perf_counter()
    clf = LogisticRegression(C=C, solver="liblinear", class_weight="balanced", random_state=seed,
                             max_iter=max_iter)
    clf.fit(X, y)
    t2 = time.perf_counter()
    model = LinearQualityModel(clf.coef_[0], float(clf.intercept_[0]), params, {
        "classifier": {"type": "LogisticRegression", "solver": "liblinear", "C": C, "class_weight": "balanced",
                       "seed": seed, "max_iter": max_iter, "iterations": int(np.max(clf.n_iter_))}})
    train_scores = model.predict_proba(texts)
    metrics = {"n_train_pos": int(len(pos)), "n_train_neg": int(len(neg)),
               "n_weights": int(np.count_nonzero(model.coef)), "train_auc": roc_auc(train_scores, y),
               "featurize_seconds": round(t1 - t0, 3), "fit_seconds": round(t2 - t1, 3)}
    model.metrics.update(metrics)
    return model, metrics


def document_lines(texts, ids, *, seed: int = 0, min_chars: int = 20, max_chars: int = 300) -> list[str]:
    """One line (stripped, ``min_chars`` to ``max_chars`` characters) of each document that has one, chosen
    by a hash of its id and ``seed``.

    Added to the good training documents, these teach the model that a short text can be good: trained on
    long good documents and short bad ones only, it learns "short = bad" (on the bench corpus a clean line
    of Wikipedia or documentation then scores like a one-line chat message; ``benchmarks/quality_auc.py``).
    """
    from dataclean.quality.evaluate import id_hash_unit

    texts = _string_array(texts).to_pylist()
    ids = _string_array(ids).to_pylist()
    if len(texts) != len(ids):
        raise ValueError(f"{len(texts)} texts but {len(ids)} ids")
    picks = id_hash_unit(ids, seed, "line")
    out = []
    for text, u in zip(texts, picks):
        lines = [s for s in (line.strip() for line in text.split("\n")) if min_chars <= len(s) <= max_chars]
        if lines:
            out.append(lines[int(u * len(lines))])
    return out


def _dataclean_version() -> str:
    try:
        from importlib.metadata import version

        return version("dataclean")
    except Exception:  # noqa: BLE001 - running from a source tree without metadata
        return "unknown"


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def load(path: str | os.PathLike) -> LinearQualityModel:
    """Same as :meth:`LinearQualityModel.load`."""
    return LinearQualityModel.load(path)


__all__ = ["LinearQualityModel", "HashingParams", "ModelFileError", "train", "load", "hashed_ngrams",
           "feature_matrix", "probe_digest", "document_lines", "FORMAT", "FORMAT_VERSION"]
