"""Stages, one module per kind. ``REGISTRY`` maps the names used in YAML recipes to the classes."""
from dataclean.stages.base import Check, Decisions, RuleSpec, Stage, StageResult, with_columns
from dataclean.stages.c4 import C4
from dataclean.stages.dedup_minhash import MinHashDedup
from dataclean.stages.decontaminate import Decontaminate
from dataclean.stages.dedup_exact import ExactDedup, content_hash, content_key_text
from dataclean.stages.extract import Extract
from dataclean.stages.langid import LangID
from dataclean.stages.fineweb import FineWebQuality
from dataclean.stages.garbled import Garbled
from dataclean.stages.gopher import GopherQuality, GopherRepetition
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
                 ExactDedup, MinHashDedup, QualityFilter)
REGISTRY: dict[str, type[Stage]] = {cls.kind: cls for cls in STAGE_CLASSES}

__all__ = ["Check", "Decisions", "RuleSpec", "Stage", "StageResult", "with_columns", "content_hash",
           "content_key_text", "REGISTRY", *(cls.__name__ for cls in STAGE_CLASSES)]
