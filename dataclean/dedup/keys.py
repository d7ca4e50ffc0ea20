"""The keys documents are grouped by: exact dedup's content key and hash, and the 64-bit keys the global step's
shuffle partitions rows by (:mod:`dataclean.exec.shuffle`). In the dedup layer, under the stages and the
executor, so that both read them from one place."""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from dataclean.dedup import minhash
from dataclean.text.kernels import fixed_binary_values, string_buffers
from dataclean.text.script_fold import fold_scripts


def content_key_text(text: pa.Array, fold: str = "off") -> pa.Array:
    """The text exact dedup compares: lower case, runs of whitespace (RE2 ``\\s``: space, tab, newlines,
    form feed) collapsed to one space, Unicode whitespace trimmed from both ends; then folded by
    :func:`dataclean.text.script_fold.fold_scripts` with ``fold`` (``"phrases"``, ``"characters"`` or
    ``"off"``). With numba, one compiled pass over the bytes gives the same text
    (``dataclean.dedup._minhash_numba.map_text``, which folds on the way)."""
    if isinstance(text, pa.ChunkedArray):
        text = text.combine_chunks() if text.num_chunks else pa.array([], pa.string())
    if minhash.kernels_enabled():
        key = minhash.map_text_kernel(text, minhash.content_key_mode(), fold=fold)
        if key is not None:
            return key
    key = pc.utf8_lower(text)
    key = pc.replace_substring_regex(key, r"\s+", " ")
    return fold_scripts(pc.utf8_trim_whitespace(key), fold)


def content_hash(text: pa.Array, fold: str = "off") -> pa.Array:
    """128-bit xxh3 of :func:`content_key_text` (folded as ``fold`` says), as ``fixed_size_binary(16)``."""
    raw = content_key_text(text, fold).cast(pa.binary()).to_pylist()
    digest = xxhash.xxh3_128_digest
    return pa.array([digest(b) for b in raw], pa.binary(16))


def xxh3_64_of(strings: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """``xxhash.xxh3_64_intdigest`` of each value of a string array without nulls (uint64): with the compiled
    MinHash kernels, their xxh3_64 over the Arrow buffer (~8 ms less per 21,500 ids than a Python loop)."""
    if isinstance(strings, pa.ChunkedArray):
        strings = strings.combine_chunks()
    if minhash.kernels_enabled() and (pa.types.is_string(strings.type) or pa.types.is_large_string(strings.type)) \
            and not strings.null_count:
        offsets, data = string_buffers(strings)
        return minhash.mh_kernels().xxh3_64_many(data, offsets, minhash.SECRET_U8)
    return minhash.hash_distinct(strings.cast(pa.binary()).to_pylist())


def fixed_binary_key(column: pa.Array) -> np.ndarray:
    """The first 8 bytes (little-endian uint64) of each value of a ``fixed_size_binary(>=8)`` column."""
    return fixed_binary_values(column, np.uint8)[:, :8].copy().view("<u8").reshape(-1).astype(np.uint64)
