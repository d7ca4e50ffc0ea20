"""The statistics of ``dataclean compare``: divergences, shared bins, lexical diversity, top n-grams.

Pure functions on numpy arrays and token lists, no I/O.

* :func:`js_divergence`: Jensen-Shannon divergence of two count vectors, base 2, so it lies in [0, 1]
  (0: the same distribution; 1: disjoint supports). ``JS(P, Q) = ½ KL(P ‖ M) + ½ KL(Q ‖ M)`` with
  ``M = ½ (P + Q)``, ``0 · log 0 = 0``.
* :func:`ks_statistic`: the two-sample Kolmogorov-Smirnov statistic ``sup_x |F_a(x) - F_b(x)|`` of the two
  empirical CDFs (equal to ``scipy.stats.ks_2samp(a, b).statistic``), in [0, 1].
* :func:`shared_edges`: bin edges both sides are counted in, from the quantiles of the pooled values, so a
  bin holds about the same share of the pooled sample wherever the mass is (a long-tailed length
  distribution gets fine bins where the documents are, not one bin for 99 % of them). A feature with few
  distinct values (a count, a flag) gets one bin per value.
* :func:`diversity`: distinct-n (Li et al. 2016, *A Diversity-Promoting Objective Function for Neural
  Conversation Models*: distinct n-grams / n-grams) and the mean segmental type-token ratio (MSTTR: the TTR
  of consecutive windows of ``window`` tokens, averaged; Johnson 1944), on a token sample of a size fixed
  by the caller. Distinct-n and TTR depend on the sample size (more text, more repeats), so the two sides
  must be measured on samples of the same number of tokens; MSTTR depends only on the window.
"""
from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from dataclean.dedup.minhash import CJK_CLASS_PY

__all__ = ["js_divergence", "ks_statistic", "shared_edges", "bin_counts", "js_noise_floor", "diversity",
           "top_ngrams", "category_js", "TokenSample"]


def js_divergence(p: Sequence[float], q: Sequence[float]) -> float:
    """Jensen-Shannon divergence (base 2) of two non-negative count or probability vectors of one length.

    >>> js_divergence([1, 0], [0, 1])
    1.0
    >>> js_divergence([2, 2], [1, 1])
    0.0
    """
    p = np.asarray(p, dtype=np.float64)
    q = np.asarray(q, dtype=np.float64)
    if p.shape != q.shape or p.ndim != 1:
        raise ValueError("p and q must be 1-D vectors of the same length")
    if (p < 0).any() or (q < 0).any():
        raise ValueError("counts must not be negative")
    sp, sq = p.sum(), q.sum()
    if sp == 0 or sq == 0:
        raise ValueError("each distribution needs a positive total")
    p, q = p / sp, q / sq
    m = 0.5 * (p + q)

    def kl(a: np.ndarray) -> float:
        nz = a > 0
        return float(np.sum(a[nz] * np.log2(a[nz] / m[nz])))

    js = 0.5 * kl(p) + 0.5 * kl(q)
    return float(min(1.0, max(0.0, js)))


def ks_statistic(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sample Kolmogorov-Smirnov statistic: the largest distance between the empirical CDFs.

    >>> ks_statistic([1, 2, 3, 4], [3, 4, 5, 6])
    0.5
    """
    a = np.sort(np.asarray(a, dtype=np.float64))
    b = np.sort(np.asarray(b, dtype=np.float64))
    if len(a) == 0 or len(b) == 0:
        raise ValueError("both samples need at least one value")
    if np.isnan(a).any() or np.isnan(b).any():
        raise ValueError("samples must not contain NaN")
    x = np.concatenate([a, b])
    # F(x) = share of the sample <= x, evaluated at every observed value (the sup is reached at one of them)
    fa = np.searchsorted(a, x, side="right") / len(a)
    fb = np.searchsorted(b, x, side="right") / len(b)
    return float(np.max(np.abs(fa - fb)))


def shared_edges(ref: np.ndarray, cand: np.ndarray, bins: int = 20) -> tuple[np.ndarray, bool]:
    """``(edges, discrete)`` for counting both samples in the same bins.

    With at most ``bins`` distinct pooled values the feature is *discrete*: one bin per value (edges are the
    midpoints between consecutive values, plus the ends). Otherwise the edges are the pooled quantiles at
    ``0, 1/bins, …, 1`` (duplicates dropped, so a value that fills several quantiles is one bin). The last
    bin is closed on the right (see :func:`bin_counts`).
    """
    pooled = np.concatenate([np.asarray(ref, np.float64), np.asarray(cand, np.float64)])
    if len(pooled) == 0:
        return np.array([0.0, 1.0]), True
    values = np.unique(pooled)
    if len(values) <= bins:
        if len(values) == 1:
            v = values[0]
            return np.array([v - 0.5, v + 0.5]), True
        mids = (values[:-1] + values[1:]) / 2
        first = values[0] - (mids[0] - values[0])
        last = values[-1] + (values[-1] - mids[-1])
        return np.concatenate([[first], mids, [last]]), True
    edges = np.unique(np.quantile(pooled, np.linspace(0.0, 1.0, bins + 1), method="linear"))
    return edges, False


def bin_counts(values: np.ndarray, edges: np.ndarray) -> np.ndarray:
    """Counts of ``values`` in the bins ``[e0, e1), [e1, e2), …, [e_{k-1}, e_k]``; values outside the edges
    go to the first or last bin."""
    values = np.asarray(values, np.float64)
    k = len(edges) - 1
    idx = np.searchsorted(edges, values, side="right") - 1
    idx = np.clip(idx, 0, k - 1)
    return np.bincount(idx, minlength=k).astype(np.int64)


def js_noise_floor(n_bins: int, n_ref: int, n_cand: int) -> float:
    """The JS divergence two samples of these sizes from ONE distribution show on average, to first order:
    ``(k - 1) (1/n_ref + 1/n_cand) / (8 ln 2)`` for ``k`` occupied bins (the bias of the plug-in estimate).
    A measured JS near it says "no difference the sample can see"."""
    if n_ref <= 0 or n_cand <= 0:
        return float("nan")
    return float((max(n_bins, 1) - 1) * (1.0 / n_ref + 1.0 / n_cand) / (8.0 * np.log(2.0)))


def category_js(ref: dict[str, int], cand: dict[str, int]) -> float:
    """JS divergence (base 2) of two categorical count tables over the union of their categories."""
    keys = sorted(set(ref) | set(cand))
    return js_divergence([ref.get(k, 0) for k in keys], [cand.get(k, 0) for k in keys])


_CJK = re.compile(f"[{CJK_CLASS_PY}]")


class TokenSample:
    """A token sample: ``ids`` (int64 index of each token into ``vocab``) and ``doc`` (the document each token
    belongs to, non-decreasing), so n-grams can be counted with numpy and never cross documents."""

    def __init__(self, ids: np.ndarray, doc: np.ndarray, vocab: list[str]):
        self.ids = np.asarray(ids, np.int64)
        self.doc = np.asarray(doc, np.int64)
        self.vocab = vocab

    @classmethod
    def from_docs(cls, docs: Sequence[Sequence[str]]) -> "TokenSample":
        index: dict[str, int] = {}
        ids = [index.setdefault(t, len(index)) for d in docs for t in d]
        doc = np.repeat(np.arange(len(docs)), [len(d) for d in docs])
        return cls(np.array(ids, np.int64), doc, list(index))

    def __len__(self) -> int:
        return len(self.ids)

    def ngram_codes(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """``(codes, starts)``: one int64 code per n-gram inside a document (a bijection of the n token ids,
        base ``len(vocab)``, exact while ``len(vocab) ** n < 2**63``; beyond that a 64-bit mix, where two
        n-grams could share a code with negligible probability) and the position of its first token."""
        m = len(self.ids) - n + 1
        if m <= 0:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        starts = np.flatnonzero(self.doc[:m] == self.doc[n - 1:])
        v = max(len(self.vocab), 1)
        if v ** n < 2 ** 63:
            code = np.zeros(len(starts), np.int64)
            for i in range(n):
                code = code * v + self.ids[starts + i]
        else:
            code = np.zeros(len(starts), np.uint64)
            for i in range(n):
                code = (code ^ self.ids[starts + i].astype(np.uint64)) * np.uint64(0x9E3779B97F4A7C15)
            code = code.view(np.int64)
        return code, starts

    def text(self, start: int, n: int) -> str:
        """The n-gram starting at token ``start``: words joined by spaces, Han characters and kana runs
        joined to each other without one (as they are written)."""
        out = ""
        prev_cjk = False
        for i in self.ids[start:start + n]:
            word = self.vocab[i]
            cjk = bool(_CJK.match(word))
            out += word if not out or (cjk and prev_cjk) else " " + word
            prev_cjk = cjk
        return out


def _as_sample(docs) -> TokenSample:
    return docs if isinstance(docs, TokenSample) else TokenSample.from_docs(docs)


def diversity(docs, window: int = 1000) -> dict[str, float | int]:
    """Lexical diversity of a token sample (a :class:`TokenSample` or one token list per document; n-grams
    never cross documents): ``distinct_1``, ``distinct_2``, ``distinct_3`` (distinct n-grams / n-grams),
    ``ttr`` (MSTTR: the mean type-token ratio of the consecutive windows of ``window`` tokens of the
    concatenated sample, a last partial window dropped; the plain TTR of the whole sample when it is shorter
    than one window) and ``tokens``."""
    ts = _as_sample(docs)
    out: dict[str, float | int] = {"tokens": len(ts)}
    for n in (1, 2, 3):
        codes, _ = ts.ngram_codes(n)
        out[f"distinct_{n}"] = len(np.unique(codes)) / len(codes) if len(codes) else float("nan")
    if len(ts) == 0:
        out["ttr"] = float("nan")
    elif len(ts) < window:
        out["ttr"] = len(np.unique(ts.ids)) / len(ts)
    else:
        k = len(ts) // window
        rows = np.sort(ts.ids[:k * window].reshape(k, window), axis=1)
        types = 1 + np.count_nonzero(rows[:, 1:] != rows[:, :-1], axis=1)
        out["ttr"] = float(np.mean(types / window))
    return out


def top_ngrams(docs, n: int, k: int = 20) -> list[tuple[str, int, float]]:
    """The ``k`` most frequent word ``n``-grams: ``(ngram joined by spaces, count, share of all n-grams)``,
    ties broken by the n-gram text."""
    ts = _as_sample(docs)
    codes, starts = ts.ngram_codes(n)
    if len(codes) == 0:
        return []
    values, first, counts = np.unique(codes, return_index=True, return_counts=True)
    # candidates: everything tied with the k-th largest count or above, then sorted by (-count, text)
    kth = np.sort(counts)[-min(k, len(counts))]
    pick = np.flatnonzero(counts >= kth)
    items = sorted(((-int(counts[i]), ts.text(int(starts[first[i]]), n)) for i in pick))[:k]
    total = len(codes)
    return [(g, -c, -c / total) for c, g in items]
