"""Faults: SIGKILL at random moments and at the failpoints, writes that fail (an injected ENOSPC, a real full
tmpfs). After each, the same command run again must give byte-for-byte the output of an uninterrupted run.

The input is a small corpus of four shards (one per format) with exact and near-duplicates and repeated ids,
so that pass 1, the global step (ids, exact and MinHash dedup) and pass 2 all have work; shards are small
(``shard_max_rows: 120``) so that pass 2 writes several per task. Runs use ``--workers 2``.
"""
from __future__ import annotations

import fnmatch
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from conftest import folder_bytes, run_cli
from hostile import dup_corpus

OUTPUTS = ("data", "rejected", "stats", "dedup")
CONFIG = """\
input:
  batch_rows: 100
output:
  shard_max_rows: 120
pipeline:
  - stage: normalize
  - stage: exact_dedup
  - stage: minhash_dedup
"""
SEED = 20261129
RANDOM_KILLS = 10


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("faults")
    dup_corpus(root / "in")
    (root / "faults.yaml").write_text(CONFIG)
    return root / "in", root / "faults.yaml"


def args(corpus, out) -> list:
    inp, cfg = corpus
    return ["run", inp, "-o", out, "--config", cfg, "--workers", "2", "--quiet"]


@pytest.fixture(scope="module")
def reference(corpus, tmp_path_factory) -> dict[str, bytes]:
    """The uninterrupted run's output."""
    out = tmp_path_factory.mktemp("reference") / "out"
    res = run_cli(*args(corpus, out))
    assert res.returncode == 0, res.stderr
    assert "1200 records in" in res.stdout
    for stage in ("ids", "exact_dedup", "minhash_dedup"):  # the global step had work of every kind
        assert f"removed by {stage}: " in res.stdout, res.stdout
    assert len(list((out / "data").glob("part-00001-*.parquet"))) > 1  # several shards per task
    return folder_bytes(out, *OUTPUTS)


def start(cmd: list, env_extra: dict | None = None) -> subprocess.Popen:
    env = dict(os.environ)
    env.pop("DATACLEAN_FAILPOINTS", None)
    env.update(env_extra or {})
    return subprocess.Popen([sys.executable, "-m", "dataclean.cli", *map(str, cmd)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)


def kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)  # the driver and its spawned workers: one process group
    except ProcessLookupError:
        pass
    proc.wait(timeout=30)


def phase(out: Path) -> str:
    """Where a killed run was, from its markers."""
    markers = out / "_work" / "markers"
    if not (out / ".dataclean-run.json").exists():
        return "start"  # Python starting, inputs being listed
    names = {p.stem for p in markers.glob("*.json")} if markers.is_dir() else set()
    if "final" in names:
        return "finished"
    p1 = sum(n.startswith("pass1-") for n in names)
    p2 = sum(n.startswith("pass2-") for n in names)
    if "global" not in names:
        return f"pass 1 ({p1}/4 done)" if p1 < 4 else "global step"
    return f"pass 2 ({p2}/4 done)" if p2 < 4 else "stats"


def assert_no_partial_files(out: Path) -> None:
    """Every file a reader can see in data/ and rejected/ is a complete Parquet file; hidden temporary files
    may exist only in a killed run (the rerun removes them)."""
    for sub in ("data", "rejected"):
        for path in (out / sub).glob("*") if (out / sub).is_dir() else []:
            if not path.name.startswith("."):
                assert path.suffix == ".parquet", path
                pq.read_metadata(path)  # raises on a cut file


def assert_same_as_reference(out: Path, reference) -> None:
    expected = reference
    got = folder_bytes(out, *OUTPUTS)
    assert sorted(got) == sorted(expected)
    assert [k for k in expected if got[k] != expected[k]] == []
    assert not [p for p in out.rglob("*") if ".tmp" in p.name and "_work" not in p.parts]
    check = run_cli("verify", out)
    assert check.returncode == 0, check.stderr


#: Where a kill's random delay is measured from: the launch, and the start of each phase (seen on disk).
ANCHORS = {
    "launch": lambda out: True,
    "pass 1": lambda out: (out / ".dataclean-run.json").exists(),
    "global step": lambda out: len(list((out / "_work" / "markers").glob("pass1-*.json"))) == 4,
    "pass 2": lambda out: (out / "_work" / "markers" / "global.json").exists(),
}
#: How many of the RANDOM_KILLS moments are drawn after each anchor.
KILLS_PER_ANCHOR = {"launch": 3, "pass 1": 3, "global step": 2, "pass 2": 2}


def anchor_times(proc: subprocess.Popen, out: Path, started: float) -> dict[str, float]:
    """Seconds from ``started`` at which each anchor first held, polled until the run ends."""
    seen: dict[str, float] = {}
    while True:
        done = proc.poll() is not None
        for name, reached in ANCHORS.items():
            if name not in seen and reached(out):
                seen[name] = time.monotonic() - started
        if done:
            seen["end"] = time.monotonic() - started
            return seen
        time.sleep(0.005)


@pytest.mark.slow
def test_sigkill_at_random_moments_then_rerun(corpus, reference, tmp_path):
    """SIGKILL the whole process group at RANDOM_KILLS random moments, then rerun each to completion.

    An uninterrupted run, started the way the killed ones are just before them (so under their load), gives
    the run's duration and when each phase starts. A moment is an anchor (the launch, or the start of pass 1,
    of the global step, of pass 2) plus a delay drawn with a seeded RNG over what follows the anchor (the
    whole run for the launch, the phase's own duration for a phase): the moments cover the whole run, and
    each phase gets some however the machine's load shifts the phases in time. (The failpoint test below
    hits each phase deterministically.)"""
    assert sum(KILLS_PER_ANCHOR.values()) == RANDOM_KILLS
    timed = tmp_path / "timed"
    started = time.monotonic()
    times = anchor_times(start(args(corpus, timed)), timed, started)
    assert set(times) == {*ANCHORS, "end"}, times
    assert_same_as_reference(timed, reference)
    rng = random.Random(SEED)
    following = {"launch": "end", "pass 1": "global step", "global step": "pass 2", "pass 2": "end"}
    plan = [(anchor, (times[following[anchor]] - times[anchor]) * rng.random())
            for anchor, k in KILLS_PER_ANCHOR.items() for _ in range(k)]
    seen = []
    for i, (anchor, delay) in enumerate(plan):
        out = tmp_path / f"kill-{i}"
        proc = start(args(corpus, out))
        while not ANCHORS[anchor](out) and proc.poll() is None:
            time.sleep(0.002)
        time.sleep(delay)
        finished_first = proc.poll() is not None
        kill_group(proc)
        seen.append((anchor, round(delay, 2), "finished" if finished_first else phase(out)))
        assert_no_partial_files(out)
        again = run_cli(*args(corpus, out))
        assert again.returncode == 0, (anchor, delay, again.stderr)
        assert "Traceback" not in again.stderr
        assert_same_as_reference(out, reference)
    print(f"\nuninterrupted run: {times}\nkills (anchor, delay s, phase at the kill): {seen}")
    phases = {p.split(" (")[0] for _, _, p in seen} - {"start", "finished"}
    assert len(phases) >= 2, seen
    assert sum(p == "finished" for _, _, p in seen) <= RANDOM_KILLS // 2, seen  # most kills hit a live run


@pytest.mark.slow
def test_sigkill_at_each_failpoint_in_turn_then_rerun(corpus, reference, tmp_path):
    """One output folder, killed at a failpoint of pass 1, then (resuming) in the global step, then in pass 2,
    then after the stats: each rerun resumes what the last one left, the last finishes like an uninterrupted
    run. (tests/test_e2e.py kills fresh runs at seven failpoints one by one.)"""
    out = tmp_path / "out"
    for point in ("pass1-files-1", "pass1-done-3", "global-mid", "global-written", "pass2-files-2",
                  "stats-written"):
        if point == "pass1-done-3" and (out / "_work" / "markers" / "pass1-00003.json").exists():
            continue  # task 3 finished before the first kill (a loaded machine): nothing left to kill there
        killed = run_cli(*args(corpus, out), env_extra={"DATACLEAN_FAILPOINTS": point})
        assert killed.returncode == -signal.SIGKILL, (point, killed.returncode, killed.stderr)
        assert not (out / "_work" / "markers" / "final.json").exists()
        assert_no_partial_files(out)
    again = run_cli(*args(corpus, out))
    assert again.returncode == 0, again.stderr
    assert_same_as_reference(out, reference)


def assert_clean_write_failure(res: subprocess.CompletedProcess, out: Path, what: str = "") -> str:
    """Exit 3, one line on stderr naming the file and the cause, no traceback, nothing partial visible."""
    assert res.returncode == 3, (what, res.returncode, res.stderr)
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1, res.stderr
    assert lines[0].startswith("error: cannot write ") and "No space left on device" in lines[0], lines[0]
    assert "Traceback" not in res.stdout + res.stderr
    assert_no_partial_files(out)
    for sub in ("data", "rejected", "stats", "dedup"):  # a failed write removes its temporary files
        assert not [p for p in (out / sub).glob("*") if ".tmp" in p.name or p.name.startswith(".")], sub
    assert not (out / "_work" / "markers" / "final.json").exists()
    return lines[0]


#: Where an injected ENOSPC strikes, in run order. Each entry is one run into the same folder: the run fails
#: there and the next resumes from what it left.
WRITE_FAILURES = [  # every task's file of that kind fails, so that no task can finish first
    ("pass 1 shard", "*/_work/pass1/*/docs-*"),
    ("pass 1 marker", "*/_work/markers/pass1-*.json"),
    ("global step artifact", "*/dedup/clusters.parquet"),
    ("pass 2 data shard (the second of a task)", "*/data/part-*-00001.parquet"),
    ("pass 2 ledger shard", "*/rejected/part-*"),
    ("stats", "*/stats/funnel.parquet"),
]


@pytest.mark.slow
def test_disk_full_injected_at_each_writer_then_rerun(corpus, reference, tmp_path):
    out = tmp_path / "out"
    for where, glob in WRITE_FAILURES:
        failed = run_cli(*args(corpus, out), env_extra={"DATACLEAN_FAILPOINTS": "write-fail:" + glob})
        line = assert_clean_write_failure(failed, out, where)
        assert "(injected" not in line  # the cause is told as the OS tells it
        assert fnmatch.fnmatch(line.split()[3].rstrip(":"), glob), (where, line)
    again = run_cli(*args(corpus, out))  # the space is back
    assert again.returncode == 0, again.stderr
    assert_same_as_reference(out, reference)


@pytest.mark.parametrize("size", ["400k", "1200k"])
def test_disk_full_on_a_real_small_tmpfs_then_rerun(size, corpus, reference, tmp_path):
    """The run needs about 2 MiB; a tmpfs of 400 KiB fills in pass 1, one of 1,200 KiB (today) while DuckDB
    writes the global step's files. After a remount with room, the rerun finishes with the same output."""
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    mounted = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(mnt)], capture_output=True)
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        out = mnt / "out"
        failed = run_cli(*args(corpus, out))
        line = assert_clean_write_failure(failed, out)
        print(f"\nfull tmpfs of {size}: {line}")
        subprocess.run(["mount", "-o", "remount,size=64m", str(mnt)], check=True)
        again = run_cli(*args(corpus, out))
        assert again.returncode == 0, again.stderr
        assert_same_as_reference(out, reference)
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)


# ---------------------------------------------------------------------------------------------------------
# The writers alone (in-process, fast)


def test_shard_writer_failure_leaves_no_file_and_says_why(tmp_path, monkeypatch):
    import pyarrow as pa

    from dataclean.io.writers import ShardWriter, WriteError

    monkeypatch.setenv("DATACLEAN_FAILPOINTS", "write-fail:*/part-00002.parquet")
    schema = pa.schema([("x", pa.int64())])
    w = ShardWriter(str(tmp_path), "part", schema, max_rows=10)
    with pytest.raises(WriteError) as exc:
        w.write(pa.table({"x": list(range(35))}))  # the third shard fails while two wait to be committed
    assert str(exc.value) == (f"cannot write {tmp_path}/part-00002.parquet: No space left on device; free space "
                              "(or fix the folder) and run the same command again to resume")
    assert list(tmp_path.iterdir()) == []  # its own temporary files and the two finished ones are gone


def test_failed_rewrite_keeps_the_previous_file(tmp_path, monkeypatch):
    import pyarrow as pa

    from dataclean.io.writers import WriteError, atomic_write_table, write_json_atomic

    atomic_write_table(pa.table({"x": [1]}), str(tmp_path / "t.parquet"))
    write_json_atomic({"v": 1}, str(tmp_path / "m.json"))
    monkeypatch.setenv("DATACLEAN_FAILPOINTS", "write-fail:*")
    with pytest.raises(WriteError):
        atomic_write_table(pa.table({"x": [2]}), str(tmp_path / "t.parquet"))
    with pytest.raises(WriteError):
        write_json_atomic({"v": 2}, str(tmp_path / "m.json"))
    assert pq.read_table(tmp_path / "t.parquet").column("x").to_pylist() == [1]
    assert (tmp_path / "m.json").read_text() == '{\n  "v": 1\n}\n'
    assert sorted(p.name for p in tmp_path.iterdir()) == ["m.json", "t.parquet"]


def test_run_killed_while_writing_its_owner_file_can_be_rerun(tmp_path):
    """A kill between creating the output folder and renaming its owner file leaves only the owner's temporary
    file: the folder is still the run's own, not a foreign folder to refuse."""
    from dataclean.io.writers import tmp_name
    from hostile import write_jsonl

    write_jsonl(tmp_path / "in" / "a.jsonl", [{"text": "hello there"}])
    (tmp_path / "out").mkdir()
    owner_tmp = Path(tmp_name(str(tmp_path / "out" / ".dataclean-run.json")))
    owner_tmp.write_text('{"tool": "datac')
    res = run_cli("run", "in", "-o", "out", "--quiet", "--config", Path(__file__).parent / "configs" /
                  "foundation.yaml", cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    assert not owner_tmp.exists()


def test_a_run_folder_of_another_file_format_is_not_resumed(tmp_path, monkeypatch):
    import dataclean
    from dataclean import layout
    from dataclean.exec import runner

    shard = tmp_path / "in.jsonl"
    shard.write_text('{"id": "a", "text": "one line of text"}\n', encoding="utf-8")
    cfg = dataclean.resolve_config(None)
    now = runner.fingerprint(cfg, [str(shard)])
    dataclean.run([str(shard)], str(tmp_path / "out"), config=cfg)
    monkeypatch.setattr(layout, "FILE_FORMAT", layout.FILE_FORMAT - 1)  # a folder written by an older dataclean
    assert runner.fingerprint(cfg, [str(shard)]) != now
    with pytest.raises(dataclean.RunError, match="or another version of dataclean"):
        dataclean.run([str(shard)], str(tmp_path / "out"), config=cfg)
