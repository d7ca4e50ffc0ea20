"""Decontamination on the bench corpus: recall on planted benchmark items, false flags, throughput, memory.

The benchmark set: 10,000 items cut from real text that the scanned shards do not contain — paragraphs
(lines) of bench shards 11 and 10 with 40–150 words (English and other space-delimited languages) or 60–400 Han
characters (Chinese), the first ones in shard order. No public benchmark installs from a registry here.

Planted: ``--planted`` items (default 400), each copied into a bench document of shards 0–1 in one of six
ways: verbatim; re-wrapped at 7 words per line; punctuation changed, case changed and spaces doubled; with the
question surrounded by other text (a page quoting it); and for Chinese items, converted to traditional
characters (OpenCC ``s2t``) or with its punctuation replaced by spaces. Recall is per way.

False flags: documents of shards 0–1 without a planted item that the stage removes. They are listed
(``--show``) to be read: a removed document that really contains an item of shard 11 (the corpus has
cross-shard copies: mailing-list quotes, mirrored manuals) is a true find, not a false flag.

Shared phrases: for each planted item, also a page (a bench document without any item) that quotes 15 words
(English) or 20 characters (Chinese) from the middle of the item: these must not be flagged.

Throughput: the stage alone over shards 0–1 (43,026 documents) in one process, CPU time, after the index is
loaded (the build is timed separately), docs/s and MB/s; peak RSS of this process (``ru_maxrss``).

    python benchmarks/bench_decontam.py [--items 10000] [--planted 400] [--show 20] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sys
import tempfile
import time

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "..", "..", "shared", "corpus", "bench")

from dataclean.stages.decontaminate import Decontaminate  # noqa: E402


def vm_rss() -> int:
    with open("/proc/self/status") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    return 0


def han(s: str) -> int:
    return sum("\u4e00" <= c <= "\u9fff" for c in s)


def items_from(path: str, n: int) -> list[dict]:
    out, seen = [], set()
    for r in pq.read_table(path, columns=["id", "text"]).to_pylist():
        for no, line in enumerate(r["text"].split("\n")):
            line = line.strip()
            h = han(line)
            ok = (60 <= h <= 400) if h > len(line) / 3 else (40 <= len(line.split()) <= 150 and h == 0)
            if ok and line not in seen:
                seen.add(line)
                out.append({"id": f"{r['id']}#{no}", "question": line, "zh": h > len(line) / 3})
                if len(out) >= n:
                    return out
    return out


def plant(item: dict, host: str, way: str) -> str:
    import opencc
    t = item["question"]
    if way == "rewrapped":
        w = t.split()
        t = "\n".join(" ".join(w[i:i + 7]) for i in range(0, len(w), 7)) if not item["zh"] else \
            "\n".join(t[i:i + 20] for i in range(0, len(t), 20))
    elif way == "punctuation":
        t = "  ".join(t.replace(",", " ;").replace(".", " !").replace("，", "、").replace("。", "！").upper().split(" "))
    elif way == "traditional":
        t = opencc.OpenCC("s2t").convert(t)
    elif way == "no_punctuation":
        t = "".join(" " if not (c.isalnum() or c.isspace()) else c for c in t)
    if way == "quoted":
        return host[:2000] + "\n\nAs the question put it: " + t + "\n\n" + host[2000:4000]
    return host[:1500] + "\n" + t + "\n" + host[1500:3000]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--items", type=int, default=10_000)
    ap.add_argument("--planted", type=int, default=400)
    ap.add_argument("--show", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="dc-decontam-")
    items = items_from(os.path.join(CORPUS, "part-00011.parquet"), args.items)
    if len(items) < args.items:  # (shard 11 has ~7,400 such paragraphs: shard 10 gives the rest)
        more = items_from(os.path.join(CORPUS, "part-00010.parquet"), 3 * args.items)
        seen = {it["question"] for it in items}
        items += [it for it in more if it["question"] not in seen][: args.items - len(items)]
    bench_path = os.path.join(tmp, "shard10-11-items.jsonl")
    with open(bench_path, "w", encoding="utf-8") as fh:
        for it in items:
            fh.write(json.dumps({"id": it["id"], "question": it["question"]}, ensure_ascii=False) + "\n")
    t0 = time.perf_counter()
    stage = Decontaminate(benchmarks=[bench_path], index_dir=os.path.join(tmp, "index"))
    build_s = time.perf_counter() - t0
    # what a worker holds: a stage built from the index folder, loaded (memory maps + bitmap), after a match
    rss0 = vm_rss()
    worker = Decontaminate(benchmarks=[bench_path], index=stage.index)
    worker(pa.record_batch({"text": [items[0]["question"]]}))
    worker_mib = (vm_rss() - rss0) / 2 ** 20
    ix = stage.loaded()
    ix.bitmap()
    meta = ix.meta
    index_mb = sum(os.path.getsize(os.path.join(stage.index, f)) for f in os.listdir(stage.index)) / 2 ** 20

    shards = [pq.read_table(os.path.join(CORPUS, f"part-0000{i}.parquet"), columns=["id", "text", "source"])
              for i in (0, 1)]
    docs = pa.concat_tables(shards).combine_chunks()
    n = docs.num_rows
    mb = pc.sum(pc.binary_length(docs.column("text"))).as_py() / 1e6

    # throughput of the stage on the unmodified shards, in batches of 8,192 rows as the pipeline reads them
    t0 = time.process_time()
    removed_ids, removed_overlap = [], []
    for b in docs.to_batches(max_chunksize=8192):
        r = stage(b)
        if r.decisions is not None:
            mask = r.decisions.removed
            removed_ids += b.column("id").filter(mask).to_pylist()
            removed_overlap += r.batch.column("decontam_overlap").filter(mask).to_pylist()
    cpu = time.process_time() - t0

    # planted copies
    rng = random.Random(0)
    en_ways = ["verbatim", "rewrapped", "punctuation", "quoted"]
    zh_ways = en_ways + ["traditional", "no_punctuation"]
    picks = rng.sample(range(len(items)), min(args.planted, len(items)))
    hosts = docs.column("text").to_pylist()
    texts, truth = [], []
    for k, i in enumerate(picks):
        it = items[i]
        ways = zh_ways if it["zh"] else en_ways
        way = ways[k % len(ways)]
        texts.append(plant(it, hosts[rng.randrange(n)], way))
        truth.append((it["id"], way, it["zh"]))
    out = stage(pa.record_batch({"text": texts}))
    found = out.batch.column("decontam_item").to_pylist()
    removed = out.decisions.removed.to_pylist() if out.decisions is not None else [False] * len(texts)
    by_way: dict = {}
    attributed = 0
    for (iid, way, zh), f, rm in zip(truth, found, removed):
        key = f"{'zh' if zh else 'en'}/{way}"
        w = by_way.setdefault(key, [0, 0])
        w[1] += 1
        w[0] += int(bool(rm))
        attributed += int(bool(rm) and f == iid + "/question")
        if not (rm and f == iid + "/question") and args.show:
            print(f"--- planted {key} {iid}: found {f!r}, removed {rm}", file=sys.stderr)

    # unrelated pages that share a phrase with an item: 15 words (English) or 20 characters (Chinese) of it,
    # quoted in a host page that holds no item
    clean_hosts = [h for h, i in zip(hosts, docs.column("id").to_pylist()) if i not in set(removed_ids)]
    phrase_docs = []
    for i in picks:
        t = items[i]["question"]
        if items[i]["zh"]:
            mid = len(t) // 2
            phrase = t[mid:mid + 20]
        else:
            w = t.split()
            phrase = " ".join(w[len(w) // 2: len(w) // 2 + 15])
        phrase_docs.append(clean_hosts[rng.randrange(len(clean_hosts))][:3000] + "\n“" + phrase + "”\n")
    ph = stage(pa.record_batch({"text": phrase_docs}))
    phrase_flagged = int(pc.sum(ph.decisions.removed).as_py() or 0) if ph.decisions is not None else 0
    phrase_overlap = max(ph.batch.column("decontam_overlap").to_pylist())
    res = {
        "items": len(items), "items_zh": sum(it["zh"] for it in items), "index_keys": meta["keys"],
        "template_ngrams_dropped": meta["template_ngrams_dropped"], "index_build_s": round(build_s, 2),
        "index_mib_on_disk": round(index_mb, 1), "worker_index_rss_mib": round(worker_mib, 1),
        "scan_docs": n, "scan_mb": round(mb, 1), "scan_cpu_s": round(cpu, 2),
        "docs_per_s_per_core": round(n / cpu), "mb_per_s_per_core": round(mb / cpu, 1),
        "removed_unplanted": len(removed_ids), "removed_unplanted_share": round(len(removed_ids) / n, 5),
        "removed_unplanted_whole_item": sum(o >= 0.999 for o in removed_overlap),
        "removed_unplanted_overlap_0.9": sum(o >= 0.9 for o in removed_overlap),
        "planted": len(texts), "planted_removed": sum(v[0] for v in by_way.values()),
        "planted_attributed_to_their_item": attributed,
        "phrase_docs": len(phrase_docs), "phrase_docs_flagged": phrase_flagged,
        "phrase_docs_max_overlap": round(phrase_overlap, 3),
        "recall_by_way": {k: f"{v[0]}/{v[1]}" for k, v in sorted(by_way.items())},
        "peak_rss_mib": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024),
        "load_1min": round(os.getloadavg()[0], 2),
    }
    if args.show and removed_ids:
        rows = {r["id"]: r for r in docs.to_pylist() if r["id"] in set(removed_ids[: args.show])}
        b = pa.record_batch({"text": [rows[i]["text"] for i in removed_ids[: args.show]]})
        r = stage(b)
        for i, d in zip(removed_ids[: args.show], r.decisions.detail.to_pylist()):
            print(f"--- {i}: {d}", file=sys.stderr)
    print(json.dumps(res, indent=None if not args.json else 1, ensure_ascii=False))


if __name__ == "__main__":
    main()
