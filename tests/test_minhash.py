"""MinHash library: normalization, shingles, datasketch-identical signatures, LSH band parameters and hashes."""
import importlib.util
import random

import datasketch
import numpy as np
import pyarrow as pa
import pytest
import xxhash
from datasketch.lsh import _optimal_param
from hypothesis import given, settings, strategies as st

from dataclean.dedup import (
    MAX_HASH,
    SCHEMES,
    band_hashes,
    compute_optimal_bands,
    estimate_jaccard,
    optimal_bands,
    permutations,
    shingle_hash,
    shingle_hash_single,
    shingle_hashes,
    shingle_text,
    shingles_single,
    signatures,
    to_lean_minhash,
)
from dataclean.dedup import minhash as mh


def norm(text):
    return shingle_text(pa.array([text], pa.string()))[0].as_py()


def sigs_of(texts, num_perm=128, seed=1, scheme="affine32"):
    values, offsets = shingle_hashes(shingle_text(pa.array(texts, pa.string())))
    return signatures(values, offsets, num_perm, seed, scheme=scheme)


# ---------------------------------------------------------------- normalization


def test_normalization_english():
    assert norm("Hello,  World! It's 2024 — the café’s ＡＢＣ costs $3.50.\n") == \
        "hello world it s 0000 the café s abc costs 0 00"


def test_normalization_chinese_fullwidth_digits_and_ideographic_space():
    assert norm("数据清洗，很重要！２０２４年\u3000ＧＰＴ-4模型。") == "数据清洗 很重要 0000年 gpt 0模型"
    assert norm("ひらがなとカタカナ・テスト！") == "ひらがなとカタカナ テスト"


def test_normalization_format_characters_are_deleted_separators_collapsed():
    assert norm("zero\u200bwidth soft\u00adhyphen\tand\u00a0nbsp…") == "zerowidth softhyphen and nbsp"
    assert norm("Ⅻ ① ²") == "xii 0 0"  # NFKC first, then digits


def test_normalization_null_and_punctuation_only_give_empty():
    assert shingle_text(pa.array([None, "", "  ¿¡!!  ", "🙂🙂"], pa.string())).to_pylist() == ["", "", "", ""]


# ---------------------------------------------------------------- shingles


def test_shingle_hash_is_the_documented_formula():
    # the module docstring's definition, written out independently
    def mix(h):
        h ^= h >> 30
        h = (h * 0xBF58476D1CE4E5B9) % 2**64
        h ^= h >> 27
        h = (h * 0x94D049BB133111EB) % 2**64
        return h ^ (h >> 31)

    h = 0x9E3779B97F4A7C15 ^ 2
    for tok in ("hello", "world"):
        h = ((h ^ xxhash.xxh3_64_intdigest(tok.encode(), seed=0)) * 0xFF51AFD7ED558CCD) % 2**64
        h ^= h >> 31
    assert shingle_hash(("hello", "world")) == mix(h) & 0xFFFFFFFF == 1450837401
    assert shingle_hash(("hello",)) == 2163169119


def test_english_document_word_5_grams():
    text = norm("The quick brown fox jumps over the lazy dog, again and again.")
    assert text == "the quick brown fox jumps over the lazy dog again and again"
    shingles = shingles_single(text)
    assert len(shingles) == 12 - 5 + 1
    assert shingles[0] == ("the", "quick", "brown", "fox", "jumps")
    assert shingles[-1] == ("lazy", "dog", "again", "and", "again")
    values, offsets = shingle_hashes(pa.array([text]))
    assert offsets.tolist() == [0, 8]
    assert values.dtype == np.uint32
    assert values.tolist() == shingle_hash_single(text) == [shingle_hash(s) for s in shingles]


def test_chinese_document_character_5_grams_across_punctuation():
    text = norm("数据清洗很重要。我们需要高质量的数据！")
    assert text == "数据清洗很重要 我们需要高质量的数据"
    shingles = shingles_single(text)
    assert len(shingles) == 17 - 5 + 1  # 17 Han characters; n-grams run across the sentence end
    assert shingles[4] == ("很", "重", "要", "我", "们")
    values, offsets = shingle_hashes(pa.array([text]))
    assert offsets.tolist() == [0, 13]
    assert values.tolist() == shingle_hash_single(text)


def test_japanese_kana_are_characters_and_mixed_documents_get_both_kinds():
    assert shingles_single("ひらがなとカタカナ") == [("ひ", "ら", "が", "な", "と"), ("ら", "が", "な", "と", "カ"),
                                                 ("が", "な", "と", "カ", "タ"), ("な", "と", "カ", "タ", "カ"),
                                                 ("と", "カ", "タ", "カ", "ナ")]
    text = norm("GPT-4模型 is good")
    assert shingles_single(text) == [("gpt", "0", "is", "good"), ("模", "型")]  # words first, then characters
    values, offsets = shingle_hashes(pa.array([text]))
    assert values.tolist() == shingle_hash_single(text)


def test_short_documents_get_one_shingle_empty_ones_none():
    texts = ["hello world", "", None, "数据", "a b c d e", "!!!"]
    values, offsets = shingle_hashes(shingle_text(pa.array(texts, pa.string())))
    assert np.diff(offsets).tolist() == [1, 0, 0, 1, 1, 0]
    assert values.tolist() == [shingle_hash(("hello", "world")), shingle_hash(("数", "据")),
                               shingle_hash(("a", "b", "c", "d", "e"))]
    # no shingles -> datasketch's empty MinHash: the caller must use exact dedup only for such documents
    sig = signatures(values, offsets)
    assert (sig[[1, 2, 5]] == MAX_HASH).all()
    assert np.array_equal(sig[1], datasketch.MinHash(128, seed=1).hashvalues)


def test_ngram_sizes_are_parameters_and_sliced_input_is_read_correctly():
    arr = pa.array(["x", "one two three four", "中文字符串测试", "y"])
    values, offsets = shingle_hashes(arr.slice(1, 2), word_ngram=3, char_ngram=2)
    assert np.diff(offsets).tolist() == [2, 6]
    assert values.tolist() == shingle_hash_single("one two three four", 3, 2) + shingle_hash_single("中文字符串测试", 3, 2)
    chunked = pa.chunked_array([arr.slice(0, 2), arr.slice(2)])
    assert np.array_equal(shingle_hashes(chunked)[0], shingle_hashes(arr)[0])


# ---------------------------------------------------------------- datasketch compatibility

DOCS = [
    "The quick brown fox jumps over the lazy dog while the cat sleeps on the warm windowsill all day.",
    "数据清洗是预训练语料构建中最重要的步骤之一，重复文档会浪费算力。",
    "Mixed 中英文 document with GPT-4 模型 and numbers 12345.",
    "short",
    "",
]


@pytest.mark.parametrize("scheme", SCHEMES)
@pytest.mark.parametrize("num_perm,seed", [(128, 1), (112, 42), (7, 3)])
def test_signatures_equal_datasketch_hashvalues(scheme, num_perm, seed):
    texts = [norm(t) for t in DOCS]
    values, offsets = shingle_hashes(pa.array(texts))
    sig = signatures(values, offsets, num_perm, seed, scheme=scheme)
    assert sig.shape == (len(texts), num_perm) and sig.dtype == np.uint64
    for row, text in zip(sig, texts):
        m = datasketch.MinHash(num_perm=num_perm, seed=seed, hashfunc=shingle_hash, scheme=scheme)
        m.update_batch(shingles_single(text))
        assert np.array_equal(m.hashvalues.astype(np.uint64), row)
    a, b = permutations(num_perm, seed, scheme)
    ref = datasketch.MinHash(num_perm=num_perm, seed=seed, scheme=scheme).permutations
    assert np.array_equal(a, ref[0]) and np.array_equal(b, ref[1])


@pytest.mark.parametrize("scheme", SCHEMES)
def test_raw_32bit_values_including_extremes_and_chunk_boundaries(scheme, monkeypatch):
    rng = np.random.default_rng(7)
    values = np.concatenate([[0, 1, 2**32 - 1, 2**31], rng.integers(0, 2**32, 3000)]).astype(np.uint32)
    offsets = np.array([0, 4, 4, 1000, 1001, 2999, 3004], np.int64)  # includes an empty document
    whole = signatures(values, offsets, 64, 5, scheme=scheme)
    monkeypatch.setattr(mh, "CHUNK_ELEMENTS", 64 * 37)  # 37 shingles per chunk: documents span chunks
    assert np.array_equal(signatures(values, offsets, 64, 5, scheme=scheme), whole)
    for i in range(len(offsets) - 1):
        m = datasketch.MinHash(num_perm=64, seed=5, hashfunc=int, scheme=scheme)
        m.update_batch(values[offsets[i]:offsets[i + 1]].tolist())
        assert np.array_equal(m.hashvalues.astype(np.uint64), whole[i])


def test_mersenne_fold_equals_modulo_on_edge_values():
    p = 2**61 - 1
    xs = [k * p + d for k in range(9) for d in (-1, 0, 1) if 0 <= k * p + d < 2**64] + [2**64 - 1, 2**61, 2**63]
    x = np.array(xs, np.uint64)
    # a = x, h = 1, b = 0: the permutation step sees exactly x
    out = mh._permute_legacy(np.ones(1, np.uint64), x, np.zeros(len(xs), np.uint64),
                             np.empty((len(xs), 1), np.uint64), np.empty((len(xs), 1), np.uint64))
    assert out[:, 0].tolist() == [(v % p) & 0xFFFFFFFF for v in xs]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_lean_minhash_jaccard_equals_estimate(scheme):
    sig = sigs_of(DOCS[:3] + [DOCS[0].replace("cat", "dog")], seed=9, scheme=scheme)
    lean = [to_lean_minhash(row, seed=9, scheme=scheme) for row in sig]
    assert lean[0].scheme == scheme and np.array_equal(lean[0].hashvalues.astype(np.uint64), sig[0])
    for i in range(len(sig)):
        for j in range(len(sig)):
            assert lean[i].jaccard(lean[j]) == pytest.approx(float(estimate_jaccard(sig[i], sig[j])), abs=0)
    est = estimate_jaccard(sig[:2], sig[[3, 1]])
    assert est.shape == (2,) and est[1] == 1.0 and 0.3 < est[0] < 1.0


def _random_document(rng, vocabulary, n):
    return [rng.choice(vocabulary) for _ in range(n)]


@pytest.mark.parametrize("scheme", SCHEMES)
def test_near_duplicate_estimate_close_to_exact_jaccard(scheme):
    rng = random.Random(0)
    vocabulary = ("data model train token corpus filter quality score web page text language english chinese "
                  "duplicate near exact hash band signature shingle window batch arrow column pipeline").split()
    words = _random_document(rng, vocabulary, 400)
    edited = list(words)
    for i in rng.sample(range(400), 6):
        edited[i] = "edited"
    han = "的一是在不了有和人这中大为上个国我以要他时来用们生到作地于出就分对成会可也你"
    chars = _random_document(rng, han, 500)
    chars_edited = list(chars)
    for i in rng.sample(range(500), 8):
        chars_edited[i] = "改"
    texts = [" ".join(words), " ".join(edited), "".join(chars), "".join(chars_edited)]
    sig = sigs_of(texts, scheme=scheme)
    for a, b in ((0, 1), (2, 3)):
        sa, sb = set(shingle_hash_single(norm(texts[a]))), set(shingle_hash_single(norm(texts[b])))
        exact = len(sa & sb) / len(sa | sb)
        assert 0.6 < exact < 0.95
        assert abs(float(estimate_jaccard(sig[a], sig[b])) - exact) < 0.1
    assert estimate_jaccard(sig[0], sig[2]) < 0.05  # English vs Chinese: nothing in common


def test_datasketch_lsh_finds_the_near_duplicate_with_our_signatures_and_bands():
    sig = sigs_of([DOCS[0] * 3, (DOCS[0] * 3).replace("warm", "cold", 1), DOCS[1]])
    lsh = datasketch.MinHashLSH(num_perm=128, params=optimal_bands(0.5, 128))
    for i, row in enumerate(sig):
        lsh.insert(f"doc{i}", to_lean_minhash(row))
    assert sorted(lsh.query(to_lean_minhash(sig[0]))) == ["doc0", "doc1"]


# ---------------------------------------------------------------- LSH bands


@pytest.mark.parametrize("threshold,num_perm,weights", [
    (0.8, 128, (0.5, 0.5)), (0.5, 128, (0.5, 0.5)), (0.7, 112, (0.5, 0.5)), (0.9, 128, (0.3, 0.7)),
    (0.85, 120, (0.7, 0.3)), (0.6, 64, (0.1, 0.9)), (0.95, 256, (0.5, 0.5)),
])
def test_optimal_bands_agrees_with_datasketch(threshold, num_perm, weights):
    assert compute_optimal_bands(threshold, num_perm, *weights) == _optimal_param(threshold, num_perm, *weights)
    assert optimal_bands(threshold, num_perm, *weights) == _optimal_param(threshold, num_perm, *weights)


def test_band_hashes_deterministic_band_index_mixed_in_and_documented():
    sig = np.full((2, 8), 7, np.uint64)
    sig[1, 5] = 8
    h = band_hashes(sig, bands=2, rows=4)
    assert h.shape == (2, 2) and h.dtype == np.uint64
    assert np.array_equal(h, band_hashes(sig.copy(), 2, 4))
    assert h[0, 0] != h[0, 1]  # same values, different band
    assert h[0, 0] == h[1, 0] and h[0, 1] != h[1, 1]  # a changed value changes only its own band
    # pinned, and equal to the docstring's formula written out
    assert band_hashes(np.arange(8, dtype=np.uint64).reshape(1, 8), 2, 4).tolist() == \
        [[13755084856499853376, 15373677960954863182]]

    def fin(h):
        h ^= h >> 30
        h = (h * 0xBF58476D1CE4E5B9) % 2**64
        h ^= h >> 27
        h = (h * 0x94D049BB133111EB) % 2**64
        return h ^ (h >> 31)

    h = fin(0x6A09E667F3BCC909 + 1)
    for v in (4, 5, 6, 7):
        h = ((h ^ v) * 0xFF51AFD7ED558CCD) % 2**64
        h ^= h >> 31
    assert fin(h) == 15373677960954863182
    with pytest.raises(ValueError):
        band_hashes(sig, 3, 3)


# ---------------------------------------------------------------- properties


@settings(max_examples=150, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=60),
                          st.text(alphabet="的一是在不了 ひらカタ abc,.!1２\u200b\u3000\n", max_size=40)), max_size=6))
def test_any_unicode_gives_consistent_offsets_and_matches_the_reference(texts):
    raw = pa.array(texts, pa.string())
    normalized = shingle_text(raw)
    for source in (raw, normalized):  # raw text must not crash either
        values, offsets = shingle_hashes(source)
        assert values.dtype == np.uint32 and offsets.dtype == np.int64
        assert len(offsets) == len(texts) + 1 and offsets[0] == 0 and offsets[-1] == len(values)
        assert (np.diff(offsets) >= 0).all()
    for i, text in enumerate(normalized.to_pylist()):
        assert values[offsets[i]:offsets[i + 1]].tolist() == shingle_hash_single(text)
        assert (offsets[i + 1] == offsets[i]) == (text == "")
    sig = signatures(values, offsets, 16)
    assert sig.shape == (len(texts), 16)


# ---------------------------------------------------------------- compiled kernels (numba) = numpy/Arrow code

# English, Chinese (full-width punctuation and digits: NFKC without Arrow), Japanese, mixed, empty, short, and
# the characters where the per-code-point tables matter: NFKC that composes across characters (e + U+0301,
# Hangul jamo), NFKC expansions (ﬀ, ㎏, …, ﷺ), case mappings that change the UTF-8 length (İ, Ⱥ), final sigma,
# format characters, RE2 \s and Arrow-only whitespace, digits of other scripts, supplementary Han.
KERNEL_TEXTS = [
    "The harbour town sits at the mouth of a slow green river, where fishing boats land their catch.",
    "这座港口小镇位于一条缓慢的绿色河流入海口，三百年来渔船一直在这里卸下渔获！（２０２４年）",
    "カタカナとひらがな、そして漢字。ﾊﾝｶｸ ｶﾀｶﾅ",
    "Mixed: 中文 words and English words 混合 in one line 123 ４５６",
    "", "ok", "OK!", "!!!", "🙂", " \t\n ",
    "Cafe\u0301 cafe\u0301 CAFÉ ﬀ ㎏ … ﷺ Å Å ＡＢＣ",
    "\u1100\u1161\u11a8 \uac00\u11a8 한국어 텍스트",
    "İstanbul ȺȾ ΣΑΣ σας ǅ ẞ",
    "zero\u200bwidth soft\u00adhyphen \ufeffbom a\u2060b",
    "\u3000 lead\u00a0nbsp\u2003em\u000bvt\u000cff\u001cfs\u2028ls trail \u3000",
    "٣٤٥ ५६७ 𝟘𝟙𝟚 ⑴ ①",
    "\U00020000\U0002a6e0𠀀 〇 漢字",
    "a" * 300 + " " + "b" * 17 + " " + "c" * 129,
]


def _kernels_on_off(fn):
    """fn() with the compiled kernels, then with the numpy/Arrow code (DATACLEAN_KERNELS=0)."""
    import os

    from dataclean.text import kernels

    before = os.environ.get(kernels.ENV)
    try:
        os.environ[kernels.ENV] = "1"
        assert mh.kernels_enabled()
        on = fn()
        os.environ[kernels.ENV] = "0"
        assert not mh.kernels_enabled()
        off = fn()
    finally:
        if before is None:
            del os.environ[kernels.ENV]
        else:
            os.environ[kernels.ENV] = before
    return on, off


def _all_outputs(texts):
    raw = pa.array(texts, pa.string())
    normalized = shingle_text(raw)
    values, offsets = shingle_hashes(normalized)
    sigs = signatures(values, offsets, 128, 1)
    legacy = signatures(values, offsets, 16, 3, scheme="legacy")
    from dataclean.stages.dedup_exact import content_hash, content_key_text
    return (normalized, values, offsets, sigs, legacy, band_hashes(sigs, 16, 8), content_key_text(raw),
            content_hash(raw))


def _assert_same(on, off):
    for a, b in zip(on, off):
        if isinstance(a, np.ndarray):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        else:
            assert a.type == b.type and a.equals(b), (a, b)


needs_numba = pytest.mark.skipif(importlib.util.find_spec("numba") is None, reason="numba is not installed")


@needs_numba
def test_kernels_equal_the_arrow_and_numpy_code_on_every_kind_of_text():
    on, off = _kernels_on_off(lambda: _all_outputs(KERNEL_TEXTS))
    _assert_same(on, off)
    normalized = on[0].to_pylist()
    assert normalized[1].startswith("这座港口小镇位于一条缓慢的绿色河流入海口 三百年来") and normalized[1].endswith("0000年")
    assert normalized[10] == "café café café ff kg صلى الله عليه وسلم å å abc"
    # RE2's \s is space, \t, \n, \f, \r (not \v): other whitespace is only trimmed at the ends
    assert on[6].to_pylist()[14] == "lead\u00a0nbsp\u2003em\x0bvt ff\x1cfs\u2028ls trail"


@needs_numba
def test_kernels_map_every_ascii_byte_as_the_fallback_does():
    """The kernels' ASCII table (ascii_maps) against the Arrow chains: every ASCII character at the start, in the
    middle and at the end of a document, next to letters, digits, spaces and CJK."""
    chars = [chr(b) for b in range(128)]
    texts = [c for c in chars] + [f"{c}Ab 9{c}中{c}" for c in chars] + [f"x{c}{c} y" for c in chars] + \
        ["".join(chars), "".join(reversed(chars)), "\x1c\x1f lead", "trail \x1c\x1d", "\x0b\x0c\t\r\n"]
    on, off = _kernels_on_off(lambda: _all_outputs(texts))
    _assert_same(on, off)


@needs_numba
def test_kernel_xxh3_64_equals_xxhash_at_every_length_path():
    k = mh.mh_kernels()
    rng = np.random.default_rng(7)
    lengths = np.r_[np.arange(0, 260), [500, 1023, 1024, 1025, 2048, 4000]]
    data = rng.integers(0, 256, int(lengths.sum()), dtype=np.uint8)
    offsets = np.r_[0, np.cumsum(lengths)].astype(np.int64)
    got = k.xxh3_64_many(data, offsets, mh.SECRET_U8)
    assert got.tolist() == [xxhash.xxh3_64_intdigest(data[offsets[i]:offsets[i + 1]].tobytes())
                            for i in range(len(lengths))]


@needs_numba
def test_kernel_nfkc_tables_agree_with_arrow_nfkc_in_context():
    # every character the kernel normalizes itself (NFKC_MAPPED), between inert neighbours, against Arrow's NFKC
    from dataclean.dedup import _minhash_numba as k
    _, classes, _, _ = mh._char_maps()
    mapped = np.flatnonzero(classes & k.NFKC_MAPPED)
    assert len(mapped) > 1000 and all(classes[ord(c)] & k.NFKC_MAPPED for c in "，！（）：；？\u00a0\u3000…ＡＢ１")
    rng = random.Random(3)
    texts = ["e" + chr(c) + "e" + chr(rng.choice(mapped)) + "한" for c in mapped.tolist()]
    on, off = _kernels_on_off(lambda: shingle_text(pa.array(texts, pa.string())))
    assert on.equals(off)


@needs_numba
@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text(max_size=50),
                          st.lists(st.sampled_from(KERNEL_TEXTS + list("，。！a Ａ\u0301\u1161\u200b\u3000é")),
                                   max_size=8).map("".join)), max_size=6))
def test_kernels_equal_the_fallback_on_any_unicode(texts):
    on, off = _kernels_on_off(lambda: _all_outputs([t if t is not None else "" for t in texts]))
    _assert_same(on, off)
    raw = pa.array(texts, pa.string())  # nulls: shingle_text gives "" either way
    a, b = _kernels_on_off(lambda: shingle_text(raw))
    assert a.equals(b)
    # shingles of text that was not normalized (a caller's mistake) are the same either way too
    a, b = _kernels_on_off(lambda: shingle_hashes(raw))
    assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


@needs_numba
def test_kernel_unique_sets_equal_numpy_unique():
    # insertion sort below 48 values, radix sort above (passes skipped when a byte is the same everywhere)
    k = mh.mh_kernels()
    rng = np.random.default_rng(5)
    lengths = np.array([0, 1, 2, 47, 48, 49, 300, 5, 1000, 64])
    values = rng.integers(0, 2**32, int(lengths.sum()), dtype=np.uint64).astype(np.uint32)
    values[::5] = values[::5] & 0xFF
    values[1040:1340] = 7  # one document of a single repeated value
    offsets = np.r_[0, np.cumsum(lengths)].astype(np.int64)
    sets, set_offsets = k.unique_sets(values, offsets)
    for i in range(len(lengths)):
        assert sets[set_offsets[i]:set_offsets[i + 1]].tolist() == np.unique(values[offsets[i]:offsets[i + 1]]).tolist()


def test_optimal_bands_are_remembered_on_disk(tmp_path, monkeypatch):
    import json

    from dataclean.dedup import minhash

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    path = tmp_path / minhash.BANDS_CACHE
    optimal_bands.cache_clear()
    assert optimal_bands(0.8, 128, 0.05, 0.95) == (16, 8)
    assert json.loads(path.read_text()) == {"0.8,128,0.05,0.95": [16, 8]}
    # read back from the file, not computed: an entry written there is what comes back
    path.write_text(json.dumps({"0.8,128,0.05,0.95": [8, 16]}))
    optimal_bands.cache_clear()
    assert optimal_bands(0.8, 128, 0.05, 0.95) == (8, 16)
    # an entry that cannot be right (b * r over num_perm) or a broken file is recomputed and rewritten
    for text in (json.dumps({"0.8,128,0.05,0.95": [16, 16]}), "{not json"):
        path.write_text(text)
        optimal_bands.cache_clear()
        assert optimal_bands(0.8, 128, 0.05, 0.95) == (16, 8)
        assert json.loads(path.read_text())["0.8,128,0.05,0.95"] == [16, 8]
    # another parameter set is added beside the entries already there
    optimal_bands.cache_clear()
    assert optimal_bands(0.5, 64, 0.5, 0.5) == compute_optimal_bands(0.5, 64, 0.5, 0.5)
    assert set(json.loads(path.read_text())) == {"0.8,128,0.05,0.95", "0.5,64,0.5,0.5"}
    optimal_bands.cache_clear()
