"""The error tree. Messages carry ids and counts, never private text.

PmemError
├── ConfigError                 bad settings / missing extra (terminal, user fixable)
├── InputError                  bad export: names the file and the record
├── DatabaseUnavailable         cannot reach / start PostgreSQL
├── StoreError
│   ├── MemoryNotFound
│   ├── StaleRevision           carries the current revision; never last-write-wins
│   ├── TombstonedMemory        a deleted lineage may not come back
│   ├── EvidenceRefused         evidence not verbatim in the ledger, or holding a secret
│   ├── ConfirmationRequired    correction / merge / delete / publish: queued for the owner
│   └── ProposalNotFound        no such pending request or proposal
├── DraftError
│   ├── TransientDraftError     rate limited / unavailable / timeout: retry later
│   └── TerminalDraftError      invalid / truncated / refused output
├── ResultFileError             result.json / run-state.json unreadable or checksum wrong
├── RateLimited                 HTTP 429 from the memory API (transient, carries Retry-After)
├── RateLimitStop               waiting would exceed --max-wait: stop cleanly, resume later
└── CostLimitStop               the next request would pass --max-cost: stop, raise it to resume
"""

from __future__ import annotations


class PmemError(Exception):
    """Base of every error this project raises on purpose."""

    hint: str | None = None

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        if hint is not None:
            self.hint = hint


class ConfigError(PmemError):
    pass


class InputError(PmemError):
    """An export we cannot read. Always names the file and, where known, the record."""

    def __init__(self, message: str, *, file: str, record: str | None = None) -> None:
        where = f"{file}" + (f" (record {record})" if record else "")
        super().__init__(f"{where}: {message}")
        self.file = file
        self.record = record


class DatabaseUnavailable(PmemError):
    pass


class StoreError(PmemError):
    pass


class MemoryNotFound(StoreError):
    def __init__(self, memory_id: str) -> None:
        super().__init__(f"memory {memory_id} does not exist")
        self.memory_id = memory_id


class StaleRevision(StoreError):
    def __init__(self, memory_id: str, expected: int | None, current: int) -> None:
        super().__init__(
            f"memory {memory_id}: expected revision {expected}, current revision is {current}"
        )
        self.memory_id = memory_id
        self.expected = expected
        self.current = current


class TombstonedMemory(StoreError):
    def __init__(self, memory_id: str) -> None:
        super().__init__(f"memory {memory_id} was deleted; its lineage cannot be resurrected")
        self.memory_id = memory_id


class EvidenceRefused(StoreError):
    """An evidence excerpt the store will not keep: ``reason`` is ``unknown-message``,
    ``not-conversation-text``, ``not-verbatim``, ``empty``, ``too-short`` (core.textsearch.thin_quote) or ``secret``. Names the message key,
    never the text."""

    def __init__(self, index: int, source_key: str, reason: str) -> None:
        super().__init__(
            f"evidence {index} (message {source_key}) refused: {reason}",
            hint="evidence must be a verbatim excerpt of a ledger message (person or assistant "
            "text) without a secret; put a statement of your own in stated_facts",
        )
        self.index = index
        self.source_key = source_key
        self.reason = reason


class ConfirmationRequired(StoreError):
    """A correction, merge, delete or publish asked for by an AI client or the HTTP API: not
    performed, queued as a pending request for the owner (``pmem proposals accept ID``)."""

    def __init__(self, action: str, proposal_id: str) -> None:
        super().__init__(
            f"{action} needs the owner's confirmation: queued as request {proposal_id}",
            hint=f"the owner accepts it with `pmem proposals accept {proposal_id}`",
        )
        self.action = action
        self.proposal_id = proposal_id


class ProposalNotFound(StoreError):
    def __init__(self, proposal_id: str) -> None:
        super().__init__(
            f"no proposal or request {proposal_id}", hint="`pmem proposals list` shows them"
        )
        self.proposal_id = proposal_id


class DraftError(PmemError):
    pass


class TransientDraftError(DraftError):
    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class TerminalDraftError(DraftError):
    pass


class ResultFileError(PmemError):
    pass


class RateLimited(PmemError):
    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RateLimitStop(PmemError):
    def __init__(self, message: str, *, run_id: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.run_id = run_id
        self.retry_after = retry_after


class CostLimitStop(PmemError):
    """The run's next model request would take what it spent (over all its resumes) past
    --max-cost: the run stops (status ``cost_limit``, exit 4); finished work is kept."""

    def __init__(self, message: str, *, run_id: str) -> None:
        super().__init__(message)
        self.run_id = run_id


class ConsentRequired(PmemError):
    """Text would go to a remote model the owner has not consented to for this data dir and
    scope. The CLI asks (or takes --yes); without a terminal it refuses with exit code 77."""
