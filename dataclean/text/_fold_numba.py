"""numba kernel of :mod:`dataclean.text.script_fold`: map every code point of UTF-8 strings through a table."""
from __future__ import annotations

import numpy as np
from numba import njit

from dataclean.text._kernels_numba import _decode


@njit(cache=True, nogil=True)
def _width(cp):
    if cp < 0x80:
        return 1
    if cp < 0x800:
        return 2
    if cp < 0x10000:
        return 3
    return 4


@njit(cache=True, nogil=True)
def fold(offsets, data, table):
    """(int64 offsets, uint8 data) of the strings with each code point c < len(table) replaced by table[c].
    Bytes that are not valid UTF-8 are copied unchanged (Arrow strings are valid UTF-8)."""
    n = len(offsets) - 1
    size = len(table)
    out_offsets = np.zeros(n + 1, np.int64)
    total = 0
    for d in range(n):  # pass 1: lengths
        i, end = offsets[d], offsets[d + 1]
        while i < end:
            cp, w = _decode(data, i, end)
            if w == 0:
                total += 1
                i += 1
                continue
            if cp < size:
                cp = table[cp]
            total += _width(cp)
            i += w
        out_offsets[d + 1] = total
    out = np.empty(total, np.uint8)
    o = 0
    for d in range(n):  # pass 2: bytes
        i, end = offsets[d], offsets[d + 1]
        while i < end:
            cp, w = _decode(data, i, end)
            if w == 0:
                out[o] = data[i]
                o += 1
                i += 1
                continue
            if cp < size:
                cp = table[cp]
            if cp < 0x80:
                out[o] = cp
                o += 1
            elif cp < 0x800:
                out[o] = 0xC0 | (cp >> 6)
                out[o + 1] = 0x80 | (cp & 0x3F)
                o += 2
            elif cp < 0x10000:
                out[o] = 0xE0 | (cp >> 12)
                out[o + 1] = 0x80 | ((cp >> 6) & 0x3F)
                out[o + 2] = 0x80 | (cp & 0x3F)
                o += 3
            else:
                out[o] = 0xF0 | (cp >> 18)
                out[o + 1] = 0x80 | ((cp >> 12) & 0x3F)
                out[o + 2] = 0x80 | ((cp >> 6) & 0x3F)
                out[o + 3] = 0x80 | (cp & 0x3F)
                o += 4
            i += w
    return out_offsets, out
