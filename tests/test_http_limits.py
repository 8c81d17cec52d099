"""The internet-facing limits (issue 29 item 5, findings 7, 8, 10, 11, 14, 15, 16), on a real
loopback socket: registration per address and by size, the consent throttle per address and
per client (a clock the test moves, never a sleep through a delay), strict JSON and body limits
answered before anything reads them, half-sent and idle connections closed, Origin and session
binding on /mcp, https for a public URL, and delete/publish scopes on /v1.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from typing import Any
from urllib.parse import urlencode, urlsplit

import httpx
import pytest
from fastapi.testclient import TestClient

from core.errors import ConfigError
from mcp_server.oauth import first_party_client
from memory_api.auth import check_public_url
from store.oauth import OAuthStore
from tests.test_oauth_letter import (
    ACCEPT,
    INIT,
    LOOPBACK,
    consent,
    exchange,
    register,
    remote_server,
    use_cheap_argon2,
)
from tests.test_remote import PASSPHRASE, form_data, parse_form, pkce, pmem


@pytest.fixture(autouse=True)
def cheap_argon2(monkeypatch: pytest.MonkeyPatch) -> None:
    use_cheap_argon2(monkeypatch)


@pytest.fixture
def server(db, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    with remote_server(db, monkeypatch) as running:
        yield running


def xff(address: str) -> dict[str, str]:
    """A request from ``address``: uvicorn takes X-Forwarded-For from a loopback proxy."""
    return {"X-Forwarded-For": address}


def test_registration_limits_per_address_and_by_size(
    server: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import mcp_server.http

    monkeypatch.setattr(mcp_server.http, "REGISTRATIONS_PER_ADDRESS", 3)
    monkeypatch.setattr(mcp_server.http, "REGISTRATIONS", 2)
    base = server["base"]
    big = {"client_name": "x" * (17 * 1024), "redirect_uris": [LOOPBACK]}
    assert httpx.post(base + "/register", json=big, headers=xff("203.0.113.1")).status_code == 413
    huge = httpx.post(
        base + "/register",
        content=b"{" + b" " * (1024 * 1024) + b"}",
        headers={"Content-Type": "application/json"} | xff("203.0.113.1"),
    )
    assert huge.status_code == 413  # refused from its Content-Length, never read
    # one address sends refused registrations: it runs out, nobody else does
    for _ in range(3):
        bad = register(base, ["https://evil.example/cb"], headers=xff("203.0.113.1"))
        assert bad.status_code == 400
    blocked = register(base, [LOOPBACK], headers=xff("203.0.113.1"))
    assert blocked.status_code == 429 and int(blocked.headers["retry-after"]) >= 1
    assert register(base, [LOOPBACK], headers=xff("198.51.100.2")).status_code == 201
    assert register(base, [LOOPBACK], headers=xff("2001:db8::5")).status_code == 201
    # the shared budget counts accepted registrations only: two accepted, now it is full
    full = register(base, [LOOPBACK], headers=xff("198.51.100.3"))
    assert full.status_code == 429
    # a bucket per address, each cleaned by every registration once its events expire
    with server["db"].connection() as conn:
        conn.execute(
            "UPDATE budget_events SET at = at - interval '11 minutes' WHERE bucket LIKE 'dcr:%'"
        )
        conn.commit()
    assert register(base, [LOOPBACK], headers=xff("198.51.100.4")).status_code == 429  # shared
    with server["db"].connection() as conn:
        left = conn.execute(
            "SELECT count(*) FROM budget_events WHERE bucket LIKE 'dcr:%'"
        ).fetchone()[0]
    assert left == 1  # the last request's own; the expired ones of other addresses are gone


def test_consent_throttle_per_address_and_client(
    server: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    import mcp_server.consent

    base, db = server["base"], server["db"]
    now = [time.time()]
    monkeypatch.setattr(mcp_server.consent, "clock", lambda: now[0])
    # the count of all is looked at last (below): until then it stays out of the way
    monkeypatch.setattr(mcp_server.consent, "FREE_FOR_ALL", 1000)
    with pytest.raises(ConfigError, match="12 characters"):
        OAuthStore(db).set_owner_password("eleven char")
    owner = register(base, [LOOPBACK]).json()["client_id"]
    code, verifier = consent(base, owner, ["memory.read"])  # approved once: a known client
    assert exchange(base, owner, code, verifier).status_code == 200
    attacker = register(base, [LOOPBACK]).json()["client_id"]

    forms: dict[str, list[tuple[str, str]]] = {}

    def form_for(client_id: str) -> list[tuple[str, str]]:
        if client_id in forms:  # a wrong passphrase issues no code: the same form serves again
            return forms[client_id]
        _, challenge = pkce()
        q = {
            "client_id": client_id,
            "response_type": "code",
            "code_challenge": challenge,
            "code_challenge_method": "S256",
            "redirect_uri": LOOPBACK,
            "scope": "memory.read",
        }
        page = httpx.get(base + "/authorize?" + urlencode(q))
        forms[client_id] = [*parse_form(page.text).hidden.items(), ("decision", "approve")]
        return forms[client_id]

    def attempt(client_id: str, address: str, passphrase: str) -> httpx.Response:
        data = [*form_for(client_id), ("passphrase", passphrase), ("grant", "memory.read")]
        return httpx.post(base + "/authorize", data=form_data(data), headers=xff(address))

    # a parallel burst from one address: five checks, every other try waits
    burst: list[int] = []
    tries = [
        [*form_for(attacker), ("passphrase", f"wrong {i}"), ("grant", "memory.read")]
        for i in range(9)
    ]

    def one(data: list[tuple[str, str]]) -> None:
        burst.append(
            httpx.post(
                base + "/authorize", data=form_data(data), headers=xff("203.0.113.50")
            ).status_code
        )

    threads = [threading.Thread(target=one, args=(f,)) for f in tries]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(burst) == [401] * 5 + [429] * 4

    # one attacker address, a new client for every guess: exponential, 2, 4, 8 … seconds
    registered = iter(range(1, 200))

    def new_client() -> str:
        n = next(registered)
        return register(base, [LOOPBACK], headers=xff(f"198.18.{n // 8}.{n}")).json()["client_id"]

    waits = []
    for _ in range(3):
        if waits:
            now[0] += waits[-1] + 0.1
        r = attempt(new_client(), "203.0.113.9", "guess")
        while r.status_code == 401:
            r = attempt(new_client(), "203.0.113.9", "guess")
        assert r.status_code == 429
        waits.append(int(r.headers["retry-after"]))
    assert waits == [2, 4, 8]
    # ... and even the right passphrase waits there: the delay is the address's
    assert attempt(new_client(), "203.0.113.9", PASSPHRASE).status_code == 429

    # many addresses try the owner's known client: the owner, elsewhere, waits seconds at most
    for i in range(7):
        assert attempt(owner, f"192.0.2.{i + 1}", "guess").status_code in (401, 429)
    mine = attempt(owner, "198.51.100.77", PASSPHRASE)
    if mine.status_code == 429:
        assert int(mine.headers["retry-after"]) <= mcp_server.consent.KNOWN_CAP
        now[0] += mcp_server.consent.KNOWN_CAP + 0.1
        mine = attempt(owner, "198.51.100.77", PASSPHRASE)
    assert mine.status_code == 302 and "code=" in mine.headers["location"]
    # fresh clients from fresh addresses: once FREE_FOR_ALL failures came from anywhere, a new
    # client waits too, even from an address that never failed
    monkeypatch.setattr(mcp_server.consent, "FREE_FOR_ALL", OAuthStore(db).failures(10**6)[0] + 1)
    statuses = []
    for i in range(3):
        fresh = register(base, [LOOPBACK], headers=xff(f"192.0.2.{100 + i}")).json()["client_id"]
        statuses.append(attempt(fresh, f"192.0.2.{100 + i}", "guess").status_code)
        if statuses[-1] == 429:
            break
    assert statuses == [401, 429]
    newcomer = register(base, [LOOPBACK], headers=xff("198.51.100.90")).json()["client_id"]
    assert attempt(newcomer, "198.51.100.91", PASSPHRASE).status_code == 429


def test_json_and_body_limits_connections_origin_and_sessions(  # noqa: PLR0915
    server: dict[str, Any], monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    import memory_api.limits

    base, db = server["base"], server["db"]
    store = OAuthStore(db)
    one, _ = store.issue(first_party_client(store, "one"), ["memory.read"], None, refresh=False)
    two, _ = store.issue(first_party_client(store, "two"), ["memory.read"], None, refresh=False)
    auth = {"Authorization": f"Bearer {one.token}", "Content-Type": "application/json"}
    caplog.set_level(logging.DEBUG)
    bodies = {
        "NaN": b'{"query": NaN, "note": "BODYCANARY password hunter2"}',
        "deep": b'{"query": "BODYCANARY", "x": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
        "NUL": b'{"query": "BODYCANARY a\\u0000b"}',
        "surrogate": b'{"query": "BODYCANARY \\ud800"}',
    }
    for name, body in bodies.items():
        for path in ("/v1/search", "/mcp"):
            r = httpx.post(base + path, content=body, headers=auth | ACCEPT)
            assert r.status_code == 400, (name, path, r.text)
            assert r.json()["error"] == "invalid_json" and "BODYCANARY" not in r.text
    # without a token: 401 before the body is looked at
    assert httpx.post(base + "/v1/search", content=bodies["NaN"]).status_code == 401
    # a NUL in a form or a query string
    assert httpx.post(base + "/token", data={"client_id": "a\x00b"}).status_code == 400
    assert httpx.get(base + "/authorize?client_id=%00").status_code == 400
    # a body over 4 MiB: 413 from its Content-Length
    big = httpx.post(
        base + "/v1/search", content=b'{"query": "' + b"x" * (5 * 1024 * 1024) + b'"}', headers=auth
    )
    assert big.status_code == 413
    assert all("BODYCANARY" not in r.getMessage() for r in caplog.records)
    assert all("hunter2" not in r.getMessage() for r in caplog.records)

    # ---------------------------------------------------------------- slow and idle connections
    host, port = urlsplit(base).hostname, urlsplit(base).port
    assert host is not None and port is not None
    monkeypatch.setattr(memory_api.limits, "BODY_SECONDS", 0.5)
    monkeypatch.setattr(memory_api.limits, "HEADER_SECONDS", 0.5)
    started = time.monotonic()
    with socket.create_connection((host, port), timeout=5) as half:
        half.sendall(
            b"POST /v1/search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            + f"Authorization: Bearer {one.token}\r\nContent-Length: 100\r\n\r\n".encode()
            + b'{"query":'
        )
        answer = half.recv(4096)
    assert answer.startswith(b"HTTP/1.1 408") and time.monotonic() - started < 4
    started = time.monotonic()
    with socket.create_connection((host, port), timeout=5) as idle:
        assert idle.recv(10) == b""  # closed by the server, not by the 5 s timeout here
    assert time.monotonic() - started < 4
    with socket.create_connection((host, port), timeout=5) as head:
        head.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n")  # half a head
        assert head.recv(10) == b""
    with socket.create_connection((host, port), timeout=5) as again:
        again.sendall(b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        seen = b""
        while not seen.endswith(b"}"):
            seen += again.recv(4096)
        assert seen.startswith(b"HTTP/1.1 200")
        again.sendall(b"GET /health HTTP/1.1\r\n")  # kept alive, then half the next head
        started = time.monotonic()
        assert again.recv(10) == b"" and time.monotonic() - started < 4

    # ---------------------------------------------------------------- Origin
    mcp = ACCEPT | {"Authorization": f"Bearer {one.token}"}
    evil = httpx.post(base + "/mcp", json=INIT, headers=mcp | {"Origin": "http://evil.example"})
    assert evil.status_code == 403 and evil.json()["error"] == "invalid_origin"
    assert httpx.post(base + "/mcp", json=INIT, headers=mcp | {"Origin": "null"}).status_code == 403
    local = httpx.post(base + "/mcp", json=INIT, headers=mcp | {"Origin": "http://localhost:6274"})
    assert local.status_code == 200

    # ---------------------------------------------------------------- no session to take over
    # the wire is stateless (ADR 0043): no session id is issued, so none can be learned and used;
    # a request carrying one is served on its own token's grant alone
    opened = httpx.post(base + "/mcp", json=INIT, headers=mcp)
    assert opened.status_code == 200 and "mcp-session-id" not in opened.headers
    listing = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    theirs = ACCEPT | {
        "Authorization": f"Bearer {two.token}",
        "Mcp-Session-Id": "a-session-id-learned-elsewhere",
        "MCP-Protocol-Version": "2025-11-25",
    }
    listed = httpx.post(base + "/mcp", json=listing, headers=theirs)
    assert listed.status_code in (200, 404)
    mine = mcp | {"MCP-Protocol-Version": "2025-11-25"}
    own = httpx.post(base + "/mcp", json=listing, headers=mine)
    assert own.status_code == 200 and "search_memory" in own.text


def test_https_for_public_urls(pmem_env: dict[str, str]) -> None:
    for ok in (
        "https://memory.example",
        "http://127.0.0.1:8765",
        "http://localhost:8765",
        "http://[::1]:8765",
    ):
        check_public_url(ok)
    for bad in (
        "http://127.0.0.1.nip.io:8765",
        "http://memory.example",
        "http://localhost.evil.example",
    ):
        with pytest.raises(ConfigError, match="https"):
            check_public_url(bad)
    from tests.conftest import free_port

    nip = pmem(
        "serve", "--http", "--port", str(free_port()), "--public-url", "http://127.0.0.1.nip.io"
    )
    assert nip.exit_code == 1 and "https" in nip.output
    api = pmem(
        "serve",
        "--api",
        "--host",
        "0.0.0.0",
        "--port",
        str(free_port()),
        "--public-url",
        "http://memory.example",
    )
    assert api.exit_code == 1 and "https" in api.output
    lan = pmem(
        "serve",
        "--http",
        "--host",
        "0.0.0.0",
        "--port",
        str(free_port()),
        "--public-url",
        "http://127.0.0.1:8765",
    )
    assert lan.exit_code == 1 and "--public-url" in lan.output  # a loopback URL is no proxy


def test_v1_delete_and_publish_need_their_scopes(db) -> None:  # type: ignore[no-untyped-def]
    from memory_api.app import create_app
    from store.tokens import TokenStore

    tokens = TokenStore(db)
    plain = tokens.create("plain").token  # read, propose, write
    api = TestClient(create_app(db), base_url="http://127.0.0.1")
    asks = [
        (
            "/v1/requests",
            {"action": "delete", "memory_id": "mem_x", "expected_revision": 1},
            "memory.delete",
        ),
        (
            "/v1/requests",
            {"action": "publish", "memory_id": "mem_x", "expected_revision": 1},
            "memory.publish",
        ),
        (
            "/v1/commits",
            {
                "memory_id": "mem_x",
                "expected_revision": 1,
                "reason": "delete",
                "kind": "d",
                "title": "t",
                "canonical_summary": "s",
                "index_summary": "s",
                "idempotency_key": "k1",
            },
            "memory.delete",
        ),
    ]
    for path, body, scope in asks:
        r = api.post(path, json=body, headers={"Authorization": f"Bearer {plain}"})
        assert r.status_code == 403 and r.json() == {"error": "insufficient_scope", "scope": scope}
        assert (
            scope in r.headers["www-authenticate"]
            and "memory.write" in r.headers["www-authenticate"]
        )
    full = tokens.create(
        "full", ["memory.propose", "memory.delete", "memory.publish", "memory.write"]
    ).token
    for path, body, _ in asks:
        r = api.post(path, json=body, headers={"Authorization": f"Bearer {full}"})
        assert r.status_code != 403, r.text
    # a correction still needs memory.propose only (queued)
    r = api.post(
        "/v1/requests",
        json={"action": "correction", "memory_id": "mem_x", "expected_revision": 1},
        headers={"Authorization": f"Bearer {plain}"},
    )
    assert r.status_code != 403
