"""Per-document features of one side: lengths, compression ratio, language and every rule signal.

The rule signals come from the configured pipeline's pass-1 stages, in order, up to and including
``quality_score`` (global stages are skipped). Each stage is called through
:func:`dataclean.pipeline.apply_stage` and its decisions are ignored, so no document is removed and every
document gets every signal. The stages' source scopes (``only_kinds``, ``skip_sources`` ...) are lifted: a comparison
needs the same signals on both sides whatever their ``source`` labels (a synthetic candidate labelled
``synthetic`` against a ``web`` reference would otherwise get null Gopher signals on one side only).
Stages that rewrite the text (``normalize``, ``c4``) hand the rewritten text to the next stages, as in a
run; the text features (lengths, compression, diversity, n-grams, near-duplicates) are measured on the text
after ``normalize`` (the document as it would enter the pipeline, line endings and controls fixed).

Features added here:

* ``n_chars`` (Unicode characters) and ``n_tokens`` (:class:`dataclean.tokens.TokenCounter` of the config's
  ``tokens`` section, as a run counts them: :func:`dataclean.tokens.estimate_tokens` unless a tokenizer is
  configured, with the code rate for ``source`` code);
* ``compression_ratio``: zstd (level 3, no checksum, no content size in the frame) compressed bytes / UTF-8
  bytes of the document; null for an empty text. Repetitive or templated text compresses well (low ratio);
  very short documents pay the frame header (ratio above 1).
"""
from __future__ import annotations

import copy

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import zstandard

from dataclean.pipeline import apply_stage, build_stage
from dataclean.stages.base import Stage
from dataclean.text.tokenize import WORDS_COLUMN
from dataclean.tokens import TokenCounter, count_chars

__all__ = ["BASE_FEATURES", "build_signal_stages", "compute_features", "compression_ratios", "feature_names"]

#: Features measured here, before the stages' signals.
BASE_FEATURES = ["n_chars", "n_tokens", "compression_ratio"]


def build_signal_stages(config: dict) -> list[Stage]:
    """The pass-1 stages of ``config``'s pipeline up to and including the first ``quality_score`` (all of
    them if there is none), global stages left out, source scopes lifted."""
    stages: list[Stage] = []
    for spec in config["pipeline"]:
        stage = build_stage(copy.deepcopy(spec))
        if stage.is_global:
            continue
        stage.only_sources = None
        stage.skip_sources = ()
        stage.only_kinds = None
        stage.skip_kinds = ()
        stages.append(stage)
        if stage.kind == "quality_score":
            break
    return stages


def compression_ratios(texts: pa.Array, level: int = 3) -> pa.Array:
    """zstd compressed size / raw UTF-8 size per document (float64, null for empty or null text)."""
    cctx = zstandard.ZstdCompressor(level=level, write_checksum=False, write_content_size=False)
    out = np.full(len(texts), np.nan)
    compress = cctx.compress
    for i, t in enumerate(texts.to_pylist()):
        if t:
            raw = t.encode("utf-8", "surrogatepass")
            out[i] = len(compress(raw)) / len(raw)
    return pa.array(out, pa.float64(), from_pandas=True)


def _is_numeric(t: pa.DataType) -> bool:
    return pa.types.is_integer(t) or pa.types.is_floating(t) or pa.types.is_boolean(t)


def feature_names(stages: list[Stage]) -> list[str]:
    """The numeric features, in order: :data:`BASE_FEATURES`, then every numeric or boolean signal column of
    the stages."""
    names: list[str] = list(BASE_FEATURES)
    for s in stages:
        for f in s.signal_fields:
            if _is_numeric(f.type) and f.name not in names:
                names.append(f.name)
    return names


def compute_features(docs: pa.Table, stages: list[Stage], batch_rows: int = 2048,
                     token_counter: TokenCounter | None = None) -> tuple[pa.Array, pa.Array, dict[str, np.ndarray]]:
    """``(texts, langs, features)`` of the sample ``docs`` (columns id, text, source, url): the normalized
    texts, the ``lang`` column the langid stage set (null without one), and every numeric feature as a
    float64 array with NaN for null (booleans as 0/1), keyed by column name, in a fixed order."""
    texts_out: list[pa.Array] = []
    langs_out: list[pa.Array] = []
    cols: dict[str, list[np.ndarray]] = {}
    names = feature_names(stages)
    count_tokens = token_counter or TokenCounter()
    for batch in docs.to_batches(max_chunksize=batch_rows):
        if batch.num_rows == 0:
            continue
        batch = pa.RecordBatch.from_arrays([batch.column(c) for c in batch.schema.names],
                                           names=batch.schema.names)
        text = None
        for stage in stages:
            result = apply_stage(stage, batch)
            batch = result.batch
            if stage.rewrites_text and WORDS_COLUMN in batch.schema.names:
                batch = batch.drop_columns([WORDS_COLUMN])
            if text is None and stage.kind == "normalize":
                text = batch.column("text")
        if text is None:
            text = batch.column("text")
        texts_out.append(text)
        langs_out.append(batch.column("lang") if "lang" in batch.schema.names
                         else pa.nulls(batch.num_rows, pa.string()))
        source = batch.column("source") if "source" in batch.schema.names else None
        base = {"n_chars": count_chars(text), "n_tokens": count_tokens(text, source),
                "compression_ratio": compression_ratios(text)}
        for name in names:
            arr = base.get(name)
            if arr is None:
                idx = batch.schema.get_field_index(name)
                arr = batch.column(idx) if idx >= 0 else pa.nulls(batch.num_rows, pa.float64())
            if pa.types.is_boolean(arr.type):
                arr = pc.cast(arr, pa.int8())
            cols.setdefault(name, []).append(
                pc.cast(arr, pa.float64()).to_numpy(zero_copy_only=False).astype(np.float64))
    texts = pa.concat_arrays(texts_out) if texts_out else pa.array([], pa.string())
    langs = pa.concat_arrays([a.cast(pa.string()) for a in langs_out]) if langs_out else pa.array([], pa.string())
    features = {name: np.concatenate(cols[name]) if name in cols else np.zeros(0) for name in names}
    return texts, langs, features
