"""`dataclean eval LABELS`: the pipeline's decisions against labelled documents, through the real CLI."""
import json

import pytest

from conftest import run_cli
from dataclean.evaluation import LabelsError, read_labels

DOCS = [
    {"id": "en-good-1", "label": "keep", "source": "cc-2024", "text": (
        "The river rises in the hills above the town and runs for forty miles to the sea. In the spring the water "
        "is high and fast, and the old stone bridge has been closed twice in the last ten years. The council has "
        "asked engineers to look at the arches, which were built in 1820. Their report, published this week, says "
        "that the bridge is safe for people on foot but that heavy lorries should use the new road to the north. "
        "Residents who spoke to us were relieved that the bridge will stay open.")},
    {"id": "en-bad-1", "label": "remove", "source": "cc-2024",
     "text": "Home | Shop | Cart\nBest deals today\nClick here\nSign in"},
    {"id": "en-good-2", "label": 1, "source": "forum", "text": "Thanks for the quick reply, that fixed it."},
    {"id": "zh-good-1", "label": "keep", "lang": "zh", "source": "web_zh", "text": (
        "这座城市位于长江下游的平原上，历史悠久，文化遗产丰富。每年春天，来自各地的游客都会来这里看花。当地政府近年来修复了"
        "多处古建筑，并在老城区开辟了步行街。居民们说，老街的变化很大，但传统的小吃店仍然保留了下来。今年夏天，博物馆还将"
        "举办一次关于运河历史的展览，展出近两百件文物。")},
    {"id": "zh-bad-1", "label": "remove", "lang": "zh", "source": "web_zh",
     "text": "首页 | 新闻 | 联系我们\n热门推荐\n点击进入"},
]


@pytest.fixture()
def labels(tmp_path):
    path = tmp_path / "labels.jsonl"
    path.write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in DOCS), encoding="utf-8")
    return path


def test_eval_reports_precision_recall_retention_rules_and_misjudged(labels, tmp_path):
    res = run_cli("eval", labels, "--format", "json", "--keep-run", tmp_path / "run")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    overall = report["overall"]
    assert {k: overall[k] for k in ("docs", "good", "bad", "removed", "removed_bad", "kept_bad")} == \
        {"docs": 5, "good": 3, "bad": 2, "removed": 3, "removed_bad": 2, "kept_bad": 0}
    assert overall["precision"] == pytest.approx(2 / 3) and overall["recall"] == 1.0
    assert overall["good_retention"] == pytest.approx(2 / 3)
    assert report["by_lang"]["zh"]["precision"] == 1.0 and report["by_lang"]["zh"]["good_retention"] == 1.0
    assert report["by_lang"]["en"]["docs"] == 3  # language from the run's langid where the file gives none
    assert [(r["rule"], r["removed"], r["removed_bad"]) for r in report["rules"]] == [("gopher_short_doc", 3, 2)]
    assert [(m["id"], m["fate"], m["rule"], m["value"], m["threshold"]) for m in report["misjudged"]] == \
        [("en-good-2", "removed", "gopher_short_doc", 8.0, 50.0)]
    # the users' own source names are web: they got the web rules
    assert report["sources"] == {"cc-2024": {"kind": "web", "input": 2}, "forum": {"kind": "web", "input": 1},
                                 "web_zh": {"kind": "web", "input": 2}}
    assert (tmp_path / "run" / "rejected").is_dir()  # kept for dataclean inspect
    assert overall["scored"] == 5 and 0.0 <= overall["quality_auc"] <= 1.0


def test_eval_table(labels):
    res = run_cli("eval", labels)
    assert res.returncode == 0, res.stderr
    lines = res.stdout.splitlines()
    assert lines[0].split() == ["group", "docs", "good", "bad", "removed", "precision", "recall", "good", "kept",
                                "q", "AUC"]
    assert lines[1].split()[:8] == ["all", "5", "3", "2", "3", "0.667", "1.000", "0.667"]
    assert "gopher_quality / gopher_short_doc" in res.stdout
    assert "misjudged: 1 (1 good removed, 0 bad kept)" in lines
    assert "  keep   en   en-good-2: gopher_quality / gopher_short_doc value=8.000 threshold=50.000" in lines


def test_eval_a_config_changes_the_decisions(labels, tmp_path):
    cfg = tmp_path / "lenient.yaml"
    cfg.write_text("sources:\n  forum: curated\n")
    res = run_cli("eval", labels, "--config", cfg, "--format", "json")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["overall"]["good_retention"] == 1.0 and report["misjudged"] == []


def test_labels_mistakes_are_one_line_with_the_fix(tmp_path):
    wrong = tmp_path / "wrong.jsonl"
    wrong.write_text('{"id": "a", "content": "Some text.", "label": "keep"}\n')
    res = run_cli("eval", wrong)
    assert res.returncode == 2
    assert res.stderr == (f"error: {wrong}: record 1 has no text column 'text'; its columns are content, id, label: "
                          "pass --text-column NAME\n")
    assert run_cli("eval", wrong, "--text-column", "content").returncode == 0
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"id": "a", "text": "Some text.", "label": "maybe"}\n')
    res = run_cli("eval", odd)
    assert res.returncode == 2 and "label 'maybe' (row 0) is not 1/0" in res.stderr and "Traceback" not in res.stderr


def test_read_labels_accepts_keep_remove_numbers_and_refuses_repeated_ids(tmp_path):
    path = tmp_path / "l.jsonl"
    path.write_text('{"id": 1, "text": "a", "label": "remove"}\n{"id": 2, "text": "b", "label": 1}\n'
                    '{"text": "c", "label": "good"}\n')
    t = read_labels([str(path)])
    assert t.column("id").to_pylist() == ["1", "2", "l.jsonl#2"]
    assert t.column("label").to_pylist() == [False, True, True]
    with pytest.raises(LabelsError, match="id '1' is labelled twice"):
        read_labels([str(path), str(path)])


def test_a_users_own_column_names(tmp_path):
    path = tmp_path / "mine.jsonl"
    path.write_text("".join(json.dumps({"doc": d["id"], "body": d["text"], "verdict": d["label"],
                                        "site": d["source"], "language": d.get("lang")}, ensure_ascii=False) + "\n"
                            for d in DOCS), encoding="utf-8")
    res = run_cli("eval", path, "--format", "json", "--id-column", "doc", "--text-column", "body",
                  "--label-column", "verdict", "--source-column", "site", "--lang-column", "language")
    assert res.returncode == 0, res.stderr
    report = json.loads(res.stdout)
    assert report["overall"]["removed_bad"] == 2 and report["by_lang"]["zh"]["docs"] == 2
    assert sorted(report["sources"]) == ["cc-2024", "forum", "web_zh"]
