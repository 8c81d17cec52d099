"""`pmem db …`: the embedded PostgreSQL."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from cli.app import ask, db_app, err_console, handle_errors, print_json, settings
from core.errors import ConfigError

# ---------------------------------------------------------------- db


@db_app.command("start")
@handle_errors
def db_start() -> None:
    """Start the embedded PostgreSQL (first start initialises it under PMEM_DATA_DIR)."""
    from store import db, embedded

    s = settings()
    if s.database_url:
        err_console.print("DATABASE_URL is set: using your own server, nothing to start.")
        return
    db.check_major_version(s)  # data made by another PostgreSQL major version: upgrade or say how
    was_running = embedded.status(s.pgdata_dir).running
    st = embedded.start(s.pgdata_dir)  # a start is announced (cli/app.py)
    db.ensure_database(st.uri() or "", s.db_name)
    if was_running:
        err_console.print(f"embedded PostgreSQL already running (pid {st.pid}) in {s.pgdata_dir}")


@db_app.command("stop")
@handle_errors
def db_stop() -> None:
    """Stop the embedded PostgreSQL."""
    from store import embedded

    s = settings()
    stopped = embedded.stop(s.pgdata_dir)
    err_console.print("stopped" if stopped else "not running")


@db_app.command("status")
@handle_errors
def db_status(as_json: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Is the database running, where, how much disk it takes, and which migrations are applied.

    Does not start a stopped embedded server (the migrations are listed while it runs); a server
    that cannot be reached is reported (`reachable: false` and the error), not an error.
    Exit 0, 1 error."""
    from core.display import human_bytes, human_time
    from core.settings import local_zone
    from store import embedded
    from store.db import Database, applied_migrations, disk_usage, migration_files

    s = settings()
    running = True
    if s.database_url:
        from store.db import redact_url

        info: dict[str, Any] = {"mode": "external", "url": redact_url(s.database_url)}
    else:
        st = embedded.status(s.pgdata_dir)
        running = st.running
        info = {
            "mode": "embedded",
            "running": st.running,
            "pid": st.pid,
            "pgdata": st.pgdata,
            "socket_dir": st.socket_dir,
            "passfile": st.passfile,
            "server_version": embedded.data_version(s.pgdata_dir),
        }
    migrations: list[dict[str, Any]] | None = None
    if running:
        from core.errors import DatabaseUnavailable

        try:
            db = Database.open(s, start=False)
        except (
            DatabaseUnavailable
        ) as err:  # a status reports an unreachable server, it does not fail
            info["reachable"], info["error"] = False, str(err)
        else:
            info["reachable"] = True
            try:
                migrations = applied_migrations(db)
                info["disk"] = disk_usage(db)
            finally:
                db.close()
    info["migrations"] = migrations
    info["migrations_known"] = len(migration_files())
    if as_json:
        print_json(info)
        return
    if info["mode"] == "external":
        typer.echo(f"your own PostgreSQL (DATABASE_URL): {info['url']}")
    else:
        state = (
            f"running (pid {info['pid']})"
            if info["running"]
            else "not running (`pmem db start` starts it)"
        )
        version = f"PostgreSQL {info['server_version']}, " if info.get("server_version") else ""
        typer.echo(f"embedded {version}{state}\n  data: {info['pgdata']}")
    if "disk" in info:
        typer.echo(
            f"  disk: {human_bytes(info['disk']['database_bytes'])} "
            f"(vectors {human_bytes(info['disk']['vector_bytes'])})"
        )
    if info.get("reachable") is False:
        typer.echo(f"  not reachable: {info['error']}")
    if migrations is None:
        why = (
            "the server is not reachable"
            if info.get("reachable") is False
            else "the server is stopped"
        )
        typer.echo(f"migrations: not read while {why} ({info['migrations_known']} known)")
        return
    zone = local_zone()
    typer.echo(f"migrations applied: {len(migrations)} of {info['migrations_known']}")
    for m in migrations:
        typer.echo(f"  {m['version']:04d} {m['name']:<24} {human_time(m['applied_at'], zone)}")


@db_app.command("restore")
@handle_errors
def db_restore(
    dump: Annotated[
        Path,
        typer.Argument(
            help="A backup written before an upgrade (<data dir>/backups/*.dump) or by `pg_dump -Fc`."
        ),
    ],
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Replace the database without asking.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Replace the database with a backup (the rollback of an upgrade).

    The application database is dropped, created empty and restored from DUMP with pg_restore;
    nothing is migrated. Stop `pmem serve` / `pmem api` first; then install the pmem version the
    backup was made with before running any other command (this version would migrate it
    again, after another backup). Exit 0 restored, 1 error or not confirmed."""
    from store.db import restore_database

    if not dump.is_file():
        raise ConfigError(f"{dump}: no such file")
    ask(f"replace the database with {dump.name}? (what it holds now is lost)", yes)
    name = restore_database(settings(), dump)
    err_console.print(
        f"database {name} restored from {dump.name}; install the pmem version it was made "
        "with before the next command"
    )
    if as_json:
        print_json({"database": name, "restored_from": str(dump)})


@db_app.command("url")
@handle_errors
def db_url() -> None:
    """Print the application database URL (starts the embedded server if needed). The embedded
    server's URL names its socket folder and its password file (`passfile=`), so it connects as it
    is: `psql "$(pmem db url)"`; the password itself is never printed."""
    from store.db import app_url

    typer.echo(app_url(settings()))


@db_app.command("init")
@handle_errors
def db_init(
    keep_running: Annotated[bool, typer.Option(help="Leave the server running.")] = False,
) -> None:
    """Create the database and apply migrations (what `make setup` runs); make every file
    under the data dir private (0700 / 0600)."""
    from store import embedded
    from store.db import Database

    s = settings()
    was_running = s.database_url is not None or embedded.status(s.pgdata_dir).running
    Database.open(s).close()
    if s.data_dir.exists():  # tighten what an older version left readable (docs/security.md)
        from core.private import make_private

        make_private(s.data_dir, root_mode=embedded.data_dir_mode() if s.embedded else 0o700)
    err_console.print("database ready (migrations applied)")
    if not was_running and not keep_running:
        embedded.stop(s.pgdata_dir)
