"""The summarizers without a database: the offline one's pieces (sentences, keywords, polarity)
and a vendor summarizer through each adapter's ``complete_json`` behind the local fake server
(schema, guarded prompt, 429 + Retry-After through the one retry layer, citations kept as
given for the flow to check)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from core.errors import TerminalDraftError
from core.summaries import MemoryInput, MessageInput, MonthInputs
from prompts.summary import MONTH_SCHEMA_NAME, build_month_prompt
from providers._retry import RetryPolicy
from providers.summaries import month_sentiment, sentences, terms
from providers.summaries_llm import LlmSummarizer
from tests.fakeservers import (
    TEST_API_KEY,
    FakeServer,
    Reply,
    Sleeps,
    anthropic_message,
    gemini_response,
    openai_chat,
    openai_error,
)

SECRET = "ghp_" + "Q3wE5rT7yU9iO1pA3sD5fG7hJ9kL1zX3cV5b"
AT = datetime(2024, 7, 9, 13, 40, tzinfo=UTC)
INPUTS = MonthInputs(
    month="2024-07",
    time_zone="Asia/Tokyo",
    memories=(
        MemoryInput("mem_1", 1, "decision", "カウンターオファー", "今回は残ることにする。", AT),
    ),
    messages=(
        MessageInput("chatgpt:c1:m1", "chatgpt:c1", AT, "父が入院した。心配で眠れない。", "h1"),
        MessageInput("chatgpt:c1:m2", "chatgpt:c1", AT, f"トークンは {SECRET} だった", "h2"),
    ),
)
ANSWER = {
    "sentences": [
        {"text": "父の入院で不安な月。", "memoryIds": ["mem_1"], "messageKeys": ["chatgpt:c1:m1"]},
        {"text": "仕事は今の会社に残ると決めた。", "memoryIds": ["mem_1"]},
    ],
    "sentiment": -0.6,
    "keywords": ["入院"],
}


def test_offline_pieces() -> None:
    assert sentences("丹沢に行く。天気が心配！\nimport os\nOK") == ["丹沢に行く。", "天気が心配！"]
    assert {"ES120", "MacBook", "Air", "goroutine"} <= set(
        terms("ES120 と MacBook Air を比べた。goroutine の話も。")
    )
    english = terms(
        "I think the price of the MacBook is fine for Lattice Works."
    )  # a sentence at a time
    assert (
        {"MacBook", "Lattice"} <= set(english) and "price" not in english and "think" not in english
    )
    assert (
        month_sentiment(["父が入院した。本当に不安だ。"])
        < 0
        < month_sentiment(["週末の登山が楽しみ！最高だった。"])
    )
    assert (
        month_sentiment(["I was worried and exhausted."])
        < 0
        < month_sentiment(["What a great, happy day!"])
    )


def test_the_month_prompt_is_guarded_and_names_the_ids() -> None:
    static, dynamic = build_month_prompt(INPUTS)
    assert SECRET not in dynamic and "mem_1" in dynamic and "chatgpt:c1:m1" in dynamic
    assert "2024-07" not in static  # the static part never depends on the input (prompt caches)


def _run(spec: str, server: FakeServer, monkeypatch: pytest.MonkeyPatch, sleeps: Sleeps) -> Any:
    monkeypatch.setenv(
        {
            "openai": "PMEM_OPENAI_BASE_URL",
            "anthropic": "PMEM_ANTHROPIC_BASE_URL",
            "gemini": "PMEM_GEMINI_BASE_URL",
        }[spec.split(":")[0]],
        server.url,
    )
    for key in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "GEMINI_API_KEY"):
        monkeypatch.setenv(key, TEST_API_KEY)
    s = LlmSummarizer(spec)
    s.adapter.retry = RetryPolicy(max_attempts=3, jitter=0.0)  # type: ignore[attr-defined]
    s.adapter._sleep = sleeps  # type: ignore[attr-defined]
    return s.summarize_month(INPUTS)


@pytest.mark.parametrize("spec", ["openai:gpt-test", "anthropic:claude-test", "gemini:gemini-test"])
def test_a_vendor_month_summary_through_the_adapter(
    spec: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    vendor = spec.split(":")[0]
    ok = {
        "openai": lambda: openai_chat(json.dumps(ANSWER, ensure_ascii=False)),
        "anthropic": lambda: anthropic_message(ANSWER, tool_name=MONTH_SCHEMA_NAME),
        "gemini": lambda: gemini_response(json.dumps(ANSWER, ensure_ascii=False)),
    }[vendor]()
    busy = {
        "openai": openai_error(429, "rate_limit_exceeded"),
        "anthropic": {
            "type": "error",
            "error": {"type": "rate_limit_error", "message": "slow down"},
        },
        "gemini": {"error": {"code": 429, "message": "slow down", "status": "RESOURCE_EXHAUSTED"}},
    }[vendor]
    sleeps = Sleeps()
    with FakeServer(Reply(429, busy, headers={"retry-after": "3"}), Reply(200, ok)) as server:
        draft = _run(spec, server, monkeypatch, sleeps)
        bodies = server.bodies()
    assert len(sleeps.waits) == 1 and sleeps.waits[0] >= 3.0  # the vendor's Retry-After
    assert (
        draft.summary == "父の入院で不安な月。\n仕事は今の会社に残ると決めた。"
        and draft.sentiment == -0.6
        and draft.memory_ids == ["mem_1"]
        and draft.message_keys == ["chatgpt:c1:m1"]
    )
    assert draft.citations == [  # one per sentence, as the model gave them
        {"memory_ids": ["mem_1"], "message_keys": ["chatgpt:c1:m1"]},
        {"memory_ids": ["mem_1"], "message_keys": []},
    ]
    assert draft.input_tokens > 0 and draft.output_tokens > 0
    assert (
        all(SECRET not in b for b in bodies) and "memoryIds" in bodies[-1]
    )  # the response schema went


def test_an_answer_outside_the_schema_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    bad = dict(ANSWER, sentiment=3.0)
    with (
        FakeServer(Reply(200, openai_chat(json.dumps(bad)))) as server,
        pytest.raises(TerminalDraftError),
    ):
        _run("openai:gpt-test", server, monkeypatch, Sleeps())
