"""Stored text made safe to print on a terminal.

Titles and messages come from exports the owner did not write alone: a conversation can hold an
ANSI escape sequence (CSI: colours, cursor moves, erase), an OSC sequence (window title, OSC 8
hyperlinks, OSC 52 which writes the clipboard), a carriage return that overwrites the line, C1
controls (a lone U+009B is a CSI on some terminals), bidirectional overrides that reorder what
is shown (Trojan Source), or a lone surrogate that would crash the output encoder.
``for_terminal`` shows every such character as a visible escape (``\\x1b``, ``\\u202e``,
``\\ud800``) instead of sending it raw; everything else, Japanese included, is unchanged.

Newlines and tabs are kept only where a multi-line body is printed (``keep_newlines=True``);
in one-line fields (titles, keys, error messages) they are escaped too, so a title cannot forge
extra lines of output. Backslashes are not doubled: the output is for reading, not a lossless
encoding (``--json`` is the lossless form; json.dumps escapes every control character).
"""

from __future__ import annotations

import re

# C0 controls except TAB and LF (those two are decided by keep_newlines), DEL, C1 controls;
# bidi embeddings, overrides and isolates, LRM/RLM/ALM; line and paragraph separators;
# lone surrogates; the BOM / zero-width no-break space and the interlinear annotation marks.
_ALWAYS = (
    "\x00-\x08\x0b-\x1f\x7f-\x9f"
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
    "\u2028\u2029\ufeff\ufff9-\ufffb"
    "\ud800-\udfff"
)
_MULTILINE = re.compile(f"[{_ALWAYS}]")
_ONE_LINE = re.compile(f"[{_ALWAYS}\t\n]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _escape(match: re.Match[str]) -> str:
    ch = match.group()
    if ch in _NAMED:
        return _NAMED[ch]
    code = ord(ch)
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def for_terminal(text: object, *, keep_newlines: bool = False) -> str:
    """``text`` with control characters, escape sequences' introducers, bidi controls and lone
    surrogates shown as visible escapes. ``None`` becomes ``""``; other objects use ``str()``.

    An escape sequence is made harmless by escaping its introducer (ESC, or the C1 CSI / OSC /
    DCS characters): the rest of the sequence is plain printable text."""
    if text is None:
        return ""
    s = text if isinstance(text, str) else str(text)
    return (_MULTILINE if keep_newlines else _ONE_LINE).sub(_escape, s)


def is_clean(text: str, *, keep_newlines: bool = False) -> bool:
    """True when ``for_terminal`` would leave ``text`` unchanged."""
    return (_MULTILINE if keep_newlines else _ONE_LINE).search(text) is None


# ---------------------------------------------------------------- words for counts, sizes, times


def plural(n: int, word: str, many: str | None = None) -> str:
    """``1 batch``, ``2 batches``, ``0 memories``: the count and the noun in the right form."""
    if n == 1:
        return f"{n} {word}"
    if many is None:
        if word.endswith(("s", "x", "ch", "sh")):
            many = word + "es"
        elif word.endswith("y") and word[-2:-1] not in "aeiou":
            many = word[:-1] + "ies"
        else:
            many = word + "s"
    return f"{n:,} {many}"


def human_bytes(n: int | float) -> str:
    """``512 bytes``, ``1.4 MB``, ``2.0 GB`` (powers of 1000, as disks are sold)."""
    if n < 1000:
        return plural(int(n), "byte")
    for unit in ("kB", "MB", "GB", "TB"):
        n /= 1000
        if n < 1000 or unit == "TB":
            return f"{n:.1f} {unit}"
    return f"{n:.1f} TB"  # pragma: no cover


def human_time(when: object, zone: object = None) -> str:
    """A timestamp as ``2026-12-01 09:33`` in ``zone`` (a tzinfo; default: as given); ``-`` when
    missing."""
    from datetime import datetime, tzinfo

    if not isinstance(when, datetime):
        return "-" if when is None else str(when)
    if isinstance(zone, tzinfo) and when.tzinfo is not None:
        when = when.astimezone(zone)
    return when.strftime("%Y-%m-%d %H:%M")


def human_seconds(seconds: float) -> str:
    """``45 s``, ``3 min 20 s``, ``2 h 5 min``."""
    s = int(round(seconds))
    if s < 60:
        return f"{s} s"
    if s < 3600:
        return f"{s // 60} min" + (f" {s % 60} s" if s % 60 else "")
    return f"{s // 3600} h" + (f" {s % 3600 // 60} min" if s % 3600 // 60 else "")


def cells(text: str) -> int:
    """The columns ``text`` takes on a terminal: a wide or full-width character (Japanese) two."""
    import unicodedata

    return sum(2 if unicodedata.east_asian_width(ch) in "WF" else 1 for ch in text)


def clip(text: str, width: int) -> str:
    """``text`` on one line in at most ``width`` terminal columns: runs of white space (newlines
    too) become one space, and what does not fit ends in ``…``."""
    text = " ".join(text.split())
    if cells(text) <= width:
        return text
    out, used = [], 1  # the ellipsis takes one column
    for ch in text:
        w = cells(ch)
        if used + w > width:
            break
        out.append(ch)
        used += w
    return "".join(out).rstrip() + "…"


def terminal_width(default: int = 120) -> int:
    """The terminal's columns (``$COLUMNS`` or the terminal's size), else ``default``: a line
    meant to be one line is cut to it."""
    import shutil

    return max(40, shutil.get_terminal_size((default, 24)).columns)


def local_time(when: object, zone: object = None) -> str:
    """A time for reading: ``2024-05-12 22:04`` in ``zone`` (default: the local zone,
    ``core.settings.local_zone``: PMEM_TZ, else the machine's); an ISO string is read first;
    ``?`` when there is none."""
    from datetime import datetime

    if isinstance(when, str):
        try:
            when = datetime.fromisoformat(when)
        except ValueError:
            return str(when)
    if when is None:
        return "?"
    if zone is None:
        from core.settings import local_zone

        zone = local_zone()
    return human_time(when, zone)
