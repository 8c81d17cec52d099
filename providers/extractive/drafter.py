"""The drafter itself: one case record per conversation from its parts."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from datetime import datetime

from core.gate_rank import cited_text
from core.models import (
    Channel,
    Conversation,
    DraftOutput,
    DraftRecord,
    EvidencePointer,
    MemoryIndexEntry,
    Message,
)
from core.secrets import redact_conversation
from prompts.case_record import PROMPT_VERSION, build_prompt
from providers.extractive.change import _CHANGE_RE, _IN_BATCH, _action, _merge_into
from providers.extractive.history import as_history, later_change
from providers.extractive.matter import decides_anew
from providers.extractive.pairing import model_change
from providers.extractive.roles import (
    _ANNOUNCES_RE,
    _LEAD_FILLER_RE,
    _Parts,
    change_reasons,
    parts_and_paired,
)
from providers.extractive.sentences import (
    _REDACTED_RE,
    RUN_ON_CHANGE_CHARS,
    Sentence,
    _cap,
    _dedupe,
    _one_line,
    detect_language,
    joined_clauses,
    person_sentences,
    split_sentences,
    whole_sentences,
)
from providers.extractive.structure import dropped_things
from providers.extractive.structure import flags as grammar_flags
from providers.extractive.titles import (
    _aliases,
    _comparable,
    _is_marker,
    _occurred_at,
    _tags,
    _title,
    salient_terms,
)
from stages.prefilter import LESSON_RE

MODEL = "extractive:v1"


_INDEX_MAX = 140


_QUOTE_MAX = 300


_SUMMARY_MAX = 4000


_SECTION_ITEM_MAX = 300


_MAX_EVIDENCE = 16


_PREFERENCE_RE = re.compile(
    r"好き|嫌い|好み|苦手|いつも|\bprefer|\bI (?:like|love|hate|dislike)\b|\bfavou?rite\b"
    r"|\bI(?:'d| would) rather\b",
    re.IGNORECASE,
)


_PROJECT_RE = re.compile(
    r"プロジェクト|開発|構築|作りたい|作って|サイト|アプリ|事業|会社|\bproject\b|\bdevelop"
    r"|\bbuild(?:ing)?\b|\bapplication\b|\bapp\b|\bwebsite\b|\bwebshop\b|\bbusiness\b"
    r"|\bcompany\b|\bstartup\b|\blogo\b",
    re.IGNORECASE,
)


_HEADINGS = {
    "ja": {
        "background": "背景",
        "topics": "話題",
        "decision": "決定",
        "reasons": "理由",
        "result": "結果",
        "open": "未解決",
        "resolved": "解決済み",
        "history": "経緯",
    },
    "en": {
        "background": "Background",
        "topics": "Topics",
        "decision": "Decision",
        "reasons": "Reasons",
        "result": "Result",
        "open": "Open points",
        "resolved": "Resolved",
        "history": "Earlier decisions",
    },
}


class ExtractiveDrafter:
    """Deterministic drafter: case records from the person's own sentences."""

    prompt_version: str = PROMPT_VERSION

    def __init__(self, model: str = MODEL) -> None:
        self.model = model

    def draft(
        self, conversations: list[Conversation], context: list[MemoryIndexEntry]
    ) -> DraftOutput:
        records = draft_records(conversations, context)
        static, dynamic = build_prompt(conversations, context)
        output_text = json.dumps([r.model_dump(mode="json") for r in records], ensure_ascii=False)
        return DraftOutput(
            records=records,
            model=self.model,
            prompt_version=self.prompt_version,
            input_tokens=_estimate_tokens(static) + _estimate_tokens(dynamic),
            output_tokens=_estimate_tokens(output_text),
        )


def index_entry(
    record: DraftRecord, memory_id: str, revision: int, said: dict[str, str] | None = None
) -> MemoryIndexEntry:
    """The index entry a drafted record would have as memory ``memory_id`` (what the drafter
    offers for a change of mind: title, index line, names, sources and when it began), with its
    matter (the messages its evidence cites, redacted, as ``store.matter`` reads them) when
    ``said`` (message key -> text) holds them."""
    keys = dict.fromkeys(e.message_key for e in record.evidence)
    return MemoryIndexEntry(
        matter=cited_text(said[k] for k in keys if k in said) if said else "",
        id=memory_id,
        title=record.title,
        index_summary=record.index_summary,
        kind=record.memory_kind,
        current_revision=revision,
        aliases=record.aliases,
        source_conversation_keys=record.source_conversation_keys,
        occurred_at=record.occurred_at,
    )


def draft_records(
    conversations: list[Conversation], context: list[MemoryIndexEntry]
) -> list[DraftRecord]:
    """One record per conversation, in order; a conversation that changes the decision of an
    earlier one of the same batch is merged into that one's record (the memory does not exist
    yet, so it cannot be appended to): one record, the later decision current, the earlier one
    in its history section."""
    records: list[DraftRecord] = []
    said = {m.key: m.text for c in conversations for m in c.messages}
    for conv in conversations:
        pending = [
            index_entry(r, f"{_IN_BATCH}{i}", 0, said)
            for i, r in enumerate(records)
            if r.action == "create"
        ]
        record = draft_record(conv, [*context, *pending])
        if record is None:
            continue
        if record.target_memory_id and record.target_memory_id.startswith(_IN_BATCH):
            i = int(record.target_memory_id.removeprefix(_IN_BATCH))
            records[i] = _merge_into(records[i], record)
            continue
        records.append(record)
    return records


def draft_record(conv: Conversation, context: list[MemoryIndexEntry]) -> DraftRecord | None:
    """One case record for ``conv``, or None when it has no drafting text."""
    conv, _ = redact_conversation(conv)  # before anything is cut from the text
    messages = conv.drafting_messages
    if not messages:
        return None
    person = person_sentences(messages)
    parts, paired = parts_and_paired(person, conv.title or "")
    lang = detect_language(messages)
    kind = _kind(parts, person)
    terms = salient_terms(conv, messages)
    title = _title(conv, messages, parts, terms)
    occurred = _occurred_at(conv, messages)
    # a change of mind is read in whole sentences but for the longest run-ons (sentences.py)
    whole = whole_sentences(person, RUN_ON_CHANGE_CHARS)
    action, target, revision = _action(conv, whole, context, paired.decisions, decides_anew)
    own = {e.id for e in context if conv.key in e.source_conversation_keys}
    rule = target if action == "append" and target not in own else None
    if target not in own and (hit := model_change(conv, whole, context, paired, rule)):
        (action, target, revision), parts = hit  # the pair model decides the change (ADR 0037)
        kind = _kind(parts, person)
    changing = action == "append" and target not in own  # a change of an earlier decision
    if changing:
        parts = change_reasons(parts, person)
    parts = _joined(parts)
    record = DraftRecord(
        action=action,
        target_memory_id=target,
        expected_revision=revision,
        title=title,
        memory_kind=kind,
        canonical_summary=_summary(parts, lang),
        index_summary=_index_summary(parts, title, changing),
        aliases=_aliases(title, terms),
        tags=_tags(conv.source, kind, terms),
        occurred_at=occurred,
        valid_from=_valid_from(parts, occurred),
        stated_facts=_stated_facts(parts),
        inferences=_inferences(parts, lang),
        evidence=_evidence(parts, messages),
        source_conversation_keys=[conv.key],
    )
    later = (
        later_change(conv, record, context, draft_record, index_entry)
        if action == "create"
        else None
    )
    return as_history(record, later) if later is not None else record


def _joined(parts: _Parts) -> _Parts:
    """Each role's neighbouring clauses of one run-on sentence as one item (``joined_clauses``)."""
    return replace(
        parts,
        background=joined_clauses(parts.background),
        topics=joined_clauses(parts.topics),
        decisions=joined_clauses(parts.decisions),
        reasons=joined_clauses(parts.reasons),
        results=joined_clauses(parts.results),
        open_points=joined_clauses(parts.open_points),
    )


def _stated_facts(parts: _Parts) -> list[str]:
    """The person's decision, reason and result sentences (whole sentences, not reason clauses),
    and the sentences in which they settled an open point: all said by the person."""
    decided = {s.index for s in parts.decisions}
    reasons = [s for s in parts.reasons if s.index not in decided]
    settled = [r for _, r in parts.resolved]
    return _dedupe(s.text for s in parts.decisions + reasons + parts.results + settled)


def _inferences(parts: _Parts, lang: str) -> list[str]:
    """What the drafter concludes and the person did not say: nothing. A resolved open point is
    the person's own statement (a stated fact, and the Resolved section pairs it with the open
    point), not an inference; an offline drafter draws no conclusions of its own."""
    del parts, lang
    return []


def _kind(parts: _Parts, person: list[Sentence]) -> str:
    text = "\n".join(s.text for s in person)
    if parts.decisions:
        return "decision"
    if LESSON_RE.search(text):
        return "lesson"
    if _PREFERENCE_RE.search(text):
        return "preference"
    if _PROJECT_RE.search(text):
        return "project"
    return "episode"


def _summary(parts: _Parts, lang: str) -> str:
    heads = _HEADINGS[lang]
    sections = [
        (heads["background"], parts.background),
        (heads["decision"], parts.decisions),
        (heads["reasons"], parts.reasons),
        (heads["result"], parts.results),
        (heads["topics"], parts.topics),
        (heads["open"], parts.open_points),
    ]
    blocks = [_section(head, items) for head, items in sections if items]
    if parts.resolved:
        lines = [
            f"- {_one_line(_cap(o.text, _SECTION_ITEM_MAX))} → {_one_line(_cap(r.text, _SECTION_ITEM_MAX))}"
            for o, r in parts.resolved
        ]
        blocks.append("\n".join([f"## {heads['resolved']}", *_dedupe(lines)]))
    return _cap("\n\n".join(blocks), _SUMMARY_MAX)


def _section(heading: str, items: list[Sentence]) -> str:
    lines = [f"- {_one_line(_cap(s.text, _SECTION_ITEM_MAX))}" for s in items]
    return "\n".join([f"## {heading}", *_dedupe(lines)])


def _index_summary(parts: _Parts, title: str, changing: bool = False) -> str:
    """One line to recognise the case by: the current decision, else the result, else the first
    thing said that is not the title again. For a conversation that changes an earlier decision
    (``changing``) the current decision is the new plan, not the sentence that gives the old one
    up (「…もう通わせないことにした。」 before 「秋からはサッカー教室に入れる。」)."""
    if changing:
        plans = [d for d in parts.decisions if not _gives_up(d.text)]
        if plans and len(plans) < len(parts.decisions):
            parts = replace(parts, decisions=plans)
    # the current decision: the first one, unless the person later changed their mind (then the
    # first decision of the message that says so); details decided after it are not the gist
    changed = [s for s in parts.decisions[1:] if _CHANGE_RE.search(s.text)]
    start = (
        changed[-1].message.key
        if changed
        else parts.decisions[0].message.key
        if parts.decisions
        else None
    )
    last = [
        s for s in parts.decisions if s.message.key == start and not _ANNOUNCES_RE.search(s.text)
    ][:1]
    gist = _comparable(title.split(": ", 1)[-1])
    for s in [
        *last,
        *parts.results[-1:],
        *parts.background,
        *parts.topics,
        *parts.reasons,
        *parts.open_points,
    ]:
        line = _one_line(s.text)
        said = _comparable(_LEAD_FILLER_RE.sub("", line))
        same = said.startswith(gist) or gist.startswith(said)
        if not same and not _is_marker(line):
            return _cap(line, _INDEX_MAX)
    people = {s.message.key for s in [*parts.background, *parts.topics]}
    return f"{_one_line(title)} ({len(people) or 1} message{'s' if len(people) > 1 else ''})"[
        :_INDEX_MAX
    ]


def _gives_up(text: str) -> bool:
    """The sentence gives a plan up (``structure.dropped_things``) or negates its predicate."""
    return bool(dropped_things(text)) or bool({"ja:negated", "en:negated"} & grammar_flags(text))


def _valid_from(parts: _Parts, occurred: datetime | None) -> datetime | None:
    timed = [s.message.created_at for s in parts.decisions if s.message.created_at is not None]
    return timed[-1] if timed else occurred


def _evidence(parts: _Parts, messages: list[Message]) -> list[EvidencePointer]:
    chosen = [
        *parts.decisions,
        *parts.reasons,
        *parts.open_points,
        *(s for pair in parts.resolved for s in pair),
        *parts.results,
        *parts.background,
    ]
    pointers: list[EvidencePointer] = []
    seen: set[int] = set()
    for s in chosen:
        if s.index in seen:  # a reason clause of a decision sentence already quoted
            continue
        if _REDACTED_RE.search(s.text):  # it held a secret: no evidence from it
            continue
        seen.add(s.index)
        pointers.append(EvidencePointer(message_key=s.message.key, quote_hint=_quote(s.text)))
        if len(pointers) == _MAX_EVIDENCE:
            break
    return pointers or _assistant_fallback(messages)


def _assistant_fallback(messages: list[Message]) -> list[EvidencePointer]:
    for msg in messages:
        if msg.channel != Channel.ASSISTANT:
            continue
        sentences = [t for t in split_sentences(msg.text) if not _REDACTED_RE.search(t)]
        if sentences:
            return [EvidencePointer(message_key=msg.key, quote_hint=_quote(sentences[0]))]
    return []


def _quote(sentence: str) -> str:
    """A quote hint: the sentence, or its first characters (still an exact substring)."""
    return sentence[:_QUOTE_MAX].rstrip() or sentence[:_QUOTE_MAX]


def _estimate_tokens(text: str) -> int:
    return (len(text) + 3) // 4
