"""Importer for OpenAI Codex CLI rollouts (``~/.codex/sessions/YYYY/MM/DD/rollout-*.jsonl``).

Input: one rollout (``.jsonl``, ``.jsonl.zst``, or the early TypeScript ``.json``), or a folder
tree of them (``~/.codex``, ``sessions/``, ``archived_sessions/``; in a tree only files named
``rollout-*`` are read). One rollout is one :class:`Conversation` keyed ``codex:<session id>``;
its messages are keyed ``codex:<session id>:<message key>``. See ``shared/docs/formats.md`` §3.

Every schema era is read (formats §3.7): the bare pre-September-2025 lines (a first line
``{id, timestamp, instructions}``, bare ``ResponseItem`` lines, ``record_type`` markers), the
``{timestamp, type, payload}`` envelope, and 0.14x lines (``ordinal``, ``world_state``,
``item_completed``, no ``event_msg/user_message`` from 0.148 on).

Decisions:

* **Message keys**: the item's own ``id`` when it has one (0.148+ ``msg_…``), else ``ord-<ordinal>``,
  else ``sha1-<digest of the line>`` (the line holds its timestamp, type and payload): all stable
  when a file is re-read or grows. A key met again in the same file (the shape fixtures zero every
  ordinal) gets ``~L<line number>``; nothing is dropped for it.
* **A user turn counts once**: ``response_item`` messages are the record; the UI echoes
  (``event_msg`` ``user_message`` / ``agent_message`` / ``agent_reasoning``, and ``item_completed``
  ``UserMessage`` / ``AgentMessage`` / ``Reasoning``) are dropped when a record of the same kind
  with the same text sits nearby, and kept in its place when there is none (e.g. Codex Desktop
  subsets that only have the event).
* **Injected context is machinery**: ``developer``/``system`` messages, and user texts that are a
  tool's context block (``<environment_context>``, ``# AGENTS.md instructions for …``,
  ``<permissions instructions>``, …). The Desktop preamble ``# Files mentioned by the user: …
  ## My request for Codex:`` is split off into its own machinery message keyed ``…#context``:
  both parts keep their exact characters, and they concatenate to the original text.
* **Forks** (formats §3.8): a forked rollout repeats its parent's records after the parent's
  ``session_meta`` (Codex rewrites their line timestamps). When the parent rollout is part of the
  same import, the child's records are compared in step with the parent's (type + payload); the
  matching run is the copied history and is dropped from the child (counted as
  ``skipped:fork-copied``). The first message of the child then has ``parent_id`` = the parent's
  conversation key, which records the link. Without the parent file nothing is dropped (the copy
  may be the only one left).
* Telemetry (``token_count``, ``turn_context``, ``task_started`` …, ``world_state``,
  ``ghost_snapshot``) is not a message. Unknown line, item and event types are kept raw as
  machinery (``raw_type`` set) and counted in ``unknown_types``; blank lines are counted as
  ``skipped:blank-line``; undecodable lines are quarantined (``kind="record"``, 1-based line).
* File names carry local time; every time we store comes from the payload (UTC).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import ijson
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
    payload_digest,
    raw_json,
    s,
    str_or_none,
)
from importers._containers import Part, file_part, iter_parts
from importers._jsonarray import choose_backend
from importers._jsonl import BadLine, JsonlReader, Line, open_jsonl

SOURCE = "codex"

USER_MESSAGE_BEGIN = "## My request for Codex:"
FILES_PREAMBLE = "# Files mentioned by the user:"
ECHO_WINDOW = 32  # how far (in kept items) an echo may sit from the record it repeats

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_ROLLOUT_NAME = re.compile(rf"rollout-.*?({_UUID})\.(?:jsonl|jsonl\.zst|json)", re.IGNORECASE)
_ANY_UUID_NAME = re.compile(rf".*?({_UUID})\.(?:jsonl|jsonl\.zst|json)", re.IGNORECASE)

METADATA_LINE_TYPES = frozenset(
    {"session_meta", "turn_context", "world_state", "inter_agent_communication_metadata", "state"}
)
METADATA_ITEMS = frozenset({"ghost_snapshot", "compaction", "additional_tools"})
TOOL_ITEMS = frozenset(
    {
        "function_call",
        "function_call_output",
        "custom_tool_call",
        "custom_tool_call_output",
        "local_shell_call",
        "local_shell_call_output",
        "web_search_call",
        "tool_search_call",
        "tool_search_output",
        "image_generation_call",
        "mcp_tool_call",
        "mcp_tool_call_output",
        "agent_message",
    }
)
# Events that repeat a record (kept only when the record is missing), by the kind they repeat.
ECHO_EVENTS = {"user_message": "user", "agent_message": "assistant", "agent_reasoning": "reasoning"}
ECHO_ITEMS = {"UserMessage": "user", "AgentMessage": "assistant", "Reasoning": "reasoning"}
# Events that are UI or bookkeeping, not words: skipped.
TELEMETRY_EVENTS = frozenset(
    {
        "token_count",
        "task_started",
        "turn_started",
        "task_complete",
        "turn_complete",
        "turn_aborted",
        "context_compacted",
        "entered_review_mode",
        "undo_started",
        "undo_completed",
        "exec_command_begin",
        "exec_command_output_delta",
        "exec_command_end",
        "patch_apply_begin",
        "patch_apply_end",
        "web_search_begin",
        "web_search_end",
        "mcp_tool_call_begin",
        "mcp_tool_call_end",
        "mcp_startup_update",
        "mcp_startup_complete",
        "thread_rolled_back",
        "thread_name_updated",
        "thread_goal_updated",
        "thread_settings_applied",
        "collab_agent_spawn_begin",
        "collab_agent_spawn_end",
        "collab_agent_interaction_begin",
        "collab_agent_interaction_end",
        "collab_waiting_begin",
        "collab_waiting_end",
        "collab_close_begin",
        "collab_close_end",
        "sub_agent_activity",
        "guardian_assessment",
        "image_generation_begin",
        "image_generation_end",
        "view_image_tool_call",
        "dynamic_tool_call_request",
        "dynamic_tool_call_response",
        "agent_reasoning_section_break",
        "agent_reasoning_raw_content",
        "agent_reasoning_raw_content_delta",
        "session_configured",
        "background_event",
        "stream_error",
        "shutdown_complete",
        "plan_update",
        "turn_diff",
        "item_started",
    }
)
TOOL_COMPLETED_ITEMS = frozenset(
    {"CommandExecution", "McpToolCall", "FileChange", "Extension", "WebSearch", "ImageGeneration"}
)


# ---------------------------------------------------------------- public entry points


def iter_conversations(
    path: Path, *, report: ReadReport | None = None
) -> Iterator[Conversation | Quarantined]:
    """Yield one conversation per rollout: a single file, or every rollout under a folder. In a
    folder, the files that are not rollouts (and empty rollouts) are counted in
    ``report.skipped``."""
    path = Path(path)
    if path.is_dir():
        files = rollout_files(path, report)
        index = _session_index(files)
        parts = [file_part(f) for f in files]
        yield from iter_parts(parts, lambda part: _read_part(part, index, in_tree=True), report)
        return
    yield from iter_parts(
        [file_part(path)], lambda part: _read_part(part, {}, in_tree=False), report
    )


def is_rollout_name(name: str) -> bool:
    lowered = name.lower()
    return lowered.startswith("rollout-") and lowered.endswith((".jsonl", ".jsonl.zst", ".json"))


def rollout_files(folder: Path, report: ReadReport | None = None) -> list[Path]:
    """Rollout files under ``folder`` in path order (the date folders sort by day); the other
    files are counted in ``report.skipped`` as ``not-a-rollout-file``."""
    found: list[Path] = []
    for p in folder.rglob("*"):
        if not p.is_file():
            continue
        if is_rollout_name(p.name):
            found.append(p)
        elif report is not None:
            report.skip("not-a-rollout-file")
    return sorted(found, key=lambda p: str(p.relative_to(folder)))


def session_id_from_name(name: str) -> str | None:
    match = _ROLLOUT_NAME.fullmatch(name) or _ANY_UUID_NAME.fullmatch(name)
    return match.group(1) if match else None


# ---------------------------------------------------------------- reading one rollout


@dataclass
class _Record:
    """One rollout line, normalised across eras."""

    number: int
    kind: str  # session_meta / response_item / event_msg / compacted / … / state / unknown type
    payload: dict[str, Any]
    timestamp: str | None
    ordinal: int | None
    line_digest: str | None = None  # sha1 of the JSONL line (None for the early .json files)

    def digest(self) -> str:
        """Type + payload, without the line time: how a fork's copy is matched to its parent."""
        return payload_digest(self.kind, self.payload)


def _session_index(files: list[Path]) -> dict[str, Path]:
    index: dict[str, Path] = {}
    for f in files:
        sid = session_id_from_name(f.name)
        if sid and f.stat().st_size > 0:
            index.setdefault(sid.lower(), f)
    return index


def _read_part(
    part: Part, index: dict[str, Path], *, in_tree: bool
) -> Iterator[Conversation | Quarantined]:
    path = Path(part.label)
    try:
        size = path.stat().st_size
    except OSError as exc:
        raise ReadError(f"cannot open file ({type(exc).__name__})", file=part.label) from None
    if size == 0:  # Codex Desktop leaves zero-byte "… (1).jsonl" copies: nothing to read
        if in_tree:
            if part.report is not None:
                part.report.skip("empty-file")
            return
        raise ReadError("empty file", file=part.label, record="0", reason="empty-file")
    bad: list[Quarantined] = []
    stats = _FileStats()
    builder = _Builder(path, index)
    for rec in _records(path, part.label, bad, stats, part.report):
        try:
            builder.feed(rec)
        except RECORD_ERRORS as exc:  # a shape we did not foresee: set the line aside, go on
            reason = f"parse-error:{type(exc).__name__}"
            bad.append(
                Quarantined(file=part.label, position=rec.number, reason=reason, kind="record")
            )
    yield from bad
    yield builder.build(stats)


@dataclass
class _FileStats:
    blank: int = 0


def _records(
    path: Path, label: str, bad: list[Quarantined], stats: _FileStats, report: ReadReport | None
) -> Iterator[_Record]:
    if path.name.lower().endswith(".json"):
        yield from _typescript_records(path, label)
        return
    with open_jsonl(path, report) as fp:
        reader = JsonlReader(fp, label)
        for item in reader:
            if isinstance(item, BadLine):
                bad.append(
                    Quarantined(file=label, position=item.number, reason=item.reason, kind="record")
                )
                continue
            yield from _normalise(item)
        stats.blank = reader.blank
        if reader.truncated is not None:  # what was read is kept; the cut-off rest is reported
            bad.append(
                Quarantined(file=label, position=reader.truncated, reason="truncated", kind="file")
            )


def _normalise(line: Line) -> Iterator[_Record]:
    rec = line.record
    ordinal = rec.get("ordinal") if isinstance(rec.get("ordinal"), int) else None
    kind = rec.get("type")
    payload = rec.get("payload")
    if isinstance(kind, str) and "payload" in rec:
        body = payload if isinstance(payload, dict) else {"value": payload}
        yield _Record(
            line.number, kind, body, str_or_none(rec.get("timestamp")), ordinal, line.digest
        )
    elif isinstance(rec.get("session"), dict) and isinstance(rec.get("items"), list):
        yield from _typescript_object(line.number, rec)
    elif "record_type" in rec:
        yield _Record(line.number, "state", rec, None, ordinal, line.digest)
    elif isinstance(kind, str):  # bare era: a ResponseItem without envelope
        ts = str_or_none(rec.get("timestamp"))
        yield _Record(line.number, "response_item", rec, ts, ordinal, line.digest)
    elif "id" in rec and "timestamp" in rec:  # bare era: the first line is the session meta
        ts = str_or_none(rec.get("timestamp"))
        yield _Record(line.number, "session_meta", rec, ts, ordinal, line.digest)
    else:
        yield _Record(line.number, "unknown", rec, None, ordinal, line.digest)


def _typescript_object(number: int, obj: dict[str, Any]) -> Iterator[_Record]:
    session = obj["session"]
    yield _Record(number, "session_meta", session, str_or_none(session.get("timestamp")), None)
    for item in obj["items"]:
        if isinstance(item, dict):
            yield _Record(number, "response_item", item, None, None)


def _typescript_records(path: Path, label: str) -> Iterator[_Record]:
    """The April-May 2025 TypeScript CLI: one JSON object ``{session, items: [...]}``."""
    try:
        with path.open("rb") as fp:
            backend = choose_backend(fp, label)
            sessions = list(backend.items(fp, "session"))
        with path.open("rb") as fp:
            session = sessions[0] if sessions and isinstance(sessions[0], dict) else {}
            yield _Record(0, "session_meta", session, str_or_none(session.get("timestamp")), None)
            for i, item in enumerate(backend.items(fp, "items.item", use_float=True)):
                if isinstance(item, dict):
                    yield _Record(i + 1, "response_item", item, None, None)
    except (ijson.JSONError, UnicodeDecodeError) as exc:
        raise ReadError(
            f"invalid JSON ({type(exc).__name__})", file=label, record="0", reason="invalid-json"
        ) from None
    except OSError as exc:
        raise ReadError(f"cannot read file ({type(exc).__name__})", file=label) from None


# ---------------------------------------------------------------- one conversation


@dataclass
class _Draft:
    """A message before keys are final. ``echo`` is set for UI echoes (user/assistant/reasoning)."""

    number: int  # the line it came from
    timestamp: str | None
    key: str
    role: str
    channel: Channel
    content_type: str
    text: str
    echo: str | None = None
    pair: str | None = None  # the kind a record offers for echo pairing
    raw_type: str | None = None
    suffix: str = ""


@dataclass
class _Session:
    own_id: str | None = None
    forked_from: str | None = None
    title: str | None = None
    started: datetime | None = None
    unknown: Counter[str] = field(default_factory=Counter)
    fork_copied: int = 0


class _Builder:
    """Reads a rollout's records one at a time; keeps drafts (texts), never the raw lines."""

    def __init__(self, path: Path, index: dict[str, Path]) -> None:
        self.path = path
        self.index = index
        self.session = _Session()
        self.drafts: list[_Draft] = []
        self.records = 0
        self.first: datetime | None = None
        self.last: datetime | None = None
        self.fork = "none"  # none -> waiting (parent file here) -> copying -> done
        self.parent_digests: Iterator[str] = iter(())

    def feed(self, rec: _Record) -> None:
        self.records += 1
        when = parse_iso(rec.timestamp)
        if when is not None:
            self.first = when if self.first is None else min(self.first, when)
            self.last = when if self.last is None else max(self.last, when)
        if rec.kind == "session_meta":
            self._meta(rec)
        if self._copied(rec):
            return
        if rec.kind == "event_msg" and rec.payload.get("type") == "thread_name_updated":
            self.session.title = str_or_none(rec.payload.get("thread_name")) or self.session.title
        self.drafts.extend(_record_drafts(rec, self.session))

    def _meta(self, rec: _Record) -> None:
        session = self.session
        if session.own_id is None:
            session.own_id = nonempty_str(rec.payload.get("id"))
            session.forked_from = nonempty_str(
                rec.payload.get("forked_from_id") or rec.payload.get("forked_from_process_id")
            )
            session.started = parse_iso(rec.payload.get("timestamp")) or parse_iso(rec.timestamp)
            parent = session.forked_from
            if parent is not None and parent.lower() in self.index:
                self.fork = "waiting"
        elif self.fork == "waiting" and rec.payload.get("id") == session.forked_from:
            self.fork = "copying"
            self.parent_digests = _parent_digests(self.index[str(session.forked_from).lower()])

    def _copied(self, rec: _Record) -> bool:
        """True while the records repeat the parent's, in step (a fork's copied history)."""
        if self.fork != "copying":
            return False
        if next(self.parent_digests, None) == rec.digest():
            self.session.fork_copied += 1
            return True
        self.fork = "done"
        return False

    def build(self, stats: _FileStats) -> Conversation:
        label = str(self.path)
        session = self.session
        session_id = session.own_id or session_id_from_name(self.path.name)
        if session_id is None or not self.records:  # e.g. a compressed file holding nothing
            what = "no codex records" if not self.records else "no session id"
            reason = "no-records" if not self.records else "missing-session-id"
            raise ReadError(what, file=label, record="1", reason=reason)
        if session.fork_copied:
            session.unknown["skipped:fork-copied"] += session.fork_copied
        if stats.blank:
            session.unknown["skipped:blank-line"] += stats.blank
        messages = _messages(session_id, _pair_echoes(self.drafts), session)
        try:
            return Conversation(
                key=f"{SOURCE}:{session_id}",
                source=SOURCE,
                external_id=session_id,
                title=session.title,
                created_at=session.started or self.first,
                updated_at=self.last,
                messages=messages,
                provenance=Provenance(file=label, position=0),
                unknown_types=dict(session.unknown),
            )
        except ValidationError:
            raise ReadError(
                "conversation failed validation", file=label, reason="parse-error:ValidationError"
            ) from None


def _parent_digests(path: Path) -> Iterator[str]:
    try:
        for rec in _records(path, str(path), [], _FileStats(), None):
            yield rec.digest()
    except ReadError:
        return


# ---------------------------------------------------------------- records → drafts


def _record_drafts(rec: _Record, session: _Session) -> Iterator[_Draft]:
    if rec.kind == "response_item":
        yield from _response_item(rec, session)
    elif rec.kind == "event_msg":
        yield from _event(rec, session)
    elif rec.kind == "compacted":
        text = s(rec.payload.get("message"))
        yield _draft(rec, "system", Channel.MACHINERY, "compacted", text)
    elif rec.kind not in METADATA_LINE_TYPES:
        yield _unknown(rec, rec.kind, session)


def _base_key(rec: _Record, item_id: Any = None) -> str:
    own = nonempty_str(item_id) or nonempty_str(rec.payload.get("id"))
    if own and rec.kind != "session_meta":
        return own
    if rec.ordinal is not None:
        return f"ord-{rec.ordinal}"
    return "sha1-" + (rec.line_digest or payload_digest(rec.timestamp, rec.kind, rec.payload))


def _draft(
    rec: _Record, role: str, channel: Channel, content_type: str, text: str, **extra: Any
) -> _Draft:
    key = extra.pop("key", None) or _base_key(rec)
    return _Draft(rec.number, rec.timestamp, key, role, channel, content_type, text, **extra)


def _unknown(rec: _Record, raw_type: str, session: _Session) -> _Draft:
    session.unknown[raw_type] += 1
    return _draft(
        rec, "unknown", Channel.MACHINERY, raw_type, raw_json(rec.payload), raw_type=raw_type
    )


def _content_texts(content: Any) -> list[str]:
    if isinstance(content, str):
        return [content]
    if not isinstance(content, list):
        return []
    texts: list[str] = []
    for part in content:
        if isinstance(part, dict) and isinstance(part.get("text"), str):
            texts.append(part["text"])
    return texts


def _response_item(rec: _Record, session: _Session) -> Iterator[_Draft]:
    item_type = s(rec.payload.get("type"))
    if item_type == "message":
        yield from _message_item(rec, session)
    elif item_type == "reasoning":
        text = "\n".join(
            _content_texts(rec.payload.get("summary")) + _content_texts(rec.payload.get("content"))
        )
        yield _draft(rec, "assistant", Channel.MACHINERY, "reasoning", text, pair="reasoning")
    elif item_type in TOOL_ITEMS:
        yield _draft(rec, _tool_role(item_type), Channel.TOOL, item_type, _tool_text(rec.payload))
    elif item_type in METADATA_ITEMS:
        return
    else:
        yield _unknown(rec, f"response_item:{item_type or 'missing'}", session)


def _tool_role(item_type: str) -> str:
    return "tool" if item_type.endswith("_output") else "assistant"


def _tool_text(payload: dict[str, Any]) -> str:
    for name in ("arguments", "input", "output"):
        value = payload.get(name)
        if isinstance(value, str):
            return value
    return raw_json(payload)


def _message_item(rec: _Record, session: _Session) -> Iterator[_Draft]:
    role = s(rec.payload.get("role")) or "unknown"
    text = "\n".join(_content_texts(rec.payload.get("content")))
    if role == "assistant":
        yield _draft(rec, role, Channel.ASSISTANT, "message", text, pair="assistant")
    elif role == "user":
        yield from _user_text(rec, text, "message", pair="user")
    elif role in ("developer", "system"):
        yield _draft(rec, role, Channel.MACHINERY, "message", text)
    else:
        yield _unknown(rec, f"message:{role}", session)


def _user_text(
    rec: _Record, text: str, content_type: str, *, key: str | None = None, **extra: Any
) -> Iterator[_Draft]:
    """The person's words, with injected context and the Desktop preamble as machinery."""
    if is_injected(text):
        yield _draft(rec, "user", Channel.MACHINERY, content_type, text, key=key)
        return
    head, request = split_preamble(text)
    if head:
        yield _draft(rec, "user", Channel.MACHINERY, content_type, head, key=key, suffix="#context")
    yield _draft(rec, "user", Channel.PERSON, content_type, request, key=key, **extra)


def split_preamble(text: str) -> tuple[str, str]:
    """``(preamble, request)``: the Codex Desktop file-list preamble and the typed request.

    ``preamble + request == text`` always; the preamble is empty when there is none.
    """
    if FILES_PREAMBLE not in text[:4096] or USER_MESSAGE_BEGIN not in text:
        return "", text
    cut = text.index(USER_MESSAGE_BEGIN) + len(USER_MESSAGE_BEGIN)
    if text.startswith("\n", cut):
        cut += 1
    return text[:cut], text[cut:]


def _event(rec: _Record, session: _Session) -> Iterator[_Draft]:
    event = s(rec.payload.get("type"))
    if event in ECHO_EVENTS:
        yield from _echo(rec, ECHO_EVENTS[event], _event_text(rec.payload), f"event:{event}")
    elif event == "item_completed":
        yield from _completed_item(rec, session)
    elif event in TELEMETRY_EVENTS:
        return
    elif event == "error":
        yield _draft(rec, "system", Channel.MACHINERY, "event:error", s(rec.payload.get("message")))
    elif event == "exited_review_mode":
        yield _draft(rec, "tool", Channel.TOOL, "event:exited_review_mode", raw_json(rec.payload))
    else:
        yield _unknown(rec, f"event_msg:{event or 'missing'}", session)


def _event_text(payload: dict[str, Any]) -> str:
    return s(payload.get("message")) or s(payload.get("text"))


def _completed_item(rec: _Record, session: _Session) -> Iterator[_Draft]:
    item = rec.payload.get("item")
    if not isinstance(item, dict):
        yield _unknown(rec, "event_msg:item_completed", session)
        return
    item_type = s(item.get("type"))
    key = _base_key(rec, item.get("id"))
    if item_type in ECHO_ITEMS:
        texts = _content_texts(item.get("content"))
        texts += _content_texts(item.get("summary_text")) + _content_texts(item.get("raw_content"))
        text = "\n".join(texts) or s(item.get("text"))
        yield from _echo(rec, ECHO_ITEMS[item_type], text, f"item:{item_type}", key=key)
    elif item_type == "Plan":
        yield _draft(rec, "assistant", Channel.TOOL, "item:Plan", s(item.get("text")), key=key)
    elif item_type in TOOL_COMPLETED_ITEMS:
        return  # the response_item records carry the same tool traffic
    else:
        yield _unknown(rec, f"item_completed:{item_type or 'missing'}", session)


def _echo(
    rec: _Record, kind: str, text: str, content_type: str, *, key: str | None = None
) -> Iterator[_Draft]:
    if kind == "user":
        yield from _user_text(rec, text, content_type, key=key, echo="user")
    elif kind == "assistant":
        yield _draft(rec, "assistant", Channel.ASSISTANT, content_type, text, key=key, echo=kind)
    else:
        yield _draft(rec, "assistant", Channel.MACHINERY, content_type, text, key=key, echo=kind)


# ---------------------------------------------------------------- echoes, keys, messages


def _pair_echoes(drafts: list[_Draft]) -> list[_Draft]:
    """Drop each echo that repeats a nearby record of the same kind and text."""
    open_records: dict[tuple[str, str], list[int]] = {}
    for i, d in enumerate(drafts):
        if d.pair is not None:
            open_records.setdefault((d.pair, d.text), []).append(i)
    dropped: set[int] = set()
    for i, d in enumerate(drafts):
        if d.echo is None:
            continue
        candidates = open_records.get((d.echo, d.text), [])
        match = next((j for j in candidates if abs(j - i) <= ECHO_WINDOW), None)
        if match is not None:
            candidates.remove(match)
            dropped.add(i)
            if i > 0 and drafts[i - 1].suffix == "#context" and drafts[i - 1].number == d.number:
                dropped.add(i - 1)
    return [d for i, d in enumerate(drafts) if i not in dropped]


def _messages(session_id: str, drafts: list[_Draft], session: _Session) -> list[Message]:
    messages: list[Message] = []
    used: set[str] = set()
    previous: str | None = None
    if session.fork_copied and session.forked_from:
        previous = f"{SOURCE}:{session.forked_from}"  # the link to the parent session
    for d in drafts:
        node_id = d.key + d.suffix
        if node_id in used:  # e.g. every ordinal zeroed: keep both, tell them apart by line
            node_id = f"{d.key}~L{d.number}{d.suffix}"
        used.add(node_id)
        messages.append(
            Message(
                key=f"{SOURCE}:{session_id}:{node_id}",
                node_id=node_id,
                parent_id=previous,
                role=d.role,
                channel=d.channel,
                content_type=d.content_type,
                text=d.text,
                created_at=parse_iso(d.timestamp),
                position=len(messages),
                raw_type=d.raw_type,
            )
        )
        previous = node_id
    return messages
