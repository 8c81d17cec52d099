"""What a recall question searches for, and how a long message is shown (pure).

``recall_terms`` drops the question's scaffolding ("何を…た？", "what did I …") so that the
lexical side looks for content words only: the time expression has already been taken out by
``search.timeexpr``. ``snippet`` cuts a long message to a window around its first match.
"""

from __future__ import annotations

import re
import unicodedata
from datetime import datetime, tzinfo
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from core.errors import ConfigError
from core.settings import time_zone
from search.timeexpr import parse_time_expression

__all__ = ["TZ_ENV", "check_zone", "parse_bound", "parse_now", "recall_terms", "snippet"]

TZ_ENV = "PMEM_TZ"  # the calendar of time expressions (an IANA name); read by the callers

# recall_terms' patterns, compiled when it is first called (a search never calls it: ADR 0027)
# Japanese interrogatives and question endings (longest first); particles left at the edges
_JA_SCAFFOLD = (
    r"(?:何|なに|なん)(?:を|が|の|に|について|って)?|どう(?:いう|やって|して)?|どんな|どれ|どの|どこ|いつ|誰|だれ"
    r"|について|に関して|っけ|でしょうか|ですか|ました[かっ]?|(?<=[ただ])(?:か|っけ)"
)
# a particle between two content words splits them (英語の勉強 → 英語 勉強): a crude segmentation
# that keeps particle bigrams ("語の", "の勉") out of the tokens
_JA_PARTICLE = r"(?<=[\u3040-\u30ff\u4e00-\u9fffA-Za-z0-9])[のをにでとはがへも](?=[\u30a0-\u30ff\u4e00-\u9fff])"
_JA_ONLY_PARTICLES = r"^[はがをにでとのもへや、。,.]+$"
_JA_TRAILING_PARTICLE = r"(?<=[\u30a0-\u30ff\u4e00-\u9fffA-Za-z0-9])[はがをにでへ]$"
_JA_LEADING_PARTICLE = r"^[はがをにでとのもへや](?=[\u30a0-\u30ff\u4e00-\u9fff])"
_PUNCT = r"[?？!！「」『』\"'()（）]"
_EN_STOP_WORDS = """a an the i we you me my our your it its this that these those what which when where
who whom why how did do does done was were is are am be been being have has had about on in at of
to for from with by again say said tell told talk talked discuss discussed there any some
something anything please can could would should will shall"""
_EN_STOP = frozenset(_EN_STOP_WORDS.split())
_WORD = r"[A-Za-z][A-Za-z'\-]*"


def recall_terms(text: str) -> str:
    """``text`` without interrogatives, question endings and English function words."""
    out = re.sub(_PUNCT, " ", unicodedata.normalize("NFKC", text))
    out = re.sub(_JA_SCAFFOLD, " ", out)
    out = re.sub(_JA_PARTICLE, " ", out)
    out = re.sub(_WORD, lambda m: "" if m.group(0).lower() in _EN_STOP else m.group(0), out)
    parts = [
        re.sub(_JA_LEADING_PARTICLE, "", re.sub(_JA_TRAILING_PARTICLE, "", p))
        for p in out.split()
        if not re.match(_JA_ONLY_PARTICLES, p)
    ]
    return " ".join(p for p in parts if p)


def snippet(text: str, terms: str, max_chars: int) -> str:
    """At most ``max_chars`` characters of ``text`` (0: all of it), around the first place
    where one of ``terms``' words occurs, with "…" where it was cut."""
    flat = " ".join(text.split())
    if max_chars <= 0 or len(flat) <= max_chars:
        return flat
    low = unicodedata.normalize("NFKC", flat).lower()
    at = -1
    for word in sorted(terms.lower().split(), key=len, reverse=True):
        for probe in (word, word[:2]):
            at = low.find(probe) if probe else -1
            if at >= 0:
                break
        if at >= 0:
            break
    start = 0 if at < 0 else max(0, min(at - max_chars // 4, len(flat) - max_chars))
    cut = flat[start : start + max_chars]
    return ("…" if start > 0 else "") + cut + ("…" if start + max_chars < len(flat) else "")


def check_zone(name: str | None) -> tzinfo | None:
    if not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ConfigError(
            f"unknown time zone {name!r} in {TZ_ENV}", hint="use an IANA name such as Asia/Tokyo"
        ) from None


def parse_now(value: str | None, tz: str | None = None) -> datetime:
    """The reference time: ``value`` (ISO 8601; a naive one is read in ``tz`` or local time), or
    the current time in ``tz``. Local time is the machine's named zone (``TZ``, else
    ``/etc/localtime``: ``core.settings.time_zone``), not its offset today: "last summer" asked
    in winter keeps the summer's offset."""
    zone = check_zone(tz) or check_zone(time_zone()[0])
    if value is None:
        return datetime.now(zone)
    try:
        when = datetime.fromisoformat(value.strip())
    except ValueError:
        raise ConfigError(
            f"--now must be an ISO 8601 time, got {value!r}",
            hint="e.g. --now 2025-01-24T12:00+09:00",
        ) from None
    if when.tzinfo is None:
        when = when.replace(tzinfo=zone)
    return when


def parse_bound(
    value: str | None, side: Literal["since", "until"], now: datetime, tz: str | None = None
) -> datetime | None:
    """``--since`` / ``--until``: a full ISO time as given, else any time expression the recall
    parser knows (2024-03, 先月, last summer...): since = its start, until = its end."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if "T" in text or " " in text.strip():
        try:
            when = datetime.fromisoformat(text)
            return when if when.tzinfo else when.replace(tzinfo=check_zone(tz) or now.tzinfo)
        except ValueError:
            pass
    found = parse_time_expression(text, now, tz)
    if found is None:
        raise ConfigError(
            f"--{side} {value!r} is not a date or a time expression",
            hint="e.g. 2024-03-05, 2024-03, 先月, 'last summer'",
        )
    return found.start if side == "since" else found.end
