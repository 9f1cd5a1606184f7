"""Reader-aware tombstone retention over a real RocksDB store: a tombstone stays in the
compacted ledger while a durable subscription reading compacted has not passed it, or
while it is younger than ``delete.retention.ms``; a past view (``as_of``) never shows it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from compactlog.compactor.two_phase import TwoPhaseCompactor
from compactlog.compactor.two_phase.as_of import as_of_messages
from compactlog.compactor.two_phase.ledger_adapter import LedgerStoreCompactionStorage
from compactlog.compactor.two_phase.ledger_snapshot import compacted_view as compacted_view_snapshot
from compactlog.compactor.two_phase.storage import TombstoneRetention
from compactlog.compactor.two_phase.verify import verify_view
from compactlog.storage.config import ServerSettings
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.types import MessageId, Record
from compactlog.storage.views import view_messages


@pytest.fixture
def store(tmp_path: Path) -> Iterator[LedgerStore]:
    s = LedgerStore(tmp_path / "ledgers", ServerSettings(topic_defaults={}))
    yield s
    s.close()


def compacted(store: LedgerStore, topic: str) -> list[tuple[bytes | None, bytes | None]]:
    lac = store.topic(topic).lac
    assert lac is not None
    return [(m.key, m.value) for m in view_messages(store, topic, MessageId(0, 0), lac, True)]


def compact(store: LedgerStore, topic: str) -> TwoPhaseCompactor:
    compactor = TwoPhaseCompactor(LedgerStoreCompactionStorage(store), 1 << 20)
    compactor.compact(topic)
    return compactor


def test_retention_bounds() -> None:
    assert TombstoneRetention.of(None, 0, 1000, MessageId(1, 5)) is None
    assert TombstoneRetention.of(MessageId(1, 5), 0, 1000, MessageId(1, 5)) is None
    held = TombstoneRetention.of(MessageId(1, 2), 0, 1000, MessageId(1, 5))
    assert (
        held is not None and held.keeps(MessageId(1, 3), 0) and not held.keeps(MessageId(1, 2), 0)
    )
    timed = TombstoneRetention.of(None, 100, 1000, MessageId(1, 5))
    assert (
        timed is not None
        and timed.keeps(MessageId(1, 0), 901)
        and not timed.keeps(MessageId(1, 0), 900)
    )


def test_a_slow_compacted_subscription_keeps_the_tombstone_until_it_passes_it(
    store: LedgerStore,
) -> None:
    store.create_topic("t", {"ledger.max.entries": "3"})
    store.append("t", [Record(b"a", b"1"), Record(b"b", b"1")])
    cursor = store.open_cursor("t", "slow", read_compacted=True)
    store.open_cursor("t", "raw-reader", read_compacted=False)  # holds nothing
    assert cursor.reads_compacted
    (a_gone, c1) = store.append("t", [Record(b"a", None), Record(b"c", b"1")])
    compact(store, "t")
    assert compacted(store, "t") == [(b"b", b"1"), (b"a", None), (b"c", b"1")]
    view = compacted_view_snapshot(store, "t")
    assert verify_view(LedgerStoreCompactionStorage(store), view).ok
    # a past view shows latest-per-key: the deleted key is absent
    past = as_of_messages(store, "t", a_gone, 1 << 20)
    assert [(m.key, m.value) for m in past] == [(b"b", b"1")]
    at_horizon = as_of_messages(store, "t", c1, 1 << 20)  # the compacted ledger, merged
    assert [(m.key, m.value) for m in at_horizon] == [(b"b", b"1"), (b"c", b"1")]
    store.append("t", [Record(b"d", b"1")])
    compact(store, "t")  # still held: the subscription has not passed it
    assert (b"a", None) in compacted(store, "t")
    cursor.deliver(a_gone)
    store.acknowledge("t", "slow", a_gone, cumulative=True)
    store.append("t", [Record(b"e", b"1")])
    compact(store, "t")
    assert (b"a", None) not in compacted(store, "t")
    assert [k for k, _v in compacted(store, "t")] == [b"b", b"c", b"d", b"e"]


def test_the_read_mode_is_recorded_durably(tmp_path: Path) -> None:
    path = tmp_path / "ledgers"
    s = LedgerStore(path, ServerSettings(topic_defaults={}))
    s.create_topic("t", {})
    s.open_cursor("t", "sub", read_compacted=True)
    s.close()
    s = LedgerStore(path, ServerSettings(topic_defaults={}))
    try:
        cursor = s.topic("t").cursors["sub"]
        assert cursor.reads_compacted
        s.open_cursor("t", "sub", read_compacted=False)
        assert not s.topic("t").cursors["sub"].reads_compacted
    finally:
        s.close()


def test_delete_retention_ms_keeps_young_tombstones(store: LedgerStore) -> None:
    store.create_topic("t", {"delete.retention.ms": "3600000"})
    store.append("t", [Record(b"a", b"1"), Record(b"a", b""), Record(b"b", b"1")])
    compact(store, "t")
    assert compacted(store, "t") == [(b"a", b""), (b"b", b"1")]
    status_run = LedgerStoreCompactionStorage(store).begin("t")
    assert status_run.nothing_to_do
