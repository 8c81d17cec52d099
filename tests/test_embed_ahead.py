"""The local embedder loaded in a second process while a fresh search starts
(providers.embeddings.ahead): the vector is the one this process would compute, the child is
gone once it has answered, and anything it fails at falls back to the embedder here."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from providers.embeddings.ahead import EmbedderAhead
from providers.embeddings.usem3_embedder import Usem3Embedder

QUERY = "what did I end up deciding about the laptop? 丹沢はどうする"


@pytest.fixture(scope="module")
def cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("usem3-ahead")
    Usem3Embedder(cache_dir=folder).warm()  # the cache file a fresh search reads
    return folder


def same(a: list[list[float]], b: list[list[float]]) -> bool:
    """Equal up to float32 rounding (a process that imported numpy before the fork sums with
    other BLAS threads than a fresh one; a fresh `pmem search` gives the bit-identical vector)."""
    return len(a) == len(b) and all(
        max(abs(x - y) for x, y in zip(u, v, strict=True)) < 1e-6 for u, v in zip(a, b, strict=True)
    )


def gone(pid: int) -> bool:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        return True
    return False


def test_the_child_answers_with_the_vector_this_process_would_compute(cache: Path) -> None:
    expected = Usem3Embedder(cache_dir=cache).embed([QUERY])
    ahead = EmbedderAhead.start(Usem3Embedder(cache_dir=cache))
    pid = ahead._pid
    assert pid is not None and ahead.inner._encoder is None  # nothing loaded in this process
    assert same(ahead.embed([QUERY]), expected)
    assert ahead.inner._encoder is None and gone(pid)  # answered by the child, which is reaped
    assert same(ahead.embed([QUERY, "another"])[:1], expected)  # later calls: loaded here
    assert (ahead.model, ahead.dim, ahead.local) == ("usem3", 512, True)


def test_a_child_that_dies_is_replaced_by_the_embedder_here(cache: Path, monkeypatch) -> None:
    expected = Usem3Embedder(cache_dir=cache).embed([QUERY])
    ahead = EmbedderAhead.start(Usem3Embedder(cache_dir=cache))
    assert ahead._pid is not None
    os.kill(ahead._pid, 9)
    assert same(ahead.embed([QUERY]), expected)


def test_closing_without_asking_leaves_no_process_behind(cache: Path) -> None:
    ahead = EmbedderAhead.start(Usem3Embedder(cache_dir=cache))
    pid = ahead._pid
    assert pid is not None
    ahead.close()
    os.waitpid(pid, 0)  # it exits on its own once its pipe is closed
    assert gone(pid)


def test_without_fork_the_embedder_loads_here(cache: Path, monkeypatch) -> None:
    monkeypatch.delattr(os, "fork")
    ahead = EmbedderAhead.start(Usem3Embedder(cache_dir=cache))
    assert ahead._pid is None
    assert same(ahead.embed([QUERY]), Usem3Embedder(cache_dir=cache).embed([QUERY]))


def test_a_fresh_search_prints_one_object_and_the_child_prints_nothing(db, pmem_env) -> None:
    env = dict(os.environ, **pmem_env)
    env.pop("PMEM_EMBEDDER", None)  # the default local embedder: loaded ahead
    for command in ("search", "recall"):  # recall loads the embedder ahead too
        out = subprocess.run(
            [sys.executable, "-m", "cli.main", command, QUERY, "--json"],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        lines = out.stdout.strip().splitlines()
        assert len(lines) == 1 and json.loads(lines[0])["hits"] == []


def test_the_child_answers_a_first_question_before_the_vector(cache: Path) -> None:
    """`pmem search` has the child analyse a Japanese question first (SudachiPy's dictionary
    loads there): the answer comes back, then the vector as before; a failing or unasked first
    question leaves the vector to the child all the same."""
    expected = Usem3Embedder(cache_dir=cache).embed([QUERY])
    warmed: list[str] = []
    ahead = EmbedderAhead.start(
        Usem3Embedder(cache_dir=cache), lambda q: q[::-1], warm=lambda: warmed.append("x")
    )
    assert ahead.awaits_first
    ahead.ask_first("丹沢".encode())
    assert (
        ahead.first_answer() == "丹沢".encode()[::-1]
        and ahead.first_answer() == "丹沢".encode()[::-1]
    )
    assert same(ahead.embed([QUERY]), expected) and ahead.inner._encoder is None
    assert warmed == []  # warm ran in the child, not here

    def fails(q: bytes) -> bytes:
        raise ValueError("no")

    failing = EmbedderAhead.start(Usem3Embedder(cache_dir=cache), fails)
    failing.ask_first(b"x")
    assert failing.first_answer() is None
    assert same(failing.embed([QUERY]), expected) and failing.inner._encoder is None
    unasked = EmbedderAhead.start(Usem3Embedder(cache_dir=cache), fails)
    assert unasked.first_answer() is None
    assert same(unasked.embed([QUERY]), expected) and unasked.inner._encoder is None


def test_a_search_analyses_its_question_in_the_child_with_the_same_result(
    cache: Path, monkeypatch
) -> None:
    """The question the search understands in this process, analysed by SudachiPy in the child:
    the same query (terms, focus, time range) as when analysed here."""
    from datetime import datetime, timedelta, timezone

    import cli.read
    from providers.embeddings import usem3_embedder
    from search.understand import understand

    monkeypatch.setattr(usem3_embedder, "Usem3Embedder", lambda: Usem3Embedder(cache_dir=cache))
    monkeypatch.delenv("PMEM_EMBEDDER", raising=False)
    monkeypatch.delenv("PMEM_TZ", raising=False)
    ref = datetime(2025, 6, 1, 9, tzinfo=timezone(timedelta(hours=9)))
    for question in (
        "先週の丹沢の件、結局どうするって決めたんだっけ",
        "丹沢で何て言われた？",
        "3日前に決めた名前は",
    ):
        ahead = cli.read._embedder_ahead(question)
        try:
            asked: list[str] = []
            analyzer = cli.read._analyzer(ahead, question, ref)
            assert analyzer is not None and not ahead.awaits_first

            def spy(text: str, analyzer=analyzer, asked=asked) -> list:
                asked.append(text)
                return analyzer(text)

            assert understand(question, ref, None, spy) == understand(question, ref)
            assert ahead._answer is not None and len(asked) == 1  # answered by the child
        finally:
            ahead.close()
    english = cli.read._embedder_ahead("what did I decide about the laptop?")
    assert (
        not english.awaits_first and cli.read._analyzer(english, "what did I decide", ref) is None
    )
    english.close()
