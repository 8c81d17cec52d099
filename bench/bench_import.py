"""Import benchmark: wall time and peak RSS of our importers vs a ``json.load`` baseline.

Generates synthetic exports (a ChatGPT ``conversations.json`` with realistic trees, branches and
Japanese + English text, serialised like the real export; one big Codex rollout; a Codex sessions
tree; one big Claude Code transcript), then reads each one twice, every run in its own subprocess
so that each peak RSS (``resource.getrusage(...).ru_maxrss``) is its own:

* ``importer``: ``importers.iter_source(source, path)``, every conversation built and dropped;
* ``json.load``: the whole file parsed at once (for JSONL, every line parsed into one list).

Usage::

    .venv/bin/python bench/bench_import.py                  # 200 MB ChatGPT, 100 MB JSONL
    .venv/bin/python bench/bench_import.py --chatgpt-mb 50 --jsonl-mb 20 --keep /tmp/bench

Nothing here touches the database: it measures the importers alone.
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PROJECT = Path(__file__).resolve().parents[1]
MB = 1 << 20

JA = [
    "今日は新しいデータベースの設計について考えました。",
    "結論として、PostgreSQL を使うことに決めました。",
    "理由は、全文検索とベクトル検索を一つの場所で扱えるからです。",
    "先週の火曜日の夜に、移行の手順を見直しました。",
    "まだ決まっていないのは、バックアップの頻度です。",
]
EN = [
    "We compared three options for the storage layer.",
    "The decision was to keep the raw transcripts byte-exact.",
    "Streaming keeps memory flat whatever the export size.",
    "Next step: measure the import on a realistic export.",
    "The regenerated answer was shorter but less precise.",
]


def _text(rng: random.Random, sentences: int) -> str:
    pool = JA if rng.random() < 0.5 else EN
    return " ".join(rng.choice(pool) for _ in range(sentences))


# ---------------------------------------------------------------- generators


def _chatgpt_conversation(rng: random.Random, n: int) -> dict[str, Any]:
    conv_id = f"bench-{n:08d}"
    t0 = 1_700_000_000.0 + n * 3600
    mapping: dict[str, Any] = {
        "root": {"id": "root", "message": None, "parent": None, "children": ["sys"]},
        "sys": {
            "id": "sys",
            "parent": "root",
            "children": [],
            "message": {
                "id": "sys",
                "author": {"role": "system", "name": None, "metadata": {}},
                "create_time": None,
                "content": {"content_type": "text", "parts": [""]},
                "metadata": {"is_visually_hidden_from_conversation": True},
                "weight": 0.0,
                "recipient": "all",
            },
        },
    }
    parent = "sys"
    turns = rng.randint(2, 30)
    for i in range(turns * 2):
        node = f"n{i}"
        role = "user" if i % 2 == 0 else "assistant"
        text = _text(rng, rng.randint(1, 4) if role == "user" else rng.randint(3, 20))
        mapping[node] = _chatgpt_node(node, parent, role, text, t0 + i * 30)
        mapping[parent]["children"].append(node)
        if role == "assistant" and rng.random() < 0.1:  # a regeneration, off the active path
            alt = f"{node}-alt"
            mapping[alt] = _chatgpt_node(alt, parent, role, _text(rng, 5), t0 + i * 30 + 5)
            mapping[parent]["children"].append(alt)
        parent = node
    return {
        "title": _text(rng, 1)[:40],
        "create_time": t0,
        "update_time": t0 + turns * 60,
        "mapping": mapping,
        "moderation_results": [],
        "current_node": parent,
        "plugin_ids": None,
        "conversation_id": conv_id,
        "id": conv_id,
    }


def _chatgpt_node(node: str, parent: str, role: str, text: str, when: float) -> dict[str, Any]:
    return {
        "id": node,
        "parent": parent,
        "children": [],
        "message": {
            "id": node,
            "author": {"role": role, "name": None, "metadata": {}},
            "create_time": when,
            "update_time": None,
            "content": {"content_type": "text", "parts": [text]},
            "status": "finished_successfully",
            "end_turn": role == "assistant",
            "weight": 1.0,
            "metadata": {"model_slug": "gpt-4o"} if role == "assistant" else {},
            "recipient": "all",
        },
    }


def write_chatgpt(path: Path, target: int, seed: int = 1) -> int:
    """A one-line, ASCII-escaped JSON array like the real export; returns the conversation count."""
    rng = random.Random(seed)
    count = 0
    with path.open("w", encoding="ascii") as fp:
        fp.write("[")
        while fp.tell() < target:
            if count:
                fp.write(", ")
            fp.write(json.dumps(_chatgpt_conversation(rng, count)))
            count += 1
        fp.write("]")
    return count


def _ts(second: int) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(1_770_000_000 + second)) + ".000Z"


def _codex_lines(rng: random.Random, session: str) -> Iterator[dict[str, Any]]:
    yield {
        "timestamp": _ts(0),
        "type": "session_meta",
        "payload": {
            "id": session,
            "timestamp": _ts(0),
            "cwd": "/w",
            "originator": "codex-tui",
            "cli_version": "0.130.0",
            "base_instructions": {"text": "x" * 4000},
        },
    }
    second = 0
    while True:
        second += 1
        prompt = _text(rng, rng.randint(1, 3))
        yield {
            "timestamp": _ts(second),
            "type": "turn_context",
            "payload": {"cwd": "/w", "model": "gpt-5"},
        }
        yield {
            "timestamp": _ts(second),
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": prompt}],
            },
        }
        yield {
            "timestamp": _ts(second),
            "type": "event_msg",
            "payload": {"type": "user_message", "message": prompt, "images": []},
        }
        for call in range(rng.randint(1, 5)):
            call_id = f"call_{second}_{call}"
            yield {
                "timestamp": _ts(second),
                "type": "response_item",
                "payload": {
                    "type": "function_call",
                    "name": "shell",
                    "arguments": json.dumps({"command": ["rg", "x"]}),
                    "call_id": call_id,
                },
            }
            output = "\n".join(_text(rng, 2) for _ in range(rng.randint(5, 60)))
            yield {
                "timestamp": _ts(second),
                "type": "response_item",
                "payload": {"type": "function_call_output", "call_id": call_id, "output": output},
            }
            yield {
                "timestamp": _ts(second),
                "type": "event_msg",
                "payload": {
                    "type": "token_count",
                    "info": {"total_token_usage": {"input_tokens": second}},
                },
            }
        answer = _text(rng, rng.randint(3, 15))
        yield {
            "timestamp": _ts(second),
            "type": "event_msg",
            "payload": {"type": "agent_message", "message": answer},
        }
        yield {
            "timestamp": _ts(second),
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": answer}],
                "phase": "final_answer",
            },
        }


def _claude_code_lines(rng: random.Random, session: str) -> Iterator[dict[str, Any]]:
    n = 0
    parent: str | None = None

    def line(kind: str, message: dict[str, Any]) -> dict[str, Any]:
        nonlocal n, parent
        n += 1
        uuid = f"{session[:8]}-0000-4000-8000-{n:012d}"
        record = {
            "parentUuid": parent,
            "isSidechain": False,
            "userType": "external",
            "cwd": "/w",
            "sessionId": session,
            "version": "2.1.30",
            "gitBranch": "main",
            "type": kind,
            "message": message,
            "uuid": uuid,
            "timestamp": _ts(n),
        }
        parent = uuid
        return record

    while True:
        yield line("user", {"role": "user", "content": _text(rng, rng.randint(1, 3))})
        msg_id = f"msg_{n:010d}"
        usage = {"input_tokens": 10, "output_tokens": 20}
        yield line(
            "assistant",
            {
                "id": msg_id,
                "role": "assistant",
                "model": "claude-x",
                "content": [
                    {"type": "thinking", "thinking": _text(rng, 4), "signature": "s" * 200}
                ],
                "usage": usage,
            },
        )
        yield line(
            "assistant",
            {
                "id": msg_id,
                "role": "assistant",
                "model": "claude-x",
                "content": [{"type": "text", "text": _text(rng, rng.randint(2, 10))}],
                "usage": usage,
            },
        )
        for call in range(rng.randint(1, 4)):
            tool_id = f"toolu_{n}_{call}"
            yield line(
                "assistant",
                {
                    "id": msg_id,
                    "role": "assistant",
                    "model": "claude-x",
                    "content": [
                        {
                            "type": "tool_use",
                            "id": tool_id,
                            "name": "Read",
                            "input": {"file_path": "/w/a.py"},
                        }
                    ],
                    "usage": usage,
                },
            )
            output = "\n".join(_text(rng, 2) for _ in range(rng.randint(5, 60)))
            yield line(
                "user",
                {
                    "role": "user",
                    "content": [{"type": "tool_result", "tool_use_id": tool_id, "content": output}],
                },
            )


def write_jsonl(path: Path, lines: Iterator[dict[str, Any]], target: int) -> int:
    count = 0
    with path.open("w", encoding="utf-8") as fp:
        for record in lines:
            fp.write(json.dumps(record, ensure_ascii=False) + "\n")
            count += 1
            if count % 100 == 0 and fp.tell() >= target:
                break
    return count


def write_codex_tree(root: Path, target: int, per_file: int, seed: int = 3) -> int:
    rng = random.Random(seed)
    written = files = 0
    while written < target:
        session = f"019c{files:04x}-0000-7000-8000-{files:012x}"
        folder = root / "sessions" / "2026" / "02" / f"{files % 28 + 1:02d}"
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"rollout-2026-02-01T10-00-00-{session}.jsonl"
        write_jsonl(path, _codex_lines(rng, session), per_file)
        written += path.stat().st_size
        files += 1
    return files


# ---------------------------------------------------------------- measuring


def _child(mode: str, source: str, path: Path) -> dict[str, Any]:
    started = time.perf_counter()
    conversations = messages = 0
    if mode == "importer":
        sys.path.insert(0, str(PROJECT))
        from core.models import Conversation
        from importers import iter_source

        for item in iter_source(source, path):
            if isinstance(item, Conversation):
                conversations += 1
                messages += len(item.messages)
    elif path.is_dir() or path.suffix == ".jsonl":
        files = sorted(path.rglob("*.jsonl")) if path.is_dir() else [path]
        loaded = []
        for f in files:
            with f.open("rb") as fp:
                loaded.append([json.loads(line) for line in fp if line.strip()])
        conversations = len(loaded)
        messages = sum(len(x) for x in loaded)
    else:
        with path.open("rb") as fp:
            data = json.load(fp)
        conversations = len(data)
    seconds = time.perf_counter() - started
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return {
        "seconds": seconds,
        "peak_rss_mb": peak_kb / 1024,
        "conversations": conversations,
        "records": messages,
    }


def _measure(mode: str, source: str, path: Path) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, __file__, "--child", mode, source, str(path)],
        check=True,
        capture_output=True,
        text=True,
        cwd=PROJECT,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())
    return path.stat().st_size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chatgpt-mb", type=float, default=200.0)
    parser.add_argument("--jsonl-mb", type=float, default=100.0)
    parser.add_argument(
        "--tree-file-mb", type=float, default=1.0, help="size of each rollout in the Codex tree"
    )
    parser.add_argument("--keep", type=Path, default=None, help="write the data here and keep it")
    parser.add_argument(
        "--child", nargs=3, metavar=("MODE", "SOURCE", "PATH"), help=argparse.SUPPRESS
    )
    args = parser.parse_args(argv)
    if args.child:
        mode, source, path = args.child
        print(json.dumps(_child(mode, source, Path(path))))
        return 0

    work = args.keep or Path(tempfile.mkdtemp(prefix="pmem-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        datasets = _generate(work, args)
        rows = []
        for label, source, path in datasets:
            size = _size(path)
            for mode in ("importer", "json.load"):
                result = _measure(mode, source, path)
                rows.append((label, size, mode, result))
        _print_table(rows)
    finally:
        if args.keep is None:
            shutil.rmtree(work, ignore_errors=True)
    return 0


def _generate(work: Path, args: argparse.Namespace) -> list[tuple[str, str, Path]]:
    started = time.perf_counter()
    chatgpt = work / "conversations.json"
    write_chatgpt(chatgpt, int(args.chatgpt_mb * MB))
    rollout = work / "rollout-2026-02-01T10-00-00-019c0000-0000-7000-8000-000000000001.jsonl"
    write_jsonl(
        rollout,
        _codex_lines(random.Random(2), "019c0000-0000-7000-8000-000000000001"),
        int(args.jsonl_mb * MB),
    )
    transcript = work / "5e551017-0000-4000-8000-000000000001.jsonl"
    write_jsonl(
        transcript,
        _claude_code_lines(random.Random(4), "5e551017-0000-4000-8000-000000000001"),
        int(args.jsonl_mb * MB),
    )
    tree = work / "codex-home"
    write_codex_tree(tree, int(args.jsonl_mb * MB), int(args.tree_file_mb * MB))
    print(
        f"generated {(_size(work)) / MB:.0f} MB of data in {time.perf_counter() - started:.0f} s",
        file=sys.stderr,
    )
    return [
        ("chatgpt conversations.json", "chatgpt", chatgpt),
        ("codex: one rollout", "codex", rollout),
        ("codex: sessions tree", "codex", tree),
        ("claude-code: one session", "claude-code", transcript),
    ]


def _print_table(rows: list[tuple[str, int, str, dict[str, Any]]]) -> None:
    header = f"{'dataset':<28} {'MB':>7} {'reader':<10} {'seconds':>8} {'MB/s':>7} {'peak RSS MB':>12} {'conversations':>13}"
    print(header)
    print("-" * len(header))
    for label, size, mode, r in rows:
        mb = size / MB
        print(
            f"{label:<28} {mb:>7.1f} {mode:<10} {r['seconds']:>8.2f} {mb / r['seconds']:>7.1f} "
            f"{r['peak_rss_mb']:>12.0f} {r['conversations']:>13}"
        )


if __name__ == "__main__":
    raise SystemExit(main())
