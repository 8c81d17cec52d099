"""The MCP tools' results as plain text: search hits, one memory, a recall, related experiences
(what ``mcp_server.server``'s tools return; no structured output, ADR 0015)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from core.models import MemoryView
from search.reader import RankedHit

# ---------------------------------------------------------------- text rendering


def _n(count: int, word: str, plural: str | None = None) -> str:
    """``1 message``, ``2 messages``."""
    return f"{count} {word if count == 1 else plural or word + 's'}"


def render_hits(query: str, hits: list[RankedHit], answer: dict[str, Any] | None = None) -> str:
    """Search hits as text; ``answer`` (``ReadService.last_answer``): whether the answer is
    probably among them and the confidence (search.confidence), said in the first line."""
    if not hits:
        return f"no memories match {query!r}. Try other words, or recall for raw conversations."
    lines = [
        f"{_n(len(hits), 'memory', 'memories')} for {query!r} (best first; get_memory(memory_id) for one)"
        + (_answer_note(answer) if answer else "")
        + ":"
    ]
    for h in hits:
        when = f" | {h.occurred_at.date().isoformat()}" if h.occurred_at else ""
        ranks = ", ".join(f"{k} #{v}" for k, v in h.ranks.items())
        lines.append(
            f"- {h.id} | {h.kind}{when} | {h.title} — {' '.join(h.index_summary.split())} "
            f"[rev {h.current_revision}; {ranks}]"
        )
        if h.sources:
            lines.append(f"  from: {', '.join(h.sources)}")
    return "\n".join(lines)


def _answer_note(answer: dict[str, Any]) -> str:
    said = "" if answer["answerable"] else "; probably not in the owner's memory"
    return f"{said}; confidence {answer['confidence']:.2f}"


def render_memory(view: MemoryView, *, evidence: bool, history: bool) -> str:
    lines = [
        f"{view.title}",
        f"id: {view.id} | kind: {view.kind} | revision: {view.current_revision} | status: {view.status}",
    ]
    if view.occurred_at:
        lines.append(f"occurred: {view.occurred_at.isoformat()}")
    if view.aliases:
        lines.append(f"aliases: {', '.join(view.aliases)}")
    if view.tags:
        lines.append(f"tags: {', '.join(view.tags)}")
    lines += ["", view.canonical_summary]
    if view.stated_facts:
        lines += ["", "stated by a client (not evidence):"] + [f"- {f}" for f in view.stated_facts]
    if evidence:
        lines += ["", f"evidence ({len(view.evidence)}):"]
        lines += [f"- [{e['source_key']}] {e['text']}" for e in view.evidence]
    elif view.evidence:
        lines += [
            "",
            f"({_n(len(view.evidence), 'evidence excerpt')}: get_memory with include_evidence=true)",
        ]
    if history:
        lines += ["", "revisions:"] + [_revision_line(r) for r in view.revisions]
    return "\n".join(lines)


def render_recall(result: Any) -> str:
    """A recall as text: the range and terms, then each message with its time, role, message
    key (usable as evidence), the conversation it is in and, where one exists, the memory
    drafted from that conversation (the one citing this message first); a message on a ChatGPT
    branch that was not taken is marked."""
    head = []
    if result.marker:
        until = result.marker["next_at"] or "now (it is the latest marker)"
        head.append(f"since marker {result.marker['id']} ({result.marker['at']}) until {until}")
    if result.range:
        source = f"from {result.range['matched']!r}; " if result.range["matched"] else ""
        head.append(
            f"range: {result.range['start']} – {result.range['end'] or 'now'} "
            f"({source}{_n(result.in_range or 0, 'message')} in range)"
        )
    head.append(f"searched for: {result.terms!r}" if result.terms else "listing the range")
    if result.without_vectors:
        head.append(
            f"{_n(result.without_vectors, 'message')} without vectors yet (pmem reindex embeds them)"
        )
    if result.branches_skipped:
        head.append(
            f"{_n(result.branches_skipped, 'message')} on branches not taken left out "
            "(include_branches=true shows them)"
        )
    if not result.hits:
        return "\n".join(head + ["no messages found."])
    head.append(
        f"confidence that the answer is among them: {result.confidence:.2f}"
        + ("" if result.answerable else " (probably not in the owner's memory)")
    )
    lines = []
    for h in result.hits:
        when = h.created_at.isoformat() if h.created_at else "?"
        branch = " [branch not taken]" if not h.on_active_path else ""
        title = (
            f"{h.conversation_title} ({h.conversation_key})"
            if h.conversation_title
            else h.conversation_key
        )
        conf = f"; confidence {h.confidence:.2f}" if h.confidence is not None else ""
        lines.append(
            f"- #{h.rank} {when} | {h.role} | message {h.message_key} ({h.match}{conf}){branch}"
        )
        lines.append(f"  conversation: {title}")
        if h.memory:
            others = [m["id"] for m in h.memories if m["id"] != h.memory["id"]]
            more = f" (also drafted from it: {', '.join(others)})" if others else ""
            lines.append(f"  memory: {h.memory['id']} {h.memory['title']}{more}")
        lines.append(f"  {h.text}")
    return "\n".join(head + [f"{_n(len(result.hits), 'message')}, most relevant first:"] + lines)


def render_related(text: str, result: Any) -> str:
    """Related experiences as text: the attention concepts, then each experience with its
    path, why it came up, its id, title and evidence message keys."""
    if not result.attention:
        return "none of the words names a concept of the owner's memory; try search_memory(query)."
    named = [
        f"{a} (from {result.across_languages[a]!r})" if a in result.across_languages else a
        for a in result.attention
    ]
    head = f"attention concepts: {', '.join(named)}"
    if not result.hits:
        return f"{head}\nno experiences linked to them at weight ≥ {result.min_weight:.2f}."
    lines = [
        head,
        f"{_n(len(result.hits), 'experience')}, best first (get_memory(memory_id) for one):",
    ]
    for h in result.hits:
        when = f" | {h.occurred_at.date().isoformat()}" if h.occurred_at else ""
        lines.append(f"- {h.memory_id}{when} | {h.title}")
        lines.append(f"  path: {' → '.join(h.path)}; {_why(h)}")
        if h.concepts:
            lines.append(f"  concepts: {', '.join(h.concepts[:10])}")
        for e in h.evidence:
            lines.append(f"  evidence [{e['message_key']}]: {e['quote']}")
    return "\n".join(lines)


def _why(h: Any) -> str:
    steps = "; ".join(
        f"{k.source} —{k.relation}→ {k.target} (weight {k.weight:.2f}"
        f"{'' if k.stated else ', inferred'})"
        for k in h.links
    )
    if h.why == "mentions":
        return f"it mentions {h.path[0]}"
    if h.why == "states":
        return f"this experience states {steps}"
    return f"reached through {steps}"


def _revision_line(r: dict[str, Any]) -> str:
    when = (
        r["created_at"].isoformat()
        if isinstance(r.get("created_at"), datetime)
        else r.get("created_at")
    )
    extra = f" (restored from {r['restored_from']})" if r.get("restored_from") else ""
    return f"- revision {r['revision']}: {r['reason']}{extra} | {when} | client {r['client']} | model {r.get('model') or '-'}"
