"""The Prefect flow run for real (a session-wide Prefect API server), and the `pmem` CLI as a
user runs it, in subprocesses."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.conftest import PROJECT, REAL

SUBSET = REAL / "chatgpt" / "my_chat_gpt-history_download-conversations.subset.json"
DEMO = PROJECT / "examples" / "demo" / "conversations.json"


def pmem(env: dict[str, str], *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        env=env,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if check:
        assert out.returncode == 0, out.stderr[-3000:]
    return out


def last_json(out: subprocess.CompletedProcess[str]) -> dict:
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_flow_runs_in_prefect_and_keeps_private_text_out_of_parameters(pmem_env, prefect_api):
    from prefect import get_client

    from core.settings import Settings
    from flows.backfill import backfill
    from state import requests

    # the run's options are the flow's parameters; its --exclude rule (a title: private) goes by
    # the id of the run request the CLI stores, which the flow reads (state/requests.py)
    data_dir = Settings().data_dir
    rule = "title:*バックアップ*"
    request = requests.put(data_dir, requests.Request(excludes=(rule,)))
    assert request is not None
    state = backfill(
        source="chatgpt",
        export_path=str(DEMO),
        max_cost=5.0,
        price="0.4/1.6",
        max_wait=30.0,
        request=request,
        return_state=True,
    )
    summary = state.result()
    assert summary["status"] == "complete" and summary["commits"] == 6
    assert summary["excluded_by_rule"] == {rule: 1} and summary["max_cost"] == 5.0
    flow_run_id = state.state_details.flow_run_id

    import anyio

    async def flow_runs():
        async with get_client() as client:
            run = await client.read_flow_run(flow_run_id)
            tasks = await client.read_task_runs()
            return run, tasks

    run, tasks = anyio.run(flow_runs)
    assert run.state is not None and run.state.is_completed()
    assert set(run.parameters) <= {
        "source",
        "export_path",
        "dry_run",
        "llm",
        "embed",
        "max_cost",
        "price",
        "include_others",
        "max_wait",
        "request",
    }
    assert run.parameters["request"] == request and run.parameters["max_cost"] == 5.0
    stored = json.dumps([run.parameters, run.name, run.tags], ensure_ascii=False)
    assert "バックアップ" not in stored and "title:" not in stored
    mine = [run]
    names = {t.name.rsplit("-", 1)[0] for t in tasks if t.flow_run_id == mine[0].id}
    assert {"import-export", "plan-batches", "draft-batch", "commit-batch"} <= names
    # no message text in task parameters: only ids
    demo_texts = ["引っ越し", "PostgreSQL", "laptop"]
    for t in tasks:
        blob = json.dumps(t.task_inputs, default=str) + t.name
        assert not any(x in blob for x in demo_texts)


@pytest.mark.needs_shared
def test_cli_backfill_real_export_then_rerun(cli_env):
    first = last_json(
        pmem(cli_env, "backfill", "--source", "chatgpt", "--export", str(SUBSET), "--json")
    )
    for key in (
        "run_id",
        "conversations",
        "batches_total",
        "batches_skipped_complete",
        "drafter_calls",
        "commits",
        "rejected_evidence",
    ):
        assert key in first
    assert first["conversations"] == 6 and first["commits"] >= 3
    second = last_json(
        pmem(cli_env, "backfill", "--source", "chatgpt", "--export", str(SUBSET), "--json")
    )
    assert second["drafter_calls"] == 0 and second["commits"] == 0

    hits = last_json(pmem(cli_env, "search", "Django database", "--json"))["hits"]
    assert hits and {"id", "title", "score"} <= set(hits[0])
    assert hits[0]["title"] == "Django Multi-DB Setup"
    shown = last_json(pmem(cli_env, "show", hits[0]["id"], "--history", "--json"))
    assert shown["evidence"] and shown["revisions"][0]["reason"] == "create"


# `pmem demo`: tests/test_owner_cmds.py::test_demo_works_in_a_database_of_its_own


def test_cli_errors_name_the_problem(cli_env, tmp_path):
    missing = pmem(cli_env, "backfill", "--export", str(tmp_path / "nope.json"), check=False)
    assert missing.returncode == 1 and "does not exist" in missing.stderr
    bad = tmp_path / "broken.json"
    bad.write_text('[{"id": "a", "mapping": {}, "title": "x"}, {"id": ')
    out = pmem(cli_env, "import", str(bad), "--source", "chatgpt", check=False)
    assert out.returncode == 1 and "broken.json" in out.stderr
    assert "Traceback" not in out.stderr
    unknown = pmem(cli_env, "show", "mem_does_not_exist", check=False)
    assert unknown.returncode == 1 and "does not exist" in unknown.stderr


@pytest.mark.parametrize("args", [["--help"], ["backfill", "--help"], ["db", "--help"]])
def test_help_teaches(args, cli_env):
    out = pmem(cli_env, *args)
    assert "Usage" in out.stdout


def test_a_run_request_is_read_by_its_id_only(tmp_path):
    from core.errors import ConfigError
    from state import requests

    assert requests.put(tmp_path, requests.Request()) is None  # nothing private: no file
    asked = requests.Request(redraft=("line:家族",), excludes=("title:*病院*",))
    rid = requests.put(tmp_path, asked)
    assert rid is not None and requests.read(tmp_path, rid) == asked
    path = tmp_path / "requests" / f"{rid}.json"
    assert path.stat().st_mode & 0o077 == 0  # private: the owner's only
    for bad in ("../../etc/passwd", rid + "0"):  # a handle, never a path
        with pytest.raises(ConfigError):
            requests.read(tmp_path, bad)
    path.write_text(path.read_text(encoding="utf-8").replace("病院", "x"), encoding="utf-8")
    with pytest.raises(ConfigError, match="damaged"):  # never a run without its exclusions
        requests.read(tmp_path, rid)
    os.utime(path, (1, 1))  # left behind by a killed CLI: the next request removes it
    other = requests.put(tmp_path, asked)
    assert not path.exists() and (tmp_path / "requests" / f"{other}.json").exists()
    requests.drop(tmp_path, other)
    assert not list((tmp_path / "requests").iterdir())
    with pytest.raises(ConfigError, match="missing"):
        requests.read(tmp_path, rid)
