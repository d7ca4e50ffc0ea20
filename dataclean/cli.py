"""The ``dataclean`` command: parse, call the library, print."""
from __future__ import annotations

import errno
import os
import sys
from typing import NoReturn


import click

# (the pipeline's modules are imported inside the commands: ``run`` starts its workers' fork server first, so
# that the server loads them and the compiled kernels while this process does the same)


#: The exit code of a command stopped by Ctrl-C (SIGINT): 128 + 2, as a shell reports it.
EXIT_INTERRUPTED = 130


def _safe(value, line: bool = True):
    """``value`` (a message with file names and data in it) fit for the terminal: every character that would act
    on it (escape sequences, bidi controls...) shown as U+FFFD; with ``line``, a newline too
    (:func:`dataclean.audit.terminal.safe`, the one escaping function of what dataclean prints)."""
    from dataclean.audit.terminal import safe

    return safe(str(value), line=line)


def _echo(message, err: bool = False) -> None:
    """One line on stdout (``err``: stderr), with the file names and data values in it made safe."""
    click.echo(_safe(message), err=err)


def _echo_json(value, **dumps) -> None:
    """``value`` as JSON, with the characters that would act on a terminal written as ``\\uXXXX`` escapes
    (the same JSON values, see :func:`dataclean.audit.terminal.safe_json`)."""
    import json

    from dataclean.audit.terminal import safe_json

    click.echo(safe_json(json.dumps(value, ensure_ascii=False, **dumps)))


def _fail(error, code: int) -> NoReturn:
    """One line on stderr, ``error: ...``, and the exit code (2: cannot start or bad usage, 3: a write failed)."""
    _echo(f"error: {error}", err=True)
    sys.exit(code)


def _is_out_of_memory(exc: BaseException) -> bool:
    """A MemoryError (also Arrow's ArrowMemoryError), or DuckDB's OutOfMemoryException (when DuckDB was
    imported: otherwise the exception cannot be one of its own)."""
    if isinstance(exc, MemoryError):
        return True
    duckdb = sys.modules.get("duckdb")
    return duckdb is not None and isinstance(exc, getattr(duckdb, "OutOfMemoryException", ()))


def _memory_limit() -> str:
    """`` (address space limit 1.5 GiB)`` when the process runs under ``ulimit -v``, else ``""``."""
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (ImportError, OSError, ValueError):  # (no resource module: Windows)
        return ""
    return "" if soft == resource.RLIM_INFINITY else f"; address space limit {soft / 2 ** 30:.1f} GiB"


def _out_of_memory_line(exc: BaseException, ctx: click.Context) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    cause = lines[0] if lines else type(exc).__name__
    sub = ctx.invoked_subcommand and ctx.command.get_command(ctx, ctx.invoked_subcommand)
    has_workers = sub is not None and any(p.name == "workers" for p in getattr(sub, "params", []))
    return (f"error: out of memory ({cause}{_memory_limit()}); "
            f"{'lower --workers or raise the limit' if has_workers else 'raise the limit'}")


class _Commands(click.Group):
    """The command group, with the ``quality`` commands imported when one is used: their package imports numpy
    and Arrow (~65 ms), which ``dataclean run`` would otherwise pay before it starts its workers' fork server."""

    lazy = {"quality": ("dataclean.quality.cli", "quality")}

    def list_commands(self, ctx):
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx, name):
        if name in self.lazy and name not in self.commands:
            import importlib

            module, attr = self.lazy[name]
            self.add_command(getattr(importlib.import_module(module), attr), name)
        return super().get_command(ctx, name)

    def invoke(self, ctx):
        """Every command: Ctrl-C and running out of memory end it with one line, never a traceback. (Click
        would print ``Aborted!`` and exit 1 on Ctrl-C.) Out of memory exits 2, "could not do its work", as a
        refused start does; Ctrl-C exits 130, as a shell reports a process ended by SIGINT."""
        try:
            return super().invoke(ctx)
        except KeyboardInterrupt:
            click.echo("interrupted; run the same command again to resume", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except Exception as exc:  # (MemoryError is an Exception too)
            if not _is_out_of_memory(exc):
                raise
            message = _out_of_memory_line(exc, ctx)
        # (printed after the except block: the traceback's frames, which hold what filled the memory, are gone)
        try:
            click.echo(_safe(message), err=True)
        except MemoryError:  # (still: the line without the details, which need an import)
            click.echo(message.split(" (")[0] + "; " + message.rsplit("; ", 1)[-1], err=True)
        sys.exit(2)


def _config_path(ctx, param, value):
    """A config file, or one shipped in the rules folder by name (``--config crawl`` is rules/crawl.yaml)."""
    if value is None:
        return None
    from dataclean.config import bundled_config

    found = bundled_config(value)
    if not os.path.isfile(found):
        raise click.BadParameter(f"no file {value!r} (and no {value!r} among the shipped configs in rules/)")
    return str(found)


@click.group(cls=_Commands)
@click.version_option(package_name="dataclean")
def main() -> None:
    """Clean pretraining text: normalize, filter, deduplicate, score, mix — with a ledger of every removal."""


@main.command()
@click.argument("inputs", nargs=-1, required=True)
@click.option("-o", "--output", required=True,
              help="Output folder, or a URI (s3://bucket/run, any pyarrow/fsspec file system) to publish to.")
@click.option("--work-dir", type=click.Path(file_okay=False),
              help="With an output URI: the run folder (markers, pass-1 files); shared by all workers on a cluster. "
                   "Default: ~/.cache/dataclean/runs/<hash of the URI>.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), callback=_config_path,
              help="YAML config merged onto rules/default.yaml.")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1),
              help="Worker processes (with --executor ray and no --ray-address: CPUs of the local Ray).")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="Where tasks run: a local process pool, or Ray tasks (pip install 'dataclean[ray]').")
@click.option("--ray-address", help="Ray cluster to join (e.g. auto, ray://head:10001); default: start a local Ray.")
@click.option("--fresh", is_flag=True, help="Discard a previous run in OUTPUT (only files dataclean wrote).")
@click.option("--quiet", is_flag=True, help="No progress bars.")
@click.option("--text-column", help="Input column that holds the text (input.columns.text).")
@click.option("--id-column", help="Input column that holds the id (input.columns.id).")
@click.option("--source-column", help="Input column that holds the source (input.columns.source).")
@click.option("--default-source", help="Source of records that have none (input.default_source).")
@click.option("--dedup-against", "dedup_against", multiple=True, type=click.Path(exists=True, file_okay=False),
              help="Also remove near-duplicates of the documents an earlier run (its output folder) kept.")
@click.option("--decontaminate", "decontaminate", multiple=True, metavar="FILE",
              help="Benchmark file (JSONL/JSON/Parquet, or a folder): remove documents that contain its items "
                   "(repeatable; the benchmark is named by the file's stem; config section `decontaminate`).")
@click.option("--mixture", help="Mixture recipe (YAML path, or a name under rules/mixtures/): sample the cleaned "
                                "sources to a token budget (config key `mixture`).")
def run(inputs, output, work_dir, config_path, workers, executor, ray_address, fresh, quiet, text_column, id_column,
        source_column, default_source, dedup_against, decontaminate, mixture) -> None:
    """Clean INPUTS (files, folders or globs of .parquet/.jsonl[.gz|.zst]) into OUTPUT."""
    if executor == "local":
        from dataclean.exec.local import prestart

        prestart(workers)
    from dataclean.config import ConfigError
    from dataclean.exec.runner import RunError, run as run_pipeline
    from dataclean.io.writers import WriteError

    overrides = {k: v for k, v in {
        "input.columns.text": text_column, "input.columns.id": id_column,
        "input.columns.source": source_column, "input.default_source": default_source,
        "mixture": mixture}.items() if v is not None}
    try:
        summary = run_pipeline(list(inputs), output, config=config_path, workers=workers, fresh=fresh,
                               quiet=quiet, overrides=overrides, dedup_against=list(dedup_against),
                               executor=executor, ray_address=ray_address, work_dir=work_dir,
                               decontaminate=list(decontaminate))
    except (RunError, ConfigError) as exc:
        _fail(exc, 2)
    except WriteError as exc:  # disk full, read-only...: nothing half-written is visible; a rerun resumes
        _fail(exc, 3)
    except OSError as exc:  # one the run did not turn into a WriteError (creating a new output folder...)
        _fail(_os_error(exc, output), 3 if exc.errno in _WRITE_ERRNOS else 2)
    for failed in summary.failed_inputs:
        _echo(f"error: cannot read {failed['error']}", err=True)
    _echo(f"{summary.input_records} records in: {summary.kept} kept, {summary.removed} removed "
          f"({summary.seconds:.1f} s)")
    if summary.skipped_records:  # crawl files: records that are not pages are counted, not read
        _echo(f"{sum(summary.skipped_records.values()):,} records skipped, not documents: "
              + ", ".join(f"{k} {v:,}" for k, v in summary.skipped_records.items()))
    if summary.sources:  # once, each source the run saw and the kind (rule families) it got
        _echo("sources: " + ", ".join(f"{name} = {v['kind']} ({v['input']:,})" for name, v in summary.sources.items()))
    for stage, n in summary.removed_by_stage.items():
        _echo(f"  removed by {stage}: {n}")
        if stage == "url_filter" and summary.url_blocked_by_category:
            _echo("    by category: " + ", ".join(f"{k} {v:,}" for k, v in summary.url_blocked_by_category.items()))
    for row in summary.mixture:
        _echo(f"  mixture {row['source']}: {row['achieved_tokens']:,} of {row['target_tokens']:,} target tokens "
              f"(weight {row['achieved_weight']:.3f} vs {row['target_weight']:.3f}, {row['epochs_used']:.2f} epochs)")
        if row.get("warning"):
            _echo(f"  warning: mixture {row['source']}: {row['warning']}", err=True)
    _echo(f"cleaned data: {output}/data/   ledger: {output}/rejected/   stats: {output}/stats/summary.json")
    if os.path.abspath(summary.output) != os.path.abspath(output):  # an output URI: published from a run folder
        _echo(f"run folder (for stats, sql, inspect, report, verify): {summary.output}")
    for warning in getattr(summary, "warnings", []):  # most records bad for one cause (exec/sanity.py)
        _echo(f"warning: {warning}", err=True)
    if not summary.verified:
        click.echo("error: the output failed verification (see above)", err=True)
    if summary.failed_inputs or not summary.verified:
        sys.exit(1)


#: The errors of a write the file system refused (permissions, a read-only file system, no space or quota).
_WRITE_ERRNOS = {errno.EACCES, errno.EPERM, errno.EROFS, errno.ENOSPC, errno.EDQUOT}


def _os_error(exc: OSError, output: str) -> str:
    """One line for an OSError that reached the CLI: as a :class:`~dataclean.io.writers.WriteError` says it
    for a refused write (the file named, the rerun resumes), else the file and the system's reason."""
    if exc.errno in _WRITE_ERRNOS:
        from dataclean.io.writers import write_error

        return str(write_error(os.fsdecode(exc.filename or output), exc))
    cause = os.strerror(exc.errno) if exc.errno else (str(exc) or type(exc).__name__)
    return f"{os.fsdecode(exc.filename)}: {cause}" if exc.filename else cause


@main.command(name="eval")
@click.argument("labels", nargs=-1, required=True)
@click.option("--config", "config_path", type=click.Path(dir_okay=False), callback=_config_path,
              help="YAML config merged onto rules/default.yaml (as for run).")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1))
@click.option("--text-column", default="text", show_default=True, help="Labels column holding the text.")
@click.option("--id-column", default="id", show_default=True, help="Labels column holding the id.")
@click.option("--label-column", default="label", show_default=True,
              help="Labels column holding keep/remove (1/0, good/bad).")
@click.option("--lang-column", default="lang", show_default=True,
              help="Labels column with the language to report a document under (else the run's langid).")
@click.option("--source-column", default="source", show_default=True,
              help="Labels column with the source name the pipeline sees (else input.default_source).")
@click.option("--keep-run", type=click.Path(file_okay=False),
              help="Keep the run in this folder (for dataclean inspect / sql); default: a temporary folder.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def eval_cmd(labels, config_path, workers, text_column, id_column, label_column, lang_column, source_column, keep_run,
             fmt) -> None:
    """Measure the pipeline's decisions against LABELS (files with id, text, label keep/remove; optional lang,
    source): removal precision, recall, good retention, per rule and per language, the quality score's AUC,
    and every misjudged document."""
    from dataclean.config import ConfigError
    from dataclean.evaluation import LabelColumns, LabelsError, evaluate, format_report, read_labels
    from dataclean.exec.runner import RunError

    try:
        table = read_labels(list(labels), LabelColumns(text=text_column, id=id_column, label=label_column,
                                                       lang=lang_column, source=source_column))
        report = evaluate(table, config_path, workers=workers, keep=keep_run)
    except (LabelsError, ConfigError, RunError) as exc:
        _fail(exc, 2)
    if fmt == "json":
        _echo_json(report, indent=2)
    else:
        click.echo(_safe(format_report(report), line=False))


@main.command()
@click.argument("output", type=click.Path(exists=True, file_okay=False))
def verify(output) -> None:
    """Check the conservation law and shard integrity of a run's OUTPUT folder."""
    from dataclean.audit.verify import verify as verify_output

    report = verify_output(output)
    if report.ok:
        click.echo(f"ok: {report.input_records} records in = {report.kept} kept + {report.removed} removed; "
                   f"{report.files_checked} shards readable, ids unique")
        return
    click.echo(f"FAILED: {len(report.problems)} problem(s)", err=True)
    for p in report.problems:
        _echo(f"  {p}", err=True)
    sys.exit(1)


@main.command()
@click.option("--config", "config_path", type=click.Path(dir_okay=False), callback=_config_path,
              help="YAML config merged onto rules/default.yaml.")
@click.option("--decontaminate", "decontaminate", multiple=True, metavar="FILE",
              help="Benchmark file, as for `run`: show the decontaminate stage it adds.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def rules(config_path, decontaminate, fmt) -> None:
    """Print every rule of the pipeline: its signal, thresholds (per language) and the file that sets them."""
    import dataclasses

    from dataclean.config import ConfigError
    from dataclean.exec.runner import RunError
    from dataclean.rules_info import describe_rules

    try:
        rows = describe_rules(config_path, list(decontaminate))
    except (ConfigError, RunError) as exc:
        _fail(exc, 2)
    if fmt == "json":
        _echo_json([dataclasses.asdict(r) for r in rows], indent=2)
        return
    from rich.console import Console
    from rich.table import Table
    from rich.text import Text

    # (names and values from config files go in as Text, never as rich markup)
    table = Table(title=Text(_safe(f"dataclean rules ({rows[0].file if rows else ''})")), show_lines=False)
    for col in ("stage", "rule", "signal", "compare", "thresholds", "per language", "applies to"):
        table.add_column(col, overflow="fold")
    fmt_d = lambda d: ", ".join(f"{k}={v}" for k, v in d.items())  # noqa: E731
    for r in rows:
        langs = "; ".join(f"{code}: {fmt_d(v)}" for code, v in r.by_lang.items())
        table.add_row(*[Text(_safe(c)) for c in (r.stage, r.rule, r.signal, r.compare, fmt_d(r.thresholds), langs,
                                                 r.sources)])
    Console(width=200).print(table)


@main.command()
@click.argument("output", type=click.Path(exists=True, file_okay=False))
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def stats(output, fmt) -> None:
    """Print the key tables of a finished run: summary, funnel, removals by rule, sources, dedup, mixture."""
    from dataclean.audit.query import QueryError, run_stats

    try:
        result = run_stats(output)
    except QueryError as exc:
        _fail(exc, 2)
    if fmt == "json":
        _echo_json(result, indent=1)
        return
    from dataclean.audit.terminal import render_stats

    render_stats(result)


def _csv_out(text: str) -> str:
    """CSV for stdout: on a terminal, with the characters that would act on it shown as U+FFFD; into a pipe or a
    file, as it is (CSV has no escapes: the data would change)."""
    return _safe(text, line=False) if sys.stdout.isatty() else text


@main.command()
@click.argument("output", type=click.Path(exists=True, file_okay=False))
@click.argument("query", required=False)
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True)
@click.option("--limit", type=click.IntRange(0), help="At most N rows (default: 100 for table, all for csv/json).")
@click.option("--views", "show_views", is_flag=True, help="List the views and their columns instead.")
def sql(output, query, fmt, limit, show_views) -> None:
    """Run one read-only SQL QUERY (DuckDB) over the run's tables: kept, removed, stats, funnel, clusters…"""
    from dataclean.audit import query as q

    try:
        if show_views:
            views = q.list_views(output)
            if fmt == "table":
                from dataclean.audit.terminal import render_views

                render_views(views)
            elif fmt == "csv":
                rows = [(v["view"], v["rows"], c, t) for v in views for c, t in v["columns"]]
                click.echo(_csv_out(q.to_csv(q.QueryResult(["view", "rows", "column", "type"], [], rows))), nl=False)
            else:
                _echo_json(views, indent=1)
            return
        if not query:
            _fail("give a QUERY (or --views to list the tables)", 2)
        if fmt in ("csv", "json"):
            from dataclean.audit.terminal import safe_json

            escape = safe_json if fmt == "json" else _csv_out
            try:
                q.export_query(output, query, fmt, lambda text: sys.stdout.write(escape(text)), limit)
            except BrokenPipeError:  # the reader (head, less) stopped early: not an error of ours
                import os

                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return
        result = q.run_query(output, query, limit if limit is not None else q.TABLE_DEFAULT_LIMIT)
    except q.QueryError as exc:
        sys.stdout.flush()
        _fail(exc, 2)
    from dataclean.audit.terminal import render_query

    render_query(result)


@main.command()
@click.argument("output", type=click.Path(exists=True, file_okay=False))
@click.option("--id", "ids", multiple=True, help="A document id (repeatable).")
@click.option("--ids-file", type=click.Path(exists=True, dir_okay=False), help="A file of ids, one per line.")
@click.option("--text-file", type=click.Path(exists=True, dir_okay=False),
              help="Documents by text: one per line, or JSONL with a text field.")
@click.option("--source", help="Source of the --text-file documents that have none (default: the run's).")
@click.option("--full", is_flag=True, help="Print whole texts (default: the first 600 characters).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def inspect(output, ids, ids_file, text_file, source, full, fmt) -> None:
    """Why was a document kept or removed: its fate, duplicates, text, anomalies and outlier signals."""
    from dataclean.audit import inspect as ins

    for i in ids:
        if not ins.is_unicode(i):  # bytes of the command line that are not UTF-8 (decoded to lone surrogates)
            _fail(f"--id {i!r} is not valid UTF-8: no document has such an id", 2)
    if source is not None and not ins.is_unicode(source):
        _fail(f"--source {source!r} is not valid UTF-8", 2)
    queries = [ins.Query(id=i) for i in ids]
    try:
        if ids_file:
            queries += [ins.Query(id=i) for i in ins.read_ids_file(ids_file)]
        if text_file:
            queries += ins.read_text_file(text_file, source)
    except OSError as exc:  # (a file that went away, or a folder, since click checked it)
        _fail(f"cannot read {os.fsdecode(exc.filename or ids_file or text_file)}: "
              f"{os.strerror(exc.errno) if exc.errno else exc}", 2)
    except ins.InspectError as exc:
        _fail(exc, 2)
    if not queries:
        _fail("give --id, --ids-file or --text-file", 2)
    try:
        result = ins.inspect_documents(output, queries, full=full)
    except ins.InspectError as exc:
        _fail(exc, 2)
    if fmt == "json":
        from dataclean.audit.query import plain_value

        _echo_json(plain_value(result), indent=1)
    else:
        from dataclean.audit.terminal import render_inspect

        render_inspect(result)
    if result["not_found"]:
        _echo(f"error: {len(result['not_found'])} id(s) not found: {', '.join(result['not_found'][:10])}", err=True)
        sys.exit(1)


@main.command()
@click.argument("output", type=click.Path(exists=True, file_okay=False))
@click.option("-o", "--out-file", "path", type=click.Path(dir_okay=False),
              help="Where to write the page (default: OUTPUT/report.html).")
def report(output, path) -> None:
    """Write report.html for a run's OUTPUT folder: one self-contained page, readable offline."""
    from dataclean.exec.errors import RunError
    from dataclean.exec.lock import RunLock
    from dataclean.io.writers import WriteError
    from dataclean.report import ReportError, check_finished, write_report

    try:
        with RunLock(output, create=False, hint=", then `dataclean report`"):  # no run at work meanwhile
            check_finished(output)  # (a run's own report.html is written before it is finished: not through here)
            written = write_report(output, path)
    except (ReportError, RunError) as exc:
        _fail(exc, 2)
    except WriteError as exc:  # as for `run`: the page could not be written (disk full, read-only folder)
        _fail(exc, 3)
    _echo(f"report: {written}")


@main.command()
@click.argument("reference")
@click.argument("candidate")
@click.option("-o", "--output", default="compare-out", show_default=True, type=click.Path(file_okay=False),
              help="Folder for compare.json and compare.html.")
@click.option("--gates", "gates_path", type=click.Path(exists=True, dir_okay=False),
              help="YAML gates merged onto rules/compare/default.yaml.")
@click.option("--sample", default=20000, show_default=True, type=click.IntRange(1),
              help="Documents sampled per side (by id hash).")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the sample.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), callback=_config_path,
              help="Pipeline config whose pass-1 signals are compared (default: rules/default.yaml).")
def compare(reference, candidate, output, gates_path, sample, seed, config_path) -> None:
    """Compare CANDIDATE with REFERENCE (files, folders, globs or run output folders) and check the gates.

    Exit 0: every gate passed; 1: a gate failed (listed); 2: usage or input error."""
    from dataclean.compare import CompareError, compare as run_compare

    try:
        result = run_compare(reference, candidate, output, gates_path=gates_path, sample=sample, seed=seed,
                             config=config_path)
    except CompareError as exc:
        _fail(exc, 2)
    for side in ("reference", "candidate"):
        s = result[side]
        _echo(f"{side}: {s['sampled']:,} of {s['records']:,} documents sampled from {s['input']}")
    n_fail = len(result["failed"])
    click.echo(f"gates: {len(result['gates']) - n_fail} passed, {n_fail} failed "
               f"({result['seconds']['total']:.1f} s)")
    for g in result["gates"]:
        if not g["passed"]:
            value = "not measured" if g["value"] is None else f"{g['value']:.4g}"
            _echo(f"FAIL {g['gate']}: {value} (bound {g['op']} {g['bound']:g}; {g['what']})")
    _echo(f"results: {output}/compare.html  {output}/compare.json")
    if n_fail:
        sys.exit(1)


@main.command("export")
@click.argument("output", type=click.Path(exists=True, file_okay=False))
@click.option("-o", "--out", "export_dir", required=True, type=click.Path(file_okay=False),
              help="Export folder (written: export.bin/.idx or tokens/, export.docs.parquet, export.json).")
@click.option("--tokenizer", required=True, type=click.Path(exists=True, dir_okay=False),
              help="A HuggingFace tokenizer.json.")
@click.option("--format", "fmt", type=click.Choice(["megatron", "parquet"]), default="megatron", show_default=True,
              help="megatron: Megatron-LM/NeMo indexed dataset (.bin + .idx); parquet: token ids per document.")
@click.option("--eod-token", help="End-of-document token (default: <|endoftext|>, </s>, <eos>... if the vocabulary "
                                  "has one).")
@click.option("--workers", default=1, show_default=True, type=click.IntRange(1), help="Worker processes.")
@click.option("--fresh", is_flag=True, help="Replace an export of another run, tokenizer or format in the folder.")
@click.option("--quiet", is_flag=True, help="No progress lines.")
def export_cmd(output, export_dir, tokenizer, fmt, eod_token, workers, fresh, quiet) -> None:
    """Tokenize the kept documents of the run in OUTPUT into training files that trace every token back to its
    document (dataclean/export/writer.py).

    \b
    Example:
      dataclean export out/ -o out-tokens/ --tokenizer tokenizer.json --format megatron
      # Megatron: --data-path out-tokens/export
    Exit codes: 0 done; 2 cannot start (not a finished run, bad tokenizer, another export in the folder);
    3 a write failed (the same command resumes).
    """
    from dataclean.export.writer import ExportError, export_run
    from dataclean.io.writers import WriteError

    state = {"docs": 0, "tokens": 0, "parts": 0}

    def progress(marker):
        state["parts"] += 1
        state["docs"] += marker["docs"]
        state["tokens"] += marker["tokens"]
        if not quiet:
            click.echo(f"export: {state['parts']} shard(s), {state['docs']:,} documents, {state['tokens']:,} tokens",
                       err=True)

    try:
        summary = export_run(output, export_dir, tokenizer, fmt=fmt, eod_token=eod_token, workers=workers,
                             fresh=fresh, progress=progress)
    except ExportError as exc:
        _fail(exc, 2)
    except WriteError as exc:
        _fail(exc, 3)
    _echo(f"{summary.docs:,} documents, {summary.tokens:,} tokens ({summary.seconds:.1f} s): "
          + ", ".join(f"{export_dir}/{f}" for f in summary.files))
    _echo(f"next: dataclean trace {export_dir} --step S --global-batch-size B --seq-len L")


@main.command()
@click.argument("export_dir", type=click.Path(exists=True, file_okay=False))
@click.option("--sample", "samples", multiple=True, type=click.IntRange(0), help="A sample index (repeatable).")
@click.option("--step", type=click.IntRange(0), help="A training step: with --global-batch-size, its samples.")
@click.option("--global-batch-size", "gbs", type=click.IntRange(1), help="Samples per step.")
@click.option("--seq-len", type=click.IntRange(1), help="Training sequence length (tokens per sample).")
@click.option("--shuffle-seed", type=int, help="dataclean's seeded shuffle of the samples (default: sequential).")
@click.option("--megatron-cache", type=click.Path(exists=True, file_okay=False),
              help="Megatron's GPTDataset cache folder (*-document_index.npy, *-sample_index.npy, "
                   "*-shuffle_index.npy): the samples as Megatron built them.")
@click.option("--megatron-prefix", help="Which index set of the cache folder (its file name prefix), if several.")
@click.option("--tokens", "tokens_file", type=click.Path(exists=True, dir_okay=False),
              help="A window of token ids (a text file of integers, or .npy): where in the export it occurs.")
@click.option("--no-inspect", is_flag=True, help="Do not look the documents up in the run.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def trace(export_dir, samples, step, gbs, seq_len, shuffle_seed, megatron_cache, megatron_prefix, tokens_file,
          no_inspect, fmt) -> None:
    """Which documents are behind a training sample, step or window of tokens, and what is odd about them
    (dataclean/export/trace.py).

    \b
    Example (a loss spike at step 1200, global batch 512, 4096 tokens per sample):
      dataclean trace out-tokens/ --step 1200 --global-batch-size 512 --seq-len 4096
      dataclean trace out-tokens/ --step 1200 --global-batch-size 512 --megatron-cache ckpt/cache/GPTDataset_indices
    Exit codes: 0 done; 2 bad usage or a position out of range.
    """
    import numpy as np

    from dataclean.export.trace import TraceError, read_token_file, render, trace as run_trace

    picks = list(samples)
    if step is not None:
        if gbs is None:
            _fail("--step needs --global-batch-size (samples per step)", 2)
        picks += list(range(step * gbs, (step + 1) * gbs))
    elif gbs is not None:
        _fail("--global-batch-size goes with --step", 2)
    if not picks and not tokens_file:
        _fail("give --sample, --step with --global-batch-size, or --tokens", 2)
    try:
        window = read_token_file(tokens_file) if tokens_file else None
        result = run_trace(export_dir, picks, seq_len, shuffle_seed, megatron_cache, megatron_prefix, window,
                           with_inspect=not no_inspect)
    except (TraceError, ValueError) as exc:
        _fail(exc, 2)
    if fmt == "json":
        from dataclean.audit.query import plain_value

        _echo_json(plain_value(result), indent=1, default=lambda o: o.item() if isinstance(o, np.generic) else str(o))
    else:
        render(result)


if __name__ == "__main__":
    main()
