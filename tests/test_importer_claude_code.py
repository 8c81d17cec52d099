"""The Claude Code importer: every real transcript, split messages, /compact copies, subagents."""

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
from importers.claude_code import iter_conversations
from tests.conftest import REAL as SHARED_REAL

REAL = SHARED_REAL / "claude-code"
V2064 = REAL / "codemie-v2.0.64" / "4c2ddfdc-b619-4525-8d03-1950fb1b0257.jsonl"
V2064_AGENTS = [
    REAL / "codemie-v2.0.64" / "agent-36541525.jsonl",
    REAL / "codemie-v2.0.64" / "agent-50243ee8.jsonl",
]
V217 = REAL / "codemie-v2.1.7-subagents" / "turn-2.jsonl"
V217_AGENT = REAL / "codemie-v2.1.7-subagents" / "turn-2" / "subagents" / "agent-a485154.jsonl"
V2076 = REAL / "session-196820da.jsonl"
V214 = REAL / "session-9eda1058.jsonl"
V21152 = REAL / "agent-history-real-session-01-claude-2.1.152-redacted.jsonl"
STAGE0 = REAL / "agent-sessions-stage0-claude-small.jsonl"
ALL_REAL = [V2064, *V2064_AGENTS, V217, V217_AGENT, V2076, V214, V21152, STAGE0]

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
SID = "5e551017-0000-4000-8000-000000000001"


# ---------------------------------------------------------------- helpers


def _conv(path: Path) -> Conversation:
    items = list(iter_conversations(path))
    convs = [i for i in items if isinstance(i, Conversation)]
    assert len(convs) == 1, items
    return convs[0]


def _raw(path: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in path.read_text(encoding="utf-8").splitlines() if x.strip()]


def _person(conv: Conversation) -> list[str]:
    return [m.text for m in conv.active_messages if m.channel is Channel.PERSON]


def _answers(conv: Conversation) -> list[str]:
    return [m.text for m in conv.active_messages if m.channel is Channel.ASSISTANT]


def _line(
    kind: str, uuid: str, parent: str | None, body: Any = None, **extra: Any
) -> dict[str, Any]:
    line: dict[str, Any] = {
        "parentUuid": parent,
        "isSidechain": False,
        "userType": "external",
        "cwd": "/w",
        "sessionId": SID,
        "version": "2.1.30",
        "gitBranch": "main",
        "type": kind,
        "uuid": uuid,
        "timestamp": "2026-02-01T10:00:00.000Z",
    }
    if kind == "user":
        line["message"] = {"role": "user", "content": body}
    elif kind == "assistant":
        line["message"] = {
            "id": extra.pop("msg_id", f"msg_{uuid}"),
            "type": "message",
            "role": "assistant",
            "model": "claude-x",
            "content": body,
        }
    line.update(extra)
    return line


def _text(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text}


def _write(path: Path, lines: list[Any]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(json.dumps(x).encode("ascii") + b"\n" for x in lines))
    return path


def _by_node(conv: Conversation, node_id: str) -> Message:
    return next(m for m in conv.messages if m.node_id == node_id)


# ---------------------------------------------------------------- real transcripts


@pytest.mark.needs_shared
def test_every_real_transcript_imports_with_unique_keys() -> None:
    for path in ALL_REAL:
        conv = _conv(path)
        keys = [m.key for m in conv.messages]
        assert len(keys) == len(set(keys)), path.name
        assert conv.source == "claude-code" and conv.provenance.file == str(path)
        assert conv.unknown_types == {}, path.name
        on = [m.position for m in conv.active_messages]
        assert on == list(range(len(on)))
        assert all(m.position == -1 for m in conv.messages if not m.on_active_path)
        assert all(m.channel in (Channel.PERSON, Channel.ASSISTANT) for m in conv.drafting_messages)
        assert conv.created_at is not None and conv.created_at.tzinfo is not None


@pytest.mark.needs_shared
def test_v2064_session_merges_split_message() -> None:
    conv = _conv(V2064)
    assert conv.key == "claude-code:4c2ddfdc-b619-4525-8d03-1950fb1b0257"
    assert _person(conv) == [
        "create hello.py, md and js",
        "update py with one liner comment",
        "delete js",
    ]
    split = [
        line
        for line in _raw(V2064)
        if line.get("message", {}).get("id") == "msg_bdrk_013SYvCzWGkVVXBeihWmL3gF"
    ]
    assert len(split) == 4  # one API response written as four lines
    parts = [m for m in conv.messages if m.node_id in {line["uuid"] for line in split}]
    assert [m.channel for m in parts] == [
        Channel.ASSISTANT,
        Channel.TOOL,
        Channel.TOOL,
        Channel.TOOL,
    ]
    assert parts[0].text == "I'll create three simple files: hello.py, hello.md, and hello.js."
    assert all(
        m.key == f"claude-code:4c2ddfdc-b619-4525-8d03-1950fb1b0257:{m.node_id}"
        for m in conv.messages
    )
    assert Counter(m.content_type for m in conv.messages if m.channel is Channel.TOOL) == {
        "tool_use": 6,
        "tool_result": 6,
    }
    # the file-history-snapshot lines are bookkeeping, not messages
    assert len(conv.messages) == sum(
        1 for line in _raw(V2064) if line["type"] in ("user", "assistant")
    )


@pytest.mark.needs_shared
def test_old_layout_subagents_are_linked_to_their_session(tmp_path: Path) -> None:
    convs = {c.key: c for c in iter_conversations(V2064.parent) if isinstance(c, Conversation)}
    parent = "claude-code:4c2ddfdc-b619-4525-8d03-1950fb1b0257"
    assert set(convs) == {parent, f"{parent}:agent-36541525", f"{parent}:agent-50243ee8"}
    agent = convs[f"{parent}:agent-36541525"]
    assert agent.messages[0].parent_id == parent  # the link
    assert (
        agent.messages[0].channel is Channel.TOOL
    )  # the parent agent's instruction, not the person
    assert agent.messages[1].channel is Channel.ASSISTANT
    assert agent.messages[1].text.startswith("I'll start by exploring the codebase")
    assert all(
        m.key.startswith("claude-code:4c2ddfdc-b619-4525-8d03-1950fb1b0257:")
        for m in agent.messages
    )
    assert sniff(V2064.parent) == "claude-code"


@pytest.mark.needs_shared
def test_new_layout_subagents_folder() -> None:
    convs = {c.key: c for c in iter_conversations(V217.parent) if isinstance(c, Conversation)}
    parent = (
        "claude-code:e9fb405b-169f-40eb-9396-7e75076f045d"  # from the lines: the file is "turn-2"
    )
    assert set(convs) == {parent, f"{parent}:agent-a485154"}
    session = convs[parent]
    person = _person(session)
    assert len(person) == 1
    assert person[0].startswith('@"solution-architect (agent)" analyze existing CLI command')
    agent = convs[f"{parent}:agent-a485154"]
    # parallel tool calls fan out in parentUuid: they are not branches
    assert all(m.on_active_path for m in agent.messages)
    assert Counter(m.content_type for m in agent.messages) == {
        "tool_use": 20,
        "tool_result": 20,
        "text": 4,
    }
    assert len(_answers(agent)) == 3
    assert session.title is None  # its summary line points at another session's leaf
    thinking = [m for m in session.messages if m.content_type == "thinking"]
    assert len(thinking) == 11 and all(m.channel is Channel.MACHINERY for m in thinking)


@pytest.mark.needs_shared
def test_v2076_long_session() -> None:
    conv = _conv(V2076)
    raw = _raw(V2076)
    assert len(raw) == 233
    assert conv.key == "claude-code:196820da-1026-4b6f-a513-a6aae42da1a6"
    person = _person(conv)
    assert len(person) == 13
    assert person[0].startswith("ultrathink there is logic that tracks files in claude folder")
    assert person[-1] == "create document in /specs folder"
    injected = [m for m in conv.messages if m.role == "user" and m.channel is Channel.MACHINERY]
    assert [m.text.split(">")[0][:30] for m in injected] == [
        "Caveat: The messages below wer",
        "<command-name",
        "<local-command-stdout",
    ]
    # 133 assistant lines, 47 response ids split over several lines; text fragments merge
    assert sum(1 for line in raw if line["type"] == "assistant") == 133
    assert len(_answers(conv)) == 21
    assert Counter(m.content_type for m in conv.messages if m.role == "assistant") == {
        "tool_use": 65,
        "thinking": 47,
        "text": 21,
    }
    assert not any(m.content_type.startswith("queue") for m in conv.messages)


@pytest.mark.needs_shared
def test_v214_foreign_summaries_are_not_this_sessions() -> None:
    conv = _conv(V214)
    raw = _raw(V214)
    summaries = [line for line in raw if line["type"] == "summary"]
    assert len(summaries) == 16
    assert conv.title is None
    assert all(m.content_type != "summary" for m in conv.messages)
    assert _person(conv) == [
        "show tools and store response in file",
        "explore more of current repo",
        "what else?",
    ]
    assert conv.messages[0].created_at is not None
    assert conv.messages[0].created_at.isoformat() == "2026-01-11T09:53:23.575000+00:00"


@pytest.mark.needs_shared
def test_v21152_redacted_sdk_run() -> None:
    conv = _conv(V21152)
    assert conv.key == "claude-code:06090cb1-3e64-433a-bc7e-a621c0f596d2"
    assert [(m.role, m.channel, m.text) for m in conv.messages] == [
        ("user", Channel.PERSON, "[REDACTED_PROMPT]"),
        ("assistant", Channel.ASSISTANT, "[REDACTED_ASSISTANT_TEXT]"),
    ]
    assert conv.messages[1].parent_id == conv.messages[0].node_id


@pytest.mark.needs_shared
def test_stage0_shape_fixture() -> None:
    conv = _conv(STAGE0)
    assert conv.key == "claude-code:ses_stage0_small"
    assert conv.title == "Stage0 small fixture"  # custom-title beats ai-title and summary
    off = {m.node_id for m in conv.messages if not m.on_active_path}
    # sidechain lines inside a session file, and the superseded / retracted answers
    assert {"u1", "a1", "a1#1", "a1#2", "a2", "a3", "u3"} <= off
    assert _by_node(conv, "a-nested-1#1").channel is Channel.ASSISTANT
    assert _by_node(conv, "u3").content_type == "compact_summary"
    assert _by_node(conv, "u3").channel is Channel.MACHINERY
    queued = [m for m in conv.messages if m.content_type == "attachment:queued_command"]
    assert len(queued) == 4 and all(m.channel is Channel.PERSON for m in queued)
    fallback = [m for m in conv.messages if m.content_type == "fallback"]
    assert len(fallback) == 1 and fallback[0].channel is Channel.MACHINERY


@pytest.mark.needs_shared
def test_real_projects_tree(tmp_path: Path) -> None:
    projects = tmp_path / ".claude" / "projects" / "-tmp-private"
    shutil.copytree(V2064.parent, projects)
    (tmp_path / ".claude" / "history.jsonl").write_text(
        '{"display": "x", "timestamp": 1, "sessionId": "s"}\n'
    )
    keys = sorted(
        c.key
        for c in iter_source("claude-code", tmp_path / ".claude")
        if isinstance(c, Conversation)
    )
    assert keys == [
        "claude-code:4c2ddfdc-b619-4525-8d03-1950fb1b0257",
        "claude-code:4c2ddfdc-b619-4525-8d03-1950fb1b0257:agent-36541525",
        "claude-code:4c2ddfdc-b619-4525-8d03-1950fb1b0257:agent-50243ee8",
    ]
    assert sniff(tmp_path / ".claude") == "claude-code"
    for path in ALL_REAL:
        assert sniff(path) == "claude-code", path.name


# ---------------------------------------------------------------- synthetic


def test_split_text_fragments_merge_and_compact_copies_are_dropped(tmp_path: Path) -> None:
    lines = [
        _line("user", "u1", None, "why is the sky blue?"),
        _line(
            "assistant",
            "a1",
            "u1",
            [{"type": "thinking", "thinking": "physics", "signature": "s"}],
            msg_id="msg_1",
        ),
        _line("assistant", "a2", "a1", [_text("Rayleigh ")], msg_id="msg_1"),
        _line("assistant", "a3", "a2", [_text("scattering.")], msg_id="msg_1"),
        _line(
            "assistant",
            "a4",
            "a3",
            [{"type": "tool_use", "id": "t1", "name": "Read", "input": {}}],
            msg_id="msg_1",
        ),
        _line(
            "user",
            "r1",
            "a4",
            [{"type": "tool_result", "tool_use_id": "t1", "content": "file text"}],
        ),
        _line(
            "system",
            "b1",
            None,
            None,
            subtype="compact_boundary",
            content="Conversation compacted",
            logicalParentUuid="r1",
        ),
        _line("user", "s1", "b1", "Summary of the conversation so far", isCompactSummary=True),
        # /compact re-appends copies of old rows with their original uuid
        _line("user", "u1", None, "why is the sky blue?"),
        _line("assistant", "a2", "a1", [_text("Rayleigh ")], msg_id="msg_1"),
        _line("user", "u2", "s1", "thanks"),
    ]
    conv = _conv(_write(tmp_path / f"{SID}.jsonl", lines))
    got = [(m.node_id, m.channel, m.content_type, m.text) for m in conv.active_messages]
    assert got == [
        ("u1", Channel.PERSON, "text", "why is the sky blue?"),
        ("a1", Channel.MACHINERY, "thinking", "physics"),
        ("a2", Channel.ASSISTANT, "text", "Rayleigh scattering."),
        ("a4", Channel.TOOL, "tool_use", json.dumps(lines[4]["message"]["content"][0])),
        ("r1", Channel.TOOL, "tool_result", "file text"),
        ("b1", Channel.MACHINERY, "system:compact_boundary", "Conversation compacted"),
        ("s1", Channel.MACHINERY, "compact_summary", "Summary of the conversation so far"),
        ("u2", Channel.PERSON, "text", "thanks"),
    ]
    assert conv.unknown_types == {"skipped:duplicate-uuid": 2}
    assert _by_node(conv, "b1").parent_id == "r1"  # logicalParentUuid bridges the compaction


def test_edited_prompt_and_regenerated_answer_are_branches(tmp_path: Path) -> None:
    lines = [
        _line("user", "u1", None, "first wording"),
        _line("assistant", "a1", "u1", [_text("answer to first")]),
        _line("user", "u1b", None, "edited wording"),  # same parent (the root): an edit
        _line("assistant", "a2", "u1b", [_text("answer one")], msg_id="msg_x"),
        _line("assistant", "a2b", "u1b", [_text("answer two")], msg_id="msg_y"),  # regenerated
        _line("user", "u2", "a2b", "go on"),
    ]
    conv = _conv(_write(tmp_path / f"{SID}.jsonl", lines))
    # u1 and u1b are both roots (parentUuid null): not siblings under one parent, so kept
    assert [m.node_id for m in conv.active_messages] == ["u1", "a1", "u1b", "a2b", "u2"]
    assert not _by_node(conv, "a2").on_active_path
    lines[2]["parentUuid"] = lines[0]["parentUuid"] = "root"
    lines.insert(0, _line("system", "root", None, None, subtype="session_start", content="start"))
    conv = _conv(_write(tmp_path / f"{SID}.jsonl", lines))
    assert [m.node_id for m in conv.active_messages] == ["root", "u1b", "a2b", "u2"]
    assert {m.node_id for m in conv.messages if not m.on_active_path} == {"u1", "a1", "a2"}


def test_unknown_types_and_bad_lines(tmp_path: Path) -> None:
    secret = "PRIVATE-CC-TEXT"
    good = [
        _line("user", "u1", None, "hello"),
        _line("assistant", "a1", "u1", [_text("hi"), {"type": "hologram", "data": secret}]),
        {"type": "brand-new-line", "uuid": "n1", "sessionId": SID, "payload": {"x": 1}},
        {"type": "file-history-snapshot", "messageId": "a1", "snapshot": {}},
        {"type": "summary", "summary": "Greeting", "leafUuid": "a1"},
    ]
    body = b"".join(json.dumps(x).encode() + b"\n" for x in good)
    body += b"\n" + b'{"type": "user", "message": ' + secret.encode() + b"\n" + b"\xc3\x28\n"
    path = tmp_path / f"{SID}.jsonl"
    path.write_bytes(body)
    items = list(iter_conversations(path))
    quarantined = [i for i in items if isinstance(i, Quarantined)]
    assert [(q.position, q.reason, q.kind) for q in quarantined] == [
        (7, "invalid-json", "record"),
        (8, "invalid-utf8", "record"),
    ]
    assert all(secret not in q.model_dump_json() for q in quarantined)
    (conv,) = (i for i in items if isinstance(i, Conversation))
    assert conv.title == "Greeting"  # its leafUuid is a line of this file
    assert conv.unknown_types == {"block:hologram": 1, "brand-new-line": 1, "skipped:blank-line": 1}
    raw = [m for m in conv.messages if m.raw_type]
    assert [(m.raw_type, m.channel) for m in raw] == [
        ("hologram", Channel.MACHINERY),
        ("brand-new-line", Channel.MACHINERY),
    ]
    assert json.loads(raw[0].text) == {"type": "hologram", "data": secret}


def test_string_content_blocks_and_injections(tmp_path: Path) -> None:
    lines = [
        _line(
            "user",
            "u0",
            None,
            "Caveat: The messages below were generated by the user while running local commands.",
            isMeta=True,
        ),
        _line(
            "user",
            "u1",
            "u0",
            "<command-name>/model</command-name>\n<command-message>model</command-message>",
        ),
        _line(
            "user",
            "u2",
            "u1",
            [
                _text("<system-reminder>context</system-reminder>"),
                _text("real words"),
                {
                    "type": "image",
                    "source": {"type": "base64", "media_type": "image/png", "data": "AAAA"},
                },
            ],
        ),
        _line("user", "u3", "u2", "[Request interrupted by user for tool use]"),
        _line("assistant", "a1", "u3", [_text("API Error: 500")], isApiErrorMessage=True),
        _line("user", "u4", "a1", "<div>a pasted html snippet</div>"),
    ]
    conv = _conv(_write(tmp_path / f"{SID}.jsonl", lines))
    got = [(m.node_id, m.channel) for m in conv.messages]
    assert got == [
        ("u0", Channel.MACHINERY),
        ("u1", Channel.MACHINERY),
        ("u2", Channel.MACHINERY),
        ("u2#1", Channel.PERSON),
        ("u2#2", Channel.MACHINERY),
        ("u3", Channel.MACHINERY),
        ("a1", Channel.MACHINERY),
        ("u4", Channel.PERSON),
    ]
    assert _person(conv) == ["real words", "<div>a pasted html snippet</div>"]


def test_subagent_without_its_parent_file_and_missing_ids(tmp_path: Path) -> None:
    agent = _write(
        tmp_path / SID / "subagents" / "agent-abc123.jsonl",
        [
            {
                **_line("user", "x1", None, "Explore the repo"),
                "isSidechain": True,
                "agentId": "abc123",
            },
            {
                **_line("assistant", "x2", "x1", [_text("Found it.")]),
                "isSidechain": True,
                "agentId": "abc123",
            },
        ],
    )
    conv = _conv(agent)
    assert conv.key == f"claude-code:{SID}:agent-abc123"
    assert conv.messages[0].parent_id == f"claude-code:{SID}"
    assert [m.channel for m in conv.messages] == [Channel.TOOL, Channel.ASSISTANT]
    anonymous = tmp_path / "plain-name.jsonl"
    _write(anonymous, [{"type": "user", "message": {"role": "user", "content": "no ids at all"}}])
    conv = _conv(anonymous)
    assert conv.key == "claude-code:plain-name" and _person(conv) == ["no ids at all"]
    assert conv.messages[0].node_id == "line-1"


def test_unreadable_and_empty_files(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        list(iter_conversations(tmp_path / "missing.jsonl"))
    assert info.value.file == str(tmp_path / "missing.jsonl")
    empty = tmp_path / "proj" / f"{SID}.jsonl"
    empty.parent.mkdir()
    empty.write_bytes(b"")
    with pytest.raises(InputError) as info:
        list(iter_conversations(empty))
    assert info.value.file == str(empty)
    _write(tmp_path / "proj" / "other.jsonl", [_line("user", "u1", None, "kept")])
    keys = [c.key for c in iter_conversations(tmp_path) if isinstance(c, Conversation)]
    assert keys == [f"claude-code:{SID}"]  # the empty file is skipped in a tree


def test_text_is_byte_exact(tmp_path: Path) -> None:
    lines: list[Any] = []
    parent = None
    for i, text in enumerate(EXACT_TEXTS):
        uuid = f"m{i}"
        if i % 2 == 0:
            lines.append(_line("user", uuid, parent, text))
        else:
            lines.append(_line("assistant", uuid, parent, [_text(text)]))
        parent = uuid
    conv = _conv(_write(tmp_path / f"{SID}.jsonl", lines))
    assert [m.text for m in conv.messages] == EXACT_TEXTS
    assert [m.content_hash for m in conv.messages] == [content_hash(t) for t in EXACT_TEXTS]
    safe = [t for t in EXACT_TEXTS if not any(0xD800 <= ord(c) <= 0xDFFF for c in t)]
    utf8 = tmp_path / "utf8" / f"{SID}.jsonl"
    utf8.parent.mkdir()
    utf8.write_bytes(
        b"".join(
            json.dumps(_line("user", f"u{i}", None, t), ensure_ascii=False).encode("utf-8") + b"\n"
            for i, t in enumerate(safe)
        )
    )
    assert [m.text for m in _conv(utf8).messages] == safe


def test_an_unforeseen_line_shape_is_quarantined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importers.claude_code as module

    original = module._line_drafts

    def fragile(node: Any, rec: dict[str, Any], info: Any) -> Any:
        if node.uuid == "u2":
            raise TypeError("boom")
        return original(node, rec, info)

    monkeypatch.setattr(module, "_line_drafts", fragile)
    path = _write(
        tmp_path / f"{SID}.jsonl",
        [
            _line("user", "u1", None, "one"),
            _line("user", "u2", "u1", "two"),
            _line("user", "u3", "u2", "three"),
        ],
    )
    items = list(iter_conversations(path))
    (bad,) = (i for i in items if isinstance(i, Quarantined))
    assert (bad.position, bad.reason, bad.kind) == (2, "parse-error:TypeError", "record")
    (conv,) = (i for i in items if isinstance(i, Conversation))
    assert _person(conv) == ["one", "three"]
