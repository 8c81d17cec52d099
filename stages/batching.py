"""Pack conversations into batches: at most N conversations and C characters each.

Deterministic: the same members in the same order give the same batches and the same
content-derived batch ids. A conversation larger than the character cap gets a batch of its own
(splitting it at message boundaries comes with the drafting issue).
"""

from __future__ import annotations

from core.models import Batch, BatchMember


def pack(
    members: list[BatchMember],
    *,
    max_conversations: int,
    max_chars: int,
    prompt_version: str,
    model: str,
) -> list[Batch]:
    batches: list[Batch] = []
    current: list[BatchMember] = []
    chars = 0

    def flush() -> None:
        nonlocal current, chars
        if current:
            bid = Batch.make_id(current, prompt_version, model)
            batches.append(
                Batch(batch_id=bid, members=current, prompt_version=prompt_version, model=model)
            )
        current, chars = [], 0

    for m in members:
        if current and (len(current) >= max_conversations or chars + m.chars > max_chars):
            flush()
        current.append(m)
        chars += m.chars
    flush()
    return batches
