"""Importer for Telegram Desktop's JSON export (``telegram``): ``result.json``.

Input: a ``result.json`` (or any ``.json`` of that shape), or a folder holding them (each
``ChatExport_*/result.json``). Two shapes (``shared/docs/formats.md`` §5.2):

* one chat: ``{name, type, id, messages: [...]}``;
* the whole account: ``{about, personal_information: {user_id, first_name, …}, chats: {list:
  [chat, …]}, left_chats: {list: [...]}, …}``.

The file is streamed in two passes: ijson's event stream once for the chats' names, types, ids
and message counts, then the messages built natively by ijson one at a time (a chat's messages
are handed on a day at a time); memory holds one day of one chat.

Decisions:

* **Conversations**: one per chat and day (in the configured zone, ``PMEM_TZ``), keyed
  ``telegram:<chat id>:<YYYY-MM-DD>``; the title is the chat's name and the day. An exchange
  that runs past midnight stays in the day it started on: a message within ``SESSION_GAP`` (an
  hour) of the one before it continues that conversation (``importers._common.continues``). Messages are keyed
  ``<conversation key>:<message id>``. Times come from ``date_unixtime`` (UTC), else from
  ``date`` read in the configured zone; a message with neither goes to ``…:undated``.
* **Text as written**: ``text`` is a string or a list of strings and entities (``{type, text}``:
  bold, links, mentions, …), flattened to its plain text; ``text_entities`` is used when
  ``text`` is missing.
* **Who speaks** (``core.people``): in a whole-account export, the account's own
  ``user_id`` (``personal_information``) is the person; so is a sender named by ``PMEM_ME`` /
  ``--me``. Without either, in a ``personal_chat`` everyone but the chat's partner is the person,
  and in ``saved_messages`` everything is. In a ``bot_chat`` the bot's messages are the
  assistant's. Every other sender is ``other`` (third-party data) with their name as the role.
* **Machinery**: service messages (pins, joins, calls, title changes: ``type: service``) are
  machinery with content type ``service:<action>`` and the actor's name as the role; a message
  that is only a sticker, photo, file, voice note, location, poll or contact is machinery with
  that content type and its caption, sticker emoji or ``[photo]``-style placeholder as text.
  Unknown message types are kept as machinery and counted (``type:<x>``).
* A message that is not an object or has no usable id is set aside (``not-an-object`` /
  ``missing-id``, position = its index in the chat's ``messages``); a file that is not JSON, ends
  early or nests deeper than any export does (``too-deep``) raises an error naming the file,
  after everything read before it was handed on.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from pathlib import Path
from typing import IO, Any

import ijson
from pydantic import ValidationError

from core.models import Channel, Conversation, Message, Provenance
from core.people import is_me, me_names, norm_name
from importers._common import (
    RECORD_ERRORS,
    Quarantined,
    ReadError,
    ReadReport,
    continues,
    raw_json,
    unique_conversations,
)
from importers._containers import Part, file_part, folder_parts, iter_parts

SOURCE = "telegram"
UNDATED = "undated"
_CHAT_PREFIXES = ("", "chats.list.item", "left_chats.list.item")
_UNNAMED = {"saved_messages": "Saved Messages"}
_SCAN_BUFFER = 8192  # bytes parsed at a time by the first pass (a hostile nesting stops early)
MAX_PREFIX = 2000  # characters of an ijson path (about 400 levels): deeper is a hostile file
_SCALARS = ("string", "number", "boolean", "null")
_MEDIA_KEYS = (
    ("sticker_emoji", "sticker"),
    ("photo", "photo"),
    ("location_information", "location"),
    ("poll", "poll"),
    ("contact_information", "contact"),
    ("file", "file"),
)


def iter_conversations(
    path: Path, *, report: ReadReport | None = None, me: str | None = None
) -> Iterator[Conversation | Quarantined]:
    """Yield one conversation per chat and day of one export file, or of every ``result.json``
    under a folder (the other files are counted in ``report.skipped``)."""
    path = Path(path)
    people = me_names(me)
    parts = folder_parts(path, _export_file, report) if path.is_dir() else [file_part(path)]

    def read(part: Part) -> Iterator[Conversation | Quarantined]:
        with part.open() as fp:
            yield from _Reader(part.label, people).read(fp)

    # the same chat in two exports of one folder: the first one wins
    yield from unique_conversations(iter_parts(parts, read, report))


def _export_file(name: str) -> str | None:
    """A folder's Telegram exports are its ``result.json`` files."""
    return name if name.lower() == "result.json" else None


def is_telegram_head(head: bytes) -> bool:
    """Whether a JSON file's first bytes look like a Telegram Desktop export."""
    if b'"date_unixtime"' in head and b'"messages"' in head:
        return True
    return b'"personal_information"' in head and (b'"chats"' in head or b'"about"' in head)


def flatten(text: Any) -> str:
    """Telegram's ``text``: a string, or a list of strings and ``{type, text}`` entities."""
    if isinstance(text, str):
        return text
    if isinstance(text, list):
        return "".join(_entity_text(part) for part in text)
    return ""


def _entity_text(part: Any) -> str:
    if isinstance(part, str):
        return part
    value = part.get("text") if isinstance(part, dict) else None
    return value if isinstance(value, str) else ""


# ---------------------------------------------------------------- reading


@dataclass
class _Chat:
    prefix: str
    name: str | None = None
    type: str | None = None
    id: str | None = None
    index: int = 0  # messages seen (for quarantine positions)
    count: int = 0  # messages in the file (the first pass)
    day: str | None = None
    first: int = 0
    messages: list[Message] = field(default_factory=list)
    unknown: Counter[str] = field(default_factory=Counter)


class _Reader:
    def __init__(self, label: str, me: frozenset[str]) -> None:
        self.label = label
        self.me = me
        self.own_id: str | None = None
        self.zone: tzinfo | None = None

    def read(self, fp: IO[bytes]) -> Iterator[Conversation | Quarantined]:
        """Two passes: the event stream once for the chats' names, types, ids and message counts
        (and the account's own id), then each group's messages built natively by ijson, one at a
        time (``ijson.items``), assigned to their chats in order by those counts."""
        from core.settings import local_zone

        self.zone = local_zone()
        chats, damage = self._scan(fp)
        for group in dict.fromkeys(c.prefix for c in chats if c.count):
            members = iter([c for c in chats if c.prefix == group and c.count])
            chat = next(members)
            left = chat.count
            fp.seek(0)
            path = f"{group}.messages.item" if group else "messages.item"
            try:
                for msg in ijson.items(fp, path, use_float=True):
                    while left == 0:
                        yield from self._flush(chat)
                        chat = next(members)
                        left = chat.count
                    left -= 1
                    yield from self._message(chat, msg)
            except (ijson.JSONError, UnicodeDecodeError):
                pass  # the damage the first pass found: everything before it is handed on
            yield from self._flush(chat)
            for rest in members:
                yield from self._flush(rest)
        if damage is not None:
            done = sum(c.index for c in chats)
            raise ReadError(
                f"not readable as JSON after {done} messages ({damage})",
                file=self.label,
                record=str(done),
                reason="invalid-json",
            )

    def _scan(self, fp: IO[bytes]) -> tuple[list[_Chat], str | None]:
        """The chats in document order with their metadata and message counts, and the name of
        the error where the file stopped being JSON (None: read to the end)."""
        chats: list[_Chat] = []
        open_chats: dict[str, _Chat] = {}
        try:
            for prefix, event, value in ijson.parse(fp, use_float=True, buf_size=_SCAN_BUFFER):
                if len(prefix) > MAX_PREFIX:  # nesting no export has: stop before it costs memory
                    raise ReadError(
                        "nesting too deep", file=self.label, record="0", reason="too-deep"
                    )
                if event == "map_key" or event == "end_array":
                    continue
                owner = _message_owner(prefix)
                if owner is not None and owner in open_chats:
                    if event != "end_map":
                        open_chats[owner].count += 1  # one message (an object or not)
                elif event == "start_map" and prefix in _CHAT_PREFIXES:
                    open_chats[prefix] = _Chat(prefix)
                    chats.append(open_chats[prefix])
                elif event == "end_map" and prefix in open_chats:
                    del open_chats[prefix]
                elif event in _SCALARS:
                    self._scalar(open_chats, prefix, value)
        except (ijson.JSONError, UnicodeDecodeError) as exc:
            return chats, type(exc).__name__
        return chats, None

    def _scalar(self, chats: dict[str, _Chat], prefix: str, value: Any) -> None:
        if prefix == "personal_information.user_id" and value is not None:
            self.own_id = f"user{_id_text(value)}"
            return
        owner, _, key = prefix.rpartition(".")
        if "." not in prefix:
            owner, key = "", prefix
        chat = chats.get(owner)
        if chat is not None and key in ("name", "type", "id") and value is not None:
            setattr(chat, key, _id_text(value) if key == "id" else str(value))

    # ------------------------------------------------------------ one message

    def _message(self, chat: _Chat | None, msg: Any) -> Iterator[Conversation | Quarantined]:
        if chat is None:
            return
        index = chat.index
        chat.index += 1
        if not isinstance(msg, dict):
            yield Quarantined(
                file=self.label, position=index, reason="not-an-object", kind="record"
            )
            return
        try:
            mid = msg.get("id")
            if isinstance(mid, bool) or not isinstance(mid, int | str) or str(mid) == "":
                yield Quarantined(
                    file=self.label, position=index, reason="missing-id", kind="record"
                )
                return
            when = self._time(msg)
            day = when.astimezone(self.zone).date().isoformat() if when else UNDATED
            last = chat.messages[-1].created_at if chat.messages else None
            if chat.day is not None and day != chat.day and not continues(last, when):
                yield from self._flush(
                    chat
                )  # past midnight, the exchange goes on: one conversation
            if chat.day is None:
                chat.day, chat.first = day, index
            role, channel, content_type, text, raw_type = self._classify(chat, msg)
            if raw_type is not None:
                chat.unknown[raw_type] += 1
            node = str(mid)
            chat.messages.append(
                Message(
                    key=f"{self._conv_key(chat)}:{node}",
                    node_id=node,
                    role=role,
                    channel=channel,
                    content_type=content_type,
                    text=text,
                    created_at=when,
                    position=len(chat.messages),
                    raw_type=raw_type,
                    parent_id=_reply(chat, self, msg),
                )
            )
        except RECORD_ERRORS as exc:
            yield Quarantined(
                file=self.label,
                position=index,
                reason=f"parse-error:{type(exc).__name__}",
                kind="record",
            )

    def _time(self, msg: dict[str, Any]) -> datetime | None:
        unix = msg.get("date_unixtime")
        if (
            isinstance(unix, str)
            and unix.strip().isdigit()
            or isinstance(unix, int | float)
            and not isinstance(unix, bool)
        ):
            try:
                return datetime.fromtimestamp(float(unix), UTC)
            except (OverflowError, OSError, ValueError):
                pass
        local = msg.get("date")
        if isinstance(local, str) and local:
            try:
                parsed = datetime.fromisoformat(local)
            except ValueError:
                return None
            if parsed.tzinfo is None:
                parsed = parsed.replace(tzinfo=self.zone)
            return parsed.astimezone(UTC)
        return None

    def _classify(
        self, chat: _Chat, msg: dict[str, Any]
    ) -> tuple[str, Channel, str, str, str | None]:
        """``(role, channel, content type, text, raw type)``."""
        kind = msg.get("type")
        text = flatten(msg["text"]) if "text" in msg else flatten(msg.get("text_entities"))
        if kind == "service":
            actor = _name(msg.get("actor"))
            action = _name(msg.get("action")) or "unknown"
            role = (
                "system"
                if actor is None
                else ("user" if self._is_person(chat, actor, msg.get("actor_id")) else actor)
            )
            return role, Channel.MACHINERY, f"service:{action}", text or action, None
        sender = _name(msg.get("from"))
        person = self._is_person(chat, sender, msg.get("from_id"))
        bot = chat.type == "bot_chat" and not person
        role = "user" if person else ("assistant" if bot else (sender or "(deleted account)"))
        if kind not in ("message", None):
            return role, Channel.MACHINERY, str(kind), text or raw_json(msg), f"type:{kind}"
        media = _media(msg)
        if media is not None and not text.strip():
            label = (
                msg.get("sticker_emoji")
                if media == "sticker" and isinstance(msg.get("sticker_emoji"), str)
                else None
            )
            return role, Channel.MACHINERY, media, label or f"[{media}]", None
        if person:
            return role, Channel.PERSON, "text", text, None
        return role, (Channel.ASSISTANT if bot else Channel.OTHER), "text", text, None

    def _is_person(self, chat: _Chat, name: str | None, sender_id: Any) -> bool:
        if self.own_id is not None and isinstance(sender_id, str) and sender_id == self.own_id:
            return True
        if is_me(name, self.me):
            return True
        if self.me or self.own_id is not None:
            return False
        if chat.type == "saved_messages":
            return True
        if chat.type in ("personal_chat", "bot_chat") and chat.name and name is not None:
            return norm_name(name) != norm_name(chat.name)
        return False

    # ------------------------------------------------------------ a day of a chat

    def _conv_key(self, chat: _Chat) -> str:
        return f"{SOURCE}:{self._chat_id(chat)}:{chat.day}"

    def _chat_id(self, chat: _Chat) -> str:
        if chat.id:
            return chat.id
        name = (chat.name or Path(self.label).stem).encode("utf-8", "surrogatepass")
        return "name-" + hashlib.sha1(name, usedforsecurity=False).hexdigest()[:12]

    def _flush(self, chat: _Chat) -> Iterator[Conversation | Quarantined]:
        if not chat.messages or chat.day is None:
            chat.day = None
            return
        times = [m.created_at for m in chat.messages if m.created_at]
        key = self._conv_key(chat)
        try:
            conv = Conversation(
                key=key,
                source=SOURCE,
                external_id=f"{self._chat_id(chat)}:{chat.day}",
                title=f"{chat.name or _UNNAMED.get(chat.type or '', 'Telegram')} {chat.day}",
                created_at=min(times) if times else None,
                updated_at=max(times) if times else None,
                messages=chat.messages,
                provenance=Provenance(file=self.label, position=chat.first),
                unknown_types=dict(chat.unknown),
            )
        except ValidationError:
            conv = None
        position = chat.first
        chat.messages, chat.unknown, chat.day = [], Counter(), None
        if conv is None:
            yield Quarantined(
                file=self.label, position=position, reason="parse-error:ValidationError"
            )
            return
        yield conv


def _message_owner(prefix: str) -> str | None:
    """The chat prefix whose ``messages`` array ``prefix`` is an item of; None otherwise."""
    if prefix == "messages.item":
        return ""
    if prefix.endswith(".messages.item"):
        return prefix.removesuffix(".messages.item")
    return None


def _media(msg: dict[str, Any]) -> str | None:
    media_type = msg.get("media_type")
    if isinstance(media_type, str) and media_type:
        return media_type
    for key, kind in _MEDIA_KEYS:
        if msg.get(key) not in (None, ""):
            return kind
    return None


def _reply(chat: _Chat, reader: _Reader, msg: dict[str, Any]) -> str | None:
    target = msg.get("reply_to_message_id")
    if isinstance(target, int) and not isinstance(target, bool):
        return str(target)
    return None


def _name(value: Any) -> str | None:
    return value.strip() if isinstance(value, str) and value.strip() else None


def _id_text(value: Any) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
