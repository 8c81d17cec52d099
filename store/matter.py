"""What a memory's evidence cites, as the append gate's ranking reads it
(``core.gate_rank``): per memory, its text as the store embeds it (title,
aliases, index line) and the messages its evidence quotes (each message once, in the order the
evidence was added; the message's indexed text, or the quotes when the message is not in the
index), redacted by the secret guard. Read at the time of asking (nothing is stored), so a
forgotten message or a deleted memory is gone from it with the ledger and the evidence."""

from __future__ import annotations

from typing import Any

from core.gate_rank import cited_text

_CITED = """
SELECT m.id,
       concat_ws(E'\\n', m.title, nullif(array_to_string(m.aliases, ', '), ''), m.index_summary),
       coalesce((SELECT string_agg(coalesce(s.text, ev.quotes), E'\\n' ORDER BY ev.first)
                 FROM (SELECT source_key, min(id) AS first,
                              string_agg(text, E'\\n' ORDER BY id) AS quotes
                       FROM evidence WHERE memory_id = m.id GROUP BY source_key) ev
                 LEFT JOIN message_search s ON s.message_key = ev.source_key), '')
FROM memories m WHERE m.id = ANY(%s)
"""


def cited_texts(conn: Any, memory_ids: list[str]) -> dict[str, tuple[str, str]]:
    """``{memory id: (memory text, cited text)}`` for these memories (the cited text redacted
    and cut to the matter's budget)."""
    if not memory_ids:
        return {}
    rows = conn.execute(_CITED, (list(memory_ids),)).fetchall()
    return {r[0]: (r[1] or "", cited_text([r[2]] if r[2] else [])) for r in rows}
