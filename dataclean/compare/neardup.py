"""Near-duplicate rates of a sample, in memory: within the candidate and of the candidate against the reference.

The shingles, signatures and LSH bands are :mod:`dataclean.dedup.minhash`'s, with the default pipeline's
``minhash_dedup`` parameters (word 5-grams, character 5-grams for Han and kana, 128 permutations, seed 1,
bands × rows from :func:`~dataclean.dedup.minhash.optimal_bands` at the threshold). Every candidate pair that
shares a band is checked with the exact Jaccard similarity of the two shingle sets; a pair is a duplicate at
``>= threshold`` (0.8). Documents without a shingle (only punctuation or emoji) are left out of both rates.

* **Self-duplicate rate**: the share of the candidate's documents that a dedup pass would remove: documents
  minus connected components of the verified duplicate graph, over documents. In each band bucket every
  member is checked against the bucket's first member (a star, as the pipeline's global step does), so the
  cost stays linear in the bucket size even for a collapsed candidate made of a few repeated templates.
* **Duplicate rate against the reference**: the share of the candidate's documents that have a verified
  duplicate among the reference's documents (at most ``max_checks`` reference documents are checked per
  candidate document and band).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

from dataclean.dedup.minhash import band_hashes, optimal_bands, shingle_hashes, shingle_text, signatures

__all__ = ["MinHashSample", "self_duplicate_rate", "reference_duplicate_rate"]


class MinHashSample:
    """Shingle sets, signatures and band hashes of one side's documents."""

    def __init__(self, texts: pa.Array, threshold: float = 0.8, num_perm: int = 128, seed: int = 1,
                 word_ngram: int = 5, char_ngram: int = 5):
        self.threshold = threshold
        values, offsets = shingle_hashes(shingle_text(texts), word_ngram, char_ngram)
        self.values, self.offsets = values, offsets
        self.n = len(offsets) - 1
        self.has_shingles = np.diff(offsets) > 0
        bands, rows = optimal_bands(threshold, num_perm)
        sigs = signatures(values, offsets, num_perm, seed)
        self.bands = band_hashes(sigs, bands, rows)  # (n, bands)
        self._sets: dict[int, np.ndarray] = {}

    def shingle_set(self, i: int) -> np.ndarray:
        s = self._sets.get(i)
        if s is None:
            s = np.unique(self.values[self.offsets[i]:self.offsets[i + 1]])
            self._sets[i] = s
        return s


def jaccard(a: np.ndarray, b: np.ndarray) -> float:
    """Exact Jaccard similarity of two sorted arrays of distinct values."""
    if len(a) == 0 and len(b) == 0:
        return 0.0
    inter = len(np.intersect1d(a, b, assume_unique=True))
    return inter / (len(a) + len(b) - inter)


def _find(parent: np.ndarray, i: int) -> int:
    while parent[i] != i:
        parent[i] = parent[parent[i]]
        i = parent[i]
    return i


def self_duplicate_rate(side: MinHashSample) -> tuple[float, int, list[tuple[int, int, float]]]:
    """``(rate, duplicates, examples)``: the share of documents with shingles that dedup would remove, their
    number, and up to 5 verified pairs ``(doc, duplicate of, jaccard)``."""
    live = np.flatnonzero(side.has_shingles)
    if len(live) == 0:
        return 0.0, 0, []
    parent = np.arange(side.n)
    checked: set[tuple[int, int]] = set()
    examples: list[tuple[int, int, float]] = []
    for j in range(side.bands.shape[1]):
        h = side.bands[live, j]
        order = np.lexsort((live, h))
        hs, docs = h[order], live[order]
        starts = np.flatnonzero(np.r_[True, hs[1:] != hs[:-1]])
        sizes = np.diff(np.r_[starts, len(hs)])
        for s, size in zip(starts[sizes > 1], sizes[sizes > 1]):
            rep = int(docs[s])
            for other in docs[s + 1:s + size]:
                other = int(other)
                a, b = _find(parent, rep), _find(parent, other)
                if a == b or (rep, other) in checked:
                    continue
                checked.add((rep, other))
                sim = jaccard(side.shingle_set(rep), side.shingle_set(other))
                if sim >= side.threshold:
                    parent[max(a, b)] = min(a, b)
                    if len(examples) < 5:
                        examples.append((other, rep, sim))
    roots = {_find(parent, int(i)) for i in live}
    dups = len(live) - len(roots)
    return dups / len(live), dups, examples


def reference_duplicate_rate(cand: MinHashSample, ref: MinHashSample, max_checks: int = 3
                             ) -> tuple[float, int, list[tuple[int, int, float]]]:
    """``(rate, duplicates, examples)``: the share of the candidate's documents (with shingles) that have a
    verified near-duplicate in the reference, their number, and up to 5 pairs ``(cand doc, ref doc, jaccard)``."""
    live_c = np.flatnonzero(cand.has_shingles)
    live_r = np.flatnonzero(ref.has_shingles)
    if len(live_c) == 0:
        return 0.0, 0, []
    found = np.zeros(cand.n, dtype=bool)
    checked: set[tuple[int, int]] = set()
    examples: list[tuple[int, int, float]] = []
    for j in range(min(cand.bands.shape[1], ref.bands.shape[1])):
        rh = ref.bands[live_r, j]
        order = np.lexsort((live_r, rh))
        rh_sorted, rdocs = rh[order], live_r[order]
        ch = cand.bands[live_c, j]
        lo = np.searchsorted(rh_sorted, ch, side="left")
        hi = np.minimum(np.searchsorted(rh_sorted, ch, side="right"), lo + max_checks)
        for ci, a, b in zip(live_c[hi > lo], lo[hi > lo], hi[hi > lo]):
            ci = int(ci)
            if found[ci]:
                continue
            for ri in rdocs[a:b]:
                ri = int(ri)
                if (ci, ri) in checked:
                    continue
                checked.add((ci, ri))
                sim = jaccard(cand.shingle_set(ci), ref.shingle_set(ri))
                if sim >= cand.threshold:
                    found[ci] = True
                    if len(examples) < 5:
                        examples.append((ci, ri, sim))
                    break
    dups = int(found.sum())
    return dups / len(live_c), dups, examples
