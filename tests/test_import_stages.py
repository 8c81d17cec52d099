"""`pmem import` by stages (issue 31): an unchanged file the ledger holds whole is not read again
(bytes, reading code and the person's names decide), anything else is; and the `--json` keys of
each stage."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import importers
from cli.main import app
from core.errors import InputError
from tests.conftest import PROJECT
from tests.test_ledger_cmds import chatgpt_export, one_conversation


def _import_process(
    path: Path, data_dir: Path, url: str, fault: str | None = None, **env_extra: str
) -> int:
    """`pmem import PATH` in a process of its own (no embedder; ``fault``: PMEM_FAULT), its
    exit status (-9 when the fault killed it)."""
    env = dict(os.environ, DATABASE_URL=url, PMEM_DATA_DIR=str(data_dir), PMEM_EMBEDDER="none")
    env.update(env_extra)
    env.pop("PMEM_FAULT", None)
    if fault:
        env["PMEM_FAULT"] = fault
    cmd = [sys.executable, "-m", "cli.main", "import", str(path), "--source", "chatgpt"]
    return subprocess.run(cmd, env=env, cwd=PROJECT, capture_output=True).returncode


def pmem_import(*args: str, code: int = 0) -> dict[str, Any]:
    result = CliRunner().invoke(app, ["import", *args, "--no-embed", "--json"])
    assert result.exit_code == code, (result.output, result.exception)
    out: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    return out


def export(tmp_path: Path, n: int = 3, extra: str = "") -> Path:
    convs = [
        one_conversation(
            f"conv-{i}",
            f"相談 {i}",
            [
                ("user", f"引っ越しの見積もりを比べたい {i}{extra}"),
                ("assistant", "三社を比べましょう。"),
            ],
        )
        for i in range(n)
    ]
    return chatgpt_export(tmp_path / "conversations.json", convs)


class Reads:
    """Counts the importer's reads of a file (in this process, or in the reader's process:
    ``flows.reading.read_behind``)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.count = 0
        import flows.importing

        def counting(real: Any) -> Any:
            def counted(*args: Any, **kwargs: Any) -> Any:
                self.count += 1
                return real(*args, **kwargs)

            return counted

        monkeypatch.setattr(flows.importing, "iter_source", counting(importers.iter_source))
        monkeypatch.setattr(flows.importing, "read_behind", counting(flows.importing.read_behind))


def test_an_unchanged_file_is_not_read_again(
    pmem_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = Reads(monkeypatch)
    path = export(tmp_path)
    first = pmem_import(str(path), "--source", "chatgpt")
    assert first["conversations"]["new"] == 3 and reads.count == 1
    assert "unchanged_file" not in first
    ledger = first["stages"]["ledger"]
    assert ledger["seconds"] > 0 and ledger["mb_per_s"] is not None and ledger["mb_per_s"] >= 0
    assert first["stages"]["index"]["seconds"] >= 0
    assert first["time_to_answerable_s"] > 0 and set(first["stages"]) == {"ledger", "index"}

    again = pmem_import(str(path), "--source", "chatgpt")
    assert reads.count == 1, "the file was read again"
    assert again["unchanged_file"] is True
    assert again["conversations"] == {"new": 0, "changed": 0, "unchanged": 3, "quarantined": 0}
    assert again["messages"]["new"] == 0

    reread = pmem_import(str(path), "--source", "chatgpt", "--reread")
    assert reads.count == 2 and reread["conversations"]["unchanged"] == 3

    changed = export(tmp_path, extra="!")  # other bytes: read, and the change stored
    out = pmem_import(str(changed), "--source", "chatgpt")
    assert reads.count == 3 and out["conversations"]["changed"] == 3

    monkeypatch.setenv("PMEM_ME", "someone else")  # other names: whose messages may change
    pmem_import(str(changed), "--source", "chatgpt")
    assert reads.count == 4


def test_the_file_is_hashed_in_a_thread_while_the_import_starts(
    pmem_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The unchanged-file check's SHA-256 runs beside the import's start, once per import, and
    the re-import finds the file by it; ``--reread`` does not hash it."""
    import threading

    import flows.importing

    where: list[str] = []
    real = flows.importing.fingerprint

    def traced(path: Path) -> str:
        where.append(threading.current_thread().name)
        return real(path)

    monkeypatch.setattr(flows.importing, "fingerprint", traced)
    path = export(tmp_path)
    pmem_import(str(path), "--source", "chatgpt")
    again = pmem_import(str(path), "--source", "chatgpt")
    assert again["unchanged_file"] is True
    pmem_import(str(path), "--source", "chatgpt", "--reread")
    assert where == ["pmem-import-hash", "pmem-import-hash"]


def test_a_file_whose_import_did_not_finish_clean_is_read_again(
    pmem_env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = Reads(monkeypatch)
    convs = [one_conversation("ok", "ok", [("user", "ふつうの相談です")]), {"mapping": 7}]
    path = chatgpt_export(tmp_path / "conversations.json", convs)
    pmem_import(str(path), "--source", "chatgpt", code=3)  # one record quarantined
    pmem_import(str(path), "--source", "chatgpt", code=3)  # reported again, not skipped
    assert reads.count == 2

    import store.ledger

    def crash(self: Any, import_id: str, stats: dict[str, Any]) -> None:
        raise KeyboardInterrupt  # the import stopped before it finished

    other = tmp_path / "other"
    other.mkdir()
    clean = export(other, n=2)
    with monkeypatch.context() as m:
        m.setattr(store.ledger.Ledger, "finish_import", crash)
        stopped = CliRunner().invoke(app, ["import", str(clean), "--source", "chatgpt"])
    assert stopped.exit_code != 0  # Ctrl-C: whole conversations stored, the import unfinished
    out = pmem_import(str(clean), "--source", "chatgpt")
    assert reads.count == 4 and "unchanged_file" not in out


def _snapshot(url: str) -> dict[str, Any]:
    import psycopg

    with psycopg.connect(url) as conn:
        return {
            "conversations": conn.execute(
                "SELECT conversation_key, content_hash FROM source_conversations ORDER BY 1"
            ).fetchall(),
            "messages": conn.execute(
                "SELECT message_key, content_hash, position FROM source_messages ORDER BY 1"
            ).fetchall(),
            "index": conn.execute(
                "SELECT message_key, tokens::text FROM message_search ORDER BY 1"
            ).fetchall(),
            "decisions": conn.execute(
                """SELECT conversation_key, content_hash, rule_version, keep, reason
                   FROM prefilter_decisions ORDER BY 1"""
            ).fetchall(),
            "pending": [
                conn.execute(f"SELECT count(*) FROM {t}").fetchone()[0]  # type: ignore[index]
                for t in ("message_search_pending", "message_forms_pending")
            ],
        }


def test_a_kill_in_the_index_stage_then_a_rerun_equals_an_uninterrupted_import(
    db_factory: Any, tmp_path: Path
) -> None:
    convs = [
        one_conversation(
            f"k-{i}",
            f"引っ越し {i}",
            [
                ("user", f"{i}日に引っ越し業者を比べました。見積もりは三社から取りました。"),
                ("assistant", "料金と日程を表にまとめましょう。"),
                ("user", "週末の作業は避けたいと考えています。"),
                ("assistant", "平日の午前が空いている業者を探します。"),
            ],
        )
        for i in range(300)
    ]
    path = chatgpt_export(tmp_path / "conversations.json", convs)

    def run(url: str, fault: str | None = None) -> int:
        return _import_process(path, tmp_path / "data", url, fault)

    killed, whole = db_factory(), db_factory()
    assert run(killed, "index:after-forms-batch@1") == -9  # SIGKILL after one batch of forms
    interrupted = _snapshot(killed)
    assert interrupted["pending"][1] > 0  # the kill left normal forms to do
    assert run(killed) == 0  # the re-run: the file is unchanged, only the index is finished
    assert run(whole) == 0
    resumed, uninterrupted = _snapshot(killed), _snapshot(whole)
    assert resumed["pending"] == [0, 0]
    assert resumed == uninterrupted


@pytest.mark.parametrize(
    ("fault", "ledger_whole", "reader"),
    [
        ("import:after-index-handover@1", False, "0"),
        ("import:ledger-done@1", True, "0"),
        ("import:after-index-handover@1", False, "1"),  # the reader in its own process
    ],
    ids=["while-both-run", "after-the-ledger", "while-both-run-reader-process"],
)
def test_a_kill_while_the_index_trails_the_ledger_then_a_rerun_equals_an_uninterrupted_import(
    db_factory: Any, tmp_path: Path, fault: str, ledger_whole: bool, reader: str
) -> None:
    """The index rows are written behind the ledger by the worker processes (ADR 0044): a
    SIGKILL once the first batch is handed to them (the ledger goes on meanwhile), or once the
    ledger stage is over, leaves whole conversations with their messages queued for the index;
    the re-run gives the same ledger and index as an import never interrupted."""
    convs = [
        one_conversation(
            f"s-{i}",
            f"見積もり {i}",
            [
                ("user", f"{i}社目の見積もりが届きました。予算の範囲に収まりそうです。"),
                ("assistant", "条件を表に加えておきます。"),
            ],
        )
        # five batches of the ledger: a kill at the first hand-over finds at most
        # COMMIT_THREADS (2) of them committed
        for i in range(1200)
    ]
    path = chatgpt_export(tmp_path / "conversations.json", convs)

    def run(url: str, fault: str | None = None) -> int:
        return _import_process(
            path, tmp_path / "data", url, fault, PMEM_INDEX_WORKERS="2", PMEM_IMPORT_READER=reader
        )

    killed, whole = db_factory(), db_factory()
    assert run(killed, fault) == -9
    assert _left_running(str(path)) == []  # its worker (and reader) processes left with it
    interrupted = _snapshot(killed)
    stored = len(interrupted["conversations"])
    assert stored == 1200 if ledger_whole else 0 < stored < 1200  # whole batches of conversations
    indexed = {k for k, _ in interrupted["index"]}
    person = {k for k, *_ in interrupted["messages"]}
    assert indexed <= person
    assert len(indexed) + interrupted["pending"][0] == len(person)  # indexed, or queued for it
    assert run(killed) == 0
    assert run(whole) == 0
    resumed, uninterrupted = _snapshot(killed), _snapshot(whole)
    assert resumed["pending"] == [0, 0]
    assert resumed == uninterrupted


def _left_running(marker: str, wait: float = 5.0) -> list[int]:
    """The processes whose command line names ``marker`` once ``wait`` seconds have passed (a
    worker notices its parent's end within a quarter of a second)."""
    import time

    deadline = time.monotonic() + wait
    while True:
        found = []
        for proc in Path("/proc").iterdir():
            if proc.name.isdigit():
                try:
                    if marker.encode() in (proc / "cmdline").read_bytes():
                        found.append(int(proc.name))
                except OSError:
                    continue
        if not found or time.monotonic() > deadline:
            return found
        time.sleep(0.1)


def test_the_commit_stage_stores_batches_at_once_each_once_and_stops_on_an_error() -> None:
    """The ledger's commit stage runs ``COMMIT_THREADS`` writers at once (the import waited on
    one transaction at a time): three writes meet at a barrier only if they run together; every
    batch is written exactly once; a writer's error is raised to the feeding thread."""
    import threading

    import flows.importing as fi

    assert fi.COMMIT_THREADS >= 2
    met = threading.Barrier(3, timeout=10)
    written: list[int] = []
    lock = threading.Lock()

    def write(batch: Any) -> None:
        if batch.chars < 3:  # the first three: only together do they pass the barrier
            met.wait()
        with lock:
            written.append(batch.chars)

    stage = fi._Stage(write, "test-commit", 3)
    for i in range(20):
        stage.put(fi._Batch(chars=i))
    stage.close()
    assert sorted(written) == list(range(20))

    def fail(batch: Any) -> None:
        raise RuntimeError("disk full")

    stage = fi._Stage(fail, "test-commit", 3)
    with pytest.raises(RuntimeError, match="disk full"):
        for i in range(10):
            stage.put(fi._Batch(chars=i))
        stage.close()


def test_a_worker_nices_its_own_server_process(db_url: str) -> None:
    """The index rows' server work yields the CPU as the worker's tokens do: the connection a
    worker writes through has its server process niced (the embedded server: same machine)."""
    import psycopg

    from store import index_stream

    with psycopg.connect(db_url) as other:
        if not other.info.host.startswith("/"):
            pytest.skip("a server reached over TCP: its processes are not this machine's")
        before = os.getpriority(os.PRIO_PROCESS, other.info.backend_pid)
        index_stream._conn = None
        try:
            conn = index_stream._connection(db_url)
            pid = conn.info.backend_pid
            assert os.getpriority(os.PRIO_PROCESS, pid) == max(before, index_stream.WORKER_NICE)
            # only that process: another connection's is left as it was
            assert os.getpriority(os.PRIO_PROCESS, other.info.backend_pid) == before
        finally:
            if index_stream._conn is not None:
                index_stream._conn.close()
            index_stream._conn = None


def test_the_collector_runs_less_often_while_importing_and_as_before_after() -> None:
    import gc

    from flows.importing import GC_YOUNG_THRESHOLD, _fewer_collections

    before = gc.get_threshold()
    with pytest.raises(RuntimeError), _fewer_collections():
        assert gc.get_threshold()[0] == max(before[0], GC_YOUNG_THRESHOLD)
        assert gc.get_threshold()[1:] == before[1:]
        raise RuntimeError("the import failed")
    assert gc.get_threshold() == before


class _Counted:
    """Counts the calls of ``module.name`` made in this process."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> None:
        self.count = 0
        real = getattr(module, name)

        def counted(*args: Any, **kwargs: Any) -> Any:
            self.count += 1
            return real(*args, **kwargs)

        monkeypatch.setattr(module, name, counted)


def _mixed(n: int) -> list[Any]:
    """Conversations the prefilter keeps and drops for several reasons."""
    kinds = [
        [
            ("user", "転職することに決めました。来月から新しい会社で働きます。"),
            ("assistant", "おめでとうございます。"),
        ],
        [("assistant", "何かお手伝いできることはありますか。")],  # no words of the person's
        [("user", "```python\nprint(1/0)\n```\nfix"), ("assistant", "```python\nprint(1)\n```")],
        [("user", "What does 'ephemeral' mean?"), ("assistant", "Lasting a very short time.")],
    ]
    return [one_conversation(f"m-{i}", f"mix {i}", kinds[i % len(kinds)]) for i in range(n)]


def _decisions(url: str) -> list[Any]:
    return _snapshot(url)["decisions"]


def test_the_workers_decide_the_prefilter_as_the_import_itself_does(
    pmem_env: dict[str, str], db_factory: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The new conversations streamed to the index workers are decided there, in the index
    rows' transaction: the same decisions, and the same counts in the summary, as an import
    that decides them itself (no workers)."""
    import flows.importing

    here = _Counted(monkeypatch, flows.importing, "prefilter")  # in this process only
    path = chatgpt_export(tmp_path / "conversations.json", _mixed(40))
    outs, decided, calls = [], [], []
    for workers in ("2", "0"):
        url = db_factory()
        monkeypatch.setenv("DATABASE_URL", url)
        monkeypatch.setenv("PMEM_INDEX_WORKERS", workers)
        outs.append(pmem_import(str(path), "--source", "chatgpt"))
        decided.append(_decisions(url))
        calls.append(here.count)
    assert calls[0] == 0 and calls[1] == 40  # with workers, none was decided in this process
    assert len(decided[0]) == 40 and decided[0] == decided[1]
    assert len({r[4] for r in decided[0]}) >= 3  # several reasons: a check that can fail
    for key in ("kept", "dropped", "drop_reasons"):
        assert outs[0][key] == outs[1][key]
    assert outs[0]["kept"] + outs[0]["dropped"] == 40 and outs[0]["dropped"] > 0


def test_a_failed_worker_leaves_its_decisions_to_the_import(
    pmem_env: dict[str, str], db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker that fails stores nothing (its messages stay queued for the index step); the
    import makes and stores that batch's decisions itself."""
    import flows.importing

    def broken(*args: Any, **kwargs: Any) -> int:
        raise RuntimeError("the worker's connection broke")

    monkeypatch.setattr(flows.importing, "write_streamed", broken)  # the forked workers too
    here = _Counted(monkeypatch, flows.importing, "prefilter_texts")
    monkeypatch.setenv("PMEM_INDEX_WORKERS", "2")
    path = chatgpt_export(tmp_path / "conversations.json", _mixed(40))
    out = pmem_import(str(path), "--source", "chatgpt")
    assert here.count == 40  # decided here, once the workers had failed
    assert out["kept"] + out["dropped"] == 40
    assert len(_decisions(db_url)) == 40
    assert out["indexed_messages"] > 0  # the index step indexed what the workers did not


def test_a_stale_queue_row_of_a_new_message_takes_the_slow_path_and_is_indexed(
    db_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A streamed batch queues its new messages with a plain insert (no ``ON CONFLICT``): a
    queue row left for a key that is not in the ledger (stale) makes that insert fail, the batch
    is stored by the slow path instead (queued by the trigger, nothing handed to the workers),
    and every message is stored once and indexed by the index step."""
    import psycopg

    from importers import ReadReport, iter_source
    from search.reader import SearchStore
    from stages.prefilter import RULE_VERSION, prefilter
    from store.db import Database
    from store.ledger import BatchIndex, Ledger

    convs = list(iter_source("chatgpt", export(tmp_path, n=6), ReadReport()))
    stale = next(m.key for m in convs[2].messages if m.role == "user")  # a queued channel
    slow = _Counted(monkeypatch, Ledger, "upsert")
    ledger = Ledger(Database(db_url))
    results = []
    for batch, poison in ((convs[:3], True), (convs[3:], False)):
        if poison:
            with psycopg.connect(db_url, autocommit=True) as conn:
                conn.execute(
                    "INSERT INTO message_search_pending (message_key) VALUES (%s)", (stale,)
                )
        index = BatchIndex(dict, streamed=True)
        out = ledger.write_batch(
            batch,
            ledger.start_import("chatgpt", "x"),
            lambda c: prefilter(c, {}),
            RULE_VERSION,
            index=index,
        )
        results.append((out, len(index.queued)))
    assert slow.count == 3  # the poisoned batch, one conversation at a time
    assert results[0][1] == 0 and results[1][1] > 0  # only the plain batch hands rows over
    assert [o for out, _ in results for o, *_ in out] == ["new"] * 6
    assert SearchStore(ledger.db).sync_messages(workers=0) > 0
    after = _snapshot(db_url)
    stored = {k for k, *_ in after["messages"]}
    assert stale in stored and len(stored) == sum(len(c.messages) for c in convs)
    assert stale in {k for k, _ in after["index"]}
    assert after["pending"][0] == 0


def _mixed_export(tmp_path: Path, n: int = 150) -> Path:
    """``n`` conversations (one with a NUL and a lone surrogate in its text, one of a
    megabyte and more), a record that is not an object (quarantined), and the file cut off
    inside the last conversation (an input error after everything before it)."""
    convs: list[Any] = [
        one_conversation(
            f"r-{i}",
            f"読み {i}",
            [("user", f"{i}件目の相談です。\x00 \ud800"), ("assistant", "承知しました。")],
        )
        for i in range(n)
    ]
    convs[3] = one_conversation("r-big", "big", [("user", "長い文章。" * 220_000)])
    convs.insert(7, 42)  # not a conversation
    text = json.dumps(convs)
    path = tmp_path / "conversations.json"
    path.write_text(text[: len(text) - 40], encoding="utf-8")
    return path


def test_the_reader_process_gives_the_items_the_reader_gives_here(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``flows.reading.read_behind`` (ADR 0044): the same conversations and quarantined records
    in the same order, each digest what ``digest`` gives here (a very long conversation's
    left to the import), the same read counts and the same input error at the end; the
    reading and hashing are done in another process, which is gone afterwards."""
    import flows.reading
    from importers import Quarantined, ReadReport, iter_source
    from store.ledger_rows import digest

    path = _mixed_export(tmp_path)
    here_report = ReadReport()
    here: list[Any] = []
    with pytest.raises(InputError) as here_err:
        for item in iter_source("chatgpt", path, here_report):
            here.append(item)
    pids = tmp_path / "pids"
    real = flows.reading.digest

    def recorded(conv: Any) -> Any:
        with pids.open("a") as f:
            f.write(f"{os.getpid()}\n")
        return real(conv)

    monkeypatch.setattr(flows.reading, "digest", recorded)
    behind_report = ReadReport()
    behind: list[Any] = []
    with pytest.raises(InputError) as behind_err:
        for pair in flows.reading.read_behind("chatgpt", path, behind_report):
            behind.append(pair)
    assert [item for item, _ in behind] == here
    assert any(isinstance(item, Quarantined) for item in here)
    for item, dig in behind:
        if isinstance(item, Quarantined) or sum(len(m.text) for m in item.messages) > 1_000_000:
            assert dig is None
        else:
            assert dig == digest(item)
    assert sum(1 for item, dig in behind if dig is None and not isinstance(item, Quarantined)) == 1
    assert type(behind_err.value) is type(here_err.value)
    assert str(behind_err.value) == str(here_err.value)
    assert getattr(behind_err.value, "reason", None) == getattr(here_err.value, "reason", None)
    assert (behind_report.bytes_read, behind_report.bytes_total) == (
        here_report.bytes_read,
        here_report.bytes_total,
    )
    assert behind_report.skipped == here_report.skipped
    hashed_in = {int(p) for p in pids.read_text().split()}
    assert hashed_in and os.getpid() not in hashed_in
    assert _left_running(str(path), wait=2.0) == []  # no reader left (its cmdline is pytest's)


def test_a_reader_stopped_early_is_gone(tmp_path: Path) -> None:
    """The import stops reading (an error in a stage, Ctrl-C): closing the items ends the
    reader's process."""
    import flows.reading
    from importers import ReadReport

    convs = [one_conversation(f"e-{i}", "t", [("user", "x" * 2000)]) for i in range(3000)]
    path = chatgpt_export(tmp_path / "conversations.json", convs)
    before = _children()  # the test process's own (an embedded server started by a test)
    items = flows.reading.read_behind("chatgpt", path, ReadReport())
    next(items)
    reader = _children() - before
    assert reader  # the reader, blocked on its full pipe
    items.close()
    assert not _children() & reader


def _children() -> set[int]:
    me = str(os.getpid())
    found = set()
    for proc in Path("/proc").iterdir():
        if proc.name.isdigit():
            try:
                stat = (proc / "stat").read_text()
            except OSError:
                continue
            if stat.rsplit(")", 1)[1].split()[1] == me:
                found.add(int(proc.name))
    return found


def test_the_ledger_is_the_same_read_here_or_in_the_reader_process(
    db_factory: Any, tmp_path: Path
) -> None:
    """The same export imported with the reader in the import's process and in its own
    (``PMEM_IMPORT_READER``): the same exit status (the input error), ledger, index and
    decisions."""
    path = _mixed_export(tmp_path)
    here, behind = db_factory(), db_factory()
    code = _import_process(path, tmp_path / "d0", here, PMEM_IMPORT_READER="0")
    assert code != 0  # the file is cut off
    assert _import_process(path, tmp_path / "d1", behind, PMEM_IMPORT_READER="1") == code
    assert _snapshot(behind) == _snapshot(here)
    assert len(_snapshot(here)["conversations"]) == 149
