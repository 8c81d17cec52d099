"""Seed 001's monthly summaries and profile on ../shared/eval/ (both exports back-filled offline
into a database of this module): every month summarized, citations inside the month, the job
change in the profile, the father's hospital month darker than the rest, a re-run with 0 drafter
calls, a grown month redone alone (old version kept); the CLI contract, the Prefect flow run for
real, the write guard, an LLM summarizer behind the local fake OpenAI server, and the timeline
page rendered in headless Chromium."""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo
from typer.testing import CliRunner

from tests.conftest import PROJECT, SHARED
from tests.fakeservers import FakeServer, Reply, openai_chat
from tests.test_ledger_cmds import chatgpt_export, one_conversation

EVAL = SHARED / "eval"
pytestmark = pytest.mark.needs_shared
TZ = "Asia/Tokyo"
SECRET = "sk-proj-" + "Zq8Lm2Nv5Xc7Bt1Rw4Ys" + "6Ud9Ae3Gh5Jk7Mp0Qs2T" + "_vW-4x"


def run(*args: str, code: int = 0) -> Any:
    from cli.main import app

    result = CliRunner().invoke(app, list(args))
    assert result.exit_code == code, (result.output, result.exception)
    return result


def last_json(*args: str, code: int = 0) -> dict[str, Any]:
    return json.loads(run(*args, code=code).stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def eval_env(
    pg_admin_url: str, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, str]]:
    """The eval corpus back-filled offline (no vectors) into this module's own database."""
    from core.settings import Settings
    from flows.pipeline import Pipeline, run_backfill

    name = f"pmem_summaries_{os.getpid()}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template_db)
            )
        )
    data = tmp_path_factory.mktemp("summaries-data")
    env = {
        "PMEM_DATA_DIR": str(data),
        "DATABASE_URL": make_conninfo(pg_admin_url, dbname=name),
        "PMEM_TZ": TZ,
        "PMEM_COMMIT_BUDGET": "1000000/600s",
    }
    with pytest.MonkeyPatch.context() as mp:
        for k, v in env.items():
            mp.setenv(k, v)
        settings = Settings(
            data_dir=data,
            database_url=env["DATABASE_URL"],
            llm="extractive",
            commit_budget="1000000/600s",
        )
        for source, export in (("chatgpt", "chatgpt-export.zip"), ("claude", "claude-export.zip")):
            p = Pipeline.open(settings, "extractive")
            try:
                run_backfill(p, source, str(EVAL / export), embed=False)
            finally:
                p.close()
        yield env
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


@pytest.fixture
def env(eval_env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    for k, v in eval_env.items():
        monkeypatch.setenv(k, v)
    return eval_env


def _summarize(months: list[str] | None = None, llm: str | None = None) -> dict[str, Any]:
    from core.settings import get_settings
    from flows import summarize as sm

    run_ = sm.open_run(get_settings(), llm)
    try:
        return sm.run_summarize(run_, months)
    finally:
        sm.close_run(run_)


def _store() -> Any:
    from core.settings import get_settings
    from store.db import Database
    from store.summaries import SummaryStore

    return SummaryStore(Database.open(get_settings()))


def _corpus() -> dict[str, Any]:
    return json.loads((EVAL / "conversations.json").read_text(encoding="utf-8"))


# ---------------------------------------------------------------- the first run: the Prefect flow


@pytest.fixture(scope="module")
def first_run(eval_env: dict[str, str], prefect_api: str) -> dict[str, Any]:
    """`pmem summarize --json` as a person runs it: a subprocess, the flow run on Prefect."""
    env = dict(os.environ, **eval_env, PREFECT_API_URL=prefect_api)
    env.pop("PREFECT_HOME", None)
    proc = subprocess.run(
        [sys.executable, "-m", "cli.main", "summarize", "--json"],
        env=env,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    # the months as the first run left them, before any test of this module adds a version
    # (tests run in any order: `make test` shuffles them)
    with pytest.MonkeyPatch.context() as mp:
        for k, v in eval_env.items():
            mp.setenv(k, v)
        out["listed_after_first_run"] = last_json("summary", "list", "--json")["items"]
    return out


def test_every_month_with_conversations_is_summarized(
    env: dict[str, str], first_run: dict[str, Any]
) -> None:
    months = sorted({c["create_time_local"][:7] for c in _corpus()["conversations"]})
    assert first_run["status"] == "complete"
    assert {
        "months_total",
        "months_drafted",
        "months_skipped",
        "drafter_calls",
        "profile_updated",
    } <= set(first_run)
    assert first_run["months_total"] == len(months) == first_run["months_drafted"]
    assert first_run["drafter_calls"] == len(months) + 1  # every month, then the profile
    assert first_run["profile_updated"] is True
    listed = first_run["listed_after_first_run"]
    assert [i["month"] for i in listed] == months
    for item in listed:
        assert set(item) >= {"month", "sentiment", "keywords", "version"}
        assert -1 <= item["sentiment"] <= 1 and item["keywords"] and item["version"] == 1


def test_a_month_cites_only_its_own_memories(
    env: dict[str, str], first_run: dict[str, Any]
) -> None:
    from store.db import Database

    tz = ZoneInfo(TZ)
    db = Database(env["DATABASE_URL"])
    try:  # the months a memory's revisions happened in: when the messages its evidence quotes were written
        with db.connection() as conn:
            rows = conn.execute(
                """SELECT e.memory_id, s.created_at FROM evidence e
                   JOIN source_messages s ON s.message_key = e.source_key"""
            ).fetchall()
    finally:
        db.close()
    months_of: dict[str, set[str]] = {}
    for mid, at in rows:
        months_of.setdefault(mid, set()).add(at.astimezone(tz).strftime("%Y-%m"))
    with_records = set().union(*months_of.values())
    for item in last_json("summary", "list", "--json")["items"]:
        shown = last_json("summary", "show", item["month"], "--json")
        assert set(shown) >= {
            "month",
            "summary",
            "sentiment",
            "keywords",
            "memory_ids",
            "message_keys",
            "version",
        }
        assert shown["summary"].strip()
        for mid in shown["memory_ids"]:
            assert item["month"] in months_of[mid], (item["month"], mid)
        if item["month"] in with_records:
            assert shown["memory_ids"], item["month"]


def test_offline_summary_sentences_are_verbatim_excerpts(
    env: dict[str, str], first_run: dict[str, Any]
) -> None:
    from store.db import Database

    db = Database(env["DATABASE_URL"])
    try:
        for m in _store().latest_all():
            with db.connection() as conn:
                texts = [
                    bytes(r[0]).decode()
                    for r in conn.execute(
                        "SELECT body FROM source_messages WHERE message_key = ANY(%s)",
                        (list(m.message_keys),),
                    )
                ]
                revisions = conn.execute(  # a line quotes the revision that happened in the month
                    "SELECT record->>'title', record->>'index_summary' FROM memory_revisions WHERE memory_id = ANY(%s)",
                    (list(m.memory_ids),),
                ).fetchall()
                records = [f"{t} — {i}" for t, i in revisions] + [t for t, _ in revisions]
            for line in m.summary.splitlines():
                body = line.strip("・「」").rstrip("…")
                flat = [" ".join(t.split()) for t in texts + records]
                assert any(body in t for t in flat), (m.month, line)
    finally:
        db.close()


def test_every_sentence_of_a_month_cites_a_memory_that_exists(
    env: dict[str, str], first_run: dict[str, Any]
) -> None:
    """Issue 27, item 4: each line of a month summary carries the memory ids it is drawn from
    (and, for the person's own words, the message behind it, in a conversation of that memory);
    `pmem summary show --json` lists them per sentence; the profile's month lines cite too."""
    from store.db import Database

    db = Database(env["DATABASE_URL"])
    try:
        with db.connection() as conn:
            active = {r[0] for r in conn.execute("SELECT id FROM memories WHERE status = 'active'")}
            conv_of = dict(
                conn.execute("SELECT message_key, conversation_key FROM source_messages")
            )
            quotes: dict[str, set[str]] = {}
            for mid, key in conn.execute("SELECT memory_id, source_key FROM evidence"):
                quotes.setdefault(mid, set()).add(conv_of.get(key, ""))
        months = _store().latest_all()
        assert months
        lines = 0
        for m in months:
            shown = last_json("summary", "show", m.month, "--json")
            sentences = shown["sentences"]
            assert [x["text"] for x in sentences] == m.summary.splitlines()
            for x in sentences:
                assert x["memory_ids"] and set(x["memory_ids"]) <= active, (m.month, x)
                for key in x["message_keys"]:  # through the memory: a message of its conversation
                    assert any(conv_of[key] in quotes[mid] for mid in x["memory_ids"]), x
                lines += 1
        assert lines >= len(months)
        prof = last_json("profile", "--json")
        # the lines after the head (the span, the topics, "month by month"): one per month
        heading = next(
            i
            for i, x in enumerate(prof["sentences"])
            if x["text"] in ("月ごとの流れ:", "Month by month:")
        )
        month_lines = prof["sentences"][heading + 1 :]
        assert month_lines and all(set(x["memory_ids"]) <= active for x in prof["sentences"])
        assert all(x["memory_ids"] for x in month_lines)
    finally:
        db.close()


def test_the_profile_tells_the_job_change(env: dict[str, str], first_run: dict[str, Any]) -> None:
    prof = last_json("profile", "--json")
    assert set(prof) >= {"profile", "months", "version"}
    assert "Lattice Works" in prof["profile"] or "転職" in prof["profile"]
    assert len(prof["months"]) == first_run["months_total"]


def test_the_hospital_month_is_darker_than_ordinary_months(
    env: dict[str, str], first_run: dict[str, Any]
) -> None:
    items = {i["month"]: i["sentiment"] for i in last_json("summary", "list", "--json")["items"]}
    hospital = [
        c["create_time_local"][:7]
        for c in _corpus()["conversations"]
        if "入院" in " ".join(m["text"] for m in c["messages"] if m["role"] == "user")
    ]
    assert "2024-07" in hospital
    others = [v for k, v in items.items() if k not in hospital]
    assert items["2024-07"] < statistics.median(others), items


def test_a_rerun_with_nothing_new_makes_no_drafter_call(
    env: dict[str, str], first_run: dict[str, Any]
) -> None:
    again = _summarize()
    assert again["drafter_calls"] == 0
    assert again["months_skipped"] == again["months_total"] == first_run["months_total"]
    assert again["months_drafted"] == 0 and again["profile_updated"] is False


# ---------------------------------------------------------------- the guard and the citations


def test_the_store_guards_and_checks_what_a_summary_cites(
    env: dict[str, str], first_run: dict[str, Any]
) -> None:
    from core.errors import StoreError
    from core.summaries import MonthDraft

    store = _store()
    before = store.latest("2024-01")
    assert before is not None
    draft = MonthDraft(
        summary=f"キーを貼った: {SECRET}",
        sentiment=0.1,
        keywords=["NISA", SECRET],
        memory_ids=list(before.memory_ids),
        message_keys=[],
    )
    stored = store.add_month(
        "2024-01",
        draft,
        inputs_hash="sha256:test",
        model="test",
        prompt_version="t",
        time_zone=TZ,
        run_id=None,
    )
    assert (
        SECRET not in stored.summary and SECRET not in stored.keywords and "NISA" in stored.keywords
    )
    assert stored.version == before.version + 1
    assert store.version("2024-01", before.version) == before  # the old version is kept
    with pytest.raises(StoreError):
        store.add_month(
            "2024-01",
            MonthDraft("x", 0.0, [], ["no-such-memory"], []),
            inputs_hash="h",
            model="test",
            prompt_version="t",
            time_zone=TZ,
            run_id=None,
        )
    # the test version differs from what the summarizer would write: the next run redoes the month
    redone = _summarize(["2024-01"])
    assert redone["months_drafted"] == 1 and redone["drafter_calls"] >= 1
    assert "sk-proj-" not in store.latest("2024-01").summary


def test_cli_errors_are_one_line(env: dict[str, str], first_run: dict[str, Any]) -> None:
    out = run("summary", "show", "1999-01", code=1)
    assert "no summary for 1999-01" in out.output and "Traceback" not in out.output
    assert "YYYY-MM" in run("summary", "show", "2024-13", code=1).output


# ---------------------------------------------------------------- a month that grows


def test_a_grown_month_is_redone_and_the_others_are_not(
    env: dict[str, str], first_run: dict[str, Any], tmp_path: Path
) -> None:
    store = _store()
    before = {m.month: m.version for m in store.latest_all()}
    when = datetime(2024, 3, 20, 21, 0, tzinfo=ZoneInfo(TZ)).timestamp()
    conv = one_conversation(
        "9f1c2a5e-0000-4000-8000-00000000a001",
        "ピアノ 発表会",
        [
            (
                "user",
                "ピアノ教室の発表会に出ることにした。曲はメヌエットにする。緊張するけど楽しみ。",
            ),
            ("assistant", "いいですね。練習計画を立てましょう。"),
        ],
    )
    conv["create_time"] = when
    for i, node in enumerate(n for n in conv["mapping"] if n != "root"):
        conv["mapping"][node]["message"]["create_time"] = when + 60 * i
    run(
        "import",
        str(chatgpt_export(tmp_path / "more.json", [conv])),
        "--source",
        "chatgpt",
        "--no-embed",
    )
    out = _summarize()
    assert out["months_drafted"] == 1 and out["months_skipped"] == out["months_total"] - 1
    assert out["profile_updated"] is True
    after = {m.month: m.version for m in store.latest_all()}
    assert after["2024-03"] == before["2024-03"] + 1
    assert {k: v for k, v in after.items() if k != "2024-03"} == {
        k: v for k, v in before.items() if k != "2024-03"
    }
    assert len(store.history("2024-03")) == after["2024-03"]  # nothing overwritten


# ---------------------------------------------------------------- an LLM summarizer (fake server)


def test_an_llm_summarizer_goes_through_the_adapter(
    env: dict[str, str], first_run: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = _store()
    june = store.latest("2024-06")
    assert june is not None and june.memory_ids
    reply = {
        "sentences": [
            {"text": "健康診断の結果を受けて生活を見直した月。", "memoryIds": [june.memory_ids[0]]},
            {"text": "どこにも出てこない話。", "memoryIds": ["made-up-id"]},  # no own source
            {"text": "LDL の値が気になった。", "messageKeys": ["chatgpt:nope:nope"]},
        ],
        "sentiment": -0.2,
        "keywords": ["健康診断", "LDL"],
    }
    profile = {
        "lines": [
            {"text": "Go のバックエンドエンジニア。", "months": ["2024-06", "1999-01"]},
            {"text": "作り話。", "memoryIds": ["made-up"]},
        ]
    }
    from core.errors import ConsentRequired
    from core.settings import get_settings
    from flows import consent as cs
    from flows.summarize import consent_target

    with FakeServer(
        Reply(200, openai_chat(json.dumps(reply, ensure_ascii=False))),
        Reply(200, openai_chat(json.dumps(profile, ensure_ascii=False))),
    ) as server:
        monkeypatch.setenv("PMEM_OPENAI_BASE_URL", server.url)
        monkeypatch.setenv("OPENAI_API_KEY", "test-key")
        with pytest.raises(
            ConsentRequired
        ):  # nothing leaves the machine without the owner's consent
            _summarize(["2024-06"], llm="openai:gpt-test")
        assert server.requests == []
        cs.grant(get_settings(), consent_target("openai:gpt-test"), [], {})
        out = _summarize(["2024-06"], llm="openai:gpt-test")
        body = server.requests[0].json()
    assert out["drafter_calls"] == 2 and out["input_tokens"] == 240 and out["output_tokens"] == 90
    assert body["response_format"]["json_schema"]["name"] == "month_summary"
    assert june.memory_ids[0] in body["messages"][1]["content"]
    new = store.latest("2024-06")
    assert new.model == "openai:gpt-test" and new.version == june.version + 1
    assert (
        list(new.memory_ids) == [june.memory_ids[0]] and list(new.message_keys) == []
    )  # made-up ids dropped
    # every sentence kept cites a memory of the month; those no memory of it supports are gone
    assert new.summary == "健康診断の結果を受けて生活を見直した月。"
    assert [c["memory_ids"] for c in new.citations] == [[june.memory_ids[0]]]
    prof = store.profile()
    assert prof.months == ("2024-06",)
    assert prof.citations[0]["memory_ids"] == list(new.memory_ids)  # through the month it cites
    assert prof.citations[1]["memory_ids"] == []
    back = _summarize()  # the offline summarizer again: only what the model wrote is redone
    assert back["months_drafted"] == 1 and back["profile_updated"] is True


# ---------------------------------------------------------------- the timeline page


def test_the_timeline_renders_in_headless_chromium(
    env: dict[str, str], first_run: dict[str, Any], tmp_path: Path
) -> None:
    from playwright.sync_api import sync_playwright

    page_path = tmp_path / "timeline.html"
    out = last_json("timeline", "--out", str(page_path), "--json")
    assert out["months"] == first_run["months_total"]
    nowhere = last_json(
        "timeline", "--out", str(tmp_path / "no-such-folder" / "t.html"), "--json", code=1
    )
    assert "cannot write" in nowhere["message"] and "folder that exists" in nowhere["hint"]
    assert oct(page_path.stat().st_mode & 0o777) == "0o600"
    html = page_path.read_text(encoding="utf-8")
    assert "<script" not in html and '<svg id="sentiment"' in html  # self-contained
    with sync_playwright() as pw:
        browser = pw.chromium.launch(
            executable_path="/usr/bin/chromium",
            args=[
                "--no-sandbox",
                "--disable-gpu",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                "--no-first-run",
            ],
        )
        try:
            page = browser.new_page(viewport={"width": 1100, "height": 900})
            requests: list[str] = []
            page.on("request", lambda r: requests.append(r.url))
            page.goto(page_path.as_uri())
            page.wait_for_selector("#sentiment a.bar", timeout=20_000)
            bars = page.locator("#sentiment a.bar").count()
            page.screenshot(path=str(tmp_path / "timeline.png"), full_page=False)
            box = page.locator("#sentiment a.bar rect").nth(6).bounding_box()
            assert box is not None
            page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
            page.wait_for_function("location.hash === '#m-2024-07'", timeout=10_000)
        finally:
            browser.close()
    assert bars == first_run["months_total"]
    assert all(u.startswith("file:") or u.startswith("data:") for u in requests), requests
    assert (tmp_path / "timeline.png").stat().st_size > 10_000


# ---------------------------------------------------------------- reading: load_context and MCP


def test_load_context_starts_with_the_profile_and_the_latest_month(
    env: dict[str, str], first_run: dict[str, Any]
) -> None:
    import anyio

    from tests.test_mcp import session_run, text_of

    async def body(s: Any, init: Any) -> dict[str, str]:
        return {
            "context": text_of(await s.call_tool("load_context", {})),
            "profile": text_of(await s.call_tool("get_profile", {})),
            "month": text_of(await s.call_tool("get_month_summary", {"month": "2024-09"})),
            "bad": text_of(await s.call_tool("get_month_summary", {"month": "2024-9"})),
        }

    out = anyio.run(session_run, dict(os.environ, **env, PMEM_EMBEDDER="none"), body)
    ctx = out["context"]
    assert (
        ctx.index("# profile") < ctx.index("# latest month: 2025-06") < ctx.index("# memory index")
    )
    assert len(ctx.encode()) <= 16_000
    assert "Lattice Works" in out["profile"] or "転職" in out["profile"]
    assert out["month"].startswith("# 2024-09") and "mem_" in out["month"]
    assert "YYYY-MM" in out["bad"] or "month" in out["bad"]


# ---------------------------------------------------------------- erasure


def test_erasing_a_memory_drops_the_summaries_resting_on_it(
    env: dict[str, str], first_run: dict[str, Any]
) -> None:
    store = _store()
    sept = store.latest("2024-09")
    assert sept is not None and sept.memory_ids and store.profile() is not None
    (env_dir := Path(env["PMEM_DATA_DIR"]) / "runs").mkdir(parents=True, exist_ok=True)
    cited = [p for p in env_dir.glob("*/months/2024-09.json")]
    resting = {
        m.month for m in store.latest_all() if sept.memory_ids[0] in m.memory_ids
    }  # 2024-09 and others
    result = CliRunner().invoke(
        __import__("cli.main", fromlist=["app"]).app,
        ["forget", "--memory", sept.memory_ids[0], "--yes"],
    )
    assert result.exit_code in (0, 4), result.output
    assert "2024-09" in resting and all(store.history(m) == [] for m in resting)
    left = (
        store.profile()
    )  # only a profile version that did not rest on the erased memory's month stays
    assert left is None or (
        "2024-09" not in left.months and sept.memory_ids[0] not in left.memory_ids
    )
    assert store.latest("2024-08") is not None  # the other months stay
    assert cited and not any(p.exists() for p in cited)
    again = _summarize()
    assert again["months_drafted"] == len(resting) and again["profile_updated"] is True
    assert all(sept.memory_ids[0] not in store.latest(m).memory_ids for m in resting)


# ---------------------------------------------------------------- a vendor's rate limit stops the run


def test_a_vendor_rate_limit_stops_with_exit_75_and_one_json_object(
    env: dict[str, str], first_run: dict[str, Any], prefect_api: str
) -> None:
    """A Retry-After longer than the adapter's wait stops the run cleanly: exit 75, the summary so
    far as the last line of stdout (not a traceback, not an empty stdout); errors print one object too."""
    busy = {"error": {"message": "rate limited", "type": "requests", "code": "rate_limit_exceeded"}}
    with FakeServer(Reply(429, busy, headers={"retry-after": "9999"})) as server:
        penv = dict(
            os.environ,
            **env,
            PREFECT_API_URL=prefect_api,
            PMEM_OPENAI_BASE_URL=server.url,
            OPENAI_API_KEY="test-key",
        )
        penv.pop("PREFECT_HOME", None)
        proc = subprocess.run(
            [
                sys.executable,
                "-m",
                "cli.main",
                "summarize",
                "--llm",
                "openai:gpt-test",
                "--month",
                "2024-06",
                "--yes",
                "--json",
            ],
            env=penv,
            cwd=PROJECT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert len(server.requests) == 1
    assert proc.returncode == 75, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and "run the same command again later" in proc.stderr
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["status"] == "stopped" and out["retry_after"] == 9999 and out["exit_code"] == 75
    assert out["months_drafted"] == 0 and out["run_id"] and out["model"] == "openai:gpt-test"
    err = last_json("summary", "show", "1999-01", "--json", code=1)
    assert err["error"] == "error" and "1999-01" in err["message"] and err["exit_code"] == 1
