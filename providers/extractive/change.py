"""Append or create: the memory a later conversation belongs to (the same conversation, or the
earlier decision it changes), and merging two drafts of one batch."""

from __future__ import annotations

import re
from typing import Literal

from core.models import Conversation, DraftRecord, MemoryIndexEntry
from core.sections import merge_summaries
from providers.extractive.roles import _INTENT_EN_RE, _decision_cue, _plain_intent
from providers.extractive.sentences import Sentence, _content_terms, _dedupe
from providers.extractive.titles import _MAX_ALIASES

Action = Literal["create", "append", "noop"]


_IN_BATCH = "batch:"


def _merge_into(earlier: DraftRecord, later: DraftRecord) -> DraftRecord:
    since = earlier.valid_from.date().isoformat() if earlier.valid_from else None
    return earlier.model_copy(
        update={
            "canonical_summary": merge_summaries(
                earlier.canonical_summary, later.canonical_summary, supersede=True, since=since
            ),
            "index_summary": later.index_summary or earlier.index_summary,
            "aliases": _dedupe([*earlier.aliases, *later.aliases], casefold=True)[:_MAX_ALIASES],
            "tags": _dedupe([*earlier.tags, *later.tags]),
            "valid_from": later.valid_from or earlier.valid_from,
            "stated_facts": _dedupe([*earlier.stated_facts, *later.stated_facts]),
            "inferences": _dedupe([*earlier.inferences, *later.inferences]),
            "evidence": [*earlier.evidence, *later.evidence],
            "source_conversation_keys": _dedupe(
                [*earlier.source_conversation_keys, *later.source_conversation_keys]
            ),
        }
    )


_CHANGE_RE = re.compile(
    r"やっぱり|やはり|(?:決めた|にした|にしてた|買った|始めた|選んだ)(?:けど|けれど|が|のに)|決めたとき"
    r"|変え(?:る|よう|た|ることに)|見直(?:す|した|そう)|取りやめ|中止|延期|あきらめ|諦め|撤回|乗り換え"
    r"|\bchanged? (?:my|our) minds?\b|\bafter all\b|\bno longer\b|\bswitch(?:ed|ing)? (?:to|back)\b"
    r"|\bgo(?:ing)? back to\b|\breconsider",
    re.IGNORECASE,
)


def _action(
    conv: Conversation, person: list[Sentence], context: list[MemoryIndexEntry], *, decided: bool
) -> tuple[Action, str | None, int | None]:
    """Append to the memory of the same conversation; or, when the person changes an earlier
    decision (やっぱり, 〜って決めたけど, changed my mind, ...), to the offered decision memory
    that names the most of the same things (two at least); else a new memory."""
    for entry in context:
        if conv.key in entry.source_conversation_keys:
            return "append", entry.id, entry.current_revision
    target = changed_memory(person, context) if decided else None
    if target is not None:
        return "append", target.id, target.current_revision
    return "create", None, None


def changed_memory(
    person: list[Sentence], context: list[MemoryIndexEntry]
) -> MemoryIndexEntry | None:
    """The context memory whose decision these sentences change, if they change one: a change
    of mind is stated where the person sets out the case (their first message) or in the
    decision itself, and the memory it changes shares names with that sentence (two or more
    with the whole conversation); the one sharing the most wins."""
    if not person:
        return None
    first = person[0].message.key
    cues = [
        s
        for s in person
        if _CHANGE_RE.search(s.text)
        and (s.message.key == first or _decision_cue(s.text))
        and (_PAST_DECISION_RE.search(s.text) or _decision_cue(s.text) or _intends(s.text))
    ]
    if not cues:
        return None
    names = set().union(*(_content_terms(s.text) for s in person))
    cue_names = set().union(*(_content_terms(s.text) for s in cues))
    best: tuple[int, int, MemoryIndexEntry] | None = None
    for entry in context:
        if entry.kind != "decision":
            continue
        theirs = _content_terms("\n".join([entry.title, entry.index_summary, *entry.aliases]))
        near, shared = len(cue_names & theirs), len(names & theirs)
        if near >= 1 and shared >= 2 and (best is None or (near, shared) > best[:2]):
            best = (near, shared, entry)
    return best[2] if best else None


_PAST_DECISION_RE = re.compile(
    r"(?:決めた|決めました|にした|にしてた|買った|始めた|選んだ|契約した)(?:けど|けれど|が|のに|とき|時)"
    r"|\b(?:I|we) (?:had )?(?:decided|chose|picked|went with|bought)\b.*\b(?:but|now)\b",
    re.IGNORECASE,
)


_VOLITIONAL_RE = re.compile(
    r"[おこそとのほもよろごぞどぼぽ]うと(?:思|考え)|\bI(?:'m| am) (?:going|planning) to\b",
    re.IGNORECASE,
)


def _intends(text: str) -> bool:
    """The sentence states what the person will do (a plan, a volition, an intent)."""
    return bool(_VOLITIONAL_RE.search(text) or _INTENT_EN_RE.search(text) or _plain_intent(text))
