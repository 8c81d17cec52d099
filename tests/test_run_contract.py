"""The backfill run contract (issue 13 item 5, issue 11 items 3, 5 and 7), driven through the CLI
(`pmem backfill` in process, the session's Prefect server) against the local fake vendor server
(tests/fakeservers.py) where a model is involved: the resume command, the estimate, --max-cost,
a vendor's Retry-After, --redraft, the summary object on every exit, a run scoped to its export,
the source sniffed before anything starts, and the summary in words."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from typer.testing import CliRunner

from cli.main import app
from core.models import Conversation
from importers import iter_source
from store.ledger import storable
from tests.conftest import PROJECT, REAL
from tests.fakeservers import VENDOR_ENV, FakeServer, Reply, openai_chat, records_payload

DEMO = PROJECT / "examples" / "demo" / "conversations.json"
SUBSET = REAL / "chatgpt" / "my_chat_gpt-history_download-conversations.subset.json"
CODEX = REAL / "codex" / "rollout-2026-01-02T18-39-45-019b7f94-51b4-7593-922e-ba12b5b73b52.jsonl"
LLM = "openai:gpt-4.1-mini"  # priced: $0.40 / $1.60 per million tokens
CONTRACT = (
    "run_id",
    "status",
    "resume_command",
    "conversations",
    "batches_total",
    "batches_skipped_complete",
    "batches_drafted",
    "drafter_calls",
    "commits",
    "rejected_evidence",
    "input_tokens",
    "output_tokens",
    "cost_usd",
)


@pytest.fixture
def env(pmem_env, prefect_api: str, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for name in VENDOR_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PREFECT_API_URL", prefect_api)
    monkeypatch.setenv("PMEM_EMBEDDER", "none")  # the contract does not need vectors
    monkeypatch.setenv("PMEM_LLM", "extractive")
    monkeypatch.setenv("PMEM_MAX_WAIT_SECONDS", "600")  # restored after --max-wait set it
    return pmem_env


@pytest.fixture
def server(env, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeServer]:
    with FakeServer() as s:
        monkeypatch.setenv("PMEM_OPENAI_BASE_URL", s.url + "/v1")  # keyless: a local server
        yield s


@pytest.fixture
def plain(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same run (flows.pipeline.run_backfill) with its steps run plainly, without Prefect's
    round trips, to keep these tests quick; the dry-run and exit-75 tests run the real flow."""
    from core.settings import get_settings
    from flows import pipeline as pl

    def backfill(
        source: str,
        export_path: str,
        dry_run: bool = False,
        llm: str | None = None,
        embed: bool = True,
        max_wait: float | None = None,
        **options: Any,
    ):
        settings = pl.with_max_wait(get_settings(), max_wait)
        opts, excludes = pl.flow_options(settings, export_path=export_path, **options)
        p = pl.Pipeline.open(settings, llm, options=opts, excludes=excludes)
        try:
            return pl.run_backfill(p, source, export_path, dry_run=dry_run, embed=embed)
        finally:
            p.close()

    monkeypatch.setattr("flows.backfill.backfill", backfill)


def pmem(*args: str):
    return CliRunner().invoke(app, list(args))


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def count(db_url: str, table: str) -> int:
    with psycopg.connect(db_url) as conn:
        return conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]  # noqa: S608 - test table names


def answer(prompt_tokens: int = 120) -> Reply:
    return Reply(
        200,
        openai_chat(
            json.dumps(records_payload(), ensure_ascii=False),
            prompt_tokens=prompt_tokens,
            completion_tokens=0,
        ),
    )


# ---------------------------------------------------------------- input checked before anything


@pytest.mark.needs_shared
def test_a_source_contradicting_the_file_is_refused_before_anything_starts(
    env, plain, db_url, tmp_path
):
    r = pmem("backfill", "--source", "claude", "--export", str(DEMO), "--json")
    assert r.exit_code == 1
    assert "conversations.json looks like a ChatGPT export: use --source chatgpt" in r.stderr
    out = last_json(r.stdout)
    assert out["status"] == "failed" and out["run_id"] is None and "ChatGPT" in out["message"]
    r = pmem("backfill", "--source", "chatgpt", "--export", str(CODEX))
    assert r.exit_code == 1 and "looks like a Codex export: use --source codex" in r.stderr
    assert count(db_url, "source_conversations") == 0 and count(db_url, "backfill_runs") == 0
    # an inconclusive sniff honours --source; 0 conversations matched is an error, not "complete"
    empty = tmp_path / "conversations.json"
    empty.write_text("[]", encoding="utf-8")
    r = pmem("backfill", "--source", "chatgpt", "--export", str(empty), "--json")
    assert (
        r.exit_code == 1
        and "no conversations in conversations.json matched the ChatGPT importer" in r.stderr
    )
    assert last_json(r.stdout)["status"] == "failed"


# ---------------------------------------------------------------- estimate


def test_estimate_keys_no_key_needed_and_nothing_written(env, db_url):
    r = pmem("backfill", "--export", str(DEMO), "--llm", LLM, "--estimate", "--json")
    assert r.exit_code == 0, r.stderr
    est = last_json(r.stdout)
    assert est["estimated_input_tokens"] > 0 and est["estimated_output_tokens"] == 700 * 7
    assert est["estimated_cost_usd"] == pytest.approx(
        (est["estimated_input_tokens"] * 0.40 + est["estimated_output_tokens"] * 1.60) / 1e6,
        abs=1e-6,
    )
    assert est["conversations"] == 8 and est["conversations_to_draft"] == 7 and est["price_as_of"]
    assert "estimate for openai:gpt-4.1-mini: 7 conversations in 2 batches to draft" in r.stderr
    for table in ("source_conversations", "backfill_runs", "batches", "import_runs"):
        assert count(db_url, table) == 0, table  # an estimate writes nothing
    # an unlisted model: --max-cost refused unless --price gives its price
    r = pmem("backfill", "--export", str(DEMO), "--llm", "openai:my-local-model", "--max-cost", "1")
    assert (
        r.exit_code == 1
        and "no known price for openai:my-local-model" in r.stderr
        and "--price" in r.stderr
    )
    r = pmem(
        "backfill",
        "--export",
        str(DEMO),
        "--llm",
        "openai:my-local-model",
        "--max-cost",
        "1",
        "--price",
        "1/2",
        "--estimate",
        "--json",
    )
    est2 = last_json(r.stdout)
    assert est2["estimated_cost_usd"] == pytest.approx(
        (est2["estimated_input_tokens"] * 1 + est2["estimated_output_tokens"] * 2) / 1e6, abs=1e-6
    )
    r = pmem("prices", "--json")
    prices = last_json(r.stdout)
    assert prices["as_of"] == est["price_as_of"]
    assert {"model": LLM, "input_per_million": 0.4, "output_per_million": 1.6} in prices["prices"]


# ---------------------------------------------------------------- a dry run, its words and its resume


def test_dry_run_prints_estimate_words_next_commands_and_resumes_with_nothing_to_do(env):
    r = pmem("backfill", "--export", str(DEMO), "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    s = last_json(r.stdout)
    for key in CONTRACT:
        assert key in s, key
    assert s["status"] == "complete" and s["batches_drafted"] == s["batches_total"] == 2
    assert s["cost_usd"] == 0.0
    assert (
        s["resume_command"]
        == f"pmem backfill --source chatgpt --export {DEMO} --llm extractive --dry-run"
    )
    assert (
        s["make_command"] == f"make backfill SOURCE=chatgpt EXPORT={DEMO} LLM=extractive DRY_RUN=1"
    )
    err = r.stderr
    assert err.index(
        "estimate for extractive:v1: 7 conversations in 2 batches to draft"
    ) < err.index(f"run {s['run_id']}")
    assert "8 conversations (7 kept, 1 dropped by the prefilter); 2 batches (2 drafted now" in err
    assert "{" not in err and "1 batches" not in err  # words, not reprs
    lines = err.strip().splitlines()
    assert lines[-2].startswith(f"review the drafts: make review RUN={s['run_id']}")
    assert f"pmem runs review {s['run_id']}" in lines[-2]
    assert f"make apply RUN={s['run_id']}" in lines[-1]
    assert f"pmem runs apply {s['run_id']}" in lines[-1]
    again = pmem("backfill", "--export", str(DEMO), "--dry-run", "--json")
    assert again.exit_code == 0
    a = last_json(again.stdout)
    assert a["run_id"] == s["run_id"] and a["resumed"] and a["batches_drafted"] == 0
    assert "nothing to do" in again.stderr


# ---------------------------------------------------------------- a run is its export


@pytest.mark.needs_shared
def test_a_run_drafts_only_its_export_and_pending_drafts_the_rest(env, plain, db_url):
    assert pmem("import", str(DEMO), "--no-embed").exit_code == 0  # 8 conversations waiting
    r = pmem("backfill", "--export", str(SUBSET), "--json")
    assert r.exit_code == 0, r.stderr
    s = last_json(r.stdout)
    assert s["conversations"] == 6  # the subset's, not the ledger's 14
    with psycopg.connect(db_url) as conn:
        drafted = {k for (k,) in conn.execute("SELECT conversation_key FROM batch_members")}
    demo = {storable(c.key) for c in iter_source("chatgpt", DEMO) if isinstance(c, Conversation)}
    assert drafted and not drafted & demo
    p = pmem("backfill", "--pending", "--json")
    assert p.exit_code == 0, p.stderr
    ps = last_json(p.stdout)
    assert ps["run_id"] != s["run_id"] and ps["batches_drafted"] == 2 and ps["commits"] == 7
    assert ps["resume_command"].startswith(
        "pmem backfill --source chatgpt --pending --llm extractive"
    )


def test_redraft_starts_a_new_run_and_keeps_the_old_drafts(env, plain, db_url):
    first = last_json(pmem("backfill", "--export", str(DEMO), "--dry-run", "--json").stdout)
    with psycopg.connect(db_url) as conn:
        key = conn.execute(
            "SELECT conversation_key FROM batch_members ORDER BY 1 LIMIT 1"
        ).fetchone()[0]
    runs = Path(env["PMEM_DATA_DIR"]) / "runs"
    old = sorted(p.name for p in (runs / first["run_id"]).rglob("result.json"))
    r = pmem("backfill", "--export", str(DEMO), "--dry-run", "--redraft", key, "--json")
    assert r.exit_code == 0, r.stderr
    s = last_json(r.stdout)
    assert s["run_id"] != first["run_id"] and s["redraft"]
    assert s["batches_total"] == s["batches_drafted"] == s["drafter_calls"] == 1
    assert s["resume_command"].endswith(f"--dry-run --redraft {key}")
    assert (
        sorted(p.name for p in (runs / first["run_id"]).rglob("result.json")) == old
    )  # kept for review
    assert len(list((runs / s["run_id"]).rglob("result.json"))) == 1


# ---------------------------------------------------------------- a vendor's 429 and --max-wait


def test_vendor_429_waits_per_retry_after_then_completes(server: FakeServer, plain, monkeypatch):
    monkeypatch.setenv(
        "PMEM_MAX_CONCURRENCY", "1"
    )  # one batch at a time: its adapter gives up first
    limited = Reply(
        429,
        {"error": {"message": "slow down", "type": "rate_limit_error", "code": None}},
        headers={"retry-after": "1"},
    )
    server.push(
        *[limited] * 4, *[answer()] * 2
    )  # the adapter's 4 attempts, then the run's own wait
    r = pmem("backfill", "--export", str(DEMO), "--llm", LLM, "--yes", "--dry-run", "--json")
    assert r.exit_code == 0, r.stderr
    s = last_json(r.stdout)
    assert s["status"] == "complete" and s["drafter_calls"] == 2 and len(server.requests) == 6
    assert "waiting for the model provider's rate limit (429, Retry-After 1 s) until" in r.stderr


def test_retry_after_past_max_wait_exits_75_with_json_and_the_full_resume_command(
    server: FakeServer,
):
    limited = Reply(
        429,
        {"error": {"message": "slow down", "type": "rate_limit_error", "code": None}},
        headers={"retry-after": "120"},
    )
    server.push(*[limited] * 4)
    r = pmem(
        "backfill",
        "--export",
        str(DEMO),
        "--llm",
        LLM,
        "--yes",
        "--dry-run",
        "--max-wait",
        "1",
        "--max-cost",
        "5",
        "--json",
    )
    assert r.exit_code == 75, r.stderr
    s = last_json(r.stdout)
    assert s["status"] == "stopped" and s["run_id"] and s["batches_drafted"] == 0
    for key in CONTRACT:
        assert key in s, key
    assert s["resume_command"] == (
        f"pmem backfill --source chatgpt --export {DEMO} --llm {LLM} --dry-run "
        "--max-cost 5 --max-wait 1"
    )
    assert f"LLM={LLM}" in s["make_command"] and "MAX_WAIT=1" in s["make_command"]
    assert s["resume_command"] in r.stderr
    assert (s["error"], s["exit_code"]) == ("stopped", 75) and s["resume_command"] in s["hint"]


# ---------------------------------------------------------------- --max-cost


def test_max_cost_stops_on_actual_tokens_across_resumes_and_a_higher_cap_resumes(
    server: FakeServer, plain, monkeypatch
):
    """--max-cost stops before a batch whose estimate would pass the cap. The model bills far
    more than the dry run's estimate (200,000 prompt tokens a request: $0.08 for batches of a
    few thousand tokens), so after the first batch the estimate of the next one is scaled by
    that overrun: $0.08 spent + ~$0.08 would pass $0.10, and the run stops there (the check
    after each batch on the plain estimate let a second one through: $0.16)."""
    monkeypatch.setenv("PMEM_BATCH_MAX_CONVERSATIONS", "2")  # 4 batches
    monkeypatch.setenv("PMEM_MAX_CONCURRENCY", "1")
    server.push(*[answer(prompt_tokens=200_000)] * 4)  # $0.08 each at $0.40 per million
    args = ["backfill", "--export", str(DEMO), "--llm", LLM, "--yes", "--json"]
    r = pmem(*args, "--max-cost", "0.1")
    assert r.exit_code == 4, r.stderr
    s = last_json(r.stdout)
    assert s["status"] == "cost_limit" and s["drafter_calls"] == 1
    assert s["cost_usd"] == pytest.approx(0.08) and s["input_tokens"] == 200_000
    assert s["cost_usd"] <= 0.1 and s["run_cost_usd"] <= 0.1  # the cap held
    assert "its next batch" in s["stop_reason"] and "--max-cost $0.10" in s["stop_reason"]
    assert "--max-cost 0.1" in s["resume_command"] and "raise --max-cost" in r.stderr
    again = last_json(
        pmem(*args, "--max-cost", "0.1").stdout
    )  # what was spent, and how far it passed its estimate, count across resumes
    assert (
        again["status"] == "cost_limit"
        and again["drafter_calls"] == 0
        and again["run_id"] == s["run_id"]
        and again["run_cost_usd"] == pytest.approx(0.08)
    )
    done = pmem(*args, "--max-cost", "1")
    assert done.exit_code == 0, done.stderr
    d = last_json(done.stdout)
    assert d["run_id"] == s["run_id"] and d["resumed"] and d["status"] == "complete"
    assert (
        d["drafter_calls"] == 3 and d["batches_total"] == 3
    )  # the committed one is not planned again
    assert d["run_cost_usd"] == pytest.approx(0.32) and len(server.requests) == 4


# ---------------------------------------------------------------- make backfill, the HTTP estimate


def test_make_backfill_passes_every_option_and_prints_json_only_with_json_1():
    import subprocess

    def dry(*assignments: str) -> str:
        return subprocess.run(
            ["make", "-n", "backfill", *assignments],
            cwd=PROJECT,
            capture_output=True,
            text=True,
            check=True,
        ).stdout

    line = dry(
        "EXPORT=x.zip",
        "LLM=openai:gpt-4.1-mini",
        "DRY_RUN=1",
        "MAX_COST=2",
        "PRICE=0.4/1.6",
        "MAX_WAIT=30",
    )
    for part in (
        '--export "x.zip"',
        "--llm openai:gpt-4.1-mini",
        "--dry-run",
        "--max-cost 2",
        "--price 0.4/1.6",
        "--max-wait 30",
    ):
        assert part in line, part
    assert "--json" not in line and "--source" not in line  # the format is detected
    assert "--json" in dry("EXPORT=x.zip", "JSON=1")
    assert "--pending" in dry("PENDING=1") and "--redraft chatgpt:a chatgpt:b" in dry(
        "REDRAFT=chatgpt:a chatgpt:b"
    )


def test_the_estimate_over_http_says_how_long_the_memory_api_budget_makes_the_commits():
    from types import SimpleNamespace

    from cli.backfill_cmds import estimate_words
    from core.settings import Settings
    from flows import estimate as pl
    from flows import pipeline

    settings = Settings(memory_url="http://127.0.0.1:1", commit_budget="300/600s")
    p = SimpleNamespace(
        settings=settings,
        drafter=SimpleNamespace(model="extractive:v1"),
        options=pipeline.RunOptions(),
    )
    batches = [
        [pl._Candidate(f"chatgpt:{i}", "h", 100, 25, None, None) for i in range(4)]
        for _ in range(100)
    ]
    est = pl._estimate_of(p, batches) | {"model": "extractive:v1"}  # type: ignore[arg-type]
    # 400 conversations: 100 look-ups + 2 requests per commit = 900 requests, 3 windows of 300
    assert est["memory_api_requests"] == 900 and est["memory_api_seconds"] == 1200.0
    assert est["expected_commits"] == 400
    assert "the memory API's budget makes the commits take at least 20 min" in estimate_words(est)


def test_redraft_all_is_the_whole_export_as_the_makefile_spells_it(pmem_env):
    from cli.backfill_cmds import _backfill_args

    def redraft(keys: list[str]) -> Any:
        return _backfill_args(
            keys, "chatgpt", str(DEMO), False, True, None, None, None, None, True, False, None
        )["redraft"]

    assert redraft(["all"]) == [] == redraft([])  # every conversation of the export
    assert redraft(["chatgpt:a"]) == ["chatgpt:a"]
