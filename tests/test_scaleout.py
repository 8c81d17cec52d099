"""Issue 18: the backfill on a Prefect process work pool, for real on one machine: one shared
PostgreSQL (the embedded server, DATABASE_URL), the session's Prefect server, one shared runs
folder (PMEM_RUNS_URL), `pmem deploy`, two `pmem worker` processes and `pmem backfill --pool
--wait --json`, a scripted model behind the local fake server drafting (tests/scripted_model.py;
each worker with its own API key, so the server tells them apart).

* two workers sharing one data dir, committing through the memory API with a low budget: every
  conversation is drafted exactly once (the fake server counts), both workers draft, the memory
  API never answers 429, and the export equals a single-process run's;
* two workers with separate data dirs: one is SIGKILLed (with its flow run) while the model
  holds its request; the other takes the batch over once the lease runs out and finishes the run;
  the export again equals the single-process run's.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from tests.conftest import PROJECT
from tests.fakeservers import Recorded, Reply
from tests.scripted_model import ScriptedModel, _batch_text, parse_conversations

# subprocesses start Prefect many times (the workers, their flow runs): generous on a busy machine
pytestmark = [pytest.mark.prefect, pytest.mark.timeout(600)]

# 40 conversations on 40 unrelated things, each ending in a decision with its reason
THINGS = [
    ("自転車", "クロスバイク", "ママチャリ"),
    ("掃除機", "コードレス掃除機", "ロボット掃除機"),
    ("炊飯器", "圧力IH炊飯器", "土鍋"),
    ("冷蔵庫", "四ドア冷蔵庫", "小型冷蔵庫"),
    ("洗濯機", "ドラム式洗濯機", "縦型洗濯機"),
    ("腕時計", "ソーラー電波時計", "機械式時計"),
    ("ランニングシューズ", "厚底シューズ", "薄底シューズ"),
    ("登山靴", "ミッドカット登山靴", "トレランシューズ"),
    ("スーツケース", "ハードケース", "ソフトケース"),
    ("カメラ", "ミラーレス一眼", "コンパクトカメラ"),
    ("保険", "掛け捨て保険", "積立保険"),
    ("証券口座", "ネット証券", "対面証券"),
    ("英会話教室", "オンライン英会話", "駅前の英会話教室"),
    ("ピアノ", "電子ピアノ", "アップライトピアノ"),
    ("ソファ", "二人掛けソファ", "ビーズクッション"),
    ("カーテン", "遮光カーテン", "レースカーテン"),
    ("観葉植物", "モンステラ", "パキラ"),
    ("コーヒー豆", "浅煎りの豆", "深煎りの豆"),
    ("紅茶", "アールグレイ", "ダージリン"),
    ("日本酒", "純米吟醸", "本醸造"),
    ("自動車", "ハイブリッド車", "軽自動車"),
    ("タイヤ", "スタッドレスタイヤ", "オールシーズンタイヤ"),
    ("引越し業者", "大手の引越し業者", "地元の引越し業者"),
    ("賃貸物件", "駅近の1K", "郊外の2DK"),
    ("旅行先", "北海道", "沖縄"),
    ("ホテル", "温泉旅館", "ビジネスホテル"),
    ("歯ブラシ", "電動歯ブラシ", "普通の歯ブラシ"),
    ("枕", "低反発枕", "そば殻枕"),
    ("マットレス", "高反発マットレス", "ポケットコイル"),
    ("眼鏡", "軽いチタン眼鏡", "セルフレーム眼鏡"),
    ("イヤホン", "ノイズキャンセリングイヤホン", "有線イヤホン"),
    ("キーボード", "静電容量無接点キーボード", "メンブレンキーボード"),
    ("モニター", "四Kモニター", "ウルトラワイドモニター"),
    ("椅子", "オフィスチェア", "ダイニングチェア"),
    ("傘", "折りたたみ傘", "ジャンプ傘"),
    ("財布", "長財布", "小銭入れ"),
    ("手帳", "週間手帳", "月間手帳"),
    ("ペン", "ゲルインクのペン", "万年筆"),
    ("鍋", "鋳物の鍋", "アルミの鍋"),
    ("包丁", "三徳包丁", "牛刀"),
]
assert len(THINGS) == 40


def _conversation(i: int, thing: str, a: str, b: str) -> dict[str, Any]:
    texts = [
        ("user", f"{thing}を探してる。{a}と{b}で迷ってる。"),
        ("assistant", "使い方で選ぶと良いです。"),
        ("user", f"{a}にする。理由は、{thing}として長く使えそうだから。"),
    ]
    mapping: dict[str, Any] = {
        "root": {"id": "root", "message": None, "parent": None, "children": []}
    }
    parent = "root"
    for n, (role, text) in enumerate(texts):
        node = f"n{n}"
        mapping[parent]["children"].append(node)
        mapping[node] = {
            "id": node,
            "parent": parent,
            "children": [],
            "message": {
                "id": node,
                "author": {"role": role},
                "create_time": 1_700_000_000 + 86_400 * i + n,
                "content": {"content_type": "text", "parts": [text]},
            },
        }
        parent = node
    return {
        "id": f"scale-{i:02d}",
        "title": f"{thing}選び",
        "create_time": 1_700_000_000 + 86_400 * i,
        "mapping": mapping,
        "current_node": parent,
    }


@pytest.fixture(scope="module")
def export(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("scaleout-export") / "conversations.json"
    path.write_text(
        json.dumps([_conversation(i, *t) for i, t in enumerate(THINGS)], ensure_ascii=False),
        "utf-8",
    )
    return path


class CountingModel(ScriptedModel):
    """The scripted model, slowed a little (so that both workers get batches), recording which
    worker (API key) sent each request and when; a request from ``hold_key`` is held (never
    answered while the test runs) and announced, so the test can kill that worker mid-batch."""

    def __init__(self, delay: float = 0.0, hold_key: str | None = None) -> None:
        super().__init__()
        self.delay, self.hold_key = delay, hold_key
        self.held = threading.Event()
        self.seen: list[tuple[str, float, list[str]]] = []  # (api key, time, conversation keys)

    def _record_and_next(self, request: Recorded) -> Reply:
        key = request.headers.get("authorization", "").removeprefix("Bearer ")
        convs = [c.key for c in parse_conversations(_batch_text(request.json()))]
        with self._lock:
            self.seen.append((key, time.monotonic(), convs))
        reply = super()._record_and_next(request)
        if key == self.hold_key and not self.held.is_set():
            self.held.set()
            return Reply(reply.status, reply.body, reply.headers, delay=600)
        return Reply(reply.status, reply.body, reply.headers, delay=self.delay)

    def drafted(self) -> Counter[str]:
        return Counter(c for _, _, convs in self.seen for c in convs)


def _model_env(url: str, key: str) -> dict[str, str]:
    return {
        "PMEM_LLM": "openai:gpt-scripted",
        "PMEM_OPENAI_BASE_URL": url + "/v1",
        "OPENAI_API_KEY": key,
        "PMEM_BATCH_MAX_CONVERSATIONS": "2",
        "PMEM_MAX_CONCURRENCY": "1",
        "PMEM_EMBEDDER": "none",
    }


def _export_text(db_url: str) -> str:
    from store.db import Database
    from store.export import write_export

    db = Database(db_url)
    try:
        out = io.StringIO()
        # the memories' rows: the concept memory is compared as readers see it (_concept_state),
        # since the pool's batch order decides which memory first named a concept
        write_export(db, out, derived=False)
        return out.getvalue()
    finally:
        db.close()


def _concept_state(db_url: str) -> dict[str, Any]:
    """The concept store as readers see it: concepts with their experiences, links with their
    weights and supporters (ids are content-derived, so two runs of one export compare)."""
    from store.concepts import ConceptStore
    from store.db import Database

    db = Database(db_url)
    try:
        cs = ConceptStore(db)
        names = {c.id: c.name for c in cs.concepts()}
        return {
            "concepts": {n: cs.experiences_of(cid) for cid, n in sorted(names.items())},
            "links": sorted(
                (names[k.source_id], names[k.target_id], k.relation, k.weight, k.experiences)
                for k in cs.links()
            ),
            "counts": cs.counts(),
        }
    finally:
        db.close()


@pytest.fixture(scope="module")
def single_process(
    export: Path, pg_admin_url: str, template_db: str, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Any]]:
    """The same export backfilled by one process (the default in-process run, one worker on the
    claims): its export, drafter calls, 429s and wall time."""
    from core.settings import Settings
    from flows import consent as cs
    from flows.pipeline import Pipeline, run_backfill

    name = f"pmem_scaleout_ref_{os.getpid()}"
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {}").format(
                sql.Identifier(name), sql.Identifier(template_db)
            )
        )
    url = make_conninfo(pg_admin_url, dbname=name)
    with CountingModel() as model, pytest.MonkeyPatch.context() as mp:
        env = _model_env(model.url, "key-single") | {
            "PMEM_DATA_DIR": str(tmp_path_factory.mktemp("ref-data")),
            "DATABASE_URL": url,
        }
        for k, v in env.items():
            mp.setenv(k, v)
        settings = Settings()
        target = cs.drafting_target(settings.llm, "chatgpt")
        assert target is not None
        cs.grant(settings, target, [], {})
        p = Pipeline.open(settings)
        start = time.monotonic()
        try:
            summary = run_backfill(p, "chatgpt", str(export), embed=False)
        finally:
            p.close()
        wall = time.monotonic() - start
        drafted = model.drafted()
    yield {
        "export": _export_text(url),
        "concepts": _concept_state(url),
        "summary": summary,
        "wall": wall,
        "drafted": drafted,
    }
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
        )


def _pmem(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "cli.main", *args],
        env=env,
        cwd=PROJECT,
        capture_output=True,
        text=True,
        timeout=240,
    )


class Worker:
    """`pmem worker --pool P --limit 1` in its own session (so that it dies with its flow runs)."""

    def __init__(self, env: dict[str, str], pool: str, name: str) -> None:
        self.name = name
        self.lines: list[str] = []
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "cli.main",
                "worker",
                "--pool",
                pool,
                "--limit",
                "1",
                "--name",
                name,
            ],
            env=env,
            cwd=PROJECT,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def wait_for(self, words: str, timeout: float = 60) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            found = [line for line in self.lines if words in line]
            if found:
                return found[0]
            assert self.proc.poll() is None, f"worker {self.name} ended: {self.lines}"
            time.sleep(0.1)
        raise AssertionError(f"worker {self.name} never printed {words!r}: {self.lines}")

    def kill(self) -> None:
        """SIGKILL the worker and every process under it (its flow run, which Prefect starts in a
        session of its own), as a machine dies."""
        tree = _descendants(self.proc.pid)
        for pid in [self.proc.pid, *tree]:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        self.proc.wait(10)

    def stop(self) -> None:
        """End the worker and its flow runs (finished by now, or hanging on a held request)."""
        if self.proc.poll() is None:
            self.kill()


def _descendants(root: int) -> list[int]:
    """Every process under ``root`` (from /proc: pid -> parent pid)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    out: list[int] = []
    frontier = [root]
    while frontier:
        kids = [pid for pid, ppid in parents.items() if ppid in frontier]
        out += kids
        frontier = kids
    return out


def _base_env(cli_env: dict[str, str], runs: str) -> dict[str, str]:
    return dict(
        cli_env,
        PMEM_RUNS_URL=runs,
        PREFECT_WORKER_QUERY_SECONDS="1",
        PREFECT_WORKER_PREFETCH_SECONDS="2",
        PMEM_LEASE_SECONDS="3",
    )


def _backfill(env: dict[str, str], export: Path, pool: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "cli.main",
            "backfill",
            "--export",
            str(export),
            "--pool",
            pool,
            "--wait",
            "--json",
            "--yes",
            "--no-embed",
        ],
        env=env,
        cwd=PROJECT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(proc: subprocess.Popen[str], timeout: float = 120) -> dict[str, Any]:
    out, err = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, err[-3000:]
    assert "Prefect flow run: http" in err  # the flow run's URL
    return json.loads(out.strip().splitlines()[-1])


def test_two_workers_share_one_run_one_budget_one_runs_folder(
    cli_env: dict[str, str],
    api_server: Any,
    export: Path,
    single_process: dict[str, Any],
    tmp_path: Path,
) -> None:
    budget = "30/1s"  # low: ~100 memory-API requests must be paced across both workers
    url = api_server(budget)
    env = _base_env(cli_env, f"file://{tmp_path / 'runs'}") | {"PMEM_COMMIT_BUDGET": budget}
    pool = f"pmem-{uuid.uuid4().hex[:8]}"
    with CountingModel(delay=0.15) as model:
        workers = [
            Worker(env | _model_env(model.url, f"key-{n}") | {"PMEM_MEMORY_URL": url}, pool, n)
            for n in ("a", "b")
        ]
        try:
            deployed = _pmem(env, "deploy", "--pool", pool, "--json")
            assert deployed.returncode == 0, deployed.stderr[-2000:]
            assert (
                f"backfill-pool/{pool}"
                in json.loads(deployed.stdout.strip().splitlines()[-1])["deployments"]
            )
            for w in workers:
                assert f"started on the work pool {pool}" in w.wait_for("started")
            start = time.monotonic()
            summary = _finish(_backfill(env | _model_env(model.url, "key-submitter"), export, pool))
            wall = time.monotonic() - start
            for w in workers:
                assert "took flow run" in w.wait_for("took flow run")
        finally:
            for w in workers:
                w.stop()
        drafted = model.drafted()
        keys = Counter(key for key, _, _ in model.seen)
    # every conversation drafted exactly once, by the two workers (the submitter drafts nothing)
    assert len(drafted) == 40 and set(drafted.values()) == {1}, drafted
    assert set(keys) == {"key-a", "key-b"}, keys
    # the summary is totalled over both workers and matches the single-process run
    ref = single_process["summary"]
    assert summary["status"] == "complete" and summary["workers"] == 2 and summary["flow_runs"] == 2
    for k in ("batches_total", "batches_drafted", "drafter_calls", "commits", "memories_created"):
        assert summary[k] == ref[k], (k, summary[k], ref[k])
    assert summary["drafter_calls"] == sum(keys.values()) == 20
    # one budget for both: paced below the server's limit, the memory API never answered 429
    assert summary["memory_api_requests"] > 30 and summary["rate_limited"] == 0
    # the run files of every batch in the one shared folder, checksummed
    results = sorted((tmp_path / "runs").glob("*/batches/*/result.json"))
    assert len(results) == 20
    assert _export_text(cli_env["DATABASE_URL"]) == single_process["export"]
    # the pool run ran the concept stage like the in-process one: the same concept store
    pooled = _concept_state(cli_env["DATABASE_URL"])
    assert pooled["counts"]["experiences"] == summary["memories_created"] > 0
    assert pooled == single_process["concepts"]
    print(
        f"\ntwo workers: {wall:.1f} s wall (submit to end), {summary['drafter_calls']} drafter calls, "
        f"{summary['rate_limited']} 429s; single process: {single_process['wall']:.1f} s, "
        f"{ref['drafter_calls']} drafter calls, {ref['rate_limited']} 429s"
    )


def test_a_killed_worker_leaves_its_batch_to_the_other_after_the_lease(
    cli_env: dict[str, str], export: Path, single_process: dict[str, Any], tmp_path: Path
) -> None:
    env = _base_env(cli_env, str(tmp_path / "runs")) | {"PMEM_POOL_FANOUT": "2"}
    pool = f"pmem-{uuid.uuid4().hex[:8]}"
    with CountingModel(delay=0.05, hold_key="key-a") as model:
        # separate data dirs stand in for two machines
        a = Worker(
            env | _model_env(model.url, "key-a") | {"PMEM_DATA_DIR": str(tmp_path / "machine-a")},
            pool,
            "a",
        )
        b: Worker | None = None
        try:
            deployed = _pmem(env, "deploy", "--pool", pool)
            assert deployed.returncode == 0, deployed.stderr[-2000:]
            a.wait_for("started")
            proc = _backfill(env | _model_env(model.url, "key-submitter"), export, pool)
            assert model.held.wait(90), "worker a never sent a drafting request"
            a.kill()  # mid-batch: its model request is in flight, its lease still running
            killed_at = time.monotonic()
            b = Worker(
                env
                | _model_env(model.url, "key-b")
                | {"PMEM_DATA_DIR": str(tmp_path / "machine-b")},
                pool,
                "b",
            )
            summary = _finish(proc)
        finally:
            a.stop()
            if b is not None:
                b.stop()
        drafted = model.drafted()
        seen = list(model.seen)
    held_key, held_at, held_convs = next(s for s in seen if s[0] == "key-a")
    assert [s[0] for s in seen].count("key-a") == 1
    # the held batch was drafted again by b, only after a's lease ran out; all others once
    again = [t for key, t, convs in seen if key == "key-b" and convs == held_convs]
    assert len(again) == 1 and again[0] - held_at >= 3 - 0.5
    assert again[0] >= killed_at
    assert {c: n for c, n in drafted.items() if n != 1} == dict.fromkeys(held_convs, 2)
    assert len(drafted) == 40
    assert summary["status"] == "complete" and summary["batches_left"] == 0
    assert summary["batches_total"] == single_process["summary"]["batches_total"]
    assert summary["commits"] == single_process["summary"]["commits"]
    assert _export_text(cli_env["DATABASE_URL"]) == single_process["export"]
