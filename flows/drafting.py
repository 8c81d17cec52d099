"""Step 3 of a backfill: one batch drafted and verified into its result.json (admitted under
--max-cost by the cost meter before it starts, the drafter called within the provider's rate
limit; a long conversation chunk by
chunk, each chunk's answer kept), and the batch's files and run-state.json.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.errors import (
    ConfigError,
    DraftError,
    MemoryNotFound,
    RateLimitStop,
    ResultFileError,
    TransientDraftError,
)
from core.faults import fault_point
from core.models import TARGET_NOT_OFFERED, Conversation, DraftOutput, Message, VerifiedDraft
from core.secrets import redact_conversation, redact_draft, secret_values
from flows.append_gate import gate_append, nearest_titles, retrieval
from flows.resources import Pipeline, drafted, tick
from stages.chunking import chunk_conversation, merge_chunk_drafts
from stages.drafting import offered_targets, refuse_unoffered
from stages.evidence import verify_draft
from state import batch as batch_state
from state.cost import Hold
from state.files import (
    CHUNK_SCHEMA,
    RESULT_SCHEMA,
    batch_dir,
    read_checked,
    read_result,
    runs_root,
    write_atomic,
)
from store.revisions import remember_secret_values
from store.runs import to_batch


def batch_row(p: Pipeline, batch_id: str) -> dict[str, Any]:
    row = p.runs.batch(batch_id)
    if row is None:
        raise ConfigError(f"unknown batch {batch_id}")
    return row


def paths_of(p: Pipeline, row: dict[str, Any]) -> tuple[Path, Path]:
    """result.json and run-state.json of a batch: in the folder of the run that planned it."""
    d = batch_dir(runs_root(p.settings), row["run_id"], row["batch_id"])
    return d / "result.json", d / "run-state.json"


def batch_paths(p: Pipeline, batch_id: str) -> tuple[Path, Path]:
    return paths_of(p, batch_row(p, batch_id))


def _kind_title(p: Pipeline, memory_id: str) -> tuple[str, str] | None:
    try:
        view = p.store.get(memory_id)
    except MemoryNotFound:  # deleted meanwhile: nothing to offer
        return None
    return view.kind, view.title


def draft_batch(p: Pipeline, batch_id: str) -> dict[str, Any]:
    """Draft and verify one batch, unless its result.json is already complete."""
    row = batch_row(p, batch_id)
    result_path, state_path = paths_of(p, row)
    existing = read_result(result_path, batch_id)
    if existing is not None:
        if row["status"] in ("planned", "failed"):
            p.runs.set_status(batch_id, "drafted", checksum=existing["checksum"])
        tick("draft")
        return {
            "skipped_complete": True,
            "drafter_calls": 0,
            "rejected_evidence": existing["rejected_evidence"],
            "target_not_offered": existing.get("target_not_offered", 0),
        }
    batch = to_batch(row)
    conversations = [drafted(p, p.ledger.load(m.conversation_key)) for m in batch.members]
    # --max-cost: the batch is admitted before anything of it starts, or the run stops here
    hold = p.meter.admit(conversations) if p.meter is not None else Hold()
    try:
        state = batch_state.load_state(state_path, batch_id, row["run_id"])
        batch_state.save_state(state_path, state, "drafting", attempts=state.get("attempts", 0) + 1)
        nearest = retrieval(p.db)
        titles = [c.title for c in conversations if c.title]
        titles += nearest_titles(conversations, nearest, lambda mid: _kind_title(p, mid))
        context = p.call(p.target.related, [c.key for c in conversations], titles)
        try:
            out, calls = _draft_in_chunks(
                p, batch_id, result_path.parent, conversations, context, hold
            )
        except DraftError as err:
            batch_state.save_state(state_path, state, "failed", last_error=type(err).__name__)
            p.runs.set_status(batch_id, "failed", error=type(err).__name__, attempt=True)
            raise
    finally:
        if p.meter is not None:
            p.meter.release(hold)
    messages: dict[str, Message] = {m.key: m for c in conversations for m in c.messages}
    verified: list[VerifiedDraft] = []
    redacted_fields = 0
    # one scan per conversation: for redact_draft here, and remembered for the store's guard
    per_conversation = {
        c.key: secret_values(
            [m.text for m in c.drafting_messages], [m.channel for m in c.drafting_messages]
        )
        for c in conversations
    }
    for c in conversations:
        remember_secret_values(c.key, c.content_hash, per_conversation[c.key])
    known = set().union(*per_conversation.values())
    offered = offered_targets(context)
    # an offered memory is not yet one the conversation is about (flows.append_gate)
    by_key, by_id = {c.key: c for c in conversations}, {m.id: m for m in context}
    for i, rec in enumerate(out.records):
        rec, leaked = redact_draft(rec, known)  # no secret in a memory, revision or index row
        redacted_fields += len(leaked)
        rec = rec.model_copy(update={"draft_id": f"d{i:02d}-" + rec.identity().split(":")[1][:12]})
        v = refuse_unoffered(verify_draft(rec, messages), offered)
        if v.committable and v.draft.action == "append":
            v = gate_append(v, by_key, by_id, nearest)
        verified.append(v)
    rejected = sum(len(v.rejected) for v in verified)
    not_offered = sum(v.reason == TARGET_NOT_OFFERED for v in verified)
    body = {
        "batch_id": batch_id,
        "run_id": row["run_id"],
        "complete": True,
        "members": [m.model_dump() for m in batch.members],
        "model": out.model,
        "prompt_version": out.prompt_version,
        "drafts": [v.model_dump(mode="json") for v in verified],
        "rejected_evidence": rejected,
        "redacted_fields": redacted_fields,
        "offered": offered,  # memory id → revision given to this batch as context
        "target_not_offered": not_offered,
        "uncommittable": [
            {"draft_id": v.draft.draft_id, "reason": v.reason}
            for v in verified
            if not v.committable
        ],
        "tokens": {"input": out.input_tokens, "output": out.output_tokens},
        "drafted_at": datetime.now(UTC).isoformat(),
    }
    checksum = write_atomic(result_path, body, RESULT_SCHEMA)
    fault_point("draft:after-result")
    p.runs.set_status(batch_id, "drafted", checksum=checksum, attempt=True)
    batch_state.save_state(
        state_path, state, "verified", last_error=None, target_not_offered=not_offered
    )
    tick("draft")
    return {
        "skipped_complete": False,
        "drafter_calls": calls,
        "rejected_evidence": rejected,
        "target_not_offered": not_offered,
        "input_tokens": out.input_tokens,
        "output_tokens": out.output_tokens,
    }


def _call_drafter(
    p: Pipeline, conversations: list[Conversation], context: list[Any], hold: Hold
) -> DraftOutput:
    """One model request of a batch admitted under --max-cost (``hold``; CostLimitStop when an
    earlier request took the run past the cap). When the vendor answers "rate limited, retry
    after N s" beyond what its adapter retried, the run waits that long and asks again, as long
    as its waits for this request stay within --max-wait (PMEM_MAX_WAIT_SECONDS); past that it
    stops (RateLimitStop: exit 75, resume)."""
    fault_point("draft:before-call")
    waited = 0.0
    while True:
        if p.meter is not None:
            p.meter.check()
        try:
            with p.draft_cc.slot():
                out = p.drafter.draft(conversations, context)
        except TransientDraftError as err:
            if err.retry_after is None:
                raise
            waited = _wait_for_vendor(p, err.retry_after, waited)
            continue
        if p.meter is not None:
            p.meter.settle(hold, conversations, out.input_tokens, out.output_tokens)
        break
    p.draft_cc.on_success()
    fault_point("draft:after-call")
    return out


def _wait_for_vendor(p: Pipeline, retry_after: float, waited: float) -> float:
    limit = p.settings.max_wait_seconds
    model = p.drafter.model
    if waited + retry_after > limit:
        raise RateLimitStop(
            f"{model} is rate limited for another {retry_after:.0f}s (Retry-After), past the "
            f"{limit:.0f}s --max-wait" + (f" ({waited:.0f}s waited already)" if waited else ""),
            run_id=p.run_id,
            retry_after=retry_after,
        )
    # this slot and the others pause that long; the wait is announced (core.waits) with its end
    p.draft_cc.on_rate_limited(retry_after, p.run_id)
    return waited + retry_after


def _draft_in_chunks(
    p: Pipeline,
    batch_id: str,
    folder: Path,
    conversations: list[Conversation],
    context: list[Any],
    hold: Hold,
) -> tuple[DraftOutput, int]:
    """One drafter call for a normal batch. A conversation over the character cap (it is alone in
    its batch) is drafted chunk by chunk, each chunk's answer kept in its own file so a resumed
    run does not pay for it again, and the chunks' drafts are merged deterministically."""
    # the guard reads the whole conversation before it is cut: a secret split across two
    # messages at a chunk boundary is found whole (each chunk alone would miss it)
    parts = (
        chunk_conversation(redact_conversation(conversations[0])[0], p.settings.batch_max_chars)
        if len(conversations) == 1
        else []
    )
    if len(parts) <= 1:
        return _call_drafter(p, conversations, context, hold), 1
    outputs: list[DraftOutput] = []
    calls = 0
    for i, part in enumerate(parts):
        cache = folder / f"chunk-{i:03d}.json"
        try:
            doc = read_checked(cache, CHUNK_SCHEMA)
            if doc.get("batch_id") != batch_id or doc.get("chunks") != len(parts):
                raise ValueError("another batch's chunk")
            outputs.append(DraftOutput.model_validate(doc["output"]))
            continue
        except (ResultFileError, ValueError):
            pass
        out = _call_drafter(p, [part], context, hold)
        calls += 1
        write_atomic(
            cache,
            {
                "batch_id": batch_id,
                "chunk": i,
                "chunks": len(parts),
                "output": out.model_dump(mode="json"),
            },
            CHUNK_SCHEMA,
        )
        outputs.append(out)
    merged = DraftOutput(
        records=merge_chunk_drafts([o.records for o in outputs]),
        model=outputs[0].model,
        prompt_version=outputs[0].prompt_version,
        input_tokens=sum(o.input_tokens for o in outputs),
        output_tokens=sum(o.output_tokens for o in outputs),
    )
    return merged, calls
