"""The report's signal histograms: exact counts on hand-written tables, and the in-memory path (numpy, for
small runs) equal to the streamed path (DuckDB statistics, counts in record batches, for any size) on
hand-written tables and on a real run, in one batch or many."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from dataclean.report.queries import RunTables, near_threshold, signal_histograms
from dataclean.report.sections import BASE_COLUMNS
from dataclean.report.thresholds import Threshold


def _run_folder(root, kept: dict, removed: dict):
    (root / "data").mkdir(parents=True)
    (root / "rejected").mkdir()
    pq.write_table(pa.table(kept), root / "data" / "part-00000.parquet")
    pq.write_table(pa.table(removed), root / "rejected" / "part-00000.parquet")
    return RunTables(str(root))


@pytest.fixture
def tables(tmp_path):
    kept = {"id": ["a", "b", "c", "d", "e"], "text": ["x"] * 5,
            "words": pa.array([3, 4, 4, 5, None], pa.int64()),
            "ratio": [0.1, 0.2, float("nan"), 0.4, 0.5],
            "chars": [10.0, 100.0, 5000.0, 20000.0, 0.0]}
    removed = {"id": ["f", "g", "h"], "text": ["y"] * 3, "stage": ["gopher", "c4", "gopher"],
               "rule": ["min_words", "lines", None],
               "words": pa.array([1, 2, 9], pa.int64()), "ratio": [0.9, float("inf"), 0.15],
               "chars": [3.0, 7.0, 123456.0]}
    t = _run_folder(tmp_path / "run", kept, removed)
    yield t
    t.close()


@pytest.mark.parametrize("in_memory,batch", [(False, 32_768), (False, 2), (True, None)])
def test_exact_counts_on_hand_written_tables(tables, in_memory, batch, monkeypatch):
    if batch:
        monkeypatch.setattr("dataclean.report.queries.STREAM_ROWS", batch)
    h = signal_histograms(tables, {"words": ["min_words"], "ratio": [], "chars": []}, {"words": [2]},
                          bins=4, in_memory=in_memory)
    w = h["words"]  # integers 1..9 span more than 4 bins: 4 equal bins of [1 - 2%, 9 + 2%]
    assert (w.n, w.lo_value, w.hi_value, w.log_x) == (7, 1.0, 9.0, False)
    assert w.edges == [0.84, 2.92, 5.0, 7.08, 9.16]
    assert w.kept == [0, 3, 1, 0]  # 3, 4, 4 | 5 (None not counted)
    assert w.removed_by_rule == [1, 0, 0, 0]  # 1 by min_words
    assert w.removed_other == [1, 0, 0, 1]  # 2 by c4, 9 by an unnamed rule
    r = h["ratio"]  # NaN and inf are not counted
    assert (r.n, r.lo_value, r.hi_value) == (6, 0.1, 0.9)
    assert (sum(r.kept), sum(r.removed_by_rule), sum(r.removed_other)) == (4, 0, 2)
    c = h["chars"]
    assert c.log_x and c.n == 8
    # log10(1 + x) from 0 to 1.02 x log10(123457) in 4 bins of 1.298: 0 and 10 in the first, 123456 in the last
    assert c.kept == [2, 1, 1, 1]
    assert c.removed_other == [2, 0, 0, 1]


@pytest.mark.parametrize("batch", [32_768, 100])
def test_both_paths_agree_on_a_real_run(sample_run, batch, monkeypatch):
    monkeypatch.setattr("dataclean.report.queries.STREAM_ROWS", batch)
    t = RunTables(str(sample_run))
    try:
        cols = dict(t.removed_cols)
        cols.update(t.kept_cols)
        rules = sorted(r for (r,) in t.con.sql("SELECT DISTINCT rule FROM removed WHERE rule IS NOT NULL")
                       .fetchall())
        numeric = [c for c, typ in cols.items() if c not in BASE_COLUMNS and typ in ("DOUBLE", "BIGINT", "FLOAT",
                                                                                     "INTEGER")]
        assert len(numeric) > 50
        signals = {c: rules[i % 3::3] for i, c in enumerate(numeric)}
        marks = {c: [0.5] for c in numeric[::5]}
        sql = signal_histograms(t, signals, marks, in_memory=False)
        mem = signal_histograms(t, signals, marks, in_memory=True)
        assert len(sql) > 50
        assert sql == mem
        assert signal_histograms(t, signals, marks) == mem  # a small run takes the in-memory path by itself
    finally:
        t.close()


@pytest.mark.parametrize("batch", [32_768, 2])
def test_near_threshold_picks_the_closest_kept_documents(tmp_path, batch, monkeypatch):
    """Per bound, the kept documents closest to it on the kept side, ties by origin, a language's own value
    where it has one, none where the rule is off for the language; 0 is near no upper bound."""
    monkeypatch.setattr("dataclean.report.queries.STREAM_ROWS", batch)
    kept = {"id": ["a", "b", "c", "d", "e", "f", "g"], "text": ["t"] * 7,
            "source": ["web"] * 7, "lang": ["en", "en", "en", "zh", "zh", "ja", "en"],
            "n_chars": [1] * 7, "origin_file": ["f1", "f1", "f0", "f1", "f1", "f1", "f1"],
            "origin_row": pa.array([0, 1, 2, 3, 4, 5, 6], pa.int64()),
            "ratio": [0.25, 0.28, 0.28, 0.1, 0.19, 0.5, 0.0]}
    removed = {"id": ["z"], "text": ["y"], "stage": ["s"], "rule": ["r"], "ratio": [0.9]}
    t = _run_folder(tmp_path / "run", kept, removed)
    try:
        upper = Threshold("s", "r", "ratio", "max", "max_ratio", 0.3, {"zh": 0.2, "ja": None})
        lower = Threshold("s", "q", "ratio", "min", "min_ratio", 0.2)
        near = near_threshold(t, [upper, lower], per_rule=2, chars=10)
        # upper: e (zh, 0.19 against zh's 0.2: 0.01), then b and c (en 0.28 against 0.3: 0.02), c first by
        # origin (f0 < f1); f's ja is off, g's 0 is near no upper bound, d is 0.1 from zh's bound
        assert [(d["id"], d["value"], d["threshold"]) for d in near[0]] == [("e", 0.19, 0.2), ("c", 0.28, 0.3)]
        assert [(d["id"], d["value"]) for d in near[1]] == [("a", 0.25), ("c", 0.28)]
    finally:
        t.close()


def test_documents_fetched_from_their_shards_equal_those_from_the_whole_table(sample_run, monkeypatch):
    """A few documents by key or id are read from the shards that hold them: the same rows as from the view."""
    from dataclean.report import queries as q

    t = RunTables(str(sample_run))
    try:
        kept = t.con.sql("SELECT origin_file, origin_row, id FROM kept ORDER BY origin_file DESC, origin_row "
                         "LIMIT 3").fetchall()
        removed = t.con.sql("SELECT origin_file, origin_row, id FROM removed ORDER BY origin_file, origin_row "
                            "LIMIT 3").fetchall()
        assert len(q.shard_files(str(sample_run), "kept")) > 1 and len(q.shard_files(str(sample_run), "removed")) > 1
        assert "read_parquet" in q._holding(t, "kept", q._ORIGIN_JOIN.format(keys="(SELECT * FROM (VALUES "
                                            f"('{kept[0][0]}', {kept[0][1]})) v(origin_file, origin_row))"), 1)

        def fetch():
            return (q._kept_by_origin(t, [k[:2] for k in kept], 100, ("n_chars",)),
                    q.fetch_removed(t, [k[:2] for k in removed], 100),
                    q.fetch_by_id(t, "kept", sorted(k[2] for k in kept)),
                    q.fetch_by_id(t, "removed", sorted(k[2] for k in removed)))
        few = fetch()
        monkeypatch.setattr(q, "FEW_KEYS", 0)
        whole = fetch()
        assert few == whole
        assert [len(x) for x in few] == [3, 3, 3, 3]
    finally:
        t.close()
