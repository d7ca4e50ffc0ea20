"""Source kinds: the user's own source names decide which rule families apply (``sources:`` in the config)."""
import pyarrow as pa
import pytest

import dataclean
from dataclean.config import ConfigError, default_config
from dataclean.pipeline import Pipeline, build_stage
from dataclean.sources import DEFAULT_SOURCES, SourceKinds
from conftest import run_cli

# A short web page: menus and one-liners. Gopher removes it (fewer than 50 words) wherever it is judged as web.
PAGE = "Home | Shop | Cart\nBest deals today\nClick here\nSign in"
CHINESE_PAGE = "首页 | 新闻 | 联系我们\n热门推荐\n点击进入"


def test_default_kinds_and_the_yaml_agree():
    assert default_config()["sources"] == DEFAULT_SOURCES
    kinds = SourceKinds()
    assert [kinds.kind(s) for s in ("code", "books", "wiki", "docs", "papers")] == \
        ["code", "curated", "curated", "curated", "curated"]
    # every other name is web, whatever the user calls it
    assert [kinds.kind(s) for s in ("web", "unknown", "forum_zh", "classifieds", "cc-2024", "web_zh", None)] == \
        ["web"] * 7


def test_exact_names_win_over_globs_and_globs_go_in_order():
    kinds = SourceKinds({"cc-*": "web", "cc-books": "curated", "*_code": "code", "*_zh": "curated"})
    assert kinds.kind("cc-books") == "curated"  # exact beats the glob listed before it
    assert kinds.kind("cc-2024") == "web"
    assert kinds.kind("go_code") == "code"
    assert kinds.kind("wiki_zh") == "curated"
    assert kinds.kind("books") == "web"  # a mapping given whole replaces the defaults
    arr = kinds.kinds(pa.array(["cc-books", None, "go_code", "cc-books", "x"]), 5)
    assert arr.to_pylist() == ["curated", "web", "code", "curated", "web"]


def test_user_config_adds_names_to_the_default_mapping():
    cfg = dataclean.resolve_config({"sources": {"forum_*": "curated", "my_repo": "code"}})
    assert cfg["sources"] == {**DEFAULT_SOURCES, "forum_*": "curated", "my_repo": "code"}
    with pytest.raises(ConfigError, match=r"sources.forum_zh: kind must be one of web, curated, code, not 'blog'"):
        dataclean.resolve_config({"sources": {"forum_zh": "blog"}})


def test_a_kind_that_is_not_one_is_refused_with_the_fix():
    with pytest.raises(ValueError, match=r"only_kinds: 'forum' is not a kind; the kinds are web, curated, code "
                                         r"\(source names go in only_sources / skip_sources\)"):
        build_stage({"stage": "gopher_quality", "only_kinds": ["forum"]})


def _batch(sources, texts):
    return pa.RecordBatch.from_pydict({"id": [f"d{i}" for i in range(len(texts))], "text": texts,
                                       "source": sources})


def test_web_rules_apply_to_the_users_own_web_source_names():
    pipe = Pipeline.from_config(dataclean.resolve_config())
    sources = ["forum_zh", "classifieds", "cc-2024", "web_zh", "books", "docs"]
    texts = [CHINESE_PAGE, PAGE, PAGE, CHINESE_PAGE, PAGE, PAGE]
    out = pipe.process(_batch(sources, texts))
    removed = dict(zip(out.removed.column("id").to_pylist(), out.removed.column("rule").to_pylist()))
    # the four web-kind sources lose their page to Gopher's word minimum; curated books and docs keep it
    assert removed == {"d0": "gopher_short_doc", "d1": "gopher_short_doc", "d2": "gopher_short_doc",
                       "d3": "gopher_short_doc"}
    assert out.kept.column("id").to_pylist() == ["d4", "d5"]
    assert "source_kind" not in out.kept.schema.names and "source_kind" not in out.removed.schema.names


def test_a_config_can_make_a_source_curated_or_code():
    cfg = dataclean.resolve_config({"sources": {"forum_*": "curated", "scripts": "code"}})
    pipe = Pipeline.from_config(cfg)
    out = pipe.process(_batch(["forum_zh", "scripts", "cc"], [CHINESE_PAGE, "def f(x):\n    return x\n", PAGE]))
    assert out.removed.column("id").to_pylist() == ["d2"]
    kept = out.kept.to_pydict()
    assert kept["id"] == ["d0", "d1"]
    assert kept["lang"][1] is None  # code: no language ID
    assert kept["quality_score"][1] is None  # nor a prose quality score


def test_a_stage_can_still_name_sources():
    stage = build_stage({"stage": "gopher_quality", "only_kinds": ["web"], "skip_sources": ["cc-*"]})
    assert stage.scope() == "kind web; all but cc-*"
    out = Pipeline([stage]).process(_batch(["cc-2024", "forum"], [PAGE, PAGE]))
    assert out.removed.column("id").to_pylist() == ["d1"]


def test_the_run_names_each_source_and_its_kind_once(tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_text("\n".join('{"id": "%d", "text": "%s", "source": "%s"}' % (i, t, s) for i, (t, s) in enumerate([
        ("The cat sat on the mat. It was warm there.", "cc-2024"), ("Chapter one. It begins.", "books"),
        ("x = 1", "code"), ("Another page of text here.", "cc-2024")])) + "\n")
    res = run_cli("run", inp, "-o", tmp_path / "out", "--quiet")
    assert res.returncode == 0, res.stderr
    lines = [ln for ln in res.stdout.splitlines() if ln.startswith("sources:")]
    assert lines == ["sources: books = curated (1), cc-2024 = web (2), code = code (1)"]
