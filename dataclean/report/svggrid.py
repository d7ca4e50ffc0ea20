"""The signal histograms of the report, written as SVG directly.

A grid of small stacked histograms is rectangles, a few tick labels and some threshold lines; the other
charts are in :mod:`dataclean.report.charts`, which draws them with the helpers here (docs/report.md has the
measurements behind writing SVG directly).

The output is deterministic (same panels, same bytes), holds no ids, and every text from the data passes
through :func:`dataclean.report.page.esc`.
"""
from __future__ import annotations

import math

from dataclean.report.page import esc

PANEL_W, PANEL_H = 184.0, 140.0  # points, as the matplotlib panels were (2.55 x 1.95 in)
LEFT, RIGHT, TOP, BOTTOM = 30.0, 8.0, 24.0, 16.0  # plot area inside a panel
LEGEND_H = 22.0
THRESHOLD = "#222222"
THRESHOLD_LANG = "#c05600"
AXIS = "#444444"
DASH = {"-": "", "--": ' stroke-dasharray="4 2"', ":": ' stroke-dasharray="1 2"', "-.": ' stroke-dasharray="4 2 1 2"'}


def pt(v: float) -> str:
    """A coordinate to 0.1 pt, without a trailing .0."""
    s = f"{v:.1f}"
    return s[:-2] if s.endswith(".0") else ("0" if s == "-0.0" else s)


def compact(v: float) -> str:
    """Tick label: 0.05, 3, 200, 1.5k, 20M."""
    a = abs(v)
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            return f"{v / div:g}{suffix}"
    return f"{v:g}"


def short(value, width: int) -> str:
    s = str(value)
    return s if len(s) <= width else s[: width - 1] + "…"


def nice_ticks(lo: float, hi: float, n: int = 4) -> list[float]:
    """At most about ``n`` + 1 round ticks in [lo, hi] (steps of 1, 2, 2.5 or 5 times a power of ten)."""
    if not (math.isfinite(lo) and math.isfinite(hi)) or hi <= lo:
        return [lo] if math.isfinite(lo) else []
    raw = (hi - lo) / n
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.ceil(lo / step - 1e-9)
    ticks = []
    k = first
    while k * step <= hi + step * 1e-9:
        v = round(k * step, 12)
        ticks.append(0.0 if v == 0 else v)
        k += 1
    return ticks


def symlog(x: float) -> float:
    """matplotlib's symlog with linthresh 1 and base 10: linear within ±1, log10 beyond."""
    a = abs(x)
    t = a if a <= 1 else 1 + math.log10(a)
    return math.copysign(t, x)


def symlog_ticks(lo: float, hi: float) -> list[float]:
    """0, ±1 and the powers of ten inside [lo, hi], thinned to at most 5."""
    cands = [0.0] + [s * 10.0 ** k for k in range(0, 16) for s in (1, -1)]
    ticks = sorted(v for v in cands if lo <= v <= hi)
    while len(ticks) > 5:
        ticks = ticks[::2]
    return ticks


class _Panel:
    def __init__(self, p: dict, x0: float, y0: float):
        self.p, self.x0, self.y0 = p, x0, y0
        self.left, self.right = x0 + LEFT, x0 + PANEL_W - RIGHT
        self.top, self.bottom = y0 + TOP, y0 + PANEL_H - BOTTOM
        edges = p["edges"]
        self.log_x = bool(p.get("log_x"))
        self.tx = symlog if self.log_x else float
        self.xlo, self.xhi = self.tx(edges[0]), self.tx(edges[-1])
        if self.xhi <= self.xlo:
            self.xhi = self.xlo + 1.0

    def x(self, v: float) -> float:
        return self.left + (self.tx(v) - self.xlo) / (self.xhi - self.xlo) * (self.right - self.left)

    def set_y(self, ymax: float) -> None:
        self.ylo, self.yhi = math.log10(0.7), math.log10(max(ymax, 1) * 2.2)

    def y(self, count: float) -> float:
        t = (math.log10(max(count, 0.7)) - self.ylo) / (self.yhi - self.ylo)
        return self.bottom - t * (self.bottom - self.top)

    def draw(self, used: dict) -> str:
        p = self.p
        edges = p["edges"]
        nbins = len(edges) - 1
        bottom = [0] * nbins
        layers = []
        for name, counts, colour in p["series"]:
            if not any(counts):
                continue
            top = [b + c for b, c in zip(bottom, counts)]
            layers.append((name, bottom, top, colour))
            bottom = top
        self.set_y(max(bottom, default=0))
        out = []
        for name, lower, upper, colour in layers:
            d = []
            for k in range(nbins):
                if upper[k] <= lower[k]:
                    continue
                xa, xb = self.x(edges[k]), self.x(edges[k + 1])
                ya, yb = self.y(lower[k]), self.y(upper[k])
                d.append(f"M{pt(xa)} {pt(ya)}H{pt(xb)}V{pt(yb)}H{pt(xa)}Z")
            if d:
                used.setdefault(name, ("box", colour))
                out.append(f'<path d="{"".join(d)}" fill="{colour}"/>')
        # axes: the left and bottom spines, ticks and labels
        out.append(f'<path d="M{pt(self.left)} {pt(self.top)}V{pt(self.bottom)}H{pt(self.right)}" fill="none" '
                   f'stroke="{AXIS}" stroke-width="0.8"/>')
        ticks, labels = [], []
        xt = symlog_ticks(edges[0], edges[-1]) if self.log_x else nice_ticks(edges[0], edges[-1])
        for v in xt:
            x = self.x(v)
            ticks.append(f"M{pt(x)} {pt(self.bottom)}v2")
            labels.append(f'<text x="{pt(x)}" y="{pt(self.bottom + 9.5)}" text-anchor="middle">{esc(compact(v))}'
                          "</text>")
        powers = list(range(0, int(math.floor(self.yhi)) + 1))
        step = math.ceil(len(powers) / 4)
        for k in powers[::step]:
            y = self.y(10 ** k)
            ticks.append(f"M{pt(self.left)} {pt(y)}h-2")
            labels.append(f'<text x="{pt(self.left - 3)}" y="{pt(y + 2.5)}" text-anchor="end">'
                          f"{esc(compact(10 ** k))}</text>")
        if ticks:
            out.append(f'<path d="{"".join(ticks)}" stroke="{AXIS}" stroke-width="0.8"/>')
        out.append('<g font-size="7" fill="#333333">' + "".join(labels) + "</g>")
        # thresholds
        for j, (v, text, style) in enumerate(p.get("lines", [])):
            colour = THRESHOLD if style == "-" else THRESHOLD_LANG
            used.setdefault("threshold" if style == "-" else "threshold of some languages", ("line", colour, style))
            x = self.x(v)
            out.append(f'<path d="M{pt(x)} {pt(self.top)}V{pt(self.bottom)}" stroke="{colour}" stroke-width="1.1"'
                       f'{DASH.get(style, "")}/>')
            right = (x - self.left) > 0.6 * (self.right - self.left)
            tx = x - 2 if right else x + 2
            out.append(f'<text x="{pt(tx)}" y="{pt(self.top + 7 + 8 * j)}" font-size="6" fill="{colour}" '
                       f'text-anchor="{"end" if right else "start"}">{esc(short(text, 18))}</text>')
        out.append(f'<text x="{pt(self.left)}" y="{pt(self.top - 4)}" font-size="7.5" font-family="monospace">'
                   f'{esc(short(p["title"], 34))}</text>')
        return "".join(out)


ORDER = ["kept", "removed by the panel's rule", "removed by other rules", "threshold", "threshold of some languages"]


def signal_grid(key: str, panels: list[dict], ncols: int = 3) -> str:
    """Small stacked histograms, one per signal, and one legend for the whole grid.

    Each panel is a dict with ``title``, ``edges``, ``series`` [(label, counts, colour)] stacked bottom-up,
    ``lines`` [(x, text, linestyle)] for thresholds, and ``log_x``. Counts are on a log scale, so a handful
    of removals next to thousands of kept documents still shows. ``key`` names the chart (a data attribute;
    the SVG has no ids)."""
    n = max(len(panels), 1)
    ncols = max(1, min(ncols, n))
    nrows = math.ceil(n / ncols)
    width, height = PANEL_W * ncols, PANEL_H * nrows + LEGEND_H
    used: dict = {}
    body = [_Panel(p, (i % ncols) * PANEL_W, LEGEND_H + (i // ncols) * PANEL_H).draw(used)
            for i, p in enumerate(panels)]
    names = sorted(used, key=lambda k: ORDER.index(k) if k in ORDER else len(ORDER))
    legend, x = [], 8.0
    for name in names:
        kind = used[name]
        if kind[0] == "box":
            legend.append(f'<rect x="{pt(x)}" y="7" width="10" height="7" fill="{kind[1]}"/>')
        else:
            legend.append(f'<path d="M{pt(x)} 10.5h12" stroke="{kind[1]}" stroke-width="1.1"{DASH.get(kind[2], "")}/>')
        legend.append(f'<text x="{pt(x + 14)}" y="13.5">{esc(name)}</text>')
        x += 14 + 4.3 * len(name) + 12
    scale = max(width, x)
    return (f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="{esc(key)}" '
            f'viewBox="0 0 {pt(scale)} {pt(height)}" style="max-width:{pt(scale * 1.3)}pt" '
            f'font-family="sans-serif" font-size="7">'
            + '<g font-size="7.5">' + "".join(legend) + "</g>" + "".join(body) + "</svg>")
