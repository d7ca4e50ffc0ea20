"""Streams for the readers: a raw stream served from a generator of byte blocks (the decompressors of the
readers are generators), and the lines of a stream with a cap on the bytes a line may hold."""
from __future__ import annotations

import io
from typing import Iterator


class BlockStream(io.RawIOBase):
    """``readinto`` from the blocks of :meth:`_blocks_of` (a subclass's generator over :meth:`_reads`, the
    bytes of ``fh`` after ``head``: bytes already read from it, to tell its format); ``tell()`` is the position
    in the served bytes. Closing closes ``fh``."""

    def __init__(self, fh, block: int = 1 << 18, head: bytes = b""):
        self._fh, self._block, self._head = fh, block, head
        self._blocks = self._blocks_of()
        self._buf = memoryview(b"")
        self._pos = 0

    def _reads(self):
        """The input's bytes, in blocks: ``head`` first, then ``fh`` read ``block`` bytes at a time."""
        if self._head:
            yield self._head
        while data := self._fh.read(self._block):
            yield data

    def _blocks_of(self):  # pragma: no cover - interface
        raise NotImplementedError

    def readable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def readinto(self, b) -> int:
        while not self._buf:
            out = next(self._blocks, None)
            if out is None:
                return 0
            self._buf = memoryview(out)
        n = min(len(b), len(self._buf))
        b[:n] = self._buf[:n]
        self._buf = self._buf[n:]
        self._pos += n
        return n

    def close(self) -> None:
        if not self.closed:
            self._fh.close()
        super().close()


#: Bytes read at a time while the rest of a line longer than the cap is skipped.
SKIP_BLOCK = 1 << 20


def capped_lines(fh, cap: int, keep: int) -> Iterator[tuple[bytes, int | None]]:
    """The lines of the binary stream ``fh`` (a buffered reader: ``readline(limit)``), with their line ends, as
    ``(line, None)``; except a line longer than ``cap`` bytes (not counting its ``\\n`` or ``\\r\\n``), which is
    never held whole: once ``fh`` is read past its end (or to the end of the stream) it comes as ``(its first
    keep bytes, its length)``. At most ``cap + 2`` bytes of a line are held at once; what is skipped is read
    ``SKIP_BLOCK`` bytes at a time (a decompressing ``fh`` inflates no more than it is asked for)."""
    limit = cap + 2
    while True:
        line = fh.readline(limit)
        if not line:
            return
        if len(line) <= cap:
            yield line, None
            continue
        if line.endswith(b"\n") or len(line) < limit:  # the whole line, at most cap + 2 bytes
            size = without_line_end(line)
            yield (line, None) if size <= cap else (line[:keep], size)
            continue
        prefix, total, tail = line[:keep], len(line), line[-2:]
        line = b""  # (let the cap's worth of bytes go before reading on)
        while True:
            part = fh.readline(SKIP_BLOCK)
            if not part:
                break
            total += len(part)
            tail = (tail + part[-2:])[-2:]
            if part.endswith(b"\n"):
                break
        yield prefix, total - (2 if tail == b"\r\n" else 1 if tail.endswith(b"\n") else 0)


def without_line_end(line: bytes) -> int:
    """The length of ``line`` without its line end: a ``\\n``, or a ``\\r\\n``."""
    return len(line) - (2 if line.endswith(b"\r\n") else 1 if line.endswith(b"\n") else 0)
