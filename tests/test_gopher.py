"""Gopher quality and repetition rules (Rae et al. 2021), on hand-written English and Chinese documents.

The per-document reference implementation at the end (``reference_quality``, ``reference_repetition``) is
the straightforward Python reading of the rules; property tests check the vectorised stages agree with it.
"""
import math
import re
from collections import Counter

import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from dataclean.stages.gopher import (BULLET_LINE, CHINESE_STOP_WORDS, ELLIPSIS, ELLIPSIS_LINE, ENGLISH_STOP_WORDS,
                                     GopherQuality, GopherRepetition)
from dataclean.text import split_words

ZH_QUALITY = {"min_mean_word_length": None, "stop_words": CHINESE_STOP_WORDS}
ZH_REPETITION = {"max_top_2gram_char_frac": 0.25, "max_top_3gram_char_frac": 0.25, "max_top_4gram_char_frac": 0.25,
                 "max_dup_5gram_char_frac": 0.50, "max_dup_6gram_char_frac": 0.45, "max_dup_7gram_char_frac": 0.40,
                 "max_dup_8gram_char_frac": 0.35, "max_dup_9gram_char_frac": 0.30, "max_dup_10gram_char_frac": 0.25}

# 56 words, 255 word characters, 14 stop words (the x7, and x2, that x2, to, with, have)
EN = ("The old harbour town grew rich on the wool trade. Merchants came to the river with cloth from the "
      "north, and they built warehouses that still stand beside the water. Today visitors walk along the "
      "quay, look at the painted boats and eat fresh fish in small restaurants that have served sailors for "
      "two hundred years.")
# 79 Han characters; stop characters 是 的 有 和 了 的
ZH = ("东湖公园位于城市东部，是市民休闲的好去处。公园始建于一九五八年，园内有湖泊、草地和树林。"
      "每到春天，樱花盛开，吸引大量游客前来观赏。管理处定期举办文化活动，让更多人了解本地的历史。")
# 70 Han characters; the name 东湖公园管理处 (7 characters) three times, 公园 four times
ZH_NAMES = ("东湖公园管理处成立于一九八零年，负责公园的日常维护。东湖公园管理处下设绿化、安全和活动三个科室。"
            "每年春天，东湖公园管理处都会举办樱花节，吸引许多市民参加。")


def batch(*texts, lang=None):
    cols = {"text": list(texts)}
    if lang is not None:
        cols["lang"] = lang if isinstance(lang, list) else [lang] * len(texts)
    return pa.RecordBatch.from_pydict(cols)


def signals(result, row=0):
    return {k: v for k, v in result.batch.to_pylist()[row].items() if k.startswith("gopher_")}


def decision(result, row=0):
    d = result.decisions
    if d is None:
        return None, None, None, None
    return d.rule[row].as_py(), d.reason[row].as_py(), d.value[row].as_py(), d.threshold[row].as_py()


# -- quality: English -------------------------------------------------------------------------------------

def test_clean_english_paragraph_passes_every_quality_rule():
    r = GopherQuality()(batch(EN))
    assert signals(r) == {
        "gopher_word_count": 56, "gopher_mean_word_length": 255 / 56, "gopher_hash_ratio": 0.0,
        "gopher_ellipsis_ratio": 0.0, "gopher_bullet_line_frac": 0.0, "gopher_ellipsis_line_frac": 0.0,
        "gopher_alpha_word_frac": 1.0, "gopher_stop_word_count": 14}
    assert r.decisions is None


def test_short_and_long_documents():
    r = GopherQuality()(batch("The cat sat on the mat.", EN))
    assert decision(r, 0) == ("gopher_short_doc", "gopher_word_count", 6.0, 50.0)
    assert decision(r, 1) == (None, None, None, None)
    r = GopherQuality(max_words=55)(batch(EN))
    assert decision(r) == ("gopher_long_doc", "gopher_word_count", 56.0, 55.0)


def test_mean_word_length_bounds():
    short_words = " ".join(["a an of to"] * 15)  # 60 words of 1.75 characters
    long_words = " ".join(["internationalisation"] * 50 + ["the", "of"])
    r = GopherQuality()(batch(short_words, long_words))
    assert decision(r, 0) == ("gopher_below_avg_word_length", "gopher_word_length", 1.75, 3.0)
    assert signals(r, 1)["gopher_mean_word_length"] == (50 * 20 + 5) / 52
    assert decision(r, 1)[0] == "gopher_above_avg_word_length"


def test_hash_and_ellipsis_ratios():
    hashes = EN + " #tag #tag #tag #tag #tag #tag"  # 6 hashes, 62 words
    dots = EN + " wait...... and… then… so… and… ok… the… end…"  # "......" is one ellipsis: 8 over 64 words
    r = GopherQuality()(batch(hashes, dots))
    assert signals(r, 0)["gopher_hash_ratio"] == 6 / 62
    assert decision(r, 0)[0] is None  # not above 0.1
    assert signals(r, 1)["gopher_ellipsis_ratio"] == 8 / 64
    assert decision(r, 1) == ("gopher_too_many_ellipses", "gopher_symbol_ratio", 8 / 64, 0.1)
    r = GopherQuality()(batch(EN + " #a #b #c #d #e #f #g"))  # 7 over 63
    assert decision(r) == ("gopher_too_many_hashes", "gopher_symbol_ratio", 7 / 63, 0.1)


def test_chinese_ellipsis_counts_once():
    r = GopherQuality()(batch("他说……我不知道……"))
    assert signals(r)["gopher_ellipsis_ratio"] == 2 / 6


def test_bullet_lines():
    items = "\n".join(f"• item number {i} of the list that goes on" for i in range(10))
    mixed = "Shopping list\n" + "\n".join(f"- item number {i} of the list" for i in range(9))
    r = GopherQuality()(batch(items, mixed))
    assert signals(r, 0)["gopher_bullet_line_frac"] == 1.0
    assert decision(r, 0) == ("gopher_too_many_bullets", "gopher_line_format", 1.0, 0.9)
    assert signals(r, 1)["gopher_bullet_line_frac"] == 0.9  # 9 of 10 lines: not more than 90%
    assert decision(r, 1)[0] is None


def test_ellipsis_lines_and_one_line_documents():
    teaser = "\n".join(["Read the full story of the harbour and the town...", "More about the river trade…",
                        "The wool merchants and their houses, and the warehouses that they built", EN])
    one_line = EN[:-1] + "…"
    r = GopherQuality()(batch(teaser, one_line))
    assert signals(r, 0)["gopher_ellipsis_line_frac"] == 0.5
    assert decision(r, 0) == ("gopher_too_many_end_ellipsis", "gopher_line_format", 0.5, 0.3)
    assert decision(r, 1) == ("gopher_too_many_end_ellipsis", "gopher_line_format", 1.0, 0.3)  # published rule
    r = GopherQuality(line_rules_min_lines=2)(batch(teaser, one_line))
    assert decision(r, 0)[0] == "gopher_too_many_end_ellipsis"
    assert decision(r, 1)[0] is None  # a one-line document is not a page of teaser lines


def test_alphabetic_words_and_stop_words():
    numbers = EN + " " + " ".join(str(i) for i in range(20))  # 56 of 76 words have a letter
    no_stop = " ".join(["harbour town merchants river cloth warehouses water visitors quay boats"] * 6)
    r = GopherQuality()(batch(numbers, no_stop))
    assert signals(r, 0)["gopher_alpha_word_frac"] == 56 / 76
    assert decision(r, 0) == ("gopher_below_alpha_threshold", "gopher_non_alpha", 56 / 76, 0.8)
    assert signals(r, 1)["gopher_stop_word_count"] == 0
    assert decision(r, 1) == ("gopher_few_stop_words", "gopher_stop_words", 0.0, 2.0)


def test_stop_words_are_case_insensitive_and_limited_to_listed_languages():
    german = " ".join(["Der Hafen und die Stadt wurden durch den Wollhandel reich"] * 6)
    r = GopherQuality()(batch(german, lang="de"))
    assert decision(r)[0] == "gopher_few_stop_words"  # published rule: the English list for every row
    r = GopherQuality(stop_words_langs=["en"])(batch(german, german.upper() + " THE THE", lang=["de", "en"]))
    assert signals(r, 0)["gopher_stop_word_count"] == 0 and decision(r, 0)[0] is None
    assert signals(r, 1)["gopher_stop_word_count"] == 2 and decision(r, 1)[0] is None


def test_first_failing_rule_decides():
    # short, words too short, and no stop words: the first check in the documented order decides
    r = GopherQuality()(batch("a b c"))
    assert decision(r)[0] == "gopher_short_doc"


# -- quality: Chinese -------------------------------------------------------------------------------------

def test_chinese_needs_its_own_thresholds():
    r = GopherQuality()(batch(ZH, lang="zh"))
    assert signals(r)["gopher_word_count"] == 79
    assert signals(r)["gopher_mean_word_length"] == 1.0  # one Han character per word
    assert decision(r) == ("gopher_below_avg_word_length", "gopher_word_length", 1.0, 3.0)
    r = GopherQuality(by_lang={"zh": ZH_QUALITY})(batch(ZH, lang="zh"))
    assert signals(r)["gopher_stop_word_count"] == 6
    assert r.decisions is None


def test_per_language_thresholds_in_one_batch():
    r = GopherQuality(by_lang={"zh": ZH_QUALITY})(batch(ZH, ZH, EN, lang=["zh", "en", "en"]))
    assert decision(r, 0)[0] is None
    assert decision(r, 1) == ("gopher_below_avg_word_length", "gopher_word_length", 1.0, 3.0)  # tagged en
    assert decision(r, 2)[0] is None
    assert signals(r, 1)["gopher_stop_word_count"] == 0  # the English list for an en row


def test_chinese_stop_words_and_short_posts():
    post = "今天天气很好，我们去公园散步了。"  # 14 characters
    r = GopherQuality(by_lang={"zh": ZH_QUALITY})(batch(post, lang="zh"))
    assert signals(r)["gopher_stop_word_count"] == 2  # 我 (of 我们: one word per character) and 了
    assert decision(r) == ("gopher_short_doc", "gopher_word_count", 14.0, 50.0)


def test_unknown_by_lang_parameter_is_refused():
    with pytest.raises(ValueError, match="unknown parameter"):
        GopherQuality(by_lang={"zh": {"min_word": 3}})
    with pytest.raises(ValueError, match="unknown parameter"):
        GopherRepetition(by_lang={"zh": {"max_dup_11gram_char_frac": 0.1}})


# -- repetition -------------------------------------------------------------------------------------------

def test_duplicate_lines_and_paragraphs():
    lines = "Buy now\nBest price\nBuy now\nBuy now"
    paras = "First part of it.\n\nSecond part.\n\nFirst part of it."
    r = GopherRepetition()(batch(lines, paras))
    s = signals(r, 0)
    assert (s["gopher_dup_line_frac"], s["gopher_dup_line_char_frac"]) == (0.5, 14 / 31)
    assert decision(r, 0) == ("gopher_dup_line_frac", "gopher_dup_lines", 0.5, 0.3)
    s = signals(r, 1)
    assert (s["gopher_dup_para_frac"], s["gopher_dup_para_char_frac"]) == (1 / 3, 17 / 46)
    assert s["gopher_dup_line_frac"] == 1 / 3  # each paragraph is one line here
    assert decision(r, 1) == ("gopher_dup_line_frac", "gopher_dup_lines", 1 / 3, 0.3)


def test_top_ngram_is_the_most_frequent_and_counts_overlaps_once():
    r = GopherRepetition()(batch("The cat sat on the mat. " * 10, "a a a a", EN))
    s = signals(r, 0)
    # 2-grams "The cat", "cat sat", "the mat" ... all occur 10 times; ties go to the longer, then the first:
    # "The cat" covers 6 of every 17 word characters
    assert s["gopher_top_2gram_char_frac"] == 6 / 17
    assert s["gopher_top_3gram_char_frac"] == 9 / 17  # "The cat sat"
    assert s["gopher_dup_5gram_char_frac"] == 1.0
    assert decision(r, 0) == ("gopher_top_2gram", "gopher_top_ngram", 6 / 17, 0.2)
    assert signals(r, 1)["gopher_top_2gram_char_frac"] == 1.0  # "a a" three times, overlapping: 4 of 4 chars
    assert signals(r, 2)["gopher_top_2gram_char_frac"] == 0.0  # no 2-gram occurs twice
    assert decision(r, 2)[0] is None


def test_duplicate_ngrams_cover_every_occurrence_once():
    phrase = "please remember to bring your own towel"  # 7 words, 33 characters
    doc = f"{phrase} when you visit the pool and {phrase}"  # 19 words, 88 word characters
    r = GopherRepetition()(batch(doc))
    s = signals(r)
    assert s["gopher_dup_5gram_char_frac"] == 66 / 88
    assert s["gopher_dup_7gram_char_frac"] == 66 / 88
    assert s["gopher_dup_8gram_char_frac"] == 0.0
    # every 2-gram of the phrase occurs twice; the longest, "please remember" (14 characters), is the top one
    assert s["gopher_top_2gram_char_frac"] == 28 / 88
    assert decision(r) == ("gopher_top_2gram", "gopher_top_ngram", 28 / 88, 0.2)


def test_chinese_repetition_is_on_characters():
    doc = "我们喜欢数据清洗。我们喜欢数据清洗。"  # 16 characters, the sentence twice
    r = GopherRepetition(by_lang={"zh": ZH_REPETITION})(batch(doc, lang="zh"))
    s = signals(r)
    assert s["gopher_top_2gram_char_frac"] == 4 / 16  # 我们, twice
    assert s["gopher_dup_8gram_char_frac"] == 1.0 and s["gopher_dup_9gram_char_frac"] == 0.0
    assert s["gopher_top_3gram_char_frac"] == 6 / 16  # 我们喜: all 3-grams occur twice, the first wins
    assert decision(r) == ("gopher_top_3gram", "gopher_top_ngram", 6 / 16, 0.25)


def test_chinese_names_repeat_in_clean_text():
    r = GopherRepetition()(batch(ZH_NAMES, lang="zh"))
    s = signals(r)
    assert s["gopher_top_2gram_char_frac"] == 8 / 70  # 公园 four times
    assert s["gopher_top_4gram_char_frac"] == 12 / 70  # 东湖公园 three times
    assert s["gopher_dup_7gram_char_frac"] == 21 / 70 and s["gopher_dup_8gram_char_frac"] == 0.0
    assert decision(r) == ("gopher_top_4gram", "gopher_top_ngram", 12 / 70, 0.16)  # English thresholds
    r = GopherRepetition(by_lang={"zh": ZH_REPETITION})(batch(ZH_NAMES, ZH, EN, lang=["zh", "zh", "en"]))
    assert r.decisions is None


# -- edge cases -------------------------------------------------------------------------------------------

EDGE = ["", None, "🙂🙂🙂 👍", "数据清洗工具链", "one line without punctuation", "\n\n \n\t", "###", "…"]


def test_edge_cases_do_not_crash_and_give_zero_signals():
    q = GopherQuality()(batch(*EDGE))
    rep = GopherRepetition()(batch(*EDGE))
    for i in range(len(EDGE)):
        assert decision(q, i)[0] == "gopher_short_doc"
    assert signals(q, 2)["gopher_word_count"] == 0 and signals(q, 2)["gopher_mean_word_length"] == 0.0
    assert signals(q, 3)["gopher_word_count"] == 7 and signals(q, 3)["gopher_alpha_word_frac"] == 1.0
    assert signals(q, 6)["gopher_hash_ratio"] == 3.0  # symbols over max(words, 1)
    assert signals(q, 7)["gopher_ellipsis_line_frac"] == 1.0
    for i in range(len(EDGE)):
        assert set(signals(rep, i).values()) == {0.0}
    assert rep.decisions is None


def test_a_batch_with_only_text_and_a_chunked_text_column():
    b = pa.RecordBatch.from_pydict({"text": pa.array([EN, ZH], pa.large_string())})
    assert GopherQuality()(b).batch.num_rows == 2
    assert GopherRepetition()(b).batch.column("gopher_top_2gram_char_frac").to_pylist()[1] == 4 / 79


def test_disabled_thresholds_and_params():
    r = GopherQuality(min_words=None, min_mean_word_length=None)(batch("a b c"))
    assert decision(r)[0] == "gopher_few_stop_words"
    q = GopherQuality(by_lang={"zh": ZH_QUALITY})
    assert q.params()["by_lang"] == {"zh": ZH_QUALITY}
    assert q.params()["stop_words"] == ENGLISH_STOP_WORDS


def test_in_a_pipeline_with_per_language_thresholds_and_skipped_sources():
    import dataclean
    from dataclean.schema import DOC_SCHEMA
    rows = [("en", EN, "en", "web"), ("zh", ZH, "zh", "web"), ("names", ZH_NAMES, "zh", "web"),
            ("spam", "Buy now\nBuy now\nBuy now\n" + EN, "en", "web"),
            ("manual", "Buy now\nBuy now\n" + EN, "en", "docs"),
            ("short", "太短了", "zh", "web")]
    docs = pa.RecordBatch.from_pylist(
        [{"id": i, "text": t, "source": src, "url": None, "lang": lang, "meta": None, "origin_file": "f",
          "origin_row": n, "doc_key": n} for n, (i, t, lang, src) in enumerate(rows)], schema=DOC_SCHEMA)
    repetition = GopherRepetition(by_lang={"zh": ZH_REPETITION})
    repetition.skip_sources = ["docs"]  # what the recipe's skip_sources sets
    pipe = dataclean.Pipeline([GopherQuality(stop_words_langs=["en"], by_lang={"zh": ZH_QUALITY}), repetition])
    out = pipe.process(docs)
    assert out.kept.column("id").to_pylist() == ["en", "zh", "names", "manual"]
    assert out.kept.column("gopher_dup_line_frac").to_pylist()[3] is None  # docs: not run, null signals
    gone = {g["id"]: (g["stage"], g["rule"], g["value"], g["threshold"]) for g in out.removed.to_pylist()}
    assert gone == {"short": ("gopher_quality", "gopher_short_doc", 3.0, 50.0),
                    "spam": ("gopher_repetition", "gopher_dup_line_frac", 2 / 4, 0.3)}


# -- the per-document reference and the properties --------------------------------------------------------

BULLET_PY = re.compile(BULLET_LINE.replace(r"\x{3000}", "\u3000"))
ELLIPSIS_LINE_PY = re.compile(ELLIPSIS_LINE.replace(r"\x{3000}", "\u3000"))
PARAGRAPH_PY = re.compile(r"\n[ \t\u3000]*\n[\t\n\f\r ]*")


def _frac(a, b):
    return a / b if b else 0.0


def reference_quality(text, stop_words=ENGLISH_STOP_WORDS):
    words = split_words(text)
    n = len(words)
    lines = [line for line in text.split("\n") if line.strip()]
    stops = set(stop_words)
    return {
        "gopher_word_count": n,
        "gopher_mean_word_length": _frac(sum(len(w) for w in words), n),
        "gopher_hash_ratio": text.count("#") / max(n, 1),
        "gopher_ellipsis_ratio": len(re.findall(ELLIPSIS, text)) / max(n, 1),
        "gopher_bullet_line_frac": _frac(sum(bool(BULLET_PY.search(line)) for line in lines), len(lines)),
        "gopher_ellipsis_line_frac": _frac(sum(bool(ELLIPSIS_LINE_PY.search(line)) for line in lines), len(lines)),
        "gopher_alpha_word_frac": _frac(sum(any(c.isalpha() for c in w) for w in words), n),
        "gopher_stop_word_count": sum(w.lower() in stops for w in words),
    }


def _duplicates(items):
    items = [x.strip() for x in items if x.strip()]
    seen, dup, dup_chars = set(), 0, 0
    for x in items:
        if x in seen:
            dup += 1
            dup_chars += len(x)
        seen.add(x)
    return _frac(dup, len(items)), _frac(dup_chars, sum(len(x) for x in items))


def _ngram_frac(words, n, top):
    total = sum(len(w) for w in words)
    grams = [tuple(words[i:i + n]) for i in range(len(words) - n + 1)]
    counts = Counter(grams)
    repeated = [g for g, c in counts.items() if c >= 2]
    if not repeated:
        return 0.0
    if top:
        first = {}
        for i, g in enumerate(grams):
            first.setdefault(g, i)
        best = min(repeated, key=lambda g: (-counts[g], -sum(map(len, g)), first[g]))
        starts = [i for i, g in enumerate(grams) if g == best]
    else:
        starts = [i for i, g in enumerate(grams) if counts[g] >= 2]
    covered = set()
    for i in starts:
        covered.update(range(i, i + n))
    return sum(len(words[i]) for i in covered) / total


def reference_repetition(text):
    words = split_words(text)
    out = {}
    out["gopher_dup_line_frac"], out["gopher_dup_line_char_frac"] = _duplicates(text.split("\n"))
    out["gopher_dup_para_frac"], out["gopher_dup_para_char_frac"] = _duplicates(PARAGRAPH_PY.split(text))
    for n in (2, 3, 4):
        out[f"gopher_top_{n}gram_char_frac"] = _ngram_frac(words, n, top=True)
    for n in range(5, 11):
        out[f"gopher_dup_{n}gram_char_frac"] = _ngram_frac(words, n, top=False)
    return out


def test_reference_agrees_on_the_examples():
    docs = [EN, ZH, ZH_NAMES, "The cat sat on the mat. " * 10, "Buy now\nBest price\nBuy now\nBuy now"]
    q, rep = GopherQuality()(batch(*docs)), GopherRepetition()(batch(*docs))
    for i, doc in enumerate(docs):
        assert signals(q, i) == pytest.approx(reference_quality(doc))
        assert signals(rep, i) == pytest.approx(reference_repetition(doc))


VOCAB = ["the", "a", "of", "cat", "Sat", "数", "据", "的", "…", "...", "#", "• ", "- ", "\n", "\n\n", "  "]
doc_strategy = st.lists(st.sampled_from(VOCAB), max_size=60).map(
    lambda parts: "".join(p if p.strip() == "" or p in ("• ", "- ") else p + " " for p in parts))


@settings(max_examples=80, deadline=None)
@given(st.lists(doc_strategy, min_size=1, max_size=6))
def test_vectorised_stages_agree_with_the_per_document_reference(docs):
    q, rep = GopherQuality()(batch(*docs)), GopherRepetition()(batch(*docs))
    for i, doc in enumerate(docs):
        assert signals(q, i) == pytest.approx(reference_quality(doc), abs=1e-12)
        assert signals(rep, i) == pytest.approx(reference_repetition(doc), abs=1e-12)


FRACTIONS = [f.name for f in GopherRepetition.signal_fields] + [
    "gopher_bullet_line_frac", "gopher_ellipsis_line_frac", "gopher_alpha_word_frac"]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.one_of(st.text(), st.none()), max_size=8))
def test_any_unicode_gives_signals_in_their_ranges(texts):
    b = batch(*texts, lang=["zh" if i % 2 else "en" for i in range(len(texts))]) if texts else \
        pa.RecordBatch.from_pydict({"text": pa.array([], pa.string())})
    q = GopherQuality(by_lang={"zh": ZH_QUALITY})(b)
    rep = GopherRepetition(by_lang={"zh": ZH_REPETITION})(b)
    for result in (q, rep):
        assert result.batch.num_rows == len(texts)
        for row in result.batch.to_pylist():
            for name, value in row.items():
                if not name.startswith("gopher_"):
                    continue
                assert value is not None and not math.isnan(value) and value >= 0, (name, value)
                if name in FRACTIONS:
                    assert value <= 1.0 + 1e-12, (name, value)
        if result.decisions is not None:
            assert len(result.decisions.rule) == len(texts)
