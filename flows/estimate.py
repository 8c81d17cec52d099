"""What a backfill would send to the model and cost, before anything is spent or written:
the export read (not imported) or the ledger's pending conversations, packed as the plan would
pack them, priced per token.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from core.models import BatchMember, Conversation
from flows.drafting import paths_of
from flows.planning import apply_consent
from flows.resources import Pipeline, drafted
from prompts.case_record import static_instructions
from providers.pricing import PRICES_AS_OF, cost_at, price_for
from stages.batching import pack
from stages.exclude import excluded_by
from stages.prefilter import RULE_VERSION
from state.cost import CostMeter
from state.files import read_result
from state.summary import count_rules

OUTPUT_TOKENS_PER_CONVERSATION = 700  # a detailed case record, as the prompt asks for
REQUESTS_PER_BATCH = 1  # the memory API: the context look-up of each batch
REQUESTS_PER_COMMIT = 2  # and a proposal and a commit per record


def estimate_tokens(text: str) -> int:
    """A conservative token count: about 4 ASCII characters per token, one per other character
    (Japanese text is close to one token per character in current tokenizers)."""
    ascii_chars = sum(1 for ch in text if ord(ch) < 128)
    return -(-ascii_chars // 4) + (len(text) - ascii_chars)


@dataclass
class _Candidate:
    """A kept conversation as the estimate sees it: no text, its token count."""

    key: str
    content_hash: str
    chars: int
    tokens: int
    title: str | None
    created: datetime | None


def _scan_export(
    p: Pipeline, source: str, export_path: str
) -> tuple[list[_Candidate], dict[str, int]]:
    """Read the export without storing anything: each conversation's content hash, its
    prefilter decision (the stored one when the ledger has this content, else the prefilter's
    answer now), and for a kept one its size in tokens."""
    from importers import ReadReport, iter_source
    from stages.prefilter import prefilter
    from store.ledger import digest, storable

    overrides = p.ledger.overrides()
    stats = {"conversations": 0, "kept": 0}
    out: list[_Candidate] = []
    chunk: list[Conversation] = []

    def flush() -> None:
        state = p.ledger.stored_state(chunk, RULE_VERSION)
        for conv in chunk:
            key, chash = storable(conv.key), digest(conv)[0]
            have = state.get(key)
            if have is not None and have[0] == chash and have[1] is not None:
                keep = overrides.get(key, have[1])
            else:
                keep = prefilter(conv, overrides, content_hash=chash).keep
            stats["conversations"] += 1
            if keep:
                stats["kept"] += 1
                texts = [m.text for m in drafted(p, conv).drafting_messages]
                out.append(
                    _Candidate(
                        key,
                        chash,
                        sum(len(t) for t in texts),
                        sum(estimate_tokens(t) for t in texts),
                        conv.title,
                        conv.created_at or conv.updated_at,
                    )
                )
        chunk.clear()

    for item in iter_source(source, Path(export_path), ReadReport()):
        if isinstance(item, Conversation):
            chunk.append(item)
            if len(chunk) >= 250:
                flush()
    flush()
    return out, stats


def _ledger_candidates(p: Pipeline, source: str) -> list[_Candidate]:
    out = []
    for c in p.ledger.kept_conversations(source, RULE_VERSION):
        conv = drafted(p, p.ledger.load(c["conversation_key"]))
        texts = [m.text for m in conv.drafting_messages]
        chars = sum(len(t) for t in texts) if p.options.include_others else c["drafting_chars"]
        out.append(
            _Candidate(
                c["conversation_key"],
                c["content_hash"],
                chars,
                sum(estimate_tokens(t) for t in texts),
                c["title"],
                c["created_at"] or c["updated_at"],
            )
        )
    return out


def estimate_run(p: Pipeline, source: str, export_path: str | None) -> dict[str, Any]:
    """What a backfill would send to the model and what it would cost, before spending
    anything, and without writing anything: the export is read, not imported (``None``: what
    --pending would draft from the ledger)."""
    apply_consent(p, source, required=False)  # a remembered consent's exclusions count too
    model, pv = p.drafter.model, p.drafter.prompt_version
    if export_path:
        candidates, stats = _scan_export(p, source, export_path)
    else:
        candidates = _ledger_candidates(p, source)
        stats = {"conversations": len(candidates), "kept": len(candidates)}
    p.excluded = {}
    if p.excludes:
        for c in candidates:
            rule = excluded_by(p.excludes, c.key, c.title, c.created)
            if rule is not None:
                p.excluded[c.key] = rule
    candidates = [c for c in candidates if c.key not in p.excluded]
    if p.options.redraft:
        wanted = set(p.options.redraft)
        candidates = [c for c in candidates if c.key in wanted]
    status = (
        {}
        if p.options.redraft is not None
        else p.runs.member_status([(c.key, c.content_hash) for c in candidates], model, pv)
    )
    already = sum(status.get(c.key) in ("drafted", "committed") for c in candidates)
    todo = [c for c in candidates if status.get(c.key) not in ("drafted", "committed")]
    batches = pack(
        [
            BatchMember(conversation_key=c.key, content_hash=c.content_hash, chars=c.chars)
            for c in todo
        ],
        max_conversations=p.settings.batch_max_conversations,
        max_chars=p.settings.batch_max_chars,
        prompt_version=pv,
        model=model,
    )
    by_key = {c.key: c for c in todo}
    out = _estimate_of(p, [[by_key[m.conversation_key] for m in b.members] for b in batches])
    if out["conversations_to_draft"]:
        out["sources"] = [source]
    return {
        "estimate": True,
        "model": model,
        "conversations": stats["conversations"],
        "kept": stats["kept"],
        **out,
        "already_drafted": already,
        "excluded": len(p.excluded),
        "include_others": p.options.include_others,
        "excluded_by_rule": count_rules(p.excluded),
        "exclude_rules": [r.text for r in p.excludes],
    }


def batch_tokens(p: Pipeline, chars: int, tokens: int, conversations: int) -> tuple[int, int]:
    """The estimated (input, output) tokens of drafting one batch: the static prompt once per
    request (a batch over the character cap is a request per chunk), its conversations' tokens,
    a detailed case record's answer per conversation. The dry run's estimate and --max-cost's
    admission of each batch (``open_meter``) both count this way."""
    chunks = max(1, -(-chars // p.settings.batch_max_chars))
    return chunks * static_tokens() + tokens, OUTPUT_TOKENS_PER_CONVERSATION * conversations


def _estimate_of(p: Pipeline, batches: list[list[_Candidate]]) -> dict[str, Any]:
    """Tokens, cost, commits and (over HTTP) the memory API's time for these batches."""
    static = static_tokens()
    input_tokens = output_tokens = conversations = characters = 0
    dates: list[datetime] = []
    for members in batches:
        chars = sum(c.chars for c in members)
        tokens_in, tokens_out = batch_tokens(p, chars, sum(c.tokens for c in members), len(members))
        input_tokens += tokens_in
        output_tokens += tokens_out
        conversations += len(members)
        characters += chars
        dates += [c.created for c in members if c.created is not None]
    model = p.drafter.model
    price = p.options.price if p.options.price is not None else price_for(model)
    cost = None if price is None else cost_at(price, input_tokens, output_tokens)
    commits = conversations  # about one case record per conversation
    out: dict[str, Any] = {
        "batches_to_draft": len(batches),
        "conversations_to_draft": conversations,
        "estimated_input_tokens": input_tokens,
        "estimated_output_tokens": output_tokens,
        "estimated_cost_usd": cost,
        "expected_commits": commits,
        "input_tokens": input_tokens,
        "output_tokens": output_tokens,
        "cost_usd": cost,
        "static_prompt_tokens": static,
        "price_as_of": PRICES_AS_OF,
        "price_usd_per_million": None
        if price is None
        else {"input": price.input_per_million, "output": price.output_per_million},
        # what would leave the machine with a remote drafter (shown before consent)
        "characters": characters,
        "sources": [],
        "first_date": min(dates).date().isoformat() if dates else None,
        "last_date": max(dates).date().isoformat() if dates else None,
        "memory_api_seconds": None,
    }
    if p.settings.memory_url:  # over HTTP the memory API's budget paces the commits
        limit, window = p.settings.budget
        requests = REQUESTS_PER_BATCH * len(batches) + REQUESTS_PER_COMMIT * commits
        out["memory_api_requests"] = requests
        out["memory_api_seconds"] = (
            0.0 if requests <= limit else float(-(-requests // limit) - 1) * window
        )
    return out


def planned_estimate(p: Pipeline, source: str, batch_ids: list[str]) -> dict[str, Any]:
    """The estimate of a planned run: the batches not yet drafted, their conversations read
    from the ledger (announced before any drafting)."""
    groups: list[list[_Candidate]] = []
    for batch_id in batch_ids:
        row = p.runs.batch(batch_id)
        if row is None or read_result(paths_of(p, row)[0], batch_id) is not None:
            continue
        group = []
        for m in row["members"]:
            conv = drafted(p, p.ledger.load(m["conversation_key"]))
            texts = [msg.text for msg in conv.drafting_messages]
            group.append(
                _Candidate(
                    m["conversation_key"],
                    m["content_hash"],
                    sum(len(t) for t in texts),
                    sum(estimate_tokens(t) for t in texts),
                    None,
                    conv.created_at or conv.updated_at,
                )
            )
        groups.append(group)
    out = _estimate_of(p, groups)
    if out["conversations_to_draft"]:
        out["sources"] = [source]
    return out | {"model": p.drafter.model}


_STATIC_TOKENS: list[int] = []


def static_tokens() -> int:
    if not _STATIC_TOKENS:
        _STATIC_TOKENS.append(estimate_tokens(static_instructions()))
    return _STATIC_TOKENS[0]


def open_meter(p: Pipeline, run_id: str) -> CostMeter:
    """The run's cost meter: the model's price (``--price`` or the listed one), a batch's (or a
    request's) estimate as the dry run counts it (``batch_tokens``), held to ``--max-cost``."""
    price = p.options.price if p.options.price is not None else price_for(p.drafter.model)

    def estimate(conversations: list[Conversation]) -> float:
        assert price is not None
        texts = [m.text for c in conversations for m in c.drafting_messages]
        tokens = batch_tokens(
            p,
            sum(len(t) for t in texts),
            sum(estimate_tokens(t) for t in texts),
            len(conversations),
        )
        return cost_at(price, *tokens)

    def cost(input_tokens: int, output_tokens: int) -> float:
        assert price is not None
        return cost_at(price, input_tokens, output_tokens)

    return CostMeter(
        p.runs, run_id, price=price, max_cost=p.options.max_cost, estimate=estimate, cost=cost
    )
