"""A sentence-transformers model the user has locally (``sentence-transformers:<path>``).

An optional extra, not installed by ``make setup`` (it pulls torch): the import is lazy and a
missing package is a ``ConfigError`` with the install line. The model is loaded from the given
path only (``local_files_only``): nothing is downloaded, nothing leaves the machine, so it is a
local embedder and may embed raw messages for ``recall``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from core.errors import ConfigError

INSTALL_HINT = "pip install sentence-transformers (it installs torch; a local model path is needed)"


class SentenceTransformersEmbedder:
    local = True

    def __init__(self, path: str, *, device: str | None = None) -> None:
        try:
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:
            raise ConfigError(
                "the sentence-transformers embedder needs the 'sentence-transformers' package, "
                "which is not installed",
                hint=INSTALL_HINT,
            ) from exc
        if not Path(path).expanduser().exists():
            raise ConfigError(
                f"no local sentence-transformers model at {path}",
                hint="give the folder of a model you have downloaded: sentence-transformers:/path",
            )
        self._model: Any = SentenceTransformer(
            str(Path(path).expanduser()), device=device, local_files_only=True
        )
        self.model = f"sentence-transformers:{path}"
        dim = self._model.get_sentence_embedding_dimension()
        if not dim:
            raise ConfigError(f"the model at {path} does not report its embedding dimension")
        self.dim = int(dim)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        vectors = self._model.encode(list(texts), normalize_embeddings=True, show_progress_bar=False)
        return [[float(x) for x in row] for row in vectors]
