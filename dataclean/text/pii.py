"""Personal data in text: find e-mail addresses, IP addresses, phone numbers, Chinese resident ID numbers,
bank-card numbers, credentials in URLs and API keys, validate them, and mask them.

Each kind is a Python regular expression for the candidates plus a validator that cuts lookalikes:

* ``email`` — ``local@domain.tld`` with an alphabetic TLD. Not addresses: ``logo@2x.png`` file names (the
  "TLD" is a file extension), ssh/scp targets (``git@github.com:org/repo``, ``user@host:/path``), IRC
  hostmasks (``nick!user@host``), URL user names (``http://user@host``) and Message-IDs (``<…@host>`` on a
  ``Message-ID:`` / ``In-Reply-To:`` / ``References:`` line, or with ten digits and a dot before the ``@``).
* ``ip`` — IPv4 dotted quads (each octet 0–255, not part of a longer dotted number such as a version
  ``1.2.3.4.5``, nor four numbers below 32, which read as a section or version number ``11.1.3.7``, nor
  one a few words after ``v``, ``version``, ``release``, ``build``, ``版本``…) and IPv6 (validated by
  :mod:`ipaddress`). By default only *public* addresses are masked:
  private, loopback, link-local, multicast, reserved and documentation ranges are not personal data. This
  follows datatrove's ``PIIFormatter`` (``only_remove_public_ips=True``), which FineWeb ran.
* ``phone`` — E.164 (``+`` and 8–15 digits), North American (``(415) 555-0132``, ``415-555-0132``,
  ``1-800-…``), Chinese mobile (``1[3-9]`` + 9 digits, optionally ``+86``, grouped 3-4-4 or not) and Chinese
  landline (``0`` + 2–3 digit area code, a separator, 7–8 digits, also grouped ``023-3741 1113``); and
  any phone-like run of 7–15 digits right after a phone word (``Tel``, ``Fax``, ``Phone``, ``电话``, ``手机``,
  ``传真``…: ``Fax: 00 44 1483 862801``, ``电话：6586 1234转168``). A bare run of digits is a phone only in
  these shapes, so order ids, ISBNs, dates and timestamps do not match; nor do the digits after a decimal
  point (``3.14159265359``), a group inside a row of numbers (``128 256 512 1024``) or a mobile-shaped id
  after ``订单号`` / ``交易号`` / ``No.``.
* ``cn_id`` — the 18-character resident ID (GB 11643-1999; also grouped 6-8-4): a province code 11–82, a
  valid birth date from 1900 on, and the ISO 7064 MOD 11-2 check character. An 18-digit number that fails the checksum is
  not an ID.
* ``bank_card`` — 13–19 digits (in groups of 4 or one run) starting like a card of a known network
  (Visa 4, Mastercard 51–55 / 2221–2720, Amex 34/37, UnionPay 62, Discover 6011/65, JCB 35) that pass the
  Luhn check; an ungrouped run also needs a card word in the 40 characters before it or the 20 after it
  (``card``, ``卡号``, ``借记卡``…), because one 16-digit id in ten passes Luhn by chance.
* ``credential`` — the ``user:password@`` part of a URL.
* ``api_key`` — common key shapes: AWS access key ids (and the secret after ``aws_secret_access_key =``),
  GitHub (``ghp_…``, ``github_pat_…``), Slack, Google API, Stripe (``sk_live_…``) and OpenAI (``sk-…``) keys.

Measured with ``benchmarks/eval_pii.py`` on ``benchmarks/labelled/pii/`` (513 real lines of the bench corpus
and zh-cc-dev labelled by reading them, and 300 constructed English and Chinese documents with lookalikes):
precision / recall per kind in ``benchmarks/results/eval_pii.json``; real-text phone recall is the lowest
(0.91: local formats outside the shapes above).

Overlaps are settled by the order of :data:`KINDS` (an e-mail inside a URL with credentials is one
credential). Masking replaces each match with the kind's token (``<EMAIL>``…) or, with ``mode="hash"``,
with the token and a stable 8-hex-digit hash of the value (``<EMAIL:3fa9c2d1>``): the same address gets the
same mask everywhere, so a model still sees that two mentions are the same, but not the address.

Speed: a document is searched for a kind only when Arrow's vectorised RE2 finds that kind's cheap
prefilter in it (``@`` for e-mail, 7 digits in a phone-like run…), so most documents never reach Python.
"""
from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Callable, Iterable

import xxhash

#: The kinds, in the order that settles overlaps.
KINDS = ("credential", "email", "api_key", "cn_id", "bank_card", "phone", "ip")
DEFAULT_KINDS = ("email", "ip", "phone", "cn_id")
TOKENS = {"email": "<EMAIL>", "ip": "<IP>", "phone": "<PHONE>", "cn_id": "<ID>", "bank_card": "<CARD>",
          "credential": "<CREDENTIAL>", "api_key": "<KEY>"}

# Not a TLD: the "domain" of retina image names and similar (logo@2x.png)
_FILE_EXT = frozenset("png jpg jpeg gif svg webp bmp ico css js json xml html htm php asp aspx pdf txt zip gz mp3 "
                      "mp4 webm woff woff2 ttf eot map".split())

_EMAIL = re.compile(r"(?=[A-Za-z0-9])(?<![A-Za-z0-9._%+!/=?-])[A-Za-z0-9][A-Za-z0-9._%+=?-]{0,127}@(?:[A-Za-z0-9]"
                    r"(?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?\.)+([A-Za-z]{2,24})(?![A-Za-z0-9-])")
_OCTET = r"(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)"
_IPV4 = re.compile(rf"(?=\d)(?<![\d.]){_OCTET}(?:\.{_OCTET}){{3}}(?!\.?\d)")
# IPv6 candidates: a run of hex digits and colons with two colons or more; ipaddress decides
_IPV6 = re.compile(r"(?<![0-9A-Fa-f:])[0-9A-Fa-f]{0,4}:[0-9A-Fa-f]{0,4}:[0-9A-Fa-f:]*(?![0-9A-Fa-f:])")
_PHONE = re.compile(
    r"(?=[+(0-9])(?<![A-Za-z0-9+\-])(?<!\d\.)(?:"  # (not the digits after a decimal point: 3.14159265359)
    r"\+\d{1,3}[ .\-]?(?:\(\d{1,4}\)[ .\-]?)?\d{1,4}(?:[ .\-]?\d{2,4}){1,4}"  # E.164 / international
    r"|(?:1[ .\-])?\(?[2-9]\d{2}\)?[ .\-]\d{3}[ .\-]\d{4}"  # North American, separated
    r"|\([2-9]\d{2}\)\d{3}-\d{4}"
    r"|1[3-9]\d(?:[ \-]?\d{4}){2}"  # Chinese mobile
    r"|(?:\(0\d{2,3}\)[ ]?|0\d{2,3}[ \-])(?:\d{7,8}|\d{3,4}[ \-]\d{4})(?:-\d{1,4})?"  # Chinese landline
    r")(?![A-Za-z0-9])(?!\.\d)(?!-\w)")
# any phone-like run right after a phone word: Tel. 00 44 1483 862801, 电话：6586 1234转168, Fax 07-1234567
_PHONE_WORD = re.compile(r"(?i)(?:\b(?:tel|telephone|phone|fax|mobile|mob|cell|call|hotline)\b\.?|电话|手机|传真|"
                         r"联系方式|热线|客服|座机)[ \t]*[:：.]?[ \t]*((?:\+|00)?[ ]?\(?\d[\d ().\-]{5,18}\d)(?:转\d{1,5})?")
_NOT_PHONE_BEFORE = re.compile(r"(?:订单|交易|流水|单号|编号|运单|快递|id|ID|No\.?|#)[^\n]{0,6}$")
_DIGIT_GROUP_AROUND = re.compile(r"\d[ ]$")
_CN_ID = re.compile(r"(?<![0-9A-Za-z])[1-8]\d{5}([ ]?)(?:19|20)\d{2}(?:0[1-9]|1[0-2])(?:0[1-9]|[12]\d|3[01])\1"
                    r"\d{3}[\dXx](?![0-9A-Za-z])")  # (also grouped 6-8-4: 132421 19770808 8455)
_CARD = re.compile(r"(?<![\d\-])(?:\d{4}[ \-]\d{4}[ \-]\d{4}[ \-]\d{1,4}(?:[ \-]\d{1,3})?|\d{4}[ \-]\d{6}[ \-]\d{5}|\d{13,19})"
                   r"(?![\d\-])")
_CARD_WORDS = re.compile(r"(?i)card|visa|master|amex|credit|debit|卡|银行|信用|借记|账号|帐号")
_CREDENTIAL = re.compile(r"(?<=://)[^\s/:@]{1,64}:[^\s/@]{1,128}(?=@[\w.-])")
_API_KEY = re.compile(r"(?<![A-Za-z0-9])(?:AKIA[0-9A-Z]{16}|gh[pousr]_[A-Za-z0-9]{36}|github_pat_[A-Za-z0-9_]{22,255}"
                      r"|xox[abprs]-[A-Za-z0-9-]{10,72}|AIza[0-9A-Za-z_\-]{35}|sk-(?:proj-)?[A-Za-z0-9_\-]{24,}"
                      r"|[sr]k_(?:live|test)_[A-Za-z0-9]{16,99})(?![A-Za-z0-9])")
_MESSAGE_ID_LINE = re.compile(r"(?i)[ \t]*(?:message-id|in-reply-to|references|x-message-id|content-id)[ \t]*:")
_AWS_SECRET = re.compile(r"(?i)aws_secret_access_key[\"']?[ \t]*[=:][ \t]*[\"']?([A-Za-z0-9/+]{40})(?![A-Za-z0-9/+])")
_VERSION_BEFORE = re.compile(r"(?i)(?:\bv|\bver\.?|\bversion|\brelease|\bbuild|\bfirmware|版本|固件)[^\n\d]{0,16}$")

#: The searches of each kind (a kind may have several, each with its own prefilter).
SEARCHES = {"credential": ("credential",), "email": ("email",), "api_key": ("api_key",), "cn_id": ("cn_id",),
            "bank_card": ("bank_card",), "phone": ("phone",), "ip": ("ipv4", "ipv6")}

#: Cheap RE2 prefilters per search (Arrow's ``match_substring_regex``): a document without a match has none.
PREFILTERS = {
    "email": r"[A-Za-z0-9._%+=?-]@[A-Za-z0-9][A-Za-z0-9.-]*\.[A-Za-z]{2}",
    "ipv4": r"\d\.\d{1,3}\.\d{1,3}\.\d",
    "ipv6": r"::|(?:[0-9A-Fa-f]{1,4}:){3}[0-9A-Fa-f]{1,4}",  # (a time 17:48:30 has two colons)
    "phone": r"\d(?:[ .()\-]{0,2}\d){6}",
    "cn_id": r"\d{17}|\d{6} \d{8} \d",
    "bank_card": r"\d(?:[ \-]?\d){12}",
    "credential": r"://[^\s/:@]+:[^\s/@]+@",
    "api_key": r"AKIA|gh[pousr]_|github_pat_|xox[abprs]-|AIza|sk-|[sr]k_(?:live|test)_|(?i:aws_secret_access_key)",
}

_ID_WEIGHTS = (7, 9, 10, 5, 8, 4, 2, 1, 6, 3, 7, 9, 10, 5, 8, 4, 2)
_ID_CHECK = "10X98765432"
_CN_PROVINCES = frozenset([11, 12, 13, 14, 15, 21, 22, 23, 31, 32, 33, 34, 35, 36, 37, 41, 42, 43, 44, 45, 46, 50,
                           51, 52, 53, 54, 61, 62, 63, 64, 65, 71, 81, 82])
_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def cn_id_valid(s: str) -> bool:
    """GB 11643-1999: province code, a real birth date and the MOD 11-2 check character."""
    if len(s) != 18 or not s[:17].isdigit() or int(s[:2]) not in _CN_PROVINCES:
        return False
    year, month, day = int(s[6:10]), int(s[10:12]), int(s[12:14])
    if not (1900 <= year <= 2099 and 1 <= month <= 12 and 1 <= day <= _DAYS[month - 1]):
        return False
    if month == 2 and day == 29 and not (year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)):
        return False
    total = sum(int(c) * w for c, w in zip(s[:17], _ID_WEIGHTS))
    return _ID_CHECK[total % 11] == s[17].upper()


def luhn_valid(digits: str) -> bool:
    total = 0
    for i, c in enumerate(reversed(digits)):
        d = ord(c) - 48
        if i % 2:
            d *= 2
            if d > 9:
                d -= 9
        total += d
    return total % 10 == 0


def _card_network(d: str) -> bool:
    n = len(d)
    if d[0] == "4":
        return n in (13, 16, 19)
    two, four = int(d[:2]), int(d[:4])
    if 51 <= two <= 55 or 2221 <= four <= 2720:
        return n == 16
    if two in (34, 37):
        return n == 15
    if two == 62:
        return 16 <= n <= 19
    if d.startswith("6011") or two == 65:
        return 16 <= n <= 19
    if two == 35:
        return 16 <= n <= 19
    return False


def _public_ip(addr) -> bool:
    return not (addr.is_private or addr.is_loopback or addr.is_link_local or addr.is_multicast
                or addr.is_reserved or addr.is_unspecified)


@dataclass(frozen=True)
class Match:
    start: int
    end: int
    kind: str


def _email(text: str, public_ip_only: bool) -> Iterable[tuple[int, int]]:
    for m in _EMAIL.finditer(text):
        if m.group(1).lower() in _FILE_EXT:
            continue
        b = m.end()
        if b + 1 < len(text) and text[b] == ":" and not text[b + 1].isspace():
            continue  # user@host:/path, git@github.com:org/repo: an ssh / scp target, not an address
        local = m.group()[: m.group().index("@")]
        if m.start() and text[m.start() - 1] == "<" and (
                _MESSAGE_ID_LINE.match(text, text.rfind("\n", 0, m.start()) + 1)
                or ("." in local and "+" not in local and sum(c.isdigit() for c in local) >= 10)):
            continue  # Message-ID: <20020720094736.GA16224@skynet.ie>: names a message, not a person
        yield m.span()


def _ip_finder(rx: re.Pattern, cls) -> Callable:
    def find(text: str, public_ip_only: bool) -> Iterable[tuple[int, int]]:
        for m in rx.finditer(text):
            s = m.group()
            if cls is ipaddress.IPv6Address and (s.count(":") < 2 or ("::" not in s and not any(
                    c.isalpha() for c in s))):
                continue  # 12:30:45:00, all decimal and no '::': a time or a ratio, not an address
            if cls is ipaddress.IPv4Address and (all(len(o) <= 2 and int(o) < 32 for o in s.split(".")) or
                                                 _VERSION_BEFORE.search(text, max(0, m.start() - 16), m.start())):
                continue  # 11.1.3.7, v4.15.0.176, 版本 1.1.22.85: a section or version number
            try:
                addr = cls(s)
            except ValueError:
                continue
            if public_ip_only and not _public_ip(addr):
                continue
            yield m.span()
    return find


def _phone(text: str, public_ip_only: bool) -> Iterable[tuple[int, int]]:
    spans = []
    for m in _PHONE.finditer(text):
        s = m.group()
        a, b = m.span()
        digits = sum(c.isdigit() for c in s)
        if s.startswith("+"):
            if not 8 <= digits <= 15:
                continue
        elif not 10 <= digits <= 16:
            continue
        if " " in s and (_DIGIT_GROUP_AROUND.search(text, max(0, a - 2), a) or text[b:b + 2][:1] == " " and
                         text[b + 1:b + 2].isdigit()):
            continue  # 256 512 1024 in a row of numbers
        if s[0] == "1" and _NOT_PHONE_BEFORE.search(text, max(0, a - 12), a):
            continue  # 订单号：13873038157, 交易号 15183844069: an id shaped like a mobile
        spans.append((a, b))
    for m in _PHONE_WORD.finditer(text):  # a phone word, then any phone-like run
        a, b = m.span(1)
        s = m.group(1)
        if not 7 <= sum(c.isdigit() for c in s) <= 15 or any(x < b and a < y for x, y in spans):
            continue
        spans.append((a, m.end()))  # (with its extension: 转168)
    spans.sort()
    return spans


def _cn_id(text: str, public_ip_only: bool) -> Iterable[tuple[int, int]]:
    for m in _CN_ID.finditer(text):
        if cn_id_valid(m.group().replace(" ", "")):
            yield m.span()


def _api_key(text: str, public_ip_only: bool) -> Iterable[tuple[int, int]]:
    spans = [m.span() for m in _API_KEY.finditer(text)]
    spans += [m.span(1) for m in _AWS_SECRET.finditer(text)]  # an AWS secret has no prefix: only its setting names it
    return sorted(spans)


def _bank_card(text: str, public_ip_only: bool) -> Iterable[tuple[int, int]]:
    for m in _CARD.finditer(text):
        s = m.group()
        d = s.replace(" ", "").replace("-", "")
        if not (13 <= len(d) <= 19 and _card_network(d) and luhn_valid(d)):
            continue
        if d == s and not (_CARD_WORDS.search(text, max(0, m.start() - 40), m.start())
                           or _CARD_WORDS.search(text, m.end(), m.end() + 20)):
            continue  # one run of digits: a card only where the text says so
        yield m.span()


def _regex(rx: re.Pattern) -> Callable:
    def find(text: str, public_ip_only: bool) -> Iterable[tuple[int, int]]:
        for m in rx.finditer(text):
            yield m.span()
    return find


FINDERS: dict[str, Callable] = {"email": _email, "ipv4": _ip_finder(_IPV4, ipaddress.IPv4Address),
                                "ipv6": _ip_finder(_IPV6, ipaddress.IPv6Address), "phone": _phone,
                                "cn_id": _cn_id, "bank_card": _bank_card, "credential": _regex(_CREDENTIAL),
                                "api_key": _api_key}
KIND_OF = {search: kind for kind, subs in SEARCHES.items() for search in subs}


def searches(kinds: Iterable[str]) -> list[str]:
    """The searches of ``kinds``, in the order that settles overlaps."""
    wanted = set(kinds)
    return [s for k in KINDS if k in wanted for s in SEARCHES[k]]


def find(text: str, kinds: Iterable[str] = DEFAULT_KINDS, public_ip_only: bool = True,
         only: Iterable[str] | None = None) -> list[Match]:
    """Every validated match of ``kinds`` in ``text``, without overlaps (earlier kinds of :data:`KINDS`
    win), in text order. ``only``: run just these searches (the ones whose prefilter matched)."""
    run = searches(kinds)
    if only is not None:
        only = set(only)
        run = [s for s in run if s in only]
    taken: list[Match] = []
    for search in run:
        kind = KIND_OF[search]
        for a, b in FINDERS[search](text, public_ip_only):
            if not any(a < t.end and t.start < b for t in taken):
                taken.append(Match(a, b, kind))
    taken.sort(key=lambda m: m.start)
    return taken


def mask_token(kind: str, value: str, mode: str, tokens: dict[str, str], salt: int = 0) -> str:
    token = tokens[kind]
    if mode == "hash":
        h = xxhash.xxh64_hexdigest(value.encode("utf-8", "surrogatepass"), seed=salt)[:8]
        return token[:-1] + ":" + h + token[-1] if token.endswith(">") else f"{token}:{h}"
    return token


def mask(text: str, matches: list[Match], mode: str = "token", tokens: dict[str, str] | None = None,
         salt: int = 0) -> str:
    """``text`` with every match replaced by its mask."""
    tokens = tokens or TOKENS
    out, pos = [], 0
    for m in matches:
        out.append(text[pos:m.start])
        out.append(mask_token(m.kind, text[m.start:m.end], mode, tokens, salt))
        pos = m.end
    out.append(text[pos:])
    return "".join(out)
