"""Inputs and outputs through pyarrow filesystems: the same shards read from a real S3 server (moto's, over
HTTP), from ``file://`` URIs and from local paths give the same records; publishing gives the same bytes
everywhere and never leaves a temporary file; an unknown scheme fails with a message that names it."""
from __future__ import annotations

import gzip
import json
import os
import shutil
import threading
import uuid
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
import xxhash
import zstandard

from conftest import run_cli
from dataclean.io import fs
from dataclean.io.readers import ColumnMapping, InputFileError, discover_inputs, read_shard

SAMPLE = Path(__file__).resolve().parent.parent / "sample_data"
BAD_LINES = b'not json at all\n["an", "array"]\n{"id": "p-null", "text": null}\n'

#: The input tree, by path below the corpus root (mirrored locally and in the bucket).
INPUTS = {
    "web-en.parquet": None,  # copied from sample_data
    "sub/papers.jsonl.gz": None,  # sample_data's papers, gzip, three bad lines at the end
    "sub/zh-wiki-docs.jsonl.zst": None,  # sample_data's file, plus a second zstd frame of bad lines
    ".hidden/x.parquet": b"hidden",
    "_work/y.jsonl": b"{}\n",
    "_SUCCESS": b"",
    "notes.txt": b"not an input",
}


def _tree(root: Path) -> Path:
    """The corpus tree below ``root``; the three real shards are built from sample_data."""
    papers = zstandard.ZstdDecompressor().decompressobj().decompress((SAMPLE / "papers.jsonl.zst").read_bytes())
    contents = dict(INPUTS)
    contents["web-en.parquet"] = (SAMPLE / "web-en.parquet").read_bytes()
    contents["sub/papers.jsonl.gz"] = gzip.compress(papers + BAD_LINES, mtime=0)
    contents["sub/zh-wiki-docs.jsonl.zst"] = ((SAMPLE / "zh-wiki-docs.jsonl.zst").read_bytes()
                                              + zstandard.ZstdCompressor().compress(BAD_LINES))
    for rel, data in contents.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    """A moto S3 server on a free port, the environment pointing at it, a new bucket holding the corpus tree
    below ``corpus/``. Yields (bucket URI, local mirror of corpus/, raw pyarrow S3 filesystem, endpoint)."""
    moto_server = pytest.importorskip("moto.server")
    server = moto_server.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    bucket = f"dataclean-{uuid.uuid4().hex[:12]}"
    with pytest.MonkeyPatch.context() as mp:
        for name in ("AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_SESSION_TOKEN", "AWS_REGION"):
            mp.delenv(name, raising=False)
        mp.setenv("AWS_ACCESS_KEY_ID", "testing")
        mp.setenv("AWS_SECRET_ACCESS_KEY", "testing")
        mp.setenv("AWS_DEFAULT_REGION", "us-east-1")
        mp.setenv("AWS_ENDPOINT_URL", endpoint)
        mp.setenv("AWS_EC2_METADATA_DISABLED", "true")
        raw = pafs.S3FileSystem(access_key="testing", secret_key="testing", region="us-east-1",
                                endpoint_override=endpoint, allow_bucket_creation=True)
        raw.create_dir(bucket)
        local = _tree(tmp_path_factory.mktemp("mirror") / "corpus")
        for path in sorted(local.rglob("*")):
            if path.is_file():
                with raw.open_output_stream(f"{bucket}/corpus/{path.relative_to(local).as_posix()}",
                                            compression=None) as out:
                    out.write(path.read_bytes())
        try:
            yield f"s3://{bucket}", local, raw, endpoint
        finally:
            server.stop()


def _rows(path: str, batch_rows: int = 100) -> tuple[list[dict], list[dict], list[int]]:
    chunks = list(read_shard(path, 3, ColumnMapping(), batch_rows))
    return ([r for c in chunks for r in c.docs.to_pylist()],
            [r for c in chunks if c.bad is not None for r in c.bad.to_pylist()],
            [c.n_records for c in chunks])


def _as_if_from(rows: list[dict], uri: str, local: str) -> list[dict]:
    """``rows`` read from ``uri`` with the names a local read gives (origin_file, ids derived from it)."""
    out = []
    for r in rows:
        r = dict(r)
        r["origin_file"] = local if r["origin_file"] == uri else r["origin_file"]
        if r["id"].startswith(uri + "#"):
            r["id"] = local + r["id"][len(uri):]
        out.append(r)
    return out


def _raw_bytes(raw: pafs.FileSystem, path: str) -> bytes:
    with raw.open_input_stream(path, compression=None) as fh:
        return fh.read()


# ---------------------------------------------------------------------------------------------------------
# What is a URI


@pytest.mark.parametrize("path, expected", [
    ("s3://bucket/key.parquet", True), ("gs://b/k", True), ("gcs://b/k", True), ("hdfs://nn:8020/x", True),
    ("abfs://container@account.dfs.core.windows.net/x", True), ("file:///tmp/x", True), ("memory://x/y", True),
    ("/tmp/x.parquet", False), ("rel/x.jsonl", False), ("C:\\data\\x.jsonl", False), ("C://data/x.jsonl", False),
    ("s3:/bucket/key", False), ("", False),
])
def test_is_uri(path, expected):
    assert fs.is_uri(path) is expected


def test_local_paths_resolve_to_the_local_filesystem(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    filesystem, path = fs.resolve("a/b.parquet")
    assert isinstance(filesystem, pafs.LocalFileSystem) and path == str(tmp_path / "a" / "b.parquet")


def test_an_unknown_scheme_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="^unknown URI scheme 'nosuchfs' in nosuchfs://bucket/x.parquet: neither "
                                         "pyarrow .* nor fsspec knows it$"):
        fs.resolve("nosuchfs://bucket/x.parquet")
    with pytest.raises(ValueError, match="'nosuchfs' in nosuchfs://bucket/corpus"):
        discover_inputs(["nosuchfs://bucket/corpus"])
    with pytest.raises(InputFileError, match="^nosuchfs://bucket/x.jsonl: unknown URI scheme 'nosuchfs'"):
        list(read_shard("nosuchfs://bucket/x.jsonl", 0))
    with pytest.raises(ValueError, match="'nosuchfs'"):
        fs.publish_file(str(SAMPLE / "papers.jsonl.zst"), "nosuchfs://bucket/x")


# ---------------------------------------------------------------------------------------------------------
# S3 (moto)

EXPECTED = ["corpus/sub/papers.jsonl.gz", "corpus/sub/zh-wiki-docs.jsonl.zst", "corpus/web-en.parquet"]


def test_s3_settings_come_from_the_environment(s3, monkeypatch):
    """pyarrow itself honours AWS_ENDPOINT_URL (the fixture), and AWS_ENDPOINT_URL_S3 before it."""
    bucket, _, raw, endpoint = s3
    other = f"dataclean-{uuid.uuid4().hex[:12]}"
    pafs.S3FileSystem(access_key="testing", secret_key="testing", region="us-east-1", endpoint_override=endpoint,
                      allow_bucket_creation=True).create_dir(other)
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://127.0.0.1:9")  # discard port: fails if it were used
    monkeypatch.setenv("AWS_ENDPOINT_URL_S3", endpoint)
    filesystem, path = fs.resolve(f"s3://{other}/k.txt")
    assert isinstance(filesystem, pafs.S3FileSystem) and path == f"{other}/k.txt"
    assert filesystem.region == "us-east-1" and not fs.exists(f"s3://{other}/k.txt")
    assert fs.resolve(f"s3://{other}/x")[0] is filesystem  # one filesystem per bucket and process


def test_s3_requests_are_signed_with_the_environment_credentials_and_region(monkeypatch):
    """What pyarrow sends, seen by a bare HTTP server standing in for S3 at AWS_ENDPOINT_URL."""
    seen = []

    class Recorder(BaseHTTPRequestHandler):
        def do_HEAD(self):
            seen.append((self.path, self.headers.get("Authorization"), self.headers.get("x-amz-security-token")))
            self.send_response(404)
            self.end_headers()

        do_GET = do_HEAD

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    bucket = f"dataclean-{uuid.uuid4().hex[:12]}"
    for name, value in {"AWS_ACCESS_KEY_ID": "AKIDFROMTHEENV", "AWS_SECRET_ACCESS_KEY": "secret",
                        "AWS_SESSION_TOKEN": "TOKENFROMTHEENV", "AWS_DEFAULT_REGION": "eu-central-1",
                        "AWS_ENDPOINT_URL": f"http://127.0.0.1:{server.server_port}",
                        "AWS_EC2_METADATA_DISABLED": "true"}.items():
        monkeypatch.setenv(name, value)
    for name in ("AWS_ENDPOINT_URL_S3", "AWS_PROFILE", "AWS_REGION"):
        monkeypatch.delenv(name, raising=False)
    try:
        assert not fs.exists(f"s3://{bucket}/k.parquet")
    finally:
        server.shutdown()
    path, auth, token = seen[0]
    assert path == f"/{bucket}/k.parquet"  # path-style addressing on a custom endpoint
    assert auth.startswith("AWS4-HMAC-SHA256 Credential=AKIDFROMTHEENV/") and "/eu-central-1/s3/" in auth
    assert token == "TOKENFROMTHEENV"


def test_s3_discover_inputs_folder_and_globs(s3):
    bucket, local, _, _ = s3
    assert discover_inputs([f"{bucket}/corpus"]) == [f"{bucket}/{p}" for p in EXPECTED]
    assert discover_inputs([f"{bucket}/corpus/"]) == [f"{bucket}/{p}" for p in EXPECTED]
    assert discover_inputs([f"{bucket}/**/*.parquet"]) == [f"{bucket}/corpus/web-en.parquet"]
    assert discover_inputs([f"{bucket}/corpus/*/*.jsonl.*"]) == [f"{bucket}/{p}" for p in EXPECTED[:2]]
    assert discover_inputs([f"{bucket}/corpus/sub/papers.jsonl.gz", f"{bucket}/corpus/notes.txt"]) == \
        [f"{bucket}/corpus/notes.txt", f"{bucket}/corpus/sub/papers.jsonl.gz"]  # named files are kept
    # the same rules as a local folder or glob, pattern for pattern
    for pattern in ["", "/**", "/*", "/*/*", "/**/*.jsonl*", "/sub/*.json*", "/*.parquet", "/s?b/*", "/[sw]*",
                    "/[!s]*", "/.hidden/*", "/_work/*.jsonl", "/**/*"]:
        local_found = discover_inputs([str(local) + pattern.replace("/", os.sep)])
        assert discover_inputs([f"{bucket}/corpus{pattern}"]) == \
            [f"{bucket}/corpus/" + os.path.relpath(p, local).replace(os.sep, "/") for p in local_found], pattern
    with pytest.raises(FileNotFoundError, match="input not found"):
        discover_inputs([f"{bucket}/nothing-here"])
    with pytest.raises(FileNotFoundError, match="input not found"):
        discover_inputs([f"{bucket}/corpus/*.csv"])


@pytest.mark.parametrize("rel", EXPECTED)
def test_s3_read_shard_gives_the_local_records(s3, rel):
    bucket, local, _, _ = s3
    uri, path = f"{bucket}/{rel}", str(local / rel[len("corpus/"):])
    docs, bad, chunks = _rows(path)
    s3_docs, s3_bad, s3_chunks = _rows(uri)
    assert s3_chunks == chunks and sum(chunks) == len(docs) + len(bad)
    assert _as_if_from(s3_docs, uri, path) == docs
    assert _as_if_from(s3_bad, uri, path) == bad
    assert {r["origin_file"] for r in s3_docs + s3_bad} == {uri}
    if rel.endswith((".gz", ".zst")):  # the bad lines at the end, kept with their raw bytes
        assert [(r["detail"].split(" (")[0], r["raw"]) for r in bad] == [
            ("invalid JSON", b"not json at all"), ("record is a JSON array, not an object", b'["an", "array"]'),
            ("text is null", b'{"id": "p-null", "text": null}')]
    assert len(docs) == {"corpus/web-en.parquet": 855, "corpus/sub/papers.jsonl.gz": 31,
                         "corpus/sub/zh-wiki-docs.jsonl.zst": 500}[rel]


def test_s3_stat_checksum_and_missing_files(s3):
    bucket, local, _, _ = s3
    for rel in EXPECTED:
        uri, path = f"{bucket}/{rel}", local / rel[len("corpus/"):]
        size, mtime_ns = fs.stat(uri)
        assert size == path.stat().st_size and mtime_ns > 0
        assert fs.checksum(uri) == fs.checksum(str(path)) == \
            "xxh3_128:" + xxhash.xxh3_128(path.read_bytes()).hexdigest()
        assert fs.isfile(uri) and fs.exists(uri) and not fs.isdir(uri)
    assert fs.isdir(f"{bucket}/corpus") and fs.listdir(f"{bucket}/corpus/sub") == \
        ["papers.jsonl.gz", "zh-wiki-docs.jsonl.zst"]
    with pytest.raises(FileNotFoundError):
        fs.stat(f"{bucket}/corpus/missing.parquet")
    with pytest.raises(InputFileError, match="missing.jsonl: not a file"):
        list(read_shard(f"{bucket}/corpus/missing.jsonl", 0))


def test_s3_a_corrupt_shard_fails_like_a_local_one(s3, tmp_path):
    bucket, _, raw, _ = s3
    data = gzip.compress(b'{"text": "a"}\n' * 1000, mtime=0)[:-40]
    (tmp_path / "cut.jsonl.gz").write_bytes(data)
    with raw.open_output_stream(f"{bucket[len('s3://'):]}/bad/cut.jsonl.gz", compression=None) as out:
        out.write(data)
    with pytest.raises(InputFileError) as local_err:
        list(read_shard(str(tmp_path / "cut.jsonl.gz"), 0))
    with pytest.raises(InputFileError) as s3_err:
        list(read_shard(f"{bucket}/bad/cut.jsonl.gz", 0))
    assert s3_err.value.cause == local_err.value.cause


def _run_folder(root: Path) -> Path:
    """A finished run as a local folder, with the temporary files of writers that were still at work."""
    files = {"data/part-00000.parquet": (SAMPLE / "docs-code.parquet").read_bytes(),
             "data/part-00001.parquet": b"",
             "stats/summary.json": json.dumps({"kept": 1}).encode(),
             "manifest.json": b"{}\n", ".dataclean-run.json": b"{}\n", "report.html": "<p>中文</p>".encode(),
             "data/.part-00002.parquet.tmp-4242": b"half a shard", ".manifest.json.tmp": b"half"}
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return root


PUBLISHED = [".dataclean-run.json", "data/part-00000.parquet", "data/part-00001.parquet", "manifest.json",
             "report.html", "stats/summary.json"]


def test_publish_tree_to_s3_and_to_local_paths_gives_the_same_bytes(s3, tmp_path):
    bucket, _, raw, _ = s3
    run = _run_folder(tmp_path / "run")
    dest = f"{bucket}/out/run"
    for attempt in range(2):  # a rerun publishes the same bytes again
        assert fs.publish_tree(str(run), dest) == [f"{dest}/{rel}" for rel in PUBLISHED]
        assert fs.publish_tree(str(run), str(tmp_path / "pub")) == [str(tmp_path / "pub" / r) for r in PUBLISHED]
        listing = raw.get_file_info(pafs.FileSelector(dest[len("s3://"):], recursive=True))
        keys = sorted(i.path.split("/", 1)[1] for i in listing if i.type == pafs.FileType.File)
        assert keys == [f"out/run/{rel}" for rel in PUBLISHED]  # no .tmp, no unfinished file
        local_files = sorted(p.relative_to(tmp_path / "pub").as_posix() for p in (tmp_path / "pub").rglob("*")
                             if p.is_file())
        assert local_files == PUBLISHED
        for rel in PUBLISHED:
            expected = (run / rel).read_bytes()
            assert _raw_bytes(raw, f"{dest[len('s3://'):]}/{rel}") == expected == (tmp_path / "pub" / rel).read_bytes()
    assert fs.stat(f"{dest}/data/part-00001.parquet")[0] == 0
    fs.remove_tree(dest)
    assert not fs.exists(dest) and fs.isdir(f"{bucket}/corpus")  # only that prefix went
    fs.remove_tree(dest)  # nothing there: nothing to do
    fs.remove_tree(str(tmp_path / "pub"))
    assert not (tmp_path / "pub").exists()


def test_publish_file_never_compresses_by_extension(s3, tmp_path):
    bucket, _, raw, _ = s3
    src = tmp_path / "x.jsonl.gz"
    src.write_bytes(gzip.compress(b'{"text": "a"}\n', mtime=0))
    assert fs.publish_file(str(src), f"{bucket}/single/x.jsonl.gz") == f"{bucket}/single/x.jsonl.gz"
    assert _raw_bytes(raw, f"{bucket[len('s3://'):]}/single/x.jsonl.gz") == src.read_bytes()
    assert [c.docs.column("text").to_pylist() for c in read_shard(f"{bucket}/single/x.jsonl.gz", 0)] == [["a"]]


# ---------------------------------------------------------------------------------------------------------
# file:// and other filesystems


def test_file_uris_read_stat_and_publish_like_local_paths(tmp_path):
    local = _tree(tmp_path / "corpus")
    uri = "file://" + local.as_posix()
    found = discover_inputs([uri])
    assert found == [uri + "/" + p[len("corpus/"):] for p in EXPECTED]
    assert discover_inputs([uri + "/**/*.parquet"]) == [uri + "/web-en.parquet"]
    for u, path in zip(found, discover_inputs([str(local)])):
        assert fs.stat(u) == fs.stat(path) == (os.stat(path).st_size, os.stat(path).st_mtime_ns)
        assert fs.checksum(u) == fs.checksum(path)
        docs, bad, chunks = _rows(path)
        u_docs, u_bad, u_chunks = _rows(u)
        assert (_as_if_from(u_docs, u, path), _as_if_from(u_bad, u, path), u_chunks) == (docs, bad, chunks)
    run = _run_folder(tmp_path / "run")
    dest = "file://" + (tmp_path / "pub").as_posix()
    assert fs.publish_tree(str(run), dest) == [f"{dest}/{rel}" for rel in PUBLISHED]
    assert sorted(p.relative_to(tmp_path / "pub").as_posix() for p in (tmp_path / "pub").rglob("*")
                  if p.is_file()) == PUBLISHED
    fs.remove_tree(dest)
    assert not (tmp_path / "pub").exists()


def test_a_failed_local_publish_leaves_neither_the_file_nor_a_tmp(tmp_path, monkeypatch):
    src = tmp_path / "a.parquet"
    src.write_bytes(b"x" * 1000)

    def broken_copy(a, b):
        Path(b).write_bytes(b"x" * 10)
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(shutil, "copyfile", broken_copy)
    with pytest.raises(OSError, match="No space left"):
        fs.publish_file(str(src), str(tmp_path / "dest" / "a.parquet"))
    assert os.listdir(tmp_path / "dest") == []


def test_an_fsspec_filesystem_through_pyarrow(tmp_path):
    """memory:// is not pyarrow's: it goes through fsspec, with a temporary name and a rename."""
    pytest.importorskip("fsspec")
    local = _tree(tmp_path / "corpus")
    root = f"memory://dataclean-{uuid.uuid4().hex[:8]}"
    published = fs.publish_tree(str(local), f"{root}/corpus")
    assert len(published) == len(INPUTS)
    filesystem, _ = fs.resolve(root)
    assert isinstance(filesystem, pafs.PyFileSystem)
    assert discover_inputs([f"{root}/corpus"]) == [f"{root}/{p}" for p in EXPECTED]
    path = str(local / "sub" / "papers.jsonl.gz")
    docs, bad, _ = _rows(path)
    m_docs, m_bad, _ = _rows(f"{root}/corpus/sub/papers.jsonl.gz")
    assert (_as_if_from(m_docs, f"{root}/corpus/sub/papers.jsonl.gz", path),
            _as_if_from(m_bad, f"{root}/corpus/sub/papers.jsonl.gz", path)) == (docs, bad)
    assert fs.stat(f"{root}/corpus/web-en.parquet")[0] == (local / "web-en.parquet").stat().st_size
    assert not any(".tmp" in u for u in fs.walk_files(root))
    fs.remove_tree(f"{root}/corpus")
    assert not fs.exists(f"{root}/corpus/web-en.parquet")


@pytest.mark.slow
def test_a_whole_run_from_s3_to_s3(s3, tmp_path, sample_run):
    """`dataclean run s3://…/sample -o s3://…/out --work-dir W`: the run works in W and publishes its products
    to the bucket, file for file the bytes of W; the records are the local run's (only origin_file, the input's
    name, differs). The same command again resumes; another configuration is refused without --fresh."""
    bucket, _, raw, _ = s3
    for path in sorted(p for p in SAMPLE.iterdir() if p.is_file()):
        with raw.open_output_stream(f"{bucket[5:]}/sample/{path.name}", compression=None) as out:
            out.write(path.read_bytes())
    work = tmp_path / "work"
    args = ("run", f"{bucket}/sample/", "-o", f"{bucket}/out", "--work-dir", work, "--workers", 2, "--quiet")
    proc = run_cli(*args)
    assert proc.returncode == 0, proc.stderr
    assert "1686 records in: 1090 kept, 596 removed" in proc.stdout
    assert f"run folder (for stats, sql, inspect, report, verify): {work}" in proc.stdout
    published = sorted(info.path.split("/out/", 1)[1] for info in
                       raw.get_file_info(pafs.FileSelector(f"{bucket[5:]}/out", recursive=True))
                       if info.type == pafs.FileType.File)
    local = sorted(str(p.relative_to(work)) for sub in ("data", "rejected", "stats", "dedup")
                   for p in (work / sub).rglob("*") if p.is_file())
    assert published == sorted(local + [".dataclean-run.json", "manifest.json", "report.html"])
    for rel in published:
        assert _raw_bytes(raw, f"{bucket[5:]}/out/{rel}") == (work / rel).read_bytes(), rel
    for sub in ("data", "rejected"):
        mine = pa.concat_tables(pq.read_table(p) for p in sorted((work / sub).glob("*.parquet")))
        theirs = pa.concat_tables(pq.read_table(p) for p in sorted((sample_run / sub).glob("*.parquet")))
        assert mine.drop_columns(["origin_file"]).equals(theirs.drop_columns(["origin_file"]))
        assert set(mine.column("origin_file").to_pylist()) <= {f"{bucket}/sample/{p.name}" for p in SAMPLE.iterdir()}
    assert run_cli("verify", work).returncode == 0
    again = run_cli(*args)
    assert again.returncode == 0 and "1686 records in" in again.stdout
    other = run_cli(*args[:-1], "--default-source", "elsewhere", "--quiet")
    assert other.returncode == 2
    assert other.stderr.startswith(f"error: output folder {work} holds a run with a different configuration") or \
        other.stderr.startswith(f"error: output {bucket}/out holds a run with a different configuration")
