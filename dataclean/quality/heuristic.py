"""The ``heuristic`` quality score: seven rule-like signals combined into one number in [0, 1], no model.

It needs only ``text`` (and reads ``lang`` when present); words are the shared tokenizer's (one per Han
character, one per kana run), taken from the batch's cached words column when an earlier stage left it.

**Signals** (every row). A "line" is a non-blank line of the text after hard-wrapped lines are joined as
:func:`dataclean.stages.c4.join_wrapped_lines` joins them (a wrapped paragraph of a man page is one line);
line shares are weighted by characters, so a long document is not judged by its headings.

* ``q_words``: tokenizer words.
* ``q_alpha_word_frac``: share of the words holding a letter (the others are numbers); 0 without words.
* ``q_stop_word_frac``: stop-word occurrences / words, with the list of the row's language group (below);
  null for a group without a list.
* ``q_terminal_line_frac``: share of the lines' characters in lines that end a sentence: the last character,
  after closing quotes or brackets, is one of ``. ! ? 。 ！ ？ … ． ｡``, or the line holds at least two sentence
  ends followed by more text (:func:`dataclean.stages.fineweb.sentence_end_pattern`): a paragraph whose last
  sentence lost its mark, common in Chinese posts and Wikipedia paragraphs.
* ``q_dup_line_frac``: share of the lines' characters in lines equal to an earlier line of the document.
* ``q_symbol_ratio``: symbol characters / (symbol characters + word characters); a symbol is Unicode category
  S (math, currency, modifiers, emoji, box drawing) or one of the ASCII marks of markup, code and headers
  ``# * @ _ \\ / & % { } [ ]``; 0 when the text has neither.
* ``q_mean_word_length``: mean characters per word over the words that are not Han or kana (null if none).
* ``q_cjk_word_frac``: share of the words that are Han characters or kana runs.

**Language group** of a row: ``en``, ``zh`` (also ``wuu``, ``yue`` and the other Chinese codes of
:data:`CHINESE_CODES`), ``ja``, or ``other``, from the ``lang`` column (the part before ``-`` or ``_``, any
case); where ``lang`` is absent or null, from the script: ``zh`` when at least half the words are Han or
kana, ``ja`` if one of them is kana, else ``en``.

**The score** is the product of seven terms, each in [0, 1]::

    score = length · alpha · stop · punct · dup · symbol · word_length

    length      = min(1, ln(1 + q_words) / ln(1 + W))          W = 100 words (en, other), 150 (zh, ja)
    alpha       = ramp(q_alpha_word_frac; ok 0.9, bad 0.5, floor 0.1)
    stop        = 0.3 + 0.7 · min(1, q_stop_word_frac / S)      S = 0.08 (en, ja), 0.04 (zh); 1 for other
    punct       = P + (1 − P) · min(1, q_terminal_line_frac / 0.6)   P = 0.5 (en, other), 0.7 (zh, ja)
    dup         = 1 − q_dup_line_frac
    symbol      = ramp(q_symbol_ratio; ok 0.05, bad 0.4, floor 0.1)
    word_length = band(q_mean_word_length) ** (1 − q_cjk_word_frac); 1 when every word is Han or kana
    band(m)     = min(ramp(m; ok 3, bad 1.5, floor 0.2), ramp(m; ok 9, bad 15, floor 0.2))

where ``ramp(x; ok, bad, floor)`` is 1 on the good side of ``ok``, ``floor`` at and beyond ``bad``, linear in
between. So a document without words scores 0, and only such a document does (every other term has a floor
above 0, and ``dup`` < 1 because a first occurrence never counts as a duplicate); 1 means "nothing to object
to" (100 English words or more, prose punctuation, no repetition, few symbols). A product rather than a
mean: one serious defect (a number table, a page made of one repeated line) must pull the score down
whatever the rest.

Where the constants come from. The word-length band is Gopher's [3, 10] mean word length (Rae et al. 2021,
A.1.1), softened; the alphabetic share echoes Gopher's 80 % of words with a letter; the stop words are
Gopher's eight English words and the Chinese and Japanese lists of :mod:`dataclean.stages.gopher`; the
terminal-line share is FineWeb's line-punctuation signal (Penedo et al. 2024, §3.6) weighted by characters;
the duplicate-line share is Gopher's duplicate-line character fraction. The targets and floors were set on
bench shard 0 (21,513 documents, languages from the langid stage) so that clean text keeps most of each
term: the median ``q_stop_word_frac`` is 0.14-0.20 in English books and the Debian handbook (5th
percentile 0.08), 0.064 in Chinese Wikipedia paragraphs (cmrc2018; 25th percentile 0.042), 0.03-0.05 in
e-mail with headers. A quarter of the Chinese Wikipedia paragraphs end without a mark, but every one holds
several sentence ends, so the paragraph rule counts them all as terminated; 40-46 % of the Chinese reviews
and Weibo posts have no sentence end at all (informal Chinese drops the final 。), hence the higher
``punct`` floor for Chinese and Japanese (35 % of the short English lines of nlp-corpus have none either). The word-length term does not apply to Han and kana
(one Han character is one word; kana runs are 2-3 characters) and, in a mixed document, counts for the
share of its other words. Rows of ``other`` languages get no stop-word term (no list); scripts written
without spaces other than Chinese and Japanese (Thai, Lao, Khmer) make long "words" and lose on word length.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.quality import Scorer
from dataclean.stages.c4 import join_wrapped_lines
from dataclean.stages.fineweb import sentence_end_pattern
from dataclean.stages.gopher import CHINESE_STOP_WORDS, ENGLISH_STOP_WORDS, JAPANESE_STOP_WORDS
from dataclean.text import batch_words, lines_batch
from dataclean.text.tokenize import HAN, HIRAGANA, KATAKANA

#: Sentence stops that end a line (ASCII and full-width, the ellipsis); ":" "：" ";" do not end one.
STOPS = ".!?。！？…．｡"
#: A line that ends a sentence, matched on its last few characters (closing quotes and brackets may follow).
TERMINAL_TAIL = r"[.!?。！？…．｡][\"'”’」』)）\]】》]*$"
#: A sentence end followed by more text inside a line.
SENTENCE_END = sentence_end_pattern(STOPS)
#: Lines holding this many sentence ends followed by more text count as terminated (FineWeb stage's
#: ``paragraph_sentences`` in the default recipe).
PARAGRAPH_SENTENCES = 2
#: Symbols: Unicode category S and the ASCII marks of markup, code, headers and URLs.
SYMBOL = r"[\pS#*@_\\/&%{}\[\]]"
CJK_WORD = rf"^[{HAN}{HIRAGANA}{KATAKANA}]"
KANA_WORD = rf"^[{HIRAGANA}{KATAKANA}]"
#: Language codes given the Chinese constants.
CHINESE_CODES = ("zh", "wuu", "yue", "gan", "hak", "cmn", "lzh")


@dataclass(frozen=True)
class LangConstants:
    """The constants of the score that depend on a row's language group."""

    saturation_words: int  # W: words at which the length term reaches 1
    stop_words: tuple[str, ...] | None  # None: no stop-word term (1)
    stop_target: float  # S: stop-word share at which the stop term reaches 1
    punct_floor: float  # P: the punctuation term of a document with no terminated line


#: The language groups, in the order of their index in :meth:`HeuristicScorer.groups`.
GROUPS = ("en", "zh", "ja", "other")
LANG_CONSTANTS = {
    "en": LangConstants(100, tuple(ENGLISH_STOP_WORDS), 0.08, 0.5),
    "zh": LangConstants(150, tuple(CHINESE_STOP_WORDS), 0.04, 0.7),
    "ja": LangConstants(150, tuple(JAPANESE_STOP_WORDS), 0.08, 0.7),
    "other": LangConstants(100, None, 1.0, 0.5),
}
ALPHA_OK, ALPHA_BAD, ALPHA_FLOOR = 0.9, 0.5, 0.1
STOP_FLOOR = 0.3
PUNCT_OK = 0.6
SYMBOL_OK, SYMBOL_BAD, SYMBOL_FLOOR = 0.05, 0.4, 0.1
WORD_LENGTH_LOW_BAD, WORD_LENGTH_LOW_OK, WORD_LENGTH_HIGH_OK, WORD_LENGTH_HIGH_BAD = 1.5, 3.0, 9.0, 15.0
WORD_LENGTH_FLOOR = 0.2


def ramp(x, ok: float, bad: float, floor: float) -> np.ndarray:
    """1 where ``x`` is on the good side of ``ok``, ``floor`` at and beyond ``bad``, linear in between (``ok``
    may be above or below ``bad``)."""
    t = np.clip((np.asarray(x, np.float64) - bad) / (ok - bad), 0.0, 1.0)
    return floor + (1.0 - floor) * t


def _div(num, den) -> np.ndarray:
    """num / den, 0 where den is 0."""
    num = np.asarray(num, np.float64)
    den = np.asarray(den, np.float64)
    out = np.zeros(len(num), np.float64)
    np.divide(num, den, out=out, where=den > 0)
    return out


class HeuristicScorer(Scorer):
    """The rule-based score of the module docstring (no parameters: its constants are the module's)."""

    name = "heuristic"
    uses_words = True
    signal_fields = [
        pa.field("q_words", pa.int64()),
        pa.field("q_alpha_word_frac", pa.float64()),
        pa.field("q_stop_word_frac", pa.float64()),
        pa.field("q_terminal_line_frac", pa.float64()),
        pa.field("q_dup_line_frac", pa.float64()),
        pa.field("q_symbol_ratio", pa.float64()),
        pa.field("q_mean_word_length", pa.float64()),
        pa.field("q_cjk_word_frac", pa.float64()),
    ]

    def score(self, batch: pa.RecordBatch) -> tuple[np.ndarray, dict[str, pa.Array]]:
        sig = self.signals(batch)
        score = np.ones(batch.num_rows)
        for term in self.terms(sig).values():
            score *= term
        np.clip(score, 0.0, 1.0, out=score)
        out = {f.name: pa.array(sig[f.name], f.type, from_pandas=True) for f in self.signal_fields}
        return score, out

    def signals(self, batch: pa.RecordBatch) -> dict[str, np.ndarray]:
        """The signals as numpy arrays (NaN where null), and ``group``: each row's index in :data:`GROUPS`."""
        text = batch.column("text")
        if isinstance(text, pa.ChunkedArray):
            text = text.combine_chunks()
        text = pc.fill_null(text.cast(pa.string()), "")
        n = len(text)

        # -- words: each distinct word of the batch is looked at once ---------------------------------------
        words = batch_words(batch)
        if isinstance(words, pa.ChunkedArray):
            words = words.combine_chunks()
        count = np.diff(words.offsets.to_numpy()).astype(np.int64)
        parent = np.repeat(np.arange(n, dtype=np.int64), count)
        enc = pc.dictionary_encode(words.flatten())
        dictionary = enc.dictionary
        codes = enc.indices.to_numpy(zero_copy_only=False)

        def per_doc(per_entry: np.ndarray) -> np.ndarray:
            if len(codes) == 0:
                return np.zeros(n, np.float64)
            return np.bincount(parent, weights=np.asarray(per_entry, np.float64)[codes], minlength=n)

        def matches(pattern: str) -> np.ndarray:
            return pc.match_substring_regex(dictionary, pattern).to_numpy(zero_copy_only=False)

        length = pc.utf8_length(dictionary).to_numpy(zero_copy_only=False).astype(np.float64)
        cjk = matches(CJK_WORD)
        word_chars = per_doc(length)
        alpha_frac = _div(per_doc(matches(r"\pL")), count)
        cjk_words = per_doc(cjk)
        cjk_frac = _div(cjk_words, count)
        other_words = count - cjk_words
        mean_len = np.full(n, np.nan)
        np.divide(per_doc(np.where(cjk, 0.0, length)), other_words, out=mean_len, where=other_words > 0)

        group = self.groups(batch, cjk_frac, per_doc(matches(KANA_WORD)))
        stop_frac = np.full(n, np.nan)
        lower = None
        for g, code in enumerate(GROUPS):
            rows = group == g
            stop_words = LANG_CONSTANTS[code].stop_words
            if stop_words is None or not rows.any():
                continue
            if lower is None:
                lower = pc.utf8_lower(dictionary)
            hit = pc.is_in(lower, value_set=pa.array(list(stop_words), pa.string())).to_numpy(zero_copy_only=False)
            stop_frac[rows] = _div(per_doc(hit), count)[rows]

        # -- lines (hard wrapping undone): terminated and duplicated shares of their characters -------------
        lines = lines_batch(join_wrapped_lines(text)[0])
        lparent = np.repeat(np.arange(n, dtype=np.int64), np.diff(lines.offsets.to_numpy()))
        trimmed = pc.utf8_trim_whitespace(lines.flatten())
        llen = pc.utf8_length(trimmed).to_numpy(zero_copy_only=False).astype(np.int64)
        keep = llen > 0
        trimmed = trimmed.filter(pa.array(keep))
        lparent, llen = lparent[keep], llen[keep]
        line_chars = np.bincount(lparent, weights=llen, minlength=n)
        ends = pc.match_substring_regex(pc.utf8_slice_codeunits(trimmed, -8), TERMINAL_TAIL)
        ends = ends.to_numpy(zero_copy_only=False)
        open_lines = np.flatnonzero(~ends)
        if len(open_lines):
            inner = pc.count_substring_regex(trimmed.take(pa.array(open_lines)), SENTENCE_END)
            ends[open_lines] = inner.to_numpy(zero_copy_only=False) >= PARAGRAPH_SENTENCES
        terminal_frac = _div(np.bincount(lparent, weights=llen * ends, minlength=n), line_chars)
        dup_frac = np.zeros(n)
        if len(llen):
            lcodes = pc.dictionary_encode(trimmed).indices.to_numpy(zero_copy_only=False).astype(np.int64)
            dup = np.ones(len(llen), bool)
            dup[np.unique((lparent << 32) | lcodes, return_index=True)[1]] = False
            dup_frac = _div(np.bincount(lparent, weights=llen * dup, minlength=n), line_chars)

        # -- symbols, against word characters --------------------------------------------------------------
        symbols = pc.count_substring_regex(text, SYMBOL).to_numpy(zero_copy_only=False).astype(np.float64)

        return {
            "q_words": count,
            "q_alpha_word_frac": alpha_frac,
            "q_stop_word_frac": stop_frac,
            "q_terminal_line_frac": terminal_frac,
            "q_dup_line_frac": dup_frac,
            "q_symbol_ratio": _div(symbols, symbols + word_chars),
            "q_mean_word_length": mean_len,
            "q_cjk_word_frac": cjk_frac,
            "group": group,
        }

    @staticmethod
    def groups(batch: pa.RecordBatch, cjk_frac: np.ndarray, kana_words: np.ndarray) -> np.ndarray:
        """Each row's index in :data:`GROUPS`: from ``lang`` (the part before ``-`` or ``_``, any case), else,
        where ``lang`` is absent or null, from the script (see the module docstring)."""
        guess = np.where(cjk_frac >= 0.5, np.where(kana_words > 0, 2, 1), 0).astype(np.int64)
        if "lang" not in batch.schema.names:
            return guess
        lang = pc.cast(batch.column("lang"), pa.string())
        if isinstance(lang, pa.ChunkedArray):
            lang = lang.combine_chunks()
        base = pc.replace_substring_regex(pc.utf8_lower(pc.utf8_trim_whitespace(lang)), r"[-_].*$", "")
        out = np.full(len(guess), GROUPS.index("other"), np.int64)
        for code, codes in (("en", ("en",)), ("zh", CHINESE_CODES), ("ja", ("ja",))):
            hit = pc.fill_null(pc.is_in(base, value_set=pa.array(list(codes), pa.string())), False)
            out[hit.to_numpy(zero_copy_only=False)] = GROUPS.index(code)
        null = pc.is_null(lang).to_numpy(zero_copy_only=False)
        out[null] = guess[null]
        return out

    @staticmethod
    def terms(sig: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        """The seven terms of the score, each in [0, 1], from :meth:`signals`."""
        consts = [LANG_CONSTANTS[g] for g in GROUPS]
        group = sig["group"]
        saturation = np.array([c.saturation_words for c in consts], np.float64)[group]
        target = np.array([c.stop_target for c in consts], np.float64)[group]
        punct_floor = np.array([c.punct_floor for c in consts], np.float64)[group]
        stop = sig["q_stop_word_frac"]
        stop_term = STOP_FLOOR + (1 - STOP_FLOOR) * np.minimum(1.0, np.nan_to_num(stop) / target)
        mean_len = sig["q_mean_word_length"]
        band = np.minimum(ramp(np.nan_to_num(mean_len), WORD_LENGTH_LOW_OK, WORD_LENGTH_LOW_BAD, WORD_LENGTH_FLOOR),
                          ramp(np.nan_to_num(mean_len), WORD_LENGTH_HIGH_OK, WORD_LENGTH_HIGH_BAD, WORD_LENGTH_FLOOR))
        return {
            "length": np.minimum(1.0, np.log1p(sig["q_words"].astype(np.float64)) / np.log1p(saturation)),
            "alpha": ramp(sig["q_alpha_word_frac"], ALPHA_OK, ALPHA_BAD, ALPHA_FLOOR),
            "stop": np.where(np.isnan(stop), 1.0, stop_term),
            "punct": punct_floor + (1 - punct_floor) * np.minimum(1.0, sig["q_terminal_line_frac"] / PUNCT_OK),
            "dup": 1.0 - sig["q_dup_line_frac"],
            "symbol": ramp(sig["q_symbol_ratio"], SYMBOL_OK, SYMBOL_BAD, SYMBOL_FLOOR),
            "word_length": np.where(np.isnan(mean_len), 1.0, band ** (1.0 - sig["q_cjk_word_frac"])),
        }
