"""`pmem forget`: irreversible erasure of a secret, a memory, a conversation (issue 10, point 3) or
another speaker of a chat history (`--speaker NAME`, issue 17).

Distinct from `delete` (a status and a tombstone, reversible by `restore`): what forget erases
is gone from every registered store (store/derived.py) and every file under runs/.
"""

from __future__ import annotations

import html
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from cli.app import ask, err_console, handle_errors, memory_app, print_json, settings
from core.errors import ConfigError

EXIT_REMAINING = 4  # erased, but the final check still found a copy (listed in the output)


def _read_secret(secret: str | None, secret_file: str | None) -> str | None:
    if secret is not None and secret_file is not None:
        raise ConfigError("give the secret once: --secret or --secret-file, not both")
    if secret_file is None:
        return secret
    if secret_file == "-":
        text = sys.stdin.read()
    else:
        try:
            text = Path(secret_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as err:
            raise ConfigError(
                f"cannot read the secret from {secret_file} ({type(err).__name__})"
            ) from None
    text = text.rstrip("\r\n")
    if not text:
        raise ConfigError(f"{'stdin' if secret_file == '-' else secret_file} holds no secret")
    return text


def _files_holding(data_dir: Path, hit: Any, *, relative: bool = True) -> list[str]:
    """Every file under the data dir (the database's own folder aside) in which the text is
    found; ``relative=False`` for another root (the shared run files), named in full."""
    found: list[str] = []
    if not data_dir.is_dir():
        return found
    for path in sorted(data_dir.rglob("*")):
        if not path.is_file() or "pgdata" in path.relative_to(data_dir).parts[:1]:
            continue
        try:
            text = path.read_bytes().decode("utf-8", "replace")
        except OSError:
            continue
        if hit(text):
            found.append(str(path.relative_to(data_dir)) if relative else str(path))
    return found


@memory_app.command()
@handle_errors
def forget(
    secret: Annotated[
        str | None,
        typer.Option(
            "--secret",
            help="The exact string to erase (any case). It stays in your shell history: prefer --secret-file.",
        ),
    ] = None,
    secret_file: Annotated[
        str | None,
        typer.Option(
            "--secret-file",
            help="Read the string to erase from this file ('-': stdin); one trailing newline is dropped.",
        ),
    ] = None,
    memory: Annotated[
        str | None,
        typer.Option(
            "--memory", help="Erase this memory with its revisions, evidence and index rows."
        ),
    ] = None,
    conversation: Annotated[
        str | None,
        typer.Option(
            "--conversation",
            help="Erase everything derived from this conversation (its key, see `pmem ledger list`).",
        ),
    ] = None,
    speaker: Annotated[
        str | None,
        typer.Option(
            "--speaker",
            metavar="NAME",
            help="Erase another speaker's messages in your chat histories (LINE, Telegram, JSONL logs), the name as `pmem ledger show` lists it: from everything derived and from the ledger (implied --from-ledger); their messages in later imports arrive erased.",
        ),
    ] = None,
    from_ledger: Annotated[
        bool,
        typer.Option(
            "--from-ledger",
            help="Erase it from the source ledger too; a re-import of the same export does not bring it back.",
        ),
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", help="Do not ask for confirmation.")] = False,
    as_json: Annotated[
        bool,
        typer.Option("--json", help="End with one JSON object (ids and counts, never the text)."),
    ] = False,
) -> None:
    """Irreversibly erase a secret string, a memory, a whole conversation or another speaker's
    messages (--speaker) from everything
    derived: memories, every revision (the chain records that a redaction happened, when and of
    which fields), evidence, search and vector indexes, runs/ files, review files, proposals,
    idempotency responses; the touched tables are rewritten (VACUUM FULL) and a checkpoint taken.
    Unlike `delete` (reversible by `restore`) this cannot be undone. A confirmed action: it asks
    first unless --yes is given.

    Exit codes: 0 erased and nothing found afterwards; 1 an error, or not confirmed (nothing
    erased); 4 erased, but the final check still found a copy, or a table could not be vacuumed
    because another session holds it (listed; run it again; see docs/security.md)."""
    from state.files import RunFilesScrub, is_local, runs_root, scrub_run_files
    from store.db import Database
    from store.erased import Scrubber, load_key
    from store.forget import (
        Forgetter,
        remaining_of_conversation,
        remaining_of_memory,
        remaining_of_speaker,
    )

    text = _read_secret(secret, secret_file)
    targets = [t for t in (text, memory, conversation, speaker) if t is not None]
    if len(targets) != 1:
        raise ConfigError(
            "say what to forget: exactly one of --secret / --secret-file, --memory, --conversation, --speaker"
        )
    if not yes and secret_file == "-":
        raise ConfigError(
            "the secret came from stdin, so the confirmation cannot be asked there",
            hint="add --yes (after checking what you piped in)",
        )
    if speaker is not None:
        from_ledger = True  # another person's words are not the owner's record to keep
    scrubber = Scrubber(text) if text is not None else None
    cfg = settings()
    db = Database.open(cfg)
    try:
        fg = Forgetter(db, load_key(cfg.data_dir, create=True) or b"")
        where = (
            "the ledger and everything derived"
            if from_ledger
            else "everything derived (the ledger keeps it)"
        )
        if scrubber is not None:
            found = fg.scan(scrubber.secret, ledger=from_ledger)
            question = f"erase the secret from {where}: {sum(found.values())} rows in {len(found)} columns hold it"
        elif memory is not None:
            plan = fg.memory_plan(memory)
            question = f"erase memory {memory} from {where}: " + (
                "already erased; check its files again"
                if plan["already_erased"]
                else f"{plan['revisions']} revisions, {plan['evidence']} evidence rows"
            )
        elif speaker is not None:
            plan = fg.speaker_plan(speaker)
            question = (
                f"erase a speaker's messages from {where}: {plan['messages']} messages in "
                f"{plan['conversations']} conversations"
            )
        else:
            assert conversation is not None
            plan = fg.conversation_plan(conversation)
            question = (
                f"erase conversation {conversation} from {where}: {plan['messages']} messages, "
                f"{len(plan['memories'])} memories resting on it are erased whole"
            )
        ask(question + ". This cannot be undone. Go on?", yes)  # NotConfirmed: nothing erased

        if scrubber is not None:
            er = fg.forget_secret(scrubber.secret, from_ledger=from_ledger)
        elif memory is not None:
            er = fg.forget_memory(memory, from_ledger=from_ledger)
        elif speaker is not None:
            er = fg.forget_speaker(speaker, from_ledger=from_ledger)
        else:
            assert conversation is not None
            er = fg.forget_conversation(conversation, from_ledger=from_ledger)

        # runs/: result.json, chunk and run-state files, review files
        def hit(s: str) -> bool:
            return scrubber is not None and (scrubber.hits(s) or scrubber.hits(html.unescape(s)))

        erased = set(er.memories_erased)
        speaker_keys = frozenset(er.messages)
        batch_folders = frozenset(b.replace(":", "-") for b in er.batches)

        def drop(folder: str, draft: dict[str, Any], commit: dict[str, Any]) -> bool:
            d = draft.get("draft", {})
            if commit.get("memory_id") in erased or d.get("target_memory_id") in erased:
                return True
            keys = [
                e.get("message_key", "")
                for e in (*draft.get("evidence", []), *d.get("evidence", []))
            ]
            if speaker_keys:
                return any(k in speaker_keys for k in keys)
            if conversation is None:
                return False
            if any(k.rsplit(":", 1)[0] == conversation for k in keys) or conversation in d.get(
                "source_conversation_keys", []
            ):
                return True
            return folder in batch_folders and not keys

        def scrub_files(root: Path) -> RunFilesScrub:
            return scrub_run_files(
                root,
                scrub=scrubber.value if scrubber else None,
                text_hit=hit if scrubber else None,
                drop_draft=drop if (erased or conversation or speaker_keys) else None,
                drop_chunks=batch_folders,
                hash_map=er.hash_map,
            )

        files = scrub_files(cfg.runs_dir)
        shared = runs_root(cfg)  # PMEM_RUNS_URL on an object store: the pool's run files
        if not is_local(shared):
            more = scrub_files(shared)
            files.rewritten += more.rewritten
            files.deleted += more.deleted
            files.drafts_removed += more.drafts_removed
            files.checksums |= more.checksums
            files.remaining += more.remaining
        # runs/<run>/months/*.json: month drafts that cite an erased memory or conversation go
        # (the secret case is covered above: a file the secret is found in is deleted)
        needles = [*erased, *([conversation] if conversation else []), *speaker_keys]
        for path in sorted(cfg.runs_dir.glob("*/months/*.json")) if needles else []:
            if any(n in path.read_text(encoding="utf-8", errors="replace") for n in needles):
                path.unlink()
                files.deleted.append(path)
        # runs/concepts/<memory>.json: what was extracted from an erased memory goes
        for mid in erased:
            from flows.concepts import result_path

            path = result_path(cfg.runs_dir, mid)
            if path.exists():
                path.unlink()
                files.deleted.append(path)
        fg.set_result_checksums(files.checksums)
        tables = set(er.tables) | ({"batches"} if files.checksums else set())
        vacuum = fg.vacuum(tables)

        # the final check: through SQL over every registered column, and every file pmem wrote
        if scrubber is not None:
            remaining = fg.scan(scrubber.secret, ledger=from_ledger)
            ledger_kept = (
                {}
                if from_ledger
                else {
                    k: v
                    for k, v in fg.scan(scrubber.secret, ledger=True).items()
                    if k not in remaining
                }
            )
            remaining_files = _files_holding(cfg.data_dir, hit)
            if not is_local(shared):
                remaining_files += _files_holding(shared, hit, relative=False)
        elif memory is not None:
            remaining, ledger_kept, remaining_files = remaining_of_memory(db, memory), {}, []
        elif speaker is not None:
            remaining = remaining_of_speaker(db, er.messages, ledger=from_ledger, name=speaker)
            ledger_kept, remaining_files = {}, []
        else:
            assert conversation is not None
            remaining = remaining_of_conversation(db, conversation, ledger=from_ledger)
            ledger_kept, remaining_files = {}, []
    finally:
        db.close()

    # pre-upgrade backups (store.db: a pg_dump and the old data folder) are copies no scrub
    # can rewrite: named, so the owner deletes them once the upgrade is known good
    backups = cfg.data_dir / "backups"
    not_reached = (
        sorted(str(p.relative_to(cfg.data_dir)) for p in backups.iterdir())
        if backups.is_dir()
        else []
    )
    body = {
        "erasure_id": er.erasure_id,
        "target": er.target,
        "from_ledger": from_ledger,
        "memories_erased": er.memories_erased,
        "memories_redacted": er.memories_redacted,
        "counts": er.counts,
        "files": {
            "rewritten": len(files.rewritten),
            "deleted": len(files.deleted),
            "drafts_removed": files.drafts_removed,
        },
        "vacuum": vacuum,
        "remaining": remaining,
        "remaining_files": remaining_files,
        "ledger_kept": ledger_kept,
        "not_reached": not_reached,  # backups: delete them yourself (docs/security.md)
        "on_disk": vacuum.get("on_disk", []),
    }
    err_console.print(
        f"erased ({er.erasure_id}): {len(er.memories_erased)} memories erased, "
        f"{len(er.memories_redacted)} redacted, {sum(er.counts.values())} rows changed, "
        f"{len(files.rewritten)} files rewritten, {len(files.deleted)} deleted; "
        f"VACUUM FULL on {len(vacuum['tables'])} tables, checkpoint {'taken' if vacuum['checkpoint'] else 'NOT taken (no privilege)'}"
    )
    if ledger_kept:
        err_console.print(
            "the ledger still holds it (the raw record): add --from-ledger to erase it there too"
        )
    if remaining or remaining_files:
        err_console.print(f"[red]a copy remains:[/] {sorted(remaining)} {remaining_files}")
    if not_reached:
        err_console.print(
            f"[red]not reached[/]: {not_reached} (pre-upgrade backups hold the old data: delete "
            "them once the upgrade is known good, then run the same forget again)"
        )
    if vacuum["skipped"]:
        err_console.print(
            f"[red]not vacuumed[/] (another session holds them): {vacuum['skipped']}: stop "
            "`pmem serve` / `pmem api` and run the same forget again"
        )
    if as_json:
        print_json(body)
    if remaining or remaining_files or vacuum["skipped"] or not_reached:
        raise typer.Exit(EXIT_REMAINING)
