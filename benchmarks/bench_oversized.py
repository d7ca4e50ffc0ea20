"""Oversized records (issue 25, "Unbreakable"): `dataclean run` on inputs with one huge record between two normal ones.

Cases, each built in a temporary folder (removed at the end, whatever happens):

  line_2.2GB   a .jsonl whose middle line is one JSON record with 2.2 GB of text (2,200,000,000 bytes)
  doc_500MB    a .jsonl whose middle record has a 500 MB text (500,000,000 bytes)
  gz_bomb_1GB  a .jsonl.gz (~1 MB) whose middle line is 1 GB of zeros (1,000,000,000 NUL bytes, one line)

The two neighbours are ordinary English paragraphs (~110 words) that the default pipeline keeps. Each case is
run as ``dataclean run IN -o OUT --workers 1 --quiet --config NO_REPORT`` (the default pipeline; only the HTML
report off, it is not under test) under ``timeout``, measured by :func:`_measure.measure` (wall time, peak Rss
and Pss summed over the process tree, sampled every 0.1 s; ``ru_maxrss`` of the largest process). Recorded:
the exit code, records in / kept / removed (stats/summary.json), the ``bad_record`` ledger rows (row, detail,
bytes of ``raw``), the first ``error:`` line, the output folder's size.

Run it on the code before a change and after it, e.g.::

    git worktree add --detach /tmp/wt_rd HEAD
    PYTHONPATH=/tmp/wt_rd python benchmarks/bench_oversized.py --label before
    git worktree remove --force /tmp/wt_rd
    python benchmarks/bench_oversized.py --label after

Each run replaces its label's entry in ``benchmarks/results/bench_oversized.json`` and prints the markdown table
of every label stored there. ``--cases`` picks some cases, ``--timeout`` bounds each run (default 1800 s).
"""
from __future__ import annotations

import argparse
import datetime as _dt
import glob
import json
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import zlib

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from _measure import measure  # noqa: E402

DEFAULT_JSON = os.path.join(HERE, "results", "bench_oversized.json")

BEFORE = ("The committee met on Tuesday to discuss the new library budget. After a long debate, the members agreed "
          "to extend the opening hours on weekends and to buy more books for children. The decision will be "
          "reviewed next spring, when the first figures on visitors are available. Several parents had written "
          "to the council to ask for a quiet reading room, and the librarians said that they would be glad to "
          "run a weekly story hour if volunteers could help them with the preparation and the cleaning.")
AFTER = ("A small bakery on the corner of the market square has won a regional prize for its rye bread. The owner, "
         "who learned the trade from her grandfather, still bakes every loaf in a wood-fired oven that was built "
         "more than eighty years ago. She opens the shop at six in the morning, and by noon the shelves are "
         "usually empty. Next year she hopes to train two apprentices, because the demand keeps growing and "
         "she would like to spend a little more time with her family on Sundays.")
WORDS = b"lorem ipsum dolor sit amet consectetur adipiscing elit sed do eiusmod tempor incididunt ut labore "
BLOCK = 64 << 20

CASES = {
    # name: (file name, how the middle record is written, its size in bytes)
    "line_2.2GB": ("huge.jsonl", "text", 2_200_000_000),
    "doc_500MB": ("big.jsonl", "text", 500_000_000),
    "gz_bomb_1GB": ("bomb.jsonl.gz", "zeros_gz", 1_000_000_000),
}


def _neighbour(i: int, text: str) -> bytes:
    return json.dumps({"id": f"n{i}", "text": text, "source": "web"}).encode() + b"\n"


def _repeat(pattern: bytes, n: int):
    """``n`` bytes of ``pattern`` repeated, in blocks of at most BLOCK bytes."""
    block = (pattern * (BLOCK // len(pattern) + 1))[:BLOCK]
    while n > 0:
        yield block[:min(n, BLOCK)]
        n -= BLOCK


def build(folder: str, case: str) -> tuple[str, int]:
    """The input file of ``case`` in ``folder``; returns its path and the middle line's length in bytes."""
    name, kind, size = CASES[case]
    path = os.path.join(folder, "in", name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    if kind == "text":
        head = b'{"id": "huge", "source": "web", "text": "'
        with open(path, "wb") as fh:
            fh.write(_neighbour(0, BEFORE))
            fh.write(head)
            for block in _repeat(WORDS, size):
                fh.write(block)
            fh.write(b'"}\n')
            fh.write(_neighbour(2, AFTER))
        return path, len(head) + size + 2
    co = zlib.compressobj(6, zlib.DEFLATED, 31)  # gzip
    with open(path, "wb") as fh:
        fh.write(co.compress(_neighbour(0, BEFORE)))
        for block in _repeat(b"\0", size):
            fh.write(co.compress(block))
        fh.write(co.compress(b"\n" + _neighbour(2, AFTER)))
        fh.write(co.flush())
    return path, size


def _ledger_bad(out: str) -> list[dict]:
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    rows = []
    for f in sorted(glob.glob(os.path.join(out, "rejected", "*.parquet"))):
        pf = pq.ParquetFile(f)
        for batch in pf.iter_batches(batch_size=64, columns=["reason", "detail", "origin_row", "raw"]):
            lengths = pc.binary_length(batch.column("raw")).to_pylist()
            for r, n in zip(batch.select(["reason", "detail", "origin_row"]).to_pylist(), lengths):
                if r["reason"] == "bad_record":
                    rows.append({"row": r["origin_row"], "detail": (r["detail"] or "")[:160], "raw_bytes": n})
    return rows


def _folder_mb(path: str) -> float:
    total = 0
    for root, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(root, f))
            except OSError:
                pass
    return round(total / 1e6, 1)


def run_case(case: str, tmp: str, timeout: int, env: dict) -> dict:
    folder = tempfile.mkdtemp(prefix=f"{case}-", dir=tmp)
    try:
        path, middle = build(folder, case)
        cfg = os.path.join(folder, "no-report.yaml")
        with open(cfg, "w") as fh:
            fh.write("output:\n  report: false\n")
        out = os.path.join(folder, "out")
        cmd = ["timeout", "-k", "10", str(timeout), sys.executable, "-m", "dataclean.cli", "run",
               os.path.join(folder, "in"), "-o", out, "--workers", "1", "--quiet", "--config", cfg]
        m = measure(cmd, cwd=folder, env=env, interval=0.1)  # (not run in the repo: PYTHONPATH picks the code)
        summary = {}
        try:
            with open(os.path.join(out, "stats", "summary.json")) as fh:
                summary = json.load(fh)
        except (OSError, ValueError):
            pass
        counts = re.search(r"(\d+) records in: (\d+) kept, (\d+) removed", m.stdout)
        errors = [line for line in m.stderr.splitlines() if line.startswith("error:")]
        other = [line for line in m.stderr.splitlines() if line.strip()][-1:] if not errors else []
        return {
            "input_file_bytes": os.path.getsize(path), "middle_line_bytes": middle,
            "exit": m.returncode, "timed_out": m.returncode in (124, 137),
            "records_in": summary.get("input_records", int(counts.group(1)) if counts else None),
            "kept": summary.get("kept", int(counts.group(2)) if counts else None),
            "removed": summary.get("removed", int(counts.group(3)) if counts else None),
            "bad_records": _ledger_bad(out),
            "error": (errors[0] if errors else other[0] if other else "")[:300],
            "wall_s": round(m.wall_s, 1), "peak_rss_mib": round(m.peak_rss_mib), "peak_pss_mib": round(m.peak_pss_mib),
            "maxrss_single_mib": round(m.maxrss_single_mib), "out_mb": _folder_mb(out),
        }
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _code_of(env: dict, cwd: str) -> str:
    res = subprocess.run([sys.executable, "-c", "import dataclean; print(dataclean.__file__)"], env=env, cwd=cwd,
                         capture_output=True, text=True)
    return res.stdout.strip()


def table(results: dict) -> str:
    head = ("| case | code | exit | in / kept / removed | bad_record rows (row: detail, raw bytes) | wall s | "
            "peak RSS tree MiB | peak PSS MiB | error |")
    lines = [head, "|" + "---|" * (head.count("|") - 1)]
    for label in ("before", "after", *sorted(k for k in results if k not in ("before", "after"))):
        for case, r in (results.get(label) or {}).get("cases", {}).items():
            bad = "; ".join(f"{b['row']}: {b['detail']}, {b['raw_bytes']:,} B" for b in r["bad_records"]) or "none"
            lines.append(f"| {case} | {label} | {r['exit']}{' (timeout)' if r['timed_out'] else ''} | "
                         f"{r['records_in']} / {r['kept']} / {r['removed']} | {bad} | {r['wall_s']} | "
                         f"{r['peak_rss_mib']:,} | {r['peak_pss_mib']:,} | {r['error'][:120].replace('|', '/')} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--label", default="after", help="the key of this run in the JSON (before / after)")
    ap.add_argument("--cases", nargs="*", default=list(CASES), choices=list(CASES))
    ap.add_argument("--tmp", default=None, help="where the temporary folder goes (default: $TMPDIR or /tmp)")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds per run before it is killed")
    ap.add_argument("--json", default=DEFAULT_JSON)
    args = ap.parse_args(argv)
    tmp = tempfile.mkdtemp(prefix="bench_oversized-", dir=args.tmp)
    env = dict(os.environ)
    env.pop("DATACLEAN_FAILPOINTS", None)
    try:
        free = shutil.disk_usage(tmp).free
        if free < 8e9:
            print(f"only {free / 1e9:.1f} GB free in {tmp}: need ~8 GB", file=sys.stderr)
            return 2
        entry = {"code": _code_of(env, tmp), "date": _dt.datetime.now().isoformat(timespec="seconds"),
                 "machine": f"{platform.machine()} {os.cpu_count()} cpus, python {platform.python_version()}",
                 "cases": {}}
        for case in args.cases:
            print(f"{args.label}: {case} ...", file=sys.stderr, flush=True)
            entry["cases"][case] = run_case(case, tmp, args.timeout, env)
            print(json.dumps(entry["cases"][case]), file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    results = {}
    if os.path.exists(args.json):
        with open(args.json) as fh:
            results = json.load(fh)
    results[args.label] = entry
    os.makedirs(os.path.dirname(args.json), exist_ok=True)
    with open(args.json, "w") as fh:
        json.dump(results, fh, indent=2)
        fh.write("\n")
    print(table(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
