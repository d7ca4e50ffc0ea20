"""The SEO-spam family: signals of machine-generated and search-engine-bait pages.

Signals (every row, whatever its language):

* **Keyword stuffing.** ``seo_top1_word_frac`` and ``seo_top5_word_frac``: the share of the document's
  words (:func:`dataclean.text.words_batch`, lower-cased) taken by its most frequent word and by its five
  most frequent words, where stop words (``rules/lists/stopwords``: stopwords-iso English and Chinese,
  MIT) cannot be top words but do count in the denominator. This is the SEO notion of "keyword density"
  (occurrences of a keyword / words on the page); Ntoulas et al. 2006 ("Detecting Spam Web Pages through
  Content Analysis", WWW) show that spam pages draw an unusual share of their words from a few terms.
  In Chinese every Han character is a word, so a stuffed two-character keyword shows as two top words.
* **Link density.** ``seo_url_count`` (``http(s)://``, ``ftp://`` and ``www.`` URLs), ``seo_url_per_word``
  (URLs per word; a URL's own letters are words too, so a page of bare URLs scores about 0.2–0.3),
  ``seo_url_char_frac`` (share of the characters inside URLs) and ``seo_email_per_word`` (e-mail
  addresses per word). Link farms and directory pages are mostly links (Gyöngyi & Garcia-Molina 2005,
  "Web Spam Taxonomy").
* **Template lines.** ``seo_template_line_frac``: share of the non-empty lines (``seo_line_count``) that
  are template lines: a line with a letter whose normalized form (lower-cased, trimmed, ASCII digit runs
  replaced by ``0``, runs of spaces and tabs made one space) occurs at least ``min_line_repeats`` (3) times
  in the document, a navigation line of three or more short items (≤ 40 characters) separated by ``|``,
  ``｜``, ``•``, ``»``, ``›`` or a spaced ``·`` ("Home | About | Contact"), or a byline or boilerplate
  line ("Posted by admin on …", "Copyright © …", "Read more", "发表于 …", "上一篇").
* **Chinese spam vocabulary.** ``seo_zh_spam_hits``: matches of the Chinese gambling / pornography /
  advertising lexicon (``rules/lists/zh-spam``: ``ads.txt`` from konsheng/Sensitive-lexicon, MIT, minus
  ``exclude.txt``, plus our ``curated.txt``), counted with one RE2 alternation; ``seo_zh_spam_per_1k_han``
  = hits per 1,000 Han characters (0 when there is no Han character).

Rules, in this order (the first failing one is the recorded reason):

1. ``seo_top1_word`` — ``seo_top1_word_frac`` > ``max_top1_word_frac`` (0.20) with at least
   ``min_words`` (100) words;
2. ``seo_top5_words`` — ``seo_top5_word_frac`` > ``max_top5_word_frac`` (0.50), same word minimum;
3. ``seo_url_per_word`` — ``seo_url_per_word`` > ``max_url_per_word`` (0.10) with at least ``min_urls``
   (5) URLs;
4. ``seo_url_chars`` — ``seo_url_char_frac`` > ``max_url_char_frac`` (0.50) with at least ``min_urls``;
5. ``seo_email_per_word`` — ``seo_email_per_word`` > ``max_email_per_word`` (0.08) with at least
   ``min_words``;
6. ``seo_template_lines`` — ``seo_template_line_frac`` > ``max_template_line_frac`` (0.60) with at least
   ``min_lines`` (10) non-empty lines;
7. ``seo_zh_spam_terms`` — ``seo_zh_spam_per_1k_han`` > ``max_zh_spam_per_1k_han`` (5) with at least
   ``min_zh_spam_hits`` (3) matches.

There is no published threshold set for these signals (SEO guides call a keyword density above 2–3 %
"stuffing"; that is a warning level for writers, far too strict for removal). The defaults sit above
what clean text reaches on bench shards 0–1 (English and Chinese prose, reviews, Weibo, Wikipedia,
Debian and LibreOffice documentation, man pages), so only the extreme tail is removed — precision over
recall. Measured maxima of clean non-code text with at least 100 words: top-1 0.14 (English), 0.17
(LibreOffice zh help); top-5 0.41 (English LibreOffice help), 0.44 (zh LibreOffice help), 0.32 (zh
prose); e-mail per word 0.064 (mailing-list mail with headers); template lines 0.47 (docs). Stop words
are English and Chinese only (stopwords-iso ``en`` is large and also holds web words such as ``free``,
``home``, ``click``, ``com``, which therefore never count as keywords); other languages' function words
can be top words, which the thresholds leave room for. Numbers are never top words (a table of ``1``s is
not keyword stuffing). Chinese documents get higher top-1/top-5 bounds through ``by_lang`` (default
recipe: 0.25 and 0.60), because a character is a smaller unit than a word and character frequencies are
more skewed.
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.stages.base import Check, Decisions, RuleSpec, Stage, StageResult, with_columns
from dataclean.stages.lists import load_terms, terms_pattern
from dataclean.text.tokenize import HAN, lines_batch, words_batch

URL = r"(?i)(?:\b(?:https?|ftp)://|\bwww\.)[^\s<>\"'`\p{Han}\x{3000}-\x{303f}\x{ff00}-\x{ffef}]+"
EMAIL = r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9](?:[A-Za-z0-9-]*[A-Za-z0-9])?(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b"
HAN_CHAR = f"[{HAN}]"
# A navigation line: three or more short items (up to 40 characters) separated by | ｜ • » › or a spaced
# middle dot (an unspaced · joins the parts of a transliterated name: 列夫·托尔斯泰).
_NAV_SEP = r"(?:[|｜•»›]|\s·\s)"
_NAV_ITEM = r"[^|｜•»›\s][^|｜•»›]{0,39}"
NAV_LINE = rf"^{_NAV_ITEM}(?:\s*{_NAV_SEP}\s*{_NAV_ITEM}){{2,}}\s*{_NAV_SEP}?$"
# Bylines and page furniture, matched on the normalized (lower-case, digits -> 0) line.
BOILERPLATE_LINE = (
    r"^(?:(?:posted|written|published|submitted|filed)\s+(?:by|on|in|under)\b"
    r"|copyright\b|©|all rights reserved|powered by\b|share this\b|read more\b|continue reading\b"
    r"|leave a (?:reply|comment)\b|click here\b|skip to (?:main )?content\b|tags?\s*:|categor(?:y|ies)\s*:"
    r"|发表于|发布于|发布时间|上一篇|下一篇|返回首页|版权所有|点击查看|阅读全文|浏览次数)"
)

DEFAULT_STOPWORDS = ["lists/stopwords/en.txt", "lists/stopwords/zh.txt"]
DEFAULT_ZH_SPAM = ["lists/zh-spam/ads.txt", "lists/zh-spam/curated.txt"]
DEFAULT_ZH_SPAM_EXCLUDE = ["lists/zh-spam/exclude.txt"]


def _flat_parent(lists: pa.ListArray) -> tuple[pa.Array, np.ndarray]:
    return pc.list_flatten(lists), pc.list_parent_indices(lists).to_numpy().astype(np.int64)


def pair_counts(parent: np.ndarray, values: pa.Array, per_element: bool = False):
    """Count equal ``values`` within each row (``parent`` gives the row of each value). Returns the row of
    each distinct (row, value) pair and its count, and with ``per_element`` also the count of each
    element's pair."""
    if len(values) == 0:
        z = np.zeros(0, np.int64)
        return (z, z, z) if per_element else (z, z)
    enc = pc.dictionary_encode(values)
    width = len(enc.dictionary) + 1
    keys = parent * width + enc.indices.to_numpy().astype(np.int64)
    if per_element:
        uniq, inverse, counts = np.unique(keys, return_inverse=True, return_counts=True)
        return uniq // width, counts, counts[inverse]
    uniq, counts = np.unique(keys, return_counts=True)
    return uniq // width, counts


def top_word_counts(words: pa.ListArray, stopwords: pa.Array, n_rows: int,
                    k: int = 5) -> tuple[np.ndarray, np.ndarray]:
    """Per row: occurrences of its most frequent word, and of its ``k`` most frequent words together,
    where stop words and numbers cannot be top words."""
    flat, parent = _flat_parent(words)
    flat = pc.utf8_lower(flat)
    # stop words and numbers (table cells, dates) cannot be top words
    content = pc.invert(pc.or_(pc.is_in(flat, value_set=stopwords), pc.utf8_is_numeric(flat)))
    content = content.to_numpy(zero_copy_only=False)
    row, count = pair_counts(parent[content], flat.filter(pa.array(content)))
    top1 = np.zeros(n_rows, np.int64)
    topk = np.zeros(n_rows, np.int64)
    if len(row):
        # one sort of row * m + (m - 1 - count): rows ascending, counts descending within a row
        m = int(count.max()) + 1
        key = np.sort(row * m + (m - 1 - count))
        row, count = key // m, m - 1 - key % m
        starts = np.flatnonzero(np.r_[True, row[1:] != row[:-1]])
        rank = np.arange(len(row)) - np.repeat(starts, np.diff(np.r_[starts, len(row)]))
        top1[row[starts]] = count[starts]
        sel = rank < k
        topk = np.bincount(row[sel], weights=count[sel], minlength=n_rows).astype(np.int64)
    return top1, topk


def template_lines(texts: pa.Array, n_rows: int, min_repeats: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row: (non-empty lines, template lines) — see the module docstring for what a template line is."""
    lines, parent = _flat_parent(lines_batch(texts))
    norm = pc.utf8_trim_whitespace(pc.utf8_lower(lines))
    keep = pc.greater(pc.utf8_length(norm), 0).to_numpy(zero_copy_only=False)
    # Mask digits only in the lines that have one (a minority); the order of lines does not matter below.
    digit = pc.match_substring_regex(norm, r"\d").to_numpy(zero_copy_only=False)
    plain, numbered = keep & ~digit, keep & digit
    norm = pa.concat_arrays([norm.filter(pa.array(plain)),
                             pc.replace_substring_regex(norm.filter(pa.array(numbered)), r"\d+", "0")])
    parent = np.concatenate([parent[plain], parent[numbered]])
    norm = pc.replace_substring_regex(norm, r"[ \t]{2,}|\t", " ")
    _, _, repeats = pair_counts(parent, norm, per_element=True)
    # a repeated line must have a letter: "}", "----" or "0." repeated are layout, not a template
    template = (repeats >= min_repeats) & pc.match_substring_regex(norm, r"\pL").to_numpy(zero_copy_only=False)
    template |= pc.match_substring_regex(norm, NAV_LINE).to_numpy(zero_copy_only=False)
    template |= pc.match_substring_regex(norm, BOILERPLATE_LINE).to_numpy(zero_copy_only=False)
    n_lines = np.bincount(parent, minlength=n_rows).astype(np.int64)
    n_template = np.bincount(parent[template], minlength=n_rows).astype(np.int64)
    return n_lines, n_template


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    return np.divide(num, den, out=np.zeros(len(num), np.float64), where=den > 0)


class SeoSpam(Stage):
    """SEO-spam signals and rules (see the module docstring for definitions and sources).

    Parameters (``None`` disables a rule; per-language values through ``by_lang``):
    ``max_top1_word_frac`` = 0.20, ``max_top5_word_frac`` = 0.50, ``min_words`` = 100,
    ``max_url_per_word`` = 0.10, ``max_url_char_frac`` = 0.50, ``min_urls`` = 5, ``max_email_per_word`` =
    0.08, ``max_template_line_frac`` = 0.60, ``min_lines`` = 10, ``min_line_repeats`` = 3,
    ``max_zh_spam_per_1k_han`` = 5, ``min_zh_spam_hits`` = 3; ``stopwords``, ``zh_spam_lists`` and
    ``zh_spam_exclude`` are list paths relative to the rules folder. The default recipe sets, for
    ``zh``: ``max_top1_word_frac: 0.25``, ``max_top5_word_frac: 0.60``.
    """

    kind = "seo_spam"
    signal_fields = [
        pa.field("seo_word_count", pa.int64()),
        pa.field("seo_top1_word_frac", pa.float64()),
        pa.field("seo_top5_word_frac", pa.float64()),
        pa.field("seo_url_count", pa.int64()),
        pa.field("seo_url_per_word", pa.float64()),
        pa.field("seo_url_char_frac", pa.float64()),
        pa.field("seo_email_per_word", pa.float64()),
        pa.field("seo_line_count", pa.int64()),
        pa.field("seo_template_line_frac", pa.float64()),
        pa.field("seo_zh_spam_hits", pa.int64()),
        pa.field("seo_zh_spam_per_1k_han", pa.float64()),
    ]
    rule_specs = [
        RuleSpec("seo_top1_word", "seo_top1_word_frac", ("max_top1_word_frac", "min_words"), "max",
                 "share of words taken by the most frequent non-stop word"),
        RuleSpec("seo_top5_words", "seo_top5_word_frac", ("max_top5_word_frac", "min_words"), "max",
                 "share of words taken by the five most frequent non-stop words"),
        RuleSpec("seo_url_per_word", "seo_url_per_word", ("max_url_per_word", "min_urls"), "max",
                 "URLs per word"),
        RuleSpec("seo_url_chars", "seo_url_char_frac", ("max_url_char_frac", "min_urls"), "max",
                 "share of characters inside URLs"),
        RuleSpec("seo_email_per_word", "seo_email_per_word", ("max_email_per_word", "min_words"), "max",
                 "e-mail addresses per word"),
        RuleSpec("seo_template_lines", "seo_template_line_frac", ("max_template_line_frac", "min_lines"), "max",
                 "share of lines that are repeated, navigation or boilerplate template lines"),
        RuleSpec("seo_zh_spam_terms", "seo_zh_spam_per_1k_han", ("max_zh_spam_per_1k_han", "min_zh_spam_hits"),
                 "max", "Chinese gambling/porn/ad spam terms per 1,000 Han characters"),
    ]

    def __init__(self, max_top1_word_frac: float | None = 0.20, max_top5_word_frac: float | None = 0.50,
                 min_words: int = 100, max_url_per_word: float | None = 0.10,
                 max_url_char_frac: float | None = 0.50, min_urls: int = 5,
                 max_email_per_word: float | None = 0.08, max_template_line_frac: float | None = 0.60,
                 min_lines: int = 10, min_line_repeats: int = 3, max_zh_spam_per_1k_han: float | None = 5.0,
                 min_zh_spam_hits: int = 3, stopwords: Sequence[str] | None = None,
                 zh_spam_lists: Sequence[str] | None = None, zh_spam_exclude: Sequence[str] | None = None,
                 by_lang: dict | None = None, name: str | None = None):
        super().__init__(name)
        if min_line_repeats < 2:
            raise ValueError("seo_spam.min_line_repeats must be >= 2")
        for key, v in (("min_words", min_words), ("min_urls", min_urls), ("min_lines", min_lines),
                       ("min_zh_spam_hits", min_zh_spam_hits)):
            if v < 0:
                raise ValueError(f"seo_spam.{key} must be >= 0")
        self.max_top1_word_frac = max_top1_word_frac
        self.max_top5_word_frac = max_top5_word_frac
        self.min_words = min_words
        self.max_url_per_word = max_url_per_word
        self.max_url_char_frac = max_url_char_frac
        self.min_urls = min_urls
        self.max_email_per_word = max_email_per_word
        self.max_template_line_frac = max_template_line_frac
        self.min_lines = min_lines
        self.min_line_repeats = min_line_repeats
        self.max_zh_spam_per_1k_han = max_zh_spam_per_1k_han
        self.min_zh_spam_hits = min_zh_spam_hits
        self.stopwords = list(DEFAULT_STOPWORDS if stopwords is None else stopwords)
        self.zh_spam_lists = list(DEFAULT_ZH_SPAM if zh_spam_lists is None else zh_spam_lists)
        self.zh_spam_exclude = list(DEFAULT_ZH_SPAM_EXCLUDE if zh_spam_exclude is None else zh_spam_exclude)
        stop = {w.lower() for w in load_terms(self.stopwords)}
        self._stopwords = pa.array(sorted(stop), pa.string())
        self._zh_spam_pattern = terms_pattern(load_terms(self.zh_spam_lists, self.zh_spam_exclude))
        self.set_by_lang(by_lang)

    def signals(self, texts: pa.Array) -> dict[str, pa.Array]:
        texts = pc.fill_null(texts.cast(pa.string()), "")
        n = len(texts)
        words = words_batch(texts)
        n_words = pc.list_value_length(words).to_numpy().astype(np.int64)
        top1, top5 = top_word_counts(words, self._stopwords, n)
        n_urls = pc.count_substring_regex(texts, URL).to_numpy().astype(np.int64)
        n_chars = pc.utf8_length(texts).to_numpy().astype(np.int64)
        url_chars = np.zeros(n, np.int64)
        has_url = np.flatnonzero(n_urls > 0)
        if len(has_url):
            sub = texts.take(pa.array(has_url))
            url_chars[has_url] = n_chars[has_url] - pc.utf8_length(
                pc.replace_substring_regex(sub, URL, "")).to_numpy()
        n_emails = pc.count_substring_regex(texts, EMAIL).to_numpy().astype(np.int64)
        n_lines, n_template = template_lines(texts, n, self.min_line_repeats)
        if self._zh_spam_pattern is not None:
            zh_hits = pc.count_substring_regex(texts, self._zh_spam_pattern).to_numpy().astype(np.int64)
        else:
            zh_hits = np.zeros(n, np.int64)
        n_han = pc.count_substring_regex(texts, HAN_CHAR).to_numpy().astype(np.int64)
        return {
            "seo_word_count": pa.array(n_words, pa.int64()),
            "seo_top1_word_frac": pa.array(_ratio(top1, n_words)),
            "seo_top5_word_frac": pa.array(_ratio(top5, n_words)),
            "seo_url_count": pa.array(n_urls, pa.int64()),
            "seo_url_per_word": pa.array(_ratio(n_urls, n_words)),
            "seo_url_char_frac": pa.array(_ratio(url_chars, n_chars)),
            "seo_email_per_word": pa.array(_ratio(n_emails, n_words)),
            "seo_line_count": pa.array(n_lines, pa.int64()),
            "seo_template_line_frac": pa.array(_ratio(n_template, n_lines)),
            "seo_zh_spam_hits": pa.array(zh_hits, pa.int64()),
            "seo_zh_spam_per_1k_han": pa.array(1000.0 * _ratio(zh_hits, n_han)),
        }

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        n = batch.num_rows
        sig = self.signals(batch.column("text"))
        out = with_columns(batch, sig)
        p = lambda name: self.per_row(batch, name)  # noqa: E731 - a short local alias

        def above(signal: str, limit: str, count: str, minimum: str) -> pa.Array:
            return pc.and_(pc.greater(sig[signal], p(limit)), pc.greater_equal(sig[count], p(minimum)))

        rules = [
            ("seo_top1_word", "keyword_stuffing", "seo_top1_word_frac", "max_top1_word_frac", "seo_word_count",
             "min_words"),
            ("seo_top5_words", "keyword_stuffing", "seo_top5_word_frac", "max_top5_word_frac", "seo_word_count",
             "min_words"),
            ("seo_url_per_word", "link_density", "seo_url_per_word", "max_url_per_word", "seo_url_count",
             "min_urls"),
            ("seo_url_chars", "link_density", "seo_url_char_frac", "max_url_char_frac", "seo_url_count",
             "min_urls"),
            ("seo_email_per_word", "email_density", "seo_email_per_word", "max_email_per_word",
             "seo_word_count", "min_words"),
            ("seo_template_lines", "template_lines", "seo_template_line_frac", "max_template_line_frac",
             "seo_line_count", "min_lines"),
            ("seo_zh_spam_terms", "zh_spam_terms", "seo_zh_spam_per_1k_han", "max_zh_spam_per_1k_han",
             "seo_zh_spam_hits", "min_zh_spam_hits"),
        ]
        checks = [Check(rule, reason, above(signal, limit, count, minimum), value=sig[signal],
                        threshold=p(limit))
                  for rule, reason, signal, limit, count, minimum in rules]
        return StageResult(out, Decisions.from_checks(n, checks))
