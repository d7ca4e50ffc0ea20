"""Embeddings as an Arrow column: one ``fixed_size_binary(2 * dim)`` value per document.

A value holds the document's L2-normalised embedding as ``dim`` little-endian float16 numbers (half the
bytes of float32; cosine similarities computed from it differ from float32's by less than 1e-3). A null
value is a document with no embedding (empty text, or a kind the stage skips).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa

COLUMN = "embedding"


def embedding_type(dim: int) -> pa.DataType:
    return pa.binary(2 * int(dim))


def encode(vectors: np.ndarray, valid: np.ndarray | None = None) -> pa.Array:
    """``(n, dim)`` float vectors -> the column; rows are L2-normalised first (a zero row stays zero).
    ``valid`` (bool, n) marks the rows that have an embedding; the others are null."""
    v = np.asarray(vectors, dtype=np.float32)
    if v.ndim != 2:
        raise ValueError(f"embeddings must be a 2-d array, not shape {v.shape}")
    n, dim = v.shape
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    v = np.divide(v, norms, out=np.zeros_like(v), where=norms > 0)
    data = pa.py_buffer(np.ascontiguousarray(v.astype("<f2")).tobytes())
    mask = None
    if valid is not None:
        valid = np.asarray(valid, dtype=bool)
        if not valid.all():
            mask = pa.array(valid).buffers()[1]
    return pa.Array.from_buffers(embedding_type(dim), n, [mask, data])


def decode(column: pa.Array | pa.ChunkedArray, dim: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The column -> ``(float32 (n, dim) matrix, bool validity (n,))``; null rows are zero vectors."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks() if column.num_chunks != 1 else column.chunk(0)
    typ = column.type
    if not pa.types.is_fixed_size_binary(typ) or typ.byte_width % 2:
        raise ValueError(f"an embedding column is fixed_size_binary(2 * dim), not {typ}")
    width = typ.byte_width // 2
    if dim is not None and int(dim) != width:
        raise ValueError(f"embedding width {width} does not match the expected {dim}")
    n = len(column)
    valid = np.ones(n, dtype=bool) if column.null_count == 0 else \
        np.asarray(column.is_valid().to_numpy(zero_copy_only=False), dtype=bool)
    buf = column.buffers()[1]
    raw = np.frombuffer(buf, dtype="<f2", count=(column.offset + n) * width)[column.offset * width:]
    out = raw.reshape(n, width).astype(np.float32)
    if not valid.all():
        out[~valid] = 0.0
    return out, valid
