"""Importer for a person's own logs in JSONL (``jsonl-log``): one turn per line, often one file a day.

Input: one ``.jsonl`` (or ``.jsonl.zst``) file, or a folder of them at any depth (e.g.
``logs/2026-03-01.jsonl``). A line is one turn in either shape:

* the seven-field log: ``ts`` (ISO-8601, UTC), ``actor``, ``role`` (``user`` / ``assistant`` /
  ``system``), ``type`` (``text`` / ``action`` / ``meta``), ``text``, ``model`` (optional),
  ``session``;
* the generic ``{ts, role, text}`` (every other field optional).

Decisions:

* **Conversations**: the turns of one ``session`` on one day, keyed
  ``jsonl-log:<session>:<YYYY-MM-DD>``. The day is the date in the file's name when it has one
  (``2026-03-01.jsonl``, ``log-20260301.jsonl``): a daily file holds whole conversations, so a
  changed file re-imports on its own. Otherwise it is the day of ``ts`` in the configured time
  zone (``PMEM_TZ``, see ``core.settings.time_zone``), and ``undated`` when there is no usable
  ``ts``. Without ``session`` the file's name (without extensions) is the session.
* **Messages** are keyed ``<conversation key>:<node>``, the node being the sha1 (16 hex) of the
  line's bytes: no position, so a key is the same whether the file is read whole or from an
  offset (:func:`read_tail`), and a line written twice into one conversation is one message
  (``skipped:duplicate-line``). File order is the order of the conversation.
* **Who speaks** (``core.people``): an ``actor`` named by ``PMEM_ME`` / ``--me`` is the
  person; else ``role: user`` is the person, unless people are configured and the line's
  ``actor`` is not one of them (another human: channel ``other``, its role is the actor's name
  so that ``pmem forget --speaker NAME`` finds it). A line with an ``actor`` and no ``role`` is
  the person's when the actor is named, another speaker's otherwise. ``assistant`` is the
  assistant, ``system`` machinery, ``tool`` tool traffic; ``type: action`` / ``meta`` lines are
  machinery whoever wrote them (content type ``action`` / ``meta``). An unknown role or type is
  kept as machinery and counted (``role:<x>`` / ``type:<x>``).
* **Text is kept byte-exact** (``text`` as written: NUL, lone surrogates, CRLF, non-ASCII).
  ``text`` that is not a string is set aside (``missing-text``), except on an ``action`` /
  ``meta`` line, where an object is kept as its JSON. A line with neither ``role`` nor
  ``actor`` is set aside (``missing-role``). Times: ISO-8601 with ``Z``, an offset or none
  (UTC), a space for the ``T``, or epoch seconds / milliseconds. A line without ``ts`` is kept
  without a time (``undated`` when the file's name holds no date); a ``ts`` that is there but
  cannot be read sets the line aside (``unreadable-time``, with its line number): the time was
  written, so keeping the line without it would lose what the log said.

Reading from a byte offset (for ``pmem watch``): :func:`read_tail` reads a plain file from
``start`` (a line boundary; ``0`` for the whole file) and returns the conversations of the new
lines only (each holds just the new messages), the quarantined lines, and ``end``, the offset
after the last whole line read, where the next pass starts. A last line still being written (no
newline, not yet valid JSON) is left for the next pass. :func:`merge` appends such a partial
conversation to the one the ledger holds (``Ledger.load``), giving exactly what a full read of
the grown file gives (same keys, same ``content_hash``)::

    tail = read_tail(path, start=last_end, first_line=last_line + 1)
    for conv in tail.conversations:
        stored = ledger.load(conv.key) if ledger.has_conversation(conv.key) else None
        ledger.upsert(merge(stored, conv) if stored else conv, import_id)
    last_end, last_line = tail.end, tail.last_line
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, tzinfo
from pathlib import Path
from typing import IO, Any

from pydantic import ValidationError

from core.models import Channel, Conversation, Message, Provenance
from core.people import is_me, me_names
from importers._common import (
    RECORD_ERRORS,
    Quarantined,
    ReadError,
    ReadReport,
    nonempty_str,
    parse_iso,
    raw_json,
    unique_conversations,
)
from importers._containers import Part, file_part, iter_parts, open_regular
from importers._jsonl import ZST_SUFFIX, open_jsonl

SOURCE = "jsonl-log"
UNDATED = "undated"
MACHINERY_TYPES = frozenset({"action", "meta"})
_FILE_DATE = re.compile(r"(?<!\d)(\d{4})-?(\d{2})-?(\d{2})(?!\d)")
_ROLES = {
    "user": "user",
    "human": "user",
    "assistant": "assistant",
    "ai": "assistant",
    "model": "assistant",
    "bot": "assistant",
    "system": "system",
    "tool": "tool",
}


# ---------------------------------------------------------------- public entry points


def iter_conversations(
    path: Path, *, report: ReadReport | None = None, me: str | None = None
) -> Iterator[Conversation | Quarantined]:
    """Yield the conversations of one log file, or of every log file under a folder (the other
    files are counted in ``report.skipped``). ``me`` overrides ``PMEM_ME``."""
    path = Path(path)
    people = me_names(me)
    parts = [file_part(f) for f in log_files(path, report)] if path.is_dir() else [file_part(path)]

    def read(part: Part) -> Iterator[Conversation | Quarantined]:
        with open_jsonl(Path(part.label), part.report) as fp:
            result = _read(fp, Path(part.label), people, 0, 1, hold_partial=False)
        yield from result.quarantined
        yield from result.conversations

    # the same session and day in two undated files: the first one wins
    yield from unique_conversations(iter_parts(parts, read, report))


def log_files(folder: Path, report: ReadReport | None = None) -> list[Path]:
    """The ``.jsonl`` / ``.jsonl.zst`` files under ``folder`` in path order; the other files are
    counted in ``report.skipped`` (``not-a-log-file``)."""
    found: list[Path] = []
    for p in folder.rglob("*"):
        if not p.is_file():
            continue
        name = p.name.lower()
        if name.endswith(".jsonl") or name.endswith(".jsonl" + ZST_SUFFIX):
            found.append(p)
        elif report is not None:
            report.skip("not-a-log-file")
    return sorted(found, key=lambda p: str(p.relative_to(folder)))


@dataclass
class Tail:
    """What :func:`read_tail` read: conversations of the new lines (only their messages),
    quarantined lines, the offset after the last whole line read and that line's number."""

    conversations: list[Conversation]
    quarantined: list[Quarantined]
    end: int
    last_line: int


def read_tail(
    path: Path, start: int = 0, *, first_line: int | None = None, me: str | None = None
) -> Tail:
    """Read a plain (not compressed) log file from byte ``start``, which must be a line boundary
    (``0``, or a previous :attr:`Tail.end`). ``first_line`` is the number of the line at
    ``start``, for quarantine positions; when omitted it is counted from the file. A last line
    without its newline that does not parse yet is left for the next read."""
    path = Path(path)
    with open_regular(path) as fp:
        if first_line is None:
            first_line = 1 + _count_newlines(fp, start)
        fp.seek(start)
        result = _read(fp, path, me_names(me), start, first_line, hold_partial=True)
    return Tail(result.conversations, result.quarantined, result.end, result.last_line)


def merge(stored: Conversation, new: Conversation) -> Conversation:
    """``stored`` with the messages of ``new`` (the same conversation read from an offset) that
    it does not hold yet, appended in order: what a full read of the grown file yields."""
    have = {m.key for m in stored.messages}
    position = 1 + max((m.position for m in stored.messages if m.on_active_path), default=-1)
    added: list[Message] = []
    for m in new.active_messages:
        if m.key in have:
            continue
        have.add(m.key)
        added.append(m.model_copy(update={"position": position}))
        position += 1
    times = [t for t in (stored.created_at, stored.updated_at, new.created_at, new.updated_at) if t]
    unknown = Counter(stored.unknown_types)
    unknown.update(new.unknown_types)
    return stored.model_copy(
        update={
            "messages": [*stored.messages, *added],
            "created_at": min(times) if times else None,
            "updated_at": max(times) if times else None,
            "unknown_types": dict(unknown),
        }
    )


# ---------------------------------------------------------------- reading


@dataclass
class _Group:
    session: str
    day: str
    first_line: int
    messages: list[Message] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)
    unknown: Counter[str] = field(default_factory=Counter)

    @property
    def key(self) -> str:
        return f"{SOURCE}:{self.session}:{self.day}"


@dataclass
class _Result:
    conversations: list[Conversation]
    quarantined: list[Quarantined]
    end: int
    last_line: int


def _read(
    fp: IO[bytes],
    path: Path,
    me: frozenset[str],
    start: int,
    first_line: int,
    *,
    hold_partial: bool,
) -> _Result:
    label = str(path)
    file_day = file_date(path.name)
    day_of: str | tzinfo = file_day if file_day is not None else _zone()
    stem = _stem(path.name)
    groups: dict[tuple[str, str], _Group] = {}
    bad: list[Quarantined] = []
    blank = 0
    offset = start
    number = first_line - 1
    try:
        for raw in fp:
            record, reason = _parse(raw)
            if hold_partial and not raw.endswith(b"\n") and record is None:
                break  # still being written: the next pass reads it whole
            number += 1
            offset += len(raw)
            if reason == "blank":
                blank += 1
                continue
            if record is None:
                bad.append(Quarantined(file=label, position=number, reason=reason, kind="record"))
                continue
            try:
                problem = _feed(groups, record, raw, number, me, day_of, stem)
            except RECORD_ERRORS as exc:  # a shape we did not foresee: set the line aside
                problem = f"parse-error:{type(exc).__name__}"
            if problem:
                bad.append(Quarantined(file=label, position=number, reason=problem, kind="record"))
    except OSError as exc:
        raise ReadError(
            f"cannot read file after line {number} ({type(exc).__name__})",
            file=label,
            record=str(number + 1),
        ) from None
    except EOFError:  # a compressed file cut off: keep what was read
        bad.append(Quarantined(file=label, position=number + 1, reason="truncated", kind="file"))
    convs = [_build(g, label) for g in groups.values()]
    if blank and convs:
        convs[0].unknown_types["skipped:blank-line"] = blank
    return _Result(convs, bad, offset, number)


def _parse(raw: bytes) -> tuple[dict[str, Any] | None, str]:
    if not raw.strip():
        return None, "blank"
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, "invalid-utf8"
    try:
        record = json.loads(text)
    except (ValueError, RecursionError):
        return None, "invalid-json"
    if not isinstance(record, dict):
        return None, "not-an-object"
    return record, ""


def _feed(
    groups: dict[tuple[str, str], _Group],
    rec: dict[str, Any],
    raw: bytes,
    number: int,
    me: frozenset[str],
    day_of: str | tzinfo,
    stem: str,
) -> str | None:
    """Add one record to its conversation; returns a quarantine reason, or None."""
    kind = rec.get("type")
    kind = kind.strip().lower() if isinstance(kind, str) and kind.strip() else "text"
    text = rec.get("text")
    if not isinstance(text, str):
        if kind in MACHINERY_TYPES and isinstance(text, dict | list):
            text = raw_json(text)
        else:
            return "missing-text"
    actor = _name(rec.get("actor"))
    role_raw = nonempty_str(rec.get("role"))
    if role_raw is None and actor is None:
        return "missing-role"
    unknown: list[str] = []
    when, ts_ok = parse_ts(rec.get("ts"))
    if not ts_ok:
        return "unreadable-time"
    session = _session(rec.get("session")) or stem
    if isinstance(day_of, str):
        day = day_of
    else:
        day = _local_day(when, day_of) if when is not None else UNDATED
    role, channel, content_type, raw_type = _classify(kind, role_raw, actor, me)
    if raw_type is not None:
        unknown.append(raw_type)
    group = groups.get((session, day))
    if group is None:
        group = groups[(session, day)] = _Group(session, day, number)
    group.unknown.update(unknown)
    node = hashlib.sha1(raw.rstrip(b"\r\n"), usedforsecurity=False).hexdigest()[:16]
    key = f"{group.key}:{node}"
    if key in group.keys:
        group.unknown["skipped:duplicate-line"] += 1
        return None
    group.keys.add(key)
    group.messages.append(
        Message(
            key=key,
            node_id=node,
            role=role,
            channel=channel,
            content_type=content_type,
            text=text,
            created_at=when,
            position=len(group.messages),
            raw_type=raw_type,
        )
    )
    return None


def _classify(
    kind: str, role_raw: str | None, actor: str | None, me: frozenset[str]
) -> tuple[str, Channel, str, str | None]:
    """``(stored role, channel, content type, raw type)`` of one record."""
    role = _ROLES.get(role_raw.strip().lower()) if role_raw is not None else None
    stored_role = role_raw if role_raw is not None else (actor or "")
    if kind in MACHINERY_TYPES:
        return stored_role, Channel.MACHINERY, kind, None
    raw_type = None if kind == "text" else f"type:{kind}"
    if raw_type is not None:
        return stored_role, Channel.MACHINERY, kind, raw_type
    if is_me(actor, me):
        return role_raw or "user", Channel.PERSON, "text", None
    if role == "user" or (role is None and role_raw is None):
        if actor is not None and (me or role_raw is None):
            return actor, Channel.OTHER, "text", None  # another human: the role names them
        return role_raw or "user", Channel.PERSON, "text", None
    if role == "assistant":
        return stored_role, Channel.ASSISTANT, "text", None
    if role == "system":
        return stored_role, Channel.MACHINERY, "text", None
    if role == "tool":
        return stored_role, Channel.TOOL, "text", None
    return stored_role, Channel.MACHINERY, "text", f"role:{role_raw}"


def _build(group: _Group, label: str) -> Conversation:
    times = [m.created_at for m in group.messages if m.created_at is not None]
    try:
        return Conversation(
            key=group.key,
            source=SOURCE,
            external_id=f"{group.session}:{group.day}",
            title=None,
            created_at=min(times) if times else None,
            updated_at=max(times) if times else None,
            messages=group.messages,
            provenance=Provenance(file=label, position=group.first_line),
            unknown_types=dict(group.unknown),
        )
    except ValidationError:
        raise ReadError(
            "conversation failed validation", file=label, reason="parse-error:ValidationError"
        ) from None


# ---------------------------------------------------------------- fields


def parse_ts(value: Any) -> tuple[datetime | None, bool]:
    """``(time in UTC or None, readable)``: ISO-8601 (``Z``, an offset, or none: UTC; a space for
    ``T``), or epoch seconds / milliseconds as a number or a string of digits. A missing ``ts``
    is readable (None); a present one we cannot read is not."""
    if value is None or value == "":
        return None, True
    if isinstance(value, str) and re.fullmatch(r"\s*\d{9,13}(?:\.\d+)?\s*", value):
        value = float(value)
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = value / 1000 if abs(value) >= 1e11 else value
        try:
            return datetime.fromtimestamp(seconds, UTC), True
        except (OverflowError, OSError, ValueError):
            return None, False
    when = parse_iso(value.replace("/", "-")) if isinstance(value, str) else None
    return when, when is not None


def file_date(name: str) -> str | None:
    """The date in a daily file's name (``2026-03-01.jsonl``, ``log-20260301.jsonl``) as
    ``YYYY-MM-DD``; None when the name holds no valid date."""
    for m in _FILE_DATE.finditer(name):
        try:
            return date(int(m.group(1)), int(m.group(2)), int(m.group(3))).isoformat()
        except ValueError:
            continue
    return None


def _zone() -> tzinfo:
    from core.settings import local_zone

    return local_zone()


def _local_day(when: datetime, zone: tzinfo) -> str:
    try:
        return when.astimezone(zone).date().isoformat()
    except (OverflowError, ValueError):
        return when.date().isoformat()


def _stem(name: str) -> str:
    lowered = name.lower()
    for suffix in (".jsonl" + ZST_SUFFIX, ".jsonl"):
        if lowered.endswith(suffix):
            return name[: -len(suffix)] or name
    return name


def _name(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _session(value: Any) -> str | None:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return _name(value)


def _count_newlines(fp: IO[bytes], limit: int) -> int:
    """Newlines in the first ``limit`` bytes of ``fp`` (read in chunks)."""
    count = 0
    left = limit
    while left > 0:
        chunk = fp.read(min(left, 1 << 20))
        if not chunk:
            break
        count += chunk.count(b"\n")
        left -= len(chunk)
    return count
