"""A managed local Prefect server under the data dir, and the sweep that marks killed runs crashed.

Prefect's temporary server costs 12-23 s per process and is orphaned (~200 MB) when the process
is killed; ``flow.serve(cron=…)`` without a server never runs. So `pmem` keeps one server
running under ``<data dir>/prefect`` (as it does the database), started on first use:

* ``prefect server start --host 127.0.0.1 --port P`` in its own session (it outlives the CLI
  call), with ``PREFECT_HOME`` under the data dir and analytics off, its output in
  ``prefect/server.log``;
* ``prefect/server.json`` records ``{pid, port, started_at, start_ticks}``; the port is chosen
  once per data dir (a stable port derived from the path, or a free one when that is taken) and
  remembered there, so the UI keeps its address across restarts;
* a state file whose process is gone (or whose pid now belongs to another process) is stale:
  the next call starts a fresh server; a port in use by someone else makes us pick a free one;
* ``prefect/server.lock`` (flock) serialises concurrent CLI calls, so one server per data dir;
* a run ``launch``-es the server first and starts the database while it boots (a fresh data dir
  pays for both first starts at once); ``ensure_server`` then waits the full start-up time for a
  server launched moments ago, and announces it once healthy.

* it listens on 127.0.0.1 only, with Prefect's API authentication: the server gets
  ``PREFECT_SERVER_API_AUTH_STRING`` and every pmem process talking to it
  ``PREFECT_API_AUTH_STRING`` (``client_env``), a random string kept in ``prefect/api-auth``
  (0600; the UI asks for it at login). Without it a request is 401 (only ``GET /api/health``
  answers, for the health check). CORS allows the server's own origin only, so no web page
  reads or drives the API from elsewhere. A server started by an older pmem (no auth) is
  restarted;
* its UI is pointed at itself: ``PREFECT_UI_API_URL`` is the server's own ``/api`` (without it the
  UI served at ``http://127.0.0.1:PORT/`` looks for an API on Prefect's default port 4200 and says
  "Unable to connect"); ``ui_url`` is what `pmem prefect status` prints;
* its home is private (0700 / 0600): it starts with umask 077 and its files are tightened after
  every start (``prefect.db``, the log, profiles).

When ``PREFECT_API_URL`` is already set, that server is used and nothing is managed.

Runs are tagged ``pmem-data:<hash of the data dir>`` and ``pmem-proc:<host>:<pid>:<start>``
(ids only, no text). A run that a kill left RUNNING keeps its process tag, so the next run can
see that the process is gone and mark the run (and its unfinished task runs) Crashed.

This module imports nothing of Prefect at import time: the CLI sets ``PREFECT_API_URL`` from
``ensure_server`` before Prefect is first imported.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import re
import secrets
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from core.errors import PmemError
from core.private import make_private, open_private, private_dir, write_private
from core.settings import Settings

_log = logging.getLogger("pmem.prefect")

HOST = "127.0.0.1"
STATE_FILE = "server.json"
LOG_FILE = "server.log"
LOCK_FILE = "server.lock"
AUTH_FILE = "api-auth"
# recorded in server.json: a server with an older one is restarted (1: API auth; 2: the UI is
# pointed at the server itself)
AUTH_VERSION = 2
PORT_BASE, PORT_SPAN = 4210, 700  # the preferred port of a data dir: 4210-4909
DATA_TAG = "pmem-data:"
PROC_TAG = "pmem-proc:"
TRACKED_FLOWS = ("backfill", "reimport")
UNFINISHED = ("RUNNING", "PENDING", "CANCELLING")

# A tiny launcher starts the server in a new session and exits at once: the server is nobody's
# child (no zombie in the CLI, no "still running" warning), and it outlives the CLI call.
_LAUNCHER = (
    "import subprocess, sys\n"
    "log = open(sys.argv[1], 'ab')\n"
    "p = subprocess.Popen(sys.argv[2:], stdin=subprocess.DEVNULL, stdout=log, stderr=log,\n"
    "                     start_new_session=True, close_fds=True)\n"
    "print(p.pid, flush=True)\n"
)


class PrefectServerError(PmemError):
    """The managed Prefect server did not start or stop."""


@dataclass(frozen=True)
class ServerInfo:
    managed: bool  # False: PREFECT_API_URL points at a server we do not manage
    running: bool
    url: str | None
    pid: int | None
    port: int | None
    home: str
    log: str
    started_at: str | None = None
    ui_url: str | None = None  # http://127.0.0.1:PORT/
    data_dir: str | None = None
    auth_file: str | None = None  # the UI asks for the string in this file (0600) at login

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


# ---------------------------------------------------------------- processes


def _stat_fields(pid: int) -> list[str] | None:
    """Fields of /proc/<pid>/stat after the command name (state is [0]); None without /proc."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return [] if Path("/proc/self/stat").exists() else None  # [] = no such process
    except OSError:
        return None
    return raw[raw.rfind(")") + 2 :].split()


def process_start(pid: int) -> int | None:
    """The process's start time in clock ticks since boot (Linux), to tell a reused pid apart."""
    fields = _stat_fields(pid)
    if not fields or len(fields) < 20:
        return None
    return int(fields[19])


def process_alive(pid: int, start: int | None = None) -> bool:
    """True when ``pid`` runs (not a zombie) and, if ``start`` is known, is the same process."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        pass
    fields = _stat_fields(pid)
    if fields is None:  # no /proc (macOS): the signal test is all we have
        return True
    if not fields or fields[0] in ("Z", "X"):
        return False
    return not start or int(fields[19]) == start


def _cmdline(pid: int) -> str | None:
    try:
        return (
            Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        )
    except OSError:
        return None


# ---------------------------------------------------------------- state file and lock


def api_url(port: int) -> str:
    return f"http://{HOST}:{port}/api"


def ui_url(port: int) -> str:
    """The managed server's UI: its root, on the loopback address (not ``localhost``)."""
    return f"http://{HOST}:{port}/"


def ui_base(api: str | None) -> str | None:
    """The UI URL that goes with an API URL (``…/api`` → ``…/``)."""
    if not api:
        return None
    return api.rstrip("/").removesuffix("/api") + "/"


def flow_run_url(flow_run_id: str, api: str | None = None) -> str | None:
    """The UI page of one flow run."""
    base = ui_base(api or os.environ.get("PREFECT_API_URL"))
    return f"{base}runs/flow-run/{flow_run_id}" if base else None


def external_api_url() -> str | None:
    return os.environ.get("PREFECT_API_URL") or None


def _read_state(home: Path) -> dict[str, Any]:
    try:
        data = json.loads((home / STATE_FILE).read_text())
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


def _write_state(home: Path, state: dict[str, Any]) -> None:
    write_private(home / STATE_FILE, json.dumps(state, indent=1, sort_keys=True))


def auth_string(settings: Settings) -> str:
    """The managed server's API auth string (``prefect/api-auth``, 0600), made on first use."""
    home = private_dir(settings.prefect_home)
    path = home / AUTH_FILE
    try:
        value = path.read_text().strip()
    except FileNotFoundError:
        value = ""
    if not value:
        value = f"pmem:{secrets.token_urlsafe(32)}"
        write_private(path, value + "\n")
    return value


def client_env(settings: Settings) -> dict[str, str]:
    """What a process needs in its environment (before Prefect is imported) to talk to the
    managed server: its auth string."""
    return {"PREFECT_API_AUTH_STRING": auth_string(settings)}


@contextlib.contextmanager
def _locked(home: Path) -> Iterator[None]:
    private_dir(home)
    with open_private(home / LOCK_FILE, "a") as f:
        try:
            import fcntl
        except ImportError:  # Windows: no flock; concurrent first starts are the user's lookout
            yield
            return
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def _our_server(state: dict[str, Any]) -> bool:
    """The recorded pid is alive, is the process we started, and runs a Prefect server."""
    pid, start = state.get("pid"), state.get("start_ticks")
    if not isinstance(pid, int) or not process_alive(pid, start):
        return False
    cmd = _cmdline(pid)
    return cmd is None or ("prefect" in cmd and "server" in cmd)


# ---------------------------------------------------------------- ports and health


def preferred_port(settings: Settings) -> int:
    digest = hashlib.sha256(str(settings.data_dir).encode()).digest()
    return PORT_BASE + int.from_bytes(digest[:4], "big") % PORT_SPAN


def port_free(port: int) -> bool:
    """Can a server listen on HOST:port? (SO_REUSEADDR, as uvicorn: TIME_WAIT does not count.)"""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((HOST, port))
        except OSError:
            return False
    return True


def _any_free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((HOST, 0))
        return int(s.getsockname()[1])


def healthy(port: int, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"{api_url(port)}/health", timeout=timeout) as r:  # noqa: S310 (loopback)
            return r.status == 200 and r.read().strip() == b"true"
    except (OSError, urllib.error.URLError, ValueError):
        return False


def _startup_timeout() -> float:
    return float(os.environ.get("PMEM_PREFECT_STARTUP_TIMEOUT", "120"))


def _log_tail(path: Path, lines: int = 5) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(text[-lines:])


# ---------------------------------------------------------------- start / stop / status


_SECRET_ENV = re.compile(r"(API_KEY|TOKEN|SECRET|PASSWORD|DATABASE_URL)$", re.IGNORECASE)


def _spawn(home: Path, port: int, auth: str) -> int:
    # the server needs none of the user's keys or database URLs: keep them out of its environment
    env = {
        k: v
        for k, v in os.environ.items()
        if not _SECRET_ENV.search(k)
        and k != "PREFECT_API_URL"
        and "AUTH_STRING" not in k
        and "CORS" not in k
    }
    env.update(
        PREFECT_HOME=str(home),
        PREFECT_SERVER_ANALYTICS_ENABLED="false",
        DO_NOT_TRACK="1",
        PREFECT_SERVER_LOGGING_LEVEL=env.get("PREFECT_SERVER_LOGGING_LEVEL", "WARNING"),
        # API authentication (Prefect 3's basic-auth string) and no cross-origin access: only
        # the UI's own origin
        PREFECT_SERVER_API_AUTH_STRING=auth,
        PREFECT_API_AUTH_STRING=auth,
        PREFECT_SERVER_API_CORS_ALLOWED_ORIGINS=f"http://{HOST}:{port}",
        # the UI's API is this server, not Prefect's default port 4200
        PREFECT_UI_API_URL=api_url(port),
        PREFECT_UI_URL=ui_url(port),
    )
    log = home / LOG_FILE
    with open_private(log, "wb"):  # the log of the latest start only
        pass
    cmd = [
        sys.executable,
        "-m",
        "prefect",
        "server",
        "start",
        "--host",
        HOST,
        "--port",
        str(port),
        "--analytics-off",
    ]
    out = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, str(log), *cmd],
        env=env,
        cwd=home,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        umask=0o077,
    )
    if out.returncode != 0 or not out.stdout.strip().isdigit():
        raise PrefectServerError(
            f"could not launch the Prefect server (exit {out.returncode})", hint=f"see {log}"
        )
    return int(out.stdout.strip())


def _wait_healthy(pid: int, port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if healthy(port, timeout=1.0) and process_alive(pid):
            return True
        if not process_alive(pid):
            return False
        time.sleep(0.2)
    return False


def _terminate(pid: int, start: int | None = None, timeout: float = 20.0) -> bool:
    """SIGTERM the server's process group, SIGKILL after ``timeout``; True if it was running."""
    if not process_alive(pid, start):
        return False
    for sig in (signal.SIGTERM, getattr(signal, "SIGKILL", signal.SIGTERM)):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            try:
                os.killpg(pid, sig)  # the server leads its own session (start_new_session)
            except (ProcessLookupError, PermissionError, AttributeError):
                os.kill(pid, sig)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not process_alive(pid, start):
                return True
            time.sleep(0.1)
    return not process_alive(pid, start)


def ensure_server(
    settings: Settings,
    *,
    timeout: float | None = None,
    on_start: Callable[[str, int], None] | None = None,
) -> str:
    """The API URL of a healthy Prefect server for this data dir: PREFECT_API_URL when set,
    else the managed server (reused when healthy, started when not: then ``on_start(url, pid)``)."""
    external = external_api_url()
    if external:
        return external
    home = settings.prefect_home
    timeout = _startup_timeout() if timeout is None else timeout
    with _locked(home):
        state = _read_state(home)
        auth = auth_string(settings)
        if _our_server(state) and state.get("auth") != AUTH_VERSION:
            _log.warning(
                "Prefect server pid %s was started by an older pmem (no API authentication "
                "or a UI pointed elsewhere); restarting it",
                state["pid"],
            )
            _terminate(state["pid"], state.get("start_ticks"))
        elif _our_server(state):
            port = int(state["port"])
            # a server launched moments ago (``launch``) is still starting: give it the full time
            wait = timeout if _starting(state, timeout) else min(timeout, 30.0)
            if healthy(port) or _wait_healthy(state["pid"], port, wait):
                if state.get("launched"):
                    _write_state(home, {k: v for k, v in state.items() if k != "launched"})
                    make_private(home)
                    _log.info("started the Prefect server pid %s on port %s", state["pid"], port)
                    if on_start is not None:
                        on_start(api_url(port), state["pid"])
                return api_url(port)
            _log.warning("Prefect server pid %s does not answer; restarting it", state["pid"])
            _terminate(state["pid"], state.get("start_ticks"))
        elif state.get("pid"):
            _log.info("Prefect server pid %s is gone; starting a new one", state["pid"])
        remembered = state.get("port") if isinstance(state.get("port"), int) else None
        last_error = ""
        for attempt in range(3):
            wanted = remembered or preferred_port(settings)
            port = wanted if attempt == 0 and port_free(wanted) else _any_free_port()
            pid = _spawn(home, port, auth)
            started = datetime.now(UTC).isoformat()
            state = {
                "pid": pid,
                "port": port,
                "start_ticks": process_start(pid),
                "started_at": started,
                "host": HOST,
                "auth": AUTH_VERSION,
            }
            _write_state(home, state)
            if _wait_healthy(pid, port, timeout):
                make_private(home)  # what an older version or a loose umask left readable
                _log.info("started the Prefect server pid %s on port %s", pid, port)
                if on_start is not None:
                    on_start(api_url(port), pid)
                return api_url(port)
            last_error = _log_tail(home / LOG_FILE)
            _terminate(pid, state["start_ticks"])
            _write_state(home, {"pid": None, "port": port})
            if "address already in use" not in last_error.lower():
                break
            remembered = None  # someone took the port meanwhile: pick a free one
        raise PrefectServerError(
            f"the Prefect server did not become healthy within {timeout:.0f}s",
            hint=f"see {home / LOG_FILE}; PMEM_PREFECT=ephemeral uses Prefect's temporary server instead",
        )


def _starting(state: dict[str, Any], timeout: float) -> bool:
    try:
        started = datetime.fromisoformat(str(state.get("started_at")))
    except ValueError:
        return False
    return (datetime.now(UTC) - started).total_seconds() < timeout


def launch(settings: Settings) -> bool:
    """Start the managed server in the background and return at once (True if one was launched):
    a run launches it first and starts the database while Prefect boots; ``ensure_server`` then
    waits for it. Nothing when PREFECT_API_URL is set or a current server runs."""
    if external_api_url():
        return False
    home = settings.prefect_home
    with _locked(home):
        state = _read_state(home)
        if _our_server(state):  # running (or an older pmem's, which ensure_server restarts)
            return False
        remembered = state.get("port") if isinstance(state.get("port"), int) else None
        wanted = remembered or preferred_port(settings)
        port = wanted if port_free(wanted) else _any_free_port()
        pid = _spawn(home, port, auth_string(settings))
        _write_state(
            home,
            {
                "pid": pid,
                "port": port,
                "start_ticks": process_start(pid),
                "host": HOST,
                "started_at": datetime.now(UTC).isoformat(),
                "auth": AUTH_VERSION,
                "launched": True,
            },
        )
        return True


def stop_server(settings: Settings, timeout: float = 20.0) -> bool:
    """Stop the managed server; True if one was running. The port stays remembered."""
    home = settings.prefect_home
    if not home.exists():
        return False
    with _locked(home):
        state = _read_state(home)
        running = _our_server(state)
        if running:
            _terminate(state["pid"], state.get("start_ticks"), timeout=timeout)
        if state:
            _write_state(home, {"pid": None, "port": state.get("port")})
        return running


def server_status(settings: Settings) -> ServerInfo:
    home = settings.prefect_home
    log = str(home / LOG_FILE)
    external = external_api_url()
    if external:
        return ServerInfo(
            managed=False,
            running=True,
            url=external,
            pid=None,
            port=None,
            home=str(home),
            log=log,
            ui_url=ui_base(external),
            data_dir=str(settings.data_dir),
        )
    state = _read_state(home)
    running = _our_server(state) and healthy(int(state["port"]))
    port = state.get("port") if isinstance(state.get("port"), int) else None
    auth = home / AUTH_FILE
    return ServerInfo(
        managed=True,
        running=running,
        url=api_url(port) if running and port else None,
        pid=state.get("pid") if running else None,
        port=port,
        home=str(home),
        log=log,
        started_at=state.get("started_at") if running else None,
        ui_url=ui_url(port) if running and port else None,
        data_dir=str(settings.data_dir),
        auth_file=str(auth) if isinstance(state.get("auth"), int) and auth.exists() else None,
    )


# ---------------------------------------------------------------- run tags and the crash sweep


def data_tag(settings: Settings) -> str:
    return DATA_TAG + hashlib.sha256(str(settings.data_dir).encode()).hexdigest()[:12]


def _host_id() -> str:
    return hashlib.sha256(socket.gethostname().encode()).hexdigest()[:8]


def proc_tag(pid: int | None = None) -> str:
    pid = os.getpid() if pid is None else pid
    return f"{PROC_TAG}{_host_id()}:{pid}:{process_start(pid) or 0}"


def _owner(tags: list[str]) -> tuple[str, int, int] | None:
    for t in tags:
        if t.startswith(PROC_TAG):
            host, pid, start = (t[len(PROC_TAG) :].split(":") + ["", "", ""])[:3]
            if pid.isdigit() and start.isdigit():
                return host, int(pid), int(start)
    return None


@contextlib.contextmanager
def tracked_runs(settings: Settings) -> Iterator[None]:
    """Flow and task runs created inside carry this data dir's and this process's tags."""
    from prefect import tags

    with tags(data_tag(settings), proc_tag()):
        yield


def claim_current_run(settings: Settings) -> str | None:
    """Inside a flow run created elsewhere (a deployment run), add our tags to it; its id."""
    from prefect import get_client
    from prefect.context import FlowRunContext

    ctx = FlowRunContext.get()
    if ctx is None or ctx.flow_run is None:
        return None
    run = ctx.flow_run
    wanted = [t for t in (data_tag(settings), proc_tag()) if t not in run.tags]
    keep = [t for t in run.tags if not t.startswith(PROC_TAG)]
    if wanted:
        with get_client(sync_client=True) as client:
            client.update_flow_run(run.id, tags=sorted(set(keep) | set(wanted)))
    return str(run.id)


def mark_crashed_runs(settings: Settings, exclude: set[str] | None = None) -> list[str]:
    """Mark this data dir's unfinished `backfill` / `reimport` runs whose process is gone as
    Crashed (and their unfinished task runs); returns their ids. Runs of a live process, of
    another host, or without a process tag are left alone."""
    from prefect import get_client
    from prefect.client.schemas.filters import (
        FlowFilter,
        FlowFilterName,
        FlowRunFilter,
        FlowRunFilterState,
        FlowRunFilterStateType,
        FlowRunFilterTags,
        TaskRunFilter,
        TaskRunFilterFlowRunId,
        TaskRunFilterState,
        TaskRunFilterStateType,
    )
    from prefect.client.schemas.objects import StateType
    from prefect.states import Crashed

    exclude = exclude or set()
    unfinished = [StateType(s) for s in UNFINISHED]
    host = _host_id()
    crashed: list[str] = []
    with get_client(sync_client=True) as client:
        runs = client.read_flow_runs(
            flow_filter=FlowFilter(name=FlowFilterName(any_=list(TRACKED_FLOWS))),
            flow_run_filter=FlowRunFilter(
                state=FlowRunFilterState(type=FlowRunFilterStateType(any_=unfinished)),
                tags=FlowRunFilterTags(all_=[data_tag(settings)]),
            ),
            limit=200,
        )
        for run in runs:
            owner = _owner(run.tags)
            if str(run.id) in exclude or owner is None or owner[0] != host:
                continue
            _, pid, start = owner
            if process_alive(pid, start or None):
                continue
            message = f"process {pid} is gone (killed); marked crashed by the next pmem run"
            client.set_flow_run_state(run.id, Crashed(message=message), force=True)
            tasks = client.read_task_runs(
                task_run_filter=TaskRunFilter(
                    flow_run_id=TaskRunFilterFlowRunId(any_=[run.id]),
                    state=TaskRunFilterState(type=TaskRunFilterStateType(any_=unfinished)),
                )
            )
            for t in tasks:
                client.set_task_run_state(t.id, Crashed(message=message), force=True)
            crashed.append(str(run.id))
            _log.warning(
                "flow run %s (pid %s) was left unfinished by a kill: marked crashed", run.id, pid
            )
    return crashed


def sweep_crashed_runs(settings: Settings, exclude: set[str] | None = None) -> list[str]:
    """``mark_crashed_runs`` that never stops a run: an API hiccup is logged and ignored."""
    try:
        return mark_crashed_runs(settings, exclude)
    except Exception as err:  # noqa: BLE001 (housekeeping must not fail the run)
        _log.warning("could not check for crashed flow runs: %s", type(err).__name__)
        return []
