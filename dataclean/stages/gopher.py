"""The Gopher rule families: MassiveText quality filters and repetition filters.

Source: Rae et al. 2021, "Scaling Language Models: Methods, Analysis & Insights from Training Gopher"
(arXiv:2112.11446), appendix A.1.1 ("quality filters") and table A1 ("repetition removal"). Every default
threshold below is the published value. The paper filtered English web text only; each class docstring says
which rules assume English and what Chinese (and Japanese) documents get instead through ``by_lang``.

Words are the shared tokenizer's (:func:`dataclean.text.words_batch`): runs of letters, digits and marks,
one word per Han character, one per kana run; punctuation is never a word. So a Chinese "word" is a
character, and a Chinese word n-gram is a character n-gram.

Both stages are vectorised over the whole batch. The repetition stage dictionary-encodes the flattened
words of the batch, hashes n-grams with numpy and groups them by sorting; see :func:`ngram_signals`.
"""
from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.stages.base import Check, Decisions, RuleSpec, Stage, StageResult, batch_text, with_columns
from dataclean.text import WORDS_COLUMN, batch_words, kernels, lines_batch

#: Gopher's required English words (appendix A.1.1).
ENGLISH_STOP_WORDS = ["the", "be", "to", "of", "and", "that", "have", "with"]
#: Chinese counterpart of the rule (our choice, see :class:`GopherQuality`): the most frequent function
#: characters of Modern Chinese, each a single Han character so that it is one word of the tokenizer
#: (這 is the traditional form of 这; the others are written alike in both scripts), then the English
#: words, because Chinese pages often carry English passages (untranslated manual pages, quotes).
CHINESE_STOP_WORDS = ["的", "了", "是", "在", "和", "有", "我", "这", "這", "就", "不", "也", "都"] + ENGLISH_STOP_WORDS
#: Japanese counterpart: particles that the tokenizer yields as whole kana runs when they stand between
#: Han characters (の, に, は, を, が ...), then the English words.
JAPANESE_STOP_WORDS = ["の", "に", "は", "を", "が", "と", "で", "た", "も", "です", "ます", "して", "した"] + \
    ENGLISH_STOP_WORDS

# Matched against single lines (Arrow's count_substring_regex restarts at each match as if at the start
# of the text, so a ^ anchor cannot be counted over a whole document).
# A line starts with a bullet: a bullet sign, or a Markdown list marker (- * +) followed by a space.
BULLET_SIGNS = "•‣⁃◦∙●○◉■□▪▫◆◇►▶▸➢➤★☆✓✔·※"
BULLET_LINE = rf"^[ \t\x{{3000}}]*(?:[{BULLET_SIGNS}]|[-*+](?:[ \t]|$))"
# A line ends with an ellipsis (three dots or the ellipsis character), trailing spaces allowed.
ELLIPSIS_LINE = r"(?:\.\.\.|…)[ \t\x{3000}]*$"
# One ellipsis: a run of 3+ dots or of ellipsis characters ("......", Chinese "……" count once).
ELLIPSIS = r"\.{3,}|…+"


def _threshold(stage: Stage, batch: pa.RecordBatch, name: str) -> pa.Array:
    """``stage.per_row(batch, name)`` where a value of None (default or per language) disables the check
    for those rows: the threshold is then null, and a null comparison never removes a row."""
    by_lang = {code: {name: (math.nan if ov[name] is None else ov[name])}
               for code, ov in stage.by_lang.items() if name in ov}
    thr = stage.per_row(batch, name, by_lang)
    return pc.if_else(pc.is_nan(thr), pa.scalar(None, pa.float64()), thr)


def _checks(stage: Stage, batch: pa.RecordBatch, table: list[tuple], off: dict | None = None) -> Decisions | None:
    """Build the checks of ``table`` (rule, reason, param, 'min'|'max', signal) in order and decide;
    ``off[param]`` is a boolean mask of rows the check does not apply to."""
    checks = []
    for rule, reason, param, compare, signal in table:
        thr = _threshold(stage, batch, param)
        if off and param in off:
            thr = pc.if_else(pa.array(off[param]), pa.scalar(None, pa.float64()), thr)
        if thr.null_count == len(thr):
            continue  # disabled for every row
        value = pc.cast(signal, pa.float64())
        failed = pc.less(value, thr) if compare == "min" else pc.greater(value, thr)
        checks.append(Check(rule, reason, failed, value=value, threshold=thr))
    return Decisions.from_checks(batch.num_rows, checks)


def _safe_div(num: np.ndarray, den: np.ndarray) -> np.ndarray:
    """num / den, 0 where den is 0."""
    num = np.asarray(num, np.float64)
    den = np.asarray(den, np.float64)
    out = np.zeros(len(num), np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


def _count(texts: pa.Array, pattern: str) -> np.ndarray:
    return pc.count_substring_regex(texts, pattern).to_numpy(zero_copy_only=False).astype(np.int64)


class _Words:
    """The flattened words of a batch, dictionary-encoded once and shared by every signal.

    Everything is computed when first asked for. With the compiled kernels and no dictionary asked for (the
    repetition stage needs the codes, the quality stage does not), characters, letters and stop words are read
    from the words' bytes directly, with the same results."""

    def __init__(self, lists: pa.ListArray):
        self.lists = lists
        self.n_docs = len(lists)
        offsets = lists.offsets.to_numpy()
        self.offsets = (offsets - offsets[0]).astype(np.int64)
        self.count = np.diff(self.offsets)
        self.flat = lists.flatten()
        self.parent = np.repeat(np.arange(self.n_docs, dtype=np.int64), self.count)
        self._enc = None
        self._length = None
        self._props = None  # (characters, has a letter, is ASCII) per word, from the kernels

    @property
    def dictionary(self) -> pa.Array:
        if self._enc is None:
            self._enc = pc.dictionary_encode(self.flat)
        return self._enc.dictionary

    @property
    def codes(self) -> np.ndarray:
        if self._enc is None:
            self._enc = pc.dictionary_encode(self.flat)
        return self._enc.indices.to_numpy(zero_copy_only=False)

    def _kernel_props(self) -> tuple | None:
        """The kernels' per-word properties, unless the dictionary is there already (then it is cheaper)."""
        if self._props is None and self._enc is None and kernels.enabled():
            self._props = kernels.word_props(self.flat)
        return self._props

    @property
    def length(self) -> np.ndarray:
        """Characters per word."""
        if self._length is None:
            props = self._kernel_props()
            if props is not None:
                self._length = props[0]
            else:  # looked up in the (much smaller) dictionary
                self._length = pc.utf8_length(self.dictionary).to_numpy(zero_copy_only=False).astype(np.int64)[
                    self.codes]
        return self._length

    def alpha(self) -> np.ndarray:
        """Per word: does it hold a letter (RE2 ``\\pL``)?"""
        props = self._kernel_props()
        if props is not None:
            return props[1]
        return pc.match_substring_regex(self.dictionary, r"\pL").to_numpy(zero_copy_only=False)[self.codes]

    def per_doc(self, weights: np.ndarray) -> np.ndarray:
        """Sum of per-word ``weights`` for each document."""
        if len(self.parent) == 0:
            return np.zeros(self.n_docs, np.float64)
        if weights.dtype.kind in "biu":  # integers: running sums are exact, and cheaper than bincount
            cum = np.zeros(len(weights) + 1, np.int64)
            np.cumsum(weights, out=cum[1:])
            return (cum[self.offsets[1:]] - cum[self.offsets[:-1]]).astype(np.float64)
        return np.bincount(self.parent, weights=weights, minlength=self.n_docs)

    def in_set(self, words: list[str], lower: bool = True) -> np.ndarray:
        """Per word: is it one of ``words`` (case-insensitively when ``lower``)?"""
        props = self._kernel_props() if lower else None
        if props is not None:
            # ASCII words compared in the kernel (Arrow's utf8_lower of ASCII is ASCII's lower case); the
            # others through Arrow as below
            hit, ascii_ = kernels.ascii_lower_in(self.flat, words), props[2]
            other = np.flatnonzero(~ascii_)
            if len(other):
                d = pc.utf8_lower(self.flat.take(pa.array(other)))
                hit[other] = pc.is_in(d, value_set=pa.array(words, pa.string())).to_numpy(zero_copy_only=False)
            return hit
        d = pc.utf8_lower(self.dictionary) if lower else self.dictionary
        hit = pc.is_in(d, value_set=pa.array(words, pa.string())).to_numpy(zero_copy_only=False)
        return hit[self.codes]


class GopherQuality(Stage):
    """Gopher quality filters (Rae et al. 2021, appendix A.1.1), published thresholds as defaults.

    Signals (every row), in the order the checks are applied:

    * ``gopher_word_count``: words (tokenizer words). Removed outside [``min_words``, ``max_words``] =
      [50, 100000] (rules ``gopher_short_doc``, ``gopher_long_doc``).
    * ``gopher_mean_word_length``: mean characters per word (0 without words). Removed outside
      [``min_mean_word_length``, ``max_mean_word_length``] = [3, 10] (``gopher_below_avg_word_length``,
      ``gopher_above_avg_word_length``).
    * ``gopher_hash_ratio``, ``gopher_ellipsis_ratio``: ``#`` characters, and ellipses, per word (``/ max(words,
      1)``, so >= 0). Removed above ``max_hash_ratio`` / ``max_ellipsis_ratio`` = 0.1, the paper's
      "symbol-to-word ratio greater than 0.1 for either the hash symbol or the ellipsis". An ellipsis is a
      run of three or more dots or of ``…`` characters, counted once: the Chinese ellipsis ``……`` is one
      symbol, not two.
    * ``gopher_bullet_line_frac``: of the non-blank lines, the fraction starting with a bullet (a bullet
      sign such as • ● ■ ◆ ★ · ※, or a Markdown list marker ``- * +`` followed by a space). Removed above
      ``max_bullet_line_frac`` = 0.9.
    * ``gopher_ellipsis_line_frac``: of the non-blank lines, the fraction ending with ``...`` or ``…``.
      Removed above ``max_ellipsis_line_frac`` = 0.3.
    * Both line rules apply to documents with at least ``line_rules_min_lines`` non-blank lines (default 1:
      every document, as published). They describe pages made of lines (lists of teasers, bullet
      lists); on a one-line document the fraction is 0 or 1, so the rule degenerates into "starts with a
      bullet" or "ends with an ellipsis". On bench shards 0-1 every document these two rules removed was
      a single line: 222 Chinese reviews and Weibo posts ending with the stylistic ……, a Wikipedia
      paragraph opening with ■, a review opening with ★★★★★☆. The recipe sets 2.
    * ``gopher_alpha_word_frac``: fraction of words with at least one letter (Unicode category L, so a
      Han character counts; 0 without words). Removed below ``min_alpha_word_frac`` = 0.8. Our words
      contain no punctuation tokens, so in practice this rule removes number-heavy documents (tables,
      lists of figures), a little more leniently than a whitespace split would.
    * ``gopher_stop_word_count``: occurrences of ``stop_words`` (case-insensitive), the paper's "the, be,
      to, of, and, that, have, with". Removed below ``min_stop_words`` = 2.

    Where the published rules assume English, and what ``by_lang`` gives instead (see the
    ``rules/default.yaml`` entry):

    * Mean word length: a Chinese word of our tokenizer is one Han character, so Chinese prose has a mean
      word length of about 1.0-1.3 and the [3, 10] bound would remove all of it. For ``zh`` and ``ja``
      (kana runs average 2-3 characters) the lower bound is disabled (``min_mean_word_length: null``);
      the upper bound 10 stays (it still catches documents made of long hashes or base64 strings).
    * Stop words: the English list says nothing about other languages. ``zh`` uses
      :data:`CHINESE_STOP_WORDS`: 的 了 是 在 和 有 我 这 (這) 就 不 也 都, the most frequent single-character
      function words of Modern Chinese (structural particle 的, aspect particle 了, copula 是, preposition
      在, conjunction 和, 有, 我, demonstrative 这, adverbs 就 不 也 都), all in the stopwords-iso ``zh`` list.
      Each is one Han character, so one tokenizer word, and two of them appear in almost any pair of
      Chinese sentences, which is the spirit of the English rule (running text, not a list of keywords).
      The English eight are added because Chinese pages often carry English passages: without them the
      rule removed 206 zh LibreOffice help pages with untranslated English paragraphs on bench shards
      0-1, with them 51 (one-sentence stub pages). It removes 0.4% of the zh documents there, mostly
      hashtag-only Weibo posts, keyword-stuffed product listings and stubs, also a few one-sentence
      posts in formal style. ``ja`` uses :data:`JAPANESE_STOP_WORDS`.
      ``stop_words_langs`` (default None: every row, as in the paper) limits the default list to the
      given languages; rows of other languages, and rows without a language, are then not checked unless
      ``by_lang`` gives their language its own ``stop_words``. The recipe sets ``[en]``: an English list
      says nothing about a German or Russian page.
    * Word count: 50 Chinese characters say less than 50 English words, but ``zh`` keeps 50: the rule
      already removes 70% of the zh documents of bench shards 0-1 (reviews and Weibo posts, medians of
      21-29 characters; 98% of the short English nlp-corpus documents go the same way), and raising it
      would only remove more short clean text.

    ``by_lang`` maps a language code to overrides of any parameter above, ``stop_words`` included; a
    threshold of None disables its check (for every row, or for one language).
    """

    kind = "gopher_quality"
    signal_fields = [
        pa.field("gopher_word_count", pa.int64()),
        pa.field("gopher_mean_word_length", pa.float64()),
        pa.field("gopher_hash_ratio", pa.float64()),
        pa.field("gopher_ellipsis_ratio", pa.float64()),
        pa.field("gopher_bullet_line_frac", pa.float64()),
        pa.field("gopher_ellipsis_line_frac", pa.float64()),
        pa.field("gopher_alpha_word_frac", pa.float64()),
        pa.field("gopher_stop_word_count", pa.int64()),
    ]
    # (rule, reason, parameter, compare, signal column, what it means)
    _CHECKS = [
        ("gopher_short_doc", "gopher_word_count", "min_words", "min", "gopher_word_count",
         "fewer words than min_words"),
        ("gopher_long_doc", "gopher_word_count", "max_words", "max", "gopher_word_count",
         "more words than max_words"),
        ("gopher_below_avg_word_length", "gopher_word_length", "min_mean_word_length", "min",
         "gopher_mean_word_length", "mean word length below the bound (disabled for zh, ja)"),
        ("gopher_above_avg_word_length", "gopher_word_length", "max_mean_word_length", "max",
         "gopher_mean_word_length", "mean word length above the bound"),
        ("gopher_too_many_hashes", "gopher_symbol_ratio", "max_hash_ratio", "max", "gopher_hash_ratio",
         "'#' per word"),
        ("gopher_too_many_ellipses", "gopher_symbol_ratio", "max_ellipsis_ratio", "max", "gopher_ellipsis_ratio",
         "ellipses per word"),
        ("gopher_too_many_bullets", "gopher_line_format", "max_bullet_line_frac", "max", "gopher_bullet_line_frac",
         "share of lines starting with a bullet"),
        ("gopher_too_many_end_ellipsis", "gopher_line_format", "max_ellipsis_line_frac", "max",
         "gopher_ellipsis_line_frac", "share of lines ending with an ellipsis"),
        ("gopher_below_alpha_threshold", "gopher_non_alpha", "min_alpha_word_frac", "min", "gopher_alpha_word_frac",
         "share of words with a letter"),
        ("gopher_few_stop_words", "gopher_stop_words", "min_stop_words", "min", "gopher_stop_word_count",
         "occurrences of the language's stop words (the, be, to, of, and, that, have, with)"),
    ]
    rule_specs = [RuleSpec(rule, signal, (param,), compare, doc) for rule, _, param, compare, signal, doc in _CHECKS]

    def __init__(self, min_words: int | None = 50, max_words: int | None = 100_000,
                 min_mean_word_length: float | None = 3.0, max_mean_word_length: float | None = 10.0,
                 max_hash_ratio: float | None = 0.1, max_ellipsis_ratio: float | None = 0.1,
                 max_bullet_line_frac: float | None = 0.9, max_ellipsis_line_frac: float | None = 0.3,
                 line_rules_min_lines: int | None = 1,
                 min_alpha_word_frac: float | None = 0.8, min_stop_words: int | None = 2,
                 stop_words: list[str] | None = None, stop_words_langs: list[str] | None = None,
                 by_lang: dict | None = None, name: str | None = None):
        super().__init__(name)
        self.min_words, self.max_words = min_words, max_words
        self.min_mean_word_length, self.max_mean_word_length = min_mean_word_length, max_mean_word_length
        self.max_hash_ratio, self.max_ellipsis_ratio = max_hash_ratio, max_ellipsis_ratio
        self.max_bullet_line_frac, self.max_ellipsis_line_frac = max_bullet_line_frac, max_ellipsis_line_frac
        self.line_rules_min_lines = line_rules_min_lines
        self.min_alpha_word_frac, self.min_stop_words = min_alpha_word_frac, min_stop_words
        self.stop_words = list(ENGLISH_STOP_WORDS if stop_words is None else stop_words)
        self.stop_words_langs = None if stop_words_langs is None else list(stop_words_langs)
        self.set_by_lang(by_lang)

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        texts = batch_text(batch)
        words = _Words(batch_words(batch))
        n_words = words.count
        chars = words.per_doc(words.length)
        alpha = words.alpha()
        if kernels.enabled():  # the same counts in one pass over the text's bytes
            stats = np.ascontiguousarray(kernels.gopher_lines(texts, BULLET_SIGNS).T, dtype=np.float64)  # (5, n)
            n_lines, bullets, ell_ends, hashes, ellipses = stats
        else:
            lines = lines_batch(texts)
            flat = lines.flatten()
            lparent = np.repeat(np.arange(len(texts), dtype=np.int64), np.diff(lines.offsets.to_numpy()))
            nonblank = pc.utf8_length(pc.utf8_trim_whitespace(flat)).to_numpy(zero_copy_only=False) > 0
            bullet = pc.match_substring_regex(flat, BULLET_LINE).to_numpy(zero_copy_only=False)
            ell_end = pc.match_substring_regex(flat, ELLIPSIS_LINE).to_numpy(zero_copy_only=False)
            n_lines = np.bincount(lparent, weights=nonblank, minlength=len(texts))
            bullets = np.bincount(lparent, weights=bullet, minlength=len(texts))
            ell_ends = np.bincount(lparent, weights=ell_end, minlength=len(texts))
            hashes = pc.count_substring(texts, "#").to_numpy(zero_copy_only=False)
            ellipses = _count(texts, ELLIPSIS)
        signals = {
            "gopher_word_count": pa.array(n_words, pa.int64()),
            "gopher_mean_word_length": pa.array(_safe_div(chars, n_words)),
            "gopher_hash_ratio": pa.array(_safe_div(hashes, np.maximum(n_words, 1))),
            "gopher_ellipsis_ratio": pa.array(_safe_div(ellipses, np.maximum(n_words, 1))),
            "gopher_bullet_line_frac": pa.array(_safe_div(bullets, n_lines)),
            "gopher_ellipsis_line_frac": pa.array(_safe_div(ell_ends, n_lines)),
            "gopher_alpha_word_frac": pa.array(_safe_div(words.per_doc(alpha), n_words)),
        }
        count, unchecked = self._stop_word_count(batch, words)
        signals["gopher_stop_word_count"] = pa.array(count, pa.int64())
        out = with_columns(batch, {**signals, WORDS_COLUMN: words.lists})
        table = [(rule, reason, param, compare, signals[sig]) for rule, reason, param, compare, sig, _ in self._CHECKS]
        few_lines = pc.fill_null(pc.less(pa.array(n_lines), _threshold(self, batch, "line_rules_min_lines")), False)
        few_lines = few_lines.to_numpy(zero_copy_only=False)
        off = {"min_stop_words": unchecked, "max_bullet_line_frac": few_lines, "max_ellipsis_line_frac": few_lines}
        return StageResult(out, _checks(self, batch, table, off))

    def _stop_word_count(self, batch: pa.RecordBatch, words: _Words) -> tuple[np.ndarray, np.ndarray]:
        """Stop-word occurrences per document with the list of the row's language, and the rows that have
        no list (the default list is limited to ``stop_words_langs``)."""
        n = batch.num_rows
        count = words.per_doc(words.in_set(self.stop_words)).astype(np.int64)
        has_lang = "lang" in batch.schema.names
        lang = pc.cast(batch.column("lang"), pa.string()) if has_lang else None
        if self.stop_words_langs is None:
            unchecked = np.zeros(n, bool)
        elif has_lang:
            listed = pc.is_in(lang, value_set=pa.array(self.stop_words_langs, pa.string()))
            unchecked = ~pc.fill_null(listed, False).to_numpy(zero_copy_only=False)
        else:
            unchecked = np.ones(n, bool)
        if not has_lang:
            return count, unchecked
        for code, overrides in self.by_lang.items():
            if "stop_words" not in overrides:
                continue
            rows = pc.fill_null(pc.equal(lang, code), False).to_numpy(zero_copy_only=False)
            if rows.any():
                own = words.per_doc(words.in_set(list(overrides["stop_words"]))).astype(np.int64)
                count = np.where(rows, own, count)
                unchecked = unchecked & ~rows
        return count, unchecked


# -- repetition ---------------------------------------------------------------------------------------------

TOP_NGRAM_SIZES = (2, 3, 4)
#: Paragraphs are separated by a blank line (RE2: ``\s`` is ``[\t\n\f\r ]``).
PARAGRAPH_BREAK = r"\n[ \t\x{3000}]*\n\s*"
DUP_NGRAM_SIZES = (5, 6, 7, 8, 9, 10)
_SHIFT = np.uint64(32)
_S33 = np.uint64(33)
_M1 = np.uint64(0xFF51AFD7ED558CCD)  # MurmurHash3's 64-bit finalizer constants (odd: each step is a bijection)
_M2 = np.uint64(0xC4CEB9FE1A85EC53)


def _mix(h: np.ndarray) -> np.ndarray:
    """A bijection of uint64 that spreads every input bit over the output (MurmurHash3 fmix64), in place."""
    h ^= h >> _S33
    h *= _M1
    h ^= h >> _S33
    h *= _M2
    h ^= h >> _S33
    return h


def _dup_fracs(lists: pa.ListArray, n_docs: int) -> tuple[np.ndarray, np.ndarray]:
    """For list<string> per document (lines or paragraphs): fraction of the non-blank items that repeat an
    earlier item of the same document (compared after trimming whitespace), and the fraction of their
    characters among the characters of all non-blank items."""
    flat = pc.utf8_trim_whitespace(lists.flatten())
    offsets = lists.offsets.to_numpy()
    parent = np.repeat(np.arange(n_docs, dtype=np.int64), np.diff(offsets))
    length = pc.utf8_length(flat).to_numpy(zero_copy_only=False).astype(np.int64)
    keep = length > 0
    parent, length = parent[keep], length[keep]
    codes = pc.dictionary_encode(flat.filter(pa.array(keep))).indices.to_numpy(zero_copy_only=False)
    key = (parent << 32) | codes.astype(np.int64)
    dup = np.ones(len(key), bool)
    if len(key):
        _, first = np.unique(key, return_index=True)
        dup[first] = False
    items = np.bincount(parent, minlength=n_docs)
    chars = np.bincount(parent, weights=length, minlength=n_docs)
    dup_items = np.bincount(parent, weights=dup, minlength=n_docs)
    dup_chars = np.bincount(parent, weights=length * dup, minlength=n_docs)
    return _safe_div(dup_items, items), _safe_div(dup_chars, chars)


def _covered_chars(starts: np.ndarray, n: int, cum: np.ndarray, parent: np.ndarray, n_docs: int) -> np.ndarray:
    """Per document, characters of the words covered by at least one of the n-grams starting at the sorted
    positions ``starts``, overlapping n-grams counted once: each n-gram adds the characters of its words
    not already covered by the previous one (``cum`` is the running sum of word lengths). An n-gram never
    crosses a document boundary, so the previous n-gram of another document covers nothing here."""
    if len(starts) == 0:
        return np.zeros(n_docs)
    lo = starts.copy()
    np.maximum(lo[1:], starts[:-1] + n, out=lo[1:])
    return np.bincount(parent[starts], weights=cum[starts + n] - cum[lo], minlength=n_docs)


def ngram_signals(codes: np.ndarray, length: np.ndarray, offsets: np.ndarray, parent: np.ndarray | None = None,
                  top_sizes=TOP_NGRAM_SIZES, dup_sizes=DUP_NGRAM_SIZES) -> dict[int, np.ndarray]:
    """Gopher n-gram repetition signals for a whole batch, without a loop over documents.

    ``codes`` are the batch's flattened words as integers (equal words, equal codes), ``length`` their
    characters, ``offsets`` the document boundaries (n_docs + 1), ``parent`` the document of each word.
    Returns, for each n in ``top_sizes``, the fraction of a document's word characters covered by its most
    frequent n-gram, and for each n in ``dup_sizes`` the fraction covered by n-grams that occur at least
    twice in it.

    The most frequent n-gram is the one with the most occurrences, among n-grams occurring at least twice
    (an n-gram seen once is not repetition, so a document without repeats scores 0); ties go to the n-gram
    with more characters, then to the one that occurs first. Covered characters are those of words inside
    at least one occurrence, so overlapping occurrences ("a a a a" for the 2-gram "a a") count once and
    every fraction is in [0, 1].

    How: an n-gram key is a 64-bit hash that folds the codes into the document number,
    ``h1 = fmix(doc << 32 ^ (code + 1))``, ``hn = fmix(h(n-1) ^ (code + 1))`` with MurmurHash3's fmix64 (a
    bijection, so for a fixed word the step is one too: equal n-grams of different documents never
    collide, and distinct n-grams of one document collide with probability about 2^-64). Equal keys are
    grouped by one sort per n. An n-gram can only occur twice where its two (n-1)-grams both occur twice,
    so level n hashes and sorts only those candidate positions, which shrink quickly with n.
    """
    if kernels.enabled():
        out = kernels.ngram_signals(codes, length, offsets, top_sizes, dup_sizes)
        if out is not None:
            return out
    n_docs = len(offsets) - 1
    total = len(codes)
    if parent is None:
        parent = np.repeat(np.arange(n_docs, dtype=np.int64), np.diff(offsets))
    left = offsets[1:][parent] - np.arange(total)  # words from each position to its document's end
    chars = np.bincount(parent, weights=length, minlength=n_docs)
    cum = np.zeros(total + 1, np.int64)
    np.cumsum(length, out=cum[1:])
    c1 = codes.astype(np.uint64) + np.uint64(1)
    key1 = _mix((parent.astype(np.uint64) << _SHIFT) ^ c1)  # 1-gram keys
    wanted = set(top_sizes) | set(dup_sizes)
    out = {k: np.zeros(n_docs) for k in wanted}
    idx = key = None  # positions of the repeated (n-1)-grams and their keys (None for n = 2: every word)
    for n in range(2, max(wanted, default=1) + 1):
        if idx is None:
            cand = np.flatnonzero(left >= n)
            prev = key1[cand]
        else:
            sel = np.flatnonzero(idx[1:] == idx[:-1] + 1)
            sel = sel[left[idx[sel]] >= n]
            cand, prev = idx[sel], key[sel]
        if len(cand) < 2:
            break  # no n-gram repeats, so no longer one does either: the remaining signals are 0
        k = _mix(prev ^ c1[cand + n - 1])
        order = np.argsort(k)
        s = k[order]
        eq = s[1:] == s[:-1]
        rep_sorted = np.zeros(len(s), bool)
        rep_sorted[1:] = eq
        rep_sorted[:-1] |= eq
        repeated = np.empty(len(cand), bool)
        repeated[order] = rep_sorted
        idx, key = cand[repeated], k[repeated]
        if n in top_sizes:
            starts = _top_starts(cand[order], eq, parent, cum, n)
        else:
            starts = idx
        if n in wanted:
            out[n] = _safe_div(_covered_chars(starts, n, cum, parent, n_docs), chars)
    return out


def _top_starts(pos_sorted: np.ndarray, eq: np.ndarray, parent: np.ndarray, cum: np.ndarray, n: int) -> np.ndarray:
    """Sorted start positions of each document's most frequent repeated n-gram, given the candidate
    positions sorted by key (``pos_sorted``) and ``eq`` (key equal to the previous one)."""
    new = np.ones(len(pos_sorted), bool)
    new[1:] = ~eq
    group_start = np.flatnonzero(new)
    group_size = np.diff(np.append(group_start, len(pos_sorted)))
    rep = np.flatnonzero(group_size >= 2)
    if len(rep) == 0:
        return np.zeros(0, np.int64)
    g_first = np.minimum.reduceat(pos_sorted, group_start)[rep]
    by_first = np.argsort(g_first)  # documents are runs of positions, so this also orders by document
    g_first = g_first[by_first]
    g_doc = parent[g_first]
    g_size = group_size[rep][by_first]
    g_chars = cum[g_first + n] - cum[g_first]  # < 2^31: a batch's text fits in Arrow's int32 offsets
    # per document: most occurrences, then most characters, then earliest
    score = (g_size << 32) | g_chars
    doc_start = np.flatnonzero(np.r_[True, g_doc[1:] != g_doc[:-1]])
    doc_best = np.maximum.reduceat(score, doc_start)
    doc_of = np.cumsum(np.r_[False, g_doc[1:] != g_doc[:-1]])
    hit = np.flatnonzero(score == doc_best[doc_of])
    first_hit = hit[np.r_[True, g_doc[hit[1:]] != g_doc[hit[:-1]]]]
    is_top = np.zeros(len(group_size), bool)
    is_top[rep[by_first[first_hit]]] = True
    return np.sort(pos_sorted[np.repeat(is_top, group_size)])


class GopherRepetition(Stage):
    """Gopher repetition filters (Rae et al. 2021, appendix A.1.1 and table A1), published thresholds as
    defaults. Every signal is a fraction in [0, 1] (0 for a document without lines or words).

    Lines are ``\\n``-separated, paragraphs are separated by blank lines; both are compared after trimming
    whitespace, blank ones are ignored. A duplicate is an item equal to an earlier item of the document
    (the first occurrence is not a duplicate). Characters are counted over non-blank items.

    * ``gopher_dup_line_frac`` <= ``max_dup_line_frac`` = 0.30; ``gopher_dup_line_char_frac`` <=
      ``max_dup_line_char_frac`` = 0.20 (rules ``gopher_dup_line_frac``, ``gopher_dup_line_char_frac``).
    * ``gopher_dup_para_frac`` <= ``max_dup_para_frac`` = 0.30; ``gopher_dup_para_char_frac`` <=
      ``max_dup_para_char_frac`` = 0.20.
    * ``gopher_top_{n}gram_char_frac`` for n = 2, 3, 4: fraction of the document's word characters inside
      its most frequent n-gram; <= ``max_top_{n}gram_char_frac`` = 0.20, 0.18, 0.16.
    * ``gopher_dup_{n}gram_char_frac`` for n = 5..10: fraction of word characters inside n-grams occurring
      at least twice, overlapping occurrences counted once (as the paper asks); <=
      ``max_dup_{n}gram_char_frac`` = 0.15, 0.14, 0.13, 0.12, 0.11, 0.10.

    Character fractions of n-grams are over word characters (the sum of the tokenizer words' lengths), so
    spaces and punctuation count for no language; see :func:`ngram_signals` for the exact definitions.

    Where the published rule assumes English: the n-gram thresholds were set for English words (about 5
    characters each). A Chinese word of the tokenizer is one Han character, so Chinese n-grams are
    character n-grams, and a Chinese word is 1-4 characters: a 4-gram is often one word (有限公司, 无线网卡,
    医护人员), and a 5-7-gram is a name (海淀黄庄站, 香港电台第六台) that an encyclopedia article repeats in
    every paragraph. With the English thresholds, 25% of the zh Wikipedia paragraphs (cmrc2018), 49% of
    the zh manual pages and 40% of the zh LibreOffice help pages on bench shards 0-1 were removed as
    "duplicate 5-grams", all of them clean text. The ``zh`` (and ``ja``) overrides of the recipe, measured
    on those shards (documents of 50+ words that pass :class:`GopherQuality`):

    * top 2-, 3-, 4-gram: 0.25 each (a 2-4 character n-gram is one word, so all three play the part of
      the English top 2-gram, 0.20, plus some room for short documents where one repeated 4-character word
      is 20% of the text). Removes none of the cmrc2018, c3 and Debian documents (English values: 0.4-0.7%)
      and 0.1-0.8% of the reviews, Weibo posts and help pages (English values: 0.4-3.8%): 啊啊啊...,
      急不急急不急..., 不错不错不错....
    * duplicate 5..10-grams: 0.50, 0.45, 0.40, 0.35, 0.30, 0.25 (a 10-character n-gram is about a 6-word
      English phrase). Removes 1.9% of cmrc2018 (articles that repeat whole clauses), 0.5% of c3, 0.9% of
      the zh manual pages; in reviews and posts it removes copy-pasted text (好评，一直在京东自营买东西…
      three times), retweet chains, and a few short posts built on parallel sentences.

    The line and paragraph rules do not depend on the language.

    Documentation: reference manuals repeat their phrasing by design ("Return true if *ob* is ...",
    ":exc:`OSError`", "要访问此命令..."), so the n-gram rules remove 66% of the Python docs, 37% of perl
    docs and 29% of the LibreOffice help in European languages that pass the quality rules, at any
    threshold that still catches repetitive web pages. The recipe therefore skips ``docs`` (and
    ``code``) for this stage; the quality rules still apply to them.
    """

    kind = "gopher_repetition"
    signal_fields = (
        [pa.field("gopher_dup_line_frac", pa.float64()), pa.field("gopher_dup_line_char_frac", pa.float64()),
         pa.field("gopher_dup_para_frac", pa.float64()), pa.field("gopher_dup_para_char_frac", pa.float64())]
        + [pa.field(f"gopher_top_{n}gram_char_frac", pa.float64()) for n in TOP_NGRAM_SIZES]
        + [pa.field(f"gopher_dup_{n}gram_char_frac", pa.float64()) for n in DUP_NGRAM_SIZES]
    )
    _CHECKS = (
        [("gopher_dup_line_frac", "gopher_dup_lines", "max_dup_line_frac", "max", "gopher_dup_line_frac",
          "share of lines repeating an earlier line"),
         ("gopher_dup_line_char_frac", "gopher_dup_lines", "max_dup_line_char_frac", "max",
          "gopher_dup_line_char_frac", "share of characters in lines repeating an earlier line"),
         ("gopher_dup_para_frac", "gopher_dup_paragraphs", "max_dup_para_frac", "max", "gopher_dup_para_frac",
          "share of paragraphs repeating an earlier paragraph"),
         ("gopher_dup_para_char_frac", "gopher_dup_paragraphs", "max_dup_para_char_frac", "max",
          "gopher_dup_para_char_frac", "share of characters in paragraphs repeating an earlier paragraph")]
        + [(f"gopher_top_{n}gram", "gopher_top_ngram", f"max_top_{n}gram_char_frac", "max",
            f"gopher_top_{n}gram_char_frac", f"share of word characters in the most frequent {n}-gram")
           for n in TOP_NGRAM_SIZES]
        + [(f"gopher_dup_{n}gram", "gopher_dup_ngrams", f"max_dup_{n}gram_char_frac", "max",
            f"gopher_dup_{n}gram_char_frac", f"share of word characters in {n}-grams occurring twice or more")
           for n in DUP_NGRAM_SIZES]
    )
    rule_specs = [RuleSpec(rule, signal, (param,), compare, doc) for rule, _, param, compare, signal, doc in _CHECKS]

    def __init__(self, max_dup_line_frac: float | None = 0.30, max_dup_line_char_frac: float | None = 0.20,
                 max_dup_para_frac: float | None = 0.30, max_dup_para_char_frac: float | None = 0.20,
                 max_top_2gram_char_frac: float | None = 0.20, max_top_3gram_char_frac: float | None = 0.18,
                 max_top_4gram_char_frac: float | None = 0.16,
                 max_dup_5gram_char_frac: float | None = 0.15, max_dup_6gram_char_frac: float | None = 0.14,
                 max_dup_7gram_char_frac: float | None = 0.13, max_dup_8gram_char_frac: float | None = 0.12,
                 max_dup_9gram_char_frac: float | None = 0.11, max_dup_10gram_char_frac: float | None = 0.10,
                 by_lang: dict | None = None, name: str | None = None):
        super().__init__(name)
        self.max_dup_line_frac, self.max_dup_line_char_frac = max_dup_line_frac, max_dup_line_char_frac
        self.max_dup_para_frac, self.max_dup_para_char_frac = max_dup_para_frac, max_dup_para_char_frac
        self.max_top_2gram_char_frac = max_top_2gram_char_frac
        self.max_top_3gram_char_frac = max_top_3gram_char_frac
        self.max_top_4gram_char_frac = max_top_4gram_char_frac
        self.max_dup_5gram_char_frac = max_dup_5gram_char_frac
        self.max_dup_6gram_char_frac = max_dup_6gram_char_frac
        self.max_dup_7gram_char_frac = max_dup_7gram_char_frac
        self.max_dup_8gram_char_frac = max_dup_8gram_char_frac
        self.max_dup_9gram_char_frac = max_dup_9gram_char_frac
        self.max_dup_10gram_char_frac = max_dup_10gram_char_frac
        self.set_by_lang(by_lang)

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        texts = batch_text(batch)
        n = len(texts)
        if kernels.enabled():  # the same, in one pass over the text's bytes each
            line_frac, line_chars = kernels.dup_fracs(texts, paragraphs=False)
            para_frac, para_chars = kernels.dup_fracs(texts, paragraphs=True)
        else:
            line_frac, line_chars = _dup_fracs(lines_batch(texts), n)
            para_frac, para_chars = _dup_fracs(pc.split_pattern_regex(texts, PARAGRAPH_BREAK), n)
        words = _Words(batch_words(batch))
        ngrams = ngram_signals(words.codes, words.length, words.offsets, words.parent)
        signals = {"gopher_dup_line_frac": line_frac, "gopher_dup_line_char_frac": line_chars,
                   "gopher_dup_para_frac": para_frac, "gopher_dup_para_char_frac": para_chars}
        for k in TOP_NGRAM_SIZES:
            signals[f"gopher_top_{k}gram_char_frac"] = ngrams[k]
        for k in DUP_NGRAM_SIZES:
            signals[f"gopher_dup_{k}gram_char_frac"] = ngrams[k]
        signals = {name: pa.array(v, pa.float64()) for name, v in signals.items()}
        out = with_columns(batch, {**signals, WORDS_COLUMN: words.lists})
        table = [(rule, reason, param, compare, signals[sig]) for rule, reason, param, compare, sig, _ in self._CHECKS]
        return StageResult(out, _checks(self, batch, table))
