"""Unicode and whitespace normalization.

Runs first so that every later signal, hash and shingle sees one spelling of the same text:

* Unicode normalization form (NFC by default: canonical composition, which never changes how text reads;
  NFKC would also fold full-width Latin and ligatures, which belongs to dedup shingling, not to the
  training text);
* C0 control characters other than tab and newline, DEL, and zero-width / byte-order marks are removed;
* ``\\r\\n`` and lone ``\\r`` become ``\\n``; no-break and other exotic spaces become a plain space
  (U+3000, the ideographic space, is kept: it is ordinary CJK typography);
* trailing spaces on each line are removed, runs of more than ``max_blank_lines`` blank lines are cut,
  and the document is stripped.

Signals count what changed, per document, so a reviewer can see how much the input needed. A document
that is empty after normalization is removed (rule ``empty``).
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from dataclean.stages.base import Check, Decisions, RuleSpec, Stage, StageResult, with_columns
from dataclean.text import kernels

CONTROL = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x{200b}\x{200c}\x{200d}\x{2060}\x{feff}]"
ODD_SPACE = r"[\x{00a0}\x{1680}\x{2000}-\x{200a}\x{202f}\x{205f}]"


class Normalize(Stage):
    kind = "normalize"
    rewrites_text = True
    signal_fields = [
        pa.field("norm_form_changed", pa.bool_()),
        pa.field("norm_controls_removed", pa.int64()),
        pa.field("norm_spaces_fixed", pa.int64()),
        pa.field("norm_chars_delta", pa.int64()),
    ]

    rule_specs = [RuleSpec("empty", "n_chars", (), "flag", "nothing left after normalization")]

    def __init__(self, form: str = "NFC", remove_controls: bool = True, fix_spaces: bool = True,
                 max_blank_lines: int = 2, name: str | None = None):
        super().__init__(name)
        if form not in ("NFC", "NFKC", "NFD", "NFKD", "none"):
            raise ValueError(f"normalize.form must be NFC, NFKC, NFD, NFKD or none, not {form!r}")
        if not 0 <= max_blank_lines <= 998:  # (RE2 repeats at most 1000 times: \n{max_blank_lines+2,})
            raise ValueError("normalize.max_blank_lines must be between 0 and 998")
        self.form, self.remove_controls, self.fix_spaces = form, remove_controls, fix_spaces
        self.max_blank_lines = max_blank_lines

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        text = batch.column("text")
        n = len(text)
        before_len = pc.utf8_length(text)
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
