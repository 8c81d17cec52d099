"""Streaming importer for the ChatGPT data export (``conversations.json``).

Input: the export zip (members read in place, never extracted), a folder, a single
``conversations.json``, or sharded ``conversations-NNN.json`` files (in a zip or a folder; read in
numeric order). Each file is one JSON array; ijson gives one conversation at a time, so a GB-sized
export never sits in memory. See ``shared/docs/formats.md`` section 1 for the format.

Rules (each one is a trap real exports set):

* Messages follow the tree: the active path is ``current_node`` up the ``parent`` chain, never
  ``create_time`` order (it is not monotonic). Off-path nodes (regenerations, edits) are kept too,
  with ``on_active_path=False`` and ``position=-1``.
* Text is byte-exact: no strip, no normalisation. NUL, CRLF and lone surrogates survive.
* ``.get`` everywhere: keys such as ``create_time`` or ``is_user_system_message`` are often missing.
* A conversation we cannot read is yielded as :class:`Quarantined` and the import goes on; a file
  that is not a JSON array, or is cut off, raises :class:`~core.errors.InputError` after every
  complete conversation before the damage was yielded. In a sharded export the damaged shard is
  quarantined instead (``kind="file"``) and the next shard is read.
* A conversation id seen twice in one import (e.g. in two shards) is quarantined the second time
  (``duplicate-id``): the first one read is kept.
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
from typing import IO, Any

from pydantic import ValidationError

from core.models import Channel, Conversation, Message, Provenance
from importers._common import (
    Quarantined,
    ReadError,
    ReadReport,
    json_default,
    unique_conversations,
)
from importers._containers import (
    Part,
    file_part,
    folder_parts,
    is_zip,
    iter_parts,
    open_zip,
    zip_parts,
)
from importers._jsonarray import BadItem, iter_array_items

__all__ = [
    "SOURCE",
    "Quarantined",
    "iter_conversations",
    "iter_conversations_from_stream",
    "parse_conversation",
    "shard_order",
]

SOURCE = "chatgpt"

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

_SHARD = re.compile(r"conversations-(\d+)\.json", re.IGNORECASE)


class _Unparseable(Exception):
    """Internal: this conversation goes to quarantine with ``reason``."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# ---------------------------------------------------------------- public entry points


def shard_order(name: str) -> tuple[int, int] | None:
    """Sort key of a conversations file name: ``conversations.json`` first, then shards by number."""
    if name.lower() == "conversations.json":
        return (0, 0)
    match = _SHARD.fullmatch(name)
    return (1, int(match.group(1))) if match else None


SKIP_REASON = "not-a-conversations-file"


def iter_conversations(
    path: Path, *, report: ReadReport | None = None
) -> Iterator[Conversation | Quarantined]:
    """Yield every conversation of a ChatGPT export: zip, folder, or one conversations file.
    Other files of the export (``chat.html``, images, …) are counted in ``report.skipped``."""
    path = Path(path)
    if path.is_dir():
        parts = folder_parts(path, shard_order, report, SKIP_REASON)
        if not parts:
            raise ReadError("no conversations.json in folder", file=str(path), reason="no-export")
        yield from unique_conversations(iter_parts(parts, _read_part, report))
        return
    if is_zip(path):
        yield from _iter_zip(path, report)
        return
    yield from unique_conversations(iter_parts([file_part(path)], _read_part, report))


def iter_conversations_from_stream(
    fp: IO[bytes], file_label: str, *, member: str | None = None
) -> Iterator[Conversation | Quarantined]:
    """Yield every conversation of a binary stream holding a ChatGPT ``conversations.json``."""
    for position, item in iter_array_items(fp, file_label, member):
        if isinstance(item, BadItem):  # bad bytes in this record only: the rest goes on
            yield Quarantined(file=file_label, position=position, reason=item.reason, member=member)
        else:
            yield parse_conversation(item, file_label, position, member=member)


def parse_conversation(
    item: Any, file_label: str, position: int, *, member: str | None = None
) -> Conversation | Quarantined:
    """Turn one exported conversation object into a Conversation, or a Quarantined record."""
    external_id = _conversation_id(item)
    try:
        return _build_conversation(
            item, Provenance(file=file_label, position=position, member=member)
        )
    except _Unparseable as exc:
        reason = exc.reason
    except (ValidationError, ValueError, TypeError, KeyError, AttributeError) as exc:
        reason = f"parse-error:{type(exc).__name__}"
    return Quarantined(
        file=file_label, position=position, reason=reason, external_id=external_id, member=member
    )


# ---------------------------------------------------------------- containers


def _iter_zip(path: Path, report: ReadReport | None) -> Iterator[Conversation | Quarantined]:
    with open_zip(path) as archive:
        parts, refused = zip_parts(archive, str(path), shard_order, report, SKIP_REASON)
        yield from refused
        if not parts:
            raise ReadError("no conversations.json in the zip", file=str(path), reason="no-export")
        yield from unique_conversations(iter_parts(parts, _read_part, report))


def _read_part(part: Part) -> Iterator[Conversation | Quarantined]:
    with part.open() as fp:
        yield from iter_conversations_from_stream(fp, part.label, member=part.member)


# ---------------------------------------------------------------- conversation


def _conversation_id(item: Any) -> str | None:
    if not isinstance(item, dict):
        return None
    for key in ("conversation_id", "id"):
        value = item.get(key)
        if isinstance(value, str) and value:
            return value
    return None


def _build_conversation(item: Any, provenance: Provenance) -> Conversation:
    if not isinstance(item, dict):
        raise _Unparseable("not-an-object")
    conv_id = _conversation_id(item)
    if conv_id is None:
        raise _Unparseable("missing-id")
    mapping = item.get("mapping")
    if not isinstance(mapping, dict):
        raise _Unparseable("mapping-not-object")
    _check_nodes(mapping)
    tree = _Tree(mapping)
    active = _active_path(tree, item.get("current_node"))
    unknown: Counter[str] = Counter()
    messages = _build_messages(conv_id, tree, active, unknown)
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
        provenance=provenance,
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


class _Tree:
    """A conversation's node links, read once: each node's parent (None when it is not a
    string) and its children (the strings of its ``children`` list)."""

    __slots__ = ("children", "mapping", "parent")

    def __init__(self, mapping: dict[Any, Any]) -> None:
        self.mapping = mapping
        self.parent: dict[Any, str | None] = {}
        self.children: dict[Any, list[str]] = {}
        for node_id, node in mapping.items():
            parent = node.get("parent")
            self.parent[node_id] = parent if isinstance(parent, str) else None
            kids = node.get("children")
            self.children[node_id] = (
                [c for c in kids if isinstance(c, str)] if isinstance(kids, list) else []
            )


def _chain_up(tree: _Tree, start: str) -> list[str]:
    """``start`` and its ancestors, nearest first; stops at a missing parent or a cycle."""
    chain: list[str] = []
    seen: set[str] = set()
    parent = tree.parent
    node: str | None = start
    while node is not None and node in parent and node not in seen:
        seen.add(node)
        chain.append(node)
        node = parent[node]
    return chain


def _active_path(tree: _Tree, current: Any) -> list[str]:
    """Root-first node ids from the root to ``current_node`` (or the fallback leaf)."""
    start = current if isinstance(current, str) and current in tree.parent else _fallback_leaf(tree)
    if start is None:
        return []
    return list(reversed(_chain_up(tree, start)))


def _node_time(mapping: dict[Any, Any], node_id: str) -> float:
    message = mapping[node_id].get("message")
    when = _epoch(message.get("create_time")) if isinstance(message, dict) else None
    return when.timestamp() if when is not None else -math.inf


def _fallback_leaf(tree: _Tree) -> str | None:
    """The deepest leaf; among equally deep leaves the newest ``create_time``."""
    ids = [k for k in tree.parent if isinstance(k, str)]
    leaves = [k for k in ids if not any(c in tree.parent for c in tree.children[k])] or ids
    if not leaves:
        return None
    depth = _depths(tree, ids)
    return max(leaves, key=lambda k: (depth[k], _node_time(tree.mapping, k), k))


def _depths(tree: _Tree, ids: list[str]) -> dict[str, int]:
    """Number of nodes from each node up to its root, each node walked once (a cycle ends the
    walk where it closes)."""
    depth: dict[str, int] = {}
    parent = tree.parent
    for start in ids:
        path: list[str] = []
        seen: set[str] = set()
        node: str | None = start
        while node is not None and node in parent and node not in depth and node not in seen:
            seen.add(node)
            path.append(node)
            node = parent[node]
        base = depth.get(node, 0) if node is not None else 0
        for n in reversed(path):
            base += 1
            depth[n] = base
    return depth


def _tree_order(tree: _Tree) -> list[str]:
    """Every node id once: depth-first from the roots in children order, then any orphans."""
    parent, children = tree.parent, tree.children
    ids = sorted(k for k in parent if isinstance(k, str))
    roots = [k for k in ids if parent[k] not in parent]
    order: list[str] = []
    seen: set[str] = set()
    for start in [*roots, *ids]:
        stack = [start]
        while stack:
            node = stack.pop()
            if node in seen or node not in parent:
                continue
            seen.add(node)
            order.append(node)
            stack.extend(reversed(children[node]))
    return order


def _branch_indexes(tree: _Tree) -> dict[str, int]:
    """Each node's index among its parent's children (its first place when listed twice), for
    every node at once: 30,000 regenerations of one prompt stay linear."""
    index: dict[str, int] = {}
    parents = tree.parent
    for node_id, parent in parents.items():
        if not isinstance(node_id, str):
            continue
        if parent is None or parent not in parents or node_id in index:
            continue
        for i, child in enumerate(tree.children[parent]):
            if child in parents and child not in index and parents[child] == parent:
                index[child] = i
    return index


# ---------------------------------------------------------------- messages


def _build_messages(
    conv_id: str, tree: _Tree, active: list[str], unknown: Counter[str]
) -> list[Message]:
    mapping = tree.mapping
    active_positions: dict[str, int] = {}
    for node_id in active:
        if isinstance(mapping[node_id].get("message"), dict):
            active_positions[node_id] = len(active_positions)
    messages: list[Message] = []
    branch = _branch_indexes(tree)
    parents = tree.parent
    for node_id in _tree_order(tree):
        message = mapping[node_id].get("message")
        if not isinstance(message, dict):
            continue
        messages.append(
            _build_message(
                conv_id, node_id, parents[node_id], message, active_positions, unknown, branch
            )
        )
    return messages


def _build_message(
    conv_id: str,
    node_id: str,
    parent_id: str | None,
    message: dict[str, Any],
    active_positions: dict[str, int],
    unknown: Counter[str],
    branch: dict[str, int],
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
        parent_id=parent_id,
        role=role or "unknown",
        channel=channel,
        content_type=content_type or "missing",
        text=text,
        created_at=_epoch(message.get("create_time")),
        position=active_positions.get(node_id, -1),
        on_active_path=on_path,
        branch_index=branch.get(node_id, 0),
        raw_type=raw_type,
    )


def _json_default(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    return json_default(value)


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
    if not isinstance(metadata, dict) or not metadata:
        return False
    for flag in HIDDEN_FLAGS:  # noqa: SIM110 - a loop, not any(genexpr): no generator per message
        if metadata.get(flag):
            return True
    return False


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
