"""Check dataclean/export/megatron.py against the real megatron-core 0.16.1 (not run in CI).

Needs torch and megatron-core in the interpreter that runs it, e.g.::

    python3 -m venv /tmp/mcvenv
    /tmp/mcvenv/bin/pip install torch==2.13.0 megatron-core==0.16.1 numpy
    /tmp/mcvenv/bin/python benchmarks/check_megatron.py            # ~10-30 s on a CPU
    /tmp/mcvenv/bin/python benchmarks/check_megatron.py --docs 20000 --max-items 5000
    /tmp/mcvenv/bin/python benchmarks/check_megatron.py --print-golden   # arrays used by the unit test

It imports dataclean from this checkout (only numpy is needed for dataclean.export.megatron) and, in a
temporary folder:

1. ``token_dtype`` against ``DType.optimal_dtype`` around the 65,500 boundary; our sample index builder
   against the compiled ``helpers_cpp.build_sample_idx`` on random inputs and on float32-rounding cases;
2. writes random documents as ``.bin`` + ``.idx`` with our ``write_idx``, and the same documents with
   megatron's ``IndexedDatasetBuilder``: the ``.idx`` (and ``.bin``) bytes must be identical; opens ours with
   megatron's ``IndexedDataset`` and compares lengths, pointers, document indices and every document's
   tokens (``[i]`` and ``get(i, offset, length)``), and our ``read_idx`` with megatron's ``_IndexReader``;
3. for several configurations (one epoch; several epochs with and without ``separate_final_epoch``; no
   extra token; the valid split with ``drop_last_partial_validation_sequence=False``; a hand-made lengths
   array whose arrays are pinned in tests/test_megatron_index.py) builds megatron's ``GPTDataset`` on the CPU
   through ``BlendedMegatronDatasetBuilder`` (split ``100,0,0``) or directly (valid split), with a
   ``path_to_cache`` folder, and compares the three cached ``.npy`` files (dtype, shape, values) with our
   ``gpt_indices``, our ``load_cached`` with them, and ``__getitem__`` (tokens, labels) and the document ids of
   ``_query_document_sample_shuffle_indices`` with what our ``sample_spans`` gives over the ``.bin``.

Prints one line per check and a PASS/FAIL summary; exit status 0 only if everything passed.
"""
from __future__ import annotations

import argparse
import glob
import os
import shutil
import sys
import tempfile
import time
import warnings
from collections import OrderedDict

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)

from dataclean.export import megatron as ours  # noqa: E402

# The hand-made case pinned in tests/test_megatron_index.py (GOLDEN_*): 9 documents, 44 tokens, an empty
# document, seq_len 5, 20 samples requested -> 3 epochs with a separately shuffled final epoch.
GOLDEN_LENGTHS = [7, 3, 11, 1, 6, 9, 2, 0, 5]
GOLDEN = dict(seq_len=5, num_samples=20, seed=1234)


class StubTokenizer:
    """The least megatron's GPTDataset needs of a tokenizer: vocab_size, eod, unique_identifiers (no pad:
    MegatronDataset then pads with -1, _PAD_TOKEN_ID in megatron_dataset.py)."""

    def __init__(self, vocab_size: int, eod: int):
        self.vocab_size = vocab_size
        self.eod = eod

    @property
    def unique_identifiers(self) -> OrderedDict:
        return OrderedDict({"class": "StubTokenizer", "vocab_size": self.vocab_size})


class Report:
    def __init__(self):
        self.results: list[tuple[bool, str]] = []

    def check(self, ok: bool, what: str, detail: str = "") -> bool:
        self.results.append((bool(ok), what))
        print(f"  [{'ok' if ok else 'FAIL'}] {what}" + (f"  -- {detail}" if detail and not ok else ""))
        return bool(ok)

    def same_array(self, what: str, theirs, mine) -> bool:
        theirs, mine = np.asarray(theirs), np.asarray(mine)
        if theirs.dtype != mine.dtype or theirs.shape != mine.shape:
            return self.check(False, what, f"megatron {theirs.dtype}{theirs.shape} vs ours {mine.dtype}{mine.shape}")
        bad = np.flatnonzero((theirs != mine).reshape(-1))
        return self.check(not len(bad), f"{what} ({theirs.dtype}, shape {theirs.shape})",
                          f"{len(bad)} differ, first at flat {bad[:5].tolist()}" if len(bad) else "")


def make_docs(rng: np.random.Generator, n: int, vocab: int, max_len: int, empty_every: int) -> list[np.ndarray]:
    lengths = rng.integers(1, max_len, n)
    if empty_every:
        lengths[empty_every // 2::empty_every] = 0
    return [rng.integers(0, vocab, int(k)) for k in lengths]


def write_ours(prefix: str, docs: list[np.ndarray], dtype: np.dtype) -> None:
    with open(prefix + ".bin", "wb") as fh:
        for d in docs:
            fh.write(np.asarray(d, dtype=dtype).tobytes())
    ours.write_idx(prefix + ".idx", np.array([len(d) for d in docs], dtype=np.int64), dtype)


def check_dtype_rule(rep: Report) -> None:
    from megatron.core.datasets.indexed_dataset import DType
    print("token_dtype vs DType.optimal_dtype")
    for v in (None, 1, 32000, 65499, 65500, 65535, 65536, 65537, 151643, 2 ** 31):
        theirs = np.dtype(DType.optimal_dtype(v))
        rep.check(ours.token_dtype(v) == theirs, f"vocab {v}: {theirs}", f"ours {ours.token_dtype(v)}")


def check_index(rep: Report, tmp: str, name: str, docs: list[np.ndarray], vocab: int) -> str:
    import torch
    from megatron.core.datasets.indexed_dataset import IndexedDataset, IndexedDatasetBuilder, _IndexReader
    dtype = ours.token_dtype(vocab)
    print(f"index files: {name} ({len(docs)} documents, {sum(map(len, docs))} tokens, {dtype})")
    prefix = os.path.join(tmp, name)
    write_ours(prefix, docs, dtype)
    ref = os.path.join(tmp, name + "-megatron")
    builder = IndexedDatasetBuilder(ref + ".bin", dtype=dtype.type)
    for d in docs:
        builder.add_item(torch.from_numpy(np.asarray(d, dtype=np.int64)))
        builder.end_document()
    builder.finalize(ref + ".idx")
    for ext in (".idx", ".bin"):
        a, b = open(prefix + ext, "rb").read(), open(ref + ext, "rb").read()
        rep.check(a == b, f"{ext} bytes identical to IndexedDatasetBuilder's ({len(a)} bytes)",
                  f"ours {len(a)} bytes, megatron {len(b)}")
    ds = IndexedDataset(prefix)
    idx = ours.read_idx(prefix + ".idx")
    reader = _IndexReader(prefix + ".idx", multimodal=False)
    rep.check(np.dtype(reader.dtype) == idx.dtype, f"dtype code read back: {idx.dtype}")
    rep.check(reader.sequence_count == idx.sequence_count and reader.document_count == idx.document_count,
              f"counts: {idx.sequence_count} sequences, {idx.document_count} document indices")
    rep.same_array("sequence_lengths", ds.sequence_lengths, idx.lengths)
    rep.same_array("sequence_pointers", reader.sequence_pointers, idx.pointers)
    rep.same_array("document_indices", ds.document_indices, idx.document_indices)
    rng = np.random.default_rng(7)
    bad = 0
    for i, d in enumerate(docs):
        if not np.array_equal(ds[i], d.astype(dtype)):
            bad += 1
        if len(d):
            off = int(rng.integers(0, len(d)))
            ln = int(rng.integers(0, len(d) - off + 1))
            if not np.array_equal(ds.get(i, offset=off, length=ln), d[off:off + ln].astype(dtype)):
                bad += 1
    rep.check(bad == 0, f"IndexedDataset[i] and .get(i, offset, length) give our tokens ({len(docs)} documents)",
              f"{bad} mismatches")
    return prefix


def build_megatron(prefix: str, cache: str, vocab: int, seq_len: int, num_samples: int | None, seed: int,
                   extra: bool, valid_split: bool, drop_last_valid: bool):
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.indexed_dataset import IndexedDataset
    from megatron.core.datasets.utils import Split
    config = GPTDatasetConfig(
        random_seed=seed, sequence_length=seq_len, blend=([prefix], None), split="100,0,0",
        path_to_cache=cache, tokenizer=StubTokenizer(vocab, eod=0), reset_position_ids=False,
        reset_attention_mask=False, eod_mask_loss=False, create_attention_mask=False,
        add_extra_token_to_sequence=extra, drop_last_partial_validation_sequence=drop_last_valid)
    if valid_split:
        low = IndexedDataset(prefix)
        indices = np.arange(len(low.sequence_lengths), dtype=np.int32)
        return GPTDataset(low, prefix, indices, num_samples, Split.valid, config)
    train, valid, test = BlendedMegatronDatasetBuilder(GPTDataset, [num_samples, None, None], lambda: True,
                                                       config).build()
    assert valid is None and test is None
    return train


def check_gpt(rep: Report, tmp: str, prefix: str, docs: list[np.ndarray], vocab: int, label: str, *,
              seq_len: int, num_samples: int | None, seed: int, extra: bool = True, valid_split: bool = False,
              drop_last_valid: bool = True, max_items: int = 2000, golden: bool = False) -> None:
    print(f"GPTDataset: {label} (seq_len {seq_len}, num_samples {num_samples}, seed {seed}, "
          f"add_extra_token {extra}, split {'valid' if valid_split else 'train'}"
          + ("" if drop_last_valid or not valid_split else ", drop_last_partial False") + ")")
    cache = os.path.join(tmp, "cache-" + label.replace(" ", "_"))
    drop_last = drop_last_valid if valid_split else True
    lengths = np.array([len(d) for d in docs], dtype=np.int64)
    t0 = time.perf_counter()
    try:
        ds = build_megatron(prefix, cache, vocab, seq_len, num_samples, seed, extra, valid_split, drop_last_valid)
        refused = None
    except AssertionError as err:
        ds, refused = None, err
    t_meg = time.perf_counter() - t0
    t0 = time.perf_counter()
    try:
        mine = ours.gpt_indices(lengths, seq_len, num_samples, seed, add_extra_token=extra,
                                drop_last_partial=drop_last)
        our_err = None
    except ValueError as err:
        mine, our_err = None, err
    t_ours = time.perf_counter() - t0
    if refused is not None or our_err is not None:
        rep.check(refused is not None and our_err is not None, "both refuse the input",
                  f"megatron: {refused!r}; ours: {our_err!r}")
        return
    files = {s: glob.glob(os.path.join(cache, f"*-{s}.npy")) for s in ours.CACHE_SUFFIXES}
    if not rep.check(all(len(f) == 1 for f in files.values()), f"megatron wrote one set of cache files "
                     f"in {t_meg:.2f} s (ours {t_ours:.2f} s)", str(files)):
        return
    cached = [np.load(files[s][0]) for s in ours.CACHE_SUFFIXES]
    for name, theirs, m in zip(ours.CACHE_SUFFIXES, cached, mine):
        rep.same_array(f"{os.path.basename(files[name][0]).split('-', 1)[1]}", theirs, m)
    for name, attr, m in zip(ours.CACHE_SUFFIXES, ("document_index", "sample_index", "shuffle_index"), mine):
        rep.same_array(f"GPTDataset.{attr} in memory", getattr(ds, attr), m)
    loaded = ours.load_cached(cache)
    rep.check(all(np.array_equal(a, b) and a.dtype == b.dtype for a, b in zip(loaded, cached)),
              "load_cached(cache folder) returns the cached arrays")
    if golden:
        print("    golden document_index:", mine[0].tolist())
        print("    golden sample_index:", mine[1].tolist())
        print("    golden shuffle_index:", mine[2].tolist())
    n = len(ds)
    items = range(n) if n <= max_items else np.random.default_rng(0).choice(n, max_items, replace=False)
    pad = ds._pad_token_id
    bad_tokens = bad_docs = bad_len = 0
    for i in items:
        i = int(i)
        spans = ours.sample_spans(*mine, i, add_extra_token=extra, lengths=lengths)
        text = np.concatenate([docs[d][a:b] for d, a, b in spans] + [np.zeros(0, np.int64)]).astype(np.int64)
        if len(text) > seq_len + extra or (drop_last and len(text) != seq_len + extra):
            bad_len += 1
        text = np.concatenate([text, np.full(seq_len + extra - len(text), pad, np.int64)])
        if extra:
            tokens, labels = text[:-1].copy(), text[1:].copy()
        else:
            tokens, labels = text.copy(), np.roll(text, -1)
            labels[-1] = pad
        tokens[tokens == pad] = 0
        labels[labels == pad] = 0
        item = ds[i]
        if not (np.array_equal(item["tokens"].numpy(), tokens) and np.array_equal(item["labels"].numpy(), labels)):
            bad_tokens += 1
        _, doc_ids = ds._query_document_sample_shuffle_indices(i)
        if doc_ids.tolist() != [d for d, _, _ in spans]:
            bad_docs += 1
    k = len(items)
    held = f"seq_len + {int(extra)}" if drop_last else f"<= seq_len + {int(extra)} (the last one padded)"
    rep.check(bad_len == 0, f"sample_spans hold {held} tokens ({k} of {n} samples)", f"{bad_len} bad")
    rep.check(bad_tokens == 0, f"__getitem__ tokens and labels == our spans over the .bin ({k} samples)",
              f"{bad_tokens} differ")
    rep.check(bad_docs == 0, f"document ids == our spans' documents ({k} samples)", f"{bad_docs} differ")


def check_sample_index_fuzz(rep: Report, trials: int) -> None:
    """Our vectorised build_sample_idx against the compiled helpers_cpp on random small inputs (empty
    documents, both extra-token settings, partial last samples), plus the float32 rounding of
    ceil(float(tokens - extra) / seq_len) that helpers.cpp does when keeping the last partial sample."""
    from megatron.core.datasets import helpers
    print(f"build_sample_idx: {trials} random inputs vs helpers_cpp")
    rng = np.random.default_rng(0)
    same = refused_both = 0
    bad = []
    for _ in range(trials):
        n = int(rng.integers(1, 30))
        sizes = rng.integers(0, 25, n).astype(np.int32)
        if rng.random() < 0.3:
            sizes[rng.integers(0, n)] = 0
        tokens = int(sizes.sum())
        if tokens <= 1:
            continue
        seq_len, extra, drop = int(rng.integers(2, 12)), int(rng.integers(0, 2)), bool(rng.integers(0, 2))
        epochs = int(rng.integers(1, 4))
        doc_index = np.tile(np.arange(n, dtype=np.int32), epochs)
        rng.shuffle(doc_index)
        args = (sizes, doc_index, seq_len, epochs, tokens, drop)
        try:
            theirs = helpers.build_sample_idx(*args, bool(extra))
        except AssertionError:
            theirs = None
        try:
            mine = ours._sample_index(*args, extra)
        except ValueError:
            mine = None
        if theirs is None and mine is None:
            refused_both += 1
        elif theirs is not None and mine is not None and theirs.dtype == mine.dtype and np.array_equal(theirs, mine):
            same += 1
        else:
            bad.append((sizes.tolist(), doc_index.tolist(), seq_len, epochs, drop, extra))
    rep.check(not bad, f"identical on {same} inputs, both refuse {refused_both} (partial last sample ending "
              "in an empty document)", f"{len(bad)} differ, first {bad[:1]}")
    for sizes, seq_len in (([16777218], 2), ([16777216, 3], 7), ([9000000, 7777219], 3)):
        sizes = np.array(sizes, np.int32)
        d = np.arange(len(sizes), dtype=np.int32)
        theirs = helpers.build_sample_idx(sizes, d, seq_len, 1, int(sizes.sum()), False, True)
        mine = ours._sample_index(sizes, d, seq_len, 1, int(sizes.sum()), False, 1)
        rep.same_array(f"float32 sample count: {int(sizes.sum())} tokens, seq_len {seq_len}", theirs, mine)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--docs", type=int, default=3000, help="documents per random dataset (3000)")
    ap.add_argument("--max-items", type=int, default=3000, help="samples read through __getitem__ per config")
    ap.add_argument("--fuzz", type=int, default=2000, help="random build_sample_idx inputs (2000)")
    ap.add_argument("--print-golden", action="store_true", help="print the hand-made case's arrays")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args()
    warnings.filterwarnings("ignore")
    try:
        import megatron.core  # noqa: F401  (is it installed?)
        import torch
    except ImportError as err:
        print(f"FAIL: needs torch and megatron-core in this interpreter ({err})")
        return 2
    from importlib.metadata import version
    print(f"megatron-core {version('megatron-core')}, torch {torch.__version__}, numpy {np.__version__}, "
          f"python {sys.version.split()[0]}")
    rep = Report()
    tmp = tempfile.mkdtemp(prefix="check_megatron-")
    try:
        check_dtype_rule(rep)
        check_sample_index_fuzz(rep, args.fuzz)
        rng = np.random.default_rng(2024)
        # uint16 tokens, empty documents in between; int32 tokens, no empty documents
        small_vocab, wide_vocab = 50_000, 151_643
        mixed = make_docs(rng, args.docs, small_vocab, 300, empty_every=97)
        wide = make_docs(rng, max(50, args.docs // 3), wide_vocab, 200, empty_every=0)
        p_mixed = check_index(rep, tmp, "mixed", mixed, small_vocab)
        p_wide = check_index(rep, tmp, "wide", wide, wide_vocab)
        golden = [rng.integers(0, small_vocab, k) for k in GOLDEN_LENGTHS]
        p_golden = check_index(rep, tmp, "golden", golden, small_vocab)
        tokens_mixed = sum(map(len, mixed))
        tokens_wide = sum(map(len, wide))
        per_epoch = (tokens_mixed - 1) // 64
        runs = [
            (p_golden, golden, small_vocab, "hand-made (pinned in the unit test)", dict(**GOLDEN, golden=True)),
            (p_golden, golden, small_vocab, "hand-made one epoch", dict(seq_len=4, num_samples=None, seed=7)),
            (p_mixed, mixed, small_vocab, "one epoch", dict(seq_len=64, num_samples=None, seed=1234)),
            (p_mixed, mixed, small_vocab, "2.3 epochs separate final",
             dict(seq_len=64, num_samples=int(per_epoch * 2.3), seed=99)),
            (p_mixed, mixed, small_vocab, "2.9 epochs one shuffle",
             dict(seq_len=64, num_samples=int(per_epoch * 2.9), seed=5)),
            (p_mixed, mixed, small_vocab, "no extra token",
             dict(seq_len=50, num_samples=int(per_epoch * 1.5), seed=3, extra=False)),
            (p_wide, wide, wide_vocab, "int32 tokens 4 epochs",
             dict(seq_len=128, num_samples=4 * (tokens_wide // 128) - 7, seed=11)),
            (p_wide, wide, wide_vocab, "valid keep partial",
             dict(seq_len=100, num_samples=None, seed=13, valid_split=True, drop_last_valid=False)),
            (p_wide, wide, wide_vocab, "valid keep partial no extra",
             dict(seq_len=100, num_samples=None, seed=17, extra=False, valid_split=True, drop_last_valid=False)),
            (p_mixed, mixed, small_vocab, "valid drop partial",
             dict(seq_len=77, num_samples=None, seed=19, valid_split=True, drop_last_valid=True)),
        ]
        for prefix, docs, vocab, label, kw in runs:
            kw.setdefault("max_items", args.max_items)
            if not args.print_golden:
                kw.pop("golden", None)
            try:
                check_gpt(rep, tmp, prefix, docs, vocab, label, **kw)
            except Exception as err:  # a crash in one configuration is a failure, not the end of the report
                rep.check(False, f"{label}: crashed", f"{type(err).__name__}: {err}")
    finally:
        if args.keep:
            print(f"kept {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    failed = [w for ok, w in rep.results if not ok]
    print()
    if failed:
        print(f"FAIL: {len(failed)} of {len(rep.results)} checks failed:")
        for w in failed:
            print(f"  - {w}")
        return 1
    print(f"PASS: all {len(rep.results)} checks passed (dataclean.export.megatron == megatron-core "
          f"{version('megatron-core')})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
