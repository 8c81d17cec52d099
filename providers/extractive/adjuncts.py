"""Clauses that are adjuncts of another predicate, read by structure (SudachiPy's parts of
speech), so that what they say is not taken for the sentence's own act."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def modifies_a_time_noun(ms: Sequence[Any], i: int) -> bool:
    """The predicate at ``ms[i]`` (a verb, or a サ変 noun with its する) and its auxiliaries
    modify an adverbial noun (Sudachi's 名詞-普通名詞-副詞可能: とき, 頃, 後, ため): the clause
    is the time or the cause of another predicate (「去年の12月に見送ったときは…」,
    「解約した後で気づいた」), it recalls an act, it does not do it now."""
    j = i + 1
    while j < len(ms) and (
        ms[j].pos[0] == "助動詞" or (ms[j].pos[0] == "動詞" and ms[j].normalized == "為る")
    ):
        j += 1
    return j > i + 1 and j < len(ms) and ms[j].pos[0] == "名詞" and ms[j].pos[2] == "副詞可能"
