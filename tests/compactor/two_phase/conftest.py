"""One harness over both ``CompactionStorage`` implementations: the in-memory twin and
the adapter over a real RocksDB ``LedgerStore`` (small ledgers, so runs span several)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Protocol

import pytest

from compactlog.compactor.two_phase.ledger_adapter import LedgerStoreCompactionStorage
from compactlog.compactor.two_phase.memory import InMemoryCompactionStorage
from compactlog.compactor.two_phase.storage import CompactionStorage
from compactlog.storage.config import ServerSettings
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.types import MessageId, Record
from compactlog.storage.views import view_messages
from compactlog.v1 import compactlog_pb2 as pb

View = list[tuple[MessageId, bytes | None, bytes | None]]


def as_view(messages: Sequence[pb.Message]) -> View:
    return [
        (
            MessageId(m.id.ledger_id, m.id.entry_id),
            m.key if m.HasField("key") else None,
            m.value if m.HasField("value") else None,
        )
        for m in messages
    ]


class Harness(Protocol):
    storage: CompactionStorage

    def create_topic(self, name: str, retain_null_key: bool = False) -> None: ...
    def publish(self, name: str, records: Sequence[Record]) -> list[MessageId]: ...
    def view(self, name: str) -> View: ...
    def ledger_ids(self) -> set[int]: ...


class MemoryHarness:
    def __init__(self) -> None:
        self.mem = InMemoryCompactionStorage()
        self.storage: CompactionStorage = self.mem

    def create_topic(self, name: str, retain_null_key: bool = False) -> None:
        self.mem.create_topic(name, retain_null_key, ledger_max_entries=4)

    def publish(self, name: str, records: Sequence[Record]) -> list[MessageId]:
        return self.mem.publish(name, records)

    def view(self, name: str) -> View:
        return as_view(self.mem.compacted_view(name))

    def ledger_ids(self) -> set[int]:
        return set(self.mem.ledgers)


class RocksHarness:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.store = LedgerStore(path, ServerSettings(topic_defaults={}))
        self.storage: CompactionStorage = LedgerStoreCompactionStorage(self.store)

    def create_topic(self, name: str, retain_null_key: bool = False) -> None:
        self.store.create_topic(
            name,
            {"ledger.max.entries": "4", "compaction.retain.null.key": str(retain_null_key).lower()},
        )

    def publish(self, name: str, records: Sequence[Record]) -> list[MessageId]:
        return self.store.append(name, records)

    def view(self, name: str) -> View:
        lac = self.store.topic(name).lac
        if lac is None:
            return []
        return [
            (m.id, m.key, m.value)
            for m in view_messages(self.store, name, MessageId(0, 0), lac, compacted=True)
        ]

    def ledger_ids(self) -> set[int]:
        return {lid for lid in range(1, 200) if self.store.ledger(lid) is not None}

    def restart(self) -> None:
        """Close and reopen the store, as a process restart does (start-up collection runs)."""
        self.store.close()
        self.store = LedgerStore(self.path, ServerSettings(topic_defaults={}))
        self.storage = LedgerStoreCompactionStorage(self.store)

    def close(self) -> None:
        self.store.close()


@pytest.fixture(params=["memory", "rocksdb"])
def harness(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Harness]:
    if request.param == "memory":
        yield MemoryHarness()
        return
    rocks = RocksHarness(tmp_path / "ledgers")
    yield rocks
    rocks.close()


@pytest.fixture
def rocks(tmp_path: Path) -> Iterator[RocksHarness]:
    harness = RocksHarness(tmp_path / "ledgers")
    yield harness
    harness.close()
