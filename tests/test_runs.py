"""Repetition runs and long tokens, on hand-written English and Chinese documents."""
import base64
import random

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataclean.stages.runs import LongTokens, RepetitionRuns, blob_kind, longest_run, periodic_windows


def run(stage, *texts, lang=None):
    cols = {"text": list(texts)}
    if lang is not None:
        cols["lang"] = [lang] * len(texts)
    result = stage(pa.RecordBatch.from_pydict(cols))
    d = result.decisions
    fates = [(None, None, None)] * len(texts) if d is None else list(zip(
        d.rule.to_pylist(), d.value.to_pylist(), d.detail.to_pylist()))
    return result.batch.to_pylist(), fates


def runs_of(row):
    return row["runs_longest_chars"], row["runs_longest_share"], row["runs_kind"]


# --- longest_run, the exact definition ---------------------------------------------------------------------

@pytest.mark.parametrize("text, expected", [
    ("aaaaaaa", (7, 0, 7, "a", 7, "char")),
    ("！！！！！", (5, 0, 5, "！", 5, "char")),
    ("哈哈哈哈", (4, 0, 4, "哈", 4, "char")),
    ("abcabcabc", (9, 0, 9, "abc", 3, "pattern")),
    ("-=-=-=-=", (8, 0, 8, "-=", 4, "pattern")),
    ("😀😂😀😂😀😂", (6, 0, 6, "😀😂", 3, "pattern")),
    ("buy buy buy buy", (15, 0, 15, "buy", 4, "token")),
    ("congratulations congratulations\ncongratulations", (47, 0, 47, "congratulations", 3, "token")),
    ("abab", None),  # two repeats are not a run
    ("a b c", None),
])
def test_longest_run_units(text, expected):
    assert longest_run(text) == expected


# --- the stage ---------------------------------------------------------------------------------------------

def test_long_char_run_is_removed_with_its_span():
    rows, fates = run(RepetitionRuns(), "a" * 2500)
    assert runs_of(rows[0]) == (2500, 1.0, "char")
    assert fates[0] == ("repetition_run", 2500.0, "run of 'a' x2500 (char) at 0-2500")


def test_repeated_token_is_removed():
    doc = "Deal: " + "buy " * 600  # 2406 characters; the run " buy" x600 starts after "Deal:"
    rows, fates = run(RepetitionRuns(), doc)
    assert runs_of(rows[0]) == (2400, 2400 / 2406, "token")
    assert fates[0] == ("repetition_run", 2400.0, "run of 'buy' x600 (token) at 5-2405")


def test_document_that_is_mostly_one_pattern_is_removed_by_share():
    doc = "Title\n" + "-=" * 100 + "\nend of page text here"
    rows, fates = run(RepetitionRuns(), doc)
    assert runs_of(rows[0]) == (200, 200 / 228, "pattern")
    assert fates[0] == ("repetition_run_share", 200 / 228, "run of '-=' x100 (pattern) at 6-206")


def test_chinese_spam_review_is_removed_but_laughter_is_kept():
    rows, fates = run(RepetitionRuns(), "不近人情" * 108, "这本书太好笑了" + "哈" * 100 + "推荐", "哈哈哈哈哈哈哈哈哈哈笑死我了",
                      lang="zh")
    assert runs_of(rows[0]) == (432, 1.0, "pattern")
    assert fates[0] == ("repetition_run_share", 1.0, "run of '不近人情' x108 (pattern) at 0-432")
    assert runs_of(rows[1]) == (100, 100 / 109, "char") and fates[1][0] is None  # under 200 characters
    assert runs_of(rows[2]) == (0, 0.0, None) and fates[2][0] is None  # under 64: not measured


def test_separators_and_markdown_tables_are_measured_and_kept():
    rule = "Intro text.\n" + "=" * 80 + "\nMore text follows here, with a table."
    table = "| a | b |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n| 1 | 2 |"
    rows, fates = run(RepetitionRuns(), rule, table, "😀😂" * 40)
    assert runs_of(rows[0]) == (80, 80 / 130, "char")
    assert runs_of(rows[1]) == (72, 72 / 93, "pattern")
    assert runs_of(rows[2]) == (80, 1.0, "pattern")
    assert fates == [(None, None, None)] * 3


def test_runs_do_not_cross_document_boundaries():
    rows, _ = run(RepetitionRuns(), "a" * 40, "a" * 40, "b" * 70)
    assert [r["runs_longest_chars"] for r in rows] == [0, 0, 70]


@pytest.mark.parametrize("text", ["", "x", "one line", "no punctuation at all", "只有中文", "😀🎉"])
def test_edge_cases_have_no_run(text):
    rows, fates = run(RepetitionRuns(), text)
    assert runs_of(rows[0]) == (0, 0.0, None) and fates[0][0] is None


def test_runs_thresholds_by_lang_and_validation():
    _, fates = run(RepetitionRuns(), "不近人情" * 108, lang="zh")
    assert fates[0][0] == "repetition_run_share"
    _, fates = run(RepetitionRuns(by_lang={"zh": {"min_share_run_chars": 500}}), "不近人情" * 108, lang="zh")
    assert fates[0][0] is None
    with pytest.raises(ValueError, match=">= 24"):
        RepetitionRuns(min_run_chars=10)


# --- long tokens -------------------------------------------------------------------------------------------

def _base64_mail():
    rng = random.Random(0)
    body = base64.encodebytes(bytes(rng.randrange(256) for _ in range(1500))).decode()  # 76-char lines
    return "Subject: hi\n\nSee the attached file.\n\n" + body


def test_base64_attachment_is_removed():
    mail = _base64_mail()
    rows, fates = run(LongTokens(), mail)
    assert len(mail) == 2064
    assert rows[0]["long_tokens_longest_chars"] == 76
    assert rows[0]["long_tokens_blob_chars"] == 1976  # 26 full lines; the last, short line is not a blob
    assert fates[0] == ("encoded_blob", 1976 / 2064,
                        f"base64 blob of 76 chars (first of 26) at 37-113: {mail[37:77]!r}")


def test_hash_url_identifier_and_chinese_paragraph_are_kept():
    sha = "4796fb9c43cbf7bbd8bc9343d1b1f7a1b6c1b7ad8ee2d3e1cb5b1e5a3a6b7c8d"
    url = "https://example.com/" + "a/" * 50 + "page"
    ident = "ThisIsAVeryLongJavaIdentifierNameThatGoesOnAndOnWithoutAnyDigitsInIt"
    rows, fates = run(LongTokens(), f"sha256: {sha} ok", f"See {url} for more.", ident, "中" * 1200)
    assert [(r["long_tokens_longest_chars"], r["long_tokens_blob_chars"]) for r in rows] == \
        [(64, 64), (0, 0), (68, 0), (0, 0)]  # a URL is not a long token
    assert fates == [(None, None, None)] * 4  # the hash is a blob, but under min_blob_chars


def test_token_of_more_than_1000_characters_is_removed():
    rows, fates = run(LongTokens(), "minified: " + "x" * 1500, "x" * 1000)
    assert rows[0]["long_tokens_longest_chars"] == 1500
    assert fates[0] == ("long_token", 1500.0, f"token of 1500 chars at 10-1510: {'x' * 40!r}")
    assert fates[1][0] is None  # exactly 1000 is allowed


def test_long_urls_do_not_remove_documentation():
    # the Debian handbook quotes an attack's 1,289-character request path; Wikipedia cites long queries
    path = "/phpbb/viewtopic.php?t=10&highlight=%2527%252esystem(" + "chr(99)%252e" * 100 + "%2527"
    doc = f'Le journal contient "GET {path} HTTP/1.1" qui montre l\'attaque.'
    rows, fates = run(LongTokens(), doc, "ref |url=http://www.imf.org/weo/data.aspx?" + "c=512%2C" * 150)
    assert [r["long_tokens_longest_chars"] for r in rows] == [0, 0]
    assert fates == [(None, None, None)] * 2


def test_blob_kind():
    assert blob_kind("0123456789abcdef" * 4) == "hex"
    assert blob_kind("1234567890" * 7) is None  # a long number
    assert blob_kind("xY3" * 22 + "==") == "base64"
    assert blob_kind("aB3" * 22 + "==") == "base64"  # hex letters, but padded: base64
    assert blob_kind("abcdefghij" * 7) is None  # letters only: a word, not base64
    assert blob_kind("a/b1/C2/d3/" * 7) is None  # a path: too many slashes


@pytest.mark.parametrize("text", ["", "x", "one line", "no punctuation at all", "只有中文", "😀🎉"])
def test_long_tokens_edge_cases(text):
    rows, fates = run(LongTokens(), text)
    assert (rows[0]["long_tokens_longest_chars"], rows[0]["long_tokens_blob_chars"]) == (0, 0)


# --- properties --------------------------------------------------------------------------------------------

@settings(max_examples=120, deadline=None)
@given(st.lists(st.text(max_size=80), min_size=1, max_size=5))
def test_arbitrary_unicode_never_crashes_and_signals_stay_in_range(texts):
    rows, _ = run(RepetitionRuns(), *texts)
    for text, row in zip(texts, rows):
        assert row["runs_longest_chars"] == 0 or 64 <= row["runs_longest_chars"] <= len(text)
        assert 0.0 <= row["runs_longest_share"] <= 1.0
    rows, _ = run(LongTokens(), *texts)
    for text, row in zip(texts, rows):
        assert row["long_tokens_longest_chars"] == 0 or 64 <= row["long_tokens_longest_chars"] <= len(text)
        assert 0 <= row["long_tokens_blob_chars"] <= len(text)
        assert 0.0 <= row["long_tokens_blob_share"] <= 1.0


@settings(max_examples=120, deadline=None)
@given(st.text(max_size=40), st.text(min_size=1, max_size=8), st.integers(3, 40), st.text(max_size=40))
def test_byte_prefilter_never_misses_a_run_the_exact_scan_finds(before, unit, repeats, after):
    doc = before + unit * repeats + after
    exact = longest_run(doc, None, 64)
    windows = periodic_windows(pa.array([doc]), 64)
    found = longest_run(doc, windows[0], 64) if 0 in windows else None
    assert (found and found[0]) == (exact and exact[0])
