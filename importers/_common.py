"""Pieces every importer shares: the quarantine record, time parsing, raw JSON, labels.

Nothing here reads files. Error messages and reasons carry ids, positions and machine words,
never message text.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from decimal import Decimal
from typing import IO, Any, Literal

from pydantic import BaseModel

from core.errors import InputError
from core.models import Conversation

QuarantineKind = Literal["conversation", "record", "file"]

# What a record of an unforeseen shape raises while it is read: it is quarantined, never fatal.
RECORD_ERRORS = (ValueError, TypeError, KeyError, AttributeError, IndexError, RecursionError)


class Quarantined(BaseModel):
    """Something we could not read. ``reason`` is machine text, never message text.

    ``kind`` says what was set aside: one conversation of an array (``position`` is its array
    index), one line of a JSONL file (``position`` is its 1-based line number), or a whole file
    of a multi-file export (``position`` is the record where reading stopped).
    """

    file: str
    position: int
    reason: str
    external_id: str | None = None
    member: str | None = None  # zip member, when read from a zip
    kind: QuarantineKind = "conversation"


class ReadReport:
    """What an import read besides conversations: files skipped (by reason) and bytes read, for
    the progress bar and the summary. Filled in by the importers when one is passed in."""

    def __init__(self) -> None:
        self.skipped: Counter[str] = Counter()
        self.bytes_total = 0  # bytes of the files to read (uncompressed size for zip members)
        self.bytes_read = 0

    def skip(self, reason: str, n: int = 1) -> None:
        if n:
            self.skipped[reason] += n

    def track(self, fp: IO[bytes]) -> IO[bytes]:
        """``fp`` counting the bytes read from it into ``bytes_read`` (a re-read after a seek
        is not counted twice)."""
        return io.BufferedReader(_Counting(fp, self), buffer_size=1 << 20)


class _Counting(io.RawIOBase):
    def __init__(self, inner: IO[bytes], report: ReadReport) -> None:
        self._inner = inner
        self._report = report
        self._pos = 0
        self._high = 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        data = self._inner.read(len(buffer))
        n = len(data)
        buffer[:n] = data
        self._pos += n
        if self._pos > self._high:
            self._report.bytes_read += self._pos - self._high
            self._high = self._pos
        return n

    def seekable(self) -> bool:
        try:
            return bool(self._inner.seekable())
        except (AttributeError, OSError):
            return False

    def seek(self, offset: int, whence: int = 0) -> int:
        self._pos = self._inner.seek(offset, whence)
        return self._pos

    def tell(self) -> int:
        return self._pos

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            super().close()


class ReadError(InputError):
    """An :class:`InputError` with a machine-readable ``reason``, so that a multi-file import can
    quarantine the damaged file and go on (the CLI treats it as any InputError)."""

    def __init__(
        self, message: str, *, file: str, record: str | None = None, reason: str = "unreadable-file"
    ) -> None:
        super().__init__(message, file=file, record=record)
        self.reason = reason


def where(file_label: str, member: str | None) -> str:
    """How an error names a file: ``export.zip!conversations-001.json`` for a zip member."""
    return f"{file_label}!{member}" if member else file_label


def str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def s(value: Any) -> str:
    """``value`` when it is a string, else the empty string."""
    return value if isinstance(value, str) else ""


def nonempty_str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return int(value) if value == value.to_integral_value() else float(value)
    raise TypeError(type(value).__name__)


def raw_json(value: Any) -> str:
    """A record kept raw: JSON with its key order, non-ASCII (and lone surrogates) as they are."""
    return json.dumps(value, ensure_ascii=False, default=json_default)


def payload_digest(*parts: Any, length: int = 16) -> str:
    """A short stable digest of JSON values (used for keys of records that carry no id)."""
    data = json.dumps(parts, sort_keys=True, ensure_ascii=True, default=json_default)
    return hashlib.sha1(data.encode("ascii"), usedforsecurity=False).hexdigest()[:length]


# A chat history is cut into days (LINE, Telegram: one conversation per chat and day), but an
# exchange that runs past midnight is one conversation: a message within this gap of the one
# before it continues that message's conversation, whatever the date (the common inactivity
# rule for sessions; a reply an hour later after midnight is a new evening's talk).
SESSION_GAP = timedelta(hours=1)


def continues(before: datetime | None, at: datetime | None) -> bool:
    """Whether a message at ``at`` continues the exchange whose last message was at ``before``
    (both known, in order, closer than SESSION_GAP)."""
    return before is not None and at is not None and timedelta(0) <= at - before < SESSION_GAP


def parse_iso(value: Any) -> datetime | None:
    """An ISO-8601 / RFC 3339 time (``Z`` or ``+00:00``) as an aware UTC datetime; else None."""
    if not isinstance(value, str) or not value:
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):
        text = text[:-1] + "+00:00"
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=UTC)
    try:
        return parsed.astimezone(UTC)
    except OverflowError:  # year 9999 with a negative offset, year 1 with a positive one: clamped
        return _MAX_TIME if parsed.year > 1 else _MIN_TIME


_MAX_TIME = datetime.max.replace(tzinfo=UTC)
_MIN_TIME = datetime.min.replace(tzinfo=UTC)


# ---------------------------------------------------------------- injected context

# A whole message that is one tag block, e.g. "<environment_context>...</environment_context>".
# Only machine-looking tag names (with "_" or "-", or all capitals), so that a pasted HTML
# snippet such as "<div>...</div>" stays the person's words.
_TAG_BLOCK = re.compile(
    r"\A\s*<((?:[A-Za-z][\w.]*[_-][\w.-]*)|(?:[A-Z][A-Z0-9_]+))(?:\s[^>]*)?>.*</\1>\s*\Z",
    re.DOTALL,
)
# Tags that mark injected context even when the block is not closed or has text around it.
INJECTED_TAG_PREFIXES = (
    "<environment_context>",
    "<user_instructions>",
    "<permissions instructions>",
    "<INSTRUCTIONS>",
    "<system-reminder>",
    "<command-name>",
    "<command-message>",
    "<command-args>",
    "<local-command-stdout>",
    "<local-command-stderr>",
    "<local-command-caveat>",
    "<user-prompt-submit-hook>",
    "<turn_aborted>",
    "<subagent_notification>",
)
INJECTED_TEXT_PREFIXES = (
    "# AGENTS.md instructions for",
    "Caveat: The messages below were generated",
    "[Request interrupted by user",
)


def is_injected(text: str) -> bool:
    """True when a 'user' text is context the tool injected, not words the person typed."""
    head = text.lstrip()
    if head.startswith(INJECTED_TAG_PREFIXES) or head.startswith(INJECTED_TEXT_PREFIXES):
        return True
    return _TAG_BLOCK.match(text) is not None


def unique_conversations(
    items: Iterator[Conversation | Quarantined],
) -> Iterator[Conversation | Quarantined]:
    """Quarantine a conversation whose key was already yielded in this import."""
    seen: set[str] = set()
    for item in items:
        if isinstance(item, Conversation):
            if item.key in seen:
                yield Quarantined(
                    file=item.provenance.file,
                    position=item.provenance.position,
                    reason="duplicate-id",
                    external_id=item.external_id,
                    member=item.provenance.member,
                )
                continue
            seen.add(item.key)
        yield item
