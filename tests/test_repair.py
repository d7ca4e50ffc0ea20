"""Repair before judging: the normalize stage repairs mojibake and cp1252 punctuation left as C1 controls (ftfy),
and the garbled stage does not take a Latin i typed for і in Ukrainian/Belarusian for homoglyph spam. Exact
outputs on hand-written documents, alone and through the default pipeline."""
import re

import ftfy
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dataclean
from dataclean.schema import DOC_SCHEMA
from dataclean.stages import Normalize
from dataclean.stages.garbled import Garbled, latin_i_as_cyrillic
from dataclean.stages.normalize import (C1_IN_FOREIGN_TEXT, ENCODING_SUSPECT, ENCODING_SUSPECT_PY, ftfy_config,
                                        repair_lines)

from test_kernels import _same, _stage_outputs, both


def normalized(*texts, **params):
    rows = Normalize(**params)(pa.RecordBatch.from_pydict({"text": pa.array(list(texts), pa.string())})).batch
    return rows.column("text").to_pylist(), rows.column("norm_encoding_fixed").to_pylist()


# --- the normalize stage ------------------------------------------------------------------------------------

def test_cp1252_punctuation_in_c1_controls_is_repaired():
    text, fixed = normalized("Dans l\x92homme, des \x93guillemets\x94 \x96 et la suite\x85 pour \x806.50")
    assert text == ["Dans l’homme, des “guillemets” – et la suite… pour €6.50"]
    assert fixed == [1]


def test_utf8_read_as_cp1252_is_repaired():
    text, fixed = normalized("cafÃ© â€” naÃ¯ve", "It\u00e2\u20ac\u2122s ÃƒÂ©tÃƒÂ©", "Ã‰cole ZdzisÅ‚aw ÄŒeskÃ½",
                             "Ð¿Ñ€Ð¸Ð²ÐµÑ‚ Ð¼Ð¸Ñ€", "РџСЂРёРІРµС‚ РјРёСЂ")
    assert text == ["café — naïve", "It’s été", "École Zdzisław Český", "привет мир", "Привет мир"]
    assert fixed == [1, 1, 1, 1, 1]


def test_chinese_utf8_read_as_cp1252_is_repaired_but_not_read_as_gbk():
    as_cp1252 = "大家好，欢迎光临".encode("utf-8").decode("cp1252", errors="ignore")  # ftfy undoes single-byte codecs
    as_latin1 = "你好世界".encode("utf-8").decode("latin-1")  # (with C1 controls: 世 is E4 B8 96)
    as_gbk = "发送成功".encode("utf-8").decode("gbk", errors="replace")  # 鍙戦€佹垚鍔: not ftfy's; garbled removes it
    text, fixed = normalized(as_cp1252, as_latin1, as_gbk)
    assert as_cp1252 == "å¤§å®¶å¥½ï¼Œæ¬¢è¿Žå…‰ä¸´"
    assert text == ["大家好，欢迎光临", "你好世界", as_gbk]
    assert fixed == [1, 1, 0]


CLEAN = [
    "Clean English text, with punctuation. It's fine — really “fine”… 5 € ™ ‘ok’",
    "数据清洗很重要，对吧？「是的」。全角：ＡＢＣ１２３！",
    "Emoji 😀😂🎉 and ❤️ and 👩‍👩‍👧",
    "SÃO PAULO E MAÇÃ VERDE; A IRMÃ MAIS VELHA; NÃO ESTÁ",  # Portuguese capital Ã, as it is
    "Tiếng Việt rất đẹp: Hà Nội, Đà Nẵng, Huế.",
    "Ørsted, Þórr, Ðað, ÆØÅ, «Ça va?» — Größe, Fußball, „Hauptstraße“",
    "Le café coûte 3\xa0€ «\xa0très cher\xa0» : c'est déjà ça\xa0! ÉTÉ\xa0: à\xa0la ligne",
    "&amp; <b>HTML</b> stays, so do ﬁ ligatures and ＡＢ full width",
    "Сіль і хліб, Рівне, Київ. Привет, мир!",
]


@pytest.mark.parametrize("text", CLEAN)
def test_clean_text_is_never_changed(text):
    # (remove_controls would drop the zero-width joiners of the family emoji: that is the control rule, not the repair)
    assert normalized(text, form="none", fix_spaces=False, remove_controls=False) == ([text], [0])
    assert repair_lines(text) == text


def test_c1_controls_inside_broken_cjk_text_are_not_made_to_look_like_punctuation():
    broken = "水平对齐蟀¨格。LibreOffice 自动计®\x97表格的宽度。\n相关主题 冀\x9b建 GIF 活动\x99\x80¾像\n"
    assert normalized(broken, fix_spaces=False) == ([broken], [0])  # (garbled judges it, as before)
    assert normalized("他说 \x93ok\x94 ok\n中文", fix_spaces=False) == (["他说 “ok” ok\n中文"], [1])


def test_fix_encoding_false_leaves_it_to_garbled():
    assert normalized("cafÃ© l\x92homme", fix_encoding=False) == (["cafÃ© l\x92homme"], [0])


def test_repair_runs_before_control_removal_and_nfc_and_counts_chars_saved():
    rows = Normalize()(pa.RecordBatch.from_pydict({"text": ["cafÃ©\x07 e\u0301 \x93x\x94"]})).batch.to_pylist()[0]
    assert rows["text"] == "café é “x”"
    assert (rows["norm_encoding_fixed"], rows["norm_controls_removed"], rows["norm_form_changed"]) == (1, 1, True)
    assert rows["norm_chars_delta"] == 3  # Ã© -> é, the BEL, e + U+0301 -> é


def test_only_suspect_lines_go_through_ftfy_and_give_what_ftfy_gives():
    doc = "first line\ncafÃ© here\n\nclean line\n\x93quoted\x94 line\nlast Ã©"
    assert repair_lines(doc) == ftfy.fix_text(doc, ftfy_config()) == \
        "first line\ncafé here\n\nclean line\n“quoted” line\nlast é"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(list("aé Ã©â€™\x92\x93\x94\x85ÂРСџЂ\xa0\n中😀ÉÀ") + ["Ã©", "â€™", "РџСЂ"]),
                max_size=30).map("".join))
def test_prefilters_agree_and_suspect_lines_get_what_ftfy_gives(text):
    assert bool(ENCODING_SUSPECT_PY.search(text)) == \
        pa.compute.match_substring_regex(pa.array([text]), ENCODING_SUSPECT)[0].as_py()
    lines = re.findall(r"[^\n]*\n|[^\n]+", text)  # what ftfy fixes one by one
    assert repair_lines(text) == "".join(
        ftfy.fix_text(x, ftfy_config()) if ENCODING_SUSPECT_PY.search(x) and not C1_IN_FOREIGN_TEXT.search(x) else x
        for x in lines)


REPAIR_TRICKY = ["cafÃ© ", "â€™", "\x92", "\x93x\x94", "Ã", "Â\xa0", "\r\n", "e\u0301", "\x00", "\u200b", " \n", "中文",
                 "\u0085", "\n\n\n\n", "РџСЂРёРІРµС‚", "\u00a0"]


@pytest.mark.parametrize("options", [dict(), dict(form="NFKC", max_blank_lines=0), dict(form="none"),
                                     dict(fix_encoding=False)])
@settings(max_examples=40, deadline=None)
@given(texts=st.lists(st.lists(st.sampled_from(REPAIR_TRICKY), max_size=12).map("".join), min_size=1, max_size=5))
def test_kernel_and_pyarrow_paths_agree_with_repair(options, texts):
    batch = pa.RecordBatch.from_pydict({"text": pa.array(texts, pa.string())})
    (b_on, d_on), (b_off, d_off) = both(lambda: _stage_outputs(Normalize(**options), batch))
    assert b_on.schema == b_off.schema
    for name in b_on.schema.names:
        assert _same(b_on.column(name), b_off.column(name)), (name, texts)
    for x, y in zip(d_on, d_off):
        assert _same(x, y), texts


# --- Latin i in Ukrainian and Belarusian -------------------------------------------------------------------

UK = ("Київ \u2014 столиця України i найбiльше мiсто країни. Мiсто розташоване на рiчцi Днiпро i має довгу iсторiю. "
      "Тут багато музеїв, театрiв, парків i старовинних церков. Щороку до Києва приїжджають тисячi туристiв з рiзних "
      "країн свiту, щоб побачити Софiйський собор, Києво-Печерську лавру i Хрещатик. Мешканцi мiста дуже люблять "
      "гуляти набережною, вiдпочивати в парках i пити каву в затишних кав'ярнях. Навеснi в мiстi цвiтуть каштани, "
      "i це найкрасивiший час року. Київ також є важливим центром науки, освiти i культури.")
RU_SPAM = ("Пoздрaвляем! Вы выигрaли глaвный приз нaшей лoтереи. Чтoбы пoлучить вaш пoдaрoк, нaжмите нa ссылку и "
           "введите дaнные вaшей кaрты. Предлoжение действует тoлькo сегoдня, не упустите свoй шaнс! Тысячи людей уже "
           "пoлучили свoи деньги. Мы гaрaнтируем пoлную безoпaснoсть и кoнфиденциaльнoсть вaших дaнных. Oтветьте нa "
           "этo письмo, и нaш менеджер свяжется с вaми в течение чaсa. Спешите, кoличествo призoв oгрaниченo!")


def garbled(texts, langs, **params):
    out = Garbled(**params)(pa.RecordBatch.from_pydict({"text": texts, "lang": langs}))
    rules = [None] * len(texts) if out.decisions is None else out.decisions.rule.to_pylist()
    return out.batch.column("garbled_mixed_script_words").to_pylist(), rules


def test_latin_i_in_cyrillic_words_is_not_mixed_for_uk_and_be():
    short = "Мiсто на рiчцi, вiн тут. Iсторiя"  # 4 Cyrillic words with a Latin i
    assert garbled([short, short, short, short], ["uk", "be", "ru", None]) == \
        ([0, 0, 4, 4], [None, None, "garbled_mixed_script", "garbled_mixed_script"])
    assert garbled([short], ["uk"], cyrillic_latin_i_langs=[]) == ([4], ["garbled_mixed_script"])


def test_latin_i_next_to_a_uk_letter_is_not_mixed_in_any_language():
    doc = "Київ i Їжак: Київська, приїзд, Європейськiй, ґанок, ўзiмку"  # Latin i in words with ї, є, ў
    assert garbled([doc, doc], ["ru", None]) == ([0, 0], [None, None])
    assert latin_i_as_cyrillic("Європейськiй iPhone Мiсто", False) == "Європейськ\u0456й iPhone Мiсто"
    assert latin_i_as_cyrillic("Європейськiй iPhone Мiсто", True) == "Європейськ\u0456й iPhone М\u0456сто"


def test_other_homoglyphs_still_count_in_uk():
    doc = "Вiтаємо! Ви вигрaли приз, нaтиснiть нa пoсилання i введiть дaнi кaрти"  # Latin a, o as well
    words, rules = garbled([doc], ["uk"])
    assert words == [6]  # вигрaли нaтиснiть нa пoсилання дaнi кaрти; not Вiтаємо, введiть
    assert rules == ["garbled_mixed_script"]
    assert garbled(["Рaypal Microsoftом iPhoneом"], ["uk"])[0] == [3]  # Latin words with Cyrillic still mix


# --- the default pipeline -----------------------------------------------------------------------------------

FR = ("Dans ce livre, l\x92auteur raconte l\x92histoire de l\x92homme qui voulait changer le monde. Il parle des "
      "\x93guillemets\x94 et des règles de la typographie française, qui sont souvent oubliées par les éditeurs. "
      "Le premier chapitre explique pourquoi les anciens imprimeurs utilisaient des caractères en plomb \x96 un "
      "travail long et difficile. Le deuxième chapitre décrit la vie quotidienne des ouvriers dans les ateliers de "
      "Paris au dix-neuvième siècle. Enfin, le dernier chapitre montre comment les ordinateurs ont transformé ce "
      "métier en quelques années seulement\x85 Les lecteurs apprécient beaucoup ce livre passionnant.")
MOJI = ("Au cafÃ© â€” naÃ¯ve et charmant â€” nous avons bu un thÃ© trÃ¨s chaud avec nos amis. Le serveur Ã©tait "
        "trÃ¨s gentil et il nous a expliquÃ© l\u2019histoire du quartier. Nous sommes restÃ©s longtemps Ã  parler de "
        "la vie, des voyages et des livres que nous avions lus pendant l\u2019Ã©tÃ©. Ensuite nous sommes allÃ©s au "
        "marchÃ© pour acheter des fruits, du pain et du fromage. Le soir, nous avons prÃ©parÃ© un dÃ®ner simple mais "
        "dÃ©licieux, et nous avons regardÃ© un film ensemble. C\u2019Ã©tait une trÃ¨s belle journÃ©e pour tout le monde.")


def _docs(rows):
    return pa.RecordBatch.from_pylist(
        [{"id": i, "text": t, "source": "web", "url": None, "lang": None, "meta": None, "origin_file": "f",
          "origin_row": n, "doc_key": n} for n, (i, t) in enumerate(rows)], schema=DOC_SCHEMA)


def _pipeline(old=False):
    cfg = dataclean.resolve_config()
    if old:  # what the default pipeline did before: no repair, Latin i counted as a homoglyph everywhere
        off = {"normalize": {"fix_encoding": False}, "garbled": {"cyrillic_latin_i_langs": []}}
        cfg = dataclean.resolve_config({"pipeline": [{**s, **off.get(s["stage"], {})} for s in cfg["pipeline"]]})
    return dataclean.Pipeline.from_config(cfg)


def test_default_pipeline_repairs_and_keeps_what_it_used_to_remove():
    docs = _docs([("fr", FR), ("moji", MOJI), ("uk", UK), ("ru", RU_SPAM)])
    out = _pipeline().process(docs)
    kept = {r["id"]: r for r in out.kept.to_pylist()}
    assert sorted(kept) == ["fr", "moji", "uk"]
    assert kept["fr"]["text"] == FR.replace("\x92", "’").replace("\x93", "“").replace("\x94", "”") \
        .replace("\x96", "–").replace("\x85", "…")
    assert "l’homme" in kept["fr"]["text"] and "“guillemets”" in kept["fr"]["text"]
    assert kept["moji"]["text"].startswith("Au café — naïve et charmant — nous avons bu un thé très chaud")
    assert "Ã" not in kept["moji"]["text"] and "â€" not in kept["moji"]["text"]
    assert (kept["fr"]["norm_encoding_fixed"], kept["moji"]["norm_encoding_fixed"]) == (1, 1)
    assert (kept["uk"]["lang"], kept["uk"]["garbled_mixed_script_words"], kept["uk"]["text"]) == ("uk", 0, UK)
    gone = out.removed.to_pylist()
    assert [(g["id"], g["lang"], g["stage"], g["rule"]) for g in gone] == \
        [("ru", "ru", "garbled", "garbled_mixed_script")]
    assert gone[0]["norm_encoding_fixed"] == 0

    before = _pipeline(old=True).process(docs)
    assert before.kept.num_rows == 0
    assert sorted((g["id"], g["rule"]) for g in before.removed.to_pylist()) == [
        ("fr", "garbled_control_chars"), ("moji", "garbled_mojibake"), ("ru", "garbled_mixed_script"),
        ("uk", "garbled_mixed_script")]
