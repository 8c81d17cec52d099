"""A fresh `pmem search` process, start to answer (issue 9 item 7: under a second, the embedder's
load included; ADR 0027): wall time and CPU time (user + system of the child, what
`/usr/bin/time -f '%e %U %S'` prints) over several runs, medians.

    .venv/bin/python bench/startup_bench.py                       # the eval data dir (make eval)
    .venv/bin/python bench/startup_bench.py --data-dir ~/.pmem --runs 9 "a question"
    .venv/bin/python bench/startup_bench.py --checkout ../old     # that checkout's code, alternated
    .venv/bin/python bench/startup_bench.py --command recall --importtime 12   # + the slowest imports

On a shared machine the wall clock follows the load; the CPU time much less. ``--checkout``
runs another checkout's `cli.main` (same interpreter) alternately with this one: a before/after
on the same load.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
QUESTIONS = (
    "what did I end up deciding about the laptop?",
    "丹沢のとき結局どうするって決めたんだっけ",
)


def run(checkout: Path, args: list[str], env: dict[str, str]) -> tuple[float, float]:
    t = time.perf_counter()
    p = subprocess.Popen(
        [sys.executable, "-m", "cli.main", *args],
        cwd=checkout,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    _, status, usage = os.wait4(p.pid, 0)
    wall = time.perf_counter() - t
    if status != 0:
        err = p.stderr.read() if p.stderr else b""
        raise SystemExit(f"pmem {' '.join(args[:1])} failed: {err.decode(errors='replace')[-400:]}")
    return wall, usage.ru_utime + usage.ru_stime


def import_times(checkout: Path, args: list[str], env: dict[str, str], top: int) -> list[str]:
    """``python -X importtime`` of one fresh run: the ``top`` modules by cumulative import time
    (a package's own line counts what it imports), and the total."""
    p = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "cli.main", *args],
        cwd=checkout,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        check=False,
    )
    rows: list[tuple[int, int, str]] = []
    for line in p.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        own, cum, name = line[len("import time:") :].split("|", 2)
        rows.append((int(cum), int(own), name[1:].rstrip()))  # one space after the bar
    roots = [r for r in rows if not r[2].startswith(" ")]  # deeper imports are indented
    total = sum(r[0] for r in roots)
    out = [f"imports: {total / 1000:.0f} ms in all ({len(rows)} modules); slowest, cumulative:"]
    for cum, own, name in sorted(rows, reverse=True)[:top]:
        out.append(f"  {cum / 1000:7.1f} ms (own {own / 1000:5.1f})  {name.strip()}")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("questions", nargs="*", default=list(QUESTIONS))
    ap.add_argument("--data-dir", default=os.environ.get("PMEM_EVAL_DIR", str(ROOT / ".pmem-eval")))
    ap.add_argument("--runs", type=int, default=7)
    ap.add_argument(
        "--checkout", type=Path, help="another checkout to compare with, run alternately"
    )
    ap.add_argument("--command", default="search", help="search (default), recall or show")
    ap.add_argument(
        "--importtime",
        type=int,
        default=0,
        metavar="N",
        help="also one run under python -X importtime: the N slowest imports (cumulative)",
    )
    ap.add_argument("--database-url", help="the database to read (default: the data dir's)")
    a = ap.parse_args()
    env = dict(os.environ, PMEM_DATA_DIR=str(Path(a.data_dir).resolve()))
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # an installed pmem has its bytecode cached
    if a.database_url:
        env["PMEM_DATABASE_URL"] = a.database_url
    sides = {"this": ROOT} | ({"other": a.checkout.resolve()} if a.checkout else {})
    for q in a.questions:
        args = [a.command, q, "--json"]
        for side in sides.values():
            run(side, args, env)  # warm: bytecode written, files in the page cache
        got: dict[str, list[tuple[float, float]]] = {name: [] for name in sides}
        for i in range(a.runs):
            for name in sides if i % 2 == 0 else reversed(list(sides)):
                got[name].append(run(sides[name], args, env))
        for name, xs in got.items():
            wall, cpu = statistics.median(x[0] for x in xs), statistics.median(x[1] for x in xs)
            print(
                f"{name:5s} pmem {a.command} {q[:40]!r:44s} wall {wall:5.2f} s  CPU {cpu:5.2f} s "
                f"(min {min(x[1] for x in xs):.2f})  n={len(xs)}",
                flush=True,
            )
        if a.importtime:
            for line in import_times(ROOT, args, env, a.importtime):
                print(line, flush=True)
    print(f"load average {os.getloadavg()[0]:.1f}; goal: a fresh search or recall under 0.5 s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
