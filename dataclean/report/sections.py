"""The sections of ``report.html``, each a function of the run's files that returns its HTML."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from dataclean.report import charts, evidence, svggrid
from dataclean.report.page import Cell, details, esc, figure, mono, note, num, pct, pre, section, table
from dataclean.report.queries import (
    TEXT_CHARS,
    RunTables,
    dedup_examples,
    example_keys,
    fetch_by_id,
    fetch_removed,
    is_numeric,
    masked_examples,
    near_threshold,
    quality_by_source,
    read_parquet,
    rewritten_examples,
    rows,
    signal_histograms,
)
from dataclean.report.thresholds import Threshold, group_langs

EXAMPLES_PER_RULE = 5
TOP_LANGUAGES = 6  # languages listed per source before the rest is summed up
# columns of data/ and rejected/ that are not signals of a stage
BASE_COLUMNS = {"id", "text", "source", "lang", "url", "meta", "origin_file", "origin_row", "n_chars", "n_tokens",
                "stage", "rule", "reason", "value", "threshold", "detail", "dup_of", "raw", "mix_epoch", "doc_key"}


@dataclass
class Run:
    """Everything the sections share: the folder, its JSON files and small stats tables, the DuckDB views."""

    out: str
    tables: RunTables
    manifest: dict | None
    summary: dict | None
    stages: list[str] = field(default_factory=list)
    thresholds: list[Threshold] = field(default_factory=list)

    def path(self, *parts: str) -> str:
        return os.path.join(self.out, *parts)

    @property
    def input_records(self) -> int:
        return int((self.summary or {}).get("input_records") or 0)


def stage_index(run: Run, stage: str) -> int:
    return run.stages.index(stage) if stage in run.stages else len(run.stages)


def stage_colour(run: Run, stage: str) -> str:
    return charts.STAGE_PALETTE[stage_index(run, stage) % len(charts.STAGE_PALETTE)]


# -- the run --------------------------------------------------------------------------------------------------
def overview(run: Run) -> str:
    s = run.summary or {}
    total = run.input_records
    timings = (run.manifest or {}).get("timings_seconds") or {}
    cards = [
        ("input records", num(total), ""),
        ("kept", num(s.get("kept")), pct(s.get("kept"), total)),
        ("removed", num(s.get("removed")), pct(s.get("removed"), total)),
        ("kept tokens (est.)", num(s.get("kept_tokens")), ""),
        ("kept characters", num(s.get("kept_chars")), ""),
        ("run time", f"{timings['total']:.1f} s" if isinstance(timings.get("total"), (int, float)) else "?", ""),
    ]
    html = "".join(f'<div class="card"><div class="v">{esc(v)}</div><div class="k">{esc(k)}'
                   f'{" · " + esc(p) if p else ""}</div></div>' for k, v, p in cards)
    ok = s.get("conservation_ok")
    html += (f'<div class="card {"ok" if ok else "bad"}"><div class="v">{"yes" if ok else "NO"}</div>'
             f'<div class="k">input = kept + removed</div></div>')
    failed = s.get("failed_inputs") or []
    if failed:
        html += f'<div class="card bad"><div class="v">{len(failed)}</div><div class="k">unreadable inputs</div></div>'
    html = f'<div class="cards">{html}</div>'
    # crawl files: records that are not documents are counted, not read (dataclean/io/warc.py); url_filter's
    # removals by the category of the domain list (dataclean/stages/url_filter.py)
    for key, words in (("skipped_records", "records of the inputs are not documents and were skipped:"),
                       ("url_blocked_by_category", "records were removed by their URL's domain, by category:")):
        counts = s.get(key) or {}
        if counts:
            html += (f"<p>{esc(num(sum(counts.values())))} {words} "
                     + ", ".join(f"{esc(k)} {esc(num(v))}" for k, v in counts.items()) + ".</p>")
    return html


def run_section(run: Run) -> str:
    m = run.manifest or {}
    body = overview(run)
    facts = [
        ("output folder", os.path.abspath(run.out)),
        ("finished", m.get("finished_at")),
        ("config hash", m.get("config_hash")),
        ("inputs fingerprint", m.get("fingerprint")),
        ("rules digest", m.get("rules_digest")),
        ("executor", f"{m.get('executor', '?')}, {m.get('workers', '?')} worker(s)"),
        ("seed", (m.get("config") or {}).get("seed")),
    ]
    body += table(["", ""], [(k, mono(v)) for k, v in facts], cls="facts")

    inputs = rows(read_parquet(run.path("stats", "inputs.parquet")))
    by_path = {i.get("path"): i for i in m.get("inputs") or []}
    if inputs:
        body += "<h3>Inputs</h3>"
        trs = []
        for r in inputs:
            mi = by_path.get(r["input"], {})
            status = r.get("status")
            skipped = sum((mi.get("skipped_records") or {}).values())
            trs.append((mono(r["input"]),
                        Cell(esc(status), "" if status == "ok" else "bad"),
                        r.get("records"), r.get("kept"), r.get("removed"), r.get("bad_records"), skipped,
                        mi.get("size"), mono(mi.get("checksum")), r.get("error")))
        body += table(["input", "status", "records", "kept", "removed", "bad records", "skipped (not documents)",
                       "bytes", "checksum", "error"], trs, numeric=(2, 3, 4, 5, 6, 7))
    timings = m.get("timings_seconds") or {}
    side = ""
    if timings:
        total = timings.get("total") or sum(v for v in timings.values() if isinstance(v, (int, float)))
        side += "<div><h3>Timings</h3>" + table(
            ["phase", "seconds", "share of total"],
            [(k, v, pct(v, total) if k != "total" else "") for k, v in timings.items()], numeric=(1, 2)) + "</div>"
    versions = sorted((m.get("versions") or {}).items())
    if versions:
        half = (len(versions) + 1) // 2
        side += "<div><h3>Versions</h3>" + '<div class="row">' + "".join(
            table(["package", "version"], part) for part in (versions[:half], versions[half:]) if part) + "</div></div>"
    if side:
        body += f'<div class="row">{side}</div>'
    if m.get("config"):
        body += details("Resolved configuration (as the run used it)",
                        pre(json.dumps(m["config"], indent=2, ensure_ascii=False, sort_keys=False), "config"))
    if not m:
        body += note("manifest.json is missing: inputs, versions and timings are unknown.")
    return section("run", "The run", body)


# -- funnel ---------------------------------------------------------------------------------------------------
def funnel_section(run: Run) -> str:
    f = rows(read_parquet(run.path("stats", "funnel.parquet")))
    if not f:
        return section("funnel", "Funnel", note("stats/funnel.parquet is missing."))
    allrows = sorted((r for r in f if r["source"] == "(all)"), key=lambda r: r["step"])
    body = ""
    if allrows:
        first = allrows[0]
        series = []
        for m, name in (("docs", "documents"), ("chars", "characters"), ("tokens", "tokens")):
            base = first[f"{m}_in"] or 0
            series.append((name, [100.0 * (r[f"{m}_out"] or 0) / base if base else 100.0 for r in allrows]))
        body += figure(charts.funnel("funnel-all", [r["stage"] for r in allrows], series,
                                     "% of input remaining"),
                       "What remains after each stage, in % of the input: documents, characters and estimated "
                       "tokens. A stage removes what reaches it; the first stage that removes a document owns it.")
        trs = []
        for r in allrows:
            trs.append((r["stage"], r["docs_in"], r["docs_out"], r["docs_in"] - r["docs_out"],
                        pct(r["docs_out"], first["docs_in"]), r["chars_in"], r["chars_out"],
                        pct(r["chars_out"], first["chars_in"]), r["tokens_in"], r["tokens_out"],
                        pct(r["tokens_out"], first["tokens_in"])))
        body += table(["stage", "docs in", "docs out", "removed", "docs left", "chars in", "chars out", "chars left",
                       "tokens in", "tokens out", "tokens left"], trs, numeric=range(1, 11))
    sources = sorted({r["source"] for r in f if r["source"] != "(all)"}, key=str)
    if sources:
        per = []
        stage_names = [r["stage"] for r in allrows]
        for src in sources:
            rs = {r["stage"]: r for r in f if r["source"] == src}
            base = next((rs[s]["tokens_in"] for s in stage_names if s in rs), 0) or 0
            per.append((src, [100.0 * (rs[s]["tokens_out"] if s in rs else 0) / base if base else 100.0
                              for s in stage_names]))
        body += figure(charts.funnel("funnel-sources", stage_names, per, "% of the source's tokens remaining"),
                       "Estimated tokens remaining after each stage, per source.")
        trs = []
        for src in sources:
            for r in sorted((r for r in f if r["source"] == src), key=lambda r: r["step"]):
                trs.append((src, r["stage"], r["docs_in"], r["docs_out"], r["chars_out"], r["tokens_out"]))
        body += details("Funnel per source (table)", table(["source", "stage", "docs in", "docs out", "chars out",
                                                            "tokens out"], trs, numeric=(2, 3, 4, 5)))
    return section("funnel", "Funnel", body)


# -- removals -------------------------------------------------------------------------------------------------
def removal_rows(run: Run) -> list[dict]:
    agg: dict = {}
    for r in rows(read_parquet(run.path("stats", "removed.parquet"))):
        key = (r["stage"], r["rule"], r["reason"])
        a = agg.setdefault(key, {"stage": r["stage"], "rule": r["rule"], "reason": r["reason"], "docs": 0,
                                 "chars": 0, "tokens": 0})
        for m in ("docs", "chars", "tokens"):
            a[m] += r[m] or 0
    return sorted(agg.values(), key=lambda a: (stage_index(run, a["stage"]), a["stage"] or "", -a["docs"],
                                               a["rule"] or ""))


def removals_section(run: Run, removals: list[dict]) -> str:
    if not removals:
        return section("removals", "Removals by stage and rule", note("Nothing was removed."))
    total = run.input_records
    labels = [f"{a['stage']} · {a['rule']}" for a in removals]
    stages_seen = list(dict.fromkeys(a["stage"] for a in removals))
    svg = charts.hbars("removals", labels, [a["docs"] for a in removals],
                       [stage_colour(run, a["stage"]) for a in removals], "documents removed (log scale)",
                       legend=[(s, stage_colour(run, s)) for s in stages_seen], log_x=True)
    body = figure(svg, "Documents removed per rule, coloured by stage, in pipeline order, on a log scale so "
                       "that a rule that removed a few documents stays visible beside one that removed many.")
    trs = [(a["stage"], Cell(f'<a href="#ex-{esc(_anchor(a["stage"], a["rule"]))}">{esc(a["rule"])}</a>'),
            a["reason"], a["docs"], pct(a["docs"], total, 2), a["chars"], a["tokens"]) for a in removals]
    body += table(["stage", "rule", "reason", "documents", "of input", "characters", "tokens (est.)"], trs,
                  numeric=(3, 4, 5, 6))
    return section("removals", "Removals by stage and rule", body)


def _anchor(*parts) -> str:
    """A fragment id from data values: only [a-z0-9-], with a hash suffix so distinct values never collide."""
    import hashlib

    raw = "|".join(str(p) for p in parts)
    slug = "".join(c if c.isascii() and c.isalnum() else "-" for c in raw.lower())[:48]
    return f"{slug}-{hashlib.md5(raw.encode('utf-8', 'surrogatepass')).hexdigest()[:6]}"


# -- sources --------------------------------------------------------------------------------------------------
def sources_section(run: Run) -> str:
    kept = rows(read_parquet(run.path("stats", "kept.parquet")))
    removed = rows(read_parquet(run.path("stats", "removed.parquet")))
    cells: dict = {}
    for r, side in [(r, "kept") for r in kept] + [(r, "removed") for r in removed]:
        c = cells.setdefault((r["source"], r["lang"]), {"kept": 0, "removed": 0, "kept_tokens": 0,
                                                        "removed_tokens": 0})
        c[side] += r["docs"] or 0
        c[f"{side}_tokens"] += r["tokens"] or 0
    if not cells:
        return section("sources", "Sources and languages", note("No documents."))
    by_source: dict = {}
    for (src, _), c in cells.items():
        s = by_source.setdefault(src, {"kept": 0, "removed": 0, "kept_tokens": 0, "removed_tokens": 0})
        for k in s:
            s[k] += c[k]
    srcs = sorted(by_source, key=str)
    body = figure(charts.grouped_bars("sources", [str(s) for s in srcs], [
        ("kept", [by_source[s]["kept"] for s in srcs], charts.KEPT),
        ("removed", [by_source[s]["removed"] for s in srcs], charts.REMOVED)], "documents"),
        "Documents kept and removed per source.")
    def line(src, lang, c, bold=False):
        first = Cell(f"<b>{esc(src)}</b>") if bold else src
        return (first, Cell(f"<b>{esc(lang)}</b>") if bold else lang, c["kept"], c["removed"],
                pct(c["removed"], c["kept"] + c["removed"]), c["kept_tokens"], c["removed_tokens"])

    short, full = [], []
    for src in srcs:
        short.append(line(src, "all", by_source[src], bold=True))
        full.append(line(src, "all", by_source[src], bold=True))
        langs = sorted(((lang, c) for (sr, lang), c in cells.items() if sr == src),
                       key=lambda t: (-(t[1]["kept"] + t[1]["removed"]), str(t[0])))
        for i, (lang, c) in enumerate(langs):
            full.append(line("", lang, c))
            if i < TOP_LANGUAGES or len(langs) == TOP_LANGUAGES + 1:
                short.append(line("", lang, c))
        rest = langs[TOP_LANGUAGES:] if len(langs) > TOP_LANGUAGES + 1 else []
        if rest:
            agg = {k: sum(c[k] for _, c in rest) for k in ("kept", "removed", "kept_tokens", "removed_tokens")}
            short.append(line("", f"{len(rest)} other languages", agg))
    headers = ["source", "language", "kept", "removed", "removed %", "kept tokens", "removed tokens"]
    body += table(headers, short, numeric=(2, 3, 4, 5, 6))
    if len(full) > len(short):
        body += details("Every source × language", table(headers, full, numeric=(2, 3, 4, 5, 6)))
    return section("sources", "Sources and languages", body)


# -- signals --------------------------------------------------------------------------------------------------
def signals_section(run: Run, removals: list[dict], other_signals: bool = True) -> str:
    t = run.tables
    by_signal: dict[str, list[Threshold]] = {}
    for th in run.thresholds:
        if is_numeric(t.kept_cols.get(th.signal)) or is_numeric(t.removed_cols.get(th.signal)):
            by_signal.setdefault(th.signal, []).append(th)
    removed_by_rule = {(a["stage"], a["rule"]): a["docs"] for a in removals}
    signals = {s: sorted({th.rule for th in ths}) for s, ths in by_signal.items()}
    marks = {s: [v for th in ths for v in [th.value, *th.by_lang.values()] if v is not None]
             for s, ths in by_signal.items()}
    others: list[str] = []
    if other_signals:
        cols = dict(t.removed_cols)
        cols.update(t.kept_cols)
        others = [c for c, typ in cols.items() if c not in BASE_COLUMNS and c not in signals and is_numeric(typ)
                  and c not in t.input_cols]  # (an input's own number, a `score`, is not a signal)
        signals.update({c: [] for c in others})
    hists = signal_histograms(t, signals, marks)

    def panel(s: str, ths: list[Threshold]) -> tuple[dict, tuple] | None:
        h = hists.get(s)
        if h is None:
            return None
        n_rule = sum(removed_by_rule.get(k, 0) for k in {(th.stage, th.rule) for th in ths})
        series = [("kept", h.kept, charts.KEPT)]
        if ths:
            series.append(("removed by the panel's rule", h.removed_by_rule, charts.REMOVED))
        series.append(("removed by other rules", h.removed_other, charts.OTHER))
        lines, off = [], []
        lo, hi = h.edges[0], h.edges[-1]
        for th in ths:
            marks_ = [(th.value, f"{th.value:g}" if th.value is not None else "", "-")]
            marks_ += [(v, f"{codes} {v:g}", "--") for codes, v in group_langs(th.by_lang) if v is not None]
            for v, text, style in marks_:
                if v is None:
                    continue
                if lo <= v <= hi:
                    lines.append((v, text, style))
                else:
                    off.append(f"{v:g} off the axis")
        outside = h.lo_value < lo or h.hi_value > hi
        row = (Cell(f'<span class="mono">{esc(s)}</span>'),
               Cell("<br>".join(esc(th.describe()) for th in ths) + (f" ({esc(', '.join(off))})" if off else ""))
               if ths else "—",
               ths[0].sources if ths else "", h.n, n_rule if ths else "",
               f"{num(h.lo_value)} … {num(h.hi_value)}" + (" (edge bins hold the tails)" if outside else "")
               + (" · log x" if h.log_x else ""))
        return {"title": s, "edges": h.edges, "series": series, "lines": lines, "log_x": h.log_x}, row

    headers = ["signal", "rule: removed when", "applies to", "docs with a value", "removed by the rule",
               "values (range)"]
    body = ""
    stages_order = list(dict.fromkeys(th.stage for ths in by_signal.values() for th in ths))
    for stage in sorted(stages_order, key=lambda st: stage_index(run, st)):
        built = [panel(s, ths) for s, ths in by_signal.items() if ths[0].stage == stage]
        built = [b for b in built if b]
        if built:
            svg = svggrid.signal_grid(f"sig-stage-{stage}", [b[0] for b in built])
            body += (f"<h3>{esc(stage)}</h3>" + figure(svg)
                     + table(headers, [b[1] for b in built], numeric=(3, 4)))
    if not run.thresholds:
        body += note("The run's configuration could not be read, so no thresholds are marked.")
    if others:
        constant = [s for s in others if s in hists and hists[s].lo_value == hists[s].hi_value]
        built = [b for b in (panel(s, []) for s in others if s not in constant) if b]
        if built or constant:
            same = (note("The same value for every document: " + ", ".join(
                f"{s} = {num(hists[s].lo_value)}" for s in constant) + ".") if constant else "")
            grid = figure(svggrid.signal_grid("sig-without-threshold", [b[0] for b in built], ncols=4)) if built else ""
            body += details(f"Other signals ({len(built) + len(constant)}, no threshold)",
                            grid + (table(headers, [b[1] for b in built], numeric=(3, 4)) if built else "") + same)
    intro = ("Distribution of each signal over kept documents (blue), documents removed by the rule that reads "
             "it (red) and documents removed by another rule after the signal was computed (grey), on a log "
             "count scale. Vertical lines are the thresholds the run applied (solid: default; dashed: languages "
             "with their own value). The x axis spans the 0.5–99.5% quantiles, widened to include nearby "
             "thresholds; values beyond it are counted in the edge bins.")
    return section("signals", "Signals and thresholds", body or note("No signal columns."), intro)


# -- quality --------------------------------------------------------------------------------------------------
def quality_section(run: Run) -> str:
    q = quality_by_source(run.tables)
    if not q or not q["hist"]:
        return section("quality", "Quality scores", note("No document has a quality score in this run."))
    cutoffs = rows(read_parquet(run.path("stats", "quality_cutoffs.parquet")))
    cut_by_source = {c["source"]: c for c in cutoffs if c.get("cutoff") is not None}
    panels = []
    for src, h in q["hist"].items():
        lines = []
        c = cut_by_source.get(src)
        if c:
            lines.append((float(c["cutoff"]), f"cut-off {float(c['cutoff']):.3g}"))
        panels.append((src, q["edges"], [("kept", h["kept"], charts.KEPT), ("removed", h["removed"],
                                                                          charts.REMOVED)], lines))
    body = figure(charts.small_histograms("quality", panels, "quality_score"),
                  "quality_score per source: kept documents and removed documents that had a score (removed "
                  "after scoring: duplicates, quality filter, mixture), with the quality filter's cut-off.")
    trs = []
    for src in q["hist"]:
        qq = q["quantiles"].get(src)
        c = cut_by_source.get(src)
        vals = list(qq["q"]) if qq else [None] * 5
        trs.append((src, qq["n"] if qq else 0, qq["mean"] if qq else None, *vals,
                    c.get("cutoff") if c else None, c.get("mode") if c else ""))
    body += table(["source", "kept scored", "mean", "p10", "p25", "median", "p75", "p90", "cut-off", "mode"], trs,
                  numeric=range(1, 9))
    return section("quality", "Quality scores", body)


# -- dedup ----------------------------------------------------------------------------------------------------
SIZE_BUCKETS = [(2, 2), (3, 3), (4, 4), (5, 5), (6, 10), (11, 20), (21, 50), (51, 100), (101, 1000),
                (1001, None)]


def dedup_section(run: Run, removals: list[dict]) -> str:
    sizes = rows(read_parquet(run.path("dedup", "cluster_sizes.parquet")))
    by_rule = {}
    for a in removals:
        by_rule[a["rule"]] = by_rule.get(a["rule"], 0) + a["docs"]
    con = run.tables.con
    exact_path = run.path("dedup", "exact_groups.parquet")
    exact_groups, top_groups = 0, []
    if os.path.exists(exact_path):
        exact_groups = con.execute("SELECT count(*) FROM read_parquet(?)", [exact_path]).fetchall()[0][0]
        top_groups = con.execute("SELECT keep_id, n, ids[1:4] FROM read_parquet(?) ORDER BY n DESC, keep_id "
                                 "LIMIT 5", [exact_path]).fetchall()
    n_clusters = sum(r["clusters"] or 0 for r in sizes)
    n_in_clusters = sum(r["documents"] or 0 for r in sizes)
    cards = [("exact-duplicate groups", exact_groups),
             ("removed as exact duplicates", by_rule.get("exact_duplicate", 0)),
             ("near-duplicate clusters", n_clusters), ("documents in clusters", n_in_clusters),
             ("removed as near duplicates", by_rule.get("near_duplicate", 0)),
             ("removed as duplicates of an earlier run", by_rule.get("near_duplicate_earlier", 0))]
    body = '<div class="cards">' + "".join(f'<div class="card"><div class="v">{esc(num(v))}</div>'
                                           f'<div class="k">{esc(k)}</div></div>' for k, v in cards) + "</div>"
    if sizes:
        distinct = sorted((r["cluster_size"], r["clusters"]) for r in sizes)
        if len(distinct) <= 12:
            cats, vals = [str(s) for s, _ in distinct], [c for _, c in distinct]
        else:
            cats, vals = [], []
            for lo, hi in SIZE_BUCKETS:
                n = sum(c for s, c in distinct if s >= lo and (hi is None or s <= hi))
                if n:
                    cats.append(str(lo) if lo == hi else (f"{lo}–{hi}" if hi else f"≥{lo}"))
                    vals.append(n)
        body += figure(charts.grouped_bars("cluster-sizes", cats, [("clusters", vals, charts.KEPT)], "clusters",
                                           log_y=max(vals) > 50 * max(min(vals), 1)),
                       "Near-duplicate clusters by size (documents per cluster, the representative included).")
    if top_groups:
        body += "<h3>Largest exact-duplicate groups</h3>" + table(
            ["kept id", "documents", "first ids"],
            [(mono(k), n, mono(", ".join(map(str, ids or [])))) for k, n, ids in top_groups], numeric=(1,))
    examples = dedup_examples(run.tables, run.path("dedup", "clusters.parquet"))
    if examples:
        body += "<h3>Largest near-duplicate clusters, side by side</h3>"
        for ex in examples:
            rep = ex["rep"] or {}
            head = _doc_head(rep, ["id", "source", "lang", "n_chars", "quality_score"])
            left = f'<div class="kept"><h4>kept representative</h4>{head}{_doc_text(rep)}</div>'
            right = "".join(f'{_doc_head(m, ["id", "similarity", "source", "lang", "n_chars"])}{_doc_text(m)}'
                            for m in ex["members"])
            more = ex["size"] - 1 - len(ex["members"])
            right = (f'<div class="dups"><h4>duplicates removed ({esc(num(ex["size"] - 1))})</h4>{right}'
                     + (note(f"… and {more} more") if more > 0 else "") + "</div>")
            body += f'<div class="side">{left}{right}</div>'
    elif not sizes:
        body += note("No near-duplicate clusters (or dedup/ is missing).")
    return section("dedup", "Deduplication", body)


def _doc_head(d: dict, keys: list[str]) -> str:
    parts = []
    for k in keys:
        v = d.get(k)
        if v is None or v == "":
            continue
        if isinstance(v, float):
            v = f"{v:.4g}"
        elif isinstance(v, int):
            v = num(v)
        parts.append(f"<b>{esc(k)}</b> {esc(v)}")
    return f'<div class="doc-head">{" · ".join(parts)}</div>'


def _doc_text(d: dict) -> str:
    text = d.get("text")
    if text is None:
        raw = d.get("raw")
        if raw:
            shown = bytes(raw).decode("utf-8", "replace")
            return note(f"raw bytes (first {len(bytes(raw))}):") + pre(shown)
        return note("(text not kept: output.rejected_text is false)")
    n = d.get("n_chars")
    cut = n is not None and n > len(text) or len(text) >= TEXT_CHARS
    shown = note(f"first {len(text)} of {num(n)} characters") if cut and n else ""
    return pre(text + (" …" if cut else "")) + shown


# -- mixture --------------------------------------------------------------------------------------------------
MIXTURE_COLUMNS = ["source", "target_weight", "achieved_weight", "target_tokens", "achieved_tokens",
                   "available_tokens", "available_docs", "selected_docs", "output_docs", "max_epochs", "epochs_used",
                   "select", "warning"]


def mixture_section(run: Run) -> str | None:
    tbl = read_parquet(run.path("stats", "mixture.parquet"))
    if tbl is None:
        return None
    mix = rows(tbl)
    if not mix:
        return section("mixture", "Mixture", note("stats/mixture.parquet is empty."))
    srcs = [str(r.get("source")) for r in mix]
    body = figure(charts.grouped_bars("mixture", srcs, [
        ("target weight", [r.get("target_weight") or 0 for r in mix], "#9ecae9"),
        ("achieved weight", [r.get("achieved_weight") or 0 for r in mix], charts.KEPT)], "share of tokens"),
        "Each source's share of the output tokens: what the recipe asked for and what the run delivered.")
    cols = [c for c in MIXTURE_COLUMNS if c in tbl.column_names]
    numeric = [i for i, c in enumerate(cols) if c not in ("source", "select", "warning")]
    trs = []
    for r in mix:
        row = []
        for c in cols:
            v = r.get(c)
            if c == "warning" and v:
                row.append(Cell(esc(v), "warn"))
            elif c == "epochs_used" and v is not None:
                row.append(f"{v:.3g}")
            else:
                row.append(v)
        trs.append(row)
    body += table(cols, trs, numeric=numeric)
    warnings = [(r.get("source"), r.get("warning")) for r in mix if r.get("warning")]
    if warnings:
        body += '<ul class="warnings">' + "".join(f"<li><b>{esc(s)}</b>: {esc(w)}</li>" for s, w in warnings) + "</ul>"
    return section("mixture", "Mixture: target vs achieved", body)


# -- rewrites -------------------------------------------------------------------------------------------------
def rewrites_section(run: Run) -> str | None:
    """In-place rewrites of the kept documents (stats/rewrites.parquet): PII masks per kind, C4's removed
    lines, normalization's repairs, per source."""
    tbl = read_parquet(run.path("stats", "rewrites.parquet"))
    if tbl is None or not tbl.num_rows:
        return None
    data = [r for r in rows(tbl) if r.get("total")]
    if not data:
        return section("rewrites", "Rewrites", note("No kept document was rewritten in place."))
    kept = {s: v.get("kept", 0) for s, v in (run.summary.get("by_source") or {}).items()}
    totals: dict = {}
    for r in data:
        t = totals.setdefault((r["stage"], r["signal"]), [0, 0])
        t[0] += r["docs"]
        t[1] += r["total"]
    all_kept = sum(kept.values())
    head = ["stage", "signal", "kept documents changed", "share of kept", "total"]
    body = table(head, [(k[0], mono(k[1]), v[0], pct(v[0], all_kept, 2), v[1])
                        for k, v in sorted(totals.items())], numeric=(2, 3, 4))
    per_source = [(r["stage"], mono(r["signal"]), r["source"], r["docs"], pct(r["docs"], kept.get(r["source"]), 2),
                   r["total"]) for r in data]
    body += details("Per source", table(["stage", "signal", "source", "kept documents changed", "share of the source's kept",
                                         "total"], per_source, numeric=(3, 4, 5)))
    body += _rewritten_html(run)
    body += _masked_html(run)
    intro = ("Kept documents whose text a stage changed in place: personal data masked (pii_email … count "
             "the masks of each kind, pii_chars the characters masked), lines removed by C4, repairs by "
             "normalize. The documents are kept; their signals say what changed.")
    return section("rewrites", "Rewrites", body, intro)


REWRITE_EXAMPLES = 3


def _rewritten_html(run: Run) -> str:
    t = run.tables
    if "c4_chars_removed" not in t.kept_cols:
        return ""
    if "c4_removed_lines" not in t.kept_cols:
        return note("This run did not record the lines C4 removed from kept pages (c4_removed_lines), so no "
                    "before/after is shown.")
    docs = rewritten_examples(t, REWRITE_EXAMPLES, evidence.SCAN_CHARS)
    if not docs:
        return ""
    from dataclean.stages.c4 import RECORD_LINE_CHARS, RECORD_LINES

    html = f"<h3>C4 line removal, before and after: the {len(docs)} kept pages that lost the most</h3>"
    for d in docs:
        head = _doc_head({**d, "origin": f"{d.get('origin_file')}:{d.get('origin_row')}"},
                         ["id", "source", "lang", "c4_lines_removed", "c4_chars_removed", "origin", "n_chars"])
        html += f'<div class="example near">{head}{evidence.before_after(d.get("text") or "", d["c4_removed_lines"])}</div>'
    return html + note(f"Struck out: the lines C4 removed, with the reason, put back between the kept lines "
                       f"(the first {RECORD_LINES} removed lines of a page, {RECORD_LINE_CHARS} characters of "
                       f"each, as recorded in c4_removed_lines); kept lines far from them are elided.")


def _masked_html(run: Run) -> str:
    """The kept documents with the most masked characters, their masks highlighted (the after view: the values
    masked are not in the output, so there is no before)."""
    docs = masked_examples(run.tables, REWRITE_EXAMPLES, evidence.SCAN_CHARS)
    if not docs:
        return ""
    stage = _finder(run).stage("pii")
    html = f"<h3>PII masks: the {len(docs)} kept documents with the most masked characters</h3>"
    for d in docs:
        fields = ["id", "source", "lang", "pii_chars"] + [k for k in d if k.startswith("pii_") and k != "pii_chars"
                                                          and d[k]] + ["origin", "n_chars"]
        head = _doc_head({**d, "origin": f"{d.get('origin_file')}:{d.get('origin_row')}"}, fields)
        ev = evidence.mask_spans(d.get("text") or "", stage) if stage is not None else None
        html += (f'<div class="example near">{head}'
                 f'{evidence.window(d.get("text") or "", d.get("n_chars"), ev, "no mask token found in the text")}</div>')
    return html + note("Highlighted: the tokens that replaced personal data. The values they replaced are not "
                       "shown: they are kept nowhere, not in data/ and not in the ledger.")


# -- contamination --------------------------------------------------------------------------------------------
def contamination_section(run: Run) -> str | None:
    """Benchmark decontamination (stats/contamination.parquet): per benchmark and source, and the items found
    most often."""
    tbl = read_parquet(run.path("stats", "contamination.parquet"))
    if tbl is None:
        return None
    data = rows(tbl)
    per_bench = (run.summary.get("contamination") or {})
    head = ["benchmark", "documents removed", "distinct items found", "kept documents with some overlap"]
    body = table(head, [(b, v.get("removed", 0), v.get("items", 0), v.get("kept_with_overlap", 0))
                        for b, v in sorted(per_bench.items())], numeric=(1, 2, 3))
    if data:
        body += details("Per source", table(["benchmark", "source", "documents removed", "distinct items",
                                             "kept with some overlap"],
                                            [(r["benchmark"], r["source"], r["removed"], r["items"],
                                              r["kept_with_overlap"]) for r in data], numeric=(2, 3, 4)))
    t = run.tables
    if "decontam_item" in t.removed_cols:
        top = t.con.execute("""SELECT decontam_benchmark, decontam_item, count(*) AS docs, max(decontam_overlap)
                               FROM removed WHERE rule = 'benchmark_overlap' GROUP BY ALL
                               ORDER BY docs DESC, decontam_benchmark, decontam_item LIMIT 20""").fetchall()
        if top:
            body += details("Items found in the most documents", table(
                ["benchmark", "item / field", "documents", "largest overlap"],
                [(b, mono(i), d, f"{o:.2f}") for b, i, d, o in top], numeric=(2, 3)))
    intro = ("Documents that contain a benchmark item: their n-grams cover more than the threshold share of one "
             "item's question, answer or passage (word 13-grams, Han/kana character 13-grams, normalized as for "
             "dedup, traditional folded to simplified). Removed documents are in the ledger with rule "
             "benchmark_overlap, the item in their detail.")
    return section("contamination", "Contamination", body, intro)


# -- examples -------------------------------------------------------------------------------------------------
DUP_RULES = ("near_duplicate", "near_duplicate_earlier")
DIFFS_PER_RULE = 3  # near duplicates per rule diffed against their representative


def _representatives(run: Run, ids: list[str]) -> dict[str, dict]:
    """The kept (else removed) documents of ``ids``, text up to the diff's bound."""
    t = run.tables
    docs = fetch_by_id(t, "kept", ids, evidence.DIFF_CHARS)
    missing = [i for i in ids if i not in docs]
    if missing:
        docs.update({k: {**v, "removed": True} for k, v in
                     fetch_by_id(t, "removed", missing, evidence.DIFF_CHARS).items()})
    return docs


def _diff_html(d: dict, rep: dict | None) -> str:
    if rep is None or rep.get("text") is None or d.get("text") is None:
        return ""
    body, n_del, n_ins = evidence.word_diff(rep["text"], d["text"])
    where = "removed too (rejected/)" if rep.get("removed") else "kept (data/)"
    cut = any((x.get("n_chars") or 0) > evidence.DIFF_CHARS for x in (d, rep))
    head = (f'<div class="doc-head"><b>diff against dup_of</b> {esc(rep.get("id"))} ({esc(where)}): '
            f'<del>{esc(num(n_del))} word(s) only in the representative</del> · '
            f'<ins>{esc(num(n_ins))} word(s) only in this duplicate</ins>'
            + (f" · first {esc(num(evidence.DIFF_CHARS))} characters of each" if cut else "") + "</div>")
    return f'{head}<pre class="doc diff">{body}</pre>'


def _finder(run: Run) -> evidence.Finder:
    """One span finder per report (it rebuilds the run's stages it needs once)."""
    if getattr(run, "_finder", None) is None:
        run._finder = evidence.Finder((run.manifest or {}).get("config"))
    return run._finder


def examples_section(run: Run, removals: list[dict]) -> str:
    keys = example_keys(run.tables, EXAMPLES_PER_RULE)
    if not keys:
        return section("examples", "Removed documents, by rule", note("Nothing was removed."))
    docs = fetch_removed(run.tables, [(k[2], k[3]) for k in keys], evidence.SCAN_CHARS)
    by_rule: dict = {}
    for stage, rule, ofile, orow in keys:
        d = docs.get((ofile, orow))
        if d is not None:
            by_rule.setdefault((stage, rule), []).append(d)
    dup_ids = sorted({d["dup_of"] for (_, rule), ds in by_rule.items() if rule in DUP_RULES
                      for d in ds[:DIFFS_PER_RULE] if d.get("dup_of")})
    reps = _representatives(run, dup_ids) if dup_ids else {}
    finder = _finder(run)
    counts = {(a["stage"], a["rule"]): a["docs"] for a in removals}
    body = ""
    order = sorted(by_rule, key=lambda k: (stage_index(run, k[0]), str(k[0]), -counts.get(k, 0), str(k[1])))
    for stage, rule in order:
        items = []
        for j, d in enumerate(by_rule[(stage, rule)]):
            head = _doc_head({**d, "origin": f"{d.get('origin_file')}:{d.get('origin_row')}"},
                             ["id", "source", "lang", "value", "threshold", "detail", "dup_of", "url", "origin",
                              "n_chars"])
            meta = d.get("meta")
            meta_html = f'<div class="doc-head"><b>meta</b> {esc(meta[:300])}</div>' if meta and meta != "{}" else ""
            if d.get("text") is None:
                text_html = _doc_text(d)
            elif rule in DUP_RULES and j < DIFFS_PER_RULE and d.get("dup_of") in reps:
                text_html = _diff_html(d, reps[d["dup_of"]])
            else:
                text_html = ""
            if not text_html:
                text_html = evidence.window(d["text"], d.get("n_chars"), finder.find(d),
                                            evidence.no_span_note(rule))
            items.append(f'<div class="example">{head}{meta_html}{text_html}</div>')
        n = counts.get((stage, rule), len(items))
        summary = f"{stage} · {rule} — {num(n)} removed ({len(items)} shown)"
        body += (f'<div id="ex-{esc(_anchor(stage, rule))}">'
                 + details(summary, "".join(items)) + "</div>")
    intro = (f"Up to {EXAMPLES_PER_RULE} removed documents per rule, chosen by a hash of their id (the same "
             f"documents on every run of the same data), with the deciding value and threshold. Each shows the "
             f"part of the text that decided, highlighted (the offending characters, lines, run, blob, words "
             f"or n-grams, found from the ledger's detail and the rule's own detecting code), with "
             f"{evidence.CONTEXT} characters around it; a rule that measures the whole document shows its "
             f"start and says so. Near duplicates are shown as a word-level diff against the document they "
             f"duplicate (dup_of): struck out, words only in that representative; underlined, words only in "
             f"the removed one.")
    return section("examples", "Removed documents, by rule", body, intro)


# -- near the threshold ---------------------------------------------------------------------------------------
NEAR_PER_RULE = 3


def near_section(run: Run) -> str | None:
    """Kept documents whose signal is closest to each threshold (on the kept side): what a reviewer looks at
    to decide whether a bound should move."""
    ths = [th for th in run.thresholds if is_numeric(run.tables.kept_cols.get(th.signal))]
    if not ths:
        return None
    near = near_threshold(run.tables, ths, NEAR_PER_RULE, evidence.SCAN_CHARS)
    if not near:
        return section("near", "Kept near the threshold", note("No kept document has a value for a thresholded "
                                                                "signal."))
    finder = _finder(run)
    body = ""
    order = sorted(near, key=lambda i: (stage_index(run, ths[i].stage), ths[i].stage, ths[i].rule, ths[i].compare))
    for i in order:
        th = ths[i]
        items = []
        for d in near[i]:
            head = _doc_head({**d, "signal": th.signal, "origin": f"{d.get('origin_file')}:{d.get('origin_row')}"},
                             ["id", "source", "lang", "signal", "value", "threshold", "origin", "n_chars"])
            ev = finder.find({**d, "rule": th.rule, "stage": th.stage}) if d.get("text") else None
            text_html = (evidence.window(d["text"], d.get("n_chars"), ev, evidence.no_span_note(th.rule))
                         if d.get("text") is not None else _doc_text(d))
            items.append(f'<div class="example near">{head}{text_html}</div>')
        op = "at most" if th.compare == "max" else "at least"
        summary = f"{th.stage} · {th.rule} — kept with {th.signal} {op} the threshold, closest first"
        body += details(summary, "".join(items))
    intro = (f"Per threshold, the {NEAR_PER_RULE} kept documents whose signal is closest to it (on the kept side; "
             "a language with its own value is compared with that value). These are the pages a bound would "
             "remove next if it moved: read them before tightening a rule.")
    return section("near", "Kept near the threshold", body, intro)
