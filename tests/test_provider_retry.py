"""The one retry layer (providers._retry): what is retried, how long it waits, when it stops."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from core.errors import TerminalDraftError, TransientDraftError
from providers._retry import (
    RetryPolicy,
    call_with_retry,
    parse_duration,
    parse_retry_after,
    safe_code,
    transient_status,
)
from tests.fakeservers import Sleeps


class Script:
    """Raises the scripted errors in turn, then returns "done"."""

    def __init__(self, *errors: BaseException) -> None:
        self.errors = list(errors)
        self.calls = 0

    def __call__(self) -> str:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return "done"


POLICY = RetryPolicy(max_attempts=4, max_wait=60.0, initial_backoff=1.0, max_backoff=8.0)


def test_success_needs_no_wait() -> None:
    sleeps, fn = Sleeps(), Script()
    assert call_with_retry(fn, policy=POLICY, sleep=sleeps) == "done"
    assert fn.calls == 1 and sleeps.waits == []


def test_retry_after_is_honoured_exactly() -> None:
    sleeps = Sleeps()
    fn = Script(TransientDraftError("x", retry_after=12.5), TransientDraftError("x", retry_after=0))
    assert call_with_retry(fn, policy=POLICY, sleep=sleeps) == "done"
    assert sleeps.waits == [12.5, 0.0]


def test_backoff_without_retry_after_grows_and_is_capped() -> None:
    sleeps = Sleeps()
    fn = Script(*[TransientDraftError("x") for _ in range(3)])
    call_with_retry(fn, policy=POLICY, sleep=sleeps)
    first, second, third = sleeps.waits
    assert 1.0 <= first <= 2.0 and 2.0 <= second <= 3.0 and 4.0 <= third <= 5.0
    capped = RetryPolicy(max_attempts=6, initial_backoff=10.0, max_backoff=3.0)
    sleeps = Sleeps()
    call_with_retry(
        Script(*[TransientDraftError("x") for _ in range(5)]), policy=capped, sleep=sleeps
    )
    assert all(w <= 3.0 for w in sleeps.waits)


def test_attempts_are_bounded() -> None:
    sleeps = Sleeps()
    fn = Script(*[TransientDraftError(f"e{i}") for i in range(10)])
    with pytest.raises(TransientDraftError, match="e3"):
        call_with_retry(fn, policy=POLICY, sleep=sleeps)
    assert fn.calls == 4 and len(sleeps.waits) == 3


def test_a_wait_longer_than_the_cap_stops_cleanly_with_retry_after() -> None:
    sleeps = Sleeps()
    fn = Script(TransientDraftError("slow down", retry_after=61.0))
    with pytest.raises(TransientDraftError) as info:
        call_with_retry(fn, policy=POLICY, sleep=sleeps)
    assert info.value.retry_after == 61.0
    assert fn.calls == 1 and sleeps.waits == []


@pytest.mark.parametrize("error", [TerminalDraftError("bad"), ValueError("bug")])
def test_terminal_errors_and_bugs_are_never_retried(error: Exception) -> None:
    sleeps, fn = Sleeps(), Script(error)
    with pytest.raises(type(error)):
        call_with_retry(fn, policy=POLICY, sleep=sleeps)
    assert fn.calls == 1 and sleeps.waits == []


def test_policy_is_validated() -> None:
    with pytest.raises(ValueError):
        RetryPolicy(max_attempts=0)
    with pytest.raises(ValueError):
        RetryPolicy(max_wait=-1)


@pytest.mark.parametrize(
    ("headers", "expected"),
    [
        ({"Retry-After": "7"}, 7.0),
        ({"retry-after": "2.5"}, 2.5),
        ({"retry-after-ms": "1500", "retry-after": "9"}, 1.5),  # the finer one wins
        ({"Retry-After": "Tue, 05 Mar 2024 21:10:30 GMT"}, 30.0),
        ({"Retry-After": "Tue, 05 Mar 2024 21:09:00 GMT"}, 0.0),  # already past
        ({"Retry-After": "soon"}, None),
        ({"Retry-After": "-3"}, None),
        ({}, None),
        (None, None),
    ],
)
def test_parse_retry_after(headers: dict[str, str] | None, expected: float | None) -> None:
    now = datetime(2024, 3, 5, 21, 10, tzinfo=UTC)
    assert parse_retry_after(headers, now=now) == expected


def test_parse_duration_and_codes() -> None:
    assert parse_duration("2s") == 2.0 and parse_duration("0.25s") == 0.25
    assert parse_duration("2m") is None and parse_duration(None) is None
    assert safe_code("rate_limit_exceeded") == "rate_limit_exceeded"
    assert safe_code("bad code: <script>'x'") == "badcodescriptx"
    assert safe_code(None) is None and safe_code("") is None
    assert [s for s in (400, 401, 404, 408, 409, 429, 500, 503, 529) if transient_status(s)] == [
        408,
        409,
        429,
        500,
        503,
        529,
    ]
    assert not transient_status(None)


def test_vendor_errors_keep_only_published_codes() -> None:
    """Finding 19 (issue 29): a vendor that echoes the prompt in its error code must not carry it
    into our message (which Prefect records as the task's state and log): the status and a
    published code stay, free text goes."""
    import anthropic
    import httpx
    import openai
    from google.genai import errors as genai_errors

    from providers import anthropic_provider, gemini_provider, openai_provider
    from providers._retry import vendor_code

    echo = "ECHOCANARY_the_password_is_hunter2"
    request = httpx.Request("POST", "https://vendor.example/v1")
    response = httpx.Response(400, request=request)
    oa = openai.APIStatusError(
        "bad", response=response, body={"code": echo, "type": echo, "message": echo}
    )
    an = anthropic.APIStatusError(
        "bad", response=response, body={"type": "error", "error": {"type": echo, "message": echo}}
    )
    ge = genai_errors.APIError(400, {"error": {"code": 400, "status": echo, "message": echo}})
    for err in (
        openai_provider._map_error(oa),
        anthropic_provider._map_error(an),
        gemini_provider._map_api_error(ge),
    ):
        assert "HTTP 400" in str(err) and "ECHOCANARY" not in str(err) and "hunter2" not in str(err)
    known = openai.APIStatusError("x", response=response, body={"code": "context_length_exceeded"})
    assert "(context_length_exceeded)" in str(openai_provider._map_error(known))
    assert vendor_code("FinishReason.STOP") == "STOP" and vendor_code("stop_here_pw") is None
