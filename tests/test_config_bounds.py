"""Bounded config sizes and YAML aliases, and key partitions scaled to the inputs (issue 25: items 4, 8 and
10)."""
import json
import os

import pytest

from conftest import SAMPLE, folder_bytes, run_cli
from dataclean.config import ConfigError, load_yaml, resolve_config
from hostile import write_jsonl

DOCS = [{"id": "en-1", "text": "The harbour master logged three ships before noon and one after."},
        {"id": "zh-1", "text": "图书馆周一闭馆，周二至周日上午九点开放，下午五点停止入馆。"},
        {"id": "en-2", "text": "Rain delayed the ferry, so the passengers waited in the café by the pier."}]


BOMB = "".join([
    'a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]\n',
    *[f"{x}: &{x} [{','.join(['*' + p] * 9)}]\n" for p, x in zip("abcdefg", "bcdefgh")],
])


@pytest.mark.parametrize("where", ["seed", "stop_words"])
def test_a_yaml_alias_bomb_is_refused_at_once(tmp_path, where):
    cfg = tmp_path / "bomb.yaml"
    if where == "seed":
        cfg.write_text(BOMB + "seed: *h\n")
    else:
        cfg.write_text(BOMB + "pipeline:\n  - stage: gopher_quality\n    stop_words: *h\n")
    assert len(cfg.read_bytes()) < 400
    res = run_cli("run", SAMPLE, "-o", tmp_path / "out", "--quiet", "--config", cfg, timeout=60)
    assert res.returncode == 2
    assert res.stderr == (f"error: config {cfg}: its YAML aliases (*name) expand it to more than 1,000,000 values "
                          "(an alias bomb?); write the values out\n")
    assert not (tmp_path / "out").exists()


def test_yaml_aliases_are_limited_by_count_and_recursion(tmp_path):
    many = tmp_path / "many.yaml"
    many.write_text("x: &x 1\nlist: [" + ", ".join(["*x"] * 1001) + "]\n")
    with pytest.raises(ConfigError, match=r"^config .*many.yaml: 1,001 YAML aliases \(\*name\), more than the "
                                          r"1,000 allowed; write the values out$"):
        load_yaml(many)
    loop = tmp_path / "loop.yaml"
    loop.write_text("seed: &s [1, *s]\n")
    with pytest.raises(ConfigError, match=r"a YAML alias \(\*name\) refers to a value that contains it$"):
        load_yaml(loop)
    fine = tmp_path / "fine.yaml"  # what rules/default.yaml does: a few shared mappings
    fine.write_text("base: &b {x: 1, y: 2}\nzh: *b\nja: *b\n")
    assert load_yaml(fine) == {"base": {"x": 1, "y": 2}, "zh": {"x": 1, "y": 2}, "ja": {"x": 1, "y": 2}}


@pytest.mark.parametrize("patch, message", [
    ({"stage": "minhash_dedup", "num_perm": 100_000_000},
     "pipeline[0] (minhash_dedup).num_perm: must be an integer from 2 to 1,024 (4 bytes per document each, in "
     "pass 1's files and memory), got 100000000"),
    ({"stage": "minhash_dedup", "chunk_nodes": 0},
     "pipeline[0] (minhash_dedup).chunk_nodes: must be an integer from 1 to 10,000,000 (documents verified in "
     "memory at once), got 0"),
])
def test_stage_sizes_outside_sane_bounds_are_one_line_errors(patch, message):
    with pytest.raises(ConfigError) as err:
        resolve_config({"pipeline": [patch]})
    assert str(err.value) == message


def test_input_and_global_sizes_are_bounded():
    with pytest.raises(ConfigError) as err:
        resolve_config({"input": {"batch_rows": 10**12}})
    assert str(err.value) == ("input.batch_rows: must be an integer from 1 to 1,000,000 (rows held in memory at "
                              "once per worker), got 1000000000000")


def test_partitions_scale_down_to_a_small_input(tmp_path):
    write_jsonl(tmp_path / "in" / "a.jsonl", DOCS)
    src = tmp_path / "in"
    cfg = tmp_path / "many.yaml"
    cfg.write_text("global:\n  partitions: 100000\n")
    out = tmp_path / "out"
    res = run_cli("run", src, "-o", out, "--quiet", "--config", cfg)
    assert res.returncode == 0, res.stderr
    assert json.loads((out / "manifest.json").read_text())["config"]["global"]["partitions"] == 1
    assert sum(len(files) for _, _, files in os.walk(out)) < 60
    ref = run_cli("run", src, "-o", tmp_path / "ref", "--quiet")
    assert ref.returncode == 0, ref.stderr
    assert folder_bytes(out, "data", "rejected", "dedup") == folder_bytes(tmp_path / "ref", "data", "rejected",
                                                                           "dedup")
