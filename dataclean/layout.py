"""Where a run keeps each of its files (one place, so every part agrees on the output folder layout)."""
from __future__ import annotations

import json
import os
from dataclasses import dataclass

OWNER_FILE = ".dataclean-run.json"
#: The format of the files a run writes, for itself (``_work``) and for the next ones (``dedup/``); part of the
#: run's fingerprint, so that a run folder written in another format is started over, never resumed with its
#: files. 2: MinHash signatures and band hashes as fixed-size binary values (1: lists).
FILE_FORMAT = 2
#: Everything dataclean writes at the top of an output folder; ``--fresh`` removes only these.
OWNED_ENTRIES = ("data", "rejected", "stats", "dedup", "_work", "manifest.json", "report.html", OWNER_FILE)


def shuffle_file_name(kind: str) -> str:
    """The file of one pass-1 task's shuffle rows of ``kind`` (in its ``_work/pass1/TTTTT/`` folder)."""
    return f"shuffle-{kind}.parquet"


@dataclass(frozen=True)
class Layout:
    root: str

    def p(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    @property
    def owner(self) -> str:
        return self.p(OWNER_FILE)

    @property
    def work(self) -> str:
        return self.p("_work")

    @property
    def data(self) -> str:
        return self.p("data")

    @property
    def rejected(self) -> str:
        return self.p("rejected")

    @property
    def stats(self) -> str:
        return self.p("stats")

    @property
    def dedup(self) -> str:
        return self.p("dedup")

    @property
    def manifest(self) -> str:
        return self.p("manifest.json")

    def marker(self, name: str) -> str:
        return self.p("_work", "markers", f"{name}.json")

    def pass1_dir(self, task: int) -> str:
        return self.p("_work", "pass1", f"{task:05d}")

    @property
    def removals(self) -> str:
        return self.p("_work", "global", "removals.parquet")

    @property
    def repeats(self) -> str:
        """doc_key -> copies for documents a mixture recipe uses more than once."""
        return self.p("_work", "global", "repeats.parquet")

    def data_prefix(self, task: int) -> str:
        return f"part-{task:05d}"


def load_marker(lay: Layout, name: str) -> dict | None:
    """The marker ``name`` of the run in ``lay``, or None when it is missing or cut short."""
    try:
        with open(lay.marker(name), encoding="utf-8") as fh:
            return json.load(fh)
    except (FileNotFoundError, json.JSONDecodeError):
        return None
