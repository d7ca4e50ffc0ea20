"""Semantic dedup (``semantic_dedup``): the arithmetic on hand-made vectors with exact expected values, then the
stage end to end through the CLI with a real embedding model.

The hand-made vectors use float16 numbers whose products are exact, so the cosines below are exact numbers:
``C1 = 1 - 2**-9`` with ``S1`` its float16 sine, ``C2 = 1 - 2**-7`` with ``S2``.
"""
from __future__ import annotations

from fractions import Fraction

import numpy as np
import pyarrow as pa
import pytest

from dataclean.dedup import semantic as sem
from dataclean.stages.dedup_semantic import SemanticDedup, _dedup_clusters, _f16_column, _global_sample, keep_order

C1, S1 = 0.998046875, 0.062469482421875  # cos(3.58 deg) in float16
C2, S2 = 0.9921875, 0.124755859375  # cos(7.16 deg)
C3, S3 = 0.99609375, 0.08831787109375  # cos(5.07 deg)


def rows(*vectors) -> np.ndarray:
    """float16 rows widened to float32, as the stage hands them to the functions."""
    return np.array(vectors, dtype=np.float16).astype(np.float32)


# ------------------------------------------------------------------------------------------------ exactness

def test_cosines_are_exact_whatever_the_order_of_summation():
    rng = np.random.default_rng(5)
    x = sem.normalized_f16(rng.standard_normal((6, 384))).astype(np.float32)
    got = sem.exact_pairs(x, x, [0, 1, 2], [3, 4, 5])
    for (i, j), value in zip([(0, 3), (1, 4), (2, 5)], got):
        exact = sum(Fraction(float(a)) * Fraction(float(b)) for a, b in zip(x[i], x[j]))
        assert value == float(exact)  # (exactly representable: float() does not round it)
    # the float64 matrix product (BLAS, any blocking) gives the same bits
    assert np.array_equal((x.astype(np.float64) @ x.astype(np.float64).T)[[0, 1, 2], [3, 4, 5]], got)


def test_normalized_f16_passes_unit_rows_through_and_fixes_others():
    unit = np.array([[1.0, 0.0], [C1, S1]], np.float16)
    assert sem.normalized_f16(unit) is unit  # bit for bit, no copy
    fixed = sem.normalized_f16(np.array([[3.0, 4.0], [0.0, 0.0]], np.float16))
    assert fixed.tolist() == [[0.60009765625, 0.7998046875], [0.0, 0.0]]  # float16(0.6), float16(0.8); zero stays


def test_default_clusters_is_the_ceiling_of_the_square_root():
    assert [sem.default_clusters(n) for n in (0, 1, 2, 10, 999_999, 1_000_000, 1_000_001)] == \
        [1, 1, 2, 4, 1000, 1000, 1001]


# ------------------------------------------------------------------------------------------------ k-means

A, B = C2, S2
GROUPS = [  # three groups around e1, e2, e3: each group's sum points exactly along its axis
    [(A, B, 0), (A, -B, 0), (A, 0, B), (A, 0, -B)],
    [(B, A, 0), (-B, A, 0), (0, A, B), (0, A, -B)],
    [(B, 0, A), (-B, 0, A), (0, B, A), (0, -B, A)],
]


def test_kmeans_finds_the_three_groups_with_exact_centroids_and_cosines():
    x = rows(*[GROUPS[g][i] for i in range(4) for g in range(3)])  # interleaved: rows 0, 1, 2 are the initial centroids
    fit = sem.kmeans(x, 3, max_iter=10, tol=0.0)
    assert fit.labels.tolist() == [0, 1, 2] * 4
    assert fit.centroids.tolist() == [[1, 0, 0], [0, 1, 0], [0, 0, 1]]
    assert fit.cosines.tolist() == [A] * 12
    assert (fit.iterations, fit.converged) == (1, True)


def test_kmeans_drops_clusters_it_cannot_fill():
    x = rows((1, 0, 0), (1, 0, 0), (0, 1, 0), (0, 0, 1), (0, 1, 0))
    fit = sem.kmeans(x, 5, max_iter=5)
    assert len(fit.centroids) == 3  # three distinct rows
    assert fit.labels.tolist() == [0, 0, 1, 2, 1]


def test_assign_breaks_an_exact_tie_by_the_smallest_centroid():
    x = rows((1, 0, 0), (0, 0, 1))
    labels, cos = sem.assign(x, np.array([(C1, -S1, 0), (C1, S1, 0), (0, S1, C1)], np.float16))
    assert labels.tolist() == [0, 2]  # row 0 is at C1 from centroids 0 and 1
    assert cos.tolist() == [C1, C1]


def test_assign_equals_a_float64_brute_force_on_random_vectors():
    rng = np.random.default_rng(11)
    x = sem.normalized_f16(rng.standard_normal((3000, 64))).astype(np.float32)
    c = sem.normalized_f16(rng.standard_normal((40, 64)))
    labels, cos = sem.assign(x, c)
    full = x.astype(np.float64) @ c.astype(np.float64).T
    assert labels.tolist() == full.argmax(axis=1).tolist()
    assert cos.tolist() == full.max(axis=1).tolist()


# ------------------------------------------------------------------------------------------------ greedy

def test_greedy_removes_against_kept_documents_only():
    x = rows((1, 0, 0, 0),     # 0: kept (first)
             (C1, S1, 0, 0),   # 1: at C1 from 0: removed
             (C2, S2, 0, 0),   # 2: at C2 < 0.995 from 0, at 0.998 from 1, which is removed: kept
             (0, 0, 1, 0),     # 3: unrelated: kept
             (C2, S2, 0, 0),   # 4: a copy of 2 (kept): removed
             (C1, -S1, 0, 0),  # 5: at C1 from 0, at 0.989 from 2: removed as 0's
             (C3, 0, S3, 0))   # 6: at C3 from 0
    for block in (1, 2, 1024):  # (the blocks never change the answer)
        rep, val = sem.greedy_duplicates(x, 0.995, block)
        assert rep.tolist() == [-1, 0, -1, -1, 2, 0, 0]
        assert val[[1, 4, 5, 6]].tolist() == [C1, C2 * C2 + S2 * S2, C1, C3]
        assert np.isnan(val[[0, 2, 3]]).all()
    # SemDeDup's own rule compares with every earlier member, removed ones too: it would remove 2 (as 1's)
    assert C1 * C2 + S1 * S2 >= 0.995


def test_greedy_equals_a_brute_force_of_the_rule_for_any_block_size():
    rng = np.random.default_rng(3)
    base = sem.normalized_f16(rng.standard_normal((400, 32))).astype(np.float32)
    src = rng.integers(0, 400, 150)
    noise = rng.uniform(0.0005, 0.02, (150, 1)).astype(np.float32)
    copies = sem.normalized_f16(base[src] + noise * rng.standard_normal((150, 32)).astype(np.float32))
    x = np.concatenate([base, copies.astype(np.float32)])[rng.permutation(550)]
    sims = x.astype(np.float64) @ x.astype(np.float64).T
    kept, want = [], []
    for j in range(len(x)):
        s = sims[j, kept] if kept else np.zeros(0)
        if len(s) and s.max() >= 0.999:
            want.append(kept[int(s.argmax())])
        else:
            want.append(-1)
            kept.append(j)
    for block in (1, 7, 64, 4096):
        rep, _ = sem.greedy_duplicates(x, 0.999, block)
        assert rep.tolist() == want
    assert sum(w >= 0 for w in want) > 50  # (the rule had work)


def test_a_cluster_of_copies_keeps_the_first_and_compares_each_copy_once():
    x = rows(*([(C2, S2, 0, 0)] * 3000))
    rep, val = sem.greedy_duplicates(x, 0.99, 1024)
    assert rep.tolist() == [-1] + [0] * 2999
    assert val[1:].tolist() == [C2 * C2 + S2 * S2] * 2999


# ------------------------------------------------------------------------------------------------ keep order

def test_keep_orders():
    ids = np.array(["b", "a", "c", "d"], dtype=object)
    q = np.array([0.5, 0.5, np.nan, 0.9])
    chars = np.array([100, 100, 500, 10])
    cos = np.array([0.7, 0.9, 0.8, 0.7])
    h = np.array([2, 3, 0, 1], np.uint64)
    assert keep_order("best", ids, q, chars, cos, h).tolist() == [3, 1, 0, 2]  # quality, then length, then id
    assert keep_order("hard", ids, q, chars, cos, h).tolist() == [0, 3, 2, 1]  # farthest first; 0.7: b before d
    assert keep_order("easy", ids, q, chars, cos, h).tolist() == [1, 2, 0, 3]
    assert keep_order("random", ids, q, chars, cos, h).tolist() == [2, 3, 0, 1]


# ------------------------------------------------------------------------------------------------ the cap

def test_an_oversized_cluster_is_split_by_kmeans_then_into_runs():
    x = rows(*([(1, 0, 0)] * 4 + [(0, 1, 0)] * 4 + [(0, 0, 1)] * 4))
    # 12 rows over a cap of 4: 6 clusters asked, 3 distinct rows: the three groups
    assert sem.split_cluster(x, np.arange(12), 4, 10, 0.0).tolist() == [0] * 4 + [1] * 4 + [2] * 4
    order = np.r_[8:12, 0:8]  # (the hash order decides the initial centroids, so their numbering)
    assert sem.split_cluster(x, order, 4, 10, 0.0).tolist() == [1] * 4 + [2] * 4 + [0] * 4
    same = rows(*([(1, 0, 0)] * 10))  # identical rows: k-means cannot split them; runs of 4 in hash order
    assert sem.split_cluster(same, np.arange(10)[::-1], 4, 10, 0.0).tolist() == [2, 2, 1, 1, 1, 1, 0, 0, 0, 0]


def cluster_table(vectors, ids, cluster=0, chars=None):
    n = len(vectors)
    x16 = np.array(vectors, np.float16)
    return pa.table({"cluster": pa.array([cluster] * n, pa.int32()), "doc_key": pa.array(range(n), pa.int64()),
                     "id": pa.array(ids), "cos": pa.array([1.0] * n), "h": pa.array(range(n), pa.uint64()),
                     "n_chars": pa.array(chars or [100] * n, pa.int64()), "q": pa.nulls(n, pa.float64()),
                     "source": pa.array(["web"] * n), "lang": pa.array(["en"] * n), "embedding": _f16_column(x16)})


def test_capped_cluster_pieces_are_deduplicated_apart():
    vectors = [(1, 0, 0, 0), (1, 0, 0, 0), (C1, S1, 0, 0), (0, 0, 1, 0), (0, 0, 1, 0), (0, 0, C1, S1)]
    stage = SemanticDedup(eps=0.005, max_cluster_size=3)
    removed, members = _dedup_clusters(stage, cluster_table(vectors, ["a1", "a2", "a3", "b1", "b2", "b3"]))
    m = members[0]
    # ceil(2 * 6 / 3) = 4 clusters inside: {a1, a2}, {a3}, {b1, b2}, {b3} (a3 and b3 are alone in a piece, so
    # they are kept although at C1 from a1 and b1: the price of the cap)
    assert m.column("subcluster").to_pylist() == [0, 0, 1, 2, 2, 3]
    assert m.column("kept").to_pylist() == [True, False, True, True, False, True]
    assert m.column("dup_of").to_pylist() == [None, "a1", None, None, "b1", None]
    assert m.column("similarity").to_pylist() == [None, 1.0, None, None, 1.0, None]
    r = removed[0]
    assert r.column("doc_key").to_pylist() == [1, 4]
    assert r.column("rule").to_pylist() == ["semantic_duplicate"] * 2
    assert r.column("threshold").to_pylist() == [0.995, 0.995]
    assert r.column("detail").to_pylist() == [
        "k-means cluster 0 of 6 documents, piece 1 of 4 (2 documents); kept order best",
        "k-means cluster 0 of 6 documents, piece 3 of 4 (2 documents); kept order best"]
    # without the cap, one piece: a3 and b3 go too
    removed, members = _dedup_clusters(SemanticDedup(eps=0.005), cluster_table(vectors, ["a1", "a2", "a3", "b1", "b2", "b3"]))
    assert members[0].column("dup_of").to_pylist() == [None, "a1", "a1", None, "b1", "b1"]


def test_the_sample_is_the_smallest_hashes_however_the_tasks_cut_the_corpus(tmp_path):
    import pyarrow.parquet as pq

    rng = np.random.default_rng(2)
    h = rng.integers(0, 1 << 63, 500, dtype=np.int64).astype(np.uint64)
    x16 = sem.normalized_f16(rng.standard_normal((500, 8)))

    def task_file(name, rows_):
        order = rows_[np.lexsort((rows_, h[rows_]))]  # (a task's file: sorted by hash, then doc_key)
        path = str(tmp_path / name)
        pq.write_table(pa.table({"h": pa.array(h[order]), "doc_key": pa.array(order, pa.int64()),
                                 "embedding": _f16_column(x16[order])}), path, row_group_size=16)
        return path

    want = x16[np.argsort(h, kind="stable")[:100]]
    one = _global_sample([task_file("all.parquet", np.arange(500))], 100)
    three = _global_sample([task_file(f"t{i}.parquet", np.arange(i, 500, 3)) for i in range(3)], 100)
    assert np.array_equal(one, want) and np.array_equal(three, want)


def test_parameters_are_checked_in_one_line():
    for kwargs, message in [({"eps": 1.0}, "semantic_dedup.eps must be a number in [0, 1)"),
                            ({"keep": "longest"}, "semantic_dedup.keep must be one of best, hard, easy, random"),
                            ({"n_clusters": 0}, "semantic_dedup.n_clusters must be an integer from 1"),
                            ({"max_cluster_size": 1}, "semantic_dedup.max_cluster_size must be an integer from 2")]:
        with pytest.raises(ValueError, match=message.replace("[", r"\[").replace(")", r"\)")):
            SemanticDedup(**kwargs)
