"""dataclean: streaming, explainable pretraining data cleaning.

Library use::

    import dataclean
    summary = dataclean.run(["shards/"], "out/", config="my_rules.yaml", workers=2)
    pipe = dataclean.Pipeline([dataclean.stages.Normalize(), ...])   # or Pipeline.from_config(cfg)
    outcome = pipe.process(record_batch)                            # kept rows + ledger rows

``run`` needs no ``if __name__ == "__main__":``: it works at a script's top level, in a session whose main module
has no file (``python -c``, stdin, a notebook) and in a worker thread, because its workers do not import the
caller's script (only a stage class defined in the script makes them: see docs/library.md). ``config`` may be a
dict, read like the YAML file of the same content.

The names below are imported on first use (PEP 562), so that ``import dataclean`` costs nothing until one is
needed: the command line starts its workers' fork server before it imports the pipeline (see
:func:`dataclean.exec.local.prestart`).
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

from dataclean.version import __version__

_EXPORTS = {
    "run": "dataclean.exec.runner", "RunSummary": "dataclean.exec.runner", "RunError": "dataclean.exec.runner",
    "Pipeline": "dataclean.pipeline", "BatchOutcome": "dataclean.pipeline", "build_stage": "dataclean.pipeline",
    "resolve_config": "dataclean.config", "ConfigError": "dataclean.config",
    "verify": "dataclean.audit.verify", "VerifyReport": "dataclean.audit.verify",
}

__all__ = ["run", "RunSummary", "RunError", "Pipeline", "BatchOutcome", "build_stage", "resolve_config",
           "ConfigError", "verify", "VerifyReport", "stages", "__version__"]


def __getattr__(name: str):
    if name == "stages":
        return importlib.import_module("dataclean.stages")
    if name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'dataclean' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


if TYPE_CHECKING:  # for type checkers and IDEs: the same names, imported eagerly
    from dataclean import stages
    from dataclean.audit.verify import VerifyReport, verify
    from dataclean.config import ConfigError, resolve_config
    from dataclean.exec.runner import RunError, RunSummary, run
    from dataclean.pipeline import BatchOutcome, Pipeline, build_stage
