"""The Prefect flow `watch` and its deployment `watch/every-10-minutes` (seed 004).

Each run is one pass of the incremental re-index (``flows/watch.py::run_pass``): it takes the
data dir's run lock for the pass, re-imports only the files that changed since the last pass (a
file that only grew is read from where the last pass stopped), and indexes and embeds the new
messages. A run that finds the lock held (a backfill, a re-import, `pmem watch` in a terminal)
is skipped, not failed: the next one comes at the next interval. Parameters are paths and flags,
log lines paths and counts: never message text.

`serve_watch` serves the deployment with an interval schedule (``PMEM_WATCH_INTERVAL`` seconds,
600 by default) against a running Prefect server (the managed one: flows/prefect_server.py);
`pmem watch --serve` runs it.
"""

from __future__ import annotations

import logging
from datetime import UTC, datetime, timedelta
from typing import Any

from prefect import flow, get_run_logger

from core.settings import Settings, get_settings
from flows import prefect_server as ps
from flows import watch as w
from state.runlock import RunLocked


def _run_name() -> str:
    """A flow run is named as the pass it runs starts its id (``watch-<UTC time>``)."""
    return f"watch-{datetime.now(UTC):%Y%m%dT%H%M%S}"


@flow(name="watch", flow_run_name=_run_name, log_prints=False, validate_parameters=True)
def watch(
    paths: list[str] | None = None, embed: bool = True, verify: bool = False
) -> dict[str, Any]:
    """One pass over ``paths`` (default: PMEM_WATCH_PATHS, else the PATHs earlier passes
    watched): only changed files are re-imported, then the new messages are indexed."""
    logger = _logger()
    settings = get_settings()

    def on_event(kind: str, data: dict[str, Any]) -> None:
        if kind == "imported":
            logger.info("%d/%d %s (%s)", data["done"], data["total"], data["path"], data["action"])
        elif kind == "import":
            logger.info("%d files checked, %d to import", data["checked"], data["total"])

    opts = w.PassOptions(embed=embed, verify=verify, trigger="schedule", on_event=on_event)
    try:
        summary = w.run_pass(settings, paths, opts, command="pmem watch (Prefect deployment)")
    except RunLocked as err:
        holder = err.holder
        logger.info(
            "skipped: another run holds the data dir%s; the next pass tries again",
            f" (pid {holder.pid})" if holder else "",
        )
        return {
            "status": "skipped",
            "reason": "run-locked",
            "holder_pid": holder.pid if holder else None,
        }
    logger.info(
        "pass %s %s: %d files checked, %d imported, %d new messages, %d indexed, %d embedded",
        summary["pass_id"],
        summary["status"],
        summary["files_checked"],
        summary["files_imported"],
        summary["messages_new"],
        summary["indexed_messages"],
        summary["embedded_messages"],
    )
    return summary


def _logger() -> Any:
    """The flow run's logger; the module's when the body runs outside a flow run (``watch.fn``)."""
    from prefect.exceptions import MissingContextError

    try:
        return get_run_logger()
    except MissingContextError:
        return logging.getLogger("pmem.watch")


def deployment_name(interval: float) -> str:
    """``every-10-minutes`` for 600 s (the default), ``every-90-seconds`` for 90 s."""
    seconds = round(interval)
    if seconds % 60 == 0:
        minutes = seconds // 60
        return f"every-{minutes}-minute{'s' if minutes != 1 else ''}"
    return f"every-{seconds}-seconds"


def build_deployment(
    settings: Settings,
    paths: list[str],
    interval: float | None = None,
    *,
    embed: bool = True,
    verify: bool = False,
    name: str | None = None,
) -> Any:
    """The `watch/<name>` deployment: a pass over ``paths`` every ``interval`` seconds."""
    from prefect.schedules import Interval
    from prefect.types.entrypoint import EntrypointType

    seconds = w.interval_seconds(interval)
    return watch.to_deployment(
        name=name or deployment_name(seconds),
        schedule=Interval(timedelta(seconds=seconds)),
        parameters={"paths": list(paths), "embed": embed, **({"verify": True} if verify else {})},
        tags=[ps.data_tag(settings)],
        description="Incremental re-index: re-import only the files that changed since the last pass, "
        "then index and embed their new messages.",
        entrypoint_type=EntrypointType.MODULE_PATH,  # runs from any working directory
    )


def serve_watch(
    settings: Settings,
    paths: list[str],
    interval: float | None = None,
    *,
    embed: bool = True,
    verify: bool = False,
    name: str | None = None,
) -> None:
    """Register the deployment and execute its runs until interrupted (blocks). The schedule is
    paused when the serve process stops, so no late runs pile up while nothing serves them."""
    from prefect import serve

    deployment = build_deployment(settings, paths, interval, embed=embed, verify=verify, name=name)
    serve(deployment, pause_on_shutdown=True, print_starting_message=False)
