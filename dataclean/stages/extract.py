"""HTML to main text, in pass 1 like any stage (so its removals are in the ledger and the report).

Which rows are pages: ``rows: html`` (the default) takes the rows whose ``meta`` says ``"content_type":
"text/html"`` or ``application/xhtml+xml`` (what the WARC reader writes for a page, :mod:`dataclean.io.warc`);
``rows: all`` takes every row (a JSONL or Parquet column of raw HTML). Other rows — WET text, ordinary text
corpora — pass through untouched with null signals.

The text of a page becomes its main text (:class:`dataclean.text.html_extract.Extractor`, ``extractor:
trafilatura | resiliparse``, ``keep: [code, tables, math]``, ``favor``).

Signals: ``extract_html_chars`` (characters of the page before extraction), ``extract_chars`` (of its main
text), ``extract_ratio`` (characters of
main text per character of HTML: ~0.01–0.2 for an article page, ~0 for a menu-only page; FineWeb and
RefinedWeb report no threshold on it, so it is a signal to read, not a rule).

Rules:

* ``extract_no_text`` (reason ``no_main_text``): the extractor found less than ``min_chars`` characters of
  main text (default 1: nothing at all; a threshold for short pages belongs to the quality rules after it);
* ``extract_too_large`` (reason ``html_too_large``): the page has more than ``max_html_chars`` characters,
  removed before extraction so that one pathological page cannot stall a worker (Common Crawl truncates
  payloads at 1 MiB, so the default 2M characters removes nothing from a CC WARC).
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.io.warc import HTML_META_PATTERN
from dataclean.stages.base import Check, Decisions, RuleSpec, Stage, StageResult, batch_text, with_columns
from dataclean.text.html_extract import DEFAULT_KEEP, KEEP_KINDS, Extractor


class Extract(Stage):
    kind = "extract"
    rewrites_text = True
    signal_fields = [
        pa.field("extract_html_chars", pa.int64()),
        pa.field("extract_chars", pa.int64()),
        pa.field("extract_ratio", pa.float64()),
    ]
    rule_specs = [
        RuleSpec("extract_no_text", "extract_chars", ("min_chars",), "min",
                 "characters of main text the extractor found in the page"),
        RuleSpec("extract_too_large", "extract_html_chars", ("max_html_chars",), "max",
                 "characters of the page's HTML (removed before extraction)"),
    ]

    def __init__(self, extractor: str = "trafilatura", keep: list[str] | tuple = DEFAULT_KEEP,
                 favor: str = "balanced", rows: str = "html", min_chars: int = 1,
                 max_html_chars: int | None = 2_000_000, name: str | None = None):
        super().__init__(name)
        if isinstance(keep, str):
            raise ValueError(f"extract.keep must be a list of kinds ({', '.join(KEEP_KINDS)})")
        self._extractor = Extractor(extractor, keep, favor)
        self.extractor, self.keep, self.favor = extractor, list(keep or ()), favor
        if rows not in ("html", "all"):
            raise ValueError(f"extract.rows must be 'html' (pages by their meta content_type) or 'all', not {rows!r}")
        self.rows = rows
        if not isinstance(min_chars, int) or isinstance(min_chars, bool) or min_chars < 0:
            raise ValueError("extract.min_chars must be an integer >= 0")
        self.min_chars = min_chars
        if max_html_chars is not None and (not isinstance(max_html_chars, int) or isinstance(max_html_chars, bool)
                                           or max_html_chars < 1):
            raise ValueError("extract.max_html_chars must be a positive integer or null")
        self.max_html_chars = max_html_chars

    def pages(self, batch: pa.RecordBatch) -> np.ndarray:
        """Indices of the rows that are HTML pages."""
        n = batch.num_rows
        if self.rows == "all":
            return np.arange(n)
        if "meta" not in batch.schema.names:
            return np.zeros(0, np.int64)
        meta = batch.column("meta")
        hit = pc.fill_null(pc.match_substring_regex(meta, HTML_META_PATTERN), False)
        return np.flatnonzero(hit.to_numpy(zero_copy_only=False))

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        n = batch.num_rows
        rows = self.pages(batch)
        html_chars = np.zeros(n, np.int64)
        ratio = np.full(n, np.nan)
        out_chars = np.zeros(n, np.int64)
        is_page = np.zeros(n, bool)
        is_page[rows] = True
        if not len(rows):
            signals = {"extract_html_chars": pa.nulls(n, pa.int64()), "extract_chars": pa.nulls(n, pa.int64()),
                       "extract_ratio": pa.nulls(n, pa.float64())}
            return StageResult(with_columns(batch, signals))
        text = batch_text(batch)
        sub = text.take(pa.array(rows))
        lengths = pc.utf8_length(sub).to_numpy(zero_copy_only=False)
        html_chars[rows] = lengths
        too_large = np.zeros(n, bool)
        if self.max_html_chars is not None:
            too_large[rows] = lengths > self.max_html_chars
        urls = batch.column("url").take(pa.array(rows)).to_pylist() if "url" in batch.schema.names \
            else [None] * len(rows)
        extract = self._extractor.extract
        mains = ["" if big else extract(page, url) for page, url, big in zip(sub.to_pylist(), urls, too_large[rows])]
        out_chars[rows] = [len(m) for m in mains]
        ratio[rows] = np.where(html_chars[rows] > 0, out_chars[rows] / np.maximum(html_chars[rows], 1), 0.0)
        mask = ~is_page
        signals = {
            "text": pc.replace_with_mask(text, pa.array(is_page), pa.array(mains, pa.string())),
            "extract_html_chars": pa.array(html_chars, pa.int64(), mask=mask),
            "extract_chars": pa.array(out_chars, pa.int64(), mask=mask),
            "extract_ratio": pa.array(ratio, pa.float64(), mask=mask),
        }
        checks = [
            Check("extract_too_large", "html_too_large", pa.array(too_large), value=pa.array(html_chars, pa.float64()),
                  threshold=None if self.max_html_chars is None else float(self.max_html_chars)),
            Check("extract_no_text", "no_main_text", pa.array(is_page & ~too_large & (out_chars < self.min_chars)),
                  value=pa.array(out_chars, pa.float64()), threshold=float(self.min_chars),
                  detail=f"{self.extractor} found no main text" if self.min_chars <= 1 else
                  f"{self.extractor} found less than {self.min_chars} characters of main text"),
        ]
        return StageResult(with_columns(batch, signals), Decisions.from_checks(n, checks))
