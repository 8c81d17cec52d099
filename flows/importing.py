"""The import step: an export streamed into the source ledger at the speed of parsing.

Three stages: this thread reads the export (the importer's parser) and hands conversations over
in batches; a prepare thread hashes each text once and runs the prefilter where the ledger holds
no decision for that content; ``COMMIT_THREADS`` commit threads store the batches, each batch in
one transaction on its own connection (``Ledger.write_batch``: one locked look-up of the stored
hashes for the batch, COPY for new conversations), several at once (batches hold distinct
conversations; they may commit out of order). Parsing and preparing the next batches overlap the
database's work on the last ones. A batch holds whole conversations (at most ``BATCH_CONVERSATIONS`` or ``BATCH_BYTES`` of text), so
a crash leaves whole conversations or none and a re-run finishes the rest (re-reading what is
stored is a look-up per batch, no write).

What the import could not read is reported, never raised mid-way: a quarantined record goes to
the ledger's quarantine table and to ``errors``; an input error (the file cannot be opened, or
is cut off) ends the reading, keeps every conversation read before it, and is returned in
``input_error`` and ``errors``. Errors name the file, the record and a machine reason, never
message text.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import logging
import queue
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import InputError
from core.faults import fault_point
from core.models import Conversation, PrefilterDecision
from flows.reading import read_behind, read_behind_wanted
from importers import Quarantined, ReadReport, iter_source
from stages.prefilter import RULE_VERSION, prefilter, prefilter_texts
from store.index_stream import StreamRow, nice_worker, write_streamed
from store.ledger import BatchIndex, Digest, Ledger, digest, storable
from store.ledger_rows import INDEXED, Undecided, _decision_row, index_text

_log = logging.getLogger("pmem.import")

BATCH_CONVERSATIONS = 250
BATCH_BYTES = 4 << 20  # characters of message text per batch
STREAM_AHEAD_CHARS = 6 * BATCH_BYTES  # text the ledger may be ahead of the index (memory bound)
#: batches stored at once, each in its own transaction and connection: the commit stage (COPY,
#: waiting on the server) was the ledger's bottleneck, with the reader waiting for it (ADR 0044)
COMMIT_THREADS = 2
MAX_ERRORS = 1000  # errors listed in the summary (all are counted, and all are in the ledger)
SKIP_PREFIX = "skipped:"  # importers count skipped lines in unknown_types under this prefix


@dataclass
class ImportProgress:
    bytes_read: int = 0
    bytes_total: int = 0
    conversations: int = 0


ProgressFn = Callable[[ImportProgress], None]
ItemsFn = Callable[[ReadReport], Iterator[Conversation | Quarantined]]


@dataclass
class _Batch:
    convs: list[Conversation] = field(default_factory=list)
    quarantined: list[Quarantined] = field(default_factory=list)
    chars: int = 0
    digests: list[Digest] | None = None  # set by the prepare stage
    read_digests: list[Digest | None] = field(default_factory=list)  # the reader's, if it hashed
    decisions: dict[int, PrefilterDecision] = field(default_factory=dict)  # by id(conversation)
    index: BatchIndex | None = None  # the message index rows of its new conversations


def error_entry(
    file: str, member: str | None, record: Any, reason: str, kind: str
) -> dict[str, Any]:
    """One entry of ``errors``: the file (``zip!member``), the record (array index or line
    number, or an id; None for the whole file), a machine reason, and what was set aside."""
    if isinstance(record, str) and record.isdigit():
        record = int(record)
    return {
        "file": f"{file}!{member}" if member else file,
        "record": record,
        "reason": reason,
        "kind": kind,
    }


def _bare_message(err: InputError) -> str:
    """The error's message without the ``file (record N): `` prefix InputError adds."""
    prefix = f"{err.file}" + (f" (record {err.record})" if err.record else "") + ": "
    text = str(err)
    return text.removeprefix(prefix)


def run_import(
    ledger: Ledger,
    source: str,
    export_path: str,
    *,
    on_progress: ProgressFn | None = None,
    batch_conversations: int = BATCH_CONVERSATIONS,
    batch_bytes: int = BATCH_BYTES,
    raise_input_error: bool = False,
    index_messages: bool = False,
    seen: set[str] | None = None,
    items: ItemsFn | None = None,
    skip_unchanged: bool = False,
    file_hash: Future[str] | None = None,
) -> dict[str, Any]:
    """Import ``export_path`` with the importer of ``source``; returns the summary (counts,
    ``skipped`` by reason, ``errors``, ``input_error``). With ``raise_input_error`` an input
    error is raised once everything read before it is stored (the backfill stops there).

    With ``index_messages`` the recall index is built alongside: the messages of new
    conversations are tokenised in worker processes while their batch is prepared and stored in
    the batch's own transaction (``_Tokens``, ``store.ledger.BatchIndex``); what else reaches the
    queue (a changed conversation's new messages) is synced by ``_Indexer`` as batches commit.
    The index step after the import finds (almost) nothing left; ``indexed_messages`` counts
    them. The Japanese normal forms are the index's later stage (ADR 0026).
    ``seen`` collects the (stored) key of every conversation of the export: a backfill's scope.
    ``items`` (`pmem watch`: a file read from where the last pass stopped) yields what to store
    instead of the importer's read of the whole of ``export_path``; it counts bytes into the
    report it is given.

    With ``skip_unchanged`` (`pmem import`), a file the ledger already holds whole is not read
    again: same bytes (SHA-256), same reading code and person's names (``reader_version``), and
    an earlier import of it that finished with no error. The summary then says
    ``"unchanged_file": true`` and counts its conversations as unchanged. ``file_hash``
    (``hash_file_behind``): the file's ``fingerprint``, computed while the caller started."""
    began = time.monotonic()
    fingerprint = (
        file_fingerprint(export_path, None if file_hash is None else file_hash.result())
        if skip_unchanged and items is None
        else None
    )
    if fingerprint is not None:
        earlier = ledger.finished_import_of(source, fingerprint)
        if earlier is not None:
            stats = unchanged_file_stats(earlier, fingerprint)
            stats["elapsed_seconds"] = round(time.monotonic() - began, 3)
            return stats
    tokens = _Tokens() if index_messages else None
    indexer = _Indexer(ledger, tokens) if tokens is not None else None
    try:
        with _fewer_collections():
            stats, input_exc = _run_import(
                ledger,
                source,
                export_path,
                on_progress,
                batch_conversations,
                batch_bytes,
                indexer,
                seen,
                items,
                tokens,
                fingerprint,
            )
    finally:
        try:
            indexed = indexer.close() if indexer is not None else None
        finally:
            if tokens is not None:
                tokens.close()
    if indexed is not None and tokens is not None:
        stats["indexed_messages"] = indexed + tokens.written + stats.pop("indexed_behind", 0)
    if raise_input_error and input_exc is not None:
        raise input_exc
    return stats


#: allocations between two young collections while importing (the interpreter's default: 700)
GC_YOUNG_THRESHOLD = 50_000


@contextlib.contextmanager
def _fewer_collections() -> Iterator[None]:
    """The cyclic collector runs less often while importing: the parsed JSON (dicts, lists,
    strings) and the models built from it hold no cycles, so a collection finds nothing to free
    and only walks what is alive (at the default threshold ~700 collections, ~0.5-0.7 CPU-s per
    100 MB). The thresholds are restored after; a cycle made meanwhile is freed by a later
    collection (young ones still run, every ``GC_YOUNG_THRESHOLD`` allocations)."""
    before = gc.get_threshold()
    gc.set_threshold(max(before[0], GC_YOUNG_THRESHOLD), *before[1:])
    try:
        yield
    finally:
        gc.set_threshold(*before)


def empty_stats(input_error: str | None = None) -> dict[str, Any]:
    """An import's counts before anything is read (``input_error``: the input was refused
    before reading, one error counted)."""
    return {
        "conversations": 0,
        "conversations_new": 0,
        "conversations_changed": 0,
        "conversations_unchanged": 0,
        "messages_new": 0,
        "quarantined": 0,
        "kept": 0,
        "dropped": 0,
        "drop_reasons": {},
        "unknown_types": {},
        "skipped": {},
        "errors": [],
        "errors_total": 0 if input_error is None else 1,
        "input_error": input_error,
        "bytes_read": 0,
        "bytes_total": 0,
        "elapsed_seconds": 0.0,
    }


def _run_import(
    ledger: Ledger,
    source: str,
    export_path: str,
    on_progress: ProgressFn | None,
    batch_conversations: int,
    batch_bytes: int,
    indexer: _Indexer | None,
    seen: set[str] | None = None,
    items: ItemsFn | None = None,
    tokens: _Tokens | None = None,
    fingerprint: dict[str, Any] | None = None,
) -> tuple[dict[str, Any], InputError | None]:
    import_id = ledger.start_import(source, export_path)
    deferred = ledger.defer_token_index()  # an empty index: its GIN is built after the load
    overrides = ledger.overrides()
    report = ReadReport()
    stats = empty_stats()
    started = time.monotonic()
    progress = ImportProgress()
    lock = threading.Lock()
    handover = threading.Lock()
    unknown: Counter[str] = Counter()
    skipped: Counter[str] = Counter()

    def decide(conv: Conversation) -> PrefilterDecision:
        return prefilter(conv, overrides)

    def prepare(batch: _Batch) -> None:
        """Stage 1 (its own thread): hash every text once and run the prefilter where the ledger
        holds no decision for this content yet; then hand the batch to the commit stage, so that
        its transaction (COPY, waiting on the server) overlaps the next batch's preparation."""
        batch.digests = [
            d if d is not None else digest(c)
            for c, d in zip(batch.convs, batch.read_digests, strict=True)
        ]
        state = ledger.stored_state(batch.convs, RULE_VERSION)
        fresh = [c for c in batch.convs if storable(c.key) not in state]
        streamed = (
            tokens is not None
            and streamer is not None
            and bool(fresh)
            and all(len(m.text) <= _IN_PLACE for c in fresh for m in c.messages)
        )
        for conv, dig in zip(batch.convs, batch.digests, strict=True):
            have = state.get(storable(conv.key))
            if have is None and streamed:
                continue  # decided by the worker that indexes it, behind the commit
            if have is None or have[0] != dig[0] or have[1] is None:
                batch.decisions[id(conv)] = prefilter(conv, overrides, content_hash=dig[0])
        if streamed:  # the index rows and decisions written behind the ledger's commit
            batch.index = BatchIndex(dict, streamed=True, defer_decisions=True)
        elif tokens is not None and fresh:  # computed while the commit runs, in its transaction
            batch.index = tokens.index(fresh)
        committer.put(batch)

    def count_decision(keep: bool, reason: str) -> None:
        if keep:
            stats["kept"] += 1
        else:
            stats["dropped"] += 1
            stats["drop_reasons"][reason] = stats["drop_reasons"].get(reason, 0) + 1

    def decided_behind(outcomes: list[tuple[bool, str]]) -> None:
        """The decisions an index worker made (or the import, when it failed)."""
        with lock:
            for keep, reason in outcomes:
                count_decision(keep, reason)

    def add_error(entry: dict[str, Any]) -> None:
        stats["errors_total"] += 1
        if len(stats["errors"]) < MAX_ERRORS:
            stats["errors"].append(entry)

    def write(batch: _Batch) -> None:
        rows = [(source, _where(q), q.position, q.reason) for q in batch.quarantined]
        cached = batch.decisions

        def decided(conv: Conversation) -> PrefilterDecision:
            return cached.get(id(conv)) or decide(conv)

        results = ledger.write_batch(
            batch.convs, import_id, decided, RULE_VERSION, rows, batch.digests, index=batch.index
        )
        handled = batch.index is not None and bool(batch.index.written or batch.index.queued)
        if batch.index is not None and tokens is not None:
            with handover:  # the commit threads hand over in turn
                tokens.written += batch.index.written
                if (batch.index.queued or batch.index.undecided) and streamer is not None:
                    # the ledger has committed them
                    streamer.submit(batch.index.queued, batch.index.undecided)
                    batch.index.queued, batch.index.undecided = [], []
                    fault_point("import:after-index-handover")
        if indexer is not None and any(
            o == "changed" or (o == "new" and not handled) for o, *_ in results
        ):
            indexer.poke()  # something reached the queue (the rows stored with the batch did not)
        with lock:
            for q in batch.quarantined:
                stats["quarantined"] += 1
                add_error(error_entry(q.file, q.member, q.position, q.reason, q.kind))
            for conv, (outcome, new, keep, reason) in zip(batch.convs, results, strict=True):
                stats["conversations"] += 1
                stats[f"conversations_{outcome}"] += 1
                stats["messages_new"] += new
                if seen is not None:
                    seen.add(storable(conv.key))
                for t, n in conv.unknown_types.items():
                    (skipped if t.startswith(SKIP_PREFIX) else unknown)[
                        t.removeprefix(SKIP_PREFIX)
                    ] += n
                if keep is not None:  # None: the index worker decides it (counted then)
                    count_decision(keep, reason or "")
                fault_point("import:after-conversation")
        if stats["conversations"] and stats["conversations"] % 5000 < len(batch.convs):
            _log.info("imported %d conversations", stats["conversations"])

    streamer = (
        _Streamer(tokens, ledger, overrides, decided_behind)
        if tokens is not None and tokens.workers
        else None
    )
    committer = _Stage(write, "pmem-import-commit", COMMIT_THREADS)
    writer = _Stage(prepare, "pmem-import-prepare")
    batch = _Batch()
    input_exc: InputError | None = None
    try:
        read = (
            ((item, None) for item in items(report))
            if items is not None
            else read_behind(source, Path(export_path), report)
            if read_behind_wanted()
            else ((item, None) for item in iter_source(source, Path(export_path), report))
        )
        for item, dig in read:
            if isinstance(item, Conversation):
                batch.convs.append(item)
                batch.read_digests.append(dig)
                batch.chars += sum(len(m.text) for m in item.messages)
                progress.conversations += 1
            else:
                batch.quarantined.append(item)
            if len(batch.convs) >= batch_conversations or batch.chars >= batch_bytes:
                writer.put(batch)
                batch = _Batch()
            if on_progress is not None:
                progress.bytes_read, progress.bytes_total = report.bytes_read, report.bytes_total
                on_progress(progress)
    except InputError as err:
        input_exc = err
        stats["input_error"] = _bare_message(err)
        with lock:
            add_error(
                error_entry(
                    err.file, None, err.record, getattr(err, "reason", "unreadable-input"), "input"
                )
            )
    finally:
        try:
            if batch.convs or batch.quarantined:
                writer.put(batch)
            writer.close()  # waits for the last batch; re-raises a stage's error
        finally:
            try:
                committer.close()
            finally:
                ledger_done = time.monotonic()  # the ledger stage ends; the index trails it
                fault_point("import:ledger-done")
                try:
                    if streamer is not None:
                        streamer.close()
                        stats["indexed_behind"] = streamer.written
                finally:
                    if deferred:  # once every index row of the load is in
                        ledger.build_token_index()
    stats["skipped"] = dict(skipped + report.skipped)
    stats["unknown_types"] = dict(unknown)
    stats["bytes_read"], stats["bytes_total"] = report.bytes_read, report.bytes_total
    stats["elapsed_seconds"] = round(ledger_done - started, 3)
    stats["index_behind_seconds"] = round(time.monotonic() - ledger_done, 3)
    if on_progress is not None:
        progress.bytes_read, progress.bytes_total = report.bytes_read, report.bytes_total
        on_progress(progress)
    done = {k: v for k, v in stats.items() if k != "errors"}
    if fingerprint is not None:
        done["file_fingerprint"] = fingerprint  # what a re-import of the same file looks up
    ledger.finish_import(import_id, done)
    return stats, input_exc


_READER_CODE = (
    "importers",
    "core/models.py",
    "core/people.py",
    "stages/prefilter.py",
    "store/ledger.py",
    "store/ledger_rows.py",
)


def reader_version() -> str:
    """What decides how a file becomes ledger rows: the reading and storing code (a hash of its
    source, so any change to an importer reads the file again) and the person's names (they
    decide whose messages are the person's)."""
    from core.hashing import sha256_hex
    from core.people import me_names

    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    for rel in _READER_CODE:
        target = root / rel
        files = sorted(target.rglob("*.py")) if target.is_dir() else [target]
        for f in files:
            h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    h.update(b"rules\0" + RULE_VERSION.encode())
    h.update(b"me\0" + sha256_hex("\0".join(sorted(me_names())).encode()).encode())
    return h.hexdigest()[:32]


def fingerprint(path: Path) -> str:
    """An export's identity: ``sha256:`` of a file's bytes; a folder's member names, sizes and
    times (``dir-sha256:``). The backfill's run key and the import's unchanged-file check."""
    h = hashlib.sha256()
    if path.is_dir():
        for member in sorted(m for m in path.rglob("*") if m.is_file()):
            h.update(str(member.relative_to(path)).encode())
            h.update(str(member.stat().st_size).encode())
            h.update(str(member.stat().st_mtime_ns).encode())
        return f"dir-sha256:{h.hexdigest()}"
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return f"sha256:{h.hexdigest()}"


def file_fingerprint(path: str, hashed: str | None = None) -> dict[str, Any] | None:
    """The export file's size, SHA-256 and the reader version; None for a folder (a folder
    export is read again). ``hashed``: the file's ``fingerprint`` when it is known already."""
    target = Path(path)
    if not target.is_file():
        return None
    digest = (hashed or fingerprint(target)).removeprefix("sha256:")
    return {"sha256": digest, "size": target.stat().st_size, "reader": reader_version()}


def hash_file_behind(path: str) -> Future[str] | None:
    """The file's ``fingerprint`` computed in a thread of its own, started before the import's
    slower start (the database, the person's names): hashlib and the reads release the GIL, so
    the SHA-256 (~0.1 s per 100 MB) runs on the other core instead of before the reading. None
    for a folder. The reading code's version is added later (``file_fingerprint``): it depends
    on the person's names the import runs with."""
    target = Path(path)
    if not target.is_file():
        return None
    future: Future[str] = Future()

    def run() -> None:
        try:
            future.set_result(fingerprint(target))
        except BaseException as err:  # noqa: BLE001 - raised where the result is asked for
            future.set_exception(err)

    threading.Thread(target=run, name="pmem-import-hash", daemon=True).start()
    return future


def unchanged_file_stats(earlier: dict[str, Any], fingerprint: dict[str, Any]) -> dict[str, Any]:
    """The summary of a re-import of a file the ledger holds whole: nothing read or written."""
    stats = empty_stats()
    n = int(earlier.get("conversations") or 0)
    stats.update(
        conversations=n,
        conversations_unchanged=n,
        kept=int(earlier.get("kept") or 0),
        dropped=int(earlier.get("dropped") or 0),
        drop_reasons=dict(earlier.get("drop_reasons") or {}),
        bytes_total=int(fingerprint["size"]),
        unchanged_file=True,
    )
    return stats


def _where(q: Quarantined) -> str:
    return q.file + (f"!{q.member}" if q.member else "")


class _Stage:
    """Threads handling batches (one: in order); ``put`` blocks when a batch is waiting beside
    those being handled (memory stays bounded), and an error in the stage stops the one feeding
    it at its next ``put``."""

    def __init__(self, write: Callable[[_Batch], None], name: str, threads: int = 1) -> None:
        self._write = write
        self._queue: queue.Queue[_Batch | None] = queue.Queue(maxsize=1)
        self._error: BaseException | None = None
        self._threads = [
            threading.Thread(target=self._run, name=name, daemon=True) for _ in range(threads)
        ]
        for thread in self._threads:
            thread.start()

    def _run(self) -> None:
        while True:
            batch = self._queue.get()
            if batch is None:
                return
            if self._error is not None:
                continue  # drain: the reader stops at its next put
            try:
                self._write(batch)
            except BaseException as err:  # noqa: BLE001 - handed to the reader thread
                self._error = err

    def put(self, batch: _Batch) -> None:
        if self._error is not None:
            self.close()
        self._queue.put(batch)

    def close(self) -> None:
        alive = [t for t in self._threads if t.is_alive()]
        for _ in alive:
            self._queue.put(None)
        for thread in alive:
            thread.join()
        if self._error is not None:
            err, self._error = self._error, None
            raise err


class _Indexer:
    """The rest of the recall index built while the import runs (what the batches did not store
    themselves: a changed conversation's new messages): a thread syncs the message index (the
    queue the ledger's trigger fills as batches commit) when a batch queued something,
    tokenising in the import's worker processes (``_Tokens``). The index is derived: a failure
    here is logged (its type, never text) and left to the index step after the import."""

    def __init__(self, ledger: Ledger, tokens: _Tokens) -> None:
        from search.reader import SearchStore

        self._store = SearchStore(ledger.db)
        self._tokens = tokens
        self._pool: Any = None  # the import's workers, once something is queued
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._wake.set()  # a first pass at once (it also settles the index's token version)
        self.indexed = 0
        self._thread = threading.Thread(target=self._run, name="pmem-import-index", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while True:
                # woken by a batch that queued something, or by the close: the new messages the
                # workers write behind the ledger are queued too, and left to them meanwhile
                self._wake.wait()
                self._wake.clear()
                stopping = self._stop.is_set()
                if self._pool is None and self._tokens.workers and self._store.has_pending():
                    self._pool = self._tokens.pool()
                n = (
                    self._store.sync_messages(pool=self._pool, forms=False)
                    if self._pool is not None
                    else (self._store.sync_messages(workers=0, forms=False))
                )
                self.indexed += n
                if stopping:
                    return  # a whole pass after the last commit: everything stored is indexed
        except Exception as err:  # noqa: BLE001 - derived data; the index step after catches up
            _log.warning(
                "indexing beside the import stopped (%s); the index step catches up",
                type(err).__name__,
            )

    def poke(self) -> None:
        self._wake.set()

    def close(self) -> int:
        """Index what is left, stop the thread and the workers; the number of messages indexed."""
        self._stop.set()
        self._wake.set()
        self._thread.join()
        return self.indexed


_CHUNK = 250  # messages per unit of tokenising work
_IN_PLACE = 1_000_000  # a text longer than this (characters) is tokenised in the import process


def _index_rows(texts: list[str]) -> list[tuple[str, bool]]:
    """The import pass's tokens of ``texts`` (no normal forms: the later stage's), run in the
    import's worker processes."""
    from core.textsearch import index_rows_many
    from store.index import MAX_TOKEN_CHARS

    return index_rows_many(texts, MAX_TOKEN_CHARS, forms=False)


class _Tokens:
    """The import's worker processes for the message index (``store.index.token_pool``:
    one per CPU, at most 4; ``PMEM_INDEX_WORKERS`` overrides, 0 tokenises in the prepare
    thread), started at the first batch with something new (a re-import starts none)."""

    def __init__(self) -> None:
        from store.index import PARALLEL_MIN_PENDING, index_workers

        self.workers = index_workers(PARALLEL_MIN_PENDING)
        self.written = 0  # rows stored in the ledger's transactions
        self._pool: Any = None
        self._lock = threading.Lock()

    def pool(self) -> Any:
        from store.index import token_pool

        with self._lock:
            if self._pool is None and self.workers:
                self._pool = token_pool(self.workers)
                self._pool.submit(_warm_up).result()  # the workers start
            return self._pool

    def index(self, convs: list[Conversation]) -> BatchIndex:
        """The index rows of ``convs`` (new conversations), computed in the workers while the
        batch waits for its commit. A failure leaves the messages to the queue, never fails the
        import (the index is derived)."""
        keys: list[str] = []
        texts: list[str] = []
        for conv in convs:
            for m in conv.messages:
                if m.channel in INDEXED:
                    keys.append(storable(m.key))
                    texts.append(_clean(m.text))
        chunks: list[list[str]] = []
        for i, text in enumerate(texts):  # a huge text is a chunk of its own
            if (
                not chunks
                or len(chunks[-1]) >= _CHUNK
                or len(text) > _IN_PLACE
                or len(texts[i - 1]) > _IN_PLACE
            ):
                chunks.append([])
            chunks[-1].append(text)
        pool = self.pool() if any(len(c[0]) <= _IN_PLACE for c in chunks) else None
        try:  # a huge text is tokenised here: no copy of it through a pipe (memory stays bounded)
            parts: list[Any] = [
                pool.submit(_index_rows, c)
                if pool is not None and len(c[0]) <= _IN_PLACE
                else _index_rows(c)
                for c in chunks
            ]
        except Exception as err:  # noqa: BLE001 - derived data; the queue keeps the messages
            return BatchIndex(_failed(err))

        def gather() -> dict[str, tuple[str, bool]]:
            try:
                rows = [
                    r for part in parts for r in (part if isinstance(part, list) else part.result())
                ]
            except Exception as err:  # noqa: BLE001 - derived data; the queue keeps the messages
                return _failed(err)()
            return dict(zip(keys, rows, strict=True))

        return BatchIndex(gather, texts=dict(zip(keys, texts, strict=True)))

    def close(self) -> None:
        with self._lock:
            if self._pool is not None:
                self._pool.shutdown(wait=True, cancel_futures=True)
                self._pool = None


_clean = index_text  # what the index shows of a text (``store.ledger_rows.index_text``)


class _Streamer:
    """The index rows of the ledger's committed batches, and the prefilter decisions of their
    new conversations, handed to the import's worker processes (``_index_behind``: decisions,
    tokens and rows written there, niced, in their own connections): the ledger goes on while
    they work. At most ``STREAM_AHEAD_CHARS`` of text wait for them (then the ledger waits for
    the oldest batch); a failure leaves the batch's messages queued for the index step (derived
    data: logged by its type, never fatal) and its decisions are made here."""

    def __init__(
        self,
        tokens: _Tokens,
        ledger: Ledger,
        overrides: dict[str, bool],
        on_decided: Callable[[list[tuple[bool, str]]], None],
    ) -> None:
        self._tokens = tokens
        self._ledger = ledger
        self._url = ledger.db.url
        self._overrides = overrides
        self._on_decided = on_decided
        self._inflight: deque[
            tuple[Future[tuple[int, list[tuple[bool, str]]]], int, list[Undecided]]
        ] = deque()
        self._chars = 0
        self.written = 0

    def submit(self, rows: list[StreamRow], undecided: list[Undecided]) -> None:
        while self._inflight and self._inflight[0][0].done():
            self._reap()
        chars = sum(len(r[4]) for r in rows)
        try:
            future = self._tokens.pool().submit(
                _index_behind, self._url, rows, undecided, self._overrides
            )
        except Exception as err:  # noqa: BLE001 - derived data; the queue keeps the messages
            _failed(err)
            self._decide_here(undecided)
            return
        self._inflight.append((future, chars, undecided))
        self._chars += chars
        while self._chars > STREAM_AHEAD_CHARS and len(self._inflight) > 1:
            self._reap()

    def _reap(self) -> None:
        future, chars, undecided = self._inflight.popleft()
        self._chars -= chars
        try:
            written, outcomes = future.result()
        except Exception as err:  # noqa: BLE001 - derived data; the queue keeps the messages
            _failed(err)
            self._decide_here(undecided)
            return
        self.written += written
        self._on_decided(outcomes)

    def _decide_here(self, undecided: list[Undecided]) -> None:
        """The decisions a failed worker did not store, made and stored by the import."""
        decisions = [prefilter_texts(k, h, d, self._overrides) for k, h, d in undecided]
        self._ledger.record_decisions(decisions)
        self._on_decided([(d.keep, d.reason) for d in decisions])

    def close(self) -> None:
        """Wait until every batch handed over is written (or has failed)."""
        while self._inflight:
            self._reap()


def _index_behind(
    url: str, rows: list[StreamRow], undecided: list[Undecided], overrides: dict[str, bool]
) -> tuple[int, list[tuple[bool, str]]]:
    """In a worker process: the prefilter decisions of a committed batch's new conversations
    and their messages' index rows, in one transaction (``write_streamed``); the rows written
    and each decision's keep and reason."""
    nice_worker()
    decisions = [prefilter_texts(k, h, d, overrides) for k, h, d in undecided]
    written = write_streamed(url, rows, [_decision_row(d) for d in decisions])
    return written, [(d.keep, d.reason) for d in decisions]


def _failed(err: BaseException) -> Callable[[], dict[str, tuple[str, bool]]]:
    _log.warning(
        "indexing beside the import failed (%s); the index step catches up", type(err).__name__
    )
    return dict


def _warm_up() -> None:
    from core.textsearch import index_tokens

    index_tokens("索引を作ります", forms=False)  # Sudachi is the later stage's (not loaded here)
