"""Scale-out benchmark: the same export backfilled by one process and by two pool workers.

    .venv/bin/python bench/scaleout_bench.py [--conversations 40] [--latency 1.0] [--budget 30/1s]

Both runs go through `pmem` as a user runs it, against one scratch PostgreSQL (two databases),
one Prefect server (pmem's managed one, under the scratch folder) and a scripted model behind
the local fake server (tests/scripted_model.py) that answers each drafting request after
``--latency`` seconds (a stand-in for a real model's time per request; each worker has its own
API key, as each machine would):

  single   `pmem backfill --export X --json` (in process, the default)
  pool     `pmem deploy`, two `pmem worker --pool P`, `pmem backfill --export X --pool P --wait
           --json` (the workers share the data dir's runs folder through PMEM_RUNS_URL)

With ``--budget`` both commit through `pmem api` (the memory API over HTTP) under that budget,
one client: the window in PostgreSQL is shared by both workers.

Printed per run: wall time (the command, start to end), drafter calls (the summary's and the
fake server's count), 429s (the summary's ``rate_limited``), and whether the two exports are
equal.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import time
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._pg import scratch  # noqa: E402

PROJECT = Path(__file__).resolve().parents[1]


def _export_text(url: str) -> str:
    from store.db import Database
    from store.export import write_export

    db = Database(url)
    try:
        out = io.StringIO()
        write_export(db, out)
        return out.getvalue()
    finally:
        db.close()


def _pmem(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        env=env,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=3600,
    )


def _last_json(out: subprocess.CompletedProcess[str]) -> dict:
    if out.returncode != 0:
        raise SystemExit(f"pmem failed ({out.returncode}): {out.stderr[-2000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def _api(env: dict[str, str], budget: str) -> tuple[subprocess.Popen[bytes], str]:
    import httpx

    from tests.conftest import free_port

    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "api", "--port", str(port)],
        env=env | {"PMEM_COMMIT_BUDGET": budget},
        cwd=PROJECT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):
        try:
            if httpx.get(url + "/v1/health", timeout=1).status_code == 200:
                return proc, url
        except httpx.TransportError:
            time.sleep(0.1)
    raise SystemExit("the memory API did not start")


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--conversations", type=int, default=40)
    ap.add_argument(
        "--latency", type=float, default=1.0, help="seconds the model takes per request"
    )
    ap.add_argument(
        "--budget", default=None, help="commit through `pmem api` under this budget, e.g. 30/1s"
    )
    ap.add_argument("--batch", type=int, default=2, help="conversations per batch")
    args = ap.parse_args()

    from flows.prefect_server import client_env, ensure_server, stop_server
    from tests.test_scaleout import THINGS, CountingModel, _conversation

    with scratch("pmem-scaleout-bench-") as s, CountingModel(delay=args.latency) as model:
        export = s.base / "conversations.json"
        things = [
            (f"{t}{i // len(THINGS) or ''}", a, b)
            for i, (t, a, b) in ((i, THINGS[i % len(THINGS)]) for i in range(args.conversations))
        ]
        export.write_text(
            json.dumps([_conversation(i, *t) for i, t in enumerate(things)], ensure_ascii=False)
        )
        base = dict(
            os.environ,
            PMEM_DATA_DIR=str(s.base / "data"),
            PMEM_EMBEDDER="none",
            PMEM_LLM="openai:gpt-scripted",
            PMEM_OPENAI_BASE_URL=model.url + "/v1",
            PMEM_BATCH_MAX_CONVERSATIONS=str(args.batch),
            PMEM_MAX_CONCURRENCY="1",
            PREFECT_WORKER_QUERY_SECONDS="1",
            PREFECT_WORKER_PREFETCH_SECONDS="2",
            PMEM_RUNS_URL=str(s.base / "runs"),
        )
        os.environ["PMEM_DATA_DIR"] = base["PMEM_DATA_DIR"]
        from core.settings import Settings

        settings = Settings()
        base["PREFECT_API_URL"] = ensure_server(settings)
        base.update(client_env(settings))
        try:
            results = _runs(args, base, export, model, s)
        finally:
            stop_server(settings)
        same = results["single"].pop("export") == results["pool"].pop("export")
        print(
            json.dumps(
                {
                    "conversations": args.conversations,
                    "latency": args.latency,
                    "budget": args.budget,
                    "exports_equal": same,
                    **results,
                },
                indent=1,
            )
        )


def _runs(
    args: argparse.Namespace, base: dict[str, str], export: Path, model: Any, s: Any
) -> dict[str, dict]:
    from tests.test_scaleout import Worker

    results: dict[str, dict] = {}
    for mode in ("single", "pool"):
        env = dict(base, DATABASE_URL=s.database(f"scaleout_{mode}"))
        _pmem(env, "db", "init")
        api = None
        if args.budget:
            token = _last_json(_pmem(env, "token", "create", "pmem-backfill", "--json"))["token"]
            api, url = _api(env, args.budget)
            env.update(PMEM_MEMORY_URL=url, PMEM_MEMORY_TOKEN=token, PMEM_COMMIT_BUDGET=args.budget)
        before = len(model.seen)
        workers: list[Worker] = []
        try:
            cmd = ["backfill", "--export", str(export), "--json", "--yes", "--no-embed"]
            if mode == "pool":
                pool = f"bench-{uuid.uuid4().hex[:6]}"
                _last_json(_pmem(env, "deploy", "--pool", pool, "--json"))
                workers = [
                    Worker(env | {"OPENAI_API_KEY": f"key-{n}"}, pool, n) for n in ("a", "b")
                ]
                for w in workers:
                    w.wait_for("started", timeout=120)
                cmd += ["--pool", pool, "--wait"]
            start = time.monotonic()
            summary = _last_json(_pmem(env | {"OPENAI_API_KEY": "key-single"}, *cmd))
            wall = time.monotonic() - start
        finally:
            for w in workers:
                w.stop()
            if api is not None:
                api.terminate()
                api.wait(10)
        seen = model.seen[before:]
        results[mode] = {
            "wall_seconds": round(wall, 1),
            "drafter_calls": summary["drafter_calls"],
            "fake_server_requests": len(seen),
            "by_key": dict(Counter(k for k, _, _ in seen)),
            "rate_limited": summary["rate_limited"],
            "memory_api_requests": summary["memory_api_requests"],
            "batches_total": summary["batches_total"],
            "commits": summary["commits"],
            "status": summary["status"],
            "export": _export_text(env["DATABASE_URL"]),
        }
    return results


if __name__ == "__main__":
    main()
