"""Issue 10, point 3: `pmem forget` erases a secret, a memory or a conversation from every store,
irreversibly, and the final scan (every table through SQL, every file pmem wrote) finds no copy.

The planted secret is a private string the guard does not recognise (a code name): exactly the
case forget exists for. It reaches memories, revisions, evidence, the indexes, runs/ files and
review files through an ordinary offline backfill before it is forgotten.
"""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from cli.main import app
from core.hashing import bytes_text
from core.settings import Settings
from flows import pipeline as pl
from reports.review import build_review, write_review
from search.reader import SearchStore
from store.db import Database

SECRET = "Blue-Otter-Kanazawa-7731"
OTHER = "蛍光ペンの色はミントグリーン"  # the text of the conversation forgotten whole


class LocalFakeEmbedder:
    model, dim, local = "fake:forget", 8, True

    def embed(self, texts):
        return [[float(len(t) % 7 + 1 + i) for i in range(self.dim)] for t in texts]


def _conv(cid: str, title: str, turns: list[tuple[str, str]], t0: float) -> dict:
    mapping: dict = {"root": {"id": "root", "message": None, "parent": None, "children": ["n0"]}}
    for i, (role, text) in enumerate(turns):
        mapping[f"n{i}"] = {
            "id": f"n{i}",
            "parent": "root" if i == 0 else f"n{i - 1}",
            "children": [f"n{i + 1}"] if i + 1 < len(turns) else [],
            "message": {
                "id": f"n{i}",
                "author": {"role": role},
                "create_time": t0 + i * 60,
                "content": {"content_type": "text", "parts": [text]},
            },
        }
    return {
        "id": cid,
        "title": title,
        "create_time": t0,
        "current_node": f"n{len(turns) - 1}",
        "mapping": mapping,
    }


def _export(tmp_path: Path, *, grown: bool = False) -> Path:
    secret_turns = [
        ("user", f"新しいプロジェクトのコードネームを決めたい。候補は {SECRET} と Red-Fox。"),
        ("assistant", f"{SECRET} は覚えやすいですね。"),
        ("user", f"結局、コードネームは {SECRET} に決めた。理由は覚えやすいから。"),
    ]
    if grown:
        secret_turns.append(
            ("user", f"念のため: {SECRET.lower()} で社内 wiki も作ることに決めた。")
        )
    convs = [
        _conv("c-secret", f"{SECRET} の命名", secret_turns, 1717000000.0),
        _conv(
            "c-pen",
            "文房具の話",
            [
                ("user", f"ノートの色分けを決めた。{OTHER}にする。理由は目に優しいから。"),
                ("assistant", "良いと思います。"),
            ],
            1717100000.0,
        ),
        _conv(
            "c-move",
            "引っ越しの決定",
            [
                ("user", "結局、引っ越し先は川崎に決めた。通勤が楽だから。"),
                ("assistant", "了解です。"),
            ],
            1717200000.0,
        ),
    ]
    path = tmp_path / ("grown.json" if grown else "export.json")
    path.write_text(json.dumps(convs, ensure_ascii=False), encoding="utf-8")
    return path


def _grow(export: Path, index: int, text: str, out: Path) -> Path:
    """The same export with one more person message at the end of conversation ``index``."""
    convs = json.loads(export.read_text(encoding="utf-8"))
    conv = convs[index]
    last = conv["current_node"]
    conv["mapping"][last]["children"] = ["grown"]
    conv["mapping"]["grown"] = {
        "id": "grown",
        "parent": last,
        "children": [],
        "message": {
            "id": "grown",
            "author": {"role": "user"},
            "create_time": conv["create_time"] + 3600,
            "content": {"content_type": "text", "parts": [text]},
        },
    }
    conv["current_node"] = "grown"
    out.write_text(json.dumps(convs, ensure_ascii=False), encoding="utf-8")
    return out


def _backfill(export: Path) -> dict:
    p = pl.Pipeline.open(Settings())
    try:
        return pl.run_backfill(p, "chatgpt", str(export), dry_run=False)
    finally:
        p.close()


def _build(pmem_env: dict, db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """Import + offline backfill + vectors + review + export: the secret is everywhere."""
    monkeypatch.setenv("PMEM_EMBEDDER", "none")
    export = _export(tmp_path)
    summary = _backfill(export)
    assert summary["commits"] >= 3
    db = Database(db_url)
    try:
        SearchStore(db).embed_pending(LocalFakeEmbedder(), index=False)
        p = pl.Pipeline.open(Settings())
        try:
            write_review(
                build_review(p.runs, p.store, p.settings.runs_dir, summary["run_id"]),
                p.settings.runs_dir,
            )
        finally:
            p.close()
    finally:
        db.close()
    backup = tmp_path / "backup.jsonl"  # a backup the user made, outside the data dir
    out = _cli("export", "--out", str(backup))
    assert out.exit_code == 0, out.stderr
    return {"export": export, "run_id": summary["run_id"], "backup": backup}


def _cli(*args: str, input: str | None = None):
    return CliRunner().invoke(app, list(args), input=input)


def _json(result) -> dict:
    lines = result.stdout.strip().splitlines()
    assert len(lines) == 1, "--json prints one object on stdout and nothing else"
    return json.loads(lines[0])


def _sql_copies(db_url: str, needle: str) -> dict[str, int]:
    """Every text-ish column of every table (cast to text; bytea decoded), searched in any case."""
    low = needle.lower()
    found: dict[str, int] = {}
    with psycopg.connect(db_url) as conn:
        cols = conn.execute(
            """SELECT c.table_name, c.column_name, c.data_type FROM information_schema.columns c
               JOIN information_schema.tables t USING (table_schema, table_name)
               WHERE c.table_schema = current_schema() AND t.table_type = 'BASE TABLE'
                 AND c.data_type NOT IN ('integer', 'bigint', 'boolean', 'real', 'double precision',
                     'timestamp with time zone', 'date', 'smallint')"""
        ).fetchall()
        for table, column, dtype in cols:
            q = f'SELECT "{column}" FROM "{table}" WHERE "{column}" IS NOT NULL'  # noqa: S608
            if dtype == "bytea":
                n = sum(low in bytes_text(bytes(v)).lower() for (v,) in conn.execute(q))
            else:
                q = f'SELECT count(*) FROM "{table}" WHERE lower("{column}"::text) LIKE %s'  # noqa: S608
                n = conn.execute(q, ("%" + low + "%",)).fetchone()[0]
            if n:
                found[f"{table}.{column}"] = n
    return found


def _file_copies(root: Path, needle: str) -> list[str]:
    low = needle.lower()
    return sorted(
        str(p.relative_to(root))
        for p in root.rglob("*")
        if p.is_file() and low in p.read_bytes().decode("utf-8", "replace").lower()
    )


def _ledger_tables(found: dict[str, int]) -> set[str]:
    return {k.split(".")[0] for k in found}


def _statistics_bytes(db_url: str) -> bytes:
    """The bytes of pg_statistic's file on disk (live and dead rows alike)."""
    with psycopg.connect(db_url) as conn:
        conn.execute("CHECKPOINT")  # its pages written out
        folder = conn.execute("SHOW data_directory").fetchone()[0]
        rel = conn.execute("SELECT pg_relation_filepath('pg_statistic')").fetchone()[0]
    return b"".join(p.read_bytes() for p in Path(folder).glob(rel + "*"))


def test_forget_a_secret_leaves_no_copy_then_from_ledger_survives_a_reimport(
    pmem_env, db_url, tmp_path, monkeypatch
) -> None:
    built = _build(pmem_env, db_url, tmp_path, monkeypatch)
    data = Path(pmem_env["PMEM_DATA_DIR"])
    before = _sql_copies(db_url, SECRET)
    # it really is everywhere before: memories, revisions, evidence, indexes, ledger, files
    for place in (
        "memories.title",
        "memory_revisions.record",
        "evidence.text",
        "search_projections.index_text",
        "message_search.text",
        "source_conversations.title",
    ):
        assert place in before, place
    assert any(SECRET in bytes_text(b) for b in _bodies(db_url))
    files = _file_copies(data, SECRET)
    assert any(f.endswith("result.json") for f in files) and any(
        f.endswith("review.html") for f in files
    )
    with psycopg.connect(db_url) as conn:
        assert conn.execute("SELECT count(*) FROM message_embeddings").fetchone()[0] > 0
        secret_mems = [
            r[0]
            for r in conn.execute("SELECT id FROM memories WHERE title LIKE %s", (f"%{SECRET}%",))
        ]
    assert secret_mems

    # declining erases nothing
    declined = _cli("forget", "--secret", SECRET, input="n\n")
    assert declined.exit_code == 1 and _sql_copies(db_url, SECRET) == before

    # the planner's statistics hold it too (a histogram or common value of a text column)
    with psycopg.connect(db_url, autocommit=True) as conn:
        conn.execute("ANALYZE")
    assert SECRET.encode() in _statistics_bytes(db_url)

    # the secret from a file (not the shell history); the ledger keeps the raw record
    secret_file = tmp_path / "secret.txt"
    secret_file.write_text(SECRET + "\n")
    res = _cli("forget", "--secret-file", str(secret_file), "--yes", "--json")
    assert res.exit_code == 0, res.stderr
    body = _json(res)
    assert set(secret_mems) <= set(body["memories_redacted"])
    assert body["remaining"] == {} and body["remaining_files"] == []
    assert body["vacuum"]["mode"] == "full" and "memories" in body["vacuum"]["tables"]
    assert body["vacuum"]["checkpoint"] is True
    # pg_statistic rewritten after ANALYZE: no dead row keeps the old values on disk; what no
    # SQL reaches is named (the WAL), and there is no backup it could not reach
    assert body["vacuum"]["statistics"] == "rebuilt"
    assert any(p.startswith("pg_wal") for p in body["on_disk"]) and body["not_reached"] == []
    assert SECRET not in res.stdout and SECRET not in res.stderr
    after = _sql_copies(db_url, SECRET)
    assert _ledger_tables(after) == {"source_messages", "source_conversations"}, after
    assert set(body["ledger_kept"]) and _file_copies(data, SECRET) == []

    # history stays honest: a redaction revision says when and which fields, without the text
    with psycopg.connect(db_url) as conn:
        mid = secret_mems[0]
        revs = conn.execute(
            """SELECT revision, reason, redacted_at IS NOT NULL, redacted_fields, record::text
               FROM memory_revisions WHERE memory_id = %s ORDER BY revision""",
            (mid,),
        ).fetchall()
        assert revs[-1][1] == "redaction" and revs[-1][2] and "title" in revs[-1][3]
        assert all(r[2] for r in revs[:-1])  # every earlier revision carries the redaction mark
        assert all("[REDACTED:forgotten]" in r[4] for r in revs)
        cur = conn.execute(
            "SELECT current_revision FROM memories WHERE id = %s", (mid,)
        ).fetchone()[0]
        assert cur == revs[-1][0]
        audit = conn.execute(
            "SELECT action, count(*) FROM erasure_audit WHERE erasure_id = %s GROUP BY 1",
            (body["erasure_id"],),
        ).fetchall()
        assert dict(audit)["erasure"] == 1 and dict(audit)["redact-revision"] >= 1
        # the redaction's vectors are gone until reindex makes them again from the redacted text
        assert (
            conn.execute(
                "SELECT count(*) FROM memory_embeddings WHERE memory_id = ANY(%s)", (secret_mems,)
            ).fetchone()[0]
            == 0
        )
    # a fresh export has no copy; the backup made before still has (docs/security.md says so)
    fresh = tmp_path / "fresh.jsonl"
    assert _cli("export", "--out", str(fresh)).exit_code == 0
    assert SECRET.lower() not in fresh.read_text().lower()
    assert SECRET in built["backup"].read_text()

    # --from-ledger, the secret from stdin
    res = _cli(
        "forget", "--secret-file", "-", "--from-ledger", "--yes", "--json", input=SECRET + "\n"
    )
    assert res.exit_code == 0, res.stderr
    assert _sql_copies(db_url, SECRET) == {}
    assert _file_copies(data, SECRET) == []
    # nothing held it any more: the statistics on disk were rebuilt from clean rows
    assert SECRET.encode() not in _statistics_bytes(db_url)
    key = data / "erasure.key"
    assert key.stat().st_mode & 0o777 == 0o600
    with psycopg.connect(db_url) as conn:
        kinds = dict(
            conn.execute("SELECT kind, count(*) FROM erased_content GROUP BY 1").fetchall()
        )
        # one for the derived stores' guard, one for the ledger's import
        assert kinds["secret"] == 2 and kinds["message"] >= 2
        # a keyed HMAC, not a plain hash of the secret
        import hashlib

        stored = {r[0] for r in conn.execute("SELECT hmac FROM erased_content")}
        assert hashlib.sha256(SECRET.lower().encode()).hexdigest() not in stored

    # the same export again brings nothing back, and nothing is drafted again
    again = _backfill(built["export"])
    assert again["drafter_calls"] == 0
    assert _sql_copies(db_url, SECRET) == {}
    # a grown export: the old messages stay redacted, a new message loses the secret on import
    grown = _backfill(_export(tmp_path, grown=True))
    assert grown["status"] == "complete"
    assert _sql_copies(db_url, SECRET) == {} and _file_copies(data, SECRET) == []
    with psycopg.connect(db_url) as conn:
        last = conn.execute(
            "SELECT body FROM source_messages WHERE message_key = 'chatgpt:c-secret:n3'"
        ).fetchone()
    assert last is not None and "[REDACTED:forgotten] で社内 wiki" in bytes_text(bytes(last[0]))


def _bodies(db_url: str) -> list[bytes]:
    with psycopg.connect(db_url) as conn:
        return [bytes(r[0]) for r in conn.execute("SELECT body FROM source_messages")]


def test_forget_a_memory_erases_it_and_no_later_draft_recreates_it(
    pmem_env, db_url, tmp_path, monkeypatch
) -> None:
    built = _build(pmem_env, db_url, tmp_path, monkeypatch)
    data = Path(pmem_env["PMEM_DATA_DIR"])
    with psycopg.connect(db_url) as conn:
        mid, title = conn.execute(
            "SELECT id, title FROM memories WHERE title LIKE '引っ越し%'"
        ).fetchone()
        n_revs = conn.execute(
            "SELECT count(*) FROM memory_revisions WHERE memory_id = %s", (mid,)
        ).fetchone()[0]
    assert any(mid in p.read_text() for p in (data / "runs").rglob("run-state.json"))
    res = _cli("forget", "--memory", mid, "--yes", "--json")
    assert res.exit_code == 0, res.stderr
    body = _json(res)
    assert body["memories_erased"] == [mid] and body["remaining"] == {}
    assert body["files"]["drafts_removed"] >= 1
    with psycopg.connect(db_url) as conn:
        for table, col in (
            ("memories", "id"),
            ("memory_revisions", "memory_id"),
            ("evidence", "memory_id"),
            ("search_projections", "memory_id"),
            ("memory_embeddings", "memory_id"),
        ):
            assert (
                conn.execute(f"SELECT count(*) FROM {table} WHERE {col} = %s", (mid,)).fetchone()[0]
                == 0
            )  # noqa: S608
        assert (
            conn.execute("SELECT reason FROM tombstones WHERE memory_id = %s", (mid,)).fetchone()[0]
            == "erased"
        )
        audit = conn.execute(
            "SELECT counts FROM erasure_audit WHERE action = 'erase-revisions' AND memory_id = %s",
            (mid,),
        ).fetchone()
        assert audit[0]["revisions"] == n_revs
    # the memory's text is in no table, run file or review file (the ledger keeps the raw record)
    found = _sql_copies(db_url, title)
    assert _ledger_tables(found) <= {"source_messages", "source_conversations", "message_search"}, (
        found
    )
    assert _file_copies(data / "runs", title) == []
    # show / restore cannot bring it back, nor can the same export again, nor a commit resting on
    # its evidence (the tombstone keeps its source keys and conversations: ids only)
    assert _cli("show", mid).exit_code != 0
    assert _cli("restore", mid, "1", "--yes").exit_code != 0
    assert _backfill(built["export"])["drafter_calls"] == 0
    with psycopg.connect(db_url) as conn:
        keys, convs = conn.execute(
            "SELECT source_keys, conversation_keys FROM tombstones WHERE memory_id = %s", (mid,)
        ).fetchone()
        assert keys and convs == ["chatgpt:c-move"]
        assert (
            conn.execute("SELECT count(*) FROM memories WHERE title LIKE '引っ越し%'").fetchone()[0]
            == 0
        )
    from core.errors import TombstonedMemory
    from core.models import CommitRequest, EvidenceIn
    from store.records import MemoryStore

    db = Database(db_url)
    try:
        with pytest.raises(TombstonedMemory):
            MemoryStore(db).commit(
                CommitRequest(
                    kind="decision",
                    title="引っ越し",
                    canonical_summary="川崎",
                    index_summary="川崎",
                    evidence=[
                        EvidenceIn(source_key=k, text="引っ越し先は川崎に決めた") for k in keys
                    ],
                    idempotency_key="again",
                )
            )
    finally:
        db.close()
    # nor a later backfill of the conversation grown by one message
    grown = _backfill(
        _grow(
            built["export"],
            2,
            "やはり引っ越し先は川崎に決めた。駅に近いから。",
            tmp_path / "g.json",
        )
    )
    assert grown["status"] == "complete" and grown["drafter_calls"] >= 1  # it was drafted again
    with psycopg.connect(db_url) as conn:
        assert (
            conn.execute("SELECT count(*) FROM memories WHERE title LIKE '引っ越し%'").fetchone()[0]
            == 0
        )

    # --from-ledger: the cited messages keep their place with the marker as their body, and the
    # same export imported again neither brings their text back nor re-drafts anything
    with psycopg.connect(db_url) as conn:
        (pen,) = conn.execute(
            "SELECT DISTINCT memory_id FROM evidence WHERE source_key LIKE 'chatgpt:c-pen:%'"
        ).fetchone()
        cited = [
            r[0]
            for r in conn.execute("SELECT source_key FROM evidence WHERE memory_id = %s", (pen,))
        ]
    res = _cli("forget", "--memory", pen, "--from-ledger", "--yes", "--json")
    assert res.exit_code == 0, res.stderr
    assert _sql_copies(db_url, OTHER) == {}
    assert _backfill(built["export"])["drafter_calls"] == 0
    with psycopg.connect(db_url) as conn:
        bodies = [
            bytes_text(bytes(r[0]))
            for r in conn.execute(
                "SELECT body FROM source_messages WHERE message_key = ANY(%s)", (cited,)
            )
        ]
    assert bodies and all(b == "[REDACTED:forgotten]" for b in bodies)
    assert _sql_copies(db_url, OTHER) == {}


def test_forget_a_conversation_from_the_ledger_and_a_reimport_does_not_bring_it_back(
    pmem_env, db_url, tmp_path, monkeypatch
) -> None:
    built = _build(pmem_env, db_url, tmp_path, monkeypatch)
    data = Path(pmem_env["PMEM_DATA_DIR"])
    assert _sql_copies(db_url, OTHER) and _file_copies(data / "runs", OTHER)
    # first from everything derived only: the ledger keeps it, nothing derived does
    res = _cli("forget", "--conversation", "chatgpt:c-pen", "--yes", "--json")
    assert res.exit_code == 0, res.stderr
    assert len(_json(res)["memories_erased"]) >= 1
    assert _ledger_tables(_sql_copies(db_url, OTHER)) == {"source_messages"}
    assert _file_copies(data / "runs", OTHER) == []
    # a grown export: the new message goes into the ledger only; nothing is drafted or indexed
    grown = _backfill(
        _grow(
            built["export"], 1, f"追記: {OTHER}のペンを三本買うことに決めた。", tmp_path / "g.json"
        )
    )
    assert grown["drafter_calls"] == 0
    db = Database(db_url)
    try:
        SearchStore(db).sync_messages()  # catching the index up does not bring it back
    finally:
        db.close()
    assert _ledger_tables(_sql_copies(db_url, OTHER)) == {"source_messages"}
    with psycopg.connect(db_url) as conn:
        assert (
            conn.execute(
                "SELECT count(*) FROM source_messages WHERE conversation_key = 'chatgpt:c-pen'"
            ).fetchone()[0]
            == 3
        )
    # then from the ledger too
    res = _cli("forget", "--conversation", "chatgpt:c-pen", "--from-ledger", "--yes", "--json")
    assert res.exit_code == 0, res.stderr
    assert _sql_copies(db_url, OTHER) == {} and _file_copies(data, OTHER) == []
    again = _backfill(built["export"])
    assert again["drafter_calls"] == 0
    assert _sql_copies(db_url, OTHER) == {}
    with psycopg.connect(db_url) as conn:
        assert (
            conn.execute(
                "SELECT count(*) FROM source_conversations WHERE conversation_key = 'chatgpt:c-pen'"
            ).fetchone()[0]
            == 0
        )
        assert (
            conn.execute("SELECT count(*) FROM source_conversations").fetchone()[0] == 2
        )  # the other conversations are untouched


def test_revisions_change_only_through_the_audited_functions(
    pmem_env, db_url, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("PMEM_EMBEDDER", "none")
    _backfill(_export(tmp_path))
    with psycopg.connect(db_url) as conn:
        mid = conn.execute("SELECT memory_id FROM memory_revisions LIMIT 1").fetchone()[0]
        with pytest.raises(psycopg.errors.RaiseException):
            conn.execute("UPDATE memory_revisions SET record = '{}' WHERE memory_id = %s", (mid,))
        conn.rollback()
        # the session flag alone is not enough: the change needs its audit row
        conn.execute("SELECT set_config('pmem.erasure', 'x', true)")
        with pytest.raises(psycopg.errors.RaiseException):
            conn.execute("DELETE FROM memory_revisions WHERE memory_id = %s", (mid,))
        conn.rollback()
        conn.execute("INSERT INTO erasure_audit (erasure_id, action) VALUES ('t', 'erasure')")
        for statement in (
            "DELETE FROM erasure_audit",
            "TRUNCATE erasure_audit",
            "UPDATE erasure_audit SET target = 'x'",
        ):
            with pytest.raises(psycopg.errors.RaiseException):
                conn.execute(statement)
            conn.rollback()
            conn.execute("INSERT INTO erasure_audit (erasure_id, action) VALUES ('t', 'erasure')")


def test_a_secret_forgotten_from_derived_stores_stays_out_of_later_drafts(
    pmem_env, db_url, tmp_path, monkeypatch
) -> None:
    """Without --from-ledger the ledger keeps the secret; a later draft of the grown conversation
    (the drafter reads the old messages again) must not bring it back into any derived store."""
    built = _build(pmem_env, db_url, tmp_path, monkeypatch)
    data = Path(pmem_env["PMEM_DATA_DIR"])
    res = _cli("forget", "--secret", SECRET, "--yes", "--json")
    assert res.exit_code == 0, res.stderr
    grown = _backfill(
        _grow(built["export"], 0, f"追記: {SECRET} の資料も作ることに決めた。", tmp_path / "g.json")
    )
    assert grown["status"] == "complete" and grown["drafter_calls"] >= 1
    assert _ledger_tables(_sql_copies(db_url, SECRET)) == {
        "source_messages",
        "source_conversations",
    }
    assert _file_copies(data, SECRET) == []
    with psycopg.connect(db_url) as conn:  # the new message was drafted: its decision is kept
        assert (
            conn.execute(
                "SELECT count(*) FROM memories WHERE canonical_summary LIKE '%の資料も作ることに決めた%'"
            ).fetchone()[0]
            >= 1
        )


def test_a_backup_made_before_does_not_bring_a_forgotten_secret_back(
    pmem_env, db_url, tmp_path, monkeypatch
) -> None:
    built = _build(pmem_env, db_url, tmp_path, monkeypatch)
    res = _cli("forget", "--secret", SECRET, "--from-ledger", "--yes", "--json")
    assert res.exit_code == 0, res.stderr
    with psycopg.connect(db_url) as conn:  # the memories go, so that the backup's come back
        ids = [r[0] for r in conn.execute("SELECT id FROM memories")]
    for mid in ids:
        assert _cli("forget", "--memory", mid, "--yes").exit_code == 0
    with psycopg.connect(db_url) as conn:
        conn.execute("DELETE FROM tombstones")
    assert SECRET in built["backup"].read_text()
    loaded = _cli("backup", "load", str(built["backup"]))
    assert loaded.exit_code == 0, loaded.stderr
    with psycopg.connect(db_url) as conn:
        assert conn.execute("SELECT count(*) FROM memories").fetchone()[0] >= 3
    assert _sql_copies(db_url, SECRET) == {}


def test_a_pre_upgrade_backup_is_reported_as_not_reached(pmem_env, db_url, tmp_path) -> None:
    """Issue 29, finding 4: the dump and the old data folder an upgrade set aside under
    <data dir>/backups hold the old rows; forget names them and does not exit 0."""
    backups = Path(pmem_env["PMEM_DATA_DIR"]) / "backups"
    backups.mkdir(parents=True, exist_ok=True)
    (backups / "pmem-pg16-20260101.dump").write_bytes(b"PGDMP compressed")
    res = _cli("forget", "--secret", SECRET, "--yes", "--json")
    assert res.exit_code == 4, res.stderr  # EXIT_REMAINING
    body = _json(res)
    assert body["not_reached"] == ["backups/pmem-pg16-20260101.dump"]
    assert "not reached" in res.stderr and SECRET not in res.stderr


def test_a_table_another_session_holds_is_reported_not_waited_for(db, db_url) -> None:
    from store.forget import Forgetter

    with psycopg.connect(db_url) as other:
        other.execute("SELECT count(*) FROM memories")  # an open transaction holds a lock
        out = Forgetter(db, b"k" * 32).vacuum({"memories", "evidence"}, lock_timeout=0.5)
    assert out["skipped"] == ["memories"] and out["tables"] == ["evidence"]


def test_review_and_forget_reach_run_files_on_an_object_store(
    pmem_env, db_url, tmp_path, monkeypatch
) -> None:
    """PMEM_RUNS_URL on an fsspec store (a pool's shared run files): `pmem review` reads the
    drafts there, and `pmem forget` erases from them and checks them."""
    import uuid

    from state.files import runs_root

    monkeypatch.setenv("PMEM_EMBEDDER", "none")
    monkeypatch.setenv("PMEM_RUNS_URL", f"memory://pmem-forget-{uuid.uuid4().hex}")
    summary = _backfill(_export(tmp_path))
    root = runs_root(Settings())
    stored = [p for p in root.rglob("result.json")]
    assert stored and any(SECRET in p.read_text(encoding="utf-8") for p in stored)
    assert not (Path(pmem_env["PMEM_DATA_DIR"]) / "runs" / summary["run_id"] / "batches").exists()

    review = _cli("review", summary["run_id"], "--json")
    assert review.exit_code == 0, review.stderr
    assert _json(review)["counts"]["drafts"] >= 3  # the drafts, read from the object store

    res = _cli("forget", "--secret", SECRET, "--yes", "--json")
    assert res.exit_code == 0, res.stderr
    body = _json(res)
    assert body["remaining_files"] == [] and body["files"]["rewritten"] >= 1
    assert not any(
        SECRET.lower() in p.read_text(encoding="utf-8").lower() for p in root.rglob("*.json")
    )
