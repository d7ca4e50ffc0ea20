"""One memory budget (``memory_limit``, ``dataclean run --memory-limit``): sizes, the plan of workers and
DuckDB limits derived from it, the process tree it is measured on, and runs under it (dataclean/exec/memory.py)."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from conftest import SAMPLE, folder_bytes, run_cli
from dataclean.config import ConfigError, decision_hash, resolve_config
from dataclean.exec import memory
from dataclean.fingerprint import fingerprint

pytestmark = pytest.mark.timeout(600)

MiB = 1 << 20


@pytest.mark.parametrize("text, size", [("2GB", 2_000_000_000), ("1.5GiB", 1_610_612_736), ("512MB", 512_000_000),
                                        ("4G", 4 << 30), ("100 MiB", 100 << 20), ("3gb", 3_000_000_000),
                                        (1_048_576, 1_048_576)])
def test_sizes_are_read_as_duckdb_reads_them(text, size):
    assert memory.parse_size(text, "memory_limit") == size


@pytest.mark.parametrize("bad", ["4XB", "GB", "-1GB", "0GB", True, 0, 2.5])
def test_a_bad_size_is_one_line_with_examples(bad):
    with pytest.raises(ValueError) as exc:
        memory.parse_size(bad, "memory_limit")
    assert str(exc.value) == f"memory_limit: expected a size such as 4GB, 1.5GiB or 512MB (or auto), got {bad!r}"


def test_a_size_without_a_unit_is_refused_not_guessed():
    with pytest.raises(ValueError) as exc:
        memory.parse_size("2", "memory_limit")
    assert str(exc.value) == "memory_limit: '2' has no unit: write 2GB, 2MB or 2GiB"


def test_a_bad_size_in_the_config_names_its_key():
    with pytest.raises(ConfigError, match=r"^global.task_memory_limit: expected a size such as 4GB"):
        resolve_config({"global": {"task_memory_limit": "lots"}})
    assert resolve_config({"memory_limit": "3GB"})["memory_limit"] == "3GB"
    assert resolve_config({})["memory_limit"] == "auto"


def test_a_number_for_a_memory_key_asks_for_its_unit(tmp_path):
    """YAML reads ``memory_limit: 4`` as a number: 4 bytes or 4 GB is not guessed, the unit is asked for."""
    with pytest.raises(ConfigError) as exc:
        resolve_config({"memory_limit": 4})
    assert str(exc.value) == "memory_limit: '4' has no unit: write 4GB, 4MB or 4GiB"
    with pytest.raises(ConfigError) as exc:
        resolve_config({"global": {"duckdb_memory_limit": 1.5}})
    assert str(exc.value) == "global.duckdb_memory_limit: '1.5' has no unit: write 1.5GB, 1.5MB or 1.5GiB"
    cfg = tmp_path / "mem.yaml"
    cfg.write_text("memory_limit: 4\n", encoding="utf-8")
    inp = tmp_path / "in.jsonl"
    inp.write_text('{"id": "a", "text": "one document"}\n', encoding="utf-8")
    r = subprocess.run([sys.executable, "-m", "dataclean", "run", str(inp), "-o", str(tmp_path / "out"),
                        "--config", str(cfg)], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0
    assert r.stderr.strip().splitlines() == ["error: memory_limit: '4' has no unit: write 4GB, 4MB or 4GiB"]
    assert not (tmp_path / "out" / "data").exists()


def _dedup_cfg(**top) -> dict:
    """A pipeline without model files, 1,024-row batches: a worker is planned at 300 + 16 MiB."""
    return resolve_config({"pipeline": [{"stage": "normalize"}, {"stage": "exact_dedup"}],
                           "input": {"batch_rows": 1024}, **top})


def test_the_workers_are_cut_to_those_that_fit_with_a_note():
    cfg = _dedup_cfg(memory_limit="1.5GB")
    assert memory.worker_bytes(cfg) == 316 * MiB
    plan = memory.plan(cfg, 4)
    # (1.5e9 - driver 260 - pool 215 - DuckDB's least 64 MiB) // 316 MiB = 2.82
    assert (plan.budget, plan.workers) == (1_500_000_000, 2)
    assert plan.notes == ("memory_limit 1.5GB fits 2 of the 4 workers asked (each is planned at 316 MiB); running 2. "
                          "Raise --memory-limit to use them all",)
    assert memory.plan(cfg, 2).notes == ()
    assert memory.plan(_dedup_cfg(memory_limit="8GB"), 4).workers == 4
    assert memory.plan(cfg, 4, local=False).workers == 4  # (Ray's workers are the cluster's)


def test_a_budget_below_one_worker_says_the_least_that_runs():
    with pytest.raises(ValueError) as exc:
        memory.plan(_dedup_cfg(memory_limit="500MB"), 2)
    assert str(exc.value) == ("memory_limit 500MB is less than one worker needs (671MB: the driver, a worker's models "
                              "and a batch of 1,024 rows, DuckDB's least); give at least --memory-limit 0.7GB, or a "
                              "smaller input.batch_rows")


def test_duckdb_gets_a_share_of_what_the_tree_leaves(monkeypatch):
    plan = memory.plan(_dedup_cfg(memory_limit="2GB"), 2)
    monkeypatch.setattr(memory, "tree_rss", lambda: 1_000_000_000)
    assert plan.driver == "572MiB"  # 0.6 of the 1e9 bytes left
    assert plan.task == "286MiB"  # the same, shared by the 2 workers' reduce tasks
    monkeypatch.setattr(memory, "tree_rss", lambda: 1_990_000_000)
    assert plan.driver == "64MiB"  # never less than DuckDB's least
    explicit = memory.plan(_dedup_cfg(memory_limit="2GB", **{"global": {"duckdb_memory_limit": "1GB"}}), 2)
    assert (explicit.driver, explicit.task) == ("1GB", "64MiB")


def test_the_tree_counts_the_children():
    before = memory.tree_rss()
    assert before is not None and before > 10 * MiB
    child = subprocess.Popen([sys.executable, "-c", "import sys, time; x = bytearray(200 << 20); "
                              "x[::4096] = b'1' * len(x[::4096]); print(1, flush=True); time.sleep(60)"],
                             stdout=subprocess.PIPE)
    try:
        assert child.stdout.readline() == b"1\n"
        time.sleep(0.05)
        assert memory.tree_rss() - before > 200 * MiB
    finally:
        child.kill()
        child.wait()


def test_the_memory_keys_do_not_change_the_fingerprint():
    a, b = resolve_config({}), resolve_config({"memory_limit": "3GB", "global": {"task_memory_limit": "300MB"}})
    assert decision_hash(a) == decision_hash(b)
    assert fingerprint(a, []) == fingerprint(b, [])
    assert fingerprint(a, []) != fingerprint(resolve_config({"seed": 1}), [])


def test_run_under_a_budget_is_the_run_without_one(tmp_path):
    """The same bytes out; a rerun with another --memory-limit is the same run (resumed, not refused)."""
    free = run_cli("run", SAMPLE, "-o", tmp_path / "free", "--quiet", "--workers", "2")
    assert free.returncode == 0, free.stderr
    capped = run_cli("run", SAMPLE, "-o", tmp_path / "capped", "--quiet", "--workers", "2", "--memory-limit", "1.5GB")
    assert capped.returncode == 0, capped.stderr
    assert folder_bytes(tmp_path / "free", "data", "rejected") == folder_bytes(tmp_path / "capped", "data", "rejected")
    again = run_cli("run", SAMPLE, "-o", tmp_path / "capped", "--quiet", "--workers", "2", "--memory-limit", "3GB")
    assert again.returncode == 0, again.stderr
    assert again.stdout.startswith("1686 records in: ")


def test_run_with_too_little_memory_is_one_line(tmp_path):
    res = run_cli("run", SAMPLE, "-o", tmp_path / "out", "--quiet", "--memory-limit", "300MB")
    assert res.returncode == 2
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: memory_limit 300MB is less than one worker needs ("), lines
    assert lines[0].endswith("or a smaller input.batch_rows")
    bad = run_cli("run", SAMPLE, "-o", tmp_path / "out", "--quiet", "--memory-limit", "lots")
    assert (bad.returncode, bad.stderr.strip()) == (
        2, "error: memory_limit: expected a size such as 4GB, 1.5GiB or 512MB (or auto), got 'lots'")
