"""Script folding for matching: traditional Chinese characters to simplified, one character at a time.

Dedup and decontamination compare texts, and the simplified and traditional versions of one text are the
same text for both (``這個資料庫`` and ``这个资料库``). Folding maps each traditional character to its simplified
form; it is not a conversion a reader would accept (no phrase tables: ``軟體`` becomes ``软体``, not ``软件``),
only a key under which the two versions meet.

The table comes from OpenCC (``pip install opencc``, Apache-2.0), the converter the Chinese NLP world
uses: its ``t2s`` conversion of every CJK unified ideograph (U+3400–U+4DBF, U+4E00–U+9FFF, the
compatibility block and the supplementary-plane extensions) taken one character at a time, 5,118
characters with a different simplified form. It is built on first use (~50 ms) and cached per process.

:func:`fold_t2s` maps a whole Arrow string array with a numba kernel over its UTF-8 buffers (characters
keep or change their byte length: 1,260 traditional characters of the BMP fold to supplementary-plane
simplified ones), or with ``str.translate`` when numba is off.

Dedup (``fold_scripts`` of ``exact_dedup`` and ``minhash_dedup``) goes one step further, :func:`fold_scripts`:
character folding alone leaves Taiwanese vocabulary apart (``軟體`` → ``软体`` where the simplified text says
``软件``, ``檔案`` → ``档案`` for ``文件``), so in ``"phrases"`` mode the documents written in traditional
characters (:func:`traditional`: more traditional-only characters than simplified-only characters and kana
together) first go through OpenCC's ``tw2sp`` conversion (Taiwan phrases to mainland ones, then characters),
and every document through the character table after. ``tw2sp`` is never applied to simplified text: it reads
``程序`` and ``文件`` as Taiwanese words (``进程``, ``文档``). Which documents are traditional is decided on
the text as given (for dedup: after its normalization), so both copies of a pair are decided the same way
unless one mixes the scripts.
"""
from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.text import kernels as _text_kernels
from dataclean.text.chars import code_point_class

_RANGES = ((0x3400, 0x4DC0), (0x4E00, 0xA000), (0xF900, 0xFB00), (0x20000, 0x2A6E0), (0x2A700, 0x2EBF0),
           (0x2F800, 0x2FA20))
TABLE_SIZE = 0x30000

#: ``fold_scripts`` values (``true`` = ``"phrases"``, ``false`` = ``"off"``).
FOLD_MODES = ("phrases", "characters", "off")
DEFAULT_FOLD = "phrases"
#: The OpenCC conversion of "phrases" mode: Taiwan standard with Taiwanese phrases to simplified Chinese.
PHRASE_CONFIG = "tw2sp"

# bits of script_table()
TRAD = 1  # OpenCC's t2s changes the character (the t2s_pairs keys)
SIMP = 2  # OpenCC's s2t changes it and t2s does not: a simplified-only character
KANA = 4  # a Hiragana or Katakana letter (dataclean.text.tokenize's classes)


class FoldUnavailable(RuntimeError):
    """OpenCC is not installed."""


def _changed_chars(config: str) -> np.ndarray:
    """int64 (n, 2): every code point of the CJK ranges that OpenCC's ``config`` conversion changes, taken one
    character at a time, and its result (-1 when that is more than one character). Kept on disk next to the
    numba cache, per OpenCC version (converting the ~100,000 characters costs 0.05-0.13 s in each process)."""
    try:
        import opencc
    except ImportError as exc:  # pragma: no cover - a dependency
        raise FoldUnavailable("script folding needs OpenCC: pip install opencc") from exc
    import os
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("opencc")
    except PackageNotFoundError:  # pragma: no cover - an OpenCC built from source
        ver = None
    path = os.path.join(_text_kernels.cache_dir(), f"script-fold-v1-{config}-opencc-{ver}.npy") if ver else None
    if path is not None:
        try:
            pairs = np.load(path)
            if pairs.ndim == 2 and pairs.shape[1] == 2 and pairs.dtype == np.int64:
                return pairs
        except (OSError, ValueError):
            pass
    chars = [chr(c) for a, b in _RANGES for c in range(a, b)]
    out = opencc.OpenCC(config).convert("\n".join(chars)).split("\n")
    if len(out) != len(chars):  # pragma: no cover - OpenCC converted a newline
        raise FoldUnavailable(f"OpenCC's {config} did not convert one character per line")
    pairs = np.array([(ord(a), ord(b) if len(b) == 1 else -1) for a, b in zip(chars, out) if a != b],
                     np.int64).reshape(-1, 2)
    if path is not None:
        try:  # written whole, then renamed: a concurrent reader sees the old file or the new one
            os.makedirs(os.path.dirname(path), exist_ok=True)
            tmp = f"{path}.{os.getpid()}.tmp.npy"
            np.save(tmp, pairs)
            os.replace(tmp, path)
        except OSError:
            pass
    return pairs


@functools.lru_cache(maxsize=1)
def t2s_pairs() -> tuple[tuple[int, int], ...]:
    """(traditional code point, simplified code point) for every character OpenCC's t2s changes."""
    return tuple((int(a), int(b)) for a, b in _changed_chars("t2s").tolist() if b >= 0)


@functools.lru_cache(maxsize=1)
def t2s_table() -> np.ndarray:
    """int32 code point -> folded code point, for code points below ``TABLE_SIZE`` (others are unchanged)."""
    table = np.arange(TABLE_SIZE, dtype=np.int32)
    for a, b in t2s_pairs():
        table[a] = b
    return table


@functools.lru_cache(maxsize=1)
def _translate_map() -> dict[int, int]:
    return dict(t2s_pairs())


def fold_t2s_str(text: str) -> str:
    """One string, folded (the reference for :func:`fold_t2s`)."""
    return text.translate(_translate_map())


_state: dict = {}


def _kernel():
    """The compiled folding kernel (loaded once per process), or None: numba missing, switched off, or still
    compiling in the background (:func:`dataclean.text.kernels.ready`)."""
    if "mod" not in _state and not _text_kernels.ready("fold"):
        return None

    def load():
        from dataclean.text import _fold_numba as k
        k.fold(np.zeros(2, np.int64), np.zeros(0, np.uint8), t2s_table())
        return k
    return _text_kernels.once(_state, "mod", lambda: _text_kernels.load_compiled(
        load, "compiled script folding", "str.translate"))


def warm_up() -> bool:
    """Compile (or load) the folding kernel now and mark it ready; returns whether it is in use."""
    _text_kernels.allow_compile()
    if not _text_kernels.enabled() or _kernel() is None:
        return False
    fold_t2s(pa.array(["繁體", "中文"], pa.string()))
    _text_kernels.mark_ready("fold")
    return True


def fold_t2s(texts: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Every string of ``texts`` folded to simplified characters (nulls stay null)."""
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks else pa.array([], pa.string())
    texts = texts.cast(pa.string())
    # only strings with a character in the CJK ranges can change
    has_han = pc.match_substring_regex(texts, r"[\x{3400}-\x{9FFF}\x{F900}-\x{FAFF}\x{20000}-\x{2FA1F}]")
    if not pc.any(has_han).as_py():
        return texts
    k = _kernel() if _text_kernels.enabled() else None
    if k is not None and texts.null_count == 0:
        offsets, data = _text_kernels.string_buffers(texts)
        out_offsets, out = k.fold(offsets, data, t2s_table())
        if out_offsets[-1] >= 2 ** 31:  # (more than 2 GiB of text: 64-bit offsets)
            return pa.LargeStringArray.from_buffers(len(texts), pa.py_buffer(out_offsets), pa.py_buffer(out))
        return pa.StringArray.from_buffers(len(texts), pa.py_buffer(out_offsets.astype(np.int32)), pa.py_buffer(out))
    m = _translate_map()
    return pa.array([None if t is None else t.translate(m) for t in texts.to_pylist()], pa.string())


# -------------------------------------------------------------- dedup: phrase conversion of traditional text


def fold_mode(value, key: str = "fold_scripts") -> str:
    """The :data:`FOLD_MODES` entry ``value`` names (``True`` is ``"phrases"``, ``False`` ``"off"``); a
    ValueError of one line naming ``key`` for anything else."""
    if value is True:
        return DEFAULT_FOLD
    if value is False:
        return "off"
    if isinstance(value, str) and value in FOLD_MODES:
        return value
    raise ValueError(f"{key} must be phrases, characters or off (true = phrases, false = off), got {value!r}")


@functools.lru_cache(maxsize=1)
def s2t_changed() -> tuple[int, ...]:
    """Code points OpenCC's ``s2t`` changes, taken one character at a time."""
    return tuple(int(a) for a in _changed_chars("s2t")[:, 0].tolist())


@functools.lru_cache(maxsize=1)
def script_table() -> np.ndarray:
    """uint8 bits (:data:`TRAD`, :data:`SIMP`, :data:`KANA`) per code point below ``TABLE_SIZE``."""
    from dataclean.text.chars import HIRAGANA, KATAKANA

    bits = np.zeros(TABLE_SIZE, np.uint8)
    bits[[a for a, _ in t2s_pairs()]] |= TRAD
    simp = np.array(s2t_changed(), np.int64)
    bits[simp[(bits[simp] & TRAD) == 0]] |= SIMP
    cps = np.concatenate([np.arange(0x3000, 0x3100), np.arange(0x31F0, 0x3200), np.arange(0xFF00, 0xFFF0)])
    chars = _text_kernels._code_point_strings(cps.astype(np.uint32))
    kana = pc.and_(pc.match_substring_regex(chars, f"^[{HIRAGANA}{KATAKANA}]$"),  # (letters: not the ・ of
                   pc.match_substring_regex(chars, r"^\pL$")).to_numpy(zero_copy_only=False)  # 約翰・史密斯)
    bits[cps[kana]] |= KANA
    bits.flags.writeable = False
    return bits


@functools.lru_cache(maxsize=1)
def _count_classes() -> tuple[str, str]:
    bits = script_table()
    return code_point_class(np.flatnonzero(bits & TRAD)), code_point_class(np.flatnonzero(bits & (SIMP | KANA)))


def script_counts(texts: pa.Array) -> tuple[np.ndarray, np.ndarray]:
    """(traditional-only characters, simplified-only characters + kana) of each string (null: 0, 0), int64:
    what ``dataclean.dedup._minhash_numba.map_text`` counts while it normalizes."""
    trad_class, other_class = _count_classes()
    trad = pc.fill_null(pc.count_substring_regex(texts, trad_class), 0).to_numpy(zero_copy_only=False).astype(np.int64)
    other = np.zeros(len(texts), np.int64)
    some = np.flatnonzero(trad > 0)  # (the others cannot be traditional: no need to count)
    if len(some):
        other[some] = pc.count_substring_regex(texts.take(pa.array(some)), other_class).to_numpy(
            zero_copy_only=False)
    return trad, other


def traditional(n_trad: np.ndarray, n_other: np.ndarray) -> np.ndarray:
    """Is a document written in traditional characters: more traditional-only characters than simplified-only
    characters and kana together (kana: Japanese, whose kanji are often the traditional forms)."""
    return np.asarray(n_trad) > np.asarray(n_other)


@functools.lru_cache(maxsize=1)
def _phrase_converter():
    import opencc

    return opencc.OpenCC(PHRASE_CONFIG)


def phrase_convert(texts: pa.Array) -> pa.Array:
    """OpenCC's :data:`PHRASE_CONFIG` conversion of every string (nulls stay null), one call per string."""
    convert = _phrase_converter().convert
    return pa.array([None if t is None else convert(t) for t in texts.to_pylist()], pa.string())


def replace_rows(texts: pa.Array, rows: np.ndarray, values: pa.Array) -> pa.Array:
    """``texts`` with the strings at positions ``rows`` replaced by ``values`` (in that order)."""
    if not len(rows):
        return texts
    mask = np.zeros(len(texts), dtype=bool)
    mask[rows] = True
    order = np.argsort(rows, kind="stable")  # (replace_with_mask takes the values in row order)
    return pc.replace_with_mask(texts.cast(pa.string()), pa.array(mask),
                                values.cast(pa.string()).take(pa.array(order)))


def fold_scripts(texts: pa.Array | pa.ChunkedArray, mode: str = DEFAULT_FOLD) -> pa.Array:
    """``texts`` folded for matching (see the module docstring): ``"off"`` unchanged, ``"characters"``
    :func:`fold_t2s`, ``"phrases"`` :data:`PHRASE_CONFIG` on the :func:`traditional` documents, then
    :func:`fold_t2s`. The reference for dedup's compiled path (``dataclean.dedup.minhash``), which counts and
    folds while it normalizes and gives the same strings."""
    mode = fold_mode(mode)
    if isinstance(texts, pa.ChunkedArray):
        texts = texts.combine_chunks() if texts.num_chunks else pa.array([], pa.string())
    if mode == "off":
        return texts
    texts = texts.cast(pa.string())
    if mode == "phrases":
        rows = np.flatnonzero(traditional(*script_counts(texts)))
        if len(rows):
            texts = replace_rows(texts, rows, phrase_convert(texts.take(pa.array(rows))))
    return fold_t2s(texts)
