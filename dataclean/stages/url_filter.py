"""URL filtering at ingest: a record whose URL's host is on a domain list is removed before anything else runs,
so a blocked page costs no extraction (RefinedWeb, Penedo et al. 2023 §G.1, and FineWeb filter URLs first).

The lists, their matching (a domain lists its subdomains) and the exclusions are the ones of
:mod:`dataclean.stages.lists` (``word_lists`` applies the same lists to the ``url`` column later, and to the
hosts written in the text). What this stage adds is the *category*: each file is a category named by its stem
(``blocklist``, ``zh-sensitive-lexicon-illegal-domains``), each ``<category>/domains`` of a UT1-style folder
its category (``adult``, ``gambling``…). A removal's ``detail`` is ``CATEGORY HOST``, the signal
``url_blocked_category`` holds the category of every blocked row, and the ledger counts them by category::

    dataclean sql OUT "select url_blocked_category, count(*) from rejected where rule = 'url_blocked' group by 1"

A host on several lists gets the first list's category (the order of ``domain_lists``).
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.stages.base import Check, Decisions, RuleSpec, Stage, StageResult, with_columns
from dataclean.stages.lists import (
    DEFAULT_DOMAIN_EXCLUDE,
    DEFAULT_DOMAIN_LISTS,
    UT1_DEFAULT_CATEGORIES,
    DomainSet,
    read_domains,
    resolve_list_path,
    url_hosts,
)


def categories_of(path: str, categories: Sequence[str] | None) -> list[tuple[str, list[str]]]:
    """``[(category, domains)]`` of one list entry: a file or a folder with a ``domains`` file is one category
    (its stem or folder name); a UT1-style folder of ``<category>/domains`` gives one per category."""
    p = resolve_list_path(path)
    if p.is_dir() and not (p / "domains").is_file():
        names = sorted(d.name for d in p.iterdir() if (d / "domains").is_file()) if categories is None \
            else list(categories)
        return [(name, read_domains(p, [name])) for name in names]
    name = p.name if p.is_dir() else p.name.split(".")[0]
    return [(name, read_domains(p, categories))]


class UrlFilter(Stage):
    kind = "url_filter"
    signal_fields = [pa.field("url_blocked_category", pa.string())]
    rule_specs = [RuleSpec("url_blocked", "url_blocked_category", ("domain_lists",), "flag",
                           "the host of the url column is on a domain list (by category)")]

    def __init__(self, domain_lists: Sequence[str] | None = None,
                 domain_categories: Sequence[str] | None = UT1_DEFAULT_CATEGORIES,
                 domain_exclude: Sequence[str] | None = None, name: str | None = None):
        super().__init__(name)
        if isinstance(domain_lists, str) or isinstance(domain_exclude, str):
            raise ValueError("url_filter.domain_lists and domain_exclude must be lists of files or folders")
        self.domain_lists = list(DEFAULT_DOMAIN_LISTS if domain_lists is None else domain_lists)
        self.domain_categories = None if domain_categories is None else list(domain_categories)
        self.domain_exclude = list(DEFAULT_DOMAIN_EXCLUDE if domain_exclude is None else domain_exclude)
        drop = {d for p in self.domain_exclude for d in read_domains(p)}
        self._sets: list[tuple[str, DomainSet]] = []
        for path in self.domain_lists:
            for category, domains in categories_of(path, self.domain_categories):
                self._sets.append((category, DomainSet(d for d in domains if d not in drop)))

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        n = batch.num_rows
        category = np.full(n, None, dtype=object)
        if "url" not in batch.schema.names or not self._sets:
            return StageResult(with_columns(batch, {"url_blocked_category": pa.nulls(n, pa.string())}))
        hosts = url_hosts(pc.cast(batch.column("url"), pa.string()))
        open_rows = np.ones(n, bool)
        for name, domains in self._sets:
            hit = domains.listed(hosts) & open_rows
            category[hit] = name
            open_rows &= ~hit
        blocked = ~open_rows
        cat = pa.array(category.tolist(), pa.string())
        out = with_columns(batch, {"url_blocked_category": cat})
        if not blocked.any():
            return StageResult(out)
        detail = pc.binary_join_element_wise(cat, pc.fill_null(hosts, ""), " ")
        checks = [Check("url_blocked", "blocked_domain", pa.array(blocked), value=1.0, threshold=1.0, detail=detail)]
        return StageResult(out, Decisions.from_checks(n, checks))
