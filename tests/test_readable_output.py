"""What a person reads (issue 28, item 5): every command's text output, on the demo export
imported, drafted, reviewed and committed for real, holds no Python repr (``{'``, ``[('``), no
microseconds and no ISO timestamps with seconds; search and recall print one line a hit (``--long``
the full hit); a run with nothing to review says so and stops."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from cli.main import app
from core.settings import Settings
from flows import pipeline as pl
from tests.conftest import PROJECT

DEMO = PROJECT / "examples" / "demo" / "conversations.json"
REPR = re.compile(r"\{'|\[\('|datetime\.datetime\(|Decimal\(")
# 12:40:05, 12:40:05.123+00:00, 2024-05-12T12:40 (a time reads 2024-05-12 21:40, local)
SECONDS = re.compile(r"\d\d:\d\d:\d\d|\d{4}-\d\d-\d\dT\d\d:\d\d")


def _backfill(dry_run: bool) -> dict:
    p = pl.Pipeline.open(Settings())
    try:
        return pl.run_backfill(p, "chatgpt", str(DEMO), dry_run=dry_run)
    finally:
        p.close()


def test_every_text_output_reads_as_words(pmem_env, tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PMEM_EMBEDDER", "none")
    monkeypatch.setenv("PMEM_TZ", "Asia/Tokyo")
    monkeypatch.setenv("COLUMNS", "100")  # the width a hit line is cut to
    runner = CliRunner()

    def text(*args: str) -> str:
        got = runner.invoke(app, list(args))
        assert got.exit_code == 0, (args, got.output)
        out = got.stdout + got.stderr
        assert not REPR.search(out), (args, out)
        assert not SECONDS.search(out), (args, SECONDS.search(out), out)
        return out

    dry = _backfill(dry_run=True)
    run_id = dry["run_id"]
    reviewed = text("runs", "review", run_id)
    assert "7 drafts (7 new, 0 appends)" in reviewed and "tokens" in reviewed
    assert "7 drafts; 0 commits done, 0 left (a dry run commits nothing until" in text(
        "status", run_id
    )  # counts of one thing that differ say why
    text("runs", "apply", run_id)
    again = _backfill(dry_run=False)  # everything is drafted and committed: a run of no drafts
    assert again["batches_total"] == 0 and again["run_id"] != run_id
    empty = text("runs", "review", again["run_id"])
    assert "nothing to review" in empty and "written:" not in empty
    assert not (Settings().runs_dir / again["run_id"] / "review.md").exists()  # it stopped

    from cli.run_words import summary_words

    words = "\n".join(summary_words(dry))
    assert not REPR.search(words) and "0 commits (a dry run commits nothing" in words

    from flows import summarize as sm  # `pmem summary update` less its Prefect flow (~10 s)

    run = sm.open_run(Settings(), None)
    try:
        sm.run_summarize(run, None)
    finally:
        sm.close_run(run)
    text("concepts", "rebuild")
    hits = runner.invoke(app, ["search", "データベース", "--json"]).stdout
    mem = re.search(r'"id": "(mem_[0-9a-f]+)"', hits)
    assert mem
    recall_json = runner.invoke(app, ["recall", "laptop", "--json"]).stdout
    key = re.search(r'"message_key": "([^"]+)"', recall_json)
    assert key
    conv = key.group(1).rsplit(":", 1)[0]

    month = text("summary", "show", "2024-05")
    assert re.search(r"sentiment [+-]\d\.\d\d: the tone of the month's sentences", month)
    one = text("search", "データベース")
    lines = [x for x in one.splitlines() if re.match(r"\s*\d+\. ", x)]
    assert lines and all(" · decision · mem_" in x for x in lines)
    assert len(one.splitlines()) == len(lines) + 1  # one line a hit, one note
    long = text("search", "データベース", "--long", "--explain")
    assert "from 1 conversation" in long and "weighted RRF" in long
    said = text("recall", "laptop")
    shown = [x for x in said.splitlines() if x.startswith("#")]
    assert shown and all(len(x) <= 100 for x in shown)  # cut to the terminal's width
    assert re.match(r"#1\s+2024-10-\d\d \d\d:\d\d  ", shown[0])  # minutes, no offset
    assert "[chatgpt:" in text("recall", "laptop", "--long")
    text("recall", "2024年5月に何を決めた？", "--now", "2025-01-10T12:00:00+09:00")
    from datetime import datetime
    from zoneinfo import ZoneInfo

    view = runner.invoke(app, ["show", mem.group(1), "--json"]).stdout
    occurred = datetime.fromisoformat(re.search(r'"occurred_at": "([^"]+)"', view).group(1))
    local = occurred.astimezone(ZoneInfo("Asia/Tokyo")).strftime("%Y-%m-%d %H:%M")
    assert f"occurred: {local}\n" in text("show", mem.group(1), "--history")  # PMEM_TZ's
    text("show", conv)
    text("show", key.group(1))
    for args in (
        ["status"],
        ["status", "--all"],
        ["status", run_id],
        ["ledger", "list"],
        ["ledger", "show", conv],
        ["ledger", "quarantine"],
        ["runs", "prices"],
        ["summary", "list"],
        ["summary", "profile"],
        ["summary", "timeline", "--out", str(tmp_path / "t.html")],
        ["concepts", "list"],
        ["concepts", "graph", "--out", str(tmp_path / "g.html")],
        ["related", "新しいパソコンを選んでいる"],
        ["memory", "mark", "家計簿アプリの準備"],
        ["memory", "marks"],
        ["auth", "api-token", "create", "reader"],
        ["auth", "tokens", "--kind", "api"],
        ["auth", "consent", "list"],
        ["auth", "clients"],
        ["auth", "tokens"],
        ["proposals", "list"],
        ["backup", "export", "--out", str(tmp_path / "m.jsonl")],
        ["db", "status"],
        ["db", "reindex"],
        ["import", str(DEMO)],
        ["status", again["run_id"]],
        ["--version"],
    ):
        text(*args)


def test_a_backfill_says_why_its_counts_of_one_thing_differ() -> None:
    """~41 commits estimated, 40 commits, 35 new memories: one clause says why they differ;
    a rejected evidence pointer says what it is."""
    from cli.run_words import summary_words

    summary = {
        "run_id": "r1",
        "status": "complete",
        "conversations": 41,
        "kept": 41,
        "dropped": 0,
        "batches_total": 11,
        "batches_drafted": 11,
        "batches_skipped_complete": 0,
        "drafter_calls": 11,
        "commits": 40,
        "memories_created": 35,
        "rejected_evidence": 1,
        "input_tokens": 0,
        "output_tokens": 0,
        "elapsed_seconds": 3.0,
        "estimate": {"expected_commits": 41},
    }
    words = "\n".join(summary_words(summary))
    assert "40 commits (35 new memories, 5 revising ones you had; ~41 estimated" in words
    assert "1 evidence pointer rejected (a quote a draft cited that its conversation" in words
    same = summary_words({**summary, "commits": 41, "memories_created": 41})
    assert "41 commits," in same[1]  # nothing to explain: no clause


def _months(n: int) -> list:
    """``n`` months as an LLM summarizer writes them: 12 lines, 30 memories and 60 messages
    cited, each line citing 3 of each (their keys as long as real ChatGPT keys)."""
    from core.summaries import MonthSummary

    out = []
    for i in range(n):
        month = f"{2023 + (i + 6) // 12}-{(i + 6) % 12 + 1:02d}"
        mems = tuple(f"mem_{i:04d}{j:016x}" for j in range(30))
        keys = tuple(
            f"chatgpt:{i:08x}-30c1-5d1f-accf-43a21ad090da:{j:08x}-abc8-55f5-8638-1cdd019722c1"
            for j in range(60)
        )
        lines = [
            f"・{month} の{j}番目の出来事: 新しい家計簿アプリのデータベースを選んだ。" * 2
            for j in range(12)
        ]
        out.append(
            MonthSummary(
                month=month,
                version=1,
                summary="\n".join(lines),
                sentiment=((i % 7) - 3) / 4,
                keywords=(
                    "家計簿",
                    "PostgreSQL",
                    "引っ越し",
                    "転職",
                    "laptop",
                    "登山",
                    "睡眠",
                    "読書",
                ),
                memory_ids=mems,
                message_keys=keys,
                inputs_hash="sha256:x",
                model="openai:gpt-4.1-mini",
                prompt_version="t",
                time_zone="Asia/Tokyo",
                run_id=None,
                citations=tuple(
                    {"memory_ids": list(mems[j : j + 3]), "message_keys": list(keys[j : j + 3])}
                    for j in range(12)
                ),
            )
        )
    return out


def test_the_timeline_of_18_months_is_under_a_megabyte(tmp_path: Path) -> None:
    """18 months of an LLM's summaries: the page is under 1 MB (it was 4.8 MB, Plotly's bundle
    inline), every month is a bar linking to it, and each id or key is written once."""
    from reports.timeline import write_timeline

    months = _months(18)
    page = tmp_path / "t.html"
    assert write_timeline(months, None, page) == 18
    size = page.stat().st_size
    html = page.read_text(encoding="utf-8")
    assert size < 1_000_000, size
    assert html.count('<a class="bar"') == 18 and "<script" not in html
    key = months[4].message_keys[2]  # cited by three lines, listed once
    assert html.count(key) == 1
    print(f"\ntimeline of 18 months: {size:,} bytes")
