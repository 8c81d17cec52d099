"""Gemini drafter (``gemini:<model>``), through the official ``google-genai`` SDK.

Structured output: ``response_mime_type="application/json"`` with ``response_json_schema`` set
to the case-record response schema (plain JSON Schema, the same one the other providers get).
The static instructions go in ``system_instruction``, ahead of the batch text, so Gemini's
implicit prompt cache can reuse the shared prefix.

One retry layer: the client is built with ``HttpRetryOptions(attempts=1)`` (the SDK's own
retries off) and an explicit timeout; every vendor error is mapped once here into
``TransientDraftError`` / ``TerminalDraftError`` (429, 5xx, timeouts and connection errors are
transient; a 429 honours the server's ``RetryInfo`` delay or ``Retry-After``), and
``providers._retry.call_with_retry`` retries the transient ones. An answer cut at
``MAX_TOKENS``, blocked for safety / recitation, or not matching the schema is a
``TerminalDraftError``, never a partial record. Key: ``GEMINI_API_KEY`` or ``GOOGLE_API_KEY``;
base URL: ``PMEM_GEMINI_BASE_URL`` or ``GOOGLE_GEMINI_BASE_URL``.
"""

from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from core.errors import ConfigError, DraftError, TerminalDraftError, TransientDraftError
from core.models import DraftRecord
from prompts.case_record import (
    CaseRecordResponse,
    to_draft_records,
)
from providers._json import json_object as _json_object
from providers._retry import (
    parse_duration,
    parse_retry_after,
    transient_status,
    vendor_code,
)
from providers._sdk import SdkDrafter, Send

try:
    from google import genai
    from google.genai import errors as genai_errors
    from google.genai import types as genai_types
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ConfigError(
        "the gemini provider needs the 'google-genai' package",
        hint="pip install google-genai (or install personal-memory with its gemini extra)",
    ) from exc


PROVIDER = "gemini"
DEFAULT_TIMEOUT = 300.0  # seconds for one request
DEFAULT_MAX_OUTPUT_TOKENS = 16_000
BASE_URL_ENVS = ("PMEM_GEMINI_BASE_URL", "GOOGLE_GEMINI_BASE_URL")
API_KEY_ENVS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")

_OK_FINISH = {None, "STOP", "FINISH_REASON_UNSPECIFIED"}
_BLOCKED_FINISH = {
    "SAFETY",
    "RECITATION",
    "BLOCKLIST",
    "PROHIBITED_CONTENT",
    "SPII",
    "LANGUAGE",
    "MODEL_ARMOR",
    "IMAGE_SAFETY",
    "IMAGE_PROHIBITED_CONTENT",
    "IMAGE_RECITATION",
}


def _transport_errors() -> tuple[tuple[type[BaseException], ...], tuple[type[BaseException], ...]]:
    """(timeout classes, connection classes) of the HTTP stacks the SDK may use."""
    timeouts: list[type[BaseException]] = []
    connection: list[type[BaseException]] = []
    for name in ("httpx2", "httpx"):
        try:
            module = __import__(name)
        except ImportError:
            continue
        timeouts.append(module.TimeoutException)
        connection.append(module.TransportError)
    try:
        import requests

        timeouts.append(requests.Timeout)
        connection.append(requests.ConnectionError)
    except ImportError:  # pragma: no cover
        pass
    return tuple(timeouts), tuple(connection)


_TIMEOUT_ERRORS, _CONNECTION_ERRORS = _transport_errors()


class GeminiDrafter(SdkDrafter):
    """Drafts case records with a Gemini model (Gemini Developer API)."""

    PROVIDER = PROVIDER
    EXAMPLE_MODEL = "gemini-2.5-flash"
    KEY_ENVS = API_KEY_ENVS
    BASE_URL_ENVS = BASE_URL_ENVS
    KEY_HINT = "set GEMINI_API_KEY (in the environment or .env)"
    DEFAULT_TIMEOUT = DEFAULT_TIMEOUT
    DEFAULT_MAX_OUTPUT_TOKENS = DEFAULT_MAX_OUTPUT_TOKENS

    def make_client(self, api_key: str, base_url: str | None, timeout: float) -> Any:
        http_options = genai_types.HttpOptions(
            base_url=base_url,
            timeout=max(1, int(timeout * 1000)),  # milliseconds
            retry_options=genai_types.HttpRetryOptions(attempts=1),  # we retry, not the SDK
        )
        return genai.Client(vertexai=False, api_key=api_key, http_options=http_options)

    def prepare(self, static: str, dynamic: str) -> Send:
        config = self.request_config(static)
        return lambda: self._call(dynamic, config)

    def request_config(self, static: str) -> Any:
        return genai_types.GenerateContentConfig(
            system_instruction=static,
            response_mime_type="application/json",
            response_json_schema=self._schema,
            max_output_tokens=self.max_output_tokens,
        )

    def _send(self, dynamic: str, config: Any) -> Any:
        """The one place the SDK is called: its errors become ours."""
        try:
            return self._client.models.generate_content(
                model=self.model_name, contents=dynamic, config=config
            )
        except genai_errors.APIError as exc:
            raise _map_api_error(exc) from None
        except _TIMEOUT_ERRORS:
            raise TransientDraftError(f"{PROVIDER}: the request timed out") from None
        except _CONNECTION_ERRORS:
            raise TransientDraftError(f"{PROVIDER}: could not connect") from None
        except ValueError:  # a 200 whose body is not JSON
            raise TerminalDraftError(
                f"{PROVIDER}: the response body could not be read as JSON"
            ) from None

    def _call(self, dynamic: str, config: Any) -> tuple[list[DraftRecord], tuple[int, int]]:
        resp = self._send(dynamic, config)
        return _records(resp), _usage(resp)

    def complete_json(
        self, static: str, dynamic: str, name: str, schema: dict[str, Any]
    ) -> tuple[dict[str, Any], tuple[int, int]]:
        """One structured answer for another schema (the summaries' prompts), through the same
        client, errors and retry layer."""
        config = genai_types.GenerateContentConfig(
            system_instruction=static,
            response_mime_type="application/json",
            response_json_schema=schema,
            max_output_tokens=self.max_output_tokens,
        )

        def send() -> tuple[dict[str, Any], tuple[int, int]]:
            resp = self._send(dynamic, config)
            candidates = getattr(resp, "candidates", None) or []
            parts = (
                getattr(getattr(candidates[0], "content", None), "parts", None) or []
                if candidates
                else []
            )
            text = "".join(
                p.text
                for p in parts
                if getattr(p, "text", None) and not getattr(p, "thought", False)
            )
            if not text.strip():
                raise TerminalDraftError(f"{PROVIDER}: the answer is empty")
            return _json_object(text), _usage(resp)

        return self.with_retry(send)


def _enum_name(value: object) -> str | None:
    if value is None:
        return None
    return str(getattr(value, "value", value))


def _records(resp: Any) -> list[DraftRecord]:
    feedback = getattr(resp, "prompt_feedback", None)
    blocked = _enum_name(getattr(feedback, "block_reason", None)) if feedback else None
    if blocked:
        raise TerminalDraftError(
            f"{PROVIDER}: the request was blocked ({vendor_code(blocked) or 'unrecognised'})"
        )
    candidates = getattr(resp, "candidates", None) or []
    if not candidates:
        raise TerminalDraftError(f"{PROVIDER}: the response has no candidates")
    candidate = candidates[0]
    finish = _enum_name(getattr(candidate, "finish_reason", None))
    if finish == "MAX_TOKENS":
        raise TerminalDraftError(
            f"{PROVIDER}: the answer was cut at the output token limit (MAX_TOKENS)"
        )
    if finish in _BLOCKED_FINISH:
        raise TerminalDraftError(
            f"{PROVIDER}: the model refused to answer ({vendor_code(finish) or 'unrecognised'})"
        )
    if finish not in _OK_FINISH:
        raise TerminalDraftError(
            f"{PROVIDER}: the answer ended with {vendor_code(finish) or 'unrecognised'}"
        )
    content = getattr(candidate, "content", None)
    parts = (getattr(content, "parts", None) or []) if content is not None else []
    text = "".join(
        p.text for p in parts if getattr(p, "text", None) and not getattr(p, "thought", False)
    )
    if not text.strip():
        raise TerminalDraftError(f"{PROVIDER}: the answer is empty")
    try:
        parsed = CaseRecordResponse.model_validate_json(text)
    except ValidationError as exc:
        raise TerminalDraftError(
            f"{PROVIDER}: the answer does not match the case-record schema "
            f"({exc.error_count()} error(s))"
        ) from None
    return to_draft_records(parsed)


def _usage(resp: Any) -> tuple[int, int]:
    meta = getattr(resp, "usage_metadata", None)
    if meta is None:
        return 0, 0
    output = int(meta.candidates_token_count or 0) + int(
        getattr(meta, "thoughts_token_count", 0) or 0
    )  # thinking tokens are billed as output
    return int(meta.prompt_token_count or 0), output


def _map_api_error(exc: Any) -> DraftError:
    """The one place Gemini API errors become ours."""
    status = getattr(exc, "code", None)
    status = status if isinstance(status, int) else None
    code = vendor_code(getattr(exc, "status", None))  # never the vendor's text
    what = f"{PROVIDER}: HTTP {status}" + (f" ({code})" if code else "")
    if transient_status(status):
        return TransientDraftError(what, retry_after=_retry_after(exc))
    return TerminalDraftError(what)


def _retry_after(exc: Any) -> float | None:
    """The server's RetryInfo delay (Google's own hint), else the Retry-After header."""
    details = getattr(exc, "details", None)
    error = details.get("error") if isinstance(details, dict) else None
    items = error.get("details") if isinstance(error, dict) else None
    for item in items if isinstance(items, list) else []:
        if isinstance(item, dict) and str(item.get("@type", "")).endswith("google.rpc.RetryInfo"):
            delay = parse_duration(item.get("retryDelay"))
            if delay is not None:
                return delay
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    return parse_retry_after(headers) if headers is not None else None
