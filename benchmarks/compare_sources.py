"""``dataclean compare`` on real sources of the bench corpus: what the gates say, and how long it takes.

Two comparisons, each with the default gates (rules/compare/default.yaml):

* **web vs web**: the ``web`` documents of part-00000 (reference) against those of part-00001 (candidate):
  two samples of one source, which should pass;
* **web vs books**: the ``web`` documents of parts 0-3 (reference) against the ``books`` documents of the
  same parts (candidate): two different sources, which should not.

    python benchmarks/compare_sources.py                  # --sample 5000 (~1-2 min on 2 busy cores)
    python benchmarks/compare_sources.py --sample 20000   # the CLI's default sample

Writes ``benchmarks/results/compare_sources.json``: per comparison the gates (value, bound, pass), every
gated feature and the ten most divergent ones (JS, its noise floor, KS, medians), the language mix, the
diversity measures, the near-duplicate rates and the time per phase. The compare.html pages are left in
``--out`` (default: a temporary folder, removed) when it is given.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import shutil
import tempfile
import time

import duckdb

from dataclean.compare import compare

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.path.join(os.path.dirname(REPO), "shared", "corpus", "bench")


def extract(corpus: str, parts: list[int], source: str, path: str) -> int:
    files = ", ".join(f"'{os.path.join(corpus, f'part-{p:05d}.parquet')}'" for p in parts)
    con = duckdb.connect()
    try:
        con.execute(f"COPY (SELECT id, text, source FROM read_parquet([{files}]) WHERE source = '{source}' "
                    f"ORDER BY id) TO '{path}' (FORMAT parquet)")
        return con.execute(f"SELECT count(*) FROM '{path}'").fetchall()[0][0]
    finally:
        con.close()


def digest(result: dict, wall: float) -> dict:
    feats = result["features"]
    gated = [g["gate"].split(".", 1)[1] for g in result["gates"] if g["gate"].startswith(("js.", "ks."))]
    top = [n for n in result["divergence_ranking"] if not feats[n]["constant"]][:10]

    def feat(n):
        f = feats[n]
        return {"js": round(f["js"], 4), "js_noise": round(f["js_noise"], 4),
                "ks": None if f["ks"] is None else round(f["ks"], 4),
                "median_reference": f["reference"].get("p50"), "median_candidate": f["candidate"].get("p50")}

    lang = result["language"]
    return {
        "reference": result["reference"], "candidate": result["candidate"],
        "passed": result["passed"], "failed": result["failed"],
        "gates": [{k: g[k] for k in ("gate", "value", "op", "bound", "passed")} for g in result["gates"]],
        "gated_features": {n: feat(n) for n in dict.fromkeys(gated)},
        "most_divergent": {n: feat(n) for n in top},
        "language": {"js": lang["js"],
                     **{side: {k: round(v["share"], 4) for k, v in list(lang[side].items())[:6]}
                        for side in ("reference", "candidate")}},
        "diversity": result["diversity"],
        "duplicates": {k: v for k, v in result["duplicates"].items() if not k.startswith("examples")},
        "seconds": result["seconds"], "wall_seconds": round(wall, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", default=CORPUS)
    ap.add_argument("--sample", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=os.path.join(REPO, "benchmarks", "results", "compare_sources.json"))
    ap.add_argument("--out", default=None, help="keep the inputs and compare.html pages here")
    args = ap.parse_args()
    work = args.out or tempfile.mkdtemp(prefix="dc-compare-")
    os.makedirs(work, exist_ok=True)
    try:
        plans = [
            ("web part-00000 vs web part-00001", ([0], "web"), ([1], "web")),
            ("web parts 0-3 vs books parts 0-3", ([0, 1, 2, 3], "web"), ([0, 1, 2, 3], "books")),
        ]
        out = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "machine": {"nproc": os.cpu_count(), "python": platform.python_version(),
                           "loadavg": os.getloadavg()},
               "sample": args.sample, "seed": args.seed, "comparisons": {}}
        for title, (rparts, rsrc), (cparts, csrc) in plans:
            slug = title.replace(" ", "_")
            ref = os.path.join(work, f"{slug}-reference.parquet")
            cand = os.path.join(work, f"{slug}-candidate.parquet")
            nr = extract(args.corpus, rparts, rsrc, ref)
            nc = extract(args.corpus, cparts, csrc, cand)
            t = time.perf_counter()
            result = compare(ref, cand, os.path.join(work, slug), sample=args.sample, seed=args.seed)
            wall = time.perf_counter() - t
            d = digest(result, wall)
            d["reference"]["input"] = f"source={rsrc}, parts {rparts} ({nr:,} docs)"
            d["candidate"]["input"] = f"source={csrc}, parts {cparts} ({nc:,} docs)"
            out["comparisons"][title] = d
            print(f"{title}: {'PASS' if d['passed'] else 'FAIL'} in {wall:.1f} s "
                  f"({d['reference']['sampled']:,} vs {d['candidate']['sampled']:,} docs)")
            for g in d["gates"]:
                print(f"  {'ok  ' if g['passed'] else 'FAIL'} {g['gate']:<24} {g['value']:.4f} {g['op']} {g['bound']}")
            print("  most divergent: " + ", ".join(f"{n} {f['js']:.3f}" for n, f in d["most_divergent"].items()))
        os.makedirs(os.path.dirname(args.json), exist_ok=True)
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(out, fh, indent=1, ensure_ascii=False)
        print(f"wrote {args.json}")
    finally:
        if args.out is None:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
