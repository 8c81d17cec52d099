"""An earlier decision imported after the memory of its own later change (ADR 0037, round 8):
users (and ``bench/eval.py``) backfill the ChatGPT export, then Claude's, so a conversation can
arrive after the memory made from a later conversation that changed what it decided. It is
appended to that later memory as **history**: the memory's current decision stays the later
one; this conversation's decision and reasons go under the history heading.

Found by the drafter's own reading replayed in time order, not by a threshold (round 7: no
cosine separates the two labelled pairs from the 24 neighbours; the replay does): the one
candidate is the offered memory the append gate ranks first over every memory
(``pairing.gate_nearest``), when it is a decision memory whose matter began after this
conversation ended; its matter (the messages its evidence cites) is read as a conversation of
its time against this conversation's own record, and only when that reading appends it to
this record (a change of this decision) is this conversation the memory's history. The append
gate lets such an append through only when it adds history alone and the memory is the
store's first over every memory (``flows.append_gate``)."""

from __future__ import annotations

from collections.abc import Callable

from core.models import (
    Channel,
    Conversation,
    DraftRecord,
    MemoryIndexEntry,
    Message,
    Provenance,
)
from core.sections import Sections, heading, history_entry
from providers.extractive.change import _utc, began_after
from providers.extractive.pairing import GATE_SIM, gate_nearest, gate_text

#: the id the replay gives this conversation's own record
_SELF = "history:self"


def later_change(
    conv: Conversation,
    record: DraftRecord,
    context: list[MemoryIndexEntry],
    draft: Callable[[Conversation, list[MemoryIndexEntry]], DraftRecord | None],
    entry_of: Callable[..., MemoryIndexEntry],
) -> MemoryIndexEntry | None:
    """The later decision memory whose own conversation changes ``record``'s decision, or None.
    ``draft`` and ``entry_of`` are the drafter's ``draft_record`` and ``index_entry`` (the
    drafter calls this module: passed in, not imported back)."""
    if record.memory_kind != "decision" or record.action != "create":
        return None
    offered = [e for e in context if conv.key not in e.source_conversation_keys]
    near = gate_nearest(gate_text(conv), offered)
    if near is None or near[1] < GATE_SIM:
        return None
    later = near[0]
    if later.kind != "decision" or not later.matter.strip() or not began_after(later, conv):
        return None
    if len(later.source_conversation_keys) != 1:
        # the replay reads one conversation, as measured: a memory that already joined several
        # holds several matters' words (H11: a visa memory that took in a later change read as
        # changing the job offer it mentions)
        return None
    assert later.occurred_at is not None  # it began after the conversation
    began = _utc(later.occurred_at)
    replay = Conversation(
        key=f"history:{later.id}",
        source=conv.source,
        external_id=later.id,
        title=later.title,
        created_at=began,
        messages=[
            Message(
                key=f"history:{later.id}:0",
                node_id="0",
                parent_id=None,
                role="user",
                channel=Channel.PERSON,
                content_type="text",
                text=later.matter,
                created_at=began,
                position=0,
            )
        ],
        provenance=Provenance(file="history", position=0),
    )
    own = entry_of(record, _SELF, 1, {m.key: m.text for m in conv.messages})
    again = draft(replay, [own])
    if again is not None and again.action == "append" and again.target_memory_id == _SELF:
        return later
    return None


def as_history(record: DraftRecord, later: MemoryIndexEntry) -> DraftRecord:
    """``record`` as an append to ``later`` that adds history only: its decision, reasons and
    open points under the history heading with the date it was current
    (``core.sections.history_entry``, as a superseded decision's), no decision of its own, the
    later memory's index line kept."""
    cur = Sections.parse(record.canonical_summary)
    lang = cur.lang() or "en"
    when = record.valid_from or record.occurred_at
    # what it left open then, and settled, beside its reasons
    since = when.date().isoformat() if when else None
    entry = history_entry(cur, lang, since, ("reasons", "open", "resolved"))
    summary = Sections([], [(heading("history", lang), entry)]).render()
    return record.model_copy(
        update={
            "action": "append",
            "target_memory_id": later.id,
            "expected_revision": later.current_revision,
            "canonical_summary": summary,
            "index_summary": later.index_summary,
            "title": later.title,
        }
    )


def is_history_only(summary: str) -> bool:
    """The summary adds history alone: no decision (an append that cannot supersede)."""
    s = Sections.parse(summary)
    return s.structured and not s.lines("decision") and bool(s.lines("history"))
