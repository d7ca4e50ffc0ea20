"""Filtering on the quality score in the global step: absolute threshold, top fraction per source."""
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import dataclean

GOOD_EN = ("The river rises in the northern hills and flows south through farmland for about ninety kilometres. "
           "Its valley has been settled since the Bronze Age, and several villages still hold markets on its "
           "banks. The water is clean enough for trout, and anglers come from the cities every spring.")
BAD_EN = "BUY NOW!!! $$$ click here >>> http://x.example ### best price ### best price ###"
GOOD_ZH = ("这条河发源于北部山区，向南流经农田约九十公里。河谷自青铜时代起就有人定居，至今仍有几个村庄在河岸上举行集市。"
           "河水清澈，适合鳟鱼生长，每年春天都有垂钓者从城里赶来。")
BAD_ZH = "加微信！！！ 优惠 优惠 优惠 ###### 点击 >>> 12345 67890"


def scored_run(tmp_path, filt, name="out"):
    rows = [("web-good", GOOD_EN, "web"), ("web-bad", BAD_EN, "web"), ("web-zh-good", GOOD_ZH, "web"),
            ("web-zh-bad", BAD_ZH, "web"), ("book-good", GOOD_EN + " The end.", "books"),
            ("book-bad", BAD_EN + " again", "books")]
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist([{"id": i, "text": t, "source": s} for i, t, s in rows]), path)
    cfg = dataclean.resolve_config({"pipeline": [{"stage": "normalize"}, {"stage": "quality_score"},
                                                 {"stage": "quality_filter", **filt}]})
    out = tmp_path / name
    summary = dataclean.run([str(path)], str(out), config=cfg)
    assert summary.verified
    kept = {r["id"]: r["quality_score"] for r in pq.read_table(out / "data").to_pylist()}
    gone = {r["id"]: (r["rule"], r["value"], r["threshold"]) for r in pq.read_table(out / "rejected").to_pylist()}
    cutoffs = pq.read_table(out / "stats" / "quality_cutoffs.parquet").to_pylist()
    return kept, gone, cutoffs


def test_good_documents_score_above_bad_ones(tmp_path):
    kept, gone, cutoffs = scored_run(tmp_path, {})
    assert gone == {} and cutoffs == []
    assert kept["web-good"] > kept["web-bad"] and kept["web-zh-good"] > kept["web-zh-bad"]
    assert kept["book-good"] > kept["book-bad"]


def test_absolute_threshold(tmp_path):
    kept, gone, cutoffs = scored_run(tmp_path, {"threshold": 0.5})
    assert sorted(kept) == ["book-good", "web-good", "web-zh-good"]
    assert {i: (r, t) for i, (r, _, t) in gone.items()} == {
        "web-bad": ("quality_below_threshold", 0.5), "web-zh-bad": ("quality_below_threshold", 0.5),
        "book-bad": ("quality_below_threshold", 0.5)}
    assert all(v < 0.5 for _, v, _ in gone.values())
    assert [(c["source"], c["mode"], c["cutoff"], c["scored_documents"]) for c in cutoffs] == [
        ("books", "threshold", 0.5, 2), ("web", "threshold", 0.5, 4)]


def test_top_fraction_per_source_is_exact_and_reports_the_cutoff(tmp_path):
    kept, gone, cutoffs = scored_run(tmp_path, {"top_fraction": 0.5, "by_source": {"books": {"threshold": 0.0}}})
    web = sorted(["web-good", "web-bad", "web-zh-good", "web-zh-bad"], key=lambda i: -({**kept, **{
        k: v[1] for k, v in gone.items()}})[i])
    assert sorted(k for k in kept if k.startswith("web")) == sorted(web[:2])  # ceil(0.5 * 4) = 2 kept
    assert sorted(gone) == sorted(web[2:])
    web_cut = [c for c in cutoffs if c["source"] == "web"][0]
    assert web_cut["mode"] == "top_fraction" and web_cut["cutoff"] == min(kept[i] for i in web[:2])
    for rule, value, threshold in gone.values():
        assert rule == "quality_below_top_fraction" and value <= threshold == web_cut["cutoff"]
    assert "book-bad" in kept  # books: threshold 0 keeps everything


def test_invalid_filter_settings():
    with pytest.raises(dataclean.ConfigError, match="not both"):
        dataclean.resolve_config({"pipeline": [{"stage": "quality_filter", "threshold": 0.5, "top_fraction": 0.3}]})
    with pytest.raises(dataclean.ConfigError, match="top_fraction must be in"):
        dataclean.resolve_config({"pipeline": [{"stage": "quality_filter", "top_fraction": 1.5}]})


def test_a_threshold_per_language_over_the_kinds_in_scope(tmp_path):
    rows = [("web-good", GOOD_EN, "cc-2024"), ("web-bad", BAD_EN, "cc-2024"), ("web-zh-bad", BAD_ZH, "forum_zh"),
            ("book-bad", BAD_EN + " again", "books")]
    path = tmp_path / "in.parquet"
    pq.write_table(pa.Table.from_pylist([{"id": i, "text": t, "source": s} for i, t, s in rows]), path)
    cfg = dataclean.resolve_config({"pipeline": [
        {"stage": "normalize"}, {"stage": "langid", "min_score": 0.0}, {"stage": "quality_score"},
        {"stage": "quality_filter", "only_kinds": ["web"], "by_lang": {"en": {"threshold": 0.5}}}]})
    out = tmp_path / "out"
    assert dataclean.run([str(path)], str(out), config=cfg).verified
    kept = {r["id"]: (r["lang"], r["quality_score"]) for r in pq.read_table(out / "data").to_pylist()}
    gone = {r["id"]: (r["rule"], r["threshold"], r["detail"]) for r in pq.read_table(out / "rejected").to_pylist()}
    # English web below 0.5 goes; Chinese web has no threshold; books are curated, out of scope
    assert gone == {"web-bad": ("quality_below_threshold", 0.5, "score below the threshold of language en")}
    assert sorted(kept) == ["book-bad", "web-good", "web-zh-bad"] and kept["book-bad"][0] == "en"
    cutoffs = pq.read_table(out / "stats" / "quality_cutoffs.parquet").to_pylist()
    assert [(c["lang"], c["mode"], c["cutoff"], c["scored_documents"]) for c in cutoffs] == [
        ("en", "threshold", 0.5, 2)]


def test_the_default_recipe_filters_english_web_pages():
    spec = next(s for s in dataclean.resolve_config()["pipeline"] if s["stage"] == "quality_filter")
    assert spec["only_kinds"] == ["web"] and spec["by_lang"] == {"en": {"threshold": 0.37}}
    with pytest.raises(dataclean.ConfigError, match=r"by_lang.en: expected \{threshold: x\}"):
        dataclean.resolve_config({"pipeline": [{"stage": "quality_filter", "by_lang": {"en": {"top_fraction": 0.5}}}]})
