"""Connections: the embedded server or DATABASE_URL; the application database; migrations."""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo
from psycopg_pool import ConnectionPool

from core.errors import DatabaseUnavailable, StoreError
from core.settings import Settings
from store import embedded

_log = logging.getLogger("pmem.store")
_MIGRATION = re.compile(r"^(\d{4})_([a-z0-9_]+)\.sql$")


def create_database_sql(name: str, server_version_num: int) -> sql.Composed:
    """UTF-8 with a real UTF-8 locale: in a C-locale database pg_trgm gives no trigrams for CJK."""
    if server_version_num >= 170000:
        tail = "LOCALE_PROVIDER builtin LOCALE 'C.UTF-8'"
    else:
        tail = "LOCALE_PROVIDER icu ICU_LOCALE 'und' LOCALE 'C.UTF-8'"
    return sql.SQL("CREATE DATABASE {} TEMPLATE template0 ENCODING 'UTF8' " + tail).format(
        sql.Identifier(name)
    )


def ensure_database(admin_url: str, name: str) -> None:
    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists:
            return
        version = conn.info.server_version
        conn.execute(create_database_sql(name, version))
        _log.info("created database %s", name)


def server_url(settings: Settings, *, start: bool = True) -> str:
    """The admin URL of the server (embedded: started on demand)."""
    if settings.database_url:
        return settings.database_url
    st = embedded.status(settings.pgdata_dir)
    if not st.running:
        if not start:
            raise DatabaseUnavailable(
                "the embedded PostgreSQL is not running", hint="run `pmem db start`"
            )
        st = embedded.start(settings.pgdata_dir)
    url = st.uri("postgres")
    if url is None:
        raise DatabaseUnavailable("the embedded PostgreSQL reports no socket")
    return url


def app_url(settings: Settings, *, start: bool = True) -> str:
    """URL of the application database; creates it (embedded) when missing."""
    if settings.database_url:
        return settings.database_url
    admin = server_url(settings, start=start)
    ensure_database(admin, settings.db_name)
    return with_database(admin, settings.db_name)


def with_database(url: str, name: str) -> str:
    """The same server and credentials (socket folder, passfile), another database. A URL stays
    a URL (what `pmem db url` prints: it connects with psql and libpq as it is)."""
    if url.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(url)
        return urlunsplit(parts._replace(path="/" + quote(name, safe="")))
    params = conninfo_to_dict(url)
    params["dbname"] = name
    return make_conninfo(**params)  # type: ignore[arg-type]


# ------------------------------------------------------------------ migrations


def migration_files() -> list[tuple[int, str, str]]:
    out = []
    folder = resources.files("store") / "migrations"
    for entry in sorted(folder.iterdir(), key=lambda p: p.name):
        m = _MIGRATION.match(entry.name)
        if m:
            out.append((int(m.group(1)), m.group(2), entry.read_text(encoding="utf-8")))
    return out


def migrate(conn: psycopg.Connection) -> list[int]:
    """Apply every migration not yet recorded, each in its own transaction. Returns those applied."""
    applied_now: list[int] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('pmem-migrate'))")
        conn.execute(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                   version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,
                   applied_at timestamptz NOT NULL DEFAULT now())"""
        )
        done = {
            v: c for v, c in conn.execute("SELECT version, checksum FROM schema_migrations")
        }
        for version, name, body in migration_files():
            checksum = hashlib.sha256(body.encode()).hexdigest()
            if version in done:
                if done[version] != checksum:
                    raise StoreError(
                        f"migration {version:04d}_{name} changed after it was applied; "
                        "add a new numbered migration instead"
                    )
                continue
            conn.execute(body)  # type: ignore[arg-type]
            conn.execute(
                "INSERT INTO schema_migrations (version, name, checksum) VALUES (%s, %s, %s)",
                (version, name, checksum),
            )
            applied_now.append(version)
    return applied_now


class Database:
    """A small pool over the application database, migrated on open."""

    def __init__(self, url: str, *, max_size: int = 8) -> None:
        self.url = url
        try:
            with psycopg.connect(url, autocommit=True) as conn:
                migrate(conn)
        except psycopg.OperationalError as err:
            raise DatabaseUnavailable(f"cannot connect to PostgreSQL ({err.sqlstate or 'no sqlstate'})") from err
        self.pool = ConnectionPool(url, min_size=1, max_size=max_size, open=True, kwargs={"autocommit": False})

    @classmethod
    def open(cls, settings: Settings, *, start: bool = True) -> Database:
        return cls(app_url(settings, start=start))

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        with self.pool.connection() as conn:
            yield conn

    def close(self) -> None:
        self.pool.close()

    def __enter__(self) -> Database:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def redact_url(url: str) -> str:
    params = conninfo_to_dict(url)
    if "password" in params:
        params["password"] = "***"
    return make_conninfo(**params)  # type: ignore[arg-type]




# ------------------------------------------------------------------ what the owner sees


def applied_migrations(db: Database) -> list[dict[str, object]]:
    """Every applied migration, oldest first: version, name, when (`pmem db status`)."""
    with db.connection() as conn:
        rows = conn.execute(
            "SELECT version, name, applied_at FROM schema_migrations ORDER BY version"
        ).fetchall()
    return [{"version": v, "name": n, "applied_at": at} for v, n, at in rows]


def pending_migrations(conn: psycopg.Connection) -> list[tuple[int, str]]:
    """The migrations this version would apply (none recorded yet: the schema is new)."""
    exists = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()
    done: set[int] = set()
    if exists and exists[0]:
        done = {v for (v,) in conn.execute("SELECT version FROM schema_migrations")}
    return [(v, n) for v, n, _ in migration_files() if v not in done]


def disk_usage(db: Database) -> dict[str, int]:
    """Bytes the database takes on disk, and of it the vector tables (with their indexes)."""
    with db.connection() as conn:
        row = conn.execute(
            """SELECT pg_database_size(current_database()),
                      coalesce((SELECT sum(pg_total_relation_size(c.oid)) FROM pg_class c
                                JOIN pg_namespace n ON n.oid = c.relnamespace
                                WHERE c.relkind = 'r' AND n.nspname = current_schema()
                                  AND c.relname LIKE '%%embeddings'), 0)"""
        ).fetchone()
    assert row is not None
    return {"database_bytes": int(row[0]), "vector_bytes": int(row[1])}


def fresh_sibling_database(settings: Settings, suffix: str) -> tuple[str, str]:
    """A database next to the application database, on the same server (no other server is
    started), dropped and created empty: ``(name, url)``. `pmem demo` works in one."""
    if settings.database_url:
        admin = settings.database_url
        current = conninfo_to_dict(admin).get("dbname") or settings.db_name
    else:
        admin = server_url(settings)
        current = settings.db_name
    name = f"{current}{suffix}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))
        conn.execute(create_database_sql(name, conn.info.server_version))
    return name, with_database(admin, name)
