"""Degenerate repetition and non-words: long runs of one unit, and long tokens / encoded blobs.

Two rule families live here, one class each.

``repetition_runs`` (:class:`RepetitionRuns`)
    The longest *run* in the document: one unit repeated at least 3 times in a row, where the unit is

    * one character (``aaaaaaa``, ``！！！！！``, ``=====``, ``哈哈哈哈``): kind ``char``;
    * a pattern of 2–8 characters (``abcabcabc``, ``-=-=-=``, ``😀😂😀😂``, ``|---``): kind ``pattern``;
    * one whitespace-delimited token, with any whitespace between the repeats (``buy buy buy buy``):
      kind ``token`` (a pattern such as ``"buy "`` that is one token plus whitespace is reported as this
      token).

    Signals: ``runs_longest_chars`` (characters from the first repeat to the end of the last),
    ``runs_longest_share`` (that over the document's characters) and ``runs_kind``. Runs shorter than
    ``min_run_chars`` (64) are not measured (the signals are 0 / null): ``...``, a 40-space indentation or
    ``哈哈哈哈哈`` are ordinary text, and not looking for them is what makes the stage cheap (below). Longer
    ordinary runs, such as an 80-column ``====`` rule or a Markdown table's ``|---|---|``, are measured and
    kept by the thresholds.

    Rules (``repetition_run``): a document is removed when its longest run has more than ``max_run_chars``
    characters (2,000: one run that long is a padding or generation failure that fills a training
    sequence with one token; in the bench corpus the only runs above it are a 6,000-character pasted
    binary literal, a spam mail padded with 7,138 semicolons, a base64 attachment of zeros and a Go test
    table, and the next longest is a 700-character run of ``<br>`` in a spam mail), or when the
    run is at least ``min_share_run_chars`` (200) long *and* covers more than ``max_run_share`` (0.5) of the
    document (a document that is mostly one run). The 200-character minimum keeps short posts whose point
    is the repetition (``哈哈哈…`` laughter, ``！！！！``) and 80-column separators in short pages. The ledger
    ``detail`` gives the span: ``run of '<unit>' x<repeats> (<kind>) at <start>-<end>``.

    How it is fast. RE2 has no backreferences, so a run cannot be found by a vectorised regex. Instead the
    UTF-8 bytes of the whole batch are compared with themselves shifted by 1..32 bytes (a unit of <= 8
    characters is <= 32 bytes), 8 bytes at a time with numpy; a periodic stretch of >= ``min_run_chars``
    characters makes at least ``(min_run_chars - 15) // 8`` consecutive aligned 8-byte words equal to their
    shift (6 for 64). Only those stretches (in about 1% of the bench documents) are examined in Python with
    backreference regexes (``(.{k})\\1{2,}`` and a token regex), so Python cost is proportional to the
    repetitive text, not to the corpus. A token run is found when it is periodic in bytes, i.e. when the
    token plus its separator is <= 32 bytes and the separators are identical; a run of one long word with
    varying whitespace is not looked for.

``long_tokens`` (:class:`LongTokens`)
    Non-words: tokens that are too long to be words, and base64 / hex blobs.

    * ``long_tokens_longest_chars``: the longest token that is not a URL. A token is a run of characters
      other than whitespace, the no-break space, and characters from U+0800 on (CJK, Thai and the other
      scripts written without spaces, Indic scripts, symbols, emoji), so a Chinese paragraph is not one
      "token". URLs and URL paths are not counted: the bench corpus has clean pages quoting 1,100–1,400
      character URLs (a Debian handbook page citing an attack's request path, Wikipedia citations with long
      queries, a Rust playground link), and a long URL says nothing about the rest of the page. Tokens
      shorter than ``min_token_chars`` (64) are not measured (0).
    * ``long_tokens_blob_chars`` / ``long_tokens_blob_share``: characters in base64 or hex blobs. A hex
      blob is a run of >= 64 hex digits with at least one digit and one letter (a SHA-256 is 64); a base64
      blob is a run of >= 64 characters of ``[A-Za-z0-9+/]`` (optionally ``=``-padded) with upper- and
      lower-case letters and digits, and at most one ``/`` or ``+`` per 8 characters (URL paths have more).
      Mail attachments are base64 lines of 60–76 characters: each line is one blob.

    Rules, in this order: ``long_token`` when the longest token has more than ``max_token_chars`` characters
    (1,000: C4's rule as implemented by NeMo Curator's ``LongWordFilter``, "catching things like minified
    .js files"; words and identifiers are far shorter, URLs are not counted); ``encoded_blob`` when blobs
    are more than
    ``max_blob_share`` (0.3) of the document's characters and at least ``min_blob_chars`` (256) characters
    (a mail whose attachment is a third of it is mostly undecodable payload: the bench's SpamAssassin mails
    with attachments are at 0.35–0.87; a PGP signature, a few SHA-256 sums in the Debian handbook or test
    vectors in code are at 0.002–0.18 and are kept).

Both families are language-independent; ``by_lang`` overrides any threshold per language as in every rule
stage (none by default: Chinese repetition such as ``哈哈哈`` is handled by the minimum run lengths, and
Chinese text has no long tokens by construction of the token).
"""
from __future__ import annotations

import re

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.stages.base import Check, Decisions, RuleSpec, Stage, StageResult, batch_text, with_columns

MAX_UNIT_CHARS = 8
MAX_UNIT_BYTES = 4 * MAX_UNIT_CHARS
_UNIT_RES = [re.compile(r"(.{%d})\1{2,}" % k, re.S) for k in range(1, MAX_UNIT_CHARS + 1)]
_TOKEN_RUN_RE = re.compile(r"(?<!\S)(\S+)(?:\s+\1(?!\S)){2,}")


def _utf8_view(text: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets relative to the first value, the UTF-8 bytes of all values) of a string array, zero-copy."""
    if text.type != pa.string():
        text = text.cast(pa.string())
    n = len(text)
    bufs = text.buffers()
    offs = np.frombuffer(bufs[1], dtype=np.int32, count=text.offset + n + 1)[text.offset:]
    data = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    return offs - offs[0], data[offs[0]:offs[-1]]


def periodic_windows(text: pa.Array, min_run_chars: int) -> dict[int, list[tuple[int, int]]]:
    """Byte windows (relative to each document) that may hold a run of >= ``min_run_chars`` characters.

    Guarantee: every stretch that is periodic with a period of <= 32 bytes over >= ``min_run_chars`` bytes
    (every run of >= ``min_run_chars`` characters of a unit of <= 8 characters is one) lies inside a window.
    """
    offs, buf = _utf8_view(text)
    n_bytes = len(buf)
    if n_bytes == 0:
        return {}
    # a stretch of L bytes, period q <= 32, holds >= (L - q - 7) // 8 aligned words equal to their shift;
    # with L >= min_run_chars >= 64 and q <= 8 for the shortest (ASCII) case, that is >= g consecutive words
    group = max(1, (min_run_chars - 15) // 8)
    padded = np.zeros(n_bytes + MAX_UNIT_BYTES + 16, np.uint8)
    padded[:n_bytes] = buf
    n_words = (n_bytes + 7) // 8
    base = np.frombuffer(padded, dtype=np.uint64, count=n_words)
    hits = np.zeros(n_words, bool)
    for shift in range(1, MAX_UNIT_BYTES + 1):
        np.logical_or(hits, base == np.frombuffer(padded, dtype=np.uint64, count=n_words, offset=shift), out=hits)
    if not hits.any():
        return {}
    # runs of consecutive hit words of length >= group
    h = hits.view(np.int8)
    starts = np.flatnonzero(h[1:] > h[:-1]) + 1
    ends = np.flatnonzero(h[1:] < h[:-1]) + 1
    if h[0]:
        starts = np.concatenate(([0], starts))
    if h[-1]:
        ends = np.concatenate((ends, [n_words]))
    keep = ends - starts >= group
    starts, ends = starts[keep], ends[keep]
    if not len(starts):
        return {}
    margin = MAX_UNIT_BYTES + 8
    lo = np.maximum(starts * 8 - margin, 0)
    hi = np.minimum(ends * 8 + margin, n_bytes)
    out: dict[int, list[tuple[int, int]]] = {}
    doc_lo = np.searchsorted(offs, lo, side="right") - 1
    doc_hi = np.searchsorted(offs, hi - 1, side="right") - 1
    for a, b, d0, d1 in zip(lo.tolist(), hi.tolist(), doc_lo.tolist(), doc_hi.tolist()):
        for d in range(d0, d1 + 1):  # a window across a document boundary belongs to each document
            s, e = max(a, int(offs[d])), min(b, int(offs[d + 1]))
            if e - s >= min_run_chars:
                out.setdefault(d, []).append((s - int(offs[d]), e - int(offs[d])))
    for d, wins in out.items():  # merge overlapping windows, so a run is never cut in two
        merged = [list(wins[0])]
        for s, e in wins[1:]:
            if s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        out[d] = [tuple(w) for w in merged]
    return out


def longest_run(text: str, windows: list[tuple[int, int]] | None = None, min_run_chars: int = 1):
    """The longest run in ``text`` (or in the given UTF-8 byte windows of it) as
    ``(chars, start, end, unit, repeats, kind)``, or None when there is none of >= ``min_run_chars``."""
    raw = text.encode("utf-8")
    if windows is None:
        windows = [(0, len(raw))]
    best = None
    pos_b, pos_c = 0, 0
    for wb0, wb1 in sorted(windows):
        # move window ends to character boundaries, then turn byte offsets into character offsets
        while 0 < wb0 < len(raw) and 0x80 <= raw[wb0] <= 0xBF:
            wb0 -= 1
        while wb1 < len(raw) and 0x80 <= raw[wb1] <= 0xBF:
            wb1 += 1
        wb0 = max(wb0, pos_b)
        if wb1 <= wb0:
            continue
        c0 = pos_c + len(raw[pos_b:wb0].decode("utf-8"))
        piece = raw[wb0:wb1].decode("utf-8")
        pos_b, pos_c = wb1, c0 + len(piece)
        for k, rx in enumerate(_UNIT_RES, start=1):
            for m in rx.finditer(piece):
                length = m.end() - m.start()
                if best is None or length > best[0]:
                    unit, kind = m.group(1), "char" if k == 1 else "pattern"
                    word = unit.strip()
                    if word != unit and word and not any(ch.isspace() for ch in word):
                        unit, kind = word, "token"  # "buy " repeated is the token "buy" repeated
                    best = (length, c0 + m.start(), c0 + m.end(), unit, length // k, kind)
        for m in _TOKEN_RUN_RE.finditer(piece):
            length = m.end() - m.start()
            if best is None or length > best[0]:
                tok = m.group(1)
                best = (length, c0 + m.start(), c0 + m.end(), tok, len(m.group().split()), "token")
    if best is None or best[0] < min_run_chars:
        return None
    return best


def run_detail(run) -> str:
    length, start, end, unit, repeats, kind = run
    return f"run of {unit[:40]!r} x{repeats} ({kind}) at {start}-{end}"


class RepetitionRuns(Stage):
    """The longest run of one character, one short pattern or one token; removes documents with a run long
    enough to fill a training sequence. Thresholds and the detection method: see the module docstring."""

    kind = "repetition_runs"
    signal_fields = [
        pa.field("runs_longest_chars", pa.int64()),
        pa.field("runs_longest_share", pa.float64()),
        pa.field("runs_kind", pa.string()),
    ]
    rule_specs = [
        RuleSpec("repetition_run", "runs_longest_chars", ("max_run_chars",), "max",
                 "characters in the longest run of one character, pattern or token; detail: the span"),
        RuleSpec("repetition_run_share", "runs_longest_share", ("max_run_share", "min_share_run_chars"), "max",
                 "share of the document in its longest run, for runs of >= min_share_run_chars"),
    ]

    def __init__(self, max_run_chars: int | None = 2000, max_run_share: float | None = 0.5,
                 min_share_run_chars: int = 200, min_run_chars: int = 64, by_lang: dict | None = None,
                 name: str | None = None):
        super().__init__(name)
        if min_run_chars < 24:
            raise ValueError("repetition_runs.min_run_chars must be >= 24")
        if max_run_share is not None and not 0 < max_run_share <= 1:
            raise ValueError("repetition_runs.max_run_share must be in (0, 1] (or null to disable)")
        self.max_run_chars = max_run_chars
        self.max_run_share = max_run_share
        self.min_share_run_chars = min_share_run_chars
        self.min_run_chars = min_run_chars
        self.set_by_lang(by_lang)

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        text = batch_text(batch)
        n = len(text)
        length = pc.utf8_length(text).to_numpy(zero_copy_only=False).astype(np.int64)
        chars = np.zeros(n, np.int64)
        kinds: list[str | None] = [None] * n
        details: list[str | None] = [None] * n
        windows = periodic_windows(text, self.min_run_chars)
        if windows:
            idx = sorted(windows)
            for i, s in zip(idx, text.take(pa.array(idx, pa.int64())).to_pylist()):
                run = longest_run(s, windows[i], self.min_run_chars)
                if run is not None:
                    chars[i], kinds[i], details[i] = run[0], run[5], run_detail(run)
        share = chars / np.maximum(length, 1)
        out = with_columns(batch, {
            "runs_longest_chars": pa.array(chars, pa.int64()),
            "runs_longest_share": pa.array(share, pa.float64()),
            "runs_kind": pa.array(kinds, pa.string()),
        })
        checks = []
        detail = pa.array(details, pa.string())
        if self.max_run_chars is not None:
            thr = self.per_row(batch, "max_run_chars").to_numpy(zero_copy_only=False)
            checks.append(Check("repetition_run", "repetition_run", pa.array(chars > thr),
                                value=pa.array(chars.astype(np.float64)), threshold=pa.array(thr), detail=detail))
        if self.max_run_share is not None:
            thr = self.per_row(batch, "max_run_share").to_numpy(zero_copy_only=False)
            min_len = self.per_row(batch, "min_share_run_chars").to_numpy(zero_copy_only=False)
            failed = (share > thr) & (chars >= min_len)
            checks.append(Check("repetition_run_share", "repetition_run", pa.array(failed),
                                value=pa.array(share), threshold=pa.array(thr), detail=detail))
        return StageResult(out, Decisions.from_checks(n, checks))


# --- long tokens and blobs --------------------------------------------------------------------------------

#: A token: a run of characters that are not whitespace, not a no-break space, and below U+0800. Characters
#: from U+0800 on end a token: they are CJK, Thai and the other scripts written without spaces, Indic
#: scripts, symbols and emoji, never part of an encoded blob or minified code.
def long_token_pattern(min_chars: int) -> str:
    return r"[^\s\x{a0}\x{800}-\x{10ffff}]{%d,}" % min_chars


_NOT_TOKEN = re.compile("[\xa0\u0800-\U0010ffff]+")
_BLOB_RE = re.compile(r"[A-Za-z0-9+/]{64,}={0,2}")
_HEX_RE = re.compile(r"[0-9A-Fa-f]+")


def blob_kind(run: str) -> str | None:
    """``"hex"``, ``"base64"`` or None for a run of >= 64 characters of the base64 alphabet."""
    body = run.rstrip("=")
    has_digit = any(c.isdigit() for c in body)
    if body == run and _HEX_RE.fullmatch(body):
        return "hex" if has_digit and any(c.isalpha() for c in body) else None
    has_upper = any(c.isupper() for c in body)
    has_lower = any(c.islower() for c in body)
    slashes = body.count("/") + body.count("+")
    if has_digit and has_upper and has_lower and slashes * 8 <= len(body):
        return "base64"
    return None


#: A URL (``scheme://...``) or an absolute URL path (``/phpbb/viewtopic.php?t=10&...``) in URL characters.
_URL_RE = re.compile(r"(?:[A-Za-z][A-Za-z0-9+.-]*://|/)[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+")


def is_url(token: str) -> bool:
    """Whether ``token`` is (>= 90% of it) one URL or URL path with a dot, query or %-escape in it. Base64
    has none of ``.?%``, and minified code holds URLs only as a small part of a token."""
    m = max(_URL_RE.finditer(token), key=lambda m: m.end() - m.start(), default=None)
    if m is None or (m.end() - m.start()) * 10 < len(token) * 9:
        return False
    url = m.group()
    return "." in url or "?" in url or "%" in url


def long_tokens_of(text: str, min_chars: int) -> list[str]:
    """The tokens of ``text`` with at least ``min_chars`` characters, URLs excluded."""
    out = []
    for tok in text.split():
        if len(tok) >= min_chars:
            out.extend(p for p in _NOT_TOKEN.split(tok) if len(p) >= min_chars and not is_url(p))
    return out


def blobs_of(tokens: list[str]) -> list[tuple[str, str]]:
    """``(kind, blob)`` for every base64 or hex blob (each lies inside a token of >= 64 characters)."""
    out = []
    for tok in tokens:
        for m in _BLOB_RE.finditer(tok):
            kind = blob_kind(m.group())
            if kind:
                out.append((kind, m.group()))
    return out


def _span_detail(what: str, text: str, piece: str) -> str:
    start = text.find(piece)
    return f"{what} at {start}-{start + len(piece)}: {piece[:40]!r}"


class LongTokens(Stage):
    """Tokens too long to be words, and base64 / hex blobs. Thresholds: see the module docstring."""

    kind = "long_tokens"
    signal_fields = [
        pa.field("long_tokens_longest_chars", pa.int64()),
        pa.field("long_tokens_blob_chars", pa.int64()),
        pa.field("long_tokens_blob_share", pa.float64()),
    ]
    rule_specs = [
        RuleSpec("long_token", "long_tokens_longest_chars", ("max_token_chars",), "max",
                 "characters in the longest non-URL token; detail: where it is"),
        RuleSpec("encoded_blob", "long_tokens_blob_share", ("max_blob_share", "min_blob_chars"), "max",
                 "share of characters in base64 / hex blobs; detail: the first blob"),
    ]

    def __init__(self, max_token_chars: int | None = 1000, max_blob_share: float | None = 0.3,
                 min_blob_chars: int = 256, min_token_chars: int = 64, by_lang: dict | None = None,
                 name: str | None = None):
        super().__init__(name)
        if not 64 <= min_token_chars <= 1000:
            raise ValueError("long_tokens.min_token_chars must be between 64 and 1000 (blobs are >= 64)")
        if max_blob_share is not None and not 0 <= max_blob_share <= 1:
            raise ValueError("long_tokens.max_blob_share must be between 0 and 1 (or null to disable)")
        self.max_token_chars = max_token_chars
        self.max_blob_share = max_blob_share
        self.min_blob_chars = min_blob_chars
        self.min_token_chars = min_token_chars
        self.set_by_lang(by_lang)

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        text = batch_text(batch)
        n = len(text)
        length = pc.utf8_length(text).to_numpy(zero_copy_only=False).astype(np.int64)
        longest = np.zeros(n, np.int64)
        blobs = np.zeros(n, np.int64)
        token_detail: list[str | None] = [None] * n
        blob_detail: list[str | None] = [None] * n
        # one RE2 pass finds the documents with a token of >= min_token_chars; only those are split
        pattern = long_token_pattern(self.min_token_chars)
        cand = np.flatnonzero(pc.match_substring_regex(text, pattern).to_numpy(zero_copy_only=False))
        if len(cand):
            for i, s in zip(cand.tolist(), text.take(pa.array(cand)).to_pylist()):
                toks = long_tokens_of(s, self.min_token_chars)
                if toks:
                    top = max(toks, key=len)
                    longest[i] = len(top)
                    token_detail[i] = _span_detail(f"token of {len(top)} chars", s, top)
                    found = blobs_of(toks)
                    if found:
                        blobs[i] = sum(len(b) for _, b in found)
                        kind, first = found[0]
                        blob_detail[i] = _span_detail(f"{kind} blob of {len(first)} chars (first of {len(found)})",
                                                      s, first)
        share = blobs / np.maximum(length, 1)
        out = with_columns(batch, {
            "long_tokens_longest_chars": pa.array(longest, pa.int64()),
            "long_tokens_blob_chars": pa.array(blobs, pa.int64()),
            "long_tokens_blob_share": pa.array(share, pa.float64()),
        })
        checks = []
        if self.max_token_chars is not None:
            thr = self.per_row(batch, "max_token_chars").to_numpy(zero_copy_only=False)
            checks.append(Check("long_token", "long_tokens", pa.array(longest > thr),
                                value=pa.array(longest.astype(np.float64)), threshold=pa.array(thr),
                                detail=pa.array(token_detail, pa.string())))
        if self.max_blob_share is not None:
            thr = self.per_row(batch, "max_blob_share").to_numpy(zero_copy_only=False)
            min_chars = self.per_row(batch, "min_blob_chars").to_numpy(zero_copy_only=False)
            failed = (share > thr) & (blobs >= min_chars)
            checks.append(Check("encoded_blob", "long_tokens", pa.array(failed), value=pa.array(share),
                                threshold=pa.array(thr), detail=pa.array(blob_detail, pa.string())))
        return StageResult(out, Decisions.from_checks(n, checks))
