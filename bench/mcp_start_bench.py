"""`pmem serve` over stdio, process start to the answer of ``initialize`` and of the first
``tools/list`` (issue 30 item 1: initialize within 0.5 s on a quiet machine), with the stdio
front door (ADR 0043) and, alternated run by run as the baseline, without it
(``PMEM_STDIO_FRONT=0``: the SDK answers once it has loaded). Medians and the worst run.

    .venv/bin/python bench/mcp_start_bench.py --runs 9
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}


def one(env: dict[str, str]) -> tuple[float, float]:
    t = time.perf_counter()
    p = subprocess.Popen(
        [sys.executable, "-m", "cli.main", "serve", "--client", "bench"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert p.stdin is not None and p.stdout is not None
    p.stdin.write((json.dumps(INIT) + "\n").encode())
    p.stdin.flush()
    first = json.loads(p.stdout.readline())
    t_init = time.perf_counter() - t
    assert first.get("id") == 1, first
    p.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    p.stdin.write(b'{"jsonrpc":"2.0","id":2,"method":"tools/list"}\n')
    p.stdin.flush()
    tools = json.loads(p.stdout.readline())
    t_tools = time.perf_counter() - t
    assert tools.get("id") == 2 and tools["result"]["tools"], tools
    p.stdin.close()
    p.wait(timeout=30)
    return t_init, t_tools


def main() -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("--runs", type=int, default=7)
    a = ap.parse_args()
    data = tempfile.mkdtemp(prefix="pmem-mcp-start-")
    base = dict(os.environ, PMEM_DATA_DIR=data)
    runs: dict[str, list[tuple[float, float]]] = {"front": [], "no front": []}
    one(base)  # warm the file cache
    for _ in range(a.runs):
        runs["front"].append(one(base))
        runs["no front"].append(one(dict(base, PMEM_STDIO_FRONT="0")))
    load = os.getloadavg()[0]
    print(f"pmem serve (stdio), {a.runs} runs each, alternated; load average {load:.2f}")
    print(f"{'':10} {'initialize median':>18} {'worst':>7} {'tools/list median':>18} {'worst':>7}")
    for name, rs in runs.items():
        init = [r[0] for r in rs]
        tools = [r[1] for r in rs]
        print(
            f"{name:10} {statistics.median(init):17.3f}s {max(init):6.3f}s "
            f"{statistics.median(tools):17.3f}s {max(tools):6.3f}s"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
