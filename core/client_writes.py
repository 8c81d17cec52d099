"""What an AI client (MCP ``commit_memory``, ``POST /v1/commits``) may write itself (issue 29,
item 2): no write without evidence, and no rewrite of what a memory says.

An append from a client must bring at least one evidence excerpt (the store checks each is
verbatim and not thin: ``core.textsearch.thin_quote``). The memory's index line is derived
(by the drafter that made the memory, or the owner), never replaced by a client: an append's
``index_summary`` is not applied, and when it would change the current line it becomes a
correction in the owner's queue (``pmem proposals``), with the append's evidence, while the
append itself (its summary added to the record, never shortening it) goes through.
"""

from __future__ import annotations

from core.errors import ConfigError
from core.models import ActionRequest, CommitRequest


def client_append(
    req: CommitRequest, current_index: str
) -> tuple[CommitRequest, ActionRequest | None]:
    """The append to commit, and the correction to queue (None: nothing to correct)."""
    if req.memory_id is None:
        return req, None
    if not req.evidence:
        raise ConfigError(
            "an append needs evidence: at least one verbatim excerpt of the owner's messages",
            hint="pass evidence [{source_key, text}]; your own statements go in stated_facts",
        )
    wanted = " ".join(req.index_summary.split())
    correction = None
    if wanted and wanted != " ".join(current_index.split()):
        correction = ActionRequest(
            action="correction",
            memory_id=req.memory_id,
            expected_revision=req.expected_revision,
            record={"index_summary": req.index_summary},
            evidence=req.evidence,
            note="an append asked to change the index line",
            client=req.client,
        )
    return req.model_copy(update={"index_summary": ""}), correction
