"""What a sentence said after the decision leaves open, read by its structure (issue 27 item 1,
ADR 0037 round 8): a question the person's own sentence still holds, a difficulty the person
foresees, a deliberation with themselves. The role reading (``roles._rule_roles``) asks
``leaves_open`` of a sentence after the conversation's first decision that no earlier rule gave
a role; before the decision the same forms state the question the conversation answers, which
the writers of the labelled sets do not count as an open point (50 of 54 such sentences)."""

from __future__ import annotations

import re
from functools import lru_cache

from core.textsearch import Morpheme, analyze
from providers.extractive.clauses import _ends_in_cause
from providers.extractive.sentences import _JA_CHAR_RE, _is_question, _own
from providers.extractive.structure import flags as grammar_flags
from providers.extractive.structure import potential

#: Japanese interrogatives by Sudachi's normalised form (a closed class, like the negation
#: auxiliaries): 何, どこ, いつ, いくら, どう, 誰, どれ, なぜ, いくつ, どんな, どの, どちら
_INTERROGATIVES = frozenset(
    [
        "何",
        "何処",
        "何時",
        "幾ら",
        "どう",
        "如何",
        "誰",
        "何れ",
        "何故",
        "幾つ",
        "どんな",
        "どの",
        "何方",
    ]
)

#: what follows a clause closed by か when it is no question the sentence holds: a quotation
#: (…できないかって言われた, …行かんかと誘われた), a hedge (かも, かな; Sudachi reads かもって
#: as か + 持つ, so any word in も after it), an exclamation (かね)
_NOT_EMBEDDING = frozenset(["って", "と", "も", "な", "なぁ", "なあ", "ね", "よ"])

#: the last clause of a sentence: after its last conjunctive particle of cause or concession
#: set off by a comma or a space (「…読めないし、…いやだ。」: the main clause says what it does)
_SUBORDINATE_RE = re.compile(r"(?:し|から|ので|けど|けれど|けれども|のに)[、,\s]")

#: an English clause of an open question as what the sentence says (no question mark):
#: "whether …", "how much / many / long …"
_EN_PENDING_RE = re.compile(r"\b(?:whether|how (?:much|many|long))\b", re.IGNORECASE)

_ASIDE_RE = re.compile(r"[(（][^()（）]*[)）]")


def _morphemes(text: str) -> list[Morpheme]:
    return [m for m in analyze(text[-120:]) if m.pos[0] != "空白"]


def _form(m: Morpheme) -> str:
    return m.pos[5] if len(m.pos) > 5 else ""


def _main(text: str) -> str:
    """The sentence's own words (quotes and asides left out) from its last subordinate clause
    of cause or concession on."""
    own = _ASIDE_RE.sub("", _own(text)) or _own(text)
    ends = [m.end() for m in _SUBORDINATE_RE.finditer(own)]
    return own[ends[-1] :].strip() if ends and ends[-1] < len(own) else own


def pending_question(text: str) -> bool:
    """The sentence holds a question not yet answered as what it says, in its main clause:
    Japanese a clause closed by the particle か after a predicate (a verb, an auxiliary, an
    adjective), taken up by the rest of the sentence (「費用がいくらかかるか それだけが気が
    かり」「車庫のどこに置くかだけ決めんといかん」「…通るか微妙」「…かぶらないかだけ確認中」),
    or a question between alternatives (``_alternatives``), not quoted (…できないかって言われた),
    not a hedge (かもって), not asked of the assistant (？), not stopping at a cause (…し),
    not told in the past; English "whether …" or "how much / many / long …" in a sentence
    that is no question and tells nothing the person did ("I asked whether …")."""
    if _is_question(text):
        return False
    main = _main(text)
    f = grammar_flags(main)
    if not _JA_CHAR_RE.search(main):
        english = not _JA_CHAR_RE.search(text) and "en:past" not in f
        return english and bool(_EN_PENDING_RE.search(main))  # not "I asked whether …"
    if {"ja:past", "ja:question"} & f:
        return False
    if _ends_in_cause(text):
        return False  # 「…自宅か自宅外かもわからないし」: a reason said on its own
    ms = _morphemes(main)
    if _alternatives(ms):
        return True
    for i, m in enumerate(ms[:-1]):
        if not (m.surface == "か" and m.pos[0] == "助詞" and i > 0):
            continue
        if ms[i - 1].pos[0] not in ("動詞", "助動詞", "形容詞"):
            continue  # AかB: a choice between nouns
        nxt = ms[i + 1].surface
        if (
            nxt in _NOT_EMBEDDING
            or nxt.startswith("も")
            or all(x.pos[0] == "補助記号" for x in ms[i + 1 :])
        ):
            continue
        return True
    return False


def _alternatives(ms: list[Morpheme]) -> bool:
    """A question between alternatives as an argument: A か B か followed by a particle
    (「日程を2月末か3月頭かと、…」「東京か大阪かは…」), each alternative a noun phrase; a
    single AかB is a choice named, not a question held."""
    ks = [i for i, m in enumerate(ms) if m.surface == "か" and m.pos[0] == "助詞" and i > 0]
    return any(
        b - a <= 5
        and ms[a - 1].pos[0] in ("名詞", "接尾辞")
        and ms[b - 1].pos[0] in ("名詞", "接尾辞")
        and b + 1 < len(ms)
        and ms[b + 1].pos[0] == "助詞"
        for a, b in zip(ks, ks[1:], strict=False)
    )


def foreseen(text: str) -> bool:
    """The person foresees what is still to come, as the sentence's final predicate: Japanese
    the auxiliary of appearance そう after a verb's continuative (言いそう, 悩みそう,
    バタバタしそう), not a potential (通えそう, もらえそう: what can be done), not hearsay
    (そうです after a dictionary form), not quoted (取れそうって), nothing but auxiliaries
    and sentence-final particles after it, in the main clause, and argued from no cause (a
    causal clause anywhere: what is expected because of something is a reason)."""
    main = _main(text)
    if not _JA_CHAR_RE.search(main) or _is_question(text) or "ja:causal" in grammar_flags(text):
        return False  # 「…バッテリーが大きいから…充電が持ちそう」: a conclusion from a cause
    ms = _morphemes(main)
    for i, m in enumerate(ms):
        if not (m.surface == "そう" and m.pos[1] == "助動詞語幹" and i > 0):
            continue
        verb = ms[i - 1]
        if verb.pos[0] != "動詞" or not _form(verb).startswith("連用形") or potential(verb):
            continue
        rest = ms[i + 1 :]
        if all(
            r.pos[0] in ("補助記号", "助動詞") or (r.pos[0] == "助詞" and r.pos[1] == "終助詞")
            for r in rest
        ):
            return True
    return False


def deliberates(text: str) -> bool:
    """The person deliberates with themselves: an interrogative and a volitional right after it
    in its clause (「ほかに希望者出たらどうしようってのはある…」「何を持っていこう…」), the sentence no question
    put to the assistant and not told in the past (「どうしようって一瞬思ったけど」 is
    ruled out by its past)."""
    main = _main(text)
    if not _JA_CHAR_RE.search(main) or _is_question(text) or "ja:past" in grammar_flags(main):
        return False
    ms = _morphemes(main)
    for i, m in enumerate(ms):
        if m.normalized not in _INTERROGATIVES:
            continue
        for x in ms[i + 1 :]:  # the volitional within the interrogative's clause
            if x.pos[0] == "動詞" and _form(x).startswith("意志推量形"):
                return True  # a verb's own: not the copula's conjecture (どうしたもんでしょう)
            if x.pos[0] == "補助記号" or (
                x.pos[0] == "助詞" and x.pos[1] == "接続助詞" and x.surface not in ("て", "で")
            ):
                break
    return False


@lru_cache(maxsize=8192)
def leaves_open(text: str) -> bool:
    """A sentence said after the decision leaves something open by its structure: a question it
    holds (``pending_question``), a difficulty foreseen (``foreseen``), a deliberation
    (``deliberates``)."""
    return pending_question(text) or foreseen(text) or deliberates(text)
