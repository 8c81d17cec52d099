"""OAuth to the letter (issue 29 item 4, issue 30 items 3-4), on a real loopback socket: the
remote server's app under uvicorn in a thread, driven with httpx as an attacker or a plain
client would, and with the `mcp` SDK's own OAuth client for the step-up.

- a refresh replay inside the grace window gets the same successor; once the successor was used
  a replay revokes the family;
- a reused authorization code revokes what it issued;
- `/revoke` takes a public client by its `client_id` alone (RFC 7009);
- redirect URIs are parsed strictly; editors' URIs are taken as exact matches; a registration
  keeps what passes and names what it refused;
- a PKCE verifier is 43-128 characters; a token works only at the resource it was issued for;
- consent ticks read and propose only; a call beyond the grant answers the step-up challenge and
  the SDK's client then gets the wider grant through consent;
- an unknown client is told to register again (a page at /authorize, `invalid_client` at /token).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import anyio
import httpx
import pytest
from mcp import ClientSession

from mcp_server.oauth import match_redirect, redirect_problem
from store.oauth import OAuthStore
from tests.conftest import free_port
from tests.test_remote import (
    PASSPHRASE,
    Browser,
    Memory,
    form_data,
    mcp_session,
    parse_form,
    pkce,
    provider,
    text_of,
)

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}
LOOPBACK = "http://127.0.0.1:43999/callback"


def use_cheap_argon2(monkeypatch: pytest.MonkeyPatch) -> None:
    """Argon2id at its cheapest: the flow is tested here, not the work factor."""
    import argon2

    import store.oauth

    monkeypatch.setattr(
        store.oauth,
        "PASSWORD_HASHER",
        argon2.PasswordHasher.from_parameters(argon2.profiles.CHEAPEST),
    )


@pytest.fixture(autouse=True)
def cheap_argon2(monkeypatch: pytest.MonkeyPatch) -> None:
    use_cheap_argon2(monkeypatch)


@contextmanager
def remote_server(db: Any, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, Any]]:
    """The remote server's app (`pmem serve --http`) under uvicorn in a thread, the owner's
    passphrase set."""
    from mcp_server.http import create_app
    from mcp_server.service import MemoryService
    from memory_api.server import run_app_in_thread

    monkeypatch.setenv("PMEM_EMBEDDER", "none")
    monkeypatch.setenv("PMEM_TZ", "UTC")
    OAuthStore(db).set_owner_password(PASSPHRASE)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    running = run_app_in_thread(
        create_app(
            db,
            issuer=base,
            service_factory=lambda: MemoryService(db, embedder=None, tz="UTC"),
        ),
        port=port,
    )
    try:
        yield {"base": base, "db": db}
    finally:
        running.stop()


@pytest.fixture
def server(db, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    with remote_server(db, monkeypatch) as running:
        yield running


def register(base: str, uris: list[str], **meta: Any) -> httpx.Response:
    return httpx.post(
        base + "/register",
        json={
            "client_name": meta.pop("client_name", "Probe"),
            "redirect_uris": uris,
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": meta.pop("auth", "none"),
            **meta,
        },
        headers=meta.pop("headers", None) or {},
    )


def consent(
    base: str,
    client_id: str,
    grant: list[str],
    *,
    scope: str = "memory.read memory.propose memory.write",
    resource: str | None = None,
    redirect: str = LOOPBACK,
) -> tuple[str, str]:
    """The owner approves ``grant`` on the consent page: (code, verifier)."""
    verifier, challenge = pkce()
    q = {
        "client_id": client_id,
        "response_type": "code",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "redirect_uri": redirect,
        "scope": scope,
        "state": "s",
    }
    if resource:
        q["resource"] = resource
    page = httpx.get(base + "/authorize?" + urlencode(q))
    assert page.status_code == 200, page.text
    form = parse_form(page.text)
    data = [*form.hidden.items(), ("passphrase", PASSPHRASE), ("decision", "approve")]
    answer = httpx.post(base + "/authorize", data=form_data(data + [("grant", s) for s in grant]))
    assert answer.status_code == 302, answer.text
    return parse_qs(urlsplit(answer.headers["location"]).query)["code"][0], verifier


def exchange(base: str, client_id: str, code: str, verifier: str, **extra: str) -> httpx.Response:
    return httpx.post(
        base + "/token",
        data={
            "grant_type": "authorization_code",
            "code": code,
            "client_id": client_id,
            "redirect_uri": LOOPBACK,
            "code_verifier": verifier,
            **extra,
        },
    )


def refresh(base: str, client_id: str, token: str) -> httpx.Response:
    return httpx.post(
        base + "/token",
        data={"grant_type": "refresh_token", "refresh_token": token, "client_id": client_id},
    )


def at_mcp(base: str, access: str) -> int:
    return httpx.post(
        base + "/mcp", json=INIT, headers=ACCEPT | {"Authorization": f"Bearer {access}"}
    ).status_code


def at_v1(base: str, access: str) -> int:
    return httpx.post(
        base + "/v1/search", json={"query": "x"}, headers={"Authorization": f"Bearer {access}"}
    ).status_code


def test_refresh_replays_codes_revocation_pkce_and_audience(server: dict[str, Any]) -> None:  # noqa: PLR0915
    base, db = server["base"], server["db"]
    cid = register(base, [LOOPBACK]).json()["client_id"]

    # ---------------------------------------------------------------- PKCE verifier 43-128
    code, _ = consent(base, cid, ["memory.read"])
    short_v, short_c = "a", ""  # a 1-character verifier, its challenge computed honestly
    import base64
    import hashlib

    short_c = base64.urlsafe_b64encode(hashlib.sha256(b"a").digest()).decode().rstrip("=")
    q = {
        "client_id": cid,
        "response_type": "code",
        "code_challenge": short_c,
        "code_challenge_method": "S256",
        "redirect_uri": LOOPBACK,
    }
    form = parse_form(httpx.get(base + "/authorize?" + urlencode(q)).text)
    got = httpx.post(
        base + "/authorize",
        data=form_data(
            [
                *form.hidden.items(),
                ("passphrase", PASSPHRASE),
                ("decision", "approve"),
                ("grant", "memory.read"),
            ]
        ),
    )
    short_code = parse_qs(urlsplit(got.headers["location"]).query)["code"][0]
    refused = exchange(base, cid, short_code, short_v)
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_request"
    assert "43-128" in refused.json()["error_description"]
    assert exchange(base, cid, short_code, "x" * 129).status_code == 400
    bad_challenge = httpx.get(base + "/authorize?" + urlencode(q | {"code_challenge": "abc"}))
    assert (
        bad_challenge.status_code == 302
        and "error=invalid_request" in (bad_challenge.headers["location"])
    )

    # ---------------------------------------------------------------- a reused code
    code, verifier = consent(base, cid, ["memory.read"])
    first = exchange(base, cid, code, verifier)
    assert first.status_code == 200, first.text
    access, ref = first.json()["access_token"], first.json()["refresh_token"]
    assert at_mcp(base, access) == 200
    again = exchange(base, cid, code, verifier)
    assert again.status_code == 400 and again.json()["error"] == "invalid_grant"
    assert at_mcp(base, access) == 401  # RFC 6749 §4.1.2: what the code issued is revoked
    assert refresh(base, cid, ref).status_code == 400

    # ---------------------------------------------------------------- refresh replays
    code, verifier = consent(base, cid, ["memory.read"])
    r0 = exchange(base, cid, code, verifier).json()["refresh_token"]
    one = refresh(base, cid, r0)
    assert one.status_code == 200
    replays = [refresh(base, cid, r0) for _ in range(3)]  # a thief replaying fast
    assert all(r.status_code == 200 for r in replays)
    # idempotent: every replay gets the same successor, so there is one chain, not four
    assert {r.json()["refresh_token"] for r in replays} == {one.json()["refresh_token"]}
    assert {r.json()["access_token"] for r in replays} == {one.json()["access_token"]}
    with db.connection() as conn:
        live = conn.execute(
            """SELECT count(*) FROM auth_tokens t JOIN auth_tokens s ON s.family_id = t.family_id
               WHERE t.token_hash = %s AND s.kind = 'refresh' AND s.revoked_at IS NULL
                 AND s.rotated_at IS NULL""",
            (hashlib.sha256(r0.encode()).digest(),),
        ).fetchone()[0]
    assert live == 1
    # the owner's client uses its successor; the thief's replay then revokes the family
    r1 = one.json()["refresh_token"]
    two = refresh(base, cid, r1)
    assert two.status_code == 200
    late = refresh(base, cid, r0)
    assert late.status_code == 400 and late.json()["error"] == "invalid_grant"
    assert refresh(base, cid, two.json()["refresh_token"]).status_code == 400
    assert at_mcp(base, two.json()["access_token"]) == 401
    # outside the window, an unused successor does not save the family either
    code, verifier = consent(base, cid, ["memory.read"])
    s0 = exchange(base, cid, code, verifier).json()["refresh_token"]
    s1 = refresh(base, cid, s0).json()["refresh_token"]
    with db.connection() as conn:
        conn.execute(
            "UPDATE auth_tokens SET rotated_at = now() - interval '1 hour' WHERE token_hash = %s",
            (hashlib.sha256(s0.encode()).digest(),),
        )
        conn.commit()
    assert refresh(base, cid, s0).status_code == 400
    assert refresh(base, cid, s1).status_code == 400

    # ---------------------------------------------------------------- /revoke, public clients
    code, verifier = consent(base, cid, ["memory.read"])
    pair = exchange(base, cid, code, verifier).json()
    other = register(base, ["http://127.0.0.1:43998/cb"]).json()["client_id"]
    foreign = httpx.post(base + "/revoke", data={"token": pair["access_token"], "client_id": other})
    assert foreign.status_code == 200 and at_mcp(base, pair["access_token"]) == 200  # not its own
    gone = httpx.post(base + "/revoke", data={"token": pair["refresh_token"], "client_id": cid})
    assert gone.status_code == 200  # RFC 7009 §2.1: a public client names itself only
    assert at_mcp(base, pair["access_token"]) == 401  # the grant goes with it
    assert refresh(base, cid, pair["refresh_token"]).status_code == 400
    confidential = register(base, ["http://127.0.0.1:43997/cb"], auth="client_secret_post").json()[
        "client_id"
    ]
    assert (
        httpx.post(base + "/revoke", data={"token": "x", "client_id": confidential}).status_code
        == 401
    )  # a confidential client still authenticates

    # ---------------------------------------------------------------- audience (RFC 8707)
    code, verifier = consent(base, cid, ["memory.read"], resource=base + "/v1")
    for_api = exchange(base, cid, code, verifier, resource=base + "/v1").json()["access_token"]
    assert at_v1(base, for_api) == 200 and at_mcp(base, for_api) == 401
    code, verifier = consent(base, cid, ["memory.read"], resource=base + "/mcp")
    for_mcp = exchange(base, cid, code, verifier).json()["access_token"]
    assert at_mcp(base, for_mcp) == 200 and at_v1(base, for_mcp) == 401
    code, verifier = consent(base, cid, ["memory.read"])  # no resource named: /mcp, advertised
    assert at_v1(base, exchange(base, cid, code, verifier).json()["access_token"]) == 401

    # a grant made before tokens carried a resource: its next refresh binds it to /mcp
    store = OAuthStore(db)
    legacy_client = store.get_client(cid)
    assert legacy_client is not None
    _, legacy = store.issue(legacy_client, ["memory.read"], None)
    assert legacy is not None
    renewed = refresh(base, cid, legacy.token).json()["access_token"]
    assert at_mcp(base, renewed) == 200 and at_v1(base, renewed) == 401

    # ---------------------------------------------------------------- an unknown client
    unknown = httpx.get(base + "/authorize?" + urlencode(q | {"client_id": "gone-client"}))
    assert unknown.status_code == 400 and "location" not in unknown.headers
    assert "register again" in unknown.text and "claude mcp" in unknown.text
    at_token = refresh(base, "gone-client", "pmem_x")
    assert at_token.status_code == 401 and at_token.json()["error"] == "invalid_client"


def test_redirect_uris_strict_editors_and_partial_registration(server: dict[str, Any]) -> None:
    base = server["base"]
    probes = {
        "http://evil.example:x@127.0.0.1:5000/cb": "userinfo",
        "http://127.0.0.1:5000/cb#frag": "fragment",
        "HTTP://127.0.0.1:5000/cb": "scheme missing or not lower case",
        "http://127.0.0.1:99999/cb": "invalid port",
        "http://127.0.0.1.nip.io:5000/cb": "http only on a loopback host",
        "https://evil.example/cb": "https URI not known to this server",
        "javascript://127.0.0.1/%0aalert(1)": "scheme not allowed",
        "cursor://anysphere.cursor-retrieval:99/cb": "port on an editor URI",
        "http://127.0.0.1:5000/c b": "space, control character or backslash",
    }
    for uri, why in probes.items():
        assert redirect_problem(uri) == why, uri
    editors = [
        "cursor://anysphere.cursor-retrieval/oauth/user-pmem/callback",
        "vscode://vscode.github-authentication/did-authenticate",
        "https://vscode.dev/redirect",
        "http://127.0.0.1:33418/",
        "http://localhost:6274/oauth/callback",
        "http://[::1]:8080/cb",
    ]
    for uri in editors:
        assert redirect_problem(uri) is None, uri
    # a registration keeps what passes and names what it refused
    mixed = register(base, [*editors[:3], *probes])
    assert mixed.status_code == 201, mixed.text
    body = mixed.json()
    assert body["redirect_uris"] == editors[:3]
    assert {r["redirect_uri"]: r["reason"] for r in body["refused_redirect_uris"]} == probes
    none_pass = register(base, list(probes)[:2])
    assert none_pass.status_code == 400 and none_pass.json()["error"] == "invalid_redirect_uri"
    assert len(none_pass.json()["refused_redirect_uris"]) == 2
    # at /authorize: exact match for editor URIs, a loopback port may vary, userinfo never
    cid = body["client_id"]
    assert match_redirect(editors[0], editors[:3]) == editors[0]
    assert match_redirect(editors[0] + "x", editors[:3]) is None
    assert match_redirect("https://vscode.dev/redirect/", editors[:3]) is None
    loop = ["http://127.0.0.1:5000/cb"]
    assert match_redirect("http://127.0.0.1:6000/cb", loop) == "http://127.0.0.1:6000/cb"
    assert match_redirect("http://evil.example:x@127.0.0.1:6000/cb", loop) is None
    assert match_redirect("http://127.0.0.1:6000/cb#x", loop) is None
    _, challenge = pkce()
    q = {
        "client_id": cid,
        "response_type": "code",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "redirect_uri": editors[0],
        "scope": "memory.read",
    }
    page = httpx.get(base + "/authorize?" + urlencode(q))
    assert page.status_code == 200 and "anysphere.cursor-retrieval" in page.text
    assert "form-action 'self' cursor:" in page.headers["content-security-policy"]
    form = parse_form(page.text)
    approved = httpx.post(
        base + "/authorize",
        data=form_data(
            [
                *form.hidden.items(),
                ("passphrase", PASSPHRASE),
                ("decision", "approve"),
                ("grant", "memory.read"),
            ]
        ),
    )
    assert approved.status_code == 302 and approved.headers["location"].startswith(editors[0])
    # the consent page shows the host, never what stands before an @
    loop_cid = register(base, ["http://127.0.0.1:5000/cb"]).json()["client_id"]
    shown = httpx.get(
        base
        + "/authorize?"
        + urlencode(
            q | {"client_id": loop_cid, "redirect_uri": "http://evil.example:x@127.0.0.1:5000/cb"}
        )
    )
    assert shown.status_code == 400 and "evil.example" not in shown.text


def test_least_privilege_consent_and_step_up(server: dict[str, Any]) -> None:
    """Consent ticks read and propose only; a write with a read-only grant is answered with the
    step-up challenge; the SDK's client asks again, the owner ticks write, and the write goes."""
    base = server["base"]
    storage = Memory()
    grants = [["memory.read"], ["memory.read", "memory.write"]]

    class Rounds(Browser):
        async def redirect(self, url: str) -> None:
            self.grant = grants[len(self.pages)]
            await super().redirect(url)

    browser = Rounds(base, [])
    auth = provider(base, "Step Up", "memory.read memory.propose memory.write", browser, storage)
    challenges: list[str] = []

    async def body(s: ClientSession) -> dict[str, Any]:
        listed = {t.name for t in (await s.list_tools()).tools}
        assert "commit_memory" not in listed
        token = storage.tokens.access_token if storage.tokens else ""
        beyond = httpx.post(
            base + "/mcp",
            headers=ACCEPT
            | {"Authorization": f"Bearer {token}", "MCP-Protocol-Version": "2025-11-25"},
            json={
                "jsonrpc": "2.0",
                "id": 9,
                "method": "tools/call",
                "params": {"name": "add_marker", "arguments": {"text": "step-up marker"}},
            },
        )
        assert beyond.status_code == 403
        challenges.append(beyond.headers["www-authenticate"])
        # a client that refreshes before it re-authorizes (the TypeScript SDK) is refused, so it
        # goes to consent; nothing is revoked: the read grant still reads
        assert storage.tokens is not None and storage.client is not None
        again = httpx.post(
            base + "/token",
            data={
                "grant_type": "refresh_token",
                "refresh_token": storage.tokens.refresh_token or "",
                "client_id": storage.client.client_id or "",
                "client_secret": storage.client.client_secret or "",
            },
        )
        assert again.status_code == 400 and "authorize again" in again.json()["error_description"]
        assert not (await s.call_tool("search_memory", {"query": "x"})).is_error
        # the SDK's own client: on the 403 it starts a new authorization with that scope
        result = await s.call_tool("add_marker", {"text": "step-up marker"})
        return {"result": text_of(result), "listed": listed}

    out = anyio.run(mcp_session, base, auth, body)
    first = parse_form(browser.pages[0])
    # least privilege: read and propose ticked; write (and whatever else was asked) not
    assert {s for s, ticked in first.boxes.items() if ticked} == {"memory.read", "memory.propose"}
    assert "memory.write" in first.boxes
    assert 'error="insufficient_scope"' in challenges[0]
    assert 'scope="memory.read memory.write"' in challenges[0]  # granted + needed (RFC 6750)
    assert "resource_metadata=" in challenges[0]
    assert len(browser.pages) == 2  # a second consent, not a silent refresh
    second = parse_form(browser.pages[1])
    # the SDK asks for what it asked before and the challenge (SEP-2350); write is offered
    assert {"memory.read", "memory.write"} <= set(second.boxes)
    assert {s for s, ticked in second.boxes.items() if ticked} == {"memory.read", "memory.propose"}
    assert storage.tokens is not None
    assert set((storage.tokens.scope or "").split()) == {"memory.read", "memory.write"}
    assert "error" not in out["result"].lower(), out["result"]
