"""The case-record prompt: a static part that never changes, and a camelCase response schema."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from pydantic import ValidationError

from core.models import Channel, Conversation, DraftRecord, MemoryIndexEntry, Message, Provenance
from prompts.case_record import (
    PROMPT_VERSION,
    CaseRecordResponse,
    build_prompt,
    to_draft_records,
)

T0 = datetime(2023, 6, 9, 13, 39, 59, tzinfo=UTC)


def make_conv(
    turns: list[tuple[str, str]], *, key: str = "chatgpt:c1", title: str | None = "A title"
) -> Conversation:
    """A conversation from (role, text) turns: "user" is the person, anything else the assistant."""
    messages = [
        Message(
            key=f"{key}:n{i}",
            node_id=f"n{i}",
            parent_id=f"n{i - 1}" if i else None,
            role=role,
            channel=Channel.PERSON if role == "user" else Channel.ASSISTANT,
            content_type="text",
            text=text,
            created_at=T0 + timedelta(minutes=i) if i != 1 else None,
            position=i,
        )
        for i, (role, text) in enumerate(turns)
    ]
    return Conversation(
        key=key,
        source="chatgpt",
        external_id=key.split(":", 1)[1],
        title=title,
        created_at=T0,
        messages=messages,
        provenance=Provenance(file="conversations.json", position=0),
    )


def response_payload() -> dict:
    return {
        "records": [
            {
                "action": "append",
                "targetMemoryId": "mem_1",
                "expectedRevision": 2,
                "title": "DB for the household app",
                "memoryKind": "decision",
                "canonicalSummary": "## 背景\n- ...\n## 決定\n- PostgreSQLにした",
                "indexSummary": "PostgreSQLにした",
                "aliases": ["データベース選定", "database choice"],
                "tags": ["database"],
                "occurredAt": "2023-06-09T13:39:59Z",
                "validFrom": "2023-06-09T13:45:00+00:00",
                "statedFacts": ["PostgreSQLにした"],
                "inferences": ["the person values sync across devices"],
                "evidence": [{"messageKey": "chatgpt:c1:n2", "quoteHint": "PostgreSQLにした"}],
                "sourceConversationKeys": ["chatgpt:c1"],
            },
            {
                "action": "create",
                "title": "Minimal",
                "memoryKind": "other",
                "canonicalSummary": "s",
                "indexSummary": "i",
            },
        ]
    }


def test_prompt_version() -> None:
    assert PROMPT_VERSION == "case-record-v2"


def test_static_part_does_not_change_with_the_input() -> None:
    a = make_conv([("user", "I decided to use Postgres."), ("assistant", "OK.")])
    b = make_conv(
        [("user", "家計簿アプリはSQLiteにした。"), ("assistant", "了解です。")], key="chatgpt:c2"
    )
    entry = MemoryIndexEntry(
        id="m1", title="t", index_summary="s", kind="decision", current_revision=4
    )
    static_a, dynamic_a = build_prompt([a], [])
    static_b, dynamic_b = build_prompt([a, b], [entry])
    static_c, _ = build_prompt([], [])
    assert static_a == static_b == static_c
    assert dynamic_a != dynamic_b
    assert "Postgres" not in static_a and "chatgpt:c1" not in static_a


def test_static_instructions_cover_the_rules() -> None:
    static, _ = build_prompt([], [])
    for phrase in (
        "conversation's",
        "own language",
        "background",
        "options compared",
        "decision",
        "open points",
        "indexSummary",
        "Japanese AND in English",
        "Never use today's date",
        "statedFacts",
        "inferences",
        "quoteHint",
        "Prefer the person's own messages",
        "append",
        "targetMemoryId",
        "expectedRevision",
        "noop",
    ):
        assert phrase in static, phrase
    assert '"canonicalSummary"' in static  # the schema is part of the static text


def test_dynamic_part_lists_context_then_numbered_messages() -> None:
    conv = make_conv(
        [
            ("user", "Which DB?"),
            ("assistant", "Postgres or SQLite."),
            ("user", "I'll use Postgres."),
        ]
    )
    entry = MemoryIndexEntry(
        id="mem_9",
        title="Database choice",
        index_summary="Chose SQLite for the prototype",
        kind="decision",
        current_revision=3,
        source_conversation_keys=["chatgpt:c0"],
    )
    _, dynamic = build_prompt([conv], [entry])
    assert dynamic.index("mem_9") < dynamic.index("chatgpt:c1:n0")
    assert "title: Database choice" in dynamic
    assert "index summary: Chose SQLite for the prototype" in dynamic
    assert "current revision: 3" in dynamic
    assert (
        "[1] key: chatgpt:c1:n0 | role: person | time: 2023-06-09T13:39:59+00:00\nWhich DB?"
        in dynamic
    )
    assert "[2] key: chatgpt:c1:n1 | role: assistant | time: unknown" in dynamic
    assert "[3] key: chatgpt:c1:n2 | role: person | time: 2023-06-09T13:41:59+00:00" in dynamic
    assert dynamic.index("[1]") < dynamic.index("[2]") < dynamic.index("[3]")


def test_dynamic_part_without_context_and_machinery() -> None:
    conv = make_conv([("user", "hello"), ("assistant", "hi")])
    hidden = Message(
        key="chatgpt:c1:sys",
        node_id="sys",
        role="system",
        channel=Channel.MACHINERY,
        content_type="text",
        text="hidden system prompt",
        position=2,
    )
    conv = conv.model_copy(update={"messages": [*conv.messages, hidden]})
    _, dynamic = build_prompt([conv], [])
    assert "## Existing memories\n(none)" in dynamic
    assert "hidden system prompt" not in dynamic


def test_response_schema_is_camel_case() -> None:
    schema = CaseRecordResponse.model_json_schema()
    item = schema["$defs"]["CaseRecordItem"]["properties"]
    for name in (
        "action",
        "targetMemoryId",
        "expectedRevision",
        "title",
        "memoryKind",
        "canonicalSummary",
        "indexSummary",
        "aliases",
        "tags",
        "occurredAt",
        "validFrom",
        "statedFacts",
        "inferences",
        "evidence",
        "sourceConversationKeys",
    ):
        assert name in item
    assert "target_memory_id" not in item
    kinds = set(item["memoryKind"]["enum"])
    assert kinds == {"episode", "decision", "project", "preference", "lesson", "profile", "other"}


def test_response_round_trips_into_draft_records() -> None:
    resp = CaseRecordResponse.model_validate_json(json.dumps(response_payload()))
    records = to_draft_records(resp)
    assert all(isinstance(r, DraftRecord) for r in records)
    first, second = records
    assert first.action == "append"
    assert (first.target_memory_id, first.expected_revision) == ("mem_1", 2)
    assert first.memory_kind == "decision"
    assert first.canonical_summary.startswith("## 背景")
    assert first.aliases == ["データベース選定", "database choice"]
    assert first.occurred_at == T0
    assert first.valid_from == datetime(2023, 6, 9, 13, 45, tzinfo=UTC)
    assert first.stated_facts == ["PostgreSQLにした"]
    assert first.inferences == ["the person values sync across devices"]
    assert [(e.message_key, e.quote_hint) for e in first.evidence] == [
        ("chatgpt:c1:n2", "PostgreSQLにした")
    ]
    assert first.source_conversation_keys == ["chatgpt:c1"]
    assert first.draft_id == ""
    assert second.action == "create" and second.evidence == [] and second.occurred_at is None
    # and back again: a DraftRecord survives its own JSON
    assert DraftRecord.model_validate_json(first.model_dump_json()) == first


@pytest.mark.parametrize(
    "change",
    [
        {"memoryKind": "diary"},
        {"action": "update"},
        {"action": "append", "targetMemoryId": None},
        {"evidence": [{"messageKey": "k", "quoteHint": ""}]},
    ],
)
def test_invalid_responses_are_rejected(change: dict) -> None:
    payload = response_payload()
    payload["records"][0].update(change)
    with pytest.raises(ValidationError):
        CaseRecordResponse.model_validate(payload)
