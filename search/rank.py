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
