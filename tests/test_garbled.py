"""The garbled-text rules, on hand-written English, Chinese and Japanese documents."""
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataclean.stages.garbled import Garbled, scan_mojibake

SIGNALS = ["garbled_replacement_ratio", "garbled_mojibake_ratio", "garbled_control_ratio",
           "garbled_private_use_ratio", "garbled_unassigned_ratio", "garbled_mixed_script_ratio"]


def run(*texts, lang=None, **params):
    cols = {"text": list(texts)}
    if lang is not None:
        cols["lang"] = [lang] * len(texts)
    result = Garbled(**params)(pa.RecordBatch.from_pydict(cols))
    rows = result.batch.to_pylist()
    d = result.decisions
    fates = [(None, None, None)] * len(texts) if d is None else list(zip(
        d.rule.to_pylist(), d.value.to_pylist(), d.detail.to_pylist()))
    return rows, fates


def signals(row):
    return {k: v for k, v in row.items() if k.startswith("garbled_") and v}


# --- clean text passes -------------------------------------------------------------------------------------

@pytest.mark.parametrize("text", [
    "Clean English text, with punctuation. It's fine — really “fine”…",
    "数据清洗很重要，对吧？「是的」。全角：ＡＢＣ１２３！",
    "これは日本語の文章です。カタカナも含みます。",
    "使用Python编写的dataclean工具，支持Linux和macOS，速度快。",
    "這是Linux與Windows的設定說明：請選擇「開始」。",
    "Le café coûte 3\xa0€ «\xa0très cher\xa0». Er sagte »weiß« und ging.",
    "Привет, мир! Ελληνικά κείμενα. 한국어 API는 여기.",
    "", "one line", "no punctuation at all", "只有中文", "😀😂🎉",
])
def test_clean_text_has_no_signal_and_passes(text):
    rows, fates = run(text)
    assert signals(rows[0]) == {}
    assert fates[0] == (None, None, None)


# --- mojibake ----------------------------------------------------------------------------------------------

def test_utf8_read_as_cp1252_english():
    doc = "The cafÃ© on the cornerâ€™s menu is great."  # 42 characters, "Ã©" and "â€™" are mojibake
    rows, fates = run(doc)
    assert rows[0]["garbled_mojibake_chars"] == 5
    assert rows[0]["garbled_mojibake_ratio"] == 5 / 42
    assert fates[0] == ("garbled_mojibake", 5 / 42, "mojibake utf8-as-cp1252 at 7-9: 'Ã©' -> 'é'")


def test_french_and_german_typography_is_not_mojibake():
    # "é\xa0»" and "ß«" look like UTF-8 lead + continuation bytes read as cp1252, but round-trip to nothing
    # plausible (a CJK character in French text, a lone Arabic letter): no mojibake
    assert scan_mojibake("il a parlé\xa0» et »weiß« und Ø\xa0Różnorodność") == (0, None)


def test_chinese_utf8_read_as_gbk_is_found_between_replacement_characters():
    doc = "大家好，我是小明。".encode("utf-8").decode("gbk", errors="replace")
    assert doc == "澶у\ufffd跺ソ锛屾垜鏄\ufffd灏忔槑銆\ufffd"
    covered, first = scan_mojibake(doc)
    assert covered == 15
    assert first[:3] == (0, 15, "utf8-as-gbk")
    # decoded segment by segment between the U+FFFD, whose bytes are lost: "家", "是" and "。" are gone
    assert first[4] == "大\ufffd好，我\ufffd小明"
    rows, fates = run(doc)
    assert rows[0]["garbled_replacement_ratio"] == 3 / 15
    assert fates[0][0] == "garbled_replacement_chars"  # the first failing rule decides


def test_latin1_read_as_gbk_needs_three_characters_to_remove():
    rows, fates = run("Thanks, Anybody抯 deal is great", "Fahrl鋘der, P醖raig and Mich鑜 wrote")
    assert scan_mojibake("Thanks, Anybody抯 deal")[1] == (15, 16, "cp1252-as-gbk", "抯", "’s")
    assert rows[0]["garbled_mojibake_chars"] == 1 and fates[0][0] is None  # one broken apostrophe: kept
    assert rows[1]["garbled_mojibake_chars"] == 3
    assert fates[1][0] == "garbled_mojibake"


def test_shift_jis_read_as_gbk():
    rows, fates = run("傕傕偑偼偠偗偰傇偳偆偑備傟傞")
    assert rows[0]["garbled_mojibake_ratio"] == 1.0
    assert fates[0] == ("garbled_mojibake", 1.0,
                        "mojibake sjis-as-gbk at 0-14: '傕傕偑偼偠偗偰傇偳偆偑備傟傞' -> 'ももがはじけてぶどうがゆれる'")


def test_big5_read_as_gbk():
    doc = "不好意思打攪您！如果本廣告信對您產生困擾".encode("big5").decode("gb18030")
    covered, first = scan_mojibake(doc)
    assert covered == len(doc) and first[2] == "big5-as-gbk"
    assert first[4] == "不好意思打攪您！如果本廣告信對您產生困擾"


def test_repeated_rare_characters_are_not_big5_mojibake():
    # Weibo swearing: two distinct characters repeated are too little evidence for a Big5 reading
    assert scan_mojibake("艸艸艸靠靠靠fuckfuckfuck对面一个地方") == (0, None)


def test_fixed_gbk_patterns_and_iso2022jp():
    rows, fates = run("文件内容：锟斤拷锟斤拷", "$B$*@$OC$K$J$C$F$*$j$^$9!#(B", "好烫烫烫")
    assert rows[0]["garbled_mojibake_chars"] == 6
    assert fates[0] == ("garbled_mojibake", 6 / 11, "mojibake gbk-fffd at 5-11: '锟斤拷锟斤拷' -> '\ufffd\ufffd\ufffd\ufffd'")
    assert rows[1]["garbled_mojibake_chars"] == 28
    assert fates[1][2] == "mojibake iso2022jp-as-ascii at 0-28: '$B$*@$OC$K$J$C$F$*$j$^$9!#(B' -> 'お世話になっております。'"
    assert rows[2]["garbled_mojibake_chars"] == 0  # "烫烫烫" is three, the fill pattern needs four


# --- replacement, control, private-use, unassigned characters ----------------------------------------------

def test_replacement_characters():
    rows, fates = run("T\ufffd m\ufffd ag d\ufffdanamh taighde", "\ufffd 2002 Robin. All rights reserved here.")
    assert rows[0]["garbled_replacement_ratio"] == 3 / 24
    assert fates[0] == ("garbled_replacement_chars", 3 / 24, None)
    assert rows[1]["garbled_replacement_ratio"] == 1 / 39 and fates[1][0] is None  # one lost ©: kept


def test_c1_controls_from_cp1252_read_as_latin1():
    rows, fates = run("price \x806.50 \x85 and \x96 ok", "tab\tand\nnewline\r\nare fine")
    assert rows[0]["garbled_control_ratio"] == 3 / 22
    assert fates[0][0] == "garbled_control_chars"
    assert signals(rows[1]) == {}


def test_private_use_emoji_in_reviews_pass_but_private_use_junk_does_not():
    review = "裤子质量很好，也很合身，性价比比较高，值得购买!\ue00e\ue00e\ue00e\ue00e"  # carrier emoji
    rows, fates = run(review, "\ue000\ue001\ue002\ue003 junk")
    assert rows[0]["garbled_private_use_ratio"] == 4 / 28 and fates[0][0] is None
    assert rows[1]["garbled_private_use_ratio"] == 4 / 9
    assert fates[1] == ("garbled_private_use", 4 / 9, None)


def test_unassigned_code_points():
    rows, fates = run("\u0378\u0378\u0378abc", "\ufffeab")  # U+0378 is unassigned, U+FFFE a noncharacter
    assert rows[0]["garbled_unassigned_ratio"] == 0.5
    assert fates[0] == ("garbled_unassigned", 0.5, None)
    assert rows[1]["garbled_unassigned_ratio"] == 1 / 3 and fates[1][0] is None  # one is below min_bad_chars


# --- mixed scripts -----------------------------------------------------------------------------------------

def test_homoglyph_words():
    spam = "Yоur Аpple ID hаs bееn lоcked"  # Cyrillic о, А, а, е in Latin words
    rows, fates = run(spam, "The layer is 30μm thick and ΔH is small; ΔG too.")
    assert (rows[0]["garbled_mixed_script_words"], rows[0]["garbled_mixed_script_ratio"]) == (5, 5 / 6)
    assert fates[0] == ("garbled_mixed_script", 5 / 6, None)
    assert rows[1]["garbled_mixed_script_words"] == 3  # 30μm, ΔH, ΔG: mixed, but 3 of 11 words...
    assert rows[1]["garbled_mixed_script_ratio"] == 3 / 11
    assert fates[1][0] == "garbled_mixed_script"  # ...is a high share for so short a text


def test_han_between_latin_and_greek_does_not_make_a_mixed_word():
    rows, _ = run("室温下ε随温度变化 and X光α射线")
    assert rows[0]["garbled_mixed_script_words"] == 0


# --- thresholds --------------------------------------------------------------------------------------------

def test_by_lang_overrides_and_disabled_rules():
    doc = "傕傕偑偼偠偗偰傇偳偆偑備傟傞"
    _, fates = run(doc, lang="ja", by_lang={"ja": {"max_mojibake_ratio": 1.0}})
    assert fates[0][0] is None
    _, fates = run(doc, max_mojibake_ratio=None)
    assert fates[0][0] is None
    with pytest.raises(ValueError, match="unknown parameter"):
        Garbled(by_lang={"zh": {"max_nonsense": 1}})
    with pytest.raises(ValueError, match="between 0 and 1"):
        Garbled(max_replacement_ratio=2)


def test_null_text_and_batch_with_only_text():
    result = Garbled()(pa.RecordBatch.from_pydict({"text": pa.array([None, "ok"], pa.string())}))
    assert result.batch.column("garbled_mojibake_chars").to_pylist() == [0, 0]
    assert result.decisions is None


# --- property --------------------------------------------------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(st.lists(st.text(max_size=60), min_size=1, max_size=6))
def test_arbitrary_unicode_never_crashes_and_signals_stay_in_range(texts):
    rows, fates = run(*texts)
    for text, row in zip(texts, rows):
        for name in SIGNALS:
            assert 0.0 <= row[name] <= 1.0
        assert 0 <= row["garbled_mojibake_chars"] <= len(text)
        assert 0 <= row["garbled_mixed_script_words"]


def test_character_class_is_built_from_runs_of_code_points():
    import re

    import numpy as np
    import pyarrow.compute as pc

    from dataclean.text.chars import code_point_class

    assert code_point_class([0x43, 0x41, 0x42, 0x45, 0x41], "re2") == r"[\x{41}-\x{43}\x{45}]"
    assert code_point_class(range(0x4E00, 0x4E03), "py") == r"[\U00004e00-\U00004e02]"
    assert code_point_class(np.array([0x3000]), "re2") == r"[\x{3000}]"
    # no code points: a class that matches nothing, in both engines
    assert code_point_class([], "re2") == r"[^\x{0}-\x{10ffff}]"
    assert not pc.match_substring_regex(pa.array(["a", "中"]), code_point_class([])).to_pylist()[0]
    assert re.search(code_point_class([], "py"), "a 中") is None


def test_codec_table_from_disk_equals_a_fresh_build(tmp_path, monkeypatch):
    """The tables are read from the cache on disk after the first build: the same sets and patterns."""
    import numpy as np

    from dataclean.stages import garbled
    from dataclean.text import kernels

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(kernels, "_state", {})
    built = garbled._Tables()
    files = [p.name for p in tmp_path.iterdir()]
    assert len(files) == 1 and files[0].startswith("garbledtable-v1-")
    monkeypatch.setattr(kernels, "_state", {})
    loaded = garbled._Tables()
    assert np.array_equal(kernels.cached_table("garbled", files[0], lambda: None), garbled._codec_table())
    assert loaded.rare_re2 == built.rare_re2 and loaded.common_han == built.common_han
    assert loaded.gbk_span_py.pattern == built.gbk_span_py.pattern
    # a few members, by hand: 的 is common GB2312 Han, 䶵 (CJK extension A) is rare, 锟 is in GBK
    assert "的" in built.common_han and "䶵" not in built.common_han
    assert built.rare_py.search("䶵") and not built.rare_py.search("的")
    assert ord("锟") in built.gbk_cps and ord("é") not in built.gbk_cps
