"""Fit recall's reranker (``search.rank.RERANK_WEIGHTS``, ADR 0035) and report it held out.

    .venv/bin/python bench/fit_rank.py            # collect (cached), fit, print the figures
    .venv/bin/python bench/fit_rank.py --collect  # ask every question again first

1. **Collect**: every question of the LoCoMo dev split (categories 1-4; the builds of
   ``bench/eval_locomo.py``) and of ``../shared/eval/`` (the build of ``bench/eval.py``) through
   ``ReadService.recall`` as shipped, ``limit`` ``POOL``: each hit's ``features`` (what the
   reranker sees) and whether it is an answer (an evidence turn; an expected message). Kept in
   ``<data dir>/rank-samples.jsonl``; the builds must exist (run ``make eval`` once).
2. **Fit**: a logistic regression (L2, every question's positives and negatives weighted to
   one question's worth each, the two corpora to equal mass) on the features.
3. **Held out**: leave one LoCoMo conversation out (fit on the four others and all of
   ``../shared/eval/``, rank the fifth), and leave one ``../shared/eval/`` question group out (by
   conversation), R@5 and MRR against the fused order the features came with; then the weights
   fitted on everything, as ``search/rank.py`` takes them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

POOL = 100  # hits asked for per question: the reranker orders what recall keeps
L2 = 1.0  # ridge on the weights (features are 0-1 scaled, mostly)
EPOCHS = 400


def collect(data_dir: Path, out: Path) -> None:
    """Every question's hits with their features and labels, one JSON line each."""
    import eval as shared_eval
    import eval_locomo as lo

    from mcp_server.service import MemoryService
    from providers.embeddings import embedder_from_env
    from store.db import Database

    rows: list[dict[str, Any]] = []
    ldir = data_dir / "locomo"
    server = lo.Server(ldir)
    for cid in lo.export(lo.LOCOMO_DIR, ldir / "export"):
        conv = lo.Conv.load(ldir / "export", cid)
        url, _ = lo.ensure_build(server, conv, ldir / cid, "import", rebuild=False, log=print)
        by_id = {mid: v["dia_id"] for mid, v in conv.turns.items()}
        with lo.locomo_env(conv.me):
            svc = MemoryService(Database(url), embedder=embedder_from_env(), tz="UTC")
            try:
                now = svc.now(conv.meta["now"])
                for q in conv.questions():
                    if q["category"] not in lo.CATS:
                        continue
                    hits = svc.recall(q["question"], now=now, limit=POOL).hits
                    ev = set(q["evidence"])
                    rows.append(
                        {
                            "corpus": "locomo",
                            "group": cid,
                            "qid": q["qid"],
                            "category": q["category"],
                            "x": [h.features for h in hits],
                            "y": [by_id.get(h.message_key.rsplit(":", 1)[-1]) in ev for h in hits],
                        }
                    )
            finally:
                svc.close()
        print(f"  {cid}: collected", file=sys.stderr)
    settings = shared_eval._settings(data_dir, None)
    url = shared_eval.ensure_built(settings, shared_eval.EVAL_DIR, rebuild=False, log=print)
    questions = json.loads((shared_eval.EVAL_DIR / "questions.json").read_text(encoding="utf-8"))
    svc = MemoryService(Database(url), embedder=embedder_from_env(), tz=None)
    try:
        for q in questions:
            hits = svc.recall(q["q"], now=svc.now(q["now"]), limit=POOL).hits
            want = set(q["expect_message_ids"])
            rows.append(
                {
                    "corpus": "shared",
                    "group": q["conversation"],
                    "qid": q["id"],
                    "category": q["kind"],
                    "x": [h.features for h in hits],
                    "y": [h.message_key.rsplit(":", 1)[-1] in want for h in hits],
                }
            )
    finally:
        svc.close()
    with out.open("w", encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")


def matrix(rows: Iterable[dict[str, Any]], names: tuple[str, ...]) -> tuple[Any, Any, Any]:
    """Features, labels and sample weights (each question's positives and negatives one
    question's worth each, each corpus half the mass)."""
    import numpy as np

    xs, ys, ws = [], [], []
    rows = list(rows)
    per_corpus: dict[str, int] = {}
    for r in rows:
        if any(r["y"]) and not all(r["y"]):
            per_corpus[r["corpus"]] = per_corpus.get(r["corpus"], 0) + 1
    for r in rows:
        pos, n = sum(r["y"]), len(r["y"])
        if not pos or pos == n:
            continue
        share = 1.0 / per_corpus[r["corpus"]]
        for x, y in zip(r["x"], r["y"], strict=True):
            xs.append([x.get(k, 0.0) for k in names])
            ys.append(1.0 if y else 0.0)
            ws.append(share / (pos if y else n - pos))
    return np.array(xs), np.array(ys), np.array(ws)


def fit(rows: list[dict[str, Any]], names: tuple[str, ...]) -> tuple[dict[str, float], float]:
    """A weighted logistic regression by Newton's method (L2 on the weights, not the bias)."""
    import numpy as np

    x, y, w = matrix(rows, names)
    w = w / w.sum() * len(y)
    xb = np.hstack([x, np.ones((len(x), 1))])
    beta = np.zeros(xb.shape[1])
    reg = np.eye(xb.shape[1]) * L2
    reg[-1, -1] = 0.0
    for _ in range(30):
        p = 1.0 / (1.0 + np.exp(-np.clip(xb @ beta, -50, 50)))
        grad = xb.T @ (w * (p - y)) + reg @ beta
        hess = (xb * (w * p * (1 - p))[:, None]).T @ xb + reg
        step = np.linalg.solve(hess, grad)
        beta -= step
        if np.abs(step).max() < 1e-8:
            break
    return {k: float(v) for k, v in zip(names, beta[:-1], strict=True)}, float(beta[-1])


def ranked(r: dict[str, Any], weights: dict[str, float] | None) -> list[bool]:
    """A question's labels in the reranker's order (``None``: the order the hits came in)."""
    if weights is None:
        return list(r["y"])
    score = [sum(weights.get(k, 0.0) * v for k, v in x.items()) for x in r["x"]]
    order = sorted(range(len(score)), key=lambda i: -score[i])  # stable: ties keep their order
    return [r["y"][i] for i in order]


def figures(rows: list[dict[str, Any]], orders: list[list[bool]]) -> dict[str, float]:
    n = len(rows) or 1
    r5 = sum(1 for o in orders if any(o[:5])) / n
    mrr = sum(1.0 / (o.index(True) + 1) for o in orders if True in o[:20]) / n
    return {"n": len(rows), "r5": r5, "mrr": mrr}


def main(argv: list[str] | None = None) -> int:
    from search.rank import RERANK_FEATURES

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("PMEM_EVAL_DIR", str(ROOT / ".pmem-eval")))
    ap.add_argument("--collect", action="store_true", help="ask every question again first")
    ap.add_argument("--drop", action="append", default=[], help="leave a feature out")
    a = ap.parse_args(argv)
    data_dir = Path(a.data_dir).resolve()
    os.environ.setdefault("PMEM_DATA_DIR", str(data_dir))
    samples = data_dir / "rank-samples.jsonl"
    if a.collect or not samples.exists():
        collect(data_dir, samples)
    rows = [json.loads(line) for line in samples.read_text(encoding="utf-8").splitlines()]
    names = tuple(k for k in RERANK_FEATURES if k not in a.drop)
    loco = [r for r in rows if r["corpus"] == "locomo"]
    shared = [r for r in rows if r["corpus"] == "shared"]
    print(f"{'held out':<22} {'n':>4} {'fused R@5':>10} {'MRR':>6} {'reranked R@5':>13} {'MRR':>6}")
    for corpus, part in (("locomo", loco), ("shared", shared)):
        groups = sorted({r["group"] for r in part})
        before: list[list[bool]] = []
        after: list[list[bool]] = []
        held_rows: list[dict[str, Any]] = []
        for g in groups:
            held = [r for r in part if r["group"] == g]
            weights, _ = fit([r for r in rows if r not in held], names)
            before += [ranked(r, None) for r in held]
            after += [ranked(r, weights) for r in held]
            held_rows += held
            if corpus == "locomo":
                b = figures(held, [ranked(r, None) for r in held])
                c = figures(held, [ranked(r, weights) for r in held])
                print(
                    f"  {g:<20} {b['n']:>4} {b['r5']:10.3f} {b['mrr']:6.3f} {c['r5']:13.3f} {c['mrr']:6.3f}"
                )
        b, c = figures(held_rows, before), figures(held_rows, after)
        label = f"{corpus} (one {'conversation' if corpus == 'locomo' else 'group'} out)"
        print(
            f"{label:<22} {b['n']:>4} {b['r5']:10.3f} {b['mrr']:6.3f} {c['r5']:13.3f} {c['mrr']:6.3f}"
        )
        if corpus == "locomo":
            for cat in (1, 2, 3, 4):
                idx = [i for i, r in enumerate(held_rows) if r["category"] == cat]
                b = figures([held_rows[i] for i in idx], [before[i] for i in idx])
                c = figures([held_rows[i] for i in idx], [after[i] for i in idx])
                print(
                    f"  category {cat:<11} {b['n']:>4} {b['r5']:10.3f} {b['mrr']:6.3f} {c['r5']:13.3f} {c['mrr']:6.3f}"
                )
    weights, bias = fit(rows, names)
    print("\nfitted on everything (search/rank.py RERANK_WEIGHTS, RERANK_BIAS):")
    print("{" + ", ".join(f'"{k}": {v:.3f}' for k, v in weights.items()) + "}", f"{bias:.3f}")
    for corpus, part in (("locomo", loco), ("shared", shared)):
        c = figures(part, [ranked(r, weights) for r in part])
        print(f"  in-sample {corpus}: R@5 {c['r5']:.3f} MRR {c['mrr']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
