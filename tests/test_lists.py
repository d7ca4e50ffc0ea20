"""Word-list and URL-list family: bad words per language and the domain blocklist."""
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from dataclean.stages.lists import (DomainSet, WordLists, hosts_in_text, normalize_domain, read_domains,
                                    terms_pattern, url_hosts)

ZH = {"zh": {"max_bad_word_ratio": 0.02}}  # the default recipe's override


@pytest.fixture(scope="module")
def stage():
    return WordLists(by_lang=ZH)


def run(stage, texts, lang=None, url=None):
    cols = {"text": list(texts)}
    if lang is not None:
        cols["lang"] = lang if isinstance(lang, list) else [lang] * len(texts)
    if url is not None:
        cols["url"] = url
    r = stage(pa.RecordBatch.from_pydict(cols))
    rows = [{k[6:]: v for k, v in row.items() if k.startswith("lists_")} for row in r.batch.to_pylist()]
    rules = r.decisions.rule.to_pylist() if r.decisions else [None] * len(texts)
    details = r.decisions.detail.to_pylist() if r.decisions else [None] * len(texts)
    return rows, rules, details


def test_one_swear_word_in_a_song_line_is_kept(stage):
    (row,), (rule,), _ = run(stage, ["I don't give a fuck about the rain today"], lang="en")
    assert (row["bad_words"], row["bad_word_ratio"]) == (1, 1 / 9)
    assert rule is None  # above the ratio, but fewer than min_bad_words matches


def test_english_porn_spam_is_removed(stage):
    doc = "Free porn! Hot milf porn videos, xxx porno and horny sluts."
    (row,), (rule,), _ = run(stage, [doc], lang="en")
    # 11 words; porn, milf, porn, porno, horny (xxx is excluded, "slut" does not match "sluts")
    assert (row["bad_words"], row["bad_word_ratio"]) == (5, 5 / 11)
    assert rule == "lists_bad_words"


def test_three_bad_words_in_a_long_text_are_below_the_ratio(stage):
    doc = "shit happens, said the fuck-up, porn " + " ".join(["the river flows on"] * 100)
    (row,), (rule,), _ = run(stage, [doc], lang="en")
    assert (row["bad_words"], row["bad_word_ratio"]) == (3, 3 / 407)
    assert rule is None  # 3/407 < 0.01


def test_english_matches_whole_words_case_insensitively(stage):
    (row,), _, _ = run(stage, ["Scunthorpe's therapist ate shitake in class"], lang="en")
    assert row["bad_words"] == 0
    (row,), _, _ = run(stage, ["BLOW\n  JOB, Fuck, FUCKING"], lang="en")
    assert row["bad_words"] == 3  # "blow job" across whitespace, fuck, fucking


def test_chinese_matches_substrings_and_skips_excluded_entries(stage):
    (row,), (rule,), _ = run(stage, ["他妈的，这个性能真好，牛奶也好喝"], lang="zh")
    assert (row["bad_words"], row["bad_word_ratio"]) == (1, 1 / 14)  # 性 and 奶 are excluded
    assert rule is None


def test_chinese_profane_rant_is_removed(stage):
    (row,), (rule,), _ = run(stage, ["傻逼傻逼，操你妈，鸡巴"], lang="zh")
    assert (row["bad_words"], row["bad_word_ratio"]) == (4, 4 / 9)
    assert rule == "lists_bad_words"


def test_rows_without_a_list_get_null_signals(stage):
    rows, rules, _ = run(stage, ["fuck fuck fuck", "fuck fuck fuck", "fuck fuck fuck"], lang=["fr", None, "en"])
    assert [(r["bad_words"], r["bad_word_ratio"]) for r in rows] == [(None, None), (None, None), (3, 1.0)]
    assert rules == [None, None, "lists_bad_words"]


def test_ratio_is_clamped_to_one(stage):
    (row,), _, _ = run(stage, ["🖕🖕🖕"], lang="en")  # an LDNOOBW entry that is not a word
    assert (row["bad_words"], row["bad_word_ratio"]) == (3, 1.0)


def test_custom_lists_and_exclusions(tmp_path):
    (tmp_path / "de.txt").write_text("# comment\nMist\nverdammt\n", encoding="utf-8")
    (tmp_path / "de-x.txt").write_text("mist\n", encoding="utf-8")
    stage = WordLists(lists={"de": str(tmp_path / "de.txt")}, exclude_lists={"de": str(tmp_path / "de-x.txt")},
                      domain_lists=[], domain_exclude=[])
    rows, _, _ = run(stage, ["Mist, verdammt! Verdammt.", "fuck"], lang=["de", "en"])
    assert [r["bad_words"] for r in rows] == [2, None]
    with pytest.raises(ValueError, match="no list for language"):
        WordLists(lists={"de": str(tmp_path / "de.txt")}, exclude_lists={"fr": str(tmp_path / "de-x.txt")})


def test_terms_pattern_edges():
    assert terms_pattern([]) is None
    assert terms_pattern(["a.b", "傻逼", "blow job"]) == r"(?i)(?:\bblow\s+job\b|\ba\.b\b|傻逼)"


def test_url_column_blocks_a_listed_domain_and_its_subdomains(stage):
    urls = ["https://de.pornhub.com/view?x=1", "https://notpornhub.com/", "http://pornhub.com.evil.org/", None,
            "HTTP://WWW.XVIDEOS.COM."]
    rows, rules, details = run(stage, ["a", "b", "c", "d", "e"], url=urls)
    assert [r["url_blocked"] for r in rows] == [True, False, False, False, True]
    assert rules == ["lists_url_domain", None, None, None, "lists_url_domain"]
    assert details == ["de.pornhub.com", None, None, None, "www.xvideos.com"]


def test_listed_hosts_in_the_text(stage):
    docs = ["Watch at www.xvideos.com and https://m.xvideos.com/v/1 or mail me@xvideos.com",
            "An article that names pornhub.com once.", "Visit 00333.cn 00333.cn"]
    rows, rules, details = run(stage, docs)
    assert [r["blocked_hosts"] for r in rows] == [3, 1, 2]
    assert [r["blocked_host"] for r in rows] == ["www.xvideos.com", "pornhub.com", "00333.cn"]
    assert rules == ["lists_text_domains", None, "lists_text_domains"]  # 00333.cn: zh illegal-domains list
    assert [r["bad_words"] for r in rows] == [None, None, None]  # no lang column: no bad-word list applies


def test_excluded_domains_are_not_blocked(stage):
    rows, _, _ = run(stage, ["pages at www.geocities.com/x and www.geocities.com/y, a.com a.com"])
    assert rows[0]["blocked_hosts"] == 0


def test_host_extraction_and_url_hosts():
    texts = ["x http://A.b.Example.COM/p?q=1 y", "", None, "no hosts", "e.g. 1.5 x@y.org"]
    hosts, rows = hosts_in_text(pa.array(texts))
    assert hosts.to_pylist() == ["a.b.example.com", "y.org"]
    assert rows.tolist() == [0, 4]
    assert url_hosts(pa.array(["https://u:p@Sub.Example.org:8080/a", "example.net/x", "nohost", None])).to_pylist() \
        == ["sub.example.org", "example.net", None, None]


def test_domain_entries_are_normalized():
    assert normalize_domain("http://WWW.Example.com:81/path") == "www.example.com"
    assert normalize_domain("*.example.com") == "example.com"
    assert normalize_domain("localhost") is None
    ds = DomainSet(["example.com"])
    assert ds.listed(pa.array(["example.com", "a.b.example.com", "badexample.com", "com", ""])).tolist() == \
        [True, True, False, False, False]
    assert ds.listed(pa.array(["a." * 5000 + "example.com"])).tolist() == [True]  # checked from its last 10 labels


def test_ut1_folder_layout(tmp_path):
    for cat, dom in (("adult", "badsite.example\n"), ("gambling", "# c\nbet.example\n"),
                     ("bank", "mybank.example\n")):
        (tmp_path / cat).mkdir()
        (tmp_path / cat / "domains").write_text(dom, encoding="utf-8")
    assert sorted(read_domains(tmp_path, ["adult", "gambling"])) == ["badsite.example", "bet.example"]
    assert len(read_domains(tmp_path, None)) == 3
    assert read_domains(tmp_path / "bank") == ["mybank.example"]  # a category folder itself
    with pytest.raises(ValueError, match="phishing"):
        read_domains(tmp_path)  # the default categories must exist
    stage = WordLists(domain_lists=[str(tmp_path)], domain_categories=["adult"], domain_exclude=[])
    rows, rules, _ = run(stage, ["x"], url=["https://www.badsite.example/"])
    assert rules == ["lists_url_domain"]


def test_batch_with_only_text_and_empty_texts(stage):
    rows, rules, _ = run(stage, ["", "数据清洗", "😀"])
    assert [r["blocked_hosts"] for r in rows] == [0, 0, 0]
    assert [r["url_blocked"] for r in rows] == [False, False, False]
    assert rules == [None, None, None]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=300), min_size=1, max_size=5), st.sampled_from([None, "en", "zh", "fr"]),
       st.one_of(st.none(), st.text(max_size=50)))
def test_arbitrary_unicode_never_crashes_and_signals_stay_in_range(texts, lang, url):
    r = _SHARED(pa.RecordBatch.from_pydict({"text": texts, "lang": [lang] * len(texts), "url": [url] * len(texts)}))
    for row in r.batch.to_pylist():
        ratio = row["lists_bad_word_ratio"]
        assert ratio is None or 0.0 <= ratio <= 1.0
        assert (ratio is None) == (row["lists_bad_words"] is None) == (lang not in ("en", "zh"))
        assert row["lists_blocked_hosts"] >= 0 and row["lists_url_blocked"] in (True, False)


_SHARED = WordLists(by_lang=ZH)
