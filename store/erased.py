"""What `pmem forget` erased, as the writers below it read it: the erasure key
(``<data dir>/erasure.key``, 0600, never in the database), the keyed HMACs of what was erased
(``ErasedIndex``: the ledger redacts a re-import with it), and the forgotten secrets the store's
guard scrubs from any record it writes (``forgotten_values``, ``forgotten_in_record``,
``forgotten_redactor``). The erasing itself is ``store.forget``'s, above the writers."""

from __future__ import annotations

import hmac
import json
import os
import re
import secrets as _random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from psycopg import Connection

from core.errors import ConfigError
from core.hashing import bytes_text, text_bytes
from core.models import Channel, Conversation
from core.people import norm_name as speaker_name
from core.secrets import redaction_marker

MARKER = redaction_marker("forgotten")
KEY_FILE = "erasure.key"
MIN_SECRET_CHARS = 4
DERIVED_DOMAIN = "derived:"  # HMAC domain of a secret forgotten from everything derived only
_WINDOW = 8  # SQL prefilter: a row is read when it holds any 8-character window of the secret
_PIECE = re.compile(r"[A-Za-z0-9+/=_\-.~]{8,}")
_ASCII_WORD = re.compile(r"(?<![A-Za-z0-9])[A-Za-z0-9]")
_OTHER_START = re.compile(r"[^A-Za-z0-9]")

SPEAKER_DOMAIN = "speaker:"  # HMAC domain of a speaker erased from the ledger (kind 'message')
# roles that name a part of the conversation, not a speaker (never matched by --speaker)
_NOT_SPEAKERS = frozenset({"user", "assistant", "system", "tool", "unknown", MARKER})
_SPEAKER_CHANNELS = ("other", "machinery")

# tables whose rows forget rewrites by their own rules (not the generic column rewrite)
_SPECIAL = {
    "memories",
    "memory_revisions",
    "evidence",
    "message_search",
    "source_messages",
    "markers",
}


# ---------------------------------------------------------------- the key


def key_path(data_dir: Path) -> Path:
    return data_dir / KEY_FILE


def load_key(data_dir: Path, *, create: bool) -> bytes | None:
    """The per-data-dir HMAC key (32 random bytes, mode 0600); created on first use."""
    path = key_path(data_dir)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        if not create:
            return None
        data_dir.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        except FileExistsError:
            return load_key(data_dir, create=False)
        data = _random.token_bytes(32)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        return data
    if len(data) < 32:
        raise ConfigError(f"{path} is not a valid erasure key (too short)")
    return data


def keyed_hash(key: bytes, value: str) -> str:
    return hmac.new(key, text_bytes(value), "sha256").hexdigest()


# ---------------------------------------------------------------- matching a secret


class Scrubber:
    """Replaces a secret (any case) with the marker; with a secret of 12+ characters, also a
    token that is a long piece of it (a key that lost its prefix, a secret cut at ``/``)."""

    def __init__(self, secret: str) -> None:
        if len(secret) < MIN_SECRET_CHARS:
            raise ConfigError(
                f"a secret to forget must have at least {MIN_SECRET_CHARS} characters"
            )
        self.secret = secret
        self._full = re.compile(re.escape(secret), re.IGNORECASE)
        self._low = secret.lower()
        self._piece = max(_WINDOW, len(secret) // 3) if len(secret) >= 12 else None

    def text(self, s: str) -> str:
        out = self._full.sub(MARKER, s)
        if self._piece is not None:
            out = _PIECE.sub(self._cut, out)
        return out

    def _cut(self, m: re.Match[str]) -> str:
        t = m.group()
        return (
            MARKER
            if self._piece is not None and len(t) >= self._piece and t.lower() in self._low
            else t
        )

    def value(self, v: Any) -> Any:
        if isinstance(v, str):
            return self.text(v)
        if isinstance(v, list):
            return [self.value(x) for x in v]
        if isinstance(v, tuple):
            return tuple(self.value(x) for x in v)
        if isinstance(v, dict):
            return {self.text(k) if isinstance(k, str) else k: self.value(x) for k, x in v.items()}
        if isinstance(v, (bytes, memoryview)):
            return text_bytes(self.text(bytes_text(bytes(v))))
        return v

    def hits(self, v: Any) -> bool:
        return self.value(v) != v

    def patterns(self) -> list[str]:
        """LIKE patterns (lower case) a row holding the secret or a piece of it matches."""
        forms = {self._low, json.dumps(self._low, ensure_ascii=False)[1:-1]}
        w = min(_WINDOW, len(self._low))
        out = set()
        for f in forms:
            for i in range(len(f) - w + 1):
                out.add("%" + _like_escape(f[i : i + w]) + "%")
        return sorted(out)

    def byte_forms(self) -> list[bytes]:
        return sorted(
            {text_bytes(self.secret), text_bytes(self._low), text_bytes(self.secret.upper())}
        )


def _like_escape(s: str) -> str:
    return s.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")


# ---------------------------------------------------------------- the re-import check


@dataclass
class ErasedIndex:
    """What was erased from the ledger, as keyed HMACs: the import consults it so that the same
    export brings nothing back."""

    key: bytes
    conversations: set[str] = field(default_factory=set)
    messages: set[str] = field(default_factory=set)
    secrets: dict[int, dict[str, bool]] = field(default_factory=dict)  # length -> hmac -> ascii

    @classmethod
    def load(
        cls, conn: Connection, key_source: Any, *, secrets_only: bool = False
    ) -> ErasedIndex | None:
        """None when nothing was ever erased (the fast path).
        ``key_source``: the key, or a callable returning it (read only when needed)."""
        rows = conn.execute(
            "SELECT kind, hmac, length, ascii_start FROM erased_content"
            + (" WHERE kind = 'secret'" if secrets_only else "")
        ).fetchall()
        if not rows:
            return None
        key = key_source() if callable(key_source) else key_source
        if not key:
            raise ConfigError(
                "the ledger has content erased by `pmem forget --from-ledger`, but the erasure "
                "key (<data dir>/erasure.key) is missing",
                hint="run the import with the data dir that holds erasure.key",
            )
        idx = cls(key=key)
        for kind, h, length, ascii_start in rows:
            if kind == "conversation":
                idx.conversations.add(h)
            elif kind == "message":
                idx.messages.add(h)
            elif length:
                idx.secrets.setdefault(length, {})[h] = bool(ascii_start)
        return idx

    def spans(self, text: str, *, derived: bool = False) -> list[tuple[int, int]]:
        """Where an erased secret occurs (any case), found by its HMAC. ``derived``: also the
        secrets forgotten from everything derived only (their HMAC has the ``derived:`` domain)."""
        if not self.secrets or not text:
            return []
        out: list[tuple[int, int]] = []
        low = text.lower()
        if len(low) != len(text):
            low = text
        for length, entries in self.secrets.items():
            kinds = set(entries.values())
            starts: set[int] = set()
            if True in kinds:
                starts |= {m.start() for m in _ASCII_WORD.finditer(text)}
            if False in kinds:
                starts |= {m.start() for m in _OTHER_START.finditer(text)}
            for i in starts:
                if i + length > len(text):
                    continue
                window = low[i : i + length]
                if keyed_hash(self.key, window) in entries or (
                    derived and keyed_hash(self.key, DERIVED_DOMAIN + window) in entries
                ):
                    out.append((i, i + length))
        return sorted(out)

    def redact_text(self, text: str, *, derived: bool = False) -> str:
        """Every span whose lower-cased text has an erased secret's HMAC becomes the marker."""
        spans = self.spans(text, derived=derived)
        if not spans:
            return text
        out, cursor = [], 0
        for s, e in spans:
            if s < cursor:
                cursor = max(cursor, e)
                continue
            out += [text[cursor:s], MARKER]
            cursor = e
        out.append(text[cursor:])
        return "".join(out)

    def speaker_erased(self, channel: Channel, role: str) -> bool:
        """Whether a message of this channel and role is a speaker's that `pmem forget --speaker
        --from-ledger` erased."""
        if channel.value not in _SPEAKER_CHANNELS or role in _NOT_SPEAKERS or not self.messages:
            return False
        return keyed_hash(self.key, SPEAKER_DOMAIN + speaker_name(role)) in self.messages

    def redact_speakers(self, title: str) -> str:
        """A title naming a speaker `pmem forget --speaker` erased (a one-to-one chat is titled
        by its partner): the name becomes the marker (``name_spans``, by the name's HMAC)."""
        if not self.messages or not title:
            return title
        return redact_names(
            title,
            lambda name: keyed_hash(self.key, SPEAKER_DOMAIN + speaker_name(name)) in self.messages,
        )

    def apply(self, conn: Connection, conv: Conversation) -> Conversation | None:
        """The conversation as the ledger may take it: None when it was erased; erased messages
        keep their stored (redacted) body; new messages and the title lose any erased secret."""
        if keyed_hash(self.key, conv.key) in self.conversations:
            return None
        erased = [m.key for m in conv.messages if keyed_hash(self.key, m.key) in self.messages]
        existing: dict[str, bytes | None] = {}
        if erased or self.secrets:
            for k, body, is_erased in conn.execute(
                "SELECT message_key, body, message_key = ANY(%s) FROM source_messages WHERE conversation_key = %s",
                (erased, conv.key),
            ):
                existing[k] = bytes(body) if is_erased else None
        messages = []
        for m in conv.messages:
            if m.key in erased:
                stored = existing.get(m.key)
                text = bytes_text(stored) if stored is not None else MARKER
            elif m.key not in existing and self.speaker_erased(m.channel, m.role):
                messages.append(m.model_copy(update={"text": MARKER, "role": MARKER}))
                continue
            elif m.key not in existing:
                text = self.redact_text(m.text)
            else:
                text = m.text
            messages.append(m if text == m.text else m.model_copy(update={"text": text}))
        title = self.redact_speakers(self.redact_text(conv.title)) if conv.title else conv.title
        if title == conv.title and all(
            a is b for a, b in zip(messages, conv.messages, strict=True)
        ):
            return conv
        return conv.model_copy(update={"messages": messages, "title": title})


_WORD = re.compile(r"\S+")
_NAME_WORDS = 6  # the longest name matched in a title, in words


def redact_names(title: str, is_name: Callable[[str], bool]) -> str:
    """``title`` with every run of whole words that ``is_name`` accepts (longest first) replaced
    by the marker: the importers write a chat's name into its title as written, so a speaker's
    name is found there as whole words (NFKC and case folding are ``is_name``'s)."""
    words = [m.span() for m in _WORD.finditer(title)]
    out, i, cursor = [], 0, 0
    while i < len(words):
        for n in range(min(_NAME_WORDS, len(words) - i), 0, -1):
            start, end = words[i][0], words[i + n - 1][1]
            if is_name(title[start:end]):
                out += [title[cursor:start], MARKER]
                cursor, i = end, i + n
                break
        else:
            i += 1
    return "".join([*out, title[cursor:]]) if out else title


def _settings_key() -> bytes | None:
    from core.settings import get_settings

    return load_key(get_settings().data_dir, create=False)


def forgotten_values(conn: Connection, texts: Iterable[str], key: bytes | None = None) -> set[str]:
    """The occurrences, in these texts, of every secret `pmem forget` erased (found by HMAC, as
    written there). The store's guard scrubs them, and pieces of them, from any record it writes
    and refuses evidence holding one: a forgotten secret the ledger still keeps cannot come back
    through a later draft. Empty (one query) when nothing was forgotten."""
    idx = ErasedIndex.load(conn, key or _settings_key, secrets_only=True)
    if idx is None:
        return set()
    return {t[s:e] for t in texts for s, e in idx.spans(t, derived=True)}


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _strings(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)


def forgotten_in_record(conn: Connection, record: Any) -> set[str]:
    """The forgotten secrets a record's own text holds (a client's write, a backup brought
    back): the store's guard adds them to what it scrubs."""
    return forgotten_values(conn, list(_strings(record)))


def forgotten_redactor(conn: Connection, key: bytes | None = None) -> Any:
    """A function redacting every forgotten secret from a text (the ledger as derivation sees
    it), or None when nothing was forgotten (one query)."""
    idx = ErasedIndex.load(conn, key or _settings_key, secrets_only=True)
    if idx is None:
        return None
    return lambda text: idx.redact_text(text, derived=True)
