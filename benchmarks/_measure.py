"""Measurement helpers shared by the benchmarks (standard library + pyarrow only; no psutil).

* :func:`measure` runs a command as a subprocess and reports its wall time and the peak memory of the
  WHOLE process tree (the command and every descendant: worker pools, spawned helpers). A sampler thread
  walks the tree every ``interval`` seconds (default 20 ms) through ``/proc/<pid>/task/*/children`` (falling
  back to a scan of ``/proc/*/stat`` for parent ids), reads ``/proc/<pid>/smaps_rollup`` (``Rss`` and
  ``Pss``; ``/proc/<pid>/status`` ``VmRSS`` when smaps_rollup is unreadable) of every live process in it,
  sums each over the tree, and keeps the maximum sums. ``Rss`` counts pages shared between processes
  (libraries, copy-on-write pages) once per process, so the summed Rss overstates the tree's real footprint;
  ``Pss`` divides shared pages among the processes that map them, so the summed Pss is the better number
  for "how much RAM does this job need". Both are reported.

  A descendant that is orphaned (re-parented away from the tree) stays counted while it lives, because
  processes once seen are tracked by (pid, start time). Peaks shorter than the interval can be missed; as a
  cross-check the kernel's own ``ru_maxrss`` of the command (``wait4``: the largest single process among the
  command and the descendants it waited for) is reported too — the tree peak is normally above it.

* :func:`parquet_inputs` counts the documents (Parquet metadata) and the MB of text (sum of the UTF-8 byte
  lengths of the text column, 1 MB = 10**6 bytes) of Parquet inputs.

Memory is reported in MiB (2**20 bytes); text volume in MB (10**6 bytes), as in the corpus README.
"""
from __future__ import annotations

import glob
import os
import subprocess
import threading
import time
from dataclasses import asdict, dataclass, field
from typing import Iterable, Sequence

MIB = 1 << 20
PAGE = os.sysconf("SC_PAGE_SIZE")


# ---------------------------------------------------------------------------------------------------------
# process tree
# ---------------------------------------------------------------------------------------------------------

def _stat_fields(pid: int) -> tuple[int, int] | None:
    """(ppid, starttime) of ``pid`` from /proc/<pid>/stat, or None if it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            data = fh.read()
    except OSError:
        return None
    # The command name (field 2) may contain spaces and parentheses: split after the last ')'.
    rest = data[data.rfind(b")") + 2:].split()
    try:
        return int(rest[1]), int(rest[19])  # field 4 = ppid, field 22 = starttime
    except (IndexError, ValueError):
        return None


def _children_via_task(pid: int) -> list[int] | None:
    """Children of every thread of ``pid`` (needs CONFIG_PROC_CHILDREN); None when unsupported."""
    files = glob.glob(f"/proc/{pid}/task/*/children")
    if not files:
        return None if not os.path.exists(f"/proc/{pid}") else []
    kids: list[int] = []
    for f in files:
        try:
            with open(f, "rb") as fh:
                kids.extend(int(x) for x in fh.read().split())
        except OSError:
            pass  # thread or process just exited
    return kids


def _children_map_via_scan() -> dict[int, list[int]]:
    kids: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            st = _stat_fields(int(entry))
            if st is not None:
                kids.setdefault(st[0], []).append(int(entry))
    return kids


_HAS_CHILDREN_FILES = bool(glob.glob(f"/proc/{os.getpid()}/task/*/children"))


def process_tree(root: int) -> list[int]:
    """``root`` and all its live descendants (pids)."""
    if _HAS_CHILDREN_FILES:
        out, stack = [], [root]
        while stack:
            pid = stack.pop()
            out.append(pid)
            stack.extend(_children_via_task(pid) or [])
        return out
    kids = _children_map_via_scan()
    out, stack = [], [root]
    while stack:
        pid = stack.pop()
        out.append(pid)
        stack.extend(kids.get(pid, []))
    return out


def memory_of(pid: int) -> tuple[int, int] | None:
    """(Rss, Pss) of one process in bytes, or None if it is gone / has no memory (zombie)."""
    try:
        with open(f"/proc/{pid}/smaps_rollup", "rb") as fh:
            data = fh.read()
    except OSError:
        data = b""
    rss = pss = None
    for line in data.splitlines():
        if line.startswith(b"Rss:"):
            rss = int(line.split()[1]) * 1024
        elif line.startswith(b"Pss:"):
            pss = int(line.split()[1]) * 1024
            break  # Pss follows Rss
    if rss is not None:
        return rss, (pss if pss is not None else rss)
    try:  # smaps_rollup missing (old kernel) or unreadable: VmRSS from status
        with open(f"/proc/{pid}/status", "rb") as fh:
            for line in fh:
                if line.startswith(b"VmRSS:"):
                    v = int(line.split()[1]) * 1024
                    return v, v
    except OSError:
        pass
    return None


# ---------------------------------------------------------------------------------------------------------
# measuring a command
# ---------------------------------------------------------------------------------------------------------

@dataclass
class Measurement:
    cmd: list[str]
    returncode: int
    wall_s: float
    peak_rss_mib: float        # max over samples of the sum of Rss over the process tree
    peak_pss_mib: float        # max over samples of the sum of Pss over the process tree
    peak_procs: int            # most processes alive in the tree at one sample
    samples: int
    maxrss_single_mib: float   # kernel ru_maxrss (largest single process the command waited for)
    user_s: float              # CPU time of the command and the descendants it waited for
    sys_s: float
    stdout: str = ""
    stderr: str = ""
    extra: dict = field(default_factory=dict)

    def as_dict(self, with_output: bool = False) -> dict:
        d = asdict(self)
        if not with_output:
            d["stdout_tail"] = _tail(d.pop("stdout"))
            d["stderr_tail"] = _tail(d.pop("stderr"))
        return d


def _tail(text: str, lines: int = 20) -> str:
    return "\n".join(text.splitlines()[-lines:])


class _Sampler(threading.Thread):
    def __init__(self, root: int, interval: float):
        super().__init__(daemon=True)
        self.root, self.interval = root, interval
        self.stop = threading.Event()
        self.peak_rss = self.peak_pss = self.peak_procs = self.samples = 0
        self._seen: dict[int, int] = {}  # pid -> starttime, to follow re-parented descendants

    def sample(self) -> None:
        pids = set(process_tree(self.root))
        for pid in pids:
            if pid not in self._seen:
                st = _stat_fields(pid)
                if st is not None:
                    self._seen[pid] = st[1]
        for pid, start in list(self._seen.items()):  # orphans still alive with the same identity
            if pid not in pids:
                st = _stat_fields(pid)
                if st is None or st[1] != start:
                    del self._seen[pid]
                else:
                    pids.add(pid)
        rss = pss = procs = 0
        for pid in pids:
            m = memory_of(pid)
            if m is not None:
                rss += m[0]
                pss += m[1]
                procs += 1
        self.samples += 1
        self.peak_rss = max(self.peak_rss, rss)
        self.peak_pss = max(self.peak_pss, pss)
        self.peak_procs = max(self.peak_procs, procs)

    def run(self) -> None:
        while not self.stop.is_set():
            self.sample()
            self.stop.wait(self.interval)


def measure(cmd: Sequence[str], *, cwd: str | None = None, env: dict | None = None, interval: float | None = 0.02,
            capture: bool = True) -> Measurement:
    """Run ``cmd`` to completion; return its wall time, tree peak Rss/Pss and output.

    Output goes to temporary files (no pipe can fill up and stall the command); with ``capture=False`` it is
    passed through to this process's stdout/stderr instead. ``interval=None`` samples no memory (peaks are 0):
    reading every process's smaps_rollup every 20 ms costs a 2-core machine ~20% of its time, which slows the
    command being timed (a dataclean dedup run 7.9 -> 9.5 s, a datatrove one 128 -> 152 s).
    """
    import tempfile

    out_f = tempfile.TemporaryFile() if capture else None
    err_f = tempfile.TemporaryFile() if capture else None
    t0 = time.perf_counter()
    proc = subprocess.Popen(list(cmd), cwd=cwd, env=env, stdout=out_f, stderr=err_f)
    sampler = _Sampler(proc.pid, interval if interval is not None else 0.0)
    if interval is not None:
        sampler.start()
    try:
        # wait4 (not Popen.wait) to get the kernel's resource usage of this child and its waited-for tree.
        _, status, ru = os.wait4(proc.pid, 0)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    finally:
        wall = time.perf_counter() - t0
        sampler.stop.set()
        if interval is not None:
            sampler.join()
    proc.returncode = os.waitstatus_to_exitcode(status)
    stdout = stderr = ""
    if capture:
        for f in (out_f, err_f):
            f.seek(0)
        stdout = out_f.read().decode("utf-8", "replace")
        stderr = err_f.read().decode("utf-8", "replace")
        out_f.close()
        err_f.close()
    return Measurement(cmd=list(cmd), returncode=proc.returncode, wall_s=wall,
                       peak_rss_mib=sampler.peak_rss / MIB, peak_pss_mib=sampler.peak_pss / MIB,
                       peak_procs=sampler.peak_procs, samples=sampler.samples,
                       maxrss_single_mib=ru.ru_maxrss * 1024 / MIB, user_s=ru.ru_utime, sys_s=ru.ru_stime,
                       stdout=stdout, stderr=stderr)


# ---------------------------------------------------------------------------------------------------------
# input volume
# ---------------------------------------------------------------------------------------------------------

@dataclass
class InputStats:
    files: int
    docs: int
    text_bytes: int
    file_bytes: int

    @property
    def text_mb(self) -> float:
        return self.text_bytes / 1e6


def parquet_inputs(paths: Iterable[str], text_column: str = "text") -> InputStats:
    """Documents (from Parquet metadata) and UTF-8 bytes of ``text_column`` over the given Parquet files.

    Reads only the text column, one row group at a time.
    """
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    files = docs = text_bytes = file_bytes = 0
    for path in paths:
        pf = pq.ParquetFile(path)
        files += 1
        docs += pf.metadata.num_rows
        file_bytes += os.path.getsize(path)
        for rg in range(pf.num_row_groups):
            col = pf.read_row_group(rg, columns=[text_column]).column(0)
            n = pc.sum(pc.binary_length(col)).as_py()
            text_bytes += n or 0
    return InputStats(files=files, docs=docs, text_bytes=text_bytes, file_bytes=file_bytes)


def bench_shards(corpus: str, spec: str) -> list[str]:
    """The bench shards ``part-NNNNN.parquet`` of ``corpus`` that a range such as ``0-3`` or ``5`` names."""
    lo, _, hi = spec.partition("-")
    return [os.path.join(corpus, f"part-{i:05d}.parquet") for i in range(int(lo), int(hi or lo) + 1)]


def median(xs: Sequence[float]) -> float:
    s = sorted(xs)
    n = len(s)
    if n == 0:
        return float("nan")
    return s[n // 2] if n % 2 else (s[n // 2 - 1] + s[n // 2]) / 2


if __name__ == "__main__":  # python benchmarks/_measure.py CMD ... : measure any command
    import json
    import sys

    if len(sys.argv) < 2:
        sys.exit("usage: python benchmarks/_measure.py COMMAND [ARGS...]")
    m = measure(sys.argv[1:], capture=False)
    print(json.dumps(m.as_dict(), indent=2), file=sys.stderr)
    sys.exit(m.returncode)
