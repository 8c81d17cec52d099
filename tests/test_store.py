"""The revisioned memory store against the real PostgreSQL (no mocks)."""

from __future__ import annotations

import threading
import uuid

import psycopg
import pytest

from core.errors import MemoryNotFound, StaleRevision, StoreError, TombstonedMemory
from core.models import CommitRequest, EvidenceIn
from search.reader import SearchStore


def req(key: str, **kw) -> CommitRequest:
    base = dict(
        kind="decision",
        title="家計簿アプリのデータベース選定",
        canonical_summary="PostgreSQL を選んだ。理由は JSON と全文検索。",
        index_summary="家計簿アプリに PostgreSQL を採用",
        aliases=["household budget app database"],
        tags=["chatgpt", "decision"],
        evidence=[EvidenceIn(source_key="chatgpt:c1:n1", text="PostgreSQL にすることに決めた")],
        idempotency_key=key,
    )
    base.update(kw)
    return CommitRequest(**base)


def test_create_get_history(store):
    r = store.commit(req("k1"))
    assert r.created and r.revision == 1 and r.evidence_added == 1
    view = store.get(r.memory_id, history=True)
    assert view.title == "家計簿アプリのデータベース選定"
    assert view.evidence[0]["text"] == "PostgreSQL にすることに決めた"
    assert [h["reason"] for h in view.revisions] == ["create"]


def test_append_requires_current_revision(store):
    first = store.commit(req("k1"))
    ok = store.commit(
        req(
            "k2",
            memory_id=first.memory_id,
            expected_revision=1,
            reason="append",
            canonical_summary="追記: 移行は来月。",
            evidence=[EvidenceIn(source_key="chatgpt:c1:n2", text="来月移行する")],
        )
    )
    assert ok.revision == 2 and ok.evidence_added == 1
    with pytest.raises(StaleRevision) as err:
        store.commit(
            req(
                "k3",
                memory_id=first.memory_id,
                expected_revision=1,
                reason="append",
                canonical_summary="古い版からの更新",
            )
        )
    assert err.value.current == 2
    view = store.get(first.memory_id)
    # an append never shortens the record
    assert "PostgreSQL を選んだ" in view.canonical_summary and "追記" in view.canonical_summary


def test_materially_identical_evidence_adds_no_revision(store):
    first = store.commit(req("k1"))
    again = store.commit(
        req(
            "k2",
            memory_id=first.memory_id,
            expected_revision=1,
            reason="append",
            evidence=[
                EvidenceIn(source_key="chatgpt:c1:n1", text="PostgreSQL\u3000 にすることに決めた ")
            ],
        )
    )
    assert again.noop and again.revision == 1
    assert len(store.history(first.memory_id)) == 1
    assert store.counts()["evidence"] == 1


def test_idempotent_replay_returns_first_result(store):
    a = store.commit(req("same"))
    b = store.commit(req("same"))
    assert b.replayed and b.memory_id == a.memory_id and b.revision == a.revision
    assert store.counts() == {"memories": 1, "revisions": 1, "evidence": 1, "tombstones": 0}
    with pytest.raises(StoreError, match="different request"):
        store.commit(req("same", title="別のタイトル"))


def test_race_on_one_memory_has_no_lost_update(store):
    first = store.commit(req("base"))
    barrier = threading.Barrier(2)
    outcomes: list[object] = []

    def worker(i: int) -> None:
        barrier.wait()
        try:
            outcomes.append(
                store.commit(
                    req(
                        f"race{i}",
                        memory_id=first.memory_id,
                        expected_revision=1,
                        reason="append",
                        canonical_summary=f"worker {i} の追記",
                        evidence=[EvidenceIn(source_key=f"chatgpt:c1:w{i}", text=f"worker {i}")],
                    )
                )
            )
        except StaleRevision as err:
            outcomes.append(err)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wins = [o for o in outcomes if not isinstance(o, Exception)]
    stale = [o for o in outcomes if isinstance(o, StaleRevision)]
    assert len(wins) == 1 and len(stale) == 1
    assert stale[0].current == 2
    view = store.get(first.memory_id, history=True)
    assert view.current_revision == 2 and len(view.revisions) == 2
    # the winner's text is there, the loser's is not silently merged or overwritten
    assert sum(f"worker {i} の追記" in view.canonical_summary for i in range(2)) == 1


def test_database_refuses_to_change_revisions(store, db_url):
    r = store.commit(req("k1"))
    with psycopg.connect(db_url) as conn:
        with pytest.raises(psycopg.errors.RaiseException, match="insert-only"):
            conn.execute(
                "UPDATE memory_revisions SET reason = 'x' WHERE memory_id = %s", (r.memory_id,)
            )
        conn.rollback()
        with pytest.raises(psycopg.errors.RaiseException, match="insert-only"):
            conn.execute("DELETE FROM memory_revisions WHERE memory_id = %s", (r.memory_id,))
        conn.rollback()
        with pytest.raises(psycopg.errors.RaiseException, match="insert-only"):
            conn.execute("TRUNCATE memory_revisions CASCADE")


def test_restore_makes_a_new_revision(store):
    first = store.commit(req("k1"))
    store.commit(
        req(
            "k2",
            memory_id=first.memory_id,
            expected_revision=1,
            reason="correction",
            canonical_summary="訂正: SQLite にした。",
        )
    )
    r = store.restore(first.memory_id, 1, expected_revision=2, idempotency_key="restore-1")
    assert r.revision == 3
    hist = store.history(first.memory_id)
    assert [h["reason"] for h in hist] == ["create", "correction", "restore"]
    assert hist[2]["restored_from"] == 1 and hist[2]["record"] == hist[0]["record"]
    assert store.get(first.memory_id).canonical_summary == hist[0]["record"]["canonical_summary"]


def test_tombstone_is_never_resurrected(store):
    first = store.commit(req("create-1"))
    store.delete(first.memory_id, expected_revision=1, reason="user asked")
    # a replayed commit returns the first result and does not bring the memory back
    replay = store.commit(req("create-1"))
    assert replay.replayed
    assert store.get(first.memory_id).status == "deleted"
    # a fresh create from the same source lineage is refused
    with pytest.raises(TombstonedMemory):
        store.commit(req("create-2"))
    # an append to the deleted memory is refused
    with pytest.raises(TombstonedMemory):
        store.commit(
            req("append-1", memory_id=first.memory_id, expected_revision=1, reason="append")
        )
    assert SearchStore(store.db).search("家計簿") == []
    assert store.counts()["memories"] == 0


def test_unknown_memory(store):
    with pytest.raises(MemoryNotFound):
        store.get("mem_nope")
    with pytest.raises(MemoryNotFound):
        store.commit(req("x", memory_id="mem_nope", expected_revision=1, reason="append"))


def test_search_japanese_and_english(store):
    store.commit(req("a"))
    store.commit(
        req(
            "b",
            title="Choosing a laptop",
            canonical_summary="I decided on a ThinkPad because of the keyboard.",
            index_summary="Bought a ThinkPad X1",
            aliases=["ノートPC選び"],
            evidence=[EvidenceIn(source_key="chatgpt:c2:n1", text="I decided on a ThinkPad")],
        )
    )
    ja = SearchStore(store.db).search("データベース選定")
    assert ja and ja[0].title == "家計簿アプリのデータベース選定"
    en = SearchStore(store.db).search("thinkpad keyboard")
    assert en and en[0].title == "Choosing a laptop"
    assert SearchStore(store.db).search("ノートPC")[0].title == "Choosing a laptop"
    assert SearchStore(store.db).search("量子コンピュータ") == []


def test_migrations_apply_once(db_url):
    from store.db import migrate

    with psycopg.connect(db_url, autocommit=True) as conn:
        assert migrate(conn) == []
        n = conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0]
        assert n >= 1
        collate = conn.execute(
            "SELECT datlocprovider, datcollate FROM pg_database WHERE datname = current_database()"
        ).fetchone()
        assert collate[1] == "C.UTF-8"
        # pg_trgm yields trigrams for Japanese in this database
        assert conn.execute("SELECT array_length(show_trgm('データベース'), 1)").fetchone()[0] > 0
        assert conn.execute(
            "SELECT extversion FROM pg_extension WHERE extname = 'vector'"
        ).fetchone()


def test_an_unpooled_database_keeps_one_connection_and_creates_a_missing_database(
    db_url, pg_admin_url
):
    """A one-shot command (`pmem search`) opens one connection, not a pool; each unit of work is
    committed or rolled back as a pool's connection is; a second connection wanted at the same
    time comes from a pool made then; a missing database is created when the first connection
    fails (ADR 0027)."""
    from store.db import Database, ensure_database, with_database

    db = Database(db_url, pooled=False)
    try:
        with db.connection() as conn:
            backend = conn.info.backend_pid
            conn.execute("CREATE TABLE t_oneshot (x int)")
            conn.execute("INSERT INTO t_oneshot VALUES (1)")
        with pytest.raises(ZeroDivisionError), db.connection() as conn:
            conn.execute("INSERT INTO t_oneshot VALUES (2)")
            raise ZeroDivisionError
        with db.connection() as conn:
            assert conn.info.backend_pid == backend  # the same connection, no pool
            assert conn.execute("SELECT array_agg(x) FROM t_oneshot").fetchone()[0] == [1]
            with db.connection() as other:  # nested: another connection, from a pool
                assert other.info.backend_pid != backend
                other.execute("INSERT INTO t_oneshot VALUES (3)")
        assert db._pool is not None
        with psycopg.connect(db_url) as check:  # both units of work were committed
            assert check.execute("SELECT array_agg(x ORDER BY x) FROM t_oneshot").fetchone()[0] == [
                1,
                3,
            ]
    finally:
        db.close()
    name = f"{psycopg.conninfo.conninfo_to_dict(db_url)['dbname']}_made"
    created: list[str] = []
    fresh = Database(
        with_database(pg_admin_url, name),
        pooled=False,
        create=lambda: created.append(name) or ensure_database(pg_admin_url, name),
    )
    try:
        with fresh.connection() as conn:  # made and migrated
            assert conn.execute("SELECT count(*) FROM schema_migrations").fetchone()[0] >= 1
    finally:
        fresh.close()
        with psycopg.connect(pg_admin_url, autocommit=True) as admin:
            admin.execute(
                psycopg.sql.SQL("DROP DATABASE {} WITH (FORCE)").format(
                    psycopg.sql.Identifier(name)
                )
            )
    assert created == [name]


def test_append_adds_only_what_is_new_and_keeps_its_heading(store):
    first = store.commit(
        req("g1", canonical_summary="## 決定\n- PostgreSQL にした\n- 理由: JSON が扱いやすい")
    )
    redraft = (
        "## 背景\n- 家計簿アプリを作っている\n\n## 決定\n- PostgreSQL  にした\n- バックアップは毎晩"
    )
    store.commit(
        req(
            "g2",
            memory_id=first.memory_id,
            expected_revision=1,
            reason="append",
            canonical_summary=redraft,
        )
    )
    summary = store.get(first.memory_id).canonical_summary
    assert summary.count("PostgreSQL") == 1  # said again (white space aside): not repeated
    # one section per heading, updated in place (no piled `---` blocks)
    assert summary == (
        "## 背景\n- 家計簿アプリを作っている\n\n"
        "## 決定\n- PostgreSQL にした\n- 理由: JSON が扱いやすい\n- バックアップは毎晩"
    )
    # a grown summary that contains the whole current one replaces it (it is a superset)
    grown = summary + "\n## 未解決\n- 監視"
    store.commit(
        req(
            "g3",
            memory_id=first.memory_id,
            expected_revision=2,
            reason="append",
            canonical_summary=grown,
        )
    )
    assert store.get(first.memory_id).canonical_summary == grown
    # a re-draft that says nothing new adds no revision (evidence unchanged too)
    again = store.commit(
        req(
            "g4",
            memory_id=first.memory_id,
            expected_revision=3,
            reason="append",
            canonical_summary="## 決定\n- PostgreSQL にした",
        )
    )
    assert again.noop and again.revision == 3


def test_a_decision_from_another_conversation_supersedes_and_keeps_the_history(store):
    first = store.commit(
        req(
            "h1",
            canonical_summary="## 決定\n- PostgreSQL にした\n\n## 理由\n- JSON が扱いやすい\n\n"
            "## 未解決\n- バックアップ先\n- 監視をどうするか",
            valid_from="2024-03-01T10:00:00+00:00",
            stated_facts=["PostgreSQL にした"],
            inferences=["JSON を多用する設計らしい"],
        )
    )
    later = (
        "## 決定\n- SQLite に戻す\n\n## 理由\n- 一人でしか使わない\n\n"
        "## 解決済み\n- バックアップ先 → バックアップは R2 にした"
    )
    res = store.commit(
        req(
            "h2",
            memory_id=first.memory_id,
            expected_revision=1,
            reason="append",
            canonical_summary=later,
            index_summary="SQLite に戻す",
            evidence=[EvidenceIn(source_key="chatgpt:c2:n1", text="SQLite に戻す")],
            inferences=["運用の手間を嫌った"],
        )
    )
    view = store.get(first.memory_id, history=True)
    s = view.canonical_summary
    assert s.count("## 決定") == 1 and "---" not in s
    decision = s.split("## 決定")[1].split("##")[0]
    assert "SQLite に戻す" in decision and "PostgreSQL" not in decision
    history = s.split("## 経緯")[1]
    assert (
        "### 2024-03-01" in history
        and "PostgreSQL にした" in history
        and "JSON が扱いやすい" in history
    )
    assert "- 監視をどうするか" in s.split("## 未解決")[1].split("##")[0]
    assert "バックアップ先" not in s.split("## 未解決")[1].split("##")[0]  # resolved: moved
    record = view.revisions[-1]["record"]
    assert res.revision == 2 and record["stated_facts"] == ["PostgreSQL にした"]
    assert record["inferences"] == ["JSON を多用する設計らしい", "運用の手間を嫌った"]


def test_two_first_opens_at_once_both_get_the_database(pg_admin_url):
    """Two processes opening a new data dir at the same moment both see no database and both
    run CREATE DATABASE; the one that loses the race finds the database the other made instead
    of failing (store.db.ensure_database)."""
    from store.db import ensure_database

    name = "pmem_race_" + uuid.uuid4().hex[:8]
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []

    def open_first() -> None:
        barrier.wait()
        try:
            ensure_database(pg_admin_url, name)
        except BaseException as exc:  # noqa: BLE001 - collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=open_first) for _ in range(4)]
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
        with psycopg.connect(pg_admin_url) as admin:
            assert admin.execute(
                "SELECT count(*) FROM pg_database WHERE datname = %s", (name,)
            ).fetchone() == (1,)
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as admin:
            admin.execute(
                psycopg.sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    psycopg.sql.Identifier(name)
                )
            )
