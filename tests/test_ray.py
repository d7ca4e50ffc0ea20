"""The Ray executor: the whole pipeline on a local Ray cluster (2 CPUs) gives the local executor's output byte for
byte, also when a Ray worker is killed mid-task (Ray reruns the task) or the driver is killed (the rerun resumes).

Ray comes with the README's test command (`pip install -e ".[test,ray]"`); without it these tests fail (the
CLI says `the ray executor needs Ray`), they do not skip. The reference is the session's local run of sample_data with 2 workers (conftest ``sample_run``): four input
shards, the default pipeline with its global stages (ids, exact and MinHash dedup, quality filter).
"""
import json
import os
import signal
import subprocess
import sys
import time

import pytest
import yaml

from conftest import SAMPLE, folder_bytes, run_cli
from test_global_partitions import small_chunks_config

COMPARED = ("data", "rejected", "stats", "dedup")


def ray_run(out, env_extra=None):
    return run_cli("run", SAMPLE, "-o", out, "--executor", "ray", "--workers", 2, "--quiet", env_extra=env_extra)


def assert_same_as_local(out, sample_run):
    assert folder_bytes(out, *COMPARED) == folder_bytes(sample_run, *COMPARED)
    check = run_cli("verify", out)
    assert check.returncode == 0, check.stdout + check.stderr


@pytest.mark.slow
def test_ray_run_is_byte_identical_to_the_local_executor(sample_run, tmp_path):
    out = tmp_path / "ray"
    proc = ray_run(out)
    assert proc.returncode == 0, proc.stderr
    assert "1686 records in: 1090 kept, 596 removed" in proc.stdout
    assert_same_as_local(out, sample_run)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["executor"] == "ray"
    assert manifest["workers"] == 2
    # the reduce tasks of the global step ran as tasks: one marker per kind and partition (global.partitions 8)
    markers = sorted(p.name for p in (out / "_work" / "markers").glob("global-cand-*.json"))
    assert len(markers) == 3 * 8
    assert markers[0] == "global-cand-exact_dedup-00000.json"


@pytest.mark.slow
def test_ray_workers_killed_mid_task_are_retried(sample_run, tmp_path):
    """Four Ray workers die (SIGKILL of the worker process alone): in pass 1 after its shards are written, in a
    reduce task of the global step after its candidates are written, in a near-duplicate verification task
    after its removals are written, in pass 2 after the data shards are renamed. Ray runs each task again; the
    output is still the local executor's. (3 partitions and verification 2 candidates per task, so the global
    step runs many tasks on Ray; decisions do not depend on either.)"""
    state = tmp_path / "failpoints"
    state.mkdir()
    cfg = tmp_path / "small.yaml"
    cfg.write_text(yaml.safe_dump(small_chunks_config(3)))
    points = ["pass1-files-1", "reduce-minhash_dedup-2", "verify-1", "pass2-files-2"]
    out = tmp_path / "ray"
    proc = run_cli("run", SAMPLE, "-o", out, "--executor", "ray", "--workers", 2, "--quiet", "--config", cfg,
                   env_extra={"DATACLEAN_FAILPOINTS": ",".join("die-once:" + p for p in points),
                              "DATACLEAN_FAILPOINT_STATE": str(state)})
    assert proc.returncode == 0, proc.stderr
    assert sorted(os.listdir(state)) == sorted(points)  # every kill happened
    assert_same_as_local(out, sample_run)


@pytest.mark.slow
def test_ray_driver_killed_in_the_global_step_then_rerun(sample_run, tmp_path):
    """The driver (with its local Ray cluster) is SIGKILLed in the middle of the global step's decisions; the same
    command run again resumes from the markers and gives the local executor's output."""
    out = tmp_path / "ray"
    killed = ray_run(out, env_extra={"DATACLEAN_FAILPOINTS": "global-mid"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert not (out / "_work" / "markers" / "final.json").exists()
    proc = ray_run(out)
    assert proc.returncode == 0, proc.stderr
    assert_same_as_local(out, sample_run)


@pytest.mark.slow
def test_ray_driver_killed_during_pass_1_then_rerun(sample_run, tmp_path):
    """The driver's whole process group is SIGKILLed from outside as soon as the first pass-1 task is done (its
    marker appears); the rerun skips the finished tasks and gives the local executor's output."""
    out = tmp_path / "ray"
    env = dict(os.environ)
    env.pop("DATACLEAN_FAILPOINTS", None)
    driver = subprocess.Popen([sys.executable, "-m", "dataclean.cli", "run", str(SAMPLE), "-o", str(out),
                               "--executor", "ray", "--workers", "2", "--quiet"], env=env, start_new_session=True,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    markers = out / "_work" / "markers"
    try:
        while driver.poll() is None and not list(markers.glob("pass1-*.json")):
            time.sleep(0.05)
        assert driver.poll() is None, "the run ended before a pass-1 task was done"
        os.killpg(driver.pid, signal.SIGKILL)
    finally:
        driver.wait(timeout=60)
    done = sorted(p.name for p in markers.glob("pass1-*.json"))
    assert 1 <= len(done) < 4 and not (markers / "final.json").exists()
    proc = ray_run(out)
    assert proc.returncode == 0, proc.stderr
    assert_same_as_local(out, sample_run)


def test_unknown_ray_address_is_one_line(tmp_path):
    proc = run_cli("run", SAMPLE, "-o", tmp_path / "out", "--executor", "ray", "--ray-address", "127.0.0.1:1",
                   "--quiet", timeout=120)
    assert proc.returncode == 2
    assert proc.stderr.startswith("error: cannot start or reach the Ray cluster at 127.0.0.1:1")
    assert "Traceback" not in proc.stderr


def test_ray_address_without_ray_executor_is_refused(tmp_path):
    proc = run_cli("run", SAMPLE, "-o", tmp_path / "out", "--ray-address", "auto", "--quiet")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: --ray-address needs --executor ray"
