"""The owner's side of the remote server (`pmem serve --http`; docs/remote.md):

    pmem auth set-password                  the passphrase the consent page asks for (Argon2id;
                                            PMEM_OWNER_PASSWORD sets it without a prompt)
    pmem auth clients [--all]               registered OAuth clients
    pmem auth tokens [--kind K] [--all]     every token: OAuth access and refresh tokens, the
                                            memory API's tokens (ids, never secrets)
    pmem auth revoke CLIENT|TOKEN_ID        revoke a client (and all its tokens) or one token's grant
    pmem auth token --client NAME --scope S a refresh token for the owner's own client (the
                                            backfill committing through the server)
    pmem publish MEMORY_ID                  put a redacted title and summary on /public

Exit codes: 0 done; 1 error (unknown id, nothing to revoke, not confirmed).
"""

from __future__ import annotations

import os
from enum import StrEnum
from typing import Annotated

import typer

from cli.app import (
    EXIT_ERROR,
    ask,
    auth_app,
    err_console,
    handle_errors,
    memory_app,
    print_json,
    settings,
)
from core.display import for_terminal as tty
from core.display import local_time

PASSWORD_ENV = "PMEM_OWNER_PASSWORD"


def _db():  # type: ignore[no-untyped-def]
    from store.db import Database

    return Database.open(settings())


def _oauth():  # type: ignore[no-untyped-def]
    from store.oauth import OAuthStore

    return OAuthStore(_db())


@auth_app.command("set-password")
@handle_errors
def set_password(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Set the owner passphrase the consent page asks for (at least 12 characters; stored as an
    Argon2id hash). Asks twice in a terminal; PMEM_OWNER_PASSWORD sets it without asking
    (scripts, tests)."""
    from core.errors import ConfigError

    password = os.environ.get(PASSWORD_ENV)
    if not password:
        import sys

        if not sys.stdin.isatty():
            raise ConfigError(
                "no passphrase given", hint=f"run it in a terminal, or set {PASSWORD_ENV}"
            )
        password = typer.prompt(
            "owner passphrase", hide_input=True, confirmation_prompt=True, err=True
        )
    _oauth().set_owner_password(password)
    if as_json:
        print_json({"owner_password": "set"})
    else:
        err_console.print("owner passphrase set")


@auth_app.command("clients")
@handle_errors
def auth_clients(
    all_: Annotated[bool, typer.Option("--all", help="Include revoked clients.")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Registered OAuth clients: id, the name its revisions carry, redirect URIs, dates."""
    items = _oauth().clients(include_revoked=all_)
    if as_json:
        print_json({"clients": [c.as_json() for c in items]})
        return
    for c in items:
        state = f"revoked {c.revoked_at:%Y-%m-%d}" if c.revoked_at else "active"
        uris = ", ".join(c.metadata.get("redirect_uris") or [])
        typer.echo(
            tty(
                f"{c.client_id}  {c.name}  {c.client_name or '-'}  {uris}  created {c.created_at:%Y-%m-%d}  {state}"
            )
        )
    if not items:
        err_console.print("no clients (a client registers itself when you connect it)")


class TokenKind(StrEnum):
    oauth = "oauth"  # the remote server's access and refresh tokens
    api = "api"  # the memory API's bearer tokens


TOKEN_KINDS = {TokenKind.oauth: ("access", "refresh"), TokenKind.api: ("api",)}


@auth_app.command("tokens")
@handle_errors
def auth_tokens(
    kind: Annotated[
        TokenKind | None,
        typer.Option(
            "--kind",
            help="Only the remote server's OAuth tokens (access, refresh) or only the memory API's (api).",
        ),
    ] = None,
    all_: Annotated[
        bool, typer.Option("--all", help="Include revoked and expired tokens.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Every token, with its kind: OAuth access and refresh tokens (`pmem serve --http`) and
    memory-API tokens (`pmem serve --api`); ids, names, scopes, dates, never the tokens.

    --json: one object with the lists `oauth_tokens` and `api_tokens` (with --kind, that kind's
    only)."""
    from store.tokens import TokenStore

    store = TokenStore(_db())
    lists = {
        f"{k.value}_tokens": store.list(include_revoked=all_, kinds=TOKEN_KINDS[k])
        for k in TokenKind
        if kind in (None, k)
    }
    if as_json:
        print_json({name: [t.as_json() for t in items] for name, items in lists.items()})
        return
    shown = [t for items in lists.values() for t in items]
    for t in shown:
        if t.revoked_at:
            state = f"revoked {t.revoked_at:%Y-%m-%d %H:%M}"
        elif t.kind == "api":
            used = f"last used {local_time(t.last_used_at)}" if t.last_used_at else "never used"
            state = f"created {t.created_at:%Y-%m-%d}  {used}"
        else:
            expiry = f"expires {local_time(t.expires_at)}" if t.expires_at else "no expiry"
            state = f"family {t.family_id or '-'}  {expiry}"
        typer.echo(tty(f"{t.token_id}  {t.kind:<7}  {t.name}  {','.join(t.scopes)}  {state}"))
    if not shown:
        err_console.print(
            "no tokens (`pmem auth api-token create NAME` makes one for the memory API; a client "
            "of the remote server gets its own when you connect it)"
        )


@auth_app.command("revoke")
@handle_errors
def auth_revoke(
    target: Annotated[
        str,
        typer.Argument(
            help="A client id or name (revokes the client and all its tokens), or a token id tok_… (revokes its whole grant)."
        ),
    ],
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Revoke at once: the server refuses the client's tokens from the next request on."""
    store = _oauth()
    clients, tokens = store.revoke_client(target)
    if not clients and target.startswith("tok_"):
        with store.db.connection() as conn:
            row = conn.execute(
                "SELECT family_id FROM auth_tokens WHERE token_id = %s", (target,)
            ).fetchone()
            if row is not None:
                tokens = conn.execute(
                    """UPDATE auth_tokens SET revoked_at = now() WHERE revoked_at IS NULL
                       AND (token_id = %s OR (family_id IS NOT NULL AND family_id = %s))""",
                    (target, row[0]),
                ).rowcount
                conn.commit()
    if as_json:
        print_json({"revoked_clients": clients, "revoked_tokens": tokens})
    elif clients or tokens:
        err_console.print(tty(f"revoked {len(clients)} client(s), {tokens} token(s)"))
    else:
        err_console.print(tty(f"nothing to revoke for {target!r}"))
    if not clients and not tokens:
        raise typer.Exit(EXIT_ERROR)


@auth_app.command("token")
@handle_errors
def auth_token(
    client: Annotated[
        str,
        typer.Option(
            "--client",
            help="The owner's own client, e.g. backfill (its name on revisions and budget).",
        ),
    ],
    scope: Annotated[
        list[str] | None,
        typer.Option(
            "--scope",
            help="Repeatable: memory.read, memory.propose, memory.write, memory.delete, memory.publish (default memory.read memory.propose memory.write: what a backfill needs).",
        ),
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Issue a refresh token for one of your own clients, without the consent page (you are the
    owner at the terminal). Give it to the committer as PMEM_MEMORY_REFRESH_TOKEN (with
    PMEM_MEMORY_URL); it renews its 15-minute access tokens itself. Shown once."""
    from mcp_server.oauth import first_party_client
    from store.tokens import DEFAULT_SCOPES, check_scopes

    store = _oauth()
    scopes = check_scopes(scope or list(DEFAULT_SCOPES))
    c = first_party_client(store, client)
    _, refresh = store.issue(c, scopes, None)
    assert refresh is not None
    if as_json:
        print_json(
            {
                "client_id": c.client_id,
                "name": c.name,
                "scopes": list(scopes),
                "refresh_token": refresh.token,
                "token_id": refresh.info.token_id,
            }
        )
        return
    err_console.print(
        f"refresh token {refresh.info.token_id} for client {c.client_id} ({', '.join(scopes)}); "
        f"shown once: set PMEM_MEMORY_REFRESH_TOKEN and PMEM_MEMORY_CLIENT_ID={c.client_id} "
        "where the committer runs"
    )
    typer.echo(refresh.token)


@memory_app.command("publish")
@handle_errors
def publish(
    memory_id: Annotated[
        str, typer.Argument(help="The memory to put on the public page (GET /public).")
    ],
    title: Annotated[
        str | None,
        typer.Option("--title", help="The public title (default: the memory's, redacted)."),
    ] = None,
    summary: Annotated[
        str | None,
        typer.Option(
            "--summary", help="The public summary (default: the memory's index summary, redacted)."
        ),
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
    unpublish: Annotated[
        bool, typer.Option("--unpublish", help="Take it off the public page.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Publish a memory's title and summary (after the secret guard) to the public projection,
    a separate table that GET /public reads as a role with no access to anything else. Shows
    what will be public and asks first unless --yes."""
    from store.public import PublicStore

    store = PublicStore(_db())
    if unpublish:
        done = store.unpublish(memory_id)
        if as_json:
            print_json({"memory_id": memory_id, "unpublished": done})
        else:
            err_console.print(
                tty(f"{memory_id}: {'taken off' if done else 'was not on'} the public page")
            )
        return
    draft = store.draft(memory_id)
    from core.secrets import redact

    shown = {
        "title": redact(title)[0] if title else draft["title"],
        "summary": redact(summary)[0] if summary else draft["summary"],
    }
    err_console.print(tty(f"public title:   {shown['title']}"))
    err_console.print(tty(f"public summary: {shown['summary']}", keep_newlines=True))
    ask("publish this on the public page?", yes)
    out = store.publish(memory_id, shown["title"], shown["summary"])
    if as_json:
        print_json(out | {"published": True})
    else:
        err_console.print(tty(f"{memory_id} published"))
