"""Seed 003's reading side: `pmem related` (from what is said now to what was lived) and
`pmem graph` (the concepts and their weighted links as one self-contained page). Read paths:
they never import Prefect."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer
from rich.markup import escape

from cli.app import app, concepts_app, err_console, handle_errors, print_json, settings
from core.display import for_terminal as tty


@app.command(short_help="The past experiences linked to what you say now, and why.")
@handle_errors
def related(
    text: Annotated[
        str,
        typer.Argument(help="What is said now, Japanese or English: 最近、気分転換できていない."),
    ],
    now: Annotated[
        str | None,
        typer.Option(
            "--now",
            help="Reference time of a time expression in the text (ISO 8601); default: now.",
        ),
    ] = None,
    limit: Annotated[
        int, typer.Option("--limit", "-n", help="How many experiences, best first.")
    ] = 5,
    min_weight: Annotated[
        float | None,
        typer.Option(
            "--min-weight", help="Follow only links at least this strong (0–1; default 0.3)."
        ),
    ] = None,
    raw: Annotated[
        bool,
        typer.Option(
            "--raw",
            help="Show secrets in titles and quotes as they are (the owner's own terminal only).",
        ),
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json",
            help='One JSON object {"hits": [{"memory_id", "path", "concepts", "evidence", ...}], "attention": [...]}, best first.',
        ),
    ] = False,
) -> None:
    """The experiences related to what you say now (seed 003): the concepts the text names
    (attention), the concepts linked to them by weight (one or two hops), the experiences that
    show those, and the messages behind each. Each hit says why it came up: it states the
    path's link, it mentions the concept, or it was reached through the links."""
    from cli.read import _service

    if min_weight is not None and not 0.0 <= min_weight <= 1.0:
        from core.errors import ConfigError

        raise ConfigError(
            f"--min-weight {min_weight} is outside 0–1",
            hint="weights are in [0, 1]; e.g. --min-weight 0.5",
        )
    from state.consent import embedding_allowed

    # a word no concept is named by is matched across languages by the local embedder (hiking
    # → 登山); a remote embedder is never sent the text for this
    svc = _service(vectors=embedding_allowed(settings().data_dir))
    try:
        result = svc.related(
            text, now=svc.now(now), limit=max(1, limit), min_weight=min_weight, raw=raw
        )
    finally:
        svc.close()
    if as_json:
        print_json(
            {
                "hits": [h.model_dump(mode="json") for h in result.hits],
                "attention": result.attention,
                "min_weight": result.min_weight,
                "across_languages": result.across_languages,
            }
        )
        return
    _print_related(result)


def why_line(h: Any, across: dict[str, str] | None = None) -> str:
    """Why one experience came up, in words (``across``: attention concepts found by a word of
    the other language)."""
    if h.why == "mentions":
        word = (across or {}).get(h.path[0])
        return f"it mentions {h.path[0]}, which you just named" + (
            f" (as “{word}”)" if word else ""
        )
    steps = []
    for k in h.links:
        kind = "" if k.stated else ", inferred"
        steps.append(f"{k.source} —{k.relation}→ {k.target} (weight {k.weight:.2f}{kind})")
    if h.why == "states":
        return f"it is where you said {'; '.join(steps)}"
    return f"reached through {'; '.join(steps)}: it is about {h.path[-1]}"


def _print_related(result: Any) -> None:
    from core.display import human_time, plural
    from core.settings import local_zone

    if not result.attention:
        err_console.print(
            "none of the words names a concept of your memory (pmem graph shows them)"
        )
        return
    named = [
        f"{a} (from “{result.across_languages[a]}”)" if a in result.across_languages else a
        for a in result.attention
    ]
    err_console.print(f"attention: {escape(tty(', '.join(named)))}", highlight=False)
    if not result.hits:
        err_console.print(f"no experiences linked to them at weight ≥ {result.min_weight:.2f}")
        return
    zone = local_zone()
    for h in result.hits:
        when = human_time(h.occurred_at, zone) if h.occurred_at else "time unknown"
        typer.echo(f"{h.rank:>2}. {tty(h.title)} — {when}")
        typer.echo(f"    {tty(' → '.join(h.path))}: {tty(why_line(h, result.across_languages))}")
        typer.echo(
            f"    {tty(h.kind)} · {h.memory_id} · concepts: {tty(', '.join(h.concepts[:8]))}"
        )
        for e in h.evidence[:2]:
            typer.echo(f"    > {tty(e['quote'])}  [{tty(e['message_key'])}]")
    err_console.print(f"{plural(len(result.hits), 'experience')}; `pmem show ID` opens one")


@concepts_app.command()
@handle_errors
def graph(
    out: Annotated[
        Path, typer.Option("--out", help="Where to write the page (one self-contained HTML file).")
    ] = Path("graph.html"),
    min_weight: Annotated[
        float, typer.Option("--min-weight", help="Draw only links at least this strong (0–1).")
    ] = 0.0,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print one JSON object last on stdout.")
    ] = False,
) -> None:
    """A page of your concepts (seed 003): concepts as nodes, their links drawn thicker the
    stronger they are (dotted: inferred, not stated); a click on a concept lists its links and
    experiences. No network needed to open it (SVG and a few lines of inline JavaScript)."""
    from reports.graph import graph_from_rows, write_graph
    from search.related import ConceptRecall
    from store.db import Database

    db = Database.open(settings())
    try:
        rows = ConceptRecall(db).graph(min_weight=min_weight)
    finally:
        db.close()
    page = graph_from_rows(rows["concepts"], rows["links"], rows["experiences"])
    try:
        n = write_graph(page, out)
    except OSError as err:
        from core.errors import ConfigError

        raise ConfigError(
            f"cannot write {out}: {err.strerror or type(err).__name__}",
            hint="give --out a file in a folder that exists and that you can write",
        ) from None
    if as_json:
        print_json(
            {
                "out": str(out),
                "concepts": n,
                "links": len(page.links),
                "experiences": len(page.experiences),
                "bytes": out.stat().st_size,
            }
        )
        return
    from core.display import plural

    err_console.print(
        f"wrote {escape(str(out))}: {plural(n, 'concept')}, {plural(len(page.links), 'link')}"
    )
