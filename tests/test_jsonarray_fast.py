"""The array reader's fast path (issue 31): the whole items of a chunk are parsed by orjson at
once, and whatever orjson refuses or would read differently is read item by item by the standard
library's scanner. The reference is ``json.loads`` of the whole file: every item equal to it,
with the same types (an integer beyond 64 bits stays an exact ``int``), and the bad items
quarantined with the same reasons as before."""

from __future__ import annotations

import io
import json
import random
from typing import Any

import pytest

from importers import _jsonarray
from importers._jsonarray import BadItem, iter_array_items


def _items(data: bytes) -> list[Any]:
    return [v for _, v in iter_array_items(io.BytesIO(data), "f.json")]


def _exact(value: Any) -> Any:
    """``value`` with each number's type beside it: ``1 == 1.0`` must not pass."""
    if isinstance(value, dict):
        return {k: _exact(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_exact(v) for v in value]
    return (type(value).__name__, repr(value))


def _conversation(rng: random.Random, n: int, odd: str = "") -> dict[str, Any]:
    text = " ".join(rng.choice(["a", "}, {", '"', "\\", "日本", "x" * 30]) for _ in range(40))
    return {
        "id": f"c{n}",
        "create_time": rng.random() * 1.7e9,
        "mapping": {
            f"n{i}": {
                "message": {"content": {"parts": [text + odd, {"k": [1, {"d": i}]}]}},
                "children": [f"n{i + 1}"],
            }
            for i in range(rng.randint(1, 6))
        },
    }


@pytest.mark.parametrize(
    ("dumps", "ascii"),
    [
        (json.dumps, True),
        (lambda v: json.dumps(v, indent=2), True),
        (lambda v: json.dumps(v, ensure_ascii=False), False),  # UTF-8: no lone surrogate
    ],
)
def test_the_items_equal_json_loads_of_the_whole_file(
    dumps: Any, ascii: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_jsonarray, "_READ", 1 << 16)
    rng = random.Random(5)
    odd = [
        "\ud800" if ascii else "é",  # a lone surrogate escape: orjson refuses it
        "\x00",  # \u0000: both keep it
        "\udc00\ud800" if ascii else "😀",
    ]
    items: list[Any] = []
    for n in range(400):
        item = _conversation(rng, n, odd[n % 3] if n % 37 == 0 else "")
        if n == 101:
            item["big"] = 123456789012345678901234567890  # beyond 64 bits: stays an int
        if n == 202:
            item["neg"] = -9223372036854775809
        if n == 303:
            item["nums"] = [1e308, -0.0, 0.1, 5e-324]
        items.append(item)
    data = dumps(items).encode()
    assert len(data) > 3 * _jsonarray._READ  # several reads, several spans
    assert _exact(_items(data)) == _exact(json.loads(data))


def test_nan_and_a_number_beyond_a_double_are_read_as_the_standard_library_reads_them() -> None:
    rng = random.Random(7)
    items = [_conversation(rng, n) for n in range(300)]
    items[150]["x"] = "NAN"
    items[250]["y"] = "INF"
    data = json.dumps(items).encode().replace(b'"NAN"', b"NaN").replace(b'"INF"', b"1e400")
    got = _items(data)
    assert got[150]["x"] != got[150]["x"]  # NaN
    assert got[250]["y"] == float("inf")
    assert _exact(got[:150]) == _exact(json.loads(data)[:150])


def test_most_items_of_an_ordinary_export_are_parsed_by_orjson(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The fast path is taken (the one-by-one reader only gets the item a chunk cuts)."""
    calls = {"one": 0}
    item = _jsonarray._ArrayScanner.item

    def counting(self: Any, index: int) -> Any:
        calls["one"] += 1
        return item(self, index)

    monkeypatch.setattr(_jsonarray._ArrayScanner, "item", counting)
    rng = random.Random(3)
    data = json.dumps([_conversation(rng, n) for n in range(3000)]).encode()
    assert len(_items(data)) == 3000
    assert calls["one"] < 3000 / 10


def test_a_bad_item_among_fast_ones_is_quarantined_with_its_byte_offset() -> None:
    rng = random.Random(9)
    items = [_conversation(rng, n) for n in range(300)]
    items[120]["bad"] = "BADBYTE"
    data = json.dumps(items).encode()
    at = data.index(b"BADBYTE")
    data = data.replace(b"BADBYTE", b"\xff" + b"ADBYTE")
    got = _items(data)
    assert len(got) == 300
    assert [i for i, v in enumerate(got) if isinstance(v, BadItem)] == [120]
    assert got[120].reason == f"invalid-utf8 at byte {at}"
    good = json.loads(data.replace(b"\xff", b"B"))
    assert _exact([v for i, v in enumerate(got) if i != 120]) == _exact(
        [v for i, v in enumerate(good) if i != 120]
    )


def test_a_long_digit_run_cut_by_a_read_is_still_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(11)
    items = [_conversation(rng, n) for n in range(200)]
    items[77]["big"] = 10**40
    data = json.dumps(items).encode()
    run = data.index(b"1" + b"0" * 40)
    monkeypatch.setattr(_jsonarray, "_HEAD", 1024)
    cuts = 0
    for size in range(4096, 4096 + 41):  # one read ends inside the run for most sizes
        monkeypatch.setattr(_jsonarray, "_READ", size)
        cuts += (run - 1024) // size != (run + 40 - 1024) // size
        got = _items(data)
        assert type(got[77]["big"]) is int and got[77]["big"] == 10**40
    assert cuts > 0
    assert _exact(got) == _exact(json.loads(data))
