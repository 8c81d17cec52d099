"""result.json and run-state.json: written atomically (temp file, fsync, rename), with a schema
version and a checksum, so that a half-written or tampered file is never taken as complete."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

from core.errors import ResultFileError
from core.faults import fault_point
from core.hashing import canonical_json, sha256_hex

RESULT_SCHEMA = "pmem.batch-result/1"
STATE_SCHEMA = "pmem.batch-state/1"
CHUNK_SCHEMA = "pmem.chunk-draft/1"


def batch_dir(runs_dir: Path, run_id: str, batch_id: str) -> Path:
    return runs_dir / run_id / "batches" / batch_id.replace(":", "-")


def _checksum(body: dict[str, Any]) -> str:
    return "sha256:" + sha256_hex(canonical_json({k: v for k, v in body.items() if k != "checksum"}))


def write_atomic(path: Path, body: dict[str, Any], schema: str) -> str:
    """Write JSON with schema version and checksum; returns the checksum."""
    path.parent.mkdir(parents=True, exist_ok=True)
    doc = {**body, "schema_version": schema}
    doc["checksum"] = _checksum(doc)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(doc, f, ensure_ascii=False, indent=1, sort_keys=True, default=str)
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
