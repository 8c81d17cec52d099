"""The grammatical shape of one sentence, in both languages: what its final predicate does
(volitional, past, negated, a question, a choice "Xにする"), what its clauses say (a cause, a
condition, an embedded question). Japanese from SudachiPy's parts of speech and conjugation
forms; English from a small clause-head reader (no parser is installed: the subject pronoun,
the auxiliaries and the verb's ending after it).

The flags name grammar, not topics or wordings: they are the structural features of the role
scorer (``roles.role_features``), whose weights are fitted on labels (``bench/fit_roles.py``).
"""

from __future__ import annotations

import re
from functools import lru_cache

from core.stoplists import stop_words
from core.textsearch import Morpheme, analyze
from providers.extractive.adjuncts import modifies_a_time_noun
from providers.extractive.sentences import _JA_CHAR_RE, _own

#: the Japanese flags, then the English ones (the scorer's feature names are "ja:…", "en:…")
JA_FLAGS = (
    "question",  # ends in ？ or the final particle か (かな, かね)
    "past",  # the final predicate ends in the auxiliary た
    "nonpast_verb",  # the final predicate is a verb in its dictionary (or polite ます) form
    "volitional",  # a volitional form (しよう, 行こう, しましょう) in the final clause
    "koto_ni",  # こと + に + する: a resolution (行くことにする, やめることにした)
    "ni_suru",  # the final predicate is X + に + する: a choice (Aにする, ナシにした)
    "negated",  # ない / ず / ぬ in the final clause
    "desire",  # the auxiliary たい
    "conditional",  # a conditional form (仮定形, ば, たら)
    "causal",  # a conjunctive particle of cause (から, ので, し) or ため + に
    "contrast",  # a conjunctive particle of contrast (けど, が, のに)
    "embedded_question",  # か inside the sentence before は/を/が/も/どうか: an indirect question
    "adjective_end",  # the final predicate is an adjective or adjectival noun: an evaluation
    "noun_end",  # the sentence ends in a noun (+ だ/です): a statement of what is
    "te_end",  # the sentence stops at て/で: an unfinished clause
)

EN_FLAGS = (
    "question",
    "first_person",  # a clause whose subject is I / we
    "future",  # will / 'll / going to / gonna after the subject
    "past",  # the verb after I / we in the past tense (-ed or an irregular past), or perfect
    "progressive",  # I'm / we're + -ing: a near-future act
    "negated",  # not / n't / never
    "causal",  # because / since / so / as: a clause of cause
    "embedded_question",  # whether / if / how to / what to / which, not first
    "unfinished",  # still / yet: an aspect not reached
    "hedge",  # might / maybe / should / could: not settled
    "lets",  # let's: a resolution addressed to oneself
)

_SKIP_END = ("補助記号", "空白")
#: verbs of being, becoming, ability and knowing: a state, not an act the person will do (the
#: same verbs ``roles._plain_intent`` reads as no intent)
_STATE_VERBS = ("有る", "居る", "成る", "出来る", "分かる", "思う", "言う")
#: the verbs of thinking: 「もう一度考えた」 tells a deliberation, no act carried out (past_act)
THINKING_VERBS = ("考える", "迷う", "悩む")


def _final(ms: list[Morpheme]) -> int:
    """The index of the last morpheme of the final predicate: trailing punctuation, final
    particles (ね, よ, な, わ) and laughter left out; -1 if none."""
    i = len(ms) - 1
    while i >= 0 and (
        ms[i].pos[0] in _SKIP_END
        or (ms[i].pos[0] == "助詞" and ms[i].pos[1] == "終助詞" and ms[i].surface != "か")
        or ms[i].surface in ("笑", "w", "ｗ")
    ):
        i -= 1
    return i


def _form(m: Morpheme) -> str:
    return m.pos[5] if len(m.pos) > 5 else ""


def _ctype(m: Morpheme) -> str:
    return m.pos[4] if len(m.pos) > 4 else ""


@lru_cache(maxsize=8192)
def ja_flags(text: str) -> frozenset[str]:
    """The Japanese structural flags of ``text`` (its own words, quotes left out)."""
    own = _own(text)
    if not _JA_CHAR_RE.search(own):
        return frozenset()
    ms = [m for m in analyze(own[-120:]) if m.pos[0] != "空白"]
    if not ms:
        return frozenset()
    out: set[str] = set()
    end = _final(ms)
    if own.rstrip().endswith(("?", "？")) or (
        end >= 0 and ms[end].surface == "か" and ms[end].pos[0] == "助詞"
    ):
        out.add("question")
    if end < 0:
        return frozenset(out)
    # the final clause: back from the end to the last punctuation or conjunctive particle
    start = end
    while start > 0 and not (
        ms[start - 1].pos[0] == "補助記号"
        or (ms[start - 1].pos[0] == "助詞" and ms[start - 1].pos[1] == "接続助詞")
    ):
        start -= 1
    clause = ms[start : end + 1]
    last = ms[end]
    if last.pos[0] == "助詞" and last.surface == "か" and end > 0:
        last = ms[end - 1]  # 行こうか, 決めようかな: the predicate under the question
        end -= 1
    if last.pos[0] == "助動詞" and _ctype(last) == "助動詞-タ":
        out.add("past")
    verb = last
    if last.normalized == "ます" and end > 0:
        verb = ms[end - 1]
    if (
        verb.pos[0] == "動詞"
        and _form(last).startswith("終止形")
        and verb.normalized not in _STATE_VERBS
    ):
        out.add("nonpast_verb")  # an act in its dictionary form, not a state (ある, いる, なる)
    if any(_form(m) == "意志推量形" for m in clause):
        out.add("volitional")
    for i in range(len(ms) - 2):
        if ms[i].surface == "こと" and ms[i + 1].surface == "に" and ms[i + 2].normalized == "為る":
            out.add("koto_ni")
    # the head verb of the final predicate: する after に (Aにする / ナシにした / Aにします)
    head = end
    while head > start and ms[head].pos[0] == "助動詞":
        head -= 1
    if (
        ms[head].pos[0] == "動詞"
        and ms[head].normalized == "為る"
        and head >= 1
        and ms[head - 1].surface == "に"
    ):
        out.add("ni_suru")
    if any(m.pos[0] == "助動詞" and _ctype(m) in ("助動詞-ナイ", "助動詞-ヌ") for m in clause):
        out.add("negated")
    if any(m.pos[0] == "助動詞" and _ctype(m) == "助動詞-タイ" for m in ms):
        out.add("desire")
    if any(_form(m).startswith("仮定形") for m in ms) or any(
        m.pos[0] == "助詞" and m.pos[1] == "接続助詞" and m.surface == "ば" for m in ms
    ):
        out.add("conditional")
    for i, m in enumerate(ms):
        if m.pos[0] == "助詞" and m.pos[1] == "接続助詞":
            if m.surface in ("から", "ので", "し"):
                out.add("causal")
            elif m.surface in ("けど", "けれど", "が", "のに", "けれども"):
                out.add("contrast")
        if m.surface in ("ため", "為") and i + 1 < len(ms) and ms[i + 1].surface == "に":
            out.add("causal")
        if (  # の + で (思うので, 長距離なので): Sudachi's 準体助詞 and the copula's 連用形
            m.pos[0] == "助詞"
            and m.pos[1] == "準体助詞"
            and i + 1 < len(ms)
            and _ctype(ms[i + 1]) == "助動詞-ダ"
            and _form(ms[i + 1]).startswith("連用形")
            and ms[i + 1].surface == "で"
        ):
            out.add("causal")
        if (
            m.surface == "か"
            and m.pos[0] == "助詞"
            and i < end
            and i + 1 < len(ms)
            and ms[i + 1].surface in ("は", "を", "が", "も", "どう", "、", "で", "に")
        ):
            out.add("embedded_question")
    if last.pos[0] == "形容詞" or (
        last.pos[0] == "助動詞" and end > 0 and ms[end - 1].pos[0] == "形状詞"
    ):
        out.add("adjective_end")
    if last.pos[0] in ("名詞", "代名詞") or (
        last.normalized in ("だ", "です") and end > 0 and ms[end - 1].pos[0] == "名詞"
    ):
        out.add("noun_end")
    if last.pos[0] == "助詞" and last.surface in ("て", "で") and last.pos[1] == "接続助詞":
        out.add("te_end")
    return frozenset(out)


_EN_WORD_RE = re.compile(r"[a-z]+(?:'[a-z]+)?")
_SUBJECT = ("i", "we")
_CONTRACTED = {"i'll": "will", "we'll": "will", "i'm": "am", "we're": "are", "i've": "have"}
_CONTRACTED.update({"we've": "have", "i'd": "would", "we'd": "would"})
_AUX = frozenset(
    [
        "will",
        "would",
        "shall",
        "am",
        "are",
        "was",
        "were",
        "have",
        "had",
        "do",
        "did",
        "can",
        "could",
        "should",
        "might",
    ]
)
#: the irregular past forms of the commonest verbs (grammar, not topics)
IRREGULAR_PAST = frozenset(
    [
        "went",
        "got",
        "bought",
        "chose",
        "made",
        "took",
        "gave",
        "found",
        "thought",
        "told",
        "felt",
        "kept",
        "left",
        "paid",
        "put",
        "sent",
        "spent",
        "sold",
        "stood",
        "met",
        "ran",
        "began",
        "came",
        "saw",
        "said",
        "did",
        "had",
        "was",
        "were",
        "knew",
        "brought",
    ]
)


@lru_cache(maxsize=8192)
def en_flags(text: str) -> frozenset[str]:
    """The English structural flags of ``text`` (a sentence with Latin words and no kana)."""
    own = _own(text)
    if _JA_CHAR_RE.search(own):
        return frozenset()
    low = own.lower().replace("’", "'")
    words = _EN_WORD_RE.findall(low)
    if not words:
        return frozenset()
    out: set[str] = set()
    if own.rstrip().endswith("?"):
        out.add("question")
    for i, w in enumerate(words):
        subject = w in _SUBJECT or w in _CONTRACTED
        if not subject:
            continue
        out.add("first_person")
        rest = ([_CONTRACTED[w]] if w in _CONTRACTED else []) + words[i + 1 : i + 5]
        if not rest:
            continue
        if (
            rest[0] == "will"
            or rest[:2] in (["am", "going"], ["are", "going"])
            or "gonna" in rest[:2]
        ):
            out.add("future")
        if (
            rest[0] in ("am", "are")
            and len(rest) > 1
            and rest[1].endswith("ing")
            and rest[1] != "going"
        ):
            out.add("progressive")
        verb = rest[1] if rest[0] in ("have", "had") and len(rest) > 1 else rest[0]
        if rest[0] in ("have", "had") or (
            verb not in _AUX and (verb.endswith("ed") or verb in IRREGULAR_PAST)
        ):
            out.add("past")
    if any(w in ("not", "never") or w.endswith("n't") for w in words):
        out.add("negated")
    if re.search(r"\b(?:because|since|so that|as it|cause)\b|, so\b", low):
        out.add("causal")
    if any(w in ("whether", "if") for w in words[1:]) or re.search(
        r"\b(?:how|what|which|where|when) (?:[a-z]+ ){0,3}?to [a-z]+",
        low,  # which site to use
    ):
        out.add("embedded_question")
    if any(w in ("still", "yet") for w in words):
        out.add("unfinished")
    if any(w in ("might", "maybe", "should", "could", "perhaps") for w in words):
        out.add("hedge")
    if "let's" in words[:3] or words[:2] == ["let", "us"]:
        out.add("lets")
    return frozenset(out)


@lru_cache(maxsize=8192)
def clause_question(text: str) -> bool:
    """An embedded question the flags do not read: Japanese a clause closed by か inside the
    sentence (枠があるか電話で聞く, 移せないか探す: a question as the object; not a choice
    between two nouns, AかB); English a wh-clause as a preposition's object ("depends on when
    the clinic has a slot"). Read by the rules (``roles``), not a feature of the fitted scorer."""
    own = _own(text)
    if _JA_CHAR_RE.search(own):
        ms = [m for m in analyze(own[-120:]) if m.pos[0] not in ("空白",)]
        end = _final(ms)
        return any(
            m.surface == "か"
            and m.pos[0] == "助詞"
            and 0 < i < end
            and ms[i - 1].pos[0] in ("動詞", "助動詞", "形容詞")
            for i, m in enumerate(ms)
        )
    return bool(
        re.search(r"\b(?:on|about|of|upon|over) (?:how|what|which|where|when|who)\b", own.lower())
    )


@lru_cache(maxsize=8192)
def question_as_argument(text: str) -> bool:
    """A Japanese question clause that is the argument of the sentence's own predicate: a
    clause closed by か after a predicate (a verb, an auxiliary, an adjective) and taken up by
    the topic or subject particle は / が / も (「英語をどうするかが問題。」「週何回走れるかが
    一番の問題」「ロープウェイが動くかも気になる」), with the final predicate neither past nor a
    resolution: what the person says of a question they have not answered."""
    own = _own(text)
    if not _JA_CHAR_RE.search(own):
        return False
    ms = [m for m in analyze(own[-120:]) if m.pos[0] not in ("空白",)]
    end = _final(ms)
    if end < 0:
        return False
    f = ja_flags(text)
    if {"past", "koto_ni", "question"} & f:
        return False
    return any(
        m.surface == "か"
        and m.pos[0] == "助詞"
        and 0 < i < end
        and ms[i - 1].pos[0] in ("動詞", "助動詞", "形容詞")
        and (
            (ms[i + 1].surface in ("は", "が", "も") and ms[i + 1].pos[0] == "助詞")
            # or set off on its own by an ellipsis (「…どう説明するか…本人めっちゃ落ち込む
            # と思う。」): the person asking it of themselves
            or (ms[i + 1].pos[0] == "補助記号" and ms[i + 1].surface in (".", "…", "‥"))
        )
        for i, m in enumerate(ms)
    )


def flags(text: str) -> frozenset[str]:
    """Both languages' flags, prefixed by language (``ja:past``, ``en:future``)."""
    return frozenset([f"ja:{f}" for f in ja_flags(text)] + [f"en:{f}" for f in en_flags(text)])


def feature_names() -> list[str]:
    return [f"ja:{f}" for f in JA_FLAGS] + [f"en:{f}" for f in EN_FLAGS]


#: The heads of a predicate that gives something up: verbs (and サ変 nouns with する) whose
#: lemma stops, cancels, refuses or defers what they govern. A closed lemma class, like the
#: negation auxiliaries: it is read only as the head of a clause, and what counts is the
#: argument it governs (``dropped_things``), not the word.
DROP_HEADS_JA = frozenset(
    [
        "止める",
        "やめる",
        "辞める",
        "取り止める",
        "取りやめる",
        "見合わせる",
        "見送る",
        "諦める",
        "断る",
        "取り消す",
        "中止",
        "解約",
        "キャンセル",
        "撤回",
        "断念",
        "白紙",
    ]
)
DROP_VERBS_EN = (
    "cancel",
    "drop",
    "quit",
    "scrap",
    "skip",
    "abandon",
    "ditch",
    "shelve",
    "forget",
    "give up",
    "call off",
    "back out of",
    "pull out of",
)
#: what an English copular predicate says of its subject when it is given up ("X is off")
DROP_STATES_EN = ("off", "out", "dead", "over", "cancelled", "canceled", "scrapped", "shelved")

_EN_DROP_VERB = "|".join(v.replace(" ", r"\s+") for v in DROP_VERBS_EN)
_EN_DROPPED = re.compile(
    # a clause head: I / we (+ will / going to) + a giving-up verb + its object; or the verb
    # first (an imperative, "Scrap the Berlin plan")
    rf"(?:\b(?:i|we)(?:'ll|\s+will|'m\s+going\s+to|'re\s+going\s+to|\s+am\s+going\s+to"
    rf"|\s+are\s+going\s+to|'ve|\s+have|\s+had)?\s+|^\W*)(?:{_EN_DROP_VERB})(?:s|ed|ped|ping|ting)?"
    rf"\s+(?:on\s+)?(?P<obj>[^.,;!?]+)"
    # a copular clause: its subject + be + a state of being given up ("Portugal is off")
    rf"|(?:^|[,;:]\s*|\bso\s+|\bbut\s+|\band\s+)(?P<subj>[a-z][a-z0-9' -]{{0,60}}?)\s+"
    rf"(?:is|are|'s|was|were)\s+(?:now\s+|definitely\s+|officially\s+)?"
    rf"(?:{'|'.join(DROP_STATES_EN)})\b(?!\s+(?:of|to|with|there|and about))"
    # a plan that will not happen: its subject + won't / isn't going to + happen / work
    rf"|(?:^|[,;:]\s*|\bso\s+|\bbut\s+)(?P<neg>[a-z][a-z0-9' -]{{0,60}}?)\s+"
    rf"(?:won't|will\s+not|isn't\s+going\s+to|is\s+not\s+going\s+to|isn't|is\s+not)\s+"
    rf"(?:happen(?:ing)?|work(?:ing)?(?:\s+out)?)\b",
    re.IGNORECASE,
)
_NO_THING = ("件", "こと", "事", "話", "予定")
_EN_GENERIC = frozenset(["plan", "plans", "idea", "thing", "whole", "option", "trip", "one"])


def _stem(word: str) -> str:
    """A lemma's stem: a Japanese verb or its nominal form (引っ越す, 引っ越し → 引っ越), the
    trailing kana of its ending off; an English word lower-cased, a plural s off."""
    if _JA_CHAR_RE.search(word):
        stem = re.sub(r"[ぁ-ゖ]+$", "", word)
        return stem or word
    w = word.lower()
    return w[:-1] if len(w) > 3 and w.endswith("s") and not w.endswith("ss") else w


def content_stems(text: str) -> frozenset[str]:
    """The stems of ``text``'s content words: Japanese common and proper nouns and independent
    verbs (not する, なる, いる: Sudachi's 非自立可能), English words outside stopwords-iso's
    list (three letters or more)."""
    return frozenset(content_stems_ordered(text))


def content_stems_ordered(text: str) -> list[str]:
    """:func:`content_stems` in the order said."""
    out: list[str] = []
    if _JA_CHAR_RE.search(text):
        for m in analyze(text):
            content = (m.pos[0] == "名詞" and m.pos[1] in ("普通名詞", "固有名詞")) or (
                m.pos[0] == "動詞" and m.pos[1] == "一般"
            )
            if content and m.normalized not in DROP_HEADS_JA and m.normalized not in _NO_THING:
                out.append(_stem(m.normalized))
    english = _en_stop()
    for w in re.findall(r"[A-Za-z][A-Za-z0-9']{2,}", text):
        lw = w.lower()
        if lw not in english and lw not in _EN_GENERIC:
            out.append(_stem(lw))
    return out


@lru_cache(maxsize=1)
def _en_stop() -> frozenset[str]:
    return stop_words("en")


@lru_cache(maxsize=8192)
def dropped_things(text: str) -> frozenset[str]:
    """The stems of what ``text`` gives up, read by clause structure; empty when it gives up
    nothing. Japanese: a predicate headed by a lemma of ``DROP_HEADS_JA`` (見合わせる,
    お断りする, 解約して, 白紙に戻す) and the content words of its clause before it (the
    argument it governs: 「引っ越しは見合わせて」, 「売るのはやめて」); or a verb negated under
    ことにする / 方向 / でおく (通わせないことにした), the verb itself and its clause.
    English: I / we (+ will) or an imperative + a giving-up verb and its object ("I'll quit
    the class", "Scrap the Berlin plan"); a subject + be + a state of being given up ("So
    aligners are out", "Portugal is off for this year"); a subject + won't / isn't going to
    happen / work."""
    own = _own(text)
    if _JA_CHAR_RE.search(own):
        return _ja_dropped(own)
    low = own.replace("’", "'")
    out: set[str] = set()
    for m in _EN_DROPPED.finditer(low):
        arg = m.group("obj") or m.group("subj") or m.group("neg") or ""
        # the noun phrase's head: its last content word before a preposition or a clause
        arg = re.split(
            r"\b(?:and|instead|because|since|for|at|in|on|with|from|of|to|this|next|now)\b", arg
        )[0]
        out |= _head(content_stems_ordered(arg))
    return frozenset(out)


def _head(stems: list[str]) -> set[str]:
    return {stems[-1]} if stems else set()


def _ja_dropped(text: str) -> frozenset[str]:
    ms = [m for m in analyze(text) if m.pos[0] != "空白"]
    out: set[str] = set()
    for i, m in enumerate(ms):
        head = m.normalized in DROP_HEADS_JA and m.pos[0] in ("動詞", "名詞")
        negated_plan = False
        if not head and m.pos[0] == "動詞":
            j = i + 1  # the verb's voice (causative, passive) before its negation
            while j < len(ms) and ms[j].pos[0] == "助動詞" and ms[j].normalized in _VOICES:
                j += 1
            if j < len(ms) and ms[j].pos[0] == "助動詞" and _ctype(ms[j]) in _NEG_TYPES:
                rest = "".join(x.surface for x in ms[j + 1 : j + 4])
                negated_plan = bool(re.match(r"(?:ことに|方向|でお|で置)", rest))
        if not (head or negated_plan) or modifies_a_time_noun(ms, i):
            continue  # 「去年見送ったときは…」: a clause of a time noun recalls, gives nothing up
        k = i  # the clause it heads: back to punctuation or a conjunctive particle
        while k > 0 and not (
            ms[k - 1].pos[0] == "補助記号"
            or (ms[k - 1].pos[0] == "助詞" and ms[k - 1].pos[1] == "接続助詞")
        ):
            k -= 1
        if negated_plan:  # the negated verb is what is given up (通わせないことにした)
            out.add(_stem(m.normalized))
        else:  # the head of the argument it governs: the last content word before it
            out |= _head(content_stems_ordered("".join(x.surface for x in ms[k:i])))
    return frozenset(out)


_VOICES = ("せる", "させる", "れる", "られる")
_NEG_TYPES = ("助動詞-ナイ", "助動詞-ヌ")


#: English adverbs that may stand between I / we and the verb of a past act
_EN_ACT_ADVERBS = r"(?:just|already|finally|actually|also|officially|now)"
#: the irregular past forms that tell a transaction or a choice (the others — got, found, saw,
#: thought, felt, was — tell what happened to the person or what they perceived)
_EN_ACT_IRREGULAR = ("bought", "chose", "paid", "sent", "sold", "quit")
_EN_PAST_ACT_RE = re.compile(
    rf"(?:^|[,;:—–-]\s*|\b(?:so|and|then)\s+)(?:i|we)\s+(?:{_EN_ACT_ADVERBS}\s+){{0,2}}"
    rf"(?:[a-z]{{3,}}ed|{'|'.join(_EN_ACT_IRREGULAR)})\b(?!\s+to\b)",
    re.IGNORECASE,
)


@lru_cache(maxsize=8192)
def past_act(text: str) -> bool:
    """The person tells an act of their own as done (申し込んだ, 冬休みにずらした, キャンセル
    の連絡した, "I booked …", "I signed up …"): a decision already carried out when nothing
    else in the conversation states one. Japanese: the final predicate is an independent verb
    (or a サ変 noun + する) + the past auxiliary た, its final clause names no subject with
    が (小麦粉が上がった is what happened, not what the person did), the verb is no state
    (なる, いる, できる), no auxiliary after て (行ってきた, 見てみた: an experience told), no
    passive, causative or desire between verb and た, and the sentence holds no condition
    (電話したら…だった: a narration) and asks nothing. English: I / we (+ just, already) + a
    regular past not followed by to (wanted to, tried to), or a past of a transaction."""
    own = _own(text)
    if not _JA_CHAR_RE.search(own):
        if own.rstrip().endswith("?"):
            return False
        return bool(_EN_PAST_ACT_RE.search(own.replace("’", "'")))
    f = ja_flags(text)
    if "question" in f:
        return False
    ms = [m for m in analyze(own[-120:]) if m.pos[0] != "空白"]
    end = _act_end(ms)
    if end < 1 or _ctype(ms[end]) != "助動詞-タ":
        return False
    if _negated_before(ms, end) or _conditional(ms, end):
        return False
    if end >= 2 and ms[end - 1].pos[0] == "助動詞" and ms[end - 1].normalized == "ます":
        end -= 1  # the polite past (連絡しました, 申し込みました): the same act told
    verb = ms[end - 1]
    if verb.pos[0] != "動詞" or verb.normalized in _STATE_VERBS + THINKING_VERBS or potential(verb):
        return False
    if verb.normalized == "為る" and end >= 2 and ms[end - 2].pos[0] == "副詞":
        return False  # ほっとした, すっきりした: an adverb + する tells a feeling, no act
    if end >= 2 and ms[end - 2].pos[0] == "助詞" and ms[end - 2].surface in ("て", "で"):
        if verb.normalized not in _BENEFACTIVE or end < 3 or ms[end - 3].normalized != "為る":
            return False  # 行ってきた, 試してみた, 買っておいた: the auxiliary use of the verb
        end -= 2  # 変更してもらった: an act the person had done for them, the verb before て
    start = end
    while start > 0 and not (
        ms[start - 1].pos[0] == "補助記号"
        or (ms[start - 1].pos[0] == "助詞" and ms[start - 1].pos[1] == "接続助詞")
    ):
        start -= 1
    return not any(m.surface == "が" and m.pos[1] == "格助詞" for m in ms[start:end])


#: the benefactive auxiliaries after して (変更してもらった, 後ろ倒しにしていただいた): a change
#: the person asked for and had made, theirs as much as 変更した (not 見せてもらった: an
#: experience, nor 声をかけてもらった: what another did)
_BENEFACTIVE = ("貰う", "頂く")


def _act_end(ms: list[Morpheme]) -> int:
    """The last morpheme of the predicate a past act is told by: the final predicate (``_final``),
    or, when the sentence ends in a clause after a comma with no predicate of its own (…申し込み
    ました、3回で3000円。: a detail appended), the predicate before that comma; after た the
    formal noun ところ + the copula (申し込んだところです) is the same act told."""
    end = _final(ms)
    if end < 0:
        return end
    tail = end
    while tail >= 0 and ms[tail].pos[0] not in ("補助記号", "動詞", "形容詞", "助動詞"):
        tail -= 1
    if tail > 0 and ms[tail].pos[0] == "補助記号" and ms[tail].surface in ("、", "，", ","):
        end = _final(ms[:tail])
    elif (
        end >= 2
        and ms[end].pos[0] == "助動詞"
        and ms[end].normalized in ("です", "だ")
        and ms[end - 1].normalized == "所"
    ):
        end -= 2
    return end


def _negated_before(ms: list[Morpheme], end: int) -> bool:
    """A negation (ない / ず) in the clause that ends at ``end``."""
    start = end
    while start > 0 and not (
        ms[start - 1].pos[0] == "補助記号"
        or (ms[start - 1].pos[0] == "助詞" and ms[start - 1].pos[1] == "接続助詞")
    ):
        start -= 1
    return any(
        m.pos[0] == "助動詞" and _ctype(m) in ("助動詞-ナイ", "助動詞-ヌ") for m in ms[start:end]
    )


def _conditional(ms: list[Morpheme], end: int) -> bool:
    """A condition in the clause of the act's predicate (from the last punctuation before it): a
    仮定形 (たら, なら) or ば (入れたら動いた: a result told); a condition set off by a comma
    before it frames the act (電話したら、…って言われて、さっき変更してもらった)."""
    start = end
    while start > 0 and ms[start - 1].pos[0] != "補助記号":
        start -= 1
    for m in ms[start:end]:
        if m.pos[0] == "助詞" and m.pos[1] == "接続助詞" and m.surface == "ば":
            return True
        if _form(m).startswith("仮定形"):
            return True  # 電話したら…だった, 入れたら動いた: a narration, a result
    return False


def potential(m: Morpheme) -> bool:
    """A verb in its potential form (払える, 手伝える, 行ける): Sudachi reads it as a 下一段
    verb whose normalised form is the 五段 verb it is made from (手伝う): an ability, not an
    act the person will do."""
    return (
        m.pos[0] == "動詞"
        and _ctype(m).startswith("下一段")
        and bool(m.normalized)
        and not m.normalized.endswith("る")
    )


def past_state(text: str) -> bool:
    """The sentence's final predicate is a state in the past, not an act: the auxiliary た
    after てる or after て + いる (「やめてた」, 「やめていた」); English "had been", "used to"."""
    if not _JA_CHAR_RE.search(text):
        return bool(re.search(r"\b(?:used to|had been)\b", text, re.IGNORECASE))
    ms = [m for m in analyze(text) if m.pos[0] not in ("補助記号", "空白")]
    for i in range(len(ms) - 1, 0, -1):
        m = ms[i]
        if m.pos[0] == "助動詞" and m.normalized == "た":
            before = ms[i - 1]
            # てる, and the western progressive とる / どる (「断っとった」「読んどった」), which
            # Sudachi normalizes to とる
            return (before.pos[0] == "助動詞" and before.normalized in ("てる", "とる")) or (
                before.normalized == "居る" and i > 1 and ms[i - 2].surface in ("て", "で")
            )
        if m.pos[0] in ("動詞", "名詞", "形容詞"):
            return False
    return False


#: words ending in -ing that are no verb (indefinite pronouns, times of day, a preposition):
#: a closed class, so the elided-subject reader does not take "Nothing works" for a plan
_EN_ING_NOT_VERB = frozenset(
    ["nothing", "something", "anything", "everything", "morning", "evening", "during", "spring"]
)
#: verbs whose progressive tells a deliberation, not an act (as ``clauses._INTENT_EN_RE``)
_EN_ING_DELIBERATE = frozenset(["thinking", "wondering", "trying", "looking", "considering"])
#: what opens the object of a verb's base form: a determiner or a preposition of its frame
_EN_OBJECT_START = frozenset(
    ["the", "a", "an", "my", "our", "it", "this", "that", "with", "to", "for", "on", "up"]
)
#: a finite verb after a gerund in its clause: a copula, or a verb in -s before its object or
#: an adverb of degree ("… matters a lot", "… costs more"): the gerund is its subject
_EN_FINITE_AFTER_GERUND_RE = re.compile(
    r"\b(?:is|was|would be|will be)\b"
    r"|\b(?!(?:this|its|his|hers|ours|yours|plus|bus|news)\b)[a-z]{2,}[^su\W]s\s+"
    r"(?:a|an|the|more|less|much|me|us|it|so|too|really)\b"
)
_EN_ELIDED_RE = re.compile(
    r"^\W*(?:(?:ok(?:ay)?|so|and|then|alright|right)\W+)*"  # a lead filler ("ok so:")
    r"(?:(?:just|probably|definitely|now)\s+)?"
    r"(?:(?P<not>not|never)\s+)?"
    r"(?:(?P<ing>[a-z]{2,}ing)|will\s+(?:not\s+)?(?P<will>[a-z]{3,})"
    # "just" + a verb's base form + its object: a plan put to oneself ("just renew the card")
    r"|(?<=just )(?P<base>[a-z]{3,}))"
    r"\s+(?P<next>[a-z0-9']+)",
)


@lru_cache(maxsize=8192)
def elided_plan(text: str) -> bool:
    """An English clause of the person's own plan whose subject (I'm / I'll / we're) is left
    out, as notes are written: a sentence that opens with a verb in -ing ("going straight for
    the permanent permit", "not doing the extension, …") or with will + a verb ("Will resign on
    Friday"), followed by its object or a preposition, not a question, not a list item, not a
    participial phrase before a clause of its own ("Looking at the numbers, it works"), not a
    verb of deliberation ("thinking about …")."""
    own = _own(text)
    if _JA_CHAR_RE.search(own) or own.rstrip().endswith("?") or re.match(r"^\s*[-*•‣]", own):
        return False
    low = own.lower().replace("’", "'").strip()
    m = _EN_ELIDED_RE.match(low)
    if not m:
        return False
    verb = m.group("ing") or m.group("will") or m.group("base")
    if verb in _EN_ING_NOT_VERB or verb in _EN_ING_DELIBERATE:
        return False
    if m.group("base") and (
        verb in _AUX
        or verb.endswith(("ed", "s"))
        or verb in IRREGULAR_PAST
        or m.group("next") not in _EN_OBJECT_START
    ):
        return False  # "just wanted …", "just the two of us": no base form with its object
    if m.group("next") in ("i", "we", "you", "it", "he", "she", "they"):
        return False  # "Going there, I …": the subject follows; no elided plan
    if len(_EN_WORD_RE.findall(low)) < 4:
        return False  # "will report back": a closing formula, no act and its object
    first = low.partition(",")[0]
    if m.group("ing") and _EN_FINITE_AFTER_GERUND_RE.search(first[m.end("ing") :]):
        return False  # "Meeting them in person matters a lot": the gerund is the subject
    head, _, rest = low.partition(",")
    # a participial phrase set off before its own clause with a subject ("Looking at it, it …")
    return not (
        m.group("ing")
        and rest
        and re.match(r"\s*(?:i|we|you|it|he|she|they|this|that|the)\b", rest)
    )


@lru_cache(maxsize=8192)
def elided_past(text: str) -> bool:
    """An English sentence that opens with a past verb, its subject I / we left out ("Talked to
    the landlord last night.", "Went with the cheaper one."): what the person did, told."""
    own = _own(text)
    if _JA_CHAR_RE.search(own):
        return False
    words = _EN_WORD_RE.findall(own.lower().replace("’", "'"))
    if not words:
        return False
    first = words[0]
    return first in IRREGULAR_PAST - {"had", "was", "were", "did"} or (
        len(first) > 4 and first.endswith("ed") and first not in ("need", "indeed")
    )


#: the base forms of deliberation and waiting: "let's see", "let's think it over" resolve nothing
_EN_DELIBERATE_BASE = frozenset(
    ["see", "think", "wait", "talk", "discuss", "look", "try", "consider", "figure", "check"]
)
_EN_OWN_PLAN_RE = re.compile(
    r"(?:^|[,;:]\s*|\b(?:so|then|ok(?:ay)?)\s+)"
    r"(?:let's|let\s+us)\s+(?P<base>[a-z]{2,})\b"
    r"|\b(?:i'm|i\s+am|we're|we\s+are)\s+not\s+(?P<ing>[a-z]{2,}ing)\s+(?P<next>[a-z0-9']+)"
)


@lru_cache(maxsize=8192)
def own_plan(text: str) -> bool:
    """An English plan of the person's own the intent reader leaves out: let's + a verb (a
    resolution put to oneself, "let's take the coast road"; not "let's see", a verb of
    deliberation), or the negated progressive of I / we with its object ("I'm not renewing the
    lease", "we're not doing the trip for now"): an act given up, told as under way. Not a
    question; a state ("I'm not sleeping well") has no object after it."""
    own = _own(text)
    if _JA_CHAR_RE.search(own) or own.rstrip().endswith("?"):
        return False
    low = own.lower().replace("’", "'")
    for m in _EN_OWN_PLAN_RE.finditer(low):
        if m.group("base"):
            if m.group("base") not in _EN_DELIBERATE_BASE:
                return True
        elif m.group("ing") not in _EN_ING_DELIBERATE and m.group("next") in _EN_OBJECT_START | {
            "for",
            "after",
            "any",
            "this",
            "that",
        }:
            return True
    return False
