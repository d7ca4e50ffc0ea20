"""Loading and validating configuration: YAML rule sets merged onto ``rules/default.yaml``.

The defaults are found in the source tree (``<repo>/rules``, for editable installs) or inside the wheel
(``dataclean/_rules``, where the build puts the same folder).
"""
from __future__ import annotations

import copy
import hashlib
import inspect
import json
import os
from typing import Any

import yaml

from dataclean.pipeline import build_stage
from dataclean.rulesfolder import ConfigError, rules_dir  # noqa: F401  (both are config's public names)
from dataclean.sizes import parse_size

#: libyaml's safe loader where PyYAML was built with it (its wheels are): the same documents, ~5x faster to parse
_YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


#: Limits on YAML aliases (``*name``), which let a few hundred bytes stand for billions of values (an "alias
#: bomb"): rules/default.yaml uses 3 aliases and expands to 718 values.
MAX_YAML_ALIASES = 1_000
MAX_YAML_VALUES = 1_000_000


def _check_aliases(text: str, path) -> None:
    """Refuse a document with more than :data:`MAX_YAML_ALIASES` aliases, or whose aliases expand it to more
    than :data:`MAX_YAML_VALUES` values (counted on the composed node graph, where an alias is one shared
    node: linear in the document's size)."""
    if "*" not in text:  # no alias can occur
        return
    aliases = sum(isinstance(e, yaml.AliasEvent) for e in yaml.parse(text, Loader=_YAML_LOADER))
    if aliases > MAX_YAML_ALIASES:
        raise ConfigError(f"config {path}: {aliases:,} YAML aliases (*name), more than the {MAX_YAML_ALIASES:,} "
                          "allowed; write the values out")
    root = yaml.compose(text, Loader=_YAML_LOADER)
    sizes: dict[int, int] = {}  # id(node) -> values it expands to
    inside: set[int] = set()  # the nodes whose subtree is being counted
    stack = [(root, False)] if root is not None else []
    while stack:  # post-order, each shared node counted once: linear in the document's size
        node, done = stack.pop()
        key = id(node)
        if done:
            inside.discard(key)
            sizes[key] = 1 + sum(sizes[id(c)] for c in _yaml_children(node))
            if sizes[key] > MAX_YAML_VALUES:
                raise ConfigError(f"config {path}: its YAML aliases (*name) expand it to more than "
                                  f"{MAX_YAML_VALUES:,} values (an alias bomb?); write the values out")
        elif key not in sizes:
            if key in inside:
                raise ConfigError(f"config {path}: a YAML alias (*name) refers to a value that contains it")
            inside.add(key)
            stack.append((node, True))
            stack.extend((c, False) for c in _yaml_children(node) if id(c) not in sizes)


def _yaml_children(node) -> list:
    if isinstance(node, yaml.MappingNode):
        return [c for pair in node.value for c in pair]
    return node.value if isinstance(node, yaml.SequenceNode) else []


def load_yaml(path: str | os.PathLike) -> dict:
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        _check_aliases(text, path)
        data = yaml.load(text, Loader=_YAML_LOADER)
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config {path} is not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise ConfigError(f"cannot read config {path}: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise ConfigError(f"config {path} is not valid YAML: {_yaml_problem(exc)}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"config {path}: the top level must be a mapping, not {type(data).__name__}")
    return data


def _yaml_problem(exc: yaml.YAMLError) -> str:
    """PyYAML's message on one line: ``line 3, column 4: did not find expected '-' indicator (while parsing a
    block collection that starts at line 2, column 3)`` (its own text spans several lines)."""
    mark = getattr(exc, "problem_mark", None)
    problem = getattr(exc, "problem", None)
    if mark is None or not problem:
        return " ".join(str(exc).split())
    out = f"line {mark.line + 1}, column {mark.column + 1}: {problem}"
    context, context_mark = getattr(exc, "context", None), getattr(exc, "context_mark", None)
    if context:
        out += f" ({context}" + (f" that starts at line {context_mark.line + 1}, column {context_mark.column + 1}"
                                 if context_mark is not None else "") + ")"
    return out


def default_config() -> dict:
    return load_yaml(rules_dir() / "default.yaml")


#: Mappings whose keys are the user's own names (sources), merged key by key without refusing new keys.
OPEN_MAPPINGS = ("sources",)


def _merge(base: Any, override: Any, key: str) -> Any:
    if isinstance(base, dict):
        if not isinstance(override, dict):
            raise ConfigError(f"{key or 'config'}: expected a mapping, got {type(override).__name__}")
        out = dict(base)
        for k, v in override.items():
            path = f"{key}.{k}" if key else str(k)
            if key in OPEN_MAPPINGS and k not in base:  # the user's own names
                out[k] = v
                continue
            if k not in base:
                hint = _did_you_mean(k, base)
                raise ConfigError(f"unknown config key {path!r}" + (f" ({hint})" if hint else "")
                                  + f"; the keys {'of ' + key if key else 'at the top level'}: "
                                  + ", ".join(map(str, base)))
            out[k] = _merge(base[k], v, path)
        return out
    if isinstance(base, list):
        if not isinstance(override, list):
            raise ConfigError(f"{key}: expected a list, got {type(override).__name__}")
        return copy.deepcopy(override)
    if base is None or override is None:
        return override
    if isinstance(base, bool) != isinstance(override, bool):
        raise ConfigError(f"{key}: expected {type(base).__name__}, got {override!r}")
    if isinstance(base, (int, float)) and isinstance(override, (int, float)):
        return override
    if key in MEMORY_KEYS and isinstance(override, (int, float)):  # (YAML reads 4 as a number: bytes? GB?)
        try:
            parse_size(str(override), key)
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
    if not isinstance(override, type(base)):
        raise ConfigError(f"{key}: expected {type(base).__name__}, got {override!r}")
    return override


#: The top-level key of a config that changes stages' parameters by name, without restating the pipeline:
#: ``stages: {gopher_quality: {min_words: 30}}``. (A ``pipeline:`` list replaces the whole list, which a
#: config still needs to reorder, add or remove stages.) Not a key of the resolved config.
PATCH_KEY = "stages"

#: The top-level key of a config that adds stages to the pipeline without restating it: a list of entries as
#: in ``pipeline:``, each placed ``before:`` or ``after:`` a stage (its ``name:`` or kind), by default before
#: the first corpus-wide stage (after every filter of pass 1), as a plug-in filter wants; a corpus-wide stage
#: (``semantic_dedup``) by default right after the pipeline's last ``*_dedup`` stage. Not a key of the
#: resolved config.
ADD_KEY = "add_stages"


def resolve_config(user: dict | str | os.PathLike | None = None, overrides: dict | None = None,
                   sets: list[str] | tuple[str, ...] | None = None) -> dict:
    """Merge a user config (a dict or a YAML path), flat overrides (``{"output.rejected_text": False}``) and
    ``sets`` (``["gopher_quality.min_words=30"]``, as ``--set`` gives them) onto the defaults, validate it and
    return the resolved config.

    A dotted key whose first part is not a config section names a stage of the pipeline (its ``name:``, else
    its kind) and one of its parameters; so do the keys of the user config's ``stages:`` mapping. Stage
    patches apply to the pipeline as it will run (after ``pipeline:``, ``extract`` and ``decontaminate``
    placed theirs), in order: the file's, the overrides', the sets'. Every error names the key it is about."""
    cfg = default_config()
    stage_patches: list[tuple[str, str, Any]] = []  # (label of the key in messages, stage, {param: value})
    if user is not None:
        if not isinstance(user, dict):
            user = load_yaml(bundled_config(user))
        user = dict(user)
        patch = user.pop(PATCH_KEY, None)
        added = user.pop(ADD_KEY, None)
        cfg = _merge(cfg, user, "")
        if added is not None:
            cfg = add_stages(cfg, added)
        if patch is not None:
            if not isinstance(patch, dict):
                raise ConfigError(f"{PATCH_KEY}: expected a mapping of stage name to parameters, e.g. "
                                  f"{PATCH_KEY}: {{gopher_quality: {{min_words: 30}}}}; got {type(patch).__name__}")
            for stage, params in patch.items():
                if not isinstance(params, dict):
                    raise ConfigError(f"{PATCH_KEY}.{stage}: expected a mapping of parameter to value, e.g. "
                                      f"{{min_words: 30}}; got {params!r}")
                stage_patches.append((f"{PATCH_KEY}.", str(stage), params))
    pairs = [("", k, v) for k, v in (overrides or {}).items()] + [("--set ", *parse_set(item)) for item in sets or ()]
    for prefix, dotted, value in pairs:
        head, _, rest = str(dotted).partition(".")
        if head in cfg:
            cfg = _set_dotted(cfg, str(dotted), value, prefix)
        else:  # a stage: checked once the pipeline is placed (a kind it lacks may be added by extract...)
            if not rest:
                raise ConfigError(f"{prefix}{dotted}: {_no_such_section(head, cfg)}")
            stage_patches.append((prefix, head, _nest(rest.split("."), value)))
    cfg["mixture"] = resolve_mixture(cfg.get("mixture"))
    cfg = place_decontaminate(place_extract(cfg))
    for prefix, stage, params in _merge_patches(stage_patches):
        cfg = patch_stage(cfg, stage, params, prefix)
    key = config_hash(cfg)
    if key not in _VALIDATED:  # (a resolved config resolves to itself: the CLI's, again in run())
        validate(cfg)
        _VALIDATED[key] = None
        while len(_VALIDATED) > 16:
            del _VALIDATED[next(iter(_VALIDATED))]
    return cfg


#: The hashes of the configs :func:`validate` passed in this process, oldest first (at most 16): validating
#: builds every stage (loads the language-ID model and the word lists, ~0.3 s), and the CLI's resolved config
#: is resolved again by :func:`dataclean.run`.
_VALIDATED: dict[str, None] = {}


def _merge_patches(patches: list) -> list:
    """Consecutive patches of one stage from one source as one (``--set quality_score.scorer=embedding --set
    quality_score.model_path=h.npz`` is one change: checked apart, each half would be refused)."""
    def merge(a: dict, b: dict) -> dict:
        out = dict(a)
        for k, v in b.items():
            out[k] = merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
        return out

    merged: list = []
    for prefix, stage, params in patches:
        if merged and merged[-1][0] == prefix and merged[-1][1] == stage:
            merged[-1] = (prefix, stage, merge(merged[-1][2], params))
        else:
            merged.append((prefix, stage, params))
    return merged


def add_stages(cfg: dict, added: Any) -> dict:
    """``cfg`` with the ``add_stages:`` entries (see :data:`ADD_KEY`) inserted into its pipeline, in order (an
    entry may be placed before or after one added earlier)."""
    if not isinstance(added, list):
        raise ConfigError(f"{ADD_KEY}: expected a list of stage entries, e.g. {ADD_KEY}: [{{stage: "
                          f"mypkg.filters:MyFilter, before: exact_dedup}}]; got {type(added).__name__}")
    pipeline = [dict(s) if isinstance(s, dict) else s for s in cfg["pipeline"]]
    for n, entry in enumerate(added):
        where = f"{ADD_KEY}[{n}]"
        if not isinstance(entry, dict) or not entry.get("stage"):
            raise ConfigError(f"{where}: expected a stage entry with a stage: key, e.g. {{stage: "
                              f"mypkg.filters:MyFilter}}; got {entry!r}")
        entry = dict(entry)
        before, after = entry.pop("before", None), entry.pop("after", None)
        if before is not None and after is not None:
            raise ConfigError(f"{where}: give before: or after:, not both")
        anchor = before if before is not None else after
        names = _stage_names(pipeline)
        if anchor is None:
            from dataclean.stages import is_global_kind

            kinds = [s.get("stage") if isinstance(s, dict) else None for s in pipeline]
            is_global = [is_global_kind(k) for k in kinds]
            at = next((i for i, g in enumerate(is_global) if g), len(kinds))
            if is_global_kind(entry["stage"]):  # a dedup step joins the others
                dedups = [i for i, k in enumerate(kinds) if is_global[i] and str(k).endswith("_dedup")]
                at = dedups[-1] + 1 if dedups else at
        elif str(anchor) in names:
            at = names.index(str(anchor)) + (1 if after is not None else 0)
        else:
            hint = _did_you_mean(anchor, names)
            raise ConfigError(f"{where}.{'before' if before is not None else 'after'}: no stage {anchor} in the "
                              f"pipeline" + (f" ({hint})" if hint else "") + f"; stages: {', '.join(names)}")
        pipeline.insert(at, entry)
    return dict(cfg, pipeline=pipeline)


def parse_set(item: str) -> tuple[str, Any]:
    """``KEY=VALUE`` (one ``--set``) as ``(KEY, value)``, the value read as YAML: ``30`` is a number, ``true`` a
    boolean, ``null`` nothing, ``[en, zh]`` a list, anything else the string itself."""
    key, eq, text = str(item).partition("=")
    key = key.strip()
    if not eq or not key:
        raise ConfigError(f"--set {item}: expected KEY=VALUE, e.g. --set gopher_quality.min_words=30")
    if not all(key.split(".")):
        raise ConfigError(f"--set {key}: an empty part in the key (write STAGE.PARAMETER or SECTION.KEY)")
    try:
        _check_aliases(text, f"--set {key}")
        value = yaml.load(text, Loader=_YAML_LOADER) if text.strip() else None
    except ConfigError:
        raise
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or type(exc).__name__
        raise ConfigError(f"--set {key}: {text!r} is not a YAML value ({problem}); quote it for a string") from None
    return key, value


def _nest(parts: list[str], value: Any) -> dict:
    for part in reversed(parts):
        value = {part: value}
    return value


def _did_you_mean(word: str, choices) -> str:
    import difflib

    close = difflib.get_close_matches(str(word), [str(c) for c in choices], n=1, cutoff=0.6)
    return f"did you mean {close[0]}?" if close else ""


def _no_such_section(head: str, cfg: dict) -> str:
    names = _stage_names(cfg["pipeline"]) if isinstance(cfg.get("pipeline"), list) else []
    hint = _did_you_mean(head, list(cfg) + names)
    return (f"no config section or stage {head}" + (f" ({hint})" if hint else "")
            + f"; sections: {', '.join(k for k in cfg if isinstance(cfg[k], dict))}; stages: {', '.join(names)}")


def _set_dotted(cfg: dict, dotted: str, value: Any, prefix: str) -> dict:
    """``cfg`` with the key at ``dotted`` (a path of config sections) set to ``value``: an unknown key is an
    error naming what exists there; the value is checked as a config file's would be (:func:`_merge`)."""
    parts = dotted.split(".")
    cur: Any = cfg
    for i, part in enumerate(parts[:-1] if parts[0] not in OPEN_MAPPINGS else parts[:1]):
        if not isinstance(cur, dict) or part not in cur:
            break
        cur = cur[part]
        if i + 1 < len(parts) and isinstance(cur, dict) and parts[0] not in OPEN_MAPPINGS and \
                parts[i + 1] not in cur:
            where = ".".join(parts[:i + 1])
            hint = _did_you_mean(parts[i + 1], cur)
            raise ConfigError(f"{prefix}{dotted}: {where} has no key {parts[i + 1]}"
                              + (f" ({hint})" if hint else f" (its keys: {', '.join(map(str, cur))})"))
    try:
        return _merge(cfg, _nest(parts, value), "")
    except ConfigError as exc:
        raise ConfigError(f"{prefix}{exc}") from None


def _stage_names(pipeline: list) -> list[str]:
    return [str(s.get("name") or s.get("stage")) for s in pipeline if isinstance(s, dict)]


def _stage_parameters(kind: str) -> dict[str, Any] | None:
    """A stage kind's parameters and their defaults (``inspect.Parameter.empty``: none), with the row filters
    every stage takes; None for a kind the registry does not know (its entry fails in :func:`validate`)."""
    from dataclean.stages import find_stage

    cls = find_stage(kind)  # (built-in or plug-in)
    if cls is None:
        return None
    params = {n: p.default for n, p in inspect.signature(cls.__init__).parameters.items()
              if n != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)}
    return {**params, **{k: None for k in ("only_sources", "skip_sources", "only_kinds", "skip_kinds")}}


def patch_stage(cfg: dict, stage: str, params: dict, prefix: str = "") -> dict:
    """``cfg`` with the ``params`` of one pipeline entry changed: the entry named ``stage`` (its ``name:``),
    else the one entry of that kind. Mappings (``by_lang``) are merged key by key, other values replaced.
    Errors name the key (``prefix``: ``stages.``, ``--set `` or nothing) and what exists instead."""
    pipeline = cfg["pipeline"]
    entries = [i for i, s in enumerate(pipeline) if isinstance(s, dict) and s.get("name") == stage]
    if not entries:
        entries = [i for i, s in enumerate(pipeline) if isinstance(s, dict) and s.get("stage") == stage]
    names = _stage_names(pipeline)
    if not entries:
        hint = _did_you_mean(stage, names)
        section = (f"; the {stage} section adds it (--set {stage}.KEY=VALUE)"
                   if isinstance(cfg.get(stage), dict) else "")
        raise ConfigError(f"{prefix}{stage}: no stage {stage} in the pipeline"
                          + (f" ({hint})" if hint else "") + f"{section}; its stages: {', '.join(names)}")
    if len(entries) > 1:
        raise ConfigError(f"{prefix}{stage}: {len(entries)} stages of kind {stage} "
                          f"({', '.join(names[i] for i in entries)}); name one of them")
    at = entries[0]
    entry = dict(pipeline[at])
    known = _stage_parameters(entry["stage"])
    for param, value in params.items():
        key = f"{prefix}{stage}.{param}"
        if param == "stage":
            raise ConfigError(f"{key}: a patch cannot change a stage's kind; write the pipeline: list to replace "
                              "a stage")
        if known is not None and param not in known:
            hint = _did_you_mean(param, known)
            raise ConfigError(f"{key}: {stage} has no parameter {param}"
                              + (f" ({hint})" if hint else f" (its parameters: {', '.join(sorted(known))})"))
        base = entry.get(param, known.get(param) if known else None)
        entry[param] = _patch_value(None if base is _EMPTY else base, value, key)
    if known is not None:
        from dataclean.pipeline import build_stage
        try:
            build_stage(entry)
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"{prefix}{stage}: {exc}") from None
    return dict(cfg, pipeline=pipeline[:at] + [entry] + pipeline[at + 1:])


#: The default of a stage parameter that has none (a required one).
_EMPTY = inspect.Parameter.empty


def _what(value: Any) -> str:
    if isinstance(value, bool):
        return "true or false"
    if isinstance(value, (int, float)):
        return "a number"
    return {str: "a string", list: "a list", dict: "a mapping"}.get(type(value), type(value).__name__)


def _patch_value(base: Any, value: Any, key: str) -> Any:
    """``value`` patched onto a stage parameter's current ``base``: mappings merged key by key (their keys are
    the user's: languages, sources), anything else replaced by a value of the same sort (null: either way)."""
    if base is None or value is None:
        return copy.deepcopy(value)
    if isinstance(base, dict) and isinstance(value, dict):
        out = dict(base)
        for k, v in value.items():
            out[k] = _patch_value(base.get(k), v, f"{key}.{k}")
        return out
    same = (isinstance(base, bool) == isinstance(value, bool)) and (
        isinstance(base, (int, float)) and isinstance(value, (int, float))
        or type(base) is type(value) or isinstance(base, str) and isinstance(value, str))
    if not same:
        raise ConfigError(f"{key}: expected {_what(base)}, got {value!r}")
    return copy.deepcopy(value)


def bundled_config(path: str | os.PathLike) -> str | os.PathLike:
    """``path`` when it exists; else a config shipped in the rules folder by that name (``crawl`` or
    ``crawl.yaml`` for ``rules/crawl.yaml``), so that a pip-installed dataclean finds its own configs."""
    if os.path.exists(path):
        return path
    name = str(path)
    name = name[len("rules/"):] if name.startswith("rules/") else name
    for candidate in (rules_dir() / name, rules_dir() / f"{name}.yaml"):
        if candidate.is_file():
            return candidate
    return path


EXTRACT_STAGE_KEYS = ("extractor", "keep", "favor", "rows", "min_chars", "max_html_chars")


def place_extract(cfg: dict) -> dict:
    """With ``extract.enabled``, the pipeline starts with ``url_filter`` (when ``extract.url_filter``, with the
    domain lists of the pipeline's ``word_lists`` entry) and ``extract`` with the section's settings, unless
    it already has entries of those kinds (a pipeline written out in full keeps its own)."""
    section = cfg.get("extract") or {}
    if not isinstance(section, dict):
        raise ConfigError("extract: expected a mapping (enabled: true, extractor: trafilatura, ...)")
    enabled = section.get("enabled", False)
    if not isinstance(enabled, bool):
        raise ConfigError(f"extract.enabled: expected true or false, got {enabled!r}")
    if not enabled:
        return cfg
    kinds = [s.get("stage") for s in cfg["pipeline"] if isinstance(s, dict)]
    head = []
    if section.get("url_filter", True) and "url_filter" not in kinds:
        lists = next((s for s in cfg["pipeline"] if isinstance(s, dict) and s.get("stage") == "word_lists"), {})
        head.append({"stage": "url_filter", **{k: lists[k] for k in ("domain_lists", "domain_categories",
                                                                        "domain_exclude") if k in lists}})
    if "extract" not in kinds:
        head.append({"stage": "extract", **{k: section[k] for k in EXTRACT_STAGE_KEYS if k in section}})
    return dict(cfg, pipeline=head + list(cfg["pipeline"])) if head else cfg


DECONTAM_STAGE_KEYS = ("benchmarks", "ngram", "char_ngram", "max_overlap", "min_shared_ngrams", "max_item_frequency",
                       "mode", "index_dir")


def place_decontaminate(cfg: dict) -> dict:
    """With benchmarks in the ``decontaminate`` section, a ``decontaminate`` stage in the pipeline: the section's
    settings go into the pipeline's own decontaminate entry when it has one without benchmarks, else into a
    new entry placed before the section's ``before`` stage (else before the first corpus-wide stage)."""
    section = cfg.get("decontaminate") or {}
    if not isinstance(section, dict):
        raise ConfigError("decontaminate: expected a mapping (benchmarks: [FILE, ...], ...)")
    benchmarks = section.get("benchmarks") or []
    if isinstance(benchmarks, (str, dict)):
        benchmarks = [benchmarks]
    if not isinstance(benchmarks, list):
        raise ConfigError("decontaminate.benchmarks: expected a list of files")
    if not benchmarks:
        return cfg
    cfg = dict(cfg, pipeline=[dict(s) if isinstance(s, dict) else s for s in cfg["pipeline"]])
    entry = {"stage": "decontaminate", **{k: section[k] for k in DECONTAM_STAGE_KEYS if k in section},
             "benchmarks": benchmarks}
    own = [s for s in cfg["pipeline"] if isinstance(s, dict) and s.get("stage") == "decontaminate"]
    if own:
        for spec in own:
            if not spec.get("benchmarks"):
                spec.update({k: v for k, v in entry.items() if k not in spec or k == "benchmarks"})
        return cfg
    from dataclean.stages import is_global_kind
    names = [s.get("name") or s.get("stage") for s in cfg["pipeline"] if isinstance(s, dict)]
    before = section.get("before")
    if before in names:
        at = names.index(before)
    else:
        kinds = [s.get("stage") for s in cfg["pipeline"] if isinstance(s, dict)]
        at = next((i for i, k in enumerate(kinds) if is_global_kind(k)), len(kinds))
    cfg["pipeline"].insert(at, entry)
    return cfg


def resolve_mixture(value: Any) -> dict | None:
    """The mixture recipe as a mapping: a path is read here, so the config hash covers the recipe's content."""
    from dataclean.mixture import RecipeError, parse_recipe, recipe_search_paths

    if value is None:
        return value
    if isinstance(value, str):
        for path in recipe_search_paths(value, str(rules_dir())):
            if os.path.isfile(path):
                data = load_yaml(path)
                data["recipe_path"] = os.path.abspath(path)
                value = data
                break
        else:
            raise ConfigError(f"mixture: recipe {value!r} not found (looked as given and under rules/mixtures/)")
    if not isinstance(value, dict):
        raise ConfigError(f"mixture: expected a recipe path or mapping, got {type(value).__name__}")
    try:
        parse_recipe(value, value.get("recipe_path"))
    except RecipeError as exc:
        raise ConfigError(str(exc)) from None
    return value


def validate(cfg: dict) -> None:
    from dataclean.sources import SourceKinds

    if not isinstance(cfg.get("sources"), dict):
        raise ConfigError("sources: expected a mapping of source name (or glob) to kind (web, curated, code)")
    try:
        SourceKinds(cfg["sources"])
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if not isinstance(cfg.get("pipeline"), list) or not cfg["pipeline"]:
        raise ConfigError("pipeline: must be a non-empty list of stages")
    names = set()
    built: list = []
    for i, spec in enumerate(cfg["pipeline"]):
        if not isinstance(spec, dict) or "stage" not in spec:
            raise ConfigError(f"pipeline[{i}]: each entry must be a mapping with a 'stage' key")
        for key, (lo, hi, why) in STAGE_SIZE_BOUNDS.get(spec["stage"], {}).items():
            _check_size(f"pipeline[{i}] ({spec['stage']}).{key}", spec.get(key), lo, hi, why)
        try:
            stage = build_stage(spec)
        except (ValueError, TypeError) as exc:
            raise ConfigError(f"pipeline[{i}]: {exc}") from None
        if stage.name in names:
            raise ConfigError(f"pipeline[{i}]: stage name {stage.name!r} is used twice; give one a 'name'")
        names.add(stage.name)
        try:
            stage.check_pipeline(built)
        except ValueError as exc:
            raise ConfigError(f"pipeline[{i}]: {exc}") from None
        built.append(stage)
    if cfg["tokens"]["tokenizer"] is not None:  # a bad path fails here, before any worker starts
        from dataclean.tokens import TokenCounter
        try:
            TokenCounter.from_config(cfg["tokens"])
        except (ValueError, ImportError) as exc:
            raise ConfigError(f"tokens.tokenizer: {exc}") from None
    for dotted, (lo, hi, why) in SIZE_BOUNDS.items():
        section, key = dotted.split(".")
        _check_size(dotted, cfg[section][key], lo, hi, why)
    if not isinstance(cfg["input"]["columns"].get("text"), str):
        raise ConfigError("input.columns.text: must name the text column")
    for dotted in MEMORY_KEYS:
        value = cfg
        for part in dotted.split("."):
            value = value[part]
        if value != "auto":
            try:
                parse_size(value, dotted)
            except ValueError as exc:
                raise ConfigError(str(exc)) from None


#: Sizes a config may set, with bounds that keep one run's allocations and file counts sane: (lowest, highest,
#: what a value above the highest would cost). A value outside is a one-line error naming the key.
SIZE_BOUNDS = {
    "input.batch_rows": (1, 1_000_000, "rows held in memory at once per worker"),
    "input.max_record_bytes": (1, 1 << 30, "bytes of one record, held a few times over while it is read"),
    "input.split_mb": (0, 1 << 30, "MiB per pass-1 task of a large Parquet or JSON Lines file; 0: one per file"),
    "output.shard_max_rows": (1, 100_000_000, "rows of one output shard"),
    "output.shard_max_mb": (1, 1_000_000, "MB of one output shard"),
    "output.row_group_rows": (1, 10_000_000, "rows of one Parquet row group"),
    "global.partitions": (1, 100_000, "files per pass-1 task and reduce tasks; fewer are used for small inputs"),
    "global.duckdb_threads": (1, 1_024, "threads of the global step"),
}
#: The same, for stage parameters. MinHash: datatrove (FineWeb) uses 112 permutations and datasketch 128 by
#: default; each one costs 4 bytes per document in pass 1's files and 8 in memory while hashing, so 100
#: million of them would ask ~2.9 TiB for 8k documents.
STAGE_SIZE_BOUNDS = {
    "minhash_dedup": {"num_perm": (2, 1_024, "4 bytes per document each, in pass 1's files and memory"),
                      "word_ngram": (1, 64, "shingle width"), "char_ngram": (1, 64, "shingle width"),
                      "chunk_nodes": (1, 10_000_000, "documents verified in memory at once")},
}


def _check_size(key: str, value, lo: int, hi: int, why: str) -> None:
    if value is None and key.startswith("pipeline"):  # a stage parameter left to the stage's default
        return
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise ConfigError(f"{key}: must be an integer from {lo:,} to {hi:,} ({why}), got {value!r}")


#: The keys that bound memory, not what a run decides (the same output for any value): left out of
#: :func:`decision_hash`, so that a run resumed with more memory (after running out) is the same run.
MEMORY_KEYS = ("memory_limit", "global.duckdb_memory_limit", "global.task_memory_limit")


def decision_hash(cfg: dict) -> str:
    """:func:`config_hash` of ``cfg`` without its :data:`MEMORY_KEYS`: what a run's fingerprint hashes."""
    out = dict(cfg)
    for dotted in MEMORY_KEYS:
        *sections, key = dotted.split(".")
        node = out
        for name in sections:
            node[name] = dict(node[name])
            node = node[name]
        node.pop(key, None)
    return config_hash(out)


def config_hash(cfg: dict) -> str:
    """sha256 of the canonical JSON of a resolved config."""
    blob = json.dumps(cfg, sort_keys=True, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return hashlib.sha256(blob).hexdigest()
