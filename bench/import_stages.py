"""Where an import's CPU time goes, stage by stage, beside ``json.load`` of the same file (issue
12, item 1: why `pmem import --no-embed` stays far from half of ``json.load``'s speed).

    .venv/bin/python bench/import_stages.py EXPORT.json [--source chatgpt] [--limit N]

Each stage runs alone in this process, one after the other, on every conversation of the export
(``--limit``: the first N), and prints its CPU seconds and their ratio to ``json.load``'s:

- ``json.load``: the baseline (the whole file at once);
- ``scan + decode``: the importer's streaming array reader alone (``importers._jsonarray``);
- ``parse + build``: the importer (reader, active path, ``Conversation`` models);
- ``digest``: each text encoded and hashed once (``store.ledger.digest``);
- ``prefilter``: the pure-code rules (``stages.prefilter``);
- ``index tokens``: the message index's tokens of the person's and assistant's messages (the
  import's pass, without SudachiPy's normal forms: ``flows.importing._index_rows``).

The stages after ``json.load`` run with the collector's thresholds the import sets
(``flows.importing._fewer_collections``). The database's share (COPY, the GIN index on
``tokens``) is not here: `bench/import_bench.py`
reports the server's CPU beside the import's. The import overlaps these stages in threads and
worker processes, but on two cores their sum (with the server's) bounds what overlap can give.
"""

from __future__ import annotations

import argparse
import itertools
import json
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def cpu(fn):  # noqa: ANN001, ANN201 - a tiny timing helper
    started = time.process_time()
    out = fn()
    return time.process_time() - started, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "export", type=Path, help="an export file (a ChatGPT or Claude.ai conversations.json)"
    )
    ap.add_argument("--source", default="chatgpt", help="its importer (default chatgpt)")
    ap.add_argument(
        "--limit",
        type=int,
        help="only the first N conversations (json.load still reads the whole file)",
    )
    args = ap.parse_args(argv)

    from core.models import Conversation
    from flows.importing import _clean, _fewer_collections, _index_rows
    from importers import ReadReport, iter_source
    from importers._jsonarray import iter_array_items
    from stages.prefilter import prefilter
    from store.ledger_rows import INDEXED, digest

    rows: list[tuple[str, float]] = []
    with args.export.open("rb") as f:
        rows.append(("json.load", cpu(lambda: json.load(f))[0]))
    collector = _fewer_collections()
    collector.__enter__()
    with args.export.open("rb") as f:
        rows.append(
            (
                "scan + decode",
                cpu(
                    lambda: sum(
                        1
                        for _ in itertools.islice(iter_array_items(f, args.export.name), args.limit)
                    )
                )[0],
            )
        )
    seconds, convs = cpu(
        lambda: [
            c
            for c in itertools.islice(
                iter_source(args.source, args.export, ReadReport()), args.limit
            )
            if isinstance(c, Conversation)
        ]
    )
    rows.append(("parse + build", seconds))
    seconds, digests = cpu(lambda: [digest(c) for c in convs])
    rows.append(("digest", seconds))
    rows.append(
        (
            "prefilter",
            cpu(
                lambda: [
                    prefilter(c, {}, content_hash=d[0]) for c, d in zip(convs, digests, strict=True)
                ]
            )[0],
        )
    )
    texts = [_clean(m.text) for c in convs for m in c.messages if m.channel in INDEXED]
    rows.append(("index tokens", cpu(lambda: _index_rows(texts))[0]))
    collector.__exit__(None, None, None)
    base = rows[0][1]
    mb = args.export.stat().st_size / 1e6
    print(f"{mb:.1f} MB, {len(convs)} conversations, {len(texts)} indexed messages")
    print(f"{'stage':16} {'CPU s':>7} {'x json.load':>12}")
    for name, seconds in rows:
        print(f"{name:16} {seconds:7.2f} {seconds / base:12.2f}")
    rest = sum(s for name, s in rows[2:])
    print(f"{'client stages':16} {rest:7.2f} {rest / base:12.2f}   (parse + build .. index tokens)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
