"""Export speed against the tokenizer's own floor, peak memory against corpus size, and trace lookups.

1. A run of the whole bench corpus (258,156 documents) with the pipeline reduced to ``normalize``, so that
   every document is kept and exported (``--run`` reuses one).
2. The floor: the tokenizer's own ``encode_batch`` (one thread, 2,048 documents a call, no special tokens) on
   the same texts, read from the run's shards beforehand; CPU seconds of the encode calls only.
3. ``dataclean export --workers 1`` (one core) and ``--workers 2``: wall time and the peak RSS / PSS of the
   process tree (``benchmarks/_measure.py``); per core = docs (tokens) / (wall x workers).
4. Peak memory against corpus size: the same export of the first 6 shards' run and of all 12.
5. ``trace`` on a synthetic 1,000,000-document export (random token ids, 20–400 tokens a document, the same
   files ``export`` writes): wall time of ``dataclean trace --step 40 --global-batch-size 512 --seq-len 4096
   --no-inspect`` as a process, and of the lookup alone in this process.

The vocabulary is Qwen's (151,643 BPE entries from the ``dashscope`` wheel, converted by
``calibrate_tokens.py``; ``<|endoftext|>`` added as its end-of-document token, id 151,643).

    python benchmarks/bench_export.py [--json] [--run DIR] [--skip-floor]
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)
CORPUS = os.path.join(ROOT, "..", "shared", "corpus", "bench")

from _measure import measure  # noqa: E402


def qwen(tmp: str) -> str:
    import calibrate_tokens as ct
    from pathlib import Path
    from tokenizers import AddedToken, Tokenizer
    cache = Path(os.environ.get("DATACLEAN_TOKCACHE", "/tmp/tokcache"))
    base = ct.qwen_tokenizer_json(ct.wheel_file(*ct.QWEN_WHEEL, cache), cache / "qwen_tokenizer.json")
    tok = Tokenizer.from_file(str(base))
    tok.add_special_tokens([AddedToken("<|endoftext|>", special=True)])
    out = os.path.join(tmp, "qwen-eod.json")
    tok.save(out)
    return out


def make_run(shards: list[str], out: str) -> None:
    cfg = os.path.join(os.path.dirname(out), "normalize-only.yaml")
    with open(cfg, "w") as fh:
        fh.write("output: {report: false}\npipeline:\n  - stage: normalize\n")
    subprocess.run([sys.executable, "-m", "dataclean.cli", "run", *shards, "-o", out, "--config", cfg, "--workers",
                    "2", "--quiet", "--fresh"], check=True, cwd=ROOT, stdout=subprocess.DEVNULL)


def floor(run: str, tokenizer: str) -> dict:
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tokenizer)
    batches = []
    for f in sorted(glob.glob(os.path.join(run, "data", "*.parquet"))):
        for b in pq.ParquetFile(f).iter_batches(batch_size=2048, columns=["text"]):
            batches.append(b.column("text").to_pylist())
    docs = sum(len(b) for b in batches)
    tokens = 0
    t0 = time.process_time()
    for b in batches:
        for e in tok.encode_batch(b, add_special_tokens=False):
            tokens += len(e.ids)
    cpu = time.process_time() - t0
    return {"docs": docs, "tokens": tokens, "cpu_s": round(cpu, 2), "docs_per_s": round(docs / cpu),
            "tokens_per_s": round(tokens / cpu)}


def timed_export(run: str, tokenizer: str, dest: str, workers: int) -> dict:
    m = measure([sys.executable, "-m", "dataclean.cli", "export", run, "-o", dest, "--tokenizer", tokenizer,
                 "--workers", str(workers), "--quiet", "--fresh"], cwd=ROOT)
    meta = json.load(open(os.path.join(dest, "export.json")))
    d = m.as_dict()
    wall = d["wall_s"]
    return {"workers": workers, "wall_s": round(wall, 2), "docs": meta["docs"], "tokens": meta["tokens"],
            "docs_per_s_per_core": round(meta["docs"] / (wall * workers)),
            "tokens_per_s_per_core": round(meta["tokens"] / (wall * workers)),
            "peak_rss_mib": d.get("peak_rss_mib"), "peak_pss_mib": d.get("peak_pss_mib"), "returncode": d.get("returncode")}


def synthetic_export(folder: str, n: int = 1_000_000, seed: int = 0) -> None:
    from dataclean.export import megatron
    rng = np.random.default_rng(seed)
    lengths = rng.integers(20, 401, n).astype(np.int32)
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "export.bin"), "wb") as fh:
        for a in range(0, n, 100_000):
            ln = lengths[a:a + 100_000]
            fh.write(rng.integers(0, 151_643, int(ln.sum())).astype(np.int32).tobytes())
    megatron.write_idx(os.path.join(folder, "export.idx"), lengths, np.int32)
    offsets = np.concatenate([[0], np.cumsum(lengths[:-1], dtype=np.int64)])
    pq.write_table(pa.table({"ordinal": np.arange(n, dtype=np.int64), "token_offset": offsets, "n_tokens": lengths,
                             "id": pa.array([f"doc-{i}" for i in range(n)]), "source": pa.array(["web"] * n)}),
                   os.path.join(folder, "export.docs.parquet"), row_group_size=65536)
    json.dump({"finished": True, "format": "megatron", "dtype": "int32", "docs": n, "tokens": int(lengths.sum()),
               "run": None, "tokenizer": {}}, open(os.path.join(folder, "export.json"), "w"))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--run", help="an existing run folder of the whole bench corpus (normalize only)")
    ap.add_argument("--skip-floor", action="store_true")
    args = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="dc-export-")
    res: dict = {"load_1min_start": round(os.getloadavg()[0], 2)}
    tokenizer = qwen(tmp)
    shards = sorted(glob.glob(os.path.join(CORPUS, "part-*.parquet")))
    run = args.run or os.path.join(tmp, "run-all")
    if not args.run:
        make_run(shards, run)
    half = os.path.join(os.path.dirname(run), "run-half")
    if not os.path.isdir(half):
        make_run(shards[:6], half)
    if not args.skip_floor:
        res["floor_1_thread"] = floor(run, tokenizer)
    res["export_1_worker"] = timed_export(run, tokenizer, os.path.join(tmp, "exp1"), 1)
    res["export_2_workers"] = timed_export(run, tokenizer, os.path.join(tmp, "exp2"), 2)
    res["export_half_corpus_1_worker"] = timed_export(half, tokenizer, os.path.join(tmp, "exph"), 1)
    if "floor_1_thread" in res:
        f = res["floor_1_thread"]
        res["share_of_floor_1_worker"] = round(res["export_1_worker"]["tokens_per_s_per_core"] / f["tokens_per_s"], 3)
        res["share_of_floor_2_workers"] = round(res["export_2_workers"]["tokens_per_s_per_core"] / f["tokens_per_s"], 3)
    print(json.dumps(res), file=sys.stderr)  # (the export figures, in case the trace part fails)
    syn = os.path.join(tmp, "syn1m")
    synthetic_export(syn)
    cmd = [sys.executable, "-m", "dataclean.cli", "trace", syn, "--step", "40", "--global-batch-size", "512",
           "--seq-len", "4096", "--no-inspect", "--format", "json"]
    walls = []
    for _ in range(3):
        t0 = time.perf_counter()
        p = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
        walls.append(time.perf_counter() - t0)
        assert p.returncode == 0, p.stderr
    from dataclean.export.trace import trace
    t0 = time.perf_counter()
    out = trace(syn, list(range(40 * 512, 41 * 512)), 4096, with_inspect=False)
    inproc = time.perf_counter() - t0
    res["trace_1m_docs"] = {"docs": 1_000_000, "samples_looked_up": 512,
                            "documents_found": sum(len(p["documents"]) for p in out["positions"]),
                            "cli_wall_s": [round(w, 3) for w in walls], "in_process_s": round(inproc, 3)}
    res["load_1min_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(res, indent=1 if args.json else None))


if __name__ == "__main__":
    main()
