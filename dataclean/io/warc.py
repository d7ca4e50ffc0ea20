"""Crawl files: WARC (``.warc``, ``.warc.gz``) and WET (``.wet``, ``.wet.gz``) records into canonical batches.

Parsing is FastWARC's (resiliparse; ``benchmarks/bench_extract.py`` measures it against warcio on the same
file). Gzip is decompressed here, member by member, so that a file cut inside a member is *seen*: both
libraries end such a file quietly at the last whole record.

What becomes a document:

* a ``response`` record whose HTTP status is 2xx and whose payload is HTML (``Content-Type`` text/html or
  application/xhtml+xml; without one, a payload that starts like HTML): ``text`` is the decoded HTML, for the
  ``extract`` stage to turn into main text (:mod:`dataclean.stages.extract`);
* a ``resource`` record with an HTML payload, the same way;
* a WET ``conversion`` record: ``text`` is its plain text.

Each document's ``id`` is its ``WARC-Record-ID`` (``<urn:uuid:…>``, as written), ``url`` its
``WARC-Target-URI``, and ``meta`` holds ``warc_type``, ``warc_date``, ``warc_offset`` (the byte offset of the
record in the file, compressed: what a Common Crawl index gives), ``content_type``, ``http_status``,
``charset`` and ``charset_source`` (:mod:`dataclean.io.charset`; ``detected`` and ``fallback`` mean guessed),
and for WET ``warc_refers_to`` and ``warc_language``.

Everything else is accounted, never dropped in silence:

* records that are not documents (``warcinfo``, ``request``, ``metadata``, ``revisit``, …) and responses that
  are not pages (an image, a PDF, a redirect) are *skipped with a count*: ``ReadChunk.skipped``, summed into
  the run's ``skipped_records`` (``summary.json``, the run's last lines);
* a page whose HTTP body cannot be read (bad chunked encoding, a ``Content-Encoding`` that does not
  decompress), a file that ends inside a gzip member (the record there is incomplete) and a record header
  that cannot be parsed are ``bad_record`` ledger rows with their cause; after the last two the file's
  later bytes cannot be read, so reading stops there (the records before are kept).
"""
from __future__ import annotations

import io
import json
import re
import zlib
from typing import Iterator

from dataclean.io import fs
from dataclean.io.charset import decode_html
from dataclean.io.streams import BlockStream

#: WARC files hold HTML pages (extraction needed); WET files hold their converted text.
WARC_HTML_SUFFIXES = (".warc", ".warc.gz")
WARC_SUFFIXES = WARC_HTML_SUFFIXES + (".wet", ".wet.gz")
#: A batch is cut at this many bytes of text (HTML pages are large: 4096 pages can hold 400 MB). Reading a
#: 64 MiB batch took ~420 MiB of RSS above the imports (benchmarks/bench_extract.py); at 16 MiB a batch is
#: still ~250 average pages, whose extraction costs ~17 s with trafilatura, so per-batch costs do not show.
MAX_CHUNK_TEXT_BYTES = 16 << 20
#: The most bytes of a bad record's payload kept in the ledger's ``raw``.
MAX_RAW_BYTES = 1 << 16

_HTML_TYPES = ("text/html", "application/xhtml+xml", "application/xhtml")
#: What the ``meta`` of an HTML page written here holds (sorted-key JSON): the extract stage's ``rows: html``
#: and the driver's input check both find pages by it.
HTML_META_PATTERN = '"content_type": "(?:' + "|".join(t.replace("+", "\\+") for t in _HTML_TYPES) + ')"'
_HTML_START = re.compile(rb"^\s*(?:\xef\xbb\xbf)?\s*<(?:!doctype\s+html|html|head|body|!--|meta|title)", re.I)


def is_warc(path: str) -> bool:
    return path.lower().endswith(WARC_SUFFIXES)


class _WarcStream(BlockStream):
    """The decompressed bytes of a crawl file, with what FastWARC and the reader ask of them: a position
    (FastWARC wants a seekable stream only to learn it: ``tell()`` is exact, seeking is refused), the file
    offset of a record, and whether the file ended inside a gzip member (``truncated``) or holds data that is
    not valid gzip (``corrupt``)."""

    def __init__(self, fh, block: int = 1 << 18, head: bytes = b""):
        self.truncated = False
        self.truncated_at = 0
        self.corrupt: str | None = None
        super().__init__(fh, block, head)

    def seekable(self) -> bool:
        return True

    def seek(self, offset: int, whence: int = 0) -> int:
        if (whence == 1 and offset == 0) or (whence == 0 and offset == self._pos):
            return self._pos
        raise io.UnsupportedOperation("seek")

    def compressed_offset(self, offset: int) -> int | None:
        """The file offset of the record at decompressed ``offset`` (None when the file does not say)."""
        return offset

    def _blocks_of(self):
        yield from self._reads()


class _GzipMembers(_WarcStream):
    """A multi-member gzip file, decompressed member by member. A file that ends inside a member sets
    ``truncated`` (and ends the stream) instead of raising, so that the records before it are read; the
    compressed offset of every member start is kept for :meth:`compressed_offset`."""

    def __init__(self, fh, block: int = 1 << 18, head: bytes = b""):
        self._starts: dict[int, int] = {}  # decompressed offset -> compressed offset of a member start
        super().__init__(fh, block, head)

    def compressed_offset(self, offset: int) -> int | None:
        return self._starts.get(offset)

    def _blocks_of(self):
        obj, in_member = zlib.decompressobj(31), False
        read_c = out_n = 0  # compressed bytes consumed, decompressed bytes produced
        member_c = 0
        for data in self._reads():
            while data:
                if not in_member:
                    # padding between members (some writers add NULs or newlines) is not a member
                    stripped = data.lstrip(b"\x00\r\n")
                    read_c += len(data) - len(stripped)
                    data = stripped
                    if not data:
                        break
                    member_c = read_c
                    self._starts[out_n] = member_c
                try:
                    out = obj.decompress(data)
                except zlib.error as exc:
                    self.corrupt = f"not valid gzip at compressed byte {member_c} ({exc})"
                    return
                in_member = True
                if out:
                    out_n += len(out)
                    yield out
                if obj.eof:
                    used = len(data) - len(obj.unused_data)
                    read_c += used
                    data = obj.unused_data
                    obj, in_member = zlib.decompressobj(31), False
                else:
                    read_c += len(data)
                    data = b""
        if in_member:
            self.truncated = True
            self.truncated_at = member_c


def _dechunk(body: bytes) -> bytes:
    """The payload of an HTTP body in chunked transfer encoding (RFC 9112 §7.1); ValueError when malformed."""
    out, pos, n = [], 0, len(body)
    while True:
        eol = body.find(b"\r\n", pos)
        if eol < 0:
            eol = body.find(b"\n", pos)
            if eol < 0:
                raise ValueError("chunk size line missing")
            step = 1
        else:
            step = 2
        size_text = body[pos:eol].split(b";", 1)[0].strip()
        try:
            size = int(size_text, 16)
        except ValueError:
            raise ValueError(f"bad chunk size {size_text[:20]!r}") from None
        pos = eol + step
        if size == 0:
            return b"".join(out)
        if pos + size > n:
            raise ValueError("chunk runs past the end of the record")
        out.append(body[pos:pos + size])
        pos += size
        if body.startswith(b"\r\n", pos):
            pos += 2
        elif body.startswith(b"\n", pos):
            pos += 1


def _decode_content(body: bytes, encoding: str) -> bytes:
    enc = encoding.strip().lower()
    if enc in ("", "identity", "none"):
        return body
    if enc in ("gzip", "x-gzip"):
        return zlib.decompress(body, 47)
    if enc == "deflate":
        try:
            return zlib.decompress(body)
        except zlib.error:
            return zlib.decompress(body, -15)
    if enc == "br":
        try:
            import brotli  # optional
        except ImportError:
            raise ValueError("Content-Encoding br needs the brotli package (pip install brotli)") from None
        return brotli.decompress(body)
    raise ValueError(f"unknown Content-Encoding {encoding!r}")


def http_payload(body: bytes, headers) -> bytes:
    """The entity of an HTTP response body: de-chunked and decompressed as its headers say (Common Crawl
    stores payloads already decoded and renames the headers, so there this is a no-op)."""
    te = (headers.get("Transfer-Encoding") or "").lower()
    if "chunked" in te:
        body = _dechunk(body)
    ce = headers.get("Content-Encoding")
    if ce:
        for enc in reversed([e for e in ce.split(",") if e.strip()]):
            body = _decode_content(body, enc)
    return body


def _mime(content_type: str) -> str:
    """``text/html`` of ``Text/HTML; charset=GBK``."""
    return content_type.split(";", 1)[0].strip().lower()


def _is_html(content_type: str, payload: bytes) -> bool:
    if content_type:
        return _mime(content_type) in _HTML_TYPES
    return bool(_HTML_START.match(payload[:512]))


class WarcFileError(Exception):
    """The file cannot be read at all (it cannot be opened, FastWARC is missing); ``str()`` is the cause."""


class WarcBatch:
    """Documents and bad records of one batch, as Python lists (a WARC record is parsed one at a time by
    FastWARC, never as a batch); :mod:`dataclean.io.readers` makes the canonical Arrow batches of them."""

    def __init__(self):
        self.rows, self.texts, self.ids, self.urls, self.metas = [], [], [], [], []
        self.bad = []  # (row, raw, cause, id)
        self.skipped: dict[str, int] = {}
        self.text_bytes = 0

    @property
    def n(self) -> int:
        return len(self.rows) + len(self.bad)

    def skip(self, what: str) -> None:
        self.skipped[what] = self.skipped.get(what, 0) + 1


def _open(path: str) -> _WarcStream:
    """The decompressed stream of a crawl file (gzip is recognised by its magic bytes, whatever the name)."""
    raw = fs.open_input_stream(path) if fs.is_uri(path) else open(path, "rb")
    head = raw.read(2)
    return _GzipMembers(raw, head=head) if head == b"\x1f\x8b" else _WarcStream(raw, head=head)


def read_warc(path: str, batch_rows: int) -> Iterator[WarcBatch]:
    """Yield the :class:`WarcBatch` es of one WARC/WET file (see the module docstring); raise
    :class:`WarcFileError` when it cannot be read at all."""
    try:
        from fastwarc.warc import ArchiveIterator, WarcRecordType
    except ImportError:
        raise WarcFileError("reading WARC files needs FastWARC: pip install 'dataclean[crawl]'") from None

    try:
        stream = members = _open(path)
    except OSError as exc:
        raise WarcFileError(f"cannot open ({type(exc).__name__}: {exc})") from None
    state = WarcBatch()
    row = -1
    try:
        records = ArchiveIterator(stream, parse_http=True, record_types=WarcRecordType.any_type)
        pending = None  # the last document read: held back until the file is known to go on past it
        while True:
            try:
                rec = next(records, None)
            except (OSError, ValueError) as exc:
                rec, error = None, f"cannot parse the WARC record after record {row} ({exc})"
            else:
                error = None
            if rec is None:
                break
            row += 1
            if pending is not None:
                _commit(state, *pending)
                pending = None
                if state.n >= batch_rows or state.text_bytes >= MAX_CHUNK_TEXT_BYTES:
                    yield state
                    state = WarcBatch()
            pending = _record(rec, row, members)
            if pending[0] == "skip":
                state.skip(pending[1])
                pending = None
        if members.corrupt:
            error = members.corrupt
        if members.truncated:
            cause = (f"the file ends inside a gzip member at compressed byte {members.truncated_at} "
                     "(truncated?): this record is incomplete")
            if pending is not None:  # ("doc" or "bad", row, payload, id, ...)
                state.bad.append((pending[1], _cap(pending[2]), cause, pending[3]))
                pending = None
            else:
                row += 1
                state.bad.append((row, b"", cause, None))
        if pending is not None:
            _commit(state, *pending)
        if error and not members.truncated:
            row += 1
            state.bad.append((row, b"", error, None))
    except (OSError, EOFError) as exc:
        raise WarcFileError(f"cannot read ({type(exc).__name__}: {exc})") from None
    finally:
        stream.close()
    if state.n or state.skipped:
        yield state


def _cap(payload) -> bytes:
    if isinstance(payload, str):
        payload = payload.encode("utf-8", "surrogatepass")
    return payload[:MAX_RAW_BYTES]


def _commit(state: WarcBatch, kind: str, row: int, payload, rid, url, meta) -> None:
    if kind == "bad":
        state.bad.append((row, _cap(payload), meta, rid))
        return
    state.rows.append(row)
    state.texts.append(payload)
    state.ids.append(rid)
    state.urls.append(url)
    state.metas.append(json.dumps(meta, ensure_ascii=False, sort_keys=True))
    # UTF-8 bytes, bounded cheaply: str.isascii() is O(1) in CPython; other text counts 3 bytes a character
    state.text_bytes += len(payload) if payload.isascii() else 3 * len(payload)


def _record(rec, row: int, members: _WarcStream) -> tuple:
    """``("doc", row, text, id, url, meta)``, ``("bad", row, raw, id, url, cause)`` or ``("skip", what)``."""
    rtype = str(rec.record_type).rsplit(".", 1)[-1]
    h = rec.headers
    rid = h.get("WARC-Record-ID")
    url = h.get("WARC-Target-URI")
    offset = members.compressed_offset(rec.stream_pos)
    meta = {"warc_date": h.get("WARC-Date")}
    if offset is not None:
        meta["warc_offset"] = offset
    if rtype == "conversion":
        body = rec.reader.read()
        meta.update(warc_type="conversion", content_type=h.get("Content-Type") or "text/plain",
                    warc_refers_to=h.get("WARC-Refers-To"))
        if h.get("WARC-Identified-Content-Language"):
            meta["warc_language"] = h.get("WARC-Identified-Content-Language")
        text, codec, source = decode_html(body, "text/plain; charset=utf-8")
        meta.update(charset=codec, charset_source=source)
        return ("doc", row, text, rid, url, meta)
    if rtype == "response":
        if not rec.is_http or rec.http_headers is None:
            return ("skip", "response_not_http")
        hh = rec.http_headers
        status = hh.status_code
        body = rec.reader.read()
        if status is None or not 200 <= status < 300:
            return ("skip", f"response_status_{str(status)[0]}xx" if status else "response_status_unknown")
        ctype = hh.get("Content-Type") or ""
        try:
            payload = http_payload(body, hh)
        except (ValueError, zlib.error) as exc:
            return ("bad", row, body, rid, url, f"cannot read the HTTP body ({exc})")
        if not _is_html(ctype, payload):
            return ("skip", "response_not_html")
        meta.update(warc_type="response", content_type=_mime(ctype) or "text/html", http_status=status)
    elif rtype == "resource":
        payload = rec.reader.read()
        ctype = h.get("Content-Type") or ""
        if not _is_html(ctype, payload):
            return ("skip", "resource_not_html")
        meta.update(warc_type="resource", content_type=_mime(ctype) or "text/html")
    else:
        name = rtype if rtype in ("warcinfo", "request", "metadata", "revisit", "continuation") else "unknown"
        return ("skip", name)
    text, codec, source = decode_html(payload, ctype)
    meta.update(charset=codec, charset_source=source)
    return ("doc", row, text, rid, url, meta)
