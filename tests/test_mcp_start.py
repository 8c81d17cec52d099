"""`pmem serve`'s stdio front door (issue 30 item 1, ADR 0043): the handshake is answered before
the SDK runs, the SDK's own answer is the same (so dropping it loses nothing), and everything
after the handshake reaches the SDK in order."""

from __future__ import annotations

import json
import logging
import os
import threading
from typing import Any

import anyio
import pytest
from mcp_types.version import HANDSHAKE_PROTOCOL_VERSIONS

from mcp_server import identity
from mcp_server.server import _serve_through, build_server
from mcp_server.stdio_front import StdioFront


def _never() -> Any:
    raise AssertionError("the handshake and tools/list must not open the store")


def _request(request_id: int, method: str, params: dict[str, Any] | None = None) -> bytes:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": request_id, "method": method}
    if params is not None:
        body["params"] = params
    return (json.dumps(body) + "\n").encode()


def _initialize(version: str) -> bytes:
    return _request(
        1,
        "initialize",
        {
            "protocolVersion": version,
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    )


class Wire:
    """A front on two pipes: what a client writes, and what it reads back."""

    def __init__(self) -> None:
        in_r, self._in_w = os.pipe()
        self._out_r, out_w = os.pipe()
        self.front = StdioFront(os.fdopen(in_r, "rb"), os.fdopen(out_w, "wb"))
        self._client_in = os.fdopen(self._in_w, "wb")
        self._client_out = os.fdopen(self._out_r, "rb")

    def send(self, data: bytes) -> None:
        self._client_in.write(data)
        self._client_in.flush()

    def receive(self) -> dict[str, Any]:
        line = self._client_out.readline()
        assert line, "the server closed the wire"
        message: dict[str, Any] = json.loads(line)
        return message

    def close(self) -> None:
        self._client_in.close()


def _serve(wire: Wire) -> threading.Thread:
    server = build_server(_never)
    thread = threading.Thread(target=anyio.run, args=(_serve_through, server, wire.front))
    thread.start()
    return thread


def test_the_front_knows_what_the_sdk_negotiates() -> None:
    assert tuple(HANDSHAKE_PROTOCOL_VERSIONS) == identity.HANDSHAKE_VERSIONS
    options = build_server(_never)._lowlevel_server.create_initialization_options()
    # the whole answer, capabilities included, is compared on the wire below
    assert options.server_version == identity.version() != ""
    assert identity.initialize_result({"protocolVersion": "2025-06-18"}) is None  # malformed


@pytest.mark.parametrize("version", ["2025-06-18", "2024-11-05", "1999-01-01"])
def test_handshake_answered_before_the_sdk_runs_and_the_sdk_agrees(
    version: str, caplog: pytest.LogCaptureFixture
) -> None:
    wire = Wire()
    wire.front._reader.start()
    wire.send(_initialize(version))
    answer = wire.receive()  # no SDK server exists yet: the front alone answered
    assert answer["id"] == 1 and wire.front.answered_early
    negotiated = version if version in HANDSHAKE_PROTOCOL_VERSIONS else "2025-11-25"
    assert answer["result"]["protocolVersion"] == negotiated
    assert answer["result"]["serverInfo"]["version"] == identity.version()

    wire.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    wire.send(_request(2, "tools/list"))
    with caplog.at_level(logging.WARNING, logger="mcp_server.stdio_front"):
        thread = _serve(wire)
        tools = wire.receive()  # the SDK's answer to initialize was dropped, not sent twice
        wire.close()
        thread.join(timeout=30)
    assert tools["id"] == 2 and "load_context" in {t["name"] for t in tools["result"]["tools"]}
    assert not [r for r in caplog.records if "differs" in r.getMessage()]


def test_a_drifted_early_answer_is_reported_by_key(caplog: pytest.LogCaptureFixture) -> None:
    wire = Wire()
    wire.front._reader.start()
    wire.send(_initialize("2025-06-18"))
    wire.receive()
    assert wire.front._early is not None
    wire.front._early[1]["instructions"] = "something else"  # as if the SDK had changed
    wire.send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    wire.send(_request(2, "ping"))
    with caplog.at_level(logging.WARNING, logger="mcp_server.stdio_front"):
        thread = _serve(wire)
        assert wire.receive()["id"] == 2
        wire.close()
        thread.join(timeout=30)
    warned = [r.getMessage() for r in caplog.records if "differs" in r.getMessage()]
    assert warned == ["the early initialize answer differs from the SDK's in: instructions"]


def test_a_first_message_that_is_not_a_handshake_goes_to_the_sdk() -> None:
    wire = Wire()
    wire.front._reader.start()
    wire.send(_request(7, "tools/list"))  # before initialize: the SDK decides what to answer
    thread = _serve(wire)
    answer = wire.receive()
    wire.close()
    thread.join(timeout=30)
    assert answer["id"] == 7 and not wire.front.answered_early


def test_the_client_is_named_by_its_handshake() -> None:
    from mcp_server.stdio_front import client_name

    assert client_name("Claude Code") == "claude-code"
    assert client_name("gemini-cli-mcp-client") == "gemini-cli-mcp-client"
    assert client_name("MCP CLI Proxy") == "mcp-cli-proxy"
    assert client_name("  ") is None and len(client_name("x" * 99) or "") == 40
    wire = Wire()
    wire.front._reader.start()
    wire.send(
        _request(
            1,
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "Claude Code", "version": "2.1"},
            },
        )
    )
    wire.receive()
    assert wire.front.client_name() == "claude-code"
    wire.close()
