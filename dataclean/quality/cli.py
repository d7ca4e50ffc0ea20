"""``dataclean quality``: train and evaluate the linear quality classifier. Parse, call the library, print."""
from __future__ import annotations

import json
import os
import sys
import time

import click

from dataclean.cli_help import epilog as _epilog


@click.group(epilog=_epilog(["dataclean quality train --labels labels.jsonl -o model.npz --cv 5",
                             "dataclean quality train --embedder all-MiniLM-L6-v2/ --labels labels.jsonl -o head.npz",
                             "dataclean quality eval model.npz --labels heldout.jsonl"],
                            {2: "bad usage, unreadable or unusable labels, cannot write the model"}))
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


@quality.command(epilog=_epilog(
    ["dataclean quality train --labels labels.jsonl -o model.npz --cv 5",
     "dataclean quality train --positive good/ --negative bad/ -o model.npz --holdout 0.2",
     "dataclean quality train --embedder all-MiniLM-L6-v2/ --labels labels.jsonl -o head.npz --cv 5"],
    {2: "bad usage, unreadable labels, one class missing, bad embedder folder, cannot write the model"}))
@click.option("--positive", "positives", multiple=True,
              help="Good documents: a .parquet/.jsonl file, folder or glob (repeat the option for more).")
@click.option("--negative", "negatives", multiple=True,
              help="Bad documents: a .parquet/.jsonl file, folder or glob (repeat the option for more).")
@click.option("--labels", "label_inputs", multiple=True,
              help="Labelled documents, as for 'quality eval' (repeatable): id, text, label (1/0, keep/remove, "
                   "good/bad), optional lang and source.")
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False), help="Model file to write (.npz).")
@click.option("--text-column", default="text", show_default=True)
@click.option("--id-column", default="id", show_default=True,
              help="Column of ids (the holdout split and the folds hash them); without it, file#row.")
@click.option("--lang-column", default="lang", show_default=True,
              help="Column of languages (else lang_hint when present, else the script decides).")
@click.option("--label-column", default="label", show_default=True, help="The label column of --labels files.")
@click.option("--source-column", default="source", show_default=True,
              help="Column of sources, for the source-overlap warning (optional).")
@click.option("--holdout", default=None, type=click.FloatRange(0.0, 1.0, max_open=True),
              help="Fraction held out for evaluation, chosen by a hash of id and seed [default: 0.1; 0 with --cv].")
@click.option("--cv", "cv", type=click.IntRange(2), default=None,
              help="K-fold cross-validation by id hash: print the cross-validated AUC overall and per language, "
                   "then train the final model on every document.")
@click.option("--balance", default="lang,length", show_default=True,
              help="What to equalize between the classes by sample weights: lang, length, both (lang,length) or "
                   "none (classes only).")
@click.option("--per-lang", is_flag=True,
              help="Also fit one weight set per language with --min-lang-docs documents of each class (the "
                   "fallback weights, fitted on everything, score the other languages).")
@click.option("--min-lang-docs", default=20, show_default=True, type=click.IntRange(1))
@click.option("--dense/--no-dense", default=False, show_default=True,
              help="Add the dense document features (log words, stop-word fraction, terminal lines, ...) of the "
                   "heuristic signals to the n-grams.")
@click.option("--seed", default=0, show_default=True, type=int)
@click.option("--max-docs", type=click.IntRange(1), help="Use at most N documents per input (a hash sample).")
@click.option("--max-chars", default=None, type=click.IntRange(1),
              help="Characters of each document used for the n-gram features [default: 10000].")
@click.option("--C", "C", default=None, type=click.FloatRange(0.0, min_open=True),
              help="Inverse L2 regularization strength of the logistic regression [default: 4 for the n-gram "
                   "model, 0.1 with --embedder].")
@click.option("--embedder", default=None, metavar="MODEL",
              help="Train a logistic-regression head on this embedder's document embeddings instead of the n-gram "
                   "model: a sentence-transformers, ONNX or model2vec folder. The head file records the folder "
                   "and its digest (use it with scorer: embedding).")
@click.option("--backend", default="auto", show_default=True, help="--embedder: the embedding backend.")
@click.option("--max-tokens", default=None, type=click.IntRange(1),
              help="--embedder: tokens embedded per document [default: the model's own limit].")
@click.option("--long-text", default="truncate", show_default=True,
              help="--embedder: what to do with documents longer than --max-tokens (as the embed stage).")
@click.option("--device", default="auto", show_default=True, help="--embedder: where to run the embedder.")
@click.option("--threads", default=None, type=click.IntRange(1), help="--embedder: CPU threads of the embedder.")
@click.option("--add-good-lines", is_flag=True,
              help="Also train on one line (20-300 characters) of every good training document, so that short "
                   "clean text is not learned as bad when the bad documents are the short ones.")
@click.option("--threshold", default=0.5, show_default=True, type=float, help="Threshold for precision/recall.")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def train(positives, negatives, label_inputs, output, text_column, id_column, lang_column, label_column,  # noqa: C901 (the train command checks each option combination in turn)
          source_column, holdout, cv, balance, per_lang, min_lang_docs, dense, seed, max_docs, max_chars, C,
          embedder, backend, max_tokens, long_text, device, threads, add_good_lines, threshold, fmt) -> None:
    """Train a linear classifier of good vs bad documents (--labels, or --positive and --negative); write it
    to OUTPUT. With --embedder MODEL: a logistic-regression head on that embedder's document embeddings."""
    import numpy as np
    import pyarrow as pa

    from dataclean.quality.evaluate import evaluate_scores, holdout_mask
    from dataclean.quality.linear import DEFAULT_DENSE, HashingParams, class_differences, document_lines, fit, lang_keys

    if not label_inputs and not (positives and negatives):
        _fail("give --labels FILE, or both --positive GOOD and --negative BAD")
    if cv and holdout:
        _fail("--cv trains the final model on every document; give --cv or --holdout, not both")
    holdout = (0.0 if cv else 0.1) if holdout is None else holdout
    factors = tuple(f for f in balance.replace("+", ",").split(",") if f.strip())
    factors = tuple(f.strip() for f in factors)
    if factors == ("none",):
        factors = ()
    if any(f not in ("lang", "length") for f in factors) or len(set(factors)) != len(factors):
        _fail(f"--balance must be lang, length, lang,length or none, not {balance!r}")
    if embedder is not None:
        given = [flag for flag, on in (("--per-lang", per_lang), ("--dense", dense), ("--max-chars", max_chars),
                                       ("--add-good-lines", add_good_lines)) if on]
        if given:
            _fail(f"{', '.join(given)} belong to the n-gram model; --embedder trains a head on embeddings: "
                  "drop " + ("them" if len(given) > 1 else "it"))
    else:
        given = [flag for flag, on in (("--backend", backend != "auto"), ("--max-tokens", max_tokens),
                                       ("--long-text", long_text != "truncate"), ("--device", device != "auto"),
                                       ("--threads", threads)) if on]
        if given:
            _fail(f"{', '.join(given)} need --embedder MODEL")
    max_chars = 10_000 if max_chars is None else max_chars
    loaded = None
    if embedder is not None:  # before reading: a bad folder is one line, without waiting for the labels
        from dataclean.quality.embedding import EmbedderError, load

        try:
            loaded = load(embedder, backend=backend, device=device, threads=threads, max_tokens=max_tokens,
                          long_text=long_text)
        except EmbedderError as exc:
            _fail(f"--embedder: {exc}")

    read = dict(text_column=text_column, id_column=id_column, lang_column=lang_column, max_docs=max_docs,
                seed=seed, source_column=source_column)
    parts, n_bad, counts = [], 0, {}
    for name, inputs, label in (("positive", positives, True), ("negative", negatives, False),
                                ("labels", label_inputs, None)):
        if not inputs:
            continue
        extra = {"label_column": label_column} if label is None else {}
        docs, bad = _read(inputs, name, **read, **extra)
        n_bad += bad
        if label is not None:
            docs = docs.append_column("label", pa.array(np.full(docs.num_rows, label), pa.bool_()))
        counts[name] = docs.num_rows
        parts.append(docs.select(["id", "text", "lang", "source", "label"]))
    docs = pa.concat_tables(parts).combine_chunks()
    y = docs.column("label").to_numpy(zero_copy_only=False).astype(bool)
    if not y.any() or y.all():
        _fail(f"training needs good and bad documents (read {int(y.sum())} good, {int((~y).sum())} bad)")
    ids = docs.column("id")
    texts = docs.column("text")
    keys = lang_keys(texts, docs.column("lang"))
    lengths = np.asarray([len(t) for t in texts.to_pylist()])
    warnings = class_differences(y, keys, lengths, docs.column("source").to_pylist())
    for w in warnings:
        click.echo(f"warning: {w}", err=True)

    out = holdout_mask(ids, seed, holdout)
    if (out & y).sum() == y.sum() or (out & ~y).sum() == (~y).sum():
        _fail("the holdout took every document of a class; lower --holdout or add documents")
    if loaded is not None:
        _train_embedding(loaded, docs, y, keys, lengths, out, counts, n_bad, warnings, dict(
            embedder=embedder, backend=backend, max_tokens=max_tokens, long_text=long_text, output=output,
            inputs={"positive": list(positives), "negative": list(negatives), "labels": list(label_inputs)},
            factors=factors, C=C, seed=seed, cv=cv, holdout=holdout, max_docs=max_docs, threshold=threshold,
            fmt=fmt))
        return
    C = 4.0 if C is None else C
    tr = np.flatnonzero(~out)
    train_texts = texts.take(pa.array(tr))
    train_langs = docs.column("lang").take(pa.array(tr))
    extra, lines = None, []
    if add_good_lines:
        good_rows = np.flatnonzero(y[tr])
        picked = [(i, line) for i in good_rows for line in
                  document_lines([train_texts[int(i)].as_py()], [ids[int(tr[i])].as_py()], seed=seed)]
        lines = [line for _, line in picked]
        parents = [i for i, _ in picked]
        extra = (lines, np.ones(len(lines), bool), [train_langs[int(i)].as_py() for i in parents], parents)
    t0 = time.perf_counter()
    try:
        model, fitted = fit(train_texts, y[tr], langs=train_langs, params=HashingParams(max_chars=max_chars),
                            balance=factors, dense=DEFAULT_DENSE if dense else None, per_lang=per_lang,
                            min_lang_docs=min_lang_docs, C=C, seed=seed, cv=cv, ids=ids.take(pa.array(tr)),
                            extra=extra)
    except ValueError as exc:
        _fail(str(exc))
    seconds = time.perf_counter() - t0
    metrics = model.metrics
    metrics.update({
        "inputs": {"positive": list(positives), "negative": list(negatives), "labels": list(label_inputs)},
        "n_read_pos": int(y.sum()), "n_read_neg": int((~y).sum()), "n_read": counts, "bad_records_skipped": n_bad,
        "holdout_fraction": holdout, "seed": seed, "max_docs": max_docs, "extra_good_lines": len(lines),
        "train_seconds": round(seconds, 3), "warnings": warnings,
        "n_holdout_pos": int((out & y).sum()), "n_holdout_neg": int((out & ~y).sum())})
    if cv:
        metrics["cv"] = evaluate_scores(fitted["cv_scores"], y[tr], keys[tr].tolist(), threshold)
    if out.any():
        rows = pa.array(np.flatnonzero(out))
        t1 = time.perf_counter()
        scores = model.predict_proba(texts.take(rows), docs.column("lang").take(rows))
        metrics["holdout_predict_docs_per_s"] = round(len(rows) / max(time.perf_counter() - t1, 1e-9), 1)
        metrics["holdout"] = evaluate_scores(scores, y[out], keys[out].tolist(), threshold)
    try:
        model.save(output)
    except OSError as exc:
        _fail(f"cannot write {output}: {exc}")
    if fmt == "json":
        click.echo(json.dumps({"model": output, **metrics}, indent=2, ensure_ascii=False))
        return
    click.echo(f"read {int(y.sum())} good and {int((~y).sum())} bad documents"
               + (f" ({n_bad} unusable records skipped)" if n_bad else ""))
    extra_note = f" (incl. {len(lines)} lines of good documents)" if add_good_lines else ""
    click.echo(f"train: {metrics['n_train_pos']} good{extra_note} + {metrics['n_train_neg']} bad; holdout "
               f"{holdout:g} (seed {seed}): {metrics['n_holdout_pos']} good + {metrics['n_holdout_neg']} bad")
    heads = f"; per-language weights: {', '.join(sorted(model.heads))}" if per_lang else ""
    click.echo(f"balance: {', '.join(factors) if factors else 'classes only'}; dense features: "
               f"{'yes' if dense else 'no'}{heads}")
    click.echo(f"trained in {seconds:.1f} s (features {metrics['featurize_seconds']:.1f} s, fit "
               f"{metrics['fit_seconds']:.1f} s); {metrics['n_weights']} non-zero weights; "
               f"train AUC {metrics['train_auc']:.4f}")
    if cv:
        for line in _cv_lines(metrics["cv"], cv, seed):
            click.echo(line)
    if "holdout" in metrics:
        h = metrics["holdout"]["overall"]
        auc = "-" if h["auc"] is None else f"{h['auc']:.4f}"
        click.echo(f"holdout AUC {auc}")
        _print_table(_report_table("holdout", metrics["holdout"]))
    click.echo(f"model: {output} ({os.path.getsize(output) / 1e6:.1f} MB)")


def _train_embedding(embedder, docs, y, keys, lengths, out, counts, n_bad, warnings, o) -> None:
    """``train --embedder``: embed every document once, cross-validate and fit the head, write it, print."""
    import numpy as np
    import pyarrow as pa

    from dataclean.quality.embedding import DEFAULT_C, EmbedderRecord, embed_texts, fit
    from dataclean.quality.evaluate import evaluate_scores

    C = DEFAULT_C if o["C"] is None else o["C"]
    record = EmbedderRecord.of(embedder, o["embedder"], o["backend"], o["max_tokens"], o["long_text"])
    t0 = time.perf_counter()
    vectors = embed_texts(embedder, docs.column("text"))
    embed_seconds = time.perf_counter() - t0
    tr = np.flatnonzero(~out)
    t1 = time.perf_counter()
    try:
        head, fitted = fit(vectors[tr], y[tr], embedder=record, langs=keys[tr], lengths=lengths[tr],
                           balance=o["factors"], C=C, seed=o["seed"], cv=o["cv"],
                           ids=docs.column("id").take(pa.array(tr)))
    except ValueError as exc:
        _fail(str(exc))
    seconds = time.perf_counter() - t1
    metrics = head.info["metrics"]
    metrics.update({
        "inputs": o["inputs"], "n_read_pos": int(y.sum()), "n_read_neg": int((~y).sum()), "n_read": counts,
        "bad_records_skipped": n_bad, "holdout_fraction": o["holdout"], "seed": o["seed"], "max_docs": o["max_docs"],
        "embed_seconds": round(embed_seconds, 3), "embed_docs_per_s": round(len(y) / max(embed_seconds, 1e-9), 1),
        "train_seconds": round(seconds, 3), "warnings": warnings,
        "n_holdout_pos": int((out & y).sum()), "n_holdout_neg": int((out & ~y).sum())})
    if o["cv"]:
        metrics["cv"] = evaluate_scores(fitted["cv_scores"], y[tr], keys[tr].tolist(), o["threshold"])
    if out.any():
        rows = np.flatnonzero(out)
        metrics["holdout"] = evaluate_scores(head.predict_proba(vectors[rows]), y[out], keys[out].tolist(),
                                             o["threshold"])
    output = o["output"]
    try:
        head.save(output)
    except OSError as exc:
        _fail(f"cannot write {output}: {exc}")
    if o["fmt"] == "json":
        click.echo(json.dumps({"model": output, "embedder": record.to_json(), **metrics}, indent=2,
                              ensure_ascii=False))
        return
    click.echo(f"read {int(y.sum())} good and {int((~y).sum())} bad documents"
               + (f" ({n_bad} unusable records skipped)" if n_bad else ""))
    click.echo(f"train: {metrics['n_train_pos']} good + {metrics['n_train_neg']} bad; holdout {o['holdout']:g} "
               f"(seed {o['seed']}): {metrics['n_holdout_pos']} good + {metrics['n_holdout_neg']} bad")
    click.echo(f"embedder: {record.name} at {record.path} (dim {record.dim}, digest {record.digest[:12]}, "
               f"max_tokens {record.max_tokens if record.max_tokens is not None else 'default'}, long_text "
               f"{record.long_text}); balance: {', '.join(o['factors']) if o['factors'] else 'classes only'}; C {C:g}")
    click.echo(f"embedded {len(y)} documents in {embed_seconds:.1f} s; head trained in {seconds:.1f} s; "
               f"train AUC {metrics['train_auc']:.4f}")
    if o["cv"]:
        for line in _cv_lines(metrics["cv"], o["cv"], o["seed"]):
            click.echo(line)
    if "holdout" in metrics:
        h = metrics["holdout"]["overall"]
        click.echo(f"holdout AUC {'-' if h['auc'] is None else format(h['auc'], '.4f')}")
        _print_table(_report_table("holdout", metrics["holdout"]))
    click.echo(f"head: {output} ({record.dim} weights; score with scorer: embedding, model_path: {output})")


def _cv_lines(report: dict, k: int, seed: int) -> list[str]:
    """``cv AUC 0.8712 (5 folds by id hash, seed 0; 261 documents: 134 good, 127 bad)``, then one
    ``cv AUC lang=xx ...`` line per language."""
    def auc(m):
        return "-" if m["auc"] is None else f"{m['auc']:.4f}"

    o = report["overall"]
    out = [f"cv AUC {auc(o)} ({k} folds by id hash, seed {seed}; {o['n']} documents: {o['n_pos']} good, "
           f"{o['n_neg']} bad)"]
    for lang, m in report["by_lang"].items():
        out.append(f"cv AUC lang={lang} {auc(m)} ({m['n']} documents: {m['n_pos']} good, {m['n_neg']} bad)")
    return out


@quality.command(name="eval", epilog=_epilog(
    ["dataclean quality eval model.npz --labels heldout.jsonl --threshold 0.4 --format json"],
    {2: "bad usage, unreadable model or labels, no labelled documents"}))
@click.argument("model_path", metavar="MODEL", type=click.Path(dir_okay=False))
@click.option("--labels", "label_inputs", multiple=True, required=True,
              help="Labelled documents (.parquet/.jsonl file, folder or glob; repeatable): text + label (+ lang).")
@click.option("--threshold", default=0.5, show_default=True, type=float, help="Score at or above which = good.")
@click.option("--text-column", default="text", show_default=True)
@click.option("--label-column", default="label", show_default=True,
              help="1/0, true/false, pos/neg, good/bad or keep/remove (1 = good).")
@click.option("--lang-column", default="lang", show_default=True,
              help="Language column for per-language metrics (else lang_hint when present).")
@click.option("--embedder", default=None, metavar="MODEL",
              help="An embedding head's embedder at a new place (the same files: the digest is checked).")
@click.option("--format", "fmt", type=click.Choice(["table", "json"]), default="table", show_default=True)
def evaluate(model_path, label_inputs, threshold, text_column, label_column, lang_column, embedder, fmt) -> None:
    """Score labelled documents with MODEL (a linear model or an embedding head from 'quality train'): AUC,
    precision and recall, overall and per language."""
    from dataclean.quality.embedding import FORMAT as HEAD_FORMAT, HeadFileError, embed_texts, file_format, load_head
    from dataclean.quality.evaluate import evaluate_scores
    from dataclean.quality.linear import LinearQualityModel, ModelFileError

    is_head = file_format(model_path) == HEAD_FORMAT
    if embedder is not None and not is_head:
        _fail(f"--embedder applies to an embedding head; {model_path} is not one")
    try:
        if is_head:
            head, emb = load_head(model_path, embedder=embedder)

            class _Head:  # texts -> scores, as LinearQualityModel.predict_proba
                @staticmethod
                def predict_proba(texts):
                    return head.predict_proba(embed_texts(emb, texts))
            model = _Head()
        else:
            model = LinearQualityModel.load(model_path)
    except (ModelFileError, HeadFileError) as exc:
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
