"""dataclean.export.megatron: the MMIDIDX .idx layout and megatron-core 0.16.1's GPT sample indices.

Expected values are derived by hand from megatron-core's source (indexed_dataset.py, gpt_dataset.py,
helpers.cpp), the derivation in a comment next to each; GOLDEN_* were produced by megatron-core 0.16.1 itself
(benchmarks/check_megatron.py --print-golden, which re-checks them against the real package).
"""
from __future__ import annotations

import struct

import numpy as np
import pytest

from dataclean.export import megatron as mg


def _header(code: int, seqs: int, docs: int) -> bytes:
    # indexed_dataset.py, _IndexWriter: _INDEX_HEADER, struct "<Q" 1, "<B" dtype code, "<Q" counts
    return b"MMIDIDX\x00\x00" + struct.pack("<Q", 1) + bytes([code]) + struct.pack("<QQ", seqs, docs)


# ------------------------------------------------------------------------------------------------- .idx

@pytest.mark.parametrize("dtype, code, pointers", [(np.uint16, 8, [0, 6, 6]), (np.int32, 4, [0, 12, 12])])
def test_write_idx_exact_bytes_and_round_trip(tmp_path, dtype, code, pointers):
    path = str(tmp_path / "x.idx")
    mg.write_idx(path, np.array([3, 0, 5]), dtype)
    # 3 sequences, document count 4 (document_indices = [0, 1, 2, 3]); pointers = exclusive cumsum * itemsize
    expected = (_header(code, 3, 4) + np.array([3, 0, 5], "<i4").tobytes() + np.array(pointers, "<i8").tobytes()
                + np.arange(4, dtype="<i8").tobytes())
    data = open(path, "rb").read()
    assert data[:34] == _header(code, 3, 4)
    assert data == expected and len(data) == 34 + 3 * 4 + 3 * 8 + 4 * 8
    idx = mg.read_idx(path)
    assert idx.dtype == np.dtype(dtype)
    assert (idx.sequence_count, idx.document_count, idx.num_documents) == (3, 4, 3)
    assert idx.lengths.dtype == np.int32 and idx.lengths.tolist() == [3, 0, 5]
    assert idx.pointers.dtype == np.int64 and idx.pointers.tolist() == pointers
    assert idx.document_indices.dtype == np.int64 and idx.document_indices.tolist() == [0, 1, 2, 3]
    assert idx.modes is None
    assert idx.bin_size == 8 * np.dtype(dtype).itemsize
    assert isinstance(idx.lengths.base, np.memmap) or isinstance(idx.lengths.base.base, np.memmap)


def test_write_idx_empty_and_chunked(tmp_path, monkeypatch):
    path = str(tmp_path / "empty.idx")
    mg.write_idx(path, np.zeros(0, np.int32), np.uint16)
    assert open(path, "rb").read() == _header(8, 0, 1) + np.zeros(1, "<i8").tobytes()
    assert mg.read_idx(path).lengths.tolist() == []
    # chunk boundaries (2**20 documents in production) must not change a byte
    lengths = np.random.default_rng(1).integers(0, 1000, 23)
    mg.write_idx(str(tmp_path / "one.idx"), lengths, np.int32)
    monkeypatch.setattr(mg, "_CHUNK", 4)
    mg.write_idx(str(tmp_path / "chunked.idx"), lengths, np.int32)
    assert open(tmp_path / "one.idx", "rb").read() == open(tmp_path / "chunked.idx", "rb").read()
    idx = mg.read_idx(str(tmp_path / "chunked.idx"))
    assert idx.pointers.tolist() == (np.concatenate([[0], np.cumsum(lengths)[:-1]]) * 4).tolist()


def test_write_idx_refuses_bad_input(tmp_path):
    path = str(tmp_path / "x.idx")
    with pytest.raises(ValueError):
        mg.write_idx(path, np.array([1, -1]), np.uint16)
    with pytest.raises(ValueError):
        mg.write_idx(path, np.array([2 ** 31]), np.uint16)
    with pytest.raises(TypeError):
        mg.write_idx(path, np.array([1.5]), np.uint16)
    with pytest.raises(ValueError):
        mg.write_idx(path, np.array([1]), np.uint32)  # no megatron DType code for uint32


def test_read_idx_refuses_bad_files(tmp_path):
    good = tmp_path / "good.idx"
    mg.write_idx(str(good), np.array([4, 2]), np.uint16)
    data = good.read_bytes()
    cases = {
        "header": b"MMIDIDY\x00\x00" + data[9:],
        "version": data[:9] + struct.pack("<Q", 2) + data[17:],
        "code": data[:17] + bytes([9]) + data[18:],
        "truncated": data[:-8],
        "short": data[:20],
        "docindex": data[:-8] + struct.pack("<q", 5),  # last document index must be the sequence count
    }
    for name, blob in cases.items():
        p = tmp_path / f"{name}.idx"
        p.write_bytes(blob)
        with pytest.raises(ValueError, match=str(p)):
            mg.read_idx(str(p))
    multimodal = tmp_path / "modes.idx"   # a multimodal index has one int8 mode per sequence at the end
    multimodal.write_bytes(data + bytes([0, 1]))
    assert mg.read_idx(str(multimodal)).modes.tolist() == [0, 1]


def test_token_dtype_boundary():
    # indexed_dataset.py, DType.optimal_dtype: uint16 if cardinality is not None and cardinality < 65500
    assert mg.token_dtype(65499) == np.dtype(np.uint16)
    assert mg.token_dtype(65500) == np.dtype(np.int32)
    assert mg.token_dtype(50257) == np.dtype(np.uint16)
    assert mg.token_dtype(151643) == np.dtype(np.int32)
    assert mg.token_dtype(None) == np.dtype(np.int32)


# ---------------------------------------------------------------------------------------- gpt_indices

def _rs_shuffled(rng: np.random.RandomState, a: np.ndarray) -> np.ndarray:
    rng.shuffle(a)
    return a


def test_gpt_indices_one_epoch_hand_derived():
    # lengths [5, 5, 5]: every order of the documents gives the stream starts C = [0, 5, 10, 15], so the sample
    # index does not depend on the shuffle. T = 15, seq_len 4, extra token: num_samples = (15 - 1) // 4 = 3
    # (helpers.cpp). Sample k ends (exclusive) at E = 4k + 1 = 5, 9, 13; the row is the document j with
    # C[j] < E <= C[j+1] and offset E - 1 - C[j]: (0, 4), (1, 3), (2, 2). Tracing the C++ loop: sample 1 takes
    # 5 of doc 0 (remaining 0 -> offset 0 + 0 + 5 - 1 = 4); sample 2 takes 1 of doc 0, then doc 1 leaves
    # remaining -1 -> offset 0 + (-1 + 5 - 1) = 3; sample 3 takes 2 of doc 1, doc 2 leaves -2 -> offset 2.
    # One epoch (num_samples None), so RandomState(seed) shuffles the document index (int32), then
    # arange(3, uint32) (gpt_dataset.py, _build_document_index, _build_shuffle_index).
    for seed in (0, 1234):
        doc, sample, shuffle = mg.gpt_indices(np.array([5, 5, 5]), 4, None, seed)
        assert sample.dtype == np.int32 and sample.tolist() == [[0, 0], [0, 4], [1, 3], [2, 2]]
        rng = np.random.RandomState(seed)
        exp_doc = _rs_shuffled(rng, np.arange(3, dtype=np.int32))
        exp_shuffle = _rs_shuffled(rng, np.arange(3, dtype=np.uint32))
        assert doc.dtype == np.int32 and doc.tolist() == exp_doc.tolist()
        assert shuffle.dtype == np.uint32 and shuffle.tolist() == exp_shuffle.tolist()
        d = doc.tolist()
        # _query_document_sample_shuffle_indices on row r = shuffle[i]:
        # r 0: (0,0)->(0,4), one document: [0, 4 + 1); r 1: (0,4)->(1,3): [4, 5) of d0, [0, 3 + 1) of d1;
        # r 2: (1,3)->(2,2): [3, 5) of d1, [0, 2 + 1) of d2
        by_row = {0: [(d[0], 0, 5)], 1: [(d[0], 4, 5), (d[1], 0, 4)], 2: [(d[1], 3, 5), (d[2], 0, 3)]}
        for i in range(3):
            spans = mg.sample_spans(doc, sample, shuffle, i, lengths=np.array([5, 5, 5]))
            assert spans == by_row[int(shuffle[i])]

    # keeping the last partial sample (valid split, drop_last_partial_validation_sequence=False):
    # num_samples = ceil((15 - 1) / 4) = 4; sample 4 runs out of documents in doc 2, so the C++ records
    # (last, len(last) - 1) = (2, 4); the sample is [2, 4 + 1) of d2 = 3 tokens, padded by megatron to 5.
    doc, sample, shuffle = mg.gpt_indices(np.array([5, 5, 5]), 4, None, 0, drop_last_partial=False)
    assert sample.tolist() == [[0, 0], [0, 4], [1, 3], [2, 2], [2, 4]]
    assert len(shuffle) == 4
    i = shuffle.tolist().index(3)
    assert mg.sample_spans(doc, sample, shuffle, i, lengths=np.array([5, 5, 5])) == [(int(doc[2]), 2, 5)]


def test_gpt_indices_epochs_and_separate_final_epoch_hand_derived():
    # One document of 20 tokens, seq_len 4. Every document index is [0, 0, ...] whatever the shuffle.
    # num_samples 6: requested 6 * 4 + 1 = 25 tokens > 20 -> 2 epochs (_get_num_epochs).
    # sans final epoch: (1 * 20 - 1) // 4 = 4 samples; from final: 6 - 4 = 2; per epoch: (20 - 1) // 4 = 4;
    # 2 < int(0.80 * 4) = 3 -> separate_final_epoch. Total samples (2 * 20 - 1) // 4 = 9; sample k ends at
    # 4k + 1: k = 1..4 in the first copy (0, 4k); k = 5..9 in the second, offset 4k + 1 - 1 - 20 = 4(k - 5).
    # RandomState(seed): the two document shuffles are of one element each and draw nothing; then
    # arange(0, 4) and arange(4, 9) are shuffled separately (uint32).
    rows = [[0, 0], [0, 4], [0, 8], [0, 12], [0, 16], [1, 0], [1, 4], [1, 8], [1, 12], [1, 16]]
    doc, sample, shuffle = mg.gpt_indices(np.array([20]), 4, 6, 42)
    assert doc.dtype == np.int32 and doc.tolist() == [0, 0]
    assert sample.tolist() == rows
    rng = np.random.RandomState(42)
    first = _rs_shuffled(rng, np.arange(0, 4, dtype=np.uint32))
    rest = _rs_shuffled(rng, np.arange(4, 9, dtype=np.uint32))
    assert shuffle.dtype == np.uint32 and shuffle.tolist() == first.tolist() + rest.tolist()

    # num_samples 8: requested 33 <= 40 -> still 2 epochs; from final 8 - 4 = 4, not < 3 -> one document
    # shuffle of [0, 0] (2 elements: one draw), then one shuffle of arange(9).
    doc, sample, shuffle = mg.gpt_indices(np.array([20]), 4, 8, 42)
    assert doc.tolist() == [0, 0] and sample.tolist() == rows
    rng = np.random.RandomState(42)
    _rs_shuffled(rng, np.zeros(2, np.int32))
    assert shuffle.tolist() == _rs_shuffled(rng, np.arange(9, dtype=np.uint32)).tolist()

    # num_samples 11: requested 45 -> 3 epochs (60 tokens); sans final (40 - 1) // 4 = 9, from final 2 < 3:
    # separate; the document index is 2 + 1 epochs of [0].
    doc, sample, shuffle = mg.gpt_indices(np.array([20]), 4, 11, 0)
    assert doc.tolist() == [0, 0, 0] and len(sample) == (60 - 1) // 4 + 1
    assert sorted(shuffle[:9].tolist()) == list(range(9)) and sorted(shuffle[9:].tolist()) == [9, 10, 11, 12, 13]


def test_gpt_indices_without_extra_token_hand_derived():
    # add_extra_token False, lengths [4, 4, 4], seq_len 4: num_samples = 12 // 4 = 3; sample k ends at E = 4k;
    # the C++ stops in the document where remaining reaches 0, so E = 4 (end of doc 0) gives (0, 4 - 0 - 0) = (0, 4),
    # not (1, 0); likewise (1, 4), (2, 4). The next sample then starts with an empty span [4, 4) of the
    # previous document (megatron lists that document in document_ids too).
    lengths = np.array([4, 4, 4])
    doc, sample, shuffle = mg.gpt_indices(lengths, 4, None, 3, add_extra_token=False)
    assert sample.tolist() == [[0, 0], [0, 4], [1, 4], [2, 4]]
    d = doc.tolist()
    by_row = {0: [(d[0], 0, 4)], 1: [(d[0], 4, 4), (d[1], 0, 4)], 2: [(d[1], 4, 4), (d[2], 0, 4)]}
    for i in range(3):
        assert mg.sample_spans(doc, sample, shuffle, i, add_extra_token=False, lengths=lengths) == \
            by_row[int(shuffle[i])]


# 9 documents (one empty), 44 tokens, seq_len 5, num_samples 20, seed 1234: requested 101 tokens -> 3 epochs;
# sans final (88 - 1) // 5 = 17, from final 3, per epoch (44 - 1) // 5 = 8, 3 < int(6.4) = 6 -> separate final
# epoch; (132 - 1) // 5 = 26 samples. Values from megatron-core 0.16.1's GPTDataset cache files.
GOLDEN_LENGTHS = [7, 3, 11, 1, 6, 9, 2, 0, 5]
GOLDEN_DOC = [2, 3, 8, 1, 4, 5, 0, 2, 7, 7, 1, 0, 8, 4, 3, 5, 6, 6, 7, 4, 1, 5, 3, 0, 2, 8, 6]
GOLDEN_SAMPLE = [[0, 0], [0, 5], [0, 10], [2, 3], [4, 0], [4, 5], [5, 4], [6, 0], [6, 5], [7, 3], [7, 8], [10, 2],
                 [11, 4], [12, 2], [13, 2], [15, 0], [15, 5], [16, 1], [19, 2], [20, 1], [21, 3], [21, 8], [23, 3],
                 [24, 1], [24, 6], [25, 0], [26, 0]]
GOLDEN_SHUFFLE = [15, 5, 13, 16, 1, 4, 8, 2, 14, 12, 9, 0, 11, 7, 3, 10, 6, 23, 18, 17, 22, 25, 19, 21, 24, 20]


def test_gpt_indices_golden_from_megatron():
    lengths = np.array(GOLDEN_LENGTHS)
    doc, sample, shuffle = mg.gpt_indices(lengths, 5, 20, 1234)
    assert (doc.dtype, sample.dtype, shuffle.dtype) == (np.int32, np.int32, np.uint32)
    assert doc.tolist() == GOLDEN_DOC
    assert sample.tolist() == GOLDEN_SAMPLE
    assert shuffle.tolist() == GOLDEN_SHUFFLE
    # structure: 2 epochs shuffled together, then the final epoch alone; samples split at 17
    assert sorted(doc[:18].tolist()) == sorted(list(range(9)) * 2) and sorted(doc[18:].tolist()) == list(range(9))
    assert sorted(shuffle[:17].tolist()) == list(range(17)) and sorted(shuffle[17:].tolist()) == list(range(17, 26))
    for i in range(len(shuffle)):
        spans = mg.sample_spans(doc, sample, shuffle, i, lengths=lengths)
        assert sum(b - a for _, a, b in spans) == 5 + 1
        assert all(0 <= a <= b <= lengths[d] for d, a, b in spans)


def _stream_check(lengths, seq_len, num_samples, seed, extra, drop_last):
    """No shuffle (samples in sample-index order): sample k is tokens [k*seq_len, k*seq_len + seq_len + extra)
    of the documents concatenated in document-index order, so the samples cover that stream in order."""
    lengths = np.asarray(lengths)
    offsets = np.concatenate([[0], np.cumsum(lengths)])
    tokens = np.arange(offsets[-1])                      # token id = its position in the .bin
    doc, sample, _ = mg.gpt_indices(lengths, seq_len, num_samples, seed, add_extra_token=extra,
                                    drop_last_partial=drop_last)
    stream = np.concatenate([tokens[offsets[d]:offsets[d + 1]] for d in doc])
    order = np.arange(len(sample) - 1)
    covered = 0
    for k in range(len(sample) - 1):
        spans = mg.sample_spans(doc, sample, order, k, add_extra_token=extra, lengths=lengths)
        got = np.concatenate([tokens[offsets[d] + a:offsets[d] + b] for d, a, b in spans])
        want = stream[k * seq_len:k * seq_len + seq_len + extra]
        assert got.tolist() == want.tolist(), (k, spans)
        if drop_last:
            assert len(got) == seq_len + extra
        covered = k * seq_len + len(got)
    return covered, len(stream), len(sample) - 1


def test_samples_cover_the_stream_in_order():
    rng = np.random.default_rng(5)
    lengths = rng.integers(0, 40, 200)
    lengths[::17] = 0
    total = int(lengths.sum())
    full = np.maximum(lengths, 1)   # a kept partial sample must not end in an empty document (see below)
    for seq_len, num_samples, extra, drop in [(16, None, True, True), (16, 3 * total // 16, True, True),
                                              (9, 2 * total // 9 + 3, False, True), (16, None, True, False),
                                              (13, None, False, False), (16, 2 * total // 16 + 5, True, False)]:
        covered, stream, n = _stream_check(lengths if drop else full, seq_len, num_samples, seed=11, extra=extra,
                                           drop_last=drop)
        if drop:   # all samples full; what is left over is less than one sample
            assert n == (stream - extra) // seq_len and stream - covered < seq_len
        else:      # the last partial sample reaches the end of the stream
            assert covered == stream
    # the end of the stream in an empty document with a kept partial sample: megatron (helpers.py) asserts
    with pytest.raises(ValueError, match="empty document"):
        mg._sample_index(np.array([4, 0], np.int32), np.array([0, 1], np.int32), 2, 1, 4, False, 1)


def test_gpt_indices_refuses_bad_input():
    with pytest.raises(ValueError):
        mg.gpt_indices(np.array([5, 5]), 1, None, 0)         # helpers.cpp asserts seq_length > 1
    with pytest.raises(ValueError):
        mg.gpt_indices(np.array([1, 0]), 4, None, 0)         # tokens_per_epoch > 1
    with pytest.raises(ValueError):
        mg.gpt_indices(np.zeros(0, np.int32), 4, None, 0)
    with pytest.raises(IndexError):
        doc, sample, shuffle = mg.gpt_indices(np.array([5, 5, 5]), 4, None, 0)
        mg.sample_spans(doc, sample, shuffle, 3, lengths=np.array([5, 5, 5]))


def test_gpt_indices_one_million_documents_fast():
    import time
    lengths = np.random.default_rng(0).integers(1, 2000, 1_000_000).astype(np.int32)
    t = time.perf_counter()
    doc, sample, shuffle = mg.gpt_indices(lengths, 2048, 1_200_000, 7)   # ~2.4 epochs
    assert time.perf_counter() - t < 10
    assert len(doc) == 3_000_000 and len(shuffle) == len(sample) - 1 >= 1_200_000
    # spot-check sample boundaries against the stream: row k sits at position k * 2048
    starts = np.concatenate([[0], np.cumsum(lengths[doc], dtype=np.int64)])
    k = np.array([1, 12345, len(sample) - 1])
    assert (starts[sample[k, 0]] + sample[k, 1]).tolist() == (k * 2048).tolist()


# ---------------------------------------------------------------------------------------------- cache files

def test_load_cached_round_trip_and_ambiguity(tmp_path):
    doc, sample, shuffle = mg.gpt_indices(np.array(GOLDEN_LENGTHS), 5, 20, 1234)
    cache = str(tmp_path / "cache")
    a = "0123456789abcdef0123456789abcdef-GPTDataset-train"
    b = "fedcba9876543210fedcba9876543210-GPTDataset-valid"
    mg.write_cache(cache, a, doc, sample, shuffle)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == [
        f"{a}-document_index.npy", f"{a}-sample_index.npy", f"{a}-shuffle_index.npy"]
    got = mg.load_cached(cache)                      # one set: no prefix needed
    for x, y in zip(got, (doc, sample, shuffle)):
        assert x.dtype == y.dtype and x.tolist() == y.tolist()
    mg.write_cache(cache, b, doc[:3], sample[:3], shuffle[:2])
    with pytest.raises(ValueError) as err:
        mg.load_cached(cache)
    assert a in str(err.value) and b in str(err.value)
    assert mg.load_cached(cache, b)[0].tolist() == doc[:3].tolist()
    assert mg.load_cached(cache, "0123")[1].tolist() == sample.tolist()   # a unique start of a prefix
    with pytest.raises(FileNotFoundError):
        mg.load_cached(cache, "nothing-like-it")
    (tmp_path / "cache" / f"{a}-shuffle_index.npy").unlink()             # incomplete sets are ignored
    assert mg.load_cached(cache)[2].tolist() == shuffle[:2].tolist()
    with pytest.raises(FileNotFoundError):
        mg.load_cached(str(tmp_path / "missing"))
