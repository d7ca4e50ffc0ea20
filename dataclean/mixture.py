"""Mixture recipes: which sources, in what proportion of tokens, up to which budget.

A recipe is YAML (examples in ``rules/mixtures/``)::

    name: web-heavy
    budget_tokens: 2_000_000      # total tokens of the mixture
    seed: 0                       # the selection seed (independent of the run's other seeds)
    select: uniform               # default for every source: uniform | quality
    max_epochs: 1                 # default cap on how often one document may appear
    unlisted: drop                # documents of sources not in the recipe: drop (removed) | keep (untouched)
    sources:
      web:   {weight: 0.5}                              # matched by the `source` column
      books: {weight: 0.2, max_epochs: 4}
      code:  {weight: 0.2, paths: ["*/github/*"]}       # matched by input path patterns (fnmatch / GLOB)
      wiki:  {weight: 0.1, match: [wiki, wikipedia], select: quality}

A document belongs to the first recipe source, in file order, whose ``paths`` pattern matches its input
file or whose ``match`` list (default: the source's own name, when it has no ``paths``) holds its ``source``
value. Weights are shares of ``budget_tokens`` and must add up to 1.

How the sampler reaches a target of ``T = weight * budget_tokens`` tokens from a source that has ``A`` tokens
after filtering and dedup (all in the global step, from pass-1 totals):

* ``T <= A``: the documents are ordered (uniform: by a hash of ``(seed, epoch, id)``; quality: by
  ``quality_score`` descending, then that hash) and taken in that order while the running token total
  stays within ``T``; then the rest of the order is walked once more and every document that still fits
  is taken (first fit), so the achieved count is at most ``T`` and short of it by less than the smallest
  document left out;
* ``T > A``: every document is repeated ``floor(T / A)`` times (at most ``max_epochs``) and the rest is
  taken from one more epoch ordered by the hash of that epoch. When ``T / A > max_epochs`` the source
  is used ``max_epochs`` times and a warning says by how much the target was missed.

Copies get distinct ids that keep the original visible: ``<id>#epoch<k>`` for the k-th repeat (k >= 1),
with ``mix_epoch = k``; the first copy keeps its id and ``mix_epoch = 0``. Documents that are not selected
are removed with reason ``mixture_downsampled`` and stay in the ledger.
"""
from __future__ import annotations

import fnmatch
import os
from dataclasses import dataclass, field

SELECT_MODES = ("uniform", "quality")
UNLISTED_MODES = ("drop", "keep")
RECIPE_KEYS = {"name", "budget_tokens", "seed", "select", "max_epochs", "unlisted", "sources", "recipe_path"}
SOURCE_KEYS = {"weight", "max_epochs", "select", "paths", "match"}


class RecipeError(ValueError):
    """A recipe problem, with the offending key in the message."""


@dataclass(frozen=True)
class MixSource:
    name: str
    weight: float
    max_epochs: int
    select: str
    paths: tuple[str, ...] = ()
    match: tuple[str, ...] = ()

    def matches(self, source: str | None, origin_file: str) -> bool:
        if any(fnmatch.fnmatchcase(origin_file, p) for p in self.paths):
            return True
        return source is not None and source in self.match


@dataclass(frozen=True)
class Recipe:
    name: str
    budget_tokens: int
    seed: int
    sources: tuple[MixSource, ...]
    unlisted: str = "drop"
    path: str | None = None
    warnings: tuple[str, ...] = field(default=())

    def target_tokens(self, src: MixSource) -> int:
        return int(round(src.weight * self.budget_tokens))


def _num(value, key: str, kind=float, minimum=None, strict=False):
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RecipeError(f"{key}: expected a number, got {value!r}")
    if kind is int and float(value) != int(value):
        raise RecipeError(f"{key}: expected a whole number, got {value!r}")
    value = kind(value)
    if minimum is not None and (value <= minimum if strict else value < minimum):
        raise RecipeError(f"{key}: must be {'>' if strict else '>='} {minimum}, got {value!r}")
    return value


def _known_keys(data: dict, known: set[str], where: str) -> None:
    unknown = set(data) - known
    if unknown:
        raise RecipeError(f"{where}: unknown key(s) {', '.join(sorted(map(str, unknown)))} "
                          f"(accepted: {', '.join(sorted(known - {'recipe_path'}))})")


def parse_recipe(data: dict, path: str | None = None) -> Recipe:
    """Validate a recipe mapping (as loaded from YAML) and return a :class:`Recipe`."""
    if not isinstance(data, dict):
        raise RecipeError(f"mixture recipe: expected a mapping, got {type(data).__name__}")
    _known_keys(data, RECIPE_KEYS, "mixture")
    for key in ("budget_tokens", "sources"):
        if key not in data:
            raise RecipeError(f"mixture.{key}: required")
    budget = _num(data["budget_tokens"], "mixture.budget_tokens", int, 0, strict=True)
    seed = _num(data.get("seed", 0), "mixture.seed", int)
    default_select = data.get("select", "uniform")
    if default_select not in SELECT_MODES:
        raise RecipeError(f"mixture.select: one of {', '.join(SELECT_MODES)}, got {default_select!r}")
    default_epochs = _num(data.get("max_epochs", 1), "mixture.max_epochs", int, 1)
    unlisted = data.get("unlisted", "drop")
    if unlisted not in UNLISTED_MODES:
        raise RecipeError(f"mixture.unlisted: one of {', '.join(UNLISTED_MODES)}, got {unlisted!r}")
    sources = data["sources"]
    if not isinstance(sources, dict) or not sources:
        raise RecipeError("mixture.sources: expected a non-empty mapping of source name -> {weight: ...}")
    parsed = []
    for name, spec in sources.items():
        key = f"mixture.sources.{name}"
        if not isinstance(name, str) or not name:
            raise RecipeError(f"{key}: source names must be non-empty strings")
        if not isinstance(spec, dict):
            raise RecipeError(f"{key}: expected a mapping such as {{weight: 0.5}}")
        _known_keys(spec, SOURCE_KEYS, key)
        if "weight" not in spec:
            raise RecipeError(f"{key}.weight: required")
        weight = _num(spec["weight"], f"{key}.weight", float, 0.0)
        select = spec.get("select", default_select)
        if select not in SELECT_MODES:
            raise RecipeError(f"{key}.select: one of {', '.join(SELECT_MODES)}, got {select!r}")
        epochs = _num(spec.get("max_epochs", default_epochs), f"{key}.max_epochs", int, 1)
        lists = {}
        for lk in ("paths", "match"):
            v = spec.get(lk, [])
            if isinstance(v, str):
                v = [v]
            if not isinstance(v, list) or not all(isinstance(x, str) and x for x in v):
                raise RecipeError(f"{key}.{lk}: expected a list of strings")
            lists[lk] = tuple(v)
        match = lists["match"] or (() if lists["paths"] else (name,))
        parsed.append(MixSource(name, weight, epochs, select, lists["paths"], match))
    total = sum(s.weight for s in parsed)
    if abs(total - 1.0) > 1e-6:
        raise RecipeError(f"mixture.sources: the weights add up to {total:g}, not 1")
    return Recipe(str(data.get("name") or (os.path.basename(path) if path else "mixture")), budget, seed,
                  tuple(parsed), unlisted, path)


def recipe_search_paths(ref: str, rules: str) -> list[str]:
    """Where a recipe named in a config is looked for: as given, then under ``rules/mixtures/``."""
    cands = [ref]
    if not os.path.isabs(ref):
        cands.append(os.path.join(rules, ref))
        cands.append(os.path.join(rules, "mixtures", ref))
        if not ref.endswith((".yaml", ".yml")):
            cands.append(os.path.join(rules, "mixtures", ref + ".yaml"))
    return cands
