"""SEO-spam family: hand-written English and Chinese pages, their exact signals and decisions."""
import pyarrow as pa
import pytest
from hypothesis import given, settings, strategies as st

from dataclean.stages.lists import load_terms
from dataclean.stages.spam import SeoSpam
from dataclean.text import split_words

ZH = {"zh": {"max_top1_word_frac": 0.25, "max_top5_word_frac": 0.60}}  # the default recipe's overrides


@pytest.fixture(scope="module")
def stage():
    return SeoSpam(by_lang=ZH)


def run(stage, *texts, lang=None):
    cols = {"text": list(texts)}
    if lang is not None:
        cols["lang"] = [lang] * len(texts)
    r = stage(pa.RecordBatch.from_pydict(cols))
    rows = r.batch.to_pylist()
    rules = r.decisions.rule.to_pylist() if r.decisions else [None] * len(texts)
    values = r.decisions.value.to_pylist() if r.decisions else [None] * len(texts)
    return rows, rules, values


def test_keyword_stuffed_english_page_is_removed_by_top1(stage):
    doc = " ".join(["cheap viagra online pharmacy"] * 30) + " rivers flow quietly past valleys"
    assert len(split_words(doc)) == 125
    (row,), (rule,), (value,) = run(stage, doc, lang="en")
    assert row["seo_word_count"] == 125
    assert row["seo_top1_word_frac"] == 30 / 125  # cheap, viagra, online and pharmacy: 30 each
    assert row["seo_top5_word_frac"] == (4 * 30 + 1) / 125
    assert (rule, value) == ("seo_top1_word", 30 / 125)


def test_clean_english_sentence_counts_stop_words_only_in_the_denominator(stage):
    doc = "The river flows through the valley. People in the town live quietly."
    (row,), (rule,), _ = run(stage, doc, lang="en")
    # 12 words; the(3), through, in are stop words; the other seven occur once each
    assert row["seo_word_count"] == 12
    assert row["seo_top1_word_frac"] == 1 / 12
    assert row["seo_top5_word_frac"] == 5 / 12
    assert rule is None


def test_numbers_are_never_top_words(stage):
    doc = "table " + " ".join(["1"] * 150)
    (row,), (rule,), _ = run(stage, doc)
    assert row["seo_word_count"] == 151
    assert row["seo_top1_word_frac"] == 1 / 151
    assert rule is None


def test_chinese_stuffing_uses_chinese_thresholds(stage):
    doc = "澳门博彩" * 30  # 120 Han characters, each of the four 30 times
    (en_row,), (en_rule,), _ = run(stage, doc)  # no lang: the default (English) bounds
    assert en_row["seo_top1_word_frac"] == 0.25 and en_row["seo_top5_word_frac"] == 1.0
    assert en_rule == "seo_top1_word"  # 0.25 > 0.20
    (zh_row,), (zh_rule,), (zh_value,) = run(stage, doc, lang="zh")
    assert (zh_rule, zh_value) == ("seo_top5_words", 1.0)  # 0.25 is not above zh's 0.25; top-5 1.0 > 0.60


def test_clean_chinese_prose_passes(stage):
    doc = "今天天气很好，我们去公园散步。春天来了，花都开了。"
    (row,), (rule,), _ = run(stage, doc, lang="zh")
    # 21 Han characters; 天 occurs 3 times, 今 很 好 我 们 去 来 了 都 are stop words
    assert row["seo_word_count"] == 21
    assert row["seo_top1_word_frac"] == 3 / 21
    assert row["seo_zh_spam_hits"] == 0 and row["seo_zh_spam_per_1k_han"] == 0.0
    assert rule is None


def test_link_farm_is_removed_by_url_density(stage):
    urls = [f"http://links{i}.example.com/p" for i in range(6)]
    doc = "\n".join(urls)
    (row,), (rule,), _ = run(stage, doc)
    assert row["seo_url_count"] == 6
    assert row["seo_word_count"] == 30  # http, linksN, example, com, p
    assert row["seo_url_per_word"] == 6 / 30
    assert row["seo_url_char_frac"] == sum(map(len, urls)) / len(doc)
    assert rule == "seo_url_per_word"


def test_a_few_links_in_prose_are_kept(stage):
    doc = ("Read the manual at https://docs.example.org/guide and the FAQ at www.example.org/faq. "
           "Questions go to help@example.org.")
    (row,), (rule,), _ = run(stage, doc)
    assert row["seo_url_count"] == 2
    assert row["seo_email_per_word"] == 1 / row["seo_word_count"]
    url_chars = len("https://docs.example.org/guide") + len("www.example.org/faq.")
    assert row["seo_url_char_frac"] == url_chars / len(doc)
    assert rule is None  # fewer than min_urls URLs, fewer than min_words words


def test_url_stops_at_chinese_text(stage):
    (row,), _, _ = run(stage, "官网www.example.cn，欢迎访问")
    assert row["seo_url_count"] == 1
    assert row["seo_url_char_frac"] == len("www.example.cn") / len("官网www.example.cn，欢迎访问")


def test_email_list_is_removed(stage):
    doc = " ".join(f"user{i}@mail{i}.example.com" for i in range(25))
    (row,), (rule,), (value,) = run(stage, doc)
    assert row["seo_word_count"] == 100  # userN, mailN, example, com
    assert row["seo_email_per_word"] == 25 / 100
    assert (rule, value) == ("seo_email_per_word", 0.25)


def test_template_lines_nav_byline_and_repeats(stage):
    lines = ["Home | About | Contact", "Posted by admin on March 3, 2010",
             "Best deals 2019", "Best  deals 2020", "best DEALS 2021",
             "The harvest came early this year.", "Farmers sold grain at the market.",
             "Prices were fair for everyone.", "Rain returned in the autumn.", "Winter was mild."]
    (row,), (rule,), _ = run(stage, "\n".join(lines + [""]))
    assert row["seo_line_count"] == 10
    assert row["seo_template_line_frac"] == 5 / 10  # nav, byline, "best deals 0" three times
    assert rule is None  # 0.5 is not above 0.6
    more = lines[:5] + ["Best deals 2022", "Best deals 2023"] + lines[5:8]
    (row,), (rule,), (value,) = run(stage, "\n".join(more))
    assert row["seo_template_line_frac"] == 7 / 10
    assert (rule, value) == ("seo_template_lines", 0.7)


def test_repeated_punctuation_lines_and_chinese_names_are_not_templates(stage):
    doc = "\n".join(["def f():", "}", "}", "}", "列夫·尼古拉耶维奇·托尔斯泰", "首页 | 新闻 | 关于我们"])
    (row,), _, _ = run(stage, doc)
    assert row["seo_line_count"] == 6
    assert row["seo_template_line_frac"] == 1 / 6  # only the Chinese navigation line


def test_chinese_gambling_spam_is_removed(stage):
    doc = "澳门娱乐城，百家乐，真人荷官，六合彩，加微信。"
    (row,), (rule,), (value,) = run(stage, doc, lang="zh")
    assert row["seo_zh_spam_hits"] == 5  # 娱乐城 百家乐 真人荷官 六合彩 加微信
    assert row["seo_zh_spam_per_1k_han"] == 5 * 1000 / 18
    assert (rule, value) == ("seo_zh_spam_terms", 5 * 1000 / 18)


def test_chinese_everyday_shopping_words_are_not_spam(stage):
    # 客服, 到货, 淘宝, 网络 are in the upstream ads list but excluded; 威信 ("prestige") is not listed
    (row,), (rule,), _ = run(stage, "客服态度好，到货快，淘宝网络店铺。老师很有威信。", lang="zh")
    assert row["seo_zh_spam_hits"] == 0 and rule is None


def test_a_single_spam_term_does_not_remove(stage):
    (row,), (rule,), _ = run(stage, "他说想去澳门看看百家乐是什么。", lang="zh")
    assert row["seo_zh_spam_hits"] == 1
    assert rule is None  # fewer than min_zh_spam_hits


@pytest.mark.parametrize("doc,words,lines,top1", [
    ("", 0, 0, 0.0), ("river", 1, 1, 1.0), ("rivers flow past quiet valleys", 5, 1, 0.2),
    ("数据清洗", 4, 1, 0.25), ("😀😀😀", 0, 1, 0.0), ("\n\n", 0, 0, 0.0)])
def test_edge_cases(stage, doc, words, lines, top1):
    (row,), (rule,), _ = run(stage, doc)
    assert (row["seo_word_count"], row["seo_line_count"], row["seo_top1_word_frac"]) == (words, lines, top1)
    for k in ("seo_url_per_word", "seo_url_char_frac", "seo_email_per_word", "seo_template_line_frac",
              "seo_zh_spam_per_1k_han"):
        assert row[k] == 0.0, k
    assert rule is None  # everything is below min_words / min_lines / min_urls


def test_rules_can_be_disabled():
    doc = " ".join(["cheap viagra online pharmacy"] * 30)
    st_ = SeoSpam(max_top1_word_frac=None, max_top5_word_frac=None)
    assert st_(pa.RecordBatch.from_pydict({"text": [doc]})).decisions is None


def test_bad_parameters_are_refused():
    with pytest.raises(ValueError, match="min_line_repeats"):
        SeoSpam(min_line_repeats=1)
    with pytest.raises(ValueError, match="unknown parameter"):
        SeoSpam(by_lang={"zh": {"max_top3": 0.1}})


def test_every_chinese_spam_term_contains_a_han_character():
    # so that hits per 1,000 Han characters can never exceed 1,000
    import re
    terms = load_terms(["lists/zh-spam/ads.txt", "lists/zh-spam/curated.txt"], ["lists/zh-spam/exclude.txt"])
    assert len(terms) > 80
    assert all(re.search(r"[\u3400-\u9fff]", t) for t in terms)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.text(max_size=300), min_size=1, max_size=5), st.sampled_from([None, "en", "zh"]))
def test_arbitrary_unicode_never_crashes_and_signals_stay_in_range(texts, lang):
    stage = _SHARED
    cols = {"text": texts, "lang": [lang] * len(texts)}
    r = stage(pa.RecordBatch.from_pydict(cols))
    for row in r.batch.to_pylist():
        for k in ("seo_top1_word_frac", "seo_top5_word_frac", "seo_url_per_word", "seo_url_char_frac",
                  "seo_email_per_word", "seo_template_line_frac"):
            assert 0.0 <= row[k] <= 1.0, (k, row)
        assert row["seo_top1_word_frac"] <= row["seo_top5_word_frac"]
        assert 0.0 <= row["seo_zh_spam_per_1k_han"] <= 1000.0
        assert min(row["seo_word_count"], row["seo_line_count"], row["seo_url_count"], row["seo_zh_spam_hits"]) >= 0


_SHARED = SeoSpam(by_lang=ZH)


# -- Chinese CC spam: strong terms, title and line stuffing, city x service, pinyin, list blocks ----------

NEWS_BODY = ("近日，市交通部门对全市公交线路进行了调整，新开通三条线路，方便市民出行。\n"
             "据介绍，调整后的线路覆盖了城东新区和高铁站，早晚高峰发车间隔缩短到八分钟。\n")


def test_brand_injected_in_the_title_line_is_removed(stage):
    doc = "【乐虎国际】市区公交线路调整方便市民出行\n" + NEWS_BODY
    (row,), (rule,), (value,) = run(stage, doc, lang="zh")
    assert row["seo_title_zh_strong_hits"] == 1 and row["seo_zh_strong_hits"] == 1
    assert (rule, value) == ("seo_title_zh_strong_term", 1)


def test_one_strong_brand_in_a_keyword_line_is_removed(stage):
    doc = "家常菜的做法\n" + NEWS_BODY + "本文关键词：家常菜,做法,欧宝体育,香菇\n"
    (row,), (rule,), _ = run(stage, doc, lang="zh")
    assert row["seo_zh_strong_hits"] == 1 and row["seo_title_zh_strong_hits"] == 0
    assert rule == "seo_zh_strong_terms"


def test_news_about_macau_casino_earnings_is_kept(stage):
    doc = ("澳门博企第三季度收入回升\n"
           "澳门六家博企公布第三季度业绩，金沙中国、银河娱乐和永利澳门的收入均有回升。\n"
           "分析师指出，威尼斯人度假村和永利皇宫的客流已恢复到疫情前的七成。\n")
    (row,), (rule,), _ = run(stage, doc, lang="zh")
    assert row["seo_zh_strong_hits"] == 0
    assert row["seo_zh_spam_hits"] == 1  # 永利皇宫 (curated): far below the count and density bounds
    assert rule is None


def test_hotel_review_mentioning_the_venetian_is_kept(stage):
    doc = "住在澳门威尼斯人酒店，房间很大，早餐丰富，去新葡京走路十分钟，下次还会再来。"
    (row,), (rule,), _ = run(stage, doc, lang="zh")
    assert row["seo_zh_strong_hits"] == 0 and rule is None


def test_stuffed_title_is_removed_in_chinese_and_english(stage):
    doc = "爱玩体育官方_爱玩体育官方_爱玩体育官方_爱玩体育官方\n" + NEWS_BODY
    (row,), (rule,), (value,) = run(stage, doc, lang="zh")
    assert row["seo_title_keyword_repeats"] == 4  # the whole item, its head 爱玩 and tail 官方: 4 each
    assert (rule, value) == ("seo_title_stuffing", 4)
    en = ("cheap flights | cheap flights | cheap flights | cheap flights\n"
          "Book your trip to Lisbon with our travel desk and save on the spring fares.\n")
    (row,), (rule,), _ = run(stage, en, lang="en")
    assert row["seo_title_keyword_repeats"] == 4 and rule == "seo_title_stuffing"


def test_a_product_title_with_two_variants_is_kept(stage):
    doc = "便携式粉尘仪/粉尘检测仪/粉尘测定仪_仪器厂\n" + NEWS_BODY
    (row,), (rule,), _ = run(stage, doc, lang="zh")
    assert row["seo_title_keyword_repeats"] == 2  # head 粉尘 twice
    assert rule is None


def test_a_one_line_review_is_not_a_title(stage):
    (row,), (rule,), _ = run(stage, "非常好，非常好，非常好，非常好，京东快递很快", lang="zh")
    assert row["seo_title_keyword_repeats"] == 0 and rule is None


def test_keyword_repeated_across_a_line_is_removed(stage):
    line = " ".join(["刻章"] + ["专业刻章", "刻章价格", "刻章报价单", "公司刻章", "刻章店", "快速刻章",
                                "刻章地址", "发票章刻章"])
    doc = "服务介绍\n" + NEWS_BODY + line + "\n"
    (row,), (rule,), (value,) = run(stage, doc, lang="zh")
    assert row["seo_line_keyword_repeats"] == 9  # 刻章 as item, head or tail of all nine items
    assert rule == "seo_line_stuffing" and value == 9


def test_city_times_service_list_is_removed(stage):
    cities = ["北京", "上海", "广州", "深圳", "杭州", "南京", "武汉", "成都", "西安", "重庆"]
    doc = "办事指南\n" + NEWS_BODY + "热门城市：" + " ".join(c + "办证" for c in cities) + "\n"
    (row,), (rule,), (value,) = run(stage, doc, lang="zh")
    assert row["seo_city_service_count"] == 10
    assert (rule, value) == ("seo_city_service", 10)


def test_city_list_in_a_travel_article_is_kept(stage):
    doc = ("我们这次旅行从北京出发，经过上海、杭州和南京，最后到达广州。\n"
           "北京烤鸭、上海小笼包、杭州西湖醋鱼都很好吃，南京的盐水鸭也值得一尝。\n")
    (row,), (rule,), _ = run(stage, doc, lang="zh")
    assert row["seo_city_service_count"] == 0  # fewer city mentions than the bound: not even cut
    assert rule is None


def test_pinyin_injection_is_removed(stage):
    doc = "烟(yan)台(tai)市(shi)哪(na)里(li)有(you)代办营业执照的公司"
    (row,), (rule,), (value,) = run(stage, doc, lang="zh")
    assert row["seo_pinyin_injections"] == 6
    assert (rule, value) == ("seo_pinyin_injection", 6)


def test_english_glosses_in_parentheses_are_not_pinyin(stage):
    doc = "苹果(apple)、公交(bus)、地图(map)、汽车(car)和书(book)"
    (row,), _, _ = run(stage, doc, lang="zh")
    assert row["seo_pinyin_injections"] == 0


def test_navigation_and_link_farm_blocks_are_removed(stage):
    nav = ["首页", "产品中心", "新闻动态", "关于我们", "联系我们", "在线留言", "人才招聘", "淄博口罩",
           "山东口罩", "临沂口罩", "济南口罩", "青岛口罩"]
    doc = "\n".join(nav) + "\n本公司主营口罩。\n"
    (row,), (rule,), (value,) = run(stage, doc, lang="zh")
    assert row["seo_line_count"] == 13
    listed = sum(len(x) for x in nav)
    assert row["seo_list_line_frac"] == listed / (listed + len("本公司主营口罩。"))
    assert rule == "seo_list_lines"


def test_a_product_page_ending_with_a_hot_cities_list_is_kept_when_the_body_dominates(stage):
    body = "".join(NEWS_BODY.split("\n"))
    doc = ("医用口罩产品介绍\n" + body + "\n" + body + "\n"
           + "热门城市：淄博口罩 山东口罩 临沂口罩 济南口罩 潍坊口罩 烟台口罩\n")
    (row,), (rule,), _ = run(stage, doc, lang="zh")
    assert row["seo_line_keyword_repeats"] == 6  # tail 口罩 six times: not above 8
    assert row["seo_city_service_count"] == 0  # six city mentions: not more than the bound of 9
    assert 0 < row["seo_list_line_frac"] < 0.8 and rule is None


def test_every_strong_term_contains_a_han_or_is_ascii_brand():
    strong = load_terms(["lists/zh-spam/strong.txt"])
    assert len(strong) > 100
    assert "威尼斯人" not in strong and "办证" not in strong  # ambiguous alone: see the list header
