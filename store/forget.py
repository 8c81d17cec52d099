"""`pmem forget`: erase a secret string, a memory or a whole conversation from every store that
holds text (the list is ``store.derived``), irreversibly.

- ``forget_secret``: every occurrence (any case; also an alias or tag that is a long piece of
  it) becomes ``[REDACTED:forgotten]`` in memories, every revision (through the one audited
  exception to the insert-only rule, ``pmem_redact_revision``), evidence, search projections,
  the raw-message index, proposals, idempotency responses and every other registered text
  column; vectors of what changed are dropped. A memory that changed gets a new revision
  (reason ``redaction``) that records when and which fields, never the text.
- ``forget_memory``: the memory, its revisions (``pmem_erase_revisions``), evidence,
  projection, vectors and proposals are deleted; a tombstone (ids only) keeps any later draft
  from re-creating it.
- ``forget_conversation``: every memory resting on it is erased as above, its messages leave
  the raw-message index and it is never drafted or indexed again.
- ``forget_speaker``: another speaker of a chat history (channel ``other``, or their stickers and
  photos: ``machinery`` under their name) by name, compared after NFKC and case folding as the
  importers compare ``PMEM_ME``: their messages leave the raw-message index and its vectors,
  every memory citing one of them is erased, and summaries citing them go. With
  ``from_ledger`` (what `pmem forget --speaker` always asks: another person's words are not the
  owner's record to keep) their messages keep their place but not their text or name, and the
  speaker is remembered (a keyed HMAC of ``speaker:<name>``, kind ``message``) so that their
  messages in a later import arrive erased too.

With ``from_ledger`` the ledger is erased too, and what was erased is remembered as a keyed
HMAC (the key is ``<data dir>/erasure.key``, 0600, never in the database) so that importing the
same export again cannot bring it back (``ErasedIndex``, used by ``store.ledger``).

Files under ``runs/`` are scrubbed by ``state.files.scrub_run_files`` (the CLI runs both). After
the erasure the touched tables are rewritten with ``VACUUM FULL`` and a ``CHECKPOINT`` is taken
(see docs/security.md, "Erasure").
"""

from __future__ import annotations

import hmac
import json
import os
import re
import secrets as _random
import unicodedata
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
from psycopg import Connection, sql
from psycopg.rows import dict_row
from psycopg.types.json import Jsonb

from core.errors import ConfigError, MemoryNotFound, StoreError
from core.hashing import bytes_text, content_hash, evidence_hash, tagged_hash, text_bytes
from core.models import Channel, Conversation
from core.secrets import redaction_marker
from core.textsearch import index_tokens_long
from store.concepts import ConceptStore
from store.db import Database
from store.derived import REGISTRY, SCHEMA_COLUMNS_SQL, TABLE_STORES

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
        title = self.redact_text(conv.title) if conv.title else conv.title
        if title == conv.title and all(
            a is b for a, b in zip(messages, conv.messages, strict=True)
        ):
            return conv
        return conv.model_copy(update={"messages": messages, "title": title})


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


# ---------------------------------------------------------------- the erasure


@dataclass
class Erasure:
    """What one forget did (ids and counts only), and what the file scrub must do."""

    erasure_id: str
    target: str
    from_ledger: bool
    counts: dict[str, int] = field(default_factory=dict)
    tables: set[str] = field(default_factory=set)
    memories_erased: list[str] = field(default_factory=list)
    memories_redacted: list[str] = field(default_factory=list)
    conversations: list[str] = field(default_factory=list)
    hash_map: dict[str, str] = field(default_factory=dict)  # old conversation hash -> new
    batches: list[str] = field(default_factory=list)  # batches whose files hold the conversation
    messages: list[str] = field(default_factory=list)  # message keys of an erased speaker

    def add(self, name: str, n: int = 1) -> None:
        if n:
            self.counts[name] = self.counts.get(name, 0) + n


class Forgetter:
    def __init__(self, db: Database, key: bytes) -> None:
        self.db = db
        self.key = key
        self._columns: dict[str, dict[str, str]] | None = None

    # ------------------------------------------------------------ schema

    def columns(self, conn: Connection) -> dict[str, dict[str, str]]:
        """table -> column -> data type, for the registered columns that exist."""
        if self._columns is None:
            live: dict[str, dict[str, str]] = {}
            for table, column, data_type, udt in conn.execute(SCHEMA_COLUMNS_SQL):
                live.setdefault(table, {})[column] = (
                    udt if data_type in ("ARRAY", "USER-DEFINED") else data_type
                )
            self._columns = {
                s.table: {c: live[s.table][c] for c in (*s.scanned,) if c in live.get(s.table, {})}
                for s in TABLE_STORES
                if s.table in live
            }
        return self._columns

    @staticmethod
    def _candidate(column: str, dtype: str) -> sql.Composable:
        col = sql.Identifier(column)
        if dtype == "bytea":
            return sql.SQL(
                "EXISTS (SELECT 1 FROM unnest(%(bytes)s::bytea[]) b WHERE position(b IN {}) > 0)"
            ).format(col)
        if dtype in ("text", "character varying", "character"):
            return sql.SQL("lower({}) LIKE ANY(%(pats)s)").format(col)
        return sql.SQL("lower({}::text) LIKE ANY(%(pats)s)").format(col)

    def _params(self, scrub: Scrubber) -> dict[str, Any]:
        return {"pats": scrub.patterns(), "bytes": scrub.byte_forms()}

    # ------------------------------------------------------------ looking

    def scan(self, needle: str, *, ledger: bool = True) -> dict[str, int]:
        """Rows holding ``needle`` (any case), per ``table.column``, over every registered column."""
        scrub = Scrubber(needle)
        params = {
            "pats": [
                "%" + _like_escape(needle.lower()) + "%",
                "%" + _like_escape(json.dumps(needle.lower(), ensure_ascii=False)[1:-1]) + "%",
            ],
            "bytes": scrub.byte_forms(),
        }
        out: dict[str, int] = {}
        with self.db.connection() as conn:
            for table, cols in self.columns(conn).items():
                if not ledger and REGISTRY[table].layer == "ledger":
                    continue
                for col, dtype in cols.items():
                    q = sql.SQL("SELECT count(*) FROM {} WHERE {}").format(
                        sql.Identifier(table), self._candidate(col, dtype)
                    )
                    n = conn.execute(q, params).fetchone()[0]  # type: ignore[index]
                    if n:
                        out[f"{table}.{col}"] = n
        return out

    def memory_plan(self, memory_id: str) -> dict[str, Any]:
        with self.db.connection() as conn:
            row = conn.execute("SELECT status FROM memories WHERE id = %s", (memory_id,)).fetchone()
            if row is None:
                if self._was_erased(conn, memory_id):
                    return {"memory_id": memory_id, "already_erased": True}
                raise MemoryNotFound(memory_id)
            n_rev, n_ev, n_conv = conn.execute(
                """SELECT (SELECT count(*) FROM memory_revisions WHERE memory_id = %(id)s),
                          (SELECT count(*) FROM evidence WHERE memory_id = %(id)s),
                          (SELECT count(DISTINCT regexp_replace(source_key, ':[^:]*$', ''))
                             FROM evidence WHERE memory_id = %(id)s)""",
                {"id": memory_id},
            ).fetchone()  # type: ignore[misc]
        return {
            "memory_id": memory_id,
            "status": row[0],
            "revisions": n_rev,
            "evidence": n_ev,
            "source_conversations": n_conv,
            "already_erased": False,
        }

    def conversation_plan(self, conversation_key: str) -> dict[str, Any]:
        with self.db.connection() as conn:
            n_msg = conn.execute(
                "SELECT count(*) FROM source_messages WHERE conversation_key = %s",
                (conversation_key,),
            ).fetchone()[0]  # type: ignore[index]
            mems = self._memories_of(conn, conversation_key)
            forgotten = conn.execute(
                "SELECT 1 FROM forgotten_conversations WHERE conversation_key = %s",
                (conversation_key,),
            ).fetchone() is not None or self._erased_hmac(conn, conversation_key)
        if not n_msg and not mems and not forgotten:
            raise StoreError(
                f"no conversation {conversation_key} in the ledger or the memories",
                hint="`pmem ledger list` shows the conversation keys",
            )
        return {
            "conversation_key": conversation_key,
            "messages": n_msg,
            "memories": mems,
            "already_forgotten": bool(forgotten),
        }

    # ------------------------------------------------------------ erasing

    def forget_secret(self, secret: str, *, from_ledger: bool = False) -> Erasure:
        scrub = Scrubber(secret)
        er = self._new("secret", from_ledger)
        params = self._params(scrub)
        with self.db.connection() as conn, conn.transaction():
            cols = self.columns(conn)
            if from_ledger:
                self._redact_ledger(conn, scrub, er, params)
            self._redact_memories(conn, scrub, er, params)
            self._redact_message_index(conn, scrub, er, params)
            self._redact_markers(
                conn, scrub, er
            )  # shown to every client: with or without --from-ledger
            for table, tcols in cols.items():
                store = REGISTRY[table]
                if table in _SPECIAL or (store.layer == "ledger" and not from_ledger):
                    continue
                for col in store.text:
                    if col in tcols:
                        self._rewrite_column(conn, table, col, tcols[col], scrub, er, params)
            # remembered by HMAC: the store's guard keeps it out of any later record drafted
            # from the ledger (store.records); from the ledger, the import redacts it as well
            self._remember(
                conn,
                "secret",
                ("" if from_ledger else DERIVED_DOMAIN) + secret.lower(),
                length=len(secret),
                ascii_start=secret[0].isascii() and secret[0].isalnum(),
            )
            self._audit(conn, er)
        from store import records

        records._SECRET_CACHE.clear()  # this process's guard sees the forgotten secret at once
        return er

    def forget_memory(self, memory_id: str, *, from_ledger: bool = False) -> Erasure:
        er = self._new("memory", from_ledger)
        with self.db.connection() as conn, conn.transaction():
            if (
                conn.execute(
                    "SELECT 1 FROM memories WHERE id = %s FOR UPDATE", (memory_id,)
                ).fetchone()
                is None
            ):
                if not self._was_erased(conn, memory_id):
                    raise MemoryNotFound(memory_id)
            else:
                keys = [
                    r[0]
                    for r in conn.execute(
                        "SELECT DISTINCT source_key FROM evidence WHERE memory_id = %s ORDER BY 1",
                        (memory_id,),
                    )
                ]
                self._erase_memory(conn, memory_id, er)
                if from_ledger and keys:
                    self._erase_messages(conn, keys, er)
            er.memories_erased = [memory_id]
            self._audit(conn, er)
        return er

    def forget_conversation(self, conversation_key: str, *, from_ledger: bool = False) -> Erasure:
        er = self._new("conversation", from_ledger)
        er.conversations = [conversation_key]
        with self.db.connection() as conn, conn.transaction():
            for mid in self._memories_of(conn, conversation_key):
                self._erase_memory(conn, mid, er)
            keys = [
                r[0]
                for r in conn.execute(
                    "SELECT message_key FROM source_messages WHERE conversation_key = %s",
                    (conversation_key,),
                )
            ]
            self._drop_summaries(conn, er, message_keys=keys)
            er.add(
                "message_index_rows",
                conn.execute(
                    "DELETE FROM message_search WHERE conversation_key = %s", (conversation_key,)
                ).rowcount,
            )
            conn.execute("DELETE FROM message_search_pending WHERE message_key = ANY(%s)", (keys,))
            er.tables |= {
                "message_search",
                "message_search_pending",
                *_vector_tables("message_key"),
            }
            like = "%" + _like_escape(conversation_key.lower()) + "%"
            n = (
                conn.execute(
                    "DELETE FROM proposals WHERE lower(payload::text) LIKE %s OR lower(coalesce(result::text, '')) LIKE %s",
                    (like, like),
                ).rowcount
                if "result" in self.columns(conn).get("proposals", {})
                else conn.execute(
                    "DELETE FROM proposals WHERE lower(payload::text) LIKE %s", (like,)
                ).rowcount
            )
            er.add("proposals", n)
            er.tables.add("proposals")
            er.batches = [
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT batch_id FROM batch_members WHERE conversation_key = %s ORDER BY 1",
                    (conversation_key,),
                )
            ]
            er.add(
                "batches_superseded",
                conn.execute(
                    """UPDATE batches SET status = 'superseded', updated_at = now()
                   WHERE batch_id = ANY(%s) AND status IN ('planned', 'drafted', 'failed')""",
                    (er.batches,),
                ).rowcount,
            )
            if from_ledger:
                er.tables |= self._drop_vectors(conn, "message_key", keys)
                er.add(
                    "ledger_messages",
                    conn.execute(
                        "DELETE FROM source_messages WHERE conversation_key = %s",
                        (conversation_key,),
                    ).rowcount,
                )
                for table in (
                    "prefilter_decisions",
                    "prefilter_overrides",
                    "forgotten_conversations",
                    "source_conversations",
                ):
                    conn.execute(
                        sql.SQL("DELETE FROM {} WHERE conversation_key = %s").format(
                            sql.Identifier(table)
                        ),
                        (conversation_key,),
                    )
                er.tables |= {"source_messages", "source_conversations", "prefilter_decisions"}
                self._remember(conn, "conversation", conversation_key)
            else:
                conn.execute(
                    "INSERT INTO forgotten_conversations (conversation_key) VALUES (%s) ON CONFLICT DO NOTHING",
                    (conversation_key,),
                )
            self._audit(conn, er)
        return er

    def speaker_roles(self, conn: Connection, name: str) -> list[str]:
        """The stored roles (as written in the exports) that name this speaker."""
        wanted = speaker_name(name)
        rows = conn.execute(
            "SELECT DISTINCT role FROM source_messages WHERE channel = ANY(%s)",
            (list(_SPEAKER_CHANNELS),),
        ).fetchall()
        return sorted(r for (r,) in rows if r not in _NOT_SPEAKERS and speaker_name(r) == wanted)

    def speaker_plan(self, name: str) -> dict[str, Any]:
        """How many messages and conversations hold this speaker's words (ids and counts)."""
        if not speaker_name(name) or speaker_name(name) in _NOT_SPEAKERS:
            raise ConfigError(
                f"{name!r} is not a speaker's name",
                hint="give the name as `pmem ledger show` lists it",
            )
        with self.db.connection() as conn:
            roles = self.speaker_roles(conn, name)
            row = conn.execute(
                """SELECT count(*), count(DISTINCT conversation_key) FROM source_messages
                   WHERE channel = ANY(%s) AND role = ANY(%s)""",
                (list(_SPEAKER_CHANNELS), roles),
            ).fetchone()
            forgotten = self._erased_hmac(conn, SPEAKER_DOMAIN + speaker_name(name))
        n_msg, n_conv = row or (0, 0)
        if not n_msg and not forgotten:
            raise StoreError(
                "no other speaker by that name in the ledger",
                hint="`pmem ledger show KEY` lists each message's speaker (its role)",
            )
        return {"messages": n_msg, "conversations": n_conv, "already_forgotten": forgotten}

    def forget_speaker(self, name: str, *, from_ledger: bool = False) -> Erasure:
        """Erase another speaker's messages (see the module docstring)."""
        er = self._new("speaker", from_ledger)
        with self.db.connection() as conn, conn.transaction():
            roles = self.speaker_roles(conn, name)
            rows = conn.execute(
                """SELECT message_key, conversation_key FROM source_messages
                   WHERE channel = ANY(%s) AND role = ANY(%s) ORDER BY message_key FOR UPDATE""",
                (list(_SPEAKER_CHANNELS), roles),
            ).fetchall()
            keys = [k for k, _ in rows]
            er.messages = keys
            cited = [
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT memory_id FROM evidence WHERE source_key = ANY(%s) ORDER BY 1",
                    (keys,),
                )
            ]
            for mid in cited:
                self._erase_memory(conn, mid, er)
            er.memories_erased = cited
            self._drop_summaries(conn, er, message_keys=keys)
            er.add(
                "message_index_rows",
                conn.execute(
                    "DELETE FROM message_search WHERE message_key = ANY(%s)", (keys,)
                ).rowcount,
            )
            conn.execute("DELETE FROM message_search_pending WHERE message_key = ANY(%s)", (keys,))
            er.tables |= {
                "message_search",
                "message_search_pending",
                *_vector_tables("message_key"),
            }
            if from_ledger:
                for key in keys:
                    self._set_body(conn, key, MARKER)
                conn.execute(
                    "UPDATE source_messages SET role = %s WHERE message_key = ANY(%s)",
                    (MARKER, keys),
                )
                er.add("ledger_messages", len(keys))
                for conv in sorted({c for _, c in rows}):
                    self._rehash_conversation(conn, conv, er)
                er.tables |= {"source_messages", "source_conversations"}
                self._remember(conn, "message", SPEAKER_DOMAIN + speaker_name(name))
            self._audit(conn, er)
        return er

    def set_result_checksums(self, checksums: dict[str, str]) -> None:
        """After the file scrub rewrote result.json files: batch id -> new checksum."""
        if not checksums:
            return
        with self.db.connection() as conn, conn.transaction():
            for batch_folder, checksum in checksums.items():
                conn.execute(
                    """UPDATE batches SET result_checksum = %s
                       WHERE replace(batch_id, ':', '-') = %s AND result_checksum IS NOT NULL""",
                    (checksum, batch_folder),
                )

    def batches_of(self, conversation_keys: Iterable[str]) -> list[str]:
        with self.db.connection() as conn:
            return [
                r[0]
                for r in conn.execute(
                    "SELECT DISTINCT batch_id FROM batch_members WHERE conversation_key = ANY(%s) ORDER BY 1",
                    (list(conversation_keys),),
                )
            ]

    # ------------------------------------------------------------ vacuum

    def vacuum(self, tables: Iterable[str], *, lock_timeout: float = 60.0) -> dict[str, Any]:
        """VACUUM FULL every touched table (a new file for the table, its TOAST and its indexes:
        no live page keeps a dead tuple's bytes), then CHECKPOINT. A table another session keeps
        locked past ``lock_timeout`` seconds is listed in ``skipped``."""
        done: list[str] = []
        skipped: list[str] = []
        out: dict[str, Any] = {
            "mode": "full",
            "tables": done,
            "skipped": skipped,
            "checkpoint": False,
        }
        with psycopg.connect(self.db.url, autocommit=True) as conn:
            # another session holding a table would make VACUUM FULL wait for ever
            conn.execute(
                sql.SQL("SET lock_timeout = {}").format(
                    sql.Literal(f"{int(lock_timeout * 1000)}ms")
                )
            )
            live = {
                r[0]
                for r in conn.execute(
                    "SELECT tablename FROM pg_tables WHERE schemaname = current_schema()"
                )
            }
            out["other_snapshots"] = conn.execute(
                """SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()
                   AND pid <> pg_backend_pid() AND backend_xmin IS NOT NULL"""
            ).fetchone()[0]  # type: ignore[index]
            for table in sorted(set(tables) & live):
                try:
                    conn.execute(sql.SQL("VACUUM (FULL, ANALYZE) {}").format(sql.Identifier(table)))
                    done.append(table)
                except psycopg.errors.LockNotAvailable:
                    skipped.append(table)
            try:
                conn.execute("CHECKPOINT")
                out["checkpoint"] = True
            except psycopg.errors.InsufficientPrivilege:
                out["checkpoint"] = False
        return out

    # ------------------------------------------------------------ internals

    def _new(self, target: str, from_ledger: bool) -> Erasure:
        return Erasure(
            erasure_id="erasure-" + uuid.uuid4().hex[:16], target=target, from_ledger=from_ledger
        )

    def _audit(self, conn: Connection, er: Erasure) -> None:
        conn.execute(
            """INSERT INTO erasure_audit (erasure_id, action, target, counts)
               VALUES (%s, 'erasure', %s, %s)""",
            (er.erasure_id, er.target, Jsonb({**er.counts, "from_ledger": er.from_ledger})),
        )

    def _remember(
        self,
        conn: Connection,
        kind: str,
        value: str,
        *,
        length: int | None = None,
        ascii_start: bool | None = None,
    ) -> None:
        conn.execute(
            """INSERT INTO erased_content (hmac, kind, length, ascii_start) VALUES (%s, %s, %s, %s)
               ON CONFLICT (hmac) DO NOTHING""",
            (keyed_hash(self.key, value), kind, length, ascii_start),
        )

    def _erased_hmac(self, conn: Connection, value: str) -> bool:
        return (
            conn.execute(
                "SELECT 1 FROM erased_content WHERE hmac = %s", (keyed_hash(self.key, value),)
            ).fetchone()
            is not None
        )

    @staticmethod
    def _was_erased(conn: Connection, memory_id: str) -> bool:
        return (
            conn.execute(
                "SELECT 1 FROM tombstones WHERE memory_id = %s AND reason = 'erased'", (memory_id,)
            ).fetchone()
            is not None
        )

    @staticmethod
    def _memories_of(conn: Connection, conversation_key: str) -> list[str]:
        return [
            r[0]
            for r in conn.execute(
                """SELECT DISTINCT e.memory_id FROM evidence e JOIN memories m ON m.id = e.memory_id
               WHERE regexp_replace(e.source_key, ':[^:]*$', '') = %s ORDER BY 1""",
                (conversation_key,),
            )
        ]

    def _rewrite_column(
        self,
        conn: Connection,
        table: str,
        col: str,
        dtype: str,
        scrub: Scrubber,
        er: Erasure,
        params: dict[str, Any],
    ) -> int:
        store = REGISTRY[table]
        q = sql.SQL("SELECT ctid::text, {c} FROM {t} WHERE {cond} FOR UPDATE").format(
            c=sql.Identifier(col), t=sql.Identifier(table), cond=self._candidate(col, dtype)
        )
        n = 0
        for ctid, value in conn.execute(q, params).fetchall():
            new = scrub.value(value)
            if new == value:
                continue
            sets = [sql.SQL("{} = %s").format(sql.Identifier(col))]
            args: list[Any] = [Jsonb(new) if dtype in ("jsonb", "json") else new]
            for ts, source in store.indexes.items():
                if source == col and isinstance(new, str):
                    sets.append(
                        sql.SQL("{} = array_to_tsvector(%s::text[])").format(sql.Identifier(ts))
                    )
                    args.append(_tokens(new))
            conn.execute(
                sql.SQL("UPDATE {} SET {} WHERE ctid = %s::tid").format(
                    sql.Identifier(table), sql.SQL(", ").join(sets)
                ),
                [*args, ctid],
            )
            n += 1
        if n:
            er.add(f"rows:{table}", n)
            er.tables.add(table)
        return n

    def _redact_memories(
        self, conn: Connection, scrub: Scrubber, er: Erasure, params: dict[str, Any]
    ) -> None:
        cols = self.columns(conn)
        mem_cols = [c for c in REGISTRY["memories"].text if c in cols.get("memories", {})]
        conds = [self._candidate(c, cols["memories"][c]) for c in mem_cols]
        ids = {
            r[0]
            for r in conn.execute(
                sql.SQL("SELECT id FROM memories WHERE {}").format(sql.SQL(" OR ").join(conds)),
                params,
            )
        }
        ids |= {
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT memory_id FROM memory_revisions WHERE lower(record::text) LIKE ANY(%(pats)s)",
                params,
            )
        }
        ids |= {
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT memory_id FROM evidence WHERE lower(text) LIKE ANY(%(pats)s)",
                params,
            )
        }
        from store.records import MemoryStore

        projector = MemoryStore(self.db)
        for mid in sorted(ids):
            row = (
                conn.cursor(row_factory=dict_row)
                .execute("SELECT * FROM memories WHERE id = %s FOR UPDATE", (mid,))
                .fetchone()
            )
            if row is None:
                continue
            fields: set[str] = set()
            updates = {c: scrub.value(row[c]) for c in mem_cols}
            changed_cols = [c for c in mem_cols if updates[c] != row[c]]
            fields |= set(changed_cols)
            revs = 0
            for rev, record in conn.execute(
                "SELECT revision, record FROM memory_revisions WHERE memory_id = %s ORDER BY revision",
                (mid,),
            ).fetchall():
                new = scrub.value(record)
                if new == record:
                    continue
                names = sorted(k for k in set(record) | set(new) if record.get(k) != new.get(k))
                conn.execute(
                    "SELECT pmem_redact_revision(%s, %s, %s, %s, %s, %s)",
                    (er.erasure_id, mid, rev, Jsonb(new), tagged_hash("rec", new), names),
                )
                fields |= set(names)
                revs += 1
            ev = 0
            for eid, source_key, text in conn.execute(
                "SELECT id, source_key, text FROM evidence WHERE memory_id = %s ORDER BY id", (mid,)
            ).fetchall():
                new_text = scrub.text(text)
                if new_text == text:
                    continue
                h = evidence_hash(new_text)
                dup = conn.execute(
                    "SELECT 1 FROM evidence WHERE memory_id = %s AND source_key = %s AND text_hash = %s AND id <> %s",
                    (mid, source_key, h, eid),
                ).fetchone()
                if dup:
                    conn.execute("DELETE FROM evidence WHERE id = %s", (eid,))
                else:
                    conn.execute(
                        "UPDATE evidence SET text = %s, text_hash = %s WHERE id = %s",
                        (new_text, h, eid),
                    )
                ev += 1
            if ev:
                fields.add("evidence")
            if not fields:
                continue
            new_rev = row["current_revision"] + 1
            current = conn.execute(
                "SELECT record FROM memory_revisions WHERE memory_id = %s AND revision = %s",
                (mid, row["current_revision"]),
            ).fetchone()
            record = current[0] if current else {}
            conn.execute(
                """INSERT INTO memory_revisions (memory_id, revision, record, record_hash, reason,
                       client, redacted_at, redacted_fields)
                   VALUES (%s, %s, %s, %s, 'redaction', 'pmem-forget', now(), %s)""",
                (mid, new_rev, Jsonb(record), tagged_hash("rec", record), sorted(fields)),
            )
            sets = sql.SQL(", ").join(
                sql.SQL("{} = %s").format(sql.Identifier(c)) for c in mem_cols
            )
            conn.execute(
                sql.SQL(
                    "UPDATE memories SET {}, current_revision = %s, updated_at = now() WHERE id = %s"
                ).format(sets),
                [*(updates[c] for c in mem_cols), new_rev, mid],
            )
            if conn.execute(
                "SELECT 1 FROM search_projections WHERE memory_id = %s", (mid,)
            ).fetchone():
                projector._project(conn, mid, {**row, **updates})
            er.tables |= self._drop_vectors(conn, "memory_id", [mid])
            er.memories_redacted.append(mid)
            er.add("memories_redacted")
            er.add("revisions_redacted", revs)
            er.add("evidence_redacted", ev)
        if er.memories_redacted:
            er.tables |= {
                "memories",
                "memory_revisions",
                "evidence",
                "search_projections",
                "memory_embeddings",
            }

    def _redact_message_index(
        self, conn: Connection, scrub: Scrubber, er: Erasure, params: dict[str, Any]
    ) -> None:
        rows = conn.execute(
            "SELECT message_key, text FROM message_search WHERE lower(text) LIKE ANY(%(pats)s) FOR UPDATE",
            params,
        ).fetchall()
        n = 0
        for key, text in rows:
            new = scrub.text(text)
            if new != text:
                self._reindex_message(conn, key, new)
                n += 1
        if n:
            er.add("message_index_rows", n)
            er.tables |= {"message_search", *_vector_tables("message_key")}

    def _redact_markers(self, conn: Connection, scrub: Scrubber, er: Erasure) -> None:
        """Topic markers (insert-only): the text and session rewritten through the one audited
        exception, ``pmem_redact_marker``. Markers are few short lines: all are read."""
        if "markers" not in self.columns(conn):
            return
        n = 0
        for marker_id, body, session in conn.execute(
            "SELECT marker_id, body, session FROM markers ORDER BY marker_id FOR UPDATE"
        ).fetchall():
            text = bytes_text(bytes(body))
            new_text, new_session = (
                scrub.text(text),
                scrub.text(session) if session is not None else None,
            )
            if new_text == text and new_session == session:
                continue
            conn.execute(
                "SELECT pmem_redact_marker(%s, %s, %s, %s, %s)",
                (
                    er.erasure_id,
                    marker_id,
                    text_bytes(new_text),
                    content_hash(new_text),
                    new_session,
                ),
            )
            n += 1
        if n:
            er.add("markers_redacted", n)
            er.tables.add("markers")

    def _reindex_message(self, conn: Connection, key: str, text: str) -> None:
        conn.execute(
            "UPDATE message_search SET text = %s, tokens = array_to_tsvector(%s::text[]) WHERE message_key = %s",
            (text, _tokens(text), key),
        )
        self._drop_vectors(conn, "message_key", [key])

    def _drop_vectors(self, conn: Connection, key_column: str, keys: list[str]) -> set[str]:
        """Delete the embeddings of these rows from every registered vector table keyed by
        ``key_column`` (``pmem reindex`` embeds what is left again)."""
        tables = set()
        for store in TABLE_STORES:
            if store.vectors and key_column in store.ids and store.table in self.columns(conn):
                conn.execute(
                    sql.SQL("DELETE FROM {} WHERE {} = ANY(%s)").format(
                        sql.Identifier(store.table), sql.Identifier(key_column)
                    ),
                    (keys,),
                )
                tables.add(store.table)
        return tables

    def _redact_ledger(
        self, conn: Connection, scrub: Scrubber, er: Erasure, params: dict[str, Any]
    ) -> None:
        rows = conn.execute(
            """SELECT message_key, conversation_key, body FROM source_messages
               WHERE EXISTS (SELECT 1 FROM unnest(%(bytes)s::bytea[]) b WHERE position(b IN body) > 0)
               FOR UPDATE""",
            params,
        ).fetchall()
        changed: dict[str, list[str]] = {}
        for key, conv, body in rows:
            text = bytes_text(bytes(body))
            new = scrub.text(text)
            if new == text:
                continue
            self._set_body(conn, key, new)
            changed.setdefault(conv, []).append(key)
        er.add("ledger_messages", sum(len(v) for v in changed.values()))
        for conv in sorted(changed):  # titles: the generic rewrite (a title is not in the hash)
            self._rehash_conversation(conn, conv, er)
        er.tables |= {"source_messages", "source_conversations"}

    def _erase_messages(self, conn: Connection, keys: list[str], er: Erasure) -> None:
        """--memory --from-ledger: the cited messages keep their place in the tree, not their text."""
        convs: set[str] = set()
        for key, conv in conn.execute(
            "SELECT message_key, conversation_key FROM source_messages WHERE message_key = ANY(%s) FOR UPDATE",
            (keys,),
        ).fetchall():
            self._set_body(conn, key, MARKER)
            if conn.execute(
                "SELECT 1 FROM message_search WHERE message_key = %s", (key,)
            ).fetchone():
                self._reindex_message(conn, key, MARKER)
            convs.add(conv)
        er.add("ledger_messages", len(keys))
        for conv in sorted(convs):
            self._rehash_conversation(conn, conv, er)
        er.tables |= {
            "source_messages",
            "source_conversations",
            "message_search",
            *_vector_tables("message_key"),
        }

    def _set_body(self, conn: Connection, key: str, text: str) -> None:
        conn.execute(
            "UPDATE source_messages SET body = %s, content_hash = %s WHERE message_key = %s",
            (text_bytes(text), content_hash(text), key),
        )
        self._remember(conn, "message", key)

    def _rehash_conversation(self, conn: Connection, conv: str, er: Erasure) -> None:
        """The conversation's hash over its redacted messages (as ``Conversation.content_hash``),
        carried into the prefilter decisions and batch membership so nothing is re-drafted."""
        rows = conn.execute(
            "SELECT message_key, body, on_active_path FROM source_messages WHERE conversation_key = %s",
            (conv,),
        ).fetchall()
        new = tagged_hash(
            "conv", sorted((k, content_hash(bytes_text(bytes(b))), a) for k, b, a in rows)
        )
        old_row = conn.execute(
            "SELECT content_hash FROM source_conversations WHERE conversation_key = %s FOR UPDATE",
            (conv,),
        ).fetchone()
        if old_row is None or old_row[0] == new:
            return
        old = old_row[0]
        er.hash_map[old] = new
        conn.execute(
            "UPDATE source_conversations SET content_hash = %s WHERE conversation_key = %s",
            (new, conv),
        )
        conn.execute(
            "UPDATE prefilter_decisions SET content_hash = %s WHERE conversation_key = %s AND content_hash = %s",
            (new, conv, old),
        )
        conn.execute(
            "UPDATE batch_members SET content_hash = %s WHERE conversation_key = %s AND content_hash = %s",
            (new, conv, old),
        )
        for batch_id, members in conn.execute(
            "SELECT batch_id, members FROM batches WHERE members::text LIKE %s FOR UPDATE",
            ("%" + old + "%",),
        ).fetchall():
            fixed = [
                {**m, "content_hash": new} if m.get("content_hash") == old else m for m in members
            ]
            conn.execute(
                "UPDATE batches SET members = %s WHERE batch_id = %s", (Jsonb(fixed), batch_id)
            )
        er.conversations.append(conv)
        er.tables |= {"prefilter_decisions", "batch_members", "batches"}

    def _erase_memory(self, conn: Connection, memory_id: str, er: Erasure) -> None:
        row = conn.execute(
            "SELECT current_revision FROM memories WHERE id = %s FOR UPDATE", (memory_id,)
        ).fetchone()
        if row is None:
            return
        keys = [
            r[0]
            for r in conn.execute(
                "SELECT DISTINCT source_key FROM evidence WHERE memory_id = %s ORDER BY 1",
                (memory_id,),
            )
        ]
        convs = sorted({k.rsplit(":", 1)[0] for k in keys})
        conn.execute(
            """INSERT INTO tombstones (memory_id, source_keys, conversation_keys, last_revision, reason)
               VALUES (%s, %s, %s, %s, 'erased')
               ON CONFLICT (memory_id) DO UPDATE SET reason = 'erased',
                   source_keys = ARRAY(SELECT DISTINCT unnest(tombstones.source_keys || EXCLUDED.source_keys)),
                   conversation_keys = ARRAY(SELECT DISTINCT unnest(tombstones.conversation_keys
                                                                  || EXCLUDED.conversation_keys))""",
            (memory_id, keys, convs, row[0]),
        )
        er.tables |= self._drop_vectors(conn, "memory_id", [memory_id])
        conn.execute("DELETE FROM search_projections WHERE memory_id = %s", (memory_id,))
        er.add(
            "evidence_erased",
            conn.execute("DELETE FROM evidence WHERE memory_id = %s", (memory_id,)).rowcount,
        )
        er.add(
            "revisions_erased",
            conn.execute(
                "SELECT pmem_erase_revisions(%s, %s)", (er.erasure_id, memory_id)
            ).fetchone()[0],  # type: ignore[index]
        )
        pcols = self.columns(conn).get("proposals", {})
        like = "%" + _like_escape(memory_id.lower()) + "%"
        cond = "lower(payload::text) LIKE %(like)s"
        if "memory_id" in pcols:
            cond += " OR memory_id = %(id)s"
        if "result" in pcols:
            cond += " OR lower(coalesce(result::text, '')) LIKE %(like)s"
        er.add(
            "proposals",
            conn.execute(
                f"DELETE FROM proposals WHERE {cond}",
                {"like": like, "id": memory_id},  # noqa: S608 - fixed fragments
            ).rowcount,
        )
        self._drop_summaries(conn, er, memory_ids=[memory_id])
        self._drop_concepts(conn, er, memory_id)
        if "public_memories" in self.columns(conn):  # its published title and summary go too
            er.add(
                "public_memories",
                conn.execute(
                    "DELETE FROM public_memories WHERE memory_id = %s", (memory_id,)
                ).rowcount,
            )
            er.tables.add("public_memories")
        conn.execute("DELETE FROM memories WHERE id = %s", (memory_id,))
        er.memories_erased.append(memory_id)
        er.add("memories_erased")
        er.tables |= {
            "memories",
            "memory_revisions",
            "evidence",
            "search_projections",
            "memory_embeddings",
            "proposals",
            "tombstones",
        }

    def _drop_summaries(
        self,
        conn: Connection,
        er: Erasure,
        *,
        memory_ids: list[str] | None = None,
        message_keys: list[str] | None = None,
    ) -> None:
        """Monthly summaries are derived: every version citing an erased memory or message goes,
        and with them the profile versions built on those months (`pmem summarize` redoes them
        from what is left)."""
        if "month_summaries" not in self.columns(conn):
            return
        months = [
            r[0]
            for r in conn.execute(
                """DELETE FROM month_summaries WHERE memory_ids && %s::text[] OR message_keys && %s::text[]
               RETURNING month""",
                (memory_ids or [], message_keys or []),
            )
        ]
        n = conn.execute(
            "DELETE FROM profile_versions WHERE memory_ids && %s::text[] OR months && %s::text[]",
            (memory_ids or [], months),
        ).rowcount
        if months or n:
            er.add("summaries_erased", len(months) + n)
            er.tables |= {"month_summaries", "profile_versions"}

    def _drop_concepts(self, conn: Connection, er: Erasure, memory_id: str) -> None:
        """Concept memory is derived: the experience goes, its links are recomputed from the
        remaining supporters (removed when none is left), concepts no experience shows any more
        go, and the weight log forgets the memory (store/concepts.py)."""
        if "experiences" not in self.columns(conn):
            return
        n = ConceptStore(self.db).erase(conn, memory_id)
        if any(n.values()):
            er.add("concept_links_recomputed", n["links_withdrawn"])
            er.add("experiences_erased", n["experiences_withdrawn"])
            er.tables |= {
                "concept_names",
                "concept_embeddings",
                "experiences",
                "experience_links",
                "concept_relations",
                "concept_link_updates",
            }


def _vector_tables(key_column: str) -> set[str]:
    return {s.table for s in TABLE_STORES if s.vectors and key_column in s.ids}


def _tokens(text: str) -> list[str]:
    """A message's tokens, as store.index indexes them."""
    from store.index import MAX_TOKEN_CHARS

    return [t for t in index_tokens_long(text) if len(t) <= MAX_TOKEN_CHARS]


def remaining_of_memory(db: Database, memory_id: str) -> dict[str, int]:
    """Rows that still name an erased memory, outside its tombstone (ids only)."""
    out: dict[str, int] = {}
    with db.connection() as conn:
        for table in (
            "memories",
            "memory_revisions",
            "evidence",
            "search_projections",
            "memory_embeddings",
        ):
            col = "id" if table == "memories" else "memory_id"
            n = conn.execute(
                sql.SQL("SELECT count(*) FROM {} WHERE {} = %s").format(
                    sql.Identifier(table), sql.Identifier(col)
                ),
                (memory_id,),
            ).fetchone()[0]  # type: ignore[index]
            if n:
                out[table] = n
    return out


def remaining_of_conversation(
    db: Database, conversation_key: str, *, ledger: bool
) -> dict[str, int]:
    out: dict[str, int] = {}
    queries = {
        "message_search": "SELECT count(*) FROM message_search WHERE conversation_key = %s",
        "evidence": "SELECT count(*) FROM evidence WHERE regexp_replace(source_key, ':[^:]*$', '') = %s",
    }
    if ledger:
        queries["source_messages"] = (
            "SELECT count(*) FROM source_messages WHERE conversation_key = %s"
        )
        queries["source_conversations"] = (
            "SELECT count(*) FROM source_conversations WHERE conversation_key = %s"
        )
    with db.connection() as conn:
        for name, q in queries.items():
            n = conn.execute(q, (conversation_key,)).fetchone()[0]  # type: ignore[index]
            if n:
                out[name] = n
    return out


def speaker_name(name: str) -> str:
    """A speaker's name as names are compared (NFKC, case-folded, trimmed): the same rule as
    ``importers._people.norm_name`` (the store may not import the importers)."""
    return unicodedata.normalize("NFKC", name).casefold().strip()


def remaining_of_speaker(db: Database, keys: list[str], *, ledger: bool) -> dict[str, int]:
    """Rows that still hold an erased speaker's messages (by key; ids and counts only)."""
    out: dict[str, int] = {}
    queries: dict[str, tuple[str, tuple[Any, ...]]] = {
        "message_search": (
            "SELECT count(*) FROM message_search WHERE message_key = ANY(%s)",
            (keys,),
        ),
        "evidence": ("SELECT count(*) FROM evidence WHERE source_key = ANY(%s)", (keys,)),
    }
    if ledger:
        queries["source_messages"] = (
            "SELECT count(*) FROM source_messages WHERE message_key = ANY(%s) AND (body <> %s OR role <> %s)",
            (keys, text_bytes(MARKER), MARKER),
        )
    with db.connection() as conn:
        for name, (q, params) in queries.items():
            n = conn.execute(q, params).fetchone()[0]  # type: ignore[index]
            if n:
                out[name] = n
    return out
