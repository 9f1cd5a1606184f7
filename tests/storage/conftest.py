"""What the ledger store's tests share: a settable clock and a store opened (and
reopened) in the test's folder."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from compactlog.storage.config import ServerSettings
from compactlog.storage.ledger_store import LedgerStore


class Clock:
    def __init__(self, now: float = 1_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def open_store(tmp_path: Path, clock: Clock) -> Iterator[Callable[..., LedgerStore]]:
    """Open (or reopen) the store in tmp_path; the previous handle is closed first."""
    opened: list[LedgerStore] = []

    def make(durability: str = "fsync") -> LedgerStore:
        for old in opened:
            old.close()
        opened.clear()
        store = LedgerStore(
            tmp_path / "db", ServerSettings(publish_durability=durability, topic_defaults={}), clock
        )
        opened.append(store)
        return store

    yield make
    for store in opened:
        store.close()
