"""Safety: a config cannot run code, and a run never writes where it would read (or delete what is not its own).

Tested elsewhere, not repeated here: pickled model files are refused without being unpickled
(tests/test_quality_linear.py::test_pickles_are_never_unpickled); ``--fresh`` keeps a user's file beside a
run's entries (tests/test_e2e.py::test_changed_config_is_refused_then_fresh_restarts) and refuses a folder
dataclean did not write (tests/test_e2e.py::test_refuses_foreign_output_folder).
"""
from __future__ import annotations

import pytest

from conftest import REPO, run_cli
from dataclean.config import ConfigError, resolve_config
from hostile import write_jsonl

FOUNDATION = REPO / "tests" / "configs" / "foundation.yaml"


@pytest.mark.parametrize("tag", ["!!python/object/apply:os.system", "!!python/object/new:os.system",
                                 "!!python/name:os.system"])
def test_yaml_python_tags_are_refused_not_run(tmp_path, tag):
    marker = tmp_path / "ran"
    cfg = tmp_path / "evil.yaml"
    cfg.write_text(f'pipeline: {tag} ["touch {marker}"]\n')
    with pytest.raises(ConfigError, match=r"is not valid YAML: line 1, column 11: could not determine a constructor"):
        resolve_config(str(cfg))
    assert not marker.exists()


def test_yaml_python_tag_through_the_cli(tmp_path):
    marker = tmp_path / "ran"
    (tmp_path / "evil.yaml").write_text(f'pipeline: !!python/object/apply:os.system ["touch {marker}"]\n')
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": "hello"}])
    res = run_cli("run", "in", "-o", "out", "--config", "evil.yaml", "--quiet", cwd=tmp_path)
    assert res.returncode == 2
    assert res.stderr == ("error: config evil.yaml is not valid YAML: line 1, column 11: could not determine a "
                          "constructor for the tag 'tag:yaml.org,2002:python/object/apply:os.system'\n")
    assert "Traceback" not in res.stderr
    assert not marker.exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize("inputs, output", [
    (["in"], "in"),  # the output folder is the input folder
    (["in"], "in/out"),  # inside it: the next run would read the output as input
    (["in/**/*.jsonl"], "in/deep/out"),  # inside a recursive glob's root
])
def test_output_inside_an_input_folder_is_refused(tmp_path, inputs, output):
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": "hello"}])
    res = run_cli("run", *inputs, "-o", output, "--config", FOUNDATION, "--quiet", cwd=tmp_path)
    assert res.returncode == 2, res.stdout
    assert res.stderr.splitlines() == [f"error: output folder {output} is inside the input folder {inputs[0]}; its "
                                       "files would be read as input by the next run: choose an output folder "
                                       "outside the inputs"]
    assert sorted(p.name for p in (tmp_path / "in").rglob("*")) == ["a.jsonl"]  # nothing written there


def test_output_beside_a_named_input_file_is_allowed(tmp_path):
    """A file named on the command line is read, not searched: an output folder next to it is not input."""
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": "hello there"}])
    for _ in range(2):  # and the rerun is the same run
        res = run_cli("run", "in/a.jsonl", "-o", "in/out", "--config", FOUNDATION, "--quiet", cwd=tmp_path)
        assert res.returncode == 0, res.stderr
        assert res.stdout.startswith("1 records in: 1 kept")


def test_fresh_on_a_dataclean_output_removes_only_its_entries(tmp_path):
    """``--fresh`` after a finished run: the run's entries go, a file the user put beside them stays."""
    write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": "hello there"}])
    assert run_cli("run", "in", "-o", "out", "--config", FOUNDATION, "--quiet", cwd=tmp_path).returncode == 0
    (tmp_path / "out" / "NOTES.md").write_text("mine")
    (tmp_path / "out" / "data" / "stray.tmp").write_text("x")  # in a dataclean folder: dataclean's to remove
    res = run_cli("run", "in", "-o", "out", "--config", FOUNDATION, "--quiet", "--fresh", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert (tmp_path / "out" / "NOTES.md").read_text() == "mine"
    assert not (tmp_path / "out" / "data" / "stray.tmp").exists()


def test_stats_prints_source_names_as_text_not_markup(tmp_path):
    """A source named like rich markup (``[/]`` crashed ``stats`` with a MarkupError; ``[link=…]`` printed a
    disguised terminal hyperlink) is printed as written."""
    names = ["[/]", "[link=https://evil.example/x]web[/link]", "[blink]x[/blink]"]
    write_jsonl(tmp_path / "in.jsonl", [{"id": str(i), "text": f"document number {i} of a source", "source": n}
                                        for i, n in enumerate(names)])
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(FOUNDATION.read_text() + "output:\n  report: false\n")
    assert run_cli("run", tmp_path / "in.jsonl", "-o", tmp_path / "out", "--config", cfg, "--quiet").returncode == 0
    res = run_cli("stats", tmp_path / "out")
    assert res.returncode == 0, res.stderr
    for name in names:
        assert name in res.stdout
    assert "\x1b]8;" not in res.stdout and "\x1b[5m" not in res.stdout


def test_a_yaml_syntax_error_is_one_line_with_where(tmp_path):
    """PyYAML's own message spans four lines; the config error names the line and column on one."""
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("pipeline:\n  - stage: gopher_quality\n   min_words: 3\n")
    with pytest.raises(ConfigError) as exc:
        resolve_config(str(cfg))
    assert str(exc.value) == (f"config {cfg} is not valid YAML: line 3, column 4: did not find expected '-' "
                              "indicator (while parsing a block collection that starts at line 2, column 3)")


def test_an_unknown_top_level_key_names_the_closest_and_the_keys(tmp_path):
    cfg = tmp_path / "typo.yaml"
    cfg.write_text("pipelin:\n  - stage: gopher_quality\n")
    with pytest.raises(ConfigError) as exc:
        resolve_config(str(cfg))
    assert str(exc.value) == ("unknown config key 'pipelin' (did you mean pipeline?); the keys at the top level: "
                              "version, seed, memory_limit, input, sources, pipeline, tokens, output, global, "
                              "decontaminate, mixture, extract")
