"""`pmem consent list|revoke`: the owner's remembered consents to send text to remote models
(<data dir>/consent.json; see docs/security.md, "Consent before text leaves the machine").
They never import Prefect."""

from __future__ import annotations

from dataclasses import asdict
from typing import Annotated

import typer

from cli.app import auth_app, err_console, handle_errors, print_json, settings
from core.display import for_terminal as tty
from core.display import local_time

consent_app = typer.Typer(
    help="Remembered consents to send text to a remote model (asked by `pmem backfill`).",
    no_args_is_help=True,
)
auth_app.add_typer(consent_app, name="consent")


@consent_app.command(name="list")
@handle_errors
def list_(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Every remembered consent: what (drafting: a source's conversations; embedding: memory
    texts and queries), to which provider and host, since when, with which --exclude rules."""
    from state.consent import ConsentStore

    items = ConsentStore(settings().data_dir).entries()
    if as_json:
        print_json({"consents": [asdict(c) for c in items]})
        return
    if not items:
        err_console.print("no consent recorded: nothing is sent to a remote model")
    for c in items:
        rules = f"  excluding {', '.join(c.excludes)}" if c.excludes else ""
        typer.echo(
            tty(
                f"{c.kind:9} {c.scope:12} → {c.provider} at {c.destination}  since {local_time(c.granted_at)}{rules}"
            )
        )


@consent_app.command()
@handle_errors
def revoke(
    provider: Annotated[str, typer.Argument(help="openai, anthropic or gemini.")],
    source: Annotated[
        str | None,
        typer.Option(
            "--source", "-s", help="Only this scope (a source, or 'memories' for the embedder)."
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Withdraw consent: the next run with this provider asks again (and the re-import sends
    nothing to it meanwhile). What was already sent cannot be called back."""
    from state.consent import ConsentStore

    removed = ConsentStore(settings().data_dir).revoke(
        provider=provider.strip().lower(), scope=source
    )
    if as_json:
        print_json({"revoked": removed})
        return
    err_console.print(
        tty(f"revoked {removed} consent(s) for {provider}" + (f" ({source})" if source else ""))
    )
