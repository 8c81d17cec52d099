"""What the concept graph of ../shared/eval/ holds (issue 27, item 3): the concept memory made
again from empty tables on the eval data dir (``bench/eval.py`` builds it), then counts of
concepts (all, under 2 Japanese / 3 Latin characters), links, their weight distribution, the
links that recur (more than one experience), and `pmem related`'s top hits for a few everyday
utterances, each hit with its title so that one can judge whether it belongs.

    .venv/bin/python bench/concepts_graph.py            # text
    .venv/bin/python bench/concepts_graph.py --json     # one JSON object
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

UTTERANCES = [
    "最近、気分転換できていない",
    "また山に登りたいな",
    "新しい職場の英語がしんどい",
    "父の体調が気になる",
    "I want to go hiking again",
]
NOW = "2025-07-01T12:00:00+09:00"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--data-dir", type=Path, default=ROOT / ".pmem-eval")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-embed", action="store_true", help="no local embedder (faster)")
    a = ap.parse_args(argv)

    import eval as ev  # bench/eval.py

    from core.concepts import language_of
    from flows.concepts import extract_concepts
    from mcp_server.service import MemoryService
    from store.concepts import ConceptStore
    from store.db import Database

    def log(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    settings = ev._settings(a.data_dir, os.environ.get("DATABASE_URL"))
    url = ev.ensure_built(settings, ev.EVAL_DIR, rebuild=False, log=log, embed=False)
    db = Database(url)
    emb = None
    if not a.no_embed:
        from providers.embeddings import embedder_from_env

        emb = embedder_from_env()
    cs = ConceptStore(db)
    extract_concepts(db, a.data_dir / "runs", embedder=emb, rebuild=True)
    counts = cs.counts()
    concepts = cs.concepts()
    links = cs.links()
    short = [c.name for c in concepts if len(c.name) < (2 if language_of(c.name) == "ja" else 3)]
    weights = Counter(round(link.weight, 3) for link in links)
    recurring = [link for link in links if len(link.experiences) > 1]
    names = {c.id: c.name for c in concepts}
    svc = MemoryService(db, embedder=emb, tz="Asia/Tokyo")
    now = svc.now(NOW)
    related = {}
    for u in UTTERANCES:
        r = svc.related(u, now=now)
        related[u] = {
            "attention": list(r.attention),
            "hits": [
                {"memory_id": h.memory_id, "path": list(h.path), "why": h.why, "title": h.title}
                for h in r.hits[:5]
            ],
        }
    body = {
        "counts": counts,
        "concepts_short": len(short),
        "links": len(links),
        "links_recurring": len(recurring),
        "links_above_half": sum(1 for link in links if link.weight > 0.5),
        "weights": {str(w): n for w, n in sorted(weights.items())},
        "relations": dict(Counter(link.relation for link in links)),
        "heaviest": [
            f"{names.get(link.source_id)} -{link.relation}-> {names.get(link.target_id)} "
            f"{link.weight:.3f} ({len(link.experiences)})"
            for link in links[:15]
        ],
        "related": related,
    }
    db.close()
    if a.json:
        print(json.dumps(body, ensure_ascii=False))
        return 0
    print(f"store: {counts}")
    print(f"concepts under 2 (ja) / 3 (Latin) characters: {len(short)} {short[:20]}")
    print(
        f"links: {len(links)}, recurring (2+ experiences): {len(recurring)}, "
        f"weight > 0.5: {body['links_above_half']}"
    )
    print(f"weights: {body['weights']}")
    print(f"relations: {body['relations']}")
    for line in body["heaviest"]:
        print(f"  {line}")
    for u, r in related.items():
        print(f"related {u!r}: attention {', '.join(r['attention'])}")
        for i, h in enumerate(r["hits"], 1):
            print(f"    {i}. {' → '.join(h['path'])} [{h['why']}] {h['title']}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
