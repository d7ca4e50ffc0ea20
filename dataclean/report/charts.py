"""Charts of the report: matplotlib (no pyplot, so no GUI backend and no global figure state) drawn to SVG
that is inlined in the page.

Text stays text (``svg.fonttype: none``: small, selectable, no embedded glyph paths) and every id in a chart
is derived from a salt unique to that chart (``svg.hashsalt``), so two charts in one page never share an id
and the same data gives the same bytes. Labels that come from the data pass through :func:`label`, which
turns off mathtext (``$``) and shortens them; matplotlib escapes the SVG text itself.
"""
from __future__ import annotations

import io
import math
import re

import matplotlib
from matplotlib import ticker
from matplotlib.figure import Figure

from dataclean.report.page import clean

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

RC = {
    "svg.fonttype": "none",
    "font.size": 8,
    "font.family": "sans-serif",
    "axes.spines.top": False,
    "axes.spines.right": False,
    "axes.titlesize": 9,
    "axes.labelsize": 8,
    "legend.fontsize": 7,
    "legend.frameon": False,
    "xtick.labelsize": 7,
    "ytick.labelsize": 7,
    "axes.grid": True,
    "grid.color": "#e6e6e6",
    "grid.linewidth": 0.6,
    "axes.axisbelow": True,
}


def label(value, width: int = 40) -> str:
    """A data value as a safe chart label: no mathtext, at most ``width`` characters."""
    s = clean(value)
    if len(s) > width:
        s = s[: width - 1] + "…"
    return s.replace("\\", "\\\\").replace("$", r"\$")


_PROLOG = re.compile(r"\A.*?(?=<svg\b)", re.S)
_METADATA = re.compile(r"\s*<metadata>.*?</metadata>", re.S)
_GROUP_ID = re.compile(r'<g id="[^"]*"')  # figure_1, axes_1...: the same in every chart, referenced by nothing
# coordinates to 0.1 pt (charts are shown at about their natural size); only in geometry attributes, never in
# text content
_COORDS = re.compile(r'\b(d|x|y|x1|x2|y1|y2|width|height|transform|points)="([^"]*)"')
_DECIMALS = re.compile(r"(\d\.\d)\d+")
_BETWEEN_TAGS = re.compile(r">\s+<")
_FONT_LIST = re.compile(r"font-family: [^;\"]*sans-serif")
_SIZE = re.compile(r'<svg([^>]*?) width="([\d.]+)pt" height="([\d.]+)pt"')


def to_svg(fig: Figure, key: str) -> str:
    """The figure as an inline ``<svg>`` element (no XML prolog, no metadata), scaling to its container up
    to its natural width. ``key`` salts the ids, so it must be unique within a page."""
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.hashsalt": f"dc-{key}", "svg.fonttype": "none", "svg.id": None}):
        fig.savefig(buf, format="svg", metadata={"Date": None, "Creator": None, "Format": None, "Type": None})
    svg = _METADATA.sub("", _PROLOG.sub("", buf.getvalue(), count=1), count=1)
    svg = _GROUP_ID.sub("<g", svg)
    svg = _COORDS.sub(lambda m: m.group(1) + '="' + _DECIMALS.sub(r"\1", m.group(2)) + '"', svg)
    svg = _BETWEEN_TAGS.sub("><", svg)
    svg = _FONT_LIST.sub("font-family: sans-serif", svg)
    svg = _SIZE.sub(lambda m: f'<svg{m.group(1)} class="chart" style="max-width:{float(m.group(2)) * 1.3:.0f}pt"',
                    svg, count=1)
    return svg.strip()


def _figure(width: float, height: float, layout: str | None = None) -> Figure:
    with matplotlib.rc_context(RC):
        fig = Figure(figsize=(width, height), layout=layout)
    return fig


def compact(v: float, _pos=None) -> str:
    """Tick label without mathtext (which is slow and renders as many pieces): 0.05, 3, 200, 1.5k, 20M."""
    a = abs(v)
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            return f"{v / div:g}{suffix}"
    return f"{v:g}"


def _log_axis(axis) -> None:
    """Log ticks at powers of ten only, labelled plainly."""
    axis.set_major_locator(ticker.LogLocator(base=10, numticks=4))
    axis.set_minor_locator(ticker.NullLocator())
    axis.set_major_formatter(ticker.FuncFormatter(compact))


def _draw(fn):
    """Run a drawing function under the report's rc settings (they apply when artists are created)."""
    def wrapper(*args, **kwargs):
        with matplotlib.rc_context(RC):
            return fn(*args, **kwargs)
    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


@_draw
def hbars(key: str, labels: list[str], values: list[float], colours: list[str], xlabel: str,
          legend: list[tuple[str, str]] | None = None, log_x: bool = False) -> str:
    """Horizontal bars, first label on top, each value printed at its bar's end."""
    n = max(len(labels), 1)
    fig = _figure(7.5, 0.6 + 0.2 * n, layout="constrained")
    ax = fig.add_subplot()
    ys = list(range(n))[::-1][: len(labels)]
    if log_x:  # bars start at 0.5 so that a rule that removed one document still has a bar
        ax.barh(ys, [max(v, 0) - 0.5 for v in values], left=0.5, color=colours, height=0.7)
    else:
        ax.barh(ys, values, color=colours, height=0.7)
    ax.set_yticks(ys, [label(s, 60) for s in labels])
    for y, v in zip(ys, values):
        ax.annotate(f"{v:,.0f}" if float(v).is_integer() else f"{v:,.3g}", (v, y), xytext=(3, 0),
                    textcoords="offset points", va="center", fontsize=6.5)
    if log_x:
        ax.set_xscale("log")
        ax.set_xlim(0.5, max([*values, 1]) * 3)
        _log_axis(ax.xaxis)
    ax.set_xlabel(xlabel)
    ax.grid(axis="y", visible=False)
    ax.margins(x=0.08)
    if legend:
        from matplotlib.patches import Patch
        ax.legend(handles=[Patch(color=c, label=label(t)) for t, c in legend], loc="lower right")
    return to_svg(fig, key)


@_draw
def funnel(key: str, stages: list[str], series: list[tuple[str, list[float]]], ylabel: str,
           title: str = "") -> str:
    """Lines of what remains after each stage (in % of the input), one per series."""
    fig = _figure(7.5, 2.9, layout="constrained")
    ax = fig.add_subplot()
    xs = list(range(len(stages)))
    for i, (name, values) in enumerate(series):
        ax.plot(xs, values, marker="o", markersize=3, linewidth=1.4, color=PALETTE[i % len(PALETTE)],
                linestyle=LINE_STYLES[(i // len(PALETTE)) % len(LINE_STYLES)], label=label(name))
    ax.set_xticks(xs, [label(s, 24) for s in stages], rotation=35, ha="right")
    ax.set_ylabel(ylabel)
    lo = min((v for _, vals in series for v in vals), default=0)
    ax.set_ylim(max(0, math.floor(lo / 10) * 10 - 5), 102)
    if title:
        ax.set_title(label(title, 80))
    ax.legend(loc="lower left", ncols=min(len(series), 4))
    return to_svg(fig, key)


@_draw
def grouped_bars(key: str, categories: list[str], series: list[tuple[str, list[float], str]], ylabel: str,
                 log_y: bool = False) -> str:
    """Bars side by side per category (for example target vs achieved weight per source)."""
    n = max(len(categories), 1)
    fig = _figure(min(7.5, max(3.6, 2.2 + 0.55 * n * len(series))), 2.6, layout="constrained")
    ax = fig.add_subplot()
    width = 0.8 / max(len(series), 1)
    for i, (name, values, colour) in enumerate(series):
        xs = [c + (i - (len(series) - 1) / 2) * width for c in range(len(categories))]
        ax.bar(xs, values, width=width, color=colour, label=label(name))
    ax.set_xticks(range(len(categories)), [label(c, 20) for c in categories],
                  rotation=30 if len(categories) > 6 else 0, ha="right" if len(categories) > 6 else "center")
    if len(categories) < 4:
        pad = (4 - len(categories)) / 2
        ax.set_xlim(-0.5 - pad, len(categories) - 0.5 + pad)
    if log_y:
        ax.set_yscale("log")
        _log_axis(ax.yaxis)
    else:
        ax.yaxis.set_major_locator(ticker.MaxNLocator(6, integer=True))
    ax.set_ylabel(ylabel)
    ax.grid(axis="x", visible=False)
    ax.legend()
    return to_svg(fig, key)


@_draw
def small_histograms(key: str, panels: list[tuple[str, list[float], list[tuple[str, list[int], str]],
                                                  list[tuple[float, str]]]], xlabel: str, ncols: int = 3) -> str:
    """One small stacked histogram per panel (title, edges, series, cut-off lines), on a shared x axis."""
    n = max(len(panels), 1)
    ncols = min(ncols, n)
    nrows = math.ceil(n / ncols)
    width, height = 2.55 * ncols, 1.75 * nrows + 0.75
    fig = _figure(width, height)
    fig.subplots_adjust(left=0.4 / width, right=1 - 0.1 / width, bottom=0.4 / height, top=1 - 0.45 / height,
                        wspace=0.3, hspace=0.45)
    axes = fig.subplots(nrows, ncols, squeeze=False, sharex=True)
    handles: dict = {}
    for i, (title, edges, series, lines) in enumerate(panels):
        ax = axes[i // ncols][i % ncols]
        bottom = [0] * (len(edges) - 1)
        for name, counts, colour in series:
            if not any(counts):
                continue
            top = [b + c for b, c in zip(bottom, counts)]
            ax.stairs(top, edges, baseline=bottom, fill=True, color=colour, label=label(name), linewidth=0)
            bottom = top
        for x, name in lines:
            ax.axvline(x, color="#222222", linestyle="--", linewidth=1, label=label(name, 30))
        ax.set_title(label(title, 30))
        ax.set_xlim(edges[0], edges[-1])
        ax.yaxis.set_major_locator(ticker.MaxNLocator(4, integer=True))
        if i + ncols >= len(panels):
            ax.set_xlabel(xlabel)
            ax.tick_params(labelbottom=True)
        for h, lab in zip(*ax.get_legend_handles_labels()):
            handles.setdefault(lab, h)
    for j in range(len(panels), nrows * ncols):
        axes[j // ncols][j % ncols].set_visible(False)
    if handles:
        fig.legend(list(handles.values()), list(handles), loc="upper right", ncols=len(handles))
    return to_svg(fig, key)
