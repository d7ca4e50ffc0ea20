"""PII masking: personal data in the text is replaced in place, and a page that is mostly personal data
(a contact list, a leaked table) is removed.

What is found and how each kind is validated is in :mod:`dataclean.text.pii`. The stage rewrites ``text``
the way C4's line removal does: the document is kept, its text changes, and the change is counted in its
signals (``pii_email`` … per kind, ``pii_chars`` masked characters, ``pii_share`` of the document's
characters). ``dataclean stats`` and the report sum them per kind and source (``stats/rewrites.parquet``).

Parameters:

* ``kinds`` — what to mask; default ``[email, ip, phone, cn_id]`` (FineWeb masks e-mails and IPs by default;
  phones and Chinese IDs are the other kinds with a validator that keeps lookalikes out). Also
  ``bank_card``, ``credential`` (``user:password@`` in URLs) and ``api_key``.
* ``mode`` — ``token``: ``<EMAIL>``, ``<IP>``, ``<PHONE>``, ``<ID>``, ``<CARD>``, ``<CREDENTIAL>``,
  ``<KEY>``; ``hash``: the token with a stable hash of the value, ``<EMAIL:3fa9c2d1>`` (``hash_salt``
  seeds it, so a team can keep its salt private).
* ``tokens`` — replacement tokens per kind, overriding the defaults.
* ``public_ip_only`` — mask only public IP addresses (default true, as datatrove's ``PIIFormatter``).
* ``max_pii_share`` / ``min_pii_matches`` — rule ``pii_mostly``: a document with at least
  ``min_pii_matches`` (10) matches covering more than ``max_pii_share`` (0.3) of its characters is removed
  (on bench shards 0–1: four mails listing 25–103 addresses; at 5 matches also two short mails);
  ``max_pii_share: null`` turns the rule off.

The ledger keeps a removed document's *masked* text: the ledger is for review, and it should not be where
the addresses survive.
"""
from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from dataclean.stages.base import Check, Decisions, RuleSpec, Stage, StageResult, batch_text, with_columns
from dataclean.text import pii

COUNT_COLUMNS = {kind: f"pii_{kind}" for kind in pii.KINDS}


class PIIMask(Stage):
    kind = "pii"
    rewrites_text = True
    signal_fields = [pa.field(COUNT_COLUMNS[k], pa.int32()) for k in pii.KINDS] + [
        pa.field("pii_chars", pa.int64()),
        pa.field("pii_share", pa.float64()),
    ]
    #: Signal columns that count rewrites: summed per source by the stats (``stats/rewrites.parquet``).
    rewrite_columns = tuple(COUNT_COLUMNS.values()) + ("pii_chars",)
    rule_specs = [RuleSpec("pii_mostly", "pii_share", ("max_pii_share", "min_pii_matches"), "max",
                           "share of the characters that are personal data (contact lists)")]

    def __init__(self, kinds: list[str] | tuple = pii.DEFAULT_KINDS, mode: str = "token",
                 tokens: dict | None = None, hash_salt: int = 0, public_ip_only: bool = True,
                 max_pii_share: float | None = 0.3, min_pii_matches: int = 10, name: str | None = None):
        super().__init__(name)
        if isinstance(kinds, str) or not all(isinstance(k, str) for k in kinds):
            raise ValueError(f"pii.kinds must be a list of kinds ({', '.join(pii.KINDS)})")
        unknown = [k for k in kinds if k not in pii.KINDS]
        if unknown:
            raise ValueError(f"pii.kinds: unknown kind(s) {', '.join(unknown)}; the kinds are {', '.join(pii.KINDS)}")
        self.kinds = [k for k in pii.KINDS if k in set(kinds)]
        if mode not in ("token", "hash"):
            raise ValueError(f"pii.mode must be 'token' or 'hash', not {mode!r}")
        self.mode = mode
        tokens = dict(tokens or {})
        bad = [k for k in tokens if k not in pii.KINDS]
        if bad:
            raise ValueError(f"pii.tokens: unknown kind(s) {', '.join(bad)}; the kinds are {', '.join(pii.KINDS)}")
        if not all(isinstance(v, str) and v for v in tokens.values()):
            raise ValueError("pii.tokens: each replacement must be a non-empty string")
        self.tokens = tokens
        self._tokens = {**pii.TOKENS, **tokens}
        if not isinstance(hash_salt, int) or isinstance(hash_salt, bool) or not 0 <= hash_salt < 2 ** 64:
            raise ValueError("pii.hash_salt must be an integer in [0, 2**64)")
        self.hash_salt = hash_salt
        self.public_ip_only = bool(public_ip_only)
        if max_pii_share is not None and not (isinstance(max_pii_share, (int, float)) and 0 <= max_pii_share <= 1):
            raise ValueError("pii.max_pii_share must be a share in [0, 1] or null")
        self.max_pii_share = None if max_pii_share is None else float(max_pii_share)
        if not isinstance(min_pii_matches, int) or isinstance(min_pii_matches, bool) or min_pii_matches < 1:
            raise ValueError("pii.min_pii_matches must be an integer >= 1")
        self.min_pii_matches = min_pii_matches

    def apply(self, batch: pa.RecordBatch) -> StageResult:
        text = batch_text(batch)
        n = len(text)
        counts = {k: np.zeros(n, np.int32) for k in pii.KINDS}
        chars = np.zeros(n, np.int64)
        run = pii.searches(self.kinds)
        new_text = text
        # 1. documents: one RE2 scan for any prefilter; most documents stop here
        any_doc = pc.match_substring_regex(text, "|".join(f"(?:{pii.PREFILTERS[s]})" for s in run))
        docs = np.flatnonzero(any_doc.to_numpy(zero_copy_only=False))
        if len(docs):
            # 2. their lines (no kind spans a newline), each search's prefilter per line, vectorised
            sub = text.take(pa.array(docs))
            split = pc.split_pattern(sub, "\n")
            flat = pc.list_flatten(split)
            parent = docs[pc.list_parent_indices(split).to_numpy()]
            line_cands = {s: pc.match_substring_regex(flat, pii.PREFILTERS[s]).to_numpy(zero_copy_only=False)
                          for s in run}
            any_line = np.zeros(len(flat), bool)
            for m in line_cands.values():
                any_line |= m
            lines = np.flatnonzero(any_line)
            # 3. Python regexes and validators on the candidate lines only
            changed, masked = [], []
            for j, line in zip(lines.tolist(), flat.take(pa.array(lines)).to_pylist()):
                matches = pii.find(line, self.kinds, self.public_ip_only,
                                   only=[s for s in run if line_cands[s][j]])
                if not matches:
                    continue
                d = parent[j]
                for m in matches:
                    counts[m.kind][d] += 1
                    chars[d] += m.end - m.start
                changed.append(j)
                masked.append(pii.mask(line, matches, self.mode, self._tokens, self.hash_salt))
            if changed:
                line_mask = np.zeros(len(flat), bool)
                line_mask[changed] = True
                flat = pc.replace_with_mask(flat, pa.array(line_mask), pa.array(masked, pa.string()))
                joined = pc.binary_join(pa.ListArray.from_arrays(split.offsets, flat), "\n")
                doc_mask = np.zeros(n, bool)
                doc_mask[np.unique(parent[changed])] = True
                keep = np.zeros(len(docs), bool)
                keep[np.searchsorted(docs, np.unique(parent[changed]))] = True
                new_text = pc.replace_with_mask(text, pa.array(doc_mask), joined.filter(pa.array(keep)))
        length = pc.utf8_length(text).to_numpy(zero_copy_only=False).astype(np.float64)
        share = np.divide(chars, length, out=np.zeros(n), where=length > 0)
        cols = {COUNT_COLUMNS[k]: pa.array(counts[k]) for k in pii.KINDS}
        cols.update({"text": new_text, "pii_chars": pa.array(chars), "pii_share": pa.array(share)})
        out = with_columns(batch, cols)
        decisions = None
        if self.max_pii_share is not None:
            total = sum(counts[k] for k in pii.KINDS)
            failed = (share > self.max_pii_share) & (total >= self.min_pii_matches)
            if failed.any():
                decisions = Decisions.from_checks(n, [Check(
                    "pii_mostly", "mostly personal data", pa.array(failed), pa.array(share), self.max_pii_share,
                    pa.array([_detail(counts, i, int(total[i])) if failed[i] else None for i in range(n)],
                             pa.string()))])
        return StageResult(out, decisions)


def _detail(counts: dict, i: int, total: int) -> str:
    """``12 matches: email 10, phone 2``."""
    parts = [f"{k} {int(counts[k][i])}" for k in pii.KINDS if counts[k][i]]
    return f"{total} matches: " + ", ".join(parts)
