"""How long a fresh data dir takes to backfill a small export offline, first database and Prefect
starts included (issue 11: a 30-conversation export in under 3 minutes; the commit budget never
throttles an in-process run).

    .venv/bin/python bench/fresh_backfill_time.py [--conversations 30] [--keep]

Takes the first N conversations of ../shared/eval/chatgpt-export.zip into a temporary export,
runs `pmem backfill` in a new temporary data dir (no PREFECT_API_URL: pmem starts its managed
Prefect server; the embedded PostgreSQL is initialised on first use) with the default budget
(300 / 600 s), prints the wall time, the summary's counts and the machine's load, then stops
both servers and removes the data dir (unless --keep).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXPORT = ROOT.parent / "shared" / "eval" / "chatgpt-export.zip"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--conversations", type=int, default=30)
    ap.add_argument(
        "--keep", action="store_true", help="keep the data dir (and its servers running)"
    )
    args = ap.parse_args()

    tmp = Path(tempfile.mkdtemp(prefix="pmem-fresh-"))
    data = tmp / "data"
    export = tmp / "conversations.json"
    convs = json.loads(zipfile.ZipFile(EXPORT).read("conversations.json"))[: args.conversations]
    export.write_text(json.dumps(convs, ensure_ascii=False))
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PREFECT_API_URL", "DATABASE_URL", "PMEM_COMMIT_BUDGET")
    }
    env["PMEM_DATA_DIR"] = str(data)
    pmem = [sys.executable, "-m", "cli.main"]
    load = os.getloadavg()[0]
    t0 = time.monotonic()
    out = subprocess.run(
        [*pmem, "backfill", "--source", "chatgpt", "--export", str(export), "--json"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.monotonic() - t0
    try:
        if out.returncode != 0:
            print(out.stderr[-3000:], file=sys.stderr)
            return 1
        s = json.loads(out.stdout.strip().splitlines()[-1])
        waits = [line for line in out.stderr.splitlines() if line.startswith("waiting for")]
        print(
            f"{len(convs)} conversations, fresh data dir: {elapsed:.1f}s wall (flow {s['elapsed_seconds']:.1f}s), "
            f"{s['commits']} commits, {s['memory_api_requests']} memory-API requests, {len(waits)} wait lines; "
            f"load average {load:.1f} at the start, {os.getloadavg()[0]:.1f} at the end; "
            f"{'under' if elapsed < 180 else 'OVER'} 3 minutes"
        )
        return 0
    finally:
        if not args.keep:
            subprocess.run(
                [*pmem, "prefect", "stop"], env=env, cwd=ROOT, capture_output=True, check=False
            )
            subprocess.run(
                [*pmem, "db", "stop"], env=env, cwd=ROOT, capture_output=True, check=False
            )
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
