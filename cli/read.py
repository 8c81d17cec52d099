"""Read paths: `pmem search`, `pmem show`. They never import Prefect."""

from __future__ import annotations

from typing import Annotated

import typer

from cli.app import app, err_console, handle_errors, open_store, print_json, settings

# ---------------------------------------------------------------- read paths


@app.command()
@handle_errors
def search(
    query: Annotated[str, typer.Argument(help="Words or a phrase, Japanese or English.")],
    limit: Annotated[int, typer.Option("--limit", "-n")] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object {\"hits\": [...]}.")] = False,
) -> None:
    """Search the memories (lexical, Japanese-aware)."""
    store = open_store(settings())
    hits = store.search(query, limit=limit)
    if as_json:
        print_json({"hits": [h.model_dump(mode="json") for h in hits]})
        return
    if not hits:
        err_console.print("no hits")
    for h in hits:
        typer.echo(f"{h.score:5.2f}  {h.id}  [{h.kind}] {h.title}\n       {h.index_summary}")


@app.command()
@handle_errors
def show(
    memory_id: Annotated[str, typer.Argument(help="A memory id from `pmem search`.")],
    history: Annotated[bool, typer.Option("--history", help="Also list every revision.")] = False,
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Print one memory with its evidence (and its revisions)."""
    store = open_store(settings())
    view = store.get(memory_id, history=history)
    if as_json:
        print_json(view.model_dump(mode="json"))
        return
    typer.echo(f"{view.title}  ({view.id}, {view.kind}, revision {view.current_revision}, {view.status})")
    if view.occurred_at:
        typer.echo(f"occurred: {view.occurred_at.isoformat()}")
    typer.echo(f"aliases: {', '.join(view.aliases)}\ntags: {', '.join(view.tags)}\n")
    typer.echo(view.canonical_summary)
    typer.echo("\nevidence:")
    for e in view.evidence:
        typer.echo(f"  - [{e['source_key']}] {e['text']}")
    if history:
        typer.echo("\nrevisions:")
        for r in view.revisions:
            typer.echo(f"  {r['revision']}: {r['reason']} {r['created_at']} run={r['run_id']} model={r['model']}")
