"""Step 2 of a backfill: the run's batches planned (pending ones reused, new ones packed,
stale or excluded ones superseded), and the owner's consent and exclusion rules applied.
"""

from __future__ import annotations

from typing import Any

from core.errors import ConfigError
from core.faults import fault_point
from core.hashing import tagged_hash
from core.models import Batch, BatchMember
from flows.resources import Pipeline
from stages.batching import pack
from stages.exclude import excluded_by, parse_rules
from stages.prefilter import RULE_VERSION
from store.runs import PENDING


def _plan(p: Pipeline, source: str) -> tuple[list[str], list[Batch], list[str]]:
    """Pending batches of the run's scope (reused as they are), new batches for its un-batched
    kept conversations, and pending batches to supersede: one holding a conversation the owner
    excluded, or not yet drafted and holding conversations of another export besides this
    run's (their members are packed again: this run's now, the others by their own run). Sets
    ``p.excluded``."""
    model, pv = p.drafter.model, p.drafter.prompt_version
    kept = p.ledger.kept_conversations(source, RULE_VERSION)
    scope = p.scope
    if scope is not None:
        kept = [c for c in kept if c["conversation_key"] in scope]
    p.excluded = _excluded(p, kept)
    pending: list[str] = []
    blocked: list[dict[str, Any]] = []
    for b in p.runs.pending(source, model, pv, p.run_id or None):
        keys = {m["conversation_key"] for m in b["members"]}
        if scope is not None and not keys & scope:
            continue  # another export's batch: its own run drafts it
        if keys & p.excluded.keys() or (
            scope is not None and not keys <= scope and b["status"] != "drafted"
        ):
            blocked.append(b)
        else:
            pending.append(b["batch_id"])
    done = p.runs.batched_keys(
        [(c["conversation_key"], c["content_hash"]) for c in kept], model, pv
    )
    done -= {m["conversation_key"] for b in blocked for m in b["members"]}  # packed again
    members = [
        BatchMember(
            conversation_key=c["conversation_key"],
            content_hash=c["content_hash"],
            chars=c["drafting_chars"],
        )
        for c in kept
        if c["conversation_key"] not in done and c["conversation_key"] not in p.excluded
    ]
    new = pack(
        members,
        max_conversations=p.settings.batch_max_conversations,
        max_chars=p.settings.batch_max_chars,
        prompt_version=pv,
        model=model,
    )
    return pending, [b for b in new if b.batch_id not in pending], [b["batch_id"] for b in blocked]


def _plan_redraft(p: Pipeline, source: str) -> list[Batch]:
    """A --redraft run's batches: the chosen conversations (or the export's) packed again in
    batches of this run only (their ids carry the run id), so the drafts already made, and
    the memories committed from them, stay as they are for review."""
    model, pv = p.drafter.model, p.drafter.prompt_version
    kept = {c["conversation_key"]: c for c in p.ledger.kept_conversations(source, RULE_VERSION)}
    keys = list(p.options.redraft or ())
    if not keys:
        keys = [k for k in kept if p.scope is None or k in p.scope]
    unknown = [k for k in keys if k not in kept]
    if unknown:
        raise ConfigError(
            f"--redraft: {unknown[0]} is not a kept {source} conversation in the ledger"
            + (f" (and {len(unknown) - 1} more)" if len(unknown) > 1 else ""),
            hint="`pmem ledger list` shows the conversations and whether the prefilter kept them",
        )
    rows = [kept[k] for k in dict.fromkeys(keys)]
    p.excluded = _excluded(p, rows)
    members = [
        BatchMember(
            conversation_key=c["conversation_key"],
            content_hash=c["content_hash"],
            chars=c["drafting_chars"],
        )
        for c in rows
        if c["conversation_key"] not in p.excluded
    ]
    packed = pack(
        members,
        max_conversations=p.settings.batch_max_conversations,
        max_chars=p.settings.batch_max_chars,
        prompt_version=pv,
        model=model,
    )
    return [
        b.model_copy(
            update={
                "batch_id": tagged_hash("batch", {"redraft": p.run_id, "of": b.batch_id}, length=24)
            }
        )
        for b in packed
    ]


def _excluded(p: Pipeline, kept: list[dict[str, Any]]) -> dict[str, str]:
    if not p.excludes:
        return {}
    out: dict[str, str] = {}
    for c in kept:
        rule = excluded_by(
            p.excludes, c["conversation_key"], c["title"], c["created_at"] or c["updated_at"]
        )
        if rule is not None:
            out[c["conversation_key"]] = rule
    return out


def apply_consent(p: Pipeline, source: str, *, required: bool = True) -> None:
    """A remote drafter needs the owner's remembered consent for this source (ConsentRequired
    otherwise, before anything is sent); the rules remembered with it join this run's, and this
    run's rules are remembered with it (they only ever narrow what is sent)."""
    from flows import consent as cs

    target = cs.drafting_target(
        p.drafter.model, cs.drafting_scope(source, p.options.include_others)
    )
    if target is None:
        return
    consent = cs.require(p.settings, target) if required else cs.find(p.settings, target)
    if consent is None:
        return
    known = {r.text for r in p.excludes}
    p.excludes += [r for r in parse_rules(consent.excludes) if r.text not in known]
    if required:
        cs.store(p.settings).add_excludes(target.ident, [r.text for r in p.excludes])


def plan(p: Pipeline, source: str) -> list[str]:
    """Pending batches first, then new ones (stored, so a resumed run maps to the same batches).
    A --redraft run plans once; resumed, it finds its own batches again."""
    if p.options.redraft is not None:
        own = p.runs.batches_of_run(p.run_id)
        if own:
            return [b["batch_id"] for b in own if b["status"] in PENDING]
        new = _plan_redraft(p, source)
        for b in new:
            p.runs.add_batch(b, source, p.run_id)
        return [b.batch_id for b in new]
    p.runs.supersede_stale(source)
    pending, new, blocked = _plan(p, source)
    for batch_id in blocked:  # held an excluded or another export's conversation
        p.runs.set_status(batch_id, "superseded")
    for b in new:
        p.runs.add_batch(b, source, p.run_id)
        fault_point("plan:after-batch")
    return pending + [b.batch_id for b in new]
