"""`dataclean rules`: every rule of the configured pipeline with its thresholds and where they are set."""
import json

from conftest import REPO, run_cli


def rules_json(*args):
    res = run_cli("rules", "--format", "json", *args)
    assert res.returncode == 0, res.stderr
    return {(r["stage"], r["rule"]): r for r in json.loads(res.stdout)}


def test_default_rules_name_signal_thresholds_languages_sources_and_file():
    rows = rules_json()
    short = rows[("gopher_quality", "gopher_short_doc")]
    assert (short["signal"], short["compare"], short["thresholds"]) == ("gopher_word_count", "min", {"min_words": 50})
    assert short["sources"] == "kind web"
    assert short["file"] == str(REPO / "rules" / "default.yaml")
    low = rows[("langid", "lang_low_score")]
    assert low["thresholds"] == {"min_score": 0.4}
    assert low["by_lang"] == {"zh": {"min_score": 0.2}, "wuu": {"min_score": 0.2}, "yue": {"min_score": 0.2}}
    assert low["sources"] == "all but kind code"
    punct = rows[("fineweb_quality", "fineweb_line_punct_ratio")]
    assert punct["thresholds"]["line_punct_thr"] == 0.12
    assert punct["by_lang"]["zh"] == {"end_marks": ".'\"!?。！？…”」』", "line_punct_min_lines": 2}
    pii = rows[("pii", "pii_mostly")]
    assert (pii["signal"], pii["thresholds"]) == ("pii_share", {"max_pii_share": 0.3, "min_pii_matches": 10})
    # decontamination is off until benchmarks are given, and says how to turn it on
    off = rows[("decontaminate", "benchmark_overlap")]
    assert off["sources"] == "off: run with --decontaminate FILE (or decontaminate.benchmarks)"
    assert off["thresholds"] == {"max_overlap": 0.5, "min_shared_ngrams": None}
    stages = [r[0] for r in rows]
    assert stages[0] == "normalize" and stages[-2:] == ["quality_filter", "decontaminate"]
    assert len(rows) == 69


def test_rules_of_a_user_pipeline_point_at_the_user_file(tmp_path):
    cfg = tmp_path / "mine.yaml"
    cfg.write_text("pipeline:\n  - stage: normalize\n  - stage: gopher_quality\n    min_words: 20\n")
    rows = rules_json("--config", str(cfg))
    assert rows[("gopher_quality", "gopher_short_doc")]["thresholds"] == {"min_words": 20}
    assert {r["file"] for r in rows.values()} == {str(cfg)}
    assert rows[("gopher_quality", "gopher_short_doc")]["sources"] == "all"


def test_rules_table_and_bad_config(tmp_path):
    res = run_cli("rules")
    assert res.returncode == 0 and "gopher_short_doc" in res.stdout and "lang_low_score" in res.stdout
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("pipeline:\n  - stage: gopher_quality\n    min_wrds: 20\n")
    res = run_cli("rules", "--config", str(cfg))
    assert res.returncode == 2 and "min_wrds" in res.stderr and "Traceback" not in res.stderr
