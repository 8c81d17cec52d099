"""Anthropic drafter (``anthropic:<model>``), through the official ``anthropic`` SDK.

Structured output through a tool: one tool whose ``input_schema`` is the case-record response
schema, and ``tool_choice`` forcing the model to call it; the tool's input is the answer. The
static instructions are the system prompt, sent as one text block marked
``cache_control: {"type": "ephemeral"}`` so the tool definition and the instructions (the
prefix every batch shares) are read from Anthropic's prompt cache after the first batch.

One retry layer: the SDK client is built with ``max_retries=0`` and an explicit timeout, every
vendor error is mapped once here into ``TransientDraftError`` / ``TerminalDraftError`` (429,
5xx and 529 "overloaded", timeouts and connection errors are transient), and
``providers._retry.call_with_retry`` retries the transient ones. An answer cut at
``max_tokens``, a refusal, or a tool input that does not match the schema is a
``TerminalDraftError``, never a partial record. Base URL: ``PMEM_ANTHROPIC_BASE_URL`` or
``ANTHROPIC_BASE_URL``; key: ``ANTHROPIC_API_KEY``. The SDK's DEBUG log line that dumps the
request options (the conversation text) is filtered out.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError

from core.errors import ConfigError, DraftError, TerminalDraftError, TransientDraftError
from core.models import DraftRecord
from prompts.case_record import (
    CaseRecordResponse,
    to_draft_records,
)
from providers._retry import (
    parse_retry_after,
    transient_status,
    vendor_code,
)
from providers._sdk import SdkDrafter, Send

try:
    import anthropic
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ConfigError(
        "the anthropic provider needs the 'anthropic' package",
        hint="pip install anthropic (or install personal-memory with its anthropic extra)",
    ) from exc

log = logging.getLogger(__name__)


class _DropRequestBodies(logging.Filter):
    """The SDK logs every request's options, the whole conversation text included, at DEBUG.

    Private text never goes to a log (invariant 9), so those records are dropped; the SDK's
    other debug lines (method, status, retries) still pass.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not (isinstance(record.msg, str) and record.msg.startswith("Request options"))


_sdk_log = logging.getLogger("anthropic._base_client")
if not any(isinstance(f, _DropRequestBodies) for f in _sdk_log.filters):
    _sdk_log.addFilter(_DropRequestBodies())

PROVIDER = "anthropic"
DEFAULT_TIMEOUT = 300.0  # seconds for one request
DEFAULT_MAX_OUTPUT_TOKENS = 16_000
TOOL_NAME = "record_case_records"
TOOL_DESCRIPTION = (
    "Record the case records drafted from the conversations. Call this exactly once with "
    "every record."
)
BASE_URL_ENVS = ("PMEM_ANTHROPIC_BASE_URL", "ANTHROPIC_BASE_URL")
API_KEY_ENV = "ANTHROPIC_API_KEY"
CACHE_CONTROL = {"type": "ephemeral"}


class AnthropicDrafter(SdkDrafter):
    """Drafts case records with a Claude model."""

    PROVIDER = PROVIDER
    EXAMPLE_MODEL = "claude-sonnet-4-5"
    KEY_ENVS = (API_KEY_ENV,)
    BASE_URL_ENVS = BASE_URL_ENVS
    KEY_HINT = f"set {API_KEY_ENV} (in the environment or .env)"
    DEFAULT_TIMEOUT = DEFAULT_TIMEOUT
    DEFAULT_MAX_OUTPUT_TOKENS = DEFAULT_MAX_OUTPUT_TOKENS

    def make_client(self, api_key: str, base_url: str | None, timeout: float) -> Any:
        return anthropic.Anthropic(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0
        )

    def prepare(self, static: str, dynamic: str) -> Send:
        body = self.request_body(static, dynamic)
        return lambda: self._call(body)

    def request_body(self, static: str, dynamic: str) -> dict[str, Any]:
        return {
            "model": self.model_name,
            "max_tokens": self.max_output_tokens,
            "system": [{"type": "text", "text": static, "cache_control": dict(CACHE_CONTROL)}],
            "tools": [
                {
                    "name": TOOL_NAME,
                    "description": TOOL_DESCRIPTION,
                    "input_schema": self._schema,
                }
            ],
            "tool_choice": {"type": "tool", "name": TOOL_NAME},
            "messages": [{"role": "user", "content": dynamic}],
        }

    def _send(self, body: dict[str, Any]) -> Any:
        """The one place the SDK is called: its errors become ours."""
        try:
            return self._client.messages.create(**body)
        except anthropic.APIError as exc:
            raise _map_error(exc) from None
        except ValueError:  # a 200 whose body is not JSON
            raise TerminalDraftError(
                f"{PROVIDER}: the response body could not be read as JSON"
            ) from None

    def _call(self, body: dict[str, Any]) -> tuple[list[DraftRecord], tuple[int, int]]:
        resp = self._send(body)
        return _records(resp), _usage(resp)

    def complete_json(
        self, static: str, dynamic: str, name: str, schema: dict[str, Any]
    ) -> tuple[dict[str, Any], tuple[int, int]]:
        """One structured answer for another schema (the summaries' prompts): a forced tool
        call with that input schema, through the same client, errors and retry layer."""
        body = self.request_body(static, dynamic)
        body["tools"] = [
            {"name": name, "description": f"Record the {name}.", "input_schema": schema}
        ]
        body["tool_choice"] = {"type": "tool", "name": name}

        def send() -> tuple[dict[str, Any], tuple[int, int]]:
            resp = self._send(body)
            calls = [
                b
                for b in (getattr(resp, "content", None) or [])
                if getattr(b, "type", None) == "tool_use" and getattr(b, "name", None) == name
            ]
            if not calls or not isinstance(calls[0].input, dict):
                raise TerminalDraftError(f"{PROVIDER}: the answer has no {name} call")
            return dict(calls[0].input), _usage(resp)

        return self.with_retry(send)


def _records(resp: Any) -> list[DraftRecord]:
    stop = getattr(resp, "stop_reason", None)
    if stop == "max_tokens":
        raise TerminalDraftError(
            f"{PROVIDER}: the answer was cut at the output token limit (stop_reason=max_tokens)"
        )
    if stop == "model_context_window_exceeded":
        raise TerminalDraftError(f"{PROVIDER}: the batch does not fit the model's context window")
    if stop == "refusal":
        raise TerminalDraftError(f"{PROVIDER}: the model refused to answer")
    calls = [
        block
        for block in (getattr(resp, "content", None) or [])
        if getattr(block, "type", None) == "tool_use" and getattr(block, "name", None) == TOOL_NAME
    ]
    if not calls:
        raise TerminalDraftError(
            f"{PROVIDER}: the answer has no {TOOL_NAME} call (stop_reason={vendor_code(stop) or 'unrecognised'})"
        )
    try:
        parsed = CaseRecordResponse.model_validate(calls[0].input)
    except ValidationError as exc:
        raise TerminalDraftError(
            f"{PROVIDER}: the answer does not match the case-record schema "
            f"({exc.error_count()} error(s))"
        ) from None
    return to_draft_records(parsed)


def _usage(resp: Any) -> tuple[int, int]:
    usage = getattr(resp, "usage", None)
    if usage is None:
        return 0, 0
    # input_tokens counts only the uncached part; cache writes and reads are input too
    total_in = (
        int(usage.input_tokens or 0)
        + int(getattr(usage, "cache_creation_input_tokens", 0) or 0)
        + int(getattr(usage, "cache_read_input_tokens", 0) or 0)
    )
    return total_in, int(usage.output_tokens or 0)


def _map_error(exc: anthropic.APIError) -> DraftError:
    """The one place Anthropic errors become ours."""
    if isinstance(exc, anthropic.APITimeoutError):
        return TransientDraftError(f"{PROVIDER}: the request timed out")
    if isinstance(exc, anthropic.APIConnectionError):
        return TransientDraftError(f"{PROVIDER}: could not connect")
    if isinstance(exc, anthropic.APIStatusError):
        status = exc.status_code
        code = _error_type(exc.body)
        what = f"{PROVIDER}: HTTP {status}" + (f" ({code})" if code else "")
        if transient_status(status):
            return TransientDraftError(what, retry_after=parse_retry_after(exc.response.headers))
        return TerminalDraftError(what)
    return TerminalDraftError(f"{PROVIDER}: {type(exc).__name__}")


def _error_type(body: object) -> str | None:
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict):
            return vendor_code(error.get("type"))  # never the vendor's text
    return None
