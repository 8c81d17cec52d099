"""Where the ledger stage's wall clock goes (issue 31): CPU and run-queue wait per thread and
process over the ledger stage's window.

    .venv/bin/python bench/import_trace.py EXPORT.json [--source chatgpt] [--no-stream] [--json]

Runs `pmem import --no-embed --json` of EXPORT in this process, into a fresh data dir (its own
embedded PostgreSQL, started before the clock), with a thread that samples every 0.1 s, from
``/proc``: each thread of the import's process (the reader, the prepare thread, the commit
threads, the pool's threads), the import's worker processes, and the server's processes split by
their nice value (the ledger's connections run at 0, the index workers' at
``store.index_stream.WORKER_NICE``). For each: CPU seconds (``stat``), seconds spent runnable
but waiting for a CPU and the number of times it was put on one (``schedstat``), from the start of
``run_import`` until the ledger stage ends (``import:ledger-done``). A thread that waits for the
GIL or a socket sleeps and is not counted as waiting; run-queue wait is CPU contention (the
machine's other load, or the index stage beside the ledger). ``--no-stream`` leaves the index rows
of each committed batch queued instead of handing them to the workers (the index step after the
ledger writes them): the ledger stage alone, for the comparison.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from bench._pg import remove_data_dir  # noqa: E402

TICKS = os.sysconf("SC_CLK_TCK")


def _stat(path: str) -> tuple[float, int, int] | None:
    """CPU seconds (user + system), nice and parent of a process or thread."""
    try:
        fields = Path(path).read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / TICKS, int(fields[16]), int(fields[1])


def _schedstat(path: str) -> tuple[float, int]:
    """Seconds runnable but waiting for a CPU, and the number of times run."""
    try:
        _, wait, runs = Path(path).read_text().split()[:3]
    except (OSError, ValueError):
        return 0.0, 0
    return int(wait) / 1e9, int(runs)


class Sampler:
    """The import process's threads (by name; a thread's figures are kept once it has ended),
    its child processes, and the server's processes by nice value."""

    def __init__(self, data_dir: Path) -> None:
        self._pid_file = data_dir / "pgdata" / "postmaster.pid"
        self._threads: dict[int, tuple[str, float, float, int]] = {}
        self._lock = threading.Lock()

    def snapshot(self) -> dict[str, list[float]]:
        me = os.getpid()
        names = {t.native_id: t.name for t in threading.enumerate()}
        with self._lock:
            for tid in os.listdir(f"/proc/{me}/task"):
                got = _stat(f"/proc/{me}/task/{tid}/stat")
                if got is None:
                    continue
                wait, runs = _schedstat(f"/proc/{me}/task/{tid}/schedstat")
                old = self._threads.get(int(tid))
                name = names.get(int(tid)) or (old[0] if old else "other")
                self._threads[int(tid)] = (name, got[0], wait, runs)
            out: dict[str, list[float]] = {}
            for name, cpu, wait, runs in self._threads.values():
                key = "pool" if name.startswith(("ThreadPoolExecutor", "Thread-")) else name
                row = out.setdefault(f"thread {key}", [0.0, 0.0, 0])
                row[0] += cpu
                row[1] += wait
                row[2] += runs
        try:
            server = int(self._pid_file.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            server = -1
        for pid in (p for p in os.listdir("/proc") if p.isdigit()):
            got = _stat(f"/proc/{pid}/stat")
            if got is None or got[2] not in (me, server):
                continue
            kind = (
                "workers"
                if got[2] == me
                else f"server nice {got[1]}"
                if got[1]
                else "server nice 0 (the ledger's and the others')"
            )
            wait, runs = _schedstat(f"/proc/{pid}/schedstat")
            row = out.setdefault(kind, [0.0, 0.0, 0])
            row[0] += got[0]
            row[1] += wait
            row[2] += runs
        return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("export", type=Path)
    ap.add_argument("--source", default="chatgpt")
    ap.add_argument("--no-stream", action="store_true", help="the ledger stage without the index")
    ap.add_argument("--json", action="store_true", help="end with one JSON object")
    args = ap.parse_args(argv)

    root = Path(tempfile.mkdtemp(prefix="pmem-trace-"))
    env = {"PMEM_DATA_DIR": str(root / "data"), "PMEM_EMBEDDER": "none"}
    os.environ.update(env)
    os.environ.pop("DATABASE_URL", None)
    init = [sys.executable, "-m", "cli.main", "db", "init"]
    subprocess.run(init, cwd=PROJECT, check=True, capture_output=True, env=os.environ)
    sys.path.insert(0, str(PROJECT))
    import flows.importing as importing

    sampler = Sampler(root / "data")
    marks: dict[str, Any] = {}
    fault_point, run = importing.fault_point, importing._run_import

    def traced_fault(name: str) -> None:
        if name == "import:ledger-done" and "ledger_done" not in marks:
            marks["ledger_done"] = (time.monotonic(), sampler.snapshot())
        fault_point(name)

    def traced_run(*a: Any, **k: Any) -> Any:
        marks["start"] = (time.monotonic(), sampler.snapshot())
        return run(*a, **k)

    importing.fault_point, importing._run_import = traced_fault, traced_run  # type: ignore[assignment]
    if args.no_stream:  # each batch's index rows stay queued: the index step writes them after
        importing._Streamer.submit = lambda self, rows, undecided: None  # type: ignore[method-assign]
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.1):
            sampler.snapshot()

    threading.Thread(target=sample, name="trace-sampler", daemon=True).start()
    load = os.getloadavg()[0]
    cmd = ["import", str(args.export), "--source", args.source, "--no-embed", "--json"]
    from io import StringIO

    from typer.testing import CliRunner

    from cli.main import register

    result = CliRunner().invoke(register("import"), cmd)
    stop.set()
    subprocess.run(
        [sys.executable, "-m", "cli.main", "db", "stop"], cwd=PROJECT, capture_output=True
    )
    remove_data_dir(root / "data")  # with its cluster (bench/_pg.py)
    shutil.rmtree(root, ignore_errors=True)
    if result.exit_code not in (0, 3) or "ledger_done" not in marks:
        print(result.output[-2000:], file=sys.stderr)
        return 1
    summary = json.load(StringIO(result.stdout.strip().splitlines()[-1]))
    (t0, s0), (t1, s1) = marks["start"], marks["ledger_done"]
    rows = {
        k: [
            round(v[0] - s0.get(k, [0, 0, 0])[0], 2),
            round(v[1] - s0.get(k, [0, 0, 0])[1], 2),
            int(v[2] - s0.get(k, [0, 0, 0])[2]),
        ]
        for k, v in s1.items()
    }
    rows = {k: v for k, v in sorted(rows.items()) if v[0] >= 0.01 or v[1] >= 0.01}
    ledger = t1 - t0
    answerable = summary.get("time_to_answerable_s")
    print(
        f"load average {load:.1f}; ledger stage {ledger:.2f} s"
        f"{' (index not streamed)' if args.no_stream else ''}; time to answerable {answerable} s"
    )
    print(f"{'':48} {'CPU s':>6} {'wait s':>7} {'runs':>6} {'ms/run':>7}")
    for name, (cpu, wait, runs) in rows.items():
        print(f"{name:48} {cpu:6.2f} {wait:7.2f} {runs:6d} {1000 * wait / max(runs, 1):7.3f}")
    if args.json:
        print(
            json.dumps({"load": load, "ledger_s": ledger, "answerable_s": answerable, "rows": rows})
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
