"""Who the MCP server says it is, and its answer to ``initialize``, with the standard library
alone: `pmem serve` answers the handshake from here before the ``mcp`` SDK has loaded
(``mcp_server.stdio_front``, ADR 0043). ``tests/test_mcp_start.py`` keeps every constant equal to
what the SDK's server answers, so an upgrade of ``mcp`` that changes the handshake fails a test
instead of drifting."""

from __future__ import annotations

from functools import cache
from typing import Any

NAME = "personal-memory"

#: the revisions the SDK negotiates through ``initialize`` (``mcp_types.version``'s
#: HANDSHAKE_PROTOCOL_VERSIONS), oldest to newest; a client asking for another gets the newest
HANDSHAKE_VERSIONS: tuple[str, ...] = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")

#: what the server offers (the tools, prompts and resources it registers; no subscriptions)
CAPABILITIES: dict[str, Any] = {
    "prompts": {"listChanged": False},
    "resources": {"listChanged": False, "subscribe": False},
    "tools": {"listChanged": False},
}

INSTRUCTIONS = (
    "personal-memory: the owner's long-term memory, built from their AI conversations (often in "
    "Japanese). Start with load_context() for the index, then get_memory(memory_id) for one "
    "record. Use search_memory(query) for topics, proper nouns and phrases (narrow it with kind, "
    "since and until); use recall(query) for what was said at a time ('先週の火曜の夜に何を決め"
    "た？', 'last summer laptop'): each hit names its conversation and the memory drafted from "
    "it, if any. get_profile() gives who the owner is and how that changed, "
    "get_month_summary(month) one month (YYYY-MM) with the memories it cites. current_state() "
    "lists the owner's topic markers (short lines written when the topic changed, newest first); "
    "when the owner says the topic is changing, add_marker(text) records one. "
    "related_memories(text) takes what the owner just said (「最近、気分転換できていない」) and "
    "returns past experiences linked to its concepts, each with why it came up: use them as "
    "material, not as the owner's present wish. Writes: propose_memory(title, kind, canonical_summary) to suggest; "
    "commit_memory(title, kind, canonical_summary, index_summary) to create, with memory_id and "
    "expected_revision (the revision get_memory shows) to append. Evidence must be verbatim "
    "excerpts of the owner's conversations (source_key = the message key recall shows); put your "
    "own statements in stated_facts. Corrections, merges, deletes and publishing are the "
    "owner's: propose_memory(action, memory_id) queues them for confirmation."
)


@cache
def version() -> str:
    """The installed package's version (``serverInfo.version``; empty was issue 30's finding)."""
    from importlib.metadata import PackageNotFoundError
    from importlib.metadata import version as installed

    try:
        return installed("personal-memory")
    except PackageNotFoundError:  # a checkout run without `pip install -e .`
        return "0+unknown"


def initialize_result(params: object) -> dict[str, Any] | None:
    """The result the SDK's server gives ``initialize`` with these params, or None when the
    params are not a well-formed request (the SDK then answers, with its error)."""
    if not isinstance(params, dict):
        return None
    requested = params.get("protocolVersion")
    info = params.get("clientInfo")
    if not isinstance(requested, str) or not isinstance(params.get("capabilities"), dict):
        return None
    if not isinstance(info, dict) or not all(
        isinstance(info.get(k), str) for k in ("name", "version")
    ):
        return None
    negotiated = requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1]
    return {
        "capabilities": CAPABILITIES,
        "instructions": INSTRUCTIONS,
        "protocolVersion": negotiated,
        "serverInfo": {"name": NAME, "version": version()},
    }
