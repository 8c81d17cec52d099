"""Monthly summaries and the profile by a vendor model, through the case-record adapters'
``complete_json`` (same client, error mapping and retry layer; each SDK stays in its adapter).

The answer is validated against the prompt's schema; the citations are then checked by code
(flows/summarize.py keeps only the month's own memories and messages; the store refuses ids
that do not exist), like evidence."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pydantic import ValidationError

from core.errors import ConfigError, TerminalDraftError
from core.summaries import MonthDraft, MonthInputs, MonthSummary, ProfileDraft
from prompts.summary import (
    MONTH_PROMPT_VERSION,
    MONTH_SCHEMA_NAME,
    PROFILE_PROMPT_VERSION,
    PROFILE_SCHEMA_NAME,
    MonthSummaryResponse,
    ProfileResponse,
    build_month_prompt,
    build_profile_prompt,
    month_schema,
    profile_schema,
)


class LlmSummarizer:
    month_prompt_version = MONTH_PROMPT_VERSION
    profile_prompt_version = PROFILE_PROMPT_VERSION

    def __init__(self, spec: str) -> None:
        from providers import get_drafter

        self.adapter = get_drafter(spec)
        if not hasattr(self.adapter, "complete_json"):
            raise ConfigError(
                f"{spec} cannot write summaries",
                hint="use extractive or openai / anthropic / gemini",
            )
        self.model = self.adapter.model

    def keyword_corpus(self, months: Iterable[MonthInputs]) -> None:
        return None  # the model picks the keywords

    def summarize_month(self, inputs: MonthInputs) -> MonthDraft:
        static, dynamic = build_month_prompt(inputs)
        data, (tin, tout) = self.adapter.complete_json(  # type: ignore[attr-defined]
            static, dynamic, MONTH_SCHEMA_NAME, month_schema()
        )
        try:
            r = MonthSummaryResponse.model_validate(data)
        except ValidationError as exc:
            raise TerminalDraftError(
                f"{self.model}: the answer does not match the month-summary schema ({exc.error_count()} error(s))"
            ) from None
        lines = [" ".join(x.text.split()) for x in r.sentences]
        return MonthDraft(
            summary="\n".join(lines),
            sentiment=r.sentiment,
            keywords=r.keywords[:8],
            memory_ids=_union(x.memoryIds for x in r.sentences),
            message_keys=_union(x.messageKeys for x in r.sentences),
            input_tokens=tin,
            output_tokens=tout,
            citations=[
                {"memory_ids": list(x.memoryIds), "message_keys": list(x.messageKeys)}
                for x in r.sentences
            ],
        )

    def summarize_profile(self, months: Sequence[MonthSummary]) -> ProfileDraft:
        static, dynamic = build_profile_prompt(sorted(months, key=lambda m: m.month))
        data, (tin, tout) = self.adapter.complete_json(  # type: ignore[attr-defined]
            static, dynamic, PROFILE_SCHEMA_NAME, profile_schema()
        )
        try:
            r = ProfileResponse.model_validate(data)
        except ValidationError as exc:
            raise TerminalDraftError(
                f"{self.model}: the answer does not match the profile schema ({exc.error_count()} error(s))"
            ) from None
        # a line citing months is drawn from those months' records, as the months cite them
        of_month = {m.month: m.memory_ids for m in months}
        cites = [
            {
                "memory_ids": _union([x.memoryIds, *(of_month.get(mo, ()) for mo in x.months)]),
                "message_keys": [],
            }
            for x in r.lines
        ]
        return ProfileDraft(
            profile="\n".join(" ".join(x.text.split()) for x in r.lines),
            months=_union(x.months for x in r.lines),
            memory_ids=_union(c["memory_ids"] for c in cites),
            input_tokens=tin,
            output_tokens=tout,
            citations=cites,
        )


def _union(groups: Iterable[Iterable[str]]) -> list[str]:
    """Every id of the groups once, in the order first named."""
    out: list[str] = []
    for group in groups:
        out.extend(x for x in group if x not in out)
    return out
