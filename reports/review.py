"""Review of a (dry) run: per draft, a new record or a unified diff against the target memory's
current revision, with counts, token use and cost; written as Markdown and as a self-contained
HTML page under runs/<run_id>/. No Prefect here: reviewing is a read."""

from __future__ import annotations

import difflib
import html
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from core.errors import ConfigError, MemoryNotFound
from core.models import TARGET_NOT_OFFERED, VerifiedDraft
from providers.pricing import estimate_cost
from state.files import batch_dir, read_result
from store.records import MemoryStore
from store.revisions import merge_append
from store.runs import RunStore


@dataclass
class DraftReview:
    batch_id: str
    draft_id: str
    title: str
    action: str  # create / append / uncommittable
    rejected: bool
    reason: str | None = None
    diff: list[str] = field(default_factory=list)  # unified diff lines (append)
    summary: str = ""  # the new record's summary (create)
    aliases_added: list[str] = field(default_factory=list)
    evidence_added: list[tuple[str, str]] = field(default_factory=list)  # (source key, text)
    refusal: str | None = (
        None  # machine-readable: "target-not-offered", "no-verified-evidence", ...
    )
    target_memory_id: str | None = None  # what an append named (also when refused)


@dataclass
class Review:
    run_id: str
    drafts: list[DraftReview]
    counts: dict[str, int]
    tokens: dict[str, int]
    cost_usd: float | None
    model: str

    def as_json(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "counts": self.counts,
            "tokens": self.tokens,
            "cost_usd": self.cost_usd,
            "model": self.model,
            "items": [d.__dict__ for d in self.drafts],
        }


def _record_lines(rec: dict[str, Any]) -> list[str]:
    lines = [
        f"title: {rec['title']}",
        f"kind: {rec['kind']}",
        f"aliases: {', '.join(rec['aliases'])}",
        f"tags: {', '.join(rec['tags'])}",
        f"index summary: {rec['index_summary']}",
        "",
    ]
    return lines + rec["canonical_summary"].splitlines()


def build_review(runs: RunStore, store: MemoryStore, runs_dir: Path, run_id: str) -> Review:
    run = runs.get_run(run_id)
    if run is None:
        raise ConfigError(f"no run {run_id}", hint="`pmem status` lists the runs")
    rejected = runs.rejected_drafts(run_id)
    items: list[DraftReview] = []
    tokens = {"input": 0, "output": 0}
    model = run["model"]
    for b in runs.batches_of_run(run_id):
        result = read_result(
            batch_dir(runs_dir, run_id, b["batch_id"]) / "result.json", b["batch_id"]
        )
        if result is None:
            continue
        tokens["input"] += result["tokens"]["input"]
        tokens["output"] += result["tokens"]["output"]
        for raw in result["drafts"]:
            items.append(
                _review_draft(store, b["batch_id"], VerifiedDraft.model_validate(raw), rejected)
            )
    counts = {
        "drafts": len(items),
        "new": sum(d.action == "create" for d in items),
        "appends": sum(d.action == "append" for d in items),
        "uncommittable": sum(d.action == "uncommittable" for d in items),
        "target_not_offered": sum(d.refusal == TARGET_NOT_OFFERED for d in items),
        "rejected": sum(d.rejected for d in items),
        "evidence": sum(len(d.evidence_added) for d in items),
    }
    cost = estimate_cost(model, tokens["input"], tokens["output"])
    return Review(run_id, items, counts, tokens, cost, model)


def _review_draft(
    store: MemoryStore, batch_id: str, v: VerifiedDraft, rejected: frozenset[str]
) -> DraftReview:
    d = v.draft
    r = DraftReview(
        batch_id=batch_id,
        draft_id=d.draft_id,
        title=d.title,
        action=d.action,
        rejected=d.draft_id in rejected,
        evidence_added=[(e.message_key, e.text) for e in v.evidence],
    )
    new = {
        "kind": d.memory_kind,
        "title": d.title,
        "canonical_summary": d.canonical_summary,
        "index_summary": d.index_summary,
        "aliases": d.aliases,
        "tags": d.tags,
        "occurred_at": None,
        "valid_from": None,
    }
    r.target_memory_id = d.target_memory_id if d.action == "append" else None
    if not v.committable:
        r.action, r.reason, r.refusal = "uncommittable", v.reason, v.reason
        if v.reason == TARGET_NOT_OFFERED:
            r.reason = (
                f"{TARGET_NOT_OFFERED}: refused, this draft named memory {d.target_memory_id} "
                f"(revision {d.expected_revision}), which was not given to its batch at that revision"
            )
        return r
    if d.action != "append" or not d.target_memory_id:
        r.action, r.summary, r.aliases_added = "create", d.canonical_summary, list(d.aliases)
        return r
    try:
        cur = store.get(d.target_memory_id)
    except MemoryNotFound:
        r.action, r.reason = "uncommittable", "target-missing"
        return r
    current = {
        "kind": cur.kind,
        "title": cur.title,
        "canonical_summary": cur.canonical_summary,
        "index_summary": cur.index_summary,
        "aliases": cur.aliases,
        "tags": cur.tags,
        "occurred_at": None,
        "valid_from": None,
    }
    merged = merge_append(current, new)
    r.diff = list(
        difflib.unified_diff(
            _record_lines(current),
            _record_lines(merged),
            fromfile=f"{cur.id} r{cur.current_revision}",
            tofile=f"{cur.id} (proposed)",
            lineterm="",
        )
    )
    r.aliases_added = [a for a in merged["aliases"] if a not in cur.aliases]
    have = {(e["source_key"], e["text"]) for e in cur.evidence}
    r.evidence_added = [e for e in r.evidence_added if e not in have]
    if cur.current_revision != d.expected_revision:
        r.reason = (
            f"target moved on: revision {cur.current_revision}, draft expects {d.expected_revision}"
        )
    return r


# ---------------------------------------------------------------- rendering


def _header(rv: Review) -> list[str]:
    c = rv.counts
    cost = "unknown (offline or unpriced model)" if rv.cost_usd is None else f"${rv.cost_usd:.4f}"
    if not c["drafts"]:
        return [
            f"# Review of run {rv.run_id}",
            "",
            "Nothing to review: this run made no drafts (every conversation was drafted before, "
            "or none was kept for drafting), so there is nothing to apply.",
        ]
    parts = [f"{c['new']} new", f"{c['appends']} appends"]
    if c["uncommittable"]:
        parts.append(
            f"{c['uncommittable']} not committable"
            + (
                f" ({c['target_not_offered']} refused as {TARGET_NOT_OFFERED})"
                if c["target_not_offered"]
                else ""
            )
        )
    if c["rejected"]:
        parts.append(f"{c['rejected']} rejected by you")
    if rv.cost_usd == 0:
        cost = "no cost (offline)"
    return [
        f"# Review of run {rv.run_id}",
        "",
        f"{c['drafts']} drafts: {', '.join(parts)}; {c['evidence']} evidence excerpts.",
        f"Model {rv.model}; {rv.tokens['input']:,} input and {rv.tokens['output']:,} output tokens; "
        + (cost if cost.startswith("no cost") else f"cost {cost}")
        + ".",
        "",
        f"Apply with `pmem runs apply {rv.run_id}` (or `make apply RUN={rv.run_id}`); "
        f"exclude a draft first with `pmem runs review {rv.run_id} --reject DRAFT_ID`.",
    ]


def _md(text: str) -> str:
    """Memory text for review.md: HTML escaped (a Markdown viewer renders raw HTML: a
    conversation's ``<img onerror=…>`` must show as text, as review.html shows it)."""
    return html.escape(text, quote=False)


def to_markdown(rv: Review) -> str:
    e = _md
    out = _header(rv)
    for d in rv.drafts:
        flag = " (rejected)" if d.rejected else ""
        out += [
            "",
            f"## {e(d.title)} [{d.action}{flag}]",
            f"draft `{e(d.draft_id)}` in batch `{e(d.batch_id)}`",
        ]
        if d.reason:
            out.append(f"> {e(d.reason)}")
        if d.action == "create":  # its headings below the draft's own (## Background → ####)
            out += [
                "",
                *("##" + e(x) if x.startswith("#") else e(x) for x in d.summary.splitlines()),
            ]
        if d.diff:
            # a code block shows its lines as text; a fence inside one cannot close it
            out += ["", "```diff", *(x.replace("```", "`\u200b``") for x in d.diff), "```"]
        if d.aliases_added:
            out += ["", "aliases added: " + ", ".join(e(a) for a in d.aliases_added)]
        if d.evidence_added:
            out += ["", "evidence added:"] + [f"- `{e(k)}`: {e(t)}" for k, t in d.evidence_added]
    return "\n".join(out) + "\n"


_CSS = """body{font:15px/1.5 system-ui,sans-serif;max-width:60rem;margin:2rem auto;padding:0 1rem}
pre{background:#f6f8fa;padding:.75rem;overflow:auto}.add{color:#116329;background:#dafbe1}
.del{color:#82071e;background:#ffebe9}.meta{color:#57606a}.rej{opacity:.5}code{font-size:90%}"""


def to_html(rv: Review) -> str:
    e = html.escape
    parts = [
        f'<!doctype html><html lang="und"><meta charset="utf-8"><title>{e("Review " + rv.run_id)}</title>',
        f"<style>{_CSS}</style><body>",
    ]
    head = _header(rv)
    parts.append(
        f"<h1>{e(head[0][2:])}</h1>"
        + "".join(f"<p class=meta>{e(line)}</p>" for line in head[2:] if line)
    )
    for d in rv.drafts:
        cls = " class=rej" if d.rejected else ""
        parts.append(
            f"<section{cls}><h2>{e(d.title)} <small>[{e(d.action)}{' rejected' if d.rejected else ''}]</small></h2>"
        )
        parts.append(
            f"<p class=meta>draft <code>{e(d.draft_id)}</code> in batch <code>{e(d.batch_id)}</code></p>"
        )
        if d.reason:
            parts.append(f"<p><em>{e(d.reason)}</em></p>")
        if d.action == "create":
            parts.append(f"<pre>{e(d.summary)}</pre>")
        if d.diff:
            rows = []
            for line in d.diff:
                c = (
                    "add"
                    if line.startswith("+") and not line.startswith("+++")
                    else ("del" if line.startswith("-") and not line.startswith("---") else "")
                )
                rows.append(f"<span class={c}>{e(line)}</span>" if c else e(line))
            parts.append("<pre>" + "\n".join(rows) + "</pre>")
        if d.evidence_added:
            parts.append(
                "<ul>"
                + "".join(f"<li><code>{e(k)}</code> {e(t)}</li>" for k, t in d.evidence_added)
                + "</ul>"
            )
        parts.append("</section>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_review(rv: Review, runs_dir: Path) -> tuple[Path, Path]:
    folder = runs_dir / rv.run_id
    folder.mkdir(parents=True, exist_ok=True)
    md, page = folder / "review.md", folder / "review.html"
    md.write_text(to_markdown(rv), encoding="utf-8")
    page.write_text(to_html(rv), encoding="utf-8")
    return md, page
