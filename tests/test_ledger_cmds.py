"""`pmem ledger list / show / quarantine / keep / drop` against the real samples (read in place)
on the real PostgreSQL, through the Typer app in process."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo
from typer.testing import CliRunner

from cli.main import app
from core.models import Channel, Conversation
from core.secrets import redact
from importers import iter_source
from tests.conftest import REAL

SUBSET = REAL / "chatgpt" / "my_chat_gpt-history_download-conversations.subset.json"
CC_SESSION = REAL / "claude-code" / "session-196820da.jsonl"
CC_STAGE0 = REAL / "claude-code" / "agent-sessions-stage0-claude-small.jsonl"
CODEX = REAL / "codex"
KINDS = {"person", "assistant", "tool", "machinery", "other"}
ITEM_KEYS = {"key", "source", "title", "created_at", "message_count", "kept", "prefilter_reason"}
MESSAGE_KEYS = {"key", "role", "kind", "created_at", "text"}
SECRET = "sk-proj-" + "Ab3dE5gH7jK9mN1pQ3sT" + "5vW7yZ9bC1dF3hJ5kL7n" + "_xY-9z"


def run(*args: str, code: int = 0) -> Any:
    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == code, (result.output, result.exception)
    return result


def last_json(*args: str, code: int = 0) -> dict[str, Any]:
    result = run(*args, code=code)
    return json.loads(result.stdout.strip().splitlines()[-1])


def chatgpt_export(path: Path, convs: list[Any]) -> Path:
    path.write_text(json.dumps(convs), encoding="utf-8")
    return path


def one_conversation(conv_id: str, title: str, texts: list[tuple[str, str]]) -> dict[str, Any]:
    mapping: dict[str, Any] = {
        "root": {"id": "root", "message": None, "parent": None, "children": []}
    }
    parent = "root"
    for i, (role, text) in enumerate(texts):
        node = f"n{i}"
        mapping[parent]["children"].append(node)
        mapping[node] = {
            "id": node,
            "parent": parent,
            "children": [],
            "message": {
                "id": node,
                "author": {"role": role},
                "create_time": 1700000000 + i,
                "content": {"content_type": "text", "parts": [text]},
            },
        }
        parent = node
    return {
        "id": conv_id,
        "title": title,
        "create_time": 1700000000,
        "mapping": mapping,
        "current_node": parent,
    }


@pytest.fixture(scope="module")
def imported(
    pg_admin_url: str, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[None]:
    """One database for the read-only tests of this module, with the real samples imported."""
    name = f"pmem_ledger_cmds_{os.getpid()}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template_db)
            )
        )
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PMEM_DATA_DIR", str(tmp_path_factory.mktemp("ledger-data")))
        mp.setenv("DATABASE_URL", make_conninfo(pg_admin_url, dbname=name))
        for path, source in (
            (SUBSET, "chatgpt"),
            (CC_SESSION, "claude-code"),
            (CC_STAGE0, "claude-code"),
            (CODEX, "codex"),
        ):
            run("import", str(path), "--source", source, "--no-embed")
        yield
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@pytest.mark.needs_shared
def test_list_shows_every_imported_conversation_with_the_prefilter_word(imported) -> None:
    items = last_json("ledger", "list", "--json")["items"]
    assert set(items[0]) >= ITEM_KEYS
    chatgpt = [it for it in items if it["source"] == "chatgpt"]
    expected = {c.key for c in iter_source("chatgpt", SUBSET) if isinstance(c, Conversation)}
    assert {it["key"] for it in chatgpt} == expected and len(expected) == 6
    assert all(it["key"].startswith(f"{it['source']}:") for it in items)
    assert {"Django Multi-DB Setup", "Oscar for Rental Webshop"} <= {it["title"] for it in chatgpt}
    assert all(isinstance(it["kept"], bool) and it["prefilter_reason"] for it in items)
    assert {it["source"] for it in items} == {"chatgpt", "claude-code", "codex"}
    only = last_json("ledger", "list", "--source", "codex", "--json")["items"]
    assert only and {it["source"] for it in only} == {"codex"}
    words = run("ledger", "list").stdout
    assert "Django Multi-DB Setup" in words and "chatgpt:" in words


@pytest.mark.needs_shared
def test_show_gives_the_active_path_in_order(imported) -> None:
    convs = [c for c in iter_source("chatgpt", SUBSET) if isinstance(c, Conversation)]
    conv = next(c for c in convs if len(c.active_messages) < len(c.messages))  # has branches
    out = last_json("ledger", "show", conv.key, "--json")
    assert out["conversation"]["key"] == conv.key and out["conversation"]["title"] == conv.title
    messages = out["messages"]
    assert messages and all(set(m) >= MESSAGE_KEYS for m in messages)
    assert [m["key"] for m in messages] == [m.key for m in conv.active_messages]
    assert [m["text"] for m in messages] == [redact(m.text)[0] for m in conv.active_messages]
    raw = last_json("ledger", "show", conv.key, "--json", "--raw")["messages"]
    assert [m["text"] for m in raw] == [m.text for m in conv.active_messages]
    assert all(isinstance(m["text"], str) and m["kind"] in KINDS for m in messages)
    kinds = [m["kind"] for m in messages]
    assert "person" in kinds and "assistant" in kinds
    missing = run("ledger", "show", "chatgpt:no-such-conversation", code=1)
    assert "no conversation chatgpt:no-such-conversation" in missing.output


def _cc_lines(path: Path) -> dict[str, dict[str, Any]]:
    lines = (
        json.loads(raw) for raw in path.read_text(encoding="utf-8").splitlines() if raw.strip()
    )
    return {rec["uuid"]: rec for rec in lines if isinstance(rec, dict) and "uuid" in rec}


@pytest.mark.needs_shared
@pytest.mark.parametrize("path", [CC_SESSION, CC_STAGE0], ids=lambda p: p.name)
def test_claude_code_person_is_only_what_the_person_typed(imported, path: Path) -> None:
    raw = _cc_lines(path)
    keys = {c.key for c in iter_source("claude-code", path) if isinstance(c, Conversation)}
    injected = (
        "<command-name>",
        "<command-message>",
        "<local-command-stdout>",
        "<system-reminder>",
        "Caveat: The messages below",
        "[Request interrupted",
    )
    meta_seen = person_seen = 0
    for key in keys:
        for m in last_json("ledger", "show", key, "--json", "--raw")["messages"]:
            node = m["key"].rsplit(":", 1)[-1].split("#", 1)[0]
            rec = raw.get(node, {})
            if rec.get("isMeta") or rec.get("isCompactSummary"):
                meta_seen += 1
                assert m["kind"] != "person", m["key"]
            if m["kind"] == "person":
                person_seen += 1
                assert not m["text"].lstrip().startswith(injected), m["key"]
                queued = (
                    rec.get("type") == "attachment"
                    and rec["attachment"]["type"] == "queued_command"
                )
                if rec:  # (the shape fixture's trimmed uuids are not unique)
                    assert rec.get("type") == "user" or queued, m["key"]  # queued: typed while busy
    assert person_seen > 0
    assert meta_seen > 0 or path != CC_SESSION  # that session has an isMeta caveat on its path


@pytest.mark.needs_shared
def test_codex_person_turns_are_counted_once(imported) -> None:
    keys = [it["key"] for it in last_json("ledger", "list", "--source", "codex", "--json")["items"]]
    assert len(keys) >= 3
    person_total = 0
    for key in keys:
        messages = last_json("ledger", "show", key, "--json", "--raw")["messages"]
        person = [m for m in messages if m["kind"] == "person"]
        person_total += len(person)
        for a, b in zip(messages, messages[1:], strict=False):
            # an echo (event_msg user_message) of the turn just recorded is not a second turn
            assert not (a["kind"] == b["kind"] == "person" and a["text"] == b["text"]), b["key"]
        assert not any(
            m["text"].lstrip().startswith(("<environment_context>", "# AGENTS.md")) for m in person
        )
    assert person_total > 0


def test_quarantine_lists_file_record_and_reason(pmem_env, tmp_path: Path) -> None:
    good = one_conversation("c-good", "good", [("user", "hello"), ("assistant", "hi")])
    path = chatgpt_export(tmp_path / "damaged.json", [good, "not an object", {"title": "no id"}])
    run("import", str(path), "--source", "chatgpt", "--no-embed", code=3)
    items = last_json("ledger", "quarantine", "--json")["items"]
    assert {(Path(it["file"]).name, it["record"], it["reason"]) for it in items} == {
        ("damaged.json", 1, "not-an-object"),
        ("damaged.json", 2, "missing-id"),
    }
    words = run("ledger", "quarantine").stdout
    assert "damaged.json" in words and "record 1" in words and "not-an-object" in words


def test_keep_and_drop_override_the_prefilter(pmem_env, tmp_path: Path) -> None:
    conv = one_conversation(
        "c-ov", "override me", [("user", "決めた。東京に引っ越す。"), ("assistant", "了解")]
    )
    run(
        "import",
        str(chatgpt_export(tmp_path / "c.json", [conv])),
        "--source",
        "chatgpt",
        "--no-embed",
    )
    before = last_json("ledger", "show", "chatgpt:c-ov", "--json")["conversation"]
    assert before["kept"] is True and before["prefilter_reason"].startswith("keep:")
    assert last_json("ledger", "drop", "chatgpt:c-ov", "--json")["kept"] is False
    item = last_json("ledger", "list", "--json")["items"][0]
    assert item["kept"] is False and item["prefilter_reason"] == "drop:override"
    run("ledger", "keep", "chatgpt:c-ov")
    item = last_json("ledger", "list", "--json")["items"][0]
    assert item["kept"] is True and item["prefilter_reason"] == "keep:override"
    refused = run("ledger", "drop", "chatgpt:nope", code=1)
    assert "no conversation chatgpt:nope" in refused.output


def test_show_redacts_secrets_unless_raw_and_escapes_the_terminal(pmem_env, tmp_path: Path) -> None:
    texts = [
        ("user", f"my key is {SECRET} keep it"),
        ("assistant", "bell\x07 esc\x1b[2J nul\x00 lone\ud800"),
    ]
    conv = one_conversation("c-sec", f"title with {SECRET} and a nul\x00", texts)
    path = tmp_path / "s.json"
    path.write_bytes(json.dumps([conv]).encode("ascii"))
    run("import", str(path), "--source", "chatgpt", "--no-embed")
    shown = last_json("ledger", "show", "chatgpt:c-sec", "--json")
    assert SECRET not in json.dumps(shown, ensure_ascii=False)
    assert (
        "[REDACTED:" in shown["messages"][0]["text"]
        and "[REDACTED:" in shown["conversation"]["title"]
    )
    assert SECRET not in json.dumps(last_json("ledger", "list", "--json"), ensure_ascii=False)
    raw = last_json("ledger", "show", "chatgpt:c-sec", "--json", "--raw")
    assert SECRET in raw["messages"][0]["text"]
    assert raw["messages"][1]["text"] == texts[1][1]  # exact, NUL and lone surrogate included
    assert raw["conversation"]["title"] == conv["title"]  # the NUL in the title too
    words = run("ledger", "show", "chatgpt:c-sec").stdout
    assert "\x1b" not in words and "\x07" not in words and "\x00" not in words
    assert "\\x1b[2J" in words and "\\x07" in words and "\\ud800" in words
    assert SECRET not in words
    assert Channel.PERSON.value in words
