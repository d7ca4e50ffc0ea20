"""Script folding for matching: traditional Chinese characters to simplified, one character at a time.

Dedup and decontamination compare texts, and the simplified and traditional versions of one text are the
same text for both (``這個資料庫`` and ``这个资料库``). Folding maps each traditional character to its simplified
form; it is not a conversion a reader would accept (no phrase tables: ``軟體`` becomes ``软体``, not ``软件``),
only a key under which the two versions meet.

The table comes from OpenCC (``pip install opencc``, Apache-2.0), the converter the Chinese NLP world
uses: its ``t2s`` conversion of every CJK unified ideograph (U+3400–U+4DBF, U+4E00–U+9FFF, the
compatibility block and the supplementary-plane extensions) taken one character at a time, 5,118
characters with a different simplified form. It is built on first use (~50 ms) and cached per process.

:func:`fold_t2s` maps a whole Arrow string array with a numba kernel over its UTF-8 buffers (characters
keep or change their byte length: 1,260 traditional characters of the BMP fold to supplementary-plane
simplified ones), or with ``str.translate`` when numba is off.
"""
from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.text import kernels as _text_kernels

_RANGES = ((0x3400, 0x4DC0), (0x4E00, 0xA000), (0xF900, 0xFB00), (0x20000, 0x2A6E0), (0x2A700, 0x2EBF0),
           (0x2F800, 0x2FA20))
TABLE_SIZE = 0x30000


class FoldUnavailable(RuntimeError):
    """OpenCC is not installed."""


@functools.lru_cache(maxsize=1)
def t2s_pairs() -> tuple[tuple[int, int], ...]:
    """(traditional code point, simplified code point) for every character OpenCC's t2s changes."""
    try:
        import opencc
    except ImportError as exc:  # pragma: no cover - a dependency
        raise FoldUnavailable("script folding needs OpenCC: pip install opencc") from exc
    chars = [chr(c) for a, b in _RANGES for c in range(a, b)]
    out = opencc.OpenCC("t2s").convert("\n".join(chars)).split("\n")
    if len(out) != len(chars):  # pragma: no cover - OpenCC converted a newline
        raise FoldUnavailable("OpenCC's t2s did not convert one character per line")
    return tuple((ord(a), ord(b)) for a, b in zip(chars, out) if a != b and len(b) == 1)


@functools.lru_cache(maxsize=1)
def t2s_table() -> np.ndarray:
    """int32 code point -> folded code point, for code points below ``TABLE_SIZE`` (others are unchanged)."""
    table = np.arange(TABLE_SIZE, dtype=np.int32)
    for a, b in t2s_pairs():
        table[a] = b
    return table


@functools.lru_cache(maxsize=1)
def _translate_map() -> dict[int, int]:
    return dict(t2s_pairs())


def fold_t2s_str(text: str) -> str:
    """One string, folded (the reference for :func:`fold_t2s`)."""
    return text.translate(_translate_map())


def _kernel():
    def load():
        from dataclean.text import _fold_numba as k
        k.fold(np.zeros(2, np.int64), np.zeros(0, np.uint8), t2s_table())
        return k
    return _text_kernels.load_compiled(load, "compiled script folding", "str.translate")


_kernel = functools.lru_cache(maxsize=1)(_kernel)


def fold_t2s(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Every string of ``texts`` folded to simplified characters (nulls stay null)."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks else pa.array([], pa.string())
    texts = texts.cast(pa.string())
    # only strings with a character in the CJK ranges can change
    has_han = pc.match_substring_regex(texts, r"[\x{3400}-\x{9FFF}\x{F900}-\x{FAFF}\x{20000}-\x{2FA1F}]")
    if not pc.any(has_han).as_py():
        return texts
    k = _kernel() if _text_kernels.enabled() else None
    if k is not None and texts.null_count == 0:
        offsets, data = _text_kernels._string_buffers(texts)
        out_offsets, out = k.fold(offsets, data, t2s_table())
        if out_offsets[-1] >= 2 ** 31:  # (more than 2 GiB of text: 64-bit offsets)
            return pa.LargeStringArray.from_buffers(len(texts), pa.py_buffer(out_offsets), pa.py_buffer(out))
        return pa.StringArray.from_buffers(len(texts), pa.py_buffer(out_offsets.astype(np.int32)), pa.py_buffer(out))
    m = _translate_map()
    return pa.array([None if t is None else t.translate(m) for t in texts.to_pylist()], pa.string())
