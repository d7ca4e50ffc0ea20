"""Megatron-LM / megatron-core compatible index files and GPT sample indices, in numpy only (no torch).

Everything here reproduces megatron-core **0.16.1** (``megatron/core/datasets/``) byte for byte and value for
value; each rule below names the file it comes from. The implementation is our own (vectorised numpy where
megatron loops in Python or C++); ``benchmarks/check_megatron.py`` compares it with the real package.

**The ``.idx`` file** (``indexed_dataset.py``, ``_IndexWriter`` / ``_IndexReader``), all little-endian:

==========  ==============================  ==========================================================
offset      field                           value
==========  ==============================  ==========================================================
0           magic, 9 bytes                  ``b"MMIDIDX\\x00\\x00"`` (``_INDEX_HEADER``)
9           version, ``<Q``                 ``1``
17          token dtype code, ``<B``        ``DType``: uint8 1, int8 2, int16 3, int32 4, int64 5,
                                            float64 6, float32 7, uint16 8
18          sequence count, ``<Q``          ``S``
26          document count, ``<Q``          ``D`` = ``len(document_indices)`` (documents + 1)
34          sequence lengths                ``S`` x int32 (tokens per sequence)
34 + 4S     sequence pointers               ``S`` x int64, byte offset of each sequence in the ``.bin``
34 + 12S    document indices                ``D`` x int64, sequence index where each document starts,
                                            then the total: ``[0, ..., S]``
34+12S+8D   sequence modes (multimodal)     ``S`` x int8, only in multimodal datasets
==========  ==============================  ==========================================================

A dataclean export holds one sequence per document, so ``document_indices`` is ``0..n`` and ``D = n + 1``.

**GPT sample indices** (``gpt_dataset.py``, ``GPTDataset._build_document_sample_shuffle_indices``, and
``helpers.cpp``, ``build_sample_idx``), for one split holding every document:

* ``document_index`` (int32): the document ids of ``num_epochs`` epochs, shuffled — the whole thing at once,
  or, when ``separate_final_epoch``, the first ``num_epochs - 1`` epochs and the final epoch separately;
* ``sample_index`` (``[num_samples + 1, 2]``, int32, int64 only for huge inputs): where sample ``k`` starts,
  as (position in ``document_index``, token offset in that document). Sample ``k`` covers tokens
  ``[k * seq_len, k * seq_len + seq_len + add_extra_token)`` of the stream of the documents in
  ``document_index`` order; consecutive samples overlap by the extra token;
* ``shuffle_index`` (uint32, int64 only for huge inputs): a permutation of the samples; training sample
  ``i`` is ``sample_index`` row ``shuffle_index[i]``.

All three shuffles draw from one ``numpy.random.RandomState(seed)`` in this order: document index (first
epochs, then the final epoch), then shuffle index (first epochs' samples, then the final epoch's).

**Cache files** (``gpt_dataset.py``): ``<md5>-<Class>-<split>-document_index.npy``, ``-sample_index.npy``,
``-shuffle_index.npy`` (and ``-description.txt``) in ``path_to_cache`` (by default
``<data prefix>/cache/GPTDataset_indices``), where ``<md5>`` hashes the dataset's JSON description.
"""
from __future__ import annotations

import glob
import os
import struct
from dataclasses import dataclass

import numpy as np

__all__ = [
    "IndexFile",
    "gpt_indices",
    "load_cached",
    "read_idx",
    "sample_spans",
    "token_dtype",
    "write_cache",
    "write_idx",
]

# indexed_dataset.py: _INDEX_HEADER = b"MMIDIDX\x00\x00"; the version that follows is struct "<Q" 1.
INDEX_HEADER = b"MMIDIDX\x00\x00"
INDEX_VERSION = 1
# 9 header + 8 version + 1 dtype code + 8 sequence count + 8 document count (indexed_dataset.py, _IndexReader).
HEADER_SIZE = 34

# indexed_dataset.py, class DType(Enum): the numpy type name -> its code in the .idx.
DTYPE_CODES = {"uint8": 1, "int8": 2, "int16": 3, "int32": 4, "int64": 5, "float64": 6, "float32": 7,
               "uint16": 8}
CODE_DTYPES = {code: np.dtype(name) for name, code in DTYPE_CODES.items()}

# gpt_dataset.py, _build_document_sample_shuffle_indices: the final epoch is shuffled apart from the others
# when it contributes fewer than int(0.80 * samples per epoch) samples.
SEPARATE_FINAL_EPOCH_THRESHOLD = 0.80

CACHE_SUFFIXES = ("document_index", "sample_index", "shuffle_index")

_INT32_MAX = int(np.iinfo(np.int32).max)
_UINT32_MAX = int(np.iinfo(np.uint32).max)
_CHUNK = 1 << 20  # elements per write / per vectorised step: bounded memory for any number of documents


# ---------------------------------------------------------------------------------------------- .idx files

def token_dtype(vocab_size: int | None) -> np.dtype:
    """The ``.bin`` token dtype megatron picks for a vocabulary of ``vocab_size`` ids.

    ``indexed_dataset.py``, ``DType.optimal_dtype(cardinality)``: ``uint16`` if ``cardinality is not None and
    cardinality < 65500``, else ``int32`` — the rule Megatron-LM's ``tools/preprocess_data.py`` uses to write a
    ``.bin``. (``gpt_dataset.py``'s ``GPTDatasetConfig.token_dtype_code`` has a different boundary, int32 only
    above 65536; it is used only with ``sequences_per_dataset``, which skips reading the ``.idx`` header, so
    for a vocabulary of 65500..65536 ids that option would misread a ``.bin`` written with this rule.)
    """
    if vocab_size is not None and int(vocab_size) < 65500:
        return np.dtype(np.uint16)
    return np.dtype(np.int32)


def _dtype_code(dtype) -> int:
    dt = np.dtype(dtype)
    if dt.byteorder == ">":
        raise ValueError(f"token dtype {dt} is big-endian; megatron reads little-endian (native) tokens")
    code = DTYPE_CODES.get(dt.type.__name__)
    if code is None:
        raise ValueError(f"token dtype {dt} has no megatron DType code; one of {sorted(DTYPE_CODES)}")
    return code


def write_idx(path: str, lengths: np.ndarray, dtype) -> None:
    """Write the ``MMIDIDX`` ``.idx`` for a ``.bin`` holding one sequence per document.

    ``lengths[i]`` is the number of tokens of document ``i`` (written as int32), ``dtype`` the token dtype of
    the ``.bin``. The bytes are exactly those megatron's ``_IndexWriter.write(lengths, None, range(n + 1))``
    writes (``indexed_dataset.py``): header, version 1, dtype code, sequence count ``n``, document count
    ``n + 1``, the lengths, the byte pointers (``pointer[i] = sum(lengths[:i]) * itemsize``, int64) and the
    document indices ``0..n`` (int64). Streams in chunks of 2**20 documents: memory stays bounded for any
    ``n``, ``lengths`` may be a memory map.
    """
    code = _dtype_code(dtype)
    itemsize = np.dtype(dtype).itemsize
    lengths = np.asarray(lengths)
    if lengths.ndim != 1:
        raise ValueError(f"{path}: lengths must be 1-D, not of shape {lengths.shape}")
    if lengths.dtype.kind not in "iu":
        raise TypeError(f"{path}: lengths must be integers, not {lengths.dtype}")
    n = len(lengths)
    with open(path, "wb") as out:
        out.write(INDEX_HEADER)
        out.write(struct.pack("<Q", INDEX_VERSION))
        out.write(struct.pack("<B", code))
        out.write(struct.pack("<Q", n))          # sequence count
        out.write(struct.pack("<Q", n + 1))      # document count: len(document_indices)
        for a in range(0, n, _CHUNK):            # the sequence lengths, int32
            chunk = lengths[a:a + _CHUNK]
            if len(chunk) and (int(chunk.min()) < 0 or int(chunk.max()) > _INT32_MAX):
                raise ValueError(f"{path}: document lengths must lie in [0, 2**31 - 1]")
            out.write(chunk.astype("<i4", copy=False).tobytes())
        pointer = 0                              # the byte offsets, int64: exclusive cumsum * itemsize
        for a in range(0, n, _CHUNK):
            nbytes = lengths[a:a + _CHUNK].astype(np.int64) * itemsize
            ends = np.cumsum(nbytes)
            starts = ends - nbytes
            starts += pointer
            pointer += int(ends[-1])
            out.write(starts.astype("<i8", copy=False).tobytes())
        for a in range(0, n + 1, _CHUNK):        # the document indices 0..n, int64
            out.write(np.arange(a, min(n + 1, a + _CHUNK), dtype="<i8").tobytes())
        out.flush()
        os.fsync(out.fileno())


@dataclass
class IndexFile:
    """An ``.idx`` file, opened by :func:`read_idx`; the arrays are read-only views of a memory map.

    ``sequence_count`` and ``document_count`` are the header's counts, as megatron's ``_IndexReader`` reads
    them: ``document_count`` is ``len(document_indices)``, i.e. the number of documents + 1.
    """

    path: str
    dtype: np.dtype
    lengths: np.ndarray            # int32, sequence_count
    pointers: np.ndarray           # int64, sequence_count (byte offsets in the .bin)
    document_indices: np.ndarray   # int64, document_count
    sequence_count: int
    document_count: int
    modes: np.ndarray | None = None  # int8 per sequence, multimodal datasets only

    @property
    def num_documents(self) -> int:
        """Documents described by the file (``document_count - 1``)."""
        return max(0, self.document_count - 1)

    @property
    def bin_size(self) -> int:
        """The size in bytes the matching ``.bin`` must have at least (end of the last sequence)."""
        if not self.sequence_count:
            return 0
        return int(self.pointers[-1]) + int(self.lengths[-1]) * self.dtype.itemsize


def read_idx(path: str) -> IndexFile:
    """Open an ``MMIDIDX`` ``.idx`` file (memory-mapped), checking it the way megatron-core would.

    Raises ``ValueError`` naming ``path`` for: a bad magic header or version (``_IndexReader`` asserts both,
    ``indexed_dataset.py``), an unknown dtype code, a file whose size does not match its counts, or document
    indices whose last entry is not the sequence count (``IndexedDataset.__init__`` asserts
    ``sequence_lengths.shape[0] == document_indices[-1]``).
    """
    size = os.path.getsize(path)
    with open(path, "rb") as fh:
        head = fh.read(HEADER_SIZE)
    if len(head) < HEADER_SIZE or head[:9] != INDEX_HEADER:
        raise ValueError(f"{path}: bad header, not a megatron MMIDIDX index file")
    (version,) = struct.unpack("<Q", head[9:17])
    if version != INDEX_VERSION:
        raise ValueError(f"{path}: bad version {version}, megatron reads version {INDEX_VERSION}")
    code = head[17]
    if code not in CODE_DTYPES:
        raise ValueError(f"{path}: unknown token dtype code {code}")
    seqs, docs = struct.unpack("<QQ", head[18:34])
    expected = HEADER_SIZE + 12 * seqs + 8 * docs
    if size not in (expected, expected + seqs):
        raise ValueError(f"{path}: {size:,} bytes, but the header's {seqs:,} sequences and {docs:,} document "
                         f"indices need {expected:,} (truncated or corrupt)")
    mm = np.memmap(path, dtype=np.uint8, mode="r")
    off = HEADER_SIZE
    lengths = np.frombuffer(mm, dtype="<i4", count=seqs, offset=off)
    off += 4 * seqs
    pointers = np.frombuffer(mm, dtype="<i8", count=seqs, offset=off)
    off += 8 * seqs
    document_indices = np.frombuffer(mm, dtype="<i8", count=docs, offset=off)
    off += 8 * docs
    modes = np.frombuffer(mm, dtype=np.int8, count=seqs, offset=off) if size > expected else None
    if docs == 0 or int(document_indices[-1]) != seqs:
        last = int(document_indices[-1]) if docs else None
        raise ValueError(f"{path}: the last document index is {last}, not the sequence count {seqs}; "
                         f"megatron's IndexedDataset refuses this file")
    return IndexFile(path=path, dtype=CODE_DTYPES[code], lengths=lengths, pointers=pointers,
                     document_indices=document_indices, sequence_count=int(seqs), document_count=int(docs),
                     modes=modes)


# ------------------------------------------------------------------------------------- GPT sample indices

def _num_epochs(tokens_per_epoch: int, num_samples: int | None, seq_len: int, extra: int) -> int:
    """``gpt_dataset.py``, ``GPTDataset._get_num_epochs``: 1 when ``num_samples`` is None, else the fewest
    epochs (at least 1) whose tokens reach ``num_samples * seq_len + add_extra_token``."""
    if num_samples is None:
        return 1
    requested = num_samples * seq_len + extra
    return max(1, -(-requested // tokens_per_epoch))


def _document_index(documents: np.ndarray, num_epochs: int, rng: np.random.RandomState,
                    separate_final_epoch: bool) -> np.ndarray:
    """``gpt_dataset.py``, ``_build_document_index``: ``num_epochs`` copies of ``documents`` as int32,
    shuffled in place by ``rng`` — in one piece, or, when ``separate_final_epoch`` (and more than one epoch),
    the first ``num_epochs - 1`` epochs (one shuffle) followed by the final epoch (a second shuffle)."""
    if not separate_final_epoch or num_epochs == 1:
        out = np.tile(documents.astype(np.int32), num_epochs)
        rng.shuffle(out)
        return out
    first = _document_index(documents, num_epochs - 1, rng, False)
    last = _document_index(documents, 1, rng, False)
    return np.concatenate((first, last))


def _sample_index(sizes: np.ndarray, document_index: np.ndarray, seq_len: int, num_epochs: int,
                  tokens_per_epoch: int, drop_last_partial: bool, extra: int) -> np.ndarray:
    """``helpers.cpp``, ``build_sample_idx`` (through ``helpers.py``), vectorised.

    The C++ loop walks the documents of ``document_index`` filling samples of ``seq_len + extra`` tokens;
    after each sample it steps back ``extra`` tokens, so sample ``k`` starts at stream position
    ``k * seq_len``. It records, for the end of each sample, the document ``j`` in which the sample's last
    token is found and ``offset = end - extra - start_of(j)``, with ``end = k * seq_len + extra`` exclusive:
    ``j`` is the document with ``start_of(j) < end <= start_of(j + 1)`` (so empty documents are never the
    recorded one, and with ``extra == 0`` a sample ending exactly at a document's end records
    ``(j, len(j))``, not ``(j + 1, 0)``). Row 0 is always ``(0, 0)``. If the documents run out (only with
    ``drop_last_partial=False``), the row is ``(last, len(last) - extra)``; ``helpers.py`` then asserts the
    result is >= 0, which fails when that last document is empty: ``ValueError`` here.

    The number of samples is ``(num_epochs * tokens_per_epoch - extra) // seq_len`` when dropping the last
    partial sample, else ``ceil(float(...) / seq_len)`` — computed in C++ ``float`` (float32), kept here.
    The dtype is int32 unless ``max(len(document_index), sizes.max())`` exceeds int32 (``helpers.py``).
    """
    total = num_epochs * tokens_per_epoch - extra
    if drop_last_partial:
        num_samples = total // seq_len
    else:
        num_samples = int(np.ceil(np.float32(total) / np.float32(seq_len)))
    sample_idx_max = max(len(document_index), int(sizes.max()))
    wide = sample_idx_max > _INT32_MAX
    out = np.empty((num_samples + 1, 2), dtype=np.int64 if wide else np.int32)
    out[0] = 0
    starts = np.zeros(len(document_index) + 1, dtype=np.int64)  # stream position where each entry starts
    np.cumsum(sizes[document_index], dtype=np.int64, out=starts[1:])
    stream_end = int(starts[-1])
    last = len(document_index) - 1
    for a in range(1, num_samples + 1, _CHUNK):
        k = np.arange(a, min(num_samples + 1, a + _CHUNK), dtype=np.int64)
        end = k * seq_len + extra
        j = np.searchsorted(starts, end, side="left") - 1
        over = end > stream_end
        j[over] = last
        offset = end - extra - starts[np.minimum(j, last)]
        offset[over] = int(sizes[document_index[last]]) - extra
        out[a:a + len(k), 0] = j
        out[a:a + len(k), 1] = offset
    # helpers.py asserts this of the int32 result; it fails when a final partial sample ends in an empty
    # document (offset len(last) - extra = -1), so megatron refuses such an input and so do we.
    if not wide and (int(out.min()) < 0 or int(out.max()) > sample_idx_max):
        raise ValueError("megatron-core refuses these inputs (helpers.py: the sample index must lie in "
                         f"[0, {sample_idx_max}]): the last partial sample ends in an empty document")
    return out


def _shuffle_index(num_samples: int, total_size: int, rng: np.random.RandomState) -> np.ndarray:
    """``gpt_dataset.py``, ``_build_shuffle_index``: ``arange(num_samples)`` shuffled, then (if
    ``total_size`` is larger) ``arange(num_samples, total_size)`` shuffled on its own; uint32 unless
    ``total_size >= 2**32 - 2``, then int64."""
    dtype = np.int64 if total_size >= _UINT32_MAX - 1 else np.uint32
    first = np.arange(0, num_samples, dtype=dtype)
    rng.shuffle(first)
    if num_samples == total_size:
        return first
    rest = np.arange(num_samples, total_size, dtype=dtype)
    rng.shuffle(rest)
    return np.concatenate((first, rest))


def gpt_indices(lengths: np.ndarray, seq_len: int, num_samples: int | None, seed: int,
                add_extra_token: bool = True, drop_last_partial: bool = True
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(document_index, sample_index, shuffle_index)`` as megatron-core 0.16.1's
    ``GPTDataset._build_document_sample_shuffle_indices`` (``gpt_dataset.py``) builds them for one split that
    exposes every document (``indices = arange(len(lengths))``), with ``random_seed=seed``,
    ``sequence_length=seq_len``, ``add_extra_token_to_sequence=add_extra_token`` and the dataset's
    ``num_samples`` (None: one epoch). ``drop_last_partial`` is megatron's ``drop_last_partial_sequence``:
    always True for the train and test splits, ``drop_last_partial_validation_sequence`` for valid.

    Steps, in megatron's order: tokens per epoch; ``num_epochs`` (``_get_num_epochs``);
    ``separate_final_epoch`` — when ``num_epochs > 1``, the final epoch is shuffled apart if it contributes
    fewer than ``int(0.80 * samples_per_epoch)`` samples; then from one ``numpy.random.RandomState(seed)``:
    the document index, the sample index (``helpers.cpp``), the shuffle index (split at the samples of the
    first ``num_epochs - 1`` epochs when ``separate_final_epoch``).
    """
    sizes = np.asarray(lengths)
    if sizes.ndim != 1 or not len(sizes):
        raise ValueError("lengths must be a non-empty 1-D array of document lengths")
    if sizes.dtype.kind not in "iu":
        raise TypeError(f"lengths must be integers, not {sizes.dtype}")
    if int(sizes.min()) < 0 or int(sizes.max()) > _INT32_MAX:
        raise ValueError("document lengths must lie in [0, 2**31 - 1] (megatron keeps them as int32)")
    sizes = sizes.astype(np.int32, copy=False)
    seq_len = int(seq_len)
    extra = 1 if add_extra_token else 0
    if seq_len <= 1:
        raise ValueError(f"seq_len must be > 1 (helpers.cpp asserts it), not {seq_len}")
    if num_samples is not None:
        num_samples = int(num_samples)
        if num_samples < 0:
            raise ValueError(f"num_samples must be >= 0, not {num_samples}")
    documents = np.arange(len(sizes), dtype=np.int32)  # blended_megatron_dataset_builder.py: int32 arange
    tokens_per_epoch = int(np.sum(sizes[documents], dtype=np.int64))
    if tokens_per_epoch <= 1:
        raise ValueError(f"the documents hold {tokens_per_epoch} tokens; megatron needs more than 1")
    num_epochs = _num_epochs(tokens_per_epoch, num_samples, seq_len, extra)

    separate_final_epoch = False
    num_samples_sans_final_epoch = 0
    if num_epochs > 1:
        num_samples_sans_final_epoch = ((num_epochs - 1) * tokens_per_epoch - extra) // seq_len
        num_samples_from_final_epoch = num_samples - num_samples_sans_final_epoch
        num_samples_per_epoch = (tokens_per_epoch - extra) // seq_len
        # gpt_dataset.py asserts 0 <= from_final_epoch <= per_epoch + 1; it holds by construction.
        if not 0 <= num_samples_from_final_epoch <= num_samples_per_epoch + 1:
            raise ValueError(f"final epoch would contribute {num_samples_from_final_epoch} samples, outside "
                             f"[0, {num_samples_per_epoch + 1}]")
        separate_final_epoch = num_samples_from_final_epoch < int(
            SEPARATE_FINAL_EPOCH_THRESHOLD * num_samples_per_epoch)

    rng = np.random.RandomState(seed)
    document_index = _document_index(documents, num_epochs, rng, separate_final_epoch)
    sample_index = _sample_index(sizes, document_index, seq_len, num_epochs, tokens_per_epoch,
                                 drop_last_partial, extra)
    total = sample_index.shape[0] - 1
    if separate_final_epoch:
        shuffle_index = _shuffle_index(num_samples_sans_final_epoch, total, rng)
    else:
        shuffle_index = _shuffle_index(total, total, rng)
    return document_index, sample_index, shuffle_index


def sample_spans(document_index: np.ndarray, sample_index: np.ndarray, shuffle_index: np.ndarray, i: int,
                 add_extra_token: bool = True, *, lengths: np.ndarray) -> list[tuple[int, int, int]]:
    """Training sample ``i`` as ``(document id, first token, end token exclusive)`` spans, in order.

    ``lengths`` are the tokens per document (``IndexFile.lengths``). It is required: megatron reads a
    document "to its end" (``IndexedDataset.get(..., length=None)``) for every document but the sample's
    last, and the three index arrays do not hold those ends.

    Mirrors ``gpt_dataset.py``, ``GPTDataset._query_document_sample_shuffle_indices``: row
    ``r = shuffle_index[i]``; ``(b, b_off) = sample_index[r]``, ``(e, e_off) = sample_index[r + 1]``; if
    ``b == e``, one span: document ``document_index[b]``, ``[b_off, e_off + extra)``; otherwise the rest of
    document ``document_index[b]`` from ``b_off``, each document in between in full, and ``[0, e_off + extra)``
    of document ``document_index[e]``. Like megatron's ``document_ids``, the list can hold empty spans (an
    empty document in between, or, with ``add_extra_token=False``, a sample that starts exactly at the end of
    a document). The spans hold ``seq_len + add_extra_token`` tokens, except a final partial sample (only with
    ``drop_last_partial=False``), which megatron pads to that length with the pad id (``__getitem__`` then
    sets the padding to 0 in ``tokens`` and ``labels`` and masks it out of the loss).
    """
    n = len(shuffle_index)
    if not -n <= i < n:
        raise IndexError(f"sample {i} is out of range: the index has {n} samples")
    extra = 1 if add_extra_token else 0
    row = int(shuffle_index[i])
    b, b_off = (int(x) for x in sample_index[row])
    e, e_off = (int(x) for x in sample_index[row + 1])
    if b == e:
        return [(int(document_index[b]), b_off, e_off + extra)]
    docs = [int(d) for d in document_index[b:e + 1]]
    spans = [(docs[0], b_off, int(lengths[docs[0]]))]
    spans += [(d, 0, int(lengths[d])) for d in docs[1:-1]]
    spans.append((docs[-1], 0, e_off + extra))
    return spans


# ---------------------------------------------------------------------------------------------- cache files

def _cache_paths(cache_dir: str, prefix: str) -> list[str]:
    return [os.path.join(cache_dir, f"{prefix}-{suffix}.npy") for suffix in CACHE_SUFFIXES]


def _cache_sets(cache_dir: str) -> tuple[list[str], list[str]]:
    """(complete, incomplete) prefixes of the index sets in ``cache_dir``."""
    prefixes = set()
    for suffix in CACHE_SUFFIXES:
        tail = f"-{suffix}.npy"
        for path in glob.glob(os.path.join(glob.escape(cache_dir), "*" + tail)):
            prefixes.add(os.path.basename(path)[: -len(tail)])
    complete = sorted(p for p in prefixes if all(map(os.path.isfile, _cache_paths(cache_dir, p))))
    return complete, sorted(prefixes - set(complete))


def load_cached(cache_dir: str, prefix: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(document_index, sample_index, shuffle_index)`` from megatron's cache files in ``cache_dir``
    (memory-mapped, as ``gpt_dataset.py`` loads them).

    The files are ``<prefix>-document_index.npy``, ``<prefix>-sample_index.npy`` and
    ``<prefix>-shuffle_index.npy`` with ``prefix = "<md5>-<Class>-<split>"`` (``gpt_dataset.py``,
    e.g. ``0f3c...-GPTDataset-train``). ``prefix`` may be a full prefix or the start of exactly one (the md5
    alone, say). Without ``prefix`` the folder must hold exactly one complete set. Raises ``ValueError``
    when the choice is ambiguous (listing the sets) and ``FileNotFoundError`` when nothing matches.
    """
    if not os.path.isdir(cache_dir):
        raise FileNotFoundError(f"{cache_dir}: no such folder")
    complete, incomplete = _cache_sets(cache_dir)
    note = f" (incomplete sets, ignored: {', '.join(incomplete)})" if incomplete else ""
    if prefix is None:
        if not complete:
            raise FileNotFoundError(f"{cache_dir}: no megatron index cache (*-document_index.npy, "
                                    f"*-sample_index.npy, *-shuffle_index.npy){note}")
        if len(complete) > 1:
            raise ValueError(f"{cache_dir}: {len(complete)} megatron index sets; choose one with a prefix: "
                             f"{', '.join(complete)}")
        chosen = complete[0]
    elif prefix in complete:
        chosen = prefix
    else:
        matches = [p for p in complete if p.startswith(prefix)]
        if not matches:
            raise FileNotFoundError(f"{cache_dir}: no complete megatron index set with prefix {prefix!r}; "
                                    f"sets: {', '.join(complete) or 'none'}{note}")
        if len(matches) > 1:
            raise ValueError(f"{cache_dir}: prefix {prefix!r} matches {len(matches)} megatron index sets: "
                             f"{', '.join(matches)}")
        chosen = matches[0]
    doc, sample, shuffle = (np.load(p, mmap_mode="r", allow_pickle=False) for p in _cache_paths(cache_dir, chosen))
    if sample.ndim != 2 or sample.shape[1] != 2 or len(shuffle) > len(sample) - 1 or doc.ndim != 1:
        raise ValueError(f"{cache_dir}: {chosen}: the arrays do not have megatron's shapes "
                         f"(document {doc.shape}, sample {sample.shape}, shuffle {shuffle.shape})")
    return doc, sample, shuffle


def write_cache(cache_dir: str, prefix: str, document_index: np.ndarray, sample_index: np.ndarray,
                shuffle_index: np.ndarray) -> None:
    """Save the three arrays under megatron's cache names (``<prefix>-document_index.npy`` etc.,
    ``gpt_dataset.py``), creating ``cache_dir``. Megatron itself also writes ``<prefix>-description.txt``
    and only treats the set as a cache hit when that file exists too; this writes the arrays only."""
    os.makedirs(cache_dir, exist_ok=True)
    for path, array in zip(_cache_paths(cache_dir, prefix), (document_index, sample_index, shuffle_index)):
        np.save(path, np.asarray(array), allow_pickle=False)
