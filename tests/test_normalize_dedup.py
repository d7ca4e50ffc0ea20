"""The first stages, on hand-written English and Chinese documents."""
import pyarrow as pa
import pytest

import dataclean
from dataclean.schema import DOC_SCHEMA

from conftest import REPO

FOUNDATION = REPO / "tests" / "configs" / "foundation.yaml"
from dataclean.stages import ExactDedup, Normalize, content_hash, content_key_text
from dataclean.tokens import estimate_tokens


def batch(*texts):
    return pa.RecordBatch.from_pydict({"text": list(texts)})


def test_normalize_english_composes_strips_controls_and_fixes_spaces():
    doc = "Cafe\u0301 menu\r\nSoup\u00a0of the day \t\n\n\n\n\nBread\x07\u200b"
    r = Normalize()(batch(doc))
    row = r.batch.to_pylist()[0]
    assert row["text"] == "Café menu\nSoup of the day\n\n\nBread"
    assert row["norm_form_changed"] is True
    assert row["norm_controls_removed"] == 2  # BEL and the zero-width space
    assert row["norm_spaces_fixed"] == 2  # the no-break space and the \r
    assert row["norm_chars_delta"] == len(doc) - len("Café menu\nSoup of the day\n\n\nBread")
    assert r.decisions is None


def test_normalize_chinese_keeps_ideographic_space_and_fullwidth_forms():
    doc = "数据清洗\u3000很重要。\r\nＡＢＣ１２３！"
    r = Normalize()(batch(doc))
    row = r.batch.to_pylist()[0]
    assert row["text"] == "数据清洗\u3000很重要。\nＡＢＣ１２３！"
    assert (row["norm_form_changed"], row["norm_controls_removed"], row["norm_spaces_fixed"]) == (False, 0, 1)


def test_normalize_nfkc_folds_fullwidth_when_asked():
    r = Normalize(form="NFKC")(batch("ＡＢＣ１２３！"))
    assert r.batch.column("text").to_pylist() == ["ABC123!"]


def test_normalize_removes_documents_empty_after_normalization():
    r = Normalize()(batch("ok", "  \u200b\r\n\t ", "", "中"))
    assert r.decisions.rule.to_pylist() == [None, "empty", "empty", None]
    assert r.decisions.reason.to_pylist() == [None, "empty_text", "empty_text", None]
    assert r.decisions.value.to_pylist() == [None, 0.0, 0.0, None]


def test_normalize_rejects_unknown_form():
    with pytest.raises(ValueError, match="NFC, NFKC"):
        Normalize(form="NFX")


@pytest.mark.parametrize("n", [-1, 999])
def test_normalize_rejects_blank_line_limits_the_regex_cannot_express(n):
    with pytest.raises(ValueError, match="between 0 and 998"):
        Normalize(max_blank_lines=n)
    assert Normalize(max_blank_lines=998).max_blank_lines == 998


def test_content_key_folds_case_and_whitespace_only():
    keys = content_key_text(pa.array(["Hello  World\n", "hello world", "Hello, world", "你好 \n 世界", "你好 世界"]))
    assert keys.to_pylist() == ["hello world", "hello world", "hello, world", "你好 世界", "你好 世界"]
    h = content_hash(pa.array(["Hello  World\n", "hello world", "Hello, world"])).to_pylist()
    assert h[0] == h[1] != h[2] and len(h[0]) == 16


def test_token_estimate_per_script():
    # 16 Latin bytes / 4.9 -> 3 tokens; 6 Han characters / 1.5 -> 4 tokens; mixed adds up (0.8 + 4); empty -> 0
    assert estimate_tokens(pa.array(["abcd efgh ijk lm", "数据清洗工具", "abcd数据清洗工具", ""])).to_pylist() == \
        [3, 4, 5, 0]


def _docs(rows):
    return pa.RecordBatch.from_pylist(
        [{"id": i, "text": t, "source": "web", "url": None, "lang": None, "meta": None, "origin_file": "f",
          "origin_row": n, "doc_key": n} for n, (i, t) in enumerate(rows)],
        schema=DOC_SCHEMA)


def test_pipeline_processes_a_batch_outside_any_run():
    pipe = dataclean.Pipeline([Normalize(), ExactDedup()])
    out = pipe.process(_docs([("a", "Hello  world"), ("b", " \t "), ("c", "数据 清洗")]))
    assert out.kept.column("id").to_pylist() == ["a", "c"]
    assert out.kept.column("text").to_pylist() == ["Hello  world", "数据 清洗"]  # inner spaces are text
    assert out.kept.column("n_chars").to_pylist() == [12, 5]
    gone = out.removed.to_pylist()
    assert [(g["id"], g["stage"], g["rule"], g["reason"], g["value"]) for g in gone] == \
        [("b", "normalize", "empty", "empty_text", 0.0)]
    assert gone[0]["norm_chars_delta"] == 3  # signals computed before removal travel with the ledger row


def test_pipeline_from_config_and_unknown_stage():
    cfg = dataclean.resolve_config()
    names = [s.name for s in dataclean.Pipeline.from_config(cfg).stages]
    assert names[0] == "normalize" and names[-3:] == ["exact_dedup", "minhash_dedup", "quality_filter"]
    with pytest.raises(dataclean.ConfigError, match="unknown stage 'gopher'"):
        dataclean.resolve_config({"pipeline": [{"stage": "gopher"}]})


def test_exact_dedup_removals_in_the_global_step(tmp_path):
    import pyarrow.parquet as pq
    rows = [("d3", "Same text.\n"), ("d1", "same   TEXT."), ("d2", "other"), ("z9", "相同的文本"), ("a0", "相同的文本 ")]
    pq.write_table(pa.Table.from_pylist([{"id": i, "text": t, "source": "web"} for i, t in rows]),
                   tmp_path / "in.parquet")
    summary = dataclean.run([str(tmp_path / "in.parquet")], str(tmp_path / "out"), config=str(FOUNDATION))
    assert (summary.input_records, summary.kept, summary.removed) == (5, 3, 2)
    gone = pq.read_table(tmp_path / "out" / "rejected").to_pylist()
    assert sorted((g["id"], g["dup_of"], g["value"]) for g in gone) == [("d3", "d1", 2.0), ("z9", "a0", 2.0)]
    kept = pq.read_table(tmp_path / "out" / "data").column("id").to_pylist()
    assert kept == ["d1", "d2", "a0"]  # input order is kept


def test_stage_applies_only_to_its_sources():
    stage = dataclean.build_stage({"stage": "normalize", "skip_sources": ["code"]})
    pipe = dataclean.Pipeline([stage])
    rows = pa.RecordBatch.from_pylist(
        [{"id": "a", "text": "x\u00a0y", "source": "web", "origin_file": "f", "origin_row": 0, "doc_key": 0},
         {"id": "b", "text": "  ", "source": "code", "origin_file": "f", "origin_row": 1, "doc_key": 1},
         {"id": "c", "text": " ", "source": "web", "origin_file": "f", "origin_row": 2, "doc_key": 2}],
        schema=DOC_SCHEMA)
    out = pipe.process(rows)
    assert out.kept.column("id").to_pylist() == ["a", "b"]
    assert out.kept.column("text").to_pylist() == ["x y", "  "]  # code passed through untouched
    assert out.kept.column("norm_spaces_fixed").to_pylist() == [1, None]
    assert out.removed.column("id").to_pylist() == ["c"]
    with pytest.raises(ValueError, match="skip_sources must be a list"):
        dataclean.build_stage({"stage": "normalize", "skip_sources": "code"})
