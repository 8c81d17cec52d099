"""Embedding routes for the fake vendor servers of tests/fakeservers.py (kept separate from the
chat routes): response bodies of OpenAI's ``POST /embeddings`` and Gemini's
``POST /<version>/models/<model>:batchEmbedContents``, and a deterministic vector maker.

    with FakeServer(Reply(200, openai_embeddings([[0.1, 0.2], ...]))) as server:
        OpenAIEmbedder("text-embedding-3-small", base_url=server.url + "/v1", dim=2).embed([...])
"""

from __future__ import annotations

import hashlib
from typing import Any

from tests.fakeservers import FakeServer, Recorded, Reply

__all__ = [
    "FakeServer",
    "Recorded",
    "Reply",
    "gemini_embeddings",
    "openai_embeddings",
    "vector_for",
]


def vector_for(text: str, dim: int) -> list[float]:
    """A deterministic unit-free vector for ``text`` (the same text, the same vector)."""
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).digest()
    return [((digest[i % len(digest)] + i) % 17 - 8) / 8.0 for i in range(dim)]


def openai_embeddings(
    vectors: list[list[float]], model: str = "text-embedding-3-small"
) -> dict[str, Any]:
    return {
        "object": "list",
        "data": [
            {"object": "embedding", "index": i, "embedding": v} for i, v in enumerate(vectors)
        ],
        "model": model,
        "usage": {"prompt_tokens": 8 * len(vectors), "total_tokens": 8 * len(vectors)},
    }


def gemini_embeddings(vectors: list[list[float]]) -> dict[str, Any]:
    return {"embeddings": [{"values": v} for v in vectors]}
