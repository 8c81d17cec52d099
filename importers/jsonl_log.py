"""Importer for a person's own logs in JSONL (``jsonl-log``): one turn per line, often one file a day.

Input: one ``.jsonl`` (or ``.jsonl.zst``) file, or a folder of them at any depth (e.g.
``logs/2026-03-01.jsonl``). A line is one turn in either shape:

* the seven-field log: ``ts`` (ISO-8601, UTC), ``actor``, ``role`` (``user`` / ``assistant`` /
  ``system``), ``type`` (``text`` / ``action`` / ``meta``), ``text``, ``model`` (optional),
  ``session``;
* the generic ``{ts, role, text}`` (every other field optional).

Decisions:

* **Conversations**: the turns of one ``session`` in one exchange, keyed
  ``jsonl-log:<session>:<YYYY-MM-DD>`` by the day it started. The day is the date in the file's
  name when it has one (``2026-03-01.jsonl``, ``log-20260301.jsonl``), otherwise the day of
  ``ts`` in the configured time zone (``PMEM_TZ``, see ``core.settings.time_zone``), and
  ``undated`` when there is no usable ``ts``. Without ``session`` the file's name (without
  extensions) is the session. **Past midnight** a session goes on: a line within
  ``SESSION_GAP`` (an hour) of the session's line before it stays in that line's conversation
  (``importers._common.continues``, the LINE / Telegram rule), in the same file or, for a daily
  file, at the start of the next day's file (once: see "sessions past midnight" below). Every
  read that meets such a conversation yields it whole, from both files.
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
after the last whole line read, where the next pass starts. Where each session stands at
``start`` (which conversation its next line continues) is read from the lines before it (their
session and time only), when a session may run on from the day before or the name has no date. A last line still being written (no
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
from datetime import UTC, date, datetime, timedelta, tzinfo
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
    continues,
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
    yielded: set[str] = set()

    def read(part: Part) -> Iterator[Conversation | Quarantined]:
        file = Path(part.label)
        with open_jsonl(file, part.report) as fp:
            result = _read_file(fp, file, people, 0, 1, hold_partial=False)
        yield from result.quarantined
        for conv, carried in result.conversations:
            if carried and conv.key in yielded:
                continue  # the day before's conversation, already yielded whole with its file
            yielded.add(conv.key)
            yield conv

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
        result = _read_file(fp, path, me_names(me), start, first_line, hold_partial=True)
    convs = [conv for conv, _ in result.conversations]
    return Tail(convs, result.quarantined, result.end, result.last_line)


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


# ---------------------------------------------------------------- sessions past midnight
#
# A session's conversation is its exchange on one day. A line continues the exchange of the
# session's line before it when it comes within SESSION_GAP of it (``_common.continues``, the
# rule LINE and Telegram follow), whatever the date: in a file without a date in its name the
# day is each line's own, and a session that runs on past midnight stays in the day it started
# on. A dated daily file holds its day; the lines at the start of a session in the next day's
# file that continue its last line in this one (each within the gap of the one before) belong
# to this day's conversation, unless the session had itself run on into this file from the day
# before (an exchange crosses one file's midnight at most: a session logging all day and night
# is one conversation a day). Every read that meets such a conversation yields it whole (its
# lines from both files), so a file read alone, a folder and the watcher give the same
# conversation and a re-import adds nothing.

_State = dict[str, tuple[str, datetime]]  # session -> (the day of its conversation, its last time)


@dataclass(slots=True)
class _Run:
    """One session in one file, read on its own: its first and last times and whether each of
    its lines continues the one before (no gap of SESSION_GAP or more)."""

    first: datetime
    last: datetime
    unbroken: bool


_RUNS: dict[tuple[str, int, int], dict[str, _Run]] = {}


def _place(state: _State, session: str, when: datetime | None, day: str) -> str:
    """The day of the conversation a line of ``session`` at ``when`` (its own day ``day``)
    belongs to; ``state`` is updated. A line without a time stays in its own day."""
    if when is None:
        return day
    current = state.get(session)
    if current is not None and (current[0] == day or continues(current[1], when)):
        day = current[0]
    state[session] = (day, when)
    return day


def _track(runs: dict[str, _Run], session: str, when: datetime | None) -> None:
    if when is None:
        return
    run = runs.get(session)
    if run is None:
        runs[session] = _Run(when, when, True)
    else:
        run.unbroken = run.unbroken and continues(run.last, when)
        run.last = when


def _stat_key(path: Path) -> tuple[str, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return str(path.resolve()), st.st_size, st.st_mtime_ns


def _runs(path: Path) -> dict[str, _Run]:
    """The sessions of a whole file (remembered while the file's size and mtime stay)."""
    key = _stat_key(path)
    if key is not None and key in _RUNS:
        return _RUNS[key]
    runs: dict[str, _Run] = {}
    try:
        with open_jsonl(path) as fp:
            _scan(fp, path, {}, runs, None)
    except (OSError, EOFError, ReadError):
        pass  # what could be read counts
    if key is not None:
        _remember(key, runs)
    return runs


def _remember(key: tuple[str, int, int], runs: dict[str, _Run]) -> None:
    if len(_RUNS) >= 4096:
        _RUNS.clear()
    _RUNS[key] = runs


def _scan(
    fp: IO[bytes], path: Path, state: _State, runs: dict[str, _Run], limit: int | None
) -> None:
    """Place the lines of ``fp`` (up to ``limit`` bytes) in ``state`` and ``runs`` without
    building messages: the lines :func:`_feed` keeps, placed as it places them."""
    file_day = file_date(path.name)
    zone = None if file_day is not None else _zone()
    stem = _stem(path.name)
    read = 0
    for raw in fp:
        read += len(raw)
        if limit is not None and read > limit:
            break
        record, _ = _parse(raw)
        if record is None:
            continue
        try:
            line = _fields(record)
        except RECORD_ERRORS:
            continue
        if isinstance(line, str):
            continue
        session = line.session or stem
        day = file_day or (_local_day(line.when, zone) if line.when and zone else UNDATED)
        _place(state, session, line.when, day)
        _track(runs, session, line.when)


def _neighbour(path: Path, delta: int) -> tuple[Path, str] | None:
    """The daily file ``delta`` days from ``path``'s (its name with the date moved, in the
    same folder, plain or ``.zst``) and its day, when there is one."""
    found = _date_in(path.name)
    if found is None:
        return None
    m, day = found
    other = date.fromisoformat(day) + timedelta(days=delta)
    sep1, sep2 = _name_sep(m, 1), _name_sep(m, 2)  # "-" or "" (as the name writes it)
    written = f"{other.year:04d}{sep1}{other.month:02d}{sep2}{other.day:02d}"
    name = path.name[: m.start()] + written + path.name[m.end() :]
    plain = name[: -len(ZST_SUFFIX)] if name.lower().endswith(ZST_SUFFIX) else name
    for candidate in (plain, plain + ZST_SUFFIX):
        p = path.with_name(candidate)
        if p.is_file():
            return p, other.isoformat()
    return None


def _name_sep(m: re.Match[str], after: int) -> str:
    """What a file's name writes between the date's group ``after`` and the next one."""
    return m.string[m.end(after) : m.start(after + 1)]


def _carry_in(path: Path, day: str) -> _State:
    """The sessions of the day before's file whose exchange a line of ``path`` may continue:
    session -> (that day, its last time). A session that had run on into that file from the
    day before it is left out (one midnight at most)."""
    before = _neighbour(path, -1)
    if before is None:
        return {}
    prev, prev_day = before
    runs = _runs(prev)
    older: dict[str, _Run] = {}
    if any(run.unbroken for run in runs.values()):
        two = _neighbour(prev, -1)
        older = _runs(two[0]) if two is not None else {}
    carry: _State = {}
    for session, run in runs.items():
        earlier = older.get(session)
        if run.unbroken and earlier is not None and continues(earlier.last, run.first):
            continue
        carry[session] = (prev_day, run.last)
    return carry


# ---------------------------------------------------------------- reading


@dataclass
class _Group:
    session: str
    day: str
    first_line: int
    label: str
    messages: list[Message] = field(default_factory=list)
    keys: set[str] = field(default_factory=set)
    unknown: Counter[str] = field(default_factory=Counter)

    @property
    def key(self) -> str:
        return f"{SOURCE}:{self.session}:{self.day}"


@dataclass
class _Result:
    conversations: list[tuple[Conversation, bool]]  # (conversation, from the day before)
    quarantined: list[Quarantined]
    end: int
    last_line: int


@dataclass
class _Lines:
    groups: dict[tuple[str, str], _Group]
    quarantined: list[Quarantined]
    end: int
    last_line: int
    runs: dict[str, _Run]


def _read_file(
    fp: IO[bytes],
    path: Path,
    me: frozenset[str],
    start: int,
    first_line: int,
    *,
    hold_partial: bool,
) -> _Result:
    """The conversations of ``fp`` (``path`` from byte ``start``). Read whole (``start`` 0),
    a conversation that crosses into the next day's file, or comes from the day before's, is
    yielded whole; read from an offset, only the new lines' messages."""
    day = file_date(path.name)
    if start == 0 and not hold_partial and day is not None:
        lines = _whole_lines(path, day, me)  # maybe read already, as the day before's neighbour
        for _ in iter(lambda: fp.read(1 << 20), b""):
            pass  # the caller's stream counts the bytes
    else:
        state: _State = _carry_in(path, day) if day is not None else {}
        if start and (state or day is None):  # where each session stands at the offset
            with open_regular(path) as head:
                _scan(head, path, state, {}, start)
        lines = _lines(fp, path, me, start, first_line, hold_partial=hold_partial, state=state)
        key = _stat_key(path) if start == 0 and day is not None else None
        if key is not None and key[1] == lines.end:
            _remember(key, lines.runs)  # read whole: its sessions, for its neighbours' reads
    groups = list(lines.groups.values())
    if start == 0 and day is not None:
        groups = _whole(path, day, me, groups)
    label = str(path)
    convs = [(_build(g, label), day is not None and g.day != day) for g in groups]
    return _Result(convs, lines.quarantined, lines.end, lines.last_line)


_LINES: dict[tuple[Any, ...], _Lines] = {}


def _whole_lines(path: Path, day: str, me: frozenset[str]) -> _Lines:
    """A daily file read whole with the sessions it continues from the day before; the last
    two reads are remembered (a folder reads each file as the day before's neighbour first)."""
    carry = _carry_in(path, day)
    key = _stat_key(path)
    memo = (key, me, tuple(sorted(carry.items())))
    if key is not None and memo in _LINES:
        return _LINES[memo]
    with open_jsonl(path) as fp:
        lines = _lines(fp, path, me, 0, 1, hold_partial=False, state=carry)
    if key is not None:
        _remember(key, lines.runs)
        if len(_LINES) >= 2:
            _LINES.clear()  # the one read last is the one asked for next
        _LINES[memo] = lines
    return lines


def _whole(path: Path, day: str, me: frozenset[str], groups: list[_Group]) -> list[_Group]:
    """``groups`` of a daily file read whole, each with its lines in the neighbouring files:
    a session carried in from the day before after its lines there, one carried on into the
    next day's file before its lines there."""
    if any(g.day != day for g in groups):
        before = _neighbour(path, -1)
        assert before is not None  # a carried group has a day before
        own = _groups_of(*before, me, own=True)
        groups = [_join(own[g.session], g) if _carried(g, day, own) else g for g in groups]
    after = _neighbour(path, +1)
    if after is None:
        return groups
    later = _groups_of(*after, me, own=False)
    return [
        _join(g, later[g.session]) if g.day == day and g.session in later else g for g in groups
    ]


def _carried(group: _Group, day: str, own: dict[str, _Group]) -> bool:
    return group.day != day and group.session in own


def _groups_of(path: Path, day: str, me: frozenset[str], *, own: bool) -> dict[str, _Group]:
    """The groups of another daily file read whole, by session: those of its own day (``own``),
    else those carried in from the day before. A file that cannot be read holds none."""
    try:
        lines = _whole_lines(path, day, me)
    except (OSError, EOFError, ReadError):
        return {}
    return {g.session: g for g in lines.groups.values() if (g.day == day) == own}


def _join(first: _Group, then: _Group) -> _Group:
    """One conversation of ``first``'s lines then ``then``'s (the same session and day from
    two files); a line already in ``first`` is one message."""
    joined = _Group(first.session, first.day, first.first_line, first.label)
    joined.messages = list(first.messages)
    joined.keys = set(first.keys)
    joined.unknown = Counter(first.unknown)
    joined.unknown.update(then.unknown)
    for m in then.messages:
        if m.key in joined.keys:
            joined.unknown["skipped:duplicate-line"] += 1
            continue
        joined.keys.add(m.key)
        joined.messages.append(m.model_copy(update={"position": len(joined.messages)}))
    return joined


def _lines(
    fp: IO[bytes],
    path: Path,
    me: frozenset[str],
    start: int,
    first_line: int,
    *,
    hold_partial: bool,
    state: _State,
) -> _Lines:
    label = str(path)
    file_day = file_date(path.name)
    day_of: str | tzinfo = file_day if file_day is not None else _zone()
    stem = _stem(path.name)
    groups: dict[tuple[str, str], _Group] = {}
    runs: dict[str, _Run] = {}
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
                problem = _feed(groups, record, raw, number, me, day_of, stem, state, runs, label)
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
    own = [g for g in groups.values() if file_day is None or g.day == file_day]
    if blank and own:  # counted with the file's first conversation of its own
        own[0].unknown["skipped:blank-line"] = blank
    return _Lines(groups, bad, offset, number, runs)


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


@dataclass(slots=True)
class _Line:
    kind: str
    text: str
    actor: str | None
    role_raw: str | None
    when: datetime | None
    session: str | None


def _fields(rec: dict[str, Any]) -> _Line | str:
    """The fields of one record, or the reason it is set aside."""
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
    when, ts_ok = parse_ts(rec.get("ts"))
    if not ts_ok:
        return "unreadable-time"
    return _Line(kind, text, actor, role_raw, when, _session(rec.get("session")))


def _feed(
    groups: dict[tuple[str, str], _Group],
    rec: dict[str, Any],
    raw: bytes,
    number: int,
    me: frozenset[str],
    day_of: str | tzinfo,
    stem: str,
    state: _State,
    runs: dict[str, _Run],
    label: str,
) -> str | None:
    """Add one record to its conversation; returns a quarantine reason, or None."""
    line = _fields(rec)
    if isinstance(line, str):
        return line
    when = line.when
    session = line.session or stem
    if isinstance(day_of, str):
        own_day = day_of
    else:
        own_day = _local_day(when, day_of) if when is not None else UNDATED
    role, channel, content_type, raw_type = _classify(line.kind, line.role_raw, line.actor, me)
    day = _place(state, session, when, own_day)
    _track(runs, session, when)
    group = groups.get((session, day))
    if group is None:
        group = groups[(session, day)] = _Group(session, day, number, label)
    if raw_type is not None:
        group.unknown[raw_type] += 1
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
            text=line.text,
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
    label = group.label
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
    found = _date_in(name)
    return found[1] if found is not None else None


def _date_in(name: str) -> tuple[re.Match[str], str] | None:
    for m in _FILE_DATE.finditer(name):
        try:
            return m, date(int(m.group(1)), int(m.group(2)), int(m.group(3))).isoformat()
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
