"""The ``embed`` stage (pass 1): one embedding per document, from a local model folder.

Parameters:

* ``model`` — the model folder (required): a model2vec (static) folder, an ONNX export with its
  ``tokenizer.json``, or a sentence-transformers folder (:mod:`dataclean.embed.models`). Never downloaded: a
  name that is not a local folder is refused with the command that fetches it;
* ``backend`` — ``auto`` (from the folder's files), ``static``, ``onnx`` or ``sentence-transformers``;
* ``device`` — ``auto`` (a GPU when the backend sees one), ``cpu`` or ``cuda``;
* ``threads`` — threads of one worker's embedder (default 1: the process pool runs one worker per core);
* ``max_tokens`` — tokens embedded per document or window (default: the model's limit: its
  ``max_seq_length``; 512 for a static model, as model2vec's own ``encode``);
* ``long_text`` — ``truncate`` (the first ``max_tokens`` tokens) or ``windows`` (consecutive windows of
  ``max_tokens`` tokens, at most ``max_windows``, averaged weighted by their token counts);
* ``batch_size`` — texts per forward pass;
* ``max_chars`` — characters of a document tokenized at most (default ``32 * max_tokens * windows``: no
  tokenizer in use makes a token of more than 32 characters on text, so the embedded tokens are those of the
  whole text, and a 5 MB document is not tokenized whole to keep its first 256 tokens).

Column added: ``embedding`` — the L2-normalised vector as ``dim`` float16 (:mod:`dataclean.embed.vectors`),
null for an empty text and for the documents outside the stage's scope. It is internal: pass-1 files keep it
for ``semantic_dedup``; the cleaned shards do not carry it. The stage removes nothing.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.embed.models import BACKENDS, LONG_TEXT, EmbedderError, load_embedder
from dataclean.embed.vectors import COLUMN, embedding_type, encode
from dataclean.pickling import ReloadsModel
from dataclean.stages.base import RuleSpec, Stage, StageResult, batch_text, with_columns


class Embed(ReloadsModel, Stage):
    """Add each document's embedding (``embedding``, float16) from a local model folder; removes nothing."""

    kind = "embed"
    signal_fields: list = []
    internal_columns = (COLUMN,)
    rule_specs: list[RuleSpec] = []

    def __init__(self, model: str | None = None, backend: str = "auto", device: str = "auto", threads: int = 1,
                 max_tokens: int | None = None, long_text: str = "truncate", max_windows: int = 8,
                 batch_size: int = 64, max_chars: int | None = None, name: str | None = None):
        super().__init__(name)
        if model is None:
            raise ValueError(f"stage {self.name!r} needs model: the folder of a local embedding model "
                             "(docs/embeddings.md lists the kinds and how to fetch one)")
        if backend not in BACKENDS:
            raise ValueError(f"{self.name}.backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
        if long_text not in LONG_TEXT:
            raise ValueError(f"{self.name}.long_text must be one of {', '.join(LONG_TEXT)}, got {long_text!r}")
        if max_chars is not None and (isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 1):
            raise ValueError(f"{self.name}.max_chars must be a whole number >= 1, got {max_chars!r}")
        self.model = str(model)
        self.backend, self.device, self.threads = backend, device, threads
        self.max_tokens, self.long_text, self.max_windows = max_tokens, long_text, max_windows
        self.batch_size, self.max_chars = batch_size, max_chars
        self._load_model()

    def _load_model(self) -> None:
        try:
            self._model = load_embedder(self.model, backend=self.backend, device=self.device,
                                        threads=self.threads, max_tokens=self.max_tokens,
                                        long_text=self.long_text, batch_size=self.batch_size,
                                        max_windows=self.max_windows)
        except EmbedderError as e:
            raise ValueError(f"stage {self.name!r}: {e}") from None
        self.signal_fields = [pa.field(COLUMN, embedding_type(self._model.dim))]

    @property
    def embedder(self):
        return self._model

    def char_limit(self) -> int:
        if self.max_chars is not None:
            return self.max_chars
        windows = self.max_windows if self.long_text == "windows" else 1
        return 32 * self._model.max_tokens * windows

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        text = batch_text(batch)
        n = batch.num_rows
        lengths = pc.fill_null(pc.utf8_length(text), 0).to_numpy(zero_copy_only=False)
        valid = lengths > 0
        rows = np.flatnonzero(valid)
        vectors = np.zeros((n, self._model.dim), np.float32)
        if len(rows):
            cut = pc.utf8_slice_codeunits(text.take(pa.array(rows)), 0, self.char_limit())
            vectors[rows] = self._model.embed(cut.to_pylist())
        return StageResult(with_columns(batch, {COLUMN: encode(vectors, valid)}))
