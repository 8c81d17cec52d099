"""The Claude.ai importer, on fixtures written from formats.md §2 (no licensed real sample exists)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from core.errors import InputError
from core.hashing import content_hash
from core.models import Channel, Conversation, Message
from importers import iter_source, sniff
from importers._common import Quarantined
from importers.claude import iter_conversations

EXACT_TEXTS = [
    "nul\x00inside",
    "lone high \ud800 surrogate",
    "lone low then high \udc00\ud800 adjacent",
    "emoji 😀 and 👩\u200d👩\u200d👧 family",
    "crlf\r\nline\rcr\n",
    "  leading and trailing spaces  \t",
    "line sep \u2028 para \u2029 bom \ufeff",
    "日本語のテキスト。全角　スペース",
    "",
]

ROOT = "00000000-0000-4000-8000-000000000000"


# ---------------------------------------------------------------- helpers


def _block(kind: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "start_timestamp": "2025-07-06T03:10:13.609691Z", **fields}


def _msg(uuid: str, sender: str, text: str = "", **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "uuid": uuid,
        "text": text,
        "content": [_block("text", text=text)] if text else [],
        "sender": sender,
        "created_at": "2025-07-06T03:10:13.609691Z",
        "updated_at": "2025-07-06T03:10:14.000000Z",
        "attachments": [],
        "files": [],
    }
    body.update(fields)
    return body


def _conv(uuid: str, *messages: dict[str, Any], **fields: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "uuid": uuid,
        "name": f"name-{uuid}",
        "summary": "",
        "created_at": "2025-07-06T03:10:00.000000Z",
        "updated_at": "2025-07-06T04:00:00.000000Z",
        "account": {"uuid": "acct"},
        "chat_messages": list(messages),
    }
    body.update(fields)
    return body


def _write(tmp_path: Path, data: Any, name: str = "conversations.json", **dump: Any) -> Path:
    path = tmp_path / name
    path.write_bytes(json.dumps(data, **dump).encode("utf-8"))
    return path


def _convs(path: Path) -> list[Conversation]:
    items = list(iter_conversations(path))
    assert all(isinstance(c, Conversation) for c in items), items
    return [c for c in items if isinstance(c, Conversation)]


def _one(tmp_path: Path, conv: dict[str, Any]) -> Conversation:
    (result,) = _convs(_write(tmp_path, [conv]))
    return result


def _by_node(conv: Conversation, node_id: str) -> Message:
    return next(m for m in conv.messages if m.node_id == node_id)


def _simple_export() -> list[dict[str, Any]]:
    thinking_answer = _msg(
        "m2",
        "assistant",
        # the flat text glues thinking and answer together: it must never be used
        text="The user is asking about dogs.Dog saliva does contain enzymes.",
        content=[
            _block("thinking", thinking="The user is asking about dogs.", summaries=[]),
            _block("text", text="Dog saliva does contain enzymes.", citations=[]),
        ],
    )
    return [
        _conv(
            "c1",
            _msg("m1", "human", "Is dog saliva clean?"),
            thinking_answer,
        )
    ]


# ---------------------------------------------------------------- text and channels


def test_text_comes_from_blocks_never_from_flat_text(tmp_path: Path) -> None:
    (conv,) = _convs(_write(tmp_path, _simple_export()))
    assert conv.key == "claude:c1" and conv.source == "claude" and conv.external_id == "c1"
    assert conv.title == "name-c1"
    got = [(m.key, m.role, m.channel, m.content_type, m.text) for m in conv.active_messages]
    assert got == [
        ("claude:c1:m1", "user", Channel.PERSON, "text", "Is dog saliva clean?"),
        (
            "claude:c1:m2",
            "assistant",
            Channel.MACHINERY,
            "thinking",
            "The user is asking about dogs.",
        ),
        (
            "claude:c1:m2#1",
            "assistant",
            Channel.ASSISTANT,
            "text",
            "Dog saliva does contain enzymes.",
        ),
    ]
    assert [m.text for m in conv.drafting_messages] == [
        "Is dog saliva clean?",
        "Dog saliva does contain enzymes.",
    ]
    assert all("The user is asking" not in m.text for m in conv.drafting_messages)


def test_flat_text_is_used_only_without_blocks(tmp_path: Path) -> None:
    conv = _one(
        tmp_path,
        _conv(
            "c",
            _msg("a", "human", content=[], text="flat only"),
            _msg("b", "assistant", text="ignored", content=[_block("text", text="from block")]),
            {"uuid": "d", "sender": "assistant", "text": "no content key"},
            {"uuid": "e", "sender": "assistant", "content": [_block("text", text="no text key")]},
        ),
    )
    assert [(m.node_id, m.text) for m in conv.active_messages] == [
        ("a", "flat only"),
        ("b", "from block"),
        ("d", "no content key"),
        ("e", "no text key"),
    ]


def test_block_runs_tools_and_unknown_blocks(tmp_path: Path) -> None:
    blocks = [
        _block("text", text="According to "),
        _block("text", text="the docs", citations=[{"url": "https://example.invalid"}]),
        _block("text", text=", yes."),
        _block("tool_use", id="t1", name="web_search", input={"query": "q", "n": 1.5}),
        _block(
            "tool_result",
            tool_use_id="t1",
            name="web_search",
            content=[{"type": "text", "text": "r"}],
        ),
        _block("text", text="After searching."),
        _block("voice_note", title="hologram", payload={"x": [1, 2]}),
        _block("token_budget"),
    ]
    conv = _one(
        tmp_path, _conv("c", _msg("u", "human", "q"), _msg("a", "assistant", content=blocks))
    )
    got = [(m.node_id, m.channel, m.content_type, m.raw_type) for m in conv.active_messages]
    assert got == [
        ("u", Channel.PERSON, "text", None),
        ("a", Channel.ASSISTANT, "text", None),
        ("a#3", Channel.TOOL, "tool_use", None),
        ("a#4", Channel.TOOL, "tool_result", None),
        ("a#5", Channel.ASSISTANT, "text", None),
        ("a#6", Channel.MACHINERY, "voice_note", "voice_note"),
        ("a#7", Channel.MACHINERY, "token_budget", "token_budget"),
    ]
    assert _by_node(conv, "a").text == "According to the docs, yes."  # joined as Claude joins them
    assert json.loads(_by_node(conv, "a#3").text) == blocks[3]
    assert json.loads(_by_node(conv, "a#6").text) == blocks[6]
    assert conv.unknown_types == {"voice_note": 1, "token_budget": 1}
    assert [m.text for m in conv.drafting_messages] == [
        "q",
        "According to the docs, yes.",
        "After searching.",
    ]


def test_pasted_attachments_are_the_persons_words(tmp_path: Path) -> None:
    pasted = "a long pasted log\r\nline 2 \x00 😀"
    conv = _one(
        tmp_path,
        _conv(
            "c",
            _msg(
                "m1",
                "human",
                "summarise this",
                attachments=[
                    {
                        "file_name": "paste.txt",
                        "file_size": 10,
                        "file_type": "txt",
                        "extracted_content": pasted,
                    },
                    {"file_name": "image.png", "file_type": "png"},  # no text: nothing to keep
                    {"file_name": "b.txt", "extracted_content": "second"},
                ],
                files=[{"file_uuid": "f", "file_name": "image.png", "file_kind": "blob"}],
            ),
            _msg(
                "m2",
                "human",
                "",
                attachments=[{"file_name": "only.txt", "extracted_content": "only"}],
            ),
        ),
    )
    got = [(m.key, m.channel, m.content_type, m.text) for m in conv.active_messages]
    assert got == [
        ("claude:c:m1#att0", Channel.PERSON, "attachment", pasted),
        ("claude:c:m1#att2", Channel.PERSON, "attachment", "second"),
        ("claude:c:m1", Channel.PERSON, "text", "summarise this"),
        ("claude:c:m2#att0", Channel.PERSON, "attachment", "only"),
    ]
    assert [m.for_drafting for m in conv.active_messages] == [True, True, True, True]


# ---------------------------------------------------------------- order and branches


def test_current_leaf_chain_orders_and_keeps_branches(tmp_path: Path) -> None:
    # m1 -> (a1 | a1b regenerated) ; a1b -> m2 -> a2  ; array order is scrambled
    chat = [
        _msg("a2", "assistant", "answer 2", parent_message_uuid="m2", index=4),
        _msg("m1", "human", "question 1", parent_message_uuid=ROOT, index=0),
        _msg("a1", "assistant", "first try", parent_message_uuid="m1", index=1),
        _msg(
            "a1b", "assistant", "second try", parent_message_uuid="m1", index=2, input_mode="retry"
        ),
        _msg("m2", "human", "question 2", parent_message_uuid="a1b", index=3),
    ]
    conv = _one(tmp_path, _conv("c", *chat, current_leaf_message_uuid="a2"))
    assert [(m.node_id, m.position) for m in conv.active_messages] == [
        ("m1", 0),
        ("a1b", 1),
        ("m2", 2),
        ("a2", 3),
    ]
    first_try = _by_node(conv, "a1")
    assert not first_try.on_active_path and first_try.position == -1 and first_try.branch_index == 0
    assert _by_node(conv, "a1b").branch_index == 1
    assert first_try not in conv.drafting_messages
    assert _by_node(conv, "m2").parent_id == "a1b"
    assert _by_node(conv, "m1").parent_id is None  # the sentinel root is not a parent


def test_array_order_without_a_usable_leaf(tmp_path: Path) -> None:
    chat = [_msg("x", "human", "one"), _msg("y", "assistant", "two"), _msg("z", "human", "three")]
    for leaf in (None, "no-such-message", 42):
        extra = {} if leaf is None else {"current_leaf_message_uuid": leaf}
        conv = _one(tmp_path, _conv("c", *chat, **extra))
        assert [(m.node_id, m.position, m.parent_id) for m in conv.active_messages] == [
            ("x", 0, None),
            ("y", 1, "x"),
            ("z", 2, "y"),
        ]


def test_parent_cycle_does_not_hang(tmp_path: Path) -> None:
    chat = [
        _msg("a", "human", "A", parent_message_uuid="b"),
        _msg("b", "assistant", "B", parent_message_uuid="a"),
    ]
    conv = _one(tmp_path, _conv("c", *chat, current_leaf_message_uuid="b"))
    assert [m.node_id for m in conv.active_messages] == ["a", "b"]


def test_times_parse_z_and_offset(tmp_path: Path) -> None:
    conv = _one(
        tmp_path,
        _conv(
            "c",
            _msg("m", "human", "x", created_at="2025-06-27T10:46:02.691887+00:00"),
            created_at="2025-07-06T03:10:13.609691Z",
            updated_at=None,
        ),
    )
    assert (
        conv.created_at is not None
        and conv.created_at.isoformat() == "2025-07-06T03:10:13.609691+00:00"
    )
    message = conv.active_messages[0]
    # the block's start_timestamp is the message's time when present
    assert (
        message.created_at is not None
        and message.created_at.isoformat() == "2025-07-06T03:10:13.609691+00:00"
    )
    assert conv.updated_at is not None


def test_empty_and_abandoned_conversations(tmp_path: Path) -> None:
    conv = _one(tmp_path, _conv("c", name=""))
    assert conv.title is None and conv.messages == []
    conv = _one(tmp_path, _conv("d", chat_messages=None))
    assert conv.messages == []


# ---------------------------------------------------------------- exact text


@pytest.mark.parametrize("ascii_only", [True, False], ids=["escaped", "utf8"])
def test_text_is_byte_exact(tmp_path: Path, ascii_only: bool) -> None:
    texts = (
        EXACT_TEXTS
        if ascii_only
        else [t for t in EXACT_TEXTS if not any(0xD800 <= ord(c) <= 0xDFFF for c in t)]
    )
    chat = [
        _msg(f"m{i}", "human" if i % 2 == 0 else "assistant", content=[_block("text", text=t)])
        for i, t in enumerate(texts)
    ]
    path = tmp_path / "conversations.json"
    if ascii_only:
        path.write_text(json.dumps([_conv("c", *chat)]), encoding="ascii")
    else:
        path.write_bytes(json.dumps([_conv("c", *chat)], ensure_ascii=False).encode("utf-8"))
    (conv,) = _convs(path)
    assert [m.text for m in conv.active_messages] == texts
    for m, expected in zip(conv.active_messages, texts, strict=True):
        assert m.content_hash == content_hash(expected)


# ---------------------------------------------------------------- projects and containers


def _projects() -> list[dict[str, Any]]:
    return [
        {
            "uuid": "starter",
            "name": "How to use Claude",
            "is_starter_project": True,
            "docs": [{"uuid": "d0", "filename": "x", "content": "stock"}],
        },
        {
            "uuid": "p1",
            "name": "Garden",
            "description": "Plans for the garden",
            "is_private": True,
            "is_starter_project": False,
            "prompt_template": "Answer briefly.",
            "created_at": "2025-06-27T10:46:02.691887+00:00",
            "updated_at": "2025-06-28T10:46:02.691887+00:00",
            "creator": {"uuid": "u", "full_name": "N"},
            "docs": [
                {
                    "uuid": "d1",
                    "filename": "beds.md",
                    "content": "Bed 1: tomatoes\r\n",
                    "created_at": "2025-06-27T11:00:00+00:00",
                }
            ],
        },
    ]


def _zip(tmp_path: Path, members: dict[str, bytes], name: str = "claude-export.zip") -> Path:
    path = tmp_path / name
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for member, data in members.items():
            archive.writestr(member, data)
    return path


def test_zip_with_projects_is_read_in_place(tmp_path: Path) -> None:
    path = _zip(
        tmp_path,
        {
            "conversations.json": json.dumps(_simple_export()).encode(),
            "projects.json": json.dumps(_projects()).encode(),
            "users.json": b'[{"uuid": "u", "full_name": "N", "email_address": "e"}]',
            "memories.json": b'[{"conversations_memory": "m", "account_uuid": "a"}]',
        },
    )
    assert sniff(path) == "claude"
    items = list(iter_source("claude", path))
    assert [type(i).__name__ for i in items] == ["Conversation", "Conversation"]
    conv, project = (i for i in items if isinstance(i, Conversation))
    assert conv.provenance.file == str(path) and conv.provenance.member == "conversations.json"
    assert project.key == "claude:project:p1" and project.title == "Garden"
    assert project.provenance.member == "projects.json" and project.provenance.position == 1
    got = [(m.key, m.channel, m.text) for m in project.active_messages]
    assert got == [
        ("claude:project:p1:description", Channel.PERSON, "Plans for the garden"),
        ("claude:project:p1:prompt_template", Channel.MACHINERY, "Answer briefly."),
        ("claude:project:p1:d1", Channel.PERSON, "Bed 1: tomatoes\r\n"),
    ]
    assert not list(tmp_path.glob("*.json"))  # nothing was extracted


def test_folder_and_single_file(tmp_path: Path) -> None:
    folder = tmp_path / "export"
    folder.mkdir()
    _write(folder, _simple_export())
    _write(folder, _projects(), name="projects.json")
    assert sniff(folder) == "claude"
    assert [c.key for c in _convs(folder)] == ["claude:c1", "claude:project:p1"]
    assert sniff(folder / "conversations.json") == "claude"
    assert sniff(folder / "projects.json") == "claude"
    assert [c.key for c in _convs(folder / "projects.json")] == ["claude:project:p1"]


# ---------------------------------------------------------------- damaged input


def test_broken_conversations_are_quarantined(tmp_path: Path) -> None:
    secret = "PRIVATE-CLAUDE-TEXT"
    items: list[Any] = [
        _conv("ok1", _msg("m", "human", "fine")),
        {"name": secret, "chat_messages": []},
        7,
        _conv("bad-list", chat_messages={"x": secret}),
        _conv("bad-msg", chat_messages=[secret]),
        _conv("ok1", _msg("m", "human", "same id again")),
        _conv("ok2", _msg("m", "human", "fine too")),
    ]
    results = list(iter_conversations(_write(tmp_path, items)))
    summary = [
        (r.position, r.reason, r.external_id) if isinstance(r, Quarantined) else r.key
        for r in results
    ]
    assert summary == [
        "claude:ok1",
        (1, "missing-id", None),
        (2, "not-an-object", None),
        (3, "messages-not-a-list", "bad-list"),
        (4, "message-not-object", "bad-msg"),
        (5, "duplicate-id", "ok1"),
        "claude:ok2",
    ]
    assert all(secret not in r.model_dump_json() for r in results if isinstance(r, Quarantined))


def test_truncated_file_raises_after_complete_conversations(tmp_path: Path) -> None:
    secret = "PRIVATE-CUT"
    full = json.dumps([_conv("a", _msg("m", "human", "x")), _conv("b", _msg("m", "human", secret))])
    path = tmp_path / "conversations.json"
    path.write_text(full[: full.index(secret) + 3], encoding="ascii")
    seen: list[str] = []
    with pytest.raises(InputError) as info:
        for item in iter_conversations(path):
            assert isinstance(item, Conversation)
            seen.append(item.external_id)
    assert seen == ["a"]
    assert info.value.file == str(path) and info.value.record == "1"
    assert secret not in str(info.value)


def test_wrong_format_and_missing_export(tmp_path: Path) -> None:
    chatgpt_like = _write(tmp_path, [{"id": "x", "mapping": {}}], name="chatgpt.json")
    (result,) = list(iter_conversations(chatgpt_like))
    assert isinstance(result, Quarantined) and result.reason == "missing-id"
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InputError) as info:
        list(iter_conversations(empty))
    assert info.value.file == str(empty)
    with pytest.raises(InputError):
        list(iter_conversations(_zip(tmp_path, {"users.json": b"[]"}, name="nothing.zip")))
