"""Recall's turn list: the candidates ranked as chat turns by the fitted ``rank.turn_score``
(ADR 0035), read with their neighbours and their conversation's best lexical match."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence

from core.people import ME_ENV, parse_names
from search import rank as rk
from search.recall_reads import _Row
from search.understand import Term

LIST_LIMIT = 50  # each list contributes at most this many ranks
MIN_COVERAGE = 0.3  # floor: share of the query's idf mass a message (with its title) holds


def turn_list(
    rows: Sequence[_Row],
    cands: Sequence[_Row],
    terms: Sequence[Term],
    w: Sequence[float],
    avg_len: float,
    conv_sim: dict[str, float],
    lead: set[str],
) -> tuple[list[str], set[str], dict[str, float], dict[str, tuple[float, ...]]]:
    """The candidates ranked by ``rank.turn_score`` (ADR 0035): the names of the chat's speakers
    are no content (a partner's "Wow, Maria, that looks great!" holds the word "Maria"), a name
    in the question points at that speaker's messages, and a message is read with its two
    neighbours (the question a turn answers is often in the turn before it) and its
    conversation's best lexical match. Also: the candidates beside one of ``lead`` (the lexical
    list's first few) that holds at least ``MIN_COVERAGE`` of the content terms' idf mass, and
    every candidate's score and features."""
    person = person_names()
    names = rk.speaker_names((r.role for r in rows), person)
    content = [t.text.lower() not in names for t in terms]
    asked = {t.text.lower() for t in terms if t.text.lower() in names}
    mass = math.fsum(x for x, keep in zip(w, content, strict=True) if keep) or 1.0
    own = {r.key: rk.bm25((w[i] for i in r.matched if content[i]), r.length, avg_len) for r in rows}
    by_conv: dict[str, list[_Row]] = {}
    for r in rows:
        by_conv.setdefault(r.conv, []).append(r)
    near: dict[str, float] = {}
    beside: set[str] = set()
    for rs in by_conv.values():
        at = {r.position: own[r.key] for r in rs if r.position is not None}
        held = {
            r.position
            for r in rs
            if r.position is not None
            and r.key in lead
            and math.fsum(w[i] for i in r.matched if content[i]) / mass >= MIN_COVERAGE
        }
        beside |= {
            r.key
            for r in rs
            if r.position is not None and (r.position - 1 in held or r.position + 1 in held)
        }
        for r in rs:
            p = r.position
            near[r.key] = max(at.get(p - 1, 0.0), at.get(p + 1, 0.0)) if p is not None else 0.0
    conv_best = {c: max(own[r.key] for r in rs) for c, rs in by_conv.items()}
    top_own = max((own[r.key] for r in cands), default=0.0) or 1.0
    top_near = max((near[r.key] for r in cands), default=0.0) or 1.0
    top_conv = max(conv_best.values(), default=0.0) or 1.0
    score: dict[str, float] = {}
    feats: dict[str, tuple[float, ...]] = {}
    for r in cands:
        speaker = r.role.lower()
        named = (
            None
            if not asked
            else speaker in asked
            or (r.role == "user" and bool(asked & {p.lower() for p in person}))
        )
        feats[r.key] = rk.turn_features(
            own[r.key] / top_own,
            math.fsum(w[i] for i in r.matched if content[i]) / mass,
            r.sim or 0.0,
            conv_sim[r.conv],
            near[r.key] / top_near,
            conv_best[r.conv] / top_conv,
            named,
            r.length,
        )
        score[r.key] = rk.turn_score(feats[r.key])
    return sorted(score, key=lambda k: (-score[k], k))[:LIST_LIMIT], beside, score, feats


def person_names() -> frozenset[str]:
    """The person's own names from ``PMEM_ME`` in the environment, normalised as the importers
    compare them (``core.people``; the data dir's ``.env`` is not read on this path)."""
    return parse_names(os.environ.get(ME_ENV))
