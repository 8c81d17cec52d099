"""The private part of a backfill's options, handed from the CLI to the flow it starts by a
handle (ADR 0032): ``--redraft`` keys and ``--exclude`` rules name a person's conversations
(a chat's key, a title glob), and Prefect keeps every flow parameter in its database, so they
never travel as parameters. The CLI writes them to ``<data dir>/requests/<id>.json`` (0600,
written atomically with a checksum), passes the random ``id`` as the flow's ``request``
parameter, and removes the file once the flow has returned; the flow reads it by that id. One
a killed CLI left behind is removed by the next ``put`` after a day."""

from __future__ import annotations

import contextlib
import re
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from core.errors import ConfigError, ResultFileError
from state.files import read_checked, write_atomic

REQUEST_SCHEMA = "pmem.run-request/1"
_ID = re.compile(r"^[0-9a-f]{16}$")


@dataclass(frozen=True)
class Request:
    """What a run was asked for that names conversations: the keys to draft again (None: not
    --redraft; empty: the export's) and the exclusion rules' text."""

    redraft: tuple[str, ...] | None = None
    excludes: tuple[str, ...] = ()


def _path(data_dir: Path, request_id: str) -> Path:
    if not _ID.match(request_id):  # a handle, never a path
        raise ConfigError(f"not a run request id: {request_id[:40]!r}")
    return data_dir / "requests" / f"{request_id}.json"


def put(data_dir: Path, request: Request) -> str | None:
    """Store ``request`` for the flow this process starts; its id, or None when there is
    nothing private to hand over."""
    if request.redraft is None and not request.excludes:
        return None
    _drop_stale(data_dir)
    request_id = secrets.token_hex(8)
    body = {
        "request_id": request_id,
        "redraft": None if request.redraft is None else list(request.redraft),
        "excludes": list(request.excludes),
    }
    write_atomic(_path(data_dir, request_id), body, REQUEST_SCHEMA)
    return request_id


STALE_SECONDS = 86_400.0  # a flow reads its request as it starts: older ones were left by a kill


def _drop_stale(data_dir: Path) -> None:
    """Remove the requests a killed CLI left behind (older than a day)."""
    folder = data_dir / "requests"
    if not folder.is_dir():
        return
    now = time.time()
    for path in folder.glob("*.json"):
        with contextlib.suppress(OSError):
            if now - path.stat().st_mtime > STALE_SECONDS:
                path.unlink()


def read(data_dir: Path, request_id: str | None) -> Request:
    """The request of ``request_id`` (None: nothing was handed over). A missing or damaged file
    is an error: running without the owner's --exclude rules would draft what they left out."""
    if request_id is None:
        return Request()
    try:
        doc = read_checked(_path(data_dir, request_id), REQUEST_SCHEMA)
    except ResultFileError:
        raise ConfigError(
            f"run request {request_id} is missing or damaged",
            hint="run the same pmem backfill command again",
        ) from None
    redraft = doc.get("redraft")
    return Request(
        redraft=None if redraft is None else tuple(str(k) for k in redraft),
        excludes=tuple(str(r) for r in doc.get("excludes") or ()),
    )


def drop(data_dir: Path, request_id: str | None) -> None:
    """Remove a request once its flow has returned."""
    if request_id is not None:
        _path(data_dir, request_id).unlink(missing_ok=True)
