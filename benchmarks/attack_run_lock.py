"""Two runs of one command on one output folder (issue 25, item 2): are they kept apart, and does every reader
see whole files?

* ``--pairs`` same-command pairs: ``dataclean run sample_data -o OUT --workers 2`` twice, the second started a
  seeded random 0..``--spread`` s after the first;
* ``--fresh-races`` pairs whose second run adds ``--fresh``.

While a pair runs, a reader thread reads ``manifest.json``, ``stats/summary.json`` (JSON) and ``report.html``
(must end with ``</html>``) in a loop and counts the reads that saw a partial or mixed file. After each pair the
folder is checked with ``dataclean verify`` and its data/, rejected/, stats/ and dedup/ bytes are compared with
a reference run.

An outcome is *clean* when each run exits 0, or exits 2 with the one line ``... is in use by another dataclean
run ...``, and the folder verifies and equals the reference. Anything else (another exit code, a traceback, a
folder that does not verify) is counted as *broken*.

    python benchmarks/attack_run_lock.py [--pairs 20] [--fresh-races 10] [--pythonpath DIR]

``--pythonpath`` runs another checkout (e.g. a worktree of an older commit) for a before/after comparison.
Results: benchmarks/results/attack_run_lock.json (with ``--out``).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PRODUCTS = ("data", "rejected", "stats", "dedup")


def digest(out: Path) -> str:
    h = hashlib.sha256()
    for sub in PRODUCTS:
        for path in sorted((out / sub).rglob("*")):
            if path.is_file() and not path.name.startswith("."):
                h.update(str(path.relative_to(out)).encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def command(out: Path, fresh: bool) -> list[str]:
    return [sys.executable, "-m", "dataclean.cli", "run", str(REPO / "sample_data"), "-o", str(out), "--workers",
            "2", "--quiet"] + (["--fresh"] if fresh else [])


class Reader(threading.Thread):
    """Reads the run's single files while the runs write them; counts partial or mixed reads."""

    def __init__(self, out: Path):
        super().__init__(daemon=True)
        self.out, self.stop, self.reads, self.bad, self.examples = out, threading.Event(), 0, 0, []

    def run(self) -> None:
        while not self.stop.is_set():
            for rel in ("manifest.json", "stats/summary.json", "report.html"):
                try:
                    data = (self.out / rel).read_bytes()
                except OSError:
                    continue
                self.reads += 1
                ok = data.rstrip().endswith(b"</html>") if rel.endswith(".html") else _is_json(data)
                if not ok:
                    self.bad += 1
                    if len(self.examples) < 3:
                        self.examples.append(f"{rel}: {len(data)} bytes")
            time.sleep(0.002)


def _is_json(data: bytes) -> bool:
    try:
        json.loads(data)
        return True
    except ValueError:
        return False


def one_pair(out: Path, delay: float, fresh: bool, env: dict, reference: str | None) -> dict:
    if out.exists():
        shutil.rmtree(out)
    reader = Reader(out)
    reader.start()
    first = subprocess.Popen(command(out, False), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(delay)
    second = subprocess.Popen(command(out, fresh), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True)
    results = []
    for proc in (first, second):
        _, err = proc.communicate(timeout=900)
        results.append((proc.returncode, err.strip()))
    reader.stop.set()
    reader.join()
    verified = subprocess.run([sys.executable, "-m", "dataclean.cli", "verify", str(out)], env=env,
                              capture_output=True, text=True).returncode == 0
    same = verified and (reference is None or digest(out) == reference)
    refused = sum(code == 2 and "is in use by another dataclean run" in err and "\n" not in err
                  for code, err in results)
    ok_exits = sum(code == 0 and "Traceback" not in err for code, err in results)
    clean = ok_exits + refused == 2 and same
    return {"delay_s": round(delay, 2), "fresh": fresh, "exits": [r[0] for r in results], "refused": refused,
            "verified": verified, "same_bytes": same, "clean": clean, "reads": reader.reads,
            "bad_reads": reader.bad, "bad_examples": reader.examples,
            "errors": [err.splitlines()[-1][:300] for code, err in results if code not in (0,) and err]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--fresh-races", type=int, default=10)
    ap.add_argument("--spread", type=float, default=12.0, help="largest delay of the second run, s")
    ap.add_argument("--seed", type=int, default=25)
    ap.add_argument("--pythonpath", help="checkout to run instead of this one")
    ap.add_argument("--out", help="write the results JSON here")
    args = ap.parse_args()
    env = dict(os.environ)
    if args.pythonpath:
        env["PYTHONPATH"] = args.pythonpath
    rng = random.Random(args.seed)
    work = Path(tempfile.mkdtemp(prefix="attack_lock_"))
    try:
        ref_out = work / "ref"
        subprocess.run(command(ref_out, False), env=env, check=True, capture_output=True)
        reference = digest(ref_out)
        rows = []
        for i in range(args.pairs + args.fresh_races):
            fresh = i >= args.pairs
            row = one_pair(work / "out", rng.uniform(0, args.spread), fresh, env, reference)
            rows.append(row)
            print(json.dumps(row), flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    summary = {}
    for kind, sel in (("same command", [r for r in rows if not r["fresh"]]),
                      ("second with --fresh", [r for r in rows if r["fresh"]])):
        summary[kind] = {"pairs": len(sel), "clean": sum(r["clean"] for r in sel),
                         "refused_in_use": sum(r["refused"] for r in sel),
                         "not_verified": sum(not r["verified"] for r in sel),
                         "reads": sum(r["reads"] for r in sel), "bad_reads": sum(r["bad_reads"] for r in sel)}
    print("\n| pairs | n | clean | second refused (exit 2, one line) | folder not verified | reads | partial reads |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for kind, s in summary.items():
        print(f"| {kind} | {s['pairs']} | {s['clean']} | {s['refused_in_use']} | {s['not_verified']} | "
              f"{s['reads']:,} | {s['bad_reads']:,} |")
    if args.out:
        Path(args.out).write_text(json.dumps({"summary": summary, "pairs": rows, "seed": args.seed,
                                              "pythonpath": args.pythonpath}, indent=2) + "\n")


if __name__ == "__main__":
    main()
