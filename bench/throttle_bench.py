"""Throttle benchmark: N commits against the memory API over HTTP with a scaled budget.

    .venv/bin/python bench/throttle_bench.py [--commits 1000] [--budget 60/3s] [--workers 3]

Two runs in one process, against the same real service (`memory_api`, uvicorn on loopback,
server-side budget per client, 429 + Retry-After beyond it):

  ours      the backfill's client side: the PostgreSQL-backed sliding window (shared by the
            workers) + adaptive concurrency (3 → 2 → 1 on 429, honouring Retry-After)
  baseline  the same workers with no client-side window: they send, get 429s and wait out
            Retry-After

Printed per run: elapsed time, budget utilisation (the fastest time the sliding window allows
for N requests, divided by the elapsed time; goal ≥ 95 %), 429s in total and after the first
window (goal 0 for ours).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._pg import scratch  # noqa: E402
from core.errors import RateLimited  # noqa: E402
from core.models import CommitRequest  # noqa: E402
from core.settings import parse_budget  # noqa: E402
from memory_api.client import HttpMemoryAPI  # noqa: E402
from memory_api.server import serve_in_thread  # noqa: E402
from state.budget import SlidingWindowLimiter  # noqa: E402
from state.concurrency import AdaptiveConcurrency  # noqa: E402
from store.budget import PgWindow, client_window  # noqa: E402
from store.db import Database  # noqa: E402


def run(
    url: str,
    db: Database,
    *,
    name: str,
    commits: int,
    limit: int,
    window: float,
    workers: int,
    use_window: bool,
) -> dict[str, float]:
    from store.tokens import TokenStore

    api = HttpMemoryAPI(url, client_name=name, token=TokenStore(db).create(name).token)
    limiter = (
        SlidingWindowLimiter(
            max_wait=3600, backend=PgWindow(db, f"client:{name}", limit, client_window(window))
        )
        if use_window
        else None
    )
    cc = AdaptiveConcurrency(start=3, maximum=workers, quiet=window, max_wait=3600)
    lock = threading.Lock()
    todo = list(range(commits))
    rejected_at: list[float] = []
    start = time.monotonic()

    def worker() -> None:
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop()
            req = CommitRequest(
                kind="episode",
                title=f"bench {name} {i}",
                canonical_summary="throttle bench",
                index_summary="bench",  # no evidence: the API takes only ledger excerpts
                idempotency_key=f"bench:{name}:{i}",
            )
            while True:
                with cc.slot():
                    if limiter is not None:
                        limiter.acquire()
                    try:
                        api.commit(req)
                        ok = True
                    except RateLimited as err:
                        ok = False
                        rejected_at.append(time.monotonic() - start)
                        cc.on_rate_limited(err.retry_after)
                if ok:
                    cc.on_success()
                    break

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    elapsed = time.monotonic() - start
    fastest = (-(-commits // limit) - 1) * window  # ceil(N / limit) - 1 full windows
    api.close()
    return {
        "elapsed_s": elapsed,
        "utilisation": fastest / elapsed if elapsed else 1.0,
        "429_total": len(rejected_at),
        "429_after_first_window": sum(t > window for t in rejected_at),
        "min_concurrency": min(cc.history),
    }


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--commits", type=int, default=1000)
    ap.add_argument("--budget", default="100/10s", help="scaled budget (300/600s in production)")
    ap.add_argument("--workers", type=int, default=3)
    args = ap.parse_args()
    limit, window = parse_budget(args.budget)

    with scratch("pmem-bench-") as pg:
        db = Database(pg.database("bench"))
        server = serve_in_thread(db, budget=(limit, window))
        print(
            f"{args.commits} commits, budget {limit}/{window:g}s, {args.workers} workers, API {server.url}"
        )
        rows = {}
        for name, use_window in (("ours", True), ("baseline", False)):
            rows[name] = run(
                server.url,
                db,
                name=f"{name}-{os.getpid()}",
                commits=args.commits,
                limit=limit,
                window=window,
                workers=args.workers,
                use_window=use_window,
            )
        print(
            f"{'run':10} {'elapsed s':>10} {'utilisation':>12} {'429s':>6} {'429s after 1st window':>22} {'min conc.':>9}"
        )
        for name, r in rows.items():
            print(
                f"{name:10} {r['elapsed_s']:10.1f} {r['utilisation']:11.1%} {r['429_total']:6d} "
                f"{r['429_after_first_window']:22d} {r['min_concurrency']:9d}"
            )
        server.stop()
        db.close()


if __name__ == "__main__":
    main()
