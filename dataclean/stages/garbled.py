"""Broken text: decoding errors, mojibake, characters no text should contain, and homoglyph words.

Signals, per document (every ratio is per character of the document, ``0.0`` for empty text):

``garbled_replacement_ratio``
    U+FFFD REPLACEMENT CHARACTER: bytes that a decoder could not map. One in a footer (a lost ``©``) is a
    blemish; one in every few words (``T� m� ag d�anamh``: every accented letter lost) is broken text.
``garbled_mojibake_ratio`` / ``garbled_mojibake_chars``
    Characters inside *confirmed* mojibake: text whose bytes were decoded with the wrong codec. A cheap
    vectorised RE2 prefilter selects the documents that contain a suspicious span; only those go through
    Python, where each span is re-encoded with the codec that was wrongly used and decoded with the one
    that should have been. A span counts only when that round trip succeeds *and* gives plausible text
    (see :func:`scan_mojibake`). Detected readings:

    * ``utf8-as-cp1252``: UTF-8 read as Windows-1252 / Latin-1 (``Ã©`` for ``é``, ``â€™`` for ``’``,
      ``å¤§å®¶`` for ``大家``, ``ï¿½`` for ``�``);
    * ``utf8-as-gbk``: UTF-8 read as GBK/GB18030 (``鍙戦€佹垚鍔`` for ``发送成功``);
    * ``cp1252-as-gbk``: Latin-1/Windows-1252 read as GBK (``Anybody抯`` for ``Anybody’s``,
      ``Fahrl鋘der`` for ``Fahrländer``: the SpamAssassin mails of the bench corpus);
    * ``big5-as-gbk`` and ``sjis-as-gbk``: Big5 or Shift_JIS read as GBK (``傕傕偑偼`` for ``ももがは``);
    * ``iso2022jp-as-ascii``: ISO-2022-JP shown as its 7-bit escape text (``$B$*@$OC$K(B``);
    * ``gbk-fffd``: ``锟斤拷`` (U+FFFD's UTF-8 bytes read as GBK) and ``烫烫烫烫``/``屯屯屯屯`` (the MSVC
      fill bytes 0xCC/0xCD of uninitialised memory read as GBK), detected by pattern.

    In the default pipeline the normalize stage has already repaired with ftfy what ftfy can repair (UTF-8 read
    as cp1252 / Latin-1 / MacRoman / cp1251), so what this rule sees is mostly the multi-byte readings (GBK,
    Big5, Shift_JIS, ISO-2022-JP) and mojibake ftfy would not touch.

    Not detected: EUC-KR read as GBK (its byte pairs are ordinary GB2312 characters, so nothing in the text
    is rarer than real Chinese), and single mis-decoded characters with no rare character in them
    (``caf茅`` for ``café``).
``garbled_control_ratio``
    C0 controls other than tab, line feed and carriage return (a line end in raw input), DEL, and C1
    controls U+0080–U+009F (Windows-1252 punctuation read as Latin-1: ``\\x93quoted\\x94``, ``\\x806.50``).
    The normalize stage removes C0 controls before this stage in the default pipeline, and repairs (ftfy,
    ``fix_encoding``) C1 controls that are cp1252 punctuation in Latin-script lines; what is left here is C1
    inside broken CJK text and the like.
``garbled_private_use_ratio``
    Private-use characters (RE2 ``\\p{Co}``). Old Japanese-carrier emoji live in the private-use area
    (``\\ue056``, ``\\ue107`` in Weibo posts and reviews), so a few are normal in short posts.
``garbled_unassigned_ratio``
    Code points unassigned in the Unicode version of Arrow's RE2 (and noncharacters such as U+FFFE): RE2
    has no ``\\p{Cn}``, so this is ``[^\\pL\\pM\\pN\\pP\\pS\\pZ\\pC]``. Real text never contains them.
``garbled_mixed_script_ratio`` / ``garbled_mixed_script_words``
    The share of the document's words (:func:`dataclean.text.tokenize.words_batch`) that mix letters of two
    of the *confusable* scripts Latin, Cyrillic and Greek inside one word: homoglyph spam writes ``Рауpal``
    (Cyrillic Р, а, у + Latin pal) so that a filter looking for "Paypal" misses it. These three scripts share
    look-alike letters; no language writes one word in two of them. Korean particles after Latin words
    (``API는``) and Japanese kana after Latin (``Linuxを``) are not confusable and are not counted. Legitimate
    mixed words exist (``30μm``, ``ΔfH0``, navigation text glued to a Greek word ``ΕπόμενοB``), a few per
    document, hence a share rather than any occurrence. Ukrainian and Belarusian write the letter і, and web
    text in these languages often types it as the Latin ``i`` (``мiсто``, ``Київ`` with a Latin i): in rows whose
    ``lang`` is in ``cyrillic_latin_i_langs`` (default ``[uk, be]``), and in any Cyrillic word that holds a
    letter only these languages use (і ї є ґ ў), a Latin ``i``/``I`` inside a Cyrillic word is read as і/І and
    does not make the word mixed. Any other Latin letter in a Cyrillic word (``а``/``о``/``е``/``с``/``р``
    homoglyphs: ``Рaypal``, ``вы игрaли``) still does, in those languages too.

Rules, in this order (the first failing one is recorded): ``garbled_replacement_chars``,
``garbled_mojibake``, ``garbled_control_chars``, ``garbled_private_use``, ``garbled_unassigned``,
``garbled_mixed_script``. A rule removes a document when its ratio is **above** the threshold and the
document has at least ``min_bad_chars`` such characters (``min_mixed_script_words`` words for the last
rule), so one stray character in a 20-character post does not remove it.

Thresholds. No published pipeline we know of thresholds these signals (C4, Gopher and FineWeb do not look
at encoding; Nemotron-CC and others *repair* mojibake with ftfy instead of measuring it), so the defaults
were chosen on the bench corpus (258k real documents, after the normalize stage):

* ``max_replacement_ratio = 0.005`` (one broken character per 200, i.e. one every few lines): the
  SpamAssassin mails that lost every accented letter or quote (``T� m� ag d�anamh``, ``Coach�Invest``) are
  at 0.006–0.11; mails with one lost ``©`` in a signature are below 0.001.
* ``max_mojibake_ratio = 0.005``: the Shift_JIS, Big5 and ISO-2022-JP mails read with the wrong codec are
  at 0.036–0.41, a review whose second half is Big5 read as GBK at 0.096; kept below it are web pages
  with a few ``â€™`` (0.0002–0.003), documentation *quoting* mojibake (the Debian handbook explaining
  ``Ã©``, LibreOffice's StrConv examples; < 0.003) and mails with one mis-decoded name (``Fahrl鋘der``,
  ~0.0003).
* ``max_control_ratio = 0.005`` and ``max_unassigned_ratio = 0.005``: same reasoning as U+FFFD.
* ``max_private_use_ratio = 0.25``: reviews and Weibo posts with two to four carrier emoji are at up to
  0.2; binary junk and icon-font dumps are far above.
* ``max_mixed_script_ratio = 0.05`` with ``min_mixed_script_words = 3``: no bench document reaches both;
  the highest shares (0.04–0.08) are Weibo posts with one kaomoji such as ``(ŐдŐ)`` or one unit such as
  ``30μm``, and glued navigation (``ΕπόμενοB``) or chemistry (``ΔfH0``) stay below 0.035.
* ``min_bad_chars = 3``.

All rules are language-independent: Chinese with full-width punctuation, Japanese, and mixed
Chinese/English technical text produce none of these signals, so ``by_lang`` is empty by default (it is
accepted, like in every rule stage, to override any threshold per language).
"""
from __future__ import annotations

import hashlib
import re
import sys
import unicodedata
from functools import cached_property, lru_cache

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.stages.base import Check, Decisions, RuleSpec, Stage, StageResult, batch_text, with_columns
from dataclean.text import kernels
from dataclean.text.chars import code_point_class
from dataclean.text.tokenize import HAN, words_batch

REPLACEMENT_RE2 = r"\x{fffd}"
CONTROL = r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x{9f}]"
PRIVATE_USE = r"\p{Co}"
UNASSIGNED = r"[^\pL\pM\pN\pP\pS\pZ\pC]"

# letters of the confusable scripts, marks and digits: a Han character or kana ends a word, as in the tokenizer
_WORD = r"[\p{Latin}\p{Cyrillic}\p{Greek}\pM\pN]"
_CONFUSABLE_PAIRS = [("Latin", "Cyrillic"), ("Latin", "Greek"), ("Cyrillic", "Greek")]
#: One whole word (run of Latin/Cyrillic/Greek letters, marks, digits) with letters of two of these scripts.
MIXED_SCRIPT_WORD = (_WORD + "*(?:" + "|".join(
    rf"\p{{{a}}}{_WORD}*\p{{{b}}}|\p{{{b}}}{_WORD}*\p{{{a}}}" for a, b in _CONFUSABLE_PAIRS) + ")" + _WORD + "*")
#: A Latin i/I next to a Cyrillic letter (with only marks and digits between): where a uk/be i may be hiding.
LATIN_I_BY_CYRILLIC = r"\p{Cyrillic}[\pM\pN]*[iI]|[iI][\pM\pN]*\p{Cyrillic}"
_CYRILLIC_PY = "\u0400-\u052f\u1c80-\u1c8f\u2de0-\u2dff\ua640-\ua69f"
#: (Python) a run of Latin, Greek, Cyrillic letters, combining marks and digits: a word as MIXED_SCRIPT_WORD sees it.
_WORD_PY = re.compile("[0-9A-Za-z\u00aa\u00b5\u00ba\u00c0-\u00d6\u00d8-\u00f6\u00f8-\u024f\u0250-\u02af"
                      "\u0300-\u036f\u0370-\u03ff" + _CYRILLIC_PY + "\u1d00-\u1dff\u1e00-\u1fff\u2c60-\u2c7f"
                      "\ua720-\ua7ff\uff10-\uff19\uff21-\uff3a\uff41-\uff5a]+")
_CYRILLIC_CHAR_PY = re.compile(f"[{_CYRILLIC_PY}]")
#: Letters of the Ukrainian and Belarusian alphabets that Russian does not have.
UK_BE_LETTERS = "іїєґўІЇЄҐЎ"
_LATIN_I_TO_CYRILLIC = str.maketrans("iI", "\u0456\u0406")

#: Two letters of different confusable scripts with only marks and digits between them: every mixed word has
#: one, and this pattern (no leading word loop) is cheap to search for in long Russian or Greek documents.
SCRIPT_TRANSITION = "|".join(
    rf"\p{{{a}}}[\pM\pN]*\p{{{b}}}|\p{{{b}}}[\pM\pN]*\p{{{a}}}" for a, b in _CONFUSABLE_PAIRS)

# --- character tables for the mojibake round trips (built once, on first use) ----------------------------

#: Characters that follow a wrongly decoded byte sequence, in typographic use right after a word (a
#: French no-break space before a colon, closing quotes, an ellipsis): a lone 2-byte "sequence" ending in one
#: of these (``weiß«``, ``CAFÉ…``) is ordinary text unless other evidence says otherwise.
_TYPOGRAPHIC = set("\xa0\xad«»…“”‘’„‚–—•·¡¿‹›")
#: Lead characters that are almost only ever mojibake when followed by a continuation character:
#: U+0080–U+00FF encode as C2/C3 xx, U+2000–U+2FFF (quotes, dashes, ellipsis, €, ™) as E2 xx xx,
#: U+F000–U+FFFF (full-width forms, the BOM, U+FFFD) as EF xx xx.
_STRONG_LEADS = set("ÂÃâï")
_GBK_PUA = (0xE000, 0xE865)  # GB18030 maps its user-defined byte areas here


def _decodable(codec: str, leads, trails) -> set[str]:
    out = set()
    for a in leads:
        for b in trails:
            try:
                out.add(bytes([a, b]).decode(codec))
            except UnicodeDecodeError:
                pass
    return out


def _han_ranges() -> list[tuple[int, int]]:
    out = []
    for part in re.findall(r"\\x\{([0-9a-f]+)\}(?:-\\x\{([0-9a-f]+)\})?", HAN):
        lo = int(part[0], 16)
        out.append((lo, int(part[1], 16) if part[1] else lo))
    return out


_HAN_KEY = hashlib.sha1(HAN.encode()).hexdigest()[:12]  # (the table's file name changes with HAN)
#: Bits of the per-code-point table behind :class:`_Tables` (cached on disk: it takes ~0.4 s of decoding).
_GBK, _COMMON_HAN, _RARE = 1, 2, 4


def _codec_table() -> np.ndarray:
    """Per code point: in the GBK repertoire (the 2-byte GB18030 codes, above U+00FF); a common Han character
    (GB2312, all of it; Big5 level 1; JIS X 0208 level 1: real Chinese and Japanese text is >99% made of these);
    a rare one (any other Han character, and the private-use area GB18030 maps its user-defined bytes to)."""
    gbk_trails = list(range(0x40, 0x7F)) + list(range(0x80, 0xFF))
    table = np.zeros(0x110000, np.uint8)
    gbk = [ord(c) for c in _decodable("gb18030", range(0x81, 0xFF), gbk_trails) if ord(c) >= 0x100]
    table[np.array(gbk, np.int64)] |= _GBK
    is_han = np.zeros(0x110000, bool)
    for lo, hi in _han_ranges():
        is_han[lo:hi + 1] = True
    common = _decodable("gb2312", range(0xB0, 0xF8), range(0xA1, 0xFF))
    common |= _decodable("big5", range(0xA4, 0xC7), gbk_trails)
    common |= _decodable("shift_jis", range(0x88, 0x99), gbk_trails)
    common_cps = np.array(sorted(ord(c) for c in common), np.int64)
    table[common_cps[is_han[common_cps]]] |= _COMMON_HAN
    rare = is_han & (table & _COMMON_HAN == 0)
    rare[_GBK_PUA[0]:_GBK_PUA[1]] = True
    table[rare] |= _RARE
    return table


class _Tables:
    """Lookup tables derived from Python's own codecs (no data files). The Python regexes are compiled on first
    use (~0.2 s: only documents that pass the RE2 prefilter need them)."""

    def __init__(self):
        # bytes read as Windows-1252 (or Latin-1, whose C1 controls fill cp1252's holes) -> the byte
        to_byte = {}
        for b in range(0x80, 0x100):
            to_byte[chr(b)] = b
            try:
                to_byte[bytes([b]).decode("cp1252")] = b
            except UnicodeDecodeError:
                pass
        self.cp1252_translate = {ord(c): chr(b) for c, b in to_byte.items()}
        cont = [ord(c) for c, b in to_byte.items() if 0x80 <= b <= 0xBF]
        # a UTF-8 sequence seen through cp1252: lead C2-DF + 1, E0-EF + 2, F0-F4 + 3 continuation bytes
        for flavor in ("re2", "py"):
            c = code_point_class(cont, flavor)
            lead = {n: code_point_class(range(lo, hi + 1), flavor) for n, (lo, hi) in
                    {1: (0xC2, 0xDF), 2: (0xE0, 0xEF), 3: (0xF0, 0xF4)}.items()}
            pat = "|".join(f"{lead[n]}{c}{{{n}}}" for n in (3, 2, 1))
            setattr(self, f"cp1252_seq_{flavor}", pat)

        table = kernels.cached_table("garbled", f"garbledtable-v1-{_HAN_KEY}-py{sys.version_info[0]}."
                                     f"{sys.version_info[1]}.npy", _codec_table)
        self.gbk_cps = np.flatnonzero(table & _GBK)
        self.common_han = frozenset(map(chr, np.flatnonzero(table & _COMMON_HAN).tolist()))
        self.rare_cps = np.flatnonzero(table & _RARE)
        self.rare_re2 = code_point_class(self.rare_cps, "re2")
        # cp1252 bytes that read as letters or as the punctuation typed inside Latin text
        self.latin_high = {b for c, b in to_byte.items()
                           if b >= 0x80 and (c.isalpha() or c in "‘’“”–—…•\xa0")}

    @cached_property
    def rare_py(self) -> re.Pattern:
        return re.compile(code_point_class(self.rare_cps, "py"))

    @cached_property
    def gbk_span_py(self) -> re.Pattern:
        """A run of GBK characters; U+FFFD inside or at the end marks bytes a GBK decoder could not pair."""
        gbk_class = code_point_class(self.gbk_cps, "py")
        return re.compile(f"{gbk_class}+(?:\ufffd+{gbk_class}+)*\ufffd*")

    @cached_property
    def cp1252_seq_re(self) -> re.Pattern:
        return re.compile(self.cp1252_seq_py)


@lru_cache(maxsize=1)
def tables() -> _Tables:
    return _Tables()


ISO2022JP = r"\$[B@]([\x21-\x7e]{4,}?)\x1b?\([BJ]"  # the leading ESC, if still there, is added back below
_ISO2022JP_RE = re.compile(ISO2022JP)
GBK_FFFD = r"(?:锟斤拷)+|烫{4,}|屯{4,}"
_GBK_FFFD_RE = re.compile(GBK_FFFD)


@lru_cache(maxsize=1)
def any_garbled_pattern() -> str:
    """RE2 pattern matching a document that has anything this stage measures."""
    return "|".join([mojibake_prefilter(), CONTROL, PRIVATE_USE, UNASSIGNED, SCRIPT_TRANSITION])


@lru_cache(maxsize=1)
def mojibake_prefilter() -> str:
    """The RE2 pattern a document must match to be scanned for mojibake at all."""
    t = tables()
    return "|".join([t.cp1252_seq_re2, t.rare_re2, r"\x{fffd}", ISO2022JP, GBK_FFFD])


# --- plausibility -----------------------------------------------------------------------------------------

def _plausible_share(s: str) -> float:
    """Share of the non-space characters of ``s`` that real text is made of: ASCII, common Han, kana,
    Hangul syllables, CJK and full-width punctuation. Private-use, rare Han and symbols are not."""
    common = tables().common_han
    n = ok = 0
    for ch in s:
        if ch.isspace():
            continue
        n += 1
        o = ord(ch)
        if (o < 0x80 or ch in common or 0x3000 <= o <= 0x30FF or 0xAC00 <= o <= 0xD7A3
                or 0xFF01 <= o <= 0xFF5E):
            ok += 1
        elif o < 0x250 and ch.isalpha():
            ok += 1
    return ok / n if n else 0.0


def _latinish(ch: str) -> bool:
    o = ord(ch)
    return ch.isalpha() and (o < 0x530 or 0x1E00 <= o <= 0x1EFF)


def _utf8_core(raw: bytes) -> str | None:
    """Decode ``raw`` as UTF-8, forgiving a cut sequence at either end (a span of mojibake rarely starts
    and ends on a character boundary of the original). None when the middle is not valid UTF-8."""
    start = 0
    while start < min(3, len(raw)) and 0x80 <= raw[start] <= 0xBF:
        start += 1
    for end in range(len(raw), max(start, len(raw) - 3) - 1, -1):
        try:
            return raw[start:end].decode("utf-8")
        except UnicodeDecodeError as e:
            if e.reason != "unexpected end of data":
                return None
    return None


# --- the scan ---------------------------------------------------------------------------------------------

def _cp1252_spans(text: str, out: list) -> None:
    t = tables()
    seqs = []
    for m in t.cp1252_seq_re.finditer(text):
        seq = m.group()
        try:
            ch = seq.translate(t.cp1252_translate).encode("latin-1").decode("utf-8")
        except (UnicodeDecodeError, UnicodeEncodeError):
            continue
        if unicodedata.category(ch) in ("Cc", "Cn", "Co", "Cs"):
            continue
        seqs.append((m.start(), m.end(), ch))
    for i, (s, e, ch) in enumerate(seqs):
        seq = text[s:e]
        in_run = (i > 0 and seqs[i - 1][1] == s) or (i + 1 < len(seqs) and seqs[i + 1][0] == e)
        strong = seq[0] in _STRONG_LEADS or in_run or not (set(seq[1:]) & _TYPOGRAPHIC)
        if not strong:
            # inside a word (letters on both sides) a Latin letter is plausible: "HasÅ‚o" = "Hasło"
            inside = s > 0 and e < len(text) and text[s - 1].isalpha() and text[e].isalpha()
            strong = inside and _latinish(ch)
        if strong:
            out.append((s, e, "utf8-as-cp1252", ch))


def _gbk_bytes(s: str) -> bytes:
    """``s`` encoded back to the bytes a Windows GBK (code page 936) decoder read: as GB18030, except
    that cp936 decodes the single byte 0x80 as ``€``."""
    if "€" not in s:
        return s.encode("gb18030")
    return b"\x80".join(part.encode("gb18030") for part in s.split("€"))


def _gbk_spans(text: str, out: list) -> None:
    t = tables()
    for m in t.gbk_span_py.finditer(text):
        span = m.group()
        if "\ufffd" not in span and not t.rare_py.search(span):
            continue
        s, e = m.start(), m.end()
        span_share = _plausible_share(span.replace("\ufffd", ""))
        segments = [seg for seg in span.split("\ufffd") if seg]
        # 1. UTF-8 read as GBK: valid multi-byte UTF-8 of >= 2 plausible characters does not happen by chance
        #    in GBK-encoded Chinese. Bytes the decoder could not pair became U+FFFD: decode between them.
        fixed_parts = [_utf8_core(_gbk_bytes(seg)) for seg in segments]
        if all(p is not None for p in fixed_parts):
            fixed = "\ufffd".join(fixed_parts)
            if len(fixed) - fixed.count("\ufffd") >= 2 and _plausible_share(fixed.replace("\ufffd", "")) >= 0.9 \
                    and span_share < 0.9:
                out.append((s, e, "utf8-as-gbk", fixed))
                continue
        if "\ufffd" in span:
            continue
        raw = span.encode("gb18030")
        # 2. Latin-1/cp1252 read as GBK: each character is (accented letter or quote, ASCII letter)
        if len(span) <= 4 and _cp1252_in_gbk(text, s, e, raw):
            out.append((s, e, "cp1252-as-gbk", raw.decode("cp1252", errors="replace")))
            continue
        # 3. Big5 / Shift_JIS read as GBK: the other reading is plausible, this one is not
        pua = sum(_GBK_PUA[0] <= ord(ch) < _GBK_PUA[1] for ch in span)
        if len(set(span)) < 4 or pua * 2 > len(span):
            continue  # too little evidence ("艸艸艸靠靠靠"), or mostly carrier emoji (private use)
        for codec, kind in (("big5", "big5-as-gbk"), ("shift_jis", "sjis-as-gbk")):
            try:
                fixed = raw.decode(codec)
            except UnicodeDecodeError:
                continue
            share = _plausible_share(fixed)
            if share >= 0.9 and share - span_share >= 0.25:
                out.append((s, e, kind, fixed))
                break


def _cp1252_in_gbk(text: str, s: int, e: int, raw: bytes) -> bool:
    t = tables()
    before = text[s - 1] if s > 0 else ""
    after = text[e] if e < len(text) else ""
    if not ((before.isascii() and before.isalpha()) or (after.isascii() and after.isalpha())):
        return False
    pairs = [raw[i:i + 2] for i in range(0, len(raw), 2)]
    for k, (lead, trail) in enumerate(pairs):
        if lead not in t.latin_high:
            return False
        ascii_letter = 0x41 <= trail <= 0x5A or 0x61 <= trail <= 0x7A
        if not (ascii_letter or (k == len(pairs) - 1 and trail == 0xA0)):
            return False
    return True


def _iso2022_spans(text: str, out: list) -> None:
    for m in _ISO2022JP_RE.finditer(text):
        body = m.group(1)
        start = m.start() - (m.start() > 0 and text[m.start() - 1] == "\x1b")
        try:
            fixed = (b"\x1b$B" + body.encode("ascii") + b"\x1b(B").decode("iso2022_jp")
        except (UnicodeDecodeError, UnicodeEncodeError):
            continue
        if _plausible_share(fixed) >= 0.9:
            out.append((start, m.end(), "iso2022jp-as-ascii", fixed))


def _fixed_pattern_spans(text: str, out: list) -> None:
    for m in _GBK_FFFD_RE.finditer(text):
        fixed = "\ufffd" * (len(m.group()) // 3 * 2) if m.group()[0] == "锟" else "(uninitialised memory)"
        out.append((m.start(), m.end(), "gbk-fffd", fixed))


def scan_mojibake(text: str) -> tuple[int, tuple[int, int, str, str, str] | None]:
    """Characters of ``text`` inside confirmed mojibake, and the first span as
    ``(start, end, kind, span_text, what_it_should_have_been)`` (None when there is none).

    A candidate counts only when the round trip succeeds and the result is plausible:

    * UTF-8 seen through cp1252, one sequence at a time: the sequence must decode to an assigned, non-control
      character, and either start with ``Â``/``Ã``/``â`` (practically only ever mojibake), or touch another
      such sequence, or contain no no-break space / closing quote / ellipsis (``weiß«``, ``à\\xa0»`` and
      ``é\\xa0»`` are French and German typography), or sit inside a word and give a Latin, Greek or
      Cyrillic letter (``HasÅ‚o``);
    * a run of GBK characters that contains a rare Han character (not in GB2312, Big5 level 1 or JIS
      level 1) or a GBK user-defined (private-use) character is re-encoded in GB18030 and read as UTF-8
      (>= 2 characters, >= 90% plausible, the run itself < 90% plausible), as Latin-1 (<= 4 characters,
      each an accented letter or quote followed by an ASCII letter, next to an ASCII letter), or as Big5 /
      Shift_JIS (>= 90% plausible and 25 points more plausible than the run, >= 4 distinct characters, not
      mostly private-use).
    """
    spans: list = []
    _cp1252_spans(text, spans)
    _gbk_spans(text, spans)
    if "$" in text:
        _iso2022_spans(text, spans)
    if "锟" in text or "烫" in text or "屯" in text:
        _fixed_pattern_spans(text, spans)
    if not spans:
        return 0, None
    spans.sort()
    covered, end = 0, -1
    for s, e, *_ in spans:
        if e > end:
            covered += e - max(s, end)
            end = e
    s, e, kind, fixed = spans[0]
    return covered, (s, e, kind, text[s:e], fixed)


def _detail(first) -> str:
    s, e, kind, span, fixed = first
    return f"mojibake {kind} at {s}-{e}: {span[:40]!r} -> {fixed[:40]!r}"


# --- the stage --------------------------------------------------------------------------------------------

class Garbled(Stage):
    """Broken text: U+FFFD, mojibake, control / private-use / unassigned characters, homoglyph words.

    See the module docstring for every signal, how mojibake is confirmed, and where each default threshold
    comes from. A threshold set to None disables its rule (the signal is still computed).
    """

    kind = "garbled"
    signal_fields = [
        pa.field("garbled_replacement_ratio", pa.float64()),
        pa.field("garbled_mojibake_ratio", pa.float64()),
        pa.field("garbled_mojibake_chars", pa.int64()),
        pa.field("garbled_control_ratio", pa.float64()),
        pa.field("garbled_private_use_ratio", pa.float64()),
        pa.field("garbled_unassigned_ratio", pa.float64()),
        pa.field("garbled_mixed_script_ratio", pa.float64()),
        pa.field("garbled_mixed_script_words", pa.int64()),
    ]
    rule_specs = [
        RuleSpec("garbled_replacement_chars", "garbled_replacement_ratio",
                 ("max_replacement_ratio", "min_bad_chars"), "max", "U+FFFD per character"),
        RuleSpec("garbled_mojibake", "garbled_mojibake_ratio", ("max_mojibake_ratio", "min_bad_chars"), "max",
                 "characters in round-trip-confirmed mojibake, per character; detail: the first span and its fix"),
        RuleSpec("garbled_control_chars", "garbled_control_ratio", ("max_control_ratio", "min_bad_chars"), "max",
                 "C0 (not tab, LF, CR), DEL and C1 controls per character"),
        RuleSpec("garbled_private_use", "garbled_private_use_ratio", ("max_private_use_ratio", "min_bad_chars"),
                 "max", "private-use characters per character"),
        RuleSpec("garbled_unassigned", "garbled_unassigned_ratio", ("max_unassigned_ratio", "min_bad_chars"),
                 "max", "unassigned code points per character"),
        RuleSpec("garbled_mixed_script", "garbled_mixed_script_ratio",
                 ("max_mixed_script_ratio", "min_mixed_script_words"), "max",
                 "share of words mixing Latin, Cyrillic or Greek letters (homoglyph spam)"),
    ]

    def __init__(self, max_replacement_ratio: float | None = 0.005, max_mojibake_ratio: float | None = 0.005,
                 max_control_ratio: float | None = 0.005, max_private_use_ratio: float | None = 0.25,
                 max_unassigned_ratio: float | None = 0.005, min_bad_chars: int = 3,
                 max_mixed_script_ratio: float | None = 0.05, min_mixed_script_words: int = 3,
                 cyrillic_latin_i_langs: list[str] | None = ("uk", "be"), by_lang: dict | None = None,
                 name: str | None = None):
        super().__init__(name)
        for k, v in {"max_replacement_ratio": max_replacement_ratio, "max_mojibake_ratio": max_mojibake_ratio,
                     "max_control_ratio": max_control_ratio, "max_private_use_ratio": max_private_use_ratio,
                     "max_unassigned_ratio": max_unassigned_ratio,
                     "max_mixed_script_ratio": max_mixed_script_ratio}.items():
            if v is not None and not 0 <= v <= 1:
                raise ValueError(f"garbled.{k} must be between 0 and 1 (or null to disable)")
        if min_bad_chars < 1 or min_mixed_script_words < 1:
            raise ValueError("garbled.min_bad_chars and garbled.min_mixed_script_words must be >= 1")
        self.max_replacement_ratio = max_replacement_ratio
        self.max_mojibake_ratio = max_mojibake_ratio
        self.max_control_ratio = max_control_ratio
        self.max_private_use_ratio = max_private_use_ratio
        self.max_unassigned_ratio = max_unassigned_ratio
        self.min_bad_chars = min_bad_chars
        self.max_mixed_script_ratio = max_mixed_script_ratio
        self.min_mixed_script_words = min_mixed_script_words
        if isinstance(cyrillic_latin_i_langs, str) or not all(isinstance(x, str) for x in cyrillic_latin_i_langs or ()):
            raise ValueError("garbled.cyrillic_latin_i_langs must be a list of language codes")
        self.cyrillic_latin_i_langs = list(cyrillic_latin_i_langs or ())
        self.set_by_lang(by_lang)

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        text = batch_text(batch)
        n = len(text)
        length = pc.utf8_length(text).to_numpy(zero_copy_only=False).astype(np.int64)
        denom = np.maximum(length, 1).astype(np.float64)
        keys = ("replacement", "mojibake", "control", "private_use", "unassigned")
        counts = {k: np.zeros(n, np.int64) for k in keys}
        mixed_words = np.zeros(n, np.int64)
        mixed_ratio = np.zeros(n, np.float64)
        moji_detail = None
        # One RE2 pass finds the few documents that have anything to measure; every count below runs on them
        # only (the others have all signals 0), so clean text costs one scan.
        cand = np.flatnonzero(pc.match_substring_regex(text, any_garbled_pattern()).to_numpy(zero_copy_only=False))
        if len(cand):
            sub = text.take(pa.array(cand))
            for key, pattern in (("replacement", REPLACEMENT_RE2), ("control", CONTROL),
                                 ("private_use", PRIVATE_USE), ("unassigned", UNASSIGNED)):
                counts[key][cand] = pc.count_substring_regex(sub, pattern).to_numpy(zero_copy_only=False)
            moji_chars, details = _mojibake(sub)
            counts["mojibake"][cand] = moji_chars
            if details is not None:
                full = [None] * n
                for i, d in zip(cand.tolist(), details):
                    full[i] = d
                moji_detail = pa.array(full, pa.string())
            latin_i = np.zeros(len(cand), bool)
            if self.cyrillic_latin_i_langs and "lang" in batch.schema.names:
                lang = batch.column("lang").take(pa.array(cand))
                latin_i = pc.fill_null(pc.is_in(lang.cast(pa.string()), pa.array(self.cyrillic_latin_i_langs,
                                                                                  pa.string())), False)
                latin_i = latin_i.to_numpy(zero_copy_only=False)
            mixed_words[cand], mixed_ratio[cand] = _mixed_script(sub, latin_i)

        ratios = {k: v / denom for k, v in counts.items()}
        out = with_columns(batch, {
            "garbled_replacement_ratio": pa.array(ratios["replacement"], pa.float64()),
            "garbled_mojibake_ratio": pa.array(ratios["mojibake"], pa.float64()),
            "garbled_mojibake_chars": pa.array(counts["mojibake"], pa.int64()),
            "garbled_control_ratio": pa.array(ratios["control"], pa.float64()),
            "garbled_private_use_ratio": pa.array(ratios["private_use"], pa.float64()),
            "garbled_unassigned_ratio": pa.array(ratios["unassigned"], pa.float64()),
            "garbled_mixed_script_ratio": pa.array(mixed_ratio, pa.float64()),
            "garbled_mixed_script_words": pa.array(mixed_words, pa.int64()),
        })

        checks = []
        rules = [
            ("replacement", "garbled_replacement_chars", "garbled_encoding", "max_replacement_ratio", None),
            ("mojibake", "garbled_mojibake", "garbled_encoding", "max_mojibake_ratio", moji_detail),
            ("control", "garbled_control_chars", "garbled_chars", "max_control_ratio", None),
            ("private_use", "garbled_private_use", "garbled_chars", "max_private_use_ratio", None),
            ("unassigned", "garbled_unassigned", "garbled_chars", "max_unassigned_ratio", None),
        ]
        for key, rule, reason, param, detail in rules:
            if getattr(self, param) is None:
                continue
            thr = self.per_row(batch, param).to_numpy(zero_copy_only=False)
            failed = (ratios[key] > thr) & (counts[key] >= self.min_bad_chars)
            checks.append(Check(rule, reason, pa.array(failed), value=pa.array(ratios[key]),
                                threshold=pa.array(thr), detail=detail))
        if self.max_mixed_script_ratio is not None:
            thr = self.per_row(batch, "max_mixed_script_ratio").to_numpy(zero_copy_only=False)
            failed = (mixed_ratio > thr) & (mixed_words >= self.min_mixed_script_words)
            checks.append(Check("garbled_mixed_script", "garbled_mixed_script", pa.array(failed),
                                value=pa.array(mixed_ratio), threshold=pa.array(thr)))
        return StageResult(out, Decisions.from_checks(n, checks))


def _mojibake(text: pa.Array) -> tuple[np.ndarray, list | None]:
    """Mojibake characters per document and the ledger detail of its first span (None: no span anywhere)."""
    n = len(text)
    chars = np.zeros(n, np.int64)
    idx = np.flatnonzero(pc.match_substring_regex(text, mojibake_prefilter()).to_numpy(zero_copy_only=False))
    if not len(idx):
        return chars, None
    details: list[str | None] = [None] * n
    for i, s in zip(idx.tolist(), text.take(pa.array(idx)).to_pylist()):
        covered, first = scan_mojibake(s)
        chars[i] = covered
        if first is not None:
            details[i] = _detail(first)
    return chars, details


def latin_i_as_cyrillic(text: str, whole_doc: bool) -> str:
    """``text`` with each Latin i/I inside a Cyrillic word turned into the Cyrillic і/І: in every such word when
    ``whole_doc`` (the row's language writes і), else only in words that hold a Ukrainian/Belarusian letter."""
    def word(m):
        w = m.group()
        if ("i" not in w and "I" not in w) or not _CYRILLIC_CHAR_PY.search(w):
            return w
        if not whole_doc and not any(c in UK_BE_LETTERS for c in w):
            return w
        return w.translate(_LATIN_I_TO_CYRILLIC)
    return _WORD_PY.sub(word, text)


def _mixed_script(text: pa.Array, latin_i_rows: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Words mixing confusable scripts per document, and their share of the document's words. In the rows of
    ``latin_i_rows`` (bool per row), and in words with a uk/be letter anywhere, a Latin i/I inside a Cyrillic
    word does not count (:func:`latin_i_as_cyrillic`)."""
    n = len(text)
    words = np.zeros(n, np.int64)
    ratio = np.zeros(n, np.float64)
    cand = np.flatnonzero(pc.match_substring_regex(text, SCRIPT_TRANSITION).to_numpy(zero_copy_only=False))
    if not len(cand):
        return words, ratio
    sub = text.take(pa.array(cand))
    mixed = pc.count_substring_regex(sub, MIXED_SCRIPT_WORD).to_numpy(zero_copy_only=False).astype(np.int64)
    # the few documents with a mixed word and a Latin i by a Cyrillic letter: count again with those i read as і
    again = np.flatnonzero(mixed > 0)
    if len(again):
        again = again[pc.match_substring_regex(sub.take(pa.array(again)), LATIN_I_BY_CYRILLIC)
                      .to_numpy(zero_copy_only=False)]
    if len(again):
        whole = np.zeros(len(again), bool) if latin_i_rows is None else latin_i_rows[cand[again]]
        fixed = [latin_i_as_cyrillic(t, w) for t, w in zip(sub.take(pa.array(again)).to_pylist(), whole.tolist())]
        mixed[again] = pc.count_substring_regex(pa.array(fixed, pa.string()), MIXED_SCRIPT_WORD).to_numpy(
            zero_copy_only=False)
    words[cand] = mixed
    has = np.flatnonzero(mixed)
    if len(has):
        total = pc.list_value_length(words_batch(sub.take(pa.array(has)))).to_numpy(zero_copy_only=False)
        # a word glued by apostrophes counts once for the tokenizer but may hold two mixed runs: cap at 1
        ratio[cand[has]] = np.minimum(mixed[has] / np.maximum(total, 1), 1.0)
    return words, ratio
