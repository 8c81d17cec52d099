"""Fit the offline drafter's pair model of the change of mind (issue 27 item 2,
``providers.extractive.pairing``) on every labelled corpus and report it leave-one-set-out.

A pair is a later conversation C and an earlier decision conversation M of the same corpus, M
drafted as the offline drafter drafts it alone (its title, index line, aliases: what the
drafter is offered of a memory); the label is 1 when C's ``revises`` names M. Every kept
conversation (not pure-code) is a C, every earlier one drafted as a decision an M.

    .venv/bin/python bench/fit_pairing.py                 # features, LOSO report; no writing
    .venv/bin/python bench/fit_pairing.py --write         # and write pair_weights.json

Printed per held-out corpus and pooled, one C each: changes of mind appended to the memory
they change, and false appends (an append to any other memory, or of a conversation that
changes none), for the rules alone (``change.changed_memory`` with every earlier decision
memory offered), the revisit (what the drafter does: the one candidate, C's person text
nearest to M among every earlier record of the corpus at cosine >= APPEND_SIM as the append
gate measures it, when ``pairing.revisits`` reads a revisit of its decision), and the model
gated the same way. Each fold's weights are fitted on the other corpora and its threshold
chosen by an inner leave-one-set-out on them (0 false appends), so the held-out corpus never
sets anything. ``--diag`` prints each change and the highest wrong picks.

    .venv/bin/python bench/fit_pairing.py --eval-dir ../shared/eval --eval-dir H1 --eval-dir H2
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

#: the labelled corpora by default (``--eval-dir``, repeated, names others)
CORPORA = [Path("/work/shared/eval"), Path("/work/heldout/H1"), Path("/work/heldout/H2")]
L2 = 1.0  # ridge on the weights (not the bias): ~1,500 pairs, 40 positives, 22 features
MARGIN = 0.02  # the threshold this far above the highest wrong pick seen out of fold
CACHE = Path(
    os.environ.get("PAIRING_CACHE", "/tmp/pairing_fit/rows.pkl")
)  # per corpus: <name>.pkl beside it


def corpus_pairs(eval_dir: Path) -> list[dict[str, Any]]:
    """One item per C of the corpus: its pair rows, the memory ids, the truth, the rules' pick,
    the gate's nearest."""
    from fit_roles import conversations

    from core.models import Channel, MemoryIndexEntry
    from core.secrets import redact_conversation
    from flows.append_gate import memory_text, person_text
    from providers.extractive import draft_record, person_sentences
    from providers.extractive.change import changed_memory
    from providers.extractive.matter import decides_anew
    from providers.extractive.pairing import (
        GATE_SIM,
        REVISIT_KINDS,
        features,
        set_pair_weights,
        side_of,
    )
    from providers.extractive.roles import _parts
    from providers.extractive.vectors import similarities

    set_pair_weights({"off": True})
    convs = sorted(conversations(eval_dir), key=lambda lc: lc[1].created_at)
    drafted: list[tuple[dict[str, Any], Any, MemoryIndexEntry]] = []
    items = []
    for labels, conv in convs:
        if labels.get("kind") == "pure-code":
            continue
        rec = draft_record(conv, [])
        if rec is None:
            continue
        entry = MemoryIndexEntry(
            id=labels["id"],
            title=rec.title,
            index_summary=rec.index_summary,
            kind=rec.memory_kind,
            current_revision=1,
            aliases=rec.aliases,
            source_conversation_keys=[conv.key],
        )
        red, _ = redact_conversation(conv)
        person = person_sentences(red.drafting_messages)
        entries = [e for _, _, e in drafted if e.kind == "decision"]
        if person and entries:
            parts = _parts(person)
            side = side_of(person, parts.decisions)
            rule = (
                changed_memory(person, entries, parts.decisions, decides_anew)
                if parts.decisions
                else None
            )
            rows = features(side, entries, rule=rule.id if rule else None)
            alone = [  # the rules' answer with each memory offered alone
                e.id
                for e in entries
                if parts.decisions
                and changed_memory(person, [e], parts.decisions, decides_anew) is not None
            ]
            ptext = person_text(
                m.text for m in red.drafting_messages if m.channel == Channel.PERSON
            )
            every = [e for _, _, e in drafted]
            gate = similarities(
                [memory_text(e.title, e.aliases, e.index_summary) for e in every], ptext
            )
            k = int(np.argmax(gate))
            for e, r in zip(entries, rows, strict=True):
                # the one candidate: the store's nearest memory to the person text (the gate)
                r["gate:ok"] = float(e.id == every[k].id and gate[k] >= GATE_SIM)
            items.append(
                {
                    "set": eval_dir.name,
                    "c": labels["id"],
                    "truth": labels.get("revises"),
                    "ids": [e.id for e in entries],
                    "rows": rows,
                    "rule": rule.id if rule else None,
                    "rule_alone": alone,
                    "has_decision": bool(parts.decisions),
                    "gate": (every[k].id, float(gate[k])),
                    "gate_rank": {
                        e.id: sum(h > g for h in gate) for e, g in zip(every, gate, strict=True)
                    },
                    "opening": " ".join(s.text for s in person[:3])[:160],
                    "entries": [e.model_dump() for e in entries],
                    "side": side,
                    "decisions": [d.text[:100] for d in parts.decisions[:2]],
                    "rev": [sorted(k for k in REVISIT_KINDS if r[f"rev:{k}"]) for r in rows],
                }
            )
        truth = labels.get("revises")
        at = [i for i, (lab, _, _) in enumerate(drafted) if lab["id"] == truth]
        if at and rec.memory_kind == "decision":
            # the pipeline appends a change to the memory it changes: that memory now holds
            # the later decision (its index line) and both conversations, and the later one
            # is no memory of its own
            lab, c0, e0 = drafted[at[0]]
            drafted[at[0]] = (
                lab,
                c0,
                e0.model_copy(
                    update={
                        "index_summary": rec.index_summary or e0.index_summary,
                        "aliases": list(dict.fromkeys([*e0.aliases, *rec.aliases])),
                        "source_conversation_keys": [*e0.source_conversation_keys, conv.key],
                    }
                ),
            )
            continue
        drafted.append((labels, conv, entry))
    return items


def matrix(items: list[dict[str, Any]], names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    """Every (conversation, earlier decision memory) pair and its label."""
    pairs = [
        (r, i == it["truth"]) for it in items for i, r in zip(it["ids"], it["rows"], strict=True)
    ]
    x = np.array([[r[n] for n in names] for r, _ in pairs], dtype=float)
    y = np.array([float(t) for _, t in pairs])
    return x, y


def fit(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """Class-weighted logistic regression by Newton's method, a ridge on all but the bias."""
    pos = max(y.sum(), 1.0)
    cw = np.where(y > 0, (len(y) - pos) / pos, 1.0)
    w = np.zeros(x.shape[1])
    ridge = np.full(x.shape[1], L2)
    ridge[0] = 1e-6
    for _ in range(60):
        p = 1 / (1 + np.exp(-np.clip(x @ w, -30, 30)))
        grad = x.T @ (cw * (p - y)) + ridge * w
        hess = (x * (cw * p * (1 - p))[:, None]).T @ x + np.diag(ridge)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.abs(step).max() < 1e-8:
            break
    return w


def picks(items: list[dict[str, Any]], w: np.ndarray, names: list[str]) -> list[tuple[str, float]]:
    """Each C's most probable memory and its probability."""
    out = []
    for it in items:
        x = np.array([[r[n] for n in names] for r in it["rows"]])
        # what does not revisit the memory's decision is no change of it, whatever the score
        p = gated(1 / (1 + np.exp(-np.clip(x @ w, -30, 30))), it["rows"])
        k = int(np.argmax(p))
        out.append((it["ids"][k], float(p[k])))
    return out


def gated(p: np.ndarray, rows: list[dict[str, float]]) -> np.ndarray:
    """The probabilities with every memory but the one candidate (the gate's nearest) and every
    memory the conversation does not revisit at 0 (``pairing.changed_by_revisit`` does the
    same)."""
    return p * np.array([r.get("rev:any", 1.0) * r.get("gate:ok", 1.0) for r in rows])


def threshold(items: list[dict[str, Any]], names: list[str]) -> float:
    """Leave-one-set-out over ``items``' corpora: the least threshold with no wrong pick out of
    fold (over the highest wrong one by ``MARGIN``; above 1, so never passed, when one is that
    close to certain)."""
    sets = sorted({it["set"] for it in items})
    wrong = [0.5]
    for s in sets:
        train = [it for it in items if it["set"] != s]
        test = [it for it in items if it["set"] == s]
        w = fit(*matrix(train, names))
        for it, (mid, p) in zip(test, picks(test, w, names), strict=True):
            if mid != it["truth"]:
                wrong.append(p)  # a wrong pick where the rules create: a false append
    # above 1 when a wrong pick out of fold is within MARGIN of certainty: the model is off
    return max(wrong) + MARGIN


def score(items: list[dict[str, Any]], chosen: list[str | None]) -> tuple[int, int, int]:
    """(changes appended to the memory they change, changes, false appends)."""
    changes = sum(1 for it in items if it["truth"])
    hit = sum(1 for it, c in zip(items, chosen, strict=True) if it["truth"] and c == it["truth"])
    false = sum(1 for it, c in zip(items, chosen, strict=True) if c and c != it["truth"])
    return hit, changes, false


def diagnose(items: list[dict[str, Any]], names: list[str]) -> None:
    """Each change of mind, out of fold (in sample with one corpus): the rules' pick, the
    model's probability and rank of the changed memory, how the conversation revisits it
    (``pairing.revisits``), the gate's rank of it; then the wrong picks over 0.2 (the ones a
    threshold must stay above) with how they revisit."""
    sets = sorted({it["set"] for it in items})
    for s in sets:
        train = [it for it in items if it["set"] != s] or items
        test = [it for it in items if it["set"] == s]
        w = fit(*matrix(train, names))
        print(f"== {s} ({'out of fold' if len(sets) > 1 else 'in sample'})")
        wrong = []
        for it in test:
            x = np.array([[r[n] for n in names] for r in it["rows"]])
            p = gated(1 / (1 + np.exp(-np.clip(x @ w, -30, 30))), it["rows"])
            k = int(np.argmax(p))
            if it["truth"]:
                i = it["ids"].index(it["truth"]) if it["truth"] in it["ids"] else None
                if i is None:
                    print(f"  {it['c']} -> {it['truth']}: not an earlier decision memory")
                    continue
                rank = int((p > p[i]).sum())
                print(
                    f"  {it['c']} -> {it['truth']}: rules {it['rule']}, p {p[i]:.3f} rank {rank}"
                    f" (top {it['ids'][k]} {p[k]:.3f}), rev {it['rev'][i]},"
                    f" gate rank {it['gate_rank'].get(it['truth'])} (nearest {it['gate'][0]}"
                    f" {it['gate'][1]:.2f})"
                )
                print(f"      opening: {it['opening']}")
                print(f"      decisions: {it['decisions']}")
            for j in np.argsort(-p)[:3]:
                if it["ids"][j] != it["truth"] and p[j] >= 0.2:
                    wrong.append((float(p[j]), it["c"], it["ids"][j], it["rev"][j], it["truth"]))
        for pj, c, mid, rev, truth in sorted(wrong, reverse=True)[:12]:
            print(f"  wrong {c} -> {mid}: p {pj:.3f} rev {rev} (truth {truth})")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--write", action="store_true", help="write pair_weights.json")
    ap.add_argument("--refresh", action="store_true", help="recompute the pair features")
    ap.add_argument(
        "--eval-dir",
        action="append",
        type=Path,
        help="a labelled corpus (repeat; default: CORPORA)",
    )
    ap.add_argument("--diag", action="store_true", help="each change of mind and wrong pick")
    a = ap.parse_args()
    corpora = a.eval_dir or CORPORA
    from providers.extractive.pairing import _WEIGHTS_FILE, FEATURES

    names = list(FEATURES)
    items = []
    for d in corpora:  # one cache file per corpus
        cache = CACHE.with_name(f"{d.name}.pkl")
        if a.refresh or not cache.exists():
            cache.parent.mkdir(parents=True, exist_ok=True)
            cache.write_bytes(pickle.dumps(corpus_pairs(d)))
        items += pickle.loads(cache.read_bytes())
    for it in items:  # the rows must be finite
        assert all(np.isfinite(v) for r in it["rows"] for v in r.values())
    sets = list(dict.fromkeys(it["set"] for it in items))
    if a.diag:
        diagnose(items, names)
        if len(sets) < 2:
            return 0
    print(
        f"{len(items)} later conversations, {sum(len(it['ids']) for it in items)} pairs, "
        f"{sum(1 for it in items if it['truth'])} changes of mind"
    )
    print(
        f"{'held out':16} {'rules':>14} {'revisit':>14} {'model':>14} {'model+gate':>14} {'thr':>5}  gate"
    )
    pooled: dict[str, list[int]] = {k: [0, 0, 0] for k in ("rules", "revisit", "model", "both")}
    gate_pass = gate_all = top = 0
    for s in sets:
        train = [it for it in items if it["set"] != s]
        test = [it for it in items if it["set"] == s]
        w = fit(*matrix(train, names))
        t = threshold(train, names)
        best = picks(test, w, names)
        top += sum(1 for it, (mid, _) in zip(test, best, strict=True) if it["truth"] == mid)
        model = [mid if p >= t else None for mid, p in best]
        both = model  # the model's pick is already gated (the candidate, revisited)
        revisit = [  # what the drafter does: the gate's candidate when the conversation revisits it
            next(
                (
                    i
                    for i, r in zip(it["ids"], it["rows"], strict=True)
                    if r["gate:ok"] and r["rev:any"]
                ),
                None,
            )
            for it in test
        ]
        rows = {
            "rules": score(test, [it["rule"] for it in test]),
            "revisit": score(test, revisit),
            "model": score(test, model),
            "both": score(test, both),
        }
        added = [(it, m) for it, m in zip(test, model, strict=True) if m and not it["rule"]]
        passed = sum(1 for it, m in added if it["gate"][0] == m and it["gate"][1] >= 0.2)
        gate_pass += passed
        gate_all += len(added)
        for k, v in rows.items():
            pooled[k] = [a + b for a, b in zip(pooled[k], v, strict=True)]
        cells = "".join(f"{f'{h}/{n} fa {fa}':>15}" for h, n, fa in rows.values())
        print(f"{s:16}{cells} {t:5.3f} {passed}/{len(added)} model appends pass")
    cells = "".join(f"{f'{h}/{n} fa {fa}':>15}" for h, n, fa in pooled.values())
    print(f"{'pooled':16}{cells}        {gate_pass}/{gate_all} model appends pass")
    print(f"the model's most probable memory is the changed one (held out): {top} changes")
    true = sum(1 for it in items for i in it["rule_alone"] if i == it["truth"])
    false = sum(1 for it in items for i in it["rule_alone"] if i != it["truth"])
    print(
        f"pairs, the rules with each memory offered alone: {true}/{sum(1 for it in items if it['truth'])} changes, {false} false"
    )
    w = fit(*matrix(items, names))
    t = threshold(items, names)
    gated = [it for it in items if it["truth"]]
    ok = [it for it in gated if it["gate"][0] == it["truth"] and it["gate"][1] >= 0.2]
    missed = [it for it in gated if not it["rule"]]
    print(
        f"the gate on every change: {len(ok)}/{len(gated)} pass; on those the rules miss: "
        f"{sum(1 for it in missed if it in ok)}/{len(missed)}"
    )
    print(f"all corpora: threshold {t:.3f}")
    for n, v in sorted(zip(names, w, strict=True), key=lambda kv: -abs(kv[1])):
        print(f"  {n:22} {v:+.3f}")
    if a.write:
        out = {
            "threshold": round(t, 4),
            "weights": {n: round(float(v), 4) for n, v in zip(names, w, strict=True)},
            "fitted_on": [it for it in sets],
        }
        _WEIGHTS_FILE.write_text(json.dumps(out, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {_WEIGHTS_FILE}")
    print(json.dumps({"pooled": pooled, "gate": [gate_pass, gate_all], "threshold": t}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
