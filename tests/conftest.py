"""Shared fixtures: one real PostgreSQL (the embedded wheel, or DATABASE_URL) per test session,
a fresh migrated database per test, cloned from a migrated template database.

Worker-safe for pytest-xdist (`make test` runs `-n 2 --dist loadfile`): every xdist worker is
its own session, so it starts its own embedded PostgreSQL in a fresh temp dir (Unix socket, no
TCP port) and its own Prefect server (PREFECT_HOME under the worker's basetemp, a free port);
database names carry the worker's pid, so they do not collide even on one shared server
(PMEM_TEST_DATABASE_URL). Nothing here writes under the project (.pmem/, runs/)."""

from __future__ import annotations

import itertools
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("DO_NOT_TRACK", "1")

# As root, a data dir under a folder the server's user cannot traverse (pytest's tmp_path is
# under a 0700 folder) has its cluster placed under $PMEM_PG_HOME: the tests' go to a folder
# of the session's own, removed when the session ends, never to the machine's /var/lib/pmem.
_OWN_PG_HOME: str | None = None
if "PMEM_PG_HOME" not in os.environ:
    _OWN_PG_HOME = tempfile.mkdtemp(prefix="pmem-test-pghome-")
    os.environ["PMEM_PG_HOME"] = _OWN_PG_HOME


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _OWN_PG_HOME is not None:
        shutil.rmtree(_OWN_PG_HOME, ignore_errors=True)


PROJECT = Path(__file__).resolve().parents[1]
SHARED = PROJECT.parent / "shared"
REAL = SHARED / "fixtures" / "real"
_counter = itertools.count()

# The real third-party samples (fixtures/real/) and the eval corpora (eval/) live beside the
# project in ../shared/, which a fresh clone does not have (CI has it). A test that reads them is
# marked `@pytest.mark.needs_shared` (a whole module: `pytestmark = pytest.mark.needs_shared`) and
# skips with this one reason when the folder is absent; a fixture that reads them asks for the
# `shared` fixture. Everything else a test needs lives in the project.
SHARED_ABSENT = (
    "../shared/ is absent (real third-party samples and eval corpora live there; CI has it)"
)
HAS_SHARED = SHARED.is_dir()
needs_shared = pytest.mark.needs_shared


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAS_SHARED:
        return
    skip = pytest.mark.skip(reason=SHARED_ABSENT)
    for item in items:
        if item.get_closest_marker("needs_shared"):
            item.add_marker(skip)


@pytest.fixture
def shared() -> Path:
    """../shared/ (the real samples, the eval corpora); skips the test when it is absent."""
    if not HAS_SHARED:
        pytest.skip(SHARED_ABSENT)
    return SHARED


def _with_db(url: str, name: str) -> str:
    params = conninfo_to_dict(url)
    params["dbname"] = name
    return make_conninfo(**params)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def pg_admin_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Admin URL of a real PostgreSQL with pgvector for the whole session."""
    own = os.environ.get("PMEM_TEST_DATABASE_URL")
    if own:
        yield own
        return
    from store import embedded

    # Not under pytest's basetemp: pytest resets `pytest-of-<user>` to mode 0700 when any
    # session starts, and as root the server runs as another user that must traverse the path.
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")  # gw0, gw1, ... under xdist
    base = Path(tempfile.mkdtemp(prefix=f"pmem-test-pg-{worker}-"))
    pgdata = base / "pgdata"
    st = embedded.start(pgdata)
    try:
        url = st.uri("postgres")
        assert url
        yield url
    finally:
        embedded.stop(pgdata)
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def template_db(pg_admin_url: str) -> str:
    """A migrated database used as the template for every test database."""
    from store.db import create_database_sql, migrate

    name = f"pmem_tmpl_{os.getpid()}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
        conn.execute(create_database_sql(name, conn.info.server_version))
    with psycopg.connect(_with_db(pg_admin_url, name), autocommit=True) as conn:
        migrate(conn)
    return name


@pytest.fixture
def db_factory(pg_admin_url: str, template_db: str) -> Iterator[Callable[[], str]]:
    """Creates fresh migrated databases on demand (cloned from the template); drops them after."""
    made: list[str] = []

    def make() -> str:
        name = f"pmem_t{os.getpid()}_{next(_counter)}"
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                    sql.Identifier(name), sql.Identifier(template_db)
                )
            )
        made.append(name)
        return _with_db(pg_admin_url, name)

    yield make
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        for name in made:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.fixture
def db_url(db_factory: Callable[[], str]) -> str:
    return db_factory()


@pytest.fixture
def db(db_url: str):
    from store.db import Database

    database = Database(db_url)
    yield database
    database.close()


@pytest.fixture
def store(db):
    from store.records import MemoryStore

    # these tests commit made-up evidence keys: the ledger check is tested in tests/security/
    return MemoryStore(db, ledger_evidence=False)


@pytest.fixture
def pmem_env(tmp_path: Path, db_url: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """Environment for CLI / flow tests: own data dir, the test database."""
    env = {
        "PMEM_DATA_DIR": str(tmp_path / "data"),
        "DATABASE_URL": db_url,
        "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        "DO_NOT_TRACK": "1",
    }
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    return env


@pytest.fixture(scope="session")
def prefect_api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """One real Prefect API server for the session (flows run for real, ~10 s start once).

    Yields its URL, so that CLI subprocesses can use it too instead of each starting a
    temporary server (12-23 s per process here)."""
    home = tmp_path_factory.mktemp("prefect-home")
    os.environ["PREFECT_HOME"] = str(home)
    from prefect.settings import PREFECT_API_URL
    from prefect.testing.utilities import prefect_test_harness

    with prefect_test_harness(server_startup_timeout=120):
        url = PREFECT_API_URL.value()
        assert url
        yield url


@pytest.fixture
def cli_env(pmem_env: dict[str, str], prefect_api: str) -> dict[str, str]:
    """Environment for `pmem` subprocesses: own data dir, the test database, the session's
    Prefect server."""
    env = dict(os.environ)
    env.update(pmem_env)
    env["PREFECT_API_URL"] = prefect_api
    env.pop("PREFECT_HOME", None)
    return env


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def api_token(db_url: str) -> Iterator[Callable[[str], str]]:
    """Creates memory-API bearer tokens in the test database: api_token(name) -> token."""
    from store.db import Database
    from store.tokens import TokenStore

    database = Database(db_url)
    yield (
        lambda name, *scopes: (
            TokenStore(database)
            .create(name, scopes or ("memory.read", "memory.propose", "memory.write"))
            .token
        )
    )
    database.close()


@pytest.fixture
def api_server(
    cli_env: dict[str, str], api_token: Callable[[str], str]
) -> Iterator[Callable[..., str]]:
    """Starts `pmem api` subprocesses (the memory API over HTTP on loopback); returns their URL.
    ``cli_env`` gets a bearer token (PMEM_MEMORY_TOKEN, client name pmem-backfill) for them."""
    cli_env.setdefault("PMEM_MEMORY_TOKEN", api_token("pmem-backfill"))
    import subprocess
    import sys
    import time

    import httpx

    procs: list[subprocess.Popen[bytes]] = []

    def start(budget: str = "100000/600s") -> str:
        port = free_port()
        env = dict(cli_env, PMEM_COMMIT_BUDGET=budget)
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli.main", "api", "--port", str(port)],
            env=env,
            cwd=PROJECT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        procs.append(proc)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + "/v1/health", timeout=1).status_code == 200:
                    return url
            except httpx.TransportError:
                time.sleep(0.1)
            if proc.poll() is not None:
                raise RuntimeError(proc.stderr.read().decode() if proc.stderr else "api died")
        raise RuntimeError("the memory API did not start")

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(10)
