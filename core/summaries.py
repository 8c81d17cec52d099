"""Seed 001's hierarchy, as data: what a month is made of, the drafts a summarizer returns, and
what the store keeps (each rebuild a new version, the old ones kept).

Level 1 are the raw messages (the ledger) and the case records (the memories); level 2 one
summary per month of the person's calendar; level 3 one global profile built from the monthly
summaries. Every summary cites what it rests on: memory ids and message keys.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import asdict, dataclass, field
from datetime import datetime

from pydantic import TypeAdapter

MONTH_PATTERN = r"^[0-9]{4}-(0[1-9]|1[0-2])$"


@dataclass(frozen=True)
class MemoryInput:
    """A case record of the month (its current revision)."""

    id: str
    revision: int
    kind: str
    title: str
    index_summary: str
    occurred_at: datetime | None
    conversation_keys: tuple[str, ...] = ()  # the conversations its evidence quotes


@dataclass(frozen=True)
class MessageInput:
    """One thing the person wrote in the month (active path of a kept conversation)."""

    key: str
    conversation_key: str
    created_at: datetime | None
    text: str
    content_hash: str


@dataclass(frozen=True)
class MonthInputs:
    month: str  # YYYY-MM in the person's calendar
    time_zone: str
    memories: tuple[MemoryInput, ...]
    messages: tuple[MessageInput, ...]

    @property
    def inputs_hash(self) -> str:
        """Changes when a memory of the month gets a new revision, or a message is added,
        changed or removed: the month is redone only then."""
        h = hashlib.sha256(f"month-inputs-v1\0{self.month}\0{self.time_zone}".encode())
        for m in sorted(self.memories, key=lambda m: m.id):
            h.update(f"\0m\0{m.id}\0{m.revision}".encode())
        for msg in sorted(self.messages, key=lambda x: x.key):
            h.update(f"\0k\0{msg.key}\0{msg.content_hash}".encode())
        return "sha256:" + h.hexdigest()


@dataclass
class MonthDraft:
    summary: str
    sentiment: float
    keywords: list[str]
    memory_ids: list[str]
    message_keys: list[str]
    input_tokens: int = 0
    output_tokens: int = 0
    # one per line of ``summary``: {"memory_ids": [...], "message_keys": [...]} it is drawn from
    citations: list[dict[str, list[str]]] = field(default_factory=list)

    def to_json(self) -> dict:
        return asdict(self)

    @classmethod
    def from_json(cls, d: dict) -> MonthDraft:
        """A draft as ``to_json`` wrote it to ``runs/<id>/months/``; a file that does not fit
        raises pydantic's ``ValidationError``."""
        return TypeAdapter(cls).validate_python(d)


@dataclass
class ProfileDraft:
    profile: str
    months: list[str]
    memory_ids: list[str] = field(default_factory=list)
    input_tokens: int = 0
    output_tokens: int = 0
    citations: list[dict[str, list[str]]] = field(default_factory=list)  # one per line


@dataclass(frozen=True)
class MonthSummary:
    month: str
    version: int
    summary: str
    sentiment: float
    keywords: tuple[str, ...]
    memory_ids: tuple[str, ...]
    message_keys: tuple[str, ...]
    inputs_hash: str
    model: str
    prompt_version: str
    time_zone: str
    run_id: str | None
    created_at: datetime | None = None
    citations: tuple[dict[str, list[str]], ...] = ()  # one per line of the summary

    def to_json(self) -> dict:
        return {
            "month": self.month,
            "summary": self.summary,
            "sentences": cited_lines(self.summary, self.citations),
            "sentiment": round(self.sentiment, 3),
            "keywords": list(self.keywords),
            "memory_ids": list(self.memory_ids),
            "message_keys": list(self.message_keys),
            "version": self.version,
            "model": self.model,
            "prompt_version": self.prompt_version,
            "time_zone": self.time_zone,
            "created_at": self.created_at.isoformat() if self.created_at else None,
        }


@dataclass(frozen=True)
class Profile:
    version: int
    profile: str
    months: tuple[str, ...]
    memory_ids: tuple[str, ...]
    inputs_hash: str
    model: str
    prompt_version: str
    run_id: str | None
    created_at: datetime | None = None
    citations: tuple[dict[str, list[str]], ...] = ()  # one per line of the profile

    def to_json(self) -> dict:
        return {
            "profile": self.profile,
            "sentences": cited_lines(self.profile, self.citations),
            "months": list(self.months),
            "version": self.version,
            "memory_ids": list(self.memory_ids),
            "model": self.model,
            "prompt_version": self.prompt_version,
            "created_at": self.created_at.isoformat() if self.created_at else None,
        }


def profile_inputs_hash(months: list[MonthSummary]) -> str:
    """The profile is redone only when a monthly summary it rests on has a new version."""
    body = json.dumps([[m.month, m.version] for m in sorted(months, key=lambda m: m.month)])
    return "sha256:" + hashlib.sha256(("profile-inputs-v1\0" + body).encode()).hexdigest()


def cited_lines(text: str, citations: tuple[dict[str, list[str]], ...]) -> list[dict]:
    """The lines of a summary, each with the memory ids and message keys it is drawn from."""
    out = []
    for i, line in enumerate(text.splitlines()):
        c = citations[i] if i < len(citations) else {}
        out.append(
            {
                "text": line,
                "memory_ids": list(c.get("memory_ids", [])),
                "message_keys": list(c.get("message_keys", [])),
            }
        )
    return out
