"""Consent before text leaves the machine (issue 10, item 7).

A drafter or embedder is *remote* when it is one of the vendor SDK adapters (openai, anthropic,
gemini): the text goes to that vendor's API, or to the server a base URL names (pmem cannot know
where an OpenAI-compatible server forwards it, so a base URL counts as remote too, under its own
destination). Before the first run that would send anything, the CLI shows what would go
(conversations, characters, sources, date range, exclusions) and asks; the answer is
remembered per data dir, provider, destination and scope (state/consent.py), so the monthly
re-import runs unattended under it. Every run checks here again (`require_drafting`), so a
run started any other way (the schedule, another local user's Prefect run) without a
remembered consent refuses before anything is sent.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from core.errors import ConsentRequired
from core.settings import Settings
from state.consent import Consent, ConsentStore

# provider -> (base URL environment variables, default API host); the same names the adapters
# in providers/ read
_DRAFTERS = {
    "openai": (("PMEM_OPENAI_BASE_URL", "OPENAI_BASE_URL"), "api.openai.com"),
    "anthropic": (("PMEM_ANTHROPIC_BASE_URL", "ANTHROPIC_BASE_URL"), "api.anthropic.com"),
    "gemini": (("PMEM_GEMINI_BASE_URL", "GOOGLE_GEMINI_BASE_URL"), "generativelanguage.googleapis.com"),
}
_EMBEDDERS = {k: v for k, v in _DRAFTERS.items() if k in ("openai", "gemini")}
EMBEDDING_SCOPE = "memories"


@dataclass(frozen=True)
class Target:
    """Where a run's text would go."""

    kind: str  # drafting | embedding
    provider: str
    destination: str
    scope: str
    model: str

    @property
    def ident(self) -> tuple[str, str, str, str]:
        return (self.kind, self.provider, self.destination, self.scope)

    def describe(self) -> str:
        return f"{self.model} at {self.destination}"


def _destination(envs: tuple[str, ...], default: str) -> str:
    for name in envs:
        url = os.environ.get(name)
        if url:
            parts = urlsplit(url if "//" in url else f"//{url}")
            return parts.netloc or url
    return default


def drafting_target(model: str, source: str) -> Target | None:
    """The remote destination of a drafter's model id (``openai:gpt-…``), or None (local)."""
    provider = model.partition(":")[0].strip().lower()
    if provider not in _DRAFTERS:
        return None
    envs, default = _DRAFTERS[provider]
    return Target("drafting", provider, _destination(envs, default), source, model)


def embedding_target(spec: str | None = None) -> Target | None:
    """The remote destination of the configured embedder (PMEM_EMBEDDER), or None (local)."""
    from providers.embeddings import DEFAULT_EMBEDDER, ENV

    spec = (spec if spec is not None else os.environ.get(ENV) or DEFAULT_EMBEDDER).strip()
    provider = spec.partition(":")[0].strip().lower()
    if provider not in _EMBEDDERS:
        return None
    envs, default = _EMBEDDERS[provider]
    return Target("embedding", provider, _destination(envs, default), EMBEDDING_SCOPE, spec)


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


def grant(settings: Settings, target: Target, excludes: list[str], preview: dict[str, Any]) -> Consent:
    return store(settings).grant(
        Consent(kind=target.kind, provider=target.provider, destination=target.destination,
                scope=target.scope, model=target.model, excludes=list(excludes), preview=preview)
    )  # fmt: skip


def preview_of(est: dict[str, Any]) -> dict[str, Any]:
    """The part of an estimate kept with a consent: counts and dates, no text."""
    keys = ("conversations_to_draft", "characters", "sources", "first_date", "last_date", "excluded")
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
    if est.get("already_drafted"):
        lines.append(f"already drafted earlier (not sent again): {est['already_drafted']:,} conversations")
    return lines
