"""Drafting providers. ``get_drafter(spec)`` picks one from a ``provider[:model]`` spec.

Providers are imported lazily, so an unused provider's SDK is never loaded; a provider whose
SDK is not installed raises ``ConfigError`` with an install hint.

    extractive[:v1]           the offline default (no model, no network)
    fake[:scripted]           scripted fake for tests
    openai:<model>            OpenAI, or an OpenAI-compatible server via PMEM_OPENAI_BASE_URL
    anthropic:<model>         Anthropic (ANTHROPIC_API_KEY)
    gemini:<model>            Google Gemini (GEMINI_API_KEY / GOOGLE_API_KEY)
"""

from __future__ import annotations

import importlib

from core.errors import ConfigError
from core.ports import Drafter

KNOWN_PROVIDERS = ("extractive", "fake", "openai", "anthropic", "gemini")
_PACKAGES = {"openai": "openai", "anthropic": "anthropic", "gemini": "google-genai"}


def get_drafter(spec: str) -> Drafter:
    """A drafter for ``spec``, e.g. "extractive", "extractive:v1", "fake:scripted"."""
    provider, _, model = spec.strip().partition(":")
    provider = provider.strip().lower()
    model = model.strip()
    if provider == "extractive":
        return _extractive(model)
    if provider == "fake":
        return _fake(model)
    if provider == "openai":
        return _vendor(provider, model, "providers.openai_provider", "OpenAIDrafter")
    if provider == "anthropic":
        return _vendor(provider, model, "providers.anthropic_provider", "AnthropicDrafter")
    if provider == "gemini":
        return _vendor(provider, model, "providers.gemini_provider", "GeminiDrafter")
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


def _vendor(provider: str, model: str, module_name: str, class_name: str) -> Drafter:
    if not model:
        raise ConfigError(
            f"the {provider} provider needs a model name",
            hint=f"give the model as {provider}:<model>",
        )
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:  # the SDK (or one of its own dependencies) is missing
        package = _PACKAGES[provider]
        raise ConfigError(
            f"the {provider} provider needs the {package!r} package, which is not installed",
            hint=f"pip install {package} (or install personal-memory with its {provider} extra)",
        ) from exc
    drafter: Drafter = getattr(module, class_name)(model)
    return drafter
