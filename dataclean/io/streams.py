"""A raw stream served from a generator of byte blocks (the decompressors of the readers are generators)."""
from __future__ import annotations

import io


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
