"""What ``dataclean rules`` prints: every stage of a resolved pipeline, its rules, signals and thresholds."""
from __future__ import annotations

import os
from dataclasses import dataclass

from dataclean.config import load_yaml, resolve_config, rules_dir
from dataclean.pipeline import build_stage
from dataclean.stages import is_plugin


@dataclass
class RuleRow:
    stage: str
    kind: str
    rule: str
    signal: str
    compare: str
    thresholds: dict
    by_lang: dict
    sources: str
    file: str
    doc: str
    #: For a plug-in stage, the class that runs it (``module:Class``), so a listing says whose code decides;
    #: empty for a built-in stage.
    plugin: str = ""


def describe_rules(config_path: str | None = None, benchmarks: list[str] | None = None) -> list[RuleRow]:
    cfg = resolve_config(config_path)
    if benchmarks:
        from dataclean.exec.runner import with_benchmarks
        cfg = with_benchmarks(cfg, list(benchmarks))
    user_sets_pipeline = config_path is not None and "pipeline" in load_yaml(config_path)
    origin = os.path.abspath(config_path) if user_sets_pipeline else str(rules_dir() / "default.yaml")
    rows = []
    for spec in cfg["pipeline"]:
        stage = build_stage(spec)
        params = stage.params()
        by_lang = params.pop("by_lang", {}) or {}
        sources = stage.scope()
        plugin = f"{type(stage).__module__}:{type(stage).__qualname__}" if is_plugin(type(stage)) else ""
        specs = stage.rule_specs or []
        for r in specs:
            thresholds = {p: params.get(p) for p in r.params}
            langs = {code: {p: v for p, v in o.items() if p in r.params} for code, o in by_lang.items()}
            rows.append(RuleRow(stage.name, stage.kind, r.rule, r.signal, r.compare, thresholds,
                                {c: v for c, v in langs.items() if v}, sources, origin, r.doc, plugin))
        if not specs:
            rows.append(RuleRow(stage.name, stage.kind, "-", ", ".join(f.name for f in stage.signal_fields), "-",
                                params, by_lang, sources, origin, "", plugin))
    if not any(spec.get("stage") == "decontaminate" for spec in cfg["pipeline"]):  # off until benchmarks are given
        from dataclean.stages.decontaminate import Decontaminate
        section = cfg.get("decontaminate") or {}
        for r in Decontaminate.rule_specs:
            rows.append(RuleRow("decontaminate", Decontaminate.kind, r.rule, r.signal, r.compare,
                                {p: section.get(p) for p in r.params}, {},
                                "off: run with --decontaminate FILE (or decontaminate.benchmarks)", origin, r.doc))
    return rows
