"""Character classes as RE2 patterns (Arrow's regex engine writes code points as ``\\x{...}``). The bottom of the
text layer: the tokenizer, the normalize stage and the kernels' per-code-point tables all read their classes from
here, so a class is defined once and a table built from it is rebuilt when it changes."""
from __future__ import annotations

import numpy as np

#: Han ideographs: CJK Unified Ideographs with extensions A-F, compatibility ideographs, and 〇 (U+3007).
HAN = r"\x{3007}\x{3400}-\x{4dbf}\x{4e00}-\x{9fff}\x{f900}-\x{faff}\x{20000}-\x{2fa1f}"
HIRAGANA = r"\x{3041}-\x{309f}"
KATAKANA = r"\x{30a0}-\x{30ff}\x{31f0}-\x{31ff}\x{ff66}-\x{ff9f}"

#: What the normalize stage removes: C0 controls except \t \n \r, DEL, zero-width characters, BOM.
CONTROL = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x{200b}\x{200c}\x{200d}\x{2060}\x{feff}]"
#: What it turns into a plain space: no-break, ogham, the en/em/thin... spaces, narrow no-break, math space.
ODD_SPACE = r"[\x{00a0}\x{1680}\x{2000}-\x{200a}\x{202f}\x{205f}]"


def code_point_class(codepoints, flavor: str = "re2") -> str:
    """A character class of ``codepoints`` (any order, repeats allowed), runs written as ranges, for RE2
    (``\\x{..}``) or Python's ``re`` (``flavor="py"``: ``\\U........``). No code points: a class matching none."""
    cps = np.unique(np.asarray(codepoints if isinstance(codepoints, np.ndarray) else list(codepoints), np.int64))
    fmt = "\\x{{{:x}}}" if flavor == "re2" else "\\U{:08x}"
    if not len(cps):
        return f"[^{fmt.format(0)}-{fmt.format(0x10FFFF)}]"
    cut = np.flatnonzero(np.diff(cps) != 1) + 1
    lows = cps[np.concatenate(([0], cut))].tolist()
    highs = cps[np.concatenate((cut - 1, [len(cps) - 1]))].tolist()
    return "[" + "".join(fmt.format(lo) if lo == hi else f"{fmt.format(lo)}-{fmt.format(hi)}"
                         for lo, hi in zip(lows, highs)) + "]"
