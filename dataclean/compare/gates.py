"""Gates of ``dataclean compare``: ``rules/compare/default.yaml``, a user file merged onto it, and the checks.

Each gate is one bound on one measured value; its name says what it bounds:

* ``js.<feature>`` / ``ks.<feature>``: JS divergence / KS statistic of a numeric feature <= bound;
* ``language.js``: JS divergence of the language mix <= bound;
* ``diversity.<measure>``: candidate / reference ratio of distinct-1/2/3 or TTR >= bound;
* ``duplicates.self``: near-duplicate rate within the candidate <= bound;
* ``duplicates.reference``: share of the candidate near-duplicating the reference <= bound.
"""
from __future__ import annotations

import copy
import math
import os
from typing import Any

from dataclean.compare.load import CompareError
from dataclean.config import ConfigError, load_yaml, rules_dir

__all__ = ["check_gate_features", "default_gates_path", "evaluate_gates", "load_gates"]

#: Keys whose value is a free mapping of feature or measure names.
_FREE = {"divergence.max_js", "divergence.max_ks", "diversity.min_ratio"}
_MEASURES = ("distinct_1", "distinct_2", "distinct_3", "ttr")


def default_gates_path() -> str:
    return os.path.join(str(rules_dir()), "compare", "default.yaml")


def _merge(base: Any, override: Any, key: str) -> Any:
    if isinstance(base, dict) and key not in _FREE:
        if not isinstance(override, dict):
            raise CompareError(f"gates: {key or 'top level'}: expected a mapping, got {type(override).__name__}")
        out = dict(base)
        for k, v in override.items():
            path = f"{key}.{k}" if key else str(k)
            if k not in base:
                raise CompareError(f"gates: unknown key {path!r}")
            out[k] = _merge(base[k], v, path)
        return out
    if key in _FREE:
        if override is None:
            return {}
        if not isinstance(override, dict):
            raise CompareError(f"gates: {key}: expected a mapping of name: bound")
        out = dict(base or {})
        out.update(override)
        return out
    return copy.deepcopy(override)


def _bound(value: Any, key: str, lo: float = 0.0, hi: float | None = None) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
        raise CompareError(f"gates: {key}: expected a number or null, got {value!r}")
    if value < lo or (hi is not None and value > hi):
        raise CompareError(f"gates: {key}: {value} is out of range [{lo}, {hi if hi is not None else 'inf'}]")
    return float(value)


def load_gates(path: str | None = None) -> dict:
    """The default gates, with the YAML file ``path`` merged onto them; validated."""
    try:
        gates = load_yaml(default_gates_path())
        if path is not None:
            gates = _merge(gates, load_yaml(path), "")
    except ConfigError as exc:
        raise CompareError(str(exc).replace("config ", "gates ", 1)) from None
    bins = gates.get("bins")
    if isinstance(bins, bool) or not isinstance(bins, int) or bins < 2:
        raise CompareError(f"gates: bins: expected an integer >= 2, got {bins!r}")
    div = gates["divergence"]
    _bound(div.get("default_max_js"), "divergence.default_max_js", 0.0, 1.0)
    for name, v in div["max_js"].items():
        _bound(v, f"divergence.max_js.{name}", 0.0, 1.0)
    for name, v in div["max_ks"].items():
        _bound(v, f"divergence.max_ks.{name}", 0.0, 1.0)
    _bound(gates["language"]["max_js"], "language.max_js", 0.0, 1.0)
    for name, v in gates["diversity"]["min_ratio"].items():
        if name not in _MEASURES:
            raise CompareError(f"gates: diversity.min_ratio.{name}: unknown measure (known: {', '.join(_MEASURES)})")
        _bound(v, f"diversity.min_ratio.{name}", 0.0)
    for key in ("max_tokens", "ttr_window"):
        v = gates["diversity"][key]
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise CompareError(f"gates: diversity.{key}: expected a positive integer, got {v!r}")
    dup = gates["duplicates"]
    if _bound(dup["threshold"], "duplicates.threshold", 0.0, 1.0) is None:
        raise CompareError("gates: duplicates.threshold: must be a number")
    _bound(dup["max_self_dup_rate"], "duplicates.max_self_dup_rate", 0.0, 1.0)
    _bound(dup["max_ref_dup_rate"], "duplicates.max_ref_dup_rate", 0.0, 1.0)
    return gates


def check_gate_features(gates: dict, features: list[str]) -> None:
    """Refuse a divergence gate on a feature the pipeline does not measure."""
    for key in ("max_js", "max_ks"):
        for name in gates["divergence"][key]:
            if name not in features:
                raise CompareError(f"gates: divergence.{key}.{name}: no such feature (features: "
                                   f"{', '.join(features)})")


def _gate(name: str, value: float | None, op: str, bound: float, what: str) -> dict:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        passed = False  # nothing measured cannot pass
    else:
        passed = value <= bound if op == "<=" else value >= bound
    return {"gate": name, "what": what, "value": value, "op": op, "bound": bound, "passed": bool(passed)}


def evaluate_gates(gates: dict, result: dict) -> list[dict]:
    """Every configured gate as ``{gate, what, value, op, bound, passed}``, in a fixed order: divergences (in
    feature order), language, diversity, duplicates."""
    out: list[dict] = []
    div = gates["divergence"]
    features = result["features"]
    check_gate_features(gates, list(features))
    for name, feat in features.items():
        bound = div["max_js"][name] if name in div["max_js"] else div.get("default_max_js")
        if bound is not None:
            out.append(_gate(f"js.{name}", feat["js"], "<=", bound, f"JS divergence of {name}"))
        ks_bound = div["max_ks"].get(name)
        if ks_bound is not None:
            out.append(_gate(f"ks.{name}", feat["ks"], "<=", ks_bound, f"KS statistic of {name}"))
    if gates["language"]["max_js"] is not None:
        out.append(_gate("language.js", result["language"]["js"], "<=", gates["language"]["max_js"],
                         "JS divergence of the language mix"))
    ratios = result["diversity"]["ratio"]
    for name in _MEASURES:
        bound = gates["diversity"]["min_ratio"].get(name)
        if bound is not None:
            out.append(_gate(f"diversity.{name}", ratios.get(name), ">=", bound,
                             f"{name} of the candidate / of the reference"))
    dup = gates["duplicates"]
    if dup["max_self_dup_rate"] is not None:
        out.append(_gate("duplicates.self", result["duplicates"]["candidate_self_rate"], "<=",
                         dup["max_self_dup_rate"], "near-duplicate rate within the candidate"))
    if dup["max_ref_dup_rate"] is not None:
        out.append(_gate("duplicates.reference", result["duplicates"]["candidate_vs_reference_rate"], "<=",
                         dup["max_ref_dup_rate"], "share of the candidate near-duplicating the reference"))
    return out
