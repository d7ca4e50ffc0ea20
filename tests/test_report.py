"""report.html: a real run of a small corpus with hostile documents planted in it, the page's sections and
charts, escaping, no external reference, and (when Chromium is installed) the page in a real headless browser:
charts render, nothing leaves the page, no planted script runs."""
import json
import os
import random
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import SAMPLE, run_cli

SECTIONS = ("run", "funnel", "removals", "sources", "signals", "quality", "dedup", "examples")

SENTENCES = [
    "The river rose slowly after three days of steady rain in the northern hills.",
    "Farmers in the valley moved their animals to higher ground before the water arrived.",
    "A small bakery on the corner sells bread that is still warm at seven in the morning.",
    "The museum opened a new wing that shows the history of printing in the region.",
    "Most of the students walked to school because the bus route had been changed.",
    "Our neighbour has grown tomatoes and beans in the same garden for twenty years.",
    "The old bridge was closed for repairs, so traffic went through the centre of town.",
    "She wrote a long letter to her brother, who had moved to a city across the sea.",
    "The library keeps a collection of maps that were drawn by hand two centuries ago.",
    "After the concert, the musicians thanked the volunteers who had set up the chairs.",
    "The council voted to plant more trees along the main street next spring.",
    "A group of hikers found a quiet lake that does not appear on the usual trail maps.",
    "The recipe calls for fresh herbs, a little butter and a pinch of salt at the end.",
    "Children from the village learned to swim in the shallow part of the bay.",
    "The engineer explained how the new pump would keep the fields from flooding again.",
    "Every autumn the school holds a fair where families sell books, cakes and toys.",
    "The train was late, but the passengers were patient and read their newspapers.",
    "He repaired the roof of the barn with boards that he had saved from an old fence.",
    "The doctor reminded everyone to drink water and rest during the hot afternoons.",
    "A local artist painted a mural of the harbour on the wall of the post office.",
    "The weather service warned that strong winds could arrive late in the evening.",
    "Our teacher asked us to write a short story about a journey we would like to take.",
    "The market was busy with people buying fruit, fish and flowers for the weekend.",
    "They spent the evening on the porch, talking about the years they had worked together.",
]

SCRIPT_REMOVED = "<script>document.title='PWNED-removed';window.__pwned=1</script>"
SCRIPT_KEPT = "<script>document.title='PWNED-kept';window.__pwned=5</script>"
IMG = "<img src=x onerror=\"window.__pwned=2\">"
HOSTILE_SOURCE = "<img src=x onerror=window.__pwned=6>"
HOSTILE_ID = "\"><script>window.__pwned=3</script>"


def prose(i: int, n: int = 9) -> str:
    picked = random.Random(i).sample(SENTENCES, n)
    return "\n\n".join(" ".join(picked[j:j + 3]) for j in range(0, n, 3))


def corpus_lines() -> list[str]:
    recs = [{"id": f"doc-{i:02d}", "text": prose(i), "source": "web", "url": f"https://example.org/{i}"}
            for i in range(16)]
    # planted and removed (too short for gopher_quality): hostile text, id, url and meta
    recs.append({"id": HOSTILE_ID, "source": "web", "url": "javascript:window.__pwned=4",
                 "note": "<script>window.__pwned=7</script>",
                 "text": f"{SCRIPT_REMOVED} {IMG} <a href=\"javascript:alert(1)\">click</a> </pre></details><b>broken"})
    # planted and kept: a long clean page that carries the script tag inside a sentence; its near-duplicate
    # (one sentence shorter) is removed, so the kept one is shown as the cluster's representative
    body = prose(40, 12)
    hostile = f"Someone pasted {SCRIPT_KEPT} and {IMG} into the comment form of the page yesterday."
    recs.append({"id": "kept-hostile", "source": "web", "text": f"{hostile}\n\n{body}"})
    recs.append({"id": "kept-hostile-copy", "source": "web", "text": f"{hostile}\n\n{body.rsplit(' ', 14)[0]}."})
    # a kept document whose source name is markup (sources are table rows and chart labels)
    recs.append({"id": "odd-source", "source": HOSTILE_SOURCE, "text": prose(99)})
    # mathtext and control characters in a source name (a chart label) and in a removed text
    recs.append({"id": "dollar-source", "source": "price $x^{2}$ \\ $", "text": prose(98)})
    recs.append({"id": "controls", "source": "web", "text": "nul \u0000 bell \u0007 esc \u001b too short"})
    lines = [json.dumps(r, ensure_ascii=False) for r in recs]
    lines.insert(5, '{"id": "bad<script>window.__pwned=8</script>", "text": ')  # a record that does not parse
    return lines


@pytest.fixture(scope="module")
def run_out(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("report")
    (root / "in").mkdir()
    (root / "in" / "planted.jsonl").write_text("\n".join(corpus_lines()) + "\n", encoding="utf-8")
    out = root / "out"
    res = run_cli("run", root / "in", "-o", out, "--workers", "1", "--quiet")
    assert res.returncode in (0, 1), res.stderr
    return out


@pytest.fixture(scope="module")
def report(run_out) -> tuple[Path, str]:
    res = run_cli("report", run_out)
    assert res.returncode == 0, res.stderr
    path = run_out / "report.html"
    assert res.stdout.strip() == f"report: {path}"
    return path, path.read_text(encoding="utf-8")


class Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[tuple[str, dict]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


def parse(html: str) -> list[tuple[str, dict]]:
    p = Tags()
    p.feed(html)
    return p.tags


def test_the_planted_documents_were_removed_and_kept(run_out):
    rejected = pq.read_table(run_out / "rejected").to_pylist()
    kept_ids = set(pq.read_table(run_out / "data", columns=["id"]).column("id").to_pylist())
    by_id = {r["id"]: r for r in rejected}
    assert HOSTILE_ID in by_id and SCRIPT_REMOVED in by_id[HOSTILE_ID]["text"]
    assert "odd-source" in kept_ids
    pair = {"kept-hostile", "kept-hostile-copy"}
    assert len(pair & kept_ids) == 1, "one of the near-duplicate pair is kept"
    (gone,) = pair - kept_ids
    assert by_id[gone]["rule"] == "near_duplicate"
    assert any(r["reason"] == "bad_record" for r in rejected)


def test_every_section_and_chart_is_there(report):
    _, html = report
    for anchor in SECTIONS:
        assert f'<section id="{anchor}">' in html, anchor
        assert f'href="#{anchor}"' in html
    assert 'class="section-error"' not in html
    assert html.count("<svg") >= 8
    assert not re.search(r"<\?xml|<!DOCTYPE svg", html)
    tags = parse(html)
    svgs = [a for t, a in tags if t == "svg"]
    assert all(a.get("class") == "chart" for a in svgs)
    # chart ids are unique in the page (each chart salts its own)
    ids = [a["id"] for _, a in tags if "id" in a]
    assert len(ids) == len(set(ids))
    # the removals table, the rules and a threshold of the run's config
    assert "gopher_short_doc" in html and "near_duplicate" in html
    assert "gopher_short_doc: removed below 50" in html
    assert "(ja, zh: 0.25)" in html  # a per-language threshold (gopher_top_2gram)
    # examples carry the deciding value and threshold
    assert "<b>value</b>" in html and "<b>threshold</b>" in html


def test_all_data_is_escaped(report):
    _, html = report
    tags = parse(html)
    names = {t for t, _ in tags}
    assert not names & {"script", "img", "iframe", "object", "embed", "form", "base", "link", "meta"} - {"meta"}
    assert all(a.get("href", "#").startswith("#") for t, a in tags if t == "a")
    assert not [a for t, a in tags if any(k.startswith("on") for k in a)], "an event handler attribute"
    for hostile in (SCRIPT_REMOVED, SCRIPT_KEPT, IMG, HOSTILE_SOURCE, HOSTILE_ID, "</pre></details><b>broken"):
        assert hostile not in html
    # ... and they are shown as text
    import html as h
    assert h.escape(SCRIPT_REMOVED) in html  # removed document, in the examples
    assert h.escape(SCRIPT_KEPT) in html  # kept representative, in the dedup section
    assert h.escape(HOSTILE_SOURCE) in html  # a source name, in the tables
    assert h.escape(HOSTILE_ID) in html
    assert h.escape("javascript:window.__pwned=4") in html  # a url is text, never a link
    assert h.escape("window.__pwned=8") in html  # the raw bytes of the bad record


def test_nothing_external(report):
    _, html = report
    assert re.search(r'<meta http-equiv="Content-Security-Policy" content="default-src &#x27;none&#x27;; '
                     r"style-src &#x27;unsafe-inline&#x27;; img-src data:", html)
    for tag, attrs in parse(html):
        for key, value in attrs.items():
            if key in ("src", "href", "xlink:href", "action", "data", "poster", "srcset"):
                assert value.startswith("#"), (tag, key, value)
            if key.startswith("xmlns"):
                continue
            assert not re.search(r"(https?:|//|url\((?!#))", value or "", re.I) or key == "content", (tag, key, value)
    assert "@import" not in html and "@font-face" not in html


def test_report_is_deterministic_and_written_atomically(run_out, report, tmp_path):
    from dataclean.report import write_report

    path, html = report
    other = tmp_path / "sub" / "again.html"
    assert write_report(str(run_out), str(other)) == str(other)
    assert other.read_text(encoding="utf-8") == html
    assert not [p for p in os.listdir(other.parent) if p != "again.html"], "no temporary file left"


MIXTURE_SCHEMA = pa.schema([
    ("source", pa.string()), ("target_weight", pa.float64()), ("target_tokens", pa.int64()),
    ("available_tokens", pa.int64()), ("available_docs", pa.int64()), ("max_epochs", pa.int64()),
    ("epochs_used", pa.float64()), ("selected_docs", pa.int64()), ("output_docs", pa.int64()),
    ("achieved_tokens", pa.int64()), ("achieved_weight", pa.float64()), ("select", pa.string()),
    ("warning", pa.string())])


def test_mixture_section_and_missing_parts(run_out, report, tmp_path):
    """A copy of the run with a stats/mixture.parquet (the lead's schema) added, and dedup/ and manifest.json
    taken away: the mixture section appears, the rest degrades to notes, nothing breaks."""
    from dataclean.report import ReportError, render_report

    assert '<section id="mixture">' not in report[1]  # the run had no mixture
    out = tmp_path / "mix"
    shutil.copytree(run_out, out, ignore=shutil.ignore_patterns("report.html", "dedup", "manifest.json"))
    pq.write_table(pa.table({
        "source": ["web", "<b>books</b>"], "target_weight": [0.7, 0.3], "target_tokens": [7000, 3000],
        "available_tokens": [20000, 1000], "available_docs": [200, 10], "max_epochs": [1, 2],
        "epochs_used": [0.35, 2.0], "selected_docs": [70, 20], "output_docs": [70, 20],
        "achieved_tokens": [7000, 2000], "achieved_weight": [0.778, 0.222], "select": ["random", "quality"],
        "warning": [None, "<script>window.__pwned=9</script> short of its target by 1000 tokens"]},
        schema=MIXTURE_SCHEMA), out / "stats" / "mixture.parquet")
    html = render_report(str(out))
    assert 'class="section-error"' not in html
    mixture = html[html.index('<section id="mixture">'):]
    mixture = mixture[:mixture.index("</section>")]
    assert mixture.count("<svg") == 1
    assert "0.778" in mixture and "7,000" in mixture and "&lt;b&gt;books&lt;/b&gt;" in mixture
    assert '<td class="warn">&lt;script&gt;window.__pwned=9&lt;/script&gt; short of its target' in mixture
    assert "<script" not in html
    assert "manifest.json is missing" in html and "no thresholds are marked" in html
    assert "No near-duplicate clusters" in html
    with pytest.raises(ReportError):
        render_report(str(tmp_path))
    res = run_cli("report", tmp_path)
    assert res.returncode == 2 and "no stats/summary.json" in res.stderr


def test_a_failing_section_does_not_cost_the_page(run_out, monkeypatch):
    from dataclean.report import render_report, sections

    monkeypatch.setattr(sections, "quality_section", lambda run: 1 / 0)
    html = render_report(str(run_out))
    assert '<pre class="section-error">' in html and "ZeroDivisionError" in html
    assert '<section id="examples">' in html and '<section id="dedup">' in html


# -- a real browser ----------------------------------------------------------------------------------------------
def chromium_path() -> str | None:
    for name in (os.environ.get("DATACLEAN_CHROMIUM"), "chromium", "chromium-browser", "google-chrome",
                 "google-chrome-stable"):
        if name:
            found = shutil.which(name) or (name if os.path.isfile(name) else None)
            if found:
                return found
    return None


def test_report_in_headless_chromium(report):
    binary = chromium_path()
    if binary is None:
        pytest.skip("no Chromium binary found (apt-get install chromium, or set DATACLEAN_CHROMIUM)")
    from playwright import sync_api  # in the test extra: a missing package fails here, it does not skip
    path, _ = report
    url = path.resolve().as_uri()
    requests, console = [], []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=binary, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("request", lambda r: requests.append(r.url))
            page.on("console", lambda m: console.append(m.text))
            page.goto(url, wait_until="load")
            page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
            page.wait_for_timeout(200)
            state = page.evaluate("""() => ({
                title: document.title,
                pwned: typeof window.__pwned,
                scripts: document.querySelectorAll('script').length,
                imgs: document.querySelectorAll('img, iframe, object, embed').length,
                handlers: [...document.querySelectorAll('*')].filter(
                    e => [...e.attributes].some(a => a.name.startsWith('on'))).length,
                svgs: [...document.querySelectorAll('svg.chart')].map(s => {
                    const r = s.getBoundingClientRect(); return [r.width, r.height, s.querySelectorAll('path, rect, circle').length];
                }),
                text: document.body.textContent,
            })""")
        finally:
            browser.close()
    assert state["title"] == "dataclean report"
    assert state["pwned"] == "undefined"
    assert state["scripts"] == 0 and state["imgs"] == 0 and state["handlers"] == 0
    assert len(state["svgs"]) >= 8
    for width, height, paths in state["svgs"]:
        assert width > 100 and height > 50 and paths > 3
    assert SCRIPT_REMOVED in state["text"] and SCRIPT_KEPT in state["text"] and HOSTILE_SOURCE in state["text"]
    assert requests == [url], f"requests other than the page itself: {requests}"
    assert not [m for m in console if "Content Security Policy" in m], console


def test_sample_data_report_covers_every_rule_stage_and_is_rewritten_identically(sample_run, tmp_path):
    """The report a real default run wrote: a section per page part, a histogram panel per rule stage of the
    default pipeline, and `dataclean report` on the same folder gives the same bytes."""
    page = (sample_run / "report.html").read_text(encoding="utf-8")
    for section in ("run", "funnel", "removals", "sources", "signals", "quality", "dedup", "examples"):
        assert f'id="{section}"' in page
    # (c4's rules are flags now that its sentence minimum is off: no threshold to draw)
    for stage in ("langid", "garbled", "repetition_runs", "long_tokens", "gopher_quality", "gopher_repetition",
                  "fineweb_quality", "seo_spam", "word_lists"):
        assert f"<h3>{stage}" in page
    again = tmp_path / "again.html"
    assert run_cli("report", sample_run, "-o", again).returncode == 0
    assert again.read_bytes() == (sample_run / "report.html").read_bytes()


def test_a_run_whose_report_cannot_be_imported_keeps_its_data_and_says_how_to_make_the_report(tmp_path):
    # a broken install (a module only the report imports is missing): the run finishes and verifies,
    # report.html is a one-line warning
    out = tmp_path / "out"
    code = "\n".join([
        "import sys",
        "sys.modules['dataclean.report.sections'] = None",
        "import dataclean",
        f"s = dataclean.run([{str(SAMPLE / 'web-en.parquet')!r}], {str(out)!r})",
        "print(s.verified, s.kept + s.removed)",
    ])
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split()[0] == "True"
    warning = [line for line in res.stderr.splitlines() if line.startswith("warning: no report.html")]
    assert warning == [f"warning: no report.html: import of dataclean.report.sections halted; None in sys.modules "
                       f"(install it, then run `dataclean report {out}`)"]
    assert not (out / "report.html").exists() and (out / "_work" / "markers" / "final.json").exists()
