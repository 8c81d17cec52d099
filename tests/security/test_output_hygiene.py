"""Output hygiene (issue 10, item 9): escape sequences and control characters in stored titles
and messages never reach the terminal raw through `pmem search`, `show`, `recall`, `review`; a
NUL or lone surrogate in a conversation title no longer aborts the import, and the exact title
is kept in the ledger. `--json` stays JSON."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from cli.main import app
from core.display import for_terminal, is_clean
from core.settings import Settings
from flows import pipeline as pl
from store.db import Database
from store.ledger import Ledger
from tests.conftest import PROJECT

DEMO = PROJECT / "examples" / "demo" / "conversations.json"

OSC_TITLE = "\x1b]0;pwned-window\x07"  # sets the window title
OSC_CLIPBOARD = "\x1b]52;c;cm0gLXJmIH4=\x07"  # OSC 52: writes the clipboard
CSI_CLEAR = "\x1b[2J\x1b[H"  # clears the screen
C1_CSI = "\x9b31m"  # a C1 CSI: red on terminals that take 8-bit controls
BIDI = "\u202egnp.exe"  # right-to-left override
TITLE = f"バックアップ{OSC_TITLE}計画{OSC_CLIPBOARD}{BIDI}\rFAKE"
NUL_TITLE = "病院\x00の予約 \ud800 half"
MESSAGE_TAIL = f" ZEBRAWORD{CSI_CLEAR}{OSC_CLIPBOARD}{C1_CSI}\x07\x08"
RAW = ("\x1b", "\x9b", "\x07", "\x08", "\r", "\u202e", "\x00")


def hostile_export(tmp_path: Path) -> Path:
    """The demo export with escape sequences in one title and one message, and a NUL and a lone
    surrogate in another title."""
    convs = json.loads(DEMO.read_text(encoding="utf-8"))
    backup = next(c for c in convs if c["title"].startswith("自宅のバックアップ"))
    backup["title"] = TITLE
    for node in backup["mapping"].values():
        msg = node["message"]
        if msg and msg["author"]["role"] == "user" and msg["content"]["parts"][0]:
            msg["content"]["parts"][0] += MESSAGE_TAIL
            break
    moving = next(c for c in convs if c["title"].startswith("引っ越し"))
    moving["title"] = NUL_TITLE
    path = tmp_path / "hostile.json"
    # ensure_ascii keeps the lone surrogate as \ud800 in the JSON text, as exports do
    path.write_text(json.dumps(convs, ensure_ascii=True), encoding="utf-8")
    return path


def assert_no_raw_controls(text: str) -> None:
    for ch in RAW:
        assert ch not in text, f"raw {ch!r} reached the terminal"


def cli(*args: str) -> tuple[int, str]:
    """Exit code and everything printed (stdout, then stderr)."""
    r = CliRunner().invoke(app, list(args))
    return r.exit_code, r.stdout + r.stderr


def cli_json(*args: str) -> dict:
    r = CliRunner().invoke(app, [*args, "--json"])
    assert r.exit_code == 0, r.stdout + r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


# ---------------------------------------------------------------- the pure function


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x1b]0;t\x07", "\\x1b]0;t\\x07"),
        ("\x1b]52;c;Zm9v\x1b\\", "\\x1b]52;c;Zm9v\\x1b\\"),
        ("a\x9b2Jb", "a\\x9b2Jb"),
        ("x\u202ey\u2066z", "x\\u202ey\\u2066z"),
        ("nul\x00 del\x7f cr\r", "nul\\x00 del\\x7f cr\\r"),
        ("lone \ud800", "lone \\ud800"),
        ("line1\nline2\ttab", "line1\\nline2\\ttab"),
        ("日本語のタイトル 🧠 C:\\path", "日本語のタイトル 🧠 C:\\path"),
    ],
)
def test_for_terminal_escapes_controls_only(raw: str, shown: str) -> None:
    assert for_terminal(raw) == shown
    assert is_clean(for_terminal(raw))


def test_for_terminal_keeps_newlines_in_bodies_only() -> None:
    assert for_terminal("a\nb\tc\x1b[0m", keep_newlines=True) == "a\nb\tc\\x1b[0m"
    assert for_terminal(None) == ""


# ---------------------------------------------------------------- through the CLI


@pytest.fixture
def imported(pmem_env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The hostile export backfilled with the offline drafter (no Prefect, no vectors)."""
    monkeypatch.setenv("PMEM_EMBEDDER", "none")
    export = hostile_export(tmp_path)
    p = pl.Pipeline.open(Settings())
    try:
        summary = pl.run_backfill(p, "chatgpt", str(export))
    finally:
        p.close()
    assert summary["status"] == "complete" and summary["conversations"] == 8
    return export


def test_nul_title_is_stored_exactly_and_the_import_goes_on(pmem_env, tmp_path: Path) -> None:
    export = hostile_export(tmp_path)
    stats = cli_json("import", str(export), "--source", "chatgpt")
    assert (
        stats["conversations_total"] == 8
        and stats["conversations_new"] == 8
        and stats["quarantined"] == 0
    )
    db = Database.open(Settings())
    try:
        ledger = Ledger(db)
        with db.connection() as conn:
            key = conn.execute(
                "SELECT conversation_key FROM source_conversations WHERE title LIKE '病院%'"
            ).fetchone()[0]
        assert ledger.raw_title(key) == NUL_TITLE  # byte-exact, NUL and lone surrogate kept
        assert ledger.load(key).title == "病院\ufffdの予約 \ufffd half"  # the storable form
        # an exact title keeps no second copy
        with db.connection() as conn:
            assert (
                conn.execute(
                    "SELECT count(*) FROM source_conversations WHERE title_raw IS NOT NULL"
                ).fetchone()[0]
                == 1
            )
    finally:
        db.close()
    # a re-import of the same export changes nothing and does not fail either
    assert cli_json("import", str(export), "--source", "chatgpt")["conversations_unchanged"] == 8


def test_search_show_recall_print_no_raw_escape_sequences(imported: Path) -> None:
    code, out = cli("search", "バックアップ", "--no-vectors", "--explain", "--long")
    assert code == 0, out
    assert_no_raw_controls(out)
    assert "\\x1b]0;pwned-window\\x07" in out  # shown, escaped
    assert "\\u202e" in out

    r = CliRunner().invoke(app, ["search", "バックアップ", "--no-vectors", "--json"])
    last = r.stdout.strip().splitlines()[-1]
    assert "\x1b" not in last  # the JSON text escapes it as \u001b
    hostile = [h for h in json.loads(last)["hits"] if "\x1b" in h["title"]]
    assert hostile, "the title keeps its exact text in --json"

    code, out = cli("show", hostile[0]["id"], "--history")
    assert code == 0, out
    assert_no_raw_controls(out)
    assert "\\x1b]52;c;" in out

    code, out = cli("recall", "ZEBRAWORD", "--max-chars", "0", "--long")
    assert code == 0, out
    assert "ZEBRAWORD" in out
    assert_no_raw_controls(out)
    assert "\\x1b[2J" in out and "\\x9b31m" in out


def test_error_messages_quoting_stored_text_are_escaped(pmem_env) -> None:
    code, out = cli("show", f"mem-{OSC_TITLE}")
    assert code == 1
    assert_no_raw_controls(out)


def test_nul_in_ids_and_metadata_does_not_abort_the_import(pmem_env, tmp_path: Path) -> None:
    """A NUL or lone surrogate in a conversation id, a role or a content type: the conversation
    is stored (those fields with the character written as its escape, ``store.ledger.storable``;
    the message text exact) and the import goes on."""
    convs = json.loads(DEMO.read_text(encoding="utf-8"))[:3]
    convs[0]["conversation_id"] = convs[0]["id"] = "odd\x00id\ud800"
    node = next(
        n
        for n in convs[1]["mapping"].values()
        if n["message"] and n["message"]["author"]["role"] == "user"
    )
    node["message"]["author"]["role"] = "us\x00er"
    node["message"]["content"]["parts"] = ["body with a NUL \x00 kept"]
    other = next(
        n
        for n in convs[2]["mapping"].values()
        if n["message"] and n["message"]["author"]["role"] == "user"
    )
    other["message"]["content"]["content_type"] = "te\x00xt"
    path = tmp_path / "odd-ids.json"
    path.write_text(json.dumps(convs, ensure_ascii=True), encoding="utf-8")
    stats = cli_json("import", str(path), "--source", "chatgpt")
    assert stats["conversations_new"] == 3 and stats["quarantined"] == 0
    db = Database.open(Settings())
    try:
        ledger = Ledger(db)
        assert ledger.load("chatgpt:odd\\u0000id\\ud800").messages
        with db.connection() as conn:
            [(body,)] = conn.execute(
                "SELECT body FROM source_messages WHERE role = %s", ("us\\u0000er",)
            ).fetchall()
            odd_types = conn.execute(
                "SELECT count(*) FROM source_messages WHERE strpos(coalesce(raw_type, content_type), %s) > 0",
                ("te\\u0000xt",),
            ).fetchone()[0]
        assert odd_types == 1
        assert bytes(body) == b"body with a NUL \x00 kept"  # the text stays byte-exact
    finally:
        db.close()
    assert cli_json("import", str(path), "--source", "chatgpt")["conversations_unchanged"] == 3


def test_review_and_status_print_no_raw_escape_sequences(
    pmem_env, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PMEM_EMBEDDER", "none")
    p = pl.Pipeline.open(Settings())
    try:
        summary = pl.run_backfill(p, "chatgpt", str(hostile_export(tmp_path)), dry_run=True)
    finally:
        p.close()
    code, out = cli("review", summary["run_id"])
    assert code == 0, out
    assert "pwned-window" in out  # the hostile title is listed, escaped
    assert_no_raw_controls(out)
    code, out = cli("status", summary["run_id"])
    assert code == 0, out
    assert_no_raw_controls(out)
