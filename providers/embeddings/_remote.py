"""What both remote embedders (OpenAI, Gemini) do the same way: the secret guard on every text,
batches of the vendor's size, the one retry layer, and a final failure as an EmbeddingError."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial

from core.errors import DraftError, TransientDraftError
from providers._retry import RetryPolicy, call_with_retry
from providers.embeddings import EmbeddingError


def embed_remote(
    texts: Sequence[str],
    *,
    model: str,
    max_chars: int,
    batch_size: int,
    call: Callable[[list[str]], list[list[float]]],
    retry: RetryPolicy,
    sleep: Callable[[float], None],
) -> list[list[float]]:
    # the secret guard: nothing it flags leaves the machine. The texts are scanned together
    # (a value found in one is redacted in all) and whole: cut after redaction, so a key at the
    # cut cannot leave as an unrecognisable head.
    from core.secrets import redact_messages

    clean = [t[:max_chars] or " " for t in redact_messages(list(texts))]
    out: list[list[float]] = []
    for i in range(0, len(clean), batch_size):
        batch = clean[i : i + batch_size]
        try:
            out.extend(
                call_with_retry(partial(call, batch), policy=retry, sleep=sleep, label=model)
            )
        except DraftError as err:
            raise EmbeddingError(
                f"embedding with {model} failed: {err}",
                transient=isinstance(err, TransientDraftError),
                hint="run `pmem reindex` again later; embedded memories are kept",
            ) from None
    return out
