"""The one tokenizer: words for Latin, Cyrillic, Hangul; one word per Han character; one per kana run."""
import pyarrow as pa
from hypothesis import given, settings, strategies as st

from dataclean.text import lines_batch, split_words, words_batch


def test_english_words_without_punctuation_tokens():
    assert split_words("Don't stop — it's 2024, e.g. 3.5 apples!") == \
        ["Don't", "stop", "it's", "2024", "e", "g", "3", "5", "apples"]


def test_chinese_one_word_per_han_character():
    assert split_words("数据清洗很重要。") == ["数", "据", "清", "洗", "很", "重", "要"]
    assert split_words("GPT-4模型") == ["GPT", "4", "模", "型"]


def test_japanese_kana_runs_and_korean_blocks():
    assert split_words("ひらがなとカタカナの漢字テスト") == ["ひらがなと", "カタカナ", "の", "漢", "字", "テスト"]
    assert split_words("한국어 문장입니다.") == ["한국어", "문장입니다"]


def test_edge_cases():
    assert split_words("") == []
    assert split_words("🙂🙂 !!") == []
    assert split_words("'quoted' ''' x") == ["quoted", "x"]
    assert split_words("Привет, мир") == ["Привет", "мир"]
    assert split_words("naïve café") == ["naïve", "café"]


def test_batch_keeps_one_list_per_row_including_null_and_empty():
    out = words_batch(pa.array(["a b", None, "", "中文"]))
    assert out.to_pylist() == [["a", "b"], [], [], ["中", "文"]]


def test_lines():
    assert lines_batch(pa.array(["a\nb", "", "x\n"])).to_pylist() == [["a", "b"], [""], ["x", ""]]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(), max_size=8))
def test_any_unicode_gives_words_without_separators(texts):
    out = words_batch(pa.array(texts, pa.string())).to_pylist()
    assert len(out) == len(texts)
    for text, words in zip(texts, out):
        for w in words:
            assert w and not any(c.isspace() for c in w) and w[0] not in "'’" and w[-1] not in "'’"
            assert w in text
