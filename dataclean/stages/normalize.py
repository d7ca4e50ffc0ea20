"""Unicode and whitespace normalization.

Runs first so that every later signal, hash and shingle sees one spelling of the same text:

* repairable encoding damage is repaired with ftfy (``fix_encoding``, first, while the evidence is still
  there): text whose UTF-8 bytes were decoded as Windows-1252 / Latin-1 (``cafÃ© â€” naÃ¯ve`` -> ``café — naïve``,
  ``å¤§å®¶`` -> ``大家``, also twice-decoded ``ÃƒÂ©``), as MacRoman (``‚Äô``) or as Windows-1251 (``РџСЂРёРІРµС‚`` ->
  ``Привет``), and C1 control characters that were Windows-1252 punctuation read as Latin-1 (``l\\x92homme``,
  ``\\x93guillemets\\x94`` -> ``l’homme``, ``“guillemets”``; ``\\x806.50`` -> ``€6.50``). Only ftfy's encoding
  fixes run (:func:`ftfy_config`: ``fix_encoding``, ``restore_byte_a0``, ``decode_inconsistent_utf8``,
  ``fix_c1_controls``); no quote uncurling, HTML unescaping, width or ligature folding, line-break or control
  changes, no lossy ``�`` substitution, no normal form (the stage does its own). ftfy runs only on the
  documents that a vectorised RE2 pre-filter (:data:`ENCODING_SUSPECT`: a C1 control, a UTF-8 lead byte read as cp1252
  followed by what continuation bytes read as in cp1252: one after ``Â``–``ß``, two after ``à``–``ô``; ``‚Ä``;
  or two Cyrillic ``Р``/``С`` + cp1251 continuation pairs in a row) selects, and in them only on the lines with
  such a sequence (ftfy fixes line by line anyway); ftfy itself changes text only where its
  badness heuristics see mojibake, so clean text (legitimate ``SÃO PAULO``, Vietnamese, Chinese, emoji) is
  never touched. A line where a C1 control touches CJK (broken multi-byte text, not cp1252 punctuation) is left
  for the ``garbled`` stage. Not repaired: UTF-8 read as GBK (``鍙戦€佹垚鍔``; ftfy only undoes single-byte codecs; the
  ``garbled`` stage finds and removes it). The pre-filter keeps the repair's cost to one RE2 scan for clean
  text, and on the bench it misses no document ftfy would change (measured: docs/measurements.md
  #normalize-encoding-repair);
* Unicode normalization form (NFC by default: canonical composition, which never changes how text reads;
  NFKC would also fold full-width Latin and ligatures, which belongs to dedup shingling, not to the
  training text);
* C0 control characters other than tab and newline, DEL, and zero-width / byte-order marks are removed;
* ``\\r\\n`` and lone ``\\r`` become ``\\n``; no-break and other exotic spaces become a plain space
  (U+3000, the ideographic space, is kept: it is ordinary CJK typography);
* trailing spaces on each line are removed, runs of more than ``max_blank_lines`` blank lines are cut,
  and the document is stripped.

Signals count what changed, per document, so a reviewer can see how much the input needed:
``norm_encoding_fixed`` is 1 when ftfy repaired the document (0 otherwise; the characters it saved show in
``norm_chars_delta``, mojibake being longer than its repair), ``norm_form_changed``, ``norm_controls_removed``,
``norm_spaces_fixed``, ``norm_chars_delta``. A repair never removes a document. A document that is empty after
normalization is removed (rule ``empty``).
"""
from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.stages.base import Check, Decisions, RuleSpec, Stage, StageResult, with_columns
from dataclean.text import kernels
from dataclean.text.chars import CONTROL, ODD_SPACE

# What a byte 0x80-0xBF (a UTF-8 continuation byte) reads as in Windows-1252 / Latin-1 and in Windows-1251.
_CONT_1252 = "".join(sorted({bytes([b]).decode("latin-1") for b in range(0x80, 0xC0)}
                            | {bytes([b]).decode("cp1252", "ignore") for b in range(0x80, 0xA0)}))
_CONT_1251 = "".join(sorted({bytes([b]).decode("cp1251", "ignore") for b in range(0x80, 0xC0)}))


def _re2_class(chars: str) -> str:
    return "[" + "".join(f"\\x{{{ord(c):x}}}" for c in chars) + "]"


#: RE2 pre-filter: the documents ftfy is run on. A C1 control (cp1252 punctuation read as Latin-1); a UTF-8 lead
#: byte read as cp1252 followed by continuation bytes read as cp1252: one after a 2-byte lead (U+00C2-U+00DF,
#: ``Ã©``), two after a longer one (U+00E0-U+00F4, ``â€™``; so that French ``é\xa0:`` and ``à\xa0la`` are not
#: picked); MacRoman ``‚Ä`` (E2 80); two UTF-8 Cyrillic letters read as cp1251 in a row (``Рџ``, ``СЂ``: a lone
#: ``Сі`` is ordinary Ukrainian). One RE2 scan, ~2 ns per byte.
ENCODING_SUSPECT = "|".join([
    r"[\x{80}-\x{9f}]",
    r"[\x{c2}-\x{df}]" + _re2_class(_CONT_1252),
    r"[\x{e0}-\x{f4}]" + _re2_class(_CONT_1252) * 2,
    r"\x{201a}\x{c4}",
    r"(?:[\x{420}\x{421}]" + _re2_class(_CONT_1251) + "){2}",
])

#: :data:`ENCODING_SUSPECT` for Python's ``re``: finds the lines ftfy is run on.
ENCODING_SUSPECT_PY = re.compile("|".join([
    "[\x80-\x9f]", f"[\xc2-\xdf][{re.escape(_CONT_1252)}]", f"[\xe0-\xf4][{re.escape(_CONT_1252)}]{{2}}",
    "\u201a\xc4", f"(?:[\u0420\u0421][{re.escape(_CONT_1251)}]){{2}}"]))

#: A C1 control touching a letter or symbol of a script no single-byte Windows code page writes (CJK, kana,
#: Hangul, Indic, Arabic...): not cp1252 punctuation in Latin text but bytes of broken multi-byte text
#: (``计®\x97表格`` in a LibreOffice zh-CN page), which "repaired" would only look less broken. Such a line is left
#: as it is (ftfy's encoding fix would read its C1 controls as cp1252 too) for the garbled stage to judge.
_FOREIGN = "\u0530-\u1dff\u2e80-\ua63f\ua6a0-\ua71f\uac00-\ud7ff\uf900-\ufaff\ufe30-\ufe4f\uff00-\uffef" \
           "\U00020000-\U0003ffff"
C1_IN_FOREIGN_TEXT = re.compile(f"[{_FOREIGN}][\x80-\x9f]|[\x80-\x9f][{_FOREIGN}]")

_ftfy: dict = {}


def ftfy_config():
    """ftfy's ``TextFixerConfig`` with only the encoding and C1 repairs (imported on first use)."""
    if "config" not in _ftfy:
        import ftfy
        _ftfy["fix"] = ftfy.fix_text
        _ftfy["config"] = ftfy.TextFixerConfig(
            unescape_html=False, remove_terminal_escapes=False, fix_encoding=True, restore_byte_a0=True,
            replace_lossy_sequences=False, decode_inconsistent_utf8=True, fix_c1_controls=True,
            fix_latin_ligatures=False, fix_character_width=False, uncurl_quotes=False, fix_line_breaks=False,
            fix_surrogates=False, remove_control_chars=False, normalization=None, explain=False)
    return _ftfy["config"]


def repair_lines(s: str) -> str:
    """``ftfy.fix_text(s)`` (:func:`ftfy_config`) of the lines of ``s`` that hold an :data:`ENCODING_SUSPECT_PY`
    sequence; the other lines as they are. ftfy fixes each line (with its ``\\n``) on its own, so this is what
    ftfy gives for those lines, without its per-line cost on the clean ones (a 45k-character page with one
    suspect pair: 25 ms for the whole text). A line where a C1 control touches CJK or another script no
    single-byte code page writes (:data:`C1_IN_FOREIGN_TEXT`) is left as it is."""
    config = ftfy_config()
    fix = _ftfy["fix"]
    out, pos = [], 0
    for m in ENCODING_SUSPECT_PY.finditer(s):
        if m.start() < pos:
            continue  # (in the line just fixed)
        start = s.rfind("\n", 0, m.start()) + 1
        end = s.find("\n", m.end()) + 1 or len(s)
        line = s[start:end]
        out.append(s[pos:start])
        out.append(line if C1_IN_FOREIGN_TEXT.search(line) else fix(line, config))
        pos = end
    out.append(s[pos:])
    return "".join(out)


def repair_encoding(text: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """``text`` with mojibake and cp1252 C1 punctuation repaired by ftfy (:func:`ftfy_config`), and 1 per document
    that changed (int64). ftfy runs only on the documents :data:`ENCODING_SUSPECT` matches, and in them on the
    lines with a suspect sequence (:func:`repair_lines`)."""
    n = len(text)
    fixed = np.zeros(n, np.int64)
    suspect = pc.fill_null(pc.match_substring_regex(text, ENCODING_SUSPECT), False)
    idx = np.flatnonzero(suspect.to_numpy(zero_copy_only=False))
    if not len(idx):
        return text, fixed
    repaired = {}
    for i, s in zip(idx.tolist(), text.take(pa.array(idx)).to_pylist()):
        r = repair_lines(s)
        if r != s:
            repaired[i] = r
    if not repaired:
        return text, fixed
    rows = np.fromiter(repaired, np.int64, len(repaired))
    fixed[rows] = 1
    mask = np.zeros(n, bool)
    mask[rows] = True
    return pc.replace_with_mask(text, pa.array(mask), pa.array(list(repaired.values()), text.type)), fixed


class Normalize(Stage):
    kind = "normalize"
    rewrites_text = True
    signal_fields = [
        pa.field("norm_encoding_fixed", pa.int64()),
        pa.field("norm_form_changed", pa.bool_()),
        pa.field("norm_controls_removed", pa.int64()),
        pa.field("norm_spaces_fixed", pa.int64()),
        pa.field("norm_chars_delta", pa.int64()),
    ]
    #: Signal columns that count rewrites: summed per source by the stats (``stats/rewrites.parquet``).
    rewrite_columns = ("norm_encoding_fixed", "norm_controls_removed", "norm_spaces_fixed")

    rule_specs = [RuleSpec("empty", "n_chars", (), "flag", "nothing left after normalization")]

    def __init__(self, form: str = "NFC", remove_controls: bool = True, fix_spaces: bool = True,
                 max_blank_lines: int = 2, fix_encoding: bool = True, name: str | None = None):
        super().__init__(name)
        if form not in ("NFC", "NFKC", "NFD", "NFKD", "none"):
            raise ValueError(f"normalize.form must be NFC, NFKC, NFD, NFKD or none, not {form!r}")
        if not 0 <= max_blank_lines <= 998:  # (RE2 repeats at most 1000 times: \n{max_blank_lines+2,})
            raise ValueError("normalize.max_blank_lines must be between 0 and 998")
        self.form, self.remove_controls, self.fix_spaces = form, remove_controls, fix_spaces
        self.max_blank_lines = max_blank_lines
        self.fix_encoding = fix_encoding

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        text = batch.column("text")
        n = len(text)
        before_len = pc.utf8_length(text)
        encoding_fixed = np.zeros(n, np.int64)
        if self.fix_encoding:  # first: remove_controls and NFC would blur the evidence (both paths start here)
            text, encoding_fixed = repair_encoding(text)
        done = None
        if kernels.enabled() and pa.types.is_string(text.type) and not text.null_count:
            done = kernels.normalize(text, self.form, self.remove_controls, self.fix_spaces, self.max_blank_lines)
        if done is not None:  # one compiled pass; Arrow's normal form only where a character may change
            text, changed, controls, spaces = done
            form_changed, controls, spaces = pa.array(changed), pa.array(controls), pa.array(spaces)
        else:
            text, form_changed, controls, spaces = self._chain(text)
        after_len = pc.utf8_length(text)
        out = with_columns(batch, {
            "text": text,
            "norm_encoding_fixed": pa.array(encoding_fixed, pa.int64()),
            "norm_form_changed": form_changed,
            "norm_controls_removed": pc.cast(controls, pa.int64()),
            "norm_spaces_fixed": pc.cast(spaces, pa.int64()),
            "norm_chars_delta": pc.cast(pc.subtract(before_len, after_len), pa.int64()),
        })
        empty = pc.equal(after_len, 0)
        decisions = Decisions.from_checks(n, [Check("empty", "empty_text", empty, value=0.0, threshold=0.0,
                                                    detail=None)])
        return StageResult(out, decisions)

    def _chain(self, text: pa.Array) -> tuple[pa.Array, pa.Array, pa.Array, pa.Array]:
        """(text, form changed, controls removed, odd spaces and carriage returns) by Arrow's kernels, one
        pass each; ``kernels.normalize`` computes the same in one compiled pass."""
        n = len(text)
        if self.form != "none":
            normalized = pc.utf8_normalize(text, self.form)
            form_changed = pc.not_equal(normalized, text)
            text = normalized
        else:
            form_changed = pa.array([False] * n)
        if self.remove_controls:
            controls = pc.count_substring_regex(text, CONTROL)
            text = pc.replace_substring_regex(text, CONTROL, "")
        else:
            controls = pa.array([0] * n, pa.int32())
        spaces = pa.array([0] * n, pa.int64())
        if self.fix_spaces:
            spaces = pc.add(pc.count_substring_regex(text, ODD_SPACE), pc.count_substring_regex(text, r"\r"))
            text = pc.replace_substring_regex(text, r"\r\n?", "\n")
            text = pc.replace_substring_regex(text, ODD_SPACE, " ")
            text = pc.replace_substring_regex(text, r"[ \t]+\n", "\n")
            keep = "\n" * (self.max_blank_lines + 1)
            text = pc.replace_substring_regex(text, "\n{%d,}" % (self.max_blank_lines + 2), keep)
            text = pc.utf8_trim_whitespace(text)
        return text, form_changed, controls, spaces
