"""A restart of `pmem serve --http` is invisible to a connected client (issue 30 item 2, ADR 0043):
the SDK's own client, mid-session, calls a tool, the server stops and starts again on the same
port, and the client's next call on the same session succeeds without reconnecting; the stop
logs no ERROR line, even with a client connected."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from typer.testing import CliRunner

import core.settings
import memory_api.server
from core.models import Conversation
from importers import iter_source
from store.ledger import Ledger
from store.oauth import OAuthStore
from tests.conftest import free_port
from tests.test_remote import (  # cheap_argon2: the autouse fixture of that module
    DEMO,
    PASSPHRASE,
    Browser,
    Lines,
    Memory,
    cheap_argon2,  # noqa: F401
    provider,
)


class HttpServer:
    """`pmem serve --http` (the real command, uvicorn in a thread) that can be restarted on the
    same port; every log record of the process is collected."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.running: list[Any] = []
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.lines = Lines()

        def in_thread(app_: Any, *, host: str, port: int, log_level: str) -> None:
            self.running.append(
                memory_api.server.run_app_in_thread(app_, host=host, port=port, log_level=log_level)
            )

        monkeypatch.setattr(memory_api.server, "run_app_forever", in_thread)

    def start(self) -> None:
        from cli.main import app

        result = CliRunner().invoke(app, ["serve", "--http", "--port", str(self.port)])
        assert result.exit_code == 0, result.output

    def stop(self) -> None:
        while self.running:
            self.running.pop().stop()

    def restart(self) -> None:
        self.stop()
        self.start()

    def errors(self) -> list[str]:
        return [line for line in self.lines.lines if " ERROR " in line]


@contextmanager
def http_server(db: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[HttpServer]:
    """The demo conversations in the ledger, an owner passphrase, the server started."""
    ledger = Ledger(db)
    imp = ledger.start_import("chatgpt", str(DEMO))
    for conv in iter_source("chatgpt", DEMO):
        assert isinstance(conv, Conversation)
        ledger.upsert(conv, imp)
    OAuthStore(db).set_owner_password(PASSPHRASE)
    monkeypatch.setenv("PMEM_EMBEDDER", "none")
    monkeypatch.setattr(core.settings, "_working_dir_dotenv", True)
    server = HttpServer(monkeypatch)
    logging.getLogger().addHandler(server.lines)
    server.start()
    try:
        yield server
    finally:
        server.stop()
        logging.getLogger().removeHandler(server.lines)


def test_a_restart_keeps_the_session(
    pmem_env: dict[str, str], db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    with http_server(db, monkeypatch) as server:
        base = server.base
        auth = provider(
            base, "restart-probe", "memory.read", Browser(base, ["memory.read"]), Memory()
        )

        async def session() -> None:
            async with (
                httpx2.AsyncClient(auth=auth, timeout=30) as http,
                streamable_http_client(base + "/mcp", http_client=http) as (read, write),
                ClientSession(read, write) as s,
            ):
                await s.initialize()
                before = await s.call_tool("current_state", {})
                assert not before.is_error
                await anyio.to_thread.run_sync(server.restart)  # with the client connected
                after = await s.call_tool("load_context", {"limit": 3})
                assert not after.is_error, after.content
                tools = await s.list_tools()
                assert "recall" in {t.name for t in tools.tools}

        anyio.run(session)
    assert server.errors() == []
