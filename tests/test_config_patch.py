"""Changing one parameter without restating the pipeline: ``--set STAGE.PARAM=VALUE``, a config's ``stages:``
patch, ``dataclean config show`` and ``dataclean config init`` (issue 24, "first contact").

The corpus is six hand-written documents: ``en-short`` has 47 words and ``zh-short`` 36 (one Han character is
one word), so Gopher's ``min_words`` (default 50) decides each of them by its own threshold; ``en-long`` and
its two copies ``dup-1``, ``dup-2`` are an exact-duplicate group of 3. Every run goes through the real CLI
(``python -m dataclean``) in a subprocess, and the test reads the ledger (rejected/) it wrote.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pyarrow.parquet as pq
import pytest
import yaml

EN_LONG = ("The river town of Bellmore sits at the edge of a wide green valley. Every spring the farmers bring their "
           "vegetables to the market square, and the children run between the stalls. The old bakery on the corner "
           "sells bread that is still warm in the morning. Visitors often stay for a week, because the walking paths "
           "along the water are quiet and the people are kind to strangers who ask for directions.")
DOCS = [
    {"id": "en-long", "source": "web", "text": EN_LONG},
    {"id": "en-short", "source": "web",
     "text": "The library in our town opened a new reading room last month. It has large windows, soft chairs and a "
             "long table where students can work. The staff are friendly and the room is quiet for most of the day, "
             "so many people come to read there."},
    {"id": "zh-long", "source": "web",
     "text": "我们的城市在河边，春天的时候公园里开满了花。每个周末，很多家庭都会带着孩子去散步，老人们在树下下棋聊天。"
             "附近的小饭馆做的面条很好吃，价格也不贵，所以总是有很多人在门口排队。"},
    {"id": "zh-short", "source": "web", "text": "今天下午我去图书馆看书，那里很安静，人也不多。我借了两本小说，准备周末在家慢慢看。"},
    {"id": "dup-1", "source": "web", "text": EN_LONG},
    {"id": "dup-2", "source": "web", "text": EN_LONG},
]
#: The exact-duplicate rows every run here has: two of the three copies, each with its group size.
DUPLICATES = [("dup-2", "exact_dedup", "exact_duplicate", 3.0, None),
              ("en-long", "exact_dedup", "exact_duplicate", 3.0, None)]


def cli(*args, cwd=None) -> subprocess.CompletedProcess:
    """``python -m dataclean ARGS`` in a fresh process."""
    env = {k: v for k, v in os.environ.items() if k != "DATACLEAN_FAILPOINTS"}
    return subprocess.run([sys.executable, "-m", "dataclean", *map(str, args)], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=600, start_new_session=True)


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    path = tmp_path_factory.mktemp("patch") / "docs.jsonl"
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in DOCS), encoding="utf-8")
    return path


def ledger(out) -> list[tuple]:
    """(id, stage, rule, value, threshold) of every ledger row, sorted."""
    rows = []
    for shard in sorted((out / "rejected").glob("*.parquet")):
        t = pq.read_table(shard, columns=["id", "stage", "rule", "value", "threshold"])
        rows += [tuple(r.values()) for r in t.to_pylist()]
    return sorted(rows)


def run_ok(*args) -> None:
    res = cli("run", *args, "--quiet")
    assert res.returncode == 0, res.stderr


def test_set_min_words_changes_exactly_which_document_is_removed(corpus, tmp_path):
    run_ok(corpus, "-o", tmp_path / "default")
    assert ledger(tmp_path / "default") == sorted(DUPLICATES + [
        ("en-short", "gopher_quality", "gopher_short_doc", 47.0, 50.0),
        ("zh-short", "gopher_quality", "gopher_short_doc", 36.0, 50.0)])
    run_ok(corpus, "-o", tmp_path / "set40", "--set", "gopher_quality.min_words=40")
    assert ledger(tmp_path / "set40") == sorted(DUPLICATES + [
        ("zh-short", "gopher_quality", "gopher_short_doc", 36.0, 40.0)])


def test_stages_patch_in_a_config_file_merges_by_lang_key_by_key(corpus, tmp_path):
    """``by_lang: {zh: {min_words: 30}}`` changes Chinese's min_words only: the default zh stop words stay (were
    by_lang replaced whole, zh-long would fail the English stop-word rule)."""
    cfg = tmp_path / "patch.yaml"
    cfg.write_text("stages:\n  gopher_quality:\n    min_words: 48\n    by_lang:\n      zh: {min_words: 30}\n")
    run_ok(corpus, "-o", tmp_path / "out", "--config", cfg)
    assert ledger(tmp_path / "out") == sorted(DUPLICATES + [
        ("en-short", "gopher_quality", "gopher_short_doc", 47.0, 48.0)])


def test_set_names_a_stage_by_its_name_label_in_a_pipeline_list(corpus, tmp_path):
    """A ``pipeline:`` list still replaces the pipeline (here: four stages, Gopher named ``gq``, without the mean
    word length and stop-word rules, which Chinese needs by_lang settings for); ``--set`` then finds the stage by
    its name, and the ledger rows carry it."""
    cfg = tmp_path / "short.yaml"
    cfg.write_text("pipeline:\n  - {stage: normalize}\n  - {stage: langid}\n"
                   "  - {stage: gopher_quality, name: gq, min_mean_word_length: null, "
                   "min_stop_words: null}\n  - {stage: exact_dedup}\n")
    run_ok(corpus, "-o", tmp_path / "out", "--config", cfg, "--set", "gq.min_words=40")
    assert ledger(tmp_path / "out") == sorted(DUPLICATES + [("zh-short", "gq", "gopher_short_doc", 36.0, 40.0)])


def test_the_library_takes_the_same_patch_as_a_dict_or_a_dotted_override():
    from dataclean.config import default_config, resolve_config

    def gopher(cfg):
        return next(s for s in cfg["pipeline"] if s["stage"] == "gopher_quality")

    by_dict = resolve_config({"stages": {"gopher_quality": {"min_words": 30}}})
    by_override = resolve_config(None, {"gopher_quality.min_words": 30})
    assert by_dict == by_override and "stages" not in by_dict
    assert gopher(by_dict)["min_words"] == 30
    defaults = resolve_config()
    assert [s for s in by_dict["pipeline"] if s["stage"] != "gopher_quality"] == \
        [s for s in defaults["pipeline"] if s["stage"] != "gopher_quality"]
    assert {k: v for k, v in gopher(by_dict).items() if k != "min_words"} == \
        {k: v for k, v in gopher(defaults).items() if k != "min_words"}
    assert gopher(default_config())["min_words"] == 50


STAGES = ("normalize, langid, garbled, repetition_runs, long_tokens, gopher_quality, gopher_repetition, "
          "fineweb_quality, c4, seo_spam, word_lists, pii, quality_score, exact_dedup, minhash_dedup, quality_filter")


@pytest.mark.parametrize("sets, line", [
    (["gopher_quality.min_wrds=30"],
     "--set gopher_quality.min_wrds: gopher_quality has no parameter min_wrds (did you mean min_words?)"),
    (["gopher_qualty.min_words=30"],
     "--set gopher_qualty: no stage gopher_qualty in the pipeline (did you mean gopher_quality?); "
     f"its stages: {STAGES}"),
    (["gopher_quality.min_words=many"], "--set gopher_quality.min_words: expected a number, got 'many'"),
    (["gopher_quality.min_words"],
     "--set gopher_quality.min_words: expected KEY=VALUE, e.g. --set gopher_quality.min_words=30"),
    (["global.partitons=8"], "--set global.partitons: global has no key partitons (did you mean partitions?)"),
    (["gopher_quality.min_words=[30"],
     "--set gopher_quality.min_words: '[30' is not a YAML value (did not find expected ',' or ']'); quote it for a "
     "string"),
    (["decontaminate_stage.ngram=8"],
     f"--set decontaminate_stage: no stage decontaminate_stage in the pipeline; its stages: {STAGES}"),
])
def test_a_bad_set_is_one_line_naming_the_key(sets, line):
    args = [a for s in sets for a in ("--set", s)]
    res = cli("config", "show", *args)
    assert (res.returncode, res.stdout, res.stderr.splitlines()) == (2, "", [f"error: {line}"])


@pytest.mark.parametrize("text, line", [
    ("stages:\n  gopher_quality: {min_wrds: 30}\n",
     "stages.gopher_quality.min_wrds: gopher_quality has no parameter min_wrds (did you mean min_words?)"),
    ("stages:\n  minhash: {threshold: 0.7}\n",
     f"stages.minhash: no stage minhash in the pipeline (did you mean minhash_dedup?); its stages: {STAGES}"),
    ("stages:\n  gopher_quality: 30\n",
     "stages.gopher_quality: expected a mapping of parameter to value, e.g. {min_words: 30}; got 30"),
    ("stages:\n  decontaminate: {ngram: 8}\n",
     "stages.decontaminate: no stage decontaminate in the pipeline; the decontaminate section adds it (--set "
     f"decontaminate.KEY=VALUE); its stages: {STAGES}"),
    ("pipeline:\n  - {stage: gopher_quality, name: gq_en}\n  - {stage: gopher_quality, name: gq_zh}\n"
     "stages:\n  gopher_quality: {min_words: 30}\n",
     "stages.gopher_quality: 2 stages of kind gopher_quality (gq_en, gq_zh); name one of them"),
])
def test_a_bad_stages_patch_is_one_line_naming_the_key(tmp_path, text, line):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text(text)
    res = cli("config", "show", "--config", cfg)
    assert (res.returncode, res.stdout, res.stderr.splitlines()) == (2, "", [f"error: {line}"])


def test_run_refuses_a_bad_set_before_any_work(corpus, tmp_path):
    res = cli("run", corpus, "-o", tmp_path / "out", "--set", "gopher_quality.min_wrds=30")
    assert (res.returncode, res.stdout) == (2, "")
    assert res.stderr.splitlines() == [
        "error: --set gopher_quality.min_wrds: gopher_quality has no parameter min_wrds (did you mean min_words?)"]
    assert not (tmp_path / "out").exists()


def test_config_show_prints_the_resolved_config_with_the_patch(tmp_path):
    res = cli("config", "show", "--set", "gopher_quality.min_words=30", "--set", "global.partitions=4",
              "--set", "langid.allowed=[en, zh]", "--set", "gopher_quality.by_lang.ja.min_words=20",
              "--set", "decontaminate.ngram=8", "--set", "sources.forum=curated")
    assert res.returncode == 0, res.stderr
    cfg = yaml.safe_load(res.stdout)
    stage = {s["stage"]: s for s in cfg["pipeline"]}
    assert stage["gopher_quality"]["min_words"] == 30
    assert stage["gopher_quality"]["max_words"] == 100000  # (the rest of the entry: the defaults)
    assert stage["langid"]["allowed"] == ["en", "zh"]
    assert cfg["global"]["partitions"] == 4
    ja = stage["gopher_quality"]["by_lang"]["ja"]  # (merged into the default ja entry)
    assert (ja["min_words"], ja["min_mean_word_length"], ja["stop_words"][:2]) == (20, None, ["の", "に"])
    assert cfg["decontaminate"]["ngram"] == 8  # (the section: the stage exists only with benchmarks)
    assert (cfg["sources"]["forum"], cfg["sources"]["books"]) == ("curated", "curated")
    assert "stop_words: [的, 了, 是, 在, 和, 有, 我, 这, 這, 就, 不, 也, 都, the" in res.stdout  # Chinese as itself
    # what it prints is a config: given back with --config, it resolves to itself
    (tmp_path / "full.yaml").write_text(res.stdout, encoding="utf-8")
    again = cli("config", "show", "--config", tmp_path / "full.yaml")
    assert again.returncode == 0 and again.stdout == res.stdout


def test_config_init_writes_a_file_that_changes_nothing_until_edited(corpus, tmp_path):
    res = cli("config", "init", "my.yaml", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout == "wrote my.yaml; use it: dataclean run INPUT -o OUT --config my.yaml\n"
    text = (tmp_path / "my.yaml").read_text(encoding="utf-8")
    assert "    min_words: 50                  # a web document with fewer words" in text
    # it is a config, and it resolves to the defaults
    assert cli("config", "show", "--config", "my.yaml", cwd=tmp_path).stdout == cli("config", "show").stdout
    # never overwritten unasked
    (tmp_path / "my.yaml").write_text(text.replace("min_words: 50 ", "min_words: 40 "), encoding="utf-8")
    refused = cli("config", "init", "my.yaml", cwd=tmp_path)
    assert (refused.returncode, refused.stdout, refused.stderr) == (
        2, "", "error: my.yaml exists; give --force to overwrite it, or another PATH\n")
    # the edited file drives a run
    run_ok(corpus, "-o", tmp_path / "out", "--config", tmp_path / "my.yaml")
    assert ledger(tmp_path / "out") == sorted(DUPLICATES + [
        ("zh-short", "gopher_quality", "gopher_short_doc", 36.0, 40.0)])
    forced = cli("config", "init", "my.yaml", "--force", cwd=tmp_path)
    assert forced.returncode == 0 and (tmp_path / "my.yaml").read_text(encoding="utf-8") == text


def test_add_stages_places_entries_without_restating_the_pipeline():
    """``add_stages:`` inserts entries into the default pipeline: by default before the first corpus-wide stage
    (after every pass-1 filter), or ``before:`` / ``after:`` a named stage; later patches reach them."""
    from dataclean.config import ConfigError, resolve_config

    base = [s.get("name") or s["stage"] for s in resolve_config()["pipeline"]]
    cfg = resolve_config({"add_stages": [{"stage": "long_tokens", "name": "late_blobs"},
                                         {"stage": "long_tokens", "name": "early_blobs", "before": "langid"},
                                         {"stage": "long_tokens", "name": "after_c4", "after": "c4"}],
                          "stages": {"late_blobs": {"max_token_chars": 5000}}})
    names = [s.get("name") or s["stage"] for s in cfg["pipeline"]]
    assert names == (base[:base.index("langid")] + ["early_blobs"] + base[base.index("langid"):base.index("c4") + 1]
                     + ["after_c4"] + base[base.index("c4") + 1:base.index("exact_dedup")] + ["late_blobs"]
                     + base[base.index("exact_dedup"):])
    assert next(s for s in cfg["pipeline"] if s.get("name") == "late_blobs")["max_token_chars"] == 5000
    assert "add_stages" not in cfg
    for bad, message in [
        ({"add_stages": {"stage": "c4"}}, "add_stages: expected a list of stage entries, e.g. add_stages: "
                                          "[{stage: mypkg.filters:MyFilter, before: exact_dedup}]; got dict"),
        ({"add_stages": [{"before": "c4"}]}, "add_stages[0]: expected a stage entry with a stage: key, e.g. "
                                             "{stage: mypkg.filters:MyFilter}; got {'before': 'c4'}"),
        ({"add_stages": [{"stage": "c4", "before": "c4", "after": "c4"}]},
         "add_stages[0]: give before: or after:, not both"),
    ]:
        with pytest.raises(ConfigError) as err:
            resolve_config(bad)
        assert str(err.value) == message
    with pytest.raises(ConfigError) as err:
        resolve_config({"add_stages": [{"stage": "c4", "name": "c4b", "after": "gopher_qualty"}]})
    assert str(err.value).startswith("add_stages[0].after: no stage gopher_qualty in the pipeline (did you mean "
                                     "gopher_quality?); stages: normalize, langid,")
