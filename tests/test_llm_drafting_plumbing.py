"""The drafting evaluation's plumbing through each LLM adapter (OpenAI, Anthropic, Gemini): a
scripted model behind the local fake vendor server (tests/scripted_model.py) answers from the
prompt it is sent. Checked: the answer schema, evidence hints verified against the source,
the offered context memory and its revision coming back as an append, a change of mind
becoming revision 2 with the old decision in the history, and statedFacts / inferences kept in
the revision and shown by `pmem show`. (The whole corpus through an adapter:
`bench/eval.py --adapter openai|anthropic|gemini`.)"""

from __future__ import annotations

import pytest

from core.models import MemoryIndexEntry
from core.sections import Sections
from providers._retry import RetryPolicy
from stages.drafting import commit_request, offered_targets, refuse_unoffered
from stages.evidence import verify_draft
from tests.scripted_model import ScriptedModel
from tests.test_extractive_drafter import make_conv

FIRST = [
    ("user", "ジムを探してる。駅前の24時間ジムと区のスポーツセンターで迷ってる。"),
    ("assistant", "通う時間帯で選ぶと良いです。"),
    (
        "user",
        "区のスポーツセンターにする。理由は、1回400円で安いのと、プールもあるから。"
        "まだ決めてないのは、平日の夜に通えるかどうか。",
    ),
]
LATER = [
    ("user", "区のスポーツセンターにするって決めたけど、やっぱり駅前の24時間ジムにしようと思う。"),
    ("assistant", "夜遅くでも通えますね。"),
    ("user", "駅前の24時間ジムにする。理由は、残業の後でも行けるから。"),
]


def _adapter(name: str, url: str):
    policy = RetryPolicy(max_attempts=1)
    if name == "openai":
        from providers.openai_provider import OpenAIDrafter

        return OpenAIDrafter("gpt-scripted", api_key="scripted", base_url=url + "/v1", retry=policy)
    if name == "anthropic":
        from providers.anthropic_provider import AnthropicDrafter

        return AnthropicDrafter("claude-scripted", api_key="scripted", base_url=url, retry=policy)
    from providers.gemini_provider import GeminiDrafter

    return GeminiDrafter("gemini-scripted", api_key="scripted", base_url=url, retry=policy)


def _commit(store, drafter, conv, context):
    out = drafter.draft([conv], context)
    [record] = out.records
    messages = {m.key: m for m in conv.messages}
    v = refuse_unoffered(
        verify_draft(record.model_copy(update={"draft_id": "d00"}), messages),
        offered_targets(context),
    )
    assert v.committable and not v.rejected, v.rejected  # every evidence hint found verbatim
    req = commit_request(
        v,
        batch_id=f"b-{conv.key}",
        run_id="r1",
        model=out.model,
        prompt_version=out.prompt_version,
        proposal_id=None,
    )
    return record, store.commit(req)


@pytest.mark.parametrize("adapter", ["openai", "anthropic", "gemini"])
def test_the_drafting_plumbing_through_each_adapter(adapter: str, store, pmem_env, capsys) -> None:
    with ScriptedModel() as server:
        drafter = _adapter(adapter, server.url)
        first, made = _commit(
            store, drafter, make_conv(FIRST, key="chatgpt:gym1", title="ジム選び"), []
        )
        assert made.created and first.stated_facts and first.inferences == []
        view = store.get(made.memory_id)
        entry = MemoryIndexEntry(
            id=view.id,
            title=view.title,
            index_summary=view.index_summary,
            kind=view.kind,
            current_revision=view.current_revision,
            aliases=view.aliases,
        )
        other = MemoryIndexEntry(
            id="mem_other",
            title="紅茶",
            index_summary="ポットを温める",
            kind="lesson",
            current_revision=1,
        )
        later, appended = _commit(
            store, drafter, make_conv(LATER, key="chatgpt:gym2", title="ジム 変更"), [other, entry]
        )
        # the context memories reached the model in the prompt and its append came back
        assert f"id: {made.memory_id}" in server.requests[-1].text
        assert (later.action, later.target_memory_id, later.expected_revision) == (
            "append",
            made.memory_id,
            1,
        )
        assert appended.revision == 2 and appended.memory_id == made.memory_id
    view = store.get(made.memory_id, history=True)
    sections = {n: "\n".join(ls) for n, ls in Sections.parse(view.canonical_summary).parts}
    assert (
        "駅前の24時間ジムにする" in sections["決定"]
        and "スポーツセンターにする。" not in sections["決定"]
    )
    assert (
        "区のスポーツセンターにする。" in sections["経緯"] and "1回400円で安い" in sections["経緯"]
    )
    assert "平日の夜に通えるかどうか" in sections["未解決"]
    record = view.revisions[-1]["record"]
    assert "区のスポーツセンターにする。" in record["stated_facts"]  # both revisions' facts kept
    assert any("駅前の24時間ジムにする" in f for f in record["stated_facts"])
    assert {e["source_key"].rsplit(":", 1)[0] for e in view.evidence} == {
        "chatgpt:gym1",
        "chatgpt:gym2",
    }

    # `pmem show` prints the stated facts and the inferences apart
    store.commit(_with_inference(store, made.memory_id))
    from typer.testing import CliRunner

    from cli.main import app

    shown = CliRunner().invoke(app, ["show", made.memory_id])
    assert shown.exit_code == 0, shown.output
    facts = shown.output.split("stated facts")[1]
    assert "区のスポーツセンターにする。" in facts.split("inferences")[0]
    assert "夜に通う人らしい" in facts.split("inferences")[1]


def _with_inference(store, memory_id: str):
    from core.models import CommitRequest, EvidenceIn

    view = store.get(memory_id)
    return CommitRequest(
        memory_id=memory_id,
        expected_revision=view.current_revision,
        kind=view.kind,
        title=view.title,
        canonical_summary=view.canonical_summary,
        index_summary=view.index_summary,
        evidence=[EvidenceIn(source_key="chatgpt:gym2:n2", text="駅前の24時間ジムにする。")],
        inferences=["夜に通う人らしい"],
        reason="append",
        idempotency_key="inference-1",
    )
