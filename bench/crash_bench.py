"""Randomised crash test: SIGKILL `pmem backfill` at random moments until it completes, then
compare `pmem export` with an uninterrupted run's (the deterministic version with 12 named
fault points is tests/test_backfill_resilience.py).

    .venv/bin/python bench/crash_bench.py [--kills 20] [--conversations 40] [--seed 1]

Uses a temporary data dir and the embedded PostgreSQL (two databases: interrupted and clean).
Point PREFECT_API_URL at a running Prefect server to make each attempt faster.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench._pg import scratch  # noqa: E402

DEMO = ROOT / "examples" / "demo" / "conversations.json"


def synthetic_export(n: int, out: Path) -> None:
    """n conversations: the demo's, repeated with fresh ids (content kept, so drafts are useful)."""
    demo = json.loads(DEMO.read_text())
    convs = []
    for i in range(n):
        c = copy.deepcopy(demo[i % len(demo)])
        c["id"] = c["conversation_id"] = str(uuid.UUID(int=i + 1))
        c["title"] = f"{c.get('title') or ''} #{i}"
        convs.append(c)
    out.write_text(json.dumps(convs))


def pmem(env: dict[str, str], *args: str, **kw) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cli.main", *args],
        env=env,
        cwd=ROOT,
        text=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        **kw,
    )


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--conversations", type=int, default=40)
    ap.add_argument("--max-delay", type=float, default=8.0)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    rnd = random.Random(args.seed)
    with scratch("pmem-crash-", own_ok=False) as pg:
        base = pg.base
        urls = {name: pg.database(name) for name in ("interrupted", "clean")}
        export = base / "export.json"
        synthetic_export(args.conversations, export)
        common = dict(
            os.environ,
            PMEM_BATCH_MAX_CONVERSATIONS="2",
            PREFECT_SERVER_ANALYTICS_ENABLED="false",
            DO_NOT_TRACK="1",
        )
        env = dict(common, DATABASE_URL=urls["interrupted"], PMEM_DATA_DIR=str(base / "data-i"))
        kills = 0
        start = time.monotonic()
        while True:
            proc = pmem(env, "backfill", "--export", str(export), "--json")
            if kills < args.kills:
                try:
                    proc.wait(timeout=rnd.uniform(0.5, args.max_delay))
                except subprocess.TimeoutExpired:
                    proc.send_signal(signal.SIGKILL)
                    proc.wait()
                    kills += 1
                    print(f"kill {kills}", flush=True)
                    continue
            out, err = proc.communicate()
            if proc.returncode == 0:
                break
            print(f"attempt ended with {proc.returncode}: {err[-300:]}", flush=True)
        interrupted_time = time.monotonic() - start
        clean_env = dict(common, DATABASE_URL=urls["clean"], PMEM_DATA_DIR=str(base / "data-c"))
        proc = pmem(clean_env, "backfill", "--export", str(export), "--json")
        proc.communicate()
        exports = {}
        for name, url in urls.items():
            e = dict(common, DATABASE_URL=url, PMEM_DATA_DIR=str(base / f"data-{name}"))
            out, _ = pmem(e, "export").communicate()
            exports[name] = out
        same = exports["interrupted"] == exports["clean"]
        memories = exports["clean"].count('"type":"memory"')
        print(
            f"{kills} random kills over {interrupted_time:.0f}s; {memories} memories; "
            f"exports identical: {same}"
        )
        for name in (
            "i",
            "c",
            "interrupted",
            "clean",
        ):  # the managed Prefect servers of our data dirs
            pmem(
                dict(common, PMEM_DATA_DIR=str(base / f"data-{name}")), "prefect", "stop"
            ).communicate()
    sys.exit(0 if same else 1)


if __name__ == "__main__":
    main()
