"""The incremental re-index against a full pass (issue 17, item 3; seed 004's "40 s → 1.24 s").

    .venv/bin/python bench/watch_bench.py [--days 365] [--lines 120] [--append 20] [--keep] [--json]

1. Writes a folder of ``--days`` daily logs (``2025-01-01.jsonl`` …) in seed 004's seven fields
   (``ts``, ``actor``, ``role``, ``type``, ``text``, ``model``, ``session``), ``--lines`` turns a
   day in a few sessions, Japanese and English text, some ``action`` / ``meta`` lines.
2. In a fresh database (the embedded PostgreSQL in a temporary folder, or ``DATABASE_URL``) and
   data dir, one process, the clock around each pass (``flows/watch.py::run_pass``, which
   `pmem watch` and `pmem reindex --changed` run; vectors off unless ``--embedder``):
   - the first pass (every file new),
   - ``--append`` turns appended to one day's file, then a **full pass** (``--full``: every file
     read whole and checked against the ledger, what a re-index without state does),
   - as many turns appended to the same file again, then the **incremental pass** (only that
     file hashed, and read from where the last pass stopped),
   - a pass with nothing changed.
   Both measured passes import the same number of new messages. Prints them side by side: files
   read, bytes read, new messages, scan / import / index seconds, total; ``--json`` adds one
   JSON object as the last line.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench._pg import scratch  # noqa: E402

JA = [
    "今日はゼミ発表の準備をしました。",
    "結論として、発表は金曜日にすることに決めました。",
    "引っ越しの見積もりを三社から取りました。",
    "先週の火曜日の夜に、予算を見直しました。",
    "バックアップの頻度はまだ決まっていません。",
    "子どもの学校の送り迎えをどうするか相談したい。",
]
EN = [
    "We compared three options for the storage layer.",
    "The decision was to keep the raw logs byte-exact.",
    "Can you explain why the test fails on CI only?",
    "Here is a summary of the trade-offs.",
    "I prefer the simpler design because it is easier to operate.",
]


def turn(rng: random.Random, when: datetime, session: str, i: int) -> dict[str, Any]:
    kind = rng.choices(["text", "action", "meta"], [0.9, 0.07, 0.03])[0]
    role = "user" if i % 2 == 0 else "assistant"
    text = " ".join(rng.choice(JA if rng.random() < 0.6 else EN) for _ in range(rng.randint(1, 6)))
    rec: dict[str, Any] = {
        "ts": when.isoformat().replace("+00:00", "Z"),
        "actor": "me" if role == "user" else "claude",
        "role": role,
        "type": kind,
        "text": text,
        "session": session,
    }
    if role == "assistant":
        rec["model"] = "claude-x"
    return rec


def day_lines(rng: random.Random, day: datetime, n: int, start: int = 0) -> bytes:
    out = []
    for i in range(start, start + n):
        session = f"s{day:%m%d}-{i // 40}"
        out.append(
            json.dumps(turn(rng, day + timedelta(seconds=60 * i), session, i), ensure_ascii=False)
        )
    return ("\n".join(out) + "\n").encode()


def write_folder(folder: Path, days: int, lines: int, seed: int = 4) -> list[Path]:
    rng = random.Random(seed)
    folder.mkdir(parents=True, exist_ok=True)
    first = datetime(2025, 1, 1, 8, tzinfo=UTC)
    paths = []
    for d in range(days):
        day = first + timedelta(days=d)
        path = folder / f"{day:%Y-%m-%d}.jsonl"
        path.write_bytes(day_lines(rng, day, lines))
        paths.append(path)
    return paths


def one_pass(folder: Path, *, full: bool = False) -> dict[str, Any]:
    from core.settings import get_settings
    from flows.watch import PassOptions, run_pass

    t0 = (
        time.perf_counter()
    )  # as `pmem watch` runs it: normal forms too, vectors when an embedder is set
    s = run_pass(get_settings(), [str(folder)], PassOptions(embed=True, full=full, trigger="watch"))
    s["wall_seconds"] = round(time.perf_counter() - t0, 3)
    return s


ROWS = [
    ("files checked", "files_checked"),
    ("files hashed", "files_hashed"),
    ("files imported", "files_imported"),
    ("bytes read", "bytes_read"),
    ("new messages", "messages_new"),
    ("indexed messages", "indexed_messages"),
    ("scan s", "scan_seconds"),
    ("import s", "import_seconds"),
    ("index s", "index_seconds"),
    ("total s", "wall_seconds"),
]


def main() -> None:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--days", type=int, default=365)
    ap.add_argument("--lines", type=int, default=120, help="turns per daily file")
    ap.add_argument(
        "--append",
        type=int,
        default=20,
        help="turns appended to one file before each measured pass",
    )
    ap.add_argument(
        "--embedder",
        default="none",
        help="PMEM_EMBEDDER for the passes (default none: lexical index only)",
    )
    ap.add_argument("--keep", type=Path, default=None, help="keep the scratch folder here")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()

    with scratch("pmem-watch-bench-", args.keep) as sc:
        os.environ["DATABASE_URL"] = sc.database("pmem_watch_bench")
        os.environ["PMEM_DATA_DIR"] = str(sc.base / "data")
        os.environ["PMEM_EMBEDDER"] = args.embedder
        os.environ.setdefault("PMEM_UPGRADE_BACKUP", "off")
        folder = sc.base / "logs"
        t0 = time.perf_counter()
        paths = write_folder(folder, args.days, args.lines)
        size = sum(p.stat().st_size for p in paths)
        print(
            f"{len(paths)} daily files, {args.lines} turns each, {size / 1e6:.1f} MB "
            f"(written in {time.perf_counter() - t0:.1f}s)",
            file=sys.stderr,
        )

        first = one_pass(folder)
        target = paths[len(paths) // 2]
        rng = random.Random(17)
        day = datetime.fromisoformat(target.stem).replace(hour=8, tzinfo=UTC)
        with target.open("ab") as fp:
            fp.write(day_lines(rng, day, args.append, start=args.lines))
        full = one_pass(folder, full=True)
        with target.open("ab") as fp:
            fp.write(day_lines(rng, day, args.append, start=args.lines + args.append))
        incremental = one_pass(folder)
        noop = one_pass(folder)

    table = {
        "first pass": first,
        "full pass": full,
        "incremental": incremental,
        "nothing changed": noop,
    }
    width = max(len(label) for label, _ in ROWS)
    print(f"\n{'':{width}}  " + "  ".join(f"{name:>16}" for name in table))
    for label, key in ROWS:
        print(f"{label:{width}}  " + "  ".join(f"{s[key]:>16}" for s in table.values()))
    ratio = (
        full["wall_seconds"] / incremental["wall_seconds"]
        if incremental["wall_seconds"]
        else float("inf")
    )
    print(
        f"\none file of {len(paths)} changed: full pass {full['wall_seconds']:.2f}s, incremental pass "
        f"{incremental['wall_seconds']:.2f}s ({ratio:.0f}x); nothing changed {noop['wall_seconds']:.2f}s"
    )
    assert full["messages_new"] == incremental["messages_new"] == args.append, (
        "both passes import the new turns"
    )
    if args.json:
        keys = [k for _, k in ROWS]
        print(
            json.dumps(
                {
                    "days": args.days,
                    "lines": args.lines,
                    "append": args.append,
                    "bytes": size,
                    "embedder": args.embedder,
                    "ratio": round(ratio, 1),
                    **{
                        name.replace(" ", "_"): {k: s[k] for k in keys} for name, s in table.items()
                    },
                }
            )
        )


if __name__ == "__main__":
    main()
