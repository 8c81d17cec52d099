"""The offline extractive drafter: no model, no network, deterministic.

It builds one case record per conversation from the person's own sentences: the background
(their first statements), the decision, the reasons, the result and what is still open, with
evidence pointers whose quote hints are copied exactly from the source messages.

The secret guard runs first, on the whole conversation (``core.secrets.redact_conversation``):
everything below (sentences, the title, aliases, tags) is cut from the redacted text, so a key
cannot lose its ``sk-`` prefix, split at ``/`` or be lower-cased into a tag and slip through.
A sentence that held a secret is never offered as evidence.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

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
from stages.prefilter import DECISION_RE, LESSON_RE, REASON_RE, split_prose

MODEL = "extractive:v1"

_TITLE_MAX = 80
_INDEX_MAX = 140
_QUOTE_MAX = 200
_SUMMARY_MAX = 1500
_SECTION_ITEM_MAX = 300
_MAX_EVIDENCE = 4
_MAX_ALIASES = 8
_MAX_TAG_TERMS = 5

_SENTENCE_END_RE = re.compile(r"[。！？]+|[.!?]+(?=\s|$)|\n")
_FENCE_RE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_JA_CHAR_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff66-\uff9f]")
_LATIN_RE = re.compile(r"[A-Za-z]")
_KATAKANA_RE = re.compile(r"[ァ-ヺ][ァ-ヺー]{2,}")
_LATIN_TERM_RE = re.compile(r"(?<![\w.])[A-Za-z][A-Za-z0-9_]*(?:[.+#-][A-Za-z0-9_]+)*[+#]*")
_URL_RE = re.compile(r"(?:https?://|www\.)\S+", re.IGNORECASE)
_REDACTED_RE = re.compile(r"\[REDACTED:[a-z0-9\-]+\]")
_SENTENCE_OPENERS = frozenset(".!?。！？\n\"'(*-:>")

_OPEN_RE = re.compile(
    r"まだ|未定|未解決|検討中|迷って|悩んで|TODO|\bnot sure\b|\bunsure\b|\bundecided\b"
    r"|\bstill (?:need|have to|open|unclear|deciding)\b|\bopen question\b|\blater\b",
    re.IGNORECASE,
)
_RESULT_RE = re.compile(
    r"結果|結局|うまくいった|上手くいった|解決(?:した|しました|済)|動いた|できた(?!ら)"
    r"|\bturn(?:s|ed) out\b|\b(?:it|that|this|which) (?:finally |now )?worked\b|\bworks now\b"
    r"|\b(?:fixed|solved) it\b|\bis (?:now )?(?:fixed|solved)\b|\bin the end\b",
    re.IGNORECASE,
)
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
_STOP_WORDS = """
i i'm a an the ok okay can could would please yes no what how why when where which who
is are do does if in on for to and or but so my we you it this that also now then
thanks thank hi hello sure e.g i.e etc vs
"""
_STOP_TERMS = frozenset(_STOP_WORDS.split())

Action = Literal["create", "append", "noop"]

_HEADINGS = {
    "ja": {
        "background": "背景",
        "topics": "話題",
        "decision": "決定",
        "reasons": "理由",
        "result": "結果",
        "open": "未解決",
    },
    "en": {
        "background": "Background",
        "topics": "Topics",
        "decision": "Decision",
        "reasons": "Reasons",
        "result": "Result",
        "open": "Open points",
    },
}


@dataclass(frozen=True)
class Sentence:
    """One sentence of a message: ``text`` is an exact substring of ``message.text``."""

    message: Message
    text: str
    index: int  # position among the conversation's person sentences


@dataclass(frozen=True)
class _Parts:
    background: list[Sentence]
    topics: list[Sentence]
    decisions: list[Sentence]
    reasons: list[Sentence]
    results: list[Sentence]
    open_points: list[Sentence]


class ExtractiveDrafter:
    """Deterministic drafter: case records from the person's own sentences."""

    prompt_version: str = PROMPT_VERSION

    def __init__(self, model: str = MODEL) -> None:
        self.model = model

    def draft(
        self, conversations: list[Conversation], context: list[MemoryIndexEntry]
    ) -> DraftOutput:
        records = [r for conv in conversations if (r := draft_record(conv, context)) is not None]
        static, dynamic = build_prompt(conversations, context)
        output_text = json.dumps([r.model_dump(mode="json") for r in records], ensure_ascii=False)
        return DraftOutput(
            records=records,
            model=self.model,
            prompt_version=self.prompt_version,
            input_tokens=_estimate_tokens(static) + _estimate_tokens(dynamic),
            output_tokens=_estimate_tokens(output_text),
        )


def draft_record(conv: Conversation, context: list[MemoryIndexEntry]) -> DraftRecord | None:
    """One case record for ``conv``, or None when it has no drafting text."""
    conv, _ = redact_conversation(conv)  # before anything is cut from the text
    messages = conv.drafting_messages
    if not messages:
        return None
    person = person_sentences(messages)
    parts = _parts(person)
    lang = detect_language(messages)
    title = _title(conv, messages)
    kind = _kind(parts, person)
    terms = salient_terms(conv, messages)
    occurred = _occurred_at(conv, messages)
    action, target, revision = _action(conv.key, title, context)
    return DraftRecord(
        action=action,
        target_memory_id=target,
        expected_revision=revision,
        title=title,
        memory_kind=kind,
        canonical_summary=_summary(parts, lang),
        index_summary=_index_summary(parts, title),
        aliases=_aliases(title, terms),
        tags=_tags(conv.source, kind, terms),
        occurred_at=occurred,
        valid_from=_valid_from(parts, occurred),
        stated_facts=_stated_facts(parts),
        inferences=[],
        evidence=_evidence(parts, messages),
        source_conversation_keys=[conv.key],
    )


# ---------------------------------------------------------------- sentences


def split_sentences(text: str) -> list[str]:
    """Sentences of ``text`` (code blocks skipped); each one is an exact substring of ``text``."""
    out: list[str] = []
    for start, end in _prose_spans(text):
        out.extend(_split_span(text, start, end))
    return out


def _prose_spans(text: str) -> list[tuple[int, int]]:
    spans: list[tuple[int, int]] = []
    pos = 0
    for m in _FENCE_RE.finditer(text):
        spans.append((pos, m.start()))
        pos = m.end()
    spans.append((pos, len(text)))
    return [(a, b) for a, b in spans if b > a]


def _split_span(text: str, start: int, end: int) -> list[str]:
    out: list[str] = []
    pos = start
    for m in _SENTENCE_END_RE.finditer(text, start, end):
        _add_sentence(out, text[pos : m.end()])
        pos = m.end()
    _add_sentence(out, text[pos:end])
    return out


def _add_sentence(out: list[str], piece: str) -> None:
    sentence = piece.strip()
    if len(sentence) >= 2 and any(ch.isalnum() for ch in sentence):
        out.append(sentence)


def person_sentences(messages: list[Message]) -> list[Sentence]:
    """The person's prose sentences, in order (log lines and code blocks left out)."""
    out: list[Sentence] = []
    for msg in messages:
        if msg.channel != Channel.PERSON:
            continue
        # prose lines are lines of the message text, so each sentence is a substring of it
        for text in split_sentences(split_prose(msg.text)[0]):
            if text in msg.text:
                out.append(Sentence(msg, text, len(out)))
    return out


# ---------------------------------------------------------------- the case parts


def _parts(person: list[Sentence]) -> _Parts:
    decisions = [s for s in person if DECISION_RE.search(s.text) and not _is_question(s.text)]
    used = {s.index for s in decisions}
    reasons = [s for s in person if s.index not in used and REASON_RE.search(s.text)]
    used |= {s.index for s in reasons}
    reasons = sorted([*reasons, *_reason_clauses(decisions)], key=lambda s: s.index)
    results = [
        s
        for s in person
        if s.index not in used and _RESULT_RE.search(s.text) and not _is_question(s.text)
    ]
    used |= {s.index for s in results}
    background = [s for s in _first_message(person) if s.index not in used][:2]
    used |= {s.index for s in background}
    open_points = [s for s in person if s.index not in used and _OPEN_RE.search(s.text)]
    open_points = open_points or _last_question(person, used)
    used |= {s.index for s in open_points}
    topics = _topics(person, used)
    return _Parts(background, topics, decisions[-3:], reasons[:3], results[-2:], open_points[-3:])


def _reason_clauses(decisions: list[Sentence]) -> list[Sentence]:
    """The reason inside a decision sentence ("... because X", "Xので、..."), as a substring."""
    out: list[Sentence] = []
    for s in decisions:
        m = REASON_RE.search(s.text)
        if m is None:
            continue
        if m.group()[0].isascii():
            clause = s.text[m.start() :]  # English: the reason follows its marker
        elif m.group() in ("ので", "から", "ため"):
            clause = s.text[: m.end()]  # Japanese: the reason comes before its marker
        else:
            clause = s.text
        out.append(Sentence(s.message, clause.strip(), s.index))
    return out


def _stated_facts(parts: _Parts) -> list[str]:
    """The person's decision and reason sentences (whole sentences, not reason clauses)."""
    decided = {s.index for s in parts.decisions}
    reasons = [s for s in parts.reasons if s.index not in decided]
    return _dedupe(s.text for s in parts.decisions + reasons)


def _first_message(person: list[Sentence]) -> list[Sentence]:
    return [s for s in person if s.message.key == person[0].message.key] if person else []


def _is_question(text: str) -> bool:
    return text.rstrip().endswith(("?", "？"))


def _last_question(person: list[Sentence], used: set[int]) -> list[Sentence]:
    if not person or person[-1].index in used:
        return []
    last = person[-1]
    return [last] if _is_question(last.text) else []


def _topics(person: list[Sentence], used: set[int]) -> list[Sentence]:
    """The first sentence of each later person message: what else was discussed."""
    seen: set[str] = set()
    out: list[Sentence] = []
    for s in person:
        if s.message.key in seen:
            continue
        seen.add(s.message.key)
        if s.index not in used and s.index > 0:
            out.append(s)
    return out[:5]


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


def detect_language(messages: list[Message]) -> str:
    """ "ja" when kana/kanji are more than a trace next to the Latin letters, else "en"."""
    person = [m.text for m in messages if m.channel == Channel.PERSON]
    text = "\n".join(person or [m.text for m in messages])
    ja = len(_JA_CHAR_RE.findall(text))
    latin = len(_LATIN_RE.findall(text))
    return "ja" if ja >= 2 and ja >= 0.1 * latin else "en"


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
    return _cap("\n\n".join(blocks), _SUMMARY_MAX)


def _section(heading: str, items: list[Sentence]) -> str:
    lines = [f"- {_one_line(_cap(s.text, _SECTION_ITEM_MAX))}" for s in items]
    return "\n".join([f"## {heading}", *_dedupe(lines)])


def _index_summary(parts: _Parts, title: str) -> str:
    if parts.decisions:
        return _cap(_one_line(parts.decisions[-1].text), _INDEX_MAX)
    return _cap(_one_line(title), _INDEX_MAX)


def _title(conv: Conversation, messages: list[Message]) -> str:
    if conv.title and conv.title.strip():
        return _cap(_one_line(conv.title), _TITLE_MAX)
    first = next((m for m in messages if m.channel == Channel.PERSON), messages[0])
    line = next((ln.strip() for ln in first.text.splitlines() if ln.strip()), "")
    sentences = split_sentences(line)
    title = (sentences[0] if sentences else line).rstrip("。．.！!")
    return _cap(title, _TITLE_MAX) or conv.key


# ---------------------------------------------------------------- terms, aliases, tags


def salient_terms(conv: Conversation, messages: list[Message]) -> list[str]:
    """Product-like Latin names and katakana runs, most frequent first (ties: first seen)."""
    person = [m.text for m in messages if m.channel == Channel.PERSON]
    sources = [(conv.title or "", True), *((text, False) for text in person)]
    counts: Counter[str] = Counter()
    first_seen: dict[str, int] = {}
    canonical: dict[str, str] = {}
    for text, strong_only in sources:
        prose = _URL_RE.sub(" ", _REDACTED_RE.sub(" ", split_prose(text)[0]))
        for term in _terms_in(prose, strong_only=strong_only):
            folded = term.casefold()
            canonical.setdefault(folded, term)
            first_seen.setdefault(folded, len(first_seen))
            counts[folded] += 1
    ranked = sorted(counts, key=lambda k: (-counts[k], first_seen[k]))
    return [canonical[k] for k in ranked]


def _terms_in(text: str, *, strong_only: bool = False) -> list[str]:
    """Salient terms in order; ``strong_only`` ignores mere capitals (title case)."""
    found: list[tuple[int, str]] = []
    for m in _LATIN_TERM_RE.finditer(text):
        if _next_to_japanese(text, m.start(), m.end()) and not strong_only:
            salient = len(m.group()) >= 2 and m.group().casefold() not in _STOP_TERMS
        else:
            at_start = strong_only or _at_sentence_start(text, m.start())
            salient = _is_salient_latin(m.group(), sentence_start=at_start)
        if salient:
            found.append((m.start(), m.group()))
    found.extend((m.start(), m.group()) for m in _KATAKANA_RE.finditer(text))
    return [term for _, term in sorted(found)]


def _next_to_japanese(text: str, start: int, end: int) -> bool:
    """A Latin word inside Japanese text is a name or a term (Japanese has no capitals)."""
    around = text[max(start - 1, 0) : start] + text[end : end + 1]
    return bool(_JA_CHAR_RE.search(around))


def _at_sentence_start(text: str, pos: int) -> bool:
    i = pos - 1
    while i >= 0 and text[i] in " \t":
        i -= 1
    return i < 0 or text[i] in _SENTENCE_OPENERS


def _is_salient_latin(word: str, *, sentence_start: bool) -> bool:
    if len(word) < 2 or word.casefold() in _STOP_TERMS:
        return False
    inner_caps = any(ch.isupper() for ch in word[1:])
    has_digit = any(ch.isdigit() for ch in word) and any(ch.isalpha() for ch in word)
    dotted = any(ch in ".+#" for ch in word)
    capitalised = word[0].isupper() and not sentence_start
    return inner_caps or has_digit or dotted or capitalised


def _aliases(title: str, terms: list[str]) -> list[str]:
    return _dedupe([title, *terms], casefold=True)[:_MAX_ALIASES]


def _tags(source: str, kind: str, terms: list[str]) -> list[str]:
    lowered = [t.casefold() for t in terms[:_MAX_TAG_TERMS]]
    return _dedupe([source, kind, *lowered])


# ---------------------------------------------------------------- time, action, evidence


def _occurred_at(conv: Conversation, messages: list[Message]) -> datetime | None:
    return next((m.created_at for m in messages if m.created_at is not None), conv.created_at)


def _valid_from(parts: _Parts, occurred: datetime | None) -> datetime | None:
    timed = [s.message.created_at for s in parts.decisions if s.message.created_at is not None]
    return timed[-1] if timed else occurred


def _action(
    key: str, title: str, context: list[MemoryIndexEntry]
) -> tuple[Action, str | None, int | None]:
    for entry in context:
        if key in entry.source_conversation_keys or entry.title == title:
            return "append", entry.id, entry.current_revision
    return "create", None, None


def _evidence(parts: _Parts, messages: list[Message]) -> list[EvidencePointer]:
    chosen = parts.decisions + parts.reasons + parts.results + parts.background
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


# ---------------------------------------------------------------- small helpers


def _estimate_tokens(text: str) -> int:
    return (len(text) + 3) // 4


def _cap(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _dedupe(items: Iterable[str], *, casefold: bool = False) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for item in items:
        key = item.casefold() if casefold else item
        if item and key not in seen:
            seen.add(key)
            out.append(item)
    return out
