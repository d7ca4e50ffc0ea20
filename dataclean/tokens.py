"""Token counts per document: a calibrated estimate, or exact counts with a configured tokenizer.

**The estimate** (:func:`estimate_tokens`) is a linear formula over four per-document counts:

* ``cjk``     — CJK characters: the 3-byte UTF-8 characters U+3000–U+DFFF and U+F000–U+FFFF (CJK punctuation,
  kana, CJK extension A, the Han block, Hangul syllables, compatibility ideographs, fullwidth forms);
* ``rest``    — the UTF-8 bytes of everything else (``bytes - 3 * cjk``): Latin and other scripts, spaces, symbols;
* ``digits``  — ASCII digits ``0-9``;
* ``symbols`` — the 32 ASCII punctuation and symbol characters.

``tokens = rest / BYTES_PER_TOKEN + cjk / CJK_CHARS_PER_TOKEN + digits * TOKENS_PER_DIGIT
+ symbols * TOKENS_PER_SYMBOL``, rounded to the nearest integer; at least 1 for non-empty text, 0 for empty
text, null for null text. Source code — rows whose ``source`` is in ``CODE_SOURCES``, when the optional
``source`` array is given — uses ``CODE_BYTES_PER_TOKEN`` instead of ``BYTES_PER_TOKEN``. The digit and symbol
terms are *extra* tokens on top of the byte term: byte-level BPE vocabularies split digits (Qwen, Llama 2,
DeepSeek: one token per digit) and punctuation, markup, e-mail headers and base64 far more finely than
words. Every count is one lookup per UTF-8 byte in a 256-entry table, summed per document with numpy
(``np.add.reduceat`` over the Arrow offsets, fixed point in 1/1024 token): no regex, no Python loop.

The constants were fitted (least squares on relative error, then rounded) against the Qwen tokenizer
(151,643 byte-level BPE entries: the vocabulary of Qwen 1 to 2.5) on bench shard 0 and checked on held-out
shard 1 with ``benchmarks/calibrate_tokens.py``; its measurements and per-source errors are in
``benchmarks/results/tokens_calibration.json``. On the held-out shard the estimate's median per-document
error is 8% (p90 22%) and the total of every source is within 5% (papers, 9 documents: +10%). Measured
there: English prose 4.5–4.7 UTF-8 bytes per token, manuals 3.3–4.1, code 3.0 (Go, Rust) to 4.0 (Python),
raw e-mail 2.7; Chinese 1.2 (Wikipedia) to 1.5 characters per token. German, French and Spanish are
undercounted by 10–18%. An English-centric tokenizer spends much more on CJK text (the Claude-2-era
tokenizer: 0.85 CJK characters per token, so the estimate is 34% low on Chinese for it): when a budget must
match one model, configure its tokenizer.json and count exactly with :class:`TokenCounter`.

**Exact counts** (:class:`TokenCounter` / :func:`make_token_counter`) use a HuggingFace ``tokenizer.json``
through the optional ``tokenizers`` package (extra ``tokens``), imported only when a path is given.
"""
from __future__ import annotations

import os
from typing import Iterable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.text import kernels

BYTES_PER_TOKEN = 4.9         # UTF-8 bytes per token of Latin and other non-CJK text (prose)
CODE_BYTES_PER_TOKEN = 5.5    # the same for source code (rows whose source is in CODE_SOURCES)
CJK_CHARS_PER_TOKEN = 1.5     # CJK characters per token
TOKENS_PER_DIGIT = 1.1        # extra tokens per ASCII digit
TOKENS_PER_SYMBOL = 0.5       # extra tokens per ASCII punctuation or symbol character
CODE_SOURCES = ("code",)

DIGITS = b"0123456789"
SYMBOLS = b"!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"  # the 32 ASCII punctuation and symbol characters
# Lead bytes of the 3-byte UTF-8 sequences U+3000-U+DFFF and U+F000-U+FFFF: CJK symbols and punctuation,
# kana, bopomofo, CJK extension A, the unified Han block, Hangul syllables, CJK compatibility ideographs,
# fullwidth forms. The same ranges also hold Yi, some Cyrillic/Latin extensions, private-use characters
# U+F000-U+F8FF and variation selectors: rare in text, and a small error where they occur.
CJK_LEAD_BYTES = bytes([*range(0xE3, 0xEE), 0xEF])
CJK_PATTERN = r"[\p{Han}\p{Hiragana}\p{Katakana}\p{Hangul}]"
_SCALE = 1024  # the estimate sums per-byte weights in fixed point: 1/1024 token per unit
_CHUNK_BYTES = 4 << 20  # bytes of text per numpy pass: bounds the temporaries (10 bytes per text byte)


def count_cjk(text: pa.Array) -> pa.Array:
    """Number of Han, kana and Hangul characters per document (int64), by Unicode script."""
    return pc.cast(pc.count_substring_regex(text, CJK_PATTERN), pa.int64())


def _as_string_array(text) -> pa.Array:
    if isinstance(text, pa.ChunkedArray):
        text = text.combine_chunks()
    if not (pa.types.is_string(text.type) or pa.types.is_large_string(text.type)):
        text = pc.cast(text, pa.large_string() if pa.types.is_large_binary(text.type) else pa.string())
    return text


def _byte_sums(text: pa.Array, table: np.ndarray) -> np.ndarray:
    """Per document, the sum of ``table[b]`` over its UTF-8 bytes ``b`` (int64; 0 for empty and null)."""
    n = len(text)
    out = np.zeros(n, np.int64)
    if n == 0:
        return out
    off_type = np.int64 if pa.types.is_large_string(text.type) else np.int32
    _, off_buf, data_buf = text.buffers()
    offsets = np.frombuffer(off_buf, off_type, n + 1, text.offset * np.dtype(off_type).itemsize).astype(np.int64)
    if data_buf is None or offsets[-1] == offsets[0]:
        return out
    data = np.frombuffer(data_buf, np.uint8, offsets[-1] - offsets[0], offsets[0])
    offsets = offsets - offsets[0]
    if kernels.enabled():  # one compiled pass instead of a gather and a reduceat (same integers)
        return kernels.byte_sums(data, offsets, table)
    lengths = np.diff(offsets)
    # documents in groups of about _CHUNK_BYTES bytes (a longer document is a group of its own)
    cuts = np.unique(np.searchsorted(offsets, np.arange(0, offsets[-1], _CHUNK_BYTES), side="right") - 1)
    for a, b in zip(cuts, [*cuts[1:], n]):
        rows = np.flatnonzero(lengths[a:b]) + a
        if len(rows):
            lo, hi = offsets[a], offsets[b]
            out[rows] = np.add.reduceat(table[data[lo:hi]], offsets[rows] - lo, dtype=np.int64)
    return out


def _table(weights: dict[bytes, float], default: float = 0.0) -> np.ndarray:
    t = np.full(256, default)
    for chars, w in weights.items():
        t[list(chars)] += w
    return t


_COUNT_TABLES = {
    "bytes": np.ones(256, np.int16),
    "cjk": _table({CJK_LEAD_BYTES: 1}).astype(np.int16),
    "digits": _table({DIGITS: 1}).astype(np.int16),
    "symbols": _table({SYMBOLS: 1}).astype(np.int16),
}


def token_features(text: pa.Array) -> dict[str, np.ndarray]:
    """The per-document counts the estimate is made of (float64; 0 for null text): ``bytes``, ``cjk``
    (CJK characters, by lead byte), ``rest`` (``bytes - 3 * cjk``), ``digits`` and ``symbols`` (ASCII)."""
    text = _as_string_array(text)
    f = {k: _byte_sums(text, t).astype(np.float64) for k, t in _COUNT_TABLES.items()}
    f["rest"] = f["bytes"] - 3.0 * f["cjk"]
    return f


def _estimate_table(bytes_per_token: float) -> np.ndarray:
    """Fixed-point weight per byte value. A CJK character (lead byte + 2 continuation bytes, each charged
    1/bytes_per_token) gets 1/CJK_CHARS_PER_TOKEN in all through its lead byte's weight."""
    per_byte = 1.0 / bytes_per_token
    t = _table({DIGITS: TOKENS_PER_DIGIT, SYMBOLS: TOKENS_PER_SYMBOL}, default=per_byte)
    t[list(CJK_LEAD_BYTES)] = 1.0 / CJK_CHARS_PER_TOKEN - 2 * per_byte
    return np.round(t * _SCALE).astype(np.int16)


def _is_code(source, n: int, code_sources: Iterable[str]) -> np.ndarray | None:
    if source is None:
        return None
    if isinstance(source, pa.ChunkedArray):
        source = source.combine_chunks()
    if len(source) != n:
        raise ValueError(f"source has {len(source)} rows, text has {n}")
    if pa.types.is_dictionary(source.type):
        source = pc.cast(source, source.type.value_type)
    mask = pc.fill_null(pc.is_in(source, value_set=pa.array(list(code_sources), source.type)), False)
    mask = mask.to_numpy(zero_copy_only=False)
    return mask if mask.any() else None


def estimate_tokens(text: pa.Array, source: pa.Array | None = None,
                    code_sources: Iterable[str] = CODE_SOURCES) -> pa.Array:
    """Estimated token count per document (int64; 0 for empty text, at least 1 otherwise, null for null).

    ``source`` (optional, same length) selects the code rate for rows whose source is in ``code_sources``.
    """
    text = _as_string_array(text)
    units = _byte_sums(text, _estimate_table(BYTES_PER_TOKEN))
    code = _is_code(source, len(text), code_sources)
    if code is not None:
        rows = np.flatnonzero(code)
        units[rows] = _byte_sums(text.take(pa.array(rows)), _estimate_table(CODE_BYTES_PER_TOKEN))
    nbytes = pc.fill_null(pc.binary_length(text), 0).to_numpy(zero_copy_only=False)
    tokens = np.where(nbytes > 0, np.maximum((units + _SCALE // 2) // _SCALE, 1), 0)
    return pa.array(tokens, pa.int64(), mask=_null_mask(text))


def _null_mask(text: pa.Array) -> np.ndarray | None:
    if text.null_count == 0:
        return None
    return pc.is_null(text).to_numpy(zero_copy_only=False)


def count_chars(text: pa.Array) -> pa.Array:
    return pc.cast(pc.utf8_length(text), pa.int64())


class TokenCounter:
    """Token count per document: exact with a HuggingFace ``tokenizer.json``, else :func:`estimate_tokens`.

    ``counter(text, source=None)`` takes a string array (and optionally the ``source`` array, used only by the
    estimate) and returns an int64 array: null for null text, 0 for empty text. Exact counts encode without
    special tokens (``add_special_tokens=False``: no BOS/EOS from a post-processor), ``batch_size`` documents
    per ``encode_batch`` call.

    ``threads`` is the size of the tokenizers library's Rust (rayon) thread pool in this process: 1 (the
    default) encodes on the calling thread (it sets ``TOKENIZERS_PARALLELISM=false``), which is right when the
    pipeline already runs one worker process per core; N > 1 sets ``TOKENIZERS_PARALLELISM=true`` and, unless
    already set, ``RAYON_NUM_THREADS=N`` (honoured only if the pool has not started in this process, as in a
    fresh worker process); None leaves the library's defaults (a thread per core). Both are process-wide
    environment variables, which is how the tokenizers library is configured.

    A missing or unreadable tokenizer file raises ``ValueError`` naming the path, at construction. The
    ``tokenizers`` package (extra ``tokens``) is imported only when a path is given.
    """

    def __init__(self, tokenizer_path: str | os.PathLike | None = None, batch_size: int = 1024,
                 threads: int | None = 1, code_sources: Iterable[str] = CODE_SOURCES):
        if batch_size < 1:
            raise ValueError(f"batch_size must be >= 1, got {batch_size}")
        if threads is not None and threads < 1:
            raise ValueError(f"threads must be >= 1 or None, got {threads}")
        self.tokenizer_path = None if tokenizer_path is None else os.fspath(tokenizer_path)
        self.batch_size = int(batch_size)
        self.threads = threads
        self.code_sources = tuple(code_sources)
        self._tokenizer = None
        if self.tokenizer_path is not None:
            self._tokenizer = _load_tokenizer(self.tokenizer_path)
            _configure_threads(threads)

    @classmethod
    def from_config(cls, tokens_config: dict | None) -> "TokenCounter":
        """From the ``tokens:`` section of a config ({tokenizer, batch_size, threads}); None = the estimate."""
        cfg = dict(tokens_config or {})
        return cls(cfg.get("tokenizer"), batch_size=cfg.get("batch_size", 1024), threads=cfg.get("threads", 1))

    @property
    def exact(self) -> bool:
        return self.tokenizer_path is not None

    def __repr__(self) -> str:
        what = f"tokenizer={self.tokenizer_path!r}" if self.exact else "estimate"
        return f"TokenCounter({what}, batch_size={self.batch_size}, threads={self.threads})"

    def __call__(self, text: pa.Array, source: pa.Array | None = None) -> pa.Array:
        if not self.exact:
            return estimate_tokens(text, source, self.code_sources)
        if self._tokenizer is None:  # unpickled in another process
            self._tokenizer = _load_tokenizer(self.tokenizer_path)
            _configure_threads(self.threads)
        if isinstance(text, pa.ChunkedArray):
            text = text.combine_chunks()
        encode = getattr(self._tokenizer, "encode_batch_fast", self._tokenizer.encode_batch)  # fast: no offsets
        counts = np.zeros(len(text), np.int64)
        for start in range(0, len(text), self.batch_size):
            chunk = text.slice(start, self.batch_size).to_pylist()
            rows = [i for i, t in enumerate(chunk) if t]  # null and empty text count 0
            if rows:
                encodings = encode([chunk[i] for i in rows], add_special_tokens=False)
                counts[start + np.array(rows)] = [len(e) for e in encodings]
        return pa.array(counts, pa.int64(), mask=_null_mask(text))

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_tokenizer"] = None  # reloaded from the file on first use
        return state


def make_token_counter(tokenizer_path: str | os.PathLike | None = None, batch_size: int = 1024,
                       threads: int | None = 1, code_sources: Iterable[str] = CODE_SOURCES) -> TokenCounter:
    """A :class:`TokenCounter`: exact with ``tokenizer_path`` (a tokenizer.json), else the estimate."""
    return TokenCounter(tokenizer_path, batch_size=batch_size, threads=threads, code_sources=code_sources)


def _load_tokenizer(path: str):
    if not os.path.isfile(path):
        raise ValueError(f"tokenizer file not found: {path}")
    try:
        from tokenizers import Tokenizer
    except ImportError as e:
        raise ImportError(f"exact token counts with {path} need the 'tokenizers' package: "
                          "pip install 'dataclean[tokens]'") from e
    try:
        return Tokenizer.from_file(path)
    except Exception as e:  # the library raises its own Exception subclass for bad JSON / unknown models
        raise ValueError(f"cannot load tokenizer {path}: {e}") from e


def _configure_threads(threads: int | None) -> None:
    if threads is None:
        return
    if threads == 1:
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
    else:
        os.environ["TOKENIZERS_PARALLELISM"] = "true"
        os.environ.setdefault("RAYON_NUM_THREADS", str(threads))
