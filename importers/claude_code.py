"""Importer for Claude Code session transcripts (``~/.claude/projects/<encoded cwd>/<id>.jsonl``).

Input: one transcript ``.jsonl``, or a folder tree (``~/.claude``, ``~/.claude/projects``, one
project folder). One session file is one :class:`Conversation` keyed ``claude-code:<sessionId>``;
every message is keyed ``claude-code:<sessionId>:<line uuid>`` (``#<i>`` added for the i-th block of
a line that holds several). See ``shared/docs/formats.md`` §4.

Decisions:

* **Split assistant messages**: one API response is written as several lines with the same
  ``message.id``, one content block each. Blocks keep their own keys (each line has its uuid), and
  consecutive ``text`` blocks of one response are merged into one assistant message keyed by the
  first of them (joined with nothing, as Claude itself joins text blocks); thinking stays
  machinery and ``tool_use`` / ``tool_result`` stay tool traffic. The same block written twice
  for one response is kept once.
* **/compact re-appends** copies of old lines with their original ``uuid``: the first line with a
  uuid wins; a later line with the same uuid is a copy (dropped, counted as
  ``skipped:duplicate-uuid``) when its bytes are the same, or its type and (real) timestamp are.
  A different line that happens to reuse a uuid is kept, keyed ``<uuid>~L<line number>``.
  Dedupe is per file: lines a resumed session copies into a new file are keyed under that
  file's session (no uuid set is kept across a tree, so memory stays flat).
* **Subagents** (old layout ``agent-<id>.jsonl`` beside the session; new layout
  ``<session>/subagents/agent-<id>.jsonl``) are separate conversations keyed
  ``claude-code:<parent sessionId>:agent-<agentId>``: the key names the parent, and the
  subagent's first message has ``parent_id`` = the parent conversation key. A subagent's "user"
  lines are the parent agent's instructions and tool results, not the person's words, so its
  user text is tool traffic; its answers stay assistant text. ``isSidechain`` lines inside a
  session file are kept, off the active path.
* **Branches**: the active path is file order. Lines are off the path only when they are on an
  abandoned branch: a user prompt that was edited or rewound (two prompts with one parent), a
  regenerated answer (two answers with different ``message.id`` under one parent), or lines a later
  line marks as superseded or retracted. Parallel tool calls (which fan out in ``parentUuid``) are
  not branches.
* ``summary`` lines describe other sessions; one is used as this session's title only when its
  ``leafUuid`` is a line of this file. ``custom-title`` and ``ai-title`` win over it. Bookkeeping
  lines (``file-history-snapshot``, ``queue-operation``, ``progress``, titles, modes, links …) are
  not messages; ``system`` and ``attachment`` lines are kept as machinery, except a
  ``queued_command`` attachment, which is a prompt the person typed while Claude was busy.
* The person's words are ``user`` text that is not ``isMeta``, not a compaction summary and not an
  injected block (``<command-name>``, ``<system-reminder>``, ``[Request interrupted by user]``, …).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core.models import Channel, Conversation, Message, Provenance
from importers._common import (
    RECORD_ERRORS,
    Quarantined,
    ReadError,
    ReadReport,
    is_injected,
    nonempty_str,
    parse_iso,
    raw_json,
    s,
    str_or_none,
)
from importers._containers import Part, file_part, iter_parts
from importers._jsonl import BadLine, JsonlReader, Line, open_jsonl

SOURCE = "claude-code"

_AGENT_FILE = re.compile(r"agent-([A-Za-z0-9_]+)\.jsonl", re.IGNORECASE)
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")

BOOKKEEPING_TYPES = frozenset(
    {
        "summary",
        "file-history-snapshot",
        "queue-operation",
        "progress",
        "last-prompt",
        "custom-title",
        "ai-title",
        "agent-name",
        "permission-mode",
        "mode",
        "pr-link",
        "frame-link",
        "worktree-state",
        "relocated",
        "bridge-session",
        "started",
        "result",
        "atis-latch",
    }
)
TEXT_BLOCK = "text"
MACHINERY_BLOCKS = frozenset({"thinking", "redacted_thinking", "fallback", "image", "document"})
TOOL_BLOCKS = frozenset(
    {"tool_use", "tool_result", "server_tool_use", "web_search_tool_result", "mcp_tool_use"}
)
SKIPPED_FILES = frozenset({"history.jsonl"})


# ---------------------------------------------------------------- public entry points


def iter_conversations(
    path: Path, *, report: ReadReport | None = None
) -> Iterator[Conversation | Quarantined]:
    """Yield one conversation per transcript: a single file, or every transcript under a folder.
    In a folder, the other files are counted in ``report.skipped``."""
    path = Path(path)
    if path.is_dir():
        parts = [file_part(f) for f in transcript_files(path, report)]
        yield from iter_parts(parts, lambda part: _read_part(part, in_tree=True), report)
        return
    yield from iter_parts([file_part(path)], lambda part: _read_part(part, in_tree=False), report)


def transcript_files(folder: Path, report: ReadReport | None = None) -> list[Path]:
    """Session and subagent files under ``folder`` (``projects/`` only, when given ``~/.claude``).
    The other files under the folder read are counted in ``report.skipped`` by reason."""
    root = folder / "projects" if (folder / "projects").is_dir() else folder
    found: list[Path] = []
    for p in root.rglob("*"):
        if not p.is_file():
            continue
        if "tool-results" in p.parts:
            reason = "tool-result-file"
        elif not p.name.lower().endswith(".jsonl"):
            reason = "not-a-transcript-file"
        elif p.name.lower() in SKIPPED_FILES:
            reason = "prompt-history-file"
        else:
            found.append(p)
            continue
        if report is not None:
            report.skip(reason)
    return sorted(found, key=lambda p: str(p.relative_to(root)))


def is_subagent_file(path: Path) -> bool:
    return _AGENT_FILE.fullmatch(path.name) is not None or path.parent.name == "subagents"


# ---------------------------------------------------------------- one file


@dataclass
class _Node:
    """What the branch analysis needs of one line (the raw line itself is not kept)."""

    number: int
    key: str | None  # the uuid, or a uuid made unique when two different lines share one
    uuid: str | None
    parent: str | None  # parentUuid, or logicalParentUuid across a compaction
    type: str
    timestamp: str | None
    sidechain: bool
    prompt: bool
    message_id: str | None


@dataclass
class _Draft:
    node: _Node
    node_id: str
    role: str
    channel: Channel
    content_type: str
    text: str
    raw_type: str | None = None
    message_id: str | None = None  # assistant response id, for merging text fragments


@dataclass
class _File:
    """One transcript read line by line: slim nodes and message drafts, no raw lines."""

    path: Path
    subagent: bool
    nodes: list[_Node] = field(default_factory=list)
    drafts: list[_Draft] = field(default_factory=list)
    unknown: Counter[str] = field(default_factory=Counter)
    titles: dict[str, str] = field(default_factory=dict)
    summaries: list[tuple[str, str]] = field(default_factory=list)  # (leafUuid, summary)
    superseded: set[str] = field(default_factory=set)
    seen: dict[str, tuple[str, str, Any]] = field(default_factory=dict)  # uuid -> first line
    session_id: str | None = None
    agent_id: str | None = None

    def feed(self, line: Line) -> None:
        rec = line.record
        kind = s(rec.get("type"))
        uuid = nonempty_str(rec.get("uuid"))
        key = uuid
        if uuid is not None:
            fingerprint = (line.digest, kind, rec.get("timestamp"))
            first = self.seen.setdefault(uuid, fingerprint)
            if first is not fingerprint:
                same_time = first[2] == fingerprint[2] and parse_iso(first[2]) is not None
                if first == fingerprint or (first[1] == kind and same_time):  # a /compact copy
                    self.unknown["skipped:duplicate-uuid"] += 1
                    return
                key = f"{uuid}~L{line.number}"  # one uuid, two different lines: keep both
        self._note(rec, kind)
        node = _Node(
            number=line.number,
            key=key,
            uuid=uuid,
            parent=nonempty_str(rec.get("parentUuid"))
            or nonempty_str(rec.get("logicalParentUuid")),
            type=kind,
            timestamp=str_or_none(rec.get("timestamp")),
            sidechain=bool(rec.get("isSidechain")),
            prompt=_is_prompt(kind, rec),
            message_id=nonempty_str(_message(rec).get("id")) if kind == "assistant" else None,
        )
        self.nodes.append(node)
        self.drafts.extend(_line_drafts(node, rec, self))

    def _note(self, rec: dict[str, Any], kind: str) -> None:
        if kind == "custom-title" and isinstance(rec.get("customTitle"), str):
            self.titles["custom"] = rec["customTitle"]
        elif kind == "ai-title" and isinstance(rec.get("aiTitle"), str):
            self.titles["ai"] = rec["aiTitle"]
        elif kind == "summary" and isinstance(rec.get("summary"), str):
            self.summaries.append((s(rec.get("leafUuid")), rec["summary"]))
        if self.session_id is None and kind != "summary":
            self.session_id = nonempty_str(rec.get("sessionId"))
        if self.agent_id is None:
            self.agent_id = nonempty_str(rec.get("agentId"))
        for name in ("supersedesUuids", "retractedMessageUuids"):
            value = rec.get(name)
            if isinstance(value, list):
                self.superseded.update(v for v in value if isinstance(v, str))


def _message(rec: dict[str, Any]) -> dict[str, Any]:
    message = rec.get("message")
    return message if isinstance(message, dict) else {}


def _read_part(part: Part, *, in_tree: bool) -> Iterator[Conversation | Quarantined]:
    path = Path(part.label)
    info = _File(path, subagent=is_subagent_file(path))
    bad: list[Quarantined] = []
    with open_jsonl(path, part.report) as fp:
        reader = JsonlReader(fp, part.label)
        for item in reader:
            if isinstance(item, BadLine):
                bad.append(
                    Quarantined(
                        file=part.label, position=item.number, reason=item.reason, kind="record"
                    )
                )
                continue
            try:
                info.feed(item)
            except RECORD_ERRORS as exc:  # a shape we did not foresee: set the line aside
                reason = f"parse-error:{type(exc).__name__}"
                bad.append(
                    Quarantined(file=part.label, position=item.number, reason=reason, kind="record")
                )
        if reader.blank:
            info.unknown["skipped:blank-line"] += reader.blank
        if reader.truncated is not None:  # what was read is kept; the cut-off rest is reported
            bad.append(
                Quarantined(
                    file=part.label, position=reader.truncated, reason="truncated", kind="file"
                )
            )
    yield from bad
    if not info.nodes:
        if in_tree:
            if part.report is not None:
                part.report.skip("empty-transcript")
            return  # an empty transcript: nothing to import
        raise ReadError("no transcript records", file=part.label, record="1", reason="no-records")
    yield _build(info)


def _ids(info: _File) -> tuple[str, str, str | None]:
    """``(conversation external id, session id for message keys, agent id)``."""
    stem = info.path.name.removesuffix(".jsonl")
    session = info.session_id
    if session is None:
        session = stem if not info.subagent else info.path.parent.parent.name or stem
    if not info.subagent:
        if _UUID.fullmatch(stem):
            session = stem
        return session, session, None
    match = _AGENT_FILE.fullmatch(info.path.name)
    agent = info.agent_id or (match.group(1) if match else stem)
    return f"{session}:agent-{agent}", session, agent


def _build(info: _File) -> Conversation:
    external_id, session_id, agent = _ids(info)
    off_path = _off_path(info)
    drafts = _merge_fragments(info.drafts)
    messages = _messages(session_id, drafts, off_path, agent is not None)
    times = [t for t in (parse_iso(n.timestamp) for n in info.nodes) if t]
    label = str(info.path)
    try:
        return Conversation(
            key=f"{SOURCE}:{external_id}",
            source=SOURCE,
            external_id=external_id,
            title=_title(info),
            created_at=min(times) if times else None,
            updated_at=max(times) if times else None,
            messages=messages,
            provenance=Provenance(file=label, position=0),
            unknown_types=dict(info.unknown),
        )
    except ValidationError:
        raise ReadError(
            "conversation failed validation", file=label, reason="parse-error:ValidationError"
        ) from None


def _title(info: _File) -> str | None:
    if "custom" in info.titles:
        return info.titles["custom"]
    if "ai" in info.titles:
        return info.titles["ai"]
    uuids = {n.uuid for n in info.nodes if n.uuid}
    own = [summary for leaf, summary in info.summaries if leaf in uuids]
    return own[-1] if own else None


# ---------------------------------------------------------------- branches


def _is_prompt(kind: str, rec: dict[str, Any]) -> bool:
    if kind != "user" or rec.get("isMeta") or rec.get("isCompactSummary"):
        return False
    content = _message(rec).get("content")
    if isinstance(content, str):
        return True
    return isinstance(content, list) and any(
        isinstance(b, dict) and b.get("type") == TEXT_BLOCK for b in content
    )


def _off_path(info: _File) -> set[str]:
    """Keys of lines on abandoned branches (and, in a session file, of sidechain lines)."""
    children: dict[str, list[_Node]] = {}
    for node in info.nodes:
        if node.uuid and node.parent:
            children.setdefault(node.parent, []).append(node)
    off = set(info.superseded)
    active = _active_chain(info)
    for siblings in children.values():
        if len(siblings) > 1:
            for loser in _abandoned(siblings, active):
                off.update(_subtree(loser, children))
    if not info.subagent:
        off.update(n.key for n in info.nodes if n.key and n.sidechain)
    return off


def _active_chain(info: _File) -> set[str]:
    parents: dict[str, str | None] = {}
    for node in info.nodes:
        if node.uuid:
            parents.setdefault(node.uuid, node.parent)
    leaf = next(
        (
            n.uuid
            for n in reversed(info.nodes)
            if n.type in ("user", "assistant") and n.uuid and (info.subagent or not n.sidechain)
        ),
        None,
    )
    chain: set[str] = set()
    current = leaf
    while current is not None and current not in chain:
        chain.add(current)
        current = parents.get(current)
    return chain


def _abandoned(siblings: list[_Node], active: set[str]) -> list[_Node]:
    """Siblings that lost to the one on the active chain: edited prompts, regenerated answers."""
    prompts = [n for n in siblings if n.prompt]
    answers: dict[str, list[_Node]] = {}
    for n in siblings:
        if n.type == "assistant":
            answers.setdefault(n.message_id or str(n.uuid), []).append(n)
    losers: list[_Node] = []
    if len(prompts) > 1 and any(n.uuid in active for n in prompts):
        losers.extend(n for n in prompts if n.uuid not in active)
    if len(answers) > 1 and any(n.uuid in active for group in answers.values() for n in group):
        for group in answers.values():
            if not any(n.uuid in active for n in group):
                losers.extend(group)  # every fragment of a losing answer loses with it
    return losers


def _subtree(root: _Node, children: dict[str, list[_Node]]) -> set[str]:
    found: set[str] = set()
    stack = [root]
    while stack:
        node = stack.pop()
        if node.key is None or node.key in found:
            continue
        found.add(node.key)
        if node.uuid is not None:
            stack.extend(children.get(node.uuid, []))
    return found


# ---------------------------------------------------------------- lines → drafts


def _line_drafts(node: _Node, rec: dict[str, Any], info: _File) -> Iterator[_Draft]:
    kind = node.type
    if kind in ("user", "assistant"):
        yield from _conversation_line(node, rec, info)
    elif kind == "system":
        sub = s(rec.get("subtype")) or "missing"
        text = rec["content"] if isinstance(rec.get("content"), str) else raw_json(rec)
        yield _draft(node, 0, "system", Channel.MACHINERY, f"system:{sub}", text)
    elif kind == "attachment":
        yield _attachment(node, rec)
    elif kind in BOOKKEEPING_TYPES:
        return
    elif kind in ("tool_use", "tool_result"):  # very old (<= 1.0) bare tool lines
        yield _draft(node, 0, "tool", Channel.TOOL, kind, raw_json(rec))
    else:
        raw_type = kind or "missing"
        info.unknown[raw_type] += 1
        yield _draft(
            node, 0, "unknown", Channel.MACHINERY, raw_type, raw_json(rec), raw_type=raw_type
        )


def _node_id(node: _Node, index: int) -> str:
    base = node.key or f"line-{node.number}"
    return base if index == 0 else f"{base}#{index}"


def _draft(
    node: _Node, index: int, role: str, channel: Channel, content_type: str, text: str, **extra: Any
) -> _Draft:
    return _Draft(node, _node_id(node, index), role, channel, content_type, text, **extra)


def _attachment(node: _Node, rec: dict[str, Any]) -> _Draft:
    attachment = rec.get("attachment")
    body = attachment if isinstance(attachment, dict) else {}
    kind = s(body.get("type")) or "missing"
    if kind == "queued_command":
        prompt = body.get("prompt")
        text = prompt if isinstance(prompt, str) else "".join(_block_texts(prompt))
        channel = Channel.MACHINERY if is_injected(text) else Channel.PERSON
        return _draft(node, 0, "user", channel, "attachment:queued_command", text)
    return _draft(node, 0, "system", Channel.MACHINERY, f"attachment:{kind}", raw_json(body))


def _block_texts(blocks: Any) -> list[str]:
    if not isinstance(blocks, list):
        return []
    return [b["text"] for b in blocks if isinstance(b, dict) and isinstance(b.get("text"), str)]


def _conversation_line(node: _Node, rec: dict[str, Any], info: _File) -> Iterator[_Draft]:
    role = "assistant" if node.type == "assistant" else "user"
    content = _message(rec).get("content")
    flags = _Flags(
        api_error=bool(rec.get("isApiErrorMessage")),
        compact_summary=bool(rec.get("isCompactSummary")),
        meta=bool(rec.get("isMeta")),
        subagent=info.subagent,
    )
    if isinstance(content, str):
        yield _text_draft(node, 0, role, content, flags)
        return
    if not isinstance(content, list):
        yield _text_draft(node, 0, role, "", flags)
        return
    for index, block in enumerate(content):
        yield _block_draft(node, index, role, block, info, flags)


@dataclass(frozen=True)
class _Flags:
    api_error: bool
    compact_summary: bool
    meta: bool
    subagent: bool


def _text_channel(role: str, text: str, flags: _Flags) -> tuple[Channel, str]:
    if role == "assistant":
        return (Channel.MACHINERY, "api_error") if flags.api_error else (Channel.ASSISTANT, "text")
    if flags.compact_summary:
        return Channel.MACHINERY, "compact_summary"
    if flags.meta or is_injected(text):
        return Channel.MACHINERY, "text"
    if flags.subagent:
        return Channel.TOOL, "text"  # the parent agent's instructions to the subagent
    return Channel.PERSON, "text"


def _text_draft(node: _Node, index: int, role: str, text: str, flags: _Flags) -> _Draft:
    channel, content_type = _text_channel(role, text, flags)
    return _draft(node, index, role, channel, content_type, text, message_id=node.message_id)


def _block_draft(
    node: _Node, index: int, role: str, block: Any, info: _File, flags: _Flags
) -> _Draft:
    if not isinstance(block, dict):
        info.unknown["block:not-an-object"] += 1
        return _draft(
            node, index, role, Channel.MACHINERY, "block", raw_json(block), raw_type="not-an-object"
        )
    kind = s(block.get("type")) or "missing"
    if kind == TEXT_BLOCK:
        return _text_draft(node, index, role, s(block.get("text")), flags)
    if kind in ("thinking", "redacted_thinking"):
        text = s(block.get("thinking")) if kind == "thinking" else raw_json(block)
        return _draft(node, index, role, Channel.MACHINERY, kind, text, message_id=node.message_id)
    if kind in TOOL_BLOCKS:
        text = _tool_text(block)
        return _draft(node, index, role, Channel.TOOL, kind, text, message_id=node.message_id)
    if kind in MACHINERY_BLOCKS:
        return _draft(node, index, role, Channel.MACHINERY, kind, raw_json(block))
    info.unknown[f"block:{kind}"] += 1
    return _draft(node, index, role, Channel.MACHINERY, kind, raw_json(block), raw_type=kind)


def _tool_text(block: dict[str, Any]) -> str:
    if block.get("type") == "tool_result":
        content = block.get("content")
        if isinstance(content, str):
            return content
        texts = _block_texts(content)
        if texts and len(texts) == len(content or []):
            return "\n".join(texts)
    return raw_json(block)


# ---------------------------------------------------------------- merging and messages


def _merge_fragments(drafts: list[_Draft]) -> list[_Draft]:
    """Join consecutive assistant text fragments of one response; drop repeated fragments."""
    merged: list[_Draft] = []
    seen_blocks: set[tuple[str, str, str]] = set()
    for d in drafts:
        if d.message_id is not None and d.node.type == "assistant" and d.text:
            block_key = (d.message_id, d.content_type, d.text)
            if block_key in seen_blocks:
                continue
            seen_blocks.add(block_key)
        last = merged[-1] if merged else None
        if (
            last is not None
            and d.message_id is not None
            and last.message_id == d.message_id
            and last.channel is Channel.ASSISTANT
            and d.channel is Channel.ASSISTANT
            and last.content_type == d.content_type == TEXT_BLOCK
        ):
            last.text += d.text
            continue
        merged.append(d)
    return merged


def _messages(
    session_id: str, drafts: list[_Draft], off_path: set[str], subagent: bool
) -> list[Message]:
    messages: list[Message] = []
    position = 0
    for d in drafts:
        on_path = d.node.key not in off_path
        parent = d.node.parent
        if not messages and subagent and parent is None:
            parent = f"{SOURCE}:{session_id}"  # the link to the parent session
        messages.append(
            Message(
                key=f"{SOURCE}:{session_id}:{d.node_id}",
                node_id=d.node_id,
                parent_id=parent,
                role=d.role,
                channel=d.channel,
                content_type=d.content_type,
                text=d.text,
                created_at=parse_iso(d.node.timestamp),
                position=position if on_path else -1,
                on_active_path=on_path,
                raw_type=d.raw_type,
            )
        )
        position += on_path
    return messages
