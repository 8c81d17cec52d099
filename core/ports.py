"""Ports: the narrow seams between pure stages and I/O. Adapters live in providers/ and store/."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from core.models import (
    ActionRequest,
    CommitRequest,
    CommitResult,
    Conversation,
    DraftOutput,
    MemoryIndexEntry,
    MemoryView,
    SearchHit,
)


@runtime_checkable
class Drafter(Protocol):
    """Turns one batch of conversations into case-record drafts."""

    model: str  # "provider:model", recorded on every draft
    prompt_version: str

    def draft(
        self, conversations: list[Conversation], context: list[MemoryIndexEntry]
    ) -> DraftOutput: ...


@runtime_checkable
class MemoryAPI(Protocol):
    """search, propose, commit, get. Every call is one request against the commit budget."""

    def search(self, query: str, limit: int = 10) -> list[SearchHit]: ...

    def related(
        self, conversation_keys: list[str], titles: list[str]
    ) -> list[MemoryIndexEntry]: ...

    def propose(self, run_id: str, batch_id: str, draft_id: str, payload: dict) -> str: ...

    def commit(self, request: CommitRequest) -> CommitResult: ...

    def get(self, memory_id: str) -> MemoryView: ...


@runtime_checkable
class ActionQueue(Protocol):
    """The owner's queue: a proposed memory or a confirmed action (correction, merge, delete,
    publish) that an AI client may ask for but never perform. Returns the request's id."""

    def request_action(self, request: ActionRequest) -> str: ...
