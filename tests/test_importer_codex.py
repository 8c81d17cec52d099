"""The Codex rollout importer: every real sample, every schema era, forks, .zst and damaged lines."""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from core.errors import InputError
from core.hashing import content_hash
from core.models import Channel, Conversation, Message
from importers import iter_source, sniff
from importers._common import Quarantined
from importers.codex import iter_conversations, split_preamble
from tests.conftest import REAL as SHARED_REAL

REAL = SHARED_REAL / "codex"
V077 = REAL / "rollout-2026-01-02T18-39-45-019b7f94-51b4-7593-922e-ba12b5b73b52.jsonl"
V0125 = REAL / "rollout-2026-05-11T11-26-55-019e1625-789d-76c0-80ab-3724b5ddb799.jsonl"
V0128 = REAL / "rollout-2026-05-11T13-28-45-019e1695-0522-7c83-8b39-0dd379793f80.jsonl"
V0135 = REAL / "agent-history-real-session-01-codex-0.135.0-redacted.jsonl"
STAGE0 = REAL / "agent-sessions-stage0-codex-small.jsonl"
ALL_REAL = [V077, V0125, V0128, V0135, STAGE0]

EXACT_TEXTS = [
    "nul\x00inside",
    "lone high \ud800 surrogate",
    "lone low then high \udc00\ud800 adjacent",
    "emoji 😀 and 👩\u200d👩\u200d👧 family",
    "crlf\r\nline\rcr\n",
    "line sep \u2028 para \u2029 bom \ufeff",
    "日本語のテキスト。全角　スペース",
    "  spaces  \t",
]


# ---------------------------------------------------------------- helpers


def _conv(path: Path) -> Conversation:
    items = list(iter_conversations(path))
    convs = [i for i in items if isinstance(i, Conversation)]
    assert len(convs) == 1, items
    return convs[0]


def _person(conv: Conversation) -> list[str]:
    return [m.text for m in conv.active_messages if m.channel is Channel.PERSON]


def _assistant(conv: Conversation) -> list[str]:
    return [m.text for m in conv.active_messages if m.channel is Channel.ASSISTANT]


def _raw_lines(path: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()
    ]


def _line(
    kind: str, payload: dict[str, Any], ts: str = "2026-03-01T10:00:00.000Z", **extra: Any
) -> dict[str, Any]:
    return {"timestamp": ts, "type": kind, "payload": payload, **extra}


def _meta(sid: str, **extra: Any) -> dict[str, Any]:
    return _line(
        "session_meta",
        {
            "id": sid,
            "timestamp": "2026-03-01T09:59:59.000Z",
            "cwd": "/w",
            "originator": "codex-tui",
            "cli_version": "0.130.0",
            **extra,
        },
    )


def _user(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "user",
        "content": [{"type": "input_text", "text": text}],
        **extra,
    }


def _assistant_item(text: str, **extra: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": text}],
        **extra,
    }


def _write(path: Path, lines: list[Any], *, raw: bytes = b"") -> Path:
    body = b"".join(json.dumps(x).encode("ascii") + b"\n" for x in lines)
    path.write_bytes(body + raw)
    return path


SID = "019c0000-0000-7000-8000-00000000000a"


# ---------------------------------------------------------------- real rollouts


@pytest.mark.needs_shared
def test_every_real_rollout_imports_with_unique_keys() -> None:
    for path in ALL_REAL:
        items = list(iter_conversations(path))
        assert all(isinstance(i, Conversation) for i in items), (path.name, items)
        (conv,) = items
        assert isinstance(conv, Conversation)
        meta = _raw_lines(path)[0]["payload"]
        assert conv.key == f"codex:{meta['id']}" and conv.source == "codex"
        keys = [m.key for m in conv.messages]
        assert len(keys) == len(set(keys)), path.name
        assert all(k.startswith(conv.key + ":") for k in keys)
        assert [m.position for m in conv.messages] == list(range(len(conv.messages)))
        assert conv.provenance.file == str(path) and conv.provenance.position == 0
        assert {k for k in conv.unknown_types if not k.startswith("skipped:")} == set(), path.name
        assert all(m.channel in (Channel.PERSON, Channel.ASSISTANT) for m in conv.drafting_messages)


@pytest.mark.needs_shared
def test_v077_exec_session() -> None:
    conv = _conv(V077)
    assert conv.external_id == "019b7f94-51b4-7593-922e-ba12b5b73b52"
    # the file name says 18:39:45 local; the payload time is UTC
    assert (
        conv.created_at is not None
        and conv.created_at.isoformat() == "2026-01-02T16:39:45.332000+00:00"
    )
    assert _person(conv) == [
        "what is current repository about? summarize purpuse and explain goals"
    ]
    injected = [m for m in conv.messages if m.role == "user" and m.channel is Channel.MACHINERY]
    assert len(injected) == 2
    assert injected[0].text.startswith("# AGENTS.md instructions for ")
    assert injected[1].text.startswith("<environment_context>")
    tools = Counter(m.content_type for m in conv.messages if m.channel is Channel.TOOL)
    assert tools == {"function_call": 3, "function_call_output": 3}
    reasoning = [m for m in conv.messages if m.content_type == "reasoning"]
    assert len(reasoning) == 3 and all(m.channel is Channel.MACHINERY for m in reasoning)
    assert reasoning[-1].text.startswith("**Clarifying documentation instructions**")
    # the agent_reasoning event repeats the last reasoning summary: kept once
    assert not any(m.content_type == "event:agent_reasoning" for m in conv.messages)
    assert _assistant(conv) == []  # the publisher's file stops before the answer


@pytest.mark.needs_shared
def test_v0125_tui_session_counts_each_turn_once() -> None:
    conv = _conv(V0125)
    raw = _raw_lines(V0125)
    assert _person(conv) == [
        "show tools",
        "let's update the defailt context compart to 90 in env var",
    ]
    answers = [
        "\n".join(c["text"] for c in line["payload"]["content"])
        for line in raw
        if line["type"] == "response_item" and line["payload"].get("role") == "assistant"
    ]
    assert len(answers) == 13 and _assistant(conv) == answers  # the agent_message events are echoes
    assert _assistant(conv)[0].startswith("Available tool groups in this session:")
    developer = [m for m in conv.messages if m.role == "developer"]
    assert len(developer) == 1 and developer[0].channel is Channel.MACHINERY
    assert developer[0].text.startswith("<permissions instructions>")
    tools = Counter(m.content_type for m in conv.messages if m.channel is Channel.TOOL)
    assert tools == {
        "function_call": 99,
        "function_call_output": 99,
        "custom_tool_call": 3,
        "custom_tool_call_output": 3,
        "web_search_call": 3,
    }
    first = next(m for m in conv.messages if m.channel is Channel.PERSON)
    assert (
        first.created_at is not None
        and first.created_at.isoformat() == "2026-05-11T08:27:17.494000+00:00"
    )


@pytest.mark.needs_shared
def test_v0128_desktop_preamble_is_split_exactly() -> None:
    conv = _conv(V0128)
    events = [
        line["payload"]["message"]
        for line in _raw_lines(V0128)
        if line["type"] == "event_msg" and line["payload"]["type"] == "user_message"
    ]
    assert len(events) == 3
    person = [m for m in conv.active_messages if m.channel is Channel.PERSON]
    assert len(person) == 3  # only the events carry the user's words in this subset
    assert person[0].text.startswith("analyze trascript and summarzie action items")
    context = next(m for m in conv.messages if m.node_id == person[0].node_id + "#context")
    assert context.channel is Channel.MACHINERY
    assert context.text.startswith("\n# Files mentioned by the user:")
    assert context.text + person[0].text == events[0]
    assert [m.text for m in person[1:]] == events[1:]
    assert len(_assistant(conv)) == 3


@pytest.mark.needs_shared
def test_v0135_redacted_exec_session() -> None:
    conv = _conv(V0135)
    assert _person(conv) == ["[REDACTED_PROMPT]"]
    assert _assistant(conv) == ["[REDACTED_ASSISTANT_TEXT]"]
    roles = [(m.role, m.channel) for m in conv.messages]
    assert roles == [
        ("developer", Channel.MACHINERY),
        ("user", Channel.MACHINERY),
        ("user", Channel.PERSON),
        ("assistant", Channel.ASSISTANT),
    ]


@pytest.mark.needs_shared
def test_stage0_shape_fixture_0146() -> None:
    conv = _conv(STAGE0)
    assert conv.external_id == "019fc8be-3658-7ca3-9e29-000000000000"
    # event user_message (line 4) and response_item msg-1 (line 6) are one turn
    first = [m for m in conv.active_messages if m.text == "List the files"]
    assert len(first) == 1 and first[0].key == f"{conv.key}:msg-1"
    found = [m for m in conv.active_messages if m.text == "Found 2 files."]
    assert (
        len(found) == 1
        and found[0].key == f"{conv.key}:msg-2"
        and found[0].channel is Channel.ASSISTANT
    )
    assert conv.unknown_types == {}
    assert conv.title == "[trimmed for fixture]"  # from thread_name_updated
    # every line has "ordinal": 0 in the shape fixture: keys still unique
    assert len({m.key for m in conv.messages}) == len(conv.messages)
    compacted = [m for m in conv.messages if m.content_type == "compacted"]
    assert len(compacted) == 6 and all(m.channel is Channel.MACHINERY for m in compacted)


@pytest.mark.needs_shared
def test_real_tree_reads_only_rollout_files(tmp_path: Path) -> None:
    assert sniff(REAL) == "codex"
    keys = [c.key for c in iter_conversations(REAL) if isinstance(c, Conversation)]
    assert keys == [
        "codex:019b7f94-51b4-7593-922e-ba12b5b73b52",
        "codex:019e1625-789d-76c0-80ab-3724b5ddb799",
        "codex:019e1695-0522-7c83-8b39-0dd379793f80",
    ]
    for path in ALL_REAL:
        assert sniff(path) == "codex", path.name


# ---------------------------------------------------------------- schema eras


def test_bare_era_rollout(tmp_path: Path) -> None:
    lines = [
        {
            "id": SID,
            "timestamp": "2025-08-01T10:00:00.000Z",
            "instructions": None,
            "git": {"branch": "main"},
        },
        {"record_type": "state"},
        _user("<user_instructions>\nbe nice\n</user_instructions>"),
        _user("<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"),
        _user("fix the bug"),
        {"type": "reasoning", "summary": [], "encrypted_content": "gAAAA"},
        {
            "type": "function_call",
            "name": "shell",
            "arguments": '{"command":["ls"]}',
            "call_id": "c1",
        },
        {
            "type": "function_call_output",
            "call_id": "c1",
            "output": '{"output":"a\\n","metadata":{"exit_code":0}}',
        },
        _assistant_item("Fixed."),
        {"record_type": "state"},
    ]
    conv = _conv(_write(tmp_path / f"rollout-2025-08-01T12-00-00-{SID}.jsonl", lines))
    assert conv.key == f"codex:{SID}"
    assert (
        conv.created_at is not None and conv.created_at.isoformat() == "2025-08-01T10:00:00+00:00"
    )
    assert _person(conv) == ["fix the bug"]
    assert _assistant(conv) == ["Fixed."]
    assert [m.channel for m in conv.messages if m.role == "user"] == [
        Channel.MACHINERY,
        Channel.MACHINERY,
        Channel.PERSON,
    ]
    assert all(m.created_at is None for m in conv.messages)  # no per-line times in that era
    assert conv.unknown_types == {}
    assert sniff(tmp_path / f"rollout-2025-08-01T12-00-00-{SID}.jsonl") == "codex"


def test_typescript_era_json(tmp_path: Path) -> None:
    data = {
        "session": {"timestamp": "2025-04-20T10:00:00.000Z", "id": SID, "instructions": ""},
        "items": [
            _user("hello \ud800 from 2025 \x00"),
            _assistant_item("hi"),
            {
                "type": "local_shell_call",
                "call_id": "x",
                "status": "completed",
                "action": {"type": "exec", "command": ["ls"]},
            },
        ],
    }
    path = tmp_path / f"rollout-2025-04-20-{SID}.json"
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    conv = _conv(path)
    assert conv.key == f"codex:{SID}"
    assert _person(conv) == ["hello \ud800 from 2025 \x00"] and _assistant(conv) == ["hi"]
    assert [m.channel for m in conv.messages][-1] is Channel.TOOL
    (folder := tmp_path / "sessions").mkdir()
    shutil.move(path, folder / path.name)
    assert [c.key for c in iter_conversations(tmp_path) if isinstance(c, Conversation)] == [
        conv.key
    ]


def test_v0148_without_user_message_events(tmp_path: Path) -> None:
    lines = [
        _line(
            "session_meta",
            {"id": SID, "timestamp": "2026-08-20T10:00:00.000Z", "history_mode": "default"},
            ordinal=0,
        ),
        _line("world_state", {"full": True, "state": {}}, ordinal=1),
        _line(
            "response_item",
            {
                "type": "message",
                "id": "msg_dev",
                "role": "developer",
                "content": [{"type": "input_text", "text": "rules"}],
            },
            ordinal=2,
        ),
        _line(
            "response_item",
            _user(
                "plan the move",
                id="msg_u1",
                internal_chat_message_metadata_passthrough={"turn_id": "t1"},
            ),
            ordinal=3,
        ),
        _line(
            "event_msg",
            {
                "type": "item_completed",
                "turn_id": "t1",
                "item": {
                    "type": "UserMessage",
                    "id": "msg_u1",
                    "content": [{"type": "text", "text": "plan the move", "text_elements": []}],
                },
            },
            ordinal=4,
        ),
        _line(
            "response_item",
            _assistant_item("Here is the plan.", id="msg_a1", phase="final_answer"),
            ordinal=5,
        ),
        _line(
            "event_msg",
            {
                "type": "item_completed",
                "turn_id": "t1",
                "item": {
                    "type": "AgentMessage",
                    "id": "msg_a1",
                    "content": [{"type": "Text", "text": "Here is the plan."}],
                },
            },
            ordinal=6,
        ),
        _line(
            "event_msg",
            {
                "type": "item_completed",
                "turn_id": "t1",
                "item": {
                    "type": "AgentMessage",
                    "id": "msg_a2",
                    "content": [{"type": "Text", "text": "Only in the event."}],
                },
            },
            ordinal=7,
        ),
    ]
    conv = _conv(_write(tmp_path / f"rollout-x-{SID}.jsonl", lines))
    got = [(m.node_id, m.channel, m.text) for m in conv.messages]
    assert got == [
        ("msg_dev", Channel.MACHINERY, "rules"),
        ("msg_u1", Channel.PERSON, "plan the move"),
        ("msg_a1", Channel.ASSISTANT, "Here is the plan."),
        ("msg_a2", Channel.ASSISTANT, "Only in the event."),
    ]


def test_user_turn_counted_once_whichever_line_comes_first(tmp_path: Path) -> None:
    event = _line("event_msg", {"type": "user_message", "message": "same words", "images": []})
    item = _line("response_item", _user("same words"))
    again = _line("response_item", _user("same words"), ts="2026-03-01T10:05:00.000Z")
    for order in ([event, item], [item, event]):
        conv = _conv(_write(tmp_path / f"rollout-{SID}.jsonl", [_meta(SID), *order, again]))
        assert _person(conv) == ["same words", "same words"]  # the second turn is a new turn


def test_preamble_split_is_exact() -> None:
    text = "\n# Files mentioned by the user:\n\n## a.txt: /x/a.txt\n\n## My request for Codex:\nsummarise a.txt\n"
    head, request = split_preamble(text)
    assert head + request == text and request == "summarise a.txt\n"
    assert split_preamble("plain words") == ("", "plain words")
    assert split_preamble("## My request for Codex: but no preamble") == (
        "",
        "## My request for Codex: but no preamble",
    )


# ---------------------------------------------------------------- forks


def _fork_files(tmp_path: Path) -> tuple[Path, Path, str]:
    parent_id = "019c0000-0000-7000-8000-0000000000b1"
    child_id = "019c0000-0000-7000-8000-0000000000c2"
    parent_lines = [
        _meta(parent_id),
        _line("response_item", _user("parent question")),
        _line("response_item", _assistant_item("parent answer")),
    ]
    root = tmp_path / "sessions" / "2026" / "03" / "01"
    root.mkdir(parents=True)
    parent = _write(root / f"rollout-2026-03-01T11-00-00-{parent_id}.jsonl", parent_lines)
    later = "2026-03-01T12:00:00.000Z"  # Codex rewrites the line times of the copy
    child_lines = [
        _meta(child_id, forked_from_id=parent_id),
        *({**line, "timestamp": later} for line in parent_lines),
        _line("response_item", _user("child question"), ts="2026-03-01T12:01:00.000Z"),
        _line("response_item", _assistant_item("child answer"), ts="2026-03-01T12:01:05.000Z"),
    ]
    child = _write(root / f"rollout-2026-03-01T13-00-00-{child_id}.jsonl", child_lines)
    # the parent grew after the fork: the copy is still recognised
    with parent.open("ab") as fp:
        fp.write(json.dumps(_line("response_item", _user("parent goes on"))).encode() + b"\n")
    return parent, child, parent_id


def test_fork_copy_is_dropped_when_the_parent_is_imported(tmp_path: Path) -> None:
    _, child, parent_id = _fork_files(tmp_path)
    convs = {c.external_id: c for c in iter_conversations(tmp_path) if isinstance(c, Conversation)}
    assert set(convs) == {parent_id, child.name[-42:-6]}
    parent_conv = convs[parent_id]
    child_conv = convs[child.name[-42:-6]]
    assert _person(parent_conv) == ["parent question", "parent goes on"]
    assert _person(child_conv) == ["child question"]
    assert _assistant(child_conv) == ["child answer"]
    assert child_conv.unknown_types == {"skipped:fork-copied": 3}
    assert child_conv.messages[0].parent_id == f"codex:{parent_id}"  # the link to the parent


def test_fork_copy_is_kept_without_the_parent(tmp_path: Path) -> None:
    _, child, _ = _fork_files(tmp_path)
    conv = _conv(child)
    assert _person(conv) == ["parent question", "child question"]
    assert conv.unknown_types == {}


# ---------------------------------------------------------------- compressed and damaged files


@pytest.mark.needs_shared
def test_zstd_rollout_reads_like_the_plain_one(tmp_path: Path) -> None:
    zstandard = pytest.importorskip("zstandard")
    path = tmp_path / (V0125.name + ".zst")
    path.write_bytes(zstandard.ZstdCompressor().compress(V0125.read_bytes()))
    plain = _conv(V0125)
    packed = _conv(path)
    assert [(m.key, m.text) for m in packed.messages] == [(m.key, m.text) for m in plain.messages]
    assert sniff(path) == "codex"
    tree = tmp_path / "tree"
    tree.mkdir()
    shutil.move(path, tree / path.name)
    (tree / "rollout-broken-019c0000-0000-7000-8000-0000000000ff.jsonl.zst").write_bytes(
        b"not zstd at all"
    )
    items = list(iter_conversations(tree))
    quarantined = [i for i in items if isinstance(i, Quarantined)]
    assert [q.kind for q in quarantined] == ["file"]
    assert quarantined[0].file.endswith(
        "rollout-broken-019c0000-0000-7000-8000-0000000000ff.jsonl.zst"
    )
    assert [c.key for c in items if isinstance(c, Conversation)] == [plain.key]


def test_bad_lines_are_quarantined_and_the_file_goes_on(tmp_path: Path) -> None:
    secret = "PRIVATE-LINE-TEXT"
    lines: list[Any] = [_meta(SID), _line("response_item", _user("before"))]
    body = b"".join(json.dumps(x).encode() + b"\n" for x in lines)
    body += b"\n   \n"  # blank lines
    body += b'{"type": "response_item", "payload": {"text": "' + secret.encode() + b'"\n'  # cut
    body += b"\xff\xfe" + secret.encode() + b"\n"  # not UTF-8
    body += b'["' + secret.encode() + b'"]\n'  # not an object
    body += json.dumps(_line("response_item", _assistant_item("after"))).encode() + b"\n"
    body += json.dumps(_line("mystery_line", {"x": 1})).encode() + b"\n"
    body += json.dumps(_line("response_item", {"type": "hologram", "x": 1})).encode() + b"\n"
    body += json.dumps(_line("event_msg", {"type": "brand_new_event", "x": 1})).encode() + b"\n"
    body += (
        json.dumps(_line("response_item", _assistant_item("after"))).encode() + b"\n"
    )  # repeated line
    path = tmp_path / f"rollout-{SID}.jsonl"
    path.write_bytes(body)
    items = list(iter_conversations(path))
    quarantined = [i for i in items if isinstance(i, Quarantined)]
    assert [(q.position, q.reason, q.kind) for q in quarantined] == [
        (5, "invalid-json", "record"),
        (6, "invalid-utf8", "record"),
        (7, "not-an-object", "record"),
    ]
    assert all(secret not in q.model_dump_json() and q.file == str(path) for q in quarantined)
    (conv,) = (i for i in items if isinstance(i, Conversation))
    assert _person(conv) == ["before"]
    # a line repeated byte for byte is kept (a bare-era "ok" twice is two turns), keyed apart
    first, again = (m for m in conv.messages if m.text == "after")
    assert again.node_id == f"{first.node_id}~L12"
    assert conv.unknown_types == {
        "skipped:blank-line": 2,
        "mystery_line": 1,
        "response_item:hologram": 1,
        "event_msg:brand_new_event": 1,
    }
    raw = [m for m in conv.messages if m.raw_type]
    assert [m.raw_type for m in raw] == [
        "mystery_line",
        "response_item:hologram",
        "event_msg:brand_new_event",
    ]
    assert all(m.channel is Channel.MACHINERY and json.loads(m.text) for m in raw)


def test_unreadable_files_raise_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        list(iter_conversations(tmp_path / "rollout-missing.jsonl"))
    assert info.value.file == str(tmp_path / "rollout-missing.jsonl")
    empty = tmp_path / f"rollout-{SID}.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(InputError):
        list(iter_conversations(empty))
    assert list(iter_conversations(tmp_path)) == []  # in a tree, a zero-byte copy is skipped
    garbage = tmp_path / "notes.jsonl"
    garbage.write_bytes(b"hello\nworld\n")
    with pytest.raises(InputError) as info:
        list(iter_conversations(garbage))
    assert info.value.file == str(garbage)


def test_session_id_falls_back_to_the_file_name(tmp_path: Path) -> None:
    path = _write(
        tmp_path / f"rollout-2026-03-01T10-00-00-{SID}.jsonl",
        [_line("response_item", _user("no meta line"))],
    )
    conv = _conv(path)
    assert conv.key == f"codex:{SID}" and _person(conv) == ["no meta line"]


# ---------------------------------------------------------------- exact text


@pytest.mark.parametrize("compressed", [False, True], ids=["jsonl", "zst"])
def test_text_is_byte_exact(tmp_path: Path, compressed: bool) -> None:
    lines: list[Any] = [_meta(SID)]
    for i, text in enumerate(EXACT_TEXTS):
        item = _user(text) if i % 2 == 0 else _assistant_item(text)
        lines.append(_line("response_item", item, ts=f"2026-03-01T10:00:{i:02d}.000Z"))
    path = _write(tmp_path / f"rollout-{SID}.jsonl", lines)
    if compressed:
        zstandard = pytest.importorskip("zstandard")
        packed = path.with_name(path.name + ".zst")
        packed.write_bytes(zstandard.ZstdCompressor().compress(path.read_bytes()))
        path.unlink()
        path = packed
    conv = _conv(path)
    texts = [m.text for m in conv.messages]
    assert texts == EXACT_TEXTS
    assert [m.content_hash for m in conv.messages] == [content_hash(t) for t in EXACT_TEXTS]
    assert [m.channel for m in conv.messages][:2] == [Channel.PERSON, Channel.ASSISTANT]
    raw_utf8 = tmp_path / "utf8"
    raw_utf8.mkdir()
    safe = [t for t in EXACT_TEXTS if not any(0xD800 <= ord(c) <= 0xDFFF for c in t)]
    body = b"".join(
        json.dumps(x, ensure_ascii=False).encode("utf-8") + b"\n"
        for x in [_meta(SID), *(_line("response_item", _user(t)) for t in safe)]
    )
    (raw_utf8 / f"rollout-{SID}.jsonl").write_bytes(body)
    assert _person(_conv(raw_utf8 / f"rollout-{SID}.jsonl")) == safe


@pytest.mark.needs_shared
def test_iter_source_and_message_fields(tmp_path: Path) -> None:
    items = list(iter_source("codex", V0135))
    (conv,) = items
    assert isinstance(conv, Conversation)
    message: Message = conv.messages[2]
    assert message.parent_id == conv.messages[1].node_id and message.on_active_path
    assert message.key == f"{conv.key}:{message.node_id}"


def test_an_unforeseen_line_shape_is_quarantined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importers.codex as module

    original = module._record_drafts

    def fragile(rec: Any, session: Any) -> Any:
        if rec.number == 3:
            raise KeyError("boom")
        return original(rec, session)

    monkeypatch.setattr(module, "_record_drafts", fragile)
    lines = [
        _meta(SID),
        _line("response_item", _user("one")),
        _line("response_item", _user("two")),
        _line("response_item", _user("three")),
    ]
    items = list(iter_conversations(_write(tmp_path / f"rollout-{SID}.jsonl", lines)))
    (bad,) = (i for i in items if isinstance(i, Quarantined))
    assert (bad.position, bad.reason, bad.kind) == (3, "parse-error:KeyError", "record")
    (conv,) = (i for i in items if isinstance(i, Conversation))
    assert _person(conv) == ["one", "three"]
