"""MinHash signatures of documents, vectorized over a batch and identical to datasketch's.

The four steps, each one function:

1. :func:`shingle_text` normalizes the text the way near-duplicate detection should see it: NFKC, lower
   case, every decimal digit becomes ``0``, format characters (zero-width space, soft hyphen, BOM…) are
   deleted, punctuation, symbols, controls and separators become one space, the result is trimmed; with
   ``fold`` (``minhash_dedup``'s ``fold_scripts``), traditional Chinese is then folded to simplified
   (:func:`dataclean.text.script_fold.fold_scripts`; the compiled pass folds and counts the scripts on the way).
2. :func:`shingle_hashes` cuts the normalized text into shingles and hashes each to 32 bits.
3. :func:`signatures` turns each document's shingle hashes into a MinHash signature.
4. :func:`band_hashes` cuts the signatures into LSH bands (see :func:`optimal_bands`) and hashes each band;
   two documents that share a band hash are a candidate pair.

Shingles
--------
The normalized text is read as two streams of tokens:

* *words*: the text with every CJK character (Han, Hiragana, Katakana, as in
  :mod:`dataclean.text.tokenize`) replaced by a space, split on the space character U+0020;
* *CJK characters*: every Han/kana character of the text, in order. The runs between punctuation are joined
  into one sequence, as word n-grams also run across sentence ends.

Each stream with ``k`` tokens gives ``k - n + 1`` n-gram shingles (``n`` = ``word_ngram`` for words,
``char_ngram`` for CJK characters). A stream with ``1 <= k < n`` tokens gives ONE shingle made of all its
``k`` tokens, so short documents are still compared; an empty stream gives none. A document that mixes
scripts gets both kinds, word shingles first. **A document that is empty after normalization (no words, no
CJK characters: "", "!!!", "🙂") has zero shingles**: its signature is all ``max_hash`` (datasketch's empty
MinHash), which would match every other empty document, so the caller must leave such documents to exact
deduplication only and never put them in LSH buckets.

Shingle hash (32 bits), for one shingle made of tokens ``t_1 … t_k``::

    token(t) = xxh3_64(utf8(t), seed=0)                       # xxhash.xxh3_64_intdigest
    h = 0x9E3779B97F4A7C15 ^ k
    for t in t_1 … t_k:
        h = ((h ^ token(t)) * 0xFF51AFD7ED558CCD) mod 2**64
        h = h ^ (h >> 31)
    h = h ^ (h >> 30); h = (h * 0xBF58476D1CE4E5B9) mod 2**64    # splitmix64 finalizer
    h = h ^ (h >> 27); h = (h * 0x94D049BB133111EB) mod 2**64
    h = h ^ (h >> 31)
    shingle_hash = h & 0xFFFFFFFF

A word shingle and a CJK-character shingle can never have the same tokens (words contain no CJK), so the two
kinds need no tag. :func:`shingle_hash` is this definition in pure Python, :func:`shingles_single` lists the
shingles (token tuples) of one normalized document and :func:`shingle_hash_single` their hashes; they are
the reference the vectorized :func:`shingle_hashes` is tested against. The vectorized version hashes each
distinct token once per batch (dictionary encoding) and combines the n token hashes of every shingle with
numpy in uint64.

Compiled kernels
----------------
With numba installed (``DATACLEAN_KERNELS=0`` turns them off, as for :mod:`dataclean.text.kernels`),
:func:`shingle_text`, :func:`shingle_hashes`, :func:`signatures` (``affine32``), exact dedup's content key and
the exact-Jaccard verification of the global step run the functions of :mod:`dataclean.dedup._minhash_numba`
over the Arrow buffers instead: one pass per document for the normalization (lower case, digit folding,
deletions and separators from per-code-point tables that Arrow itself computed, :func:`_build_char_maps`; NFKC
from the same tables for every document made of characters they cover, Arrow's NFKC for the rest), one for the
tokens, hashed with an xxh3_64 written in numba, one for the shingles and one for the per-permutation minima.
The results are the same bit for bit (``tests/test_minhash.py``, ``tests/test_minhash_dedup.py``, and
``benchmarks/profile_dedup.py --check`` on every bench shard); they are 3-5 times faster
(``benchmarks/profile_dedup.py``). The first process after an install or a change of ``_minhash_numba.py``
compiles them (~15 s, cached on disk; :func:`warm_up`), later ones load them (~0.3 s with numba's import).

Signatures and datasketch
-------------------------
:func:`signatures` gives, bit for bit, the ``hashvalues`` that ``datasketch.MinHash(num_perm, seed,
hashfunc=shingle_hash, scheme=scheme)`` has after ``update_batch`` with the document's shingles: the same
permutation parameters drawn from ``numpy.random.RandomState(seed)``, the same arithmetic, the same value
for a document without shingles. Two schemes are supported:

* ``"affine32"`` (the default, and datasketch's default since 2.0): the 32-bit shingle hash is pre-mixed
  with the MurmurHash3 32-bit finalizer, then ``a * h + b mod 2**32`` with ``a`` odd (a bijection: no
  collisions added by the permutation). Empty value ``2**32 - 1``.
* ``"legacy"`` (datasketch before 2.0, and ``scheme="legacy"`` after): ``((a * h + b) mod 2**64) mod
  (2**61 - 1)``, then ``& (2**32 - 1)``. Empty value ``2**32 - 1``. The ``mod (2**61 - 1)`` is computed
  without a division (``x mod p = (x & p) + (x >> 61)``, folded once more), which is exactly equal and
  1.3-1.6 times as fast as numpy's ``%``.

Both are returned as ``uint64`` arrays of shape ``(n_docs, num_perm)`` (every value fits in 32 bits), so
the storage type does not depend on the scheme. Signatures of different schemes or seeds must never be
compared.

To use datasketch's own indexes (``MinHashLSH`` in memory or on Redis, ``MinHashLSHForest``), convert a row
with :func:`to_lean_minhash` and give the same scheme::

    lsh = datasketch.MinHashLSH(threshold=0.8, num_perm=128)      # or params=optimal_bands(0.8, 128)
    for key, row in zip(ids, sigs):
        lsh.insert(key, to_lean_minhash(row, seed=1))
    lsh.query(to_lean_minhash(sigs[0], seed=1))

:func:`band_hashes` is this package's own band hashing (for DuckDB joins); its band hashes are not the keys
datasketch's ``MinHashLSH`` stores, but both use bands of consecutive signature positions.
"""
from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from dataclean.io.writers import WriteError, write_json_atomic
from dataclean.text import kernels as _text_kernels, script_fold
from dataclean.text.chars import HAN, HIRAGANA, KATAKANA

__all__ = [
    "DEFAULT_SCHEME", "MAX_HASH", "SCHEMES", "band_hashes", "estimate_jaccard", "optimal_bands",
    "permutations", "shingle_hash", "shingle_hash_single", "shingle_hashes", "shingle_text",
    "shingles_single", "signatures", "to_lean_minhash", "kernels_enabled",
]

SCHEMES = ("affine32", "legacy")
DEFAULT_SCHEME = "affine32"
#: The value of every position of a signature with no shingles, in both schemes.
MAX_HASH = (1 << 32) - 1
MERSENNE_PRIME = (1 << 61) - 1

TOKEN_SEED = 0
SHINGLE_INIT = 0x9E3779B97F4A7C15
SHINGLE_MUL = 0xFF51AFD7ED558CCD
SPLITMIX_MUL1 = 0xBF58476D1CE4E5B9
SPLITMIX_MUL2 = 0x94D049BB133111EB
MASK64 = (1 << 64) - 1
MASK32 = (1 << 32) - 1

#: Han and kana, exactly the tokenizer's classes (RE2 syntax for Arrow, Python syntax for the reference).
CJK_CLASS = HAN + HIRAGANA + KATAKANA
CJK_CLASS_PY = re.sub(r"\\x\{([0-9a-fA-F]+)\}", lambda m: "\\U%08x" % int(m.group(1), 16), CJK_CLASS)
_CJK_PY = re.compile(f"[{CJK_CLASS_PY}]")

#: Shingle rows × permutations computed at once in :func:`signatures` (uint32/uint64 elements): large
#: enough to amortize numpy's per-call cost, small enough to stay in cache (measured best near 1M).
CHUNK_ELEMENTS = 1 << 20

_U64 = np.uint64


# ---------------------------------------------------------------- compiled kernels (numba), optional

#: XXH3's default secret (``XXH3_kSecret`` of xxHash 0.8), the key of xxh3_64 with seed 0.
XXH3_SECRET = bytes.fromhex(
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671fcb79e64eccc0e578825ad07dccff7221"
    "b8084674f743248ee03590e6813a264c3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
    "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364eac5ac8334d3ebc3c581a0fffa1363eb"
    "170ddd51b7f0da49d316552629d4689e2b16be587d47a1fc8ff8b8d17ad031ce45cb3a8f95160428afd7fbcabb4b407e")
#: The same secret as a uint8 array, the form the compiled kernels take it in.
SECRET_U8 = np.frombuffer(XXH3_SECRET, np.uint8)

_state: dict = {}  # "mod": dataclean.dedup._minhash_numba, or None when it cannot be used; "maps": tables


def kernels_enabled() -> bool:
    """Do :func:`shingle_text`, :func:`shingle_hashes`, :func:`signatures` (``affine32``), exact dedup's
    content key and the exact-Jaccard verification run their compiled (numba) kernels? Same switch as
    :func:`dataclean.text.kernels.enabled` (``DATACLEAN_KERNELS=0`` turns them off); same results either way."""
    if _text_kernels.switched_off():
        return False
    return mh_kernels() is not None


def mh_kernels():
    """The compiled MinHash kernels module (``dataclean.dedup._minhash_numba``), loaded once per process, or None
    when numba is missing or the kernels are switched off."""
    if "mod" not in _state and not _text_kernels.ready("minhash"):
        return None  # (compiling in the background: the numpy code meanwhile)
    return _text_kernels.once(_state, "mod", _load_kernels)


def kernels_loaded() -> bool:
    """Has this process loaded the compiled MinHash kernels already (importing numba costs ~1 s)?"""
    return _state.get("mod") is not None


def task_threads(threads: int) -> int:
    """``threads``, at least 1 and no more than the cores this process may run on (an executor's workers may
    be a Ray cluster's CPUs, not this machine's)."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    return max(1, min(int(threads), cores))


def in_slices(n: int, threads: int, fn) -> list:
    """``[fn(lo, hi), ...]`` over ``threads`` consecutive slices of ``range(n)``, in threads (for kernels that
    release the GIL), in slice order; one call in this thread when ``threads`` < 2."""
    if threads < 2:
        return [fn(0, n)]
    from concurrent.futures import ThreadPoolExecutor

    cut = [n * i // threads for i in range(threads + 1)]
    with ThreadPoolExecutor(threads) as pool:
        return list(pool.map(fn, cut[:-1], cut[1:]))


def shingle_sets(texts: pa.Array | pa.ChunkedArray, word_ngram: int = 5, char_ngram: int = 5,
                 threads: int = 1, fold: str = "off") -> tuple[np.ndarray, np.ndarray] | None:
    """``(values, offsets)``: each document's :func:`shingle_hashes` of its :func:`shingle_text` (folded as
    ``fold`` says), sorted and without repeats (compiled ``unique_sets``), as exact Jaccard compares them; None
    without the kernels.

    ``threads`` > 1 cuts the documents into that many consecutive slices done in parallel (the kernels release
    the GIL) and joins them: the same arrays. A verification task alone on a 2-worker machine (one component
    of a 48,713-document chain) spent 1.8 s here in one thread."""
    if not kernels_enabled():
        return None
    k = mh_kernels()
    _char_maps()  # (loaded once, before the threads)
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    n = len(texts)
    threads = max(1, min(int(threads), n // 1000 or 1))

    def one(lo: int, hi: int) -> tuple[np.ndarray, np.ndarray]:
        values, offsets = shingle_hashes(shingle_text(texts.slice(lo, hi - lo), fold), word_ngram, char_ngram)
        return k.unique_sets(values, offsets)

    parts = in_slices(n, threads, one)
    if len(parts) == 1:
        return parts[0]
    shift = np.cumsum([0] + [int(o[-1]) for _, o in parts[:-1]])
    offsets = np.concatenate([[0]] + [o[1:] + d for (_, o), d in zip(parts, shift)]).astype(np.int64)
    return np.concatenate([v for v, _ in parts]), offsets


def sets_to_binary(values: np.ndarray, offsets: np.ndarray) -> pa.LargeBinaryArray:
    """:func:`shingle_sets` as one large_binary value per document, the bytes of its little-endian uint32
    values (how the gather tasks store them: 25,000 sets of a chain read from Parquet in 0.013 s, against
    0.07-0.19 s as list<uint32>); :func:`sets_from_binary` reads them back."""
    return pa.LargeBinaryArray.from_buffers(pa.large_binary(), len(offsets) - 1, [
        None, pa.py_buffer(np.asarray(offsets, np.int64) * 4), pa.py_buffer(np.asarray(values, "<u4").view(np.uint8))])


def sets_from_binary(column: pa.LargeBinaryArray | pa.ChunkedArray) -> tuple[np.ndarray, np.ndarray]:
    """``(values, offsets)`` of :func:`sets_to_binary`'s column (sliced or in chunks), without a copy of the
    values when it is one chunk."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    at = np.frombuffer(column.buffers()[1], np.int64)[column.offset:column.offset + len(column) + 1]
    data = np.frombuffer(column.buffers()[2], np.uint8)[at[0]:at[-1]]
    return data.view("<u4"), (at - at[0]) // 4


def warm_up() -> bool:
    """Compile (first run after an install or a change of ``_minhash_numba.py``) or load every MinHash kernel
    and the character tables now, so that a benchmark or a CI job does not pay it inside what it measures.
    Returns :func:`kernels_enabled`; the family is then marked ready (:func:`dataclean.text.kernels.ready`)."""
    _text_kernels.allow_compile()
    if not kernels_enabled():
        return False
    texts = pa.array(["Hello, World! 2024 ＡＢ，", "中文 ﬀ é", "", "繁體中文"], pa.string())
    values, offsets = shingle_hashes(shingle_text(texts))
    shingle_text(texts, fold=script_fold.DEFAULT_FOLD)
    signatures(values, offsets)
    map_text_kernel(texts, content_key_mode())  # (exact dedup's content key, dataclean.dedup.keys)
    map_text_kernel(texts, content_key_mode(), fold=script_fold.DEFAULT_FOLD)
    k = mh_kernels()
    sets, set_offsets = k.unique_sets(values, offsets)
    k.jaccard_pairs(sets, set_offsets, np.array([0]), np.array([1]))
    k.jaccard_one(sets, set_offsets, 0, 1)
    _text_kernels.mark_ready("minhash")
    return True


def _load_kernels():
    def load():
        from dataclean.dedup import _minhash_numba as k
        k.xxh3_64_many(SECRET_U8, np.zeros(1, np.int64), SECRET_U8)  # compile, or load from the disk cache
        _char_maps()  # (raises when this Arrow's kernels break an assumption of the tables)
        return k
    return _text_kernels.load_compiled(load, "compiled MinHash kernels", "numpy")


def _char_maps() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(lower-case code point, class bits, NFKC offsets, NFKC pool) per code point, computed by Arrow (see
    :func:`_build_char_maps`), kept on disk next to the numba cache and once per process."""
    maps = _state.get("maps")
    if maps is None:
        import unicodedata

        path = os.path.join(_text_kernels.cache_dir(), f"minhash-chars-v3-pyarrow-{pa.__version__}"
                            f"-ucd-{unicodedata.unidata_version}.npz")
        names = ("lower", "classes", "nfkc_off", "nfkc_pool")
        try:
            with np.load(path) as f:
                maps = tuple(f[name] for name in names)
            if maps[0].shape != (0x110000,) or maps[1].shape != (0x110000,) or maps[2].shape != (0x110001,):
                maps = None
        except (OSError, ValueError, KeyError):
            maps = None
        if maps is None:
            maps = _build_char_maps()
            try:  # written whole, then renamed: a concurrent reader sees the old file or the new one
                os.makedirs(os.path.dirname(path), exist_ok=True)
                tmp = f"{path}.{os.getpid()}.tmp.npz"
                np.savez(tmp, **dict(zip(names, maps)))
                os.replace(tmp, path)
            except OSError:
                pass
        _state["maps"] = maps
    return maps


def _build_char_maps() -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Every code point run through the same Arrow kernels as :func:`shingle_text` and
    ``dedup.keys.content_key_text``: ``utf8_lower`` (one code point to one code point, checked), the regex
    classes those chains use (bits of ``_minhash_numba``), and NFKC (:func:`_nfkc_tables`), so the kernels and
    the chains agree on every code point whatever the Unicode versions of utf8proc, RE2 and Python."""
    from dataclean.dedup import _minhash_numba as k

    cps = np.concatenate([np.arange(0, 0xD800), np.arange(0xE000, 0x110000)]).astype(np.uint32)
    chars = _text_kernels._code_point_strings(cps)
    low = pc.utf8_lower(chars)
    if not pc.all(pc.equal(pc.utf8_length(low), 1)).as_py():
        raise ValueError("utf8_lower maps some code point to several")
    lower = np.arange(0x110000, dtype=np.int32)
    lower[cps] = np.frombuffer("".join(low.to_pylist()).encode("utf-32-le"), "<u4").astype(np.int32)

    def match(pattern: str) -> np.ndarray:
        return pc.match_substring_regex(chars, pattern).to_numpy(zero_copy_only=False)

    bits = np.zeros(len(cps), np.uint8)
    bits[match(r"^\p{Nd}$")] |= k.ND
    bits[match(r"^\p{Cf}$")] |= k.CF
    bits[match(r"^[\pP\pS\pZ\p{Cc}\p{Co}\s]$")] |= k.SEP
    bits[match(r"^\s$")] |= k.RE2_SPACE
    bits[match(f"^[{CJK_CLASS}]$")] |= k.CJK
    bits[pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(chars)), 0).to_numpy(zero_copy_only=False)] |= k.ARROW_SPACE
    classes = np.zeros(0x110000, np.uint8)
    classes[cps] = bits
    nfkc_off, nfkc_pool = _nfkc_tables(chars, cps, classes)
    return lower, classes, nfkc_off, nfkc_pool


def _nfkc_tables(chars: pa.Array, cps: np.ndarray, classes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sets the NFKC bits of ``classes`` and returns (offsets, pool) of the NFKC forms of the NFKC_MAPPED
    characters (``pool[offsets[c]:offsets[c + 1]]``, code points).

    NFKC_INERT: NFKC leaves every string made only of such characters unchanged. By the quick check of UAX #15
    (a string whose characters are all NFKC_Quick_Check=Yes with combining class 0 is in NFKC), a character
    qualifies when Arrow's NFKC (utf8proc) and Python's leave it alone, its combining class is 0, it is
    assigned in Python's Unicode version (so the stability policy makes the versions agree), and it is not the
    second character of any two-character canonical decomposition nor a Hangul vowel or trailing consonant
    jamo (the characters that may compose with the one before: Quick_Check=Maybe).

    NFKC_MAPPED: a character whose NFKC alone (Arrow's, equal to Python's) is made of NFKC_INERT characters.
    NFKC is the normal form of compatibility equivalence, which concatenation preserves, so NFKC(x c y) =
    NFKC(x NFKC(c) y), which is x NFKC(c) y when x, y and NFKC(c) are all NFKC_INERT: a document made of
    NFKC_INERT and NFKC_MAPPED characters is normalized by replacing each mapped character by its form
    (full-width punctuation of Chinese text, no-break spaces, ellipses...), without Arrow's NFKC.
    """
    import unicodedata

    from dataclean.dedup import _minhash_numba as k

    nfkc = pc.utf8_normalize(chars, "NFKC")
    same = pc.equal(nfkc, chars).to_numpy(zero_copy_only=False)
    seconds = _text_kernels.composing_seconds()
    for i in np.flatnonzero(same).tolist():
        cp = int(cps[i])
        c = chr(cp)
        if cp < 0x80 or (cp not in seconds and unicodedata.combining(c) == 0
                         and unicodedata.category(c) != "Cn" and unicodedata.normalize("NFKC", c) == c):
            classes[cp] |= k.NFKC_INERT
    lengths = np.zeros(0x110000, np.int32)
    forms: dict[int, list[int]] = {}
    changed = np.flatnonzero(~same)
    for i, form in zip(changed.tolist(), nfkc.take(pa.array(changed)).to_pylist()):
        cp = int(cps[i])
        c = chr(cp)
        if unicodedata.category(c) == "Cn" or unicodedata.normalize("NFKC", c) != form:
            continue
        points = [ord(x) for x in form]
        if points and all(classes[p] & k.NFKC_INERT for p in points):
            classes[cp] |= k.NFKC_MAPPED
            forms[cp] = points
            lengths[cp] = len(points)
    offsets = np.zeros(0x110001, np.int32)
    np.cumsum(lengths, out=offsets[1:])
    pool = np.zeros(int(offsets[-1]), np.int32)
    for cp, points in forms.items():
        pool[offsets[cp]:offsets[cp + 1]] = points
    return offsets, pool


_buffers = _text_kernels.string_buffers  # (int64 offsets, zero-copy data) of a string array


def content_key_mode() -> int:
    """The :func:`map_text_kernel` mode of :func:`dataclean.dedup.keys.content_key_text` (kernels enabled)."""
    return mh_kernels().MODE_CONTENT_KEY


def map_text_kernel(texts: pa.Array, mode: int, nfkc: bool = False, fold: str = "off") -> pa.Array | None:
    """A ``string`` array without nulls mapped by ``_minhash_numba.map_text`` (same type), after NFKC when
    ``nfkc`` (Arrow's, only for the documents with a character the tables do not cover), and folded as
    ``script_fold.fold_scripts(…, fold)`` folds the mapped text; None when the kernels cannot do it (then the
    caller runs its Arrow chain).

    Folding is done in the same pass (the traditional-only and the simplified-only characters counted on the
    way); only the documents :func:`dataclean.text.script_fold.traditional` finds, in ``"phrases"`` mode, are
    mapped again without folding for OpenCC's phrase conversion, then folded."""
    if not pa.types.is_string(texts.type) or texts.null_count:
        return None
    fold = script_fold.fold_mode(fold)
    mapped = _map_text_kernel(texts, mode, nfkc, fold != "off")
    if mapped is None or fold != "phrases":
        return mapped if mapped is None else mapped[0]
    out, counts = mapped
    rows = np.flatnonzero(script_fold.traditional(counts[:, 0], counts[:, 1]))
    if not len(rows):
        return out
    plain = _map_text_kernel(texts.take(pa.array(rows)), mode, nfkc, False)
    if plain is None:
        return None
    return script_fold.replace_rows(out, rows, script_fold.fold_t2s(script_fold.phrase_convert(plain[0])))


def _map_text_kernel(texts: pa.Array, mode: int, nfkc: bool, fold: bool) -> tuple[pa.Array, np.ndarray] | None:
    """(mapped texts, counts of :func:`_minhash_numba.map_text`, shape (n, 2), when ``fold``) or None."""
    k = mh_kernels()
    lower, classes, nfkc_off, nfkc_pool = _char_maps()
    if fold:
        fold_table, script = script_fold.t2s_table(), script_fold.script_table()
        counts = np.zeros((len(texts), 2), np.int64)
    else:
        fold_table, script, counts = _NO_FOLD, _NO_SCRIPT, _NO_COUNTS
    offsets, data = _buffers(texts)
    sub_offsets, sub_data, sub_index = offsets, data, np.zeros(0, np.int64)
    if nfkc:
        done = _text_kernels.normalize_uncovered(texts, offsets, data, classes, k.NFKC_INERT | k.NFKC_MAPPED, "NFKC")
        if done is None:
            return None
        sub_offsets, sub_data, sub_index = done[3:]
    cap = 2 * int(offsets[-1] - offsets[0]) + 64
    out_offsets = np.empty(len(texts) + 1, np.int64)
    while True:
        out = np.empty(cap, np.uint8)
        status = k.map_text(data, offsets, sub_data, sub_offsets, sub_index, lower, classes, nfkc_off, nfkc_pool,
                            mode, fold_table, script, counts, out, out_offsets)
        if status != -2:
            break
        cap *= 2
    if status != 0 or out_offsets[-1] >= 1 << 31:
        return None
    return pa.StringArray.from_buffers(len(texts), pa.py_buffer(out_offsets.astype(np.int32)),
                                       pa.py_buffer(out[:out_offsets[-1]])), counts


_NO_FOLD = np.zeros(0, np.int32)
_NO_SCRIPT = np.zeros(0, np.uint8)
_NO_COUNTS = np.zeros((0, 2), np.int64)


# ---------------------------------------------------------------- normalization


def shingle_text(texts: pa.Array | pa.ChunkedArray, fold: str = "off") -> pa.Array:
    """The text near-duplicate detection compares (see the module docstring); null gives ``""``. ``fold``:
    then :func:`dataclean.text.script_fold.fold_scripts` of it (traditional Chinese to simplified:
    ``"phrases"``, ``"characters"`` or ``"off"``; ``minhash_dedup``'s ``fold_scripts``).

    >>> shingle_text(pa.array(["Hello,  World! 2024"])).to_pylist()
    ['hello world 0000']
    >>> shingle_text(pa.array(["軟體「檔案」", "软件 文件"]), fold="phrases").to_pylist()
    ['软件 文件', '软件 文件']
    """
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    t = pc.fill_null(texts.cast(pa.string()), "")
    if kernels_enabled():
        mapped = map_text_kernel(t, mh_kernels().MODE_SHINGLE, nfkc=True, fold=fold)
        if mapped is not None:
            return mapped
    return script_fold.fold_scripts(_shingle_chain(t), fold)


def _shingle_chain(t: pa.Array) -> pa.Array:
    """:func:`shingle_text` in Arrow kernels (no nulls)."""
    t = pc.utf8_normalize(t, "NFKC")
    t = pc.utf8_lower(t)
    t = pc.replace_substring_regex(t, r"\p{Nd}", "0")
    # format characters hide inside words (zero-width space, soft hyphen, BOM): delete, do not split
    t = pc.replace_substring_regex(t, r"\p{Cf}+", "")
    t = pc.replace_substring_regex(t, r"[\pP\pS\pZ\p{Cc}\p{Co}\s]+", " ")
    return pc.utf8_trim(t, " ")


# ---------------------------------------------------------------- shingles: pure-Python reference


def _token_hash(token: str) -> int:
    return xxhash.xxh3_64_intdigest(token.encode("utf-8"), seed=TOKEN_SEED)


def shingle_hash(tokens: Sequence[str]) -> int:
    """32-bit hash of one shingle (its tokens in order), as defined in the module docstring."""
    h = SHINGLE_INIT ^ len(tokens)
    for tok in tokens:
        h = ((h ^ _token_hash(tok)) * SHINGLE_MUL) & MASK64
        h ^= h >> 31
    h ^= h >> 30
    h = (h * SPLITMIX_MUL1) & MASK64
    h ^= h >> 27
    h = (h * SPLITMIX_MUL2) & MASK64
    h ^= h >> 31
    return h & MASK32


def _stream_shingles(tokens: list[str], n: int) -> list[tuple[str, ...]]:
    if not tokens:
        return []
    if len(tokens) < n:
        return [tuple(tokens)]
    return [tuple(tokens[i:i + n]) for i in range(len(tokens) - n + 1)]


def shingles_single(text: str, word_ngram: int = 5, char_ngram: int = 5) -> list[tuple[str, ...]]:
    """Shingles of one :func:`shingle_text`-normalized document, in the order :func:`shingle_hashes` gives
    their hashes: word shingles, then CJK-character shingles."""
    words = [w for w in _CJK_PY.sub(" ", text).split(" ") if w]
    chars = _CJK_PY.findall(text)
    return _stream_shingles(words, word_ngram) + _stream_shingles(chars, char_ngram)


def shingle_hash_single(text: str, word_ngram: int = 5, char_ngram: int = 5) -> list[int]:
    """Shingle hashes of one normalized document, in pure Python: the reference for :func:`shingle_hashes`.

    For a raw text: ``shingle_hash_single(shingle_text(pa.array([raw]))[0].as_py())``.
    """
    return [shingle_hash(s) for s in shingles_single(text, word_ngram, char_ngram)]


# ---------------------------------------------------------------- shingles: vectorized


def hash_distinct(values: list) -> np.ndarray:
    """xxh3_64 (seed 0) of each UTF-8 ``bytes`` value, as uint64."""
    digest = xxhash.xxh3_64_intdigest
    return np.fromiter((digest(v, TOKEN_SEED) for v in values), dtype=np.uint64, count=len(values))


def _word_tokens(texts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(token hashes, per-document token counts) of the word stream."""
    spaced = pc.replace_substring_regex(texts, f"[{CJK_CLASS}]+", " ")
    parts = pc.split_pattern(spaced, " ")
    flat = pc.list_flatten(parts)
    parent = pc.list_parent_indices(parts).to_numpy()
    keep = pc.greater(pc.binary_length(flat), 0).to_numpy(zero_copy_only=False)
    words = flat.filter(pa.array(keep))
    counts = np.bincount(parent[keep], minlength=len(texts)).astype(np.int64)
    if len(words) == 0:
        return np.zeros(0, np.uint64), counts
    enc = pc.dictionary_encode(words)
    token = hash_distinct(enc.dictionary.cast(pa.binary()).to_pylist())
    return token[enc.indices.to_numpy()], counts


def _cjk_tokens(texts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(token hashes, per-document token counts) of the CJK-character stream."""
    only = pc.replace_substring_regex(texts, f"[^{CJK_CLASS}]+", "")
    offsets, data = _buffers(only)
    data = data[offsets[0]:offsets[-1]]
    offsets = offsets - offsets[0]
    lead = np.flatnonzero((data & 0xC0) != 0x80)
    counts = np.diff(np.searchsorted(lead, offsets)).astype(np.int64)
    if len(lead) == 0:
        return np.zeros(0, np.uint64), counts
    # a character's UTF-8 bytes, big-endian in one integer: a unique key per character
    first = data[lead].astype(np.uint32)
    length = 1 + (first >= 0xC0) + (first >= 0xE0) + (first >= 0xF0)
    key = first
    last = len(data) - 1
    for j in range(1, 4):
        more = length > j
        nxt = data[np.minimum(lead + j, last)].astype(np.uint32)
        key = np.where(more, (key << np.uint32(8)) | nxt, key)
    enc = pc.dictionary_encode(pa.array(key, pa.uint32()))
    distinct = enc.dictionary.to_pylist()
    token = hash_distinct([k.to_bytes((k.bit_length() + 7) // 8, "big") for k in distinct])
    return token[enc.indices.to_numpy()], counts


def _combine_windows(token: np.ndarray, n: int) -> np.ndarray:
    """Unfinalized hash of every window of ``n`` consecutive tokens (uint64 array ops wrap). Windows that
    straddle two documents are computed too and never used: cheaper than gathering."""
    width = len(token) - n + 1
    h = np.full(width, SHINGLE_INIT ^ n, dtype=np.uint64)
    for i in range(n):
        h ^= token[i:i + width]
        h *= _U64(SHINGLE_MUL)
        h ^= h >> _U64(31)
    return h


def _finalize(h: np.ndarray) -> np.ndarray:
    h ^= h >> _U64(30)
    h *= _U64(SPLITMIX_MUL1)
    h ^= h >> _U64(27)
    h *= _U64(SPLITMIX_MUL2)
    h ^= h >> _U64(31)
    return h


def _stream_hashes(token: np.ndarray, counts: np.ndarray, n: int,
                   full_only: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(shingle hashes as uint64, shingles per document) of one token stream (``full_only``: no shingle for a
    stream shorter than ``n``)."""
    starts = np.zeros(len(counts), np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    full = counts >= n
    per_doc = np.where(full, counts - n + 1, 0 if full_only else np.minimum(counts, 1))
    out = np.empty(int(per_doc.sum()), np.uint64)
    is_full = np.repeat(full, per_doc)
    m = np.where(full, counts - n + 1, 0)
    if m.any():
        # start of every n-gram: the document's first token + 0 … m-1
        first = np.repeat(starts - (np.cumsum(m) - m), m)
        out[is_full] = _finalize(_combine_windows(token, n)[first + np.arange(len(first))])
    short = ~full & (counts > 0)
    if short.any() and not full_only:
        s_start, s_len = starts[short], counts[short]
        h = SHINGLE_INIT ^ s_len.astype(np.uint64)
        for i in range(n - 1):
            live = s_len > i
            v = h[live] ^ token[s_start[live] + i]
            v *= _U64(SHINGLE_MUL)
            v ^= v >> _U64(31)
            h[live] = v
        out[~is_full] = _finalize(h)
    return out, per_doc


def shingle_hashes(texts: pa.Array | pa.ChunkedArray, word_ngram: int = 5,
                   char_ngram: int = 5, wide: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """``(values, offsets)``: uint32 hashes of every shingle of every document, concatenated, and int64
    offsets of length ``n + 1``; document ``i``'s shingles are ``values[offsets[i]:offsets[i + 1]]``.
    ``wide``: the full 64-bit hashes (uint64) before their truncation, for exact n-gram matching against a
    large set (decontamination), where 32 bits would collide; and only whole n-grams: a stream shorter than
    its n gives no shingle.

    ``texts`` must already be :func:`shingle_text`-normalized (null counts as ""). A document without
    words or CJK characters has zero shingles (``offsets[i] == offsets[i + 1]``): leave it to exact dedup.
    The hashes equal :func:`shingle_hash_single` of each document, in the same order.
    """
    if word_ngram < 1 or char_ngram < 1:
        raise ValueError("word_ngram and char_ngram must be >= 1")
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks()
    texts = pc.fill_null(texts.cast(pa.string()), "")
    n_docs = len(texts)
    if kernels_enabled():
        k = mh_kernels()
        offsets, data = _buffers(texts)
        w_tok, w_count, c_tok, c_count = k.token_hashes(data, offsets, _char_maps()[1], SECRET_U8)
        if not (len(w_count) and w_count[0] < 0):  # (invalid UTF-8: the Arrow path decides what it is)
            stream = k.stream_shingles64 if wide else k.stream_shingles
            return stream(w_tok, w_count, c_tok, c_count, word_ngram, char_ngram)
    w_vals, w_count = _stream_hashes(*_word_tokens(texts), word_ngram, full_only=wide)
    c_vals, c_count = _stream_hashes(*_cjk_tokens(texts), char_ngram, full_only=wide)
    per_doc = w_count + c_count
    offsets = np.zeros(n_docs + 1, np.int64)
    np.cumsum(per_doc, out=offsets[1:])
    values = np.empty(int(offsets[-1]), np.uint64 if wide else np.uint32)
    if len(c_vals) == 0:
        values[:] = w_vals
    elif len(w_vals) == 0:
        values[:] = c_vals
    else:
        # inside each document: its word shingles first, then its CJK shingles
        rank = np.arange(len(values)) - np.repeat(offsets[:-1], per_doc)
        is_word = rank < np.repeat(w_count, per_doc)
        values[is_word] = w_vals
        values[~is_word] = c_vals
    return values, offsets


# ---------------------------------------------------------------- signatures


def _check_scheme(scheme: str) -> None:
    if scheme not in SCHEMES:
        raise ValueError(f"scheme must be one of {SCHEMES}, got {scheme!r}")


@functools.lru_cache(maxsize=32)
def _permutations(num_perm: int, seed: int, scheme: str) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.RandomState(seed)
    if scheme == "legacy":
        # drawn as datasketch draws them: a then b for each permutation in turn
        pairs = [(rng.randint(1, MERSENNE_PRIME, dtype=np.uint64), rng.randint(0, MERSENNE_PRIME, dtype=np.uint64))
                 for _ in range(num_perm)]
        a = np.array([p[0] for p in pairs], np.uint64)
        b = np.array([p[1] for p in pairs], np.uint64)
    else:
        a = rng.randint(0, 1 << 31, num_perm, dtype=np.uint32) * np.uint32(2) + np.uint32(1)
        b = rng.randint(0, 1 << 32, num_perm, dtype=np.uint32)
    a.flags.writeable = False
    b.flags.writeable = False
    return a, b


def permutations(num_perm: int = 128, seed: int = 1, scheme: str = DEFAULT_SCHEME) -> tuple[np.ndarray, np.ndarray]:
    """The permutation parameters ``(a, b)`` datasketch draws for ``MinHash(num_perm, seed, scheme=…)``
    (uint32 for "affine32", uint64 for "legacy"; read-only, cached)."""
    _check_scheme(scheme)
    if num_perm < 1:
        raise ValueError("num_perm must be positive")
    return _permutations(int(num_perm), int(seed), scheme)


def _fmix32(h: np.ndarray) -> np.ndarray:
    """MurmurHash3's 32-bit finalizer (datasketch's pre-mix for the affine schemes)."""
    h = h ^ (h >> np.uint32(16))
    h *= np.uint32(0x85EBCA6B)
    h ^= h >> np.uint32(13)
    h *= np.uint32(0xC2B2AE35)
    h ^= h >> np.uint32(16)
    return h


def _permute_affine32(hv: np.ndarray, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> np.ndarray:
    np.multiply(a[:, None], hv[None, :], out=out)
    np.add(out, b[:, None], out=out)
    return out


_P = _U64(MERSENNE_PRIME)
_M32 = _U64(MASK32)
_S61 = _U64(61)
_ONE = _U64(1)


def _permute_legacy(hv: np.ndarray, a: np.ndarray, b: np.ndarray, out: np.ndarray,
                    tmp: np.ndarray) -> np.ndarray:
    # x = (a*h + b) mod 2**64 (numpy wraps, as datasketch's uint64 arithmetic does)
    np.multiply(a[:, None], hv[None, :], out=out)
    np.add(out, b[:, None], out=out)
    # x mod p with p = 2**61 - 1: 2**61 = 1 (mod p), so y = (x & p) + (x >> 61) = x (mod p), y < 2p
    np.right_shift(out, _S61, out=tmp)
    np.bitwise_and(out, _P, out=out)
    np.add(out, tmp, out=out)
    # y mod p = y - p if y >= p else y; y >= p exactly when (y + 1) >> 61 == 1, and the low 32 bits of
    # y - p = y - 2**61 + 1 are those of y + 1, so "& 0xFFFFFFFF" of y mod p is that of y + ((y + 1) >> 61)
    np.add(out, _ONE, out=tmp)
    np.right_shift(tmp, _S61, out=tmp)
    np.add(out, tmp, out=out)
    np.bitwise_and(out, _M32, out=out)
    return out


def signatures(values: np.ndarray, offsets: np.ndarray, num_perm: int = 128, seed: int = 1, *,
               scheme: str = DEFAULT_SCHEME) -> np.ndarray:
    """MinHash signatures, ``(n_docs, num_perm)`` uint64: row ``i`` equals the ``hashvalues`` of
    ``datasketch.MinHash(num_perm, seed, hashfunc=…, scheme=scheme)`` updated with the 32-bit values
    ``values[offsets[i]:offsets[i + 1]]``; a document with no values gets :data:`MAX_HASH` everywhere.

    Works through the shingles in chunks of about :data:`CHUNK_ELEMENTS` hashes, so memory is bounded
    whatever the batch size.
    """
    a, b = permutations(num_perm, seed, scheme)
    values = np.asarray(values)
    offsets = np.asarray(offsets, dtype=np.int64)
    if offsets.ndim != 1 or len(offsets) < 1 or offsets[0] != 0 or offsets[-1] != len(values) \
            or np.any(np.diff(offsets) < 0):
        raise ValueError("offsets must start at 0, not decrease and end at len(values)")
    if values.dtype != np.uint32:
        if values.size and (values.min() < 0 or values.max() > MASK32):
            raise ValueError("values must be 32-bit hashes")
        values = values.astype(np.uint32)
    if scheme == "affine32" and kernels_enabled():
        return mh_kernels().signatures_affine32(values, offsets, a, b).astype(np.uint64)
    n_docs = len(offsets) - 1
    out = np.full((n_docs, num_perm), MAX_HASH, dtype=np.uint64)
    total = len(values)
    if total == 0:
        return out
    chunk = max(1, CHUNK_ELEMENTS // num_perm)
    if scheme == "affine32":
        hv_all = _fmix32(values)
        buf = np.empty((num_perm, min(chunk, total)), np.uint32)
    else:
        hv_all = values.astype(np.uint64)
        buf = np.empty((num_perm, min(chunk, total)), np.uint64)
        tmp = np.empty_like(buf)
    for s in range(0, total, chunk):
        e = min(total, s + chunk)
        hv = hv_all[s:e]
        k = e - s
        if scheme == "affine32":
            phv = _permute_affine32(hv, a, b, buf[:, :k])
        else:
            phv = _permute_legacy(hv, a, b, buf[:, :k], tmp[:, :k])
        # documents that have shingles in [s, e): their segment starts inside the chunk
        d0 = int(np.searchsorted(offsets, s, side="right")) - 1
        d1 = int(np.searchsorted(offsets, e, side="left"))
        seg_start = np.clip(offsets[d0:d1], s, e) - s
        seg_end = np.clip(offsets[d0 + 1:d1 + 1], s, e) - s
        live = seg_end > seg_start
        docs = np.arange(d0, d1)[live]
        # segments are non-empty, contiguous and cover the chunk, so reduceat is exact (first one starts at 0)
        mins = np.minimum.reduceat(phv, seg_start[live], axis=1)
        out[docs] = np.minimum(out[docs], mins.T)
    return out


def estimate_jaccard(sig_a: np.ndarray, sig_b: np.ndarray) -> np.ndarray:
    """Estimated Jaccard similarity, row by row: the fraction of positions where the signatures agree
    (datasketch's ``MinHash.jaccard``). For 1-D inputs the result is a 0-d array."""
    sig_a, sig_b = np.asarray(sig_a), np.asarray(sig_b)
    if sig_a.shape[-1] != sig_b.shape[-1]:
        raise ValueError("signatures have different numbers of permutations")
    return np.mean(sig_a == sig_b, axis=-1)


# ---------------------------------------------------------------- LSH bands


BANDS_CACHE = "minhash-bands-v1.json"  # (next to the numba cache: one entry per parameter set)


@functools.lru_cache(maxsize=64)  # (the driver validates and builds the stage more than once)
def optimal_bands(threshold: float = 0.8, num_perm: int = 128, false_positive_weight: float = 0.5,
                  false_negative_weight: float = 0.5) -> tuple[int, int]:
    """:func:`compute_optimal_bands`, remembered on disk (:data:`BANDS_CACHE`): the integration takes 40-170 ms
    of numpy per process (the driver's, the report's), reading the answer back well under 1 ms."""
    args = (float(threshold), int(num_perm), float(false_positive_weight), float(false_negative_weight))
    key = ",".join(repr(a) for a in args)
    path = os.path.join(_text_kernels.cache_dir(), BANDS_CACHE)
    try:
        with open(path, encoding="utf-8") as f:
            known = json.load(f)
    except (OSError, ValueError):
        known = {}
    known = known if isinstance(known, dict) else {}
    entry = known.get(key)
    if isinstance(entry, list) and len(entry) == 2 and all(isinstance(v, int) and v >= 1 for v in entry) \
            and entry[0] * entry[1] <= args[1]:
        return entry[0], entry[1]
    opt = compute_optimal_bands(*args)
    known[key] = list(opt)
    try:  # (two processes writing at once lose an entry, not the file)
        write_json_atomic(known, path)
    except WriteError:
        pass
    return opt


def compute_optimal_bands(threshold: float = 0.8, num_perm: int = 128, false_positive_weight: float = 0.5,
                          false_negative_weight: float = 0.5) -> tuple[int, int]:
    """``(bands, rows)`` with ``bands * rows <= num_perm`` minimizing ``fp_weight * FP + fn_weight * FN``,
    where FP is the area under the probability ``1 - (1 - s**r)**b`` that a pair of similarity ``s``
    shares a band, for ``s`` in [0, threshold], and FN the area above it on [threshold, 1]: datasketch's
    ``MinHashLSH`` optimization, integrated here with the trapezoid rule on 4001 points; ties go to the
    smallest ``b`` then ``r``, as in datasketch.
    """
    if not 0.0 <= threshold <= 1.0:
        raise ValueError("threshold must be in [0, 1]")
    if num_perm < 1:
        raise ValueError("num_perm must be positive")
    if false_positive_weight < 0 or false_negative_weight < 0:
        raise ValueError("weights must not be negative")
    s_fp = np.linspace(0.0, threshold, 4001)
    s_fn = np.linspace(threshold, 1.0, 4001)
    best, opt = np.inf, (0, 0)
    for b in range(1, num_perm + 1):
        r = np.arange(1, num_perm // b + 1, dtype=np.float64)[:, None]
        fp = _trapezoid(1.0 - (1.0 - s_fp ** r) ** b, s_fp, axis=1)
        fn = _trapezoid((1.0 - s_fn ** r) ** b, s_fn, axis=1)
        err = fp * false_positive_weight + fn * false_negative_weight
        i = int(np.argmin(err))
        if err[i] < best:
            best, opt = float(err[i]), (b, i + 1)
    return opt


_trapezoid = getattr(np, "trapezoid", None) or np.trapz  # numpy < 2.0 has only trapz

BAND_INIT = 0x6A09E667F3BCC909


def band_hashes(sigs: np.ndarray, bands: int, rows: int) -> np.ndarray:
    """``(n_docs, bands)`` uint64: band ``j`` of a signature is positions ``j*rows … j*rows + rows - 1``,
    hashed (with ``j``) to 64 bits::

        h = splitmix64(0x6A09E667F3BCC909 + j)
        for v in band: h = ((h ^ v) * 0xFF51AFD7ED558CCD) mod 2**64; h ^= h >> 31
        band_hash = splitmix64 finalizer of h   (as in the shingle hash)

    where ``splitmix64(x)`` is the splitmix64 finalizer of ``x``. Two documents are an LSH candidate pair
    when they share ``(j, band_hash)`` for some ``j``. Documents without shingles all have the same
    signature, hence the same band hashes: leave them out of the buckets (exact dedup handles them).
    """
    sigs = np.asarray(sigs)
    if sigs.ndim != 2:
        raise ValueError("sigs must be 2-D (n_docs, num_perm)")
    if bands < 1 or rows < 1 or bands * rows > sigs.shape[1]:
        raise ValueError(f"{bands} bands x {rows} rows do not fit in {sigs.shape[1]} permutations")
    v = sigs[:, :bands * rows].astype(np.uint64).reshape(len(sigs), bands, rows)
    init = _finalize(np.arange(bands, dtype=np.uint64) + _U64(BAND_INIT))
    h = np.broadcast_to(init, (len(sigs), bands)).copy()
    for i in range(rows):
        h ^= v[:, :, i]
        h *= _U64(SHINGLE_MUL)
        h ^= h >> _U64(31)
    return _finalize(h)


def to_lean_minhash(sig_row: np.ndarray, seed: int = 1, *, scheme: str = DEFAULT_SCHEME):
    """One signature row as a ``datasketch.LeanMinHash`` (for ``MinHashLSH``, Redis-backed or not). Give
    the ``seed`` and ``scheme`` the row was computed with. ``sig_row`` is a row of :func:`signatures`, or a
    signature as a run saves it (``sig`` of ``dedup/minhash_signatures/``: bytes of little-endian uint32)."""
    from datasketch import LeanMinHash

    _check_scheme(scheme)
    if isinstance(sig_row, pa.Scalar):
        sig_row = sig_row.as_py()
    if isinstance(sig_row, (bytes, bytearray, memoryview)):
        sig_row = np.frombuffer(sig_row, "<u4")
    row = np.asarray(sig_row, dtype=np.uint64)
    try:
        return LeanMinHash(seed=seed, hashvalues=row, scheme=scheme)
    except TypeError:  # datasketch < 2.0 knows only the legacy scheme and has no `scheme` argument
        if scheme != "legacy":
            raise ValueError("this datasketch version (< 2.0) supports only scheme='legacy'") from None
        return LeanMinHash(seed=seed, hashvalues=row)
