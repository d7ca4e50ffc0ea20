"""Script folding in dedup (``fold_scripts``): recall on real 简/繁 pairs, false merges, pass-1 cost.

**Pairs.** The bench corpus holds the zh-CN and zh-TW versions of the same pages: LibreOffice help (2,560
pages), Debian man pages (703), the Debian reference (15 chapters) and the maintainers' guide (11). A page is
its id with the language part replaced (``deb_manpages/zh_CN/man1/ls.1.gz`` and ``deb_manpages/zh_TW/…``;
``…/help/zh-CN/…`` and ``…/help/zh-TW/…``; ``ch01.zh-cn.html`` and ``ch01.zh-tw.html``). The Japanese versions
of the same origins are added as documents of the same templates (their kanji are folded too), so the input is
every ``zh-CN``, ``zh-TW`` and ``ja`` document of these four origins: 3,289 pairs.

**Run.** ``dataclean run`` on that file, once per mode, with ``benchmarks/configs/dedup.yaml`` (normalize,
exact_dedup, minhash_dedup at threshold 0.8) and ``fold_scripts`` set on both dedup stages: ``off``,
``characters`` (the per-character t2s table) and ``phrases`` (OpenCC ``tw2sp`` on the documents written in
traditional characters, then the table; the default). The ledger (``rejected/``: id, rule, dup_of) is all that
is read: two documents are merged when the removals link them (union-find over id → dup_of).

* **recall** = pairs whose two versions are merged (by exact_dedup or minhash_dedup) / pairs, per origin;
* **false merges** = removals whose id and dup_of are different pages (same origin and template, any
  language), with and without folding; a removal that links two languages of the *same* page (an untranslated
  page left in English in both) is counted apart, as "same page, other language".

Every pair the default mode misses is classified by what the two texts hold: the exact Jaccard of their folded
shingle sets, their shares of Han characters (an untranslated zh-TW page has few), the share of zh-CN lines
found identical in the folded zh-TW text; a few of each kind are printed.

**Whole shard.** One bench shard (``--shard``, default 11) is cleaned with ``off`` and ``phrases``; the
documents removed only with folding are listed (id, dup_of, the start of both texts) and counted by whether
the removed document and the one kept for it are in different scripts (a 简/繁 duplicate).

**Speed.** Pass-1 cost of the two dedup stages per mode, in this process: ``ExactDedup.apply`` and
``MinHashDedup.apply`` on the batches (``input.batch_rows`` = 4,096 rows) of bench shards (``--speed-shards``,
default 0 4 8), after the ``normalize`` stage, CPU time, median of 5 passes, as documents per second; with the
number of documents that took the phrase path. Then the whole default pipeline (``dataclean run`` of the first
of those shards, one worker, ``fold_scripts`` off vs phrases through a ``stages:`` patch): CPU seconds of the
CLI and its workers, median of 3 alternated runs.

    python benchmarks/eval_script_fold.py            # ~8 min; writes benchmarks/results/script_fold.json
    python benchmarks/eval_script_fold.py --quick    # the pairs only, modes off and phrases
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections import Counter, defaultdict

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)
from bench_foundation import _dataclean_cmd, _machine  # noqa: E402  (same folder)

BENCH = "/work/shared/corpus/bench"
ORIGINS = ("libreoffice-help", "debian-manpages", "debian-reference", "debian-maint-guide")
LANGS = ("zh-CN", "zh-TW", "ja")
MODES = ("off", "characters", "phrases")
BASE_CONFIG = os.path.join(HERE, "configs", "dedup.yaml")
RESULT = os.path.join(HERE, "results", "script_fold.json")
# the language part of an id: a path segment, a package-name suffix or a file-name infix
_LANG_PART = re.compile(r"(?i)(?<=[/\-.])(zh[-_](?:cn|tw)|ja)(?=[/\-.]|$)")
_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002fa1f]")


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def page_of(doc_id: str) -> str:
    return _LANG_PART.sub("LANG", doc_id)


def load_docs(bench: str) -> pa.Table:
    import duckdb

    origins = ", ".join(f"'{o}'" for o in ORIGINS)
    langs = ", ".join(f"'{x}'" for x in LANGS)
    return duckdb.connect().sql(f"""
        SELECT id, text, source, lang_hint, origin FROM read_parquet('{bench}/*.parquet')
        WHERE origin IN ({origins}) AND lang_hint IN ({langs}) ORDER BY id""").to_arrow_table()


def write_config(path: str, mode: str) -> None:
    with open(BASE_CONFIG, encoding="utf-8") as fh:
        cfg = yaml.safe_load(fh)
    for st in cfg["pipeline"]:
        if st["stage"] in ("exact_dedup", "minhash_dedup"):
            st["fold_scripts"] = mode
    with open(path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(cfg, fh, sort_keys=False, allow_unicode=True)


def run(input_path: str, out: str, config: str, workers: int) -> dict:
    import subprocess

    cmd = _dataclean_cmd() + ["run", input_path, "-o", out, "--config", config, "--workers", str(workers),
                              "--quiet", "--fresh"]
    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"dataclean run failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    rej = pq.read_table(os.path.join(out, "rejected"), columns=["id", "stage", "rule", "value", "dup_of"])
    return {"removals": [r for r in rej.to_pylist() if r["dup_of"] is not None], "wall_s": round(wall, 2)}


class _Union:
    def __init__(self):
        self.parent: dict[str, str] = {}

    def find(self, x: str) -> str:
        p = self.parent.setdefault(x, x)
        if p != x:
            p = self.parent[x] = self.find(p)
        return p

    def join(self, a: str, b: str) -> None:
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[max(ra, rb)] = min(ra, rb)


def pairs_of(docs: pa.Table) -> list[dict]:
    by_page: dict[str, dict] = defaultdict(dict)
    for doc_id, lang, origin in zip(*(docs.column(c).to_pylist() for c in ("id", "lang_hint", "origin"))):
        if lang in ("zh-CN", "zh-TW"):
            by_page[page_of(doc_id)][lang] = (doc_id, origin)
    return [{"page": page, "cn": v["zh-CN"][0], "tw": v["zh-TW"][0], "origin": v["zh-CN"][1]}
            for page, v in sorted(by_page.items()) if len(v) == 2]


def score(result: dict, pairs: list[dict], lang_of: dict[str, str], origin_of: dict[str, str]) -> dict:
    every, exact_only = _Union(), _Union()
    for r in result["removals"]:
        every.join(r["id"], r["dup_of"])
        if r["rule"] == "exact_duplicate":
            exact_only.join(r["id"], r["dup_of"])
    per_origin: dict[str, Counter] = defaultdict(Counter)
    found_ids = set()
    for p in pairs:
        c = per_origin[p["origin"]]
        c["pairs"] += 1
        if every.find(p["cn"]) == every.find(p["tw"]):
            c["found"] += 1
            c["by_exact" if exact_only.find(p["cn"]) == exact_only.find(p["tw"]) else "by_minhash"] += 1
            found_ids.add(p["page"])
    # page-level: two different pages are merged when any document of one and any of the other are linked
    pages_of: dict[str, set] = defaultdict(set)
    for doc_id in lang_of:
        pages_of[every.find(doc_id)].add(page_of(doc_id))
    merged_pages = sorted((a, b) for pages in pages_of.values() for a in pages for b in pages if a < b)
    false_merges, other_language = [], Counter()
    for r in result["removals"]:
        a, b = r["id"], r["dup_of"]
        if page_of(a) != page_of(b):
            false_merges.append({"id": a, "dup_of": b, "rule": r["rule"], "value": r["value"],
                                 "langs": f"{lang_of[a]}/{lang_of[b]}", "origin": origin_of[a]})
        elif not {lang_of[a], lang_of[b]} <= {"zh-CN", "zh-TW"}:
            other_language[f"{lang_of[a]}/{lang_of[b]}"] += 1
    total = Counter()
    for c in per_origin.values():
        total.update(c)
    out = {"recall": total["found"] / total["pairs"], "found": total["found"], "pairs": total["pairs"],
           "found_by_exact": total["by_exact"], "found_by_minhash": total["by_minhash"],
           "per_origin": {o: {"pairs": c["pairs"], "found": c["found"], "recall": round(c["found"] / c["pairs"], 4),
                              "by_exact": c["by_exact"], "by_minhash": c["by_minhash"]}
                          for o, c in sorted(per_origin.items())},
           "removals": len(result["removals"]),
           "false_merges": len(false_merges), "false_merge_list": sorted(false_merges, key=lambda r: r["id"]),
           "different_pages_merged": len(merged_pages),
           "same_page_other_language_merges": dict(other_language), "wall_s": result["wall_s"]}
    out["_found_pages"] = found_ids
    out["_merged_pages"] = merged_pages
    return out


def han_share(text: str) -> float:
    return len(_HAN.findall(text)) / max(1, len(text.strip()))


def classify_misses(pairs: list[dict], found_pages: set, text_of: dict[str, str], mode: str, show: int) -> dict:
    """Every pair not found in ``mode``: why (see the module docstring)."""
    from dataclean.dedup.minhash import shingle_sets
    from dataclean.stages.normalize import Normalize
    from dataclean.text.script_fold import fold_scripts

    missed = [p for p in pairs if p["page"] not in found_pages]
    if not missed:
        return {"missed": 0}
    norm = Normalize()
    texts = {}
    for side in ("cn", "tw"):
        batch = pa.RecordBatch.from_pydict({"text": pa.array([text_of[p[side]] for p in missed], pa.string())})
        texts[side] = norm(batch).batch.column("text")
    sets = {side: shingle_sets(texts[side], 5, 5, fold=mode) for side in texts}
    folded = {side: fold_scripts(texts[side], mode).to_pylist() for side in texts}
    kinds: dict[str, list] = defaultdict(list)
    for i, p in enumerate(missed):
        (va, oa), (vb, ob) = sets["cn"], sets["tw"]
        x, y = set(va[oa[i]:oa[i + 1]].tolist()), set(vb[ob[i]:ob[i + 1]].tolist())
        jac = len(x & y) / max(1, len(x | y))
        hc, ht = han_share(texts["cn"][i].as_py()), han_share(texts["tw"][i].as_py())
        cn_lines = [ln.strip() for ln in folded["cn"][i].split("\n") if ln.strip()]
        tw_lines = {ln.strip() for ln in folded["tw"][i].split("\n") if ln.strip()}
        same = sum(ln in tw_lines for ln in cn_lines) / max(1, len(cn_lines))
        if jac >= 0.8:
            kind = "jaccard >= 0.8 but not merged (LSH miss)"
        elif min(hc, ht) < 0.5 * max(hc, ht):
            kind = "one version mostly untranslated (Han share under half the other's)"
        elif same < 0.5:
            kind = "different translations (under half of the zh-CN lines in the zh-TW text)"
        else:
            kind = "same lines mostly, other content differs (jaccard < 0.8)"
        diff = next(((a, b) for a, b in zip(cn_lines, [ln.strip() for ln in folded["tw"][i].split("\n") if ln.strip()])
                     if a != b), None)
        kinds[kind].append({"page": p["page"], "origin": p["origin"], "jaccard": round(jac, 3),
                            "han_share_cn": round(hc, 3), "han_share_tw": round(ht, 3),
                            "identical_lines": round(same, 3),
                            "first_different_lines": [d[:120] for d in diff] if diff else None})
    out = {"missed": len(missed), "kinds": {}}
    for kind, rows in sorted(kinds.items(), key=lambda kv: -len(kv[1])):
        out["kinds"][kind] = {"count": len(rows), "by_origin": dict(Counter(r["origin"] for r in rows)),
                              "median_jaccard": round(float(np.median([r["jaccard"] for r in rows])), 3),
                              "examples": [r for o in sorted({r["origin"] for r in rows})
                                           for r in [x for x in rows if x["origin"] == o][:show]]}
    return out


def whole_shard(shard: str, work: str, workers: int) -> dict:
    """Removals of one bench shard with fold_scripts off and phrases; the documents only folding removes."""
    from dataclean.text.script_fold import script_counts, traditional

    res = {}
    for mode in ("off", "phrases"):
        cfg = os.path.join(work, f"shard-{mode}.yaml")
        write_config(cfg, mode)
        out = os.path.join(work, f"shard-{mode}")
        res[mode] = run(shard, out, cfg, workers)
        log(f"shard {os.path.basename(shard)} {mode}: {len(res[mode]['removals'])} duplicates removed, "
            f"{res[mode]['wall_s']} s")
    before = {(r["id"], r["dup_of"]) for r in res["off"]["removals"]}
    before_ids = {r["id"] for r in res["off"]["removals"]}
    new = [r for r in res["phrases"]["removals"] if r["id"] not in before_ids]
    gone = [r for r in res["off"]["removals"] if r["id"] not in {x["id"] for x in res["phrases"]["removals"]}]
    t = pq.read_table(shard, columns=["id", "text"])
    text_of = dict(zip(t.column("id").to_pylist(), t.column("text").to_pylist()))
    rows, scripts = [], Counter()
    if new:
        ids = [r["id"] for r in new] + [r["dup_of"] for r in new]
        n_t, n_o = script_counts(pa.array([text_of[i] for i in ids], pa.string()))
        trad = traditional(n_t, n_o)
        k = len(new)
        for j, r in enumerate(new):
            kind = "simplified/traditional" if trad[j] != trad[k + j] else (
                "both traditional" if trad[j] else "both simplified")
            scripts[kind] += 1
            rows.append({"id": r["id"], "dup_of": r["dup_of"], "rule": r["rule"], "value": r["value"],
                         "scripts": kind, "text": text_of[r["id"]][:80], "dup_of_text": text_of[r["dup_of"]][:80]})
    return {"shard": os.path.basename(shard), "removed_off": len(res["off"]["removals"]),
            "removed_phrases": len(res["phrases"]["removals"]), "same_removals_kept": len(before),
            "removed_only_with_folding": len(new), "by_scripts": dict(scripts),
            "removed_only_without_folding": len(gone), "new_removals": rows}


def pipeline_cpu(shard: str, work: str, reps: int) -> dict:
    """CPU seconds (the CLI and its workers) of ``dataclean run`` with the default pipeline on one shard, one
    worker, ``fold_scripts`` off and phrases on both dedup stages (a ``stages:`` patch), alternated, median."""
    import resource
    import subprocess

    cpu: dict[str, list] = {"off": [], "phrases": []}
    for _ in range(reps):
        for mode in cpu:
            cfg = os.path.join(work, f"default-{mode}.yaml")
            with open(cfg, "w", encoding="utf-8") as fh:
                yaml.safe_dump({"stages": {"exact_dedup": {"fold_scripts": mode},
                                           "minhash_dedup": {"fold_scripts": mode}},
                                "output": {"report": False}}, fh)
            before = resource.getrusage(resource.RUSAGE_CHILDREN)
            p = subprocess.run(_dataclean_cmd() + ["run", shard, "-o", os.path.join(work, f"default-{mode}"),
                                                   "--config", cfg, "--workers", "1", "--quiet", "--fresh"],
                               cwd=REPO, capture_output=True, text=True)
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            if p.returncode != 0:
                raise RuntimeError(f"dataclean run failed:\n{p.stderr[-3000:]}")
            cpu[mode].append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    med = {m: round(float(np.median(v)), 2) for m, v in cpu.items()}
    docs = pq.ParquetFile(shard).metadata.num_rows
    return {"shard": os.path.basename(shard), "docs": docs, "reps": reps, "cpu_s": med,
            "cpu_s_all": {m: [round(x, 2) for x in v] for m, v in cpu.items()},
            "cost": f"{med['phrases'] / med['off'] - 1:+.1%}",
            "us_per_doc": round((med["phrases"] - med["off"]) / docs * 1e6, 1)}


def speed(shards: list[str], reps: int) -> dict:
    """docs/s of ExactDedup.apply and MinHashDedup.apply per mode on the normalized batches of ``shards``."""
    from dataclean.dedup.minhash import warm_up
    from dataclean.stages.dedup_exact import ExactDedup
    from dataclean.stages.dedup_minhash import MinHashDedup
    from dataclean.stages.normalize import Normalize
    from dataclean.text.script_fold import script_counts, traditional

    warm_up()
    norm = Normalize()
    batches, n_docs, n_bytes, n_trad = [], 0, 0, 0
    for path in shards:
        t = pq.read_table(path, columns=["id", "text"])
        for b in t.to_batches(max_chunksize=4096):
            b = norm(b).batch
            batches.append(b)
            n_docs += b.num_rows
            n_bytes += pc.sum(pc.binary_length(b.column("text"))).as_py()
            n_trad += int(traditional(*script_counts(b.column("text"))).sum())
    stages = {mode: (ExactDedup(fold_scripts=mode), MinHashDedup(fold_scripts=mode)) for mode in MODES}
    for ex, mh in stages.values():  # (tables, OpenCC's dictionaries, compiled kernels: loaded before timing)
        ex(batches[0])
        mh(batches[0])
    times = {mode: {"exact_dedup": [], "minhash_dedup": []} for mode in MODES}
    for _ in range(reps):
        for mode, (ex, mh) in stages.items():
            for name, st in (("exact_dedup", ex), ("minhash_dedup", mh)):
                t0 = time.process_time()
                for b in batches:
                    st.apply(b)
                times[mode][name].append(time.process_time() - t0)
    out = {"shards": [os.path.basename(s) for s in shards], "docs": n_docs, "mb_text": round(n_bytes / 1e6, 2),
           "docs_phrase_converted": n_trad, "reps": reps, "cpu_s": {}, "docs_per_s": {}, "cost_vs_off": {}}
    for mode in MODES:
        out["cpu_s"][mode] = {k: round(float(np.median(v)), 3) for k, v in times[mode].items()}
        out["docs_per_s"][mode] = {k: round(n_docs / float(np.median(v))) for k, v in times[mode].items()}
    for mode in MODES:
        out["cost_vs_off"][mode] = {k: f"{out['cpu_s'][mode][k] / out['cpu_s']['off'][k] - 1:+.1%}"
                                    for k in out["cpu_s"][mode]}
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", default=BENCH)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    ap.add_argument("--shard", default="part-00011.parquet", help="bench shard of the whole-shard check")
    ap.add_argument("--speed-shards", nargs="+", default=["part-00000.parquet", "part-00004.parquet",
                                                          "part-00008.parquet"])
    ap.add_argument("--reps", type=int, default=5, help="passes of the stage timing (median)")
    ap.add_argument("--pipeline-reps", type=int, default=3, help="runs of the default pipeline per mode (median)")
    ap.add_argument("--show", type=int, default=3, help="examples per kind of miss")
    ap.add_argument("--quick", action="store_true", help="pairs only, modes off and phrases")
    ap.add_argument("--keep", help="keep the runs in this folder")
    ap.add_argument("--out", default=RESULT)
    args = ap.parse_args()
    modes = ["off", "phrases"] if args.quick else args.modes
    work = args.keep or tempfile.mkdtemp(prefix="eval_script_fold-")
    os.makedirs(work, exist_ok=True)
    t_start = time.time()
    docs = load_docs(args.bench)
    input_path = os.path.join(work, "pairs.parquet")
    pq.write_table(docs, input_path)
    pairs = pairs_of(docs)
    ids = docs.column("id").to_pylist()
    lang_of = dict(zip(ids, docs.column("lang_hint").to_pylist()))
    origin_of = dict(zip(ids, docs.column("origin").to_pylist()))
    text_of = dict(zip(ids, docs.column("text").to_pylist()))
    log(f"{docs.num_rows} documents ({dict(Counter(lang_of.values()))}), {len(pairs)} zh-CN/zh-TW pairs")
    result: dict = {"benchmark": "eval_script_fold", "date": _dt.datetime.now().isoformat(timespec="seconds"),
                    "machine": _machine(), "opencc": _opencc_version(), "command": " ".join(sys.argv),
                    "input": {"documents": docs.num_rows, "by_lang": dict(sorted(Counter(lang_of.values()).items())),
                              "pairs": len(pairs), "pairs_by_origin": dict(Counter(p["origin"] for p in pairs))},
                    "config": "benchmarks/configs/dedup.yaml + fold_scripts on exact_dedup and minhash_dedup",
                    "modes": {}}
    found, merged = {}, {}
    for mode in modes:
        cfg = os.path.join(work, f"{mode}.yaml")
        write_config(cfg, mode)
        out = os.path.join(work, f"run-{mode}")
        s = score(run(input_path, out, cfg, args.workers), pairs, lang_of, origin_of)
        found[mode] = s.pop("_found_pages")
        merged[mode] = s.pop("_merged_pages")
        result["modes"][mode] = s
        log(f"{mode}: recall {s['recall']:.3f} ({s['found']}/{s['pairs']}; exact {s['found_by_exact']}, "
            f"minhash {s['found_by_minhash']}), false merges {s['false_merges']}, "
            + ", ".join(f"{o} {v['recall']:.3f}" for o, v in s["per_origin"].items()))
        if not args.keep:
            shutil.rmtree(out, ignore_errors=True)
    if "off" in merged:  # what folding adds: page pairs merged with folding and not without
        for mode in modes:
            new = sorted(set(merged[mode]) - set(merged["off"]))
            result["modes"][mode]["different_pages_merged_not_without_folding"] = len(new)
            result["modes"][mode]["different_pages_merged_not_without_folding_list"] = [list(x) for x in new]
            log(f"{mode}: {len(merged[mode])} pairs of different pages merged, {len(new)} of them not without folding")
    if {"characters", "phrases"} <= set(found):
        either = found["characters"] | found["phrases"]
        result["found_by_characters_or_phrases"] = {
            "found": len(either), "recall": round(len(either) / len(pairs), 4),
            "per_origin": {o: round(sum(p["page"] in either for p in pairs if p["origin"] == o)
                                    / sum(p["origin"] == o for p in pairs), 4) for o in ORIGINS},
            "missed_by_phrases_found_by_characters": dict(Counter(
                p["origin"] for p in pairs if p["page"] in found["characters"] - found["phrases"]))}
    chosen = "phrases" if "phrases" in modes else modes[-1]
    result["misses"] = {"mode": chosen, **classify_misses(pairs, found[chosen], text_of, chosen, args.show)}
    for kind, v in result["misses"].get("kinds", {}).items():
        log(f"missed with {chosen}: {v['count']:4d}  {kind}  {v['by_origin']}  median J {v['median_jaccard']}")
    if not args.quick:
        result["whole_shard"] = whole_shard(os.path.join(args.bench, args.shard), work, args.workers)
        ws = result["whole_shard"]
        log(f"whole shard: {ws['removed_only_with_folding']} removed only with folding {ws['by_scripts']}, "
            f"{ws['removed_only_without_folding']} only without")
        result["speed"] = speed([os.path.join(args.bench, s) for s in args.speed_shards], args.reps)
        sp = result["speed"]
        for mode in MODES:
            log(f"speed {mode}: {sp['docs_per_s'][mode]} docs/s ({sp['cost_vs_off'][mode]})")
        result["default_pipeline"] = pipeline_cpu(os.path.join(args.bench, args.speed_shards[0]), work,
                                                  args.pipeline_reps)
        dp = result["default_pipeline"]
        log(f"default pipeline on {dp['shard']}: CPU {dp['cpu_s']} s ({dp['cost']}, {dp['us_per_doc']} us/doc)")
    result["elapsed_s"] = round(time.time() - t_start, 1)
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=1, ensure_ascii=False)
        fh.write("\n")
    log(f"wrote {args.out}")


def _opencc_version() -> str | None:
    try:
        from importlib.metadata import version
        return version("opencc")
    except Exception:  # noqa: BLE001
        return None


if __name__ == "__main__":
    main()
