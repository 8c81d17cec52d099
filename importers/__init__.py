"""Importers: one module per export source, loaded lazily, and format sniffing.

Each module exposes ``iter_conversations(path) -> Iterator[Conversation | Quarantined]`` and reads
what its format allows:

===============  ===================================================================
source           accepts
===============  ===================================================================
``chatgpt``      export zip, folder, ``conversations.json``, ``conversations-NNN.json``
``claude``       export zip, folder, ``conversations.json`` (+ ``projects.json``)
``codex``        a rollout ``.jsonl`` / ``.jsonl.zst`` / early ``.json``, or a sessions tree
``claude-code``  a transcript ``.jsonl``, or a ``~/.claude/projects`` tree
``jsonl-log``    a person's own log ``.jsonl`` (``{ts, role, text}``, the 7-field log), or a
                 folder of daily files
``line``         LINE's "save chat history" ``.txt`` (PC or phone, English or Japanese), or a
                 folder of them
``telegram``     Telegram Desktop's ``result.json`` (one chat or the whole account), or a folder
                 of exports
===============  ===================================================================

Every item is a :class:`~core.models.Conversation` or a :class:`Quarantined` record (``position``
and a machine-readable ``reason``, never message text). An export we cannot read at all raises
:class:`~core.errors.InputError` naming the file and the record.
"""

from __future__ import annotations

import importlib
import io
import json
import re
import zipfile
from collections.abc import Iterator
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

import ijson

from core.errors import ConfigError
from importers._common import Quarantined, ReadReport

if TYPE_CHECKING:
    from core.models import Conversation

__all__ = ["IMPORTERS", "Quarantined", "ReadReport", "check_source", "iter_source", "sniff"]

IMPORTERS: dict[str, str] = {
    "chatgpt": "importers.chatgpt",
    "claude": "importers.claude",
    "codex": "importers.codex",
    "claude-code": "importers.claude_code",
    "jsonl-log": "importers.jsonl_log",
    "line": "importers.line",
    "telegram": "importers.telegram",
}

# what a person calls each source (messages about a wrong --source)
SOURCE_NAMES: dict[str, str] = {
    "chatgpt": "ChatGPT",
    "claude": "Claude.ai",
    "codex": "Codex",
    "claude-code": "Claude Code",
    "jsonl-log": "JSONL log",
    "line": "LINE",
    "telegram": "Telegram",
}

SNIFF_BYTES = 64 * 1024
SNIFF_LINE_BYTES = 1 << 20  # a JSONL head line can be long (Codex base instructions)
SNIFF_FILES = 20  # files looked at in a folder before giving up

_CHATGPT_NAME = re.compile(r"conversations(?:-\d+)?\.json", re.IGNORECASE)
CODEX_LINE_TYPES = frozenset(
    {"session_meta", "response_item", "event_msg", "turn_context", "compacted", "world_state"}
)
CLAUDE_CODE_LINE_TYPES = frozenset(
    {
        "user",
        "assistant",
        "system",
        "summary",
        "file-history-snapshot",
        "queue-operation",
        "progress",
        "attachment",
        "last-prompt",
        "custom-title",
        "ai-title",
        "permission-mode",
    }
)


def iter_source(
    source: str, path: Path, report: ReadReport | None = None
) -> Iterator[Conversation | Quarantined]:
    """Conversations of ``path`` read by the importer of ``source`` (imported on first use). With
    a ``report``, the importer counts the files it skipped (by reason) and the bytes it read."""
    module_name = IMPORTERS.get(source)
    if module_name is None:
        known = ", ".join(sorted(IMPORTERS))
        raise ConfigError(
            f"unknown source {source!r}; known sources: {known}",
            hint=f"pass one of: {known}",
        )
    module = importlib.import_module(module_name)
    iterator: Iterator[Conversation | Quarantined] = module.iter_conversations(
        Path(path), report=report
    )
    return iterator


# ---------------------------------------------------------------- sniffing


def check_source(path: Path, source: str | None) -> str:
    """The source an export is read as, checked before anything is read (`pmem import`,
    `pmem backfill`): the sniffed format when no --source is given; a --source that contradicts
    what the file positively looks like is refused (ConfigError naming the right one); an
    inconclusive sniff (a damaged file) takes --source as given."""
    if source is not None and source not in IMPORTERS:
        raise ConfigError(
            f"unknown source {source!r}", hint=f"--source is one of {', '.join(sorted(IMPORTERS))}"
        )
    found = sniff(path)
    if source is None:
        if found is None:
            raise ConfigError(
                f"{Path(path).name}: cannot tell the format of this export",
                hint=f"pass --source {', '.join(IMPORTERS)}",
            )
        return found
    if found is not None and found != source:
        raise ConfigError(
            f"{Path(path).name} looks like a {SOURCE_NAMES.get(found, found)} export: "
            f"use --source {found}",
            hint=f"--source {source} reads {SOURCE_NAMES.get(source, source)} exports",
        )
    return source


def sniff(path: Path) -> str | None:
    """Guess the source of an export file, folder or zip; None when unsure."""
    path = Path(path)
    try:
        if path.is_dir():
            return _sniff_folder(path)
        if not path.is_file():  # a named pipe would block the open: never sniff one
            return None
        if zipfile.is_zipfile(path):
            return _sniff_zip(path)
        with path.open("rb") as fp:
            return sniff_bytes(fp.read(SNIFF_LINE_BYTES), path.name)
    except (OSError, zipfile.BadZipFile, EOFError, RuntimeError):
        return None


def sniff_bytes(head: bytes, name: str = "") -> str | None:
    """The source of a file from its first bytes (and name, for compressed rollouts)."""
    lowered = name.lower()
    if lowered.endswith(".zst"):
        return "codex" if lowered.startswith("rollout-") or _zstd_head_is_codex(head) else None
    head = head.removeprefix(b"\xef\xbb\xbf")
    stripped = head.lstrip()
    if stripped.startswith(b"[LINE]"):
        return "line"
    if stripped.startswith(b"["):
        return _sniff_array(head[:SNIFF_BYTES])
    if stripped.startswith(b"{"):
        return _sniff_jsonl(head) or _sniff_chat_json(head[:SNIFF_BYTES])
    return _sniff_chat_text(head)


def _sniff_chat_json(head: bytes) -> str | None:
    from importers.telegram import is_telegram_head

    return "telegram" if is_telegram_head(head) else None


def _sniff_chat_text(head: bytes) -> str | None:
    from importers.line import is_line_head

    return "line" if is_line_head(head) else None


def _sniff_array(head: bytes) -> str | None:
    """ChatGPT (``mapping``) or Claude.ai (``chat_messages`` or a project's ``docs``)."""
    keys = _first_item_keys(head)
    if "mapping" in keys:
        return "chatgpt"
    if (
        "chat_messages" in keys
        or ({"uuid", "docs"} <= keys)
        or ({"uuid", "prompt_template"} <= keys)
    ):
        return "claude"
    return None


def _first_item_keys(head: bytes) -> set[str]:
    """Keys of the array's first object, as far as the head reaches."""
    keys: set[str] = set()
    parser = ijson.get_backend("python").parse  # exact on any text, and only 64 KB
    try:
        for prefix, event, value in parser(io.BytesIO(head)):
            if prefix == "item" and event == "map_key":
                keys.add(value)
            elif (prefix, event) in (("item", "end_map"), ("", "end_array")):
                break
    except (ijson.JSONError, UnicodeDecodeError):
        pass  # the head ends mid-document, or it is not JSON
    return keys


def _sniff_jsonl(head: bytes) -> str | None:
    lines = head.split(b"\n")
    complete = lines[:-1] if len(lines) > 1 else lines
    for raw in complete[:50]:
        if not raw.strip():
            continue
        try:
            record = json.loads(raw)
        except (ValueError, UnicodeDecodeError):
            continue
        found = _sniff_record(record)
        if found:
            return found
    return _sniff_partial_line(head)


def _sniff_record(record: Any) -> str | None:
    if not isinstance(record, dict):
        return None
    kind = record.get("type")
    if kind in CODEX_LINE_TYPES and "payload" in record:
        return "codex"
    if isinstance(record.get("session"), dict) and isinstance(record.get("items"), list):
        return "codex"  # the early TypeScript CLI
    if "record_type" in record or ({"id", "timestamp", "instructions"} <= record.keys()):
        return "codex"  # the bare era
    if kind in CLAUDE_CODE_LINE_TYPES and ("sessionId" in record or "leafUuid" in record):
        return "claude-code"
    if kind in ("user", "assistant") and "parentUuid" in record:
        return "claude-code"
    if "text" in record and "ts" in record and ("role" in record or "actor" in record):
        return "jsonl-log"  # a person's own log: {ts, role, text} or the 7-field record
    return None


def _sniff_partial_line(head: bytes) -> str | None:
    """The first line is longer than the head: look for the envelope's markers."""
    first = head[:SNIFF_BYTES]
    if b'"type":"session_meta"' in first.replace(b" ", b"") and b'"payload"' in first:
        return "codex"
    if b'"sessionId"' in first and b'"parentUuid"' in first:
        return "claude-code"
    return None


def _zstd_head_is_codex(head: bytes) -> bool:
    try:
        import zstandard
    except ImportError:
        return False
    try:
        reader = zstandard.ZstdDecompressor().stream_reader(io.BytesIO(head))
        data = reader.read(SNIFF_BYTES)
    except zstandard.ZstdError:
        return False
    return _sniff_jsonl(data) == "codex"


def _sniff_zip(path: Path) -> str | None:
    with zipfile.ZipFile(path) as archive:
        names = [i.filename for i in archive.infolist() if not i.is_dir()]
        conversations = [n for n in names if _CHATGPT_NAME.fullmatch(PurePosixPath(n).name)]
        for name in sorted(conversations):
            with archive.open(name) as fp:
                found = sniff_bytes(fp.read(SNIFF_BYTES), name)
            if found:
                return found
        if any(PurePosixPath(n).name.lower() == "projects.json" for n in names):
            return "claude"
    return None


def _sniff_folder(folder: Path) -> str | None:
    for name in ("conversations.json", "projects.json"):
        direct = folder / name
        if direct.is_file():
            return sniff(direct)
    if (folder / "sessions").is_dir() or (folder / "archived_sessions").is_dir():
        return "codex"
    if (folder / "projects").is_dir() and any((folder / "projects").rglob("*.jsonl")):
        return "claude-code"
    for count, candidate in enumerate(_candidate_files(folder)):
        if count >= SNIFF_FILES:
            break
        found = sniff(candidate)
        if found:
            return found
    return None


def _candidate_files(folder: Path) -> Iterator[Path]:
    patterns = ("conversations*.json", "rollout-*", "*.jsonl", "result.json", "*.txt")
    for pattern in patterns:
        for path in folder.rglob(pattern):
            if path.is_file() and path.stat().st_size > 0:
                yield path
