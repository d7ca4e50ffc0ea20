"""Benchmark decontamination: an n-gram index of benchmark items, built once, read by every worker.

Practice this follows: exact n-gram overlap between training documents and benchmark items, with 13-gram
words for English (GPT-3, "Language Models are Few-Shot Learners", appendix C; also the Llama papers'
n-gram contamination analyses) and character n-grams for Chinese, which has no spaces.

**Keys.** An item's text and a document's text are normalized the way near-duplicate detection normalizes
them (:func:`dataclean.dedup.minhash.shingle_text`: NFKC, lower case, digits folded to ``0``, punctuation and
whitespace to one space), then traditional Chinese characters are folded to simplified ones
(:mod:`dataclean.text.script_fold`), so re-wrapped, re-punctuated and traditional↔simplified copies meet.
The n-grams are :func:`~dataclean.dedup.minhash.shingle_hashes` with 64-bit hashes: word ``ngram``-grams
over the space-delimited words and ``char_ngram``-grams over the Han/kana characters.

**Parts.** Each item is indexed per field (GSM8K's ``question`` and ``answer`` are two parts), so a page
that quotes only the question still covers most of a part. A part with fewer than ``ngram`` words and
fewer than ``char_ngram`` CJK characters cannot be matched by n-grams and is not indexed (counted in
``short_parts``).

**Template text.** An n-gram found in more than ``max_item_frequency`` items of one benchmark is its
template ("以下是中国关于…的单项选择题", "Answer the following question…"), not an item: it is dropped,
so a page sharing only the template matches nothing.

**Files.** ``keys.npy`` (uint64, sorted, unique), ``ptr.npy`` (int64 CSR offsets into ``parts.npy``: the
parts whose text has key ``keys[i]`` are ``parts[ptr[i]:ptr[i + 1]]``), ``parts.npy`` (int32 part numbers),
``part_grams.npy`` (int32: distinct n-grams of each part), ``part_info.parquet`` (benchmark, item id,
field) and ``index.json``. They are written to a temporary folder and renamed into place, under a folder
named by the fingerprint of the benchmark files' bytes and the parameters, so the index is built once per
machine and reused (the cache is ``$XDG_CACHE_HOME/dataclean/decontam`` unless ``index_dir`` says
otherwise). Workers open the arrays memory-mapped: one copy in the page cache, whatever the worker count.

Building is out of core: (key, part) pairs are written in chunks to Parquet and grouped, counted and sorted
by DuckDB under a memory limit, spilling to disk; only the final arrays are written, by streaming.
"""
from __future__ import annotations

import glob
import hashlib
import json
import os
import shutil
import tempfile
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dataclean.dedup.minhash import shingle_hashes, shingle_text
from dataclean.io.fs import files_in
from dataclean.sql import sql_list
from dataclean.text.script_fold import fold_t2s

INDEX_VERSION = 2
#: Fields read from a record when a benchmark does not say (``fields:``), in this order: the text of the item.
KNOWN_FIELDS = ("text", "question", "problem", "prompt", "query", "instruction", "input", "passage", "context",
                "ctx", "sentence", "premise", "hypothesis", "goal", "article", "story", "answer", "solution",
                "output", "target", "completion", "canonical_solution", "choices", "options", "endings")
ID_FIELDS = ("id", "task_id", "question_id", "qid", "idx", "uid", "problem_id")
PAIR_CHUNK = 4_000_000


class BenchmarkError(ValueError):
    """A benchmark file cannot be used (missing, unreadable, no text field): one line for the user."""


@dataclass
class Benchmark:
    name: str
    path: str
    fields: list[str] | None = None


def parse_benchmarks(entries) -> list[Benchmark]:
    """``benchmarks:`` of the config: paths, or ``{path, name, fields}`` mappings."""
    if entries is None:
        return []
    if isinstance(entries, (str, dict)):
        entries = [entries]
    out = []
    for e in entries:
        if isinstance(e, str):
            e = {"path": e}
        if not isinstance(e, dict) or not isinstance(e.get("path"), str):
            raise BenchmarkError("decontaminate.benchmarks: each entry is a file path or {path: FILE, name: NAME, "
                                 "fields: [FIELD, ...]}")
        unknown = set(e) - {"path", "name", "fields"}
        if unknown:
            raise BenchmarkError(f"decontaminate.benchmarks: unknown key(s) {', '.join(sorted(unknown))} "
                                 "(accepted: path, name, fields)")
        fields = e.get("fields")
        if isinstance(fields, str):
            fields = [fields]
        if fields is not None and not (isinstance(fields, list) and all(isinstance(f, str) for f in fields)):
            raise BenchmarkError(f"decontaminate.benchmarks: fields of {e['path']} must be a list of field names")
        name = e.get("name") or _stem(e["path"])
        out.append(Benchmark(str(name), e["path"], fields))
    names = [b.name for b in out]
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        raise BenchmarkError(f"decontaminate.benchmarks: two benchmarks are named {', '.join(dupes)}; give one "
                             "of them a name: {path: FILE, name: NAME}")
    return out


def _stem(path: str) -> str:
    base = os.path.basename(path.rstrip("/"))
    for ext in (".gz", ".zst", ".bz2", ".xz"):
        if base.endswith(ext):
            base = base[: -len(ext)]
    return os.path.splitext(base)[0] or base


def benchmark_files(b: Benchmark) -> list[str]:
    """The files of a benchmark: a file, a folder (its JSONL/JSON/Parquet files) or a glob."""
    p = b.path
    if any(c in p for c in "*?["):
        files = sorted(glob.glob(p, recursive=True))
    elif os.path.isdir(p):
        files = sorted(os.path.join(r, f) for r, _, fs in os.walk(p) for f in fs
                       if _kind(f) is not None)
    elif os.path.isfile(p):
        files = [p]
    else:
        raise BenchmarkError(f"benchmark {b.name}: {p} does not exist")
    files = [f for f in files if os.path.isfile(f)]
    if not files:
        raise BenchmarkError(f"benchmark {b.name}: no .jsonl, .json or .parquet file in {p}")
    return files


def _kind(path: str) -> str | None:
    base = path.lower()
    for ext in (".gz", ".zst", ".bz2", ".xz"):
        if base.endswith(ext):
            base = base[: -len(ext)]
    if base.endswith((".jsonl", ".ndjson")):
        return "jsonl"
    if base.endswith(".json"):
        return "json"
    if base.endswith(".parquet"):
        return "parquet"
    return None


def _open_text(path: str):
    import io
    low = path.lower()
    if low.endswith(".gz"):
        import gzip
        return io.TextIOWrapper(gzip.open(path, "rb"), encoding="utf-8")
    if low.endswith(".zst"):
        import zstandard
        return io.TextIOWrapper(zstandard.ZstdDecompressor().stream_reader(open(path, "rb")), encoding="utf-8")
    if low.endswith(".bz2"):
        import bz2
        return io.TextIOWrapper(bz2.open(path, "rb"), encoding="utf-8")
    if low.endswith(".xz"):
        import lzma
        return io.TextIOWrapper(lzma.open(path, "rb"), encoding="utf-8")
    return open(path, encoding="utf-8")


def read_records(path: str, name: str) -> list[dict]:
    """The records of one benchmark file (JSON Lines, a JSON array or object of arrays, Parquet)."""
    kind = _kind(path)
    try:
        if kind == "parquet":
            return pq.read_table(path).to_pylist()
        with _open_text(path) as fh:
            if kind == "json":
                data = json.load(fh)
                if isinstance(data, dict):  # {"data": [...]} / {"test": [...]}: the first list of records
                    data = next((v for v in data.values() if isinstance(v, list)), [data])
                if not isinstance(data, list):
                    raise BenchmarkError(f"benchmark {name}: {path} is JSON but not a list of records")
                return [r for r in data if isinstance(r, dict)]
            if kind == "jsonl" or kind is None:
                out = []
                for no, line in enumerate(fh, 1):
                    line = line.strip()
                    if not line:
                        continue
                    try:
                        r = json.loads(line)
                    except json.JSONDecodeError:
                        raise BenchmarkError(f"benchmark {name}: {path} line {no} is not JSON (a JSON array "
                                             "file should be named .json)") from None
                    if not isinstance(r, dict):
                        raise BenchmarkError(f"benchmark {name}: {path} line {no} is not a JSON object (a JSON "
                                             "array file should be named .json)")
                    out.append(r)
                return out
    except (OSError, UnicodeDecodeError, pa.ArrowException) as exc:
        raise BenchmarkError(f"benchmark {name}: cannot read {path}: {exc}") from None
    raise BenchmarkError(f"benchmark {name}: {path}: not a .jsonl, .json or .parquet file")


def _field_text(v) -> str | None:
    if isinstance(v, str):
        return v
    if isinstance(v, list) and v and all(isinstance(x, str) for x in v):
        return "\n".join(v)
    if isinstance(v, dict):  # {"text": [...], "label": [...]} choices (ARC)
        t = v.get("text")
        return _field_text(t) if t is not None else None
    return None


def item_parts(b: Benchmark, records: list[dict]) -> tuple[list[str], list[str], list[str], list[str]]:
    """(item ids, fields, texts, fields used) of a benchmark's records: one part per item and field."""
    fields = b.fields
    if fields is None:
        seen = {k for r in records[:200] for k, v in r.items() if _field_text(v) is not None}
        fields = [f for f in KNOWN_FIELDS if f in seen]
        if "text" in fields:
            fields = ["text"]
        if not fields:  # an unknown format: every field with text of some length
            fields = sorted(k for k in seen if any(len(_field_text(r.get(k)) or "") >= 30 for r in records[:200]))
        if not fields:
            raise BenchmarkError(f"benchmark {b.name}: no text field found in {b.path}; name the fields: "
                                 "{path: FILE, fields: [question, answer]}")
    else:
        present = {k for r in records for k in r}
        missing = [f for f in fields if f not in present]
        if missing:
            raise BenchmarkError(f"benchmark {b.name}: no field {', '.join(missing)} in {b.path} (its fields: "
                                 f"{', '.join(sorted(present)[:12])})")
    ids, flds, texts = [], [], []
    id_field = next((f for f in ID_FIELDS if records and f in records[0]), None)
    for row, r in enumerate(records):
        item = str(r.get(id_field)) if id_field and r.get(id_field) is not None else str(row)
        for f in fields:
            t = _field_text(r.get(f))
            if t and t.strip():
                ids.append(item)
                flds.append(f)
                texts.append(t)
    return ids, flds, texts, fields


def normalize(texts: pa.Array) -> pa.Array:
    """The matching form of texts: dedup's shingle normalization, then traditional→simplified folding."""
    return fold_t2s(shingle_text(texts))


def ngram_keys(texts: pa.Array, ngram: int, char_ngram: int) -> tuple[np.ndarray, np.ndarray]:
    """(uint64 keys, int64 offsets) of normalized texts (see the module docstring)."""
    return shingle_hashes(texts, ngram, char_ngram, wide=True)


def _long_enough(norm: pa.Array, ngram: int, char_ngram: int) -> np.ndarray:
    """Parts with at least ``ngram`` words or ``char_ngram`` CJK characters."""
    from dataclean.dedup.minhash import CJK_CLASS
    cjk = pc.utf8_length(pc.replace_substring_regex(norm, f"[^{CJK_CLASS}]", "")).to_numpy(
        zero_copy_only=False)
    words = pc.count_substring_regex(pc.replace_substring_regex(norm, f"[{CJK_CLASS}]", " "), r"\S+").to_numpy(
        zero_copy_only=False)
    return (words >= ngram) | (cjk >= char_ngram)


def fingerprint(benchmarks: list[Benchmark], params: dict) -> str:
    h = hashlib.sha256(json.dumps({"v": INDEX_VERSION, "params": params}, sort_keys=True).encode())
    for b in benchmarks:
        h.update(json.dumps([b.name, b.fields]).encode())
        for f in benchmark_files(b):
            with open(f, "rb") as fh:
                for block in iter(lambda: fh.read(1 << 20), b""):
                    h.update(block)
    return h.hexdigest()[:24]


def default_cache() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "dataclean", "decontam")


def build_index(benchmarks: list[Benchmark], ngram: int = 13, char_ngram: int = 13, max_item_frequency: int = 10,
                index_dir: str | None = None, memory_limit: str = "2GB") -> str:
    """Build (or find) the index of ``benchmarks``; returns its folder."""
    params = {"ngram": ngram, "char_ngram": char_ngram, "max_item_frequency": max_item_frequency}
    fp = fingerprint(benchmarks, params)
    root = index_dir or default_cache()
    final = os.path.join(root, fp)
    if os.path.isfile(os.path.join(final, "index.json")):
        return final
    os.makedirs(root, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=f".{fp}-", dir=root)
    try:
        _build(benchmarks, params, fp, tmp, memory_limit)
        try:
            os.rename(tmp, final)
        except OSError:  # another process built it first
            if not os.path.isfile(os.path.join(final, "index.json")):
                raise
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return final


def _build(benchmarks: list[Benchmark], params: dict, fp: str, out: str, memory_limit: str) -> None:
    import duckdb
    ngram, char_ngram = params["ngram"], params["char_ngram"]
    pairs_dir = os.path.join(out, "pairs")
    os.makedirs(pairs_dir)
    info = {"benchmark": [], "item": [], "field": []}
    stats = []
    buf_k, buf_p, n_buf, n_files = [], [], 0, 0
    part_base = 0

    def flush():
        nonlocal buf_k, buf_p, n_buf, n_files
        if not n_buf:
            return
        t = pa.table({"k": np.concatenate(buf_k).view(np.int64), "p": np.concatenate(buf_p),
                      "b": np.concatenate(buf_b)})
        pq.write_table(t, os.path.join(pairs_dir, f"{n_files:05d}.parquet"), compression="zstd")
        n_files += 1
        buf_k, buf_p, buf_b[:], n_buf = [], [], [], 0

    buf_b: list[np.ndarray] = []
    for bi, b in enumerate(benchmarks):
        items = short = 0
        used: list[str] = []
        for f in benchmark_files(b):
            records = read_records(f, b.name)
            if not records:
                raise BenchmarkError(f"benchmark {b.name}: {f} has no records")
            ids, flds, texts, used = item_parts(b, records)
            items += len(records)
            norm = normalize(pa.array(texts, pa.string()))
            ok = _long_enough(norm, ngram, char_ngram)
            short += int((~ok).sum())
            keys, offsets = ngram_keys(norm, ngram, char_ngram)
            for start in range(0, len(texts), 50_000):
                sl = slice(start, min(start + 50_000, len(texts)))
                lo, hi = offsets[sl.start], offsets[sl.stop]
                k = keys[lo:hi]
                per_part = np.diff(offsets[sl.start:sl.stop + 1])
                owner = np.repeat(np.arange(sl.start, sl.stop, dtype=np.int64), per_part)
                keep = np.repeat(ok[sl], per_part)
                k, owner = k[keep], owner[keep]
                # distinct keys per part
                order = np.lexsort((k, owner))
                k, owner = k[order], owner[order]
                first = np.ones(len(k), bool)
                first[1:] = (k[1:] != k[:-1]) | (owner[1:] != owner[:-1])
                k, owner = k[first], owner[first]
                buf_k.append(k)
                buf_p.append((owner + part_base).astype(np.int32))
                buf_b.append(np.full(len(k), bi, np.int16))
                n_buf += len(k)
                if n_buf >= PAIR_CHUNK:
                    flush()
            info["benchmark"] += [b.name] * len(texts)
            info["item"] += ids
            info["field"] += flds
            part_base += len(texts)
        stats.append({"benchmark": b.name, "path": b.path, "items": items, "fields": used, "short_parts": short})
    flush()
    n_parts = part_base
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")  # (no foreign output in a notebook)
    try:
        con.execute(f"SET memory_limit = '{memory_limit}'")
        con.execute(f"SET temp_directory = '{os.path.join(out, 'spill')}'")
        con.execute("SET preserve_insertion_order = false")
        src = f"read_parquet({sql_list(files_in(pairs_dir, '*.parquet'))})" if n_files else \
            "(SELECT 0::BIGINT AS k, 0::INTEGER AS p, 0::SMALLINT AS b WHERE false)"
        # template n-grams: in more than max_item_frequency items of one benchmark
        con.execute(f"""CREATE TABLE kept AS
            WITH item_of AS (SELECT k, p, b FROM {src}),
            freq AS (SELECT k, b, count(*) AS c FROM item_of GROUP BY k, b)
            SELECT i.k, i.p FROM item_of i JOIN freq f USING (k, b) WHERE f.c <= {int(params['max_item_frequency'])}""")
        n_pairs, n_keys = con.execute("SELECT count(*), count(DISTINCT k) FROM kept").fetchone()
        dropped = con.execute(f"SELECT count(DISTINCT k) FROM {src}").fetchone()[0] - n_keys
        grams = np.zeros(n_parts, np.int32)
        for p, c in con.execute("SELECT p, count(*) FROM kept GROUP BY p").fetchall():
            grams[p] = c
        keys = np.lib.format.open_memmap(os.path.join(out, "keys.npy"), "w+", np.uint64, (n_keys,))
        ptr = np.lib.format.open_memmap(os.path.join(out, "ptr.npy"), "w+", np.int64, (n_keys + 1,))
        parts = np.lib.format.open_memmap(os.path.join(out, "parts.npy"), "w+", np.int32, (n_pairs,))
        ptr[0] = 0
        ki = pi = 0
        last = None
        reader = con.sql("SELECT k, p FROM kept ORDER BY k, p").to_arrow_reader(1 << 20)
        for batch in reader:
            k = batch.column(0).to_numpy().view(np.uint64)
            p = batch.column(1).to_numpy().astype(np.int32)
            parts[pi:pi + len(p)] = p
            new = np.ones(len(k), bool)
            new[1:] = k[1:] != k[:-1]
            if last is not None and len(k) and k[0] == last:
                new[0] = False
            starts = np.flatnonzero(new) + pi
            nk = len(starts)
            keys[ki:ki + nk] = k[new]
            ptr[ki:ki + nk] = starts  # (ptr[ki] = where key ki starts; the end is filled below)
            ki += nk
            pi += len(p)
            if len(k):
                last = k[-1]
        ptr[n_keys] = n_pairs
        keys.flush(), ptr.flush(), parts.flush()
        del keys, ptr, parts
    finally:
        con.close()
    # signed -> unsigned order: DuckDB sorted the keys as BIGINT; re-sort as uint64 (a rotation at the sign)
    _reorder_unsigned(out)
    np.save(os.path.join(out, "part_grams.npy"), grams)
    pq.write_table(pa.table(info, schema=pa.schema([("benchmark", pa.string()), ("item", pa.string()),
                                                    ("field", pa.string())])),
                   os.path.join(out, "part_info.parquet"))
    shutil.rmtree(pairs_dir, ignore_errors=True)
    shutil.rmtree(os.path.join(out, "spill"), ignore_errors=True)
    meta = {"version": INDEX_VERSION, "fingerprint": fp, "params": params, "benchmarks": stats, "parts": n_parts,
            "keys": int(n_keys), "pairs": int(n_pairs), "template_ngrams_dropped": int(dropped)}
    with open(os.path.join(out, "index.json"), "w", encoding="utf-8") as fh:
        json.dump(meta, fh, indent=1, sort_keys=True)


def _reorder_unsigned(out: str) -> None:
    """DuckDB orders BIGINT keys from negative to positive; as uint64 the negative ones (high bit set) come
    last. Rotate keys and their CSR ranges so that the keys are in unsigned order."""
    keys = np.load(os.path.join(out, "keys.npy"), mmap_mode="r")
    if not len(keys):
        return
    split = int(np.searchsorted(keys.view(np.int64), 0))  # first non-negative key
    if split == 0:
        return
    ptr = np.load(os.path.join(out, "ptr.npy"))
    parts = np.load(os.path.join(out, "parts.npy"))
    cut = ptr[split]
    new_keys = np.concatenate([keys[split:], keys[:split]])
    new_parts = np.concatenate([parts[cut:], parts[:cut]])
    lens = np.diff(ptr)
    new_lens = np.concatenate([lens[split:], lens[:split]])
    new_ptr = np.zeros(len(ptr), np.int64)
    np.cumsum(new_lens, out=new_ptr[1:])
    del keys
    np.save(os.path.join(out, "keys.npy"), new_keys)
    np.save(os.path.join(out, "ptr.npy"), new_ptr)
    np.save(os.path.join(out, "parts.npy"), new_parts)


class Index:
    """A built index, memory-mapped, and the matching of documents against it."""

    BITS = 27  # the membership bitmap: 2**27 bits (16 MiB) in front of the sorted keys

    def __init__(self, folder: str):
        self.folder = folder
        with open(os.path.join(folder, "index.json"), encoding="utf-8") as fh:
            self.meta = json.load(fh)
        self.keys = np.load(os.path.join(folder, "keys.npy"), mmap_mode="r")
        self.ptr = np.load(os.path.join(folder, "ptr.npy"), mmap_mode="r")
        self.parts = np.load(os.path.join(folder, "parts.npy"), mmap_mode="r")
        self.part_grams = np.load(os.path.join(folder, "part_grams.npy"))
        info = pq.read_table(os.path.join(folder, "part_info.parquet"))
        self.part_benchmark = info.column("benchmark").to_pylist()
        self.part_item = info.column("item").to_pylist()
        self.part_field = info.column("field").to_pylist()
        self.ngram = self.meta["params"]["ngram"]
        self.char_ngram = self.meta["params"]["char_ngram"]
        self._bitmap = None

    def bitmap(self) -> np.ndarray:
        if self._bitmap is None:
            bits = np.zeros(1 << (self.BITS - 3), np.uint8)
            shift = np.uint64(64 - self.BITS)
            for start in range(0, len(self.keys), 1 << 22):
                top = (np.asarray(self.keys[start:start + (1 << 22)]) >> shift).astype(np.int64)
                np.bitwise_or.at(bits, top >> 3, (1 << (top & 7)).astype(np.uint8))
            self._bitmap = bits
        return self._bitmap

    def match(self, texts: pa.Array) -> dict[str, np.ndarray]:
        """Per document: the part it overlaps most (-1: none), the distinct n-grams it shares with that part,
        and the overlap (shared / the part's n-grams)."""
        n = len(texts)
        best = np.full(n, -1, np.int64)
        shared = np.zeros(n, np.int64)
        overlap = np.zeros(n, np.float64)
        out = {"part": best, "shared": shared, "overlap": overlap}
        if not len(self.keys) or not n:
            return out
        vals, offsets = ngram_keys(normalize(texts), self.ngram, self.char_ngram)
        if not len(vals):
            return out
        top = (vals >> np.uint64(64 - self.BITS)).astype(np.int64)
        cand = (self.bitmap()[top >> 3] >> (top & 7).astype(np.uint8)) & 1
        pos = np.flatnonzero(cand)
        if not len(pos):
            return out
        v = vals[pos]
        at = np.searchsorted(self.keys, v)
        at_c = np.minimum(at, len(self.keys) - 1)
        hit = np.asarray(self.keys[at_c]) == v
        pos, key = pos[hit], at_c[hit]
        if not len(pos):
            return out
        doc = np.searchsorted(offsets, pos, side="right") - 1
        # distinct (doc, key) pairs, then every part of each key
        pair = np.unique(doc.astype(np.int64) * len(self.keys) + key)
        doc, key = pair // len(self.keys), pair % len(self.keys)
        starts, ends = np.asarray(self.ptr[key]), np.asarray(self.ptr[key + 1])
        lens = ends - starts
        doc_r = np.repeat(doc, lens)
        idx = np.repeat(starts - np.cumsum(lens) + lens, lens) + np.arange(int(lens.sum()))
        part = np.asarray(self.parts[idx]).astype(np.int64)
        n_parts = len(self.part_grams)
        dp, cnt = np.unique(doc_r * n_parts + part, return_counts=True)
        d, p = dp // n_parts, dp % n_parts
        ov = cnt / np.maximum(self.part_grams[p], 1)
        # per document the part with the highest overlap (ties: more shared n-grams, then the first part)
        order = np.lexsort((p, -cnt, -ov, d))
        d, p, cnt, ov = d[order], p[order], cnt[order], ov[order]
        first = np.ones(len(d), bool)
        first[1:] = d[1:] != d[:-1]
        best[d[first]] = p[first]
        shared[d[first]] = cnt[first]
        overlap[d[first]] = ov[first]
        return out
