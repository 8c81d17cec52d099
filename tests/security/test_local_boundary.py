"""Issue 10, point 8: the local boundary. One test per point (docs/security.md, "The local boundary"):

- file modes of a whole data dir after `pmem db init`, an import, a backfill, a review and an
  export (PostgreSQL's and pmem's files; the export and review pages 0600);
- the embedded server: socket only, in the private pgdata folder; a too-long path refused;
- a password for every role (connecting without it fails); `pmem db url` connects as printed;
- the server does not run with group root;
- the managed Prefect server: 401 without the auth string, no cross-origin access, private home;
- the memory API: 401 before body validation, the Host check, the client's name from its token,
  scopes, revocation, the bind refusal;
- `pmem serve` ignores a `.env` in its working folder.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
from fastapi.testclient import TestClient

from core.private import loose_paths
from store import embedded
from tests.conftest import PROJECT

DEMO = PROJECT / "examples" / "demo" / "conversations.json"


def pmem(
    env: dict[str, str], *args: str, cwd: Path = PROJECT, check: bool = True
) -> subprocess.CompletedProcess[str]:
    out = subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
    )
    if check:
        assert out.returncode == 0, out.stderr[-3000:]
    return out


def last_json(out: subprocess.CompletedProcess[str]) -> dict[str, Any]:
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def embedded_home(prefect_api: str) -> Iterator[tuple[Path, dict[str, str]]]:
    """A fresh data dir with its own embedded PostgreSQL, made by `pmem db init` (the test
    process keeps umask 022: the modes must come from pmem itself)."""
    base = Path(tempfile.mkdtemp(prefix="pmem-sec-"))
    os.chmod(base, 0o711)  # as root the server user must traverse it: pmem never changes it
    data = base / "data"
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "PMEM_DATABASE_URL", "PREFECT_HOME")
    }
    env.update(
        PMEM_DATA_DIR=str(data), PREFECT_API_URL=prefect_api, PMEM_EMBEDDER="none", PMEM_TZ="UTC"
    )
    old = os.umask(0o022)
    try:
        pmem(env, "db", "init", "--keep-running")
        yield data, env
    finally:
        os.umask(old)
        embedded.stop(data / "pgdata")
        shutil.rmtree(base, ignore_errors=True)


def test_every_file_under_the_data_dir_is_private_after_init_import_backfill_review_export(
    embedded_home,
):
    data, env = embedded_home
    outside = data.parent / "out"
    outside.mkdir()
    pmem(env, "import", str(DEMO), "--source", "chatgpt", "--no-embed")
    run = last_json(
        pmem(
            env,
            "backfill",
            "--source",
            "chatgpt",
            "--export",
            str(DEMO),
            "--dry-run",
            "--no-embed",
            "--json",
        )
    )
    review = last_json(pmem(env, "review", run["run_id"], "--json"))
    pmem(env, "export", "--out", str(outside / "memory.jsonl"))

    # what each step left: PostgreSQL's files, runs/, review pages, the passfile
    assert (data / "pgdata" / "PG_VERSION").exists() and (data / "pgpass").exists()
    assert Path(review["markdown"]).exists() and Path(review["html"]).exists()
    assert any((data / "runs").rglob("result.json"))
    allow_root = (
        embedded.data_dir_mode()
    )  # 0700; 0710 as root (the server's own group: traverse only)
    assert loose_paths(data, allow_root=allow_root) == []
    assert stat.S_IMODE(data.stat().st_mode) == allow_root
    if allow_root == 0o710:
        assert data.stat().st_gid == embedded.server_account().gid != 0
    # files written on request outside the data dir
    assert stat.S_IMODE((outside / "memory.jsonl").stat().st_mode) == 0o600
    for page in (review["markdown"], review["html"]):
        assert stat.S_IMODE(Path(page).stat().st_mode) == 0o600


def test_socket_only_in_the_private_pgdata_and_a_long_path_is_refused(embedded_home, tmp_path):
    data, _env = embedded_home
    pgdata = data / "pgdata"
    st = embedded.status(pgdata)
    assert st.running and Path(st.socket_dir or "") == pgdata.resolve()
    assert stat.S_IMODE(pgdata.stat().st_mode) == 0o700
    sock = pgdata / embedded.SOCKET_NAME
    assert stat.S_ISSOCK(sock.stat().st_mode) and stat.S_IMODE(sock.stat().st_mode) & 0o077 == 0
    with psycopg.connect(st.uri() or "") as conn:
        assert conn.execute("SHOW listen_addresses").fetchone() == ("",)  # no TCP at all
        assert conn.execute("SHOW unix_socket_directories").fetchone() == (str(pgdata.resolve()),)

    # a path whose socket would not fit in sun_path: refused, nothing moved to a shared folder
    deep = tmp_path / ("d" * 60) / ("e" * 60) / "pgdata"
    with pytest.raises(embedded.DatabaseUnavailable, match="too long for PostgreSQL's Unix socket"):
        embedded.start(deep)
    assert not deep.parent.exists()


def test_every_role_needs_its_password_and_db_url_connects(embedded_home):
    data, env = embedded_home
    pgdata = data / "pgdata"
    hba = [
        ln
        for ln in (pgdata / "pg_hba.conf").read_text().splitlines()
        if ln.strip() and not ln.startswith("#")
    ]
    assert hba == ["local   all   all   scram-sha-256"]
    bare = f"postgresql://postgres@/postgres?host={pgdata}"
    with pytest.raises(psycopg.OperationalError, match="password"):
        psycopg.connect(bare, passfile="/nonexistent").close()
    with pytest.raises(psycopg.OperationalError, match="password authentication failed"):
        psycopg.connect(bare, password="wrong", passfile="/nonexistent").close()
    assert stat.S_IMODE((data / "pgpass").stat().st_mode) == 0o600

    url = pmem(env, "db", "url").stdout.strip()
    assert (
        "passfile=" in url and embedded.read_password(pgdata) not in url
    )  # the password never printed
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT rolname, rolpassword FROM pg_authid WHERE rolcanlogin"
        ).fetchall()
    assert rows and all(pw and pw.startswith("SCRAM-SHA-256$") for _, pw in rows)


def test_the_server_does_not_run_with_group_root(embedded_home):
    data, _env = embedded_home
    st = embedded.status(data / "pgdata")
    assert st.running and st.pid
    groups = embedded.process_groups(st.pid)
    assert groups, "no /proc/<pid>/status"
    assert 0 not in groups
    owner = Path(f"/proc/{st.pid}").stat().st_uid
    assert owner != 0
    if os.geteuid() == 0:
        assert groups == {embedded.server_account().gid}


def test_managed_prefect_server_needs_its_auth_string_and_refuses_other_origins(
    tmp_path, monkeypatch
):
    from core.settings import Settings
    from flows import prefect_server as ps

    monkeypatch.delenv("PREFECT_API_URL", raising=False)
    monkeypatch.setenv("PMEM_DATA_DIR", str(tmp_path / "data"))
    settings = Settings()
    try:
        url = ps.ensure_server(settings)
        assert url.startswith("http://127.0.0.1:")
        auth = ps.auth_string(settings)
        good = {"Authorization": "Basic " + base64.b64encode(auth.encode()).decode()}
        bad = {"Authorization": "Basic " + base64.b64encode(b"pmem:guess").decode()}
        assert httpx.post(f"{url}/flows/filter", json={}).status_code == 401
        assert httpx.post(f"{url}/flows/filter", json={}, headers=bad).status_code == 401
        assert httpx.post(f"{url}/flows/filter", json={}, headers=good).status_code == 200
        # the CLI's processes get the string with the URL
        assert ps.client_env(settings) == {"PREFECT_API_AUTH_STRING": auth}

        # no cross-origin access: a preflight from another origin gets no allow-origin
        pre = {"Origin": "http://evil.example", "Access-Control-Request-Method": "POST"}
        r = httpx.options(f"{url}/flows/filter", headers=pre)
        assert "access-control-allow-origin" not in r.headers
        r = httpx.post(
            f"{url}/flows/filter", json={}, headers={**good, "Origin": "http://evil.example"}
        )
        assert "access-control-allow-origin" not in r.headers

        home = settings.prefect_home
        assert (home / "prefect.db").exists() or any(home.rglob("*.db"))
        assert stat.S_IMODE((home / ps.AUTH_FILE).stat().st_mode) == 0o600
        assert loose_paths(settings.data_dir) == []
    finally:
        ps.stop_server(settings)


# ---------------------------------------------------------------- the memory API


def _api(db, public_url: str | None = None) -> TestClient:
    from memory_api.app import create_app

    return TestClient(create_app(db, public_url=public_url), base_url="http://127.0.0.1:8765")


def test_memory_api_401_before_body_validation_host_check_scopes_and_revocation(db):
    from store.tokens import TokenStore

    tokens = TokenStore(db)
    client = _api(db)
    # no token, or a wrong one: 401 even for a body that would not validate
    for headers in ({}, {"Authorization": "Bearer pmem_wrong"}, {"Authorization": "Basic eDp5"}):
        r = client.post("/v1/commits", content=b"{not json", headers=headers)
        assert r.status_code == 401 and r.json() == {"error": "unauthorized"}
        assert r.headers["www-authenticate"].startswith("Bearer")
    assert client.get("/v1/memories/mem_x").status_code == 401
    assert client.get("/v1/health").status_code == 200  # the health check only

    issued = tokens.create("reader", ["memory.read"])
    auth = {"Authorization": f"Bearer {issued.token}"}
    assert client.post("/v1/search", json={"query": "x"}, headers=auth).status_code == 200
    # with a token, the body is validated (422), and scopes apply (403)
    writer = tokens.create("writer")
    wauth = {"Authorization": f"Bearer {writer.token}"}
    assert (
        client.post(
            "/v1/commits",
            content=b"{not json",
            headers={**wauth, "Content-Type": "application/json"},
        ).status_code
        == 422
    )
    r = client.post("/v1/commits", json={}, headers=auth)
    assert r.status_code == 403 and r.json()["error"] == "insufficient_scope"

    # the Host header: loopback names pass, anything else is refused (DNS rebinding)
    for host in ("127.0.0.1:8765", "localhost:8765", "[::1]:8765", "localhost"):
        assert (
            client.post(
                "/v1/search", json={"query": "x"}, headers={**auth, "Host": host}
            ).status_code
            == 200
        )
    for host in ("evil.example", "evil.example:8765", "127.0.0.1.evil.example", ""):
        r = client.post("/v1/search", json={"query": "x"}, headers={**auth, "Host": host})
        assert r.status_code == 400 and r.json() == {"error": "invalid_host"}
    public = _api(db, public_url="https://memory.example.org")
    assert (
        public.post(
            "/v1/search", json={"query": "x"}, headers={**auth, "Host": "memory.example.org"}
        ).status_code
        == 200
    )
    assert (
        public.post(
            "/v1/search", json={"query": "x"}, headers={**auth, "Host": "other.example.org"}
        ).status_code
        == 400
    )

    # the stored token is a hash, never the token itself
    with db.connection() as conn:
        stored = conn.execute(
            "SELECT token_hash FROM auth_tokens WHERE token_id = %s", (issued.info.token_id,)
        ).fetchone()
    assert stored and issued.token.encode() not in bytes(stored[0])

    assert tokens.revoke(issued.info.token_id) == [issued.info.token_id]
    assert client.post("/v1/search", json={"query": "x"}, headers=auth).status_code == 401


def test_memory_api_takes_the_client_name_from_the_token(db):
    from core.models import CommitRequest
    from store.records import MemoryStore
    from store.tokens import TokenStore

    token = TokenStore(db).create("claude-code").token
    client = _api(db)
    body = CommitRequest(
        kind="note",
        title="散歩の習慣",
        canonical_summary="朝に川沿いを歩く。",
        index_summary="散歩",
        stated_facts=["朝に歩いている"],
        idempotency_key="who-1",
        client="owner",
    ).model_dump(mode="json")
    r = client.post(
        "/v1/commits",
        json=body,
        headers={"Authorization": f"Bearer {token}", "X-Pmem-Client": "owner"},
    )
    assert r.status_code == 200, r.text
    view = MemoryStore(db).get(r.json()["memory_id"], history=True)
    assert [rev["client"] for rev in view.revisions] == ["claude-code"]
    with db.connection() as conn:  # and its budget is the token's, not the claimed name's
        buckets = {b for (b,) in conn.execute("SELECT DISTINCT bucket FROM budget_events")}
    assert "server:claude-code" in buckets and not any("owner" in b for b in buckets)


def test_pmem_api_refuses_a_non_loopback_bind_without_public_url(pmem_env):
    from core.errors import ConfigError
    from memory_api.auth import check_bind

    env = {**os.environ, **pmem_env}
    out = pmem(env, "api", "--host", "0.0.0.0", "--port", "1", check=False)
    assert out.returncode == 1
    assert "refusing to listen on 0.0.0.0" in out.stderr and "--public-url" in out.stderr
    check_bind("127.0.0.1", None)
    check_bind("::1", None)
    check_bind("0.0.0.0", "https://memory.example.org")  # behind a TLS proxy
    with pytest.raises(ConfigError):
        check_bind("192.168.1.5", None)
    with pytest.raises(ConfigError):
        check_bind("0.0.0.0", "memory.example.org")  # not a URL


def test_token_cli_create_list_revoke(pmem_env):
    env = {**os.environ, **pmem_env}
    made = last_json(pmem(env, "token", "create", "codex", "--scope", "memory.read", "--json"))
    assert (
        made["token"].startswith("pmem_")
        and made["scopes"] == ["memory.read"]
        and made["name"] == "codex"
    )
    listed = last_json(pmem(env, "token", "list", "--json"))["tokens"]
    assert [t["token_id"] for t in listed] == [made["token_id"]] and "token" not in listed[0]
    assert made["token"] not in pmem(env, "token", "list").stdout
    assert last_json(pmem(env, "token", "revoke", "codex", "--json")) == {
        "revoked": [made["token_id"]]
    }
    assert pmem(env, "token", "revoke", "codex", check=False).returncode == 1
    bad = pmem(env, "token", "create", "x", "--scope", "memory.everything", check=False)
    assert bad.returncode == 1 and "unknown scope" in bad.stderr


# ---------------------------------------------------------------- .env and `pmem serve`


def test_serve_ignores_a_dotenv_in_its_working_folder(pmem_env, db_url, tmp_path):
    """A `.env` in the folder an AI client starts `pmem serve` from redirects nothing; the data
    dir's config.env and the client's environment are read."""
    import anyio
    from mcp import ClientSession, StdioServerParameters, stdio_client

    data = Path(pmem_env["PMEM_DATA_DIR"])
    data.mkdir(parents=True, exist_ok=True)
    (data / "config.env").write_text(f"DATABASE_URL={db_url}\n")
    work = tmp_path / "some-repo"
    work.mkdir()
    trap = "postgresql://attacker@/stolen?host=/nonexistent-trap"
    (work / ".env").write_text(
        f"DATABASE_URL={trap}\nPMEM_MEMORY_URL=http://127.0.0.1:9/\nPMEM_DATA_DIR=/nonexistent-trap\n"
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "PMEM_DATABASE_URL", "PMEM_MEMORY_URL")
    }
    env.update(
        PMEM_DATA_DIR=str(data), PMEM_EMBEDDER="none", PMEM_TZ="UTC", PYTHONPATH=str(PROJECT)
    )

    # the same .env does reach an ordinary command run there (so the trap is live)
    status = last_json(pmem(env, "db", "status", "--json", cwd=work))
    assert status["mode"] == "external" and "nonexistent-trap" in status["url"]

    async def session() -> tuple[bool, str, bool]:
        params = StdioServerParameters(
            command=sys.executable, args=["-m", "cli.main", "serve"], env=env, cwd=str(work)
        )
        with open(os.devnull, "w") as errlog:
            async with (
                stdio_client(params, errlog=errlog) as (read, write),
                ClientSession(read, write) as s,
            ):
                await s.initialize()
                found = await s.call_tool("search_memory", {"query": "川沿い"})
                wrote = await s.call_tool(
                    "commit_memory",
                    {
                        "title": "散歩の習慣",
                        "kind": "other",
                        "canonical_summary": "朝に川沿いを歩く。",
                        "index_summary": "散歩",
                        "stated_facts": ["朝に歩いている"],
                    },
                )
                return found.is_error, str(found.content[0].text), wrote.is_error  # type: ignore[union-attr]

    search_failed, text, commit_failed = anyio.run(session)
    assert not search_failed, text
    assert not commit_failed  # committed in process: PMEM_MEMORY_URL from the .env was not read
    with psycopg.connect(db_url) as conn:
        assert conn.execute("SELECT count(*) FROM memories").fetchone() == (1,)
