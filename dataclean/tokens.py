"""Token-count estimate used in stats when no tokenizer is configured.

One documented function, vectorised with Arrow's RE2 kernels. It counts CJK characters (Han, kana, Hangul)
and the UTF-8 bytes of everything else, and assumes

* about 4 UTF-8 bytes per token for Latin-script text and code (the usual rule of thumb for BPE
  vocabularies of 50k–150k entries trained mostly on English),
* about 1.5 CJK characters per token (Chinese-aware BPE vocabularies merge frequent character pairs;
  English-centric ones spend about one token per character or more).

It is an estimate for funnels and budgets, not a replacement for a real tokenizer.
"""
from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

CJK_PATTERN = r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]"
BYTES_PER_TOKEN = 4.0
CJK_CHARS_PER_TOKEN = 1.5


def count_cjk(text: pa.Array) -> pa.Array:
    """Number of Han, kana and Hangul characters per document (int64)."""
    return pc.cast(pc.count_substring_regex(text, CJK_PATTERN), pa.int64())


def estimate_tokens(text: pa.Array) -> pa.Array:
    """Estimated token count per document (int64, rounded up; 0 for empty text)."""
    cjk = pc.cast(count_cjk(text), pa.float64())
    nbytes = pc.cast(pc.binary_length(text), pa.float64())
    other = pc.subtract(nbytes, pc.multiply(cjk, 3.0))  # a CJK character is 3 UTF-8 bytes
    est = pc.add(pc.divide(other, BYTES_PER_TOKEN), pc.divide(cjk, CJK_CHARS_PER_TOKEN))
    return pc.cast(pc.ceil(est), pa.int64())


def count_chars(text: pa.Array) -> pa.Array:
    return pc.cast(pc.utf8_length(text), pa.int64())
