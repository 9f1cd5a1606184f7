"""A writer's group of LEDGER publishes is one RocksDB write (storage/ledger_group.py): a
request failing half-way leaves nothing of itself in the group's write or in the topic's
ids, and a write the disk refuses fails every request of the group, leaves nothing
visible, and stops each producer's stream at its failure."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from compactlog.errors import DiskFull, RecordTooLarge
from compactlog.storage import batch as codec
from compactlog.storage.config import ServerSettings
from compactlog.storage.ledger_append import PendingAppend
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.types import MessageId, Record
from tests.storage.test_ledger_store import values


def request(*values: bytes) -> bytes:
    return codec.records_to_request([Record(b"k%d" % i, v) for i, v in enumerate(values)])


def test_a_request_failing_past_a_ledger_roll_leaves_nothing_in_its_group(
    open_store: Callable[..., LedgerStore],
) -> None:
    """The bad request's first run (ending ledger 1) is built before its too-large record
    is seen in ledger 2: the requests around it still get contiguous ids in ledger 1."""
    store = open_store()
    store.create_topic("t", {"ledger.max.entries": "3", "max.message.bytes": "100"})
    bad = request(b"b0", b"b1", b"x" * 200)  # b0, b1 fill ledger 1, then roll
    group = [(request(b"a"), None), (bad, None), (request(b"c"), None)]
    results = store.append_requests_start("t", group, chains=[7, 8, 7])
    assert isinstance(results[1], RecordTooLarge)
    ids = [r.wait() for r in results if isinstance(r, PendingAppend)]
    assert ids == [[MessageId(1, 0)], [MessageId(1, 1)]]
    expected = [(MessageId(1, 0), b"a"), (MessageId(1, 1), b"c")]
    assert values(store, "t") == expected
    assert store.append("t", [Record(b"k", b"d")]) == [MessageId(1, 2)]  # no gap
    store = open_store()  # what was written is what the memory said
    assert values(store, "t") == [*expected, (MessageId(1, 2), b"d")]


def test_a_refused_group_write_fails_every_request_and_keeps_none(small_disk) -> None:  # type: ignore[no-untyped-def]
    disk = small_disk(64 << 20)
    store = LedgerStore(disk.path / "ledgers", ServerSettings(topic_defaults={}))
    try:
        store.create_topic("t", {})
        assert store.append("t", [Record(b"k", b"first")]) == [MessageId(1, 0)]
        big = b"v" * 200_000
        group = [(request(big, big, big), None), (request(big), None), (request(big), None)]
        disk.fill(leave=0)
        results = store.append_requests_start("t", group, chains=[1, 2, 1])
        assert all(isinstance(r, DiskFull) for r in results), results
        assert values(store, "t") == [(MessageId(1, 0), b"first")]
        assert store.topic("t").stats()[0] == 1  # the memory forgot the group too
        disk.free()
        store.close()
        store = LedgerStore(disk.path / "ledgers", ServerSettings(topic_defaults={}))
        assert values(store, "t") == [(MessageId(1, 0), b"first")]
    finally:
        store.close()


@pytest.mark.parametrize("durability", ["fsync", "wal"])
def test_a_group_shares_one_ticket_and_answers_in_order(
    open_store: Callable[..., LedgerStore], durability: str
) -> None:
    store = open_store(durability)
    store.create_topic("t", {"ledger.max.entries": "4"})
    group = [(request(*[b"%d.%d" % (r, i) for i in range(3)]), None) for r in range(4)]
    results = store.append_requests_start("t", group)
    pending = [r for r in results if isinstance(r, PendingAppend)]
    assert len(pending) == 4 and len({p.ticket for p in pending}) == 1
    ids = [i for p in pending for i in p.wait()]
    assert ids == [MessageId(1 + n // 4, n % 4) for n in range(12)]
    assert [v for _id, v in values(store, "t")] == [
        b"%d.%d" % (r, i) for r in range(4) for i in range(3)
    ]
