"""SemDeDup's two steps on arrays of embeddings: spherical k-means, then the greedy removal of near-identical
embeddings inside each cluster (Abbas et al. 2023, "SemDeDup: Data-efficient learning at web-scale through
semantic deduplication", arXiv:2303.09540). The stage (:mod:`dataclean.stages.dedup_semantic`) streams the
corpus through these functions.

Exact cosines, so that nothing depends on BLAS, threads, matrix shapes or the CPU
---------------------------------------------------------------------------------
Embeddings are L2-normalised float16 (:mod:`dataclean.embed.vectors`); the functions here take them widened
to float32 (exactly). A float16 number is a multiple of 2**-24 with 11 significant bits, so the product of
two is a multiple of 2**-48 with at most 22 significant bits, and every partial sum of the products of two
unit vectors is a multiple of 2**-48 smaller than 2 in size (Cauchy-Schwarz): all of them fit float64's 53
bits. Their dot product computed in float64 is therefore **exact**, in any order of summation, with or
without FMA — numpy's ``einsum``, a BLAS ``dgemm`` in any number of threads and blocks give the same bits.
Every number this module decides on or reports (a document's cosine to its centroid, to the document it
duplicates) is such an exact value. Centroids are rounded to float16 too, so they are exact inputs.

Where a float64 product of all pairs would cost too much (assigning every document to every centroid),
float32 products screen first: the float32 dot product of two such vectors of ``d`` components differs from
the exact one by at most about ``d * 2**-24`` (the classical bound for any summation order, Higham, "Accuracy
and Stability of Numerical Algorithms", 2nd ed., section 3.1); :func:`screen_margin` is twice that. Of the
centroids of a row, the exactly nearest one is among those whose float32 cosine is within two margins of the
float32 maximum, so only when there are several does the exact cosine decide. (OpenBLAS gives other float32
bits for a row of a 7 x 5 product than for the same row of a 50,000 x 1,000 one: measured here.)

numpy, not faiss: faiss's k-means decides in float32, and its search is no faster than numpy's matrix product
on this machine (assigning 50,000 x 384 vectors to 1,000 centroids: faiss 0.25 s, numpy 0.22 s on 2 threads;
0.46 s and 0.38 s on one). ``benchmarks/bench_semdedup.py --compare-faiss`` fits both on one sample: the
figures are in benchmarks/README.md.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

#: Rows of the float32 products computed at once (a ``ROW_BLOCK`` x k matrix).
ROW_BLOCK = 4096
#: Rows of float64 products computed at once by :func:`exact_pairs` (each holds ``d`` products).
PAIR_BLOCK = 8192


def screen_margin(dim: int) -> float:
    """How far a float32 cosine may be from the exact one, with room to spare: twice ``d * 2**-24`` times the
    largest product of norms of two rows :func:`normalized_f16` lets through (within 2**-8 of 1)."""
    return 2.0 * dim * 2.0 ** -24 * (1 + 2.0 ** -8) ** 2 + 2.0 ** -24


def normalized_f16(vectors: np.ndarray) -> np.ndarray:
    """Rows as L2-normalised float16, the form everything here expects. float16 rows whose norm is within
    float16 rounding of 1 (what the ``embedding`` column holds) pass through bit for bit; other rows are
    divided by their norm (in float64) and rounded. A zero row stays zero."""
    v = np.ascontiguousarray(vectors)
    wide = v.astype(np.float64)
    norms = np.sqrt(np.einsum("ij,ij->i", wide, wide))
    if v.dtype == np.float16:
        fix = (norms > 0) & (np.abs(norms - 1.0) > 2.0 ** -8)
        if not fix.any():
            return v
        out = v.copy()
    else:
        fix = norms > 0
        out = np.zeros(v.shape, np.float16)
    out[fix] = (wide[fix] / norms[fix, None]).astype(np.float16)
    return out


def exact_pairs(a: np.ndarray, b: np.ndarray, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The exact cosines (float64) of the rows ``a[u[i]]`` and ``b[v[i]]`` (float16 values, module docstring)."""
    u, v = np.asarray(u, np.int64), np.asarray(v, np.int64)
    out = np.empty(len(u), np.float64)
    for s in range(0, len(u), PAIR_BLOCK):
        e = min(len(u), s + PAIR_BLOCK)
        out[s:e] = np.einsum("ij,ij->i", a[u[s:e]].astype(np.float64), b[v[s:e]].astype(np.float64))
    return out


def exact_rows(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The exact cosines of the rows of ``a`` with the same rows of ``b``."""
    idx = np.arange(len(a), dtype=np.int64)
    return exact_pairs(a, b, idx, idx)


# ------------------------------------------------------------------------------------------------ k-means

def assign(x: np.ndarray, c16: np.ndarray, with_cosines: bool = True) -> tuple[np.ndarray, np.ndarray | None]:
    """The nearest centroid of every row of ``x`` (the largest exact cosine; of equal ones, the smallest
    index) and that cosine (None without ``with_cosines``). ``x`` (n, d) float32 and ``c16`` (k, d) are unit
    rows of float16 values. Float32 products screen, :data:`ROW_BLOCK` rows at a time (module docstring)."""
    n, d = x.shape
    labels = np.zeros(n, np.int64)
    if n == 0 or len(c16) == 0:
        return labels.astype(np.int32), np.zeros(n, np.float64)
    c32 = c16.astype(np.float32)
    margin = screen_margin(d)
    for s in range(0, n, ROW_BLOCK):
        e = min(n, s + ROW_BLOCK)
        sims = x[s:e] @ c32.T
        near = sims >= (sims.max(axis=1) - 2 * margin)[:, None]
        best = near.argmax(axis=1)  # (the only centroid near the maximum, where there is one: 0.1 s less per
        ties = np.flatnonzero(near.sum(axis=1) > 1)  # 100,000 x 1,000 than argmax over the cosines)
        if len(ties):  # several centroids within two margins: the exact cosines decide
            r, c = np.nonzero(near[ties])
            rows = ties[r]
            exact = exact_pairs(x, c32, rows + s, c)
            order = np.lexsort((c, -exact, rows))  # per row: the largest exact cosine, then the smallest index
            first = order[np.r_[True, rows[order][1:] != rows[order][:-1]]]
            best[rows[first]] = c[first]
        labels[s:e] = best
    labels = labels.astype(np.int32)
    return labels, (exact_pairs(x, c32, np.arange(n), labels) if with_cosines else None)


def centroids_of(x: np.ndarray, labels: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The normalised sum of each cluster's rows, rounded to float16, and the clusters' sizes; an empty
    cluster's centroid is zero. The sums are exact in float64 (at most 2**29 terms of 24 fractional bits),
    so they depend neither on the order of the rows nor on how the sparse product adds them (a sparse
    cluster-by-row matrix times the rows: 0.19 s for 100,000 x 384 rows in 1,000 clusters, where sorting
    the rows and ``np.add.reduceat`` took 0.64 s)."""
    from scipy.sparse import csr_matrix

    sizes = np.bincount(labels, minlength=k).astype(np.int64)
    sums = np.zeros((k, x.shape[1]), np.float64)
    for s in range(0, len(x), 4 * ROW_BLOCK):
        e = min(len(x), s + 4 * ROW_BLOCK)
        member = csr_matrix((np.ones(e - s), (labels[s:e], np.arange(e - s))), shape=(k, e - s))
        sums += member @ np.asarray(x[s:e], np.float64)
    norms = np.sqrt(np.einsum("ij,ij->i", sums, sums))
    out = np.zeros(sums.shape, np.float16)
    ok = norms > 0
    out[ok] = (sums[ok] / norms[ok, None]).astype(np.float16)
    return out, sizes


@dataclass
class KMeansFit:
    centroids: np.ndarray  # (k, d) unit float16 rows; clusters that ended empty are dropped
    labels: np.ndarray  # (n,) int32: the cluster of each fitted row
    cosines: np.ndarray  # (n,) float64: its exact cosine to that centroid
    iterations: int
    converged: bool

    @property
    def mean_cosine(self) -> float:
        return float(self.cosines.mean()) if len(self.cosines) else 0.0


def kmeans(x: np.ndarray, k: int, max_iter: int = 100, tol: float = 1e-4) -> KMeansFit:
    """Spherical k-means (Dhillon & Modha 2001: assign by cosine, centroid = normalised mean) of the unit rows
    ``x`` (float32 holding float16 values), which come in a random order (the caller's seeded hash order):
    the first ``k`` distinct rows are the initial centroids, as faiss's default initialisation takes ``k``
    random points.

    Lloyd iterations stop after ``max_iter``, or once at most ``tol`` of the rows (a fraction; 0: none) changed
    cluster. A cluster left empty takes the row farthest from its centroid (the smallest cosine, then the
    smallest index) not taken already. Clusters still empty at the end (fewer distinct rows than ``k``) are
    dropped and the others renumbered in order. The same rows give the same answer on any machine."""
    n, d = x.shape
    if n == 0:
        return KMeansFit(np.zeros((0, d), np.float16), np.zeros(0, np.int32), np.zeros(0), 0, True)
    x16 = np.ascontiguousarray(x.astype(np.float16))
    _, first = np.unique(x16.view(np.dtype((np.void, 2 * d))).reshape(-1), return_index=True)
    del x16
    k = max(1, min(int(k), len(first)))
    c16 = x[np.sort(first)[:k]].astype(np.float16)
    # (the sums of each iteration from float64 rows made once when they take at most 128 MiB: 0.1 s less per
    # iteration at 100,000 x 384, where they would take 293 MiB)
    wide = x.astype(np.float64) if x.size * 8 <= 128 << 20 else x
    labels, _ = assign(x, c16, with_cosines=False)
    iterations, converged = 0, False
    for iterations in range(1, int(max_iter) + 1):
        c16, sizes = centroids_of(wide, labels, k)
        empty = np.flatnonzero(sizes == 0)
        if len(empty):
            cos = exact_pairs(x, c16.astype(np.float32), np.arange(n), labels)
            far = np.lexsort((np.arange(n), cos))[:len(empty)]
            c16[empty[:len(far)]] = x[far].astype(np.float16)
        new, _ = assign(x, c16, with_cosines=False)
        changed = int((new != labels).sum())
        labels = new
        if changed <= tol * n:
            converged = True
            break
    cos = exact_pairs(x, c16.astype(np.float32), np.arange(n), labels)
    sizes = np.bincount(labels, minlength=k)
    keep = np.flatnonzero(sizes > 0)
    if len(keep) < k:
        remap = np.full(k, -1, np.int64)
        remap[keep] = np.arange(len(keep))
        c16, labels = c16[keep], remap[labels]
    return KMeansFit(c16, labels.astype(np.int32), cos, iterations, converged)


def split_cluster(x: np.ndarray, hash_order: np.ndarray, max_size: int, max_iter: int, tol: float,
                  depth: int = 0) -> np.ndarray:
    """Piece labels (0, 1, ...) of the rows ``x`` of an oversized cluster, so that no piece has more than
    ``max_size`` rows: k-means again inside it with ``ceil(2 n / max_size)`` clusters, fitted on the rows in
    ``hash_order`` (their seeded random order), and again inside any piece still too large (4 levels at
    most); a piece k-means cannot split (identical vectors) is cut into runs of ``max_size`` rows in
    ``hash_order``. Pieces are numbered in the order of their centroids, depth first."""
    n = len(x)
    if n <= max_size:
        return np.zeros(n, np.int64)
    fit = kmeans(x[hash_order], -(-2 * n // max_size), max_iter, tol) if depth < 4 else None
    if fit is None or len(fit.centroids) < 2:  # nothing to split on: runs in hash order
        labels = np.empty(n, np.int64)
        labels[hash_order] = np.arange(n) // max_size
        return labels
    labels = np.empty(n, np.int64)
    labels[hash_order] = fit.labels
    position = np.empty(n, np.int64)
    position[hash_order] = np.arange(n)
    out = np.empty(n, np.int64)
    nxt = 0
    for c in range(len(fit.centroids)):
        rows = np.flatnonzero(labels == c)
        sub = split_cluster(x[rows], np.argsort(position[rows], kind="stable"), max_size, max_iter, tol, depth + 1)
        out[rows] = nxt + sub
        nxt += int(sub.max()) + 1
    return out


# ------------------------------------------------------------------------------------- the greedy removal

def greedy_duplicates(x: np.ndarray, threshold: float, block: int = 1024) -> tuple[np.ndarray, np.ndarray]:
    """The greedy removal inside one cluster whose unit rows ``x`` (float32 holding float16 values) come in
    keep order, the first the one to keep above all: a row is removed when its exact cosine to a row ranked
    before it **that is kept** reaches ``threshold``. Returns, per row, the position of the kept row it
    duplicates (-1: kept) — the most similar kept row before it, of equal ones the first — and that cosine
    (NaN: kept).

    Rows go in blocks of ``block``, each compared with the rows kept before it and with itself in float32,
    which screens (module docstring): only pairs within :func:`screen_margin` of ``threshold`` get their
    exact cosine. No matrix is larger than ``block`` x the cluster's size, and a removed row is compared with
    nothing after it: a cluster of copies of one text costs one row of products per copy. (float32 products
    screening, float64 for the candidates: 0.03 s for a cluster of 1,000 x 384 on one core; float64 products
    of every pair took 0.07 s.)"""
    n, d = x.shape
    rep = np.full(n, -1, np.int64)
    val = np.full(n, np.nan, np.float64)
    if n < 2:
        return rep, val
    margin = screen_margin(d)
    low = threshold - margin
    kept = np.ones(n, bool)
    kept_pos = np.zeros(0, np.int64)
    kept32 = np.zeros((0, d), np.float32)
    for s in range(0, n, block):
        e = min(n, s + block)
        blk = x[s:e]
        m = e - s
        top = np.full(m, -np.inf)
        prev = np.full(m, -1, np.int64)
        if len(kept_pos):  # the kept rows of earlier blocks
            r, c = np.nonzero(blk @ kept32.T >= low)
            if len(r):
                exact = exact_pairs(blk, kept32, r, c)
                ok = exact >= threshold
                r, c, exact = r[ok], c[ok], exact[ok]
                order = np.lexsort((c, -exact, r))  # per row: the largest cosine, then the earliest kept row
                first = order[np.r_[True, r[order][1:] != r[order][:-1]]] if len(order) else order
                prev[r[first]], top[r[first]] = kept_pos[c[first]], exact[first]
        hit = prev >= 0
        rep[s:e][hit], val[s:e][hit] = prev[hit], top[hit]
        kept[s:e] = ~hit
        own = blk @ blk.T
        src, dst = np.nonzero(own >= low)  # pairs inside the block: src ranked before dst
        ahead = src < dst
        src, dst = src[ahead], dst[ahead]
        if len(src):
            order = np.lexsort((src, dst))
            src, dst = src[order], dst[order]
            f32 = own[src, dst]
            bounds = np.r_[0, np.flatnonzero(np.diff(dst)) + 1, len(dst)]
            for a, b in zip(bounds[:-1].tolist(), bounds[1:].tolist()):  # targets in rank order
                alive = kept[s + src[a:b]]
                if not alive.any():
                    continue
                cand, f = src[a:b][alive], f32[a:b][alive]
                near = f >= f.max() - 2 * margin  # (where the exact maximum is: module docstring)
                cand = cand[near]
                j = int(dst[a])
                exact = exact_pairs(blk, blk, cand, np.full(len(cand), j))
                i = int(np.lexsort((cand, -exact))[0])  # the most similar kept row of the block, then the first
                if exact[i] >= threshold and exact[i] > top[j]:  # (equal: the earlier block's row stays)
                    rep[s + j], val[s + j], top[j] = s + cand[i], exact[i], exact[i]
                    kept[s + j] = False
        new = np.flatnonzero(kept[s:e])
        kept_pos = np.concatenate([kept_pos, s + new])
        kept32 = np.concatenate([kept32, blk[new]])
    return rep, val


def default_clusters(n: int) -> int:
    """Clusters for ``n`` documents when ``n_clusters`` is not given: ``ceil(sqrt(n))``. The work is about
    ``n * k`` products to assign and ``n * n / k`` inside the clusters, least at ``k = sqrt(n)``; at a million
    documents that is NeMo Curator's default of 1,000 clusters."""
    return math.isqrt(int(n) - 1) + 1 if n > 1 else 1
