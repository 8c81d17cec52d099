"""The error tree. Messages carry ids and counts, never private text.

    PmemError
    ├── ConfigError                 bad settings / missing extra (terminal, user fixable)
    ├── InputError                  bad export: names the file and the record
    ├── DatabaseUnavailable         cannot reach / start PostgreSQL
    ├── StoreError
    │   ├── MemoryNotFound
    │   ├── StaleRevision           carries the current revision; never last-write-wins
    │   └── TombstonedMemory        a deleted lineage may not come back
    ├── DraftError
    │   ├── TransientDraftError     rate limited / unavailable / timeout: retry later
    │   └── TerminalDraftError      invalid / truncated / refused output
    ├── ResultFileError             result.json / run-state.json unreadable or checksum wrong
    ├── RateLimited                 HTTP 429 from the memory API (transient, carries Retry-After)
    └── RateLimitStop               waiting would exceed --max-wait: stop cleanly, resume later
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
