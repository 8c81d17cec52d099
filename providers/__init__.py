"""Drafting providers. ``get_drafter(spec)`` picks one from a ``provider[:model]`` spec.

Providers are imported lazily, so an unused provider's SDK is never loaded.
"""

from __future__ import annotations

from core.errors import ConfigError
from core.ports import Drafter

OFFLINE_DEFAULT = "extractive"
KNOWN_PROVIDERS = ("extractive", "fake", "openai", "anthropic", "gemini")
_LATER = ("openai", "anthropic", "gemini")


def get_drafter(spec: str) -> Drafter:
    """A drafter for ``spec``, e.g. "extractive", "extractive:v1", "fake:scripted"."""
    provider, _, model = spec.strip().partition(":")
    provider = provider.strip().lower()
    model = model.strip()
    if provider == "extractive":
        return _extractive(model)
    if provider == "fake":
        return _fake(model)
    if provider in _LATER:
        raise ConfigError(
            f"the {provider} provider is not built yet in this version; use "
            f"'{OFFLINE_DEFAULT}', the offline default drafter (no model, no network)",
            hint=f"run with --llm {OFFLINE_DEFAULT} (or PMEM_LLM={OFFLINE_DEFAULT})",
        )
    raise ConfigError(
        f"unknown LLM provider {provider!r}; known providers: {', '.join(KNOWN_PROVIDERS)}",
        hint="give the model as provider:model, e.g. extractive or openai:<model>",
    )


def _extractive(model: str) -> Drafter:
    from providers.extractive import MODEL, ExtractiveDrafter

    if model not in ("", MODEL.partition(":")[2]):
        raise ConfigError(f"unknown extractive drafter version {model!r}; known: {MODEL}")
    return ExtractiveDrafter()


def _fake(model: str) -> Drafter:
    from providers.fake import MODEL, ScriptedDrafter

    if model not in ("", MODEL.partition(":")[2]):
        raise ConfigError(f"unknown fake drafter {model!r}; known: {MODEL}")
    return ScriptedDrafter()
