"""The one word tokenizer every rule uses.

A *word* is

* one Han character (CJK Unified Ideographs, extensions, compatibility ideographs, 〇), because Chinese
  has no spaces and a character is the smallest unit that carries meaning in statistics such as
  "word count", "mean word length" or n-grams;
* one run of Hiragana or one run of Katakana (including the prolonged sound mark ー and half-width
  Katakana), so Japanese kana words are not cut into syllables;
* otherwise a maximal run of letters, digits and combining marks (Unicode categories L, N, M): Latin,
  Cyrillic, Greek, Hangul (Korean separates words with spaces, so a run of syllable blocks is a word),
  Arabic, Indic scripts…; an apostrophe between two such characters joins them (``don't``, ``l’homme``).

Punctuation, symbols, emoji and whitespace are never words. Numbers are words (``2024``, ``3.5`` is
``3`` and ``5``).

The implementation is vectorised: Arrow's RE2 kernels put spaces around every Han character and kana
run, split on everything that is not a word character, and trim stray apostrophes; the result is a list
array of words per document. When numba is installed, :func:`dataclean.text.kernels.words` does the same
in one pass over the UTF-8 bytes (same words, tested; ``DATACLEAN_KERNELS=0`` turns it off).
:func:`split_words` is the same function on one string.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.text import kernels
from dataclean.text.chars import HAN, HIRAGANA, KATAKANA

ISOLATE = rf"([{HAN}]|[{HIRAGANA}]+|[{KATAKANA}]+)"
SEPARATOR = r"[^\pL\pN\pM'’]+"
APOSTROPHES = "'’"


def words_batch(texts: pa.Array | pa.ChunkedArray) -> pa.ListArray:
    """Words of each document, as ``list<string>`` (one list per input row; null text gives [])."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    texts = texts.cast(pa.string())
    if texts.null_count:
        texts = pc.fill_null(texts, "")
    if kernels.enabled():
        words = kernels.words(texts)
        if words is not None:
            return words
    return _words_regex(texts)


def _words_regex(texts: pa.Array) -> pa.ListArray:
    """:func:`words_batch` with Arrow's RE2 kernels (``texts``: a ``string`` array without nulls)."""
    spaced = pc.replace_substring_regex(texts, ISOLATE, r" \1 ")
    parts = pc.split_pattern_regex(spaced, SEPARATOR)
    flat = pc.list_flatten(parts)
    parent = pc.list_parent_indices(parts).to_numpy()
    trimmed = pc.utf8_trim(flat, APOSTROPHES)
    # split leaves "" at the edges, and a token made only of apostrophes trims to ""
    keep = pc.greater(pc.utf8_length(trimmed), 0).to_numpy(zero_copy_only=False)
    counts = np.bincount(parent[keep], minlength=len(texts)) if len(parent) else np.zeros(len(texts), np.int64)
    offsets = np.zeros(len(texts) + 1, dtype=np.int32)
    np.cumsum(counts, out=offsets[1:])
    return pa.ListArray.from_arrays(pa.array(offsets), trimmed.filter(pa.array(keep)))


#: A batch column that carries each row's words from one stage to the next, so a pipeline tokenizes once.
#: The pipeline drops it after any stage that rewrites the text; it is never written out.
WORDS_COLUMN = "_words"


def batch_words(batch: pa.RecordBatch) -> pa.ListArray:
    """The words of ``batch``'s text: the cached :data:`WORDS_COLUMN` when an earlier stage left it, else
    :func:`words_batch` of the ``text`` column. A stage that calls this should hand the words on with
    ``with_columns(out, {WORDS_COLUMN: words})``."""
    idx = batch.schema.get_field_index(WORDS_COLUMN)
    if idx >= 0:
        return batch.column(idx)
    return words_batch(batch.column("text"))


def split_words(text: str) -> list[str]:
    """Words of one string (same rules as :func:`words_batch`)."""
    return words_batch(pa.array([text], pa.string()))[0].as_py()


def lines_batch(texts: pa.Array | pa.ChunkedArray) -> pa.ListArray:
    """Lines of each document (split on ``\\n``; text is normalized first, so no ``\\r`` remains)."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    return pc.split_pattern(pc.fill_null(texts.cast(pa.string()), ""), "\n")
