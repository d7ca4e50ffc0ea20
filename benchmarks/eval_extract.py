"""Extraction quality of dataclean's HTML extractor (``dataclean.text.html_extract.Extractor``) against
trafilatura used directly, on trafilatura's own real-world evaluation pages.

    python benchmarks/eval_extract.py [--markdown] [--show-failures] [--reps N] [--sdist PATH]
                                      [-o benchmarks/results/extract_eval.json]

Data: the sdist of ``trafilatura==1.0.0`` from PyPI, fetched at run time with
``pip download --no-deps --no-binary :all: trafilatura==1.0.0`` into ``--cache`` (default
``~/.cache/dataclean/bench/``; reused when present, checked against its sha256; ``--sdist PATH`` uses a
tarball you already have). It is GPLv3 data: the pages and snippets are read from the tarball in memory and
never copied into this repository; the JSON refers to a snippet by its line in ``realworld_tests.py`` and
its index ``n`` in parse order, never by its text.

* pages: ``tests/cache/*.html`` (110 saved real pages), read the way the test file's ``load_mock_page``
  reads them: UTF-8, else the bytes decoded with charset-normalizer's best guess (kept as bytes when that
  fails too; chardet is not used);
* snippets: ``tests/realworld_tests.py`` is parsed with ``ast``: ``MOCK_PAGES`` maps URL -> file name; in
  each test function the URL of the last ``result = load_mock_page(URL, ...)`` is tracked, and every
  ``assert`` contributes its comparisons ``'s' in result`` ("with": must be present) and
  ``'s' not in result`` ("without": must be absent), following ``and``. An ``if`` whose condition names
  ``xmloutput`` is evaluated for plain-text output (``xmloutput=False``) and only the branch that runs then
  is read (the file's ``if xmloutput is False:`` asserts test the text output and are kept). Other asserts
  (other variables, ``or``, ``is None``) are ignored and counted. (url, snippet, kind) is deduplicated.

Configurations, each run on every page that has a snippet, without the page URL:

* ``trafilatura``: ``trafilatura.extract(html)`` with its defaults (comments included);
* ``trafilatura_no_comments``: ``trafilatura.extract(html, include_comments=False)``;
* ``dataclean_trafilatura``: ``Extractor("trafilatura").extract(html)`` (the default: keep code, tables, math,
  not comments, as datatrove; balanced);
* ``dataclean_trafilatura_comments``: ``Extractor("trafilatura", keep=[code, tables, math, comments])``;
* ``dataclean_trafilatura_precision``: ``Extractor("trafilatura", favor="precision")``;
* ``dataclean_resiliparse``: ``Extractor("resiliparse")``.

Whitespace is normalized the same way for every configuration: in the extracted text every run of
whitespace (``\\s+``, Unicode, so no-break spaces too) becomes one space and the text is padded with one
space at each end; in the snippet every run of whitespace becomes one space but its own leading or trailing
space is kept (a snippet such as ``' Kommentieren'`` still needs a word boundary before it). No output
(``None``) counts as the empty text.

Reported per configuration: pages, "with" snippets and the share found, "without" snippets and the share
absent, the mean of the two shares, pages with an empty output, CPU seconds of the extraction calls
(``time.process_time``, median over ``--reps``, after one warm-up page per configuration) and pages per CPU
second. The JSON also lists every failed snippet per configuration (page, test line, kind) and every
snippet where ``dataclean_trafilatura`` and ``trafilatura_no_comments`` disagree; ``--show-failures``
prints the snippets' text.
"""
from __future__ import annotations

import argparse
import ast
import datetime as _dt
import hashlib
import json
import logging
import os
import re
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
sys.path.insert(0, str(HERE))

from bench_foundation import _machine  # noqa: E402  (same folder)

SPEC = "trafilatura==1.0.0"
SDIST_NAME = "trafilatura-1.0.0.tar.gz"
SDIST_SHA256 = "10222e9475363091d38d4aa92349974a23363e8a98692b5f902d60bba3e53383"
TESTS_PREFIX = "trafilatura-1.0.0/tests/"
DEFAULT_CACHE = Path.home() / ".cache" / "dataclean" / "bench"
DEFAULT_OUT = REPO / "benchmarks" / "results" / "extract_eval.json"
BASELINE = "trafilatura_no_comments"
CANDIDATE = "dataclean_trafilatura"
#: the same comparison with comments kept: dataclean's extractor against trafilatura's own defaults
PAIRS = ((BASELINE, CANDIDATE), ("trafilatura", "dataclean_trafilatura_comments"))

CONFIGS = {
    "trafilatura": "trafilatura.extract(html)",
    "trafilatura_no_comments": "trafilatura.extract(html, include_comments=False)",
    "dataclean_trafilatura": 'Extractor("trafilatura").extract(html)',
    "dataclean_trafilatura_comments": 'Extractor("trafilatura", keep=KEEP_KINDS).extract(html)',
    "dataclean_trafilatura_precision": 'Extractor("trafilatura", favor="precision").extract(html)',
    "dataclean_resiliparse": 'Extractor("resiliparse").extract(html)',
}

_WS = re.compile(r"\s+")


class DataError(Exception):
    pass


# ---------------------------------------------------------------------------------------------------------
# data
# ---------------------------------------------------------------------------------------------------------

def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def fetch_sdist(cache: Path) -> Path:
    """The trafilatura 1.0.0 sdist in ``cache``, pip-downloaded from PyPI the first time."""
    target = cache / SDIST_NAME
    if not target.exists():
        cache.mkdir(parents=True, exist_ok=True)
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:", "-q",
                        SPEC, "-d", str(cache)], check=True)
        if not target.exists():
            raise DataError(f"pip download did not produce {target}")
    return target


def decode_page(raw: bytes) -> tuple[str | bytes, str]:
    """Like ``load_mock_page``: UTF-8, else charset-normalizer's best guess, else the bytes themselves;
    with the encoding used (``bytes`` for none)."""
    try:
        return raw.decode("utf-8"), "utf-8"
    except UnicodeDecodeError:
        pass
    from charset_normalizer import from_bytes

    best = from_bytes(raw).best()
    if best is None or best.encoding is None:
        return raw, "bytes"
    try:
        return raw.decode(best.encoding), best.encoding
    except (UnicodeDecodeError, LookupError):
        return raw, "bytes"


def _is_result(node: ast.AST) -> bool:
    return isinstance(node, ast.Name) and node.id == "result"


def _compares(test: ast.AST, out: list, ignored: list) -> None:
    """``'s' in result`` / ``'s' not in result`` comparisons of an assert's test, following ``and``."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        for value in test.values:
            _compares(value, out, ignored)
        return
    if (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], (ast.In, ast.NotIn))
            and isinstance(test.left, ast.Constant) and isinstance(test.left.value, str)
            and _is_result(test.comparators[0])):
        out.append((test.left.value, "with" if isinstance(test.ops[0], ast.In) else "without", test.lineno))
    else:
        ignored.append(test.lineno)


def _mentions(node: ast.AST, name: str) -> bool:
    return any(isinstance(n, ast.Name) and n.id == name for n in ast.walk(node))


def parse_tests(source: str) -> tuple[dict[str, str], list[dict], dict]:
    """(MOCK_PAGES, snippets as ``{url, snippet, kind, line}``, parse counts) from realworld_tests.py."""
    tree = ast.parse(source)
    mock_pages: dict[str, str] = {}
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "MOCK_PAGES"
                                                 for t in node.targets)):
            mock_pages = ast.literal_eval(node.value)
    if not mock_pages:
        raise DataError("realworld_tests.py: no MOCK_PAGES dict")
    snippets: list[dict] = []
    seen: set[tuple] = set()
    counts = {"functions": 0, "load_mock_page_calls": 0, "asserts": 0, "comparisons": 0, "duplicates": 0,
              "ignored_comparisons": 0, "asserts_without_url": 0, "xml_branches_skipped": 0}

    def walk(stmts: list[ast.stmt], state: dict) -> None:
        for st in stmts:
            if (isinstance(st, ast.Assign) and len(st.targets) == 1 and _is_result(st.targets[0])
                    and isinstance(st.value, ast.Call) and isinstance(st.value.func, ast.Name)
                    and st.value.func.id == "load_mock_page"):
                arg = st.value.args[0] if st.value.args else None
                state["url"] = arg.value if isinstance(arg, ast.Constant) else None
                counts["load_mock_page_calls"] += 1
            elif isinstance(st, ast.Assert):
                counts["asserts"] += 1
                found: list = []
                ignored: list = []
                _compares(st.test, found, ignored)
                counts["ignored_comparisons"] += len(ignored)
                if state["url"] is None:
                    counts["asserts_without_url"] += 1
                    continue
                for text, kind, line in found:
                    counts["comparisons"] += 1
                    key = (state["url"], text, kind)
                    if key in seen:
                        counts["duplicates"] += 1
                        continue
                    seen.add(key)
                    snippets.append({"n": len(snippets), "url": state["url"], "snippet": text, "kind": kind,
                                     "line": line})
            elif isinstance(st, ast.If):
                if _mentions(st.test, "xmloutput"):
                    code = compile(ast.Expression(st.test), "<if>", "eval")
                    text_branch = bool(eval(code, {"__builtins__": {}}, {"xmloutput": False}))  # noqa: S307
                    counts["xml_branches_skipped"] += bool(st.orelse if text_branch else st.body)
                    walk(st.body if text_branch else st.orelse, state)
                else:
                    walk(st.body, state)
                    walk(st.orelse, state)
            elif isinstance(st, (ast.For, ast.While, ast.With, ast.Try)):
                for field in ("body", "orelse", "finalbody"):
                    walk(getattr(st, field, []) or [], state)
                for handler in getattr(st, "handlers", []):
                    walk(handler.body, state)

    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            counts["functions"] += 1
            walk(node.body, {"url": None})
    unknown = sorted({s["url"] for s in snippets} - set(mock_pages))
    if unknown:
        raise DataError(f"realworld_tests.py: URLs not in MOCK_PAGES: {unknown}")
    return mock_pages, snippets, counts


def load(sdist: Path) -> tuple[dict, list[dict], dict, dict]:
    """(pages {url: html}, snippets, parse counts, source info) from the sdist tarball, in memory."""
    with tarfile.open(sdist, "r:gz") as tar:
        members = {m.name: m for m in tar.getmembers() if m.isfile()}

        def read(name: str) -> bytes:
            if name not in members:
                raise DataError(f"{sdist}: no {name}")
            return tar.extractfile(members[name]).read()

        mock_pages, snippets, counts = parse_tests(read(TESTS_PREFIX + "realworld_tests.py").decode("utf-8"))
        cache_files = [n for n in members if n.startswith(TESTS_PREFIX + "cache/") and n.endswith(".html")]
        pages, not_utf8 = {}, {}
        for url in dict.fromkeys(s["url"] for s in snippets):
            pages[url], encoding = decode_page(read(TESTS_PREFIX + "cache/" + mock_pages[url]))
            if encoding != "utf-8":
                not_utf8[mock_pages[url]] = encoding
    info = {"spec": SPEC, "sdist": SDIST_NAME, "sha256": SDIST_SHA256, "cache_html_files": len(cache_files),
            "mock_pages": len(mock_pages), "pages_with_snippets": len(pages),
            "pages_not_utf8": not_utf8, "parse": counts,
            "snippets": {"with": sum(s["kind"] == "with" for s in snippets),
                         "without": sum(s["kind"] == "without" for s in snippets)}}
    return pages, snippets, mock_pages, info


# ---------------------------------------------------------------------------------------------------------
# evaluation
# ---------------------------------------------------------------------------------------------------------

def make_extractors(names: list[str]) -> dict:
    """name -> callable(html) -> str | None."""
    import trafilatura

    from dataclean.text.html_extract import KEEP_KINDS, Extractor

    def direct(**kw):
        return lambda html: trafilatura.extract(html, **kw)

    factories = {
        "trafilatura": lambda: direct(),
        "trafilatura_no_comments": lambda: direct(include_comments=False),
        "dataclean_trafilatura": lambda: Extractor("trafilatura").extract,
        "dataclean_trafilatura_comments": lambda: Extractor("trafilatura", keep=KEEP_KINDS).extract,
        "dataclean_trafilatura_precision": lambda: Extractor("trafilatura", favor="precision").extract,
        "dataclean_resiliparse": lambda: Extractor("resiliparse").extract,
    }
    return {name: factories[name]() for name in names}


def norm_text(text: str | None) -> str:
    return " " + _WS.sub(" ", text or "").strip() + " "


def norm_snippet(snippet: str) -> str:
    return _WS.sub(" ", snippet)


def run(pages: dict, extractors: dict, reps: int) -> tuple[dict, dict]:
    """({config: {url: normalized text}}, {config: [cpu seconds per rep]}), configs alternating per rep."""
    outputs: dict[str, dict] = {}
    cpu: dict[str, list] = {name: [] for name in extractors}
    first = next(iter(pages.values()))
    for fn in extractors.values():
        fn(first)  # warm-up: lazy imports and caches
    for rep in range(reps):
        for name, fn in extractors.items():
            texts = {}
            t0 = time.process_time()
            for url, html in pages.items():
                texts[url] = fn(html)
            cpu[name].append(time.process_time() - t0)
            if rep == 0:
                outputs[name] = {url: norm_text(t) for url, t in texts.items()}
    return outputs, cpu


def score(outputs: dict, cpu: dict, snippets: list[dict], mock_pages: dict) -> tuple[dict, dict]:
    """(table {config: metrics}, failures {config: [refs]})."""
    table, failures = {}, {}
    for name, texts in outputs.items():
        ok = {"with": 0, "without": 0}
        n = {"with": 0, "without": 0}
        fails = []
        for s in snippets:
            present = norm_snippet(s["snippet"]) in texts[s["url"]]
            good = present if s["kind"] == "with" else not present
            n[s["kind"]] += 1
            ok[s["kind"]] += good
            if not good:
                fails.append({"n": s["n"], "page": mock_pages[s["url"]], "line": s["line"], "kind": s["kind"]})
        share_with = ok["with"] / n["with"] if n["with"] else None
        share_without = ok["without"] / n["without"] if n["without"] else None
        cpu_s = statistics.median(cpu[name])
        table[name] = {
            "call": CONFIGS[name], "pages": len(texts), "empty_pages": sum(t.strip() == "" for t in texts.values()),
            "with": n["with"], "with_found": ok["with"], "with_share": share_with,
            "without": n["without"], "without_absent": ok["without"], "without_share": share_without,
            "mean": (share_with + share_without) / 2 if share_with is not None and share_without is not None
            else None,
            "cpu_s": round(cpu_s, 3), "cpu_s_reps": [round(x, 3) for x in cpu[name]],
            "pages_per_s": round(len(texts) / cpu_s, 2) if cpu_s else None,
        }
        failures[name] = fails
    return table, failures


def differences(outputs: dict, snippets: list[dict], mock_pages: dict, a: str, b: str) -> tuple[list, int]:
    """Snippets where configs ``a`` and ``b`` disagree, and the number of pages whose texts differ at all."""
    if a not in outputs or b not in outputs:
        return [], 0
    diffs = []
    for s in snippets:
        pa_ = norm_snippet(s["snippet"]) in outputs[a][s["url"]]
        pb_ = norm_snippet(s["snippet"]) in outputs[b][s["url"]]
        if pa_ != pb_:
            diffs.append({"n": s["n"], "page": mock_pages[s["url"]], "url": s["url"], "line": s["line"],
                          "kind": s["kind"],
                          f"present_{a}": pa_, f"present_{b}": pb_})
    pages_differ = sum(outputs[a][u] != outputs[b][u] for u in outputs[a])
    return diffs, pages_differ


# ---------------------------------------------------------------------------------------------------------
# output
# ---------------------------------------------------------------------------------------------------------

def fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def print_table(table: dict, markdown: bool) -> None:
    head = ["configuration", "pages", "with", "found", "without", "absent", "mean", "empty", "CPU s", "pages/s"]
    rows = [[name, r["pages"], r["with"], fmt(r["with_share"]), r["without"], fmt(r["without_share"]),
             fmt(r["mean"]), r["empty_pages"], f"{r['cpu_s']:.2f}", f"{r['pages_per_s']:.1f}"]
            for name, r in table.items()]
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "|".join("---" if i == 0 else "---:" for i in range(len(head))) + "|")
        for r in rows:
            print("| " + " | ".join(str(x) for x in r) + " |")
    else:
        w = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
        for r in [head] + rows:
            print("  ".join(str(x).ljust(n) if i == 0 else str(x).rjust(n) for i, (x, n) in enumerate(zip(r, w))))


def show_failures(failures: dict, diffs: list, snippets: list[dict]) -> None:
    text = [s["snippet"] for s in snippets]
    for name, fails in failures.items():
        print(f"\n{name}: {len(fails)} failed snippets")
        for f in fails:
            print(f"  {f['kind']:<7} {f['page']} (line {f['line']}): {text[f['n']]!r}")
    print(f"\n{CANDIDATE} vs {BASELINE}: {len(diffs)} snippets differ")
    for d in diffs:
        print(f"  {d['kind']:<7} {d['page']} (line {d['line']}): {text[d['n']]!r} "
              f"{BASELINE}={d['present_' + BASELINE]} {CANDIDATE}={d['present_' + CANDIDATE]}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default=str(DEFAULT_OUT))
    ap.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where the sdist is downloaded once")
    ap.add_argument("--sdist", type=Path, help=f"use this {SDIST_NAME} instead of downloading")
    ap.add_argument("--configs", nargs="+", choices=list(CONFIGS), default=list(CONFIGS))
    ap.add_argument("--reps", type=int, default=1, help="timing repetitions (median CPU); outputs from the first")
    ap.add_argument("--markdown", action="store_true", help="print the table as markdown")
    ap.add_argument("--show-failures", action="store_true", help="print failed and differing snippets' text")
    a = ap.parse_args(argv)
    logging.getLogger("trafilatura").setLevel(logging.ERROR)
    try:
        sdist = a.sdist or fetch_sdist(a.cache)
        digest = sha256(sdist)
        if digest != SDIST_SHA256:
            raise DataError(f"{sdist}: sha256 {digest}, expected {SDIST_SHA256}")
        pages, snippets, mock_pages, source = load(sdist)
    except (DataError, OSError, subprocess.CalledProcessError, tarfile.TarError) as e:
        print(f"eval_extract: error: {e}", file=sys.stderr)
        return 1
    load_at_start = list(os.getloadavg())
    outputs, cpu = run(pages, make_extractors(a.configs), max(1, a.reps))
    table, failures = score(outputs, cpu, snippets, mock_pages)
    diffs, pages_differ = differences(outputs, snippets, mock_pages, BASELINE, CANDIDATE)
    pairs = []
    for a_name, b_name in PAIRS:
        if a_name in outputs and b_name in outputs:
            d, p = differences(outputs, snippets, mock_pages, a_name, b_name)
            pairs.append({"a": a_name, "b": b_name, "pages_with_different_text": p, "snippets": d})
    print_table(table, a.markdown)
    if a.show_failures:
        show_failures(failures, diffs, snippets)
    from importlib.metadata import version

    machine = _machine()
    machine["loadavg_1_5_15_at_start"] = load_at_start
    for pkg in ("trafilatura", "resiliparse", "charset-normalizer", "lxml"):
        try:
            machine[pkg] = version(pkg)
        except Exception:  # noqa: BLE001
            machine[pkg] = None
    out = {
        "benchmark": "eval_extract", "date": _dt.datetime.now().isoformat(timespec="seconds"),
        "command": "python benchmarks/eval_extract.py " + " ".join(sys.argv[1:] if argv is None else argv),
        "machine": machine, "source": source, "configs": CONFIGS,
        "normalization": "text: runs of \\s+ -> one space, stripped, padded with one space each end; "
                         "snippet: runs of \\s+ -> one space (its own edge spaces kept); substring test",
        "url_passed": False, "reps": max(1, a.reps), "table": table,
        "differences": {"a": BASELINE, "b": CANDIDATE, "pages_with_different_text": pages_differ,
                        "snippets": diffs},
        "pairs": pairs,
        "failures": failures,
    }
    Path(a.output).parent.mkdir(parents=True, exist_ok=True)
    Path(a.output).write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"\n{source['pages_with_snippets']} pages ({source['cache_html_files']} in tests/cache), "
          f"{source['snippets']['with']} with + {source['snippets']['without']} without snippets; "
          + "; ".join(f"{p['b']} vs {p['a']}: {len(p['snippets'])} snippets, {p['pages_with_different_text']} "
                      "page texts differ" for p in pairs) + f" -> {a.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
