"""Near-duplicate chains (issue 25 item 5): a component above ``max_pairwise_component`` is clustered through a
prefix-filter index instead of comparing every representative with every open member, with the same result.

Hand-written chains: every document is its predecessor with one word (Chinese: one or two characters)
replaced, far enough from the other edits that their shingle windows never overlap. The English text has 73
words = 69 word 5-grams; an inner edit changes 5 of them, so neighbours have Jaccard 64/74 and documents two
edits apart 59/79 < 0.8: each representative takes only its neighbours. The Chinese text has 100 Han characters
= 96 character 5-grams; one character changes 5 of them (Jaccard 91/101), two adjacent characters 6 (90/102), and
two one-character edits apart still reach 86/106 >= 0.8."""
import importlib.util
import inspect
import os
import random

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from conftest import with_kernels

import dataclean
from dataclean.stages.dedup_minhash import MinHashDedup, _prefix_keys, _segment_keys, connected_components

NUMBA = importlib.util.find_spec("numba") is not None
EXACT = "exact Jaccard of shingle sets"

EN = ("On the first morning of spring the old ferry left the northern pier at seven and carried farmers, teachers "
      "and a few sleepy students across the wide brown river toward the market town, where the bell of the small "
      "stone church rang over the square while merchants opened their stalls and sold apples, cheese, warm bread "
      "and honey to everyone who came early enough to find a seat on the long wooden benches.")
# (word position, new word): lengths change so that the preference order (most characters first) is
# en-7 (409 characters), en-3 (408), en-6 (408), en-2 (407), then en-0, en-1, en-4, en-5 (405)
EN_STEPS = [(5, "summer"), (14, "fifteen"), (22, "yawning"), (31, "old"), (40, "chapel"), (49, "workshops"),
            (59, "strangers")]
ZH = ("春天的第一个早晨，老渡船七点钟离开北边的码头，载着农民、教师和几个睡眼惺忪的学生渡过宽阔的黄河，驶向集镇。"
      "小石头教堂的钟声在广场上回荡，商人们打开摊位，把苹果、奶酪、热面包和蜂蜜卖给每一个早早赶来、在长木凳上找到座位的人。")
# one character (老, 北, 农), then two (教堂, 苹果): every document has 111 characters, so the smaller id is preferred
ZH_STEPS = [("老渡船", "新渡船"), ("北边", "南边"), ("农民", "渔民"), ("教堂", "书院"), ("苹果", "橘子")]


def en_chain():
    words = EN.split(" ")
    out = [("en-0", EN)]
    for k, (pos, word) in enumerate(EN_STEPS, 1):
        words[pos] = word
        out.append((f"en-{k}", " ".join(words)))
    return out


def zh_chain():
    text, out = ZH, [("zh-0", ZH)]
    for k, (old, new) in enumerate(ZH_STEPS, 1):
        assert text.count(old) == 1
        text = text.replace(old, new)
        out.append((f"zh-{k}", text))
    return out


def run_chain(tmp_path, rows, name, **stage):
    path = tmp_path / f"{name}.parquet"
    pq.write_table(pa.Table.from_pylist([{"id": i, "text": t, "source": "web"} for i, t in rows]), path)
    cfg = dataclean.resolve_config({"pipeline": [{"stage": "normalize"}, {"stage": "exact_dedup"},
                                                 {"stage": "minhash_dedup", **stage}]})
    out = tmp_path / name
    summary = dataclean.run([str(path)], str(out), config=cfg)
    assert summary.verified
    return out


def ledger(out):
    return sorted((r["id"], r["rule"], r["dup_of"], r["value"], r["detail"])
                  for r in pq.read_table(out / "rejected").to_pylist())


def kept(out):
    return sorted(pq.read_table(out / "data").column("id").to_pylist())


def clusters(out):
    return [(c["cluster"], c["id"], c["is_representative"], c["similarity"], c["cluster_size"])
            for c in pq.read_table(out / "dedup" / "clusters.parquet").to_pylist()]


def test_english_chain_through_the_index(tmp_path):
    out = run_chain(tmp_path, en_chain(), "en-index", max_pairwise_component=2)
    # en-7 takes en-6; en-3 takes en-2 and en-4; en-0 takes en-1; en-5 has no open neighbour left
    assert ledger(out) == [
        ("en-1", "near_duplicate", "en-0", 64 / 74, f"cluster of 2 ({EXACT})"),
        ("en-2", "near_duplicate", "en-3", 64 / 74, f"cluster of 3 ({EXACT})"),
        ("en-4", "near_duplicate", "en-3", 64 / 74, f"cluster of 3 ({EXACT})"),
        ("en-6", "near_duplicate", "en-7", 64 / 74, f"cluster of 2 ({EXACT})"),
    ]
    assert kept(out) == ["en-0", "en-3", "en-5", "en-7"]
    assert clusters(out) == [
        ("en-0", "en-0", True, 1.0, 2), ("en-0", "en-1", False, 64 / 74, 2),
        ("en-3", "en-3", True, 1.0, 3), ("en-3", "en-2", False, 64 / 74, 3), ("en-3", "en-4", False, 64 / 74, 3),
        ("en-7", "en-7", True, 1.0, 2), ("en-7", "en-6", False, 64 / 74, 2)]


def test_chinese_chain_through_the_index(tmp_path):
    out = run_chain(tmp_path, zh_chain(), "zh-index", max_pairwise_component=2)
    # zh-0 takes zh-1 (one edit) and zh-2 (two one-character edits: 86/106); zh-3 takes zh-4 (two characters,
    # 90/102) but not zh-5 (6 + 6 shingles away: 84/108); zh-5 stays alone
    assert ledger(out) == [
        ("zh-1", "near_duplicate", "zh-0", 91 / 101, f"cluster of 3 ({EXACT})"),
        ("zh-2", "near_duplicate", "zh-0", 86 / 106, f"cluster of 3 ({EXACT})"),
        ("zh-4", "near_duplicate", "zh-3", 90 / 102, f"cluster of 2 ({EXACT})"),
    ]
    assert kept(out) == ["zh-0", "zh-3", "zh-5"]


@pytest.mark.parametrize("chain", [en_chain, zh_chain])
def test_the_pairwise_path_gives_the_same_chain_result(tmp_path, chain):
    index = run_chain(tmp_path, chain(), "index", max_pairwise_component=1)
    pairwise = run_chain(tmp_path, chain(), "pairwise")  # default 100: 8 and 6 documents are compared pairwise
    assert ledger(index) == ledger(pairwise) and kept(index) == kept(pairwise)
    for name in ("clusters.parquet", "cluster_sizes.parquet"):
        assert pq.read_table(index / "dedup" / name).equals(pq.read_table(pairwise / "dedup" / name))


def test_small_components_keep_the_pairwise_result(tmp_path):
    # ordinary clusters: an edited copy and a longer copy of one page, a Chinese pair, an unrelated page;
    # with the default cap they are compared pairwise, as before; through the index the result is the same
    words = EN.split(" ")
    words[30] = "harbour"
    rows = [("a-orig", EN), ("a-edit", " ".join(words)), ("a-long", EN + " Tickets cost two coins."),
            ("z-orig", ZH), ("z-edit", ZH.replace("黄河", "长江")),
            ("other", "Quantum error correction spreads one logical qubit over many physical ones so that a "
                      "single fault can be found and undone without measuring the stored information itself.")]
    out = run_chain(tmp_path, rows, "small")
    assert ledger(out) == [
        ("a-edit", "near_duplicate", "a-long", 64 / 78, f"cluster of 3 ({EXACT})"),
        ("a-orig", "near_duplicate", "a-long", 69 / 73, f"cluster of 3 ({EXACT})"),
        ("z-orig", "near_duplicate", "z-edit", 90 / 102, f"cluster of 2 ({EXACT})"),
    ]
    index = run_chain(tmp_path, rows, "small-index", max_pairwise_component=1)
    assert ledger(index) == ledger(out) and clusters(index) == clusters(out)


def _chain_nodes(n, seed):
    """A chunk of one longer chain (English and Chinese edits mixed, a repeat and an empty text), every pair a
    candidate edge: nodes as verify_task builds them."""
    rng = random.Random(seed)
    words, zh = EN.split(" "), list(ZH)
    vocab = sorted(set(w.strip(",.") for w in words))
    texts = []
    for i in range(n):
        if i % 2:
            words[rng.randrange(len(words))] = rng.choice(vocab)
        else:
            zh[rng.randrange(len(zh))] = rng.choice("山水风云雨雪花草木石")
        texts.append(" ".join(words) + "\n" + "".join(zh))
    texts += [texts[3], ""]
    stage = MinHashDedup()
    arr = pa.array(texts, pa.string())
    sig = stage.apply(pa.RecordBatch.from_pydict({"text": arr})).batch.column("minhash_sig")
    n = len(texts)
    q = [None if i % 3 else rng.random() for i in range(n)]
    nodes = pa.table({"comp": [0] * n, "doc_key": list(range(n)), "id": [f"d{i:03d}" for i in range(n)],
                      "n_chars": [len(t) for t in texts], "q": pa.array(q, pa.float64()), "source": ["web"] * n,
                      "lang": [None] * n, "minhash_sig": sig.fill_null(pa.scalar(bytes(512), pa.binary(512))),
                      "text": arr})
    a, b = np.triu_indices(n, 1)
    return nodes, a, b


@pytest.mark.parametrize("params", [{}, {"min_similarity_to_rep": 0.9}, {"min_similarity_to_rep": 0.6},
                                    {"verify_pairs": False, "min_similarity_to_rep": 2 / 3},
                                    {"verify_with": "signature"}, {"verify_with": "signature", "threshold": 0.7},
                                    {"min_similarity_to_rep": 1.0}, {"min_similarity_to_rep": 0.0}])
def test_the_index_equals_comparing_all_open_pairs(params):
    nodes, a, b = _chain_nodes(60, seed=len(str(params)))
    pairwise = MinHashDedup(max_pairwise_component=10 ** 9, **params)._decide_chunk(nodes, a, b)
    modes = ["0"] + (["1"] if NUMBA else [])
    for kernels in modes:
        index = with_kernels(kernels, lambda: MinHashDedup(max_pairwise_component=1, **params)._decide_chunk(nodes, a, b))
        assert index[0].equals(pairwise[0]) and index[1].equals(pairwise[1])
    if params in ({}, {"verify_with": "signature"}):
        assert pairwise[0].num_rows >= 10  # (the chain does cluster)


def _jaccard(x, y):
    if not len(x) and not len(y):
        return 1.0
    inter = len(set(x.tolist()) & set(y.tolist()))
    return inter / (len(x) + len(y) - inter)


def _shares(offsets, tokens, i, j):
    return bool(set(tokens[offsets[i]:offsets[i + 1]].tolist()) & set(tokens[offsets[j]:offsets[j + 1]].tolist()))


def test_prefix_tokens_hold_every_pair_that_reaches_the_threshold():
    rng = np.random.default_rng(5)
    # boundary cases: Jaccard exactly 0.8 (4 of 5), 2/3, 1 (equal sets, two empty sets), and random edits
    sets = [np.array([1, 2, 3, 4], np.uint32), np.array([1, 2, 3, 4, 5], np.uint32),
            np.array([1, 2], np.uint32), np.array([1, 2, 3], np.uint32), np.array([2, 3, 4, 5], np.uint32),
            np.array([], np.uint32), np.array([], np.uint32), np.array([7], np.uint32), np.array([7], np.uint32)]
    base = rng.choice(60, size=25, replace=False)
    for _ in range(40):
        s = base.copy()
        s[rng.integers(0, len(s), size=rng.integers(0, 6))] = rng.integers(0, 90, size=1)
        sets.append(np.unique(s[: rng.integers(15, 26)]).astype(np.uint32))
    if NUMBA:
        from dataclean.dedup.minhash import mh_kernels
        k = mh_kernels()
        values = np.concatenate(sets).astype(np.uint32)
        offsets = np.concatenate([[0], np.cumsum([len(s) for s in sets])]).astype(np.int64)
    for t in (0.5, 2 / 3, 0.75, 0.8, 0.9, 1.0):
        found = [_prefix_keys(sets, t)]
        if NUMBA:
            pre_off, packed = k.prefix_values(values, offsets, np.arange(len(sets), dtype=np.int64), t, 12)
            packed.sort()
            pre_tok, post_off, post_pos = k.prefix_postings(pre_off, packed)
            found.append((pre_off, pre_tok))
            assert np.array_equal(pre_off, found[0][0])  # (the same prefix lengths; the order may differ)
            for x in range(len(sets)):  # the posting lists are the inverse of the prefixes
                for tok in pre_tok[pre_off[x]:pre_off[x + 1]].tolist():
                    assert x in post_pos[post_off[tok]:post_off[tok + 1]].tolist()
        pairs = 0
        for i in range(len(sets)):
            for j in range(i + 1, len(sets)):
                if _jaccard(sets[i], sets[j]) >= t:
                    pairs += 1
                    assert all(_shares(off, tok, i, j) for off, tok in found), (t, i, j)
        assert pairs >= 3
    # a 4-of-5 pair at t = 0.8: 4 - ceil(3.2) + 1 = 1 and 5 - 4 + 1 = 2 tokens
    off, _ = _prefix_keys(sets[:2], 0.8)
    assert np.diff(off).tolist() == [1, 2]


@pytest.mark.skipif(not NUMBA, reason="the compiled kernels need numba")
def test_early_exit_jaccard_and_sliced_index_match_the_plain_kernels():
    from dataclean.dedup import _minhash_numba as kn
    from dataclean.dedup.minhash import mh_kernels, in_slices
    k = mh_kernels()
    rng = np.random.default_rng(11)
    # exact boundaries: 4 of 5 (0.8), 2 of 3, equal sets, two empty sets, one empty set
    sets = [np.array([1, 2, 3, 4], np.uint32), np.array([1, 2, 3, 4, 5], np.uint32),
            np.array([1, 2], np.uint32), np.array([1, 2, 3], np.uint32), np.array([2, 3, 4, 5], np.uint32),
            np.array([], np.uint32), np.array([], np.uint32), np.array([7], np.uint32)]
    base = rng.choice(80, size=30, replace=False)
    for _ in range(60):
        s = base.copy()
        s[rng.integers(0, len(s), size=rng.integers(0, 9))] = rng.integers(0, 120, size=1)
        sets.append(np.unique(s[: rng.integers(10, 31)]).astype(np.uint32))
    values = np.concatenate(sets).astype(np.uint32)
    offsets = np.concatenate([[0], np.cumsum([len(s) for s in sets])]).astype(np.int64)
    n = len(sets)
    below = 0
    for t in (0.5, 2 / 3, 0.75, 0.8, 0.9, 1.0):
        for i in range(n):
            for j in range(n):
                exact = kn.jaccard_one(values, offsets, i, j)
                got = kn._jaccard_at_least(values, offsets, i, j, t)
                assert got == (exact if exact >= t else -1.0), (t, i, j, exact, got)
                below += exact < t
        group = rng.permutation(n).astype(np.int64)
        pre_off, packed = k.prefix_values(values, offsets, group, t, 12)
        sizes_off, pack_off = k.prefix_sizes(offsets, group, t)
        sketch = np.sum(in_slices(n, 3, lambda lo, hi: k.prefix_sketch(values, offsets, group, lo, hi, 12)),
                        axis=0, dtype=np.int32)
        sliced = np.empty(int(pack_off[-1]), np.uint64)
        in_slices(n, 3, lambda lo, hi: k.prefix_pack(values, offsets, group, pack_off, sketch, lo, hi, sliced))
        assert np.array_equal(sizes_off, pre_off) and np.array_equal(sliced, packed)
    assert below > 1000


def test_signature_segments_hold_every_pair_that_reaches_the_threshold():
    rng = np.random.default_rng(7)
    base = rng.integers(0, 2 ** 32, size=16, dtype=np.uint64).astype(np.uint32)
    sigs = []
    for _ in range(60):
        s = base.copy()
        s[rng.choice(16, size=rng.integers(0, 7), replace=False)] = rng.integers(0, 2 ** 32, dtype=np.uint64)
        sigs.append(s)
    sigs = np.array(sigs)
    for t in (0.5, 0.75, 0.8, 13 / 16, 1.0):
        off, tok = _segment_keys(sigs, t)
        for i in range(len(sigs)):
            for j in range(i + 1, len(sigs)):
                if float((sigs[i] == sigs[j]).mean()) >= t:
                    assert _shares(off, tok, i, j), (t, i, j)
    # 0.8 of 16 positions: 13 equal at least, 3 may differ: 4 segments of 4
    assert np.diff(_segment_keys(sigs, 0.8)[0]).tolist() == [4] * 60


def test_connected_components_of_a_long_shuffled_chain():
    n = 20_000
    perm = np.random.default_rng(1).permutation(n)
    u, v = perm[:-1], perm[1:]
    labels = [with_kernels("0", lambda: connected_components(n, u, v))]
    if NUMBA:
        labels.append(with_kernels("1", lambda: connected_components(n, u, v)))
    for lab in labels:
        assert lab.dtype == np.int64 and not lab.any()  # one component, labelled by its smallest node
    small = (np.array([5, 1, 3, 9]), np.array([1, 2, 4, 8]))  # 1-2-5, 3-4, 8-9; 0, 6, 7 alone
    for kernels in ["0"] + (["1"] if NUMBA else []):
        got = with_kernels(kernels, lambda: connected_components(10, *small))
        assert got.tolist() == [0, 1, 1, 3, 3, 1, 6, 7, 8, 8]


def test_the_default_cap_is_in_the_default_rules():
    with open(os.path.join(os.path.dirname(__file__), "..", "rules", "default.yaml"), encoding="utf-8") as fh:
        rules = yaml.safe_load(fh)
    spec = next(s for s in rules["pipeline"] if s["stage"] == "minhash_dedup")
    default = inspect.signature(MinHashDedup).parameters["max_pairwise_component"].default
    assert spec["max_pairwise_component"] == default == 100
    with pytest.raises(ValueError, match="max_pairwise_component"):
        MinHashDedup(max_pairwise_component=0)


@pytest.mark.parametrize("params", [{}, {"verify_with": "signature"}])
def test_nodes_in_any_order_give_the_same_decisions(params):
    """verify_task no longer sorts the gathered rows (their texts) by doc_key: the decisions, their order and
    every tie (two documents with one id: d003 twice, the first by doc_key wins) are those of sorted nodes."""
    nodes, a, b = _chain_nodes(60, seed=7)
    ids = nodes.column("id").to_pylist()
    ids[10] = ids[3]
    nodes = nodes.set_column(nodes.column_names.index("id"), "id", pa.array(ids))
    sorted_run = MinHashDedup(max_pairwise_component=1, **params)._decide_chunk(nodes, a, b)
    perm = np.random.default_rng(3).permutation(nodes.num_rows)
    shuffled = MinHashDedup(max_pairwise_component=1, **params)._decide_chunk(nodes.take(pa.array(perm)), a, b)
    assert shuffled[0].equals(sorted_run[0]) and shuffled[1].equals(sorted_run[1])
    assert sorted_run[0].num_rows >= 10


@pytest.mark.skipif(not NUMBA, reason="compiled kernels only")
def test_shingle_sets_in_threads_equal_one_thread():
    from dataclean.dedup.minhash import shingle_sets

    nodes, _, _ = _chain_nodes(2500, seed=5)
    texts = nodes.column("text")
    one = shingle_sets(texts, 5, 5, threads=1)
    for threads in (2, 3):
        many = shingle_sets(texts, 5, 5, threads=threads)
        assert np.array_equal(many[0], one[0]) and np.array_equal(many[1], one[1])
    assert len(one[1]) == 2503 and one[1][-1] == len(one[0]) > 0
    assert one[1][-2] == one[1][-1]  # (the empty text: no shingle)


def test_one_task_runs_in_the_pool_even_before_it_is_up():
    """With workers > 1, even a single task runs in a pool process (its workers load the kernels; the driver
    never imports numba for it), and a later one reuses that pool; with workers=1 it runs in the driver."""
    from dataclean.exec.local import LocalExecutor

    ex = LocalExecutor(workers=2)
    try:
        first = ex.map(_pid, [0])[0]
        assert first != os.getpid() and first in set(ex._processes)
        workers = set(ex.map(_pid, [0, 1]))
        assert os.getpid() not in workers
        assert ex.map(_pid, [0])[0] in set(ex._processes)
    finally:
        ex.close()
    assert LocalExecutor(workers=1).map(_pid, [0]) == [os.getpid()]


def _pid(_):
    return os.getpid()


def test_numpy_hooking_gives_the_kernel_labels_and_gives_up_safely():
    from dataclean.stages.dedup_minhash import _hook_components

    rng = np.random.default_rng(11)
    n = 5000
    perm = rng.permutation(n)
    u = np.concatenate([perm[:2000], rng.integers(0, n, 3000)])
    v = np.concatenate([perm[1:2001], rng.integers(0, n, 3000)])
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components as bfs

    _, label = bfs(coo_matrix((np.ones(len(u)), (u, v)), shape=(n, n)), directed=False)
    smallest = np.full(label.max() + 1, n)
    np.minimum.at(smallest, label, np.arange(n))
    got = _hook_components(n, u, v)
    assert np.array_equal(got, smallest[label])  # (a component's label: its smallest node)
    assert np.array_equal(with_kernels("0", lambda: connected_components(n, u, v)), got)
    assert _hook_components(n, u, v, max_rounds=1) is None  # (a shuffled path needs more than one round)
    assert np.array_equal(_hook_components(4, np.array([3, 2]), np.array([2, 1])), [0, 1, 1, 1])


@pytest.mark.skipif(not NUMBA, reason="compiled kernels only")
def test_edges_verified_in_threads_equal_one_thread():
    nodes, a, b = _chain_nodes(60, seed=9)
    u, v = np.tile(a, 60), np.tile(b, 60)  # (106,200 edges: past the 100,000 where threads start)
    stage = MinHashDedup()
    one = with_kernels("1", lambda: stage._similarity_fn(nodes).pairs(u, v))
    stage.verify_threads = 2
    two = with_kernels("1", lambda: stage._similarity_fn(nodes).pairs(u, v))
    assert len(u) >= 100_000 and np.array_equal(one, two)
    assert one[0] == with_kernels("1", lambda: stage._similarity_fn(nodes)(int(a[0]), int(b[0])))


@pytest.mark.skipif(not NUMBA, reason="the compiled kernels need numba")
def test_gathered_shingle_sets_give_the_jaccards_of_the_texts(tmp_path):
    """The gather map tasks replace the candidates' texts by their shingle sets (large_binary); read back
    from Parquet and sliced, they give the verification the Jaccards the texts give."""
    from dataclean.dedup.minhash import shingle_hash_single, shingle_text
    from dataclean.exec.aggregate import _with_shingle_sets
    base = "the committee met on tuesday to discuss the new budget for the city library and its branches"
    texts = ["padding row", base, base.replace("tuesday", "monday"), "数据清洗流水线把网页文本变成训练语料，每一步都要说明理由",
             "数据清洗流水线把网页文本变成训练语料，每一步都要写明理由", "", "short text"]
    rows = pa.table({"id": [f"d{i}" for i in range(len(texts))], "text": texts})
    gathered = with_kernels("1", lambda: _with_shingle_sets(rows, 5, 5, 2))
    assert gathered.column_names == ["id", "shingle_set"]
    pq.write_table(gathered, tmp_path / "g.parquet")
    back = pq.read_table(tmp_path / "g.parquet").slice(1)  # (a slice: its offsets do not start at 0)
    stage = MinHashDedup()
    by_sets = with_kernels("1", lambda: stage._similarity_fn(back))
    by_text = with_kernels("1", lambda: stage._similarity_fn(rows.slice(1)))
    ref = [set(shingle_hash_single(t)) for t in shingle_text(pa.array(texts[1:])).to_pylist()]
    for i in range(len(ref)):
        for j in range(len(ref)):
            inter = len(ref[i] & ref[j])
            union = len(ref[i] | ref[j])
            want = 1.0 if union == 0 else inter / union
            assert by_sets(i, j) == by_text(i, j) == want, (i, j)
    # one word in 17 changed: 5 of the 13 word 5-grams differ on each side
    assert by_sets(0, 1) == 8 / 18
    assert by_sets(4, 4) == 1.0 and by_sets(4, 5) == 0.0
