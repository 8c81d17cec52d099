"""The timeline page's size for a generated store of 18 months (issue 28, item 5: under 1 MB).

    .venv/bin/python bench/timeline_bench.py                 # 18 months, 20 conversations each
    .venv/bin/python bench/timeline_bench.py --months 36 --per-month 40

What a person runs, on the embedded PostgreSQL in a temporary folder: a synthetic ChatGPT export
(bench/import_bench.py's generator: Japanese and English sentences, realistic trees) spread over
``--months`` months, `pmem backfill` with the offline drafter, `pmem summary update` (offline),
then `pmem summary timeline --out`; prints the months, the memories, and the page's bytes
(total, per month). Prefect is a temporary server per command (`PMEM_PREFECT=ephemeral`);
vectors are off (the page does not use them).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))
sys.path.insert(0, str(PROJECT / "bench"))

from import_bench import Generator, fresh_env, stop_db  # noqa: E402

START = datetime(2024, 1, 3, 9, 0, tzinfo=UTC).timestamp()
MONTH = 30.44 * 86400


def spread(conv: dict[str, Any], when: float) -> dict[str, Any]:
    """``conv`` moved in time so that it starts at ``when`` (every message with it)."""
    shift = when - conv["create_time"]
    conv["create_time"] += shift
    conv["update_time"] += shift
    for node in conv["mapping"].values():
        msg = node.get("message")
        if msg and msg.get("create_time") is not None:
            msg["create_time"] += shift
    return conv


def write_export(path: Path, months: int, per_month: int, seed: int = 28) -> int:
    gen = Generator(seed)
    convs = [
        spread(gen.conversation(n), START + (n // per_month) * MONTH + (n % per_month) * 86400)
        for n in range(months * per_month)
    ]
    path.write_text(json.dumps(convs, ensure_ascii=True), encoding="utf-8")
    return len(convs)


def pmem(env: dict[str, str], *args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "cli.main", *args, "--json"],
        env=env,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        raise SystemExit(f"pmem {' '.join(args)} failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return dict(json.loads(out.stdout.strip().splitlines()[-1]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--months", type=int, default=18)
    ap.add_argument("--per-month", type=int, default=20, help="conversations a month")
    args = ap.parse_args(argv)
    root = Path(tempfile.mkdtemp(prefix="pmem-timeline-bench-"))
    env = fresh_env(root, "data")
    env.update({"PMEM_PREFECT": "ephemeral", "PMEM_EMBEDDER": "none", "PMEM_TZ": "UTC"})
    try:
        export = root / "conversations.json"
        n = write_export(export, args.months, args.per_month)
        run = pmem(
            env, "backfill", "--source", "chatgpt", "--export", str(export), "--llm", "extractive"
        )
        made = pmem(env, "summary", "update")
        page = root / "timeline.html"
        out = pmem(env, "summary", "timeline", "--out", str(page))
        size = page.stat().st_size
        print(
            f"{n} conversations over {args.months} months: {run['commits']} commits, "
            f"{made.get('months_total', out['months'])} monthly summaries\n"
            f"timeline page: {size:,} bytes ({size / max(1, out['months']) / 1000:.1f} kB a month); "
            f"{'under' if size < 1_000_000 else 'OVER'} 1 MB"
        )
        return 0 if size < 1_000_000 else 1
    finally:
        stop_db(env)
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
