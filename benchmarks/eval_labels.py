"""The default recipe against the labelled development sets, English and Chinese: ``dataclean eval`` on each.

    python benchmarks/eval_labels.py [--config FILE] [-o benchmarks/results/eval_labels.json] [--markdown]

* ``en``: ``../shared/labelled/dclm-dev.jsonl``, 261 English web pages with DCLM's human quality labels
  (1 = good); read from the shared folder, never copied here.
* ``zh``: ``benchmarks/labelled/zh-web-dev.jsonl``, 324 real Chinese web documents labelled by reading
  (``benchmarks/labelled/README.md``); built first with ``build_zh_dev.py`` when it is missing. Its sources
  carry users' own names (``cc-zh``, ``weibo``, ``reviews_zh`` ...), all of kind web by default.
* ``zh-pages``: the documents of the Chinese set with at least 50 tokenizer words (Gopher's minimum): the
  Weibo posts and reviews shorter than that are removed by the length policy whatever their label, and this
  subset shows how the other rules judge page-length text.

Prints, per set, the overall figures and each rule's removals with how many are labelled bad; ``--markdown``
prints the README's tables. The JSON holds the full ``dataclean eval`` reports (misjudged ids included).
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dataclean.evaluation import evaluate, read_labels  # noqa: E402
from dataclean.text import words_batch  # noqa: E402

EN = REPO.parent / "shared" / "labelled" / "dclm-dev.jsonl"
ZH = REPO / "benchmarks" / "labelled" / "zh-web-dev.jsonl"


def sets() -> dict[str, pa.Table]:
    if not ZH.exists():
        subprocess.run([sys.executable, str(REPO / "benchmarks" / "labelled" / "build_zh_dev.py")], check=True)
    zh = read_labels([str(ZH)])
    words = pc.list_value_length(words_batch(zh.column("text").combine_chunks())).to_numpy(zero_copy_only=False)
    return {"en": read_labels([str(EN)]), "zh": zh, "zh-pages": zh.filter(pa.array(words >= 50))}


def fmt(v, digits=3):
    return "-" if v is None else f"{v:.{digits}f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--config", default=None)
    ap.add_argument("-o", "--output", default=str(REPO / "benchmarks" / "results" / "eval_labels.json"))
    ap.add_argument("--markdown", action="store_true")
    args = ap.parse_args()
    reports = {}
    for name, table in sets().items():
        rep = evaluate(table, args.config)
        reports[name] = rep
        o = rep["overall"]
        print(f"{name:<9} docs {o['docs']:>4} (good {o['good']}, bad {o['bad']}): removed {o['removed']}, "
              f"precision {fmt(o['precision'])}, recall {fmt(o['recall'])}, good kept {fmt(o['good_retention'])}, "
              f"quality_score AUC {fmt(o['quality_auc'])}")
        for r in rep["rules"]:
            print(f"    {r['stage'] + ' / ' + r['rule']:<48} {r['removed']:>4} removed, {r['removed_bad']:>4} bad")
    os.makedirs(os.path.dirname(args.output), exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as fh:
        json.dump({"config": args.config or "rules/default.yaml", "reports": reports}, fh, indent=1,
                  ensure_ascii=False)
    print(f"wrote {args.output}")
    if args.markdown:
        print("\n| set | docs | good | bad | removed | precision | recall | good kept | quality_score AUC |")
        print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for name, rep in reports.items():
            o = rep["overall"]
            print(f"| {name} | {o['docs']} | {o['good']} | {o['bad']} | {o['removed']} | {fmt(o['precision'])} | "
                  f"{fmt(o['recall'])} | {fmt(o['good_retention'])} | {fmt(o['quality_auc'])} |")
        for name, rep in reports.items():
            print(f"\n{name}:\n\n| stage / rule | removed | labelled bad | precision |\n|---|---:|---:|---:|")
            for r in rep["rules"]:
                print(f"| `{r['stage']}` / `{r['rule']}` | {r['removed']} | {r['removed_bad']} | "
                      f"{fmt(r['precision'], 2)} |")


if __name__ == "__main__":
    main()
