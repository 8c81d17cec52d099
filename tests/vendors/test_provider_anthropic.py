"""The Anthropic adapter, driven through the official SDK against a local fake of the API."""

from __future__ import annotations

import logging

import pytest

from core.errors import ConfigError, TerminalDraftError, TransientDraftError
from core.ports import Drafter
from prompts.case_record import PROMPT_VERSION, build_prompt, response_json_schema
from providers import get_drafter
from providers.anthropic_provider import TOOL_NAME, AnthropicDrafter
from tests.fakeservers import (
    OPENAI_KEY,
    PASSWORD,
    POLICY,
    TEST_API_KEY,
    FakeServer,
    Reply,
    Sleeps,
    anthropic_error,
    anthropic_message,
    assert_no_secret_in,
    assert_none_in_bodies,
    corpus_batch,
    records_payload,
    sample_batch,
)


def make(server: FakeServer, sleeps: Sleeps, **kw) -> AnthropicDrafter:
    options = {"api_key": TEST_API_KEY, "base_url": server.url, "timeout": 2.0}
    options.update(kw)
    return AnthropicDrafter("claude-test", retry=POLICY, sleep=sleeps, **options)


def ok(**kw) -> Reply:
    return Reply(200, anthropic_message(records_payload(), tool_name=TOOL_NAME, **kw))


# ---------------------------------------------------------------- success


def test_success_returns_records_usage_and_provenance(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(ok(cache_read_input_tokens=1000))
    drafter = make(server, sleeps)
    assert isinstance(drafter, Drafter)
    out = drafter.draft(sample_batch(), [])
    assert out.model == "anthropic:claude-test"
    assert out.prompt_version == PROMPT_VERSION
    assert (out.input_tokens, out.output_tokens) == (1300, 80)  # cached input counts as input
    [record] = out.records
    assert record.title == "家計簿アプリのDBはPostgreSQL"
    assert record.source_conversation_keys == ["chatgpt:c1"]
    assert sleeps.waits == []


def test_request_body_has_model_tool_schema_and_cached_system_prefix(
    server: FakeServer, sleeps: Sleeps
) -> None:
    server.push(ok())
    make(server, sleeps, max_output_tokens=12_345).draft(sample_batch(), [])
    [request] = server.requests
    assert request.method == "POST" and request.path == "/v1/messages"
    body = request.json()
    assert body["model"] == "claude-test"
    assert body["max_tokens"] == 12_345
    static, _ = build_prompt([], [])
    assert body["system"] == [
        {"type": "text", "text": static, "cache_control": {"type": "ephemeral"}}
    ]
    [tool] = body["tools"]
    assert tool["name"] == TOOL_NAME
    assert tool["input_schema"] == response_json_schema()
    assert body["tool_choice"] == {"type": "tool", "name": TOOL_NAME}
    [message] = body["messages"]
    assert message["role"] == "user" and "chatgpt:c1:n2" in message["content"]


def test_the_cached_prefix_is_identical_across_batches(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(ok(), ok())
    drafter = make(server, sleeps)
    drafter.draft(sample_batch(), [])
    drafter.draft([], [])
    first, second = (r.json() for r in server.requests)
    assert first["system"] == second["system"] and first["tools"] == second["tools"]
    assert first["messages"] != second["messages"]


def test_no_secret_reaches_the_request_body(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(ok())
    make(server, sleeps).draft(sample_batch(), [])
    assert_no_secret_in(server)
    content = server.requests[0].json()["messages"][0]["content"]
    assert "[REDACTED:openai-api-key]" in content and "[REDACTED:password]" in content


def test_the_secret_corpus_never_reaches_the_request_body(
    server: FakeServer, sleeps: Sleeps
) -> None:
    batch, secrets = corpus_batch()
    server.push(ok())
    make(server, sleeps).draft(batch, [])
    assert_none_in_bodies(server, secrets)
    assert server.requests[0].json()["messages"][0]["content"].count("[REDACTED:") >= len(secrets)


# ---------------------------------------------------------------- transient errors and retries


def test_429_honours_retry_after_then_succeeds(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(Reply(429, anthropic_error("rate_limit_error"), headers={"retry-after": "5"}), ok())
    out = make(server, sleeps).draft(sample_batch(), [])
    assert len(out.records) == 1
    assert sleeps.waits == [5.0]
    assert len(server.requests) == 2


def test_retry_after_longer_than_the_cap_stops_at_once(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(Reply(429, anthropic_error("rate_limit_error"), headers={"retry-after": "900"}))
    with pytest.raises(TransientDraftError) as info:
        make(server, sleeps).draft(sample_batch(), [])
    assert info.value.retry_after == 900.0
    assert sleeps.waits == [] and len(server.requests) == 1


@pytest.mark.parametrize(("status", "kind"), [(500, "api_error"), (529, "overloaded_error")])
def test_server_errors_are_retried(
    server: FakeServer, sleeps: Sleeps, status: int, kind: str
) -> None:
    server.push(Reply(status, anthropic_error(kind)), ok())
    out = make(server, sleeps).draft(sample_batch(), [])
    assert len(out.records) == 1
    [wait] = sleeps.waits
    assert 0.5 <= wait <= 4.0


def test_persistent_500_gives_up_after_the_attempts(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(*[Reply(500, anthropic_error("api_error"))] * POLICY.max_attempts)
    with pytest.raises(TransientDraftError, match=r"HTTP 500 \(api_error\)"):
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


# ---------------------------------------------------------------- terminal errors


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (400, "invalid_request_error"),
        (401, "authentication_error"),
        (403, "permission_error"),
        (404, "not_found_error"),
    ],
)
def test_client_errors_are_terminal_and_not_retried(
    server: FakeServer, sleeps: Sleeps, status: int, kind: str
) -> None:
    server.push(Reply(status, anthropic_error(kind, message=f"echo: {PASSWORD}")))
    with pytest.raises(TerminalDraftError, match=f"HTTP {status} \\({kind}\\)") as info:
        make(server, sleeps).draft(sample_batch(), [])
    assert PASSWORD not in str(info.value)
    assert len(server.requests) == 1 and sleeps.waits == []


def test_tool_input_off_schema_is_terminal(server: FakeServer, sleeps: Sleeps) -> None:
    bad = {"records": [{"action": "create", "title": 3}]}
    server.push(Reply(200, anthropic_message(bad, tool_name=TOOL_NAME)))
    with pytest.raises(TerminalDraftError, match="schema"):
        make(server, sleeps).draft(sample_batch(), [])
    assert len(server.requests) == 1


def test_response_body_that_is_not_json_is_terminal(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(Reply(200, '{"id": "msg_1", "content": ['))
    with pytest.raises(TerminalDraftError, match="JSON"):
        make(server, sleeps).draft(sample_batch(), [])


def test_answer_without_the_tool_call_is_terminal(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(
        Reply(200, anthropic_message(None, tool_name=TOOL_NAME, stop_reason="end_turn", text="{}"))
    )
    with pytest.raises(TerminalDraftError, match=TOOL_NAME):
        make(server, sleeps).draft(sample_batch(), [])


def test_answer_cut_at_max_tokens_is_terminal(server: FakeServer, sleeps: Sleeps) -> None:
    partial = {"records": [{"action": "create", "title": "家計簿"}]}
    server.push(
        Reply(200, anthropic_message(partial, tool_name=TOOL_NAME, stop_reason="max_tokens"))
    )
    with pytest.raises(TerminalDraftError, match="token limit"):
        make(server, sleeps).draft(sample_batch(), [])
    assert len(server.requests) == 1


def test_refusal_is_terminal(server: FakeServer, sleeps: Sleeps) -> None:
    server.push(
        Reply(200, anthropic_message(None, tool_name=TOOL_NAME, stop_reason="refusal", text=""))
    )
    with pytest.raises(TerminalDraftError, match="refused"):
        make(server, sleeps).draft(sample_batch(), [])


# ---------------------------------------------------------------- configuration and logs


def test_registry_builds_the_anthropic_drafter(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_API_KEY)
    drafter = get_drafter("anthropic:claude-sonnet-4-5")
    assert isinstance(drafter, AnthropicDrafter)
    assert drafter.model == "anthropic:claude-sonnet-4-5"


def test_missing_key_is_a_config_error_naming_the_variable() -> None:
    with pytest.raises(ConfigError, match="ANTHROPIC_API_KEY"):
        get_drafter("anthropic:claude-sonnet-4-5")


def test_base_url_comes_from_the_environment(
    server: FakeServer, sleeps: Sleeps, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", TEST_API_KEY)
    monkeypatch.setenv("PMEM_ANTHROPIC_BASE_URL", server.url)
    server.push(ok())
    AnthropicDrafter("claude-test", sleep=sleeps).draft(sample_batch(), [])
    assert len(server.requests) == 1


def test_logs_carry_no_key_and_no_secret(
    server: FakeServer, sleeps: Sleeps, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    server.push(Reply(529, anthropic_error("overloaded_error")), ok())
    make(server, sleeps).draft(sample_batch(), [])
    assert "retrying" in caplog.text
    for private in (TEST_API_KEY, OPENAI_KEY, PASSWORD, "PostgreSQLにした"):
        assert private not in caplog.text
