"""A run's fingerprint: what its task markers are valid for. A rerun whose fingerprint differs from the markers'
is a different run (refused, or started afresh with ``--fresh``), never a resume with stale decisions. It covers
the resolved config, the files of the rules folder, the model files the config names, the source of plug-in
stages, the inputs (size, mtime), dataclean's version and its file format."""
from __future__ import annotations

import hashlib
import json
import os

from dataclean.config import decision_hash, rules_dir
from dataclean.io import fs as iofs


def rules_digest() -> str:
    """sha256 over the files of the rules folder (word lists, URL lists...), which configs refer to by path:
    editing a list must invalidate a run's markers like editing a threshold does."""
    h = hashlib.sha256()
    root = rules_dir()
    # recipes are read into the config (hashed there); compare gates do not touch a run
    skip = {"mixtures", "compare"}
    for path in sorted(p for p in root.rglob("*") if p.is_file() and p.relative_to(root).parts[0] not in skip):
        h.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


MODEL_KEYS = ("model_path", "tokenizer", "path", "model")  # (path: a decontaminate benchmark file; model: embed's folder)


def model_files_digest(cfg) -> dict[str, str]:
    """sha256 of every model file the config names (``model_path`` of langid / quality scorers,
    ``tokens.tokenizer``) and of every embedding model folder (``model`` of ``embed``): replacing a model in
    place must invalidate the markers like a config change."""
    found: dict[str, str] = {}

    def walk(node):
        if isinstance(node, dict):
            for k, v in node.items():
                if k in MODEL_KEYS and isinstance(v, str) and os.path.isfile(v):
                    h = hashlib.sha256()
                    with open(v, "rb") as fh:
                        for block in iter(lambda: fh.read(1 << 20), b""):
                            h.update(block)
                    found[os.path.abspath(v)] = h.hexdigest()
                elif k == "model" and isinstance(v, str) and os.path.isdir(v):  # an embedding model's folder
                    from dataclean.embed.models import folder_digest

                    found[os.path.abspath(v)] = folder_digest(v)
                else:
                    walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(cfg)
    return found


def fingerprint(cfg: dict, inputs: list[str]) -> str:
    """What a run's markers are valid for: the resolved config, the rules folder, the model files it names,
    the source of its plug-in stages (an edited plug-in is a different run, not a resume with stale
    decisions), the inputs (size, mtime), dataclean's version and file format."""
    files = [(p, *iofs.stat(p)) for p in inputs]
    from dataclean import layout
    from dataclean.stages import plugin_digest
    from dataclean.version import __version__

    blob = {"config": decision_hash(cfg), "rules": rules_digest(), "models": model_files_digest(cfg),
            "version": __version__, "format": layout.FILE_FORMAT, "inputs": files}
    plugins = plugin_digest(cfg)
    if plugins:  # (only then: the fingerprint of a run without plug-ins is what it was)
        blob["plugins"] = plugins
    return hashlib.sha256(json.dumps(blob, sort_keys=True).encode()).hexdigest()
