"""Per-task aggregates of the global step (dataclean/exec/aggregate.py): the map tasks' sums equal the whole
corpus's, and the exact rank cut-off found from score buckets equals a full sort."""
import math
import os

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataclean.exec import aggregate
from dataclean.exec.global_step import GlobalContext
from dataclean.layout import Layout


def test_score_key_orders_like_the_floats():
    xs = np.array([-math.inf, -2.5, -1e-300, -0.0, 0.0, 1e-300, 0.25, 0.5, 0.5000001, 1.0, 7.0, math.inf])
    keys = aggregate.score_key(xs)
    assert np.all(np.diff(keys.astype(object)) >= 0)
    assert keys[3] < keys[4]  # -0.0 before +0.0
    rng = np.random.default_rng(0)
    ys = rng.normal(size=2000) * 10.0 ** rng.integers(-5, 5, size=2000)
    assert np.array_equal(np.argsort(ys, kind="stable"), np.argsort(aggregate.score_key(ys), kind="stable"))
    assert aggregate.score_prefix(np.array([0.5, 0.5 + 1 / 512, 0.75])).tolist() == [0xBFE00, 0xBFE01, 0xBFE80]


@pytest.fixture
def corpus(tmp_path):
    """Three pass-1 tasks of scored documents with many ties (scores on a grid of 1/16), two sources, some
    unscored, some removed by an earlier stage."""
    lay = Layout(str(tmp_path))
    rng = np.random.default_rng(7)
    rows, removed = [], []
    for task in range(3):
        os.makedirs(lay.pass1_dir(task))
        n = 300 + 50 * task
        keys = [(task << 40) + i for i in range(n)]
        ids = [f"doc-{rng.integers(0, 10**9):09d}-{task}-{i}" for i in range(n)]
        scores = np.round(rng.random(n) * 16) / 16
        score_col = pa.array([None if i % 17 == 0 else float(s) for i, s in enumerate(scores)], pa.float64())
        src = ["web" if i % 3 else "books" for i in range(n)]
        toks = rng.integers(1, 1000, size=n)
        t = pa.table({"doc_key": keys, "id": ids, "source": src, "quality_score": score_col, "n_tokens": toks})
        half = t.num_rows // 2  # two docs files per task
        pq.write_table(t.slice(0, half), os.path.join(lay.pass1_dir(task), "docs-00000.parquet"))
        pq.write_table(t.slice(half), os.path.join(lay.pass1_dir(task), "docs-00001.parquet"))
        gone = [k for i, k in enumerate(keys) if i % 11 == 5]
        removed += gone
        rows.append(t.filter(pa.array([i % 11 != 5 for i in range(n)])))
    removed_path = str(tmp_path / "removed.parquet")
    pq.write_table(pa.table({"doc_key": sorted(removed)}), removed_path, row_group_size=64)
    ctx = GlobalContext(None, {}, lay, set(), {}, tasks=[0, 1, 2], executor=None, removed_path=removed_path)
    return ctx, pa.concat_tables(rows)


def test_totals_equal_the_whole_corpus(corpus):
    ctx, alive = corpus
    t = aggregate.run_map(ctx, "totals", "source")
    got = {}
    for g, n, tok in zip(*(t.column(c).to_pylist() for c in ("group", "docs", "tokens"))):
        got[g] = (got.get(g, (0, 0))[0] + n, got.get(g, (0, 0))[1] + tok)
    want = {}
    for src, tok in zip(alive.column("source").to_pylist(), alive.column("n_tokens").to_pylist()):
        want[src] = (want.get(src, (0, 0))[0] + 1, want.get(src, (0, 0))[1] + tok)
    assert got == want
    assert sum(n for n, _ in got.values()) == alive.num_rows == 1050 - 95  # 300 + 350 + 400 docs, 27 + 32 + 36 removed


@pytest.mark.parametrize("fraction", [0.001, 0.37, 0.5, 0.999, 1.0])
def test_rank_cutoff_equals_a_full_sort(corpus, fraction):
    ctx, alive = corpus
    hist = aggregate.run_map(ctx, "score_histogram", "source", "quality_score")
    scored = alive.filter(pa.compute.is_valid(alive.column("quality_score")))
    keeps = {}
    for src in ("web", "books"):
        n = scored.filter(pa.compute.equal(scored.column("source"), src)).num_rows
        keeps[src] = math.ceil(fraction * n)
    cuts = aggregate.rank_cutoffs(ctx, hist, keeps, "quality_score", "source")
    for src, keep in keeps.items():
        ranked = sorted(((s, i) for s, i, g in zip(scored.column("quality_score").to_pylist(),
                                                   scored.column("id").to_pylist(),
                                                   scored.column("source").to_pylist()) if g == src),
                        key=lambda r: (-r[0], r[1]))
        assert cuts[src] == ranked[keep - 1]


def test_rank_zero_has_no_cutoff_and_too_high_a_rank_is_an_error(corpus):
    ctx, _ = corpus
    hist = aggregate.run_map(ctx, "score_histogram", "source", "quality_score")
    assert aggregate.rank_cutoffs(ctx, hist, {"web": 0}, "quality_score", "source") == {}
    with pytest.raises(ValueError, match="rank 100000 is beyond"):
        aggregate.rank_cutoffs(ctx, hist, {"web": 100000}, "quality_score", "source")
