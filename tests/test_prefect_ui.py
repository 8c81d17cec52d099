"""The Prefect UI shows pmem's runs: a backfill in a fresh data dir with the managed Prefect
server (no PREFECT_API_URL), then the UI's settings and runs list, read as the UI reads them.

Also: this backfill commits in process with PMEM_COMMIT_BUDGET=1/600s and is not throttled by it
(the budget paces HTTP clients only)."""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys

import httpx

from core.settings import Settings
from flows import prefect_server as ps
from tests.conftest import PROJECT

DEMO = PROJECT / "examples" / "demo" / "conversations.json"


def _pmem(
    env: dict[str, str], *args: str, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        env=env,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_ui_is_pointed_at_itself_and_lists_the_run_under_its_pmem_run_id(pmem_env, monkeypatch):
    # this process too reads the managed server's state, not the session's test server (another
    # module on this worker may have set PREFECT_API_URL through the prefect_api fixture)
    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    env = {k: v for k, v in os.environ.items() if k not in ("PREFECT_API_URL", "PREFECT_HOME")}
    env.update(
        pmem_env,
        PMEM_COMMIT_BUDGET="1/600s",
        PMEM_MAX_WAIT_SECONDS="1",
        PMEM_PREFECT_STARTUP_TIMEOUT="600",
    )
    settings = Settings()
    try:
        out = _pmem(env, "backfill", "--source", "chatgpt", "--export", str(DEMO), "--json")
        assert out.returncode == 0, out.stderr[-3000:]
        summary = json.loads(out.stdout.strip().splitlines()[-1])
        assert summary["commits"] == 7 and summary["status"] == "complete"  # 1/600s did not apply
        assert "waiting for" not in out.stderr
        # launched in the background while the database started, then announced once healthy
        assert "started the local Prefect server http://127.0.0.1:" in out.stderr
        assert "launched" not in json.loads((settings.prefect_home / ps.STATE_FILE).read_text())
        run_id = summary["run_id"]

        status = _pmem(env, "prefect", "status")
        assert status.returncode == 0, status.stderr
        info = ps.server_status(settings)
        ui = f"http://127.0.0.1:{info.port}/"
        assert status.stdout.splitlines()[0] == f"Prefect UI: {ui}"
        assert f"data dir: {settings.data_dir}" in status.stdout
        assert str(settings.prefect_home / ps.AUTH_FILE) in status.stdout  # how to log in
        as_json = json.loads(
            _pmem(env, "prefect", "status", "--json").stdout.strip().splitlines()[-1]
        )
        assert as_json["ui_url"] == ui and as_json["data_dir"] == str(settings.data_dir)

        # the summary links the flow run; the run's page is on this server's UI
        assert summary["flow_run_url"].startswith(f"{ui}runs/flow-run/")
        assert f"Prefect flow run: {summary['flow_run_url']}" in out.stderr

        # what the UI loads first: its settings point it at this server's API, not port 4200
        ui_settings = httpx.get(f"{ui}ui-settings", timeout=30).json()
        assert ui_settings["api_url"] == f"http://127.0.0.1:{info.port}/api"
        assert ui_settings["auth"] == "BASIC"
        # then the runs list, with the password the UI asks for
        auth = base64.b64encode(ps.auth_string(settings).encode()).decode()
        runs = httpx.post(
            f"{ui_settings['api_url']}/flow_runs/filter",
            json={"limit": 50},
            timeout=30,
            headers={"Authorization": f"Basic {auth}"},
        ).json()
        [run] = [r for r in runs if r["name"] == run_id]
        assert {"source:chatgpt", "export:conversations.json", ps.data_tag(settings)} <= set(
            run["tags"]
        )
        assert summary["flow_run_url"].endswith(run["id"]) and run["state_type"] == "COMPLETED"
        assert (
            httpx.post(
                f"{ui_settings['api_url']}/flow_runs/filter", json={}, timeout=30
            ).status_code
            == 401
        )
    finally:
        ps.stop_server(settings)
