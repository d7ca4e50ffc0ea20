"""Precision and recall of `minhash_dedup` against the EXACT Jaccard similarity of the shingle sets.

Ground truth: a pair of documents is a near-duplicate when the exact Jaccard similarity of their shingle sets is
>= 0.8, the shingle sets being computed with dataclean's own shingling on the text the stage sees (the
``normalize`` stage with its defaults, then :func:`dataclean.dedup.minhash.shingle_text` and
:func:`~dataclean.dedup.minhash.shingle_hashes`, word 5-grams / CJK character 5-grams), as Python sets.

Pairs are built from real bench documents (English and Chinese separately, 500-5,000 characters):

* English: every ``lang_hint: en`` document of that length (gensim Wikipedia/news, Python docs, Debian handbook,
  Perl docs, data-juicer and dolma pages, nlp-corpus), SpamAssassin e-mails that are mostly English prose
  (headers included), and the first 500-5,000 characters (cut at a line end) of each Brown corpus sample;
* Chinese: ``lang_hint: zh*`` documents with at least 30% Han characters (LibreOffice help, man pages,
  CMRC Wikipedia, reviews, C3, handbook), at most 35% of the sample from one origin.

Originals that are natural near-duplicates of each other (estimated Jaccard >= 0.5) are thinned out first, so
that each constructed pair is on its own. Each original gets ONE edited copy, with one of these edits (a
per-document seeded RNG), its amount searched so that the exact Jaccard lands near a target drawn uniformly
from [0.5, 1.0] (what the edit can reach):

  replace   k words (English) / Han characters (Chinese) replaced by random corpus words / characters
  delete    k words / characters deleted
  insert    k random words / characters inserted
  boiler    k boilerplate lines appended (share/copyright/navigation lines, English or Chinese)
  swap      k swaps of two paragraphs (lines when there are fewer than 3 paragraphs)
  mixed     one paragraph swap, one boilerplate line, then k words / characters replaced

The evaluation file holds the originals, their copies and unrelated documents (one bench shard that is not in
the sample, minus documents that are natural near-duplicates of a sampled original), shuffled. It is cleaned
with the real pipeline: ``dataclean run <file> -o <out> --config benchmarks/configs/dedup.yaml --workers 2``,
and the ledger (``rejected/``) says which ids were removed as ``near_duplicate`` with which ``dup_of``.

* precision = removed (id, dup_of) pairs whose exact Jaccard is >= 0.8 / removed pairs, over every
  near-duplicate removal (constructed pairs, and whatever else the stage found among the unrelated documents);
* recall = constructed pairs with exact Jaccard >= 0.8 that were found (the copy removed with ``dup_of`` its
  original, or the original with ``dup_of`` its copy) / all constructed pairs with exact Jaccard >= 0.8. A pair
  that ``exact_dedup`` removed first (an edit that only changed case or whitespace; the generator avoids them)
  counts as found and is reported as such.

Per language (of the removed document; unrelated documents by their ``lang_hint``) and overall, with counts,
per Jaccard bin and per edit type; the false positives and negatives are listed, with whether the pair was an
LSH candidate at all (recomputed from the signatures). As a reference, the same measures for the MinHash
*estimate* alone (every constructed pair compared, no LSH): the limit that the number of permutations sets.

Variants (``--variants``, see ``VARIANTS``) rerun the pipeline with ``verify_pairs`` off, with signature instead
of exact verification, and with other bands x rows choices (among them the stage's first version: 9 x 13,
signature verification), each written as a temporary config derived from ``--config``; the bands, rows and
verification reported are read from the stage the run builds.

    python benchmarks/eval_minhash.py                        # ~1,700 en + 2,000 zh pairs + 1 shard, 8 variants
    python benchmarks/eval_minhash.py --quick                # 300 + 300 pairs, 3,000 background docs, default only
"""
from __future__ import annotations

import argparse
import copy
import datetime as _dt
import glob
import hashlib
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
sys.path.insert(0, HERE)

from bench_foundation import _dataclean_cmd, _machine  # noqa: E402  (same folder)

DEFAULT_CORPUS = os.path.normpath(os.path.join(REPO, "..", "shared", "corpus", "bench"))
DEFAULT_CONFIG = os.path.join(HERE, "configs", "dedup.yaml")
DEFAULT_JSON = os.path.join(HERE, "results", "minhash_eval.json")
THRESHOLD = 0.8
MIN_CHARS, MAX_CHARS = 500, 5000
MIN_SHINGLES = 40          # fewer shingles give too coarse a Jaccard scale to aim at a target
PREFILTER_JACCARD = 0.5    # originals (and background docs) this similar to a sampled original are left out
MAX_ORIGIN_SHARE = 0.35
EDIT_TYPES = (("replace", 0.30), ("delete", 0.15), ("insert", 0.15), ("boiler", 0.15), ("swap", 0.10),
              ("mixed", 0.15))
VARIANTS = {  # name -> minhash_dedup parameters merged onto the config's
    "default": {},                                                 # the stage's defaults (see dataclean rules)
    "no_verify": {"verify_pairs": False},                          # candidate edges unchecked (guard still applies)
    "signature": {"verify_with": "signature"},                     # the MinHash estimate instead of exact Jaccard
    "b9r13_exact": {"bands": 9, "rows": 13},                       # datasketch's equal-weight bands, exact check
    "b9r13_signature": {"bands": 9, "rows": 13, "verify_with": "signature"},  # the stage's first version
    "b20r6": {"bands": 20, "rows": 6},
    "b32r4": {"bands": 32, "rows": 4},
    "p256_b32r8_signature": {"num_perm": 256, "bands": 32, "rows": 8, "verify_with": "signature"},
}
DEFAULT_VARIANTS = "default,no_verify,signature,b9r13_exact,b9r13_signature,b20r6,b32r4,p256_b32r8_signature"

MARGIN = 0.05             # "outside the margin": pairs with |J - 0.8| >= 0.05
JACCARD_BINS = [0.5, 0.6, 0.7, 0.75, 0.78, 0.8, 0.82, 0.85, 0.9, 0.95, 1.0]

BOILER_EN = [
    "Share this article on Facebook, Twitter and LinkedIn with your friends",
    "Copyright 2003 by the authors and publishers, all rights reserved worldwide",
    "Click here to subscribe to our weekly newsletter and never miss an update",
    "This message was scanned for viruses and dangerous content by the mail server",
    "Posted in General Discussion by the site administrator on a quiet Monday morning",
    "Related articles you might also enjoy reading in the archive section below",
    "Terms of service privacy policy contact us about this website advertise here",
    "To unsubscribe from this mailing list send an empty message to the list owner",
    "Leave a comment below and tell us what you think about this story today",
    "Home about products services support careers press room investor relations",
    "Please consider the environment before printing this e-mail or its attachments",
    "All trademarks mentioned on this page belong to their respective owners",
    "Sponsored links from our partners help keep this free service running",
    "Print this page email this page bookmark this page report a broken link",
    "Previous article next article back to the top of the page main index",
    "You are receiving this because you signed up on our website last year",
    "Download the free mobile app for the latest news sports and weather alerts",
    "Follow us on social media for daily tips tricks and behind the scenes photos",
    "The views expressed here are those of the author and not of the publisher",
    "This page was last edited on the fourteenth of March at eleven in the evening",
    "Customers who bought this item also bought these other popular items",
    "Read more stories like this one in our technology and science sections",
    "Join the discussion in our community forum with thousands of other readers",
    "For more information call our toll free number between nine and five",
    "This website uses cookies to improve your experience while you navigate",
    "Sign in or create an account to save your favourite articles for later",
    "Trending now the most popular stories of the week chosen by our editors",
    "Skip to main content accessibility help search the site site map",
    "Get the latest deals delivered straight to your inbox every single Friday",
    "If you have received this message in error please notify the sender immediately",
    "Powered by open source software hosted on a small server in the basement",
    "Tags news opinion local world business culture travel food health",
    "Back issues of this magazine are available from the subscription department",
    "Photo credits and image licences are listed at the end of the gallery page",
    "Advertisement continue reading the main story below this message",
    "Our editors independently research test and recommend the best products",
    "Questions or comments about this page should be sent to the webmaster",
    "Members get unlimited access to every article video and podcast episode",
    "Report this post as spam or abuse to the moderators of the board",
    "Updated daily with fresh content from contributors all around the world",
]
BOILER_ZH = [
    "本文来源于网络，如有侵权请联系本站删除，谢谢合作。",
    "版权所有，未经许可不得转载或者用于其他商业用途。",
    "点击下方链接关注我们的官方微信公众号获取更多资讯。",
    "欢迎在评论区留言分享你的看法和使用心得体会。",
    "免责声明：本站内容仅供参考，不构成任何投资建议。",
    "更多精彩内容请访问我们的首页或者下载手机客户端。",
    "上一篇文章下一篇文章返回顶部返回首页网站地图。",
    "如果您觉得这篇文章对您有帮助，请点赞收藏并转发。",
    "联系我们关于我们广告服务招聘信息隐私政策帮助中心。",
    "本页面最后更新于去年三月十四日晚上十一点。",
    "扫描二维码下载应用，随时随地阅读最新新闻资讯。",
    "责任编辑：张小明，审核：李大伟，校对：王晓红。",
    "相关阅读推荐：热门文章排行榜本周精选编辑推荐。",
    "订阅我们的电子邮件，每周五准时送达最新优惠信息。",
    "网友评论仅代表网友个人观点，不代表本站立场。",
    "图片来源于互联网，版权归原作者所有，如有问题请告知。",
    "客服热线工作时间为每天上午九点至下午六点。",
    "本站使用浏览器缓存技术以改善您的浏览体验。",
    "购买此商品的顾客还购买了以下这些热门商品。",
    "举报不良信息请发送邮件至管理员邮箱，我们将及时处理。",
    "分享到微博分享到朋友圈分享到空间复制链接。",
    "注册登录后可以收藏文章并参与社区讨论互动。",
    "本文仅代表作者本人观点，与本网站无关。",
    "转载请注明出处以及原文链接，否则将追究法律责任。",
    "热门标签：科技财经体育娱乐旅游美食健康教育。",
    "温馨提示：理性消费，谨防网络诈骗，保护个人信息。",
    "加入我们的读者交流群，与数千名读者一起讨论。",
    "本站所有软件均来自互联网，仅供学习交流使用。",
    "编辑部地址电话传真邮编以及投稿邮箱见本页底部。",
    "阅读全文请点击这里，或者继续向下滚动浏览。",
    "今日推荐：本周最受欢迎的十篇文章精彩回顾。",
    "下载附件需要先登录账号，新用户请先完成注册。",
    "广告合作请联系市场部，商务洽谈请发送邮件。",
    "用户协议隐私保护未成年人保护知识产权声明。",
    "每日更新来自全国各地作者投稿的原创精品内容。",
    "如需帮助请查看常见问题解答或者联系在线客服。",
    "感谢您的阅读，期待您的再次光临和宝贵意见。",
    "当前位置：首页新闻中心行业动态正文内容。",
    "本帖最后由管理员于昨天下午编辑，原因是格式调整。",
    "友情链接：合作伙伴兄弟站点申请友链请联系站长。",
]

_HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
_STOP_EN = re.compile(r"\b(?:the|and|of|to|is|in|that|for|you|with|this|it)\b", re.I)


# ---------------------------------------------------------------------------------------------------------
# shingles, exactly as the stage computes them (normalize stage, then the library's shingling)
# ---------------------------------------------------------------------------------------------------------

class Shingler:
    def __init__(self, word_ngram: int = 5, char_ngram: int = 5):
        from dataclean.dedup.minhash import shingle_hashes, shingle_text
        from dataclean.stages import Normalize

        self.norm = Normalize()
        self.shingle_text, self.shingle_hashes = shingle_text, shingle_hashes
        self.w, self.c = word_ngram, char_ngram

    def arrays(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """(values, offsets) of the shingle hashes of each text, after the pipeline's normalize stage."""
        res = self.norm(pa.record_batch({"text": pa.array(texts, pa.string())}))  # keeps every row
        return self.shingle_hashes(self.shingle_text(res.batch.column("text")), self.w, self.c)

    def sets(self, texts: list[str], chunk: int = 2048) -> list[set]:
        out: list[set] = []
        for lo in range(0, len(texts), chunk):
            vals, offs = self.arrays(texts[lo:lo + chunk])
            vals = vals.tolist()
            out.extend(set(vals[offs[i]:offs[i + 1]]) for i in range(len(offs) - 1))
        return out

    def set1(self, text: str) -> set:
        vals, offs = self.arrays([text])
        return set(vals.tolist())


def jaccard(a: set, b: set) -> float:
    if not a and not b:
        return 1.0
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter)


def _seed(*parts) -> int:
    return int.from_bytes(hashlib.blake2b("\x1f".join(map(str, parts)).encode(), digest_size=8).digest(), "little")


# ---------------------------------------------------------------------------------------------------------
# choosing originals
# ---------------------------------------------------------------------------------------------------------

def _brown_excerpt(text: str) -> str | None:
    if len(text) < MIN_CHARS:
        return None
    if len(text) <= MAX_CHARS:
        return text
    cut = text.rfind("\n", MIN_CHARS, MAX_CHARS)
    if cut < 0:
        cut = text.rfind(" ", MIN_CHARS, MAX_CHARS)
    return text[:cut] if cut > 0 else None


def _is_english_prose(text: str) -> bool:
    letters = sum(1 for ch in text if ch.isascii() and ch.isalpha())
    if letters < 0.6 * len(text):
        return False
    words = max(1, len(text.split()))
    return len(_STOP_EN.findall(text)) >= 0.08 * words


def _han_share(text: str) -> float:
    nonspace = sum(1 for ch in text if not ch.isspace())
    return len(_HAN.findall(text)) / max(1, nonspace)


def load_candidates(corpus: str, background_shard: str, log) -> dict[str, list[dict]]:
    """Candidate originals per language from every bench shard except the background shard."""
    import duckdb

    files = [f for f in sorted(glob.glob(os.path.join(corpus, "*.parquet"))) if os.path.basename(f) != background_shard]
    con = duckdb.connect()
    flist = "[" + ",".join("'" + f.replace("'", "''") + "'" for f in files) + "]"
    rows = con.sql(f"""
        SELECT id, text, source, origin, split_part(coalesce(lang_hint, ''), '-', 1) AS lang
        FROM read_parquet({flist})
        WHERE source <> 'code' AND length(text) >= {MIN_CHARS}
          AND (split_part(coalesce(lang_hint, ''), '-', 1) IN ('en', 'zh') OR origin = 'spamassassin')
        ORDER BY id""").fetchall()
    en, zh = [], []
    for id_, text, source, origin, lang in rows:
        if lang == "zh":
            if len(text) <= MAX_CHARS and _han_share(text) >= 0.3:
                zh.append({"id": id_, "text": text, "source": source, "origin": origin, "lang": "zh"})
        elif origin == "brown":
            ex = _brown_excerpt(text)
            if ex:
                en.append({"id": id_, "text": ex, "source": source, "origin": origin, "lang": "en",
                           "excerpt": len(ex) < len(text)})
        elif len(text) <= MAX_CHARS and (lang == "en" or _is_english_prose(text)) and _han_share(text) < 0.01:
            en.append({"id": id_, "text": text, "source": source, "origin": origin, "lang": "en"})
    log(f"candidates: {len(en):,} English, {len(zh):,} Chinese (500-5,000 chars, from {len(files)} shards)")
    return {"en": en, "zh": zh}


def _sample(cands: list[dict], n: int, seed: int) -> list[dict]:
    """n candidates, at most MAX_ORIGIN_SHARE of them from one origin (seeded order)."""
    order = sorted(cands, key=lambda d: _seed(seed, "pick", d["id"]))
    cap = max(1, int(MAX_ORIGIN_SHARE * n))
    per: dict[str, int] = {}
    out = []
    for d in order:
        if per.get(d["origin"], 0) >= cap:
            continue
        per[d["origin"]] = per.get(d["origin"], 0) + 1
        out.append(d)
        if len(out) >= n:
            break
    return out


def _signatures(sh: Shingler, texts: list[str], unique_empty: bool = False, num_perm: int = 128) -> np.ndarray:
    from dataclean.dedup.minhash import signatures

    out = []
    for lo in range(0, len(texts), 2048):
        vals, offs = sh.arrays(texts[lo:lo + 2048])
        s = signatures(vals, offs, num_perm, 1)
        if unique_empty:
            empty = np.flatnonzero(np.diff(offs) == 0)
            s[empty] = (np.uint64(1 << 33) + np.uint64(lo) + empty.astype(np.uint64))[:, None]
        out.append(s)
    return np.concatenate(out) if out else np.zeros((0, num_perm), np.uint64)


def _similar_pairs(sigs: np.ndarray, min_est: float) -> list[tuple[int, int, float]]:
    """Pairs (i < j) with estimated Jaccard >= min_est, found through 32 bands of 4 rows (a pair at 0.5 is a
    candidate with probability 0.87, at 0.6 with 0.99)."""
    from dataclean.dedup.minhash import band_hashes

    if len(sigs) < 2:
        return []
    bands = band_hashes(sigs, 32, 4)
    cand = set()
    for j in range(bands.shape[1]):
        col = bands[:, j]
        order = np.argsort(col, kind="stable")
        s = col[order]
        starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
        ends = np.r_[starts[1:], len(s)]
        for a, b in zip(starts, ends):
            if b - a > 1:
                members = sorted(order[a:b].tolist())
                first = members[0]
                for m in members[1:]:  # a star per bucket plus all pairs for small buckets
                    cand.add((first, m))
                if b - a <= 20:
                    for x in range(len(members)):
                        for y in range(x + 1, len(members)):
                            cand.add((members[x], members[y]))
    out = []
    for i, j in cand:
        est = float((sigs[i] == sigs[j]).mean())
        if est >= min_est:
            out.append((i, j, est))
    return out


def _cross_pairs(sig_a: np.ndarray, sig_b: np.ndarray, min_est: float) -> list[tuple[int, int, float]]:
    """Pairs (i in a, j in b) with estimated Jaccard >= min_est, through the same 32 x 4 bands."""
    from dataclean.dedup.minhash import band_hashes

    ba, bb = band_hashes(sig_a, 32, 4), band_hashes(sig_b, 32, 4)
    cand = set()
    for band in range(ba.shape[1]):
        index: dict[int, list[int]] = {}
        for i, h in enumerate(ba[:, band].tolist()):
            index.setdefault(h, []).append(i)
        for j, h in enumerate(bb[:, band].tolist()):
            for i in index.get(h, ()):
                cand.add((i, j))
    out = []
    for i, j in cand:
        est = float((sig_a[i] == sig_b[j]).mean())
        if est >= min_est:
            out.append((i, j, est))
    return out


def choose_originals(cands: list[dict], n: int, sh: Shingler, seed: int, log, lang: str) -> list[dict]:
    pool = _sample(cands, int(n * 1.5) + 50, seed)
    sets = sh.sets([d["text"] for d in pool])
    pool2, sets2 = [], []
    for d, s in zip(pool, sets):
        if len(s) >= MIN_SHINGLES:
            pool2.append(d)
            sets2.append(s)
    sigs = _signatures(sh, [d["text"] for d in pool2])
    drop = set()
    for i, j, _ in sorted(_similar_pairs(sigs, PREFILTER_JACCARD)):
        if i not in drop and j not in drop:
            drop.add(j)
    kept = [d for k, d in enumerate(pool2) if k not in drop]
    kept_sets = [s for k, s in enumerate(sets2) if k not in drop]
    kept_sigs = sigs[[k for k in range(len(pool2)) if k not in drop]]
    log(f"{lang}: pool {len(pool):,}, with >= {MIN_SHINGLES} shingles {len(pool2):,}, natural near-duplicates "
        f"(est. J >= {PREFILTER_JACCARD}) left out {len(drop):,}")
    chosen = _sample(kept, n, seed + 1)
    ids = {d["id"] for d in chosen}
    idx = [k for k, d in enumerate(kept) if d["id"] in ids]
    for k in idx:
        kept[k]["shingles"] = kept_sets[k]
        kept[k]["sig"] = kept_sigs[k]
    return [kept[k] for k in idx]


# ---------------------------------------------------------------------------------------------------------
# edits
# ---------------------------------------------------------------------------------------------------------

_SPLIT_WS = re.compile(r"(\s+)")


class Editor:
    """Deterministic edits of one document: the same (doc, type, k) always gives the same text, and the edits
    of k are a prefix of those of k + 1 (a fixed random order of positions), so Jaccard falls with k."""

    def __init__(self, text: str, lang: str, rng: random.Random, vocab: list[str]):
        self.text, self.lang, self.vocab = text, lang, vocab
        self.rng_seed = rng.getrandbits(64)
        if lang == "zh":
            self.units = [m.start() for m in _HAN.finditer(text)]  # positions of Han characters
        else:
            self.tokens = _SPLIT_WS.split(text)
            self.units = [i for i in range(0, len(self.tokens), 2) if self.tokens[i]]
        r = random.Random(self.rng_seed)
        self.order = self.units[:]
        r.shuffle(self.order)
        self.fill = [r.choice(vocab) for _ in range(len(self.units) + 1)]
        self.boiler = (BOILER_ZH if lang == "zh" else BOILER_EN)[:]
        r.shuffle(self.boiler)
        self.paras_sep = "\n\n" if text.count("\n\n") >= 2 else "\n"
        self.paras = text.split(self.paras_sep)
        self.swaps = []
        if len(self.paras) >= 2:
            for _ in range(8):
                i, j = r.sample(range(len(self.paras)), 2)
                self.swaps.append((i, j))

    def max_k(self, kind: str) -> int:
        if kind in ("replace", "delete", "insert", "mixed"):
            return max(1, int(0.3 * len(self.units)))
        if kind == "boiler":
            return len(self.boiler)
        if kind == "swap":
            return len(self.swaps)
        raise ValueError(kind)

    def units_edit(self, kind: str, k: int, text: str | None = None) -> str:
        text = self.text if text is None else text
        pos = self.order[:k]
        if self.lang == "zh":
            chars = list(text) if text is not self.text else list(self.text)
            if text is not self.text:  # mixed: positions are those of the original; recompute on this text
                units = [m.start() for m in _HAN.finditer(text)]
                r = random.Random(self.rng_seed ^ 0x5A5A)
                r.shuffle(units)
                pos = units[:k]
            for n, p in enumerate(pos):
                if kind == "replace":
                    chars[p] = self.fill[n]
                elif kind == "delete":
                    chars[p] = ""
                else:
                    chars[p] = self.fill[n] + chars[p]
            return "".join(chars)
        toks = _SPLIT_WS.split(text) if text is not self.text else self.tokens[:]
        if text is not self.text:
            units = [i for i in range(0, len(toks), 2) if toks[i]]
            r = random.Random(self.rng_seed ^ 0x5A5A)
            r.shuffle(units)
            pos = units[:k]
        for n, p in enumerate(pos):
            if kind == "replace":
                toks[p] = self.fill[n]
            elif kind == "delete":
                toks[p] = ""
                if p + 1 < len(toks):
                    toks[p + 1] = "" if p > 0 else toks[p + 1]
            else:
                toks[p] = self.fill[n] + " " + toks[p]
        return "".join(toks)

    def boiler_edit(self, k: int, text: str | None = None) -> str:
        text = self.text if text is None else text
        return text.rstrip("\n") + "\n" + "\n".join(self.boiler[:k]) + "\n"

    def swap_edit(self, k: int, text: str | None = None) -> str:
        paras = self.paras[:] if text is None else text.split(self.paras_sep)
        for i, j in self.swaps[:k]:
            if i < len(paras) and j < len(paras):
                paras[i], paras[j] = paras[j], paras[i]
        return self.paras_sep.join(paras)

    def edit(self, kind: str, k: int) -> str:
        if kind in ("replace", "delete", "insert"):
            return self.units_edit(kind, k)
        if kind == "boiler":
            return self.boiler_edit(k)
        if kind == "swap":
            return self.swap_edit(k)
        if kind == "mixed":
            base = self.boiler_edit(1, self.swap_edit(1) if self.swaps else self.text)
            return self.units_edit("replace", k, base)
        raise ValueError(kind)


def _exact_key(text: str) -> str:
    """Roughly exact_dedup's key (lower case, whitespace collapsed)."""
    return " ".join(text.lower().split())


def _pick_type(rng: random.Random, has_paras: bool) -> str:
    x = rng.random()
    acc = 0.0
    for kind, p in EDIT_TYPES:
        acc += p
        if x < acc:
            if kind == "swap" and not has_paras:
                return "replace"
            return kind
    return EDIT_TYPES[0][0]


def make_copy(doc: dict, sh: Shingler, vocab: list[str], seed: int) -> dict:
    """An edited copy of ``doc`` whose exact Jaccard is near a target drawn from [0.5, 1.0]."""
    rng = random.Random(_seed(seed, "edit", doc["id"]))
    ed = Editor(doc["text"], doc["lang"], rng, vocab)
    kind = _pick_type(rng, bool(ed.swaps))
    target = rng.uniform(0.5, 1.0)
    orig = doc["shingles"]
    cache: dict[int, tuple[float, str]] = {}

    def j_of(k: int) -> float:
        if k not in cache:
            t = ed.edit(kind, k)
            cache[k] = (jaccard(orig, sh.set1(t)), t)
        return cache[k][0]

    lo, hi = 1, ed.max_k(kind)
    if j_of(hi) > target:  # the edit cannot go that low: take the furthest it reaches
        k = hi
    else:
        while hi - lo > 1:  # J(lo) > target >= J(hi), roughly monotone
            mid = (lo + hi) // 2
            if j_of(mid) > target:
                lo = mid
            else:
                hi = mid
        k = lo if abs(j_of(lo) - target) <= abs(j_of(hi) - target) else hi
    j, text = cache[k][0], cache[k][1]
    if _exact_key(text) == _exact_key(doc["text"]):  # exact_dedup would take it: not a near-duplicate test
        kind, k = "replace", 1
        text = ed.edit("replace", 1)
        j = jaccard(orig, sh.set1(text))
    return {"id": f"{doc['id']}#copy-{kind}", "text": text, "source": doc["source"], "origin": doc["origin"],
            "lang": doc["lang"], "orig_id": doc["id"], "kind": kind, "k": k, "target": round(target, 4),
            "jaccard": j}


# ---------------------------------------------------------------------------------------------------------
# background documents
# ---------------------------------------------------------------------------------------------------------

def load_background(corpus: str, shard: str, limit: int, exclude: set, originals: list[dict], sh: Shingler,
                    seed: int, log) -> list[dict]:
    t = pq.read_table(os.path.join(corpus, shard), columns=["id", "text", "source", "lang_hint", "origin"])
    rows = [r for r in t.to_pylist() if r["id"] not in exclude]
    if limit and len(rows) > limit:
        rows = sorted(rows, key=lambda r: _seed(seed, "bg", r["id"]))[:limit]
    # leave out background documents that are natural near-duplicates of a sampled original; documents without
    # shingles (empty after normalization) get a signature that matches nothing
    sigs_bg = _signatures(sh, [r["text"] for r in rows], unique_empty=True)
    keep_rows = []
    sigs_orig = np.stack([d["sig"] for d in originals])
    drop = {j for _, j, _ in _cross_pairs(sigs_orig, sigs_bg, PREFILTER_JACCARD)}
    for k, r in enumerate(rows):
        if k in drop:
            continue
        lang = (r["lang_hint"] or "").split("-")[0]
        keep_rows.append({"id": r["id"], "text": r["text"], "source": r["source"], "origin": r["origin"],
                          "lang": lang if lang in ("en", "zh") else "other"})
    log(f"background: {len(keep_rows):,} docs of {shard} ({len(drop)} left out as near-duplicates of a sampled "
        f"original)")
    return keep_rows


# ---------------------------------------------------------------------------------------------------------
# running the pipeline and scoring it
# ---------------------------------------------------------------------------------------------------------

def _write_config(base: str, params: dict, path: str) -> None:
    import yaml

    with open(base, encoding="utf-8") as fh:
        cfg = yaml.safe_load(fh)
    cfg = copy.deepcopy(cfg)
    for st in cfg["pipeline"]:
        if st.get("stage") == "minhash_dedup":
            st.update(params)
            break
    else:
        raise SystemExit(f"{base}: no minhash_dedup stage in the pipeline")
    with open(path, "w", encoding="utf-8") as fh:
        yaml.safe_dump(cfg, fh, sort_keys=False, allow_unicode=True)


def _stage_of(config_path: str):
    """The minhash_dedup stage a run with this config builds."""
    import dataclean
    from dataclean.pipeline import build_stage

    cfg = dataclean.resolve_config(config_path)
    return build_stage(next(st for st in cfg["pipeline"] if st["stage"] == "minhash_dedup"))


def run_pipeline(input_path: str, out: str, config: str, workers: int) -> dict:
    cmd = _dataclean_cmd() + ["run", input_path, "-o", out, "--config", config, "--workers", str(workers),
                              "--quiet", "--fresh"]
    import subprocess

    t0 = time.perf_counter()
    p = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True)
    wall = time.perf_counter() - t0
    if p.returncode != 0:
        raise RuntimeError(f"dataclean run failed ({p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")
    rej = pq.read_table(os.path.join(out, "rejected"), columns=["id", "stage", "rule", "value", "dup_of"])
    clusters = {}
    cpath = os.path.join(out, "dedup", "clusters.parquet")
    if os.path.exists(cpath):
        for r in pq.read_table(cpath, columns=["cluster", "id"]).to_pylist():
            clusters[r["id"]] = r["cluster"]
    with open(os.path.join(out, "stats", "summary.json"), encoding="utf-8") as fh:
        summary = json.load(fh)
    return {"removals": rej.to_pylist(), "clusters": clusters, "summary": summary, "wall_s": round(wall, 2),
            "stdout": p.stdout[-2000:]}


def _bin_label(j: float) -> str:
    for lo, hi in zip(JACCARD_BINS, JACCARD_BINS[1:]):
        if j < hi or hi == 1.0:
            if j >= lo:
                return f"[{lo:.2f},{hi:.2f}{']' if hi == 1.0 else ')'}"
    return f"<{JACCARD_BINS[0]:.2f}"


def _pr(tp_removed: int, removed: int, found: int, positives: int) -> dict:
    return {"removed_pairs": removed, "removed_true": tp_removed,
            "precision": tp_removed / removed if removed else float("nan"),
            "positives": positives, "found": found, "recall": found / positives if positives else float("nan")}


def score(run: dict, pairs: list[dict], docs: dict[str, dict], sets: dict[str, set], sigs: dict[str, np.ndarray],
          bands: int, rows: int, num_perm: int) -> dict:
    """Precision/recall of one run (see the module docstring)."""
    removals = [r for r in run["removals"] if r["rule"] == "near_duplicate"]
    exact = [r for r in run["removals"] if r["rule"] == "exact_duplicate"]
    pair_of = {}
    for p in pairs:
        pair_of[p["id"]] = p
        pair_of[p["orig_id"]] = p
    # precision over every near-duplicate removal
    prec_rows = []
    for r in removals:
        j = jaccard(sets[r["id"]], sets[r["dup_of"]])
        p = pair_of.get(r["id"])
        constructed = p is not None and r["dup_of"] in (p["id"], p["orig_id"])
        prec_rows.append({"id": r["id"], "dup_of": r["dup_of"], "jaccard": j, "value": r["value"],
                          "lang": docs[r["id"]]["lang"], "constructed_pair": constructed,
                          "kind": p["kind"] if constructed else None})
    removed_by = {r["id"]: r["dup_of"] for r in removals}
    exact_by = {r["id"]: r["dup_of"] for r in exact}
    # recall over constructed pairs
    rec_rows = []
    for p in pairs:
        c, o = p["id"], p["orig_id"]
        exact_dup = exact_by.get(c) == o or exact_by.get(o) == c
        found = removed_by.get(c) == o or removed_by.get(o) == c or exact_dup  # exact_dedup took it first
        same_cluster = c in run["clusters"] and run["clusters"].get(c) == run["clusters"].get(o)
        est = float((sigs[c] == sigs[o]).mean())
        cand = bool(np.any(_bands(sigs[c], bands, rows) == _bands(sigs[o], bands, rows)))
        rec_rows.append({"copy": c, "orig": o, "lang": p["lang"], "kind": p["kind"], "jaccard": p["jaccard"],
                         "estimate": est, "lsh_candidate": cand, "found": found, "same_cluster": same_cluster,
                         "copy_removed_dup_of": removed_by.get(c), "orig_removed_dup_of": removed_by.get(o),
                         "exact_dup": exact_dup})

    def agg(prec, rec) -> dict:
        d = _pr(sum(1 for x in prec if x["jaccard"] >= THRESHOLD), len(prec),
                sum(1 for x in rec if x["jaccard"] >= THRESHOLD and x["found"]),
                sum(1 for x in rec if x["jaccard"] >= THRESHOLD))
        d["found_by_exact_dedup"] = sum(1 for x in rec if x["jaccard"] >= THRESHOLD and x["exact_dup"])
        d["found_same_cluster"] = sum(1 for x in rec if x["jaccard"] >= THRESHOLD and (x["found"] or x["same_cluster"]))
        d["removed_constructed"] = sum(1 for x in prec if x["constructed_pair"])
        d["removed_constructed_true"] = sum(1 for x in prec if x["constructed_pair"] and x["jaccard"] >= THRESHOLD)
        d["negatives_removed"] = sum(1 for x in rec if x["jaccard"] < THRESHOLD and x["found"])
        d["negatives"] = sum(1 for x in rec if x["jaccard"] < THRESHOLD)
        return d

    res = {"overall": agg(prec_rows, rec_rows)}
    for lang in ("en", "zh", "other"):
        pr = [x for x in prec_rows if x["lang"] == lang]
        rc = [x for x in rec_rows if x["lang"] == lang]
        if pr or rc:
            res[lang] = agg(pr, rc)
    # the estimate alone (every constructed pair compared, no LSH, no clustering)
    est = {}
    for lang in ("en", "zh", "all"):
        rc = [x for x in rec_rows if lang == "all" or x["lang"] == lang]
        pos = [x for x in rc if x["jaccard"] >= THRESHOLD]
        called = [x for x in rc if x["estimate"] >= THRESHOLD]
        est[lang] = _pr(sum(1 for x in called if x["jaccard"] >= THRESHOLD), len(called),
                        sum(1 for x in pos if x["estimate"] >= THRESHOLD), len(pos))
    res["estimate_only"] = est
    bins: dict[str, dict] = {}
    for x in rec_rows:
        b = bins.setdefault(_bin_label(x["jaccard"]), {"pairs": 0, "removed": 0, "lsh_candidate": 0, "est_ge": 0})
        b["pairs"] += 1
        b["removed"] += x["found"]
        b["lsh_candidate"] += x["lsh_candidate"]
        b["est_ge"] += x["estimate"] >= THRESHOLD
    res["by_jaccard_bin"] = dict(sorted(bins.items()))
    kinds: dict[str, dict] = {}
    for x in rec_rows:
        k = kinds.setdefault(x["kind"], {"pairs": 0, "positives": 0, "found": 0, "negatives_removed": 0})
        k["pairs"] += 1
        if x["jaccard"] >= THRESHOLD:
            k["positives"] += 1
            k["found"] += x["found"]
        else:
            k["negatives_removed"] += x["found"]
    res["by_edit"] = kinds
    fps = [x for x in prec_rows if x["jaccard"] < THRESHOLD]
    fns = [x for x in rec_rows if x["jaccard"] >= THRESHOLD and not x["found"]]
    res["false_positives"] = sorted(fps, key=lambda x: x["jaccard"])
    res["false_negatives"] = sorted(fns, key=lambda x: -x["jaccard"])
    res["fn_summary"] = {
        "count": len(fns),
        "not_lsh_candidate": sum(1 for x in fns if not x["lsh_candidate"]),
        "lsh_candidate_not_removed": sum(1 for x in fns if x["lsh_candidate"]),
        "lsh_candidate_estimate_below": sum(1 for x in fns if x["lsh_candidate"] and x["estimate"] < THRESHOLD),
        "same_cluster": sum(1 for x in fns if x["same_cluster"]),
        "exact_dup": sum(1 for x in fns if x["exact_dup"]),
        "jaccard_quantiles": _quantiles([x["jaccard"] for x in fns]),
    }
    res["fp_summary"] = {
        "count": len(fps), "constructed": sum(1 for x in fps if x["constructed_pair"]),
        "jaccard_quantiles": _quantiles([x["jaccard"] for x in fps]),
        "value_quantiles": _quantiles([x["value"] for x in fps]),
    }
    # removals and pairs at least MARGIN away from the threshold: where 128 permutations should decide reliably
    far_p = [x for x in prec_rows if abs(x["jaccard"] - THRESHOLD) >= MARGIN]
    far_r = [x for x in rec_rows if abs(x["jaccard"] - THRESHOLD) >= MARGIN]
    res["outside_margin"] = {"margin": MARGIN, **{lang: agg([x for x in far_p if lang == "overall" or x["lang"] == lang],
                                                            [x for x in far_r if lang == "overall" or x["lang"] == lang])
                                                  for lang in ("en", "zh", "overall")}}
    # is the estimate unbiased, with the binomial spread sqrt(J(1-J)/num_perm)?
    err = np.array([x["estimate"] - x["jaccard"] for x in rec_rows])
    sd = np.array([max(1e-9, (x["jaccard"] * (1 - x["jaccard"]) / num_perm) ** 0.5) for x in rec_rows])
    z = err / sd
    res["estimate_calibration"] = {
        "pairs": len(rec_rows), "mean_error": round(float(err.mean()), 5), "sd_error": round(float(err.std()), 5),
        "expected_sd_binomial": round(float(np.sqrt((sd ** 2).mean())), 5),
        "mean_z": round(float(z.mean()), 3), "sd_z": round(float(z.std()), 3),
        "share_abs_z_gt_2": round(float((np.abs(z) > 2).mean()), 4), "expected_share_abs_z_gt_2": 0.0455,
        "share_abs_z_gt_3": round(float((np.abs(z) > 3).mean()), 4), "expected_share_abs_z_gt_3": 0.0027,
        "by_lang_mean_error": {lang: round(float(np.mean([x["estimate"] - x["jaccard"] for x in rec_rows
                                                          if x["lang"] == lang])), 5)
                               for lang in ("en", "zh") if any(x["lang"] == lang for x in rec_rows)}}
    res["removals_near"] = len(removals)
    res["removals_exact"] = len(exact)
    return res


def _bands(sig: np.ndarray, bands: int, rows: int) -> np.ndarray:
    from dataclean.dedup.minhash import band_hashes

    return band_hashes(sig.reshape(1, -1), bands, rows)[0]


def _quantiles(xs: list[float]) -> dict:
    if not xs:
        return {}
    s = sorted(xs)
    return {q: round(s[min(len(s) - 1, int(q * len(s)))], 4) for q in (0.0, 0.1, 0.5, 0.9, 1.0)}


def _fmt(name: str, params: dict, res: dict, wall: float) -> str:
    def f(x):
        return "  n/a " if x != x else f"{x:6.4f}"

    out = [f"variant {name} (minhash_dedup {json.dumps(params) if params else 'defaults'}; {res['num_perm']} "
           f"permutations, bands x rows {res['bands']} x {res['rows']}, verified by {res['verify']}; "
           f"run {wall:.1f} s)",
           f"  {'':<8} {'precision':>9} {'removed':>8} {'true':>6}   {'recall':>6} {'pos.':>6} {'found':>6}  "
           f"{'neg. removed':>12}   {'est.-only P':>11} {'est.-only R':>11}"]
    for lang in ("en", "zh", "other", "overall"):
        if lang not in res:
            continue
        r = res[lang]
        e = res["estimate_only"].get("all" if lang == "overall" else lang)
        neg = f"{r['negatives_removed']}/{r['negatives']}" if r["negatives"] else "-"
        out.append(f"  {lang:<8} {f(r['precision']):>9} {r['removed_pairs']:>8} {r['removed_true']:>6}   "
                   f"{f(r['recall']):>6} {r['positives']:>6} {r['found']:>6}  {neg:>12}   "
                   + (f"{f(e['precision']):>11} {f(e['recall']):>11}" if e else ""))
    om = res["outside_margin"]
    out.append(f"  outside |J - 0.8| < {om['margin']}: " + "; ".join(
        f"{lang} P {f(om[lang]['precision'])} ({om[lang]['removed_true']}/{om[lang]['removed_pairs']}) "
        f"R {f(om[lang]['recall'])} ({om[lang]['found']}/{om[lang]['positives']})" for lang in ("en", "zh", "overall")))
    cal = res["estimate_calibration"]
    out.append(f"  estimate - exact J over the {cal['pairs']} constructed pairs: mean {cal['mean_error']:+.4f} "
               f"(en {cal['by_lang_mean_error'].get('en', float('nan')):+.4f}, zh "
               f"{cal['by_lang_mean_error'].get('zh', float('nan')):+.4f}), sd {cal['sd_error']:.4f} (binomial "
               f"{cal['expected_sd_binomial']:.4f}); |z| > 2: {cal['share_abs_z_gt_2']:.3f} (expected 0.046), "
               f"|z| > 3: {cal['share_abs_z_gt_3']:.4f} (expected 0.0027)")
    fn, fp = res["fn_summary"], res["fp_summary"]
    out.append(f"  false negatives {fn['count']}: not an LSH candidate {fn['not_lsh_candidate']}, candidate but not "
               f"removed {fn['lsh_candidate_not_removed']} (of which signature estimate < 0.8: "
               f"{fn['lsh_candidate_estimate_below']}; in the same cluster: {fn['same_cluster']}); their exact J: "
               f"{fn['jaccard_quantiles']}")
    out.append(f"  false positives {fp['count']} ({fp['constructed']} constructed pairs); exact J "
               f"{fp['jaccard_quantiles']}; value in the ledger {fp['value_quantiles']}")
    out.append("  by exact Jaccard of the constructed pair: " + "; ".join(
        f"{b} {v['removed']}/{v['pairs']} removed (LSH cand. {v['lsh_candidate']}, est>=0.8 {v['est_ge']})"
        for b, v in res["by_jaccard_bin"].items()))
    out.append("  by edit (positives found / positives; negatives removed): " + "; ".join(
        f"{k} {v['found']}/{v['positives']}, {v['negatives_removed']}" for k, v in sorted(res["by_edit"].items())))
    return "\n".join(out)


# ---------------------------------------------------------------------------------------------------------
# driver
# ---------------------------------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--corpus", default=DEFAULT_CORPUS)
    ap.add_argument("--config", default=DEFAULT_CONFIG, help=f"base config (default {DEFAULT_CONFIG})")
    ap.add_argument("--per-lang", type=int, default=2000, help="constructed pairs per language (default 2000)")
    ap.add_argument("--background-shard", default="part-00011.parquet",
                    help="bench shard of unrelated documents (excluded from the originals)")
    ap.add_argument("--background", type=int, default=0, help="at most this many background docs (0 = the shard)")
    ap.add_argument("--variants", default=DEFAULT_VARIANTS,
                    help=f"comma-separated, of {', '.join(VARIANTS)} (default {DEFAULT_VARIANTS})")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--quick", action="store_true", help="300 pairs per language, 3,000 background docs, default only")
    ap.add_argument("--pairs-only", action="store_true",
                    help="build the pairs and the evaluation file, print their statistics, run nothing")
    ap.add_argument("--keep", default=None, help="keep the evaluation file and outputs in this folder")
    ap.add_argument("--json", default=DEFAULT_JSON)
    a = ap.parse_args(argv)
    if a.quick:
        a.per_lang, a.background = min(a.per_lang, 300), a.background or 3000
        if a.variants == DEFAULT_VARIANTS:
            a.variants = "default"
    variants = [v.strip() for v in a.variants.split(",") if v.strip()]
    for v in variants:
        if v not in VARIANTS:
            ap.error(f"unknown variant {v!r} (known: {', '.join(VARIANTS)})")

    t_start = time.perf_counter()

    def log(msg):
        print(f"[{time.perf_counter() - t_start:6.1f}s] {msg}", flush=True)

    sh = Shingler()
    cands = load_candidates(a.corpus, a.background_shard, log)
    originals: list[dict] = []
    for lang in ("en", "zh"):
        originals.extend(choose_originals(cands[lang], a.per_lang, sh, a.seed, log, lang))
    # vocabularies for replacements/insertions: words / Han characters of the other candidates
    en_words = sorted({w for d in cands["en"][:3000] for w in re.findall(r"[A-Za-z]{3,12}", d["text"])})
    zh_chars = sorted({c for d in cands["zh"][:3000] for c in _HAN.findall(d["text"])})
    vocab = {"en": en_words, "zh": zh_chars}
    log(f"vocabularies: {len(en_words):,} English words, {len(zh_chars):,} Han characters")
    pairs = []
    for n, d in enumerate(originals):
        pairs.append(make_copy(d, sh, vocab[d["lang"]], a.seed))
        if (n + 1) % 1000 == 0:
            log(f"copies: {n + 1:,} / {len(originals):,}")
    js = [p["jaccard"] for p in pairs]
    log(f"pairs: {len(pairs):,} ({sum(1 for p in pairs if p['lang'] == 'en'):,} en, "
        f"{sum(1 for p in pairs if p['lang'] == 'zh'):,} zh); exact J >= 0.8: {sum(1 for j in js if j >= 0.8):,}; "
        f"J quantiles {_quantiles(js)}")
    exclude = {d["id"] for d in originals}
    background = load_background(a.corpus, a.background_shard, a.background, exclude, originals, sh, a.seed, log)

    rows = ([{k: d[k] for k in ("id", "text", "source")} for d in originals]
            + [{k: p[k] for k in ("id", "text", "source")} for p in pairs]
            + [{k: d[k] for k in ("id", "text", "source")} for d in background])
    rows.sort(key=lambda r: _seed(a.seed, "order", r["id"]))
    docs = {d["id"]: d for d in originals}
    docs.update({p["id"]: p for p in pairs})
    docs.update({d["id"]: d for d in background})
    log(f"evaluation file: {len(rows):,} docs; computing every document's shingle set and signature")
    all_ids = [r["id"] for r in rows]  # shingle sets of every document: for the exact Jaccard of any removed pair
    set_list = sh.sets([r["text"] for r in rows])
    sets = dict(zip(all_ids, set_list))
    pair_ids = [d["id"] for d in originals] + [p["id"] for p in pairs]
    pair_texts = [d["text"] for d in originals] + [p["text"] for p in pairs]
    sig_cache: dict[int, dict] = {}

    def sigs_for(num_perm: int) -> dict:
        if num_perm not in sig_cache:
            sig_cache[num_perm] = dict(zip(pair_ids, _signatures(sh, pair_texts, num_perm=num_perm)))
        return sig_cache[num_perm]

    tmp = a.keep or tempfile.mkdtemp(prefix="dataclean-eval-minhash-")
    os.makedirs(tmp, exist_ok=True)
    input_path = os.path.join(tmp, "eval.parquet")
    pq.write_table(pa.Table.from_pylist(rows), input_path, compression="zstd")
    with open(os.path.join(tmp, "pairs.jsonl"), "w", encoding="utf-8") as fh:
        for p in pairs:
            fh.write(json.dumps({k: v for k, v in p.items() if k != "text"}, ensure_ascii=False) + "\n")

    if a.pairs_only:
        variants = []
    import yaml

    with open(a.config, encoding="utf-8") as fh:
        base_stage = next(st for st in yaml.safe_load(fh)["pipeline"] if st.get("stage") == "minhash_dedup")
    if float(base_stage.get("threshold", THRESHOLD)) != THRESHOLD:
        raise SystemExit(f"{a.config}: minhash_dedup.threshold must be {THRESHOLD} for this evaluation")
    results = {}
    tables = []
    try:
        for name in variants:
            params = VARIANTS[name]
            cfg_path = os.path.join(tmp, f"config-{name}.yaml")
            _write_config(a.config, params, cfg_path)
            out = os.path.join(tmp, f"out-{name}")
            log(f"variant {name}: dataclean run ...")
            run = run_pipeline(input_path, out, cfg_path, a.workers)
            stage = _stage_of(cfg_path)  # the stage as the run builds it: its bands, rows, verification
            num_perm, bands, rws = stage.num_perm, stage.bands, stage.rows
            res = score(run, pairs, docs, sets, sigs_for(num_perm), bands, rws, num_perm)
            res["num_perm"] = num_perm
            res["verify"] = (f"{'exact Jaccard' if getattr(stage, 'verify_with', 'signature') == 'exact' else 'signature estimate'}"
                             f"{'' if stage.verify_pairs else ' (clustering only; candidate edges not checked)'}")
            res["bands"], res["rows"] = bands, rws
            res["params"] = params
            res["wall_s"] = run["wall_s"]
            res["summary_removed_by_rule"] = run["summary"].get("removed_by_rule")
            table = _fmt(name, params, res, run["wall_s"])
            print(table, flush=True)
            tables.append(table)
            results[name] = res
            if not a.keep:
                shutil.rmtree(out, ignore_errors=True)
    finally:
        if not a.keep:
            shutil.rmtree(tmp, ignore_errors=True)

    default = results.get(variants[0], {}).get("overall", {}) if variants else {}
    goal = ("met" if default.get("precision", 0) >= 0.95 and default.get("recall", 0) >= 0.95 else "NOT met")
    header = (f"MinHash dedup vs exact Jaccard >= {THRESHOLD}: {len(pairs):,} constructed pairs "
              f"({sum(1 for p in pairs if p['lang'] == 'en'):,} en, {sum(1 for p in pairs if p['lang'] == 'zh'):,} zh; "
              f"{sum(1 for j in js if j >= THRESHOLD):,} with J >= {THRESHOLD}) + {len(background):,} background docs; "
              f"goal precision and recall >= 0.95 ({variants[0] if variants else 'not run'}): {goal}")
    print("\n" + header)
    pair_stats = {"pairs": len(pairs), "by_lang": {l: sum(1 for p in pairs if p["lang"] == l) for l in ("en", "zh")},
                  "positives": sum(1 for j in js if j >= THRESHOLD), "jaccard_quantiles": _quantiles(js),
                  "by_kind": {k: sum(1 for p in pairs if p["kind"] == k) for k, _ in EDIT_TYPES},
                  "by_jaccard_bin": {}, "originals_by_origin": {}}
    for p in pairs:
        b = _bin_label(p["jaccard"])
        pair_stats["by_jaccard_bin"][b] = pair_stats["by_jaccard_bin"].get(b, 0) + 1
    for d in originals:
        key = f"{d['lang']}/{d['origin']}"
        pair_stats["originals_by_origin"][key] = pair_stats["originals_by_origin"].get(key, 0) + 1
    pair_stats["by_jaccard_bin"] = dict(sorted(pair_stats["by_jaccard_bin"].items()))
    for res in results.values():  # keep the JSON readable: the worst 40 of each list
        res["false_positives"] = res["false_positives"][:40]
        res["false_negatives"] = res["false_negatives"][:40]
    result = {"benchmark": "minhash_eval",
              "date": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
              "command": " ".join(["python", os.path.relpath(os.path.abspath(__file__), REPO), *argv]),
              "machine": _machine(),
              "settings": {"per_lang": a.per_lang, "background_shard": a.background_shard,
                           "background_docs": len(background), "seed": a.seed, "threshold": THRESHOLD,
                           "config": os.path.relpath(os.path.abspath(a.config), REPO), "variants": variants,
                           "edit_types": dict(EDIT_TYPES), "eval_docs": len(rows)},
              "pairs": pair_stats, "results": results, "header": header, "tables": tables,
              "elapsed_s": round(time.perf_counter() - t_start, 1)}
    os.makedirs(os.path.dirname(os.path.abspath(a.json)), exist_ok=True)
    with open(a.json, "w", encoding="utf-8") as fh:
        json.dump(result, fh, indent=2, ensure_ascii=False, default=float)
        fh.write("\n")
    print(f"results: {os.path.abspath(a.json)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
