"""Reading one side of a comparison: any input dataclean reads, or a run's output folder, sampled by id hash.

The sample is the ``n`` documents with the smallest ``xxh3_64(seed, id)`` (ties by input order): it depends
only on the ids and the seed, not on file order or batch size, and it is built while streaming (at most
about ``2 n`` documents are held at once), so a side may be much larger than memory.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np
import pyarrow as pa
import xxhash

from dataclean.io.readers import ColumnMapping, InputFileError, discover_inputs, read_shard

__all__ = ["CompareError", "SideSample", "is_run_output", "read_side"]


class CompareError(Exception):
    """A usage or input problem; ``str()`` is the one line shown to the user."""


@dataclass
class SideSample:
    spec: str
    files: list[str]
    records: int  # usable documents read
    bad_records: int
    docs: pa.Table  # the sample, in sample order (by id hash)
    run_output: bool = False
    notes: list[str] = field(default_factory=list)


def is_run_output(path: str) -> bool:
    """A dataclean output folder: ``manifest.json`` next to a ``data/`` folder."""
    return os.path.isdir(path) and os.path.isfile(os.path.join(path, "manifest.json")) \
        and os.path.isdir(os.path.join(path, "data"))


def sample_keys(ids: list[str], seed: int) -> np.ndarray:
    """The sampling key of each id: ``xxh3_64`` of ``"<seed>:<id>"``."""
    prefix = f"{seed}:".encode()
    digest = xxhash.xxh3_64_intdigest
    return np.fromiter((digest(prefix + i.encode("utf-8", "surrogatepass")) for i in ids), dtype=np.uint64,
                       count=len(ids))


def read_side(spec: str, mapping: ColumnMapping, n: int, seed: int, batch_rows: int = 4096) -> SideSample:
    """Read ``spec`` (a file, folder, glob, or a run's output folder, whose ``data/`` shards are read) and
    keep the ``n`` documents with the smallest sampling keys."""
    run_output = is_run_output(spec)
    target = os.path.join(spec, "data") if run_output else spec
    try:
        files = discover_inputs([target])
    except FileNotFoundError as exc:
        raise CompareError(str(exc)) from None
    if not files:
        raise CompareError(f"{spec}: no input files (.parquet, .jsonl, .jsonl.gz, .jsonl.zst) found")
    if run_output:  # data/ holds canonical columns already
        mapping = ColumnMapping(text="text", id="id", source="source", url="url", lang=None)
    kept: pa.Table | None = None
    keys = np.zeros(0, np.uint64)
    order = np.zeros(0, np.int64)  # input order, for ties
    records = bad = 0
    seen = 0
    cols = ["id", "text", "source", "url"]
    for fi, path in enumerate(files):
        try:
            for chunk in read_shard(path, fi, mapping, batch_rows):
                docs = chunk.docs
                bad += chunk.bad.num_rows if chunk.bad is not None else 0
                if docs.num_rows == 0:
                    continue
                records += docs.num_rows
                table = pa.Table.from_batches([docs.select(cols)])
                k = sample_keys(docs.column("id").to_pylist(), seed)
                o = np.arange(seen, seen + docs.num_rows, dtype=np.int64)
                seen += docs.num_rows
                kept = table if kept is None else pa.concat_tables([kept, table])
                keys, order = np.concatenate([keys, k]), np.concatenate([order, o])
                if kept.num_rows > 2 * n:
                    kept, keys, order = _smallest(kept, keys, order, n)
        except InputFileError as exc:
            raise CompareError(f"cannot read {exc}") from None
        except OSError as exc:
            raise CompareError(f"cannot read {path}: {exc.strerror or exc}") from None
    if kept is None or kept.num_rows == 0:
        raise CompareError(f"{spec}: no readable documents")
    kept, keys, order = _smallest(kept, keys, order, n)
    return SideSample(spec=spec, files=files, records=records, bad_records=bad, docs=kept.combine_chunks(),
                      run_output=run_output)


def _smallest(table: pa.Table, keys: np.ndarray, order: np.ndarray, n: int):
    idx = np.lexsort((order, keys))[:n]
    return table.take(pa.array(idx)), keys[idx], order[idx]
