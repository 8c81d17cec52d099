"""The role of each of the person's sentences (decision, reason, open point, result, resolved point)
and the case parts built from them. The sentence readers are in ``clauses``, the fitted scorer in
``scorer`` (both re-exported here for the modules that read roles)."""

from __future__ import annotations

import re
from dataclasses import dataclass, replace

from providers.extractive.clauses import (
    _ANNOUNCES_RE,
    _CONSEQUENCE_RE,
    _INTENT_EN_RE,
    _INTENT_HEAD_RE,
    _LEAD_FILLER_RE,
    _decision_cue,
    _decision_score,
    _deliberated,
    _done_just_now,
    _offers_choice,
    _opens,
    _plain_intent,
    _reasons,
    _reported,
    _told_in_the_past,
    _weighed_clause,
    cause_clauses,
    conditional_intent,
)
from providers.extractive.grounds import continued_causes, weighed_reasons
from providers.extractive.mainline import main_line
from providers.extractive.openness import leaves_open
from providers.extractive.scorer import (
    _WEIGHTS_FILE,
    SCORED_ROLES,
    feature_names,
    learned_roles,
    role_features,
    role_probabilities,
    role_weights,
    set_role_weights,
)
from providers.extractive.sentences import (
    _JA_CHAR_RE,
    Sentence,
    _content_terms,
    _first_message,
    _is_filler,
    _is_question,
    _own,
)
from providers.extractive.structure import flags as grammar_flags
from providers.extractive.structure import past_act
from stages.prefilter import REASON_RE

#: read from here by the drafter, pairing, change and the fitting script (defined in ``clauses``
#: and ``scorer``)
__all__ = [
    "SCORED_ROLES",
    "_ANNOUNCES_RE",
    "_INTENT_EN_RE",
    "_LEAD_FILLER_RE",
    "_WEIGHTS_FILE",
    "_decision_cue",
    "_opens",
    "_plain_intent",
    "_reasons",
    "_reported",
    "_deliberated",
    "_weighed_clause",
    "conditional_intent",
    "feature_names",
    "learned_roles",
    "role_features",
    "role_probabilities",
    "role_weights",
    "set_role_weights",
]

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


_SELF_QUESTION_RE = re.compile(
    r"(?:かな|べき|べきか|いいかな|要る|いる|必要)[？?]\s*$"
    r"|^(?:\W*)(?:is it|should i|do i|would it|does it|am i|will it|is that|are there)\b.*\?\s*$",
    re.IGNORECASE,
)


_CONTINUE_RE = re.compile(
    r"^\W*(?:あと|それと|それに|また|さらに|加えて|Also|And|Plus|Besides)\b|^\W*(?:あと|それと|それに|また|さらに)",
    re.IGNORECASE,
)


_PAST_RE = re.compile(
    r"(?:た|だ|ました|かった)(?:[。!！]|$)|\b(?:went|did|was|turned out|worked)\b"
)


_MAX_DECISIONS = 4


_MAX_REASONS = 6


_MAX_OPEN = 5


def _parts(person: list[Sentence], topic: str = "") -> _Parts:
    """The case parts of ``person``'s sentences; ``topic`` (the conversation's title) names the
    matter the main decision answers (``mainline``)."""
    return parts_and_paired(person, topic)[0]


def parts_and_paired(person: list[Sentence], topic: str = "") -> tuple[_Parts, _Parts]:
    """The case parts with the main decision put back (``mainline``, for the record), and the
    parts as read before it (for the change-of-mind reading, whose pairing was fitted on the
    decisions as read without it: a main act that names a place or a trip again would pair a
    later conversation on another matter, ADR 0037 round 8)."""
    rules = _rule_roles(person)
    learned = learned_roles(person, rules)
    main = main_line(person, learned, topic)
    bare = main_line(person, learned, "") if topic else main
    record = _parts_of(person, main, rules)
    return record, (record if bare == main else _parts_of(person, bare, rules))


def _parts_of(person: list[Sentence], roles: dict[int, str], rules: dict[int, str]) -> _Parts:
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


#: the rules of ``_rule_roles`` by name; each gives a role the scorer then does not override
#: (``bench/fit_roles.py --rule-off NAME`` measures a rule out of fold by switching it off)
RULES = (
    "open:cue",  # _opens: the sentence leaves something open
    "decision:score",  # _decision_score >= 3
    "decision:headline",  # the opening tells the person's own act as done
    "decision:done_just_now",  # an act told as done with a perfective adverb
    "decision:deliberated",  # 考えたけど、+ an act or intent
    "decision:best_intent",  # no decision: the best intent or act told as done
    "open:clause_question",  # a question clause put to oneself, no ？, after the decision
    "open:self_question",  # …かな？ "should I …?" after the decision
    "open:after_decision",  # openness.leaves_open: a question held, a foreseen difficulty
    "reason:cue",  # _reasons, or a continuation (あと…) after a reason
    "open:continue",  # a continuation after an open point
    "result:cue",  # _RESULT_RE
    "reason:after_decision",  # the sentence after a decision its message gives no reason for
    "reason:concluded",  # the statements before なので、+ decision
    "reason:enumerated",  # the statements after 理由は…まず…
    "reason:listed",  # the English list items that follow a decision in its message
    "open:background",  # an open point before the decision: the question it answered
    "reason:weighed",  # a clause made a noun judged by an adjective (grounds.weighed_factor)
    "reason:cut_cause",  # a sentence cut after a clause of cause, then a decision (grounds)
)

_rules_off: frozenset[str] = frozenset()


def set_rules_off(names: set[str] | frozenset[str]) -> None:
    """Switch rules of ``RULES`` off (fitting: a rule measured out of fold); empty: all on."""
    global _rules_off
    unknown = set(names) - set(RULES)
    if unknown:
        raise ValueError(f"unknown rules: {sorted(unknown)}")
    _rules_off = frozenset(names)


def _on(rule: str) -> bool:
    return rule not in _rules_off


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
        if _on("open:cue") and _opens(s.text):
            roles[s.index] = "open"
        elif (
            (_on("decision:score") and scores[s.index] >= 3)
            or (_on("decision:headline") and _headline(s, opening))
            or (_on("decision:done_just_now") and _done_just_now(s.text))
            or (_on("decision:deliberated") and _deliberated(s.text))
        ):
            roles[s.index] = "decision"
    if _on("decision:best_intent") and not any(r == "decision" for r in roles.values()):
        # no clear decision: the best intent or, failing one, an act the person tells as done
        # ("I booked …" after the answer)
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
    for msg_sentences in by_message.values():
        prev: str | None = None
        last: str | None = None  # the last role given in this message
        for s in msg_sentences:
            role = roles.get(s.index)
            if role is None:
                if (
                    _on("open:clause_question")
                    and first_decision is not None
                    and s.index > first_decision
                    and not _is_question(s.text)
                    and "ja:question" in grammar_flags(s.text)
                ):
                    role = "open"  # 「当日の店は休みにするか。」: a question put to oneself, no ？
                elif (
                    _on("open:after_decision")
                    and s.index > (len(person) if first_decision is None else first_decision)
                    and leaves_open(s.text)
                ):
                    role = "open"  # 「費用がいくらかかるか それだけが気がかり」(openness)
                elif _is_question(s.text):
                    if (
                        _on("open:self_question")
                        and _SELF_QUESTION_RE.search(s.text)
                        and first_decision is not None
                        and s.index > first_decision
                    ):
                        role = "open"
                elif _on("reason:cue") and (
                    _reasons(s.text) or (last == "reason" and _CONTINUE_RE.search(s.text))
                ):  # 「決め手は…。…って。あと…」: the list of reasons goes on past an aside
                    role = "reason"
                elif _on("open:continue") and prev == "open" and _CONTINUE_RE.search(s.text):
                    role = "open"
                elif _on("result:cue") and _RESULT_RE.search(s.text):
                    role = "result"
                elif (
                    _on("reason:after_decision")
                    and prev == "decision"
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
    if _on("reason:concluded"):
        _concluded_reasons(person, roles, by_message)
    if _on("reason:enumerated"):
        _enumerated_reasons(person, roles, by_message)
    if _on("reason:listed"):
        _listed_reasons(roles, by_message)
    if _on("reason:weighed"):
        weighed_reasons(person, roles)
    if _on("reason:cut_cause"):
        continued_causes(person, roles)
    for s in person:  # an open point before any decision: the question the decision answered
        if (
            _on("open:background")
            and roles.get(s.index) == "open"
            and first_decision is not None
            and s.index < first_decision
        ):
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


#: the marker of a list item at the start of a line: a dash, an asterisk, a bullet
_LIST_ITEM_RE = re.compile(r"^\s*[-*•‣]\s+\S")


def _listed_reasons(roles: dict[int, str], by_message: dict[str, list[Sentence]]) -> None:
    """English list items said after a decision in its message are units of one list, and the
    list says why: "we're taking X. / - it's a state school / - half the lessons …" (at most
    one statement or a header "reasons:" between the decision and the list). Each item the
    reading gave no role is a reason, unless it asks or leaves something open; the list stops
    at the first line that is no item and no item's second line. Japanese items are left to the Japanese readings."""
    for msg in by_message.values():
        decided = [s for s in msg if roles.get(s.index) == "decision"]
        if not decided:
            continue
        after = [s for s in msg if s.index > decided[0].index]
        start = next((i for i, s in enumerate(after) if _LIST_ITEM_RE.match(s.text)), None)
        if start is None or start > 2:
            continue
        if any(_is_question(s.text) or roles.get(s.index) == "open" for s in after[:start]):
            continue
        run = after[start:]
        for i, s in enumerate(run):
            if _JA_CHAR_RE.search(s.text):
                break
            if not _LIST_ITEM_RE.match(s.text):
                if i + 1 < len(run) and _LIST_ITEM_RE.match(run[i + 1].text):
                    continue  # an item's second line: the list goes on after it
                break
            if roles.get(s.index) is None and not _is_question(s.text) and not _opens(s.text):
                roles[s.index] = "reason"


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
        causes = cause_clauses(s.text)  # the decision's sentence read clause by clause
        if causes:
            out.extend(Sentence(s.message, c, s.index) for c in causes)
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
        elif m.group() == "から" and re.search(r"[てで]から$", s.text[: m.end()]):
            continue  # 「…飲んでから、…」: a time clause, not a cause
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
