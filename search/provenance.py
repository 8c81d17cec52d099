"""Where a message went: the memories drafted from a conversation (those whose evidence quotes
one of its messages), for recall's hits and ``pmem show <message or conversation key>``."""

from __future__ import annotations

from typing import Any

from psycopg import Connection
from psycopg.rows import dict_row

MEMORIES_PER_CONVERSATION = 5  # a recall hit names at most this many


def memories_drafted(conn: Connection, conversations: list[str]) -> dict[str, list[dict[str, Any]]]:
    """Per conversation key: the active memories citing any of its messages, each as ``{"id",
    "title", "cited": [message keys]}``, in the order they were created."""
    if not conversations:
        return {}
    rows = (
        conn.cursor(row_factory=dict_row)
        .execute(
            """SELECT sm.conversation_key, m.id, m.title, array_agg(DISTINCT e.source_key) AS cited,
                  min(m.created_at) AS created_at
           FROM source_messages sm
           JOIN evidence e ON e.source_key = sm.message_key
           JOIN memories m ON m.id = e.memory_id AND m.status = 'active'
           WHERE sm.conversation_key = ANY(%s)
           GROUP BY sm.conversation_key, m.id, m.title
           ORDER BY sm.conversation_key, min(m.created_at), m.id""",
            (conversations,),
        )
        .fetchall()
    )
    out: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        out.setdefault(r["conversation_key"], []).append(
            {"id": r["id"], "title": r["title"], "cited": list(r["cited"])}
        )
    return out


def where_it_went(drafted: list[dict[str, Any]], message_key: str) -> dict[str, Any]:
    """A hit's ``memories`` (those citing ``message_key`` first, then the others drafted from
    its conversation) and ``memory`` (the first of them, or None)."""
    ordered = sorted(drafted, key=lambda d: message_key not in d["cited"])  # stable
    memories = [{"id": d["id"], "title": d["title"]} for d in ordered[:MEMORIES_PER_CONVERSATION]]
    return {"memories": memories, "memory": memories[0] if memories else None}


def describe_source(conn: Connection, key: str) -> dict[str, Any] | None:
    """Where a ledger message or conversation went, by its key: ``{"kind": "message", ...}``
    (the message, its conversation, whether it is on the path the conversation took, the
    memories citing it and those drafted from its conversation) or ``{"kind":
    "conversation", ...}`` (the conversation, its prefilter decision, the memories drafted from
    it with the messages each cites); None when the key names neither. Texts as stored: the
    caller redacts what it shows."""
    from core.hashing import bytes_text

    cur = conn.cursor(row_factory=dict_row)
    msg = cur.execute(
        """SELECT m.message_key, m.conversation_key, m.role, m.channel, m.created_at,
                  m.on_active_path, m.position, m.body
           FROM source_messages m WHERE m.message_key = %s""",
        (key,),
    ).fetchone()
    conv_key = msg["conversation_key"] if msg else key
    conv = cur.execute(
        """SELECT c.conversation_key, c.source, c.external_id, c.title, c.created_at,
                  c.message_count,
                  (SELECT json_build_object('keep', coalesce(o.keep, d.keep), 'reason',
                                            CASE WHEN o.keep IS NOT NULL THEN 'owner override' ELSE d.reason END)
                   FROM (SELECT 1) one
                   LEFT JOIN prefilter_overrides o ON o.conversation_key = c.conversation_key
                   LEFT JOIN LATERAL (SELECT keep, reason FROM prefilter_decisions p
                                      WHERE p.conversation_key = c.conversation_key
                                        AND p.content_hash = c.content_hash
                                      ORDER BY decided_at DESC LIMIT 1) d ON true) AS prefilter
           FROM source_conversations c WHERE c.conversation_key = %s""",
        (conv_key,),
    ).fetchone()
    if conv is None:
        return None
    drafted = memories_drafted(conn, [conv_key]).get(conv_key, [])
    conversation = {
        "key": conv["conversation_key"],
        "source": conv["source"],
        "external_id": conv["external_id"],
        "title": conv["title"],
        "created_at": conv["created_at"],
        "messages": conv["message_count"],
        "prefilter": conv["prefilter"]
        if conv["prefilter"] and conv["prefilter"]["keep"] is not None
        else None,
    }
    if msg is None:
        return {
            "kind": "conversation",
            "key": key,
            "conversation": conversation,
            "memories": drafted,
        }
    went = where_it_went(drafted, key)
    return {
        "kind": "message",
        "key": key,
        "conversation": conversation,
        "message": {
            "key": msg["message_key"],
            "role": msg["role"],
            "channel": msg["channel"],
            "created_at": msg["created_at"],
            "on_active_path": msg["on_active_path"],
            "position": msg["position"],
            "text": bytes_text(bytes(msg["body"])),
        },
        "cited_by": [{"id": d["id"], "title": d["title"]} for d in drafted if key in d["cited"]],
        "memories": went["memories"],
        "memory": went["memory"],
    }
