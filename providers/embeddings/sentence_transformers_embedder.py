"""A sentence-transformers model the user has locally (``sentence-transformers:<path>``).

An optional extra, not installed by ``make setup`` (it pulls torch): the import is lazy and a
missing package is a ``ConfigError`` with the install line. The model is loaded from the given
path only (``local_files_only``): nothing is downloaded, nothing leaves the machine, so it is a
local embedder and may embed raw messages for ``recall``.

Loading is lazy: the package (torch) and the model load on the first text or the first read of
``dim``, so an import with nothing new to embed never pays for them.
"""

from __future__ import annotations

import importlib.util
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.errors import ConfigError

INSTALL_HINT = "pip install sentence-transformers (it installs torch; a local model path is needed)"


class SentenceTransformersEmbedder:
    local = True

    def __init__(self, path: str, *, device: str | None = None) -> None:
        if importlib.util.find_spec("sentence_transformers") is None:
            raise ConfigError(
                "the sentence-transformers embedder needs the 'sentence-transformers' package, "
                "which is not installed",
                hint=INSTALL_HINT,
            )
        if not Path(path).expanduser().exists():
            raise ConfigError(
                f"no local sentence-transformers model at {path}",
                hint="give the folder of a model you have downloaded: sentence-transformers:/path",
            )
        self.model = f"sentence-transformers:{path}"
        self._path = str(Path(path).expanduser())
        self._device = device
        self._model: Any = None
        self._dim = 0
        self._lock = threading.Lock()

    def _get(self) -> Any:
        with self._lock:
            if self._model is None:
                from sentence_transformers import SentenceTransformer

                model = SentenceTransformer(self._path, device=self._device, local_files_only=True)
                dim = model.get_sentence_embedding_dimension()
                if not dim:
                    raise ConfigError(
                        f"the model at {self._path} does not report its embedding dimension"
                    )
                self._model, self._dim = model, int(dim)
            return self._model

    @property
    def dim(self) -> int:
        self._get()
        return self._dim

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self._get().encode(
            list(texts), normalize_embeddings=True, show_progress_bar=False
        )
        return [[float(x) for x in row] for row in vectors]
