"""Issue 17, item 2: topic markers (seed 004's "LLL"). A marker is kept as written (byte-exact,
after the secret guard), never edited, shown first in load_context (each part of which stays
within its share of the budget), bounds recall with --since-marker, is erased by `pmem forget
--secret`, and works through the CLI and the MCP tools over stdio."""

from __future__ import annotations

import json
import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from typer.testing import CliRunner

from core.hashing import text_bytes
from core.models import Channel, CommitRequest, Conversation, Message, Provenance
from core.summaries import MonthDraft, ProfileDraft
from mcp_server.service import MemoryService
from search import context as ctx_mod
from search.reader import SearchStore
from store.erased import load_key
from store.forget import Forgetter
from store.ledger import Ledger
from store.markers import MarkerStore
from store.summaries import MONTH_SHARE, PROFILE_SHARE, SummaryStore

# a GitHub token the guard flags (made up)
TOKEN = "ghp_" + "Zq8wX2vB7nM4kL9pR3tY6uI1oA5sD0fG2hJ4"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def app() -> Any:
    return __import__("cli.main", fromlist=["app"]).app


def test_a_marker_is_kept_as_written_guarded_insert_only_and_erasable(db, db_url, pmem_env) -> None:
    markers = MarkerStore(db)
    first = markers.add("今日はゼミ発表の準備", session="seminar", at=at("2026-11-01T09:00+09:00"))
    assert first.created and first.marker.id.startswith("mk_") and first.marker.session == "seminar"
    again = markers.add(
        "今日はゼミ発表の準備", session="seminar"
    )  # the latest one: not written twice
    assert not again.created and again.marker.id == first.marker.id
    odd = "壊れた\x00文字列\ud800も そのまま"
    kept = markers.add(odd, at=at("2026-11-02T10:00+00:00")).marker
    assert markers.get(kept.id).text == odd  # byte-exact: NUL and a lone surrogate survive
    secret = markers.add(f"デプロイ鍵 {TOKEN} を入れ替える", at=at("2026-11-03T10:00+00:00")).marker
    assert TOKEN not in secret.text and "[REDACTED:" in secret.text and secret.redacted
    with psycopg.connect(db_url) as conn:
        body = conn.execute("SELECT body FROM markers WHERE marker_id = %s", (kept.id,)).fetchone()[
            0
        ]
        assert bytes(body) == text_bytes(odd)
        leaked = conn.execute(
            "SELECT count(*) FROM markers WHERE position(%s IN body) > 0", (TOKEN.encode(),)
        ).fetchone()[0]
        assert leaked == 0
        for statement in ("UPDATE markers SET body = 'x'::bytea", "DELETE FROM markers"):
            with pytest.raises(psycopg.errors.RaiseException, match="insert-only"):
                conn.execute(statement)
            conn.rollback()

    # named by id, by its whole text, or by a piece only one marker holds; errors name ids only
    assert markers.resolve(first.marker.id).id == first.marker.id
    assert markers.resolve("今日はゼミ発表の準備").id == first.marker.id
    assert markers.resolve("ゼミ発表").id == first.marker.id
    markers.add("ゼミ発表のリハーサル", at=at("2026-11-04T10:00+00:00"))
    with pytest.raises(Exception, match=r"2 markers hold that text \(mk_") as err:
        markers.resolve("ゼミ発表")
    assert "ゼミ" not in str(err.value)
    with pytest.raises(Exception, match="no marker"):
        markers.resolve("存在しない話題")
    with pytest.raises(Exception, match="at most 500 characters"):
        markers.add("長" * 501)

    # `pmem forget --secret` rewrites markers (the one audited exception), and a later marker
    # holding the forgotten secret is redacted at the write boundary
    key = load_key(Path(pmem_env["PMEM_DATA_DIR"]), create=True)
    assert key is not None
    er = Forgetter(db, key).forget_secret("リハーサル")
    assert er.counts.get("markers_redacted") == 1 and "markers" in er.tables
    assert Forgetter(db, key).scan("リハーサル") == {}
    later = markers.add("リハーサルは明日", at=at("2026-11-05T10:00+00:00")).marker
    assert "リハーサル" not in later.text and later.redacted == ("forgotten",)


def _recall_fixture(db) -> MarkerStore:
    ledger = Ledger(db)
    imp = ledger.start_import("chatgpt", "synthetic")
    for key, when in (
        ("oct", "2026-10-05T10:00"),
        ("nov5", "2026-11-05T10:00"),
        ("nov20", "2026-11-20T10:00"),
        ("dec1", "2026-12-01T10:00"),
    ):
        moment = at(when + "+00:00")
        msg = Message(
            key=f"chatgpt:mk-{key}:n1",
            node_id="n1",
            role="user",
            channel=Channel.PERSON,
            content_type="text",
            text=f"スライドの構成を見直した（{key}）",
            created_at=moment,
            position=0,
        )
        ledger.upsert(
            Conversation(
                key=f"chatgpt:mk-{key}",
                source="chatgpt",
                external_id=f"mk-{key}",
                title="スライド",
                created_at=moment,
                messages=[msg],
                provenance=Provenance(file="synthetic", position=0),
            ),
            imp,
        )
    markers = MarkerStore(db)
    markers.add("ゼミ発表の準備", at=at("2026-11-01T00:00+00:00"))
    markers.add("就活の面接対策", at=at("2026-11-15T00:00+00:00"))
    return markers


def test_since_marker_bounds_recall(db, pmem_env, monkeypatch) -> None:
    markers = _recall_fixture(db)
    seminar = markers.resolve("ゼミ発表の準備")
    svc = MemoryService(db, embedder=None, tz="UTC")
    now = at("2026-12-10T12:00+00:00")

    def keys(result: Any) -> set[str]:
        return {h.conversation_key.split(":")[1] for h in result.hits}

    assert keys(svc.recall("スライド", now=now)) == {"mk-oct", "mk-nov5", "mk-nov20", "mk-dec1"}
    bounded = svc.recall("スライド", now=now, since_marker=seminar.id)
    assert keys(bounded) == {"mk-nov5"}  # from the marker to the next one
    assert bounded.marker is not None and bounded.marker["next_at"].startswith("2026-11-15")
    assert keys(svc.recall("スライド", now=now, since_marker="面接")) == {
        "mk-nov20",
        "mk-dec1",
    }  # the latest: open
    # a time expression in the question and the marker's span: both hold
    assert keys(svc.recall("先月のスライド", now=now, since_marker="面接")) == {"mk-nov20"}
    assert keys(svc.recall("先月のスライド", now=now, since_marker=seminar.id)) == {"mk-nov5"}

    monkeypatch.setenv("PMEM_EMBEDDER", "none")
    monkeypatch.setenv("PMEM_TZ", "UTC")
    run = CliRunner().invoke(
        app(),
        [
            "recall",
            "スライド",
            "--since-marker",
            seminar.id,
            "--json",
            "--now",
            "2026-12-10T12:00+00:00",
        ],
    )
    assert run.exit_code == 0, run.output
    body = json.loads(run.stdout.strip().splitlines()[-1])
    assert body["marker"]["id"] == seminar.id and body["range"]["start"].startswith("2026-11-01")
    assert [h["conversation_key"] for h in body["hits"]] == ["chatgpt:mk-nov5"]
    missing = CliRunner().invoke(app(), ["recall", "スライド", "--since-marker", "mk_000000000000"])
    assert missing.exit_code == 1 and "no marker mk_000000000000" in missing.stderr


def test_load_context_order_and_budget_shares(db, store, monkeypatch) -> None:
    for i in range(40):
        store.commit(
            CommitRequest(
                kind="decision",
                title=f"決めたこと {i}",
                canonical_summary="本文",
                index_summary="要約: " + "PostgreSQL に移行することに決めた理由。" * 4,
                idempotency_key=f"mk-ctx-{i}",
            )
        )
    summaries = SummaryStore(db)
    month = MonthDraft(
        summary="十一月は" + "ゼミの準備ばかりしていた。" * 300,
        sentiment=0.2,
        keywords=["ゼミ"],
        memory_ids=[],
        message_keys=[],
    )
    summaries.add_month(
        "2026-11",
        month,
        inputs_hash="h",
        model="m",
        prompt_version="p",
        time_zone="UTC",
        run_id=None,
    )
    summaries.add_profile(
        ProfileDraft(profile="学生。" + "研究と就職活動を並行している。" * 300, months=["2026-11"]),
        inputs_hash="h",
        model="m",
        prompt_version="p",
        run_id=None,
    )
    markers = MarkerStore(db)
    for i in range(30):
        markers.add(
            f"話題 {i:02d}: " + "ゼミ発表の準備と面接対策" * 20,
            at=datetime(2026, 11, 1 + i % 28, i % 24, tzinfo=UTC),
        )
    newest = markers.add("いまの話題: 卒論の章立て", at=at("2026-12-01T09:00+00:00")).marker

    # count the statements that read the summaries: one per call
    seen: list[str] = []
    original = psycopg.Connection.execute

    def counting(self: Any, query: Any, *args: Any, **kwargs: Any) -> Any:
        seen.append(str(query))
        return original(self, query, *args, **kwargs)

    monkeypatch.setattr(psycopg.Connection, "execute", counting)
    budget = 8_000
    text = SearchStore(db).load_context(budget_bytes=budget)
    monkeypatch.setattr(psycopg.Connection, "execute", original)
    assert sum("profile_versions" in q or "month_summaries" in q for q in seen) == 1

    assert len(text.encode()) <= budget
    order = [
        text.index(h)
        for h in ("# current state", "# profile", "# latest month: 2026-11", "# memory index")
    ]
    assert order == sorted(order) and order[0] == 0  # the markers first
    parts = {
        h: text[a:b]
        for h, a, b in zip(
            ("state", "profile", "month", "index"), order, [*order[1:], len(text)], strict=True
        )
    }
    assert (
        parts["state"].splitlines()[1].endswith(f"| {newest.id} | いまの話題: 卒論の章立て")
    )  # newest first
    assert "older: current_state(limit) lists more" in parts["state"]
    assert len(parts["state"].encode()) <= budget * ctx_mod.MARKER_SHARE
    assert len(parts["profile"].encode()) <= budget * PROFILE_SHARE
    assert len(parts["month"].encode()) <= budget * MONTH_SHARE
    assert parts["index"].count("\nmem_") >= 5 and "more not listed" in parts["index"]

    # the place kept for related experiences (issue 16): after the index, within its own share
    search = SearchStore(db)
    search.related_part = lambda conn, room: "# related experiences\n" + "似た経験。" * 2000
    with_related = search.load_context(budget_bytes=budget)
    assert len(with_related.encode()) <= budget
    tail = with_related[with_related.index("# related experiences") :]
    assert with_related.index("# memory index") < with_related.index("# related experiences")
    assert len(tail.encode()) <= budget * ctx_mod.RELATED_SHARE


def test_mark_and_marks_through_the_cli_and_the_mcp_tools_over_stdio(db, pmem_env) -> None:
    from tests.test_mcp import session_run, text_of

    env = dict(os.environ, **pmem_env, PMEM_EMBEDDER="none", PMEM_TZ="Asia/Tokyo")
    runner = CliRunner(env={"PMEM_TZ": "Asia/Tokyo", "PMEM_EMBEDDER": "none"})
    made = runner.invoke(
        app(),
        ["mark", "今日はゼミ発表の準備", "--session", "s1", "--at", "2020-11-30T09:00", "--json"],
    )
    assert made.exit_code == 0, made.output
    mark = json.loads(made.stdout.strip().splitlines()[-1])
    assert (
        mark["text"] == "今日はゼミ発表の準備"
        and mark["created"] is True
        and mark["at"] == "2020-11-30T09:00:00+09:00"
    )
    bad = runner.invoke(app(), ["mark", "   "])
    assert bad.exit_code == 1 and "a marker needs a text" in bad.stderr

    async def body(s: Any, init: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"tools": {t.name: t for t in (await s.list_tools()).tools}}
        out["added"] = text_of(await s.call_tool("add_marker", {"text": "卒論の章立てを考える"}))
        out["again"] = text_of(await s.call_tool("add_marker", {"text": "卒論の章立てを考える"}))
        out["secret"] = text_of(
            await s.call_tool("add_marker", {"text": f"鍵 {TOKEN} を更新", "session": "s2"})
        )
        out["state"] = text_of(await s.call_tool("current_state", {}))
        out["s1"] = text_of(await s.call_tool("current_state", {"session": "s1"}))
        out["context"] = text_of(await s.call_tool("load_context", {}))
        empty = await s.call_tool("add_marker", {"text": "  "})
        out["empty"] = (empty.is_error, text_of(empty))
        return out

    out = anyio.run(session_run, env, body)
    assert {"add_marker", "current_state"} <= set(out["tools"])
    assert out["tools"]["current_state"].annotations.read_only_hint is True
    assert out["tools"]["add_marker"].annotations.read_only_hint is False
    assert out["added"].startswith("marker mk_") and " recorded at " in out["added"]
    assert "not recorded again" in out["again"]
    assert "the secret guard redacted" in out["secret"] and TOKEN not in out["secret"]
    lines = out["state"].splitlines()
    assert (
        lines[0].startswith("# current state")
        and "[REDACTED:" in lines[1]
        and TOKEN not in out["state"]
    )
    assert "卒論の章立てを考える" in lines[2] and "今日はゼミ発表の準備 [session s1]" in lines[3]
    assert "卒論" not in out["s1"] and "今日はゼミ発表の準備" in out["s1"]
    assert (
        out["context"].startswith("# current state") and out["context"].index("# memory index") > 0
    )
    assert out["empty"][0] and "a marker needs a text" in out["empty"][1]

    listed = runner.invoke(app(), ["marks", "--json"])
    assert listed.exit_code == 0, listed.output
    items = json.loads(listed.stdout.strip().splitlines()[-1])["markers"]
    assert [m["client"] for m in items] == ["mcp", "mcp", "cli"] and items[-1]["id"] == mark["id"]
    since = runner.invoke(app(), ["marks", "--since", "2021-01", "--json"])
    assert [m["client"] for m in json.loads(since.stdout.strip().splitlines()[-1])["markers"]] == [
        "mcp",
        "mcp",
    ]


def test_markers_through_the_memory_api(db) -> None:
    """With PMEM_MEMORY_URL an MCP client's writes go through the memory API: a marker too, in
    the token's name, under the write scope, through the same guard."""
    from fastapi.testclient import TestClient

    from core.errors import ConfigError
    from memory_api.app import create_app
    from memory_api.client import HttpMemoryAPI
    from store.tokens import TokenStore

    api_app = create_app(db)
    tokens = TokenStore(db)
    reader = {"Authorization": f"Bearer {tokens.create('reader', ('memory.read',)).token}"}
    writer = {
        "Authorization": f"Bearer {tokens.create('writer', ('memory.read', 'memory.write')).token}"
    }
    http = TestClient(api_app, base_url="http://127.0.0.1")
    assert (
        http.post("/v1/markers", json={"text": "読み取り専用"}, headers=reader).status_code == 403
    )
    api = HttpMemoryAPI("http://127.0.0.1", client_name="writer", token="unused")
    api._http = TestClient(api_app, base_url="http://127.0.0.1", headers=writer)
    svc = MemoryService(db, embedder=None, tz="UTC", writer=api)
    added = svc.add_marker(f"鍵 {TOKEN} を更新", session="ops")
    assert added.created and added.marker.client == "writer" and added.marker.session == "ops"
    assert TOKEN not in added.marker.text and added.marker.redacted
    assert not svc.add_marker(f"鍵 {TOKEN} を更新", session="ops").created
    with pytest.raises(ConfigError, match="at most 500 characters"):
        svc.add_marker("長" * 501)
    listed = http.get("/v1/markers", headers=reader).json()["markers"]
    assert [m["id"] for m in listed] == [added.marker.id]
