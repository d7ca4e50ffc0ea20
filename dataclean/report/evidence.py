"""What decided: the span of a removed document that made its rule fire, a word-level diff of a near
duplicate against its representative, and the kept documents closest to each threshold.

Spans come from what the ledger records (rule, value, detail) and the text, with the detecting code of the
rule where it exists: the ``at START-END`` offsets that repetition_runs, long_tokens and garbled write in
their detail (long_tokens' own blob finder marks every blob, not only the first), C4's curly-bracket check
(the stage of the run, rebuilt from its config, judges each line that holds a ``{``), word_lists' own term
pattern, the lines / paragraphs / n-grams that Gopher's repetition rules count. A rule that measures the
whole document (too short, language, ratios) has no span: its example shows the document's start and says so.

Everything here works on the handful of documents the report shows, each read to at most
:data:`SCAN_CHARS` characters; nothing loops over the corpus.
"""
from __future__ import annotations

import difflib
import html
import re
from collections import Counter
from dataclasses import dataclass

from dataclean.report.page import clean, esc, note

SCAN_CHARS = 200_000  # characters of an example's text read to find its span
CONTEXT = 300  # characters shown before and after the first highlighted span
MAX_MARK = 800  # a longer span is shown as its first and last MAX_MARK / 2 characters
MAX_MARKS = 40  # highlighted spans in one window
DIFF_CHARS = 20_000  # characters of each side of a near-duplicate pair that are diffed
DIFF_SAME_WORDS = 12  # unchanged words kept either side of a change; longer unchanged runs are elided
DIFF_MAX_CHANGES = 60  # changed stretches shown per pair

_AT = re.compile(r"\bat (\d+)-(\d+)\b")
_GRAM = re.compile(r"gopher_(top|dup)_(\d+)gram$")
# a word as the n-gram and diff views see it: a Han / kana character alone, else a run of letters and digits
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_WORD = re.compile(rf"[{_CJK}]|[^\s{_CJK}]+")


@dataclass
class Evidence:
    spans: list[tuple[int, int]]  # character offsets into the text, sorted, non-overlapping
    what: str  # what the highlight is, in words


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for s, e in sorted(spans):
        if e <= s:
            continue
        if out and s <= out[-1][1]:
            out[-1][1] = max(out[-1][1], e)
        else:
            out.append([s, e])
    return [(s, e) for s, e in out]


def _all(text: str, needle: str, limit: int = MAX_MARKS * 4) -> list[tuple[int, int]]:
    out, i = [], text.find(needle)
    while i >= 0 and needle and len(out) < limit:
        out.append((i, i + len(needle)))
        i = text.find(needle, i + len(needle))
    return out


def _lines(text: str, sep: str = "\n") -> list[tuple[int, int, str]]:
    """(start, end, stripped content) of every non-blank line (or paragraph, with ``sep='\\n\\n'``)."""
    out, pos = [], 0
    pattern = re.compile(r"\n\s*\n" if sep != "\n" else r"\n")
    for m in [*pattern.finditer(text), None]:
        end = m.start() if m else len(text)
        chunk = text[pos:end]
        body = chunk.strip()
        if body:
            lead = len(chunk) - len(chunk.lstrip())
            out.append((pos + lead, pos + lead + len(body), body))
        if m:
            pos = m.end()
    return out


def _repeated(text: str, sep: str, by_chars: bool) -> Evidence | None:
    items = _lines(text, sep)
    counts = Counter(b for _, _, b in items)
    dups = [(c * (len(b) if by_chars else 1), c, b) for b, c in counts.items() if c > 1]
    if not dups:
        return None
    dups.sort(key=lambda t: (-t[0], -t[1]))
    _, c, body = dups[0]
    kind = "line" if sep == "\n" else "paragraph"
    spans = [(s, e) for s, e, b in items if b == body]
    return Evidence(spans, f"the most repeated {kind}, {c} times")


def _ngrams(text: str, n: int, top: bool) -> Evidence | None:
    words = [(m.start(), m.end(), m.group().lower()) for m in _WORD.finditer(text)]
    if len(words) < n:
        return None
    grams = [tuple(w[2] for w in words[i:i + n]) for i in range(len(words) - n + 1)]
    counts = Counter(grams)
    if top:
        gram, c = max(counts.items(), key=lambda kv: (kv[1] * sum(map(len, kv[0])), kv[1]))
        if c < 2:
            return None
        spans = [(words[i][0], words[i + n - 1][1]) for i, g in enumerate(grams) if g == gram]
        return Evidence(_merge(spans), f"the most frequent {n}-gram, {c} times")
    spans = [(words[i][0], words[i + n - 1][1]) for i, g in enumerate(grams) if counts[g] > 1]
    if not spans:
        return None
    return Evidence(_merge(spans), f"text covered by {n}-grams that occur more than once")


def _chars(text: str, test, what: str) -> Evidence | None:
    spans = [(i, i + 1) for i, ch in enumerate(text) if test(ch)]
    return Evidence(_merge(spans), what) if spans else None


class Finder:
    """Finds the deciding span of removed documents, with the stages of the run rebuilt from its config
    (once per stage, only for the rules that need them)."""

    def __init__(self, config: dict | None):
        self.config = config or {}
        self._stages: dict[str, object] = {}

    def stage(self, name: str):
        if name not in self._stages:
            self._stages[name] = None
            from dataclean.report.thresholds import report_stage

            for spec in self.config.get("pipeline") or []:
                if isinstance(spec, dict) and (spec.get("name") or spec.get("stage")) == name:
                    self._stages[name] = report_stage(spec)  # (None: a run of another version, no span)
                    break
        return self._stages[name]

    def find(self, d: dict) -> Evidence | None:
        text = d.get("text")
        if not text:
            return None
        try:
            ev = self._find(d, text)
        except Exception:  # a span is an aid: never cost the example
            return None
        if ev is None:
            return None
        spans = [(max(0, s), min(len(text), e)) for s, e in ev.spans if s < len(text)]
        return Evidence(_merge(spans), ev.what) if spans else None

    def _find(self, d: dict, text: str) -> Evidence | None:
        rule = d.get("rule") or ""
        detail = d.get("detail") or ""
        if rule == "encoded_blob":
            from dataclean.stages.runs import blobs_of, long_tokens_of

            stage = self.stage(d.get("stage") or "long_tokens")
            blobs = blobs_of(long_tokens_of(text, getattr(stage, "min_token_chars", 64)))
            spans = _merge([sp for _, b in blobs for sp in _all(text, b)])
            if spans:
                return Evidence(spans, f"{len(blobs)} base64 / hex blob(s), found by long_tokens")
        m = _AT.search(detail)
        if m:
            s, e = int(m.group(1)), int(m.group(2))
            if 0 <= s < e <= len(text):
                return Evidence([(s, e)], detail.split(" at ")[0])
        if rule == "c4_curly_bracket":
            return self._curly(d, text)
        if rule == "c4_lorem_ipsum":
            spans = [(m.start(), m.end()) for m in re.finditer(r"(?i)lorem ipsum", text)]
            return Evidence(spans, "“lorem ipsum”") if spans else None
        if rule in ("gopher_dup_line_frac", "gopher_dup_line_char_frac"):
            return _repeated(text, "\n", rule.endswith("char_frac"))
        if rule in ("gopher_dup_para_frac", "gopher_dup_para_char_frac"):
            return _repeated(text, "\n\n", rule.endswith("char_frac"))
        g = _GRAM.match(rule)
        if g:
            return _ngrams(text, int(g.group(2)), g.group(1) == "top")
        if rule == "lists_bad_words":
            stage = self.stage(d.get("stage") or "word_lists")
            pattern = getattr(stage, "_patterns", {}).get(d.get("lang"))
            if pattern:
                spans = [(m.start(), m.end()) for m in re.finditer(pattern, text)]
                return Evidence(spans, "listed words, by word_lists' own pattern") if spans else None
        if rule in ("lists_text_domains", "url_blocked") and detail:
            host = detail.split()[-1]
            spans = _all(text.lower(), host.lower())
            return Evidence(spans, f"the listed host {host}") if spans else None
        if rule == "gopher_too_many_end_ellipsis":
            spans = [(s, e) for s, e, b in _lines(text) if b.endswith(("...", "…"))]
            return Evidence(spans, "the lines that end in an ellipsis") if spans else None
        if rule in ("fineweb_short_line_ratio", "fineweb_line_punct_ratio"):
            stage = self.stage(d.get("stage") or "fineweb_quality")
            if stage is None:
                return None
            over = (getattr(stage, "by_lang", {}) or {}).get(d.get("lang")) or {}
            if rule == "fineweb_short_line_ratio":
                limit = over.get("short_line_length", stage.short_line_length)
                spans = [(s, e) for s, e, b in _lines(text) if len(b) <= limit]
                return Evidence(spans, f"the lines of at most {limit} characters") if spans else None
            marks = tuple(over.get("end_marks", stage.end_marks) or "")
            spans = [(s, e) for s, e, b in _lines(text) if not b.endswith(marks)]
            return (Evidence(spans, f"the lines that do not end in one of {' '.join(marks)}")
                    if spans and marks else None)
        if rule == "garbled_replacement_chars":
            return _chars(text, lambda c: c == "\ufffd", "replacement characters U+FFFD")
        if rule == "garbled_private_use":
            import unicodedata

            return _chars(text, lambda c: unicodedata.category(c) == "Co", "private-use characters")
        return None

    def _curly(self, d: dict, text: str) -> Evidence | None:
        """The lines that hold a ``{`` and survive C4's line rules, as the run's own c4 stage judges each
        of them (a brace in a line C4 drops anyway does not remove the page)."""
        import pyarrow as pa

        lines = [(s, e, b) for s, e, b in _lines(text) if "{" in b]
        if not lines:
            return None
        stage = self.stage(d.get("stage") or "c4")
        judged = []
        if stage is not None:
            cols = {"text": pa.array([b for _, _, b in lines], pa.string()),
                    "lang": pa.array([d.get("lang")] * len(lines), pa.string()),
                    "source": pa.array([d.get("source")] * len(lines), pa.string())}
            out = stage(pa.RecordBatch.from_pydict(cols)).batch
            curly = out.column("c4_curly_lines").to_pylist()
            judged = [ln for ln, c in zip(lines, curly) if c]
        if judged:
            return Evidence([(s, e) for s, e, _ in judged], "the line(s) with a “{” that C4 keeps as prose")
        return Evidence([(s, e) for s, e, _ in lines], "the line(s) with a “{”")


def mask_spans(text: str, stage) -> Evidence | None:
    """The PII masks in a kept text: the run's ``pii`` stage's replacement tokens (``<EMAIL>``; in hash mode
    ``<EMAIL:3fa9c2d1>``). Only the masks can be shown: the values they replaced are kept nowhere, by design."""
    tokens = sorted(set((getattr(stage, "_tokens", None) or {}).values()), key=len, reverse=True)
    if not tokens:
        return None
    alts = [re.escape(t[:-1]) + r"(?::[0-9a-f]+)?>" if t.endswith(">") else re.escape(t) for t in tokens]
    spans = [m.span() for m in re.finditer("|".join(alts), text)][:MAX_MARKS * 4]
    return Evidence(spans, "the masks that replaced personal data") if spans else None


WHOLE_DOCUMENT = {"lang_low_score", "lang_not_allowed", "gopher_short_doc", "gopher_long_doc",
                  "gopher_below_avg_word_length", "gopher_above_avg_word_length", "gopher_below_alpha_threshold",
                  "gopher_few_stop_words", "c4_empty", "c4_too_few_sentences", "exact_duplicate",
                  "quality_below_threshold", "quality_not_top_fraction", "fineweb_char_dup_ratio",
                  "fineweb_list_ratio", "seo_top1_word", "seo_top5_words", "benchmark_overlap"}


def no_span_note(rule: str | None) -> str:
    if rule in WHOLE_DOCUMENT:
        return "the rule measures the whole document, not a span of it: the document's start is shown"
    return "no span found for this rule: the document's start is shown"


def window(text: str, n_chars: int | None, ev: Evidence | None, what_else: str = "") -> str:
    """The text around the first span, every span in it in ``<mark>``, as a ``<pre>`` with a note."""
    total = n_chars if n_chars is not None else len(text)
    if ev is None or not ev.spans:
        end = min(len(text), 2 * CONTEXT)
        cut = end < len(text) or total > len(text)
        body = esc(text[:end]) + (" …" if cut else "")
        why = what_else or "no span found for this rule: the document's start is shown"
        return (f'<pre class="doc">{body}</pre>'
                + note(f"{why} (characters 0–{end:,} of {total:,})"))
    s0, e0 = ev.spans[0]
    start = max(0, s0 - CONTEXT)
    if start:  # start at a word boundary when one is near
        sp = text.rfind(" ", start - 40, start + 40) if start > 40 else -1
        start = sp + 1 if sp >= 0 else start
    end = min(len(text), e0 + CONTEXT)
    parts, pos, marks = [], start, 0
    for s, e in ev.spans:
        if s >= end or marks >= MAX_MARKS:
            break
        e = min(e, end)
        if e <= pos:
            continue
        s = max(s, pos)
        parts.append(esc(text[pos:s]))
        if e - s > MAX_MARK:
            half = MAX_MARK // 2
            parts.append(f"<mark>{esc(text[s:s + half])}</mark> … {e - s - 2 * half:,} characters … "
                         f"<mark>{esc(text[e - half:e])}</mark>")
        else:
            parts.append(f"<mark>{esc(text[s:e])}</mark>")
        pos = e
        marks += 1
    parts.append(esc(text[pos:end]))
    head = "… " if start else ""
    tail = " …" if end < len(text) or total > len(text) else ""
    n_spans = len(ev.spans)
    shown = f"{marks} of {n_spans} highlighted" if n_spans > marks else f"{n_spans} highlighted"
    return (f'<pre class="doc">{head}{"".join(parts)}{tail}</pre>'
            + note(f"highlighted: {ev.what} ({shown}; characters {start:,}–{end:,} of {total:,}, "
                   f"first span at {s0:,}–{e0:,})"))


# -- near-duplicate diffs ---------------------------------------------------------------------------------
def _tokens(text: str) -> list[str]:
    """Words and the whitespace between them, so that joining gives the text back."""
    return re.findall(rf"\s+|[{_CJK}]|[^\s{_CJK}]+", text)


_UNIT_END = re.compile(r"(?<=[\n.!?。！？])(?=[^.!?。！？])")


def _units(text: str) -> list[str]:
    """Lines and sentences (pieces that end in a line break or a sentence mark), joined back = the text."""
    return [u for u in _UNIT_END.split(text) if u]


def _diff_ops(a: list[str], b: list[str]) -> list[tuple[str, list[str], list[str]]]:
    sm = difflib.SequenceMatcher(None, a, b, autojunk=False)
    return [(op, a[i1:i2], b[j1:j2]) for op, i1, i2, j1, j2 in sm.get_opcodes()]


def word_diff(rep: str, dup: str) -> tuple[str, int, int]:
    """HTML of ``dup`` against ``rep``, word by word (a Han or kana character is a word): words only in the
    representative in ``<del>``, words only in the removed duplicate in ``<ins>``, long unchanged stretches
    elided. Sentences and lines are matched first and only those that differ are diffed by word, so a long pair costs
    little. Returns (html, words deleted, words inserted)."""
    a_lines, b_lines = _units(rep[:DIFF_CHARS]), _units(dup[:DIFF_CHARS])
    ops: list[tuple[str, list[str], list[str]]] = []
    for op, la, lb in _diff_ops(a_lines, b_lines):
        if op == "equal":
            ops.append(("equal", _tokens("".join(la)), []))
        else:
            ops.extend(_diff_ops(_tokens("".join(la)), _tokens("".join(lb))))
    merged: list[list] = []  # adjacent stretches of the same kind joined
    for op, ta, tb in ops:
        kind = "equal" if op == "equal" else "change"
        if merged and merged[-1][0] == kind:
            merged[-1][1].extend(ta)
            merged[-1][2].extend(tb)
        else:
            merged.append([kind, list(ta), list(tb)])
    out, n_del, n_ins, changes = [], 0, 0, 0
    for k, (kind, ta, tb) in enumerate(merged):
        if kind == "equal":
            words = [i for i, t in enumerate(ta) if not t.isspace()]
            first, last = k == 0, k == len(merged) - 1
            keep_head = 0 if first else DIFF_SAME_WORDS
            keep_tail = 0 if last else DIFF_SAME_WORDS
            if len(words) > keep_head + keep_tail + 4:
                head = ta[: words[keep_head]] if keep_head else []
                tail = ta[words[-keep_tail]:] if keep_tail else []
                hidden = len(words) - keep_head - keep_tail
                out.append(esc("".join(head)) + f'<span class="same">[… {hidden:,} words the same …]</span>'
                           + esc("".join(tail)))
            else:
                out.append(esc("".join(ta)))
            continue
        changes += 1
        if changes > DIFF_MAX_CHANGES:
            out.append(f'<span class="same">[… {sum(1 for m in merged[k:] if m[0] != "equal"):,} more '
                       f"changed stretches not shown …]</span>")
            break
        # within a changed stretch: the word-level operations again, each shown in place
        for op, sa, sb in _diff_ops(ta, tb):
            if op == "equal":
                out.append(esc("".join(sa)))
                continue
            for toks, tag in ((sa, "del"), (sb, "ins")):
                if not toks:
                    continue
                words = sum(1 for t in toks if not t.isspace())
                if tag == "del":
                    n_del += words
                else:
                    n_ins += words
                piece = "".join(toks)
                if len(piece) > MAX_MARK:
                    piece = f"{piece[:MAX_MARK // 2]} … {words:,} words … {piece[-MAX_MARK // 2:]}"
                out.append(f"<{tag}>{esc(piece)}</{tag}>")
    return "".join(out), n_del, n_ins


def before_after(text: str, recorded: str, max_lines: int = 60) -> str:
    """HTML of a C4-cleaned text with the lines C4 recorded as removed (``c4_removed_lines``: one
    ``KEPT_BEFORE<tab>REASON<tab>LINE`` per line) put back in place, struck out and labelled with the
    reason; kept lines far from any removed one are elided."""
    removed: dict[int, list[tuple[str, str]]] = {}
    for entry in (recorded or "").split("\n"):
        parts = entry.split("\t", 2)
        if len(parts) == 3 and parts[0].isdigit():
            removed.setdefault(int(parts[0]), []).append((parts[1], parts[2]))
    kept = text.split("\n") if text else []
    near = {i + d for i in removed for d in (-2, -1, 0, 1)}
    out, shown, skipped = [], 0, 0

    def flush_skipped():
        nonlocal skipped
        if skipped:
            out.append(f'<span class="same">[… {skipped:,} kept line(s) …]</span>\n')
            skipped = 0

    for i in range(len(kept) + 1):
        for why, line in removed.get(i, []):
            flush_skipped()
            out.append(f'<del>{esc(line)}</del> <span class="why">[{esc(why)}]</span>\n')
        if i < len(kept):
            if i in near and shown < max_lines:
                flush_skipped()
                out.append(esc(kept[i]) + "\n")
                shown += 1
            else:
                skipped += 1
    flush_skipped()
    return '<pre class="doc diff">' + "".join(out).rstrip("\n") + "</pre>"


def unescape(s: str) -> str:  # for tests that compare a page's text
    return html.unescape(clean(s))
