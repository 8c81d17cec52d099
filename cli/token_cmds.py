"""`pmem auth api-token create|revoke`: bearer tokens for the memory API (`pmem serve --api`);
`pmem auth tokens` lists them with the OAuth tokens (`auth api-token list` is its old spelling).

One token store (store/tokens.py), also the remote server's. A token's name is the client's
name: the API records it on every revision the token writes and keys the client's budget by it.
"""

from __future__ import annotations

from typing import Annotated

import typer

from cli.app import EXIT_ERROR, auth_app, err_console, handle_errors, print_json, settings
from core.display import local_time

token_app = typer.Typer(
    help="Bearer tokens for the memory API (`pmem serve --api`): create, revoke; `pmem auth "
    "tokens` lists them.",
    no_args_is_help=True,
)
auth_app.add_typer(token_app, name="api-token")


def _tokens():  # type: ignore[no-untyped-def]
    from store.db import Database
    from store.tokens import TokenStore

    return TokenStore(Database.open(settings()))


@token_app.command("create")
@handle_errors
def token_create(
    name: Annotated[
        str, typer.Argument(help="The client's name (recorded on its revisions; keys its budget).")
    ],
    scope: Annotated[
        list[str] | None,
        typer.Option(
            "--scope",
            help="Repeatable: memory.read, memory.propose, memory.write (default: those three), memory.delete, memory.publish.",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Create a token and print it once (it is stored only as a hash). Give it to the client as
    PMEM_MEMORY_TOKEN, or as `Authorization: Bearer <token>`."""
    from store.tokens import DEFAULT_SCOPES

    issued = _tokens().create(name, tuple(scope) if scope else DEFAULT_SCOPES)
    if as_json:
        print_json(issued.info.as_json() | {"token": issued.token})
        return
    err_console.print(
        f"token {issued.info.token_id} for {name} ({', '.join(issued.info.scopes)}); "
        "shown once, keep it like a password:"
    )
    typer.echo(issued.token)


@token_app.command("list", hidden=True)  # moved: `pmem auth tokens` (cli/aliases.py KEPT)
@handle_errors
def token_list(
    all_: Annotated[bool, typer.Option("--all", help="Include revoked tokens.")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """List tokens (ids, names, scopes, dates; never the tokens themselves); its --json as it
    was: {"tokens": [...]}, every kind."""
    items = _tokens().list(include_revoked=all_)
    if as_json:
        print_json({"tokens": [t.as_json() for t in items]})
        return
    for t in items:
        state = (
            f"revoked {t.revoked_at:%Y-%m-%d}"
            if t.revoked_at
            else (f"last used {local_time(t.last_used_at)}" if t.last_used_at else "never used")
        )
        typer.echo(
            f"{t.token_id}  {t.name}  {','.join(t.scopes)}  created {t.created_at:%Y-%m-%d}  {state}"
        )
    if not items:
        err_console.print("no tokens (create one with `pmem auth api-token create NAME`)")


@token_app.command("revoke")
@handle_errors
def token_revoke(
    token: Annotated[
        str, typer.Argument(help="A token id (tok_…) or a client name (revokes all its tokens).")
    ],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Revoke a token at once: the API refuses it from the next request on."""
    revoked = _tokens().revoke(token)
    if as_json:
        print_json({"revoked": revoked})
    else:
        err_console.print(
            f"revoked {', '.join(revoked)}" if revoked else f"no live token {token!r}"
        )
    if not revoked:
        raise typer.Exit(EXIT_ERROR)
