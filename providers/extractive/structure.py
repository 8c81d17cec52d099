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

from core.textsearch import Morpheme, analyze
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
    if verb.pos[0] == "動詞" and _form(last).startswith("終止形"):
        out.add("nonpast_verb")
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


def flags(text: str) -> frozenset[str]:
    """Both languages' flags, prefixed by language (``ja:past``, ``en:future``)."""
    return frozenset([f"ja:{f}" for f in ja_flags(text)] + [f"en:{f}" for f in en_flags(text)])


def feature_names() -> list[str]:
    return [f"ja:{f}" for f in JA_FLAGS] + [f"en:{f}" for f in EN_FLAGS]
