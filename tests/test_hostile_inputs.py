"""Hostile input: a generated corpus of malformed and adversarial exports across every format and
container, imported in this one process into the real PostgreSQL. The pass rule for every case:
no hang (a time limit per case), no crash or traceback (the import returns its summary; the CLI
exits 0, 3 or 1 with `error:` lines), the good records beside a bad one are kept, and nothing
imported before is changed. Plus: a 50 MB single message imports in time linear in its size, and
an invalid byte in the middle record of a 3-record array leaves the other two imported.

The files are written at test time under tmp_path; nothing here is committed as data."""

from __future__ import annotations

import json
import os
import signal
import time
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psycopg
import pytest
import zstandard
from psycopg import sql
from psycopg.conninfo import make_conninfo
from typer.testing import CliRunner

from tests.conftest import REAL

SUBSET = REAL / "chatgpt" / "my_chat_gpt-history_download-conversations.subset.json"
CASE_SECONDS = 60  # no single case may take longer (a hang fails the case, not the session)


# ---------------------------------------------------------------- builders


def gpt(cid: str, texts: tuple[str, ...] = ("hello there", "hi"), **over: Any) -> dict[str, Any]:
    """A ChatGPT conversation: root, then one node per text (user, assistant, user, …)."""
    mapping: dict[str, Any] = {
        "root": {"id": "root", "message": None, "parent": None, "children": []}
    }
    parent = "root"
    for i, text in enumerate(texts):
        node = f"n{i}"
        mapping[parent]["children"].append(node)
        mapping[node] = {
            "id": node,
            "parent": parent,
            "children": [],
            "message": {
                "id": node,
                "author": {"role": "user" if i % 2 == 0 else "assistant"},
                "create_time": 1700000000.5 + i,
                "content": {"content_type": "text", "parts": [text]},
            },
        }
        parent = node
    return {
        "id": cid,
        "title": f"title {cid}",
        "create_time": 1700000000.25,
        "mapping": mapping,
        "current_node": parent,
        **over,
    }


def claude(cid: str, text: str = "hello there", **over: Any) -> dict[str, Any]:
    def msg(uuid: str, sender: str, body: str) -> dict[str, Any]:
        return {
            "uuid": uuid,
            "text": body,
            "content": [{"type": "text", "text": body}],
            "sender": sender,
            "created_at": "2025-07-06T03:10:13.609691Z",
            "attachments": [],
            "files": [],
        }

    return {
        "uuid": cid,
        "name": f"name {cid}",
        "created_at": "2025-07-06T03:10:00Z",
        "updated_at": "2025-07-06T04:00:00Z",
        "chat_messages": [msg(f"{cid}-m1", "human", text), msg(f"{cid}-m2", "assistant", "answer")],
        **over,
    }


def enc(obj: Any) -> bytes:
    return json.dumps(obj).encode("ascii")


def array(*items: bytes) -> bytes:
    return b"[" + b", ".join(items) + b"]"


def sid(n: int) -> str:
    return f"019c0000-0000-7000-8000-{n:012d}"


def codex_lines(
    session: str, text: str = "hello there", ts: str = "2026-03-01T10:00:00.000Z"
) -> list[dict[str, Any]]:
    return [
        {
            "timestamp": ts,
            "type": "session_meta",
            "payload": {
                "id": session,
                "timestamp": ts,
                "cwd": "/w",
                "originator": "codex-tui",
                "cli_version": "0.130.0",
            },
        },
        {
            "timestamp": ts,
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "user",
                "content": [{"type": "input_text", "text": text}],
            },
        },
        {
            "timestamp": ts,
            "type": "response_item",
            "payload": {
                "type": "message",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "ok"}],
            },
        },
    ]


def cc_lines(
    session: str, text: str = "hello there", ts: str = "2026-02-01T10:00:00.000Z"
) -> list[dict[str, Any]]:
    base = {
        "isSidechain": False,
        "userType": "external",
        "cwd": "/w",
        "sessionId": session,
        "version": "2.1.30",
        "timestamp": ts,
    }
    return [
        {
            **base,
            "type": "user",
            "uuid": f"{session}-u",
            "parentUuid": None,
            "message": {"role": "user", "content": text},
        },
        {
            **base,
            "type": "assistant",
            "uuid": f"{session}-a",
            "parentUuid": f"{session}-u",
            "message": {
                "id": f"msg-{session}",
                "type": "message",
                "role": "assistant",
                "model": "claude-x",
                "content": [{"type": "text", "text": "ok"}],
            },
        },
    ]


def jsonl(lines: list[Any]) -> bytes:
    return b"".join((x if isinstance(x, bytes) else enc(x)) + b"\n" for x in lines)


def zip_of(members: dict[str, bytes]) -> Callable[[Path], Path]:
    def build(path: Path) -> Path:
        if path.is_dir():
            path = path / "export.zip"
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            for name, data in members.items():
                z.writestr(name, data)
        return path

    return build


# ---------------------------------------------------------------- the corpus


@dataclass
class Case:
    name: str
    source: str
    build: Callable[[Path], Path]  # writes the input under the given folder, returns its path
    good: list[str] = field(default_factory=list)  # conversation keys that must be imported
    bad: bool = True  # something must be quarantined or reported


def file_case(
    name: str,
    source: str,
    data: bytes,
    good: list[str],
    *,
    bad: bool = True,
    filename: str = "conversations.json",
) -> Case:
    def build(folder: Path) -> Path:
        path = folder / filename
        path.write_bytes(data)
        return path

    return Case(name, source, build, good, bad)


def _gpt_cases() -> Iterator[Case]:
    def mid(name: str, mutate: Callable[[bytes], bytes], bad: bool = True) -> Case:
        a, b, c = (enc(gpt(f"{name}-{i}", ("hello there", "hi"))) for i in range(3))
        keys = [f"chatgpt:{name}-0", f"chatgpt:{name}-2"] + ([] if bad else [f"chatgpt:{name}-1"])
        return file_case(name, "chatgpt", array(a, mutate(b), c), keys, bad=bad)

    def swap(old: bytes, new: bytes) -> Callable[[bytes], bytes]:
        return lambda raw: raw.replace(old, new, 1)

    for label, byte in [
        ("ff", b"\xff"),
        ("c0", b"\xc0\xaf"),
        ("nul", b"\x00"),
        ("surrogate", b"\xed\xa0\x80"),
        ("ctl01", b"\x01"),
        ("esc", b"\x1b"),
        ("cut-utf8", b"\xe3\x81"),
        ("bell", b"\x07"),
    ]:
        yield mid(f"gpt-byte-{label}", swap(b"hello", b"hel" + byte + b"lo"))
    yield mid("gpt-byte-in-key", swap(b'"title"', b'"ti\xfftle"'))
    yield mid("gpt-escaped-nul", swap(b"hello", b"hel\\u0000lo"), bad=False)
    yield mid("gpt-escaped-lone", swap(b"hello", b"hel\\ud800lo"), bad=False)
    yield mid("gpt-escaped-low", swap(b"hello", b"hel\\udfffx"), bad=False)
    yield mid("gpt-nul-title", swap(b'"title gpt-nul-title-1"', b'"ti\\u0000tle"'), bad=False)
    yield mid("gpt-lone-title", swap(b'"title gpt-lone-title-1"', b'"ti\\udc00tle"'), bad=False)
    yield mid("gpt-nul-role", swap(b'"role": "user"', b'"role": "us\\u0000er"'), bad=False)
    yield mid(
        "gpt-lone-ctype",
        swap(b'"content_type": "text"', b'"content_type": "te\\ud801xt"'),
        bad=False,
    )
    yield mid("gpt-nul-node", swap(b'"n0"', b'"n\\u00000"'), bad=False)
    yield mid("gpt-bigint-time", swap(b"1700000000.5", b"9" * 5000))
    yield mid("gpt-bigint-100k", swap(b"1700000000.5", b"1" * 100_000))
    yield mid("gpt-bigint-ok", swap(b"1700000000.5", b"9" * 400), bad=False)
    yield mid("gpt-huge-float", swap(b"1700000000.5", b"1e308"), bad=False)
    yield mid("gpt-neg-float", swap(b"1700000000.5", b"-1e308"), bad=False)
    yield mid("gpt-nan", swap(b"1700000000.5", b"NaN"), bad=False)
    yield mid("gpt-inf", swap(b"1700000000.5", b"Infinity"), bad=False)
    yield mid("gpt-deep-100k", swap(b'"hello there"', b"[" * 100_000 + b"]" * 100_000))
    yield mid("gpt-brackets-in-bad-str", swap(b'"hello there"', b'"[[[{{{\\" \xff ]]}"'))
    yield mid("gpt-deep-obj", swap(b'"hello there"', b'{"a":' * 50_000 + b"1" + b"}" * 50_000))
    yield mid("gpt-missing-id", lambda raw: raw.replace(b'"id": "gpt-missing-id-1"', b'"x": 1', 1))
    yield mid("gpt-mapping-list", lambda raw: enc({"id": "gpt-mapping-list-1", "mapping": []}))
    yield mid("gpt-node-str", lambda raw: enc({"id": "gpt-node-str-1", "mapping": {"a": "x"}}))
    yield mid(
        "gpt-message-list",
        lambda raw: enc({"id": "gpt-message-list-1", "mapping": {"a": {"message": []}}}),
    )
    yield mid("gpt-item-number", lambda raw: b"12345")
    yield mid("gpt-item-string", lambda raw: b'"just a string"')
    yield mid("gpt-item-null", lambda raw: b"null")
    yield mid("gpt-item-array", lambda raw: b"[1, 2, [3]]")
    yield mid("gpt-syntax", swap(b'"parts": [', b'"parts": [,'))
    yield mid("gpt-unquoted", swap(b'"parts"', b"parts"))
    cyc = gpt("gpt-cycle-1")
    cyc["mapping"]["root"]["parent"] = "n1"
    yield mid("gpt-cycle", lambda raw: enc(cyc), bad=False)
    dangling = gpt("gpt-dangling-1", current_node="nowhere")
    yield mid("gpt-dangling", lambda raw: enc(dangling), bad=False)
    selfp = gpt("gpt-self-parent-1")
    selfp["mapping"]["n0"]["parent"] = "n0"
    yield mid("gpt-self-parent", lambda raw: enc(selfp), bad=False)
    weird = gpt("gpt-weird-parts-1")
    weird["mapping"]["n0"]["message"]["content"]["parts"] = [None, 5, {"x": 1}, ["y"], "text"]
    yield mid("gpt-weird-parts", lambda raw: enc(weird), bad=False)
    nocontent = gpt("gpt-no-content-1")
    del nocontent["mapping"]["n0"]["message"]["content"]
    yield mid("gpt-no-content", lambda raw: enc(nocontent), bad=False)
    yield mid("gpt-long-title", swap(b'"title gpt-long-title-1"', enc("t" * 1_000_000)), bad=False)
    many = gpt("gpt-10k-siblings-1")
    kids = many["mapping"]["n0"]["children"] = []
    for i in range(10_000):
        node = f"r{i}"
        kids.append(node)
        many["mapping"][node] = {
            "id": node,
            "parent": "n0",
            "children": [],
            "message": {
                "id": node,
                "author": {"role": "assistant"},
                "content": {"content_type": "text", "parts": [f"v{i}"]},
            },
        }
    many["current_node"] = "r17"
    yield mid("gpt-10k-siblings", lambda raw: enc(many), bad=False)

    two = [enc(gpt("gpt-dup-id")), enc(gpt("gpt-dup-id", ("other",))), enc(gpt("gpt-dup-ok"))]
    yield file_case(
        "gpt-duplicate-ids", "chatgpt", array(*two), ["chatgpt:gpt-dup-id", "chatgpt:gpt-dup-ok"]
    )
    good = enc(gpt("gpt-cut-0"))
    yield file_case(
        "gpt-truncated", "chatgpt", array(good, enc(gpt("gpt-cut-1")))[:-60], ["chatgpt:gpt-cut-0"]
    )
    yield file_case(
        "gpt-missing-comma",
        "chatgpt",
        b"[" + good.replace(b"cut-0", b"mc-0") + b" " + enc(gpt("gpt-mc-1")) + b"]",
        ["chatgpt:gpt-mc-0"],
    )
    yield file_case(
        "gpt-bom",
        "chatgpt",
        b"\xef\xbb\xbf" + array(enc(gpt("gpt-bom-0"))),
        ["chatgpt:gpt-bom-0"],
        bad=False,
    )
    yield file_case(
        "gpt-trailing-junk",
        "chatgpt",
        array(enc(gpt("gpt-tj-0"))) + b"\x00garbage{",
        ["chatgpt:gpt-tj-0"],
        bad=False,
    )
    yield file_case(
        "gpt-ws-between",
        "chatgpt",
        b"[\n\n  " + enc(gpt("gpt-ws-0")) + b"  \r\n ,\t" + enc(gpt("gpt-ws-1")) + b"\n]\n",
        ["chatgpt:gpt-ws-0", "chatgpt:gpt-ws-1"],
        bad=False,
    )
    for label, data in [
        ("empty", b""),
        ("spaces", b"   \n "),
        ("object", b'{"a": 1}'),
        ("open", b"["),
        ("number", b"42"),
        ("binary", bytes(range(256)) * 4),
        ("nul-only", b"\x00" * 100),
        ("open-item", b"[{"),
        ("empty-array", b"[]"),
        ("comma-only", b"[,]"),
    ]:
        yield file_case(f"gpt-file-{label}", "chatgpt", data, [], bad=label != "empty-array")
    # containers
    yield Case(
        "gpt-zip-ok-plus-junk",
        "chatgpt",
        zip_of(
            {
                "conversations.json": array(enc(gpt("gpt-zj-0"))),
                "chat.html": b"<html>",
                "file-abc.png": b"\x89PNG",
            }
        ),
        ["chatgpt:gpt-zj-0"],
        bad=False,
    )
    yield Case(
        "gpt-zip-slip",
        "chatgpt",
        zip_of(
            {
                "../../etc/conversations.json": array(enc(gpt("gpt-slip-x"))),
                "conversations-000.json": array(enc(gpt("gpt-slip-0"))),
            }
        ),
        ["chatgpt:gpt-slip-0"],
    )
    yield Case(
        "gpt-zip-absolute",
        "chatgpt",
        zip_of(
            {
                "/abs/conversations-001.json": array(enc(gpt("gpt-abs-x"))),
                "conversations-000.json": array(enc(gpt("gpt-abs-0"))),
            }
        ),
        ["chatgpt:gpt-abs-0"],
    )
    yield Case(
        "gpt-zip-bomb",
        "chatgpt",
        zip_of({"conversations.json": b"[" + b" " * 10_000_000 + enc(gpt("gpt-bomb-0")) + b"]"}),
        ["chatgpt:gpt-bomb-0"],
        bad=False,
    )
    yield Case(
        "gpt-zip-shards-one-bad",
        "chatgpt",
        zip_of(
            {
                "conversations-000.json": array(enc(gpt("gpt-sh-0"))),
                "conversations-001.json": array(enc(gpt("gpt-sh-1")))[:-30],
                "conversations-002.json": array(enc(gpt("gpt-sh-2"))),
            }
        ),
        ["chatgpt:gpt-sh-0", "chatgpt:gpt-sh-2"],
    )
    yield Case(
        "gpt-zip-shard-dup",
        "chatgpt",
        zip_of(
            {
                "conversations-000.json": array(enc(gpt("gpt-sd-0"))),
                "conversations-001.json": array(enc(gpt("gpt-sd-0")), enc(gpt("gpt-sd-1"))),
            }
        ),
        ["chatgpt:gpt-sd-0", "chatgpt:gpt-sd-1"],
    )
    yield Case("gpt-zip-empty", "chatgpt", zip_of({}), [])
    yield Case("gpt-zip-no-export", "chatgpt", zip_of({"user.json": b"{}"}), [])
    yield Case("gpt-zip-nested", "chatgpt", zip_of({"inner.zip": b"PK\x03\x04junk"}), [])

    def corrupt_zip(path: Path) -> Path:
        zip_of({"conversations.json": array(enc(gpt("gpt-crc-0")), enc(gpt("gpt-crc-1")))})(path)
        data = bytearray(path.read_bytes())
        data[60:80] = b"\x00" * 20  # inside the compressed member
        path.write_bytes(bytes(data))
        return path

    yield Case("gpt-zip-corrupt", "chatgpt", lambda folder: corrupt_zip(folder / "export.zip"), [])

    def truncated_zip(path: Path) -> Path:
        zip_of({"conversations.json": array(enc(gpt("gpt-tz-0")))})(path)
        path.write_bytes(path.read_bytes()[:-40])
        return path

    yield Case(
        "gpt-zip-truncated", "chatgpt", lambda folder: truncated_zip(folder / "export.zip"), []
    )
    yield file_case("gpt-fake-zip", "chatgpt", b"PK\x03\x04 not really", [], filename="export.zip")

    def fifo(folder: Path) -> Path:
        path = folder / "conversations.json"
        os.mkfifo(path)
        return path

    yield Case("gpt-named-pipe", "chatgpt", fifo, [])

    def empty_folder(folder: Path) -> Path:
        (folder / "export").mkdir()
        (folder / "export" / "readme.txt").write_text("x")
        return folder / "export"

    yield Case("gpt-folder-no-export", "chatgpt", empty_folder, [])


def _claude_cases() -> Iterator[Case]:
    def mid(name: str, mutate: Callable[[bytes], bytes], bad: bool = True, **over: Any) -> Case:
        a, b, c = (enc(claude(f"{name}-{i}", **over)) for i in range(3))
        keys = [f"claude:{name}-0", f"claude:{name}-2"] + ([] if bad else [f"claude:{name}-1"])
        return file_case(name, "claude", array(a, mutate(b), c), keys, bad=bad)

    def swap(old: bytes, new: bytes) -> Callable[[bytes], bytes]:
        return lambda raw: raw.replace(old, new, 1)

    for label, byte in [
        ("ff", b"\xff"),
        ("nul", b"\x00"),
        ("surrogate", b"\xed\xb0\x80"),
        ("ctl", b"\x02"),
    ]:
        yield mid(f"claude-byte-{label}", swap(b"hello", b"hel" + byte + b"lo"))
    for label, when in [
        ("year9999-neg", "9999-12-31T23:59:59-05:00"),
        ("year1-pos", "0001-01-01T00:00:00+05:00"),
        ("garbage", "not a time"),
        ("huge-offset", "2025-01-01T00:00:00+23:59"),
        ("number", 12345),
    ]:
        yield mid(
            f"claude-time-{label}",
            lambda raw, w=when: raw.replace(b'"2025-07-06T03:10:13.609691Z"', enc(w)),
            bad=False,
        )
        yield mid(
            f"claude-conv-time-{label}",
            lambda raw, w=when: raw.replace(b'"2025-07-06T03:10:00Z"', enc(w)),
            bad=False,
        )
    yield mid(
        "claude-nul-uuid",
        swap(b'"uuid": "claude-nul-uuid-1-m1"', b'"uuid": "m\\u00001"'),
        bad=False,
    )
    yield mid(
        "claude-lone-sender", swap(b'"sender": "human"', b'"sender": "hu\\udc80man"'), bad=False
    )
    yield mid(
        "claude-lone-name",
        swap(b'"name": "name claude-lone-name-1"', b'"name": "\\ud800"'),
        bad=False,
    )
    yield mid(
        "claude-messages-dict",
        lambda raw: enc(claude("claude-messages-dict-1", chat_messages={"a": 1})),
        bad=True,
    )
    yield mid(
        "claude-message-str",
        lambda raw: enc(claude("claude-message-str-1", chat_messages=["x", 5])),
    )
    yield mid("claude-deep", swap(b'"hello there"', b"[" * 100_000 + b"]" * 100_000))
    yield mid("claude-bigint", swap(b'"hello there"', b"7" * 6000))
    yield mid("claude-no-uuid", lambda raw: enc({"name": "x", "chat_messages": []}))
    cyc = claude("claude-cycle-1")
    cyc["chat_messages"][0]["parent_message_uuid"] = "claude-cycle-1-m2"
    cyc["chat_messages"][1]["parent_message_uuid"] = "claude-cycle-1-m1"
    cyc["current_leaf_message_uuid"] = "claude-cycle-1-m2"
    yield mid("claude-cycle", lambda raw: enc(cyc), bad=False)
    yield file_case(
        "claude-truncated",
        "claude",
        array(enc(claude("claude-cut-0")), enc(claude("claude-cut-1")))[:-50],
        ["claude:claude-cut-0"],
    )
    yield file_case(
        "claude-dup",
        "claude",
        array(enc(claude("claude-dup-0")), enc(claude("claude-dup-0"))),
        ["claude:claude-dup-0"],
    )
    yield Case(
        "claude-zip-projects-bad",
        "claude",
        zip_of(
            {
                "conversations.json": array(enc(claude("claude-zp-0"))),
                "projects.json": b'[{"uuid": \xff}]',
                "users.json": b"[]",
            }
        ),
        ["claude:claude-zp-0"],
    )


def _codex_cases() -> Iterator[Case]:
    def rollout(
        name: str,
        n: int,
        lines: list[Any],
        *,
        good: bool = True,
        bad: bool = True,
        suffix: str = ".jsonl",
        raw: bytes | None = None,
    ) -> Case:
        def build(folder: Path) -> Path:
            path = folder / f"rollout-2026-03-01T10-00-00-{sid(n)}{suffix}"
            data = raw if raw is not None else jsonl(lines)
            path.write_bytes(
                zstandard.ZstdCompressor().compress(data) if suffix.endswith(".zst") else data
            )
            return path

        return Case(name, "codex", build, [f"codex:{sid(n)}"] if good else [], bad)

    n = 100
    for label, line in [
        ("ff", b'{"x": "\xff"}'),
        ("json", b'{"x": '),
        ("array", b"[1, 2]"),
        ("nul", b'{"x": "\x00"}'),
        ("deep", b"[" * 100_000 + b"]" * 100_000),
        ("bigint", b'{"x": ' + b"9" * 8000 + b"}"),
        ("surrogate", b'{"x": "\xed\xa0\x80"}'),
        ("binary", bytes(range(1, 256))),
    ]:
        n += 1
        yield rollout(f"codex-line-{label}", n, [*codex_lines(sid(n)), line])
    for label, when in [
        ("year9999-neg", "9999-12-31T23:59:59-05:00"),
        ("year1-pos", "0001-01-01T00:00:00+05:00"),
        ("garbage", "zzz"),
        ("number", 5),
    ]:
        n += 1
        yield rollout(f"codex-time-{label}", n, codex_lines(sid(n), ts=when), bad=False)  # type: ignore[arg-type]
    n += 1
    lines = codex_lines(sid(n))
    lines[1]["payload"]["role"] = "us\x00er"
    yield rollout("codex-nul-role", n, lines, bad=False)
    n += 1
    lines = codex_lines(sid(n), text="lone \ud800 surrogate and nul \x00")
    yield rollout("codex-odd-text", n, lines, bad=False)
    n += 1
    lines = codex_lines(sid(n))
    lines[1]["payload"]["type"] = "mess\ud800age"
    yield rollout("codex-lone-type", n, lines, bad=False)
    n += 1
    lines = codex_lines(sid(n))
    lines[0]["payload"]["forked_from_id"] = sid(n)  # a fork of itself
    yield rollout("codex-self-fork", n, lines, bad=False)
    n += 1
    yield rollout("codex-long-line", n, codex_lines(sid(n), text="long line " * 30_000), bad=False)
    n += 1
    yield rollout("codex-blank-lines", n, [b"", *codex_lines(sid(n)), b"   "], bad=False)
    n += 1
    data = jsonl(codex_lines(sid(n)) * 30)
    yield rollout("codex-zst-ok", n, [], raw=data, suffix=".jsonl.zst", bad=False)
    n += 1
    more = [line for i in range(1500) for line in codex_lines(sid(n), text=f"more {i} " * (i % 50))]
    full = zstandard.ZstdCompressor().compress(jsonl(codex_lines(sid(n)) + more))

    def cut_zst(folder: Path, n: int = n, full: bytes = full) -> Path:
        path = folder / f"rollout-2026-03-01T10-00-00-{sid(n)}.jsonl.zst"
        path.write_bytes(full[: len(full) // 2])
        return path

    yield Case("codex-zst-truncated", "codex", cut_zst, [f"codex:{sid(n)}"])
    n += 1
    yield rollout("codex-zst-garbage", n, [], raw=b"", suffix=".jsonl.zst", good=False)

    def garbage_zst(folder: Path, n: int = n) -> Path:
        path = folder / f"rollout-2026-03-01T10-00-00-{sid(n)}.jsonl.zst"
        path.write_bytes(b"\x28\xb5\x2f\xfd" + os.urandom(200))
        return path

    yield Case("codex-zst-random", "codex", garbage_zst, [])
    n += 1
    yield rollout("codex-empty", n, [], raw=b"", good=False)
    n += 1
    yield rollout(
        "codex-no-meta", n, codex_lines(sid(n))[1:], bad=False
    )  # the id comes from the file name
    n += 1
    yield rollout("codex-only-garbage", n, [], raw=b"\xff\xfe\x00\x01\n" * 10, good=False)

    def tree(folder: Path) -> Path:
        root = folder / "sessions" / "2026" / "03" / "01"
        root.mkdir(parents=True)
        (root / f"rollout-2026-03-01T10-00-00-{sid(190)}.jsonl").write_bytes(
            jsonl(codex_lines(sid(190)))
        )
        (root / f"rollout-2026-03-01T10-00-01-{sid(191)}.jsonl").write_bytes(b'{"x": \xff\n')
        (root / f"rollout-2026-03-01T10-00-02-{sid(192)}.jsonl").write_bytes(b"")
        (root / "notes.txt").write_text("not a rollout")
        (root / f"rollout-2026-03-01T10-00-03-{sid(190)}.jsonl").write_bytes(
            jsonl(codex_lines(sid(190)))
        )
        return folder / "sessions"

    yield Case("codex-tree-mixed", "codex", tree, [f"codex:{sid(190)}"])

    def dup_tree(folder: Path) -> Path:
        root = folder / "s"
        root.mkdir()
        for i in range(3):  # three files claiming the same session id in their meta
            (root / f"rollout-2026-03-01T10-00-0{i}-{sid(195 + i)}.jsonl").write_bytes(
                jsonl(codex_lines(sid(195)))
            )
        return root

    yield Case("codex-dup-sessions", "codex", dup_tree, [f"codex:{sid(195)}"], bad=False)


def _cc_cases() -> Iterator[Case]:
    def transcript(
        name: str, n: int, lines: list[Any], *, good: bool = True, bad: bool = True
    ) -> Case:
        def build(folder: Path) -> Path:
            path = folder / f"{sid(n)}.jsonl"
            path.write_bytes(jsonl(lines))
            return path

        return Case(name, "claude-code", build, [f"claude-code:{sid(n)}"] if good else [], bad)

    n = 300
    for label, line in [
        ("ff", b'{"type": "user", "x": "\xff"}'),
        ("json", b"{"),
        ("str", b'"x"'),
        ("deep", b'{"a":' * 100_000 + b"1" + b"}" * 100_000),
        ("bigint", b"9" * 9000),
        ("nul", b'{"type": "user", "x": "\x00"}'),
    ]:
        n += 1
        yield transcript(f"cc-line-{label}", n, [*cc_lines(sid(n)), line])
    for label, when in [
        ("year9999-neg", "9999-12-31T23:59:59-05:00"),
        ("year1-pos", "0001-01-01T00:00:00+05:00"),
        ("garbage", "??"),
    ]:
        n += 1
        yield transcript(f"cc-time-{label}", n, cc_lines(sid(n), ts=when), bad=False)
    n += 1
    lines = cc_lines(sid(n))
    lines[0]["parentUuid"] = lines[1]["uuid"]  # a cycle
    yield transcript("cc-cycle", n, lines, bad=False)
    n += 1
    lines = cc_lines(sid(n))
    lines[1]["parentUuid"] = lines[1]["uuid"]  # its own parent
    yield transcript("cc-self-parent", n, lines, bad=False)
    n += 1
    lines = cc_lines(sid(n))
    yield transcript(
        "cc-dup-uuid",
        n,
        [*lines, lines[0], {**lines[1], "message": {"role": "assistant", "content": []}}],
        bad=False,
    )
    n += 1
    lines = cc_lines(sid(n), text="nul \x00 and lone \udc00")
    lines[0]["uuid"] = "u\x00id"
    lines[1]["parentUuid"] = "u\x00id"
    yield transcript("cc-odd-ids", n, lines, bad=False)
    n += 1
    lines = cc_lines(sid(n))
    lines[0]["type"] = "us\ud800er"
    yield transcript("cc-lone-type", n, lines, bad=False)
    n += 1
    yield transcript(
        "cc-content-weird",
        n,
        [
            *cc_lines(sid(n)),
            {
                **cc_lines(sid(n))[0],
                "uuid": "w1",
                "message": {"role": "user", "content": [5, None, {}]},
            },
            {**cc_lines(sid(n))[0], "uuid": "w2", "message": "not a dict"},
        ],
        bad=False,
    )
    n += 1
    yield transcript(
        "cc-summary-only",
        n,
        [{"type": "summary", "summary": "s", "leafUuid": "elsewhere"}],
        good=False,
        bad=False,
    )

    def tree(folder: Path) -> Path:
        root = folder / "projects" / "-tmp-x"
        root.mkdir(parents=True)
        (root / f"{sid(390)}.jsonl").write_bytes(jsonl(cc_lines(sid(390))))
        (root / f"{sid(391)}.jsonl").write_bytes(b"\xff\xff\n{\n")
        (root / "history.jsonl").write_bytes(b"{}\n")
        (root / f"{sid(390)}" / "tool-results").mkdir(parents=True)
        (root / f"{sid(390)}" / "tool-results" / "t.txt").write_text("x")
        return folder

    yield Case("cc-tree-mixed", "claude-code", tree, [f"claude-code:{sid(390)}"])


def corpus() -> list[Case]:
    return [*_gpt_cases(), *_claude_cases(), *_codex_cases(), *_cc_cases()]


# ---------------------------------------------------------------- running it


class Hang(Exception):
    pass


def _alarm(_signum: int, _frame: Any) -> None:
    raise Hang()


@pytest.fixture(scope="module")
def hostile_db(pg_admin_url: str, template_db: str) -> Iterator[str]:
    name = f"pmem_hostile_{os.getpid()}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template_db)
            )
        )
    yield make_conninfo(pg_admin_url, dbname=name)
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def ledger_snapshot(url: str, keys: list[str] | None = None) -> list[tuple]:
    """Every stored row (with xmin, so that even an update to the same values shows)."""
    where = "" if keys is None else " WHERE conversation_key = ANY(%s)"
    args = () if keys is None else (keys,)
    with psycopg.connect(url) as conn:
        convs = conn.execute(
            "SELECT xmin::text, * FROM source_conversations" + where + " ORDER BY conversation_key",
            args,
        ).fetchall()
        msgs = conn.execute(
            "SELECT xmin::text, * FROM source_messages" + where + " ORDER BY message_key", args
        ).fetchall()
    return convs + msgs


def test_the_corpus_is_large_and_covers_every_format() -> None:
    cases = corpus()
    assert len(cases) >= 100
    assert len({c.name for c in cases}) == len(cases)
    assert {c.source for c in cases} == {"chatgpt", "claude", "codex", "claude-code"}


@pytest.mark.needs_shared
def test_hostile_corpus_imports_without_hang_crash_or_loss(hostile_db: str, tmp_path: Path) -> None:
    from flows.importing import run_import
    from store.db import Database
    from store.ledger import Ledger

    db = Database(hostile_db)
    ledger = Ledger(db, erasure_key=b"k" * 32)
    before_keys = [k for k in _keys(hostile_db)]
    run_import(ledger, "chatgpt", str(SUBSET))
    baseline_keys = _keys(hostile_db)
    baseline = ledger_snapshot(hostile_db, baseline_keys)
    assert baseline and before_keys == []
    failures: list[str] = []
    old = signal.signal(signal.SIGALRM, _alarm)
    try:
        for case in corpus():
            folder = tmp_path / case.name
            folder.mkdir()
            path = case.build(folder)
            started = time.monotonic()
            signal.alarm(CASE_SECONDS)
            try:
                stats = run_import(ledger, case.source, str(path))
            except Hang:
                failures.append(f"{case.name}: no answer within {CASE_SECONDS}s")
                continue
            except Exception as err:  # noqa: BLE001 - the case failed: collect, report all at the end
                failures.append(f"{case.name}: raised {type(err).__name__}: {err}")
                continue
            finally:
                signal.alarm(0)
            stored = set(_keys(hostile_db, [_stored(k) for k in case.good]))
            missing = [k for k in case.good if _stored(k) not in stored]
            if missing:
                failures.append(f"{case.name}: good records not imported: {missing}")
            reported = stats["quarantined"] + (1 if stats["input_error"] else 0)
            if case.bad and not reported:
                failures.append(f"{case.name}: nothing quarantined or reported")
            if not case.bad and reported:
                failures.append(f"{case.name}: reported {stats['errors'][:3]}")
            if os.environ.get("PMEM_HOSTILE_TIMES"):
                print(f"{case.name}: {time.monotonic() - started:.2f}s")
            if time.monotonic() - started > CASE_SECONDS / 2:
                failures.append(f"{case.name}: slow ({time.monotonic() - started:.1f}s)")
    finally:
        signal.signal(signal.SIGALRM, old)
        db.close()
    assert not failures, "\n".join(failures)
    assert ledger_snapshot(hostile_db, baseline_keys) == baseline  # nothing imported before changed


def _stored(key: str) -> str:
    from store.ledger import storable

    return storable(key)


def _keys(url: str, only: list[str] | None = None) -> list[str]:
    with psycopg.connect(url) as conn:
        if only is None:
            rows = conn.execute(
                "SELECT conversation_key FROM source_conversations ORDER BY 1"
            ).fetchall()
        else:
            rows = conn.execute(
                "SELECT conversation_key FROM source_conversations WHERE conversation_key = ANY(%s)",
                (only,),
            ).fetchall()
    return [r[0] for r in rows]


@pytest.mark.parametrize(
    "name",
    [
        "gpt-byte-nul",
        "gpt-truncated",
        "codex-zst-truncated",
        "gpt-file-binary",
        "gpt-named-pipe",
        "cc-line-deep",
    ],
)
def test_the_cli_reports_hostile_input_without_a_traceback(
    pmem_env, tmp_path: Path, name: str
) -> None:
    case = next(c for c in corpus() if c.name == name)
    path = case.build(tmp_path)
    result = CliRunner().invoke(
        app_(), ["import", str(path), "--source", case.source, "--no-embed", "--json"]
    )
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code in (1, 3), result.output
    assert "Traceback" not in result.output
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert errors and all(
        path.name.split("!")[0] in line or path.name in line for line in errors[:1]
    )
    out = json.loads(result.stdout.strip().splitlines()[-1])
    assert out["errors"] and out["conversations"]["new"] == len(case.good)


def app_() -> Any:
    from cli.main import app

    return app


def test_an_invalid_byte_in_the_middle_of_three_records_leaves_the_other_two(
    db, tmp_path: Path
) -> None:
    from flows.importing import run_import
    from store.ledger import Ledger

    a, b, c = (enc(gpt(f"mid-{i}")) for i in range(3))
    path = tmp_path / "conversations.json"
    data = array(a, b.replace(b"hello", b"hel\xfflo"), c)
    path.write_bytes(data)
    stats = run_import(Ledger(db), "chatgpt", str(path))
    assert (stats["conversations_new"], stats["quarantined"], stats["input_error"]) == (2, 1, None)
    [error] = stats["errors"]
    offset = data.index(b"\xff")
    assert error["record"] == 1 and error["reason"] == f"invalid-utf8 at byte {offset}"
    assert set(_keys_of(db)) == {"chatgpt:mid-0", "chatgpt:mid-2"}


def _keys_of(db: Any) -> list[str]:
    with db.connection() as conn:
        return [r[0] for r in conn.execute("SELECT conversation_key FROM source_conversations")]


def test_a_50_mb_message_imports_in_time_linear_in_its_size(
    db, tmp_path: Path, monkeypatch
) -> None:
    """Built at test time: one conversation whose one message is 50 MB (Japanese and English,
    a word only at its end). What `pmem import --no-embed` does (ledger, prefilter and the
    recall index's rows, stored with the batch: ADR 0026) is linear: four times the size takes
    about four times as long; and the whole message is indexed (its last passage too). Issue 12
    asks for 3x json.load: not met (`bench/import_bench.py --single-message --mb 50`: the
    process's start alone costs more CPU than json.load of the file); the bound below catches a
    return of the quadratic paths, not the goal."""
    from flows.importing import run_import
    from store.ledger import Ledger

    monkeypatch.setenv("PMEM_INDEX_WORKERS", "0")  # the huge text is tokenised in place anyway

    def export(size: int, name: str) -> tuple[Path, float]:
        unit = "日本語の長いメッセージ。 An English sentence follows, then more. "
        text = unit * (size // len(enc(unit))) + f"\n\nthe last word is zanzibar{name}"
        path = tmp_path / f"{name}.json"
        path.write_bytes(enc([gpt(name, (text, "ok"))]))
        started = time.perf_counter()
        with path.open("rb") as f:
            json.load(f)
        return path, time.perf_counter() - started

    ledger = Ledger(db)
    timings = {}
    for size, name in ((12_500_000, "quarter"), (50_000_000, "full")):
        path, baseline = export(size, name)
        started = time.perf_counter()
        stats = run_import(ledger, "chatgpt", str(path), index_messages=True)
        took = time.perf_counter() - started
        assert (
            stats["conversations_new"] == 1
            and stats["messages_new"] == 2
            and stats["indexed_messages"] == 2
        )
        timings[name] = (took, baseline)
        path.unlink()
    print("50 MB message:", timings)
    with db.connection() as conn:
        found = conn.execute(
            "SELECT count(*) FROM message_search WHERE tokens @@ 'zanzibarfull'::tsquery"
        ).fetchone()
    assert found == (1,)  # the end of the message is in the index
    full, base = timings["full"]
    assert full <= 14 * base + 1.0, timings  # (+1 s: the database's fixed costs per import)
    assert full <= 5 * timings["quarter"][0] + 1.0, (
        timings
    )  # linear: 4x the size, about 4x the time
