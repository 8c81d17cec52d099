"""`pmem prefect start|stop|status`, `pmem schedule` and `pmem reimport`: the local Prefect server
that `pmem` manages under the data dir, and the monthly re-import. Flows are imported lazily."""

from __future__ import annotations

import os
from typing import Annotated, Any

import typer
from rich.markup import escape

from cli.app import (
    EXIT_ERROR,
    EXIT_TEMPFAIL,
    err_console,
    handle_errors,
    prefect_app,
    print_json,
    settings,
)
from core.display import for_terminal, local_time
from core.errors import ConfigError


def _managed_only() -> None:
    if os.environ.get("PREFECT_API_URL"):
        err_console.print(
            f"PREFECT_API_URL is set ({os.environ['PREFECT_API_URL']}): that server is used, nothing is managed."
        )


@prefect_app.command("start")
@handle_errors
def prefect_start(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Start the managed Prefect server (or find it running) and print its URL."""
    from flows.prefect_server import ensure_server, server_status, ui_base

    cfg = settings()
    _managed_only()
    with err_console.status("starting the Prefect server…"):
        url = ensure_server(cfg)
    info = server_status(cfg)
    if as_json:
        print_json(info.to_dict())
        return
    typer.echo(url)
    err_console.print(
        f"Prefect UI at {info.ui_url or ui_base(url)} (pid {info.pid}); `pmem prefect stop` stops it"
    )


@prefect_app.command("stop")
@handle_errors
def prefect_stop() -> None:
    """Stop the managed Prefect server (its port stays remembered)."""
    from flows.prefect_server import stop_server

    _managed_only()
    err_console.print("stopped" if stop_server(settings()) else "not running")


@prefect_app.command("status")
@handle_errors
def prefect_status(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """The Prefect UI's address (http://127.0.0.1:PORT/), how to log in, the data dir, and whether
    the managed server runs (pid, port). --json: ui_url, url (the API), running, pid, port,
    data_dir, auth_file, home, log, started_at."""
    from flows.prefect_server import server_status

    info = server_status(settings())
    if as_json:
        print_json(info.to_dict())
        return
    for line in status_lines(info):
        typer.echo(line)


def status_lines(info: Any) -> list[str]:
    """`pmem prefect status` in words."""
    if not info.managed:
        return [
            f"Prefect UI: {info.ui_url}  (PREFECT_API_URL is set: that server is used, pmem manages none)",
            f"API: {info.url}",
            f"data dir: {info.data_dir}",
        ]
    if not info.running:
        port = f" (port {info.port} is kept for it)" if info.port else ""
        return [
            f"Prefect server not running{port}: `pmem prefect start` starts it, and so does the next backfill",
            f"data dir: {info.data_dir}",
            f"log: {info.log}",
        ]
    lines = [
        f"Prefect UI: {info.ui_url}",
        f"  running, pid {info.pid}, since {local_time(info.started_at)}; `pmem prefect stop` stops it",
    ]
    if info.auth_file:
        lines.append(
            f"  log in: the UI asks for a password; it is the whole line in {info.auth_file} "
            f"(`cat {info.auth_file}`; only you can read that file)"
        )
    lines += [
        "  flow runs are named after pmem's run ids (`pmem status` lists them)",
        f"data dir: {info.data_dir}",
        f"API: {info.url}",
        f"log: {info.log}",
    ]
    return lines


def _connect() -> str:
    """Point Prefect at the managed server (or PREFECT_API_URL) before it is imported."""
    from cli.prefect_env import _prefect_env

    _prefect_env(settings())
    url = os.environ.get("PREFECT_API_URL")
    if not url:
        raise ConfigError(
            "a schedule needs a running Prefect server, and PMEM_PREFECT=ephemeral is set",
            hint="unset PMEM_PREFECT (pmem then manages a local server) or set PREFECT_API_URL",
        )
    return url


def _consent_note(llm: str | None, sources: list[str] | None = None) -> None:
    """With a remote drafter: which sources the unattended re-import may send (consent is never
    asked there; an export of a source without it fails with ConsentRequired, nothing sent)."""
    from flows.consent import drafting_target, find
    from importers import IMPORTERS

    cfg = settings()
    spec = llm or cfg.llm
    names = sources or sorted(IMPORTERS)
    targets = {s: drafting_target(spec, s) for s in names}
    if all(t is None for t in targets.values()):
        return
    granted = [s for s, t in targets.items() if t is not None and find(cfg, t) is not None]
    missing = [s for s in names if s not in granted]
    where = next(t for t in targets.values() if t is not None).describe()
    err_console.print(
        f"sends to {escape(for_terminal(where))} only what you consented to: "
        f"{', '.join(granted) or 'no source yet'}"
    )
    if missing:
        err_console.print(
            f"  → not sent (the export fails with ConsentRequired): {', '.join(missing)}; consent once "
            f"with `pmem backfill --source SOURCE --llm {escape(for_terminal(spec))}`"
        )


@prefect_app.command()
@handle_errors
def schedule(
    cron: Annotated[
        str | None,
        typer.Option(
            "--cron",
            help="Five-field cron. Default: PMEM_REIMPORT_CRON or '0 3 1 * *' (03:00 on the 1st).",
        ),
    ] = None,
    timezone: Annotated[
        str | None,
        typer.Option(
            "--timezone",
            help="IANA zone of the cron. Default: PMEM_SCHEDULE_TIMEZONE, else PMEM_TZ, $TZ or the system zone.",
        ),
    ] = None,
    name: Annotated[
        str, typer.Option("--name", help="Deployment name (reimport/<name>).")
    ] = "monthly",
    llm: Annotated[
        str | None,
        typer.Option("--llm", help="provider:model for the scheduled runs; default PMEM_LLM."),
    ] = None,
) -> None:
    """Serve the monthly re-import deployment: blocks, and runs each scheduled (or UI-triggered)
    re-import. Ctrl-C stops serving and pauses the schedule."""
    with err_console.status("starting the Prefect server…"):
        url = _connect()
    from flows.reimport import build_deployment, default_cron, local_timezone, serve_schedule

    cfg = settings()
    _consent_note(llm)
    cron, tz = cron or default_cron(), timezone or local_timezone()
    parameters: dict[str, Any] = {"llm": llm} if llm else {}
    build_deployment(cfg, cron, name=name, timezone=tz, parameters=parameters)  # validates first
    err_console.print(
        f"serving reimport/{name}: cron '{cron}' ({tz}) "
        f"on {url.removesuffix('/api')}; Ctrl-C stops (the schedule is paused until the next `pmem schedule`)"
    )
    serve_schedule(cfg, cron, name=name, timezone=tz, parameters=parameters)


@prefect_app.command()
@handle_errors
def reimport(
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Draft and verify, commit nothing.")
    ] = False,
    llm: Annotated[
        str | None,
        typer.Option(
            "--llm", help="provider:model; default PMEM_LLM or the offline extractive drafter."
        ),
    ] = None,
    source: Annotated[
        list[str] | None, typer.Option("--source", "-s", help="Only these sources (repeatable).")
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="End with one JSON object summarising the re-import.")
    ] = False,
    no_embed: Annotated[
        bool,
        typer.Option(
            "--no-embed",
            help="Index new messages for recall but do not embed them (`pmem reindex` does later).",
        ),
    ] = False,
) -> None:
    """Run the re-import once now (what the schedule runs; use it from crontab)."""
    from cli.foreground import foreground_run
    from cli.prefect_env import _prefect_env, quiet_prefect_console

    with foreground_run(settings()):  # one run at a time per data dir; Ctrl-C as one line
        _prefect_env(settings())
        from flows.reimport import reimport as reimport_flow

        quiet_prefect_console()
        _consent_note(llm, source)

        with err_console.status("re-importing: inbox and local session folders…"):
            summary = reimport_flow(
                llm=llm, dry_run=dry_run, sources=source or None, embed=not no_embed
            )
    for e in summary["exports"]:
        detail = (
            (
                f"run {e['run_id']} {e['status']}: {e['conversations_new']} new, {e['conversations_changed']} changed, "
                f"{e['drafter_calls']} drafter calls, {e['commits']} commits"
            )
            if "run_id" in e
            else e.get("status") or e["action"]
        )
        err_console.print(f"{e['source']:12} {escape(for_terminal(e['export_path']))}  {detail}")
    if not summary["exports"]:
        err_console.print("nothing to re-import: the inbox and the local session folders are empty")
    err_console.print(
        f"re-import {summary['status']}: {summary['drafter_calls']} drafter calls, {summary['commits']} commits"
    )
    if no_embed and summary.get("messages_without_vectors"):
        err_console.print(
            f"  vectors skipped (--no-embed): {summary['messages_without_vectors']} messages wait for `pmem reindex`"
        )
    if as_json:
        print_json(summary)
    if summary["status"] == "stopped":
        err_console.print(
            "  → stopped by the rate limit; run `pmem reimport` again later to resume"
        )
        raise typer.Exit(EXIT_TEMPFAIL)
    if summary["status"] != "complete":
        err_console.print(
            "  → some batches failed to draft; run `pmem reimport` again to retry them"
        )
        raise typer.Exit(EXIT_ERROR)
