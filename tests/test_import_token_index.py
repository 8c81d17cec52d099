"""The message index's GIN index on tokens after a bulk load (issue 31, item 2; ADR 0044): an
import into an empty index drops it and builds it once at the end of the ledger stage; an import
into a store with index rows keeps it; a run killed in between (the index missing) is repaired by
the next import; the rows and what lexical recall finds are those of the index kept up row by
row."""

from __future__ import annotations

from pathlib import Path

from tests.test_ledger_cmds import chatgpt_export, one_conversation


def _has_token_index(db) -> bool:
    with db.connection() as conn:
        row = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE indexname = 'message_search_tokens'"
        ).fetchone()
    return row is not None and "gin (tokens)" in row[0]


def _export(path: Path, prefix: str) -> Path:
    convs = [
        one_conversation(
            f"{prefix}{i}",
            f"t{i}",
            [("user", f"引っ越しの見積もり {prefix} {i}"), ("assistant", f"Compared movers {i}.")],
        )
        for i in range(3)
    ]
    return chatgpt_export(path, convs)


def _rows(db) -> list[tuple[str, str, str]]:
    with db.connection() as conn:
        return conn.execute(
            "SELECT message_key, text, tokens::text FROM message_search ORDER BY message_key"
        ).fetchall()


def test_the_token_index_is_built_after_the_first_load_and_repaired(db, tmp_path: Path) -> None:
    from flows.importing import run_import
    from search.reader import SearchStore
    from store.ledger import Ledger

    ledger = Ledger(db)
    assert ledger.defer_token_index() is True  # an empty index: dropped for the load ...
    assert not _has_token_index(db)
    stats = run_import(
        ledger, "chatgpt", str(_export(tmp_path / "a.json", "a")), index_messages=True
    )
    assert stats["conversations_new"] == 3
    assert _has_token_index(db)  # ... and built at the end of the ledger stage
    hits = SearchStore(db).recall("見積もり", embedder=None).hits
    assert {h.conversation_key for h in hits} == {f"chatgpt:a{i}" for i in range(3)}
    first = _rows(db)

    assert ledger.defer_token_index() is False and _has_token_index(db)  # rows: it stays

    with db.connection() as conn:  # a run killed after dropping it, before building it
        conn.execute("DROP INDEX message_search_tokens")
    run_import(ledger, "chatgpt", str(_export(tmp_path / "b.json", "b")), index_messages=True)
    assert _has_token_index(db)  # the next import builds it first, then keeps it up
    assert [r for r in _rows(db) if r[0].startswith("chatgpt:a")] == first
    with db.connection() as conn:  # the index answers the tokens query, and answers it right
        conn.execute("SET LOCAL enable_seqscan = off")
        plan = "\n".join(
            r[0]
            for r in conn.execute(
                "EXPLAIN SELECT message_key FROM message_search WHERE tokens @@ '見積'::tsquery"
            ).fetchall()
        )
        found = conn.execute(
            "SELECT count(*) FROM message_search WHERE tokens @@ '見積'::tsquery"
        ).fetchone()
    assert "message_search_tokens" in plan
    assert found is not None and found[0] == 6
