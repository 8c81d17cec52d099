"""Issue 29, finding 20: the application does not log in as the PostgreSQL superuser.

Against a real embedded server: every normal command's connection (``Database.open``) is the
role ``pmem_app``, no superuser, no CREATEDB / CREATEROLE, with its own scram password in the
passfile; it cannot read ``pg_authid``, read server files, run a program, create or drop a
database or an extension, drop a table or lift the append-only triggers, while the work it
does at run time (indexes, temporary tables, `pmem forget`'s VACUUM FULL of ``pg_statistic``,
a checkpoint) goes through. The migrations ran in a superuser session and the schema was handed
to the role; a database an older pmem made (all of it the superuser's) is handed over on its
next open, its rows kept."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from core.settings import Settings
from store import embedded
from store.db import Database, migrate, with_database
from store.public import PublicReader
from store.tokens import TokenStore


def _server() -> Iterator[tuple[Path, str]]:
    base = Path(tempfile.mkdtemp(prefix="pmem-roles-"))
    os.chmod(base, 0o711)  # as root the server user traverses it (pmem never changes it)
    data = base / "data"
    st = embedded.start(data / "pgdata")
    try:
        yield data, st.uri("postgres") or ""
    finally:
        embedded.stop(data / "pgdata")
        shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="module")
def server() -> Iterator[tuple[Path, str]]:
    yield from _server()


@pytest.fixture
def old_server() -> Iterator[tuple[Path, str]]:
    """A server of its own, as an older pmem left it: no application role, only the
    superuser's line in the passfile."""
    yield from _server()


def _settings(data: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> Settings:
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("PMEM_DATABASE_URL", raising=False)
    monkeypatch.setenv("PMEM_DATA_DIR", str(data))
    monkeypatch.setenv("PMEM_DB_NAME", name)
    settings = Settings()
    assert settings.db_name == name and settings.embedded
    return settings


def _refused(conn: psycopg.Connection, statement: str) -> None:
    with pytest.raises(psycopg.errors.InsufficientPrivilege):  # autocommit: one statement each
        conn.execute(statement)  # type: ignore[arg-type]


def test_the_application_role_is_no_superuser_and_cannot_do_a_superusers_things(
    server: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data, admin = server
    db = Database.open(_settings(data, "pmem_roles_a", monkeypatch), pooled=False)
    try:
        with db.connection() as conn:
            conn.autocommit = True
            row = conn.execute(
                """SELECT current_user, rolsuper, rolcreatedb, rolcreaterole, rolbypassrls
                   FROM pg_roles WHERE rolname = current_user"""
            ).fetchone()
            assert row == (embedded.APP_ROLE, False, False, False, False)
            assert embedded.read_password(data / "pgdata", embedded.APP_ROLE)
            _refused(conn, "SELECT rolpassword FROM pg_authid")
            _refused(conn, "SELECT pg_read_file('postgresql.conf')")
            _refused(conn, "COPY (SELECT 1) TO PROGRAM 'true'")
            _refused(conn, "CREATE DATABASE pmem_roles_other")
            _refused(conn, "CREATE ROLE pmem_roles_intruder")
            _refused(conn, "ALTER SYSTEM SET log_statement = 'all'")
            _refused(conn, "CREATE EXTENSION pageinspect")
            _refused(conn, "DROP EXTENSION vector")
            _refused(conn, "DROP TABLE memories")
            _refused(conn, "DROP TRIGGER memory_revisions_immutable ON memory_revisions")
            _refused(conn, "ALTER TABLE memory_revisions DISABLE TRIGGER ALL")
            _refused(
                conn,
                "CREATE OR REPLACE FUNCTION pmem_refuse_revision_change() RETURNS trigger "
                "LANGUAGE plpgsql AS $$ BEGIN RETURN NEW; END $$",
            )
            _refused(conn, "DROP EVENT TRIGGER pmem_app_ddl")
            # what it does at run time goes through
            conn.execute("CREATE INDEX IF NOT EXISTS roles_probe ON memories (title)")
            conn.execute("DROP INDEX roles_probe")
            conn.execute("CREATE TEMP TABLE roles_stage (x int)")
            conn.execute("VACUUM (FULL, ANALYZE) memories")
            conn.execute("VACUUM FULL pg_statistic")
            conn.execute("CHECKPOINT")
            # the migrations were the superuser's session; the schema is the role's now
            owners = {
                r[0]
                for r in conn.execute(
                    """SELECT DISTINCT pg_get_userbyid(relowner) FROM pg_class
                       WHERE relnamespace = 'public'::regnamespace AND relkind IN ('r', 'S')"""
                )
            }
            assert owners == {embedded.APP_ROLE}
            assert conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] > 0  # type: ignore[index]
        # /public's reader is made from the role's own connection, and reads that table only
        reader = PublicReader.for_database(db)
        assert reader.items() == []
        with reader.connect() as conn:
            assert conn.execute("SELECT current_user").fetchone() == {
                "current_user": "pmem_public_reader"
            }
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                conn.execute("SELECT 1 FROM memories")
    finally:
        db.close()
    with psycopg.connect(with_database(admin, "pmem_roles_a")) as conn:
        ext = conn.execute(
            "SELECT pg_get_userbyid(extowner) FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()
    assert ext == (embedded.SUPERUSER,)  # made by the superuser session, not by the role


def test_a_database_made_by_an_older_pmem_is_handed_over_on_its_next_open(
    old_server: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    data, admin = old_server
    assert embedded.read_password(data / "pgdata", embedded.APP_ROLE) is None
    with psycopg.connect(admin) as conn:
        assert (
            conn.execute(
                "SELECT 1 FROM pg_roles WHERE rolname = %s", (embedded.APP_ROLE,)
            ).fetchone()
            is None
        )
    name = "pmem_roles_old"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f"CREATE DATABASE {name}")
    old_url = with_database(admin, name)
    with psycopg.connect(old_url, autocommit=True) as conn:  # as the older pmem did
        migrate(conn)
    old = Database(old_url)
    made = TokenStore(old).create("kept-token")
    old.close()

    db = Database.open(_settings(data, name, monkeypatch))
    try:
        assert [t.name for t in TokenStore(db).list()] == ["kept-token"]
        assert TokenStore(db).verify(made.token) is not None
        with db.connection() as conn:
            assert conn.execute("SELECT current_user").fetchone() == (embedded.APP_ROLE,)
            left = conn.execute(
                """SELECT count(*) FROM pg_class WHERE relnamespace = 'public'::regnamespace
                   AND relkind IN ('r', 'S', 'v') AND relowner <> current_user::regrole
                   AND relname NOT IN (SELECT objid::regclass::text FROM pg_depend
                                        WHERE deptype = 'e')"""
            ).fetchone()
        assert left == (0,)
    finally:
        db.close()
    assert embedded.read_password(data / "pgdata", embedded.APP_ROLE)  # its line was added
    assert embedded.read_password(data / "pgdata")  # and the superuser's kept


def test_forget_works_as_the_application_role(
    server: tuple[Path, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`pmem forget`'s work as pmem_app: the audited revision functions (SECURITY DEFINER, now
    the role's), the erasure of a secret from the ledger and the memories, then VACUUM FULL,
    pg_statistic and the checkpoint."""
    import secrets as pysecrets

    from core.models import CommitRequest, EvidenceIn
    from store.forget import Forgetter
    from store.records import MemoryStore
    from tests.security.trust_support import seed_conversation

    data, _admin = server
    db = Database.open(_settings(data, "pmem_roles_forget", monkeypatch))
    try:
        word = "zq" + pysecrets.token_hex(6)  # an unusual word to forget, not a secret shape
        keys = seed_conversation(
            db, "chatgpt:roles-1", [("user", f"My locker code word is {word} for the gym.")]
        )
        created = MemoryStore(db).commit(
            CommitRequest(
                kind="other",
                title="Gym locker",
                canonical_summary=f"The locker code word is {word}.",
                evidence=[EvidenceIn(source_key=keys[0], text="My locker code word is")],
                idempotency_key="roles-forget-1",
            )
        )
        forgetter = Forgetter(db, pysecrets.token_bytes(32))
        erasure = forgetter.forget_secret(word, from_ledger=True)
        assert erasure is not None
        out = forgetter.vacuum(["memories", "memory_revisions", "source_messages"])
        assert out["checkpoint"] is True and out["statistics"] == "rebuilt"
        assert "pg_statistic: dead rows of the old statistics" not in out["on_disk"]
        view = MemoryStore(db).get(created.memory_id, history=True)
        assert word not in str(view.model_dump())
        with db.connection() as conn:
            bodies = conn.execute("SELECT body FROM source_messages").fetchall()
        assert all(word.encode() not in bytes(b) for (b,) in bodies)
    finally:
        db.close()
