"""``compare``: measure a reference and a candidate corpus the same way, compare, gate, write the results."""
from __future__ import annotations

import json
import math
import os
import time
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.compare.features import build_signal_stages, compute_features, feature_names
from dataclean.compare.gates import check_gate_features, evaluate_gates, load_gates
from dataclean.compare.load import CompareError, SideSample, read_side
from dataclean.compare.neardup import MinHashSample, reference_duplicate_rate, self_duplicate_rate
from dataclean.compare.stats import (
    TokenSample,
    bin_counts,
    category_js,
    diversity,
    js_divergence,
    js_noise_floor,
    ks_statistic,
    shared_edges,
    top_ngrams,
)
from dataclean.config import ConfigError, resolve_config
from dataclean.io.writers import WriteError, write_text_atomic
from dataclean.sections import InputSection
from dataclean.text.tokenize import words_batch
from dataclean.tokens import TokenCounter

__all__ = ["compare", "DEFAULT_SAMPLE"]

DEFAULT_SAMPLE = 20_000
SIDES = ("reference", "candidate")
#: Candidate documents shown per divergent feature, and how many features get examples.
EXAMPLES_PER_FEATURE = 3
EXAMPLE_FEATURES = 6
EXAMPLE_CHARS = 600


def _f(x) -> float | None:
    """A JSON-safe float (None for NaN/inf/None)."""
    if x is None:
        return None
    x = float(x)
    return x if math.isfinite(x) else None


def summarize(values: np.ndarray) -> dict[str, Any]:
    """Count, nulls and moments/quantiles of the non-null values of a feature on one side."""
    ok = values[~np.isnan(values)]
    out: dict[str, Any] = {"n": int(len(values)), "nulls": int(len(values) - len(ok))}
    if len(ok) == 0:
        return out
    q = np.quantile(ok, [0.05, 0.25, 0.5, 0.75, 0.95])
    out.update(mean=_f(ok.mean()), std=_f(ok.std()), min=_f(ok.min()), p05=_f(q[0]), p25=_f(q[1]),
               p50=_f(q[2]), p75=_f(q[3]), p95=_f(q[4]), max=_f(ok.max()))
    return out


def feature_divergence(ref: np.ndarray, cand: np.ndarray, bins: int) -> dict[str, Any]:
    """Binned distributions of one feature on both sides (shared quantile bins, plus a null bin when either
    side has nulls), their JS divergence, the KS statistic of the non-null values and the noise floor."""
    r_ok, c_ok = ref[~np.isnan(ref)], cand[~np.isnan(cand)]
    edges, discrete = shared_edges(r_ok, c_ok, bins)
    rc = bin_counts(r_ok, edges) if len(r_ok) else np.zeros(len(edges) - 1, np.int64)
    cc = bin_counts(c_ok, edges) if len(c_ok) else np.zeros(len(edges) - 1, np.int64)
    has_null = len(r_ok) < len(ref) or len(c_ok) < len(cand)
    if has_null:
        rc = np.append(rc, len(ref) - len(r_ok))
        cc = np.append(cc, len(cand) - len(c_ok))
    js = js_divergence(rc, cc) if len(ref) and len(cand) else None
    ks = ks_statistic(r_ok, c_ok) if len(r_ok) and len(c_ok) else None
    occupied = int(np.count_nonzero(rc + cc))
    return {
        "js": _f(js), "ks": _f(ks), "js_noise": _f(js_noise_floor(occupied, len(ref), len(cand))),
        "bins": {"edges": [float(e) for e in edges], "discrete": bool(discrete), "null_bin": bool(has_null),
                 "reference": rc.tolist(), "candidate": cc.tolist()},
        "constant": bool(occupied <= 1),
    }


def token_sample(texts: pa.Array, limit: int, chunk: int = 2000) -> TokenSample:
    """The first ``limit`` lower-cased tokenizer words of the documents, in order (the last document cut)."""
    words_parts, doc_parts = [], []
    total = 0
    for start in range(0, len(texts), chunk):
        words = words_batch(texts.slice(start, chunk))
        words_parts.append(pc.utf8_lower(pc.list_flatten(words)))
        doc_parts.append(pc.list_parent_indices(words).to_numpy(zero_copy_only=False).astype(np.int64) + start)
        total += len(words_parts[-1])
        if total >= limit:
            break
    if not words_parts:
        return TokenSample(np.zeros(0, np.int64), np.zeros(0, np.int64), [])
    flat = pa.concat_arrays(words_parts).slice(0, limit)
    doc = np.concatenate(doc_parts)[:limit]
    enc = pc.dictionary_encode(flat)
    return TokenSample(enc.indices.to_numpy(zero_copy_only=False).astype(np.int64), doc,
                       enc.dictionary.to_pylist())


def cut_sample(ts: TokenSample, limit: int) -> TokenSample:
    """The first ``limit`` tokens of ``ts``."""
    return TokenSample(ts.ids[:limit], ts.doc[:limit], ts.vocab)


def _side_info(side: SideSample) -> dict[str, Any]:
    return {"input": side.spec, "run_output": side.run_output, "files": len(side.files),
            "records": side.records, "bad_records": side.bad_records, "sampled": side.docs.num_rows}


def _examples(result: dict, cand_ids: list[str], cand_texts: pa.Array, cand_feats: dict[str, np.ndarray]
              ) -> list[dict]:
    """For the most divergent features, the bin where the candidate has the largest excess over the
    reference, and the first few candidate documents (in sample order) that fall in it."""
    ranked = sorted(((f["js"] or 0.0, name) for name, f in result["features"].items() if not f["constant"]),
                    reverse=True)
    out = []
    for js, name in ranked[:EXAMPLE_FEATURES]:
        if js <= 0:
            break
        b = result["features"][name]["bins"]
        rc, cc = np.asarray(b["reference"], float), np.asarray(b["candidate"], float)
        excess = cc / max(cc.sum(), 1) - rc / max(rc.sum(), 1)
        k = int(np.argmax(excess))
        if excess[k] <= 0:
            continue
        values = cand_feats[name]
        edges = np.asarray(b["edges"])
        n_value_bins = len(edges) - 1
        if b["null_bin"] and k == n_value_bins:
            members = np.flatnonzero(np.isnan(values))
            label = "null"
        else:
            idx = np.clip(np.searchsorted(edges, values, side="right") - 1, 0, n_value_bins - 1)
            members = np.flatnonzero(~np.isnan(values) & (idx == k))
            label = (f"= {(edges[k] + edges[k + 1]) / 2:.4g}" if b["discrete"] else
                     f"[{edges[k]:.4g}, {edges[k + 1]:.4g}{']' if k == n_value_bins - 1 else ')'}")
        docs = []
        for i in members[:EXAMPLES_PER_FEATURE]:
            text = cand_texts[int(i)].as_py() or ""
            docs.append({"id": cand_ids[int(i)], "value": _f(values[int(i)]), "chars": len(text),
                         "text": text[:EXAMPLE_CHARS]})
        out.append({"feature": name, "js": js, "bin": k, "bin_label": label,
                    "candidate_share": _f(cc[k] / max(cc.sum(), 1)), "reference_share": _f(rc[k] / max(rc.sum(), 1)),
                    "docs": docs})
    return out


def compare(reference: str, candidate: str, output_dir: str | None = None, gates_path: str | None = None,
            sample: int = DEFAULT_SAMPLE, seed: int = 0, config: str | dict | None = None) -> dict:
    """Compare ``candidate`` with ``reference`` (each: files, folders, globs or a run's output folder), check
    the gates, and write ``compare.json`` and ``compare.html`` into ``output_dir`` (when given). Returns the
    result (the content of compare.json). Raises :class:`CompareError` for usage and input problems."""
    t0 = time.perf_counter()
    timings: dict[str, float] = {}
    if sample < 1:
        raise CompareError("--sample must be at least 1")
    gates = load_gates(gates_path)
    try:
        cfg = resolve_config(config)
    except ConfigError as exc:
        raise CompareError(str(exc)) from None
    mapping = InputSection.of(cfg).columns
    stages = build_signal_stages(cfg)
    try:
        counter = TokenCounter.from_config(cfg.get("tokens"))
    except ValueError as exc:
        raise CompareError(f"tokens: {exc}") from None
    check_gate_features(gates, feature_names(stages))
    sides = {"reference": read_side(reference, mapping, sample, seed),
             "candidate": read_side(candidate, mapping, sample, seed)}
    timings["read"] = time.perf_counter() - t0

    t = time.perf_counter()
    measured = {name: compute_features(side.docs, stages, token_counter=counter) for name, side in sides.items()}
    timings["signals"] = time.perf_counter() - t

    result: dict[str, Any] = {
        "version": 1,
        "reference": _side_info(sides["reference"]),
        "candidate": _side_info(sides["candidate"]),
        "sample": sample, "seed": seed, "bins": gates["bins"],
        "stages": [s.name for s in stages],
    }

    t = time.perf_counter()
    ref_feats, cand_feats = measured["reference"][2], measured["candidate"][2]
    features = {}
    for name in ref_feats:
        d = feature_divergence(ref_feats[name], cand_feats[name], gates["bins"])
        features[name] = {"reference": summarize(ref_feats[name]), "candidate": summarize(cand_feats[name]), **d}
    result["features"] = features
    result["divergence_ranking"] = [n for _, n in sorted(((-(f["js"] or 0.0), n) for n, f in features.items()))]

    langs = {}
    for name in SIDES:
        counts = pc.value_counts(pc.fill_null(measured[name][1], "und")).to_pylist()
        langs[name] = {c["values"]: int(c["counts"]) for c in counts}
    lang_js = category_js(langs["reference"], langs["candidate"])
    result["language"] = {
        "js": _f(lang_js),
        **{name: {k: {"docs": v, "share": v / max(sum(langs[name].values()), 1)}
                  for k, v in sorted(langs[name].items(), key=lambda kv: (-kv[1], kv[0]))} for name in SIDES},
    }
    timings["divergence"] = time.perf_counter() - t

    t = time.perf_counter()
    max_tokens = gates["diversity"]["max_tokens"]
    toks = {name: token_sample(measured[name][0], max_tokens) for name in SIDES}
    size = min(max_tokens, *(len(toks[name]) for name in SIDES))
    toks = {name: cut_sample(toks[name], size) for name in SIDES}
    div = {name: diversity(toks[name], gates["diversity"]["ttr_window"]) for name in SIDES}
    ratio = {}
    for m in ("distinct_1", "distinct_2", "distinct_3", "ttr"):
        r, c = div["reference"][m], div["candidate"][m]
        ratio[m] = _f(c / r) if r and not math.isnan(r) and not math.isnan(c) else None
    result["diversity"] = {"tokens_per_side": size, "ttr_window": gates["diversity"]["ttr_window"],
                           "reference": {k: _f(v) if isinstance(v, float) else v for k, v in div["reference"].items()},
                           "candidate": {k: _f(v) if isinstance(v, float) else v for k, v in div["candidate"].items()},
                           "ratio": ratio}
    result["top_ngrams"] = {str(n): {name: [[g, c, _f(s)] for g, c, s in top_ngrams(toks[name], n, 20)]
                                     for name in SIDES} for n in (1, 2, 3)}
    timings["diversity"] = time.perf_counter() - t

    t = time.perf_counter()
    thr = gates["duplicates"]["threshold"]
    mh = {name: MinHashSample(measured[name][0], threshold=thr) for name in SIDES}
    c_rate, c_dups, c_ex = self_duplicate_rate(mh["candidate"])
    r_rate, r_dups, _ = self_duplicate_rate(mh["reference"])
    x_rate, x_dups, x_ex = reference_duplicate_rate(mh["candidate"], mh["reference"])
    ids = {name: sides[name].docs.column("id").to_pylist() for name in SIDES}
    texts = {name: measured[name][0] for name in SIDES}

    def pair(i, side_i, j, side_j, sim):
        return {"id": ids[side_i][i], "text": (texts[side_i][i].as_py() or "")[:EXAMPLE_CHARS],
                "dup_of": ids[side_j][j], "dup_of_side": side_j,
                "dup_of_text": (texts[side_j][j].as_py() or "")[:EXAMPLE_CHARS], "jaccard": _f(sim)}

    result["duplicates"] = {
        "threshold": thr,
        "candidate_self_rate": _f(c_rate), "candidate_self_dups": c_dups,
        "reference_self_rate": _f(r_rate), "reference_self_dups": r_dups,
        "candidate_vs_reference_rate": _f(x_rate), "candidate_vs_reference_dups": x_dups,
        "examples_self": [pair(i, "candidate", j, "candidate", s) for i, j, s in c_ex],
        "examples_reference": [pair(i, "candidate", j, "reference", s) for i, j, s in x_ex],
    }
    timings["near_duplicates"] = time.perf_counter() - t

    result["examples"] = _examples(result, ids["candidate"], texts["candidate"], cand_feats)
    result["gates"] = evaluate_gates(gates, result)
    result["failed"] = [g["gate"] for g in result["gates"] if not g["passed"]]
    result["passed"] = not result["failed"]
    result["gates_file"] = gates_path
    timings["total"] = time.perf_counter() - t0
    result["seconds"] = {k: round(v, 3) for k, v in timings.items()}
    if output_dir is not None:
        write_outputs(result, output_dir)
    return result


def write_outputs(result: dict, output_dir: str) -> tuple[str, str]:
    """Write ``compare.json`` and ``compare.html`` atomically into ``output_dir``."""
    from dataclean.compare.render import render_html

    try:
        os.makedirs(output_dir, exist_ok=True)
    except OSError as exc:
        raise CompareError(f"cannot create {output_dir}: {exc.strerror or exc}") from None
    t = time.perf_counter()
    page = render_html(result)
    result["seconds"]["html"] = round(time.perf_counter() - t, 3)
    paths = (os.path.join(output_dir, "compare.json"), os.path.join(output_dir, "compare.html"))
    blobs = (json.dumps(result, indent=1, ensure_ascii=False, allow_nan=False), page)
    for path, blob in zip(paths, blobs):
        try:
            write_text_atomic(blob, path)
        except WriteError as exc:
            raise CompareError(str(exc)) from None
    return paths
