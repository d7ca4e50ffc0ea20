"""``dataclean export``: the kept documents of a run, tokenized, as training files that say where every token
came from.

Order. The export holds the run's kept rows in the run's own order: ``data/`` shards by name, rows in file
order (a mixture's extra epochs are rows there already, so they come out as repeated documents, as the run
decided). Each document is its tokens (``encode_batch``, no special tokens) followed by the end-of-document
token.

Files, in the export folder ``EXPORT``:

* ``export.bin`` / ``export.idx`` (``--format megatron``): Megatron-LM / NeMo indexed dataset, one sequence
  per document, the ``MMIDIDX`` layout megatron-core's ``IndexedDataset`` reads (:mod:`.megatron`); the token
  dtype is uint16 for vocabularies below 65,500 and int32 above, as Megatron chooses. ``data_path`` is
  ``EXPORT/export``.
* ``tokens/part-NNNNN.parquet`` (``--format parquet``): ``id`` and ``tokens`` (``list<int32>``) per document,
  for HF / torchtitan-style loaders.
* ``export.docs.parquet``, the provenance sidecar, one row per document in export order: ``ordinal``,
  ``token_offset`` and ``n_tokens`` (end-of-document token included; the offsets sum to the ``.bin`` size),
  the run's ``id``, ``source``, ``origin_file``, ``origin_row``, ``mix_epoch``, ``quality_score``, and the
  export's and the run's fingerprints. ``dataclean sql EXPORT`` queries it as ``export_docs`` next to the run's
  ``kept`` and ``removed``.
* ``export.json``: tokenizer (path, sha256, vocabulary size, end-of-document id), dtype, counts, the run
  folder and fingerprints.

Work. One task per ``data/`` shard, in a process pool of ``--workers``; each writes ``parts/part-NNNNN.*`` and
a marker, atomically. The driver then concatenates the parts in order, so the files are byte-identical for
any worker count. A killed export resumes from its markers; an export folder made from another run, with
another tokenizer or format is refused (``--fresh`` starts over). Memory: a task holds one batch of
documents and its tokens (``--batch-docs``, 2,048), so the peak does not grow with the corpus.
"""
from __future__ import annotations

import functools
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from itertools import chain

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dataclean.export import megatron
from dataclean.io.writers import WriteError, atomic_write_table, write_json_atomic

EXPORT_VERSION = 1
EOD_CANDIDATES = ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<|eos|>", "[EOS]", "<|im_end|>")
MAX_BATCH_BYTES = 4 << 20  # text per encode call: a batch of long documents must not set the peak memory
SIDECAR_COLUMNS = ("id", "source", "origin_file", "origin_row", "mix_epoch", "quality_score")


class ExportError(Exception):
    """The export cannot run (not a finished run, bad tokenizer, a folder of another export): one line."""


def sha256_file(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def load_tokenizer(path: str):
    from dataclean.tokens import _load_tokenizer
    try:
        return _load_tokenizer(path)
    except (ValueError, ImportError) as exc:
        raise ExportError(str(exc)) from None


def eod_id(tok, eod_token: str | None) -> tuple[str, int]:
    """The end-of-document token and its id: ``eod_token`` if given, else the first of
    :data:`EOD_CANDIDATES` the vocabulary has."""
    names = [eod_token] if eod_token else list(EOD_CANDIDATES)
    for name in names:
        i = tok.token_to_id(name)
        if i is not None:
            return name, int(i)
    if eod_token:
        raise ExportError(f"the tokenizer has no token {eod_token!r}; give the end-of-document token with --eod-token")
    raise ExportError("the tokenizer has none of the usual end-of-document tokens (" + ", ".join(EOD_CANDIDATES)
                      + "); name it with --eod-token")


@functools.lru_cache(maxsize=1)
def _cached_tokenizer(path: str, mtime: float):
    """One tokenizer per worker process, loaded once for all its shards (a 150k vocabulary takes ~1 s and
    ~100 MB, and reloading it per shard made the heap grow with the shard count)."""
    return load_tokenizer(path)


@dataclass
class PartSpec:
    task: int
    shard: str
    folder: str
    tokenizer: str
    eod: int
    dtype: str
    fmt: str
    fingerprint: str
    batch_docs: int


def _by_bytes(batch: pa.RecordBatch, limit: int):
    """``batch`` cut into consecutive slices of at most ``limit`` bytes of text (at least one row each)."""
    import pyarrow.compute as pc
    sizes = pc.fill_null(pc.binary_length(batch.column("text")), 0).to_numpy(zero_copy_only=False)
    start, acc = 0, 0
    for i, n in enumerate(sizes):
        if acc and acc + n > limit:
            yield batch.slice(start, i - start)
            start, acc = i, 0
        acc += int(n)
    if start < batch.num_rows:
        yield batch.slice(start)


def _part(folder: str, task: int, ext: str) -> str:
    return os.path.join(folder, "parts", f"part-{task:05d}.{ext}")


def export_part(spec: PartSpec) -> dict:
    """Tokenize one ``data/`` shard: ``parts/part-NNNNN.bin`` (tokens), ``.lens.npy`` (tokens per document),
    ``.docs.parquet`` (its sidecar rows), with ``--format parquet`` also ``tokens/part-NNNNN.parquet``, and the
    marker ``.done.json`` last."""
    done = _part(spec.folder, spec.task, "done.json")
    if os.path.isfile(done):
        with open(done, encoding="utf-8") as fh:
            m = json.load(fh)
        if m.get("fingerprint") == spec.fingerprint:
            return m
    from dataclean.tokens import _configure_threads
    _configure_threads(1)
    tok = _cached_tokenizer(spec.tokenizer, os.path.getmtime(spec.tokenizer))
    dtype = np.dtype(spec.dtype)
    pf = pq.ParquetFile(spec.shard)
    names = set(pf.schema_arrow.names)
    cols = ["text"] + [c for c in SIDECAR_COLUMNS if c in names]
    bin_path = _part(spec.folder, spec.task, "bin")
    os.makedirs(os.path.dirname(bin_path), exist_ok=True)
    tmp_bin = bin_path + f".{os.getpid()}.tmp"
    lens_parts, side_parts, tok_parts = [], [], []
    docs = tokens = 0
    try:
        with open(tmp_bin, "wb") as out:
            for whole in pf.iter_batches(batch_size=spec.batch_docs, columns=cols):
                for batch in _by_bytes(whole, MAX_BATCH_BYTES):
                    texts = batch.column("text").to_pylist()
                    enc = tok.encode_batch([t or "" for t in texts], add_special_tokens=False)
                    ids = [e.ids for e in enc]
                    lens = np.fromiter(map(len, ids), np.int64, len(ids)) + 1
                    ends = np.cumsum(lens)
                    flat = np.empty(int(ends[-1]) if len(ends) else 0, dtype)
                    body = np.ones(len(flat), bool)
                    body[ends - 1] = False
                    flat[body] = np.array(list(chain.from_iterable(ids)), np.int64)  # (chain: C speed, ~20 ns a token)
                    flat[ends - 1] = spec.eod
                    out.write(flat.tobytes())
                    lens_parts.append(lens.astype(np.int32))
                    side_parts.append(pa.table({c: batch.column(c) for c in cols if c != "text"}))
                    if spec.fmt == "parquet":
                        offsets = np.concatenate([[0], ends]).astype(np.int64)
                        tok_parts.append(pa.table({
                            "id": batch.column("id") if "id" in names else pa.nulls(len(ids), pa.string()),
                            "tokens": pa.LargeListArray.from_arrays(pa.array(offsets), pa.array(flat.astype(np.int32)))
                            .cast(pa.list_(pa.int32()))}))
                    docs += len(ids)
                    tokens += int(lens.sum())
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp_bin, bin_path)
    except OSError as exc:
        if os.path.exists(tmp_bin):
            os.unlink(tmp_bin)
        raise WriteError(f"cannot write {bin_path}: {exc.strerror or exc}") from None
    lens_all = np.concatenate(lens_parts) if lens_parts else np.zeros(0, np.int32)
    tmp_lens = _part(spec.folder, spec.task, f"lens.{os.getpid()}.tmp.npy")
    np.save(tmp_lens, lens_all)
    os.replace(tmp_lens, _part(spec.folder, spec.task, "lens.npy"))
    side = pa.concat_tables(side_parts) if side_parts else pa.table({c: pa.array([], pa.string())
                                                                      for c in cols if c != "text"})
    atomic_write_table(side, _part(spec.folder, spec.task, "docs.parquet"))
    if spec.fmt == "parquet":
        t = pa.concat_tables(tok_parts) if tok_parts else pa.table({"id": pa.array([], pa.string()),
                                                                     "tokens": pa.array([], pa.list_(pa.int32()))})
        atomic_write_table(t, os.path.join(spec.folder, "tokens", f"part-{spec.task:05d}.parquet"))
    marker = {"fingerprint": spec.fingerprint, "task": spec.task, "shard": os.path.basename(spec.shard),
              "docs": docs, "tokens": tokens}
    write_json_atomic(marker, done)
    return marker


@dataclass
class ExportSummary:
    folder: str
    docs: int
    tokens: int
    seconds: float
    resumed: int
    files: list


def export_run(run: str, folder: str, tokenizer: str, fmt: str = "megatron", eod_token: str | None = None,
               workers: int = 1, fresh: bool = False, batch_docs: int = 2048, progress=None) -> ExportSummary:
    """Export the kept documents of the finished run ``run`` into ``folder`` (see the module docstring)."""
    started = time.time()
    if fmt not in ("megatron", "parquet"):
        raise ExportError(f"--format must be megatron or parquet, not {fmt!r}")
    manifest_path = os.path.join(run, "manifest.json")
    if not os.path.isfile(manifest_path):
        raise ExportError(f"{run}: no manifest.json; export reads the output folder of a finished dataclean run")
    with open(manifest_path, encoding="utf-8") as fh:
        manifest = json.load(fh)
    data = os.path.join(run, "data")
    shards = sorted(os.path.join(data, f) for f in os.listdir(data) if f.endswith(".parquet")) \
        if os.path.isdir(data) else []
    if os.path.realpath(folder) == os.path.realpath(run) or os.path.realpath(folder).startswith(
            os.path.realpath(run) + os.sep):
        raise ExportError(f"the export folder {folder} is inside the run folder {run}; choose another -o")
    tok = load_tokenizer(tokenizer)
    eod_name, eod = eod_id(tok, eod_token)
    vocab = tok.get_vocab_size(with_added_tokens=True)
    dtype = np.dtype(megatron.token_dtype(vocab))
    tok_sha = sha256_file(tokenizer)
    from dataclean.version import __version__
    run_fp = manifest.get("fingerprint") or manifest.get("config_hash") or ""
    fp = hashlib.sha256(json.dumps({"v": EXPORT_VERSION, "run": run_fp, "tokenizer": tok_sha, "eod": eod,
                                    "format": fmt, "dataclean": __version__}, sort_keys=True).encode()).hexdigest()
    meta_path = os.path.join(folder, "export.json")
    if os.path.isdir(folder) and os.listdir(folder):
        old = _read_json(meta_path)
        owner = _read_json(os.path.join(folder, "parts", "owner.json"))
        if old and old.get("fingerprint") == fp and old.get("finished"):
            return ExportSummary(folder, old["docs"], old["tokens"], time.time() - started, len(shards), old["files"])
        if not (owner and owner.get("fingerprint") == fp):  # (our own unfinished export: resume it)
            if not fresh:
                what = ("an export of another run, tokenizer or format" if old or owner else
                        "files that are not a dataclean export")
                raise ExportError(f"{folder} holds {what}; use --fresh to replace it or choose another -o")
            _clear(folder)
    os.makedirs(os.path.join(folder, "parts"), exist_ok=True)
    write_json_atomic({"fingerprint": fp, "finished": False}, os.path.join(folder, "parts", "owner.json"))
    specs = [PartSpec(i, s, folder, os.path.abspath(tokenizer), eod, dtype.name, fmt, fp, batch_docs)
             for i, s in enumerate(shards)]
    resumed = sum(1 for s in specs if _done(s))
    from dataclean.exec.local import LocalExecutor
    ex = LocalExecutor(workers)
    try:
        markers = ex.map(export_part, specs, progress)
    finally:
        ex.close()
    files = _assemble(folder, specs, markers, fmt, dtype, fp, run_fp)
    docs = sum(m["docs"] for m in markers)
    tokens = sum(m["tokens"] for m in markers)
    write_json_atomic({
        "version": EXPORT_VERSION, "finished": True, "fingerprint": fp, "format": fmt,
        "run": os.path.abspath(run), "run_fingerprint": run_fp,
        "tokenizer": {"path": os.path.abspath(tokenizer), "sha256": tok_sha, "vocab_size": vocab,
                      "eod_token": eod_name, "eod_id": eod},
        "dtype": dtype.name, "docs": docs, "tokens": tokens, "shards": len(shards), "files": files,
    }, meta_path)
    return ExportSummary(folder, docs, tokens, time.time() - started, resumed, files)


def _read_json(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def _done(spec: PartSpec) -> bool:
    p = _part(spec.folder, spec.task, "done.json")
    if not os.path.isfile(p):
        return False
    with open(p, encoding="utf-8") as fh:
        return json.load(fh).get("fingerprint") == spec.fingerprint


def _clear(folder: str) -> None:
    for name in ("parts", "tokens"):
        shutil.rmtree(os.path.join(folder, name), ignore_errors=True)
    for name in ("export.bin", "export.idx", "export.docs.parquet", "export.json"):
        p = os.path.join(folder, name)
        if os.path.exists(p):
            os.unlink(p)


def _assemble(folder: str, specs: list[PartSpec], markers: list[dict], fmt: str, dtype: np.dtype, fp: str,
              run_fp: str) -> list[str]:
    """The export's files from its parts, in task order."""
    lens = [np.load(_part(folder, s.task, "lens.npy")) for s in specs]
    lengths = np.concatenate(lens).astype(np.int32) if lens else np.zeros(0, np.int32)
    offsets = np.zeros(len(lengths), np.int64)
    if len(lengths):
        np.cumsum(lengths[:-1], out=offsets[1:])
    files = []
    if fmt == "megatron":
        bin_path = os.path.join(folder, "export.bin")
        tmp = bin_path + f".{os.getpid()}.tmp"
        with open(tmp, "wb") as out:
            for s in specs:
                with open(_part(folder, s.task, "bin"), "rb") as fh:
                    shutil.copyfileobj(fh, out, 1 << 22)
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, bin_path)
        tmp_idx = os.path.join(folder, f"export.idx.{os.getpid()}.tmp")
        megatron.write_idx(tmp_idx, lengths, dtype)
        os.replace(tmp_idx, os.path.join(folder, "export.idx"))
        files += ["export.bin", "export.idx"]
    else:
        files += [f"tokens/part-{s.task:05d}.parquet" for s in specs]
    # the sidecar, one part at a time (memory flat in the corpus size): a column's type is the first non-null
    # type any part has for it
    schemas = [pq.read_schema(_part(folder, s.task, "docs.parquet")) for s in specs]
    types = {}
    for c in SIDECAR_COLUMNS:
        types[c] = next((sc.field(c).type for sc in schemas if c in sc.names and sc.field(c).type != pa.null()),
                        pa.int64() if c in ("origin_row", "mix_epoch") else
                        pa.float64() if c == "quality_score" else pa.string())
    dict_type = pa.dictionary(pa.int32(), pa.string())
    schema = pa.schema([("ordinal", pa.int64()), ("token_offset", pa.int64()), ("n_tokens", pa.int32()),
                        *[(c, types[c]) for c in SIDECAR_COLUMNS],
                        ("export_fingerprint", dict_type), ("run_fingerprint", dict_type)])
    path = os.path.join(folder, "export.docs.parquet")
    tmp = path + f".{os.getpid()}.tmp"
    base = 0
    with pq.ParquetWriter(tmp, schema, compression="zstd") as w:
        for s in specs:
            t = pq.read_table(_part(folder, s.task, "docs.parquet"))
            n = t.num_rows
            cols = {"ordinal": pa.array(np.arange(base, base + n, dtype=np.int64)),
                    "token_offset": pa.array(offsets[base:base + n]), "n_tokens": pa.array(lengths[base:base + n])}
            for c in SIDECAR_COLUMNS:
                cols[c] = t.column(c).cast(types[c]) if c in t.column_names else pa.nulls(n, types[c])
            for name, value in (("export_fingerprint", fp), ("run_fingerprint", run_fp)):
                cols[name] = pa.DictionaryArray.from_arrays(pa.array(np.zeros(n, np.int32)), pa.array([value]))
            w.write_table(pa.table(cols, schema=schema), row_group_size=65536)
            base += n
    os.replace(tmp, path)
    files.append("export.docs.parquet")
    return files
