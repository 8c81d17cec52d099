"""Fit ``search.confidence``'s weights on the LoCoMo dev split (issue 26 item 5, ADR 0039): every
question of categories 1-5 asked through recall as shipped (``MemoryService.recall``, vectors
on, the builds of ``bench/eval_locomo.py``), each answer's features (``ANSWER_FEATURES``) and
each hit's (``HIT_FEATURES``) read off the returned hits, then two logistic regressions:

    answer   label: an evidence turn is among the first five hits (a category-5 question has
             none: its answer is not in the conversation). Two stages: a fit that separates
             category 5 from the answered questions of categories 1-4 (their misses left
             out), then Platt scaling of its log-odds against the label over every question
    hit      label: this hit is an evidence turn

Both are fitted leave-one-conversation-out first: the held-out predictions give the
calibration (Brier score, reliability by tenths) and the trade-off curve (per threshold: the
share of category 5 marked unanswerable, of categories 1-4 marked, and categories 1-4 R@5 with
a marked answer counted a miss). The default threshold is the highest whose held-out R@5 stays
within 0.02 of R@5 unmarked. Then both are fitted on all five conversations and printed as
the tuples to paste into ``search/confidence.py``.

    .venv/bin/python bench/fit_confidence.py              # ask (or reuse the cached features), fit
    .venv/bin/python bench/fit_confidence.py --ask        # ask again (the ranking changed)
    .venv/bin/python bench/fit_confidence.py --search     # memory search (the drafted builds)
    .venv/bin/python bench/fit_confidence.py --eval-results .pmem-eval/results-recall.jsonl
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench import eval_locomo as el  # noqa: E402

L2 = 1e-3
THRESHOLDS = tuple(round(0.05 * i, 2) for i in range(1, 20))
KEEP_WITHIN = 0.02


def ask_features(data_dir: Path, mode: str = "recall", log: Any = print) -> list[dict[str, Any]]:
    """One row per question: conv, category, the answer's features and label, each hit's
    features (without the answer's logit) and label. ``mode`` "search": memory search on the
    drafted builds, each memory standing for the turns its evidence cites (as ``make eval``)."""
    from mcp_server.service import MemoryService
    from providers.embeddings import embedder_from_env
    from search import confidence as cf
    from search.rank import speaker_names
    from search.recall import person_names
    from search.understand import understand
    from store.db import Database

    export_dir = data_dir / "export"
    export_dir.mkdir(parents=True, exist_ok=True)
    server = el.Server(data_dir)
    kind = "import" if mode == "recall" else "drafted"
    rows: list[dict[str, Any]] = []
    for cid in el.export(el.LOCOMO_DIR, export_dir):
        conv = el.Conv.load(export_dir, cid)
        url, _ = el.ensure_build(server, conv, data_dir / cid, kind, rebuild=False, log=log)
        dia_of = {mid: v["dia_id"] for mid, v in conv.turns.items()}

        def dia(key: str, dia_of: dict[str, str] = dia_of) -> str | None:
            return dia_of.get(key.rsplit(":", 1)[-1])

        with el.locomo_env(conv.me):
            svc = MemoryService(Database(url), embedder=embedder_from_env(), tz="UTC")
            try:
                svc.reindex()
                now = svc.now(conv.meta["now"])
                person = person_names()
                for q in conv.questions():
                    uq = understand(q["question"], now, "UTC")
                    ev = set(q["evidence"]) if q["category"] != 5 else set()
                    if mode == "recall":
                        rec = svc.recall(
                            q["question"], now=now, limit=el.LIMIT, raw=True, max_chars=10**6
                        )
                        content, asked = cf.content_terms(
                            uq.terms, speaker_names((h.role for h in rec.hits), person)
                        )
                        views = cf.recall_views(rec.hits, person)
                        lists = 4 if rec.vectors else 2
                        cited = [[dia(h.message_key)] for h in rec.hits]
                    else:
                        hits = svc.search(q["question"], now=now, limit=el.LIMIT, raw=True)
                        content, asked = cf.content_terms(uq.terms, ())
                        views = cf.search_views(hits)
                        lists = 3
                        cited = [[dia(e["message_key"]) for e in h.evidence] for h in hits]
                    feats, cov = cf.answer_features(content, asked, views, lists, el.LIMIT)
                    turns = [d for ds in cited for d in ds]  # score.py's list: the top five
                    first = views[0].score if views else 0.0
                    rows.append(
                        {
                            "conv": cid,
                            "qid": q["qid"],
                            "category": q["category"],
                            "features": list(feats),
                            "label": int(any(d in ev for d in turns[: cf.TOP])),
                            "n_hits": len(views),
                            "hits": [
                                {
                                    "features": list(cf.hit_features(0.0, v, c, first, n, asked))[
                                        1:
                                    ],
                                    "label": int(any(d in ev for d in ds)),
                                }
                                for n, (v, c, ds) in enumerate(
                                    zip(views, cov, cited, strict=True), 1
                                )
                            ],
                        }
                    )
                log(f"  {cid}: {len(conv.questions())} questions")
            finally:
                svc.close()
    return rows


def fit_logistic(x: Any, y: Any, l2: float = L2, iters: int = 50) -> Any:
    """Newton's method on the L2-penalised log-loss (the intercept unpenalised); x without the
    intercept column. Returns (intercept, *weights)."""
    import numpy as np

    xx = np.hstack([np.ones((len(x), 1)), np.asarray(x, float)])
    yy = np.asarray(y, float)
    w = np.zeros(xx.shape[1])
    pen = np.full(xx.shape[1], l2 * len(yy))
    pen[0] = 0.0
    for _ in range(iters):
        p = 1.0 / (1.0 + np.exp(-(xx @ w)))
        grad = xx.T @ (p - yy) + pen * w
        hess = (xx * (p * (1 - p))[:, None]).T @ xx + np.diag(pen + 1e-9)
        step = np.linalg.solve(hess, grad)
        w -= step
        if np.max(np.abs(step)) < 1e-8:
            break
    return w


def predict(w: Any, x: Any) -> Any:
    import numpy as np

    xx = np.hstack([np.ones((len(x), 1)), np.asarray(x, float)])
    return 1.0 / (1.0 + np.exp(-(xx @ w)))


def _logit(p: Any) -> Any:
    import numpy as np

    q = np.clip(np.asarray(p, float), 1e-9, 1 - 1e-9)
    return np.log(q / (1 - q))


def fit_answer(rows: list[dict[str, Any]]) -> tuple[Any, Any]:
    """The two stages: a separating fit (category 5 against the answered questions of
    categories 1-4; their misses left out: an answer that is not found says nothing about
    whether it exists), then Platt scaling of its log-odds against the label over every
    question (that the answer is among the first five)."""
    sep = [r for r in rows if r["category"] == 5 or r["label"]]
    w = fit_logistic([r["features"] for r in sep], [r["label"] for r in sep])
    lg = _logit(predict(w, [r["features"] for r in rows]))[:, None]
    platt = fit_logistic(lg, [r["label"] for r in rows])
    return w, platt


def answer_conf(w: Any, platt: Any, feats: list[list[float]]) -> Any:
    return predict(platt, _logit(predict(w, feats))[:, None])


def _hit_x(rows: list[dict[str, Any]], logits: list[float]) -> tuple[list[list[float]], list[int]]:
    x: list[list[float]] = []
    y: list[int] = []
    for r, lg in zip(rows, logits, strict=True):
        for h in r["hits"]:
            x.append([lg, *h["features"]])
            y.append(h["label"])
    return x, y


def held_out(rows: list[dict[str, Any]]) -> tuple[list[float], list[float], list[int]]:
    """Leave-one-conversation-out: each question's answer confidence and each hit's, from
    weights fitted on the other conversations."""
    convs = sorted({r["conv"] for r in rows})
    conf = [0.0] * len(rows)
    hit_conf: dict[int, list[float]] = {}
    for c in convs:
        train = [r for r in rows if r["conv"] != c]
        test = [i for i, r in enumerate(rows) if r["conv"] == c]
        wa, platt = fit_answer(train)
        tr_logit = [
            float(v) for v in _logit(answer_conf(wa, platt, [r["features"] for r in train]))
        ]
        wh = fit_logistic(*_hit_x(train, tr_logit))
        ps = answer_conf(wa, platt, [rows[i]["features"] for i in test])
        for i, p in zip(test, ps, strict=True):
            conf[i] = float(p)
            lg = float(_logit([p])[0])
            xs = [[lg, *h["features"]] for h in rows[i]["hits"]]
            hit_conf[i] = [float(v) for v in predict(wh, xs)] if xs else []
    flat = [v for i in range(len(rows)) for v in hit_conf.get(i, [])]
    labels = [h["label"] for r in rows for h in r["hits"]]
    return conf, flat, labels


def reliability(p: list[float], y: list[int], bins: int = 10) -> list[str]:
    out = [f"{'bin':>9} {'n':>6} {'mean conf':>10} {'observed':>9}"]
    for b in range(bins):
        lo, hi = b / bins, (b + 1) / bins
        sel = [
            (a, t) for a, t in zip(p, y, strict=True) if lo <= a < hi or (b == bins - 1 and a == 1)
        ]
        if sel:
            out.append(
                f"{lo:.1f}-{hi:.1f} {len(sel):>6} {sum(a for a, _ in sel) / len(sel):10.3f} "
                f"{sum(t for _, t in sel) / len(sel):9.3f}"
            )
    return out


def brier(p: list[float], y: list[int]) -> float:
    return sum((a - t) ** 2 for a, t in zip(p, y, strict=True)) / max(1, len(y))


def trade_off(rows: list[dict[str, Any]], conf: list[float]) -> tuple[list[str], float]:
    """The curve and the default threshold (highest keeping R@5 within KEEP_WITHIN)."""
    c5 = [i for i, r in enumerate(rows) if r["category"] == 5]
    c14 = [i for i, r in enumerate(rows) if r["category"] != 5]
    best = sum(rows[i]["label"] for i in c14) / len(c14)
    lines = [
        f"{'threshold':>9} {'cat-5 marked':>13} {'cat 1-4 marked':>15} {'cat 1-4 R@5 kept':>17}",
        f"{'(none)':>9} {0.0:13.3f} {0.0:15.3f} {best:17.3f}",
    ]
    chosen = 0.0
    for th in (i / 100 for i in range(1, 100)):  # the default: the highest that keeps R@5
        kept = sum(1 for i in c14 if rows[i]["label"] and conf[i] >= th) / len(c14)
        if kept >= best - KEEP_WITHIN:
            chosen = th
    for th in THRESHOLDS:
        m5 = sum(1 for i in c5 if conf[i] < th) / len(c5)
        m14 = sum(1 for i in c14 if conf[i] < th) / len(c14)
        kept = sum(1 for i in c14 if rows[i]["label"] and conf[i] >= th) / len(c14)
        lines.append(f"{th:9.2f} {m5:13.3f} {m14:15.3f} {kept:17.3f}")
    m5 = sum(1 for i in c5 if conf[i] < chosen) / len(c5)
    m14 = sum(1 for i in c14 if conf[i] < chosen) / len(c14)
    kept = sum(1 for i in c14 if rows[i]["label"] and conf[i] >= chosen) / len(c14)
    lines.append(f"{'chosen':>6}{chosen:3.2f} {m5:13.3f} {m14:15.3f} {kept:17.3f}")
    return lines, chosen


def other_corpus_cap(results: Path, mode: str, eval_dir: Path) -> tuple[float, int, int]:
    """The highest threshold (steps of 0.001) that flags at most 2 % of the answers
    ``bench/eval.py`` found in its top five on ``../shared/eval/`` (``results``: its
    ``results-<mode>.jsonl``, whose ``confidence`` is the shipped weights': refit, paste, run
    ``make eval``, then this). Returns (cap, answers found, flagged at the cap)."""
    import subprocess

    proc = subprocess.run(
        [sys.executable, str(eval_dir / "score.py"), str(results), "--mode", mode, "--k", "5"]
        + ["--per-question"],
        capture_output=True,
        text=True,
        check=True,
    )
    ranks = {
        r["id"]: r["rank"]
        for r in (json.loads(x) for x in proc.stdout.splitlines() if x.startswith("{"))
    }
    conf = [
        r["confidence"]
        for r in (json.loads(x) for x in results.read_text().splitlines())
        if ranks.get(r["id"]) and ranks[r["id"]] <= 5
    ]
    allowed = int(KEEP_WITHIN * len(conf) + 1e-9)
    cap = 0.0
    for th in (i / 1000 for i in range(1, 1000)):
        if sum(1 for c in conf if c < th) <= allowed:
            cap = th
    return cap, len(conf), sum(1 for c in conf if c < cap)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--data-dir",
        default=os.environ.get("PMEM_LOCOMO_DIR", str(ROOT / ".pmem-eval" / "locomo")),
    )
    ap.add_argument("--ask", action="store_true", help="ask again (else reuse the cached features)")
    ap.add_argument(
        "--search", action="store_true", help="memory search on the drafted builds, not recall"
    )
    ap.add_argument(
        "--eval-results",
        type=Path,
        help="bench/eval.py's results-<mode>.jsonl on ../shared/eval/: the threshold is also "
        "kept within 0.02 of R@5 there (ADR 0039)",
    )
    a = ap.parse_args(argv)
    data_dir = Path(a.data_dir).resolve()
    os.environ.setdefault("PMEM_DATA_DIR", str(data_dir))
    mode = "search" if a.search else "recall"
    cache = data_dir / f"confidence-features{'-search' if a.search else ''}.jsonl"
    if a.ask or not cache.exists():
        rows = ask_features(data_dir, mode, log=lambda m: print(m, file=sys.stderr))
        cache.write_text("".join(json.dumps(r) + "\n" for r in rows))
    rows = [json.loads(line) for line in cache.read_text().splitlines()]
    from search.confidence import ANSWER_FEATURES, HIT_FEATURES

    conf, hit_conf, hit_labels = held_out(rows)
    labels = [r["label"] for r in rows]
    prior = sum(labels) / len(labels)
    print(f"== answer confidence, leave-one-conversation-out ({len(rows)} questions) ==")
    print(
        f"Brier {brier(conf, labels):.4f} (the base rate {prior:.3f} alone: "
        f"{brier([prior] * len(labels), labels):.4f})"
    )
    print("\n".join(reliability(conf, labels)))
    curve, chosen = trade_off(rows, conf)
    print("\ntrade-off (held out):")
    print("\n".join(curve))
    print(f"default threshold (R@5 within {KEEP_WITHIN} of unmarked): {chosen:.2f}")
    if a.eval_results:
        cap, found, flagged = other_corpus_cap(a.eval_results, mode, el.LOCOMO_DIR.parent)
        chosen = min(chosen, cap)
        c5 = [i for i, r in enumerate(rows) if r["category"] == 5]
        c14 = [i for i, r in enumerate(rows) if r["category"] != 5]
        print(
            f"../shared/eval/: at most {cap:.3f} flags ≤ 2 % of its {found} found answers "
            f"({flagged}); the default: {chosen:.3f}, where held out on LoCoMo category 5 "
            f"{sum(1 for i in c5 if conf[i] < chosen) / len(c5):.3f} and categories 1-4 "
            f"{sum(1 for i in c14 if conf[i] < chosen) / len(c14):.3f} are marked, R@5 kept "
            f"{sum(1 for i in c14 if rows[i]['label'] and conf[i] >= chosen) / len(c14):.3f}"
        )
    hp = sum(hit_labels) / max(1, len(hit_labels))
    print(f"\n== hit confidence, held out ({len(hit_labels)} hits) ==")
    print(
        f"Brier {brier(hit_conf, hit_labels):.4f} (base rate {hp:.3f} alone: "
        f"{brier([hp] * len(hit_labels), hit_labels):.4f})"
    )
    print("\n".join(reliability(hit_conf, hit_labels)))
    wa, platt = fit_answer(rows)
    logits = [float(v) for v in _logit(answer_conf(wa, platt, [r["features"] for r in rows]))]
    wh = fit_logistic(*_hit_x(rows, logits))
    names = (
        ("SEARCH_WEIGHTS", "SEARCH_PLATT", "SEARCH_HIT_WEIGHTS", "SEARCH_ANSWERABLE_AT")
        if a.search
        else ("ANSWER_WEIGHTS", "ANSWER_PLATT", "HIT_WEIGHTS", "ANSWERABLE_AT")
    )
    print(f"\n== {mode}, fitted on all five (paste into search/confidence.py) ==")
    print("features:", ", ".join(ANSWER_FEATURES))
    print(f"{names[0]} = (" + ", ".join(f"{v:.4g}" for v in wa) + ")")
    print(f"{names[1]} = (" + ", ".join(f"{v:.4g}" for v in platt) + ")")
    print("features:", ", ".join(HIT_FEATURES))
    print(f"{names[2]} = (" + ", ".join(f"{v:.4g}" for v in wh) + ")")
    print(f"{names[3]} = {chosen:.3g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
