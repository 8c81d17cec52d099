"""The times a message speaks about (pure): its own time expressions, resolved against the
message's own timestamp, not against ``--now`` (ADR 0036).

"Yesterday I went bowling" sent on 2022-03-17 speaks about 2022-03-16; 「先週の火曜に決めた」
sent on a Thursday speaks about the Tuesday of the week before; "last year" said in July 2023
speaks about 2023. Recall indexes these ranges beside the time the message was sent
(``message_times``, a search projection), so that a question about March 16 finds the message
of the 17th.

The rule layer of ``search.timeexpr`` does the parsing (both languages, the same table of
ranges); its ``dateparser`` fallback is not used here (it costs milliseconds a message and
finds dates in version numbers). Every expression of the text is taken, longest first, each
span cut out before the next is looked for. A range that holds the message's own time ("today",
"this week", "this year") or lies wholly after it adds nothing the sent time does not say, and
is left out.
"""

from __future__ import annotations

from datetime import datetime, tzinfo

from search.timeexpr import _HALF_WIDTH, _Ctx, _rules, _zone

__all__ = ["MAX_MENTIONS", "mentioned_times"]

MAX_MENTIONS = 8  # time expressions read from one message at most


def mentioned_times(
    text: str, at: datetime, tz: str | tzinfo | None = None
) -> list[tuple[datetime, datetime]]:
    """The ranges ``[start, end)`` (tz-aware) that the time expressions of ``text`` name, read
    as of ``at`` (the message's own time, tz-aware) in the calendar ``tz`` (an IANA name or a
    zone; default ``at``'s own offset), in the order found, without duplicates."""
    if at.tzinfo is None or at.utcoffset() is None:
        raise ValueError("the message's time must be tz-aware")
    zone = (_zone(tz) if isinstance(tz, str) else tz) if tz else at.tzinfo
    assert zone is not None
    wall = at.astimezone(zone).replace(tzinfo=None)
    ctx = _Ctx(wall.date(), wall)
    rest = text.translate(_HALF_WIDTH)  # same length: spans stay valid as they are cut out
    out: list[tuple[datetime, datetime]] = []
    for _ in range(MAX_MENTIONS):
        found = _rules(rest, ctx)
        if found is None:
            break
        s, e = found.span
        rest = rest[:s] + " " * (e - s) + rest[e:]
        if found.end > wall:  # holds the message's own time, or lies after it
            continue
        span = (found.start.replace(tzinfo=zone), found.end.replace(tzinfo=zone))
        if span not in out:
            out.append(span)
    return out
