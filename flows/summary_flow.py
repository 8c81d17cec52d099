"""The Prefect flow `summarize`: one task per month (in order), then the profile task.

Parameters and task names carry the run id and months only, never text; tasks do not cache or
retry (resume lives in the month files and the stored versions; vendor calls retry in their
adapters). The sequencing is `flows/summarize.py::run_summarize`.
"""

from __future__ import annotations

from typing import Any

from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from core.settings import get_settings
from flows import summarize as sm


@task(name="summarize-month", cache_policy=NO_CACHE, retries=0)
def month_task(run_id: str, month: str, all_months: list[str]) -> dict[str, Any]:
    return sm.summarize_month(sm.get_run(run_id), month, all_months)


@task(name="summarize-profile", cache_policy=NO_CACHE, retries=0)
def profile_task(run_id: str) -> dict[str, Any]:
    return sm.build_profile(sm.get_run(run_id))


PREFECT_STEPS = sm.Steps(
    month=lambda run_id, month, all_months: month_task(run_id, month, all_months),
    profile=lambda run_id: profile_task(run_id),
)


@flow(name="summarize", log_prints=False, validate_parameters=True)  # type: ignore[arg-type]
def summarize(llm: str | None = None, months: list[str] | None = None) -> dict[str, Any]:
    """Monthly summaries in order, then the global profile; the same command resumes."""
    logger = get_run_logger()
    run = sm.open_run(get_settings(), llm)
    try:
        summary = sm.run_summarize(
            run,
            months,
            steps=PREFECT_STEPS,
            on_event=lambda kind, data: logger.info("%s %s", kind, data),
        )
        logger.info(
            "run %s: %d months drafted, %d skipped, %d drafter calls",
            summary["run_id"],
            summary["months_drafted"],
            summary["months_skipped"],
            summary["drafter_calls"],
        )
        return summary
    finally:
        sm.close_run(run)
