"""Who "the person" is in a chat history: the names given by ``--me`` or ``PMEM_ME``.

Chat histories (LINE, Telegram, a person's own JSONL logs) hold several human speakers. The
person whose memory this is is named by configuration: ``PMEM_ME="name1,name2"`` (environment or
``.env``), or ``--me`` on ``pmem import`` (handed over with :func:`using_me` for the length of
the import) and ``pmem backfill`` (which sets ``PMEM_ME`` for its process). Names are compared after Unicode NFKC
normalisation, case folding and trimming, so ``ＴＡＲＯ`` and ``taro `` are one name.

Every other human speaker is *another speaker* (channel ``other``): third-party data, kept and
searchable, never drafted unless the owner asks (``--include-others``), erasable by name
(``pmem forget --speaker NAME``).
"""

from __future__ import annotations

import os
import unicodedata
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

ME_ENV = "PMEM_ME"

_override: ContextVar[frozenset[str] | None] = ContextVar("pmem_me", default=None)


def norm_name(name: str) -> str:
    """A speaker's name as names are compared: NFKC, case-folded, trimmed."""
    return unicodedata.normalize("NFKC", name).casefold().strip()


def parse_names(value: str | Iterable[str] | None) -> frozenset[str]:
    """``"a, b"`` (or a list of such strings) as a set of normalised names; empty ones dropped."""
    if value is None:
        return frozenset()
    items = [value] if isinstance(value, str) else list(value)
    names = (norm_name(part) for item in items for part in item.split(","))
    return frozenset(n for n in names if n)


def me_names(explicit: str | Iterable[str] | None = None) -> frozenset[str]:
    """The person's names: ``explicit`` when given, else those set by :func:`using_me`, else
    ``PMEM_ME`` from the environment; an empty set when none is configured."""
    if explicit is not None:
        return parse_names(explicit)
    current = _override.get()
    if current is not None:
        return current
    value = os.environ.get(ME_ENV)
    if value is None:
        value = _dotenv_me()
    return parse_names(value)


def _dotenv_me() -> str | None:
    """``PMEM_ME`` from the data dir's or the working dir's ``.env`` (the settings' sources)."""
    from core.settings import get_settings

    try:
        return get_settings().me
    except ValueError:  # another setting is invalid: that error is reported where it is used
        return None


@contextmanager
def using_me(value: str | Iterable[str] | None) -> Iterator[frozenset[str]]:
    """Within the block, :func:`me_names` returns these names (``None``: no change)."""
    if value is None:
        yield me_names()
        return
    token = _override.set(parse_names(value))
    try:
        yield _override.get() or frozenset()
    finally:
        _override.reset(token)


def is_me(name: str | None, me: frozenset[str]) -> bool:
    return name is not None and bool(me) and norm_name(name) in me
