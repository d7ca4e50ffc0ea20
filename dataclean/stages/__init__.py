"""Stages, one module per kind. ``REGISTRY`` maps the names used in YAML recipes to the built-in classes;
:func:`resolve_stage` also finds plug-in stages (see docs/plugins.md):

* ``stage: mypkg.filters:MyFilter`` — an import path and a class, imported from ``sys.path`` or, failing that,
  from the current folder (so a module next to the recipe works with the ``dataclean`` command too);
* ``stage: myfilter`` — a name that an installed package registers in the ``dataclean.stages`` entry-point
  group (``[project.entry-points."dataclean.stages"] myfilter = "mypkg.filters:MyFilter"``).

Built-in names always win: an entry point cannot replace a built-in stage, and a plug-in class whose ``kind`` is a
built-in's is refused (the ledger, the report and ``dataclean rules`` name stages by kind). Every failure is one
line (a :class:`ValueError`) that names the entry and what to fix; config validation prefixes it with the entry's
position.
"""
from __future__ import annotations

import difflib
import hashlib
import importlib
import os
import re
import sys

from dataclean.stages.base import Check, Decisions, Filter, RuleSpec, Stage, StageResult, with_columns
from dataclean.stages.c4 import C4
from dataclean.stages.decontaminate import Decontaminate
from dataclean.stages.dedup_exact import ExactDedup, content_hash, content_key_text
from dataclean.stages.dedup_minhash import MinHashDedup
from dataclean.stages.dedup_semantic import SemanticDedup
from dataclean.stages.embed import Embed
from dataclean.stages.extract import Extract
from dataclean.stages.fineweb import FineWebQuality
from dataclean.stages.garbled import Garbled
from dataclean.stages.gopher import GopherQuality, GopherRepetition
from dataclean.stages.langid import LangID
from dataclean.stages.lists import WordLists
from dataclean.stages.normalize import Normalize
from dataclean.stages.pii import PIIMask
from dataclean.stages.quality import QualityScore
from dataclean.stages.quality_filter import QualityFilter
from dataclean.stages.runs import LongTokens, RepetitionRuns
from dataclean.stages.spam import SeoSpam
from dataclean.stages.url_filter import UrlFilter

STAGE_CLASSES = (UrlFilter, Extract, Normalize, LangID, Garbled, RepetitionRuns, LongTokens, GopherRepetition,
                 GopherQuality, SeoSpam, WordLists, C4, FineWebQuality, PIIMask, Decontaminate, QualityScore,
                 ExactDedup, MinHashDedup, QualityFilter, Embed, SemanticDedup)
REGISTRY: dict[str, type[Stage]] = {cls.kind: cls for cls in STAGE_CLASSES}
#: The built-in kinds, fixed at import: ``REGISTRY`` stays writable for library users, but a name added there is
#: theirs, not dataclean's, and does not make a plug-in's ``kind`` a clash.
BUILTIN_KINDS = frozenset(REGISTRY)

#: The entry-point group an installed package registers its stages in (name -> ``module:Class``).
ENTRY_POINT_GROUP = "dataclean.stages"
_IMPORT_PATH = re.compile(r"^[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*:[A-Za-z_]\w*$")


def resolve_stage(kind) -> type[Stage]:
    """The class of a recipe entry's ``stage`` value: a built-in kind (or a name a library user put in
    ``REGISTRY``), a ``module:Class`` import path, or a ``dataclean.stages`` entry-point name. Raises a one-line
    :class:`ValueError` naming the fix. Called by :func:`dataclean.pipeline.build_stage` in the driver and again
    in every worker process, which builds its stages from the same recipe entries."""
    if isinstance(kind, str) and kind in REGISTRY:
        return REGISTRY[kind]
    if not isinstance(kind, str) or not kind.strip():
        raise ValueError(f"stage: expected a stage name or module:Class, got {kind!r}")
    if ":" in kind:
        cls = _import_class(kind)
    else:
        points = _entry_points()
        if kind not in points:
            plugins = sorted(points)
            close = difflib.get_close_matches(kind, [*REGISTRY, *plugins], n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            extra = f"; installed plug-ins: {', '.join(plugins)}" if plugins else ""
            raise ValueError(f"unknown stage {kind!r} (known stages: {', '.join(sorted(REGISTRY))}{extra}; or a "
                             f"plug-in as module:Class){hint}")
        cls = _load_entry_point(kind, points[kind])
    return check_plugin_class(cls, kind)


def find_stage(kind) -> type[Stage] | None:
    """:func:`resolve_stage`, or None where it would fail (for code that only asks a property of a stage class
    before the config is validated: validation reports the failure)."""
    try:
        return resolve_stage(kind)
    except ValueError:
        return None


def is_global_kind(kind) -> bool:
    """Whether a recipe entry's ``stage`` names a global stage (False where it names nothing valid)."""
    cls = find_stage(kind)
    return cls is not None and cls.is_global


def is_plugin(cls: type) -> bool:
    """Is ``cls`` a stage from outside the dataclean package (a plug-in, or a class a library user put in
    ``REGISTRY``)?"""
    return cls.__module__.split(".")[0] != "dataclean"


def plugin_path(cls: type) -> str | None:
    """The ``sys.path`` folder a plug-in class was imported from (the folder that holds its top-level module or
    package), or None for a built-in or a class without a file. The driver writes it into the recipe entries it
    hands to its tasks (:meth:`dataclean.pipeline.Pipeline.task_config`), so that a worker imports the plug-in
    from where the driver did even when the worker's ``sys.path`` lacks that folder: a Ray worker gets the
    driver's working folder and environment (``PYTHONPATH``), not folders the driver added to ``sys.path`` at run
    time. (The local pool's workers get the driver's ``sys.path`` from ``multiprocessing`` when the pool starts.)"""
    if not is_plugin(cls):
        return None
    top = sys.modules.get(cls.__module__.split(".")[0])
    if top is None:
        return None
    if getattr(top, "__path__", None):  # a package (regular or namespace): its folder's parent
        folder = os.path.dirname(os.path.abspath(list(top.__path__)[0]))
    elif getattr(top, "__file__", None):
        folder = os.path.dirname(os.path.abspath(top.__file__))
    else:
        return None
    return folder


def plugin_digest(cfg: dict) -> dict[str, str]:
    """sha256 of the source file of each plug-in's class, by the entry's ``stage`` value. A run's markers are
    valid for its config and code: this is what a run fingerprint needs so that a rerun after an edit of a
    plug-in runs again instead of resuming (dataclean's own code is covered by its version). Only the module
    that defines the class is read: helpers it imports from other files are not covered."""
    out: dict[str, str] = {}
    for spec in cfg.get("pipeline") or []:
        kind = spec.get("stage") if isinstance(spec, dict) else None
        cls = find_stage(kind)
        if cls is None or not is_plugin(cls):
            continue
        path = getattr(sys.modules.get(cls.__module__), "__file__", None)
        if path and os.path.isfile(path):
            with open(path, "rb") as fh:
                out[kind] = hashlib.sha256(fh.read()).hexdigest()
    return out


def check_plugin_class(cls, where: str) -> type[Stage]:
    """Refuse what the pipeline cannot run: not a :class:`Stage` subclass, no ``kind``, a built-in's kind,
    a signal column that would overwrite a document column; for a :class:`Filter`, no ``signal`` or a
    ``compare`` other than ``max`` / ``min``."""
    from dataclean.schema import BASE_SIGNAL_FIELDS, DOC_FIELDS, LEDGER_FIELDS

    name = getattr(cls, "__qualname__", repr(cls))
    if not (isinstance(cls, type) and issubclass(cls, Stage)):
        raise ValueError(f"stage {where}: {name} is not a stage class; subclass dataclean.stages.Filter "
                         "(one signal, one threshold) or dataclean.stages.Stage")
    if not is_plugin(cls):
        return cls
    kind = getattr(cls, "kind", "")
    if not isinstance(kind, str) or not kind.isidentifier():
        raise ValueError(f"stage {where}: class {name} must set kind = \"some_name\" (an identifier: the stage's "
                         f"name in the ledger, the report and dataclean rules), got {kind!r}")
    if kind in BUILTIN_KINDS and REGISTRY.get(kind) is not cls:
        raise ValueError(f"stage {where}: class {name} has kind {kind!r}, a built-in stage's; give it its own kind")
    reserved = {f.name for f in DOC_FIELDS + BASE_SIGNAL_FIELDS + LEDGER_FIELDS}
    for field in cls.signal_fields:
        if field.name in reserved:
            raise ValueError(f"stage {where}: signal column {field.name!r} of {name} is a document or ledger "
                             f"column; name it after the stage (e.g. {kind}_{field.name})")
    if issubclass(cls, Filter):
        if not isinstance(cls.signal, str) or not cls.signal.isidentifier():
            raise ValueError(f"stage {where}: class {name} must set signal = \"column_name\" (the column its "
                             f"compute() fills), got {cls.signal!r}")
        if cls.compare not in ("max", "min"):
            raise ValueError(f"stage {where}: class {name} has compare = {cls.compare!r}; use \"max\" (removed "
                             "above the threshold) or \"min\" (removed below it)")
    return cls


def _import_class(path: str) -> type:
    """``module:Class`` imported; the current folder is tried when ``sys.path`` does not have the module (the
    ``dataclean`` command's ``sys.path`` starts with its script's folder, not the current one)."""
    if not _IMPORT_PATH.match(path):
        raise ValueError(f"stage {path!r}: expected module:Class, e.g. mypkg.filters:MyFilter")
    module_name, attr = path.split(":")
    try:
        module = _import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            raise ValueError(f"stage {path}: no module named {exc.name} (looked on sys.path and in the current "
                             f"folder {os.getcwd()}); install its package, run from the folder that holds it or "
                             "add that folder to PYTHONPATH") from None
        raise ValueError(f"stage {path}: module {module_name} needs module {exc.name}, which is not "
                         "installed") from None
    except Exception as exc:  # the plug-in's own code failed to import (syntax error, a bug at import time)
        raise ValueError(f"stage {path}: importing {module_name} failed: {type(exc).__name__}: {exc}") from None
    if not hasattr(module, attr):
        names = [n for n in dir(module) if isinstance(getattr(module, n, None), type)]
        close = difflib.get_close_matches(attr, names, n=1)
        hint = f" (did you mean {close[0]}?)" if close else ""
        raise ValueError(f"stage {path}: module {module_name} has no {attr}{hint}")
    return getattr(module, attr)


def _import_module(module_name: str):
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        top = module_name.split(".")[0]
        cwd = os.getcwd()
        on_path = {os.path.abspath(p) if p else cwd for p in sys.path}
        found_here = os.path.isdir(os.path.join(cwd, top)) or os.path.isfile(os.path.join(cwd, top + ".py"))
        if exc.name != top or cwd in on_path or not found_here:
            raise
        sys.path.append(cwd)  # (appended: it never shadows an installed module)
        importlib.invalidate_caches()
        return importlib.import_module(module_name)


def _entry_points() -> dict:
    """The ``dataclean.stages`` entry points by name (each name's list: two packages may register one name).
    Looked up only for names that are not built-in: scanning the installed packages' metadata costs 0.1-0.5 s."""
    from importlib.metadata import entry_points

    key = tuple(sys.path)  # (the packages installed where this process looks: a change of sys.path scans again)
    if key not in _ENTRY_POINTS:
        out: dict[str, list] = {}
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            if ep.name not in out or all(ep.value != e.value for e in out[ep.name]):
                out.setdefault(ep.name, []).append(ep)
        _ENTRY_POINTS.clear()
        _ENTRY_POINTS[key] = out
    return _ENTRY_POINTS[key]


_ENTRY_POINTS: dict[tuple, dict] = {}


def _load_entry_point(name: str, points: list) -> type:
    def who(ep) -> str:
        dist = getattr(ep, "dist", None)
        return f"{ep.value} (package {dist.name} {dist.version})" if dist is not None else ep.value

    if len(points) > 1:
        raise ValueError(f"stage {name}: several installed packages register it in {ENTRY_POINT_GROUP}: "
                         f"{'; '.join(sorted(who(ep) for ep in points))}; uninstall all but one")
    ep = points[0]
    if not _IMPORT_PATH.match(ep.value.replace(" ", "")):
        raise ValueError(f"stage {name}: entry point {who(ep)} is not module:Class")
    try:
        return _import_class(ep.value.replace(" ", ""))
    except ValueError as exc:
        raise ValueError(f"stage {name} = {who(ep)}: {str(exc).split(': ', 1)[1]}") from None


__all__ = ["Check", "Decisions", "Filter", "RuleSpec", "Stage", "StageResult", "with_columns", "content_hash",
           "content_key_text", "REGISTRY", "ENTRY_POINT_GROUP", "resolve_stage", "find_stage", "is_plugin",
           "plugin_digest",
           *(cls.__name__ for cls in STAGE_CLASSES)]
