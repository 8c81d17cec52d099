"""Oversize conversations: split at message boundaries into chunks under the batch's character
cap, draft each chunk, and merge the chunks' drafts deterministically into one record per topic.

The merge never shortens: summaries are joined in chunk order (a part already contained in
another is not repeated), aliases, tags, facts and evidence pointers are unions in first-seen
order, ``occurred_at`` is the earliest and ``valid_from`` the latest. A topic is a normalised
title; records with the same topic across chunks become one.
"""

from __future__ import annotations

from collections.abc import Sequence

from core.hashing import normalize_for_identity
from core.models import Conversation, DraftRecord, Message

KIND_PRECEDENCE = ("decision", "lesson", "preference", "project", "profile", "episode", "other")


def split_messages(messages: Sequence[Message], max_chars: int) -> list[list[Message]]:
    """Consecutive runs of messages, each at most ``max_chars`` long (a single longer message
    stays whole in a chunk of its own: we never cut inside a message)."""
    chunks: list[list[Message]] = []
    current: list[Message] = []
    size = 0
    for m in messages:
        if current and size + len(m.text) > max_chars:
            chunks.append(current)
            current, size = [], 0
        current.append(m)
        size += len(m.text)
    if current:
        chunks.append(current)
    return chunks


def chunk_conversation(conv: Conversation, max_chars: int) -> list[Conversation]:
    """The conversation as chunks the drafter can take one at a time. Each chunk keeps the
    conversation's key, so evidence pointers still name the real messages."""
    drafting = conv.drafting_messages
    if sum(len(m.text) for m in drafting) <= max_chars:
        return [conv]
    return [
        conv.model_copy(update={"messages": part}) for part in split_messages(drafting, max_chars)
    ]


def _topic(title: str) -> str:
    return normalize_for_identity(title).casefold()


def _union(*lists: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(x for lst in lists for x in lst))


def _merge_two(a: DraftRecord, b: DraftRecord) -> DraftRecord:
    summary = a.canonical_summary
    if b.canonical_summary and b.canonical_summary not in summary:
        summary = (
            b.canonical_summary
            if summary in b.canonical_summary
            else summary + "\n\n" + b.canonical_summary
        )
    kinds = sorted(
        {a.memory_kind, b.memory_kind},
        key=lambda k: KIND_PRECEDENCE.index(k) if k in KIND_PRECEDENCE else 99,
    )
    occurred = [t for t in (a.occurred_at, b.occurred_at) if t is not None]
    valid = [t for t in (a.valid_from, b.valid_from) if t is not None]
    seen = {(p.message_key, p.quote_hint) for p in a.evidence}
    return a.model_copy(
        update={
            "memory_kind": kinds[0],
            "canonical_summary": summary,
            "index_summary": a.index_summary or b.index_summary,
            "aliases": _union(a.aliases, b.aliases),
            "tags": _union(a.tags, b.tags),
            "stated_facts": _union(a.stated_facts, b.stated_facts),
            "inferences": _union(a.inferences, b.inferences),
            "evidence": [
                *a.evidence,
                *(p for p in b.evidence if (p.message_key, p.quote_hint) not in seen),
            ],
            "source_conversation_keys": _union(
                a.source_conversation_keys, b.source_conversation_keys
            ),
            "occurred_at": min(occurred) if occurred else None,
            "valid_from": max(valid) if valid else None,
        }
    )


def merge_chunk_drafts(per_chunk: Sequence[Sequence[DraftRecord]]) -> list[DraftRecord]:
    """One record per topic, in order of first appearance; noops are dropped when a topic has a
    real record."""
    merged: dict[str, DraftRecord] = {}
    for records in per_chunk:
        for rec in records:
            key = _topic(rec.title)
            if key not in merged or merged[key].action == "noop":
                merged[key] = rec
            elif rec.action != "noop":
                merged[key] = _merge_two(merged[key], rec)
    return list(merged.values())
