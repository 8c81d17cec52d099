"""`pmem serve`: the MCP server over stdio, for Claude Desktop, Claude Code, Codex and other MCP
clients (see README, "Use it from an AI client"); with `--http`, the remote memory server (MCP
over streamable HTTP at /mcp, OAuth 2.1, the memory API under /v1; docs/remote.md)."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from cli.app import app, handle_errors, moved, settings

API_PORT = 8766  # `pmem serve --api` (the memory API alone) when no --port is given


@app.command(short_help="MCP over stdio; --http: the remote server; --api: the API.")
@handle_errors
def serve(
    client: Annotated[
        str | None,
        typer.Option(
            "--client",
            help="Name recorded on every revision written through this server (stdio); "
            "default: the name the client gives in its handshake (claude-code, codex-mcp-client, "
            "…), else mcp.",
        ),
    ] = None,
    http: Annotated[
        bool,
        typer.Option(
            "--http",
            help="Serve over streamable HTTP with OAuth (web and remote clients) instead of stdio.",
        ),
    ] = False,
    api: Annotated[
        bool,
        typer.Option(
            "--api",
            help="Serve only the memory API over HTTP with bearer tokens (`pmem auth api-token create NAME`); point PMEM_MEMORY_URL at it.",
        ),
    ] = False,
    host: Annotated[
        str,
        typer.Option(
            help="--http, --api: interface to listen on (loopback unless --public-url is given)."
        ),
    ] = "127.0.0.1",
    port: Annotated[
        int | None, typer.Option(help="--http: TCP port (default 8765); --api: 8766.")
    ] = None,
    public_url: Annotated[
        str | None,
        typer.Option(
            "--public-url",
            help="--http, --api: the https address a TLS proxy serves this server at (the OAuth issuer of --http); required for a non-loopback --host.",
        ),
    ] = None,
    log_level: Annotated[
        str, typer.Option("--log-level", help="--http: debug, info, warning or error.")
    ] = "info",
) -> None:
    """Serve the memory to an AI client over MCP (stdio): load_context, search_memory,
    get_memory, recall, propose_memory, commit_memory, memory_history. stdout carries the
    protocol; logs go to stderr. Configuration: the environment the client passes and the data
    dir's config.env; never a `.env` in the folder the client started it in.

    With --http: the same tools at http://HOST:PORT/mcp behind OAuth 2.1 (the consent page asks
    for the owner passphrase: `pmem owner set-password` first), the memory API under /v1 and
    the public projection at /public. Without --public-url the issuer is http://127.0.0.1:PORT.

    With --api: the memory API alone at http://HOST:PORT/v1 (the old `pmem api`). Every
    request but /v1/health needs a bearer token from `pmem auth api-token create NAME`
    (clients: PMEM_MEMORY_TOKEN); 300 requests / 600 s per client by default
    (PMEM_COMMIT_BUDGET); beyond it: 429 with Retry-After."""
    if api:
        if http:
            from core.errors import ConfigError

            raise ConfigError("--api and --http are two servers: give one of them")
        _serve_api(host, API_PORT if port is None else port, public_url)
        return
    from core.settings import ignore_working_dir_dotenv

    ignore_working_dir_dotenv()  # before anything reads settings
    front = None
    if not http and os.environ.get("PMEM_STDIO_FRONT", "1") != "0":
        from importlib.util import find_spec

        if find_spec("mcp") is not None:  # else the import below names what is missing
            from mcp_server.stdio_front import StdioFront

            front = StdioFront.start()  # answers initialize while the SDK loads (ADR 0043)
    try:
        from mcp_server.server import run_stdio
    except ModuleNotFoundError as err:
        if err.name not in ("mcp", "mcp_server"):
            raise
        from core.errors import ConfigError

        raise ConfigError(
            f"`pmem serve` needs the {err.name!r} package, which is not installed",
            hint="reinstall the project: .venv/bin/pip install -e '.[dev]'",
        ) from None
    if http:
        _serve_http(host, 8765 if port is None else port, public_url, log_level)
        return
    name = client or (front.client_name() if front is not None else None) or "mcp"
    run_stdio(client=name, front=front)


def _serve_http(host: str, port: int, public_url: str | None, log_level: str) -> None:
    import logging

    from core.errors import ConfigError
    from mcp_server.http import create_app, issuer_for, quiet_logging
    from memory_api.auth import check_bind
    from memory_api.server import run_app_forever
    from store.db import Database
    from store.public import PublicReader

    if log_level.lower() not in ("debug", "info", "warning", "error"):
        raise ConfigError(f"--log-level must be debug, info, warning or error, not {log_level!r}")
    check_bind(host, public_url)  # before the database is opened; https unless loopback
    quiet_logging(log_level)
    cfg = settings()
    db = Database.open(cfg)
    issuer = issuer_for(port, public_url)
    app_ = create_app(
        db,
        issuer=issuer,
        public_url=public_url,
        budget=cfg.budget,
        public_reader=PublicReader.for_database(db),
    )
    logging.getLogger("pmem.remote").info(
        "remote memory server: %s/mcp (issuer %s), listening on %s:%d", issuer, issuer, host, port
    )
    run_app_forever(app_, host=host, port=port, log_level=log_level.lower())


@handle_errors
def api(
    host: Annotated[
        str, typer.Option(help="Interface to listen on (loopback unless --public-url is given).")
    ] = "127.0.0.1",
    port: Annotated[
        int,
        typer.Option(
            help="TCP port (`pmem serve --http` takes 8765 and serves the API under /v1 too)."
        ),
    ] = 8766,
    public_url: Annotated[
        str | None,
        typer.Option(
            "--public-url",
            help="The https address a TLS proxy serves the API at; required for a non-loopback --host, and its host is accepted in the Host header.",
        ),
    ] = None,
) -> None:
    """Serve the memory API over HTTP (point PMEM_MEMORY_URL at it). Every request but
    /v1/health needs a bearer token from `pmem token create NAME` (clients: PMEM_MEMORY_TOKEN);
    the token's name is the client's name. 300 requests / 600 s per client by default
    (PMEM_COMMIT_BUDGET); beyond it: 429 with Retry-After."""
    _serve_api(host, port, public_url)


app.command(name="api", hidden=True)(moved(api, "serve --api", "api"))


def _serve_api(host: str, port: int, public_url: str | None) -> None:
    from memory_api.auth import check_bind
    from memory_api.server import serve_forever
    from store.db import Database

    check_bind(host, public_url)  # before the database is opened
    cfg = settings()
    serve_forever(
        Database.open(cfg), budget=cfg.budget, host=host, port=port, public_url=public_url
    )
