"""load_context: what an AI client reads first, in one order (issue 17 owns it), each part within
its own share of the byte budget (UTF-8), read on one connection:

1. **current state**: the latest topic markers the owner wrote (``store.markers``; seed 004's
   "LLL"), newest first, so the thread survives a client's context compaction. At most
   ``MARKER_SHARE`` of the budget;
2. **the profile and the latest month** (``store.summaries.context_prefix``, seed 001): at most
   ``PROFILE_SHARE`` and ``MONTH_SHARE``;
3. **the memory index**: one short line per memory, newest first: what the parts above left,
   less the share kept for the part below;
4. **related experiences** (issue 16, `pmem related`): at most ``RELATED_SHARE``, only when a
   provider is given (``related=``, as load_context(utterance) does with the top experiences
   related to what the owner just said, or ``Context.related_part``); otherwise nothing is
   shown and no share is kept for it.

A part with nothing to show (no markers yet, no `pmem summarize` yet) is left out, and what it
did not use goes to the index.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from psycopg import Connection
from psycopg.rows import dict_row

from store.index import SearchBase, sanitize

MARKER_SHARE = 0.15  # the current state (topic markers)
RELATED_SHARE = 0.15  # related experiences (issue 16), when a provider is set
MARKERS_SHOWN = 10
MARKER_LINE_BYTES = 300
INDEX_CLOSING = 120  # bytes kept for the index's closing line

#: a part of load_context: (connection, its byte budget) -> its text, at most that many bytes
ContextPart = Callable[[Connection, int], str]


class Context(SearchBase):
    #: related experiences after the index (issue 16, `pmem related`): None until it exists
    related_part: ContextPart | None = None

    def load_context(
        self,
        limit: int = 100,
        budget_bytes: int = 16_000,
        *,
        line_bytes: int = 200,
        markers: int = MARKERS_SHOWN,
        related: ContextPart | None = None,
    ) -> str:
        """The text an AI client reads first (see the module's docstring for the order and the
        shares): at most ``budget_bytes`` in all; index lines at most ``line_bytes`` each; then
        ``get_memory`` gives a memory's summary, ``current_state`` more markers. ``related``:
        this call's provider of the last part (the experiences related to what the owner just
        said), else ``related_part``."""
        from store.summaries import context_prefix

        related = related or self.related_part
        with self.db.connection() as conn:
            state = current_state(conn, int(budget_bytes * MARKER_SHARE), markers)
            prefix = context_prefix(self.db, budget_bytes, conn=conn)
            rows = (
                conn.cursor(row_factory=dict_row)
                .execute(
                    """SELECT id, kind, title, index_summary, coalesce(occurred_at, created_at) AS at,
                          count(*) OVER () AS total
                   FROM memories WHERE status = 'active'
                   ORDER BY coalesce(occurred_at, created_at) DESC, id LIMIT %s""",
                    (max(1, limit),),
                )
                .fetchall()
            )
            n_total = int(rows[0]["total"]) if rows else 0
            keep = int(budget_bytes * RELATED_SHARE) if related is not None else 0
            index = _index(
                rows, n_total, budget_bytes - _size(state) - _size(prefix) - keep, line_bytes
            )
            tail = _clip_block(related(conn, keep), keep) if related is not None else ""
        return state + prefix + index + tail


def current_state(
    conn: Connection,
    budget_bytes: int,
    limit: int = MARKERS_SHOWN,
    *,
    session: str | None = None,
    empty: str = "",
) -> str:
    """The latest topic markers, newest first, one line each (time in the owner's zone | id |
    text), within ``budget_bytes``; ``empty`` when there is none."""
    from core.settings import local_zone
    from store.markers import latest

    shown, total = latest(conn, limit, session=session)
    if not shown:
        return empty
    zone = local_zone()
    where = f" of session {_one_line(session)}" if session else ""
    head = (
        f"# current state: the owner's latest topic markers{where}, newest first "
        "(time | marker id | what the topic is now; written by the owner, never edited)\n"
    )
    out, used = [head], _size(head)
    room = budget_bytes - 80  # keep room for the closing line
    n = 0
    for m in shown:
        extra = f" [session {_one_line(m.session)}]" if m.session and not session else ""
        line = (
            _clip_bytes(
                f"- {_when(m.at, zone)} | {m.id} | {_one_line(m.text)}{extra}", MARKER_LINE_BYTES
            )
            + "\n"
        )
        if used + _size(line) > room:
            break
        out.append(line)
        used += _size(line)
        n += 1
    if n == 0:
        return empty
    if n < total:
        out.append(f"… {total - n} older: current_state(limit) lists more.\n")
    return _clip_block("".join(out), budget_bytes)


def _index(rows: list[dict], n_total: int, budget_bytes: int, line_bytes: int) -> str:
    head = (
        f"# memory index: {n_total} {'memory' if n_total == 1 else 'memories'}, newest first "
        "(id | date | kind | title — summary). get_memory(memory_id) for the summary and evidence.\n"
    )
    out, used, shown = [head], _size(head), 0
    for r in rows:
        date = r["at"].date().isoformat() if r["at"] else "----------"
        line = (
            _clip_bytes(
                f"{r['id']} | {date} | {r['kind']} | {_one_line(r['title'])} — {_one_line(r['index_summary'])}",
                line_bytes,
            )
            + "\n"
        )
        size = _size(line)
        if used + size > budget_bytes - INDEX_CLOSING:  # keep room for the closing line
            break
        out.append(line)
        used += size
        shown += 1
    if shown < n_total:
        out.append(f"… {n_total - shown} more not listed: use search_memory(query) to find them.\n")
    return "".join(out)


def _when(at: datetime, zone: object) -> str:
    return at.astimezone(zone).strftime("%Y-%m-%d %H:%M %z")  # type: ignore[arg-type]


def _size(text: str) -> int:
    return len(text.encode())


def _one_line(text: str) -> str:
    return " ".join(sanitize(text).split())


def _clip_bytes(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes, on a character boundary, with an ellipsis."""
    if len(text.encode()) <= limit:
        return text
    cut = text.encode()[: max(0, limit - 3)].decode("utf-8", errors="ignore")
    return cut + "…"


def _clip_block(text: str, limit: int) -> str:
    """A part cut to at most ``limit`` UTF-8 bytes (ending with a line break), or nothing."""
    if not text or limit <= 0:
        return ""
    data = (text.rstrip() + "\n").encode()
    if len(data) <= limit:
        return data.decode()
    return data[: max(0, limit - 5)].decode("utf-8", errors="ignore").rstrip() + " …\n"
