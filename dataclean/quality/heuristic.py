"""The ``heuristic`` quality score: rule-like signals combined by a logistic regression fitted on human labels.

It needs only ``text`` (and reads ``lang`` and the langid stage's ``lang_score`` when present); words are the
shared tokenizer's (one per Han character, one per kana run), taken from the batch's cached words column when
an earlier stage left it. No model file: the weights are data, ``rules/quality/heuristic.yaml``.

**Signals** (every row). A "line" is a non-blank line of the text after hard-wrapped lines are joined as
:func:`dataclean.stages.c4.join_wrapped_lines` joins them (a wrapped paragraph of a man page is one line).

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
* ``q_lines``, ``q_mean_line_chars``: the lines, and their mean length in characters.
* ``q_short_line_frac``: share of the lines of at most 30 characters (FineWeb's short line, Penedo et al. 2024).
* ``q_upper_frac``, ``q_digit_frac``: upper-case letters and decimal digits / characters of the text.
* ``q_words_per_sentence``: words / sentence ends (a run of ``. ! ? …`` before whitespace, or ``。！？``; at
  least 1).

**Language group** of a row: ``en``, ``zh`` (also ``wuu``, ``yue`` and the other Chinese codes of
:data:`CHINESE_CODES`), ``ja``, or ``other``, from the ``lang`` column (the part before ``-`` or ``_``, any
case); where ``lang`` is absent or null, from the script: ``zh`` when at least half the words are Han or
kana, ``ja`` if one of them is kana, else ``en``.

**The score** is ``sigmoid(b + sum_i w_i * (x_i - m_i) / s_i)`` over the 15 features of :data:`FEATURES`
(``log1p`` of the word count, of the mean line length and of the words per sentence; the shares and ratios as
they are; the langid stage's ``lang_score``; the shares of characters and lines that C4's line cleaning
removed, see :func:`context`), with the intercept ``b``, weights ``w``, means ``m`` and scales ``s`` of the row's
group. A feature that is undefined for a row (no stop-word list, no word outside Han and kana, no
``lang_score``, no C4 stage) counts as its mean. A document without words scores 0. The score is a probability of "good"
as people judged it: it does not saturate (on the development pages, no two scores tie), so a threshold or a
top fraction ranks every document.

**Where the weights come from** (``benchmarks/fit_quality_heuristic.py``, which writes the YAML):

* ``en``: L2 logistic regression (``C = 0.03``) on DCLM's human quality judgements, the development half
  (261 English web pages; ``shared/labelled/dclm-dev.jsonl``), the features computed on the text each page has
  when it reaches this stage in the default pipeline. 10-fold cross-validated AUC 0.857 (5 repeats); the
  product of soft penalties this score replaces had 0.768 on the same pages and gave 61% of them exactly 1.0.
  The largest weights: stop-word share, word count, ``lang_score``, mean line length (positive), upper-case
  share and short lines (negative).
* ``zh``: no Chinese quality labels exist here (the Chinese development set labels spam and garbage, and a
  fit on it learns "a crawl page is bad, a review is good"). The English weights are used with the means
  and scales of 2,000 clean Chinese web documents of bench shard 0 and an intercept that gives them the mean
  logit of the English good pages: calibrated per language, a clean Chinese page scores like a good English
  one whatever its length in Han characters.
* ``ja`` uses the ``zh`` weights (with the Japanese stop words); ``other`` the ``en`` weights (no stop-word
  list: that feature counts as the mean).

Stop words are Gopher's eight English words and the Chinese and Japanese lists of
:mod:`dataclean.stages.gopher`.
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
from dataclean.text import batch_words, kernels, lines_batch
from dataclean.text.chars import HAN, HIRAGANA, KATAKANA

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
#: The one-character classes counted in one kernel pass: symbols, capitals, digits (the table of the three is
#: built with RE2 on first use, 0.19 s once per machine, then cached on disk; dataclean.warm sits below this
#: layer and does not build it).
CLASS_PATTERNS = (SYMBOL, r"\p{Lu}", r"\p{Nd}")
CJK_WORD = rf"^[{HAN}{HIRAGANA}{KATAKANA}]"
KANA_WORD = rf"^[{HIRAGANA}{KATAKANA}]"
#: Language codes given the Chinese constants.
CHINESE_CODES = ("zh", "wuu", "yue", "gan", "hak", "cmn", "lzh")


@dataclass(frozen=True)
class LangConstants:
    """What the signals of a row's language group depend on."""

    stop_words: tuple[str, ...] | None  # None: no stop-word list (``q_stop_word_frac`` is null)


#: The language groups, in the order of their index in :meth:`HeuristicScorer.groups`.
GROUPS = ("en", "zh", "ja", "other")
LANG_CONSTANTS = {
    "en": LangConstants(tuple(ENGLISH_STOP_WORDS)),
    "zh": LangConstants(tuple(CHINESE_STOP_WORDS)),
    "ja": LangConstants(tuple(JAPANESE_STOP_WORDS)),
    "other": LangConstants(None),
}

#: A line of at most this many characters is short (FineWeb's ``short_line_length``, Penedo et al. 2024 §3.6).
SHORT_LINE_CHARS = 30
#: A sentence end for ``q_words_per_sentence``: a run of stops before whitespace or the end, or a CJK stop.
SENTENCE_MARK = r"[.!?…]+[\"'”’」』)）\]]*(?:\s|$)|[。！？｡]+"
#: The model's inputs, in order: each a transform of one signal (``lang_score`` comes from the langid stage).
FEATURES = ("log_words", "stop_word_frac", "terminal_line_frac", "log_mean_line_chars", "upper_frac",
            "mean_word_length", "dup_line_frac", "alpha_word_frac", "digit_frac", "symbol_ratio", "lang_score",
            "short_line_frac", "log_words_per_sentence", "c4_removed_char_frac", "c4_removed_line_frac")
#: The weights file, under the rules folder (written by benchmarks/fit_quality_heuristic.py).
MODEL_FILE = "quality/heuristic.yaml"


def features(sig: dict[str, np.ndarray], context: dict[str, np.ndarray]) -> np.ndarray:
    """The model's input matrix (rows x :data:`FEATURES`) from :meth:`HeuristicScorer.signals` and the earlier
    stages' signals of :func:`context` (language score, C4's line cleaning); NaN where a feature is undefined
    (no stop-word list, no non-CJK word, no such stage): the model reads it as the mean of its training
    documents."""
    return np.column_stack([
        np.log1p(sig["q_words"].astype(np.float64)),
        sig["q_stop_word_frac"],
        sig["q_terminal_line_frac"],
        np.log1p(sig["q_mean_line_chars"]),
        sig["q_upper_frac"],
        sig["q_mean_word_length"],
        sig["q_dup_line_frac"],
        sig["q_alpha_word_frac"],
        sig["q_digit_frac"],
        sig["q_symbol_ratio"],
        context["lang_score"],
        sig["q_short_line_frac"],
        np.log1p(sig["q_words_per_sentence"]),
        context["c4_removed_char_frac"],
        context["c4_removed_line_frac"],
    ]).astype(np.float64)


def _column(batch: pa.RecordBatch, name: str) -> np.ndarray:
    """A numeric column as float64, NaN where null or where the batch has no such column."""
    if name not in batch.schema.names:
        return np.full(batch.num_rows, np.nan)
    col = batch.column(name)
    if isinstance(col, pa.ChunkedArray):
        col = col.combine_chunks()
    return np.asarray(pc.fill_null(col.cast(pa.float64()), np.nan).to_numpy(zero_copy_only=False), np.float64)


def context(batch: pa.RecordBatch) -> dict[str, np.ndarray]:
    """The earlier stages' signals the score reads, NaN where a stage did not run on a row: the langid stage's
    ``lang_score``, and the share of the page (characters, lines) that C4's line cleaning removed, from
    ``c4_chars_removed``, ``c4_lines_before`` and ``c4_lines_after`` (the text this stage sees is the cleaned
    one; how much boilerplate the page had is in those counts). Adding the two C4 shares raised the English
    fit's cross-validated AUC on dclm-dev from 0.857 to 0.886."""
    removed = _column(batch, "c4_chars_removed")
    kept = pc.utf8_length(pc.fill_null(batch.column("text").cast(pa.string()), "")).to_numpy(
        zero_copy_only=False).astype(np.float64)
    before, after = _column(batch, "c4_lines_before"), _column(batch, "c4_lines_after")
    with np.errstate(invalid="ignore", divide="ignore"):
        char_frac = np.where(kept + removed > 0, removed / (kept + removed), 0.0)
        line_frac = np.where(before > 0, 1.0 - after / before, 0.0)
    char_frac[np.isnan(removed)] = np.nan
    line_frac[np.isnan(before) | np.isnan(after)] = np.nan
    return {"lang_score": _column(batch, "lang_score"), "c4_removed_char_frac": np.clip(char_frac, 0.0, 1.0),
            "c4_removed_line_frac": np.clip(line_frac, 0.0, 1.0)}



@dataclass(frozen=True)
class GroupModel:
    """A logistic regression on standardized features: ``sigmoid(intercept + sum(coef * (x - mean) / scale))``."""

    intercept: float
    coef: np.ndarray
    mean: np.ndarray
    scale: np.ndarray

    def logit(self, x: np.ndarray) -> np.ndarray:
        z = (x - self.mean) / self.scale
        z = np.where(np.isnan(z), 0.0, z)  # an undefined feature counts as the training mean
        return self.intercept + z @ self.coef


class HeuristicModel:
    """The weights of the score per language group (``rules/quality/heuristic.yaml``): a group is fitted on its
    own labelled development documents, or set ``same_as`` another group."""

    def __init__(self, groups: dict[str, GroupModel], meta: dict | None = None):
        missing = set(GROUPS) - set(groups)
        if missing:
            raise ValueError(f"heuristic quality model: no weights for group(s) {', '.join(sorted(missing))}")
        self.groups = groups
        self.meta = meta or {}

    @classmethod
    def from_dict(cls, data: dict) -> "HeuristicModel":
        if list(data.get("features", [])) != list(FEATURES):
            raise ValueError(f"heuristic quality model: features must be {', '.join(FEATURES)}")
        raw = data["groups"]
        groups: dict[str, GroupModel] = {}
        for name, g in raw.items():
            if "same_as" in g:
                continue
            groups[name] = GroupModel(float(g["intercept"]), np.array([g["coef"][f] for f in FEATURES], np.float64),
                                      np.array([g["mean"][f] for f in FEATURES], np.float64),
                                      np.array([g["scale"][f] for f in FEATURES], np.float64))
        for name, g in raw.items():
            if "same_as" in g:
                groups[name] = groups[g["same_as"]]
        return cls(groups, {k: v for k, v in data.items() if k not in ("groups", "features")})

    _default: "HeuristicModel | None" = None

    @classmethod
    def default(cls) -> "HeuristicModel":
        if cls._default is None:
            import yaml

            from dataclean.rulesfolder import rules_dir

            with open(rules_dir() / MODEL_FILE, encoding="utf-8") as fh:
                cls._default = cls.from_dict(yaml.safe_load(fh))
        return cls._default

    def predict(self, x: np.ndarray, group: np.ndarray) -> np.ndarray:
        out = np.zeros(len(x), np.float64)
        for g, code in enumerate(GROUPS):
            rows = group == g
            if rows.any():
                out[rows] = 1.0 / (1.0 + np.exp(-self.groups[code].logit(x[rows])))
        return out


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
        pa.field("q_lines", pa.int64()),
        pa.field("q_mean_line_chars", pa.float64()),
        pa.field("q_short_line_frac", pa.float64()),
        pa.field("q_upper_frac", pa.float64()),
        pa.field("q_digit_frac", pa.float64()),
        pa.field("q_words_per_sentence", pa.float64()),
    ]

    def __init__(self, model: "HeuristicModel | None" = None):
        self._model = model

    @property
    def model(self) -> "HeuristicModel":
        """The weights (``rules/quality/heuristic.yaml`` unless given), read when the first batch is scored."""
        if self._model is None:
            self._model = HeuristicModel.default()
        return self._model

    def score(self, batch: pa.RecordBatch) -> tuple[np.ndarray, dict[str, pa.Array]]:
        sig = self.signals(batch)
        score = self.model.predict(features(sig, context(batch)), sig["group"])
        score[sig["q_words"] == 0] = 0.0  # no word: nothing to train on
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

        n_lines = np.bincount(lparent, minlength=n).astype(np.int64)
        short_frac = _div(np.bincount(lparent, weights=(llen <= SHORT_LINE_CHARS).astype(np.float64), minlength=n),
                          n_lines)

        # -- symbols, against word characters; case, digits and sentences against characters and words -------
        classes = kernels.class_counts(text, CLASS_PATTERNS) if kernels.enabled() else None
        if classes is not None:  # (one pass over the text for the three counts)
            symbols, upper, digits = (classes[:, i].astype(np.float64) for i in range(3))
        else:
            symbols = pc.count_substring_regex(text, SYMBOL).to_numpy(zero_copy_only=False).astype(np.float64)
            upper = pc.count_substring_regex(text, r"\p{Lu}").to_numpy(zero_copy_only=False).astype(np.float64)
            digits = pc.count_substring_regex(text, r"\p{Nd}").to_numpy(zero_copy_only=False).astype(np.float64)
        chars = pc.utf8_length(text).to_numpy(zero_copy_only=False).astype(np.float64)
        sentences = pc.count_substring_regex(text, SENTENCE_MARK).to_numpy(zero_copy_only=False).astype(np.float64)

        return {
            "q_words": count,
            "q_alpha_word_frac": alpha_frac,
            "q_stop_word_frac": stop_frac,
            "q_terminal_line_frac": terminal_frac,
            "q_dup_line_frac": dup_frac,
            "q_symbol_ratio": _div(symbols, symbols + word_chars),
            "q_mean_word_length": mean_len,
            "q_cjk_word_frac": cjk_frac,
            "q_lines": n_lines,
            "q_mean_line_chars": _div(line_chars, n_lines),
            "q_short_line_frac": short_frac,
            "q_upper_frac": _div(upper, chars),
            "q_digit_frac": _div(digits, chars),
            "q_words_per_sentence": count / np.maximum(sentences, 1.0),
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
