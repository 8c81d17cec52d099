"""Streaming importer for the ChatGPT data export (``conversations.json``).

The file is one JSON array; ``ijson.items(f, "item")`` gives one conversation at a time, so a
GB-sized export never sits in memory. See ``shared/docs/formats.md`` section 1 for the format.

Rules (each one is a trap real exports set):

* Messages follow the tree: the active path is ``current_node`` up the ``parent`` chain, never
  ``create_time`` order (it is not monotonic). Off-path nodes (regenerations, edits) are kept too,
  with ``on_active_path=False`` and ``position=-1``.
* Text is byte-exact: no strip, no normalisation. NUL, CRLF and lone surrogates survive.
* ``.get`` everywhere: keys such as ``create_time`` or ``is_user_system_message`` are often missing.
* A conversation we cannot read is yielded as :class:`Quarantined` and the import goes on; a file
  that is not a JSON array, or is cut off, raises :class:`~core.errors.InputError` after every
  complete conversation before the damage was yielded.

Backend note: ijson's fastest backend (``yajl2_c``) silently turns a lone surrogate escape
(``"\\ud800"``) into ``"?"`` and crashes on some others. Seekable inputs are pre-scanned for lone
surrogate escapes (a cheap regex pass); only files that hold one are parsed with ijson's pure Python
backend, which keeps them exactly. Non-seekable streams always use the pure Python backend.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from types import ModuleType
from typing import IO, Any

import ijson
from pydantic import BaseModel, ValidationError

from core.errors import InputError
from core.models import Channel, Conversation, Message, Provenance

SOURCE = "chatgpt"

_CHUNK = 1 << 20  # bytes per read while pre-scanning
_HEAD = 1 << 16  # bytes peeked to check the file is a JSON array

TOOL_TYPES = frozenset(
    {
        "code",
        "execution_output",
        "tether_browsing_display",
        "tether_quote",
        "system_error",
        "sonic_webpage",
        "computer_output",
        "citable_code_output",
    }
)
CONTEXT_TYPES = frozenset(
    {"user_editable_context", "model_editable_context", "thoughts", "reasoning_recap"}
)
VISIBLE_TYPES = frozenset({"text", "multimodal_text"})
KNOWN_TYPES = TOOL_TYPES | CONTEXT_TYPES | VISIBLE_TYPES
HIDDEN_FLAGS = (
    "is_visually_hidden_from_conversation",
    "is_user_system_message",
    "is_contextual_answers_system_message",
    "rebase_developer_message",
)
HIDDEN_ASSISTANT_CHANNELS = frozenset({"analysis", "commentary"})


class Quarantined(BaseModel):
    """A conversation we could not read. ``reason`` is machine text, never message text."""

    file: str
    position: int
    reason: str
    external_id: str | None = None


class _Unparseable(Exception):
    """Internal: this conversation goes to quarantine with ``reason``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# ---------------------------------------------------------------- public entry points


def iter_conversations(path: Path) -> Iterator[Conversation | Quarantined]:
    """Yield every conversation of a ``conversations.json`` file, one at a time."""
    label = str(path)
    try:
        fp = path.open("rb")
    except OSError as exc:
        raise InputError(f"cannot open file ({type(exc).__name__})", file=label) from None
    with fp:
        yield from iter_conversations_from_stream(fp, label)


def iter_conversations_from_stream(
    fp: IO[bytes], file_label: str
) -> Iterator[Conversation | Quarantined]:
    """Yield every conversation of a binary stream holding a ChatGPT ``conversations.json``."""
    backend = _choose_backend(fp, file_label)
    reader = _HeadReader(fp)
    _check_is_array(reader.head, file_label)
    done = 0  # complete conversations read so far = array index of the one being read
    try:
        for item in backend.items(reader, "item"):
            yield parse_conversation(item, file_label, done)
            done += 1
    except (ijson.JSONError, UnicodeDecodeError) as exc:
        # ijson's message quotes the surrounding JSON text (private): report the class only.
        raise InputError(
            f"invalid or truncated JSON at array position {done} ({type(exc).__name__})",
            file=file_label,
            record=str(done),
        ) from None


def parse_conversation(item: Any, file_label: str, position: int) -> Conversation | Quarantined:
    """Turn one exported conversation object into a Conversation, or a Quarantined record."""
    external_id = _conversation_id(item)
    try:
        return _build_conversation(item, file_label, position)
    except _Unparseable as exc:
        reason = exc.reason
    except (ValidationError, ValueError, TypeError, KeyError, AttributeError) as exc:
        reason = f"parse-error:{type(exc).__name__}"
    return Quarantined(file=file_label, position=position, reason=reason, external_id=external_id)


# ---------------------------------------------------------------- stream handling


class _HeadReader:
    """A read-only binary stream that peeks the first bytes (minus a UTF-8 BOM) and replays them."""

    def __init__(self, fp: IO[bytes]) -> None:
        self._fp = fp
        head = fp.read(_HEAD)
        if not isinstance(head, bytes):
            raise TypeError("the stream must be opened in binary mode")
        self.head = head.removeprefix(b"\xef\xbb\xbf")
        self._pending = self.head

    def read(self, size: int = -1) -> bytes:
        if self._pending:
            if size is None or size < 0:
                data, self._pending = self._pending + self._fp.read(), b""
                return data
            data, self._pending = self._pending[:size], self._pending[size:]
            return data
        return self._fp.read(size)


def _check_is_array(head: bytes, file_label: str) -> None:
    stripped = head.lstrip()
    if not stripped.startswith(b"["):
        what = "empty file" if not stripped else "not a JSON array"
        raise InputError(f"{what} at array position 0", file=file_label, record="0")


# A JSON escape scan that stays aligned on backslashes: an escaped backslash pair, a valid
# surrogate pair, or (group 1) a lone surrogate escape.
_SURROGATE_SCAN = re.compile(
    rb"\\\\"
    rb"|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}"
    rb"|(\\u[dD][89a-fA-F][0-9a-fA-F]{2})"
)
_SCAN_GUARD = 12  # longest match: a surrogate pair escape


def _choose_backend(fp: IO[bytes], file_label: str) -> ModuleType:
    """ijson's default backend, unless the input holds a lone surrogate escape (or can't be scanned)."""
    try:
        seekable = fp.seekable()
    except (AttributeError, OSError):
        seekable = False
    if not seekable:
        return _python_backend()
    start = fp.tell()
    try:
        lone = _has_lone_surrogate_escape(fp)
    except OSError as exc:
        raise InputError(f"cannot read file ({type(exc).__name__})", file=file_label) from None
    fp.seek(start)
    return _python_backend() if lone else ijson


def _python_backend() -> ModuleType:
    """ijson's pure Python backend: slower, but keeps lone surrogates exactly."""
    backend: ModuleType = ijson.get_backend("python")
    return backend


def _has_lone_surrogate_escape(fp: IO[bytes]) -> bool:
    """True when the JSON bytes hold a ``\\uD800``-``\\uDFFF`` escape that is not a valid pair."""
    carry = b""
    while True:
        chunk = fp.read(_CHUNK)
        buf = carry + chunk
        if not chunk:
            return any(m.group(1) for m in _SURROGATE_SCAN.finditer(buf))
        limit = len(buf) - _SCAN_GUARD
        cut = max(limit, 0)
        for match in _SURROGATE_SCAN.finditer(buf):
            if match.end() > limit:
                cut = match.start()
                break
            if match.group(1):
                return True
            cut = max(limit, match.end())
        carry = buf[cut:]


# ---------------------------------------------------------------- conversation


def _conversation_id(item: Any) -> str | None:
    if not isinstance(item, dict):
        return None
    for key in ("conversation_id", "id"):
        value = item.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _build_conversation(item: Any, file_label: str, position: int) -> Conversation:
    if not isinstance(item, dict):
        raise _Unparseable("not-an-object")
    conv_id = _conversation_id(item)
    if conv_id is None:
        raise _Unparseable("missing-id")
    mapping = item.get("mapping")
    if not isinstance(mapping, dict):
        raise _Unparseable("mapping-not-object")
    _check_nodes(mapping)
    active = _active_path(mapping, item.get("current_node"))
    unknown: Counter[str] = Counter()
    messages = _build_messages(conv_id, mapping, active, unknown)
    times = [m.created_at for m in messages if m.created_at is not None]
    created = _epoch(item.get("create_time")) or (min(times) if times else None)
    updated = _epoch(item.get("update_time"))
    return Conversation(
        key=f"{SOURCE}:{conv_id}",
        source=SOURCE,
        external_id=conv_id,
        title=_str_or_none(item.get("title")),
        created_at=created or updated,
        updated_at=updated or (max(times) if times else None),
        messages=messages,
        provenance=Provenance(file=file_label, position=position),
        unknown_types=dict(unknown),
    )


def _check_nodes(mapping: dict[Any, Any]) -> None:
    for node in mapping.values():
        if not isinstance(node, dict):
            raise _Unparseable("node-not-object")
        message = node.get("message")
        if message is not None and not isinstance(message, dict):
            raise _Unparseable("message-not-object")


def _str_or_none(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def _s(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _epoch(value: Any) -> datetime | None:
    """A float epoch (ijson gives Decimal) as a UTC datetime; None for anything unusable."""
    if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
        return None
    try:
        seconds = float(value)
        if not math.isfinite(seconds):
            return None
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None


# ---------------------------------------------------------------- the tree


def _parent(mapping: dict[Any, Any], node_id: str) -> str | None:
    parent = mapping[node_id].get("parent")
    return parent if isinstance(parent, str) else None


def _children(mapping: dict[Any, Any], node_id: str) -> list[str]:
    children = mapping[node_id].get("children")
    if not isinstance(children, list):
        return []
    return [c for c in children if isinstance(c, str)]


def _chain_up(mapping: dict[Any, Any], start: str) -> list[str]:
    """``start`` and its ancestors, nearest first; stops at a missing parent or a cycle."""
    chain: list[str] = []
    seen: set[str] = set()
    node: str | None = start
    while node is not None and node in mapping and node not in seen:
        seen.add(node)
        chain.append(node)
        node = _parent(mapping, node)
    return chain


def _active_path(mapping: dict[Any, Any], current: Any) -> list[str]:
    """Root-first node ids from the root to ``current_node`` (or the fallback leaf)."""
    start = current if isinstance(current, str) and current in mapping else _fallback_leaf(mapping)
    if start is None:
        return []
    return list(reversed(_chain_up(mapping, start)))


def _node_time(mapping: dict[Any, Any], node_id: str) -> float:
    message = mapping[node_id].get("message")
    when = _epoch(message.get("create_time")) if isinstance(message, dict) else None
    return when.timestamp() if when is not None else -math.inf


def _fallback_leaf(mapping: dict[Any, Any]) -> str | None:
    """The deepest leaf; among equally deep leaves the newest ``create_time``."""
    ids = [k for k in mapping if isinstance(k, str)]
    leaves = [k for k in ids if not any(c in mapping for c in _children(mapping, k))] or ids
    if not leaves:
        return None
    return max(leaves, key=lambda k: (len(_chain_up(mapping, k)), _node_time(mapping, k), k))


def _tree_order(mapping: dict[Any, Any]) -> list[str]:
    """Every node id once: depth-first from the roots in children order, then any orphans."""
    ids = sorted(k for k in mapping if isinstance(k, str))
    roots = [k for k in ids if _parent(mapping, k) not in mapping]
    order: list[str] = []
    seen: set[str] = set()
    for start in [*roots, *ids]:
        stack = [start]
        while stack:
            node = stack.pop()
            if node in seen or node not in mapping:
                continue
            seen.add(node)
            order.append(node)
            stack.extend(reversed(_children(mapping, node)))
    return order


def _branch_index(mapping: dict[Any, Any], node_id: str) -> int:
    parent = _parent(mapping, node_id)
    if parent is None or parent not in mapping:
        return 0
    siblings = _children(mapping, parent)
    return siblings.index(node_id) if node_id in siblings else 0


# ---------------------------------------------------------------- messages


def _build_messages(
    conv_id: str, mapping: dict[Any, Any], active: list[str], unknown: Counter[str]
) -> list[Message]:
    active_positions: dict[str, int] = {}
    for node_id in active:
        if isinstance(mapping[node_id].get("message"), dict):
            active_positions[node_id] = len(active_positions)
    messages: list[Message] = []
    for node_id in _tree_order(mapping):
        message = mapping[node_id].get("message")
        if not isinstance(message, dict):
            continue
        messages.append(
            _build_message(conv_id, node_id, mapping, message, active_positions, unknown)
        )
    return messages


def _build_message(
    conv_id: str,
    node_id: str,
    mapping: dict[Any, Any],
    message: dict[str, Any],
    active_positions: dict[str, int],
    unknown: Counter[str],
) -> Message:
    author = message.get("author")
    role = _s(author.get("role")) if isinstance(author, dict) else ""
    content = message.get("content")
    if not isinstance(content, dict):
        content = {}
    content_type = _s(content.get("content_type"))
    raw_type: str | None = None
    if content_type in KNOWN_TYPES:
        text = _content_text(content_type, content)
        channel = _channel(role, content_type, message)
    else:
        raw_type = content_type or "missing"
        unknown[raw_type] += 1
        text = json.dumps(content, ensure_ascii=False, default=_json_default)
        channel = Channel.MACHINERY
    on_path = node_id in active_positions
    return Message(
        key=f"{SOURCE}:{conv_id}:{node_id}",
        node_id=node_id,
        parent_id=_parent(mapping, node_id),
        role=role or "unknown",
        channel=channel,
        content_type=content_type or "missing",
        text=text,
        created_at=_epoch(message.get("create_time")),
        position=active_positions.get(node_id, -1),
        on_active_path=on_path,
        branch_index=_branch_index(mapping, node_id),
        raw_type=raw_type,
    )


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    raise TypeError(type(value).__name__)


def _string_parts(parts: Any, with_audio: bool) -> list[str]:
    if not isinstance(parts, list):
        return []
    texts: list[str] = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
        elif (
            with_audio
            and isinstance(part, dict)
            and part.get("content_type") == "audio_transcription"
            and isinstance(part.get("text"), str)
        ):
            texts.append(part["text"])
    return texts


def _content_text(content_type: str, content: dict[str, Any]) -> str:
    """The exported text of a known content type, exactly as exported."""
    if content_type in VISIBLE_TYPES:
        parts = _string_parts(content.get("parts"), with_audio=content_type == "multimodal_text")
        return "\n".join(parts)
    if content_type == "tether_browsing_display":
        return _s(content.get("result"))
    if content_type == "thoughts":
        thoughts = content.get("thoughts")
        items = thoughts if isinstance(thoughts, list) else []
        return "\n".join(_s(t.get("content")) for t in items if isinstance(t, dict))
    if content_type == "reasoning_recap":
        return _s(content.get("content"))
    if content_type == "user_editable_context":
        return _s(content.get("user_profile")) + "\n" + _s(content.get("user_instructions"))
    if content_type == "model_editable_context":
        return _s(content.get("model_set_context"))
    if content_type == "citable_code_output":
        return _s(content.get("output_str"))
    if content_type == "sonic_webpage":
        return _s(content.get("text")) or _s(content.get("snippet"))
    if content_type == "computer_output":
        return json.dumps(content, ensure_ascii=False, default=_json_default)
    return _s(content.get("text"))  # code, execution_output, tether_quote, system_error


def _is_hidden(message: dict[str, Any]) -> bool:
    metadata = message.get("metadata")
    return isinstance(metadata, dict) and any(metadata.get(flag) for flag in HIDDEN_FLAGS)


def _channel(role: str, content_type: str, message: dict[str, Any]) -> Channel:
    """Who the text belongs to. Only PERSON and ASSISTANT reach drafting."""
    if role == "system" or content_type in CONTEXT_TYPES or _is_hidden(message):
        return Channel.MACHINERY
    recipient = message.get("recipient")
    if (
        content_type in TOOL_TYPES
        or role == "tool"
        or (role == "assistant" and recipient is not None and recipient != "all")
    ):
        return Channel.TOOL
    if role == "user":
        return Channel.PERSON
    if role == "assistant" and message.get("channel") not in HIDDEN_ASSISTANT_CHANNELS:
        return Channel.ASSISTANT
    return Channel.MACHINERY
