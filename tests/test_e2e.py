"""End to end: the real CLI on real shards in a temporary folder."""
import json
import subprocess
import sys

import pyarrow.parquet as pq
import pytest

from conftest import REPO, folder_bytes, run_cli

OUTPUTS = ("data", "rejected", "stats", "dedup")
FOUNDATION = REPO / "tests" / "configs" / "foundation.yaml"


def run_foundation(*args, **kw):
    return run_cli(*args, "--config", FOUNDATION, **kw)


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory, sample_data):
    out = tmp_path_factory.mktemp("clean") / "out"
    res = run_foundation("run", sample_data, "-o", out, "--workers", "1", "--quiet")
    assert res.returncode == 0, res.stderr
    return out, res


def test_run_writes_every_part_and_verifies(clean_run):
    out, res = clean_run
    for part in ("data", "rejected", "stats/summary.json", "stats/funnel.parquet", "stats/removed.parquet",
                 "stats/inputs.parquet", "manifest.json", "dedup/exact_groups.parquet"):
        assert (out / part).exists(), part
    assert "1686 records in: 1657 kept, 29 removed" in res.stdout
    v = run_cli("verify", out)
    assert v.returncode == 0, v.stderr
    assert v.stdout.startswith("ok: 1686 records in = 1657 kept + 29 removed")


def test_conservation_per_file_and_source(clean_run):
    out, _ = clean_run
    summary = json.loads((out / "stats" / "summary.json").read_text())
    assert summary["conservation_ok"] is True
    assert summary["by_source"] == {
        "code": {"input": 220, "kept": 220, "removed": 0},
        "docs": {"input": 280, "kept": 280, "removed": 0},
        "papers": {"input": 31, "kept": 30, "removed": 1},
        "web": {"input": 855, "kept": 827, "removed": 28},
        "wiki": {"input": 300, "kept": 300, "removed": 0},
    }
    inputs = pq.read_table(out / "stats" / "inputs.parquet").to_pylist()
    for row in inputs:
        assert row["records"] == row["kept"] + row["removed"], row
    assert sum(r["records"] for r in inputs) == 1686


def test_duplicates_carry_the_kept_id(clean_run):
    out, _ = clean_run
    rejected = pq.read_table(out / "rejected").to_pylist()
    kept_ids = set(pq.read_table(out / "data", columns=["id"]).column("id").to_pylist())
    dups = [r for r in rejected if r["reason"] == "exact_duplicate"]
    assert len(dups) == 29
    for r in dups:
        assert r["stage"] == "exact_dedup" and r["dup_of"] in kept_ids and r["dup_of"] < r["id"]
    # the seven copies of one dolma-cc page ("Processing Feedback ...") keep the smallest id
    groups = pq.read_table(out / "dedup" / "exact_groups.parquet").to_pylist()
    biggest = max(groups, key=lambda g: g["n"])
    assert biggest["n"] == 7 and biggest["keep_id"] == min(biggest["ids"])


def test_same_output_for_one_and_two_workers(clean_run, tmp_path, sample_data):
    out1, _ = clean_run
    out2 = tmp_path / "out2"
    res = run_foundation("run", sample_data, "-o", out2, "--workers", "2", "--quiet")
    assert res.returncode == 0, res.stderr
    a, b = folder_bytes(out1, *OUTPUTS), folder_bytes(out2, *OUTPUTS)
    assert sorted(a) == sorted(b)
    assert {k for k in a if a[k] != b[k]} == set()


def test_rerun_of_finished_run_is_a_noop(clean_run, sample_data):
    out, _ = clean_run
    before = folder_bytes(out, *OUTPUTS)
    res = run_foundation("run", sample_data, "-o", out, "--quiet")
    assert res.returncode == 0, res.stderr
    assert "1686 records in: 1657 kept, 29 removed" in res.stdout
    assert folder_bytes(out, *OUTPUTS) == before


@pytest.mark.parametrize("point", ["pass1-done-1", "pass1-files-2", "global-mid", "global-written",
                                   "pass2-files-0", "pass2-files-3", "stats-written"])
def test_resume_after_sigkill(point, clean_run, tmp_path, sample_data):
    out1, _ = clean_run
    out = tmp_path / "out"
    killed = run_foundation("run", sample_data, "-o", out, "--workers", "2", "--quiet",
                     env_extra={"DATACLEAN_FAILPOINTS": point})
    assert killed.returncode == -9, (killed.returncode, killed.stderr)
    assert not (out / "_work" / "markers" / "final.json").exists()
    again = run_foundation("run", sample_data, "-o", out, "--workers", "2", "--quiet")
    assert again.returncode == 0, again.stderr
    assert folder_bytes(out, *OUTPUTS) == folder_bytes(out1, *OUTPUTS)
    assert run_cli("verify", out).returncode == 0
    # no temporary files left visible in the output
    assert not [p for p in out.rglob("*") if ".tmp" in p.name and "_work" not in str(p)]


def test_changed_config_is_refused_then_fresh_restarts(tmp_path, sample_data):
    out = tmp_path / "out"
    assert run_foundation("run", sample_data, "-o", out, "--quiet").returncode == 0
    (out / "my-notes.txt").write_text("user file")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(FOUNDATION.read_text() + "output:\n  rejected_text: false\n")
    res = run_cli("run", sample_data, "-o", out, "--quiet", "--config", cfg)
    assert res.returncode == 2
    assert "different configuration" in res.stderr and "--fresh" in res.stderr and "Traceback" not in res.stderr
    res = run_cli("run", sample_data, "-o", out, "--quiet", "--config", cfg, "--fresh")
    assert res.returncode == 0, res.stderr
    assert (out / "my-notes.txt").read_text() == "user file"
    rejected = pq.read_table(out / "rejected").to_pylist()
    assert len(rejected) == 29 and all(r["text"] is None for r in rejected)


def test_refuses_foreign_output_folder(tmp_path, sample_data):
    out = tmp_path / "somebody"
    out.mkdir()
    (out / "thesis.tex").write_text("precious")
    res = run_foundation("run", sample_data, "-o", out, "--quiet", "--fresh")
    assert res.returncode == 2 and "not written by dataclean" in res.stderr
    assert (out / "thesis.tex").read_text() == "precious" and len(list(out.iterdir())) == 1


def test_unknown_config_key_is_named(tmp_path, sample_data):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("output:\n  rejected_txt: false\n")
    res = run_cli("run", sample_data, "-o", tmp_path / "o", "--quiet", "--config", cfg)
    assert res.returncode == 2
    assert res.stderr.strip() == ("error: unknown config key 'output.rejected_txt' (did you mean rejected_text?); "
                                  "the keys of output: shard_max_rows, shard_max_mb, row_group_rows, rejected_text, "
                                  "report")


def test_default_pipeline_on_sample_data(tmp_path, sample_data):
    """The README's command with every rule family: exact counts, conservation, same bytes for 1 and 2 workers."""
    outs = []
    for workers in ("1", "2"):
        out = tmp_path / f"w{workers}"
        res = run_cli("run", sample_data, "-o", out, "--workers", workers, "--quiet")
        assert res.returncode == 0, res.stderr
        assert run_cli("verify", out).returncode == 0
        outs.append(out)
    summary = json.loads((outs[0] / "stats" / "summary.json").read_text())
    assert (summary["input_records"], summary["kept"], summary["removed"]) == (1686, 1090, 596)
    assert summary["removed_by_stage"] == {
        "langid": 46, "garbled": 2, "repetition_runs": 1, "long_tokens": 1, "gopher_quality": 262,
        "gopher_repetition": 191, "fineweb_quality": 31, "c4": 5, "exact_dedup": 8, "minhash_dedup": 3,
        "quality_filter": 46}
    assert summary["by_source"]["code"] == {"input": 220, "kept": 220, "removed": 0}
    assert summary["by_source"]["wiki"] == {"input": 300, "kept": 300, "removed": 0}
    assert folder_bytes(outs[0], *OUTPUTS) == folder_bytes(outs[1], *OUTPUTS)
    # the data-juicer dedup demo's near-identical pairs, each reduced to its best-scored member
    clusters = pq.read_table(outs[0] / "dedup" / "clusters.parquet").to_pylist()
    assert sorted((c["cluster"].rsplit("-", 1)[1], c["id"].rsplit("-", 1)[1]) for c in clusters
                  if not c["is_representative"]) == [("12", "13"), ("7", "8"), ("9", "10")]  # best quality kept
    # every removal names its stage, rule, reason and deciding value (duplicates: the kept id instead)
    for row in pq.read_table(outs[0] / "rejected").to_pylist():
        assert row["stage"] and row["rule"] and row["reason"]
        assert row["value"] is not None or row["dup_of"] is not None or row["rule"] in ("c4_empty",)


def test_the_command_starts_without_numpy_or_arrow_and_lists_every_command():
    # `dataclean run` starts its workers' fork server before it imports the pipeline: nothing heavy before that
    code = "import sys, dataclean.cli; print(sorted(m for m in ('numpy', 'pyarrow', 'duckdb') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
    listed = run_cli("--help")
    assert listed.returncode == 0 and "  quality  Train and evaluate quality classifiers" in listed.stdout
    sub = run_cli("quality", "--help")
    assert sub.returncode == 0 and "\n  eval " in sub.stdout and "\n  train " in sub.stdout
