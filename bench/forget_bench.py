"""`pmem forget` benchmark: what an erasure costs, and what erasures cost every later import.

    .venv/bin/python bench/forget_bench.py [--mb 10] [--memories 1000] [--keep DIR]

In a temporary data dir with its own embedded PostgreSQL: a synthetic ChatGPT export (the
generator of bench/import_bench.py) with one secret planted in 1 % of the conversations is
imported, indexed for recall and given memories (committed through the store with verbatim
evidence, one per sampled conversation, the secret in the planted ones). Then, timed:

  import / re-import           the ledger import before any erasure (the fast path)
  forget --secret              derived stores only, then VACUUM FULL + CHECKPOINT
  re-import after forget       erased_content is not empty: every conversation is checked
  forget --secret --from-ledger
  re-import after --from-ledger
  HMAC scan                    ErasedIndex.redact_text over every message text (chars/s)
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))
sys.path.insert(0, str(PROJECT / "bench"))

SECRET = "Blue-Otter-Kanazawa-7731"  # a private code name the guard does not know


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=10)
    ap.add_argument("--memories", type=int, default=1000)
    ap.add_argument("--keep", type=Path)
    args = ap.parse_args()
    work = args.keep or Path(tempfile.mkdtemp(prefix="pmem-forget-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    os.environ["PMEM_DATA_DIR"] = str(work / "data")
    os.environ.pop("DATABASE_URL", None)
    from import_bench import write_export

    from core.settings import Settings
    from store import embedded

    export = work / "conversations.json"
    write_export(export, int(args.mb * (1 << 20)))
    convs = json.loads(export.read_text())
    rng = random.Random(7)
    planted = 0
    for conv in convs:
        if rng.random() < 0.01:
            for node in conv["mapping"].values():
                msg = node.get("message")
                if msg and msg["author"]["role"] == "user" and msg["content"].get("parts"):
                    msg["content"]["parts"][0] += f" コードネームは {SECRET} に決めました。"
                    planted += 1
                    break
    export.write_text(json.dumps(convs))
    settings = Settings()
    try:
        rows = run(settings, export, args.memories)
    finally:
        embedded.stop(settings.pgdata_dir)
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    print(
        f"export {args.mb:g} MB, {len(convs)} conversations, secret planted in {planted} messages"
    )
    for name, seconds, note in rows:
        print(f"{name:34} {seconds:8.2f} s  {note}")
    return 0


def run(settings, export: Path, n_memories: int) -> list[tuple[str, float, str]]:
    from core.errors import EvidenceRefused
    from core.models import CommitRequest, EvidenceIn
    from flows.pipeline import Pipeline, import_export
    from search.reader import SearchStore
    from store.erased import ErasedIndex, load_key
    from store.forget import Forgetter

    rows: list[tuple[str, float, str]] = []

    def timed(name: str, fn, note=lambda r: ""):  # noqa: ANN001, ANN202
        t0 = time.perf_counter()
        result = fn()
        rows.append((name, time.perf_counter() - t0, note(result)))
        return result

    p = Pipeline.open(settings)
    try:
        stats = timed(
            "import",
            lambda: import_export(p, "chatgpt", str(export)),
            lambda s: f"{s['messages_new']} messages",
        )
        timed(
            "re-import (no erasures)",
            lambda: import_export(p, "chatgpt", str(export)),
            lambda s: f"{s['conversations_unchanged']} unchanged",
        )
        SearchStore(p.db).sync_messages()
        with p.db.connection() as conn:
            msgs = conn.execute(
                """SELECT message_key, convert_from(body, 'UTF8') FROM source_messages
                   WHERE channel = 'person' AND length(body) > 40 ORDER BY message_key"""
            ).fetchall()
        rng = random.Random(3)
        chosen = [m for m in msgs if SECRET in m[1]]
        chosen += rng.sample(msgs, min(len(msgs), max(0, n_memories - len(chosen))))

        def commit_all() -> int:
            done = 0
            for i, (key, text) in enumerate(chosen):
                excerpt = text[:60]
                title = f"memory {i}" + (f" {SECRET}" if SECRET in text else "")
                try:
                    p.store.commit(
                        CommitRequest(
                            kind="decision",
                            title=title,
                            canonical_summary=text[:400],
                            index_summary=text[:120],
                            evidence=[EvidenceIn(source_key=key, text=excerpt)],
                            idempotency_key=f"bench-{i}",
                        )
                    )
                    done += 1
                except EvidenceRefused:
                    pass
            return done

        timed("commit memories", commit_all, lambda n: f"{n} memories")
        key = load_key(settings.data_dir, create=True)
        fg = Forgetter(p.db, key or b"")

        def forget(from_ledger: bool):  # noqa: ANN202
            er = fg.forget_secret(SECRET, from_ledger=from_ledger)
            vac = fg.vacuum(er.tables)
            return er, vac

        er, vac = timed(
            "forget --secret (derived)",
            lambda: forget(False),
            lambda r: (
                f"{len(r[0].memories_redacted)} memories, {sum(r[0].counts.values())} rows; "
                f"VACUUM FULL {len(r[1]['tables'])} tables"
            ),
        )
        timed(
            "re-import after forget",
            lambda: import_export(p, "chatgpt", str(export)),
            lambda s: f"{s['conversations_unchanged']} unchanged",
        )
        timed(
            "forget --secret --from-ledger",
            lambda: forget(True),
            lambda r: (
                f"{r[0].counts.get('ledger_messages', 0)} ledger messages; "
                f"VACUUM FULL {len(r[1]['tables'])} tables"
            ),
        )
        timed(
            "re-import after --from-ledger",
            lambda: import_export(p, "chatgpt", str(export)),
            lambda s: f"{s['conversations_unchanged']} unchanged, {s['messages_new']} new messages",
        )
        remaining = fg.scan(SECRET)
        rows.append(("remaining copies (SQL scan)", 0.0, str(sum(remaining.values()))))
        with p.db.connection() as conn:
            idx = ErasedIndex.load(conn, key)
        assert idx is not None
        texts = [t for _, t in msgs]
        chars = sum(len(t) for t in texts)
        timed(
            "HMAC scan of every person message",
            lambda: [idx.redact_text(t) for t in texts],
            lambda _: f"{chars} chars",
        )
        t = rows[-1][1]
        rows[-1] = (rows[-1][0], t, rows[-1][2] + f" ({chars / t / 1e6:.2f} M chars/s)")
        del stats
    finally:
        p.close()
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
