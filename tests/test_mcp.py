"""The MCP server end to end with the SDK's own stdio client: spawn `python -m cli.main serve`
against the test database, list the tools, call each one."""

from __future__ import annotations

import os
import sys
from typing import Any

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from core.models import Conversation
from importers import iter_source
from store.ledger import Ledger
from tests.conftest import PROJECT

DEMO = PROJECT / "examples" / "demo" / "conversations.json"
# a real message of the demo export (evidence must be a verbatim excerpt of the ledger)
DB_MESSAGE = "chatgpt:c9682f7b-30c1-5d1f-accf-43a21ad090da:aaa2fb37-abc8-55f5-8638-1cdd019722c1"
TOOLS = {
    "load_context", "search_memory", "get_memory", "recall", "propose_memory", "commit_memory",
    "memory_history",
}  # fmt: skip


def text_of(result: Any) -> str:
    assert result.structured_content is None  # plain text content only
    assert [c.type for c in result.content] == ["text"]
    return result.content[0].text


async def session_run(env: dict[str, str], body) -> Any:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "cli.main", "serve"], env=env, cwd=str(PROJECT)
    )
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            return await body(session)


@pytest.fixture
def server_env(pmem_env: dict[str, str], db) -> dict[str, str]:
    ledger = Ledger(db)
    imp = ledger.start_import("chatgpt", str(DEMO))
    for conv in iter_source("chatgpt", DEMO):
        assert isinstance(conv, Conversation)
        ledger.upsert(conv, imp)
    env = dict(os.environ)
    env.update(pmem_env)
    env.update({"PMEM_EMBEDDER": "none", "PMEM_TZ": "UTC"})
    return env


def test_every_tool_over_stdio(server_env):
    async def body(s: ClientSession) -> dict[str, Any]:
        out: dict[str, Any] = {}
        listed = await s.list_tools()
        out["tools"] = {t.name: t for t in listed.tools}
        out["empty_context"] = text_of(await s.call_tool("load_context", {}))
        created = text_of(await s.call_tool("commit_memory", {
            "title": "家計簿アプリのデータベース選定", "kind": "decision",
            "canonical_summary": "PostgreSQL を選んだ。JSONB で明細を保存できるから。",
            "index_summary": "家計簿アプリに PostgreSQL を採用",
            "aliases": ["household budget app database"],
            "evidence": [{"source_key": DB_MESSAGE, "text": "データベースは PostgreSQL にします"}],
        }))  # fmt: skip
        out["created"] = created
        memory_id = created.split("memory ")[1].split(" ")[0]
        out["id"] = memory_id
        out["search"] = text_of(await s.call_tool("search_memory", {"query": "データベース選定"}))
        out["search_kind"] = text_of(await s.call_tool("search_memory", {"query": "データベース", "kind": "plan"}))
        out["get"] = text_of(await s.call_tool("get_memory", {"memory_id": memory_id}))
        out["get_ev"] = text_of(await s.call_tool("get_memory", {"memory_id": memory_id, "include_evidence": True}))
        out["append"] = text_of(await s.call_tool("commit_memory", {
            "memory_id": memory_id, "expectedRevision": 1, "title": "家計簿アプリのデータベース選定",
            "kind": "decision", "canonical_summary": "バックアップは pg_dump を毎晩。",
            "index_summary": "家計簿アプリに PostgreSQL を採用、毎晩バックアップ",
        }))  # fmt: skip
        stale = await s.call_tool("commit_memory", {
            "memory_id": memory_id, "expectedRevision": 1, "title": "古い版", "kind": "decision",
            "canonical_summary": "古い", "index_summary": "古い",
        })  # fmt: skip
        out["stale"] = (stale.is_error, text_of(stale))
        out["history"] = text_of(await s.call_tool("memory_history", {"memory_id": memory_id}))
        out["proposal"] = text_of(await s.call_tool("propose_memory", {
            "title": "新しい案", "kind": "idea", "canonical_summary": "提案", "index_summary": "提案",
        }))  # fmt: skip
        out["recall"] = text_of(await s.call_tool("recall", {
            "query": "先週の水曜の午後に何を決めた？", "now": "2025-01-29T12:00:00+00:00",
        }))  # fmt: skip
        out["context"] = text_of(await s.call_tool("load_context", {"limit": 10}))
        missing = await s.call_tool("get_memory", {"memory_id": "mem_nope"})
        out["missing"] = (missing.is_error, text_of(missing))
        return out

    out = anyio.run(session_run, server_env, body)
    assert set(out["tools"]) == TOOLS
    for tool in out["tools"].values():
        assert tool.output_schema is None and tool.description  # no structured output declared
    assert "expectedRevision" in out["tools"]["commit_memory"].input_schema["properties"]

    assert out["empty_context"].startswith("# memory index: 0 memories")
    assert out["created"].startswith("created: memory mem_") and "revision 1" in out["created"]
    assert out["id"] in out["search"] and "lexical #1" in out["search"]
    assert out["search_kind"].startswith("no memories match")
    assert "revision: 1" in out["get"] and "PostgreSQL を選んだ" in out["get"]
    assert "PostgreSQL にします" not in out["get"] and "PostgreSQL にします" in out["get_ev"]
    assert out["append"].startswith("appended:") and "revision 2" in out["append"]
    is_error, stale_text = out["stale"]
    assert is_error and "stale revision" in stale_text and "revision 2" in stale_text
    assert "2 revisions" in out["history"] and "append" in out["history"] and "client mcp" in out["history"]
    assert out["proposal"].startswith("proposal ") and "nothing was committed" in out["proposal"]
    assert "range: 2025-01-22T12:00:00+00:00" in out["recall"] and "転職することに決めました" in out["recall"]
    assert out["id"] in out["context"] and "1 memories" in out["context"]
    assert out["missing"][0] and "does not exist" in out["missing"][1]
