"""One big message in linear time (issue 31, item 3): the streaming array reader parses an item
longer than its buffer at most twice (a first try cut by the buffer, then the whole item), finds
the end of the long string with ``str.find`` instead of parsing again, and stays within a small
factor of ``json.load`` for the same file."""

from __future__ import annotations

import io
import json
import time
from typing import Any

import pytest

from importers import _jsonarray
from importers._jsonarray import iter_array_items


class _CountingDecoder:
    """The reader's real decoder, counting its calls and the characters each call could scan."""

    def __init__(self) -> None:
        self.real = json.JSONDecoder()
        self.calls = 0
        self.chars = 0

    def raw_decode(self, s: str, idx: int = 0) -> tuple[Any, int]:
        self.calls += 1
        self.chars += len(s) - idx
        return self.real.raw_decode(s, idx)


def _export(text: str) -> bytes:
    conv = {"id": "c1", "title": "big", "mapping": {"n": {"message": {"parts": [text]}}}}
    return json.dumps([{"id": "c0"}, conv, {"id": "c2"}]).encode("ascii")


def _big_text(chars: int) -> str:
    # Japanese (escaped as \\uXXXX in the file), quotes and backslashes, so that read edges
    # fall inside escapes and the string's end must be told from escaped quotes
    unit = '今日は "引用" と C:\\path\\to の話。 plain words and "more".\n'
    return unit * (chars // len(unit))


def test_a_big_message_is_parsed_at_most_twice(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _export(_big_text(3_000_000))  # ~12 MB in the file: many reads of the 1 MB buffer
    counting = _CountingDecoder()
    monkeypatch.setattr(_jsonarray, "_DECODER", counting)
    items = list(iter_array_items(io.BytesIO(data), "conversations.json"))
    assert [v for _, v in items] == json.loads(data)
    # 3 items: the small ones once each, the big one twice (its cut first try reads one buffer)
    assert counting.calls <= 4
    assert counting.chars <= len(data) + 3 * (1 << 20)


def test_an_escaped_quote_on_a_read_edge_does_not_end_the_string() -> None:
    for shift in range(6):  # the backslash run before a quote lands on either side of the edge
        text = "x" * ((1 << 20) - 40 + shift) + '\\\\\\"' + "y" * 2_000_000
        data = _export(text)
        assert [v for _, v in iter_array_items(io.BytesIO(data), "f.json")] == json.loads(data)


def test_a_big_message_costs_about_what_json_load_costs() -> None:
    data = _export(_big_text(5_000_000))  # ~20 MB

    def cpu(fn: Any) -> float:
        best = float("inf")
        for _ in range(3):  # the best of three: the machine is shared
            started = time.process_time()
            fn()
            best = min(best, time.process_time() - started)
        return best

    baseline = cpu(lambda: json.load(io.BytesIO(data)))
    ours = cpu(lambda: list(iter_array_items(io.BytesIO(data), "f.json")))
    assert ours <= 3 * baseline, (ours, baseline)  # measured about 1.4x


def test_the_import_of_one_big_message_is_linear_in_its_size(
    db_factory: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The whole import of one conversation whose one message is 4x longer (parsing, hashes,
    the prefilter, the ledger's COPY, the index rows and their tokens, every thread of this
    process) costs about 4x the CPU beyond that of a short one, not 16x: nothing is repeated per read or per passage of
    the text (issue 31, item 3). ``bench/import_bench.py --single-message --mb 50`` measures
    the whole process against ``json.load``."""
    from flows.importing import run_import
    from store.db import Database
    from store.ledger import Ledger
    from tests.test_ledger_cmds import chatgpt_export, one_conversation

    monkeypatch.setenv("PMEM_INDEX_WORKERS", "0")  # every part in this process (its CPU counted)

    def import_cpu(chars: int) -> float:
        path = chatgpt_export(
            tmp_path / f"big-{chars}.json",
            [one_conversation("big", "big", [("user", _big_text(chars)), ("assistant", "ok")])],
        )
        best = float("inf")
        for _ in range(3):  # the best of three, each into a fresh store: the machine is shared
            db = Database(db_factory())
            try:
                started = time.process_time()
                stats = run_import(Ledger(db), "chatgpt", str(path), index_messages=True)
                best = min(best, time.process_time() - started)
            finally:
                db.close()
            assert stats["messages_new"] == 2 and stats["indexed_messages"] == 2
        return best

    # what the size adds beyond an import of a short message (the store, the threads)
    fixed = import_cpu(1_000)
    small, large = import_cpu(2_000_000) - fixed, import_cpu(8_000_000) - fixed
    assert small > 0 and large <= 6 * small, (fixed, small, large)  # linear ~4x, quadratic ~16x
