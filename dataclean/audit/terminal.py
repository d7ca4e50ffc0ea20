"""Rich rendering of ``dataclean stats``, ``sql`` and ``inspect`` for the terminal, and :func:`safe`, the one
escaping function of every data value and file name dataclean prints.

Numbers are printed with thousands separators (``1,686``); shares as percentages. When stdout is not a
terminal (a pipe, a test) the console is 160 columns wide and prints no colour codes. (rich is imported by
the functions that draw: :func:`safe` is also what an error line is made of, printed when memory ran out.)
"""
from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # (rich is imported when a table is printed)
    from rich.console import Console
    from rich.table import Table

CELL_CHARS = 120  # longest string cell of an sql result table; csv/json print everything


# Characters that act on a terminal instead of being shown, all shown as U+FFFD: the C0 controls but tab and
# newline (ESC starts every CSI ``ESC [`` and OSC ``ESC ]`` sequence; BEL, BS, CR rewrite), DEL and the C1
# controls (U+0080-U+009F: CSI and OSC in one character for a terminal that reads them), the bidi controls
# (U+202A-U+202E embeddings and overrides, U+2066-U+2069 isolates, U+200E/U+200F marks, U+061C: they reorder
# what follows: U+202E then ``gpj.exe`` shows as ``exe.jpg``), and lone surrogates (not Unicode: a file name
# of bytes that are not UTF-8 is decoded to them, and printing one would fail).
UNSAFE = frozenset([*range(0x00, 0x09), *range(0x0B, 0x20), *range(0x7F, 0xA0), 0x061C, 0x200E, 0x200F,
                    *range(0x202A, 0x202F), *range(0x2066, 0x206A), *range(0xD800, 0xE000)])
_TERMINAL_CONTROLS = {c: "\ufffd" for c in UNSAFE}
_ONE_LINE = {**_TERMINAL_CONTROLS, ord("\n"): "\ufffd"}
_JSON_ESCAPES = {c: f"\\u{c:04x}" for c in UNSAFE}


def safe(value, line: bool = False):
    """``value`` with every string in it (also inside lists, tuples and dicts) free of the characters that act
    on a terminal (:data:`UNSAFE`: controls other than newline and tab, bidi controls, lone surrogates), each
    shown as U+FFFD, so that data and file names printed to a terminal cannot retitle, clear, rewrite or
    reorder it. ``line=True``: a newline too, for a message that must stay one line."""
    if isinstance(value, str):
        return value.translate(_ONE_LINE if line else _TERMINAL_CONTROLS)
    if isinstance(value, dict):
        return {safe(k, line): safe(v, line) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(safe(v, line) for v in value)
    return value


def safe_json(text: str) -> str:
    """JSON text (from ``json.dumps``) with each :data:`UNSAFE` character written as its ``\\uXXXX`` escape:
    the same JSON values (nothing is replaced), none of them raw on the terminal. (Outside strings JSON is
    ASCII without controls, so every such character is inside a string, where the escape means itself.)"""
    return text.translate(_JSON_ESCAPES)


def console() -> Console:
    from rich.console import Console

    con = Console()
    if not con.is_terminal:
        con = Console(width=160, no_color=True, highlight=False)
    return con


def num(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, bool):
        return str(v).lower()
    if isinstance(v, int):
        return f"{v:,}"
    if isinstance(v, float):
        if v != v:
            return "-"
        if v == int(v) and abs(v) < 1e15:
            return f"{int(v):,}"
        return f"{v:.4g}" if abs(v) < 1e6 else f"{v:,.0f}"
    return str(v)


def pct(v) -> str:
    return "-" if v is None else f"{100 * v:.2f}%"


def _table(title: str, columns: list[str], numeric: set[str] | None = None, split_headers: bool = False) -> Table:
    from rich import box
    from rich.table import Table

    t = Table(title=title, title_justify="left", box=box.SIMPLE_HEAVY, show_lines=False, pad_edge=False)
    for c in columns:
        header = c.replace("_", "\n") if split_headers else c
        if numeric is not None and c in numeric:
            t.add_column(header, justify="right", no_wrap=True)
        else:
            t.add_column(header, overflow="fold", min_width=min(len(c), 10))
    return t


# --- stats --------------------------------------------------------------------------------------------------

def render_stats(stats: dict, con: Console | None = None) -> None:
    """Data values (stage, rule, source, lang and mixture names come from configs and inputs) go in as rich
    ``Text``, never as markup: a source named ``[/]`` or ``[link=…]`` prints as itself."""
    from rich.text import Text

    stats = safe(stats)
    con = con or console()
    s = stats["summary"]
    con.print(Text(f"run: {stats['out']}"))
    head = _table("summary", ["", "value"], {"value"})
    failed = f" ({s['failed_inputs']} failed)" if s["failed_inputs"] else ""
    head.add_row("input files", num(s["input_files"]) + failed)
    head.add_row("records in", num(s["input_records"]))
    head.add_row("kept", f"{num(s['kept'])} ({pct(s['kept_share'])})")
    head.add_row("removed", num(s["removed"]))
    head.add_row("bad records", num(s["bad_records"]))
    head.add_row("tokens in", num(s["input_tokens"]))
    head.add_row("tokens kept", num(s["kept_tokens"]))
    head.add_row("conservation", f"{num(s['input_records'])} = {num(s['kept'])} + {num(s['removed'])}: "
                 + ("ok" if s["conservation_ok"] else "FAILED"))
    con.print(head)

    if stats["funnel"]:
        cols = ["step", "stage", "docs in", "removed", "docs out", "tokens in", "tokens removed", "tokens out"]
        t = _table("funnel (all sources)", cols, set(cols) - {"stage"})
        for r in stats["funnel"]:
            t.add_row(str(r["step"]), Text(str(r["stage"])), num(r["docs_in"]), num(r["docs_removed"]),
                      num(r["docs_out"]), num(r["tokens_in"]), num(r["tokens_removed"]), num(r["tokens_out"]))
        con.print(t)

    if stats["removals"]:
        cols = ["stage", "rule", "docs", "chars", "tokens", "% of docs", "% of tokens"]
        t = _table("removed by stage × rule (share of the input)", cols, set(cols) - {"stage", "rule"})
        for r in stats["removals"]:
            t.add_row(Text(str(r["stage"])), Text(str(r["rule"])), num(r["docs"]), num(r["chars"]),
                      num(r["tokens"]), pct(r["share_docs"]), pct(r["share_tokens"]))
        con.print(t)

    if stats["sources"]:
        cols = ["source", "lang", "input", "kept", "removed", "% kept", "kept tokens", "removed tokens"]
        t = _table("per source and language", cols, set(cols) - {"source", "lang"})
        for r in stats["sources"]:
            t.add_row(Text(str(r["source"])), Text(str(r["lang"])), num(r["input"]), num(r["kept"]),
                      num(r["removed"]), pct(r["kept"] / r["input"] if r["input"] else None), num(r["kept_tokens"]),
                      num(r["removed_tokens"]))
        con.print(t)

    if stats["cluster_sizes"] or stats["exact_groups"]:
        cols = ["dedup", "size", "groups", "documents", "removed"]
        t = _table("duplicate clusters by size", cols, {"size", "groups", "documents", "removed"})
        for r in stats["exact_groups"]:
            t.add_row("exact", num(r["group_size"]), num(r["groups"]), num(r["documents"]),
                      num(r["documents"] - r["groups"]))
        for r in stats["cluster_sizes"]:
            t.add_row("near (minhash)", num(r["cluster_size"]), num(r["clusters"]), num(r["documents"]),
                      num(r["documents"] - r["clusters"]))
        con.print(t)

    if stats["mixture"] is not None:
        rows = stats["mixture"]
        cols = list(rows[0]) if rows else ["source"]
        text_cols = {"source", "select", "warning"}
        t = _table("mixture", cols, set(cols) - text_cols, split_headers=True)
        for r in rows:
            t.add_row(*[num(r[c]) if c not in text_cols else Text("" if r[c] is None else str(r[c])) for c in cols])
        con.print(t)
    for note in safe(stats.get("notes", []), line=True):
        con.print(Text(f"note: {note}"))


# --- sql ----------------------------------------------------------------------------------------------------

def render_query(result, con: Console | None = None) -> None:
    from rich.text import Text

    from dataclean.audit.query import plain_value

    con = con or console()
    numeric = {c for c, t in zip(safe(result.columns), result.types)
               if t.split("(")[0] in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UBIGINT", "UINTEGER",
                                      "FLOAT", "DOUBLE", "DECIMAL")}
    columns = safe(result.columns)
    rows = []
    for row in safe(result.rows):
        cells = []
        for v in row:
            if isinstance(v, str):
                s = v.replace("\n", "↵ ")
            elif isinstance(v, (list, dict)):
                s = json.dumps(plain_value(v), ensure_ascii=False)
            else:
                s = num(v)
            if len(s) > CELL_CHARS:
                s = s[:CELL_CHARS] + "…"
            cells.append(s)
        rows.append(cells)
    widths = [max([len(c)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]
    if sum(widths) + 3 * len(widths) > con.width and len(columns) > 1:
        # too wide for the terminal: a table would drop or squeeze columns, so one block per row instead
        name_width = max(len(c) for c in columns)
        for n, cells in enumerate(rows, 1):
            con.print(Text(f"-[ row {n} ]" + "-" * max(0, min(con.width, 60) - 12 - len(str(n)))))
            for c, v in zip(columns, cells):
                con.print(Text(f"{c:<{name_width}} | {v}"))
    else:
        t = _table("", columns, numeric)
        for cells in rows:
            t.add_row(*[Text(c) for c in cells])
        con.print(t)
    more = " (more rows: use --limit N)" if result.truncated else ""
    con.print(f"{len(result.rows):,} row{'s' if len(result.rows) != 1 else ''}{more}")
    for note in safe(result.notes, line=True):
        con.print(Text(f"note: {note}"))


def render_views(views: list[dict], con: Console | None = None) -> None:
    from rich.text import Text

    views = safe(views)
    con = con or console()
    t = _table("views", ["view", "rows", "files", "columns"], {"rows", "files"})
    for v in views:
        cols = ", ".join(f"{c} {ty}" for c, ty in v["columns"]) if not v.get("error") else f"ERROR: {v['error']}"
        t.add_row(Text(v["view"]), num(v["rows"]), num(v["files"]), Text(cols))
    con.print(t)


# --- inspect ------------------------------------------------------------------------------------------------

def _fate_text(d: dict) -> str:
    if d["status"] == "kept":
        return "KEPT"
    f = d.get("fate") if d["status"] == "removed" else d.get("would_be")
    if d["status"] == "not_in_run" and f is None:
        return "NOT IN THIS RUN: pass 1 would keep it"
    prefix = "REMOVED" if d["status"] == "removed" else "NOT IN THIS RUN: pass 1 would remove it"
    parts = [f"{prefix} by {f['stage']} / {f['rule']} (reason {f['reason']})"]
    sig = f" ({f['signal']})" if f.get("signal") else ""
    v, thr, cmp = f.get("value"), f.get("threshold"), ""
    if v is not None and thr is not None:
        cmp = {"min": "below the minimum" if v < thr else "", "max": "above the maximum" if v > thr else ""}.get(
            f.get("compare") or "", "")
    parts.append(f"value {num(f['value'])}{sig}, threshold {num(f['threshold'])}" + (f" [{cmp}]" if cmp else ""))
    if f.get("detail"):
        parts.append(f"detail: {f['detail']}")
    if f.get("dup_of"):
        parts.append(f"dup_of (kept instead): {f['dup_of']}")
    return "\n".join(parts)


def render_inspect(result: dict, con: Console | None = None) -> None:
    from rich.console import Group
    from rich.markup import escape
    from rich.panel import Panel
    from rich.text import Text

    result = safe(result)
    con = con or console()
    for d in result["documents"]:
        meta = _table("", ["field", "value"])
        meta.show_header = False
        meta.add_row("fate", Text(_fate_text(d)))
        for k in ("id", "source", "lang", "origin_file", "origin_row", "n_chars", "n_tokens", "quality_score"):
            if d.get(k) is not None:
                meta.add_row(k, Text(num(d[k]) if not isinstance(d[k], str) else d[k]))
        if d.get("note"):
            meta.add_row("note", Text(d["note"]))
        g = d.get("exact_group")
        if g:
            members = ", ".join(g["members"][:10]) + (" …" if len(g["members"]) > 10 else "")
            meta.add_row("exact group", Text(f"{g['size']} identical texts, kept {g['kept_id']} "
                                             f"(content hash {g['content_hash']}): {members}"))
        c = d.get("cluster")
        if c:
            members = ", ".join(f"{m['id']}{' (rep)' if m['representative'] else ''} {m['similarity']:.3f}"
                                for m in c["members"][:10]) + (" …" if len(c["members"]) > 10 else "")
            meta.add_row("near-dup cluster", Text(f"size {c['size']}, representative (kept) {c['representative']}, "
                                                  f"similarity {c['similarity_to_representative']:.3f}: {members}"))
        rw = d.get("rewrites") or {}
        if rw:
            parts = []
            if rw.get("pii_masks"):
                parts.append("PII masked: " + ", ".join(f"{k} {n}" for k, n in rw["pii_masks"].items())
                             + f" ({rw.get('pii_chars', 0):,} chars)")
            parts += [f"{k} {v:,}" for k, v in rw.items() if k not in ("pii_masks", "pii_chars")]
            meta.add_row("rewrites", Text("; ".join(parts)))
        bo = d.get("benchmark_overlap")
        if bo:
            meta.add_row("benchmark", Text(f"{bo['benchmark']} item {bo['item']}: overlap {num(bo['overlap'])} "
                                           f"({num(bo['shared_ngrams'])} shared n-grams)"))
        a = d.get("anomalies") or {}
        if a.get("note"):
            meta.add_row("anomalies", Text(a["note"]))
        else:
            run = a.get("longest_run")
            meta.add_row("longest run", Text(
                f"{run['chars']:,} chars ({pct(run['share'])} of the text): {run['detail']}" if run
                else "none of 24+ characters"))
            garbled = {k.removeprefix("garbled_"): v for k, v in (a.get("garbled") or {}).items() if v}
            line = ", ".join(f"{k} {num(v)}" for k, v in garbled.items()) or "none"
            if a.get("garbled_rule"):
                line += f" (rule {a['garbled_rule']} fails)"
            meta.add_row("garble signals", Text(line))
            scripts = ", ".join(f"{s} {n:,}" for s, n in sorted(a.get("scripts", {}).items(), key=lambda x: -x[1]))
            meta.add_row("scripts", Text(f"{scripts or 'no letters'}; rare script share "
                                         f"{pct(a.get('rare_script_share'))}"))
            meta.add_row("flags", Text("; ".join(a.get("flags") or []) or "none"))
        outliers = d.get("outliers") or []
        if outliers:
            lines = [f"{o['signal']} = {num(o['value'])}: {o['flag']}, percentile {o['percentile']:.1f} "
                     f"(p1 {num(o['p01'])}, p50 {num(o['p50'])}, p99 {num(o['p99'])}; {o['group']}, n={o['n']:,})"
                     for o in outliers]
            meta.add_row("outliers", Text("\n".join(lines)))
        else:
            meta.add_row("outliers", Text(f"none among {len(d.get('percentiles') or {})} signals"
                                          " (< 1st or > 99th percentile of kept documents)"))
        text = d.get("text")
        body = Text(text if text is not None else "(no text)")
        if d.get("text_truncated"):
            body.append(f"\n… ({d['text_chars']:,} characters; --full for all)", style="italic")
        title = safe(f"{d['query']}", line=True)
        con.print(Panel(Group(meta, Panel(body, title="text", title_align="left")), title=escape(title),
                        title_align="left"))
    for label in result["not_found"]:
        con.print(Text(f"not found: {safe(label, line=True)} (neither kept nor removed in this run)"))
