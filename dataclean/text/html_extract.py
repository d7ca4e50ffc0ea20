"""HTML to main text, with a kept extractor: trafilatura (Barbaresi 2021; what datatrove and NeMo Curator run
on Common Crawl) or resiliparse's ``extract_plain_text`` in main-content mode (Bevendorff et al. 2018).

``keep`` says which kinds of content stay in the text; what is not kept is pruned from the page first:

* ``code``: ``<pre>`` blocks, as preformatted text (both extractors keep their line breaks); inline ``<code>``
  in prose always stays;
* ``tables``: cell text (trafilatura writes ``| a | b |`` rows, resiliparse tab-separated cells);
* ``math``: MathML and MathJax as TeX. trafilatura writes a ``<math alttext>`` as ``\\(TeX\\)`` itself; for
  resiliparse, which would write MathML's rendering glyphs (``x2`` for x²), the TeX of ``alttext`` or of a
  ``<script type="math/tex">`` is put in the page first, as ``\\(TeX\\)`` (``\\[TeX\\]`` for display mode).
  KaTeX's HTML rendering is not converted (its hidden MathML annotation is, by trafilatura).

* ``comments``: the readers' comments under an article (trafilatura ``include_comments``, resiliparse
  ``comments``). Not kept by default, as datatrove does for FineWeb (``include_comments=False``); on
  trafilatura's own evaluation pages 14 of 198 must-contain snippets are comments
  (``benchmarks/eval_extract.py``).

``favor``: trafilatura's ``favor_precision`` / ``favor_recall`` (``balanced`` is its default; datatrove uses
``precision``).

Each call handles one page: extraction is a tree walk per document that no Arrow kernel can do, and the
extractor's own time is what ``benchmarks/bench_extract.py`` compares the stage with.
"""
from __future__ import annotations

import html as html_lib
import re

EXTRACTORS = ("trafilatura", "resiliparse")
KEEP_KINDS = ("code", "tables", "math", "comments")
#: What ``keep`` holds unless told: comments under an article are left out, as datatrove does for FineWeb
#: (``include_comments=False`` in its Trafilatura extractor).
DEFAULT_KEEP = ("code", "tables", "math")
FAVOR = ("balanced", "precision", "recall")

_MATHML = re.compile(r"<math\b([^>]*)>.*?</math\s*>", re.I | re.S)
_ALTTEXT = re.compile(r"""\balttext\s*=\s*(?:"([^"]*)"|'([^']*)')""", re.I)
_MATHJAX = re.compile(r"""<script[^>]*type\s*=\s*["']math/tex(; *mode=display)?["'][^>]*>(.*?)</script\s*>""",
                      re.I | re.S)


def _tex(tex: str, display: bool = False) -> str:
    tex = html_lib.escape(html_lib.unescape(tex).strip(), quote=False)
    return f"\\[{tex}\\]" if display else f"\\({tex}\\)"


def math_as_tex(html: str) -> str:
    """``html`` with MathML (that has an ``alttext``) and MathJax scripts replaced by their TeX as text."""
    # plain substring tests first: a case-insensitive regex over every page cost 24% of resiliparse's time
    if "math" not in html and "MATH" not in html:
        return html
    low = html.lower()
    if "<math" not in low and "math/tex" not in low:
        return html

    def mathml(m: re.Match) -> str:
        alt = _ALTTEXT.search(m.group(1))
        if not alt:
            return m.group(0)
        return _tex(alt.group(1) if alt.group(1) is not None else alt.group(2),
                    'display="block"' in m.group(1).lower())

    html = _MATHML.sub(mathml, html)
    return _MATHJAX.sub(lambda m: f"<span>{_tex(m.group(2), bool(m.group(1)))}</span>", html)


class Extractor:
    """One configured extractor: ``extract(html, url)`` gives the main text ('' when the page has none)."""

    def __init__(self, extractor: str = "trafilatura", keep=DEFAULT_KEEP, favor: str = "balanced"):
        if extractor not in EXTRACTORS:
            raise ValueError(f"extractor: expected one of {', '.join(EXTRACTORS)}, got {extractor!r}")
        keep = tuple(keep or ())
        unknown = [k for k in keep if k not in KEEP_KINDS]
        if unknown:
            raise ValueError(f"keep: unknown kind(s) {', '.join(map(str, unknown))} (expected {', '.join(KEEP_KINDS)})")
        if favor not in FAVOR:
            raise ValueError(f"favor: expected one of {', '.join(FAVOR)}, got {favor!r}")
        self.extractor, self.keep, self.favor = extractor, keep, favor
        if extractor == "trafilatura":
            try:
                import trafilatura  # noqa: F401
            except ImportError as exc:
                raise ValueError(f"extractor trafilatura is not installed ({exc}): pip install 'dataclean[crawl]'"
                                 ) from None
            prune = [x for kind, x in (("code", "//pre"), ("math", "//math")) if kind not in keep]
            self._prune = "|".join(prune) or None
        else:
            try:
                import resiliparse.extract.html2text  # noqa: F401
            except ImportError as exc:
                raise ValueError(f"extractor resiliparse is not installed ({exc}): pip install resiliparse"
                                 ) from None
            self._skip = [tag for kind, tags in (("code", ["pre"]), ("tables", ["table"]), ("math", ["math"]))
                          if kind not in keep for tag in tags]

    def extract(self, html: str, url: str | None = None) -> str:
        if self.extractor == "trafilatura":
            import trafilatura

            text = trafilatura.extract(html, url=url, include_comments="comments" in self.keep,
                                       include_tables="tables" in self.keep,
                                       favor_precision=self.favor == "precision",
                                       favor_recall=self.favor == "recall", prune_xpath=self._prune,
                                       deduplicate=False, with_metadata=False, output_format="txt")
            return text or ""
        from resiliparse.extract.html2text import extract_plain_text

        if "math" in self.keep:
            html = math_as_tex(html)
        return extract_plain_text(html, main_content=True, preserve_formatting=True, list_bullets=True,
                                  alt_texts=False, links=False, form_fields=False, noscript=False,
                                  comments="comments" in self.keep,
                                  skip_elements=self._skip or None).strip()
