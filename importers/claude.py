"""Streaming importer for the Claude.ai data export (``conversations.json`` + ``projects.json``).

Input: the export zip (members read in place), a folder, or a single ``conversations.json`` /
``projects.json``. Both files are JSON arrays streamed with ijson, one item at a time. See
``shared/docs/formats.md`` §2.

Decisions:

* **Text comes from ``content`` blocks** whenever ``content`` is a non-empty list; the flat ``text``
  field (thinking and answer glued together) is read only when there are no blocks.
* **One message per run of blocks**: consecutive ``text`` blocks are one message (joined with
  nothing, as Claude joins them: citations split a sentence into blocks); every ``thinking``
  block is machinery, every ``tool_use`` / ``tool_result`` block is tool traffic (kept as its
  JSON), an unknown block type is kept raw as machinery and counted. Keys:
  ``claude:<conv uuid>:<message uuid>`` for the run that starts at block 0, ``…#<i>`` for a run
  that starts at block ``i``.
* **Pasted text** (``attachments[].extracted_content``) is the person's own words: each one is its
  own person message keyed ``…#att<j>``, placed before the typed text of the same message (the
  claude.ai UI shows attachments above the prompt). The exact characters are kept; nothing is
  glued to the typed text. ``files[]`` carry no content (binaries are not exported).
* **Order**: the ``current_leaf_message_uuid`` chain up through ``parent_message_uuid`` when the
  conversation has one (off-chain messages are kept, ``on_active_path=False``); else array order.
* ``sender: "human"`` is stored as role ``user``.
* **Projects** (``projects.json``) become conversations keyed ``claude:project:<uuid>``: the
  description and every document are the person's words, the prompt template is machinery (like
  custom instructions). The stock starter project (``is_starter_project``) is skipped.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core.models import Channel, Conversation, Message, Provenance
from importers._common import (
    Quarantined,
    ReadError,
    ReadReport,
    nonempty_str,
    parse_iso,
    raw_json,
    s,
    str_or_none,
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

SOURCE = "claude"
ROOT_SENTINEL = "00000000-0000-4000-8000-000000000000"
PART_NAMES = {"conversations.json": 0, "projects.json": 1}
THINKING_BLOCKS = frozenset({"thinking", "redacted_thinking"})
TOOL_BLOCKS = frozenset({"tool_use", "tool_result", "server_tool_use", "web_search_tool_result"})


class _Unparseable(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


# ---------------------------------------------------------------- public entry points


def part_order(name: str) -> int | None:
    return PART_NAMES.get(name.lower())


SKIP_REASON = "not-a-conversations-file"


def iter_conversations(
    path: Path, *, report: ReadReport | None = None
) -> Iterator[Conversation | Quarantined]:
    """Yield every conversation (and project) of a Claude.ai export: zip, folder or one file.
    Other files of the export (``users.json``, ``memories.json``, …) are counted in
    ``report.skipped``."""
    path = Path(path)
    if path.is_dir():
        parts = folder_parts(path, part_order, report, SKIP_REASON)
        if not parts:
            raise ReadError("no conversations.json in folder", file=str(path), reason="no-export")
        yield from unique_conversations(iter_parts(parts, _read_part, report))
        return
    if is_zip(path):
        with open_zip(path) as archive:
            parts, refused = zip_parts(archive, str(path), part_order, report, SKIP_REASON)
            yield from refused
            if not parts:
                raise ReadError(
                    "no conversations.json in the zip", file=str(path), reason="no-export"
                )
            yield from unique_conversations(iter_parts(parts, _read_part, report))
        return
    yield from unique_conversations(iter_parts([file_part(path)], _read_part, report))


def _read_part(part: Part) -> Iterator[Conversation | Quarantined]:
    projects = part.name.lower() == "projects.json"
    with part.open() as fp:
        for position, item in iter_array_items(fp, part.label, part.member, use_float=True):
            if isinstance(item, BadItem):  # bad bytes in this record only: the rest goes on
                yield Quarantined(
                    file=part.label, position=position, reason=item.reason, member=part.member
                )
            elif projects:
                if isinstance(item, dict) and item.get("is_starter_project") is True:
                    continue
                yield parse_project(item, part.label, position, member=part.member)
            else:
                yield parse_conversation(item, part.label, position, member=part.member)


def parse_conversation(
    item: Any, file_label: str, position: int, *, member: str | None = None
) -> Conversation | Quarantined:
    """One exported conversation as a Conversation, or a Quarantined record with a reason."""
    return _guard(_build_conversation, item, file_label, position, member)


def parse_project(
    item: Any, file_label: str, position: int, *, member: str | None = None
) -> Conversation | Quarantined:
    """One ``projects.json`` entry as a Conversation keyed ``claude:project:<uuid>``."""
    return _guard(_build_project, item, file_label, position, member)


def _guard(
    build: Any, item: Any, file_label: str, position: int, member: str | None
) -> Conversation | Quarantined:
    external_id = nonempty_str(item.get("uuid")) if isinstance(item, dict) else None
    provenance = Provenance(file=file_label, position=position, member=member)
    try:
        conversation: Conversation = build(item, provenance)
        return conversation
    except _Unparseable as exc:
        reason = exc.reason
    except (ValidationError, ValueError, TypeError, KeyError, AttributeError) as exc:
        reason = f"parse-error:{type(exc).__name__}"
    return Quarantined(
        file=file_label, position=position, reason=reason, external_id=external_id, member=member
    )


# ---------------------------------------------------------------- conversations


def _build_conversation(item: Any, provenance: Provenance) -> Conversation:
    if not isinstance(item, dict):
        raise _Unparseable("not-an-object")
    conv_id = nonempty_str(item.get("uuid"))
    if conv_id is None:
        raise _Unparseable("missing-id")
    chat = item.get("chat_messages", [])
    if chat is None:
        chat = []
    if not isinstance(chat, list):
        raise _Unparseable("messages-not-a-list")
    if any(not isinstance(m, dict) for m in chat):
        raise _Unparseable("message-not-object")
    positions, branch = _order(chat, item.get("current_leaf_message_uuid"))
    on_path = sorted(positions, key=lambda index: positions[index])
    off_path = [index for index in range(len(chat)) if index not in positions]
    unknown: Counter[str] = Counter()
    messages: list[Message] = []
    previous: str | None = None
    for index in on_path + off_path:
        active = index in positions
        built = _chat_message(conv_id, chat[index], index, previous if active else None, unknown)
        for m in built:
            update = {"on_active_path": active, "branch_index": branch.get(index, 0)}
            update["position"] = len(messages) if active else -1
            messages.append(m.model_copy(update=update))
        if built and active:
            previous = built[-1].node_id
    times = [m.created_at for m in messages if m.created_at is not None]
    created = parse_iso(item.get("created_at"))
    updated = parse_iso(item.get("updated_at"))
    return Conversation(
        key=f"{SOURCE}:{conv_id}",
        source=SOURCE,
        external_id=conv_id,
        title=nonempty_str(item.get("name")),
        created_at=created or (min(times) if times else updated),
        updated_at=updated or (max(times) if times else created),
        messages=messages,
        provenance=provenance,
        unknown_types=dict(unknown),
    )


def _order(chat: list[dict[str, Any]], leaf: Any) -> tuple[dict[int, int], dict[int, int]]:
    """``(array index -> path position, array index -> branch index)``.

    With a usable ``current_leaf_message_uuid`` the path is the leaf's parent chain; otherwise
    every message is on the path in array order.
    """
    by_uuid = {m.get("uuid"): i for i, m in enumerate(chat) if isinstance(m.get("uuid"), str)}
    branch = _branch_indexes(chat)
    if not isinstance(leaf, str) or leaf not in by_uuid:
        return {i: i for i in range(len(chat))}, branch
    chain: list[int] = []
    seen: set[int] = set()
    node: int | None = by_uuid[leaf]
    while node is not None and node not in seen:
        seen.add(node)
        chain.append(node)
        parent = chat[node].get("parent_message_uuid")
        node = by_uuid.get(parent) if isinstance(parent, str) and parent != ROOT_SENTINEL else None
    chain.reverse()
    return {index: position for position, index in enumerate(chain)}, branch


def _branch_indexes(chat: list[dict[str, Any]]) -> dict[int, int]:
    counts: Counter[str] = Counter()
    branch: dict[int, int] = {}
    for i, m in enumerate(chat):
        parent = m.get("parent_message_uuid")
        if isinstance(parent, str):
            branch[i] = counts[parent]
            counts[parent] += 1
    return branch


def _chat_message(
    conv_id: str, raw: dict[str, Any], index: int, previous: str | None, unknown: Counter[str]
) -> list[Message]:
    msg_id = nonempty_str(raw.get("uuid")) or f"index-{index}"
    sender = s(raw.get("sender"))
    role = {"human": "user", "assistant": "assistant"}.get(sender, sender or "unknown")
    created = parse_iso(raw.get("created_at"))
    parent = nonempty_str(raw.get("parent_message_uuid"))
    parent = previous if parent in (None, ROOT_SENTINEL) else parent
    pieces = list(_attachments(raw)) + list(_pieces(raw, role, unknown))
    messages: list[Message] = []
    for suffix, channel, content_type, text, when, raw_type in pieces:
        node_id = msg_id + suffix
        messages.append(
            Message(
                key=f"{SOURCE}:{conv_id}:{node_id}",
                node_id=node_id,
                parent_id=parent,
                role=role,
                channel=channel,
                content_type=content_type,
                text=text,
                created_at=when or created,
                position=0,
                raw_type=raw_type,
            )
        )
        parent = node_id
    return messages


_Piece = tuple[str, Channel, str, str, Any, str | None]


def _attachments(raw: dict[str, Any]) -> Iterator[_Piece]:
    attachments = raw.get("attachments")
    if not isinstance(attachments, list):
        return
    for j, att in enumerate(attachments):
        if isinstance(att, dict) and isinstance(att.get("extracted_content"), str):
            when = parse_iso(att.get("created_at"))
            yield f"#att{j}", Channel.PERSON, "attachment", att["extracted_content"], when, None


def _visible_channel(role: str) -> Channel:
    return {"user": Channel.PERSON, "assistant": Channel.ASSISTANT}.get(role, Channel.MACHINERY)


def _pieces(raw: dict[str, Any], role: str, unknown: Counter[str]) -> Iterator[_Piece]:
    content = raw.get("content")
    if not isinstance(content, list) or not content:
        text = raw.get("text")
        if s(text) or not _has_attachment_text(raw):
            yield "", _visible_channel(role), "text", s(text), None, None
        return
    run: list[str] = []
    run_start = 0
    run_time: Any = None
    for i, block in enumerate(content):
        kind = s(block.get("type")) if isinstance(block, dict) else "not-an-object"
        if kind == "text":
            if not run:
                run_start, run_time = i, parse_iso(block.get("start_timestamp"))
            run.append(s(block.get("text")))
            continue
        if run:
            yield _suffix(run_start), _visible_channel(role), "text", "".join(run), run_time, None
            run = []
        yield _block_piece(i, kind, block, unknown)
    if run:
        yield _suffix(run_start), _visible_channel(role), "text", "".join(run), run_time, None


def _has_attachment_text(raw: dict[str, Any]) -> bool:
    attachments = raw.get("attachments")
    return isinstance(attachments, list) and any(
        isinstance(a, dict) and isinstance(a.get("extracted_content"), str) for a in attachments
    )


def _suffix(index: int) -> str:
    return "" if index == 0 else f"#{index}"


def _block_piece(i: int, kind: str, block: Any, unknown: Counter[str]) -> _Piece:
    when = parse_iso(block.get("start_timestamp")) if isinstance(block, dict) else None
    if kind in THINKING_BLOCKS and isinstance(block, dict):
        text = s(block.get("thinking")) if kind == "thinking" else raw_json(block)
        return _suffix(i), Channel.MACHINERY, kind, text, when, None
    if kind in TOOL_BLOCKS:
        return _suffix(i), Channel.TOOL, kind, raw_json(block), when, None
    raw_type = kind or "missing"
    unknown[raw_type] += 1
    return _suffix(i), Channel.MACHINERY, raw_type, raw_json(block), when, raw_type


# ---------------------------------------------------------------- projects


def _build_project(item: Any, provenance: Provenance) -> Conversation:
    if not isinstance(item, dict):
        raise _Unparseable("not-an-object")
    project_id = nonempty_str(item.get("uuid"))
    if project_id is None:
        raise _Unparseable("missing-id")
    external_id = f"project:{project_id}"
    created = parse_iso(item.get("created_at"))
    pieces: list[tuple[str, Channel, str, str, Any]] = []
    if isinstance(item.get("description"), str) and item["description"]:
        pieces.append(
            ("description", Channel.PERSON, "project_description", item["description"], created)
        )
    if isinstance(item.get("prompt_template"), str) and item["prompt_template"]:
        pieces.append(
            (
                "prompt_template",
                Channel.MACHINERY,
                "project_prompt_template",
                item["prompt_template"],
                created,
            )
        )
    docs = item.get("docs")
    for j, doc in enumerate(docs if isinstance(docs, list) else []):
        if isinstance(doc, dict) and isinstance(doc.get("content"), str):
            doc_id = nonempty_str(doc.get("uuid")) or f"doc-{j}"
            when = parse_iso(doc.get("created_at")) or created
            pieces.append((doc_id, Channel.PERSON, "project_doc", doc["content"], when))
    messages = [
        Message(
            key=f"{SOURCE}:{external_id}:{node_id}",
            node_id=node_id,
            role="user",
            channel=channel,
            content_type=content_type,
            text=text,
            created_at=when,
            position=i,
        )
        for i, (node_id, channel, content_type, text, when) in enumerate(pieces)
    ]
    return Conversation(
        key=f"{SOURCE}:{external_id}",
        source=SOURCE,
        external_id=external_id,
        title=str_or_none(item.get("name")),
        created_at=created,
        updated_at=parse_iso(item.get("updated_at")) or created,
        messages=messages,
        provenance=provenance,
    )
