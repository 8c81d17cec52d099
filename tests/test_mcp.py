"""The MCP server end to end with the SDK's own stdio client: spawn `python -m cli.main serve`
against the test database, list the tools, call each one; the schemas a client sees (every
parameter described, enums, annotations, snake_case names with the old camelCase ones accepted),
errors as one sentence with the fix, and instructions that name only parameters that exist."""

from __future__ import annotations

import os
import re
import sys
from datetime import UTC, datetime
from typing import Any, get_args

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from core.models import Channel, Conversation, Message, Provenance
from importers import iter_source
from store.ledger import Ledger
from tests.conftest import PROJECT

DEMO = PROJECT / "examples" / "demo" / "conversations.json"
# a real message of the demo export (evidence must be a verbatim excerpt of the ledger)
DB_MESSAGE = "chatgpt:c9682f7b-30c1-5d1f-accf-43a21ad090da:aaa2fb37-abc8-55f5-8638-1cdd019722c1"
TOOLS = {
    "load_context",
    "search_memory",
    "get_memory",
    "recall",
    "propose_memory",
    "commit_memory",
    "memory_history",
    "get_profile",
    "get_month_summary",
    "current_state",
    "add_marker",
    "related_memories",
}


def text_of(result: Any) -> str:
    assert result.structured_content is None  # plain text content only
    assert [c.type for c in result.content] == ["text"]
    return result.content[0].text


async def session_run(env: dict[str, str], body, errlog_path: str = os.devnull) -> Any:
    """Run ``body(session, initialize_result)`` against a spawned `pmem serve`."""
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "cli.main", "serve"], env=env, cwd=str(PROJECT)
    )
    with open(errlog_path, "w") as errlog:
        async with (
            stdio_client(params, errlog=errlog) as (read, write),
            ClientSession(read, write) as session,
        ):
            init = await session.initialize()
            return await body(session, init)


def branched() -> Conversation:
    """A ChatGPT conversation whose answer was regenerated: the first answer is a branch that
    was not taken."""
    when = datetime(2024, 5, 10, 9, 0, tzinfo=UTC)

    def msg(node: str, role: str, text: str, pos: int, on_path: bool = True) -> Message:
        return Message(
            key=f"chatgpt:mcp-branch:{node}",
            node_id=node,
            role=role,
            content_type="text",
            channel=Channel.PERSON if role == "user" else Channel.ASSISTANT,
            text=text,
            created_at=when,
            position=pos if on_path else -1,
            on_active_path=on_path,
        )

    return Conversation(
        key="chatgpt:mcp-branch",
        source="chatgpt",
        external_id="mcp-branch",
        title="週末の温泉旅行",
        created_at=when,
        provenance=Provenance(file="synthetic", position=0),
        messages=[
            msg("n1", "user", "週末の温泉旅行、箱根と草津で迷ってる。", 0),
            msg("n2", "assistant", "温泉旅行なら草津をおすすめします。", 1, on_path=False),
            msg("n3", "assistant", "温泉旅行なら箱根が近くて便利です。", 1),
        ],
    )


@pytest.fixture
def server_env(pmem_env: dict[str, str], db) -> dict[str, str]:
    ledger = Ledger(db)
    imp = ledger.start_import("chatgpt", str(DEMO))
    for conv in iter_source("chatgpt", DEMO):
        assert isinstance(conv, Conversation)
        ledger.upsert(conv, imp)
    ledger.upsert(branched(), ledger.start_import("chatgpt", "synthetic"))
    env = dict(os.environ)
    env.update(pmem_env)
    env.update({"PMEM_EMBEDDER": "none", "PMEM_TZ": "UTC"})
    return env


def test_every_tool_over_stdio(server_env):
    async def body(s: ClientSession, init: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        listed = await s.list_tools()
        out["tools"] = {t.name: t for t in listed.tools}
        out["empty_context"] = text_of(await s.call_tool("load_context", {}))
        created = text_of(
            await s.call_tool(
                "commit_memory",
                {
                    "title": "家計簿アプリのデータベース選定",
                    "kind": "decision",
                    "canonical_summary": "PostgreSQL を選んだ。JSONB で明細を保存できるから。",
                    "index_summary": "家計簿アプリに PostgreSQL を採用",
                    "aliases": ["household budget app database"],
                    "evidence": [
                        {"source_key": DB_MESSAGE, "text": "データベースは PostgreSQL にします"}
                    ],
                },
            )
        )
        out["created"] = created
        memory_id = created.split("memory ")[1].split(" ")[0]
        out["id"] = memory_id
        out["context_one"] = text_of(await s.call_tool("load_context", {}))
        out["search"] = text_of(await s.call_tool("search_memory", {"query": "データベース選定"}))
        out["search_kind"] = text_of(
            await s.call_tool("search_memory", {"query": "データベース", "kind": "project"})
        )
        out["get"] = text_of(await s.call_tool("get_memory", {"memory_id": memory_id}))
        out["get_ev"] = text_of(
            await s.call_tool("get_memory", {"memory_id": memory_id, "include_evidence": True})
        )
        out["append"] = text_of(
            await s.call_tool(
                "commit_memory",
                {
                    "memory_id": memory_id,
                    "expected_revision": 1,
                    "title": "家計簿アプリのデータベース選定",
                    "kind": "decision",
                    "canonical_summary": "バックアップは pg_dump を毎晩。",
                    "index_summary": "家計簿アプリに PostgreSQL を採用、毎晩バックアップ",
                    # an append needs evidence (issue 29); its index line goes to the queue
                    "evidence": [{"source_key": DB_MESSAGE, "text": "PostgreSQL にします"}],
                },
            )
        )
        stale = await s.call_tool(
            "commit_memory",
            {
                "memory_id": memory_id,
                "expectedRevision": 1,
                "title": "古い版",
                "kind": "decision",
                "canonical_summary": "古い",
                "index_summary": "古い",
                "evidence": [{"source_key": DB_MESSAGE, "text": "PostgreSQL にします"}],
            },
        )
        out["stale"] = (stale.is_error, text_of(stale))
        # the old camelCase names are still accepted: expectedRevision above, idempotencyKey here
        keyed = {
            "title": "メモ",
            "kind": "other",
            "canonical_summary": "メモ",
            "index_summary": "メモ",
        }
        out["keyed"] = text_of(
            await s.call_tool("commit_memory", {**keyed, "idempotency_key": "k-1"})
        )
        out["replayed"] = text_of(
            await s.call_tool("commit_memory", {**keyed, "idempotencyKey": "k-1"})
        )
        out["history"] = text_of(await s.call_tool("memory_history", {"memory_id": memory_id}))
        out["proposal"] = text_of(
            await s.call_tool(
                "propose_memory",
                {
                    "title": "新しい案",
                    "kind": "other",
                    "canonical_summary": "提案",
                    "index_summary": "提案",
                },
            )
        )
        out["recall"] = text_of(
            await s.call_tool(
                "recall",
                {
                    "query": "先週の水曜の午後に何を決めた？",
                    "now": "2025-01-29T12:00:00+00:00",
                },
            )
        )
        out["recall_db"] = text_of(
            await s.call_tool("recall", {"query": "データベース PostgreSQL"})
        )
        out["recall_trip"] = text_of(await s.call_tool("recall", {"query": "温泉旅行"}))
        out["recall_branches"] = text_of(
            await s.call_tool("recall", {"query": "温泉旅行", "include_branches": True})
        )
        out["context"] = text_of(await s.call_tool("load_context", {"limit": 10}))
        bad_since = await s.call_tool(
            "search_memory", {"query": "データベース", "since": "そのうち"}
        )
        out["bad_since"] = (bad_since.is_error, text_of(bad_since))
        bad_now = await s.call_tool("recall", {"query": "昨日", "now": "きのう"})
        out["bad_now"] = (bad_now.is_error, text_of(bad_now))
        missing = await s.call_tool("get_memory", {"memory_id": "mem_nope"})
        out["missing"] = (missing.is_error, text_of(missing))
        return out

    out = anyio.run(session_run, server_env, body)
    assert set(out["tools"]) == TOOLS
    for tool in out["tools"].values():
        assert tool.output_schema is None and tool.description  # no structured output declared
    assert "expected_revision" in out["tools"]["commit_memory"].input_schema["properties"]

    assert out["empty_context"].startswith("# memory index: 0 memories")
    assert out["context_one"].startswith("# memory index: 1 memory, newest first")
    assert out["created"].startswith("created: memory mem_") and "revision 1" in out["created"]
    assert out["id"] in out["search"] and "lexical #1" in out["search"]
    for label in (
        "empty_context",
        "context",
        "search",
        "get",
        "get_ev",
        "recall",
        "recall_db",
    ):  # they name what exists
        assert misnamed(out[label], out["tools"], calls_only=True) == [], label
    assert "get_memory(memory_id)" in out["search"] and "get_memory(memory_id)" in out["context"]
    assert out["search_kind"].startswith("no memories match")
    assert "revision: 1" in out["get"] and "PostgreSQL を選んだ" in out["get"]
    assert "PostgreSQL にします" not in out["get"] and "PostgreSQL にします" in out["get_ev"]
    assert out["append"].startswith("appended:") and "revision 2" in out["append"]
    is_error, stale_text = out["stale"]
    assert is_error and "stale revision" in stale_text and "revision 2" in stale_text
    assert "expected_revision 2" in stale_text and "\n" not in stale_text
    assert out["keyed"].startswith("created:") and out["replayed"].startswith(
        "already committed (replayed)"
    )
    assert (
        "2 revisions" in out["history"]
        and "append" in out["history"]
        and "client mcp" in out["history"]
    )
    assert out["proposal"].startswith("proposal ") and "nothing was committed" in out["proposal"]
    assert (
        "range: 2025-01-22T12:00:00+00:00" in out["recall"]
        and "転職することに決めました" in out["recall"]
    )
    # every hit names its message (usable as evidence) and its conversation
    hit_lines = [line for line in out["recall"].splitlines() if line.startswith("- #")]
    conv_lines = [
        line for line in out["recall"].splitlines() if line.startswith("  conversation: ")
    ]
    assert hit_lines and len(conv_lines) == len(hit_lines)
    assert all("message chatgpt:" in line for line in hit_lines)
    assert all("(chatgpt:" in line for line in conv_lines)
    # a hit names the memory drafted from its conversation (the database decision cites it)
    assert f"  memory: {out['id']} 家計簿アプリのデータベース選定" in out["recall_db"]
    assert "memory:" not in out["recall_trip"]  # nothing was drafted from the trip conversation
    # branches not taken are left out unless include_branches, and marked when shown
    assert (
        "chatgpt:mcp-branch:n3" in out["recall_trip"]
        and "chatgpt:mcp-branch:n2" not in out["recall_trip"]
    )
    assert (
        "1 message on branches not taken left out (include_branches=true shows them)"
        in out["recall_trip"]
    )
    assert "message chatgpt:mcp-branch:n2 (" in out["recall_branches"]
    branch_line = next(
        x for x in out["recall_branches"].splitlines() if "chatgpt:mcp-branch:n2" in x
    )
    assert branch_line.endswith("[branch not taken]")
    assert not next(
        x for x in out["recall_branches"].splitlines() if "chatgpt:mcp-branch:n3" in x
    ).endswith("taken]")
    assert out["id"] in out["context"] and "2 memories" in out["context"]
    assert out["bad_since"] == (
        True,
        "since is not a date or a time expression: use e.g. 2024-03-05, "
        "2024-03, 先月 or last summer, or leave it out.",
    )
    assert out["bad_now"][0] and out["bad_now"][1].startswith("now must be an ISO 8601 time")
    is_error, missing = out["missing"]
    assert (
        is_error
        and missing
        == "memory mem_nope does not exist; find the id with load_context or search_memory."
    )


# ---------------------------------------------------------------- schemas, errors, instructions

READS = {
    "load_context",
    "search_memory",
    "get_memory",
    "recall",
    "memory_history",
    "get_profile",
    "get_month_summary",
    "current_state",
    "related_memories",
}
CAMEL = re.compile(r"\b[a-z]+[A-Z]\w*")
CALL = re.compile(r"\b([a-z][a-z_]*)\(([^)]*)\)")
SNAKE = re.compile(r"\b[a-z]+(?:_[a-z]+)+\b")


def properties(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """Every property of a tool's input schema, the nested ones ($defs) included."""
    props = dict(schema.get("properties", {}))
    for definition in schema.get("$defs", {}).values():
        props.update(definition.get("properties", {}))
    return props


def enum_of(prop: dict[str, Any]) -> list[str] | None:
    for option in [prop, *prop.get("anyOf", [])]:
        if "enum" in option:
            return option["enum"]
    return None


def misnamed(text: str, tools: dict[str, Any], *, calls_only: bool = False) -> list[str]:
    """What a text names that does not exist: a tool call with a parameter the tool lacks,
    a call of a tool that does not exist, a snake_case name that is neither a tool nor any
    tool's parameter (not checked with ``calls_only``: a tool's output quotes memories)."""
    wrong: list[str] = []
    names = set(tools) | {p for t in tools.values() for p in properties(t.input_schema)}
    for tool, args in CALL.findall(text):
        if tool not in tools:
            if "_" in tool:
                wrong.append(f"{tool}(…): no such tool")
            continue
        for arg in filter(None, (a.split("=")[0].strip() for a in args.split(","))):
            if arg not in tools[tool].input_schema.get("properties", {}):
                wrong.append(f"{tool}({arg}): no such parameter")
    if not calls_only:
        wrong += [
            f"{name}: not a tool or parameter" for name in SNAKE.findall(text) if name not in names
        ]
    return wrong


@pytest.fixture
def bare_env(tmp_path) -> dict[str, str]:
    """A server with no reachable database: listing tools and refusing bad arguments must not
    need one."""
    env = dict(os.environ)
    env.update(
        {
            "PMEM_DATA_DIR": str(tmp_path / "data"),
            "DATABASE_URL": "postgresql://pmem@127.0.0.1:9/none",
            "PMEM_EMBEDDER": "none",
            "PMEM_TZ": "UTC",
            "PREFECT_SERVER_ANALYTICS_ENABLED": "false",
        }
    )
    return env


def test_schemas_errors_and_instructions_over_stdio(bare_env, tmp_path):
    bad_calls = {
        "banana": ("search_memory", {"query": "x", "kind": "banana"}),
        "commit_banana": (
            "commit_memory",
            {"title": "t", "kind": "banana", "canonical_summary": "c", "index_summary": "i"},
        ),
        "action": ("propose_memory", {"action": "erase", "memory_id": "mem_x"}),
        "missing": ("get_memory", {}),
        "unknown": ("get_memory", {"id": "mem_x"}),
        "camel_guess": ("get_memory", {"memoryId": "mem_x"}),
        "type": ("load_context", {"limit": "many"}),
        "alias_type": (
            "commit_memory",
            {
                "title": "t",
                "kind": "decision",
                "canonical_summary": "c",
                "index_summary": "i",
                "memory_id": "mem_x",
                "expectedRevision": "latest",
            },
        ),
        "evidence": (
            "commit_memory",
            {
                "title": "t",
                "kind": "decision",
                "canonical_summary": "c",
                "index_summary": "i",
                "evidence": [{"source_key": "k"}],
            },
        ),
        "no_tool": ("forget_everything", {}),
        "pattern": ("get_month_summary", {"month": "March"}),
    }

    async def body(s: ClientSession, init: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"instructions": init.instructions}
        out["tools"] = {t.name: t for t in (await s.list_tools()).tools}
        for label, (tool, args) in bad_calls.items():
            result = await s.call_tool(tool, args)
            out[label] = (result.is_error, result.content[0].text)
        return out

    log = tmp_path / "server.log"
    out = anyio.run(session_run, bare_env, body, str(log))
    tools = out["tools"]
    assert set(tools) == TOOLS

    # every parameter described, snake_case, the main parameters unchanged
    for tool in tools.values():
        assert tool.description and tool.title and tool.annotations is not None
        for name, prop in properties(tool.input_schema).items():
            assert re.fullmatch(r"[a-z][a-z0-9_]*", name), (tool.name, name)
            assert prop.get("description"), f"{tool.name}.{name} has no description"
    assert tools["search_memory"].input_schema["required"] == ["query"]
    assert tools["recall"].input_schema["required"] == ["query"]
    assert tools["get_memory"].input_schema["required"] == ["memory_id"]
    assert not tools["load_context"].input_schema.get("required")

    # enums where the values are fixed
    kinds = ["episode", "decision", "project", "preference", "lesson", "profile", "other"]
    for name in ("search_memory", "commit_memory", "propose_memory"):
        assert enum_of(tools[name].input_schema["properties"]["kind"]) == kinds
    assert enum_of(tools["propose_memory"].input_schema["properties"]["action"]) == [
        "create",
        "append",
        "correction",
        "merge",
        "delete",
        "publish",
    ]

    # read-only / destructive / idempotent annotations
    for name, tool in tools.items():
        a = tool.annotations
        assert a.read_only_hint is (name in READS), name
        assert a.destructive_hint is False and a.open_world_hint is False, name
        assert a.idempotent_hint is True, name  # reads; a queued request or a commit replays

    # errors: one plain sentence with the fix, no pydantic dump, no link
    for label in bad_calls:
        is_error, text = out[label]
        assert is_error, label
        assert "\n" not in text and "http" not in text and "pydantic" not in text.lower(), (
            label,
            text,
        )
        assert "Error executing tool" not in text and "validation error" not in text.lower(), (
            label,
            text,
        )
        assert text.endswith(".") and text.count(". ") == 0, (label, text)
    assert out["banana"][1] == (
        "kind 'banana' is not allowed: use one of 'episode', 'decision', 'project', 'preference', "
        "'lesson', 'profile' or 'other', or leave it out."
    )
    assert "kind 'banana' is not allowed" in out["commit_banana"][1]
    assert "or leave it out" not in out["commit_banana"][1]  # commit_memory needs a kind
    assert "action 'erase' is not allowed" in out["action"][1] and "'delete'" in out["action"][1]
    assert out["missing"][1].startswith(
        "get_memory needs memory_id: call it again with memory_id set to "
    )
    assert out["unknown"][1].startswith(
        "get_memory has no parameter 'id': its parameters are memory_id,"
    )
    assert "did you mean memory_id?" in out["camel_guess"][1]
    assert out["type"][1] == "limit must be a whole number such as 10."
    assert out["alias_type"][1] == "expected_revision must be a whole number such as 10."
    assert out["evidence"][1].startswith("commit_memory needs evidence[0].text")
    assert (
        out["pattern"][1]
        == "month is not in the expected form: use the month, YYYY-MM, in the owner's calendar."
    )
    assert out["no_tool"][1].startswith(
        "there is no tool 'forget_everything': the tools are load_context"
    )
    # the server logged field names only, never the rejected values
    assert "banana" not in log.read_text() and "latest" not in log.read_text()

    # the instructions (and every description) name only tools and parameters that exist
    instructions = out["instructions"]
    for call in (
        "load_context()",
        "get_memory(memory_id)",
        "search_memory(query)",
        "recall(query)",
    ):
        assert call in instructions
    assert misnamed(instructions, tools) == []
    assert CAMEL.findall(instructions) == []
    for tool in tools.values():
        assert misnamed(tool.description, tools) == [], tool.name
        for prop in properties(tool.input_schema).values():
            assert misnamed(prop["description"], tools) == [], tool.name
    # the checker itself catches the old mistake
    assert misnamed("then get_memory(id) for a record", tools) == [
        "get_memory(id): no such parameter"
    ]
    assert misnamed("pass expected_revisions", tools) == [
        "expected_revisions: not a tool or parameter"
    ]


def test_memory_kinds_match_the_drafter():
    from mcp_server.server import MemoryKind
    from prompts.case_record import MemoryKind as DrafterKind

    assert get_args(MemoryKind) == get_args(DrafterKind)
