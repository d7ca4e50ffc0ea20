"""Charts of the report, written as SVG directly: horizontal bars, lines across stages, grouped bars and
small histograms (through :func:`dataclean.report.svggrid.signal_grid`).

Why not matplotlib: these charts are rectangles, lines and a few labels. Importing and drawing with it
was most of the time of a report that every run writes (docs/measurements.md#report-charts), and the
package needs no plotting library.

Every chart is one ``<svg class="chart">`` element that scales to its container up to its natural width,
without ids; text stays text; the same data gives the same bytes; every text from the data passes through
:func:`dataclean.report.page.esc`.
"""
from __future__ import annotations

import math

from dataclean.report.page import clean, esc
from dataclean.report.svggrid import AXIS, DASH, compact, nice_ticks, pt, signal_grid

KEPT = "#4c78a8"
REMOVED = "#e45756"
OTHER = "#b8b0ac"
PALETTE = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d", "#eeca3b",
           "#bab0ac"]
# one colour per stage, none repeated for up to 20 stages (then they cycle): Tableau 10, then ten more of
# other hues and lightness, each far from the first ten
STAGE_PALETTE = ["#4c78a8", "#f58518", "#54a24b", "#e45756", "#72b7b2", "#b279a2", "#ff9da6", "#9d755d",
                 "#eeca3b", "#bab0ac", "#1b3a6b", "#8c2d04", "#0f6b3c", "#7a0177", "#00a6d6", "#c7a500",
                 "#5a5a5a", "#b8e186", "#f4a6d7", "#3f007d"]
LINE_STYLES = ["-", "--", ":", "-."]
GRID = "#e6e6e6"
TEXT = "#333333"
CHAR_W = 3.9  # average width of a character at 7 pt, in points (sans-serif)
WIDTH = 540.0  # points (7.5 in, the page's figure width)


def label(value, width: int = 40) -> str:
    """A data value as a chart label: at most ``width`` characters (escape it with ``esc`` when written)."""
    s = clean(value)
    return s if len(s) <= width else s[: width - 1] + "…"


def svg_element(key: str, width: float, height: float, body: list[str]) -> str:
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="{esc(key)}" '
            f'viewBox="0 0 {pt(width)} {pt(height)}" style="max-width:{pt(width * 1.3)}pt" '
            f'font-family="sans-serif" font-size="7" fill="{TEXT}">' + "".join(body) + "</svg>")


def text(x: float, y: float, s: str, anchor: str = "start", extra: str = "") -> str:
    a = "" if anchor == "start" else f' text-anchor="{anchor}"'
    return f'<text x="{pt(x)}" y="{pt(y)}"{a}{extra}>{esc(s)}</text>'


def legend_row(items: list[tuple[str, str, str]], x: float, y: float, max_x: float) -> tuple[list[str], float]:
    """Legend entries (name, colour, "box", "faint" (a box at 35% opacity) or a line style) from (x, y),
    wrapping at ``max_x``: (SVG, the y below the legend)."""
    out, x0 = [], x
    for name, colour, kind in items:
        w = 14 + CHAR_W * len(name) + 10
        if x > x0 and x + w > max_x:
            x, y = x0, y + 11
        if kind in ("box", "faint"):
            faint = ' fill-opacity="0.35"' if kind == "faint" else ""
            out.append(f'<rect x="{pt(x)}" y="{pt(y - 6)}" width="10" height="7" style="fill: {colour}"{faint}/>')
        else:
            marker = f'<circle cx="{pt(x + 6)}" cy="{pt(y - 2.5)}" r="1.5" style="fill: {colour}"/>'
            out.append(f'<path d="M{pt(x)} {pt(y - 2.5)}h12" fill="none" stroke="{colour}" stroke-width="1.4"'
                       f'{DASH.get(kind, "")}/>' + marker)
        out.append(text(x + 14, y, name))
        x += w
    return out, y + 6


def _log_ticks(lo: float, hi: float) -> list[float]:
    """Powers of ten in [lo, hi], thinned to at most 6."""
    ks = list(range(math.ceil(math.log10(lo) - 1e-9), math.floor(math.log10(hi) + 1e-9) + 1))
    step = max(1, math.ceil(len(ks) / 6))
    return [10.0 ** k for k in ks[::step]]


def _count(v: float) -> str:
    return f"{v:,.0f}" if float(v).is_integer() else f"{v:,.3g}"


class _Axis:
    """A linear or log10 scale from data values to points."""

    def __init__(self, lo: float, hi: float, a: float, b: float, log: bool = False):
        self.log = log
        self.lo, self.hi = (math.log10(lo), math.log10(hi)) if log else (lo, hi)
        if self.hi <= self.lo:
            self.hi = self.lo + 1.0
        self.a, self.b = a, b
        self.vlo, self.vhi = lo, hi

    def __call__(self, v: float) -> float:
        t = math.log10(max(v, 1e-300)) if self.log else v
        return self.a + (t - self.lo) / (self.hi - self.lo) * (self.b - self.a)

    def ticks(self, integer: bool = False) -> list[float]:
        if self.log:
            return _log_ticks(self.vlo, self.vhi)
        ticks = nice_ticks(self.vlo, self.vhi, 5)
        return [t for t in ticks if float(t).is_integer()] if integer else ticks


def hbars(key: str, labels: list[str], values: list[float], colours: list[str], xlabel: str,
          legend: list[tuple[str, str]] | None = None, log_x: bool = False) -> str:
    """Horizontal bars, first label on top, each value printed at its bar's end. On a log axis the bars
    start at 0.5, so a rule that removed one document still has a bar."""
    names = [label(s, 60) for s in labels]
    left = 8 + CHAR_W * max((len(s) for s in names), default=1)
    right = WIDTH - 8 - CHAR_W * max((len(_count(v)) for v in values), default=1) - 6
    body: list[str] = []
    top = 8.0
    if legend:
        items, top = legend_row([(label(t), c, "box") for t, c in legend], left, 14, WIDTH - 8)
        body += items
        top += 4
    row = 13.0
    bottom = top + row * max(len(labels), 1)
    vmax = max([*values, 1])
    x = _Axis(0.5, vmax * 3, left, right, log=True) if log_x else _Axis(0, vmax * 1.08, left, right)
    ticks = x.ticks()
    body.append("".join(f'<path d="M{pt(x(t))} {pt(top)}V{pt(bottom)}" stroke="{GRID}" stroke-width="0.6"/>'
                        for t in ticks))
    base = 0.5 if log_x else 0.0
    for i, (name, v, colour) in enumerate(zip(names, values, colours)):
        y = top + i * row
        x0, x1 = x(base), x(max(v, base))
        body.append(f'<rect x="{pt(x0)}" y="{pt(y + 2)}" width="{pt(max(x1 - x0, 0.5))}" height="{pt(row - 4)}" '
                    f'style="fill: {colour}"/>')
        body.append(text(left - 4, y + row / 2 + 2.5, name, "end"))
        body.append(text(x1 + 3, y + row / 2 + 2.3, _count(v), extra=' font-size="6.5"'))
    body.append(f'<path d="M{pt(left)} {pt(top)}V{pt(bottom)}H{pt(right)}" fill="none" stroke="{AXIS}" '
                f'stroke-width="0.8"/>')
    body.append(f'<path d="{"".join(f"M{pt(x(t))} {pt(bottom)}v2" for t in ticks)}" stroke="{AXIS}" '
                'stroke-width="0.8"/>')
    body += [text(x(t), bottom + 10, compact(t), "middle") for t in ticks]
    body.append(text((left + right) / 2, bottom + 22, xlabel, "middle", ' font-size="8"'))
    return svg_element(key, WIDTH, bottom + 28, body)


def funnel(key: str, stages: list[str], series: list[tuple[str, list[float]]], ylabel: str,
           title: str = "") -> str:
    """Lines of what remains after each stage (in % of the input), one per series."""
    left, right = 44.0, WIDTH - 12
    body: list[str] = []
    y0 = 4.0
    if title:
        body.append(text((left + right) / 2, 12, label(title, 80), "middle", ' font-size="9"'))
        y0 = 16.0
    styles = [(PALETTE[i % len(PALETTE)], LINE_STYLES[(i // len(PALETTE)) % len(LINE_STYLES)])
              for i in range(len(series))]
    items, top = legend_row([(label(name), c, st) for (name, _), (c, st) in zip(series, styles)], left, y0 + 10,
                         right)
    body += items
    top += 6
    names = [label(s, 24) for s in stages]
    bottom = top + 130
    lo = min((v for _, vals in series for v in vals), default=0)
    y = _Axis(max(0, math.floor(lo / 10) * 10 - 5), 102, bottom, top)
    n = max(len(stages) - 1, 1)
    step = (right - left - 16) / n
    xs = [left + 8 + i * step for i in range(len(stages))]
    yt = y.ticks()
    body.append("".join(f'<path d="M{pt(left)} {pt(y(t))}H{pt(right)}" stroke="{GRID}" stroke-width="0.6"/>'
                        for t in yt))
    for (name, values), (colour, style) in zip(series, styles):
        pts = [(xs[i], y(v)) for i, v in enumerate(values[: len(xs)])]
        if not pts:
            continue
        d = "M" + "L".join(f"{pt(a)} {pt(b)}" for a, b in pts)
        body.append(f'<path d="{d}" fill="none" stroke="{colour}" stroke-width="1.4"{DASH.get(style, "")}/>')
        body.append("".join(f'<circle cx="{pt(a)}" cy="{pt(b)}" r="1.5" style="fill: {colour}"/>' for a, b in pts))
    body.append(f'<path d="M{pt(left)} {pt(top)}V{pt(bottom)}H{pt(right)}" fill="none" stroke="{AXIS}" '
                f'stroke-width="0.8"/>')
    ticks = "".join(f"M{pt(left)} {pt(y(t))}h-2" for t in yt) + "".join(f"M{pt(a)} {pt(bottom)}v2" for a in xs)
    body.append(f'<path d="{ticks}" stroke="{AXIS}" stroke-width="0.8"/>')
    body += [text(left - 4, y(t) + 2.5, compact(t), "end") for t in yt]
    body += [text(0, 0, s, "end", f' transform="translate({pt(a + 2)} {pt(bottom + 9)}) rotate(-35)"')
             for a, s in zip(xs, names)]
    mid = (top + bottom) / 2
    body.append(text(0, 0, ylabel, "middle", f' font-size="8" transform="translate(10 {pt(mid)}) rotate(-90)"'))
    longest = max((len(s) for s in names), default=1)
    height = bottom + 12 + CHAR_W * longest * math.sin(math.radians(35)) + 6
    return svg_element(key, WIDTH, height, body)


def grouped_bars(key: str, categories: list[str], series: list[tuple[str, list[float], str]], ylabel: str,
                 log_y: bool = False) -> str:
    """Bars side by side per category (for example target vs achieved weight per source)."""
    n = max(len(categories), 1)
    width = min(WIDTH, max(259.0, 158 + 40 * n * max(len(series), 1)))
    left, right = 44.0, width - 10
    body: list[str] = []
    items, top = legend_row([(label(name), colour, "box") for name, _, colour in series], left + 4, 12, right)
    body += items
    top += 6
    bottom = top + 120
    values = [v for _, vals, _ in series for v in vals]
    vmax = max([*values, 1e-9])
    y = _Axis(0.5, vmax * 2, bottom, top, log=True) if log_y else _Axis(0, vmax * 1.1, bottom, top)
    slots = max(n, 4)  # (fewer than 4 categories stay as wide as 4)
    pad = (slots - n) / 2
    slot = (right - left) / slots
    centres = [left + (pad + i + 0.5) * slot for i in range(len(categories))]
    yt = y.ticks(integer=all(float(v).is_integer() for v in values))
    body.append("".join(f'<path d="M{pt(left)} {pt(y(t))}H{pt(right)}" stroke="{GRID}" stroke-width="0.6"/>'
                        for t in yt))
    bw = 0.8 * slot / max(len(series), 1)
    base = 0.5 if log_y else 0.0
    for i, (name, vals, colour) in enumerate(series):
        for c, v in zip(centres, vals):
            xa = c + (i - (len(series) - 1) / 2) * bw - bw / 2
            ya, yb = y(max(v, base)), y(base)
            body.append(f'<rect x="{pt(xa)}" y="{pt(ya)}" width="{pt(bw)}" height="{pt(max(yb - ya, 0))}" '
                        f'style="fill: {colour}"/>')
    body.append(f'<path d="M{pt(left)} {pt(top)}V{pt(bottom)}H{pt(right)}" fill="none" stroke="{AXIS}" '
                f'stroke-width="0.8"/>')
    ticks = "".join(f"M{pt(left)} {pt(y(t))}h-2" for t in yt) + "".join(f"M{pt(c)} {pt(bottom)}v2" for c in centres)
    body.append(f'<path d="{ticks}" stroke="{AXIS}" stroke-width="0.8"/>')
    body += [text(left - 4, y(t) + 2.5, compact(t), "end") for t in yt]
    names = [label(c, 20) for c in categories]
    rotate = len(categories) > 6
    if rotate:
        body += [text(0, 0, s, "end", f' transform="translate({pt(c + 2)} {pt(bottom + 9)}) rotate(-30)"')
                 for c, s in zip(centres, names)]
        extra = CHAR_W * max((len(s) for s in names), default=1) * 0.5 + 12
    else:
        body += [text(c, bottom + 10, s, "middle") for c, s in zip(centres, names)]
        extra = 14
    mid = (top + bottom) / 2
    body.append(text(0, 0, ylabel, "middle", f' font-size="8" transform="translate(10 {pt(mid)}) rotate(-90)"'))
    return svg_element(key, width, bottom + extra + 4, body)


def small_histograms(key: str, panels: list[tuple[str, list[float], list[tuple[str, list[int], str]],
                                                  list[tuple[float, str]]]], xlabel: str, ncols: int = 3) -> str:
    """One small stacked histogram per panel (title, edges, series, cut-off lines) with counts on a log
    scale, as the signal grids; ``xlabel`` names the x axis in each panel's title."""
    return signal_grid(key, [{"title": f"{title} · {xlabel}", "edges": edges, "series": series,
                              "lines": [(x, name, "-") for x, name in lines], "log_x": False}
                             for title, edges, series, lines in panels], ncols=ncols)
