"""``dataclean compare``: the statistics on hand-made inputs, then the real CLI on real sample text.

The CLI scenarios use ``sample_data/web-en.parquet`` (real crawl pages and e-mail) split at random into two
disjoint halves: the first half is the reference of every scenario, and each candidate is made from the
other half (or from the Chinese sample), so any failure is caused by the change the scenario makes.
"""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from conftest import SAMPLE, run_cli
from dataclean.compare.load import CompareError, read_side, sample_keys
from dataclean.compare.stats import (TokenSample, bin_counts, category_js, diversity, js_divergence,
                                     ks_statistic, shared_edges, top_ngrams)
from dataclean.io.readers import ColumnMapping

SAMPLE_N = "200"  # documents a side: keeps each CLI run near 3 s


# ------------------------------------------------------------------------------------------ statistics


def test_js_divergence_exact_values():
    assert js_divergence([1, 0], [0, 1]) == 1.0  # disjoint supports: the maximum, base 2
    assert js_divergence([3, 1], [6, 2]) == 0.0  # same shares, different totals
    # P = (1/2, 1/2), Q = (1, 0), M = (3/4, 1/4): JS = 3/2 - (3/4) log2 3
    assert js_divergence([1, 1], [1, 0]) == pytest.approx(1.5 - 0.75 * math.log2(3), abs=1e-12)
    assert js_divergence([1, 1], [1, 0]) == pytest.approx(0.31127812445913283, abs=1e-12)
    assert js_divergence([1, 0], [1, 1]) == js_divergence([1, 1], [1, 0])  # symmetric


def test_js_divergence_matches_scipy():
    from scipy.spatial.distance import jensenshannon

    rng = np.random.default_rng(1)
    for _ in range(20):
        p, q = rng.integers(0, 50, 12), rng.integers(0, 50, 12)
        p[0] += 1
        q[0] += 1
        assert js_divergence(p, q) == pytest.approx(jensenshannon(p, q, base=2) ** 2, abs=1e-12)


def test_js_divergence_rejects_bad_input():
    with pytest.raises(ValueError):
        js_divergence([1, 2], [1, 2, 3])
    with pytest.raises(ValueError):
        js_divergence([0, 0], [1, 0])
    with pytest.raises(ValueError):
        js_divergence([-1, 2], [1, 0])


def test_ks_statistic_exact_values():
    assert ks_statistic([1, 2, 3, 4], [3, 4, 5, 6]) == 0.5  # F_a(2) = 1/2, F_b(2) = 0
    assert ks_statistic([1, 2, 3], [4, 5, 6]) == 1.0
    assert ks_statistic([1, 2, 3], [3, 2, 1]) == 0.0
    assert ks_statistic([0.0], [0.0, 1.0]) == 0.5
    assert ks_statistic([1, 1, 1, 2], [1, 2, 2, 2]) == 0.5  # ties: F_a(1) = 3/4, F_b(1) = 1/4


def test_ks_statistic_matches_scipy():
    from scipy.stats import ks_2samp

    rng = np.random.default_rng(2)
    for _ in range(20):
        a, b = rng.normal(0, 1, rng.integers(1, 60)), rng.normal(0.3, 1.2, rng.integers(1, 60))
        a = np.round(a, 1)  # ties
        assert ks_statistic(a, b) == pytest.approx(ks_2samp(a, b).statistic, abs=1e-12)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=40), st.lists(st.floats(-1e6, 1e6), min_size=1, max_size=40))
def test_divergences_stay_in_range_and_are_symmetric(a, b):
    from dataclean.compare.core import feature_divergence

    ks = ks_statistic(a, b)
    assert 0.0 <= ks <= 1.0 and ks == ks_statistic(b, a)
    d = feature_divergence(np.array(a), np.array(b), bins=5)
    assert 0.0 <= d["js"] <= 1.0 and d["ks"] == ks
    assert sum(d["bins"]["reference"]) == len(a) and sum(d["bins"]["candidate"]) == len(b)
    assert feature_divergence(np.array(a), np.array(a), bins=5)["js"] == 0.0


def test_shared_edges_discrete_and_quantile():
    edges, discrete = shared_edges(np.array([0, 1, 1]), np.array([2, 2]), bins=20)
    assert discrete and edges.tolist() == [-0.5, 0.5, 1.5, 2.5]
    assert bin_counts(np.array([0, 1, 1]), edges).tolist() == [1, 2, 0]
    assert bin_counts(np.array([2, 2]), edges).tolist() == [0, 0, 2]
    edges, discrete = shared_edges(np.arange(50.0), np.arange(50.0, 100.0), bins=4)
    assert not discrete and edges.tolist() == [0.0, 24.75, 49.5, 74.25, 99.0]
    # the last bin is closed: the maximum is counted
    assert bin_counts(np.arange(50.0), edges).tolist() == [25, 25, 0, 0]
    assert bin_counts(np.arange(50.0, 100.0), edges).tolist() == [0, 0, 25, 25]


def test_feature_divergence_counts_nulls_in_their_own_bin():
    from dataclean.compare.core import feature_divergence

    nan = float("nan")
    d = feature_divergence(np.array([0, 1, nan, nan]), np.array([0, 1, 1, 1.0]), bins=20)
    assert d["bins"]["edges"] == [-0.5, 0.5, 1.5] and d["bins"]["null_bin"]
    assert (d["bins"]["reference"], d["bins"]["candidate"]) == ([1, 1, 2], [1, 3, 0])
    assert d["js"] == js_divergence([1, 1, 2], [1, 3, 0])
    assert d["ks"] == 0.25  # non-null values only: F_ref(0) = 1/2, F_cand(0) = 1/4
    same = feature_divergence(np.array([nan, nan]), np.array([nan]), bins=20)
    assert same["js"] == 0.0 and same["ks"] is None and same["constant"]


def test_category_js_over_the_union_of_categories():
    assert category_js({"en": 10}, {"en": 5}) == 0.0
    assert category_js({"en": 10}, {"zh": 3}) == 1.0
    assert category_js({"en": 1, "zh": 1}, {"en": 1}) == pytest.approx(1.5 - 0.75 * math.log2(3))


def test_diversity_and_ngrams_stay_inside_documents():
    d = diversity([["a", "b", "a", "b"]])
    assert (d["tokens"], d["distinct_1"], d["distinct_2"], d["distinct_3"], d["ttr"]) == (4, 0.5, 2 / 3, 1.0, 0.5)
    assert diversity([["a", "b", "a", "b"]], window=2)["ttr"] == 1.0  # windows [a b] [a b]
    assert diversity([["a", "b", "c"], ["a", "a", "a"]], window=3)["ttr"] == pytest.approx((1 + 1 / 3) / 2)
    # "b b" would cross the document boundary: not an n-gram
    d = diversity([["a", "b"], ["b", "a"]])
    assert d["distinct_2"] == 1.0 and math.isnan(d["distinct_3"])  # no 3-gram fits in a document
    assert TokenSample.from_docs([["a", "b"], ["b", "a"]]).ngram_codes(2)[1].tolist() == [0, 2]
    # ties broken by the text
    assert top_ngrams([["the", "cat", "the", "cat", "the"]], 2) == [("cat the", 2, 0.5), ("the cat", 2, 0.5)]
    assert top_ngrams([["b", "a", "b", "c"]], 1, k=2) == [("b", 2, 0.5), ("a", 1, 0.25)]


def test_sample_is_the_smallest_id_hashes(tmp_path):
    ids = [f"doc-{i}" for i in range(100)]
    pq.write_table(pa.table({"id": ids, "text": [f"text {i}" for i in range(100)]}), tmp_path / "a.parquet")
    side = read_side(str(tmp_path / "a.parquet"), ColumnMapping(), 10, seed=3, batch_rows=7)
    keys = sample_keys(ids, 3)
    want = [ids[i] for i in np.argsort(keys)[:10]]
    assert side.docs.column("id").to_pylist() == want
    assert read_side(str(tmp_path / "a.parquet"), ColumnMapping(), 10, seed=3, batch_rows=1000
                     ).docs.column("id").to_pylist() == want  # batch size does not matter


def test_a_run_output_folder_is_read_from_its_data_shards(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "rejected").mkdir()
    (tmp_path / "manifest.json").write_text("{}")
    pq.write_table(pa.table({"id": ["k1", "k2"], "text": ["kept one", "kept two"], "source": ["web", "web"]}),
                   tmp_path / "data" / "part-00000-00000.parquet")
    pq.write_table(pa.table({"id": ["r1"], "text": ["removed"]}), tmp_path / "rejected" / "part-00000-00000.parquet")
    side = read_side(str(tmp_path), ColumnMapping(), 10, seed=0)
    assert side.run_output and sorted(side.docs.column("id").to_pylist()) == ["k1", "k2"]
    with pytest.raises(CompareError, match="input not found"):
        read_side(str(tmp_path / "nope"), ColumnMapping(), 10, seed=0)


# ------------------------------------------------------------------------------------------ the CLI


@pytest.fixture(scope="module")
def corpora(tmp_path_factory):
    """Reference and candidates from real sample text (see the module docstring)."""
    d = tmp_path_factory.mktemp("compare")
    web = pq.read_table(SAMPLE / "web-en.parquet").select(["id", "text", "source"])
    perm = np.random.default_rng(0).permutation(web.num_rows)
    ref, other = web.take(perm[: web.num_rows // 2]), web.take(perm[web.num_rows // 2:])
    pq.write_table(ref, d / "reference.parquet")
    pq.write_table(other, d / "resample.parquet")
    # collapse: five documents of the other half as templates, repeated with a changing number
    templates = other.column("text").to_pylist()[:5]
    texts = [f"{templates[i % 5]}\n\nItem {i % 7}." for i in range(300)]
    pq.write_table(pa.table({"id": [f"collapse-{i}" for i in range(300)], "text": texts}), d / "collapse.parquet")
    # length shift: the other half, every document cut to its first fifth
    pq.write_table(pa.table({"id": other.column("id"),
                             "text": [t[:max(1, len(t) // 5)] for t in other.column("text").to_pylist()]}),
                   d / "short.parquet")
    # language: an English-only reference (no Han character) vs a candidate 80 % Chinese Wikipedia / help
    han = r"[\x{4e00}-\x{9fff}]"
    ref_en = ref.filter(pc.invert(pc.match_substring_regex(ref.column("text"), han)))
    pq.write_table(ref_en, d / "reference-en.parquet")
    other_en = other.filter(pc.invert(pc.match_substring_regex(other.column("text"), han)))
    raw = zstandard.ZstdDecompressor().stream_reader(open(SAMPLE / "zh-wiki-docs.jsonl.zst", "rb")).read()
    zh = [json.loads(line) for line in raw.decode("utf-8").splitlines() if line.strip()]
    rows = [{"id": z["id"], "text": z["text"]} for z in zh[:320]] + \
        [{"id": r["id"], "text": r["text"]} for r in other_en.slice(0, 80).to_pylist()]
    pq.write_table(pa.Table.from_pylist(rows), d / "mostly-zh.parquet")
    return d


SCENARIOS = {  # name: (reference, candidate, extra CLI arguments)
    "resample": ("reference", "resample", ()),
    "collapse": ("reference", "collapse", ()),
    "short": ("reference", "short", ()),
    "mostly-zh": ("reference-en", "mostly-zh", ()),
    "short-gates": ("reference", "short", ("--gates", "{d}/gates.yaml", "--sample", "60")),
}


@pytest.fixture(scope="module")
def runs(corpora):
    """Every scenario's CLI run, started at once (the runs are independent: on two cores this halves the
    wall time): name -> (CompletedProcess, compare.json content)."""
    (corpora / "gates.yaml").write_text(
        "divergence:\n  max_js: {n_chars: null, n_tokens: null, compression_ratio: null, quality_score: null}\n"
        "  max_ks: {n_chars: 0.9}\nlanguage: {max_js: null}\n")
    env = dict(os.environ)
    env.pop("DATACLEAN_FAILPOINTS", None)
    procs = {}
    for name, (ref, cand, extra) in SCENARIOS.items():
        args = [sys.executable, "-m", "dataclean.cli", "compare", str(corpora / f"{ref}.parquet"),
                str(corpora / f"{cand}.parquet"), "-o", str(corpora / f"out-{name}"), "--sample", SAMPLE_N,
                *(a.format(d=corpora) for a in extra)]
        procs[name] = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                                       start_new_session=True)
    out = {}
    for name, proc in procs.items():
        stdout, stderr = proc.communicate(timeout=300)
        res = subprocess.CompletedProcess(proc.args, proc.returncode, stdout, stderr)
        path = corpora / f"out-{name}" / "compare.json"
        out[name] = (res, json.loads(path.read_text()) if path.exists() else None)
    return out


def failed_on_stdout(res) -> set[str]:
    return {line.split()[1].rstrip(":") for line in res.stdout.splitlines() if line.startswith("FAIL ")}


def test_a_resample_of_the_reference_passes_every_gate(corpora, runs):
    res, result = runs["resample"]
    out = corpora / "out-resample"
    assert res.returncode == 0, res.stdout + res.stderr
    assert result["passed"] and result["failed"] == [] and failed_on_stdout(res) == set()
    assert [g["gate"] for g in result["gates"]] == [
        "js.n_chars", "js.n_tokens", "js.compression_ratio", "js.quality_score", "language.js",
        "diversity.distinct_1", "diversity.distinct_2", "diversity.distinct_3", "diversity.ttr",
        "duplicates.self", "duplicates.reference"]
    assert result["reference"]["sampled"] == result["candidate"]["sampled"] == int(SAMPLE_N)
    # every signal of the pass-1 stages is a feature, each with both sides' summaries and divergences
    for name in ("n_chars", "compression_ratio", "lang_score", "gopher_word_count", "fineweb_line_punct_ratio",
                 "c4_sentences", "seo_top1_word_frac", "quality_score", "q_stop_word_frac"):
        f = result["features"][name]
        assert 0 <= f["js"] <= 1 and 0 <= f["ks"] <= 1 and f["reference"]["n"] == int(SAMPLE_N)
    assert result["diversity"]["tokens_per_side"] > 100_000
    assert len(result["top_ngrams"]["1"]["reference"]) == 20
    html = (out / "compare.html").read_text()
    assert "Content-Security-Policy" in html and "<svg" in html and "<script" not in html
    assert html.index('id="gates"') < html.index('id="features"')


def test_a_collapsed_candidate_fails_diversity_and_self_duplicates(runs):
    res, result = runs["collapse"]
    assert res.returncode == 1
    # five templates: every diversity measure collapses and nearly every document duplicates another; the
    # lengths, compression ratios, quality scores and languages of five documents are five spikes, not the
    # reference's spread. The templates come from the other half, so nothing duplicates the reference.
    want = {"js.n_chars", "js.n_tokens", "js.compression_ratio", "js.quality_score", "language.js",
            "diversity.distinct_1", "diversity.distinct_2", "diversity.distinct_3", "diversity.ttr",
            "duplicates.self"}
    assert set(result["failed"]) == want == failed_on_stdout(res)
    assert result["duplicates"]["candidate_self_rate"] > 0.9
    assert result["diversity"]["ratio"]["distinct_3"] < 0.1


def test_a_length_shift_fails_the_length_gates(runs):
    res, result = runs["short"]
    assert res.returncode == 1
    # cut to a fifth: shorter documents also compress less well and score lower on length
    want = {"js.n_chars", "js.n_tokens", "js.compression_ratio", "js.quality_score"}
    assert set(result["failed"]) == want == failed_on_stdout(res)
    ref, cand = result["features"]["n_chars"]["reference"], result["features"]["n_chars"]["candidate"]
    assert cand["p50"] < ref["p50"] / 3
    # the examples come from where the candidate has more mass: the short end of the length
    ex = {e["feature"]: e for e in result["examples"]}
    assert "n_chars" in ex and ex["n_chars"]["candidate_share"] > ex["n_chars"]["reference_share"]


def test_a_different_language_mix_fails_the_language_gate(runs):
    res, result = runs["mostly-zh"]
    assert res.returncode == 1
    # Chinese paragraphs are also shorter and compress differently (three UTF-8 bytes a character), and a
    # Han character is one word, so the unigram vocabulary is smaller
    want = {"js.n_chars", "js.n_tokens", "js.compression_ratio", "language.js", "diversity.distinct_1"}
    assert set(result["failed"]) == want == failed_on_stdout(res)
    assert result["language"]["candidate"]["zh"]["share"] > 0.7
    assert "zh" not in result["language"]["reference"]


def test_gates_file_overrides_and_usage_errors(corpora, runs, tmp_path):
    res, result = runs["short-gates"]  # the length gates off, a loose KS bound on n_chars instead
    assert res.returncode == 0, res.stdout + res.stderr
    assert [g["gate"] for g in result["gates"]] == [
        "ks.n_chars", "diversity.distinct_1", "diversity.distinct_2", "diversity.distinct_3", "diversity.ttr",
        "duplicates.self", "duplicates.reference"]
    bad = tmp_path / "bad.yaml"
    bad.write_text("divergence:\n  max_jss: {}\n")
    res = run_cli("compare", corpora / "reference.parquet", corpora / "short.parquet", "--gates", bad,
                  "-o", tmp_path / "o")
    assert res.returncode == 2 and res.stderr.strip() == "error: gates: unknown key 'divergence.max_jss'"
    bad.write_text("divergence:\n  max_js: {no_such_feature: 0.1}\n")
    res = run_cli("compare", corpora / "reference.parquet", corpora / "short.parquet", "--gates", bad,
                  "-o", tmp_path / "o", "--sample", "20")
    assert res.returncode == 2 and "no_such_feature: no such feature" in res.stderr
    assert len(res.stderr.strip().splitlines()) == 1 and "Traceback" not in res.stderr
    res = run_cli("compare", tmp_path / "missing.parquet", corpora / "short.parquet", "-o", tmp_path / "o")
    assert res.returncode == 2 and res.stderr.startswith("error: input not found")
    assert len(res.stderr.strip().splitlines()) == 1
    (tmp_path / "broken.parquet").write_bytes(b"not parquet")
    res = run_cli("compare", tmp_path / "broken.parquet", corpora / "short.parquet", "-o", tmp_path / "o")
    assert res.returncode == 2 and "broken.parquet" in res.stderr and "Traceback" not in res.stderr


def test_html_escapes_hostile_text_and_ids(tmp_path):
    from dataclean.compare import compare

    words = "river stone light garden window market paper orange silver music winter table".split()
    ref = [{"id": f"r{i}", "text": " ".join(words[(i + j) % 12] for j in range(30)) + "."} for i in range(40)]
    cand = [{"id": f"<img src=x onerror=alert({i})>",
             "text": f"<script>alert({i})</script> $\\alpha$ & <marquee>{i}</marquee>"} for i in range(40)]
    pq.write_table(pa.Table.from_pylist(ref), tmp_path / "ref.parquet")
    pq.write_table(pa.Table.from_pylist(cand), tmp_path / "cand.parquet")
    result = compare(str(tmp_path / "ref.parquet"), str(tmp_path / "cand.parquet"), str(tmp_path / "out"))
    assert not result["passed"]
    html = (tmp_path / "out" / "compare.html").read_text()
    assert "<script" not in html and "<img" not in html and "<marquee" not in html
    assert "&lt;script&gt;alert(" in html and "&lt;img src=x onerror=alert(" in html
    assert json.loads((tmp_path / "out" / "compare.json").read_text())["failed"] == result["failed"]
