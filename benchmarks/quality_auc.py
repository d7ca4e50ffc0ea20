"""Held-out AUC of the linear quality classifier on the bench corpus, English and Chinese separately.

    python benchmarks/quality_auc.py [--bench /work/shared/corpus/bench] [--holdout 0.2] [--seed 0]

Labels (all from ``/work/shared/corpus/bench``, documents with exactly the same text kept once):

* good: ``source`` wiki, books or docs (English: gensim enwiki, Brown, python-docs, perl-doc,
  debian-handbook/-reference; Chinese: cmrc2018 Wikipedia, C3 exam texts, Debian and LibreOffice docs);
* bad, two kinds:
  - ``spam``: SpamAssassin mails of the spam-1 and spam-2 sets (raw RFC 822, headers included);
  - ``noisy_web``: every other ``web`` document that the recipe's Gopher rules (``gopher_quality`` then
    ``gopher_repetition`` as in ``rules/default.yaml``) remove, sampled by id hash to at most
    ``--max-web-per-lang`` per language. English: mostly nlp-corpus one-liners (lyrics, SMS, reddit,
    transcripts), plus a few dolma-cc crawl pages. Chinese: Weibo posts (SMP2020), Douban book reviews,
    hotel / delivery / shopping reviews. There is no Chinese crawl spam or boilerplate in the corpus
    (21 dolma-cc pages), so for Chinese "bad" means short informal user posts, not garbage.

``lang`` is ``lang_hint`` before the ``-``; where it is null (SpamAssassin, most dolma-cc) the recipe's
langid stage decides. Documents are held out by a hash of their id and the seed.

Leakage probes (the classifier can learn where a document comes from rather than how good it is):

* ``ham_vs_spam_main_model``: held-out ham mails (easy-ham, hard-ham, never seen in training) against the
  held-out spam, scored by the main model. Near 0.5, or ham scored as bad, means the main model learned
  "looks like an e-mail", not "is spam".
* ``ham_vs_spam_own_model``: a second model trained on ham vs spam only (both have headers), evaluated on
  the held-out mails.
* ``length_matched``: held-out good documents cut to one line of the same length range as the bad ones
  (20-300 characters), against the held-out bad documents of that range: can the model still tell them
  apart when length cannot help?
* ``unseen_origin``: a model trained without one good origin (English: gensim Wikipedia; Chinese: cmrc2018
  Wikipedia) scores that origin's held-out documents against the held-out bad documents.

Writes ``benchmarks/results/quality_auc.json``.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from dataclean.pipeline import build_stage  # noqa: E402
from dataclean.quality.evaluate import evaluate_scores, holdout_mask, id_hash_unit, roc_auc  # noqa: E402
from dataclean.quality.linear import HashingParams, LinearQualityModel, document_lines, train  # noqa: E402

GOOD_SOURCES = ("wiki", "books", "docs")
LANGS = ("en", "zh")


def recipe_stage(kind: str):
    recipe = yaml.safe_load((REPO / "rules" / "default.yaml").read_text())
    entry = next(e for e in recipe["pipeline"] if e["stage"] == kind)
    return build_stage(entry)


def removed_by(stage, table: pa.Table, batch_rows: int = 8192) -> np.ndarray:
    out = []
    for batch in table.select(["text", "lang"]).to_batches(batch_rows):
        result = stage(batch)
        out.append(np.zeros(batch.num_rows, bool) if result.decisions is None
                   else result.decisions.removed.to_numpy(zero_copy_only=False))
    return np.concatenate(out) if out else np.zeros(0, bool)


def load_corpus(bench: str, seed: int, max_web_per_lang: int, log) -> pa.Table:
    t0 = time.perf_counter()
    files = sorted(Path(bench).glob("*.parquet"))
    table = pa.concat_tables(pq.read_table(f, columns=["id", "text", "source", "lang_hint", "origin"])
                             for f in files).combine_chunks()
    table = table.filter(pc.not_equal(table.column("source"), "code"))
    lang = pc.list_element(pc.split_pattern(table.column("lang_hint"), "-"), 0)
    table = table.append_column("lang", lang)
    # languages of undeclared documents (SpamAssassin, dolma-cc) from the recipe's langid stage
    missing = pc.is_null(table.column("lang")).to_numpy(zero_copy_only=False)
    idx = np.flatnonzero(missing)
    langid = recipe_stage("langid")
    found = []
    for start in range(0, len(idx), 4096):
        part = table.take(pa.array(idx[start:start + 4096])).select(["text"]).combine_chunks().to_batches()[0]
        found.extend(langid(part).batch.column("lang").to_pylist())
    lang_np = np.array(table.column("lang").to_pylist(), dtype=object)
    lang_np[idx] = found
    table = table.set_column(table.schema.get_field_index("lang"), "lang", pa.array(lang_np.tolist(), pa.string()))
    log(f"read {table.num_rows} non-code docs, langid on {len(idx)} undeclared ({time.perf_counter() - t0:.1f} s)")

    ids = np.array(table.column("id").to_pylist(), dtype=object)
    source = np.array(table.column("source").to_pylist(), dtype=object)
    origin = np.array(table.column("origin").to_pylist(), dtype=object)
    lang_np = np.array(table.column("lang").to_pylist(), dtype=object)
    is_mail = origin == "spamassassin"
    is_spam = is_mail & np.array(["/spam-" in i for i in ids])
    is_ham = is_mail & ~is_spam
    good = np.isin(source, GOOD_SOURCES) & np.isin(lang_np, LANGS)
    web = (source == "web") & ~is_mail & np.isin(lang_np, LANGS)
    # noisy web = what the recipe's Gopher rules remove
    t1 = time.perf_counter()
    web_idx = np.flatnonzero(web)
    web_table = table.take(pa.array(web_idx))
    gone = removed_by(recipe_stage("gopher_quality"), web_table)
    kept_idx = np.flatnonzero(~gone)
    gone[kept_idx[removed_by(recipe_stage("gopher_repetition"), web_table.take(pa.array(kept_idx)))]] = True
    noisy = np.zeros(len(ids), bool)
    noisy[web_idx[gone]] = True
    log(f"gopher rules on {len(web_idx)} en/zh web docs: {int(gone.sum())} removed "
        f"({time.perf_counter() - t1:.1f} s)")
    # sample noisy web per language by id hash
    u = id_hash_unit(ids, seed, "sample")
    for code in LANGS:
        m = np.flatnonzero(noisy & (lang_np == code))
        if len(m) > max_web_per_lang:
            drop = m[np.argsort(u[m], kind="stable")[max_web_per_lang:]]
            noisy[drop] = False
    group = np.full(len(ids), "", dtype=object)
    group[good] = "good"
    group[is_spam] = "spam"
    group[is_ham] = "ham"
    group[noisy] = "noisy_web"
    keep = group != ""
    table = table.filter(pa.array(keep)).append_column("group", pa.array(group[keep].tolist(), pa.string()))
    # exact duplicates: keep the first id; a text found in good and in bad documents is dropped
    order = pc.sort_indices(table, [("id", "ascending")])
    table = table.take(order)
    texts = table.column("text").to_pylist()
    groups = table.column("group").to_pylist()
    first: dict[str, int] = {}
    labels_of: dict[str, set] = {}
    for i, (t, g) in enumerate(zip(texts, groups)):
        first.setdefault(t, i)
        labels_of.setdefault(t, set()).add(g == "good")
    dedup = np.array([first[t] == i and len(labels_of[t]) == 1 for i, t in enumerate(texts)])
    log(f"exact duplicates and conflicting texts dropped: {int((~dedup).sum())}")
    return table.filter(pa.array(dedup))


def describe(table: pa.Table) -> dict:
    out: dict = {}
    for g, lang, origin in zip(table.column("group").to_pylist(), table.column("lang").to_pylist(),
                               table.column("origin").to_pylist()):
        key = f"{g}/{lang}/{origin}"
        out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def per_origin(scores: np.ndarray, table: pa.Table) -> dict:
    """Mean score and share scored >= 0.5, per (group, lang, origin) of the held-out documents."""
    keys = [f"{g}/{lang}/{o}" for g, lang, o in zip(table.column("group").to_pylist(),
                                                    table.column("lang").to_pylist(),
                                                    table.column("origin").to_pylist())]
    keys = np.array(keys, dtype=object)
    return {k: {"n": int((keys == k).sum()), "mean_score": round(float(scores[keys == k].mean()), 4),
                "share_ge_0.5": round(float((scores[keys == k] >= 0.5).mean()), 4)} for k in sorted(set(keys))}


def speed(model: LinearQualityModel, bench: str) -> dict:
    shard = pq.read_table(sorted(Path(bench).glob("*.parquet"))[0], columns=["text"]).column("text")
    mb = pc.sum(pc.binary_length(shard)).as_py() / 1e6
    model.predict_proba(shard.slice(0, 500))  # warm up
    best = None
    for _ in range(3):
        t0 = time.perf_counter()
        model.predict_proba(shard)
        dt = time.perf_counter() - t0
        best = dt if best is None else min(best, dt)
    out = {"load_average_1_5_15_min": [round(x, 2) for x in os.getloadavg()], "shard": "part-00000.parquet",
           "docs": len(shard), "mb_text": round(mb, 2), "seconds": round(best, 3),
           "docs_per_s": round(len(shard) / best, 1), "mb_per_s": round(mb / best, 2)}
    # the same features with scikit-learn's HashingVectorizer (word 1-2 + char 2-4), on 3,000 docs
    try:
        from sklearn.feature_extraction.text import HashingVectorizer

        sub = pc.utf8_lower(pc.utf8_slice_codeunits(shard.slice(0, 3000).combine_chunks(), 0,
                                                    model.params.max_chars)).to_pylist()
        t0 = time.perf_counter()
        HashingVectorizer(analyzer="word", ngram_range=(1, 2), n_features=model.params.n_features,
                          lowercase=False).transform(sub)
        HashingVectorizer(analyzer="char", ngram_range=(2, 4), n_features=model.params.n_features,
                          lowercase=False).transform(sub)
        dt_sk = time.perf_counter() - t0
        t0 = time.perf_counter()
        model.predict_proba(shard.slice(0, 3000))
        dt_ours = time.perf_counter() - t0
        out["sklearn_hashing_vectorizer_features_only_docs_per_s_first_3000"] = round(3000 / dt_sk, 1)
        out["ours_features_and_score_docs_per_s_first_3000"] = round(3000 / dt_ours, 1)
    except ImportError:
        pass
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--bench", default="/work/shared/corpus/bench")
    ap.add_argument("--holdout", type=float, default=0.2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-web-per-lang", type=int, default=15000)
    ap.add_argument("--C", type=float, default=4.0)
    ap.add_argument("--out", default=str(REPO / "benchmarks" / "results" / "quality_auc.json"))
    ap.add_argument("--skip-probes", action="store_true", help="only the main model and its held-out AUC")
    args = ap.parse_args()
    log = lambda msg: print(msg, file=sys.stderr, flush=True)  # noqa: E731
    load_at_start = [round(x, 2) for x in os.getloadavg()]

    table = load_corpus(args.bench, args.seed, args.max_web_per_lang, log)
    ids = table.column("id")
    out_mask = holdout_mask(ids, args.seed, args.holdout)
    group = np.array(table.column("group").to_pylist(), dtype=object)
    lang = np.array(table.column("lang").to_pylist(), dtype=object)
    label = group == "good"
    main_rows = group != "ham"
    train_rows = main_rows & ~out_mask
    test_rows = main_rows & out_mask
    texts = table.column("text")
    take = lambda m: texts.filter(pa.array(m))  # noqa: E731
    params = HashingParams()
    log(f"training on {int((train_rows & label).sum())} good + {int((train_rows & ~label).sum())} bad")
    t0 = time.perf_counter()
    model, train_metrics = train(take(train_rows & label), take(train_rows & ~label), params=params, C=args.C,
                                 seed=args.seed)
    train_seconds = time.perf_counter() - t0
    log(f"trained in {train_seconds:.1f} s: {train_metrics}")

    t0 = time.perf_counter()
    scores = model.predict_proba(take(test_rows))
    predict_seconds = time.perf_counter() - t0
    test_table = table.filter(pa.array(test_rows))
    report = evaluate_scores(scores, label[test_rows], lang[test_rows].tolist(), 0.5)
    by_kind = {}
    for kind in ("spam", "noisy_web"):
        for code in LANGS:
            m = (group[test_rows] == "good") | (group[test_rows] == kind)
            m &= lang[test_rows] == code
            by_kind[f"good_vs_{kind}/{code}"] = {
                "auc": roc_auc(scores[m], label[test_rows][m]),
                "n_good": int((m & label[test_rows]).sum()), "n_bad": int((m & ~label[test_rows]).sum())}
    spam_any = (group[test_rows] == "good") | (group[test_rows] == "spam")
    by_kind["good_vs_spam/all_langs"] = {"auc": roc_auc(scores[spam_any], label[test_rows][spam_any]),
                                         "n_good": int((spam_any & label[test_rows]).sum()),
                                         "n_bad": int((spam_any & ~label[test_rows]).sum())}
    result = {
        "what": "held-out AUC of dataclean's linear quality classifier (hashed word 1-2 + char 2-4 n-grams, "
                "logistic regression) on the bench corpus",
        "command": "python benchmarks/quality_auc.py " + " ".join(sys.argv[1:]),
        "machine": {"python": platform.python_version(), "cpu_count": os.cpu_count(), "cores_used": 1,
                    "load_average_1_5_15_min_at_start": load_at_start},
        "labels": {"good": "source in wiki/books/docs, lang en or zh",
                   "bad_spam": "spamassassin spam-1 + spam-2 (any language; lang by langid)",
                   "bad_noisy_web": f"other web docs removed by the recipe's gopher_quality + gopher_repetition, "
                                    f"at most {args.max_web_per_lang} per language (id-hash sample)",
                   "probe_only_ham": "spamassassin easy-ham + hard-ham (never in the main training set)"},
        "holdout": args.holdout, "seed": args.seed, "features": params.to_json(), "C": args.C,
        "docs_per_group_lang_origin": describe(table),
        "train": {**train_metrics, "total_seconds": round(train_seconds, 2)},
        "heldout": report,
        "heldout_by_bad_kind": by_kind,
        "heldout_by_origin": per_origin(scores, test_table),
        "heldout_predict": {"docs": int(test_rows.sum()), "seconds": round(predict_seconds, 3),
                            "docs_per_s": round(int(test_rows.sum()) / predict_seconds, 1)},
    }
    log(json.dumps({k: result[k] for k in ("heldout_by_bad_kind",)}, indent=1))
    for code in LANGS:
        r = report["by_lang"].get(code)
        if r:
            log(f"{code}: AUC {r['auc']:.4f} P@0.5 {r['precision']:.4f} R@0.5 {r['recall']:.4f} "
                f"({r['n_pos']} good, {r['n_neg']} bad)")

    if not args.skip_probes:
        probes = {}
        # 1. ham vs spam with the main model
        mail_test = out_mask & np.isin(group, ["ham", "spam"])
        ham_scores = model.predict_proba(take(mail_test))
        ham_label = group[mail_test] == "ham"
        probes["ham_vs_spam_main_model"] = {
            "auc_ham_as_good": roc_auc(ham_scores, ham_label), "n_ham": int(ham_label.sum()),
            "n_spam": int((~ham_label).sum()),
            "ham_share_ge_0.5": round(float((ham_scores[ham_label] >= 0.5).mean()), 4),
            "spam_share_ge_0.5": round(float((ham_scores[~ham_label] >= 0.5).mean()), 4),
            "ham_mean_score": round(float(ham_scores[ham_label].mean()), 4)}
        # 2. ham vs spam, own model
        mail_train = ~out_mask & np.isin(group, ["ham", "spam"])
        t0 = time.perf_counter()
        mail_model, _ = train(take(mail_train & (group == "ham")), take(mail_train & (group == "spam")),
                              params=params, C=args.C, seed=args.seed)
        s2 = mail_model.predict_proba(take(mail_test))
        probes["ham_vs_spam_own_model"] = {
            **{k: v for k, v in evaluate_scores(s2, ham_label, None, 0.5)["overall"].items()
               if k in ("n", "n_pos", "n_neg", "auc", "precision", "recall")},
            "train_seconds": round(time.perf_counter() - t0, 2)}
        # 3. length-matched: one line of 20-300 characters per good document vs bad documents of 20-300
        lengths = pc.utf8_length(texts).to_numpy(zero_copy_only=False)
        probes["length_matched_20_300_chars"] = {}
        for code in LANGS:
            good_m = test_rows & label & (lang == code)
            bad_m = test_rows & ~label & (lang == code) & (lengths >= 20) & (lengths <= 300)
            lines = document_lines(take(good_m), ids.filter(pa.array(good_m)), seed=args.seed)
            s_good = model.predict_proba(lines)
            s_bad = model.predict_proba(take(bad_m))
            y = np.r_[np.ones(len(s_good), bool), np.zeros(len(s_bad), bool)]
            r = evaluate_scores(np.r_[s_good, s_bad], y, None, 0.5)["overall"]
            probes["length_matched_20_300_chars"][code] = {
                k: r[k] for k in ("n_pos", "n_neg", "auc", "precision", "recall", "mean_score_pos",
                                  "mean_score_neg")}
            probes["length_matched_20_300_chars"][code]["median_chars_good_lines"] = \
                float(np.median([len(s) for s in lines])) if lines else None
            probes["length_matched_20_300_chars"][code]["median_chars_bad"] = \
                float(np.median(lengths[bad_m])) if bad_m.any() else None
        # 4. unseen origin
        origin = np.array(table.column("origin").to_pylist(), dtype=object)
        probes["unseen_origin"] = {}
        for code, held in (("en", "gensim-testdata"), ("zh", "cmrc2018")):
            excluded = label & (origin == held) & (lang == code)
            tr = train_rows & ~excluded
            t0 = time.perf_counter()
            m2, _ = train(take(tr & label), take(tr & ~label), params=params, C=args.C, seed=args.seed)
            ev = test_rows & (lang == code) & (excluded | ~label)
            s3 = m2.predict_proba(take(ev))
            r = evaluate_scores(s3, label[ev], None, 0.5)["overall"]
            probes["unseen_origin"][f"{code}:{held}"] = {
                **{k: r[k] for k in ("n_pos", "n_neg", "auc", "precision", "recall")},
                "auc_with_origin_in_training": roc_auc(scores[ev[test_rows]], label[ev]),
                "train_seconds": round(time.perf_counter() - t0, 2)}
        # 5. the same training set plus one line (20-300 characters) of every good training document as an
        #    extra good example (``dataclean quality train --add-good-lines``): does teaching "short can be good"
        #    fix the length shortcut?
        tr_good = train_rows & label
        extra = document_lines(take(tr_good), ids.filter(pa.array(tr_good)), seed=args.seed + 1)
        t0 = time.perf_counter()
        m4, _ = train(pa.chunked_array(take(tr_good).chunks + [pa.array(extra, pa.string())]),
                      take(train_rows & ~label), params=params, C=args.C, seed=args.seed)
        aug = {"extra_good_lines": len(extra), "train_seconds": round(time.perf_counter() - t0, 2)}
        s4 = m4.predict_proba(take(test_rows))
        r4 = evaluate_scores(s4, label[test_rows], lang[test_rows].tolist(), 0.5)
        for code in LANGS:
            good_m = test_rows & label & (lang == code)
            bad_m = test_rows & ~label & (lang == code) & (lengths >= 20) & (lengths <= 300)
            lines = document_lines(take(good_m), ids.filter(pa.array(good_m)), seed=args.seed)
            s_l = np.r_[m4.predict_proba(lines), m4.predict_proba(take(bad_m))]
            y = np.r_[np.ones(len(lines), bool), np.zeros(int(bad_m.sum()), bool)]
            rl = evaluate_scores(s_l, y, None, 0.5)["overall"]
            aug[code] = {"heldout_auc": r4["by_lang"][code]["auc"],
                         "heldout_precision": r4["by_lang"][code]["precision"],
                         "heldout_recall": r4["by_lang"][code]["recall"],
                         "length_matched_auc": rl["auc"], "length_matched_precision": rl["precision"],
                         "length_matched_recall": rl["recall"]}
        s4m = m4.predict_proba(take(mail_test))
        aug["ham_vs_spam_auc"] = roc_auc(s4m, ham_label)
        aug["ham_share_ge_0.5"] = round(float((s4m[ham_label] >= 0.5).mean()), 4)
        probes["snippet_augmented_model"] = aug
        result["leakage_probes"] = probes
        log(json.dumps(probes, indent=1))

    result["speed_one_core"] = speed(model, args.bench)
    log(json.dumps(result["speed_one_core"], indent=1))
    os.makedirs(os.path.dirname(args.out), exist_ok=True)
    with open(args.out, "w") as fh:
        json.dump(result, fh, indent=2, ensure_ascii=False)
        fh.write("\n")
    log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
