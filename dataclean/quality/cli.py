"""``dataclean quality``: train and evaluate the linear quality classifier. Parse, call the library, print."""
from __future__ import annotations

import json
import os
import sys
import time

import click


@click.group()
def quality() -> None:
    """Train and evaluate quality classifiers (good vs bad documents)."""


def _fail(message: str) -> None:
    click.echo(f"error: {message}", err=True)
    sys.exit(2)


def _read(inputs, what: str, **kwargs):
    from dataclean.io.readers import InputFileError
    from dataclean.quality.evaluate import read_documents

    try:
        return read_documents(list(inputs), **kwargs)
    except (InputFileError, FileNotFoundError, ValueError) as exc:
        _fail(f"{what}: {exc}")


def _report_table(title: str, report: dict):
    from rich.table import Table

    from dataclean.quality.evaluate import format_metric as f

    t = report["threshold"]
    table = Table(title=title)
    for col in ("group", "docs", "good", "bad", "AUC", f"precision@{t:g}", f"recall@{t:g}", f"F1@{t:g}"):
        table.add_column(col, justify="left" if col == "group" else "right")
    rows = [("all", report["overall"])] + [(f"lang={k}", v) for k, v in report["by_lang"].items()]
    for name, m in rows:
        table.add_row(name, f(m["n"]), f(m["n_pos"]), f(m["n_neg"]), f(m["auc"]), f(m["precision"]),
                      f(m["recall"]), f(m["f1"]))
    return table


def _print_table(*renderables) -> None:
    from rich.console import Console

    console = Console(width=120)
    for r in renderables:
        console.print(r)


@quality.command()
@click.option("--positive", "positives", multiple=True, required=True,
              help="Good documents: a .parquet/.jsonl file, folder or glob (repeat the option for more).")
@click.option("--negative", "negatives", multiple=True, required=True,
              help="Bad documents: a .parquet/.jsonl file, folder or glob (repeat the option for more).")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Model file to write (.npz).")
@click.option("--text-column", default="text", show_default=True)
@click.option("--id-column", default="id", show_default=True,
              help="Column of ids (the holdout split hashes them); without it, file#row.")
@click.option("--lang-column", default="lang", show_default=True,
              help="Column of languages for per-language metrics (else lang_hint when present).")
@click.option("--holdout", default=0.1, show_default=True, type=click.FloatRange(0.0, 1.0, max_open=True),
              help="Fraction held out for evaluation, chosen by a hash of id and seed.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--max-docs", type=click.IntRange(1), help="Use at most N documents per class (a hash sample).")
@click.option("--max-chars", default=10_000, show_default=True, type=click.IntRange(1),
              help="Characters of each document used for features.")
@click.option("--C", "C", default=4.0, show_default=True, type=click.FloatRange(0.0, min_open=True),
              help="Inverse L2 regularization strength of the logistic regression.")
@click.option("--add-good-lines", is_flag=True,
              help="Also train on one line (20-300 characters) of every good training document, so that short "
                   "clean text is not learned as bad when the bad documents are the short ones.")
@click.option("--threshold", default=0.5, show_default=True, type=float, help="Threshold for precision/recall.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def train(positives, negatives, output, text_column, id_column, lang_column, holdout, seed, max_docs, max_chars,
          C, add_good_lines, threshold, fmt) -> None:
    """Train a linear classifier of good (--positive) vs bad (--negative) documents; write it to OUTPUT."""
    import numpy as np
    import pyarrow as pa

    from dataclean.quality.evaluate import evaluate_scores, holdout_mask
    from dataclean.quality.linear import HashingParams, document_lines, train as train_model

    read = dict(text_column=text_column, id_column=id_column, lang_column=lang_column, max_docs=max_docs, seed=seed)
    pos, bad_pos = _read(positives, "positive", **read)
    neg, bad_neg = _read(negatives, "negative", **read)
    if not pos.num_rows or not neg.num_rows:
        _fail(f"training needs good and bad documents (read {pos.num_rows} good, {neg.num_rows} bad)")
    pos_out = holdout_mask(pos.column("id"), seed, holdout)
    neg_out = holdout_mask(neg.column("id"), seed, holdout)
    if pos_out.all() or neg_out.all():
        _fail("the holdout took every document of a class; lower --holdout or add documents")
    good = pos.column("text").filter(~pos_out)
    lines = []
    if add_good_lines:
        lines = document_lines(good, pos.column("id").filter(~pos_out), seed=seed)
        good = pa.chunked_array(good.chunks + [pa.array(lines, pa.string())], pa.string())
    t0 = time.perf_counter()
    model, _ = train_model(good, neg.column("text").filter(~neg_out), params=HashingParams(max_chars=max_chars),
                           C=C, seed=seed)
    seconds = time.perf_counter() - t0
    metrics = model.metrics
    metrics.update({
        "inputs": {"positive": list(positives), "negative": list(negatives)},
        "n_read_pos": pos.num_rows, "n_read_neg": neg.num_rows, "bad_records_skipped": bad_pos + bad_neg,
        "holdout_fraction": holdout, "seed": seed, "max_docs": max_docs, "extra_good_lines": len(lines),
        "train_seconds": round(seconds, 3),
        "n_holdout_pos": int(pos_out.sum()), "n_holdout_neg": int(neg_out.sum())})
    if pos_out.any() or neg_out.any():
        texts = pos.column("text").filter(pos_out).to_pylist() + neg.column("text").filter(neg_out).to_pylist()
        langs = pos.column("lang").filter(pos_out).to_pylist() + neg.column("lang").filter(neg_out).to_pylist()
        labels = np.r_[np.ones(int(pos_out.sum()), bool), np.zeros(int(neg_out.sum()), bool)]
        t1 = time.perf_counter()
        scores = model.predict_proba(texts)
        metrics["holdout_predict_docs_per_s"] = round(len(texts) / max(time.perf_counter() - t1, 1e-9), 1)
        metrics["holdout"] = evaluate_scores(scores, labels, langs, threshold)
    try:
        model.save(output)
    except OSError as exc:
        _fail(f"cannot write {output}: {exc}")
    if fmt == "json":
        click.echo(json.dumps({"model": output, **metrics}, indent=2, ensure_ascii=False))
        return
    click.echo(f"read {pos.num_rows} good and {neg.num_rows} bad documents"
               + (f" ({bad_pos + bad_neg} unusable records skipped)" if bad_pos + bad_neg else ""))
    extra = f" (incl. {len(lines)} lines of good documents)" if add_good_lines else ""
    click.echo(f"train: {metrics['n_train_pos']} good{extra} + {metrics['n_train_neg']} bad; holdout {holdout:g} "
               f"(seed {seed}): {metrics['n_holdout_pos']} good + {metrics['n_holdout_neg']} bad")
    click.echo(f"trained in {seconds:.1f} s (features {metrics['featurize_seconds']:.1f} s, fit "
               f"{metrics['fit_seconds']:.1f} s); {metrics['n_weights']} non-zero weights; "
               f"train AUC {metrics['train_auc']:.4f}")
    if "holdout" in metrics:
        h = metrics["holdout"]["overall"]
        auc = "-" if h["auc"] is None else f"{h['auc']:.4f}"
        click.echo(f"holdout AUC {auc}")
        _print_table(_report_table("holdout", metrics["holdout"]))
    click.echo(f"model: {output} ({os.path.getsize(output) / 1e6:.1f} MB)")


@quality.command(name="eval")
@click.argument("model_path", metavar="MODEL", type=click.Path(dir_okay=False))
@click.option("--labels", "label_inputs", multiple=True, required=True,
              help="Labelled documents (.parquet/.jsonl file, folder or glob; repeatable): text + label (+ lang).")
@click.option("--threshold", default=0.5, show_default=True, type=float, help="Score at or above which = good.")
@click.option("--text-column", default="text", show_default=True)
@click.option("--label-column", default="label", show_default=True,
              help="1/0, true/false, pos/neg or good/bad (1 = good).")
@click.option("--lang-column", default="lang", show_default=True,
              help="Language column for per-language metrics (else lang_hint when present).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def evaluate(model_path, label_inputs, threshold, text_column, label_column, lang_column, fmt) -> None:
    """Score labelled documents with MODEL: AUC, precision and recall, overall and per language."""
    from dataclean.quality.evaluate import evaluate_scores
    from dataclean.quality.linear import LinearQualityModel, ModelFileError

    try:
        model = LinearQualityModel.load(model_path)
    except ModelFileError as exc:
        _fail(str(exc))
    docs, n_bad = _read(label_inputs, "labels", text_column=text_column, id_column=None, lang_column=lang_column,
                        label_column=label_column)
    if not docs.num_rows:
        _fail("no labelled documents")
    t0 = time.perf_counter()
    scores = model.predict_proba(docs.column("text"))
    seconds = time.perf_counter() - t0
    report = evaluate_scores(scores, docs.column("label").to_numpy(zero_copy_only=False),
                             docs.column("lang").to_pylist(), threshold)
    report.update({"model": model_path, "labels": list(label_inputs), "bad_records_skipped": n_bad,
                   "predict_seconds": round(seconds, 3),
                   "docs_per_s": round(docs.num_rows / max(seconds, 1e-9), 1)})
    if fmt == "json":
        click.echo(json.dumps(report, indent=2, ensure_ascii=False))
        return
    o = report["overall"]
    auc = "-" if o["auc"] is None else f"{o['auc']:.4f}"
    click.echo(f"{o['n']} documents ({o['n_pos']} good, {o['n_neg']} bad)"
               + (f", {n_bad} unusable records skipped" if n_bad else "")
               + f"; scored in {seconds:.2f} s ({report['docs_per_s']:.0f} docs/s)")
    click.echo(f"AUC {auc}")
    _print_table(_report_table(f"{os.path.basename(model_path)} at threshold {threshold:g}", report))


if __name__ == "__main__":
    quality()
