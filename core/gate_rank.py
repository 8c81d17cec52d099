"""The append gate's ranking of memories (ADR 0037, round 8), one pure function for both sides
(here in ``core`` because the store reads its budget and the drafter its ranking): the
store's retrieval (:func:`search.nearest.nearest_memory`, over every active memory's stored
vector) and the drafter's one candidate (``pairing.gate_nearest``, ``change.gate_candidate``,
over the offered memories), so that the drafter drafts the append the gate can pass.

Two stages. First every memory by the cosine of the person's text to the memory's text as the
store embeds it (title, aliases, index line): a one-line index says little of a matter, so on
the dev sets the memory a later conversation changes comes first only 37 of 58 times. Then the
first ``RERANK`` of those again, by the cosine to the memory's *matter*: its text followed by the
messages its evidence cites (what was said about it, redacted, cut to ``MATTER_CHARS``), which
puts it first 51 of 58 times (10 of the two clean sets' 12 against 8; ``bench/append_gate_calibrate.py``).
The cosine an append is bounded by (``APPEND_SIM``) stays the first stage's.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from core.models import MemoryIndexEntry
from core.secrets import redact

#: how many of the first stage's memories the matter re-ranks: the changed memory lies within the
#: first 10 by the index line for 57 of the dev sets' 60 labelled changes
#: (``bench/append_gate_calibrate.py``); re-ranking 5, 10 or 20 puts it first 51, 51 and 52 times
RERANK = 10

#: the matter's characters embedded (the person text's ``PERSON_CHARS``: the same budget)
MATTER_CHARS = 2000


def memory_text(title: str, aliases: Iterable[str], index_summary: str) -> str:
    """The text of a memory the store embeds (store.index's ``_MEMORY_EMBED_TEXT``) and the
    gate's first stage ranks by, on both sides."""
    return "\n".join(x for x in (title, ", ".join(aliases), index_summary) if x)


def entry_text(entry: MemoryIndexEntry) -> str:
    """:func:`memory_text` of an offered memory (the drafter's side)."""
    return memory_text(entry.title, entry.aliases, entry.index_summary)


def cited_text(texts: Iterable[str]) -> str:
    """What a memory's evidence's messages said, joined, cut to twice the matter's budget and
    redacted (the store's ``store.matter`` and the drafter's ``index_entry`` alike)."""
    return redact("\n".join(texts)[: 2 * MATTER_CHARS])[0]


def matter_text(memory_text: str, cited: str) -> str:
    """A memory's matter: its text and then what its evidence's messages said, cut."""
    return "\n".join(x for x in (memory_text, cited) if x)[:MATTER_CHARS]


def first(
    ids: Sequence[str],
    scores: Sequence[float],
    rescore: Callable[[list[int]], Sequence[float]],
) -> int:
    """The index of the memory ranked first: the ``RERANK`` best by ``scores`` (ties: the
    smaller id), then the best of those by ``rescore(indices)``, the same score with the
    matter's cosine in place of the memory text's (ties: the earlier by the first stage)."""
    if not ids:
        raise ValueError("no memory to rank")
    top = sorted(range(len(ids)), key=lambda j: (-scores[j], ids[j]))[:RERANK]
    if len(top) == 1:
        return top[0]
    cos = list(rescore(top))
    best = max(range(len(top)), key=lambda i: (cos[i], -i))
    return top[best]
