"""The word-list and URL-list family: bad words per language, and a domain blocklist.

**Bad words.** The list for each row is chosen by its ``lang`` column (``lists: {en: PATH, zh: PATH}``,
paths relative to the rules folder, :func:`dataclean.config.rules_dir`); rows whose language has no list
get null signals and are never removed by this rule. The default lists are LDNOOBW ("List of Dirty,
Naughty, Obscene, and Otherwise Bad Words", CC-BY-4.0, the list C4 used; Raffel et al. 2020 §2.2) for
English and Chinese, minus the entries of an exclusion list per language (``exclude_lists``): LDNOOBW has
entries that are ordinary words in other senses (zh 性 in 性能/属性, 奶 in 牛奶, 处女 in 处女作, 刚度
"stiffness"; en ``tit`` the bird, ``escort``, ``suck``, clinical anatomy terms, ``negro`` in 1960s prose),
and plain matching of the raw list flags a third of Chinese Wikipedia (see ``rules/lists/README.md``).

* An entry that starts (ends) with an ASCII letter or digit only matches where the text has no ASCII
  letter, digit or ``_`` before (after) it — RE2 ``\\b`` — case-insensitively, so ``ass`` does not match
  ``class``; a space inside an entry matches any run of whitespace. Entries without ASCII at that edge
  (Chinese, Japanese) match as plain substrings: these scripts are written without spaces. Each match
  counts once (non-overlapping, longest entry first).
* ``lists_bad_words`` = matches; ``lists_bad_word_ratio`` = matches / words of
  :func:`dataclean.text.words_batch`, at most 1. The tokenizer makes every Han character a word, so for
  Chinese the ratio is matches per Han character (plus any Latin words and numbers).
* Rule ``lists_bad_words`` removes a row when the ratio is above ``max_bad_word_ratio`` **and** there are
  at least ``min_bad_words`` matches. The ratio threshold is BigScience's English flagged-word cutoff for
  ROOTS (Laurençon et al. 2022, "The BigScience ROOTS Corpus"; ``flagged_words_max_cutoff`` = 0.01 for
  ``en`` in bigscience-workshop/data_tooling ``ac_dc/parameters_filtering.py``; data-juicer's
  ``flagged_words_filter`` uses 0.045). A ratio alone removes any short text with one swear word (a
  song line "I don't give a fuck" has a ratio of 1/6), so the count guard (3, our choice) keeps single
  and double occurrences: one swear word never removes a document, whatever its length, and a long
  document needs one bad word per 100 words as well. Porn spam repeats its vocabulary and passes both
  bounds easily (SpamAssassin porn spam: "milf" 59 times, "porno" 7 times). For Chinese the default
  recipe sets ``by_lang: {zh: {max_bad_word_ratio: 0.02}}`` (BigScience used 0.001 per SentencePiece
  token with its own list): on the bench corpus 0.005 also removed a Douban review that discusses a
  novel's sexual content (4 matches in 318 characters, 0.013), while the profane Weibo rants that
  remain removed score 0.03–0.05.

**Domain blocklist.** ``domain_lists`` are files of one domain per line (``#`` comments; a line may also be a
URL, its host is taken) or folders in the layout of the Université Toulouse 1 blacklists (UT1, used by
RefinedWeb, Penedo et al. 2023 §G.1, and FineWeb): ``<folder>/<category>/domains``. A folder that has a
``domains`` file is read directly; otherwise the ``<category>/domains`` files of ``domain_categories`` are
read. A listed domain matches itself and all its subdomains (``example.com`` lists ``www.example.com``,
not ``badexample.com``), by checking every parent of each host (down to two labels) against the set.

* The ``url`` column (when present; may be null) gives ``lists_url_blocked``; rule ``lists_url_domain``
  removes the row (as RefinedWeb and FineWeb do with their URL filter).
* Hosts written in the text (``http://…``, ``www.…``, bare ``name.tld``, the domain of an e-mail address)
  give ``lists_blocked_hosts``, the number of host mentions on the list. Rule ``lists_text_domains``
  removes a row with at least ``min_blocked_hosts`` mentions (default 2: a spam page links its sites again
  and again, while an article may name a site once).
* ``lists_blocked_host`` is the first listed host of the row (``url`` column first, then the text), the
  ``detail`` of a removal.

Host extraction is one RE2 pass over the batch (hosts are marked, the rest is split away), the parents
are generated with a vectorised "drop the first label" loop, and membership is checked on each batch's
distinct candidates against a sorted array of 64-bit hashes of the list (a UT1 ``adult`` list of millions
of domains then costs ~8 bytes per domain, not a Python set), then spread to every mention with
``pc.is_in``. A hash collision would need 2^-64 luck per candidate.
"""
from __future__ import annotations

import functools
import os
import re
from pathlib import Path
from typing import Iterable, Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import xxhash

from dataclean.stages.base import Check, Decisions, RuleSpec, Stage, StageResult, with_columns
from dataclean.text.tokenize import words_batch

# -- list files -------------------------------------------------------------------------------------------


def resolve_list_path(path: str | os.PathLike) -> Path:
    """An absolute path as is; a relative one is taken in the rules folder (``rules/`` or the wheel's copy)."""
    p = Path(path)
    if p.is_absolute():
        return p
    from dataclean.rulesfolder import rules_dir

    return rules_dir() / p


def read_terms(path: str | os.PathLike) -> list[str]:
    """Entries of a list file: one per line, stripped; blank lines and lines starting with ``#`` skipped."""
    p = resolve_list_path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except OSError as exc:
        raise ValueError(f"cannot read list {p}: {exc.strerror}") from None
    return [t for t in (line.strip() for line in text.splitlines()) if t and not t.startswith("#")]


_RE2_SPECIAL = set("\\.^$|?*+()[]{}")


def _escape(term: str) -> str:
    out = []
    for ch in term:
        if ch in _RE2_SPECIAL:
            out.append("\\" + ch)
        elif ch == "\t" or ch == " ":
            out.append(" ")
        else:
            out.append(ch)
    return re.sub(" +", r"\\s+", "".join(out))


def _ascii_word_char(ch: str) -> bool:
    return ch.isascii() and (ch.isalnum() or ch == "_")


def terms_pattern(terms: Iterable[str]) -> str | None:
    """One case-insensitive RE2 alternation matching any of ``terms`` (None when there are none).

    An edge of a term that is an ASCII word character gets ``\\b`` (so Latin words match whole words);
    other edges (Han, kana, punctuation) get none (substring match). Longest terms come first, so of
    overlapping entries the longest is counted."""
    seen: dict[str, str] = {}
    for t in terms:
        t = " ".join(t.split())
        if t:
            seen.setdefault(t.casefold(), t)
    if not seen:
        return None
    parts = []
    for t in sorted(seen.values(), key=lambda s: (-len(s), s)):
        p = _escape(t)
        if _ascii_word_char(t[0]):
            p = r"\b" + p
        if _ascii_word_char(t[-1]):
            p = p + r"\b"
        parts.append(p)
    return "(?i)(?:" + "|".join(parts) + ")"


def load_terms(lists: Sequence[str | os.PathLike], exclude: Sequence[str | os.PathLike] = ()) -> list[str]:
    """Union of the entries of ``lists`` minus those of ``exclude`` (compared case-insensitively)."""
    drop = {t.casefold() for path in exclude for t in read_terms(path)}
    out: dict[str, str] = {}
    for path in lists:
        for t in read_terms(path):
            if t.casefold() not in drop:
                out.setdefault(t.casefold(), t)
    return list(out.values())


# -- domains ----------------------------------------------------------------------------------------------

# A host name: dot-separated labels of ASCII letters, digits and inner hyphens, ending in a top-level label
# that starts with a letter. \b keeps it from starting inside a word (foo_bar.com is not bar.com).
HOST = r"\b(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+[A-Za-z][A-Za-z0-9-]{0,61}[A-Za-z0-9]\b"
_MARK_OPEN, _MARK_CLOSE = "\x1e", "\x1f"  # record/unit separators: removed from text before marking
URL_HOST = r"(?i)^\s*(?:[a-z][a-z0-9+.-]*:)?(?://)?(?:[^/?#@\s]*@)?(?P<host>[^/?#:\s\[\]]+)"

UT1_DEFAULT_CATEGORIES = ("adult", "gambling", "phishing", "malware")
MAX_LABELS = 10  # parents are checked from at most the last 10 labels of a host


def normalize_domain(entry: str) -> str | None:
    """The host of a list entry (``www.Example.com``, ``http://x.example.com:81/path``, ``*.example.com``),
    lower-cased without a trailing dot; None when the entry has no dot (a TLD or junk)."""
    m = re.match(r"(?i)^\s*(?:[a-z][a-z0-9+.-]*://)?(?:[^/?#@\s]*@)?\*?\.?([^/?#:\s]+)", entry)
    if not m:
        return None
    host = m.group(1).strip(".").lower()
    return host if "." in host else None


def read_domains(path: str | os.PathLike, categories: Sequence[str] | None = UT1_DEFAULT_CATEGORIES) -> list[str]:
    """Domains of a list file, or of a UT1-style folder (``domains`` inside it, else ``<category>/domains``
    for each of ``categories``; ``None`` = every category)."""
    p = resolve_list_path(path)
    if p.is_dir():
        if (p / "domains").is_file():
            files = [p / "domains"]
        else:
            cats = sorted(d.name for d in p.iterdir() if (d / "domains").is_file()) if categories is None \
                else list(categories)
            files = [p / c / "domains" for c in cats]
            missing = [str(f) for f in files if not f.is_file()]
            if missing:
                raise ValueError(f"domain list folder {p}: no {', '.join(missing)}")
    elif p.is_file():
        files = [p]
    else:
        raise ValueError(f"cannot read domain list {p}: no such file or folder")
    out: list = []
    for f in files:
        st = os.stat(f)
        out.extend(_domains_of_file(str(f), st.st_mtime_ns, st.st_size))
    return out


@functools.lru_cache(maxsize=32)
def _domains_of_file(path: str, mtime_ns: int, size: int) -> tuple[str, ...]:
    """The domains of one list file, read once per process while it is unchanged (a run builds its stages
    several times: validation, the pipeline, the report; the shipped lists took 0.14 s per build)."""
    out = []
    with open(path, encoding="utf-8", errors="replace") as fh:
        for line in fh:
            line = line.strip()
            if line and not line.startswith("#"):
                d = normalize_domain(line)
                if d:
                    out.append(d)
    return tuple(out)


def _hash64(values: Iterable[str]) -> np.ndarray:
    return np.fromiter((xxhash.xxh3_64_intdigest(v.encode("utf-8")) for v in values), dtype=np.uint64)


class DomainSet:
    """A set of domains matched with their subdomains. Stored as sorted 64-bit hashes (8 bytes/domain)."""

    def __init__(self, domains: Iterable[str]):
        self._hashes = np.unique(_hash64({d for d in domains if d}))

    def __len__(self) -> int:
        return len(self._hashes)

    def _members(self, values: pa.Array) -> pa.Array:
        """Boolean per value: is it exactly a listed domain (checked once per distinct value)."""
        uniq = pc.unique(values)
        if len(uniq) == 0 or len(self._hashes) == 0:
            return pa.array(np.zeros(len(values), bool))
        h = _hash64(uniq.to_pylist())
        pos = np.searchsorted(self._hashes, h).clip(max=len(self._hashes) - 1)
        listed = uniq.filter(pa.array(self._hashes[pos] == h))
        return pc.is_in(values, value_set=listed)

    def listed(self, hosts: pa.Array) -> np.ndarray:
        """Boolean per host (lower-case, no trailing dot): the host or one of its parent domains (down
        to two labels) is listed."""
        n = len(hosts)
        hit = np.zeros(n, dtype=bool)
        if n == 0 or len(self._hashes) == 0:
            return hit
        cur = pc.fill_null(hosts, "")
        if pc.max(pc.count_substring(cur, ".")).as_py() > MAX_LABELS - 1:
            # keep the last MAX_LABELS labels, so a host like a.a.a.…(thousands) costs a bounded loop
            cur = pc.replace_substring_regex(cur, rf"^(?:[^.]*\.)*?((?:[^.]*\.){{0,{MAX_LABELS - 1}}}[^.]*)$",
                                             r"\1")
        where = np.arange(n)
        while len(cur):
            hit[where] |= self._members(cur).to_numpy(zero_copy_only=False)
            cur = pc.replace_substring_regex(cur, r"^[^.]*\.", "", max_replacements=1)
            more = pc.match_substring(cur, ".").to_numpy(zero_copy_only=False) & ~hit[where]
            cur, where = cur.filter(pa.array(more)), where[more]
        return hit


def hosts_in_text(texts: pa.Array) -> tuple[pa.Array, np.ndarray]:
    """Every host name written in each document, lower-cased, in order: (flat hosts, row of each)."""
    texts = pc.fill_null(texts, "")
    if pc.any(pc.match_substring_regex(texts, f"[{_MARK_OPEN}{_MARK_CLOSE}]")).as_py():
        texts = pc.replace_substring_regex(texts, f"[{_MARK_OPEN}{_MARK_CLOSE}]", "")
    has = pc.match_substring_regex(texts, HOST)
    rows = np.flatnonzero(has.to_numpy(zero_copy_only=False))
    if len(rows) == 0:
        return pa.array([], pa.string()), np.zeros(0, np.int64)
    sub = texts.take(pa.array(rows))
    marked = pc.replace_substring_regex(sub, f"({HOST})", f"{_MARK_OPEN}\\1{_MARK_CLOSE}")
    # "pre<host1>mid<host2>post": split on each close..open stretch, then cut "pre<" and ">post".
    parts = pc.split_pattern_regex(marked, f"{_MARK_CLOSE}[^{_MARK_OPEN}]*{_MARK_OPEN}")
    flat = pc.replace_substring_regex(pc.list_flatten(parts),
                                      f"^[^{_MARK_OPEN}]*{_MARK_OPEN}|{_MARK_CLOSE}[^{_MARK_OPEN}]*$", "")
    parent = rows[pc.list_parent_indices(parts).to_numpy()]
    keep = pc.greater(pc.utf8_length(flat), 0)
    return pc.utf8_lower(flat.filter(keep)), parent[keep.to_numpy(zero_copy_only=False)]


def url_hosts(urls: pa.Array) -> pa.Array:
    """The host of each URL (lower-case, no trailing dot; null for null or hostless URLs)."""
    host = pc.struct_field(pc.extract_regex(urls, URL_HOST), [0])
    host = pc.utf8_rtrim(pc.utf8_lower(host), ".")
    return pc.if_else(pc.match_substring(host, "."), host, pa.scalar(None, pa.string()))


# -- the stage --------------------------------------------------------------------------------------------

DEFAULT_LISTS = {"en": "lists/ldnoobw/en.txt", "zh": "lists/ldnoobw/zh.txt"}
DEFAULT_EXCLUDE = {"en": "lists/ldnoobw/en-exclude.txt", "zh": "lists/ldnoobw/zh-exclude.txt"}
DEFAULT_DOMAIN_LISTS = ["lists/url/blocklist.txt", "lists/url/zh-sensitive-lexicon-illegal-domains.txt"]
DEFAULT_DOMAIN_EXCLUDE = ["lists/url/exclude.txt"]


class WordLists(Stage):
    """Bad-word ratio per language and a domain blocklist (see the module docstring for the matching rules).

    Parameters (``None`` disables a rule):

    * ``lists`` — ``{lang: path}`` of bad-word lists (LDNOOBW en and zh by default);
      ``exclude_lists`` — ``{lang: path}`` of entries not to count (ours: ambiguous entries).
    * ``max_bad_word_ratio`` = 0.01 (BigScience ROOTS, English), ``min_bad_words`` = 3 (our guard);
      ``by_lang: {zh: {max_bad_word_ratio: 0.02}}`` in the default recipe.
    * ``domain_lists`` — files and UT1-style folders of domains (default: our small ``url/blocklist.txt`` and
      ``url/zh-sensitive-lexicon-illegal-domains.txt``, 14.6k Chinese phishing/gambling/porn domains);
      ``domain_exclude`` — files of list entries not to block (``url/exclude.txt``: free-hosting services
      and placeholder domains found in those lists); ``domain_categories`` — the UT1 categories
      read from a folder of categories (``adult``, ``gambling``, ``phishing``, ``malware`` by default;
      ``null`` for all, which includes harmless categories such as ``bank`` or ``jobsearch``).
    * ``block_url_column`` = true: remove rows whose ``url`` host is listed (RefinedWeb/FineWeb practice).
    * ``min_blocked_hosts`` = 2: remove rows that mention listed hosts this often in the text.
    """

    kind = "word_lists"
    signal_fields = [
        pa.field("lists_bad_words", pa.int64()),
        pa.field("lists_bad_word_ratio", pa.float64()),
        pa.field("lists_url_blocked", pa.bool_()),
        pa.field("lists_blocked_hosts", pa.int64()),
        pa.field("lists_blocked_host", pa.string()),
    ]
    rule_specs = [
        RuleSpec("lists_url_domain", "lists_url_blocked", ("block_url_column",), "flag",
                 "the host of the url column is on a domain list"),
        RuleSpec("lists_text_domains", "lists_blocked_hosts", ("min_blocked_hosts",), "max",
                 "removed when listed hosts are mentioned in the text at least min_blocked_hosts times"),
        RuleSpec("lists_bad_words", "lists_bad_word_ratio", ("max_bad_word_ratio", "min_bad_words"), "max",
                 "bad words per word (zh: per Han character), with at least min_bad_words matches"),
    ]

    def __init__(self, lists: Mapping[str, str] | None = None, exclude_lists: Mapping[str, str] | None = None,
                 max_bad_word_ratio: float | None = 0.01, min_bad_words: int = 3,
                 domain_lists: Sequence[str] | None = None,
                 domain_categories: Sequence[str] | None = UT1_DEFAULT_CATEGORIES,
                 domain_exclude: Sequence[str] | None = None,
                 block_url_column: bool = True, min_blocked_hosts: int | None = 2,
                 by_lang: dict | None = None, name: str | None = None):
        super().__init__(name)
        self.lists = dict(DEFAULT_LISTS if lists is None else lists)
        self.exclude_lists = dict(DEFAULT_EXCLUDE if exclude_lists is None else exclude_lists)
        unknown = set(self.exclude_lists) - set(self.lists)
        if unknown:
            raise ValueError(f"word_lists.exclude_lists: no list for language(s) {', '.join(sorted(unknown))}")
        if min_bad_words < 1:
            raise ValueError("word_lists.min_bad_words must be >= 1")
        if min_blocked_hosts is not None and min_blocked_hosts < 1:
            raise ValueError("word_lists.min_blocked_hosts must be >= 1 (or null to disable)")
        self.max_bad_word_ratio = max_bad_word_ratio
        self.min_bad_words = min_bad_words
        self.domain_lists = list(DEFAULT_DOMAIN_LISTS if domain_lists is None else domain_lists)
        self.domain_categories = None if domain_categories is None else list(domain_categories)
        self.block_url_column = block_url_column
        self.min_blocked_hosts = min_blocked_hosts
        self._patterns: dict[str, str] = {}
        for lang, path in self.lists.items():
            excl = [self.exclude_lists[lang]] if lang in self.exclude_lists else []
            pat = terms_pattern(load_terms([path], excl))
            if pat is not None:
                self._patterns[lang] = pat
        self.domain_exclude = list(DEFAULT_DOMAIN_EXCLUDE if domain_exclude is None else domain_exclude)
        drop = {d for p in self.domain_exclude for d in read_domains(p)}
        self._domains = DomainSet(d for p in self.domain_lists for d in read_domains(p, self.domain_categories)
                                  if d not in drop)
        self.set_by_lang(by_lang)

    # -- signals ------------------------------------------------------------------------------------------
    def bad_words(self, batch: pa.RecordBatch) -> tuple[pa.Array, pa.Array]:
        """(matches, matches per word) per row; null where the row's language has no list."""
        n = batch.num_rows
        hits = np.zeros(n, np.int64)
        has_list = np.zeros(n, bool)
        if "lang" in batch.schema.names and self._patterns:
            text = pc.fill_null(batch.column("text"), "")
            lang = batch.column("lang")
            for code, pattern in self._patterns.items():
                rows = np.flatnonzero(pc.fill_null(pc.equal(lang, code), False).to_numpy(zero_copy_only=False))
                if len(rows):
                    has_list[rows] = True
                    hits[rows] = pc.count_substring_regex(text.take(pa.array(rows)), pattern).to_numpy()
        ratio = np.zeros(n, np.float64)
        counted = np.flatnonzero(hits > 0)  # the ratio of a row without matches is 0: tokenize only the rest
        if len(counted):
            words = pc.list_value_length(words_batch(batch.column("text").take(pa.array(counted))))
            # clamped to 1: an entry such as the emoji 🖕 matches where the tokenizer sees no word
            ratio[counted] = np.minimum(hits[counted] / np.maximum(words.to_numpy(), 1), 1.0)
        return pa.array(hits, pa.int64(), mask=~has_list), pa.array(ratio, pa.float64(), mask=~has_list)

    def blocked(self, batch: pa.RecordBatch) -> tuple[pa.Array, pa.Array, pa.Array]:
        """(url host listed, listed host mentions in the text, first listed host) per row."""
        n = batch.num_rows
        url_hit = np.zeros(n, bool)
        first: list[str | None] = [None] * n
        if "url" in batch.schema.names and len(self._domains):
            hosts = url_hosts(pc.cast(batch.column("url"), pa.string()))
            url_hit = self._domains.listed(hosts)
            for i in np.flatnonzero(url_hit):
                first[i] = hosts[int(i)].as_py()
        counts = np.zeros(n, np.int64)
        if len(self._domains):
            hosts, owner = hosts_in_text(batch.column("text"))
            hit = self._domains.listed(hosts)
            counts = np.bincount(owner[hit], minlength=n).astype(np.int64)
            rows, idx = np.unique(owner[hit], return_index=True)
            if len(rows):
                found = hosts.filter(pa.array(hit)).take(pa.array(idx)).to_pylist()
                for r, h in zip(rows.tolist(), found):
                    if first[r] is None:
                        first[r] = h
        return pa.array(url_hit), pa.array(counts, pa.int64()), pa.array(first, pa.string())

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        n = batch.num_rows
        hits, ratio = self.bad_words(batch)
        url_blocked, blocked_hosts, blocked_host = self.blocked(batch)
        out = with_columns(batch, {
            "lists_bad_words": hits,
            "lists_bad_word_ratio": ratio,
            "lists_url_blocked": url_blocked,
            "lists_blocked_hosts": blocked_hosts,
            "lists_blocked_host": blocked_host,
        })
        checks = []
        if self.block_url_column:
            checks.append(Check("lists_url_domain", "blocked_domain", url_blocked, value=1.0, threshold=1.0,
                                detail=blocked_host))
        if self.min_blocked_hosts is not None:
            checks.append(Check("lists_text_domains", "blocked_domain",
                                pc.greater_equal(blocked_hosts, self.min_blocked_hosts),
                                value=blocked_hosts, threshold=float(self.min_blocked_hosts), detail=blocked_host))
        max_ratio = self.per_row(batch, "max_bad_word_ratio")
        min_hits = self.per_row(batch, "min_bad_words")
        failed = pc.and_(pc.greater(ratio, max_ratio), pc.greater_equal(hits, min_hits))
        checks.append(Check("lists_bad_words", "bad_words", failed, value=ratio, threshold=max_ratio))
        return StageResult(out, Decisions.from_checks(n, checks))
