"""Consent before text leaves the machine (issue 10, item 7): `--estimate` shows what a remote
drafter would get (no API key needed, nothing sent); a first run with a remote model asks, and
refuses without a terminal unless `--yes` (exit 77); the consent is remembered per data dir,
provider and source, with its exclusion rules, so later runs (the monthly re-import) need no
question and keep the exclusions; `--exclude` keeps conversations out of every request body of
a local fake OpenAI server, and the JSON summary counts them."""

from __future__ import annotations

import json
import stat
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.app import EXIT_NO_CONSENT
from cli.main import app
from core.errors import ConfigError, ConsentRequired
from core.settings import Settings
from flows import consent as cs
from flows import pipeline as pl
from providers.fake import ScriptedDrafter
from stages.exclude import excluded_by, parse_rule, parse_rules
from store.runs import to_batch
from tests.conftest import PROJECT
from tests.fakeservers import VENDOR_ENV, FakeServer, Reply, openai_chat, records_payload

DEMO = PROJECT / "examples" / "demo" / "conversations.json"
LLM = "openai:gpt-test"
LAPTOP = "chatgpt:cfeb4889-03ee-5e82-a637-c103d5f89688"
BACKUP = "chatgpt:52c0598d-40f8-51a6-beef-1573938122af"
EXCLUDES = ["title:*バックアップ*", f"key:{LAPTOP}", "before:2024-03-01"]
# a fragment of each excluded conversation's first message, and of one that is sent
EXCLUDED_TEXT = [
    "外付けHDD 1台に手動",
    "My 2017 MacBook Pro is finally dying",
    "勤務先が品川に変わる",
]
SENT_TEXT = "来年の春に海外のカンファレンス"


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as s:
        yield s


@pytest.fixture
def remote_env(pmem_env, server: FakeServer, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A remote (OpenAI-protocol) drafter that is really the local fake server; no vectors."""
    for name in VENDOR_ENV:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PMEM_OPENAI_BASE_URL", server.url + "/v1")
    monkeypatch.setenv("PMEM_EMBEDDER", "none")
    monkeypatch.setenv("PMEM_LLM", "extractive")
    return pmem_env


def invoke(*args: str, stdin: str | None = None):
    return CliRunner().invoke(app, list(args), input=stdin)


def last_json(stdout: str) -> dict:
    return json.loads(stdout.strip().splitlines()[-1])


def sent_text(server: FakeServer) -> str:
    """Every request body, JSON-decoded (the SDK escapes non-ASCII)."""
    return "\n".join(json.dumps(r.json(), ensure_ascii=False) for r in server.requests)


# ---------------------------------------------------------------- the rule syntax


def at(day: str) -> datetime:
    return datetime.fromisoformat(day).replace(tzinfo=UTC)


def test_exclude_rules_match_keys_titles_and_dates() -> None:
    rules = parse_rules(["key:claude:*", "title:*病院*", "before:2024-01-01", "after:2025-06-30"])
    assert excluded_by(rules, "claude:abc", "x", None) == "key:claude:*"
    assert excluded_by(rules, "chatgpt:abc", "大学病院の予約", None) == "title:*病院*"
    assert excluded_by(rules, "chatgpt:abc", "ＡＢＣ病院", None) == "title:*病院*"
    assert excluded_by(rules, "chatgpt:a", "t", at("2023-12-31T23:59:59")) == "before:2024-01-01"
    assert excluded_by(rules, "chatgpt:a", "t", at("2024-01-01T00:00:00")) is None
    assert (
        excluded_by(rules, "chatgpt:a", "t", at("2025-06-30T23:59:59")) is None
    )  # that day is kept
    assert excluded_by(rules, "chatgpt:a", "t", at("2025-07-01T00:00:00")) == "after:2025-06-30"
    assert excluded_by(rules, "chatgpt:a", None, None) is None  # undated: no date rule matches
    title = parse_rule("title:Tax ?eturn*")
    assert title.matches("k", "tax return 2024", None) and not title.matches(
        "k", "my tax return", None
    )
    span = parse_rule("range:2024-04-01..2024-04-30")
    assert span.matches("k", None, at("2024-04-30T23:00:00")) and not span.matches(
        "k", None, at("2024-05-01T00:00:00")
    )
    assert parse_rule("range:..2024-01-31").matches("k", None, at("2020-01-01T00:00:00"))
    exact = parse_rule("before:2024-05-01T09:00+09:00")
    assert exact.matches("k", None, at("2024-04-30T23:59:00")) and not exact.matches(
        "k", None, at("2024-05-01T00:00:00")
    )


@pytest.mark.parametrize(
    "bad",
    [
        "病院",
        "subject:x",
        "title:",
        "before:yesterday",
        "range:2024-05-01",
        "range:2024-05-02..2024-05-01",
        "after:2024-05-01T09:00",
    ],
)
def test_a_wrong_rule_is_a_clear_error(bad: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_rule(bad)
    assert repr(bad) in str(err.value)


def test_a_wrong_rule_exits_1_naming_the_syntax(remote_env) -> None:
    r = invoke("backfill", "--export", str(DEMO), "--exclude", "subject:x", "--estimate")
    assert r.exit_code == 1 and "key:KEY-OR-GLOB" in r.stderr


# ---------------------------------------------------------------- --estimate


def test_estimate_shows_what_would_be_sent_without_an_api_key(
    remote_env, server: FakeServer
) -> None:
    full = last_json(
        invoke("backfill", "--export", str(DEMO), "--llm", LLM, "--estimate", "--json").stdout
    )
    args = ["backfill", "--export", str(DEMO), "--llm", LLM, "--estimate", "--json"]
    r = invoke(*args, *[f"--exclude={rule}" for rule in EXCLUDES])
    assert r.exit_code == 0, r.stderr
    est = last_json(r.stdout)
    assert est["model"] == LLM and est["conversations"] == 8
    assert est["excluded"] == 3 and est["excluded_by_rule"] == dict.fromkeys(EXCLUDES, 1)
    assert est["conversations_to_draft"] == est["kept"] - 3 == full["conversations_to_draft"] - 3
    assert 0 < est["characters"] < full["characters"]
    assert est["sources"] == ["chatgpt"]
    assert (est["first_date"], est["last_date"]) == ("2024-05-12", "2025-04-06")
    assert full["first_date"] == "2024-02-18"
    for key in ("estimated_input_tokens", "estimated_output_tokens", "estimated_cost_usd"):
        assert key in est
    assert est["estimated_input_tokens"] == est["input_tokens"] > 0
    host = server.url.removeprefix("http://")
    assert (
        f"would send to {LLM} at {host}: {est['conversations_to_draft']} conversations" in r.stderr
    )
    assert f"{est['characters']:,} characters, from chatgpt (2024-05-12 – 2025-04-06)" in r.stderr
    assert "excluded: 3 conversations by title:*バックアップ*" in r.stderr
    assert server.requests == []  # an estimate sends nothing
    assert not (Path(remote_env["PMEM_DATA_DIR"]) / "consent.json").exists()


# ---------------------------------------------------------------- asking


def test_non_interactive_run_without_yes_refuses_and_sends_nothing(
    remote_env, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    r = invoke("backfill", "--export", str(DEMO), "--llm", LLM, "--json")
    assert r.exit_code == EXIT_NO_CONSENT == 77
    assert "no terminal to ask" in r.stderr and "--yes" in r.stderr
    assert "would send to" in r.stderr  # the owner still sees what it was about
    assert server.requests == []
    assert not (Path(remote_env["PMEM_DATA_DIR"]) / "consent.json").exists()


def test_declining_at_the_prompt_sends_nothing(
    remote_env, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    asked: list[str] = []
    monkeypatch.setattr("cli.backfill_cmds._interactive", lambda: True)
    monkeypatch.setattr("typer.confirm", lambda text, **_: asked.append(text) or False)
    r = invoke("backfill", "--export", str(DEMO), "--llm", LLM)
    assert r.exit_code == 77 and "declined" in r.stderr
    assert asked == [
        f"send these conversations to {LLM} at {server.url.removeprefix('http://')}? "
        "(remembered for this data dir)"
    ]
    assert server.requests == []
    assert not (Path(remote_env["PMEM_DATA_DIR"]) / "consent.json").exists()


def test_yes_consents_and_excluded_conversations_never_reach_the_server(
    remote_env, server: FakeServer, prefect_api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("PREFECT_API_URL", prefect_api)
    server.push(*[Reply(200, openai_chat(json.dumps(records_payload(), ensure_ascii=False)))] * 20)
    args = ["backfill", "--export", str(DEMO), "--llm", LLM, "--yes", "--json"]
    r = invoke(*args, *[f"--exclude={rule}" for rule in EXCLUDES])
    assert r.exit_code == 0, r.stderr
    summary = last_json(r.stdout)
    assert summary["status"] == "complete" and summary["excluded"] == 3
    assert summary["excluded_by_rule"] == dict.fromkeys(EXCLUDES, 1)
    assert summary["drafter_calls"] == len(server.requests) > 0
    # the rules reached the flow by a run request's id; the request is gone once it returned
    assert not list((Path(remote_env["PMEM_DATA_DIR"]) / "requests").glob("*"))
    bodies = sent_text(server)
    assert SENT_TEXT in bodies
    for fragment in EXCLUDED_TEXT:
        assert fragment not in bodies
    # remembered: 0600, the rules kept with it, no conversation text in it
    path = Path(remote_env["PMEM_DATA_DIR"]) / "consent.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    [entry] = json.loads(path.read_text(encoding="utf-8"))["consents"]
    assert (entry["kind"], entry["provider"], entry["scope"]) == ("drafting", "openai", "chatgpt")
    assert entry["destination"] == server.url.removeprefix("http://")
    assert entry["excludes"] == EXCLUDES
    assert entry["preview"]["excluded"] == 3
    assert not any(f in path.read_text(encoding="utf-8") for f in [*EXCLUDED_TEXT, SENT_TEXT])


# ---------------------------------------------------------------- runs without the CLI (the schedule)


def run_plain(drafter: ScriptedDrafter) -> dict:
    p = pl.Pipeline.open(Settings())
    p.drafter = drafter
    try:
        return pl.run_backfill(p, "chatgpt", str(DEMO))
    finally:
        p.close()


def test_a_run_without_remembered_consent_refuses_before_sending(remote_env) -> None:
    drafter = ScriptedDrafter(model=LLM)  # as a scheduled re-import would open it
    with pytest.raises(ConsentRequired) as err:
        run_plain(drafter)
    assert "openai" in str(err.value) and "consent" in str(err.value)
    assert drafter.history == []


def test_remembered_consent_keeps_its_exclusions_for_later_runs(remote_env) -> None:
    target = cs.drafting_target(LLM, "chatgpt")
    assert target is not None
    cs.grant(Settings(), target, ["title:*バックアップ*"], {})
    # a later run given no --exclude (the monthly re-import)
    drafter = ScriptedDrafter(model=LLM)
    summary = run_plain(drafter)
    assert summary["status"] == "complete" and summary["excluded"] == 1
    drafted = {key for call in drafter.history for key in call}
    assert drafted and BACKUP not in drafted
    # a rule added by a later run joins the remembered ones (sending less needs no new question)
    p = pl.Pipeline.open(Settings(), excludes=parse_rules([f"key:{LAPTOP}"]))
    p.drafter = ScriptedDrafter(model=LLM)
    pl.apply_consent(p, "chatgpt")
    p.close()
    assert cs.find(Settings(), target).excludes == ["title:*バックアップ*", f"key:{LAPTOP}"]


def test_a_batch_planned_before_an_exclusion_is_not_drafted_with_it(remote_env) -> None:
    """A dry run planned batches with every conversation; a later run excluding one supersedes
    the batch that held it and packs its other members again."""
    p = pl.Pipeline.open(Settings())
    p.drafter = ScriptedDrafter(model="fake:scripted")
    try:
        pl.import_export(p, "chatgpt", str(DEMO))
        p.run_id, _ = p.runs.open_or_create(
            source="chatgpt",
            export_path=str(DEMO),
            fingerprint=pl.fingerprint(DEMO),
            model=p.drafter.model,
            prompt_version=p.drafter.prompt_version,
            dry_run=True,
        )

        def members(batch_id: str) -> set[str]:
            return {m.conversation_key for m in to_batch(p.runs.batch(batch_id)).members}

        planned = pl.plan(p, "chatgpt")
        [holder] = [b for b in planned if BACKUP in members(b)]
        p.excludes = parse_rules(["title:*バックアップ*"])
        again = pl.plan(p, "chatgpt")
        after = set().union(*(members(b) for b in again))
        status = p.runs.batch(holder)["status"]
        before = set().union(*(members(b) for b in planned))
    finally:
        p.close()
    assert holder not in again and status == "superseded"
    assert BACKUP not in after
    assert after == before - {BACKUP}  # the others still go


# ---------------------------------------------------------------- a remote embedder


def test_a_remote_embedder_gets_nothing_without_consent(
    remote_env, server: FakeServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Memory texts (backfill), queries (search, MCP) and a reindex stay local until the owner
    consents to the remote embedder."""
    from mcp_server.service import MemoryService

    monkeypatch.setenv("PMEM_EMBEDDER", "openai:text-embedding-3-small")
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    summary = run_plain(ScriptedDrafter())  # the offline drafter: only the embedder is remote
    assert summary["memories_created"] > 0 and summary["indexed"]["vectors"] == "no-consent"
    r = invoke("search", "バックアップ")
    assert r.exit_code == 0 and "vectors skipped: no consent" in r.stderr
    r = invoke("reindex", "--memories-only")
    assert r.exit_code == 77 and "text-embedding-3-small" in r.stderr
    svc = MemoryService.open(Settings())
    try:
        assert svc.embedder is None
    finally:
        svc.close()
    assert server.requests == []


def test_the_reimport_sends_only_under_a_remembered_consent(
    remote_env, server: FakeServer, prefect_api: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The unattended re-import (what the schedule runs) never asks: without a consent the export
    fails with ConsentRequired and nothing is sent; with one, it sends, minus the remembered
    exclusions."""
    import shutil

    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    monkeypatch.setenv("PREFECT_API_URL", prefect_api)
    monkeypatch.setenv("PMEM_CODEX_SESSIONS", "off")
    monkeypatch.setenv("PMEM_CLAUDE_CODE_PROJECTS", "off")
    inbox = Path(remote_env["PMEM_DATA_DIR"]) / "exports" / "chatgpt"
    inbox.mkdir(parents=True)
    shutil.copy(DEMO, inbox / "conversations.json")
    r = invoke("reimport", "--llm", LLM, "--source", "chatgpt")
    assert (
        r.exit_code == 1 and "not sent (the export fails with ConsentRequired): chatgpt" in r.stderr
    )
    assert server.requests == []

    target = cs.drafting_target(LLM, "chatgpt")
    assert target is not None
    cs.grant(Settings(), target, ["title:*バックアップ*"], {})
    server.push(*[Reply(200, openai_chat(json.dumps(records_payload(), ensure_ascii=False)))] * 20)
    r = invoke("reimport", "--llm", LLM, "--source", "chatgpt", "--json")
    assert r.exit_code == 0, r.stderr
    assert "only what you consented to: chatgpt" in r.stderr
    bodies = sent_text(server)
    assert SENT_TEXT in bodies and EXCLUDED_TEXT[0] not in bodies


def test_consent_list_and_revoke(remote_env) -> None:
    target = cs.drafting_target(LLM, "chatgpt")
    assert target is not None
    cs.grant(Settings(), target, ["title:*病院*"], {})
    listed = last_json(invoke("consent", "list", "--json").stdout)["consents"]
    assert [(c["provider"], c["scope"], c["excludes"]) for c in listed] == [
        ("openai", "chatgpt", ["title:*病院*"])
    ]
    r = invoke("consent", "list")
    assert "drafting  chatgpt" in r.stdout and "excluding title:*病院*" in r.stdout
    assert last_json(invoke("consent", "revoke", "openai", "--json").stdout) == {"revoked": 1}
    assert cs.find(Settings(), target) is None
    with pytest.raises(ConsentRequired):  # the next run is refused again until the owner answers
        run_plain(ScriptedDrafter(model=LLM))
