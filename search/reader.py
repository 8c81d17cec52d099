"""Reading the memory back: hybrid search, time-first recall, load_context, and the derived
indexes they read. One module per part, joined here into ``SearchStore``:

    hybrid.py    ``search``: lexical + trigram + vector candidates fused by weighted RRF
    recall.py    ``recall``: time-first recall over the raw messages
                 (its SQL reads in recall_reads.py, the turn list in turn_list.py)
    context.py   ``load_context``: the short index an AI client reads first
    common.py    the default fusion, result models and helpers they share
    store.index  ``sync_messages``, ``embed_pending``, vector indexes: the derived indexes (the
                 store's: written there, read here)

The query arrives understood (``search.understand.Query``) or as a plain string.
"""

from __future__ import annotations

from search.common import DEFAULT_FUSION, RankedHit, RecallHit, RecallResult
from search.context import Context
from search.hybrid import HybridSearch
from search.recall import Recall
from store.index import EmbedStats, IndexUpkeep, QueryEmbedder, sanitize

__all__ = [
    "DEFAULT_FUSION",
    "EmbedStats",
    "QueryEmbedder",
    "RankedHit",
    "RecallHit",
    "RecallResult",
    "SearchStore",
    "sanitize",
]


class SearchStore(HybridSearch, Recall, Context, IndexUpkeep):
    """Search, recall and load_context, and the derived indexes behind them (one database, one
    default embedder)."""
