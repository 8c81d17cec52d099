"""Run the memory API with uvicorn: in a background thread (tests, benchmarks) or in the
foreground (`pmem api`)."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Literal

import uvicorn

from memory_api.app import create_app
from memory_api.auth import check_bind
from memory_api.limits import uvicorn_limits
from store.db import Database


@dataclass
class RunningServer:
    url: str
    server: uvicorn.Server
    thread: threading.Thread

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def serve_in_thread(
    db: Database,
    *,
    budget: tuple[int, float],
    host: str = "127.0.0.1",
    port: int = 0,
    public_url: str | None = None,
) -> RunningServer:
    check_bind(host, public_url)
    config = uvicorn.Config(
        create_app(db, budget=budget, public_url=public_url),
        host=host,
        port=port,
        log_level="warning",
        access_log=False,
        lifespan="off",
        **uvicorn_limits(),
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="memory-api", daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the memory API did not start")
        time.sleep(0.02)
    sock = server.servers[0].sockets[0]
    bound_host, bound_port = sock.getsockname()[:2]
    return RunningServer(f"http://{bound_host}:{bound_port}", server, thread)


def serve_forever(
    db: Database, *, budget: tuple[int, float], host: str, port: int, public_url: str | None = None
) -> None:
    """Loopback only, unless ``public_url`` names the TLS proxy in front (memory_api/auth.py)."""
    check_bind(host, public_url)
    uvicorn.run(
        create_app(db, budget=budget, public_url=public_url),
        host=host,
        port=port,
        log_level="info",
        access_log=False,
        server_header=False,
        **uvicorn_limits(),
    )


def run_app_in_thread(
    app: object,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    name: str = "pmem-http",
    lifespan: Literal["auto", "on", "off"] = "on",
    log_level: str = "warning",
) -> RunningServer:
    """Any of our ASGI apps (the remote server, `pmem serve --http`) under uvicorn in a thread;
    no access log (it would record query strings); uvicorn's records go to the root logger."""
    config = uvicorn.Config(
        app,  # type: ignore[arg-type]
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        lifespan=lifespan,
        server_header=False,
        log_config=None,
        **uvicorn_limits(),
    )
    server = uvicorn.Server(config)
    _no_access_log()
    thread = threading.Thread(target=server.run, name=name, daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError(f"{name} did not start")
        time.sleep(0.02)
    sock = server.servers[0].sockets[0]
    bound_host, bound_port = sock.getsockname()[:2]
    return RunningServer(f"http://{bound_host}:{bound_port}", server, thread)


def run_app_forever(app: object, *, host: str, port: int, log_level: str = "info") -> None:
    """Any of our ASGI apps in the foreground; no access log, no server header."""
    config = uvicorn.Config(
        app,  # type: ignore[arg-type]
        host=host,
        port=port,
        log_level=log_level,
        access_log=False,
        server_header=False,
        log_config=None,
        **uvicorn_limits(),
    )
    server = uvicorn.Server(config)
    _no_access_log()
    server.run()


def _no_access_log() -> None:
    """uvicorn's access log records every request line, query string included: off for good
    (``access_log=False`` only stops propagation, which other logging set-up can undo)."""
    import logging

    access = logging.getLogger("uvicorn.access")
    access.handlers = []
    access.propagate = False
    access.disabled = True
