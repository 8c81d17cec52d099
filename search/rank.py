"""The ranking arithmetic of recall (pure: no database), unit-tested on its own.

idf            BM25's inverse document frequency: rarer terms weigh more
bm25           a message's lexical score: the idf of every query term it holds, with
               BM25's length normalisation (the index keeps no term counts: tf is 0 or 1)
coverage       the share of the query's idf mass a message holds
fuse           weighted Reciprocal Rank Fusion of ranked lists: ``search.fusion.rrf``
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from core.textsearch import index_tokens, query_tokens, stem
from search.fusion import rrf

K1 = 1.2
B = 0.75


def idf(n_docs: int, df: int) -> float:
    """BM25's idf (the +1 form, never negative)."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


def bm25(weights: Iterable[float], length: int, avg_length: float) -> float:
    """Sum of ``weight · (k1 + 1) / (1 + k1 · (1 - b + b · length / avg))`` over matched terms."""
    norm = 1.0 - B + B * (length / avg_length if avg_length > 0 else 1.0)
    return sum(w * (K1 + 1.0) / (1.0 + K1 * norm) for w in weights)


def matches(lexemes: Sequence[str], prefix: Sequence[bool], tokens: set[str]) -> bool:
    """Whether a term (its lexemes, each exact or a prefix) occurs in ``tokens``."""
    for lex, pre in zip(lexemes, prefix, strict=True):
        if lex in tokens if not pre else any(t.startswith(lex) for t in tokens):
            return True
    return False


def title_tokens(text: str) -> set[str]:
    """The index tokens of a short text (a conversation title) without SudachiPy's normal
    forms: words and their stems, CJK bigrams and characters. A query term's lexemes hold the
    bigrams its written form shares with its dictionary form, so a title still matches; and a
    recall over a million messages reads a hundred titles, where Sudachi costs ~0.5 ms each."""
    out: set[str] = set()
    for tok in query_tokens(text):
        out.add(tok)
        if _CJK_TOKEN.match(tok):
            out.update(tok)  # the characters (the index keeps them beside the bigrams)
        elif len(tok) > 3 and _LATIN_WORD.match(tok):
            out.add(stem(tok))
    return out


_CJK_TOKEN = re.compile(r"^[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\uac00-\ud7af]+$")
_LATIN_WORD = re.compile(r"^[a-z]+$")


def matched_terms(terms: Sequence[object], text: str, *, forms: bool = True) -> list[int]:
    """Indexes of ``terms`` (``search.understand.Term``) found in ``text`` (a title), by the index tokens
    (``forms=False``: without SudachiPy's normal forms, see ``title_tokens``)."""
    toks = set(index_tokens(text)) if forms else title_tokens(text)
    return [
        i
        for i, t in enumerate(terms)
        if matches(t.lexemes, t.prefix, toks)  # type: ignore[attr-defined]
    ]


@dataclass
class Fused:
    key: str
    score: float
    ranks: dict[str, int]


def fuse(
    rankings: Mapping[str, Sequence[str]], weights: Mapping[str, float], k: int = 60
) -> list[Fused]:
    """``search.fusion.rrf`` (``score = Σ weight / (k + rank)``; best first, ties to more lists,
    then key) as ``Fused`` rows; a list without a weight weighs 0."""
    return [
        Fused(key, score, ranks)
        for key, score, ranks in rrf(rankings, {n: weights.get(n, 0.0) for n in rankings}, k)
    ]


# ---------------------------------------------------------------- the turn list (ADR 0035)

# Weights of a logistic ranker fitted on the LoCoMo dev split (five conversations, categories
# 1-4, every candidate a sample, positives weighted up to balance; features as in ``turn_features``;
# ADR 0035 says how they were fitted). Leave-one-conversation-out R@5 of this ranker alone 0.729
# (with the person's name known), 0.697 (the partner's only); it joins the fusion as one list.
TURN_WEIGHTS = (2.05, 1.875, 1.228, 0.095, 1.818, 1.327, 0.301, -2.56, 0.218)
TURN_LIST_WEIGHT = 2.0  # its weight in the fusion (lexical 1.0 × coverage, vector 0.5, context 0.5)
PLAIN_ROLES = frozenset({"user", "assistant", "system", "tool"})


def speaker_names(roles: Iterable[str], person: Iterable[str] = ()) -> set[str]:
    """The lower-cased names of a chat's speakers: a role that is a name (a Telegram or LINE
    partner is stored under their name), and the person's own names (``PMEM_ME``)."""
    out = {r.lower() for r in roles if r and r not in PLAIN_ROLES}
    return out | {p.strip().lower() for p in person if p.strip()}


def without_names(text: str, names: Iterable[str]) -> str:
    """``text`` without the words that are ``names`` (case-insensitive; an English possessive
    "'s" goes with its name; a name in CJK script wherever it stands), spaces collapsed."""
    out = text
    for name in sorted({n for n in names if n}, key=len, reverse=True):
        if _CJK_TOKEN.match(name):
            out = out.replace(name, " ")
        else:
            out = re.sub(
                rf"(?<!\w){re.escape(name)}(?:['’]s)?(?!\w)", " ", out, flags=re.IGNORECASE
            )
    return " ".join(out.split())


def turn_features(
    own: float,
    coverage: float,
    sim: float,
    conv_sim: float,
    neighbour: float,
    conv_best: float,
    named: bool | None,
    length: int,
) -> tuple[float, ...]:
    """One message's features for ``TURN_WEIGHTS``: its BM25 over the content terms (speaker
    names left out) and the best of its two neighbours' and of its conversation's, each divided
    by the query's maximum (so 0-1); its share of the content terms' idf; its cosine and its
    conversation's best; whether its speaker is the one the question names (``None``: the
    question names nobody); the log of its length."""
    return (
        own,
        coverage,
        sim,
        conv_sim,
        neighbour,
        conv_best,
        1.0 if named else 0.0,
        1.0 if named is False else 0.0,
        math.log1p(max(0, length)),
    )


def turn_score(features: Sequence[float], weights: Sequence[float] = TURN_WEIGHTS) -> float:
    """The ranker's linear score (higher is better)."""
    return math.fsum(a * b for a, b in zip(weights, features, strict=True))


# ---------------------------------------------------------------- the reranker (ADR 0035)

RERANK_FEATURES = (
    "fused",
    "r_lexical",
    "r_vector",
    "r_context",
    "r_turn",
    "coverage",
    "lexical",
    "sim",
    "sim_gap",
    "conv_sim",
    "turn_gap",
    "focus",
    "decision",
    "mention",
    "other_language",
    "t_own",
    "t_coverage",
    "t_neighbour",
    "t_conv_best",
    "t_named",
    "t_other_named",
    "t_length",
)
_TURN_NAMES = RERANK_FEATURES[-7:]  # turn_features' own except the two cosines
# Weights of a logistic reranker over the fused candidates (features as in ``rerank_features``),
# fitted by ``bench/fit_rank.py`` (ADR 0035 gives the figures). The intercept does not change
# the order; it makes ``rerank_score`` a probability-like 0-1 score.
RERANK_WEIGHTS: dict[str, float] = {
    "fused": 2.874,
    "r_lexical": 0.536,
    "r_vector": -3.576,
    "r_context": 0.798,
    "r_turn": 0.994,
    "coverage": 3.019,
    "lexical": -1.698,
    "sim": 0.159,
    "sim_gap": 7.581,
    "conv_sim": 5.786,
    "turn_gap": 0.185,
    "focus": 1.843,
    "decision": 2.388,
    "mention": -0.264,
    "other_language": 1.134,
    "t_own": -0.621,
    "t_coverage": -0.14,
    "t_neighbour": 0.122,
    "t_conv_best": 0.462,
    "t_named": 3.295,
    "t_other_named": 1.511,
    "t_length": 0.038,
}
RERANK_BIAS = -5.604


def rerank_features(
    ranks: Mapping[str, int],
    *,
    fused: float,
    coverage: float,
    lexical: float,
    sim: float,
    sim_gap: float,
    conv_sim: float,
    turn_gap: float,
    focus: bool,
    decision: bool,
    mention: bool,
    other_language: bool,
    turn: Sequence[float] | None = None,
) -> dict[str, float]:
    """One fused candidate's features: its fused score ÷ the best one's; ``1/√rank`` in each
    list (0 when absent); its share of the query's idf, its lexical score ÷ the best one's; its
    cosine, and the cosine's gap to the best candidate's (the query's own distribution: a
    question whose best match is weak is not judged by one fixed floor); its conversation's best
    cosine; its turn score's gap to the best; whether it is the asked-about side's, states a
    decision when one is asked about, is in the range by what it speaks of only, is in the other
    language than the question; and ``turn``'s (``turn_features``: all but the two cosines,
    0 when the turn list did not score it)."""
    out = {"fused": fused}
    for name in ("lexical", "vector", "context", "turn"):
        r = ranks.get(name)
        out[f"r_{name}"] = 1.0 / math.sqrt(r) if r else 0.0
    out |= {
        "coverage": coverage,
        "lexical": lexical,
        "sim": sim,
        "sim_gap": sim_gap,
        "conv_sim": conv_sim,
        "turn_gap": max(-10.0, turn_gap),
        "focus": 1.0 if focus else 0.0,
        "decision": 1.0 if decision else 0.0,
        "mention": 1.0 if mention else 0.0,
        "other_language": 1.0 if other_language else 0.0,
    }
    t = (*turn[:2], *turn[4:]) if turn is not None else (0.0,) * len(_TURN_NAMES)
    out |= dict(zip(_TURN_NAMES, t, strict=True))
    return out


def rerank_score(
    features: Mapping[str, float],
    weights: Mapping[str, float] | None = None,
    bias: float | None = None,
) -> float:
    """The reranker's score, 0-1 (the logistic of its linear score): higher is better."""
    w = RERANK_WEIGHTS if weights is None else weights
    z = (RERANK_BIAS if bias is None else bias) + math.fsum(
        w.get(k, 0.0) * v for k, v in features.items()
    )
    return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))
