"""The thresholds a run applied, per rule and per language, read from the run's own config (manifest.json).

The report marks them on each signal's histogram. They come from the config the run resolved, not from the
current ``rules/default.yaml``, so a report of an old run shows what that run did. When the config cannot
be rebuilt (a run from another version), the histograms are drawn without their thresholds and say so.
"""
from __future__ import annotations

import json
import numbers
from dataclasses import dataclass, field


@dataclass
class Threshold:
    """One bound of one rule: documents are removed ``compare`` (``max``: above, ``min``: below) it."""

    stage: str
    rule: str
    signal: str
    compare: str  # "max" | "min"
    param: str
    value: float | None  # None: off by default
    by_lang: dict[str, float | None] = field(default_factory=dict)  # only languages that differ; None = off
    sources: str = "all"

    def describe(self) -> str:
        op = "above" if self.compare == "max" else "below"
        base = "off" if self.value is None else f"{op} {_num(self.value)}"
        langs = group_langs(self.by_lang)
        extra = "; ".join(f"{codes}: {'off' if v is None else _num(v)}" for codes, v in langs)
        return f"{self.rule}: removed {base}" + (f" ({extra})" if extra else "")


def _num(v: float) -> str:
    return f"{v:g}"


def group_langs(by_lang: dict[str, float | None]) -> list[tuple[str, float | None]]:
    """``{"zh": .25, "ja": .25, "ko": .3}`` -> ``[("ja, zh", .25), ("ko", .3)]`` (stable order)."""
    groups: dict = {}
    for code in sorted(by_lang):
        groups.setdefault(by_lang[code], []).append(code)
    return sorted(((", ".join(codes), v) for v, codes in groups.items()), key=lambda t: t[0])


def _is_number(v) -> bool:
    return isinstance(v, numbers.Real) and not isinstance(v, bool)


def _sources(stage) -> str:
    return stage.scope()


def thresholds_from_config(cfg: dict | None) -> list[Threshold]:
    """Every numeric min/max bound of the run's pipeline (the first parameter of a rule is its bound; the
    others, such as ``min_bad_chars``, gate it and are not on the signal's scale)."""
    if not cfg or not isinstance(cfg.get("pipeline"), list):
        return []
    out: list[Threshold] = []
    for spec in cfg["pipeline"]:
        stage = report_stage(spec)
        if stage is None:  # a run made by another version: skip what this version cannot rebuild
            continue
        params = stage.params()
        by_lang = params.pop("by_lang", {}) or {}
        for r in stage.rule_specs or []:
            if not r.params:
                continue
            names = r.params[:2] if r.compare == "range" else r.params[:1]
            for i, p in enumerate(names):
                compare = ("min" if i == 0 else "max") if r.compare == "range" else r.compare
                if compare not in ("min", "max"):
                    continue
                value = params.get(p)
                if value is not None and not _is_number(value):
                    continue
                langs = {code: o[p] for code, o in by_lang.items()
                         if isinstance(o, dict) and p in o and (o[p] is None or _is_number(o[p])) and o[p] != value}
                if value is None and not any(v is not None for v in langs.values()):
                    continue
                out.append(Threshold(stage.name, r.rule, r.signal, compare, p,
                                     None if value is None else float(value),
                                     {c: None if v is None else float(v) for c, v in langs.items()},
                                     _sources(stage)))
    return out


_built: dict[str, object] = {}


def report_stage(spec):
    """The stage ``spec`` (one entry of a run's ``pipeline`` config) as the report uses it, built once per
    process for the thresholds and the example spans alike, or None when this version cannot build it.
    ``word_lists`` is built without its domain lists (thousands of hosts read from files, 0.05 s on
    sample_data): the report wants its bounds and term patterns, not its domain sets."""
    if not isinstance(spec, dict):
        return None
    if spec.get("stage") == "word_lists":
        spec = {**spec, "domain_lists": [], "domain_exclude": []}
    try:
        key = json.dumps(spec, sort_keys=True, default=str)
    except (TypeError, ValueError):
        key = None
    if key is not None and key in _built:
        return _built[key]
    from dataclean.pipeline import build_stage

    try:
        stage = build_stage(spec)
    except Exception:
        stage = None
    if key is not None:
        _built[key] = stage
    return stage
