"""The report's signal histograms, written as SVG without matplotlib: exact ticks, scales and escaping."""
import re

from dataclean.report import svggrid


def test_nice_ticks_are_round_and_inside():
    assert svggrid.nice_ticks(0, 1) == [0.0, 0.25, 0.5, 0.75, 1.0]
    assert svggrid.nice_ticks(-0.02, 0.51) == [0.0, 0.2, 0.4]
    assert svggrid.nice_ticks(3, 3) == [3]


def test_symlog_matches_matplotlib_with_linthresh_one():
    assert [svggrid.symlog(v) for v in (0, 0.5, 1, 10, 1000, -100)] == [0, 0.5, 1, 2, 4, -3]
    assert svggrid.symlog_ticks(0, 1e5) == [0.0, 10.0, 1000.0, 100000.0]


def test_grid_draws_stacked_layers_thresholds_and_escapes_titles():
    panel = {"title": "<b>gopher_word_count</b>", "edges": [0, 10, 20, 30],
             "series": [("kept", [0, 5, 100], "#4c78a8"), ("removed by the panel's rule", [7, 0, 0], "#e45756")],
             "lines": [(10, "50 & up", "-"), (25, "zh 3", "--")], "log_x": False}
    svg = svggrid.signal_grid("k", [panel, dict(panel, title="second")], ncols=2)
    assert svg.startswith('<svg xmlns="http://www.w3.org/2000/svg" class="chart" data-chart="k" viewBox="0 0 400.1 162"')
    assert "&lt;b&gt;gopher_word_count&lt;/b&gt;" in svg and "<b>" not in svg
    assert "50 &amp; up" in svg and 'stroke-dasharray="4 2"' in svg
    # two panels x (kept, removed, spine, ticks, two thresholds) paths + two legend lines
    assert svg.count("<path") == 2 * 6 + 2
    # the kept layer has two bars (bins 1 and 2), the removed layer one: one path each, a rectangle per bin
    kept = re.findall(r'<path d="([^"]*)" fill="#4c78a8"/>', svg)[0]
    assert kept.count("Z") == 2
    # legend in a fixed order, each name once (wider than two panels here, so it sets the width)
    legend = re.findall(r'<text x="[\d.]+" y="13.5">([^<]*)</text>', svg)
    assert legend == ["kept", "removed by the panel&#x27;s rule", "threshold", "threshold of some languages"]
    assert svg == svggrid.signal_grid("k", [panel, dict(panel, title="second")], ncols=2)


def test_log_counts_put_one_document_above_the_floor():
    panel = {"title": "t", "edges": [0, 1, 2], "series": [("kept", [1, 1000], "#000000")], "lines": []}
    p = svggrid._Panel(panel, 0, 0)
    p.set_y(1000)
    assert p.y(0) == p.bottom  # zero sits at the 0.7 floor
    assert p.top < p.y(1000) < p.y(1) < p.bottom
