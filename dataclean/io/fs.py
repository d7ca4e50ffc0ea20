"""Local paths and URIs alike: reading inputs and publishing outputs through pyarrow filesystems.

A *path* here is either a local file name (relative or absolute, handled with :mod:`os` exactly as before) or
a URI ``scheme://netloc/key`` (``s3://bucket/corpus/part-0.parquet``, ``gs://…``, ``hdfs://host:8020/…``,
``abfs://…``, ``file:///abs/path``, ``memory://…``). A URI's key is taken literally: no ``%``-decoding, and
``?`` or ``#`` are part of the key (options come from the environment, not from a query string).

:func:`resolve` gives the filesystem of a URI: pyarrow's own (``FileSystem.from_uri``: s3, gs/gcs, hdfs/viewfs,
abfs/abfss, file) when it knows the scheme, else an fsspec filesystem wrapped in ``PyFileSystem(FSSpecHandler)``
when fsspec knows the protocol (fsspec is then needed; pyarrow alone covers the schemes above). Filesystems are
made once per process per ``(scheme, netloc)``.

S3 settings come from the standard AWS environment, which pyarrow 26's ``FileSystem.from_uri`` honours itself
(checked against a moto S3 server): ``AWS_ACCESS_KEY_ID`` / ``AWS_SECRET_ACCESS_KEY`` / ``AWS_SESSION_TOKEN``
(and the rest of the AWS SDK's credential chain), ``AWS_ENDPOINT_URL_S3`` before ``AWS_ENDPOINT_URL`` (an
``http://`` endpoint is used as plain HTTP), ``AWS_DEFAULT_REGION`` before ``AWS_REGION``. Nothing is added
here. (The ``S3FileSystem()`` constructor, by contrast, ignores the endpoint variables; hence ``from_uri``.)
Without a region and without an endpoint, pyarrow asks AWS for the bucket's region once per bucket.

Outputs are written locally and then *published* (:func:`publish_file`, :func:`publish_tree`) so that a reader
of the destination never sees part of a file: an object store gets one upload per file (an object appears
whole when its upload completes), a filesystem with rename gets ``.NAME.tmp`` and a rename.
"""
from __future__ import annotations

import errno
import glob
import os
import re
import shutil
import threading
from dataclasses import dataclass
from typing import Callable

import pyarrow as pa
import pyarrow.fs as pafs
import xxhash

from dataclean.io.writers import fsync_replace, remove_quietly, tmp_name

#: ``scheme://`` with a scheme of two characters or more: ``C://x`` is a Windows drive, not a URI.
_URI = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]+)://([^/]*)(.*)$", re.DOTALL)
#: Read-ahead of an input stream: one ranged GET per this many bytes on an object store.
STREAM_BUFFER = 8 << 20
#: fsspec protocols that are object stores (one upload per file; no real rename).
_FSSPEC_OBJECT_STORES = frozenset({"s3", "s3a", "gs", "gcs", "abfs", "abfss", "az", "adl", "oss", "oci", "r2"})
_OBJECT_STORES = frozenset({"s3", "gcs", "abfs"})  # pyarrow FileSystem.type_name values

_LOCAL = pafs.LocalFileSystem()


@dataclass(frozen=True)
class _Root:
    """The filesystem behind ``scheme://netloc/`` and how keys map to its paths and back."""

    fs: pafs.FileSystem
    scheme: str
    netloc: str
    root: str  # the filesystem path of scheme://netloc/
    object_store: bool
    strip: Callable[[str], str] | None = None  # fsspec's own URI -> path, when the filesystem is fsspec's

    def fs_path(self, uri: str, key: str) -> str:
        if self.strip is not None:
            return self.strip(uri)
        rel = key.lstrip("/")
        if not rel:
            return self.root
        return f"{self.root.rstrip('/')}/{rel}" if self.root else rel

    def uri(self, fs_path: str) -> str:
        base = self.root.rstrip("/")
        rel = fs_path[len(base):] if fs_path.startswith(base) else fs_path
        return f"{self.scheme}://{self.netloc}/{rel.lstrip('/')}"


_ROOTS: dict[tuple[str, str], _Root] = {}
_ROOTS_LOCK = threading.Lock()


def is_uri(path: str) -> bool:
    """True for ``scheme://…`` (s3, gs, gcs, hdfs, abfs, file, memory, …); False for a plain path or a Windows
    drive letter (``C:\\data``, ``C://data``)."""
    return _URI.match(os.fspath(path)) is not None


def _split(uri: str) -> tuple[str, str, str]:
    m = _URI.match(uri)
    if m is None:
        raise ValueError(f"not a URI: {uri}")
    return m.group(1).lower(), m.group(2), m.group(3)


def _one_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


def _root(scheme: str, netloc: str, uri: str | None = None) -> _Root:
    """The (cached) filesystem of ``scheme://netloc/``; ``uri`` is only named in errors."""
    key = (scheme, netloc)
    with _ROOTS_LOCK:
        found = _ROOTS.get(key)
    if found is not None:
        return found
    base = f"{scheme}://{netloc}/"
    try:
        fs, root = pafs.FileSystem.from_uri(base)
        made = _Root(fs, scheme, netloc, root, fs.type_name in _OBJECT_STORES)
    except pa.ArrowInvalid as exc:
        if "Unrecognized filesystem type" not in str(exc):
            raise ValueError(f"cannot use {uri or base}: {_one_line(exc)}") from None
        made = _fsspec_root(scheme, netloc, uri or base)
    except OSError as exc:  # hdfs without a JVM, an S3 bucket whose region cannot be found...
        raise OSError(f"cannot open the filesystem of {uri or base}: {_one_line(exc)}") from None
    with _ROOTS_LOCK:
        return _ROOTS.setdefault(key, made)


def _fsspec_root(scheme: str, netloc: str, uri: str) -> _Root:
    base = f"{scheme}://{netloc}/"
    try:
        import fsspec
    except ImportError:
        raise ValueError(f"unknown URI scheme {scheme!r} in {uri}: pyarrow has no filesystem for it "
                         "(it knows s3, gs, gcs, hdfs, viewfs, abfs, abfss, file) and fsspec is not installed") \
            from None
    try:
        cls = fsspec.get_filesystem_class(scheme)
    except ValueError:
        raise ValueError(f"unknown URI scheme {scheme!r} in {uri}: neither pyarrow (s3, gs, gcs, hdfs, viewfs, "
                         "abfs, abfss, file) nor fsspec knows it") from None
    except ImportError as exc:
        raise ValueError(f"URI scheme {scheme!r} needs a package that is not installed: {_one_line(exc)}") from None
    ffs = cls(**cls._get_kwargs_from_urls(base))
    protocols = {ffs.protocol} if isinstance(ffs.protocol, str) else set(ffs.protocol)
    return _Root(pafs.PyFileSystem(pafs.FSSpecHandler(ffs)), scheme, netloc, cls._strip_protocol(base),
                 bool(protocols & _FSSPEC_OBJECT_STORES), strip=cls._strip_protocol)


def resolve(path: str) -> tuple[pafs.FileSystem, str]:
    """The filesystem holding ``path`` and the path to give it: ``(LocalFileSystem, absolute path)`` for a
    local path; for a URI, pyarrow's filesystem for its scheme (else fsspec's). Raises ValueError naming the
    scheme when neither knows it."""
    path = os.fspath(path)
    if not is_uri(path):
        return _LOCAL, os.path.abspath(path)
    scheme, netloc, key = _split(path)
    root = _root(scheme, netloc, path)
    return root.fs, root.fs_path(path, key)


def _local_path(path: str) -> str | None:
    """The local file name of ``path`` (a plain path, or a URI whose filesystem is the local one), or None."""
    if not is_uri(path):
        return path
    fs, p = resolve(path)
    return p if isinstance(fs, pafs.LocalFileSystem) else None


def join(base: str, *names: str) -> str:
    """``base`` / ``names``: :func:`os.path.join` for a local path, ``/`` for a URI."""
    if not is_uri(base):
        return os.path.join(base, *names)
    return "/".join([base.rstrip("/"), *(n.strip("/") for n in names)])


# --------------------------------------------------------------------------------------------------------
# Reading


def _info(path: str) -> pafs.FileInfo:
    fs, p = resolve(path)
    return fs.get_file_info(p)


def stat(path: str) -> tuple[int, int]:
    """``(size in bytes, modification time in ns)`` of a file. A store that keeps no modification time gives
    0 (then a run's fingerprint, which uses both, sees only the size change). Object stores (S3, GCS) keep it
    to the second. Raises FileNotFoundError when there is no such file."""
    if not is_uri(path):
        st = os.stat(path)
        return st.st_size, st.st_mtime_ns
    info = _info(path)
    if info.type == pafs.FileType.NotFound:
        raise FileNotFoundError(errno.ENOENT, "no such file", path)
    if info.type != pafs.FileType.File:
        raise IsADirectoryError(errno.EISDIR, "not a file", path)
    return info.size, info.mtime_ns or 0


def checksum(path: str) -> str:
    """``"xxh3_128:<hex>"`` of the file's bytes, the same value as :func:`dataclean.exec.tasks.file_checksum`
    gives for a local file."""
    h = xxhash.xxh3_128()
    with (open(path, "rb") if not is_uri(path) else open_input_stream(path)) as fh:
        for block in iter(lambda: fh.read(1 << 22), b""):
            h.update(block)
    return "xxh3_128:" + h.hexdigest()


def open_input_file(path: str) -> pa.NativeFile:
    """A random-access file (for Parquet footers and column chunks: ranged reads on an object store)."""
    fs, p = resolve(path)
    return fs.open_input_file(p)


def open_input_stream(path: str, buffer_size: int = STREAM_BUFFER) -> pa.NativeFile:
    """A sequential, read-ahead buffered stream of the file's bytes *as stored*: nothing is decompressed
    whatever the extension (the readers decode ``.gz`` / ``.zst`` themselves). Wrap it in
    :class:`io.BufferedReader` to iterate over lines."""
    fs, p = resolve(path)
    return fs.open_input_stream(p, compression=None, buffer_size=buffer_size)


def exists(path: str) -> bool:
    if not is_uri(path):
        return os.path.exists(path)
    return _info(path).type != pafs.FileType.NotFound


def isdir(path: str) -> bool:
    """True for a folder; on an object store, for a prefix that holds objects (``s3://b/corpus``)."""
    if not is_uri(path):
        return os.path.isdir(path)
    return _info(path).type == pafs.FileType.Directory


def isfile(path: str) -> bool:
    if not is_uri(path):
        return os.path.isfile(path)
    return _info(path).type == pafs.FileType.File


def listdir(path: str) -> list[str]:
    """Sorted names of the entries directly in the folder ``path``."""
    if not is_uri(path):
        return sorted(os.listdir(path))
    fs, p = resolve(path)
    return sorted(info.base_name for info in fs.get_file_info(pafs.FileSelector(p, recursive=False)))


def walk_files(path: str) -> list[str]:
    """Every file below the folder ``path`` (recursively), as sorted paths: ``path`` + ``/`` + the file's
    path below it for a URI folder (so the URIs keep the caller's spelling of the folder). Raises
    FileNotFoundError when the folder does not exist."""
    if not is_uri(path):
        return sorted(os.path.join(r, f) for r, _, files in os.walk(path) for f in files)
    scheme, netloc, _ = _split(path)
    root = _root(scheme, netloc, path)
    fs, p = resolve(path)
    prefix, base = p.rstrip("/") + "/", path.rstrip("/") + "/"
    return sorted(base + i.path[len(prefix):] if i.path.startswith(prefix) else root.uri(i.path)
                  for i in fs.get_file_info(pafs.FileSelector(p, recursive=True)) if i.type == pafs.FileType.File)


# --------------------------------------------------------------------------------------------------------
# Publishing finished local files


def is_unfinished(name: str) -> bool:
    """A file a writer has not finished: ``.NAME.tmp-PID-RANDOM`` (see dataclean.io.writers), or the
    ``.NAME.tmp`` of an older dataclean."""
    return name.startswith(".") and (name.endswith(".tmp") or ".tmp-" in name)


def _publish_local(local_path: str, dest: str) -> None:
    if os.path.exists(dest) and os.path.samefile(local_path, dest):
        return
    dest = os.path.abspath(dest)
    os.makedirs(os.path.dirname(dest), exist_ok=True)
    tmp = tmp_name(dest)
    try:
        shutil.copyfile(local_path, tmp)
        fsync_replace(tmp, dest)
    except BaseException:
        remove_quietly(tmp)
        raise


def _upload(local_path: str, fs: pafs.FileSystem, path: str) -> None:
    """Write the local file's bytes to ``path`` in one call. pyarrow's output stream has no abort, and closing
    it (which an error inside a copy loop would do) completes the upload: so the whole file, memory-mapped,
    is handed over at once and an interrupted copy cannot complete a truncated object."""
    size = os.path.getsize(local_path)
    with fs.open_output_stream(path, compression=None) as out:  # compression=None: never by extension
        if size:
            with pa.memory_map(local_path, "r") as src:
                out.write(src.read_buffer())


def publish_file(local_path: str, dest: str) -> str:
    """Copy the finished local file ``local_path`` to ``dest`` (a path or URI) so that no reader sees part of
    it: one upload on an object store; ``.NAME.tmp`` then a rename elsewhere. Overwrites: a rerun publishes
    the same bytes again. Returns ``dest``."""
    dest = os.fspath(dest)
    local_dest = _local_path(dest)
    if local_dest is not None:
        _publish_local(local_path, local_dest)
        return dest
    scheme, netloc, key = _split(dest)
    root = _root(scheme, netloc, dest)
    path = root.fs_path(dest, key)
    if root.object_store:
        _upload(local_path, root.fs, path)
        return dest
    folder, name = path.rsplit("/", 1) if "/" in path else ("", path)
    tmp = tmp_name(f"{folder}/{name}" if folder else name)
    if folder:
        root.fs.create_dir(folder, recursive=True)
    try:
        _upload(local_path, root.fs, tmp)
        try:
            root.fs.move(tmp, path)
        except OSError:  # HDFS renames onto no existing file: the old one goes first (never a partial one)
            if root.fs.get_file_info(path).type != pafs.FileType.File:
                raise
            root.fs.delete_file(path)
            root.fs.move(tmp, path)
    except BaseException:
        try:
            root.fs.delete_file(tmp)
        except (OSError, pa.ArrowException):
            pass
        raise
    return dest


def publish_tree(local_dir: str, dest_dir: str) -> list[str]:
    """Publish every file below ``local_dir`` to the same relative place below ``dest_dir`` (see
    :func:`publish_file`), in sorted order of relative path; return the destinations in that order. A writer's
    unfinished temporary files (``.NAME.tmp``, ``.NAME.tmp-PID``) are not published; files already at the
    destination that ``local_dir`` lacks are left alone (use :func:`remove_tree` first for a fresh copy)."""
    rels: list[str] = []
    for folder, dirs, files in os.walk(local_dir):
        dirs.sort()
        rel_folder = os.path.relpath(folder, local_dir)
        rels.extend(os.path.normpath(os.path.join(rel_folder, f)) for f in files if not is_unfinished(f))
    done = []
    for rel in sorted(rels, key=lambda r: r.split(os.sep)):
        done.append(publish_file(os.path.join(local_dir, rel), join(dest_dir, *rel.split(os.sep))))
    return done


def remove_tree(dest: str) -> None:
    """Remove the file or folder ``dest`` (path or URI) and everything below it; nothing when it does not
    exist. On an object store, a bucket itself is emptied, never deleted."""
    local = _local_path(dest)
    if local is not None:
        if os.path.isdir(local) and not os.path.islink(local):
            shutil.rmtree(local)
        elif os.path.lexists(local):
            os.remove(local)
        return
    scheme, netloc, key = _split(dest)
    root = _root(scheme, netloc, dest)
    path = root.fs_path(dest, key)
    info = root.fs.get_file_info(path)
    if info.type == pafs.FileType.NotFound:
        return
    if info.type != pafs.FileType.Directory:
        root.fs.delete_file(path)
    elif root.object_store and "/" not in path.strip("/"):
        root.fs.delete_dir_contents(path)
    else:
        root.fs.delete_dir(path)


def files_in(folder: str, pattern: str) -> list[str]:
    """The paths in the local ``folder`` that match the glob ``pattern``, sorted. The folder is taken
    literally (``glob.escape``): an output folder named ``run[1]`` is not a character class. (Before, every
    file of such a folder's pass 1 was missed: 1,686 records in, 0 kept + 0 removed.)"""
    return sorted(glob.glob(os.path.join(glob.escape(folder), pattern)))

