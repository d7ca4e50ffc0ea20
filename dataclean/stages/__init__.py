"""Stages, one module per kind. ``REGISTRY`` maps the names used in YAML recipes to the classes."""
from dataclean.stages.base import Check, Decisions, RuleSpec, Stage, StageResult, with_columns
from dataclean.stages.dedup_exact import ExactDedup, content_hash, content_key_text
from dataclean.stages.normalize import Normalize

REGISTRY: dict[str, type[Stage]] = {cls.kind: cls for cls in (Normalize, ExactDedup)}

__all__ = ["Check", "Decisions", "RuleSpec", "Stage", "StageResult", "with_columns", "Normalize", "ExactDedup",
           "content_hash", "content_key_text", "REGISTRY"]
