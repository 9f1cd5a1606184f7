"""LedgerStore on a real RocksDB in tmp_path."""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from compactlog.errors import (
    CorruptData,
    RecordTooLarge,
    StorageError,
    StoreLocked,
    SubscriptionNotFound,
    TopicExists,
    TopicNotFound,
)
from compactlog.storage import batch as codec
from compactlog.storage import keys
from compactlog.storage.config import ServerSettings
from compactlog.storage.cursor import Cursor
from compactlog.storage.ledger_append import compacted_batch
from compactlog.storage.ledger_store import LedgerStore
from compactlog.storage.rocks_secondary import SstWriter
from compactlog.storage.types import MessageId, Record, StoredMessage
from compactlog.storage.views import view_messages
from tests.storage.conftest import Clock

FIRST = MessageId(0, 0)
LAST = MessageId(2**63, 0)


def recs(*pairs: tuple[bytes | None, bytes | None]) -> list[Record]:
    return [Record(k, v) for k, v in pairs]


def messages(store: LedgerStore, topic: str) -> list[StoredMessage]:
    return list(view_messages(store, topic, FIRST, LAST, compacted=False))


def values(store: LedgerStore, topic: str) -> list[tuple[MessageId, bytes | None]]:
    return [(m.id, m.value) for m in messages(store, topic)]


def test_ledger_ids_start_at_one_and_roll_over_at_max_entries(
    open_store: Callable[..., LedgerStore],
) -> None:
    store = open_store()
    store.create_topic("t", {"ledger.max.entries": "2"})
    ids = store.append("t", recs(*[(b"k", b"%d" % i) for i in range(5)]))
    assert ids == [
        MessageId(1, 0),
        MessageId(1, 1),
        MessageId(2, 0),
        MessageId(2, 1),
        MessageId(3, 0),
    ]
    assert [v for _, v in values(store, "t")] == [b"0", b"1", b"2", b"3", b"4"]


def test_rolls_over_at_max_bytes(open_store: Callable[..., LedgerStore]) -> None:
    store = open_store()
    store.create_topic("t", {"ledger.max.bytes": "60"})
    ids = store.append("t", recs(*[(b"k", b"x" * 30) for _ in range(3)]))
    # each stored message is over 30 bytes (id and times included) and under 60: the
    # ledger passes the limit by one entry, then rolls
    assert [i.ledger_id for i in ids] == [1, 1, 2]


def test_reopen_rolls_over_and_keeps_ids(open_store: Callable[..., LedgerStore]) -> None:
    store = open_store()
    store.create_topic("t", {})
    first = store.append("t", recs((b"a", b"1"), (b"b", b"2")))
    store = open_store()
    assert [i for i, _ in values(store, "t")] == first
    assert store.topic("t").lac == first[-1]
    nxt = store.append("t", recs((b"c", b"3")))
    assert nxt == [MessageId(2, 0)]


def test_ledger_ids_are_never_reused(open_store: Callable[..., LedgerStore]) -> None:
    store = open_store()
    store.create_topic("a", {})
    store.append("a", recs((b"k", b"v")))
    store.delete_topic("a")
    store = open_store()
    store.create_topic("a", {})
    assert store.append("a", recs((b"k", b"v"))) == [MessageId(2, 0)]


def test_batch_over_max_message_bytes_stores_nothing(
    open_store: Callable[..., LedgerStore],
) -> None:
    store = open_store()
    store.create_topic("t", {"max.message.bytes": "100"})
    store.append("t", recs((b"k", b"ok")))
    with pytest.raises(RecordTooLarge, match=r"max\.message\.bytes=100"):
        store.append("t", recs((b"k", b"fine"), (b"k", b"x" * 200)))
    assert [v for _, v in values(store, "t")] == [b"ok"]
    store = open_store()
    assert [v for _, v in values(store, "t")] == [b"ok"]


def test_create_duplicate_and_unknown_topic(open_store: Callable[..., LedgerStore]) -> None:
    store = open_store()
    store.create_topic("t", {})
    with pytest.raises(TopicExists):
        store.create_topic("t", {})
    with pytest.raises(TopicNotFound):
        store.append("nope", recs((b"k", b"v")))


def test_keyless_null_and_properties_round_trip(open_store: Callable[..., LedgerStore]) -> None:
    store = open_store()
    store.create_topic("t", {})
    store.append("t", [Record(None, b"v", {"a": "1"}, 42), Record(b"k", None), Record(b"k", b"")])
    got = messages(store, "t")
    assert (got[0].key, got[0].value, dict(got[0].properties), got[0].event_time_ms) == (
        None,
        b"v",
        {"a": "1"},
        42,
    )
    assert (got[1].key, got[1].value) == (b"k", None)
    assert (got[2].key, got[2].value) == (b"k", b"")
    assert got[1].event_time_ms == got[1].publish_time_ms  # 0 means "use publish time"


def test_keys_scan_starts_inside_a_batch(open_store: Callable[..., LedgerStore]) -> None:
    store = open_store()
    store.create_topic("t", {"ledger.max.entries": "4"})
    store.append("t", recs(*[(b"k%d" % i, b"v") for i in range(6)]))
    assert [(pos, key) for pos, _f, _s, key in store.keys_of(1, 2, 3, reverse=False)] == [
        (2, b"k2"),
        (3, b"k3"),
    ]
    assert [key for *_, key in store.keys_of(1, 1, 3, reverse=True)] == [b"k3", b"k2", b"k1"]


def test_a_flipped_byte_in_a_stored_batch_is_corrupt_data(
    open_store: Callable[..., LedgerStore],
) -> None:
    """Every reader checks the batch CRC: a flipped byte is never served as a message."""
    store = open_store()
    store.create_topic("t", {})
    store.append("t", recs((b"a", b"1"), (b"b", b"2")))
    key, data = next(iter(store.db.scan(*keys.ledger_range(1))))
    for pos in range(len(data)):
        bad = bytearray(data)
        bad[pos] ^= 0x40
        store.db.put(key, bytes(bad))
        with pytest.raises(CorruptData):
            messages(store, "t")
        with pytest.raises(CorruptData):
            list(store.keys_of(1, 0, 1, reverse=False))
    store.db.put(key, data)
    assert [v for _, v in values(store, "t")] == [b"1", b"2"]


def test_find_by_timestamp(open_store: Callable[..., LedgerStore], clock: Clock) -> None:
    store = open_store()
    store.create_topic("t", {"ledger.max.entries": "2"})
    ids = []
    for i in range(5):
        clock.now = 1000.0 + i
        ids += store.append("t", recs((b"k", b"%d" % i)))
    assert store.find_by_timestamp("t", 1_002_000) == ids[2]
    assert store.find_by_timestamp("t", 1_002_001) == ids[3]
    assert store.find_by_timestamp("t", 0) == ids[0]
    assert store.find_by_timestamp("t", 2_000_000) is None


def acked_ids(cursor: Cursor) -> set[MessageId]:
    """Every id of the cursor's individually acked ranges."""
    return {
        MessageId(start.ledger_id, entry)
        for start, end in cursor.acked
        for entry in range(start.entry_id, end.entry_id + 1)
    }


def test_cursor_individual_and_cumulative_acks_survive_reopen(
    open_store: Callable[..., LedgerStore],
) -> None:
    store = open_store()
    store.create_topic("t", {"ledger.max.entries": "2"})
    ids = store.append("t", recs(*[(b"k", b"%d" % i) for i in range(5)]))
    store.open_cursor("t", "sub").deliver(ids[-1])
    store.acknowledge("t", "sub", ids[1], cumulative=False)
    store.acknowledge("t", "sub", ids[2], cumulative=False)
    cur = store.topic("t").cursors["sub"]
    assert cur.mark_delete is None and acked_ids(cur) == {ids[1], ids[2]}
    store.acknowledge("t", "sub", ids[0], cumulative=False)
    # mark-delete crosses the ledger boundary over the run of acked ids
    assert store.topic("t").cursors["sub"].mark_delete == ids[2]
    store.acknowledge("t", "sub", ids[4], cumulative=False)
    store = open_store()
    cur = store.topic("t").cursors["sub"]
    assert cur.mark_delete == ids[2] and acked_ids(cur) == {ids[4]}
    assert cur.delivered == ids[-1]  # persisted: acks of what went out before still count
    store.acknowledge("t", "sub", ids[3], cumulative=True)
    assert store.topic("t").cursors["sub"].mark_delete == ids[4]
    assert acked_ids(store.topic("t").cursors["sub"]) == set()
    with pytest.raises(SubscriptionNotFound):
        store.acknowledge("t", "other", ids[0], cumulative=True)


def test_cursor_properties_commit_is_one_write_with_position(
    open_store: Callable[..., LedgerStore],
) -> None:
    store = open_store()
    store.create_topic("t", {})
    ids = store.append("t", recs((b"a", b"1"), (b"b", b"2")))
    store.commit_cursor("t", "__compaction", ids[1], {"CompactedTopicLedger": "7"})
    store = open_store()
    cur = store.topic("t").cursors["__compaction"]
    assert (cur.mark_delete, cur.properties) == (ids[1], {"CompactedTopicLedger": "7"})


def test_unreferenced_ledgers_are_collected_at_start(
    open_store: Callable[..., LedgerStore],
) -> None:
    store = open_store()
    store.create_topic("t", {})
    store.append("t", recs((b"a", b"1")))
    orphan = store.create_ledger("t")
    store.append_entries(orphan.ledger_id, [(0, b"\x0a\x02\x08\x01\x12\x01a", b"a", 1)])
    store = open_store()
    assert store.ledger(orphan.ledger_id) is None
    assert list(store.db.scan(*keys.ledger_range(orphan.ledger_id))) == []


def test_retention_deletes_consumed_old_ledgers_never_the_current(
    open_store: Callable[..., LedgerStore], clock: Clock
) -> None:
    store = open_store()
    store.create_topic("t", {"ledger.max.entries": "2", "retention.ms": "1000"})
    ids = store.append("t", recs(*[(b"k", b"%d" % i) for i in range(6)]))  # ledgers 1, 2, 3
    store.open_cursor("t", "slow").deliver(ids[-1])
    clock.now += 10
    assert store.enforce_retention("t") == []  # the cursor has consumed nothing
    store.acknowledge("t", "slow", ids[3], cumulative=True)  # passed ledgers 1 and 2
    assert store.enforce_retention("t") == [1, 2]
    assert [i for i, _ in values(store, "t")] == ids[4:]
    store.acknowledge("t", "slow", ids[5], cumulative=True)
    assert store.enforce_retention("t") == []  # ledger 3 is the current one
    store = open_store()
    assert [led.ledger_id for led in store.topic("t").ledgers] == [3]


def test_retention_by_bytes_oldest_first(open_store: Callable[..., LedgerStore]) -> None:
    store = open_store()
    store.create_topic("t", {"ledger.max.entries": "1", "retention.bytes": "1"})
    store.append("t", recs(*[(b"k", b"%d" % i) for i in range(4)]))
    assert store.enforce_retention("t") == [1, 2, 3]


def test_retention_unlimited_by_default(
    open_store: Callable[..., LedgerStore], clock: Clock
) -> None:
    store = open_store()
    store.create_topic("t", {"ledger.max.entries": "1"})
    store.append("t", recs(*[(b"k", b"%d" % i) for i in range(4)]))
    clock.now += 10**6
    assert store.enforce_retention("t") == []


def test_delete_topic_removes_every_key(open_store: Callable[..., LedgerStore]) -> None:
    store = open_store()
    store.create_topic("t", {"ledger.max.entries": "2"})
    ids = store.append("t", recs(*[(b"k", b"%d" % i) for i in range(3)]))
    store.open_cursor("t", "s")
    store.commit_cursor(
        "t",
        "__compaction",
        ids[0],
        {"CompactedTopicLedger": str(store.create_ledger("t").ledger_id)},
    )
    store.delete_topic("t")
    left = [k for k, _ in store.db.scan(b"A", b"\xff")]
    assert left == []


def test_second_opener_is_refused(open_store: Callable[..., LedgerStore], tmp_path: Path) -> None:
    open_store()
    with pytest.raises(StoreLocked):
        LedgerStore(tmp_path / "db", ServerSettings(topic_defaults={}))


def test_group_commit_shares_syncs_between_concurrent_publishers(
    open_store: Callable[..., LedgerStore],
) -> None:
    store = open_store()
    for i in range(8):
        store.create_topic(f"t{i}", {})
    before = store.group_commit.syncs

    def publish(i: int) -> None:
        for _ in range(25):
            store.append(f"t{i}", recs((b"k", b"v")))

    threads = [threading.Thread(target=publish, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    syncs = store.group_commit.syncs - before
    assert 0 < syncs < 200
    assert all(store.topic(f"t{i}").stats()[0] == 25 for i in range(8))


def test_append_requests_share_one_sync_and_a_failed_request_fails_alone(
    open_store: Callable[..., LedgerStore],
) -> None:
    """A writer's group: one ticket, so one fsync, for every request stored; the request
    over ``max.message.bytes`` gets its own error and leaves no id or byte behind."""
    store = open_store()
    store.create_topic("t", {"max.message.bytes": "100"})
    good = [codec.records_to_request(recs((b"k%d" % i, b"v%d" % i))) for i in range(3)]
    too_big = codec.records_to_request(recs((b"k", b"x" * 200)))
    before = store.group_commit.syncs
    results = store.append_requests_start("t", [(good[0], None), (too_big, None),
                                                (good[1], None), (good[2], None)])  # fmt: skip
    assert isinstance(results[1], RecordTooLarge)
    pending = [r for i, r in enumerate(results) if i != 1]
    assert all(not isinstance(p, Exception) for p in pending)
    tickets = {p.ticket for p in pending if not isinstance(p, Exception)}
    assert len(tickets) == 1 and 0 not in tickets
    ids = [p.wait() for p in pending if not isinstance(p, Exception)]
    assert ids == [[MessageId(1, 0)], [MessageId(1, 1)], [MessageId(1, 2)]]
    assert store.group_commit.syncs - before == 1
    assert values(store, "t") == [(MessageId(1, i), b"v%d" % i) for i in range(3)]


def test_wal_durability_acknowledges_without_fsync(open_store: Callable[..., LedgerStore]) -> None:
    store = open_store("wal")
    store.create_topic("t", {})
    before = store.group_commit.syncs
    store.append("t", recs((b"k", b"v")))
    assert store.group_commit.syncs == before
    assert store.topic("t").lac == MessageId(1, 0)


@settings(max_examples=25, deadline=None)
@given(
    max_entries=st.integers(min_value=1, max_value=5),
    batches=st.lists(st.integers(min_value=1, max_value=7), min_size=1, max_size=8),
    reopen_after=st.sets(st.integers(min_value=0, max_value=7)),
)
def test_ids_increase_and_scans_return_every_acknowledged_message(
    tmp_path_factory: pytest.TempPathFactory,
    max_entries: int,
    batches: list[int],
    reopen_after: set[int],
) -> None:
    path = tmp_path_factory.mktemp("prop") / "db"
    settings_ = ServerSettings(publish_durability="wal", topic_defaults={})
    store = LedgerStore(path, settings_)
    try:
        store.create_topic("t", {"ledger.max.entries": str(max_entries)})
        acked: list[MessageId] = []
        for n, size in enumerate(batches):
            acked += store.append(
                "t", recs(*[(b"k", b"%d" % len(acked + [0] * i)) for i in range(size)])
            )
            if n in reopen_after:
                store.close()
                store = LedgerStore(path, settings_)
        assert acked == sorted(acked) and len(set(acked)) == len(acked)
        assert all(i.entry_id < max_entries for i in acked)
        assert [i for i, _ in values(store, "t")] == acked
    finally:
        store.close()


def test_failed_write_leaves_memory_and_disk_as_before(
    open_store: Callable[..., LedgerStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    from compactlog.errors import StorageError

    store = open_store()
    store.create_topic("t", {"ledger.max.entries": "2"})
    store.append("t", recs((b"a", b"1")))
    real_write = store.db.write

    def failing_write(batch: object, sync: bool = False) -> None:
        raise StorageError("RocksDB: IO error: No space left on device")

    monkeypatch.setattr(store.db, "write", failing_write)
    with pytest.raises(StorageError):
        store.append("t", recs((b"b", b"2"), (b"c", b"3"), (b"d", b"4")))  # would roll over
    monkeypatch.setattr(store.db, "write", real_write)
    assert store.append("t", recs((b"e", b"5"))) == [MessageId(1, 1)]
    assert [v for _, v in values(store, "t")] == [b"1", b"5"]
    store = open_store()
    assert [v for _, v in values(store, "t")] == [b"1", b"5"]


def test_a_compacted_ledger_is_filled_from_an_sst_file_and_checked(
    open_store: Callable[..., LedgerStore], tmp_path: Path
) -> None:
    store = open_store()
    store.create_topic("t", {})
    ids = store.append("t", recs((b"a", b"1"), (b"b", b"2"), (b"a", b"3")))
    raw = ids[0].ledger_id
    bodies = [
        codec.record_body(payload, s, e)
        for _at, data, header in store.batches(raw)
        for payload in [codec.payload_of(data, header)]
        for *_ids, s, e in codec.walk(payload, "test")
    ]
    winners = bodies[1:]  # b=2, a=3, with their original ids
    lid = store.create_ledger("t").ledger_id
    sst = tmp_path / "ledger.sst"
    writer = SstWriter(sst)
    data = compacted_batch(lid, winners)
    writer.put(keys.entry_key(lid, 0), data)
    writer.finish()
    store.ingest_ledger(lid, sst, 2, len(data))
    meta = store.ledger(lid)
    assert meta is not None and meta.sealed and (meta.entries, meta.bytes) == (2, len(data))
    found = store.batch_at(lid, 1)
    assert found is not None and found[2].first_id == ids[1] and found[2].last_id == ids[2]

    short = store.create_ledger("t").ledger_id
    writer = SstWriter(sst)
    writer.put(keys.entry_key(short, 0), compacted_batch(short, winners))
    writer.finish()
    with pytest.raises(StorageError, match="lacks its batches"):
        store.ingest_ledger(short, sst, 5, 1)  # the file holds 2 entries, not 5
    with pytest.raises(StorageError, match="not an empty compacted ledger"):
        store.ingest_ledger(lid, None, 0, 0)  # already sealed
