"""Importers: one module per export source, loaded lazily.

Each module exposes ``iter_conversations(path) -> Iterator[Conversation | Quarantined]``.
"""

from __future__ import annotations

import importlib
import io
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import ijson

from core.errors import ConfigError

if TYPE_CHECKING:
    from core.models import Conversation
    from importers.chatgpt import Quarantined

IMPORTERS: dict[str, str] = {"chatgpt": "importers.chatgpt"}

SNIFF_BYTES = 64 * 1024


def iter_source(source: str, path: Path) -> Iterator[Conversation | Quarantined]:
    """Conversations of ``path`` read by the importer of ``source`` (imported on first use)."""
    module_name = IMPORTERS.get(source)
    if module_name is None:
        known = ", ".join(sorted(IMPORTERS))
        raise ConfigError(
            f"unknown source {source!r}; known sources: {known}",
            hint=f"pass one of: {known}",
        )
    module = importlib.import_module(module_name)
    iterator: Iterator[Conversation | Quarantined] = module.iter_conversations(path)
    return iterator


def sniff(path: Path) -> str | None:
    """Guess the source of an export file from its first bytes; None when unsure."""
    try:
        with Path(path).open("rb") as fp:
            head = fp.read(SNIFF_BYTES)
    except OSError:
        return None
    if _looks_like_chatgpt(head):
        return "chatgpt"
    return None


def _looks_like_chatgpt(head: bytes) -> bool:
    """A JSON array whose first element is an object with a ``mapping`` key."""
    head = head.removeprefix(b"\xef\xbb\xbf")
    if not head.lstrip().startswith(b"[") or b'"mapping"' not in head:
        return False
    parser = ijson.get_backend("python").parse  # exact on any text, and only 64 KB
    try:
        for prefix, event, value in parser(io.BytesIO(head)):
            if prefix == "item" and event == "map_key" and value == "mapping":
                return True
            if prefix == "" and event == "end_array":
                return False
    except (ijson.JSONError, UnicodeDecodeError):
        return False  # the head ends mid-document, or it is not JSON
    return False
