"""Fit the offline drafter's reading of the same matter decided anew (issue 27 item 2,
``providers.extractive.matter``, ADR 0037 round 8) and report it leave-one-corpus-out.

A pair is a later conversation C and an earlier decision memory M of the same corpus (M drafted
alone, as ``bench/append_gate_calibrate.py`` does; the order is the import order: ChatGPT
first, then by time). C's pairs are the memory its ``revises`` names (label 1) and its two
nearest other earlier decision memories by the append gate's measure (label 0: what the gate
could offer instead). For each pair: ``read``, whether the drafter offered M alone appends C
to it with the reading off (the readings of rounds 1-7), and the pair's features
(``matter.pair_features``). The model decides only pairs ``read`` leaves out; a false append
is a 0-pair the drafter would then append.

Each fold's weights are fitted on the other corpora (class-weighted logistic regression, a
ridge on all but the bias) and its threshold is the lowest that keeps every 0-pair of those
corpora under it by ``MARGIN``, so the held-out corpus sets nothing. Printed per held-out
corpus: the 1-pairs read before and after, the 0-pairs read before and after; then the weights
fitted on every corpus (``--write`` writes ``matter_weights.json``).

    .venv/bin/python bench/fit_matter.py [--eval-dir DIR ...] [--write] [--diag]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from fit_pairing import fit  # noqa: E402 (the same class-weighted ridge logistic regression)

#: without --eval-dir: ../shared/eval alone (the labelled dev sets of the same format are passed
#: by --eval-dir, one each; they are not in the repository)
CORPORA = [ROOT.parent / "shared" / "eval"]
MARGIN = 0.05
NEGATIVES = 2  # the nearest other earlier decision memories of each conversation
CACHE = Path(os.environ.get("MATTER_CACHE", "/tmp/read8_matter"))


def corpus_pairs(eval_dir: Path) -> list[dict[str, Any]]:
    from append_gate_calibrate import _conversation, _entry

    from core.secrets import redact_conversation
    from providers.extractive import draft_record
    from providers.extractive.matter import pair_features, set_matter_weights
    from providers.extractive.pairing import gate_memory_text, gate_text
    from providers.extractive.roles import _parts
    from providers.extractive.sentences import (
        RUN_ON_CHANGE_CHARS,
        person_sentences,
        whole_sentences,
    )
    from providers.extractive.vectors import similarities

    set_matter_weights({"off": True})
    corpus = json.loads((eval_dir / "conversations.json").read_text(encoding="utf-8"))
    convs = [c for c in corpus["conversations"] if c["kind"] != "pure-code"]
    order = sorted(
        convs, key=lambda c: (c.get("source", "chatgpt") != "chatgpt", c["create_time_utc"])
    )
    records = {c["id"]: draft_record(_conversation(c), []) for c in order}
    entries = {
        cid: _entry(cid, r) for cid, r in records.items() if r and r.memory_kind == "decision"
    }
    out = []
    for i, c in enumerate(order):
        if records.get(c["id"]) is None:
            continue
        store = [x["id"] for x in order[:i] if x["id"] in entries]
        if not store:
            continue
        conv = _conversation(c)
        text = gate_text(redact_conversation(conv)[0])
        sims = similarities([gate_memory_text(entries[s]) for s in store], text)
        ranked = sorted(store, key=lambda s: -sims[store.index(s)])
        rev = c.get("revises")
        picks = [s for s in ranked if s != rev][:NEGATIVES]
        if rev in store:
            picks.append(rev)
        red = redact_conversation(conv)[0]
        person = person_sentences(red.drafting_messages)
        parts = _parts(person)
        whole = whole_sentences(person, RUN_ON_CHANGE_CHARS)
        for s in picks:
            r = draft_record(conv, [entries[s]])
            out.append(
                {
                    "set": eval_dir.name,
                    "id": c["id"],
                    "memory": s,
                    "label": int(s == rev),
                    "rank": ranked.index(s) + 1,
                    "gate": sims[store.index(s)],
                    "read": bool(r and r.action == "append" and r.target_memory_id == s),
                    "f": pair_features(whole, parts.decisions, entries[s]),
                }
            )
    set_matter_weights(None)
    return out


def _xy(rows: list[dict], names: list[str]) -> tuple[np.ndarray, np.ndarray]:
    x = np.array([[r["f"][n] for n in names] for r in rows], dtype=float).reshape(-1, len(names))
    return x, np.array([float(r["label"]) for r in rows])


def _prob(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-np.clip(x @ w, -30, 30)))


def lr_fold(train: list[dict], names: list[str]) -> tuple[np.ndarray, float]:
    """The logistic regression over every feature (a diagnostic): weights on ``train``'s pairs
    the rules leave out, the threshold above every 0-pair by ``MARGIN``."""
    rows = [r for r in train if not r["read"]]
    x, y = _xy(rows, names)
    w = fit(x, y)
    p = _prob(x, w)
    top = max((float(q) for q, t in zip(p, y, strict=True) if t == 0), default=0.0)
    return w, min(top + MARGIN, 0.999)


GRID_TOPIC = tuple(round(0.30 + 0.01 * i, 2) for i in range(41))  # 0.30 .. 0.70
#: the calling-off floor from 0.20: below it an ordinary act's lemma (迎える -0.02, 公開 -0.03,
#: 手術 0.05, 組み直す 0.17) would count as one, and a cue of meaning would turn into noise
GRID_CANCEL = tuple(round(0.20 + 0.01 * i, 2) for i in range(21))  # 0.20 .. 0.40


def floors_fold(train: list[dict]) -> dict[str, float]:
    """The floors of ``matter.anew`` on ``train``'s pairs the rules leave out: no 0-pair read,
    the most 1-pairs read; among ties the floors midway in the widest gap (the median of the
    tied grid points), so a held-out corpus meets a margin on both sides."""
    from providers.extractive.matter import anew

    rows = [r for r in train if not r["read"]]
    best, ties = -1, []
    for t in GRID_TOPIC:
        for c in GRID_CANCEL:
            fl = {"topic": t, "cancel": c}
            if any(anew(r["f"], fl) for r in rows if not r["label"]):
                continue
            n = sum(anew(r["f"], fl) for r in rows if r["label"])
            if n > best:
                best, ties = n, [fl]
            elif n == best:
                ties.append(fl)
    ts = sorted({x["topic"] for x in ties})
    t = ts[len(ts) // 2]
    cs = sorted({x["cancel"] for x in ties if x["topic"] == t})
    return {"topic": t, "cancel": cs[len(cs) // 2]}


def _first(rows: list[dict], r: dict) -> int:
    """The rank a 0-pair must have to be what the gate offers: the first (a conversation whose
    changed memory ranks first is offered no other)."""
    return 1


def main(argv: list[str] | None = None) -> int:
    from providers.extractive.matter import _WEIGHTS_FILE, FEATURES

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--eval-dir", action="append", type=Path)
    ap.add_argument("--write", action="store_true")
    ap.add_argument("--diag", action="store_true")
    ap.add_argument("--fresh", action="store_true", help="recompute the cached pairs")
    args = ap.parse_args(argv)
    dirs = args.eval_dir or CORPORA
    CACHE.mkdir(parents=True, exist_ok=True)
    by: dict[str, list[dict]] = {}
    for d in dirs:
        f = CACHE / f"{d.name}.json"
        if args.fresh or not f.exists():
            f.write_text(json.dumps(corpus_pairs(d), ensure_ascii=False))
        by[d.name] = json.loads(f.read_text())
    from providers.extractive.matter import anew

    names = [n for n in FEATURES]
    for title, exposure in (("the first-ranked memory", True), ("the two nearest", False)):
        print(f"\n-- 0-pairs: {title} other than the changed one, per conversation")
        print(f"{'set':8} {'changes read':>14} {'other read':>12}   (before -> after, out of fold)")
        tot = np.zeros(5, dtype=int)
        for held, rows0 in by.items():
            rows = [r for r in rows0 if r["label"] or not exposure or r["rank"] == _first(rows0, r)]
            train = [
                r
                for k, v in by.items()
                if k != held
                for r in v
                if r["label"] or not exposure or r["rank"] == _first(v, r)
            ]
            fl = floors_fold(train)
            w, thr = lr_fold(train, names)
            x, _ = _xy(rows, names)
            p = _prob(x, w)
            new = [bool(r["read"] or anew(r["f"], fl)) for r in rows]
            lr = [bool(r["read"] or q >= thr) for r, q in zip(rows, p, strict=True)]
            pos = [r for r in rows if r["label"]]
            c = np.array(
                [
                    sum(r["read"] for r in pos),
                    sum(n for r, n in zip(rows, new, strict=True) if r["label"]),
                    sum(r["read"] for r in rows if not r["label"]),
                    sum(n for r, n in zip(rows, new, strict=True) if not r["label"]),
                    sum(n for r, n in zip(rows, lr, strict=True) if r["label"])
                    - sum(n for r, n in zip(rows, lr, strict=True) if not r["label"]),
                ]
            )
            tot += c
            print(
                f"{held:8} {c[0]:>5} -> {c[1]:<3}/{len(pos):<3} {c[2]:>4} -> {c[3]:<4}"
                f" floors topic {fl['topic']:.2f} cancel {fl['cancel']:.2f}"
            )
            if args.diag:
                for r, n in zip(rows, new, strict=True):
                    if (r["label"] and not r["read"]) or (n and not r["read"]):
                        mark = "+" if r["label"] else "-"
                        print(
                            f"   {mark} {r['id']}->{r['memory']} read={r['read']} new={n}", end=""
                        )
                        print("  " + " ".join(f"{k}={v:.2f}" for k, v in r["f"].items()))
        npos = sum(r["label"] for v in by.values() for r in v)
        print(f"{'all':8} {tot[0]:>5} -> {tot[1]:<3}/{npos:<3} {tot[2]:>4} -> {tot[3]:<4}")
        print(
            f"   (the logistic regression over every feature instead: {tot[4] - tot[0] + tot[2]:+d}"
            " changes minus false reads out of fold, against the rules alone)"
        )
    allrows = [r for v in by.values() for r in v if r["label"] or r["rank"] == _first(v, r)]
    fl = floors_fold(allrows)
    print("\nshipped floors (fitted on every corpus, first-ranked others):", fl)
    if args.write:
        _WEIGHTS_FILE.write_text(
            json.dumps(
                {**fl, "fitted_on": list(by)},
                indent=1,
            )
            + "\n"
        )
        print("wrote", _WEIGHTS_FILE)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
