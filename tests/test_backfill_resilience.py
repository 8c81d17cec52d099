"""Rate-limit stops, 429s from the memory API, and kill -9 at named fault points: the backfill
runs as a subprocess (`pmem backfill`, a real Prefect flow) against the memory API over HTTP."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import time

import psycopg
import pytest

from core.settings import Settings
from flows import pipeline as pl
from store.db import Database
from store.export import write_export
from tests.conftest import PROJECT

DEMO = PROJECT / "examples" / "demo" / "conversations.json"


def backfill(env: dict[str, str], **extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "cli.main",
            "backfill",
            "--source",
            "chatgpt",
            "--export",
            str(DEMO),
            "--json",
        ],
        env=dict(env, **extra),
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=300,
    )


def export_of(url: str) -> str:
    db = Database(url)
    try:
        buf = io.StringIO()
        # the memories' rows: which memory first named a concept follows the order the
        # batches were committed in, which a resume changes (store.export.iter_export)
        write_export(db, buf, derived=False)
        return buf.getvalue()
    finally:
        db.close()


def attempts(url: str) -> list[int]:
    with psycopg.connect(url) as conn:
        return [r[0] for r in conn.execute("SELECT attempts FROM batches ORDER BY batch_id")]


def test_rate_limit_stop_exits_75_and_resume_finishes_without_repeats(
    cli_env, api_server, db_url, tmp_path
):
    # the budget paces an HTTP committer (commits in process are never throttled by it); a long
    # window, so that the stop does not depend on how fast this machine is
    url = api_server()
    env = dict(
        cli_env,
        PMEM_COMMIT_BUDGET="10/120s",
        PMEM_MAX_WAIT_SECONDS="1",
        PMEM_BATCH_MAX_CONVERSATIONS="2",
        PMEM_MEMORY_URL=url,
    )
    out = backfill(env)
    assert out.returncode == 75, out.stderr[-2000:]
    assert "make backfill SOURCE=chatgpt EXPORT=" in out.stderr and "resume" in out.stderr

    # resumed with patience: the window is still spent, so it waits, and with output piped its
    # log (stderr) says what for and until when; the test lets the window pass by emptying it
    # each time the run waits (the limiter looks again at least every 5 s)
    log = tmp_path / "stderr.log"
    with log.open("w") as err:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cli.main",
                "backfill",
                "--source",
                "chatgpt",
                "--export",
                str(DEMO),
                "--json",
            ],
            env=dict(env, PMEM_MAX_WAIT_SECONDS="600"),
            cwd=PROJECT,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
        )
        deadline = time.monotonic() + 300
        while proc.poll() is None and time.monotonic() < deadline:
            if "waiting for" in log.read_text():
                with psycopg.connect(db_url) as conn:
                    conn.execute("DELETE FROM budget_events WHERE bucket = 'client:pmem-backfill'")
            time.sleep(0.5)
        stdout, _ = proc.communicate(timeout=60)
    stderr = log.read_text()
    assert proc.returncode == 0, stderr[-2000:]
    assert re.search(
        r"^waiting for the memory API budget \(10 requests per 120 s\) until \d\d:\d\d:\d\d \(",
        stderr,
        re.M,
    ), stderr
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["resumed"]
    assert attempts(db_url) == [1, 1, 1, 1]  # every batch drafted exactly once over all the runs
    dump = export_of(db_url)
    assert dump.count('"type":"memory"') == 7 and dump.count('"type":"revision"') == 7


def test_429_from_the_memory_api_lowers_concurrency_and_completes(cli_env, api_server, db_url):
    url = api_server(budget="4/2s")
    out = backfill(cli_env, PMEM_MEMORY_URL=url, PMEM_BATCH_MAX_CONVERSATIONS="2")
    assert out.returncode == 0, out.stderr[-2000:]
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["rate_limited"] >= 1 and summary["commits"] == 7
    assert export_of(db_url).count('"type":"memory"') == 7


KILL_POINTS = [
    # (fault spec, talk to the memory API over HTTP?)
    ("import:after-conversation@3", True),
    ("plan:after-batch@2", True),
    ("draft:before-call@1", True),
    ("draft:after-call@1", True),
    ("write:result.json:before-rename@1", True),
    ("draft:after-result@1", True),
    ("commit:before-propose@1", True),
    ("commit:after-propose@1", True),
    ("store:commit-before-tx-end@1", False),  # inside the store's transaction: in process
    ("commit:after-commit-before-bookkeeping@1", True),
    ("commit:after-bookkeeping@2", True),
    ("commit:after-batch@1", True),
]


def test_kill_9_at_every_fault_point_then_resume_equals_uninterrupted_run(
    cli_env, api_server, db_url, db_factory, tmp_path, monkeypatch
):
    url = api_server()
    env = dict(cli_env, PMEM_BATCH_MAX_CONVERSATIONS="2", PMEM_MEMORY_URL=url)
    killed = []
    for spec, over_http in KILL_POINTS:
        run_env = dict(env, PMEM_FAULT=spec)
        if not over_http:
            run_env.pop("PMEM_MEMORY_URL")
        out = backfill(run_env)
        assert out.returncode == -9, (
            f"{spec} was not reached (exit {out.returncode}): {out.stderr[-1500:]}"
        )
        killed.append(spec)
    final = backfill(env)
    assert final.returncode == 0, final.stderr[-2000:]
    assert len(killed) >= 10

    # the same backfill, uninterrupted, into a fresh database
    clean = db_factory()
    monkeypatch.setenv("DATABASE_URL", clean)
    monkeypatch.setenv("PMEM_DATA_DIR", str(tmp_path / "clean"))
    monkeypatch.setenv("PMEM_BATCH_MAX_CONVERSATIONS", "2")
    p = pl.Pipeline.open(Settings())
    try:
        assert pl.run_backfill(p, "chatgpt", str(DEMO))["commits"] == 7
    finally:
        p.close()
    interrupted, uninterrupted = export_of(db_url), export_of(clean)
    assert interrupted == uninterrupted
    assert interrupted.count('"type":"memory"') == 7
    with psycopg.connect(db_url) as conn:
        assert conn.execute("SELECT count(*) FROM memory_revisions").fetchone()[0] == 7
        assert (
            conn.execute(
                "SELECT count(*) FROM (SELECT memory_id, source_key, text_hash FROM evidence GROUP BY 1, 2, 3 HAVING count(*) > 1) d"
            ).fetchone()[0]
            == 0
        )


@pytest.mark.parametrize("spec", ["nothing@1"])
def test_unknown_fault_point_is_inert(cli_env, spec):
    out = backfill(dict(cli_env, PMEM_FAULT=spec))
    assert out.returncode == 0
