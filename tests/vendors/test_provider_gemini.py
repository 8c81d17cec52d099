"""The Gemini adapter, driven through the official google-genai SDK against a local fake API."""

from __future__ import annotations

import json
import logging

import pytest

from core.errors import ConfigError, TerminalDraftError, TransientDraftError
from core.ports import Drafter
from prompts.case_record import PROMPT_VERSION, build_prompt, response_json_schema
from providers import get_drafter
from providers._retry import RetryPolicy
from providers.gemini_provider import GeminiDrafter
from tests.fakeservers import (
    OPENAI_KEY,
    PASSWORD,
    POLICY,
    TEST_API_KEY,
    FakeServer,
    Reply,
    Sleeps,
    assert_no_secret_in,
    assert_none_in_bodies,
    corpus_batch,
    gemini_error,
    gemini_response,
    records_payload,
    sample_batch,
)


def make(server: FakeServer, sleeps: Sleeps, **kw) -> GeminiDrafter:
    options = {"api_key": TEST_API_KEY, "base_url": server.url, "timeout": 2.0}
    options.update(kw)
    return GeminiDrafter("gemini-test", retry=POLICY, sleep=sleeps, **options)


def ok() -> Reply:
    return Reply(200, gemini_response(json.dumps(records_payload(), ensure_ascii=False)))


# ---------------------------------------------------------------- success


def test_success_returns_records_usage_and_provenance(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(ok())
    drafter = make(server, sleeps)
    assert isinstance(drafter, Drafter)
    out = drafter.draft(sample_batch(), [])
    assert out.model == "gemini:gemini-test"
    assert out.prompt_version == PROMPT_VERSION
    assert (out.input_tokens, out.output_tokens) == (200, 60)
    [record] = out.records
    assert record.aliases == ["データベース選定", "database choice"]
    assert sleeps.waits == []


def test_request_body_has_model_schema_and_system_instruction(
    server: FakeServer, sleeps: Sleeps
) -> None:
    server.push(ok())
    make(server, sleeps, max_output_tokens=9_000).draft(sample_batch(), [])
    [request] = server.requests
    assert request.method == "POST"
    assert request.path.endswith("/models/gemini-test:generateContent")
    assert request.headers["x-goog-api-key"] == TEST_API_KEY
    body = request.json()
    config = body["generationConfig"]
    assert config["responseMimeType"] == "application/json"
    assert config["responseJsonSchema"] == response_json_schema()
    assert config["maxOutputTokens"] == 9_000
    static, _ = build_prompt([], [])
    assert body["systemInstruction"]["parts"] == [{"text": static}]
    [content] = body["contents"]
    assert content["role"] == "user" and "chatgpt:c1:n2" in content["parts"][0]["text"]


def test_no_secret_reaches_the_request_body(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(ok())
    make(server, sleeps).draft(sample_batch(), [])
    assert_no_secret_in(server)
    text = server.requests[0].json()["contents"][0]["parts"][0]["text"]
    assert "[REDACTED:openai-api-key]" in text and "[REDACTED:password]" in text


def test_thinking_parts_are_not_the_answer(server: FakeServer, sleeps: Sleeps) -> None:
    body = gemini_response(json.dumps(records_payload()))
    body["candidates"][0]["content"]["parts"].insert(0, {"text": "let me think", "thought": True})
    body["usageMetadata"]["thoughtsTokenCount"] = 40
    server.push(Reply(200, body))
    out = make(server, sleeps).draft(sample_batch(), [])
    assert len(out.records) == 1 and out.output_tokens == 100


def test_the_secret_corpus_never_reaches_the_request_body(
    server: FakeServer, sleeps: Sleeps
) -> None:
    batch, secrets = corpus_batch()
    server.push(ok())
    make(server, sleeps).draft(batch, [])
    assert_none_in_bodies(server, secrets)
    assert server.requests[0].json()["contents"][0]["parts"][0]["text"].count("[REDACTED:") >= len(
        secrets
    )


# ---------------------------------------------------------------- transient errors and retries


def test_429_honours_retry_after_then_succeeds(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(
        Reply(429, gemini_error(429, "RESOURCE_EXHAUSTED"), headers={"retry-after": "4"}), ok()
    )
    out = make(server, sleeps).draft(sample_batch(), [])
    assert len(out.records) == 1
    assert sleeps.waits == [4.0]
    assert len(server.requests) == 2


def test_429_honours_the_retry_info_delay(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(Reply(429, gemini_error(429, "RESOURCE_EXHAUSTED", retry_delay="2.5s")), ok())
    make(server, sleeps).draft(sample_batch(), [])
    assert sleeps.waits == [2.5]


def test_retry_after_longer_than_the_cap_stops_at_once(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(Reply(429, gemini_error(429, "RESOURCE_EXHAUSTED", retry_delay="86400s")))
    with pytest.raises(TransientDraftError) as info:
        make(server, sleeps).draft(sample_batch(), [])
    assert info.value.retry_after == 86400.0
    assert sleeps.waits == [] and len(server.requests) == 1


@pytest.mark.parametrize(("status", "kind"), [(500, "INTERNAL"), (503, "UNAVAILABLE")])
def test_server_errors_are_retried(
    server: FakeServer, sleeps: Sleeps, status: int, kind: str
) -> None:
    server.push(Reply(status, gemini_error(status, kind)), ok())
    out = make(server, sleeps).draft(sample_batch(), [])
    assert len(out.records) == 1
    [wait] = sleeps.waits
    assert 0.5 <= wait <= 4.0


def test_persistent_500_gives_up_after_the_attempts(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(*[Reply(500, gemini_error(500, "INTERNAL"))] * POLICY.max_attempts)
    with pytest.raises(TransientDraftError, match=r"HTTP 500 \(INTERNAL\)"):
        make(server, sleeps).draft(sample_batch(), [])
    assert len(server.requests) == POLICY.max_attempts


def test_timeout_is_transient_and_retried(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(Reply(200, {}, delay=2.0), ok())
    out = make(server, sleeps, timeout=0.3).draft(sample_batch(), [])
    assert len(out.records) == 1 and len(server.requests) == 2


def test_timeouts_every_time_raise_transient(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(*[Reply(200, {}, delay=2.0)] * POLICY.max_attempts)
    with pytest.raises(TransientDraftError, match="timed out"):
        make(server, sleeps, timeout=0.2).draft(sample_batch(), [])


def test_connection_refused_is_transient(sleeps: Sleeps) -> None:
    with FakeServer() as gone:
        url = gone.url
    drafter = GeminiDrafter(
        "gemini-test",
        api_key=TEST_API_KEY,
        base_url=url,
        timeout=1.0,
        retry=RetryPolicy(max_attempts=2),
        sleep=sleeps,
    )
    with pytest.raises(TransientDraftError, match="connect"):
        drafter.draft(sample_batch(), [])


# ---------------------------------------------------------------- terminal errors


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "INVALID_ARGUMENT"),
        (401, "UNAUTHENTICATED"),
        (403, "PERMISSION_DENIED"),
        (404, "NOT_FOUND"),
    ],
)
def test_client_errors_are_terminal_and_not_retried(
    server: FakeServer, sleeps: Sleeps, status: int, kind: str
) -> None:
    server.push(Reply(status, gemini_error(status, kind, message=f"echo: {PASSWORD}")))
    with pytest.raises(TerminalDraftError, match=f"HTTP {status} \\({kind}\\)") as info:
        make(server, sleeps).draft(sample_batch(), [])
    assert PASSWORD not in str(info.value)
    assert len(server.requests) == 1 and sleeps.waits == []


def test_malformed_json_answer_is_terminal(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(Reply(200, gemini_response('{"records": [{"action": "create", "tit')))
    with pytest.raises(TerminalDraftError, match="schema"):
        make(server, sleeps).draft(sample_batch(), [])
    assert len(server.requests) == 1


def test_response_body_that_is_not_json_is_terminal(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(Reply(200, "<html>oops</html>"))
    with pytest.raises(TerminalDraftError):
        make(server, sleeps).draft(sample_batch(), [])
    assert len(server.requests) == 1


def test_answer_cut_at_max_tokens_is_terminal(server: FakeServer, sleeps: Sleeps) -> None:
    partial = json.dumps(records_payload())[:60]
    server.push(Reply(200, gemini_response(partial, finish_reason="MAX_TOKENS")))
    with pytest.raises(TerminalDraftError, match="token limit"):
        make(server, sleeps).draft(sample_batch(), [])
    assert len(server.requests) == 1


@pytest.mark.parametrize("reason", ["SAFETY", "RECITATION", "PROHIBITED_CONTENT"])
def test_blocked_answer_is_terminal(server: FakeServer, sleeps: Sleeps, reason: str) -> None:
    server.push(Reply(200, gemini_response(None, finish_reason=reason)))
    with pytest.raises(TerminalDraftError, match="refused"):
        make(server, sleeps).draft(sample_batch(), [])


def test_blocked_prompt_is_terminal(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(Reply(200, gemini_response(None, block_reason="SAFETY")))
    with pytest.raises(TerminalDraftError, match="blocked"):
        make(server, sleeps).draft(sample_batch(), [])


# ---------------------------------------------------------------- configuration and logs


@pytest.mark.parametrize("env", ["GEMINI_API_KEY", "GOOGLE_API_KEY"])
def test_registry_builds_the_gemini_drafter(monkeypatch: pytest.MonkeyPatch, env: str) -> None:
    monkeypatch.setenv(env, TEST_API_KEY)
    drafter = get_drafter("gemini:gemini-2.5-flash")
    assert isinstance(drafter, GeminiDrafter) and drafter.model == "gemini:gemini-2.5-flash"


def test_missing_key_is_a_config_error_naming_the_variable() -> None:
    with pytest.raises(ConfigError, match="GEMINI_API_KEY"):
        get_drafter("gemini:gemini-2.5-flash")


def test_logs_carry_no_key_and_no_secret(
    server: FakeServer, sleeps: Sleeps, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.push(Reply(503, gemini_error(503, "UNAVAILABLE")), ok())
    make(server, sleeps).draft(sample_batch(), [])
    assert "retrying" in caplog.text
    for private in (TEST_API_KEY, OPENAI_KEY, PASSWORD, "PostgreSQLにした"):
        assert private not in caplog.text
