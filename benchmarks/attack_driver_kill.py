"""Attack: SIGKILL the driver alone at random moments; does its process tree die with it, and does a rerun of the
same command give the output of a run never killed?

```
python benchmarks/attack_driver_kill.py --label after                          # this checkout (~15 min)
PYTHONPATH=/tmp/wt_ex python benchmarks/attack_driver_kill.py --label before   # another checkout's package
```

One run to warm up (numba's kernel cache, the page cache), then one reference run (``dataclean run sample_data
-o REF --workers 2 --quiet``, never killed) gives the
output every rerun must match, and when each phase starts (seen on disk, as in tests/test_faults.py): pass 1
(the run folder is claimed), the global step (the four pass-1 markers), the rest (the global step's marker:
pass 2, then the driver's stats and report). Then ``--kills`` times (20): the same command into a fresh folder,
in a session of its own (``start_new_session``: every process it starts, the fork server, the pool's workers and
multiprocessing's resource tracker, shares the driver's session id), SIGKILL of the driver's pid alone at a
moment drawn with a seeded RNG (``--seed``): an anchor (the launch for 5 kills, the start of pass 1 for 7, of
the global step for 4, of the rest for 4) plus a uniform fraction of what follows it in the reference run (the
whole run for the launch, the phase for a phase), so that the kills land in every phase however fast the
machine is that day; ``--wait`` s (5) later,
every process still alive in that session is a leftover (counted with its summed RSS, then SIGKILLed by pid, so
that the next attempt starts on a quiet machine); then the same command again, to completion, and the sha256 of
every file under ``data/``, ``rejected/``, ``stats/`` and ``dedup/`` compared with the reference's.

Printed: a markdown table (kills, kills that hit a live run with workers up, trees with leftovers, leftover
processes and MiB, identical reruns). Saved under ``--label`` in ``benchmarks/results/attack_driver_kill.json``
(other labels kept): the counts, each kill's delay, phase and leftovers, and which dataclean package ran.
Processes are read from ``/proc`` (Linux only; no psutil).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
SAMPLE = REPO / "sample_data"
RESULTS = REPO / "benchmarks" / "results" / "attack_driver_kill.json"
OUTPUTS = ("data", "rejected", "stats", "dedup")
PAGE = os.sysconf("SC_PAGE_SIZE")


def command(out: Path) -> list[str]:
    return [sys.executable, "-m", "dataclean.cli", "run", str(SAMPLE), "-o", str(out), "--workers", "2", "--quiet"]


def session_processes(sid: int) -> dict[int, dict]:
    """Every live (not zombie) process whose session id is ``sid``: pid -> ppid, name, RSS (bytes)."""
    found = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as fh:
                data = fh.read()
            with open(f"/proc/{entry}/cmdline", "rb") as fh:
                cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:
            continue
        rest = data[data.rfind(b")") + 2:].split()
        state, ppid, session, rss = rest[0], int(rest[1]), int(rest[3]), int(rest[21]) * PAGE
        if session == sid and state != b"Z":
            found[int(entry)] = {"ppid": ppid, "rss": rss, "cmdline": cmdline}
    for info in found.values():  # (a worker is a fork of the fork server: the same command line, another parent)
        info["what"] = _what(info["cmdline"], found.get(info["ppid"], {}).get("cmdline", ""))
    return found


def _what(cmdline: str, parent: str) -> str:
    if "resource_tracker" in cmdline:
        return "resource tracker"
    if "dataclean.cli" in cmdline:
        return "driver"
    if "forkserver" in cmdline and "forkserver" not in parent:
        return "fork server"
    return "worker"


def digests(out: Path) -> dict[str, str]:
    got = {}
    for sub in OUTPUTS:
        for path in sorted((out / sub).rglob("*")) if (out / sub).is_dir() else []:
            if path.is_file():
                got[str(path.relative_to(out))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return got


def _markers(out: Path) -> set[str]:
    markers = out / "_work" / "markers"
    return {p.stem for p in markers.glob("*.json")} if markers.is_dir() else set()


#: Where a kill's moment is drawn from: an anchor seen on disk, and how many kills follow it.
ANCHORS = {
    "launch": lambda out: True,
    "pass 1": lambda out: (out / ".dataclean-run.json").exists(),
    "global step": lambda out: sum(n.startswith("pass1-") for n in _markers(out)) == 4,
    "pass 2 and after": lambda out: "global" in _markers(out),
}
KILLS_PER_ANCHOR = {"launch": 5, "pass 1": 7, "global step": 4, "pass 2 and after": 4}
FOLLOWING = {"launch": "end", "pass 1": "global step", "global step": "pass 2 and after", "pass 2 and after": "end"}


def phase(out: Path) -> str:
    if "final" in _markers(out):
        return "finished"
    reached = [name for name, seen in ANCHORS.items() if seen(out)]
    return "start" if reached == ["launch"] else reached[-1]


def timed_reference(out: Path) -> tuple[float, dict[str, float]]:
    """Run the reference; the seconds from the launch at which each anchor first held, and the end."""
    started = time.monotonic()
    proc = subprocess.Popen(command(out), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    seen: dict[str, float] = {}
    while True:
        done = proc.poll() is not None
        for name, reached in ANCHORS.items():
            if name not in seen and reached(out):
                seen[name] = time.monotonic() - started
        if done:
            seen["end"] = time.monotonic() - started
            break
        time.sleep(0.005)
    if proc.returncode != 0 or set(seen) != {*ANCHORS, "end"}:
        raise SystemExit(f"the reference run failed ({seen}): {proc.stderr.read()}")
    return seen["end"], seen


def kill_pids(pids, timeout: float = 10.0) -> None:
    """SIGKILL the given leftover processes (all started by this benchmark's runs) and wait until they are gone."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(os.path.exists(f"/proc/{p}/stat") and not _zombie(p) for p in pids):
        time.sleep(0.05)


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return True
    return data[data.rfind(b")") + 2:].split()[0] == b"Z"


def package_used() -> dict:
    probe = subprocess.run([sys.executable, "-c", "import dataclean, os; print(os.path.dirname(dataclean.__file__))"],
                           capture_output=True, text=True)
    where = probe.stdout.strip()
    commit = subprocess.run(["git", "-C", where, "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    dirty = subprocess.run(["git", "-C", where, "status", "--porcelain", "--", "."], capture_output=True,
                           text=True).stdout.strip()  # (the package folder: "." from there)
    return {"package": where, "commit": commit, "dirty": bool(dirty)}


def attack(label: str, kills: int, seed: int, wait: float, tmp: Path) -> dict:
    warm = subprocess.run(command(tmp / "warm-up"), capture_output=True, text=True, start_new_session=True)
    if warm.returncode != 0:
        raise SystemExit(f"the warm-up run failed: {warm.stderr}")
    shutil.rmtree(tmp / "warm-up", ignore_errors=True)
    ref = tmp / "reference"
    duration, times = timed_reference(ref)
    expected = digests(ref)
    rng = random.Random(seed)
    plan = [(anchor, (times[FOLLOWING[anchor]] - times[anchor]) * rng.random())
            for anchor, k in KILLS_PER_ANCHOR.items() for _ in range(k)]
    plan = [plan[int(len(plan) * j / kills)] for j in range(kills)]  # (--kills other than 20: spread over them)
    rows = []
    for i, (anchor, delay) in enumerate(plan):
        out = tmp / f"kill-{i:02d}"
        proc = subprocess.Popen(command(out), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        while not ANCHORS[anchor](out) and proc.poll() is None:
            time.sleep(0.002)
        deadline = time.monotonic() + delay
        while time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.005)
        finished_first = proc.poll() is not None
        at_kill = session_processes(proc.pid)
        where = "finished" if finished_first else phase(out)
        try:
            os.kill(proc.pid, signal.SIGKILL)  # the driver only
        except ProcessLookupError:
            pass
        proc.wait()
        time.sleep(wait)
        left = session_processes(proc.pid)
        kill_pids(list(left))
        again = subprocess.run(command(out), capture_output=True, text=True, start_new_session=True)
        same = again.returncode == 0 and digests(out) == expected
        rows.append({"kill": i, "anchor": anchor, "delay_s": round(delay, 2), "phase": where,
                     "workers_up": sum(p["what"] == "worker" for p in at_kill.values()),
                     "tree_at_kill": len(at_kill) - (0 if finished_first else 1),
                     "leftovers": sorted(p["what"] for p in left.values()),
                     "leftover_mib": round(sum(p["rss"] for p in left.values()) / 2 ** 20, 1),
                     "rerun_rc": again.returncode, "identical": same,
                     "rerun_error": "" if again.returncode == 0 else again.stderr.strip()[-300:]})
        print(f"kill {i:2d} at {anchor} + {delay:5.2f} s ({where}, {rows[-1]['workers_up']} workers up): "
              f"leftovers {rows[-1]['leftovers'] or 'none'} ({rows[-1]['leftover_mib']} MiB); "
              f"rerun rc {again.returncode}, {'identical' if same else 'DIFFERENT'}", flush=True)
        shutil.rmtree(out, ignore_errors=True)
    live = [r for r in rows if r["phase"] != "finished"]
    return {"label": label, "seed": seed, "kills": kills, "wait_s": wait, "reference_s": round(duration, 2),
            "reference_phases_s": {k: round(v, 2) for k, v in times.items()},
            "killed_mid_run": len(live), "killed_with_workers_up": sum(r["workers_up"] > 0 for r in live),
            "leftover_trees": sum(bool(r["leftovers"]) for r in rows),
            "leftover_processes": sum(len(r["leftovers"]) for r in rows),
            "leftover_mib": round(sum(r["leftover_mib"] for r in rows), 1),
            "identical_reruns": sum(r["identical"] for r in rows), **package_used(),
            "date": time.strftime("%Y-%m-%d %H:%M:%S"), "nproc": os.cpu_count(), "per_kill": rows}


def table(results: dict) -> str:
    head = ("| run | kills | killed mid-run | with workers up | leftover trees after 5 s | leftover processes "
            "| leftover MiB | identical reruns |\n|---|---|---|---|---|---|---|---|")
    lines = [f"| {r['label']} | {r['kills']} | {r['killed_mid_run']} | {r['killed_with_workers_up']} "
             f"| {r['leftover_trees']} | {r['leftover_processes']} | {r['leftover_mib']} "
             f"| {r['identical_reruns']}/{r['kills']} |" for r in results.values()]
    return "\n".join([head, *lines])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--label", default="after", help="the key of these results in the JSON (before, after...)")
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--seed", type=int, default=20250325)
    ap.add_argument("--wait", type=float, default=5.0, help="seconds from the kill to the leftover check")
    ap.add_argument("--json", type=Path, default=RESULTS)
    ap.add_argument("--tmp", type=Path, default=None, help="where the outputs go (removed afterwards)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="attack_driver_kill-", dir=args.tmp))
    try:
        result = attack(args.label, args.kills, args.seed, args.wait, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    saved = json.loads(args.json.read_text()) if args.json.exists() else {}
    saved[args.label] = result
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(saved, indent=1) + "\n")
    print()
    print(table(saved))


if __name__ == "__main__":
    main()
