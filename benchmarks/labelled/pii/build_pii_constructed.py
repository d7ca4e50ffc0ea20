"""Build the constructed half of the PII evaluation set: synthetic, real-shaped documents with known spans.

    python benchmarks/labelled/pii/build_pii_constructed.py [-o PATH] [--seed N] [--docs N]

The corpus has few Chinese resident IDs, bank cards, URL credentials or API keys, so this script writes
documents that have them, in the shapes where they occur: Chinese 联系我们 pages, 简历 resumes, forum posts
with signatures, order and payment notices, config snippets; English contact pages, resumes, mailing-list
signatures, order-confirmation e-mails, deployment notes. Each document also carries the lookalikes that
sit next to personal data in such pages (order ids, tracking numbers, dates, timestamps, prices, ISBNs,
versions, section numbers, QQ numbers, 18-digit numbers that fail the ID check, 16-digit numbers that fail
Luhn, private and documentation IPs, times, MAC addresses, ``logo@2x.png`` image names…).

Every value is generated, never copied: IDs get a valid GB 11643 check character (lookalikes a wrong one),
cards a valid Luhn digit (lookalikes a wrong one), IPs are checked with :mod:`ipaddress`. The spans are
recorded as the text is assembled, so they are exact. Labels follow the definitions in the docstring of
``dataclean/text/pii.py``; where that leaves a choice, the rule is the one in ``README.md`` (an ungrouped
card number without a card word nearby is not a card; a Message-ID is not an e-mail address; QQ numbers
are no kind; a version or section number with four small parts is not an IP).

Output: one JSON object per line, ``id, lang, doc, text, spans, formats, lookalikes``:

* ``spans``: ``[[start, end, kind], ...]``, character offsets into ``text``;
* ``formats``: one short tag per span (``"mobile-344-space"``, ``"visa-grouped"``…), for error analysis;
* ``lookalikes``: ``[[start, end, tag], ...]``, the planted negatives.

The output is deterministic for a given ``--seed``; the committed file was written with the defaults.
"""
from __future__ import annotations

import argparse
import ipaddress
import json
import os
import random
import re
import string
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
DEFAULT_OUT = HERE / "pii-constructed.jsonl"

KINDS = ("credential", "email", "api_key", "cn_id", "bank_card", "phone", "ip")


class Doc:
    """A document assembled piece by piece; personal data and lookalikes record their spans."""

    def __init__(self, lang: str, doc: str):
        self.lang, self.doc = lang, doc
        self.parts: list[str] = []
        self.n = 0
        self.spans: list[list] = []
        self.formats: list[str] = []
        self.lookalikes: list[list] = []

    def t(self, s: str) -> "Doc":
        self.parts.append(s)
        self.n += len(s)
        return self

    def p(self, value: tuple[str, str], kind: str) -> "Doc":
        s, fmt = value
        assert kind in KINDS
        self.spans.append([self.n, self.n + len(s), kind])
        self.formats.append(fmt)
        return self.t(s)

    def x(self, value: tuple[str, str] | str, tag: str | None = None) -> "Doc":
        """A lookalike: not personal data."""
        s, t = (value, tag) if isinstance(value, str) else value
        self.lookalikes.append([self.n, self.n + len(s), tag or t])
        return self.t(s)

    def record(self, id_: str) -> dict:
        return {"id": id_, "lang": self.lang, "doc": self.doc, "text": "".join(self.parts),
                "spans": self.spans, "formats": self.formats, "lookalikes": self.lookalikes}


# ---------------------------------------------------------------------------------------------- values

ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
ID_CHECK = "10X98765432"
PROVINCES = (11, 12, 13, 14, 15, 21, 22, 23, 31, 32, 33, 34, 35, 36, 37, 41, 42, 43, 44, 45, 46, 50, 51, 52,
             53, 54, 61, 62, 63, 64, 65)
DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")


def id_check(body: str) -> str:
    return ID_CHECK[sum(int(c) * w for c, w in zip(body, ID_WEIGHTS)) % 11]


def luhn_digit(body: str) -> str:
    total = 0
    for i, c in enumerate(reversed(body)):
        d = int(c)
        if i % 2 == 0:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return str((10 - total % 10) % 10)


def luhn_ok(d: str) -> bool:
    return luhn_digit(d[:-1]) == d[-1]


class Gen:
    """Random values of every kind and lookalike, from one seeded generator."""

    def __init__(self, rng: random.Random):
        self.r = rng

    def digits(self, n: int, first: str = "0123456789") -> str:
        return self.r.choice(first) + "".join(self.r.choice(string.digits) for _ in range(n - 1))

    def alnum(self, n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
        return "".join(self.r.choice(alphabet) for _ in range(n))

    # -- Chinese resident ID
    def _id_body(self, year: int | None = None, month: int | None = None) -> str:
        r = self.r
        year = year or r.randint(1950, 2006)
        month = month or r.randint(1, 12)
        day = r.randint(1, DAYS[month - 1])
        return f"{r.choice(PROVINCES)}{r.randint(1, 30):02d}{r.randint(1, 28):02d}{year}{month:02d}{day:02d}" \
               f"{r.randint(0, 999):03d}"

    def cn_id(self, year: int | None = None, month: int | None = None) -> tuple[str, str]:
        body = self._id_body(year, month)
        c = id_check(body)
        if c == "X" and self.r.random() < 0.3:
            return body + "x", "id-lower-x"
        return body + c, "id-x" if c == "X" else "id"

    def cn_id_grouped(self) -> tuple[str, str]:
        s, _ = self.cn_id()
        return f"{s[:6]} {s[6:14]} {s[14:]}", "id-grouped-6-8-4"

    def cn_id_badcheck(self) -> tuple[str, str]:
        body = self._id_body()
        good = id_check(body)
        return body + self.r.choice([d for d in "0123456789" if d != good]), "id18-bad-check"

    def cn_id_baddate(self) -> tuple[str, str]:
        """18 digits with a correct check digit but month 13..19: not a birth date."""
        b = self._id_body()
        body = b[:10] + f"1{self.r.randint(3, 9)}" + b[12:]
        return body + id_check(body), "id18-bad-date"

    def masked_id(self) -> tuple[str, str]:
        s, _ = self.cn_id()
        return s[:6] + "********" + s[14:], "id-masked"

    # -- phones
    def cn_mobile_digits(self) -> str:
        r = self.r
        prefix = r.choice(["13", "15", "18", "17", "19", "14", "16"]) + r.choice(string.digits)
        return prefix + self.digits(8)

    def cn_mobile(self) -> tuple[str, str]:
        m = self.cn_mobile_digits()
        f = self.r.choice(["plain", "plain", "plain", "344-space", "344-hyphen", "+86", "+86-space", "+86-344",
                           "+86-hyphen"])
        return {"plain": m, "344-space": f"{m[:3]} {m[3:7]} {m[7:]}", "344-hyphen": f"{m[:3]}-{m[3:7]}-{m[7:]}",
                "+86": f"+86{m}", "+86-space": f"+86 {m}", "+86-344": f"+86 {m[:3]} {m[3:7]} {m[7:]}",
                "+86-hyphen": f"+86-{m}"}[f], "mobile-" + f

    def cn_landline(self) -> tuple[str, str]:
        r = self.r
        area, n = r.choice([("010", 8), ("021", 8), ("020", 8), ("022", 8), ("023", 8), ("0755", 8),
                             ("0571", 8), ("025", 8), ("027", 8), ("028", 8), ("0512", 8), ("0731", 8),
                             ("0898", 8), ("0591", 8), ("0351", 7), ("0471", 7), ("0931", 7), ("0379", 8)])
        local = self.digits(n, "2345678")
        f = r.choice(["hyphen"] * 5 + ["paren", "paren-space", "ext", "space", "local-grouped", "+86"])
        if f == "hyphen":
            return f"{area}-{local}", "landline-hyphen"
        if f == "paren":
            return f"({area}){local}", "landline-paren"
        if f == "paren-space":
            return f"({area}) {local}", "landline-paren-space"
        if f == "ext":
            return f"{area}-{local}-{r.randint(100, 8999)}", "landline-ext"
        if f == "space":
            return f"{area} {local}", "landline-space"
        if f == "local-grouped":
            cut = 4 if n == 8 else 3
            return f"{area}-{local[:cut]} {local[cut:]}", "landline-local-grouped"
        return f"+86 {area[1:]} {local}", "landline-+86"

    def hotline_400(self) -> tuple[str, str]:
        return f"400-{self.digits(3, '123456789')}-{self.digits(4)}", "cn-400-hotline"

    def nanp(self) -> tuple[str, str]:
        r = self.r
        a, b, c = self.digits(3, "23456789"), self.digits(3, "23456789"), self.digits(4)
        f = r.choice(["paren", "paren", "hyphen", "hyphen", "dot", "1-hyphen", "+1-space", "+1-paren", "space"])
        return {"paren": f"({a}) {b}-{c}", "hyphen": f"{a}-{b}-{c}", "dot": f"{a}.{b}.{c}",
                "1-hyphen": f"1-{a}-{b}-{c}", "+1-space": f"+1 {a} {b} {c}", "+1-paren": f"+1 ({a}) {b}-{c}",
                "space": f"{a} {b} {c}"}[f], "nanp-" + f

    def tollfree(self) -> tuple[str, str]:
        return f"1-{self.r.choice(['800', '888', '877', '866'])}-{self.digits(3, '23456789')}-{self.digits(4)}", \
               "nanp-tollfree"

    def e164(self) -> tuple[str, str]:
        r = self.r
        k = r.choice(["uk", "de", "fr", "jp", "sg", "hk", "au", "in", "nl", "ungrouped", "uk-0"])
        if k == "uk":
            return f"+44 20 {self.digits(4, '378')} {self.digits(4)}", "e164-uk"
        if k == "uk-0":
            return f"+44 (0)20 {self.digits(4, '378')} {self.digits(4)}", "e164-uk-trunk0"
        if k == "de":
            return f"+49 30 {self.digits(r.choice([7, 8]), '23456789')}", "e164-de"
        if k == "fr":
            return "+33 1 " + " ".join(self.digits(2) for _ in range(4)), "e164-fr"
        if k == "jp":
            return f"+81 3-{self.digits(4, '123456789')}-{self.digits(4)}", "e164-jp"
        if k == "sg":
            return f"+65 {self.digits(4, '689')} {self.digits(4)}", "e164-sg"
        if k == "hk":
            return f"+852 {self.digits(4, '2359')} {self.digits(4)}", "e164-hk"
        if k == "au":
            return f"+61 2 {self.digits(4, '89')} {self.digits(4)}", "e164-au"
        if k == "in":
            return f"+91 {self.digits(5, '6789')} {self.digits(5)}", "e164-in"
        if k == "nl":
            return f"+31 20 {self.digits(3, '2345678')} {self.digits(4)}", "e164-nl"
        return "+" + r.choice(["44", "49", "33", "61", "81"]) + self.digits(r.randint(9, 10), "123456789"), \
            "e164-ungrouped"

    # -- bank cards
    def _card_digits(self, network: str) -> str:
        r = self.r
        if network == "visa":
            body = "4" + self.digits(14)
        elif network == "mc":
            body = (str(r.randint(51, 55)) + self.digits(13)) if r.random() < 0.7 else \
                   (str(r.randint(2221, 2720)) + self.digits(11))
        elif network == "amex":
            body = r.choice(["34", "37"]) + self.digits(12)
        elif network == "unionpay19":
            body = r.choice(["622202", "622848", "621700", "622588", "621483", "622262"]) + self.digits(12)
        else:  # unionpay16
            body = r.choice(["622202", "622848", "621700", "622588", "625807", "622262"]) + self.digits(9)
        return body + luhn_digit(body)

    def card(self, network: str | None = None, grouping: str | None = None) -> tuple[str, str]:
        r = self.r
        network = network or r.choice(["visa", "visa", "mc", "mc", "unionpay16", "unionpay19", "amex"])
        d = self._card_digits(network)
        grouping = grouping or r.choice(["space", "space", "hyphen", "none"])
        if grouping == "none":
            return d, f"{network}-ungrouped"
        sep = " " if grouping == "space" else "-"
        if network == "amex":
            return sep.join([d[:4], d[4:10], d[10:]]), f"amex-4-6-5-{grouping}"
        return sep.join(d[i:i + 4] for i in range(0, len(d), 4)), f"{network}-grouped-{grouping}"

    def card_badluhn(self, grouped: bool = True) -> tuple[str, str]:
        d = self._card_digits(self.r.choice(["visa", "mc", "unionpay16"]))
        d = d[:-1] + str((int(d[-1]) + self.r.randint(1, 9)) % 10)
        assert not luhn_ok(d)
        return (" ".join(d[i:i + 4] for i in range(0, 16, 4)) if grouped else d), "16-digit-bad-luhn"

    def masked_card(self) -> tuple[str, str]:
        return self.r.choice(["**** **** **** ", "XXXX-XXXX-XXXX-", "•••• "]) + self.digits(4), "card-masked"

    # -- e-mail
    GIVEN = ["john", "mary", "david", "sarah", "michael", "emma", "li.wei", "zhang.san", "chris", "anna",
             "peter", "laura", "kevin", "nina", "tom", "alex", "j.smith", "m.garcia", "wang_fang", "liu-yang"]
    DOMAINS_EN = ["example.com", "example.org", "acme-corp.com", "mail.example.net", "gmail.com", "outlook.com",
                  "yahoo.co.uk", "uni-example.edu", "consulting.example.io", "support.shop-example.com"]
    DOMAINS_ZH = ["163.com", "qq.com", "126.com", "sina.com", "foxmail.com", "example.com.cn", "company-example.cn",
                  "sohu.com", "aliyun.com", "yeah.net"]

    def email(self, zh: bool = False) -> tuple[str, str]:
        r = self.r
        f = r.choice(["name", "name", "name-digits", "plus", "upper", "role", "digits"])
        if f == "digits" and zh:
            local = self.cn_mobile_digits() if r.random() < 0.5 else self.digits(r.randint(6, 10), "123456789")
        elif f == "digits":
            local = r.choice(self.GIVEN).replace(".", "") + self.digits(4)
        elif f == "plus":
            local = r.choice(self.GIVEN) + "+" + r.choice(["news", "shop", "github", "2023"])
        elif f == "role":
            local = r.choice(["info", "support", "sales", "hr", "contact", "service", "jobs", "press"])
        elif f == "name-digits":
            local = r.choice(self.GIVEN) + str(r.randint(1, 99))
        else:
            local = r.choice(self.GIVEN)
        dom = r.choice(self.DOMAINS_ZH if zh else self.DOMAINS_EN)
        s = f"{local}@{dom}"
        if f == "upper":
            s = s.upper() if r.random() < 0.5 else s[0].upper() + s[1:]
        return s, "email-" + f

    # -- IPs
    def public_ipv4(self) -> tuple[str, str]:
        while True:
            a = self.r.choice([1, 8, 14, 23, 36, 42, 58, 59, 61, 101, 106, 110, 112, 113, 114, 116, 117, 119, 120,
                               121, 122, 123, 124, 125, 139, 140, 144, 180, 182, 183, 185, 202, 210, 211, 218, 219,
                               220, 221, 222, 223])
            s = f"{a}.{self.r.randint(0, 255)}.{self.r.randint(0, 255)}.{self.r.randint(1, 254)}"
            if ipaddress.IPv4Address(s).is_global:
                return s, "ipv4-public"

    def public_ipv6(self) -> tuple[str, str]:
        r = self.r
        head = r.choice(["2408:8207", "240e:388", "2409:8a1e", "2001:4860", "2a02:6b8", "2400:cb00", "2606:4700",
                         "2a00:1450"])
        groups = [f"{r.randint(0, 0xffff):x}" for _ in range(2)]
        if r.random() < 0.6:
            s = f"{head}:{groups[0]}:{groups[1]}::{r.randint(1, 0xfff):x}"
            fmt = "ipv6-compressed"
        else:
            s = head + ":" + ":".join(f"{r.randint(0, 0xffff):04x}" for _ in range(6))
            fmt = "ipv6-full"
        assert ipaddress.IPv6Address(s).is_global, s
        return s, fmt

    def private_ip(self) -> tuple[str, str]:
        r = self.r
        return r.choice([
            (f"192.168.{r.randint(0, 10)}.{r.randint(1, 254)}", "ipv4-private"),
            (f"10.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}", "ipv4-private"),
            (f"172.{r.randint(16, 31)}.{r.randint(0, 255)}.{r.randint(1, 254)}", "ipv4-private"),
            ("127.0.0.1", "ipv4-loopback"),
            (f"169.254.{r.randint(1, 254)}.{r.randint(1, 254)}", "ipv4-link-local"),
            (f"203.0.113.{r.randint(1, 254)}", "ipv4-documentation"),
            (f"198.51.100.{r.randint(1, 254)}", "ipv4-documentation"),
            (f"192.0.2.{r.randint(1, 254)}", "ipv4-documentation"),
            ("0.0.0.0", "ipv4-unspecified"),
            (f"fe80::{r.randint(1, 0xffff):x}:{r.randint(1, 0xffff):x}", "ipv6-link-local"),
            (f"fd{r.randint(0, 255):02x}:{r.randint(0, 0xffff):x}::{r.randint(1, 0xff):x}", "ipv6-ula"),
            ("::1", "ipv6-loopback"),
            (f"2001:db8::{r.randint(1, 0xfff):x}", "ipv6-documentation"),
        ])

    # -- credentials and keys
    def credential_url(self, zh: bool = False) -> tuple[str, str, str, str]:
        """(before, credential, after, format) of a URL with user:password."""
        r = self.r
        user = r.choice(["admin", "root", "deploy", "app_user", "svc-backup", "ci", "dbadmin", "guest", "zhangsan",
                         "oauth2", "x-access-token"])
        pw = r.choice([self.alnum(r.randint(8, 16)), "P@ss" + self.digits(4), self.alnum(6) + "!" + self.digits(2),
                       self.alnum(10) + "%40" + self.alnum(3), "123456", "s3cr3t" + self.alnum(4)])
        pw = pw.replace("@", "a")  # a literal @ cannot occur in the password part of a URL
        pw = pw if "%40" in pw else pw.replace("%", "")
        scheme, host, path = r.choice([
            ("https", "git.example.com", "/team/repo.git"), ("ftp", "ftp.example.org", "/pub/"),
            ("postgres", "db.internal.example.com:5432", "/prod"), ("mysql", "10.0.0.12:3306", "/shop"),
            ("mongodb+srv", "cluster0.ab1cd.mongodb.net", "/test?retryWrites=true"),
            ("redis", "cache.example.com:6379", "/0"), ("amqp", "mq.example.com:5672", "/"),
            ("http", "192.168.1.20:8080", "/manager/html"), ("smb", "fileserver", "/share"),
            ("https", "nexus.example.cn", "/repository/npm/"), ("sftp", "upload.example.net:2222", "/in/"),
        ])
        return f"{scheme}://", f"{user}:{pw}", f"@{host}{path}", f"credential-{scheme}"

    def api_key(self) -> tuple[str, str]:
        r = self.r
        k = r.choice(["aws", "aws", "ghp", "ghp", "gho", "ghs", "github_pat", "slack_bot", "slack_user", "google",
                      "google", "openai", "openai_proj", "anthropic", "stripe_live", "stripe_test"])
        up = string.ascii_uppercase + string.digits
        if k == "aws":
            return "AKIA" + self.alnum(16, up), "aws-access-key-id"
        if k in ("ghp", "gho", "ghs"):
            return f"{k}_" + self.alnum(36), f"github-{k}"
        if k == "github_pat":
            return "github_pat_" + self.alnum(22) + "_" + self.alnum(59), "github-fine-grained-pat"
        if k == "slack_bot":
            return f"xoxb-{self.digits(12, '123456789')}-{self.digits(13, '123456789')}-{self.alnum(24)}", "slack-bot"
        if k == "slack_user":
            return f"xoxp-{self.digits(12, '123456789')}-{self.digits(12, '123456789')}-" \
                   f"{self.digits(13, '123456789')}-{self.alnum(32, string.hexdigits[:16])}", "slack-user"
        if k == "google":
            return "AIza" + self.alnum(35, string.ascii_letters + string.digits + "_-"), "google-api-key"
        if k == "openai":
            return "sk-" + self.alnum(48), "openai-legacy"
        if k == "openai_proj":
            return "sk-proj-" + self.alnum(r.randint(48, 80), string.ascii_letters + string.digits + "_-"), \
                "openai-project"
        if k == "anthropic":
            return "sk-ant-api03-" + self.alnum(86, string.ascii_letters + string.digits + "_-") + "AA", "anthropic"
        if k == "stripe_live":
            return "sk_live_" + self.alnum(r.choice([24, 99])), "stripe-sk_live"
        return "sk_test_" + self.alnum(r.choice([24, 99])), "stripe-sk_test"

    def aws_secret(self) -> tuple[str, str]:
        return self.alnum(40, string.ascii_letters + string.digits + "/+"), "aws-secret-no-prefix"

    # -- lookalikes
    def order_id_zh(self) -> tuple[str, str]:
        r = self.r
        f = r.choice(["date18", "date16", "plain12", "E-prefixed", "mobile-like"])
        if f == "date18":
            return f"2023{r.randint(1, 12):02d}{r.randint(1, 28):02d}{self.digits(10)}", "order-id-18-digits"
        if f == "date16":
            return f"2024{r.randint(1, 12):02d}{r.randint(1, 28):02d}{self.digits(8)}", "order-id-16-digits"
        if f == "plain12":
            return self.digits(12, "123456789"), "order-id-12-digits"
        if f == "E-prefixed":
            return "E" + f"2023{r.randint(1, 12):02d}{r.randint(1, 28):02d}" + self.digits(6), "order-id-prefixed"
        return self.cn_mobile_digits(), "order-id-11-digits-mobile-like"

    def order_id_en(self) -> tuple[str, str]:
        r = self.r
        f = r.choice(["amazon", "hash", "inv", "long"])
        if f == "amazon":
            return f"{self.digits(3, '1')}-{self.digits(7)}-{self.digits(7)}", "order-id-3-7-7"
        if f == "hash":
            return f"#{self.digits(r.randint(6, 9), '123456789')}", "order-id-short"
        if f == "inv":
            return f"INV-2023-{self.digits(6)}", "invoice-number"
        return self.digits(16, "123456789"), "order-id-16-digits"

    def tracking(self, zh: bool = False) -> tuple[str, str]:
        r = self.r
        if zh:
            return r.choice([("SF" + self.digits(13, "1"), "tracking-sf"),
                             ("YT" + self.digits(13, "1234"), "tracking-yt"),
                             (self.digits(14, "7"), "tracking-zto-14"), (self.digits(15, "7"), "tracking-sto-15"),
                             ("JD" + self.digits(13, "0"), "tracking-jd"),
                             ("EA" + self.digits(9) + "CN", "tracking-ems")])
        return r.choice([
            ("1Z" + self.alnum(6, string.ascii_uppercase + string.digits) + self.digits(10), "tracking-ups"),
            ("9400 " + " ".join(self.digits(4) for _ in range(4)) + " " + self.digits(2), "tracking-usps-22"),
            (" ".join(self.digits(4, "7") for _ in range(3)), "tracking-fedex-12"),
            (self.digits(10, "123456789"), "tracking-dhl-10"),
        ])

    def date(self, zh: bool = False) -> tuple[str, str]:
        r = self.r
        y, m, d = r.randint(2015, 2024), r.randint(1, 12), r.randint(1, 28)
        if zh:
            return r.choice([(f"{y}年{m}月{d}日", "date-zh"), (f"{y}-{m:02d}-{d:02d}", "date-iso"),
                             (f"{y}/{m:02d}/{d:02d}", "date-slash"), (f"{y}.{m:02d}.{d:02d}", "date-dotted")])
        return r.choice([(f"{y}-{m:02d}-{d:02d}", "date-iso"), (f"{m:02d}/{d:02d}/{y}", "date-us"),
                         (f"{MONTHS[m - 1]}"
                          f" {d}, {y}", "date-text")])

    def time(self) -> tuple[str, str]:
        return f"{self.r.randint(0, 23):02d}:{self.r.randint(0, 59):02d}:{self.r.randint(0, 59):02d}", "time-hms"

    def timestamp(self) -> tuple[str, str]:
        r = self.r
        t = r.randint(1500000000, 1730000000)
        return r.choice([(str(t), "unix-time-10"), (str(t * 1000 + r.randint(0, 999)), "unix-time-ms-13")])

    def datetime(self, zh: bool = False) -> tuple[str, str]:
        r = self.r
        return f"{r.randint(2018, 2024)}-{r.randint(1, 12):02d}-{r.randint(1, 28):02d} {self.time()[0]}", "datetime"

    def price(self, zh: bool = False) -> tuple[str, str]:
        v = self.r.choice([19.9, 99, 129.5, 399, 1299, 2499, 4999, 12800, 35.8, 8.88])
        if zh:
            return self.r.choice([f"¥{v:,.2f}", f"{v:g}元", f"￥{v:g}"]), "price"
        return self.r.choice([f"${v:,.2f}", f"USD {v:,.2f}", f"€{v:,.2f}"]), "price"

    def isbn(self) -> tuple[str, str]:
        body = "978" + self.r.choice(["7", "0", "1"]) + self.digits(8)
        s = sum(int(c) * (1 if i % 2 == 0 else 3) for i, c in enumerate(body))
        full = body + str((10 - s % 10) % 10)
        if self.r.random() < 0.5:
            return f"{full[:3]}-{full[3]}-{full[4:7]}-{full[7:12]}-{full[12]}", "isbn-13-hyphenated"
        return full, "isbn-13"

    def version4(self) -> tuple[str, str]:
        r = self.r
        return f"{r.randint(1, 12)}.{r.randint(0, 20)}.{r.randint(0, 30)}.{r.randint(0, 200)}", "version-4-part"

    def version5(self) -> tuple[str, str]:
        r = self.r
        return ".".join(str(r.randint(0, 30)) for _ in range(5)), "version-5-part"

    def section(self) -> tuple[str, str]:
        r = self.r
        return f"{r.randint(1, 15)}.{r.randint(1, 9)}.{r.randint(1, 9)}.{r.randint(1, 9)}", "section-number-4-part"

    def qq(self) -> tuple[str, str]:
        return self.digits(self.r.randint(6, 10), "123456789"), "qq-number"

    def mac(self) -> tuple[str, str]:
        return ":".join(f"{self.r.randint(0, 255):02X}" for _ in range(6)), "mac-address"

    def postcode_zh(self) -> tuple[str, str]:
        return self.digits(6, "123456789")[:4] + "00", "postcode"

    def uscc(self) -> tuple[str, str]:
        """统一社会信用代码: 18 characters with letters, an ID lookalike."""
        return "91" + self.digits(6, "1234") + self.alnum(10, string.ascii_uppercase + string.digits), "uscc-18"

    def long_luhn_no_word(self, network: str | None = None) -> tuple[str, str]:
        return self._card_digits(network or self.r.choice(["visa", "mc", "unionpay16", "unionpay19"])), \
            "card-ungrouped-no-card-word"

    def git_sha(self) -> tuple[str, str]:
        return self.alnum(40, "0123456789abcdef"), "git-sha"

    def uuid(self) -> tuple[str, str]:
        h = self.alnum(32, "0123456789abcdef")
        return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}", "uuid"

    def image_name(self) -> tuple[str, str]:
        return f"{self.r.choice(['logo', 'banner', 'icon-user', 'avatar', 'hero'])}@{self.r.choice(['2x', '3x'])}." \
               f"{self.r.choice(['png', 'jpg', 'webp', 'svg'])}", "image-at-2x"


def key_variable(r: random.Random, fmt: str) -> str:
    """The setting a key of this format is usually assigned to (sometimes a generic one)."""
    if r.random() < 0.2:
        return r.choice(["api_key: ", "export TOKEN=", "token = ", "API_KEY="])
    for prefix, var in (("aws", "AWS_ACCESS_KEY_ID="), ("github", "GITHUB_TOKEN="), ("slack", "SLACK_BOT_TOKEN="),
                        ("google", "GOOGLE_API_KEY="), ("openai", "OPENAI_API_KEY="),
                        ("anthropic", "ANTHROPIC_API_KEY="),
                        ("stripe", "STRIPE_SECRET_KEY=")):
        if fmt.startswith(prefix):
            return var
    return "API_KEY="


# ---------------------------------------------------------------------------------------------- Chinese

SURNAMES = "王李张刘陈杨黄赵吴周徐孙马朱胡郭何高林罗"
GIVEN_ZH = ["伟", "芳", "娜", "敏", "静", "丽", "强", "磊", "军", "洋", "勇", "艳", "杰", "娟", "涛", "明", "超", "秀英",
            "晓东", "建华", "海燕", "志强", "雪梅"]
CITIES = [("北京市朝阳区建国路", "010"), ("上海市浦东新区张江路", "021"), ("广州市天河区体育西路", "020"),
          ("深圳市南山区科技园", "0755"), ("杭州市西湖区文三路", "0571"), ("成都市高新区天府大道", "028"),
          ("武汉市洪山区珞喻路", "027"), ("南京市鼓楼区中山北路", "025")]
COMPANIES = ["华信科技有限公司", "德成贸易有限公司", "青禾教育咨询有限公司", "远航物流有限公司", "瑞丰机械设备厂",
             "嘉和电子商务有限公司", "博雅文化传媒有限公司", "鑫达建材有限公司"]


def zh_name(r: random.Random) -> str:
    return r.choice(SURNAMES) + r.choice(GIVEN_ZH)


def zh_contact(g: Gen) -> Doc:
    r = g.r
    d = Doc("zh", "zh-contact-page")
    city, _ = r.choice(CITIES)
    co = r.choice(COMPANIES)
    d.t(f"联系我们\n{co}\n地址：{city}{r.randint(1, 999)}号{r.randint(1, 30)}楼{r.randint(101, 2505)}室\n邮编：")
    d.x(g.postcode_zh()).t("\n")
    d.t(r.choice(["电话：", "联系电话：", "总机："])).p(g.cn_landline(), "phone")
    if r.random() < 0.5:
        d.t("、").p(g.cn_landline(), "phone")
    d.t("\n传真：").p(g.cn_landline(), "phone").t("\n")
    d.t(r.choice(["手机：", "销售热线：", "联系人：" + zh_name(r) + " "])).p(g.cn_mobile(), "phone").t("\n")
    if r.random() < 0.5:
        d.t("全国服务热线：").p(g.hotline_400(), "phone").t("\n")
    d.t(r.choice(["邮箱：", "E-mail：", "电子邮箱:"])).p(g.email(zh=True), "email").t("\n")
    d.t("QQ：").x(g.qq()).t(r.choice(["\n", "（工作时间在线）\n"]))
    d.t("工作时间：周一至周五 9:00-18:00\n")
    if r.random() < 0.5:
        d.t("统一社会信用代码：").x(g.uscc()).t("\n")
    d.t(f"Copyright © 2008-{r.randint(2020, 2024)} {co} 版权所有 ")
    d.t(r.choice(["京", "沪", "粤", "浙"]) + "ICP备").x(g.digits(8, "123456789"), "icp-number").t("号")
    if r.random() < 0.4:
        d.t(" 公网安备 ").x(g.digits(14, "3"), "police-record-14").t("号")
    d.t("\n")
    return d


def zh_resume(g: Gen) -> Doc:
    r = g.r
    d = Doc("zh", "zh-resume")
    name = zh_name(r)
    birth_year, birth_month = r.randint(1975, 2001), r.randint(1, 12)
    d.t(f"个人简历\n姓名：{name}    性别：{r.choice('男女')}    民族：汉\n出生日期：{birth_year}年{birth_month}月\n")
    if r.random() < 0.85:
        d.t(r.choice(["身份证号：", "身份证号码：", "证件号码："]))
        d.p(g.cn_id_grouped() if r.random() < 0.06 else g.cn_id(birth_year, birth_month), "cn_id").t("\n")
    else:
        d.t("身份证号：").x(g.masked_id()).t("\n")
    d.t("手机：").p(g.cn_mobile(), "phone").t(r.choice(["    ", "\n"]))
    d.t("邮箱：").p(g.email(zh=True), "email").t("\n")
    if r.random() < 0.4:
        d.t("微信：").t("wx_" + g.alnum(8, string.ascii_lowercase + string.digits)).t("  QQ：").x(g.qq()).t("\n")
    d.t(f"现居地：{r.choice(CITIES)[0]}\n求职意向：{r.choice(['Java开发工程师', '会计', '市场专员', '数据分析师', '行政助理'])}"
        f"  期望薪资：")
    d.x((f"{r.randint(8, 30)}000元/月", "salary")).t("\n教育经历\n")
    d.x((f"{birth_year + 18}.09", "date-dotted")).t("-").x((f"{birth_year + 22}.06", "date-dotted"))
    d.t(f"  {r.choice(['武汉大学', '浙江大学', '四川大学', '华南理工大学', '南京大学'])}  本科  学号：")
    d.x(g.digits(10, "12"), "student-id").t("\n工作经历\n")
    d.x((f"{birth_year + 22}年7月", "date-zh")).t("至今  ").t(r.choice(COMPANIES))
    d.t("  工号：").x(g.digits(r.randint(5, 8), "123456789"), "staff-id").t("\n")
    d.t("证书：计算机二级（证书编号 ").x(g.cn_id_badcheck()).t("）\n")
    if r.random() < 0.3:
        d.t("紧急联系人：" + zh_name(r) + " ").p(g.cn_mobile(), "phone").t("\n")
    if r.random() < 0.3:
        d.t("工资卡：").t(r.choice(["中国工商银行 ", "招商银行 ", "建设银行 "]))
        d.p(g.card(r.choice(["unionpay16", "unionpay19"]), r.choice(["space", "none"])), "bank_card").t("\n")
    return d


def zh_forum(g: Gen) -> Doc:
    r = g.r
    d = Doc("zh", "zh-forum-signature")
    d.t(f"{r.randint(2, 88)}楼  {zh_name(r)}  发表于 ").x(g.datetime()).t("\n")
    topic = r.choice(["二手笔记本转让", "求助：路由器设置问题", "出租房屋", "招聘兼职", "拼车回家"])
    d.t(f"{topic}，")
    if topic == "求助：路由器设置问题":
        d.t("固件版本 V").x(g.version4()).t("，内网地址 ").x(g.private_ip()).t("，外网IP ").p(g.public_ipv4(), "ip")
        d.t("，拨号后ping不通网关。MAC：").x(g.mac()).t("。\n")
    else:
        d.t("价格 ").x(g.price(zh=True)).t(f"，有意者请联系。{r.choice(['非诚勿扰。', '中介勿扰！', ''])}\n")
    d.t("----------------------------------\n")
    sig = r.choice(["full", "mobile-qq", "email-only", "ip-line"])
    if sig in ("full", "mobile-qq"):
        d.t(r.choice(["手机/微信：", "电话：", "Tel: "])).p(g.cn_mobile(), "phone")
        d.t(" | QQ：").x(g.qq()).t("\n")
    if sig in ("full", "email-only"):
        d.t("邮箱：").p(g.email(zh=True), "email").t(r.choice(["\n", "（常用）\n", "，欢迎交流。\n"]))
    if sig == "ip-line":
        d.t("来自 ").p(g.public_ipv4(), "ip").t(r.choice([" 的网友\n", " | 本帖最后编辑于 "]))
        if d.parts[-1].endswith("于 "):
            d.x(g.time()).t("\n")
    if r.random() < 0.3:
        d.t("签名图片：").x(g.image_name()).t("\n")
    return d


def zh_order(g: Gen) -> Doc:
    r = g.r
    d = Doc("zh", "zh-order-notice")
    name = zh_name(r)
    d.t("【订单通知】您的订单已发货\n订单号：").x(g.order_id_zh()).t("\n下单时间：").x(g.datetime()).t("\n")
    if r.random() < 0.5:
        d.t("交易流水号：").x(g.long_luhn_no_word(r.choice(["unionpay19", "visa"]))).t("\n")
    d.t(f"商品：{r.choice(['蓝牙耳机', '保温杯', '儿童绘本', '运动鞋', '电饭煲'])} x{r.randint(1, 3)}  实付：").x(g.price(True))
    d.t("\n快递单号：").x(g.tracking(zh=True)).t("\n")
    d.t(f"收货人：{name}  ").p(g.cn_mobile(), "phone").t(f"\n收货地址：{r.choice(CITIES)[0]}{r.randint(1, 500)}号\n")
    pay = r.choice(["masked", "full-word", "full-grouped", "after-word"])
    if pay == "masked":
        d.t("支付方式：储蓄卡（尾号").x((g.digits(4), "card-last4")).t("）\n")
    elif pay == "full-word":
        d.t(r.choice(["退款银行卡号：", "卡号：", "信用卡号 "])).p(g.card(grouping="none"), "bank_card").t("\n")
    elif pay == "full-grouped":
        d.t("退款将原路退回至 ").p(g.card(r.choice(["unionpay16", "unionpay19", "visa", "mc"]), "space"), "bank_card")
        d.t("\n")
    else:
        d.t("退款账户 ").p(g.card(r.choice(["unionpay16", "unionpay19"]), "none"), "bank_card")
        d.t(r.choice(["（工商银行借记卡）\n", "（招商银行信用卡）\n"]))
    if r.random() < 0.4:
        d.t("发票抬头：个人  纳税人识别号：").x(g.cn_id_badcheck()).t("\n")
    d.t("客服热线：").p(g.hotline_400(), "phone").t(f"（{r.choice(['9:00-21:00', '7x24小时'])}）\n")
    return d


def zh_payment(g: Gen) -> Doc:
    r = g.r
    d = Doc("zh", "zh-payment-info")
    name = zh_name(r)
    d.t(f"汇款信息\n户名：{name}\n开户行：{r.choice(['中国农业银行', '中国建设银行', '招商银行', '中国银行'])}"
        f"{r.choice(['朝阳支行', '天河支行', '南山支行'])}\n")
    d.t(r.choice(["账号：", "卡号：", "银行卡号："])).p(g.card(r.choice(["unionpay16", "unionpay19"]),
                                                      r.choice(["space", "none", "none"])), "bank_card").t("\n")
    d.t("汇款后请将凭证发至 ").p(g.email(zh=True), "email").t(" 或致电 ").p(g.cn_mobile(), "phone").t("。\n")
    d.t("参考编号：").x(g.card_badluhn(grouped=r.random() < 0.5)).t("\n")
    if r.random() < 0.5:
        d.t("身份证：").p(g.cn_id(), "cn_id").t("（仅用于实名核验）\n")
    d.t("截止日期：").x(g.date(True)).t("，逾期名额作废。\n")
    return d


def zh_tech(g: Gen) -> Doc:
    r = g.r
    d = Doc("zh", "zh-tech-post")
    d.t("【部署笔记】\n1. 服务器公网IP：").p(r.choice([g.public_ipv4, g.public_ipv6])(), "ip")
    d.t("，内网 ").x(g.private_ip()).t("\n2. 数据库连接串：")
    b, c, a, f = g.credential_url(zh=True)
    d.t(b).p((c, f), "credential").t(a).t("\n")
    key = g.api_key()
    d.t("3. 环境变量 ").t(key_variable(r, key[1])).p(key, "api_key")
    d.t("\n4. 参考文档第 ").x(g.section()).t(" 节，nginx 版本 ").x(g.version4()).t("\n")
    d.t("5. 日志：[").x(g.datetime()).t("] client ").p(g.public_ipv4(), "ip").t(" - GET /api/v1/items?id=")
    d.x(g.digits(r.randint(6, 12), "123456789"), "record-id").t(" 200\n")
    if r.random() < 0.5:
        d.t("6. 提交 ").x(g.git_sha()).t("，构建号 ").x(g.timestamp()).t("\n")
    if r.random() < 0.3:
        d.t("7. 时间同步：").x(g.time()).t(" 校时源 ntp.aliyun.com\n")
    return d


def zh_notice(g: Gen) -> Doc:
    """A notice with a contact person, many dates, numbers and section numbers."""
    r = g.r
    d = Doc("zh", "zh-notice")
    d.t(f"关于开展{r.choice(['2024年度职称评审', '暑期社会实践', '安全生产检查'])}工作的通知\n文号：")
    d.x((f"〔{r.randint(2019, 2024)}〕{r.randint(1, 99)}号", "document-number")).t("\n各单位：\n根据《管理办法》第 ")
    y, m = r.randint(2018, 2024), r.randint(1, 10)
    d.x(g.section()).t(" 条规定，现将有关事项通知如下。报名时间：").x((f"{y}年{m}月{r.randint(1, 28)}日", "date-zh"))
    d.t("至").x((f"{y}年{m + 2}月{r.randint(1, 28)}日", "date-zh")).t("。\n")
    d.t("报名费 ").x(g.price(True)).t("，参考教材 ISBN ").x(g.isbn()).t("。\n")
    d.t(f"联系人：{zh_name(r)}，电话：").p(g.cn_landline(), "phone")
    if r.random() < 0.6:
        d.t("，").p(g.cn_mobile(), "phone")
    d.t("，邮箱：").p(g.email(zh=True), "email").t("。\n")
    if r.random() < 0.5:
        d.t("报名表编号格式示例：").x(g.cn_id_baddate()).t("。\n")
    if r.random() < 0.4:
        d.t("考生须持本人身份证（如 ").p(g.cn_id(), "cn_id").t("）入场。\n")
    d.t(f"{r.choice(COMPANIES)}\n").x(g.date(True)).t("\n")
    return d


def zh_roster(g: Gen) -> Doc:
    """A published list of participants: the leaked-table shape, with masked and unmasked rows."""
    r = g.r
    d = Doc("zh", "zh-roster")
    d.t(f"{r.randint(2019, 2024)}年{r.choice(['第二期消防安全培训', '社区志愿者', '驾驶员继续教育', '春季招聘面试'])}人员名单公示\n")
    d.t("序号  姓名  身份证号  联系电话  报名日期\n")
    masked_all = r.random() < 0.25
    for i in range(1, r.randint(4, 8)):
        d.t(f"{i}  {zh_name(r)}  ")
        if masked_all or r.random() < 0.2:
            d.x(g.masked_id())
        else:
            d.p(g.cn_id(), "cn_id")
        d.t("  ")
        if masked_all or r.random() < 0.3:
            m = g.cn_mobile_digits()
            d.x((m[:3] + "****" + m[7:], "mobile-masked"))
        else:
            d.p(g.cn_mobile() if r.random() < 0.8 else g.cn_landline(), "phone")
        d.t("  ").x(g.date(True)).t("\n")
    d.t("公示期：").x(g.date(True)).t("起5个工作日。如有异议请联系 ").p(g.cn_landline(), "phone").t("。\n")
    return d


def zh_booking(g: Gen) -> Doc:
    """A train ticket / hotel booking confirmation with the traveller's ID."""
    r = g.r
    d = Doc("zh", "zh-booking")
    d.t(r.choice(["【铁路客服】订单", "【携程旅行】订单", "【酒店预订确认】订单号"])).x(g.order_id_zh()).t("\n")
    for _ in range(r.randint(1, 3)):
        d.t(f"乘车人：{zh_name(r)}  证件类型：二代身份证  证件号码：").p(g.cn_id(), "cn_id").t("\n")
    d.t(f"车次 G{r.randint(1, 9999)}  {r.randint(1, 16):02d}车{r.randint(1, 20)}{r.choice('ABCDF')}号  发车 ")
    d.x(g.datetime()).t("\n票价 ").x(g.price(True)).t("  取票号 E").x(g.digits(9, "123456789"), "ticket-number").t("\n")
    d.t("联系手机：").p(g.cn_mobile(), "phone").t("  邮箱：").p(g.email(zh=True), "email").t("\n")
    if r.random() < 0.4:
        d.t("支付宝交易号 ").x(g.order_id_zh()).t("\n")
    return d


ZH_TEMPLATES = [zh_contact, zh_resume, zh_forum, zh_order, zh_payment, zh_tech, zh_notice, zh_roster, zh_booking]


# ---------------------------------------------------------------------------------------------- English

NAMES_EN = ["John Miller", "Sarah Chen", "David Okafor", "Emma Schmidt", "Michael Rossi", "Laura Novak", "Priya Patel",
            "Tom Becker", "Anna Kowalski", "Chris Tanaka"]
STREETS = ["1200 Market Street, Suite 400, San Francisco, CA 94105", "77 Baker Street, London W1U 6RF",
           "350 Fifth Avenue, New York, NY 10118", "Friedrichstrasse 43, 10117 Berlin",
           "45 Collins Street, Melbourne VIC 3000"]
COMPANIES_EN = ["Acme Analytics Ltd", "Northwind Traders", "Blue Harbor Consulting", "Globex Logistics",
                "Summit Legal LLP", "Riverbend Dental Clinic"]


def en_contact(g: Gen) -> Doc:
    r = g.r
    d = Doc("en", "en-contact-page")
    co = r.choice(COMPANIES_EN)
    d.t(f"Contact Us\n{co}\n").x(g.image_name()).t(f"\n{r.choice(STREETS)}\n")
    d.t(r.choice(["Phone: ", "Tel: ", "Call us: "])).p(g.nanp() if r.random() < 0.6 else g.e164(), "phone").t("\n")
    if r.random() < 0.5:
        d.t("Toll-free: ").p(g.tollfree(), "phone").t("\n")
    d.t("Fax: ").p(g.nanp() if r.random() < 0.5 else g.e164(), "phone").t("\n")
    if r.random() < 0.5:
        d.t("International: ").p(g.e164(), "phone").t("\n")
    d.t("Email: ").p(g.email(), "email").t(r.choice(["\n", " (we reply within 24 hours)\n"]))
    d.t("Office hours: Mon-Fri 9:00-17:30, Sat 10:00-14:00\n")
    d.t("Company No. ").x(g.digits(8, "0"), "company-number").t(" | VAT GB ")
    d.x((f"{g.digits(3)} {g.digits(4)} {g.digits(2)}", "vat-number"))
    d.t(f"\n© 2012-{r.randint(2020, 2024)} {co}. All rights reserved. v").x(g.version4()).t("\n")
    return d


def en_resume(g: Gen) -> Doc:
    r = g.r
    d = Doc("en", "en-resume")
    name = r.choice(NAMES_EN)
    d.t(f"{name.upper()}\n{r.choice(STREETS)}\n").p(g.nanp() if r.random() < 0.6 else g.e164(), "phone")
    d.t(" | ").p(g.email(), "email").t(f" | linkedin.com/in/{name.lower().replace(' ', '-')}-{g.digits(4)}\n")
    d.t("EXPERIENCE\n")
    y = r.randint(2010, 2018)
    d.x((f"{y}", "year")).t("–Present  Senior Analyst, ").t(r.choice(COMPANIES_EN)).t("\n")
    d.t(f"- Cut report latency by {r.randint(10, 60)}% across {r.randint(3, 40)} markets; budget ").x(g.price()).t("\n")
    d.t("- Maintained the pricing engine (release ").x(g.version4()).t(") and the ETL spec, section ")
    d.x(g.section()).t("\n")
    d.t("EDUCATION\nB.Sc. Statistics, ").x((f"{y - 4}", "year")).t(f"; GPA {r.choice(['3.7', '3.85', '3.92'])}/4.0\n")
    d.t("PUBLICATIONS\n").t(r.choice(["Data quality at scale", "Forecasting demand"]) + ", ISBN ").x(g.isbn()).t("\n")
    if r.random() < 0.4:
        d.t("References: ").t(r.choice(NAMES_EN)).t(", ").p(g.email(), "email").t(", ").p(g.nanp(), "phone").t("\n")
    return d


def en_signature(g: Gen) -> Doc:
    r = g.r
    d = Doc("en", "en-mail-signature")
    sender = r.choice(NAMES_EN)
    d.t("From: " + sender + " <").p(g.email(), "email").t(">\nDate: ")
    d.x((f"{r.choice(['Mon', 'Tue', 'Wed', 'Thu', 'Fri'])}, {r.randint(1, 28)} Oct 2023 {g.time()[0]} "
         f"{r.choice(['+0000', '-0700', '+0100', '+0800'])}", "date-header"))
    d.t("\nMessage-ID: <").x((f"{g.digits(14, '2')}.{g.alnum(8, string.ascii_uppercase + string.digits)}@mail."
                               f"{r.choice(['example.com', 'acme-corp.com'])}", "message-id")).t(">\n")
    if r.random() < 0.5:
        d.t("Received: from mail.example.net ([").p(g.public_ipv4(), "ip").t("]) by mx.example.com\n")
    d.t(f"\nHi all,\nthe build {r.choice(['passed', 'failed'])} on ").x(g.version4()).t("; see ticket #")
    d.x(g.digits(5, "123456789"), "ticket-id").t(". Logs at ").x(g.time()).t(" show a timeout from ").x(g.private_ip())
    d.t(".\n\n-- \n")
    d.t(f"{sender} | {r.choice(['Senior Engineer', 'Account Manager', 'PhD candidate'])} | "
        f"{r.choice(COMPANIES_EN)}\n")
    d.t(r.choice(["M: ", "Mobile: ", "Cell "])).p(g.nanp() if r.random() < 0.5 else g.e164(), "phone")
    if r.random() < 0.6:
        d.t(r.choice([" | O: ", " | Office: ", " / Direct "])).p(g.nanp(), "phone")
        if r.random() < 0.4:
            d.t(f" ext. {r.randint(100, 999)}")
    d.t("\n")
    if r.random() < 0.5:
        d.t(r.choice(["Alt. e-mail: ", "Personal: "])).p(g.email(), "email").t("\n")
    d.t("Sent from my phone. ").x(g.image_name()).t("\n")
    return d


def en_order(g: Gen) -> Doc:
    r = g.r
    d = Doc("en", "en-order-confirmation")
    name = r.choice(NAMES_EN)
    d.t("Subject: Your order ").x(g.order_id_en()).t(f" has shipped\n\nHi {name.split()[0]},\n")
    d.t("Order placed: ").x(g.date()).t(" at ").x(g.time()).t("\nOrder total: ").x(g.price()).t("\n")
    tracking = g.tracking()
    carrier = {"tracking-ups": "UPS", "tracking-usps-22": "USPS", "tracking-fedex-12": "FedEx"}.get(tracking[1], "DHL")
    d.t("Tracking number: ").x(tracking).t(f" ({carrier})\n")
    pay = r.choice(["masked", "masked", "grouped", "word-ungrouped", "amex"])
    if pay == "masked":
        d.t(f"Paid with {r.choice(['Visa', 'Mastercard', 'Amex'])} ending in ").x((g.digits(4), "card-last4")).t("\n")
    elif pay == "grouped":
        d.t("Payment method: ").p(g.card(r.choice(["visa", "mc"]), r.choice(["space", "hyphen"])), "bank_card").t("\n")
    elif pay == "amex":
        d.t("Charged to: ").p(g.card("amex", "space"), "bank_card").t("\n")
    else:
        d.t(r.choice(["Card number: ", "Credit card ", "Debit card no. "])).p(g.card(r.choice(["visa", "mc"]), "none"),
                                                                             "bank_card").t("\n")
    d.t(f"Ship to: {name}, {r.choice(STREETS)}\nPhone: ").p(g.nanp(), "phone").t("\n")
    if r.random() < 0.5:
        d.t("Reference: ").x(g.long_luhn_no_word(r.choice(["visa", "mc"]))).t("\n")
    if r.random() < 0.4:
        d.t("Gift code: ").x(g.card_badluhn()).t("\n")
    d.t("Questions? Write to ").p(g.email(), "email").t(" or call ").p(g.tollfree(), "phone").t(".\n")
    d.t("Item SKU ").x(g.digits(12, "0"), "upc-12").t(", ISBN ").x(g.isbn()).t("\n")
    return d


def en_devops(g: Gen) -> Doc:
    r = g.r
    d = Doc("en", "en-deploy-notes")
    d.t(f"# Deploy notes ({r.choice(['staging', 'prod'])})\nHost: ").p(r.choice([g.public_ipv4, g.public_ipv6])(), "ip")
    d.t(" (private ").x(g.private_ip()).t(")\n")
    b, c, a, f = g.credential_url()
    d.t("DATABASE_URL=" + b).p((c, f), "credential").t(a).t("\n")
    n_keys = r.choice([1, 1, 2])
    for _ in range(n_keys):
        key = g.api_key()
        d.t(key_variable(r, key[1])).p(key, "api_key").t("\n")
    if r.random() < 0.15:
        d.t("aws_secret_access_key = ").p(g.aws_secret(), "api_key").t("\n")
    d.t("Release ").x(g.version4()).t(", commit ").x(g.git_sha()).t(", request id ").x(g.uuid()).t("\n")
    d.t("See runbook section ").x(g.section()).t("; started ").x(g.datetime()).t(" (").x(g.timestamp()).t(")\n")
    if r.random() < 0.4:
        d.t("Clone: ").x(("git@github.com:acme/service.git", "ssh-remote")).t(" ; ")
    d.t("package ").x(g.version5()).t("\n")
    if r.random() < 0.5:
        d.t("Peer ").p(g.public_ipv4(), "ip").t(" port ").x((str(r.randint(1024, 65535)), "port"))
        d.t(" NIC ").x(g.mac()).t("\n")
    if r.random() < 0.3:
        d.t("The old key (").x(("sk-...redacted", "redacted-key")).t(") was revoked.\n")
    return d


def en_support(g: Gen) -> Doc:
    """A support thread with a customer's details and many lookalikes."""
    r = g.r
    d = Doc("en", "en-support-thread")
    d.t("Ticket #").x(g.digits(7, "123456789"), "ticket-id").t(" opened ").x(g.datetime()).t("\n")
    d.t("Customer wrote: my invoice ").x(g.order_id_en()).t(" shows ").x(g.price()).t(" twice. ")
    d.t("Please call me back at ").p(g.nanp() if r.random() < 0.6 else g.e164(), "phone").t(" or e-mail ")
    d.p(g.email(), "email").t(".\n")
    if r.random() < 0.4:
        d.t("I paid with card ").p(g.card(r.choice(["visa", "mc"]), r.choice(["space", "none"])), "bank_card").t(".\n")
    d.t("Agent: the duplicate charge ref ").x(g.card_badluhn(r.random() < 0.5)).t(" was reversed on ")
    d.x(g.date()).t(".\n")
    d.t("Our status page logged the outage at ").x(g.time()).t(" from ").x(g.private_ip()).t(", app version ")
    d.x(g.version4()).t(".\n")
    if r.random() < 0.4:
        d.t("Login came from ").p(g.public_ipv4(), "ip").t(".\n")
    if r.random() < 0.3:
        d.t("SSN-like field 123-45-").x((g.digits(4), "ssn-like-example")).t(" is not collected.\n")
    return d


EN_TEMPLATES = [en_contact, en_resume, en_signature, en_order, en_devops, en_support]


# ---------------------------------------------------------------------------------------------- build

def build(seed: int = 11643, n_docs: int = 300) -> list[dict]:
    rng = random.Random(seed)
    g = Gen(rng)
    out = []
    for i in range(n_docs):
        zh = i % 2 == 1
        templates = ZH_TEMPLATES if zh else EN_TEMPLATES
        fn = templates[(i // 2) % len(templates)]
        doc = fn(g)
        out.append(doc.record(f"c-{doc.lang}-{i:03d}"))
    for rec in out:
        check(rec)
    return out


# The docstring's "card word": an ungrouped run is a card only near one of these.
CARD_WORDS = re.compile(r"(?i)card|visa|master|amex|credit|debit|卡|银行|信用|借记|账号|帐号")


def check(rec: dict) -> None:
    """Spans inside the text, without overlaps or edge spaces; lookalikes off the spans; an ungrouped
    Luhn-valid lookalike far (60 characters) from any card word, so it is no card by the definition."""
    text = rec["text"]
    spans = sorted(rec["spans"])
    for (a, b, k), (c, _, _) in zip(spans, spans[1:] + [[len(text), 0, ""]]):
        assert 0 <= a < b <= c, (rec["id"], a, b, k)
        assert text[a:b] == text[a:b].strip(), (rec["id"], text[a:b])
    for a, b, tag in rec["lookalikes"]:
        assert not any(a < e and s < b for s, e, _ in spans), (rec["id"], text[a:b])
        if tag == "card-ungrouped-no-card-word":
            assert not CARD_WORDS.search(text[max(0, a - 60):b + 60]), (rec["id"], text[max(0, a - 60):b + 60])


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default=str(DEFAULT_OUT))
    ap.add_argument("--seed", type=int, default=11643)
    ap.add_argument("--docs", type=int, default=300)
    a = ap.parse_args(argv)
    rows = build(a.seed, a.docs)
    out = Path(a.output)
    tmp = out.with_name(out.name + ".tmp")
    with tmp.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    os.replace(tmp, out)
    counts: dict[str, int] = {}
    for r in rows:
        for _, _, k in r["spans"]:
            counts[k] = counts.get(k, 0) + 1
    print(f"wrote {len(rows)} documents to {out}: " + ", ".join(f"{k} {counts.get(k, 0)}" for k in KINDS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
