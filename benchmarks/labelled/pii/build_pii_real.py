"""Rebuild the real half of the PII evaluation set from the shared data and check it against its labels.

    python benchmarks/labelled/pii/build_pii_real.py [-o PATH] [--shared DIR] [--check]

``pii-real.labels.jsonl`` holds references only, never the text (the lines carry real people's
addresses and numbers, which must not be copied into the repository). One object per labelled line:

* ``id``: the document id (``corpus/bench`` parquet, or ``labelled/zh-cc-dev.jsonl`` for origin
  ``zh-cc-dev``); ``line``: the line's index in ``text.split("\\n")``;
* ``sha1``: SHA-1 of the line's UTF-8 bytes, so a changed source is caught instead of silently
  shifting the spans;
* ``spans``: ``[[start, end, kind], ...]``, character offsets within the line;
* ``lang`` (``en``/``zh``: ``zh`` when the line has two Han characters or more), ``origin``,
  ``stratum`` (the sampling stratum), ``shape`` (a short note on what the line holds).

:func:`build` joins the references with the texts and returns one record per line
(``id`` = ``"<doc id>#<line>"``, ``text``, ``spans``…). The command writes them to a git-ignored
JSONL file, or with ``--check`` only verifies them. A missing document, a changed line or a bad span is
a one-line error and exit status 1.
"""
from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent.parent
LABELS = HERE / "pii-real.labels.jsonl"
DEFAULT_OUT = HERE / "pii-real.jsonl"
DEFAULT_SHARED = REPO.parent / "shared"
KINDS = ("credential", "email", "api_key", "cn_id", "bank_card", "phone", "ip")


class BuildError(Exception):
    pass


def read_labels(path: Path = LABELS) -> list[dict]:
    if not path.is_file():
        raise BuildError(f"labels file not found: {path}")
    rows = []
    with path.open(encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if line.strip():
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise BuildError(f"{path.name} line {n}: bad JSON ({e.msg})") from None
    return rows


def read_texts(shared: Path, labels: list[dict]) -> dict[str, str]:
    """The texts of the labelled documents, by id."""
    cc = {r["id"] for r in labels if r["origin"] == "zh-cc-dev"}
    bench = sorted({r["id"] for r in labels if r["origin"] != "zh-cc-dev"})
    texts: dict[str, str] = {}
    if cc:
        p = shared / "labelled" / "zh-cc-dev.jsonl"
        if not p.is_file():
            raise BuildError(f"missing {p} (use --shared DIR)")
        with p.open(encoding="utf-8") as f:
            for line in f:
                d = json.loads(line)
                if d["id"] in cc:
                    texts[d["id"]] = d["text"]
    if bench:
        files = sorted(glob.glob(str(shared / "corpus" / "bench" / "part-*.parquet")))
        if not files:
            raise BuildError(f"no parquet files under {shared / 'corpus' / 'bench'} (use --shared DIR)")
        import pyarrow.parquet as pq

        t = pq.read_table(files, columns=["id", "text"], filters=[("id", "in", bench)])
        texts.update(zip(t.column("id").to_pylist(), t.column("text").to_pylist()))
    return texts


def build(shared: Path = DEFAULT_SHARED, labels_path: Path = LABELS) -> list[dict]:
    """The labelled lines with their text; raises :class:`BuildError` on any mismatch."""
    labels = read_labels(labels_path)
    texts = read_texts(Path(shared), labels)
    out, seen = [], set()
    for r in labels:
        key = f"{r['id']}#{r['line']}"
        if key in seen:
            raise BuildError(f"duplicate line in labels: {key}")
        seen.add(key)
        if r["id"] not in texts:
            raise BuildError(f"document not found in shared data: {r['id']} (origin {r['origin']})")
        lines = texts[r["id"]].split("\n")
        if not 0 <= r["line"] < len(lines):
            raise BuildError(f"{key}: the document has {len(lines)} lines")
        text = lines[r["line"]]
        if hashlib.sha1(text.encode("utf-8")).hexdigest() != r["sha1"]:
            raise BuildError(f"{key}: the line changed (sha1 mismatch)")
        end = 0
        for a, b, kind in sorted(r["spans"]):
            if kind not in KINDS or not (end <= a < b <= len(text)) or text[a:b] != text[a:b].strip():
                raise BuildError(f"{key}: bad span {[a, b, kind]}")
            end = b
        out.append({"id": key, "doc_id": r["id"], "line": r["line"], "lang": r["lang"], "origin": r["origin"],
                    "stratum": r["stratum"], "shape": r["shape"], "text": text, "spans": r["spans"]})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default=str(DEFAULT_OUT), help="output JSONL (default: %(default)s)")
    ap.add_argument("--shared", default=str(DEFAULT_SHARED), help="shared data directory (default: %(default)s)")
    ap.add_argument("--check", action="store_true", help="verify only, write nothing")
    a = ap.parse_args(argv)
    try:
        rows = build(Path(a.shared))
    except BuildError as e:
        print(f"build_pii_real: error: {e}", file=sys.stderr)
        return 1
    counts: dict[str, int] = {}
    for r in rows:
        for _, _, k in r["spans"]:
            counts[f"{r['lang']}/{k}"] = counts.get(f"{r['lang']}/{k}", 0) + 1
    summary = ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
    if a.check:
        print(f"ok: {len(rows)} lines, {summary}")
        return 0
    out = Path(a.output)
    tmp = out.with_name(out.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(tmp, out)
    print(f"wrote {len(rows)} lines to {out}: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
