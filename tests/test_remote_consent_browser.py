"""The consent page in a real browser (issue 14, point 3): Debian's Chromium, headless, driven by
Playwright with JavaScript turned off. The owner reads the page, unticks a permission, types the
passphrase and approves; the client gets a code whose token carries only what was ticked. The
screenshot is kept as a test artefact (and in PMEM_SHOTS_DIR when that is set)."""

from __future__ import annotations

import base64
import hashlib
import os
import secrets
import shutil
from pathlib import Path
from urllib.parse import parse_qs, urlencode, urlsplit

import httpx
import pytest

from mcp_server.http import create_app
from memory_api.server import run_app_in_thread
from store.oauth import OAuthStore
from tests.conftest import free_port

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PASSPHRASE = "owner passphrase for the browser test"
REDIRECT = "http://127.0.0.1:45999/callback"


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


def test_consent_page_in_headless_chromium(db, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from playwright.sync_api import sync_playwright

    assert Path(CHROMIUM).exists(), "install Debian's chromium (make browser)"
    store = OAuthStore(db)
    store.set_owner_password(PASSPHRASE)
    client = store.register_client(
        "3f1c9e2a-browser",
        {
            "client_name": "Claude Code",
            "redirect_uris": [REDIRECT],
            "grant_types": ["authorization_code", "refresh_token"],
            "response_types": ["code"],
            "token_endpoint_auth_method": "none",
        },
    )
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = run_app_in_thread(create_app(db, issuer=base), port=port)
    verifier = secrets.token_urlsafe(48)
    challenge = (
        base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).decode().rstrip("=")
    )
    query = {
        "client_id": client.client_id,
        "redirect_uri": REDIRECT,
        "response_type": "code",
        "code_challenge": challenge,
        "code_challenge_method": "S256",
        "state": "st-123",
        "scope": "memory.read memory.propose memory.write",
        "resource": base + "/mcp",
    }
    landed: list[str] = []
    shot = tmp_path / "consent.png"
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            context = browser.new_context(
                java_script_enabled=False, viewport={"width": 900, "height": 900}
            )
            page = context.new_page()
            # the client's loopback callback: answered here, its URL kept
            page.route(
                "http://127.0.0.1:45999/**",
                lambda route: (landed.append(route.request.url), route.fulfill(body="done")),
            )
            response = page.goto(base + "/authorize?" + urlencode(query))
            assert response is not None and response.status == 200
            assert page.locator("script").count() == 0
            body = page.inner_text("body")
            assert "Claude Code" in body and "127.0.0.1:45999" in body and "Warning" in body
            boxes = page.locator("input[type=checkbox]")
            # least privilege: read and propose ticked, write offered unticked with its line
            assert boxes.count() == 3
            assert [boxes.nth(i).is_checked() for i in range(3)] == [True, True, False]
            assert "Suggest new memories" in body and "Read your memories" in body
            assert "Write memories without asking you first" in body
            page.screenshot(path=str(shot), full_page=True)
            page.uncheck("input[value='memory.propose']")
            page.fill("input[name=passphrase]", PASSPHRASE)
            page.click("button[value=approve]")
            page.wait_for_url("http://127.0.0.1:45999/**")
            browser.close()
        assert shot.stat().st_size > 5000
        if os.environ.get("PMEM_SHOTS_DIR"):
            shutil.copy(shot, Path(os.environ["PMEM_SHOTS_DIR"]) / "consent.png")
        got = parse_qs(urlsplit(landed[-1]).query)
        assert got["state"] == ["st-123"] and got["iss"] == [base]
        token = httpx.post(
            base + "/token",
            data={
                "grant_type": "authorization_code",
                "code": got["code"][0],
                "client_id": client.client_id,
                "redirect_uri": REDIRECT,
                "code_verifier": verifier,
            },
        )
        assert token.status_code == 200, token.text
        assert token.json()["scope"] == "memory.read"  # what the owner left ticked
    finally:
        server.stop()


def test_consent_refuses_a_wrong_passphrase_over_plain_http(db) -> None:  # type: ignore[no-untyped-def]
    store = OAuthStore(db)
    store.set_owner_password(PASSPHRASE)
    client = store.register_client(
        "9a9a-plain", {"client_name": "Plain", "redirect_uris": [REDIRECT]}
    )
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    server = run_app_in_thread(create_app(db, issuer=base), port=port)
    try:
        for n, wrong in enumerate(["", "not the passphrase"], 1):
            data = {
                "client_id": client.client_id,
                "redirect_uri": REDIRECT,
                "response_type": "code",
                "code_challenge": "x" * 43,
                "code_challenge_method": "S256",
                "scope": "memory.read",
                "grant": "memory.read",
                "passphrase": wrong,
                "decision": "approve",
            }
            r = httpx.post(base + "/authorize", data=data)
            assert (
                r.status_code == 401
                and "Wrong passphrase" in r.text
                and "location" not in r.headers
            )
            assert store.failures(900)[0] == n
    finally:
        server.stop()
