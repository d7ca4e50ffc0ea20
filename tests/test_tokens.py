"""Token counts: the calibrated estimate (exact values by hand) and exact counts with a tokenizer.json."""
import os
import pickle

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataclean import tokens as T
from dataclean.tokens import TokenCounter, estimate_tokens, make_token_counter, token_features

# Per byte 1/4.9 token (code 1/5.5), + 0.5 per ASCII symbol, + 1.1 per ASCII digit, 1/1.5 per CJK character;
# rounded to the nearest integer, at least 1 for non-empty text.
ENGLISH = "The quick brown fox jumps over the lazy dog."  # 44 bytes, 1 symbol: 8.98 + 0.5 = 9.48 -> 9
CHINESE = "数据清洗很重要。"  # 7 Han + '。' = 8 CJK: 5.33 -> 5
MIXED = "用Python清洗数据"  # 5 CJK (3.33) + 6 bytes (1.22) = 4.56 -> 5
CODE = "def f(x):\n    return x + 1\n"  # 27 bytes, 4 symbols ( ) : +, 1 digit


def est(texts, sources=None):
    return estimate_tokens(pa.array(texts, pa.string()),
                           None if sources is None else pa.array(sources, pa.string())).to_pylist()


def test_estimate_english_chinese_mixed_empty():
    assert est([ENGLISH, CHINESE, MIXED, "", None]) == [9, 5, 5, 0, None]


def test_estimate_code_uses_the_code_rate_only_with_source():
    # as code: 27/5.5 + 4*0.5 + 1.1 = 8.01 -> 8; as prose: 27/4.9 + 2 + 1.1 = 8.61 -> 9
    assert est([CODE, CODE], ["code", "web"]) == [8, 9]
    assert est([CODE]) == [9]
    assert estimate_tokens(pa.array([CODE]), pa.array(["src"]), code_sources=["src"]).to_pylist() == [8]


def test_estimate_other_scripts_digits_and_minimum():
    # kana 5/1.5 = 3.33; Hangul 5/1.5; Cyrillic 12 bytes / 4.9 = 2.45; 4 digits * (1/4.9 + 1.1) = 5.22;
    # one space 0.2 -> at least 1; fullwidth '！' is CJK (0.67 -> 1)
    assert est(["ありがとう", "안녕하세요", "Привет", "2024", " ", "！"]) == [3, 3, 2, 5, 1, 1]


def test_features_count_bytes_cjk_digits_symbols():
    f = token_features(pa.array([MIXED, CODE, "", None]))
    assert f["bytes"].tolist() == [21, 27, 0, 0]
    assert f["cjk"].tolist() == [5, 0, 0, 0]
    assert f["rest"].tolist() == [6, 27, 0, 0]
    assert f["digits"].tolist() == [0, 1, 0, 0]
    assert f["symbols"].tolist() == [0, 4, 0, 0]
    assert T.count_cjk(pa.array([MIXED])).to_pylist() == [5]


def test_estimate_accepts_chunked_sliced_large_and_dictionary_inputs(monkeypatch):
    texts = [ENGLISH, CHINESE, "", MIXED, CODE, None]
    expected = est(texts, ["web", "web", "web", "web", "code", "web"])
    chunked = pa.chunked_array([texts[:2], texts[2:]], pa.string())
    source = pa.array(["web", "web", "web", "web", "code", "web"]).dictionary_encode()
    assert estimate_tokens(chunked, source).to_pylist() == expected
    assert estimate_tokens(pa.array(texts, pa.large_string()), source).to_pylist() == expected
    assert estimate_tokens(pa.array(["x"] + texts, pa.string()).slice(1), source).to_pylist() == expected
    monkeypatch.setattr(T, "_CHUNK_BYTES", 8)  # many small numpy passes give the same sums
    assert estimate_tokens(chunked, source).to_pylist() == expected
    assert estimate_tokens(pa.array([], pa.string())).to_pylist() == []
    with pytest.raises(ValueError, match="source has 1 rows"):
        estimate_tokens(pa.array(["a", "b"]), pa.array(["web"]))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.none(), st.text()), max_size=20))
def test_estimate_never_crashes_and_stays_in_range(texts):
    out = est(texts)
    for t, n in zip(texts, out):
        if t is None:
            assert n is None
        elif t == "":
            assert n == 0
        else:  # at least 1, at most about 1.3 tokens per byte (all digits)
            assert 1 <= n <= len(t.encode()) * 1.31 + 1
    saved, T._CHUNK_BYTES = T._CHUNK_BYTES, 5  # documents split over many numpy passes: same sums
    try:
        assert est(texts) == out
    finally:
        T._CHUNK_BYTES = saved


# -- exact counts --------------------------------------------------------------------------------------------
@pytest.fixture
def tiny_tokenizer(tmp_path):
    """A word-level tokenizer trained here: one token per word or punctuation run, [CLS] added by its
    post-processor (which the counter must not count)."""
    import tokenizers  # in the test extra: a missing package fails here, it does not skip
    from tokenizers import models, pre_tokenizers, processors, trainers

    tok = tokenizers.Tokenizer(models.WordLevel(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()  # \w+ | [^\w\s]+
    tok.train_from_iterator(["hello world", "data cleaning", "数据 清洗"],
                            trainers.WordLevelTrainer(special_tokens=["[UNK]", "[CLS]"]))
    tok.post_processor = processors.TemplateProcessing(single="[CLS] $A", special_tokens=[("[CLS]", 1)])
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    return path


EXACT_TEXTS = ["hello world", "hello, world!", "数据 清洗", "unknown words here", "", None]
EXACT_COUNTS = [2, 4, 2, 3, 0, None]  # "hello" "," "world" "!"; unknown words count one [UNK] each


def test_exact_counts(tiny_tokenizer, monkeypatch):
    monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    counter = make_token_counter(str(tiny_tokenizer), batch_size=2)
    assert counter.exact and os.environ["TOKENIZERS_PARALLELISM"] == "false"  # threads=1: no Rust pool
    out = counter(pa.array(EXACT_TEXTS))
    assert out.type == pa.int64() and out.to_pylist() == EXACT_COUNTS
    assert counter(pa.chunked_array([EXACT_TEXTS[:3], EXACT_TEXTS[3:]])).to_pylist() == EXACT_COUNTS
    again = pickle.loads(pickle.dumps(counter))  # workers may receive it pickled: reloads the file
    assert again(pa.array(EXACT_TEXTS), pa.array(["web"] * 6)).to_pylist() == EXACT_COUNTS


def test_exact_threads_setting(tiny_tokenizer, monkeypatch):
    monkeypatch.delenv("RAYON_NUM_THREADS", raising=False)
    monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    counter = TokenCounter(tiny_tokenizer, threads=2)
    assert os.environ["TOKENIZERS_PARALLELISM"] == "true" and os.environ["RAYON_NUM_THREADS"] == "2"
    assert counter(pa.array(EXACT_TEXTS)).to_pylist() == EXACT_COUNTS


def test_config_and_estimate_fallback(tiny_tokenizer):
    text, source = pa.array([ENGLISH, CODE]), pa.array(["web", "code"])
    for counter in (TokenCounter(), TokenCounter.from_config(None), TokenCounter.from_config({"tokenizer": None})):
        assert not counter.exact
        assert counter(text, source).to_pylist() == [9, 8]
    exact = TokenCounter.from_config({"tokenizer": str(tiny_tokenizer), "batch_size": 8, "threads": 1})
    assert exact.exact and exact.batch_size == 8 and "tokenizer.json" in repr(exact)


def test_missing_tokenizer_file_is_a_clear_error(tmp_path):
    missing = tmp_path / "nope" / "tokenizer.json"
    with pytest.raises(ValueError, match="tokenizer file not found: .*nope/tokenizer.json"):
        make_token_counter(str(missing))
    with pytest.raises(ValueError, match="batch_size"):
        TokenCounter(None, batch_size=0)


def test_invalid_tokenizer_file_is_a_clear_error(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text('{"model": "not a tokenizer"}')
    with pytest.raises(ValueError, match=f"cannot load tokenizer {bad}"):
        TokenCounter(bad)


def test_run_counts_exactly_with_a_configured_tokenizer_and_refingerprints_on_change(tiny_tokenizer, tmp_path):
    """End to end: `tokens.tokenizer` makes n_tokens exact in data/ and the ledger; a changed tokenizer
    file (same path) is a different run (the markers hold the file's digest)."""
    import json

    import pyarrow.parquet as pq
    import yaml

    from conftest import run_cli

    inp = tmp_path / "in.jsonl"
    inp.write_text("\n".join(json.dumps({"id": f"d{i}", "text": t}) for i, t in
                             enumerate(["hello world", "hello, world!", "数据 清洗", "   "])) + "\n")
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(yaml.safe_dump({"pipeline": [{"stage": "normalize"}],
                                   "tokens": {"tokenizer": str(tiny_tokenizer)}}))
    out = tmp_path / "out"
    res = run_cli("run", inp, "-o", out, "--config", cfg, "--quiet")
    assert res.returncode == 0, res.stderr
    kept = pq.read_table(out / "data").sort_by("id")
    assert kept.column("n_tokens").to_pylist() == [2, 4, 2]
    assert pq.read_table(out / "rejected").column("n_tokens").to_pylist() == [0]  # "   " -> empty_text
    assert run_cli("run", inp, "-o", out, "--config", cfg, "--quiet").returncode == 0  # same run: resumes
    tiny_tokenizer.write_text(tiny_tokenizer.read_text().replace('"hello"', '"hullo"'))
    res = run_cli("run", inp, "-o", out, "--config", cfg, "--quiet")
    assert res.returncode == 2 and "different configuration" in res.stderr
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump({"tokens": {"tokenizer": str(tmp_path / "missing.json")}}))
    res = run_cli("run", inp, "-o", tmp_path / "out2", "--config", bad, "--quiet")
    assert res.returncode == 2 and "tokens.tokenizer: tokenizer file not found" in res.stderr
