"""A scripted model behind the local fake vendor servers: it answers every drafting request of
the OpenAI, Anthropic and Gemini adapters from the prompt it was sent, so the drafting
evaluation can run through each adapter offline (plumbing, not model quality).

The "model" reads the request the way a real one would have to: the existing memories listed in
the prompt (ids, revisions, titles, index lines, aliases) and the conversations (keys, message
keys, roles, times, texts). It rebuilds the conversations from that text and lets the offline
extractive drafter write the records, which it sends back in the vendor's own answer shape:
camelCase ``CaseRecordResponse`` items with ``statedFacts``, ``inferences``, evidence hints that
are quotes of the prompt's text, and ``append`` targets taken from the offered memories only.
Every request is recorded (``ScriptedModel.requests``).
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

from core.models import Channel, Conversation, MemoryIndexEntry, Message, Provenance
from providers.anthropic_provider import TOOL_NAME
from providers.extractive import draft_records
from tests.fakeservers import (
    FakeServer,
    Recorded,
    Reply,
    anthropic_message,
    gemini_response,
    openai_chat,
)

_CONTEXT_RE = re.compile(
    r"^- id: (?P<id>\S+) \| title: (?P<title>.*?) \| index summary: (?P<index>.*?) \| kind: (?P<kind>\S+)"
    r" \| current revision: (?P<rev>\d+) \| source conversations: (?P<sources>.*?)(?: \| aliases: (?P<aliases>.*))?$",
    re.MULTILINE,
)
_MESSAGE_RE = re.compile(
    r"^\[(\d+)\] key: (\S+) \| role: (person|assistant) \| time: (\S+)\n", re.MULTILINE
)


class ScriptedModel(FakeServer):
    """One fake server for the three vendors (told apart by the request path)."""

    def _record_and_next(self, request: Recorded) -> Reply:
        with self._lock:
            self.requests.append(request)
        body = request.json()
        answer = json.dumps({"records": self.answer(_batch_text(body))}, ensure_ascii=False)
        if "/messages" in request.path:  # Anthropic: the records as the tool's input
            return Reply(200, anthropic_message(json.loads(answer), tool_name=TOOL_NAME))
        if ":generateContent" in request.path:  # Gemini
            return Reply(200, gemini_response(answer))
        return Reply(200, openai_chat(answer))  # OpenAI chat completions

    def answer(self, prompt: str) -> list[dict[str, Any]]:
        context = parse_context(prompt)
        records = draft_records(parse_conversations(prompt), context)
        offered = {e.id for e in context}
        out = []
        for r in records:
            if r.action == "append":
                assert r.target_memory_id in offered, (
                    "the scripted model appends to offered memories only"
                )
            out.append(
                {
                    "action": r.action,
                    "targetMemoryId": r.target_memory_id,
                    "expectedRevision": r.expected_revision,
                    "title": r.title,
                    "memoryKind": r.memory_kind,
                    "canonicalSummary": r.canonical_summary,
                    "indexSummary": r.index_summary,
                    "aliases": r.aliases,
                    "tags": r.tags,
                    "occurredAt": _iso(r.occurred_at),
                    "validFrom": _iso(r.valid_from),
                    "statedFacts": r.stated_facts,
                    "inferences": r.inferences,
                    "evidence": [
                        {"messageKey": e.message_key, "quoteHint": e.quote_hint} for e in r.evidence
                    ],
                    "sourceConversationKeys": r.source_conversation_keys,
                }
            )
        return out


def _strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return [t for v in value for t in _strings(v)]
    if isinstance(value, dict):
        return [t for v in value.values() for t in _strings(v)]
    return []


def _batch_text(body: Any) -> str:
    """The batch's text in a request body of any vendor's shape: the string that lists the
    existing memories and the conversations (the prompt's dynamic part)."""
    texts = [t for t in _strings(body) if "## Existing memories" in t]
    assert texts, "a drafting request carries the batch text"
    return texts[-1]


def parse_context(prompt: str) -> list[MemoryIndexEntry]:
    section = prompt.split("## Existing memories", 1)[-1].split("## Conversation ", 1)[0]
    return [
        MemoryIndexEntry(
            id=m["id"],
            title=m["title"],
            index_summary=m["index"],
            kind=m["kind"],
            current_revision=int(m["rev"]),
            source_conversation_keys=[] if m["sources"] == "-" else m["sources"].split(", "),
            aliases=m["aliases"].split(", ") if m["aliases"] else [],
        )
        for m in _CONTEXT_RE.finditer(section)
    ]


def parse_conversations(prompt: str) -> list[Conversation]:
    out: list[Conversation] = []
    for block in re.split(r"(?m)^## Conversation \d+\n", prompt)[1:]:
        head = dict(
            re.findall(r"(?m)^(key|source|title|created): (.*)$", block.split("\n\n[1]", 1)[0])
        )
        marks = list(_MESSAGE_RE.finditer(block))
        messages = []
        for i, m in enumerate(marks):
            end = marks[i + 1].start() if i + 1 < len(marks) else len(block)
            text = block[m.end() : end].removesuffix("\n").removesuffix("\n")
            person = m.group(3) == "person"
            messages.append(
                Message(
                    key=m.group(2),
                    node_id=m.group(2).rsplit(":", 1)[1],
                    role="user" if person else "assistant",
                    channel=Channel.PERSON if person else Channel.ASSISTANT,
                    content_type="text",
                    text=text,
                    created_at=_time(m.group(4)),
                    position=int(m.group(1)) - 1,
                )
            )
        out.append(
            Conversation(
                key=head["key"],
                source=head.get("source", "chatgpt"),
                external_id=head["key"].split(":", 1)[1],
                title=head.get("title") or None,
                created_at=_time(head.get("created", "unknown")),
                messages=messages,
                provenance=Provenance(file="prompt", position=0),
            )
        )
    return out


def _time(value: str) -> datetime | None:
    return None if value in ("unknown", "") else datetime.fromisoformat(value)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None
