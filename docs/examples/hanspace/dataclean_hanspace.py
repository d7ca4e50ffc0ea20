"""An example dataclean plug-in: a filter for spaced-out Chinese (see docs/plugins.md).

Chinese is written without spaces between characters (今天天气很好). Two kinds of text break that:

* text extracted from PDFs, scans and some old web pages, where every character stands apart
  (中 华 人 民 共 和 国), because the extractor saw each glyph as a word;
* text stored word-segmented, as some corpora ship it for search engines (今天 天气 很 好).

Neither is how people write, and a model trained on it learns to put spaces between Han characters. The
signal ``han_spaced_frac`` is, among the places where one Han character follows another (only spaces or tabs
in between), the share that have spaces in between: 0 for ordinary Chinese, 1 for fully spaced-out text, about
0.5 for word-segmented text. Spaces between a Han character and a Latin word or a digit (我在用 Python 写代码)
are not counted: they are ordinary typography. A document with fewer than ``min_han`` Han characters (an
English page quoting a name) is not measured (null): a few characters say nothing about how a text is written.

Install it (``pip install docs/examples/hanspace``) and write ``stage: han_spacing`` in a pipeline, or, without
installing, put this folder on ``PYTHONPATH`` (or run from it) and write ``stage: dataclean_hanspace:HanSpacing``.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

from dataclean.stages import Filter

#: One maximal run of Han characters, and one chain of runs joined only by spaces or tabs (RE2 syntax, as
#: Arrow's regex kernels take it). A chain of k runs has k - 1 spaced gaps.
HAN_RUN = r"\p{Han}+"
SPACED_CHAIN = r"\p{Han}+(?:[ \t]+\p{Han}+)*"


class HanSpacing(Filter):
    """Share of adjacent Han characters that have spaces between them (spaced-out or word-segmented Chinese)."""

    kind = "han_spacing"
    signal = "han_spaced_frac"
    rule = "han_spaced_out"
    reason = "spaces between Han characters"
    compare = "max"  # removed when the share is above the threshold

    def __init__(self, threshold: float | None = 0.5, min_han: int = 10, by_lang: dict | None = None,
                 name: str | None = None):
        if isinstance(min_han, bool) or not isinstance(min_han, int) or min_han < 2:
            raise ValueError(f"han_spacing: min_han must be an integer >= 2, got {min_han!r}")
        self.min_han = min_han
        super().__init__(threshold=threshold, by_lang=by_lang, name=name)

    def compute(self, text: pa.Array) -> pa.Array:
        han = pc.count_substring_regex(text, r"\p{Han}")
        runs = pc.count_substring_regex(text, HAN_RUN)
        chains = pc.count_substring_regex(text, SPACED_CHAIN)
        spaced = pc.subtract(runs, chains)  # gaps of spaces between two Han characters
        adjacent = pc.subtract(han, runs)  # Han characters directly after another one
        pairs = pc.add(spaced, adjacent)
        frac = pc.divide(pc.cast(spaced, pa.float64()), pc.cast(pairs, pa.float64()))
        measured = pc.and_(pc.greater_equal(han, self.min_han), pc.greater(pairs, 0))
        return pc.if_else(measured, frac, pa.scalar(None, pa.float64()))
