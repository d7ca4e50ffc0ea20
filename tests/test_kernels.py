"""The compiled kernels (dataclean/text/kernels.py) give exactly what the pyarrow/numpy code gives.

Each test runs the same input with ``DATACLEAN_KERNELS=1`` and ``=0`` (the path used without numba) and
compares bit for bit: words, word counts, n-gram signals, duplicate lines and paragraphs, Gopher line
statistics, and the signals and decisions of the four rule stages. ``benchmarks/profile_rules.py --check`` does
the same on bench shards against the code before the kernels.
"""
import contextlib
import importlib.util
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from dataclean.stages.c4 import C4, count_words
from dataclean.stages.fineweb import FineWebQuality
from dataclean.stages.gopher import (BULLET_SIGNS, GopherQuality, GopherRepetition, _dup_fracs, _Words,
                                     ngram_signals, PARAGRAPH_BREAK)
from dataclean.text import kernels, lines_batch, words_batch

numba = pytest.importorskip("numba")

# Characters that exercise every branch: word characters, apostrophes, Han, kana, Hangul, marks, separators,
# Arrow whitespace that RE2's \s is not, bullets, dots and ellipses, newlines.
TRICKY = list("aZé9_'’-*+#.…!?。\n\n\t \u3000\u00a0\x0b\x0c\r\x1c\u2028漢字〇ひらがなカタカナｶｰ한국\u0301·•■※★✓{}[]") + \
    ["...", "\n\n", "\n \n", "\n\u3000\n", "[1]", "[edit]", "the ", "THE ", "Of ", "\u212aey ", "İ", "的", "- ", "* ",
     "lorem ipsum", "🙂",
     "\U00020000", "\U0002a6e0"]
texts_strategy = st.lists(st.one_of(st.lists(st.sampled_from(TRICKY), max_size=40).map("".join),
                                    st.text(max_size=30)), min_size=1, max_size=6)


def _same(a, b) -> bool:
    """Same type, validity and values; floats compared by their bits."""
    a = a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a
    b = b.combine_chunks() if isinstance(b, pa.ChunkedArray) else b
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        a, b = np.asarray(a), np.asarray(b)
        if a.dtype.kind == "f" or b.dtype.kind == "f":
            a, b = a.astype(np.float64), b.astype(np.float64)
            return a.shape == b.shape and np.array_equal(a.view(np.uint64), b.view(np.uint64))
        return np.array_equal(a, b)
    if a.type != b.type or len(a) != len(b):
        return False
    if pa.types.is_floating(a.type):
        va, vb = a.is_valid().to_numpy(zero_copy_only=False), b.is_valid().to_numpy(zero_copy_only=False)
        xa = a.fill_null(0).to_numpy(zero_copy_only=False).view(np.uint64)
        xb = b.fill_null(0).to_numpy(zero_copy_only=False).view(np.uint64)
        return np.array_equal(va, vb) and np.array_equal(xa[va], xb[vb])
    return a.equals(b)


@contextlib.contextmanager
def kernels_env(value: str):
    """``DATACLEAN_KERNELS=value`` inside the block (a context manager, not monkeypatch: hypothesis runs many
    examples per test function)."""
    before = os.environ.get(kernels.ENV)
    os.environ[kernels.ENV] = value
    try:
        yield
    finally:
        if before is None:
            del os.environ[kernels.ENV]
        else:
            os.environ[kernels.ENV] = before


def both(fn):
    """fn() with the kernels on, then off."""
    with kernels_env("1"):
        assert kernels.enabled()
        on = fn()
    with kernels_env("0"):
        assert not kernels.enabled()
        off = fn()
    return on, off


def test_switch(monkeypatch):
    monkeypatch.setenv(kernels.ENV, "off")
    assert not kernels.enabled()
    monkeypatch.setenv(kernels.ENV, "1")
    assert kernels.enabled()
    monkeypatch.setitem(kernels._state, "mod", None)  # as when numba cannot be imported
    assert not kernels.enabled()
    assert words_batch(pa.array(["Don't stop", "中文"])).to_pylist() == [["Don't", "stop"], ["中", "文"]]


def test_char_table_classes():
    t = kernels.char_table()
    assert t.shape == (0x110000,) and t.dtype == np.uint8
    for c in "aZé9ß한": assert t[ord(c)] & kernels.WORD_CHAR
    assert t[ord("\u0301")] & kernels.WORD_CHAR and not t[ord("\u0301")] & kernels.LETTER  # a mark
    for c in "'’": assert t[ord(c)] == kernels.APOSTROPHE
    assert t[ord("漢")] >> kernels.ISO_SHIFT & 3 == 1 and t[ord("〇")] >> kernels.ISO_SHIFT & 3 == 1
    assert t[ord("ひ")] >> kernels.ISO_SHIFT & 3 == 2 and t[ord("ｶ")] >> kernels.ISO_SHIFT & 3 == 3
    for c in " \t\n\u3000\u00a0\x1c": assert t[ord(c)] & kernels.SPACE
    assert not t[ord("_")] & kernels.WORD_CHAR and not t[ord("🙂")] & kernels.WORD_CHAR


def test_words_examples():
    texts = pa.array(["Don't stop — it's 2024, e.g. 3.5 apples!", "ひらがなとカタカナの漢字テスト", "'quoted' ''' x",
                      None, "", "GPT-4模型", "カタ・カナ", "한국어 문장입니다.", "🙂🙂 !!", "a\u0301b c'", "’’a’’"])
    on, off = both(lambda: words_batch(texts))
    assert on.equals(off) and on.type == pa.list_(pa.string())
    assert on[1].as_py() == ["ひらがなと", "カタカナ", "の", "漢", "字", "テスト"]
    assert on[6].as_py() == ["カタ", "カナ"]


def test_words_of_sliced_and_chunked_input():
    arr = pa.array(["zero", "one two", "三四", "five"])
    on, off = both(lambda: words_batch(arr.slice(1, 2)))
    assert on.to_pylist() == off.to_pylist() == [["one", "two"], ["三", "四"]]
    chunked = pa.chunked_array([arr.slice(0, 2), arr.slice(2)])
    on, off = both(lambda: words_batch(chunked))
    assert on.equals(off)


def test_invalid_utf8_falls_back():
    bad = pa.StringArray.from_buffers(2, pa.py_buffer(np.array([0, 2, 4], np.int32)), pa.py_buffer(b"ab\xff\xfe"))
    assert kernels.words(bad) is None and kernels.count_words(bad) is None


@settings(max_examples=100, deadline=None)
@given(texts_strategy)
def test_words_and_counts_match(texts):
    arr = pa.array(texts, pa.string())
    on, off = both(lambda: (words_batch(arr), count_words(arr)))
    assert on[0].equals(off[0]), (texts, on[0].to_pylist(), off[0].to_pylist())
    assert _same(on[1], off[1])
    assert list(on[1]) == [len(w) for w in on[0].to_pylist()]


@settings(max_examples=100, deadline=None)
@given(texts_strategy)
def test_line_and_paragraph_duplicates_match(texts):
    import pyarrow.compute as pc
    arr = pa.array(texts, pa.string())
    n = len(arr)
    assert _same(kernels.dup_fracs(arr, False)[0], _dup_fracs(lines_batch(arr), n)[0])
    assert _same(kernels.dup_fracs(arr, False)[1], _dup_fracs(lines_batch(arr), n)[1])
    paras = _dup_fracs(pc.split_pattern_regex(arr, PARAGRAPH_BREAK), n)
    got = kernels.dup_fracs(arr, True)
    assert _same(got[0], paras[0]) and _same(got[1], paras[1]), texts


@settings(max_examples=100, deadline=None)
@given(texts_strategy)
def test_gopher_line_statistics_match(texts):
    import pyarrow.compute as pc
    from dataclean.stages.gopher import BULLET_LINE, ELLIPSIS, ELLIPSIS_LINE, _count
    arr = pa.array(texts, pa.string())
    lines = lines_batch(arr)
    flat = lines.flatten()
    parent = np.repeat(np.arange(len(arr)), np.diff(lines.offsets.to_numpy()))

    def per_doc(mask):
        return np.bincount(parent, weights=mask, minlength=len(arr)).astype(np.int64)

    expected = np.stack([
        per_doc(pc.utf8_length(pc.utf8_trim_whitespace(flat)).to_numpy(zero_copy_only=False) > 0),
        per_doc(pc.match_substring_regex(flat, BULLET_LINE).to_numpy(zero_copy_only=False)),
        per_doc(pc.match_substring_regex(flat, ELLIPSIS_LINE).to_numpy(zero_copy_only=False)),
        pc.count_substring(arr, "#").to_numpy(zero_copy_only=False).astype(np.int64),
        _count(arr, ELLIPSIS)], axis=1)
    assert np.array_equal(kernels.gopher_lines(arr, BULLET_SIGNS), expected), texts


def test_gopher_line_statistics_examples():
    arr = pa.array(["• one\n- two\n-three\n  * four\n\u3000★ five", "wait...\nmore…  \n......\n\n…… x", "# a ## b", ""])
    got = kernels.gopher_lines(arr, BULLET_SIGNS)
    assert got.tolist() == [[5, 4, 0, 0, 0], [4, 0, 3, 0, 4], [1, 0, 0, 3, 0], [0, 0, 0, 0, 0]]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.lists(st.integers(0, 4), max_size=40), min_size=1, max_size=5))
def test_ngram_signals_match(docs):
    """Small vocabularies, so n-grams repeat and overlap, with ties between the most frequent ones."""
    offsets = np.zeros(len(docs) + 1, np.int64)
    np.cumsum([len(d) for d in docs], out=offsets[1:])
    codes = np.array([c for d in docs for c in d], np.int32)
    length = (codes % 3 + 1).astype(np.int64)
    on, off = both(lambda: ngram_signals(codes, length, offsets))
    assert on.keys() == off.keys()
    for k in on:
        assert _same(on[k], off[k]), (k, docs, on[k], off[k])


def _stage_outputs(stage, batch):
    result = stage(batch)
    d = result.decisions
    return result.batch, [] if d is None else [d.rule, d.reason, d.value, d.threshold, d.detail]


STAGES = [
    lambda: GopherRepetition(),
    lambda: GopherRepetition(by_lang={"zh": {"max_dup_5gram_char_frac": 0.5}}),
    lambda: GopherQuality(),
    lambda: GopherQuality(line_rules_min_lines=2, stop_words_langs=["en"],
                          by_lang={"zh": {"min_mean_word_length": None, "stop_words": ["的", "了", "the"]}}),
    lambda: GopherQuality(stop_words=["the", "key", "i̇", "é"], min_stop_words=1),
    lambda: C4(),
    lambda: C4(unwrap_lines=True, curly_bracket_sources=["web"],
               by_lang={"zh": {"end_marks": '.!?"。！？…”」』', "min_words_per_line": 7, "trim_unterminated": True}}),
    lambda: FineWebQuality(),
    lambda: FineWebQuality(unwrap_lines=True, paragraph_sentences=2,
                           by_lang={"zh": {"end_marks": ".'\"!?。！？…”」』", "short_line_length": 13}}),
]


@pytest.mark.parametrize("make", STAGES)
@settings(max_examples=20, deadline=None)
@given(texts=texts_strategy, langs=st.lists(st.sampled_from(["en", "zh", None]), min_size=6, max_size=6))
def test_stages_match(make, texts, langs):
    batch = pa.RecordBatch.from_pydict({"text": pa.array(texts, pa.string()),
                                        "lang": pa.array(langs[:len(texts)], pa.string()),
                                        "source": pa.array(["web"] * len(texts), pa.string())})
    (b_on, d_on), (b_off, d_off) = both(lambda: _stage_outputs(make(), batch))
    assert b_on.schema.names == b_off.schema.names
    for name in b_on.schema.names:
        assert _same(b_on.column(name), b_off.column(name)), (name, texts)
    assert len(d_on) == len(d_off)
    for x, y in zip(d_on, d_off):
        assert _same(x, y), texts


def test_words_class_shares_the_codes():
    """The n-gram kernel is fed the same dictionary codes either way."""
    w = words_batch(pa.array(["a b a b a b c", "x y x y"]))
    words = _Words(w)
    assert words.codes.tolist() == [0, 1, 0, 1, 0, 1, 2, 3, 4, 3, 4]


# -- the normalize stage ----------------------------------------------------------------------------------------

from dataclean.stages.normalize import Normalize  # noqa: E402
from dataclean.tokens import estimate_tokens, token_features  # noqa: E402

# what the stage's chain handles one by one: controls (C0, DEL, zero-width, BOM), \r and \r\n, odd spaces,
# spaces and tabs before newlines, blank-line runs, Arrow whitespace at the ends; and characters a normal form
# changes or that compose with the one before (combining marks, Hangul jamo, a Tamil vowel sign, singletons,
# compatibility forms, a CJK compatibility ideograph)
NORM_TRICKY = list("a é\r\n\t \u00a0\u2009\u202f\u3000\x00\x07\x0b\x0c\x1f\x7f\u200b\u200d\ufeff\u2028\u0085"
                   "\u0301\u0327\u1100\u1161\u11a8\uac00\u0bc6\u0bbe\u212b\u2126ＡＢ１，。ﬁ①\uf900中文ß") + \
    ["\r\n", "\n\n\n\n", " \n", "\t\n", "\n \n", "e\u0301", "\u1100\u1161\u11a8", "  ", "\r\r\n"]
norm_texts = st.lists(st.one_of(st.lists(st.sampled_from(NORM_TRICKY), max_size=40).map("".join),
                                st.text(max_size=30)), min_size=1, max_size=6)
NORM_OPTIONS = [dict(), dict(form="NFKC", max_blank_lines=0), dict(form="NFD", remove_controls=False),
                dict(form="NFKD", fix_spaces=False), dict(form="none", max_blank_lines=5)]


@pytest.mark.parametrize("options", NORM_OPTIONS)
@settings(max_examples=60, deadline=None)
@given(texts=norm_texts)
def test_normalize_matches(options, texts):
    batch = pa.RecordBatch.from_pydict({"text": pa.array(texts, pa.string())})
    (b_on, d_on), (b_off, d_off) = both(lambda: _stage_outputs(Normalize(**options), batch))
    assert b_on.schema == b_off.schema
    for name in b_on.schema.names:
        assert _same(b_on.column(name), b_off.column(name)), (name, texts, b_on.column(name), b_off.column(name))
    for x, y in zip(d_on, d_off):
        assert _same(x, y), texts


def test_normalize_examples():
    texts = pa.array([" Cafe\u0301\u00a0au  lait \r\nnext\x00 line\t\n\n\n\n\nend \u200b", "中文，\u3000全角\r\r\n",
                      "\ufeff", "e\u0301" * 3 + "\u212b"])
    batch = pa.RecordBatch.from_pydict({"text": texts})
    (on, _), (off, _) = both(lambda: _stage_outputs(Normalize(), batch))
    assert on.equals(off)
    assert on.column("text").to_pylist() == ["Café au  lait\nnext line\n\n\nend", "中文，\u3000全角", "", "ééé\u00c5"]
    assert on.column("norm_form_changed").to_pylist() == [True, False, False, True]
    assert on.column("norm_controls_removed").to_pylist() == [2, 0, 1, 0]
    assert on.column("norm_spaces_fixed").to_pylist() == [2, 2, 0, 0]


def test_norm_table_classes():
    t = kernels.norm_table()
    nfc, nfkc, nfd = kernels.NORM_INERT["NFC"], kernels.NORM_INERT["NFKC"], kernels.NORM_INERT["NFD"]
    for c in "a中，。\u3000ß": assert t[ord(c)] & nfc  # a string of these is in NFC
    assert t[ord("é")] & nfc and not t[ord("é")] & nfd  # precomposed: NFC's, not NFD's
    for c in "\u0301\u1161\u11a8\u0bbe\u212b\uf900": assert not t[ord(c)] & nfc  # may compose / singletons
    assert not t[ord("，")] & nfkc and not t[ord("ﬁ")] & nfkc  # compatibility forms change under NFKC
    assert t[ord("\u0301")] & nfc == 0 and t[ord("\u0301")] & nfd == 0  # combining class 230
    for c in "\x00\x1f\x7f\u200b\ufeff": assert t[ord(c)] & kernels.NORM_CONTROL
    for c in "\t\n\r": assert not t[ord(c)] & kernels.NORM_CONTROL
    for c in "\u00a0\u2009\u202f": assert t[ord(c)] & kernels.NORM_ODD_SPACE
    assert not t[ord("\u3000")] & kernels.NORM_ODD_SPACE and t[ord("\u3000")] & kernels.NORM_TRIM


def test_normalize_invalid_utf8_falls_back():
    bad = pa.StringArray.from_buffers(2, pa.py_buffer(np.array([0, 2, 4], np.int32)), pa.py_buffer(b"ab\xff\xfe"))
    assert kernels.normalize(bad, "NFC", True, True, 2) is None


@settings(max_examples=100, deadline=None)
@given(texts=st.lists(st.one_of(st.none(), st.text(max_size=40), st.sampled_from(["中文", "0123 ;;", "ｶ"])),
                      max_size=8),
       code=st.lists(st.sampled_from(["web", "code", None]), min_size=8, max_size=8))
def test_token_estimate_matches(texts, code):
    arr = pa.array(texts, pa.string())
    source = pa.array(code[:len(texts)], pa.string())
    on, off = both(lambda: (estimate_tokens(arr, source, ["code"]), token_features(arr)))
    assert on[0].equals(off[0])
    assert all(np.array_equal(on[1][k], off[1][k]) for k in on[1])


@pytest.mark.skipif(importlib.util.find_spec("scipy") is None, reason="scipy is not installed")
def test_loading_the_kernels_does_not_import_scipy_linalg_and_numba_keeps_its_blas():
    code = "\n".join([
        "import sys",
        "from dataclean.text import kernels",
        "assert kernels.enabled()",
        "print('scipy.linalg' in sys.modules)",
        "import numba, numpy as np, numba.np.arraymath as arraymath",
        "print(arraymath._HAVE_BLAS)",
        "f = numba.njit(lambda a, b: np.dot(a, b))",  # a BLAS function compiled afterwards imports it itself
        "print(f(np.ones(3), np.arange(3.0)), 'scipy.linalg' in sys.modules)",
    ])
    env = {k: v for k, v in os.environ.items() if k != kernels.ENV}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.split() == ["False", "True", "3.0", "True"]
    # with another thread alive (which could be importing scipy), numba is imported as it is
    threaded = "import threading; e = threading.Event(); threading.Thread(target=e.wait).start()\n" + \
        code.replace("print('scipy.linalg' in sys.modules)", "print('scipy.linalg' in sys.modules); e.set()")
    out = subprocess.run([sys.executable, "-c", threaded], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.split() == ["True", "True", "3.0", "True"]


# -- seo_spam's kernels ---------------------------------------------------------------------------------------

from dataclean.stages import spam  # noqa: E402


def test_pair_counts_examples():
    with kernels_env("1"):
        per, first = kernels.pair_counts(pa.array(["a", "b", "a", "a", "b"]), np.array([0, 0, 0, 1, 1]))
        assert per.tolist() == [2, 1, 2, 1, 1] and first.tolist() == [True, True, False, True, True]
        # groups out of order: the first of each pair is the first in group order (stable)
        per, first = kernels.pair_counts(pa.array(["x", "x", "x", "y"]), np.array([1, 0, 1, 0]))
        assert per.tolist() == [2, 1, 2, 1] and first.tolist() == [True, True, False, True]
        # spam.pair_counts: the same pairs and counts as the sort, in another order
        values, parent = pa.array(["的", "的", "the", "的", "x"]), np.array([0, 0, 0, 2, 2])
        on = spam.pair_counts(parent, values, per_element=True)
    with kernels_env("0"):
        off = spam.pair_counts(parent, values, per_element=True)
    assert sorted(zip(on[0].tolist(), on[1].tolist())) == sorted(zip(off[0].tolist(), off[1].tolist())) == \
        [(0, 1), (0, 2), (2, 1), (2, 1)]
    assert on[2].tolist() == off[2].tolist() == [2, 2, 1, 1, 1]


def test_count_runs_and_han_counts_examples():
    with kernels_env("1"):
        runs = kernels.count_runs(pa.array(["a, b || c", "中文：你好 世界", "", "——【热门】"]),
                                  spam._ITEM_SEP_OR_SPACE_CLASS)
        han = kernels.class_counts(pa.array(["中文abc", "ひらがな漢字", "〇", "\U00020000x", ""]), (spam.HAN_CHAR,))
        bad = pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(np.array([0, 2], np.int32)),
                                                     pa.py_buffer(b"\xff,")])
        assert kernels.count_runs(bad, spam._ITEM_SEP_OR_SPACE_CLASS) is None  # (the caller uses RE2)
        assert kernels.class_counts(bad, (spam.HAN_CHAR,)) is None
    assert runs.tolist() == [2, 2, 0, 2]
    assert han[:, 0].tolist() == [2, 2, 1, 1, 0]


def test_item_separator_table_marks_the_separators():
    """The kernel's table of ``_ITEM_SEP_OR_SPACE_CLASS`` (built by RE2 over every code point) marks exactly
    these 42 characters."""
    table = kernels.class_table((spam._ITEM_SEP_OR_SPACE_CLASS,))
    assert np.flatnonzero(table).tolist() == \
        sorted(map(ord, "\x1f_|｜,，、/;；:：·•【】()（）《》<>\"“”‘’!！?？。~…-–— \t\u3000"))


def _bad_utf8() -> pa.Array:
    return pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(np.array([0, 2], np.int32)),
                                                  pa.py_buffer(b"\xff,")])


def test_keyword_repeats_examples():
    """Items and the most repeated keyword per line, kernel and RE2 path alike: spaces cut next to a Han
    character only, and the Han character that such a cut consumed does not cut after itself."""
    lines = ["北京办证 上海办证 广州办证", "哈哈 哈哈 哈哈", "Home | About | Contact", "a | A | a", "ab|AB|ab",
             "x 中 y 中 y", "，，a，", "", "办证办证、办证"]
    with kernels_env("1"):
        items, reps = kernels.keyword_repeats(pa.compute.utf8_lower(pa.array(lines)), spam._ITEM_SEP[:-1],
                                              spam._HAN_SPACE, spam.HAN_CHAR, 12)
        assert kernels.keyword_repeats(_bad_utf8(), spam._ITEM_SEP[:-1], spam._HAN_SPACE, spam.HAN_CHAR, 12) is None
    assert items.tolist() == [3, 3, 3, 3, 3, 3, 1, 0, 2]
    # 办证 as the tail of three items; ab three times; "中 y" twice (x | 中 y | 中 y); 办证 as the head of
    # 办证办证 (whose tail is its head: counted once) and of 办证 (the whole item 办证 is another kind)
    assert reps.tolist() == [3, 0, 1, 0, 3, 2, 0, 0, 2]
    on, off = both(lambda: spam.line_keywords(pa.array(lines), 12))
    assert on[0].tolist() == off[0].tolist() == items.tolist()
    assert on[1].tolist() == off[1].tolist() == reps.tolist()


def test_template_norm_and_sentence_punct_examples():
    with kernels_env("1"):
        norm, letter = kernels.template_norm(pa.array(["page 12 of 345", "a \t  b", "", "123", "中文 1", "٣ x"]))
        sentence = kernels.sentence_punct(pa.array(["你好。", "a, b, c", "a,, b", ", ,", ",,,", "hello world",
                                                    "一，二", "Really?", "一，　，"]))
        assert kernels.template_norm(_bad_utf8()) is None and kernels.sentence_punct(_bad_utf8()) is None
        assert kernels.sentence_punct(pa.array(["a,b\n,c"])) is None  # (lines hold no newline)
    assert norm.to_pylist() == ["page 0 of 0", "a b", "", "0", "中文 0", "٣ x"]  # (RE2's \d is ASCII)
    assert letter.tolist() == [True, True, False, False, True, True]
    # two commas need a character outside [\t\n\f\r ] between them; U+3000 is one
    assert sentence.tolist() == [True, True, False, False, True, False, False, True, True]


SPAM_PIECES = list("，、|｜/:：·•【】()（）《》-—… \t\u3000。！？!?\n\n") + \
    ["北京", "上海", "办证", "办证", "哈哈", "烟(yan)台(tai)", "欧宝体育", "http://a.b/c ", "www.x.cn ", "a@b.com ",
     "Home | About | Contact\n", "Posted by admin\n", "Copyright © 2020\n", "the ", "free ", "Click here\n",
     "12 ", "3.5 ", "热门城市：淄博口罩 山东口罩 临沂口罩 ", "\xff", "İ", "\U00020000", "AB", "ab", "\xa0", "  "]


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.lists(st.sampled_from(SPAM_PIECES), max_size=60).map("".join), min_size=1, max_size=6))
def test_seo_spam_signals_match(texts):
    stage = spam.SeoSpam(min_words=3, min_lines=2, min_urls=1)
    on, off = both(lambda: stage.signals(pa.array(texts, pa.string())))
    assert list(on) == list(off)
    for name in on:
        assert _same(on[name], off[name]), (name, texts)


# -- one pass for several character classes (quality_score, langid) -------------------------------------------

from dataclean.quality.heuristic import SYMBOL  # noqa: E402
from dataclean.stages.langid import PUNCT, LangID  # noqa: E402
from dataclean.stages.quality import QualityScore  # noqa: E402


def test_class_counts_examples():
    with kernels_env("1"):
        out = kernels.class_counts(pa.array(["Hello World 42!", "中文ＡＢ１２#@", "", "É½§"]),
                                   (SYMBOL, r"\p{Lu}", r"\p{Nd}"))
        bad = pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(np.array([0, 2], np.int32)),
                                                     pa.py_buffer(b"A\xff")])
        assert kernels.class_counts(bad, (r"\p{Lu}",)) is None
    # symbols: # and @ (SYMBOL names them; ! and § are punctuation); upper: H W, Ａ Ｂ, É; digits: 4 2, １ ２ (½ is No)
    assert out.tolist() == [[0, 2, 2], [2, 2, 2], [0, 0, 0], [0, 1, 0]]
    with pytest.raises(ValueError):
        kernels.class_table(())


# quality_score (symbols, capitals, digits) and langid (capitals) count classes with one kernel pass
STAGES += [lambda: QualityScore(), lambda: LangID()]


def test_langid_model_input_kernels_examples():
    texts = pa.array(["Hello!! world...\nnext line :) ok", "中文ひらがなカタカナ漢字!", "=====\n---", "a!b", "", "x\n!",
                      "ｶﾀｶﾅとカナ", "\U00020000!"])
    with kernels_env("1"):
        collapsed = kernels.collapse_punct(texts, PUNCT)
        isolated = kernels.isolate(texts)
        bad = pa.Array.from_buffers(pa.string(), 1, [None, pa.py_buffer(np.array([0, 2], np.int32)),
                                                     pa.py_buffer(b"!\xff")])
        assert kernels.collapse_punct(bad, PUNCT) is None and kernels.isolate(bad) is None
    assert collapsed.to_pylist() == ["Hello  world  next line   ok", "中文ひらがなカタカナ漢字!", "   ", "a!b", "", "x !",
                                     "ｶﾀｶﾅとカナ", "\U00020000!"]
    assert isolated.to_pylist() == ["Hello!! world...\nnext line :) ok", " 中  文  ひらがな  カタカナ  漢  字 !",
                                    "=====\n---", "a!b", "", "x\n!", " ｶﾀｶﾅ  と  カナ ", " \U00020000 !"]


@settings(max_examples=60, deadline=None)
@given(texts=st.lists(st.lists(st.sampled_from(TRICKY + list("!?=-:)(、。…") + ["!!", "==", ":)", "\n!"]),
                               max_size=40).map("".join), min_size=1, max_size=6))
def test_langid_model_input_matches(texts):
    from dataclean.stages.langid import model_input

    on, off = both(lambda: model_input(pa.array(texts, pa.string()), 12, 3))
    assert on[0].to_pylist() == off[0].to_pylist() and on[1].to_pylist() == off[1].to_pylist(), texts
