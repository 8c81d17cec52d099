"""What every SDK adapter does the same way: build the guarded prompt (secrets redacted, static
prefix first), send it through the one retry layer, wrap the answer with model and usage."""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from typing import Protocol

from core.errors import ConfigError
from core.models import Conversation, DraftOutput, DraftRecord, MemoryIndexEntry
from prompts.case_record import build_prompt_guarded
from providers._retry import RetryPolicy, call_with_retry

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


def draft_via(adapter: SdkAdapter, conversations: list[Conversation], context: list[MemoryIndexEntry]) -> DraftOutput:
    static, dynamic, redacted = build_prompt_guarded(conversations, context)
    if redacted:
        log.info("%s: secret guard redacted %d value(s) before the request", adapter.model, redacted)
    records, usage = call_with_retry(
        adapter.prepare(static, dynamic), policy=adapter.retry, sleep=adapter._sleep, label=adapter.model
    )
    return DraftOutput(
        records=records, model=adapter.model, prompt_version=adapter.prompt_version,
        input_tokens=usage[0], output_tokens=usage[1],
    )  # fmt: skip


LOCAL_KEY = "not-needed"  # OpenAI-compatible local servers want some key, and ignore it


def first_env(names: Sequence[str]) -> str | None:
    """The value of the first of these environment variables that is set and not empty."""
    return next((os.environ[n] for n in names if os.environ.get(n)), None)


def credentials(
    what: str, *, api_key: str | None, base_url: str | None, key_envs: Sequence[str],
    base_url_envs: Sequence[str], offline: str, hint: str, keyless_with_base_url: bool = False,
) -> tuple[str, str | None]:  # fmt: skip
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
