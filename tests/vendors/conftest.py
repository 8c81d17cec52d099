"""What the three vendor adapters' tests share: no vendor key from the environment, a fresh
local fake of the vendor's API per test, and recorded (not slept) waits."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakeservers import VENDOR_ENV, FakeServer, Sleeps


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in VENDOR_ENV:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def server() -> Iterator[FakeServer]:
    with FakeServer() as s:
        yield s


@pytest.fixture
def sleeps() -> Sleeps:
    return Sleeps()
