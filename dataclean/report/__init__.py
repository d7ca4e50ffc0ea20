"""``report.html``: one self-contained page that explains a finished run, readable offline.

It reads only the files of the output folder (``manifest.json``, ``stats/``, ``dedup/``, ``data/`` and
``rejected/`` through DuckDB) and writes one HTML file with inline SVG charts (written directly), no script, and a
Content-Security-Policy that lets nothing load. Sections: the run, the funnel, removals by stage and rule,
sources × languages, every signal's histogram with its thresholds, quality scores per source,
deduplication, C4's rewrites before and after, the mixture (when the run had one), a few removed documents per
rule with the span that decided highlighted (near duplicates as a word diff against the document they
duplicate: :mod:`dataclean.report.evidence`), and the kept documents nearest each threshold.

    from dataclean.report import write_report
    write_report("out/")                 # -> "out/report.html"
"""
from __future__ import annotations

import os
import traceback

from dataclean.io.writers import write_text_atomic
from dataclean.report.page import esc, page
from dataclean.report.queries import RunTables, read_json
from dataclean.report.thresholds import thresholds_from_config

__all__ = ["ReportError", "check_finished", "render_report", "write_report"]


class ReportError(Exception):
    """The folder is not the output of a finished run."""


def check_finished(output_dir: str) -> None:
    """Raise :class:`ReportError` when ``output_dir`` holds a dataclean run that is not finished, so that
    ``dataclean report`` does not write a page of half a run into it. (The run writes its own report.html
    before it is finished, with :func:`write_report`, which does not check.)

    Finished: ``manifest.json`` (written after pass 2 and stats) and the final marker
    ``_work/markers/final.json`` of the same fingerprint; or ``manifest.json`` naming an input that could
    not be read (such a run never gets the final marker: the same command gives the same run); or
    ``manifest.json`` without ``_work/`` (a run published to a destination, or copied without its work
    folder). A folder that holds no run at all is left to :func:`render_report` to refuse. (The caller holds
    the folder's lock, :mod:`dataclean.exec.lock`, so that no run is at work in it meanwhile.)"""
    from dataclean.layout import Layout, load_marker

    lay = Layout(output_dir)
    if not (os.path.exists(lay.owner) or os.path.isdir(lay.work)):
        return  # not a run folder: render_report says what is missing
    manifest = read_json(lay.manifest)
    if isinstance(manifest, dict):
        final = load_marker(lay, "final")
        if final and final.get("fingerprint") in (None, manifest.get("fingerprint")):
            return
        if any(i.get("status") != "ok" for i in manifest.get("inputs") or []) or not os.path.isdir(lay.work):
            return
        from dataclean.audit.verify import verify

        problems = verify(output_dir, full=False).problems
        if problems:  # (the run wrote its own report.html, failing verification; it has no final marker)
            raise ReportError(f"the run in {output_dir} failed verification ({problems[0]}); see "
                              f"`dataclean verify {output_dir}`")
    raise ReportError(f"the run in {output_dir} is not finished (no {os.path.relpath(lay.marker('final'), lay.root)}"
                      f"{'' if isinstance(manifest, dict) else ' and no manifest.json'}): run the same "
                      f"`dataclean run ... -o {output_dir}` command again to finish it (it resumes), "
                      "then `dataclean report`")


def render_report(output_dir: str, memory_limit: str | None = None) -> str:
    """The report of the run in ``output_dir`` as an HTML string."""
    from dataclean.report import sections as S

    summary = read_json(os.path.join(output_dir, "stats", "summary.json"))
    if summary is None:
        raise ReportError(f"{output_dir}: no stats/summary.json; is this the output folder of a finished "
                          "dataclean run?")
    manifest = read_json(os.path.join(output_dir, "manifest.json"))
    tables = RunTables(output_dir, memory_limit)
    try:
        run = S.Run(output_dir, tables, manifest, summary)
        funnel = [r for r in (S.rows(S.read_parquet(run.path("stats", "funnel.parquet"))))
                  if r["source"] == "(all)"]
        run.stages = [r["stage"] for r in sorted(funnel, key=lambda r: r["step"])] or list(summary.get("stages", []))
        run.thresholds = thresholds_from_config((manifest or {}).get("config"))

        parts: list[tuple[str, str, str]] = []

        def add(anchor: str, title: str, build) -> None:
            try:
                html = build()
            except Exception:  # one broken section must not cost the whole report
                html = S.section(anchor, title, '<pre class="section-error">'
                                 + esc(traceback.format_exc(limit=3)) + "</pre>")
            if html:
                parts.append((anchor, title, html))

        try:
            removals = S.removal_rows(run)
        except Exception:  # stats/removed.parquet unreadable: the sections that use it say "nothing removed"
            removals = []
        add("run", "Run", lambda: S.run_section(run))
        add("funnel", "Funnel", lambda: S.funnel_section(run))
        add("removals", "Removals", lambda: S.removals_section(run, removals))
        add("sources", "Sources", lambda: S.sources_section(run))
        add("signals", "Signals", lambda: S.signals_section(run, removals))
        add("quality", "Quality", lambda: S.quality_section(run))
        add("dedup", "Dedup", lambda: S.dedup_section(run, removals))
        add("rewrites", "Rewrites", lambda: S.rewrites_section(run))
        add("contamination", "Contamination", lambda: S.contamination_section(run))
        add("mixture", "Mixture", lambda: S.mixture_section(run))
        add("examples", "Examples", lambda: S.examples_section(run, removals))
        add("near", "Near threshold", lambda: S.near_section(run))
    finally:
        tables.close()
    finished = (manifest or {}).get("finished_at", "")
    title = "dataclean report"
    subtitle = f"{os.path.abspath(output_dir)}" + (f" · finished {finished}" if finished else "")
    footer = (f"dataclean {(manifest or {}).get('versions', {}).get('dataclean', '?')} · config "
              f"{(manifest or {}).get('config_hash', '?')} · this page loads nothing from the network")
    return page(title, subtitle, [(a, t) for a, t, _ in parts], "".join(h for _, _, h in parts), footer)


def write_report(output_dir: str, path: str | None = None, memory_limit: str | None = None) -> str:
    """Write the report of the run in ``output_dir`` to ``path`` (default ``output_dir/report.html``)
    atomically, and return the path. ``memory_limit``: its DuckDB's (a run's share of its budget)."""
    path = path or os.path.join(output_dir, "report.html")
    html = render_report(output_dir, memory_limit)
    write_text_atomic(html, os.path.abspath(path))
    return path
