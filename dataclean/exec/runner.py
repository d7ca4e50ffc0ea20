"""Running a whole job: plan → pass 1 → global step → pass 2 → stats, manifest, verify.

Resume: every task leaves a marker carrying the run's fingerprint (hash of the resolved config and of the
input list with sizes and mtimes). A rerun of the same command skips tasks whose marker is there and
finishes the rest; a rerun whose fingerprint differs is refused unless ``fresh=True``, which first removes
exactly the entries dataclean writes (see :data:`~dataclean.layout.OWNED_ENTRIES`).
"""
from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import shutil
import sys
import time
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from dataclean.config import ConfigError, config_hash, resolve_config, validate
from dataclean.exec import memory
from dataclean.exec.errors import RunError  # noqa: F401  (the runner's public error)
from dataclean.exec.global_step import global_step
from dataclean.exec.local import LocalExecutor, prestart, stop_prestarted
from dataclean.exec.lock import LOCK_FILE, RunLock
from dataclean.exec.shuffle import clear_candidates
from dataclean.exec.tasks import (
    FileSpec,
    TaskSpec,
    extra_columns_plan,
    file_result,
    pass1_task,
    pass2_task,
    pipeline_for,
    remember_pipeline,
)
from dataclean.failpoints import failpoint
from dataclean.fingerprint import fingerprint
from dataclean.io import fs as iofs
from dataclean.io.fs import files_in
from dataclean.io.pieces import jsonl_pieces
from dataclean.io.readers import (
    JSON_ARRAY_SUFFIXES,
    MAX_CHUNK_TEXT_BYTES,
    InputFileError,
    detect_format,
    discover_inputs,
    parquet_pieces,
)
from dataclean.io.warc import WARC_HTML_SUFFIXES
from dataclean.io.writers import write_errors, write_json_atomic
from dataclean.layout import OWNED_ENTRIES, Layout, load_marker
from dataclean.sections import GlobalSection, InputSection, OutputSection, with_partitions

if TYPE_CHECKING:
    from dataclean.exec.base import Executor
    from dataclean.pipeline import Pipeline


@dataclass
class RunSummary:
    output: str
    input_records: int
    kept: int
    removed: int
    removed_by_stage: dict[str, int]
    removed_by_rule: dict[str, int]
    failed_inputs: list[dict] = field(default_factory=list)
    verified: bool = False
    seconds: float = 0.0
    resumed_tasks: int = 0
    mixture: list[dict] = field(default_factory=list)  # stats/mixture.parquet rows when a recipe ran
    warnings: list[str] = field(default_factory=list)  # one line each, for the end of the run (sanity.py)
    #: every source the run saw: {name: {"kind": web|curated|code, "input": records}}
    sources: dict[str, dict] = field(default_factory=dict)
    #: input records that are not documents (WARC requests, non-HTML responses...), by kind
    skipped_records: dict[str, int] = field(default_factory=dict)
    #: url_filter removals by the category of the domain list
    url_blocked_by_category: dict[str, int] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.verified and not self.failed_inputs


def _extract_rows(cfg: dict, files: list[str]) -> bool:
    """Whether the pipeline's extract stages take only WARC pages (``rows: html``), for the input check of raw
    HTML in other files. A WARC file holds HTML pages: without an extract stage the rules would judge markup,
    so the run is refused (WET files hold text)."""
    extracts = [s for s in cfg["pipeline"] if isinstance(s, dict) and s.get("stage") == "extract"]
    warcs = [f for f in files if f.lower().endswith(WARC_HTML_SUFFIXES)]
    if warcs and not extracts:
        more = f" (and {len(warcs) - 1} more)" if len(warcs) > 1 else ""
        raise RunError(f"{warcs[0]}{more} is a WARC file of HTML pages and the pipeline has no extract stage: "
                       "run with --config crawl (rules/crawl.yaml), or set extract.enabled: true")
    return bool(extracts) and all(s.get("rows", "html") == "html" for s in extracts)


def _refuse_output_in_input_folder(out: str, specs: list[str]) -> None:
    """An output folder inside an input folder (or a recursive glob's root) would be read back as input by the
    next run of the same command, so a resumed run would not be the same run: refuse it."""
    out_abs = os.path.realpath(out)
    for spec in specs:
        if iofs.is_uri(spec):
            continue  # a remote input folder cannot hold the local run folder
        root = spec if os.path.isdir(spec) else spec.split("**")[0] if "**" in spec else None
        if root is None:
            continue
        root_abs = os.path.realpath(root or os.curdir)
        if out_abs == root_abs or out_abs.startswith(root_abs.rstrip(os.sep) + os.sep):
            raise RunError(f"output folder {out} is inside the input folder {spec}; its files would be read as "
                           "input by the next run: choose an output folder outside the inputs")


def _local_output(path: str) -> str | None:
    """The local folder of an output or input named as a path or a ``file://`` URI; None for other URIs."""
    return iofs._local_path(path) if iofs.is_uri(path) else path


def _check_output_folder(out: str, inputs: list[str]) -> None:
    """Refuse an output folder that holds or is an input, is a file, or is a foreign non-empty folder
    (checked before the run locks the folder, so that a refused folder is left as it was)."""
    out_abs = os.path.realpath(out)
    for path in inputs:
        local = _local_output(path)
        if local is None:
            continue
        p = os.path.realpath(local)
        if p == out_abs or p.startswith(out_abs + os.sep):
            raise RunError(f"input {path} lies inside the output folder {out}; choose another output folder")
        if os.path.dirname(p) == out_abs:
            raise RunError(f"output folder {out} is an input folder; choose another output folder")
    if not os.path.exists(out):
        return
    if not os.path.isdir(out):
        raise RunError(f"output {out} exists and is not a folder")
    if _run_entries(out) and not os.path.exists(Layout(out).owner):
        raise RunError(f"output folder {out} is not empty and was not written by dataclean; "
                       "refusing to write into it (choose an empty or new folder)")


def _run_entries(out: str) -> list[str]:
    """The entries of ``out`` besides its lock file and unfinished temporary files (a run killed at birth
    leaves only those)."""
    return [e for e in os.listdir(out) if e != LOCK_FILE and not iofs.is_unfinished(e)]


def _claim_output_folder(out: str, fp: str, fresh: bool) -> None:
    """Under the run's lock: start over with ``fresh``, else refuse a run of another fingerprint; then remove
    the temporary files killed writers left (no other writer can be at work now)."""
    lay = Layout(out)
    if _run_entries(out) and os.path.exists(lay.owner):
        if fresh:
            for name in OWNED_ENTRIES:
                path = lay.p(name)
                if os.path.isdir(path):
                    shutil.rmtree(path)
                elif os.path.exists(path):
                    os.remove(path)
        else:
            with open(lay.owner, encoding="utf-8") as fh:
                owner = json.load(fh)
            if owner.get("fingerprint") != fp:
                raise RunError(f"output folder {out} holds a run with a different configuration, different "
                               "inputs or another version of dataclean "
                               f"(fingerprint {owner.get('fingerprint', '?')[:12]} vs {fp[:12]}). "
                               "Use --fresh to discard it and start over, or choose another output folder.")
    _remove_temporaries(out)


def _remove_temporaries(out: str) -> None:
    """Delete the ``.NAME.tmp-*`` files of writers that were killed, in ``out`` and the folders dataclean owns
    (each writer names its own temporary file, so a killed one's is not overwritten by the rerun)."""
    roots = [out] + [os.path.join(out, name) for name in OWNED_ENTRIES if os.path.isdir(os.path.join(out, name))]
    for root in roots:
        walk = os.walk(root) if root != out else [(out, [], os.listdir(out))]
        for folder, _, names in walk:
            for name in names:
                if iofs.is_unfinished(name):
                    try:
                        os.remove(os.path.join(folder, name))
                    except OSError:
                        pass


#: Fewest input bytes per key partition: ``global.partitions`` is lowered to the inputs' size over this, so
#: that a high count meant for a large corpus does not write ~2 files per partition and task for a few
#: documents (100,000 partitions on 3 documents wrote 130k files). Decisions are the same for any count.
PARTITION_MIN_INPUT_BYTES = 64 << 10


def scaled_partitions(cfg: dict, files: list[str]) -> dict:
    """``cfg`` with ``global.partitions`` at most the inputs' total size over :data:`PARTITION_MIN_INPUT_BYTES`
    (at least 1): sample_data (2.2 MB) keeps the default 8, a 100 kB input gets 1."""
    parts = GlobalSection.of(cfg).partitions
    if parts <= 1:
        return cfg
    total = sum(iofs.stat(p)[0] for p in files)
    fit = max(1, min(parts, total // PARTITION_MIN_INPUT_BYTES))
    if fit == parts:
        return cfg
    return with_partitions(cfg, fit)


def with_dedup_against(cfg: dict, folders: list[str]) -> dict:
    """``cfg`` with ``against`` set on its near-duplicate stage(s); an error when it has none."""
    cfg = json.loads(json.dumps(cfg))
    stages = [spec for spec in cfg["pipeline"] if spec.get("stage") == "minhash_dedup"]
    if not stages:
        raise RunError("--dedup-against needs a minhash_dedup stage in the pipeline")
    for spec in stages:
        spec["against"] = list(spec.get("against") or []) + folders
    try:
        validate(cfg)
    except ConfigError as exc:
        raise RunError(str(exc)) from None
    return cfg


def with_benchmarks(cfg: dict, paths: list[str]) -> dict:
    """``cfg`` with benchmark files to decontaminate against (``--decontaminate FILE``): added to the pipeline's
    decontaminate stage, or to a new one placed as the ``decontaminate`` section says."""
    from dataclean.config import place_decontaminate

    cfg = json.loads(json.dumps(cfg))
    stages = [spec for spec in cfg["pipeline"] if spec.get("stage") == "decontaminate"]
    for spec in stages:
        spec["benchmarks"] = list(spec.get("benchmarks") or []) + paths
    try:
        if not stages:
            section = dict(cfg.get("decontaminate") or {})
            section["benchmarks"] = list(section.get("benchmarks") or []) + paths
            cfg["decontaminate"] = section
            cfg = place_decontaminate(cfg)
        validate(cfg)
    except ConfigError as exc:
        raise RunError(str(exc)) from None
    return cfg


class _Progress:
    """Progress bars on stderr (rich); silent when quiet. Pass 1 also counts the documents its finished tasks
    read, with their rate, and every phase shows the time left at its rate of tasks (the pieces of a large file
    make tasks of about one size)."""

    def __init__(self, quiet: bool):
        self.quiet = quiet
        self._bar = None

    @contextmanager
    def phase(self, label: str, total: int, docs: bool = False):
        if self.quiet or total == 0:
            yield lambda *_: None
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )
        with Progress(TextColumn("{task.description:<8}"), BarColumn(), MofNCompleteColumn(), TextColumn("tasks"),
                      TextColumn("{task.fields[docs]}"), TimeElapsedColumn(), TextColumn("left"),
                      TimeRemainingColumn(), console=Console(stderr=True), transient=False) as bar:
            t = bar.add_task(label, total=total, docs="")
            started, read = time.time(), [0]

            def tick(result=None) -> None:
                if docs and isinstance(result, dict):
                    read[0] += int(result.get("records") or 0)
                    rate = read[0] / max(time.time() - started, 1e-6)
                    bar.update(t, advance=1, docs=f"{read[0]:,} docs, {rate:,.0f} docs/s")
                else:
                    bar.advance(t)
            yield tick


def make_executor(kind: str = "local", workers: int = 1, address: str | None = None, import_main: bool = False):
    """The executor named ``kind``: ``"local"`` (a process pool of ``workers``) or ``"ray"`` (Ray tasks on the
    cluster at ``address``, or on a local Ray of ``workers`` CPUs). ``import_main``: the local workers import
    the caller's ``__main__`` before their first task (needed only for a stage class defined there; it makes
    ``if __name__ == "__main__":`` necessary, see :class:`~dataclean.exec.local.LocalExecutor`)."""
    if kind == "local":
        if address:
            raise RunError("--ray-address needs --executor ray")
        return LocalExecutor(workers, import_main=import_main)
    if kind == "ray":
        from dataclean.exec.ray_executor import RayExecutor, RayExecutorError
        try:
            return RayExecutor(address=address, workers=workers)
        except RayExecutorError as exc:
            raise RunError(str(exc)) from None
    raise RunError(f"unknown executor {kind!r} (local or ray)")


def default_work_dir(destination: str) -> str:
    """The local run folder of a run whose output is a URI: one per destination, under the user's cache."""
    digest = hashlib.sha256(destination.encode("utf-8")).hexdigest()[:16]
    return os.path.join(os.path.expanduser("~"), ".cache", "dataclean", "runs", digest)


#: What the driver publishes after pass 2's tasks published their shards; manifest.json last, so a reader who
#: sees it sees a complete run. (The owner file is published first, when the run starts.)
PUBLISHED = ("stats", "dedup", "report.html", "manifest.json")


def _check_destination(dest: str, fp: str, fresh: bool) -> None:
    """A URI output must be empty, or a run of the same fingerprint (resumed), or discarded with ``fresh``."""
    try:
        names = iofs.listdir(dest) if iofs.isdir(dest) else []
    except (OSError, ValueError) as exc:
        raise RunError(f"cannot use the output {dest}: {exc}") from None
    if not names:
        return
    owner = iofs.join(dest, os.path.basename(Layout(dest).owner))
    if fresh:
        if os.path.basename(owner) not in names:
            raise RunError(f"output {dest} is not empty and was not written by dataclean; refusing to write into it")
        for name in OWNED_ENTRIES:
            if name in names:
                iofs.remove_tree(iofs.join(dest, name))
        return
    if os.path.basename(owner) not in names:
        raise RunError(f"output {dest} is not empty and was not written by dataclean; refusing to write into it "
                       "(choose an empty or new location)")
    with iofs.open_input_stream(owner) as fh:
        theirs = json.loads(fh.read().decode("utf-8"))
    if theirs.get("fingerprint") != fp:
        raise RunError(f"output {dest} holds a run with a different configuration, different inputs or another "
                       "version of dataclean; use --fresh to discard it, or choose another location")


def run(inputs, output: str, config=None, workers: int = 1, fresh: bool = False, quiet: bool = True,
        executor=None, overrides: dict | None = None, dedup_against: list[str] | None = None,
        ray_address: str | None = None, work_dir: str | None = None,
        decontaminate: list[str] | None = None) -> RunSummary:
    """Clean ``inputs`` (files, folders, globs) into ``output``; return a :class:`RunSummary`.

    ``config`` is a YAML path, a bundled config's name, None (defaults) or a dict, read like the YAML file of
    the same content (a resolved config resolves to itself). ``executor`` is ``"local"`` (the
    default), ``"ray"`` (with ``ray_address``, or a local Ray of ``workers`` CPUs) or an executor object with
    ``map(fn, specs, on_done)`` (left open: the caller closes it). ``dedup_against`` names earlier output folders
    whose kept documents the near-duplicate stage removes duplicates of; ``decontaminate`` names benchmark files
    whose items are removed from the training data (:mod:`dataclean.stages.decontaminate`). Raises :class:`RunError` when the run
    cannot start (bad output folder, changed config without ``fresh``, no inputs), and
    :class:`~dataclean.exec.sanity.InputSanityError` (a RunError) when every record of an input is a bad record
    of one cause (a wrong text column: see :mod:`dataclean.exec.sanity`); ``RunSummary.warnings`` says when most
    records of the run are bad for one cause.

    Inputs may be URIs (``s3://bucket/corpus/``, see :mod:`dataclean.io.fs`). So may ``output``: the run then
    works in the local (or shared) folder ``work_dir`` (default :func:`default_work_dir`) and publishes its
    products there — each pass-2 task its own data/ and rejected/ shards, the driver stats/, dedup/,
    manifest.json and report.html at the end, each file whole or not at all.
    """
    started = time.time()
    if getattr(multiprocessing.current_process(), "_inheriting", False):  # (a worker that imports the script)
        main = sys.modules.get("__mp_main__") or sys.modules.get("__main__")
        raise SystemExit(_IMPORTED_BY_A_WORKER.format(main=getattr(main, "__file__", "the main module")))
    if executor in (None, "local"):
        prestart(workers)  # the workers' fork server imports and loads the kernels while this process plans
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    # A dict is resolved like the YAML file of the same content (merged onto the defaults, validated): a dict
    # with only a `pipeline` once skipped the merge and failed later on a missing key. A resolved config (the
    # command line's) resolves to itself.
    cfg = resolve_config(config, overrides)
    if dedup_against:
        cfg = with_dedup_against(cfg, [str(p) for p in dedup_against])
    if decontaminate:
        cfg = with_benchmarks(cfg, [str(p) for p in decontaminate])
    local = executor in (None, "local")
    try:
        mem = memory.plan(cfg, workers, local=local)
    except ValueError as exc:
        raise RunError(str(exc)) from None
    for note in mem.notes:
        _say(f"note: {note}")
    if local and workers > 1 and mem.workers == 1:
        stop_prestarted()  # (one worker runs in this process)
    workers = mem.workers
    publish = None
    if iofs.is_uri(str(output)):
        publish, output = str(output).rstrip("/"), work_dir or default_work_dir(str(output))
    elif work_dir:
        raise RunError("--work-dir is for an output URI (s3://...); a local output folder is the run folder")
    _refuse_output_in_input_folder(output, [str(i) for i in inputs])
    local_publish = _local_output(publish) if publish else None
    if local_publish is not None:  # a file:// destination is a local folder too
        _refuse_output_in_input_folder(local_publish, [str(i) for i in inputs])
    try:
        notes: list[str] = []
        unlisted: list[str] = []  # folders that cannot be listed, dangling symlinks...: reported, not skipped
        files = discover_inputs([str(i) for i in inputs], notes, unlisted)
        for note in notes:  # the same file named twice would be read, and kept, twice
            _say(f"note: {note}")
    except (OSError, ValueError) as exc:  # a missing path, an unknown URI scheme, an unreachable store
        raise RunError(str(exc)) from None
    if not files and unlisted:
        raise RunError(f"no input file could be read: {'; '.join(unlisted)}")
    if not files:
        raise RunError(f"no input files found in {', '.join(map(str, inputs))} "
                       "(looked for .parquet, .jsonl, .json, .ndjson (also .gz, .zst), .arrow, .feather, .ipc, "
                       "datasets save_to_disk folders, .warc, .warc.gz, .wet.gz)")
    html_rows = _extract_rows(cfg, files)
    try:
        fp = fingerprint(cfg, files)
    except OSError as exc:
        raise RunError(f"cannot read an input: {exc}") from None
    from dataclean.exec import sanity  # every input mis-read (text in another column...): stop before any work
    sanity.check_first_batches(files, sanity.mapping_of(cfg), html_rows=html_rows)
    _check_output_folder(output, files)
    with RunLock(output):  # one run per output folder, until this one returns or dies
        summary = _run_locked(cfg, files, output, publish, fp, fresh, started, quiet, executor, workers,
                              ray_address, html_rows, mem)
    # (after the run's own failures: each is an input that was not read, `error: cannot read ...`, exit 1)
    summary.failed_inputs += [{"input": line.rsplit(": ", 1)[0], "error": line} for line in unlisted]
    return summary


def _run_locked(cfg: dict, files: list[str], output: str, publish: str | None, fp: str, fresh: bool,
                started: float, quiet: bool, executor, workers: int, ray_address: str | None,
                html_rows: bool, mem: memory.MemoryPlan) -> RunSummary:
    """The run, under its lock, as its phases: claim the folder, plan, pass 1, the global step, pass 2, finish."""
    lay = _claim(cfg, output, publish, fp, fresh)
    done = _finished_already(lay, cfg, files, fp, started)
    if done is not None:
        return done
    cfg = scaled_partitions(cfg, files)
    pipe = pipeline_for(cfg)
    owned = executor is None or isinstance(executor, str)
    ex = make_executor(executor or "local", workers, ray_address, import_main=_stages_in_main(pipe)) \
        if owned else executor
    run = _Phases(lay, cfg, pipe, fp, output, publish, ex, _Progress(quiet), mem)
    try:
        specs = run.plan(files)
        ok_tasks = run.pass1(specs)
        run.global_step(files, ok_tasks)
        run.pass2(specs, ok_tasks)
        extra_warnings = extra_columns_plan(lay).warnings  # (type conflicts of extra columns: said last)
    finally:
        if owned:
            ex.close()
    return run.finish(started, extra_warnings)


def _claim(cfg: dict, output: str, publish: str | None, fp: str, fresh: bool) -> Layout:
    """Make ``output`` (and the destination ``publish``) this run's, or refuse: another run's folder."""
    if publish:
        _check_destination(publish, fp, fresh)
    _claim_output_folder(output, fp, fresh)
    lay = Layout(output)
    if not os.path.exists(lay.owner):
        write_json_atomic({"tool": "dataclean", "fingerprint": fp, "config_hash": config_hash(cfg)}, lay.owner)
    if publish:  # marks the destination as this run's from the start (a killed run is resumed, not refused)
        iofs.publish_file(lay.owner, iofs.join(publish, os.path.basename(lay.owner)))
    return lay


def _finished_already(lay: Layout, cfg: dict, files: list[str], fp: str, started: float) -> RunSummary | None:
    """The summary of this very run when it finished before with all its products; else None (a finished run
    that lacks a product is run again, its markers dropped)."""
    from dataclean.exec import sanity

    final = load_marker(lay, "final")
    if not (final and final.get("fingerprint") == fp):
        return None
    missing = _missing_products(lay, cfg)
    if not missing:
        summary = _summary_from_disk(lay, resumed=len(files) * 2 + 1, started=started)
        summary.warnings = [w for w in [sanity.mostly_bad_warning(lay.root, sanity.mapping_of(cfg))] if w]
        return summary
    _say(f"note: the finished run in {lay.root} lacks {missing}; running it again")
    shutil.rmtree(os.path.join(lay.work, "markers"), ignore_errors=True)
    return None



def _splittable(path: str, fmt: str) -> bool:
    """Whether an input of format ``fmt`` can be cut into pieces at all: Parquet, or JSON Lines on a local disk,
    uncompressed, not named ``.json`` (which may hold one JSON array)."""
    return fmt == "parquet" or (fmt == "jsonl" and not iofs.is_uri(path)
                                and not path.lower().endswith(JSON_ARRAY_SUFFIXES))


Piece = tuple[tuple[int, int] | None, tuple[int, int, int] | None]  # (Parquet rows, JSON Lines span)


def _pieces(path: str, inp: InputSection) -> list[Piece] | None:
    """The pieces of ``path``: row ranges of a Parquet file (:func:`~dataclean.io.readers.parquet_pieces`;
    its footer is read only when the file is not smaller on disk than a piece, an object-store file always)
    or byte spans of a JSON Lines file (:func:`~dataclean.io.pieces.jsonl_pieces`); None: one task."""
    try:
        fmt = detect_format(path)
    except InputFileError:  # (a file named on its own: its task fails with the one-line cause, as any read)
        return None
    if inp.split_mb <= 0 or not _splittable(path, fmt):
        return None
    if fmt == "jsonl":
        spans = jsonl_pieces(path, inp.split_bytes, inp.batch_rows, MAX_CHUNK_TEXT_BYTES, inp.max_record_bytes)
        return [(None, span) for span in spans] if spans else None
    if not iofs.is_uri(path):
        try:
            if os.path.getsize(path) < inp.split_bytes // 8:  # (text compresses 3-5x; this reads no footer)
                return None
        except OSError:
            return None
    rows = parquet_pieces(path, inp.split_bytes, inp.batch_rows)
    return [(r, None) for r in rows] if rows else None


def _one_task_notes(files: list[str], file_tasks: list[tuple[int, ...]], inp: InputSection, workers: int) -> list[str]:
    """A line for each large input read as one task while workers are idle, saying how to use them all."""
    notes = []
    for path, tasks in zip(files, file_tasks):
        try:
            size = iofs.stat(path)[0]
        except (OSError, ValueError):
            continue
        if len(tasks) > 1 or size < max(inp.split_bytes, 16 << 20):  # (on disk: a few seconds of work or more)
            continue
        fmt = detect_format(path)
        splittable = _splittable(path, fmt)
        if splittable and inp.split_mb > 0:
            continue  # (under input.split_mb MiB: small enough for one task)
        if splittable:
            why = "input.split_mb is 0; set it (16) to cut it into pieces"
        elif fmt in ("jsonl.gz", "jsonl.zst"):
            why = "a compressed file is read from its start; decompress it to .jsonl or convert it to Parquet"
        elif fmt == "jsonl":
            why = ("a .json file may be one JSON array; rename it .jsonl if it is JSON Lines" if not iofs.is_uri(path)
                   else "only local JSON Lines files are cut into pieces; copy it to local disk or convert it to Parquet")
        else:
            why = "only Parquet and JSON Lines files are cut into pieces; convert it to Parquet to use them all"
        notes.append(f"{path} ({size / 1e6:,.0f} MB) was read as one task, by 1 of the {workers} workers: {why}")
    return notes


@dataclass
class _Phases:
    """One run's phases and what they hand on: the pass-1 results, the failed inputs, the tasks resumed, the
    seconds of each phase (for the manifest)."""

    lay: Layout
    cfg: dict
    pipe: Pipeline
    fp: str
    output: str
    publish: str | None
    ex: Executor
    progress: "_Progress"
    mem: memory.MemoryPlan  # the run's memory budget
    p1: dict[int, dict] = field(default_factory=dict)  # pass-1 task -> its result
    file_tasks: list[tuple[int, ...]] = field(default_factory=list)  # input file -> its pass-1 tasks
    task_cfg: dict = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  # said with the summary's warnings
    failed: list[dict] = field(default_factory=list)
    resumed: int = 0
    timings: dict[str, float] = field(default_factory=dict)

    def _done(self, name: str) -> bool:
        m = load_marker(self.lay, name)
        return bool(m and m.get("fingerprint") == self.fp)

    def plan(self, files: list[str]) -> list[TaskSpec]:
        """One pass-1 task per input file, or per piece of a large Parquet or JSON Lines file
        (``input.split_mb``: :func:`_pieces`), with the config the stages derived (no worker derives it
        again)."""
        self.task_cfg = task_cfg = self.pipe.task_config(self.cfg)
        remember_pipeline(task_cfg, self.pipe)
        inp = InputSection.of(self.cfg)
        specs: list[TaskSpec] = []
        for path in files:
            first = len(specs)
            for k, (rows, span) in enumerate(_pieces(path, inp) or [(None, None)]):
                specs.append(TaskSpec(len(specs), path, self.output, task_cfg, self.fp, self.publish, rows, span, k))
            self.file_tasks.append(tuple(range(first, len(specs))))
        if len(specs) < self.ex.workers:
            self.notes += _one_task_notes(files, self.file_tasks, inp, self.ex.workers)
        return specs

    def results(self) -> list[dict]:
        """The pass-1 result of each input file (its pieces' results added up)."""
        return [file_result(i, [self.p1[t] for t in tasks]) for i, tasks in enumerate(self.file_tasks)]

    def pass1(self, specs: list[TaskSpec]) -> list[int]:
        """Run the pass-1 tasks without a marker; return the tasks that read their input."""
        from dataclean.exec import sanity

        t0 = time.time()
        todo = []
        for spec in specs:
            marker = load_marker(self.lay, f"pass1-{spec.task:05d}")
            if marker and marker.get("fingerprint") == self.fp:
                self.p1[spec.task] = marker
                self.resumed += 1
            else:
                todo.append(spec)
        if todo:  # new pass-1 outputs: the reduce tasks' candidates must be made again from them
            clear_candidates(self.lay)
        with self.progress.phase("pass 1", len(todo), docs=True) as tick:
            for res in self.ex.map(pass1_task, todo, on_done=tick):
                self.p1[res["task"]] = res
        results = self.results()
        sanity.check_pass1(self.lay, results, sanity.mapping_of(self.cfg), self.publish or self.output)
        self.failed = [r for r in results if r["status"] != "ok"]
        self.timings["pass1"] = round(time.time() - t0, 3)
        return [t for r in results if r["status"] == "ok" for t in r["tasks"]]

    def global_step(self, files: list[str], ok_tasks: list[int]) -> None:
        """The global step, unless its marker is there for these pass-1 tasks."""
        t0 = time.time()
        g = load_marker(self.lay, "global")
        if not (g and g.get("fingerprint") == self.fp and g.get("tasks") == ok_tasks):
            for stale in files_in(self.lay.p("_work", "markers"), "pass2-*.json"):
                os.remove(stale)  # pass-2 results belong to the global step that is about to be redone
            doc_files = sorted(f for i in ok_tasks for f in files_in(self.lay.pass1_dir(i), "docs-*.parquet"))
            # the local workers stay for the global step's tasks and pass 2, with the kernels and imports their
            # tasks loaded (new ones made the first tasks of the global step and pass 2 ~0.1 s slower in all)
            with self.progress.phase("global", 1) as tick, write_errors(os.path.join(self.output, "_work", "global")):
                global_step(self.lay, self.cfg, self.pipe, doc_files, self.fp, ok_tasks, executor=self.ex,
                            mem=self.mem)
                tick()
        else:
            self.resumed += 1
        self.timings["global"] = round(time.time() - t0, 3)

    def pass2(self, specs: list[TaskSpec], ok_tasks: list[int]) -> None:
        """Run the pass-2 tasks without a marker: one per input file that pass 1 read, over all its pieces."""
        t0 = time.time()
        todo = []
        ok = set(ok_tasks)
        for i, tasks in enumerate(self.file_tasks):
            if tasks[0] not in ok:
                continue
            if self._done(f"pass2-{i:05d}"):
                self.resumed += 1
            else:
                path = specs[tasks[0]].input_path
                todo.append(FileSpec(i, tasks, path, self.output, self.task_cfg, self.fp, self.publish))
        with self.progress.phase("pass 2", len(todo)) as tick:
            self.ex.map(pass2_task, todo, on_done=tick)
        self.timings["pass2"] = round(time.time() - t0, 3)

    def finish(self, started: float, extra_warnings: list[str]) -> RunSummary:
        """Stats, manifest, verification, report; publish; the final marker; the summary."""
        from dataclean.audit.manifest import write_manifest
        from dataclean.audit.stats import write_stats
        from dataclean.audit.verify import verify
        from dataclean.exec import sanity

        lay, cfg, pipe, output, publish = self.lay, self.cfg, self.pipe, self.output, self.publish
        results = self.results()
        t0 = time.time()
        stage_order = ["read"] + [s.name for s in pipe.stages if not s.is_global] + ["ids"] + \
            [s.name for s in pipe.global_stages]
        rewrites = {c: s.name for s in pipe.stages for c in s.rewrite_columns}
        write_stats(output, stage_order, results, rewrites, memory_limit=self.mem.driver)
        failpoint("stats-written")
        self.timings["stats"] = round(time.time() - t0, 3)
        self.timings["total"] = round(time.time() - started, 3)
        write_manifest(lay, cfg, self.fp, results, self.timings, workers=self.ex.workers, executor=self.ex.name)
        report = verify(output, full=False)  # the shards were just written and fsynced: their footers are enough
        if OutputSection.of(cfg).report:
            _write_report(output, self.mem.driver)
        if publish and report.ok:
            for name in PUBLISHED:
                path = lay.p(name)
                if os.path.isdir(path):
                    iofs.publish_tree(path, iofs.join(publish, name))
                elif os.path.isfile(path):
                    iofs.publish_file(path, iofs.join(publish, name))
        if report.ok and not self.failed:
            write_json_atomic({"fingerprint": self.fp, "finished": time.time()}, lay.marker("final"))
            shutil.rmtree(os.path.join(lay.work, "pass1"), ignore_errors=True)
        elif not report.ok:
            _say("verify: " + "; ".join(report.problems))
        summary = _summary_from_disk(lay, resumed=self.resumed, started=started)
        summary.verified = report.ok
        summary.failed_inputs = [{"input": f["input"], "error": f["error"]} for f in self.failed]
        summary.warnings = [w for w in [sanity.mostly_bad_warning(output, sanity.mapping_of(cfg))] if w]
        summary.warnings = extra_warnings + self.notes + summary.warnings
        return summary


#: The exit of a worker process that imports the caller's script, which calls ``run`` at its top level (see
#: :func:`_stages_in_main`): not a run inside the worker. A worker forked by the fork server exits 1 without
#: printing it (the driver then stops at once, naming the same fix: LocalExecutor); a spawned one prints it.
_IMPORTED_BY_A_WORKER = ("error: a worker process imported {main} (it defines a stage class the workers need), "
                         "which calls dataclean.run at its top level: put the call under "
                         "`if __name__ == \"__main__\":`")


def _stages_in_main(pipe) -> bool:
    """Does the pipeline have a stage class defined in the caller's ``__main__`` (a class put in ``REGISTRY``
    by a script)? Only then do the local workers import ``__main__`` before their first task (they build their
    stages from the recipe entries, by name): otherwise a script without ``if __name__ == "__main__":`` would
    run again in every worker."""
    return any(type(stage).__module__ in ("__main__", "__mp_main__") for stage in pipe.stages)


def _write_report(output: str, memory_limit: str | None = None) -> None:
    """report.html, before the final marker (a run killed before it writes it on the rerun). A report that
    cannot be made is a warning: the cleaned data, ledger and stats are complete without it (also when a
    package the report draws with is missing: ``dataclean report OUT`` makes it once it is installed)."""
    from dataclean.report import ReportError, write_report

    try:
        write_report(output, memory_limit=memory_limit)
    except ReportError as exc:
        _say(f"warning: no report.html: {exc}")
    except ImportError as exc:  # (a broken install: a module the report imports when it is drawn)
        _say(f"warning: no report.html: {exc} (install it, then run `dataclean report {output}`)")


def _missing_products(lay: Layout, cfg: dict) -> str:
    """What a finished run's folder lacks ("" when whole): manifest.json, stats/summary.json, report.html
    when the config makes one, and every file the manifest lists under ``outputs`` at its recorded size
    (a stat each: no file is read)."""
    try:
        with open(lay.manifest, encoding="utf-8") as fh:
            outputs = json.load(fh).get("outputs", {})
    except (OSError, ValueError):
        return "manifest.json"
    wanted = {"stats/summary.json": None, **outputs}
    if OutputSection.of(cfg).report:
        wanted["report.html"] = None
    for rel, size in sorted(wanted.items()):
        try:
            if size is not None and os.path.getsize(lay.p(rel)) != size:
                return f"{rel} at its size of {size:,} bytes"
        except OSError:
            return rel
        if size is None and not os.path.isfile(lay.p(rel)):
            return rel
    return ""


def _say(line: str) -> None:
    """One line on stderr, with the file names and values in it made safe for a terminal."""
    from dataclean.audit.terminal import safe

    print(safe(line, line=True), file=sys.stderr)


def _summary_from_disk(lay: Layout, resumed: int, started: float) -> RunSummary:
    with open(os.path.join(lay.stats, "summary.json"), encoding="utf-8") as fh:
        s = json.load(fh)
    with open(lay.manifest, encoding="utf-8") as fh:
        manifest = json.load(fh)
    failed = [{"input": i["path"], "error": i["error"]} for i in manifest["inputs"] if i.get("status") != "ok"]
    from dataclean.sources import SourceKinds

    kinds = SourceKinds.from_config(manifest.get("config"))
    sources = {name: {"kind": kinds.kind(name), "input": row.get("input", 0)}
               for name, row in s.get("by_source", {}).items()}
    return RunSummary(output=lay.root, input_records=s["input_records"], kept=s["kept"], removed=s["removed"],
                      removed_by_stage=s["removed_by_stage"], removed_by_rule=s["removed_by_rule"],
                      failed_inputs=failed, verified=s.get("conservation_ok", False),
                      seconds=round(time.time() - started, 3), resumed_tasks=resumed,
                      mixture=s.get("mixture", []), sources=sources, skipped_records=s.get("skipped_records", {}),
                      url_blocked_by_category=s.get("url_blocked_by_category", {}))
