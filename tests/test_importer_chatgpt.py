"""The streaming ChatGPT importer: real exports, the format's traps, and damaged files. No database."""

from __future__ import annotations

import importlib.util
import io
import json
import sys
import time
import tracemalloc
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from core.errors import ConfigError, InputError
from core.hashing import content_hash
from core.models import Channel, Conversation, Message
from importers import IMPORTERS, iter_source, sniff
from importers.chatgpt import (
    Quarantined,
    iter_conversations,
    iter_conversations_from_stream,
)
from tests.conftest import REAL as SHARED_REAL

REAL = SHARED_REAL / "chatgpt"
PKUPPENS = REAL / "my_chat_gpt-history_download-conversations.subset.json"
GRAPH = REAL / "chatgpt2graph-examples-conversations.json"
DEMO = Path(__file__).resolve().parents[1] / "examples" / "demo"

TOOL_TYPES = {"code", "execution_output", "tether_browsing_display", "tether_quote", "system_error"}


# ---------------------------------------------------------------- helpers


def _convs(path: Path) -> list[Conversation]:
    items = list(iter_conversations(path))
    assert all(isinstance(c, Conversation) for c in items), items
    return [c for c in items if isinstance(c, Conversation)]


def _by_title(convs: list[Conversation], title: str) -> Conversation:
    return next(c for c in convs if c.title == title)


def _raw(path: Path) -> list[dict[str, Any]]:
    data: list[dict[str, Any]] = json.loads(path.read_text(encoding="utf-8"))
    return data


def _msg(node_id: str, conv: Conversation) -> Message:
    return next(m for m in conv.messages if m.node_id == node_id)


def _message(
    role: str,
    text: str | None = None,
    *,
    created: float | None = None,
    content: dict[str, Any] | None = None,
    **extra: Any,
) -> dict[str, Any]:
    body = content if content is not None else {"content_type": "text", "parts": [text or ""]}
    message: dict[str, Any] = {"author": {"role": role}, "content": body, **extra}
    if created is not None:
        message["create_time"] = created
    return message


def _tree(*edges: tuple[str, str | None, dict[str, Any] | None]) -> dict[str, Any]:
    """A mapping from (node_id, parent_id, message) triples; children follow the given order."""
    mapping: dict[str, Any] = {
        nid: {"id": nid, "message": msg, "parent": parent, "children": []}
        for nid, parent, msg in edges
    }
    for nid, parent, _ in edges:
        if parent in mapping:
            mapping[parent]["children"].append(nid)
    return mapping


def _chat(conv_id: str, *turns: str, current: bool = True, **extra: Any) -> dict[str, Any]:
    """root -> hidden system -> alternating user/assistant text turns."""
    edges: list[tuple[str, str | None, dict[str, Any] | None]] = [
        ("root", None, None),
        (
            "sys",
            "root",
            _message("system", "", metadata={"is_visually_hidden_from_conversation": True}),
        ),
    ]
    parent = "sys"
    for i, text in enumerate(turns):
        nid = f"n{i}"
        role = "user" if i % 2 == 0 else "assistant"
        edges.append((nid, parent, _message(role, text, created=1_700_000_000.0 + i)))
        parent = nid
    conv: dict[str, Any] = {"id": conv_id, "title": f"t-{conv_id}", "mapping": _tree(*edges)}
    if current:
        conv["current_node"] = parent
    conv.update(extra)
    return conv


def _write(tmp_path: Path, data: Any, name: str = "conversations.json") -> Path:
    path = tmp_path / name
    path.write_text(json.dumps(data), encoding="ascii")
    return path


def _one(tmp_path: Path, conv: dict[str, Any]) -> Conversation:
    (result,) = list(iter_conversations(_write(tmp_path, [conv])))
    assert isinstance(result, Conversation), result
    return result


class _NonSeekable(io.RawIOBase):
    def __init__(self, data: bytes) -> None:
        self._inner = io.BytesIO(data)

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def readinto(self, buffer: Any) -> int:
        chunk = self._inner.read(len(buffer))
        buffer[: len(chunk)] = chunk
        return len(chunk)


# ---------------------------------------------------------------- real exports


@pytest.mark.needs_shared
def test_both_real_fixtures_import() -> None:
    pk = _convs(PKUPPENS)
    graph = _convs(GRAPH)
    assert len(pk) == 6
    assert len(graph) == 1
    for path, convs in ((PKUPPENS, pk), (GRAPH, graph)):
        raw = _raw(path)
        for index, (conv, item) in enumerate(zip(convs, raw, strict=True)):
            conv_id = item.get("conversation_id") or item["id"]
            assert conv.key == f"chatgpt:{conv_id}"
            assert conv.external_id == conv_id
            assert conv.source == "chatgpt"
            assert conv.provenance.file == str(path)
            assert conv.provenance.position == index
            assert conv.created_at is not None and conv.created_at.tzinfo is not None
            assert conv.created_at.timestamp() == pytest.approx(float(item["create_time"]))
            assert conv.updated_at is not None
            assert conv.unknown_types == {}
            # every node that carries a message is stored, once
            with_message = [nid for nid, node in item["mapping"].items() if node["message"]]
            assert sorted(m.node_id for m in conv.messages) == sorted(with_message)
            assert all(m.key == f"chatgpt:{conv_id}:{m.node_id}" for m in conv.messages)
            # positions on the active path are 0..n-1
            assert [m.position for m in conv.active_messages] == list(
                range(len(conv.active_messages))
            )
            assert all(m.position == -1 for m in conv.messages if not m.on_active_path)
            assert conv.active_messages[-1].node_id == item["current_node"]


@pytest.mark.needs_shared
def test_active_path_follows_current_node_and_keeps_regenerations() -> None:
    convs = _convs(PKUPPENS)
    raw = {item["title"]: item for item in _raw(PKUPPENS)}
    branching = 0
    for conv in convs:
        mapping = raw[conv.title]["mapping"]
        for node_id, node in mapping.items():
            if len(node["children"]) < 2:
                continue
            branching += 1
            kids = [_msg(child, conv) for child in node["children"]]
            assert sum(k.on_active_path for k in kids) == 1
            for index, kid in enumerate(kids):
                assert kid.branch_index == index
                assert kid.parent_id == node_id
                if not kid.on_active_path:
                    assert kid.position == -1
                    assert not kid.for_drafting
                    assert kid not in conv.drafting_messages
    assert branching == 3

    logo = _by_title(convs, "Logo design for Pieterkuppens.net.")
    fork = next(n for n in raw[logo.title]["mapping"].values() if len(n["children"]) == 2)
    first, second = (_msg(c, logo) for c in fork["children"])
    assert first.on_active_path and first.branch_index == 0  # current_node is under children[0]
    assert not second.on_active_path and second.branch_index == 1
    assert second.role == "assistant" and second.channel is Channel.ASSISTANT
    # the regeneration is newer than the active answer: time order would have picked it
    assert second.created_at is not None and first.created_at is not None
    assert second.created_at > first.created_at


@pytest.mark.needs_shared
def test_active_path_is_tree_order_not_time_order() -> None:
    convs = _convs(PKUPPENS)
    raw = {item["title"]: item for item in _raw(PKUPPENS)}
    for title in ("Django Multi-DB Setup", "Intro to Multivariate Stats."):
        conv = _by_title(convs, title)
        mapping = raw[title]["mapping"]
        chain: list[str] = []
        node: str | None = raw[title]["current_node"]
        while node is not None:
            chain.append(node)
            node = mapping[node]["parent"]
        expected = [n for n in reversed(chain) if mapping[n]["message"]]
        assert [m.node_id for m in conv.active_messages] == expected
        times = [m.created_at for m in conv.active_messages]
        assert any(
            a is not None and b is not None and b < a
            for a, b in zip(times, times[1:], strict=False)
        ), "fixture should hold a non-monotonic create_time"


@pytest.mark.needs_shared
def test_browsing_and_tool_content_is_tool_channel() -> None:
    convs = _convs(PKUPPENS)
    seen_types: set[str] = set()
    for conv in convs:
        drafting = {m.key for m in conv.drafting_messages}
        for m in conv.messages:
            if m.content_type in TOOL_TYPES or m.role == "tool":
                seen_types.add(m.content_type)
                assert m.channel is Channel.TOOL, (conv.title, m.node_id)
                assert m.key not in drafting
        assert all(m.channel in (Channel.PERSON, Channel.ASSISTANT) for m in conv.drafting_messages)
        assert all(m.content_type == "text" for m in conv.drafting_messages)
    assert seen_types >= TOOL_TYPES - {"execution_output"}
    oscar = _by_title(convs, "Oscar for Rental Webshop")
    calls = [m for m in oscar.messages if m.content_type == "code"]
    assert calls and all(m.role == "assistant" and m.channel is Channel.TOOL for m in calls)


@pytest.mark.needs_shared
def test_hidden_system_nodes_are_machinery() -> None:
    (graph,) = _convs(GRAPH)
    raw_mapping = _raw(GRAPH)[0]["mapping"]
    hidden = [
        nid
        for nid, node in raw_mapping.items()
        if node["message"]
        and (
            node["message"]["metadata"].get("is_visually_hidden_from_conversation")
            or node["message"]["metadata"].get("is_user_system_message")
        )
    ]
    assert len(hidden) == 2
    for nid in hidden:
        m = _msg(nid, graph)
        assert m.channel is Channel.MACHINERY
        assert m.created_at is None
        assert m.on_active_path and not m.for_drafting
    for conv in _convs(PKUPPENS):
        systems = [m for m in conv.messages if m.role == "system"]
        assert len(systems) == 1 and systems[0].channel is Channel.MACHINERY
        assert systems[0].position == 0


@pytest.mark.needs_shared
def test_code_interpreter_pairs_are_tool() -> None:
    (graph,) = _convs(GRAPH)
    code = [m for m in graph.messages if m.content_type == "code"]
    output = [m for m in graph.messages if m.content_type == "execution_output"]
    assert len(code) == 11 and len(output) == 11
    code_ids = {m.node_id for m in code}
    assert all(m.channel is Channel.TOOL and m.role == "assistant" for m in code)
    assert all(m.channel is Channel.TOOL and m.role == "tool" for m in output)
    assert all(m.parent_id in code_ids for m in output)
    assert all(m.text for m in code)
    drafting = graph.drafting_messages
    assert {m.channel for m in drafting} == {Channel.PERSON, Channel.ASSISTANT}
    assert len([m for m in drafting if m.channel is Channel.PERSON]) == 8


@pytest.mark.needs_shared
def test_text_is_read_exactly_from_real_export() -> None:
    convs = _convs(PKUPPENS)
    raw = {item["title"]: item for item in _raw(PKUPPENS)}
    for conv in convs:
        mapping = raw[conv.title]["mapping"]
        for m in conv.messages:
            content = mapping[m.node_id]["message"]["content"]
            if content["content_type"] == "text":
                assert m.text == "\n".join(content["parts"])
            elif content["content_type"] == "tether_browsing_display":
                assert m.text == content["result"]
            else:
                assert m.text == content["text"]


# ---------------------------------------------------------------- synthetic: times


def test_missing_times_fall_back(tmp_path: Path) -> None:
    conv = _chat("c1", "hello", "hi", "bye")
    conv["mapping"]["n1"]["message"].pop("create_time")
    conv["mapping"]["n2"]["message"]["create_time"] = None
    result = _one(tmp_path, conv)  # no create_time / update_time at all on the conversation
    assert result.created_at is not None and result.created_at.timestamp() == 1_700_000_000.0
    assert result.updated_at is not None and result.updated_at.timestamp() == 1_700_000_000.0
    assert [m.created_at is None for m in result.active_messages] == [True, False, True, True]

    conv["create_time"] = None
    conv["update_time"] = 1_700_000_500.25
    for node in conv["mapping"].values():
        if node["message"]:
            node["message"].pop("create_time", None)
    result = _one(tmp_path, conv)
    assert result.created_at is not None and result.created_at.timestamp() == 1_700_000_500.25
    assert result.updated_at == result.created_at

    conv.pop("update_time")
    result = _one(tmp_path, conv)
    assert result.created_at is None and result.updated_at is None


def test_times_are_utc_floats(tmp_path: Path) -> None:
    conv = _chat("c1", "hello", "hi", create_time=1686317999.717382, update_time=1686324267.0)
    result = _one(tmp_path, conv)
    assert result.created_at is not None
    assert result.created_at.utcoffset() == timedelta(0)
    assert result.created_at.isoformat() == "2023-06-09T13:39:59.717382+00:00"
    assert result.updated_at is not None and result.updated_at.timestamp() == 1686324267.0


# ---------------------------------------------------------------- synthetic: content types


def test_unknown_content_type_is_kept_raw_and_counted(tmp_path: Path) -> None:
    weird = {"content_type": "hologram", "payload": {"x": 1.5, "label": "ホロ"}, "n": [1, 2]}
    conv = _chat("c1", "hello", "hi")
    conv["mapping"]["n0"]["children"] = ["u1", "u2"]
    conv["mapping"]["u1"] = {
        "id": "u1",
        "parent": "n0",
        "children": [],
        "message": _message("assistant", content=weird),
    }
    conv["mapping"]["u2"] = {
        "id": "u2",
        "parent": "n0",
        "children": [],
        "message": _message("assistant", content={"content_type": "hologram"}),
    }
    conv["mapping"]["n0"]["children"].insert(0, "n1")
    result = _one(tmp_path, conv)
    assert result.unknown_types == {"hologram": 2}
    u1 = _msg("u1", result)
    assert u1.raw_type == "hologram"
    assert u1.channel is Channel.MACHINERY
    assert json.loads(u1.text) == weird
    assert u1.text == json.dumps(weird, ensure_ascii=False)
    assert not u1.on_active_path and u1.branch_index == 1
    assert [m.node_id for m in result.drafting_messages] == ["n0", "n1"]


def test_content_types_and_channels(tmp_path: Path) -> None:
    audio = {
        "content_type": "multimodal_text",
        "parts": [
            {"content_type": "image_asset_pointer", "asset_pointer": "file-service://file-1"},
            {"content_type": "audio_transcription", "text": "音声で話した", "direction": "in"},
            "typed",
            {"content_type": "audio_asset_pointer", "asset_pointer": "sediment://x"},
        ],
    }
    nodes: list[tuple[str, dict[str, Any]]] = [
        (
            "ctx",
            _message(
                "user",
                content={
                    "content_type": "user_editable_context",
                    "user_profile": "P",
                    "user_instructions": "I",
                },
                metadata={"is_visually_hidden_from_conversation": True},
            ),
        ),
        (
            "mem",
            _message(
                "user", content={"content_type": "model_editable_context", "model_set_context": "M"}
            ),
        ),
        ("voice", _message("user", content=audio)),
        (
            "think",
            _message(
                "assistant",
                content={
                    "content_type": "thoughts",
                    "thoughts": [{"summary": "s", "content": "t1"}, {"content": "t2"}],
                },
            ),
        ),
        (
            "recap",
            _message(
                "assistant",
                content={"content_type": "reasoning_recap", "content": "Thought for 6s"},
            ),
        ),
        ("analysis", _message("assistant", "hidden reasoning", channel="analysis")),
        ("call", _message("assistant", "search('x')", recipient="web.run")),
        (
            "browse",
            _message(
                "tool",
                content={"content_type": "tether_browsing_display", "result": "R", "summary": ""},
            ),
        ),
        (
            "quote",
            _message("tool", content={"content_type": "tether_quote", "text": "Q", "url": "u"}),
        ),
        (
            "err",
            _message("tool", content={"content_type": "system_error", "text": "E", "name": "x"}),
        ),
        ("tooltext", _message("tool", "tool said")),
        ("final", _message("assistant", "the answer", channel="final", recipient="all")),
        ("norecipient", _message("assistant", "also visible")),
        ("envelope", _message("user", "rebased", metadata={"rebase_developer_message": True})),
        ("noauthor", {"content": {"content_type": "text", "parts": ["x"]}}),
        ("nocontent", {"author": {"role": "user"}}),
    ]
    edges: list[tuple[str, str | None, dict[str, Any] | None]] = [("root", None, None)]
    parent = "root"
    for nid, msg in nodes:
        edges.append((nid, parent, msg))
        parent = nid
    result = _one(tmp_path, {"id": "c", "mapping": _tree(*edges), "current_node": parent})
    got = {m.node_id: (m.channel, m.text) for m in result.messages}
    assert got == {
        "ctx": (Channel.MACHINERY, "P\nI"),
        "mem": (Channel.MACHINERY, "M"),
        "voice": (Channel.PERSON, "音声で話した\ntyped"),
        "think": (Channel.MACHINERY, "t1\nt2"),
        "recap": (Channel.MACHINERY, "Thought for 6s"),
        "analysis": (Channel.MACHINERY, "hidden reasoning"),
        "call": (Channel.TOOL, "search('x')"),
        "browse": (Channel.TOOL, "R"),
        "quote": (Channel.TOOL, "Q"),
        "err": (Channel.TOOL, "E"),
        "tooltext": (Channel.TOOL, "tool said"),
        "final": (Channel.ASSISTANT, "the answer"),
        "norecipient": (Channel.ASSISTANT, "also visible"),
        "envelope": (Channel.MACHINERY, "rebased"),
        "noauthor": (Channel.MACHINERY, "x"),
        "nocontent": (Channel.MACHINERY, "{}"),
    }
    assert result.unknown_types == {"missing": 1}
    assert [m.node_id for m in result.drafting_messages] == ["voice", "final", "norecipient"]


def test_text_parts_are_joined_exactly(tmp_path: Path) -> None:
    conv = _chat("c1", "x")
    conv["mapping"]["n0"]["message"]["content"]["parts"] = ["a ", "", " b\n", {"k": 1}, ""]
    assert _one(tmp_path, conv).active_messages[-1].text == "a \n\n b\n\n"


# ---------------------------------------------------------------- synthetic: exact text


EXACT_TEXTS = [
    "nul\x00inside",
    "lone high \ud800 surrogate",
    "lone low then high \udc00\ud800 adjacent",
    "\udfff",
    "emoji 😀 and 👩\u200d👩\u200d👧 family",
    "crlf\r\nline\rcr\n",
    "  leading and trailing spaces  \t",
    "line sep \u2028 para \u2029 bom \ufeff private \ue200cite\ue201",
    "日本語のテキスト。全角　スペース",
    'quote " backslash \\ and \\ud800 as text',
    "",
]


def _exact_conv(conv_id: str) -> dict[str, Any]:
    return _chat(conv_id, *EXACT_TEXTS, "end")


@pytest.mark.parametrize("seekable", [True, False], ids=["file", "stream"])
def test_text_is_byte_exact(tmp_path: Path, seekable: bool) -> None:
    data = json.dumps([_exact_conv("a"), _exact_conv("b")]).encode("ascii")
    assert b"\\ud800" in data and b"\\udc00\\ud800" in data
    stream: Any = io.BytesIO(data) if seekable else io.BufferedReader(_NonSeekable(data))
    convs = list(iter_conversations_from_stream(stream, "mem.json"))
    assert len(convs) == 2
    for conv in convs:
        assert isinstance(conv, Conversation)
        texts = [m.text for m in conv.active_messages[1:]]
        assert texts == [*EXACT_TEXTS, "end"]
        for m, expected in zip(conv.active_messages[1:], EXACT_TEXTS, strict=False):
            assert m.content_hash == content_hash(expected)


def test_text_is_exact_in_raw_utf8_file(tmp_path: Path) -> None:
    texts = [t for t in EXACT_TEXTS if not any(0xD800 <= ord(c) <= 0xDFFF for c in t)]
    path = tmp_path / "utf8.json"
    path.write_bytes(json.dumps([_chat("c", *texts)], ensure_ascii=False).encode("utf-8"))
    (conv,) = _convs(path)
    assert [m.text for m in conv.active_messages[1:]] == texts


def test_lone_surrogate_on_disk_file(tmp_path: Path) -> None:
    path = _write(tmp_path, [_chat("c", "x\ud800y", "ok")])
    assert b'"x\\ud800y"' in path.read_bytes()
    (conv,) = _convs(path)
    assert conv.active_messages[1].text == "x\ud800y"


# ---------------------------------------------------------------- synthetic: tree shape


def test_missing_current_node_falls_back_to_deepest_newest_leaf(tmp_path: Path) -> None:
    mapping = _tree(
        ("root", None, None),
        ("u1", "root", _message("user", "q", created=10.0)),
        ("a1", "u1", _message("assistant", "first", created=20.0)),
        ("shallow", "u1", _message("assistant", "newest but shallow", created=900.0)),
        ("u2", "a1", _message("user", "q2", created=30.0)),
        ("old", "u2", _message("assistant", "deep, older", created=40.0)),
        ("new", "u2", _message("assistant", "deep, newer", created=50.0)),
    )
    for current in (None, "no-such-node", 42):
        conv: dict[str, Any] = {"id": "c", "mapping": mapping}
        if current is not None:
            conv["current_node"] = current
        result = _one(tmp_path, conv)
        assert [m.node_id for m in result.active_messages] == ["u1", "a1", "u2", "new"]
        assert not _msg("old", result).on_active_path
        assert not _msg("shallow", result).on_active_path
        assert _msg("new", result).branch_index == 1


def test_parent_cycle_does_not_hang(tmp_path: Path) -> None:
    mapping = {
        "a": {"id": "a", "parent": "b", "children": ["b"], "message": _message("user", "A")},
        "b": {"id": "b", "parent": "a", "children": ["a"], "message": _message("assistant", "B")},
    }
    started = time.monotonic()
    for current in ("a", None):
        conv: dict[str, Any] = {"id": "c", "mapping": mapping}
        if current:
            conv["current_node"] = current
        result = _one(tmp_path, conv)
        assert sorted(m.node_id for m in result.messages) == ["a", "b"]
        assert len(result.active_messages) == 2
    assert time.monotonic() - started < 5


def test_dangling_parent_and_orphans(tmp_path: Path) -> None:
    mapping = _tree(
        ("u1", "gone", _message("user", "parent was never exported")),
        ("a1", "u1", _message("assistant", "answer")),
        ("orphan", None, _message("user", "detached")),
    )
    mapping["u1"]["children"].append("missing-child")
    result = _one(tmp_path, {"id": "c", "mapping": mapping, "current_node": "a1"})
    assert [m.node_id for m in result.active_messages] == ["u1", "a1"]
    assert _msg("u1", result).parent_id == "gone"
    assert not _msg("orphan", result).on_active_path


def test_edited_prompt_branch_of_user_children(tmp_path: Path) -> None:
    mapping = _tree(
        ("root", None, None),
        ("u1", "root", _message("user", "first wording")),
        ("a1", "u1", _message("assistant", "a")),
        ("u1b", "root", _message("user", "edited wording")),
        ("a1b", "u1b", _message("assistant", "b")),
    )
    result = _one(tmp_path, {"id": "c", "mapping": mapping, "current_node": "a1b"})
    assert [(m.node_id, m.position) for m in result.active_messages] == [("u1b", 0), ("a1b", 1)]
    assert {m.node_id for m in result.messages if not m.on_active_path} == {"u1", "a1"}
    assert _msg("u1b", result).branch_index == 1


# ---------------------------------------------------------------- damaged input


def test_broken_conversations_are_quarantined(tmp_path: Path) -> None:
    secret = "PRIVATE-TEXT-42"
    items: list[Any] = [
        _chat("ok1", "a", "b"),
        {"title": secret, "mapping": {}},
        {"id": "m1", "title": secret, "mapping": [secret]},
        42,
        {"id": "n1", "mapping": {"x": secret}},
        {"id": "n2", "mapping": {"x": {"id": "x", "message": secret}}},
        _chat("ok2", "c", "d", conversation_id="ok2-cid"),
    ]
    results = list(iter_conversations(_write(tmp_path, items)))
    assert [type(r).__name__ for r in results] == [
        "Conversation",
        "Quarantined",
        "Quarantined",
        "Quarantined",
        "Quarantined",
        "Quarantined",
        "Conversation",
    ]
    quarantined = [r for r in results if isinstance(r, Quarantined)]
    assert [(q.position, q.reason, q.external_id) for q in quarantined] == [
        (1, "missing-id", None),
        (2, "mapping-not-object", "m1"),
        (3, "not-an-object", None),
        (4, "node-not-object", "n1"),
        (5, "message-not-object", "n2"),
    ]
    assert all(secret not in q.model_dump_json() for q in quarantined)
    last = results[-1]
    assert isinstance(last, Conversation) and last.key == "chatgpt:ok2-cid"
    assert last.provenance.position == 6


def test_truncated_file_raises_after_yielding_complete_conversations(tmp_path: Path) -> None:
    secret = "PRIVATE-TRUNCATED-TEXT"
    full = json.dumps([_chat("c0", "a", "b"), _chat("c1", "c", "d"), _chat("c2", secret, "e")])
    path = tmp_path / "cut.json"
    path.write_text(full[: full.index(secret) + 10], encoding="ascii")
    seen: list[str] = []
    with pytest.raises(InputError) as info:
        for conv in iter_conversations(path):
            assert isinstance(conv, Conversation)
            seen.append(conv.external_id)
    assert seen == ["c0", "c1"]
    assert info.value.file == str(path)
    assert info.value.record == "2"
    message = str(info.value)
    assert str(path) in message and "position 2" in message
    assert secret not in message and "PRIVATE" not in message


@pytest.mark.parametrize(
    ("content", "record"),
    [
        (b"", "0"),
        (b'{"id": "x", "mapping": {}}', "0"),
        (b"  \n", "0"),
        (b'[{"id": "a", "mapping": {}}, {"id": "b", "mapping": {}} garbage', "2"),
        (b'[{"id": "a", "mapping": {}},', "1"),
    ],
    ids=["empty", "object", "blank", "garbage", "cut-after-comma"],
)
def test_not_an_array_or_damaged(tmp_path: Path, content: bytes, record: str) -> None:
    path = tmp_path / "bad.json"
    path.write_bytes(content)
    with pytest.raises(InputError) as info:
        list(iter_conversations(path))
    assert info.value.file == str(path) and info.value.record == record


def test_missing_file_is_input_error(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        list(iter_conversations(tmp_path / "nope.json"))
    assert info.value.file == str(tmp_path / "nope.json")


def test_bom_and_empty_array(tmp_path: Path) -> None:
    path = tmp_path / "bom.json"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps([_chat("c", "a")]).encode())
    assert [c.external_id for c in _convs(path)] == ["c"]
    empty = tmp_path / "empty.json"
    empty.write_bytes(b"[]")
    assert list(iter_conversations(empty)) == []


# ---------------------------------------------------------------- registry and sniffing


@pytest.mark.needs_shared
def test_registry_and_iter_source(tmp_path: Path) -> None:
    assert IMPORTERS["chatgpt"] == "importers.chatgpt"
    assert len(list(iter_source("chatgpt", PKUPPENS))) == 6
    with pytest.raises(ConfigError) as info:
        iter_source("myspace", PKUPPENS)
    assert "myspace" in str(info.value) and "chatgpt" in str(info.value)


@pytest.mark.needs_shared
def test_sniff(tmp_path: Path) -> None:
    assert sniff(PKUPPENS) == "chatgpt"
    assert sniff(GRAPH) == "chatgpt"  # pretty-printed
    cases = {
        "object.json": b'{"mapping": {}}',
        "nested.json": b'[{"a": {"mapping": {}}}]',
        "binary.bin": b"\x00\x01\x02",
        "empty.json": b"",
    }
    for name, content in cases.items():
        (tmp_path / name).write_bytes(content)
        assert sniff(tmp_path / name) is None, name
    assert sniff(tmp_path) is None  # a folder of files none of which is an export
    # the other formats are recognised too (more in test_importer_containers.py)
    (tmp_path / "claude.json").write_bytes(b'[{"uuid": "x", "name": "t", "chat_messages": []}]')
    assert sniff(tmp_path / "claude.json") == "claude"
    (tmp_path / "rollout.jsonl").write_bytes(b'{"type": "session_meta", "payload": {}}\n')
    assert sniff(tmp_path / "rollout.jsonl") == "codex"
    big = tmp_path / "big.json"
    big.write_text(json.dumps([_chat("c", "x" * 200_000)]), encoding="ascii")
    assert sniff(big) == "chatgpt"  # the head is cut mid-document: still recognised
    assert sniff(tmp_path / "missing.json") is None


# ---------------------------------------------------------------- memory


def _write_big_export(path: Path, target_bytes: int) -> int:
    turn_text = ("日本語のテキストと English text 😀 " * 60)[:1500]
    count = 0
    with path.open("w", encoding="ascii") as fp:
        fp.write("[")
        while fp.tell() < target_bytes:
            if count:
                fp.write(", ")
            fp.write(json.dumps(_chat(f"conv-{count}", *([turn_text] * 12))))
            count += 1
        fp.write("]")
    return count


def test_streaming_keeps_memory_bounded(tmp_path: Path) -> None:
    path = tmp_path / "big.json"
    count = _write_big_export(path, 30_000_000)
    assert path.stat().st_size >= 30_000_000
    started = time.monotonic()
    tracemalloc.start()
    try:
        seen = 0
        for conv in iter_conversations(path):
            assert isinstance(conv, Conversation)
            seen += 1
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert seen == count
    assert peak < 15_000_000, f"peak traced memory {peak} bytes"
    assert time.monotonic() - started < 10


# ---------------------------------------------------------------- the demo export


def test_demo_export_is_current_and_imports(monkeypatch: pytest.MonkeyPatch) -> None:
    path = DEMO / "conversations.json"
    text = path.read_text(encoding="ascii")
    assert json.dumps(json.loads(text)) == text  # serialised like the real export
    spec = importlib.util.spec_from_file_location("make_demo_export", DEMO / "make_demo_export.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, module)  # dataclasses look their module up
    spec.loader.exec_module(module)
    assert json.dumps(module.build_export()) == text  # the generator reproduces the file

    convs = _convs(path)
    assert 7 <= len(convs) <= 8
    assert sniff(path) == "chatgpt"
    japanese = [c for c in convs if c.title and any("\u3040" <= ch <= "\u9fff" for ch in c.title)]
    assert len(japanese) >= 4 and len(convs) - len(japanese) >= 3
    years = {c.created_at.year for c in convs if c.created_at}
    assert years == {2024, 2025}
    off_path = [m for c in convs for m in c.messages if not m.on_active_path]
    assert len(off_path) == 1 and off_path[0].role == "assistant"
    code_only = [
        c
        for c in convs
        if all(
            m.text.lstrip().startswith("```") for m in c.drafting_messages if m.role == "assistant"
        )
    ]
    assert len(code_only) == 1
    for c in convs:
        assert c.messages[0].channel is Channel.MACHINERY and c.messages[0].created_at is None
        assert c.drafting_messages[0].channel is Channel.PERSON
