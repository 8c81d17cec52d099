"""The pure parts of drafting and committing a batch: which memories a batch was offered,
the refusal of a draft that targets anything else, and the commit request a verified draft
becomes (its idempotency key derived from the batch, the draft and its content)."""

from __future__ import annotations

from typing import Any

from core.hashing import tagged_hash
from core.models import TARGET_NOT_OFFERED, CommitRequest, DraftRecord, EvidenceIn, VerifiedDraft


def offered_targets(context: list[Any]) -> dict[str, int]:
    """The memories given to a batch as context, at the revision they were given."""
    return {m.id: m.current_revision for m in context}


def refuse_unoffered(v: VerifiedDraft, offered: dict[str, int]) -> VerifiedDraft:
    """A draft may append to (or correct) only a memory that was offered to its batch, at the
    revision it was offered: anything else (a prompt-injected conversation naming another
    memory's id, a guessed revision) is refused as ``target-not-offered``, never committed."""
    d = v.draft
    if d.action != "append":
        return v
    if d.target_memory_id in offered and d.expected_revision == offered[d.target_memory_id]:
        return v
    return v.model_copy(update={"committable": False, "reason": TARGET_NOT_OFFERED})


def commit_request(
    v: VerifiedDraft,
    *,
    batch_id: str,
    run_id: str,
    model: str,
    prompt_version: str,
    proposal_id: str | None,
) -> CommitRequest:
    d: DraftRecord = v.draft
    return CommitRequest(
        memory_id=d.target_memory_id if d.action == "append" else None,
        expected_revision=d.expected_revision if d.action == "append" else None,
        kind=d.memory_kind,
        title=d.title,
        canonical_summary=d.canonical_summary,
        index_summary=d.index_summary,
        aliases=d.aliases,
        tags=d.tags,
        occurred_at=d.occurred_at,
        valid_from=d.valid_from,
        stated_facts=d.stated_facts,
        inferences=d.inferences,
        evidence=[EvidenceIn(source_key=e.message_key, text=e.text) for e in v.evidence],
        reason="append" if d.action == "append" else "create",
        idempotency_key=tagged_hash("commit", [batch_id, d.draft_id, d.identity()], length=40),
        run_id=run_id,
        client="pmem-backfill",
        model=model,
        prompt_version=prompt_version,
        proposal_id=proposal_id,
    )
