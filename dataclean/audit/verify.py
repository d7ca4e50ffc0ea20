"""``dataclean verify``: the conservation law and the integrity of an output folder.

Checks, from the files on disk only:

1. every input file that was read: records = kept + removed (by ``origin_file``);
2. every source: input records = kept + removed;
3. no record appears twice across data/ and rejected/ (by input file and row) — nothing doubled;
4. no id appears twice in data/, and every repeated copy of a mixture (``mix_epoch > 0``) has its original;
5. every data/ and rejected/ shard is readable in full.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

import pyarrow.parquet as pq

from dataclean.audit.tables import connect, kept_records_filter, shard_files, view_columns


@dataclass
class VerifyReport:
    ok: bool
    problems: list[str] = field(default_factory=list)
    input_records: int = 0
    kept: int = 0
    removed: int = 0
    files_checked: int = 0


def verify(out: str, full: bool = True) -> VerifyReport:
    """Check ``out`` (see the module docstring). ``full=False`` (what a run does right after writing its
    shards) reads each shard's footer instead of decoding every page; the other checks are the same."""
    problems: list[str] = []
    manifest_path = os.path.join(out, "manifest.json")
    if not os.path.isfile(manifest_path):
        return VerifyReport(False, [f"{out} has no manifest.json: not a finished dataclean output"])
    with open(manifest_path, encoding="utf-8") as fh:
        manifest = json.load(fh)

    files = shard_files(out, "kept") + shard_files(out, "removed")
    for path in files:
        try:
            f = pq.ParquetFile(path)
            if full:
                f.read()
        except Exception as exc:  # any failure to decode is a finding, not a crash
            problems.append(f"{path}: unreadable ({type(exc).__name__}: {exc})")
    if problems:
        return VerifyReport(False, problems, files_checked=len(files))

    con = connect(out)
    # a mixture recipe writes extra epochs of some documents (mix_epoch > 0): they are copies, not records
    kept_cols = dict(view_columns(con, "kept"))
    orig = kept_records_filter(kept_cols)
    kept_by_file = dict(con.sql(f"SELECT origin_file, count(*) FROM kept WHERE {orig} GROUP BY 1").fetchall())
    removed_by_file = dict(con.sql("SELECT origin_file, count(*) FROM removed GROUP BY 1").fetchall())
    kept_by_source = dict(con.sql(f"SELECT source, count(*) FROM kept WHERE {orig} GROUP BY 1").fetchall())
    removed_by_source = dict(con.sql("SELECT source, count(*) FROM removed GROUP BY 1").fetchall())
    doubled = con.sql(f"""SELECT origin_file, origin_row, count(*) AS n FROM (
                           SELECT origin_file, origin_row FROM kept WHERE {orig} UNION ALL
                           SELECT origin_file, origin_row FROM removed) GROUP BY ALL HAVING count(*) > 1
                         ORDER BY ALL LIMIT 5""").fetchall()
    dup_ids = con.sql("SELECT id, count(*) FROM kept GROUP BY id HAVING count(*) > 1 ORDER BY id LIMIT 5").fetchall()
    orphans = con.sql(f"""SELECT id FROM kept c WHERE NOT ({orig}) AND NOT EXISTS (
                            SELECT 1 FROM kept o WHERE ({kept_records_filter(kept_cols, "o")})
                              AND o.origin_file = c.origin_file AND o.origin_row = c.origin_row)
                          ORDER BY id LIMIT 5""").fetchall()
    n_kept = con.sql(f"SELECT count(*) FROM kept WHERE {orig}").fetchall()[0][0]
    n_removed = con.sql("SELECT count(*) FROM removed").fetchall()[0][0]
    con.close()

    total_in = 0
    source_in: dict[str, int] = {}
    read_files = set()
    for entry in manifest["inputs"]:
        if entry["status"] != "ok":
            continue
        path = entry["path"]
        read_files.add(path)
        total_in += entry["records"]
        for s, n in entry["records_by_source"].items():
            source_in[s] = source_in.get(s, 0) + n
        got = kept_by_file.get(path, 0) + removed_by_file.get(path, 0)
        if got != entry["records"]:
            problems.append(f"{path}: {entry['records']} records in, but {kept_by_file.get(path, 0)} kept + "
                            f"{removed_by_file.get(path, 0)} removed = {got}")
    for path in sorted((set(kept_by_file) | set(removed_by_file)) - read_files):
        problems.append(f"{path}: documents in the output from a file that is not a read input")
    for s in sorted(set(source_in) | set(kept_by_source) | set(removed_by_source), key=str):
        got = kept_by_source.get(s, 0) + removed_by_source.get(s, 0)
        if got != source_in.get(s, 0):
            problems.append(f"source {s!r}: {source_in.get(s, 0)} records in, but {got} kept + removed")
    for f, r, n in doubled:
        problems.append(f"{f}#{r} appears {n} times across data/ and rejected/")
    for i, n in dup_ids:
        problems.append(f"id {i!r} appears {n} times in data/")
    for (i,) in orphans:
        problems.append(f"{i!r} is a repeated copy (mix_epoch > 0) of a document that is not in data/")
    return VerifyReport(not problems, problems, total_in, n_kept, n_removed, len(files))
