"""The remote memory server end to end (issue 14): `pmem serve --http` on a real loopback socket,
driven by the `mcp` SDK's own OAuth client (`OAuthClientProvider`; its redirect handler fills and
posts the consent form like a plain HTTP client would).

discovery → DCR → PKCE → consent → token → tools/list (filtered by scope) → load_context →
propose → commit → a second client's search sees the commit; refresh rotation; a replay inside
the grace window works, outside it revokes the family; PKCE mismatch, unknown redirect, expired
access token, revoked client all refused; 403 insufficient_scope; GET /public shows only what
was published; and every log line the server wrote in the whole session is scanned for tokens,
codes, secrets, query strings, tool arguments, memory text and Authorization / Referer values.
"""

from __future__ import annotations

import base64
import hashlib
import logging
import os
import secrets
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import anyio
import httpx
import httpx2
import pytest
from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)
from typer.testing import CliRunner

from core.models import Conversation
from importers import iter_source
from mcp_server.http import TOOL_SCOPES, tool_scopes, tool_visible
from mcp_server.oauth import match_redirect
from store.ledger import Ledger
from store.oauth import OAuthStore
from store.tokens import SCOPES, TokenStore
from tests.conftest import PROJECT, free_port

DEMO = PROJECT / "examples" / "demo" / "conversations.json"
DB_MESSAGE = "chatgpt:c9682f7b-30c1-5d1f-accf-43a21ad090da:aaa2fb37-abc8-55f5-8638-1cdd019722c1"
PASSPHRASE = "correct horse battery staple 42"
READ_TOOLS = {
    "load_context",
    "search_memory",
    "get_memory",
    "recall",
    "memory_history",
    "get_profile",
    "get_month_summary",
    "current_state",
    "related_memories",
}


@pytest.fixture(autouse=True)
def cheap_argon2(monkeypatch: pytest.MonkeyPatch) -> None:
    """Argon2id at its cheapest parameters: the default costs seconds per hash on a loaded
    machine, and what is tested here is the flow, not the work factor."""
    import argon2

    import store.oauth

    monkeypatch.setattr(
        store.oauth,
        "PASSWORD_HASHER",
        argon2.PasswordHasher.from_parameters(argon2.profiles.CHEAPEST),
    )


class FormParser(HTMLParser):
    """The consent form as a plain client sees it: hidden fields, checkboxes, buttons."""

    def __init__(self) -> None:
        super().__init__()
        self.action = ""
        self.hidden: dict[str, str] = {}
        self.boxes: dict[str, bool] = {}
        self.buttons: list[tuple[str, str]] = []
        self.password = False
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = {k: v or "" for k, v in attrs}
        if tag == "form":
            self.action = a.get("action", "")
        elif tag == "input" and a.get("type") == "hidden":
            self.hidden[a["name"]] = a.get("value", "")
        elif tag == "input" and a.get("type") == "checkbox":
            self.boxes[a["value"]] = "checked" in a
        elif tag == "input" and a.get("type") == "password":
            self.password = True
        elif tag == "button" and a.get("type") == "submit":
            self.buttons.append((a.get("name", ""), a.get("value", "")))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def form_data(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """Form pairs (a name may repeat, like the grant checkboxes) as httpx takes them."""
    out: dict[str, Any] = {}
    for k, v in pairs:
        out[k] = [*out[k], v] if isinstance(out.get(k), list) else ([out[k], v] if k in out else v)
    return out


def parse_form(html: str) -> FormParser:
    p = FormParser()
    p.feed(html)
    return p


class Memory:
    """TokenStorage for the SDK client, in memory."""

    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


class Browser:
    """Fills the consent form over plain HTTP: GET the page, POST it with the passphrase and the
    ticked scopes, read the code from the redirect."""

    def __init__(self, base: str, grant: list[str], passphrase: str = PASSPHRASE) -> None:
        self.base = base
        self.grant = grant
        self.passphrase = passphrase
        self.result: AuthorizationCodeResult | None = None
        self.pages: list[str] = []
        self.secrets: list[str] = []

    async def redirect(self, url: str) -> None:
        async with httpx.AsyncClient() as http:
            page = await http.get(url, headers={"Referer": "https://referer.example/REFERERCANARY"})
            assert page.status_code == 200, page.text
            assert page.headers["content-type"].startswith("text/html")
            self.pages.append(page.text)
            form = parse_form(page.text)
            assert (
                form.password
                and ("decision", "approve") in form.buttons
                and ("decision", "deny") in form.buttons
            )
            data = [*form.hidden.items(), ("passphrase", self.passphrase), ("decision", "approve")]
            data += [("grant", s) for s in self.grant]
            answer = await http.post(
                self.base + form.action, data=form_data(data), follow_redirects=False
            )
        assert answer.status_code == 302, answer.text
        q = parse_qs(urlsplit(answer.headers["location"]).query)
        self.secrets.append(q["code"][0])
        self.result = AuthorizationCodeResult(
            code=q["code"][0], state=q["state"][0], iss=q["iss"][0]
        )

    async def callback(self) -> AuthorizationCodeResult:
        assert self.result is not None
        return self.result


def provider(
    base: str, name: str, scope: str, browser: Browser, storage: Memory, port: int = 43111
) -> OAuthClientProvider:
    meta = OAuthClientMetadata(
        client_name=name,
        redirect_uris=[f"http://127.0.0.1:{port}/callback"],  # type: ignore[list-item]
        grant_types=["authorization_code", "refresh_token"],
        response_types=["code"],
        scope=scope,
        token_endpoint_auth_method="client_secret_post",
    )
    return OAuthClientProvider(base + "/mcp", meta, storage, browser.redirect, browser.callback)


async def mcp_session(base: str, auth: OAuthClientProvider, body):  # type: ignore[no-untyped-def]
    async with (
        httpx2.AsyncClient(auth=auth, timeout=30) as http,
        streamable_http_client(base + "/mcp", http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        return await body(session)


def text_of(result: Any) -> str:
    return result.content[0].text


def pmem(*args: str) -> Any:
    from cli.main import app

    return CliRunner().invoke(app, list(args))


def pkce() -> tuple[str, str]:
    verifier = secrets.token_urlsafe(48)
    challenge = (
        base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    )
    return verifier, challenge


class Lines(logging.Handler):
    """Every log record of the process, formatted: what a log file of the session would hold."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.lines: list[str] = []
        self.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.extend(self.format(record).splitlines())


@pytest.fixture
def remote(pmem_env: dict[str, str], db, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """`pmem serve --http --log-level debug` on a free loopback port: the real command, with
    uvicorn run in a thread (a subprocess costs 20-40 s of imports on a loaded machine). Every
    log record of the session is collected."""
    import core.settings
    import memory_api.server
    from cli.main import app
    from memory_api.server import run_app_in_thread

    ledger = Ledger(db)
    imp = ledger.start_import("chatgpt", str(DEMO))
    for conv in iter_source("chatgpt", DEMO):
        assert isinstance(conv, Conversation)
        ledger.upsert(conv, imp)
    OAuthStore(db).set_owner_password(PASSPHRASE)
    for k, v in {
        "PMEM_EMBEDDER": "none",
        "PMEM_TZ": "UTC",
        "PMEM_REFRESH_GRACE_SECONDS": "30",
    }.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(core.settings, "_working_dir_dotenv", True)
    running: list[Any] = []

    def in_thread(app_: Any, *, host: str, port: int, log_level: str) -> None:
        assert log_level == "debug"
        running.append(run_app_in_thread(app_, host=host, port=port, log_level=log_level))

    monkeypatch.setattr(memory_api.server, "run_app_forever", in_thread)
    lines = Lines()
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(lines)
    port = free_port()
    try:
        result = CliRunner().invoke(
            app, ["serve", "--http", "--port", str(port), "--log-level", "debug"]
        )
        assert result.exit_code == 0, result.output
        assert root.level == logging.DEBUG
        yield {
            "base": f"http://127.0.0.1:{port}",
            "db": db,
            "lines": lines,
            "env": dict(os.environ),
        }
    finally:
        for server in running:
            server.stop()
        root.removeHandler(lines)
        root.setLevel(old_level)


def test_two_clients_share_one_memory_through_oauth(remote: dict[str, Any]) -> None:  # noqa: PLR0915
    base, db = remote["base"], remote["db"]
    canaries: list[str] = [PASSPHRASE, "REFERERCANARY"]

    # ---------------------------------------------------------------- discovery documents
    unauth = httpx.post(base + "/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    assert unauth.status_code == 401
    assert (
        f'resource_metadata="{base}/.well-known/oauth-protected-resource"'
        in unauth.headers["www-authenticate"]
    )
    prm = httpx.get(base + "/.well-known/oauth-protected-resource").json()
    assert prm["resource"] == base + "/mcp" and prm["authorization_servers"] == [base]
    asm = httpx.get(base + "/.well-known/oauth-authorization-server").json()
    assert asm["issuer"] == base and asm["registration_endpoint"] == base + "/register"
    assert asm["code_challenge_methods_supported"] == ["S256"]
    assert asm["authorization_response_iss_parameter_supported"] is True

    # ---------------------------------------------------------------- client A: read, propose, write
    a_store, a_browser = Memory(), Browser(base, ["memory.read", "memory.propose", "memory.write"])
    a_auth = provider(
        base, "Claude Test", "memory.read memory.propose memory.write", a_browser, a_store
    )
    title = "家計簿アプリのデータベース選定 TITLECANARY"
    stated = "ユーザーは毎晩 pg_dump でバックアップすると言った STATEDCANARY"
    canaries += ["TITLECANARY", "STATEDCANARY", "PROPOSECANARY", "QUERYCANARY"]

    async def a_body(s: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {"tools": {t.name for t in (await s.list_tools()).tools}}
        out["context"] = text_of(await s.call_tool("load_context", {}))
        out["proposed"] = text_of(
            await s.call_tool(
                "propose_memory",
                {"title": "案 PROPOSECANARY", "canonical_summary": "提案だけ PROPOSECANARY"},
            )
        )
        out["commit"] = text_of(
            await s.call_tool(
                "commit_memory",
                {
                    "title": title,
                    "kind": "decision",
                    "canonical_summary": "PostgreSQL を選んだ。JSONB で明細を保存できるから。",
                    "index_summary": "家計簿アプリに PostgreSQL を採用",
                    "evidence": [
                        {"source_key": DB_MESSAGE, "text": "データベースは PostgreSQL にします"}
                    ],
                    "stated_facts": [stated],
                },
            )
        )
        out["bad_evidence"] = await s.call_tool(
            "commit_memory",
            {
                "title": "作り話",
                "kind": "other",
                "canonical_summary": "x",
                "index_summary": "x",
                "evidence": [{"source_key": DB_MESSAGE, "text": "ledger にない文 EVIDENCECANARY"}],
            },
        )
        return out

    a = anyio.run(mcp_session, base, a_auth, a_body)
    canaries.append("EVIDENCECANARY")
    assert a["tools"] >= READ_TOOLS | {"propose_memory", "commit_memory"}
    assert "recorded for review" in a["proposed"]
    assert a["commit"].startswith("created: memory ")
    assert (
        a["bad_evidence"].is_error and "refused: not-verbatim" in a["bad_evidence"].content[0].text
    )
    memory_id = a["commit"].split("memory ")[1].split(" ")[0]
    assert a_store.tokens is not None and a_store.client is not None
    a_client = a_store.client
    assert a_store.tokens.expires_in is not None and a_store.tokens.expires_in <= 900
    assert set((a_store.tokens.scope or "").split()) == {
        "memory.read",
        "memory.propose",
        "memory.write",
    }
    with db.connection() as conn:
        rev = conn.execute(
            "SELECT client FROM memory_revisions WHERE memory_id = %s", (memory_id,)
        ).fetchone()
        facts = conn.execute(
            "SELECT stated_facts FROM memories WHERE id = %s", (memory_id,)
        ).fetchone()
        prop_client = conn.execute(
            "SELECT client FROM proposals WHERE action = 'create' AND status = 'pending'"
        ).fetchone()
    label = f"claude-test:{a_client.client_id.replace('-', '')[:8]}"
    assert rev[0] == label and prop_client[0] == label  # the token's client, not "mcp"
    assert facts[0] == [stated]  # a web client's own statement: a stated fact, not evidence

    # ---------------------------------------------------------------- client B: read only, sees A's commit
    b_store, b_browser = (
        Memory(),
        Browser(base, ["memory.read"]),
    )  # asks for more, owner ticks read only
    b_auth = provider(
        base, "ChatGPT Test", "memory.read memory.write", b_browser, b_store, port=43112
    )
    b_auth.context.client_metadata.scope = (
        None  # like Codex: the SDK then asks for scopes_supported
    )

    async def b_body(s: ClientSession) -> dict[str, Any]:
        return {
            "tools": {t.name for t in (await s.list_tools()).tools},
            "search": text_of(
                await s.call_tool("search_memory", {"query": "データベース選定 QUERYCANARY"})
            ),
            "search2": text_of(
                await s.call_tool("search_memory", {"query": "家計簿 データベース"})
            ),
        }

    b = anyio.run(mcp_session, base, b_auth, b_body)
    assert b["tools"] == READ_TOOLS  # tools/list filtered by the granted scope
    assert memory_id in b["search2"]
    assert b_store.tokens is not None and b_store.tokens.scope == "memory.read"
    b_page = parse_form(b_browser.pages[0])
    # each asked scope a checkbox; only read and propose ticked beforehand (least privilege)
    assert b_page.boxes == {s: s in ("memory.read", "memory.propose") for s in SCOPES}
    page_text = " ".join(" ".join(b_page.text).split())
    assert "Write memories without asking you first" in page_text
    assert "Ask to delete memories" in page_text and "Ask to publish memories" in page_text
    assert "ChatGPT Test" in "".join(b_page.text) and "127.0.0.1:43112" in "".join(b_page.text)
    assert "loopback" in "".join(b_page.text)  # the loopback warning
    b_access = b_store.tokens.access_token

    # a call beyond the grant: 403 insufficient_scope before it reaches a tool
    mcp_headers = {
        "Authorization": f"Bearer {b_access}",
        "Accept": "application/json, text/event-stream",
        "MCP-Protocol-Version": "2025-11-25",
    }
    beyond = httpx.post(
        base + "/mcp",
        headers=mcp_headers,
        json={
            "jsonrpc": "2.0",
            "id": 7,
            "method": "tools/call",
            "params": {
                "name": "commit_memory",
                "arguments": {
                    "title": "t",
                    "kind": "k",
                    "canonical_summary": "s",
                    "index_summary": "s",
                },
            },
        },
    )
    assert beyond.status_code == 403 and beyond.json()["error"] == "insufficient_scope"
    assert 'error="insufficient_scope"' in beyond.headers["www-authenticate"]
    # step-up (RFC 6750 §3.1): the grant's scope and the missing one, so asking again keeps read
    assert 'scope="memory.read memory.write"' in beyond.headers["www-authenticate"]
    # the token is bound to /mcp (RFC 8707): the memory API under /v1 does not take it
    v1 = httpx.post(
        base + "/v1/search",
        headers={"Authorization": f"Bearer {b_access}"},
        json={"query": "家計簿"},
    )
    assert v1.status_code == 401

    # ---------------------------------------------------------------- refresh rotation and replay
    def refresh(token: str, store: Memory) -> httpx.Response:
        assert store.client is not None
        return httpx.post(
            base + "/token",
            data={
                "grant_type": "refresh_token",
                "refresh_token": token,
                "client_id": store.client.client_id,
                "client_secret": store.client.client_secret or "",
            },
        )

    r0 = a_store.tokens.refresh_token
    assert r0 is not None
    first = refresh(r0, a_store)
    assert first.status_code == 200, first.text
    r1 = first.json()["refresh_token"]
    assert r1 != r0 and first.json()["expires_in"] <= 900
    assert set(first.json()["scope"].split()) == {"memory.read", "memory.propose", "memory.write"}
    replay = refresh(r0, a_store)  # a parallel refresh / lost answer: inside the grace window
    assert replay.status_code == 200, replay.text
    r1b = replay.json()["refresh_token"]
    # idempotent: the same successor, not a second chain
    assert r1b == r1 and replay.json()["access_token"] == first.json()["access_token"]
    second = refresh(r1, a_store)
    assert second.status_code == 200
    r2, a2_access = second.json()["refresh_token"], second.json()["access_token"]
    mcp_init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}

    def at_mcp(access: str) -> int:
        return httpx.post(
            base + "/mcp", json=mcp_init, headers=accept | {"Authorization": f"Bearer {access}"}
        ).status_code

    assert at_mcp(a2_access) == 200
    # r1 was used: a replay of r0 now (still inside the window) revokes the family
    late = refresh(r0, a_store)
    assert late.status_code == 400 and late.json()["error"] == "invalid_grant"
    assert at_mcp(a2_access) == 401 and refresh(r2, a_store).status_code == 400
    with db.connection() as conn:  # r0 was rotated an hour ago: outside the window
        conn.execute(
            "UPDATE auth_tokens SET rotated_at = now() - interval '1 hour' WHERE token_hash = %s",
            (hashlib.sha256(r0.encode()).digest(),),
        )
        conn.commit()
    stale = refresh(r0, a_store)
    assert stale.status_code == 400 and stale.json()["error"] == "invalid_grant"
    for later in (r1b, r2):  # the whole family is revoked
        assert refresh(later, a_store).status_code == 400
    assert (
        httpx.post(
            base + "/v1/search",
            headers={"Authorization": f"Bearer {a2_access}"},
            json={"query": "x"},
        ).status_code
        == 401
    )

    # ---------------------------------------------------------------- manual flows: PKCE, redirects, expiry
    reg = httpx.post(
        base + "/register",
        json={
            "client_name": "Codex Test",
            "redirect_uris": ["http://127.0.0.1:1455/callback"],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        },
    ).json()
    cid = reg["client_id"]
    evil = httpx.post(
        base + "/register", json={"client_name": "x", "redirect_uris": ["https://evil.example/cb"]}
    )
    assert evil.status_code == 400 and evil.json()["error"] == "invalid_redirect_uri"
    verifier, challenge = pkce()
    q = {
        "client_id": cid,
        "response_type": "code",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "STATECANARY",
        "scope": "memory.read",
        "resource": base + "/mcp",
    }
    canaries += ["STATECANARY", challenge, verifier]
    unknown = httpx.get(
        base + "/authorize?" + urlencode(q | {"redirect_uri": "https://evil.example/cb"})
    )
    assert unknown.status_code == 400 and "location" not in unknown.headers
    plain = httpx.get(
        base
        + "/authorize?"
        + urlencode(
            q | {"redirect_uri": "http://127.0.0.1:9/callback", "code_challenge_method": "plain"}
        )
    )
    assert plain.status_code == 302 and "error=invalid_request" in plain.headers["location"]
    assert f"iss={base}".replace(":", "%3A").replace("/", "%2F") in plain.headers["location"]
    wrong_target = httpx.get(
        base
        + "/authorize?"
        + urlencode(
            q
            | {
                "redirect_uri": "http://127.0.0.1:9/callback",
                "resource": "https://other.example/mcp",
            }
        )
    )
    assert (
        wrong_target.status_code == 302
        and "error=invalid_target" in wrong_target.headers["location"]
    )
    other_port = "http://127.0.0.1:50999/callback"  # loopback: any port (RFC 8252 §7.3)
    page = httpx.get(base + "/authorize?" + urlencode(q | {"redirect_uri": other_port}))
    assert page.status_code == 200
    form = parse_form(page.text)
    post = httpx.post(
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
    assert post.status_code == 302
    loc = urlsplit(post.headers["location"])
    assert loc.netloc == "127.0.0.1:50999"
    got = parse_qs(loc.query)
    assert got["iss"] == [base] and got["state"] == ["STATECANARY"]
    code = got["code"][0]
    canaries.append(code)
    token_form = {
        "grant_type": "authorization_code",
        "code": code,
        "client_id": cid,
        "redirect_uri": other_port,
    }
    mismatch = httpx.post(base + "/token", data=token_form | {"code_verifier": pkce()[0]})
    assert mismatch.status_code == 400 and mismatch.json()["error"] == "invalid_grant"
    foreign = httpx.post(
        base + "/token",
        data=token_form | {"code_verifier": verifier, "resource": "https://other.example/mcp"},
    )
    assert foreign.status_code == 400 and foreign.json()["error"] == "invalid_target"  # RFC 8707
    ok = httpx.post(
        base + "/token", data=token_form | {"code_verifier": verifier, "resource": base + "/mcp"}
    )
    assert ok.status_code == 200, ok.text
    # a second exchange of the code: tests/test_oauth_letter.py (it revokes these tokens)
    c_access, c_refresh = ok.json()["access_token"], ok.json()["refresh_token"]
    c_headers = mcp_headers | {"Authorization": f"Bearer {c_access}"}
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    assert httpx.post(base + "/mcp", headers=c_headers, json=init).status_code == 200
    with db.connection() as conn:
        conn.execute(
            "UPDATE auth_tokens SET expires_at = now() - interval '1 second' WHERE token_hash = %s",
            (hashlib.sha256(c_access.encode()).digest(),),
        )
        conn.commit()
    expired = httpx.post(base + "/mcp", headers=c_headers, json=init)
    assert (
        expired.status_code == 401
        and 'error="invalid_token"' in expired.headers["www-authenticate"]
    )
    with db.connection() as conn:
        lifetimes = dict(
            conn.execute(
                """SELECT kind, extract(epoch FROM expires_at - created_at) FROM auth_tokens
               WHERE token_hash = ANY(%s)""",
                ([hashlib.sha256(t.encode()).digest() for t in (c_access, c_refresh)],),
            ).fetchall()
        )
    assert lifetimes["access"] <= 900 and 364 * 86400 < lifetimes["refresh"] <= 365 * 86400 + 5
    with db.connection() as conn:  # a refresh token unused for a year has lapsed
        conn.execute(
            "UPDATE auth_tokens SET expires_at = now() - interval '1 second' WHERE token_hash = %s",
            (hashlib.sha256(c_refresh.encode()).digest(),),
        )
        conn.commit()
    lapsed = httpx.post(
        base + "/token",
        data={"grant_type": "refresh_token", "refresh_token": c_refresh, "client_id": cid},
    )
    assert lapsed.status_code == 400 and lapsed.json()["error"] == "invalid_grant"
    denied = httpx.post(
        base + "/authorize", data=form_data([*form.hidden.items(), ("decision", "deny")])
    )
    assert denied.status_code == 302 and "error=access_denied" in denied.headers["location"]

    # ---------------------------------------------------------------- the owner revokes a client
    out = pmem("auth", "revoke", cid, "--json")
    assert out.exit_code == 0, out.output
    assert '"revoked_clients": ["' + cid in out.stdout
    assert (
        httpx.post(
            base + "/token",
            data={"grant_type": "refresh_token", "refresh_token": c_refresh, "client_id": cid},
        ).status_code
        == 401
    )
    assert (
        httpx.get(base + "/authorize?" + urlencode(q | {"redirect_uri": other_port})).status_code
        == 400
    )
    listed = pmem("auth", "clients", "--all", "--json")
    assert listed.exit_code == 0 and cid in listed.stdout and "Claude Test" in listed.stdout

    # ---------------------------------------------------------------- the public projection
    assert httpx.get(base + "/public").json() == {"items": []}
    pub = pmem(
        "publish",
        memory_id,
        "--title",
        "公開タイトル",
        "--summary",
        "公開してよい要約",
        "--yes",
        "--json",
    )
    assert pub.exit_code == 0, pub.output
    items = httpx.get(base + "/public").json()["items"]
    assert [(i["memory_id"], i["title"], i["summary"]) for i in items] == [
        (memory_id, "公開タイトル", "公開してよい要約")
    ]
    assert "TITLECANARY" not in httpx.get(base + "/public").text  # the private title never shows

    # ---------------------------------------------------------------- consent throttle
    t_verifier, t_challenge = pkce()
    tq = {
        "client_id": b_store.client.client_id,
        "response_type": "code",
        "code_challenge": t_challenge,  # type: ignore[union-attr]
        "code_challenge_method": "S256",
        "redirect_uri": "http://127.0.0.1:43112/callback",
    }
    t_form = parse_form(httpx.get(base + "/authorize?" + urlencode(tq)).text)
    statuses = []
    for i in range(6):
        wrong = f"WRONGPASS{i}CANARY"
        canaries.append(wrong)
        r = httpx.post(
            base + "/authorize",
            data=form_data(
                [
                    *t_form.hidden.items(),
                    ("passphrase", wrong),
                    ("decision", "approve"),
                    ("grant", "memory.read"),
                ]
            ),
        )
        statuses.append(r.status_code)
    assert statuses == [401] * 5 + [429]
    assert int(r.headers["retry-after"]) >= 1
    right = httpx.post(
        base + "/authorize",
        data=form_data(
            [
                *t_form.hidden.items(),
                ("passphrase", PASSPHRASE),
                ("decision", "approve"),
                ("grant", "memory.read"),
            ]
        ),
    )
    assert right.status_code == 429  # even the right passphrase waits out the delay

    # ---------------------------------------------------------------- the log sentinel
    secrets_seen = [
        *a_browser.secrets,
        *b_browser.secrets,
        r0,
        r1,
        r1b,
        r2,
        a2_access,
        b_access,
        c_access,
        c_refresh,
        a_client.client_secret or "",
        b_store.client.client_secret or "",  # type: ignore[union-attr]
        first.json()["access_token"],
    ]
    lines = remote["lines"].lines
    assert any("consent given" in line for line in lines) and any(
        "refresh token reuse" in line for line in lines
    )
    assert any("wrong owner passphrase" in line for line in lines)
    for n, line in enumerate(lines, 1):
        low = line.lower()
        for needle in [*canaries, *(s for s in secrets_seen if s)]:
            assert needle not in line, f"log line {n} holds a secret or private text"
        for word in (
            "authorization:",
            "bearer ",
            "referer",
            "code_challenge=",
            "state=",
            "pmem_",
            "?",
        ):
            assert word not in low, f"log line {n} holds {word!r}: {line[:120]}"


def test_scope_table_covers_every_tool() -> None:
    """A new tool must be given a scope here; unknown ones need read + write both."""
    from mcp_server.server import build_server

    names = {t.name for t in anyio.run(build_server().list_tools)}
    assert names <= set(TOOL_SCOPES), (
        f"give these tools a scope in mcp_server/http.py: {names - set(TOOL_SCOPES)}"
    )
    assert tool_scopes("propose_memory", {"action": "delete"}) == ("memory.delete",)
    assert tool_scopes("propose_memory", {"action": "publish"}) == ("memory.publish",)
    assert tool_scopes("some_new_tool") == ("memory.read", "memory.write")
    assert tool_visible("propose_memory", ("memory.publish",)) and not tool_visible(
        "commit_memory", ("memory.read",)
    )


def test_redirect_matching() -> None:
    reg = ["http://127.0.0.1:1455/callback", "https://claude.ai/api/mcp/auth_callback"]
    assert match_redirect("http://127.0.0.1:6000/callback", reg) == "http://127.0.0.1:6000/callback"
    assert match_redirect("http://127.0.0.1:6000/other", reg) is None
    assert match_redirect("https://claude.ai/api/mcp/auth_callback", reg) == reg[1]
    assert (
        match_redirect("https://claude.ai:444/api/mcp/auth_callback", reg) is None
    )  # exact for https
    assert match_redirect(None, reg) is None and match_redirect(None, reg[:1]) == reg[0]


def test_public_reader_reads_only_the_public_table(db) -> None:  # type: ignore[no-untyped-def]
    """GET /public reads through a connection made as pmem_public_reader: every private table
    is refused to it."""
    import psycopg

    from store.public import PublicReader

    reader = PublicReader.for_database(db)
    assert reader.items() == []
    with reader.connect() as conn:
        assert (
            conn.execute("SELECT current_user").fetchone()["current_user"] == "pmem_public_reader"
        )  # type: ignore[index]
        for table in (
            "memories",
            "memory_revisions",
            "source_messages",
            "auth_tokens",
            "oauth_clients",
            "proposals",
        ):
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute(f"SELECT 1 FROM {table} LIMIT 1")


def test_owner_set_password(pmem_env: dict[str, str], db, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("PMEM_OWNER_PASSWORD", raising=False)
    refused = pmem("owner", "set-password", "--json")  # no terminal, no variable
    assert refused.exit_code == 1 and "PMEM_OWNER_PASSWORD" in refused.output
    monkeypatch.setenv("PMEM_OWNER_PASSWORD", "a long owner passphrase")
    done = pmem("owner", "set-password", "--json")
    assert (
        done.exit_code == 0 and done.stdout.strip().splitlines()[-1] == '{"owner_password": "set"}'
    )
    store = OAuthStore(db)
    assert store.check_owner_password("a long owner passphrase") and not store.check_owner_password(
        "a long owner"
    )
    with db.connection() as conn:
        stored = conn.execute("SELECT password_hash FROM owner_credentials").fetchone()[0]
    assert stored.startswith("$argon2id$") and "a long owner passphrase" not in stored


def test_the_backfill_commits_through_the_remote_server(
    pmem_env: dict[str, str], db, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """PMEM_MEMORY_URL + a refresh token from `pmem auth token --client backfill`: the committer
    renews its access tokens itself and keeps the rotated refresh token for its next run."""
    from core.models import CommitRequest
    from mcp_server.http import create_app
    from memory_api.client import CREDENTIAL_FILE, HttpMemoryAPI
    from memory_api.server import run_app_in_thread

    ledger = Ledger(db)
    imp = ledger.start_import("chatgpt", str(DEMO))
    for conv in iter_source("chatgpt", DEMO):
        assert isinstance(conv, Conversation)
        ledger.upsert(conv, imp)
    issued = pmem(
        "auth",
        "token",
        "--client",
        "backfill",
        "--scope",
        "memory.read",
        "--scope",
        "memory.write",
        "--json",
    )
    assert issued.exit_code == 0, issued.output
    import json

    first = json.loads(issued.stdout.strip().splitlines()[-1])
    assert first["client_id"] == "backfill" and first["scopes"] == ["memory.read", "memory.write"]
    monkeypatch.delenv("PMEM_MEMORY_TOKEN", raising=False)
    monkeypatch.setenv("PMEM_MEMORY_REFRESH_TOKEN", first["refresh_token"])
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = run_app_in_thread(create_app(db, issuer=base), port=port)
    try:
        api = HttpMemoryAPI(base + "/")
        result = api.commit(
            CommitRequest(
                kind="decision",
                title="家計簿アプリのデータベース",
                canonical_summary="PostgreSQL にした。",
                index_summary="PostgreSQL を採用",
                reason="create",
                idempotency_key="backfill-remote-1",
                evidence=[{"source_key": DB_MESSAGE, "text": "データベースは PostgreSQL にします"}],
            )
        )
        assert result.created
        state = Path(pmem_env["PMEM_DATA_DIR"]) / CREDENTIAL_FILE
        assert state.stat().st_mode & 0o777 == 0o600
        saved = json.loads(state.read_text())
        assert saved["refresh_token"] != first["refresh_token"]  # rotated, and kept
        api._http.auth.expires = 0  # type: ignore[union-attr]  # the access token lapsed: renewed
        assert any(h.id == result.memory_id for h in api.search("家計簿"))
        api.close()
        with db.connection() as conn:
            client = conn.execute(
                "SELECT client FROM memory_revisions WHERE memory_id = %s", (result.memory_id,)
            ).fetchone()[0]
            # the environment's token is long rotated: a run that replayed it would revoke all
            conn.execute(
                "UPDATE auth_tokens SET rotated_at = now() - interval '1 hour' WHERE rotated_at IS NOT NULL"
            )
            conn.commit()
        assert client == "backfill"
        later = HttpMemoryAPI(base)  # the next run: picks up the kept refresh token
        assert later.get(result.memory_id).title == "家計簿アプリのデータベース"
        later.close()
    finally:
        server.stop()


def test_a_real_backfill_through_pmem_serve_http_with_the_documented_scopes(
    remote: dict[str, Any], prefect_api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 28, item 2: `pmem backfill` (the command, its steps run plainly without Prefect's
    round trips) commits through `pmem serve --http` with a refresh token of exactly the scopes
    docs/remote.md names; one scope fewer (memory.propose, which the docs once left out) stops it
    with the 403's scope and a hint naming the command that issues the right token."""
    import json
    import re

    from core.settings import get_settings
    from flows import pipeline as pl

    doc = (PROJECT / "docs" / "remote.md").read_text(encoding="utf-8")
    line = re.search(
        r"On the server: `pmem auth token --client backfill ((?:--scope \S+ ?)+)`", doc
    )
    assert line is not None, "docs/remote.md names the backfill's token command"
    documented = re.findall(r"--scope (\S+)", line.group(1))

    def backfill(  # type: ignore[no-untyped-def]
        source: str, export_path: str, dry_run: bool = False, llm=None, embed=True, **options
    ):  # the flow's other parameters (the run's options) are the pipeline's defaults here
        p = pl.Pipeline.open(get_settings(), llm)
        try:
            return pl.run_backfill(p, source, export_path, dry_run=dry_run, embed=embed)
        finally:
            p.close()

    monkeypatch.setattr("flows.backfill.backfill", backfill)

    def token(scopes: list[str]) -> str:
        flags = [x for s in scopes for x in ("--scope", s)]
        issued = pmem("auth", "token", "--client", "backfill", *flags, "--json")
        assert issued.exit_code == 0, issued.output
        return str(json.loads(issued.stdout.strip().splitlines()[-1])["refresh_token"])

    monkeypatch.setenv("PREFECT_API_URL", prefect_api)  # the session's: no server started here
    monkeypatch.delenv("PMEM_MEMORY_TOKEN", raising=False)
    monkeypatch.setenv("PMEM_MEMORY_URL", remote["base"] + "/")
    monkeypatch.setenv("PMEM_LLM", "extractive")
    args = ("backfill", "--source", "chatgpt", "--export", str(DEMO), "--no-embed", "--json")

    monkeypatch.setenv(
        "PMEM_MEMORY_REFRESH_TOKEN", token([s for s in documented if s != "memory.propose"])
    )
    short = pmem(*args)
    out = json.loads(short.stdout.strip().splitlines()[-1])
    assert short.exit_code != 0 and out["exit_code"] == short.exit_code, short.output
    said = short.stderr + json.dumps(out, ensure_ascii=False)
    assert "memory.propose" in said and "pmem auth token --client backfill" in said, said

    monkeypatch.setenv("PMEM_MEMORY_REFRESH_TOKEN", token(documented))
    full = pmem(*args)
    assert full.exit_code == 0, full.stderr
    summary = json.loads(full.stdout.strip().splitlines()[-1])
    assert summary["status"] == "complete" and summary["commits"] > 0
    with remote["db"].connection() as conn:
        clients = {c for (c,) in conn.execute("SELECT DISTINCT client FROM memory_revisions")}
    assert clients == {"backfill"}  # every commit went through the server, as its client


def test_budget_per_client_and_bind_rule(
    pmem_env: dict[str, str], db, monkeypatch: pytest.MonkeyPatch
) -> None:  # type: ignore[no-untyped-def]
    """300 requests / 600 s per client in production; here 2: the third request of a client is
    429 with Retry-After, on /mcp and /v1 alike (one bucket), while another client goes on."""
    import mcp_server.http
    from mcp_server.http import create_app
    from mcp_server.oauth import first_party_client
    from memory_api.server import run_app_in_thread

    monkeypatch.setattr(mcp_server.http, "REGISTRATIONS", 1)
    store = OAuthStore(db)
    one, _ = store.issue(first_party_client(store, "one"), ["memory.read"], None, refresh=False)
    two, _ = store.issue(first_party_client(store, "two"), ["memory.read"], None, refresh=False)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = run_app_in_thread(create_app(db, issuer=base, budget=(2, 600.0)), port=port)
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"},
        },
    }
    headers = {"Accept": "application/json, text/event-stream"}
    try:
        codes = [
            httpx.post(
                base + "/mcp", json=init, headers=headers | {"Authorization": f"Bearer {one.token}"}
            ).status_code
            for _ in range(2)
        ]
        assert codes == [200, 200]
        over = httpx.post(
            base + "/v1/search",
            json={"query": "x"},
            headers={"Authorization": f"Bearer {one.token}"},
        )
        assert over.status_code == 429 and int(over.headers["retry-after"]) >= 1
        over_mcp = httpx.post(
            base + "/mcp", json=init, headers=headers | {"Authorization": f"Bearer {one.token}"}
        )
        assert over_mcp.status_code == 429 and int(over_mcp.headers["retry-after"]) >= 1
        # the other client goes on, here on the 2026-07-28 stateless wire: tools/list filtered too
        stateless = {
            "jsonrpc": "2.0",
            "id": 3,
            "method": "tools/list",
            "params": {
                "_meta": {
                    "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                    "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"},
                    "io.modelcontextprotocol/clientCapabilities": {},
                }
            },
        }
        other = httpx.post(
            base + "/mcp",
            json=stateless,
            headers=headers
            | {
                "Authorization": f"Bearer {two.token}",
                "MCP-Protocol-Version": "2026-07-28",
                "Mcp-Method": "tools/list",
            },
        )
        assert other.status_code == 200, other.text
        assert {t["name"] for t in other.json()["result"]["tools"]} == READ_TOOLS
        api_token = TokenStore(db).create("apiclient").token
        plain = httpx.post(
            base + "/mcp", json=init, headers=headers | {"Authorization": f"Bearer {api_token}"}
        )
        assert plain.status_code == 401  # /mcp takes OAuth access tokens only
        assert httpx.get(base + "/public", headers={"Host": "evil.example"}).status_code == 400
        dcr = {"client_name": "x", "redirect_uris": ["http://127.0.0.1:9/cb"]}
        assert httpx.post(base + "/register", json=dcr).status_code == 201
        flood = httpx.post(base + "/register", json=dcr)  # registrations are open to anyone: capped
        assert flood.status_code == 429 and int(flood.headers["retry-after"]) >= 1
    finally:
        server.stop()
    refused = pmem("serve", "--http", "--host", "0.0.0.0", "--port", str(free_port()))
    assert refused.exit_code == 1 and "--public-url" in refused.output
    listed = pmem("auth", "tokens", "--json")
    assert (
        listed.exit_code == 0
        and one.info.token_id in listed.stdout
        and one.token not in listed.stdout
    )
