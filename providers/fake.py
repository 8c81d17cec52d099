"""A scripted fake drafter for tests (never used in production).

Each call to ``draft`` takes the next outcome from the script: a ``DraftOutput`` is returned,
a callable ``(conversations, context) -> DraftOutput`` is called, an exception instance
(e.g. ``TransientDraftError``) is raised. When the script runs out, it drafts like the
extractive drafter, under its own model name.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterable

from core.models import Conversation, DraftOutput, MemoryIndexEntry
from prompts.case_record import PROMPT_VERSION
from providers.extractive import ExtractiveDrafter

MODEL = "fake:scripted"

ScriptFn = Callable[[list[Conversation], list[MemoryIndexEntry]], DraftOutput]
Outcome = DraftOutput | ScriptFn | BaseException


class ScriptedDrafter:
    """Plays back scripted outcomes; records the conversation keys of every call in ``history``."""

    prompt_version: str = PROMPT_VERSION

    def __init__(self, script: Iterable[Outcome] = (), *, model: str = MODEL) -> None:
        self.model = model
        self.history: list[list[str]] = []
        self._script: deque[Outcome] = deque(script)
        self._fallback = ExtractiveDrafter(model=model)

    @property
    def remaining(self) -> int:
        """Scripted outcomes not yet played."""
        return len(self._script)

    def push(self, *outcomes: Outcome) -> None:
        """Append outcomes to the script."""
        self._script.extend(outcomes)

    def draft(
        self, conversations: list[Conversation], context: list[MemoryIndexEntry]
    ) -> DraftOutput:
        self.history.append([c.key for c in conversations])
        if not self._script:
            return self._fallback.draft(conversations, context)
        outcome = self._script.popleft()
        if isinstance(outcome, BaseException):
            raise outcome
        if isinstance(outcome, DraftOutput):
            return outcome
        return _checked(outcome(conversations, context))


def _checked(result: object) -> DraftOutput:
    if not isinstance(result, DraftOutput):
        raise TypeError("a scripted callable must return a DraftOutput")
    return result
