"""The one retry layer for provider calls (tenacity), shared by every LLM adapter.

Each adapter builds its SDK client with the SDK's own retries off (``max_retries=0`` or the
equivalent), maps every vendor error once into ``TransientDraftError`` / ``TerminalDraftError``,
and wraps its single request in ``call_with_retry``. Nothing above (Prefect tasks, the flow)
retries a provider call again.

Rules:

- only ``TransientDraftError`` is retried (rate limited, unavailable, timeout, connection);
  a ``TerminalDraftError`` (or anything else) goes straight up;
- a ``retry_after`` the server gave (``Retry-After`` / ``retry-after-ms`` headers, or the
  vendor's own hint) is honoured exactly; without one the wait is exponential with jitter;
- attempts are bounded (``RetryPolicy.max_attempts``) and so is a single wait
  (``RetryPolicy.max_wait``): when the server asks for longer than that, the error is raised at
  once, still carrying ``retry_after``, so the caller can stop cleanly and resume later instead
  of sleeping for an hour inside a task.

Log lines carry the label, the attempt and the wait, never request or response text.
"""

from __future__ import annotations

import email.utils
import logging
import math
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TypeVar

from tenacity import RetryCallState, Retrying, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_exponential_jitter

from core.errors import TransientDraftError
from core.waits import announce

log = logging.getLogger(__name__)

T = TypeVar("T")

#: HTTP statuses worth another try: request timeout, conflict (the vendors' SDKs retry it too),
#: rate limited, and every server-side error (including Anthropic's 529 "overloaded").
TRANSIENT_STATUSES = frozenset({408, 409, 429})


def transient_status(status: int | None) -> bool:
    return status is not None and (status in TRANSIENT_STATUSES or status >= 500)


@dataclass(frozen=True)
class RetryPolicy:
    """How often and how long one provider call may be retried."""

    max_attempts: int = 4  # including the first call
    max_wait: float = 60.0  # the longest single wait accepted; a longer Retry-After stops
    initial_backoff: float = 1.0  # without Retry-After: 1, 2, 4, ... s plus jitter
    max_backoff: float = 20.0
    jitter: float = 1.0

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.max_wait < 0 or self.initial_backoff < 0 or self.max_backoff < 0:
            raise ValueError("waits must not be negative")


DEFAULT_POLICY = RetryPolicy()


def call_with_retry(
    fn: Callable[[], T],
    *,
    policy: RetryPolicy = DEFAULT_POLICY,
    sleep: Callable[[float], None] = time.sleep,
    label: str = "provider",
) -> T:
    """Call ``fn`` and retry it on ``TransientDraftError`` as the policy allows.

    ``sleep`` is injectable so tests can check the waits without waiting.
    """
    backoff = wait_exponential_jitter(
        initial=policy.initial_backoff, max=policy.max_backoff, jitter=policy.jitter
    )

    def retryable(exc: BaseException) -> bool:
        if not isinstance(exc, TransientDraftError):
            return False
        return exc.retry_after is None or exc.retry_after <= policy.max_wait

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        retry_after = getattr(exc, "retry_after", None)
        if retry_after is not None:
            return max(0.0, float(retry_after))
        return min(float(backoff(state)), policy.max_wait)

    def before_sleep(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome is not None else None
        wait_s = state.next_action.sleep if state.next_action is not None else 0.0
        # the terminal says what the run waits for and until when (core.waits)
        announce(
            f"{label} to answer again (after {type(exc).__name__}; attempt "
            f"{state.attempt_number + 1} of {policy.max_attempts})",
            wait_s,
        )
        log.warning(
            "%s: transient error (%s), attempt %d of %d, retrying in %.1f s",
            label,
            type(exc).__name__,
            state.attempt_number,
            policy.max_attempts,
            wait_s,
        )

    retrying = Retrying(
        stop=stop_after_attempt(policy.max_attempts),
        retry=retry_if_exception(retryable),
        wait=wait,
        sleep=sleep,
        before_sleep=before_sleep,
        reraise=True,
    )
    return retrying(fn)


# ---------------------------------------------------------------- Retry-After


def parse_retry_after(
    headers: Mapping[str, str] | None, *, now: datetime | None = None
) -> float | None:
    """Seconds to wait from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date)."""
    if not headers:
        return None
    lowered = {str(k).lower(): str(v) for k, v in headers.items()}
    ms = lowered.get("retry-after-ms")
    if ms is not None:
        value = _number(ms)
        if value is not None:
            return value / 1000.0
    raw = lowered.get("retry-after")
    if raw is None:
        return None
    value = _number(raw)
    if value is not None:
        return value
    try:
        when = email.utils.parsedate_to_datetime(raw.strip())
    except (TypeError, ValueError, IndexError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - (now or datetime.now(UTC))).total_seconds())


_DURATION_RE = re.compile(r"^\s*(\d+(?:\.\d+)?)s\s*$")


def parse_duration(text: object) -> float | None:
    """A protobuf duration such as Google's ``retryDelay: "2.5s"`` in seconds."""
    if not isinstance(text, str):
        return None
    m = _DURATION_RE.match(text)
    return float(m.group(1)) if m else None


def _number(text: str) -> float | None:
    try:
        value = float(text.strip())
    except ValueError:
        return None
    if math.isnan(value) or math.isinf(value) or value < 0:
        return None
    return value


_CODE_RE = re.compile(r"[^A-Za-z0-9_.\-]")


def safe_code(value: object) -> str | None:
    """A vendor's error code / type, cut to an identifier (a message may quote the request)."""
    if value is None:
        return None
    text = _CODE_RE.sub("", str(value))[:64]
    return text or None


#: the codes the vendors publish: OpenAI's ``error.code`` / ``error.type``, Anthropic's
#: ``error.type`` and ``stop_reason``, Google's RPC ``status``, ``finish_reason`` and
#: ``block_reason``. Only these reach our messages (and so Prefect's states and logs): a code
#: is a field the vendor fills, and one that echoes the prompt must not carry it along.
VENDOR_CODES = frozenset(
    {
        # OpenAI
        "invalid_request_error",
        "authentication_error",
        "permission_error",
        "not_found_error",
        "rate_limit_error",
        "server_error",
        "api_error",
        "insufficient_quota",
        "rate_limit_exceeded",
        "context_length_exceeded",
        "invalid_api_key",
        "model_not_found",
        "billing_hard_limit_reached",
        "tokens_exceeded",
        "unsupported_parameter",
        "invalid_value",
        "content_filter",
        "string_above_max_length",
        "engine_overloaded",
        "requests",
        "tokens",
        # Anthropic
        "overloaded_error",
        "request_too_large",
        "billing_error",
        "timeout_error",
        "end_turn",
        "max_tokens",
        "stop_sequence",
        "tool_use",
        "pause_turn",
        "refusal",
        # Google RPC status, Gemini finish and block reasons
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
        "STOP",
        "MAX_TOKENS",
        "SAFETY",
        "RECITATION",
        "LANGUAGE",
        "OTHER",
        "BLOCKLIST",
        "PROHIBITED_CONTENT",
        "SPII",
        "MALFORMED_FUNCTION_CALL",
        "IMAGE_SAFETY",
        "UNEXPECTED_TOOL_CALL",
        "TOO_MANY_TOOL_CALLS",
        "FINISH_REASON_UNSPECIFIED",
        "BLOCK_REASON_UNSPECIFIED",
    }
)


def vendor_code(value: object) -> str | None:
    """A vendor's code as our messages may carry it: one of ``VENDOR_CODES`` (an enum's
    ``FinishReason.STOP`` read as ``STOP``), else None. Never the vendor's free text."""
    name = getattr(value, "name", None)
    code = safe_code(name if isinstance(name, str) else value)
    if code is None:
        return None
    code = code.rsplit(".", 1)[-1]
    return code if code in VENDOR_CODES else None
