"""PII masking throughput on the bench corpus: the ``pii`` stage alone, one process, CPU time.

Shards 0–1 (43,026 documents, 33 MB) in batches of 8,192 rows as the pipeline reads them, with the default
kinds (email, ip, phone, cn_id) and with every kind; the best of ``--repeat`` runs (CPU time is what one core
spends; the wall clock here is shared with other work). Also: documents changed and masks per kind, and
the share of documents and lines that reach Python (the rest stop at the vectorised RE2 prefilters).

    python benchmarks/bench_pii.py [--repeat 3] [--json]
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "..", "..", "shared", "corpus", "bench")

from dataclean.stages.pii import PIIMask  # noqa: E402
from dataclean.text import pii  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    docs = pa.concat_tables([pq.read_table(os.path.join(CORPUS, f"part-0000{i}.parquet"), columns=["text"])
                             for i in (0, 1)]).combine_chunks()
    n = docs.num_rows
    mb = pc.sum(pc.binary_length(docs.column("text"))).as_py() / 1e6
    batches = docs.to_batches(max_chunksize=8192)
    text = docs.column("text").combine_chunks()
    reach = pc.match_substring_regex(text, "|".join(f"(?:{pii.PREFILTERS[s]})" for s in pii.searches(pii.KINDS)))
    results = {"docs": n, "mb": round(mb, 1), "docs_reaching_line_split": round(pc.mean(reach.cast("int8")).as_py(), 4)}
    for label, kinds in (("default", pii.DEFAULT_KINDS), ("all", pii.KINDS)):
        stage = PIIMask(kinds=kinds)
        best = None
        counts = None
        for _ in range(args.repeat):
            t0 = time.process_time()
            outs = [stage(b) for b in batches]
            dt = time.process_time() - t0
            best = dt if best is None else min(best, dt)
            counts = {k: [0, 0] for k in kinds}
            for o in outs:
                for k in kinds:
                    a = o.batch.column(f"pii_{k}").to_numpy()
                    counts[k][0] += int((a > 0).sum())
                    counts[k][1] += int(a.sum())
            removed = sum(int(pc.sum(o.decisions.removed).as_py() or 0) for o in outs if o.decisions is not None)
        results[label] = {"kinds": list(kinds), "cpu_s": round(best, 3), "docs_per_s_per_core": round(n / best),
                          "mb_per_s_per_core": round(mb / best, 1),
                          "docs_changed_and_masks": {k: v for k, v in counts.items()},
                          "removed_pii_mostly": removed}
    results["load_1min"] = round(os.getloadavg()[0], 2)
    print(json.dumps(results, indent=1 if args.json else None))


if __name__ == "__main__":
    main()
