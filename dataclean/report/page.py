"""HTML building blocks of the report: escaping, tables, sections and the page shell.

Every value that comes from the data (text, ids, urls, sources, rule details, meta, file names, config)
goes through :func:`esc`; markup is only ever built here from constants. The page carries a
Content-Security-Policy that allows nothing to load or run: inline styles and ``data:`` images only.
"""
from __future__ import annotations

import html
import math
from typing import Iterable

CSP = "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'"


# C0 controls other than tab/newline/carriage return, DEL and C1 controls: shown as U+FFFD, never passed on
_CONTROLS = {c: "\ufffd" for c in [*range(0x00, 0x09), 0x0B, 0x0C, *range(0x0E, 0x20), *range(0x7F, 0xA0)]}


def clean(value) -> str:
    """A value as displayable text: controls replaced, lone surrogates replaced (the page is UTF-8)."""
    s = str(value).translate(_CONTROLS)
    try:
        s.encode("utf-8")
    except UnicodeEncodeError:
        s = s.encode("utf-8", "replace").decode("utf-8")
    return s


def esc(value) -> str:
    """Any value as HTML text (None as an empty string)."""
    if value is None:
        return ""
    return html.escape(clean(value), quote=True)


def num(value, digits: int = 3) -> str:
    """A number for a table cell: thousands separators for integers, ``digits`` significant digits else."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if value.is_integer() and abs(value) < 1e15:
            return f"{int(value):,}"
        return f"{value:,.{digits}g}" if abs(value) >= 1 else f"{value:.{digits}g}"
    return str(value)


def pct(part, whole, digits: int = 1) -> str:
    if not whole:
        return ""
    return f"{100.0 * (part or 0) / whole:.{digits}f}%"


class Cell:
    """A table cell of already-built markup (for example a number with a class); everything else is
    escaped as text by :func:`table`."""

    def __init__(self, markup: str, cls: str = ""):
        self.markup, self.cls = markup, cls


def mono(value) -> Cell:
    """A cell of monospace text (ids, paths, hashes)."""
    return Cell(f'<span class="mono">{esc(value)}</span>')


def table(headers: list[str], rows: Iterable[Iterable], numeric: Iterable[int] = (), cls: str = "") -> str:
    numeric = set(numeric)
    head = "".join(f'<th class="num">{esc(h)}</th>' if i in numeric else f"<th>{esc(h)}</th>"
                   for i, h in enumerate(headers))
    body = []
    for row in rows:
        cells = []
        for i, v in enumerate(row):
            klass = "num" if i in numeric else ""
            if isinstance(v, Cell):
                klass = (klass + " " + v.cls).strip()
                content = v.markup
            else:
                content = esc(num(v) if i in numeric else v)
            cells.append(f'<td class="{klass}">{content}</td>' if klass else f"<td>{content}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    attr = f' class="{esc(cls)}"' if cls else ""
    thead = f"<thead><tr>{head}</tr></thead>" if any(headers) else ""
    return f"<table{attr}>{thead}<tbody>{''.join(body)}</tbody></table>"


def section(anchor: str, title: str, body: str, intro: str = "") -> str:
    intro_html = f'<p class="intro">{esc(intro)}</p>' if intro else ""
    return f'<section id="{esc(anchor)}"><h2>{esc(title)}</h2>{intro_html}{body}</section>'


def details(summary: str, body: str, open_: bool = False) -> str:
    return f"<details{' open' if open_ else ''}><summary>{esc(summary)}</summary>{body}</details>"


def figure(svg: str, caption: str = "") -> str:
    cap = f"<figcaption>{esc(caption)}</figcaption>" if caption else ""
    return f"<figure>{svg}{cap}</figure>"


def note(text: str) -> str:
    return f'<p class="note">{esc(text)}</p>'


def pre(text, cls: str = "doc") -> str:
    return f'<pre class="{esc(cls)}">{esc(text)}</pre>'


STYLE = """
:root { --fg:#1d1d1f; --muted:#6b6b70; --line:#e3e3e8; --bg:#ffffff; --soft:#f6f6f8; --kept:#4c78a8;
        --removed:#e45756; --warn:#b35c00; }
* { box-sizing: border-box; }
body { margin:0; color:var(--fg); background:var(--bg);
       font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Noto Sans", "Helvetica Neue", Arial, sans-serif; }
header { padding: 18px 28px 12px; border-bottom: 1px solid var(--line); background: var(--soft); }
header h1 { margin: 0 0 4px; font-size: 22px; }
header .sub { color: var(--muted); font-size: 13px; word-break: break-all; }
nav { padding: 8px 28px; border-bottom: 1px solid var(--line); font-size: 13px; position: sticky; top: 0;
      background: var(--bg); z-index: 1; }
nav a { color: #2a5db0; text-decoration: none; margin-right: 14px; white-space: nowrap; }
main { padding: 4px 28px 40px; max-width: 1280px; }
section { margin-top: 26px; }
h2 { font-size: 18px; border-bottom: 2px solid var(--line); padding-bottom: 4px; margin-bottom: 10px; }
h3 { font-size: 15px; margin: 18px 0 6px; }
p.intro, p.note, figcaption { color: var(--muted); font-size: 12.5px; margin: 4px 0 8px; }
.cards { display: flex; flex-wrap: wrap; gap: 10px; margin: 10px 0; }
.card { border: 1px solid var(--line); border-radius: 8px; padding: 8px 14px; min-width: 140px; background: var(--bg); }
.card .v { font-size: 20px; font-weight: 600; }
.card .k { color: var(--muted); font-size: 12px; }
.card.ok .v { color: #2e7d32; } .card.bad .v { color: #c62828; }
table { border-collapse: collapse; font-size: 12.5px; margin: 6px 0 12px; }
th, td { border-bottom: 1px solid var(--line); padding: 3px 9px; text-align: left; vertical-align: top; }
th { background: var(--soft); font-weight: 600; position: sticky; top: 33px; }
td.num, th.num { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
tbody tr:nth-child(even) { background: #fbfbfd; }
td.warn { color: var(--warn); font-weight: 600; }
td.bad { color: #c62828; font-weight: 600; }
.mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; font-size: 12px;
        word-break: break-all; }
figure { margin: 6px 0 14px; }
svg.chart { width: 100%; height: auto; display: block; }
details { margin: 6px 0; }
summary { cursor: pointer; font-weight: 600; font-size: 13px; }
pre.doc { white-space: pre-wrap; word-break: break-word; background: var(--soft); border: 1px solid var(--line);
          border-radius: 6px; padding: 8px 10px; margin: 4px 0 8px; font-size: 12px; max-height: 16em;
          overflow: auto; }
pre.config { white-space: pre; overflow: auto; background: var(--soft); padding: 8px; font-size: 11.5px;
             max-height: 30em; }
pre.section-error { color: #c62828; white-space: pre-wrap; }
.doc-head { font-size: 12px; color: var(--muted); overflow-wrap: anywhere; }
.doc-head b { color: var(--fg); }
.side { display: grid; grid-template-columns: 1fr 1fr; gap: 14px; border: 1px solid var(--line);
        border-radius: 8px; padding: 10px; margin-bottom: 14px; }
.side h4 { margin: 0 0 4px; font-size: 13px; }
.side .kept h4 { color: var(--kept); } .side .dups h4 { color: var(--removed); }
.example { border-left: 3px solid var(--removed); padding-left: 10px; margin: 8px 0 12px; }
.example.near { border-left-color: var(--kept); }
pre.doc mark { background: #ffe08a; color: inherit; outline: 1px solid #e0b000; }
pre.diff del { background: #fbd3d0; color: #8a1c13; }
pre.diff ins { background: #cdebd0; color: #14531c; text-decoration: underline; }
pre.diff .same, pre.diff .why { color: var(--muted); font-style: italic; }
.warnings li { color: var(--warn); }
.row { display: flex; flex-wrap: wrap; gap: 0 36px; align-items: flex-start; }
footer { color: var(--muted); font-size: 12px; padding: 16px 28px; border-top: 1px solid var(--line); }
"""


def page(title: str, subtitle: str, nav: list[tuple[str, str]], body: str, footer: str) -> str:
    links = "".join(f'<a href="#{esc(a)}">{esc(t)}</a>' for a, t in nav)
    return (
        "<!DOCTYPE html>\n"
        '<html lang="en"><head><meta charset="utf-8">'
        f'<meta http-equiv="Content-Security-Policy" content="{esc(CSP)}">'
        '<meta name="referrer" content="no-referrer">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title><style>{STYLE}</style></head>\n"
        f'<body><header><h1>{esc(title)}</h1><div class="sub">{esc(subtitle)}</div></header>'
        f"<nav>{links}</nav><main>{body}</main><footer>{esc(footer)}</footer></body></html>\n"
    )
