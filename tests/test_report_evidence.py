"""The report shows what decided: a real run (the CLI, in a subprocess) of hand-written English and Chinese
documents, and the page it writes: the span that made a rule fire highlighted in its example (a ``{`` and a
base64 blob far past the first 600 characters), a word-level diff of each near duplicate against the document
it duplicates, the kept documents closest to a threshold, and a removals chart on a log scale with a colour
per stage."""
import base64
import html
import json
import random
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from conftest import run_cli
from test_report import SENTENCES

EN = SENTENCES[:16]  # (the plain English prose of test_report.py)
ZH = [
    "清晨的时候，河边的小路上已经有很多人在散步了。",
    "这家面包店每天早上七点开门，面包总是热的。",
    "博物馆新开了一个展厅，介绍这个地区印刷的历史。",
    "老师让我们写一篇短文，讲一次我们想去的旅行。",
    "秋天的时候，学校会举办一次义卖，家长们都来帮忙。",
    "图书馆里收藏着两百年前手绘的地图，非常珍贵。",
    "工程师解释了新的水泵怎样保护田地不再被淹。",
    "晚上我们坐在门口，聊起了一起工作的那些年。",
    "市场上人很多，大家都在买水果、鱼和鲜花。",
    "村里的孩子们在海湾的浅水区学会了游泳。",
]

CURLY_EN = "The template engine replaces the placeholder {name} with the reader's own name in every letter."
CURLY_DROPPED = "function render() {"  # no end mark: C4 drops the line, so this brace decides nothing
CURLY_ZH = "在这个模板里，{姓名}会被换成读者自己的名字，每一封信都是这样写的。"
BLOB_ZH = base64.b64encode(random.Random(7).randbytes(330)).decode()  # 440 characters
BLOB_KEPT = base64.b64encode(random.Random(8).randbytes(60)).decode()  # 80 characters in a long kept page

MENU_LINE = "Home | News | Contact us"
POLICY_LINE = "By using this site you agree to our privacy policy and terms of service."

CONFIG = """
pipeline:
  - stage: normalize
  - stage: langid
    by_lang: {zh: {min_score: 0.2}}
  - stage: long_tokens
  - stage: c4
    only_kinds: [web]
    end_marks: '.!?"'
    min_words_per_line: 5
    min_sentences: null
    curly_bracket: true
    curly_bracket_sources: null
    unwrap_lines: true
    trim_unterminated: true
    by_lang:
      zh: {end_marks: null, min_words_per_line: 7}
  - stage: exact_dedup
  - stage: minhash_dedup
"""


def en(seed: int, n: int) -> str:
    rnd = random.Random(seed)
    return "\n".join(" ".join(rnd.sample(EN, 2)) for _ in range(n))


def zh(seed: int, n: int) -> str:
    rnd = random.Random(seed)
    return "\n".join("".join(rnd.sample(ZH, 3)) for _ in range(n))


def documents() -> list[dict]:
    docs = []
    curly = en(1, 6)
    assert len(curly) > 600
    docs.append({"id": "curly-en", "source": "web",
                 "text": f"{curly}\n{CURLY_DROPPED}\n{en(2, 1)}\n{CURLY_EN}\n{en(3, 2)}"})
    curly_zh = zh(4, 10)
    assert len(curly_zh) > 600
    docs.append({"id": "curly-zh", "source": "web", "text": f"{curly_zh}\n{CURLY_ZH}\n{zh(5, 1)}"})
    blob_zh = zh(6, 10)
    assert len(blob_zh) > 600
    docs.append({"id": "blob-zh", "source": "web", "text": f"{blob_zh}\n{BLOB_ZH}\n{zh(7, 1)}"})
    # kept: a small blob inside a sentence, far below long_tokens' share bound
    docs.append({"id": "small-blob-en", "source": "web",
                 "text": f"{en(8, 8)}\nThe key we were sent was {BLOB_KEPT} and it opened the archive.\n{en(9, 2)}"})
    # near-duplicate pairs: two words changed in English, two characters in Chinese
    base = en(10, 14)
    docs.append({"id": "pair-en-a", "source": "web", "text": base})
    changed = base.replace("bread that is still warm", "bread that is always warm", 1)
    changed = changed.replace("quiet lake", "hidden lake", 1)
    assert changed.count("always warm") == 1 and changed.count("hidden lake") == 1
    docs.append({"id": "pair-en-b", "source": "web", "text": changed})
    zbase = zh(11, 12)
    docs.append({"id": "pair-zh-a", "source": "web", "text": zbase})
    zchanged = zbase.replace("手绘的地图", "手绘的画册", 1)
    assert zchanged.count("画册") == 1
    docs.append({"id": "pair-zh-b", "source": "web", "text": zchanged})
    # many pages of lines without a terminal mark (C4 empties them) and distinct kept pages: one rule that
    # removes far more than the others
    for i in range(40):
        docs.append({"id": f"menu-{i:02d}", "source": "web",
                     "text": "\n".join(s.rstrip(".") + f" number {i}" for s in random.Random(100 + i).sample(EN, 3))})
    for i in range(6):
        docs.append({"id": f"kept-{i}", "source": "web", "text": en(200 + i, 5)})
    # kept, with two lines that C4's line cleaning removes in place
    docs.append({"id": "rewritten-en", "source": "web",
                 "text": f"{en(300, 2)}\n{MENU_LINE}\n{en(301, 1)}\n{POLICY_LINE}\n{en(302, 2)}"})
    return docs


@pytest.fixture(scope="module")
def run(tmp_path_factory) -> tuple[Path, str]:
    root = tmp_path_factory.mktemp("evidence")
    (root / "in").mkdir()
    (root / "in" / "docs.jsonl").write_text("".join(json.dumps(d, ensure_ascii=False) + "\n" for d in documents()),
                                            encoding="utf-8")
    (root / "config.yaml").write_text(CONFIG, encoding="utf-8")
    out = root / "out"
    res = run_cli("run", root / "in", "-o", out, "--config", root / "config.yaml", "--workers", "1", "--quiet")
    assert res.returncode == 0, res.stderr
    res = run_cli("report", out)
    assert res.returncode == 0, res.stderr
    return out, (out / "report.html").read_text(encoding="utf-8")


def ledger(out: Path) -> dict[str, dict]:
    return {r["id"]: r for r in pq.read_table(out / "rejected").to_pylist()}


def example_of(page: str, doc_id: str) -> str:
    """The example block of removed document ``doc_id`` in the examples section."""
    examples = page[page.index('<section id="examples">'):]
    examples = examples[:examples.index("</section>")]
    start = examples.index(f"<b>id</b> {html.escape(doc_id)} ")
    start = examples.rindex('<div class="example">', 0, start)
    end = examples.find('<div class="example">', start + 1)
    return examples[start:end if end > 0 else len(examples)]


def test_the_documents_were_removed_by_the_rules_they_were_written_for(run):
    out, _ = run
    rej = ledger(out)
    assert rej["curly-en"]["rule"] == "c4_curly_bracket" and rej["curly-en"]["value"] == 1.0
    assert rej["curly-zh"]["rule"] == "c4_curly_bracket" and rej["curly-zh"]["value"] == 1.0
    assert rej["blob-zh"]["rule"] == "encoded_blob"
    assert {r["rule"] for i, r in rej.items() if i.startswith("menu-")} == {"c4_empty"}
    assert len([i for i in rej if i.startswith("menu-")]) == 40
    kept = set(pq.read_table(out / "data", columns=["id"]).column("id").to_pylist())
    assert {"small-blob-en", "rewritten-en"} <= kept and {f"kept-{i}" for i in range(6)} <= kept
    for pair in (("pair-en-a", "pair-en-b"), ("pair-zh-a", "pair-zh-b")):
        (gone,) = [p for p in pair if p in rej]
        assert rej[gone]["rule"] == "near_duplicate" and rej[gone]["dup_of"] in pair and rej[gone]["dup_of"] != gone


def test_a_curly_bracket_past_600_characters_is_highlighted_in_its_line(run):
    out, page = run
    rej = ledger(out)
    for doc_id, line in (("curly-en", CURLY_EN), ("curly-zh", CURLY_ZH)):
        assert rej[doc_id]["text"].index("{") > 600 or doc_id == "curly-en"
        assert rej[doc_id]["text"].index(line) > 600
        block = example_of(page, doc_id)
        assert re.findall(r"<mark>(.*?)</mark>", block, re.S) == [html.escape(line)]
        assert "highlighted: the line(s) with a “{” that C4 keeps as prose (1 highlighted;" in block
    # the brace in a line C4 drops anyway is shown, not highlighted: the run's own c4 stage judged it
    block = example_of(page, "curly-en")
    assert rej["curly-en"]["text"].index(CURLY_DROPPED) > 600
    assert html.escape(CURLY_DROPPED) in block and f"<mark>{html.escape(CURLY_DROPPED)}" not in block


def test_an_encoded_blob_deep_in_a_chinese_page_is_highlighted(run):
    out, page = run
    rec = ledger(out)["blob-zh"]
    start = rec["text"].index(BLOB_ZH)
    assert start > 600
    assert rec["detail"].startswith(f"base64 blob of 440 chars (first of 1) at {start}-{start + 440}:")
    block = example_of(page, "blob-zh")
    assert re.findall(r"<mark>(.*?)</mark>", block, re.S) == [BLOB_ZH]
    assert f"first span at {start:,}–{start + 440:,})" in block
    assert "1 base64 / hex blob(s), found by long_tokens" in block
    # the window holds the Chinese text around the blob, not the document's first characters
    before = rec["text"][start - 40:start]
    assert html.escape(before) + "<mark>" in block
    assert '<pre class="doc">… ' in block and (
        f"characters {start - 300:,}–{min(len(rec['text']), start + 440 + 300):,} of {len(rec['text']):,}, ") in block


def test_a_rule_of_the_whole_document_shows_its_start_and_says_so(run):
    out, page = run
    gone = sorted(i for i in ledger(out) if i.startswith("menu-"))
    shown = [i for i in gone if f"<b>id</b> {i} " in page]
    assert shown, "no c4_empty example"
    block = example_of(page, shown[0])
    assert "<mark>" not in block
    assert ("the rule measures the whole document, not a span of it: the document&#x27;s start is shown "
            "(characters 0–") in block


def test_near_duplicates_are_diffed_word_by_word_against_their_representative(run):
    out, page = run
    rej = ledger(out)
    en_gone = "pair-en-b" if "pair-en-b" in rej else "pair-en-a"
    block = example_of(page, en_gone)
    assert f"<b>diff against dup_of</b> {rej[en_gone]['dup_of']} (kept (data/))" in block
    # the removed text against the kept one: exactly the two changed words, nothing else marked
    if en_gone == "pair-en-b":
        pairs = [("still", "always"), ("quiet", "hidden")]
    else:
        pairs = [("always", "still"), ("hidden", "quiet")]
    assert re.findall(r"<del>([^<]*)</del><ins>([^<]*)</ins>", block.split('<pre class="doc diff">')[1]) == pairs
    assert "<del>2 word(s) only in the representative</del> · <ins>2 word(s) only in this duplicate</ins>" in block
    assert "words the same …]" in block  # the long unchanged stretches are elided

    zh_gone = "pair-zh-b" if "pair-zh-b" in rej else "pair-zh-a"
    block = example_of(page, zh_gone)
    diff = block.split('<pre class="doc diff">')[1]
    # Chinese is diffed character by character: 地图 -> 画册
    expected = [("地图", "画册")] if zh_gone == "pair-zh-b" else [("画册", "地图")]
    assert re.findall(r"<del>([^<]*)</del><ins>([^<]*)</ins>", diff) == expected


def test_kept_documents_nearest_a_threshold_are_shown_with_their_span(run):
    _, page = run
    assert '<section id="near">' in page and 'href="#near"' in page
    near = page[page.index('<section id="near">'):]
    near = near[:near.index("</section>")]
    part = near[near.index("long_tokens · encoded_blob — kept with long_tokens_blob_share at most the threshold"):]
    part = part[:part.index("</details>")]
    # the only kept page with a blob is the closest (a page without any blob is near no upper bound)
    assert part.count('<div class="example near">') == 1
    assert "<b>id</b> small-blob-en " in part and "<b>threshold</b> 0.3 " in part
    assert re.findall(r"<mark>(.*?)</mark>", part, re.S) == [BLOB_KEPT]


def test_c4_line_removal_is_recorded_and_shown_before_and_after(run):
    out, page = run
    rows = pq.read_table(out / "data", columns=["id", "text", "c4_removed_lines"]).to_pylist()
    rec = {r["id"]: r for r in rows}["rewritten-en"]
    assert rec["text"] == f"{en(300, 2)}\n{en(301, 1)}\n{en(302, 2)}"
    # pass 1 recorded each removed line with the number of kept lines before it and its reason
    assert rec["c4_removed_lines"] == f"2\tno_end_mark\t{MENU_LINE}\n3\tpolicy\t{POLICY_LINE}"
    assert {r["id"]: r["c4_removed_lines"] for r in rows}["kept-0"] == ""
    rewrites = page[page.index('<section id="rewrites">'):]
    rewrites = rewrites[:rewrites.index("</section>")]
    assert "C4 line removal, before and after: the 1 kept pages that lost the most" in rewrites
    kept = en(300, 2).split("\n") + en(301, 1).split("\n") + en(302, 2).split("\n")
    expected = "\n".join([html.escape(kept[0]), html.escape(kept[1]),
                          f'<del>{html.escape(MENU_LINE)}</del> <span class="why">[no_end_mark]</span>',
                          html.escape(kept[2]),
                          f'<del>{html.escape(POLICY_LINE)}</del> <span class="why">[policy]</span>',
                          html.escape(kept[3]), html.escape(kept[4])])
    assert f'<pre class="doc diff">{expected}</pre>' in rewrites


def test_removals_chart_is_on_a_log_scale_with_a_colour_per_stage(run):
    out, page = run
    removals = page[page.index('<section id="removals">'):]
    removals = removals[:removals.index("</section>")]
    svg = removals[removals.index("<svg"):removals.index("</svg>")]
    assert "documents removed (log scale)" in svg
    ticks = re.findall(r">(\d+)</text>", svg)
    assert "1" in ticks and "10" in ticks  # powers of ten: 40 removals beside 1 (a linear axis: 0, 10, 20...)
    assert "20" not in ticks and "30" not in ticks
    # one bar colour per stage that removed something (long_tokens, c4, minhash_dedup), each different
    from dataclean.report import charts
    from dataclean.report.sections import Run, stage_colour

    fills = set(re.findall(r"fill: (#[0-9a-f]{6})", svg)) & set(charts.STAGE_PALETTE)
    funnel = pq.read_table(out / "stats" / "funnel.parquet").to_pylist()
    stages = [r["stage"] for r in sorted((r for r in funnel if r["source"] == "(all)"), key=lambda r: r["step"])]
    r = Run(str(out), None, None, None, stages=stages)
    assert fills == {stage_colour(r, s) for s in ("long_tokens", "c4", "minhash_dedup")} and len(fills) == 3
    # ... and no two of 20 stages share a colour
    many = Run(str(out), None, None, None, stages=[f"stage{i}" for i in range(20)])
    assert len({stage_colour(many, f"stage{i}") for i in range(20)}) == 20 == len(charts.STAGE_PALETTE)


def test_the_evidence_page_in_headless_chromium(run):
    """The highlights, the diff and the near section render in a real browser, with nothing run or loaded."""
    from test_report import chromium_path

    binary = chromium_path()
    if binary is None:
        pytest.skip("no Chromium binary found (apt-get install chromium, or set DATACLEAN_CHROMIUM)")
    from playwright import sync_api

    out, _ = run
    url = (out / "report.html").resolve().as_uri()
    requests = []
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=binary, args=["--no-sandbox"])
        try:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("request", lambda r: requests.append(r.url))
            page.goto(url, wait_until="load")
            page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
            state = page.evaluate("""() => ({
                marks: [...document.querySelectorAll('pre.doc mark')].map(m => m.textContent),
                markBg: getComputedStyle(document.querySelector('pre.doc mark')).backgroundColor,
                ins: [...document.querySelectorAll('pre.diff ins')].map(m => m.textContent),
                dels: [...document.querySelectorAll('pre.diff del')].map(m => m.textContent),
                markHeight: document.querySelector('pre.doc mark').getBoundingClientRect().height,
                scripts: document.querySelectorAll('script').length,
            })""")
        finally:
            browser.close()
    assert CURLY_EN in state["marks"] and CURLY_ZH in state["marks"] and BLOB_ZH in state["marks"]
    assert state["markBg"] == "rgb(255, 224, 138)" and state["markHeight"] > 5
    assert "画册" in state["ins"] + state["dels"] and "地图" in state["ins"] + state["dels"]
    assert state["scripts"] == 0 and requests == [url]


@pytest.mark.parametrize("mode", ["token", "hash"])
def test_pii_masks_of_kept_documents_are_highlighted_and_the_values_never_shown(tmp_path, mode):
    """Rewrites show the kept documents with the most masked characters, their mask tokens in <mark> (the
    hash mode's ``<EMAIL:hex>`` too); the address the mask replaced appears nowhere in the page."""
    import json
    en = " ".join(SENTENCES[:8]) + " For questions, write to anna.berg@example.org before Friday. " + \
        " ".join(SENTENCES[8:16])
    zh = ("图书馆将在下个月延长开放时间，方便学生在考试期间复习。读者如有任何问题，可以发送邮件到 service@library.cn "
          "联系工作人员，我们会尽快回复。图书馆还计划增加新的书架和阅读座位，让更多的读者可以在安静的环境里学习和阅读。"
          "每个周末还会举办读书分享会，欢迎大家参加。")
    src = tmp_path / "in.jsonl"
    src.write_text("".join(json.dumps({"id": i, "text": t}, ensure_ascii=False) + "\n"
                           for i, t in (("en-mail", en), ("zh-mail", zh))), encoding="utf-8")
    out = tmp_path / "out"
    res = run_cli("run", src, "-o", out, "--quiet", "--set", f"pii.mode={mode}")
    assert res.returncode == 0, res.stderr
    html = (out / "report.html").read_text(encoding="utf-8")
    start = html.index("<h3>PII masks: the 2 kept documents with the most masked characters</h3>")
    block = html[start:html.index("</section>", start)]
    tag = r"&lt;EMAIL&gt;" if mode == "token" else r"&lt;EMAIL:[0-9a-f]+&gt;"
    assert len(re.findall(rf"<mark>{tag}</mark>", block)) == 2
    assert "发送邮件到 <mark>" in block and "write to <mark>" in block
    assert "anna.berg" not in html and "service@library" not in html
    assert block.count("<b>pii_email</b> 1") == 2
