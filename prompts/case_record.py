"""The case-record prompt: static instructions, the response schema, and the dynamic batch text.

The static part never depends on the input, and comes first, so provider prompt caches apply.
Every piece of the person's text that goes into the dynamic part (message texts, titles, the
context's titles and summaries) passes the secret guard first: each conversation as a whole
(``core.secrets.redact_conversation``, so a secret split across two messages is found), each
context entry's title and summary together (``redact_messages``), so no request body built
from ``build_prompt`` carries a flagged secret. Keys and times are ours and
are left as they are, so evidence pointers still resolve against the ledger.
The response schema is camelCase (the only camelCase in the project); ``to_draft_records``
turns it into our snake_case ``DraftRecord``.
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from core.models import Conversation, DraftRecord, EvidencePointer, MemoryIndexEntry, Message
from core.secrets import redact_conversation, redact_messages

PROMPT_VERSION = (
    "case-record-v2"  # v2: fixed section headings, changes of mind, facts vs inferences
)

MemoryKind = Literal["episode", "decision", "project", "preference", "lesson", "profile", "other"]


class EvidenceItem(BaseModel):
    model_config = ConfigDict(extra="ignore")

    messageKey: str = Field(min_length=1)
    quoteHint: str = Field(min_length=1)


class CaseRecordItem(BaseModel):
    model_config = ConfigDict(extra="ignore")

    action: Literal["create", "append", "noop"]
    targetMemoryId: str | None = None
    expectedRevision: int | None = None
    title: str
    memoryKind: MemoryKind
    canonicalSummary: str
    indexSummary: str
    aliases: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    occurredAt: datetime | None = None
    validFrom: datetime | None = None
    statedFacts: list[str] = Field(default_factory=list)
    inferences: list[str] = Field(default_factory=list)
    evidence: list[EvidenceItem] = Field(default_factory=list)
    sourceConversationKeys: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _append_has_target(self) -> CaseRecordItem:
        if self.action == "append" and (
            self.targetMemoryId is None or self.expectedRevision is None
        ):
            raise ValueError("an append needs targetMemoryId and expectedRevision")
        return self


class CaseRecordResponse(BaseModel):
    model_config = ConfigDict(extra="ignore")

    records: list[CaseRecordItem]


def to_draft_records(resp: CaseRecordResponse) -> list[DraftRecord]:
    """The model's camelCase records as our DraftRecords (draft ids are assigned by the caller)."""
    return [_to_draft(item) for item in resp.records]


def _to_draft(item: CaseRecordItem) -> DraftRecord:
    return DraftRecord(
        action=item.action,
        target_memory_id=item.targetMemoryId,
        expected_revision=item.expectedRevision,
        title=item.title,
        memory_kind=item.memoryKind,
        canonical_summary=item.canonicalSummary,
        index_summary=item.indexSummary,
        aliases=list(item.aliases),
        tags=list(item.tags),
        occurred_at=item.occurredAt,
        valid_from=item.validFrom,
        stated_facts=list(item.statedFacts),
        inferences=list(item.inferences),
        evidence=[
            EvidencePointer(message_key=e.messageKey, quote_hint=e.quoteHint) for e in item.evidence
        ],
        source_conversation_keys=list(item.sourceConversationKeys),
    )


def response_json_schema() -> dict:
    """The JSON schema of ``CaseRecordResponse`` (for providers' structured output)."""
    return CaseRecordResponse.model_json_schema()


_INSTRUCTIONS = """\
You turn a person's conversations with an AI assistant into case records for their long-term \
memory. A case record is what the person would want to remember months later: not a \
transcript, but the case.

Input. Below the instructions you get (1) the index of existing memories that may be related \
(id, title, index summary, kind, current revision, source conversations) and (2) one or more \
conversations, each message numbered and labelled with its message key, its role (person or \
assistant) and its time (ISO 8601, or "unknown").

For each conversation (or group of conversations about the same case), write one record:

- language: write title, canonicalSummary, indexSummary and statedFacts in the conversation's \
own language (a Japanese conversation gives a Japanese record; an English one an English \
record). Never translate the person's words into another language.
- title: short and specific, naming the subject (product, project, place, person).
- memoryKind: one of episode, decision, project, preference, lesson, profile, other. Use \
"decision" when the person decided something, "lesson" when they learned something, \
"preference" for a lasting like or dislike, "project" for an ongoing project or plan, \
"profile" for facts about the person, "episode" for an event, else "other".
- canonicalSummary: a detailed case record, in this order, leaving out parts that are absent: \
the background (the situation and the goal, the concerns, the options compared), the decision \
and its reasons, the result, and the open points still unresolved. Write it as sections, each \
a line "## <heading>" followed by "- " lines, with exactly these headings (Japanese record / \
English record): "## 背景" / "## Background", "## 決定" / "## Decision", "## 理由" / \
"## Reasons", "## 結果" / "## Result", "## 未解決" / "## Open points", "## 解決済み" / \
"## Resolved" (an open point that a later message settled, written "- <open point> → <how it \
was settled>"). Each heading at most once. Put the decision, each reason and each open point \
in the person's own words (copied, not paraphrased), one per line, each under its own heading. \
Keep names, numbers and versions exactly as written.
- indexSummary: one line of at most 140 characters that lets someone recognise the case in a \
list (prefer the decision, else the subject).
- aliases: other names someone might search for: give them in Japanese AND in English \
(for example a katakana and a Latin spelling, a translation of the subject), product names, \
abbreviations. At most 8.
- tags: a few lowercase topic words, at most 8.
- occurredAt: the time of the conversation, taken from the messages' own timestamps (the first \
message that has one). validFrom: the time of the message where the decision was made, else \
occurredAt. Never use today's date or the current time; if no message has a time, leave both \
null.
- statedFacts: what the person actually said (decisions, reasons, results, facts about \
themselves), each a short sentence in their words. inferences: what you conclude but the person \
did not say (a motive, a pattern, a link between two cases). Never mix the two: both lists are \
kept and shown to the person apart.
- evidence: pointers that support the record: messageKey is the key of the message exactly as \
given, quoteHint is a short verbatim quote (a phrase or one sentence, copied character for \
character, at most 200 characters) from that message. Prefer the person's own messages over \
the assistant's. Give one pointer for the decision, one for each reason and one for each open \
point (at most 16); never invent text that is not in the message.
- sourceConversationKeys: the conversation keys the record is drawn from.
- action: "create" for a new case. When an existing memory in the index is the same case \
(it lists this conversation among its sources), or the person changes a decision it records \
(they decided X before and now decide Y about the same thing), use "append" with \
targetMemoryId set to that memory's id and expectedRevision set to its current revision; \
write the record of this conversation only (the decision now current): the store keeps the \
superseded decision with its reasons in the memory's history. A memory that only has the same \
title is not the same case. Use "noop" when the conversation adds nothing worth remembering \
(then give a title and empty summary text).

Ignore pure machinery (code listings, logs, tool output) except where the person draws a \
conclusion from it. Do not store secrets (passwords, keys, tokens) in any field.

Answer only with JSON matching this schema:
"""


def static_instructions() -> str:
    """The static part of the prompt: identical for every batch of the same prompt version."""
    schema = json.dumps(response_json_schema(), ensure_ascii=False, sort_keys=True)
    return f"{_INSTRUCTIONS}{schema}\n"


def build_prompt(
    conversations: list[Conversation], context: list[MemoryIndexEntry]
) -> tuple[str, str]:
    """(static_instructions, dynamic_user_text) for one batch, secrets redacted."""
    static, dynamic, _ = build_prompt_guarded(conversations, context)
    return static, dynamic


def build_prompt_guarded(
    conversations: list[Conversation], context: list[MemoryIndexEntry]
) -> tuple[str, str, int]:
    """Like ``build_prompt``, plus the number of secrets the guard redacted (for logs/reports)."""
    guard = _Guard()
    parts = [_context_text(context, guard)]
    parts.extend(
        _conversation_text(i, conv, guard) for i, conv in enumerate(conversations, start=1)
    )
    return static_instructions(), "\n\n".join(parts) + "\n", guard.redacted


class _Guard:
    """Redacts the person's text (a conversation at a time) and counts what it took out."""

    def __init__(self) -> None:
        self.redacted = 0

    def conversation(self, conv: Conversation) -> Conversation:
        clean, count = redact_conversation(conv)
        self.redacted += count
        return clean

    def texts(self, *texts: str) -> list[str]:
        clean = redact_messages(texts)
        self.redacted += sum(a != b for a, b in zip(texts, clean, strict=True))
        return clean


def _context_text(context: list[MemoryIndexEntry], guard: _Guard) -> str:
    lines = ["## Existing memories"]
    if not context:
        lines.append("(none)")
    for entry in context:
        sources = ", ".join(entry.source_conversation_keys) or "-"
        title, summary, *aliases = guard.texts(entry.title, entry.index_summary, *entry.aliases)
        names = f" | aliases: {', '.join(_one_line(a) for a in aliases)}" if aliases else ""
        lines.append(
            f"- id: {entry.id} | title: {_one_line(title)} | index summary: "
            f"{_one_line(summary)} | kind: {entry.kind} | current revision: "
            f"{entry.current_revision} | source conversations: {sources}{names}"
        )
    return "\n".join(lines)


def _conversation_text(number: int, conv: Conversation, guard: _Guard) -> str:
    conv = guard.conversation(conv)  # the whole conversation first: split secrets are found
    header = (
        f"## Conversation {number}\nkey: {conv.key}\nsource: {conv.source}\n"
        f"title: {_one_line(conv.title or '')}\ncreated: {_iso(conv.created_at)}"
    )
    messages = [_message_text(i, m) for i, m in enumerate(conv.drafting_messages, start=1)]
    return "\n\n".join([header, *messages])


def _message_text(number: int, msg: Message) -> str:
    return (
        f"[{number}] key: {msg.key} | role: {msg.channel.value} | time: {_iso(msg.created_at)}\n"
        f"{msg.text}"
    )


def _iso(value: datetime | None) -> str:
    return value.isoformat() if value is not None else "unknown"


def _one_line(text: str) -> str:
    return " ".join(text.split())
