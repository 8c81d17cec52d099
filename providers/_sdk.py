"""What every SDK adapter does the same way: check the model name, find the key and base URL,
build the guarded prompt (secrets redacted, static prefix first), send it through the one retry
layer, wrap the answer with model and usage. `SdkDrafter` holds that; an adapter adds its
client, its request shape, its answer parsing and its error mapping."""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable, Sequence
from typing import Any, ClassVar, Protocol, TypeVar

from core.errors import ConfigError
from core.models import Conversation, DraftOutput, DraftRecord, MemoryIndexEntry
from prompts.case_record import PROMPT_VERSION, build_prompt_guarded, response_json_schema
from providers._retry import DEFAULT_POLICY, RetryPolicy, call_with_retry

log = logging.getLogger("pmem.providers")

Send = Callable[[], tuple[list[DraftRecord], tuple[int, int]]]


class SdkAdapter(Protocol):
    model: str
    prompt_version: str
    retry: RetryPolicy

    def _sleep(self, seconds: float) -> None: ...

    def prepare(self, static: str, dynamic: str) -> Send:
        """The vendor request for this prompt, as a call that the retry layer may repeat."""
        ...


def draft_via(
    adapter: SdkAdapter, conversations: list[Conversation], context: list[MemoryIndexEntry]
) -> DraftOutput:
    static, dynamic, redacted = build_prompt_guarded(conversations, context)
    if redacted:
        log.info(
            "%s: secret guard redacted %d value(s) before the request", adapter.model, redacted
        )
    records, usage = call_with_retry(
        adapter.prepare(static, dynamic),
        policy=adapter.retry,
        sleep=adapter._sleep,
        label=adapter.model,
    )
    return DraftOutput(
        records=records,
        model=adapter.model,
        prompt_version=adapter.prompt_version,
        input_tokens=usage[0],
        output_tokens=usage[1],
    )


LOCAL_KEY = "not-needed"  # OpenAI-compatible local servers want some key, and ignore it


def first_env(names: Sequence[str]) -> str | None:
    """The value of the first of these environment variables that is set and not empty."""
    return next((os.environ[n] for n in names if os.environ.get(n)), None)


def credentials(
    what: str,
    *,
    api_key: str | None,
    base_url: str | None,
    key_envs: Sequence[str],
    base_url_envs: Sequence[str],
    offline: str,
    hint: str,
    keyless_with_base_url: bool = False,
) -> tuple[str, str | None]:
    """(API key, base URL) for an adapter: explicit values first, then the environment. A local
    OpenAI-compatible server (a base URL and no key) may go without a key when allowed."""
    base_url = base_url if base_url is not None else first_env(base_url_envs)
    key = api_key if api_key is not None else first_env(key_envs)
    if key is not None:
        return key, base_url
    if keyless_with_base_url and base_url is not None:
        return LOCAL_KEY, base_url
    raise ConfigError(
        f"the {what} needs an API key in {' or '.join(key_envs)} (or use the offline default {offline})",
        hint=hint,
    )


T = TypeVar("T")


class SdkDrafter:
    """The common part of the vendor adapters (OpenAI, Anthropic, Gemini).

    A subclass names its vendor in the class attributes, builds its SDK client in
    ``make_client`` (the SDK's own retries off: ``providers._retry`` is the one retry layer)
    and sends in ``prepare`` / ``complete_json``, each send wrapped in ``with_retry``.
    """

    PROVIDER: ClassVar[str]
    EXAMPLE_MODEL: ClassVar[str]  # for the hint when the model name is missing
    KEY_ENVS: ClassVar[tuple[str, ...]]
    BASE_URL_ENVS: ClassVar[tuple[str, ...]]
    KEY_HINT: ClassVar[str]
    KEYLESS_WITH_BASE_URL: ClassVar[bool] = False  # a local OpenAI-compatible server
    DEFAULT_TIMEOUT: ClassVar[float] = 300.0  # seconds for one request
    DEFAULT_MAX_OUTPUT_TOKENS: ClassVar[int] = 16_000

    prompt_version: str = PROMPT_VERSION

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float | None = None,
        max_output_tokens: int | None = None,
        retry: RetryPolicy = DEFAULT_POLICY,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        p = self.PROVIDER
        if not model:
            raise ConfigError(
                f"the {p} provider needs a model name",
                hint=f"give it as {p}:<model>, e.g. --llm {p}:{self.EXAMPLE_MODEL}",
            )
        self.model_name = model
        self.model = f"{p}:{model}"
        api_key, base_url = credentials(
            f"{p} provider",
            api_key=api_key,
            base_url=base_url,
            key_envs=self.KEY_ENVS,
            base_url_envs=self.BASE_URL_ENVS,
            offline="drafter 'extractive'",
            keyless_with_base_url=self.KEYLESS_WITH_BASE_URL,
            hint=self.KEY_HINT,
        )
        self.base_url = base_url
        self.max_output_tokens = max_output_tokens or self.DEFAULT_MAX_OUTPUT_TOKENS
        self.retry = retry
        self._sleep = sleep
        self._client = self.make_client(
            api_key, base_url, self.DEFAULT_TIMEOUT if timeout is None else timeout
        )
        self._schema = self.response_schema()

    def make_client(self, api_key: str, base_url: str | None, timeout: float) -> Any:
        raise NotImplementedError

    def response_schema(self) -> dict[str, Any]:
        """The case-record schema in the form this vendor takes."""
        return response_json_schema()

    def prepare(self, static: str, dynamic: str) -> Send:
        raise NotImplementedError

    def draft(
        self, conversations: list[Conversation], context: list[MemoryIndexEntry]
    ) -> DraftOutput:
        return draft_via(self, conversations, context)

    def with_retry(self, send: Callable[[], T]) -> T:
        return call_with_retry(send, policy=self.retry, sleep=self._sleep, label=self.model)
