"""Content-addressed identity: tagged hashes of canonical JSON.

A tagged hash is ``"<tag>:" + sha256(canonical_json(value))[:n]``; the tag keeps hashes of
different kinds of thing apart (a batch id can never equal a message hash).
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from typing import Any

_WS = re.compile(r"\s+")


def canonical_json(value: Any) -> bytes:
    """Deterministic JSON bytes: sorted keys, no spaces, UTF-8 (lone surrogates kept escaped)."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str
    ).encode("ascii")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def tagged_hash(tag: str, value: Any, length: int = 64) -> str:
    return f"{tag}:{sha256_hex(canonical_json(value))[:length]}"


def text_bytes(text: str) -> bytes:
    """The exact bytes we store for a text: UTF-8, lone surrogates kept (``surrogatepass``)."""
    return text.encode("utf-8", "surrogatepass")


def bytes_text(data: bytes) -> str:
    return data.decode("utf-8", "surrogatepass")


def content_hash(text: str) -> str:
    return "sha256:" + sha256_hex(text_bytes(text))


def normalize_for_identity(text: str) -> str:
    """NFKC, white space collapsed, stripped: 'materially identical' texts compare equal."""
    return _WS.sub(" ", unicodedata.normalize("NFKC", text)).strip()


def evidence_hash(text: str) -> str:
    return "ev:" + sha256_hex(text_bytes(normalize_for_identity(text)))
