"""Helpers for the write-boundary, offered-target, tombstone and confirmed-action tests: seed
ledger conversations, call MCP tools in process, scan every derived text table through SQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
from mcp.server.mcpserver.exceptions import ToolError

from core.models import Channel, Conversation, Message, Provenance
from store.db import Database
from store.ledger import Ledger

T0 = datetime(2025, 3, 1, 9, 0, tzinfo=UTC)

#: every table column holding derived text a write could leave a secret in
DERIVED_TEXT_SQL = """
SELECT concat_ws(E'\\n', title, canonical_summary, index_summary, array_to_string(aliases, E'\\n'),
                 array_to_string(tags, E'\\n'), array_to_string(stated_facts, E'\\n')) FROM memories
UNION ALL SELECT record::text FROM memory_revisions
UNION ALL SELECT text FROM evidence
UNION ALL SELECT concat_ws(E'\\n', index_text, head) FROM search_projections
UNION ALL SELECT payload::text || coalesce(result::text, '') FROM proposals
UNION ALL SELECT response::text FROM idempotency_keys
"""


def seed_conversation(
    db: Database, key: str, texts: list[tuple[str, str]], *, title: str = "t"
) -> list[str]:
    """One ChatGPT-like conversation in the ledger: ``texts`` are (role, text) pairs. Returns
    the message keys, in order. Upserting again with more texts grows the conversation."""
    ledger = Ledger(db)
    imp = ledger.start_import("chatgpt", "seed.json")
    messages = [
        Message(
            key=f"{key}:n{i}",
            node_id=f"n{i}",
            parent_id=f"n{i - 1}" if i else None,
            role=role,
            channel=Channel.PERSON if role == "user" else Channel.ASSISTANT,
            content_type="text",
            text=text,
            position=i,
            created_at=T0 + timedelta(minutes=i),
        )
        for i, (role, text) in enumerate(texts)
    ]
    conv = Conversation(
        key=key,
        source="chatgpt",
        external_id=key.split(":", 1)[1],
        title=title,
        created_at=T0,
        updated_at=T0 + timedelta(minutes=len(texts)),
        messages=messages,
        provenance=Provenance(file="seed.json", position=0),
    )
    ledger.upsert(conv, imp)
    ledger.finish_import(imp, {})
    return [m.key for m in messages]


def derived_text(db: Database) -> str:
    with db.connection() as conn:
        return "\n".join(r[0] or "" for r in conn.execute(DERIVED_TEXT_SQL).fetchall())


def pieces_left(blob: str, secret: str, width: int = 8) -> list[str]:
    """Every ``width``-character piece of ``secret`` found in ``blob`` (any case)."""
    low = blob.lower()
    return [
        secret[i : i + width]
        for i in range(len(secret) - width + 1)
        if secret[i : i + width].lower() in low
    ]


def call_tool(server: Any, name: str, args: dict[str, Any]) -> str:
    """An MCP tool called in process: its text, or ToolError."""

    async def run() -> Any:
        return await server.call_tool(name, args)

    out = anyio.run(run)
    content = out[0] if isinstance(out, tuple) else getattr(out, "content", out)
    return "\n".join(getattr(c, "text", str(c)) for c in content)


__all__ = ["ToolError", "call_tool", "derived_text", "pieces_left", "seed_conversation"]
