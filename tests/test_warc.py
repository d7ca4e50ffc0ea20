"""Crawl input: the WARC/WET reader, charset detection, the extract and url_filter stages, and `dataclean run` on
WARC files with `--config crawl`.

Fixtures: ``tests/data/warc/`` holds warcio 1.6.3's test WARC files (Apache-2.0, real captures of example.com,
iana.org and httpbin.org; ``example-cut.warc.gz`` is ``example.warc.gz`` cut at byte 2500), and one Chinese
Wikipedia paragraph (CC-BY-SA-4.0, CMRC 2018) that the charset tests encode as GBK, GB18030 and Big5.
``sample_data/_crawl/python-tutorial.warc.gz`` holds the 17 pages of the Python 3.11 tutorial (PSF-2.0).
"""
from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

from dataclean.io.charset import decode_html
from dataclean.io.readers import discover_inputs, read_shard
from dataclean.stages.extract import Extract
from dataclean.stages.url_filter import UrlFilter
from dataclean.text.html_extract import Extractor, math_as_tex

DATA = Path(__file__).parent / "data" / "warc"
ROOT = Path(__file__).parent.parent
SAMPLE = ROOT / "sample_data" / "_crawl" / "python-tutorial.warc.gz"
ZH = (DATA / "zh-wiki-cmrc-529.txt").read_text(encoding="utf-8").strip()

EXAMPLE_TEXT = ("This domain is established to be used for illustrative examples in documents. You may use this "
                "domain in examples without prior coordination or asking for permission.\nMore information...")


def read_all(path, batch_rows=4096):
    docs, bad, skipped, n = [], [], {}, 0
    for chunk in read_shard(str(path), 0, batch_rows=batch_rows):
        docs += chunk.docs.to_pylist()
        bad += chunk.bad.to_pylist() if chunk.bad is not None else []
        n += chunk.n_records
        for k, v in chunk.skipped.items():
            skipped[k] = skipped.get(k, 0) + v
    return docs, bad, skipped, n


def write_warc(path, pages, gzip=True):
    """pages: (url, payload bytes, HTTP Content-Type or None, status)."""
    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=gzip)
        for i, (url, payload, ctype, status) in enumerate(pages):
            headers = [("Content-Length", str(len(payload)))] + ([("Content-Type", ctype)] if ctype else [])
            http = StatusAndHeaders(f"{status} OK", headers, protocol="HTTP/1.1")
            rec = w.create_warc_record(url, "response", payload=io.BytesIO(payload), http_headers=http,
                                       warc_headers_dict={"WARC-Record-ID": f"<urn:uuid:00000000-0000-0000-0000-{i:012d}>",
                                                          "WARC-Date": "2024-05-01T10:00:00Z"})
            w.write_record(rec)


def zh_page(charset_meta: str | None) -> str:
    meta = f'<meta charset="{charset_meta}">' if charset_meta else ""
    return (f"<html><head>{meta}<title>郝德泉</title></head><body><article><h1>郝德泉</h1><p>{ZH}</p>"
            "</article></body></html>")


# -- the reader -----------------------------------------------------------------------------------------------

def test_reader_takes_the_response_and_counts_the_rest():
    docs, bad, skipped, n = read_all(DATA / "example.warc.gz")
    assert n == 1 and bad == []
    assert skipped == {"warcinfo": 2, "request": 2, "revisit": 1}
    (doc,) = docs
    assert doc["id"] == "<urn:uuid:a9c51e3e-0221-11e7-bf66-0242ac120005>"
    assert doc["url"] == "http://example.com/"
    assert doc["origin_row"] == 2
    assert doc["text"].startswith("<!doctype html>\n<html>\n<head>\n    <title>Example Domain</title>")
    assert len(doc["text"]) == 1270  # the payload was gzip Content-Encoding: decoded
    assert json.loads(doc["meta"]) == {"charset": "utf-8", "charset_source": "meta", "content_type": "text/html",
                                       "http_status": 200, "warc_date": "2017-03-06T04:02:06Z",
                                       "warc_offset": 784, "warc_type": "response"}


def test_plain_and_gzip_warc_give_the_same_documents_with_their_own_offsets():
    plain, _, skipped, _ = read_all(DATA / "example.warc")
    gz, _, _, _ = read_all(DATA / "example.warc.gz")
    assert [d["text"] for d in plain] == [d["text"] for d in gz]
    assert json.loads(plain[0]["meta"])["warc_offset"] == 1197 and json.loads(gz[0]["meta"])["warc_offset"] == 784
    assert skipped == {"warcinfo": 2, "request": 2, "revisit": 1}


def test_chunked_transfer_encoding_is_decoded():
    docs, _, _, _ = read_all(DATA / "example-iana.org-chunked.warc")
    (doc,) = docs
    assert doc["id"] == "<urn:uuid:a96ae1a5-931d-4c45-96f3-98576d155f8b>"
    assert doc["text"].startswith("<!doctype html>\n<html>\n<head>\n\t<title>Internet Assigned Numbers Authority")
    assert "001c37" not in doc["text"][:10] and len(doc["text"]) == 7221
    assert json.loads(doc["meta"])["charset_source"] == "http"


def test_resource_records_are_pages_and_json_responses_are_skipped():
    docs, _, skipped, _ = read_all(DATA / "example-resource.warc.gz")
    assert [d["id"] for d in docs] == ["<urn:uuid:6e7f60da-2c7b-11e7-aaf7-0242ac120007>"]
    assert json.loads(docs[0]["meta"])["warc_type"] == "resource"
    docs, bad, skipped, n = read_all(DATA / "post-test.warc.gz")
    assert (docs, bad, n) == ([], [], 0)
    assert skipped == {"request": 3, "response_not_html": 3}


def test_a_file_cut_inside_a_gzip_member_is_a_bad_record_not_silence():
    docs, bad, skipped, n = read_all(DATA / "example-cut.warc.gz")
    assert [d["id"] for d in docs] == ["<urn:uuid:a9c51e3e-0221-11e7-bf66-0242ac120005>"]
    assert n == 2 and len(bad) == 1
    assert bad[0]["reason"] == "bad_record" and bad[0]["origin_row"] == 4
    assert bad[0]["detail"] == ("the file ends inside a gzip member at compressed byte 2012 (truncated?): "
                                "this record is incomplete")


def test_a_truncated_plain_warc_reports_the_record_and_the_header():
    docs, bad, _, n = read_all(DATA / "example-trunc.warc")
    assert docs == [] and n == 2
    assert [(b["id"], b["detail"]) for b in bad] == [
        ("<urn:uuid:a9c51e3e-0221-11e7-bf66-0242ac120005>",
         "cannot read the HTTP body (Error -5 while decompressing data: incomplete or truncated stream)"),
        (f"{DATA / 'example-trunc.warc'}#3", "cannot parse the WARC record after record 2 (Invalid WARC header)"),
    ]


def test_batches_are_cut_and_rows_stay_in_order(tmp_path):
    pages = [(f"https://example.org/{i}", f"<html><body><p>page {i}</p></body></html>".encode(),
              "text/html; charset=utf-8", 200) for i in range(7)]
    write_warc(tmp_path / "a.warc.gz", pages)
    chunks = list(read_shard(str(tmp_path / "a.warc.gz"), 3, batch_rows=3))
    assert [c.docs.num_rows for c in chunks] == [3, 3, 1]
    docs = [d for c in chunks for d in c.docs.to_pylist()]
    assert [d["url"] for d in docs] == [p[0] for p in pages]
    assert docs[0]["doc_key"] == (3 << 40) and docs[6]["origin_row"] == 6


def test_batches_are_cut_by_utf8_bytes(tmp_path, monkeypatch):
    import dataclean.io.warc as warc

    monkeypatch.setattr(warc, "MAX_CHUNK_TEXT_BYTES", 200)
    ascii_page = "<html><body><p>" + "a" * 100 + "</p></body></html>"  # 122 bytes
    zh = "<html><body><p>" + ZH[:25] + "</p></body></html>"  # 58 characters, 108 bytes: counted as 174
    pages = [(f"https://example.org/{i}", page.encode(), "text/html; charset=utf-8", 200)
             for i, page in enumerate([ascii_page, ascii_page, zh, ascii_page])]
    write_warc(tmp_path / "c.warc.gz", pages)
    # a batch is cut once it holds 200 bytes: 122 + 122 | 174 + 122; ascii counted as such, Chinese as 3 a character
    assert [c.docs.num_rows for c in read_shard(str(tmp_path / "c.warc.gz"), 0)] == [2, 2]
    monkeypatch.setattr(warc, "MAX_CHUNK_TEXT_BYTES", 170)  # the Chinese page alone (174)
    assert [c.docs.num_rows for c in read_shard(str(tmp_path / "c.warc.gz"), 0)] == [2, 1, 1]


def test_non_2xx_and_non_html_responses_are_skipped_with_counts(tmp_path):
    write_warc(tmp_path / "b.warc", [
        ("https://a.example/", b"<html><body>moved</body></html>", "text/html", 301),
        ("https://a.example/x.png", b"\x89PNG\r\n", "image/png", 200),
        ("https://a.example/ok", b"<!DOCTYPE html><html><body><p>ok</p></body></html>", None, 200),
    ], gzip=False)
    docs, bad, skipped, n = read_all(tmp_path / "b.warc")
    assert [d["url"] for d in docs] == ["https://a.example/ok"]  # no Content-Type: sniffed as HTML
    assert skipped == {"response_status_3xx": 1, "response_not_html": 1}


def test_discovery_finds_crawl_files(tmp_path):
    for name in ("a.warc.gz", "b.wet.gz", "c.warc", "d.txt"):
        (tmp_path / name).write_bytes(b"")
    assert [os.path.basename(p) for p in discover_inputs([str(tmp_path)])] == ["a.warc.gz", "b.wet.gz", "c.warc"]


def test_wet_conversion_records_are_text_documents(tmp_path):
    path = tmp_path / "x.wet.gz"
    with open(path, "wb") as fh:
        w = WARCWriter(fh, gzip=True)
        rec = w.create_warc_record("https://zh.example/1", "conversion", payload=io.BytesIO(ZH.encode("utf-8")),
                                   warc_headers_dict={"Content-Type": "text/plain",
                                                      "WARC-Record-ID": "<urn:uuid:11111111-0000-0000-0000-000000000001>",
                                                      "WARC-Refers-To": "<urn:uuid:22222222-0000-0000-0000-000000000002>",
                                                      "WARC-Identified-Content-Language": "zho",
                                                      "WARC-Date": "2024-05-01T10:00:00Z"})
        w.write_record(rec)
    (doc,), _, _, _ = read_all(path)
    assert doc["text"] == ZH and doc["id"] == "<urn:uuid:11111111-0000-0000-0000-000000000001>"
    meta = json.loads(doc["meta"])
    assert meta["warc_type"] == "conversion" and meta["content_type"] == "text/plain"
    assert meta["warc_refers_to"] == "<urn:uuid:22222222-0000-0000-0000-000000000002>"
    assert meta["warc_language"] == "zho"


# -- charsets -------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("encoding,ctype,meta_label,codec,source", [
    ("gbk", "text/html; charset=GBK", None, "gb18030", "http"),
    ("gb18030", "text/html", "gb2312", "gb18030", "meta"),
    ("gbk", "text/html", None, "gb18030", "detected"),
    ("utf-8", "text/html", None, "utf-8", "utf-8"),
])
def test_chinese_pages_are_decoded_right(tmp_path, encoding, ctype, meta_label, codec, source):
    html = zh_page(meta_label)
    write_warc(tmp_path / "zh.warc.gz", [("https://zh.example/p", html.encode(encoding), ctype, 200)])
    (doc,), _, _, _ = read_all(tmp_path / "zh.warc.gz")
    assert doc["text"] == html
    meta = json.loads(doc["meta"])
    assert (meta["charset"], meta["charset_source"]) == (codec, source)


def test_big5_page_with_a_meta_tag():
    from opencc import OpenCC

    tw = OpenCC("s2t").convert(ZH)
    html = f'<html><head><meta http-equiv="Content-Type" content="text/html; charset=big5"></head><p>{tw}</p></html>'
    text, codec, source = decode_html(html.encode("big5"), "text/html")
    assert (text, codec, source) == (html, "big5hkscs", "meta")


def test_a_wrong_declaration_is_not_trusted():
    html = zh_page(None)
    # the header says UTF-8, the bytes are GBK: strict UTF-8 fails, nothing else is declared, the detector decides
    text, codec, source = decode_html(html.encode("gbk"), "text/html; charset=utf-8")
    assert (text, codec, source) == (html, "gb18030", "detected")


# -- extraction -----------------------------------------------------------------------------------------------

def test_extract_stage_on_a_real_page():
    chunk = next(read_shard(str(DATA / "example.warc.gz"), 0))
    result = Extract()(chunk.docs)
    assert result.batch.column("text").to_pylist() == [EXAMPLE_TEXT]
    assert result.batch.column("extract_html_chars").to_pylist() == [1270]
    assert result.batch.column("extract_chars").to_pylist() == [len(EXAMPLE_TEXT)]
    assert result.batch.column("extract_ratio").to_pylist() == [len(EXAMPLE_TEXT) / 1270]
    assert result.decisions is None


def test_resiliparse_keeps_the_title():
    chunk = next(read_shard(str(DATA / "example.warc.gz"), 0))
    result = Extract(extractor="resiliparse")(chunk.docs)
    assert result.batch.column("text").to_pylist() == ["Example Domain\n\n" + EXAMPLE_TEXT.replace("\n", "\n\n")]


def test_rows_that_are_not_pages_pass_through_and_empty_pages_are_removed():
    metas = [json.dumps({"content_type": "text/html"}), None, json.dumps({"content_type": "text/html"})]
    batch = pa.RecordBatch.from_pydict({
        "text": ["<html><body><script>var a = 1;</script><div></div></body></html>", "<p>plain text, not a page</p>",
                 "<html>" + "x" * 80 + "</html>"],
        "meta": metas, "url": [None, None, None]})
    result = Extract(max_html_chars=70)(batch)
    assert result.batch.column("text").to_pylist()[1] == "<p>plain text, not a page</p>"
    assert result.batch.column("extract_html_chars").to_pylist() == [len(batch.column('text')[0].as_py()), None, 93]
    assert result.decisions.rule.to_pylist() == ["extract_no_text", None, "extract_too_large"]
    assert result.decisions.reason.to_pylist() == ["no_main_text", None, "html_too_large"]
    assert result.decisions.value.to_pylist() == [0.0, None, 93.0]


def test_keep_decides_code_and_tables():
    from dataclean.io.readers import read_shard as rs

    docs = [d for c in rs(str(SAMPLE), 0) for d in c.docs.to_pylist()]
    page = next(d for d in docs if d["url"].endswith("/tutorial/controlflow.html"))["text"]
    full = Extractor("trafilatura").extract(page)
    bare = Extractor("trafilatura", keep=[]).extract(page)
    assert ">>> x = int(input(\"Please enter an integer: \"))" in full
    assert "Please enter an integer" not in bare
    assert "Besides the while statement just introduced" in bare and "Besides the while statement" in full


def test_math_becomes_tex_for_resiliparse():
    html = ('<p>Euler: <math alttext="e^{i\\pi}+1=0"><mi>e</mi></math> and '
            '<script type="math/tex; mode=display">a^2+b^2</script></p>')
    assert math_as_tex(html) == '<p>Euler: \\(e^{i\\pi}+1=0\\) and <span>\\[a^2+b^2\\]</span></p>'


def test_bad_parameters_are_one_line_errors():
    with pytest.raises(ValueError, match="extractor: expected one of trafilatura, resiliparse, got 'bs4'"):
        Extract(extractor="bs4")
    with pytest.raises(ValueError, match="keep: unknown kind"):
        Extract(keep=["images"])
    with pytest.raises(ValueError, match="extract.rows must be"):
        Extract(rows="pages")


# -- url filter -----------------------------------------------------------------------------------------------

def test_url_filter_removes_by_category():
    batch = pa.RecordBatch.from_pydict({"text": ["a", "b", "c"],
                                        "url": ["https://www.beeg.com/x", "https://docs.python.org/3/", None]})
    result = UrlFilter()(batch)
    assert result.batch.column("url_blocked_category").to_pylist() == ["blocklist", None, None]
    assert result.decisions.rule.to_pylist() == ["url_blocked", None, None]
    assert result.decisions.detail.to_pylist() == ["blocklist www.beeg.com", None, None]


def test_ut1_folder_gives_one_category_per_subfolder(tmp_path):
    for cat, dom in (("adult", "bad.example"), ("gambling", "bet.example")):
        (tmp_path / cat).mkdir()
        (tmp_path / cat / "domains").write_text(dom + "\n")
    f = UrlFilter(domain_lists=[str(tmp_path)], domain_categories=None, domain_exclude=[])
    batch = pa.RecordBatch.from_pydict({"text": ["a", "b"], "url": ["http://m.bet.example/", "http://bad.example"]})
    assert f(batch).batch.column("url_blocked_category").to_pylist() == ["gambling", "adult"]


# -- the CLI --------------------------------------------------------------------------------------------------

def cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "dataclean.cli", *map(str, args)], capture_output=True,
                          text=True, cwd=cwd, timeout=600)


def crawl_config(tmp_path) -> Path:
    """rules/crawl.yaml without the HTML report (not under test here; it costs seconds per run)."""
    cfg = tmp_path / "crawl-no-report.yaml"
    cfg.write_text((ROOT / "rules" / "crawl.yaml").read_text() + "output:\n  report: false\n")
    return cfg


def test_run_on_warc_files_end_to_end(tmp_path):
    inputs = tmp_path / "crawl"
    inputs.mkdir()
    for name in ("example.warc.gz", "example-iana.org-chunked.warc", "example-cut.warc.gz", "post-test.warc.gz"):
        (inputs / name).write_bytes((DATA / name).read_bytes())
    blocked = [("https://www.beeg.com/page", zh_page(None).encode("gbk"), "text/html; charset=gbk", 200)]
    write_warc(inputs / "blocked.warc.gz", blocked)
    out = tmp_path / "out"
    res = cli("run", inputs, "-o", out, "--config", crawl_config(tmp_path))
    assert res.returncode == 0, res.stderr
    assert "16 records skipped, not documents: request 7, response_not_html 3, revisit 1, warcinfo 5" in res.stdout
    summary = json.loads((out / "stats" / "summary.json").read_text())
    assert summary["input_records"] == 5 and summary["bad_records"] == 1
    assert summary["input_records"] == summary["kept"] + summary["removed"]
    assert summary["skipped_records"] == {"request": 7, "response_not_html": 3, "revisit": 1, "warcinfo": 5}
    assert summary["url_blocked_by_category"] == {"blocklist": 1}
    assert "  removed by url_filter: 1\n    by category: blocklist 1\n" in res.stdout
    ledger = pq.read_table(out / "rejected").to_pylist()
    rules = sorted((r["id"], r["rule"]) for r in ledger)
    assert ("<urn:uuid:00000000-0000-0000-0000-000000000000>", "url_blocked") in rules
    assert (f"{inputs / 'example-cut.warc.gz'}#4", "parse") in rules
    kept = pq.read_table(out / "data").to_pylist()
    assert "<urn:uuid:a96ae1a5-931d-4c45-96f3-98576d155f8b>" in {d["id"] for d in kept + ledger}
    assert cli("verify", out).returncode == 0
    assert cli("report", out).returncode == 0
    report = (out / "report.html").read_text(encoding="utf-8")
    assert "1 records were removed by their URL's domain, by category: blocklist 1." in report


def test_warc_without_extract_is_refused_in_one_line(tmp_path):
    res = cli("run", DATA / "example.warc.gz", "-o", tmp_path / "out")
    assert res.returncode == 2
    assert res.stderr.strip().splitlines()[-1].endswith(
        "is a WARC file of HTML pages and the pipeline has no extract stage: run with --config crawl "
        "(rules/crawl.yaml), or set extract.enabled: true")


def test_sample_warc_runs_with_the_readme_command(tmp_path):
    res = cli("run", "sample_data/_crawl/python-tutorial.warc.gz", "-o", tmp_path / "out", "--config", "crawl")
    assert res.returncode == 0, res.stderr
    summary = json.loads((tmp_path / "out" / "stats" / "summary.json").read_text())
    assert summary["input_records"] == 17 and summary["bad_records"] == 0
    assert summary["skipped_records"] == {"request": 18, "response_not_html": 1, "warcinfo": 1}
    kept = pq.read_table(tmp_path / "out" / "data").to_pylist()
    assert all(d["id"].startswith("<urn:uuid:") and d["url"].startswith("https://docs.python.org/3.11/tutorial/")
               for d in kept)
    assert not any("<div" in d["text"] or "Navigation" in d["text"][:200] for d in kept)
    report = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    assert ("20 records of the inputs are not documents and were skipped: request 18, response_not_html 1, "
            "warcinfo 1.") in report


def test_a_jsonl_column_of_raw_html(tmp_path):
    """A user's own JSONL with the HTML in an ``html`` column: ``rows: all`` extracts it; without it the run
    stops in one line with the fix instead of judging markup."""
    page = next(d for c in read_shard(str(DATA / "example.warc.gz"), 0) for d in c.docs.to_pylist())["text"]
    (tmp_path / "pages.jsonl").write_text(json.dumps({"url": "http://example.com/", "html": page}) + "\n")
    res = cli("run", tmp_path / "pages.jsonl", "-o", tmp_path / "refused", "--config", "crawl",
              "--text-column", "html")
    assert res.returncode == 2
    assert res.stderr.strip() == (f"error: {tmp_path / 'pages.jsonl'}: 1 of its first 1 records are raw HTML, and "
                                  "extract takes only WARC pages (rows whose meta says text/html): set "
                                  "extract.rows: all to extract every row")
    cfg = tmp_path / "html.yaml"
    cfg.write_text("input:\n  columns: {text: html}\nextract:\n  enabled: true\n  rows: all\n"
                   "output:\n  report: false\n")
    res = cli("run", tmp_path / "pages.jsonl", "-o", tmp_path / "out", "--config", cfg)
    assert res.returncode == 0, res.stderr
    removed = pq.read_table(tmp_path / "out" / "rejected").to_pylist()
    kept = pq.read_table(tmp_path / "out" / "data").to_pylist()
    assert [d["text"] for d in kept + removed] == [EXAMPLE_TEXT]
