"""Time expressions in a query become a half-open range ``[start, end)`` (seed 004's backbone).

Pure: no clock, no environment. The caller passes the reference time (``--now`` or the current
time, tz-aware) and, optionally, a zone name (``PMEM_TZ``, read by the caller). The calendar is
the reference time's own offset unless a zone name is given.

A rule layer (Japanese and English) comes first; ``dateparser`` (``languages=['ja', 'en']``,
``RELATIVE_BASE`` = the reference time) is the fallback, and its point becomes the day holding
it. Only one expression is taken from a query: the longest, then the leftmost.

Ranges (D = the reference day in the calendar zone; weeks start on Monday):

===========================================  ==================================================
今日 本日 today                               [D, D+1)
昨日 / 一昨日 yesterday / day before yesterday  the calendar day
今朝 this morning                             D 05:00–12:00
this afternoon                                D 12:00–18:00
今夜 今晩 tonight this evening                 D 18:00–24:00
昨夜 昨晩 ゆうべ last night                     D-1 18:00–24:00
今週 / 先週 / 先々週, this / last week,         the Monday-start week
  the week before last
先週末 / 今週末, last / this weekend           Saturday 00:00 to Monday 00:00 of that week
先週の火曜 / 今週の火曜, this Tuesday          that day of that week
火曜 (日), Tuesday, on Tuesday                the latest Tuesday on or before D
last Tuesday                                  the latest Tuesday strictly before D
N日前 / N days ago                            that calendar day
N週間前 / N weeks ago                         the Monday-start week holding D-7N
Nヶ月前 / N months ago; 半年前 half a year ago the calendar month N (six) months back
N年前 / N years ago                           the calendar year N back
先月 今月 先々月, last / this month            the calendar month
去年 昨年 一昨年 今年, last / this year         the calendar year
2024年, in 2024                               that year
2024年3月, March 2024, 2024-03, in March 2024  that month
2024-03-05, 2024年3月5日, March 5 2024          that day
3月, in March, last March                     the latest March starting on or before D
                                              (last March: strictly before D's month)
11月24日, March 5, 5 March                     the latest such day on or before D
去年の夏, summer 2024                          the season of that year
this summer / 今年の夏                         the season of this year
last summer                                   the latest summer that ended on or before D
===========================================  ==================================================

Seasons by month: spring Mar–May, summer Jun–Aug, autumn Sep–Nov, winter Dec–Feb; a winter
belongs to the year of its December (去年の冬 in 2026 = Dec 2025–Feb 2026; "this winter" in
January = the winter in progress).

A part of the day may follow any one-day expression (昨日の夜, 先週の火曜の夜, 3月5日の午後,
yesterday evening, last Tuesday night): 朝 / morning 05–12, 午前 00–12, 昼 11–14,
午後 / afternoon 12–18, 夕方 16–19, 夜 晩 / evening night 18–24.

Explicit expressions are honoured even when they reach past the reference time (today, 今週,
今週の金曜); future-only words (明日, 来週, tomorrow, next week) are not matched, because recall
looks back and "next week's plan" names content, not when it was said: they stay in ``rest``.
Unsupported: spans (から / まで, since / until), clock times, 先日, 数日前.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable
from datetime import date, datetime, timedelta, tzinfo
from typing import Literal, NamedTuple
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import BaseModel, ConfigDict

__all__ = ["TimeRange", "parse_time_expression", "split_time_expression"]


class TimeRange(BaseModel):
    """The range a query's time expression stands for, and the query without it."""

    model_config = ConfigDict(frozen=True)

    start: datetime  # tz-aware, inclusive
    end: datetime  # tz-aware, exclusive
    matched: str  # the expression as written in the query
    span: tuple[int, int]  # query[span[0]:span[1]] == matched
    rest: str  # the query without the expression, for the text search
    source: Literal["rule", "dateparser"]


def parse_time_expression(query: str, now: datetime, tz: str | None = None) -> TimeRange | None:
    """The time expression in ``query`` as a range, or None when there is none.

    ``now`` must be tz-aware; ``tz`` (an IANA name) replaces its offset as the calendar.
    """
    if now.tzinfo is None or now.utcoffset() is None:
        raise ValueError("the reference time must be tz-aware")
    zone = _zone(tz) if tz else now.tzinfo
    wall = now.astimezone(zone).replace(tzinfo=None)
    text = query.translate(_HALF_WIDTH)  # same length, so spans index the original query
    ctx = _Ctx(wall.date(), wall)
    source: Literal["rule", "dateparser"] = "rule"
    found = _rules(text, ctx)
    if found is None:
        source, found = "dateparser", _fallback(text, ctx, zone)
    if found is None:
        return None
    s, e = found.span
    return TimeRange(
        start=found.start.replace(tzinfo=zone),
        end=found.end.replace(tzinfo=zone),
        matched=query[s:e],
        span=(s, e),
        rest=_rest(query, s, e),
        source=source,
    )


def split_time_expression(
    query: str, now: datetime, tz: str | None = None
) -> tuple[TimeRange | None, str]:
    """``(range, text to search)``; the text is the whole query when there is no expression."""
    found = parse_time_expression(query, now, tz)
    return (found, found.rest) if found else (None, query)


# -- internals ----------------------------------------------------------------------------------


class _Ctx(NamedTuple):
    today: date
    now: datetime  # naive wall time in the calendar zone


class _Found(NamedTuple):
    start: datetime  # naive wall time
    end: datetime
    span: tuple[int, int]
    one_day: bool = False  # a part of the day may narrow it


_Hit = tuple[datetime, datetime, bool]
_Handler = Callable[[re.Match[str], _Ctx], _Hit | None]

_HALF_WIDTH = {0xFF01 + i: 0x21 + i for i in range(94)} | {0x3000: 0x20}
_B, _E = r"(?<![a-z0-9])", r"(?![a-z0-9])"  # word edges that also hold next to CJK text
_ALNUM = re.compile(r"[a-z0-9]", re.I)
_DIGIT = re.compile(r"[0-9]")

_JP_WD = {c: i for i, c in enumerate("月火水木金土日")}
_EN_WD = {
    n: i
    for i, n in enumerate(
        ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
    )
}
_MONTHS = {
    n: i % 12 + 1
    for i, n in enumerate(
        (
            "january",
            "february",
            "march",
            "april",
            "may",
            "june",
            "july",
            "august",
            "september",
            "october",
            "november",
            "december",
            "jan",
            "feb",
            "mar",
            "apr",
            "may",
            "jun",
            "jul",
            "aug",
            "sep",
            "oct",
            "nov",
            "dec",
        )
    )
} | {"sept": 9}
_MONTH_RE = "|".join(sorted(_MONTHS, key=len, reverse=True))
_SEASONS = {
    "spring": 3,
    "summer": 6,
    "autumn": 9,
    "fall": 9,
    "winter": 12,
    "春": 3,
    "夏": 6,
    "秋": 9,
    "冬": 12,
}
_EN_NUM = {
    w: i
    for i, w in enumerate(
        (
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
        )
    )
} | {"a": 1, "an": 1}
_DAYS_BACK = {"一昨日": 2, "おととい": 2, "おとつい": 2, "昨日": 1, "きのう": 1, "yesterday": 1}
_WEEKS_BACK = {"今週": 0, "先週": 1, "先々週": 2}
_UNITS = {
    "日": "day",
    "day": "day",
    "週間": "week",
    "週": "week",
    "week": "week",
    "年": "year",
    "year": "year",
    "month": "month",
}
_PARTS = {
    "朝": (5, 12),
    "morning": (5, 12),
    "午前": (0, 12),
    "午前中": (0, 12),
    "昼": (11, 14),
    "お昼": (11, 14),
    "午後": (12, 18),
    "afternoon": (12, 18),
    "夕方": (16, 19),
    "夜": (18, 24),
    "晩": (18, 24),
    "evening": (18, 24),
    "night": (18, 24),
}
_JP_PART = re.compile(r"\s*の?\s*(午前中|午前|午後|お昼|昼|朝|夕方|夜|晩)")
_EN_PART = re.compile(r"\s+(?:in\s+the\s+)?(morning|afternoon|evening|night)" + _E, re.I)
_ENDS_IN_PREP = re.compile(r"(?:^|(?<=\s))(?:in|on|at|during|of|from)\s*$", re.I)
_STARTS_WITH_PARTICLE = re.compile(
    r"^\s*(?:'s(?![a-z])|には|では|にて|から|まで|に|の|は|で|も|、|,)"
)


def _zone(name: str) -> tzinfo:
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise ValueError(f"unknown time zone {name!r}") from exc


def _num(s: str) -> int:
    s = s.lower()
    if s.isascii() and s.isdigit():
        return int(s)
    if s in _EN_NUM:
        return _EN_NUM[s]
    digits = ["一二三四五六七八九".index(c) + 1 if c != "十" else 10 for c in s]
    if "十" not in s:
        return int("".join(map(str, digits)))
    tens, _, ones = s.partition("十")
    return (_num(tens) if tens else 1) * 10 + (_num(ones) if ones else 0)


def _at(d: date, hour: int = 0) -> datetime:
    return datetime(d.year, d.month, d.day) + timedelta(hours=hour)


def _day(d: date) -> _Hit:
    return _at(d), _at(d + timedelta(days=1)), True


def _hours(d: date, part: tuple[int, int]) -> _Hit:
    return _at(d, part[0]), _at(d, part[1]), False


def _monday(d: date) -> date:
    return d - timedelta(days=d.weekday())


def _week(d: date) -> _Hit:
    m = _monday(d)
    return _at(m), _at(m + timedelta(days=7)), False


def _shift(y: int, m: int, n: int) -> tuple[int, int]:
    q, r = divmod(m - 1 + n, 12)
    return y + q, r + 1


def _months(y: int, m: int, count: int = 1) -> _Hit:
    return datetime(y, m, 1), datetime(*_shift(y, m, count), 1), False


def _year(y: int) -> _Hit:
    return datetime(y, 1, 1), datetime(y + 1, 1, 1), False


def _season(name: str, y: int) -> _Hit:
    return _months(y, _SEASONS[name], 3)


def _latest_day(m: int, d: int, today: date) -> date | None:
    """The latest m/d on or before today (eight years back at most, for 2月29日)."""
    y = today.year if (m, d) <= (today.month, today.day) else today.year - 1
    for year in range(y, y - 8, -1):
        try:
            return date(year, m, d)
        except ValueError:
            continue
    return None


def _latest_weekday(wd: int, today: date, strict: bool) -> date:
    back = (today.weekday() - wd) % 7
    return today - timedelta(days=back or (7 if strict else 0))


# -- the rules ------------------------------------------------------------------------------------

_RULES: list[tuple[re.Pattern[str], _Handler]] = []


def _rule(pattern: str) -> Callable[[_Handler], _Handler]:
    def register(fn: _Handler) -> _Handler:
        _RULES.append((re.compile(pattern, re.I), fn))
        return fn

    return register


@_rule(
    r"一昨日|おととい|おとつい|昨日|きのう|今日|本日|"
    + _B
    + r"(?:(?:the\s+)?day\s+before\s+yesterday|yesterday|today)"
    + _E
)
def _jp_en_day(m: re.Match[str], c: _Ctx) -> _Hit:
    w = m[0].lower()
    back = 2 if "before" in w else _DAYS_BACK.get(w, 0)
    return _day(c.today - timedelta(days=back))


@_rule(
    r"今朝|今夜|今晩|昨夜|昨晩|ゆうべ|"
    + _B
    + r"(?:this\s+(?:morning|afternoon|evening)|tonight|last\s+night)"
    + _E
)
def _part_of_today(m: re.Match[str], c: _Ctx) -> _Hit:
    w = m[0].lower()
    if w in ("昨夜", "昨晩", "ゆうべ") or w.startswith("last"):
        return _hours(c.today - timedelta(days=1), (18, 24))
    key = "朝" if (w == "今朝" or "morning" in w) else "afternoon" if "afternoon" in w else "夜"
    return _hours(c.today, _PARTS[key])


@_rule(r"(?P<w>先々週|先週|今週)(?:(?P<end>末)|の?(?P<wd>[月火水木金土日])曜日?)?")
def _jp_week(m: re.Match[str], c: _Ctx) -> _Hit:
    base = _monday(c.today) - timedelta(days=7 * _WEEKS_BACK[m["w"]])
    if m["end"]:
        return _at(base + timedelta(days=5)), _at(base + timedelta(days=7)), False
    if m["wd"]:
        return _day(base + timedelta(days=_JP_WD[m["wd"]]))
    return _week(base)


@_rule(r"(?P<wd>[月火水木金土日])曜日?")
def _jp_weekday(m: re.Match[str], c: _Ctx) -> _Hit:
    return _day(_latest_weekday(_JP_WD[m["wd"]], c.today, strict=False))


@_rule(_B + r"(?:(?P<q>last|this|on)\s+)?(?P<wd>" + "|".join(_EN_WD) + ")" + _E)
def _en_weekday(m: re.Match[str], c: _Ctx) -> _Hit:
    wd, q = _EN_WD[m["wd"].lower()], (m["q"] or "").lower()
    if q == "this":
        return _day(_monday(c.today) + timedelta(days=wd))
    return _day(_latest_weekday(wd, c.today, strict=q == "last"))


@_rule(
    r"(?P<n>\d+|[一二三四五六七八九十]+)\s*(?P<u>日|週間|週|[ヶかカケヵ箇]月|年)前|半年前|"
    + _B
    + r"(?:(?P<en>\d+|an?|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve)"
    r"\s+(?P<eu>day|week|month|year)s?|half\s+a\s+year)\s+ago" + _E
)
def _ago(m: re.Match[str], c: _Ctx) -> _Hit:
    if m["n"] is None and m["en"] is None:  # 半年前, half a year ago
        return _months(*_shift(c.today.year, c.today.month, -6))
    n, unit = _num(m["n"] or m["en"]), (m["u"] or m["eu"]).lower()
    unit = "month" if unit.endswith("月") else _UNITS[unit]
    if unit == "day":
        return _day(c.today - timedelta(days=n))
    if unit == "week":
        return _week(c.today - timedelta(days=7 * n))
    if unit == "month":
        return _months(*_shift(c.today.year, c.today.month, -n))
    return _year(c.today.year - n)


@_rule(
    r"先々月|先月|今月|" + _B + r"(?:(?:the\s+)?week\s+before\s+last|"
    r"(?P<q>this|last)\s+(?P<u>week|weekend|month|year))" + _E
)
def _relative_unit(m: re.Match[str], c: _Ctx) -> _Hit:
    w = m[0].lower()
    if m["u"] is None and "week" in w:  # the week before last
        return _week(c.today - timedelta(days=14))
    back = int(m["q"].lower() == "last") if m["q"] else {"今月": 0, "先月": 1, "先々月": 2}[w]
    unit = (m["u"] or "month").lower()
    if unit == "week":
        return _week(c.today - timedelta(days=7 * back))
    if unit == "weekend":
        sat = _monday(c.today) - timedelta(days=7 * back - 5)
        return _at(sat), _at(sat + timedelta(days=2)), False
    if unit == "month":
        return _months(*_shift(c.today.year, c.today.month, -back))
    return _year(c.today.year - back)


@_rule(
    r"(?P<y>(?<!\d)\d{4}年|一昨年|おととし|去年|昨年|今年|本年)"
    r"(?:の?(?P<s>春|夏|秋|冬)|の?(?P<m>\d{1,2})月(?:(?P<d>\d{1,2})日)?)?"
)
def _jp_year(m: re.Match[str], c: _Ctx) -> _Hit | None:
    y = m["y"]
    year = (
        int(y[:-1])
        if y[0].isdigit()
        else c.today.year
        - {"今年": 0, "本年": 0, "去年": 1, "昨年": 1, "一昨年": 2, "おととし": 2}[y]
    )
    if m["s"]:
        if m["s"] == "冬" and y in ("今年", "本年") and c.today.month <= 2:
            year -= 1  # 今年の冬 in January: the winter in progress
        return _season(m["s"], year)
    if m["m"]:
        return _date_or_month(year, int(m["m"]), m["d"])
    return _year(year)


@_rule(r"(?<![\d年])(?P<m>\d{1,2})月(?:(?P<d>\d{1,2})日)?")
def _jp_month_day(m: re.Match[str], c: _Ctx) -> _Hit | None:
    month = int(m["m"])
    if not 1 <= month <= 12:
        return None
    if m["d"]:
        d = _latest_day(month, int(m["d"]), c.today)
        return _day(d) if d else None
    return _months(c.today.year - (month > c.today.month), month)


@_rule(r"(?<![\d.])(?P<y>\d{4})(?P<sep>[-/.])(?P<m>\d{1,2})(?:(?P=sep)(?P<d>\d{1,2}))?(?![\d.])")
def _iso(m: re.Match[str], c: _Ctx) -> _Hit | None:
    if m["sep"] == "." and m["d"] is None:
        return None  # 2024.1 is a version far more often than a month
    return _date_or_month(int(m["y"]), int(m["m"]), m["d"])


def _date_or_month(y: int, month: int, day: str | None) -> _Hit | None:
    if not 1 <= month <= 12:
        return None
    if day is None:
        return _months(y, month)
    try:
        return _day(date(y, month, int(day)))
    except ValueError:  # 2023-02-29: not a date, and not silently another one
        return None


@_rule(
    _B + rf"(?:(?P<mon>{_MONTH_RE})\.?\s+(?P<d>\d{{1,2}})(?:st|nd|rd|th)?"
    rf"|(?:the\s+)?(?P<d2>\d{{1,2}})(?:st|nd|rd|th)?\s+(?:of\s+)?(?P<mon2>{_MONTH_RE})\.?)"
    r"(?:,?\s+(?P<y>\d{4}))?" + _E
)
def _en_month_day(m: re.Match[str], c: _Ctx) -> _Hit | None:
    mon, d = (m["mon"], m["d"]) if m["mon"] else (m["mon2"], m["d2"])
    if mon.lower() == "may" and mon != "May":  # the verb; the month is written "May"
        return None
    if m["y"]:
        return _date_or_month(int(m["y"]), _MONTHS[mon.lower()], d)
    found = _latest_day(_MONTHS[mon.lower()], int(d), c.today)
    return _day(found) if found else None


@_rule(
    _B + rf"(?:(?P<q>in|during|last|this)\s+)?(?:the\s+month\s+of\s+)?(?P<mon>{_MONTH_RE})\.?"
    r"(?:,?\s+(?:of\s+)?(?:(?P<y>\d{4})|(?P<ly>last|this)\s+year))?" + _E
)
def _en_month(m: re.Match[str], c: _Ctx) -> _Hit | None:
    mon, q = m["mon"], (m["q"] or "").lower()
    if not (q or m["y"] or m["ly"]) or (mon.lower() == "may" and mon != "May"):
        return None  # a bare "march" or "may" is too often a word
    month = _MONTHS[mon.lower()]
    if m["y"]:
        return _months(int(m["y"]), month)
    if m["ly"]:  # February last year, March this year
        return _months(c.today.year - (m["ly"].lower() == "last"), month)
    if q == "this":
        return _months(c.today.year, month)
    later = month > c.today.month or (q == "last" and month == c.today.month)
    return _months(c.today.year - later, month)


@_rule(
    _B + r"(?:(?P<q>last|this)\s+(?P<s>spring|summer|autumn|fall|winter)"
    r"|(?:the\s+)?(?P<s2>spring|summer|autumn|fall|winter)\s+(?:of\s+)?(?P<y>\d{4}))" + _E
)
def _en_season(m: re.Match[str], c: _Ctx) -> _Hit:
    if m["y"]:
        return _season(m["s2"].lower(), int(m["y"]))
    name, year = m["s"].lower(), c.today.year
    if m["q"].lower() == "this":
        return _season(name, year - (name == "winter" and c.today.month <= 2))
    while (hit := _season(name, year))[1] > _at(c.today):  # the latest that has ended
        year -= 1
    return hit


@_rule(_B + r"(?:in|during|the\s+year)\s+(?P<y>\d{4})(?![a-z0-9]|[-/.]\d)")
def _en_year(m: re.Match[str], c: _Ctx) -> _Hit:
    return _year(int(m["y"]))


def _rules(text: str, ctx: _Ctx) -> _Found | None:
    best: _Found | None = None
    for pattern, handler in _RULES:
        for m in pattern.finditer(text):
            try:
                hit = handler(m, ctx)
            except (ValueError, OverflowError):  # a year out of datetime's range
                hit = None
            if hit is None:
                continue
            found = _Found(hit[0], hit[1], m.span(), hit[2])
            if best is None or _better(found.span, best.span):
                best = found
    if best is None or not best.one_day:
        return best
    s, e = best.span
    part = _JP_PART.match(text, e) or _EN_PART.match(text, e)
    if part is None:
        return best
    h0, h1 = _PARTS[part[1].lower()]
    day = best.start.date()
    return _Found(_at(day, h0), _at(day, h1), (s, part.end()))


def _better(a: tuple[int, int], b: tuple[int, int]) -> bool:
    """Longest first, then leftmost."""
    return (a[1] - a[0], -a[0]) > (b[1] - b[0], -b[0])


_TRIM = re.compile(
    r"^(?:(?:about|around|the|on|in|at|of)\s+)+|(?:\s+(?:about|the|on|in|at|of))+$|[のにはで]+$",
    re.I,
)
# dateparser "finds" dates in version numbers, counts and words ("python 3.11", "top 10",
# "2 of 3", "gpt-4 t", "march madness"), so a hit counts only on word edges and with a past
# marker ("an hour ago", "30分前") or a spelled month beside a number ("June the 5th").
_PAST_MARKER = re.compile(_B + "ago" + _E + "|前", re.I)
_SPELLED_MONTH = re.compile(
    _B + "(?:" + "|".join(n for n in _MONTHS if len(n) > 3) + "|(?-i:May))" + _E, re.I
)


def could_fall_back(text: str) -> bool:
    """Whether dateparser could give a hit ``_fallback`` keeps: a kept hit lies on word edges
    and holds a past marker or a spelled month with a digit, so the whole text holds them too
    (a necessary condition, checked without dateparser)."""
    return bool(_PAST_MARKER.search(text) or (_SPELLED_MONTH.search(text) and _DIGIT.search(text)))


def _fallback(text: str, ctx: _Ctx, zone: tzinfo) -> _Found | None:
    """dateparser's first plausible point in the past, as the day holding it."""
    if not could_fall_back(text):
        return None  # no hit could count: dateparser is not even imported (~0.4 s at start-up)
    try:
        with warnings.catch_warnings():  # keep its deprecation noise out of filterwarnings=error
            warnings.simplefilter("ignore")
            from dateparser.search import search_dates

            hits = search_dates(
                text,
                languages=["ja", "en"],
                settings={
                    "RELATIVE_BASE": ctx.now,
                    "PREFER_DATES_FROM": "past",
                    "RETURN_AS_TIMEZONE_AWARE": False,
                },
            )
    except Exception:  # a third-party parser on free text: its failure means "none found"
        return None
    pos = 0
    for found_text, point in hits or []:
        core = _TRIM.sub("", found_text.strip())
        start = text.find(core, pos) if core else -1
        if start < 0:
            continue
        pos = start + len(core)
        if point.tzinfo is not None:
            point = point.astimezone(zone).replace(tzinfo=None)
        on_edges = not (_ALNUM.match(text[start - 1 : start]) or _ALNUM.match(text[pos : pos + 1]))
        plausible = _PAST_MARKER.search(core) or (
            _SPELLED_MONTH.search(core) and _DIGIT.search(core)
        )
        if not (on_edges and plausible) or point.date() > ctx.today:
            continue  # noise (see above), or the future: 明日, in 3 days
        day_start, day_end, _ = _day(point.date())
        return _Found(day_start, day_end, (start, start + len(core)))
    return None


def _rest(query: str, s: int, e: int) -> str:
    before = _ENDS_IN_PREP.sub("", query[:s])
    after = _STARTS_WITH_PARTICLE.sub("", query[e:])
    return " ".join(f"{before} {after}".split())
