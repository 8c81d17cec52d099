"""The Prefect flow `backfill`: import → prefilter → plan → draft + verify → commit.

Parameters, task names and log lines carry ids and counts only, never private text (Prefect's
database keeps all three). Tasks do not cache (resume lives in the ledger, the batch files and
PostgreSQL) and do not retry (provider calls retry in their adapters, one layer only).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from core.errors import DraftError, RateLimitStop
from core.settings import get_settings
from flows import pipeline as pl


@task(name="import-export", cache_policy=NO_CACHE, retries=0)
def import_task(run_id: str, source: str, export_path: str) -> dict[str, Any]:
    return pl.import_export(pl.pipeline(run_id), source, export_path)


@task(name="plan-batches", cache_policy=NO_CACHE, retries=0)
def plan_task(run_id: str, source: str) -> list[str]:
    return pl.plan(pl.pipeline(run_id), source)


@task(name="draft-batch", cache_policy=NO_CACHE, retries=0)
def draft_task(run_id: str, batch_id: str) -> dict[str, Any]:
    return pl.draft_batch(pl.pipeline(run_id), batch_id)


@task(name="commit-batch", cache_policy=NO_CACHE, retries=0)
def commit_task(run_id: str, batch_id: str) -> dict[str, Any]:
    return pl.commit_batch(pl.pipeline(run_id), batch_id)


@flow(name="backfill", log_prints=False, validate_parameters=True)
def backfill(source: str, export_path: str, dry_run: bool = False, llm: str | None = None) -> dict[str, Any]:
    """One backfill run; running it again with the same source and export resumes it."""
    logger = get_run_logger()
    settings = get_settings()
    p = pl.Pipeline.open(settings, llm)
    start = pl.clock()
    try:
        run_id, resumed = p.runs.open_or_create(
            source=source, export_path=export_path, fingerprint=pl.fingerprint(Path(export_path)),
            model=p.drafter.model, prompt_version=p.drafter.prompt_version, dry_run=dry_run,
        )  # fmt: skip
        p.run_id = run_id
        pl.register(p)
        summary = pl.new_summary(run_id, resumed, dry_run)
        logger.info("run %s (%s)", run_id, "resumed" if resumed else "new")
        try:
            pl.add_import(summary, import_task(run_id, source, export_path))
            batch_ids = plan_task(run_id, source)
            summary["batches_total"] = len(batch_ids)
            drafted: list[str] = []
            for batch_id in batch_ids:
                try:
                    pl.add_draft(summary, draft_task(run_id, batch_id))
                    drafted.append(batch_id)
                except DraftError as err:
                    summary["batches_failed"] += 1
                    logger.warning("batch %s failed to draft: %s", batch_id, type(err).__name__)
            if not dry_run:
                for batch_id in drafted:
                    pl.add_commit(summary, commit_task(run_id, batch_id))
            summary["status"] = "complete" if not summary["batches_failed"] else "stopped"
        except RateLimitStop:
            summary["status"] = "stopped"
            raise
        finally:
            summary["memory_api_requests"] = p.limiter.requests
            summary["elapsed_seconds"] = round(pl.clock() - start, 3)
            p.runs.finish(run_id, summary["status"], summary)
            logger.info("run %s %s: %d drafter calls, %d commits", run_id, summary["status"],
                        summary["drafter_calls"], summary["commits"])  # fmt: skip
        return summary
    finally:
        pl.unregister(p.run_id)
        p.close()
