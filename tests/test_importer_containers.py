"""Containers and sniffing: export zips read in place, folders, sharded ChatGPT exports, the
registry, and format detection for files, folders and zips of every source."""

from __future__ import annotations

import io
import json
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from core.errors import ConfigError, InputError
from core.models import Conversation
from importers import IMPORTERS, iter_source, sniff
from importers._common import Quarantined
from importers._jsonarray import has_lone_surrogate_escape
from importers.chatgpt import shard_order
from tests.conftest import REAL as SHARED_REAL

REAL = SHARED_REAL
PKUPPENS = REAL / "chatgpt" / "my_chat_gpt-history_download-conversations.subset.json"
GRAPH = REAL / "chatgpt" / "chatgpt2graph-examples-conversations.json"
CODEX = REAL / "codex" / "rollout-2026-01-02T18-39-45-019b7f94-51b4-7593-922e-ba12b5b73b52.jsonl"
CLAUDE_CODE = REAL / "claude-code" / "session-9eda1058.jsonl"


# ---------------------------------------------------------------- helpers


def _chat(conv_id: str, text: str = "hello") -> dict[str, Any]:
    return {
        "id": conv_id,
        "title": f"t-{conv_id}",
        "create_time": 1_700_000_000.0,
        "current_node": "u",
        "mapping": {
            "root": {"id": "root", "message": None, "parent": None, "children": ["u"]},
            "u": {
                "id": "u",
                "parent": "root",
                "children": [],
                "message": {
                    "author": {"role": "user"},
                    "content": {"content_type": "text", "parts": [text]},
                },
            },
        },
    }


def _array(*convs: dict[str, Any]) -> bytes:
    return json.dumps(list(convs)).encode("ascii")


def _zip(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _keys(items: list[Any]) -> list[str]:
    return [i.key for i in items if isinstance(i, Conversation)]


# ---------------------------------------------------------------- registry


@pytest.mark.needs_shared
def test_registry_names_every_source() -> None:
    assert IMPORTERS == {
        "chatgpt": "importers.chatgpt",
        "claude": "importers.claude",
        "codex": "importers.codex",
        "claude-code": "importers.claude_code",
        "jsonl-log": "importers.jsonl_log",
        "line": "importers.line",
        "telegram": "importers.telegram",
    }
    with pytest.raises(ConfigError) as info:
        iter_source("myspace", PKUPPENS)
    assert "claude-code" in str(info.value)


def test_items_have_what_the_pipeline_reads(tmp_path: Path) -> None:
    path = tmp_path / "conversations.json"
    path.write_bytes(_array(_chat("a"), {"title": "no id"}))  # type: ignore[arg-type]
    items = list(iter_source("chatgpt", path))
    conv, broken = items
    assert isinstance(conv, Conversation)
    assert (
        isinstance(broken, Quarantined) and broken.position == 1 and broken.reason == "missing-id"
    )


# ---------------------------------------------------------------- ChatGPT zips, folders, shards


@pytest.mark.needs_shared
def test_real_export_in_a_zip_is_read_in_place(tmp_path: Path) -> None:
    path = _zip(
        tmp_path / "chatgpt-export.zip",
        {
            "conversations.json": PKUPPENS.read_bytes(),
            "chat.html": b"<html></html>",
            "user.json": b"{}",
            "message_feedback.json": b"[]",
            "file-abc.png": b"\x89PNG",
        },
    )
    assert sniff(path) == "chatgpt"
    items = list(iter_source("chatgpt", path))
    assert len(items) == 6 and all(isinstance(i, Conversation) for i in items)
    plain = [c for c in iter_source("chatgpt", PKUPPENS) if isinstance(c, Conversation)]
    for zipped, direct in zip(items, plain, strict=True):
        assert isinstance(zipped, Conversation)
        assert zipped.provenance.file == str(path)
        assert zipped.provenance.member == "conversations.json"
        assert zipped.provenance.position == direct.provenance.position
        assert zipped.content_hash == direct.content_hash
    assert sorted(p.name for p in tmp_path.iterdir()) == ["chatgpt-export.zip"]  # nothing extracted


def test_shards_are_read_in_numeric_order(tmp_path: Path) -> None:
    members = {
        "conversations-010.json": _array(_chat("c10")),
        "conversations-2.json": _array(_chat("c2a"), _chat("c2b")),
        "conversations-001.json": _array(_chat("c1")),
        "other.json": _array(_chat("ignored")),
    }
    path = _zip(tmp_path / "sharded.zip", members)
    assert sniff(path) == "chatgpt"
    items = list(iter_source("chatgpt", path))
    assert _keys(items) == ["chatgpt:c1", "chatgpt:c2a", "chatgpt:c2b", "chatgpt:c10"]
    members_seen = [i.provenance.member for i in items if isinstance(i, Conversation)]
    assert members_seen == [
        "conversations-001.json",
        "conversations-2.json",
        "conversations-2.json",
        "conversations-010.json",
    ]
    folder = tmp_path / "unzipped"
    folder.mkdir()
    for name, data in members.items():
        (folder / name).write_bytes(data)
    assert sniff(folder) == "chatgpt"
    items = list(iter_source("chatgpt", folder))
    assert _keys(items) == ["chatgpt:c1", "chatgpt:c2a", "chatgpt:c2b", "chatgpt:c10"]
    assert all(i.provenance.member is None for i in items if isinstance(i, Conversation))
    assert shard_order("conversations.json") < shard_order("conversations-000.json")  # type: ignore[operator]
    assert shard_order("notes.json") is None


def test_duplicate_ids_across_shards_keep_the_first(tmp_path: Path) -> None:
    path = _zip(
        tmp_path / "dups.zip",
        {
            "conversations-000.json": _array(_chat("same", "first"), _chat("x")),
            "conversations-001.json": _array(_chat("same", "second")),
        },
    )
    items = list(iter_source("chatgpt", path))
    assert _keys(items) == ["chatgpt:same", "chatgpt:x"]
    (dup,) = (i for i in items if isinstance(i, Quarantined))
    assert (dup.reason, dup.external_id, dup.member, dup.position) == (
        "duplicate-id",
        "same",
        "conversations-001.json",
        0,
    )
    assert "second" not in dup.model_dump_json()


def test_a_damaged_shard_is_quarantined_and_the_rest_imported(tmp_path: Path) -> None:
    secret = "PRIVATE-SHARD-TEXT"
    cut = _array(_chat("ok-in-cut"), _chat("lost", secret))
    path = _zip(
        tmp_path / "damaged.zip",
        {
            "conversations-000.json": _array(_chat("a")),
            "conversations-001.json": cut[: cut.index(secret.encode()) + 4],
            "conversations-002.json": b'{"not": "an array"}',
            "conversations-003.json": _array(_chat("b")),
        },
    )
    items = list(iter_source("chatgpt", path))
    assert _keys(items) == ["chatgpt:a", "chatgpt:ok-in-cut", "chatgpt:b"]
    bad = [i for i in items if isinstance(i, Quarantined)]
    assert [(q.member, q.position, q.reason, q.kind) for q in bad] == [
        ("conversations-001.json", 1, "truncated", "file"),
        ("conversations-002.json", 0, "not-a-json-array", "file"),
    ]
    assert all(secret not in q.model_dump_json() for q in bad)


def test_a_single_damaged_member_raises_naming_zip_and_member(tmp_path: Path) -> None:
    path = _zip(tmp_path / "one.zip", {"conversations.json": _array(_chat("a"))[:-5]})
    with pytest.raises(InputError) as info:
        list(iter_source("chatgpt", path))
    assert info.value.file == f"{path}!conversations.json"
    assert info.value.record == "0"


def test_empty_bad_and_unsafe_zips(tmp_path: Path) -> None:
    empty = _zip(tmp_path / "empty.zip", {})
    with pytest.raises(InputError) as info:
        list(iter_source("chatgpt", empty))
    assert info.value.file == str(empty)
    assert sniff(empty) is None
    fake = tmp_path / "fake.zip"
    fake.write_bytes(b"this is not a zip")
    with pytest.raises(InputError) as info:
        list(iter_source("chatgpt", fake))
    assert info.value.file == str(fake)
    unsafe = _zip(
        tmp_path / "unsafe.zip",
        {
            "../conversations.json": _array(_chat("evil")),
            "export/conversations.json": _array(_chat("good")),
        },
    )
    items = list(iter_source("chatgpt", unsafe))
    assert _keys(items) == ["chatgpt:good"]
    (refused,) = (i for i in items if isinstance(i, Quarantined))
    assert (refused.reason, refused.member, refused.kind) == (
        "unsafe-member-name",
        "../conversations.json",
        "file",
    )
    assert not (tmp_path.parent / "conversations.json").exists()


def test_folder_without_an_export(tmp_path: Path) -> None:
    (tmp_path / "readme.txt").write_text("nothing here")
    for source in ("chatgpt", "claude"):
        with pytest.raises(InputError) as info:
            list(iter_source(source, tmp_path))
        assert info.value.file == str(tmp_path)
    assert list(iter_source("codex", tmp_path)) == []
    assert list(iter_source("claude-code", tmp_path)) == []
    assert sniff(tmp_path) is None


@pytest.mark.needs_shared
def test_wrong_source_for_a_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        list(iter_source("chatgpt", CODEX))
    assert info.value.file == str(CODEX) and info.value.record == "0"
    with pytest.raises(InputError):
        list(iter_source("claude", CLAUDE_CODE))
    with pytest.raises(InputError) as info:
        list(iter_source("codex", PKUPPENS))  # a JSON array, not a rollout
    assert info.value.file == str(PKUPPENS)
    items = list(iter_source("claude-code", CODEX))  # JSONL of the other tool: nothing is lost
    (conv,) = items
    assert isinstance(conv, Conversation) and set(conv.unknown_types) <= {
        "session_meta",
        "response_item",
        "event_msg",
        "turn_context",
    }


# ---------------------------------------------------------------- sniffing


@pytest.mark.needs_shared
def test_sniff_every_format(tmp_path: Path) -> None:
    assert sniff(PKUPPENS) == "chatgpt"
    assert sniff(GRAPH) == "chatgpt"
    assert sniff(CODEX) == "codex"
    assert sniff(CLAUDE_CODE) == "claude-code"
    claude = tmp_path / "conversations.json"
    claude.write_text(json.dumps([{"uuid": "c", "name": "", "chat_messages": []}]))
    assert sniff(claude) == "claude"
    claude_zip = _zip(
        tmp_path / "claude.zip", {"conversations.json": claude.read_bytes(), "users.json": b"[]"}
    )
    assert sniff(claude_zip) == "claude"
    codex_home = tmp_path / ".codex"
    (codex_home / "sessions" / "2026" / "01" / "02").mkdir(parents=True)
    assert sniff(codex_home) == "codex"
    for name, content in {
        "random.jsonl": b'{"hello": "world"}\n',
        "text.txt": b"plain text",
        "array.json": b"[1, 2, 3]",
        "empty.jsonl": b"",
    }.items():
        (tmp_path / name).write_bytes(content)
        assert sniff(tmp_path / name) is None, name
    assert sniff(tmp_path / "does-not-exist.json") is None


def test_sniff_a_long_first_line(tmp_path: Path) -> None:
    meta = {
        "timestamp": "2026-01-01T00:00:00.000Z",
        "type": "session_meta",
        "payload": {"id": "x", "base_instructions": {"text": "y" * 3_000_000}},
    }
    path = tmp_path / "rollout-long.jsonl"
    path.write_text(json.dumps(meta) + "\n")
    assert sniff(path) == "codex"


# ---------------------------------------------------------------- the lone-surrogate pre-scan

_PIECES = [
    "a",
    "\\\\",
    "\\\\\\\\",
    "\\ud83d",
    "\\ude00",
    "\\ud83d\\ude00",
    "\\\\ud800",
    "\\\\\\ud800",
    "\\u65e5",
    "ud800",
    "\\n",
    '\\"',
    "\\uDBFF",
    "\\uDC00",
]


def _has_lone_surrogate(value: str) -> bool:
    for i, ch in enumerate(value):
        code = ord(ch)
        if 0xD800 <= code <= 0xDBFF:
            if not (i + 1 < len(value) and 0xDC00 <= ord(value[i + 1]) <= 0xDFFF):
                return True
        elif 0xDC00 <= code <= 0xDFFF and not (i > 0 and 0xD800 <= ord(value[i - 1]) <= 0xDBFF):
            return True
    return False


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.sampled_from(_PIECES), max_size=16), st.sampled_from([1, 5, 13, 17, 64, 1 << 20])
)
def test_surrogate_prescan_matches_a_full_decode(pieces: list[str], chunk: int) -> None:
    body = '"' + "".join(pieces) + '"'
    try:
        value = json.loads(body)
    except ValueError:
        return  # not a JSON string (a dangling backslash): nothing to compare
    data = ("[1, " + body + "]").encode("ascii")
    found = has_lone_surrogate_escape(io.BytesIO(data), chunk_size=chunk)
    assert found == _has_lone_surrogate(value)
