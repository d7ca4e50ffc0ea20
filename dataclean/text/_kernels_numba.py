"""The numba functions behind :mod:`dataclean.text.kernels` (imported only when numba is; see there).

Each function works on plain numpy views of Arrow buffers (``offsets`` int64 of n + 1 entries, ``data``
uint8) and returns numpy arrays; :mod:`dataclean.text.kernels` wraps them back into Arrow arrays.
"""
from __future__ import annotations

import numpy as np
from numba import njit

# bits of kernels.char_table()
_WORD = 1
_APOS = 2
_LETTER = 4
_ISO_SHIFT = 3
_SPACE = 32


@njit(cache=True, nogil=True, inline="always")
def _decode(data, i, end):
    """(code point, byte length) of the UTF-8 sequence at data[i]; (-1, 0) when it is not valid UTF-8."""
    b0 = np.int64(data[i])
    if b0 < 0x80:
        return b0, 1
    if b0 < 0xC2:
        return -1, 0
    if b0 < 0xE0:
        if i + 1 >= end:
            return -1, 0
        b1 = np.int64(data[i + 1])
        if b1 & 0xC0 != 0x80:
            return -1, 0
        return ((b0 & 0x1F) << 6) | (b1 & 0x3F), 2
    if b0 < 0xF0:
        if i + 2 >= end:
            return -1, 0
        b1 = np.int64(data[i + 1])
        b2 = np.int64(data[i + 2])
        if b1 & 0xC0 != 0x80 or b2 & 0xC0 != 0x80:
            return -1, 0
        if (b0 == 0xE0 and b1 < 0xA0) or (b0 == 0xED and b1 >= 0xA0):
            return -1, 0  # overlong, or a surrogate
        return ((b0 & 0x0F) << 12) | ((b1 & 0x3F) << 6) | (b2 & 0x3F), 3
    if b0 < 0xF5:
        if i + 3 >= end:
            return -1, 0
        b1 = np.int64(data[i + 1])
        b2 = np.int64(data[i + 2])
        b3 = np.int64(data[i + 3])
        if b1 & 0xC0 != 0x80 or b2 & 0xC0 != 0x80 or b3 & 0xC0 != 0x80:
            return -1, 0
        if (b0 == 0xF0 and b1 < 0x90) or (b0 == 0xF4 and b1 >= 0x90):
            return -1, 0
        return ((b0 & 0x07) << 18) | ((b1 & 0x3F) << 12) | ((b2 & 0x3F) << 6) | (b3 & 0x3F), 4
    return -1, 0


@njit(cache=True, nogil=True, inline="always")
def _class_at(data, i, end, table):
    """(character class bits, byte length) of the character at data[i]; size 0 when it is not valid UTF-8."""
    b = data[i]
    if b < 0x80:
        return table[b], 1
    cp, size = _decode(data, i, end)
    if size == 0:
        return 0, 0
    return table[cp], size


@njit(cache=True, nogil=True)
def words(data, offsets, table, out, word_offsets, list_offsets):
    """The tokenizer (``tokenize.words_batch``): a word is a maximal run of word characters (letters, digits,
    marks, apostrophes) that no isolation boundary cuts, with its apostrophes trimmed from both ends, when
    something remains. An isolation boundary lies between two characters when either is Han, or when their
    classes (none / Hiragana / Katakana) differ: exactly where the regex tokenizer puts spaces around a Han
    character or a kana run.

    Fills ``out`` (word bytes, as long as ``data``), ``word_offsets`` (int32) and ``list_offsets`` (int32,
    n + 1) and returns the number of words; -1 when ``word_offsets`` is too short, -2 for invalid UTF-8."""
    n = len(offsets) - 1
    cap = len(word_offsets) - 1
    word_offsets[0] = 0
    list_offsets[0] = 0
    nw = 0
    nb = 0
    for d in range(n):
        i = offsets[d]
        end = offsets[d + 1]
        prev_iso = 0
        start = -1  # first byte of the current word (its first non-apostrophe), -1 while none
        stop = 0  # byte after its last non-apostrophe character
        while i <= end:
            if i < end:
                t, size = _class_at(data, i, end, table)
                if size == 0:
                    return -2
                iso = (t >> _ISO_SHIFT) & 3
                cut = ((t & (_WORD | _APOS)) == 0) | (iso != prev_iso) | (iso == 1)
            else:  # the end of the document ends its last word
                t = 0
                iso = 0
                size = 1
                cut = True
            if cut:
                if start >= 0:  # emit the word that ends before i
                    if nw == cap:
                        return -1
                    for j in range(start, stop):  # (a loop: slice assignment allocates)
                        out[nb] = data[j]
                        nb += 1
                    nw += 1
                    word_offsets[nw] = nb
                start = -1
            if t & _WORD:
                if start < 0:
                    start = i
                stop = i + size
            prev_iso = iso
            i += size
        list_offsets[d + 1] = nw
    return nw


@njit(cache=True, nogil=True)
def count_words(data, offsets, table):
    """Words per string, as :func:`words` would emit them (int64); -1 for a string that is not valid UTF-8."""
    n = len(offsets) - 1
    counts = np.zeros(n, np.int64)
    for d in range(n):
        i = offsets[d]
        end = offsets[d + 1]
        prev_iso = 0
        in_word = False  # the current token holds a word character
        c = 0
        while i < end:
            t, size = _class_at(data, i, end, table)
            if size == 0:
                c = -1
                break
            iso = (t >> _ISO_SHIFT) & 3
            if ((t & (_WORD | _APOS)) == 0) | (iso != prev_iso) | (iso == 1):
                if in_word:
                    c += 1
                in_word = False
            if t & _WORD:
                in_word = True
            prev_iso = iso
            i += size
        if c >= 0 and in_word:
            c += 1
        counts[d] = c
    return counts


@njit(cache=True, nogil=True, inline="always")
def _is_space_at(data, i, end, table):
    """(Arrow whitespace?, byte length) of the character at data[i] (invalid UTF-8: not whitespace, 1 byte)."""
    b = data[i]
    if b < 0x80:
        return (table[b] & _SPACE) != 0, 1
    cp, size = _decode(data, i, end)
    if size == 0:
        return False, 1
    return (table[cp] & _SPACE) != 0, size


@njit(cache=True, nogil=True, inline="always")
def _hash_bytes(data, lo, hi):
    """A 64-bit hash of data[lo:hi], eight bytes per step (equal bytes, equal hash)."""
    h = np.uint64(hi - lo) * np.uint64(0x9E3779B97F4A7C15)
    p = lo
    while p + 8 <= hi:
        w = np.uint64(0)
        for q in range(8):
            w |= np.uint64(data[p + q]) << np.uint64(8 * q)
        h = (h ^ w) * np.uint64(0xFF51AFD7ED558CCD)
        h ^= h >> np.uint64(32)
        p += 8
    w = np.uint64(0)
    for q in range(hi - p):
        w |= np.uint64(data[p + q]) << np.uint64(8 * q)
    h = (h ^ w) * np.uint64(0xC4CEB9FE1A85EC53)
    h ^= h >> np.uint64(29)
    return h


@njit(cache=True, nogil=True)
def dup_fracs(data, offsets, table, paragraphs):  # noqa: C901 (one compiled pass: the four Gopher duplicate measures together)
    """``gopher._dup_fracs`` of the lines (``paragraphs`` False: items split on ``\\n``) or of the paragraphs
    (items split on the regex ``\\n[ \\t\\x{3000}]*\\n\\s*``, RE2's ``\\s`` being ``[\\t\\n\\f\\r ]``) of each
    string: items trimmed of Arrow's whitespace, blank ones ignored; returns (duplicate items / items,
    characters of duplicate items / characters of items), 0 without items. A duplicate is equal (byte for
    byte) to an earlier item of the same string."""
    n = len(offsets) - 1
    frac_items = np.zeros(n, np.float64)
    frac_chars = np.zeros(n, np.float64)
    longest = 0  # most line breaks in one string: items <= breaks + 1
    for d in range(n):
        breaks = 0
        for i in range(offsets[d], offsets[d + 1]):
            breaks += data[i] == 10
        longest = max(longest, breaks)
    item_start = np.empty(longest + 1, np.int64)
    item_end = np.empty(longest + 1, np.int64)
    item_chars = np.empty(longest + 1, np.int64)
    cap = 16
    while cap < 2 * (longest + 1):
        cap *= 2
    slots = np.full(cap, -1, np.int64)
    hashes = np.empty(longest + 1, np.uint64)
    for d in range(n):
        i = offsets[d]
        end = offsets[d + 1]
        # 1. the items' raw bounds
        m = 0
        start = i
        while i < end:
            if data[i] == 10:
                q = i + 1
                if paragraphs:
                    while q < end:
                        if data[q] == 32 or data[q] == 9:
                            q += 1
                        elif q + 2 < end and data[q] == 0xE3 and data[q + 1] == 0x80 and data[q + 2] == 0x80:
                            q += 3
                        else:
                            break
                    if q < end and data[q] == 10:
                        q += 1
                        while q < end and (data[q] == 9 or data[q] == 10 or data[q] == 12 or data[q] == 13
                                           or data[q] == 32):
                            q += 1
                    else:
                        i = q if q > i + 1 else i + 1
                        continue
                item_start[m] = start
                item_end[m] = i
                m += 1
                start = q
                i = q
            else:
                i += 1
        item_start[m] = start
        item_end[m] = end
        m += 1
        # 2. trim whitespace, count characters, hash; keep the non-blank items
        k = 0
        total_chars = 0
        for j in range(m):
            a = item_start[j]
            b = item_end[j]
            lo = -1
            p = a
            while p < b:  # first character that is not whitespace
                space, size = _is_space_at(data, p, b, table)
                if not space:
                    lo = p
                    break
                p += size
            if lo < 0:
                continue
            hi = b
            while hi > lo:  # last one
                r = hi - 1
                while r > lo and data[r] & 0xC0 == 0x80:
                    r -= 1
                space, size = _is_space_at(data, r, hi, table)
                if not space:
                    break
                hi = r
            chars = 0
            for p in range(lo, hi):
                chars += data[p] & 0xC0 != 0x80
            item_start[k] = lo
            item_end[k] = hi
            item_chars[k] = chars
            hashes[k] = _hash_bytes(data, lo, hi)
            total_chars += chars
            k += 1
        if k == 0:
            continue
        # 3. duplicates: an open-addressing table of the first occurrences
        mask = 16
        while mask < 2 * k:
            mask *= 2
        mask -= 1
        dup_items = 0
        dup_chars = 0
        for j in range(k):
            h = np.int64(hashes[j] & np.uint64(mask))
            while True:
                o = slots[h]
                if o < 0:
                    slots[h] = j
                    break
                if hashes[o] == hashes[j] and item_end[o] - item_start[o] == item_end[j] - item_start[j]:
                    same = True
                    a = item_start[o]
                    b = item_start[j]
                    for p in range(item_end[j] - item_start[j]):
                        if data[a + p] != data[b + p]:
                            same = False
                            break
                    if same:
                        dup_items += 1
                        dup_chars += item_chars[j]
                        break
                h = (h + 1) & mask
        for j in range(k):  # empty the table again
            h = np.int64(hashes[j] & np.uint64(mask))
            while slots[h] >= 0:
                slots[h] = -1
                h = (h + 1) & mask
        frac_items[d] = dup_items / k
        if total_chars > 0:
            frac_chars[d] = dup_chars / total_chars
    return frac_items, frac_chars


@njit(cache=True, nogil=True)
def char_lengths(data, offsets):
    """Code points per string: bytes that are not UTF-8 continuation bytes."""
    n = len(offsets) - 1
    out = np.zeros(n, np.int64)
    for d in range(n):
        c = 0
        for i in range(offsets[d], offsets[d + 1]):
            if data[i] & 0xC0 != 0x80:
                c += 1
        out[d] = c
    return out


# -- Gopher n-gram repetition -----------------------------------------------------------------------------------

@njit(cache=True, nogil=True, inline="always")
def _mix(h):
    """MurmurHash3's fmix64 (the same as ``gopher._mix``)."""
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xFF51AFD7ED558CCD)
    h ^= h >> np.uint64(33)
    h *= np.uint64(0xC4CEB9FE1A85EC53)
    h ^= h >> np.uint64(33)
    return h


@njit(cache=True, nogil=True)
def ngram_signals(codes, length, offsets, max_n, top_max):
    """``gopher.ngram_signals`` one document at a time: out[d, n] for n = 2..max_n is the fraction of document
    d's word characters covered by its most frequent repeated n-gram (n <= top_max) or by its n-grams
    occurring at least twice (n > top_max). Same 64-bit keys, same pruning (an n-gram can only repeat where
    both of its (n-1)-grams do), same tie-breaks (most occurrences, then most characters, then earliest).
    Equal keys are grouped with an open-addressing hash table (the keys are already mixed) instead of a sort."""
    n_docs = len(offsets) - 1
    out = np.zeros((n_docs, max_n + 1), np.float64)
    longest = 0
    for d in range(n_docs):
        longest = max(longest, offsets[d + 1] - offsets[d])
    cap = 16
    while cap < 2 * longest:
        cap *= 2
    slot_key = np.empty(cap, np.uint64)
    slot_group = np.empty(cap, np.int64)
    slot_gen = np.zeros(cap, np.int64)  # a slot is in use when its generation is the current one
    gen = 0
    cum = np.zeros(longest + 1, np.int64)
    c1 = np.empty(longest, np.uint64)
    pos = np.empty(longest, np.int64)
    key = np.empty(longest, np.uint64)
    group = np.empty(longest, np.int64)
    count = np.empty(longest, np.int64)
    first = np.empty(longest, np.int64)
    for d in range(n_docs):
        s = offsets[d]
        size = offsets[d + 1] - s
        if size < 3:
            continue  # an n-gram (n >= 2) occurring twice needs at least 3 words
        for i in range(size):
            cum[i + 1] = cum[i] + length[s + i]
            c1[i] = np.uint64(codes[s + i]) + np.uint64(1)
        chars = cum[size]
        if chars == 0:
            continue
        dbits = np.uint64(d) << np.uint64(32)
        m = size - 1  # candidates of level 2: every position with 2 words left
        for j in range(m):
            pos[j] = j
            key[j] = _mix(dbits ^ c1[j])
        mask = 16
        while mask < 2 * m:
            mask *= 2
        mask -= 1
        for n in range(2, max_n + 1):
            if n > 2:
                # candidates: repeated (n-1)-gram positions p whose p + 1 is one too, with n words left
                m2 = 0
                for j in range(m - 1):
                    if (count[group[j]] >= 2 and count[group[j + 1]] >= 2 and pos[j + 1] == pos[j] + 1
                            and pos[j] + n <= size):
                        pos[m2] = pos[j]
                        key[m2] = key[j]
                        m2 += 1
                m = m2
            if m < 2:
                break
            # group equal keys: slot_group[h] is the group of the key in slot h
            gen += 1
            n_groups = 0
            for j in range(m):
                k = _mix(key[j] ^ c1[pos[j] + n - 1])
                key[j] = k
                h = np.int64(k & np.uint64(mask))
                while True:
                    if slot_gen[h] != gen:
                        slot_gen[h] = gen
                        slot_group[h] = n_groups
                        slot_key[h] = k
                        group[j] = n_groups
                        count[n_groups] = 1
                        first[n_groups] = pos[j]
                        n_groups += 1
                        break
                    if slot_key[h] == k:
                        g = slot_group[h]
                        group[j] = g
                        count[g] += 1
                        break
                    h = (h + 1) & mask
            best = -1
            if n <= top_max:  # groups are numbered in order of first occurrence: ties go to the earliest
                best_count = 0
                best_chars = 0
                for g in range(n_groups):
                    if count[g] >= 2:
                        gc = cum[first[g] + n] - cum[first[g]]
                        if count[g] > best_count or (count[g] == best_count and gc > best_chars):
                            best = g
                            best_count = count[g]
                            best_chars = gc
                if best < 0:
                    continue
            # characters covered by the chosen occurrences (ascending positions), overlaps counted once
            covered = 0
            last_end = 0
            for j in range(m):
                g = group[j]
                if count[g] >= 2 and (best < 0 or g == best):
                    p = pos[j]
                    lo = p if p > last_end else last_end
                    covered += cum[p + n] - cum[lo]
                    last_end = p + n
            out[d, n] = covered / chars
    return out



@njit(cache=True, nogil=True, inline="always")
def _is_pad(data, q, a, b):
    """Byte length of a [ \\t\\x{3000}] character starting at data[q] (within [a, b)), else 0."""
    if data[q] == 32 or data[q] == 9:
        return 1
    if q + 2 < b and data[q] == 0xE3 and data[q + 1] == 0x80 and data[q + 2] == 0x80:
        return 3
    return 0


@njit(cache=True, nogil=True)
def gopher_lines(data, offsets, table, bullets):
    """Per string, the line statistics of ``gopher.GopherQuality`` (lines split on ``\\n``): non-blank lines
    (holding a character that is not Arrow whitespace), lines matching ``BULLET_LINE`` (after
    ``[ \\t\\x{3000}]*``, a character of ``bullets`` (code points, sorted), or one of ``- * +`` followed by a
    space, a tab or the line's end), lines matching ``ELLIPSIS_LINE`` (``...`` or ``…`` then only
    ``[ \\t\\x{3000}]``), ``#`` characters, and matches of ``ELLIPSIS`` (runs of 3+ dots, runs of ``…``).
    Returns an int64 array (n, 5) in that order."""
    n = len(offsets) - 1
    out = np.zeros((n, 5), np.int64)
    for d in range(n):
        a = offsets[d]
        end = offsets[d + 1]
        nonblank = 0
        bullet = 0
        ell_end = 0
        hashes = 0
        ellipses = 0
        dots = 0  # length of the current run of dots
        prev_ell = False  # the previous character was …
        while True:
            b = a  # the line is [a, b)
            while b < end and data[b] != 10:
                x = data[b]
                if x == 35:
                    hashes += 1
                if x == 46:
                    dots += 1
                    if dots == 3:
                        ellipses += 1
                else:
                    dots = 0
                if x == 0xE2 and b + 2 < end and data[b + 1] == 0x80 and data[b + 2] == 0xA6:
                    if not prev_ell:
                        ellipses += 1
                    prev_ell = True
                    b += 3
                    dots = 0
                    continue
                if x & 0xC0 != 0x80:
                    prev_ell = False
                b += 1
            dots = 0
            prev_ell = False
            # non-blank
            p = a
            while p < b:
                space, size = _is_space_at(data, p, b, table)
                if not space:
                    nonblank += 1
                    break
                p += size
            # bullet
            q = a
            while q < b:
                size = _is_pad(data, q, a, b)
                if size == 0:
                    break
                q += size
            if q < b:
                x = data[q]
                if x == 45 or x == 42 or x == 43:
                    if q + 1 == b or data[q + 1] == 32 or data[q + 1] == 9:
                        bullet += 1
                elif x >= 0x80:
                    cp, size = _decode(data, q, b)
                    for c in bullets:
                        if c == cp:
                            bullet += 1
                            break
            # ellipsis at the end, before trailing [ \t\x{3000}]
            r = b
            while r > a:
                if data[r - 1] == 32 or data[r - 1] == 9:
                    r -= 1
                elif r - 3 >= a and data[r - 3] == 0xE3 and data[r - 2] == 0x80 and data[r - 1] == 0x80:
                    r -= 3
                else:
                    break
            if r - 3 >= a and ((data[r - 3] == 46 and data[r - 2] == 46 and data[r - 1] == 46)
                               or (data[r - 3] == 0xE2 and data[r - 2] == 0x80 and data[r - 1] == 0xA6)):
                ell_end += 1
            if b >= end:
                break
            a = b + 1
        out[d, 0] = nonblank
        out[d, 1] = bullet
        out[d, 2] = ell_end
        out[d, 3] = hashes
        out[d, 4] = ellipses
    return out


@njit(cache=True, nogil=True)
def word_props(data, offsets, table):
    """Per string: characters (code points), whether one is a letter (RE2 \\pL), whether all bytes are ASCII."""
    n = len(offsets) - 1
    chars = np.zeros(n, np.int64)
    letter = np.zeros(n, np.bool_)
    ascii_ = np.ones(n, np.bool_)
    for w in range(n):
        i = offsets[w]
        end = offsets[w + 1]
        c = 0
        while i < end:
            x = data[i]
            if x < 0x80:
                if table[x] & _LETTER:
                    letter[w] = True
                i += 1
            else:
                ascii_[w] = False
                cp, size = _decode(data, i, end)
                if size == 0:
                    size = 1
                elif table[cp] & _LETTER:
                    letter[w] = True
                i += size
            c += 1
        chars[w] = c
    return chars, letter, ascii_


@njit(cache=True, nogil=True)
def ascii_lower_in(data, offsets, set_data, set_offsets):
    """Per string: is it pure ASCII and, lower-cased (A-Z to a-z), one of the set's strings?"""
    n = len(offsets) - 1
    m = len(set_offsets) - 1
    hit = np.zeros(n, np.bool_)
    for w in range(n):
        a = offsets[w]
        size = offsets[w + 1] - a
        for k in range(m):
            sa = set_offsets[k]
            if set_offsets[k + 1] - sa != size:
                continue
            same = True
            for p in range(size):
                x = data[a + p]
                if x >= 0x80:
                    same = False
                    break
                if 65 <= x <= 90:
                    x += 32
                if x != set_data[sa + p]:
                    same = False
                    break
            if same:
                hit[w] = True
                break
    return hit


# -- the normalize stage ----------------------------------------------------------------------------------------

# bits of kernels.norm_table()
NORM_CONTROL = 16
NORM_ODD_SPACE = 32
NORM_TRIM = 64


@njit(cache=True, nogil=True)
def lacking(data, offsets, table, bits):
    """Per document: 1 when it holds a non-ASCII character with none of ``bits`` in ``table`` (e.g. one a normal
    form may change: Arrow's utf8_normalize must run on the document), else 0; -1 at invalid UTF-8."""
    n = len(offsets) - 1
    out = np.zeros(n, np.int8)
    for d in range(n):
        i = offsets[d]
        end = offsets[d + 1]
        while i < end:
            if data[i] < 0x80:
                i += 1
                continue
            cp, size = _decode(data, i, end)
            if size == 0:
                out[d] = -1
                break
            if not (table[cp] & bits):
                out[d] = 1
                break
            i += size
    return out


@njit(cache=True, nogil=True, inline="always")
def _newline(out, start, o, keep):
    """Write a newline at out[o] as the regex chain would leave it: spaces and tabs before it are dropped
    (``[ \\t]+\\n``), and a run of newlines is cut to ``keep`` (``\\n{keep+1,}``). Returns the new end."""
    while o > start and (out[o - 1] == 32 or out[o - 1] == 9):
        o -= 1
    run = 0
    while run < keep and o - run > start and out[o - 1 - run] == 10:
        run += 1
    if run < keep:
        out[o] = 10
        o += 1
    return o


@njit(cache=True, nogil=True)
def _norm_one(src, i, end, table, remove_controls, fix_spaces, keep, out, o, d, controls, spaces):
    start = o
    after_cr = False
    nc = 0
    ns = 0
    while i < end:
        b = src[i]
        if b < 0x80:
            cp = np.int64(b)
            size = 1
        else:
            cp, size = _decode(src, i, end)
            if size == 0:
                return -1
        bits = table[cp]
        if remove_controls and (bits & NORM_CONTROL):
            nc += 1
            i += size
            continue
        if fix_spaces:
            if cp == 13:
                ns += 1
                o = _newline(out, start, o, keep)
                after_cr = True
                i += 1
                continue
            if cp == 10:
                if not after_cr:
                    o = _newline(out, start, o, keep)
                after_cr = False
                i += 1
                continue
            after_cr = False
            if bits & NORM_ODD_SPACE:
                ns += 1
                out[o] = 32
                o += 1
                i += size
                continue
        for j in range(size):
            out[o + j] = src[i + j]
        o += size
        i += size
    if fix_spaces:  # Arrow's utf8_trim_whitespace
        a = start
        while a < o:
            cp, size = _decode(out, a, o)
            if not (table[cp] & NORM_TRIM):
                break
            a += size
        z = o
        while z > a:
            j = z - 1
            while j > a and (out[j] & 0xC0) == 0x80:
                j -= 1
            cp, size = _decode(out, j, z)
            if not (table[cp] & NORM_TRIM):
                break
            z = j
        if a > start:
            for j in range(z - a):
                out[start + j] = out[a + j]
        o = start + (z - a)
    controls[d] = nc
    spaces[d] = ns
    return o


@njit(cache=True, nogil=True)
def norm_clean(data, offsets, sub_data, sub_offsets, sub_index, table, remove_controls, fix_spaces, keep, out,
               out_offsets, controls, spaces):
    """The normalize stage's chain after the Unicode normal form, in one pass per document: control characters
    removed (``remove_controls``); then (``fix_spaces``) ``\\r\\n`` and ``\\r`` to ``\\n``, odd spaces to a space,
    spaces and tabs before a newline dropped, runs of newlines cut to ``keep``, Arrow whitespace trimmed from both
    ends. Fills ``out`` / ``out_offsets`` and the per-document counts of controls removed and of odd spaces plus
    carriage returns (what the regex chain counts). Document ``d`` is read from (sub_data, sub_offsets) at
    ``sub_index[d]`` when that is >= 0 (documents Arrow normalized), else from (data, offsets). Returns 0, or
    -1 at invalid UTF-8. ``out`` must hold the bytes of every document read."""
    n = len(offsets) - 1
    o = 0
    out_offsets[0] = 0
    for d in range(n):
        s = sub_index[d] if len(sub_index) else -1
        if s >= 0:
            o = _norm_one(sub_data, sub_offsets[s], sub_offsets[s + 1], table, remove_controls, fix_spaces, keep,
                          out, o, d, controls, spaces)
        else:
            o = _norm_one(data, offsets[d], offsets[d + 1], table, remove_controls, fix_spaces, keep, out, o, d,
                          controls, spaces)
        if o < 0:
            return -1
        out_offsets[d + 1] = o
    return 0


@njit(cache=True, nogil=True)
def byte_sums(data, offsets, table):
    """Per document, the sum of ``table[b]`` over its bytes ``b`` (int64)."""
    n = len(offsets) - 1
    out = np.zeros(n, np.int64)
    for d in range(n):
        s = np.int64(0)
        for i in range(offsets[d], offsets[d + 1]):
            s += table[data[i]]
        out[d] = s
    return out


@njit(cache=True, nogil=True, inline="always")
def _char_at(data, i, end):
    """(code point, byte length) at data[i], ASCII first; (-1, 0) when it is not valid UTF-8."""
    b = data[i]
    if b < 0x80:
        return np.int64(b), 1
    return _decode(data, i, end)


@njit(cache=True, nogil=True)
def pair_counts(group, codes, n_codes, order):
    """Per element ``i``: how many elements have its ``group`` and its value ``codes[i]`` (a dictionary code,
    ``0 <= codes[i] < n_codes``), and whether ``i`` is the first of them in ``order`` (the elements sorted by
    group, stably: ``spam.pair_counts``). One pass per group with a counter per code, reset after the group:
    linear time, where sorting the (group, code) keys was n log n."""
    n = len(group)
    count = np.zeros(n_codes, np.int64)
    seen = np.full(n_codes, -1, np.int64)
    per = np.empty(n, np.int64)
    first = np.zeros(n, np.bool_)
    start = 0
    while start < n:
        g = group[order[start]]
        end = start
        while end < n and group[order[end]] == g:
            count[codes[order[end]]] += 1
            end += 1
        for k in range(start, end):
            i = order[k]
            c = codes[i]
            per[i] = count[c]
            if seen[c] != start:
                seen[c] = start
                first[i] = True
        for k in range(start, end):
            count[codes[order[k]]] = 0
        start = end
    return per, first


@njit(cache=True, nogil=True)
def count_runs(data, offsets, member):
    """Per string: its maximal runs of the characters whose code point ``member`` marks (uint8, 0x110000
    entries), what RE2 counts for ``[class]+``; -1 for a string that is not valid UTF-8."""
    n = len(offsets) - 1
    out = np.zeros(n, np.int64)
    for r in range(n):
        i = offsets[r]
        end = offsets[r + 1]
        inside = False
        c = 0
        while i < end:
            cp, size = _char_at(data, i, end)
            if size == 0:
                c = -1
                break
            hit = member[cp] != 0
            i += size
            if hit and not inside:
                c += 1
            inside = hit
        out[r] = c
    return out


@njit(cache=True, nogil=True)
def class_counts(data, offsets, table, nbits):
    """Per string (row) and bit ``b < nbits`` of ``table`` (uint8 per code point): its characters with that bit
    set (int64, n x nbits); row -1 everywhere for a string that is not valid UTF-8."""
    n = len(offsets) - 1
    out = np.zeros((n, nbits), np.int64)
    for r in range(n):
        i = offsets[r]
        end = offsets[r + 1]
        while i < end:
            cp, size = _char_at(data, i, end)
            if size == 0:
                for k in range(nbits):
                    out[r, k] = -1
                break
            v = table[cp]
            i += size
            if v != 0:
                for k in range(nbits):
                    if (v >> k) & 1:
                        out[r, k] += 1
    return out


@njit(cache=True, nogil=True)
def collapse_punct(data, offsets, member, out, out_offsets):
    """langid's first step on each string: newlines become spaces, then every run of two or more characters that
    ``member`` marks (``[\\pP\\pS]``) becomes one space (RE2's ``replace_substring_regex`` of ``[\\pP\\pS]{2,}``).
    Fills ``out`` (as long as ``data``) and ``out_offsets`` (n + 1); returns False at invalid UTF-8."""
    n = len(offsets) - 1
    o = 0
    out_offsets[0] = 0
    for r in range(n):
        i = offsets[r]
        end = offsets[r + 1]
        while i < end:
            cp, size = _char_at(data, i, end)
            if size == 0:
                return False
            if cp != 10 and member[cp] != 0:
                # a run of marked characters (a newline, now a space, is not one)
                j = i + size
                count = 1
                while j < end:
                    cp2, size2 = _char_at(data, j, end)
                    if size2 == 0:
                        return False
                    if cp2 == 10 or member[cp2] == 0:
                        break
                    count += 1
                    j += size2
                if count >= 2:
                    out[o] = 32
                    o += 1
                else:
                    for k in range(i, j):
                        out[o] = data[k]
                        o += 1
                i = j
            else:
                out[o] = 32 if cp == 10 else data[i]
                for k in range(i + 1, i + size):
                    out[o + k - i] = data[k]
                o += size
                i += size
        out_offsets[r + 1] = o
    return True


@njit(cache=True, nogil=True)
def isolate(data, offsets, table, out, out_offsets):
    """Spaces around each Han character and each run of Hiragana or of Katakana (the isolation classes of
    ``table``): RE2's ``replace_substring_regex`` of ``tokenize.ISOLATE`` with ``" \\1 "``. Fills ``out`` (at
    least 5/3 of ``data`` plus 2 per string) and ``out_offsets``; returns False at invalid UTF-8."""
    n = len(offsets) - 1
    o = 0
    out_offsets[0] = 0
    for r in range(n):
        i = offsets[r]
        end = offsets[r + 1]
        prev = 0
        while i < end:
            cls, size = _class_at(data, i, end, table)
            if size == 0:
                return False
            iso = (cls >> _ISO_SHIFT) & 3
            if iso != prev and (prev == 2 or prev == 3):
                out[o] = 32  # the end of a kana run
                o += 1
            if iso == 1 or (iso != prev and (iso == 2 or iso == 3)):
                out[o] = 32  # before a Han character, or the start of a kana run
                o += 1
            for k in range(i, i + size):
                out[o] = data[k]
                o += 1
            if iso == 1:
                out[o] = 32
                o += 1
            prev = iso
            i += size
        if prev == 2 or prev == 3:
            out[o] = 32
            o += 1
        out_offsets[r + 1] = o
    return True


@njit(cache=True, nogil=True, inline="always")
def _same_bytes(data, a, b, c, d):
    if b - a != d - c:
        return False
    for k in range(b - a):
        if data[a + k] != data[c + k]:
            return False
    return True


@njit(cache=True, nogil=True)
def _most_repeated(data, kind, lo, hi, n, h, order, counted):
    """The largest number of equal keys among the first ``n``: key ``j`` is ``(kind[j], data[lo[j]:hi[j]])``.
    ``h``, ``order``, ``counted``: scratch, at least ``n`` long. Up to 32 keys (most lines) are one group,
    compared pair by pair; more are grouped by a hash first, then compared within a hash (a collision splits
    a group, it never merges two)."""
    if n <= 32:
        for j in range(n):
            h[j] = 0
            order[j] = j
    else:
        for j in range(n):
            h[j] = _hash_bytes(data, lo[j], hi[j]) ^ np.uint64(kind[j])
        order[:n] = np.argsort(h[:n])
    counted[:n] = False
    best = 0
    s = 0
    while s < n:
        e = s + 1
        while e < n and h[order[e]] == h[order[s]]:
            e += 1
        for x in range(s, e):
            jx = order[x]
            if counted[jx]:
                continue
            c = 0
            for y in range(x, e):
                jy = order[y]
                if not counted[jy] and kind[jy] == kind[jx] and _same_bytes(data, lo[jx], hi[jx], lo[jy], hi[jy]):
                    counted[jy] = True
                    c += 1
            if c > best:
                best = c
        s = e
    return best


@njit(cache=True, nogil=True, inline="always")
def _run_end(data, i, end, table, bit):
    """Where the run of characters with ``bit`` in ``table`` that starts at data[i] ends."""
    while i < end:
        cls, size = _class_at(data, i, end, table)
        if size == 0 or not (cls & bit):
            break
        i += size
    return i


@njit(cache=True, nogil=True, inline="always")
def _char_start(data, q):
    """The first byte of the UTF-8 character whose last byte is data[q]."""
    while (data[q] & 0xC0) == 0x80:
        q -= 1
    return q


@njit(cache=True, nogil=True)
def _item_keys(data, a, b, table, max_item_chars, kind, klo, khi, nk):
    """Trim data[a:b] of whitespace and append its keywords (see :func:`keyword_repeats`) at ``nk``. Returns
    (1 if the trimmed item is not empty, the new key count)."""
    while a < b:
        cls, size = _class_at(data, a, b, table)
        if not (cls & 8):
            break
        a += size
    while b > a:
        q = _char_start(data, b - 1)
        cls, size = _class_at(data, q, b, table)
        if not (cls & 8):
            break
        b = q
    if b == a:
        return 0, nk
    length = 0
    same = True
    c0 = np.int64(-1)
    e1 = a  # the end of the first character, then of the second
    e2 = a
    han0 = False
    han1 = False
    p = a
    while p < b:
        cp, size = _char_at(data, p, b)
        if length == 0:
            c0 = cp
            e1 = p + size
            han0 = (table[cp] & 4) != 0
        elif length == 1:
            e2 = p + size
            han1 = (table[cp] & 4) != 0
        if cp != c0:
            same = False
        length += 1
        p += size
    if length < 2 or same:
        return 1, nk
    kind[nk] = 0
    klo[nk] = a
    khi[nk] = b
    nk += 1
    if length <= max_item_chars:
        if han0 and han1 and not _same_bytes(data, a, e1, e1, e2):
            kind[nk] = 1
            klo[nk] = a
            khi[nk] = e2
            nk += 1
        q2 = _char_start(data, b - 1)
        q1 = _char_start(data, q2 - 1)
        cl, _s = _char_at(data, q1, b)
        cm, _s = _char_at(data, q2, b)
        if (table[cl] & 4) != 0 and (table[cm] & 4) != 0 and cl != cm and not _same_bytes(data, q1, b, a, e2):
            kind[nk] = 1
            klo[nk] = q1
            khi[nk] = b
            nk += 1
    return 1, nk


@njit(cache=True, nogil=True)
def keyword_repeats(data, offsets, table, max_item_chars):
    """``spam.keyword_items`` + ``spam.item_repeats`` of each (lower-cased) line in one pass: per line, its
    non-empty keyword items and the occurrences of its most repeated keyword. ``table`` bits: 1 an item
    separator (``spam._ITEM_SEP``), 2 a space that separates next to a Han character, 4 Han, 8 Arrow
    whitespace (trimmed from the items' ends). As RE2 replaces ``spam._SPACE_BY_HAN`` left to right, a Han
    character followed by such spaces ends its item there, and such spaces followed by a Han character end
    the item before them; that Han character, consumed by the match, cannot end its own item. Runs of
    separators (the replaced spaces included) cut once. A keyword is ``(0, item)`` for an item of 2+
    characters not all one character, and, for such an item of at most ``max_item_chars`` characters,
    ``(1, first two)`` and ``(1, last two)`` when those are two different Han characters, the last two only
    when they differ from the first two. Returns (items, repeats), int64 per line; items -1 for a line that
    is not valid UTF-8."""
    n = len(offsets) - 1
    n_items = np.zeros(n, np.int64)
    reps = np.zeros(n, np.int64)
    cap = 0
    kind = np.empty(0, np.int64)
    klo = np.empty(0, np.int64)
    khi = np.empty(0, np.int64)
    counted = np.empty(0, np.bool_)
    hashes = np.empty(0, np.uint64)
    order = np.empty(0, np.int64)
    for r in range(n):
        start = offsets[r]
        end = offsets[r + 1]
        if end - start + 3 > cap:  # (a keyword takes 2+ bytes and a separator: at most one key per byte)
            cap = end - start + 3
            kind = np.empty(cap, np.int64)
            klo = np.empty(cap, np.int64)
            khi = np.empty(cap, np.int64)
            counted = np.empty(cap, np.bool_)
            hashes = np.empty(cap, np.uint64)
            order = np.empty(cap, np.int64)
        nk = 0
        items = 0
        item_a = start
        in_sep = False
        i = start
        while i < end:
            cls, size = _class_at(data, i, end, table)
            if size == 0:
                items = -1
                break
            if cls & 1:  # a separator
                if not in_sep:
                    got, nk = _item_keys(data, item_a, i, table, max_item_chars, kind, klo, khi, nk)
                    items += got
                    in_sep = True
                i += size
                continue
            if cls & 2:  # spaces: a cut when a Han character follows them
                k = _run_end(data, i, end, table, 2)
                if k < end:
                    c3, s3 = _class_at(data, k, end, table)
                    if s3 != 0 and (c3 & 4):
                        if not in_sep:
                            got, nk = _item_keys(data, item_a, i, table, max_item_chars, kind, klo, khi, nk)
                            items += got
                        item_a = k
                        in_sep = False
                        i = k + s3
                        continue
                if in_sep:
                    item_a = i
                    in_sep = False
                i = k
                continue
            if in_sep:
                item_a = i
                in_sep = False
            i += size
            if cls & 4:  # a Han character: a cut when spaces follow it
                k = _run_end(data, i, end, table, 2)
                if k > i:
                    got, nk = _item_keys(data, item_a, i, table, max_item_chars, kind, klo, khi, nk)
                    items += got
                    in_sep = True
                    i = k
        if items < 0:
            n_items[r] = -1
            continue
        if not in_sep:
            got, nk = _item_keys(data, item_a, end, table, max_item_chars, kind, klo, khi, nk)
            items += got
        n_items[r] = items
        reps[r] = _most_repeated(data, kind, klo, khi, nk, hashes, order, counted)
    return n_items, reps


@njit(cache=True, nogil=True)
def template_norm(data, offsets, table, out, out_offsets):
    """``spam.template_lines``' normalization of each (lower-cased, trimmed) line: every run of ASCII digits
    becomes ``0`` (RE2's ``\\d+``), every run of spaces and tabs one space (``[ \\t]{2,}|\\t``). Fills ``out``
    (as long as ``data``) and ``out_offsets``; returns per line whether it has a letter (RE2 ``\\pL``, the
    LETTER bit of ``table``), and False at invalid UTF-8 (else True)."""
    n = len(offsets) - 1
    letter = np.zeros(n, np.bool_)
    o = 0
    out_offsets[0] = 0
    for r in range(n):
        i = offsets[r]
        end = offsets[r + 1]
        has = False
        while i < end:
            b = data[i]
            if 48 <= b <= 57:
                out[o] = 48
                o += 1
                i += 1
                while i < end and 48 <= data[i] <= 57:
                    i += 1
                continue
            if b == 32 or b == 9:
                out[o] = 32
                o += 1
                i += 1
                while i < end and (data[i] == 32 or data[i] == 9):
                    i += 1
                continue
            if b < 0x80:
                if table[b] & _LETTER:
                    has = True
                out[o] = b
                o += 1
                i += 1
                continue
            cp, size = _decode(data, i, end)
            if size == 0:
                return letter, False
            if table[cp] & _LETTER:
                has = True
            for k in range(i, i + size):
                out[o] = data[k]
                o += 1
            i += size
        letter[r] = has
        out_offsets[r + 1] = o
    return letter, True


@njit(cache=True, nogil=True)
def sentence_punct(data, offsets):
    """Per line (no ``\\n`` in it): does RE2 find ``spam._SENTENCE_PUNCT``, ``[。！？!?；;]|[，,]\\s*\\S.*[，,]``?
    That is a sentence mark, or two commas with a character between them outside RE2's ``\\s``
    (``[\\t\\n\\f\\r ]``): if any two commas have one, the first and the last have it. Returns (bool per line,
    True), or False at invalid UTF-8 or a newline."""
    n = len(offsets) - 1
    out = np.zeros(n, np.bool_)
    for r in range(n):
        i = offsets[r]
        end = offsets[r + 1]
        first_comma = -1  # the byte after the first comma
        solid = -1  # the last character outside \s after the first comma (its first byte)
        between = False
        while i < end:
            cp, size = _char_at(data, i, end)
            if size == 0 or cp == 10:
                return out, False
            if cp == 0x3002 or cp == 0xFF01 or cp == 0xFF1F or cp == 33 or cp == 63 or cp == 0xFF1B or cp == 59:
                out[r] = True
                break
            if cp == 0xFF0C or cp == 44:
                if first_comma < 0:
                    first_comma = i + size
                elif solid >= first_comma:
                    between = True
            if first_comma >= 0 and i >= first_comma and not (cp == 9 or cp == 12 or cp == 13 or cp == 32):
                solid = i
            i += size
        if between:
            out[r] = True
    return out, True
