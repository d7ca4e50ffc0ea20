"""Script folding in dedup (``fold_scripts``): the 简体 and 繁體 copies of one text are duplicates."""
import json

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import run_cli, with_kernels

import dataclean
from dataclean.config import ConfigError
from dataclean.dedup import minhash as mh
from dataclean.stages.dedup_exact import ExactDedup, content_hash, content_key_text
from dataclean.stages.dedup_minhash import MinHashDedup
from dataclean.text import script_fold

# the same paragraph in simplified characters and in Taiwan's traditional ones, with Taiwanese vocabulary:
# 軟體/软件, 檔案/文件, 資料庫/数据库, 程式/程序, 支援/支持, 使用者/用户 are words, not characters
SIMP = ("我们的软件可以帮助你管理文件和数据库。这个程序支持多种语言，运行速度很快，而且完全免费。"
        "欢迎下载使用，如有问题请联系我们的客服团队。我们每个月都会发布新版本，修复已知的错误并加入用户建议的新功能。")
TRAD = ("我們的軟體可以幫助你管理檔案和資料庫。這個程式支援多種語言，運行速度很快，而且完全免費。"
        "歡迎下載使用，如有問題請聯繫我們的客服團隊。我們每個月都會發佈新版本，修復已知的錯誤並加入使用者建議的新功能。")
# the traditional copy with one more sentence: a near duplicate, not an exact one
TRAD_MORE = TRAD + "下載前請先閱讀授權條款。"
# a paragraph whose two versions differ character by character only
SIMP_CHARS = "这个问题很简单，我们明天再讨论。请大家准备好会议的文稿，并且提前阅读上次的记录。"
TRAD_CHARS = "這個問題很簡單，我們明天再討論。請大家準備好會議的文稿，並且提前閱讀上次的記錄。"
# unrelated traditional text of the same length
OTHER_TRAD = ("臺北的夜市非常熱鬧，每天晚上都有許多觀光客來品嚐各種小吃，例如蚵仔煎、珍珠奶茶和臭豆腐。"
              "攤販們從傍晚開始準備，一直營業到深夜，讓人感受到這座城市獨特的活力與人情味。")
JA = "日本語の文章を書きます。東京の天気は晴れです。"
EN = ("The harbour town sits at the mouth of a slow green river where fishing boats have landed their catch "
      "for three hundred years and the market opens before dawn every day of the week.")


def test_fold_mode_names():
    assert [script_fold.fold_mode(v) for v in (True, False, "phrases", "characters", "off")] == [
        "phrases", "off", "phrases", "characters", "off"]
    for bad in ("yes", None, 1, "Phrases"):
        with pytest.raises(ValueError, match=r"^fold_scripts must be phrases, characters or off "
                                             r"\(true = phrases, false = off\), got "):
            script_fold.fold_mode(bad)
    assert ExactDedup().fold_scripts == "phrases" and MinHashDedup().fold_scripts == "phrases"  # on by default
    assert ExactDedup(fold_scripts=False).fold_scripts == "off"
    assert MinHashDedup(fold_scripts="characters").params()["fold_scripts"] == "characters"
    with pytest.raises(ValueError, match=r"^exact_dedup.fold_scripts must be phrases, characters or off .*"
                                         r"got 'maybe'$"):
        ExactDedup(fold_scripts="maybe")


def test_bad_fold_scripts_is_one_config_error():
    with pytest.raises(ConfigError) as err:
        dataclean.resolve_config({"pipeline": [{"stage": "minhash_dedup", "fold_scripts": "tw2sp"}]})
    assert str(err.value) == ("pipeline[0]: minhash_dedup.fold_scripts must be phrases, characters or off "
                              "(true = phrases, false = off), got 'tw2sp'")


def test_traditional_documents_are_counted_and_found():
    # 33 traditional-only characters in TRAD (們軟體幫檔資庫這個種語運費歡載問題請聯繫們團隊們個會發佈復錯誤並議);
    # JA: 語書東 and 10 kana; a simplified text quoting 這: 這 against 这个软; 後 alone
    texts = pa.array([SIMP, TRAD, JA, EN, "这个软件很好用，這是真的", "後"], pa.string())
    n_trad, n_other = script_fold.script_counts(texts)
    assert n_trad.tolist() == [0, 33, 3, 0, 1, 1]
    assert n_other.tolist() == [0, 0, 10, 0, 3, 0]  # (counted only where there is a traditional character)
    # more traditional-only characters than simplified-only ones and kana together
    assert script_fold.traditional(n_trad, n_other).tolist() == [False, True, False, False, False, True]


def test_content_key_folds_the_traditional_copy():
    keys = {mode: content_key_text(pa.array([SIMP, TRAD, SIMP_CHARS, TRAD_CHARS]), mode).to_pylist()
            for mode in script_fold.FOLD_MODES}
    assert keys["off"] == [SIMP, TRAD, SIMP_CHARS, TRAD_CHARS]
    # characters: the character-level pair meets, the vocabulary does not
    assert keys["characters"][2] == keys["characters"][3] == SIMP_CHARS
    assert keys["characters"][1] == ("我们的软体可以帮助你管理档案和资料库。这个程式支援多种语言，运行速度很快，而且完全免费。"
                                     "欢迎下载使用，如有问题请联系我们的客服团队。我们每个月都会发布新版本，修复已知的错误并加入"
                                     "使用者建议的新功能。")
    # phrases: OpenCC tw2sp on the traditional document, so the Taiwanese words become the mainland ones
    assert keys["phrases"] == [SIMP, SIMP, SIMP_CHARS, SIMP_CHARS]
    # the price of phrases: a Taiwanese reading of a word the simplified text meant otherwise (資料: materials
    # in 会议的资料, data in Taiwan's 資料庫) keeps a character-level copy apart where "characters" joins it
    pair = pa.array(["会议的资料", "會議的資料"])
    assert content_key_text(pair, "phrases").to_pylist() == ["会议的资料", "会议的数据"]
    assert content_key_text(pair, "characters").to_pylist() == ["会议的资料", "会议的资料"]
    h = content_hash(pa.array([SIMP, TRAD, OTHER_TRAD]), "phrases").to_pylist()
    assert h[0] == h[1] != h[2]
    assert content_hash(pa.array([SIMP, TRAD]), "off").to_pylist()[0] != content_hash(pa.array([TRAD])).to_pylist()[0]


def test_shingle_text_folds_after_normalizing():
    texts = pa.array(["軟體「檔案」2024年", "软件 文件 0000年", "ＡＢＣ 資料庫", "程序和文件", "日本語の資料を読みました"])
    assert mh.shingle_text(texts).to_pylist() == ["軟體 檔案 0000年", "软件 文件 0000年", "abc 資料庫", "程序和文件",
                                                 "日本語の資料を読みました"]
    assert mh.shingle_text(texts, "characters").to_pylist() == ["软体 档案 0000年", "软件 文件 0000年", "abc 资料库",
                                                               "程序和文件", "日本语の资料を読みました"]
    # tw2sp only where the text is traditional: 程序 and 文件 of a simplified text are not read as Taiwanese
    # words (进程, 文档), nor 資料 of a Japanese one (数据: its kana outnumber 語 and 資)
    assert mh.shingle_text(texts, "phrases").to_pylist() == ["软件 文件 0000年", "软件 文件 0000年", "abc 数据库",
                                                            "程序和文件", "日本语の资料を読みました"]


TEXTS = [SIMP, TRAD, TRAD_MORE, SIMP_CHARS, TRAD_CHARS, OTHER_TRAD, JA, EN, "", "  這個\n\n  資料庫  ", "ﾃｽﾄ語 ｶﾀｶﾅ",
         "豈更車 兀 (compatibility ideographs)", "𠮷野家 後來 𤋮", "Ünïcödé ＦＵＬＬ 這個 e\u0301", "著名的作品，乾隆年間",
         "\u200b軟\u00ad體\ufeff", "軟體" * 500]


@pytest.mark.parametrize("mode", script_fold.FOLD_MODES)
def test_kernel_and_arrow_paths_fold_alike(mode):
    texts = pa.array(TEXTS, pa.string())

    def both():
        return (mh.shingle_text(texts, mode).to_pylist(), content_key_text(texts, mode).to_pylist(),
                mh.shingle_hashes(mh.shingle_text(texts, mode))[0].tolist())

    compiled, arrow = with_kernels("1", both), with_kernels("0", both)
    assert compiled == arrow
    if mode == "phrases":
        assert compiled[0][1] == compiled[0][0] == mh.shingle_text(pa.array([SIMP]))[0].as_py()


def test_kernel_counts_equal_the_arrow_counts():
    if not with_kernels("1", mh.kernels_enabled):
        pytest.skip("numba is not installed")
    texts = pa.array(TEXTS, pa.string())
    k = with_kernels("1", mh.mh_kernels)
    for mode in (k.MODE_SHINGLE, k.MODE_CONTENT_KEY):
        folded, counts = with_kernels("1", lambda: mh._map_text_kernel(texts, mode, mode == k.MODE_SHINGLE, True))
        plain, _ = with_kernels("1", lambda: mh._map_text_kernel(texts, mode, mode == k.MODE_SHINGLE, False))
        n_trad, n_other = script_fold.script_counts(plain)
        has = n_trad > 0  # (script_counts counts the others only where there is a traditional character)
        assert counts[:, 0].tolist() == n_trad.tolist()
        assert counts[has, 1].tolist() == n_other[has].tolist()
        assert folded.to_pylist() == script_fold.fold_t2s(plain).to_pylist()


def run_dedup(tmp_path, rows, fold=None, name="out", against=None, rejected_text=False):
    path = tmp_path / f"{name}.parquet"
    pq.write_table(pa.Table.from_pylist([{"id": i, "text": t, "source": "web"} for i, t in rows]), path)
    extra = {} if fold is None else {"fold_scripts": fold}
    cfg = {"pipeline": [{"stage": "normalize"}, {"stage": "exact_dedup", **extra}, {"stage": "minhash_dedup", **extra}]}
    out = tmp_path / name
    summary = dataclean.run([str(path)], str(out), config=dataclean.resolve_config(cfg), dedup_against=against)
    assert summary.verified
    return out


def removed(out):
    return sorted((r["id"], r["rule"], r["dup_of"], round(r["value"], 4))
                  for r in pq.read_table(out / "rejected").to_pylist())


DOCS = [("a-simp", SIMP), ("b-trad", TRAD), ("c-trad-more", TRAD_MORE), ("d-other", OTHER_TRAD),
        ("e-simp-chars", SIMP_CHARS), ("f-trad-chars", TRAD_CHARS), ("g-en", EN)]


def jaccard(a, b, mode):
    x, y = (set(mh.shingle_hash_single(t)) for t in mh.shingle_text(pa.array([a, b]), mode).to_pylist())
    return len(x & y) / len(x | y)


def test_traditional_copies_are_duplicates_by_default(tmp_path):
    out = run_dedup(tmp_path, DOCS)
    j = jaccard(SIMP, TRAD_MORE, "phrases")
    assert j == 86 / 97  # (SIMP's 86 shingles, and 11 of the added sentence)
    assert removed(out) == [
        # one sentence more: a near duplicate, and the longer text is the cluster's representative
        ("a-simp", "near_duplicate", "c-trad-more", round(j, 4)),
        ("b-trad", "exact_duplicate", "a-simp", 2.0),            # the same text once folded: smallest id kept
        ("f-trad-chars", "exact_duplicate", "e-simp-chars", 2.0),
    ]
    # what the outputs hold is the documents' own text and id, not the folded key
    kept = pq.read_table(out / "data", columns=["id", "text"]).to_pylist()
    assert {r["id"]: r["text"] for r in kept} == {"c-trad-more": TRAD_MORE, "d-other": OTHER_TRAD,
                                                   "e-simp-chars": SIMP_CHARS, "g-en": EN}
    groups = pq.read_table(out / "dedup" / "exact_groups.parquet").to_pylist()
    assert [(g["keep_id"], g["ids"]) for g in groups] == [("a-simp", ["a-simp", "b-trad"]),
                                                        ("e-simp-chars", ["e-simp-chars", "f-trad-chars"])]
    clusters = pq.read_table(out / "dedup" / "clusters.parquet").to_pylist()
    assert [(c["cluster"], c["id"]) for c in clusters] == [("c-trad-more", "c-trad-more"), ("c-trad-more", "a-simp")]
    params = json.loads((out / "dedup" / "minhash_params.json").read_text())
    assert params["fold_scripts"] == "phrases"


def test_without_folding_nothing_is_merged(tmp_path):
    out = run_dedup(tmp_path, DOCS, fold="off")
    # only the two traditional texts meet (one sentence apart); nothing meets its simplified copy
    assert removed(out) == [("b-trad", "near_duplicate", "c-trad-more", round(87 / 98, 4))]
    assert jaccard(SIMP, TRAD_MORE, "off") == 6 / 178  # (the 5-grams of 行速度很快而且完全免: written alike)


def test_character_folding_misses_the_vocabulary(tmp_path):
    out = run_dedup(tmp_path, DOCS, fold="characters")
    # the character-level pair meets; the Taiwanese words leave the other pair under the threshold
    assert removed(out) == [("b-trad", "near_duplicate", "c-trad-more", round(87 / 98, 4)),
                            ("f-trad-chars", "exact_duplicate", "e-simp-chars", 2.0)]
    assert jaccard(SIMP, TRAD, "characters") == 59 / 114


def test_an_earlier_run_without_folding_is_not_deduplicated_against(tmp_path):
    first = run_dedup(tmp_path, DOCS[:1], fold="off", name="first")
    params = json.loads((first / "dedup" / "minhash_params.json").read_text())
    del params["fold_scripts"]  # as a run written before fold_scripts existed
    (first / "dedup" / "minhash_params.json").write_text(json.dumps(params))
    with pytest.raises(ValueError, match=r"other MinHash parameters \(fold_scripts='off' here 'phrases'\)$"):
        MinHashDedup(against=[str(first)])
    assert MinHashDedup(against=[str(first)], fold_scripts=False).against == [str(first)]
    second = run_dedup(tmp_path, DOCS[1:2], fold="off", name="second", against=[str(first)])
    assert removed(second) == []  # (unfolded: the traditional copy does not meet the earlier simplified one)


def test_cli_run_on_jsonl_removes_the_traditional_copy(tmp_path):
    path = tmp_path / "in.jsonl"
    rows = [{"id": "doc-1", "text": SIMP}, {"id": "doc-2", "text": TRAD}, {"id": "doc-3", "text": OTHER_TRAD}]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    out = tmp_path / "out"
    res = run_cli("run", path, "-o", out, "--workers", "1", "--quiet")  # the default pipeline
    assert res.returncode == 0, res.stderr
    assert "3 records in: 2 kept, 1 removed" in res.stdout
    ledger = pq.read_table(out / "rejected").to_pylist()
    assert [(r["id"], r["stage"], r["rule"], r["reason"], r["value"], r["detail"], r["dup_of"], r["text"])
            for r in ledger] == [("doc-2", "exact_dedup", "exact_duplicate", "exact_duplicate", 2.0,
                                  "group of 2 identical texts (normalized)", "doc-1", TRAD)]
    assert pq.read_table(out / "data", columns=["id"]).column("id").to_pylist() == ["doc-1", "doc-3"]


def test_cli_bad_fold_scripts_is_one_line(tmp_path):
    path = tmp_path / "in.jsonl"
    path.write_text(json.dumps({"id": "x", "text": SIMP}, ensure_ascii=False) + "\n", encoding="utf-8")
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("pipeline:\n  - stage: exact_dedup\n    fold_scripts: simplified\n", encoding="utf-8")
    res = run_cli("run", path, "-o", tmp_path / "out", "--config", cfg)
    assert res.returncode != 0
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in res.stderr, res.stderr
    assert lines[0].endswith("exact_dedup.fold_scripts must be phrases, characters or off "
                             "(true = phrases, false = off), got 'simplified'")


def test_fold_scripts_leaves_nulls_and_empty_batches():
    assert script_fold.fold_scripts(pa.array([None, "軟體", ""], pa.string())).to_pylist() == [None, "软件", ""]
    assert script_fold.fold_scripts(pa.chunked_array([], pa.string())).to_pylist() == []
    assert mh.shingle_text(pa.array([None, "軟體"], pa.string()), "phrases").to_pylist() == ["", "软件"]
    assert content_hash(pa.array([SIMP_CHARS]), "characters") == content_hash(pa.array([TRAD_CHARS]), "characters")
