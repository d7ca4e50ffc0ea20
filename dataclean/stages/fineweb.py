"""The FineWeb custom quality rules: punctuation, duplicated lines, short lines, newlines per word.

Source: Penedo et al. 2024, "The FineWeb Datasets: Decanting the Web for the Finest Text Data at Scale"
(NeurIPS Datasets and Benchmarks), section 3.6 "Developing additional heuristic filters", which keeps three
of its 16 candidate rules; and datatrove's ``FineWebQualityFilter``
(``src/datatrove/pipeline/filters/fineweb_quality_filter.py``), the code FineWeb was built with, which adds a
fourth. A document is removed, in this order, when

1. ``fineweb_line_punct_ratio`` ≤ ``line_punct_thr`` = 0.12: the fraction of lines ending with punctuation
   (§3.6: "fraction of lines ending with punctuation ≤ 0.12"; the code's marks are ``. ' " ! ?``);
2. ``fineweb_short_line_ratio`` ≥ ``short_line_thr`` = 0.67: the fraction of lines of at most
   ``short_line_length`` = 30 characters (§3.6: "fraction of lines shorter than 30 characters ≥ 0.67"; the
   code counts ``len(line) <= 30``, which is followed here);
3. ``fineweb_char_dup_ratio`` ≥ ``char_duplicates_ratio`` = 0.1: the characters of lines that repeat an
   earlier line of the same document, over the characters of the document without its newlines (§3.6:
   "fraction of characters in duplicated lines ≥ 0.1". The paper's appendix table and the datatrove
   default say 0.01; the main text's 0.1 is used here — 0.01 removes a page for one repeated
   40-character line in 4,000 characters);
4. ``fineweb_newline_ratio`` > ``new_line_ratio`` = 0.3: line breaks per word (code only, reason
   "list_ratio"; not in the paper).

Definitions, and where they differ from the code:

* A line is a non-blank line. FineWeb's code counts every ``\\n``-separated line of trafilatura output,
  which has no blank lines; our input keeps paragraph breaks (normalize allows up to two blank lines), so
  counting blank lines would lower the punctuation ratio and raise the short-line ratio of any text with
  paragraph spacing. For the same reason rule 4 counts the line breaks between non-blank lines
  (non-blank lines − 1), not every ``\\n``.
* Words are those of :func:`dataclean.text.words_batch`, counted by :func:`dataclean.stages.c4.count_words`
  (datatrove used NLTK's ``word_tokenize``, which
  also counts punctuation tokens, so its ratio is lower on punctuated text). With no word at all the
  ratio divides by 1.
* A document with no non-blank line has every ratio 0 and is removed by rule 1.
* ``unwrap_lines`` (not published, off by default): the rules assume a line is a paragraph, as in
  trafilatura output; in hard-wrapped text (man pages, reStructuredText, e-mail) most lines end
  mid-sentence and rule 1 removes clean prose. With it the statistics are measured after
  :func:`dataclean.stages.c4.join_wrapped_lines` (the text itself is not changed).

Rule 1 is meant for pages made of many unterminated lines (menus, lists, boilerplate). On a document of one
or a few lines it degenerates into "does the last character end a sentence": a clean Wikipedia paragraph
of ten sentences whose last one ends in "：", a list head or a source name ("FishBase") is removed (43 of
the 300 cmrc2018 paragraphs of ``sample_data/zh-wiki-docs.jsonl.zst``, 13.9% of cmrc2018 on bench shards
0–2). Two parameters, not published and off by default, fix this:

* ``paragraph_sentences`` (``None``: off, as published): a line that does not end with ``end_marks`` but
  holds at least this many sentence ends followed by more text (:func:`sentence_end_pattern`: a stop of
  ``end_marks`` other than a quote, before whitespace or Han/kana for ``. ! ?``, not after a lone letter
  such as an initial or "e.g.") counts as ending with punctuation: it is a paragraph whose last sentence
  lost its mark. ``fineweb_paragraph_lines`` counts such lines, so the published ratio stays available in
  SQL (``fineweb_line_punct_ratio - fineweb_paragraph_lines / fineweb_lines``). With 2 (bench shards 0–2)
  rule 1 removes no cmrc2018 paragraph (13.9% before); on English and other languages the lines it counts
  are prose (wikitext paragraphs ending in ``</ref>``, ham e-mail paragraphs, docs paragraphs ending in
  "For example, you can say"), and 2 of the 67 multi-line documents it keeps are kept by a short line
  ("Vol. 7, No. 28"; "Home. About. Contact" would count too). 1 would count every line with one sentence
  and a tail, headings such as "6. Maintenance and Updates" among them; 3 keeps fewer wikitext articles and
  ham e-mails and no cleaner text.
* ``line_punct_min_lines`` (1: every document, as published): rule 1 judges only documents with at least
  this many non-blank lines (a document with none is still removed). Informal Chinese (reviews, weibo
  posts) often drops the final 。: in the default pipeline (after the Gopher length rules) rule 1 with
  ``paragraph_sentences: 2`` still removed 1,907 one-line Chinese reviews and posts of 50+ characters on
  bench shards 0–2, and the 18 read were all ordinary informal text; ``zh``/``ja`` get 2. Of the 24 English
  one-liners it removed there, 18 were fragments (UN resolution clauses ending in ";" or ",", text cut
  mid-word), so English keeps the published 1.

English assumptions and the Chinese/Japanese values (``by_lang``), measured on bench documents:

* The punctuation marks are English; ``zh``/``ja`` add ``。！？…”」』`` (``end_marks``).
* 30 characters is short for English, not for Chinese: on the 22 Debian Handbook pages in the bench whose
  zh-CN translation is mostly Chinese, the Chinese page has 0.434 times the characters of the English one
  (median), so 30 English characters ≈ 13 Chinese ones (``short_line_length: 13``); Japanese 0.707 → 21.
* The same pages have 1.42 tokenizer words (Han characters count one each) per English word (Japanese
  1.34), so 0.3 breaks per English word ≈ 0.21 per Chinese word (``new_line_ratio: 0.21``; ja 0.22).
* The three fractions (0.12, 0.67, 0.1) compare lines with lines and characters with characters and are
  kept for every language.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.stages.base import Check, Decisions, RuleSpec, Stage, StageResult, batch_text, with_columns
from dataclean.stages.c4 import check_per_lang, count_words, join_wrapped_lines, lang_groups, lang_numbers
from dataclean.text import lines_batch
from dataclean.text.chars import HAN, HIRAGANA, KATAKANA

#: The code's marks (``stop_chars``): period, apostrophe, quote, exclamation and question marks.
END_MARKS = ".'\"!?"
#: ``end_marks`` for Chinese and Japanese.
CJK_END_MARKS = ".'\"!?。！？…”」』"
#: End marks that close a quotation: they end a line's last sentence, never one inside a line.
QUOTE_MARKS = "'\"”’」』"
#: What may follow a sentence's stop mark within the same sentence end (closing quotes and brackets).
_CLOSERS = r"'\"”’」』)）\]】》"
_SPACE = r"\s\p{Zs}"
_CJK = HAN + HIRAGANA + KATAKANA


def sentence_end_pattern(end_marks: str) -> str | None:
    """RE2 pattern of a sentence end followed by more text, in a line without trailing whitespace, built from
    ``end_marks`` (None when they hold no stop mark: the quotes of ``QUOTE_MARKS`` close a quotation, they do
    not end a sentence inside a line). A run of marks with its closing quotes or brackets (``?!``, ``."``,
    ``。”``, ``……``) is one end.

    * An ASCII stop ends a sentence before whitespace, or directly before a Han or kana character (Chinese
      typed with ASCII marks): "3.5", "e.g" and "www.example.org" are not ends.
    * A period after a lone letter is not an end either — an initial or an abbreviation ("R. A. Hettinga",
      "e.g. this", "U.S. Army", "5 m. long"): the period must follow two characters that are neither
      whitespace nor periods, or a character that is not a letter ("in 1983. Then", "(see above). Then"),
      or a Han or kana character. So an ASCII ellipsis ("wait... then", "[OPTION]... SOURCE") is no end
      either (C4 does not take a line ending in "..." as terminated).
    * A full-width stop (``。！？…``) ends a sentence before anything but the end of the line.
    """
    stops = sorted({c for c in end_marks if c not in QUOTE_MARKS})
    narrow = [c for c in stops if ord(c) < 128]
    wide = "".join(c for c in stops if ord(c) >= 128)

    def esc(chars) -> str:  # RE2 takes any ASCII mark escaped
        return "".join(c if c.isalnum() else "\\" + c for c in chars)

    after = rf"[{_CLOSERS}]*(?:[{_SPACE}]+|[{_CJK}])"
    others = esc(sorted(set(narrow) - {"."}))
    parts = []
    if "." in narrow:
        parts.append(rf"(?:[^{_SPACE}.]{{2}}|[^\pL{_SPACE}.]|[{_CJK}])\." + (f"[{others}]*" if others else "") + after)
    if others:
        parts.append(rf"[{others}][{esc(narrow)}]*{after}")
    if wide:
        parts.append(rf"[{wide}]+[{_CLOSERS}]*[^{_CLOSERS}]")
    return "|".join(parts) or None


class FineWebQuality(Stage):
    """FineWeb's custom heuristic rules (Penedo et al. 2024 §3.6; datatrove ``FineWebQualityFilter``).

    Parameters (defaults are the published values; ``None`` disables a rule):

    * ``line_punct_thr`` — 0.12; remove when the fraction of lines ending with ``end_marks`` is ≤ it.
    * ``end_marks`` — ``. ' " ! ?`` (datatrove ``stop_chars``).
    * ``paragraph_sentences`` — ``None`` (published: off); a line holding this many sentence ends followed
      by more text counts as ending with punctuation (not published; see the module docstring).
    * ``line_punct_min_lines`` — 1 (published: every document); rule 1 skips documents with fewer non-blank
      lines, but at least one (not published; see the module docstring).
    * ``short_line_thr`` — 0.67; remove when the fraction of lines of ≤ ``short_line_length`` (30)
      characters is ≥ it.
    * ``char_duplicates_ratio`` — 0.1 (§3.6 text); remove when ≥ it.
    * ``new_line_ratio`` — 0.3 (datatrove); remove when line breaks per word are > it.
    * ``unwrap_lines`` — measure on unwrapped lines (not published; see the module docstring).
    * ``by_lang`` — per-language overrides of any of the above.
    """

    kind = "fineweb_quality"
    #: The parameters ``by_lang`` may override.
    PER_LANG = ("line_punct_thr", "end_marks", "paragraph_sentences", "line_punct_min_lines", "short_line_thr",
                "short_line_length", "char_duplicates_ratio", "new_line_ratio")
    signal_fields = [
        pa.field("fineweb_lines", pa.int64()),
        pa.field("fineweb_line_punct_ratio", pa.float64()),
        pa.field("fineweb_paragraph_lines", pa.int64()),
        pa.field("fineweb_short_line_ratio", pa.float64()),
        pa.field("fineweb_char_dup_ratio", pa.float64()),
        pa.field("fineweb_newline_ratio", pa.float64()),
    ]
    rule_specs = [
        RuleSpec("fineweb_line_punct_ratio", "fineweb_line_punct_ratio",
                 ("line_punct_thr", "end_marks", "paragraph_sentences", "line_punct_min_lines"), "min",
                 "share of lines ending in a terminal mark (removed at or below)"),
        RuleSpec("fineweb_short_line_ratio", "fineweb_short_line_ratio", ("short_line_thr", "short_line_length"),
                 "max", "share of lines of at most short_line_length characters (removed at or above)"),
        RuleSpec("fineweb_char_dup_ratio", "fineweb_char_dup_ratio", ("char_duplicates_ratio",), "max",
                 "share of characters in repeated lines (removed at or above)"),
        RuleSpec("fineweb_list_ratio", "fineweb_newline_ratio", ("new_line_ratio",), "max",
                 "newlines per word (removed above)"),
    ]

    def __init__(self, line_punct_thr: float | None = 0.12, end_marks: str = END_MARKS,
                 paragraph_sentences: int | None = None, line_punct_min_lines: int = 1,
                 short_line_thr: float | None = 0.67, short_line_length: int = 30,
                 char_duplicates_ratio: float | None = 0.1, new_line_ratio: float | None = 0.3,
                 unwrap_lines: bool = False, by_lang: dict | None = None, name: str | None = None):
        super().__init__(name)
        self.line_punct_thr = line_punct_thr
        self.end_marks = end_marks
        self.paragraph_sentences = paragraph_sentences
        self.line_punct_min_lines = line_punct_min_lines
        self.short_line_thr = short_line_thr
        self.short_line_length = short_line_length
        self.char_duplicates_ratio = char_duplicates_ratio
        self.new_line_ratio = new_line_ratio
        self.unwrap_lines = bool(unwrap_lines)
        self.set_by_lang(by_lang)
        for code, overrides in self.by_lang.items():
            check_per_lang(f"fineweb_quality.by_lang.{code}", overrides, self.PER_LANG)
        for code, values in [("", self.params())] + [(f"by_lang.{c}.", o) for c, o in self.by_lang.items()]:
            for key, value in values.items():
                if key in ("by_lang", "unwrap_lines"):
                    continue
                if key == "end_marks":
                    if not isinstance(value, str) or not value:
                        raise ValueError(f"fineweb_quality.{code}end_marks must be a non-empty string")
                elif key == "paragraph_sentences":
                    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
                        raise ValueError(f"fineweb_quality.{code}paragraph_sentences must be an integer >= 1 or null")
                elif key in ("short_line_length", "line_punct_min_lines"):
                    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                        raise ValueError(f"fineweb_quality.{code}{key} must be an integer >= 0")
                elif value is not None and (isinstance(value, bool) or not isinstance(value, (int, float))
                                            or value < 0):
                    raise ValueError(f"fineweb_quality.{code}{key} must be a non-negative number or null")

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        text = batch_text(batch)
        n = len(text)

        if self.unwrap_lines:  # the statistics are measured on unwrapped lines; the text is not changed
            text = join_wrapped_lines(text)[0]
        lines = lines_batch(text)
        parent_all = pc.list_parent_indices(lines).to_numpy()
        flat_all = pc.list_flatten(lines)
        nonblank = pc.utf8_length(pc.utf8_trim_whitespace(flat_all)).to_numpy(zero_copy_only=False) > 0
        flat = flat_all.filter(pa.array(nonblank))
        parent = parent_all[nonblank]
        line_len = pc.utf8_length(flat).to_numpy(zero_copy_only=False).astype(np.int64)
        n_lines = np.bincount(parent, minlength=n).astype(np.int64)
        denom = np.maximum(n_lines, 1).astype(np.float64)

        # 1. lines ending with a terminal mark (per-language marks); with paragraph_sentences, also a line that
        # holds that many sentence ends followed by more text: a paragraph whose last sentence lost its mark
        marks, mark_group = lang_groups(self, batch, "end_marks")
        line_group = mark_group[parent]
        need = lang_numbers(self, batch, "paragraph_sentences")[parent]
        ends = np.zeros(len(flat), dtype=bool)
        paragraph = np.zeros(len(flat), dtype=bool)
        last = pc.utf8_slice_codeunits(flat, -1)
        for g, m in enumerate(marks):
            sel = line_group == g
            if not sel.any():
                continue
            hit = pc.is_in(last, value_set=pa.array(sorted(set(m)), pa.string()))
            ends[sel] = hit.to_numpy(zero_copy_only=False)[sel]
            idx = np.flatnonzero(sel & ~ends & ~np.isnan(need))
            pattern = sentence_end_pattern(m)
            if len(idx) and pattern:
                candidates = pc.utf8_rtrim_whitespace(flat.take(pa.array(idx)))
                found = pc.count_substring_regex(candidates, pattern).to_numpy(zero_copy_only=False)
                paragraph[idx] = found >= need[idx]
        ends |= paragraph
        punct_ratio = np.bincount(parent[ends], minlength=n) / denom

        # 2. short lines (per-language length)
        short_len = lang_numbers(self, batch, "short_line_length")[parent]
        short = line_len <= short_len
        short_ratio = np.bincount(parent[short], minlength=n) / denom

        # 3. characters in lines that repeat an earlier line of the same document
        dup_chars = np.zeros(n, dtype=np.float64)
        if len(flat):
            codes = pc.dictionary_encode(flat).indices.to_numpy(zero_copy_only=False).astype(np.int64)
            key = parent.astype(np.int64) * (int(codes.max()) + 1) + codes
            _, first, count = np.unique(key, return_index=True, return_counts=True)
            repeated = count > 1
            dup_chars = np.bincount(parent[first[repeated]], weights=(line_len[first] * (count - 1))[repeated],
                                    minlength=n).astype(np.float64)
        chars = (pc.utf8_length(text).to_numpy(zero_copy_only=False).astype(np.int64)
                 - pc.count_substring(text, "\n").to_numpy(zero_copy_only=False).astype(np.int64))
        dup_ratio = dup_chars / np.maximum(chars, 1)

        # 4. line breaks (between non-blank lines) per word
        # (a document with at most one line has ratio 0 whatever its words: tokenize only the others)
        words = np.zeros(n, dtype=np.int64)
        multi = np.flatnonzero(n_lines > 1)
        if len(multi):
            words[multi] = count_words(text.take(pa.array(multi)))
        newline_ratio = np.maximum(n_lines - 1, 0) / np.maximum(words, 1)

        out = with_columns(batch, {  # (signals only: the batch's text is untouched)
            "fineweb_lines": pa.array(n_lines),
            "fineweb_line_punct_ratio": pa.array(punct_ratio),
            "fineweb_paragraph_lines": pa.array(np.bincount(parent[paragraph], minlength=n).astype(np.int64)),
            "fineweb_short_line_ratio": pa.array(short_ratio),
            "fineweb_char_dup_ratio": pa.array(dup_ratio),
            "fineweb_newline_ratio": pa.array(newline_ratio),
        })

        # a ratio over fewer lines than line_punct_min_lines is not judged (a document with no line still is)
        punct_judged = (n_lines == 0) | (n_lines >= lang_numbers(self, batch, "line_punct_min_lines"))

        def check(rule: str, reason: str, name: str, signal: np.ndarray, op, judged=True) -> Check:
            thr = lang_numbers(self, batch, name)
            failed = judged & ~np.isnan(thr) & op(signal, np.nan_to_num(thr))
            return Check(rule, reason, pa.array(failed), value=pa.array(signal),
                         threshold=pa.array(thr, from_pandas=True))

        checks = [
            check("fineweb_line_punct_ratio", "low_punctuation", "line_punct_thr", punct_ratio, np.less_equal,
                  punct_judged),
            check("fineweb_short_line_ratio", "list_like", "short_line_thr", short_ratio, np.greater_equal),
            check("fineweb_char_dup_ratio", "repetition", "char_duplicates_ratio", dup_ratio, np.greater_equal),
            check("fineweb_list_ratio", "list_like", "new_line_ratio", newline_ratio, np.greater),
        ]
        return StageResult(out, Decisions.from_checks(n, checks))
