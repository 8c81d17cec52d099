"""The managed local Prefect server (flows/prefect_server.py) and the sweep that marks runs a kill
left RUNNING as Crashed.

The server tests start a real `prefect server start` under a temporary data dir (a few seconds
each); the sweep test kills a real process in the middle of a flow run on the session's Prefect
server."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from core.errors import ConfigError
from core.settings import Settings
from flows import prefect_server as ps
from tests.conftest import PROJECT


@pytest.fixture
def managed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Settings of a fresh data dir, with no PREFECT_API_URL: the server is ours to manage."""
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("PMEM_DATA_DIR", str(tmp_path / "data"))
    settings = Settings()
    yield settings
    ps.stop_server(settings)


def _dead_pid() -> int:
    out = subprocess.run(
        [sys.executable, "-c", "import os; print(os.getpid())"],
        capture_output=True,
        text=True,
        check=True,
    )
    pid = int(out.stdout)
    assert not ps.process_alive(pid)
    return pid


def _pmem(env: dict[str, str], *args: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        env=env,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_server_starts_once_is_reused_and_stops(managed: Settings):
    url = ps.ensure_server(managed)
    info = ps.server_status(managed)
    assert info.managed and info.running and info.url == url and info.pid
    assert url == ps.api_url(info.port) and url.startswith("http://127.0.0.1:")
    assert ps.healthy(info.port)
    state = json.loads((managed.prefect_home / ps.STATE_FILE).read_text())
    assert state["pid"] == info.pid and state["port"] == info.port

    t0 = time.monotonic()
    assert ps.ensure_server(managed) == url  # reused: same pid, no start-up
    assert time.monotonic() - t0 < 3
    assert ps.server_status(managed).pid == info.pid

    # another process (the CLI) finds and reuses the same server
    env = {k: v for k, v in os.environ.items() if k != "PREFECT_API_URL"}
    env["PMEM_DATA_DIR"] = str(managed.data_dir)
    started = _pmem(env, "prefect", "start", "--json")
    assert started["pid"] == info.pid and started["url"] == url

    assert ps.stop_server(managed) is True
    assert not ps.process_alive(info.pid)
    after = ps.server_status(managed)
    assert not after.running and after.pid is None and after.port == info.port  # port remembered
    assert _pmem(env, "prefect", "status", "--json")["running"] is False
    assert ps.stop_server(managed) is False


def test_stale_pid_file_and_a_taken_port_start_a_fresh_server(managed: Settings):
    home = managed.prefect_home
    home.mkdir(parents=True)
    dead = _dead_pid()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as squatter:
        squatter.bind(("127.0.0.1", 0))
        squatter.listen()
        taken = squatter.getsockname()[1]
        # a server that was killed: its pid is gone, and someone else now listens on its port
        (home / ps.STATE_FILE).write_text(
            json.dumps({"pid": dead, "port": taken, "start_ticks": 1})
        )
        assert not ps.server_status(managed).running
        assert not ps.port_free(taken)
        url = ps.ensure_server(managed)
    info = ps.server_status(managed)
    assert info.running and info.pid != dead and info.port != taken and url == ps.api_url(info.port)
    assert (
        json.loads((home / ps.STATE_FILE).read_text())["port"] == info.port
    )  # the new port is remembered
    assert ps.stop_server(managed)


def test_external_api_url_is_used_and_nothing_is_managed(
    managed: Settings, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv("PREFECT_API_URL", "http://127.0.0.1:9/api")
    assert ps.ensure_server(managed) == "http://127.0.0.1:9/api"
    assert not (managed.prefect_home / ps.STATE_FILE).exists()
    status = ps.server_status(managed)
    assert status.managed is False and status.url == "http://127.0.0.1:9/api"


@pytest.mark.parametrize(
    ("env", "expected"),
    [
        (
            {"PREFECT_API_URL": "http://127.0.0.1:9/api"},
            "http://127.0.0.1:9/api",
        ),  # yours: used as is
        ({"PMEM_PREFECT": "ephemeral"}, None),  # opt-out: Prefect's temporary server
        ({}, "http://managed.invalid/api"),  # default: the managed server
    ],
)
def test_cli_points_prefect_at_the_managed_server(managed, monkeypatch, env, expected):
    from cli.backfill_cmds import _prefect_env

    for k in (
        "PREFECT_API_URL",
        "PMEM_PREFECT",
        "PREFECT_HOME",
        "PREFECT_LOGGING_LEVEL",
        "PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS",
    ):
        monkeypatch.delenv(k, raising=False)  # restored after the test
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    monkeypatch.setattr(ps, "ensure_server", lambda _s, **_kw: "http://managed.invalid/api")
    _prefect_env(managed)
    assert os.environ.get("PREFECT_API_URL") == expected
    assert os.environ["PREFECT_HOME"] == str(managed.prefect_home)


def test_bad_prefect_mode_is_a_config_error(managed, monkeypatch):
    from cli.backfill_cmds import _prefect_env

    monkeypatch.delenv("PREFECT_HOME", raising=False)
    monkeypatch.setenv("PMEM_PREFECT", "sometimes")
    with pytest.raises(ConfigError, match="PMEM_PREFECT"):
        _prefect_env(managed)


# ---------------------------------------------------------------- the crash sweep

KILLED_RUN = """
import os, signal
from core.settings import get_settings
from flows.prefect_server import tracked_runs
from prefect import flow, task

@task(name="draft-batch")
def step():
    print("RUNNING", flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # a kill -9 in the middle of a task

@flow(name="backfill")
def killed():
    step()

with tracked_runs(get_settings()):
    killed()
"""


def test_runs_a_kill_left_running_are_marked_crashed(pmem_env, prefect_api):
    from prefect import get_client
    from prefect.client.schemas.filters import FlowRunFilter, FlowRunFilterTags
    from prefect.client.schemas.objects import StateType
    from prefect.states import Running

    settings = Settings()
    env = {**os.environ, **pmem_env, "PREFECT_API_URL": prefect_api}
    env.pop("PREFECT_HOME", None)
    out = subprocess.run(
        [sys.executable, "-c", KILLED_RUN],
        env=env,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == -9 and "RUNNING" in out.stdout, out.stderr[-2000:]

    with get_client(sync_client=True) as client:
        mine = FlowRunFilter(tags=FlowRunFilterTags(all_=[ps.data_tag(settings)]))
        [killed] = client.read_flow_runs(flow_run_filter=mine)
        assert (
            killed.state_type == StateType.RUNNING
        )  # what Prefect does on its own: RUNNING forever
        # a run of a live process (this one) and an excluded run (the current one) stay as they are
        alive = client.create_flow_run(
            flow=_backfill_flow(), tags=[ps.data_tag(settings), ps.proc_tag()], state=Running()
        )
        current = client.create_flow_run(
            flow=_backfill_flow(),
            tags=[ps.data_tag(settings), f"{ps.PROC_TAG}{ps._host_id()}:{_dead_pid()}:1"],
            state=Running(),
        )

    crashed = ps.mark_crashed_runs(settings, exclude={str(current.id)})
    assert crashed == [str(killed.id)]

    with get_client(sync_client=True) as client:
        assert client.read_flow_run(killed.id).state_type == StateType.CRASHED
        # task states travel as events and a kill -9 may lose them; any that arrived are not RUNNING
        assert all(
            t.state_type != StateType.RUNNING
            for t in client.read_task_runs()
            if t.flow_run_id == killed.id
        )
        assert client.read_flow_run(alive.id).state_type == StateType.RUNNING
        assert client.read_flow_run(current.id).state_type == StateType.RUNNING
    assert ps.mark_crashed_runs(settings, exclude={str(current.id)}) == []  # idempotent
    assert ps.mark_crashed_runs(settings) == [str(current.id)]


def _backfill_flow():
    from flows.backfill import backfill

    return backfill
