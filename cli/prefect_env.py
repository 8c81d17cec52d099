"""The Prefect side of a command that runs a flow: its environment under the data dir (the
managed local server, telemetry off) and a quiet console. Shared by `pmem backfill`, the pool
commands, `pmem summary update` and `pmem prefect …`; Prefect itself is imported lazily. And a
backfill's options as its flows take them: plain values as parameters, what names
conversations as a run request (state/requests.py) the flow reads by id."""

from __future__ import annotations

import logging
import os
from typing import Any

from cli.app import err_console
from core.settings import Settings


def _prefect_env(settings: Settings) -> None:
    """Prefect reads its settings on import: keep its home under the data dir, telemetry off, and
    point it at the local Prefect server pmem manages under the data dir (started on first use,
    then reused: no temporary server started per command). PREFECT_API_URL set: that server is used.
    PMEM_PREFECT=ephemeral: Prefect's own temporary server, as before."""
    # Prefect's temporary server dies silently (start-up "timeout") when its home is missing
    settings.prefect_home.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("PREFECT_HOME", str(settings.prefect_home))
    os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
    os.environ.setdefault("DO_NOT_TRACK", "1")
    os.environ.setdefault("PREFECT_LOGGING_LEVEL", "WARNING")
    # the first start migrates its SQLite database: slow on a small machine
    os.environ.setdefault("PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS", "120")
    mode = os.environ.get("PMEM_PREFECT", "managed").strip().lower() or "managed"
    if mode not in ("managed", "ephemeral"):
        from core.errors import ConfigError

        raise ConfigError(f"PMEM_PREFECT must be 'managed' or 'ephemeral', not {mode!r}")
    if mode == "managed" and not os.environ.get("PREFECT_API_URL"):
        from flows.prefect_server import ensure_server

        def started(url: str, pid: int) -> None:
            err_console.print(
                f"started the local Prefect server {url.removesuffix('/api')} (pid {pid}); "
                "it keeps running for the next commands: `pmem prefect stop` stops it"
            )

        os.environ["PREFECT_API_URL"] = ensure_server(settings, on_start=started)
        from flows.prefect_server import client_env

        os.environ.update(client_env(settings))  # its API auth string (flows/prefect_server.py)


def quiet_prefect_console() -> None:
    """Prefect prints every run's logs and a full traceback on failure to the terminal; the CLI
    prints its own summary and one clear error line instead. Prefect's API still gets its logs
    (ids and counts only); `pmem -v` keeps the console output."""
    if logging.getLogger().level <= logging.INFO:  # --verbose
        return
    for name in [
        n for n in logging.root.manager.loggerDict if n == "prefect" or n.startswith("prefect.")
    ]:
        for handler in logging.getLogger(name).handlers:
            if isinstance(handler, logging.StreamHandler):
                handler.setLevel(logging.CRITICAL)
    logging.getLogger("prefect").propagate = False  # nor through the CLI's own stderr handler


def flow_parameters(a: dict[str, Any]) -> dict[str, Any]:
    """The run's plain options as the backfill flows' parameters (the in-process flow and a
    pool run's workers alike); what names conversations goes by a request id instead."""
    return {
        "max_cost": a["max_cost"],
        "price": a["price"],
        "include_others": a.get("include_others", False),
        "max_wait": a["max_wait"],
    }


def run_request(a: dict[str, Any]) -> Any:
    from state.requests import Request

    redraft = a["redraft"]
    return Request(
        redraft=None if redraft is None else tuple(redraft), excludes=tuple(a["exclude"])
    )


def run_options(a: dict[str, Any]) -> Any:
    """The run's options for a pipeline this process opens (the estimate, a pool run's
    submitter)."""
    from flows.resources import RunOptions

    return RunOptions(
        pending=a["export"] is None,
        max_cost=a["max_cost"],
        price=a["parsed_price"],
        redraft=tuple(a["redraft"]) if a["redraft"] is not None else None,
        include_others=a.get("include_others", False),
    )
