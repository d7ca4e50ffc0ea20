"""The embedding quality scorer (``quality train --embedder``, ``scorer: embedding``): heads trained through the
real CLI on hand-written English and Chinese documents with real embedders (all-MiniLM-L6-v2, a static
model2vec model), the head file, its one-line refusals, and ``dataclean run`` end to end."""
from __future__ import annotations

import json
import os
import re
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import run_cli
from dataclean.embed.vectors import encode
from dataclean.quality.embedding import (FORMAT, EmbeddingHead, EmbeddingScorer, HeadFileError, as_column_values,
                                         embed_texts, load_head)

# Good: edited prose. Bad: spam, keyword stuffing and boilerplate. The first 20 of each list are the training
# documents, the last 6 (never trained on) the held-out ones.
EN_GOOD = [
    "The river rises in the northern hills and flows south for about two hundred kilometres before it reaches the sea.",
    "In 1887 the town council approved the construction of a stone bridge across the valley, which opened four years later.",
    "The species is found mainly in temperate forests, where it feeds on seeds, insects and the fruit of low shrubs.",
    "Historians generally agree that the treaty ended a long period of conflict in the region and opened its ports to trade.",
    "The building was designed by a local architect and completed in the spring of 1902, after a fire destroyed the old hall.",
    "Its population grew steadily during the nineteenth century as the railway reached the coast and new mills were built.",
    "The novel describes the daily life of a fishing family over three generations, from the old harbour to the new town.",
    "Researchers measured the temperature of the lake at several depths during the summer and compared it with older records.",
    "The university was founded as a college of medicine and later added schools of law, engineering and the sciences.",
    "The festival takes place every autumn and attracts musicians and visitors from across the country.",
    "According to the census, most of the inhabitants work in agriculture or in small family workshops.",
    "The painting was restored in the twentieth century and now hangs in the national gallery beside the artist's sketches.",
    "The language belongs to the same family as several others spoken in the surrounding valleys.",
    "During the winter months the mountain pass is often closed because of heavy snow and the risk of avalanches.",
    "The author studied history at the university before working as a journalist and, later, as a teacher.",
    "The museum holds a collection of tools, maps and letters written by the early settlers to their families.",
    "Farmers in the area grow wheat, barley and potatoes on the gentle slopes above the river.",
    "The cathedral is known for its tall windows and for the carved wooden choir stalls made by local craftsmen.",
    "The theory was first proposed in a short paper and was later tested in many careful experiments.",
    "The island has a mild climate, with warm dry summers and long rainy winters.",
    # held out
    "The harbour was enlarged in the eighteenth century to serve the growing trade in timber and grain.",
    "Scholars have studied the manuscript for its unusual spelling and its detailed illustrations of plants.",
    "The mountain range separates the dry plateau from the fertile plains to the east.",
    "The orchestra gave its first public concert in the old town hall in 1923.",
    "Most of the early houses in the village were built of local stone and timber from the nearby forest.",
    "The committee published a report describing the history and the present state of the canal.",
]
EN_BAD = [
    "BUY NOW!!! cheap pills best price click here >>> www.cheap-pills.biz <<< FREE SHIPPING!!!",
    "casino casino casino online casino best casino bonus casino free spins casino win casino",
    "Home | About Us | Contact | Privacy Policy | Terms of Service | Sitemap | Login | Register",
    "Click here to subscribe!!! Limited offer, act now, don't miss out, 90% OFF today only!!!",
    "cheap viagra cheap cialis cheap levitra order online no prescription fast delivery",
    "WIN A FREE IPHONE!!! Just enter your credit card number to claim your prize now!!!",
    "Copyright 2023 All rights reserved. Powered by WordPress. Theme by ThemeForest.",
    "best loans fast loans payday loans bad credit loans instant approval loans apply now",
    "Skip to content Menu Search Cart (0) Sign in Create account Shop All New Arrivals Sale",
    "Make $5000 a week working from home!!! No experience needed!!! Click the link below!!!",
    "replica watches rolex replica cheap replica watches best replica watches online shop",
    "Accept cookies. We use cookies to improve your experience. Accept all. Reject all. Settings.",
    "hot singles in your area click here now meet tonight free registration 100% real",
    "Share on Facebook Share on Twitter Pin it Email Print Previous post Next post Related posts",
    "SEO services cheap backlinks buy backlinks rank #1 on google guaranteed cheap seo",
    "Page 1 2 3 4 5 6 7 8 9 10 Next >> Last >> Showing 1-20 of 3,412 results Sort by",
    "FREE MONEY!!! Bitcoin doubler, send 1 BTC get 2 BTC back, guaranteed, trusted, legit!!!",
    "weight loss pills lose 30 pounds in 30 days miracle diet pill order today free trial",
    "Terms and Conditions apply. Offer valid while supplies last. See store for details.",
    "Download free movies free mp3 free games free software crack keygen serial full version",
    # held out
    "discount pharmacy online cheap meds no prescription needed overnight shipping buy now",
    "Log in | Sign up | Forgot password? | Help | Contact us | English | Français | Deutsch",
    "CONGRATULATIONS!!! You have been selected to receive a $1000 gift card, click to claim!!!",
    "online slots online poker online roulette online blackjack bonus code free chips",
    "Posted in Uncategorized | Leave a comment | Tags: news, best, top, free, online, 2023",
    "earn money fast earn money online earn money from home easy money quick cash now",
]
ZH_GOOD = [
    "这条河发源于北部山区，向南流经两百多公里，最后注入大海。",
    "一八八七年，镇议会批准在山谷上修建一座石桥，四年后正式通车。",
    "这种鸟主要生活在温带森林中，以种子、昆虫和灌木的果实为食。",
    "历史学家普遍认为，这项条约结束了该地区长期的冲突，也打开了港口的贸易。",
    "这座建筑由当地一位建筑师设计，于一九零二年春天完工。",
    "随着铁路通到海边，新的工厂陆续建成，这里的人口在十九世纪稳步增长。",
    "这部小说讲述了一个渔民家庭三代人的日常生活，从老港口一直写到新城。",
    "研究人员在夏季测量了湖水不同深度的温度，并与过去的记录进行了比较。",
    "这所大学最初是一所医学院，后来陆续增设了法学院、工学院和理学院。",
    "每年秋天这里都会举办音乐节，吸引了来自全国各地的音乐人和游客。",
    "根据人口普查，当地大多数居民从事农业，或者在家庭作坊里工作。",
    "这幅画在二十世纪经过修复，现在挂在国家美术馆，旁边陈列着画家的草图。",
    "这种语言与周边山谷里使用的几种语言属于同一个语系。",
    "冬季大雪常常封住山口，为了防止雪崩，道路会暂时关闭。",
    "作者在大学学习历史，毕业后当过记者，后来又成为一名教师。",
    "博物馆收藏了早期移民使用的工具、地图，以及他们写给家人的信件。",
    "这一带的农民在河流上方平缓的山坡上种植小麦、大麦和土豆。",
    "这座教堂以高大的窗户和当地工匠雕刻的木制唱诗席而闻名。",
    "这一理论最早发表在一篇短文中，后来经过了许多严谨的实验验证。",
    "岛上气候温和，夏季温暖干燥，冬季漫长多雨。",
    # held out
    "十八世纪港口得到扩建，以满足日益增长的木材和粮食贸易。",
    "学者们研究这份手稿，是因为它独特的拼写和精细的植物插图。",
    "这道山脉把干燥的高原和东边肥沃的平原分隔开来。",
    "乐团于一九二三年在老市政厅举行了第一场公开音乐会。",
    "村里早期的房屋大多用当地的石头和附近森林的木材建成。",
    "委员会发表了一份报告，介绍了这条运河的历史和现状。",
]
ZH_BAD = [
    "加微信领取优惠券！！！点击链接立即购买，限时秒杀，全场一折起！！！",
    "澳门赌场 在线赌场 真人赌场 赌场注册送彩金 赌场官网 赌场开户 赌场平台",
    "首页 | 关于我们 | 联系我们 | 隐私政策 | 用户协议 | 网站地图 | 登录 | 注册",
    "办证刻章 代开发票 各类证件 加急办理 电话 138xxxx 微信同号 诚信经营",
    "免费领取iPhone！！！只需填写银行卡号即可领取大奖，名额有限，先到先得！！！",
    "版权所有 © 2023 某某公司 保留所有权利 备案号 京ICP备12345678号",
    "贷款 快速贷款 无抵押贷款 黑户贷款 秒批 当天放款 无需征信 立即申请",
    "网站首页 产品中心 新闻中心 客户案例 在线留言 联系我们 English",
    "在家轻松月入过万！！！无需经验！！！点击下方链接马上赚钱！！！",
    "代写论文 论文代写 毕业论文代写 代发论文 包过 价格优惠 加QQ咨询",
    "上一篇：暂无 下一篇：暂无 相关文章 热门推荐 最新资讯 返回顶部",
    "本站使用cookie，继续浏览即表示您同意我们的隐私政策。接受 拒绝 设置",
    "彩票 时时彩 北京赛车 六合彩 彩票平台 彩票注册 彩票开户 彩票官网 送彩金",
    "分享到：微信 微博 QQ空间 豆瓣 复制链接 收藏 打印 举报 评论（0）",
    "刷单兼职 日结工资 手机就能做 宝妈学生都可以 加群了解 月入过万",
    "第1页 第2页 第3页 第4页 第5页 下一页 尾页 共3412条记录 排序",
    "减肥药 三十天瘦三十斤 不反弹 纯中药 无副作用 货到付款 免费试用",
    "本活动最终解释权归本公司所有，详情请咨询客服，数量有限，售完即止。",
    "免费电影 免费下载 破解版 注册机 序列号 绿色版 高速下载 无广告",
    "体育投注 足球投注 篮球投注 亚洲盘口 即时比分 注册送彩金 官方网站",
    # held out
    "网上药店 处方药 无需处方 隔夜送达 价格优惠 立即购买 货到付款",
    "登录 | 注册 | 忘记密码？ | 帮助中心 | 联系客服 | 简体中文 | English",
    "恭喜您！！！您已被选中获得一千元购物卡，点击链接立即领取！！！",
    "真人百家乐 在线老虎机 德州扑克 轮盘 注册即送筹码 优惠代码",
    "发表于 未分类 | 留下评论 | 标签：新闻，最新，热门，免费，在线，2023",
    "快速赚钱 网上赚钱 在家赚钱 轻松赚钱 日赚千元 马上提现",
]
SETS = {"en": (EN_GOOD, EN_BAD), "zh": (ZH_GOOD, ZH_BAD)}
N_TRAIN = 20


def _labels(path, langs=("en", "zh"), part=slice(0, N_TRAIN)):
    with open(path, "w", encoding="utf-8") as fh:
        for lang in langs:
            good, bad = SETS[lang]
            for label, docs in ((1, good), (0, bad)):
                for i, text in enumerate(docs[part]):
                    fh.write(json.dumps({"id": f"{lang}-{label}-{i}", "text": text, "label": label, "lang": lang},
                                        ensure_ascii=False) + "\n")
    return path


def _train(tmp_path, embedder, *extra, name="head.npz"):
    labels = _labels(tmp_path / "train.jsonl")
    head = tmp_path / name
    r = run_cli("quality", "train", "--embedder", embedder, "--labels", labels, "-o", head, *extra)
    return r, head


@pytest.fixture(scope="module")
def minilm_head(minilm_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("minilm_head")
    r, head = _train(tmp, minilm_dir, "--cv", "4")
    assert r.returncode == 0, r.stderr
    return r, head


@pytest.fixture(scope="module")
def static_head(static_model_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("static_head")
    r, head = _train(tmp, static_model_dir, "--cv", "4")
    assert r.returncode == 0, r.stderr
    return r, head


def _held_out(lang):
    good, bad = SETS[lang]
    return good[N_TRAIN:], bad[N_TRAIN:]


def _scores(scorer, texts, lang):
    batch = pa.RecordBatch.from_pydict({"text": texts, "lang": [lang] * len(texts)})
    s, signals = scorer.score(batch)
    assert signals == {}
    return s


# -- training through the CLI, held-out documents ---------------------------------------------------------

@pytest.mark.parametrize("which", ["minilm", "static"])
def test_cli_prints_the_cross_validated_auc_overall_and_per_language(which, request):
    r, _ = request.getfixturevalue(f"{which}_head")
    assert "read 40 good and 40 bad documents" in r.stdout
    assert "train: 40 good + 40 bad; holdout 0 (seed 0): 0 good + 0 bad" in r.stdout
    overall = re.search(r"^cv AUC (\d\.\d{4}) \(4 folds by id hash, seed 0; 80 documents: 40 good, 40 bad\)$",
                        r.stdout, re.M)
    assert overall, r.stdout
    for lang in ("en", "zh"):
        assert re.search(rf"^cv AUC lang={lang} \d\.\d{{4}} \(40 documents: 20 good, 20 bad\)$", r.stdout, re.M)
    assert float(overall.group(1)) > 0.9


@pytest.mark.parametrize("which,langs", [("minilm", ["en"]), ("static", ["en", "zh"])])
def test_held_out_good_documents_score_above_held_out_spam(which, langs, request):
    _, head = request.getfixturevalue(f"{which}_head")
    scorer = EmbeddingScorer(str(head))
    for lang in langs:
        good, bad = _held_out(lang)
        g, b = _scores(scorer, good, lang), _scores(scorer, bad, lang)
        assert ((0 <= g) & (g <= 1)).all() and ((0 <= b) & (b <= 1)).all()
        assert g.min() > b.max(), (lang, g, b)


# -- the head file ----------------------------------------------------------------------------------------

def test_the_head_file_records_the_embedder(minilm_head, minilm_dir):
    from dataclean.embed.models import load_embedder

    _, head_path = minilm_head
    emb = load_embedder(str(minilm_dir))
    head = EmbeddingHead.load(head_path)
    assert head.embedder.path == os.path.abspath(str(minilm_dir))
    assert (head.embedder.name, head.embedder.digest, head.embedder.dim) == (emb.name, emb.digest, emb.dim)
    assert head.embedder.dim == 384 and head.coef.shape == (384,) and head.coef.dtype == np.float32
    assert (head.embedder.max_tokens, head.embedder.long_text) == (None, "truncate")
    with np.load(head_path, allow_pickle=False) as npz:
        assert sorted(npz.files) == ["coef", "intercept", "meta"]
        meta = json.loads(npz["meta"].tobytes().decode("utf-8"))
    assert meta["format"] == FORMAT and meta["format_version"] == 1
    assert meta["embedder"]["digest"] == emb.digest
    assert meta["classifier"]["type"] == "LogisticRegression" and meta["classifier"]["C"] == 0.1
    assert meta["metrics"]["cv"]["overall"]["n"] == 80 and meta["metrics"]["n_train_pos"] == 40


def test_scores_are_the_head_on_the_float16_embedding_and_do_not_depend_on_the_batch(minilm_head):
    _, head_path = minilm_head
    scorer = EmbeddingScorer(str(head_path))
    texts = EN_GOOD[N_TRAIN:] + ZH_BAD[N_TRAIN:]
    together = _scores(scorer, texts, "en")
    alone = np.array([_scores(scorer, [t], "en")[0] for t in texts])
    assert np.abs(together - alone).max() < 1e-3
    v = embed_texts(scorer.embedder, texts)
    assert np.array_equal(v, as_column_values(v))  # already float16 values: rounding again changes nothing
    logit = v.astype(np.float64) @ scorer.head.coef.astype(np.float64) + scorer.head.intercept
    assert np.allclose(together, 1 / (1 + np.exp(-logit)), rtol=0, atol=1e-12)


@pytest.mark.slow
def test_a_changed_embedder_is_refused_in_one_line(minilm_dir, tmp_path):
    copy = tmp_path / "minilm-copy"
    shutil.copytree(minilm_dir, copy)
    r, head = _train(tmp_path, copy)
    assert r.returncode == 0, r.stderr
    EmbeddingScorer(str(head))  # the same files: accepted
    cfg = json.loads((copy / "config.json").read_text())
    cfg["layer_norm_eps"] = 1e-6  # a changed model: the same shapes, other numbers
    (copy / "config.json").write_text(json.dumps(cfg))
    with pytest.raises(HeadFileError) as err:
        EmbeddingScorer(str(head))
    line = str(err.value)
    assert "\n" not in line and line.startswith(f"{head}: its embedder {copy} changed since the head was trained")
    assert line.endswith(f"retrain with 'dataclean quality train --embedder {copy}'")
    r = run_cli("quality", "eval", head, "--labels", _labels(tmp_path / "l.jsonl"))
    assert r.returncode == 2 and r.stderr.strip() == f"error: {line}"


def test_a_moved_embedder_is_found_beside_the_head_and_a_missing_one_is_one_line(static_model_dir, tmp_path):
    folder = tmp_path / "models" / "static"
    shutil.copytree(static_model_dir, folder)
    r, head = _train(tmp_path, folder)
    assert r.returncode == 0, r.stderr
    moved = tmp_path / "elsewhere"
    moved.mkdir()
    shutil.move(str(tmp_path / "models"), str(moved / "models"))
    shutil.move(str(head), str(moved / "head.npz"))
    scorer = EmbeddingScorer(str(moved / "head.npz"))  # the relative place: the same digest
    assert scorer.head.embedder.path == str(moved / "models" / "static")
    shutil.rmtree(moved / "models")
    with pytest.raises(HeadFileError) as err:
        EmbeddingScorer(str(moved / "head.npz"))
    assert str(err.value) == (f"{moved / 'head.npz'}: its embedder {folder} does not exist (trained with "
                              f"{scorer.head.embedder.name}); put the folder back, or retrain with "
                              "'dataclean quality train --embedder MODEL'")


def test_bad_embedder_paths_and_flags_are_one_line(tmp_path, minilm_dir):
    labels = _labels(tmp_path / "train.jsonl")
    missing = tmp_path / "no-such-model"
    r = run_cli("quality", "train", "--embedder", missing, "--labels", labels, "-o", tmp_path / "h.npz")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith("error: --embedder: ") and str(missing) in r.stderr and "Traceback" not in r.stderr
    (tmp_path / "empty").mkdir()
    r = run_cli("quality", "train", "--embedder", tmp_path / "empty", "--labels", labels, "-o", tmp_path / "h.npz")
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1, r.stderr
    assert r.stderr.startswith("error: --embedder: ") and str(tmp_path / "empty") in r.stderr
    assert not (tmp_path / "h.npz").exists()
    r = run_cli("quality", "train", "--embedder", minilm_dir, "--labels", labels, "-o", tmp_path / "h.npz", "--dense",
                "--per-lang")
    assert r.returncode == 2 and r.stderr.strip() == ("error: --per-lang, --dense belong to the n-gram model; "
                                                      "--embedder trains a head on embeddings: drop them")
    r = run_cli("quality", "train", "--labels", labels, "-o", tmp_path / "h.npz", "--max-tokens", "128")
    assert r.returncode == 2 and r.stderr.strip() == "error: --max-tokens need --embedder MODEL"


def test_a_linear_model_and_a_head_are_not_mistaken_for_each_other(minilm_head, tmp_path):
    from dataclean.quality import LinearScorer, QualityModelError

    _, head = minilm_head
    with pytest.raises(QualityModelError) as err:
        LinearScorer(str(head))
    assert str(err.value) == f"{head} is an embedding quality head, not a linear model: use scorer: embedding"
    labels = _labels(tmp_path / "train.jsonl")
    linear = tmp_path / "linear.npz"
    r = run_cli("quality", "train", "--labels", labels, "-o", linear, "--holdout", "0")
    assert r.returncode == 0, r.stderr
    with pytest.raises(HeadFileError) as err:
        EmbeddingScorer(str(linear))
    assert str(err.value) == f"{linear}: is a linear (n-gram) quality model, not an embedding head: use scorer: linear"
    pickled = tmp_path / "p.npz"
    pickled.write_bytes(b"\x80\x04K\x01.")
    with pytest.raises(HeadFileError, match="is a Python pickle; dataclean never loads pickles"):
        EmbeddingScorer(str(pickled))
    with pytest.raises(QualityModelError, match=f"embedding quality head not found: {tmp_path / 'none.npz'}"):
        EmbeddingScorer(str(tmp_path / "none.npz"))


def test_quality_eval_scores_with_the_head(static_head, tmp_path):
    _, head = static_head
    held = _labels(tmp_path / "held.jsonl", part=slice(N_TRAIN, None))
    r = run_cli("quality", "eval", head, "--labels", held, "--format", "json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    assert rep["overall"]["n"] == 24 and rep["overall"]["auc"] == 1.0
    assert rep["by_lang"]["en"]["auc"] == 1.0 and rep["by_lang"]["zh"]["auc"] == 1.0


# -- dataclean run ---------------------------------------------------------------------------------------

def _run_inputs(tmp_path):
    rows = []
    for lang in ("en", "zh"):
        good, bad = _held_out(lang)
        rows += [{"id": f"{lang}-good-{i}", "text": t, "source": "web"} for i, t in enumerate(good)]
        rows += [{"id": f"{lang}-bad-{i}", "text": t, "source": "web"} for i, t in enumerate(bad)]
    path = tmp_path / "in.jsonl"
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path, rows


def test_run_scores_with_the_head_end_to_end(static_head, tmp_path):
    _, head = static_head
    inp, rows = _run_inputs(tmp_path)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text("pipeline:\n  - stage: normalize\n  - stage: quality_score\n"
                   f"    scorer: embedding\n    model_path: {head}\n  - stage: exact_dedup\n", encoding="utf-8")
    outs = []
    for workers in ("1", "2"):
        out = tmp_path / f"w{workers}"
        r = run_cli("run", inp, "-o", out, "--config", cfg, "--workers", workers, "--quiet")
        assert r.returncode == 0, r.stderr
        assert run_cli("verify", out).returncode == 0
        outs.append(out)
    from conftest import folder_bytes

    assert folder_bytes(outs[0], "data", "rejected", "stats") == folder_bytes(outs[1], "data", "rejected", "stats")
    data = pq.read_table(outs[0] / "data").to_pylist()
    assert len(data) == len(rows) == 24
    score = {d["id"]: d["quality_score"] for d in data}
    scorer = EmbeddingScorer(str(head))
    texts = {d["id"]: d["text"] for d in data}
    ids = sorted(score)
    expected = _scores(scorer, [texts[i] for i in ids], "en")
    assert np.abs(np.array([score[i] for i in ids]) - expected).max() < 1e-3
    for lang in ("en", "zh"):
        good = [score[i] for i in ids if i.startswith(f"{lang}-good")]
        bad = [score[i] for i in ids if i.startswith(f"{lang}-bad")]
        assert len(good) == len(bad) == 6 and min(good) > max(bad)


def test_run_refuses_a_changed_embedder_in_one_line(static_model_dir, tmp_path):
    copy = tmp_path / "static-copy"
    shutil.copytree(static_model_dir, copy)
    r, head = _train(tmp_path, copy)
    assert r.returncode == 0, r.stderr
    victim = max((p for p in copy.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    data = bytearray(victim.read_bytes())
    data[-1] ^= 1  # one bit of the largest file (the weights)
    victim.write_bytes(bytes(data))
    inp, _ = _run_inputs(tmp_path)
    r = run_cli("run", inp, "-o", tmp_path / "out", "--quiet", "--set", "quality_score.scorer=embedding",
                "--set", f"quality_score.model_path={head}")
    assert r.returncode == 2, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in r.stderr
    assert f"{head}: its embedder {copy} changed since the head was trained" in lines[0]
