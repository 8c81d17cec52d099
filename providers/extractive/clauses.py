"""What one of the person's sentences says by its own wording and grammar, the readers the role
reading (``roles``) and the scorer's features (``scorer``) are built from: an intent, an open
point, a reason, a resolution, a report of what someone said, a decision's strength."""

from __future__ import annotations

import re
from typing import Any

from core.textsearch import analyze
from providers.extractive.sentences import (
    _JA_CHAR_RE,
    CLAUSE_MIN_CHARS,
    Sentence,
    _is_filler,
    _is_question,
    _own,
)
from providers.extractive.structure import (
    IRREGULAR_PAST,
    clause_question,
    elided_past,
    elided_plan,
    own_plan,
    past_act,
    potential,
    question_as_argument,
)
from providers.extractive.structure import flags as grammar_flags
from stages.prefilter import DECISION_RE, REASON_RE

_OPEN_RE = re.compile(
    r"まだ|未定|未解決|検討中|迷って|悩んで|TODO|\bnot sure\b|\bunsure\b|\bundecided\b"
    r"|\bstill (?:need|have to|open|unclear|deciding)\b|\bopen question\b|\blater\b",
    re.IGNORECASE,
)


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


_OPENER_RE = re.compile(
    r"^\W*(?:結論|じゃあ|では|うん|よし|いろいろ考えて|考えたけど|悩んだけど|決めた|ok|okay|so|alright|in the end)\b"
    r"|^\W*(?:結論|じゃあ|うん|よし|いろいろ考えて|考えたけど|悩んだけど)",
    re.IGNORECASE,
)


_VERDICT_RE = re.compile(r"^\W*(?:ok(?:ay)?|alright|じゃあ|よし|うん|結論)\W", re.IGNORECASE)


_REASON_LEAD_RE = re.compile(
    r"^\W*(?:理由は|理由として|決め手は|なぜなら|というのも|because\b|the reason\b|main reason\b|reasons?:|why:)",
    re.IGNORECASE,
)


def _offers_choice(text: str) -> bool:
    """A sentence that names alternatives: English "A or B", Japanese two clauses closed by
    か (…にするか…にするか) or the disjunction か between nouns put as a question."""
    if not _JA_CHAR_RE.search(text):
        return bool(re.search(r"\b\w+\s+or\s+\w+", text, re.IGNORECASE))
    return len(re.findall(r"か", _own(text))) >= 2 or "ja:embedded_question" in grammar_flags(text)


#: adverbs of the perfective aspect (a closed class): an act finished just now or already
_PERFECTIVE_RE = re.compile(
    r"もう|さっき|先ほど|ついに|とうとう|今日|\b(?:just|already|finally|today|this morning)\b",
    re.IGNORECASE,
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
    r"|(?:(?:ok(?:ay)?|alright)[,.]?\s+)?(?:so|therefore|that's why|hence)(?:[,:]\s*|\s+))",
    re.IGNORECASE,
)


def _reasons(text: str) -> bool:
    text = _CONSEQUENCE_RE.sub("", text)
    return bool(REASON_RE.search(text) or _EXTRA_REASON_RE.search(text) or _ends_in_cause(text))


def _ends_in_cause(text: str) -> bool:
    """A Japanese sentence that stops at a conjunctive particle of cause (…行ってるし。
    …近いから。 …だので。): a reason clause said on its own, its main clause left unsaid."""
    if not _JA_CHAR_RE.search(text):
        return False
    ms = [m for m in analyze(text[-30:]) if m.pos[0] not in ("補助記号", "空白")]
    while ms and ms[-1].pos[0] == "助詞" and ms[-1].pos[1] == "終助詞":
        ms.pop()  # …からね, …しさ
    last = ms[-1] if ms else None
    if (
        len(ms) >= 2
        and last is not None
        and last.surface == "で"
        and last.pos[0] == "助動詞"
        and ms[-2].surface == "の"
        and ms[-2].pos[1] == "準体助詞"
    ):
        return True  # …たいので。 …言ったので。: Sudachi's の + で (the copula's 連用形) is ので
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
    if _reports_anothers_plan(own):
        return 0  # "my sister said we'll rent the van": her plan, told
    if conditional_intent(own) and not _decision_cue(own):
        return (
            0  # 「涼しくなったら走り始める」, "I'll buy it once the price drops": not yet decided
        )
    if _decision_cue(own) and not _refers_back(own):
        score += 3
    elif _decision_cue(own):
        score += 1  # "…って決めたけど": an earlier decision named, maybe a new one in the clause
    intent = 2 if _INTENT_EN_RE.search(text) else 1 if _plain_intent(text) else 0
    if not intent and (elided_plan(own) or own_plan(own)):
        intent = 2 + (message[0].index != 0)  # "going straight for X": I'm left out (notes)
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
        verdict = verdict and not _EN_EVALUATION_RE.match(rest)  # "ok, that's clear": of the answer
        verdict = verdict and not elided_past(rest)  # "Ok. Talked to X last night.": told
        if message[0].index != 0 and verdict and not intent:
            score += 2  # "Ok, Go first." / 「じゃあ、Aで。」: a short verdict after the answer
    if (
        _reasons(text)
        and score < 3
        and not ((intent >= 2 or past_act(own)) and _cause_then_intent(own))
    ):  # "…ので…する": a reason that ends in a verb, not a decision of its own; the act told as
        # done after a causal clause set off (「…言ってたので、結局…申し込んだ」) is none
        score -= 1
    return score


#: an English verdict whose subject is the answer itself (that / this / it + a copula or a verb
#: of seeming): an evaluation of what was said ("that's clear", "it makes sense"), no choice
_EN_EVALUATION_RE = re.compile(
    r"^(?:that|this|it)(?:'s|’s|\s+(?:is|was|sounds|seems|makes|helps|works))\b", re.IGNORECASE
)


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


def _reports_anothers_plan(text: str) -> bool:
    """An English sentence whose intent stands in what someone else said ("my boss said we'll
    ship in March"): the subject of the verb of saying is not I / we, and no clause of the
    person's own follows it (", so I'll …", "but we …")."""
    if _JA_CHAR_RE.search(text) or not _EN_REPORTED_RE.search(text):
        return False
    clauses = re.split(r"[,;]|\b(?:but|so|and then)\b", text, flags=re.IGNORECASE)
    return not any(re.match(r"\s*(?:I|we)\b", c, re.IGNORECASE) for c in clauses[1:])


def _told_in_the_past(text: str) -> bool:
    """An English sentence whose verb is in the past tense whatever its subject ("His best
    friend dropped out", "The landlord came back"): what happened, told. The clause-head
    reader (``structure.en_flags``) reads the past only after I / we."""
    if _JA_CHAR_RE.search(text):
        return False
    words = re.findall(r"[a-z]+", text.lower())
    return any(w in IRREGULAR_PAST or (len(w) > 4 and w.endswith("ed")) for w in words[1:])


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


#: verbs of thinking whose て-form closes the ground a decision stands on (…ちがうなと思って、…)
_THINK_VERBS = frozenset({"思う", "考える", "感じる"})


def _ja_clauses(text: str) -> list[tuple[int, int, bool]]:
    """The clauses of a Japanese sentence as (start, end, causal): cut after a comma or a space
    that follows a conjunctive particle or a predicate's terminal form (Sudachi's analysis).
    A clause is causal when it ends in a conjunctive particle of cause (ので, から, し; not the
    temporal てから, which Sudachi reads as a case particle), in ため(に), or in the て-form of a
    state (狭くて, 行けなくて) or of a verb of thinking (…と思って). Empty when the analysis does
    not give back the text's own length (offsets would not be the text's)."""
    ms = analyze(text)
    if sum(len(m.surface) for m in ms) != len(text):
        return []
    out: list[tuple[int, int, bool]] = []
    start = pos = 0
    words: list[Any] = []  # the clause's morphemes so far, without punctuation
    for m in ms:
        end = pos + len(m.surface)
        if m.pos[0] in ("補助記号", "空白") and m.surface.strip("、，, \u3000") == "" and words:
            last = words[-1]
            before = words[-2] if len(words) > 1 else None
            causal = (last.pos[1] == "接続助詞" and last.surface in ("ので", "から", "し")) or (
                last.surface == "ため"
                or (last.surface == "に" and before is not None and before.surface == "ため")
            )
            if last.surface == "で" and last.pos[0] == "助動詞" and before is not None:
                causal = before.pos[1] == "準体助詞"  # …行けるので、: Sudachi's の + で
            if last.pos[1] == "接続助詞" and last.surface in ("て", "で") and before is not None:
                thought = words[-3].surface if len(words) > 2 else ""
                causal = (
                    before.pos[0] == "形容詞"
                    # what was thought is named (…なと思って, …を考えて), not いろいろ考えて
                    or (before.normalized in _THINK_VERBS and thought in ("と", "って", "を"))
                    # 行けなくて is a state; しないで is "without doing"
                    or (before.pos[0] == "助動詞" and before.surface == "なく")
                )
            ends = (
                last.pos[1] == "接続助詞"
                or causal
                or (
                    last.pos[0] in ("動詞", "形容詞", "助動詞")
                    and len(last.pos) > 5
                    # a space is the writer's comma: Sudachi may read the predicate before it as
                    # modifying the next word (…ことにした 庭が…: 連体形)
                    and last.pos[5].startswith(
                        ("終止形", "連体形") if m.pos[0] == "空白" else "終止形"
                    )
                )
            )
            if ends:
                out.append((start, pos, causal))
                start, words = end, []
        elif m.pos[0] not in ("補助記号", "空白"):
            words.append(m)
        pos = end
    if start < len(text):
        out.append((start, len(text), False))
    return out


def _has_cause(text: str) -> bool:
    """A conjunctive particle of cause anywhere in ``text`` (…なので途中で休める; Sudachi's の +
    で, the copula's 連用形, is ので as in ``_ends_in_cause``)."""
    ms = [m for m in analyze(text) if m.pos[0] not in ("補助記号", "空白")]
    return any(
        (m.pos[1] == "接続助詞" and m.surface in ("ので", "から", "し"))
        or (m.surface == "で" and m.pos[0] == "助動詞" and i > 0 and ms[i - 1].pos[1] == "準体助詞")
        for i, m in enumerate(ms)
    )


def cause_clauses(text: str) -> list[str]:
    """The causal clauses of a decision sentence, each an exact substring: in Japanese the
    clauses before the decision's main clause up to the last causal one (「駅から近いので、Aに
    した」, 「…って言い出して、…ちがうなと思って、兄とも話して、…待つことにしました」), and the
    clauses after it when they give a cause (「…譲ってもらうことにした 畝の間に入るし …安心だ」);
    in English a leading since / as / because clause up to its comma ("Since the lease ends in
    May, we'll move in April"). A time clause (帰ってから) or a condition (雨なら、 / if it
    rains,) is no cause. Empty when the sentence has no main clause of decision or no cause."""
    if not _JA_CHAR_RE.search(text):
        m = re.match(r"^\W*(?:since|as|because)\b[^,;]{8,}(?=,)", text, re.IGNORECASE)
        return [m.group().strip()] if m else []
    clauses = _ja_clauses(text)
    main = next(
        (
            i
            for i, (a, b, _) in enumerate(clauses)
            if _decision_cue(text[a:b]) or _plain_intent(text[a:b])
        ),
        None,
    )
    if main is None:
        return []
    decided = [_decision_cue(text[a:b]) or _plain_intent(text[a:b]) for a, b, _ in clauses]
    last = main
    while (
        last + 1 < len(clauses)
        and decided[last + 1]
        and not clauses[last + 1][2]
        and not _has_cause(text[clauses[last + 1][0] : clauses[last + 1][1]])
    ):
        last += 1  # 「…あきらめて 別府の温泉に2泊にしました …」: the decision runs on
    out: list[str] = []
    causal = [i for i in range(main) if clauses[i][2]]
    if causal:
        span = text[clauses[0][0] : clauses[causal[-1]][1]].strip()
        out.append(_CONSEQUENCE_RE.sub("", span).strip())
    if last + 1 < len(clauses):
        a, b, causal_next = clauses[last + 1]
        rest = text[a:].strip().rstrip("。．!！")
        if (causal_next or _has_cause(text[a:b])) and not _opens(rest):
            out.append(rest)
    return [s for s in out if len(s) >= CLAUSE_MIN_CHARS]
