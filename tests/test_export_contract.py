"""The `pmem export` shape is a contract (issue 13): other tools and backups read it. One JSON
object per line; a header first; then `type: memory` rows (id, title, canonical_summary,
index_summary, …), `type: revision` rows and `type: evidence` rows (memory_id, source_key as
`<source>:<conversation_id>:<message_id>`, text)."""

from __future__ import annotations

import json
import re

from typer.testing import CliRunner

from cli.main import app
from core.settings import Settings
from flows import pipeline as pl
from store.export import EXPORT_SCHEMA
from tests.conftest import PROJECT

DEMO = PROJECT / "examples" / "demo" / "conversations.json"
SOURCE_KEY = re.compile(r"^(chatgpt|claude|codex|claude-code):[^:]+:[^:]+$")


def test_export_is_one_object_per_line_header_then_memories_revisions_evidence(
    pmem_env, tmp_path, monkeypatch
):
    monkeypatch.setenv("PMEM_EMBEDDER", "none")  # the shape does not need vectors
    p = pl.Pipeline.open(Settings())
    try:
        assert pl.run_backfill(p, "chatgpt", str(DEMO))["commits"] > 0
    finally:
        p.close()
    out = tmp_path / "memory.jsonl"
    r = CliRunner().invoke(app, ["export", "--out", str(out)])
    assert r.exit_code == 0, r.stderr
    lines = out.read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines]  # every line is one JSON object
    assert all(isinstance(row, dict) for row in rows)
    assert rows[0] == {"type": "header", "schema_version": EXPORT_SCHEMA}
    kinds = [row["type"] for row in rows[1:]]
    from store.export import DERIVED

    order = ["memory", "revision", "evidence", "tombstone", "proposal"]
    order += [kind for _table, kind, _order, _left_out in DERIVED] + ["marker"]
    assert kinds == sorted(kinds, key=order.index)
    assert "experience" in kinds  # the backfill's concept memory is in the backup too
    memories = [r for r in rows if r["type"] == "memory"]
    revisions = [r for r in rows if r["type"] == "revision"]
    evidence = [r for r in rows if r["type"] == "evidence"]
    assert memories and revisions and evidence
    ids = {m["id"] for m in memories}
    for m in memories:
        for key in (
            "id",
            "title",
            "canonical_summary",
            "index_summary",
            "kind",
            "aliases",
            "tags",
            "current_revision",
        ):
            assert key in m, key
        assert m["title"] and m["canonical_summary"] and m["index_summary"]
    for rev in revisions:
        assert rev["memory_id"] in ids and rev["revision"] >= 1 and isinstance(rev["record"], dict)
    for e in evidence:
        assert e["memory_id"] in ids and e["text"]
        assert SOURCE_KEY.match(e["source_key"]), e["source_key"]
        assert e["source_key"].startswith("chatgpt:")
    # deterministic: a second export is byte-identical
    again = CliRunner().invoke(app, ["export"])
    assert again.stdout.splitlines() == lines
