"""The character set of a crawled page: the HTTP header, then the page's own ``<meta>`` declaration, then a
byte-order mark, then strict UTF-8, then a detector (charset-normalizer).

Labels are mapped as browsers map them (WHATWG Encoding Standard, "Encodings" table): ``gb2312``, ``gbk``
and ``x-gbk`` are decoded as GB18030 (a superset: a page labelled GB2312 routinely holds GBK characters),
``big5`` as Big5-HKSCS, ``iso-8859-1``, ``latin1`` and ``us-ascii`` as windows-1252. A declared charset whose
strict decoding fails is not trusted: the page is tried as UTF-8, then given to the detector.

:func:`decode_html` returns the text and how the charset was found. ``source`` is ``http``, ``meta``,
``bom`` or ``utf-8`` (the bytes are valid UTF-8 and nothing was declared) when the decoding is certain, and
``detected`` or ``fallback`` (UTF-8 with replacement characters; the detector had no answer) when it is a
guess; the WARC reader writes both into ``meta`` (``charset``, ``charset_source``) so that a reviewer
reading the garbled rules' removals knows which pages were decoded by guesswork.
"""
from __future__ import annotations

import codecs
import re

#: Bytes of the page searched for a ``<meta>`` charset (the HTML standard's prescan reads 1024; pages with a
#: long ``<head>`` of scripts put it later, so a little more).
META_SCAN_BYTES = 4096

_ALIASES = {
    "gb2312": "gb18030", "gbk": "gb18030", "x-gbk": "gb18030", "gb_2312-80": "gb18030", "chinese": "gb18030",
    "csgb2312": "gb18030", "iso-ir-58": "gb18030", "gb18030": "gb18030", "hz-gb-2312": "hz",
    "big5": "big5hkscs", "big5-hkscs": "big5hkscs", "cn-big5": "big5hkscs", "x-x-big5": "big5hkscs",
    "iso-8859-1": "cp1252", "latin1": "cp1252", "latin-1": "cp1252", "l1": "cp1252", "ascii": "cp1252",
    "us-ascii": "cp1252", "iso8859-1": "cp1252", "windows-1252": "cp1252", "cp819": "cp1252",
    "utf8": "utf-8", "unicode-1-1-utf-8": "utf-8", "x-sjis": "shift_jis", "shift-jis": "shift_jis",
    "windows-31j": "cp932", "ks_c_5601-1987": "cp949", "euc-kr": "cp949", "iso-8859-9": "cp1254",
    "tis-620": "cp874", "iso-8859-11": "cp874",
}

_HEADER_CHARSET = re.compile(r"charset\s*=\s*[\"']?\s*([A-Za-z0-9_.:\-]+)", re.I)
_META_CHARSET = re.compile(rb"""<meta[^>]+?charset\s*=\s*["']?\s*([A-Za-z0-9_.:\-]+)""", re.I)
_BOMS = ((codecs.BOM_UTF8, "utf-8"), (codecs.BOM_UTF16_LE, "utf-16-le"), (codecs.BOM_UTF16_BE, "utf-16-be"))


def normalize_label(label: str | None) -> str | None:
    """The Python codec for a charset label, or None when Python has no codec by that name."""
    if not label:
        return None
    name = label.strip().strip("\"'").lower()
    name = _ALIASES.get(name, name)
    try:
        codec = codecs.lookup(name).name
    except LookupError:
        return None
    return codec


def header_charset(content_type: str | None) -> str | None:
    """The charset label of an HTTP ``Content-Type`` value (``text/html; charset=GBK`` gives ``GBK``)."""
    if not content_type:
        return None
    m = _HEADER_CHARSET.search(content_type)
    return m.group(1) if m else None


def meta_charset(body: bytes) -> str | None:
    """The charset label the page declares in a ``<meta charset>`` or ``http-equiv`` tag near its start."""
    m = _META_CHARSET.search(body[:META_SCAN_BYTES])
    return m.group(1).decode("ascii", "replace") if m else None


def _strict(body: bytes, codec: str) -> str | None:
    try:
        return body.decode(codec)
    except (UnicodeDecodeError, LookupError):
        return None


def decode_html(body: bytes, content_type: str | None = None) -> tuple[str, str, str]:
    """``(text, codec, source)`` of an HTML (or text) payload; see the module docstring for the order."""
    for label, source in ((header_charset(content_type), "http"), (meta_charset(body), "meta")):
        codec = normalize_label(label)
        # UTF-16/32 declared in the header or a meta tag of an ASCII-compatible page is a mistake browsers
        # ignore (WHATWG); a real UTF-16 page has a byte-order mark
        if codec is None or codec.startswith(("utf-16", "utf-32")):
            continue
        text = _strict(body, codec)
        if text is not None:
            return text, codec, source
    for bom, codec in _BOMS:
        if body.startswith(bom):
            return body[len(bom):].decode(codec, "replace"), codec, "bom"
    text = _strict(body, "utf-8")
    if text is not None:
        return text, "utf-8", "utf-8"
    from charset_normalizer import from_bytes  # imported here: only pages that are not UTF-8 pay for it

    best = from_bytes(body[:1 << 16]).best()
    if best is not None and best.encoding:
        codec = normalize_label(best.encoding) or best.encoding
        text = _strict(body, codec)
        if text is None:
            text = body.decode(codec, "replace")
        return text, codec, "detected"
    return body.decode("utf-8", "replace"), "utf-8", "fallback"
