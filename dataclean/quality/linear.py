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

Training (:func:`fit`, ``dataclean quality train``) weights the documents so that both classes have the same
mix of language and length bins (:func:`balance_weights`), can fit one weight set per language beside the
fallback (``per_lang``), can add standardized dense document features from the heuristic signals
(:data:`DENSE_FEATURES`), and cross-validates by id hash (:func:`cv_folds`); :func:`class_differences` names
the ways the two classes differ (language, length, source) that a classifier could learn instead of quality.

Model files are ``.npz`` archives read with ``allow_pickle=False``: the non-zero weights (indices and
float32 values), the intercept and one JSON document (format, feature parameters, training metrics,
dataclean version, and a *probe*: the hashed features of a fixed English/Chinese/Japanese sentence). On
load the probe is recomputed; if the tokenizer or the hashing changed since training, the model is refused
instead of scoring garbage. Format version 2 adds the dense features (names, standardization, and their values
on :data:`DENSE_PROBE_TEXTS`, compared on load in the same way) and per-language weights (``head{i}_*``
arrays, languages in ``meta["heads"]``); version-1 files still load.
"""
from __future__ import annotations

import json
import math
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
FORMAT_VERSION = 2
#: The format versions :meth:`LinearQualityModel.load` reads (version 1: one weight vector, no dense features).
READ_VERSIONS = (1, 2)
#: A fixed text whose hashed features are stored in every model and compared on load.
PROBE_TEXT = "The quick brown fox doesn't jump. 数据清洗很重要，质量第一！ カタカナとひらがな 2024 ✓"  # noqa: E501
#: Featurize at most this many characters at once (bounds the temporary arrays to ~100 MB).
CHUNK_CHARS = 1 << 21

_FASTTEXT_MAGIC = (793712314).to_bytes(4, "little")
_ZIP_MAGIC = b"PK\x03\x04"
_ARRAYS = ("meta", "coef_index", "coef_value", "intercept")
_META_OWN = ("format", "format_version", "kind", "params", "probe", "dense", "heads")
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
# Dense document features

#: The dense features a model may use, by name: what each is (all from the whole text, not truncated).
DENSE_FEATURES = {
    "log_words": "ln(1 + q_words), the tokenizer's words",
    "alpha_word_frac": "q_alpha_word_frac, share of the words holding a letter",
    "stop_word_frac": "q_stop_word_frac, stop words / words with the row's language list (null: the mean)",
    "terminal_line_frac": "q_terminal_line_frac, share of the line characters in lines that end a sentence",
    "dup_line_frac": "q_dup_line_frac, share of the line characters in repeated lines",
    "symbol_ratio": "q_symbol_ratio, symbol characters / (symbol + word characters)",
    "mean_word_length": "q_mean_word_length, mean characters per non-Han, non-kana word (null: the mean)",
    "cjk_word_frac": "q_cjk_word_frac, share of the words that are Han characters or kana runs",
    "log_lines": "ln(1 + non-blank lines)",
    "log_mean_line_chars": "ln(1 + mean characters per non-blank line)",
}
#: The features ``--dense`` uses.
DEFAULT_DENSE = tuple(DENSE_FEATURES)
#: The standardized dense features are multiplied by this before they join the n-gram features (whose rows
#: have an L2 norm of about 1): measured on dclm-dev, 5-fold CV AUC 0.878 at 0.3 vs 0.873 at 1 and 0.872 at 3.
DENSE_SCALE = 0.3
#: Standardized values are clipped to [-DENSE_CLIP, DENSE_CLIP] so that one odd document cannot dominate.
DENSE_CLIP = 5.0
#: Texts whose dense features are stored in a model with dense features and compared on load (the heuristic
#: signals they come from may change between dataclean versions).
DENSE_PROBE_TEXTS = (PROBE_TEXT, "Home | Login | Menu\n\nThe first sentence of a paragraph. And a second one!\n"
                                 "the same line\nthe same line\n# 42 $$$ ***")


def dense_features(texts, langs=None, names=DEFAULT_DENSE) -> np.ndarray:
    """The raw dense features (float64, documents × ``names``; NaN where undefined) of a batch: the
    signals of :meth:`dataclean.quality.heuristic.HeuristicScorer.signals` (which reads ``langs`` for
    the stop-word list, else the script) and the line statistics of :data:`DENSE_FEATURES`."""
    from dataclean.quality.heuristic import HeuristicScorer
    from dataclean.text.tokenize import lines_batch

    unknown = [n for n in names if n not in DENSE_FEATURES]
    if unknown:
        raise ValueError(f"unknown dense feature(s) {', '.join(unknown)}; known: {', '.join(DENSE_FEATURES)}")
    texts = _string_array(texts)
    n = len(texts)
    if n == 0:
        return np.zeros((0, len(names)))
    cols = {"text": texts}
    if langs is not None:
        cols["lang"] = _lang_array(langs)
    sig = HeuristicScorer().signals(pa.record_batch(cols))
    lines = lines_batch(texts)
    length = pc.utf8_length(pc.utf8_trim_whitespace(pc.list_flatten(lines))).to_numpy(zero_copy_only=False)
    parent = pc.list_parent_indices(lines).to_numpy()
    n_lines = np.bincount(parent[length > 0], minlength=n).astype(np.float64)
    line_chars = np.bincount(parent, weights=length.astype(np.float64), minlength=n)
    values = {"log_words": np.log1p(np.asarray(sig["q_words"], np.float64)),
              "log_lines": np.log1p(n_lines),
              "log_mean_line_chars": np.log1p(line_chars / np.maximum(n_lines, 1.0))}
    out = np.empty((n, len(names)))
    for j, name in enumerate(names):
        out[:, j] = values[name] if name in values else np.asarray(sig[f"q_{name}"], np.float64)
    return out


def _lang_array(langs) -> pa.Array:
    if isinstance(langs, pa.ChunkedArray):
        langs = langs.combine_chunks()
    if not isinstance(langs, pa.Array):
        langs = pa.array(list(langs), pa.string())
    return langs.cast(pa.string())


def lang_keys(texts, langs=None) -> np.ndarray:
    """The language of each document as a per-language model chooses its weights: ``langs`` reduced to the
    language (``zh-CN`` -> ``zh``); where null or absent, the script group of the heuristic signals (``zh``
    when at least half the words are Han or kana, ``ja`` with kana, else ``en``). An object array of str."""
    from dataclean.quality.evaluate import normalize_lang

    texts = _string_array(texts)
    given = [None] * len(texts) if langs is None else [normalize_lang(v) for v in _lang_array(langs).to_pylist()]
    if len(given) != len(texts):
        raise ValueError(f"{len(texts)} texts but {len(given)} languages")
    missing = [i for i, v in enumerate(given) if v is None]
    if missing:
        from dataclean.quality.heuristic import GROUPS, HeuristicScorer

        group = HeuristicScorer().signals(pa.record_batch({"text": texts.take(pa.array(missing, pa.int64()))}))
        for i, g in zip(missing, np.asarray(group["group"]).tolist()):
            given[i] = GROUPS[int(g)]
    return np.array(given, dtype=object)


@dataclass(frozen=True)
class DenseSpec:
    """Which dense features a model uses and how they are standardized: ``z = clip((x - mean) / std) * scale``,
    an undefined value (NaN) counting as the mean (z = 0). Stored in the model file."""

    names: tuple[str, ...]
    mean: tuple[float, ...]
    std: tuple[float, ...]
    scale: float = DENSE_SCALE
    clip: float = DENSE_CLIP

    def __post_init__(self):
        for key in ("names", "mean", "std"):
            object.__setattr__(self, key, tuple(getattr(self, key)))
        if not self.names or len(set(self.names)) != len(self.names):
            raise ValueError("dense feature names must be a non-empty list without repeats")
        unknown = [n for n in self.names if n not in DENSE_FEATURES]
        if unknown:
            raise ValueError(f"unknown dense feature(s) {', '.join(map(str, unknown))}")
        if not (len(self.mean) == len(self.std) == len(self.names)):
            raise ValueError("dense mean and std need one number per feature")
        numbers = (*self.mean, *self.std, self.scale, self.clip)
        if not all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in numbers):
            raise ValueError("dense mean, std, scale and clip must be finite numbers")
        if min(self.std) <= 0 or self.scale <= 0 or self.clip <= 0:
            raise ValueError("dense std, scale and clip must be positive")

    @classmethod
    def fit(cls, raw: np.ndarray, names=DEFAULT_DENSE, scale: float = DENSE_SCALE) -> "DenseSpec":
        """Mean and standard deviation of each column of ``raw`` (NaN ignored; a constant or undefined
        column gets mean 0 / std 1)."""
        raw = np.asarray(raw, np.float64)
        mean, std = [], []
        for j in range(raw.shape[1]):
            col = raw[:, j][np.isfinite(raw[:, j])]
            m = float(col.mean()) if len(col) else 0.0
            s = float(col.std()) if len(col) else 0.0
            mean.append(m)
            std.append(s if s > 1e-12 else 1.0)
        return cls(tuple(names), tuple(mean), tuple(std), float(scale))

    def transform(self, raw: np.ndarray) -> np.ndarray:
        z = (np.asarray(raw, np.float64) - np.array(self.mean)) / np.array(self.std)
        z = np.clip(np.where(np.isfinite(z), z, 0.0), -self.clip, self.clip)
        return z * self.scale

    def to_json(self) -> dict:
        return {"names": list(self.names), "mean": list(self.mean), "std": list(self.std), "scale": self.scale,
                "clip": self.clip}

    @classmethod
    def from_json(cls, d: dict) -> "DenseSpec":
        if not isinstance(d, dict):
            raise ValueError("dense features are not an object")
        unknown = set(d) - {"names", "mean", "std", "scale", "clip", "probe"}
        if unknown:
            raise ValueError(f"unknown dense parameter(s) {', '.join(sorted(unknown))}")
        if not all(isinstance(d.get(k), list) for k in ("names", "mean", "std")):
            raise ValueError("dense names, mean and std must be lists")
        return cls(tuple(d["names"]), tuple(d["mean"]), tuple(d["std"]), d.get("scale", DENSE_SCALE),
                   d.get("clip", DENSE_CLIP))


def _dense_probe(names) -> list:
    raw = dense_features(pa.array(list(DENSE_PROBE_TEXTS)), None, names)
    return [[None if not np.isfinite(v) else float(v) for v in row] for row in raw]


# --------------------------------------------------------------------------------------------------------
# The model


@dataclass
class Head:
    """One set of weights: hashed n-gram weights, intercept, dense-feature weights (empty without dense)."""

    coef: np.ndarray
    intercept: float
    dense_coef: np.ndarray


class LinearQualityModel:
    """``P(good | text) = sigmoid(intercept + coef · x(text) + dense_coef · z(text))``, ``x`` from
    :func:`hashed_ngrams`, ``z`` the standardized dense features (:class:`DenseSpec`, when the model has
    them). A per-language model (``heads``) holds one such weight set per language and uses the fallback
    weights (``coef``, ``intercept``, ``dense_coef``) for every other language (:func:`lang_keys`)."""

    kind = "linear"

    def __init__(self, coef: np.ndarray, intercept: float, params: HashingParams, info: dict | None = None, *,
                 dense: DenseSpec | None = None, dense_coef=None, heads: dict | None = None):
        self.params = params
        self.dense = dense
        fallback = self._head(coef, intercept, dense_coef)
        self.coef, self.intercept, self.dense_coef = fallback.coef, fallback.intercept, fallback.dense_coef
        self.heads = {str(k): self._head(h.coef, h.intercept, h.dense_coef) if isinstance(h, Head) else self._head(*h)
                      for k, h in (heads or {}).items()}
        self._coef64 = self.coef.astype(np.float64)
        self.info = dict(info or {})

    def _head(self, coef, intercept, dense_coef) -> Head:
        coef = np.asarray(coef, np.float32)
        if coef.shape != (self.params.n_features,):
            raise ValueError(f"coef has shape {coef.shape}, expected ({self.params.n_features},)")
        k = len(self.dense.names) if self.dense else 0
        dc = np.zeros(k, np.float32) if dense_coef is None else np.asarray(dense_coef, np.float32).reshape(-1)
        if dc.shape != (k,):
            raise ValueError(f"dense_coef has shape {dc.shape}, expected ({k},)")
        return Head(coef, float(np.float32(intercept)), dc)

    @property
    def metrics(self) -> dict:
        return self.info.setdefault("metrics", {})

    def _head_index(self, texts, langs) -> tuple[list[Head], np.ndarray]:
        heads = [Head(self.coef, self.intercept, self.dense_coef)] + list(self.heads.values())
        if not self.heads:
            return heads, np.zeros(len(texts), np.int64)
        keys = lang_keys(texts, langs)
        position = {k: i + 1 for i, k in enumerate(self.heads)}
        return heads, np.array([position.get(k, 0) for k in keys], np.int64)

    def decision_function(self, texts, langs=None) -> np.ndarray:
        """The logit of each document (float64). ``langs`` (one per document, null allowed) chooses the
        weights of a per-language model and the stop-word list of the dense features."""
        texts = _string_array(texts)
        heads, which = self._head_index(texts, langs)
        out = np.array([h.intercept for h in heads], np.float64)[which]
        coefs = [self._coef64] + [h.coef.astype(np.float64) for h in heads[1:]]
        for start, chunk in _chunks(texts, self.params):
            rows, cols, n = hashed_ngrams(chunk, self.params)
            if len(heads) == 1:
                weights = coefs[0][cols]
            else:
                weights = np.empty(len(cols))
                doc_head = which[start:start + len(chunk)][rows]
                for i, c in enumerate(coefs):
                    sel = doc_head == i
                    weights[sel] = c[cols[sel]]
            sums = np.bincount(rows, weights=weights, minlength=len(chunk))
            out[start:start + len(chunk)] += sums / np.sqrt(np.maximum(n, 1.0))
        if self.dense is not None and len(texts):
            z = self.dense.transform(dense_features(texts, langs, self.dense.names))
            dc = np.stack([h.dense_coef.astype(np.float64) for h in heads])[which]
            out += (z * dc).sum(axis=1)
        return out

    def predict_proba(self, texts, langs: pa.Array | None = None) -> np.ndarray:
        """Probability that each document is "good" (float64 in [0, 1]). ``langs`` as in
        :meth:`decision_function`."""
        from scipy.special import expit

        return expit(self.decision_function(texts, langs))

    # -- files -------------------------------------------------------------------------------------------

    def save(self, path: str | os.PathLike) -> None:
        """Write the model to ``path`` (a ``.npz`` archive, nothing pickled), atomically."""
        path = os.fspath(path)
        meta = {"format": FORMAT, "format_version": FORMAT_VERSION, "kind": self.kind,
                "params": self.params.to_json(), "probe": probe_digest(self.params),
                "dataclean_version": _dataclean_version(), **{k: v for k, v in self.info.items()
                                                              if k not in _META_OWN}}
        arrays = {}

        def put(prefix: str, h: Head) -> None:
            nz = np.flatnonzero(h.coef).astype(np.int32)
            arrays[f"{prefix}coef_index"] = nz
            arrays[f"{prefix}coef_value"] = h.coef[nz]
            arrays[f"{prefix}intercept"] = np.array([h.intercept], np.float32)
            if self.dense is not None:
                arrays[f"{prefix}dense_coef"] = h.dense_coef

        put("", Head(self.coef, self.intercept, self.dense_coef))
        if self.dense is not None:
            meta["dense"] = {**self.dense.to_json(), "probe": _dense_probe(self.dense.names)}
        if self.heads:
            meta["heads"] = list(self.heads)
            for i, h in enumerate(self.heads.values()):
                put(f"head{i}_", h)
        meta_bytes = np.frombuffer(json.dumps(meta, ensure_ascii=False, sort_keys=True).encode("utf-8"), np.uint8)
        tmp = f"{path}.tmp-{os.getpid()}"
        try:
            with open(tmp, "wb") as fh:
                np.savez_compressed(fh, meta=meta_bytes, **arrays)
            os.replace(tmp, path)
        finally:
            if os.path.exists(tmp):
                os.remove(tmp)

    @classmethod
    def load(cls, path: str | os.PathLike) -> "LinearQualityModel":
        """Read a model written by :meth:`save` (format version 1 or 2); raise :class:`ModelFileError` for
        anything else."""
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
                arrays = {a: npz[a] for a in npz.files}
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
        if version not in READ_VERSIONS or isinstance(version, bool):
            raise ModelFileError(path, f"model file format version {version!r} (written by dataclean "
                                       f"{meta.get('dataclean_version', '?')}); this dataclean "
                                       f"({_dataclean_version()}) reads versions "
                                       f"{', '.join(map(str, READ_VERSIONS))}")
        try:
            params = HashingParams.from_json(meta.get("params"))
        except (TypeError, ValueError) as exc:
            raise ModelFileError(path, f"invalid feature parameters ({exc})") from None
        probe = probe_digest(params)
        if meta.get("probe") != probe:
            raise ModelFileError(path, f"the tokenizer or n-gram hashing of this dataclean "
                                       f"({_dataclean_version()}) differs from the one the model was trained "
                                       f"with (dataclean {meta.get('dataclean_version', '?')}): retrain it")
        dense = None
        if version >= 2 and meta.get("dense") is not None:
            try:
                dense = DenseSpec.from_json(meta["dense"])
            except (TypeError, ValueError) as exc:
                raise ModelFileError(path, f"invalid dense features ({exc})") from None
            stored, now = meta["dense"].get("probe"), _dense_probe(dense.names)
            same = isinstance(stored, list) and len(stored) == len(now) and all(
                isinstance(r, list) and len(r) == len(q) and all(
                    (u is None and v is None) or (isinstance(u, (int, float)) and v is not None
                                                  and math.isclose(u, v, rel_tol=1e-9, abs_tol=1e-12))
                    for u, v in zip(r, q)) for r, q in zip(stored, now))
            if not same:
                raise ModelFileError(path, f"the heuristic signals (dense features) of this dataclean "
                                           f"({_dataclean_version()}) differ from the ones the model was trained "
                                           f"with (dataclean {meta.get('dataclean_version', '?')}): retrain it")
        k = len(dense.names) if dense else 0

        def weights(prefix: str) -> Head:
            idx, val, b = a.get(f"{prefix}coef_index"), a.get(f"{prefix}coef_value"), a.get(f"{prefix}intercept")
            if idx is None or val is None or b is None:
                raise ModelFileError(path, f"corrupt model file (no {prefix}coef_index, coef_value or intercept)")
            if idx.dtype != np.int32 or val.dtype != np.float32 or idx.shape != val.shape or idx.ndim != 1:
                raise ModelFileError(path, "corrupt model file (weight arrays of the wrong type or shape)")
            if len(idx) and (idx.min() < 0 or idx.max() >= params.n_features or np.any(np.diff(idx) <= 0)):
                raise ModelFileError(path, f"corrupt model file (weight indices outside [0, {params.n_features}) "
                                           "or not increasing)")
            if b.shape != (1,) or b.dtype != np.float32 or not np.all(np.isfinite(val)) or not np.isfinite(b[0]):
                raise ModelFileError(path, "corrupt model file (intercept or weights not finite numbers)")
            dc = np.zeros(0, np.float32)
            if dense is not None:
                dc = a.get(f"{prefix}dense_coef")
                if dc is None or dc.dtype != np.float32 or dc.shape != (k,) or not np.all(np.isfinite(dc)):
                    raise ModelFileError(path, f"corrupt model file ({prefix}dense_coef missing or not {k} "
                                               "finite float32 numbers)")
            coef = np.zeros(params.n_features, np.float32)
            coef[idx] = val
            return Head(coef, float(b[0]), dc)

        fallback = weights("")
        heads = {}
        langs = meta.get("heads") if version >= 2 else None
        if langs is not None:
            if not (isinstance(langs, list) and all(isinstance(v, str) and v for v in langs)
                    and len(set(langs)) == len(langs)):
                raise ModelFileError(path, "corrupt model file (heads is not a list of distinct languages)")
            heads = {lang: weights(f"head{i}_") for i, lang in enumerate(langs)}
        info = {k: v for k, v in meta.items() if k not in _META_OWN}
        return cls(fallback.coef, fallback.intercept, params, info, dense=dense, dense_coef=fallback.dense_coef,
                   heads=heads)


# --------------------------------------------------------------------------------------------------------
# Training

#: Length bins (characters of the whole text) that balancing equalizes: < 200, 200-999, 1000-4999, >= 5000.
LENGTH_EDGES = (200, 1000, 5000)
#: What ``balance`` may name.
BALANCE_FACTORS = ("lang", "length")


def balance_weights(labels, langs=None, lengths=None, *, by=BALANCE_FACTORS,
                    edges=LENGTH_EDGES) -> np.ndarray:
    """Training weights that give the good and the bad documents the same mix of language and length.

    A document's *cell* is its language and length bin (:data:`LENGTH_EDGES`; only the factors in ``by``).
    The target share of a cell is the mean of its share among the good and among the bad documents, over
    the cells that hold both classes (renormalized); a document of class ``k`` in cell ``c`` weighs
    ``(n / 2) · target(c) / count_k(c)``, so each class weighs ``n / 2`` in all and has the target mix.
    A document in a cell of one class only weighs 0: nothing of the other class can be set against it.
    With ``by=()`` every document weighs ``n / (2 · count of its class)`` (classes balanced, as
    scikit-learn's ``class_weight="balanced"``). Raise ValueError when no cell holds both classes.
    """
    y = np.asarray(labels).astype(bool)
    n = len(y)
    unknown = [f for f in by if f not in BALANCE_FACTORS]
    if unknown:
        raise ValueError(f"cannot balance {', '.join(unknown)}; choose from {', '.join(BALANCE_FACTORS)}")
    if not y.any() or y.all():
        raise ValueError(f"training needs good and bad documents (got {int(y.sum())} good, {int((~y).sum())} bad)")
    parts = []
    if "lang" in by:
        parts.append(np.asarray(langs, dtype=object).astype(str))
    if "length" in by:
        parts.append(np.searchsorted(np.asarray(edges), np.asarray(lengths), side="right").astype(str))
    cell = np.array(["\x00".join(t) for t in zip(*parts)], dtype=object) if parts else np.full(n, "", object)
    values, inverse = np.unique(cell.astype(str), return_inverse=True)
    pos = np.bincount(inverse[y], minlength=len(values)).astype(np.float64)
    neg = np.bincount(inverse[~y], minlength=len(values)).astype(np.float64)
    shared = (pos > 0) & (neg > 0)
    if not shared.any():
        raise ValueError("no language and length bin holds both good and bad documents: nothing to balance")
    target = np.where(shared, pos / pos[shared].sum() + neg / neg[shared].sum(), 0.0) / 2.0
    count = np.where(y, pos[inverse], neg[inverse])
    return (n / 2.0) * target[inverse] / count


@dataclass
class _Features:
    """Everything training needs of a set of documents, computed once (cross-validation slices it)."""

    X: object  # CSR matrix of hashed n-grams
    raw_dense: np.ndarray | None
    keys: np.ndarray  # lang_keys
    lengths: np.ndarray
    seconds: float


def _features(texts, langs, params: HashingParams, dense) -> _Features:
    t0 = time.perf_counter()
    texts = _string_array(texts)
    X = feature_matrix(texts, params)
    raw = dense_features(texts, langs, tuple(dense)) if dense else None
    keys = lang_keys(texts, langs)
    lengths = pc.utf8_length(texts).to_numpy(zero_copy_only=False).astype(np.int64)
    return _Features(X, raw, keys, lengths, time.perf_counter() - t0)


def _fit_head(X, Z, y, w, C: float, seed: int, max_iter: int) -> tuple[Head, int]:
    import scipy.sparse as sp
    from sklearn.linear_model import LogisticRegression

    M = X if Z is None else sp.hstack([X, sp.csr_matrix(Z)], format="csr")
    keep = w > 0
    clf = LogisticRegression(C=C, solver="liblinear", random_state=seed, max_iter=max_iter)
    clf.fit(M[keep], y[keep], sample_weight=w[keep])
    coef = clf.coef_[0]
    nf = X.shape[1]
    return Head(coef[:nf].astype(np.float32), float(clf.intercept_[0]),
                coef[nf:].astype(np.float32)), int(np.max(clf.n_iter_))


def _fit_features(F: _Features, y: np.ndarray, rows: np.ndarray, params: HashingParams, *, balance, dense,
                  dense_scale: float, per_lang: bool, min_lang_docs: int, C: float, seed: int,
                  max_iter: int) -> LinearQualityModel:
    """The model fitted on documents ``rows`` of ``F``."""
    y = y[rows]
    X = F.X[rows]
    keys, lengths = F.keys[rows], F.lengths[rows]
    spec = DenseSpec.fit(F.raw_dense[rows], tuple(dense), dense_scale) if dense else None
    Z = spec.transform(F.raw_dense[rows]) if spec else None
    balance = tuple(balance)
    w = balance_weights(y, keys, lengths, by=balance)
    fallback, iters = _fit_head(X, Z, y, w, C, seed, max_iter)
    heads, lang_counts = {}, {}
    if per_lang:
        for lang in sorted(set(keys.tolist())):
            m = keys == lang
            n_pos, n_neg = int(y[m].sum()), int((~y[m]).sum())
            lang_counts[lang] = [n_pos, n_neg]
            if min(n_pos, n_neg) < min_lang_docs:
                continue
            try:
                wl = balance_weights(y[m], None, lengths[m], by=tuple(f for f in balance if f != "lang"))
            except ValueError:  # no length bin with both classes: this language keeps the fallback weights
                continue
            heads[lang], it = _fit_head(X[m], None if Z is None else Z[m], y[m], wl, C, seed, max_iter)
            iters = max(iters, it)
    info = {"classifier": {"type": "LogisticRegression", "solver": "liblinear", "C": C,
                           "class_weight": "sample weights: " + ("+".join(balance) if balance else "classes")
                           + " balanced", "balance": list(balance), "seed": seed, "max_iter": max_iter,
                           "iterations": iters}}
    if per_lang:
        info["classifier"].update({"per_lang": True, "min_lang_docs": min_lang_docs, "lang_docs": lang_counts})
    return LinearQualityModel(fallback.coef, fallback.intercept, params, info, dense=spec,
                              dense_coef=fallback.dense_coef, heads=heads)


def _decision_features(model: LinearQualityModel, F: _Features, rows: np.ndarray) -> np.ndarray:
    """The model's logits of documents ``rows`` of ``F`` (equal to :meth:`LinearQualityModel.decision_function`
    of their texts)."""
    X = F.X[rows]
    keys = F.keys[rows]
    Z = model.dense.transform(F.raw_dense[rows]) if model.dense is not None else None
    out = X @ model.coef.astype(np.float64) + model.intercept
    if Z is not None:
        out += Z @ model.dense_coef.astype(np.float64)
    for lang, h in model.heads.items():
        m = keys == lang
        if m.any():
            out[m] = X[m] @ h.coef.astype(np.float64) + h.intercept
            if Z is not None:
                out[m] += Z[m] @ h.dense_coef.astype(np.float64)
    return out


def cv_folds(ids, k: int, seed: int = 0) -> np.ndarray:
    """The fold (0 .. k-1) of each document for k-fold cross-validation: documents sorted by
    ``id_hash_unit(id, seed, "cv")`` are dealt to the folds in turn, so the folds differ in size by at most
    one and a document's fold depends only on the set of ids."""
    from dataclean.quality.evaluate import id_hash_unit

    if k < 2:
        raise ValueError(f"cross-validation needs at least 2 folds, not {k}")
    ids = [str(v) for v in (ids.to_pylist() if isinstance(ids, (pa.Array, pa.ChunkedArray)) else list(ids))]
    if len(ids) < k:
        raise ValueError(f"{k}-fold cross-validation needs at least {k} documents (got {len(ids)})")
    order = np.lexsort((np.array(ids, dtype=object).astype(str), id_hash_unit(ids, seed, "cv")))
    folds = np.empty(len(ids), np.int64)
    folds[order] = np.arange(len(ids)) % k
    return folds


def fit(texts, labels, *, langs=None, params: HashingParams | None = None, balance=BALANCE_FACTORS,
        dense=None, dense_scale: float = DENSE_SCALE, per_lang: bool = False, min_lang_docs: int = 20,
        C: float = 4.0, seed: int = 0, max_iter: int = 200, cv: int | None = None, ids=None,
        extra=None) -> tuple[LinearQualityModel, dict]:
    """Fit a model on labelled documents (``labels`` True = good); return it and its training metrics.

    Logistic regression (liblinear, L2 with inverse strength ``C``) with the sample weights of
    :func:`balance_weights` (``balance``: the factors to equalize between the classes, ``()`` for the
    classes only). ``dense``: names of :data:`DENSE_FEATURES` to use beside the n-grams (standardized on the
    training documents, times ``dense_scale``). ``per_lang``: also one weight set per language
    (:func:`lang_keys`) that has ``min_lang_docs`` documents of each class, the fallback weights fitted on
    every document. ``cv``: first ``cv``-fold cross-validation by id hash (:func:`cv_folds`; ``ids``
    required): ``metrics["cv_scores"]`` holds each document's score from the model that did not see it.
    ``extra``: ``(texts, labels, langs, parent_rows)`` of additional training documents (lines of good
    documents) that join the training set of every fold their parent document is in.
    """
    from dataclean.quality.evaluate import roc_auc

    params = params or HashingParams()
    texts = _string_array(texts)
    y = np.asarray(labels).astype(bool)
    if len(y) != len(texts):
        raise ValueError(f"{len(texts)} texts but {len(y)} labels")
    if not y.any() or y.all():
        raise ValueError(f"training needs good and bad documents (got {int(y.sum())} good, {int((~y).sum())} bad)")
    dense = tuple(dense) if dense else ()
    n = len(texts)
    parent = np.arange(n)
    all_texts, all_y, all_langs = texts, y, langs
    if extra is not None and len(extra[0]):
        e_texts, e_y, e_langs, e_parent = extra
        all_texts = pa.concat_arrays([texts, _string_array(e_texts)])
        all_y = np.r_[y, np.asarray(e_y).astype(bool)]
        base = [None] * n if langs is None else _lang_array(langs).to_pylist()
        all_langs = base + (list(e_langs) if e_langs is not None else [None] * len(e_y))
        parent = np.r_[parent, np.asarray(e_parent, np.int64)]
    F = _features(all_texts, all_langs, params, dense)
    kw = dict(balance=balance, dense=dense, dense_scale=dense_scale, per_lang=per_lang,
              min_lang_docs=min_lang_docs, C=C, seed=seed, max_iter=max_iter)
    metrics = {}
    if cv:
        if ids is None:
            raise ValueError("cross-validation needs ids")
        folds = cv_folds(ids, cv, seed)
        scores = np.zeros(n)
        t0 = time.perf_counter()
        for f in range(cv):
            train_rows = np.flatnonzero(folds[parent] != f)
            test_rows = np.flatnonzero(folds == f)
            if not all_y[train_rows].any() or all_y[train_rows].all():
                raise ValueError(f"fold {f + 1} of {cv} leaves one class without training documents; "
                                 "use fewer folds or add documents")
            m = _fit_features(F, all_y, train_rows, params, **kw)
            scores[test_rows] = _decision_features(m, F, test_rows)
        from scipy.special import expit

        metrics.update({"cv_folds": cv, "cv_scores": expit(scores), "cv_seconds": round(time.perf_counter() - t0, 3)})
    t1 = time.perf_counter()
    model = _fit_features(F, all_y, np.arange(len(all_y)), params, **kw)
    t2 = time.perf_counter()
    train_scores = _decision_features(model, F, np.arange(len(all_y)))
    metrics.update({"n_train_pos": int(all_y.sum()), "n_train_neg": int((~all_y).sum()),
                    "n_weights": int(np.count_nonzero(model.coef)) + sum(int(np.count_nonzero(h.coef))
                                                                         for h in model.heads.values()),
                    "train_auc": roc_auc(train_scores, all_y), "featurize_seconds": round(F.seconds, 3),
                    "fit_seconds": round(t2 - t1, 3), "balance": list(balance), "dense": list(dense),
                    "per_lang": sorted(model.heads)})
    model.metrics.update({k: v for k, v in metrics.items() if k != "cv_scores"})
    return model, metrics


def train(pos_texts, neg_texts, *, params: HashingParams | None = None, C: float = 4.0, seed: int = 0,
          max_iter: int = 200, balance=(), dense=None, pos_langs=None, neg_langs=None,
          per_lang: bool = False) -> tuple[LinearQualityModel, dict]:
    """Fit a model on good (``pos_texts``) and bad (``neg_texts``) documents: :func:`fit` with the classes
    balanced and nothing else by default (``balance=()``), as in format version 1. The model learns whatever
    separates the two sets, source style and length included (``benchmarks/quality_auc.py`` measures how
    much) unless ``balance`` names ``lang`` and ``length``."""
    pos, neg = _string_array(pos_texts), _string_array(neg_texts)
    if not len(pos) or not len(neg):
        raise ValueError(f"training needs good and bad documents (got {len(pos)} good, {len(neg)} bad)")
    langs = None
    if pos_langs is not None or neg_langs is not None:
        langs = (list(pos_langs) if pos_langs is not None else [None] * len(pos)) + \
                (list(neg_langs) if neg_langs is not None else [None] * len(neg))
    y = np.r_[np.ones(len(pos), bool), np.zeros(len(neg), bool)]
    return fit(pa.concat_arrays([pos, neg]), y, langs=langs, params=params, balance=balance, dense=dense,
               per_lang=per_lang, C=C, seed=seed, max_iter=max_iter)


#: Bounds beyond which :func:`class_differences` warns.
MAX_LANG_TV = 0.2
MAX_MEDIAN_LENGTH_RATIO = 2.0


def _mix(keys: np.ndarray) -> str:
    values, counts = np.unique(keys.astype(str), return_counts=True)
    order = np.lexsort((values, -counts))
    shown = [f"{values[i]} {100 * counts[i] / counts.sum():.0f}%" for i in order[:3]]
    return ", ".join(shown) + (", …" if len(values) > 3 else "")


def class_differences(labels, langs, lengths, sources=None) -> list[str]:
    """One warning line (without the ``warning:`` prefix) for each way the good and bad documents differ
    beyond a bound, so that a classifier could separate them without learning quality:

    * language: total-variation distance of the two language distributions above :data:`MAX_LANG_TV`;
    * length: ratio of the median lengths (characters) above :data:`MAX_MEDIAN_LENGTH_RATIO`;
    * source: both classes have documents with a known ``source`` and no source has both.
    """
    y = np.asarray(labels).astype(bool)
    keys = np.asarray(langs, dtype=object).astype(str)
    lengths = np.asarray(lengths, np.float64)
    out = []
    if y.any() and (~y).any():
        values = np.unique(keys)
        p = np.array([(keys[y] == v).mean() for v in values])
        q = np.array([(keys[~y] == v).mean() for v in values])
        tv = 0.5 * float(np.abs(p - q).sum())
        if tv > MAX_LANG_TV:
            out.append(f"the good and bad documents differ in language (total-variation distance {tv:.2f} > "
                       f"{MAX_LANG_TV:g}; good: {_mix(keys[y])}; bad: {_mix(keys[~y])}): the model can learn the "
                       "language instead of quality; add good and bad documents of each language, keep "
                       "--balance lang or train --per-lang")
        mg, mb = float(np.median(lengths[y])), float(np.median(lengths[~y]))
        ratio = max(mg, mb) / max(min(mg, mb), 1.0)
        if ratio > MAX_MEDIAN_LENGTH_RATIO:
            out.append(f"the good and bad documents differ in length (median {mg:.0f} vs {mb:.0f} characters, "
                       f"ratio {ratio:.1f} > {MAX_MEDIAN_LENGTH_RATIO:g}): the model can learn length instead of "
                       "quality; add " + ("short good and long bad" if mg > mb else "long good and short bad")
                       + " documents, keep --balance length" + (" or use --add-good-lines" if mg > mb else ""))
    if sources is not None and y.any() and (~y).any():
        src = np.array([None if v in (None, "") else str(v) for v in sources], dtype=object)
        good = {v for v in src[y] if v is not None}
        bad = {v for v in src[~y] if v is not None}
        if good and bad and not good & bad:
            def names(s):
                s = sorted(s)
                return ", ".join(s[:5]) + (", …" if len(s) > 5 else "")
            out.append(f"the good and bad documents share no source (good: {names(good)}; bad: {names(bad)}): "
                       "the model can learn the source instead of quality; add good and bad documents of the "
                       "same sources")
    return out


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


__all__ = ["LinearQualityModel", "HashingParams", "DenseSpec", "Head", "ModelFileError", "train", "fit", "load",
           "hashed_ngrams", "feature_matrix", "dense_features", "lang_keys", "balance_weights", "cv_folds",
           "class_differences", "probe_digest", "document_lines", "DENSE_FEATURES", "DEFAULT_DENSE",
           "FORMAT", "FORMAT_VERSION", "READ_VERSIONS"]
