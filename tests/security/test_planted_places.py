"""Issue 10, "Done when": an export with planted secrets goes through the real offline backfill
(as the Prefect flow) and through an LLM backfill against a local fake of the OpenAI API (chat
and embeddings); then every place pmem writes or shows is scanned for any piece of any planted
secret. Zero is allowed only in the ledger (``source_messages``) and the raw-message index
(``message_search``), which keep the export as it is.

The fake model is hostile: it answers with the planted secrets of its batch in the title, the
summary, aliases, tags, stated facts and evidence hints (a model that echoes what it saw
elsewhere), so the write boundary itself is tested, not only the prompt.

A piece is 8 characters of a secret (all 6 of a group of a grouped key; case folded, also after
NFKC) that occur nowhere in the export's text outside the secrets; the guard's own tests check the 5-character rule on the
redacted text itself. ``place_counts`` is what ``bench/planted_secrets.py`` prints as the table.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import time
import unicodedata
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import anyio
import psycopg
import pytest
from psycopg import sql

from tests.fake_embed_servers import openai_embeddings, vector_for
from tests.fakeservers import FakeServer, Recorded, Reply, openai_chat
from tests.security.planted import Planted, corpus

pytestmark = [pytest.mark.db, pytest.mark.prefect]

PIECE = 8
_MARKER = re.compile(r"\[REDACTED:[a-z0-9\-]+\]")
ALLOWED = ("ledger (source_messages, source_conversations)", "raw-message index (message_search)")
T0 = datetime(2024, 5, 7, 12, 0, tzinfo=UTC)
_DECISIONS = [
    ("yamalog のDBは PostgreSQL にした。理由は同期が楽だから。", "ja"),
    ("I decided to deploy yamalog on Fly.io because the free tier is enough.", "en"),
    ("決済は Stripe を使うことにした。手数料が分かりやすいから。", "ja"),
    ("We went with GitHub Actions for CI, since the runners are free for public repos.", "en"),
    ("監視は Sentry に決めた。無料枠で足りるので。", "ja"),
]
_REPLIES = [
    "そのキーはチャットに貼らないで、すぐにローテーションしてください。",
    "Please rotate that credential; it is now part of the chat history.",
]


# ---------------------------------------------------------------- the export


def planted_set() -> list[Planted]:
    return corpus(seed=4242, per_format=1)


def build_export(planted: list[Planted]) -> tuple[list[dict[str, Any]], dict[str, list[str]]]:
    """A ChatGPT export: 3 planted secrets per conversation, mixed with decisions and replies;
    every fifth title holds a secret too. Also returns each conversation's secret parts."""
    convs: list[dict[str, Any]] = []
    parts_of: dict[str, list[str]] = {}
    for n, i in enumerate(range(0, len(planted), 3)):
        group = planted[i : i + 3]
        cid = f"planted-{n:02d}"
        decision, _ = _DECISIONS[n % len(_DECISIONS)]
        turns: list[tuple[str, str]] = [("user", decision)]
        for j, p in enumerate(group):
            turns.extend(zip(p.roles, p.messages, strict=True))
            turns.append(("assistant", _REPLIES[(n + j) % 2]))
        turns.append(("user", "ありがとう、結局その方針で進めることにした。"))
        title = f"デプロイ設定 {group[0].parts[0]}" if n % 5 == 0 else f"設定の相談 {n}"
        convs.append(_chatgpt_conversation(cid, title, turns, T0 + timedelta(days=n)))
        parts_of[f"chatgpt:{cid}"] = [part for p in group for part in p.parts]
    return convs, parts_of


def _chatgpt_conversation(
    cid: str, title: str, turns: list[tuple[str, str]], t0: datetime
) -> dict[str, Any]:
    mapping: dict[str, Any] = {
        "root": {"id": "root", "message": None, "parent": None, "children": ["n0"]}
    }
    for k, (role, text) in enumerate(turns):
        node = f"n{k}"
        mapping[node] = {
            "id": node,
            "parent": "root" if k == 0 else f"n{k - 1}",
            "children": [f"n{k + 1}"] if k + 1 < len(turns) else [],
            "message": {
                "id": node,
                "author": {"role": role},
                "create_time": (t0 + timedelta(minutes=k)).timestamp(),
                "content": {"content_type": "text", "parts": [text]},
            },
        }
    return {
        "id": cid,
        "title": title,
        "create_time": t0.timestamp(),
        "update_time": t0.timestamp(),
        "current_node": f"n{len(turns) - 1}",
        "mapping": mapping,
    }


# ---------------------------------------------------------------- the hostile fake model


class HostileOpenAI(FakeServer):
    """Answers chat completions with records stuffed with its batch's planted secrets, and
    embedding requests with deterministic vectors; records every request."""

    def __init__(self, parts_of: dict[str, list[str]]) -> None:
        super().__init__()
        self.parts_of = parts_of

    def _record_and_next(self, request: Recorded) -> Reply:
        with self._lock:
            self.requests.append(request)
        body = request.json()
        if request.path.endswith("/embeddings"):
            texts = body["input"]
            return Reply(200, openai_embeddings([vector_for(t, 768) for t in texts]))
        prompt = "\n".join(str(m.get("content")) for m in body["messages"])
        records = [
            self._record(key, prompt) for key in re.findall(r"(?m)^key: (chatgpt:\S+)$", prompt)
        ]
        return Reply(200, openai_chat(json.dumps({"records": records}, ensure_ascii=False)))

    def _record(self, conv_key: str, prompt: str) -> dict[str, Any]:
        secrets = self.parts_of.get(conv_key, ["sk-none"])
        first = f"{conv_key}:n0"
        decision = re.search(rf"key: {re.escape(first)} \| [^\n]*\n([^\n]+)", prompt)
        hint = decision.group(1)[:60] if decision else "PostgreSQL"
        leak = secrets[0]
        return {
            "action": "create",
            "title": f"設定 {leak}",
            "memoryKind": "decision",
            "canonicalSummary": f"## 決定\n{hint}\n## メモ\nキーは {leak} と {' '.join(secrets[1:])}",
            "indexSummary": f"{hint[:40]} {leak[:30]}",
            "aliases": [leak.removeprefix("sk-"), leak.lower()[3:20], "設定"],
            "tags": [leak.lower()[:16], "deploy"],
            "occurredAt": None,
            "validFrom": None,
            "statedFacts": [f"The key is {leak}"],
            "inferences": [f"uses {secrets[-1]}"],
            "evidence": [
                {"messageKey": first, "quoteHint": hint},
                {"messageKey": f"{conv_key}:n1", "quoteHint": leak},
            ],
            "sourceConversationKeys": [conv_key],
        }


# ---------------------------------------------------------------- scanning


class Scanner:
    """Counts, per place, the planted secrets of which a piece is found there."""

    def __init__(self, planted: list[Planted], background: str) -> None:
        self.formats = [p.format for p in planted]
        bg = background.casefold()
        bg_nfkc = unicodedata.normalize("NFKC", background).casefold()
        self.pieces: list[set[str]] = []
        for p in planted:
            found: set[str] = set()
            for part in {*p.parts, p.secret}:
                size = min(PIECE, len(part))  # a group of a grouped key: all 6 of it
                for variant in {part.casefold(), unicodedata.normalize("NFKC", part).casefold()}:
                    for k in range(len(variant) - size + 1):
                        piece = variant[k : k + size]
                        if piece not in bg and piece not in bg_nfkc:
                            found.add(piece)
            self.pieces.append(found)
        self.empty = [
            p.format for p, pieces in zip(planted, self.pieces, strict=True) if not pieces
        ]
        assert not self.empty, f"planted secrets without distinctive pieces: {self.empty}"
        self.counts: dict[str, set[int]] = {}

    def scan(self, place: str, texts: Iterable[str]) -> None:
        hits = self.counts.setdefault(place, set())
        for text in texts:
            text = _MARKER.sub(" ", text)  # "[REDACTED:age-secret-key]" names a type, not a value
            folded = text.casefold()
            nfkc = unicodedata.normalize("NFKC", text).casefold() if not text.isascii() else folded
            for i, pieces in enumerate(self.pieces):
                if i not in hits and any(p in folded or p in nfkc for p in pieces):
                    hits.add(i)

    def table(self) -> dict[str, int]:
        return {place: len(hits) for place, hits in self.counts.items()}

    def which(self) -> dict[str, list[str]]:
        """Place -> the formats of the secrets found there (names only, never values)."""
        return {place: sorted(self.formats[i] for i in hits) for place, hits in self.counts.items()}


def _decode_json_text(text: str) -> str:
    """A JSON body as text with its escapes (\\uXXXX, \\/) undone, so no escape hides a piece."""
    try:
        return json.dumps(json.loads(text), ensure_ascii=False)
    except ValueError:
        return text


def scan_database(scanner: Scanner, url: str) -> None:
    """Every table, every row as text; the ledger and the raw-message index on their own."""
    from core.hashing import bytes_text

    named = {
        "memories": "memories",
        "memory_revisions": "revisions",
        "evidence": "evidence",
        "search_projections": "search projections",
        "message_search": ALLOWED[1],
    }
    with psycopg.connect(url) as conn:
        tables = [
            r[0]
            for r in conn.execute(
                "SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' "
                "AND table_type = 'BASE TABLE' ORDER BY 1"
            ).fetchall()
        ]
        assert {"memories", "memory_revisions", "evidence", "source_messages"} <= set(tables)
        for table in tables:
            if table == "source_messages":
                bodies = conn.execute("SELECT body FROM source_messages").fetchall()
                scanner.scan(ALLOWED[0], (bytes_text(bytes(b[0])) for b in bodies))
                continue
            rows = conn.execute(
                sql.SQL("SELECT t::text FROM {} t").format(sql.Identifier(table))
            ).fetchall()
            place = named.get(
                table, ALLOWED[0] if table == "source_conversations" else f"table {table}"
            )
            scanner.scan(place, (r[0] for r in rows))


def scan_files(scanner: Scanner, runs_dir: Path) -> None:
    for f in sorted(p for p in runs_dir.rglob("*") if p.is_file()):
        place = "review files" if f.name.startswith("review.") else "runs/ files"
        scanner.scan(place, [_decode_json_text(f.read_text(encoding="utf-8", errors="replace"))])


def scan_prefect(scanner: Scanner) -> None:
    from prefect.settings import PREFECT_SERVER_DATABASE_CONNECTION_URL

    url = PREFECT_SERVER_DATABASE_CONNECTION_URL.value() or ""
    path = Path(url.split("///", 1)[-1])
    assert path.is_file(), "the Prefect flow ran against its own database"
    with sqlite3.connect(path) as conn:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        texts: list[str] = []
        for table in tables:
            for row in conn.execute(f'SELECT * FROM "{table}"'):  # noqa: S608 - names from sqlite_master
                texts.append(
                    " ".join(
                        v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
                        for v in row
                    )
                )
    assert texts
    scanner.scan("Prefect database", [_decode_json_text(t) for t in texts])


def read_outputs(
    scanner: Scanner, queries: list[str], memory_ids: list[str], conv_keys: list[str]
) -> None:
    """What a person or an AI client sees: CLI search/show/recall/ledger show/export/review,
    and the MCP tools (in process, the same server object `pmem serve` runs)."""
    from typer.testing import CliRunner

    from cli.main import app
    from core.settings import Settings
    from mcp_server.server import build_server
    from mcp_server.service import MemoryService

    runner = CliRunner()
    outputs: list[str] = []
    export_out: list[str] = []

    def cli(*args: str, into: list[str] = outputs) -> None:
        result = runner.invoke(app, list(args), catch_exceptions=False)
        assert result.exit_code == 0, args[0]
        into.append(_decode_json_text(result.stdout.strip().splitlines()[-1]) + result.output)

    for q in queries:
        cli("search", q, "--json", "--no-vectors")
        cli("recall", q, "--json", "--now", "2024-07-01T00:00:00+09:00")
    for mid in memory_ids:
        cli("show", mid, "--history", "--json")
    for key in conv_keys:
        cli("ledger", "show", key, "--json")
    cli("export", into=export_out)
    scanner.scan("export", export_out)

    server = build_server(lambda: MemoryService.open(Settings(), vectors=False))

    async def tools() -> list[str]:
        got = [await server.call_tool("load_context", {})]
        for q in queries:
            got.append(await server.call_tool("search_memory", {"query": q}))
            got.append(
                await server.call_tool("recall", {"query": q, "now": "2024-07-01T00:00:00+09:00"})
            )
        for mid in memory_ids:
            got.append(
                await server.call_tool(
                    "get_memory",
                    {"memory_id": mid, "include_evidence": True, "include_history": True},
                )
            )
            got.append(await server.call_tool("memory_history", {"memory_id": mid}))
        return [repr(g) + json.dumps(_texts(g), ensure_ascii=False) for g in got]

    outputs.extend(anyio.run(tools))
    scanner.scan("search/show/recall/ledger/MCP outputs", outputs)


def _texts(result: Any) -> list[str]:
    blocks = result[0] if isinstance(result, tuple) else result
    return [getattr(b, "text", str(b)) for b in blocks]


def review_outputs(scanner: Scanner, run_ids: list[str]) -> None:
    from typer.testing import CliRunner

    from cli.main import app

    runner = CliRunner()
    for run_id in run_ids:
        result = runner.invoke(app, ["review", run_id, "--json"], catch_exceptions=False)
        assert result.exit_code == 0
        scanner.scan("review files", [_decode_json_text(result.stdout.strip().splitlines()[-1])])


# ---------------------------------------------------------------- the runs


def run_everything(
    tmp_path: Path,
    db_factory: Callable[[], str],
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> tuple[dict[str, int], dict[str, Any]]:
    """Both backfills and every scan; returns the table (place -> planted secrets found there)
    and facts about the runs (for the assertions that the runs did their work)."""
    from core.settings import Settings
    from flows import pipeline as pl
    from flows.backfill import backfill
    from providers._retry import RetryPolicy
    from providers.openai_provider import OpenAIDrafter

    planted = planted_set()
    convs, parts_of = build_export(planted)
    export = tmp_path / "planted-export.json"
    export.write_text(json.dumps(convs, ensure_ascii=False), encoding="utf-8")
    background = (
        "\n".join(
            text
            for c in convs
            for node in c["mapping"].values()
            if node["message"]
            for text in node["message"]["content"]["parts"]
        )
        + "\n"
        + "\n".join(c["title"] for c in convs)
    )
    for p in planted:
        for part in p.parts:
            background = background.replace(part, "\x00")
    scanner = Scanner(planted, background)
    caplog.set_level(logging.DEBUG)
    facts: dict[str, Any] = {"secrets": len(planted), "formats": len({p.format for p in planted})}
    clock = [time.perf_counter()]
    seconds: dict[str, float] = facts.setdefault("seconds", {})

    def lap(name: str) -> None:
        now = time.perf_counter()
        seconds[name] = round(now - clock[0], 1)
        clock[0] = now

    for name in ("OPENAI_API_KEY", "OPENAI_BASE_URL", "PMEM_OPENAI_BASE_URL", "PMEM_LLM"):
        monkeypatch.delenv(name, raising=False)

    # 1. the real offline backfill, as the Prefect flow
    offline_db, offline_dir = db_factory(), tmp_path / "offline"
    monkeypatch.setenv("DATABASE_URL", offline_db)
    monkeypatch.setenv("PMEM_DATA_DIR", str(offline_dir))
    monkeypatch.setenv("PMEM_EMBEDDER", "none")
    state = backfill(source="chatgpt", export_path=str(export), return_state=True)
    offline = state.result()
    facts["offline"] = offline
    lap("offline backfill (Prefect flow)")
    scan_prefect(scanner)
    scan_database(scanner, offline_db)
    scan_files(scanner, offline_dir / "runs")
    with psycopg.connect(offline_db) as conn:
        ids = [r[0] for r in conn.execute("SELECT id FROM memories ORDER BY id").fetchall()]
    lap("offline scans")
    queries = ["キー password トークン", "2024年5月 パスワード", "sk-proj GOCSPX deploy key"]
    # the conversations whose title holds a secret, and those with a secret split in two
    keys = [k for n, k in enumerate(parts_of) if n % 5 == 0]
    keys += [f"chatgpt:planted-{i // 3:02d}" for i, p in enumerate(planted) if len(p.messages) > 1]
    read_outputs(scanner, queries, ids[:8], keys)
    review_outputs(scanner, [offline["run_id"]])
    scan_files(scanner, offline_dir / "runs")
    lap("offline outputs")

    # 2. an LLM backfill (OpenAI chat + remote embeddings) against the hostile fake
    llm_db, llm_dir = db_factory(), tmp_path / "llm"
    monkeypatch.setenv("DATABASE_URL", llm_db)
    monkeypatch.setenv("PMEM_DATA_DIR", str(llm_dir))
    with HostileOpenAI(parts_of) as server:
        monkeypatch.setenv("PMEM_EMBEDDER", "openai:text-embedding-3-small")
        monkeypatch.setenv("PMEM_OPENAI_BASE_URL", server.url + "/v1")
        monkeypatch.setenv("OPENAI_API_KEY", "test-key-not-a-secret")
        p = pl.Pipeline.open(Settings())
        p.drafter = OpenAIDrafter(
            "gpt-test",
            api_key="test-key-not-a-secret",
            base_url=server.url + "/v1",
            retry=RetryPolicy(max_attempts=1),
            sleep=lambda _s: None,
        )
        from flows import consent as cs  # the owner consented to both destinations

        for target in (cs.drafting_target(p.drafter.model, "chatgpt"), cs.embedding_target()):
            assert target is not None
            cs.grant(p.settings, target, [], {})
        try:
            llm = pl.run_backfill(p, "chatgpt", str(export))
        finally:
            p.close()
        facts["llm"] = llm
        lap("LLM backfill")
        chat = [r for r in server.requests if r.path.endswith("/chat/completions")]
        embeds = [r for r in server.requests if r.path.endswith("/embeddings")]
        facts["llm_requests"], facts["embedding_requests"] = len(chat), len(embeds)
        scanner.scan("outbound LLM requests", [r.text + _decode_json_text(r.text) for r in chat])
        scanner.scan(
            "outbound embedding requests", [r.text + _decode_json_text(r.text) for r in embeds]
        )
        scan_database(scanner, llm_db)
        with psycopg.connect(llm_db) as conn:
            ids = [r[0] for r in conn.execute("SELECT id FROM memories ORDER BY id").fetchall()]
        monkeypatch.setenv("PMEM_EMBEDDER", "none")
        read_outputs(scanner, queries, ids[:8], keys)
        review_outputs(scanner, [llm["run_id"]])
        scan_files(scanner, llm_dir / "runs")
        lap("LLM scans and outputs")

    scanner.scan("log records", [r.getMessage() + " " + str(r.args) for r in caplog.records])
    facts["which"] = scanner.which()
    return scanner.table(), facts


@pytest.mark.timeout(900)  # two backfills and a Prefect flow; ~2 min on a quiet machine
def test_no_planted_secret_outside_the_ledger_and_the_raw_index(
    tmp_path, db_factory, monkeypatch, caplog, prefect_api
) -> None:
    table, facts = run_everything(tmp_path, db_factory, monkeypatch, caplog)
    out = os.environ.get("PMEM_PLANTED_TABLE")  # bench/planted_secrets.py reads the table here
    if out:
        keep = ("secrets", "formats", "llm_requests", "embedding_requests", "which", "seconds")
        Path(out).write_text(json.dumps({"table": table, "facts": {k: facts[k] for k in keep}}))
    # the runs did their work: memories from both drafters, requests went out
    assert facts["secrets"] >= 70 and facts["formats"] >= 45
    # an append of the offline drafter to another conversation's memory is a proposal here (no
    # vectors: the append gate's retrieval is closed); its text passes the guard all the same
    offline_work = facts["offline"]["commits"] + facts["offline"]["appends_proposed"]
    assert offline_work >= 10 and facts["llm"]["commits"] >= 10
    assert facts["llm_requests"] >= 5 and facts["embedding_requests"] >= 1
    # the ledger keeps every secret as exported; the raw index has them too
    assert table[ALLOWED[0]] == facts["secrets"]
    assert table[ALLOWED[1]] > 0
    leaks = {
        place: facts["which"][place] for place, n in table.items() if place not in ALLOWED and n
    }
    assert leaks == {}
    for place in (
        "outbound LLM requests",
        "outbound embedding requests",
        "memories",
        "revisions",
        "evidence",
        "search projections",
        "runs/ files",
        "review files",
        "export",
        "search/show/recall/ledger/MCP outputs",
        "log records",
        "Prefect database",
    ):
        assert place in table  # every place was scanned
