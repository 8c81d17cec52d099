"""Import throughput against `json.load` (issue 12 item 6, issue 31 item 4).

    .venv/bin/python bench/import_bench.py [--mb 500] [--keep] [--no-embed] [--export PATH]
    .venv/bin/python bench/import_bench.py --single-message --mb 50     # one big message

1. Generates a synthetic ChatGPT export of the given size (default 500 MB): one ASCII-escaped JSON
   array like the real `conversations.json`, realistic trees (a hidden system node, regenerated
   answers and edited prompts as branches off the active path, tool calls with their output,
   code blocks), Japanese and English text of varied length. With ``--single-message``: one
   conversation whose one message is the given size (within 3x ``json.load``).
2. Then, in the same run and each in its own process (so each peak RSS is its own):
   - `json.load` of the file (the baseline),
   - the default `pmem import` of it (vectors too; `--no-embed` leaves them out) into a fresh
     database (its own data dir and embedded PostgreSQL, started before the clock starts), the
     whole process timed; from its `--json`: the ledger stage alone (`stages.ledger`), the
     index stage and the time to answerable (`time_to_answerable_s`),
   - the re-import of the same, unchanged file (reads and writes nothing).
3. Prints seconds, MB/s, peak RSS and the ratio of each to `json.load`'s, then the goals of issue
   31: the ledger stage >= 0.5x json.load's MB/s, time to answerable <= 2.5x the ledger stage,
   peak RSS <= 300 MB, the unchanged re-import >= 2x json.load. `--json` adds one JSON object as
   the last line. Beside the wall clock: CPU seconds of each process (with the import's worker
   processes) and of the database server meanwhile, and the CPU ratio (json.load's CPU over the
   import's and the server's): on a shared, loaded machine the wall clock mostly measures the
   others' load.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(PROJECT))

from bench._pg import remove_data_dir  # noqa: E402

MB = 1_000_000

JA = [
    "今日は新しいデータベースの設計について考えました。",
    "結論として、PostgreSQL を使うことに決めました。",
    "理由は、全文検索とベクトル検索を一つの場所で扱えるからです。",
    "先週の火曜日の夜に、移行の手順を見直しました。",
    "まだ決まっていないのは、バックアップの頻度です。",
    "引っ越しの見積もりを三社から取りました。",
    "子どもの学校の送り迎えをどうするか相談したい。",
    "この文章を自然な日本語に直してください。",
    "予算は月に五万円までに抑えたいと思っています。",
    "結局、前の方法の方が速かったです。",
]
EN = [
    "We compared three options for the storage layer.",
    "The decision was to keep the raw transcripts byte-exact.",
    "Streaming keeps memory flat whatever the export size.",
    "Can you explain why the test fails on CI only?",
    "I prefer the simpler design because it is easier to operate.",
    "Here is a summary of the trade-offs.",
    "The regenerated answer was shorter but less precise.",
    "Let me know if you want a step-by-step plan.",
    "In hindsight the cache was not worth the complexity.",
    "Please translate the following paragraph.",
]
CODE = "```python\ndef handler(event):\n    items = [x for x in event['items'] if x]\n    return {'count': len(items)}\n```"


class Generator:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)

    def text(self, sentences: int) -> str:
        rng = self.rng
        pool = JA if rng.random() < 0.45 else EN
        out = " ".join(rng.choice(pool) for _ in range(sentences))
        if rng.random() < 0.12:
            out += "\n\n" + CODE
        return out

    def length(self, role: str) -> int:
        if role == "user":
            return max(1, int(self.rng.lognormvariate(0.7, 0.9)))
        return max(2, int(self.rng.lognormvariate(2.3, 0.8)))  # answers: ~10 sentences, a long tail

    def uid(self) -> str:
        return str(uuid.UUID(int=self.rng.getrandbits(128), version=4))

    def node(
        self,
        node: str,
        parent: str | None,
        role: str,
        content: dict[str, Any],
        when: float | None,
        **message: Any,
    ) -> dict[str, Any]:
        return {
            "id": node,
            "parent": parent,
            "children": [],
            "message": {
                "id": node,
                "author": {"role": role, "name": message.pop("name", None), "metadata": {}},
                "create_time": when,
                "update_time": None,
                "content": content,
                "status": "finished_successfully",
                "end_turn": role == "assistant",
                "weight": 1.0,
                "metadata": {"model_slug": "gpt-4o", "finish_details": {"type": "stop"}}
                if role == "assistant"
                else {},
                "recipient": message.pop("recipient", "all"),
                "channel": None,
            },
        }

    def conversation(self, n: int) -> dict[str, Any]:
        rng = self.rng
        conv_id = self.uid()
        t0 = 1_650_000_000.0 + n * 1800 + rng.random()
        root, system = self.uid(), self.uid()
        mapping: dict[str, Any] = {
            root: {"id": root, "message": None, "parent": None, "children": [system]},
            system: self.node(
                system, root, "system", {"content_type": "text", "parts": [""]}, None
            ),
        }
        mapping[system]["message"]["metadata"] = {"is_visually_hidden_from_conversation": True}
        parent = system
        when = t0
        for _ in range(max(1, int(rng.lognormvariate(1.6, 0.8)))):
            user = self.uid()
            when += rng.uniform(5, 600)
            mapping[user] = self.node(
                user,
                parent,
                "user",
                {"content_type": "text", "parts": [self.text(self.length("user"))]},
                when,
            )
            mapping[parent]["children"].append(user)
            if rng.random() < 0.04:  # an edited prompt: a sibling user node, off the active path
                edit = self.uid()
                mapping[edit] = self.node(
                    edit,
                    parent,
                    "user",
                    {"content_type": "text", "parts": [self.text(2)]},
                    when - 1,
                )
                mapping[parent]["children"].insert(0, edit)
            last = user
            if rng.random() < 0.08:  # a tool call and its output
                call, out = self.uid(), self.uid()
                mapping[call] = self.node(
                    call,
                    user,
                    "assistant",
                    {"content_type": "code", "language": "python", "text": "print(sum(range(10)))"},
                    when + 1,
                    recipient="python",
                )
                mapping[out] = self.node(
                    out,
                    call,
                    "tool",
                    {"content_type": "execution_output", "text": "45"},
                    when + 2,
                    name="python",
                )
                mapping[user]["children"].append(call)
                mapping[call]["children"].append(out)
                last = out
            answer = self.uid()
            mapping[answer] = self.node(
                answer,
                last,
                "assistant",
                {"content_type": "text", "parts": [self.text(self.length("assistant"))]},
                when + 3,
            )
            mapping[last]["children"].append(answer)
            if rng.random() < 0.1:  # a regenerated answer, off the active path
                alt = self.uid()
                mapping[alt] = self.node(
                    alt,
                    last,
                    "assistant",
                    {"content_type": "text", "parts": [self.text(self.length("assistant"))]},
                    when + 4,
                )
                mapping[last]["children"].insert(0, alt)
            parent = answer
        return {
            "title": self.text(1)[:40],
            "create_time": t0,
            "update_time": when + 10,
            "mapping": mapping,
            "moderation_results": [],
            "current_node": parent,
            "plugin_ids": None,
            "conversation_id": conv_id,
            "conversation_template_id": None,
            "gizmo_id": None,
            "is_archived": False,
            "safe_urls": [],
            "default_model_slug": "gpt-4o",
            "id": conv_id,
        }


def write_export(path: Path, target: int, seed: int = 12) -> int:
    """One ASCII-escaped JSON array on a single line, like the real export; the conversation count."""
    gen = Generator(seed)
    count = 0
    with path.open("w", encoding="ascii") as fp:
        fp.write("[")
        while fp.tell() < target:
            if count:
                fp.write(", ")
            fp.write(json.dumps(gen.conversation(count)))
            count += 1
        fp.write("]")
    return count


def write_single_message(path: Path, target: int, seed: int = 12) -> int:
    """One conversation whose one person message is ``target`` bytes (Japanese and English
    sentences, escaped as the export escapes them) and a short answer: issue 12, item 2."""
    gen = Generator(seed)
    conv = gen.conversation(0)
    unit = json.dumps(" ".join(JA[:3] + EN[:3]) + "\n")[1:-1]  # the escaped form, as written
    text = json.loads('"' + unit * max(1, target // len(unit)) + '"')
    mapping = conv["mapping"]
    users = [
        k
        for k, v in mapping.items()
        if v.get("message") and v["message"]["author"]["role"] == "user"
    ]
    mapping[users[0]]["message"]["content"]["parts"] = [text]
    with path.open("w", encoding="ascii") as fp:
        json.dump([conv], fp)
    return 1


# ---------------------------------------------------------------- measuring


def server_cpu(env: dict[str, str]) -> float:
    """CPU seconds the data dir's PostgreSQL server has used (the postmaster with its exited
    backends), or 0.0 when there is no server (the json.load run)."""
    pid_file = Path(env.get("PMEM_DATA_DIR", "/nonexistent")) / "pgdata" / "postmaster.pid"
    try:
        pid = int(pid_file.read_text().split()[0])
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, ValueError, IndexError):
        return 0.0
    ticks = os.sysconf("SC_CLK_TCK")
    return sum(int(f) for f in fields[11:15]) / ticks  # utime, stime, cutime, cstime


def run_measured(cmd: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run ``cmd``; wall seconds of the whole process, its peak RSS (wait4: the largest of the
    process and its worker processes), and CPU seconds: the process with its workers, and the
    database server's for the same time (a figure the machine's load does not change much)."""
    server_before = server_cpu(env)
    started = time.perf_counter()
    proc = subprocess.Popen(
        cmd, env=env, cwd=PROJECT, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    assert proc.stdout is not None and proc.stderr is not None
    out, err = proc.stdout.read(), proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - started
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode not in (0, 3):
        raise SystemExit(
            f"{cmd[2:4]} failed ({proc.returncode}): {err.decode(errors='replace')[-2000:]}"
        )
    last = out.decode().strip().splitlines()[-1] if out.strip() else "{}"
    time.sleep(0.5)  # the backends exit once the client has gone: their CPU goes to the postmaster
    cpu = usage.ru_utime + usage.ru_stime
    return {
        "seconds": seconds,
        "rss_mb": usage.ru_maxrss / 1024,
        "output": json.loads(last),
        "cpu": cpu,
        "server_cpu": server_cpu(env) - server_before,
    }


def fresh_env(root: Path, name: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("DATABASE_URL", None)
    # an installed pmem has its bytecode cached; a sandbox that sets this would time recompiling
    # the project's modules at every start (`db init` below runs first and caches it)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env.update(
        {
            "PMEM_DATA_DIR": str(root / name),
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
            "DO_NOT_TRACK": "1",
        }
    )
    subprocess.run(
        [sys.executable, "-m", "cli.main", "db", "init"],
        env=env,
        cwd=PROJECT,
        check=True,
        capture_output=True,
    )
    return env


def stop_db(env: dict[str, str]) -> None:
    subprocess.run(
        [sys.executable, "-m", "cli.main", "db", "stop"], env=env, cwd=PROJECT, capture_output=True
    )


JSON_LOAD = "import json, sys\nwith open(sys.argv[1], 'rb') as f:\n    json.load(f)\nprint('{}')"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument(
        "--mb", type=float, default=500, help="export size in MB (10^6 bytes); default 500"
    )
    ap.add_argument("--export", type=Path, help="use this export instead of generating one")
    ap.add_argument(
        "--single-message",
        action="store_true",
        help="the export is one conversation whose one message is --mb MB (item 2; goal: 3x json.load)",
    )
    ap.add_argument("--keep", action="store_true", help="keep the generated export and data dirs")
    ap.add_argument(
        "--no-embed",
        action="store_true",
        help="time `pmem import --no-embed` instead of the default import (with vectors)",
    )
    ap.add_argument("--json", action="store_true", help="end with one JSON object")
    args = ap.parse_args(argv)

    root = Path(tempfile.mkdtemp(prefix="pmem-import-bench-"))
    try:
        if args.export:
            path, convs = args.export, None
        else:
            path = root / "conversations.json"
            started = time.perf_counter()
            convs = (write_single_message if args.single_message else write_export)(
                path, int(args.mb * MB)
            )
            print(
                f"generated {path.stat().st_size / MB:.1f} MB, {convs} conversations in "
                f"{time.perf_counter() - started:.0f}s",
                file=sys.stderr,
            )
        size = path.stat().st_size / MB
        rows: dict[str, dict[str, Any]] = {}
        rows["json.load"] = run_measured(
            [sys.executable, "-c", JSON_LOAD, str(path)], dict(os.environ)
        )
        env = fresh_env(root, "data")
        cmd = [sys.executable, "-m", "cli.main", "import", str(path), "--source", "chatgpt"]
        cmd += ["--json", *(["--no-embed"] if args.no_embed else [])]
        first_name = "pmem import" + (" --no-embed" if args.no_embed else " (default)")
        try:
            rows[first_name] = run_measured(cmd, env)
            rows["re-import (unchanged)"] = run_measured(cmd, env)
        finally:
            stop_db(env)
        base = size / rows["json.load"]["seconds"]
        print(f"\n{size:.1f} MB, {convs if convs is not None else '?'} conversations")
        print(
            f"{'':26} {'seconds':>8} {'MB/s':>7} {'peak RSS':>9} {'ratio':>6} {'CPU s':>7} {'+server':>8} {'CPU ratio':>9}"
        )
        summary: dict[str, Any] = {"mb": round(size, 1), "conversations": convs, "runs": {}}
        for name, r in rows.items():
            rate = size / r["seconds"]
            ratio = rate / base
            cpu_ratio = rows["json.load"]["cpu"] / max(r["cpu"] + r["server_cpu"], 1e-9)
            print(
                f"{name:26} {r['seconds']:8.1f} {rate:7.1f} {r['rss_mb']:7.0f}MB {ratio:6.2f} "
                f"{r['cpu']:7.1f} {r['server_cpu']:8.1f} {cpu_ratio:9.2f}"
            )
            out = r["output"]
            summary["runs"][name] = {
                "seconds": round(r["seconds"], 2),
                "mb_per_s": round(rate, 2),
                "peak_rss_mb": round(r["rss_mb"]),
                "ratio": round(ratio, 3),
                "cpu_seconds": round(r["cpu"], 2),
                "server_cpu_seconds": round(r["server_cpu"], 2),
                "cpu_ratio": round(cpu_ratio, 3),
                "conversations": out.get("conversations"),
                "messages": out.get("messages"),
                "stages": out.get("stages"),
                "time_to_answerable_s": out.get("time_to_answerable_s"),
                "unchanged_file": out.get("unchanged_file", False),
            }
        first = summary["runs"][first_name]
        again = summary["runs"]["re-import (unchanged)"]
        stages = first["stages"] or {}
        ledger_s = (stages.get("ledger") or {}).get("seconds") or float("nan")
        tta = first["time_to_answerable_s"] or float("nan")
        print(
            f"{'  ledger stage':26} {ledger_s:8.1f} {size / ledger_s:7.1f} {'':9} "
            f"{size / ledger_s / base:6.2f}"
        )
        print(f"{'  time to answerable':26} {tta:8.1f} {'':7} {'':9} {tta / ledger_s:5.2f}x ledger")
        print(
            f"{'  index stage':26} {(stages.get('index') or {}).get('seconds', float('nan')):8.1f}"
        )
        if args.single_message:
            goals = {"import within 3x json.load": first["ratio"] >= 1 / 3}
        else:
            goals = {
                "ledger stage >= 0.5x json.load MB/s": size / ledger_s / base >= 0.5,
                "time to answerable <= 2.5x the ledger stage": tta <= 2.5 * ledger_s,
                "peak RSS <= 300 MB": max(first["peak_rss_mb"], again["peak_rss_mb"]) <= 300,
                "unchanged re-import >= 2x json.load": again["ratio"] >= 2.0,
            }
        load = os.getloadavg()[0]
        print(f"\nload average {load:.1f} (a shared machine's wall clock follows its load)")
        for goal, met in goals.items():
            print(f"  {'met   ' if met else 'MISSED'} {goal}")
        print(
            f"re-import read nothing: {again['unchanged_file']}; wrote nothing: "
            f"{bool(again['conversations']) and again['conversations']['new'] == 0 and again['conversations']['changed'] == 0}"
        )
        summary["goals"] = goals
        summary["load"] = round(load, 2)
        if args.json:
            print(json.dumps(summary))
        return 0
    finally:
        if args.keep:
            print(f"kept {root}", file=sys.stderr)
        else:
            for data_dir in root.iterdir():  # each with its cluster (bench/_pg.py)
                if data_dir.is_dir():
                    remove_data_dir(data_dir)
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
