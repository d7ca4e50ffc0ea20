"""The ``dataclean`` command: parse, call the library, print."""
from __future__ import annotations

import os
import sys
from typing import NoReturn


import click

# (the pipeline's modules are imported inside the commands: ``run`` starts its workers' fork server first, so
# that the server loads them and the compiled kernels while this process does the same)


def _fail(error, code: int) -> NoReturn:
    """One line on stderr, ``error: ...``, and the exit code (2: cannot start or bad usage, 3: a write failed)."""
    click.echo(f"error: {error}", err=True)
    sys.exit(code)


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
    for failed in summary.failed_inputs:
        click.echo(f"error: cannot read {failed['error']}", err=True)
    click.echo(f"{summary.input_records} records in: {summary.kept} kept, {summary.removed} removed "
               f"({summary.seconds:.1f} s)")
    if summary.skipped_records:  # crawl files: records that are not pages are counted, not read
        click.echo(f"{sum(summary.skipped_records.values()):,} records skipped, not documents: "
                   + ", ".join(f"{k} {v:,}" for k, v in summary.skipped_records.items()))
    if summary.sources:  # once, each source the run saw and the kind (rule families) it got
        click.echo("sources: " + ", ".join(f"{name} = {v['kind']} ({v['input']:,})"
                                           for name, v in summary.sources.items()))
    for stage, n in summary.removed_by_stage.items():
        click.echo(f"  removed by {stage}: {n}")
        if stage == "url_filter" and summary.url_blocked_by_category:
            click.echo("    by category: "
                       + ", ".join(f"{k} {v:,}" for k, v in summary.url_blocked_by_category.items()))
    for row in summary.mixture:
        click.echo(f"  mixture {row['source']}: {row['achieved_tokens']:,} of {row['target_tokens']:,} target tokens "
                   f"(weight {row['achieved_weight']:.3f} vs {row['target_weight']:.3f}, "
                   f"{row['epochs_used']:.2f} epochs)")
        if row.get("warning"):
            click.echo(f"  warning: mixture {row['source']}: {row['warning']}", err=True)
    click.echo(f"cleaned data: {output}/data/   ledger: {output}/rejected/   stats: {output}/stats/summary.json")
    if os.path.abspath(summary.output) != os.path.abspath(output):  # an output URI: published from a run folder
        click.echo(f"run folder (for stats, sql, inspect, report, verify): {summary.output}")
    for warning in getattr(summary, "warnings", []):  # most records bad for one cause (exec/sanity.py)
        click.echo(f"warning: {warning}", err=True)
    if not summary.verified:
        click.echo("error: the output failed verification (see above)", err=True)
    if summary.failed_inputs or not summary.verified:
        sys.exit(1)


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
    import json

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
        click.echo(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        click.echo(format_report(report))


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
        click.echo(f"  {p}", err=True)
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
    import json

    from dataclean.config import ConfigError
    from dataclean.exec.runner import RunError
    from dataclean.rules_info import describe_rules

    try:
        rows = describe_rules(config_path, list(decontaminate))
    except (ConfigError, RunError) as exc:
        _fail(exc, 2)
    if fmt == "json":
        click.echo(json.dumps([dataclasses.asdict(r) for r in rows], indent=2, ensure_ascii=False))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title=f"dataclean rules ({rows[0].file if rows else ''})", show_lines=False)
    for col in ("stage", "rule", "signal", "compare", "thresholds", "per language", "applies to"):
        table.add_column(col, overflow="fold")
    fmt_d = lambda d: ", ".join(f"{k}={v}" for k, v in d.items())  # noqa: E731
    for r in rows:
        langs = "; ".join(f"{code}: {fmt_d(v)}" for code, v in r.by_lang.items())
        table.add_row(r.stage, r.rule, r.signal, r.compare, fmt_d(r.thresholds), langs, r.sources)
    Console(width=200).print(table)


@main.command()
@click.argument("output", type=click.Path(exists=True, file_okay=False))
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def stats(output, fmt) -> None:
    """Print the key tables of a finished run: summary, funnel, removals by rule, sources, dedup, mixture."""
    import json

    from dataclean.audit.query import QueryError, run_stats

    try:
        result = run_stats(output)
    except QueryError as exc:
        _fail(exc, 2)
    if fmt == "json":
        click.echo(json.dumps(result, indent=1, ensure_ascii=False))
        return
    from dataclean.audit.terminal import render_stats

    render_stats(result)


@main.command()
@click.argument("output", type=click.Path(exists=True, file_okay=False))
@click.argument("query", required=False)
@click.option("--format", "fmt", type=click.Choice(["table", "csv", "json"]), default="table", show_default=True)
@click.option("--limit", type=click.IntRange(0), help="At most N rows (default: 100 for table, all for csv/json).")
@click.option("--views", "show_views", is_flag=True, help="List the views and their columns instead.")
def sql(output, query, fmt, limit, show_views) -> None:
    """Run one read-only SQL QUERY (DuckDB) over the run's tables: kept, removed, stats, funnel, clusters…"""
    import json

    from dataclean.audit import query as q

    try:
        if show_views:
            views = q.list_views(output)
            if fmt == "table":
                from dataclean.audit.terminal import render_views

                render_views(views)
            elif fmt == "csv":
                rows = [(v["view"], v["rows"], c, t) for v in views for c, t in v["columns"]]
                click.echo(q.to_csv(q.QueryResult(["view", "rows", "column", "type"], [], rows)), nl=False)
            else:
                click.echo(json.dumps(views, indent=1, ensure_ascii=False))
            return
        if not query:
            _fail("give a QUERY (or --views to list the tables)", 2)
        if fmt in ("csv", "json"):
            try:
                q.export_query(output, query, fmt, sys.stdout.write, limit)
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
    import json

    from dataclean.audit import inspect as ins

    queries = [ins.Query(id=i) for i in ids]
    try:
        if ids_file:
            queries += [ins.Query(id=i) for i in ins.read_ids_file(ids_file)]
        if text_file:
            queries += ins.read_text_file(text_file, source)
    except (OSError, UnicodeDecodeError) as exc:
        _fail(exc, 2)
    if not queries:
        _fail("give --id, --ids-file or --text-file", 2)
    try:
        result = ins.inspect_documents(output, queries, full=full)
    except ins.InspectError as exc:
        _fail(exc, 2)
    if fmt == "json":
        from dataclean.audit.query import plain_value

        click.echo(json.dumps(plain_value(result), indent=1, ensure_ascii=False))
    else:
        from dataclean.audit.terminal import render_inspect

        render_inspect(result)
    if result["not_found"]:
        click.echo(f"error: {len(result['not_found'])} id(s) not found: {', '.join(result['not_found'][:10])}",
                   err=True)
        sys.exit(1)


@main.command()
@click.argument("output", type=click.Path(exists=True, file_okay=False))
@click.option("-o", "--out-file", "path", type=click.Path(dir_okay=False),
              help="Where to write the page (default: OUTPUT/report.html).")
def report(output, path) -> None:
    """Write report.html for a run's OUTPUT folder: one self-contained page, readable offline."""
    from dataclean.io.writers import WriteError
    from dataclean.report import ReportError, write_report

    try:
        written = write_report(output, path)
    except ReportError as exc:
        _fail(exc, 2)
    except WriteError as exc:  # as for `run`: the page could not be written (disk full, read-only folder)
        _fail(exc, 3)
    click.echo(f"report: {written}")


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
        click.echo(f"{side}: {s['sampled']:,} of {s['records']:,} documents sampled from {s['input']}")
    n_fail = len(result["failed"])
    click.echo(f"gates: {len(result['gates']) - n_fail} passed, {n_fail} failed "
               f"({result['seconds']['total']:.1f} s)")
    for g in result["gates"]:
        if not g["passed"]:
            value = "not measured" if g["value"] is None else f"{g['value']:.4g}"
            click.echo(f"FAIL {g['gate']}: {value} (bound {g['op']} {g['bound']:g}; {g['what']})")
    click.echo(f"results: {output}/compare.html  {output}/compare.json")
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
    click.echo(f"{summary.docs:,} documents, {summary.tokens:,} tokens ({summary.seconds:.1f} s): "
               + ", ".join(f"{export_dir}/{f}" for f in summary.files))
    click.echo(f"next: dataclean trace {export_dir} --step S --global-batch-size B --seq-len L")


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
    import json

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

        click.echo(json.dumps(plain_value(result), indent=1, ensure_ascii=False, default=lambda o: o.item()
                              if isinstance(o, np.generic) else str(o)))
    else:
        render(result)


if __name__ == "__main__":
    main()
