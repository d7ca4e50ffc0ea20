"""Near-duplicate (MinHash) benchmark: speed against datatrove, and memory/time at 100k and 1M documents.

Two parts, each in ONE invocation (every run a subprocess measured by :func:`_measure.measure`: wall time, CPU
time, peak Rss/Pss summed over the whole process tree):

speed  On the same bench shards, alternating the sides per repetition:

  dataclean  ``dataclean run <shards> -o <tmp> --workers W --quiet --fresh --config benchmarks/configs/dedup.yaml``
             (normalize -> exact_dedup -> minhash_dedup with its defaults: threshold 0.8, 128 permutations,
             5-grams; ``global.duckdb_memory_limit: 1GB``)
  datatrove  datatrove's four-stage MinHash deduplication with its default ``MinhashConfig()`` (5-grams,
             14 buckets x 8 hashes, 64-bit hashes), each stage a ``LocalPipelineExecutor`` (``depends=`` chain),
             run by the datatrove venv's python from a generated script that never imports dataclean:

                 1 [ParquetReader(<shards>), MinhashDedupSignature(sigs)]         tasks=<shards>, workers=W
                 2 [MinhashDedupBuckets(sigs, buckets)]                           tasks=14 (num_buckets), workers=W
                 3 [MinhashDedupCluster(buckets, remove_ids)]                     tasks=1
                 4 [ParquetReader(<shards>), MinhashDedupFilter(remove_ids), ParquetWriter(out)]
                                                                                  tasks=<shards>, workers=W

  Prints docs/s, MB/s, median wall/CPU s and peak memory per side, the speed-up in docs/s (the project's goal
  is >= 20x) and the documents each removed (datatrove: ``dropped`` of MinhashDedupFilter in its stats;
  dataclean: ``removed_by_rule`` of ``OUT/stats/summary.json``: exact + near duplicates). Time comes from the
  ``--reps`` runs, which sample no memory; the peak memory from ``--memory-reps`` further runs per side (default
  1), sampled every ``--interval`` s: reading every process's smaps_rollup every 20 ms costs this 2-core
  machine ~20% of its time and slows whichever tool it samples (dataclean 7.9 -> 9.5 s, datatrove 128 -> 152 s).

scale  Tiles the bench corpus with edited copies to N documents (default 100,000 and 1,032,624 = 4 x the
  corpus): the first N/K originals (K = ``--copies``, default 4) each followed by K-1 copies with a few words
  (or, in Chinese text, characters) replaced — 0.3-1.5% of them, at least one — and new ids ``<id>#tile<c>``.
  The tiles are written as Parquet shards to a temporary folder on disk (not measured), then
  ``dataclean run <tiles> --workers W --config benchmarks/configs/dedup.yaml`` is measured once per size
  (``global.duckdb_memory_limit: 1GB``; the project's goal is peak RSS < 2.5 GB for 1M documents). Reported:
  wall time with dataclean's own phase split (pass 1, global, pass 2, stats), peak RSS/PSS of the whole run,
  and near-duplicates found against those planted: the copies planted, how many of them have an exact shingle
  Jaccard >= 0.8 with their original (computed while tiling, with dataclean's own shingling), and how many
  documents were removed as ``near_duplicate`` of a member of their own family (original + its copies) or of
  another document.

    python benchmarks/bench_dedup.py                       # speed on 12 shards (3 reps) + scale 100k and 1M
    python benchmarks/bench_dedup.py --quick               # 2 shards, 1 rep; scale 20k only (~2 min)
    python benchmarks/bench_dedup.py --part speed          # only the datatrove comparison
    python benchmarks/bench_dedup.py --part scale --sizes 100000,1000000
"""
from __future__ import annotations

import argparse
import datetime as _dt
import glob
import hashlib
import json
import math
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from bench_foundation import _dataclean_cmd, _du, _machine, _ratio, compile_bytecode  # noqa: E402  (same folder)
from bench_foundation import LABEL_WIDTH, side_by_side  # noqa: E402
from bench_rules import DATATROVE_SCRIPT_END, _dt_env, _venv_versions  # noqa: E402

DEFAULT_CORPUS = os.path.normpath(os.path.join(REPO, "..", "shared", "corpus", "bench"))
DEFAULT_CONFIG = os.path.join(HERE, "configs", "dedup.yaml")
DEFAULT_DATATROVE_PYTHON = "/work/dtvenv/bin/python"
JSON_SPEED = os.path.join(HERE, "results", "dedup_speed.json")
JSON_SCALE = os.path.join(HERE, "results", "dedup_scale.json")
FULL_TILE = -1  # --sizes value meaning "all bench docs x copies"

# ---------------------------------------------------------------------------------------------------------
# the datatrove side: written to a temporary file and run by --datatrove-python (never imports dataclean)
# ---------------------------------------------------------------------------------------------------------

DATATROVE_SCRIPT = '''\
"""bench_dedup.py datatrove side: python THIS INPUT_DIR WORK_DIR OUTPUT_DIR LOGGING_DIR TASKS WORKERS"""
import resource
import sys
import time

from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.dedup import (MinhashDedupBuckets, MinhashDedupCluster, MinhashDedupFilter,
                                      MinhashDedupSignature)
from datatrove.pipeline.dedup.minhash import MinhashConfig
from datatrove.pipeline.readers import ParquetReader
from datatrove.pipeline.writers import ParquetWriter


def main():
    inp, work, out, logs = sys.argv[1:5]
    tasks, workers = int(sys.argv[5]), int(sys.argv[6])
    config = MinhashConfig()  # datatrove's defaults: 5-grams, 14 buckets x 8 hashes, 64-bit
    reader = lambda: ParquetReader(inp, glob_pattern="*.parquet", text_key="text", id_key="id")
    sig = LocalPipelineExecutor(
        pipeline=[reader(), MinhashDedupSignature(output_folder=f"{work}/signatures", config=config)],
        tasks=tasks, workers=workers, logging_dir=f"{logs}/signatures")
    buckets = LocalPipelineExecutor(
        pipeline=[MinhashDedupBuckets(input_folder=f"{work}/signatures", output_folder=f"{work}/buckets",
                                      config=config)],
        tasks=config.num_buckets, workers=workers, logging_dir=f"{logs}/buckets", depends=sig)
    cluster = LocalPipelineExecutor(
        pipeline=[MinhashDedupCluster(input_folder=f"{work}/buckets", output_folder=f"{work}/remove_ids",
                                      config=config)],
        tasks=1, logging_dir=f"{logs}/clusters", depends=buckets)
    filt = LocalPipelineExecutor(
        pipeline=[reader(), MinhashDedupFilter(input_folder=f"{work}/remove_ids"), ParquetWriter(out)],
        tasks=tasks, workers=workers, logging_dir=f"{logs}/filter", depends=cluster)
    t0 = time.perf_counter()
    filt.run()  # runs the dependencies first, in order
    print(f"datatrove total {time.perf_counter() - t0:.2f} s")
    finish()
''' + DATATROVE_SCRIPT_END

DT_STAGES = ("signatures", "buckets", "clusters", "filter")


def _datatrove_counts(logs: str) -> dict:
    """Docs read, dropped by MinhashDedupFilter and written, and the time per stage, from the stats.json files."""
    def load(stage):
        with open(os.path.join(logs, stage, "stats.json"), encoding="utf-8") as fh:
            return json.load(fh)

    steps = load("filter")
    filt = next(s for s in steps if "stage 4" in s["name"])
    reader, writer = steps[0], steps[-1]
    records_in = int(reader["stats"].get("documents", {}).get("total", 0))
    removed = int(filt["stats"].get("dropped", 0))
    kept = int(writer["stats"].get("total", 0))
    stage_time = {}
    for stage in DT_STAGES:
        try:
            st = load(stage)
        except OSError:
            continue
        stage_time[stage] = round(sum(_num(s.get("time_stats", {}).get("total", 0)) for s in st), 2)
    return {"records_in": records_in, "kept": kept, "removed": removed,
            "stage_time_s_summed_over_tasks": stage_time}


def _num(v) -> float:
    return v if isinstance(v, (int, float)) else 0.0


def _dataclean_counts(out: str) -> dict:
    with open(os.path.join(out, "stats", "summary.json"), encoding="utf-8") as fh:
        s = json.load(fh)
    timings = {}
    try:
        with open(os.path.join(out, "manifest.json"), encoding="utf-8") as fh:
            timings = json.load(fh).get("timings_seconds", {})
    except (OSError, ValueError):
        pass
    rb = s.get("removed_by_rule", {})
    return {"records_in": s.get("input_records"), "kept": s.get("kept"), "removed": s.get("removed"),
            "removed_by_rule": rb,
            "near_duplicate": sum(n for k, n in rb.items() if k.startswith("minhash_dedup/")),
            "exact_duplicate": sum(n for k, n in rb.items() if k.startswith("exact_dedup/")),
            "conservation_ok": s.get("conservation_ok"), "timings_seconds": timings}


# ---------------------------------------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------------------------------------

def _side_summary(name: str, runs: list, stats, mem_runs: list | None = None) -> dict:
    """Time from ``runs``; memory from ``mem_runs`` when given (runs of their own, sampled), else ``runs``."""
    from _measure import median

    ok = [r for r in runs if r.returncode == 0]
    mem = [r for r in mem_runs if r.returncode == 0] if mem_runs is not None else ok
    walls = [r.wall_s for r in ok]
    wall = median(walls) if walls else float("nan")
    nan = float("nan")
    return {
        "name": name, "reps_ok": len(ok), "reps": len(runs),
        "wall_s_median": wall,
        "wall_s_min": min(walls) if walls else nan,
        "wall_s_max": max(walls) if walls else nan,
        "docs_per_s": stats.docs / wall if walls else nan,
        "mb_per_s": stats.text_mb / wall if walls else nan,
        "peak_rss_mib_max": max((r.peak_rss_mib for r in mem), default=nan),
        "peak_pss_mib_max": max((r.peak_pss_mib for r in mem), default=nan),
        "maxrss_single_mib_max": max((r.maxrss_single_mib for r in mem), default=nan),
        "cpu_s_median": median([r.user_s + r.sys_s for r in ok]) if ok else nan,
    }


def _fmt_speed(header: str, dc: dict, dt: dict, paired: float, cdc: dict | None, cdt: dict | None) -> str:
    out = side_by_side(header, dc, dt, "datatrove", "dc/dt")

    def cnt(c, key):
        return f"{c[key]:,}" if c else "n/a"

    out.append(f"{'docs removed':<{LABEL_WIDTH}}  {cnt(cdc, 'removed'):>12}  {cnt(cdt, 'removed'):>12}")
    if cdc:
        out.append(f"  dataclean: {cdc['exact_duplicate']:,} exact duplicates + {cdc['near_duplicate']:,} near "
                   f"duplicates (minhash_dedup); datatrove: MinhashDedupFilter dropped (its MinHash also "
                   f"catches exact duplicates)")
    speed = _ratio(dc["docs_per_s"], dt["docs_per_s"])
    out.append(f"speed-up dataclean/datatrove (docs/s): {speed:.1f}x (goal >= 20x: "
               f"{'met' if speed >= 20 else 'NOT met' if speed == speed else 'n/a'}); median of per-rep "
               f"wall ratios datatrove/dataclean: {paired:.1f}x; CPU s datatrove/dataclean: "
               f"{_ratio(dt['cpu_s_median'], dc['cpu_s_median']):.1f}x")
    if cdc and cdc.get("timings_seconds"):
        t = cdc["timings_seconds"]
        out.append("dataclean phases (last timed rep, s): " + ", ".join(f"{k} {v:.1f}" for k, v in t.items()))
    if cdt and cdt.get("stage_time_s_summed_over_tasks"):
        out.append("datatrove stage time (last timed rep, s summed over tasks): " + ", ".join(
            f"{k} {v:.1f}" for k, v in cdt["stage_time_s_summed_over_tasks"].items()))
    out.append(f"reps ok: dataclean {dc['reps_ok']}/{dc['reps']}, datatrove {dt['reps_ok']}/{dt['reps']}")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------------
# part 1: speed against datatrove
# ---------------------------------------------------------------------------------------------------------

_SUMMARY_RE = re.compile(r"(\d+) records in: (\d+) kept, (\d+) removed")


def run_speed(a, files: list[str], problems: list[str]) -> dict:
    from _measure import measure, median, parquet_inputs

    dt_versions = _venv_versions(a.datatrove_python)
    if not dt_versions.get("datatrove"):
        problems.append(f"datatrove is not importable by {a.datatrove_python}: {dt_versions}")
        return {"error": problems[-1]}
    stats = parquet_inputs(files)  # also warms the page cache for both sides
    all_files = sorted(glob.glob(os.path.join(a.corpus, "*.parquet")))
    subset = (f"first {len(files)} of {len(all_files)} shards" if len(files) < len(all_files)
              else f"all {len(files)} shards")
    header = (f"MinHash near-duplicate removal, {subset} of {a.corpus}: {stats.docs:,} docs, {stats.text_mb:.2f} MB "
              f"text; {a.reps} reps, {a.workers} workers; datatrove {dt_versions.get('datatrove')} (4 stages, "
              f"default MinhashConfig)")
    print(header, flush=True)
    tmp_root = tempfile.mkdtemp(prefix="dataclean-bench-dedup-", dir=a.tmp)
    dc_out = os.path.join(tmp_root, "dataclean")
    dt_in, dt_work, dt_out, dt_logs = (os.path.join(tmp_root, n) for n in ("dt_input", "dt_work", "dt_output",
                                                                          "dt_logs"))
    dt_script = os.path.join(tmp_root, "datatrove_minhash.py")
    with open(dt_script, "w", encoding="utf-8") as fh:
        fh.write(DATATROVE_SCRIPT)
    os.makedirs(dt_in)
    for f in files:  # datatrove reads a folder: give it exactly the chosen shards
        os.symlink(os.path.abspath(f), os.path.join(dt_in, os.path.basename(f)))
    dc_cmd = _dataclean_cmd() + ["run", *files, "-o", dc_out, "--workers", str(a.workers), "--quiet", "--fresh",
                                 "--config", os.path.abspath(a.config)]
    dt_cmd = [a.datatrove_python, dt_script, dt_in, dt_work, dt_out, dt_logs, str(len(files)), str(a.workers)]
    runs: dict[str, list] = {"dataclean": [], "datatrove": []}  # timed (no memory sampling)
    mem_runs: dict[str, list] = {"dataclean": [], "datatrove": []}  # memory sampled every --interval s
    counts: dict[str, list] = {"dataclean": [], "datatrove": []}

    def run_side(name: str, rep: int, sampled: bool = False) -> None:
        interval = a.interval if sampled else None
        if name == "datatrove":  # its executor skips tasks already completed in logging_dir
            for d in (dt_work, dt_out, dt_logs):
                shutil.rmtree(d, ignore_errors=True)
            m = measure(dt_cmd, cwd=tmp_root, env=_dt_env(), interval=interval)
        else:
            m = measure(dc_cmd, cwd=REPO, interval=interval)
        c = None
        if m.returncode == 0:
            try:
                c = _datatrove_counts(dt_logs) if name == "datatrove" else _dataclean_counts(dc_out)
            except (OSError, ValueError, KeyError, StopIteration) as exc:
                problems.append(f"speed rep {rep}: {name}: cannot read its counts: {exc!r}")
            if c is not None:
                if c["records_in"] != stats.docs:
                    problems.append(f"speed rep {rep}: {name} read {c['records_in']} records, inputs hold "
                                    f"{stats.docs}")
                if c["records_in"] != c["kept"] + c["removed"]:
                    problems.append(f"speed rep {rep}: {name}: {c['records_in']} in != {c['kept']} kept + "
                                    f"{c['removed']} removed")
                if name == "dataclean" and c.get("conservation_ok") is False:
                    problems.append(f"speed rep {rep}: dataclean summary.json: conservation_ok is false")
                m.extra = {k: c[k] for k in ("records_in", "kept", "removed")}
                if name == "dataclean":
                    m.extra["timings_seconds"] = c.get("timings_seconds", {})
        else:
            problems.append(f"speed rep {rep}: {name} exited {m.returncode}: {m.stderr.strip()[-2000:]}")
        m.extra["output_bytes"] = _du(dt_out if name == "datatrove" else os.path.join(dc_out, "data"))
        m.extra["loadavg_after"] = list(os.getloadavg())
        m.extra["memory_sampled"] = sampled
        (mem_runs if sampled else runs)[name].append(m)
        counts[name].append(c)
        memory = (f"peak RSS {m.peak_rss_mib:7.0f} MiB  PSS {m.peak_pss_mib:7.0f} MiB  procs {m.peak_procs}"
                  if sampled else "(memory not sampled)")
        print(f"  {'mem ' if sampled else ''}rep {rep} {name:<9} wall {m.wall_s:7.2f} s  "
              f"CPU {m.user_s + m.sys_s:7.2f} s  {memory}  removed {c['removed'] if c else '?'}  load {m.extra['loadavg_after'][0]:.1f}  "
              f"rc {m.returncode}" + (f"  phases {m.extra.get('timings_seconds')}" if name == "dataclean" else ""),
              flush=True)

    # numba compiles the MinHash and rule kernels once per install (cached on disk), and Python the package's
    # bytecode: done here, not inside a timed rep, as a user's first run after installing pays it once
    compile_bytecode()
    subprocess.run([sys.executable, "-c", "from dataclean.dedup import minhash; from dataclean.text import kernels; "
                    "print('kernels:', minhash.warm_up(), kernels.warm_up())"], cwd=REPO, check=True)
    try:
        for rep in range(a.reps):
            order = ["dataclean", "datatrove"] if rep % 2 == 0 else ["datatrove", "dataclean"]
            for name in order:
                run_side(name, rep)
        for rep in range(a.memory_reps):  # peak memory, in runs of their own: the sampler slows what it samples
            for name in ("dataclean", "datatrove"):
                run_side(name, rep, sampled=True)
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)

    final: dict[str, dict | None] = {}
    for name, cs in counts.items():
        ok = [c for c in cs if c is not None]
        timed = [c for c in cs[:len(runs[name])] if c is not None]  # (the memory runs come last)
        final[name] = timed[-1] if timed else ok[-1] if ok else None
        if any(c["removed"] != ok[0]["removed"] for c in ok[1:]):
            problems.append(f"speed: {name}: removal counts differ between repetitions: {[c['removed'] for c in ok]}")
    dc = _side_summary("dataclean", runs["dataclean"], stats, mem_runs["dataclean"])
    dt = _side_summary("datatrove", runs["datatrove"], stats, mem_runs["datatrove"])
    per_rep = [t.wall_s / d.wall_s for d, t in zip(runs["dataclean"], runs["datatrove"])
               if d.returncode == 0 and t.returncode == 0]
    paired = median(per_rep) if per_rep else float("nan")
    table = _fmt_speed(header, dc, dt, paired, final["dataclean"], final["datatrove"])
    print()
    print(table, flush=True)
    runs_out = {k: [dict(m.as_dict(), rep=i) for i, m in enumerate(v)] + [dict(m.as_dict(), rep=f"mem{i}")
                                                                          for i, m in enumerate(mem_runs[k])]
                for k, v in runs.items()}
    for side in runs_out.values():  # absolute temp paths and file lists only bloat the JSON
        for r in side:
            r["cmd"] = [os.path.basename(r["cmd"][0]), os.path.basename(r["cmd"][1]), "..."]
    return {
        "settings": {"files": [os.path.basename(f) for f in files], "reps": a.reps, "workers": a.workers,
                     "memory_reps": a.memory_reps, "sample_interval_s": a.interval,
                     "dataclean_cmd": [os.path.basename(dc_cmd[0]), "run", "<inputs>", "-o", "<tmp>", "--workers",
                                       str(a.workers), "--quiet", "--fresh", "--config",
                                       os.path.relpath(os.path.abspath(a.config), REPO)],
                     "datatrove_python": a.datatrove_python, "datatrove_venv": dt_versions,
                     "datatrove_script": DATATROVE_SCRIPT},
        "inputs": {"files": stats.files, "docs": stats.docs, "text_bytes": stats.text_bytes,
                   "text_mb": round(stats.text_mb, 3), "file_bytes": stats.file_bytes},
        "summary": {"dataclean": dc, "datatrove": dt,
                    "speedup_docs_per_s_dataclean_over_datatrove": _ratio(dc["docs_per_s"], dt["docs_per_s"]),
                    "wall_s_paired_median_datatrove_over_dataclean": paired,
                    "cpu_s_datatrove_over_dataclean": _ratio(dt["cpu_s_median"], dc["cpu_s_median"])},
        "removed": final,
        "runs": runs_out,
        "table": table,
    }


# ---------------------------------------------------------------------------------------------------------
# part 2: tiled corpus at 100k / 1M documents
# ---------------------------------------------------------------------------------------------------------

_WORD = re.compile(r"\b\w+")  # \b: a probe inside a word moves on to the next word
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff]")
EN_VOCAB = ("river stone market window garden letter engine silver morning winter harbor teacher pencil "
            "village doctor orange bridge camera forest ticket yellow island planet summer kitchen rocket").split()
ZH_VOCAB = "山水火木金土日月风雨天地人心手口目耳花草鱼鸟马牛羊米豆茶酒书画灯门车船桥路城村"
EDIT_RATE = (0.003, 0.015)  # share of words (Han characters in Chinese text) replaced in a tile copy
GENERATION_RATE = (0.30, 0.40)  # the words replaced in a new generation's original (make_tiles)


def _seed(*parts) -> int:
    return int.from_bytes(hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest(), "little")


def edit_few_words(text: str, rng: random.Random, rate: tuple[float, float] = EDIT_RATE) -> str:
    """Replace a few words (Han characters in Chinese text) at random positions: 0.3-1.5 % of them (``rate``),
    at least 1.

    Positions are found by probing random character offsets (no full tokenization: O(changes) regex searches),
    so the cost stays small on megabyte-long documents."""
    n = len(text)
    if n == 0:
        return text + " " + rng.choice(EN_VOCAB)
    han = len(_HAN.findall(text, 0, min(n, 2000)))
    sample = min(n, 2000)
    chinese = han > 0.3 * sample
    approx_units = han * n / sample if chinese else max(1, n / 6)
    k = max(1, round(approx_units * rng.uniform(*rate)))
    spans: dict[int, tuple[int, str]] = {}
    for _ in range(k):
        off = rng.randrange(n)
        if chinese:
            m = _HAN.search(text, off) or _HAN.search(text, 0)
            if m is None:
                continue
            spans[m.start()] = (m.end(), rng.choice(ZH_VOCAB))
        else:
            m = _WORD.search(text, off) or _WORD.search(text, 0)
            if m is None:
                continue
            spans[m.start()] = (m.end(), rng.choice(EN_VOCAB))
    if not spans:
        return text + " " + rng.choice(EN_VOCAB)
    out, pos = [], 0
    for start in sorted(spans):
        end, word = spans[start]
        if start < pos:
            continue
        out.append(text[pos:start])
        out.append(word)
        pos = end
    out.append(text[pos:])
    new = "".join(out)
    return new if new != text else new + " " + rng.choice(EN_VOCAB)


def _pair_jaccard(orig: list[str], copies: list[str]) -> list[float]:
    """Exact Jaccard of the shingle sets (dataclean's normalize stage, then its MinHash shingling) of each
    original / copy pair, vectorised with numpy (no Python sets)."""
    import numpy as np
    import pyarrow as pa
    from dataclean.dedup.minhash import shingle_hashes, shingle_text
    from dataclean.stages import Normalize

    norm = Normalize()

    def shingles(texts):
        b = norm(pa.record_batch({"text": pa.array(texts, pa.string())})).batch
        vals, offs = shingle_hashes(shingle_text(b.column("text")), 5, 5)
        vals, offs = np.asarray(vals), np.asarray(offs, dtype=np.int64)
        idx = np.repeat(np.arange(len(texts), dtype=np.int64), np.diff(offs))
        order = np.lexsort((vals, idx))
        v, i = vals[order], idx[order]
        keep = np.ones(len(v), bool)
        keep[1:] = (v[1:] != v[:-1]) | (i[1:] != i[:-1])
        return v[keep], i[keep]

    va, ia = shingles(orig)
    vb, ib = shingles(copies)
    n = len(orig)
    size_a = np.bincount(ia, minlength=n)
    size_b = np.bincount(ib, minlength=n)
    v = np.concatenate([va, vb])
    i = np.concatenate([ia, ib])
    order = np.lexsort((v, i))
    v, i = v[order], i[order]
    both = (v[1:] == v[:-1]) & (i[1:] == i[:-1])
    inter = np.bincount(i[1:][both], minlength=n)
    union = size_a + size_b - inter
    with np.errstate(invalid="ignore", divide="ignore"):
        jac = np.where(union > 0, inter / np.maximum(union, 1), 1.0)
    return jac.tolist()


def _tile_chunk(job: tuple) -> dict:
    """Write the K tile files of one chunk of originals; return counts and the planted pairs' Jaccard."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    src, row_start, row_stop, copies, out_dir, tag, with_jaccard, generation = job
    t = pq.read_table(src, columns=["id", "text", "source", "lang_hint", "origin"]).slice(row_start,
                                                                                         row_stop - row_start)
    ids = t.column("id").to_pylist()
    texts = t.column("text").to_pylist()
    if generation:  # new originals: unrelated to the bench documents and to the other generations' as dedup sees them
        texts = [edit_few_words(x, random.Random(_seed(i, "gen", generation)), GENERATION_RATE)
                 for i, x in zip(ids, texts)]
        ids = [f"{i}#gen{generation}" for i in ids]
        t = t.set_column(0, "id", pa.array(ids, pa.string())).set_column(1, "text", pa.array(texts, pa.string()))
    import pyarrow.compute as pc

    files, jac_all, text_bytes = [], [], 0
    for c in range(copies):
        if c == 0:
            new_ids, new_texts = ids, texts
        else:
            new_ids = [f"{i}#tile{c}" for i in ids]
            new_texts = [edit_few_words(x, random.Random(_seed(i, c))) for i, x in zip(ids, texts)]
            if with_jaccard:
                for lo in range(0, len(texts), 4096):
                    jac_all.extend(_pair_jaccard(texts[lo:lo + 4096], new_texts[lo:lo + 4096]))
        tab = t.set_column(0, "id", pa.array(new_ids, pa.string())).set_column(1, "text",
                                                                               pa.array(new_texts, pa.string()))
        text_bytes += pc.sum(pc.binary_length(tab.column("text"))).as_py() or 0
        path = os.path.join(out_dir, f"tile-{tag}-c{c}.parquet")
        pq.write_table(tab, path, compression="zstd", row_group_size=4096)
        files.append(path)
    return {"files": files, "originals": len(ids), "planted": len(ids) * (copies - 1), "jaccard": jac_all,
            "text_bytes": text_bytes}


def make_tiles(corpus: str, n_docs: int, copies: int, out_dir: str, workers: int, with_jaccard: bool,
               generations: bool = False) -> dict:
    """Tile the first ceil(n_docs / copies) bench documents, each with copies - 1 edited copies, into out_dir.

    ``generations``: when the bench corpus has fewer than ceil(n_docs / copies) documents, take it again as
    generation 1, 2, ... of new originals (ids ``<id>#gen<g>``), each a bench document with 30-40% of its words
    replaced (a word 5-gram survives with probability ~0.65^5, so a generation's document has a shingle Jaccard
    of ~0.1 with its bench document and no MinHash candidate pair with it), so that families keep ``copies``
    documents at any size: the dedup work per document stays that of the 1M tiling, as in a real corpus that
    grows by more crawl, not by more copies of the same pages. Otherwise at most every bench document once."""
    import multiprocessing

    import pyarrow.parquet as pq

    shards = sorted(glob.glob(os.path.join(corpus, "*.parquet")))
    total = sum(pq.ParquetFile(s).metadata.num_rows for s in shards)
    need = total if n_docs == FULL_TILE else math.ceil(n_docs / copies)
    need = need if generations else min(total, need)
    jobs, left = [], need
    for generation in range(-(-need // total)):
        for s in shards:
            if left <= 0:
                break
            rows = pq.ParquetFile(s).metadata.num_rows
            take = min(rows, left)
            for lo in range(0, take, 12000):  # chunks of <= 12,000 originals bound the tiler's memory
                hi = min(take, lo + 12000)
                tag = f"g{generation:02d}-{os.path.basename(s).split('.')[0]}-{lo:06d}"
                jobs.append((s, lo, hi, copies, out_dir, tag, with_jaccard, generation))
            left -= take
    os.makedirs(out_dir, exist_ok=True)
    t0 = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        parts = pool.map(_tile_chunk, jobs, chunksize=1)
    jac = [x for p in parts for x in p["jaccard"]]
    info = {"originals": sum(p["originals"] for p in parts), "copies_per_original": copies - 1,
            "planted": sum(p["planted"] for p in parts), "docs": sum(p["originals"] for p in parts) * copies,
            "files": sorted(f for p in parts for f in p["files"]), "tile_s": round(time.perf_counter() - t0, 1),
            "text_mb": round(sum(p["text_bytes"] for p in parts) / 1e6, 2)}
    if with_jaccard and jac:
        info["planted_jaccard_ge_0_8"] = sum(1 for x in jac if x >= 0.8)
        info["planted_jaccard_quantiles"] = {q: _quantile(jac, q) for q in (0.01, 0.05, 0.1, 0.25, 0.5)}
        info["planted_jaccard_bins"] = _bins(jac)
    return info


def _quantile(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return round(s[min(len(s) - 1, int(q * len(s)))], 4)


def _bins(xs: list[float]) -> dict:
    edges = [0.0, 0.5, 0.7, 0.8, 0.9, 1.0000001]
    out = {}
    for lo, hi in zip(edges, edges[1:]):
        out[f"[{lo:.1f},{min(hi, 1.0):.1f}{']' if hi > 1 else ')'}"] = sum(1 for x in xs if lo <= x < hi)
    return out


def _family(doc_id: str) -> str:
    return doc_id.split("#tile", 1)[0]


def _scale_found(out: str) -> dict:
    """Near-duplicate removals of a tiled run: within the removed document's family or outside it."""
    import duckdb

    con = duckdb.connect()
    rows = con.sql(f"""SELECT id, dup_of, rule FROM read_parquet('{os.path.join(out, "rejected", "*.parquet")}')
                       WHERE stage = 'minhash_dedup' OR stage = 'exact_dedup'""").fetchall()
    near_in = near_out = exact = 0
    for i, d, rule in rows:
        if rule.startswith("near_duplicate"):
            if d is not None and _family(i) == _family(d):
                near_in += 1
            else:
                near_out += 1
        else:
            exact += 1
    return {"near_duplicate_in_family": near_in, "near_duplicate_other": near_out, "exact_duplicate": exact}


def run_scale(a, problems: list[str]) -> dict:
    from _measure import measure

    results = []
    compile_bytecode()  # (as for the speed part)
    base_tmp = tempfile.mkdtemp(prefix="dataclean-bench-dedup-scale-", dir=a.tmp)
    try:
        for size in a.sizes:
            tiles = os.path.join(base_tmp, f"tiles-{size}")
            out = os.path.join(base_tmp, f"out-{size}")
            label = "all x copies" if size == FULL_TILE else f"{size:,}"
            print(f"scale {label}: tiling ...", flush=True)
            info = make_tiles(a.corpus, size, a.copies, tiles, a.workers, not a.no_jaccard)
            print(f"  {info['docs']:,} docs ({info['originals']:,} originals + {info['planted']:,} edited copies) "
                  f"in {len(info['files'])} files, tiled in {info['tile_s']} s; planted with exact Jaccard >= 0.8: "
                  f"{info.get('planted_jaccard_ge_0_8', 'n/a')}", flush=True)
            cmd = _dataclean_cmd() + ["run", tiles, "-o", out, "--workers", str(a.workers), "--quiet", "--fresh",
                                      "--config", os.path.abspath(a.config)]
            os.sync()  # the tiles were just written: no writeback of them during the measured run
            reps = []
            for rep in range(a.scale_reps):
                m = measure(cmd, cwd=REPO, interval=a.interval)
                m.extra["loadavg_after"] = list(os.getloadavg())
                if m.returncode == 0:
                    try:
                        m.extra["counts"] = _dataclean_counts(out)
                    except (OSError, ValueError) as exc:
                        problems.append(f"scale {info['docs']}: cannot read the run's counts: {exc!r}")
                reps.append(m)
                print(f"  rep {rep}: wall {m.wall_s:.1f} s  CPU {m.user_s + m.sys_s:.1f} s  peak RSS "
                      f"{m.peak_rss_mib:,.0f} MiB  PSS {m.peak_pss_mib:,.0f} MiB  single-process max "
                      f"{m.maxrss_single_mib:,.0f} MiB  load {m.extra['loadavg_after'][0]:.1f}  rc {m.returncode}",
                      flush=True)
                if m.returncode != 0:
                    break
            m = sorted(reps, key=lambda r: r.wall_s)[len(reps) // 2]  # the median run (by wall time)
            row = {"size": info["docs"], "tiling": {k: v for k, v in info.items() if k != "files"},
                   "run": m.as_dict(), "text_mb": info["text_mb"],
                   "reps": [dict(r.as_dict(), cmd=None) for r in reps],
                   "timings_seconds_all": [r.extra.get("counts", {}).get("timings_seconds") for r in reps],
                   "wall_s_median": m.wall_s, "wall_s_all": [round(r.wall_s, 2) for r in reps],
                   "peak_rss_mib_max": max(r.peak_rss_mib for r in reps),
                   "peak_pss_mib_max": max(r.peak_pss_mib for r in reps),
                   "maxrss_single_mib_max": max(r.maxrss_single_mib for r in reps)}
            row["run"]["cmd"] = [os.path.basename(cmd[0]), "run", "<tiles>", "..."]
            if m.returncode == 0 and all(r.returncode == 0 for r in reps):
                c = m.extra.get("counts") or _dataclean_counts(out)
                row["counts"] = c
                row["found"] = _scale_found(out)
                removed = {r.extra.get("counts", {}).get("removed") for r in reps}
                if len(removed) > 1:
                    problems.append(f"scale {info['docs']}: removal counts differ between runs: {sorted(removed)}")
                if c["records_in"] != info["docs"]:
                    problems.append(f"scale {info['docs']}: dataclean read {c['records_in']} records")
                if c.get("conservation_ok") is False:
                    problems.append(f"scale {info['docs']}: conservation_ok is false")
            else:
                bad = next(r for r in reps if r.returncode != 0)
                problems.append(f"scale {info['docs']}: dataclean exited {bad.returncode}: {bad.stderr.strip()[-2000:]}")
            row["input_file_bytes"] = _du(tiles)
            if "counts" in row:
                print(f"  phases: {row['counts']['timings_seconds']}; removed near {row['counts']['near_duplicate']:,}"
                      f" (in family {row['found']['near_duplicate_in_family']:,}), exact "
                      f"{row['counts']['exact_duplicate']:,}", flush=True)
            results.append(row)
            shutil.rmtree(out, ignore_errors=True)
            if not a.keep_tiles:
                shutil.rmtree(tiles, ignore_errors=True)
    finally:
        if not a.keep_tiles:
            shutil.rmtree(base_tmp, ignore_errors=True)
        else:
            print(f"tiles kept in {base_tmp}")
    table = _fmt_scale(results, a.copies)
    print()
    print(table, flush=True)
    return {"settings": {"copies": a.copies, "edit_rate": EDIT_RATE, "workers": a.workers,
                         "config": os.path.relpath(os.path.abspath(a.config), REPO)},
            "sizes": results, "table": table}


def _fmt_scale(results: list[dict], copies: int) -> str:
    hdr = (f"{'docs':>10}  {'MB text':>8}  {'wall s':>8}  {'pass1':>7}  {'global':>7}  {'pass2':>7}  {'docs/s':>8}  "
           f"{'peak RSS':>9}  {'peak PSS':>9}  {'1-proc':>7}  {'planted':>9}  {'J>=0.8':>9}  {'near in':>9}  "
           f"{'near oth':>8}  {'exact':>7}")
    out = [f"tiled bench corpus: each original + {copies - 1} copies with 0.3-1.5% of words replaced; "
           f"duckdb_memory_limit 1GB; wall and phases: median run; memory: max over runs, MiB, whole process tree "
           f"(1-proc: largest single process); goal: peak RSS < 2.5 GB at 1M (2,384 MiB if GB = 10^9 B, 2,560 if GiB)",
           hdr, "-" * len(hdr)]
    for r in results:
        m, c, f, t = r["run"], r.get("counts") or {}, r.get("found") or {}, r["tiling"]
        ts = c.get("timings_seconds", {})

        def g(d, k, fmt="{:,}"):
            v = d.get(k)
            return fmt.format(v) if v is not None else "n/a"

        out.append(f"{r['size']:>10,}  {r['text_mb']:>8,.1f}  {m['wall_s']:>8.1f}  {g(ts, 'pass1', '{:.1f}'):>7}  "
                   f"{g(ts, 'global', '{:.1f}'):>7}  {g(ts, 'pass2', '{:.1f}'):>7}  {r['size'] / m['wall_s']:>8,.0f}  "
                   f"{r['peak_rss_mib_max']:>9,.0f}  {r['peak_pss_mib_max']:>9,.0f}  {r['maxrss_single_mib_max']:>7,.0f}  "
                   f"{t['planted']:>9,}  {g(t, 'planted_jaccard_ge_0_8'):>9}  {g(f, 'near_duplicate_in_family'):>9}  "
                   f"{g(f, 'near_duplicate_other'):>8}  {g(f, 'exact_duplicate'):>7}")
    out.append("planted = edited copies; J>=0.8 = planted copies whose exact shingle Jaccard with their original is "
               ">= 0.8; near in = removed as near_duplicate of a member of the same family (original + copies); "
               "near oth = of another document; exact = removed by exact_dedup")
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------------
# driver
# ---------------------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", choices=("all", "speed", "scale"), default="all")
    ap.add_argument("--quick", action="store_true", help="speed on 2 shards, 1 rep; scale at 20,000 docs only")
    ap.add_argument("--corpus", default=DEFAULT_CORPUS, help=f"folder of part-*.parquet (default {DEFAULT_CORPUS})")
    ap.add_argument("--limit-shards", type=int, default=0, metavar="K", help="speed: first K shards (0 = all)")
    ap.add_argument("--reps", type=int, default=3, help="speed: repetitions of each side (default 3)")
    ap.add_argument("--workers", type=int, default=2, help="worker processes for both sides (default 2)")
    ap.add_argument("--datatrove-python", default=DEFAULT_DATATROVE_PYTHON)
    ap.add_argument("--config", default=DEFAULT_CONFIG, help=f"dataclean config (default {DEFAULT_CONFIG})")
    ap.add_argument("--sizes", default="100000,all",
                    help="scale: comma-separated document counts; 'all' = every bench doc x --copies "
                         "(258,156 x 4 = 1,032,624). Default 100000,all")
    ap.add_argument("--scale-reps", type=int, default=2,
                    help="scale: runs per size (default 2; median wall, max memory)")
    ap.add_argument("--copies", type=int, default=4, help="scale: documents per family (original + copies - 1)")
    ap.add_argument("--no-jaccard", action="store_true", help="scale: skip the exact Jaccard of planted pairs")
    ap.add_argument("--keep-tiles", action="store_true", help="scale: keep the tiled shards (prints the folder)")
    ap.add_argument("--tmp", default=None, help="folder for the outputs and tiles (default: a new temporary folder)")
    ap.add_argument("--json", default=None, help=f"results file (default {JSON_SPEED} / {JSON_SCALE})")
    ap.add_argument("--interval", type=float, default=0.02, help="memory sampling interval, s (default 0.02)")
    ap.add_argument("--memory-reps", type=int, default=1,
                    help="speed: sampled runs per side for the peak memory, after the timed reps (default 1; the "
                         "timed reps sample nothing: the sampler's /proc reads slow both tools by ~20%%)")
    a = ap.parse_args(argv)
    if a.quick:
        a.limit_shards, a.reps = a.limit_shards or 2, 1
        a.sizes = "20000" if a.sizes == "100000,all" else a.sizes
        a.scale_reps = 1
    a.sizes = [FULL_TILE if s.strip() == "all" else int(s) for s in a.sizes.split(",") if s.strip()]
    if a.tmp:
        os.makedirs(a.tmp, exist_ok=True)

    all_files = sorted(glob.glob(os.path.join(a.corpus, "*.parquet")))
    files = all_files[:a.limit_shards] if a.limit_shards else all_files
    if not files:
        print(f"error: no .parquet files in {a.corpus}", file=sys.stderr)
        return 2
    rc = 0
    for part in (("speed", "scale") if a.part == "all" else (a.part,)):
        problems: list[str] = []
        load_before = list(os.getloadavg())
        res = run_speed(a, files, problems) if part == "speed" else run_scale(a, problems)
        for p in problems:
            print(f"PROBLEM: {p}", file=sys.stderr)
        result = {"benchmark": f"dedup_{part}",
                  "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                  "command": " ".join(["python", os.path.relpath(os.path.abspath(__file__), REPO), *argv]),
                  "machine": dict(_machine(), loadavg_before=load_before),
                  **res, "problems": problems}
        path = a.json or (JSON_SPEED if part == "speed" else JSON_SCALE)
        if a.json and a.part == "all":
            path = a.json.replace(".json", f"_{part}.json")
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(result, fh, indent=2, ensure_ascii=False)
            fh.write("\n")
        print(f"\nresults: {os.path.abspath(path)}\n", flush=True)
        if problems:
            rc = 1
    return rc


if __name__ == "__main__":
    sys.exit(main())
