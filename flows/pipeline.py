"""A backfill run as a sequence of steps over ids (ADR 0032): import (flows/importing.py), plan
(flows/planning.py), then the run's batches through their claims (flows/claiming.py), each
drafted (flows/drafting.py) and committed (flows/committing.py), then the search indexes
(flows/indexing.py). This module only orders them and keeps the run's summary; the Prefect flow
in flows/backfill.py runs the same sequence with each step as a task. Each step reads what it
needs from the ledger, the batch files and the store, so any step can be re-run after a crash:
resume lives in our own state (state/batch.py: one batch-state model), not in Prefect's cache.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from core.errors import ConfigError, CostLimitStop, RateLimitStop
from core.hashing import tagged_hash
from core.settings import Settings
from flows.claiming import drain
from flows.committing import commit_batch
from flows.drafting import draft_batch

# re-exported: the CLI, the benches and the tests name these through this module
from flows.estimate import estimate_run as estimate_run
from flows.estimate import open_meter, planned_estimate
from flows.importing import fingerprint as fingerprint
from flows.indexing import index_for_search
from flows.planning import apply_consent, plan
from flows.resources import Pipeline, Steps, announce, pipeline, register, tick, unregister
from flows.resources import RunOptions as RunOptions
from flows.resources import flow_options as flow_options
from flows.resources import set_announce as set_announce
from flows.resources import set_progress as set_progress
from flows.resources import with_max_wait as with_max_wait
from providers.pricing import price_for
from state.summary import (
    Outcome,
    add_import,
    add_index,
    add_spent,
    collect_commits,
    count_rules,
    new_summary,
)
from store.claims import ClaimStore, worker_name

# ---------------------------------------------------------------- export location


def resolve_export(settings: Settings, source: str, export: str | None) -> Path:
    if export:
        path = Path(export).expanduser()
        if not path.exists():
            raise ConfigError(f"export {path} does not exist")
        return path.resolve()
    inbox = settings.inbox_dir / source
    files = sorted((p for p in inbox.glob("*") if p.is_file()), key=lambda p: p.stat().st_mtime)
    if not files:
        raise ConfigError(
            f"no export given and the inbox {inbox} is empty",
            hint=f"pass EXPORT=path (make) or --export PATH, or drop the export into {inbox}/",
        )
    return files[-1].resolve()


# ---------------------------------------------------------------- 1. import + prefilter


def import_export(p: Pipeline, source: str, export_path: str) -> dict[str, Any]:
    """Stream the export into the source ledger with prefilter decisions (flows/importing.py:
    batched transactions of whole conversations, COPY, parsing overlapped with writing). An
    input error stops the step once everything read before it is stored. The export's
    conversations become the run's scope: the run drafts those and nothing else."""
    from flows.importing import run_import

    seen: set[str] = set()
    stats = run_import(p.ledger, source, export_path, raise_input_error=True, seen=seen)
    p.scope = seen
    return stats


def _in_threads(
    fn: Callable[[str, str], dict[str, Any]],
) -> Callable[[str, list[str]], list[Outcome]]:
    def run_all(run_id: str, batch_ids: list[str]) -> list[Outcome]:
        def one(batch_id: str) -> Outcome:
            try:
                return fn(run_id, batch_id)
            except Exception as err:  # noqa: BLE001 - returned to the sequencer, which decides
                return err

        workers = pipeline(run_id).settings.max_concurrency
        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="pmem") as pool:
            return list(pool.map(one, batch_ids))

    return run_all


PLAIN = Steps(
    import_export=lambda run_id, source, path: import_export(pipeline(run_id), source, path),
    plan=lambda run_id, source: plan(pipeline(run_id), source),
    draft_all=_in_threads(lambda run_id, batch_id: draft_batch(pipeline(run_id), batch_id)),
    commit_all=_in_threads(lambda run_id, batch_id: commit_batch(pipeline(run_id), batch_id)),
)


def run_identity(p: Pipeline, export_path: str | None) -> str:
    """The export part of a run's identity: the export's content, or ``pending`` (--pending);
    a --redraft run adds what it drafts again."""
    base = fingerprint(Path(export_path)) if export_path else "pending"
    if p.options.redraft is None:
        return base
    return (
        "redraft:"
        + tagged_hash("redraft", [base, sorted(p.options.redraft)], length=24).split(":")[1]
    )


def open_run(
    p: Pipeline, source: str, export_path: str | None, dry_run: bool
) -> tuple[dict[str, Any], bool]:
    """Find or start the run of this identity; its summary so far, and whether it was complete."""
    if (
        p.options.max_cost is not None
        and p.options.price is None
        and price_for(p.drafter.model) is None
    ):
        raise ConfigError(
            f"no known price for {p.drafter.model}: --max-cost cannot be held",
            hint="give its price with --price IN/OUT (USD per million input / output tokens)",
        )
    apply_consent(p, source)  # a remote drafter without the owner's consent: refused here
    run_id, resumed = p.runs.open_or_create(
        source=source,
        export_path=export_path,
        fingerprint=run_identity(p, export_path),
        model=p.drafter.model,
        prompt_version=p.drafter.prompt_version,
        dry_run=dry_run,
        redraft=p.options.redraft is not None,
    )
    p.run_id = run_id
    p.meter = open_meter(p, run_id)
    register(p)
    stored = p.runs.get_run(run_id)
    was_complete = (
        resumed and stored is not None and (stored.get("summary") or {}).get("status") == "complete"
    )
    summary = new_summary(run_id, resumed, dry_run)
    summary.update(
        source=source,
        export=export_path,
        pending=export_path is None,
        model=p.drafter.model,
        redraft=p.options.redraft is not None,
        max_cost=p.options.max_cost,
    )
    return summary, was_complete


def import_and_plan(
    p: Pipeline,
    summary: dict[str, Any],
    steps: Steps,
    source: str,
    export_path: str | None,
    emit: Callable[[str, dict[str, Any]], None],
) -> list[str]:
    """Steps 1 and 2: the export into the ledger, the run's batches planned and listed as its
    claims (in this order); the estimate announced."""
    run_id = p.run_id
    if export_path is not None:
        add_import(summary, steps.import_export(run_id, source, export_path))
    else:
        p.scope = None
    batch_ids = steps.plan(run_id, source)
    summary["batches_total"] = len(batch_ids)
    if export_path is None:
        summary["conversations"] = len(
            {
                m["conversation_key"]
                for b in batch_ids
                for m in (p.runs.batch(b) or {"members": []})["members"]
            }
        )
    summary["excluded"] = len(p.excluded)  # never drafted, never sent
    summary["excluded_by_rule"] = count_rules(p.excluded)
    emit("planned", {"batches": len(batch_ids)})
    est = planned_estimate(p, source, batch_ids)
    summary["estimate"] = {
        k: est[k]
        for k in (
            "batches_to_draft",
            "conversations_to_draft",
            "estimated_input_tokens",
            "estimated_output_tokens",
            "estimated_cost_usd",
            "expected_commits",
            "memory_api_seconds",
            "price_as_of",
        )
    }
    announce(
        "estimate",
        est
        | {
            "max_cost": p.options.max_cost,
            "spent_usd": p.meter.spent[2] if p.meter else 0.0,
            "run_id": run_id,
            "batches_total": len(batch_ids),
        },
    )
    ClaimStore(p.db).enqueue(run_id, batch_ids)
    return batch_ids


def run_backfill(
    p: Pipeline,
    source: str,
    export_path: str | None,
    *,
    dry_run: bool = False,
    steps: Steps = PLAIN,
    on_event: Callable[[str, dict[str, Any]], None] | None = None,
    embed: bool = True,
) -> dict[str, Any]:
    """One backfill run of one export (``export_path``; empty or None: everything pending in
    the ledger, --pending). The same source, export content, model, prompt version and dry run
    find the same run again (resume). It ends with every new message in the recall index and
    (``embed``) embedded by the local embedder. This process is the run's only worker: it takes
    the run's batches through the same claims a pool run's workers share (``drain``).

    The summary counts this run's work only; its status is ``complete``, ``failed`` (batches
    that failed to draft, or an error), ``stopped`` (a rate limit: RateLimitStop is raised),
    ``cost_limit`` (--max-cost: CostLimitStop is raised) or ``interrupted`` (Ctrl-C). A raised
    stop carries the summary as ``.summary``; it is stored with the run either way."""
    start = time.monotonic()
    export_path = export_path or None
    summary, was_complete = open_run(p, source, export_path, dry_run)
    run_id = p.run_id
    emit = on_event or (lambda _kind, _data: None)
    emit("run", {"run_id": run_id, "resumed": summary["resumed"]})
    try:
        batch_ids = import_and_plan(p, summary, steps, source, export_path, emit)
        tick("draft", len(batch_ids))
        if not dry_run:
            tick("commit", len(batch_ids))
        # wave by wave, oldest first: a batch is drafted with the memories the waves before it
        # committed as context, so a later conversation that changes an earlier decision can
        # append to its memory (the offline drafter is local: one batch a wave costs nothing)
        stop = drain(p, steps, summary, dry_run=dry_run, worker=worker_name())
        emit(
            "drafted", {"batches": summary["batches_drafted"] + summary["batches_skipped_complete"]}
        )
        if not dry_run:
            emit(
                "committed",
                {"batches": summary["batches_drafted"] + summary["batches_skipped_complete"]},
            )
        if stop is not None:
            summary["batches_left"] = ClaimStore(p.db).counts(run_id).open
            raise stop
        add_index(summary, index_for_search(p, embed=embed, memories=not dry_run))
        emit(
            "indexed",
            {k: summary[k] for k in ("indexed_messages", "embedded_messages", "embedded_memories")},
        )
        if not dry_run:  # seed 003: the concepts of new and grown case records (never fatal)
            from flows.concepts import backfill_stage

            summary["concepts"] = backfill_stage(
                p.db, p.settings.runs_dir, run_id=run_id, embed=embed
            )
        summary["status"] = "complete" if not summary["batches_failed"] else "failed"
    except RateLimitStop as err:
        summary["status"] = "stopped"
        err.summary = summary  # type: ignore[attr-defined]
        raise
    except CostLimitStop as err:
        summary["status"] = "cost_limit"
        err.summary = summary  # type: ignore[attr-defined]
        raise
    except KeyboardInterrupt:
        summary["status"] = "interrupted"
        raise
    except BaseException:
        summary["status"] = "failed"
        raise
    finally:
        summary["memory_api_requests"] = p.limiter.requests
        summary["rate_limited"] = p.commit_cc.rate_limited + p.draft_cc.rate_limited
        summary["budget_in_window"] = p.limiter.in_window()
        summary["elapsed_seconds"] = round(time.monotonic() - start, 3)
        add_spent(summary, p.meter)
        idle = (
            was_complete
            and summary["status"] == "complete"
            and not summary["batches_drafted"]
            and not summary["commits"]
        )
        summary["nothing_to_do"] = (
            summary["status"] == "complete"
            and not summary["batches_drafted"]
            and not summary["commits"]
            and not summary["conversations_new"]
            and not summary["conversations_changed"]
        )
        p.runs.finish(run_id, summary["status"], None if idle else summary)
        unregister(run_id)
    return summary


def apply_run(p: Pipeline, run_id: str, rejected: frozenset[str]) -> dict[str, Any]:
    """Commit a reviewed dry run's accepted drafts: no drafter call, conflicts listed, not forced."""
    start = time.monotonic()
    run = p.runs.get_run(run_id)
    if run is None:
        raise ConfigError(f"no run {run_id}", hint="`pmem status` lists the runs")
    p.run_id = run_id
    register(p)
    summary = new_summary(run_id, True, False)
    try:
        batch_ids = [
            b["batch_id"]
            for b in p.runs.batches_of_run(run_id)
            if b["status"] in ("drafted", "committed")
        ]
        summary["batches_total"] = len(batch_ids)
        summary["batches_skipped_complete"] = len(batch_ids)
        outcomes = _in_threads(lambda rid, bid: commit_batch(pipeline(rid), bid, rejected))(
            run_id, batch_ids
        )
        collect_commits(summary, outcomes)
        add_index(summary, index_for_search(p))
        summary["rejected_drafts"] = len(rejected)
        summary["status"] = (
            "complete" if not summary["batches_failed"] else "failed"
        )  # as a backfill says it
    finally:
        summary["memory_api_requests"] = p.limiter.requests
        summary["elapsed_seconds"] = round(time.monotonic() - start, 3)
        unregister(run_id)
    return summary
