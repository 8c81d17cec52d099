"""The Prefect flow `reimport`: pick up new exports and grown sessions, monthly.

It scans the inbox ``<data dir>/exports/<source>/`` of every registered source
(``importers.IMPORTERS``) and the local session folders of the coding agents (Codex
``~/.codex/sessions``, Claude Code ``~/.claude/projects``; see ``local_folders``), and runs the
`backfill` flow (flows/backfill.py, as a subflow, with its Prefect task steps) on each export.
The ledger and the batches make that incremental: an unchanged conversation writes nothing and
is not drafted again; only new or grown conversations go to the drafter.

Which exports run, per source: the newest inbox entry always (a re-run of an unchanged export
costs a read, no drafter call), older inbox entries only while no complete run of that exact
export (its fingerprint) exists for this model and prompt version, oldest first (so the newest
snapshot is imported last), and the local session folder always (it changes in place).

`serve_schedule` serves the deployment ``reimport/monthly`` with a cron schedule (default
``0 3 1 * *``, 03:00 on the 1st) against a running Prefect server (the managed one: see
flows/prefect_server.py). Parameters, log lines and the summary carry ids, paths and counts only.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prefect import flow, get_run_logger

from core.errors import ConfigError, PmemError, RateLimitStop
from core.settings import Settings, get_settings, time_zone, zone_ok
from flows import pipeline as pl
from flows import prefect_server as ps
from flows.backfill import backfill

DEFAULT_CRON = "0 3 1 * *"
DEPLOYMENT_NAME = "monthly"

_OFF = ("", "off", "none", "0", "false")


@dataclass(frozen=True)
class Found:
    source: str
    path: Path
    origin: str  # "inbox" | "local"


# ---------------------------------------------------------------- where exports are


def _env_dir(var: str) -> Path | None | bool:
    """An override from the environment: a path, None (switched off), or False (not set)."""
    value = os.environ.get(var)
    if value is None:
        return False
    return None if value.strip().lower() in _OFF else Path(value).expanduser()


def codex_sessions_dir() -> Path | None:
    """PMEM_CODEX_SESSIONS (empty or "off" switches it off), else $CODEX_HOME/sessions, else
    ~/.codex/sessions."""
    override = _env_dir("PMEM_CODEX_SESSIONS")
    if override is not False:
        return override  # type: ignore[return-value]
    home = os.environ.get("CODEX_HOME")
    return (Path(home).expanduser() if home else Path.home() / ".codex") / "sessions"


def claude_code_projects_dir() -> Path | None:
    """PMEM_CLAUDE_CODE_PROJECTS (empty or "off" switches it off), else
    $CLAUDE_CONFIG_DIR/projects, else ~/.claude/projects."""
    override = _env_dir("PMEM_CLAUDE_CODE_PROJECTS")
    if override is not False:
        return override  # type: ignore[return-value]
    home = os.environ.get("CLAUDE_CONFIG_DIR")
    return (Path(home).expanduser() if home else Path.home() / ".claude") / "projects"


def local_folders() -> dict[str, Path | None]:
    return {"codex": codex_sessions_dir(), "claude-code": claude_code_projects_dir()}


def discover(settings: Settings, sources: list[str] | None = None) -> list[Found]:
    """Every export to consider, per source: inbox entries (files or unpacked export folders,
    hidden ones ignored) oldest first, then the source's local folder. Registered sources only."""
    from importers import IMPORTERS

    names = sorted(IMPORTERS) if sources is None else list(sources)
    unknown = [s for s in names if s not in IMPORTERS]
    if unknown:
        raise ConfigError(
            f"unknown source(s) {', '.join(unknown)}", hint=f"known: {', '.join(sorted(IMPORTERS))}"
        )
    folders = local_folders()
    found: list[Found] = []
    for source in names:
        inbox = settings.inbox_dir / source
        if inbox.is_dir():
            entries = [p for p in inbox.iterdir() if not p.name.startswith(".")]
            entries.sort(key=lambda p: (p.stat().st_mtime, p.name))
            found += [Found(source, p.resolve(), "inbox") for p in entries]
        folder = folders.get(source)
        if folder is not None and folder.is_dir():
            found.append(Found(source, folder.resolve(), "local"))
    return found


def select(found: list[Found], complete: Callable[[Found], bool]) -> list[tuple[Found, str]]:
    """(export, "run" | "skip:complete"): the newest inbox entry of a source and local folders
    always run; an older inbox entry is skipped once a complete run of that very export (same
    fingerprint) exists."""
    newest: dict[str, Found] = {}
    for f in found:
        if f.origin == "inbox":
            newest[f.source] = f  # found is oldest first
    out: list[tuple[Found, str]] = []
    for f in found:
        older = f.origin == "inbox" and f is not newest[f.source]
        out.append((f, "skip:complete" if older and complete(f) else "run"))
    return out


def completed_checker(
    settings: Settings, llm: str | None, dry_run: bool
) -> Callable[[Found], bool]:
    """Has this exact export (by fingerprint) had a complete run with this model and prompt version?"""
    from providers import get_drafter
    from store.db import Database
    from store.runs import RunStore

    @functools.cache
    def done() -> set[tuple[str, str]]:
        drafter = get_drafter(llm or settings.llm)
        db = Database.open(settings)
        try:
            rows = RunStore(db).list_runs(limit=1_000_000)
        finally:
            db.close()
        return {
            (r["source"], r["export_fingerprint"])
            for r in rows
            if r["status"] == "complete"
            and bool(r["dry_run"]) == dry_run
            and r["model"] == drafter.model
            and r["prompt_version"] == drafter.prompt_version
        }

    return lambda f: (f.source, pl.fingerprint(f.path)) in done()


# ---------------------------------------------------------------- the flow

_SUMMED = (
    "conversations",
    "conversations_new",
    "conversations_changed",
    "batches_total",
    "drafter_calls",
    "commits",
    "memories_created",
    "rejected_evidence",
    "indexed_messages",
    "embedded_messages",
    "embedded_memories",
)


class ReimportFailed(PmemError):
    """One or more exports of a re-import failed (the others were imported)."""


@flow(name="reimport", log_prints=False, validate_parameters=True)
def reimport(
    llm: str | None = None,
    dry_run: bool = False,
    sources: list[str] | None = None,
    embed: bool = True,
) -> dict[str, Any]:
    """Re-import every export in the inbox and the local session folders; draft and commit only
    what is new or changed. Each export's backfill ends with its new messages indexed for recall
    and (``embed``) embedded by the local embedder, so a re-imported message is answerable
    without `pmem reindex`; ``embed=False`` (`pmem reimport --no-embed`) leaves the vectors to
    `pmem reindex` and reports how many messages wait (``messages_without_vectors``). Summary status: complete; incomplete (some batches failed to draft:
    the next re-import retries them); stopped (a rate-limit stop: the next one resumes). An
    export that fails altogether raises ReimportFailed after the others ran."""
    logger = get_run_logger()
    settings = get_settings()
    own = ps.claim_current_run(settings)
    crashed = ps.sweep_crashed_runs(settings, exclude={own} if own else None)
    found = discover(settings, sources)
    plan = select(found, completed_checker(settings, llm, dry_run))
    summary: dict[str, Any] = {
        "status": "complete",
        "dry_run": dry_run,
        "embed": embed,
        "exports": [],
        "crashed_runs_marked": len(crashed),
        **dict.fromkeys(_SUMMED, 0),
        "messages_without_vectors": None,
    }
    logger.info(
        "reimport: %d export(s) found, %d to run", len(found), sum(a == "run" for _, a in plan)
    )
    with ps.tracked_runs(settings):
        for item, action in plan:
            entry: dict[str, Any] = {
                "source": item.source,
                "export_path": str(item.path),
                "origin": item.origin,
                "action": action,
            }
            summary["exports"].append(entry)
            if action != "run":
                logger.info("%s %s: %s", item.source, item.path, action)
                continue
            try:
                s = backfill(
                    source=item.source,
                    export_path=str(item.path),
                    dry_run=dry_run,
                    llm=llm,
                    embed=embed,
                )
            except RateLimitStop as err:
                entry.update(status="stopped", error=type(err).__name__)
                summary["status"] = "stopped"
                logger.warning(
                    "%s %s: rate-limit stop; the next run resumes", item.source, item.path
                )
                break
            except Exception as err:  # noqa: BLE001 (one bad export must not block the others)
                entry.update(status="failed", error=type(err).__name__)
                summary["status"] = "failed"
                logger.warning("%s %s: failed (%s)", item.source, item.path, type(err).__name__)
                continue
            entry.update(run_id=s["run_id"], status=s["status"], **{k: s[k] for k in _SUMMED})
            for k in _SUMMED:
                summary[k] += s[k]
            if s.get("messages_without_vectors") is not None:  # the backlog after this export
                summary["messages_without_vectors"] = s["messages_without_vectors"]
            if s["status"] != "complete" and summary["status"] == "complete":
                summary["status"] = "incomplete"  # failed batches: the next re-import retries them
            logger.info(
                "%s %s: run %s %s, %d new, %d changed, %d drafter calls, %d commits, %d messages embedded",
                item.source,
                item.path,
                s["run_id"],
                s["status"],
                s["conversations_new"],
                s["conversations_changed"],
                s["drafter_calls"],
                s["commits"],
                s["embedded_messages"],
            )
    summary["summaries"] = _refresh_summaries(summary, dry_run, logger)
    logger.info(
        "reimport %s: %d drafter calls, %d commits",
        summary["status"],
        summary["drafter_calls"],
        summary["commits"],
    )
    if summary["status"] == "failed":
        failed = [
            f"{e['source']}:{e['export_path']}"
            for e in summary["exports"]
            if e.get("status") == "failed"
        ]
        raise ReimportFailed(
            f"{len(failed)} export(s) failed: {', '.join(failed)}",
            hint="run `pmem backfill --source S --export PATH` on one to see why",
        )
    return summary


SUMMARY_LLM_ENV = (
    "PMEM_SUMMARY_LLM"  # who writes the monthly summaries on the schedule (default: offline)
)


def _refresh_summaries(
    summary: dict[str, Any], dry_run: bool, logger: Any
) -> dict[str, Any] | None:
    """After the exports: the months that received new material get a new summary, then the
    profile (`pmem summarize`; unchanged months are skipped without a model call). Not after a
    dry run or a rate-limit stop; a failure here is reported, never fails the re-import."""
    if dry_run or summary["status"] == "stopped":
        return None
    from flows.summary_flow import summarize

    try:
        out = summarize(llm=os.environ.get(SUMMARY_LLM_ENV) or None)
    except Exception as err:  # noqa: BLE001 (the summaries are derived; the next run redoes them)
        logger.warning("summaries not refreshed (%s)", type(err).__name__)
        return {"status": "failed", "error": type(err).__name__}
    keys = (
        "status",
        "months_total",
        "months_drafted",
        "months_skipped",
        "drafter_calls",
        "profile_updated",
    )
    return {k: out[k] for k in keys}


# ---------------------------------------------------------------- the schedule


def default_cron() -> str:
    return os.environ.get("PMEM_REIMPORT_CRON") or DEFAULT_CRON


def local_timezone() -> str:
    """PMEM_SCHEDULE_TIMEZONE, else the zone every other reading of times uses
    (``core.settings.time_zone``: PMEM_TZ, $TZ, the system zone, else UTC)."""
    name = (os.environ.get("PMEM_SCHEDULE_TIMEZONE") or "").strip().lstrip(":")
    if name and zone_ok(name):
        return name
    return time_zone()[0]


def build_deployment(
    settings: Settings,
    cron: str | None = None,
    *,
    name: str = DEPLOYMENT_NAME,
    timezone: str | None = None,
    parameters: dict[str, Any] | None = None,
) -> Any:
    """The `reimport/<name>` deployment with its cron schedule (a RunnerDeployment)."""
    from prefect.client.schemas.schedules import CronSchedule
    from prefect.schedules import Cron
    from prefect.types.entrypoint import EntrypointType
    from pydantic import ValidationError

    cron = cron or default_cron()
    tz = timezone or local_timezone()
    try:
        CronSchedule(cron=cron, timezone=tz)  # validates both (the Cron factory does not)
        schedule = Cron(cron, timezone=tz)
    except (ValidationError, ValueError) as err:
        raise ConfigError(
            f"invalid schedule: cron {cron!r}, timezone {tz!r}",
            hint="a cron has five fields, e.g. '0 3 1 * *'; a timezone is IANA, e.g. Asia/Tokyo",
        ) from err
    return reimport.to_deployment(
        name=name,
        schedule=schedule,
        parameters=parameters or {},
        tags=[ps.data_tag(settings)],
        description="Monthly re-import: new exports in the inbox and the local Codex / Claude Code sessions.",
        entrypoint_type=EntrypointType.MODULE_PATH,  # runs from any working directory
    )


def serve_schedule(
    settings: Settings,
    cron: str | None = None,
    *,
    name: str = DEPLOYMENT_NAME,
    timezone: str | None = None,
    parameters: dict[str, Any] | None = None,
) -> None:
    """Register the deployment and execute its runs until interrupted (blocks). The schedule is
    paused when the serve process stops, so no late runs pile up while nothing serves them."""
    from prefect import serve

    deployment = build_deployment(
        settings, cron, name=name, timezone=timezone, parameters=parameters
    )
    serve(deployment, pause_on_shutdown=True, print_starting_message=False)
