"""result.json and run-state.json: written atomically (temp file, fsync, rename), with a schema
version and a checksum, so that a half-written or tampered file is never taken as complete.

Where they live (``runs_root``): the local runs folder, or ``PMEM_RUNS_URL`` so that every worker
of a pool run reaches them (docs/scale-out.md): a folder (plain path or ``file://``: written
then renamed, as locally) or any other fsspec URL, through universal-pathlib (``s3://…``,
``gs://…``, ``memory://…``): there a file is one put, which an object store makes visible whole
or not at all; the checksum is checked on every read either way."""

from __future__ import annotations

import contextlib
import json
import os
import re
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import ResultFileError
from core.faults import fault_point
from core.hashing import canonical_json, sha256_hex
from core.private import private_dir
from core.settings import Settings, local_runs_url

RESULT_SCHEMA = "pmem.batch-result/1"
STATE_SCHEMA = "pmem.batch-state/1"
CHUNK_SCHEMA = "pmem.chunk-draft/1"


def runs_root(settings: Settings) -> Path:
    """The folder (or fsspec location) of the backfill's run files: PMEM_RUNS_URL, else the
    runs folder."""
    url = settings.runs_url
    if not url or local_runs_url(url) is not None:
        return settings.runs_dir
    from upath import UPath

    root: Any = UPath(url.strip())  # a pathlib-like object over fsspec
    return root  # type: ignore[no-any-return]


def is_local(path: Path) -> bool:
    """A file on this machine's file system (a shared mount included), not an fsspec store."""
    return getattr(path, "protocol", "") in ("", "file", "local")


def batch_dir(runs_dir: Path, run_id: str, batch_id: str) -> Path:
    return runs_dir / run_id / "batches" / batch_id.replace(":", "-")


def _checksum(body: dict[str, Any]) -> str:
    return "sha256:" + sha256_hex(
        canonical_json({k: v for k, v in body.items() if k != "checksum"})
    )


_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape_lone_surrogates(text: str) -> str:
    """A lone surrogate (kept byte-exact from an export) as its JSON escape: UTF-8 can write it,
    and ``json.loads`` reads back the same string."""
    if text.isascii():
        return text
    return _LONE_SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def write_atomic(path: Path, body: dict[str, Any], schema: str) -> str:
    """Write JSON with schema version and checksum; returns the checksum."""
    doc = {**body, "schema_version": schema}
    doc["checksum"] = _checksum(doc)
    if not is_local(path):  # an object store: one put, visible whole or not at all
        text = json.dumps(doc, ensure_ascii=False, indent=1, sort_keys=True, default=str)
        fault_point(f"write:{path.name}:before-rename")
        fs: Any = getattr(path, "fs")  # noqa: B009 - universal-pathlib's file system
        fs.pipe_file(getattr(path, "path"), _escape_lone_surrogates(text).encode("utf-8"))  # noqa: B009
        return str(doc["checksum"])
    private_dir(path.parent)  # 0700, whatever the umask
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        text = json.dumps(doc, ensure_ascii=False, indent=1, sort_keys=True, default=str)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(_escape_lone_surrogates(text))
            f.flush()
            os.fsync(f.fileno())
        fault_point(f"write:{path.name}:before-rename")
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
    return doc["checksum"]


def read_checked(path: Path, schema: str) -> dict[str, Any]:
    """Read and validate a file written by write_atomic; ResultFileError when not valid."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ResultFileError(f"{path} does not exist") from None
    except (OSError, ValueError) as err:
        raise ResultFileError(f"{path} is not valid JSON ({type(err).__name__})") from None
    if not isinstance(doc, dict) or doc.get("schema_version") != schema:
        raise ResultFileError(f"{path}: unexpected schema version")
    if doc.get("checksum") != _checksum(doc):
        raise ResultFileError(f"{path}: checksum mismatch (incomplete or edited)")
    return doc


def read_result(path: Path, batch_id: str) -> dict[str, Any] | None:
    """A complete, valid result.json for this batch, or None."""
    try:
        doc = read_checked(path, RESULT_SCHEMA)
    except ResultFileError:
        return None
    return doc if doc.get("batch_id") == batch_id and doc.get("complete") is True else None


# ---------------------------------------------------------------- erasure (`pmem forget`)

REVIEW_FILES = ("review.md", "review.html")


@dataclass
class RunFilesScrub:
    """What ``scrub_run_files`` did: paths, and the new checksum of each rewritten result.json
    (by batch folder name) for the batches table."""

    rewritten: list[Path] = field(default_factory=list)
    deleted: list[Path] = field(default_factory=list)
    drafts_removed: int = 0
    checksums: dict[str, str] = field(default_factory=dict)
    remaining: list[Path] = field(default_factory=list)  # files it cannot rewrite that still hit


def _replace_values(value: Any, mapping: dict[str, str]) -> Any:
    if isinstance(value, str):
        return mapping.get(value, value)
    if isinstance(value, list):
        return [_replace_values(v, mapping) for v in value]
    if isinstance(value, dict):
        return {k: _replace_values(v, mapping) for k, v in value.items()}
    return value


def scrub_run_files(
    runs_dir: Path,
    *,
    scrub: Callable[[Any], Any] | None = None,
    text_hit: Callable[[str], bool] | None = None,
    drop_draft: Callable[[str, dict[str, Any], dict[str, Any]], bool] | None = None,
    drop_chunks: frozenset[str] = frozenset(),
    hash_map: dict[str, str] | None = None,
) -> RunFilesScrub:
    """Erase from every file under ``runs/``: ``scrub`` rewrites each string of result.json,
    chunk and run-state files (written again atomically, with a new checksum); ``drop_draft``
    (batch folder, draft, its commit entry) removes whole drafts from result.json; chunk files of
    the batch folders in ``drop_chunks`` are deleted; a run's review.md / review.html are deleted
    when any of its batch files changed or ``text_hit`` finds the text in them (`pmem review`
    writes them again); ``hash_map`` replaces old content hashes. Any other file in which
    ``text_hit`` finds the text, including a half-written temp file, is deleted."""
    out = RunFilesScrub()
    if not runs_dir.is_dir():
        return out
    mapping = hash_map or {}

    def edit(value: Any) -> Any:
        value = _replace_values(value, mapping) if mapping else value
        return scrub(value) if scrub is not None else value

    def hit(path: Path) -> bool:
        if text_hit is None:
            return False
        try:
            return text_hit(path.read_text(encoding="utf-8", errors="replace"))
        except OSError:
            return False

    for run in sorted(p for p in runs_dir.iterdir() if p.is_dir()):
        run_changed = False
        for folder in sorted((run / "batches").glob("*")) if (run / "batches").is_dir() else []:
            if not folder.is_dir():
                continue
            state_path = folder / "run-state.json"
            commits: dict[str, Any] = {}
            with contextlib.suppress(ResultFileError):
                commits = read_checked(state_path, STATE_SCHEMA).get("commits", {})
            for path in sorted(folder.iterdir()):
                if not path.is_file():
                    continue
                name = path.name
                if name.startswith("chunk-") and folder.name in drop_chunks:
                    path.unlink()
                    out.deleted.append(path)
                    run_changed = True
                    continue
                schema = {"result.json": RESULT_SCHEMA, "run-state.json": STATE_SCHEMA}.get(
                    name,
                    CHUNK_SCHEMA if name.startswith("chunk-") and name.endswith(".json") else None,
                )
                try:
                    doc = read_checked(path, schema) if schema else None
                except ResultFileError:
                    doc = None
                if doc is None:
                    if hit(path):
                        path.unlink()
                        out.deleted.append(path)
                        run_changed = True
                    continue
                body = {k: v for k, v in doc.items() if k not in ("checksum", "schema_version")}
                new = dict(body)
                if name == "result.json" and drop_draft is not None:
                    kept = [
                        d
                        for d in body.get("drafts", [])
                        if not drop_draft(
                            folder.name, d, commits.get(d.get("draft", {}).get("draft_id", ""), {})
                        )
                    ]
                    if len(kept) != len(body.get("drafts", [])):
                        out.drafts_removed += len(body.get("drafts", [])) - len(kept)
                        ids = {d.get("draft", {}).get("draft_id") for d in kept}
                        new["drafts"] = kept
                        new["uncommittable"] = [
                            u for u in body.get("uncommittable", []) if u.get("draft_id") in ids
                        ]
                new = edit(new)
                if new != body:
                    checksum = write_atomic(path, new, schema)  # type: ignore[arg-type]
                    out.rewritten.append(path)
                    run_changed = True
                    if name == "result.json":
                        out.checksums[folder.name] = checksum
                elif hit(path):
                    out.remaining.append(path)
        for path in sorted(run.rglob("*")):
            if not path.is_file() or (path.parent.parent == run / "batches"):
                continue  # batch files: handled above
            if (path.name in REVIEW_FILES and path.parent == run and run_changed) or hit(path):
                path.unlink()
                out.deleted.append(path)
    return out
