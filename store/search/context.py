"""load_context: the index an AI client reads first (one short line per memory)."""

from __future__ import annotations

from psycopg.rows import dict_row

from store.search.common import SearchBase


class Context(SearchBase):
    def load_context(self, limit: int = 100, budget_bytes: int = 16_000, *, line_bytes: int = 200) -> str:
        """The index an AI client reads first: one short line per memory (id, date, kind, title,
        index summary), newest first, each line at most ``line_bytes`` and the whole at most
        ``budget_bytes`` (UTF-8). Then ``get_memory`` gives a summary, evidence on request."""
        with self.db.connection() as conn:
            total = conn.execute("SELECT count(*) FROM memories WHERE status = 'active'").fetchone()
            rows = conn.cursor(row_factory=dict_row).execute(
                """SELECT id, kind, title, index_summary, coalesce(occurred_at, created_at) AS at
                   FROM memories WHERE status = 'active'
                   ORDER BY coalesce(occurred_at, created_at) DESC, id LIMIT %s""",
                (limit,),
            ).fetchall()
        n_total = int(total[0]) if total else 0
        from store.summaries import context_prefix  # the profile and the latest month come first

        prefix = context_prefix(self.db, budget_bytes)
        budget_bytes -= len(prefix.encode())
        head = (
            f"# memory index: {n_total} {'memory' if n_total == 1 else 'memories'}, newest first "
            "(id | date | kind | title — summary). get_memory(memory_id) for the summary and evidence.\n"
        )
        out, used, shown = [head], len(head.encode()), 0
        for r in rows:
            date = r["at"].date().isoformat() if r["at"] else "----------"
            line = _clip_bytes(
                f"{r['id']} | {date} | {r['kind']} | {_one_line(r['title'])} — {_one_line(r['index_summary'])}",
                line_bytes,
            ) + "\n"
            size = len(line.encode())
            if used + size > budget_bytes - 120:  # keep room for the closing line
                break
            out.append(line)
            used += size
            shown += 1
        if shown < n_total:
            out.append(f"… {n_total - shown} more not listed: use search_memory(query) to find them.\n")
        return prefix + "".join(out)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def _clip_bytes(text: str, limit: int) -> str:
    """``text`` cut to at most ``limit`` UTF-8 bytes, on a character boundary, with an ellipsis."""
    if len(text.encode()) <= limit:
        return text
    cut = text.encode()[: max(0, limit - 3)].decode("utf-8", errors="ignore")
    return cut + "…"
