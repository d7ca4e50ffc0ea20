"""The numba functions behind the compiled paths of :mod:`dataclean.dedup.minhash` and
:func:`dataclean.dedup.keys.content_key_text` (imported only when numba is; see
:func:`dataclean.dedup.minhash.kernels_enabled`).

Each function works on plain numpy views of Arrow buffers (``offsets`` int64 of n + 1 entries, ``data`` uint8)
and computes exactly what the pyarrow/numpy code next to its caller computes:

* :func:`map_text` — one pass of per-code-point mapping over UTF-8 text (NFKC of the characters whose form is
  known in any context, lower case, digit folding, deletion, runs of separators to one space, trimming): the
  Arrow chains of ``shingle_text`` and ``content_key_text``, driven by tables computed from Arrow itself
  (``minhash._build_char_maps``); :func:`lacking` (``NFKC_INERT | NFKC_MAPPED``) picks the documents Arrow's
  NFKC must normalize first;
* :func:`xxh3_64` — xxHash's XXH3 64-bit hash with seed 0 (the default secret), bit for bit
  ``xxhash.xxh3_64_intdigest``, written from the published algorithm;
* :func:`token_hashes` — the two token streams of a normalized text (words, CJK characters), hashed;
* :func:`stream_shingles` — the shingle hashes of the two streams, word shingles first per document;
* :func:`signatures_affine32` — per-permutation minima of ``a * fmix32(h) + b mod 2**32``;
* :func:`unique_sets` and :func:`jaccard_pairs` — exact Jaccard of shingle sets;
* :func:`prefix_values`, :func:`prefix_postings` and :func:`greedy_prefix` — the greedy clustering of one large component by a
  prefix-filter index (exactly the all-open-pairs greedy of ``MinHashDedup._cluster``, near-linear on chains);
* :func:`components` — connected components (union-find), the smallest member index as label.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from dataclean.text._kernels_numba import _decode, lacking  # noqa: F401  (one UTF-8 decoder for every kernel)

_U64 = np.uint64
_U32 = np.uint32
M32 = _U64(0xFFFFFFFF)

# class bits of minhash._char_classes()
ND = 1  # \p{Nd}
CF = 2  # \p{Cf}
SEP = 4  # [\pP\pS\pZ\p{Cc}\p{Co}\s]
RE2_SPACE = 8  # RE2 \s
CJK = 16  # minhash.CJK_CLASS
ARROW_SPACE = 32  # whitespace for Arrow's utf8_trim_whitespace
NFKC_INERT = 64  # NFKC leaves every string made of such characters unchanged (see minhash._nfkc_tables)
NFKC_MAPPED = 128  # NFKC of the character alone is made of NFKC_INERT characters (see minhash._nfkc_tables)

# map_text modes
MODE_SHINGLE = 0
MODE_CONTENT_KEY = 1

# bits of dataclean.text.script_fold.script_table(): TRAD, and SIMP | KANA
SCRIPT_TRAD = 1
SCRIPT_OTHER = 2 | 4


@njit(cache=True, nogil=True, inline="always")
def _encode(out, o, cp):
    """Write code point ``cp`` as UTF-8 at out[o]; returns the next position."""
    if cp < 0x80:
        out[o] = cp
        return o + 1
    if cp < 0x800:
        out[o] = 0xC0 | (cp >> 6)
        out[o + 1] = 0x80 | (cp & 0x3F)
        return o + 2
    if cp < 0x10000:
        out[o] = 0xE0 | (cp >> 12)
        out[o + 1] = 0x80 | ((cp >> 6) & 0x3F)
        out[o + 2] = 0x80 | (cp & 0x3F)
        return o + 3
    out[o] = 0xF0 | (cp >> 18)
    out[o + 1] = 0x80 | ((cp >> 12) & 0x3F)
    out[o + 2] = 0x80 | ((cp >> 6) & 0x3F)
    out[o + 3] = 0x80 | (cp & 0x3F)
    return o + 4


@njit(cache=True, nogil=True)
def _put(cp, lower, classes, mode, fold, script, count, out, o, start, pending):
    """Map one (NFKC) code point into out[o:]: returns (o, pending). With a ``fold`` table (see
    :func:`map_text`), a CJK character is counted in ``count`` and folded."""
    c = np.int64(lower[cp])
    k = classes[c]
    if (k & CJK) and c < len(fold):
        s = script[c]
        if s & SCRIPT_TRAD:
            count[0] += 1
        elif s & SCRIPT_OTHER:
            count[1] += 1
        c = np.int64(fold[c])
    if mode == MODE_SHINGLE:
        if k & ND:
            c = 48
        elif k & CF:
            return o, pending
        elif k & SEP:
            return o, pending or (o > start)
    else:
        if k & RE2_SPACE:
            return o, pending or (o > start)
        if o == start and (k & ARROW_SPACE):
            return o, pending  # leading whitespace: trimmed
    if o + 5 > len(out):
        return -1, pending  # out of space
    if pending:
        out[o] = 32
        o += 1
    return _encode(out, o, c), False


@njit(cache=True, nogil=True)
def _map_one(data, i, end, lower, classes, nfkc_off, nfkc_pool, expand, mode, ascii_map, fold, script, count, out,  # noqa: C901 (one compiled pass over a character: a branch per mode)
             o):
    """Map the document data[i:end] into out[o:]; returns the position after it, -1 at invalid UTF-8, -2 when
    ``out`` is too short.
    With ``expand``, a NFKC_MAPPED character is first replaced by its NFKC form (nfkc_pool). ``ascii_map`` is
    this mode's row of :func:`ascii_maps`: what the generic path below does to each ASCII byte, looked up.
    ``fold``, ``script``, ``count``: see :func:`map_text` (empty ``fold``: no folding, nothing counted)."""
    start = o
    pending = False  # a separator run waits for the next kept character (never emitted at the ends)
    while i < end:
        b = data[i]
        if b < 0x80:
            v = ascii_map[b]
            if v >= 0:  # written (lower-cased, digit folded)
                i += 1
                if o + 2 > len(out):
                    return -2
                if pending:
                    out[o] = 32
                    o += 1
                    pending = False
                out[o] = v
                o += 1
                continue
            if v == ASCII_SEPARATOR:
                i += 1
                if o > start:
                    pending = True
                continue
            cp = np.int64(b)  # ASCII_GENERIC
            size = 1
        else:
            cp, size = _decode(data, i, end)
            if size == 0:
                return -1
        i += size
        if expand and (classes[cp] & NFKC_MAPPED):  # (rare: a function call per character is fine)
            for q in range(nfkc_off[cp], nfkc_off[cp + 1]):
                o, pending = _put(np.int64(nfkc_pool[q]), lower, classes, mode, fold, script, count, out, o, start,
                                  pending)
                if o < 0:
                    return -2
            continue
        # the common case: _put written out by hand. Calling it, even with inline="always", made shingle_text
        # 2.7x slower (0.067 -> 0.181 s CPU on bench part-00000, benchmarks/profile_dedup.py)
        c = np.int64(lower[cp])
        k = classes[c]
        if (k & CJK) and c < len(fold):  # (a Han character keeps its classes when folded: CJK only)
            s = script[c]
            if s & SCRIPT_TRAD:
                count[0] += 1
            elif s & SCRIPT_OTHER:
                count[1] += 1
            c = np.int64(fold[c])
        if mode == MODE_SHINGLE:
            if k & ND:
                c = 48
            elif k & CF:
                continue
            elif k & SEP:
                if o > start:
                    pending = True
                continue
        else:
            if k & RE2_SPACE:
                if o > start:
                    pending = True
                continue
            if o == start and (k & ARROW_SPACE):
                continue  # leading whitespace: trimmed
        if o + 5 > len(out):
            return -2
        if pending:
            out[o] = 32
            o += 1
            pending = False
        o = _encode(out, o, c)
    if mode == MODE_CONTENT_KEY:
        # trailing Arrow whitespace (a collapsed \s run is pending, never written)
        while o > start:
            j = o - 1
            while j > start and (out[j] & 0xC0) == 0x80:
                j -= 1
            cp, size = _decode(out, j, o)
            if size == 0 or not (classes[cp] & ARROW_SPACE):
                break
            o = j
    return o


ASCII_SEPARATOR = -1  # ascii_maps: a separator (MODE_SHINGLE) or RE2 \s (MODE_CONTENT_KEY): starts a space run
ASCII_GENERIC = -2  # ascii_maps: left to the generic path (a deletion, Arrow whitespace that is not RE2 \s)


@njit(cache=True, nogil=True)
def ascii_maps(lower, classes):
    """int16 (2, 128): per mode, what :func:`_map_one` does to each ASCII byte: the byte it writes, or
    ASCII_SEPARATOR, or ASCII_GENERIC (computed by the same rules as the generic path, from the same tables)."""
    out = np.empty((2, 128), np.int16)
    for b in range(128):
        c = np.int64(lower[b])
        k = classes[c]
        if c >= 0x80 or (classes[b] & NFKC_MAPPED):
            out[MODE_SHINGLE, b] = ASCII_GENERIC
            out[MODE_CONTENT_KEY, b] = ASCII_GENERIC
            continue
        if k & ND:
            out[MODE_SHINGLE, b] = 48
        elif k & CF:
            out[MODE_SHINGLE, b] = ASCII_GENERIC
        elif k & SEP:
            out[MODE_SHINGLE, b] = ASCII_SEPARATOR
        else:
            out[MODE_SHINGLE, b] = c
        if k & RE2_SPACE:
            out[MODE_CONTENT_KEY, b] = ASCII_SEPARATOR
        elif k & ARROW_SPACE:
            out[MODE_CONTENT_KEY, b] = ASCII_GENERIC
        else:
            out[MODE_CONTENT_KEY, b] = c
    return out


@njit(cache=True, nogil=True)
def map_text(data, offsets, sub_data, sub_offsets, sub_index, lower, classes, nfkc_off, nfkc_pool, mode, fold,
             script, counts, out, out_offsets):
    """Map every document into ``out``, filling ``out_offsets`` (int64, n + 1); returns 0, -1 at invalid
    UTF-8, -2 when ``out`` is too short (the caller retries with a longer one).

    Document ``d`` is read from (data, offsets) at ``d``, or, when ``sub_index[d] >= 0``, from (sub_data,
    sub_offsets) at ``sub_index[d]`` (documents normalized by Arrow's NFKC). In MODE_SHINGLE, the others are
    documents of NFKC_INERT and NFKC_MAPPED characters only (:func:`lacking` of ``NFKC_INERT | NFKC_MAPPED`` is
    0), whose mapped characters are replaced here by their NFKC form: that is their NFKC (see
    ``minhash._nfkc_tables``).

    MODE_SHINGLE (``shingle_text``): NFKC, lower case, then a decimal digit (``\\p{Nd}``) becomes ``0``, a
    format character (``\\p{Cf}``) is deleted, a run of separators becomes one space; spaces at both ends
    are dropped.
    MODE_CONTENT_KEY (``content_key_text``): lower case, a run of RE2 ``\\s`` becomes one space, then Arrow
    whitespace is trimmed from both ends.

    Script folding (``fold_scripts``, :mod:`dataclean.text.script_fold`): with a non-empty ``fold`` (int32,
    ``script_fold.t2s_table()``), every CJK character ``c < len(fold)`` of the result is written as ``fold[c]``,
    and counted first by its ``script`` bits (``script_fold.script_table()``): ``counts[d, 0]`` the
    traditional-only characters of document ``d``, ``counts[d, 1]`` the simplified-only ones and kana, of its
    mapped text before folding (``script_fold.script_counts`` of the unfolded result). Empty ``fold``: nothing is
    folded and ``counts`` (then of any shape) is left alone.
    """
    n = len(offsets) - 1
    o = 0
    out_offsets[0] = 0
    expand = mode == MODE_SHINGLE
    amap = ascii_maps(lower, classes)[mode]
    count = np.zeros(2, np.int64)
    folding = len(fold) > 0
    for d in range(n):
        src = sub_index[d] if len(sub_index) else -1
        count[0] = 0
        count[1] = 0
        if src >= 0:
            o = _map_one(sub_data, sub_offsets[src], sub_offsets[src + 1], lower, classes, nfkc_off, nfkc_pool,
                         False, mode, amap, fold, script, count, out, o)
        else:
            o = _map_one(data, offsets[d], offsets[d + 1], lower, classes, nfkc_off, nfkc_pool, expand, mode,
                         amap, fold, script, count, out, o)
        if o < 0:
            return o
        out_offsets[d + 1] = o
        if folding:
            counts[d, 0] = count[0]
            counts[d, 1] = count[1]
    return 0


# ---------------------------------------------------------------- XXH3, 64 bits, seed 0

P32_1 = _U64(0x9E3779B1)
P32_2 = _U64(0x85EBCA77)
P32_3 = _U64(0xC2B2AE3D)
P64_1 = _U64(0x9E3779B185EBCA87)
P64_2 = _U64(0xC2B2AE3D27D4EB4F)
P64_3 = _U64(0x165667B19E3779F9)
P64_4 = _U64(0x85EBCA77C2B2AE63)
P64_5 = _U64(0x27D4EB2F165667C5)
PMX1 = _U64(0x165667919E3779F9)
PMX2 = _U64(0x9FB21C651E98DF25)


@njit(cache=True, nogil=True)
def _r64(b, i):
    return (_U64(b[i]) | (_U64(b[i + 1]) << _U64(8)) | (_U64(b[i + 2]) << _U64(16)) | (_U64(b[i + 3]) << _U64(24))
            | (_U64(b[i + 4]) << _U64(32)) | (_U64(b[i + 5]) << _U64(40)) | (_U64(b[i + 6]) << _U64(48))
            | (_U64(b[i + 7]) << _U64(56)))


@njit(cache=True, nogil=True)
def _r32(b, i):
    return _U64(b[i]) | (_U64(b[i + 1]) << _U64(8)) | (_U64(b[i + 2]) << _U64(16)) | (_U64(b[i + 3]) << _U64(24))


@njit(cache=True, nogil=True)
def _mul128_fold64(a, b):
    """Low 64 bits XOR high 64 bits of the 128-bit product a * b."""
    a_lo = a & M32
    a_hi = a >> _U64(32)
    b_lo = b & M32
    b_hi = b >> _U64(32)
    lo_lo = a_lo * b_lo
    hi_lo = a_hi * b_lo
    lo_hi = a_lo * b_hi
    hi_hi = a_hi * b_hi
    cross = (lo_lo >> _U64(32)) + (hi_lo & M32) + lo_hi
    upper = (hi_lo >> _U64(32)) + (cross >> _U64(32)) + hi_hi
    lower = (cross << _U64(32)) | (lo_lo & M32)
    return lower ^ upper


@njit(cache=True, nogil=True)
def _avalanche(h):
    h = h ^ (h >> _U64(37))
    h = h * PMX1
    return h ^ (h >> _U64(32))


@njit(cache=True, nogil=True)
def _xxh64_avalanche(h):
    h = h ^ (h >> _U64(33))
    h = h * P64_2
    h = h ^ (h >> _U64(29))
    h = h * P64_3
    return h ^ (h >> _U64(32))


@njit(cache=True, nogil=True)
def _rotl(x, r):
    return (x << _U64(r)) | (x >> _U64(64 - r))


@njit(cache=True, nogil=True)
def _swap64(x):
    r = _U64(0)
    for k in range(8):
        r = (r << _U64(8)) | ((x >> _U64(8 * k)) & _U64(0xFF))
    return r


@njit(cache=True, nogil=True)
def _mix16(b, i, secret, s):
    return _mul128_fold64(_r64(b, i) ^ _r64(secret, s), _r64(b, i + 8) ^ _r64(secret, s + 8))


@njit(cache=True, nogil=True)
def _xxh3_long(b, start, length, secret):
    acc = np.empty(8, np.uint64)
    acc[0] = P32_3
    acc[1] = P64_1
    acc[2] = P64_2
    acc[3] = P64_3
    acc[4] = P64_4
    acc[5] = P32_2
    acc[6] = P64_5
    acc[7] = P32_1
    secret_size = len(secret)
    stripes_per_block = (secret_size - 64) // 8
    block_len = 64 * stripes_per_block
    nb_blocks = (length - 1) // block_len
    for nb in range(nb_blocks):
        base = start + nb * block_len
        for s in range(stripes_per_block):
            _accumulate_512(acc, b, base + s * 64, secret, s * 8)
        _scramble(acc, secret, secret_size - 64)
    nb_stripes = ((length - 1) - block_len * nb_blocks) // 64
    base = start + nb_blocks * block_len
    for s in range(nb_stripes):
        _accumulate_512(acc, b, base + s * 64, secret, s * 8)
    _accumulate_512(acc, b, start + length - 64, secret, secret_size - 64 - 7)
    result = _U64(length) * P64_1
    for k in range(4):
        result += _mul128_fold64(acc[2 * k] ^ _r64(secret, 11 + 16 * k), acc[2 * k + 1] ^ _r64(secret, 11 + 16 * k + 8))
    return _avalanche(result)


@njit(cache=True, nogil=True)
def _accumulate_512(acc, b, i, secret, s):
    for k in range(8):
        v = _r64(b, i + 8 * k)
        key = v ^ _r64(secret, s + 8 * k)
        acc[k ^ 1] += v
        acc[k] += (key & M32) * (key >> _U64(32))


@njit(cache=True, nogil=True)
def _scramble(acc, secret, s):
    for k in range(8):
        a = acc[k]
        a = a ^ (a >> _U64(47))
        a = a ^ _r64(secret, s + 8 * k)
        acc[k] = a * P32_1


@njit(cache=True, nogil=True, inline="always")
def xxh3_64(b, start, length, secret):
    """XXH3 64-bit of b[start:start + length] with seed 0 (``secret`` = the default 192-byte secret)."""
    if length <= 16:
        if length > 8:
            flip1 = _r64(secret, 24) ^ _r64(secret, 32)
            flip2 = _r64(secret, 40) ^ _r64(secret, 48)
            lo = _r64(b, start) ^ flip1
            hi = _r64(b, start + length - 8) ^ flip2
            acc = _U64(length) + _swap64(lo) + hi + _mul128_fold64(lo, hi)
            return _avalanche(acc)
        if length >= 4:
            in1 = _r32(b, start)
            in2 = _r32(b, start + length - 4)
            flip = _r64(secret, 8) ^ _r64(secret, 16)
            h = (in2 + (in1 << _U64(32))) ^ flip
            h = h ^ (_rotl(h, 49) ^ _rotl(h, 24))
            h = h * PMX2
            h = h ^ ((h >> _U64(35)) + _U64(length))
            h = h * PMX2
            return h ^ (h >> _U64(28))
        if length > 0:
            c1 = _U64(b[start])
            c2 = _U64(b[start + (length >> 1)])
            c3 = _U64(b[start + length - 1])
            combined = (c1 << _U64(16)) | (c2 << _U64(24)) | c3 | (_U64(length) << _U64(8))
            flip = (_r32(secret, 0) ^ _r32(secret, 4))
            return _xxh64_avalanche(combined ^ flip)
        return _xxh64_avalanche(_r64(secret, 56) ^ _r64(secret, 64))
    if length <= 128:
        acc = _U64(length) * P64_1
        if length > 32:
            if length > 64:
                if length > 96:
                    acc += _mix16(b, start + 48, secret, 96)
                    acc += _mix16(b, start + length - 64, secret, 112)
                acc += _mix16(b, start + 32, secret, 64)
                acc += _mix16(b, start + length - 48, secret, 80)
            acc += _mix16(b, start + 16, secret, 32)
            acc += _mix16(b, start + length - 32, secret, 48)
        acc += _mix16(b, start, secret, 0)
        acc += _mix16(b, start + length - 16, secret, 16)
        return _avalanche(acc)
    if length <= 240:
        acc = _U64(length) * P64_1
        for k in range(8):
            acc += _mix16(b, start + 16 * k, secret, 16 * k)
        acc_end = _mix16(b, start + length - 16, secret, 136 - 17)
        acc = _avalanche(acc)
        for k in range(8, length // 16):
            acc_end += _mix16(b, start + 16 * k, secret, 16 * (k - 8) + 3)
        return _avalanche(acc + acc_end)
    return _xxh3_long(b, start, length, secret)


@njit(cache=True, nogil=True)
def xxh3_64_many(b, offsets, secret):
    """xxh3_64 of every b[offsets[i]:offsets[i + 1]] (tests)."""
    n = len(offsets) - 1
    out = np.empty(n, np.uint64)
    for i in range(n):
        out[i] = xxh3_64(b, offsets[i], offsets[i + 1] - offsets[i], secret)
    return out


# ---------------------------------------------------------------- tokens and shingles


@njit(cache=True, nogil=True)
def token_hashes(data, offsets, classes, secret):
    """Token hashes of the two streams of ``shingle_text``-normalized documents: (word hashes, words per
    document, CJK hashes, CJK characters per document); None-like (empty counts of -1) at invalid UTF-8.

    A word is a maximal run of code points that are neither U+0020 nor CJK; a CJK token is one CJK
    character."""
    n = len(offsets) - 1
    # capacities: a word ends at a space, a CJK character or a document's end; a CJK character is >= 3 bytes
    spaces = 0
    wide = 0
    for i in range(offsets[0], offsets[n]):
        spaces += data[i] == 32
        wide += data[i] >= 0xE0
    word_tok = np.empty(spaces + wide + n, np.uint64)
    cjk_tok = np.empty(wide, np.uint64)
    word_counts = np.zeros(n, np.int64)
    cjk_counts = np.zeros(n, np.int64)
    nw = 0
    nc = 0
    for d in range(n):
        i = offsets[d]
        end = offsets[d + 1]
        start = -1
        while i <= end:
            if i < end:
                b = data[i]
                if b < 0x80:  # (no ASCII character is CJK)
                    size = 1
                    cjk = False
                    boundary = b == 32
                else:
                    cp, size = _decode(data, i, end)
                    if size == 0:
                        word_counts[:] = -1
                        return word_tok[:0], word_counts, cjk_tok[:0], cjk_counts
                    cjk = (classes[cp] & CJK) != 0
                    boundary = cjk
            else:
                size = 1
                cjk = False
                boundary = True
            if boundary:
                if start >= 0:
                    word_tok[nw] = xxh3_64(data, start, i - start, secret)
                    nw += 1
                    word_counts[d] += 1
                    start = -1
                if cjk:
                    cjk_tok[nc] = xxh3_64(data, i, size, secret)
                    nc += 1
                    cjk_counts[d] += 1
            elif start < 0:
                start = i
            i += size
    return word_tok[:nw], word_counts, cjk_tok[:nc], cjk_counts


SHINGLE_INIT = _U64(0x9E3779B97F4A7C15)
SHINGLE_MUL = _U64(0xFF51AFD7ED558CCD)
SPLITMIX_MUL1 = _U64(0xBF58476D1CE4E5B9)
SPLITMIX_MUL2 = _U64(0x94D049BB133111EB)


@njit(cache=True, nogil=True)
def _shingle64(tok, s, k):
    """The shingle hash of tokens tok[s:s + k] before its truncation to 32 bits (decontamination's keys)."""
    h = SHINGLE_INIT ^ _U64(k)
    for t in range(s, s + k):
        h = (h ^ tok[t]) * SHINGLE_MUL
        h = h ^ (h >> _U64(31))
    h = h ^ (h >> _U64(30))
    h = h * SPLITMIX_MUL1
    h = h ^ (h >> _U64(27))
    h = h * SPLITMIX_MUL2
    h = h ^ (h >> _U64(31))
    return h


@njit(cache=True, nogil=True)
def _n_shingles(count, n, full_only):
    if count >= n:
        return count - n + 1
    return 0 if full_only else min(count, 1)


@njit(cache=True, nogil=True)
def _stream(word_tok, word_counts, cjk_tok, cjk_counts, word_n, char_n, full_only, values):
    """Fill ``values`` (uint32: truncated hashes; uint64: whole) with every document's word shingles, then its
    CJK-character shingles; a stream shorter than its n gives one shingle of all its tokens, or none with
    ``full_only``. Returns the offsets."""
    n = len(word_counts)
    offsets = np.zeros(n + 1, np.int64)
    for d in range(n):
        offsets[d + 1] = (offsets[d] + _n_shingles(word_counts[d], word_n, full_only)
                          + _n_shingles(cjk_counts[d], char_n, full_only))
    o = 0
    ws = 0
    cs = 0
    for d in range(n):
        for tok, start, count, k in ((word_tok, ws, word_counts[d], word_n), (cjk_tok, cs, cjk_counts[d], char_n)):
            if count >= k:
                for s in range(start, start + count - k + 1):
                    values[o] = _shingle64(tok, s, k) & M32 if values.itemsize == 4 else _shingle64(tok, s, k)
                    o += 1
            elif count > 0 and not full_only:
                values[o] = _shingle64(tok, start, count) & M32 if values.itemsize == 4 else \
                    _shingle64(tok, start, count)
                o += 1
        ws += word_counts[d]
        cs += cjk_counts[d]
    return offsets


@njit(cache=True, nogil=True)
def _total(word_counts, cjk_counts, word_n, char_n, full_only):
    t = 0
    for d in range(len(word_counts)):
        t += _n_shingles(word_counts[d], word_n, full_only) + _n_shingles(cjk_counts[d], char_n, full_only)
    return t


@njit(cache=True, nogil=True)
def stream_shingles(word_tok, word_counts, cjk_tok, cjk_counts, word_n, char_n):
    """(values uint32, offsets int64): per document its word shingles, then its CJK-character shingles."""
    values = np.empty(_total(word_counts, cjk_counts, word_n, char_n, False), np.uint32)
    return values, _stream(word_tok, word_counts, cjk_tok, cjk_counts, word_n, char_n, False, values)


@njit(cache=True, nogil=True)
def stream_shingles64(word_tok, word_counts, cjk_tok, cjk_counts, word_n, char_n):
    """:func:`stream_shingles` with the full 64-bit hashes, and only whole n-grams: a stream shorter than its n
    gives no shingle (decontamination matches n-grams, never a short text as a whole)."""
    values = np.empty(_total(word_counts, cjk_counts, word_n, char_n, True), np.uint64)
    return values, _stream(word_tok, word_counts, cjk_tok, cjk_counts, word_n, char_n, True, values)


@njit(cache=True, nogil=True)
def signatures_affine32(values, offsets, a, b):
    """(n_docs, num_perm) uint32: min over the document's values h of a * fmix32(h) + b (mod 2**32);
    2**32 - 1 for a document without values. (numba widens uint32 arithmetic to 64 bits: every product is
    truncated back to 32 bits explicitly.)"""
    n = len(offsets) - 1
    p = len(a)
    out = np.full((n, p), np.uint32(0xFFFFFFFF), np.uint32)
    for d in range(n):
        row = out[d]
        for s in range(offsets[d], offsets[d + 1]):
            h = _U32(values[s])
            h = _U32(h ^ (h >> _U32(16)))
            h = _U32(h * _U32(0x85EBCA6B))
            h = _U32(h ^ (h >> _U32(13)))
            h = _U32(h * _U32(0xC2B2AE35))
            h = _U32(h ^ (h >> _U32(16)))
            for j in range(p):
                v = _U32(a[j] * h + b[j])
                if v < row[j]:
                    row[j] = v
    return out


# ---------------------------------------------------------------- exact Jaccard


@njit(cache=True, nogil=True)
def _sort_u32(a, tmp):
    """Sort the uint32 array ``a`` in place (``tmp``: scratch of the same length): insertion sort when short,
    else an LSD radix sort on bytes, skipping the passes where every value has the same byte."""
    m = len(a)
    if m < 48:
        for i in range(1, m):
            x = a[i]
            j = i - 1
            while j >= 0 and a[j] > x:
                a[j + 1] = a[j]
                j -= 1
            a[j + 1] = x
        return
    counts = np.zeros(256, np.int64)
    src = a
    dst = tmp
    for shift in range(0, 32, 8):
        counts[:] = 0
        for i in range(m):
            counts[(src[i] >> shift) & 0xFF] += 1
        if counts[(src[0] >> shift) & 0xFF] == m:
            continue
        total = 0
        for k in range(256):
            c = counts[k]
            counts[k] = total
            total += c
        for i in range(m):
            x = src[i]
            b = (x >> shift) & 0xFF
            dst[counts[b]] = x
            counts[b] += 1
        src, dst = dst, src
    if src is not a:  # (an odd number of passes ran)
        a[:] = src


@njit(cache=True, nogil=True)
def unique_sets(values, offsets):
    """Per document, its values sorted without repeats: (set values, set offsets)."""
    n = len(offsets) - 1
    out = np.empty(len(values), np.uint32)
    out_offsets = np.zeros(n + 1, np.int64)
    longest = 0
    for d in range(n):
        longest = max(longest, offsets[d + 1] - offsets[d])
    seg = np.empty(longest, np.uint32)
    tmp = np.empty(longest, np.uint32)
    o = 0
    for d in range(n):
        m = offsets[d + 1] - offsets[d]
        for k in range(m):
            seg[k] = values[offsets[d] + k]
        _sort_u32(seg[:m], tmp[:m])
        for k in range(m):
            if k == 0 or seg[k] != seg[k - 1]:
                out[o] = seg[k]
                o += 1
        out_offsets[d + 1] = o
    return out[:o], out_offsets


@njit(cache=True, nogil=True)
def _jaccard_at_least(sets, offsets, i, j, t):
    """:func:`_jaccard` of nodes ``i`` and ``j`` when it is ``>= t``, else -1.0, leaving the merge as soon as the
    values of one set that found no match in the other leave too few for an intersection of
    ``t / (1 + t) * (|x| + |y|)`` (``I / (|x| + |y| - I) >= t``), with the margin of :func:`prefix_length`, so
    that the exit never fires for a pair that reaches ``t``. In the greedy clustering of a 50,000-document
    chain, 74% of the 168,000 Jaccards computed are below ``t``."""
    x0 = offsets[i]
    x1 = offsets[i + 1]
    y0 = offsets[j]
    y1 = offsets[j + 1]
    nx = x1 - x0
    ny = y1 - y0
    if nx == 0 and ny == 0:
        return 1.0 if t <= 1.0 else -1.0
    need = np.int64(np.ceil(t / (1.0 + t) * (nx + ny) * (1.0 - 1e-9)))
    miss_x = nx - need  # how many values of x may find no match
    miss_y = ny - need
    if miss_x < 0 or miss_y < 0:
        return -1.0
    inter = 0
    while x0 < x1 and y0 < y1:
        a = sets[x0]
        b = sets[y0]
        if a == b:
            inter += 1
            x0 += 1
            y0 += 1
        elif a < b:
            x0 += 1
            miss_x -= 1
            if miss_x < 0:
                return -1.0
        else:
            y0 += 1
            miss_y -= 1
            if miss_y < 0:
                return -1.0
    sim = inter / (nx + ny - inter)
    return sim if sim >= t else -1.0


@njit(cache=True, nogil=True)
def _jaccard(sets, offsets, i, j):
    """Exact Jaccard of the sets of nodes ``i`` and ``j`` (1.0 for two empty sets): no early exit at t = 0."""
    return _jaccard_at_least(sets, offsets, i, j, 0.0)


@njit(cache=True, nogil=True)
def jaccard_pairs(sets, offsets, u, v):
    """Exact Jaccard of the sets of nodes u[k] and v[k] (1.0 for two empty sets)."""
    out = np.empty(len(u), np.float64)
    for k in range(len(u)):
        out[k] = _jaccard(sets, offsets, u[k], v[k])
    return out


@njit(cache=True, nogil=True)
def jaccard_one(sets, offsets, i, j):
    return _jaccard(sets, offsets, i, j)


# -- the greedy clustering of a large component (MinHashDedup._cluster) ---------------------------------------

@njit(cache=True, nogil=True)
def prefix_length(m, t):
    """How many of its rarest tokens a set of ``m`` values indexes so that any pair of sets with exact Jaccard
    ``>= t`` (as :func:`_jaccard` computes it in float64) shares one of its indexed tokens: ``m - alpha + 1``,
    ``alpha`` a lower bound of the overlap of such a pair. ``I/U >= t`` gives ``I >= t * U >= t * m``; the
    factor ``1 - 1e-9`` absorbs the rounding of the float64 division and of this product (a prefix one token
    longer in the rare case it matters, never one too short). 0 for t > 1."""
    alpha = np.int64(np.ceil(t * m * (1.0 - 1e-9)))
    if alpha < 1:
        alpha = 1
    p = m - alpha + 1
    return p if p > 0 else 0


@njit(cache=True, nogil=True, inline="always")
def _sketch_slots(v, shift):
    x = np.uint64(v)
    return (np.int64((x * np.uint64(0x9E3779B97F4A7C15)) >> shift),
            np.int64((x * np.uint64(0xC2B2AE3D27D4EB4F)) >> shift))


@njit(cache=True, nogil=True)
def _select_smallest(a, p):
    """Reorder ``a`` in place so that its ``p`` smallest values come first (in no particular order):
    quickselect, median-of-three pivots."""
    lo = 0
    hi = len(a) - 1
    while lo < hi:
        mid = (lo + hi) // 2
        x, y, z = a[lo], a[mid], a[hi]
        pivot = max(min(x, y), min(max(x, y), z))
        i, j = lo, hi
        while i <= j:
            while a[i] < pivot:
                i += 1
            while a[j] > pivot:
                j -= 1
            if i <= j:
                a[i], a[j] = a[j], a[i]
                i += 1
                j -= 1
        if p - 1 <= j:
            hi = j
        elif p - 1 >= i:
            lo = i
        else:
            return


@njit(cache=True, nogil=True)
def prefix_sizes(offsets, group, t):
    """Where each position of ``group`` writes its indexed values (see :func:`prefix_values`): ``pre_off`` (its
    tokens in ``pre_tok``; an empty set has one token of its own) and ``pack_off`` (its values in ``packed``;
    an empty set has none)."""
    g = len(group)
    pre_off = np.zeros(g + 1, np.int64)
    pack_off = np.zeros(g + 1, np.int64)
    for x in range(g):
        m = offsets[group[x] + 1] - offsets[group[x]]
        p = prefix_length(m, t) if m else 0
        pre_off[x + 1] = pre_off[x] + (p if m else 1)
        pack_off[x + 1] = pack_off[x] + p
    return pre_off, pack_off


@njit(cache=True, nogil=True)
def prefix_sketch(sets, offsets, group, lo, hi, bits):
    """The count-min sketch of :func:`prefix_values` over the positions ``lo:hi`` of ``group`` (the sketches of
    consecutive slices add up to that of the whole)."""
    sketch = np.zeros((2, 1 << bits), np.int32)
    shift = np.uint64(64 - bits)
    for x in range(lo, hi):
        d = group[x]
        for k in range(offsets[d], offsets[d + 1]):
            a, b = _sketch_slots(sets[k], shift)
            sketch[0, a] += 1
            sketch[1, b] += 1
    return sketch


@njit(cache=True, nogil=True)
def prefix_pack(sets, offsets, group, pack_off, sketch, lo, hi, packed):
    """The indexed values of the positions ``lo:hi`` of ``group`` (see :func:`prefix_values`), written to their
    places ``pack_off`` in ``packed``."""
    bits = np.int64(np.log2(sketch.shape[1]) + 0.5)
    shift = np.uint64(64 - bits)
    longest = 0
    for x in range(lo, hi):
        longest = max(longest, offsets[group[x] + 1] - offsets[group[x]])
    buf = np.empty(longest, np.uint64)
    for x in range(lo, hi):
        d = group[x]
        m = offsets[d + 1] - offsets[d]
        p = pack_off[x + 1] - pack_off[x]
        if m == 0:
            continue
        for k in range(m):
            v = sets[offsets[d] + k]
            a, b = _sketch_slots(v, shift)
            buf[k] = (np.uint64(min(sketch[0, a], sketch[1, b])) << np.uint64(32)) | np.uint64(v)
        if p < m:
            _select_smallest(buf[:m], p)
        o = pack_off[x]
        for k in range(p):
            packed[o + k] = ((buf[k] & np.uint64(0xFFFFFFFF)) << np.uint64(32)) | np.uint64(x)


@njit(cache=True, nogil=True)
def prefix_values(sets, offsets, group, t, bits):
    """First half of the prefix-filter index of the shingle sets of the nodes ``group`` (one component, in
    preference order) for Jaccard threshold ``t > 0`` (Chaudhuri et al. 2006; Bayardo et al. 2007, "AllPairs");
    :func:`prefix_postings` is the second.

    Every set orders its values by one total order, (estimated number of member sets holding the value, value):
    rarest first, so that the indexed values have short posting lists. The count is a count-min sketch of two
    rows of ``2**bits`` counters: a function of the value alone, so the order is the same for every set (any
    fixed order is correct; a better estimate only makes the lists shorter). Each member indexes its
    :func:`prefix_length` first values; two sets with Jaccard >= t always share an indexed value (the first
    value of their intersection in that order comes after at most ``|x| - I`` values of ``x``, and ``I >=
    alpha``). A set with no value indexes a token of its own (two empty sets have Jaccard 1).

    Returns ``pre_off`` (where each position's tokens go in ``pre_tok``) and ``packed``: ``value << 32 |
    position`` per indexed value of a non-empty set, for the caller to sort (numpy's sort is several times
    faster than numba's) and give to :func:`prefix_postings`. In one thread; the caller may instead run
    :func:`prefix_sizes`, then :func:`prefix_sketch` and :func:`prefix_pack` over slices in threads (the same
    arrays)."""
    g = len(group)
    pre_off, pack_off = prefix_sizes(offsets, group, t)
    sketch = prefix_sketch(sets, offsets, group, 0, g, bits)
    packed = np.empty(pack_off[g], np.uint64)
    prefix_pack(sets, offsets, group, pack_off, sketch, 0, g, packed)
    return pre_off, packed


@njit(cache=True, nogil=True)
def prefix_postings(pre_off, packed):
    """Second half of the prefix-filter index (see :func:`prefix_values`; ``packed`` sorted): a token per
    distinct indexed value, in value order, and one more shared by the empty sets.

    Returns (pre_tok, post_off, post_pos): the tokens of each position (``pre_tok[pre_off[x]:pre_off[x + 1]]``,
    in no particular order) and per token the positions indexing it (``post_pos[post_off[k]:post_off[k + 1]]``,
    ascending)."""
    g = len(pre_off) - 1
    n_tok = 0
    for r in range(len(packed)):
        if r == 0 or (packed[r] >> np.uint64(32)) != (packed[r - 1] >> np.uint64(32)):
            n_tok += 1
    empty_tok = n_tok
    post_off = np.zeros(n_tok + 2, np.int64)
    pre_tok = np.empty(pre_off[g], np.int64)
    post_pos = np.empty(pre_off[g], np.int64)
    fill = pre_off[:-1].copy()
    tok = -1
    for r in range(len(packed)):
        if r == 0 or (packed[r] >> np.uint64(32)) != (packed[r - 1] >> np.uint64(32)):
            tok += 1
        x = np.int64(packed[r] & np.uint64(0xFFFFFFFF))
        post_pos[r] = x
        post_off[tok + 1] = r + 1
        pre_tok[fill[x]] = tok
        fill[x] += 1
    r = len(packed)
    for x in range(g):  # the empty sets, after every value token
        if fill[x] < pre_off[x + 1]:
            pre_tok[fill[x]] = empty_tok
            fill[x] += 1
            post_pos[r] = x
            r += 1
    post_off[n_tok + 1] = r
    return pre_tok, post_off, post_pos


@njit(cache=True, nogil=True)
def greedy_prefix(sets, offsets, group, pre_off, pre_tok, post_off, post_pos, t):
    """The greedy clustering of one component (``group``: its nodes in preference order) through its
    :func:`prefix_index`: each still open node in turn becomes a representative and takes every open node
    whose exact Jaccard to it is ``>= t``. A representative computes the Jaccard only with the open nodes that
    share an indexed token with it (the index holds every pair that can reach ``t``) and whose set size allows
    it (``min(|x|, |y|) >= t * max(|x|, |y|)``, with the margin of :func:`prefix_length`), so the result is that
    of comparing it with every open node. Closed nodes are dropped from a posting list when it is read.

    Returns, per position of ``group``, the position of its representative and the Jaccard to it (1.0 for a
    representative)."""
    g = len(group)
    rep = np.arange(g)
    sim = np.ones(g, np.float64)
    is_open = np.ones(g, np.bool_)
    seen = np.full(g, -1, np.int64)  # the last representative that looked at the node
    live = post_off[1:] - post_off[:-1]
    size = np.empty(g, np.int64)
    for x in range(g):
        size[x] = offsets[group[x] + 1] - offsets[group[x]]
    tl = t * (1.0 - 1e-9)
    remaining = g
    for i in range(g):
        if not is_open[i]:
            continue
        is_open[i] = False
        remaining -= 1
        if remaining == 0:
            break
        ni = size[i]
        for q in range(pre_off[i], pre_off[i + 1]):
            k = pre_tok[q]
            s = post_off[k]
            w = s
            for z in range(s, s + live[k]):
                j = post_pos[z]
                if not is_open[j]:
                    continue
                post_pos[w] = j
                w += 1
                if seen[j] == i:
                    continue
                seen[j] = i
                nj = size[j]
                if min(ni, nj) < tl * max(ni, nj):
                    continue
                sij = _jaccard_at_least(sets, offsets, group[i], group[j], t)
                if sij >= t:
                    rep[j] = i
                    sim[j] = sij
                    is_open[j] = False
                    remaining -= 1
            live[k] = w - s
    return rep, sim


@njit(cache=True, nogil=True)
def components(n, u, v):
    """Connected components of ``n`` nodes joined by the edges ``u[k]``-``v[k]``: union-find that links the
    larger root under the smaller one (so a root is its component's smallest node), with path halving; every
    node's label is its root."""
    parent = np.arange(n)
    for e in range(len(u)):
        a = u[e]
        while parent[a] != a:
            parent[a] = parent[parent[a]]
            a = parent[a]
        b = v[e]
        while parent[b] != b:
            parent[b] = parent[parent[b]]
            b = parent[b]
        if a < b:
            parent[b] = a
        elif b < a:
            parent[a] = b
    for x in range(n):  # parent[x] <= x: the parents of the smaller nodes are roots already
        parent[x] = parent[parent[x]]
    return parent
