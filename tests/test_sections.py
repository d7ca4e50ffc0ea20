"""The typed config sections name exactly the keys of rules/default.yaml's input, output and global."""
from dataclasses import fields

import pytest

from dataclean.config import default_config, resolve_config
from dataclean.io.readers import ColumnMapping
from dataclean.sections import COLUMN_KEYS, GlobalSection, InputSection, OutputSection, with_partitions

pytestmark = pytest.mark.unit


@pytest.mark.parametrize("cls,section", [(InputSection, "input"), (OutputSection, "output"),
                                         (GlobalSection, "global")])
def test_section_fields_are_the_yaml_keys(cls, section):
    keys = set(default_config()[section])
    names = {f.name for f in fields(cls)}
    if cls is InputSection:  # default_source travels inside the column mapping
        names = names - {"columns"} | {"columns", "default_source"}
    assert names == keys


def test_column_keys_are_the_yaml_columns_and_the_mapping_fields():
    assert set(default_config()["input"]["columns"]) == set(COLUMN_KEYS)
    assert {f.name for f in fields(ColumnMapping)} == set(COLUMN_KEYS) | {"default_source"}


def test_sections_read_a_users_values():
    cfg = resolve_config({"input": {"columns": {"text": "content", "id": None, "lang": "language"},
                                    "default_source": "forum_zh", "batch_rows": 512},
                          "output": {"shard_max_mb": 3, "report": False},
                          "global": {"partitions": 4, "temp_directory": "/tmp/spill"}})
    inp, out, g = InputSection.of(cfg), OutputSection.of(cfg), GlobalSection.of(cfg)
    assert inp.columns == ColumnMapping(text="content", id=None, source="source", url="url", lang="language",
                                        default_source="forum_zh")
    assert (inp.batch_rows, inp.max_record_bytes, inp.default_source) == (512, 268435456, "forum_zh")
    assert (inp.split_mb, inp.split_bytes) == (16, 16 << 20)
    assert (out.shard_max_rows, out.shard_max_mb, out.shard_max_bytes, out.row_group_rows) == \
        (100_000, 3, 3 << 20, 8192)
    assert (out.rejected_text, out.report) == (True, False)
    assert (g.partitions, g.temp_directory, g.duckdb_memory_limit, g.duckdb_threads, g.task_memory_limit) == \
        (4, "/tmp/spill", "auto", 2, "auto")


def test_with_partitions_leaves_the_given_config_alone():
    cfg = resolve_config({})
    scaled = with_partitions(cfg, 2)
    assert GlobalSection.of(scaled).partitions == 2
    assert GlobalSection.of(cfg).partitions == 8
    assert scaled["global"]["duckdb_memory_limit"] == cfg["global"]["duckdb_memory_limit"]
