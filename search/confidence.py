"""Whether the answer is there (issue 26 item 5, ADR 0039): recall's and search's final hits
turned into a calibrated probability that they hold the answer, and one per hit that it is (part
of) the answer. A flag beside the hits, never a filter: no hit is dropped or moved.

    answer_features(terms, hits, speakers)    the answer's features (top score, flatness, best
                                              similarity, content-term coverage, whose hits
                                              cover them, agreement of the lists, ...)
    hit_features(...)                         one hit's, beside its answer's confidence
    assess(terms, hits, speakers)             ``Assessment``: answerable, confidence, per hit

Pure (no database): the features come from the hits as returned and the understood question's
terms. The weights are logistic fits on the LoCoMo dev split (``bench/fit_confidence.py``; its
leave-one-conversation-out calibration is in ADR 0039), like ``search.rank.TURN_WEIGHTS``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from search.rank import matched_terms

TOP = 5  # the hits an answer is judged by (R@5)

# Logistic weights (intercept first, then ``ANSWER_FEATURES`` / ``HIT_FEATURES`` in order), fitted
# by bench/fit_confidence.py on the LoCoMo dev split over recall as shipped (ADR 0039): the
# answer's in two stages, a fit that tells category 5 from the answered questions of categories
# 1-4, then Platt scaling (``ANSWER_PLATT``: intercept, slope on its log-odds) against "an evidence
# turn is in the first five". Held out (leave one conversation out): answer Brier 0.223 (the base
# rate alone 0.250), hit Brier 0.0330 (0.0392); at ANSWERABLE_AT, 30.0 % of category 5 marked,
# 5.0 % of categories 1-4, their R@5 0.670 → 0.651.
ANSWER_WEIGHTS: tuple[float, ...] = (
    -3.18,
    0.02593,
    -0.02552,
    -0.5324,
    0.7926,
    0.4675,
    0.3675,
    1.052,
    -0.7926,
    1.367,
    -2.277,
    0.7623,
    0.3079,
    0.5419,
    -0.1801,
    1.83,
    -0.6354,
    -0.6149,
)
ANSWER_PLATT: tuple[float, float] = (-0.3823, 0.5051)
HIT_WEIGHTS: tuple[float, ...] = (-2.863, 0.2177, 1.198, 0.06066, 0.8898, -1.012, 0.3233, -0.4383)
#: ``answerable`` is ``confidence >= ANSWERABLE_AT``: the highest threshold that keeps LoCoMo
#: dev's categories 1-4 R@5 (a marked answer counted a miss) within 0.02 of R@5 unmarked
ANSWERABLE_AT = 0.34

# search's (memories: nobody speaks them, so the speaker features are 0), fitted the same way on
# the LoCoMo dev split's drafted builds (``bench/fit_confidence.py --search``; one memory per
# session, search's R@5 there 0.08): held out, answer Brier 0.050 (base rate alone 0.060), hit
# Brier 0.0076 (0.0089). It does not tell category 5 from 1-4 (at every threshold about as many
# of each are marked), and it is under-confident where search does answer (../shared/eval/):
# ``SEARCH_ANSWERABLE_AT`` is the rule of ``ANSWERABLE_AT`` applied on both dev corpora (R@5 kept
# within 0.02 on LoCoMo and on ../shared/eval/), so it rarely fires.
SEARCH_WEIGHTS: tuple[float, ...] = (
    -3.002,
    0.4076,
    -1.586,
    -2.188,
    0.9757,
    0.7987,
    0,
    0.7987,
    0,
    1.43,
    0,
    0,
    0,
    0,
    -0.281,
    -0.3594,
    -1.276,
    1.126,
)
SEARCH_PLATT: tuple[float, float] = (-1.283, 1.139)
SEARCH_HIT_WEIGHTS: tuple[float, ...] = (-1.278, 0.7639, 0.08478, -0.4395, 0.6678, -1.196, 0, 0)
SEARCH_ANSWERABLE_AT = 0.004


@dataclass(frozen=True)
class Model:
    """One read path's fitted weights (see the constants above)."""

    answer: tuple[float, ...]
    platt: tuple[float, float]
    hit: tuple[float, ...]
    answerable_at: float


RECALL = Model(ANSWER_WEIGHTS, ANSWER_PLATT, HIT_WEIGHTS, ANSWERABLE_AT)
SEARCH = Model(SEARCH_WEIGHTS, SEARCH_PLATT, SEARCH_HIT_WEIGHTS, SEARCH_ANSWERABLE_AT)

ANSWER_FEATURES = (
    "top_score",  # the first hit's fused score × 100
    "flatness",  # the fifth hit's score over the first's (1: no hit stands out)
    "best_similarity",  # the best cosine to the query among the top hits (0: no vectors)
    "top_coverage",  # the share of the content terms the first hit holds
    "best_coverage",  # the best such share among the top hits
    "names_speaker",  # the question names one of the chat's speakers
    "named_coverage",  # the best coverage by a hit of the speaker named (no name: best_coverage)
    "other_coverage",  # the best coverage by a hit of another speaker (no name: 0)
    "named_coverage_all",  # named_coverage over every hit, not the top ones only
    "other_coverage_all",  # other_coverage over every hit
    "other_leads",  # the top hit covering the most content terms is another speaker's
    "lexical_lead_other",  # the lexical list's first (among the hits) is another speaker's
    "lexical_lead_named",  # ... is the named speaker's
    "top_is_lexical_first",  # the first hit is the lexical list's first: the lists agree
    "top_lists",  # the candidate lists the first hit is in, over the lists that ran
    "filled",  # hits returned over the top (0-1)
    "content_terms",  # log(1 + content terms of the question)
)
HIT_FEATURES = (
    "answer_logit",  # the answer's log-odds (ANSWER_WEIGHTS)
    "coverage",  # the share of the content terms it holds
    "similarity",  # its cosine to the query (0: none)
    "relative_score",  # its score over the first hit's
    "log_rank",  # log(rank)
    "by_named",  # spoken by the speaker the question names
    "by_other",  # spoken by another speaker while the question names one
)


@dataclass(frozen=True)
class Assessment:
    answerable: bool
    confidence: float  # 0-1: that the answer is among the hits
    per_hit: tuple[float, ...]  # 0-1, per hit in order: that it is (part of) the answer


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def _linear(weights: Sequence[float], features: Sequence[float]) -> float:
    return weights[0] + math.fsum(a * b for a, b in zip(weights[1:], features, strict=True))


@dataclass(frozen=True)
class HitView:
    """What the features read of one hit, for recall's and search's hits alike."""

    text: str
    score: float
    similarity: float | None
    lists: int  # candidate lists it is in
    speakers: frozenset[str]  # lower-cased names of who said it (none: a memory)
    lexical_rank: int | None = None  # its rank in the lexical list (None: not in it)


def content_terms(terms: Sequence[Any], speakers: Iterable[str]) -> tuple[list[Any], set[str]]:
    """The question's content terms (not generic, not a speaker's name) and the speakers it
    names (lower-cased)."""
    names = set(speakers)
    asked = {t.text.lower() for t in terms if t.text.lower() in names}
    return [t for t in terms if not t.generic and t.text.lower() not in names], asked


def _coverage(content: Sequence[Any], text: str) -> float:
    if not content:
        return 0.0
    found = matched_terms(content, text, forms=False)
    total = math.fsum(t.weight for t in content) or 1.0
    return math.fsum(content[i].weight for i in found) / total


def answer_features(
    content: Sequence[Any],
    asked: set[str],
    hits: Sequence[HitView],
    lists_ran: int,
    limit: int,
) -> tuple[tuple[float, ...], list[float]]:
    """The answer's features (``ANSWER_FEATURES``) and each hit's coverage (of all hits)."""
    cov = [_coverage(content, h.text) for h in hits]
    top = hits[:TOP]
    if not top:
        return (0.0,) * len(ANSWER_FEATURES), cov
    first = top[0].score or 1e-9
    named = [c for h, c in zip(top, cov, strict=False) if h.speakers & asked]
    other = [c for h, c in zip(top, cov, strict=False) if asked and not h.speakers & asked]
    best = max(cov[: len(top)])
    named_all = [c for h, c in zip(hits, cov, strict=True) if h.speakers & asked]
    other_all = [c for h, c in zip(hits, cov, strict=True) if asked and not h.speakers & asked]
    lead = top[cov.index(best)] if best > 0 else None
    ranked = [h for h in hits if h.lexical_rank is not None]
    lex_first = min(ranked, key=lambda h: h.lexical_rank or 0) if ranked else None
    feats = (
        top[0].score * 100.0,
        top[-1].score / first if len(top) >= TOP else 0.0,
        max((h.similarity or 0.0) for h in top),
        cov[0],
        best,
        1.0 if asked else 0.0,
        max(named, default=0.0) if asked else best,
        max(other, default=0.0),
        max(named_all, default=0.0) if asked else max(cov),
        max(other_all, default=0.0),
        1.0 if asked and lead is not None and not lead.speakers & asked else 0.0,
        1.0 if asked and lex_first is not None and not lex_first.speakers & asked else 0.0,
        1.0 if lex_first is not None and lex_first.speakers & asked else 0.0,
        1.0 if lex_first is not None and lex_first is top[0] else 0.0,
        top[0].lists / max(1, lists_ran),
        len(top) / TOP if limit >= TOP else len(top) / max(1, limit),
        math.log1p(len(content)),
    )
    return feats, cov


def hit_features(
    logit: float, hit: HitView, coverage: float, first_score: float, rank: int, asked: set[str]
) -> tuple[float, ...]:
    return (
        logit,
        coverage,
        hit.similarity or 0.0,
        hit.score / first_score if first_score else 0.0,
        math.log(rank),
        1.0 if hit.speakers & asked else 0.0,
        1.0 if asked and not hit.speakers & asked else 0.0,
    )


def assess(
    content: Sequence[Any],
    asked: set[str],
    hits: Sequence[HitView],
    lists_ran: int,
    limit: int,
    model: Model = RECALL,
) -> Assessment:
    """The answer's calibrated confidence, ``answerable`` (``confidence >= answerable_at``;
    no hit at all: not answerable, confidence 0) and each hit's confidence."""
    if not hits:
        return Assessment(False, 0.0, ())
    feats, cov = answer_features(content, asked, hits, lists_ran, limit)
    logit = model.platt[0] + model.platt[1] * _linear(model.answer, feats)
    conf = _sigmoid(logit)
    first = hits[0].score
    per_hit = tuple(
        round(_sigmoid(_linear(model.hit, hit_features(logit, h, c, first, n, asked))), 4)
        for n, (h, c) in enumerate(zip(hits, cov, strict=True), start=1)
    )
    return Assessment(conf >= model.answerable_at, round(conf, 4), per_hit)


def recall_views(hits: Sequence[Any], person: Iterable[str]) -> list[HitView]:
    """Recall's hits (``RecallHit``, texts as the store returned them) as ``HitView``: the
    person's own messages (role "user") speak under the person's names."""
    me = frozenset(p.strip().lower() for p in person if p.strip())
    return [
        HitView(
            h.text,
            h.score,
            h.similarity,
            len(h.lists),
            me if h.role == "user" else frozenset({h.role.lower()}),
            h.lists.get("lexical"),
        )
        for h in hits
    ]


def search_views(hits: Sequence[Any]) -> list[HitView]:
    """Search's hits (``RankedHit``): a memory's title, summary and evidence quotes are its
    text; nobody speaks it."""
    return [
        HitView(
            " ".join([h.title, h.index_summary, *(e.get("quote", "") for e in h.evidence)]),
            h.score,
            h.vector_similarity,
            len(h.ranks),
            frozenset(),
            h.lexical_rank,
        )
        for h in hits
    ]
