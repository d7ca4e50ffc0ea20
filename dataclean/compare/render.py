"""``compare.html``: the gates first, then every feature's two distributions, language mix, diversity, top
n-grams, near-duplicates and candidate documents from where the distributions differ most.

The page uses the run report's building blocks (:mod:`dataclean.report.page`: escaping, tables, sections,
the page shell with its Content-Security-Policy; :mod:`dataclean.report.charts`: charts written as inline SVG),
so it looks the same and loads nothing. Every value from the data goes through ``esc``; chart labels are also
shortened by ``label``.
"""
from __future__ import annotations

import math

from dataclean.report.charts import grouped_bars, label, legend_row, svg_element, text
from dataclean.report.page import Cell, esc, figure, note, num, page, pre, section, table
from dataclean.report.svggrid import AXIS, compact, nice_ticks, pt

__all__ = ["render_html"]

REF_COLOUR = "#4c78a8"
CAND_COLOUR = "#f58518"
#: Histogram panels drawn: every gated feature plus the most divergent others, up to this many.
MAX_PANELS = 24


def _fmt(v, digits: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, float) and (math.isnan(v) or math.isinf(v)):
        return "–"
    return num(v, digits)


def _pct(v) -> str:
    return "–" if v is None else f"{100 * v:.2f}%"


def _short(v: float) -> str:
    """A tick value in at most about five characters: 0.00012, 0.35, 12, 1.5k."""
    if abs(v) >= 1000:
        return compact(float(f"{v:.2g}"))
    if v == 0 or abs(v) >= 1:
        return f"{v:.3g}"
    return f"{v:.2g}"


def _tick_labels(bins: dict) -> tuple[list[float], list[str]]:
    edges = bins["edges"]
    k = len(edges) - 1
    pos, labels = [], []
    if bins["discrete"]:
        step = max(1, math.ceil(k / 6))
        for i in range(0, k, step):
            pos.append(i + 0.5)
            labels.append(_short((edges[i] + edges[i + 1]) / 2))
    else:
        for i in sorted({0, k // 2} | ({k} if not bins["null_bin"] else set())):
            pos.append(float(i))
            labels.append(_short(edges[i]))
    if bins["null_bin"]:
        pos.append(k + 0.5)
        labels.append("null")
    return pos, labels


PANEL_W, PANEL_H = 187.0, 137.0  # points per feature panel
LEFT, RIGHT, TOP, BOTTOM = 28.0, 8.0, 20.0, 16.0  # the plot area inside a panel


def _panel(p: dict, x0: float, y0: float) -> str:
    b = p["bins"]
    rc, cc = b["reference"], b["candidate"]
    rs = [c / max(sum(rc), 1) for c in rc]
    cs = [c / max(sum(cc), 1) for c in cc]
    k = max(len(rc), 1)
    left, right, top, bottom = x0 + LEFT, x0 + PANEL_W - RIGHT, y0 + TOP, y0 + PANEL_H - BOTTOM
    ymax = max([*rs, *cs, 1e-9]) * 1.05
    yt = [t for t in nice_ticks(0, ymax, 3) if t <= ymax]

    def x(i: float) -> float:
        return left + i / k * (right - left)

    def y(v: float) -> float:
        return bottom - v / ymax * (bottom - top)

    out = []
    ref = "".join(f"M{pt(x(i))} {pt(bottom)}V{pt(y(v))}H{pt(x(i + 1))}V{pt(bottom)}Z" for i, v in enumerate(rs) if v)
    if ref:
        out.append(f'<path d="{ref}" style="fill: {REF_COLOUR}" fill-opacity="0.35"/>')
    if cs:
        steps = f"M{pt(x(0))} {pt(y(cs[0]))}" + "".join(
            f"H{pt(x(i))}V{pt(y(v))}" for i, v in enumerate(cs) if i) + f"H{pt(x(len(cs)))}"
        out.append(f'<path d="{steps}" fill="none" stroke="{CAND_COLOUR}" stroke-width="1.3"/>')
    out.append(f'<path d="M{pt(left)} {pt(top)}V{pt(bottom)}H{pt(right)}" fill="none" stroke="{AXIS}" '
               'stroke-width="0.8"/>')
    pos, labels = _tick_labels(b)
    ticks = "".join(f"M{pt(x(i))} {pt(bottom)}v2" for i in pos) + "".join(f"M{pt(left)} {pt(y(t))}h-2" for t in yt)
    out.append(f'<path d="{ticks}" stroke="{AXIS}" stroke-width="0.8"/>')
    out += [text(x(i), bottom + 9, s, "middle", ' font-size="6.5"') for i, s in zip(pos, labels)]
    out += [text(left - 3, y(t) + 2.3, f"{100 * t:.0f}%", "end", ' font-size="6.5"') for t in yt]
    colour = "#c62828" if p.get("failed") else "#1d1d1f"
    out.append(text(left, top - 5, label(f"{p['name']}  JS {_fmt(p['js'], 2)}", 40), "start",
                    f' font-size="7.5" font-family="monospace" fill="{colour}"'))
    return "".join(out)


def overlay_grid(key: str, panels: list[dict], ncols: int = 3) -> str:
    """One small panel per feature: the share of each side's documents per shared bin (quantile bins are
    drawn at equal width, so every bin is visible), reference and candidate overlaid as steps."""
    n = max(len(panels), 1)
    ncols = max(1, min(ncols, n))
    nrows = math.ceil(n / ncols)
    width = PANEL_W * ncols
    items, top = legend_row([("reference", REF_COLOUR, "faint"), ("candidate", CAND_COLOUR, "-")],
                            width / 2 - 70, 12, width)
    body = items + [_panel(p, (i % ncols) * PANEL_W, top + (i // ncols) * PANEL_H) for i, p in enumerate(panels)]
    return svg_element(key, width, top + PANEL_H * nrows, body)


def _gates_section(r: dict) -> str:
    n_fail = len(r["failed"])
    verdict = "PASS" if r["passed"] else "FAIL"
    cards = (f'<div class="cards"><div class="card {"ok" if r["passed"] else "bad"}"><div class="v">{verdict}</div>'
             f'<div class="k">verdict</div></div>'
             f'<div class="card"><div class="v">{len(r["gates"]) - n_fail}</div><div class="k">gates passed</div></div>'
             f'<div class="card {"bad" if n_fail else ""}"><div class="v">{n_fail}</div>'
             f'<div class="k">gates failed</div></div></div>')
    rows = []
    for g in sorted(r["gates"], key=lambda g: g["passed"]):
        res = Cell("FAIL", "bad") if not g["passed"] else "pass"
        rows.append([g["gate"], g["what"], _fmt(g["value"], 4), f"{g['op']} {_fmt(g['bound'], 4)}", res])
    body = cards + table(["gate", "measures", "value", "bound", "result"], rows, numeric=[2])
    src = r.get("gates_file") or "rules/compare/default.yaml"
    return section("gates", "Gates", body, intro=f"Gates from {src}; failed gates first.")


def _inputs_section(r: dict) -> str:
    rows = []
    for side in ("reference", "candidate"):
        s = r[side]
        rows.append([side, s["input"] + (" (run output: data/)" if s["run_output"] else ""), s["files"],
                     s["records"], s["bad_records"], s["sampled"]])
    body = table(["side", "input", "files", "documents read", "bad records", "sampled"], rows,
                 numeric=[2, 3, 4, 5])
    body += note(f"Sample: up to {r['sample']:,} documents a side, the smallest xxh3 hashes of (seed {r['seed']}, id). "
                 f"Signals from the stages {', '.join(r['stages'])} (decisions ignored, source scopes lifted). "
                 "Time (s): " + ", ".join(f"{k} {v}" for k, v in r["seconds"].items()))
    return section("inputs", "Inputs", body)


def _features_section(r: dict) -> str:
    feature_gates = [g for g in r["gates"] if g["gate"].startswith(("js.", "ks."))]
    gated = {g["gate"].split(".", 1)[1] for g in feature_gates}
    failed = {g["gate"].split(".", 1)[1] for g in feature_gates if not g["passed"]}
    feats = r["features"]
    order = r["divergence_ranking"]
    chosen = [n for n in order if n in gated] + [n for n in order if n not in gated and not feats[n]["constant"]]
    panels = [{"name": n, "js": feats[n]["js"], "bins": feats[n]["bins"], "failed": n in failed}
              for n in chosen[:MAX_PANELS]]
    body = figure(overlay_grid("compare-features", panels),
                  "Share of each side's documents per shared bin (pooled quantiles; equal width on screen). "
                  f"Gated features first, then the most divergent; {len(panels)} of {len(feats)} features drawn.")
    rows = []
    for n in order:
        f = feats[n]
        ref, cand = f["reference"], f["candidate"]
        bound = next((f"{g['op']} {_fmt(g['bound'])}" for g in r["gates"] if g["gate"] == f"js.{n}"), "")
        js_cell = Cell(esc(_fmt(f["js"], 3)), "bad") if n in failed else _fmt(f["js"], 3)
        rows.append([n, js_cell, _fmt(f["js_noise"], 2), _fmt(f["ks"], 3), bound,
                     _fmt(ref.get("p50")), _fmt(cand.get("p50")), _fmt(ref.get("p95")), _fmt(cand.get("p95")),
                     _pct(ref["nulls"] / ref["n"] if ref["n"] else None),
                     _pct(cand["nulls"] / cand["n"] if cand["n"] else None)])
    body += table(["feature", "JS", "JS noise", "KS", "gate", "ref median", "cand median", "ref p95", "cand p95",
                   "ref null", "cand null"], rows, numeric=list(range(1, 11)))
    body += note("JS: Jensen-Shannon divergence (base 2, 0 = same, 1 = disjoint) on the shared bins plus a null bin. "
                 "JS noise: what two samples of these sizes from one distribution show on average. "
                 "KS: two-sample Kolmogorov-Smirnov statistic of the non-null values.")
    return section("features", "Features", body)


def _language_section(r: dict) -> str:
    lang = r["language"]
    totals: dict[str, float] = {}
    for side in ("reference", "candidate"):
        for k, v in lang[side].items():
            totals[k] = totals.get(k, 0.0) + v["share"]
    top = [k for k, _ in sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))][:12]
    series = [(side, [lang[side].get(k, {}).get("share", 0.0) * 100 for k in top], colour)
              for side, colour in (("reference", REF_COLOUR), ("candidate", CAND_COLOUR))]
    body = figure(grouped_bars("compare-lang", top, series, "% of documents"),
                  f"Language mix (langid stage), JS divergence {_fmt(lang['js'], 3)}.")
    ordered = sorted(totals, key=lambda k: (-totals[k], k))
    rows = [[k, lang["reference"].get(k, {}).get("docs", 0), _pct(lang["reference"].get(k, {}).get("share", 0.0)),
             lang["candidate"].get(k, {}).get("docs", 0), _pct(lang["candidate"].get(k, {}).get("share", 0.0))]
            for k in ordered[:15]]
    if len(ordered) > 15:
        rest = ordered[15:]
        sums = [sum(lang[side].get(k, {}).get(f, 0) for k in rest) for side in ("reference", "candidate")
                for f in ("docs", "share")]
        rows.append([f"{len(rest)} other languages", sums[0], _pct(sums[1]), sums[2], _pct(sums[3])])
    body += table(["lang", "reference docs", "share", "candidate docs", "share"], rows, numeric=[1, 2, 3, 4])
    return section("language", "Language mix", body)


def _diversity_section(r: dict) -> str:
    d = r["diversity"]
    bounds = {g["gate"].split(".", 1)[1]: g for g in r["gates"] if g["gate"].startswith("diversity.")}
    rows = []
    for m in ("distinct_1", "distinct_2", "distinct_3", "ttr"):
        g = bounds.get(m)
        ratio = d["ratio"].get(m)
        cell = Cell(esc(_fmt(ratio, 3)), "bad") if g and not g["passed"] else _fmt(ratio, 3)
        rows.append([m, _fmt(d["reference"].get(m), 4), _fmt(d["candidate"].get(m), 4), cell,
                     f">= {_fmt(g['bound'])}" if g else ""])
    body = table(["measure", "reference", "candidate", "candidate / reference", "gate"], rows, numeric=[1, 2, 3])
    body += note(f"On {d['tokens_per_side']:,} lower-cased tokenizer words per side (documents in sample order, "
                 f"n-grams within documents). distinct-n: distinct n-grams / n-grams; ttr: mean type-token ratio "
                 f"of consecutive {d['ttr_window']:,}-word windows.")
    return section("diversity", "Lexical diversity", body)


def _ngrams_section(r: dict) -> str:
    body = ""
    for n in ("1", "2", "3"):
        ref = r["top_ngrams"][n]["reference"]
        cand = r["top_ngrams"][n]["candidate"]
        ref_set, cand_set = {g for g, _, _ in ref}, {g for g, _, _ in cand}
        rows = []
        for i in range(max(len(ref), len(cand))):
            a = ref[i] if i < len(ref) else None
            b = cand[i] if i < len(cand) else None
            rows.append([i + 1,
                         Cell(esc(a[0]), "mono" + ("" if a[0] in cand_set else " warn")) if a else "",
                         _pct(a[2]) if a else "",
                         Cell(esc(b[0]), "mono" + ("" if b[0] in ref_set else " warn")) if b else "",
                         _pct(b[2]) if b else ""])
        body += f"<h3>{esc(n)}-grams</h3>" + table(["#", "reference", "share", "candidate", "share"], rows,
                                                   numeric=[0, 2, 4])
    body += note("Share: of all n-grams of that order in the side's token sample. Highlighted: not in the other "
                 "side's top 20.")
    return section("ngrams", "Top n-grams", body)


def _dups_section(r: dict) -> str:
    d = r["duplicates"]
    rows = [["within the candidate", _pct(d["candidate_self_rate"]), d["candidate_self_dups"]],
            ["within the reference (for context)", _pct(d["reference_self_rate"]), d["reference_self_dups"]],
            ["candidate against the reference", _pct(d["candidate_vs_reference_rate"]),
             d["candidate_vs_reference_dups"]]]
    body = table(["near-duplicates", "rate", "documents"], rows, numeric=[1, 2])
    body += note(f"MinHash LSH (word 5-grams, character 5-grams for Han and kana, 128 permutations), every "
                 f"candidate pair checked by the exact Jaccard similarity of the shingle sets >= {d['threshold']}.")
    for key, title in (("examples_self", "Candidate duplicates of candidate documents"),
                       ("examples_reference", "Candidate duplicates of reference documents")):
        if d[key]:
            items = "".join(
                f'<div class="side"><div class="dups"><h4>candidate {esc(e["id"])}</h4>{pre(e["text"])}</div>'
                f'<div class="kept"><h4>{esc(e["dup_of_side"])} {esc(e["dup_of"])} · Jaccard '
                f'{esc(_fmt(e["jaccard"], 3))}</h4>{pre(e["dup_of_text"])}</div></div>' for e in d[key])
            body += f"<details><summary>{esc(title)} ({len(d[key])})</summary>{items}</details>"
    return section("duplicates", "Near-duplicates", body)


def _examples_section(r: dict) -> str:
    if not r["examples"]:
        return section("examples", "Where they differ", note("No feature differs enough to show examples."))
    body = ""
    for ex in r["examples"]:
        docs = "".join(
            f'<div class="example"><div class="doc-head"><b>{esc(d["id"])}</b> · {esc(ex["feature"])} = '
            f'{esc(_fmt(d["value"], 4))} · {esc(num(d["chars"]))} characters</div>{pre(d["text"])}</div>'
            for d in ex["docs"])
        summary = (f"{ex['feature']} (JS {_fmt(ex['js'], 3)}): bin {ex['bin_label']} holds "
                   f"{_pct(ex['candidate_share'])} of the candidate vs {_pct(ex['reference_share'])} of the reference")
        body += f"<details open><summary>{esc(summary)}</summary>{docs}</details>"
    return section("examples", "Where they differ", body,
                   intro="For the most divergent features: candidate documents from the bin where the candidate "
                         "most exceeds the reference (first 600 characters).")


def render_html(r: dict) -> str:
    """The comparison ``r`` (compare.json's content) as one self-contained HTML page."""
    parts = [("gates", "Gates", _gates_section(r)), ("inputs", "Inputs", _inputs_section(r)),
             ("features", "Features", _features_section(r)), ("language", "Language", _language_section(r)),
             ("diversity", "Diversity", _diversity_section(r)), ("ngrams", "N-grams", _ngrams_section(r)),
             ("duplicates", "Near-duplicates", _dups_section(r)), ("examples", "Examples", _examples_section(r))]
    title = "dataclean compare: " + ("PASS" if r["passed"] else "FAIL")
    subtitle = f"reference {r['reference']['input']} · candidate {r['candidate']['input']}"
    return page(title, subtitle, [(a, t) for a, t, _ in parts], "".join(h for _, _, h in parts),
                "dataclean compare · this page loads nothing from the network")
