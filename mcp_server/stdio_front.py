"""The stdio wire's front door: `pmem serve` answers ``initialize`` within a fraction of a second
of its start, while the ``mcp`` SDK (about 0.35 s to import on a quiet machine, several seconds
under load) and the tools load behind it (issue 30 item 1, ADR 0043).

Standard library only, so that it runs before anything heavy is imported:

1. ``StdioFront.start()`` takes private copies of the wire (fd 0 and 1) and points fd 0 at the
   null device and fd 1 at stderr, as the SDK's own stdio transport does, so stray output of a
   library never corrupts the protocol.
2. A thread reads the wire line by line. When the first message is a well-formed
   ``initialize`` request, it answers at once with ``mcp_server.identity.initialize_result``
   (what the SDK's server would answer: a test keeps the two equal). Every line, that one
   included, is queued for the SDK.
3. Once the SDK has loaded, its stdio transport reads the queue (``lines()``) and writes through
   ``output()``, which drops the SDK's own answer to that ``initialize`` (already sent) and
   passes everything else. Should the two answers ever differ, a warning names the keys on
   stderr (server metadata only, never a message's text).

Nothing is answered early but the handshake: ``tools/list`` and every call wait for the SDK,
in the order they came.
"""

from __future__ import annotations

import json
import logging
import os
import queue
import sys
import threading
from typing import IO, Any

from mcp_server.identity import initialize_result

log = logging.getLogger(__name__)


class StdioFront:
    """The wire, held from the process's first moments until the SDK takes over."""

    def __init__(self, wire_in: IO[bytes], wire_out: IO[bytes]) -> None:
        self._in = wire_in
        self._out = wire_out
        self._write_lock = threading.Lock()
        self._queue: queue.Queue[str | None] = queue.Queue()
        self._early: tuple[Any, dict[str, Any]] | None = None  # (request id, result sent)
        self._dropped = threading.Event()
        self._first = threading.Event()  # the first line (or the end of the wire) has come
        self._client_name: str | None = None
        self._reader = threading.Thread(target=self._read, name="pmem-stdio-front", daemon=True)

    @classmethod
    def start(cls) -> StdioFront:
        """Claim fd 0 and 1 for the protocol and start reading."""
        wire_in, wire_out = _claim_wire()
        front = cls(wire_in, wire_out)
        front._reader.start()
        return front

    # -------------------------------------------------------------- the reader thread

    def _read(self) -> None:
        first = True
        try:
            for raw in self._in:
                line = raw.decode("utf-8", errors="replace")
                if first:
                    first = False
                    self._answer_handshake(line)
                    self._first.set()
                self._queue.put(line)
        except (OSError, ValueError):  # the wire closed under us: end as at EOF
            pass
        finally:
            self._queue.put(None)
            self._first.set()

    def _answer_handshake(self, line: str) -> None:
        try:
            message = json.loads(line)
        except ValueError:
            return
        if not isinstance(message, dict) or message.get("method") != "initialize":
            return
        request_id = message.get("id")
        if message.get("jsonrpc") != "2.0" or not isinstance(request_id, (int, str)):
            return
        result = initialize_result(message.get("params"))
        if result is None:
            return
        self._early = (request_id, result)
        self._client_name = client_name(message["params"]["clientInfo"]["name"])
        response = {"jsonrpc": "2.0", "id": request_id, "result": result}
        self._write(json.dumps(response, ensure_ascii=False, separators=(",", ":")) + "\n")

    def _write(self, text: str) -> None:
        with self._write_lock:
            self._out.write(text.encode("utf-8"))
            self._out.flush()

    # -------------------------------------------------------------- what the SDK reads and writes

    def lines(self) -> _Lines:
        """A text file of the wire's lines for the SDK's stdio transport (``anyio.wrap_file``)."""
        return _Lines(self._queue)

    def output(self) -> _Output:
        """A text file the SDK's stdio transport writes its messages to."""
        return _Output(self)

    @property
    def answered_early(self) -> bool:
        return self._early is not None

    def client_name(self) -> str | None:
        """The name the client gave in its handshake (``clientInfo.name``, made a plain word),
        once the first message has come; None when it gave none."""
        self._first.wait()
        return self._client_name

    def _pass(self, text: str) -> None:
        early = self._early
        if early is not None and not self._dropped.is_set():
            try:
                message = json.loads(text)
            except ValueError:
                message = None
            is_answer = isinstance(message, dict) and "method" not in message
            if is_answer and message.get("id") == early[0]:  # type: ignore[union-attr]
                self._dropped.set()
                _compare(early[1], message.get("result"))  # type: ignore[union-attr]
                return
        self._write(text)


class _Lines:
    def __init__(self, lines: queue.Queue[str | None]) -> None:
        self._queue = lines
        self._ended = False

    def readline(self) -> str:
        if self._ended:
            return ""
        line = self._queue.get()
        if line is None:
            self._ended = True
            return ""
        return line


class _Output:
    def __init__(self, front: StdioFront) -> None:
        self._front = front

    def write(self, text: str) -> int:
        self._front._pass(text)
        return len(text)

    def flush(self) -> None:
        pass  # every write is flushed whole


def client_name(raw: str) -> str | None:
    """``clientInfo.name`` as a name for the revisions: lower case, words joined by ``-``,
    letters, digits, ``.`` and ``_`` kept, at most 40 characters ("Claude Code" → claude-code)."""
    words = "".join(c if c.isalnum() or c in "._-" else " " for c in raw.lower()).split()
    name = "-".join(words)[:40].strip("-")
    return name or None


def _compare(sent: dict[str, Any], sdk: object) -> None:
    if sent == sdk:
        return
    if isinstance(sdk, dict):
        keys = sorted(set(sent) ^ set(sdk) | {k for k in sent if k in sdk and sent[k] != sdk[k]})
    else:
        keys = sorted(sent)
    log.warning("the early initialize answer differs from the SDK's in: %s", ", ".join(keys))


def _claim_wire() -> tuple[IO[bytes], IO[bytes]]:
    """Private copies of fd 0 and 1 for the protocol; fd 0 then reads the null device and fd 1
    writes to stderr. Where descriptors cannot be moved, the sys streams' buffers serve."""
    try:
        wire_in = os.fdopen(os.dup(0), "rb")
        wire_out = os.fdopen(os.dup(1), "wb")
    except OSError:
        return sys.stdin.buffer, sys.stdout.buffer
    null = os.open(os.devnull, os.O_RDONLY)
    try:
        os.dup2(null, 0)
    finally:
        os.close(null)
    os.dup2(2, 1)
    return wire_in, wire_out
