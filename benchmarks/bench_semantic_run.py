"""Semantic dedup on the bench corpus through ``dataclean run``: the default pipeline with ``embed`` and
``semantic_dedup`` added (``add_stages``), against the same run without them, in one invocation.

    python benchmarks/bench_semantic_run.py [--model static|minilm|FOLDER] [--eps 0.01 0.05] [--shards N]
        [--workers 2] [--pairs 20] [-o benchmarks/results/semantic_run_static.json]

For each run: wall time, CPU time, peak RSS and PSS of the process tree (benchmarks/_measure.py), documents in
and kept; for each eps: removals by rule ``semantic_duplicate`` by source, the fit (``dedup/semantic_dedup/
fit.json``), and ``--pairs`` removed documents with the kept one they duplicate (a seeded hash sample), written
to ``results/semantic_pairs_<model>_<eps>.md`` to be read. The embedding's CPU cost is the run's CPU time
minus the baseline's; docs/s per core is the documents embedded (the pass-1 survivors of the stages before it)
over that time.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))

from _measure import measure, parquet_inputs  # noqa: E402
from models import model_folder  # noqa: E402


def run(inputs, out, cfg, workers):
    shutil.rmtree(out, ignore_errors=True)
    m = measure([sys.executable, "-m", "dataclean", "run", *inputs, "-o", str(out), "--config", str(cfg),
                 "--workers", str(workers), "--quiet"])
    if m.returncode != 0:
        raise SystemExit(f"run failed ({m.returncode}): {m.stderr[-2000:]}")
    return m


def summary(out) -> dict:
    import duckdb

    con = duckdb.connect()
    kept = con.sql(f"SELECT count(*) FROM read_parquet('{out}/data/*.parquet')").fetchall()[0][0]
    rows = con.sql(f"SELECT rule, count(*) FROM read_parquet('{out}/rejected/*.parquet') GROUP BY rule "
                   "ORDER BY 2 DESC").fetchall()
    return {"kept": kept, "removed_by_rule": dict(rows)}


def semantic(out, pairs: int, seed: int = 0) -> tuple[dict, list[dict]]:
    import duckdb

    con = duckdb.connect()
    rej = f"read_parquet('{out}/rejected/*.parquet')"
    data = f"read_parquet('{out}/data/*.parquet')"
    by_source = dict(con.sql(f"SELECT source, count(*) FROM {rej} WHERE rule = 'semantic_duplicate' "
                             "GROUP BY source ORDER BY 2 DESC, 1").fetchall())
    cos = con.sql(f"SELECT min(value), median(value), max(value) FROM {rej} "
                  "WHERE rule = 'semantic_duplicate'").fetchall()[0]
    sample = con.sql(
        f"SELECT r.id, r.source, r.value, r.text, r.dup_of, d.source AS dup_source, d.text AS dup_text "
        f"FROM {rej} r JOIN {data} d ON d.id = r.dup_of WHERE r.rule = 'semantic_duplicate' "
        f"ORDER BY hash(r.id || '{seed}') LIMIT {pairs}").to_arrow_table().to_pylist()
    fit = json.loads(Path(out, "dedup", "semantic_dedup", "fit.json").read_text())
    return {"removed_by_source": by_source, "removed": sum(by_source.values()),
            "cosine_min_median_max": [round(c, 4) if c is not None else None for c in cos], "fit": fit}, sample


def write_pairs(path, sample, model, eps):
    lines = [f"# {len(sample)} removed pairs: semantic_dedup, model {model}, eps {eps}", "",
             "Each: the removed document, then the kept one (`dup_of`); texts cut at 600 characters.", ""]
    for i, p in enumerate(sample, 1):
        cut = lambda t: (t or "").replace("\n", " ⏎ ")[:600]  # noqa: E731
        lines += [f"## {i}. `{p['id']}` ({p['source']}) → `{p['dup_of']}` ({p['dup_source']}), cosine "
                  f"{p['value']:.4f}", "", f"> **removed** {cut(p['text'])}", ">",
                  f"> **kept** {cut(p['dup_text'])}", "", "judgement: ", ""]
    Path(path).write_text("\n".join(lines), encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--inputs", default=str(REPO.parent / "shared" / "corpus" / "bench"))
    ap.add_argument("--model", default="static")
    ap.add_argument("--eps", type=float, nargs="+", default=[0.01, 0.05])
    ap.add_argument("--shards", type=int, default=None, help="only the first N bench shards")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--work", default="/tmp/bench_semantic_run")
    ap.add_argument("-o", "--output", default=None)
    a = ap.parse_args()
    folder = model_folder(a.model)
    inputs = sorted(glob.glob(os.path.join(a.inputs, "*.parquet")))[:a.shards]
    stats = parquet_inputs(inputs)
    work = Path(a.work)
    work.mkdir(parents=True, exist_ok=True)
    base_cfg = work / "baseline.yaml"
    base_cfg.write_text("{}\n")
    result = {"inputs": {"files": len(inputs), "docs": stats.docs, "text_mb": round(stats.text_mb, 1)},
              "model": a.model, "model_folder": folder, "workers": a.workers, "machine": platform.node(),
              "cores": os.cpu_count(), "load_before": os.getloadavg(), "runs": {}}
    base = run(inputs, work / "out-base", base_cfg, a.workers)
    result["runs"]["baseline"] = {"wall_s": round(base.wall_s, 1), "cpu_s": round(base.user_s + base.sys_s, 1),
                                  "peak_rss_mib": round(base.peak_rss_mib), "peak_pss_mib": round(base.peak_pss_mib),
                                  **summary(work / "out-base")}
    for eps in a.eps:
        cfg = work / f"semantic-{eps}.yaml"
        cfg.write_text(f"add_stages:\n  - stage: embed\n    model: {folder}\n"
                       f"  - stage: semantic_dedup\n    eps: {eps}\n")
        out = work / f"out-{eps}"
        t0 = time.time()
        m = run(inputs, out, cfg, a.workers)
        sem, sample = semantic(out, a.pairs)
        cpu = m.user_s + m.sys_s
        embedded = sem["fit"]["documents"]
        extra = cpu - (base.user_s + base.sys_s)
        result["runs"][f"eps={eps}"] = {
            "wall_s": round(m.wall_s, 1), "cpu_s": round(cpu, 1), "peak_rss_mib": round(m.peak_rss_mib),
            "peak_pss_mib": round(m.peak_pss_mib), "extra_cpu_s_vs_baseline": round(extra, 1),
            "documents_embedded": embedded,
            "embed_and_semdedup_docs_per_cpu_s": round(embedded / extra, 1) if extra > 0 else None,
            **summary(out), "semantic": sem, "started": t0}
        pairs = REPO / "benchmarks" / "results" / f"semantic_pairs_{a.model if os.sep not in a.model else 'model'}_{eps}.md"
        write_pairs(pairs, sample, a.model, eps)
        result["runs"][f"eps={eps}"]["pairs_file"] = str(pairs.relative_to(REPO))
    result["load_after"] = os.getloadavg()
    text = json.dumps(result, indent=2, ensure_ascii=False)
    print(text)
    dest = a.output or str(REPO / "benchmarks" / "results" / f"semantic_run_{a.model if os.sep not in a.model else 'model'}.json")
    Path(dest).write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
