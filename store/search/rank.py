"""The ranking arithmetic of recall (pure: no database), unit-tested on its own.

    idf            BM25's inverse document frequency: rarer terms weigh more
    bm25           a message's lexical score: the idf of every query term it holds, with
                   BM25's length normalisation (the index keeps no term counts: tf is 0 or 1)
    coverage       the share of the query's idf mass a message holds
    fuse           weighted Reciprocal Rank Fusion of ranked lists, as ``search.fusion.rrf``
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from core.textsearch import index_tokens

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


def matched_terms(terms: Sequence[object], text: str) -> list[int]:
    """Indexes of ``terms`` (``TermLike``) found in ``text`` (a title), by the index tokens."""
    toks = set(index_tokens(text))
    return [
        i for i, t in enumerate(terms)
        if matches(t.lexemes, t.prefix, toks)  # type: ignore[attr-defined]
    ]  # fmt: skip


@dataclass
class Fused:
    key: str
    score: float
    ranks: dict[str, int]


def fuse(rankings: Mapping[str, Sequence[str]], weights: Mapping[str, float], k: int = 60) -> list[Fused]:
    """``score = Σ weight / (k + rank)`` over the lists; best first, ties to more lists, then key."""
    out: dict[str, Fused] = {}
    for name, keys in rankings.items():
        w = weights.get(name, 0.0)
        for rank, key in enumerate(keys, start=1):
            f = out.setdefault(key, Fused(key, 0.0, {}))
            if name not in f.ranks:
                f.ranks[name] = rank
                f.score += w / (k + rank)
    return sorted(out.values(), key=lambda f: (-f.score, -len(f.ranks), f.key))
