"""dataclean: streaming, explainable pretraining data cleaning.

Library use::

    import dataclean
    summary = dataclean.run(["shards/"], "out/", config="my_rules.yaml", workers=2)
    pipe = dataclean.Pipeline([dataclean.stages.Normalize(), ...])   # or Pipeline.from_config(cfg)
    outcome = pipe.process(record_batch)                            # kept rows + ledger rows
"""
from dataclean import stages
from dataclean.audit.verify import VerifyReport, verify
from dataclean.config import ConfigError, resolve_config
from dataclean.exec.runner import RunError, RunSummary, run
from dataclean.pipeline import BatchOutcome, Pipeline, build_stage

__version__ = "0.1.0"

__all__ = ["run", "RunSummary", "RunError", "Pipeline", "BatchOutcome", "build_stage", "resolve_config",
           "ConfigError", "verify", "VerifyReport", "stages", "__version__"]
