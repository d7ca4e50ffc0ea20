"""Compiled kernels (numba) for the hottest loops of the rule stages, with the pyarrow/numpy code as fallback.

Every kernel here computes exactly what the vectorised pyarrow/numpy implementation next to its caller
computes (tested word for word and signal for signal, ``tests/test_kernels.py``; ``benchmarks/profile_rules.py
--check`` compares the four rule stages bit for bit on bench shards), only in one pass over the Arrow buffers
instead of a chain of kernels that each materialise an intermediate array:

* :func:`words` — :func:`dataclean.text.tokenize.words_batch` in one pass over the UTF-8 bytes. The Unicode
  classes (letters, digits, marks; Arrow's whitespace) are read from Arrow itself (:func:`char_table`: every
  code point matched against ``[\\pL\\pN\\pM]`` by Arrow's RE2 kernel, and so on, ~0.15 s, then kept on disk next
  to the numba cache), so the kernel and the regex tokenizer agree on every code point whatever the Unicode
  versions of RE2 and Python.
* :func:`count_words` — the number of words per string, without building them (C4, FineWeb).
* :func:`ngram_signals` — the Gopher n-gram repetition signals, per document, with the same 64-bit keys as
  :func:`dataclean.stages.gopher.ngram_signals` (a hash table per document instead of one sort per batch).
* :func:`dup_fracs` — the Gopher duplicate line / paragraph fractions.
* :func:`gopher_lines` — the Gopher quality line statistics (non-blank, bullet and ellipsis lines, ``#``,
  ellipses).

numba is optional: without it (or with ``DATACLEAN_KERNELS=0`` in the environment, read at each call, which
is how the tests exercise both paths) :func:`enabled` is False and the callers run their pyarrow/numpy code.
numba is imported on first use, not when this module is imported. Compiled code is cached on disk
(``cache=True``) under ``$NUMBA_CACHE_DIR``, by default ``$XDG_CACHE_HOME/dataclean/numba`` (``~/.cache/...``).
Compiling every family takes ~50 s of CPU on the reference machine, longer than a small run takes without the
kernels at all, so no run waits for it (:func:`ready`): until a warm-up has put a family in the disk cache and
marked it ready, the callers run the pyarrow/numpy code and one background process (``python -m dataclean.warm``,
lowest priority) compiles; every later process, each worker of a run, pays ~0.3 s of CPU to import numba and
load the machine code. Measured on the rules chain (gopher_repetition > gopher_quality > c4 > fineweb_quality,
``benchmarks/profile_rules.py``): 3.2x less CPU in the four stages per document.
"""
from __future__ import annotations

import importlib.util
import os
import sys
import threading
import warnings

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.text.chars import CONTROL, HAN, HIRAGANA, KATAKANA, ODD_SPACE

#: Environment variable: ``0`` / ``false`` / ``no`` / ``off`` disables the compiled kernels.
ENV = "DATACLEAN_KERNELS"

_lock = threading.RLock()  # (re-entrant: what one loader makes may load another)
_state: dict = {}  # "mod": the compiled kernels (a namespace), or None when numba cannot be imported


def once(state: dict, key: str, make):
    """``state[key]``, made by ``make()`` on first use (by one thread; the others wait for it)."""
    if key not in state:
        with _lock:
            if key not in state:
                state[key] = make()
    return state[key]


def switched_off() -> bool:
    """``DATACLEAN_KERNELS`` is ``0`` / ``false`` / ``no`` / ``off``: every compiled kernel stays unused."""
    return os.environ.get(ENV, "1").strip().lower() in ("0", "false", "no", "off")


def enabled() -> bool:
    """Are the compiled kernels in use? (numba importable, and not disabled by ``DATACLEAN_KERNELS``)."""
    if switched_off():
        return False
    return _kernels() is not None


def _kernels():
    if "mod" not in _state and not ready("text"):
        return None
    return once(_state, "mod", _compile)


# -- when to compile: ahead of need, in a background process ----------------------------------------------------

#: The modules of numba functions, one per family of kernels; each family is compiled and marked ready whole.
FAMILIES = {"text": "dataclean.text._kernels_numba", "minhash": "dataclean.dedup._minhash_numba",
            "fold": "dataclean.text._fold_numba"}
#: ``DATACLEAN_KERNELS`` value: compile a family in the process that first needs it (numba's own behaviour).
COMPILE_HERE = "compile"
#: A warm-up process older than this is taken for dead (its lock is taken over).
WARMER_STALE_SECONDS = 1800


def allow_compile() -> None:
    """Let this process compile the kernels it uses (what :func:`warm_up` and the background warm-up do)."""
    _state["compile"] = True


def ready(family: str) -> bool:
    """May this process use ``family``'s compiled kernels now?

    Yes when it may compile them (:func:`allow_compile`, or ``DATACLEAN_KERNELS=compile``), or when a warm-up
    has put the whole family in the disk cache for these sources, this numba and this Python (its marker file
    is there: loading then takes ~0.3 s). Otherwise the first call starts one background process, for the
    machine, that compiles every family (``python -m dataclean.warm``, at the lowest priority, logging to
    ``warm.log`` in the cache folder) and this answers no: the callers run their pyarrow/numpy code, which gives
    the same results, until the marker appears (it is looked for at every call, one ``stat``). So no run waits
    for a minute of compilation: the first run after an install is as fast as a run without numba, and
    the next ones use the kernels."""
    if _state.get("compile") or os.environ.get(ENV, "").strip().lower() == COMPILE_HERE:
        return True
    if os.path.exists(marker_path(family)):
        return True
    if "warmer" not in _state:
        _state["warmer"] = start_warmer()
    return False


def mark_ready(family: str) -> None:
    """Record that ``family`` is compiled in the disk cache (after its warm-up ran every kernel)."""
    path = marker_path(family)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w") as f:
            f.write(f"{FAMILIES[family]} compiled by pid {os.getpid()}\n")
        os.replace(tmp, path)
    except OSError:
        pass


def marker_path(family: str) -> str:
    """The marker file of ``family``: named by what invalidates numba's cache of it (its source file's size
    and modification time, the numba and Python versions, the machine)."""
    key = f"marker:{family}"
    path = _state.get(key)
    if path is None:
        import hashlib
        import importlib.metadata
        import platform

        spec = importlib.util.find_spec(FAMILIES[family])
        origin = spec.origin if spec is not None and spec.origin else FAMILIES[family]
        try:
            st = os.stat(origin)
            stamp = f"{st.st_size}:{st.st_mtime_ns}"
        except OSError:
            stamp = "missing"
        try:
            numba_version = importlib.metadata.version("numba")
        except importlib.metadata.PackageNotFoundError:
            numba_version = "none"
        digest = hashlib.sha1("|".join((origin, stamp, numba_version, sys.version, platform.machine()))
                              .encode()).hexdigest()[:16]
        path = _state[key] = os.path.join(cache_dir(), f"ready-{family}-{digest}")
    return path


def start_warmer():
    """Start ``python -m dataclean.warm`` unless numba is missing or disabled, or a warm-up is running already
    (its lock file, ``warming.lock`` in the cache folder, names a live process). Returns its Popen, or None."""
    if switched_off() or importlib.util.find_spec("numba") is None or \
            os.environ.get("NUMBA_DISABLE_JIT", "0").strip() not in ("", "0"):
        return None
    import subprocess
    import time

    folder = cache_dir()
    lock = os.path.join(folder, "warming.lock")
    try:
        os.makedirs(folder, exist_ok=True)
        for _ in range(2):
            try:
                fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
                break
            except FileExistsError:
                if _warmer_alive(lock, time.time()):
                    return None
                try:
                    os.unlink(lock)  # (a warm-up that died, or one older than WARMER_STALE_SECONDS)
                except FileNotFoundError:
                    pass
        else:
            return None
        with open(os.path.join(folder, "warm.log"), "ab") as log:
            proc = subprocess.Popen([sys.executable, "-m", "dataclean.warm", "--lock", lock],
                                    stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                    process_group=0, close_fds=True)  # (own group: Ctrl-C on the run spares it)
        with os.fdopen(fd, "w") as f:
            f.write(str(proc.pid))
        return proc
    except OSError as exc:  # (a read-only home, a file in the way): say so once, or the kernels stay off unseen
        print(f"warning: dataclean's compiled kernels are off: their cache folder {folder} cannot be written "
              f"({exc.strerror or exc}); the slower pyarrow/numpy code runs instead, with the same results. "
              "Set NUMBA_CACHE_DIR to a writable folder to use them", file=sys.stderr)
        return None


def _warmer_alive(lock: str, now: float) -> bool:
    try:
        age = now - os.stat(lock).st_mtime
        with open(lock) as f:
            pid = int(f.read().strip() or 0)
    except (OSError, ValueError):
        return False
    if age > WARMER_STALE_SECONDS:
        return False
    if pid == 0:
        return age < 60  # (being written by the process that starts it)
    try:
        os.kill(pid, 0)  # (PermissionError: alive, another user's)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    return True


def cache_dir() -> str:
    """``$NUMBA_CACHE_DIR``, set to ``$XDG_CACHE_HOME/dataclean/numba`` (``~/.cache/...``) when unset."""
    if "NUMBA_CACHE_DIR" not in os.environ:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        os.environ["NUMBA_CACHE_DIR"] = os.path.join(base, "dataclean", "numba")
    return os.environ["NUMBA_CACHE_DIR"]


def load_compiled(load, what: str, fallback: str):
    """``load()`` (import a module of numba functions and compile or load one of them), or None when numba is
    missing, disabled (``NUMBA_DISABLE_JIT=1``: the kernels would run as Python loops) or unusable here (LLVM,
    platform: then a warning names ``what`` and the ``fallback`` used instead)."""
    cache_dir()  # (read by numba when it is imported)
    try:
        try:
            numba = _import_numba()
        except ImportError:
            return None
        if numba.config.DISABLE_JIT:
            return None
        if numba.config.CACHE_DIR != cache_dir():  # (numba imported before: its config read no cache folder)
            numba.config.CACHE_DIR = cache_dir()  # (read when a cached function is defined: the import below)
        return load()
    except Exception as exc:
        warnings.warn(f"dataclean: {what} unavailable ({exc!r}); using {fallback}")
        return None


def _import_numba():
    """``import numba``, with its implementation modules, if possible without importing ``scipy.linalg``.

    numba's ``numba.np.arraymath``, imported before any compiled function can be loaded, imports
    ``scipy.linalg`` only to learn whether a BLAS is there (``_HAVE_BLAS``, which picks the inner product of
    ``np.correlate`` / ``np.convolve``). With scipy 1.17 that import costs ~0.1 s (its array-API layer walks
    every attribute of numpy, which imports ``numpy.f2py`` and ``numpy.testing``): a tenth of a second more
    before the first worker of a run can start, for kernels that use no BLAS. So, in a process with a single
    thread (the workers' fork server; a script), ``scipy.linalg`` is kept out while numba sets up —
    ``sys.modules`` is the whole process's, so another thread importing scipy then would fail — and
    ``_HAVE_BLAS`` is then set to whether scipy is installed. The BLAS functions (``np.dot``...) import
    ``scipy.linalg`` themselves when a function using them is compiled, so numba code of the caller's that needs
    it works as before. Where ``scipy.linalg`` or numba's modules are already imported, or numba fails to set up
    without ``scipy.linalg``, numba is imported as it is."""
    blocked = "numba.np.arraymath" not in sys.modules and "scipy.linalg" not in sys.modules and \
        threading.active_count() == 1
    if blocked:
        sys.modules["scipy.linalg"] = None  # (an import of it raises ImportError: "no BLAS" to numba)
        try:
            import numba.np.arraymath  # noqa: F401
        except ImportError:  # (a numba that needs scipy.linalg after all: imported below, as it is)
            blocked = False
        finally:
            if sys.modules.get("scipy.linalg", 0) is None:
                del sys.modules["scipy.linalg"]
    import numba
    import numba.np.arraymath

    if blocked:
        numba.np.arraymath._HAVE_BLAS = importlib.util.find_spec("scipy") is not None
    return numba


def _compile():
    def load():
        from dataclean.text import _kernels_numba
        _kernels_numba.char_lengths(np.frombuffer(b"", np.uint8), np.zeros(1, np.int64))
        return _kernels_numba
    return load_compiled(load, "compiled kernels", "the pyarrow implementation")


# -- the character table ------------------------------------------------------------------------------------

#: Bits of :func:`char_table`.
WORD_CHAR = 1  # RE2 \pL, \pN or \pM
APOSTROPHE = 2  # ' or ’: part of a word run, trimmed from its ends
LETTER = 4  # RE2 \pL
ISO_SHIFT = 3  # bits 3-4: 1 Han, 2 Hiragana, 3 Katakana (tokenize.HAN / HIRAGANA / KATAKANA)
SPACE = 32  # whitespace for Arrow's utf8_trim_whitespace


def char_table() -> np.ndarray:
    """uint8 per code point (0..0x10FFFF): the bits above, computed with Arrow's RE2 (cached per process)."""
    return cached_table("table", f"chartable-v2-pyarrow-{pa.__version__}.npy", _char_table)


def cached_table(key: str, file_name: str, build) -> np.ndarray:
    """A uint8 table per code point: this process's, else the one on disk next to the numba cache, else
    ``build()`` (then saved there)."""
    table = _state.get(key)
    if table is None:
        path = os.path.join(cache_dir(), file_name)
        try:
            table = np.load(path)
        except (OSError, ValueError):
            table = None
        if table is None or table.shape != (0x110000,) or table.dtype != np.uint8:
            table = build()
            try:  # (written whole, then renamed: a concurrent reader sees the old file or the new one)
                os.makedirs(os.path.dirname(path), exist_ok=True)
                tmp = f"{path}.{os.getpid()}.tmp"
                with open(tmp, "wb") as f:
                    np.save(f, table)
                os.replace(tmp, path)
            except OSError:
                pass
        _state[key] = table
    return table


def _char_table() -> np.ndarray:
    """The table of :func:`char_table`: every code point matched against the tokenizer's classes by RE2."""
    cps = np.concatenate([np.arange(0, 0xD800), np.arange(0xE000, 0x110000)]).astype(np.uint32)
    chars = _code_point_strings(cps)

    def match(pattern: str) -> np.ndarray:
        return pc.match_substring_regex(chars, pattern).to_numpy(zero_copy_only=False)

    bits = np.zeros(len(cps), np.uint8)
    bits[match(r"^[\pL\pN\pM]$")] |= WORD_CHAR
    bits[match(r"^\pL$")] |= LETTER
    bits[match("^['’]$")] |= APOSTROPHE
    for iso, cls in ((1, HAN), (2, HIRAGANA), (3, KATAKANA)):
        bits[match(rf"^[{cls}]$")] |= iso << ISO_SHIFT
    spaces = pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(chars)), 0).to_numpy(zero_copy_only=False)
    bits[spaces] |= SPACE
    table = np.zeros(0x110000, np.uint8)
    table[cps] = bits
    return table


# -- the normalize stage's table ------------------------------------------------------------------------------

#: Bits of :func:`norm_table`: the Unicode normal forms that leave a character inert (a string of such characters
#: is already in that form), and the classes of the normalize stage's regexes.
NORM_INERT = {"NFC": 1, "NFD": 2, "NFKC": 4, "NFKD": 8}
NORM_CONTROL = 16  # chars.CONTROL
NORM_ODD_SPACE = 32  # chars.ODD_SPACE
NORM_TRIM = 64  # whitespace for Arrow's utf8_trim_whitespace


def norm_table() -> np.ndarray:
    """uint8 per code point (0..0x10FFFF): the bits above (cached per process and on disk, like
    :func:`char_table`)."""
    import hashlib
    import unicodedata

    rules = hashlib.sha256(f"{CONTROL}\0{ODD_SPACE}\0{NORM_INERT}".encode()).hexdigest()[:12]
    return cached_table("norm", f"normtable-v1-{rules}-pyarrow-{pa.__version__}-ucd-{unicodedata.unidata_version}"
                                 ".npy", _norm_table)


def _norm_table() -> np.ndarray:
    """The table of :func:`norm_table`. Inert in a form: by the quick check of UAX #15 (a string whose characters
    are all Quick_Check=Yes with canonical combining class 0 is in that form), a character qualifies when Arrow's
    normalization (utf8proc) and Python's leave it alone, its combining class is 0, it is assigned in Python's
    Unicode version (so the stability policy makes the two versions agree), and, for the composing forms (NFC,
    NFKC), it is not the second character of a two-character canonical decomposition nor a Hangul vowel or
    trailing consonant jamo (the characters that may compose with the one before: Quick_Check=Maybe). The regex
    classes are read from Arrow's RE2, like :func:`char_table`'s."""
    import unicodedata

    cps = np.concatenate([np.arange(0, 0xD800), np.arange(0xE000, 0x110000)]).astype(np.uint32)
    chars = _code_point_strings(cps)
    bits = np.zeros(len(cps), np.uint8)
    bits[pc.match_substring_regex(chars, f"^{CONTROL}$").to_numpy(zero_copy_only=False)] |= NORM_CONTROL
    bits[pc.match_substring_regex(chars, f"^{ODD_SPACE}$").to_numpy(zero_copy_only=False)] |= NORM_ODD_SPACE
    bits[pc.equal(pc.utf8_length(pc.utf8_trim_whitespace(chars)), 0).to_numpy(zero_copy_only=False)] |= NORM_TRIM
    seconds = composing_seconds()
    settled = np.array([cp < 0x80 or (unicodedata.combining(chr(cp)) == 0 and unicodedata.category(chr(cp)) != "Cn")
                        for cp in cps.tolist()])
    for form, bit in NORM_INERT.items():
        same = pc.equal(pc.utf8_normalize(chars, form), chars).to_numpy(zero_copy_only=False) & settled
        for i in np.flatnonzero(same).tolist():
            cp = int(cps[i])
            c = chr(cp)
            if cp < 0x80 or (unicodedata.normalize(form, c) == c and not (form in ("NFC", "NFKC") and cp in seconds)):
                bits[i] |= bit
    table = np.zeros(0x110000, np.uint8)
    table[cps] = bits
    return table


def composing_seconds() -> set[int]:
    """The code points that may compose with the one before them (Quick_Check=Maybe of the composing forms), by
    Python's Unicode data: the second character of every two-character canonical decomposition, and the Hangul
    vowel and trailing consonant jamo."""
    import unicodedata

    seconds = set(range(0x1161, 0x1176)) | set(range(0x11A8, 0x11C3))
    for cp in range(0x110000):
        d = unicodedata.decomposition(chr(cp))
        if d and not d.startswith("<"):
            parts = d.split()
            if len(parts) == 2:
                seconds.add(int(parts[1], 16))
    return seconds


def _code_point_strings(cps: np.ndarray) -> pa.Array:
    """A ``string`` array of one character per code point of ``cps`` (no surrogates)."""
    data = cps.astype("<u4").tobytes().decode("utf-32-le").encode("utf-8")
    lens = np.where(cps < 0x80, 1, np.where(cps < 0x800, 2, np.where(cps < 0x10000, 3, 4))).astype(np.int32)
    offsets = np.zeros(len(cps) + 1, np.int32)
    np.cumsum(lens, out=offsets[1:])
    return pa.StringArray.from_buffers(len(cps), pa.py_buffer(offsets), pa.py_buffer(data))


# -- helpers over Arrow buffers -----------------------------------------------------------------------------

def string_buffers(arr: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(offsets as int64, n + 1, into the whole data buffer; data as uint8, a zero-copy view) of a ``string`` or
    ``large_string`` array without nulls (a chunked one is combined first)."""
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    n = len(arr)
    bufs = arr.buffers()
    width = np.int64 if pa.types.is_large_string(arr.type) else np.int32
    offsets = np.frombuffer(bufs[1], width, count=n + 1, offset=arr.offset * np.dtype(width).itemsize) \
        if n else np.zeros(1, width)
    data = np.frombuffer(bufs[2] if bufs[2] is not None else b"", np.uint8)  # (read-only: one signature)
    return offsets.astype(np.int64), data


def fixed_binary_values(column: pa.Array | pa.ChunkedArray, dtype) -> np.ndarray:
    """The values of a ``fixed_size_binary`` array as rows of ``dtype`` (``(n, byte_width / itemsize)``, a
    zero-copy view; a chunked array is combined first). The rows of null values hold what the buffer holds."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    width = column.type.byte_width // np.dtype(dtype).itemsize
    values = np.frombuffer(column.buffers()[1], dtype=dtype) if len(column) else np.zeros(0, dtype)
    return values[column.offset * width:(column.offset + len(column)) * width].reshape(-1, width)


def normalize_uncovered(texts: pa.Array, offsets: np.ndarray, data: np.ndarray, table: np.ndarray, bits: int,
                        form: str):
    """Arrow's ``utf8_normalize(form)`` of just the documents of ``texts`` (buffers ``offsets``, ``data``) that hold
    a non-ASCII character with none of ``bits`` in ``table``: those a kernel cannot put in that form from its
    tables. Returns None at invalid UTF-8, else ``(picked, before, after, sub_offsets, sub_data, sub_index)``:
    the picked documents (bool per document) as they were and in normal form (None, None when none is), the
    latter's buffers, and each document's row in them (-1: not picked; an empty array when none is)."""
    need = _kernels().lacking(data, offsets, table, bits)
    if (need < 0).any():
        return None
    picked = need > 0
    if not picked.any():
        return picked, None, None, offsets, data, np.zeros(0, np.int64)
    before = texts.filter(pa.array(picked))
    after = pc.utf8_normalize(before, form)
    sub_offsets, sub_data = string_buffers(after)
    return picked, before, after, sub_offsets, sub_data, np.where(picked, np.cumsum(picked, dtype=np.int64) - 1, -1)


def words(texts: pa.Array) -> pa.ListArray | None:
    """:func:`dataclean.text.tokenize.words_batch` of a ``string`` array without nulls; None when the text
    is not valid UTF-8 (the caller then runs the regex tokenizer, which decides what such bytes are)."""
    k = _kernels()
    offsets, data = string_buffers(texts)
    total = int(offsets[-1] - offsets[0])
    out = np.empty(total, np.uint8)
    list_offsets = np.empty(len(texts) + 1, np.int32)
    for cap in (total // 3 + 16, total + 1):  # words <= bytes; a third is enough but for one-letter words
        word_offsets = np.empty(cap + 1, np.int32)
        nw = k.words(data, offsets, char_table(), out, word_offsets, list_offsets)
        if nw != -1:
            break
    if nw < 0:
        return None
    nb = int(word_offsets[nw])
    values = pa.StringArray.from_buffers(nw, pa.py_buffer(word_offsets[:nw + 1]), pa.py_buffer(out[:nb]))
    return pa.ListArray.from_arrays(pa.array(list_offsets), values)


def count_words(texts: pa.Array) -> np.ndarray | None:
    """Words per row of a ``string`` array without nulls (the length of each :func:`words` list), int64;
    None when some text is not valid UTF-8."""
    offsets, data = string_buffers(texts)
    counts = _kernels().count_words(data, offsets, char_table())
    return None if (counts < 0).any() else counts


def dup_fracs(texts: pa.Array, paragraphs: bool) -> tuple[np.ndarray, np.ndarray]:
    """``gopher._dup_fracs`` of the lines (or the paragraphs) of a ``string`` array without nulls."""
    offsets, data = string_buffers(texts)
    return _kernels().dup_fracs(data, offsets, char_table(), bool(paragraphs))


def gopher_lines(texts: pa.Array, bullets: str) -> np.ndarray:
    """Per row of a ``string`` array without nulls: non-blank lines, bullet lines, lines ending in an
    ellipsis, ``#`` characters, ellipses (int64, shape (n, 5); see ``_kernels_numba.gopher_lines``)."""
    offsets, data = string_buffers(texts)
    signs = np.array(sorted(ord(c) for c in bullets), np.int64)
    return _kernels().gopher_lines(data, offsets, char_table(), signs)


def ngram_signals(codes: np.ndarray, length: np.ndarray, offsets: np.ndarray, top_sizes, dup_sizes) -> dict | None:
    """:func:`dataclean.stages.gopher.ngram_signals` (same arguments, same result); None when the sizes are
    not the contiguous ranges 2..t (top) and t+1..m (duplicates) the kernel handles."""
    top, dup = tuple(top_sizes), tuple(dup_sizes)
    top_max = max(top, default=1)
    max_n = max(top + dup, default=1)
    if top != tuple(range(2, top_max + 1)) or dup != tuple(range(top_max + 1, max_n + 1)) or max_n < 2:
        return None
    out = _kernels().ngram_signals(np.ascontiguousarray(codes, dtype=np.int64),
                                   np.ascontiguousarray(length, dtype=np.int64),
                                   np.ascontiguousarray(offsets, dtype=np.int64), max_n, top_max)
    return {n: np.ascontiguousarray(out[:, n]) for n in top + dup}


def word_props(strings: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per string of a ``string`` array without nulls: characters (int64), holds a letter (RE2 ``\\pL``),
    is pure ASCII."""
    offsets, data = string_buffers(strings)
    return _kernels().word_props(data, offsets, char_table())


def ascii_lower_in(strings: pa.Array, values: list[str]) -> np.ndarray:
    """Per string: pure ASCII and, lower-cased, one of ``values`` (the non-ASCII ``values`` are ignored)."""
    members = [v.encode("utf-8") for v in values if v.isascii()]
    set_offsets = np.zeros(len(members) + 1, np.int64)
    np.cumsum([len(v) for v in members], out=set_offsets[1:])
    set_data = np.frombuffer(b"".join(members), np.uint8)
    offsets, data = string_buffers(strings)
    return _kernels().ascii_lower_in(data, offsets, set_data, set_offsets)


def pair_counts(values: pa.Array, group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per element of a ``string`` array without nulls and its ``group`` (an integer per element): how many
    elements have its group and its value (int64), and whether it is the first of them (bool).

    Arrow's hash dictionary-encodes the values; the kernel counts codes group by group. On the words of a
    4,096-document bench batch (569,151): 23 ms in all (11 ms of it the encoding), against 40-46 ms for the
    encoding plus a sort of the (group, code) keys, and 47 ms for a kernel hashing the bytes itself."""
    enc = pc.dictionary_encode(values)
    return code_pair_counts(enc.indices.to_numpy(zero_copy_only=False), len(enc.dictionary), group)


def code_pair_counts(codes: np.ndarray, n_codes: int, group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """:func:`pair_counts` of values already dictionary-encoded: ``codes`` (``0 <= code < n_codes``)."""
    codes = np.require(codes, np.int64, ["C", "W"])
    group = np.require(group, np.int64, ["C", "W"])
    if len(group) < 2 or bool((group[1:] >= group[:-1]).all()):
        order = np.arange(len(group), dtype=np.int64)
    else:  # (a few sorted parts one after another: the stable sort merges runs)
        order = np.argsort(group, kind="stable").astype(np.int64)
    return _kernels().pair_counts(group, codes, n_codes, order)


def count_runs(strings: pa.Array, char_class: str) -> np.ndarray | None:
    """Per string of a ``string`` array without nulls: its maximal runs of the characters of ``char_class`` (an
    RE2 class of ONE character, as for :func:`class_counts`), what RE2's ``count_substring_regex`` counts for
    ``char_class + "+"`` (int64); None when a string is not valid UTF-8. (A table per code point: with a binary
    search of the class's characters per character, the lines of bench shards 0-1 took 199 ms, against 69 ms.)"""
    offsets, data = string_buffers(strings)
    out = _kernels().count_runs(data, offsets, class_table((char_class,)))
    return None if (out < 0).any() else out


def class_counts(texts: pa.Array, patterns: tuple[str, ...]) -> np.ndarray | None:
    """Per string of a ``string`` array without nulls: its characters matched by each of ``patterns`` (RE2
    classes of ONE character, such as ``\\p{Lu}``; at most 8), in one pass (int64, n x len(patterns)): what
    ``pc.count_substring_regex`` counts for each; None when a string is not valid UTF-8."""
    table = class_table(tuple(patterns))
    offsets, data = string_buffers(texts)
    out = _kernels().class_counts(data, offsets, table, len(patterns))
    return None if len(out) and (out[:, 0] < 0).any() else out


def class_table(patterns: tuple[str, ...]) -> np.ndarray:
    """uint8 per code point: bit ``i`` set where the character matches ``patterns[i]`` (Arrow's RE2; cached per
    process and on disk, like :func:`char_table`)."""
    import hashlib

    if not 1 <= len(patterns) <= 8:
        raise ValueError("class_table: 1 to 8 patterns")
    digest = hashlib.sha1("\x00".join(patterns).encode()).hexdigest()[:16]
    return cached_table(f"classes:{digest}", f"classtable-v1-{digest}-pyarrow-{pa.__version__}.npy",
                         lambda: _class_table(patterns))


def _class_table(patterns: tuple[str, ...]) -> np.ndarray:
    cps = np.concatenate([np.arange(0, 0xD800), np.arange(0xE000, 0x110000)]).astype(np.uint32)
    chars = _code_point_strings(cps)
    bits = np.zeros(len(cps), np.uint8)
    for i, pattern in enumerate(patterns):
        bits[pc.match_substring_regex(chars, f"^(?:{pattern})$").to_numpy(zero_copy_only=False)] |= 1 << i
    table = np.zeros(0x110000, np.uint8)
    table[cps] = bits
    return table


def keyword_repeats(lines: pa.Array, separator: str, space: str, han: str,
                    max_item_chars: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Per (lower-cased) line of a ``string`` array without nulls: its non-empty keyword items and how often
    its most repeated keyword occurs (int64 each), as ``spam.keyword_items`` then ``spam.item_repeats``
    compute them, in one pass (the kernel's docstring says how). ``separator``, ``space`` and ``han`` are RE2
    classes of ONE character: the item separators, the spaces that cut next to a Han character, the Han
    characters. None when a line is not valid UTF-8."""
    table = once(_state, f"keyword:{separator}\x00{space}\x00{han}",
                 lambda: class_table((separator, space, han)) | (char_table() & SPACE) >> 2)
    offsets, data = string_buffers(lines)
    n_items, reps = _kernels().keyword_repeats(data, offsets, table, max_item_chars)
    return None if (n_items < 0).any() else (n_items, reps)


def template_norm(lines: pa.Array) -> tuple[pa.Array, np.ndarray] | None:
    """``spam.template_lines``' normalization of lower-cased, trimmed lines (a ``string`` array without nulls):
    ``pc.replace_substring_regex(pc.replace_substring_regex(lines, r"\\d+", "0"), r"[ \\t]{2,}|\\t", " ")``
    in one pass, and per line whether it has a letter (``pc.match_substring_regex(lines, r"\\pL")``); None
    when a line is not valid UTF-8."""
    offsets, data = string_buffers(lines)
    out = np.empty(max(int(offsets[-1] - offsets[0]), 1), np.uint8)
    out_offsets = np.empty(len(lines) + 1, np.int64)
    letter, ok = _kernels().template_norm(data, offsets, char_table(), out, out_offsets)
    return (_strings(out, out_offsets), letter) if ok else None


def sentence_punct(lines: pa.Array) -> np.ndarray | None:
    """Per line of a ``string`` array without nulls or newlines: ``pc.match_substring_regex(lines,
    spam._SENTENCE_PUNCT)`` (a sentence mark, or two commas around a non-space), in one pass; None when a line
    is not valid UTF-8 or holds a newline."""
    offsets, data = string_buffers(lines)
    out, ok = _kernels().sentence_punct(data, offsets)
    return out if ok else None


def collapse_punct(texts: pa.Array, char_class: str) -> pa.Array | None:
    """langid's ``pc.replace_substring_regex(pc.replace_substring(texts, "\\n", " "), char_class + "{2,}", " ")``
    of a ``string`` array without nulls (``char_class``: an RE2 class of ONE character that holds no newline), in
    one pass; None when a string is not valid UTF-8."""
    table = class_table((char_class,))
    offsets, data = string_buffers(texts)
    out = np.empty(max(int(offsets[-1] - offsets[0]), 1), np.uint8)
    out_offsets = np.empty(len(texts) + 1, np.int64)
    if not _kernels().collapse_punct(data, offsets, table, out, out_offsets):
        return None
    return _strings(out, out_offsets)


def isolate(texts: pa.Array) -> pa.Array | None:
    """``pc.replace_substring_regex(texts, tokenize.ISOLATE, " \\1 ")`` of a ``string`` array without nulls: spaces
    around each Han character and each Hiragana or Katakana run (the classes are disjoint, so the order of the
    regex's alternatives does not matter); None when a string is not valid UTF-8."""
    offsets, data = string_buffers(texts)
    size = int(offsets[-1] - offsets[0])
    out = np.empty(size * 5 // 3 + 2 * len(texts) + 1, np.uint8)  # (a Han or kana character has 3+ bytes)
    out_offsets = np.empty(len(texts) + 1, np.int64)
    if not _kernels().isolate(data, offsets, char_table(), out, out_offsets):
        return None
    return _strings(out, out_offsets)


def _strings(data: np.ndarray, offsets: np.ndarray) -> pa.Array:
    """A ``string`` array (``large_string`` past 2 GiB) over ``data`` cut at ``offsets`` (int64, n + 1)."""
    n, total = len(offsets) - 1, int(offsets[-1])
    if total < 2 ** 31:
        return pa.StringArray.from_buffers(n, pa.py_buffer(offsets.astype(np.int32)), pa.py_buffer(data[:total]))
    return pa.LargeStringArray.from_buffers(n, pa.py_buffer(offsets), pa.py_buffer(data[:total]))


def normalize(texts: pa.Array, form: str, remove_controls: bool, fix_spaces: bool, max_blank_lines: int):
    """The normalize stage's text and counts for a ``string`` array without nulls: (text, form changed (bool),
    controls removed, odd spaces and carriage returns, both int64 numpy arrays), as its regex chain computes
    them; None when some text is not valid UTF-8 (the caller runs the chain). Arrow's ``utf8_normalize`` runs
    only on the documents holding a character the form may change (:func:`norm_table`)."""
    k = _kernels()
    table = norm_table()
    offsets, data = string_buffers(texts)
    n = len(texts)
    sub_offsets, sub_data, sub_index = offsets, data, np.zeros(0, np.int64)
    changed = np.zeros(n, bool)
    if form != "none":
        done = normalize_uncovered(texts, offsets, data, table, NORM_INERT[form], form)
        if done is None:
            return None
        picked, before, after, sub_offsets, sub_data, sub_index = done
        if after is not None:
            changed[picked] = pc.not_equal(after, before).to_numpy(zero_copy_only=False)
    out = np.empty(int(offsets[-1] - offsets[0]) + (int(sub_offsets[-1] - sub_offsets[0]) if len(sub_index) else 0)
                   + 1, np.uint8)
    out_offsets = np.empty(n + 1, np.int64)
    controls = np.zeros(n, np.int64)
    spaces = np.zeros(n, np.int64)
    if k.norm_clean(data, offsets, sub_data, sub_offsets, sub_index, table, bool(remove_controls), bool(fix_spaces),
                    int(max_blank_lines) + 1, out, out_offsets, controls, spaces) != 0:
        return None
    if out_offsets[-1] >= 1 << 31:
        return None
    text = pa.StringArray.from_buffers(n, pa.py_buffer(out_offsets.astype(np.int32)),
                                       pa.py_buffer(out[:out_offsets[-1]]))
    return text, changed, controls, spaces


def byte_sums(data: np.ndarray, offsets: np.ndarray, table: np.ndarray) -> np.ndarray:
    """Per document (``offsets``, int64, n + 1, into the bytes ``data``): the sum of ``table[b]`` over its bytes
    (int64), what ``dataclean.tokens`` computes with numpy."""
    return _kernels().byte_sums(data, offsets, table)


def warm_up() -> bool:
    """Compile (first run) or load (later runs) every kernel now, with the argument types the stages use, so
    that a benchmark or a CI job does not pay the compilation inside what it measures
    (``python -c "from dataclean.text import kernels; kernels.warm_up()"``). Returns :func:`enabled`.
    The family is then marked ready (:func:`ready`): other processes load it instead of using the fallback."""
    allow_compile()
    if not enabled():
        return False
    texts = pa.array(["a b\n\nc", "中文"], pa.string())
    words(texts)
    count_words(texts)
    dup_fracs(texts, paragraphs=False)
    dup_fracs(texts, paragraphs=True)
    gopher_lines(texts, "•")
    flat = words(texts).flatten()
    word_props(flat)
    ascii_lower_in(flat, ["the", "的"])
    normalize(pa.array(["a\u0301 b\r\n", "中文"], pa.string()), "NFC", True, True, 2)
    ngram_signals(np.zeros(4, np.int32), np.ones(4, np.int64), np.array([0, 4]), (2, 3, 4), (5, 6, 7, 8, 9, 10))
    pair_counts(flat, np.zeros(len(flat), np.int64))
    count_runs(flat, "[ |]")
    class_counts(texts, (r"\p{Lu}",))
    isolate(collapse_punct(texts, r"[\pP\pS]"))
    keyword_repeats(texts, "[|]", "[ ]", f"[{HAN}]", 12)
    template_norm(texts)
    sentence_punct(flat)
    mark_ready("text")  # (byte_sums: as the token estimate calls it, by dataclean.warm)
    return True

