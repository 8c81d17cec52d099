"""A backfill run's summary (what `pmem backfill --json` prints and the run's row keeps): its
fields, and how each step's counts are added to it."""

from __future__ import annotations

import logging
from typing import Any

from core.errors import CostLimitStop, DraftError, RateLimitStop
from state.cost import CostMeter

_log = logging.getLogger("pmem.backfill")

Outcome = dict[str, Any] | BaseException


def count_rules(excluded: dict[str, str]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for rule in excluded.values():
        counts[rule] = counts.get(rule, 0) + 1
    return counts


def add_spent(summary: dict[str, Any], meter: CostMeter | None) -> None:
    """This invocation's tokens and cost, and the run's over every resume (what --max-cost
    holds). ``cost_usd`` is None for a model without a known price."""
    if meter is None:
        return
    priced = meter.price is not None
    summary["input_tokens"], summary["output_tokens"] = meter.input_tokens, meter.output_tokens
    summary["cost_usd"] = round(meter.cost, 6) if priced else None
    summary["run_input_tokens"], summary["run_output_tokens"] = meter.spent[0], meter.spent[1]
    summary["run_cost_usd"] = round(meter.spent[2], 6) if priced else None


def add_index(summary: dict[str, Any], out: dict[str, Any]) -> None:
    summary["indexed"] = out
    summary["indexed_messages"] = out["indexed_messages"]
    summary["embedded_messages"] = out["messages"]
    summary["embedded_memories"] = out["memories"]
    summary["messages_without_vectors"] = out["messages_without_vectors"]


def collect_drafts(
    summary: dict[str, Any], batch_ids: list[str], outcomes: list[Outcome]
) -> tuple[list[str], RateLimitStop | CostLimitStop | None]:
    """The batches drafted, and the stop (rate limit, cost cap) that left the others undrafted."""
    drafted: list[str] = []
    stop: RateLimitStop | CostLimitStop | None = None
    for batch_id, out in zip(batch_ids, outcomes, strict=True):
        if isinstance(out, RateLimitStop | CostLimitStop):
            stop = stop or out
            summary["batches_left"] += 1
        elif isinstance(out, DraftError):
            summary["batches_failed"] += 1
            _log.warning("batch %s failed to draft: %s", batch_id, type(out).__name__)
        elif isinstance(out, BaseException):
            raise out
        else:
            add_draft(summary, out)
            drafted.append(batch_id)
    return drafted, stop


def collect_commits(summary: dict[str, Any], outcomes: list[Outcome]) -> None:
    stop: RateLimitStop | None = None
    for out in outcomes:
        if isinstance(out, RateLimitStop):
            stop = stop or out
            summary["batches_left"] += 1
        elif isinstance(out, BaseException):
            raise out
        else:
            add_commit(summary, out)
    if stop is not None:
        raise stop


def new_summary(run_id: str, resumed: bool, dry_run: bool) -> dict[str, Any]:
    return {
        "run_id": run_id,
        "resumed": resumed,
        "dry_run": dry_run,
        "status": "open",
        "conversations": 0,
        "conversations_new": 0,
        "conversations_changed": 0,
        "kept": 0,
        "dropped": 0,
        "quarantined": 0,
        "drop_reasons": {},
        "excluded": 0,
        "excluded_by_rule": {},
        "batches_total": 0,
        "batches_skipped_complete": 0,
        "batches_drafted": 0,
        "batches_failed": 0,
        "batches_left": 0,
        "drafter_calls": 0,
        "rejected_evidence": 0,
        "target_not_offered": 0,
        "appends_proposed": 0,
        "commits": 0,
        "commits_replayed": 0,
        "noops": 0,
        "conflicts": 0,
        "conflict_drafts": [],
        "memories_created": 0,
        "memory_api_requests": 0,
        "rate_limited": 0,
        "budget_in_window": 0,
        "input_tokens": 0,
        "output_tokens": 0,
        "cost_usd": 0.0,
        "run_input_tokens": 0,
        "run_output_tokens": 0,
        "run_cost_usd": 0.0,
        "elapsed_seconds": 0.0,
        "indexed_messages": 0,
        "embedded_messages": 0,
        "embedded_memories": 0,
        "messages_without_vectors": None,
    }


def add_import(summary: dict[str, Any], s: dict[str, Any]) -> None:
    for k in (
        "conversations",
        "conversations_new",
        "conversations_changed",
        "kept",
        "dropped",
        "quarantined",
        "drop_reasons",
    ):
        summary[k] = s[k]


def add_draft(summary: dict[str, Any], s: dict[str, Any]) -> None:
    summary["batches_skipped_complete"] += int(s["skipped_complete"])
    summary["batches_drafted"] += int(not s["skipped_complete"])
    summary["drafter_calls"] += s["drafter_calls"]
    summary["rejected_evidence"] += s["rejected_evidence"]
    summary["target_not_offered"] += s.get("target_not_offered", 0)
    summary["input_tokens"] += s.get("input_tokens", 0)
    summary["output_tokens"] += s.get("output_tokens", 0)


def add_commit(summary: dict[str, Any], s: dict[str, Any]) -> None:
    summary["commits"] += s["commits"]
    summary["commits_replayed"] += s["replayed"]
    summary["noops"] += s["noops"]
    summary["conflicts"] += s["conflicts"]
    summary["conflict_drafts"].extend(s.get("conflict_drafts", []))
    summary["memories_created"] += s["memories_created"]
    summary["target_not_offered"] = summary.get("target_not_offered", 0) + s.get(
        "target_not_offered", 0
    )
    summary["appends_proposed"] = summary.get("appends_proposed", 0) + s.get("appends_proposed", 0)
