"""The export read in a process of its own, beside the ledger (issue 31, ADR 0044).

The ledger stage's own Python (the reader, the importer's models, the content hashes, the COPY's
rows, the hand-over to the index) ran under one GIL: ~2.5-2.9 CPU-s per 100 MB in one process,
the ledger's floor. ``read_behind`` moves the reader, the importer and the hashes
(``store.ledger_rows.digest``: each text encoded and hashed once) into a forked process, which
sends what it read through a pipe in chunks (pickled: conversations, quarantined records, each
conversation's digest, the read report's counts); the import's process only stores. The order
of the items is the reader's, so batches are made and stored as before (a crash or Ctrl-C leaves
whole conversations; the re-run finishes what is missing).

The pipe holds at most a chunk or two: the reader waits when the ledger is behind (memory stays
bounded). The reader exits when the import's process is gone (its next write to the pipe fails)
and ignores Ctrl-C (the import's process stops it). An input error is sent as what it is (the
file, the record, the reason) and raised in the import's process after the items read before it;
any other error in the reader ends the import as before (its type, never text from the export).
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from core.errors import InputError
from core.models import Conversation
from importers import IMPORTERS, Quarantined, ReadReport, iter_source
from importers._common import ReadError
from store.index import _leave_with_parent
from store.ledger_rows import Digest, digest

#: items per message through the pipe, and the characters of text after which a chunk is sent
CHUNK_ITEMS = 64
CHUNK_CHARS = 1 << 20
#: a conversation with more text than this (characters) is sent without its digest (the ledger's
#: process hashes it): its bytes would cross the pipe beside its text, twice the memory
DIGEST_MAX_CHARS = 1_000_000

Item = tuple[Conversation | Quarantined, Digest | None]


def read_behind_wanted() -> bool:
    """Whether the import reads in a process of its own: only with ``PMEM_IMPORT_READER=1``
    (and ``fork``). Off by default: on two cores the reader's process took the CPU the server
    and the index workers use, and the pickles cost ~1 CPU-s per 100 MB more than they saved
    the ledger's process (ADR 0044: the ledger stage the same or slower, six alternated runs)."""
    env = os.environ.get("PMEM_IMPORT_READER", "").strip()
    return env == "1" and "fork" in multiprocessing.get_all_start_methods()


def read_behind(source: str, path: Path, report: ReadReport) -> Iterator[Item]:
    """The items of ``iter_source(source, path)``, each with its digest (None for a quarantined
    record or a very long conversation), read in a forked process; ``report`` gets the reader's
    counts as the chunks arrive."""
    if source not in IMPORTERS:
        iter_source(source, path)  # raises the ConfigError naming the known sources
    ctx = multiprocessing.get_context("fork")
    recv, send = ctx.Pipe(duplex=False)
    proc = ctx.Process(
        target=_reader_main,
        args=(source, str(path), send, recv),
        name="pmem-import-reader",
        daemon=True,
    )
    proc.start()
    send.close()
    try:
        while True:
            try:
                kind, payload, counts = recv.recv()
            except EOFError:
                proc.join()
                raise RuntimeError(
                    f"the import's reader process ended early (exit code {proc.exitcode})"
                ) from None
            _apply(report, counts)
            if kind == "items":
                yield from payload
            elif kind == "done":
                return
            elif kind == "input":
                raise _input_error(payload)
            elif isinstance(payload, BaseException):
                raise payload
            else:
                raise RuntimeError(f"the import's reader failed ({payload})")
    finally:
        recv.close()
        if proc.is_alive():
            proc.kill()
        proc.join()


def _counts(report: ReadReport) -> tuple[int, int, dict[str, int]]:
    return report.bytes_read, report.bytes_total, dict(report.skipped)


def _apply(report: ReadReport, counts: tuple[int, int, dict[str, int]]) -> None:
    report.bytes_read, report.bytes_total = counts[0], counts[1]
    report.skipped.clear()
    report.skipped.update(counts[2])


def _input_error(payload: tuple[str, str, str | None, str | None]) -> InputError:
    message, file, record, reason = payload
    if reason is None:
        return InputError(message, file=file, record=record)
    return ReadError(message, file=file, record=record, reason=reason)


def _bare(err: InputError) -> str:
    prefix = f"{err.file}" + (f" (record {err.record})" if err.record else "") + ": "
    return str(err).removeprefix(prefix)


def _portable(err: Exception) -> Exception | str:
    """The reader's error as the import's process can raise it: itself when it survives a
    pickle's round trip, else its type's name."""
    try:
        pickle.loads(pickle.dumps(err))
    except Exception:  # noqa: BLE001 - an error whose arguments do not rebuild it
        return type(err).__name__
    return err


def _reader_main(source: str, path: str, send: Any, recv: Any) -> None:
    """In the forked reader: read, hash, send; exit when done or when the pipe is gone."""
    recv.close()  # the import's end: its close (or death) must break this one's writes
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the import, which stops this
    _leave_with_parent()  # also while it parses a long item (no write to fail meanwhile)
    report = ReadReport()
    chunk: list[Item] = []
    chars = 0
    try:
        try:
            for item in iter_source(source, Path(path), report):
                dig = None
                if isinstance(item, Conversation):
                    n = sum(len(m.text) for m in item.messages)
                    chars += n
                    if n <= DIGEST_MAX_CHARS:
                        dig = digest(item)
                chunk.append((item, dig))
                if len(chunk) >= CHUNK_ITEMS or chars >= CHUNK_CHARS:
                    send.send(("items", chunk, _counts(report)))
                    chunk, chars = [], 0
        except InputError as err:
            if chunk:
                send.send(("items", chunk, _counts(report)))
            reason = getattr(err, "reason", None)
            send.send(("input", (_bare(err), err.file, err.record, reason), _counts(report)))
            return
        except Exception as err:  # noqa: BLE001 - raised in the import's process
            send.send(("error", _portable(err), _counts(report)))
            return
        if chunk:
            send.send(("items", chunk, _counts(report)))
        send.send(("done", None, _counts(report)))
    except (BrokenPipeError, OSError):
        os._exit(1)  # the import is gone: nothing to send to
    finally:
        send.close()
