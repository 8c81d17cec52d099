"""Search inside a small time range also weighs the messages a memory's evidence quotes
(``search.hybrid._quoted_vector``): a memory summarised in one language is found by a
question in the other through the person's own messages, and a question about nothing there
still finds nothing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from core.models import Channel, CommitRequest, Conversation, EvidenceIn, Message, Provenance
from providers.embeddings.usem3_embedder import Usem3Embedder
from search.reader import SearchStore
from store.ledger import Ledger

WHEN = datetime(2024, 5, 14, 20, tzinfo=UTC)
MAY = {"since": datetime(2024, 5, 1, tzinfo=UTC), "until": datetime(2024, 6, 1, tzinfo=UTC)}
CONVERSATIONS = {
    # key: title, the person's messages (the memory's evidence), the memory's title and summary
    "walker": (
        "犬の散歩 代行",
        [
            "平日の昼に犬の散歩を頼めるところを探してる。ドッグウォーカーのサービスを2社比較した。",
            "近所の個人のドッグウォーカーさんにお願いすることにした。週3回、1回30分で1回2500円。",
        ],
        "個人か会社か",
        "個人に週3回、1回2500円。",
    ),
    "tax": (
        "確定申告 医療費",
        [
            "医療費控除の領収書をまとめた。合計12万円くらい。",
            "e-Taxで出すことにする。マイナンバーカードで。",
        ],
        "確定申告 医療費控除",
        "e-Taxで提出する。",
    ),
    "cook": (
        "作り置き",
        [
            "日曜に作り置きを再開したい。",
            "鶏ハムと煮卵と切り干し大根にする。",
        ],
        "作り置き 再開",
        "日曜に3品。",
    ),
}


@pytest.fixture(scope="module")
def usem3(tmp_path_factory: pytest.TempPathFactory) -> Usem3Embedder:
    emb = Usem3Embedder(cache_dir=tmp_path_factory.mktemp("usem3-cache"))
    emb.warm()
    return emb


@pytest.fixture
def quoted(db, store, usem3) -> tuple[SearchStore, dict[str, str]]:
    ledger = Ledger(db)
    ids = {}
    for n, (key, (title, texts, mem_title, summary)) in enumerate(CONVERSATIONS.items()):
        when = WHEN.replace(day=10 + n)
        msgs = [
            Message(
                key=f"chatgpt:{key}:m{i}",
                node_id=f"m{i}",
                role="user",
                channel=Channel.PERSON,
                content_type="text",
                text=text,
                created_at=when.replace(minute=i),
                position=i,
            )
            for i, text in enumerate(texts)
        ]
        ledger.upsert(
            Conversation(
                key=f"chatgpt:{key}",
                source="chatgpt",
                external_id=key,
                title=title,
                created_at=when,
                messages=msgs,
                provenance=Provenance(file="t", position=n),
            ),
            ledger.start_import("chatgpt", "t"),
        )
        ids[key] = store.commit(
            CommitRequest(
                kind="decision",
                title=mem_title,
                canonical_summary=summary,
                index_summary=summary,
                tags=["chatgpt"],
                occurred_at=when,
                idempotency_key=key,
                evidence=[EvidenceIn(source_key=m.key, text=m.text) for m in msgs],
            )
        ).memory_id
    search = SearchStore(db, usem3)
    search.sync_messages()
    stats = search.embed_pending(usem3)
    assert stats.memories == 3 and stats.messages == 6
    return search, ids


def test_a_small_range_finds_a_memory_through_the_messages_it_quotes(quoted):
    search, ids = quoted
    question = "What did I decide about the dog walker?"
    hits = search.search(question, **MAY)
    assert hits and hits[0].id == ids["walker"], [(h.title, h.vector_similarity) for h in hits]
    # the memory's own vector alone is below the floor: without the range (no quoted
    # messages) it is not found by its vector
    assert ids["walker"] not in [h.id for h in search.search(question) if "vector" in h.ranks]


def test_a_small_range_still_finds_nothing_for_a_question_about_nothing_there(quoted):
    search, _ = quoted
    assert search.search("What did I say about the volcano eruption in Iceland?", **MAY) == []
    assert search.search("量子コンピュータの誤り訂正符号", **MAY) == []
