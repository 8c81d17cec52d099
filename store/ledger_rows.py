"""How a batch of conversations becomes the ledger's rows: text PostgreSQL can store
(``storable``), each conversation's digest (its texts encoded and hashed once), the COPY of new
conversations and messages, the import pass's rows of the message index (``BatchIndex``), and
the locked upsert of a conversation that changed. ``store.ledger.Ledger`` writes through these.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Literal

from psycopg import Connection
from psycopg.types.json import Jsonb

from core.hashing import sha256_hex, tagged_hash, text_bytes
from core.models import Channel, Conversation, Message, PrefilterDecision
from store.index import sanitize
from store.index_stream import StreamRow

UpsertOutcome = Literal["new", "changed", "unchanged"]

_INSERT_MESSAGE = """INSERT INTO source_messages (message_key, conversation_key, node_id, parent_id, role,
    channel, content_type, raw_type, body, content_hash, created_at, position, on_active_path,
    branch_index, import_id)
    VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)"""
_MOVE_ON_CONFLICT = """ ON CONFLICT (message_key) DO UPDATE
    SET position = EXCLUDED.position, on_active_path = EXCLUDED.on_active_path,
        branch_index = EXCLUDED.branch_index
    WHERE (source_messages.position, source_messages.on_active_path, source_messages.branch_index)
          IS DISTINCT FROM (EXCLUDED.position, EXCLUDED.on_active_path, EXCLUDED.branch_index)
    RETURNING (xmax = 0)"""


_INSERT_DECISION = """INSERT INTO prefilter_decisions (conversation_key, content_hash, rule_version,
    keep, reason) VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"""
_INSERT_QUARANTINE = """INSERT INTO quarantine (source, file, position, reason, import_id)
    VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING"""
_COPY_CONVERSATIONS = """COPY source_conversations (conversation_key, source, external_id, title,
    title_raw, created_at, updated_at, content_hash, message_count, drafting_chars, provenance,
    unknown_types, first_import_id, last_import_id) FROM STDIN (FORMAT BINARY)"""
_CONVERSATION_TYPES = [
    "text",
    "text",
    "text",
    "text",
    "bytea",
    "timestamptz",
    "timestamptz",
    "text",
    "int4",
    "int4",
    "jsonb",
    "jsonb",
    "text",
    "text",
]
_COPY_MESSAGES = """COPY source_messages (message_key, conversation_key, node_id, parent_id, role,
    channel, content_type, raw_type, body, content_hash, created_at, position, on_active_path,
    branch_index, import_id) FROM STDIN (FORMAT BINARY)"""
_MESSAGE_TYPES = [
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "text",
    "bytea",
    "text",
    "timestamptz",
    "int4",
    "bool",
    "int4",
    "text",
]
# what PostgreSQL `text` refuses: NUL and lone surrogates
_UNSTORABLE = re.compile("[\x00\ud800-\udfff]")


def storable(text: str) -> str:
    """An id, role or type as PostgreSQL ``text`` can hold it: a NUL or a lone surrogate is
    written as its escape (``\\u0000``, ``\\ud800``). Deterministic, so a re-import finds the same
    key; every ordinary string is returned as it is."""
    if text.isascii() and "\x00" not in text:
        return text
    return _UNSTORABLE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def _storable_json(value: Any) -> Any:
    """Every string of a JSON value (keys too: an export's content type names a counter) as
    ``jsonb`` can hold it."""
    if isinstance(value, dict):
        return {
            storable(k) if isinstance(k, str) else k: _storable_json(v) for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        return [_storable_json(v) for v in value]
    return storable(value) if isinstance(value, str) else value


def _opt(text: str | None) -> str | None:
    return None if text is None else storable(text)


def _title(title: str | None) -> tuple[str | None, bytes | None]:
    """A NUL or a lone surrogate in a title: a storable form in ``title``, the exact bytes in
    ``title_raw`` (migration 0008)."""
    if title is None:
        return None, None
    clean = sanitize(title)
    return clean, (text_bytes(title) if clean != title else None)


def _conversation_params(
    conv: Conversation, chash: str, import_id: str, chars: int | None = None
) -> dict:
    """``chars``: its drafting characters when the caller has counted them."""
    title, title_raw = _title(conv.title)
    return {
        "key": storable(conv.key),
        "source": conv.source,
        "ext": storable(conv.external_id),
        "title": title,
        "title_raw": title_raw,
        "created": conv.created_at,
        "updated": conv.updated_at,
        "hash": chash,
        "n": len(conv.messages),
        "chars": conv.drafting_chars if chars is None else chars,
        "prov": Jsonb(
            {
                k: _opt(v) if isinstance(v, str) else v
                for k, v in conv.provenance.model_dump().items()
            }
        ),
        "unknown": Jsonb({storable(k): v for k, v in conv.unknown_types.items()}),
        "imp": import_id,
    }


Digest = tuple[str, list[tuple[bytes, str]]]  # conversation hash, (body, hash) per message


def digest(conv: Conversation) -> Digest:
    """Each message's stored bytes and hash, and the conversation's hash
    (``Conversation.content_hash``), encoding and hashing every text once."""
    bodies: list[tuple[bytes, str]] = []
    for m in conv.messages:
        body = text_bytes(m.text)
        bodies.append((body, "sha256:" + sha256_hex(body)))
    chash = tagged_hash(
        "conv",
        sorted(
            (m.key, h, m.on_active_path) for m, (_, h) in zip(conv.messages, bodies, strict=True)
        ),
    )
    return chash, bodies


def _message_rows(conv: Conversation, import_id: str, dig: Digest | None = None) -> list[tuple]:
    key = storable(conv.key)
    bodies = (dig or digest(conv))[1]
    return [
        (
            storable(m.key),
            key,
            storable(m.node_id),
            _opt(m.parent_id),
            storable(m.role),
            m.channel.value,
            storable(m.content_type),
            _opt(m.raw_type),
            body,
            mhash,
            m.created_at,
            m.position,
            m.on_active_path,
            m.branch_index,
            import_id,
        )
        for m, (body, mhash) in zip(conv.messages, bodies, strict=True)
    ]


def _copy_new(
    conn: Connection, convs: list[tuple[Conversation, Digest]], import_id: str
) -> list[list[Message]]:
    """New conversations and all their messages, by binary COPY (no per-row round trip); each
    conversation's ``drafting_messages`` (looked for once)."""
    drafted: list[list[Message]] = []
    with conn.cursor() as cur:
        with cur.copy(_COPY_CONVERSATIONS) as copy:
            copy.set_types(_CONVERSATION_TYPES)
            for conv, dig in convs:
                drafting = conv.drafting_messages
                drafted.append(drafting)
                p = _conversation_params(
                    conv, dig[0], import_id, sum(len(m.text) for m in drafting)
                )
                copy.write_row(
                    (
                        p["key"],
                        p["source"],
                        p["ext"],
                        p["title"],
                        p["title_raw"],
                        p["created"],
                        p["updated"],
                        p["hash"],
                        p["n"],
                        p["chars"],
                        p["prov"],
                        p["unknown"],
                        import_id,
                        import_id,
                    )
                )
        with cur.copy(_COPY_MESSAGES) as copy:
            copy.set_types(_MESSAGE_TYPES)
            for conv, dig in convs:
                for row in _message_rows(conv, import_id, dig):
                    copy.write_row(row)
    return drafted


@dataclass
class BatchIndex:
    """The message index rows of a batch's new conversations, for ``Ledger.write_batch`` to
    store in the ledger's own transaction: ``tokens()`` gives message key -> (tsvector literal,
    whether the text holds Japanese), computed from each message's text as the index shows it
    (``store.search.sanitize``) while the batch was prepared (the import's worker processes); a
    message it has no tokens for is left to the queue. ``written`` counts the rows stored."""

    tokens: Callable[[], dict[str, tuple[str, bool]]]
    written: int = 0
    texts: dict[str, str] = field(
        default_factory=dict
    )  # the index's text by key (else sanitized here)
    #: the rows are written behind the ledger (``store.index_stream``): the transaction queues
    #: the new messages and fills ``queued`` with what a worker is to index once it commits
    streamed: bool = False
    queued: list[StreamRow] = field(default_factory=list)
    #: with ``streamed``, the new conversations' prefilter is decided by that worker too (in the
    #: transaction of their index rows): key, content hash, the channel and text of each of its
    #: ``drafting_messages``. A kill before leaves them without a decision; the next import
    #: decides them (``Ledger.write_batch``: a stored conversation without one is decided)
    undecided: list[Undecided] = field(default_factory=list)
    defer_decisions: bool = False


Undecided = tuple[str, str, list[tuple[Channel, str]]]  # key, content hash, drafting texts

INDEXED = (Channel.PERSON, Channel.ASSISTANT)  # the messages the import's pass indexes
QUEUED = (Channel.PERSON, Channel.ASSISTANT, Channel.OTHER)  # what the trigger queues (0022, 0030)
_SERVER_COPY = 1_000_000  # characters: a longer clean text is copied into the index by the server

_COPY_INDEX = """COPY message_search (message_key, conversation_key, role, created_at, text, tokens)
    FROM STDIN"""


def _forgotten_any(conn: Connection) -> bool:
    """Was anything forgotten from the index (``pmem forget``)? Then new messages take the
    queue's path, which applies it."""
    row = conn.execute(
        "SELECT EXISTS (SELECT 1 FROM forgotten_conversations) OR EXISTS (SELECT 1 FROM erased_content)"
    ).fetchone()
    return bool(row and row[0])


def _copy_index(conn: Connection, convs: list[Conversation], index: BatchIndex) -> int:
    """The message index rows of new conversations, their ledger rows copied just before with
    the queue's trigger off (``pmem.inline_index``, migration 0030): what gets no row here (the
    tokens failed or are missing, another speaker's message) is queued for the index step, as the
    trigger would have; a message holding Japanese is queued for the later stage (its normalised
    forms, ``SearchStore.sync_forms``)."""
    done = _copy_index_rows(conn, convs, index)
    indexed = set(done)
    rest = [
        k
        for conv in convs
        for m in conv.messages
        if m.channel in QUEUED and (k := storable(m.key)) not in indexed
    ]
    if rest:
        conn.execute(
            "INSERT INTO message_search_pending (message_key) SELECT unnest(%b::text[]) ON CONFLICT DO NOTHING",
            (rest,),
        )
    return len(done)


def index_text(text: str) -> str:
    """``sanitize`` (what the index shows: no NUL, no lone surrogate), checked by C-speed scans
    first: most texts have neither, and a 50 MB message is not run through a regular
    expression."""
    if "\x00" not in text:
        try:
            text.encode("utf-8")
            return text
        except UnicodeEncodeError:
            pass
    return sanitize(text)


def _queue_streamed(
    conn: Connection,
    convs: list[tuple[Conversation, Digest]],
    index: BatchIndex,
    undecided: set[int],
    drafted: list[list[Message]],
) -> None:
    """The new conversations' messages queued for the index in one set-based insert (the
    trigger is off, as for ``_copy_index``; the server takes their keys from the rows just
    copied), and ``index.queued`` filled with the rows a worker writes once this transaction
    commits (``store.index_stream.write_streamed``): a kill before leaves them queued for the
    index step. ``undecided`` (positions in ``convs``): the conversations whose prefilter
    decision the worker makes (``index.undecided``, from ``drafted``: each one's
    ``drafting_messages``)."""
    rows: list[StreamRow] = []
    index.undecided = []
    ckeys: list[str] = []
    for i, (conv, dig) in enumerate(convs):
        ckey = storable(conv.key)
        ckeys.append(ckey)
        if i in undecided:
            index.undecided.append((conv.key, dig[0], [(m.channel, m.text) for m in drafted[i]]))
        for m in conv.messages:
            if m.channel in INDEXED:
                key = storable(m.key)
                rows.append((key, ckey, storable(m.role), m.created_at, index_text(m.text)))
    # no ON CONFLICT: these messages were copied by this transaction (a stored one would have
    # failed the COPY), so only a stale queue row of a message no longer in the ledger could
    # hold one of their keys; its unique violation sends the batch to ``write_batch``'s slow
    # path, which queues by trigger. The speculative insert cost half of the queue's server
    # CPU (0.42-0.47 against 0.22-0.29 CPU-s per 100 MB, ADR 0044)
    conn.execute(
        """INSERT INTO message_search_pending (message_key)
           SELECT message_key FROM source_messages
           WHERE conversation_key = ANY(%b) AND channel = ANY(%b)""",
        (ckeys, [c.value for c in QUEUED]),
    )
    index.queued = rows


def _copy_index_rows(conn: Connection, convs: list[Conversation], index: BatchIndex) -> list[str]:
    """Copy the index rows ``index`` has tokens for; the keys of those copied."""
    tokens = index.tokens()
    if not tokens:
        return []
    done: list[str] = []
    ja: list[str] = []
    huge: list[tuple[str, str]] = []
    with conn.cursor() as cur, cur.copy(_COPY_INDEX) as copy:
        for conv in convs:
            ckey = storable(conv.key)
            for m in conv.messages:
                if m.channel not in INDEXED:
                    continue
                key = storable(m.key)
                got = tokens.get(key)
                if got is None:
                    continue
                text = index.texts.get(key)
                if text is m.text and len(text) > _SERVER_COPY:  # clean and huge: see below
                    huge.append((key, got[0]))
                else:
                    copy.write_row(
                        (
                            key,
                            ckey,
                            storable(m.role),
                            m.created_at,
                            sanitize(m.text) if text is None else text,
                            got[0],
                        )
                    )
                done.append(key)
                if got[1]:
                    ja.append(key)
    if huge:  # the server copies a huge clean text from the ledger's body (valid UTF-8, no NUL):
        conn.execute(  # the text is not sent a second time (the import's memory stays bounded)
            """INSERT INTO message_search (message_key, conversation_key, role, created_at, text, tokens)
               SELECT s.message_key, s.conversation_key, s.role, s.created_at,
                      convert_from(s.body, 'UTF8'), t.tokens::tsvector
               FROM unnest(%s::text[], %s::text[]) AS t(key, tokens)
               JOIN source_messages s ON s.message_key = t.key""",
            ([k for k, _ in huge], [t for _, t in huge]),
        )
    if ja:
        conn.execute(
            "INSERT INTO message_forms_pending (message_key) SELECT unnest(%b::text[]) ON CONFLICT DO NOTHING",
            (ja,),
        )
    return done


def _upsert_locked(
    conn: Connection,
    conv: Conversation,
    import_id: str,
    decision: PrefilterDecision | None,
    stored_hash: str | None,
    dig: Digest | None = None,
) -> tuple[UpsertOutcome, int]:
    """One conversation, its row already locked (``stored_hash`` None: not stored yet)."""
    dig = dig or digest(conv)
    chash = dig[0]
    if stored_hash == chash:
        if decision is not None:
            _insert_decision(conn, decision)
        return "unchanged", 0
    params = _conversation_params(conv, chash, import_id)
    if stored_hash is None:
        conn.execute(
            """INSERT INTO source_conversations (conversation_key, source, external_id,
                   title, title_raw, created_at, updated_at, content_hash, message_count,
                   drafting_chars, provenance, unknown_types, first_import_id, last_import_id)
               VALUES (%(key)s, %(source)s, %(ext)s, %(title)s, %(title_raw)s, %(created)s,
                       %(updated)s, %(hash)s, %(n)s, %(chars)s, %(prov)s, %(unknown)s, %(imp)s,
                       %(imp)s)""",
            params,
        )
    else:
        conn.execute(
            """UPDATE source_conversations SET title = %(title)s, title_raw = %(title_raw)s,
                   created_at = %(created)s, updated_at = %(updated)s, content_hash = %(hash)s,
                   message_count = %(n)s, drafting_chars = %(chars)s, provenance = %(prov)s,
                   unknown_types = %(unknown)s, last_import_id = %(imp)s, changed_at = now()
               WHERE conversation_key = %(key)s""",
            params,
        )
    rows = _message_rows(conv, import_id, dig)
    with conn.cursor() as cur:
        if stored_hash is None:  # a new conversation: every message is new (one pipelined batch)
            cur.executemany(_INSERT_MESSAGE + " ON CONFLICT (message_key) DO NOTHING", rows)
            new = len(rows)
        else:  # it grew: add the new messages; stored ones only move on the tree
            new = 0
            for r in rows:
                cur.execute(_INSERT_MESSAGE + _MOVE_ON_CONFLICT, r)
                got = cur.fetchone()
                new += bool(got and got[0])
    if decision is not None:
        _insert_decision(conn, decision)
    return ("new" if stored_hash is None else "changed"), new


def _decision_row(d: PrefilterDecision) -> tuple:
    return (storable(d.conversation_key), d.content_hash, d.rule_version, d.keep, d.reason)


def _insert_decision(conn: Connection, d: PrefilterDecision) -> None:
    """Every drop has its reason in the ledger; a decision already recorded stays as it is."""
    conn.execute(_INSERT_DECISION, _decision_row(d))
