"""Consent before text leaves the machine (issue 10, item 7).

A drafter or embedder is *remote* when it is one of the vendor SDK adapters (openai, anthropic,
gemini): the text goes to that vendor's API, or to the server a base URL names (pmem cannot know
where an OpenAI-compatible server forwards it, so a base URL counts as remote too, under its own
destination). Before the first run that would send anything, the CLI shows what would go
(conversations, characters, sources, date range, exclusions) and asks; the answer is
remembered per data dir, provider, destination and scope (state/consent.py), so the monthly
re-import runs unattended under it. Every run checks again (`flows.pipeline.apply_consent`), so a
run started any other way (the schedule, another local user's Prefect run) without a
remembered consent refuses before anything is sent.
"""

from __future__ import annotations

from typing import Any

from core.errors import ConsentRequired
from core.settings import Settings
from state.consent import (
    EMBEDDING_SCOPE,
    Consent,
    ConsentStore,
    Target,
    drafting_target,
    embedding_allowed,
    embedding_target,
)

__all__ = [
    "EMBEDDING_SCOPE",
    "OTHERS_SUFFIX",
    "Target",
    "drafting_scope",
    "drafting_target",
    "embedding_allowed",
    "embedding_target",
    "find",
    "grant",
    "preview_lines",
    "preview_of",
    "require",
    "store",
]

#: a drafting consent that covers other speakers' messages (`--include-others`) has its own scope
#: (``line+others``): a consent given without them never covers a run that sends them
OTHERS_SUFFIX = "+others"


def drafting_scope(source: str, include_others: bool) -> str:
    """The consent scope of drafting ``source``: the source, or ``<source>+others`` when other
    speakers' messages (chat histories, issue 17) are sent too."""
    return source + OTHERS_SUFFIX if include_others else source


def store(settings: Settings) -> ConsentStore:
    return ConsentStore(settings.data_dir)


def find(settings: Settings, target: Target) -> Consent | None:
    return store(settings).find(*target.ident)


def require(settings: Settings, target: Target) -> Consent:
    """The remembered consent for this target, or ConsentRequired (nothing is sent)."""
    consent = find(settings, target)
    if consent is None:
        what = "conversations" if target.kind == "drafting" else "memory texts"
        raise ConsentRequired(
            f"sending {target.scope} {what} to {target.describe()} needs the owner's consent, "
            "and none is recorded for this data dir",
            hint="run `pmem backfill` with this --llm in a terminal to see what would be sent and "
            "answer, or add --yes; `--estimate` shows it without sending anything",
        )
    return consent


def grant(
    settings: Settings, target: Target, excludes: list[str], preview: dict[str, Any]
) -> Consent:
    return store(settings).grant(
        Consent(
            kind=target.kind,
            provider=target.provider,
            destination=target.destination,
            scope=target.scope,
            model=target.model,
            excludes=list(excludes),
            preview=preview,
        )
    )


def preview_of(est: dict[str, Any]) -> dict[str, Any]:
    """The part of an estimate kept with a consent: counts and dates, no text."""
    keys = (
        "conversations_to_draft",
        "characters",
        "sources",
        "first_date",
        "last_date",
        "excluded",
    )
    return {k: est.get(k) for k in keys}


def preview_lines(est: dict[str, Any], target: Target, excludes: list[str]) -> list[str]:
    """What the owner is shown before consenting (and on --estimate)."""
    dates = f"{est['first_date']} – {est['last_date']}" if est.get("first_date") else "no dates"
    lines = [
        f"would send to {target.describe()}: {est['conversations_to_draft']:,} conversations, "
        f"{est['characters']:,} characters, from {', '.join(est['sources']) or '-'} ({dates})",
        f"excluded: {est['excluded']:,} conversations"
        + (f" by {', '.join(excludes)}" if excludes else " (no --exclude rules)"),
    ]
    if est.get("include_others"):
        lines.append(
            "including other speakers' messages from your chat histories (--include-others)"
        )
    if est.get("already_drafted"):
        lines.append(
            f"already drafted earlier (not sent again): {est['already_drafted']:,} conversations"
        )
    return lines
