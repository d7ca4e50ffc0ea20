"""Crawl input: WARC parse speed, pass-1 throughput against the extractor alone, and memory against WARC size.

The pages are real saved pages, put in a gzip WARC (a ``request`` and a ``response`` record per page, after one
``warcinfo``; ``benchmarks/make_warc.py``):

* the Python 3.11 documentation (530 HTML pages, PSF-2.0) from Debian's ``python3.11-doc`` package, as
  ``https://docs.python.org/3.11/...`` with ``Content-Type: text/html; charset=utf-8``;
* the 110 real web pages of trafilatura 1.0.0's ``tests/cache`` (its sdist from PyPI), at the URLs its
  ``tests/realworld_tests.py`` gives them (``http://<file stem>/`` for the others), with ``Content-Type:
  text/html`` and no charset, so that dataclean's charset detection runs (one page is ISO-8859-1). These
  are closer to crawl pages than the docs.

When absent, both are fetched once into ``~/.cache/dataclean/bench/`` (``DATACLEAN_BENCH_CACHE`` overrides it)
with the ordinary clients: ``apt-get download python3.11-doc`` and ``dpkg-deb -x`` (Debian's package lists
must be there: ``apt-get update`` first), and ``pip download --no-deps --no-binary :all:
trafilatura==1.0.0`` (only ``tests/`` is unpacked). ``--pydoc DIR`` / ``--trafilatura-cache DIR`` use folders
that are already there instead. Pages of more than ``extract.max_html_chars`` characters (2M: the docs'
``contents.html``) are left out, since the extract stage removes them unread and the extractor-alone side
would spend its time on them; pages are shuffled (seed 0) so that ``--pages N`` keeps both sets.

In one invocation:

1. **Parse speed** (best of ``--reps``, CPU time of this process, ``time.process_time``): dataclean's reader
   (``dataclean.io.readers.read_shard``: FastWARC over dataclean's own gzip member stream, plus charset
   decoding and the Arrow batches: every chunk iterated), FastWARC alone (``ArchiveIterator`` on the path,
   ``rec.reader.read()`` of every record), and warcio's ``ArchiveIterator`` reading every record's
   ``content_stream()``. Records/s and MB/s of the compressed file (the decompressed size is reported too).
2. **Throughput, pages/s per core** (CPU time; ``--reps`` runs, alternating the order, median and best), for
   ``rules/crawl.yaml`` (trafilatura) and the same with ``extract.extractor: resiliparse``:

   * *extractor alone*: the extract stage's own settings in a new
     :class:`dataclean.text.html_extract.Extractor`, called on the decoded HTML of every page, read from the
     WARC by ``read_shard`` beforehand (the same strings, the same URLs the stage passes);
   * *WARC to end of pass 1, loop*: what ``pass1_task`` (``dataclean/exec/tasks.py``) does for one worker,
     without its writers: ``read_shard`` on the WARC and ``pipeline_for(cfg).process(chunk.docs)`` on every
     chunk (url_filter, extract, then every pass-1 stage of the default pipeline);
   * *pass1_task*: the real task function itself on a temp folder (the loop plus its Parquet writers, the
     shuffle writers of the global stages and the marker).

   Overhead = (pass-1 CPU s − extractor CPU s) / extractor CPU s, from the medians (target ≤ 20%). A warm-up
   of both sides on the first pages is run first and not counted (numba kernels compile or load from their
   cache on first use; trafilatura and lxml set themselves up on the first page).
3. **Memory against WARC size**: ``python -m dataclean.cli run WARC -o OUT --config crawl --workers 1 --quiet
   --fresh`` as a subprocess on the WARC of N pages and on one of 4N (the same pages four times, each copy at
   its own URL, ``?copy=k``), peak RSS and PSS of the whole process tree (``benchmarks/_measure.py``), and
   the ratio 4N/N. Memory is flat in WARC size when the ratio is near 1: the reader cuts a batch at
   ``input.batch_rows`` (4096) rows or 16 MiB of text (``dataclean.io.warc.MAX_CHUNK_TEXT_BYTES``), so the
   639 pages (61 MB of HTML) are 4 batches and the 4N WARC 16.

Results go to ``benchmarks/results/extract.json`` (with the command, the page counts, the machine and its load
average at start and end).

    python benchmarks/bench_extract.py                  # all 639 pages, 3 reps (~8 min on 2 cores)
    python benchmarks/bench_extract.py --pages 200      # fewer pages
    python benchmarks/bench_extract.py --quick          # smoke test: 40 pages, 1 rep, results to a temp file
"""
from __future__ import annotations

import argparse
import ast
import datetime as _dt
import glob
import json
import os
import random
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, REPO)
sys.path.insert(0, HERE)
DEFAULT_JSON = os.path.join(HERE, "results", "extract.json")
CACHE = os.environ.get("DATACLEAN_BENCH_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "dataclean", "bench")
PYDOC_BASE = "https://docs.python.org/3.11/"
PYDOC_HTML = os.path.join("usr", "share", "doc", "python3.11", "html")
TRAFILATURA_SDIST = "trafilatura==1.0.0"

from _measure import measure, median  # noqa: E402
from bench_foundation import _machine  # noqa: E402
from make_warc import write_warc  # noqa: E402


# ---------------------------------------------------------------------------------------------------------
# the pages
# ---------------------------------------------------------------------------------------------------------

def fetch_pydoc(cache: str) -> str:
    """The html/ folder of Debian's python3.11-doc, downloaded and unpacked into ``cache`` when absent."""
    dest = os.path.join(cache, "python3.11-doc")
    html = os.path.join(dest, PYDOC_HTML)
    if os.path.isdir(html):
        return html
    os.makedirs(cache, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".pydoc-", dir=cache)
    try:
        print(f"fetching python3.11-doc into {dest} (apt-get download, dpkg-deb -x) ...", flush=True)
        p = subprocess.run(["apt-get", "download", "python3.11-doc"], cwd=tmp, capture_output=True, text=True)
        debs = glob.glob(os.path.join(tmp, "*.deb"))
        if p.returncode != 0 or not debs:
            sys.exit(f"apt-get download python3.11-doc failed (run 'apt-get update' first?):\n{p.stderr.strip()}")
        root = os.path.join(tmp, "root")
        subprocess.run(["dpkg-deb", "-x", debs[0], root], check=True)
        with open(os.path.join(root, "SOURCE.txt"), "w") as fh:
            fh.write(f"apt-get download python3.11-doc: {os.path.basename(debs[0])}\n")
        os.rename(root, dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return html


def fetch_trafilatura_cache(cache: str) -> str:
    """trafilatura 1.0.0's tests/cache folder (its sdist from PyPI), unpacked into ``cache`` when absent."""
    dest = os.path.join(cache, "trafilatura-1.0.0")
    pages = os.path.join(dest, "tests", "cache")
    if os.path.isdir(pages):
        return pages
    os.makedirs(cache, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".trafilatura-", dir=cache)
    try:
        print(f"fetching the {TRAFILATURA_SDIST} sdist into {dest} (pip download) ...", flush=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--no-binary", ":all:",
                        TRAFILATURA_SDIST, "-d", tmp], check=True)
        sdist = glob.glob(os.path.join(tmp, "trafilatura-1.0.0.tar.gz"))[0]
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if m.name.startswith("trafilatura-1.0.0/tests/")]
            kw = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(tmp, members=members, **kw)
        os.rename(os.path.join(tmp, "trafilatura-1.0.0"), dest)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return pages


def _trafilatura_urls(cache_dir: str) -> dict[str, str]:
    """file name -> URL, from MOCK_PAGES of the sdist's tests/realworld_tests.py."""
    path = os.path.join(os.path.dirname(cache_dir), "realworld_tests.py")
    urls: dict[str, str] = {}
    try:
        tree = ast.parse(open(path, encoding="utf-8").read())
    except OSError:
        return urls
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "MOCK_PAGES":
            for url, name in ast.literal_eval(node.value).items():
                urls.setdefault(name, url)
    return urls


def load_pages(pydoc: str, traf: str, max_chars: int) -> tuple[list[tuple[str, bytes, str]], dict]:
    """(url, payload, content type) of every page, shuffled (seed 0); and what was left out."""
    from dataclean.io.charset import decode_html

    pages = []
    for path in sorted(glob.glob(os.path.join(pydoc, "**", "*.html"), recursive=True)):
        rel = os.path.relpath(path, pydoc).replace(os.sep, "/")
        pages.append(("pydoc", PYDOC_BASE + rel, open(path, "rb").read(), "text/html; charset=utf-8"))
    urls = _trafilatura_urls(traf)
    for name in sorted(os.listdir(traf)):
        url = urls.get(name) or f"http://{name.rsplit('.', 1)[0]}/"
        if url.count("/") < 3:  # "http://exotic_tags": a request line needs a path
            url += "/"
        pages.append(("trafilatura", url, open(os.path.join(traf, name), "rb").read(), "text/html"))
    kept, left_out = [], []
    for src, url, payload, ctype in pages:
        chars = len(decode_html(payload, ctype)[0])
        (left_out if chars > max_chars else kept).append((src, url, payload, ctype, chars))
    random.Random(0).shuffle(kept)
    info = {"pydoc_pages_found": sum(p[0] == "pydoc" for p in pages),
            "trafilatura_pages_found": sum(p[0] == "trafilatura" for p in pages),
            "left_out_over_max_html_chars": [{"url": p[1], "chars": p[4]} for p in left_out]}
    return kept, info


def build_warc(path: str, pages: list, copies: int = 1) -> dict:
    entries = []
    for k in range(copies):
        for _, url, payload, ctype, _chars in pages:
            entries.append((url if k == 0 else f"{url}{'&' if '?' in url else '?'}copy={k}", payload, ctype))
    write_warc(path, entries)
    return {"path": path, "pages": len(entries), "records": 2 * len(entries) + 1,
            "mb_gzip": round(os.path.getsize(path) / 1e6, 2),
            "html_mb": round(sum(len(e[1]) for e in entries) / 1e6, 2)}


# ---------------------------------------------------------------------------------------------------------
# 1. parse speed
# ---------------------------------------------------------------------------------------------------------

def _read_dataclean(path: str) -> int:
    from dataclean.io.readers import read_shard

    n = 0
    for chunk in read_shard(path, 0):
        n += chunk.n_records + sum(chunk.skipped.values())
    return n


def _read_fastwarc(path: str) -> int:
    from fastwarc.warc import ArchiveIterator, WarcRecordType

    n = 0
    for rec in ArchiveIterator(path, parse_http=True, record_types=WarcRecordType.any_type):
        rec.reader.read()
        n += 1
    return n


def _read_warcio(path: str) -> int:
    from warcio.archiveiterator import ArchiveIterator

    n = 0
    with open(path, "rb") as fh:
        for rec in ArchiveIterator(fh):
            rec.content_stream().read()
            n += 1
    return n


def _decompressed_bytes(path: str) -> int:
    import gzip

    n = 0
    with gzip.open(path, "rb") as fh:
        while block := fh.read(1 << 20):
            n += len(block)
    return n


def parse_speed(path: str, reps: int) -> dict:
    sides = {"dataclean_read_shard": _read_dataclean, "fastwarc_alone": _read_fastwarc, "warcio": _read_warcio}
    mb = os.path.getsize(path) / 1e6
    raw_mb = _decompressed_bytes(path) / 1e6
    for fn in sides.values():  # warm-up (imports, page cache)
        fn(path)
    times: dict[str, list[float]] = {k: [] for k in sides}
    records: dict[str, int] = {}
    order = list(sides)
    for rep in range(reps):
        for name in (order if rep % 2 == 0 else order[::-1]):
            t0 = time.process_time()
            records[name] = sides[name](path)
            times[name].append(time.process_time() - t0)
    out = {"file_mb_gzip": round(mb, 2), "file_mb_decompressed": round(raw_mb, 2)}
    for name in sides:
        best = min(times[name])
        out[name] = {"records": records[name], "cpu_s_best": round(best, 4),
                     "cpu_s": [round(t, 4) for t in times[name]],
                     "records_per_s": round(records[name] / best), "mb_per_s": round(mb / best, 1),
                     "decompressed_mb_per_s": round(raw_mb / best, 1)}
    out["warcio_over_dataclean_cpu"] = round(min(times["warcio"]) / min(times["dataclean_read_shard"]), 2)
    out["dataclean_over_fastwarc_alone_cpu"] = round(min(times["dataclean_read_shard"])
                                                     / min(times["fastwarc_alone"]), 2)
    return out


# ---------------------------------------------------------------------------------------------------------
# 2. throughput
# ---------------------------------------------------------------------------------------------------------

def _pages_of(path: str, cfg: dict) -> list[tuple[str, str]]:
    from dataclean.io.readers import read_shard

    out = []
    for chunk in read_shard(path, 0, batch_rows=cfg["input"]["batch_rows"]):
        out.extend(zip(chunk.docs.column("text").to_pylist(), chunk.docs.column("url").to_pylist()))
    return out


def _alone(extractor, pages) -> tuple[float, int, int]:
    chars = empty = 0
    t0 = time.process_time()
    for html, url in pages:
        text = extractor.extract(html, url)
        chars += len(text)
        empty += not text
    return time.process_time() - t0, chars, empty


def _loop(path: str, cfg: dict) -> tuple[float, dict]:
    import pyarrow.compute as pc

    import dataclean.pipeline as P
    from dataclean.exec.tasks import pipeline_for
    from dataclean.io.readers import ColumnMapping, read_shard

    pipe = pipeline_for(cfg)
    cols = cfg["input"]["columns"]
    mapping = ColumnMapping(text=cols["text"], id=cols["id"], source=cols["source"], url=cols["url"],
                            lang=cols["lang"], default_source=cfg["input"]["default_source"])
    docs = kept = 0
    removed: dict[str, int] = {}
    extract_chars = 0
    stage_cpu: dict[str, float] = {}
    apply_stage = P.apply_stage

    def timed(stage, batch):  # CPU s per stage (a few calls per chunk: nothing measurable added)
        t = time.process_time()
        try:
            return apply_stage(stage, batch)
        finally:
            stage_cpu[stage.name] = stage_cpu.get(stage.name, 0.0) + time.process_time() - t

    P.apply_stage = timed
    t0 = time.process_time()
    try:
        for chunk in read_shard(path, 0, mapping, cfg["input"]["batch_rows"]):
            docs += chunk.docs.num_rows
            outcome = pipe.process(chunk.docs)
            kept += outcome.kept.num_rows
            for name in ("kept", "removed"):
                b = getattr(outcome, name)
                if b.num_rows and "extract_chars" in b.schema.names:
                    extract_chars += pc.sum(b.column("extract_chars")).as_py() or 0
            r = outcome.removed
            for stage, rule in zip(r.column("stage").to_pylist(), r.column("rule").to_pylist()):
                removed[f"{stage}/{rule}"] = removed.get(f"{stage}/{rule}", 0) + 1
        cpu = time.process_time() - t0
    finally:
        P.apply_stage = apply_stage
    stages = round(sum(stage_cpu.values()), 3)
    return cpu, {"docs": docs, "pass1_kept": kept, "removed_by_rule": dict(sorted(removed.items())),
                 "extract_chars": extract_chars,
                 "stage_cpu_s": {k: round(v, 3) for k, v in sorted(stage_cpu.items(), key=lambda kv: -kv[1])},
                 "outside_stages_cpu_s": round(cpu - stages, 3)}


def _task(path: str, cfg: dict, tmp: str) -> tuple[float, dict]:
    from dataclean.exec.tasks import TaskSpec, pass1_task

    out = tempfile.mkdtemp(prefix="pass1-", dir=tmp)
    try:
        t0 = time.process_time()
        res = pass1_task(TaskSpec(0, path, out, cfg, "bench_extract"))
        cpu = time.process_time() - t0
    finally:
        shutil.rmtree(out, ignore_errors=True)
    if res.get("status") != "ok":
        raise RuntimeError(f"pass1_task failed: {res.get('error')}")
    return cpu, {"records": res["records"], "pass1_kept": res["pass1_kept"]}


def throughput(path: str, warm_path: str, cfg: dict, reps: int, tmp: str, with_task: bool = True) -> dict:
    from dataclean.exec.tasks import pipeline_for
    from dataclean.text.html_extract import Extractor

    pipe = pipeline_for(cfg)
    stage = next(s for s in pipe.stages if s.kind == "extract")
    extractor = Extractor(stage.extractor, stage.keep, stage.favor)
    # warm-up, not counted: numba kernels, trafilatura/lxml set-up, the pipeline's first batch
    _alone(extractor, _pages_of(warm_path, cfg))
    _loop(warm_path, cfg)
    if with_task:
        _task(warm_path, cfg, tmp)
    pages = _pages_of(path, cfg)
    sides = ["alone", "loop"] + (["task"] if with_task else [])
    times: dict[str, list[float]] = {s: [] for s in sides}
    info: dict = {}
    for rep in range(reps):
        for side in (sides if rep % 2 == 0 else sides[::-1]):
            if side == "alone":
                cpu, chars, empty = _alone(extractor, pages)
                info["alone"] = {"pages": len(pages), "extract_chars": chars, "empty_pages": empty}
            elif side == "loop":
                cpu, info["loop"] = _loop(path, cfg)
            else:
                cpu, info["task"] = _task(path, cfg, tmp)
            times[side].append(cpu)
            print(f"    rep {rep} {stage.extractor:<11} {side:<5} {cpu:7.2f} CPU s  "
                  f"{len(pages) / cpu:6.1f} pages/s", flush=True)
    n = len(pages)
    out: dict = {"extractor": stage.extractor, "keep": list(stage.keep), "favor": stage.favor, "pages": n}
    label = {"alone": "extractor_alone", "loop": "warc_to_pass1_end_loop", "task": "pass1_task"}
    for side in sides:
        med, best = median(times[side]), min(times[side])
        out[label[side]] = {"cpu_s": [round(t, 3) for t in times[side]], "cpu_s_median": round(med, 3),
                            "cpu_s_best": round(best, 3), "pages_per_s_per_core_median": round(n / med, 1),
                            "pages_per_s_per_core_best": round(n / best, 1), **info[side]}
    a_med, a_best = median(times["alone"]), min(times["alone"])
    for side in sides[1:]:
        out[f"overhead_{label[side]}_median"] = round((median(times[side]) - a_med) / a_med, 4)
        out[f"overhead_{label[side]}_best"] = round((min(times[side]) - a_best) / a_best, 4)
    out["overhead_target"] = 0.20
    out["same_main_text_as_alone"] = info["loop"]["extract_chars"] == info["alone"]["extract_chars"]
    return out


# ---------------------------------------------------------------------------------------------------------
# 3. memory against WARC size
# ---------------------------------------------------------------------------------------------------------

def run_memory(warc: str, tmp: str, interval: float | None) -> dict:
    out = os.path.join(tmp, "run-" + os.path.basename(warc).split(".")[0])
    cmd = [sys.executable, "-m", "dataclean.cli", "run", warc, "-o", out, "--config", "crawl", "--workers", "1",
           "--quiet", "--fresh"]
    m = measure(cmd, cwd=REPO, interval=interval)
    d = {"cmd": " ".join(["python"] + cmd[1:]), "returncode": m.returncode, "wall_s": round(m.wall_s, 2),
         "cpu_s": round(m.user_s + m.sys_s, 2), "peak_rss_mib": round(m.peak_rss_mib, 1),
         "peak_pss_mib": round(m.peak_pss_mib, 1), "maxrss_single_mib": round(m.maxrss_single_mib, 1),
         "peak_procs": m.peak_procs, "samples": m.samples}
    summary = os.path.join(out, "stats", "summary.json")
    if os.path.exists(summary):
        s = json.load(open(summary))
        keys = ("input_records", "kept", "removed", "removed_by_stage", "skipped_records", "bad_records",
                "conservation_ok", "failed_inputs")
        d["summary"] = {k: s[k] for k in keys if k in s}
    if m.returncode != 0:
        d["stderr_tail"] = m.as_dict()["stderr_tail"]
    shutil.rmtree(out, ignore_errors=True)
    return d


# ---------------------------------------------------------------------------------------------------------

def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pages", type=int, default=0, help="use the first N pages (after the shuffle; 0 = all)")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="smoke test: 40 pages, 1 rep, JSON to a temp file")
    ap.add_argument("--json", help=f"results file (default {os.path.relpath(DEFAULT_JSON, REPO)})")
    ap.add_argument("--pydoc", help="an html/ folder of python3.11-doc (default: fetched into the cache)")
    ap.add_argument("--trafilatura-cache", help="a tests/cache folder of trafilatura 1.0.0 (default: fetched)")
    ap.add_argument("--warm-pages", type=int, default=20, help="pages of the warm-up WARC")
    ap.add_argument("--no-task", action="store_true", help="skip the pass1_task side (only the loop)")
    ap.add_argument("--no-memory", action="store_true")
    ap.add_argument("--interval", type=float, default=0.02, help="memory sampling interval (s)")
    ap.add_argument("--tmp", help="where the WARCs and runs go (default: the system temp folder; removed after)")
    args = ap.parse_args()
    if args.quick:
        args.pages, args.reps = args.pages or 40, 1
    json_path = args.json or (os.path.join(tempfile.gettempdir(), "bench_extract_quick.json") if args.quick
                              else DEFAULT_JSON)
    from dataclean.config import resolve_config

    started = _dt.datetime.now(_dt.timezone.utc)
    load_start = os.getloadavg()
    cfg_traf = resolve_config("crawl")
    cfg_resi = resolve_config("crawl", overrides={"extract.extractor": "resiliparse"})
    max_chars = next(s for s in cfg_traf["pipeline"] if s.get("stage") == "extract")["max_html_chars"]
    pydoc = args.pydoc or fetch_pydoc(CACHE)
    traf = args.trafilatura_cache or fetch_trafilatura_cache(CACHE)
    pages, page_info = load_pages(pydoc, traf, max_chars)
    if args.pages:
        pages = pages[:args.pages]
    tmp = tempfile.mkdtemp(prefix="dc-extract-", dir=args.tmp)
    res: dict = {
        "benchmark": "bench_extract", "date": started.isoformat(timespec="seconds"),
        "command": " ".join(["python", os.path.relpath(os.path.abspath(sys.argv[0]), REPO)] + sys.argv[1:]),
        "loadavg_start": [round(x, 2) for x in load_start],
        "pages": {"total": len(pages), "pydoc": sum(p[0] == "pydoc" for p in pages),
                  "trafilatura_tests_cache": sum(p[0] == "trafilatura" for p in pages),
                  "html_mb": round(sum(len(p[2]) for p in pages) / 1e6, 2), **page_info,
                  "sources": {"pydoc": pydoc, "trafilatura": traf}},
    }
    try:
        import importlib.metadata as md
        res["versions"] = {p: md.version(p) for p in ("fastwarc", "resiliparse", "warcio", "trafilatura", "lxml")}
        src = os.path.normpath(os.path.join(pydoc, *[".."] * 5, "SOURCE.txt"))
        if os.path.exists(src):
            res["pages"]["pydoc_package"] = open(src).read().strip()
        warc = os.path.join(tmp, "pages.warc.gz")
        res["warc"] = build_warc(warc, pages)
        warm = os.path.join(tmp, "warm.warc.gz")
        build_warc(warm, pages[:args.warm_pages])
        print(f"{len(pages)} pages ({res['pages']['pydoc']} docs, {res['pages']['trafilatura_tests_cache']} web), "
              f"WARC {res['warc']['mb_gzip']} MB gzip, load {load_start[0]:.2f}", flush=True)

        print("1. parse speed", flush=True)
        res["parse"] = parse_speed(warc, args.reps)
        for name in ("dataclean_read_shard", "fastwarc_alone", "warcio"):
            r = res["parse"][name]
            print(f"  {name:<21} {r['records']:>6} records  {r['cpu_s_best']:7.3f} CPU s  "
                  f"{r['records_per_s']:>8,} records/s  {r['mb_per_s']:7.1f} MB/s (gzip)", flush=True)

        print("2. throughput (pages/s per core, CPU time)", flush=True)
        res["throughput"] = {}
        for label, cfg in (("trafilatura", cfg_traf), ("resiliparse", cfg_resi)):
            t = throughput(warc, warm, cfg, args.reps, tmp, with_task=not args.no_task)
            res["throughput"][label] = t
            line = (f"  {label:<11} alone {t['extractor_alone']['pages_per_s_per_core_median']:6.1f}  "
                    f"pass-1 loop {t['warc_to_pass1_end_loop']['pages_per_s_per_core_median']:6.1f} pages/s "
                    f"(overhead median {t['overhead_warc_to_pass1_end_loop_median']:+.1%}, "
                    f"best {t['overhead_warc_to_pass1_end_loop_best']:+.1%})")
            if "pass1_task" in t:
                line += (f"  pass1_task {t['pass1_task']['pages_per_s_per_core_median']:6.1f} "
                         f"({t['overhead_pass1_task_median']:+.1%})")
            print(line, flush=True)
            loop = t["warc_to_pass1_end_loop"]
            top = ", ".join(f"{k} {v:.2f}" for k, v in list(loop["stage_cpu_s"].items())[:6])
            print(f"    last loop rep, CPU s by stage: {top}; outside the stages (reading...) "
                  f"{loop['outside_stages_cpu_s']:.2f}", flush=True)

        if not args.no_memory:
            print("3. memory against WARC size (dataclean run --workers 1, process tree)", flush=True)
            warc4 = os.path.join(tmp, "pages4x.warc.gz")
            res["warc_4x"] = build_warc(warc4, pages, copies=4)
            run_memory(warm, tmp, None)  # not counted: a first run may set up caches (numba's)
            one, four = run_memory(warc, tmp, args.interval), run_memory(warc4, tmp, args.interval)
            res["memory"] = {"n_pages": res["warc"]["pages"], "n4_pages": res["warc_4x"]["pages"],
                             "run_n": one, "run_4n": four,
                             "peak_rss_ratio_4n_over_n": round(four["peak_rss_mib"] / one["peak_rss_mib"], 3),
                             "peak_pss_ratio_4n_over_n": round(four["peak_pss_mib"] / one["peak_pss_mib"], 3)}
            for k, r in (("N", one), ("4N", four)):
                print(f"  {k:<2} {r['wall_s']:7.1f} s  peak RSS {r['peak_rss_mib']:7.0f} MiB  PSS "
                      f"{r['peak_pss_mib']:7.0f} MiB  rc {r['returncode']}", flush=True)
            print(f"  ratio 4N/N: RSS {res['memory']['peak_rss_ratio_4n_over_n']}, "
                  f"PSS {res['memory']['peak_pss_ratio_4n_over_n']}", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    res["loadavg_end"] = [round(x, 2) for x in os.getloadavg()]
    res["machine"] = _machine()
    os.makedirs(os.path.dirname(json_path), exist_ok=True)
    with open(json_path, "w") as fh:
        json.dump(res, fh, indent=1)
        fh.write("\n")
    print(f"wrote {json_path}")
    failed = [r for r in (res.get("memory", {}).get("run_n"), res.get("memory", {}).get("run_4n"))
              if r and r["returncode"] != 0]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
