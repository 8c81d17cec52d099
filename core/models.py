"""Domain models. Everything that crosses a boundary is one of these (pydantic, validated).

snake_case everywhere except inside the LLM response schema (``prompts/``), which is camelCase.
"""

from __future__ import annotations

from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from core.hashing import content_hash, tagged_hash


class Channel(StrEnum):
    """Who a message's text belongs to. Only PERSON and ASSISTANT go into drafting text."""

    PERSON = "person"  # the person's own words
    ASSISTANT = "assistant"  # the assistant's visible answer
    TOOL = "tool"  # tool calls and tool output
    MACHINERY = "machinery"  # hidden system nodes, context, reasoning, unknown types
    OTHER = "other"  # another human speaker of a chat history (LINE, Telegram, a JSONL log)


class Message(BaseModel):
    model_config = ConfigDict(frozen=True)

    key: str  # e.g. chatgpt:<conversation_id>:<node_id>
    node_id: str
    parent_id: str | None = None
    role: str  # user / assistant / system / tool (as exported)
    channel: Channel
    content_type: str
    text: str  # byte-exact text as exported (may hold NUL, lone surrogates, CRLF)
    created_at: datetime | None = None
    position: int  # 0-based position on the active path; off-path nodes get -1
    on_active_path: bool = True
    branch_index: int = 0  # index among its parent's children
    raw_type: str | None = None  # set when the content type was unknown (kept raw, counted)

    @property
    def content_hash(self) -> str:
        return content_hash(self.text)

    @property
    def for_drafting(self) -> bool:
        return (
            self.on_active_path
            and self.channel in (Channel.PERSON, Channel.ASSISTANT)
            and bool(self.text)
            and not self.text.isspace()  # = bool(text.strip()), without copying a huge text
        )


class Provenance(BaseModel):
    file: str
    position: int  # index of the record in the file (array index or line number)
    member: str | None = None  # zip member, when read from a zip


class Conversation(BaseModel):
    key: str  # e.g. chatgpt:<conversation_id>
    source: str
    external_id: str
    title: str | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    messages: list[Message]
    provenance: Provenance
    unknown_types: dict[str, int] = Field(default_factory=dict)
    # other speakers' messages (channel OTHER) go to the drafter only when the owner asks
    # (`pmem backfill --include-others`); never stored, never part of the content hash
    include_others: bool = Field(default=False, exclude=True)

    @property
    def active_messages(self) -> list[Message]:
        return sorted((m for m in self.messages if m.on_active_path), key=lambda m: m.position)

    @property
    def drafting_messages(self) -> list[Message]:
        if self.include_others:
            return [
                m
                for m in self.active_messages
                if m.for_drafting
                or (m.channel is Channel.OTHER and m.on_active_path and m.text.strip())
            ]
        return [m for m in self.active_messages if m.for_drafting]

    @property
    def content_hash(self) -> str:
        """Hash of every stored message (key + text hash), in key order: any change shows."""
        return tagged_hash(
            "conv", sorted((m.key, m.content_hash, m.on_active_path) for m in self.messages)
        )

    @property
    def drafting_chars(self) -> int:
        return sum(len(m.text) for m in self.drafting_messages)


class PrefilterDecision(BaseModel):
    conversation_key: str
    content_hash: str
    keep: bool
    reason: str  # machine-readable, e.g. "keep:decision-statement", "drop:code-only"
    rule_version: str


# ---------------------------------------------------------------- batching and drafting


class BatchMember(BaseModel):
    model_config = ConfigDict(frozen=True)

    conversation_key: str
    content_hash: str
    chars: int


class Batch(BaseModel):
    batch_id: str
    members: list[BatchMember]
    prompt_version: str
    model: str

    @staticmethod
    def make_id(members: list[BatchMember], prompt_version: str, model: str) -> str:
        return tagged_hash(
            "batch",
            {
                "members": [(m.conversation_key, m.content_hash) for m in members],
                "prompt_version": prompt_version,
                "model": model,
            },
            length=24,
        )


class MemoryIndexEntry(BaseModel):
    """What the drafter sees of an existing memory (context for append vs create)."""

    id: str
    title: str
    index_summary: str
    kind: str
    current_revision: int
    source_conversation_keys: list[str] = Field(default_factory=list)
    aliases: list[str] = Field(default_factory=list)  # the names it goes by (to recognise it)
    # when its matter began (the earliest source's time): a conversation that ended before it
    # cannot change it
    occurred_at: datetime | None = None
    # what its evidence's messages said (redacted, cut): the append gate's second ranking stage
    # reads it (core.gate_rank); never put into a prompt
    matter: str = ""


class EvidencePointer(BaseModel):
    message_key: str
    quote_hint: str


class DraftRecord(BaseModel):
    """A drafted case record, as our code holds it (snake_case)."""

    draft_id: str = ""
    action: Literal["create", "append", "noop"]
    target_memory_id: str | None = None
    expected_revision: int | None = None
    title: str
    memory_kind: str
    canonical_summary: str
    index_summary: str
    aliases: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    occurred_at: datetime | None = None
    valid_from: datetime | None = None
    stated_facts: list[str] = Field(default_factory=list)
    inferences: list[str] = Field(default_factory=list)
    evidence: list[EvidencePointer] = Field(default_factory=list)
    source_conversation_keys: list[str] = Field(default_factory=list)

    def identity(self) -> str:
        body = self.model_dump(mode="json", exclude={"draft_id"})
        return tagged_hash("draft", body, length=32)


class DraftOutput(BaseModel):
    records: list[DraftRecord]
    model: str
    prompt_version: str
    input_tokens: int = 0
    output_tokens: int = 0


class VerifiedEvidence(BaseModel):
    message_key: str
    text: str  # the SOURCE's characters, never the model's
    method: Literal["exact", "fuzzy"]
    score: float


class RejectedEvidence(BaseModel):
    message_key: str
    reason: str


#: why a draft was not committed: it appends to a memory its batch was not given as context
TARGET_NOT_OFFERED = "target-not-offered"


class VerifiedDraft(BaseModel):
    draft: DraftRecord
    evidence: list[VerifiedEvidence]
    rejected: list[RejectedEvidence] = Field(default_factory=list)
    committable: bool
    reason: str | None = None  # why not committable


# ---------------------------------------------------------------- the memory API


class EvidenceIn(BaseModel):
    source_key: str
    text: str
    language: str | None = None


class CommitRequest(BaseModel):
    memory_id: str | None = None  # None = create
    expected_revision: int | None = None
    kind: str
    title: str
    canonical_summary: str
    index_summary: str = ""  # empty: the store derives it (a client's is never taken)
    aliases: list[str] = Field(default_factory=list)
    tags: list[str] = Field(default_factory=list)
    occurred_at: datetime | None = None
    valid_from: datetime | None = None
    evidence: list[EvidenceIn] = Field(default_factory=list)
    # a client's own statements (MCP, HTTP API): kept as stated facts, never as evidence
    stated_facts: list[str] = Field(default_factory=list)
    # what a drafter concluded and the person did not say: kept apart from the stated facts
    inferences: list[str] = Field(default_factory=list)
    reason: str = "create"
    idempotency_key: str
    run_id: str | None = None
    client: str = "pmem"
    model: str | None = None
    prompt_version: str | None = None
    proposal_id: str | None = None


class CommitResult(BaseModel):
    memory_id: str
    revision: int
    created: bool = False
    noop: bool = False  # materially identical: no new revision
    replayed: bool = False  # the idempotency key had been used: first result returned
    evidence_added: int = 0
    redacted_fields: list[str] = Field(default_factory=list)  # fields the store's guard redacted


class MemoryView(BaseModel):
    id: str
    kind: str
    title: str
    canonical_summary: str
    index_summary: str
    aliases: list[str]
    tags: list[str]
    occurred_at: datetime | None
    valid_from: datetime | None
    status: str
    current_revision: int
    created_at: datetime
    updated_at: datetime
    stated_facts: list[str] = Field(default_factory=list)
    inferences: list[str] = Field(default_factory=list)  # a drafter's conclusions, kept apart
    visibility: str = "private"
    evidence: list[dict[str, Any]] = Field(default_factory=list)
    revisions: list[dict[str, Any]] = Field(default_factory=list)


#: actions that need the owner's explicit confirmation (MCP and the HTTP API only queue them)
CONFIRMED_ACTIONS = ("correction", "merge", "delete", "publish")
#: what runs under the owner's standing approval
STANDING_ACTIONS = ("create", "append")


class ActionRequest(BaseModel):
    """A request for the owner's queue (table ``proposals``): a proposed memory (``create`` /
    ``append``, from ``propose_memory``) or a confirmed action (correction, merge, delete,
    publish) that an AI client or the HTTP API may ask for but never perform."""

    action: Literal["create", "append", "correction", "merge", "delete", "publish"]
    memory_id: str | None = None  # the memory acted on (append, correction, merge source, ...)
    expected_revision: int | None = None  # the revision the requester saw
    merge_into: str | None = None  # merge: the memory that absorbs memory_id
    record: dict[str, Any] = Field(default_factory=dict)  # create / append / correction fields
    evidence: list[EvidenceIn] = Field(default_factory=list)
    stated_facts: list[str] = Field(default_factory=list)
    note: str | None = None  # why (shown to the owner)
    client: str = "pmem"


class SearchHit(BaseModel):
    id: str
    title: str
    kind: str
    index_summary: str
    score: float
    current_revision: int
