"""datatrove's default filters against the labelled development sets that ``eval_labels.py`` measures dataclean on.

    DT_LID_MODEL=PATH/lid.176.ftz /work/dtvenv/bin/python benchmarks/eval_labels_datatrove.py \
        [-o benchmarks/results/eval_labels_datatrove.json]

Runs in the datatrove environment (``benchmarks/setup_datatrove.sh VENV_DIR``, datatrove 0.10.1), never in
dataclean's. ``DT_LID_MODEL`` is the lid.176.ftz file dataclean's langid stage uses; when it is unset the path
is asked of the main python (``python -c "from dataclean.stages.langid import bundled_model_resource; ..."``,
``MAIN_PYTHON`` selects that interpreter, default ``python``).

The filters are those of stage A of ``../shared/bench/dt_full.py``, in its order and with datatrove's default
parameters: LanguageFilter (lid.176.ftz, languages=None, threshold 0.4) -> GopherQualityFilter ->
GopherRepetitionFilter -> FineWebQualityFilter -> C4QualityFilter. Every document is judged as web (dt_full.py
skips only non-web sources, and none of these documents is code). The filters are called in-process on
``datatrove.data.Document`` objects (``filter(doc)``: True keeps, False or (False, reason) drops); a document
stops at the first filter that drops it, as in a pipeline, and that filter and reason are recorded.

Sets, as in ``eval_labels.py``:

* ``en``: ``../shared/labelled/dclm-dev.jsonl`` (label 1 = good, 0 = bad).
* ``zh``: ``benchmarks/labelled/zh-web-dev.jsonl`` (label keep = good, remove = bad); when missing, build it
  first with ``python benchmarks/labelled/build_zh_dev.py`` (main python).
* ``zh-pages``: the ``zh`` documents with at least 50 words, counted here as Han characters plus the
  whitespace-separated tokens of the rest of the text (eval_labels.py uses dataclean's tokenizer words).

Figures per set: documents, good, bad, removed, precision (removed & bad / removed), recall (removed & bad /
bad), good retention (kept & good / good), and per filter / reason: removals and how many are labelled bad.
The JSON also lists every removed document (id, label, filter, reason) and the timings.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from importlib.metadata import version
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
EN = REPO.parent / "shared" / "labelled" / "dclm-dev.jsonl"
ZH = REPO / "benchmarks" / "labelled" / "zh-web-dev.jsonl"
DEFAULT_OUT = REPO / "benchmarks" / "results" / "eval_labels_datatrove.json"
MAIN_PYTHON = os.environ.get("MAIN_PYTHON", "python")

GOOD = {"1", "keep", "good", "true"}
BAD = {"0", "remove", "bad", "false"}
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f]")


def lid_model() -> str:
    path = os.environ.get("DT_LID_MODEL")
    if not path:
        path = subprocess.run(
            [MAIN_PYTHON, "-c", "from dataclean.stages.langid import bundled_model_resource as b; print(b())"],
            check=True, capture_output=True, text=True, cwd=REPO).stdout.strip()
        os.environ["DT_LID_MODEL"] = path
    if not os.path.isfile(path):
        sys.exit(f"eval_labels_datatrove: lid.176.ftz not found: {path} (set DT_LID_MODEL)")
    return path


def words(text: str) -> int:
    """Han characters plus the whitespace-separated tokens of the non-Han rest."""
    return len(HAN.findall(text)) + len(HAN.sub(" ", text).split())


def read(path: Path) -> list[dict]:
    docs = []
    with path.open(encoding="utf-8") as fh:
        for i, line in enumerate(fh):
            if not line.strip():
                continue
            r = json.loads(line)
            lab = str(r["label"]).strip().lower()
            if lab not in GOOD | BAD:
                sys.exit(f"eval_labels_datatrove: {path}:{i + 1}: unknown label {r['label']!r}")
            docs.append({"id": str(r.get("id", f"{path.name}#{i}")), "text": str(r["text"]), "good": lab in GOOD})
    return docs


def sets() -> dict[str, list[dict]]:
    if not ZH.exists():
        subprocess.run([MAIN_PYTHON, str(REPO / "benchmarks" / "labelled" / "build_zh_dev.py")], check=True)
    zh = read(ZH)
    return {"en": read(EN), "zh": zh, "zh-pages": [d for d in zh if words(d["text"]) >= 50]}


def make_filters(ftz: str) -> list[tuple[str, object]]:
    from datatrove.pipeline.filters import (C4QualityFilter, FineWebQualityFilter, GopherQualityFilter,
                                            GopherRepetitionFilter, LanguageFilter)
    from datatrove.utils import lid as _lid

    def _model(self):  # no download: the lid.176.ftz file dataclean's langid stage uses (as dt_full.py)
        if self._model is None:
            from fasttext.FastText import _FastText
            self._model = _FastText(ftz)
        return self._model

    _lid.FastTextLID.model = property(_model)
    return [("language", LanguageFilter(languages=None, language_threshold=0.4)),
            ("gopher_quality", GopherQualityFilter()),
            ("gopher_repetition", GopherRepetitionFilter()),
            ("fineweb_quality", FineWebQualityFilter()),
            ("c4_quality", C4QualityFilter())]


def judge(docs: list[dict], filters) -> tuple[list[dict], float]:
    """Each document's fate: None (kept) or (filter, reason) of the first filter that drops it."""
    from datatrove.data import Document

    t0 = time.perf_counter()
    out = []
    for d in docs:
        doc = Document(text=d["text"], id=d["id"], metadata={"source": "web"})
        fate = None
        for name, f in filters:
            res = f.filter(doc)
            keep, reason = (res[0], res[1]) if isinstance(res, tuple) else (bool(res), None)
            if not keep:
                if name == "language" and reason is None:
                    reason = f"score<=0.4 ({doc.metadata.get('language')})"
                fate = (name, reason or "-")
                break
        out.append({**d, "fate": fate})
    return out, time.perf_counter() - t0


def ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def report(judged: list[dict], order: list[str]) -> dict:
    good = sum(d["good"] for d in judged)
    bad = len(judged) - good
    removed = [d for d in judged if d["fate"]]
    tp = sum(not d["good"] for d in removed)
    rules: dict[tuple[str, str], dict] = {}
    for d in removed:
        r = rules.setdefault(d["fate"], {"filter": d["fate"][0], "reason": d["fate"][1], "removed": 0,
                                         "removed_bad": 0})
        r["removed"] += 1
        r["removed_bad"] += not d["good"]
    for r in rules.values():
        r["precision"] = ratio(r["removed_bad"], r["removed"])
    return {"overall": {"docs": len(judged), "good": good, "bad": bad, "removed": len(removed), "removed_bad": tp,
                        "removed_good": len(removed) - tp, "kept_bad": bad - tp,
                        "precision": ratio(tp, len(removed)), "recall": ratio(tp, bad),
                        "good_retention": ratio(good - (len(removed) - tp), good)},
            "rules": sorted(rules.values(), key=lambda r: (order.index(r["filter"]), -r["removed"], r["reason"])),
            "removed_docs": [{"id": d["id"], "label": "good" if d["good"] else "bad", "filter": d["fate"][0],
                              "reason": d["fate"][1]} for d in removed]}


def fmt(v, digits=3):
    return "-" if v is None else f"{v:.{digits}f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-o", "--output", default=str(DEFAULT_OUT))
    args = ap.parse_args()
    t_start = time.perf_counter()
    ftz = lid_model()
    data = sets()
    t0 = time.perf_counter()
    filters = make_filters(ftz)
    order = [n for n, _ in filters]
    # zh-pages is a subset of zh: judge zh once and take the subset (the filters are deterministic).
    judged_en, t_en = judge(data["en"], filters)
    judged_zh, t_zh = judge(data["zh"], filters)
    pages = {d["id"] for d in data["zh-pages"]}
    judged = {"en": judged_en, "zh": judged_zh, "zh-pages": [d for d in judged_zh if d["id"] in pages]}
    t_filters = time.perf_counter() - t0
    reports = {name: report(j, order) for name, j in judged.items()}
    for name, rep in reports.items():
        o = rep["overall"]
        print(f"{name:<9} docs {o['docs']:>4} (good {o['good']}, bad {o['bad']}): removed {o['removed']}, "
              f"precision {fmt(o['precision'])}, recall {fmt(o['recall'])}, good kept {fmt(o['good_retention'])}")
        for r in rep["rules"]:
            print(f"    {r['filter'] + ' / ' + r['reason']:<48} {r['removed']:>4} removed, {r['removed_bad']:>4} bad")
    total = time.perf_counter() - t_start
    timing = {"filters_s": round(t_filters, 3), "judge_en_s": round(t_en, 3), "judge_zh_s": round(t_zh, 3),
              "total_s": round(total, 3)}
    print(f"datatrove filters: setup+judging {t_filters:.2f} s (en {t_en:.2f} s, zh {t_zh:.2f} s; first use "
          f"loads the models), script total {total:.2f} s")
    os.makedirs(os.path.dirname(os.path.abspath(args.output)), exist_ok=True)
    with open(args.output, "w", encoding="utf-8") as fh:
        json.dump({"datatrove": version("datatrove"), "spacy": version("spacy"), "lid_model": os.path.basename(ftz),
                   "filters": ["LanguageFilter(languages=None, language_threshold=0.4)", "GopherQualityFilter()",
                               "GopherRepetitionFilter()", "FineWebQualityFilter()", "C4QualityFilter()"],
                   "zh_pages_words": "Han characters + non-Han whitespace tokens >= 50",
                   "timing": timing, "reports": reports}, fh, indent=1, ensure_ascii=False)
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
