"""Near-duplicate removal end to end: which ids go, what stands in their place, and what never matches."""
import importlib.util
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import with_kernels

import dataclean
from dataclean.stages.dedup_minhash import MinHashDedup, _chunks, chunk_size, connected_components

import numpy as np

EN = ("The harbour town sits at the mouth of a slow green river where fishing boats have landed their catch "
      "for three hundred years and the market opens before dawn every day of the week except on the winter "
      "solstice when the whole town gathers on the stone pier to light lanterns for sailors lost at sea and "
      "children sing old songs about storms that once swept the coast and took the lighthouse keeper with "
      "them while the bakers hand out warm bread to anyone who walks past the harbour office before noon")
ZH = ("这座港口小镇位于一条缓慢的绿色河流入海口，三百年来渔船一直在这里卸下渔获。每天黎明前市场就开门营业，"
      "只有冬至那天例外，全镇居民会聚集在石头码头上，为在海上遇难的水手点亮灯笼。孩子们唱着古老的歌谣，"
      "歌里讲述曾经席卷海岸的风暴，以及被风暴带走的灯塔看守人。面包师会把热面包送给中午前经过港务局的每一个人。")
TEMPLATE = ("Welcome to the Example Store product page. Today's featured item is {name}. {body} "
            "Shipping is free on orders over fifty dollars. Contact support with any questions.")


def edit_words(text, i, word):
    words = text.split(" ")
    words[i] = word
    return " ".join(words)


def docs():
    return [
        ("en-orig", EN),
        ("en-edit", edit_words(EN, 40, "blue")),                             # one word changed
        ("en-boiler", EN + "\nShare this page on social media"),             # boilerplate appended: longest
        ("zh-orig", ZH),
        ("zh-edit", ZH.replace("三百年", "四百年")),                             # one character changed
        ("tpl-a", TEMPLATE.format(name="a cast iron skillet", body="It holds heat for hours, sears steak "
                                  "beautifully, and goes from the stove top into a hot oven without complaint.")),
        ("tpl-b", TEMPLATE.format(name="a wool blanket", body="Woven in the hills from undyed fleece, it keeps a "
                                  "sleeper warm on cold nights and softens with every wash and season of use.")),
        ("short-1", "ok"),
        ("short-2", "OK!"),                                                  # differs from short-1 by punctuation
        ("empty-ish", "!!!"),                                                # no shingle at all: exact dedup only
        ("empty-ish-2", "?!?"),
        ("unrelated", "Quantum error correction protects logical qubits by spreading information across many "
                      "physical qubits so that single faults can be detected and undone without measuring it."),
    ]


def run_dedup(tmp_path, rows, extra_stage=None, name="out", against=None):
    path = tmp_path / f"{name}.parquet"
    pq.write_table(pa.Table.from_pylist([{"id": i, "text": t, "source": "web"} for i, t in rows]), path)
    stage = {"stage": "minhash_dedup", **(extra_stage or {})}
    cfg = dataclean.resolve_config({"pipeline": [{"stage": "normalize"}, {"stage": "exact_dedup"}, stage]})
    out = tmp_path / name
    summary = dataclean.run([str(path)], str(out), config=cfg, dedup_against=against)
    assert summary.verified
    return out, summary


def removed(out):
    return sorted((r["id"], r["rule"], r["dup_of"]) for r in pq.read_table(out / "rejected").to_pylist())


def test_near_duplicates_removed_templates_kept(tmp_path):
    out, summary = run_dedup(tmp_path, docs())
    assert removed(out) == [
        ("en-edit", "near_duplicate", "en-boiler"),   # the longest document of the cluster is kept
        ("en-orig", "near_duplicate", "en-boiler"),
        ("short-1", "near_duplicate", "short-2"),     # shorter than one 5-gram: one shingle of all its words
        ("zh-orig", "near_duplicate", "zh-edit"),     # same length: the smaller id is kept
    ]
    clusters = pq.read_table(out / "dedup" / "clusters.parquet").to_pylist()
    assert [(c["cluster"], c["id"], c["is_representative"], c["cluster_size"]) for c in clusters] == [
        ("en-boiler", "en-boiler", True, 3), ("en-boiler", "en-edit", False, 3),
        ("en-boiler", "en-orig", False, 3), ("short-2", "short-2", True, 2), ("short-2", "short-1", False, 2),
        ("zh-edit", "zh-edit", True, 2), ("zh-edit", "zh-orig", False, 2)]
    for c in clusters:
        assert 0.8 <= c["similarity"] <= 1.0
    sizes = pq.read_table(out / "dedup" / "cluster_sizes.parquet").to_pylist()
    assert sizes == [{"cluster_size": 2, "clusters": 2, "documents": 4}, {"cluster_size": 3, "clusters": 1, "documents": 3}]
    kept = {r["id"]: r["minhash_shingles"] for r in pq.read_table(out / "data").to_pylist()}
    assert (kept["empty-ish"], kept["empty-ish-2"], kept["short-2"]) == (0, 0, 1)
    ledger = {r["id"]: r for r in pq.read_table(out / "rejected").to_pylist()}
    assert ledger["en-orig"]["stage"] == "minhash_dedup" and ledger["en-orig"]["threshold"] == 0.8
    assert ledger["en-orig"]["detail"].startswith("cluster of 3")


def test_results_do_not_depend_on_shard_order_or_workers(tmp_path):
    rows = docs()
    out_a, _ = run_dedup(tmp_path, rows, name="a")
    out_b, _ = run_dedup(tmp_path, list(reversed(rows)), name="b")
    assert removed(out_a) == removed(out_b)
    # two shards, two workers
    half = len(rows) // 2
    for part, chunk in (("p0", rows[:half]), ("p1", rows[half:])):
        (tmp_path / "split").mkdir(exist_ok=True)
        pq.write_table(pa.Table.from_pylist([{"id": i, "text": t, "source": "web"} for i, t in chunk]),
                       tmp_path / "split" / f"{part}.parquet")
    cfg = dataclean.resolve_config({"pipeline": [{"stage": "normalize"}, {"stage": "exact_dedup"},
                                                 {"stage": "minhash_dedup"}]})
    for workers in (1, 2):
        out = tmp_path / f"split-w{workers}"
        dataclean.run([str(tmp_path / "split")], str(out), config=cfg, workers=workers)
        assert removed(out) == removed(out_a)


def test_chaining_guard_keeps_the_far_end_of_a_chain():
    # labels: a chain 0-1-2 and a separate pair 3-4, isolated 5
    labels = connected_components(6, np.array([0, 1, 3]), np.array([1, 2, 4]))
    assert labels.tolist() == [0, 0, 0, 3, 3, 5]
    stage = MinHashDedup(num_perm=8, bands=4, rows=2)
    sigs = np.array([[1, 1, 1, 1, 1, 1, 1, 1],     # rep (longest)
                     [1, 1, 1, 1, 1, 1, 2, 2],     # 6/8 like the rep
                     [1, 1, 1, 1, 3, 3, 2, 2]],    # 4/8 like the rep: a chain, not a duplicate of the rep
                    dtype=np.uint64)
    nodes = pa.table({"doc_key": [0, 1, 2], "id": ["a", "b", "c"], "n_chars": [300, 200, 100],
                      "q": pa.array([None, None, None], pa.float64())})
    stage.min_similarity_to_rep = 0.7
    estimate = lambda i, j: float((sigs[i] == sigs[j]).mean())  # noqa: E731
    reps, sims = stage._cluster(np.array([0, 0, 0]), nodes, estimate)
    assert reps.tolist() == [0, 0, 2] and sims.tolist() == [1.0, 0.75, 1.0]


def test_dedup_against_an_earlier_run(tmp_path):
    first, _ = run_dedup(tmp_path, [("old-1", EN), ("old-2", ZH)], name="first")
    assert json.loads((first / "dedup" / "minhash_params.json").read_text())["num_perm"] == 128
    second, summary = run_dedup(tmp_path, [("new-1", edit_words(EN, 10, "red")), ("new-2", "Something else "
                                           "entirely about compilers and the registers they allocate for loops.")],
                                name="second", against=[str(first)])
    assert removed(second) == [("new-1", "near_duplicate_earlier", "old-1")]


def test_dedup_against_with_other_parameters_is_refused(tmp_path):
    first, _ = run_dedup(tmp_path, [("old-1", EN)], name="first")
    with pytest.raises(dataclean.ConfigError, match="other MinHash parameters"):
        dataclean.resolve_config({"pipeline": [{"stage": "minhash_dedup", "num_perm": 64, "against": [str(first)]}]})


@pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba is not installed")
def test_compiled_verification_and_clustering_equal_the_numpy_code(tmp_path):
    # the chunk decision itself: exact Jaccard of every candidate edge, clusters and similarities, bit for bit
    rows = docs() + [("en-far", edit_words(edit_words(EN, 5, "x"), 30, "y")), ("zh-short", "港口小镇"),
                     ("zh-short-2", "港口小镇！"), ("blank", "")]
    stage = MinHashDedup()
    texts = pa.array([t for _, t in rows], pa.string())
    n = len(rows)
    nodes = pa.table({"comp": [0] * n, "doc_key": list(range(n)), "id": [i for i, _ in rows],
                      "n_chars": [len(t) for _, t in rows], "q": pa.array([None] * n, pa.float64()),
                      "source": ["web"] * n, "lang": [None] * n,
                      "minhash_sig": stage.apply(pa.RecordBatch.from_pydict({"text": texts})).batch
                      .column("minhash_sig").fill_null(pa.scalar(bytes(512), pa.binary(512))),
                      "text": texts})
    a, b = np.triu_indices(n, 1)  # every pair is a candidate edge
    on = with_kernels("1", lambda: stage._decide_chunk(nodes, a, b))
    off = with_kernels("0", lambda: stage._decide_chunk(nodes, a, b))
    for x, y in zip(on, off):
        assert x.equals(y)
    sim_on = with_kernels("1", lambda: [stage._similarity_fn(nodes)(i, j) for i, j in zip(a, b)])
    sim_off = with_kernels("0", lambda: [stage._similarity_fn(nodes)(i, j) for i, j in zip(a, b)])
    assert sim_on == sim_off and max(sim_on) == 1.0 and min(sim_on) == 0.0
    assert on[0].num_rows >= 5


@pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba is not installed")
def test_a_run_with_the_compiled_kernels_equals_one_without(tmp_path):
    rows = docs()
    out_on, _ = with_kernels("1", lambda: run_dedup(tmp_path, rows, name="on"))
    out_off, _ = with_kernels("0", lambda: run_dedup(tmp_path, rows, name="off"))
    assert removed(out_on) == removed(out_off)
    for name in ("clusters.parquet", "minhash_bands", "minhash_signatures", "exact_groups.parquet"):
        assert pq.read_table(out_on / "dedup" / name).equals(pq.read_table(out_off / "dedup" / name))


def test_signature_verification_removes_by_the_minhash_estimate(tmp_path):
    out, _ = run_dedup(tmp_path, docs(), extra_stage={"verify_with": "signature"}, name="sig")
    ledger = {r["id"]: r for r in pq.read_table(out / "rejected").to_pylist()}
    assert removed(out) == [("en-edit", "near_duplicate", "en-boiler"), ("en-orig", "near_duplicate", "en-boiler"),
                            ("short-1", "near_duplicate", "short-2"), ("zh-orig", "near_duplicate", "zh-edit")]
    assert ledger["en-orig"]["detail"] == "cluster of 3 (MinHash Jaccard estimate, 128 permutations)"
    # the estimate is a fraction of 128 equal positions
    assert ledger["zh-orig"]["value"] * 128 == round(ledger["zh-orig"]["value"] * 128)


def test_saved_signatures_are_datasketch_hashvalues_as_little_endian_bytes(tmp_path):
    from dataclean.dedup import minhash as mh

    out, _ = run_dedup(tmp_path, docs(), name="sigs")
    table = pq.read_table(out / "dedup" / "minhash_signatures")
    assert table.schema.field("sig").type == pa.binary(512)
    saved = dict(zip(table.column("id").to_pylist(), table.column("sig").to_pylist()))
    text = pa.array([dict(docs())["zh-edit"]])  # (normalize changes nothing in it)
    values, offsets = mh.shingle_hashes(mh.shingle_text(text))
    expected = mh.signatures(values, offsets, 128, 1)[0]
    assert np.frombuffer(saved["zh-edit"], "<u4").tolist() == expected.tolist()
    lean = mh.to_lean_minhash(table.column("sig")[table.column("id").to_pylist().index("zh-edit")])  # (a scalar)
    assert lean.hashvalues.tolist() == expected.tolist() and lean.jaccard(mh.to_lean_minhash(expected)) == 1.0
    assert "en-orig" not in saved and "empty-ish" not in saved  # removed / no signature
    bands = pq.read_table(out / "dedup" / "minhash_bands").to_pylist()
    mine = [(r["band"], r["h"]) for r in bands if r["id"] == "zh-edit"]
    stage = MinHashDedup()
    assert mine == list(enumerate(mh.band_hashes(expected[None, :], stage.bands, stage.rows)[0].tolist(), 1))


def test_dedup_against_reads_signatures_an_earlier_version_saved_as_lists(tmp_path):
    first, _ = run_dedup(tmp_path, [("old-1", EN), ("old-2", ZH)], name="first")
    new = [("new-1", edit_words(EN, 10, "red"))]
    now, _ = run_dedup(tmp_path, new, name="now", against=[str(first)])
    folder = first / "dedup" / "minhash_signatures"
    for path in folder.glob("*.parquet"):  # as dataclean 0.1 wrote them: list<uint32>
        t = pq.read_table(path)
        sigs = [np.frombuffer(s, "<u4").tolist() for s in t.column("sig").to_pylist()]
        pq.write_table(pa.table({"id": t.column("id"), "sig": pa.array(sigs, pa.list_(pa.uint32()))}), path)
    then, _ = run_dedup(tmp_path, new, name="then", against=[str(first)])
    assert removed(then) == removed(now) == [("new-1", "near_duplicate_earlier", "old-1")]
    value = [r["value"] for r in pq.read_table(then / "rejected").to_pylist()]
    assert value == [r["value"] for r in pq.read_table(now / "rejected").to_pylist()] and 0.8 <= value[0] < 1.0


def test_verification_chunks_give_every_worker_two():
    assert chunk_size(12_335, 10_000, 2) == 3_084  # (the bench corpus' candidates: was 10,001 + 2,334)
    assert chunk_size(1_000_000, 10_000, 8) == 10_000  # chunk_nodes bounds a task's memory
    assert chunk_size(7, 10_000, None) == 4 and chunk_size(0, 10_000, 4) == 1
    comp = np.array([0, 0, 0, 3, 3, 5, 6, 6, 6, 6])  # whole components only: a chunk may hold more
    assert list(_chunks(comp, chunk_size(len(comp), 10_000, 2))) == [(0, 0), (3, 5), (6, 6)]


def test_verification_chunks_follow_the_memory_budget():
    from types import SimpleNamespace

    from dataclean.stages.dedup_minhash import MinHashDedup

    def ctx(free):
        return SimpleNamespace(task_memory_bytes=lambda: free)
    auto, fixed = MinHashDedup(), MinHashDedup(chunk_nodes=2_500)
    assert auto._chunk_nodes(ctx(800 << 20)) == 51_200  # 800 MiB at 16 KiB per candidate
    assert auto._chunk_nodes(ctx(None)) == 10_000  # no budget known: the least
    assert auto._chunk_nodes(ctx(10 << 20)) == 10_000 and auto._chunk_nodes(ctx(100 << 30)) == 200_000
    assert auto._chunk_nodes(SimpleNamespace()) == 10_000
    assert fixed._chunk_nodes(ctx(800 << 20)) == 2_500  # a given chunk_nodes wins


def test_tasks_get_the_optimized_bands_from_the_driver():
    from dataclean.dedup.minhash import optimal_bands

    cfg = dataclean.resolve_config({"pipeline": [{"stage": "normalize"},
                                                 {"stage": "minhash_dedup", "threshold": 0.7, "num_perm": 96}]})
    assert cfg["pipeline"][1].get("bands") is None  # the user's config is left as it was
    pipe = dataclean.Pipeline.from_config(cfg)
    task_cfg = pipe.task_config(cfg)
    assert task_cfg["pipeline"][1] == dict(cfg["pipeline"][1], bands=pipe.stages[1].bands, rows=pipe.stages[1].rows)
    assert task_cfg["pipeline"][0] == cfg["pipeline"][0] and cfg["pipeline"][1].get("bands") is None
    assert (pipe.stages[1].bands, pipe.stages[1].rows) == optimal_bands(0.7, 96, 0.05, 0.95)
    optimal_bands.cache_clear()
    worker = dataclean.Pipeline.from_config(task_cfg)  # what a worker builds: nothing to optimize
    assert optimal_bands.cache_info().misses == 0
    assert (worker.stages[1].bands, worker.stages[1].rows) == (pipe.stages[1].bands, pipe.stages[1].rows)
    assert worker.survivor_schema() == pipe.survivor_schema()
