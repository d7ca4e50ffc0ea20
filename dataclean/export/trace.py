"""``dataclean trace EXPORT``: from a training position (sample, step, or a window of token ids) to the documents
behind it, with what ``inspect`` knows of each and the anomalies of the tokens in the span.

Packing, i.e. which tokens make sample ``i``:

* ``sequential`` (dataclean's own, the default): the export's documents, end-of-document tokens included, as
  one stream in export order; sample ``i`` is tokens ``[i*L, i*L + L + 1)`` of the stream (``L`` =
  ``--seq-len``; the extra token is the last target, as Megatron's ``add_extra_token_to_sequence``), so
  consecutive samples share one token and there are ``(tokens - 1) // L`` samples.
* ``--shuffle-seed S``: the same windows in the order ``numpy.random.RandomState(S).permutation(n_samples)``:
  sample ``i`` is window ``perm[i]``.
* ``--megatron-cache DIR``: the ``*-document_index.npy``, ``*-sample_index.npy`` and ``*-shuffle_index.npy``
  that Megatron's GPTDataset wrote to its cache path for this data, read as Megatron reads them
  (:func:`dataclean.export.megatron.sample_spans`).

``--step S --global-batch-size B`` is samples ``S*B … S*B + B - 1`` (a step consumes one global batch).

Token anomalies of a span: the longest run of one token id; the share of rare tokens — ids in the last 10% of
the tokenizer's base vocabulary, which for BPE vocabularies are the merges learned last, i.e. the least
frequent in its training data (an approximation: the tokenizer file keeps no counts); and byte-fallback
tokens — single-byte tokens ``<0xNN>`` of byte-fallback vocabularies, and the lone bytes 0x80–0xFF of
byte-level BPE, which appear where a character was not in the vocabulary (rare scripts, broken encodings).
"""
from __future__ import annotations

import functools
import json
import os

import numpy as np
import pyarrow.parquet as pq

from dataclean.export import megatron


class TraceError(Exception):
    """The export cannot be traced (not an export folder, a position out of range): one line."""


class Export:
    """An export folder, opened: lengths and offsets of its documents, its tokens (memory-mapped)."""

    def __init__(self, folder: str):
        self.folder = folder
        meta = os.path.join(folder, "export.json")
        if not os.path.isfile(meta):
            raise TraceError(f"{folder}: no export.json; trace reads a folder written by `dataclean export`")
        with open(meta, encoding="utf-8") as fh:
            self.meta = json.load(fh)
        if not self.meta.get("finished"):
            raise TraceError(f"{folder}: the export did not finish; run the same `dataclean export` again")
        self.dtype = np.dtype(self.meta["dtype"])
        if self.meta["format"] == "megatron":
            self.idx = megatron.read_idx(os.path.join(folder, "export.idx"))
            self.lengths = np.asarray(self.idx.lengths)
            self.tokens = np.memmap(os.path.join(folder, "export.bin"), self.dtype, "r")
        else:
            side = pq.read_table(os.path.join(folder, "export.docs.parquet"), columns=["n_tokens"])
            self.lengths = side.column("n_tokens").to_numpy()
            self.tokens = None
        self.offsets = np.zeros(len(self.lengths) + 1, np.int64)
        np.cumsum(self.lengths, out=self.offsets[1:])
        self.total = int(self.offsets[-1])

    @property
    def docs(self) -> int:
        return len(self.lengths)

    def doc_tokens(self, ordinal: int, start: int, end: int) -> np.ndarray:
        o = int(self.offsets[ordinal])
        if self.tokens is not None:
            return np.asarray(self.tokens[o + start:o + end]).astype(np.int64)
        return self._parquet_tokens(ordinal)[start:end]

    def _parquet_tokens(self, ordinal: int) -> np.ndarray:
        parts = sorted(f for f in os.listdir(os.path.join(self.folder, "tokens")) if f.endswith(".parquet"))
        base = 0
        for f in parts:
            pf = pq.ParquetFile(os.path.join(self.folder, "tokens", f))
            n = pf.metadata.num_rows
            if ordinal < base + n:
                t = pf.read(columns=["tokens"]).column("tokens")
                return np.asarray(t[ordinal - base].as_py(), np.int64)
            base += n
        raise TraceError(f"document {ordinal} is not in {self.folder}/tokens")

    def sidecar_rows(self, ordinals: list[int]) -> dict[int, dict]:
        """The sidecar rows of ``ordinals``, reading only the row groups that hold them."""
        pf = pq.ParquetFile(os.path.join(self.folder, "export.docs.parquet"))
        starts = np.cumsum([0] + [pf.metadata.row_group(i).num_rows for i in range(pf.num_row_groups)])
        out: dict[int, dict] = {}
        by_group: dict[int, list[int]] = {}
        for o in sorted(set(ordinals)):
            g = int(np.searchsorted(starts, o, side="right") - 1)
            by_group.setdefault(g, []).append(o)
        for g, os_ in by_group.items():
            t = pf.read_row_group(g)
            for o in os_:
                row = t.slice(o - int(starts[g]), 1).to_pylist()[0]
                row.pop("export_fingerprint", None)
                row.pop("run_fingerprint", None)
                out[o] = row
        return out


# -- positions -> spans ---------------------------------------------------------------------------------------

def sequential_samples(ex: Export, seq_len: int) -> int:
    return max(0, (ex.total - 1) // seq_len)


def stream_spans(ex: Export, a: int, b: int) -> list[tuple[int, int, int]]:
    """(document, first token, end token) of the stream's tokens [a, b)."""
    out = []
    d = int(np.searchsorted(ex.offsets, a, side="right") - 1)
    pos = a
    while pos < b and d < ex.docs:
        start = pos - int(ex.offsets[d])
        end = min(b, int(ex.offsets[d + 1])) - int(ex.offsets[d])
        if end > start:
            out.append((d, start, end))
        pos = int(ex.offsets[d + 1])
        d += 1
    return out


def sample_spans(ex: Export, i: int, seq_len: int, shuffle_seed: int | None = None,
                 megatron_cache: tuple | None = None) -> list[tuple[int, int, int]]:
    if megatron_cache is not None:
        doc_idx, sample_idx, shuffle_idx = megatron_cache
        if not 0 <= i < len(shuffle_idx):
            raise TraceError(f"sample {i} is out of range: the Megatron index has {len(shuffle_idx):,} samples")
        return [(int(d), int(s), int(e)) for d, s, e in megatron.sample_spans(doc_idx, sample_idx, shuffle_idx, i,
                                                                            lengths=ex.lengths) if e > s]
    n = sequential_samples(ex, seq_len)
    if not 0 <= i < n:
        raise TraceError(f"sample {i} is out of range: the export has {n:,} samples of {seq_len} tokens")
    window = int(_permutation(n, shuffle_seed)[i]) if shuffle_seed is not None else i
    return stream_spans(ex, window * seq_len, window * seq_len + seq_len + 1)


@functools.lru_cache(maxsize=4)
def _permutation(n: int, seed: int) -> np.ndarray:
    return np.random.RandomState(seed).permutation(n)


def find_tokens(ex: Export, window: np.ndarray, limit: int = 20) -> list[tuple[int, int, int]]:
    """Where the token ids ``window`` occur in the export: (document, first token, end token), at most ``limit``.
    A linear scan of the ``.bin`` in chunks (~1 GB/s): candidates on the first id, checked on the whole window."""
    if ex.tokens is None:
        raise TraceError("--tokens needs a megatron export (the .bin); this export is parquet")
    w = np.asarray(window, np.int64)
    if not len(w):
        raise TraceError("--tokens: the file holds no token ids")
    hits = []
    chunk = 1 << 24
    for a in range(0, ex.total, chunk):
        b = min(ex.total, a + chunk + len(w) - 1)
        block = np.asarray(ex.tokens[a:b]).astype(np.int64)
        cand = np.flatnonzero(block[: max(0, len(block) - len(w) + 1)] == w[0])
        for c in cand:
            if np.array_equal(block[c:c + len(w)], w):
                p = a + int(c)
                d = int(np.searchsorted(ex.offsets, p, side="right") - 1)
                hits.append((d, p - int(ex.offsets[d]), p - int(ex.offsets[d]) + len(w)))
                if len(hits) >= limit:
                    return hits
    return hits


# -- token anomalies ------------------------------------------------------------------------------------------

def _bytes_to_unicode() -> dict[int, str]:
    """GPT-2's byte-level alphabet (used by every byte-level BPE): printable Latin-1 bytes stand for themselves,
    the other bytes for code points from U+0100 on, in byte order."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    out, extra = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(0x100 + extra)
            extra += 1
    return out


class TokenInfo:
    """What the anomalies need from the tokenizer: its base vocabulary size and the byte-fallback ids."""

    def __init__(self, tokenizer_path: str | None):
        self.rare_from = None
        self.byte_ids: set[int] = set()
        self.vocab_size = None
        if not tokenizer_path or not os.path.isfile(tokenizer_path):
            return
        from dataclean.export.writer import load_tokenizer
        tok = load_tokenizer(tokenizer_path)
        base = tok.get_vocab_size(with_added_tokens=False)
        self.vocab_size = tok.get_vocab_size(with_added_tokens=True)
        self.rare_from = int(base * 0.9)
        vocab = tok.get_vocab(with_added_tokens=False)
        for b in range(0x80, 0x100):
            for name in (f"<0x{b:02X}>", _bytes_to_unicode()[b]):
                i = vocab.get(name)
                if i is not None:
                    self.byte_ids.add(int(i))
        self.special = {int(i) for name, i in tok.get_vocab(with_added_tokens=True).items() if name not in vocab}

    def anomalies(self, ids: np.ndarray) -> dict:
        out = {"tokens": int(len(ids)), "longest_run_token": None, "longest_run": 0, "rare_share": None,
               "byte_fallback": None}
        if not len(ids):
            return out
        change = np.flatnonzero(np.diff(ids) != 0)
        bounds = np.concatenate([[0], change + 1, [len(ids)]])
        runs = np.diff(bounds)
        k = int(np.argmax(runs))
        out["longest_run"] = int(runs[k])
        out["longest_run_token"] = int(ids[bounds[k]])
        if self.rare_from is not None:
            regular = ids[~np.isin(ids, list(self.special))] if self.special else ids
            out["rare_share"] = round(float(np.mean(regular >= self.rare_from)), 4) if len(regular) else 0.0
            out["byte_fallback"] = int(np.isin(ids, list(self.byte_ids)).sum()) if self.byte_ids else 0
        return out


# -- the command ----------------------------------------------------------------------------------------------

def trace(folder: str, samples: list[int] | None = None, seq_len: int | None = None, shuffle_seed: int | None = None,
          megatron_cache: str | None = None, megatron_prefix: str | None = None, tokens: np.ndarray | None = None,
          with_inspect: bool = True) -> dict:
    """``{"positions": [{"sample": i, "documents": [...]}, ...]}`` (see the module docstring)."""
    ex = Export(folder)
    info = TokenInfo(ex.meta.get("tokenizer", {}).get("path"))
    cache = megatron.load_cached(megatron_cache, megatron_prefix) if megatron_cache else None
    positions = []
    if tokens is not None:
        hits = find_tokens(ex, tokens)
        positions.append({"tokens": [int(t) for t in tokens[:50]], "matches": len(hits),
                          "spans": [list(h) for h in hits]})
    for i in samples or []:
        if cache is None and not seq_len:
            raise TraceError("give --seq-len (the training sequence length), or --megatron-cache")
        positions.append({"sample": i, "spans": [list(s) for s in sample_spans(ex, i, seq_len or 0, shuffle_seed,
                                                                               cache)]})
    ordinals = sorted({s[0] for p in positions for s in p["spans"]})
    rows = ex.sidecar_rows(ordinals)
    inspected = _inspect(ex, [rows[o]["id"] for o in ordinals if rows[o].get("id")]) if with_inspect else {}
    for p in positions:
        docs = []
        for d, a, b in p.pop("spans"):
            row = rows[d]
            ids = ex.doc_tokens(d, a, b)
            docs.append({"ordinal": d, **row, "span": [a, b], "doc_tokens": int(ex.lengths[d]),
                         "token_anomalies": info.anomalies(ids), "inspect": inspected.get(row.get("id"))})
        p["documents"] = docs
    return {"export": os.path.abspath(folder), "run": ex.meta.get("run"), "docs": ex.docs, "tokens": ex.total,
            "positions": positions}


def _inspect(ex: Export, ids: list[str]) -> dict:
    run = ex.meta.get("run")
    if not ids or not run or not os.path.isfile(os.path.join(run, "manifest.json")):
        return {}
    from dataclean.audit.inspect import Query, inspect_documents
    result = inspect_documents(run, [Query(id=i) for i in dict.fromkeys(ids)])
    return {d["id"]: d for d in result["documents"] if d.get("id") is not None}


def read_token_file(path: str) -> np.ndarray:
    """Token ids from a file: ``.npy``, or integers separated by spaces, commas or newlines (a JSON list too)."""
    if path.endswith(".npy"):
        return np.load(path).astype(np.int64).ravel()
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    try:
        return np.array([int(t) for t in text.replace(",", " ").replace("[", " ").replace("]", " ").split()],
                        np.int64)
    except ValueError:
        raise TraceError(f"{path}: expected token ids (integers separated by spaces, commas or newlines)") from None


def render(result: dict) -> None:
    """The trace on the terminal: per position its documents, then what inspect shows of each."""
    from rich.table import Table

    from dataclean.audit.terminal import console, render_inspect, safe
    con = console()
    con.print(f"export {safe(result['export'])}: {result['docs']:,} documents, {result['tokens']:,} tokens")
    for p in result["positions"]:
        title = (f"sample {p['sample']}" if "sample" in p else
                 f"token window of {len(p['tokens'])} ids: {p['matches']} match(es)")
        t = Table(title=title, title_justify="left")
        for col in ("ordinal", "id", "source", "span", "fate", "longest token run", "rare share", "byte tokens"):
            t.add_column(col, overflow="fold")
        for d in p["documents"]:
            a = d["token_anomalies"]
            ins = d.get("inspect") or {}
            fate = "kept" if ins.get("status") == "kept" else (ins.get("status") or "")
            run = f"{a['longest_run']} × id {a['longest_run_token']}" if a["longest_run_token"] is not None else ""
            t.add_row(str(d["ordinal"]), safe(d.get("id") or ""), safe(d.get("source") or ""),
                      f"{d['span'][0]:,}–{d['span'][1]:,} of {d['doc_tokens']:,}", fate, run,
                      "" if a["rare_share"] is None else f"{a['rare_share']:.2%}",
                      "" if a["byte_fallback"] is None else str(a["byte_fallback"]))
        con.print(t)
        docs = [d["inspect"] for d in p["documents"] if d.get("inspect")]
        if docs:
            render_inspect({"documents": docs, "not_found": []}, con)
