"""Write a WARC file (gzip, one member per record, as Common Crawl does) of real saved pages: for each file a
``request`` and a ``response`` record (HTTP/1.1 200, the page's bytes as the payload), after one ``warcinfo``.

Used to build ``sample_data/_crawl/python-tutorial.warc.gz`` (pages of the Python 3.11 documentation, PSF-2.0,
from Debian's ``python3.11-doc`` package) and the benchmark WARCs of ``benchmarks/bench_extract.py``::

    python benchmarks/make_warc.py OUT.warc.gz --base https://docs.python.org/3.11/ --root HTML_DIR FILE...

A file ending in ``.png``/``.svg``/``.css``/``.js`` is written with its own content type (a crawl holds
them too; the reader counts them as ``response_not_html``). Record ids are UUIDs derived from the URL, and
dates are fixed, so the same files give the same bytes.
"""
from __future__ import annotations

import argparse
import hashlib
import io
import os
import uuid

from warcio.statusandheaders import StatusAndHeaders
from warcio.warcwriter import WARCWriter

TYPES = {".html": "text/html; charset=utf-8", ".htm": "text/html; charset=utf-8", ".png": "image/png",
         ".svg": "image/svg+xml", ".css": "text/css", ".js": "application/javascript", ".txt": "text/plain"}
DATE = "2024-01-01T00:00:00Z"


def _id(url: str, kind: str) -> str:
    return f"<urn:uuid:{uuid.UUID(bytes=hashlib.sha256((kind + url).encode()).digest()[:16])}>"


def write_warc(out: str, pages: list[tuple[str, bytes, str]]) -> None:
    """``pages``: (url, payload, content type)."""
    with open(out, "wb") as fh:
        writer = WARCWriter(fh, gzip=out.endswith(".gz"))
        info = writer.create_warcinfo_record(os.path.basename(out), {"software": "dataclean benchmarks/make_warc.py",
                                                                     "format": "WARC File Format 1.1"})
        info.rec_headers.replace_header("WARC-Date", DATE)
        info.rec_headers.replace_header("WARC-Record-ID", _id(out, "info"))
        writer.write_record(info)
        for url, payload, ctype in pages:
            host = url.split("/")[2]
            req = StatusAndHeaders(f"GET /{url.split('/', 3)[3]} HTTP/1.1", [("Host", host),
                                   ("User-Agent", "dataclean-sample")], is_http_request=True)
            request = writer.create_warc_record(url, "request", payload=io.BytesIO(b""), http_headers=req,
                                                warc_headers_dict={"WARC-Date": DATE,
                                                                   "WARC-Record-ID": _id(url, "request")})
            head = StatusAndHeaders("200 OK", [("Content-Type", ctype), ("Content-Length", str(len(payload)))],
                                    protocol="HTTP/1.1")
            response = writer.create_warc_record(url, "response", payload=io.BytesIO(payload), http_headers=head,
                                                 warc_headers_dict={"WARC-Date": DATE,
                                                                    "WARC-Record-ID": _id(url, "response")})
            writer.write_record(request)
            writer.write_record(response)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out")
    ap.add_argument("files", nargs="+")
    ap.add_argument("--root", required=True, help="the folder the files' URLs are relative to")
    ap.add_argument("--base", required=True, help="the URL of --root")
    args = ap.parse_args()
    pages = []
    for path in args.files:
        rel = os.path.relpath(path, args.root).replace(os.sep, "/")
        ext = os.path.splitext(path)[1].lower()
        with open(path, "rb") as fh:
            pages.append((args.base.rstrip("/") + "/" + rel, fh.read(), TYPES.get(ext, "application/octet-stream")))
    write_warc(args.out, pages)
    print(f"{args.out}: {len(pages)} pages, {os.path.getsize(args.out):,} bytes")


if __name__ == "__main__":
    main()
