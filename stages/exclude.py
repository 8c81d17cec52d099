"""Exclusion rules: conversations the owner does not want drafted (so never sent to a model).

One rule per ``--exclude`` (repeatable); a conversation matching any rule is left out of every
batch, counted, and never loaded for a drafter::

    key:<conversation key or glob>   key:chatgpt:6812c0f1-…   key:claude:*
    title:<glob>                     title:*病院*   title:'tax return ?'   (case-insensitive, NFKC)
    before:<date>                    created before 2024-01-01 (that day not included)
    after:<date>                     created after 2024-06-30 (that day not included)
    range:<date>..<date>             created within both days, inclusive; one side may be empty

A date is ``YYYY-MM-DD`` (a whole day, UTC), or an ISO 8601 time with an offset
(``2024-05-01T09:00+09:00``) for an exact instant. A conversation is dated by its creation time
(its update time when the export has none); one with neither matches no date rule. Globs use
``*`` (any run of characters), ``?`` (one character) and ``[…]`` (one of a set), as in the shell:
quote them so the shell does not expand them.
"""

from __future__ import annotations

import fnmatch
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Literal

from core.errors import ConfigError

Kind = Literal["key", "title", "before", "after", "range"]
KINDS: tuple[Kind, ...] = ("key", "title", "before", "after", "range")
SYNTAX = "key:KEY-OR-GLOB, title:GLOB, before:DATE, after:DATE or range:DATE..DATE"


@dataclass(frozen=True)
class ExcludeRule:
    kind: Kind
    text: str  # the rule as the owner wrote it (kind:value), kept in the consent record
    pattern: re.Pattern[str] | None = None  # key, title
    start: datetime | None = None  # excluded from (inclusive)
    end: datetime | None = None  # excluded until (exclusive)

    def matches(self, key: str, title: str | None, created_at: datetime | None) -> bool:
        if self.kind == "key":
            assert self.pattern is not None
            return self.pattern.fullmatch(key) is not None
        if self.kind == "title":
            assert self.pattern is not None
            return self.pattern.fullmatch(_fold(title or "")) is not None
        if created_at is None:
            return False
        when = created_at if created_at.tzinfo else created_at.replace(tzinfo=UTC)
        return (self.start is None or when >= self.start) and (self.end is None or when < self.end)


def _fold(text: str) -> str:
    return unicodedata.normalize("NFKC", text).casefold()


def _glob(pattern: str, *, fold: bool) -> re.Pattern[str]:
    return re.compile(fnmatch.translate(_fold(pattern) if fold else pattern), re.DOTALL)


def _bound(value: str, rule: str, *, end_of_day: bool) -> tuple[datetime, bool]:
    """(instant, was a whole day). A whole day starts at 00:00 UTC; ``end_of_day`` gives the
    start of the next day instead."""
    value = value.strip()
    try:
        if re.fullmatch(r"\d{4}-\d{2}-\d{2}", value):
            day = datetime.combine(date.fromisoformat(value), time(), tzinfo=UTC)
            return (day + timedelta(days=1) if end_of_day else day), True
        when = datetime.fromisoformat(value)
    except ValueError:
        raise ConfigError(
            f"--exclude {rule!r}: {value!r} is not a date",
            hint="write dates as YYYY-MM-DD or an ISO time with an offset, e.g. 2024-05-01T09:00+09:00",
        ) from None
    if when.tzinfo is None:
        raise ConfigError(
            f"--exclude {rule!r}: the time {value!r} needs an offset (e.g. +09:00 or Z)"
        )
    return when, False


def parse_rule(text: str) -> ExcludeRule:
    """One ``--exclude`` value; a ConfigError names the rule and the syntax when it is wrong."""
    kind, sep, value = text.strip().partition(":")
    kind = kind.strip().lower()
    if not sep or kind not in KINDS or not value.strip():
        raise ConfigError(f"--exclude {text!r} is not a rule", hint=f"write {SYNTAX}")
    if kind == "key":
        return ExcludeRule("key", text, pattern=_glob(value.strip(), fold=False))
    if kind == "title":
        return ExcludeRule("title", text, pattern=_glob(value, fold=True))
    if kind == "before":
        return ExcludeRule("before", text, end=_bound(value, text, end_of_day=False)[0])
    if kind == "after":
        after, whole_day = _bound(value, text, end_of_day=True)
        if not whole_day:
            after += timedelta(microseconds=1)  # strictly after an exact instant
        return ExcludeRule("after", text, start=after)
    lo, dots, hi = value.partition("..")
    if not dots or not (lo.strip() or hi.strip()):
        raise ConfigError(
            f"--exclude {text!r}: a range is DATE..DATE", hint="e.g. range:2023-04-01..2023-09-30"
        )
    start = _bound(lo, text, end_of_day=False)[0] if lo.strip() else None
    end = _bound(hi, text, end_of_day=True)[0] if hi.strip() else None
    if start is not None and end is not None and start >= end:
        raise ConfigError(f"--exclude {text!r}: the range ends before it starts")
    return ExcludeRule("range", text, start=start, end=end)


def parse_rules(texts: Iterable[str]) -> list[ExcludeRule]:
    """Rules in the order given, duplicates dropped."""
    seen: dict[str, ExcludeRule] = {}
    for text in texts:
        rule = parse_rule(text)
        seen.setdefault(rule.text.strip(), rule)
    return list(seen.values())


def excluded_by(
    rules: Iterable[ExcludeRule], key: str, title: str | None, created_at: datetime | None
) -> str | None:
    """The first rule (its text) that excludes this conversation, or None."""
    for rule in rules:
        if rule.matches(key, title, created_at):
            return rule.text
    return None
