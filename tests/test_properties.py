"""Properties over arbitrary Unicode: the tokenizer, every stage of the default pipeline (rules/default.yaml,
built the way a run builds it) and the three quality scorers never crash, keep one row per document, and
keep every numeric signal in its documented range.

Ranges (from the stage docstrings): a ``*_ratio`` / ``*_frac`` / ``*_share`` / ``*_score`` is in [0, 1],
except the per-word rates below, which are >= 0; an integer count or length is >= 0, except
``norm_chars_delta`` (characters removed by normalize: NFC can also *add* characters, e.g. U+0958 becomes two);
``gopher_mean_word_length`` and ``q_mean_word_length`` are >= 0. No signal is NaN or infinite; a signal may
be null only where listed in ``MAY_BE_NULL``.
"""
from __future__ import annotations

import math

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataclean.config import resolve_config
from dataclean.pipeline import Pipeline, build_stage
from dataclean.stages import REGISTRY
from dataclean.stages.quality import QualityScore
from dataclean.text.tokenize import lines_batch, split_words, words_batch

#: Rates per word (or per 1,000 Han characters) that the docstrings document as >= 0, without an upper bound.
NONNEGATIVE = {"gopher_hash_ratio", "gopher_ellipsis_ratio", "fineweb_newline_ratio", "seo_url_per_word",
               "seo_email_per_word", "seo_zh_spam_per_1k_han", "gopher_mean_word_length", "q_mean_word_length",
               "q_mean_line_chars", "q_words_per_sentence"}
SIGNED = {"norm_chars_delta"}
#: Signals that are null by design for some rows: no second language, no declared language, no list for the
#: row's language (word_lists), no URL column; the heuristic scorer's documented nulls.
MAY_BE_NULL = {"lang2", "lang2_score", "lang_declared", "runs_kind", "lists_blocked_host", "minhash_sig",
               "minhash_bands", "lists_bad_words", "lists_bad_word_ratio", "lists_url_blocked",
               "lists_blocked_hosts",
               "q_stop_word_frac", "q_mean_word_length"}  # heuristic scorer: no stop list / no non-CJK word

SETTINGS = settings(max_examples=40, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

# -- strategies -------------------------------------------------------------------------------------------

any_char = st.characters(blacklist_categories=("Cs",))  # every category but surrogates (not UTF-8)
cjk = st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF)
kana = st.characters(min_codepoint=0x3041, max_codepoint=0x30FF)
emoji = st.sampled_from(["\U0001F600", "\U0001F44D\U0001F3FD", "\U0001F468\u200d\U0001F469\u200d\U0001F467",
                         "\u2764\ufe0f", "\U0001F1EB\U0001F1F7"])
control = st.characters(max_codepoint=0x1F) | st.sampled_from(["\x7f", "\x85", "\u200b", "\ufeff", "\u2028",
                                                               "\ufffd", "\ue000", "\U000e0001"])
ascii_prose = st.sampled_from(["the ", "cat ", "sat. ", "on ", "a mat, ", "don't ", "\n", "\n\n", "- ", "# ",
                               "... ", "http://x.example/a ", "me@x.example ", "{", "lorem ipsum "])
piece = st.one_of(st.text(any_char, max_size=40), st.text(cjk | kana, max_size=40), emoji,
                  st.text(control, max_size=5), ascii_prose,
                  st.builds(lambda c, n: c * n, any_char | st.sampled_from("a -\n。"), st.integers(100, 5000)))
document = st.lists(piece, max_size=12).map("".join)
langs = st.sampled_from(["en", "zh", "ja", "ru", None])
batches = st.lists(st.tuples(document, langs), min_size=1, max_size=4)


def record_batch(docs: list[tuple[str, str | None]]) -> pa.RecordBatch:
    return pa.RecordBatch.from_pydict({"text": pa.array([d for d, _ in docs], pa.string()),
                                       "lang": pa.array([lang for _, lang in docs], pa.string()),
                                       "source": pa.array(["web"] * len(docs), pa.string())})


# -- the tokenizer --------------------------------------------------------------------------------------


@SETTINGS
@given(st.lists(document, min_size=1, max_size=4))
def test_tokenizer_never_crashes_and_yields_real_words(texts):
    arr = pa.array(texts, pa.string())
    words = words_batch(arr)
    assert len(words) == len(texts)
    for text, ws in zip(texts, words.to_pylist()):
        assert ws == split_words(text)
        for w in ws:
            assert w and not any(ch.isspace() for ch in w) and w.strip("'’") == w
    lines = lines_batch(arr)
    assert [len(ls) for ls in lines.to_pylist()] == [t.count("\n") + 1 for t in texts]


# -- every stage of the default pipeline ----------------------------------------------------------------


def default_stages():
    return [build_stage(spec) for spec in resolve_config(None)["pipeline"]]


STAGES = {s.name: s for s in default_stages()}


def assert_signals_in_range(stage_name: str, batch: pa.RecordBatch, fields: list[pa.Field]) -> None:
    for field in fields:
        assert field.name in batch.schema.names, (stage_name, field.name)
        col = batch.column(field.name)
        assert len(col) == batch.num_rows
        if field.name not in MAY_BE_NULL:
            assert col.null_count == 0, (stage_name, field.name)
        t = col.type
        if not (pa.types.is_integer(t) or pa.types.is_floating(t)):
            continue
        values = np.asarray(col.to_numpy(zero_copy_only=False), dtype=np.float64)
        values = values[~np.isnan(values)] if col.null_count else values
        assert np.isfinite(values).all(), (stage_name, field.name, values)
        if field.name in SIGNED:
            continue
        assert (values >= 0).all(), (stage_name, field.name, values)
        if pa.types.is_floating(t) and field.name not in NONNEGATIVE:
            assert (values <= 1.0 + 1e-9).all(), (stage_name, field.name, values)


def assert_decisions(stage_name: str, result, n: int) -> None:
    d = result.decisions
    if d is None:
        return
    assert len(d.removed) == n
    value = d.value.to_numpy(zero_copy_only=False)
    removed = d.removed.to_numpy(zero_copy_only=False)
    for i in np.flatnonzero(removed):
        assert d.rule[i].as_py() and d.reason[i].as_py(), stage_name
        v = value[i]
        assert v is None or not (isinstance(v, float) and math.isinf(v)), (stage_name, v)


@pytest.mark.parametrize("name", list(STAGES))
@SETTINGS
@given(docs=batches)
def test_stage_never_crashes_and_signals_stay_in_range(name, docs):
    stage = STAGES[name]
    batch = record_batch(docs)
    result = stage(batch)
    assert result.batch.num_rows == len(docs)
    assert_signals_in_range(name, result.batch, stage.signal_fields)
    assert_decisions(name, result, len(docs))


@SETTINGS
@given(docs=batches)
def test_whole_default_pipeline_accounts_for_every_document(docs):
    pipe = Pipeline(list(STAGES.values()))
    batch = record_batch(docs)
    batch = pa.RecordBatch.from_pydict({
        "id": [f"d{i}" for i in range(len(docs))], **{c: batch.column(c) for c in batch.schema.names},
        "origin_row": list(range(len(docs)))})
    out = pipe.process(batch)
    assert out.kept.num_rows + out.removed.num_rows == len(docs)
    assert sorted(out.kept.column("id").to_pylist() + out.removed.column("id").to_pylist()) == \
        sorted(f"d{i}" for i in range(len(docs)))


# -- the quality scorers --------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def linear_model(tmp_path_factory):
    from dataclean.quality.linear import train

    good = ["The library opens at nine and closes at six on weekdays.", "我们明天去图书馆看书。",
            "Please read the installation guide before you start."] * 4
    bad = ["buy cheap pills now click here!!!", "$$$ win win win $$$", "免费 赌博 点击 这里"] * 4
    model, _ = train(good, bad, max_iter=50)
    path = tmp_path_factory.mktemp("linear") / "model.npz"
    model.save(path)
    return str(path)


def scorer_stages(linear_path: str) -> list[QualityScore]:
    from dataclean.stages.langid import bundled_model_resource

    REGISTRY.setdefault(QualityScore.kind, QualityScore)
    return [QualityScore(scorer="heuristic"), QualityScore(scorer="linear", model_path=linear_path),
            QualityScore(scorer="fasttext", model_path=str(bundled_model_resource()),
                         positive_label="__label__en", split_cjk=True)]


def test_quality_scorers_stay_in_range(linear_model):
    stages = scorer_stages(linear_model)

    @SETTINGS
    @given(docs=batches)
    def check(docs):
        batch = record_batch(docs)
        for stage in stages:
            result = stage(batch)
            assert result.decisions is None  # scoring removes nothing
            assert_signals_in_range(f"quality_score/{stage.scorer}", result.batch, stage.signal_fields)

    check()
