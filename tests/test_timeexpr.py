"""Time expressions → half-open ranges, against pinned reference times (no clock, no database)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from search.timeexpr import TimeRange, parse_time_expression, split_time_expression

JST = timezone(timedelta(hours=9))
NOW = datetime(2026, 11, 26, 21, 0, tzinfo=JST)  # a Thursday evening


def _at(text: str, tz: timezone = JST) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=tz)


def _parse(query: str, now: datetime = NOW, tz: str | None = None) -> TimeRange:
    found = parse_time_expression(query, now, tz)
    assert found is not None, query
    return found


def _check(query: str, start: str, end: str, now: datetime = NOW) -> None:
    found = _parse(query, now)
    offset = now.tzinfo
    assert isinstance(offset, timezone)
    assert (found.start, found.end) == (_at(start, offset), _at(end, offset)), query
    assert found.matched == query
    assert found.rest == ""


# (query, start, end) with NOW = Thursday 2026-11-26 21:00 +09:00.
JAPANESE = [
    ("今日", "2026-11-26", "2026-11-27"),
    ("本日", "2026-11-26", "2026-11-27"),
    ("昨日", "2026-11-25", "2026-11-26"),
    ("きのう", "2026-11-25", "2026-11-26"),
    ("一昨日", "2026-11-24", "2026-11-25"),
    ("おととい", "2026-11-24", "2026-11-25"),
    ("今朝", "2026-11-26 05:00", "2026-11-26 12:00"),
    ("今夜", "2026-11-26 18:00", "2026-11-27"),
    ("今晩", "2026-11-26 18:00", "2026-11-27"),
    ("昨夜", "2026-11-25 18:00", "2026-11-26"),
    ("昨日の朝", "2026-11-25 05:00", "2026-11-25 12:00"),
    ("昨日の午前", "2026-11-25", "2026-11-25 12:00"),
    ("昨日の昼", "2026-11-25 11:00", "2026-11-25 14:00"),
    ("昨日の午後", "2026-11-25 12:00", "2026-11-25 18:00"),
    ("昨日の夕方", "2026-11-25 16:00", "2026-11-25 19:00"),
    ("昨日の夜", "2026-11-25 18:00", "2026-11-26"),
    ("今週", "2026-11-23", "2026-11-30"),
    ("先週", "2026-11-16", "2026-11-23"),
    ("先々週", "2026-11-09", "2026-11-16"),
    ("先週末", "2026-11-21", "2026-11-23"),
    ("先週の火曜", "2026-11-17", "2026-11-18"),
    ("先週火曜日", "2026-11-17", "2026-11-18"),
    ("先週の火曜の夜", "2026-11-17 18:00", "2026-11-18"),
    ("今週の月曜", "2026-11-23", "2026-11-24"),
    ("火曜", "2026-11-24", "2026-11-25"),
    ("木曜日", "2026-11-26", "2026-11-27"),  # today is Thursday
    ("金曜の夜", "2026-11-20 18:00", "2026-11-21"),
    ("3日前", "2026-11-23", "2026-11-24"),
    ("三日前", "2026-11-23", "2026-11-24"),
    ("十日前", "2026-11-16", "2026-11-17"),
    ("３日前", "2026-11-23", "2026-11-24"),  # full-width digits
    ("1週間前", "2026-11-16", "2026-11-23"),
    ("2週間前", "2026-11-09", "2026-11-16"),  # the week holding 11-12
    ("3ヶ月前", "2026-08-01", "2026-09-01"),
    ("3か月前", "2026-08-01", "2026-09-01"),
    ("半年前", "2026-05-01", "2026-06-01"),
    ("2年前", "2024-01-01", "2025-01-01"),
    ("今月", "2026-11-01", "2026-12-01"),
    ("先月", "2026-10-01", "2026-11-01"),
    ("先々月", "2026-09-01", "2026-10-01"),
    ("今年", "2026-01-01", "2027-01-01"),
    ("去年", "2025-01-01", "2026-01-01"),
    ("昨年", "2025-01-01", "2026-01-01"),
    ("一昨年", "2024-01-01", "2025-01-01"),
    ("去年の夏", "2025-06-01", "2025-09-01"),
    ("今年の春", "2026-03-01", "2026-06-01"),
    ("去年の冬", "2025-12-01", "2026-03-01"),
    ("2024年の秋", "2024-09-01", "2024-12-01"),
    ("2024年", "2024-01-01", "2025-01-01"),
    ("2024年3月", "2024-03-01", "2024-04-01"),
    ("２０２４年３月", "2024-03-01", "2024-04-01"),
    ("2024年3月5日", "2024-03-05", "2024-03-06"),
    ("去年の3月", "2025-03-01", "2025-04-01"),
    ("去年の11月24日", "2025-11-24", "2025-11-25"),
    ("3月", "2026-03-01", "2026-04-01"),
    ("12月", "2025-12-01", "2026-01-01"),  # no December yet this year: last year's
    ("11月24日", "2026-11-24", "2026-11-25"),
    ("12月24日", "2025-12-24", "2025-12-25"),
    ("3月5日の午後", "2026-03-05 12:00", "2026-03-05 18:00"),
    ("11月24日の夜", "2026-11-24 18:00", "2026-11-25"),
]

ENGLISH = [
    ("today", "2026-11-26", "2026-11-27"),
    ("yesterday", "2026-11-25", "2026-11-26"),
    ("the day before yesterday", "2026-11-24", "2026-11-25"),
    ("this morning", "2026-11-26 05:00", "2026-11-26 12:00"),
    ("this afternoon", "2026-11-26 12:00", "2026-11-26 18:00"),
    ("this evening", "2026-11-26 18:00", "2026-11-27"),
    ("tonight", "2026-11-26 18:00", "2026-11-27"),
    ("last night", "2026-11-25 18:00", "2026-11-26"),
    ("yesterday afternoon", "2026-11-25 12:00", "2026-11-25 18:00"),
    ("Yesterday Evening", "2026-11-25 18:00", "2026-11-26"),
    ("this week", "2026-11-23", "2026-11-30"),
    ("last week", "2026-11-16", "2026-11-23"),
    ("the week before last", "2026-11-09", "2026-11-16"),
    ("last weekend", "2026-11-21", "2026-11-23"),
    ("last Tuesday", "2026-11-24", "2026-11-25"),  # the latest Tuesday before today
    ("last Thursday", "2026-11-19", "2026-11-20"),  # strictly before today
    ("last Tuesday evening", "2026-11-24 18:00", "2026-11-25"),
    ("Tuesday night", "2026-11-24 18:00", "2026-11-25"),
    ("on Thursday", "2026-11-26", "2026-11-27"),
    ("this Monday", "2026-11-23", "2026-11-24"),
    ("3 days ago", "2026-11-23", "2026-11-24"),
    ("a week ago", "2026-11-16", "2026-11-23"),
    ("two weeks ago", "2026-11-09", "2026-11-16"),
    ("a month ago", "2026-10-01", "2026-11-01"),
    ("six months ago", "2026-05-01", "2026-06-01"),
    ("half a year ago", "2026-05-01", "2026-06-01"),
    ("2 years ago", "2024-01-01", "2025-01-01"),
    ("this month", "2026-11-01", "2026-12-01"),
    ("last month", "2026-10-01", "2026-11-01"),
    ("this year", "2026-01-01", "2027-01-01"),
    ("last year", "2025-01-01", "2026-01-01"),
    ("last summer", "2026-06-01", "2026-09-01"),  # the latest summer that has ended
    ("last autumn", "2025-09-01", "2025-12-01"),  # this autumn runs until 12-01
    ("last winter", "2025-12-01", "2026-03-01"),
    ("this summer", "2026-06-01", "2026-09-01"),
    ("summer 2024", "2024-06-01", "2024-09-01"),
    ("the summer of 2024", "2024-06-01", "2024-09-01"),
    ("March 2024", "2024-03-01", "2024-04-01"),
    ("in March 2024", "2024-03-01", "2024-04-01"),
    ("in March", "2026-03-01", "2026-04-01"),
    ("in December", "2025-12-01", "2026-01-01"),
    ("in November", "2026-11-01", "2026-12-01"),
    ("last November", "2025-11-01", "2025-12-01"),
    ("2024-03", "2024-03-01", "2024-04-01"),
    ("2024/3", "2024-03-01", "2024-04-01"),
    ("2024-03-05", "2024-03-05", "2024-03-06"),
    ("2024/03/05", "2024-03-05", "2024-03-06"),
    ("2024.03.05", "2024-03-05", "2024-03-06"),
    ("March 5", "2026-03-05", "2026-03-06"),
    ("March 5th, 2024", "2024-03-05", "2024-03-06"),
    ("5 March 2024", "2024-03-05", "2024-03-06"),
    ("the 24th of December", "2025-12-24", "2025-12-25"),
    ("Dec 24", "2025-12-24", "2025-12-25"),
    ("May 5", "2026-05-05", "2026-05-06"),
    ("in 2024", "2024-01-01", "2025-01-01"),
    ("during 2023", "2023-01-01", "2024-01-01"),
]


@pytest.mark.parametrize(("query", "start", "end"), JAPANESE)
def test_japanese(query: str, start: str, end: str) -> None:
    _check(query, start, end)


@pytest.mark.parametrize(("query", "start", "end"), ENGLISH)
def test_english(query: str, start: str, end: str) -> None:
    _check(query, start, end)


@pytest.mark.parametrize(
    ("now", "query", "start", "end"),
    [
        # a month boundary: Sunday 2026-03-01
        ("2026-03-01 10:00", "昨日", "2026-02-28", "2026-03-01"),
        ("2026-03-01 10:00", "3日前", "2026-02-26", "2026-02-27"),
        ("2026-03-01 10:00", "先月", "2026-02-01", "2026-03-01"),
        ("2026-03-01 10:00", "先週", "2026-02-16", "2026-02-23"),
        ("2026-03-01 10:00", "今週", "2026-02-23", "2026-03-02"),
        ("2026-03-01 10:00", "last winter", "2025-12-01", "2026-03-01"),
        # a year boundary: Friday 2027-01-01
        ("2027-01-01 09:00", "昨日", "2026-12-31", "2027-01-01"),
        ("2027-01-01 09:00", "先月", "2026-12-01", "2027-01-01"),
        ("2027-01-01 09:00", "去年", "2026-01-01", "2027-01-01"),
        ("2027-01-01 09:00", "last week", "2026-12-21", "2026-12-28"),
        ("2027-01-01 09:00", "今週", "2026-12-28", "2027-01-04"),
        ("2027-01-01 09:00", "12月24日", "2026-12-24", "2026-12-25"),
        ("2027-01-01 09:00", "半年前", "2026-07-01", "2026-08-01"),
        ("2027-01-01 09:00", "3ヶ月前", "2026-10-01", "2026-11-01"),
        ("2027-01-01 09:00", "this winter", "2026-12-01", "2027-03-01"),
        ("2027-01-01 09:00", "今年の冬", "2026-12-01", "2027-03-01"),
        ("2027-01-01 09:00", "last March", "2026-03-01", "2026-04-01"),
        # 先週の火曜 when today is Monday 2026-11-30
        ("2026-11-30 10:00", "先週の火曜", "2026-11-24", "2026-11-25"),
        ("2026-11-30 10:00", "last Tuesday", "2026-11-24", "2026-11-25"),
        ("2026-11-30 10:00", "火曜", "2026-11-24", "2026-11-25"),
        ("2026-11-30 10:00", "先週", "2026-11-23", "2026-11-30"),
        ("2026-11-30 10:00", "今週", "2026-11-30", "2026-12-07"),
        ("2026-11-30 10:00", "last weekend", "2026-11-28", "2026-11-30"),
        # ... and when today is Tuesday 2026-12-01
        ("2026-12-01 10:00", "先週の火曜", "2026-11-24", "2026-11-25"),
        ("2026-12-01 10:00", "last Tuesday", "2026-11-24", "2026-11-25"),
        ("2026-12-01 10:00", "火曜", "2026-12-01", "2026-12-02"),
        ("2026-12-01 10:00", "this Tuesday", "2026-12-01", "2026-12-02"),
        # leap years
        ("2028-03-01 10:00", "昨日", "2028-02-29", "2028-03-01"),
        ("2028-03-01 10:00", "2月29日", "2028-02-29", "2028-03-01"),
        ("2026-11-26 10:00", "2月29日", "2024-02-29", "2024-03-01"),
        ("2026-11-26 10:00", "Feb 29", "2024-02-29", "2024-03-01"),
        ("2026-11-26 10:00", "2024-02-29", "2024-02-29", "2024-03-01"),
        ("2028-02-29 10:00", "a year ago", "2027-01-01", "2028-01-01"),
        # in summer, "last summer" is last year's
        ("2026-07-15 10:00", "last summer", "2025-06-01", "2025-09-01"),
        ("2026-09-01 00:00", "last summer", "2026-06-01", "2026-09-01"),
    ],
)
def test_edges(now: str, query: str, start: str, end: str) -> None:
    _check(query, start, end, _at(now))


def test_the_calendar_is_the_reference_times_own_offset() -> None:
    now = datetime(2026, 11, 26, 20, 0, tzinfo=UTC)  # already Friday 05:00 in Tokyo
    assert _parse("昨日", now).start == datetime(2026, 11, 25, tzinfo=UTC)
    assert _parse("yesterday", now).end == datetime(2026, 11, 26, tzinfo=UTC)
    assert _parse("先週", now).start == datetime(2026, 11, 16, tzinfo=UTC)


def test_a_zone_name_replaces_the_offset() -> None:
    now = datetime(2026, 11, 26, 20, 0, tzinfo=UTC)
    found = _parse("昨日", now, tz="Asia/Tokyo")
    assert found.start == _at("2026-11-26") and found.end == _at("2026-11-27")
    assert found.start.utcoffset() == timedelta(hours=9)
    assert _parse("last Thursday", now, tz="Asia/Tokyo").start == _at("2026-11-26")


def test_a_day_across_a_dst_change_lasts_25_hours() -> None:
    now = datetime(2026, 11, 2, 12, 0, tzinfo=UTC)  # New York left DST on 2026-11-01
    found = _parse("yesterday", now, tz="America/New_York")
    assert found.start.utcoffset() == timedelta(hours=-4)
    assert found.end.utcoffset() == timedelta(hours=-5)
    assert found.end.astimezone(UTC) - found.start.astimezone(UTC) == timedelta(hours=25)


@pytest.mark.parametrize(
    ("query", "matched", "rest"),
    [
        ("先週の火曜の夜に何を決めた？", "先週の火曜の夜", "何を決めた？"),
        ("what did I decide last Tuesday evening?", "last Tuesday evening", "what did I decide ?"),
        ("会議で昨日決めたこと", "昨日", "会議で 決めたこと"),
        ("去年の夏の旅行", "去年の夏", "旅行"),
        ("2024年3月に話したPostgreSQLの件", "2024年3月", "話したPostgreSQLの件"),
        ("what happened in 2024 with the move", "in 2024", "what happened with the move"),
        ("notes from yesterday", "yesterday", "notes"),
        ("today's plan", "today", "plan"),
        ("last weekのmeeting", "last week", "meeting"),
        ("meeting on 2024-03-05 about rent", "2024-03-05", "meeting about rent"),
        ("11月24日は何をした", "11月24日", "何をした"),
    ],
)
def test_matched_and_rest(query: str, matched: str, rest: str) -> None:
    found = _parse(query)
    assert found.matched == matched
    assert query[found.span[0] : found.span[1]] == matched
    assert found.rest == rest
    assert split_time_expression(query, NOW) == (found, rest)


def test_the_longest_expression_wins_then_the_leftmost() -> None:
    assert _parse("昨日と先週の火曜").matched == "先週の火曜"
    assert _parse("昨日と今日").matched == "昨日"


@pytest.mark.parametrize(
    "query",
    [
        "PostgreSQLの設定",
        "Spring Boot migration",
        "fall back to the old plan",
        "the May release plan",
        "may I ask about march madness",
        "python 3.11 upgrade",
        "version 2024.1",
        "gpt-4 turbo",
        "top 10 list",
        "2 of 3",
        "3/5の会議",
        "1000件",
        "2023年2月29日",  # not a date: no range, rather than another day
        "2023-02-29",
        "明日の予定",  # future only: content, not when it was said
        "来週の出張",
        "tomorrow",
        "next week",
        "in 3 days",
        "",
    ],
)
def test_no_time_expression(query: str) -> None:
    assert parse_time_expression(query, NOW) is None
    assert split_time_expression(query, NOW) == (None, query)


@pytest.mark.parametrize(
    ("query", "day", "matched", "rest"),
    [
        ("a fortnight ago", "2026-11-12", "a fortnight ago", ""),
        ("3 hours ago", "2026-11-26", "3 hours ago", ""),
        ("30分前の話", "2026-11-26", "30分前", "話"),
        ("June the 5th", "2026-06-05", "June the 5th", ""),
    ],
)
def test_dateparser_fallback_gives_the_day_holding_its_point(
    query: str, day: str, matched: str, rest: str
) -> None:
    found = _parse(query)  # filterwarnings=error: the module keeps dateparser's warnings in
    assert found.source == "dateparser"
    assert (found.start, found.end) == (_at(day), _at(day) + timedelta(days=1))
    assert (found.matched, found.rest) == (matched, rest)


def test_rules_report_their_source() -> None:
    assert _parse("先週").source == "rule"


def test_the_reference_time_must_be_aware() -> None:
    with pytest.raises(ValueError, match="tz-aware"):
        parse_time_expression("昨日", datetime(2026, 11, 26, 21, 0))


def test_an_unknown_zone_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown time zone"):
        parse_time_expression("昨日", NOW, tz="Mars/Olympus_Mons")


def test_a_range_serialises_for_json_output() -> None:
    dumped = _parse("昨日").model_dump(mode="json")
    assert dumped["start"] == "2026-11-25T00:00:00+09:00"
    assert dumped["end"] == "2026-11-26T00:00:00+09:00"


_WORDS = [
    "昨日",
    "先週の",
    "火曜",
    "の夜",
    "に",
    "何を",
    "決めた",
    "last",
    "Tuesday",
    "evening",
    "3",
    "日前",
    "2024",
    "年",
    "月",
    "-03",
    "ago",
    "weeks",
    " ",
    "？",
    "in",
    "May",
    "summer",
]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.sampled_from(_WORDS), max_size=8).map("".join))
def test_any_query_gives_none_or_a_consistent_range(query: str) -> None:
    found = parse_time_expression(query, NOW)
    if found is None:
        return
    s, e = found.span
    assert query[s:e] == found.matched and found.matched.strip()
    assert found.start < found.end
    assert found.start.tzinfo is not None and found.end.tzinfo is not None
