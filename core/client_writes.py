"""What an AI client (MCP ``commit_memory``, ``POST /v1/commits``) may write itself (issue 29,
item 2): no write without evidence, and no rewrite of what a memory says.

* **index lines are derived, never written by clients**: a client's create has its
  ``index_summary`` dropped, and the store derives the line from the memory's own content
  (``core.sections.derived_index_line``: the first line of the summary that is not the title again);
* **an append adds evidence, not text**: it must bring at least one evidence excerpt (the store
  checks each is verbatim and not thin: ``core.textsearch.thin_quote``); its evidence, stated
  facts, aliases and tags go through, but neither its summary nor its index line is applied.
  When they would change the record, they become one correction in the owner's queue
  (``pmem proposals``): the summary as the store's append would merge it
  (``core.sections.merge_summaries``), the asked-for index line, and the append's evidence.
"""

from __future__ import annotations

from core.errors import ConfigError
from core.models import ActionRequest, CommitRequest
from core.sections import merge_summaries


def client_write(
    req: CommitRequest, current_summary: str = "", current_index: str = ""
) -> tuple[CommitRequest, ActionRequest | None]:
    """The commit to perform, and the correction to queue after it (None: nothing to correct).
    ``current_*``: the memory's summary and index line now (an append's target)."""
    if req.memory_id is None:  # a create: the store derives the index line
        return req.model_copy(update={"index_summary": ""}), None
    if not req.evidence:
        raise ConfigError(
            "an append needs evidence: at least one verbatim excerpt of the owner's messages",
            hint="pass evidence [{source_key, text}]; your own statements go in stated_facts",
        )
    record: dict[str, str] = {}
    add = req.canonical_summary
    if add.strip() and add not in current_summary:
        record["canonical_summary"] = (
            add if current_summary in add else merge_summaries(current_summary, add)
        )
    wanted = " ".join(req.index_summary.split())
    if wanted and wanted != " ".join(current_index.split()):
        record["index_summary"] = req.index_summary
    correction = None
    if record:
        correction = ActionRequest(
            action="correction",
            memory_id=req.memory_id,
            expected_revision=req.expected_revision,
            record=record,
            evidence=req.evidence,
            note="an append asked to change "
            + " and ".join(
                {"canonical_summary": "the summary", "index_summary": "the index line"}[k]
                for k in record
            ),
            client=req.client,
        )
    return req.model_copy(update={"index_summary": "", "canonical_summary": ""}), correction


def after_commit(correction: ActionRequest | None, revision: int) -> ActionRequest | None:
    """The correction as queued once its append committed: against the append's revision."""
    if correction is None:
        return None
    return correction.model_copy(update={"expected_revision": revision})
