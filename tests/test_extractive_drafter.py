"""The offline extractive drafter, the scripted fake and the provider registry."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from core.errors import ConfigError, TerminalDraftError, TransientDraftError
from core.models import Channel, Conversation, DraftOutput, MemoryIndexEntry, Message, Provenance
from core.ports import Drafter
from prompts.case_record import PROMPT_VERSION, build_prompt
from providers import get_drafter
from providers.extractive import ExtractiveDrafter
from providers.fake import ScriptedDrafter
from stages.prefilter import prefilter
from tests.conftest import REAL as SHARED_REAL

T0 = datetime(2024, 3, 12, 21, 5, tzinfo=UTC)
REAL_CHATGPT = SHARED_REAL / "chatgpt"
FIXTURE = REAL_CHATGPT / "my_chat_gpt-history_download-conversations.subset.json"


def make_conv(
    turns: list[tuple[str, str]],
    *,
    key: str = "chatgpt:c1",
    title: str | None = None,
    times: bool = True,
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
            created_at=T0 + timedelta(minutes=3 * i) if times else None,
            position=i,
        )
        for i, (role, text) in enumerate(turns)
    ]
    return Conversation(
        key=key,
        source="chatgpt",
        external_id=key.split(":", 1)[1],
        title=title,
        created_at=T0 - timedelta(days=1),
        messages=messages,
        provenance=Provenance(file="conversations.json", position=0),
    )


def japanese_conv(key: str = "chatgpt:ja1") -> Conversation:
    return make_conv(
        [
            (
                "user",
                "個人開発の家計簿アプリで使うデータベースを選んでいます。SQLiteとPostgreSQLで迷っています。",
            ),
            (
                "assistant",
                "どちらも良い選択肢です。SQLiteは手軽で、PostgreSQLは同時接続に強いです。",
            ),
            (
                "user",
                "将来は複数端末から同期したいので、PostgreSQLにします。"
                "Supabaseの無料枠が使えるから、運用の手間も少ないです。",
            ),
            ("assistant", "良い判断だと思います。"),
            ("user", "バックアップの方法はまだ決まっていない。"),
        ],
        key=key,
    )


def english_conv(
    key: str = "chatgpt:en1", title: str | None = "Job queue for the shop"
) -> Conversation:
    return make_conv(
        [
            ("user", "Our webshop sends order e-mails synchronously. Should we use Celery or RQ?"),
            ("assistant", "Celery has more features; RQ is simpler to run."),
            ("user", "I decided to go with RQ because we only need one simple queue."),
            ("assistant", "Sounds good."),
            ("user", "Not sure yet how to monitor failed jobs."),
        ],
        key=key,
        title=title,
    )


def assert_quotes_verbatim(conv: Conversation, output: DraftOutput) -> None:
    texts = {m.key: m.text for m in conv.messages}
    for record in output.records:
        assert record.evidence, "every record has evidence"
        for pointer in record.evidence:
            assert pointer.message_key in texts
            assert pointer.quote_hint
            assert pointer.quote_hint in texts[pointer.message_key]


# ---------------------------------------------------------------- the extractive drafter


def test_japanese_conversation_gives_a_japanese_decision_record() -> None:
    conv = japanese_conv()
    out = ExtractiveDrafter().draft([conv], [])
    assert out.model == "extractive:v1"
    assert out.prompt_version == PROMPT_VERSION
    [record] = out.records
    assert record.memory_kind == "decision"
    assert record.action == "create"
    assert record.draft_id == ""
    for heading in ("## 背景", "## 決定", "## 理由", "## 未解決"):
        assert heading in record.canonical_summary
    assert "Background" not in record.canonical_summary
    assert "PostgreSQLにします" in record.canonical_summary
    assert record.index_summary == "将来は複数端末から同期したいので、PostgreSQLにします。"
    assert record.title == "個人開発の家計簿アプリで使うデータベースを選んでいます"
    assert {"PostgreSQL", "SQLite", "Supabase"} <= set(record.aliases)
    assert record.tags[:2] == ["chatgpt", "decision"]
    assert "postgresql" in record.tags
    assert record.source_conversation_keys == [conv.key]
    assert record.inferences == []
    assert "将来は複数端末から同期したいので、PostgreSQLにします。" in record.stated_facts
    assert_quotes_verbatim(conv, out)


def test_evidence_points_at_the_persons_decision_and_reason() -> None:
    conv = japanese_conv()
    [record] = ExtractiveDrafter().draft([conv], []).records
    person_keys = {m.key for m in conv.messages if m.channel == Channel.PERSON}
    assert {p.message_key for p in record.evidence} <= person_keys
    assert record.evidence[0].message_key == f"{conv.key}:n2"
    assert record.evidence[0].quote_hint == "将来は複数端末から同期したいので、PostgreSQLにします。"
    assert 1 <= len(record.evidence) <= 4


def test_times_come_from_the_messages_never_now() -> None:
    conv = japanese_conv()
    before = datetime.now(UTC)
    [record] = ExtractiveDrafter().draft([conv], []).records
    assert record.occurred_at == T0  # the first message's own time
    assert record.valid_from == T0 + timedelta(minutes=6)  # the decision message
    assert record.occurred_at is not None and record.occurred_at < before


def test_without_message_times_the_conversation_time_is_used() -> None:
    conv = make_conv([("user", "I decided to learn Go."), ("assistant", "Nice.")], times=False)
    [record] = ExtractiveDrafter().draft([conv], []).records
    assert record.occurred_at == conv.created_at
    assert record.valid_from == conv.created_at


def test_english_conversation_gives_english_headings() -> None:
    conv = english_conv()
    out = ExtractiveDrafter().draft([conv], [])
    [record] = out.records
    assert record.title == "Job queue for the shop"
    assert record.memory_kind == "decision"
    for heading in ("## Background", "## Decision", "## Reasons", "## Open points"):
        assert heading in record.canonical_summary
    assert record.index_summary.startswith("I decided to go with RQ")
    assert len(record.index_summary) <= 140
    assert {"Celery", "RQ"} <= set(record.aliases)
    assert len(record.aliases) <= 8
    assert_quotes_verbatim(conv, out)


def test_drafting_is_deterministic() -> None:
    convs = [japanese_conv(), english_conv()]
    context = [
        MemoryIndexEntry(id="m1", title="x", index_summary="y", kind="decision", current_revision=1)
    ]
    first = ExtractiveDrafter().draft(convs, context)
    second = ExtractiveDrafter().draft(convs, context)
    assert first.model_dump_json() == second.model_dump_json()
    assert [r.identity() for r in first.records] == [r.identity() for r in second.records]


def test_append_when_the_context_holds_the_same_conversation() -> None:
    conv = english_conv()
    entry = MemoryIndexEntry(
        id="mem_42",
        title="Something else",
        index_summary="RQ for the shop",
        kind="decision",
        current_revision=3,
        source_conversation_keys=[conv.key],
    )
    [record] = ExtractiveDrafter().draft([conv], [entry]).records
    assert (record.action, record.target_memory_id, record.expected_revision) == (
        "append",
        "mem_42",
        3,
    )


def test_the_same_title_alone_is_a_new_case() -> None:
    """Two chats the export titles alike (same-day duplicates) are two cases."""
    conv = english_conv(key="chatgpt:en2")
    entry = MemoryIndexEntry(
        id="mem_7",
        title="Job queue for the shop",
        index_summary="",
        kind="decision",
        current_revision=5,
    )
    [record] = ExtractiveDrafter().draft([conv], [entry]).records
    assert (record.action, record.target_memory_id, record.expected_revision) == (
        "create",
        None,
        None,
    )


def bike_context() -> list[MemoryIndexEntry]:
    return [
        MemoryIndexEntry(
            id="mem_bike",
            title="通勤用の自転車",
            index_summary="クロスバイクのEscape R3にする。",
            kind="decision",
            current_revision=2,
            source_conversation_keys=["chatgpt:old"],
        ),
        MemoryIndexEntry(
            id="mem_tea",
            title="紅茶の淹れ方",
            index_summary="ポットを温めてから淹れる。",
            kind="lesson",
            current_revision=1,
        ),
        MemoryIndexEntry(
            id="mem_rent",
            title="駐輪場の契約",
            index_summary="マンションの駐輪場を借りることにする。",
            kind="decision",
            current_revision=1,
        ),
    ]


def test_a_change_of_mind_appends_to_the_decision_it_changes() -> None:
    conv = make_conv(
        [
            (
                "user",
                "春にクロスバイクのEscape R3にするって決めたけど、やっぱり電動アシストにしようと思う。"
                "坂道の多いルートに引っ越したので。",
            ),
            ("assistant", "電動アシストなら坂道も楽です。"),
            (
                "user",
                "パナソニックのベロスターにする。理由は、坂道でも汗をかかないのと、バッテリーが長持ちするから。"
                "まだ決めてないのは、充電を会社でできるかどうか。",
            ),
        ],
        key="chatgpt:bike2",
    )
    [record] = ExtractiveDrafter().draft([conv], bike_context()).records
    assert (record.action, record.target_memory_id, record.expected_revision) == (
        "append",
        "mem_bike",
        2,
    )
    # without a change of mind the same names make a case of its own
    calm = make_conv(
        [
            ("user", "クロスバイクのEscape R3のタイヤの空気圧はどのくらい？"),
            ("assistant", "5気圧ほどです。"),
        ]
    )
    [fresh] = ExtractiveDrafter().draft([calm], bike_context()).records
    assert fresh.action == "create"


def test_decision_reasons_and_open_points_land_in_their_sections() -> None:
    conv = make_conv(
        [
            (
                "user",
                "週末の料理教室、和食コースと製菓コースで迷ってる。月謝はどちらも8000円くらい。",
            ),
            ("assistant", "どちらも初心者向けです。"),
            (
                "user",
                "ありがとう。和食コースに申し込む。決め手は平日の夕飯にすぐ使えることと、"
                "先生の説明がていねいだったこと。包丁を買うかはまだ迷ってる。",
            ),
        ]
    )
    [record] = ExtractiveDrafter().draft([conv], []).records
    sections = _sections(record.canonical_summary)
    assert "和食コースに申し込む" in sections["決定"]
    assert "平日の夕飯にすぐ使える" in sections["理由"]
    assert "包丁を買うかはまだ迷ってる" in sections["未解決"]
    assert "ありがとう" not in record.canonical_summary
    quotes = " ".join(p.quote_hint for p in record.evidence)
    for phrase in ("和食コースに申し込む", "平日の夕飯にすぐ使える", "包丁を買うか"):
        assert phrase in quotes
    assert record.stated_facts and all(
        f in "".join(m.text for m in conv.messages) for f in record.stated_facts
    )


def test_english_decision_after_the_answer_and_its_reasons() -> None:
    conv = make_conv(
        [
            (
                "user",
                "I keep forgetting to water the balcony plants. I travel for work twice a month, "
                "so a manual routine never lasts.",
            ),
            ("assistant", "A drip kit or self-watering pots both work."),
            (
                "user",
                "Thanks. I'll buy the drip kit with the timer. Also the pots would not fit the railing. "
                "Should I add a rain sensor?",
            ),
        ],
        key="chatgpt:plants",
    )
    [record] = ExtractiveDrafter().draft([conv], []).records
    sections = _sections(record.canonical_summary)
    assert "I'll buy the drip kit with the timer." in sections["Decision"]
    assert "a manual routine never lasts" in sections["Reasons"]
    assert "Should I add a rain sensor?" in sections["Open points"]


def test_an_open_point_settled_later_moves_to_the_resolved_list() -> None:
    conv = make_conv(
        [
            ("user", "ベランダの物干しを新しくしたい。"),
            ("assistant", "伸縮式が人気です。"),
            (
                "user",
                "伸縮式の物干しにする。理由は狭いベランダでも畳めるから。物干しの色はまだ迷ってる。",
            ),
            ("assistant", "白かシルバーが多いです。"),
            ("user", "物干しの色はシルバーにした。"),
        ]
    )
    [record] = ExtractiveDrafter().draft([conv], []).records
    sections = _sections(record.canonical_summary)
    assert (
        "物干しの色はまだ迷ってる" in sections["解決済み"]
        and "シルバーにした" in sections["解決済み"]
    )
    assert "未解決" not in sections
    # the person said both: stated facts, not the drafter's inference
    assert "物干しの色はシルバーにした。" in record.stated_facts and record.inferences == []


def test_a_change_of_mind_inside_one_batch_gives_one_record_with_its_history() -> None:
    first = make_conv(
        [("user", "通勤はバスにする。理由は雨の日も濡れないから。"), ("assistant", "了解です。")],
        key="chatgpt:c-a",
    )
    later = make_conv(
        [
            (
                "user",
                "通勤はバスにするって決めたけど、やっぱり自転車通勤にする。バスが毎朝遅れるので。",
            ),
            ("assistant", "良いと思います。"),
        ],
        key="chatgpt:c-b",
    )
    [record] = ExtractiveDrafter().draft([first, later], []).records
    sections = _sections(record.canonical_summary)
    assert "自転車通勤にする" in sections["決定"] and "バスにする。" not in sections["決定"]
    assert "通勤はバスにする。" in sections["経緯"] and "雨の日も濡れない" in sections["経緯"]
    assert record.source_conversation_keys == ["chatgpt:c-a", "chatgpt:c-b"]
    assert {p.message_key.rsplit(":", 1)[0] for p in record.evidence} == {
        "chatgpt:c-a",
        "chatgpt:c-b",
    }


def _sections(summary: str) -> dict[str, str]:
    from core.sections import Sections

    return {name: "\n".join(lines) for name, lines in Sections.parse(summary).parts}


def test_title_falls_back_to_the_first_person_line() -> None:
    conv = make_conv(
        [
            ("user", "Moving my blog from WordPress to Hugo\nWhat do I lose?"),
            ("assistant", "Plugins."),
        ],
        title=None,
    )
    [record] = ExtractiveDrafter().draft([conv], []).records
    assert record.title == "Moving my blog from WordPress to Hugo"


def test_a_conversation_without_drafting_text_gives_no_record() -> None:
    empty = make_conv([("user", "  "), ("assistant", "")], key="chatgpt:empty")
    out = ExtractiveDrafter().draft([empty, english_conv()], [])
    assert [r.source_conversation_keys for r in out.records] == [["chatgpt:en1"]]


def test_assistant_fallback_when_the_person_has_no_sentences() -> None:
    conv = make_conv(
        [("user", "```\nls -la\n```"), ("assistant", "This lists all files. Hidden ones too.")]
    )
    out = ExtractiveDrafter().draft([conv], [])
    [record] = out.records
    assert [(p.message_key, p.quote_hint) for p in record.evidence] == [
        (f"{conv.key}:n1", "This lists all files.")
    ]
    assert_quotes_verbatim(conv, out)


def test_token_estimates_follow_the_prompt_and_the_output() -> None:
    convs = [japanese_conv()]
    out = ExtractiveDrafter().draft(convs, [])
    static, dynamic = build_prompt(convs, [])
    assert out.input_tokens == pytest.approx((len(static) + len(dynamic)) / 4, abs=2)
    assert out.output_tokens > 0


def test_summary_is_capped() -> None:
    long_turns = [
        ("user", f"I decided to keep note {i} because it matters a lot to me. " * 5)
        for i in range(60)
    ]
    conv = make_conv(
        [t for pair in zip(long_turns, [("assistant", "ok")] * 60, strict=True) for t in pair]
    )
    [record] = ExtractiveDrafter().draft([conv], []).records
    assert len(record.canonical_summary) <= 4000
    assert len(record.evidence) <= 16


# ---------------------------------------------------------------- the scripted fake


def test_scripted_drafter_plays_its_script_then_falls_back() -> None:
    conv = english_conv()
    scripted = DraftOutput(records=[], model="fake:scripted", prompt_version=PROMPT_VERSION)
    fake = ScriptedDrafter(
        [
            TransientDraftError("rate limited", retry_after=2.0),
            scripted,
            lambda convs, ctx: DraftOutput(
                records=[],
                model="fake:scripted",
                prompt_version=PROMPT_VERSION,
                input_tokens=len(convs),
            ),
            TerminalDraftError("truncated output"),
        ]
    )
    assert isinstance(fake, Drafter)
    with pytest.raises(TransientDraftError):
        fake.draft([conv], [])
    assert fake.draft([conv], []) is scripted
    assert fake.draft([conv, japanese_conv()], []).input_tokens == 2
    with pytest.raises(TerminalDraftError):
        fake.draft([conv], [])
    fallback = fake.draft([conv], [])
    assert fallback.model == "fake:scripted"
    assert [r.title for r in fallback.records] == ["Job queue for the shop"]
    assert fake.history == [
        ["chatgpt:en1"],
        ["chatgpt:en1"],
        ["chatgpt:en1", "chatgpt:ja1"],
        ["chatgpt:en1"],
        ["chatgpt:en1"],
    ]
    assert fake.remaining == 0


# ---------------------------------------------------------------- the provider registry


@pytest.mark.parametrize(
    ("spec", "model"),
    [
        ("extractive", "extractive:v1"),
        ("extractive:v1", "extractive:v1"),
        ("fake:scripted", "fake:scripted"),
    ],
)
def test_get_drafter(spec: str, model: str) -> None:
    drafter = get_drafter(spec)
    assert isinstance(drafter, Drafter)
    assert drafter.model == model
    assert drafter.prompt_version == PROMPT_VERSION


@pytest.mark.parametrize(
    ("spec", "env"),
    [
        ("openai:gpt-4o-mini", "OPENAI_API_KEY"),
        ("anthropic:claude-sonnet", "ANTHROPIC_API_KEY"),
        ("gemini:2.5-flash", "GEMINI_API_KEY"),
    ],
)
def test_real_providers_need_their_key(
    spec: str, env: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for var in (
        "OPENAI_API_KEY",
        "ANTHROPIC_API_KEY",
        "GEMINI_API_KEY",
        "GOOGLE_API_KEY",
        "OPENAI_BASE_URL",
        "PMEM_OPENAI_BASE_URL",
    ):
        monkeypatch.delenv(var, raising=False)
    with pytest.raises(ConfigError) as info:
        get_drafter(spec)
    assert env in str(info.value) + str(info.value.hint or "")


def test_unknown_provider_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match="extractive, fake, openai, anthropic, gemini"):
        get_drafter("mistral:large")
    with pytest.raises(ConfigError):
        get_drafter("extractive:v9")


# ---------------------------------------------------------------- the real export


@pytest.mark.needs_shared
def test_real_chatgpt_conversations_are_kept_and_drafted_with_verbatim_quotes() -> None:
    from importers.chatgpt import iter_conversations

    convs = [c for c in iter_conversations(FIXTURE) if isinstance(c, Conversation)]
    assert len(convs) == 6
    kept = [c for c in convs if prefilter(c).keep]
    assert len(kept) >= 3
    titles = {c.title for c in kept}
    assert {"Django Multi-DB Setup", "Logo design for Pieterkuppens.net."} <= titles
    drafter = ExtractiveDrafter()
    for conv in kept:
        out = drafter.draft([conv], [])
        assert len(out.records) == 1
        record = out.records[0]
        assert record.occurred_at is not None and record.occurred_at.year == 2023
        assert_quotes_verbatim(conv, out)
        person_keys = {m.key for m in conv.messages if m.channel == Channel.PERSON}
        assert all(p.message_key in person_keys for p in record.evidence)


def test_result_section_holds_the_persons_result() -> None:
    conv = make_conv(
        [
            ("user", "My backups to S3 keep failing at night."),
            ("assistant", "Check the IAM role."),
            ("user", "Run the fixed script again?"),
            ("assistant", "Yes."),
            ("user", "It turned out the IAM role had expired. That fixed it."),
        ],
        title="Nightly S3 backups",
    )
    [record] = ExtractiveDrafter().draft([conv], []).records
    assert record.memory_kind == "lesson"
    result = record.canonical_summary.split("## Result\n")[1].split("\n\n")[0]
    assert result == "- It turned out the IAM role had expired.\n- That fixed it."


def test_aliases_are_names_a_person_would_search_for() -> None:
    conv = make_conv(
        [
            (
                "user",
                "社内ツールのDBをCloud SQLに移すか迷ってる。クエリは SELECT * FROM runs WHERE NOT done みたいなの。"
                "夜の作業用にヘッドライトのライトも買いたい。",
            ),
            ("assistant", "Cloud SQL なら運用が楽です。"),
            ("user", "Cloud SQLに移すことにする。理由はバックアップを任せられるから。"),
        ],
        title="社内ツールのDB移行",
    )
    [record] = ExtractiveDrafter().draft([conv], []).records
    assert "Cloud SQL" in record.aliases
    assert not {"Cloud", "SQL", "NOT", "SELECT", "ライト", "社内ツールのDB移行"} & set(
        record.aliases
    )


def test_a_coding_session_without_a_title_is_named_by_what_it_was_about() -> None:
    first = (
        "Refactor the importer so that large Codex rollouts stream through RolloutReader instead of "
        "being loaded whole, keep the public API, and add a test for a 2 GB file"
    )
    conv = make_conv(
        [
            ("user", "[REDACTED_PROMPT]"),
            ("assistant", "Done."),
            ("user", first),
            ("assistant", "Patched."),
            ("user", "ok, I'll keep the streaming RolloutReader and drop the old loader."),
        ],
        key="codex:s1",
    ).model_copy(update={"source": "codex"})
    [record] = ExtractiveDrafter().draft([conv], []).records
    assert (
        "REDACTED" not in record.title
        and not record.title.endswith("…")
        and len(record.title) <= 80
    )
    assert record.title != first and "RolloutReader" in record.title
    assert record.index_summary and record.index_summary != record.title


def test_a_short_verdict_and_the_unmarked_reason_after_it() -> None:
    conv = make_conv(
        [
            ("user", "Should I learn Rust or Go first for backend work?"),
            ("assistant", "Go is quicker to productivity."),
            (
                "user",
                "Ok, Go first. The job listings near me mostly ask for Go. Is it worth doing a course or just the tour?",
            ),
        ],
        key="chatgpt:lang",
    )
    [record] = ExtractiveDrafter().draft([conv], []).records
    sections = _sections(record.canonical_summary)
    assert "Ok, Go first." in sections["Decision"]
    assert "The job listings near me mostly ask for Go." in sections["Reasons"]
    assert "Is it worth doing a course or just the tour?" in sections["Open points"]
    # 「…かは電話で確認する」: a point to check later is open
    ja = make_conv(
        [
            ("user", "車検の見積もりを比べた。"),
            ("assistant", "内容も比べましょう。"),
            (
                "user",
                "スタンドの方が安いし、近所で預けやすい。スタンドで車検を受ける。代車が出るかは電話で確認する。",
            ),
        ]
    )
    [rec] = ExtractiveDrafter().draft([ja], []).records
    assert "代車が出るかは電話で確認する" in _sections(rec.canonical_summary)["未解決"]
