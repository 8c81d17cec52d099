"""The OpenAI adapter, driven through the official SDK against a local fake of the API."""

from __future__ import annotations

import json
import logging

import pytest

from core.errors import ConfigError, TerminalDraftError, TransientDraftError
from core.ports import Drafter
from prompts.case_record import PROMPT_VERSION, build_prompt
from providers import get_drafter
from providers._retry import RetryPolicy
from providers.openai_provider import OpenAIDrafter
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
    openai_chat,
    openai_error,
    records_payload,
    sample_batch,
)


def make(server: FakeServer, sleeps: Sleeps, **kw) -> OpenAIDrafter:
    options = {"api_key": TEST_API_KEY, "base_url": server.url + "/v1", "timeout": 2.0}
    options.update(kw)
    return OpenAIDrafter("gpt-test", retry=POLICY, sleep=sleeps, **options)


def ok() -> Reply:
    return Reply(200, openai_chat(json.dumps(records_payload(), ensure_ascii=False)))


# ---------------------------------------------------------------- success


def test_success_returns_records_usage_and_provenance(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(ok())
    drafter = make(server, sleeps)
    assert isinstance(drafter, Drafter)
    out = drafter.draft(sample_batch(), [])
    assert out.model == "openai:gpt-test"
    assert out.prompt_version == PROMPT_VERSION
    assert (out.input_tokens, out.output_tokens) == (120, 45)
    [record] = out.records
    assert record.action == "create" and record.memory_kind == "decision"
    assert [(e.message_key, e.quote_hint) for e in record.evidence] == [
        ("chatgpt:c1:n2", "PostgreSQLにした")
    ]
    assert sleeps.waits == []


def test_request_body_has_model_schema_and_static_prefix_first(
    server: FakeServer, sleeps: Sleeps
) -> None:
    server.push(ok())
    make(server, sleeps).draft(sample_batch(), [])
    [request] = server.requests
    assert request.method == "POST" and request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == f"Bearer {TEST_API_KEY}"
    body = request.json()
    assert body["model"] == "gpt-test"
    fmt = body["response_format"]
    assert fmt["type"] == "json_schema"
    assert fmt["json_schema"]["strict"] is True
    schema = fmt["json_schema"]["schema"]
    assert schema["required"] == ["records"] and schema["additionalProperties"] is False
    item = schema["$defs"]["CaseRecordItem"]
    assert "canonicalSummary" in item["properties"]
    assert set(item["required"]) == set(item["properties"])  # strict: every field required
    static, _ = build_prompt([], [])
    assert body["messages"][0] == {"role": "system", "content": static}
    assert body["messages"][1]["role"] == "user"
    assert "chatgpt:c1:n2" in body["messages"][1]["content"]
    assert body["max_tokens"] > 0  # a custom base_url speaks the compatible dialect


def test_no_secret_reaches_the_request_body(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(ok())
    make(server, sleeps).draft(sample_batch(), [])
    assert_no_secret_in(server)
    content = server.requests[0].json()["messages"][1]["content"]
    assert "[REDACTED:openai-api-key]" in content and "[REDACTED:password]" in content
    assert "PostgreSQLにした" in content  # the person's own words still go


def test_official_endpoint_uses_max_completion_tokens(sleeps: Sleeps) -> None:
    drafter = OpenAIDrafter("gpt-test", api_key=TEST_API_KEY, sleep=sleeps)
    body = drafter.request_body("static", "dynamic")
    assert "max_completion_tokens" in body and "max_tokens" not in body


def test_a_local_server_needs_no_key(
    server: FakeServer, sleeps: Sleeps, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PMEM_OPENAI_BASE_URL", server.url + "/v1")
    server.push(ok())
    drafter = OpenAIDrafter("llama3.1:8b", sleep=sleeps, retry=POLICY)
    out = drafter.draft(sample_batch(), [])
    assert out.model == "openai:llama3.1:8b" and len(out.records) == 1
    assert server.requests[0].json()["model"] == "llama3.1:8b"


def test_a_fenced_answer_from_a_compatible_server_is_read(
    server: FakeServer, sleeps: Sleeps
) -> None:
    fenced = "```json\n" + json.dumps(records_payload()) + "\n```"
    server.push(Reply(200, openai_chat(fenced)))
    assert len(make(server, sleeps).draft(sample_batch(), []).records) == 1


def test_the_secret_corpus_never_reaches_the_request_body(
    server: FakeServer, sleeps: Sleeps
) -> None:
    batch, secrets = corpus_batch()
    server.push(ok())
    make(server, sleeps).draft(batch, [])
    assert_none_in_bodies(server, secrets)
    assert server.requests[0].json()["messages"][1]["content"].count("[REDACTED:") >= len(secrets)


# ---------------------------------------------------------------- transient errors and retries


def test_429_honours_retry_after_then_succeeds(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(
        Reply(429, openai_error(429, "rate_limit_exceeded"), headers={"retry-after": "7"}), ok()
    )
    out = make(server, sleeps).draft(sample_batch(), [])
    assert len(out.records) == 1
    assert sleeps.waits == [7.0]
    assert len(server.requests) == 2
    assert server.requests[0].body == server.requests[1].body  # the same request, resent


def test_429_honours_retry_after_ms(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(
        Reply(429, openai_error(429, "rate_limit_exceeded"), headers={"retry-after-ms": "1500"}),
        ok(),
    )
    make(server, sleeps).draft(sample_batch(), [])
    assert sleeps.waits == [1.5]


def test_retry_after_longer_than_the_cap_stops_at_once(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(
        Reply(429, openai_error(429, "rate_limit_exceeded"), headers={"retry-after": "3600"})
    )
    with pytest.raises(TransientDraftError) as info:
        make(server, sleeps).draft(sample_batch(), [])
    assert info.value.retry_after == 3600.0
    assert sleeps.waits == [] and len(server.requests) == 1


def test_500_is_retried_with_backoff(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(Reply(500, openai_error(500, "server_error")), ok())
    out = make(server, sleeps).draft(sample_batch(), [])
    assert len(out.records) == 1
    [wait] = sleeps.waits
    assert 0.5 <= wait <= 4.0


def test_persistent_500_gives_up_after_the_attempts(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(*[Reply(503, openai_error(503, "server_error"))] * POLICY.max_attempts)
    with pytest.raises(TransientDraftError, match="HTTP 503"):
        make(server, sleeps).draft(sample_batch(), [])
    assert len(server.requests) == POLICY.max_attempts
    assert len(sleeps.waits) == POLICY.max_attempts - 1


def test_timeout_is_transient_and_retried(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(Reply(200, openai_chat("{}"), delay=2.0), ok())
    out = make(server, sleeps, timeout=0.3).draft(sample_batch(), [])
    assert len(out.records) == 1 and len(server.requests) == 2 and len(sleeps.waits) == 1


def test_timeouts_every_time_raise_transient(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(*[Reply(200, openai_chat("{}"), delay=2.0)] * POLICY.max_attempts)
    with pytest.raises(TransientDraftError, match="timed out"):
        make(server, sleeps, timeout=0.2).draft(sample_batch(), [])


def test_connection_refused_is_transient(sleeps: Sleeps) -> None:
    with FakeServer() as gone:
        url = gone.url
    drafter = OpenAIDrafter(
        "gpt-test",
        api_key=TEST_API_KEY,
        base_url=url + "/v1",
        timeout=1.0,
        retry=RetryPolicy(max_attempts=2),
        sleep=sleeps,
    )
    with pytest.raises(TransientDraftError, match="connect"):
        drafter.draft(sample_batch(), [])
    assert len(sleeps.waits) == 1


# ---------------------------------------------------------------- terminal errors


@pytest.mark.parametrize(
    ("status", "code"),
    [
        (400, "invalid_request_error"),
        (401, "invalid_api_key"),
        (403, "forbidden"),
        (404, "model_not_found"),
    ],
)
def test_client_errors_are_terminal_and_not_retried(
    server: FakeServer, sleeps: Sleeps, status: int, code: str
) -> None:
    server.push(Reply(status, openai_error(status, code, message=f"echo: {PASSWORD}")))
    with pytest.raises(TerminalDraftError, match=f"HTTP {status}") as info:
        make(server, sleeps).draft(sample_batch(), [])
    assert PASSWORD not in str(info.value)  # the vendor's message is never repeated
    assert len(server.requests) == 1 and sleeps.waits == []


def test_quota_exhausted_429_is_terminal(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(Reply(429, openai_error(429, "insufficient_quota")))
    with pytest.raises(TerminalDraftError, match="quota"):
        make(server, sleeps).draft(sample_batch(), [])
    assert len(server.requests) == 1


def test_malformed_json_answer_is_terminal(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(Reply(200, openai_chat('{"records": [{"action": "create", "title": ')))
    with pytest.raises(TerminalDraftError, match="schema"):
        make(server, sleeps).draft(sample_batch(), [])
    assert len(server.requests) == 1


def test_answer_off_schema_is_terminal(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(Reply(200, openai_chat(json.dumps({"records": [{"action": "update"}]}))))
    with pytest.raises(TerminalDraftError, match="schema"):
        make(server, sleeps).draft(sample_batch(), [])


def test_response_body_that_is_not_json_is_terminal(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(Reply(200, "<html>gateway</html>"))
    with pytest.raises(TerminalDraftError, match="JSON"):
        make(server, sleeps).draft(sample_batch(), [])


def test_answer_cut_at_the_token_limit_is_terminal(server: FakeServer, sleeps: Sleeps) -> None:
    partial = json.dumps(records_payload())[:80]
    server.push(Reply(200, openai_chat(partial, finish_reason="length")))
    with pytest.raises(TerminalDraftError, match="token limit"):
        make(server, sleeps).draft(sample_batch(), [])
    assert len(server.requests) == 1


def test_cut_answer_is_terminal_even_when_it_parses(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(Reply(200, openai_chat(json.dumps(records_payload()), finish_reason="length")))
    with pytest.raises(TerminalDraftError, match="token limit"):
        make(server, sleeps).draft(sample_batch(), [])


def test_refusal_is_terminal(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(Reply(200, openai_chat(None, refusal="I can't help with that.")))
    with pytest.raises(TerminalDraftError, match="refused"):
        make(server, sleeps).draft(sample_batch(), [])


def test_content_filter_is_terminal(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(Reply(200, openai_chat(None, finish_reason="content_filter")))
    with pytest.raises(TerminalDraftError, match="content filter"):
        make(server, sleeps).draft(sample_batch(), [])


# ---------------------------------------------------------------- configuration and logs


def test_registry_builds_the_openai_drafter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", TEST_API_KEY)
    drafter = get_drafter("openai:gpt-4.1-mini")
    assert isinstance(drafter, OpenAIDrafter) and drafter.model == "openai:gpt-4.1-mini"


def test_missing_key_is_a_config_error_naming_the_variable() -> None:
    with pytest.raises(ConfigError, match="OPENAI_API_KEY") as info:
        get_drafter("openai:gpt-4.1-mini")
    assert "extractive" in str(info.value)
    with pytest.raises(ConfigError, match="model name"):
        get_drafter("openai")


def test_logs_carry_no_key_and_no_secret(
    server: FakeServer, sleeps: Sleeps, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.push(
        Reply(429, openai_error(429, "rate_limit_exceeded"), headers={"retry-after": "1"}), ok()
    )
    make(server, sleeps).draft(sample_batch(), [])
    assert "retrying" in caplog.text and "redacted 2" in caplog.text
    for private in (TEST_API_KEY, OPENAI_KEY, PASSWORD, "PostgreSQLにした"):
        assert private not in caplog.text


@pytest.mark.parametrize(
    ("spec", "sdk", "module", "package"),
    [
        ("openai:gpt-x", "openai", "providers.openai_provider", "openai"),
        ("anthropic:claude-x", "anthropic", "providers.anthropic_provider", "anthropic"),
        ("gemini:gemini-x", "google.genai", "providers.gemini_provider", "google-genai"),
    ],
)
def test_a_missing_sdk_is_a_config_error_with_an_install_hint(
    monkeypatch: pytest.MonkeyPatch, spec: str, sdk: str, module: str, package: str
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, sdk, None)  # "import <sdk>" now raises ImportError
    monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(ConfigError) as info:
        get_drafter(spec)
    assert f"pip install {package}" in (info.value.hint or "")
