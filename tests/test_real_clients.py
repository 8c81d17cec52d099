"""Real MCP clients, as their users run them (issue 30 item 6): the official TypeScript SDK's
client through DCR, consent, a read, a write, a refresh and a server restart (no reconnect code
in the client); the MCP Inspector CLI lists the tools over stdio.

The Node packages are installed once with npm into ``.cache/node-clients`` in the checkout
(``PMEM_NODE_CLIENTS`` elsewhere) and reused; where Node or npm is missing, or the registry
cannot be reached, the tests skip and say which."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import PROJECT
from tests.test_mcp_restart import http_server
from tests.test_remote import DB_MESSAGE, PASSPHRASE, cheap_argon2  # noqa: F401

PACKAGES = {
    "ts-sdk": "@modelcontextprotocol/sdk@1.32",
    "inspector": "@modelcontextprotocol/inspector@2.12",
}
PROBE = PROJECT / "tests" / "clients" / "ts_sdk_probe.mjs"
EVIDENCE = "データベースは PostgreSQL にします"


def node_packages(name: str) -> Path:
    """The folder holding ``node_modules`` with ``PACKAGES[name]``, installed on first use."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.skip("Node.js and npm are not installed (Debian: apt install nodejs npm)")
    root = Path(os.environ.get("PMEM_NODE_CLIENTS", PROJECT / ".cache" / "node-clients")) / name
    spec = PACKAGES[name]
    marker = root / ".installed"
    if not marker.exists() or marker.read_text() != spec:
        root.mkdir(parents=True, exist_ok=True)
        try:
            done = subprocess.run(
                [npm, "install", "--prefix", str(root), "--no-audit", "--no-fund", spec],
                capture_output=True,
                text=True,
                timeout=300,
            )
        except subprocess.TimeoutExpired:
            pytest.skip(f"npm could not install {spec} in 300 s (is the registry reachable?)")
        if done.returncode != 0:
            pytest.skip(f"npm could not install {spec}: {done.stderr.strip()[-200:]}")
        marker.write_text(spec)
    return root


def run_probe(server: Any, root: Path, **extra: str) -> tuple[dict[str, dict[str, Any]], str]:
    """Run the TypeScript probe against ``server``; its steps by name, and its stderr."""
    probe = root / PROBE.name  # Node resolves the SDK from beside the script
    shutil.copyfile(PROBE, probe)
    env = dict(
        os.environ,
        PMEM_PROBE_BASE=server.base,
        PMEM_PROBE_PASSPHRASE=PASSPHRASE,
        PMEM_PROBE_EVIDENCE_KEY=DB_MESSAGE,
        PMEM_PROBE_EVIDENCE_TEXT=EVIDENCE,
        **extra,
    )
    child = subprocess.Popen(
        ["node", str(probe)],
        cwd=root,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert child.stdin is not None and child.stdout is not None
    steps: dict[str, dict[str, Any]] = {}
    try:
        for line in child.stdout:
            step = json.loads(line)
            steps.setdefault("_all", []).append(step)  # type: ignore[arg-type]
            steps.setdefault(step["step"], step)
            steps[step["step"] + "#last"] = step
            if step["step"] == "restart":
                server.restart()
                child.stdin.write("go\n")
                child.stdin.flush()
            if step["step"] in ("done", "failed"):
                break
        child.wait(timeout=30)
    finally:
        if child.poll() is None:
            child.kill()
    return steps, child.stderr.read() if child.stderr else ""


def test_the_typescript_sdk_client_stays_connected(
    pmem_env: dict[str, str], db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = node_packages("ts-sdk")
    monkeypatch.setenv("PMEM_ACCESS_TOKEN_SECONDS", "5")
    with http_server(db, monkeypatch) as server:
        steps, stderr = run_probe(
            server,
            root,
            PMEM_PROBE_SCOPES="memory.read memory.propose memory.write",
            PMEM_PROBE_WAIT_MS="6000",  # past the 5 s access token
        )
    assert "failed" not in steps, (steps["failed"], stderr[-500:])
    assert steps["connected"]["registered"]
    assert steps["connected"]["server"]["name"] == "personal-memory"
    assert steps["connected"]["server"]["version"]  # serverInfo.version is set (item 5)
    assert {"load_context", "recall", "commit_memory"} <= set(steps["tools"]["names"])
    assert steps["read"]["error"] is False
    assert steps["write"]["error"] is False and steps["write"]["text"].startswith("created:")
    assert steps["refresh"] == {"step": "refresh", "error": False, "refreshed": True}
    assert steps["after-restart"]["error"] is False
    assert "done" in steps
    assert server.errors() == []


def test_the_typescript_sdk_steps_up_from_a_read_only_grant(
    pmem_env: dict[str, str], db: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    root = node_packages("ts-sdk")
    with http_server(db, monkeypatch) as server:
        steps, stderr = run_probe(
            server, root, PMEM_PROBE_SCOPES="memory.read", PMEM_PROBE_MODE="step-up"
        )
    assert "failed" not in steps, (json.dumps(steps["_all"]), stderr[-500:])
    assert steps["consent"]["scope"] == "memory.read"  # the first grant: read only
    assert "commit_memory" not in steps["tools"]["names"]  # hidden beyond the grant
    assert steps["step-up"]["consented"]
    assert "memory.write" in steps["consent#last"]["scope"].split()  # asked for what it needed
    assert steps["write"]["error"] is False and steps["write"]["text"].startswith("created:")


def test_the_inspector_cli_lists_the_tools_over_stdio(pmem_env: dict[str, str]) -> None:
    root = node_packages("inspector")
    cli = root / "node_modules" / ".bin" / "mcp-inspector"
    if not cli.exists():
        pytest.skip(f"the inspector's CLI is not at {cli}")
    done = subprocess.run(
        [
            str(cli),
            "--cli",
            sys.executable,
            "-m",
            "cli.main",
            "serve",
            "--client",
            "inspector",
            "--method",
            "tools/list",
        ],
        cwd=PROJECT,
        env=dict(os.environ, PMEM_EMBEDDER="none"),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-500:]
    names = {t["name"] for t in json.loads(done.stdout)["tools"]}
    assert {"load_context", "search_memory", "recall", "commit_memory"} <= names
