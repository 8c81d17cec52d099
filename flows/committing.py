"""Step 4 of a backfill: a drafted batch's committable drafts committed through the memory
API, once (idempotency keys; per-draft results in run-state.json).
"""

from __future__ import annotations

from typing import Any

from core.errors import ConfigError, EvidenceRefused, StaleRevision, TombstonedMemory
from core.faults import fault_point
from core.models import TARGET_NOT_OFFERED, ActionRequest, EvidenceIn, VerifiedDraft
from flows.append_gate import APPEND_PROPOSED
from flows.drafting import batch_paths
from flows.resources import Pipeline, tick
from stages.drafting import commit_request, refuse_unoffered
from state import batch as batch_state
from state.batch import Stage
from state.files import read_result


def propose_append(p: Pipeline, v: VerifiedDraft, batch_id: str) -> str:
    """Queue an append the gate held back (flows.append_gate) as a proposal for the owner:
    its fields and verified evidence, nothing performed. The same draft queued twice is one
    request (the queue's id is the hash of the request)."""
    d = v.draft
    fields = ("title", "canonical_summary", "index_summary", "aliases", "tags")
    return p.store.queue(
        ActionRequest(
            action="append",
            memory_id=d.target_memory_id,
            expected_revision=d.expected_revision,
            record={k: getattr(d, k) for k in fields},
            evidence=[EvidenceIn(source_key=e.message_key, text=e.text) for e in v.evidence],
            stated_facts=d.stated_facts,
            note=f"{APPEND_PROPOSED}: run {p.run_id}, batch {batch_id}, draft {d.draft_id}",
            client="pmem-backfill",
        )
    )


def commit_batch(
    p: Pipeline, batch_id: str, rejected: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """Commit every committable, not rejected draft of a drafted batch, once. Safe to re-run."""
    result_path, state_path = batch_paths(p, batch_id)
    result = read_result(result_path, batch_id)
    if result is None:
        raise ConfigError(
            f"batch {batch_id} has no complete result.json",
            hint="run the backfill again to draft it",
        )
    state = batch_state.load_state(state_path, batch_id, result["run_id"], fresh=Stage.DRAFTED)
    commits: dict[str, Any] = state.setdefault("commits", {})
    counts: dict[str, Any] = {
        "commits": 0,
        "replayed": 0,
        "noops": 0,
        "conflicts": 0,
        "memories_created": 0,
        "conflict_drafts": [],
        "target_not_offered": 0,
        "appends_proposed": 0,
    }
    offered = result.get("offered", {})  # a result.json without it offered nothing
    batch_state.save_state(state_path, state, "committing")
    for raw in result["drafts"]:
        v = VerifiedDraft.model_validate(raw)
        draft_id = v.draft.draft_id
        if v.reason == APPEND_PROPOSED and draft_id not in rejected and draft_id not in commits:
            # an append the gate did not let through: the owner's to accept (`pmem queue`)
            commits[draft_id] = {"proposed": propose_append(p, v, batch_id)}
            counts["appends_proposed"] += 1
            batch_state.save_state(state_path, state, "committing")
            continue
        if not v.committable or draft_id in rejected or "memory_id" in commits.get(draft_id, {}):
            continue
        if not refuse_unoffered(v, offered).committable:  # checked again on what is committed
            counts["target_not_offered"] += 1
            commits[draft_id] = {"refused": TARGET_NOT_OFFERED}
            continue
        fault_point("commit:before-propose")
        proposal_id = p.call(
            p.target.propose, p.run_id, batch_id, draft_id, {"result_checksum": result["checksum"]}
        )
        fault_point("commit:after-propose")
        req = commit_request(
            v,
            batch_id=batch_id,
            run_id=p.run_id,
            model=result["model"],
            prompt_version=result["prompt_version"],
            proposal_id=proposal_id,
        )
        try:
            res = p.call(p.target.commit, req)
        except (StaleRevision, TombstonedMemory, EvidenceRefused) as err:
            counts["conflicts"] += 1
            counts["conflict_drafts"].append(
                {"batch_id": batch_id, "draft_id": draft_id, "reason": type(err).__name__}
            )
            commits[draft_id] = {"conflict": type(err).__name__}
            batch_state.save_state(state_path, state, "committing")
            continue
        fault_point("commit:after-commit-before-bookkeeping")
        if res.replayed:
            counts["replayed"] += 1
        elif res.noop:
            counts["noops"] += 1
        else:
            counts["commits"] += 1
            counts["memories_created"] += int(res.created)
        commits[draft_id] = res.model_dump(mode="json")
        batch_state.save_state(state_path, state, "committing")
        fault_point("commit:after-bookkeeping")
    p.runs.set_status(batch_id, "committed")
    batch_state.save_state(state_path, state, "committed")
    fault_point("commit:after-batch")
    tick("commit")
    return counts
