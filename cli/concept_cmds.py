"""Seed 003's concept memory: `pmem concepts show NAME`, `pmem concepts list`, `pmem concepts
rebuild`.

Exit codes: 0 done; 1 an error (no concept of that name, the database, a bad --llm); 75 a vendor
model's rate limit stopped a rebuild (run it again: what was read is kept); 77 a vendor model was
asked for and the owner's consent to send the memories is not recorded. Reading commands never
import Prefect.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.markup import escape

from cli.app import concepts_app, err_console, handle_errors, print_json, settings
from core.display import for_terminal
from core.errors import ConfigError, StoreError


def _db() -> Any:
    from store.db import Database

    return Database.open(settings())


def show_body(store: Any, name: str) -> dict[str, Any]:
    """The `pmem concepts show --json` object: ids derived from content, no text excerpts, no
    timestamps or counters besides the weights, so a rebuild prints the same."""
    c = store.find(name)
    if c is None:
        raise StoreError(
            f"no concept named {name!r}", hint="`pmem concepts list` shows the concepts"
        )
    links = [
        {
            "to": link.other.name,
            "relation": link.relation,
            "weight": round(link.weight, 6),
            "stated": link.stated,
            "experiences": sorted(link.experiences),
            "direction": "out" if link.outgoing else "in",
            "to_id": link.other.id,
        }
        for link in store.links_of(c.id)
    ]
    links.sort(
        key=lambda x: (-x["weight"], x["to"], x["relation"], not x["stated"], x["direction"])
    )
    return {
        "concept": {"id": c.id, "name": c.name, "aliases": list(c.aliases)},
        "links": links,
        "experiences": store.experiences_of(c.id),
    }


@concepts_app.command("show")
@handle_errors
def show(
    name: Annotated[
        str,
        typer.Argument(
            help="The concept's name or one of its aliases (any case, full or half width)."
        ),
    ],
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object last on stdout.")
    ] = False,
) -> None:
    """A concept: its aliases, its links (relation, weight, stated or inferred, the experiences
    that support each) and the experiences (memory ids) that show it."""
    from store.concepts import ConceptStore

    db = _db()
    try:
        body = show_body(ConceptStore(db), name)
    finally:
        db.close()
    if as_json:
        print_json(body)
        return
    c = body["concept"]
    aliases = f" (also {', '.join(c['aliases'])})" if c["aliases"] else ""
    typer.echo(for_terminal(f"{c['name']}{aliases}  [{c['id']}]"))
    typer.echo(f"experiences: {', '.join(body['experiences']) or '-'}")
    if not body["links"]:
        typer.echo("no links (no experience states a relation with another concept)")
    for link in body["links"]:
        arrow = "→" if link["direction"] == "out" else "←"
        kind = "stated" if link["stated"] else "inferred"
        typer.echo(
            for_terminal(
                f"  {arrow} {link['to']}  {link['relation']}  {link['weight']:.3f}  "
                f"({kind}; {', '.join(link['experiences'])})"
            )
        )


@concepts_app.command("list")
@handle_errors
def list_concepts(
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object last on stdout.")
    ] = False,
) -> None:
    """Every concept with how many experiences show it and how many links it has."""
    from store.concepts import ConceptStore

    db = _db()
    try:
        store = ConceptStore(db)
        with db.connection() as conn:
            rows = conn.execute(
                """SELECT c.id, c.name, c.aliases,
                          (SELECT count(*) FROM experience_links l WHERE l.concept_id = c.id),
                          (SELECT count(*) FROM concept_links k WHERE c.id IN (k.source_id, k.target_id))
                     FROM concepts c ORDER BY 4 DESC, c.norm"""
            ).fetchall()
        counts = store.counts()
    finally:
        db.close()
    items = [
        {"id": r[0], "name": r[1], "aliases": list(r[2]), "experiences": r[3], "links": r[4]}
        for r in rows
    ]
    if as_json:
        print_json({"concepts": items, "counts": counts})
        return
    for it in items:
        typer.echo(
            for_terminal(f"{it['name']}  {it['experiences']} experiences, {it['links']} links")
        )
    err_console.print(
        f"{counts['concepts']} concepts, {counts['concept_links']} links, "
        f"{counts['experiences']} experiences read"
    )


@concepts_app.command("rebuild")
@handle_errors
def rebuild(
    llm: Annotated[
        str | None,
        typer.Option(
            "--llm",
            metavar="PROVIDER:MODEL",
            help="Who extracts the concepts: offline (the default: SudachiPy nouns, stated cues only) "
            "or e.g. openai:<model>.",
        ),
    ] = None,
    no_embed: Annotated[
        bool,
        typer.Option(
            "--no-embed", help="Do not match Japanese and English names by the local embedder."
        ),
    ] = False,
    yes: Annotated[
        bool,
        typer.Option(
            "--yes",
            help="Consent to sending the memories to a vendor model "
            "without asking (remembered for this data dir).",
        ),
    ] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object (counts) last on stdout.")
    ] = False,
) -> None:
    """Make the concept memory again from every memory, from empty tables: the same concepts,
    links and weights as the backfills made them one by one. What a model returned before for an
    unchanged memory is reused (runs/concepts/), so a rebuild asks it only about new material."""
    from flows.concepts import extract_concepts
    from providers.concepts import get_concept_extractor
    from store.concepts import ConceptStore

    cfg = settings()
    spec = llm or "offline"
    if spec not in ("offline", "extractive"):
        from flows.consent import drafting_target, require

        target = drafting_target(spec, "concepts")
        if target is None:
            raise ConfigError(
                f"{spec} cannot extract concepts",
                hint="use offline or openai / anthropic / gemini:<model>",
            )
        if yes:
            from flows.consent import find, grant

            if find(cfg, target) is None:
                grant(cfg, target, [], {"what": "memories"})
        require(cfg, target)
    extractor = get_concept_extractor(spec)
    embedder = None
    if not no_embed:
        from providers.embeddings import embedder_from_env, is_local_spec

        if is_local_spec():
            embedder = embedder_from_env()
    db = _db()
    try:
        counts = extract_concepts(
            db, cfg.runs_dir, extractor=extractor, embedder=embedder, rebuild=True
        )
        counts.update(ConceptStore(db).counts())
    finally:
        db.close()
    err_console.print(
        escape(
            f"rebuilt: {counts['experiences']} experiences, {counts['concepts']} concepts, "
            f"{counts['concept_links']} links ({counts['results_reused']} extractions reused)"
        )
    )
    if as_json:
        print_json(counts)
