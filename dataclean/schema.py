"""The declared schemas that flow between the parts of a run.

Every reader emits record batches of ``DOC_SCHEMA``; stages add their signal columns (each stage declares
them); the ledger (``rejected/``) uses ``LEDGER_FIELDS`` plus the signal columns computed before removal.
Nothing here is inferred from data, so an empty shard has the same schema as a full one.
"""
from __future__ import annotations

import pyarrow as pa

#: The canonical document columns every reader produces.
DOC_FIELDS = [
    pa.field("id", pa.string(), nullable=False),
    pa.field("text", pa.string(), nullable=False),
    pa.field("source", pa.string()),
    pa.field("url", pa.string()),
    pa.field("lang", pa.string()),
    pa.field("meta", pa.string()),  # JSON object of the input's other columns, or null
    pa.field("origin_file", pa.string(), nullable=False),
    pa.field("origin_row", pa.int64(), nullable=False),
    # Internal, run-unique key: input file index << 40 | row. Never written to data/.
    pa.field("doc_key", pa.int64(), nullable=False),
]
DOC_SCHEMA = pa.schema(DOC_FIELDS)

#: Columns every surviving document carries out of pass 1 (after the stages ran).
BASE_SIGNAL_FIELDS = [
    pa.field("n_chars", pa.int64()),
    pa.field("n_tokens", pa.int64()),
]

#: What a removal records. ``value`` is the signal value that decided it; ``threshold`` the bound it crossed.
LEDGER_FIELDS = [
    pa.field("id", pa.string()),
    pa.field("source", pa.string()),
    pa.field("lang", pa.string()),
    pa.field("url", pa.string()),
    pa.field("meta", pa.string()),
    pa.field("origin_file", pa.string()),
    pa.field("origin_row", pa.int64()),
    pa.field("stage", pa.string()),
    pa.field("rule", pa.string()),
    pa.field("reason", pa.string()),
    pa.field("value", pa.float64()),
    pa.field("threshold", pa.float64()),
    pa.field("detail", pa.string()),
    pa.field("dup_of", pa.string()),
    pa.field("n_chars", pa.int64()),
    pa.field("n_tokens", pa.int64()),
    pa.field("text", pa.string()),
    pa.field("raw", pa.binary()),
]

#: The field metadata of an input's extra column in data/ (after the signal columns; see docs/inputs.md): it
#: tells a reader of data/ which columns came from the input as they were, not from a stage.
EXTRA_FIELD_METADATA = {b"dataclean.extra": b"input"}

#: Columns of data/ shards before the signal columns (and the input's extra columns).
OUTPUT_DOC_NAMES = ["id", "text", "source", "lang", "url", "meta", "origin_file", "origin_row", "n_chars", "n_tokens"]


def doc_key(file_index: int, row: int) -> int:
    """The run-unique key of a record: its input file's index and its row in that file."""
    return (file_index << 40) | row
