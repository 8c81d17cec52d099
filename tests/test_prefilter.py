"""The prefilter: explainable keep/drop rules over the person's own words."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from core.models import Channel, Conversation, Message, Provenance
from stages.prefilter import RULE_VERSION, prefilter

T0 = datetime(2024, 3, 12, 21, 5, tzinfo=UTC)


def make_conv(
    turns: list[tuple[str, str]], *, key: str = "chatgpt:c1", title: str | None = None
) -> Conversation:
    """A conversation from (role, text) turns: "user" is the person, anything else the assistant."""
    messages = [
        Message(
            key=f"{key}:n{i}",
            node_id=f"n{i}",
            parent_id=f"n{i - 1}" if i else None,
            role=role,
            channel=Channel.PERSON if role == "user" else Channel.ASSISTANT,
            content_type="text",
            text=text,
            created_at=T0 + timedelta(minutes=2 * i),
            position=i,
        )
        for i, (role, text) in enumerate(turns)
    ]
    return Conversation(
        key=key,
        source="chatgpt",
        external_id=key.split(":", 1)[1],
        title=title,
        created_at=T0,
        messages=messages,
        provenance=Provenance(file="conversations.json", position=0),
    )


CODE_ANSWER = (
    "Here you go:\n\n```python\ndef dedupe(items):\n    seen = set()\n    out = []\n"
    "    for item in items:\n        if item not in seen:\n            seen.add(item)\n"
    "            out.append(item)\n    return out\n```\n"
)

TRACEBACK = (
    "Traceback (most recent call last):\n"
    '  File "/app/main.py", line 12, in <module>\n'
    "    run()\n"
    '  File "/app/main.py", line 8, in run\n'
    "    conn = psycopg.connect(dsn)\n"
    "psycopg.OperationalError: connection failed: Connection refused\n"
    "\tIs the server running on that host and accepting TCP/IP connections?\n"
)


def test_japanese_decision_is_kept() -> None:
    conv = make_conv(
        [
            ("user", "家計簿アプリのDBをSQLiteとPostgreSQLで比較したい。"),
            ("assistant", "SQLiteは手軽で、PostgreSQLは同時接続に強いです。"),
            ("user", "同期が必要なので、結局PostgreSQLにした。"),
        ]
    )
    decision = prefilter(conv)
    assert decision.keep
    assert decision.reason == "keep:decision"


def test_english_decision_is_kept() -> None:
    conv = make_conv(
        [
            ("user", "Should our team use Celery or RQ for background jobs?"),
            ("assistant", "Both work. Celery has more features; RQ is simpler."),
            ("user", "OK, I decided to go with RQ because we only need a simple queue."),
        ]
    )
    decision = prefilter(conv)
    assert (decision.keep, decision.reason) == (True, "keep:decision")


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("I'll stay on the monthly plan instead of the yearly one.", "keep:judgement"),
        ("理由はコストです。", "keep:judgement"),
        ("It turned out the cache was stale all along.", "keep:lesson"),
        ("今回の件で、バックアップの大切さが分かった。", "keep:lesson"),
    ],
)
def test_judgements_and_lessons_are_kept(text: str, reason: str) -> None:
    conv = make_conv([("user", text), ("assistant", "Noted.")])
    assert prefilter(conv).reason == reason


def test_decision_record_carries_key_hash_and_version() -> None:
    conv = make_conv([("user", "I decided to use Postgres."), ("assistant", "Good choice.")])
    decision = prefilter(conv)
    assert decision.conversation_key == conv.key
    assert decision.content_hash == conv.content_hash
    assert decision.rule_version == RULE_VERSION == "prefilter-v2"


def test_no_person_text_is_dropped_as_empty() -> None:
    conv = make_conv([("assistant", "Hello! How can I help you today?")])
    blank = make_conv([("user", "   \n"), ("assistant", "Hello!")], key="chatgpt:c2")
    assert (prefilter(conv).keep, prefilter(conv).reason) == (False, "drop:empty")
    assert prefilter(blank).reason == "drop:empty"


def test_code_only_chat_is_dropped() -> None:
    conv = make_conv(
        [
            ("user", "Write a Python function that removes duplicates from a list, keeping order."),
            ("assistant", CODE_ANSWER),
            ("user", "Now add type hints to the function."),
            (
                "assistant",
                CODE_ANSWER.replace("def dedupe(items):", "def dedupe(items: list) -> list:"),
            ),
        ]
    )
    assert (prefilter(conv).keep, prefilter(conv).reason) == (False, "drop:code-only")


def test_japanese_code_only_chat_is_dropped() -> None:
    conv = make_conv(
        [("user", "リストの重複を消す関数をPythonで書いて"), ("assistant", CODE_ANSWER)]
    )
    assert prefilter(conv).reason == "drop:code-only"


def test_code_chat_with_a_judgement_is_kept() -> None:
    conv = make_conv(
        [
            ("user", "Write a Python function that removes duplicates from a list."),
            ("assistant", CODE_ANSWER),
            ("user", "I prefer the dict.fromkeys version because it is shorter."),
        ]
    )
    assert prefilter(conv).reason == "keep:judgement"


def test_error_log_paste_is_dropped() -> None:
    conv = make_conv(
        [
            ("user", f"why?\n{TRACEBACK}"),
            ("assistant", "The database server is not reachable. Check that it is running."),
        ]
    )
    assert (prefilter(conv).keep, prefilter(conv).reason) == (False, "drop:error-log")


def test_fenced_error_log_is_dropped() -> None:
    conv = make_conv(
        [
            ("user", f"I get this:\n```\n{TRACEBACK}```"),
            ("assistant", "Start the server first."),
        ]
    )
    assert prefilter(conv).reason == "drop:error-log"


def test_error_log_with_a_lesson_is_kept() -> None:
    conv = make_conv(
        [
            ("user", TRACEBACK),
            ("assistant", "The server is not running."),
            ("user", "It turned out Docker had stopped the container. Lesson: add a health check."),
        ]
    )
    assert prefilter(conv).reason == "keep:lesson"


@pytest.mark.parametrize(
    "question",
    ["What does 'idempotent' mean?", "「冪等」とはどういう意味？", "Define serendipity"],
)
def test_word_lookup_is_dropped(question: str) -> None:
    conv = make_conv([("user", question), ("assistant", "It means that doing it twice is safe.")])
    assert (prefilter(conv).keep, prefilter(conv).reason) == (False, "drop:word-lookup")


def test_technical_chat_with_a_personal_project_is_kept() -> None:
    """Like the real 'Django Multi-DB Setup' chat: code-heavy answers, but the person's project."""
    conv = make_conv(
        [
            (
                "user",
                "I want to develop a django application with multiple databases for my rental "
                "webshop. Can you write the specification?\nThe name of the database should be "
                "rentapin.",
            ),
            ("assistant", CODE_ANSWER * 3),
            ("user", "Can you write the docker-compose file for it?"),
            ("assistant", CODE_ANSWER * 2),
        ]
    )
    decision = prefilter(conv)
    assert decision.keep
    assert decision.reason == "keep:default"


def test_business_logo_chat_is_kept() -> None:
    conv = make_conv(
        [
            (
                "user",
                "The first logo I want is for my freelance data professional company.",
            ),
            ("assistant", "Tell me about yourself."),
            ("user", "Can you recommend RGB codes for the blue and orange?"),
            ("assistant", "Use #1E3452 and #FFA07A."),
        ]
    )
    assert prefilter(conv).keep


def test_a_plain_question_is_kept_by_default() -> None:
    conv = make_conv(
        [("user", "How do I make my sourdough rise more?"), ("assistant", "Use a warmer place.")]
    )
    assert (prefilter(conv).keep, prefilter(conv).reason) == (True, "keep:default")


def test_pasted_text_is_not_the_persons_judgement() -> None:
    pasted = "Data science is interdisciplinary because of the many fields involved. " * 10
    conv = make_conv(
        [("user", f"Please summarize the following text:\n\n{pasted}"), ("assistant", "Summary.")]
    )
    assert prefilter(conv).reason == "keep:default"


def test_overrides_win() -> None:
    code_only = make_conv([("user", "Write a regex for ISO dates"), ("assistant", CODE_ANSWER)])
    decided = make_conv([("user", "I decided to move to Berlin."), ("assistant", "Congrats!")])
    kept = prefilter(code_only, {code_only.key: True})
    dropped = prefilter(decided, {decided.key: False})
    assert (kept.keep, kept.reason) == (True, "keep:override")
    assert (dropped.keep, dropped.reason) == (False, "drop:override")
    assert prefilter(code_only, {"chatgpt:other": True}).reason == "drop:code-only"


def test_only_active_path_and_visible_messages_count() -> None:
    conv = make_conv([("user", "Write a function that sorts a list."), ("assistant", CODE_ANSWER)])
    hidden = Message(
        key=f"{conv.key}:old",
        node_id="old",
        parent_id="n0",
        role="user",
        channel=Channel.PERSON,
        content_type="text",
        text="I decided to use Rust instead.",
        position=-1,
        on_active_path=False,
    )
    branched = conv.model_copy(update={"messages": [*conv.messages, hidden]})
    assert prefilter(branched).reason == "drop:code-only"


def test_prefilter_is_pure_and_deterministic() -> None:
    conv = make_conv([("user", "I decided to go with Hetzner."), ("assistant", "OK.")])
    before = conv.model_dump()
    assert prefilter(conv) == prefilter(conv)
    assert conv.model_dump() == before


def test_log_paste_about_my_app_is_still_an_error_log() -> None:
    conv = make_conv([("user", f"My app crashes:\n{TRACEBACK}"), ("assistant", "Start the DB.")])
    assert prefilter(conv).reason == "drop:error-log"


def test_log_paste_inside_a_described_project_is_kept() -> None:
    text = f"I'm building a rental webshop for my business and deploying it gives:\n{TRACEBACK}"
    conv = make_conv([("user", text), ("assistant", "Start the DB.")])
    assert (prefilter(conv).keep, prefilter(conv).reason) == (True, "keep:default")


def test_code_request_for_my_own_website_is_kept() -> None:
    conv = make_conv(
        [
            ("user", "Write the CSS for the header of my portfolio website."),
            ("assistant", CODE_ANSWER),
        ]
    )
    assert prefilter(conv).reason == "keep:default"


def test_the_log_line_pattern_matches_the_lines_its_branches_match_one_by_one() -> None:
    """``_LOG_LINE_RE`` puts ``^\\s*`` once before its branches (issue 31: the import runs it on
    every line of the person's messages): it finds a log line exactly where one of its branches,
    each anchored on its own, does."""
    import random
    import re

    from stages.prefilter import _LOG_LINE_ANYWHERE, _LOG_LINE_AT_START, _LOG_LINE_RE

    flags = re.IGNORECASE | re.MULTILINE
    branches = [re.compile(r"^\s*" + p, flags) for p in _LOG_LINE_AT_START]
    branches += [re.compile(p, flags) for p in _LOG_LINE_ANYWHERE]
    samples = [
        "Traceback (most recent call last):",
        '  File "app.py", line 12, in <module>',
        "    at com.example.Main.run(Main.java:42)",
        "  at Object.<anonymous> (/srv/app/index.js:10:5)",
        "ValueError: invalid literal",
        "KeyError",
        "[2024-03-01 12:30:01] started",
        "ERROR: disk full",
        "error: disk full",
        "[warn] lower case is not the upper-case label",
        "npm ERR! code ELIFECYCLE",
        "error[E0382]: borrow of moved value",
        "src/main.c:10:5: error: expected ';'",
        "panic: runtime error",
        "Caused by: java.io.IOException",
        "     ^^^^",
        "#3  0x00007f3 in main ()",
        "E   assert 1 == 2",
        "e   not pytest's lower-case e",
        "I decided to keep the old laptop because it still works.",
        "結局、前の方法の方が速かったです。",
        "at home we prefer tea",
        "",
        "   ",
    ]
    rng = random.Random(31)
    pieces = [*samples, " ", "\t", ":", "1", "E", "at ", "Error", "x", "(", ")", "#"]
    lines = samples + [
        "".join(rng.choice(pieces) for _ in range(rng.randint(1, 6))) for _ in range(3000)
    ]
    got = [bool(_LOG_LINE_RE.search(line)) for line in lines]
    want = [any(b.search(line) for b in branches) for line in lines]
    assert got == want
    assert sum(got[: len(samples)]) == 17  # the check can fail: 17 log samples match, the rest not
