"""Planning tasks, running them (local process pool, Ray), markers and resume.

``LocalExecutor``, ``run``, ``RunError`` and ``RunSummary`` are imported on first use, so that
:mod:`dataclean.exec.local` can be imported (and its fork server started) without the pipeline.
"""
from __future__ import annotations

import importlib

__all__ = ["LocalExecutor", "RunError", "RunSummary", "run"]

_EXPORTS = {"LocalExecutor": "dataclean.exec.local", "RunError": "dataclean.exec.runner",
            "RunSummary": "dataclean.exec.runner", "run": "dataclean.exec.runner"}


def __getattr__(name: str):
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dataclean.exec' has no attribute {name!r}")
