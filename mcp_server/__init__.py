"""The MCP surface over search and records, and the read service it shares with the CLI.

``mcp_server.service.MemoryService`` is the one place where a query becomes a search, a recall
(time expression → range, question words dropped, secrets redacted from the raw text) or an
index for ``load_context``; ``pmem search`` / ``pmem recall`` and the MCP tools both call it.
``mcp_server.server`` builds the MCP server (official ``mcp`` SDK, stdio) and is imported only
by ``pmem serve``: importing this package does not load the SDK.
"""
