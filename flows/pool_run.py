"""A backfill on a work pool (`pmem backfill --pool`): the submitter's half (import, plan,
claims listed), a worker's half (drain, then the first to find every batch done finishes the
run), and following a pool run from the submitter.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime
from typing import Any

from core.errors import ConfigError, CostLimitStop, RateLimitStop
from flows.claiming import SUMMED, drain, merge_counts, tick_claims
from flows.estimate import open_meter
from flows.indexing import index_for_search
from flows.pipeline import PLAIN, import_and_plan, open_run
from flows.resources import Pipeline, Steps, register, tick, unregister
from providers.pricing import cost_at, price_for
from state.summary import add_index, new_summary
from store.claims import ClaimStore, worker_name


def submit_prepare(
    p: Pipeline,
    source: str,
    export_path: str | None,
    *,
    dry_run: bool,
    pool: str,
    steps: Steps = PLAIN,
) -> dict[str, Any]:
    """The submitter's half of a pool run (`pmem backfill --pool`): the export into the ledger,
    the batches planned and listed as the run's claims, the summary so far stored with the run.
    The workers read the conversations from PostgreSQL, never the file."""
    start = time.monotonic()
    export_path = export_path or None
    summary, _ = open_run(p, source, export_path, dry_run)
    try:
        import_and_plan(p, summary, steps, source, export_path, lambda _k, _d: None)
    except BaseException:
        summary["status"] = "failed"
        p.runs.finish(p.run_id, "failed", summary)
        raise
    finally:
        unregister(p.run_id)
    summary["pool"] = pool
    summary["submit_seconds"] = round(time.monotonic() - start, 3)
    p.runs.set_pool(p.run_id, pool, summary)
    return summary


def work_pool_run(
    p: Pipeline, run_id: str, *, steps: Steps = PLAIN, embed: bool = True, worker: str | None = None
) -> dict[str, Any]:
    """A worker's part of a pool run: take the run's batches until none is left (with every
    other worker of the run), then, if it is the first to find them all done, finish the run:
    index, total every worker's counts, store the summary. Returns the run's summary when this
    worker finished it, else this worker's own counts (``"part": true``)."""
    run = p.runs.get_run(run_id)
    if run is None:
        raise ConfigError(f"no run {run_id}", hint="`pmem status` lists the runs")
    if p.drafter.model != run["model"]:
        raise ConfigError(
            f"this worker drafts with {p.drafter.model}; run {run_id} was planned for {run['model']}",
            hint=f"start the worker with PMEM_LLM={run['model']} and that provider's API key",
        )
    worker = worker or worker_name()
    p.run_id = run_id
    p.meter = open_meter(p, run_id)
    register(p)
    part = new_summary(run_id, True, bool(run["dry_run"])) | {"part": True, "worker": worker}
    try:
        stop = drain(p, steps, part, dry_run=bool(run["dry_run"]), worker=worker, pool=True)
        final = finish_pool_run(p, run_id, worker, embed=embed, stop=stop)
    finally:
        unregister(run_id)
    part["memory_api_requests"] = p.limiter.requests
    part["rate_limited"] = p.commit_cc.rate_limited + p.draft_cc.rate_limited
    return final if final is not None else part


def finish_pool_run(
    p: Pipeline,
    run_id: str,
    worker: str,
    *,
    embed: bool = True,
    stop: RateLimitStop | CostLimitStop | None = None,
) -> dict[str, Any] | None:
    """Finish a pool run once every batch is done (or stop it): only the first worker to ask
    does; the others get None. The summary is the submitter's plus every batch's counts,
    whichever worker did it."""
    claims = ClaimStore(p.db)
    counts = claims.counts(run_id)
    if (stop is None and counts.open) or not p.runs.take_finish(run_id, worker):
        return None
    run = p.runs.get_run(run_id)
    assert run is not None
    summary = dict(run["summary"] or new_summary(run_id, False, bool(run["dry_run"])))
    for k in SUMMED:
        summary[k] = 0
    summary["conflict_drafts"] = []
    for part in claims.outcomes(run_id):
        merge_counts(summary, part)
    summary["workers"] = len(claims.holders(run_id))
    summary["batches_left"] = counts.open
    if stop is not None:
        summary["status"] = "cost_limit" if isinstance(stop, CostLimitStop) else "stopped"
        summary["stop_reason"] = str(stop)
    else:
        add_index(summary, index_for_search(p, embed=embed, memories=not run["dry_run"]))
        if not run["dry_run"]:  # seed 003: the same concept stage as an in-process backfill
            from flows.concepts import backfill_stage

            summary["concepts"] = backfill_stage(
                p.db, p.settings.runs_dir, run_id=run_id, embed=embed
            )
        summary["status"] = "complete" if not summary["batches_failed"] else "failed"
    price = p.options.price if p.options.price is not None else price_for(run["model"])
    summary["cost_usd"] = (
        None
        if price is None
        else round(cost_at(price, summary["input_tokens"], summary["output_tokens"]), 6)
    )
    spent = p.runs.spent(run_id)
    summary["run_input_tokens"], summary["run_output_tokens"] = spent[0], spent[1]
    summary["run_cost_usd"] = None if price is None else round(spent[2], 6)
    summary["budget_in_window"] = p.limiter.in_window()
    started = run["started_at"]
    summary["elapsed_seconds"] = (
        round((datetime.now(UTC) - started).total_seconds(), 3) if started else 0.0
    )
    summary["nothing_to_do"] = (
        summary["status"] == "complete"
        and not summary["batches_drafted"]
        and not summary["commits"]
        and not summary.get("conversations_new")
        and not summary.get("conversations_changed")
    )
    p.runs.finish(run_id, summary["status"], summary)
    return summary


def follow_pool_run(
    p: Pipeline, run_id: str, *, poll: float = 0.5, timeout: float | None = None
) -> dict[str, Any]:
    """Wait for a pool run to end (`pmem backfill --pool … --wait`), advancing this process's
    progress bars by what every worker does; returns the run's summary as stored."""
    claims = ClaimStore(p.db)
    counts = claims.counts(run_id)
    tick("draft", counts.total)
    run = p.runs.get_run(run_id)
    if run is not None and not run["dry_run"]:
        tick("commit", counts.total)
    seen: dict[str, int] = {}
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        tick_claims(claims, run_id, seen)
        run = p.runs.get_run(run_id)
        if run is None:
            raise ConfigError(f"no run {run_id}")
        if run["status"] != "open":
            return dict(run["summary"] or {}) | {"status": run["status"]}
        if deadline is not None and time.monotonic() > deadline:
            raise TimeoutError(f"run {run_id} did not end within {timeout:g} s")
        time.sleep(poll)
