"""The incremental re-index (seed 004): re-import only the files that changed since the last pass.

One pass over the watched PATHs (files, or folders walked recursively; hidden names skipped):

1. **scan**: each file's size and mtime are compared with what the last pass recorded
   (``store/watch_state.py``, migration 0025). Equal: the file is not even opened (``--verify``
   hashes it anyway). Different: it is hashed (sha256, one read) and is

   * ``touched``: same bytes (only its mtime moved): the new mtime is recorded, nothing imported;
   * ``grown``: larger, and its first (old size) bytes hash as before: only appended to;
   * ``changed``: rewritten (smaller, or its old bytes differ): read again whole;
   * ``new``: never seen (its importer is sniffed once and remembered);
   * ``gone``: recorded under a watched PATH, no longer there (the ledger keeps its messages).

2. **import**: each new, grown or changed file through the import write path
   (``flows/importing.py::run_import``, the byte-exact ledger). A grown file of an importer that
   can read from an offset (``read_tail`` + ``merge``: ``jsonl-log``'s daily files) is read from
   where the last pass stopped (the end of the last whole line it read), and each conversation
   the new lines continue is merged with the one the ledger holds (``Ledger.load``) before it is
   written, so the ledger ends up exactly as a full read of the grown file leaves it. Other
   formats (a Claude Code transcript is a tree, a zip is a zip) are read again whole; the ledger
   still writes only their new messages. A file's state is recorded right after its import, so a
   pass that stops half-way leaves the rest to the next one.

3. **index**: when something was imported, the message index and the vectors are brought up to
   date (``flows/pipeline.py::index_for_search``): the ledger's trigger queued exactly the new
   messages, and only messages without a vector are embedded.

A pass holds the data dir's run lock (``state/runlock.py``) while it runs: it never overlaps a
backfill, an import of the demo, a re-import or another pass (``RunLocked`` otherwise). Nothing
here imports Prefect: ``flows/watch_flow.py`` wraps the pass as the flow ``watch`` and serves
the deployment ``watch/every-10-minutes``. Summaries and events carry paths and counts only.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import logging
import os
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from core.errors import ConfigError, InputError
from core.settings import Settings
from state import runlock
from store.watch_state import FileState, WatchState

_log = logging.getLogger("pmem.watch")

PATHS_ENV = "PMEM_WATCH_PATHS"  # the PATHs watched when none are named (os.pathsep between them)
INTERVAL_ENV = "PMEM_WATCH_INTERVAL"  # seconds between passes (default 600: every 10 minutes)
DEFAULT_INTERVAL = 600
CHUNK = 1 << 20
_TEMP_SUFFIXES = ("~", ".tmp", ".part", ".partial", ".crdownload", ".swp")

#: what a pass does with a file
ACTIONS = ("new", "grown", "changed", "touched", "unchanged", "gone", "unknown-format", "failed")
IMPORTED = ("new", "grown", "changed")

Event = Callable[[str, dict[str, Any]], None]


@dataclass
class Change:
    """One file as the scan found it, and what the pass does with it."""

    path: Path
    root: str
    action: str
    source: str | None
    size: int
    mtime_ns: int
    content_hash: str = ""
    previous: FileState | None = None
    reason: str | None = None  # why a file failed or was set aside (machine words)
    hashed: bool = False  # its bytes were read by this scan

    def state(self, **changes: Any) -> FileState:
        """The row to record for this file (``changes`` from its import)."""
        prev = self.previous
        base = FileState(
            path=str(self.path),
            root=self.root,
            source=self.source,
            size=self.size,
            mtime_ns=self.mtime_ns,
            content_hash=self.content_hash,
            read_to=prev.read_to if prev else 0,
            lines_read=prev.lines_read if prev else 0,
            imports=prev.imports if prev else 0,
        )
        return replace(base, **changes)


@dataclass
class PassOptions:
    embed: bool = True  # embed the new messages with the local embedder (False: `--no-embed`)
    verify: bool = False  # hash every file, even one whose size and mtime are unchanged
    full: bool = False  # read every file whole (a pass without state: the benchmark's baseline)
    source: str | None = None  # the importer for files that cannot be told apart
    trigger: str = "watch"  # watch | reindex | schedule
    on_event: Event | None = None
    extra: dict[str, Any] = field(default_factory=dict)


# ---------------------------------------------------------------- which PATHs


def env_paths() -> list[Path]:
    raw = os.environ.get(PATHS_ENV, "")
    return [Path(p).expanduser() for p in raw.split(os.pathsep) if p.strip()]


def resolve_roots(paths: list[str] | None, known: list[str]) -> list[Path]:
    """The PATHs of a pass: those named, else ``PMEM_WATCH_PATHS``, else every PATH an earlier
    pass watched (``known``). None at all is a ConfigError; a named PATH that does not exist too."""
    if paths:
        roots = [Path(p).expanduser() for p in paths]
        missing = [str(p) for p in roots if not p.exists()]
        if missing:
            raise InputError("file or folder not found", file=missing[0])
        return [p.resolve() for p in roots]
    roots = env_paths() or [Path(p) for p in known]
    if not roots:
        raise ConfigError(
            "nothing to watch: no PATH named, PMEM_WATCH_PATHS is not set and no earlier pass "
            "watched a folder",
            hint="name a file or folder once: `pmem watch ~/logs` (later passes remember it)",
        )
    return [p.resolve() if p.exists() else p for p in roots]


def interval_seconds(value: float | None = None) -> float:
    """Seconds between passes: ``value``, else ``PMEM_WATCH_INTERVAL``, else 600."""
    if value is None:
        raw = os.environ.get(INTERVAL_ENV, "").strip()
        try:
            value = float(raw) if raw else DEFAULT_INTERVAL
        except ValueError:
            raise ConfigError(
                f"{INTERVAL_ENV}={raw!r} is not a number of seconds",
                hint="e.g. PMEM_WATCH_INTERVAL=600 (every 10 minutes)",
            ) from None
    if value <= 0:
        raise ConfigError(f"the interval must be more than 0 seconds (got {value:g})")
    return float(value)


def files_under(root: Path) -> Iterator[Path]:
    """The regular files of ``root`` (itself when it is a file), in path order; hidden names
    (``.git``, ``.DS_Store``, an editor's swap file) and temporary downloads are skipped."""
    if root.is_file():
        yield root
        return
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(files):
            if name.startswith(".") or name.endswith(_TEMP_SUFFIXES):
                continue
            path = Path(folder) / name
            if path.is_file():  # not a named pipe, a socket or a dangling link
                yield path


# ---------------------------------------------------------------- scan


def fingerprint(path: Path, size: int, prefix: int | None = None) -> tuple[str, str | None]:
    """sha256 of the first ``size`` bytes of ``path`` (what the stat saw: bytes appended while it
    is read wait for the next pass) and, with ``prefix``, of the first ``prefix`` bytes: one read.
    Tagged ``sha256:`` as the ledger's hashes are."""
    h = hashlib.sha256()
    head: str | None = None
    left = size
    done = 0
    with path.open("rb") as fp:
        while left > 0:
            want = min(CHUNK, left)
            if prefix is not None and done < prefix < done + want:
                want = prefix - done
            chunk = fp.read(want)
            if not chunk:
                break
            h.update(chunk)
            done += len(chunk)
            left -= len(chunk)
            if prefix is not None and done == prefix:
                head = "sha256:" + h.hexdigest()
    if prefix == 0:
        head = "sha256:" + hashlib.sha256().hexdigest()
    return "sha256:" + h.hexdigest(), head


def _sniff(path: Path, forced: str | None) -> str | None:
    from importers import sniff

    found = sniff(path)
    if forced is None:
        return found
    return forced if found in (None, forced) else None


def scan(roots: list[Path], recorded: dict[str, FileState], opts: PassOptions) -> list[Change]:
    """What each file under ``roots`` needs (see the module docstring), and the recorded files
    that are gone. Reads a file only when its size or mtime moved (or with ``verify``)."""
    from store.ledger import storable

    changes: list[Change] = []
    seen: set[str] = set()
    for root in roots:
        if not root.exists():
            continue  # an unmounted drive: its files are left as recorded
        for path in files_under(root):
            key = storable(str(path))
            if key in seen:
                continue  # under two watched PATHs
            seen.add(key)
            try:
                changes.append(_classify(path, str(root), recorded.get(key), opts))
            except OSError as err:  # unreadable now (permissions, removed meanwhile)
                changes.append(
                    Change(
                        path,
                        str(root),
                        "failed",
                        None,
                        0,
                        0,
                        reason=f"unreadable:{type(err).__name__}",
                    )
                )
        root_key = storable(str(root))
        for key, prev in recorded.items():
            if prev.gone or key in seen or prev.root != root_key:
                continue
            changes.append(
                Change(
                    Path(prev.path),
                    prev.root,
                    "gone",
                    prev.source,
                    prev.size,
                    prev.mtime_ns,
                    prev.content_hash,
                    prev,
                )
            )
    return changes


def _classify(path: Path, root: str, prev: FileState | None, opts: PassOptions) -> Change:
    st = path.stat()
    size, mtime = st.st_size, st.st_mtime_ns
    if prev is not None and prev.gone:
        prev = None  # it came back: a new file
    if prev is None:
        source = _sniff(path, opts.source)
        if source is None:  # remembered by size and mtime: not sniffed again until it changes
            return Change(path, root, "unknown-format", None, size, mtime, "", None)
        chash, _ = fingerprint(path, size)
        return Change(path, root, "new", source, size, mtime, chash, None, hashed=True)
    same_stat = prev.size == size and prev.mtime_ns == mtime
    if prev.source is None:
        if same_stat and not opts.full:
            return Change(path, root, "unchanged", None, size, mtime, prev.content_hash, prev)
        source = _sniff(path, opts.source)
        if source is None:
            return Change(path, root, "unknown-format", None, size, mtime, "", prev)
        chash, _ = fingerprint(path, size)
        return Change(path, root, "new", source, size, mtime, chash, None, hashed=True)
    if opts.full:
        chash, _ = fingerprint(path, size)
        return Change(
            path, root, "changed", prev.source, size, mtime, chash, prev, reason="full", hashed=True
        )
    if same_stat and not opts.verify:
        return Change(path, root, "unchanged", prev.source, size, mtime, prev.content_hash, prev)
    grew = size > prev.size
    chash, head = fingerprint(path, size, prev.size if grew else None)
    action = "changed"
    if chash == prev.content_hash:
        action = "unchanged" if same_stat else "touched"
    elif grew and head == prev.content_hash:
        action = "grown"
    return Change(path, root, action, prev.source, size, mtime, chash, prev, hashed=True)


# ---------------------------------------------------------------- import


def _tail_reader(source: str) -> tuple[Callable[..., Any], Callable[..., Any]] | None:
    """``(read_tail, merge)`` of an importer that can read a file from a byte offset."""
    from importers import IMPORTERS

    module = importlib.import_module(IMPORTERS[source])
    read_tail, merge = getattr(module, "read_tail", None), getattr(module, "merge", None)
    return (read_tail, merge) if callable(read_tail) and callable(merge) else None


def appendable(change: Change) -> bool:
    """Is this file read line by line from an offset (a plain file of such an importer)?"""
    if change.source is None or change.path.name.lower().endswith((".zst", ".zip", ".gz")):
        return False
    return _tail_reader(change.source) is not None


def import_change(ledger: Any, change: Change) -> tuple[dict[str, Any], FileState]:
    """Import one new, grown or changed file; its counts and the state to record."""
    from flows.importing import run_import
    from store.ledger import storable

    assert change.source is not None
    prev = change.previous
    tail_of = _tail_reader(change.source) if appendable(change) else None
    if tail_of is None:
        stats = run_import(ledger, change.source, str(change.path))
        stats.update(read_from=0, read_to=change.size)
        return stats, change.state(
            read_to=change.size, lines_read=0, imports=(prev.imports if prev else 0) + 1
        )
    read_tail, merge = tail_of
    grown = change.action == "grown" and prev is not None
    start = prev.read_to if grown and prev is not None else 0
    first = prev.lines_read + 1 if grown and prev is not None else 1
    ended: dict[str, int] = {}

    def items(report: Any) -> Iterator[Any]:
        tail = read_tail(change.path, start, first_line=first)
        report.bytes_total = max(0, change.size - start)
        report.bytes_read = tail.end - start
        ended.update(end=tail.end, last_line=tail.last_line)
        yield from tail.quarantined
        for conv in tail.conversations:
            key = storable(conv.key)
            if grown and ledger.has_conversation(key):
                # the ledger's bytes (raw: not what a `pmem forget --secret` redacts for drafting)
                conv = merge(ledger.load(key, raw=True), conv)
            yield conv

    stats = run_import(ledger, change.source, str(change.path), items=items)
    end, last = ended.get("end", start), ended.get("last_line", first - 1)
    stats.update(read_from=start, read_to=end)
    return stats, change.state(
        read_to=end, lines_read=last, imports=(prev.imports if prev else 0) + 1
    )


# ---------------------------------------------------------------- the pass

_SUMMED = (
    "conversations_new",
    "conversations_changed",
    "conversations_unchanged",
    "messages_new",
    "quarantined",
    "bytes_read",
)


def new_summary(pass_id: str, roots: list[Path], opts: PassOptions) -> dict[str, Any]:
    return {
        "pass_id": pass_id,
        "status": "complete",
        "trigger": opts.trigger,
        "paths": [str(r) for r in roots],
        "paths_missing": [str(r) for r in roots if not r.exists()],
        "full": opts.full,
        "verify": opts.verify,
        "files": dict.fromkeys(ACTIONS, 0),
        "files_checked": 0,
        "files_hashed": 0,
        "files_imported": 0,
        **dict.fromkeys(_SUMMED, 0),
        "imported": [],
        "errors": [],
        "indexed_messages": 0,
        "embedded_messages": 0,
        "messages_without_vectors": None,
        "messages_without_forms": 0,
        "vectors": None,
        "indexed": None,
        "scan_seconds": 0.0,
        "import_seconds": 0.0,
        "index_seconds": 0.0,
        "elapsed_seconds": 0.0,
    }


@contextlib.contextmanager
def _pass_lock(settings: Settings, command: str) -> Iterator[None]:
    """The data dir's run lock for one pass (already held by this process: kept as it is)."""
    if runlock.current() is not None:
        yield
        return
    with runlock.hold(settings.data_dir, command):
        yield


def run_pass(
    settings: Settings,
    paths: list[str] | None = None,
    opts: PassOptions | None = None,
    *,
    command: str = "pmem watch",
) -> dict[str, Any]:
    """One pass: scan, import what changed, index the new messages. Holds the run lock
    (``RunLocked`` when another run holds it). Returns the summary (counts and paths only)."""
    opts = opts or PassOptions()
    with _pass_lock(settings, command):
        from flows.pipeline import Pipeline

        # a pass drafts nothing: the offline drafter, so that a vendor model in PMEM_LLM whose key
        # is not in a schedule's environment does not stop the import
        p = Pipeline.open(settings, llm="extractive")
        try:
            return _run_pass(p, paths, opts)
        finally:
            p.close()


def _emit(opts: PassOptions, kind: str, **data: Any) -> None:
    if opts.on_event is not None:
        opts.on_event(kind, data)


def _run_pass(p: Any, paths: list[str] | None, opts: PassOptions) -> dict[str, Any]:
    from flows.pipeline import index_for_search

    started = time.monotonic()
    state = WatchState(p.db)
    roots = resolve_roots(paths, state.roots())
    pass_id = state.start_pass(opts.trigger)
    summary = new_summary(pass_id, roots, opts)
    status = "failed"
    try:
        _emit(opts, "scan", roots=[str(r) for r in roots])
        recorded = state.files([str(r) for r in roots])
        changes = scan(roots, recorded, opts)
        summary["scan_seconds"] = round(time.monotonic() - started, 3)
        for c in changes:
            summary["files"][c.action] += 1
            if c.action != "gone":
                summary["files_checked"] += 1
            summary["files_hashed"] += c.hashed
        state.record([c.state() for c in changes if c.action in ("touched", "unknown-format")])
        state.mark_gone([str(c.path) for c in changes if c.action == "gone"])
        todo = [c for c in changes if c.action in IMPORTED]
        _emit(opts, "import", total=len(todo), checked=summary["files_checked"])
        t0 = time.monotonic()
        for i, change in enumerate(todo, 1):
            _import_one(p, state, change, summary)
            _emit(
                opts,
                "imported",
                done=i,
                total=len(todo),
                path=str(change.path),
                action=change.action,
            )
        summary["import_seconds"] = round(time.monotonic() - t0, 3)
        for c in changes:
            if c.action == "failed" and c not in todo:
                summary["errors"].append(
                    {"file": str(c.path), "record": None, "reason": c.reason, "kind": "file"}
                )
        if summary["messages_new"] or _pending(p):
            t1 = time.monotonic()
            _emit(opts, "index", messages=summary["messages_new"])
            # the Japanese normal forms are the index's later stage: `--no-embed` leaves them, like
            # the vectors, to `pmem reindex` (as `pmem import --no-embed` does)
            out = index_for_search(p, embed=opts.embed, memories=False, forms=opts.embed)
            summary.update(
                indexed=out,
                indexed_messages=out["indexed_messages"],
                embedded_messages=out["messages"],
                messages_without_vectors=out["messages_without_vectors"],
                vectors=out["vectors"],
                messages_without_forms=out.get("messages_without_forms", 0),
            )
            summary["index_seconds"] = round(time.monotonic() - t1, 3)
        status = "failed" if summary["files"]["failed"] else "complete"
        summary["status"] = status
        return summary
    finally:
        summary["elapsed_seconds"] = round(time.monotonic() - started, 3)
        stats = {
            k: v
            for k, v in summary.items()
            if k not in ("imported", "errors", "indexed", "paths", "paths_missing")
        }
        with contextlib.suppress(Exception):
            state.finish_pass(pass_id, status, stats)
        _log.info(
            "watch pass %s %s: %d checked, %d imported, %d new messages",
            pass_id,
            status,
            summary["files_checked"],
            summary["files_imported"],
            summary["messages_new"],
        )


def _pending(p: Any) -> bool:
    """Messages queued for the index by an earlier import that stopped before its index step."""
    from search.reader import SearchStore

    return bool(SearchStore(p.db).has_pending())


def _import_one(p: Any, state: WatchState, change: Change, summary: dict[str, Any]) -> None:
    try:
        stats, row = import_change(p.ledger, change)
    except InputError as err:  # unknown source, a file that vanished: the next pass retries
        stats, row = {"errors": [], "input_error": str(err)}, None
        stats["errors"].append(
            {
                "file": str(change.path),
                "record": err.record,
                "reason": getattr(err, "reason", "unreadable-input"),
                "kind": "input",
            }
        )
    if stats["input_error"] or row is None:
        # not recorded: the next pass sees the file as changed again and retries it whole or
        # from where the last good pass stopped (what was read before the damage is kept)
        summary["files"][change.action] -= 1
        summary["files"]["failed"] += 1
        summary["errors"] += stats["errors"][:10]
        return
    state.record([row])
    summary["files_imported"] += 1
    for k in _SUMMED:
        summary[k] += stats.get(k, 0)
    summary["errors"] += stats["errors"][: max(0, 1000 - len(summary["errors"]))]
    summary["imported"].append(
        {
            "path": str(change.path),
            "action": change.action,
            "source": change.source,
            "read_from": stats["read_from"],
            "read_to": stats["read_to"],
            "bytes_read": stats["bytes_read"],
            "conversations_new": stats["conversations_new"],
            "conversations_changed": stats["conversations_changed"],
            "messages_new": stats["messages_new"],
            "quarantined": stats["quarantined"],
        }
    )
