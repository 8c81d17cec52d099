"""What every SDK adapter does the same way: build the guarded prompt (secrets redacted, static
prefix first), send it through the one retry layer, wrap the answer with model and usage."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Protocol

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
