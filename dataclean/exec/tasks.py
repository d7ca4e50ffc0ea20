"""The task functions of a run. Each is a plain function of picklable arguments so that any executor (the
local process pool, Ray) can run it; each writes its outputs atomically and then its completion marker.
"""
from __future__ import annotations

import base64
import errno
import json
import os
import shutil
import time
import traceback
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dataclean.config import config_hash
from dataclean.exec import shuffle
from dataclean.failpoints import failpoint
from dataclean.io import fs as iofs
from dataclean.io.fs import files_in
from dataclean.io.readers import (
    EXTRA_JSON_KEY,
    InputFileError,
    _safe_json,
    read_shard,
)
from dataclean.io.writers import WORK_CODEC, ShardWriter, WriteError, tmp_name, write_error, write_json_atomic
from dataclean.layout import Layout
from dataclean.pipeline import Pipeline, conform
from dataclean.schema import EXTRA_FIELD_METADATA
from dataclean.sections import GlobalSection, InputSection, OutputSection
from dataclean.stages.base import with_columns

_PIPELINES: dict[str, Pipeline] = {}


@dataclass(frozen=True)
class TaskSpec:
    """One pass-1 task: an input file, or one piece of a large Parquet file (``rows``) or JSON Lines file
    (``span``). ``task`` numbers the run's pass-1 tasks in input order: its folder, its marker and the high
    bits of its ``doc_key`` s."""

    task: int
    input_path: str
    out: str
    config: dict
    fingerprint: str
    publish: str | None = None  # a destination (URI or folder) pass 2 copies this task's data/ and rejected/ to
    rows: tuple[int, int] | None = None  # (start, end): the rows of this piece (io.readers.parquet_pieces)
    span: tuple[int, int, int] | None = None  # (start, end, first line): its bytes (io.pieces.jsonl_pieces)
    piece: int = 0  # which piece of its file (piece 0 also checksums the whole file)


@dataclass(frozen=True)
class FileSpec:
    """One pass-2 task: an input file (``file``: its index among the inputs, which names its data/ and
    rejected/ shards) and the pass-1 tasks of its pieces, in order."""

    file: int
    tasks: tuple[int, ...]
    input_path: str
    out: str
    config: dict
    fingerprint: str
    publish: str | None = None


def pipeline_for(config: dict) -> Pipeline:
    """One pipeline per config per process (stages may load models)."""
    key = config_hash(config)
    if key not in _PIPELINES:
        _PIPELINES[key] = Pipeline.from_config(config)
    return _PIPELINES[key]


def remember_pipeline(config: dict, pipe: Pipeline) -> None:
    """Let :func:`pipeline_for` give ``pipe`` for ``config`` in this process: the driver's config for its tasks
    (``Pipeline.task_config``) builds the same stages as the pipeline it has (tasks run here with one worker)."""
    _PIPELINES.setdefault(config_hash(config), pipe)


def _clear(paths) -> None:
    for path in paths:
        try:
            os.remove(path)
        except FileNotFoundError:
            pass


def _value_counts(arr: pa.Array, default: str) -> dict[str, int]:
    counts: dict[str, int] = {}
    for item in pc.value_counts(arr).to_pylist():
        key = item["values"] if item["values"] is not None else default
        counts[key] = counts.get(key, 0) + item["counts"]
    return counts


def _add_counts(total: dict, more: dict) -> None:
    for k, v in more.items():
        total[k] = total.get(k, 0) + v


def _out_of_memory(exc: BaseException) -> bool:
    """MemoryError (Arrow's too), or DuckDB's out-of-memory error: the worker, not the input, is at fault."""
    return isinstance(exc, MemoryError) or type(exc).__name__ == "OutOfMemoryException"


def pass1_task(spec: TaskSpec) -> dict:
    """Read one input shard, run the pass-1 stages, write survivors and ledger rows for it."""
    started = time.time()
    lay = Layout(spec.out)
    cfg = spec.config
    pipe = pipeline_for(cfg)
    folder = lay.pass1_dir(spec.task)
    os.makedirs(folder, exist_ok=True)
    _clear(files_in(folder, "*") + files_in(folder, ".*"))
    out, inp, partitions = OutputSection.of(cfg), InputSection.of(cfg), GlobalSection.of(cfg).partitions
    docs = ShardWriter(folder, "docs", pipe.survivor_schema(), max_rows=out.shard_max_rows,
                       max_bytes=out.shard_max_bytes, codec=WORK_CODEC)
    # the ledger part of pass 1 is final as written: pass 2 links these files into rejected/
    rejected = ShardWriter(folder, "rejected", pipe.ledger_schema(), max_rows=out.shard_max_rows,
                           max_bytes=out.shard_max_bytes)
    records = bad = kept = 0
    by_source: dict[str, int] = {}
    skipped: dict[str, int] = {}  # records that are not documents (WARC requests, images...), by kind
    blocked: dict[str, int] = {}  # url_filter removals by the category of the list that blocked them
    nbytes = 0
    # key rows of the global step's grouped decisions, partitioned for its reduce tasks (exec/shuffle.py)
    keyed = [(shuffle.id_rows, shuffle.ShuffleWriter(folder, "ids", shuffle.ID_SCHEMA, partitions))]
    keyed += [(stage.shuffle_rows, shuffle.ShuffleWriter(folder, stage.name, stage.shuffle_schema, partitions))
              for stage in pipe.global_stages if stage.shuffles]
    extras = _ExtraWriter(folder, set(pipe.survivor_schema().names) | set(pipe.output_schema().names), cfg)
    try:
        before = _stat_or_none(spec.input_path)  # what the manifest records: the file as it was when read
        for chunk in read_shard(spec.input_path, spec.task, inp.columns, inp.batch_rows, inp.max_record_bytes,
                                rows=spec.rows, span=spec.span):
            records += chunk.n_records
            _add_counts(skipped, chunk.skipped)
            nbytes += pc.sum(pc.binary_length(chunk.docs.column("text"))).as_py() or 0
            _add_counts(by_source, _value_counts(chunk.docs.column("source"), inp.columns.default_source))
            if chunk.bad is not None:
                bad += chunk.bad.num_rows
                _add_counts(by_source, _value_counts(chunk.bad.column("source"), inp.columns.default_source))
                rejected.write(conform(chunk.bad, pipe.ledger_schema()))
            outcome = pipe.process(chunk.docs)
            docs.write(outcome.kept)
            extras.write(chunk, outcome.kept)
            for rows_of, writer in keyed:
                writer.add(*rows_of(outcome.kept))
            rejected.write(outcome.removed)
            if "url_blocked_category" in outcome.removed.schema.names and outcome.removed.num_rows:
                _add_counts(blocked, _value_counts(outcome.removed.column("url_blocked_category").drop_null(), ""))
            kept += outcome.kept.num_rows
        checksum = _checksum_unchanged(spec.input_path, before, whole=spec.piece == 0)
    except InputFileError as exc:
        docs.abort()
        rejected.abort()
        extras.abort()
        return {"task": spec.task, "input": spec.input_path, "status": "failed", "error": str(exc)}
    except WriteError:  # the output cannot be written (disk full...): stop the run, the rerun resumes
        docs.abort()
        rejected.abort()
        extras.abort()
        raise
    except Exception as exc:  # a bug must not sink a days-long run: fail this input, keep the traceback
        if _out_of_memory(exc):  # not this input's fault: the run stops in one line, the rerun resumes
            docs.abort()
            rejected.abort()
            raise
        docs.abort()
        rejected.abort()
        extras.abort()
        trace = os.path.join(lay.work, "errors", f"pass1-{spec.task:05d}.txt")
        os.makedirs(os.path.dirname(trace), exist_ok=True)
        with open(trace, "w", encoding="utf-8") as fh:
            fh.write(traceback.format_exc())
        return {"task": spec.task, "input": spec.input_path, "status": "failed",
                "error": f"{spec.input_path}: internal error {type(exc).__name__}: {exc} (traceback in {trace})"}
    except BaseException:
        docs.abort()
        rejected.abort()
        extras.abort()
        raise
    extras.commit()  # (before docs: a docs file without its extras would be read as having none)
    docs.commit(write_empty=True)
    failpoint(f"pass1-files-{spec.task}")
    rejected.commit(write_empty=True)
    for _, writer in keyed:
        writer.commit()
    assert before is not None  # (_checksum_unchanged raised otherwise)
    size, mtime_ns = before  # as it was read (equal to after: checked)
    result = {
        "task": spec.task, "input": spec.input_path, "status": "ok", "records": records, "bad_records": bad,
        "pass1_kept": kept, "pass1_removed": records - kept, "records_by_source": by_source,
        "skipped_records": dict(sorted(skipped.items())), "url_blocked_by_category": dict(sorted(blocked.items())),
        "text_bytes": nbytes, "size": size, "mtime_ns": mtime_ns, "checksum": checksum,
        "seconds": round(time.time() - started, 3), "fingerprint": spec.fingerprint,
    }
    write_json_atomic(result, lay.marker(f"pass1-{spec.task:05d}"))
    failpoint(f"pass1-done-{spec.task}")
    return result


def _stat_or_none(path: str) -> tuple[int, int] | None:
    """``(size, mtime_ns)`` of an input, None when it cannot be stat'ed (reading it then says why)."""
    try:
        return iofs.stat(path)
    except (OSError, ValueError):
        return None


def _checksum_unchanged(path: str, before: tuple[int, int] | None, whole: bool = True) -> str | None:
    """The checksum of the input ``path`` just read, after making sure it is still the file of ``before`` (its
    size and mtime when its read began): else its records and checksum may be of a half-written file (another
    process writing or appending to it), and :class:`InputFileError` says
    ``PATH: changed while it was read (size 123 -> 456); rerun when it is complete``. Without ``whole`` (a
    later piece of a file, whose piece 0 checksums it): the check alone, and None."""
    error: OSError | None = None
    try:
        checksum = iofs.checksum(path) if whole else None
    except OSError as exc:
        checksum, error = None, exc
    after = _stat_or_none(path)
    if after is None and before is None:
        raise InputFileError(path, "cannot stat it")
    if after != before:
        if after is None:
            what = "removed"
        elif before is None:
            what = f"created, size {after[0]}"
        elif after[0] != before[0]:
            what = f"size {before[0]} -> {after[0]}"
        else:
            what = f"modified, size {before[0]}"
        raise InputFileError(path, f"changed while it was read ({what}); rerun when it is complete")
    if error is not None:
        raise InputFileError(path, f"cannot read ({type(error).__name__}: {error})")
    return checksum


def _pass1_files(lay: Layout, tasks: tuple[int, ...], pattern: str) -> list[str]:
    """The pass-1 files ``pattern`` of ``tasks`` (the pieces of one input), in input order."""
    return [f for task in tasks for f in sorted(files_in(lay.pass1_dir(task), pattern))]


def pass2_task(spec: FileSpec) -> dict:
    """Apply the global removals to one input's survivors (of all its pieces); write its data/ shards and its
    ledger part."""
    started = time.time()
    lay = Layout(spec.out)
    cfg = spec.config
    pipe = pipeline_for(cfg)
    prefix = lay.data_prefix(spec.file)
    # this task's shards, and the temporary files of an earlier attempt that was killed while writing them
    _clear(path for folder in [lay.data, lay.rejected] + files_in(lay.dedup, os.path.join("*", ""))
           for pattern in (prefix + "-*", "." + prefix + "-*") for path in files_in(folder, pattern))
    lo, hi = spec.tasks[0] << 40, (spec.tasks[-1] + 1) << 40
    removals = pq.read_table(lay.removals, filters=[("doc_key", ">=", lo), ("doc_key", "<", hi)])
    rem_keys = removals.column("doc_key").combine_chunks()
    plan = extra_columns_plan(lay)
    out_schema, ledger_schema = pipe.output_schema(), pipe.ledger_schema()
    out_schema = pa.schema(list(out_schema) + plan.fields)
    extra_rows = _ExtraRows(_pass1_files(lay, spec.tasks, "extra*-*.parquet"), plan)
    out = OutputSection.of(cfg)
    data = ShardWriter(lay.data, prefix, out_schema, max_rows=out.shard_max_rows, max_bytes=out.shard_max_bytes,
                       row_group_rows=out.row_group_rows)
    # per-document artifacts of the kept documents a global stage wants (MinHash bands for --dedup-against)
    # (shards of as many documents as data/'s: a band file holds a row per band of each)
    kept_writers = [(stage, {name: ShardWriter(os.path.join(lay.dedup, name), prefix, schema,
                                               max_rows=out.shard_max_rows * _rows_per_doc(stage, name))
                             for name, schema in stage.kept_schemas.items()})
                    for stage in pipe.global_stages if stage.kept_schemas]
    ledger_parts = []  # removals of the global step; pass 1's ledger files are linked, not rewritten
    repeats = None
    if os.path.exists(lay.repeats):  # a mixture recipe repeats some documents (extra epochs)
        from dataclean.stages.mixture import expand_repeats, repeats_suffix
        repeats = pq.read_table(lay.repeats, filters=[("doc_key", ">=", lo), ("doc_key", "<", hi)])
        suffix = repeats_suffix(pq.read_schema(lay.repeats))
    kept = copies = 0
    for path in _pass1_files(lay, spec.tasks, "docs-*.parquet"):
        for batch in pq.ParquetFile(path).iter_batches(batch_size=InputSection.of(cfg).batch_rows):
            if plan.fields:
                batch = with_columns(batch, extra_rows.for_keys(batch.column("doc_key")))
            gone = pc.is_in(batch.column("doc_key"), value_set=rem_keys) if len(rem_keys) else None
            if gone is not None and pc.any(gone).as_py():
                ledger_parts.append(_global_ledger_rows(batch.filter(gone), removals, ledger_schema,
                                                        pipe.keep_rejected_text))
                batch = batch.filter(pc.invert(gone))
            kept += batch.num_rows
            for stage, writers in kept_writers:
                for name, rows in stage.kept_rows(batch).items():
                    writers[name].write(rows)
            if repeats is not None and repeats.num_rows:
                for i, part in enumerate(expand_repeats(batch, repeats, suffix)):
                    copies += part.num_rows if i else 0
                    data.write(conform(part, out_schema))
            else:
                data.write(conform(batch, out_schema))
    ledger = pa.Table.from_batches(ledger_parts, schema=ledger_schema)  # in input order already
    rej = ShardWriter(lay.rejected, prefix + "-global", ledger_schema, max_rows=out.shard_max_rows,
                      max_bytes=out.shard_max_bytes)
    try:
        rej.write(ledger)
        for _, writers in kept_writers:
            for writer in writers.values():
                writer.commit(write_empty=True)
        data.commit(write_empty=True)
        failpoint(f"pass2-files-{spec.file}")  # data/ renamed, ledger part and marker not yet written
        if len(spec.tasks) == 1:
            pass1_removed = _link_pass1_ledger(lay, spec.tasks[0], prefix)
        else:
            pass1_removed = _join_pass1_ledgers(lay, spec.tasks, prefix, ledger_schema, out)
        rej.commit()
    except BaseException:
        data.abort()
        rej.abort()
        for _, writers in kept_writers:
            for writer in writers.values():
                writer.abort()
        raise
    if spec.publish:  # the run folder is a staging folder: each task publishes its own shards
        for folder in (lay.data, lay.rejected):
            for path in sorted(files_in(folder, prefix + "-*.parquet")):
                iofs.publish_file(path, iofs.join(spec.publish, os.path.basename(folder), os.path.basename(path)))
    result = {"task": spec.file, "kept": kept, "copies": copies, "removed": pass1_removed + ledger.num_rows,
              "fingerprint": spec.fingerprint, "seconds": round(time.time() - started, 3),
              "warnings": plan.warnings}
    write_json_atomic(result, lay.marker(f"pass2-{spec.file:05d}"))
    return result


def _rows_per_doc(stage, name: str) -> int:
    """Rows per kept document in the stage's ``name`` artifact (MinHash bands: one per band; default 1)."""
    return stage.kept_rows_per_doc.get(name, 1)


def _join_pass1_ledgers(lay: Layout, tasks: tuple[int, ...], prefix: str, schema: pa.Schema,
                        out: OutputSection) -> int:
    """The pass-1 ledger files of the pieces of one input, written into rejected/ as ``<prefix>-NNNNN.parquet``
    by the writer pass 1 uses for an input read whole (same shard sizes, row groups and codec), so that
    rejected/ is the same however the input was cut."""
    writer = ShardWriter(lay.rejected, prefix, schema, max_rows=out.shard_max_rows, max_bytes=out.shard_max_bytes)
    try:
        for path in _pass1_files(lay, tasks, "rejected-*.parquet"):
            for batch in pq.ParquetFile(path).iter_batches():
                writer.write(batch)
        writer.commit(write_empty=True)
    except BaseException:
        writer.abort()
        raise
    return writer.rows_written


def _link_pass1_ledger(lay: Layout, task: int, prefix: str) -> int:
    """Put pass 1's ledger files of ``task`` into rejected/ as ``<prefix>-NNNNN.parquet`` by hard link (a copy
    where the file system has none): the removed text is written once, not read back and rewritten. A link
    appears whole or not at all; the files in _work stay until the run is final, so a rerun links again."""
    rows = 0
    for i, src in enumerate(sorted(files_in(lay.pass1_dir(task), "rejected-*.parquet"))):
        dst = os.path.join(lay.rejected, f"{prefix}-{i:05d}.parquet")
        try:
            os.link(src, dst)
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
                raise write_error(dst, exc) from None
            tmp = tmp_name(dst)
            try:
                shutil.copyfile(src, tmp)
                os.replace(tmp, dst)
            except OSError as exc2:
                _clear([tmp])
                raise write_error(dst, exc2) from None
        rows += pq.ParquetFile(dst).metadata.num_rows
    return rows


def _global_ledger_rows(gone: pa.RecordBatch, removals: pa.Table, schema: pa.Schema,
                        keep_text: bool) -> pa.RecordBatch:
    """Ledger rows for survivors the global step removed: their columns plus the decision's columns."""
    keys = removals.column("doc_key").to_numpy()  # the removal list is sorted by doc_key
    at = pa.array(np.searchsorted(keys, gone.column("doc_key").to_numpy()))
    decided = {name: removals.column(name).take(at).combine_chunks() for name in removals.column_names
               if name != "doc_key"}
    if not keep_text:
        decided["text"] = pa.nulls(gone.num_rows, pa.string())
    return conform(with_columns(gone, decided), schema)




# --------------------------------------------------------------------------------------------------------
# Extra columns: an input's unmapped columns, carried to data/ in their own Arrow types
#
# Pass 1 writes, beside each task's survivors, the extra columns of its kept rows with their doc_key
# (``extra{k:04d}-NNNNN.parquet``: a new k whenever a chunk's extra columns have another schema, as a JSON
# file's inferred types may). Pass 2 needs one type per column for all of data/, whatever the worker count:
# :func:`extra_columns_plan` decides it from every task's files (their footers), the same in every task, and
# keeps it in ``_work/extra_columns.json``. The stages never see these columns (they see ``meta``, the JSON).


@dataclass
class ExtraPlan:
    """The extra columns of data/ (after the canonical and signal columns), and one warning line per column
    whose types could not be unified (those are written as JSON text)."""

    fields: list
    json_names: set
    warnings: list


class _ExtraWriter:
    """Pass 1: the extra columns of the kept rows of each chunk, keyed by doc_key. Columns named like a
    column of the output (``meta``, ``lang`` when no column is mapped to it, ``n_chars``, a signal) stay only
    in ``meta``: the output's own column must keep its meaning."""

    def __init__(self, folder: str, reserved: set, cfg: dict):
        self.folder, self.reserved = folder, reserved | {"doc_key"}
        out = OutputSection.of(cfg)
        self.max_rows, self.max_bytes = out.shard_max_rows, out.shard_max_bytes
        self.writers: list[ShardWriter] = []

    def write(self, chunk, kept: pa.RecordBatch) -> None:
        extra = chunk.extra
        if extra is None or kept.num_rows == 0:
            return
        names = [n for n in extra.schema.names if n not in self.reserved]
        if not names:
            return
        keys = chunk.docs.column("doc_key").to_numpy()
        want = kept.column("doc_key").to_numpy()
        at = np.searchsorted(keys, want)
        rows = extra.select(names).take(pa.array(at))
        fields = [pa.field("doc_key", pa.int64())] + [rows.schema.field(n) for n in names]
        rows = pa.RecordBatch.from_arrays([pa.array(want, pa.int64())] + rows.columns, schema=pa.schema(fields))
        if not self.writers or self.writers[-1].schema != rows.schema or \
                self.writers[-1].schema.metadata != rows.schema.metadata or \
                [f.metadata for f in self.writers[-1].schema] != [f.metadata for f in rows.schema]:
            self.writers.append(ShardWriter(self.folder, f"extra{len(self.writers):04d}", rows.schema,
                                            max_rows=self.max_rows, max_bytes=self.max_bytes, codec=WORK_CODEC))
        self.writers[-1].write(rows)

    def commit(self) -> None:
        for writer in self.writers:
            writer.commit()

    def abort(self) -> None:
        for writer in self.writers:
            writer.abort()


def extra_columns_plan(lay: Layout) -> ExtraPlan:
    """The extra columns of data/ for the tasks of the global step's marker (the tasks pass 2 writes):
    :func:`plan_extra_columns` of their pass-1 extra files, cached in ``_work/extra_columns.json`` for
    that fingerprint and task list (pass 2's tasks all ask; the first to finish writes it)."""
    from dataclean.layout import load_marker

    g = load_marker(lay, "global") or {}
    tasks, fp = list(g.get("tasks", [])), g.get("fingerprint")
    path = lay.p("_work", "extra_columns.json")
    try:
        with open(path, encoding="utf-8") as fh:
            cached = json.load(fh)
        if cached.get("fingerprint") == fp and cached.get("tasks") == tasks:
            schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(cached["schema"])))
            return ExtraPlan(list(schema), set(cached["json"]), list(cached["warnings"]))
        _clear([path])  # an earlier global step's: decided again (and its warnings said again)
    except FileNotFoundError:
        pass
    except (OSError, ValueError, KeyError, TypeError, pa.ArrowException):
        _clear([path])
    files = []
    for task in tasks:
        marker = load_marker(lay, f"pass1-{task:05d}") or {}
        for f in sorted(files_in(lay.pass1_dir(task), "extra*-*.parquet")):
            files.append((marker.get("input", f"input {task}"), pq.read_schema(f)))
    plan = plan_extra_columns(files)
    text = json.dumps({"fingerprint": fp, "tasks": tasks,
                       "schema": base64.b64encode(pa.schema(plan.fields).serialize().to_pybytes()).decode(),
                       "json": sorted(plan.json_names), "warnings": plan.warnings}, sort_keys=True)
    tmp = tmp_name(path)
    try:
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, path)  # (every task decides the same plan: the last one written stays)
    except OSError as exc:
        raise write_error(path, exc) from None
    finally:
        _clear([tmp])
    return plan


def plan_extra_columns(files: list) -> ExtraPlan:
    """One type per extra column, from ``(input name, schema)`` of every pass-1 extra file in task order.

    Columns come in the order they first appear. A column's types are unified as
    ``pyarrow.unify_schemas(promote_options="permissive")`` does (int64 and double -> double, null and
    anything -> that, struct fields merged, list and large_list -> large_list). When they cannot be (int64 and
    string; timestamps with and without a time zone), or when a JSON input's values of that key had no common
    type, the column is written as JSON text (a string column) and one warning line names it and two inputs
    that disagree."""
    seen: dict = {}  # name -> [(type, input, is_json)]
    for input_name, schema in files:
        for f in schema:
            if f.name == "doc_key":
                continue
            is_json = bool(f.metadata and f.metadata.get(EXTRA_JSON_KEY))
            seen.setdefault(f.name, []).append((f.type, input_name, is_json))
    fields, json_names, warnings = [], set(), []
    for name, types in seen.items():
        marked = next((t for t in types if t[2]), None)
        final = None
        if marked is not None:
            warnings.append(f"extra column {name!r} holds values of more than one JSON type in {marked[1]}: "
                            "written to data/ as JSON text")
        else:
            distinct = list(dict.fromkeys(t[0] for t in types))
            try:
                final = pa.unify_schemas([pa.schema([pa.field(name, t)]) for t in distinct],
                                         promote_options="permissive").field(name).type
            except (pa.ArrowException, TypeError):
                first = types[0]
                other = _first_conflict(name, types)
                warnings.append(f"extra column {name!r} is {first[0]} in {first[1]} but {other[0]} in {other[1]}: "
                                "written to data/ as JSON text (no common type)")
        if final is None:
            json_names.add(name)
            final = pa.string()
        fields.append(pa.field(name, final, metadata=EXTRA_FIELD_METADATA))
    return ExtraPlan(fields, json_names, warnings)


def _first_conflict(name: str, types: list) -> tuple:
    """The first ``(type, input, …)`` of ``types`` that does not unify with the types before it."""
    for i in range(1, len(types)):
        try:
            pa.unify_schemas([pa.schema([pa.field(name, t[0])]) for t in types[:i + 1]],
                             promote_options="permissive")
        except (pa.ArrowException, TypeError):
            return types[i]
    return types[-1]


class _ExtraRows:
    """Pass 2: the extra columns of one task's survivors, in data/'s types, for its docs batches in order
    (both are in doc_key order: a merge; a row without extras gets nulls)."""

    def __init__(self, paths: list[str], plan: ExtraPlan):
        self.plan = plan
        self._batches = (b for p in paths for b in pq.ParquetFile(p).iter_batches(batch_size=8192))
        self._pending: pa.RecordBatch | None = None
        self._done = False

    def _conformed(self, batch: pa.RecordBatch) -> pa.RecordBatch:
        arrays = [batch.column("doc_key")]
        for f in self.plan.fields:
            idx = batch.schema.get_field_index(f.name)
            if idx < 0:
                arrays.append(pa.nulls(batch.num_rows, f.type))
                continue
            col, marked = batch.column(idx), batch.schema.field(idx).metadata
            if f.name in self.plan.json_names and not (marked and marked.get(EXTRA_JSON_KEY)):
                col = pa.array([None if v is None else _safe_json(v) for v in col.to_pylist()], pa.string())
            arrays.append(col.cast(f.type))
        return pa.RecordBatch.from_arrays(arrays, schema=pa.schema([pa.field("doc_key", pa.int64())] +
                                                                   self.plan.fields))

    def for_keys(self, keys: pa.Array) -> dict:
        """``{column: array}`` of the rows with ``keys`` (ascending doc_keys of survivors)."""
        keys = keys.to_numpy()
        last = keys[-1] if len(keys) else -1
        parts = [self._pending] if self._pending is not None else []
        while not self._done and (not parts or parts[-1].column("doc_key")[-1].as_py() < last):
            nxt = next(self._batches, None)
            if nxt is None:
                self._done = True
                break
            if nxt.num_rows:
                parts.append(self._conformed(nxt))
        have = pa.concat_batches(parts) if parts else self._conformed(
            pa.RecordBatch.from_pylist([], schema=pa.schema([pa.field("doc_key", pa.int64())])))
        have_keys = have.column("doc_key").to_numpy()
        at = np.searchsorted(have_keys, keys)
        hit = (at < len(have_keys)) & (have_keys[np.minimum(at, max(len(have_keys) - 1, 0))] == keys) \
            if len(have_keys) else np.zeros(len(keys), bool)
        idx = pa.array(np.where(hit, at, 0), pa.int64(), mask=~hit)
        rest = int(np.searchsorted(have_keys, last, side="right"))
        self._pending = have.slice(rest) if rest < have.num_rows else None
        return {f.name: have.column(f.name).take(idx) for f in self.plan.fields}


#: Counts of a pass-1 result that the pieces of one input add up to.
_SUMMED = ("records", "bad_records", "pass1_kept", "pass1_removed", "text_bytes")
_ADDED = ("records_by_source", "skipped_records", "url_blocked_by_category")


def file_result(file: int, results: list[dict]) -> dict:
    """The pass-1 result of input ``file`` from those of its pieces (in order): what one task reading it whole
    gives, with ``tasks`` listing the pieces' tasks. A failed piece fails the input (its first error)."""
    tasks = [r["task"] for r in results]
    failed = [r for r in results if r["status"] != "ok"]
    if failed:
        return {**failed[0], "task": file, "tasks": tasks}
    merged = {**results[0], "task": file, "tasks": tasks}
    for key in _SUMMED:
        merged[key] = sum(r[key] for r in results)
    for key in _ADDED:
        total: dict[str, int] = {}
        for r in results:
            _add_counts(total, r[key])
        merged[key] = total if key == "records_by_source" else dict(sorted(total.items()))
    merged["seconds"] = round(sum(r["seconds"] for r in results), 3)
    return merged
