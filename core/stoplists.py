"""Stop lists of ``stopwordsiso`` (stopwords-iso, a maintained source), read from the package's
data file without importing the package: its import looks its own version up among every
installed distribution, ~40 ms of a fresh `pmem search` (ADR 0027). The lists are the
package's own (`tests/test_query_understand.py` compares them)."""

from __future__ import annotations

import json
from functools import cache, lru_cache
from importlib.util import find_spec
from pathlib import Path


@cache
def stop_words(lang: str) -> frozenset[str]:
    """The stop words of ``lang`` (an ISO 639-1 code); empty for a language the lists lack."""
    return frozenset(_lists().get(lang, ()))


@lru_cache(maxsize=1)
def _lists() -> dict[str, list[str]]:
    spec = find_spec("stopwordsiso")
    for folder in (spec.submodule_search_locations or []) if spec else []:
        data = Path(folder) / "stopwords-iso.json"
        if data.is_file():
            loaded: dict[str, list[str]] = json.loads(data.read_text(encoding="utf-8"))
            return loaded
    import stopwordsiso  # another layout of the package: ask it

    return {lang: sorted(stopwordsiso.stopwords(lang)) for lang in stopwordsiso.langs()}
