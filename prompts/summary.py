"""The summaries' prompts (seed 001): one for a month, one for the global profile, each with its
response schema and version.

Static instructions first (provider prompt caches apply), then the month's material: its case
records (id, title, index line) and what the person wrote (message key, time, text). The
person's text passes the secret guard first, conversation by conversation
(``core.secrets.redact_messages``), so no request carries a flagged secret. Keys and ids are
ours and stay as they are, so the citations can be checked against the store.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from core.secrets import redact_messages
from core.summaries import MonthInputs, MonthSummary

MONTH_PROMPT_VERSION = "month-summary-v2"  # v2: a citation per sentence
PROFILE_PROMPT_VERSION = "profile-v2"
MONTH_SCHEMA_NAME = "month_summary"
PROFILE_SCHEMA_NAME = "profile"
MAX_MONTH_CHARS = 60_000  # of the person's text per month in one request
MAX_MESSAGE_CHARS = 2_000


class MonthSentence(BaseModel):
    """One sentence of a month summary and what it is drawn from."""

    model_config = ConfigDict(extra="ignore")

    text: str = Field(min_length=1)
    memoryIds: list[str] = Field(default_factory=list)
    messageKeys: list[str] = Field(default_factory=list)


class MonthSummaryResponse(BaseModel):
    model_config = ConfigDict(extra="ignore")

    sentences: list[MonthSentence] = Field(min_length=1)
    sentiment: float = Field(ge=-1.0, le=1.0)
    keywords: list[str] = Field(default_factory=list)


class ProfileLine(BaseModel):
    """One line of the profile and the months and case records it rests on."""

    model_config = ConfigDict(extra="ignore")

    text: str = Field(min_length=1)
    months: list[str] = Field(default_factory=list)
    memoryIds: list[str] = Field(default_factory=list)


class ProfileResponse(BaseModel):
    model_config = ConfigDict(extra="ignore")

    lines: list[ProfileLine] = Field(min_length=1)


def month_schema() -> dict[str, Any]:
    return MonthSummaryResponse.model_json_schema()


def profile_schema() -> dict[str, Any]:
    return ProfileResponse.model_json_schema()


MONTH_STATIC = """You write one month's summary of a person's life from their conversations with AI assistants.
Write in the language the person mostly wrote in that month. At most 400 characters.
Say what happened, what they decided and why, and what stayed open, in their own terms; do not guess
beyond the material. Write it as `sentences`, one short sentence each, and give every sentence the ids
of the case records it is drawn from in `memoryIds` (only ids listed below; at least one: a sentence
no case record supports is left out) and the keys of the messages it quotes or rests on in
`messageKeys` (only keys listed below). Give the month's overall mood as `sentiment` in [-1, 1]
(-1 very bad, 0 neutral, 1 very good) and up to 8 `keywords` a person would search for."""

PROFILE_STATIC = """You write a short profile of a person from their monthly summaries: who they are (work, family,
interests), what they care about, and how that changed over time, with the months where it changed.
At most 1200 characters, in the language the summaries mostly use. Do not guess beyond the summaries.
Write it as `lines`, one statement each, and give every line the months it rests on in `months`
(YYYY-MM, only months given below) and the case-record ids in `memoryIds` (only ids given below)."""


def build_month_prompt(inputs: MonthInputs) -> tuple[str, str]:
    lines = [
        f"Month: {inputs.month} (time zone {inputs.time_zone})",
        "",
        "Case records of the month:",
    ]
    if not inputs.memories:
        lines.append("(none)")
    for m in inputs.memories:
        lines.append(f"- id {m.id} [{m.kind}] {m.title}: {m.index_summary}")
    lines += ["", "What the person wrote (key, time, text):"]
    by_conv: dict[str, list[int]] = defaultdict(list)
    for i, msg in enumerate(inputs.messages):
        by_conv[msg.conversation_key].append(i)
    texts = [msg.text[:MAX_MESSAGE_CHARS] for msg in inputs.messages]
    for idxs in by_conv.values():  # a secret split across two messages of one conversation
        for i, t in zip(idxs, redact_messages([texts[i] for i in idxs]), strict=True):
            texts[i] = t
    used = 0
    for msg, text in zip(inputs.messages, texts, strict=True):
        if used + len(text) > MAX_MONTH_CHARS:
            lines.append("(later messages of the month left out for length)")
            break
        when = msg.created_at.isoformat() if msg.created_at else "?"
        lines.append(f"[{msg.key}] {when}\n{text}")
        used += len(text)
    return MONTH_STATIC, "\n".join(lines)


def build_profile_prompt(months: list[MonthSummary]) -> tuple[str, str]:
    parts = []
    summaries = redact_messages([m.summary for m in months])
    for m, text in zip(months, summaries, strict=True):
        parts.append(
            f"## {m.month} (sentiment {m.sentiment:+.2f}; keywords: {', '.join(m.keywords)}; "
            f"memory ids: {', '.join(m.memory_ids) or '-'})\n{text}"
        )
    return PROFILE_STATIC, "\n\n".join(parts)
