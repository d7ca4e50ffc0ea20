"""The ``dataclean`` command: parse, call the library, print."""
from __future__ import annotations

import errno
import os
import sys
from typing import NoReturn

try:  # (imported now: out of memory, loading its extension module can fail, and the error line needs it)
    import resource
except ImportError:  # (Windows)
    resource = None

import click

from dataclean.cli_help import (  # noqa: F401
    EXIT_CANNOT_START,
    EXIT_INTERRUPTED,
    EXIT_PROBLEM_FOUND,
    EXIT_WRITE_FAILED,
    epilog as _epilog,
)

# (the pipeline's modules are imported inside the commands: ``run`` starts its workers' fork server first, so
# that the server loads them and the compiled kernels while this process does the same)


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
    """One line on stderr, ``error: ...``, and the exit code (:data:`EXIT_CANNOT_START`: cannot start or bad
    usage, :data:`EXIT_WRITE_FAILED`: a write failed)."""
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
    if resource is None:  # (Windows)
        return ""
    try:
        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
    except (OSError, ValueError):
        return ""
    return "" if soft == resource.RLIM_INFINITY else f"; address space limit {soft / 2 ** 30:.1f} GiB"


def _out_of_memory_line(exc: BaseException, ctx: click.Context) -> str:
    lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
    cause = lines[0] if lines else type(exc).__name__
    sub = ctx.invoked_subcommand and ctx.command.get_command(ctx, ctx.invoked_subcommand)
    has_workers = sub is not None and any(p.name == "workers" for p in getattr(sub, "params", []))
    return (f"error: out of memory ({cause}{_memory_limit()}); "
            f"{'lower --workers or raise the limit' if has_workers else 'raise the limit'}")


def usable_cpus() -> int:
    """The CPUs this process may run on (its affinity mask: a container's or ``taskset``'s limit), at least 1."""
    try:
        return max(len(os.sched_getaffinity(0)), 1)
    except (AttributeError, OSError):  # (macOS, Windows)
        return max(os.cpu_count() or 1, 1)


class _Workers(click.ParamType):
    """``--workers``: a number of processes, or ``auto`` (the default): one per usable CPU."""

    name = "N|auto"

    def convert(self, value, param, ctx):
        if isinstance(value, int) and not isinstance(value, bool):
            n = value
        elif str(value).strip().lower() == "auto":
            return usable_cpus()
        else:
            try:
                n = int(str(value).strip())
            except ValueError:
                self.fail(f"{value!r} is not a number of worker processes; give one (e.g. --workers 4) or auto",
                          param, ctx)
        if n < 1:
            self.fail(f"{n} workers: give at least 1 (--workers 1 runs in this process), or auto", param, ctx)
        return n


WORKERS = _Workers()
_WORKERS_HELP = "Worker processes; auto = one per usable CPU ({n} here). The output is the same for any number."


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
        sys.exit(EXIT_CANNOT_START)


def _config_path(ctx, param, value):
    """A config file, or one shipped in the rules folder by name (``--config crawl`` is rules/crawl.yaml)."""
    if value is None:
        return None
    from dataclean.config import bundled_config

    found = bundled_config(value)
    if not os.path.isfile(found):
        raise click.BadParameter(f"no file {value!r} (and no {value!r} among the shipped configs in rules/)")
    return str(found)


@click.group(cls=_Commands, epilog=_epilog(
    ["dataclean run data/ -o out/          # then open out/report.html",
     "dataclean inspect out/ --id DOC_ID   # why a document was removed",
     "dataclean config init my.yaml        # a config to edit; dataclean run data/ -o out/ --config my.yaml"],
    {EXIT_PROBLEM_FOUND: "the command found a problem (a gate failed, an id not found, verification failed)",
     EXIT_CANNOT_START: "cannot start: bad usage, a config error, not a finished run",
     EXIT_WRITE_FAILED: "a write failed (disk full, read-only): the same command resumes"}))
@click.version_option(package_name="dataclean")
def main() -> None:
    """Clean pretraining text: normalize, filter, deduplicate, score, mix — with a ledger of every removal.

    Every command: dataclean COMMAND --help for its options, examples and exit codes."""


#: ``--set KEY=VALUE``, the same option for every command that resolves a config.
_SET_HELP = ("Change one config value: STAGE.PARAMETER=VALUE (a stage by its kind or its name:), or "
             "SECTION.KEY=VALUE (global.partitions=8); VALUE is YAML (30, true, null, [en, zh]). Repeatable.")


@main.command(epilog=_epilog(
    ["dataclean run data/ -o out/",
     "dataclean run data/*.jsonl.gz -o out/ --workers 8 --set gopher_quality.min_words=30",
     "dataclean run data/ -o out/ --set 'langid.allowed=[en, zh]' --set global.partitions=16",
     "dataclean run crawl/*.warc.gz -o out/ --config crawl   # rules/crawl.yaml",
     "dataclean run data/ -o s3://bucket/run --work-dir /mnt/shared/run --executor ray --ray-address auto"],
    {EXIT_PROBLEM_FOUND: "done, but an input could not be read or the output failed verification (listed)",
     EXIT_CANNOT_START: "cannot start: a config error (one line naming the key), bad output folder, no inputs",
     EXIT_WRITE_FAILED: "a write failed (disk full, read-only): free space, the same command resumes"}))
@click.argument("inputs", nargs=-1, required=True)
@click.option("-o", "--output", required=True,
              help="Output folder, or a URI (s3://bucket/run, any pyarrow/fsspec file system) to publish to.")
@click.option("--work-dir", type=click.Path(file_okay=False),
              help="With an output URI: the run folder (markers, pass-1 files); shared by all workers on a cluster. "
                   "Default: ~/.cache/dataclean/runs/<hash of the URI>.")
@click.option("--config", "config_path", type=click.Path(dir_okay=False), callback=_config_path,
              help="YAML config merged onto rules/default.yaml (`dataclean config init` writes one).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help=_SET_HELP)
@click.option("--workers", default="auto", show_default=True, type=WORKERS,
              help=_WORKERS_HELP.format(n=usable_cpus()) + " With --executor ray and no --ray-address: CPUs of "
                   "the local Ray.")
@click.option("--executor", type=click.Choice(["local", "ray"]), default="local", show_default=True,
              help="Where tasks run: a local process pool, or Ray tasks (pip install 'dataclean[ray]').")
@click.option("--ray-address", help="Ray cluster to join (e.g. auto, ray://head:10001); default: start a local Ray.")
@click.option("--fresh", is_flag=True, help="Discard a previous run in OUTPUT (only files dataclean wrote).")
@click.option("--quiet", is_flag=True, help="No progress bars, and no next steps at the end.")
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
@click.option("--memory-limit", "memory_limit", metavar="SIZE|auto",
              help="Memory of the whole run (driver, workers, DuckDB), e.g. 4GB or 1.5GiB; default auto: 80% of the "
                   "machine's (config key `memory_limit`). Workers that do not fit are not started.")
def run(inputs, output, work_dir, config_path, sets, workers, executor, ray_address, fresh, quiet, text_column,
        id_column, source_column, default_source, dedup_against, decontaminate, mixture, memory_limit) -> None:
    """Clean INPUTS (files, folders or globs of .parquet/.jsonl[.gz|.zst], .warc[.gz], .wet.gz) into OUTPUT:
    data/ the kept documents, rejected/ a ledger row per removal, report.html the page to read first."""
    if executor == "local":
        from dataclean.exec.local import prestart

        prestart(workers)
    from dataclean.config import ConfigError, resolve_config
    from dataclean.exec.runner import RunError, run as run_pipeline
    from dataclean.io.writers import WriteError

    overrides = {k: v for k, v in {
        "input.columns.text": text_column, "input.columns.id": id_column,
        "input.columns.source": source_column, "input.default_source": default_source,
        "mixture": mixture, "memory_limit": memory_limit}.items() if v is not None}
    try:
        # (resolved here, not in the runner, so that a --set error is named as one: "--set KEY: ...")
        cfg = resolve_config(config_path, overrides, sets=sets)
        summary = run_pipeline(list(inputs), output, config=cfg, workers=workers, fresh=fresh,
                               quiet=quiet, dedup_against=list(dedup_against),
                               executor=executor, ray_address=ray_address, work_dir=work_dir,
                               decontaminate=list(decontaminate))
    except (RunError, ConfigError) as exc:
        _fail(exc, EXIT_CANNOT_START)
    except WriteError as exc:  # disk full, read-only...: nothing half-written is visible; a rerun resumes
        _fail(exc, EXIT_WRITE_FAILED)
    except OSError as exc:  # one the run did not turn into a WriteError (creating a new output folder...)
        _fail(_os_error(exc, output), EXIT_WRITE_FAILED if exc.errno in _WRITE_ERRNOS else EXIT_CANNOT_START)
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
        sys.exit(EXIT_PROBLEM_FOUND)
    if not quiet:
        for line in _next_steps(summary.output):
            _echo(line, err=True)


def _next_steps(run_folder: str) -> list[str]:
    """The lines that end a successful run: where report.html is (the page to read first) and the commands
    that come next, written to be copied (a removed document's real id when the ledger has one). Why: the run
    otherwise ends on counts, and a first-time user does not know the page or the commands exist."""
    import shlex

    folder = shlex.quote(run_folder)
    page = os.path.join(run_folder, "report.html")
    doc = _a_removed_id(run_folder)
    lines = [f"report: {page} (open it in a browser)" if os.path.isfile(page) else
             f"report: none written; write it with: dataclean report {folder}"]
    commands = [(f"dataclean inspect {folder} --id {shlex.quote(doc) if doc else 'ID'}",
                 "why this document was removed (any --id)" if doc else "why a document was removed or kept"),
                (f"dataclean verify {folder}", "recheck the counts and the shards")]
    if os.path.isfile(page):
        commands.append((f"dataclean report {folder}", "write report.html again"))
    width = max(len(c) for c, _ in commands)
    lines += [f"{'next:' if i == 0 else '':<6}{c:<{width}}   # {why}" for i, (c, why) in enumerate(commands)]
    return lines


def _a_removed_id(run_folder: str) -> str | None:
    """The id of the first ledger row of the run (its first rejected/ shard), or None (nothing removed, or
    the ledger unreadable: the hint then says ID)."""
    try:
        import pyarrow.parquet as pq

        root = os.path.join(run_folder, "rejected")
        shards = sorted(os.path.join(d, f) for d, _, files in os.walk(root) for f in files if f.endswith(".parquet"))
        for shard in shards:
            ids = pq.ParquetFile(shard).read(columns=["id"]).column("id")
            for value in ids.to_pylist():
                if value:
                    return str(value)
    except Exception:  # (a hint: never the reason a successful run fails)
        return None
    return None


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


@main.command(name="eval", epilog=_epilog(
    ["dataclean eval labels.jsonl", "dataclean eval labels.jsonl --config my.yaml --keep-run eval-run/ --format json"],
    {EXIT_CANNOT_START: "cannot start: unreadable labels, a config error"}))
@click.argument("labels", nargs=-1, required=True)
@click.option("--config", "config_path", type=click.Path(dir_okay=False), callback=_config_path,
              help="YAML config merged onto rules/default.yaml (as for run).")
@click.option("--workers", default="auto", show_default=True, type=WORKERS,
              help=_WORKERS_HELP.format(n=usable_cpus()))
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
        _fail(exc, EXIT_CANNOT_START)
    if fmt == "json":
        _echo_json(report, indent=2)
    else:
        click.echo(_safe(format_report(report), line=False))


@main.command(epilog=_epilog(["dataclean verify out/"],
                            {EXIT_PROBLEM_FOUND: "a problem found (each listed on stderr)",
                             EXIT_CANNOT_START: "bad usage (no such folder)"}))
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
    sys.exit(EXIT_PROBLEM_FOUND)


@main.command(epilog=_epilog(["dataclean rules", "dataclean rules --config crawl --format json"],
                            {EXIT_CANNOT_START: "a config error"}))
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
        _fail(exc, EXIT_CANNOT_START)
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


@main.command(epilog=_epilog(["dataclean stats out/", "dataclean stats out/ --format json"],
                            {EXIT_CANNOT_START: "not a finished run's folder"}))
@click.argument("output", type=click.Path(exists=True, file_okay=False))
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def stats(output, fmt) -> None:
    """Print the key tables of a finished run: summary, funnel, removals by rule, sources, dedup, mixture."""
    from dataclean.audit.query import QueryError, run_stats

    try:
        result = run_stats(output)
    except QueryError as exc:
        _fail(exc, EXIT_CANNOT_START)
    if fmt == "json":
        _echo_json(result, indent=1)
        return
    from dataclean.audit.terminal import render_stats

    render_stats(result)


def _csv_out(text: str) -> str:
    """CSV for stdout: on a terminal, with the characters that would act on it shown as U+FFFD; into a pipe or a
    file, as it is (CSV has no escapes: the data would change)."""
    return _safe(text, line=False) if sys.stdout.isatty() else text


@main.command(epilog=_epilog(
    ["dataclean sql out/ --views",
     "dataclean sql out/ \"SELECT rule, count(*) AS n FROM removed GROUP BY rule ORDER BY n DESC\"",
     "dataclean sql out/ \"SELECT id, text FROM removed WHERE rule = 'gopher_short_doc'\" --format csv > short.csv"],
    {EXIT_CANNOT_START: "no QUERY, a bad query, or not a run's folder"}))
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
            _fail("give a QUERY (or --views to list the tables)", EXIT_CANNOT_START)
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
        _fail(exc, EXIT_CANNOT_START)
    from dataclean.audit.terminal import render_query

    render_query(result)


@main.command(epilog=_epilog(
    ["dataclean inspect out/ --id doc-42", "dataclean inspect out/ --ids-file ids.txt --format json",
     "dataclean inspect out/ --text-file new-docs.jsonl   # documents not in the run: what pass 1 would do"],
    {EXIT_PROBLEM_FOUND: "an id was not found (listed on stderr; the others are printed)",
     EXIT_CANNOT_START: "no --id/--ids-file/--text-file, an unreadable file, not a run's folder"}))
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
            _fail(f"--id {i!r} is not valid UTF-8: no document has such an id", EXIT_CANNOT_START)
    if source is not None and not ins.is_unicode(source):
        _fail(f"--source {source!r} is not valid UTF-8", EXIT_CANNOT_START)
    queries = [ins.Query(id=i) for i in ids]
    try:
        if ids_file:
            queries += [ins.Query(id=i) for i in ins.read_ids_file(ids_file)]
        if text_file:
            queries += ins.read_text_file(text_file, source)
    except OSError as exc:  # (a file that went away, or a folder, since click checked it)
        _fail(f"cannot read {os.fsdecode(exc.filename or ids_file or text_file)}: "
              f"{os.strerror(exc.errno) if exc.errno else exc}", EXIT_CANNOT_START)
    except ins.InspectError as exc:
        _fail(exc, EXIT_CANNOT_START)
    if not queries:
        _fail("give --id, --ids-file or --text-file", EXIT_CANNOT_START)
    try:
        result = ins.inspect_documents(output, queries, full=full)
    except ins.InspectError as exc:
        _fail(exc, EXIT_CANNOT_START)
    if fmt == "json":
        from dataclean.audit.query import plain_value

        _echo_json(plain_value(result), indent=1)
    else:
        from dataclean.audit.terminal import render_inspect

        render_inspect(_labelled_values(result))
    if result["not_found"]:
        _echo(f"error: {len(result['not_found'])} id(s) not found: {', '.join(result['not_found'][:10])}", err=True)
        sys.exit(EXIT_PROBLEM_FOUND)


#: Rules whose ledger value is not the signal the rule reads (the table prints "value V (SIGNAL)"): what the
#: value is instead. An exact duplicate's value is the size of its group of identical texts, not a hash.
_VALUE_LABELS = {"exact_duplicate": lambda v: f"group of {v:,.0f} copies"}


def _labelled_values(result: dict) -> dict:
    """``result`` (:func:`dataclean.audit.inspect.inspect_documents`) for the table, with each fate whose rule's
    value is not its signal naming what the value is (the JSON form keeps the signal column's name)."""
    import copy

    out = copy.deepcopy(result)
    for doc in out.get("documents", ()):
        for key in ("fate", "would_be"):
            fate = doc.get(key) if isinstance(doc, dict) else None
            label = _VALUE_LABELS.get(fate.get("rule")) if isinstance(fate, dict) else None
            if label and isinstance(fate.get("value"), (int, float)):
                fate["signal"] = label(fate["value"])
    return out


@main.command(epilog=_epilog(["dataclean report out/", "dataclean report out/ -o /tmp/run-report.html"],
                            {EXIT_CANNOT_START: "not a finished run, or a run at work in the folder",
                             EXIT_WRITE_FAILED: "the page could not be written (disk full, read-only)"}))
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
        _fail(exc, EXIT_CANNOT_START)
    except WriteError as exc:  # as for `run`: the page could not be written (disk full, read-only folder)
        _fail(exc, EXIT_WRITE_FAILED)
    _echo(f"report: {written}")


@main.command(epilog=_epilog(
    ["dataclean compare old-out/ new-out/ -o compare-out/",
     "dataclean compare data/ new-data/ --gates my-gates.yaml --sample 5000"],
    {EXIT_PROBLEM_FOUND: "a gate failed (listed)", EXIT_CANNOT_START: "usage or input error"}))
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
    """Compare CANDIDATE with REFERENCE (files, folders, globs or run output folders) and check the gates."""
    from dataclean.compare import CompareError, compare as run_compare

    try:
        result = run_compare(reference, candidate, output, gates_path=gates_path, sample=sample, seed=seed,
                             config=config_path)
    except CompareError as exc:
        _fail(exc, EXIT_CANNOT_START)
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
        sys.exit(EXIT_PROBLEM_FOUND)


@main.command("export", epilog=_epilog(
    ["dataclean export out/ -o out-tokens/ --tokenizer tokenizer.json --format megatron",
     "# Megatron: --data-path out-tokens/export"],
    {EXIT_CANNOT_START: "cannot start (not a finished run, bad tokenizer, another export in the folder)",
     EXIT_WRITE_FAILED: "a write failed (the same command resumes)"}))
@click.argument("output", type=click.Path(exists=True, file_okay=False))
@click.option("-o", "--out", "export_dir", required=True, type=click.Path(file_okay=False),
              help="Export folder (written: export.bin/.idx or tokens/, export.docs.parquet, export.json).")
@click.option("--tokenizer", required=True, type=click.Path(exists=True, dir_okay=False),
              help="A HuggingFace tokenizer.json.")
@click.option("--format", "fmt", type=click.Choice(["megatron", "parquet"]), default="megatron", show_default=True,
              help="megatron: Megatron-LM/NeMo indexed dataset (.bin + .idx); parquet: token ids per document.")
@click.option("--eod-token", help="End-of-document token (default: <|endoftext|>, </s>, <eos>... if the vocabulary "
                                  "has one).")
@click.option("--workers", default="auto", show_default=True, type=WORKERS,
              help=_WORKERS_HELP.format(n=usable_cpus()))
@click.option("--fresh", is_flag=True, help="Replace an export of another run, tokenizer or format in the folder.")
@click.option("--quiet", is_flag=True, help="No progress lines.")
def export_cmd(output, export_dir, tokenizer, fmt, eod_token, workers, fresh, quiet) -> None:
    """Tokenize the kept documents of the run in OUTPUT into training files that trace every token back to its
    document (dataclean/export/writer.py)."""
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
        _fail(exc, EXIT_CANNOT_START)
    except WriteError as exc:
        _fail(exc, EXIT_WRITE_FAILED)
    _echo(f"{summary.docs:,} documents, {summary.tokens:,} tokens ({summary.seconds:.1f} s): "
          + ", ".join(f"{export_dir}/{f}" for f in summary.files))
    _echo(f"next: dataclean trace {export_dir} --step S --global-batch-size B --seq-len L")


@main.command(epilog=_epilog(
    ["# a loss spike at step 1200, global batch 512, 4096 tokens per sample:",
     "dataclean trace out-tokens/ --step 1200 --global-batch-size 512 --seq-len 4096",
     "dataclean trace out-tokens/ --step 1200 --global-batch-size 512 --megatron-cache ckpt/cache/GPTDataset_indices"],
    {EXIT_CANNOT_START: "bad usage or a position out of range"}))
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
    (dataclean/export/trace.py)."""
    import numpy as np

    from dataclean.export.trace import TraceError, read_token_file, render, trace as run_trace

    picks = list(samples)
    if step is not None:
        if gbs is None:
            _fail("--step needs --global-batch-size (samples per step)", EXIT_CANNOT_START)
        picks += list(range(step * gbs, (step + 1) * gbs))
    elif gbs is not None:
        _fail("--global-batch-size goes with --step", EXIT_CANNOT_START)
    if not picks and not tokens_file:
        _fail("give --sample, --step with --global-batch-size, or --tokens", EXIT_CANNOT_START)
    try:
        window = read_token_file(tokens_file) if tokens_file else None
        result = run_trace(export_dir, picks, seq_len, shuffle_seed, megatron_cache, megatron_prefix, window,
                           with_inspect=not no_inspect)
    except (TraceError, ValueError) as exc:
        _fail(exc, EXIT_CANNOT_START)
    if fmt == "json":
        from dataclean.audit.query import plain_value

        _echo_json(plain_value(result), indent=1, default=lambda o: o.item() if isinstance(o, np.generic) else str(o))
    else:
        render(result)



@main.group("config", epilog=_epilog(
    ["dataclean config init my.yaml", "dataclean config show --config my.yaml --set gopher_quality.min_words=30"],
    {EXIT_CANNOT_START: "a config error (one line naming the key), or init's file exists (--force)",
     EXIT_WRITE_FAILED: "init could not write the file"}))
def config_cmd() -> None:
    """Write a starting config, or print the config a run would use."""


@config_cmd.command("show", epilog=_epilog(
    ["dataclean config show", "dataclean config show --config my.yaml --set 'langid.allowed=[en, zh]'",
     "dataclean config show --set gopher_quality.min_words=30 > full.yaml   # a whole config to start from"],
    {EXIT_CANNOT_START: "a config error (one line naming the key)"}))
@click.option("--config", "config_path", type=click.Path(dir_okay=False), callback=_config_path,
              help="YAML config merged onto rules/default.yaml (as for run).")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help=_SET_HELP)
def config_show(config_path, sets) -> None:
    """Print the resolved config as YAML: the defaults with --config and every --set applied, the pipeline
    written out in full. What `dataclean run` with the same --config and --set would use."""
    import yaml

    from dataclean.config import ConfigError, resolve_config

    try:
        cfg = resolve_config(config_path, sets=sets)
    except ConfigError as exc:
        _fail(exc, EXIT_CANNOT_START)
    text = yaml.safe_dump(cfg, sort_keys=False, allow_unicode=True, width=120, default_flow_style=None)
    click.echo(_safe(text, line=False), nl=False)


#: The file `dataclean config init` writes. Its values are the defaults' own (filled in when it is written),
#: so that the file changes nothing until it is edited; it patches stages by name (``stages:``) rather than
#: restating the pipeline, which would freeze every other default of the version that wrote it.
_INIT_TEMPLATE = """\
# dataclean config, written by `dataclean config init`. It is merged onto the defaults (rules/default.yaml):
# only what it sets changes, and every value below is the default, so it changes nothing until you edit it.
#   use it:         dataclean run INPUT -o OUT --config {path}
#   see it all:     dataclean config show --config {path}
#   every rule:     dataclean rules --config {path}
#   one-off change: dataclean run INPUT -o OUT --config {path} --set gopher_quality.min_words=30

# Which input columns hold the text, the id and the source (null: the input has no such column).
input:
  columns:
    text: {text}
    id: {id}
    source: {source}
  default_source: {default_source}   # the source of records without one

# Stage parameters, by stage (its kind, or the name: it has in the pipeline), without restating the pipeline.
# A mapping such as by_lang is merged key by key: by_lang: {{zh: {{min_words: 100}}}} changes Chinese only.
stages:
  langid:
    allowed: {allowed}                # languages to keep, e.g. [en, zh]; null: every language
  gopher_quality:
    min_words: {min_words}                # a web document with fewer words (Chinese: characters) is removed
  minhash_dedup:
    threshold: {threshold}              # Jaccard similarity that makes two documents near-duplicates
  quality_filter:
    threshold: {qf_threshold}             # remove web documents whose quality_score is below this
    by_lang: {qf_by_lang}

output:
  rejected_text: {rejected_text}        # keep the text of removed documents in the ledger (rejected/)
  report: {report}               # write OUT/report.html at the end of the run

# To reorder, add or remove stages, write a pipeline: list (it replaces the whole list): copy it from
# `dataclean config show`.
"""


def _init_text(path: str) -> str:
    """:data:`_INIT_TEMPLATE` filled with the defaults' values (each as one line of YAML), comments aligned."""
    import re

    import yaml

    from dataclean.config import default_config
    from dataclean.sections import InputSection, OutputSection

    cfg = default_config()
    stage = {s.get("stage"): s for s in cfg["pipeline"]}

    def v(value) -> str:
        text = yaml.safe_dump(value, default_flow_style=True, allow_unicode=True, width=10_000).strip()
        return text[:-3].strip() if text.endswith("\n...") else text

    cols, out = InputSection.of(cfg).columns, OutputSection.of(cfg)
    text = _INIT_TEMPLATE.format(
        path=path, text=v(cols.text), id=v(cols.id), source=v(cols.source), default_source=v(cols.default_source), allowed=v(stage["langid"].get("allowed")),
        min_words=v(stage["gopher_quality"].get("min_words")), threshold=v(stage["minhash_dedup"].get("threshold")),
        qf_threshold=v(stage["quality_filter"].get("threshold")),
        qf_by_lang=v(stage["quality_filter"].get("by_lang") or {}),
        rejected_text=v(out.rejected_text), report=v(out.report))
    return "\n".join(re.sub(r"^(\s+\S.*?)\s+(# .*)$", lambda m: f"{m[1]:<34} {m[2]}", line)
                     for line in text.split("\n"))


@config_cmd.command("init", epilog=_epilog(
    ["dataclean config init                # writes dataclean.yaml",
     "dataclean config init my.yaml && dataclean run data/ -o out/ --config my.yaml"],
    {EXIT_CANNOT_START: "the file exists (give --force to overwrite it), or its folder does not",
     EXIT_WRITE_FAILED: "the file could not be written (disk full, read-only)"}))
@click.argument("path", default="dataclean.yaml", required=False)
@click.option("--force", is_flag=True, help="Overwrite PATH if it exists.")
def config_init(path, force) -> None:
    """Write PATH (default: dataclean.yaml), a short commented config: the settings a new user changes first,
    at their default values, as a patch of the defaults (stages by name)."""
    import shlex

    if os.path.exists(path) and not force:
        _fail(f"{path} exists; give --force to overwrite it, or another PATH", EXIT_CANNOT_START)
    if os.path.isdir(path):
        _fail(f"{path} is a folder; give a file PATH", EXIT_CANNOT_START)
    text = _init_text(shlex.quote(path))
    try:
        with open(path, "w", encoding="utf-8") as fh:
            fh.write(text)
    except OSError as exc:  # (as for run: a refused write is 3, a folder that does not exist 2)
        _fail(f"cannot write {path}: {exc.strerror or exc}",
              EXIT_WRITE_FAILED if exc.errno in _WRITE_ERRNOS else EXIT_CANNOT_START)
    _echo(f"wrote {path}; use it: dataclean run INPUT -o OUT --config {shlex.quote(path)}")

if __name__ == "__main__":
    main()
