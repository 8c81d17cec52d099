"""`pmem serve`: the MCP server over stdio, for Claude Desktop, Claude Code, Codex and other MCP
clients (see README, "Use it from an AI client")."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.app import app, handle_errors


@app.command()
@handle_errors
def serve(
    client: Annotated[str, typer.Option("--client", help="Name recorded on every revision written through this server.")] = "mcp",
) -> None:
    """Serve the memory to an AI client over MCP (stdio): load_context, search_memory,
    get_memory, recall, propose_memory, commit_memory, memory_history. stdout carries the
    protocol; logs go to stderr. Configuration: the environment the client passes and the data
    dir's config.env; never a `.env` in the folder the client started it in."""
    from core.settings import ignore_working_dir_dotenv

    ignore_working_dir_dotenv()  # before anything reads settings
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
    run_stdio(client=client)
