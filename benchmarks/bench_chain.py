"""Near-duplicate chains: the global step of ``minhash_dedup`` on a chain vs. on random documents.

A *chain* is the worst case of the greedy clustering of ``minhash_dedup``: every document is its predecessor
with ONE word replaced (a random position, a random word of the vocabulary), so consecutive documents have a
Jaccard of about 0.95, documents a few steps apart still reach 0.8, and the whole chain is one verified
connected component in which each representative absorbs only its few neighbours. Before issue 25 item 5 the
clustering compared every representative with every open member of its component: O(n^2) on a chain.

Inputs (generated into a temporary folder, not measured), for each size N (default 10,000, 50,000, 200,000):

* ``chain``: one chain of N documents. The first is ``--sentences`` (default 12) random sentences of the Brown
  Corpus (English prose of 1961, in ``/work/shared/corpus/bench``, benchmark use only), about 250 words; the
  rows are written in a shuffled order (seeded), so that document keys are not in chain order.
* ``random``: N documents of ``--sentences`` random sentences each, independently drawn: the same text
  statistics (and so the same pass-1 cost), next to no near-duplicates.

Each input is run once as ``dataclean run <in> -o <out> --workers W --quiet --fresh`` with the DEFAULT
configuration (``rules/default.yaml``; ``--config`` to change), measured by :func:`_measure.measure` (wall time,
peak Rss/Pss summed over the process tree). Reported from the run's ``manifest.json``: ``timings_seconds``
(``global`` is the global step: exact + near dedup, clustering); from ``stats/summary.json``: the near
duplicates removed. Printed as a markdown table, saved to ``benchmarks/results/bench_chain.json``.

    python benchmarks/bench_chain.py                          # 10k, 50k, 200k: chain and random
    python benchmarks/bench_chain.py --sizes 10000 --kinds chain
    python benchmarks/bench_chain.py --generate-only DIR      # just write the inputs

The goal (issue 25 item 5): a 50k chain spends at most 10x the global-step time of 50k random documents.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
DEFAULT_CORPUS = os.path.join(REPO, "..", "shared", "corpus", "bench")
ROWS_PER_FILE = 25_000


def brown_sentences(corpus: str) -> list[list[str]]:
    """The sentences (one a line in the Brown Corpus text) of at least 6 words, as word lists."""
    out = []
    for f in sorted(glob.glob(os.path.join(corpus, "*.parquet"))):
        t = pq.read_table(f, columns=["id", "text"])
        t = t.filter(pc.starts_with(t.column("id"), "brown_corpus"))
        for text in t.column("text").to_pylist():
            for line in text.splitlines():
                words = line.split()
                if len(words) >= 6:
                    out.append(words)
    if not out:
        raise SystemExit(f"no Brown Corpus documents in {corpus}")
    return out


def make_docs(kind: str, n: int, sentences: list[list[str]], per_doc: int, seed: int) -> list[tuple[str, str]]:
    """(id, text) of ``n`` documents of ``kind`` (chain or random), in chain / generation order. A document is
    ``per_doc`` sentences, one a line (so that C4's line rules keep them); a chain step replaces one alphabetic
    word (never punctuation) by a word drawn from the corpus's own word frequencies, so that the chain keeps the
    statistics of English text (stop words...) however far it drifts."""
    rng = random.Random(f"{seed}-{kind}-{n}")
    docs = []
    if kind == "chain":
        tokens = [w for s in sentences for w in s if w.isalpha()]
        lines = [list(s) for s in rng.sample(sentences, per_doc)]
        slots = [(li, wi) for li, line in enumerate(lines) for wi, w in enumerate(line) if w.isalpha()]
        for i in range(n):
            if i:
                li, wi = slots[rng.randrange(len(slots))]
                old = lines[li][wi]
                while lines[li][wi] == old:
                    lines[li][wi] = tokens[rng.randrange(len(tokens))]
            docs.append((f"chain-{i:07d}", "\n".join(" ".join(line) for line in lines)))
    elif kind == "random":
        for i in range(n):
            docs.append((f"random-{i:07d}", "\n".join(" ".join(s) for s in rng.sample(sentences, per_doc))))
    else:
        raise ValueError(kind)
    return docs


def write_input(docs: list[tuple[str, str]], folder: str, seed: int) -> None:
    """Parquet files of ROWS_PER_FILE rows, rows shuffled (so document keys are not in chain order)."""
    os.makedirs(folder, exist_ok=True)
    order = list(range(len(docs)))
    random.Random(seed).shuffle(order)
    for f, lo in enumerate(range(0, len(order), ROWS_PER_FILE)):
        part = [docs[i] for i in order[lo:lo + ROWS_PER_FILE]]
        pq.write_table(pa.table({"id": [d[0] for d in part], "text": [d[1] for d in part],
                                 "source": ["web"] * len(part), "lang_hint": ["en"] * len(part)}),
                       os.path.join(folder, f"part-{f:05d}.parquet"), compression="zstd")


def _run_counts(out: str) -> dict:
    with open(os.path.join(out, "manifest.json"), encoding="utf-8") as fh:
        timings = json.load(fh).get("timings_seconds", {})
    with open(os.path.join(out, "stats", "summary.json"), encoding="utf-8") as fh:
        s = json.load(fh)
    rb = s.get("removed_by_rule", {})
    return {"records_in": s.get("input_records"), "kept": s.get("kept"), "removed": s.get("removed"),
            "near_duplicate": sum(v for k, v in rb.items() if k.startswith("minhash_dedup/")),
            "exact_duplicate": sum(v for k, v in rb.items() if k.startswith("exact_dedup/")),
            "timings_seconds": timings}


def _git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], cwd=REPO, capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return ""


def _fmt(rows: list[dict]) -> str:
    lines = ["| input | docs | near dups removed | global s | pass1 s | wall s | peak RSS MiB | peak PSS MiB |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        c, t = r.get("counts") or {}, (r.get("counts") or {}).get("timings_seconds", {})

        def g(d, k, f="{:.1f}"):
            return f.format(d[k]) if isinstance(d.get(k), (int, float)) else "n/a"
        lines.append(f"| {r['kind']} | {r['docs']:,} | {g(c, 'near_duplicate', '{:,}')} | {g(t, 'global')} | "
                     f"{g(t, 'pass1')} | {r['wall_s']:.1f} | {r['peak_rss_mib']:,.0f} | {r['peak_pss_mib']:,.0f} |")
    by = {(r["kind"], r["docs"]): r for r in rows}
    for (kind, n), r in sorted(by.items()):
        other = by.get(("random", n))
        if kind == "chain" and other:
            a = (r.get("counts") or {}).get("timings_seconds", {}).get("global")
            b = (other.get("counts") or {}).get("timings_seconds", {}).get("global")
            if a and b:
                lines.append(f"\nchain/random global-step time at {n:,}: {a / b:.2f}x")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    from _measure import measure
    from bench_foundation import _dataclean_cmd, compile_bytecode

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--sizes", type=int, nargs="+", default=[10_000, 50_000, 200_000])
    p.add_argument("--kinds", nargs="+", default=["chain", "random"], choices=["chain", "random"])
    p.add_argument("--corpus", default=DEFAULT_CORPUS)
    p.add_argument("--sentences", type=int, default=12, help="sentences per document (default 12, ~250 words)")
    p.add_argument("--seed", type=int, default=25)
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--config", default=None, help="a config file (default: the default configuration)")
    p.add_argument("--json", default=os.path.join(HERE, "results", "bench_chain.json"))
    p.add_argument("--tmp", default=None)
    p.add_argument("--interval", type=float, default=0.05, help="memory sampling interval, s (default 0.05)")
    p.add_argument("--label", default="", help="a note saved with the results (e.g. before/after)")
    p.add_argument("--generate-only", metavar="DIR", default=None)
    a = p.parse_args(argv)

    sentences = brown_sentences(a.corpus)
    if not a.generate_only:
        compile_bytecode()  # (as bench_dedup.py: no bytecode compiled inside a timed run)
    base = a.generate_only or tempfile.mkdtemp(prefix="dataclean-bench-chain-", dir=a.tmp)
    rows = []
    try:
        for n in a.sizes:
            for kind in a.kinds:
                folder = os.path.join(base, f"{kind}-{n}")
                t0 = time.perf_counter()
                write_input(make_docs(kind, n, sentences, a.sentences, a.seed), folder, a.seed)
                print(f"{kind} {n:,}: generated in {time.perf_counter() - t0:.1f} s", flush=True)
                if a.generate_only:
                    continue
                out = os.path.join(base, f"out-{kind}-{n}")
                cmd = _dataclean_cmd() + ["run", folder, "-o", out, "--workers", str(a.workers), "--quiet", "--fresh"]
                cmd += ["--config", os.path.abspath(a.config)] if a.config else []
                os.sync()
                m = measure(cmd, cwd=REPO, interval=a.interval)
                row = {"kind": kind, "docs": n, "wall_s": round(m.wall_s, 2), "peak_rss_mib": round(m.peak_rss_mib, 1),
                       "peak_pss_mib": round(m.peak_pss_mib, 1), "maxrss_single_mib": round(m.maxrss_single_mib, 1),
                       "cpu_s": round(m.user_s + m.sys_s, 2), "returncode": m.returncode}
                if m.returncode == 0:
                    row["counts"] = _run_counts(out)
                else:
                    row["stderr_tail"] = m.as_dict()["stderr_tail"]
                rows.append(row)
                t = (row.get("counts") or {}).get("timings_seconds", {})
                print(f"  rc {m.returncode}  wall {m.wall_s:.1f} s  global {t.get('global')} s  peak RSS "
                      f"{m.peak_rss_mib:,.0f} MiB  near dups {(row.get('counts') or {}).get('near_duplicate')}",
                      flush=True)
                shutil.rmtree(out, ignore_errors=True)
                shutil.rmtree(folder, ignore_errors=True)
    finally:
        if not a.generate_only:
            shutil.rmtree(base, ignore_errors=True)
    if a.generate_only:
        return 0
    table = _fmt(rows)
    print(table)
    result = {"label": a.label, "date": time.strftime("%Y-%m-%d %H:%M:%S"), "rows": rows, "table": table,
              "args": {k: v for k, v in vars(a).items() if k != "generate_only"},
              "machine": {"nproc": os.cpu_count(), "python": platform.python_version(),
                          "git_commit": _git("rev-parse", "HEAD"), "git_dirty": bool(_git("status", "--porcelain"))}}
    os.makedirs(os.path.dirname(a.json), exist_ok=True)
    with open(a.json, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=1)
    return 0 if all(r["returncode"] == 0 for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
