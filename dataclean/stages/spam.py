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
* **Strong Chinese spam terms.** ``seo_zh_strong_hits``: matches of ``rules/lists/zh-spam/strong.txt``
  (ours: casino and sportsbook brands such as 乐虎国际 华体会 欧宝体育 必威体育 yabo bt365 js333金沙,
  lottery games, 办假证 / 办证刻章 / 代开发票, adult-site phrases) — terms that are spam in essentially
  every use; names that news and reviews also use (威尼斯人, 新葡京, 永利皇宫, 办证 alone) are not in it.
  ``seo_title_zh_strong_hits``: the same in the first non-blank line (a CC extraction starts with the
  page title, where hijacked sites inject the brand: 【欧宝体育app】).
* **Keyword stuffing in a line.** A line is cut into keyword items at ``_ | - ， , 、 / : ； 【】 ()`` and
  similar separators, and at spaces next to a Han character. A keyword is a whole item of two or more
  characters, or the first or last two Han characters of an item of at most ``keyword_item_chars`` (12)
  characters (北京办证 上海办证 → 办证 twice); items of one repeated character (哈哈哈) are not keywords.
  ``seo_title_keyword_repeats``: occurrences of the most repeated keyword of the first non-blank line, when
  that line is title-like (at most ``title_chars`` (64) characters, with more lines after it);
  ``seo_line_keyword_repeats``: the same, maximum over keyword lines (no sentence punctuation 。！？；, pieces
  between separators of on average at most ``list_item_chars`` characters). Only lines with at least 3
  separators are cut (a cheap RE2 pre-filter), so prose costs one count per line.
* **City × service lists.** ``seo_city_service_count``: the largest number of distinct city or province
  names (``rules/lists/zh-spam/cities.txt``, ours) followed by one same two-character service word
  (北京办证 上海办证 广州办证 …: 办证 after 3 cities); only rows with more city mentions than the bound are cut.
* **Pinyin injection.** ``seo_pinyin_injections``: Han characters followed by one toneless pinyin syllable
  in parentheses, 烟(yan)台(tai) (initial + final only, so 苹果(apple) does not match).
* **List blocks.** ``seo_list_line_frac``: share of the characters of non-empty lines in list lines — lines
  without sentence punctuation that are short (≤ 15 characters) in a run of at least ``list_min_run`` (5),
  or hold at least ``list_min_items`` (6) keyword items of on average at most ``list_item_chars`` (8)
  characters (热门城市：淄博口罩 山东口罩 …): navigation menus and link farms.

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
   ``min_zh_spam_hits`` (3) matches;
8. ``seo_title_zh_strong_term`` — ``seo_title_zh_strong_hits`` > ``max_title_zh_strong_hits`` (0);
9. ``seo_zh_strong_terms`` — ``seo_zh_strong_hits`` > ``max_zh_strong_hits`` (0): one strong term removes.
   No strong term occurs in any of the 180,651 Chinese documents of bench shards 0–11; on the 44 pages of
   ``shared/labelled/zh-cc-dev.jsonl`` rules 8–9 remove the 7 pages with a brand in their text (yabo,
   欧宝体育, 必威betway, 华体会, bt365, 爱游戏体育, ope体育) and nothing else. A page whose brand is only in
   its HTML title (not in ``text``) cannot be seen;
10. ``seo_title_stuffing`` — ``seo_title_keyword_repeats`` > ``max_title_keyword_repeats`` (3): clean bench
    maximum 3;
11. ``seo_city_service`` — ``seo_city_service_count`` > ``max_city_services`` (9): removes 1 clean bench
    document (a Weibo cheer 武汉加油！重庆加油！… with 17 provinces); the next clean value is 7 (a list of
    provincial TV stations in Wikipedia);
12. ``seo_pinyin_injection`` — ``seo_pinyin_injections`` > ``max_pinyin_injections`` (4): clean bench max 3;
13. ``seo_line_stuffing`` — ``seo_line_keyword_repeats`` > ``max_line_keyword_repeats`` (8): clean bench
    99.99th percentile 5; the 6 clean documents above 8 are copy-pasted reviews (没发票 ×13) and one
    LibreOffice help page;
14. ``seo_list_lines`` — ``seo_list_line_frac`` > ``max_list_line_frac`` (0.80) with at least ``min_lines``
    (10) non-empty lines: no clean bench document.

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
from dataclean.text import kernels
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
DEFAULT_ZH_STRONG = ["lists/zh-spam/strong.txt"]
DEFAULT_ZH_CITIES = ["lists/zh-spam/cities.txt"]

# Keyword items: a line is cut at these separators; spaces separate items only next to a Han character
# (Chinese keyword lists are space-separated, English prose is not a keyword list). Square brackets are
# not separators (Weibo emoji codes such as [doge] stay inside their item).
_HAN_SPACE = r"[ \t\x{3000}\x{a0}]"
_SPACE_BY_HAN = rf"([{HAN}]){_HAN_SPACE}+|{_HAN_SPACE}+([{HAN}])"
_ITEM_SEP = r"[\x{1f}_|｜,，、/;；:：·•【】()（）《》<>\"“”‘’!！?？。~…\-–—]+"
_ITEM_SEP_OR_SPACE_CLASS = _ITEM_SEP[:-2] + r" \t\x{3000}]"  # (one character: the kernel counts its runs)
_ITEM_SEP_OR_SPACE = _ITEM_SEP_OR_SPACE_CLASS + "+"
_HAN2_HEAD = rf"^[{HAN}]{{2}}"
_HAN2_TAIL = rf"[{HAN}]{{2}}$"
# pinyin injection: a Han character followed by one toneless pinyin syllable in ASCII or full-width
# parentheses, 烟(yan)台(tai); the syllable pattern accepts initial + final only, so glosses such as
# 苹果(apple) or 公交(bus) do not match.
_PY_INITIAL = r"(?:zh|ch|sh|[bpmfdtnlgkhjqxrzcsyw])"
_PY_FINAL = (r"(?:iang|iong|uang|ang|eng|ing|ong|uai|iao|ian|uan|van|ai|ei|ao|ou|an|en|in|un|vn|ia|ie|iu|ua|uo"
             r"|ui|ue|ve|er|a|o|e|i|u|v)")
PINYIN_INJECTION = rf"(?i)[{HAN}][(（]{_PY_INITIAL}?{_PY_FINAL}[)）]"
# a list line: no sentence punctuation (a nav entry, a name, a link text)
_SENTENCE_PUNCT = r"[。！？!?；;]|[，,]\s*\S.*[，,]"


def _flat_parent(lists: pa.ListArray) -> tuple[pa.Array, np.ndarray]:
    return pc.list_flatten(lists), pc.list_parent_indices(lists).to_numpy().astype(np.int64)


def pair_counts(parent: np.ndarray, values: pa.Array, per_element: bool = False):
    """Count equal ``values`` within each row (``parent`` gives the row of each value). Returns the row of
    each distinct (row, value) pair and its count, in no particular order (the callers' results do not depend
    on it), and with ``per_element`` also the count of each element's pair.

    With the compiled kernels: a dictionary encoding, then one pass per row (``kernels.pair_counts``); without:
    the encoding and a sort of the (row, value) keys. The same pairs and counts either way
    (``benchmarks/profile_stages.py --stage seo_spam --check``)."""
    if len(values) == 0:
        z = np.zeros(0, np.int64)
        return (z, z, z) if per_element else (z, z)
    if values.null_count == 0 and kernels.enabled():
        per, first = kernels.pair_counts(values, parent)
        row, count = np.asarray(parent, np.int64)[first], per[first]
        return (row, count, per) if per_element else (row, count)
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
    if len(flat) and flat.null_count == 0 and kernels.enabled():
        # encode once; stop words and numbers are looked up among the distinct words only
        enc = pc.dictionary_encode(flat)
        words_in = enc.dictionary
        drop = pc.or_(pc.is_in(words_in, value_set=stopwords), pc.utf8_is_numeric(words_in))
        codes = enc.indices.to_numpy(zero_copy_only=False)
        content = ~drop.to_numpy(zero_copy_only=False)[codes]
        per, first = kernels.code_pair_counts(codes[content], len(words_in), parent[content])
        row, count = parent[content][first], per[first]
    else:
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


def template_lines(lines: pa.Array, parent: np.ndarray, n_rows: int,
                   min_repeats: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row: (non-empty lines, template lines) — see the module docstring for what a template line is.
    ``lines`` are all lines of the batch, ``parent`` the row of each."""
    norm = pc.utf8_trim_whitespace(pc.utf8_lower(lines))
    keep = pc.greater(pc.utf8_length(norm), 0).to_numpy(zero_copy_only=False)
    got = None
    if len(norm) and norm.null_count == 0 and kernels.enabled():
        got = kernels.template_norm(norm.filter(pa.array(keep)))  # (one pass: digits, spaces, letters)
    if got is not None:
        norm, letter = got
        parent = parent[keep]
    else:
        # Mask digits only in the lines that have one (a minority); the order of lines does not matter below.
        digit = pc.match_substring_regex(norm, r"\d").to_numpy(zero_copy_only=False)
        plain, numbered = keep & ~digit, keep & digit
        norm = pa.concat_arrays([norm.filter(pa.array(plain)),
                                 pc.replace_substring_regex(norm.filter(pa.array(numbered)), r"\d+", "0")])
        parent = np.concatenate([parent[plain], parent[numbered]])
        norm = pc.replace_substring_regex(norm, r"[ \t]{2,}|\t", " ")
        letter = pc.match_substring_regex(norm, r"\pL").to_numpy(zero_copy_only=False)
    _, _, repeats = pair_counts(parent, norm, per_element=True)
    # a repeated line must have a letter: "}", "----" or "0." repeated are layout, not a template
    template = (repeats >= min_repeats) & letter
    template |= pc.match_substring_regex(norm, NAV_LINE).to_numpy(zero_copy_only=False)
    template |= pc.match_substring_regex(norm, BOILERPLATE_LINE).to_numpy(zero_copy_only=False)
    n_lines = np.bincount(parent, minlength=n_rows).astype(np.int64)
    n_template = np.bincount(parent[template], minlength=n_rows).astype(np.int64)
    return n_lines, n_template


def keyword_items(lines: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """Cut each line into keyword items (see ``_ITEM_SEP``); returns the items and the line of each."""
    marked = pc.replace_substring_regex(lines, _SPACE_BY_HAN, "\\1\x1f\\2")
    items, item_line = _flat_parent(pc.split_pattern_regex(marked, _ITEM_SEP))
    items = pc.utf8_lower(pc.utf8_trim_whitespace(items))
    return items, item_line


def item_repeats(items: pa.Array, item_line: np.ndarray, n_lines: int, max_item_chars: int) -> np.ndarray:
    """Per line: how often its most repeated keyword occurs, where a keyword is a whole item of at least
    two characters, or the first or last two Han characters of an item of at most ``max_item_chars``
    characters (北京办证 上海办证: tail 办证 twice). Items of one repeated character (哈哈哈) count not."""
    out = np.zeros(n_lines, np.int64)
    if len(items) == 0:
        return out
    length = pc.utf8_length(items)
    one_char = pc.equal(pc.binary_repeat(pc.utf8_slice_codeunits(items, 0, 1), length), items)
    ok = pc.and_(pc.greater_equal(length, 2), pc.invert(one_char)).to_numpy(zero_copy_only=False)
    short = ok & pc.less_equal(length, max_item_chars).to_numpy(zero_copy_only=False)
    keys, rows = [pc.binary_join_element_wise("w", items.filter(pa.array(ok)), "")], [item_line[ok]]
    head = pc.utf8_slice_codeunits(items, 0, 2)
    tail = pc.utf8_slice_codeunits(items, -2, 2**31 - 1)
    for part, pattern, extra in ((head, _HAN2_HEAD, None), (tail, _HAN2_TAIL, pc.not_equal(tail, head))):
        # head and tail are one kind of keyword; an item whose tail is its head (办证) counts once
        sel = short & pc.match_substring_regex(items, pattern).to_numpy(zero_copy_only=False)
        # a two-character keyword of one repeated character (哈哈) is not a keyword either
        sel &= pc.not_equal(pc.utf8_slice_codeunits(part, 0, 1),
                            pc.utf8_slice_codeunits(part, 1, 2)).to_numpy(zero_copy_only=False)
        if extra is not None:
            sel &= extra.to_numpy(zero_copy_only=False)
        if not sel.any():
            continue
        keys.append(pc.binary_join_element_wise("k", part.filter(pa.array(sel)), ""))
        rows.append(item_line[sel])
    row, count = pair_counts(np.concatenate(rows), pa.concat_arrays(keys))
    if len(row):
        np.maximum.at(out, row, count)
    return out


def line_keywords(lines: pa.Array, max_item_chars: int) -> tuple[np.ndarray, np.ndarray]:
    """Per line: its non-empty keyword items and the occurrences of its most repeated keyword
    (:func:`keyword_items`, then :func:`item_repeats`). With the compiled kernels, one pass over the
    lower-cased lines (``kernels.keyword_repeats``; cutting lower-cased lines gives the same items, lower-cased:
    no separator, space or Han character has a case). The same counts either way
    (``benchmarks/profile_stages.py --stage seo_spam --check``)."""
    if len(lines) and lines.null_count == 0 and kernels.enabled():
        got = kernels.keyword_repeats(pc.utf8_lower(lines), _ITEM_SEP[:-1], _HAN_SPACE, HAN_CHAR, max_item_chars)
        if got is not None:
            return got
    items, item_line = keyword_items(lines)
    reps = item_repeats(items, item_line, len(lines), max_item_chars)
    n_items = np.bincount(item_line, weights=pc.greater(pc.utf8_length(items), 0).to_numpy(
        zero_copy_only=False), minlength=len(lines)).astype(np.int64)
    return n_items, reps


def city_service_counts(texts: pa.Array, city_pattern: str, min_cities: int) -> np.ndarray:
    """Per row: the largest number of distinct city names followed by one same service word (the two Han
    characters after the city, after an optional 市/省), 北京办证 上海办证 广州办证 -> 3. Only rows with at
    least ``min_cities`` city mentions are cut into items."""
    n = len(texts)
    out = np.zeros(n, np.int64)
    n_city = pc.count_substring_regex(texts, city_pattern).to_numpy().astype(np.int64)
    cand = np.flatnonzero(n_city >= max(min_cities, 1))
    if not len(cand):
        return out
    sub = pc.replace_substring_regex(texts.take(pa.array(cand)), f"({city_pattern})", "\x1f\\1")
    items, item_row = keyword_items(sub)
    pair = pc.extract_regex(items, rf"^(?P<c>{city_pattern})[市省]?(?P<s>[{HAN}]{{2}})")
    valid = pc.is_valid(pair).to_numpy(zero_copy_only=False)
    if not valid.any():
        return out
    pair = pair.filter(pa.array(valid))
    city, service = pair.field("c"), pair.field("s")
    rows = item_row[valid]
    # distinct (row, service, city), then cities per (row, service); a service is exactly two characters
    enc = pc.dictionary_encode(pc.binary_join_element_wise(service, city, ""))
    width = len(enc.dictionary) + 1
    uniq = np.unique(rows * width + enc.indices.to_numpy().astype(np.int64))
    u_row = uniq // width
    u_service = pc.utf8_slice_codeunits(enc.dictionary.take(pa.array(uniq % width)), 0, 2)
    r, c = pair_counts(u_row, u_service)
    if len(r):
        res = np.zeros(len(cand), np.int64)
        np.maximum.at(res, r, c)
        out[cand] = res
    return out


def list_line_chars(lines: pa.Array, parent: np.ndarray, n_items: np.ndarray, n_rows: int, min_run: int,
                    min_items: int, max_item_chars: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: (characters in non-empty lines, characters in list lines), and per line whether it is a
    keyword line (no sentence punctuation, items of on average at most ``max_item_chars`` characters,
    separators included). A list line has no sentence
    punctuation and is either a short line (at most 15 characters) in a run of at least ``min_run``
    consecutive short lines, or a line of at least ``min_items`` keyword items of on average at most
    ``max_item_chars`` characters (热门城市：淄博口罩 山东口罩 临沂口罩 …)."""
    trimmed = pc.utf8_trim_whitespace(lines)
    length = pc.utf8_length(trimmed).to_numpy().astype(np.int64)
    nonempty = length > 0
    sentence = None
    if len(trimmed) and trimmed.null_count == 0 and kernels.enabled():
        sentence = kernels.sentence_punct(trimmed)
    if sentence is None:
        sentence = pc.match_substring_regex(trimmed, _SENTENCE_PUNCT).to_numpy(zero_copy_only=False)
    plain = ~sentence & nonempty
    short = plain & (length <= 15)
    # runs of short lines within a document (empty lines do not break a run)
    idx = np.flatnonzero(nonempty)
    s, par = short[idx], parent[idx]
    brk = np.r_[True, (s[1:] != s[:-1]) | (par[1:] != par[:-1])]
    run_id = np.cumsum(brk) - 1
    run_len = np.bincount(run_id)
    in_run = np.zeros(len(length), bool)
    in_run[idx] = s & (run_len[run_id] >= min_run)
    # a keyword line: no sentence punctuation, items of on average at most max_item_chars characters
    keyword_line = plain & (length <= max_item_chars * np.maximum(n_items, 1) + n_items)
    many = keyword_line & (n_items >= min_items)
    listed = in_run | many
    total = np.bincount(parent, weights=length, minlength=n_rows).astype(np.int64)
    listed_chars = np.bincount(parent[listed], weights=length[listed], minlength=n_rows).astype(np.int64)
    return total, listed_chars, keyword_line


def _ratio(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    return np.divide(num, den, out=np.zeros(len(num), np.float64), where=den > 0)


class SeoSpam(Stage):
    """SEO-spam signals and rules (see the module docstring for definitions and sources).

    Parameters (``None`` disables a rule; per-language values through ``by_lang``):
    ``max_top1_word_frac`` = 0.20, ``max_top5_word_frac`` = 0.50, ``min_words`` = 100,
    ``max_url_per_word`` = 0.10, ``max_url_char_frac`` = 0.50, ``min_urls`` = 5, ``max_email_per_word`` =
    0.08, ``max_template_line_frac`` = 0.60, ``min_lines`` = 10, ``min_line_repeats`` = 3,
    ``max_zh_spam_per_1k_han`` = 5, ``min_zh_spam_hits`` = 3, ``max_zh_strong_hits`` = 0,
    ``max_title_zh_strong_hits`` = 0, ``max_title_keyword_repeats`` = 3, ``max_line_keyword_repeats`` = 8,
    ``keyword_item_chars`` = 12, ``title_chars`` = 64, ``max_city_services`` = 9, ``max_pinyin_injections`` = 4,
    ``max_list_line_frac`` = 0.80, ``list_min_run`` = 5, ``list_min_items`` = 6, ``list_item_chars`` = 8;
    ``stopwords``, ``zh_spam_lists``, ``zh_spam_exclude``, ``zh_strong_lists`` and ``zh_city_lists`` are
    list paths relative to the rules folder. The default recipe sets, for
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
        pa.field("seo_zh_strong_hits", pa.int64()),
        pa.field("seo_title_zh_strong_hits", pa.int64()),
        pa.field("seo_title_keyword_repeats", pa.int64()),
        pa.field("seo_line_keyword_repeats", pa.int64()),
        pa.field("seo_city_service_count", pa.int64()),
        pa.field("seo_pinyin_injections", pa.int64()),
        pa.field("seo_list_line_frac", pa.float64()),
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
        RuleSpec("seo_zh_strong_terms", "seo_zh_strong_hits", ("max_zh_strong_hits",), "max",
                 "strong Chinese spam terms (casino/sportsbook brands, 办假证, 代开发票)"),
        RuleSpec("seo_title_zh_strong_term", "seo_title_zh_strong_hits", ("max_title_zh_strong_hits",), "max",
                 "strong Chinese spam terms in the first non-blank line"),
        RuleSpec("seo_title_stuffing", "seo_title_keyword_repeats", ("max_title_keyword_repeats",), "max",
                 "occurrences of the most repeated keyword of the first non-blank line"),
        RuleSpec("seo_line_stuffing", "seo_line_keyword_repeats", ("max_line_keyword_repeats",), "max",
                 "occurrences of the most repeated keyword of any one line"),
        RuleSpec("seo_city_service", "seo_city_service_count", ("max_city_services",), "max",
                 "distinct city names followed by one same service word (北京办证 上海办证 …)"),
        RuleSpec("seo_pinyin_injection", "seo_pinyin_injections", ("max_pinyin_injections",), "max",
                 "Han characters followed by a parenthesised pinyin syllable, 烟(yan)台(tai)"),
        RuleSpec("seo_list_lines", "seo_list_line_frac", ("max_list_line_frac", "min_lines"), "max",
                 "share of characters in name/link list lines (navigation and link-farm blocks)"),
    ]

    def __init__(self, max_top1_word_frac: float | None = 0.20, max_top5_word_frac: float | None = 0.50,
                 min_words: int = 100, max_url_per_word: float | None = 0.10,
                 max_url_char_frac: float | None = 0.50, min_urls: int = 5,
                 max_email_per_word: float | None = 0.08, max_template_line_frac: float | None = 0.60,
                 min_lines: int = 10, min_line_repeats: int = 3, max_zh_spam_per_1k_han: float | None = 5.0,
                 min_zh_spam_hits: int = 3, max_zh_strong_hits: int | None = 0,
                 max_title_zh_strong_hits: int | None = 0, max_title_keyword_repeats: int | None = 3,
                 max_line_keyword_repeats: int | None = 8, keyword_item_chars: int = 12, title_chars: int = 64,
                 max_city_services: int | None = 9, max_pinyin_injections: int | None = 4,
                 max_list_line_frac: float | None = 0.80, list_min_run: int = 5, list_min_items: int = 6,
                 list_item_chars: float = 8.0, stopwords: Sequence[str] | None = None,
                 zh_spam_lists: Sequence[str] | None = None, zh_spam_exclude: Sequence[str] | None = None,
                 zh_strong_lists: Sequence[str] | None = None, zh_city_lists: Sequence[str] | None = None,
                 by_lang: dict | None = None, name: str | None = None):
        super().__init__(name)
        if min_line_repeats < 2:
            raise ValueError("seo_spam.min_line_repeats must be >= 2")
        for key, v in (("min_words", min_words), ("min_urls", min_urls), ("min_lines", min_lines),
                       ("min_zh_spam_hits", min_zh_spam_hits), ("keyword_item_chars", keyword_item_chars), ("title_chars", title_chars),
                       ("list_min_run", list_min_run), ("list_min_items", list_min_items),
                       ("list_item_chars", list_item_chars)):
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
        self.max_zh_strong_hits = max_zh_strong_hits
        self.max_title_zh_strong_hits = max_title_zh_strong_hits
        self.max_title_keyword_repeats = max_title_keyword_repeats
        self.max_line_keyword_repeats = max_line_keyword_repeats
        self.keyword_item_chars = keyword_item_chars
        self.title_chars = title_chars
        self.max_city_services = max_city_services
        self.max_pinyin_injections = max_pinyin_injections
        self.max_list_line_frac = max_list_line_frac
        self.list_min_run = list_min_run
        self.list_min_items = list_min_items
        self.list_item_chars = list_item_chars
        self.stopwords = list(DEFAULT_STOPWORDS if stopwords is None else stopwords)
        self.zh_spam_lists = list(DEFAULT_ZH_SPAM if zh_spam_lists is None else zh_spam_lists)
        self.zh_spam_exclude = list(DEFAULT_ZH_SPAM_EXCLUDE if zh_spam_exclude is None else zh_spam_exclude)
        stop = {w.lower() for w in load_terms(self.stopwords)}
        self._stopwords = pa.array(sorted(stop), pa.string())
        self._zh_spam_pattern = terms_pattern(load_terms(self.zh_spam_lists, self.zh_spam_exclude))
        self.zh_strong_lists = list(DEFAULT_ZH_STRONG if zh_strong_lists is None else zh_strong_lists)
        self.zh_city_lists = list(DEFAULT_ZH_CITIES if zh_city_lists is None else zh_city_lists)
        self._zh_strong_pattern = terms_pattern(load_terms(self.zh_strong_lists, self.zh_spam_exclude))
        cities = sorted(set(load_terms(self.zh_city_lists)), key=lambda c: (-len(c), c))
        self._city_pattern = "(?:" + "|".join(cities) + ")" if cities else None
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
        lines, parent = _flat_parent(lines_batch(texts))
        n_lines, n_template = template_lines(lines, parent, n, self.min_line_repeats)
        # first non-blank line of each row (its title in a CC extraction)
        nonblank = np.flatnonzero(pc.match_substring_regex(lines, r"\S").to_numpy(zero_copy_only=False))
        first_rows, pos = np.unique(parent[nonblank], return_index=True)
        first = pa.array([""] * n, pa.string())
        if len(first_rows):
            first_lines = lines.take(pa.array(nonblank[pos]))
            first = pc.replace_with_mask(first, pa.array(np.isin(np.arange(n), first_rows)), first_lines)
        # Cut into keyword items only the lines that can matter: at least 3 separators, and the first line
        # or a line without sentence punctuation whose pieces are short (a cheap bound on the average item).
        n_sep = kernels.count_runs(lines, _ITEM_SEP_OR_SPACE_CLASS) if kernels.enabled() else None
        if n_sep is None:  # (no kernels, or invalid UTF-8)
            n_sep = pc.count_substring_regex(lines, _ITEM_SEP_OR_SPACE).to_numpy().astype(np.int64)
        line_len = pc.utf8_length(lines).to_numpy().astype(np.int64)
        is_first = np.zeros(len(lines), bool)
        is_first[nonblank[pos]] = True
        cand = n_sep >= 3
        cand &= is_first | (line_len <= (self.list_item_chars + 2) * (n_sep + 1))
        cand_idx = np.flatnonzero(cand)
        cand_items, cand_rep = line_keywords(lines.take(pa.array(cand_idx)), self.keyword_item_chars)
        line_rep = np.zeros(len(lines), np.int64)
        n_items = np.zeros(len(lines), np.int64)
        line_rep[cand_idx] = cand_rep
        n_items[cand_idx] = cand_items
        line_chars, list_chars, keyword_line = list_line_chars(
            lines, parent, n_items, n, self.list_min_run, self.list_min_items, self.list_item_chars)
        line_keyword = np.zeros(n, np.int64)
        if len(lines):
            np.maximum.at(line_keyword, parent, np.where(keyword_line, line_rep, 0))
        title_keyword = np.zeros(n, np.int64)
        if len(first_rows):
            first_idx = nonblank[pos]
            # a title is short and followed by a body: a one-line review is not a title
            title_like = (pc.utf8_length(first_lines).to_numpy() <= self.title_chars) & (n_lines[first_rows] >= 2)
            title_keyword[first_rows] = np.where(title_like, line_rep[first_idx], 0)
        if self._zh_spam_pattern is not None:
            zh_hits = pc.count_substring_regex(texts, self._zh_spam_pattern).to_numpy().astype(np.int64)
        else:
            zh_hits = np.zeros(n, np.int64)
        n_han = kernels.class_counts(texts, (HAN_CHAR,)) if kernels.enabled() else None
        if n_han is not None:
            n_han = n_han[:, 0]
        else:
            n_han = pc.count_substring_regex(texts, HAN_CHAR).to_numpy().astype(np.int64)
        strong = np.zeros(n, np.int64)
        title_strong = np.zeros(n, np.int64)
        if self._zh_strong_pattern is not None:
            strong = pc.count_substring_regex(texts, self._zh_strong_pattern).to_numpy().astype(np.int64)
            title_strong = pc.count_substring_regex(first, self._zh_strong_pattern).to_numpy().astype(np.int64)
        city_service = np.zeros(n, np.int64)
        if self._city_pattern is not None and self.max_city_services is not None:
            city_service = city_service_counts(texts, self._city_pattern, self.max_city_services + 1)
        pinyin = pc.count_substring_regex(texts, PINYIN_INJECTION).to_numpy().astype(np.int64)
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
            "seo_zh_strong_hits": pa.array(strong, pa.int64()),
            "seo_title_zh_strong_hits": pa.array(title_strong, pa.int64()),
            "seo_title_keyword_repeats": pa.array(title_keyword, pa.int64()),
            "seo_line_keyword_repeats": pa.array(line_keyword, pa.int64()),
            "seo_city_service_count": pa.array(city_service, pa.int64()),
            "seo_pinyin_injections": pa.array(pinyin, pa.int64()),
            "seo_list_line_frac": pa.array(_ratio(list_chars, line_chars)),
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
        rules.append(("seo_list_lines", "list_blocks", "seo_list_line_frac", "max_list_line_frac",
                      "seo_line_count", "min_lines"))
        checks = [Check(rule, reason, above(signal, limit, count, minimum), value=sig[signal],
                        threshold=p(limit))
                  for rule, reason, signal, limit, count, minimum in rules]
        # count rules: removed when the count is above its maximum
        counts = [
            ("seo_title_zh_strong_term", "title_spam_term", "seo_title_zh_strong_hits", "max_title_zh_strong_hits"),
            ("seo_zh_strong_terms", "zh_strong_terms", "seo_zh_strong_hits", "max_zh_strong_hits"),
            ("seo_title_stuffing", "title_stuffing", "seo_title_keyword_repeats", "max_title_keyword_repeats"),
            ("seo_city_service", "city_service_list", "seo_city_service_count", "max_city_services"),
            ("seo_pinyin_injection", "pinyin_injection", "seo_pinyin_injections", "max_pinyin_injections"),
            ("seo_line_stuffing", "line_stuffing", "seo_line_keyword_repeats", "max_line_keyword_repeats"),
        ]
        checks[-1:-1] = [Check(rule, reason, pc.greater(sig[signal], p(limit)), value=sig[signal],
                               threshold=p(limit)) for rule, reason, signal, limit in counts]
        return StageResult(out, Decisions.from_checks(n, checks))
