"""Precision and recall of the PII detector (``dataclean.text.pii``) per kind and language, on the labelled PII set.

    python benchmarks/eval_pii.py [--markdown] [--show-errors] [-o benchmarks/results/eval_pii.json]

Two parts (``benchmarks/labelled/pii/``, described in ``benchmarks/labelled/README.md``):

* ``real``: lines of real text (SpamAssassin mail, web pages, manuals, Weibo, reviews, zh-cc-dev pages)
  labelled by reading; rebuilt from ``../shared`` by ``build_pii_real.py``;
* ``constructed``: synthetic real-shaped documents (``pii-constructed.jsonl``) for the kinds the corpus
  lacks, with many lookalikes.

Every text goes through ``pii.find(text, pii.KINDS)`` (public IPs only, the default). Matching, per text and
kind: a prediction is a true positive when it has the labelled span's kind and either equals the labelled
span or overlaps it by at least half of the labelled span's length; each labelled span and each prediction
is used once (largest overlaps first). Unmatched predictions are false positives, unmatched labelled spans
false negatives; a prediction of the wrong kind is one of each. ``exact`` counts the true positives whose
span is identical to the label.

The JSON holds the counts and every error as a reference (part, id, offsets, kind); real-text errors carry
no text, so the file can be committed. ``--show-errors`` prints the errors with their context.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
LABELLED = REPO / "benchmarks" / "labelled" / "pii"
sys.path.insert(0, str(LABELLED))

from dataclean.text import pii  # noqa: E402

import build_pii_real  # noqa: E402

CONSTRUCTED = LABELLED / "pii-constructed.jsonl"
DEFAULT_OUT = REPO / "benchmarks" / "results" / "eval_pii.json"
MIN_OVERLAP = 0.5


def load(shared: Path) -> list[dict]:
    """Both parts as ``{part, id, lang, text, spans, note}`` records."""
    docs = []
    for r in build_pii_real.build(shared):
        docs.append({"part": "real", "id": r["id"], "lang": r["lang"], "text": r["text"], "spans": r["spans"],
                     "note": r["shape"], "lookalikes": []})
    with CONSTRUCTED.open(encoding="utf-8") as f:
        for line in f:
            r = json.loads(line)
            docs.append({"part": "constructed", "id": r["id"], "lang": r["lang"], "text": r["text"],
                         "spans": r["spans"], "note": r["doc"], "formats": r["formats"],
                         "lookalikes": r["lookalikes"]})
    return docs


def match(gold: list[tuple[int, int]], pred: list[tuple[int, int]]) -> tuple[list, list, list]:
    """(pairs, unmatched gold, unmatched pred) under the overlap rule."""
    cand = []
    for i, (a, b) in enumerate(gold):
        for j, (c, d) in enumerate(pred):
            ov = min(b, d) - max(a, c)
            if (a, b) == (c, d) or ov >= MIN_OVERLAP * (b - a):
                cand.append((-ov, i, j))
    cand.sort()
    used_g, used_p, pairs = set(), set(), []
    for _, i, j in cand:
        if i not in used_g and j not in used_p:
            used_g.add(i)
            used_p.add(j)
            pairs.append((i, j))
    return pairs, [i for i in range(len(gold)) if i not in used_g], [j for j in range(len(pred)) if j not in used_p]


def evaluate(docs: list[dict]) -> tuple[dict, list[dict]]:
    counts: dict[tuple, dict] = defaultdict(lambda: {"gold": 0, "tp": 0, "fp": 0, "fn": 0, "exact": 0})
    errors = []
    for doc in docs:
        found = pii.find(doc["text"], pii.KINDS)
        for kind in pii.KINDS:
            gold = [(a, b) for a, b, k in doc["spans"] if k == kind]
            pred = [(m.start, m.end) for m in found if m.kind == kind]
            if not gold and not pred:
                continue
            pairs, fn, fp = match(gold, pred)
            exact = sum(gold[i] == pred[j] for i, j in pairs)
            for part in (doc["part"], "all"):
                for lang in (doc["lang"], "all"):
                    c = counts[(part, lang, kind)]
                    c["gold"] += len(gold)
                    c["tp"] += len(pairs)
                    c["fp"] += len(fp)
                    c["fn"] += len(fn)
                    c["exact"] += exact
            for kind_err, idx, spans in (("fn", fn, gold), ("fp", fp, pred)):
                for i in idx:
                    a, b = spans[i]
                    errors.append({"part": doc["part"], "id": doc["id"], "lang": doc["lang"], "kind": kind,
                                   "error": kind_err, "start": a, "end": b, "note": doc["note"],
                                   "lookalike": lookalike_at(doc, a, b), "format": format_at(doc, a, b)})
    table = {}
    for (part, lang, kind), c in sorted(counts.items()):
        p = c["tp"] / (c["tp"] + c["fp"]) if c["tp"] + c["fp"] else None
        r = c["tp"] / c["gold"] if c["gold"] else None
        table.setdefault(part, {}).setdefault(lang, {})[kind] = {**c, "precision": p, "recall": r}
    return table, errors


def lookalike_at(doc: dict, a: int, b: int) -> str | None:
    tags = [t for s, e, t in doc["lookalikes"] if s < b and a < e]
    return tags[0] if tags else None


def format_at(doc: dict, a: int, b: int) -> str | None:
    for (s, e, _), f in zip(doc["spans"], doc.get("formats", [])):
        if s < b and a < e:
            return f
    return None


def fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def print_table(table: dict, markdown: bool) -> None:
    head = ["part", "lang", "kind", "labelled", "TP", "FP", "FN", "exact", "precision", "recall"]
    rows = []
    for part in ("all", "real", "constructed"):
        for lang in ("all", "en", "zh"):
            for kind in pii.KINDS:
                c = table.get(part, {}).get(lang, {}).get(kind)
                if c:
                    rows.append([part, lang, kind, c["gold"], c["tp"], c["fp"], c["fn"], c["exact"],
                                 fmt(c["precision"]), fmt(c["recall"])])
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "|".join("---" if i < 3 else "---:" for i in range(len(head))) + "|")
        for r in rows:
            print("| " + " | ".join(str(x) for x in r) + " |")
    else:
        w = [max(len(str(x)) for x in col) for col in zip(head, *rows)]
        for r in [head] + rows:
            print("  ".join(str(x).ljust(n) if i < 3 else str(x).rjust(n) for i, (x, n) in enumerate(zip(r, w))))


def show_errors(errors: list[dict], docs: dict[str, dict]) -> None:
    for e in sorted(errors, key=lambda e: (e["kind"], e["error"], e["part"], e["id"])):
        doc = docs[(e["part"], e["id"])]
        t = doc["text"]
        a, b = e["start"], e["end"]
        ctx = (t[max(0, a - 40):a] + "[[" + t[a:b] + "]]" + t[b:b + 40]).replace("\n", "⏎")
        extra = e["lookalike"] or e["format"] or ""
        print(f"{e['error'].upper()} {e['kind']:<10} {e['part']:<11} {e['lang']} {e['id']}  ({e['note']}"
              f"{'; ' + extra if extra else ''})\n    {ctx}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default=str(DEFAULT_OUT))
    ap.add_argument("--shared", default=str(build_pii_real.DEFAULT_SHARED))
    ap.add_argument("--markdown", action="store_true", help="print the table as markdown")
    ap.add_argument("--show-errors", action="store_true", help="print every FP and FN with its context")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    try:
        docs = load(Path(a.shared))
    except build_pii_real.BuildError as e:
        print(f"eval_pii: error: {e}", file=sys.stderr)
        return 1
    table, errors = evaluate(docs)
    seconds = time.perf_counter() - t0
    print_table(table, a.markdown)
    if a.show_errors:
        print()
        show_errors(errors, {(d["part"], d["id"]): d for d in docs})
    n = {p: sum(d["part"] == p for d in docs) for p in ("real", "constructed")}
    out = {"texts": n, "match_rule": f"same kind and (exact span or overlap >= {MIN_OVERLAP} of the labelled span)",
           "kinds": list(pii.KINDS), "public_ip_only": True, "seconds": round(seconds, 2), "table": table,
           "errors": errors}
    Path(a.output).parent.mkdir(parents=True, exist_ok=True)
    Path(a.output).write_text(json.dumps(out, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    print(f"\n{n['real']} real lines, {n['constructed']} constructed documents, {len(errors)} errors, "
          f"{seconds:.1f} s -> {a.output}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
