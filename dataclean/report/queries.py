"""What the report reads from a run's output folder, aggregated in DuckDB so its cost does not grow with the
corpus in memory: histograms are binned in SQL, examples are chosen by id hash and then fetched by key, and
document text is only ever read truncated, for the handful of documents shown.
"""
from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from dataclean.audit.tables import connect, ident, kept_records_filter, shard_files, sql_list
from dataclean.io.fs import files_in

TEXT_CHARS = 600  # characters of a document's text shown in the report
HIST_BINS = 40
SAMPLE_ROWS = 200_000  # rows per table behind a histogram's axis range (the counts use every row)
MEMORY_ROWS = 50_000  # tables up to this size are histogrammed in numpy (<= 50 MB for 120 signals)
FEW_KEYS = 32  # documents fetched by key from the shards that hold them only (:func:`_holding`)
STREAM_ROWS = 32_768  # rows per record batch of the larger tables' histogram scan (~30 MB for 120 signals)


def read_json(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, ValueError):
        return None


def read_parquet(path: str) -> pa.Table | None:
    if not os.path.exists(path):
        return None
    return pq.read_table(path)


def rows(table: pa.Table | None) -> list[dict]:
    return table.to_pylist() if table is not None else []


def sql_str(value: str) -> str:
    return "'" + str(value).replace("'", "''") + "'"


class RunTables:
    """DuckDB views ``kept`` and ``removed`` over one output folder, plus the column names of each."""

    def __init__(self, out: str, memory_limit: str | None = None):
        self.out = out
        self.con: duckdb.DuckDBPyConnection = connect(out, memory_limit=memory_limit)
        self.kept_cols = {r[0]: r[1] for r in self.con.sql("DESCRIBE kept").fetchall()}
        self.removed_cols = {r[0]: r[1] for r in self.con.sql("DESCRIBE removed").fetchall()}
        self.kept_filter = kept_records_filter(self.kept_cols)  # a mixture's copies are not extra documents
        self.input_cols = _input_columns(out)  # the inputs' own columns carried to data/: not signals

    def close(self) -> None:
        self.con.close()


def _input_columns(out: str) -> set[str]:
    """The columns of ``data/`` that came from the inputs (field metadata :data:`dataclean.schema.
    EXTRA_FIELD_METADATA`), read from one shard's schema (every shard has the same)."""
    from dataclean.schema import EXTRA_FIELD_METADATA

    shards = sorted(files_in(os.path.join(out, "data"), "*.parquet"))
    if not shards:
        return set()
    key, value = next(iter(EXTRA_FIELD_METADATA.items()))
    return {f.name for f in pq.read_schema(shards[0]) if (f.metadata or {}).get(key) == value}


NUMERIC = ("DOUBLE", "FLOAT", "BIGINT", "INTEGER", "SMALLINT", "TINYINT", "HUGEINT", "UBIGINT", "UINTEGER",
           "USMALLINT", "UTINYINT", "REAL")


def is_numeric(duck_type: str | None) -> bool:
    return bool(duck_type) and (duck_type in NUMERIC or duck_type.startswith("DECIMAL"))


def is_integer(duck_type: str | None) -> bool:
    return bool(duck_type) and duck_type in NUMERIC and duck_type not in ("DOUBLE", "FLOAT", "REAL")


@dataclass
class Histogram:
    signal: str
    edges: list[float]
    kept: list[int]
    removed_by_rule: list[int]
    removed_other: list[int]
    log_x: bool
    lo_value: float  # smallest value seen
    hi_value: float  # largest value seen (values above the last edge are counted in the last bin)
    n: int


def _double(x: float) -> str:
    """``x`` as a DuckDB DOUBLE literal that parses to the same double (a plain ``-6.74`` is a DECIMAL, whose
    conversion may round differently from Python's)."""
    r = repr(float(x))
    return r if ("e" in r or "n" in r) else r + "e0"


def _signal_stats_sql(t: RunTables, views, names: list[str]) -> dict[str, dict]:
    stats: dict[str, dict] = {s: {"n": 0, "lo": None, "hi": None, "q_lo": None, "q_hi": None} for s in names}
    for view, cols in views:
        present = [s for s in names if is_numeric(cols.get(s))]
        if not present:
            continue
        where = t.kept_filter if view == "kept" else "true"
        rows_ = t.con.execute(f"SELECT count(*) FROM {view} WHERE {where}").fetchall()[0][0]
        every = max(1, math.ceil(rows_ / SAMPLE_ROWS))
        sample = f"origin_row % {every} = 0" if every > 1 else "true"
        parts = []
        for s in present:  # CASE, not FILTER: hundreds of FILTER clauses make DuckDB superlinear (47 s vs 0.8 s)
            c = ident(s) + "::DOUBLE"
            fin = f"CASE WHEN isfinite({c}) THEN {c} END"
            parts += [f"count({fin})", f"min({fin})", f"max({fin})",
                      f"quantile_disc(CASE WHEN isfinite({c}) AND {sample} THEN {c} END, [0.005, 0.995])"]
        row = t.con.execute(f"SELECT {', '.join(parts)} FROM {view} WHERE {where}").fetchall()[0]
        for i, s in enumerate(present):
            _merge_stats(stats[s], *row[4 * i: 4 * i + 4])
    return stats


def _merge_stats(st: dict, n, lo, hi, q) -> None:
    if not n:
        return
    q_lo, q_hi = (q[0], q[1]) if q else (lo, hi)
    st["n"] += n
    for k, v, pick in (("lo", lo, min), ("hi", hi, max), ("q_lo", q_lo, min), ("q_hi", q_hi, max)):
        st[k] = v if st[k] is None else pick(st[k], v)


def _layout(stats: dict[str, dict], views, signals, marks, bins: int) -> dict[str, tuple]:
    """Per signal with finite values: (edges, log_x, stats, start, width, bins)."""
    layout: dict[str, tuple] = {}
    for s, st in stats.items():
        if not st["n"] or any(math.isnan(st[k]) or math.isinf(st[k]) for k in ("lo", "hi", "q_lo", "q_hi")):
            continue
        lo, hi = st["q_lo"], st["q_hi"]
        if hi <= lo:
            lo, hi = st["lo"], st["hi"]
        for m in marks.get(s, []):
            span = max(hi - lo, abs(m), 1e-9)
            if lo - span * 3 <= m < lo:
                lo = m
            elif hi < m <= hi + span * 3:
                hi = m
        log_x = lo >= 0 and hi >= 1000
        integer = any(is_integer(cols.get(s)) for _, cols in views)
        if log_x:
            a, b = math.log10(1 + lo), math.log10(1 + hi) * 1.02
            width = (b - a) / bins
            edges = [10 ** (a + i * width) - 1 for i in range(bins + 1)]
            start = a
        elif integer and hi - lo <= bins:
            start = math.floor(lo) - 0.5
            nb = int(math.floor(hi) - math.floor(lo)) + 1
            width = 1.0
            edges = [start + i for i in range(nb + 1)]
        else:
            if hi <= lo:
                hi = lo + 1.0
            pad = (hi - lo) * 0.02
            start, width = lo - pad, (hi - lo + 2 * pad) / bins
            edges = [start + i * width for i in range(bins + 1)]
        layout[s] = (edges, log_x, st, float(start), float(width), len(edges) - 1)
    return layout


def _value_sql(s: str, log_x: bool) -> str:
    x = f"{ident(s)}::DOUBLE"
    return f"log10(1 + greatest({x}, 0))" if log_x else x


def _signal_counts_stream(t: RunTables, views, layout, signals, counts) -> None:
    """The counts per bin of every signal in ``layout``, in one scan of each table streamed in record batches
    of :data:`STREAM_ROWS` rows (memory bounded by one batch, whatever the size): DuckDB casts and takes the
    logarithms as the in-memory path's query does, numpy bins and counts with the same double operations.
    Measured on the bench run (258,156 documents, 106 signals): 0.4 s, where a GROUP BY per signal in
    DuckDB (UNION ALL-ed by 16) took 2.9 s."""
    for view, cols in views:
        present = [s for s in layout if is_numeric(cols.get(s))]
        if not present:
            continue
        where = t.kept_filter if view == "kept" else "true"
        exprs = [f"CASE WHEN isfinite({ident(s)}::DOUBLE) THEN {_value_sql(s, layout[s][1])} END AS c{i}"
                 for i, s in enumerate(present)]
        if view == "removed":
            exprs.append("rule")
        listed = {s: pa.array(signals[s], pa.string()) for s in present}
        reader = t.con.sql(f"SELECT {', '.join(exprs)} FROM {view} WHERE {where}").to_arrow_reader(STREAM_ROWS)
        for batch in reader:
            rule = batch.column(len(present)) if view == "removed" else None
            for i, s in enumerate(present):
                _, _, _, lo, w, nb = layout[s]
                v = _finite(batch.column(i))
                fin = np.isfinite(v)
                k = np.clip(np.floor((v[fin] - lo) / w), 0, nb - 1).astype(np.int64)
                if rule is None:
                    g = np.zeros(len(k), dtype=np.int64)
                else:
                    hit = pc.fill_null(pc.is_in(rule, value_set=listed[s]), False)
                    g = np.where(hit.to_numpy(zero_copy_only=False)[fin], 1, 2)
                c = np.bincount(g * nb + k, minlength=3 * nb).reshape(3, nb)
                for j in range(3):
                    counts[s][j] = [a + int(b) for a, b in zip(counts[s][j], c[j])]


def _fetch(t: RunTables, view: str, exprs: list[str], extra: str = "") -> pa.Table:
    where = t.kept_filter if view == "kept" else "true"
    cols = [f"{e} AS c{i}" for i, e in enumerate(exprs)] + ([extra] if extra else [])
    return t.con.sql(f"SELECT {', '.join(cols)} FROM {view} WHERE {where}").to_arrow_table()


def _finite(col) -> np.ndarray:
    x = col.to_numpy(zero_copy_only=False) if col.null_count == 0 else col.fill_null(float("nan")).to_numpy()
    return np.asarray(x, dtype=np.float64)


def _signal_histograms_in_memory(t: RunTables, views, names, signals, marks, bins) -> dict[str, Histogram]:
    """:func:`signal_histograms` on tables of at most :data:`MEMORY_ROWS` rows: the same numbers (DuckDB casts
    and takes the logarithms, numpy does the rest with the same operations), in one read per table instead
    of dozens of queries (0.02 s instead of 2.2 s on sample_data's 1,686 documents)."""
    values: dict[str, list[tuple[str, np.ndarray, np.ndarray | None]]] = {}
    stats: dict[str, dict] = {s: {"n": 0, "lo": None, "hi": None, "q_lo": None, "q_hi": None} for s in names}
    for view, cols in views:
        present = [s for s in names if is_numeric(cols.get(s))]
        if not present:
            continue
        tab = _fetch(t, view, [f"{ident(s)}::DOUBLE" for s in present], "rule" if view == "removed" else "")
        rule = tab.column("rule").combine_chunks() if view == "removed" else None
        for i, s in enumerate(present):
            x = _finite(tab.column(i).combine_chunks())
            fin = np.isfinite(x)
            f = np.sort(x[fin])
            n = len(f)
            q = [f[max(0, math.ceil(n * p) - 1)].item() for p in (0.005, 0.995)] if n else None
            _merge_stats(stats[s], n, f[0].item() if n else None, f[-1].item() if n else None, q)
            values.setdefault(s, []).append((view, fin, rule))
    layout = _layout(stats, views, signals, marks, bins)
    out = {}
    for view, cols in views:
        present = [s for s in layout if is_numeric(cols.get(s))]
        if not present:
            continue
        tab = _fetch(t, view, [_value_sql(s, layout[s][1]) for s in present])
        for i, s in enumerate(present):
            _, lg, _, lo, w, nb = layout[s]
            v = _finite(tab.column(i).combine_chunks())
            (_, fin, rule), = [e for e in values[s] if e[0] == view]
            v = v[fin]
            k = np.clip(np.floor((v - lo) / w), 0, nb - 1).astype(np.int64)
            if view == "kept":
                g = np.zeros(len(k), dtype=np.int64)
            else:
                hit = pc.fill_null(pc.is_in(rule, value_set=pa.array(signals[s], pa.string())), False)
                g = np.where(hit.to_numpy(zero_copy_only=False)[fin], 1, 2)
            c = np.bincount(g * nb + k, minlength=3 * nb).reshape(3, nb)
            h = out.setdefault(s, [[0] * nb for _ in range(3)])
            for j in range(3):
                h[j] = [a + int(b) for a, b in zip(h[j], c[j])]
    result = {}
    for s, (edges, log_x, st, _, _, nb) in layout.items():
        c = out.get(s, [[0] * nb for _ in range(3)])
        result[s] = Histogram(s, edges, c[0], c[1], c[2], log_x, st["lo"], st["hi"], st["n"])
    return result


def signal_histograms(t: RunTables, signals: dict[str, list[str]], marks: dict[str, list[float]],
                      bins: int = HIST_BINS, in_memory: bool | None = None) -> dict[str, Histogram]:
    """Per signal: counts per bin of kept documents, of documents removed by the signal's own rules
    (``signals[signal]``) and of documents removed by other rules that had the signal computed.

    Bounds: exact count, min and max, and the 0.5% and 99.5% quantiles (exact, ``quantile_disc``, so the page
    is the same on every run) of a deterministic sample of at most ~200k rows per table (every k-th input
    row); the axis spans those quantiles, widened to show the thresholds in ``marks`` when they are near.
    Counts: exact, one scan per table streamed in record batches (:func:`_signal_counts_stream`).

    ``in_memory`` (default: when each table has at most :data:`MEMORY_ROWS` rows): read the signals once and
    count in numpy, with the same result."""
    views = [(v, cols) for v, cols in (("kept", t.kept_cols), ("removed", t.removed_cols))]
    names = [s for s in signals if any(is_numeric(cols.get(s)) for _, cols in views)]
    if not names:
        return {}
    if in_memory is None:
        in_memory = all(t.con.execute(f"SELECT count(*) FROM {v}").fetchall()[0][0] <= MEMORY_ROWS
                        for v, _ in views)
    if in_memory:
        return _signal_histograms_in_memory(t, views, names, signals, marks, bins)
    stats = _signal_stats_sql(t, views, names)
    layout = _layout(stats, views, signals, marks, bins)
    if not layout:
        return {}
    counts: dict[str, dict[int, list[int]]] = {s: {g: [0] * layout[s][5] for g in range(3)} for s in layout}
    _signal_counts_stream(t, views, layout, signals, counts)
    return {s: Histogram(s, edges, counts[s][0], counts[s][1], counts[s][2], log_x, st["lo"], st["hi"], st["n"])
            for s, (edges, log_x, st, _, _, _) in layout.items()}


def quality_by_source(t: RunTables, bins: int = 20) -> dict:
    """``quality_score`` per source: histogram on [0, 1] of kept and removed documents, and quantiles of the
    kept ones."""
    if not is_numeric(t.kept_cols.get("quality_score")):
        return {}
    hist: dict = {}
    for view, cols in (("kept", t.kept_cols), ("removed", t.removed_cols)):
        if not is_numeric(cols.get("quality_score")):
            continue
        where = t.kept_filter if view == "kept" else "true"
        for source, b, n in t.con.sql(f"""
                SELECT coalesce(source, 'unknown'),
                       least(greatest(floor(quality_score * {bins}), 0), {bins - 1})::BIGINT, count(*)
                FROM {view} WHERE {where} AND quality_score IS NOT NULL AND isfinite(quality_score)
                GROUP BY ALL""").fetchall():
            entry = hist.setdefault(source, {"kept": [0] * bins, "removed": [0] * bins})
            entry["kept" if view == "kept" else "removed"][b] += n
    quant = {}
    # exact quantiles (approx_quantile differs from run to run) over at most ~1M documents: a sample by the
    # md5 of the id when there are more, so the same run gives the same page
    n = t.con.sql(f"SELECT count(*) FROM kept WHERE {t.kept_filter} AND quality_score IS NOT NULL").fetchall()[0][0]
    every = max(1, -(-n // 1_000_000))
    sample = "true" if every == 1 else f"md5_number(id) % {every} = 0"
    for source, n, mean, qs in t.con.sql(f"""
            SELECT coalesce(source, 'unknown'), count(*), avg(quality_score),
                   quantile_cont(quality_score, [0.1, 0.25, 0.5, 0.75, 0.9]) FILTER (WHERE {sample})
            FROM kept WHERE {t.kept_filter} AND quality_score IS NOT NULL GROUP BY ALL""").fetchall():
        quant[source] = {"n": n, "mean": mean, "q": qs}
    return {"edges": [i / bins for i in range(bins + 1)], "hist": dict(sorted(hist.items())), "quantiles": quant}


def example_keys(t: RunTables, per_rule: int = 5) -> list[tuple]:
    """``per_rule`` removed documents per (stage, rule), the same ones on every run: ordered by the md5 of
    their id and origin (ids may repeat across input files), not by position in the shards."""
    if not t.removed_cols or "rule" not in t.removed_cols:
        return []
    return t.con.sql(f"""
        SELECT stage, rule, origin_file, origin_row FROM (
            SELECT stage, rule, origin_file, origin_row,
                   row_number() OVER (PARTITION BY stage, rule
                                      ORDER BY md5(concat_ws('|', coalesce(id, ''), coalesce(origin_file, ''),
                                                             coalesce(origin_row::VARCHAR, ''))),
                                               origin_file, origin_row) AS k
            FROM removed)
        WHERE k <= {int(per_rule)}
        ORDER BY stage, rule, k""").fetchall()


def _text_expr(cols: dict, chars: int = TEXT_CHARS) -> str:
    return f"left(text, {int(chars)})" if "text" in cols else "NULL::VARCHAR"


def _holding(t: RunTables, view: str, join: str, n_keys: int) -> str:
    """What to read ``view``'s rows of ``join`` (a ``SEMI JOIN ... ON ...`` on alias ``k``) from: only the
    shards that hold them, found first from the key columns alone (DuckDB's ``filename``), so the texts of
    a few documents are read from their shards, not from every one (the bench run's 3 rewritten examples:
    0.05 s instead of 0.14 s). The view itself when every shard holds one, or the table has no shard, or the
    keys are more than :data:`FEW_KEYS` (then they are in most shards, and the extra scan is lost: the bench
    run's 168 near-threshold picks, 0.27 -> 0.32 s)."""
    files = shard_files(t.out, view)
    if len(files) < 2 or n_keys > FEW_KEYS:
        return view
    src = f"read_parquet({sql_list(files)}, union_by_name = true)"
    held = sorted(r[0] for r in t.con.sql(f"SELECT DISTINCT k.filename FROM {src} k {join}").fetchall())
    if not held or len(held) == len(files):
        return view
    return f"read_parquet({sql_list(held)}, union_by_name = true)"


_ORIGIN_JOIN = ("SEMI JOIN {keys} w ON k.origin_file IS NOT DISTINCT FROM w.origin_file "
                "AND k.origin_row = w.origin_row")


def fetch_removed(t: RunTables, keys: list[tuple], chars: int = TEXT_CHARS) -> dict[tuple, dict]:
    """The ledger rows of ``keys`` = (origin_file, origin_row), text truncated to ``chars``, by key."""
    if not keys:
        return {}
    want = pa.table({"origin_file": [k[0] for k in keys], "origin_row": [k[1] for k in keys]},
                    schema=pa.schema([("origin_file", pa.string()), ("origin_row", pa.int64())]))
    c = t.removed_cols
    raw = f"r.raw[1:{TEXT_CHARS}]" if "raw" in c else "NULL::BLOB"
    t.con.register("report_want", want)
    try:
        res = t.con.sql(f"""
            SELECT r.id, r.source, r.lang, r.url, r.meta, r.origin_file, r.origin_row, r.stage, r.rule, r.reason,
                   r.value, r.threshold, r.detail, r.dup_of, r.n_chars, {_text_expr(c, chars)} AS text,
                   {raw} AS raw
            FROM {_holding(t, "removed", _ORIGIN_JOIN.format(keys="report_want"), len(keys))} r SEMI JOIN report_want w
              ON r.origin_file IS NOT DISTINCT FROM w.origin_file AND r.origin_row = w.origin_row""")
        names = res.columns
        out = {}
        for row in res.fetchall():
            d = dict(zip(names, row))
            out[(d["origin_file"], d["origin_row"])] = d
        return out
    finally:
        t.con.unregister("report_want")


def fetch_by_id(t: RunTables, view: str, ids: list[str], chars: int = TEXT_CHARS) -> dict[str, dict]:
    """Documents of ``view`` by id (first by origin when an id repeats), text truncated to ``chars``."""
    cols = t.kept_cols if view == "kept" else t.removed_cols
    if not ids or "id" not in cols:
        return {}
    t.con.register("report_ids", pa.table({"id": ids}, schema=pa.schema([("id", pa.string())])))
    extra = ", value, rule, dup_of" if view == "removed" else ""
    qs = ", quality_score" if "quality_score" in cols else ", NULL::DOUBLE AS quality_score"
    try:
        res = t.con.sql(f"""
            SELECT id, source, lang, url, n_chars, {_text_expr(cols, chars)} AS text{qs}{extra}
            FROM {_holding(t, view, "SEMI JOIN report_ids w ON k.id = w.id", len(ids))}
            WHERE id IN (SELECT id FROM report_ids)
            QUALIFY row_number() OVER (PARTITION BY id ORDER BY origin_file, origin_row) = 1""")
        names = res.columns
        return {r[0]: dict(zip(names, r)) for r in res.fetchall()}
    finally:
        t.con.unregister("report_ids")


def dedup_examples(t: RunTables, clusters_path: str, n_clusters: int = 3, per_cluster: int = 3) -> list[dict]:
    """The ``n_clusters`` largest near-duplicate clusters (ties: smallest cluster key), each with its
    representative and its ``per_cluster`` most similar members, with their texts."""
    if not os.path.exists(clusters_path):
        return []
    con = t.con
    picked = con.execute("""
        WITH c AS (SELECT * FROM read_parquet(?)),
             top AS (SELECT cluster, any_value(cluster_size) AS size FROM c GROUP BY cluster
                     ORDER BY size DESC, cluster LIMIT ?)
        SELECT c.cluster, top.size, c.id, c.is_representative, c.similarity, c.source, c.lang, c.n_chars
        FROM c JOIN top USING (cluster)
        QUALIFY c.is_representative
             OR row_number() OVER (PARTITION BY c.cluster, c.is_representative
                                   ORDER BY c.similarity DESC NULLS LAST, c.id) <= ?
        ORDER BY top.size DESC, c.cluster, c.is_representative DESC, c.similarity DESC NULLS LAST, c.id""",
                         [clusters_path, n_clusters, per_cluster]).fetchall()
    ids = sorted({r[2] for r in picked if r[2] is not None})
    docs = fetch_by_id(t, "kept", ids)
    missing = [i for i in ids if i not in docs]
    gone = fetch_by_id(t, "removed", missing)
    clusters: dict = {}
    for cluster, size, id_, is_rep, sim, source, lang, n_chars in picked:
        entry = clusters.setdefault(cluster, {"cluster": cluster, "size": size, "rep": None, "members": []})
        doc = docs.get(id_) or gone.get(id_) or {}
        item = {"id": id_, "similarity": sim, "source": source, "lang": lang, "n_chars": n_chars,
                "text": doc.get("text"), "kept": id_ in docs, "quality_score": doc.get("quality_score")}
        if is_rep:
            entry["rep"] = item
        else:
            entry["members"].append(item)
    return list(clusters.values())


def _kept_by_origin(t: RunTables, keys: list[tuple], chars: int, extra: tuple[str, ...] = ()) -> dict[tuple, dict]:
    """The kept documents at ``keys`` ((origin_file, origin_row) pairs, as a top-n query picked them), with
    their text truncated to ``chars`` and the ``extra`` columns, by key: the texts are read for these
    documents only."""
    cols = t.kept_cols
    want = pa.table({"origin_file": [k[0] for k in keys], "origin_row": [k[1] for k in keys]},
                    schema=pa.schema([("origin_file", pa.string()), ("origin_row", pa.int64())]))
    t.con.register("report_keys", want)
    try:
        res = t.con.sql(f"""
            SELECT k.id, k.source, k.lang, k.origin_file, k.origin_row, k.n_chars, {_text_expr(cols, chars)} AS text
                   {"".join(", k." + ident(c) for c in extra)}
            FROM {_holding(t, "kept", _ORIGIN_JOIN.format(keys="report_keys"), len(keys))} k SEMI JOIN report_keys w
              ON k.origin_file IS NOT DISTINCT FROM w.origin_file AND k.origin_row = w.origin_row
            WHERE {kept_records_filter(cols, "k")}""")
        names = res.columns
        return {(r[3], r[4]): dict(zip(names, r)) for r in res.fetchall()}
    finally:
        t.con.unregister("report_keys")


def near_threshold(t: RunTables, thresholds: list, per_rule: int = 3, chars: int = TEXT_CHARS) -> dict:
    """Per threshold (index into ``thresholds``): the ``per_rule`` kept documents whose signal is closest to
    it on the kept side (ties: by origin), with the threshold that applied to each (its language's own,
    when it has one; none where the rule is off for the language), and their text truncated to ``chars``.

    One scan of ``kept`` for all the thresholds, reading only the signal columns, in record batches of
    :data:`STREAM_ROWS` rows: per batch and threshold, numpy finds the rows on the kept side and their
    distance, and a running top ``per_rule`` by (distance, origin file, origin row) keeps the closest, so the
    same run gives the same page and memory is one batch. The texts are then fetched by key. (It replaced one
    DuckDB query with a ``min_by(..., n)`` struct aggregate per threshold: 0.075 s on sample_data's 1,686
    documents and 0.25 s on the bench run's 60,446 kept ones, for 56 thresholds.)"""
    cols = t.kept_cols
    use = [(i, th) for i, th in enumerate(thresholds)
           if is_numeric(cols.get(th.signal)) and not (th.value is None and not th.by_lang)]
    if not use:
        return {}
    signals = sorted({th.signal for _, th in use})
    lang = "lang" in cols and any(th.by_lang for _, th in use)
    exprs = ["origin_file", "origin_row"] + (["lang"] if lang else []) + \
        [f"{ident(s)}::DOUBLE AS {ident(s)}" for s in signals]
    best: dict[int, list[tuple]] = {i: [] for i, _ in use}
    reader = t.con.sql(f"SELECT {', '.join(exprs)} FROM kept WHERE {t.kept_filter}").to_arrow_reader(STREAM_ROWS)
    for batch in reader:
        values = {s: _finite(batch.column(s)) for s in signals}
        langs = batch.column("lang").to_numpy(zero_copy_only=False) if lang else None
        for i, th in use:
            x = values[th.signal]
            thr = np.full(len(x), np.nan if th.value is None else float(th.value))
            if langs is not None:
                for code, v in th.by_lang.items():
                    thr[langs == code] = np.nan if v is None else float(v)
            with np.errstate(invalid="ignore"):
                # (for an upper bound, a document with none of the thing, value 0, is near no bound)
                side = ((x <= thr) & (x > 0)) if th.compare == "max" else (x >= thr)
            idx = np.flatnonzero(np.isfinite(x) & np.isfinite(thr) & side)
            if not len(idx):
                continue
            d = np.abs(x[idx] - thr[idx])
            if len(idx) > per_rule:
                keep = d <= np.partition(d, per_rule - 1)[per_rule - 1]  # (ties at the cut stay: origin decides)
                idx, d = idx[keep], d[keep]
            files = batch.column("origin_file").take(pa.array(idx)).to_pylist()
            rows_ = batch.column("origin_row").take(pa.array(idx)).to_pylist()
            cand = [(float(dd), f, r, float(x[j]), float(thr[j])) for dd, f, r, j in zip(d, files, rows_, idx)]
            best[i] = sorted(best[i] + cand, key=_near_key)[:per_rule]
    picked = [(k, f, r, v, tv) for k, top in best.items() for _, f, r, v, tv in top]
    if not picked:
        return {}
    docs = _kept_by_origin(t, [(p[1], p[2]) for p in picked], chars)
    out: dict = {}
    for k, ofile, orow, v, thr_v in picked:
        d = docs.get((ofile, orow))
        if d is not None:
            out.setdefault(k, []).append({**d, "value": v, "threshold": thr_v})
    return out


def _near_key(c: tuple) -> tuple:
    """(distance, origin file, origin row) order of :func:`near_threshold`'s candidates (a null origin last)."""
    return (c[0], c[1] is None, c[1] or "", c[2] is None, c[2] or 0)


def rewritten_examples(t: RunTables, n: int = 3, chars: int = TEXT_CHARS) -> list[dict]:
    """The ``n`` kept documents that lost the most characters to C4's line cleaning (ties: by origin), with
    the lines it recorded as removed (``c4_removed_lines``) and their cleaned text, truncated to ``chars``.
    One top-n query on two columns, then the texts by key. Empty when the run did not record the lines."""
    cols = t.kept_cols
    if "c4_removed_lines" not in cols or not is_numeric(cols.get("c4_chars_removed")):
        return []
    picked = t.con.execute(f"""
        SELECT origin_file, origin_row FROM kept
        WHERE {t.kept_filter} AND c4_chars_removed > 0 AND c4_removed_lines <> ''
        ORDER BY c4_chars_removed DESC, origin_file, origin_row LIMIT {int(n)}""").fetchall()
    if not picked:
        return []
    docs = _kept_by_origin(t, picked, chars, ("c4_removed_lines", "c4_lines_removed", "c4_chars_removed"))
    return [docs[k] for k in map(tuple, picked) if k in docs]


def masked_examples(t: RunTables, n: int = 3, chars: int = TEXT_CHARS) -> list[dict]:
    """The ``n`` kept documents with the most characters masked by the ``pii`` stage (``pii_chars``; ties: by
    origin), with their masked text truncated to ``chars``. Empty when the run masked nothing. One top-n
    query on two columns, then the texts by key, as :func:`rewritten_examples`."""
    cols = t.kept_cols
    if not is_numeric(cols.get("pii_chars")):
        return []
    counts = [c for c in cols if c.startswith("pii_") and c not in ("pii_chars", "pii_share") and is_numeric(cols[c])]
    picked = t.con.execute(f"""
        SELECT origin_file, origin_row FROM kept WHERE {t.kept_filter} AND pii_chars > 0
        ORDER BY pii_chars DESC, origin_file, origin_row LIMIT {int(n)}""").fetchall()
    docs = _kept_by_origin(t, picked, chars, ("pii_chars", *counts)) if picked else {}
    return [docs[k] for k in map(tuple, picked) if k in docs]
