"""OpenAI drafter (``openai:<model>``), through the official ``openai`` SDK.

Structured output: Chat Completions with ``response_format={"type": "json_schema", ...}`` and
the case-record response schema in OpenAI's strict form. The same adapter serves
OpenAI-compatible servers (Ollama, vLLM, LM Studio, ...) through ``base_url``
(``PMEM_OPENAI_BASE_URL`` or ``OPENAI_BASE_URL``); for those an API key is optional.

One retry layer: the SDK client is built with ``max_retries=0`` and an explicit timeout, every
vendor error is mapped once here into ``TransientDraftError`` / ``TerminalDraftError``, and
``providers._retry.call_with_retry`` retries the transient ones. A refused, filtered, truncated
(``finish_reason == "length"``) or unparsable answer is a ``TerminalDraftError``, never a
partial record. Error messages carry the status and the vendor's error code, never the
vendor's message (it may quote the request) and never the key.
"""

from __future__ import annotations

import copy
from typing import Any

from pydantic import ValidationError

from core.errors import ConfigError, DraftError, TerminalDraftError, TransientDraftError
from core.models import DraftRecord
from prompts.case_record import CaseRecordResponse, response_json_schema, to_draft_records
from providers._json import json_object as _json_object
from providers._retry import parse_retry_after, transient_status, vendor_code
from providers._sdk import SdkDrafter, Send

try:
    import openai
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ConfigError(
        "the openai provider needs the 'openai' package",
        hint="pip install openai (or install personal-memory with its openai extra)",
    ) from exc


PROVIDER = "openai"
DEFAULT_TIMEOUT = 180.0  # seconds for one request
DEFAULT_MAX_OUTPUT_TOKENS = 16_000
SCHEMA_NAME = "case_records"
BASE_URL_ENVS = ("PMEM_OPENAI_BASE_URL", "OPENAI_BASE_URL")
API_KEY_ENV = "OPENAI_API_KEY"


_UNSUPPORTED_IN_STRICT = ("minLength", "maxLength")


def strict_schema() -> dict[str, Any]:
    """The response schema in OpenAI's strict form: every property required, no extras."""
    schema = copy.deepcopy(response_json_schema())
    _make_strict(schema)
    return schema


def _make_strict(node: Any) -> None:
    """Walk a schema node (not a name -> schema map) and tighten it in place."""
    if isinstance(node, list):
        for item in node:
            _make_strict(item)
        return
    if not isinstance(node, dict):
        return
    properties = node.get("properties")
    if node.get("type") == "object" or isinstance(properties, dict):
        node.setdefault("additionalProperties", False)
        if isinstance(properties, dict):
            node["required"] = list(properties)
    node.pop("default", None)  # strict mode: every field is sent, null where optional
    for keyword in _UNSUPPORTED_IN_STRICT:  # checked by our pydantic model instead
        node.pop(keyword, None)
    for key, value in node.items():
        if key in ("properties", "$defs", "definitions") and isinstance(value, dict):
            for sub in value.values():
                _make_strict(sub)
        elif key in ("items", "anyOf", "allOf", "oneOf", "prefixItems"):
            _make_strict(value)


class OpenAIDrafter(SdkDrafter):
    """Drafts case records with an OpenAI (or OpenAI-compatible) chat model."""

    PROVIDER = PROVIDER
    EXAMPLE_MODEL = "gpt-4.1-mini"
    KEY_ENVS = (API_KEY_ENV,)
    BASE_URL_ENVS = BASE_URL_ENVS
    KEY_HINT = f"set {API_KEY_ENV}, or PMEM_OPENAI_BASE_URL for a local OpenAI-compatible server"
    KEYLESS_WITH_BASE_URL = True
    DEFAULT_TIMEOUT = DEFAULT_TIMEOUT
    DEFAULT_MAX_OUTPUT_TOKENS = DEFAULT_MAX_OUTPUT_TOKENS

    def make_client(self, api_key: str, base_url: str | None, timeout: float) -> Any:
        return openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)

    def response_schema(self) -> dict[str, Any]:
        return strict_schema()

    def prepare(self, static: str, dynamic: str) -> Send:
        body = self.request_body(static, dynamic)
        return lambda: self._call(body)

    def request_body(self, static: str, dynamic: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "model": self.model_name,
            "messages": [
                {"role": "system", "content": static},  # static first: prompt caches apply
                {"role": "user", "content": dynamic},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": SCHEMA_NAME, "schema": self._schema, "strict": True},
            },
        }
        # OpenAI's own endpoint wants max_completion_tokens (its reasoning models reject
        # max_tokens); OpenAI-compatible servers know max_tokens.
        official = self.base_url is None or "api.openai.com" in self.base_url
        key = "max_completion_tokens" if official else "max_tokens"
        body[key] = self.max_output_tokens
        return body

    def _send(self, body: dict[str, Any]) -> Any:
        """The one place the SDK is called: its errors become ours."""
        try:
            return self._client.chat.completions.create(**body)
        except openai.APIError as exc:
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
        """One structured answer for another schema (the summaries' prompts), through the same
        client, error mapping and retry layer. Returns (the parsed JSON object, usage)."""
        strict = copy.deepcopy(schema)
        _make_strict(strict)
        body = self.request_body(static, dynamic)
        body["response_format"] = {
            "type": "json_schema",
            "json_schema": {"name": name, "schema": strict, "strict": True},
        }

        def send() -> tuple[dict[str, Any], tuple[int, int]]:
            resp = self._send(body)
            choice = resp.choices[0] if getattr(resp, "choices", None) else None
            text = choice.message.content if choice is not None else None
            if choice is None or choice.finish_reason == "length" or not text:
                raise TerminalDraftError(f"{PROVIDER}: no complete answer")
            return _json_object(_strip_fence(text)), _usage(resp)

        return self.with_retry(send)


def _records(resp: Any) -> list[DraftRecord]:
    if not getattr(resp, "choices", None):
        raise TerminalDraftError(f"{PROVIDER}: the response has no choices")
    choice = resp.choices[0]
    if choice.finish_reason == "length":
        raise TerminalDraftError(
            f"{PROVIDER}: the answer was cut at the output token limit (finish_reason=length)"
        )
    if choice.finish_reason == "content_filter":
        raise TerminalDraftError(f"{PROVIDER}: the answer was withheld by the content filter")
    message = choice.message
    if getattr(message, "refusal", None):
        raise TerminalDraftError(f"{PROVIDER}: the model refused to answer")
    text = message.content
    if not text or not text.strip():
        raise TerminalDraftError(f"{PROVIDER}: the answer is empty")
    try:
        parsed = CaseRecordResponse.model_validate_json(_strip_fence(text))
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
    return int(usage.prompt_tokens or 0), int(usage.completion_tokens or 0)


def _strip_fence(text: str) -> str:
    """Some compatible servers wrap JSON in a Markdown fence despite the schema."""
    stripped = text.strip()
    if stripped.startswith("```") and stripped.endswith("```"):
        stripped = stripped[3:-3]
        newline = stripped.find("\n")
        if newline >= 0 and not stripped[:newline].strip().startswith("{"):
            stripped = stripped[newline + 1 :]
    return stripped


def _map_error(exc: openai.APIError) -> DraftError:
    """The one place OpenAI errors become ours."""
    if isinstance(exc, openai.APITimeoutError):
        return TransientDraftError(f"{PROVIDER}: the request timed out")
    if isinstance(exc, openai.APIConnectionError):
        return TransientDraftError(f"{PROVIDER}: could not connect")
    if isinstance(exc, openai.APIStatusError):
        status = exc.status_code
        code = vendor_code(exc.code) or vendor_code(exc.type)  # never the vendor's text
        what = f"{PROVIDER}: HTTP {status}" + (f" ({code})" if code else "")
        if status == 429 and code == "insufficient_quota":
            return TerminalDraftError(f"{what}: the account's quota is used up")
        if transient_status(status):
            return TransientDraftError(what, retry_after=parse_retry_after(exc.response.headers))
        return TerminalDraftError(what)
    return TerminalDraftError(f"{PROVIDER}: {type(exc).__name__}")
