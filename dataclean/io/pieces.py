"""Cut one large JSON Lines file into pieces that several workers read: byte ranges at line boundaries.

A piece must read exactly the chunks a read of the whole file gives (so every stage sees the same batches and
the ledger rows come in the same order), and its lines must keep their numbers in the whole file (``origin_row``
and the ids derived from it). :func:`jsonl_pieces` therefore scans the file once, in NumPy, and replays the
reader's chunk rule on it: a chunk ends after the record that brings it to ``input.batch_rows`` records or to
:data:`~dataclean.io.readers.MAX_CHUNK_TEXT_BYTES` bytes of record lines (each counted without its ``\\n`` or
``\\r\\n``). A record is a line with a byte other than ASCII whitespace, or a line longer than the record cap
(an oversized blank line is a bad record). Pieces are runs of whole chunks of about the target size, each given
as ``(start byte, end byte, number of its first line)``.

Only uncompressed JSON Lines on a local disk is cut: a gzip member or a zstd stream must be decompressed from
its start, and a ``.json`` name may hold one JSON array (see ``docs/scaling.md``).
"""
from __future__ import annotations

import os

import numpy as np

#: Bytes scanned at a time.
SCAN_BYTES = 8 << 20
_WS = np.zeros(256, bool)
_WS[[9, 10, 11, 12, 13, 32]] = True  # bytes.isspace()
_NL, _CR = 10, 13


def _lines(fh):
    """Per block of whole lines: ``(full lengths, lengths without line end, is a record-candidate)`` arrays.

    A line that starts with a non-space byte has text; one that starts with a space is looked at whole (rare:
    a blank line, or an indented record). A line longer than a block is carried as a length and a flag."""
    carry_len, carry_text, carry_tail = 0, False, b""
    while True:
        data = fh.read(SCAN_BYTES)
        if not data:
            break
        arr = np.frombuffer(data, np.uint8)
        nl = np.flatnonzero(arr == _NL)
        if not len(nl):
            carry_text = carry_text or bool((~_WS[arr]).any())
            carry_len += len(arr)
            carry_tail = (carry_tail + data[-2:])[-2:]
            continue
        ends = nl + 1
        starts = np.empty_like(ends)
        starts[0] = 0
        starts[1:] = ends[:-1]
        full = ends - starts
        full[0] += carry_len
        cr = np.zeros(len(nl), bool)  # the byte before each \n is \r
        inner = nl > 0
        cr[inner] = arr[nl[inner] - 1] == _CR
        if nl[0] == 0 and carry_tail[-1:] == b"\r":
            cr[0] = True
        size = full - 1 - cr
        text = ~_WS[arr[starts]]  # a first byte that is not a space: a record
        if carry_len:
            text[0] = carry_text or bool(text[0])
        for i in np.flatnonzero(~text):  # look at the rest of a line that starts with a space
            lo = int(starts[i])
            text[i] = bool((~_WS[arr[lo:int(ends[i])]]).any())
        yield full, size, text
        rest = data[int(ends[-1]):]
        carry_len, carry_tail = len(rest), rest[-2:]
        carry_text = bool(rest) and bool((~_WS[np.frombuffer(rest, np.uint8)]).any())
    if carry_len:  # a last line without \n
        yield (np.array([carry_len], np.int64), np.array([carry_len], np.int64), np.array([carry_text]))


def chunk_ends(fh, batch_rows: int, max_chunk_bytes: int, cap: int) -> tuple[list[tuple[int, int]], int]:
    """The ends of the reader's chunks in the stream ``fh`` (binary, at its start): ``[(byte offset after the
    chunk's last line, number of the next line), ...]``, and the stream's length."""
    out: list[tuple[int, int]] = []
    n = nbytes = 0  # records and record bytes of the chunk being filled
    pos = line0 = 0  # offset and number of the block's first line
    for full, size, text in _lines(fh):
        rec = np.flatnonzero(text | (size > cap))
        ends = pos + np.cumsum(full)
        if len(rec):
            cum = np.cumsum(size[rec])
            i = 0
            while i < len(rec):
                base = int(cum[i - 1]) if i else 0
                j_rows = i + batch_rows - n - 1
                j_bytes = int(np.searchsorted(cum, max_chunk_bytes - nbytes + base, side="left"))
                j = min(j_rows, j_bytes)
                if j >= len(rec):
                    n += len(rec) - i
                    nbytes += int(cum[-1]) - base
                    break
                line = int(rec[j])
                out.append((int(ends[line]), line0 + line + 1))
                n = nbytes = 0
                i = j + 1
        pos = int(ends[-1])
        line0 += len(full)
    return out, pos


def jsonl_pieces(path: str, target_bytes: int, batch_rows: int, max_chunk_bytes: int,
                 cap: int) -> list[tuple[int, int, int]] | None:
    """Cut the local JSON Lines file ``path`` into pieces of about ``target_bytes`` bytes of whole chunks
    (see the module docstring): ``[(start, end, first line number), ...]`` in order; a last piece under half
    the target joins the one before. None when it is one piece (smaller than the target, or unreadable:
    reading it then says why). Depends on the file's bytes and the config alone, never on the worker count."""
    try:
        if target_bytes <= 0 or os.path.getsize(path) < target_bytes * 3 // 2:
            return None
        with open(path, "rb") as fh:
            ends, size = chunk_ends(fh, batch_rows, max_chunk_bytes, cap)
    except OSError:
        return None
    pieces: list[tuple[int, int, int]] = []
    start = line = 0
    for end, next_line in ends:
        if end - start >= target_bytes and end < size:
            pieces.append((start, end, line))
            start, line = end, next_line
    if not pieces:
        return None
    if size - start < target_bytes // 2:
        last = pieces.pop()
        start, line = last[0], last[2]
    pieces.append((start, size, line))
    return pieces if len(pieces) > 1 else None
