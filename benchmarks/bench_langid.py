"""Language ID: cost and agreement of window settings, against the current labels, on the bench corpus.

Every bench shard goes through the default ``normalize`` stage (``rules/default.yaml``), as in a run, and then
through :meth:`dataclean.stages.langid.LangID.predict` once per candidate ``(max_chars, windows)``, in ONE
process, candidates interleaved shard by shard so that the ratios hold on a shared machine. The reference is
the first candidate (the shipped default when this was written: 10,000 characters in 4 windows).

Reported per candidate: the CPU time of ``predict`` (``time.process_time``, summed over the shards), and, for
each of zh, en, ja, de, fr, ru, es, ko, ar, the share of the documents the reference labels with that language
that keep the label (issue 20 asks >= 99.5 %), and the same against ``lang_hint`` (the label the source
declares) for context. Every document whose top label differs from the reference is written to the JSON with
both labels and scores.

    python benchmarks/bench_langid.py                       # 12 shards, candidates below
    python benchmarks/bench_langid.py --shards 0-1 --candidates 10000x4,2000x4
    python benchmarks/bench_langid.py --shards 0-3 --candidates 10000x4,2000x2@0.9,1000x2@0.95,500x1@0.95

A candidate ``CxW@T`` is a cascade: documents of at most C characters get the reference's prediction (their
model input is the same), longer ones are first judged on W windows of C characters, and only those whose top
score is below T are judged again as the reference judges them. Its CPU includes both predictions.
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections import Counter

import pyarrow.parquet as pq
import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, HERE)
from _measure import bench_shards  # noqa: E402

CORPUS = os.path.normpath(os.path.join(REPO, "..", "shared", "corpus", "bench"))
LANGS = ["zh", "en", "ja", "de", "fr", "ru", "es", "ko", "ar"]


def _candidate(spec: str) -> tuple:
    """``10000x4`` -> (10000, 4); ``2000x2@0.9`` -> (2000, 2, 0.9)."""
    size, _, below = spec.partition("@")
    chars, windows = (int(x) for x in size.split("x"))
    return (chars, windows, float(below)) if below else (chars, windows)


class Cascade:
    """A short judgement first, the reference's where the short one is unsure or the document is short."""

    def __init__(self, short, ref, max_chars: int, below: float):
        self.short, self.ref, self.max_chars, self.below = short, ref, max_chars, below

    def predict(self, text):
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        text = text.combine_chunks() if isinstance(text, pa.ChunkedArray) else text
        n = len(text)
        length = pc.utf8_length(pc.fill_null(text, "")).to_numpy(zero_copy_only=False)
        lang: list = [None] * n
        score = np.zeros(n)
        again = np.flatnonzero(length <= self.max_chars)
        long_rows = np.flatnonzero(length > self.max_chars)
        if len(long_rows):
            sig = self.short.predict(text.take(pa.array(long_rows)))
            s_score = sig["lang_score"].to_numpy(zero_copy_only=False)
            sure = s_score >= self.below
            for i, lab, sc in zip(long_rows[sure].tolist(), pc.filter(sig["lang"], pa.array(sure)).to_pylist(),
                                  s_score[sure].tolist()):
                lang[i], score[i] = lab, sc
            again = np.sort(np.concatenate([again, long_rows[~sure]]))
        if len(again):
            sig = self.ref.predict(text.take(pa.array(again)))
            for i, lab, sc in zip(again.tolist(), sig["lang"].to_pylist(),
                                  sig["lang_score"].to_numpy(zero_copy_only=False).tolist()):
                lang[i], score[i] = lab, sc
        return {"lang": pa.array(lang, pa.string()), "lang_score": pa.array(score, pa.float64())}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--shards", default="0-11")
    ap.add_argument("--candidates", default="10000x4,4000x4,2000x4,2000x2,1000x2")
    ap.add_argument("-o", "--out", default=os.path.join(HERE, "results", "langid.json"))
    args = ap.parse_args()

    from dataclean.pipeline import build_stage
    from dataclean.stages.langid import LangID

    with open(os.path.join(REPO, "rules", "default.yaml"), encoding="utf-8") as f:
        recipe = yaml.safe_load(f)["pipeline"]
    norm_spec = next(s for s in recipe if s["stage"] == "normalize")
    lid_spec = {k: v for k, v in next(s for s in recipe if s["stage"] == "langid").items()
                if k not in ("stage", "skip_kinds", "max_chars", "windows")}
    normalize = build_stage(norm_spec)
    cands = [_candidate(c) for c in args.candidates.split(",")]
    ref = cands[0]
    if len(ref) != 2:
        sys.exit("bench_langid: the first candidate is the reference: MAXxWINDOWS, not a cascade")
    plain = {c: LangID(max_chars=c[0], windows=c[1], **lid_spec) for c in cands}
    stages = {c: plain[c] if len(c) == 2 else Cascade(plain[c], plain[ref], c[0], c[2]) for c in cands}
    name = {c: f"{c[0]}x{c[1]}" + (f"@{c[2]}" if len(c) == 3 else "") for c in cands}

    cpu = Counter()
    n_ref = Counter()                          # documents the reference labels L ...
    same_ref = {c: Counter() for c in cands}   # ... that the candidate labels L too
    n_hint = Counter()
    same_hint = {c: Counter() for c in cands}
    changed: dict[str, list] = {name[c]: [] for c in cands[1:]}
    n_docs = 0
    for path in bench_shards(CORPUS, args.shards):
        table = pq.read_table(path)
        for batch in table.to_batches(max_chunksize=4096):
            text = normalize(batch).batch.column("text")
            ids = batch.column("id").to_pylist()
            hint = [h.split("-")[0] if h else None for h in batch.column("lang_hint").to_pylist()]
            n_docs += len(ids)
            out = {}
            for c in cands:
                t0 = time.process_time()
                sig = stages[c].predict(text)
                cpu[c] += time.process_time() - t0
                out[c] = (sig["lang"].to_pylist(), sig["lang_score"].to_numpy(zero_copy_only=False))
            ref_lang = out[ref][0]
            n_ref.update(ref_lang)
            n_hint.update(hint)
            for c in cands:
                lang, score = out[c]
                for i, (a, b, h) in enumerate(zip(ref_lang, lang, hint)):
                    same_ref[c][a] += a == b
                    same_hint[c][h] += h == b
                    if a != b and c != ref:
                        changed[name[c]].append({
                            "id": ids[i], "chars": len(text[i].as_py() or ""), "hint": h,
                            "ref": a, "ref_score": round(float(out[ref][1][i]), 4),
                            "new": b, "new_score": round(float(score[i]), 4)})
        print(f"{os.path.basename(path)}: {n_docs} docs; cpu " + ", ".join(f"{name[c]} {cpu[c]:.1f}s" for c in cands),
              flush=True)

    result = {"docs": n_docs, "shards": args.shards, "reference": name[ref], "date": time.strftime("%Y-%m-%d"),
              "load_1min": os.getloadavg()[0], "candidates": []}
    print(f"\n{n_docs} documents; agreement with the {name[ref]} labels (share of its label kept)")
    print(f"{'candidate':>10} {'cpu s':>7} {'x ref':>6} " + " ".join(f"{lang:>7}" for lang in LANGS)
          + "  changed")
    vs_hint = {}
    for c in cands:
        agree = {lang: same_ref[c][lang] / n_ref[lang] for lang in LANGS if n_ref[lang]}
        vs_hint[c] = {lang: same_hint[c][lang] / n_hint[lang] for lang in LANGS if n_hint[lang]}
        n_changed = n_docs - sum(same_ref[c].values())
        print(f"{name[c]:>10} {cpu[c]:7.1f} {cpu[c] / cpu[ref]:6.2f} "
              + " ".join(f"{agree.get(lang, float('nan')):7.4f}" for lang in LANGS) + f"  {n_changed}")
        result["candidates"].append({
            "max_chars": c[0], "windows": c[1], "cascade_below": c[2] if len(c) == 3 else None,
            "predict_cpu_s": round(cpu[c], 2),
            "cpu_vs_reference": round(cpu[c] / cpu[ref], 3),
            "agreement_with_reference": {lang: round(v, 5) for lang, v in agree.items()},
            "reference_counts": {lang: n_ref[lang] for lang in LANGS},
            "agreement_with_lang_hint": {lang: round(v, 5) for lang, v in vs_hint[c].items()},
            "changed": n_changed})
    print("agreement with lang_hint: " + "; ".join(
        f"{name[c]} " + " ".join(f"{lang} {v:.4f}" for lang, v in vs_hint[c].items()) for c in cands))
    result["changed_documents"] = changed
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False, indent=1)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
