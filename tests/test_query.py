"""``dataclean stats`` and ``dataclean sql`` on one real run of sample_data (made once for this module)."""
import csv
import io
import json
import shutil

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from conftest import SAMPLE, run_cli
from dataclean.audit.query import QueryError, run_query, to_csv, to_json
from dataclean.audit.tables import FILES, VIEWS, table_files


@pytest.fixture(scope="module")
def out(sample_run):
    return sample_run  # read only: these commands never write into the run


@pytest.fixture(scope="module")
def summary(out):
    return json.loads((out / "stats" / "summary.json").read_text())


def parquet_rows(paths) -> int:
    return sum(pq.ParquetFile(p).metadata.num_rows for p in paths)


def test_stats_table_shows_the_exact_counts(out, summary):
    proc = run_cli("stats", out)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    lines = text.splitlines()
    n_in, kept, removed = summary["input_records"], summary["kept"], summary["removed"]
    assert f"{n_in:,} = {kept:,} + {removed:,}: ok" in text
    assert any(ln.split()[:3] == ["records", "in", f"{n_in:,}"] for ln in lines)
    assert any(ln.split()[:2] == ["kept", f"{kept:,}"] for ln in lines)
    assert any(ln.split()[:2] == ["removed", f"{removed:,}"] for ln in lines)
    # removals by stage × rule: one row per rule of summary.json, docs in the third column
    for key, n in summary["removed_by_rule"].items():
        stage, rule = key.split("/")
        assert any(ln.split()[:3] == [stage, rule, f"{n:,}"] for ln in lines), key
    # the funnel's steps: every stage of the run with the docs removed there
    for stage in summary["stages"]:
        gone = summary["removed_by_stage"].get(stage, 0)
        assert any(len(ln.split()) == 8 and ln.split()[1] == stage and ln.split()[3] == f"{gone:,}"
                   for ln in lines), stage
    for title in ("funnel (all sources)", "removed by stage × rule", "per source and language",
                  "duplicate clusters by size"):
        assert title in text
    assert "mixture" not in text  # no stats/mixture.parquet in this run


def test_stats_json_adds_up(out, summary):
    proc = run_cli("stats", out, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    stats = json.loads(proc.stdout)
    head = stats["summary"]
    assert (head["input_records"], head["kept"], head["removed"]) == (
        summary["input_records"], summary["kept"], summary["removed"])
    assert head["conservation_ok"] is True
    assert {f"{r['stage']}/{r['rule']}": r["docs"] for r in stats["removals"]} == summary["removed_by_rule"]
    assert sum(r["docs"] for r in stats["removals"]) == summary["removed"]
    assert stats["funnel"][0]["docs_in"] == summary["input_records"]
    assert stats["funnel"][-1]["docs_out"] == summary["kept"]
    assert [r["stage"] for r in stats["funnel"]] == summary["stages"]
    by_source = {}
    for r in stats["sources"]:
        acc = by_source.setdefault(r["source"], {"input": 0, "kept": 0, "removed": 0})
        for k in acc:
            acc[k] += r[k]
        assert r["input"] == r["kept"] + r["removed"]
    assert by_source == summary["by_source"]
    clusters = pq.read_table(out / "dedup" / "clusters.parquet")
    assert sum(r["documents"] for r in stats["cluster_sizes"]) == clusters.num_rows
    groups = pq.read_table(out / "dedup" / "exact_groups.parquet")
    assert sum(r["groups"] for r in stats["exact_groups"]) == groups.num_rows
    assert sum(r["documents"] - r["groups"] for r in stats["exact_groups"]) == \
        summary["removed_by_rule"]["exact_dedup/exact_duplicate"]
    share = stats["removals"][0]["share_docs"]
    assert share == pytest.approx(stats["removals"][0]["docs"] / summary["input_records"])
    assert stats["mixture"] is None


def test_every_view_is_queryable_with_its_row_count(out):
    expected = {v: parquet_rows(table_files(str(out), v)) for v in VIEWS if table_files(str(out), v)}
    assert {"kept", "removed", "stats", "stats_kept", "funnel", "inputs", "clusters", "cluster_sizes",
            "exact_groups", "quality_cutoffs"} <= set(expected)
    assert "mixture" not in expected
    union = " UNION ALL ".join(f"SELECT '{v}' AS view, count(*) AS n FROM {v}" for v in expected)
    proc = run_cli("sql", out, union, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    assert {r["view"]: r["n"] for r in json.loads(proc.stdout)} == expected

    proc = run_cli("sql", out, "--views", "--format", "json")
    assert proc.returncode == 0, proc.stderr
    views = {v["view"]: v for v in json.loads(proc.stdout)}
    assert {v: views[v]["rows"] for v in views} == expected
    kept_cols = [c for c, _ in views["kept"]["columns"]]
    assert kept_cols[:3] == ["id", "text", "source"] and "quality_score" in kept_cols
    assert ["dup_of", "VARCHAR"] in views["removed"]["columns"]
    assert [c for c, _ in views["clusters"]["columns"]][:4] == ["cluster", "id", "is_representative", "similarity"]

    proc = run_cli("sql", out, "--views", "--format", "csv")  # one row per column
    rows = list(csv.DictReader(io.StringIO(proc.stdout)))
    assert {r["view"] for r in rows} == set(expected)
    assert {(r["view"], r["column"], r["type"]) for r in rows if r["view"] == "exact_groups"} == {
        ("exact_groups", "content_hash", "VARCHAR"), ("exact_groups", "keep_id", "VARCHAR"),
        ("exact_groups", "n", "BIGINT"), ("exact_groups", "ids", "VARCHAR[]")}


def test_csv_and_json_outputs_parse_to_the_same_rows(out):
    q = "SELECT stage, rule, count(*) AS docs, sum(n_chars) AS chars FROM removed GROUP BY ALL ORDER BY docs DESC, rule"
    as_json = json.loads(run_cli("sql", out, q, "--format", "json").stdout)
    as_csv = list(csv.DictReader(io.StringIO(run_cli("sql", out, q, "--format", "csv").stdout)))
    assert len(as_json) == len(as_csv) > 5
    assert [(r["stage"], r["rule"], str(r["docs"]), str(r["chars"])) for r in as_json] == \
        [(r["stage"], r["rule"], r["docs"], r["chars"]) for r in as_csv]
    limited = run_cli("sql", out, q, "--limit", "3")
    assert limited.returncode == 0
    assert as_json[0]["rule"] in limited.stdout and "3 rows (more rows: use --limit N)" in limited.stdout


def test_lists_and_nulls_in_csv_and_json(out):
    q = "SELECT keep_id, ids, NULL AS nothing, 0.5::DOUBLE AS x FROM exact_groups ORDER BY keep_id LIMIT 2"
    rows = json.loads(to_json(run_query(str(out), q)))
    assert isinstance(rows[0]["ids"], list) and rows[0]["keep_id"] == rows[0]["ids"][0]
    assert rows[0]["nothing"] is None and rows[0]["x"] == 0.5
    parsed = list(csv.DictReader(io.StringIO(to_csv(run_query(str(out), q)))))
    assert json.loads(parsed[0]["ids"]) == rows[0]["ids"] and parsed[0]["nothing"] == ""


@pytest.mark.parametrize("statement", [
    "COPY (SELECT 1) TO '{dir}/leak.csv'",
    "CREATE TABLE t AS SELECT * FROM kept",
    "INSERT INTO kept (id) VALUES ('x')",
    "ATTACH '{dir}/leak.duckdb' AS other",
    "INSTALL httpfs",
    "LOAD httpfs",
    "SET enable_external_access = true",
    "PRAGMA enable_profiling",
    "EXPORT DATABASE '{dir}/leak'",
    "EXPLAIN ANALYZE COPY (SELECT 1) TO '{dir}/leak.csv'",
    "SELECT 1; COPY (SELECT 1) TO '{dir}/leak.csv'",
    "SELECT * FROM read_csv('{dir}/../../etc/passwd')",
    "SELECT * FROM read_parquet('{sample}/web-en.parquet')",
])
def test_statements_that_write_or_escape_are_refused(out, statement, tmp_path):
    sql = statement.format(dir=tmp_path, sample=SAMPLE)
    with pytest.raises(QueryError) as exc:
        run_query(str(out), sql)
    assert "\n" not in str(exc.value)
    assert list(tmp_path.iterdir()) == []


def test_refusals_and_bad_sql_exit_2_with_one_line(out, tmp_path):
    target = out / "data" / "part-00000-00000.parquet"
    before = target.read_bytes()
    proc = run_cli("sql", out, f"COPY (SELECT 1 AS x) TO '{target}' (FORMAT parquet)")
    assert proc.returncode == 2
    assert proc.stderr.strip() == "error: only SELECT queries are allowed: COPY statements are refused " \
                                  "(dataclean sql is read-only)"
    assert target.read_bytes() == before
    proc = run_cli("sql", out, "SELEC id FROM kept")
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith("error: Parser Error") and len(proc.stderr.strip().splitlines()) == 1
    assert "Traceback" not in proc.stderr
    proc = run_cli("sql", tmp_path, "SELECT 1")  # not an output folder
    assert proc.returncode == 2 and "not a dataclean output" in proc.stderr
    # reading the run's own tables still works after the refusals
    assert run_query(str(out), "SELECT count(*) FROM removed WHERE dup_of IS NOT NULL").rows[0][0] > 0


def test_unknown_view_names_the_views_of_the_run(out):
    with pytest.raises(QueryError, match="views of this run: kept, removed"):
        run_query(str(out), "SELECT * FROM mixture")


def test_stats_and_sql_show_a_mixture_table(out, tmp_path):
    copy = tmp_path / "run"
    shutil.copytree(out, copy)
    mixture = pa.table({
        "source": ["web", "wiki", "code"],
        "target_weight": [0.5, 0.3, 0.2],
        "target_tokens": [600_000, 360_000, 240_000],
        "available_tokens": [198_000, 94_454, 454_912],
        "available_docs": [268, 300, 220],
        "max_epochs": [4.0, 4.0, 1.0],
        "epochs_used": [3.03, 3.81, 0.53],
        "selected_docs": [812, 1143, 116],
        "output_docs": [812, 1143, 116],
        "achieved_tokens": [600_101, 359_870, 240_007],
        "achieved_weight": [0.50004, 0.29988, 0.20008],
        "select": ["repeat", "repeat", "sample"],
        "warning": [None, "capped by max_epochs", None],
    })
    pq.write_table(mixture, copy / "stats" / "mixture.parquet")
    proc = run_cli("stats", copy)
    assert proc.returncode == 0, proc.stderr
    text = proc.stdout
    assert "mixture" in text
    lines = [ln.split() for ln in text.splitlines()]
    assert ["web", "0.5", "600,000", "198,000", "268", "4", "3.03", "812", "812", "600,101", "0.5", "repeat"] in lines
    assert any(ln[:2] == ["wiki", "0.3"] and ln[-3:] == ["capped", "by", "max_epochs"] for ln in lines if ln)
    stats = json.loads(run_cli("stats", copy, "--format", "json").stdout)
    assert [r["source"] for r in stats["mixture"]] == ["web", "wiki", "code"]
    assert stats["mixture"][1]["warning"] == "capped by max_epochs"
    assert run_query(str(copy), "SELECT count(*), sum(output_docs) FROM mixture").rows == [(3, 2071)]
    assert set(FILES) == set(VIEWS) - {"kept", "removed"}


def test_terminal_output_never_carries_control_characters_from_the_data(tmp_path):
    """A hostile id or source (ESC sequences, CR, BEL) is printed as U+FFFD: it cannot retitle, clear or
    rewrite the terminal."""
    import json as _json

    inp = tmp_path / "in.jsonl"
    inp.write_text(_json.dumps({"id": "evil\x1b]0;PWNED\x07\rKEPT", "source": "web\x1b[2J",
                                "text": "a perfectly ordinary document"}) + "\n")
    out = tmp_path / "out"
    cfg = tmp_path / "c.yaml"
    cfg.write_text("pipeline:\n  - stage: normalize\noutput:\n  report: false\n")
    assert run_cli("run", inp, "-o", out, "--config", cfg, "--quiet").returncode == 0
    for args in (("sql", out, "SELECT id, source FROM kept"), ("stats", out),
                 ("inspect", out, "--id", "evil\x1b]0;PWNED\x07\rKEPT")):
        res = run_cli(*args)
        assert res.returncode == 0, (args, res.stderr)
        assert "\x1b" not in res.stdout and "\x07" not in res.stdout and "\r" not in res.stdout, args
        assert "\ufffd" in res.stdout


def test_a_result_too_wide_for_the_terminal_is_printed_one_block_per_row(out):
    """A table would drop columns that do not fit (rich squeezes them away): every column must be shown."""
    res = run_cli("sql", out, "SELECT *, input AS copy_a, input AS copy_b, input AS copy_c FROM inputs "
                              "ORDER BY input LIMIT 2")  # wider than the 160 columns of a non-terminal
    assert res.returncode == 0, res.stderr
    assert res.stdout.count("-[ row ") == 2
    for column in ("input", "status", "records", "kept", "removed", "bad_records", "error", "copy_c"):
        assert f"\n{column} " in res.stdout
    narrow = run_cli("sql", out, "SELECT status, count(*) AS n FROM inputs GROUP BY 1")
    assert "-[ row" not in narrow.stdout and "status" in narrow.stdout
