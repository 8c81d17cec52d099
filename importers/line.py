"""Importer for LINE's chat history text export (``line``): "Save chat history" / トーク履歴を保存.

Input: one ``.txt`` export, or a folder of them (one file per chat). Shapes read (public
descriptions of the format: see ``shared/docs/formats.md`` §5.3 and docs/adr/0022):

* header: ``[LINE] Chat history with NAME`` (one-to-one) / ``[LINE] Chat history in NAME``
  (group), in Japanese ``[LINE] NAMEとのトーク履歴`` / ``[LINE] NAMEのトーク履歴``; then
  ``Saved on: …`` / ``保存日時：…`` and a blank line (both optional);
* date lines: the phone apps' ``2026/03/01(日)`` / ``2026/03/01(Sun)``, the PC app's
  ``2026.03.01 日曜日`` / ``2026/03/01 Sun`` and ``Sun, 03/01/2026`` (month first), and
  ``2026年3月1日(日)``;
* messages ``TIME<TAB>SPEAKER<TAB>TEXT``; times ``09:15``, ``9:15``, ``午前9:15`` / ``午後1:05``,
  ``9:15 AM`` / ``AM 9:15``; an empty speaker (or no second tab) is a system line (joins, leaves,
  unsent messages);
* a message over several lines is written in double quotes (``"first⏎second"``, a quote inside
  doubled): it is stored without the quotes, with its line breaks (``\\n``) kept. A line that is
  none of the above continues the message before it.

Decisions:

* **Conversations**: one per chat and day, keyed ``line:<chat>:<YYYY-MM-DD>``; an exchange
  that runs past midnight stays in the day it started on (a message within ``SESSION_GAP``, an
  hour, of the one before it continues it: ``importers._common.continues``); ``<chat>`` is a
  digest (12 hex) of the chat's name from the header (the file's name when there is no header),
  so keys carry no name. The title is the chat's name and the day. Times are local: they are read
  in the configured zone (``PMEM_TZ``, see ``core.settings.time_zone``). Messages under a date
  line we cannot read go to ``line:<chat>:undated`` without times (counted ``date:unreadable``);
  messages before any date line are set aside (``no-date-line``).
* **Message keys** ``<conversation key>:<HHMM>-<digest of speaker and text>`` (``~2`` for the
  second identical message in the same minute): LINE has no ids, and a re-export that lost an
  unsent message keeps every other key.
* **Who speaks** (``core.people``): a speaker named by ``PMEM_ME`` / ``--me`` is the person
  (role ``user``); every other speaker is ``other`` with their name as the role. Without names,
  in a one-to-one chat everyone but the partner the header names is the person; in a group
  nobody is (everything is ``other``: kept, searchable, never drafted).
* **Machinery**: stickers, photos and other placeholders (``[スタンプ]``, ``[写真]``,
  ``[Sticker]``, ``[Photo]``, ``[動画]``, ``[ファイル]``, …) keep their text and speaker with
  content type ``sticker`` / ``photo`` / …; system lines have role ``system``.
"""

from __future__ import annotations

import hashlib
import re
import unicodedata
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, tzinfo
from pathlib import Path
from typing import IO

from pydantic import ValidationError

from core.models import Channel, Conversation, Message, Provenance
from core.people import is_me, me_names, norm_name
from importers._common import (
    Quarantined,
    ReadError,
    ReadReport,
    continues,
    unique_conversations,
)
from importers._containers import Part, file_part, folder_parts, iter_parts

SOURCE = "line"
UNDATED = "undated"

_HEADER = re.compile(
    r"^\[LINE\]\s*(?:(?P<en>Chat history (?P<prep>with|in) )(?P<name>.*)|(?P<ja>.*))$"
)
_SAVED = re.compile(r"^(?:Saved on:|保存日時[：:])")
_WEEKDAY = r"[^\d\s()（）]{1,12}"
_DATE_LINES = (
    # 2026/03/01(日)  2026/03/01(Sun)  2026.03.01 日曜日  2026/03/01 Sun  2026-03-01
    re.compile(
        rf"^(?P<y>\d{{4}})[/.\-](?P<m>\d{{1,2}})[/.\-](?P<d>\d{{1,2}})"
        rf"(?:\s*[（(]{_WEEKDAY}[)）]|\s+{_WEEKDAY})?\s*$"
    ),
    # 2026年3月1日(日)
    re.compile(
        rf"^(?P<y>\d{{4}})年(?P<m>\d{{1,2}})月(?P<d>\d{{1,2}})日\s*(?:[（(]{_WEEKDAY}[)）]|{_WEEKDAY})?\s*$"
    ),
    # Sun, 03/01/2026 (month first)
    re.compile(r"^[A-Za-z]{2,9}\.?,\s*(?P<m>\d{1,2})/(?P<d>\d{1,2})/(?P<y>\d{4})\s*$"),
)
_TIME = re.compile(
    r"^(?:(?P<pre>午前|午後|上午|下午|AM|PM|am|pm)\s*)?(?P<h>\d{1,2}):(?P<min>\d{2})"
    r"(?:\s*(?P<post>AM|PM|am|pm|a\.m\.|p\.m\.))?$"
)
_AFTERNOON = {"午後", "下午", "PM", "pm", "p.m."}
_MORNING = {"午前", "上午", "AM", "am", "a.m."}
PLACEHOLDERS = {
    "[スタンプ]": "sticker",
    "[Sticker]": "sticker",
    "[写真]": "photo",
    "[Photo]": "photo",
    "[動画]": "video",
    "[Video]": "video",
    "[ファイル]": "file",
    "[File]": "file",
    "[ボイスメッセージ]": "voice",
    "[Voice message]": "voice",
    "[アルバム]": "album",
    "[Album]": "album",
    "[位置情報]": "location",
    "[Location]": "location",
    "[連絡先]": "contact",
    "[Contact]": "contact",
    "[ノート]": "note",
    "[Note]": "note",
    "[GIF]": "gif",
    "[イベント]": "event",
    "[Event]": "event",
    "[投票]": "poll",
    "[Poll]": "poll",
}


def iter_conversations(
    path: Path, *, report: ReadReport | None = None, me: str | None = None
) -> Iterator[Conversation | Quarantined]:
    """Yield one conversation per chat and day of one export, or of every ``.txt`` export under a
    folder (the other files are counted in ``report.skipped``). ``me`` overrides ``PMEM_ME``."""
    path = Path(path)
    people = me_names(me)
    parts = (
        folder_parts(path, _chat_file, report, "not-a-chat-file")
        if path.is_dir()
        else [file_part(path)]
    )

    def read(part: Part) -> Iterator[Conversation | Quarantined]:
        with part.open() as fp:
            yield from _Reader(part.label, people).read(fp)

    # the same chat and day twice: the first one wins
    yield from unique_conversations(iter_parts(parts, read, report))


def _chat_file(name: str) -> str | None:
    """A folder's saved chat histories are its ``.txt`` files (in name order)."""
    return name if name.lower().endswith(".txt") else None


def is_line_head(head: bytes) -> bool:
    """Whether a file's first bytes are a LINE chat history's header."""
    text = head[:4096].decode("utf-8", "ignore").lstrip("\ufeff")
    lines = text.splitlines()
    if not lines:
        return False
    return lines[0].startswith("[LINE]") or (len(lines) > 1 and bool(_SAVED.match(lines[1])))


def parse_date_line(line: str) -> tuple[str | None] | None:
    """``(YYYY-MM-DD,)`` for a date line (``(None,)`` when it is one but the date is not valid);
    None when the line is not a date line."""
    for pattern in _DATE_LINES:
        m = pattern.match(line)
        if m:
            try:
                return (date(int(m["y"]), int(m["m"]), int(m["d"])).isoformat(),)
            except ValueError:
                return (None,)
    return None


def parse_time(text: str) -> time | None:
    m = _TIME.match(text.strip())
    if not m:
        return None
    hour, minute = int(m["h"]), int(m["min"])
    marker = m["pre"] or m["post"]
    if marker in _AFTERNOON and hour < 12:
        hour += 12
    elif marker in _MORNING and hour == 12:
        hour = 0
    if hour > 23 or minute > 59:
        return None
    return time(hour, minute)


# ---------------------------------------------------------------- reading one export


@dataclass
class _Draft:
    line: int
    clock: str  # the time as written
    at: time | None
    speaker: str | None  # None: a system line
    text: str
    quoted: bool = False  # opened with a quote that is not closed yet
    pending: list[str] = field(default_factory=list)  # lines read while the quote is open
    date: str | None = None  # its date line's day, when it continues the day before past midnight


@dataclass
class _Day:
    day: str
    first_line: int
    drafts: list[_Draft] = field(default_factory=list)


class _Reader:
    def __init__(self, label: str, me: frozenset[str]) -> None:
        self.label = label
        self.me = me
        self.chat: str | None = None
        self.partner: str | None = None  # the other person of a one-to-one chat
        self.unknown: Counter[str] = Counter()
        self.zone: tzinfo | None = None

    def read(self, fp: IO[bytes]) -> Iterator[Conversation | Quarantined]:
        from core.settings import local_zone

        self.zone = local_zone()
        day: _Day | None = None
        after: tuple[str, int] | None = None  # a later date line (day, line) than the day's own
        number = 0
        undated: list[int] = []
        for raw in fp:
            number += 1
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError:
                yield Quarantined(
                    file=self.label, position=number, reason="invalid-utf8", kind="record"
                )
                continue
            line = line.rstrip("\n").removesuffix("\r")
            if number == 1:
                line = line.lstrip("\ufeff")
                if self._header(line):
                    continue
            if number <= 3 and self.chat is not None and (_SAVED.match(line) or not line.strip()):
                continue
            current = day.drafts[-1] if day is not None and day.drafts else None
            if current is not None and current.quoted and self._continue_quoted(current, line):
                continue
            found = parse_date_line(line)
            if found is not None:
                if day is None or not day.drafts:
                    day = _Day(found[0] or UNDATED, number)
                    if found[0] is None:
                        self.unknown["date:unreadable"] += 1
                else:  # the day is handed on once its exchange is over (past midnight, maybe)
                    after = (found[0] or UNDATED, number)
                continue
            draft = self._message(line, number)
            if draft is not None:
                if day is None:
                    undated.append(number)
                    continue
                if after is not None:
                    last = day.drafts[-1]
                    if continues(
                        self._when(last.date or day.day, last.at), self._when(after[0], draft.at)
                    ):
                        draft.date = after[0]  # the exchange goes on past midnight
                    else:
                        yield from self._finish(day)
                        day, after = _Day(*after), None
                        if day.day == UNDATED:
                            self.unknown["date:unreadable"] += 1
                day.drafts.append(draft)
                continue
            if current is not None and line:
                current.text += "\n" + line  # an unquoted continuation line
            elif line.strip() and day is None:
                undated.append(number)
            elif line.strip():
                self.unknown["skipped:stray-line"] += 1
        if day is not None:
            yield from self._finish(day)
        for n in undated:
            yield Quarantined(file=self.label, position=n, reason="no-date-line", kind="record")
        if self.chat is None and number == 0:
            raise ReadError("empty file", file=self.label, record="1", reason="no-records")

    def _header(self, line: str) -> bool:
        m = _HEADER.match(line)
        if not m:
            self.chat = Path(self.label).stem
            return False
        if m["en"]:
            self.chat = m["name"].strip()
            if m["prep"] == "with":
                self.partner = self.chat
        else:
            title = (m["ja"] or "").strip()
            if title.endswith("とのトーク履歴"):
                self.chat = title.removesuffix("とのトーク履歴")
                self.partner = self.chat
            else:
                self.chat = title.removesuffix("のトーク履歴").removesuffix("トーク履歴")
        self.chat = self.chat or Path(self.label).stem
        return True

    def _message(self, line: str, number: int) -> _Draft | None:
        fields = line.split("\t", 2)
        if len(fields) < 2:
            return None
        clock = fields[0]
        at = parse_time(clock)
        if at is None and not re.match(r"^\S{0,4}\s*\d{1,2}:\d{2}", clock.strip()):
            return None  # not a message line: a continuation
        if at is None:
            self.unknown["time:unreadable"] += 1
        if len(fields) == 2:
            speaker, text = None, fields[1]
        else:
            speaker, text = (fields[1] or None), fields[2]
        draft = _Draft(number, clock.strip(), at, speaker, text)
        if text.startswith('"') and not _closes(text[1:]):
            draft.quoted = True
        return draft

    def _continue_quoted(self, draft: _Draft, line: str) -> bool:
        """Add ``line`` to an open quoted message; False when the line is a new message or a
        date line instead (the quote was the message's own first character)."""
        if _closes(line):
            body = "\n".join([draft.text, *draft.pending, line]).rstrip()
            draft.text = body[1:-1].replace('""', '"')
            draft.quoted, draft.pending = False, []
            return True
        if parse_date_line(line) is not None or self._message(line, 0) is not None:
            _unquote_failed(draft)
            return False
        draft.pending.append(line)
        return True

    def _finish(self, day: _Day) -> Iterator[Conversation | Quarantined]:
        for d in day.drafts:
            if d.quoted:  # the file ended inside a quote: keep it as written
                _unquote_failed(d)
        if not day.drafts:
            return
        chat = self.chat or Path(self.label).stem
        chat_id = hashlib.sha1(chat.encode("utf-8"), usedforsecurity=False).hexdigest()[:12]
        key = f"{SOURCE}:{chat_id}:{day.day}"
        messages: list[Message] = []
        used: Counter[str] = Counter()
        for d in day.drafts:
            role, channel, content_type = self._speaker(d)
            minute = d.at.strftime("%H%M") if d.at else "----"
            digest = hashlib.sha1(
                f"{d.speaker or ''}\t{d.text}".encode("utf-8", "surrogatepass"),
                usedforsecurity=False,
            ).hexdigest()[:10]
            node = f"{minute}-{digest}"
            used[node] += 1
            if used[node] > 1:
                node += f"~{used[node]}"
            messages.append(
                Message(
                    key=f"{key}:{node}",
                    node_id=node,
                    role=role,
                    channel=channel,
                    content_type=content_type,
                    text=d.text,
                    created_at=self._when(d.date or day.day, d.at),
                    position=len(messages),
                )
            )
        times = [m.created_at for m in messages if m.created_at]
        unknown, self.unknown = dict(self.unknown), Counter()
        try:
            yield Conversation(
                key=key,
                source=SOURCE,
                external_id=f"{chat_id}:{day.day}",
                title=f"{chat} {day.day}",
                created_at=min(times) if times else None,
                updated_at=max(times) if times else None,
                messages=messages,
                provenance=Provenance(file=self.label, position=day.first_line),
                unknown_types=unknown,
            )
        except ValidationError:
            yield Quarantined(
                file=self.label,
                position=day.first_line,
                reason="parse-error:ValidationError",
                kind="conversation",
            )

    def _speaker(self, d: _Draft) -> tuple[str, Channel, str]:
        if d.speaker is None:
            return "system", Channel.MACHINERY, "system"
        person = is_me(d.speaker, self.me) or (
            not self.me
            and self.partner is not None
            and norm_name(d.speaker) != norm_name(self.partner)
        )
        role = "user" if person else d.speaker
        kind = PLACEHOLDERS.get(unicodedata.normalize("NFKC", d.text.strip()))
        if kind is None:
            kind = PLACEHOLDERS.get(d.text.strip())
        if kind is not None:
            return role, Channel.MACHINERY, kind
        return role, (Channel.PERSON if person else Channel.OTHER), "text"

    def _when(self, day: str, at: time | None) -> datetime | None:
        if day == UNDATED or at is None:
            return None
        local = datetime.combine(date.fromisoformat(day), at, tzinfo=self.zone)
        return local.astimezone(UTC)


def _closes(text: str) -> bool:
    """Whether ``text`` ends a quoted message: it ends with a quote that is not one of a
    doubled pair (``""``)."""
    stripped = text.rstrip()
    trailing = len(stripped) - len(stripped.rstrip('"'))
    return trailing % 2 == 1


def _unquote_failed(draft: _Draft) -> None:
    """A quote that never closed was the message's own first character: the text stays as
    written, and the lines read meanwhile are ordinary continuation lines (blank ones dropped)."""
    draft.text = "\n".join([draft.text, *(p for p in draft.pending if p)])
    draft.quoted, draft.pending = False, []
