"""A model's structured answer as one JSON object, or a terminal error that names no content."""

from __future__ import annotations

import json
from typing import Any

from core.errors import TerminalDraftError


def json_object(text: str, provider: str = "the model") -> dict[str, Any]:
    try:
        value = json.loads(text)
    except ValueError:
        raise TerminalDraftError(f"{provider}: the answer is not JSON") from None
    if not isinstance(value, dict):
        raise TerminalDraftError(f"{provider}: the answer is not a JSON object")
    return value
