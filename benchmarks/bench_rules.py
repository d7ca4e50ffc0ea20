"""Heuristic-rules benchmark: the same four-family chain in datatrove and in dataclean, on the same shards.

The chain, in this order, each with its default (published) parameters:

  Gopher repetition -> Gopher quality -> C4 quality -> FineWeb quality

In ONE invocation, for N repetitions, alternately runs (each as a subprocess, measured by
:func:`_measure.measure`: wall time, CPU time, peak Rss/Pss summed over the whole process tree):

  dataclean  ``dataclean run <shards> -o <tmp> --workers W --quiet --fresh --config benchmarks/configs/rules_chain.yaml``
             (``pipeline:`` = gopher_repetition, gopher_quality, c4, fineweb_quality)
  datatrove  a generated script run by datatrove's own interpreter (``--datatrove-python``; datatrove lives in a
             separate venv, see ``setup_datatrove.sh``; the script does not import dataclean)::

                 LocalPipelineExecutor(pipeline=[ParquetReader(<shards>, glob_pattern="*.parquet", text_key="text",
                                                               id_key="id", read_metadata=False),
                                                 GopherRepetitionFilter(), GopherQualityFilter(), C4QualityFilter(),
                                                 FineWebQualityFilter(), ParquetWriter(<tmp>)],
                                       tasks=<number of shards>, workers=W, logging_dir=<tmp>)

The order alternates per repetition (dataclean first, then datatrove first, ...). Prints docs/s, MB/s (MB of
text / median wall s), median wall and CPU s and peak memory (max over repetitions) per side with the ratio
dataclean/datatrove (the project's goal for docs/s is >= 20x), then the documents each tool removed per rule
family (datatrove: ``dropped`` of each filter in logging_dir/stats.json; dataclean: ``removed_by_rule`` of
OUT/stats/summary.json). Writes everything, per repetition, to ``benchmarks/results/rules.json``.

datatrove is slow (70-100 s per 21,513-doc shard per worker on the 2-CPU reference machine), so by default only
the first 4 of the 12 bench shards are used; ``--limit-shards 12`` runs the whole bench corpus.

    python benchmarks/bench_rules.py                               # 4 bench shards, 3 reps, 2 workers
    python benchmarks/bench_rules.py --limit-shards 2 --reps 1     # quick check (~1.5 min)
"""
from __future__ import annotations

import argparse
import datetime as _dt
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from bench_foundation import _dataclean_cmd, _du, _machine, _ratio, compile_bytecode, side_by_side  # noqa: E402

DEFAULT_CORPUS = os.path.normpath(os.path.join(REPO, "..", "shared", "corpus", "bench"))
DEFAULT_JSON = os.path.join(HERE, "results", "rules.json")
DEFAULT_CONFIG = os.path.join(HERE, "configs", "rules_chain.yaml")
DEFAULT_DATATROVE_PYTHON = "/work/dtvenv/bin/python"
DEFAULT_SHARDS = 4  # datatrove takes ~7 min per repetition on all 12 shards with 2 workers

# The rule families, in chain order: (key, label, dataclean stage kind, datatrove filter class).
FAMILIES = [
    ("gopher_repetition", "Gopher repetition", "gopher_repetition", "GopherRepetitionFilter"),
    ("gopher_quality", "Gopher quality", "gopher_quality", "GopherQualityFilter"),
    ("c4", "C4 quality", "c4", "C4QualityFilter"),
    ("fineweb_quality", "FineWeb quality", "fineweb_quality", "FineWebQualityFilter"),
]

# ---------------------------------------------------------------------------------------------------------
# the datatrove side: written to a temporary file and run by --datatrove-python (never imports dataclean)
# ---------------------------------------------------------------------------------------------------------

# The end of every datatrove-side script (bench_rules, bench_dedup): after the pipeline is done, measuring
# only. The pool's workers were forked by multiprocess's fork server, which reaped them but is not itself
# waited for at exit: stop and reap it, so that the workers' CPU time reaches this process's (and so the
# benchmark's wait4) children rusage.
DATATROVE_SCRIPT_END = '''

def finish():
    try:
        from multiprocess import forkserver
        forkserver._forkserver._stop()
    except Exception as exc:  # noqa: BLE001
        print(f"could not stop the fork server: {exc!r}", file=sys.stderr)
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    print(f"children cpu s: user {ru.ru_utime:.2f} sys {ru.ru_stime:.2f}")
    if "dataclean" in sys.modules:
        raise SystemExit("the datatrove side must not import dataclean")


if __name__ == "__main__":  # the fork server re-imports this module
    main()
'''

DATATROVE_SCRIPT = '''\
"""bench_rules.py datatrove side: python THIS INPUT_DIR OUTPUT_DIR LOGGING_DIR TASKS WORKERS"""
import resource
import sys

from datatrove.executor import LocalPipelineExecutor
from datatrove.pipeline.filters import (C4QualityFilter, FineWebQualityFilter, GopherQualityFilter,
                                        GopherRepetitionFilter)
from datatrove.pipeline.readers import ParquetReader
from datatrove.pipeline.writers import ParquetWriter


def main():
    inp, out, logs, tasks, workers = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
    executor = LocalPipelineExecutor(
        pipeline=[
            # read_metadata=False: with the other columns as metadata, its ParquetWriter fails on bench shards
            # 4-11 ("Table schema does not match schema used to create file"); the filters read only the text
            ParquetReader(inp, glob_pattern="*.parquet", text_key="text", id_key="id", read_metadata=False),
            GopherRepetitionFilter(),
            GopherQualityFilter(),
            C4QualityFilter(),
            FineWebQualityFilter(),
            ParquetWriter(out),
        ],
        tasks=tasks,
        workers=workers,
        logging_dir=logs,
    )
    executor.run()
    finish()
''' + DATATROVE_SCRIPT_END



def _dt_env() -> dict:
    """Environment for the datatrove side: no PYTHONPATH leaking this repository (or anything else) in."""
    env = dict(os.environ)
    env.pop("PYTHONPATH", None)
    env.pop("PYTHONHOME", None)
    return env


def _venv_versions(python: str) -> dict:
    code = ("import json, platform; from importlib.metadata import version as v\n"
            "d = {'python': platform.python_version()}\n"
            "for p in ('datatrove', 'spacy', 'pyarrow', 'multiprocess'):\n"
            "    try: d[p] = v(p)\n"
            "    except Exception: d[p] = None\n"
            "print(json.dumps(d))")
    try:
        r = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True, env=_dt_env())
        return json.loads(r.stdout)
    except (OSError, subprocess.CalledProcessError, ValueError) as exc:
        return {"error": repr(exc)}


# ---------------------------------------------------------------------------------------------------------
# removal counts
# ---------------------------------------------------------------------------------------------------------

def _datatrove_counts(logs: str) -> dict:
    """Docs in/out and dropped per family (with the per-reason breakdown) from logging_dir/stats.json."""
    with open(os.path.join(logs, "stats.json"), encoding="utf-8") as fh:
        steps = json.load(fh)
    if len(steps) != len(FAMILIES) + 2:
        raise ValueError(f"expected {len(FAMILIES) + 2} steps in stats.json, found {len(steps)}")
    reader, filters, writer = steps[0], steps[1:-1], steps[-1]
    docs_in = reader["stats"].get("documents", {}).get("total", 0)
    removed, rules = {}, {}
    for (key, *_), step in zip(FAMILIES, filters):
        st = step["stats"]
        removed[key] = int(st.get("dropped", 0))
        rules[key] = {k[len("dropped_"):]: int(v) for k, v in sorted(st.items(), key=lambda kv: -_num(kv[1]))
                      if k.startswith("dropped_")}
        rules[key]["_step"] = step["name"]
    kept = int(writer["stats"].get("total", 0))
    return {"records_in": int(docs_in), "kept": kept, "removed": sum(removed.values()),
            "removed_by_family": removed, "removed_by_rule": rules}


def _num(v) -> float:
    return v if isinstance(v, (int, float)) else 0


def _dataclean_counts(out: str) -> dict:
    """Docs in/out and removed per family (stage) and per rule from OUT/stats/summary.json."""
    with open(os.path.join(out, "stats", "summary.json"), encoding="utf-8") as fh:
        s = json.load(fh)
    stage_to_family = {stage: key for key, _, stage, _ in FAMILIES}
    removed = {key: 0 for key, *_ in FAMILIES}
    rules: dict[str, dict] = {key: {} for key, *_ in FAMILIES}
    other: dict[str, int] = {}
    for k, n in sorted(s.get("removed_by_rule", {}).items(), key=lambda kv: -kv[1]):
        stage, _, rule = k.partition("/")
        fam = stage_to_family.get(stage)
        if fam is None:
            other[k] = n
            continue
        removed[fam] += n
        rules[fam][rule] = n
    return {"records_in": s.get("input_records"), "kept": s.get("kept"), "removed": s.get("removed"),
            "removed_by_family": removed, "removed_by_rule": rules, "removed_other": other,
            "conservation_ok": s.get("conservation_ok")}


# ---------------------------------------------------------------------------------------------------------
# tables
# ---------------------------------------------------------------------------------------------------------

def _side_summary(name: str, runs: list, stats) -> dict:
    from _measure import median

    ok = [r for r in runs if r.returncode == 0]
    walls = [r.wall_s for r in ok]
    wall = median(walls) if walls else float("nan")
    nan = float("nan")
    return {
        "name": name,
        "reps_ok": len(ok),
        "reps": len(runs),
        "wall_s_median": wall,
        "wall_s_min": min(walls) if walls else nan,
        "wall_s_max": max(walls) if walls else nan,
        "docs_per_s": stats.docs / wall if walls else nan,
        "mb_per_s": stats.text_mb / wall if walls else nan,
        "peak_rss_mib_max": max((r.peak_rss_mib for r in ok), default=nan),
        "peak_pss_mib_max": max((r.peak_pss_mib for r in ok), default=nan),
        "maxrss_single_mib_max": max((r.maxrss_single_mib for r in ok), default=nan),
        "cpu_s_median": median([r.user_s + r.sys_s for r in ok]) if ok else nan,
    }


def _fmt_table(header: str, dc: dict, dt: dict, paired: float) -> str:
    out = side_by_side(header, dc, dt, "datatrove", "dc/dt")
    speed = _ratio(dc["docs_per_s"], dt["docs_per_s"])
    out.append(f"speed-up dataclean/datatrove (docs/s): {speed:.1f}x (goal >= 20x: "
               f"{'met' if speed >= 20 else 'NOT met' if speed == speed else 'n/a'}); median of per-rep "
               f"wall ratios datatrove/dataclean: {paired:.1f}x; CPU s datatrove/dataclean: "
               f"{_ratio(dt['cpu_s_median'], dc['cpu_s_median']):.1f}x")
    out.append(f"reps ok: dataclean {dc['reps_ok']}/{dc['reps']}, datatrove {dt['reps_ok']}/{dt['reps']}")
    return "\n".join(out)


def _fmt_removed(docs: int, dc: dict | None, dt: dict | None) -> str:
    def cell(c: dict | None, key: str) -> str:
        if c is None:
            return "n/a"
        return f"{c['removed_by_family'][key]:,}"

    w0 = 18
    out = [f"documents removed per rule family (chain order; each family sees only what the previous ones kept; "
           f"{docs:,} docs in)",
           f"{'family':<{w0}}  {'dataclean':>10}  {'datatrove':>10}  {'dc - dt':>8}",
           f"{'-' * w0}  {'-' * 10}  {'-' * 10}  {'-' * 8}"]
    for key, label, *_ in FAMILIES:
        diff = (f"{dc['removed_by_family'][key] - dt['removed_by_family'][key]:+,}" if dc and dt else "")
        out.append(f"{label:<{w0}}  {cell(dc, key):>10}  {cell(dt, key):>10}  {diff:>8}")
    for label, k in (("total removed", "removed"), ("kept", "kept")):
        a = f"{dc[k]:,}" if dc else "n/a"
        b = f"{dt[k]:,}" if dt else "n/a"
        diff = f"{dc[k] - dt[k]:+,}" if dc and dt else ""
        out.append(f"{label:<{w0}}  {a:>10}  {b:>10}  {diff:>8}")
    if dc and dc.get("removed_other"):
        out.append(f"(dataclean also removed, outside the four families: {dc['removed_other']})")
    out.append("note: datatrove's filters stop at the first failing rule; dataclean's stages compute every signal.")
    out.append("The chain order is the same, so per-family counts compare where the definitions agree. datatrove's")
    out.append("C4 filter also rewrites the text it keeps (drops lines) before FineWeb quality sees it.")
    out.append("")
    out.append("by rule (top 6 per family):")
    for key, label, *_ in FAMILIES:
        for name, c in (("dataclean", dc), ("datatrove", dt)):
            if c is None:
                continue
            items = [(r, n) for r, n in c["removed_by_rule"][key].items() if not r.startswith("_")][:6]
            out.append(f"  {label:<18} {name:<9} " + (", ".join(f"{r} {n:,}" for r, n in items) or "-"))
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------------
# driver
# ---------------------------------------------------------------------------------------------------------

_SUMMARY_RE = re.compile(r"(\d+) records in: (\d+) kept, (\d+) removed")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    from _measure import measure, median, parquet_inputs

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default=DEFAULT_CORPUS, help=f"folder of part-*.parquet (default {DEFAULT_CORPUS})")
    ap.add_argument("--limit-shards", type=int, default=DEFAULT_SHARDS, metavar="K",
                    help=f"use only the first K shards (default {DEFAULT_SHARDS}: datatrove is slow; 0 = all)")
    ap.add_argument("--reps", type=int, default=3, help="repetitions of each side (default 3)")
    ap.add_argument("--workers", type=int, default=2, help="worker processes for both sides (default 2)")
    ap.add_argument("--datatrove-python", default=DEFAULT_DATATROVE_PYTHON,
                    help=f"python of the datatrove venv (default {DEFAULT_DATATROVE_PYTHON}; "
                         f"create one with benchmarks/setup_datatrove.sh)")
    ap.add_argument("--config", default=DEFAULT_CONFIG, help=f"dataclean config (default {DEFAULT_CONFIG})")
    ap.add_argument("--tmp", default=None, help="folder for the outputs (default: a new temporary folder)")
    ap.add_argument("--json", default=DEFAULT_JSON, help=f"where to write the results (default {DEFAULT_JSON})")
    ap.add_argument("--interval", type=float, default=0.1,
                    help="memory sampling interval, s (default 0.1: reading smaps_rollup of every process every "
                         "20 ms took ~15%% of a 2-core machine, slowing whichever side was measured)")
    a = ap.parse_args(argv)

    all_files = sorted(glob.glob(os.path.join(a.corpus, "*.parquet")))
    files = all_files[:a.limit_shards] if a.limit_shards else all_files
    if not files:
        print(f"error: no .parquet files in {a.corpus}", file=sys.stderr)
        return 2
    if not os.access(a.datatrove_python, os.X_OK):
        print(f"error: no datatrove python at {a.datatrove_python} (create a venv with "
              f"benchmarks/setup_datatrove.sh VENV_DIR, then pass --datatrove-python VENV_DIR/bin/python)",
              file=sys.stderr)
        return 2
    dt_versions = _venv_versions(a.datatrove_python)
    if not dt_versions.get("datatrove"):
        print(f"error: datatrove is not importable by {a.datatrove_python}: {dt_versions}", file=sys.stderr)
        return 2
    load_before = list(os.getloadavg())
    stats = parquet_inputs(files)  # also warms the page cache for both sides
    subset = (f"first {len(files)} of {len(all_files)} shards" if len(files) < len(all_files)
              else f"all {len(files)} shards")
    header = (f"rules chain (Gopher repetition > Gopher quality > C4 quality > FineWeb quality), {subset} of "
              f"{a.corpus}: {stats.docs:,} docs, {stats.text_mb:.2f} MB text; {a.reps} reps, {a.workers} workers; "
              f"datatrove {dt_versions.get('datatrove')}")
    print(header, flush=True)

    tmp_root = tempfile.mkdtemp(prefix="dataclean-bench-rules-", dir=a.tmp)
    dc_out = os.path.join(tmp_root, "dataclean")
    dt_in, dt_out, dt_logs = (os.path.join(tmp_root, n) for n in ("dt_input", "dt_output", "dt_logs"))
    dt_script = os.path.join(tmp_root, "datatrove_chain.py")
    with open(dt_script, "w", encoding="utf-8") as fh:
        fh.write(DATATROVE_SCRIPT)
    os.makedirs(dt_in)
    for f in files:  # datatrove reads a folder: give it exactly the chosen shards
        os.symlink(os.path.abspath(f), os.path.join(dt_in, os.path.basename(f)))

    dc_cmd = _dataclean_cmd() + ["run", *files, "-o", dc_out, "--workers", str(a.workers), "--quiet", "--fresh",
                                 "--config", os.path.abspath(a.config)]
    dt_cmd = [a.datatrove_python, dt_script, dt_in, dt_out, dt_logs, str(len(files)), str(a.workers)]
    runs: dict[str, list] = {"dataclean": [], "datatrove": []}
    counts: dict[str, list] = {"dataclean": [], "datatrove": []}
    problems: list[str] = []

    def run_side(name: str, rep: int) -> None:
        if name == "datatrove":  # its executor skips tasks already completed in logging_dir
            shutil.rmtree(dt_out, ignore_errors=True)
            shutil.rmtree(dt_logs, ignore_errors=True)
            m = measure(dt_cmd, cwd=tmp_root, env=_dt_env(), interval=a.interval)
        else:  # the previous rep's output is removed outside the timing, as datatrove's is
            shutil.rmtree(dc_out, ignore_errors=True)
            m = measure(dc_cmd, cwd=REPO, interval=a.interval)
        c = None
        if m.returncode == 0:
            try:
                c = _datatrove_counts(dt_logs) if name == "datatrove" else _dataclean_counts(dc_out)
            except (OSError, ValueError, KeyError) as exc:
                problems.append(f"rep {rep}: {name}: cannot read its removal counts: {exc!r}")
            if c is not None:
                if c["records_in"] != stats.docs:
                    problems.append(f"rep {rep}: {name} read {c['records_in']} records, inputs hold {stats.docs}")
                if name == "dataclean":
                    hit = _SUMMARY_RE.search(m.stdout)
                    if not hit:
                        problems.append(f"rep {rep}: dataclean printed no summary line")
                    if c.get("conservation_ok") is False:
                        problems.append(f"rep {rep}: dataclean summary.json: conservation_ok is false")
                elif c["records_in"] != c["kept"] + c["removed"]:
                    problems.append(f"rep {rep}: datatrove: {c['records_in']} in != {c['kept']} kept + "
                                    f"{c['removed']} removed")
                m.extra = {k: v for k, v in c.items() if k in ("records_in", "kept", "removed")}
        else:
            problems.append(f"rep {rep}: {name} exited {m.returncode}: {m.stderr.strip()[-2000:]}")
        m.extra["output_bytes"] = _du(dt_out if name == "datatrove" else os.path.join(dc_out, "data"))
        runs[name].append(m)
        counts[name].append(c)
        print(f"  rep {rep} {name:<9} wall {m.wall_s:7.2f} s  CPU {m.user_s + m.sys_s:7.2f} s  "
              f"peak RSS {m.peak_rss_mib:7.0f} MiB  PSS {m.peak_pss_mib:7.0f} MiB  procs {m.peak_procs}  "
              f"rc {m.returncode}", flush=True)

    # numba compiles the rule kernels once per install (cached on disk): done here, not inside a timed rep,
    # as a user's first run after installing pays it once (~5 s)
    compile_bytecode()
    subprocess.run([sys.executable, "-c", "from dataclean.text import kernels; print('kernels:', kernels.warm_up())"],
                   cwd=REPO, check=True)
    try:
        for rep in range(a.reps):
            order = ["dataclean", "datatrove"] if rep % 2 == 0 else ["datatrove", "dataclean"]
            for name in order:
                run_side(name, rep)
    finally:
        shutil.rmtree(tmp_root, ignore_errors=True)

    final_counts: dict[str, dict | None] = {}
    for name, cs in counts.items():
        ok = [c for c in cs if c is not None]
        final_counts[name] = ok[-1] if ok else None
        if any(c["removed_by_family"] != ok[0]["removed_by_family"] for c in ok[1:]):
            problems.append(f"{name}: removal counts differ between repetitions: "
                            f"{[c['removed_by_family'] for c in ok]}")

    dc = _side_summary("dataclean", runs["dataclean"], stats)
    dt = _side_summary("datatrove", runs["datatrove"], stats)
    per_rep = [t.wall_s / d.wall_s for d, t in zip(runs["dataclean"], runs["datatrove"])
               if d.returncode == 0 and t.returncode == 0]
    paired = median(per_rep) if per_rep else float("nan")
    table = _fmt_table(header, dc, dt, paired)
    removed_table = _fmt_removed(stats.docs, final_counts["dataclean"], final_counts["datatrove"])
    print()
    print(table)
    print()
    print(removed_table)
    for p in problems:
        print(f"PROBLEM: {p}", file=sys.stderr)

    result = {
        "benchmark": "rules",
        "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(["python", os.path.relpath(os.path.abspath(__file__), REPO), *argv]),
        "machine": dict(_machine(), loadavg_before=load_before, datatrove_venv=dt_versions),
        "settings": {"corpus": os.path.abspath(a.corpus), "files": [os.path.basename(f) for f in files],
                     "reps": a.reps, "workers": a.workers, "sample_interval_s": a.interval,
                     "families": [k for k, *_ in FAMILIES],
                     "dataclean_cmd": [os.path.basename(dc_cmd[0]), "run", "<inputs>", "-o", "<tmp>", "--workers",
                                       str(a.workers), "--quiet", "--fresh", "--config",
                                       os.path.relpath(os.path.abspath(a.config), REPO)],
                     "datatrove_python": a.datatrove_python,
                     "datatrove_pipeline": "LocalPipelineExecutor([ParquetReader(<inputs>, glob_pattern='*.parquet', "
                                           "text_key='text', id_key='id'), GopherRepetitionFilter(), "
                                           "GopherQualityFilter(), C4QualityFilter(), FineWebQualityFilter(), "
                                           f"ParquetWriter(<tmp>)], tasks={len(files)}, workers={a.workers})",
                     "datatrove_script": DATATROVE_SCRIPT},
        "inputs": {"files": stats.files, "docs": stats.docs, "text_bytes": stats.text_bytes,
                   "text_mb": round(stats.text_mb, 3), "file_bytes": stats.file_bytes},
        "summary": {"dataclean": dc, "datatrove": dt,
                    "speedup_docs_per_s_dataclean_over_datatrove": _ratio(dc["docs_per_s"], dt["docs_per_s"]),
                    "ratio_dataclean_over_datatrove": {
                        "wall_s_median": _ratio(dc["wall_s_median"], dt["wall_s_median"]),
                        "wall_s_paired_median_datatrove_over_dataclean": paired,
                        "docs_per_s": _ratio(dc["docs_per_s"], dt["docs_per_s"]),
                        "cpu_s_median": _ratio(dc["cpu_s_median"], dt["cpu_s_median"]),
                        "peak_rss_mib_max": _ratio(dc["peak_rss_mib_max"], dt["peak_rss_mib_max"]),
                        "peak_pss_mib_max": _ratio(dc["peak_pss_mib_max"], dt["peak_pss_mib_max"])}},
        "removed": final_counts,
        "runs": {k: [dict(m.as_dict(), rep=i) for i, m in enumerate(v)] for k, v in runs.items()},
        "problems": problems,
        "table": table,
        "removed_table": removed_table,
    }
    for side in result["runs"].values():  # absolute temp paths and file lists only bloat the JSON
        for r in side:
            r["cmd"] = [os.path.basename(r["cmd"][0]), os.path.basename(r["cmd"][1]), "..."]
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    with open(a.json, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2, ensure_ascii=False)
        fh.write("\n")
    print(f"\nresults: {os.path.abspath(a.json)}")
    ok = all(m.returncode == 0 for v in runs.values() for m in v) and not problems
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
