"""The memory API over HTTP on loopback: the real service (`pmem api`), the real client."""

from __future__ import annotations

import pytest

from core.errors import MemoryNotFound, RateLimited, StaleRevision, TombstonedMemory
from core.models import CommitRequest, EvidenceIn
from memory_api.client import HttpMemoryAPI


def seed_message(db, conversation_key: str, node: str, text: str) -> None:
    """One ledger message (the API keeps only evidence that is verbatim in the ledger)."""
    from core.models import Channel, Conversation, Message, Provenance
    from store.ledger import Ledger

    ledger = Ledger(db)
    imp = ledger.start_import("chatgpt", "seed.json")
    msg = Message(
        key=f"{conversation_key}:{node}",
        node_id=node,
        role="user",
        channel=Channel.PERSON,
        content_type="text",
        text=text,
        position=0,
    )
    ledger.upsert(
        Conversation(
            key=conversation_key,
            source="chatgpt",
            external_id=conversation_key.split(":")[1],
            messages=[msg],
            provenance=Provenance(file="seed.json", position=0),
        ),
        imp,
    )


def req(key: str, **kw) -> CommitRequest:
    base = dict(
        kind="decision",
        title="引っ越し先を決めた",
        canonical_summary="川沿いの街にした。",
        index_summary="引っ越し先",
        evidence=[EvidenceIn(source_key="chatgpt:c:n1", text="川沿いの街にする")],
        idempotency_key=key,
    )
    base.update(kw)
    return CommitRequest(**base)


def test_commit_get_search_and_errors_over_http(api_server, api_token, store, db):
    seed_message(db, "chatgpt:c", "n1", "次は川沿いの街にするつもり")
    api = HttpMemoryAPI(api_server(), client_name="t1", token=api_token("t1"))
    try:
        first = api.commit(req("k1"))
        assert first.created and api.commit(req("k1")).replayed
        assert api.get(first.memory_id).title == "引っ越し先を決めた"
        assert api.search("引っ越し")[0].id == first.memory_id
        assert api.related(["chatgpt:c"], [])[0].id == first.memory_id
        assert api.propose("run", "batch", "d1", {"x": 1}).startswith("prop:")
        seed_message(db, "chatgpt:d", "n1", "駅までは歩いて十分くらい")
        appended = api.commit(
            req(
                "k2",
                memory_id=first.memory_id,
                expected_revision=1,
                reason="append",
                canonical_summary="追記",
                evidence=[EvidenceIn(source_key="chatgpt:d:n1", text="駅までは歩いて十分")],
            )
        )
        # the append adds its evidence; its summary waits for the owner (issue 29, item 2)
        assert appended.revision == 2 and appended.evidence_added == 1
        assert api.get(first.memory_id).canonical_summary == "川沿いの街にした。"
        assert [q["action"] for q in store.proposals() if q["memory_id"]] == ["correction"]
        with pytest.raises(StaleRevision) as err:
            api.commit(
                req(
                    "k3",
                    memory_id=first.memory_id,
                    expected_revision=1,
                    reason="append",
                    canonical_summary="古い",
                )
            )
        assert err.value.current == 2
        with pytest.raises(MemoryNotFound):
            api.get("mem_nope")
        store.delete(first.memory_id, expected_revision=2)
        with pytest.raises(TombstonedMemory):
            api.commit(req("k4", memory_id=first.memory_id, expected_revision=2, reason="append"))
    finally:
        api.close()


def test_budget_gives_429_with_retry_after_per_client(api_server, api_token):
    url = api_server(budget="3/600s")
    a = HttpMemoryAPI(url, client_name="a", token=api_token("a"))
    b = HttpMemoryAPI(url, client_name="b", token=api_token("b"))
    try:
        for _ in range(3):
            a.search("x")
        with pytest.raises(RateLimited) as err:
            a.search("x")
        assert 590 <= err.value.retry_after <= 600
        b.search("x")  # another client has its own budget
    finally:
        a.close()
        b.close()


def test_search_over_http_understands_the_query(api_server, api_token, db):
    """/v1/search reads as `pmem search` does: a time expression in the query filters on when
    the memory happened (a plain-string search would find both memories)."""
    from datetime import UTC, datetime

    seed_message(db, "chatgpt:c", "n1", "次は川沿いの街にするつもり")
    seed_message(db, "chatgpt:d", "n1", "やっぱり山の近くの街にする")
    api = HttpMemoryAPI(api_server(), client_name="t1", token=api_token("t1"))
    try:
        may = api.commit(req("m1", occurred_at=datetime(2023, 5, 10, tzinfo=UTC)))
        oct_ = api.commit(
            req(
                "m2",
                title="引っ越し先を決め直した",
                evidence=[EvidenceIn(source_key="chatgpt:d:n1", text="山の近くの街にする")],
                occurred_at=datetime(2023, 10, 10, tzinfo=UTC),
            )
        )
        assert {h.id for h in api.search("引っ越し")} == {may.memory_id, oct_.memory_id}
        assert [h.id for h in api.search("2023年10月の引っ越し")] == [oct_.memory_id]
    finally:
        api.close()
