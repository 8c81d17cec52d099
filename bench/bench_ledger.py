"""Ledger import benchmark: a synthetic ChatGPT export into the real PostgreSQL.

    .venv/bin/python bench/bench_ledger.py [--mb 50]

Each run in its own subprocess (so peak RSS is its own), in one temporary embedded database:

  parse only      importers.iter_source over the file, nothing stored (the baseline)
  import          `pmem import`'s path: ledger upsert (byte-exact bodies) + prefilter decision
  re-import       the same file again: must write nothing

Printed: seconds, MB/s, conversations/s, messages/s and peak RSS.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))
sys.path.insert(0, str(PROJECT / "bench"))


def child(mode: str, path: str) -> None:
    from core.models import Conversation
    from importers import iter_source

    t0 = time.perf_counter()
    convs = msgs = 0
    if mode == "parse":
        for item in iter_source("chatgpt", Path(path)):
            if isinstance(item, Conversation):
                convs += 1
                msgs += len(item.messages)
    else:
        from core.settings import Settings
        from flows.pipeline import Pipeline, import_export

        p = Pipeline.open(Settings())
        try:
            stats = import_export(p, "chatgpt", path)
        finally:
            p.close()
        convs, msgs = stats["conversations"], stats["messages_new"]
    elapsed = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"seconds": elapsed, "conversations": convs, "messages": msgs, "rss_mb": rss}))


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        child(sys.argv[2], sys.argv[3])
        return
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--mb", type=int, default=50)
    args = ap.parse_args()
    from import_bench import write_export

    from store import embedded
    from store.db import ensure_database

    base = Path(tempfile.mkdtemp(prefix="pmem-ledger-bench-"))
    try:
        export = base / "conversations.json"
        write_export(export, args.mb << 20)
        size = export.stat().st_size / (1 << 20)
        st = embedded.start(base / "pgdata")
        admin = st.uri() or ""
        ensure_database(admin, "bench")
        env = dict(
            os.environ,
            DATABASE_URL=admin.replace("/postgres?", "/bench?"),
            PMEM_DATA_DIR=str(base / "data"),
        )
        print(f"synthetic ChatGPT export: {size:.0f} MB")
        print(
            f"{'run':12} {'seconds':>8} {'MB/s':>7} {'conv/s':>8} {'msg/s':>9} {'peak RSS MB':>12}"
        )
        for label, mode in (("parse only", "parse"), ("import", "import"), ("re-import", "import")):
            out = subprocess.run(
                [sys.executable, __file__, "--child", mode, str(export)],
                env=env,
                capture_output=True,
                text=True,
                check=True,
            )
            r = json.loads(out.stdout.strip().splitlines()[-1])
            s = r["seconds"]
            print(
                f"{label:12} {s:8.1f} {size / s:7.1f} {r['conversations'] / s:8.0f} "
                f"{(r['messages'] / s) if mode == 'parse' or label == 'import' else 0:9.0f} {r['rss_mb']:12.0f}"
            )
    finally:
        embedded.stop(base / "pgdata")
        shutil.rmtree(base, ignore_errors=True)


if __name__ == "__main__":
    main()
