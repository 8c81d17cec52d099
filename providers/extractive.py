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
from core.sections import merge_summaries
from core.textsearch import analyze
from prompts.case_record import PROMPT_VERSION, build_prompt
from stages.prefilter import DECISION_RE, LESSON_RE, REASON_RE, split_prose

MODEL = "extractive:v1"

_TITLE_MAX = 80
_INDEX_MAX = 140
_QUOTE_MAX = 300
_SUMMARY_MAX = 4000
_SECTION_ITEM_MAX = 300
_MAX_EVIDENCE = 16
_MAX_ALIASES = 8
_MAX_TAG_TERMS = 5

_SENTENCE_END_RE = re.compile(r"[。！？]+|[.!?]+(?=\s|$)|\n")
_FENCE_RE = re.compile(r"```.*?(?:```|\Z)", re.DOTALL)
_JA_CHAR_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uff66-\uff9f]")
_LATIN_RE = re.compile(r"[A-Za-z]")
_KATAKANA_RE = re.compile(r"[ァ-ヺ][ァ-ヺー]+(?:・[ァ-ヺー]+)*[ァ-ヺー]")
_LATIN_TERM_RE = re.compile(
    r"(?<![A-Za-z0-9_.])[A-Za-z][A-Za-z0-9_]*(?:[.+#&-][A-Za-z0-9_]+)*[+#]*"
)
# words written in capitals that are keywords or plain English, not names (SQL, shouting, notes)
_CAPS_TEXT = """
not and or null select from where join insert update delete into values table create drop
alter index group order by having limit union case when then else end true false todo
fixme note warning error info debug ok yes no the is are was it this that all any none
asap fyi imo btw lol omg pls please help new old get set put post
"""
_CAPS_WORDS = frozenset(_CAPS_TEXT.split())
_URL_RE = re.compile(r"(?:https?://|www\.)\S+", re.IGNORECASE)
_REDACTED_RE = re.compile(r"\[REDACTED:[a-z0-9\-]+\]")
_PLACEHOLDER_RE = re.compile(r"\[[A-Z][A-Z0-9_:\-]*\]")  # [REDACTED_PROMPT] in a redacted export
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
    resolved: list[tuple[Sentence, Sentence]]


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


_IN_BATCH = "batch:"


def draft_records(
    conversations: list[Conversation], context: list[MemoryIndexEntry]
) -> list[DraftRecord]:
    """One record per conversation, in order; a conversation that changes the decision of an
    earlier one of the same batch is merged into that one's record (the memory does not exist
    yet, so it cannot be appended to): one record, the later decision current, the earlier one
    in its history section."""
    records: list[DraftRecord] = []
    for conv in conversations:
        pending = [
            MemoryIndexEntry(
                id=f"{_IN_BATCH}{i}",
                title=r.title,
                index_summary=r.index_summary,
                kind=r.memory_kind,
                current_revision=0,
                aliases=r.aliases,
                source_conversation_keys=r.source_conversation_keys,
            )
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


def draft_record(conv: Conversation, context: list[MemoryIndexEntry]) -> DraftRecord | None:
    """One case record for ``conv``, or None when it has no drafting text."""
    conv, _ = redact_conversation(conv)  # before anything is cut from the text
    messages = conv.drafting_messages
    if not messages:
        return None
    person = person_sentences(messages)
    parts = _parts(person)
    lang = detect_language(messages)
    kind = _kind(parts, person)
    terms = salient_terms(conv, messages)
    title = _title(conv, messages, parts, terms)
    occurred = _occurred_at(conv, messages)
    action, target, revision = _action(conv, person, context, decided=bool(parts.decisions))
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
        inferences=_inferences(parts, lang),
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
    """Cut at sentence ends, except inside brackets (「…？」 or "(…？)" belongs to its sentence);
    a line break always ends a sentence."""
    out: list[str] = []
    pos = start
    for m in _SENTENCE_END_RE.finditer(text, start, end):
        if m.group() != "\n" and _bracket_depth(text[pos : m.start()]) > 0:
            continue
        _add_sentence(out, text[pos : m.end()])
        pos = m.end()
    _add_sentence(out, text[pos:end])
    return out


def _bracket_depth(piece: str) -> int:
    return sum(piece.count(c) for c in "(（「『") - sum(piece.count(c) for c in ")）」』")


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
#
# Each of the person's sentences gets one role, from cue words and from where it stands:
#
# * decision: a decision cue (決めた, にする, でいく, I'll go with, ...), or a plain statement of
#   intent (a sentence ending in a verb's dictionary form, "I'll ...") that the next sentence
#   justifies (a reason follows a decision: 「Xにする。理由は…」).
# * reason: a reason cue (理由, 決め手, ので, から, のと、, し、, because, so, main reason, ...),
#   a sentence that continues a reason (あと、 / Also ...), or an enumeration (まず、 それと、)
#   in the message that holds the decision.
# * open point: an open cue (まだ…ない, 迷って, 不安, 心配, 気になって, 課題, 次第, かどうか,
#   not sure, whether, ...) or a question the person asks themself (…かな？, "Should I ...?")
#   at or after the decision; one that stood before the decision is the question the decision
#   answered. A later statement of the person that names the same things settles it: the pair
#   goes to the Resolved list.

_STRONG_OPEN_RE = re.compile(
    r"まだ.{0,12}(?:ない|迷|悩|未定|検討)|迷って|迷い中|迷う|悩んで|悩む|不安|心配|気になって|課題"
    r"|次第|かどうか|決めたい|決めてない|決まってない|わからない|わかってない|分からない|分かってない"
    r"|未定|未解決|検討中|(?:ない|なきゃ)といけない|なきゃ(?:いけない|な)?(?=[。、]|$)"
    r"|か(?:は|も|を)[、,]?[^。]{0,20}?(?:考え|迷|決め|悩|検討|相談|聞い|試し)"
    r"|か(?:は|も|を|どうか)[、,]?[^。]{0,20}?(?:確認|調べ|問い合わせ|聞く|見て)"
    r"|見直すかも|かもしれない|試してみたい|聞いてみる|TODO"
    r"|\bnot sure\b|\bunsure\b|\bundecided\b|\bwhether\b|\bhaven't decided\b|\bwondering\b"
    r"|\bstill (?:need|have to|open|unclear|deciding|thinking)\b|\bopen question\b|\bworried\b",
    re.IGNORECASE,
)
_SELF_QUESTION_RE = re.compile(
    r"(?:かな|べき|べきか|いいかな|要る|いる|必要)[？?]\s*$"
    r"|^(?:\W*)(?:is it|should i|do i|would it|does it|am i|will it|is that|are there)\b.*\?\s*$",
    re.IGNORECASE,
)
_EXTRA_DECISION_RE = re.compile(
    r"(?:(?<!ま)で(?:いく|行く|いきます)|(?:で|に)(?:決める|決めます|決定))(?=[。．！!？?、,\s」』)]|$|よ|ね|わ|な|笑)"
    r"|って(?:ルール|こと)に(?:する|した)|\bI(?:'ll| will) (?:go|take|stick|stay|keep|buy|use)\b",
    re.IGNORECASE,
)
_INTENT_EN_RE = re.compile(
    r"\bI(?:'ll| will| am going to|'m going to)\b(?! (?:see|think|check))", re.IGNORECASE
)
_EXTRA_REASON_RE = re.compile(
    r"決め手|のと[、,]|(?:ない|たい|いい|だ|い)し[、,]|なので|だから|\bmain reason\b|\breasons?:"
    r"|, so\b|\bso (?:that|I)\b|\bmostly because\b"
    r"|\bhonestly\b|\bfrankly\b|正直",  # the person's own feeling about it: what moves them
    re.IGNORECASE,
)
_CONTINUE_RE = re.compile(
    r"^\W*(?:あと|それと|それに|また|さらに|加えて|Also|And|Plus|Besides)\b|^\W*(?:あと|それと|それに|また|さらに)",
    re.IGNORECASE,
)
_ENUM_RE = re.compile(
    r"^\W*(?:まず|第一に|一つ目は|1つ目は|ひとつは|それと|二つ目は|2つ目は|First(?:ly)?,|Second(?:ly)?,)"
)
_OPENER_RE = re.compile(
    r"^\W*(?:結論|じゃあ|では|うん|よし|いろいろ考えて|考えたけど|悩んだけど|決めた|ok|okay|so|alright|in the end)\b"
    r"|^\W*(?:結論|じゃあ|うん|よし|いろいろ考えて|考えたけど|悩んだけど)",
    re.IGNORECASE,
)
_VERDICT_RE = re.compile(r"^\W*(?:ok(?:ay)?|alright|じゃあ|よし|うん|結論)\W", re.IGNORECASE)
_FILLER_RE = re.compile(
    r"^\W*(?:ありがとう|ありがと|thanks?|thank you|なるほど|了解|うん|ok|okay|はい)\W*(?:ございます)?\W*$",
    re.IGNORECASE,
)
_REASON_LEAD_RE = re.compile(
    r"^\W*(?:理由は|理由として|決め手は|なぜなら|というのも|because\b|the reason\b|main reason\b|reasons?:)",
    re.IGNORECASE,
)
_PAST_RE = re.compile(
    r"(?:た|だ|ました|かった)(?:[。!！]|$)|\b(?:went|did|was|turned out|worked)\b"
)
_MAX_DECISIONS = 4
_MAX_REASONS = 6
_MAX_OPEN = 5


def _parts(person: list[Sentence]) -> _Parts:
    roles = _roles(person)
    pick = {
        role: [s for s in person if roles.get(s.index) == role]
        for role in ("decision", "reason", "open", "result", "background_open")
    }
    decisions = _best_decisions(pick["decision"], person)
    # a decision past the cap is no decision here: it may still give its reason clause
    reasons = _rank_reasons(pick["reason"], decisions)
    reasons = sorted([*reasons, *_reason_clauses(decisions)], key=lambda s: (s.index, -len(s.text)))
    reasons = _dedupe_sentences(reasons)[: _MAX_REASONS + len(decisions)]
    open_points = pick["open"]
    if not open_points and not decisions:
        open_points = _last_question(person, set(roles))
    resolved = _resolutions(open_points, person, roles)
    open_now = [s for s in open_points if s.index not in {o.index for o, _ in resolved}][:_MAX_OPEN]
    used = set(roles) | {s.index for s in open_points}
    background = [
        s for s in _first_message(person) if s.index not in used and not _is_filler(s.text)
    ]
    background = (pick["background_open"] + background)[:2] if not decisions else background[:2]
    used |= {s.index for s in background}
    results = [s for s in pick["result"] if s.index not in {r.index for _, r in resolved}]
    topics = _topics(person, used | {r.index for _, r in resolved})
    return _Parts(
        background, topics, decisions, reasons, results[-2:], open_now, resolved[:_MAX_OPEN]
    )


def _roles(person: list[Sentence]) -> dict[int, str]:
    """The role of each of the person's sentences that has one (index → role)."""
    roles: dict[int, str] = {}
    by_message: dict[str, list[Sentence]] = {}
    for s in person:
        by_message.setdefault(s.message.key, []).append(s)
    scores = {s.index: _decision_score(s, by_message[s.message.key]) for s in person}
    for s in person:
        if _opens(s.text):
            roles[s.index] = "open"
        elif scores[s.index] >= 3:
            roles[s.index] = "decision"
    if not any(r == "decision" for r in roles.values()):  # no clear decision: the best intent
        intents = [
            s
            for s in person
            if s.index not in roles and (_plain_intent(s.text) or _INTENT_EN_RE.search(s.text))
        ]
        best = max(intents, key=lambda s: (scores[s.index], -s.index), default=None)
        if best is not None and scores[best.index] >= 2:
            roles[best.index] = "decision"
    decided = [s for s in person if roles.get(s.index) == "decision"]
    first_decision = decided[0].index if decided else None
    decision_messages = {s.message.key for s in decided}
    for msg_sentences in by_message.values():
        prev: str | None = None
        for s in msg_sentences:
            role = roles.get(s.index)
            if role is None:
                if _is_question(s.text):
                    if (
                        _SELF_QUESTION_RE.search(s.text)
                        and first_decision is not None
                        and s.index > first_decision
                    ):
                        role = "open"
                elif _reasons(s.text) or (prev == "reason" and _CONTINUE_RE.search(s.text)):
                    role = "reason"
                elif prev == "open" and _CONTINUE_RE.search(s.text):
                    role = "open"
                elif s.message.key in decision_messages and _ENUM_RE.search(s.text):
                    role = "reason"
                elif _RESULT_RE.search(s.text):
                    role = "result"
                elif (
                    prev == "decision"
                    and not _is_filler(s.text)
                    and not any(
                        _reasons(o.text) for o in msg_sentences if roles.get(o.index) != "decision"
                    )
                ):  # a decision its message gives no marked reason for: what follows it says why
                    role = "reason"
                if role is not None:
                    roles[s.index] = role
            prev = role
    for s in person:  # an open point before any decision: the question the decision answered
        if roles.get(s.index) == "open" and first_decision is not None and s.index < first_decision:
            roles[s.index] = "background_open"
    return roles


_QUOTED_RE = re.compile(r"「[^「」]*」|『[^『』]*』|\"[^\"]*\"")


def _own(text: str) -> str:
    """The sentence without what it quotes (「…」 is someone else's words, not a cue of the
    person's own)."""
    return _QUOTED_RE.sub("「」", text)


def _opens(text: str) -> bool:
    own = _own(text)
    return bool(
        _STRONG_OPEN_RE.search(own) or _OPEN_RE.search(own)
    ) and not _EXTRA_DECISION_RE.search(own)


def _reasons(text: str) -> bool:
    return bool(REASON_RE.search(text) or _EXTRA_REASON_RE.search(text))


def _decision_score(s: Sentence, message: list[Sentence]) -> float:
    """How clearly ``s`` states a decision: a cue word counts 3, a plain statement of intent 1
    (2 in English: "I'll ..."), a justification right after it 2, an opener (結論、 じゃあ、) 1."""
    text = s.text
    if _is_question(text) or _is_filler(text) or _REASON_LEAD_RE.match(text):
        return 0
    score = 0.0
    own = _own(text)
    if _decision_cue(own) and not _refers_back(own):
        score += 3
    elif _decision_cue(own):
        score += 1  # "…って決めたけど": an earlier decision named, maybe a new one in the clause
    intent = 2 if _INTENT_EN_RE.search(text) else 1 if _plain_intent(text) else 0
    if intent and message[0].index != 0:
        intent += 1  # said after the assistant answered: a conclusion, not the opening request
    score += intent
    after = [n for n in message if n.index > s.index][:1]
    if (
        after
        and _reasons(after[0].text)
        and not _opens(after[0].text)
        and not _is_question(after[0].text)
    ):
        score += 2
    before = [n for n in message if n.index < s.index][-1:]
    if intent and before and _ANNOUNCES_RE.search(before[0].text):
        score += 2  # 「方法を決めました。毎朝…します。」: the decision a bare verdict announced
    if _OPENER_RE.search(text):
        score += 1
        rest = _LEAD_FILLER_RE.sub("", text).strip()
        verdict = _VERDICT_RE.match(text) and rest and not _is_filler(rest) and len(rest) <= 30
        if message[0].index != 0 and verdict and not intent:
            score += 2  # "Ok, Go first." / 「じゃあ、Aで。」: a short verdict after the answer
    if _reasons(text) and score < 3:
        score -= 1  # "…ので…する": a reason that ends in a verb, not a decision of its own
    return score


# a verdict that names only that something was decided (方法を決めました, 方針が決まった, we
# settled on a plan): what it decided comes in the next sentence
_ANNOUNCES_RE = re.compile(
    r"(方法|方針|やり方|進め方|結論|プラン|計画|内容|ルール)(を|は|が|も)?(決め(ました|た)|決まり(ました)?|決まった)[。．!！]?\s*$"
    r"|\b(decided on|settled on|came up with) (a|my|the|our) (plan|approach|routine|method)\b",
    re.IGNORECASE,
)


def _refers_back(text: str) -> bool:
    """「…って決めたけど」「決めたときは」: the sentence names an earlier decision; it is a new one
    only when another cue follows that clause."""
    m = re.search(r"(?:決めた|決めました|にした|にしてた)(?:けど|けれど|が|ときは|時は|のに)", text)
    if m is None:
        return False
    return not _decision_cue(text[m.end() :])


def _plain_intent(text: str) -> bool:
    """A Japanese sentence that ends in a verb's dictionary form (受ける。 移す。 始めてみる。):
    a plain statement of what the person will do."""
    core = re.sub(r"[\s。．！!笑wｗ)）」』]+$", "", text)
    if not core or not _JA_CHAR_RE.search(core[-3:]):
        return False
    morphemes = [m for m in analyze(core[-40:]) if m.pos[0] not in ("補助記号", "空白")]
    if not morphemes:
        return False
    last = morphemes[-1]
    if last.pos[0] == "動詞" and len(last.pos) > 5 and last.pos[5].startswith("終止形"):
        return last.surface not in ("思う", "いる", "ある", "なる", "できる", "わかる", "言う")
    if (
        last.normalized == "ます"
        and len(morphemes) > 1
        and len(last.pos) > 5
        and last.pos[5].startswith("終止形")
    ):
        verb = morphemes[-2]  # the polite form (使います, してもらいます): the same plain intent
        return verb.pos[0] == "動詞" and verb.normalized not in (
            "思う",
            "居る",
            "有る",
            "成る",
            "出来る",
            "分かる",
            "言う",
        )
    return False


def _best_decisions(decisions: list[Sentence], person: list[Sentence]) -> list[Sentence]:
    """At most ``_MAX_DECISIONS``, the clearest first kept, in the order they were said."""
    if len(decisions) <= _MAX_DECISIONS:
        return decisions
    by_message: dict[str, list[Sentence]] = {}
    for s in person:
        by_message.setdefault(s.message.key, []).append(s)
    ranked = sorted(
        decisions, key=lambda s: (-_decision_score(s, by_message[s.message.key]), s.index)
    )
    keep = {s.index for s in ranked[:_MAX_DECISIONS]}
    return [s for s in decisions if s.index in keep]


def _rank_reasons(reasons: list[Sentence], decisions: list[Sentence]) -> list[Sentence]:
    """Reasons said in a message that holds a decision first, then the others; text order."""
    near = {s.message.key for s in decisions}
    first = [s for s in reasons if s.message.key in near]
    rest = [s for s in reasons if s.message.key not in near]
    keep = {s.index for s in [*first, *rest][:_MAX_REASONS]}
    return [s for s in reasons if s.index in keep]


def _dedupe_sentences(items: list[Sentence]) -> list[Sentence]:
    """Drop a reason clause whose whole sentence is kept too (and exact repeats)."""
    out: list[Sentence] = []
    for s in items:
        if any(o.index == s.index and s.text in o.text for o in out):
            continue
        out = [o for o in out if not (o.index == s.index and o.text in s.text)]
        out.append(s)
    return out


def _resolutions(
    open_points: list[Sentence], person: list[Sentence], roles: dict[int, str]
) -> list[tuple[Sentence, Sentence]]:
    """(open point, the later statement that settles it): a later message of the person that
    names the same things and states a decision, an outcome or what was done."""
    out: list[tuple[Sentence, Sentence]] = []
    taken: set[int] = set()
    for o in open_points:
        terms = _content_terms(o.text)
        if not terms:
            continue
        for s in person:
            if s.index <= o.index or s.message.key == o.message.key or s.index in taken:
                continue
            if roles.get(s.index) == "open" or _is_question(s.text):
                continue
            settles = (
                roles.get(s.index) in ("decision", "result")
                or _plain_intent(s.text)
                or _PAST_RE.search(s.text)
            )
            if settles and terms & _content_terms(s.text):
                out.append((o, s))
                taken.add(s.index)
                break
    return out


_TERM_STOP = frozenset(
    [
        "こと",
        "もの",
        "とき",
        "ところ",
        "ため",
        "よう",
        "感じ",
        "自分",
        "今日",
        "今回",
        "一番",
        "最初",
        "あと",
        "それ",
        "これ",
        "時間",
        "方",
    ]
)


def _content_terms(text: str) -> set[str]:
    """The nouns and names in ``text`` (two characters or more): what a sentence is about."""
    terms = {
        m.normalized
        for m in analyze(text)
        if m.pos[0] == "名詞"
        and m.pos[1] in ("普通名詞", "固有名詞")
        and len(m.surface) >= 2
        and m.normalized not in _TERM_STOP
    }
    terms |= {
        w.casefold()
        for w in re.findall(r"[A-Za-z][A-Za-z0-9]{2,}", text)
        if w.casefold() not in _STOP_TERMS
    }
    return terms


def _is_filler(text: str) -> bool:
    return bool(_FILLER_RE.match(text)) or len(text.strip()) < 3


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
    """The person's decision, reason and result sentences (whole sentences, not reason clauses)."""
    decided = {s.index for s in parts.decisions}
    reasons = [s for s in parts.reasons if s.index not in decided]
    return _dedupe(s.text for s in parts.decisions + reasons + parts.results)


def _inferences(parts: _Parts, lang: str) -> list[str]:
    """What the drafter concludes and the person did not say in these words: which open points
    a later statement settled (the pairing is the drafter's reading, the sentences are quoted)."""
    word = "→ 解決: " if lang == "ja" else "→ settled by: "
    return [
        f"{_cap(_one_line(o.text), 120)} {word}{_cap(_one_line(r.text), 120)}"
        for o, r in parts.resolved
    ]


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
        if s.message.key in seen or _is_filler(s.text):
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


def _index_summary(parts: _Parts, title: str) -> str:
    """One line to recognise the case by: the current decision, else the result, else the first
    thing said that is not the title again."""
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


def _title(conv: Conversation, messages: list[Message], parts: _Parts, terms: list[str]) -> str:
    """The export's title; else (Codex and Claude Code sessions have none) what the session was
    about: its subject (the names it uses most) and its gist (the decision, else the result,
    else the first request), cut at a clause end, never mid-word with an ellipsis."""
    if conv.title and conv.title.strip() and not _is_marker(conv.title.strip()):
        return _cap(_one_line(conv.title), _TITLE_MAX)
    first_person = [
        s for s in person_sentences(messages) if s.message.key == _first_person_key(messages)
    ]
    session = conv.source in _SESSION_SOURCES
    # a coding session is named by what it did; a chat by what it asked
    candidates = (
        [*parts.decisions[:1], *parts.results[:1], *first_person] if session else first_person
    )
    gist = next((g for s in candidates if (g := _gist(s.text))), "")
    subject = " / ".join(t for t in terms[:2] if t.casefold() not in gist.casefold())
    if not gist:
        first = next((m for m in messages if m.channel == Channel.PERSON), messages[0])
        gist = _gist(next((ln.strip() for ln in first.text.splitlines() if ln.strip()), ""))
    if subject and (session or not gist):
        gist = _gist(gist, _TITLE_MAX - len(subject) - 2) if gist else ""
        title = f"{subject}: {gist}" if gist else subject
    else:
        title = gist
    if not title:  # nothing but placeholders: where and when
        when = _occurred_at(conv, messages)
        title = f"{conv.source} session" + (f" {when.date().isoformat()}" if when else "")
    return _cap(title, _TITLE_MAX)


_CLAUSE_END_RE = re.compile(r"[、,;:：；]|\s[-–—]\s|(?<=[a-z]) (?:and|but|so|then) ")
_MARKER_RE = re.compile(r"^\W*\[[A-Z_:\-]+\]\W*$|^\W*[A-Z]+(?:_[A-Z]+)+\W*$|^\W*$")
_GIST_MAX = 60
_SESSION_SOURCES = ("codex", "claude-code")
_LEAD_FILLER_RE = re.compile(
    r"^(?:(?:ok(?:ay)?|so|well|alright|yes|yeah|thanks|じゃあ|うん|よし|なるほど|ありがとう)[,、!！.。\s]+)+",
    re.IGNORECASE,
)


def _gist(sentence: str, limit: int = _GIST_MAX) -> str:
    """A sentence as a title: without its end mark, cut at the first clause end past a dozen
    characters when it is long."""
    text = _one_line(_REDACTED_RE.sub("", sentence)).strip().rstrip("。．.！!？?")
    text = _LEAD_FILLER_RE.sub("", text)  # "ok, I'll …" → "I'll …"
    if _is_marker(text) or _is_filler(text):
        return ""
    limit = max(limit, 16)
    if len(text) > limit:
        cut = next(
            (m.start() for m in _CLAUSE_END_RE.finditer(text) if 12 <= m.start() <= limit), None
        )
        if cut is None:
            space = text.rfind(" ", 12, limit)
            cut = space if space > 0 else limit
        text = text[:cut].rstrip(" 、,")
    return text


def _is_marker(text: str) -> bool:
    return bool(_MARKER_RE.match(text)) or bool(_REDACTED_RE.fullmatch(text.strip()))


def _comparable(text: str) -> str:
    return re.sub(r"\W+", "", text).casefold()


def _first_person_key(messages: list[Message]) -> str:
    return next(
        (m.key for m in messages if m.channel == Channel.PERSON and _gist(split_prose(m.text)[0])),
        "",
    )


# ---------------------------------------------------------------- terms, aliases, tags


def salient_terms(conv: Conversation, messages: list[Message]) -> list[str]:
    """Product-like Latin names and katakana runs, most frequent first (ties: first seen)."""
    person = [m.text for m in messages if m.channel == Channel.PERSON]
    sources = [(conv.title or "", True), *((text, False) for text in person)]
    counts: Counter[str] = Counter()
    first_seen: dict[str, int] = {}
    canonical: dict[str, str] = {}
    for text, strong_only in sources:
        prose = _URL_RE.sub(
            " ", _PLACEHOLDER_RE.sub(" ", _REDACTED_RE.sub(" ", split_prose(text)[0]))
        )
        for term in _terms_in(prose, strong_only=strong_only):
            folded = term.casefold()
            canonical.setdefault(folded, term)
            first_seen.setdefault(folded, len(first_seen))
            counts[folded] += 1
    title = (conv.title or "").casefold()
    ranked = sorted(counts, key=lambda k: (-counts[k], first_seen[k]))
    return [
        canonical[k]
        for k in ranked
        if _KATAKANA_FULL_RE.match(k) is None
        or k in title
        or _katakana_name(canonical[k], counts[k])
    ]


_KATAKANA_FULL_RE = re.compile(r"^[ァ-ヺー・]+$")


def _katakana_name(word: str, count: int) -> bool:
    """A katakana word worth searching for: a name (Sudachi: a proper noun, or a word it does not
    know: product names), a compound of several words (スタンディングデスク), or a noun the
    person keeps using (three times or more); a single common loanword said once or twice
    (ライト, スムーズ, リスト) or a unit (インチ) is not."""
    morphemes = [m for m in analyze(word) if m.pos[0] != "補助記号"]
    if len(morphemes) != 1:
        return len(morphemes) > 1 and all(m.pos[0] == "名詞" for m in morphemes)
    pos = morphemes[0].pos
    if pos[0] != "名詞" or "助数詞" in "".join(pos[2:3]):
        return False
    return pos[1] != "普通名詞" or count >= 3


def _terms_in(text: str, *, strong_only: bool = False) -> list[str]:
    """Salient terms in order; ``strong_only`` ignores mere capitals (title case)."""
    found: list[tuple[int, str]] = []
    latin: list[tuple[int, int, bool]] = []  # (start, end, salient on its own)
    for m in _LATIN_TERM_RE.finditer(text):
        word = m.group()
        weak = False
        if word.isupper() and word.casefold() in _CAPS_WORDS:
            salient = False
        elif _next_to_japanese(text, m.start(), m.end()) and not strong_only:
            salient = len(word) >= 2 and word.casefold() not in _STOP_TERMS
        else:
            at_start = strong_only or _at_sentence_start(text, m.start())
            salient = _is_salient_latin(word, sentence_start=at_start)
            # a capitalised first word of a sentence may begin a name ("Cloud SQL")
            weak = not salient and word[0].isupper() and word.casefold() not in _STOP_TERMS
        if salient or weak:
            latin.append((m.start(), m.end(), salient))
    # names of several words stay one term: "Cloud SQL", "Lattice Works", "FlexiSpot E7"
    runs: list[list[tuple[int, int, bool]]] = []
    for item in latin:
        if runs and text[runs[-1][-1][1] : item[0]] == " ":
            runs[-1].append(item)
        else:
            runs.append([item])
    for run in runs:
        if len(run) > 1 or run[0][2]:
            found.append((run[0][0], text[run[0][0] : run[-1][1]]))
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
    """Names and phrases someone would search for (the title is searched anyway)."""
    return _dedupe([t for t in terms if t.casefold() != title.casefold()], casefold=True)[
        :_MAX_ALIASES
    ]


def _tags(source: str, kind: str, terms: list[str]) -> list[str]:
    lowered = [t.casefold() for t in terms[:_MAX_TAG_TERMS]]
    return _dedupe([source, kind, *lowered])


# ---------------------------------------------------------------- time, action, evidence


def _occurred_at(conv: Conversation, messages: list[Message]) -> datetime | None:
    return next((m.created_at for m in messages if m.created_at is not None), conv.created_at)


def _valid_from(parts: _Parts, occurred: datetime | None) -> datetime | None:
    timed = [s.message.created_at for s in parts.decisions if s.message.created_at is not None]
    return timed[-1] if timed else occurred


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


def _decision_cue(text: str) -> bool:
    """A decision marker other than a bare 結局 ("after all" also tells what happened)."""
    if _EXTRA_DECISION_RE.search(text):
        return True
    return any(m.group() != "結局" for m in DECISION_RE.finditer(text))


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
