"""What the store's write boundary costs per commit (issue 10, point 1).

Seeds ledger conversations of realistic size (person / assistant turns, a few planted secrets),
then commits one memory per conversation with two verbatim evidence excerpts, three ways: the
store as it was before (guard switched off), the secret guard only (``ledger_evidence=False``),
and the default (guard + ledger check). Reports milliseconds per commit (each commit is the
first on its conversation, so its secret scan is never cached).

    .venv/bin/python bench/write_boundary_bench.py [--conversations 200] [--turns 20]

Uses DATABASE_URL when set, else a throw-away embedded PostgreSQL.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._pg import scratch  # noqa: E402
from core.models import CommitRequest, EvidenceIn  # noqa: E402
from store.db import Database  # noqa: E402
from store.records import MemoryStore  # noqa: E402
from tests.security.trust_support import seed_conversation  # noqa: E402

PERSON = (
    "今日は家計簿アプリのデータベースを見直した。PostgreSQL にすることにした。理由は JSONB で明細を"
    "保存できることと、二人が同時に書き込んでもロックを気にしなくていいこと。"
)
ASSISTANT = (
    "良い選択です。移行は Alembic でスキーマを管理してから pg_dump と pg_restore で進めると安全です。"
    "バックアップは毎晩取り、月に一度は復元を試してください。"
) * 3


def seed(db: Database, n: int, turns: int, tag: str) -> list[list[str]]:
    out = []
    for i in range(n):
        texts = []
        for t in range(turns):
            if t % 2 == 0:
                extra = (
                    f" APIキーは sk-proj-{i:04d}Abc123XyZ987Def456Ghi789Jkl{t:03d} です。"
                    if t == 4
                    else ""
                )
                texts.append(("user", PERSON + extra))
            else:
                texts.append(("assistant", ASSISTANT))
        out.append(seed_conversation(db, f"chatgpt:bench-{tag}-{i}", texts, title=f"bench {i}"))
    return out


def run(store: MemoryStore, convs: list[list[str]], tag: str) -> list[float]:
    times = []
    for i, keys in enumerate(convs):
        req = CommitRequest(
            kind="decision",
            title=f"家計簿アプリのデータベース {i}",
            canonical_summary=PERSON,
            index_summary="家計簿アプリに PostgreSQL",
            aliases=["household budget db"],
            tags=["db"],
            evidence=[
                EvidenceIn(source_key=keys[0], text="PostgreSQL にすることにした"),
                EvidenceIn(source_key=keys[1], text="バックアップは毎晩取り"),
            ],
            idempotency_key=f"bench-{tag}-{i}",
        )
        start = time.perf_counter()
        store.commit(req)
        times.append((time.perf_counter() - start) * 1000)
    return times


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--conversations", type=int, default=200)
    ap.add_argument("--turns", type=int, default=20)
    args = ap.parse_args()
    with scratch("pmem-bench-") as pg:
        db = Database(pg.database("bench"))
        tag = str(os.getpid())
        print(
            f"{args.conversations} conversations x {args.turns} turns; one commit each, 2 evidence excerpts"
        )
        import store.revisions as records  # the guard and the evidence check live there

        for name, ledger, guard in (
            ("no guard (as before)", False, False),
            ("guard only", False, True),
            ("ledger check + guard", True, True),
        ):
            saved = (records.guard_record, records.contains_secret, records._overlaps_secret)
            if not guard:  # the store as it was before the write boundary
                records.guard_record = lambda r, known=(): (records._complete(r), [])  # type: ignore[assignment]
                records.contains_secret = lambda text: False  # type: ignore[assignment]
                records._overlaps_secret = lambda excerpt, source: False  # type: ignore[assignment]
            mode = f"{tag}-{int(ledger)}{int(guard)}"
            convs = seed(db, args.conversations, args.turns, mode)
            store = MemoryStore(db, ledger_evidence=ledger)
            if not guard:
                store._known_secrets = lambda conn, keys: set()  # type: ignore[method-assign]
            t = run(store, convs, mode)
            records.guard_record, records.contains_secret, records._overlaps_secret = saved
            print(
                f"{name:22} median {statistics.median(t):6.1f} ms  p95 {sorted(t)[int(len(t) * 0.95)]:6.1f} ms  "
                f"total {sum(t) / 1000:5.1f} s"
            )
        db.close()


if __name__ == "__main__":
    main()
