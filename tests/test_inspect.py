"""``dataclean inspect`` on one real run of sample_data (made once for this module)."""
import json

import duckdb
import pytest

from conftest import run_cli
from dataclean.audit.inspect import percentile_of, rare_script_share


@pytest.fixture(scope="module")
def out(sample_run):
    return sample_run  # read only: these commands never write into the run


def one(out, sql):
    """One ledger/data row as a dict."""
    con = duckdb.connect()
    con.execute(f"CREATE VIEW kept AS SELECT * FROM read_parquet('{out}/data/*.parquet', union_by_name=true)")
    con.execute(f"CREATE VIEW removed AS SELECT * FROM read_parquet('{out}/rejected/*.parquet', union_by_name=true)")
    cur = con.execute(sql)
    cols = [d[0] for d in cur.description]
    return dict(zip(cols, cur.fetchall()[0]))


@pytest.fixture(scope="module")
def docs(out):
    """Ids of one document of each kind, and the json answer of one inspect call for all of them."""
    picks = {
        "kept": one(out, "SELECT * FROM kept WHERE source = 'wiki' AND n_chars > 700 ORDER BY id LIMIT 1"),
        "rule": one(out, "SELECT * FROM removed WHERE rule = 'gopher_short_doc' ORDER BY id LIMIT 1"),
        "near": one(out, "SELECT * FROM removed WHERE stage = 'minhash_dedup' ORDER BY id LIMIT 1"),
        "exact": one(out, "SELECT * FROM removed WHERE stage = 'exact_dedup' ORDER BY value DESC, id LIMIT 1"),
        "runs": one(out, "SELECT * FROM removed WHERE rule = 'repetition_run' ORDER BY id LIMIT 1"),
        "garbled": one(out, "SELECT * FROM removed WHERE rule = 'garbled_mojibake' ORDER BY id LIMIT 1"),
    }
    args = [a for row in picks.values() for a in ("--id", row["id"])]
    proc = run_cli("inspect", out, *args, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["not_found"] == []
    by_id = {d["id"]: d for d in result["documents"]}
    assert [d["id"] for d in result["documents"]] == [r["id"] for r in picks.values()]  # in the order asked
    return picks, by_id


def test_kept_document(out, docs):
    picks, by_id = docs
    row = picks["kept"]
    d = by_id[row["id"]]
    assert d["status"] == "kept" and d["fate"] is None
    assert (d["source"], d["lang"], d["origin_file"], d["origin_row"]) == (
        row["source"], row["lang"], row["origin_file"], row["origin_row"])
    assert d["text"] == row["text"][:600] and d["text_truncated"] and d["text_chars"] == len(row["text"])
    assert d["exact_group"] is None and d["cluster"] is None
    assert d["anomalies"]["main_script"] == "Han" and d["anomalies"]["rare_script_share"] == 0.0
    # a kept document's own signals sit inside the kept distribution of its source and language
    p = d["percentiles"]["n_chars"]
    assert p["value"] == row["n_chars"] and p["group"] == f"source=wiki, lang={row['lang']}" and p["n"] == 300
    assert 0 < p["percentile"] < 100


def test_document_removed_by_a_rule(out, docs):
    picks, by_id = docs
    row = picks["rule"]
    d = by_id[row["id"]]
    assert d["status"] == "removed"
    f = d["fate"]
    assert (f["stage"], f["rule"], f["reason"]) == ("gopher_quality", "gopher_short_doc", row["reason"])
    assert f["value"] == row["value"] == row["gopher_word_count"] and f["value"] < 50
    assert f["threshold"] == 50.0 and f["signal"] == "gopher_word_count" and f["compare"] == "min"
    assert f["dup_of"] is None
    # the word count is an outlier among kept web documents of its language: below their 1st percentile
    p = d["percentiles"]["gopher_word_count"]
    q01 = one(out, f"SELECT quantile_disc(gopher_word_count, 0.01) AS q FROM kept WHERE source = 'web' "
                   f"AND lang = '{row['lang']}'")["q"]
    assert p["p01"] == q01 and p["flag"] == "low" and p["percentile"] <= 1.0
    assert {"signal": "gopher_word_count", **p} in d["outliers"]


def test_near_duplicate_names_its_cluster_and_representative(out, docs):
    picks, by_id = docs
    row = picks["near"]
    d = by_id[row["id"]]
    assert (d["fate"]["stage"], d["fate"]["rule"]) == ("minhash_dedup", "near_duplicate")
    assert d["fate"]["dup_of"] == row["dup_of"] and row["dup_of"]
    c = d["cluster"]
    members = one(out, f"""SELECT list(id ORDER BY id) AS ids, any_value(cluster_size) AS size,
                             any_value(cluster) AS cluster
                           FROM read_parquet('{out}/dedup/clusters.parquet')
                           WHERE cluster = (SELECT cluster FROM read_parquet('{out}/dedup/clusters.parquet')
                                            WHERE id = '{row['id']}')""")
    assert c["representative"] == row["dup_of"] and c["cluster"] == members["cluster"]
    assert c["size"] == members["size"] == len(members["ids"])
    assert sorted(m["id"] for m in c["members"]) == members["ids"]
    assert c["similarity_to_representative"] == pytest.approx(row["value"])
    assert d["exact_group"] is None


def test_exact_duplicate_names_its_group(out, docs):
    picks, by_id = docs
    row = picks["exact"]
    d = by_id[row["id"]]
    assert (d["fate"]["stage"], d["fate"]["rule"]) == ("exact_dedup", "exact_duplicate")
    g = d["exact_group"]
    assert g["kept_id"] == d["fate"]["dup_of"] == row["dup_of"]
    assert g["size"] == int(row["value"]) == len(g["members"]) and row["id"] in g["members"]
    assert g["members"] == sorted(g["members"]) and g["members"][0] == g["kept_id"]


def test_anomalies_agree_with_the_stages_that_removed(docs):
    picks, by_id = docs
    runs = by_id[picks["runs"]["id"]]["anomalies"]
    assert runs["longest_run"]["detail"] == picks["runs"]["detail"]
    assert runs["longest_run"]["chars"] == picks["runs"]["runs_longest_chars"] == picks["runs"]["value"]
    assert any(f.startswith("repetition: ") for f in runs["flags"])
    garbled = by_id[picks["garbled"]["id"]]["anomalies"]
    assert garbled["garbled_rule"] == "garbled_mojibake"
    assert garbled["garbled"]["garbled_mojibake_ratio"] == pytest.approx(picks["garbled"]["value"])
    assert "garbled: garbled_mojibake" in garbled["flags"]


def test_table_output_and_unknown_id(out, docs):
    picks, _ = docs
    proc = run_cli("inspect", out, "--id", picks["rule"]["id"], "--id", "no/such-id", "--id", picks["kept"]["id"])
    assert proc.returncode == 1
    assert "REMOVED by gopher_quality / gopher_short_doc" in proc.stdout
    assert f"value {int(picks['rule']['value'])} (gopher_word_count), threshold 50 [below the minimum]" in proc.stdout
    assert "KEPT" in proc.stdout and "gopher_word_count = " in proc.stdout
    assert "not found: no/such-id" in proc.stdout
    assert proc.stderr.strip() == "error: 1 id(s) not found: no/such-id"


def test_full_text(out, docs):
    picks, _ = docs
    proc = run_cli("inspect", out, "--id", picks["kept"]["id"], "--full", "--format", "json")
    d = json.loads(proc.stdout)["documents"][0]
    assert d["text"] == picks["kept"]["text"] and not d["text_truncated"]


def test_ids_file(out, docs, tmp_path):
    picks, _ = docs
    ids = [picks["near"]["id"], picks["kept"]["id"], "missing-1", picks["exact"]["dup_of"]]
    path = tmp_path / "ids.txt"
    path.write_text("\n".join(ids[:2]) + "\n\n  " + ids[2] + "  \n" + ids[3] + "\n")
    proc = run_cli("inspect", out, "--ids-file", path, "--format", "json")
    assert proc.returncode == 1
    result = json.loads(proc.stdout)
    assert result["not_found"] == ["missing-1"]
    assert [(d["id"], d["status"]) for d in result["documents"]] == [
        (ids[0], "removed"), (ids[1], "kept"), (ids[3], "kept")]
    # the kept representative of an exact group lists its group too
    assert result["documents"][2]["exact_group"]["kept_id"] == ids[3]


def test_text_file(out, docs, tmp_path):
    picks, _ = docs
    kept_text = picks["kept"]["text"]
    exact = picks["exact"]
    lines = [
        json.dumps({"text": kept_text.replace("\n", "\r\n")}, ensure_ascii=False),  # matched after normalize
        json.dumps({"text": picks["near"]["text"]}, ensure_ascii=False),
        json.dumps({"text": "  " + exact["text"].upper() + "  "}, ensure_ascii=False),  # by content hash
        "A brand new line of text that this run never saw, with a run ==================================== in it",
        json.dumps({"text": "Привет мир, это простой тест для проверки работы программы, 你好世界", "source": "web"},
                   ensure_ascii=False),
    ]
    path = tmp_path / "texts.jsonl"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    proc = run_cli("inspect", out, "--text-file", path, "--format", "json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    by_query = {}
    for d in result["documents"]:
        by_query.setdefault(d["query"], []).append(d)
    assert [(d["id"], d["status"]) for d in by_query["text line 1"]] == [(picks["kept"]["id"], "kept")]
    assert [(d["id"], d["status"]) for d in by_query["text line 2"]] == [(picks["near"]["id"], "removed")]
    group = sorted(d["id"] for d in by_query["text line 3"])
    assert exact["id"] in group and exact["dup_of"] in group
    new = by_query["text line 4"][0]
    assert new["status"] == "not_in_run" and new["id"] is None
    assert new["would_be"]["rule"] == "gopher_short_doc" and new["would_be"]["signal"] == "gopher_word_count"
    assert new["anomalies"]["longest_run"]["unit"] == "=" and new["anomalies"]["longest_run"]["chars"] == 36
    mixed = by_query["text line 5"][0]
    assert mixed["status"] == "not_in_run" and mixed["source"] == "web"
    assert mixed["lang"] == "ru" and mixed["anomalies"]["scripts"] == {"Cyrillic": 49, "Han": 4}
    assert mixed["anomalies"]["rare_script_share"] == pytest.approx(4 / 53)
    assert "rare scripts: 7.5% of letters (Han 4)" in mixed["anomalies"]["flags"]


def test_percentile_of_and_rare_script_share():
    q = [float(k) for k in range(101)]  # the percentiles of 0..100
    assert percentile_of(-1, q) == 0.0 and percentile_of(1000, q) == 100.0
    assert percentile_of(37, q) == 37.0 and percentile_of(37.5, q) == 37.5
    ties = [0.0] * 51 + [float(k) for k in range(1, 51)]  # half the documents at 0
    assert percentile_of(0.0, ties) == 25.0
    assert rare_script_share({"Han": 90, "Latin": 10, "Hiragana": 5}, "zh") == (5 / 105, "Han", {"Hiragana": 5})
    assert rare_script_share({"Han": 90, "Hiragana": 5}, "ja")[0] == 0.0
    assert rare_script_share({"Hangul": 50, "Han": 5}, "ko")[0] == 0.0
    assert rare_script_share({"Cyrillic": 16, "Han": 8}, "ja") == (16 / 24, "Cyrillic", {"Cyrillic": 16})
    assert rare_script_share({"Cyrillic": 49, "Han": 4, "Latin": 3}, "ru") == (4 / 56, "Cyrillic", {"Han": 4})
    assert rare_script_share({}, "en") == (0.0, None, {})
