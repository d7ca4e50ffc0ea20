"""dataclean export and trace: exact token counts, Megatron files, the provenance sidecar, determinism,
resumption, and the loss-spike lookup of a planted document by step.

The .bin/.idx files are read back with dataclean's reader written from megatron-core's documented layout
(dataclean/export/megatron.py); megatron-core itself needs torch, which CI does not install (see
benchmarks/check_megatron.py for the check against megatron-core's own reader and GPT index builder)."""
import json

import numpy as np
import pyarrow.parquet as pq
import pytest

from conftest import run_cli
from dataclean.export import megatron

EN = ["The river rose slowly after three days of steady rain in the northern hills.",
      "Farmers in the valley moved their animals to higher ground before the water arrived.",
      "A small bakery on the corner sells bread that is still warm at seven in the morning."]
ZH = ["今天的天气很好，我们一起去公园散步吧。", "这家小店的面包每天早上七点出炉，味道很香。"]
PLANTED = "Header of a broken page\n" + "=" * 5000 + "\nfooter"


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    base = tmp_path_factory.mktemp("export")
    a, b = base / "a.jsonl", base / "b.jsonl"
    with open(a, "w", encoding="utf-8") as fh:
        for i, t in enumerate(EN):
            fh.write(json.dumps({"id": f"en{i}", "text": t, "source": "web"}) + "\n")
        fh.write(json.dumps({"id": "planted", "text": PLANTED, "source": "web"}) + "\n")
    with open(b, "w", encoding="utf-8") as fh:
        for i, t in enumerate(ZH):
            fh.write(json.dumps({"id": f"zh{i}", "text": t, "source": "forum"}, ensure_ascii=False) + "\n")
    cfg = base / "c.yaml"
    cfg.write_text("output: {report: false}\npipeline:\n  - stage: normalize\n")
    out = base / "run"
    r = run_cli("run", a, b, "-o", out, "--config", cfg)
    assert r.returncode == 0, r.stderr
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(EN + ZH + [PLANTED], trainers.BpeTrainer(
        vocab_size=420, special_tokens=["<|endoftext|>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    path = base / "tok.json"
    tok.save(str(path))
    kept = pq.read_table(out / "data").to_pylist()
    return base, out, path, tok, kept


def export(run, name, *extra):
    base, out, path, _, _ = run
    dest = base / name
    r = run_cli("export", out, "-o", dest, "--tokenizer", path, *extra)
    return dest, r


def test_megatron_export_has_exact_tokens_and_provenance(run):
    _, _, _, tok, kept = run
    dest, r = export(run, "exp1")
    assert r.returncode == 0, r.stderr
    assert "6 documents" in r.stdout and "next: dataclean trace" in r.stdout
    eod = tok.token_to_id("<|endoftext|>")
    expected = [tok.encode(d["text"], add_special_tokens=False).ids + [eod] for d in kept]
    idx = megatron.read_idx(str(dest / "export.idx"))
    assert idx.dtype == np.uint16 and idx.document_count == 7 and idx.sequence_count == 6
    assert list(idx.lengths) == [len(e) for e in expected]
    tokens = np.fromfile(dest / "export.bin", np.uint16)
    assert tokens.tolist() == [t for e in expected for t in e]
    side = pq.read_table(dest / "export.docs.parquet").to_pylist()
    assert [s["id"] for s in side] == [d["id"] for d in kept]
    assert [s["ordinal"] for s in side] == list(range(6))
    assert side[-1]["token_offset"] + side[-1]["n_tokens"] == len(tokens)
    assert [s["token_offset"] for s in side] == list(np.cumsum([0] + [len(e) for e in expected[:-1]]))
    assert {s["source"] for s in side} == {"web", "forum"} and side[0]["origin_file"].endswith("a.jsonl")
    meta = json.loads((dest / "export.json").read_text())
    assert meta["tokens"] == len(tokens) and meta["tokenizer"]["eod_id"] == eod
    assert side[0]["run_fingerprint"] == meta["run_fingerprint"] and side[0]["export_fingerprint"] == meta["fingerprint"]


def test_export_is_byte_identical_for_any_worker_count_and_resumes(run):
    one, r1 = export(run, "w1")
    two, r2 = export(run, "w2", "--workers", "2")
    assert r1.returncode == 0 and r2.returncode == 0
    for f in ("export.bin", "export.idx", "export.docs.parquet"):
        assert (one / f).read_bytes() == (two / f).read_bytes(), f
    again = run_cli("export", run[1], "-o", one, "--tokenizer", run[2])
    assert again.returncode == 0 and (one / "export.bin").read_bytes() == (two / "export.bin").read_bytes()


def test_export_refuses_another_tokenizer_then_fresh_replaces(run):
    base, out, path, _, _ = run
    dest, r = export(run, "refuse")
    assert r.returncode == 0
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    other = Tokenizer(models.WordLevel(unk_token="[UNK]"))
    other.pre_tokenizer = pre_tokenizers.Whitespace()
    other.train_from_iterator(EN, trainers.WordLevelTrainer(special_tokens=["[UNK]", "</s>"]))
    other.save(str(base / "other.json"))
    r = run_cli("export", out, "-o", dest, "--tokenizer", base / "other.json")
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "--fresh" in r.stderr
    r = run_cli("export", out, "-o", dest, "--tokenizer", base / "other.json", "--fresh")
    assert r.returncode == 0, r.stderr
    assert json.loads((dest / "export.json").read_text())["tokenizer"]["eod_token"] == "</s>"
    r = run_cli("export", out, "-o", base / "x", "--tokenizer", base / "other.json", "--eod-token", "<nope>")
    assert r.returncode == 2 and "no token '<nope>'" in r.stderr


def test_parquet_format_holds_the_same_tokens(run):
    _, _, _, tok, kept = run
    dest, r = export(run, "pq", "--format", "parquet")
    assert r.returncode == 0, r.stderr
    rows = pq.read_table(dest / "tokens").to_pylist()
    eod = tok.token_to_id("<|endoftext|>")
    assert [x["tokens"] for x in rows] == [tok.encode(d["text"], add_special_tokens=False).ids + [eod] for d in kept]


def test_trace_step_finds_the_planted_run_and_shows_its_anomaly(run):
    dest, r = export(run, "trace")
    assert r.returncode == 0
    side = {s["id"]: s for s in pq.read_table(dest / "export.docs.parquet").to_pylist()}
    seq = 16
    sample = (side["planted"]["token_offset"] + 5) // seq
    gbs = 4
    step = sample // gbs
    t = run_cli("trace", dest, "--step", step, "--global-batch-size", gbs, "--seq-len", seq, "--format", "json")
    assert t.returncode == 0, t.stderr
    res = json.loads(t.stdout)
    assert [p["sample"] for p in res["positions"]] == list(range(step * gbs, step * gbs + gbs))
    docs = [d for p in res["positions"] for d in p["documents"] if d["id"] == "planted"]
    assert docs, "the planted document is in the step"
    d = docs[0]
    assert d["inspect"]["anomalies"]["longest_run"]["chars"] == 5000
    assert d["token_anomalies"]["longest_run"] >= 1 and d["source"] == "web"
    # every sample of the step is seq + 1 tokens, in stream order
    for p in res["positions"]:
        assert sum(x["span"][1] - x["span"][0] for x in p["documents"]) == seq + 1
    table = run_cli("trace", dest, "--step", step, "--global-batch-size", gbs, "--seq-len", seq)
    assert table.returncode == 0 and "planted" in table.stdout and "5,000 chars" in table.stdout


def test_trace_with_megatron_cache_and_token_window(run, tmp_path):
    dest, r = export(run, "trace2")
    assert r.returncode == 0
    idx = megatron.read_idx(str(dest / "export.idx"))
    doc_idx, sample_idx, shuffle_idx = megatron.gpt_indices(np.asarray(idx.lengths), 16, None, 1234)
    cache = tmp_path / "cache"
    megatron.write_cache(str(cache), "abc-GPTDataset-train", doc_idx, sample_idx, shuffle_idx)
    t = run_cli("trace", dest, "--sample", 3, "--megatron-cache", cache, "--format", "json", "--no-inspect")
    assert t.returncode == 0, t.stderr
    got = [(d["ordinal"], *d["span"]) for d in json.loads(t.stdout)["positions"][0]["documents"]]
    assert got == [tuple(int(v) for v in s) for s in megatron.sample_spans(doc_idx, sample_idx, shuffle_idx, 3,
                                                                          lengths=np.asarray(idx.lengths)) if s[2] > s[1]]
    # a window of token ids of the planted document, found by searching the export
    side = {s["id"]: s for s in pq.read_table(dest / "export.docs.parquet").to_pylist()}
    o = side["planted"]["token_offset"]
    window = np.fromfile(dest / "export.bin", np.uint16)[o + 2:o + 9]
    (tmp_path / "w.txt").write_text(" ".join(map(str, window.tolist())))
    t = run_cli("trace", dest, "--tokens", tmp_path / "w.txt", "--format", "json", "--no-inspect")
    assert t.returncode == 0, t.stderr
    pos = json.loads(t.stdout)["positions"][0]
    assert pos["matches"] >= 1 and pos["documents"][0]["id"] == "planted" and pos["documents"][0]["span"][0] <= 2


def test_trace_errors_are_one_line(run, tmp_path):
    dest, r = export(run, "trace3")
    bad = run_cli("trace", dest, "--step", 3)
    assert bad.returncode == 2 and "--global-batch-size" in bad.stderr
    far = run_cli("trace", dest, "--sample", 10 ** 9, "--seq-len", 16)
    assert far.returncode == 2 and "out of range" in far.stderr and far.stderr.count("\n") == 1
    notexp = run_cli("trace", tmp_path, "--sample", 0, "--seq-len", 8)
    assert notexp.returncode == 2 and "no export.json" in notexp.stderr


def test_sql_joins_the_sidecar_with_the_run(run):
    dest, r = export(run, "sql")
    q = run_cli("sql", dest, "SELECT e.ordinal, k.id, e.n_tokens FROM export_docs e JOIN kept k USING (id) "
                             "ORDER BY e.ordinal", "--format", "json")
    assert q.returncode == 0, q.stderr
    rows = json.loads(q.stdout)
    assert [x["ordinal"] for x in rows] == list(range(6))


def test_token_counts_equal_the_tokenizers_own_on_sample_data(sample_run, tmp_path):
    """Every kept document of the sample run: n_tokens = the tokenizer's own count + the end-of-document token,
    and the offsets sum to the .bin's size."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    kept = pq.read_table(sample_run / "data", columns=["id", "text"]).to_pylist()
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.train_from_iterator([d["text"] for d in kept[:200]], trainers.BpeTrainer(
        vocab_size=2000, special_tokens=["</s>"], initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    tok.save(str(tmp_path / "tok.json"))
    r = run_cli("export", sample_run, "-o", tmp_path / "exp", "--tokenizer", tmp_path / "tok.json", "--workers", 2)
    assert r.returncode == 0, r.stderr
    side = pq.read_table(tmp_path / "exp" / "export.docs.parquet").to_pylist()
    by_id = {d["id"]: d["text"] for d in kept}
    assert len(side) == len(kept)
    assert [s["n_tokens"] for s in side] == [len(tok.encode(by_id[s["id"]], add_special_tokens=False).ids) + 1
                                             for s in side]
    size = (tmp_path / "exp" / "export.bin").stat().st_size
    assert side[-1]["token_offset"] + side[-1]["n_tokens"] == sum(s["n_tokens"] for s in side) == size // 2
