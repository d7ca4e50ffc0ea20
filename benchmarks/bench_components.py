"""Connected components of MinHash candidate edges: the three ways dataclean has vs scipy's.

Issue 21 asks to replace the hand-written connected components with scipy's if scipy measures as fast. This
times, in one invocation and alternating repetition by repetition, on the same graphs:

* ``scipy``: ``scipy.sparse.csgraph.connected_components`` on a CSR matrix, plus the relabelling to the
  smallest member that dataclean's callers need (the matrix build is counted: the edges arrive as arrays);
* ``hook``: ``dataclean.stages.dedup_minhash._hook_components`` (numpy min-hooking), the driver's path;
* ``numba``: the compiled union-find, the verification tasks' path (its compile is not counted).

It also times ``import scipy.sparse.csgraph`` and ``import numba`` + loading the kernels in fresh
subprocesses, because the driver pays those once per run. Labels are checked equal on every graph.

    python benchmarks/bench_components.py [--reps 5] [--json benchmarks/results/components.json]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from dataclean.dedup.minhash import mh_kernels  # noqa: E402
from dataclean.stages.dedup_minhash import _hook_components  # noqa: E402


def scipy_components(n: int, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    from scipy.sparse import coo_matrix
    from scipy.sparse.csgraph import connected_components

    graph = coo_matrix((np.ones(len(u), np.int8), (u, v)), shape=(n, n)).tocsr()
    _, label = connected_components(graph, directed=False)
    _, first = np.unique(label, return_index=True)
    return first[label].astype(np.int64)


def graphs(rng: np.random.Generator) -> dict[str, tuple[int, np.ndarray, np.ndarray]]:
    out = {}
    n = 50_000
    perm = rng.permutation(n)
    out["path 50k, shuffled"] = (n, perm[:-1].astype(np.int64), perm[1:].astype(np.int64))
    n = 1_000_000
    e = 800_000
    out["1M nodes, 800k random edges"] = (n, rng.integers(0, n, e), rng.integers(0, n, e))
    # what LSH candidates look like: many small clusters (star edges to each bucket's first member)
    n, k = 1_000_000, 200_000
    centre = rng.integers(0, n, k)
    sizes = rng.geometric(0.4, k)
    members = rng.integers(0, n, int(sizes.sum()))
    out["1M nodes, 200k star clusters"] = (n, np.repeat(centre, sizes).astype(np.int64), members.astype(np.int64))
    n = 3_000_000
    e = 600_000
    out["3M nodes, 600k random edges"] = (n, rng.integers(0, n, e), rng.integers(0, n, e))
    return out


def import_seconds(code: str, reps: int) -> float:
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", code], check=True)
        times.append(time.perf_counter() - t)
    base = []
    for _ in range(reps):
        t = time.perf_counter()
        subprocess.run([sys.executable, "-c", "import numpy"], check=True)
        base.append(time.perf_counter() - t)
    return round(statistics.median(times) - statistics.median(base), 3)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--json", default=os.path.join(os.path.dirname(__file__), "results", "components.json"))
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    kern = mh_kernels()
    kern.components(3, np.array([0], np.int64), np.array([1], np.int64))  # compile outside the timing
    ways = {"scipy": scipy_components, "hook": _hook_components,
            "numba": lambda n, u, v: kern.components(int(n), u, v)}
    scipy_components(3, np.array([0]), np.array([1]))  # import outside the timing
    results = {}
    for name, (n, u, v) in graphs(rng).items():
        u, v = np.asarray(u, np.int64), np.asarray(v, np.int64)
        times: dict[str, list[float]] = {w: [] for w in ways}
        labels = {}
        for _ in range(args.reps):
            for w, fn in ways.items():
                t = time.perf_counter()
                lab = fn(n, u, v)
                times[w].append(time.perf_counter() - t)
                labels[w] = lab
        same = all(labels[w] is not None and np.array_equal(labels[w], labels["scipy"]) for w in ways)
        results[name] = {w: round(statistics.median(ts), 4) for w, ts in times.items()}
        results[name]["same_labels"] = same
        print(name, results[name], flush=True)
    imports = {"scipy.sparse.csgraph": import_seconds("import numpy, scipy.sparse.csgraph", 3),
               "numba + kernels": import_seconds("from dataclean.dedup.minhash import mh_kernels; mh_kernels()", 3)}
    print("import, s over numpy's:", imports)
    load = os.getloadavg()[0]
    with open(args.json, "w") as fh:
        json.dump({"graphs_median_s": results, "import_s": imports, "reps": args.reps, "load_1min": load}, fh,
                  indent=1)
        fh.write("\n")


if __name__ == "__main__":
    main()
