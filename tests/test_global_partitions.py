"""The global step's shuffle (dataclean/exec/shuffle.py): key rows partitioned by pass 1, one reduce task per
partition, the driver's decisions from the candidates only. Decisions must not depend on the partition count."""
import os
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from conftest import REPO, SAMPLE, folder_bytes, run_cli
from dataclean.dedup import keys as dedup_keys
from dataclean.exec import shuffle
from dataclean.layout import Layout
from dataclean.stages.dedup_minhash import MinHashDedup


def test_writer_puts_each_partition_in_its_own_row_group_in_input_order(tmp_path):
    w = shuffle.ShuffleWriter(str(tmp_path), "ids", shuffle.ID_SCHEMA, partitions=3)
    rows = pa.table({"id": ["a", "b", "c", "d", "e"], "doc_key": [10, 11, 12, 13, 14],
                     "origin": ["f#0", "f#1", "f#2", "f#3", "f#4"]})
    w.add(rows, np.array([5, 3, 2, 9, 8], np.uint64))  # partitions 2, 0, 2, 0, 2
    assert w.commit() == 5
    f = pq.ParquetFile(tmp_path / "shuffle-ids.parquet")
    assert f.metadata.num_row_groups == 2
    assert f.read_row_group(0).column("doc_key").to_pylist() == [11, 13]
    assert f.read_row_group(1).column("doc_key").to_pylist() == [10, 12, 14]
    assert f.read().column("partition").to_pylist() == [0, 0, 2, 2, 2]


def test_empty_writer_still_writes_a_file(tmp_path):
    w = shuffle.ShuffleWriter(str(tmp_path), "ids", shuffle.ID_SCHEMA, partitions=4)
    assert w.commit() == 0
    t = pq.read_table(tmp_path / "shuffle-ids.parquet")
    assert t.num_rows == 0 and t.column_names == ["id", "doc_key", "origin", "partition"]


def test_reduce_task_keeps_keys_seen_twice_across_tasks(tmp_path):
    lay = Layout(str(tmp_path))
    for task, ids in ((0, ["x", "y", "z"]), (1, ["y", "w"]), (2, ["z", "z"])):
        folder = lay.pass1_dir(task)
        os.makedirs(folder)
        w = shuffle.ShuffleWriter(folder, "ids", shuffle.ID_SCHEMA, partitions=2)
        keys = [(task << 40) + i for i in range(len(ids))]
        rows = pa.table({"id": ids, "doc_key": keys, "origin": [f"in{task}#{i}" for i in range(len(ids))]})
        w.add(*shuffle.id_rows(pa.RecordBatch.from_pydict({
            "id": ids, "doc_key": keys, "origin_file": [f"in{task}"] * len(ids),
            "origin_row": list(range(len(ids)))})))
        w.commit()
        assert rows.column("origin").to_pylist() == pq.read_table(
            os.path.join(folder, "shuffle-ids.parquet")).sort_by("doc_key").column("origin").to_pylist()
    found = []
    for p in range(2):
        [res] = shuffle.reduce_task(shuffle.ReduceSpec(((p, (("ids", shuffle.ID_REDUCE),)),), str(tmp_path),
                                                       (0, 1, 2), "200MB", "fp"))
        assert (res["kind"], res["partition"]) == ("ids", p)
        found += pq.read_table(tmp_path / "_work/global/cand/ids" / f"part-{p:05d}.parquet").to_pylist()
    assert sorted((r["id"], r["origin"]) for r in found) == [
        ("y", "in0#1"), ("y", "in1#0"), ("z", "in0#2"), ("z", "in2#0"), ("z", "in2#1")]
    assert (tmp_path / "_work/markers/global-cand-ids-00001.json").exists()
    assert not list((tmp_path / "_work" / "duckdb_tmp").glob("*"))  # spill folders removed


def test_fixed_binary_key_reads_the_first_eight_bytes_little_endian():
    col = pa.array([bytes(range(16)), b"\xff" * 8 + b"\x00" * 8], pa.binary(16))
    assert dedup_keys.fixed_binary_key(col).tolist() == [0x0706050403020100, 0xFFFFFFFFFFFFFFFF]
    assert dedup_keys.fixed_binary_key(col.slice(1)).tolist() == [0xFFFFFFFFFFFFFFFF]


def test_minhash_band_rows_number_bands_per_document_and_skip_documents_without_signature():
    stage = MinHashDedup(num_perm=8, bands=2, rows=4)
    batch = pa.RecordBatch.from_pydict({
        "doc_key": pa.array([7, 8, 9], pa.int64()),
        "minhash_bands": pa.array([np.array([11, 12], "<u8").tobytes(), None, np.array([13, 14], "<u8").tobytes()],
                                  pa.binary(16))})
    rows, keys = stage.shuffle_rows(batch)
    assert rows.to_pylist() == [{"band": 1, "h": 11, "doc_key": 7}, {"band": 2, "h": 12, "doc_key": 7},
                                {"band": 1, "h": 13, "doc_key": 9}, {"band": 2, "h": 14, "doc_key": 9}]
    assert keys.tolist() == [11, 12, 13, 14]


def small_chunks_config(partitions: int) -> dict:
    """The default pipeline with near-duplicate components verified 2 candidates per task (many tasks)."""
    pipeline = yaml.safe_load((REPO / "rules" / "default.yaml").read_text())["pipeline"]
    for spec in pipeline:
        if spec["stage"] == "minhash_dedup":
            spec["chunk_nodes"] = 2
    return {"pipeline": pipeline, "global": {"partitions": partitions}, "output": {"report": False}}


@pytest.fixture(scope="module")
def partition_runs(tmp_path_factory):
    base = tmp_path_factory.mktemp("partitions")
    outs = {}
    for parts in (1, 3):
        cfg = base / f"p{parts}.yaml"
        cfg.write_text(yaml.safe_dump(small_chunks_config(parts) if parts == 3 else
                                      {"global": {"partitions": parts}, "output": {"report": False}}))
        out = base / f"out{parts}"
        proc = run_cli("run", SAMPLE, "-o", out, "--config", cfg, "--workers", 2, "--quiet")
        assert proc.returncode == 0, proc.stderr
        outs[parts] = out
    return outs


def test_decisions_do_not_depend_on_the_partition_count(partition_runs, sample_run):
    """1, 3 and the default 8 partitions (and with 3, components verified 2 candidates per task instead of all
    in one task): the same data, ledger, stats and dedup artifacts, byte for byte."""
    reference = folder_bytes(sample_run, "data", "rejected", "dedup")
    for out in partition_runs.values():
        assert folder_bytes(out, "data", "rejected", "dedup") == reference
    assert (partition_runs[3] / "stats" / "summary.json").read_text() == \
        (partition_runs[1] / "stats" / "summary.json").read_text()


def test_bad_partition_count_is_a_config_error(tmp_path):
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("global:\n  partitions: 0\n")
    proc = run_cli("run", SAMPLE, "-o", tmp_path / "out", "--config", cfg, "--quiet")
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("error: global.partitions: must be an integer from 1 to 100,000 (files per "
                                   "pass-1 task and reduce tasks; fewer are used for small inputs), got 0")


def test_a_reduce_task_killed_midway_redoes_only_the_kinds_without_a_marker(tmp_path):
    from dataclean.config import resolve_config
    from dataclean.exec.global_step import run_reduce_tasks
    from dataclean.exec.local import LocalExecutor
    from dataclean.layout import load_marker
    from dataclean.exec.tasks import pipeline_for

    out = tmp_path / "out"
    # partition 2's task wrote its ids and exact-hash candidates, but not the latter's marker
    # (one worker: the partitions run in order, so 0 and 1 are done when 2 is killed)
    r = run_cli("run", SAMPLE, "-o", out, "--quiet", "--workers", "1",
                env_extra={"DATACLEAN_FAILPOINTS": "reduce-exact_dedup-2"})
    assert r.returncode == -9
    lay = Layout(str(out))
    done = load_marker(lay, "global-cand-ids-00002")
    cfg = resolve_config(None)
    # what a killed task left in the temporary folder goes; another run's folder (another prefix) stays
    tmp_root = out / "_work" / "duckdb_tmp"
    spec = shuffle.ReduceSpec(((2, ()),), str(out), tuple(done["tasks"]), "1GB", done["fingerprint"])
    left, other = Path(shuffle.spill_folder(spec, 2)), tmp_root / "reduce-0123456789ab-00002"
    for folder in (left, other):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "duckdb_temp_block.tmp").write_bytes(b"x")

    class Pool(LocalExecutor):  # the local pool, recording its tasks
        specs: list = []

        def map(self, fn, specs, on_done=None):
            self.specs.extend(specs)
            return super().map(fn, specs, on_done)

    ex = Pool(2)
    try:
        results = run_reduce_tasks(lay, cfg, pipeline_for(cfg), done["fingerprint"], done["tasks"], executor=ex)
    finally:
        ex.close()
    kinds = ("ids", "exact_dedup", "minhash_dedup")
    assert [(res["kind"], res["partition"]) for res in results] == \
        [("exact_dedup", 2), ("minhash_dedup", 2)] + [(k, p) for p in range(3, 8) for k in kinds]
    # one task per worker of the pool, the partitions dealt round-robin
    assert [[p for p, _ in spec.jobs] for spec in ex.specs] == [[2, 4, 6], [3, 5, 7]]
    for p in range(8):
        for k in kinds:
            assert load_marker(lay, shuffle.marker_name(k, p))["fingerprint"] == done["fingerprint"]
    assert not left.exists() and other.exists()
    assert sorted(d.name for d in tmp_root.iterdir()) == [other.name]

    # any other executor (Ray: it reruns a failed task whole) gets one task per partition; a task whose kinds
    # all have their marker redoes nothing
    for name in ("global-cand-minhash_dedup-00006", "global-cand-ids-00007"):
        os.remove(lay.marker(name))
    before = (out / "_work/global/cand/exact_dedup/part-00006.parquet").stat().st_mtime_ns

    class Other:  # (an executor like Ray's: one reduce task per partition)
        name, workers = "other", 4
        specs: list = []

        def reduce_tasks(self, jobs):
            return jobs

        def map(self, fn, specs, on_done=None):
            self.specs.extend(specs)
            return [fn(spec) for spec in specs]

    other_ex = Other()
    results = run_reduce_tasks(lay, cfg, pipeline_for(cfg), done["fingerprint"], done["tasks"], executor=other_ex)
    assert [[(p, [k for k, _ in kinds_]) for p, kinds_ in spec.jobs] for spec in other_ex.specs] == \
        [[(6, ["minhash_dedup"])], [(7, ["ids"])]]
    assert [(res["kind"], res["partition"]) for res in results] == [("minhash_dedup", 6), ("ids", 7)]
    again = shuffle.reduce_task(shuffle.ReduceSpec(((6, tuple((k, "SELECT 1") for k in kinds)),), str(out),
                                                   tuple(done["tasks"]), "1GB", done["fingerprint"]))
    assert [r["kind"] for r in again] == list(kinds)  # (their markers: the bogus SQL never ran)
    assert (out / "_work/global/cand/exact_dedup/part-00006.parquet").stat().st_mtime_ns == before


@pytest.mark.parametrize("kernels", ["1", "0"])
def test_id_keys_are_xxh3_64_of_the_ids(kernels, monkeypatch):
    import xxhash

    monkeypatch.setenv("DATACLEAN_KERNELS", kernels)
    ids = ["", "a", "doc-7", "中文编号-0001", "x" * 17, "y" * 129, "z" * 241, "é" * 300]
    batch = pa.RecordBatch.from_pydict({"id": ids, "doc_key": list(range(len(ids))),
                                        "origin_file": ["f"] * len(ids), "origin_row": list(range(len(ids)))})
    rows, keys = shuffle.id_rows(batch.slice(1))  # (an array with an offset)
    assert keys.dtype == np.uint64
    assert keys.tolist() == [xxhash.xxh3_64_intdigest(i.encode()) for i in ids[1:]]
    assert rows.column("origin").to_pylist() == [f"f#{i}" for i in range(1, len(ids))]
