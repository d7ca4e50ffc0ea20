"""Benchmark decontamination: planted items are found however they were copied; shared phrases are not.

No benchmark with a permissive licence installs from a registry here, so the test benchmarks are built from
the real text of sample_data (web pages in English, Wikipedia in Chinese), as the issue allows.
"""
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import run_cli
from dataclean import decontam
from dataclean.stages.decontaminate import Decontaminate
from dataclean.text.script_fold import fold_t2s, fold_t2s_str

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"


def _paragraphs():
    en = [p for r in pq.read_table(SAMPLE / "web-en.parquet").to_pylist() for p in r["text"].split("\n")
          if 45 <= len(p.split()) <= 120]
    import zstandard
    raw = zstandard.ZstdDecompressor().stream_reader(open(SAMPLE / "zh-wiki-docs.jsonl.zst", "rb")).read()
    zh = []
    for line in raw.decode("utf-8").splitlines():
        r = json.loads(line)
        zh += [p for p in r["text"].split("\n") if 60 <= len(p) <= 200 and sum("\u4e00" <= c <= "\u9fff" for c in p) > 50]
    return en[:30], zh[:30]


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    en, zh = _paragraphs()
    folder = tmp_path_factory.mktemp("bench")
    path = folder / "realtext.jsonl"
    with open(path, "w", encoding="utf-8") as fh:
        for i, t in enumerate(en + zh):
            fh.write(json.dumps({"id": f"q{i}", "question": t}, ensure_ascii=False) + "\n")
    stage = Decontaminate(benchmarks=[str(path)], index_dir=str(folder / "index"))
    return en, zh, path, stage


def _rewrap(t, width=7):
    w = t.split()
    return "\n".join(" ".join(w[i:i + width]) for i in range(0, len(w), width))


def _repunctuate(t):
    return "  ".join(t.replace(",", " ;").replace(".", " !").upper().split(" "))


def _to_traditional(t):
    import opencc
    return opencc.OpenCC("s2t").convert(t)


def test_script_folding():
    assert fold_t2s_str("這個資料庫的記憶體") == "这个资料库的记忆体"
    assert fold_t2s(pa.array(["後來", None, "abc"])).to_pylist() == ["后来", None, "abc"]


def test_every_planted_variant_is_found(bench):
    en, zh, _, stage = bench
    wrap = lambda t: "Some words before the copy, as a blog post would start.\n" + t + "\nAnd a line after it."  # noqa
    docs = ([wrap(t) for t in en] + [wrap(_rewrap(t)) for t in en] + [wrap(_repunctuate(t)) for t in en]
            + [wrap(t) for t in zh] + [wrap(_to_traditional(t)) for t in zh] + [wrap(t.replace("，", " ")) for t in zh])
    out = stage(pa.record_batch({"text": docs}))
    assert out.decisions.rule.to_pylist() == ["benchmark_overlap"] * len(docs)
    overlap = out.batch.column("decontam_overlap").to_pylist()
    groups = [overlap[i:i + 30] for i in range(0, len(overlap), 30)]
    print([round(min(g), 3) for g in groups])
    assert [min(g) == 1.0 for g in groups] == [True, True, True, True, False, True]
    assert min(groups[4]) > 0.75  # s2t then t2s is not the identity for a few characters (发→發/髮→发...)
    items = out.batch.column("decontam_item").to_pylist()
    assert items == [f"q{i}/question" for i in range(30)] * 3 + [f"q{30 + i}/question" for i in range(30)] * 3
    detail = out.decisions.detail.to_pylist()[0]
    assert detail.startswith("realtext item q0 (question): ") and detail.endswith(" 13-grams")


def test_shared_phrases_are_not_flagged(bench):
    en, zh, _, stage = bench
    # a page quoting the first 15 words of an item, and one quoting a third of a Chinese item
    docs = ["An unrelated essay that quotes: " + " ".join(en[0].split()[:15]) + " and goes on about other things.",
            "一篇无关的文章引用了：" + zh[0][: len(zh[0]) // 3] + "然后讨论别的事情。",
            "The quick brown fox jumps over the lazy dog, a sentence every typist knows by heart."]
    out = stage(pa.record_batch({"text": docs}))
    assert out.decisions is None
    overlap = out.batch.column("decontam_overlap").to_pylist()
    assert 0 < overlap[0] < 0.5 and 0 < overlap[1] < 0.5 and overlap[2] == 0


def test_template_ngrams_are_dropped(tmp_path):
    template = "Answer the following question with one of the options given below and explain why it is right."
    path = tmp_path / "mcq.jsonl"
    with open(path, "w") as fh:
        for i in range(12):
            fh.write(json.dumps({"prompt": f"{template} Question {i}: which river flows through city number {i} "
                                           f"of the list of capitals that the atlas printed in year {1900 + i}?"})
                     + "\n")
    st = Decontaminate(benchmarks=[{"path": str(path), "name": "mcq"}], index_dir=str(tmp_path / "ix"))
    meta = st.loaded().meta
    assert meta["template_ngrams_dropped"] > 0 and meta["benchmarks"][0]["fields"] == ["prompt"]
    out = st(pa.record_batch({"text": [template + " Then an unrelated question about cooking rice well."]}))
    assert out.decisions is None and out.batch.column("decontam_overlap").to_pylist() == [0.0]


def test_mark_mode_and_min_shared(bench, tmp_path):
    en, _, path, _ = bench
    mark = Decontaminate(benchmarks=[str(path)], mode="mark", index_dir=str(tmp_path / "ix"))
    out = mark(pa.record_batch({"text": [en[1]]}))
    assert out.decisions is None and out.batch.column("decontam_benchmark").to_pylist() == ["realtext"]
    strict = Decontaminate(benchmarks=[str(path)], min_shared_ngrams=1, index_dir=str(tmp_path / "ix"))
    quote = "It said: " + " ".join(en[2].split()[:14])
    assert strict(pa.record_batch({"text": [quote]})).decisions.rule.to_pylist() == ["benchmark_overlap"]


def test_benchmark_errors_are_one_line(tmp_path):
    with pytest.raises(ValueError, match="does not exist"):
        Decontaminate(benchmarks=[str(tmp_path / "missing.jsonl")])
    bad = tmp_path / "numbers.jsonl"
    bad.write_text('{"a": 1}\n{"a": 2}\n')
    with pytest.raises(ValueError, match="no text field found .* name the fields"):
        Decontaminate(benchmarks=[str(bad)], index_dir=str(tmp_path / "ix"))
    arr = tmp_path / "array.jsonl"
    arr.write_text('[{"question": "x"}]\n')
    with pytest.raises(ValueError, match="line 1 is not a JSON object"):
        Decontaminate(benchmarks=[str(arr)], index_dir=str(tmp_path / "ix"))
    with pytest.raises(ValueError, match="no benchmarks"):
        Decontaminate(benchmarks=[])


def test_json_array_and_parquet_benchmarks(tmp_path, bench):
    en = bench[0]
    (tmp_path / "arr.json").write_text(json.dumps([{"problem": en[3], "solution": en[4]}]))
    pq.write_table(pa.table({"text": [en[5]]}), tmp_path / "p.parquet")
    st = Decontaminate(benchmarks=[str(tmp_path / "arr.json"), str(tmp_path / "p.parquet")],
                       index_dir=str(tmp_path / "ix"))
    out = st(pa.record_batch({"text": [en[4], en[5]]}))
    assert out.batch.column("decontam_item").to_pylist() == ["0/solution", "0/text"]
    assert out.batch.column("decontam_benchmark").to_pylist() == ["arr", "p"]


def test_index_is_built_once_and_memory_mapped(bench, tmp_path):
    _, _, path, stage = bench
    again = Decontaminate(benchmarks=[str(path)], index_dir=os.path.dirname(stage.index))
    assert again.index == stage.index
    ix = decontam.Index(stage.index)
    assert type(ix.keys).__name__ == "memmap" and list(ix.keys) == sorted(ix.keys)


def test_cli_decontaminate_ledger_and_stats(tmp_path, bench):
    en, zh, path, _ = bench
    docs = tmp_path / "in.jsonl"
    with open(docs, "w", encoding="utf-8") as fh:
        fh.write(json.dumps({"id": "copy-en", "text": "Notes.\n" + _rewrap(en[6]) + "\nEnd of the notes, thanks.",
                             "source": "web"}) + "\n")
        fh.write(json.dumps({"id": "copy-zh", "text": _to_traditional(zh[6]), "source": "web"}, ensure_ascii=False)
                 + "\n")
        fh.write(json.dumps({"id": "other", "text": "A page about gardening: water the tomatoes in the morning, "
                             "never at noon, and give them a stake before the first storm.", "source": "web"}) + "\n")
    out = tmp_path / "out"
    cfg = tmp_path / "c.yaml"
    cfg.write_text("output: {report: false}\npipeline:\n  - stage: normalize\n")
    r = run_cli("run", docs, "-o", out, "--config", cfg, "--decontaminate", path,
                env_extra={"XDG_CACHE_HOME": str(tmp_path / "cache")})
    assert r.returncode == 0, r.stderr
    assert "removed by decontaminate: 2" in r.stdout
    led = {x["id"]: x for x in pq.read_table(out / "rejected").to_pylist()}
    assert set(led) == {"copy-en", "copy-zh"}
    assert led["copy-en"]["detail"].startswith("realtext item q6 (question): ")
    summary = json.loads((out / "stats" / "summary.json").read_text())
    assert summary["contamination"] == {"realtext": {"removed": 2, "items": 2, "kept_with_overlap": 0}}
    rep = run_cli("report", out)
    assert rep.returncode == 0, rep.stderr
    page = (out / "report.html").read_text(encoding="utf-8")
    assert '<section id="contamination">' in page and "q6/question" in page and 'class="section-error"' not in page
    bad = run_cli("run", docs, "-o", tmp_path / "o2", "--decontaminate", tmp_path / "nope.jsonl")
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "nope.jsonl does not exist" in bad.stderr
